// cuModuleLoadData, cuModuleGetFunction and cuLaunchKernel with errors that name the kernel.
#include "runtime/cuda/module.h"

#include "tessera/error.h"

namespace tessera::runtime::cuda {

Module::Module(const std::string& cubin, int device, const std::string& what)
    : device_(device), what_(what) {
  set_device(device);
  check(require_driver(what.c_str()).cuModuleLoadData(&module_, cubin.data()), "cuModuleLoadData",
        what);
}

Module::~Module() {
  // Never throws: modules held by static caches are unloaded at process exit, when the driver
  // may already be shut down (CUDA_ERROR_DEINITIALIZED); then there is nothing to release.
  if (const Driver* d = driver(); d && module_) {
    try {
      set_device(device_);
      d->cuModuleUnload(module_);
    } catch (...) {
    }
  }
}

CUfunction Module::function(const std::string& name) const {
  CUfunction f = nullptr;
  check(require_driver(what_.c_str()).cuModuleGetFunction(&f, module_, name.c_str()),
        "cuModuleGetFunction", what_ + ": kernel '" + name + "'");
  return f;
}

KernelResources Module::resources(CUfunction f) const {
  const Driver& d = require_driver(what_.c_str());
  KernelResources r;
  d.cuFuncGetAttribute(&r.registers, static_cast<int>(FuncAttr::NumRegs), f);
  d.cuFuncGetAttribute(&r.local_bytes, static_cast<int>(FuncAttr::LocalSizeBytes), f);
  d.cuFuncGetAttribute(&r.shared_bytes, static_cast<int>(FuncAttr::SharedSizeBytes), f);
  d.cuFuncGetAttribute(&r.max_threads, static_cast<int>(FuncAttr::MaxThreadsPerBlock), f);
  return r;
}

void launch(CUfunction f, int device, const unsigned grid[3], const unsigned block[3],
            unsigned shared_bytes, void** args, const std::string& what) {
  set_device(device);
  const CUstream stream = current_stream(device).handle();
  check(require_driver(what.c_str())
            .cuLaunchKernel(f, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                            shared_bytes, stream, args, nullptr),
        "cuLaunchKernel", what);
  journal_launch(device, stream, what);
}

}  // namespace tessera::runtime::cuda
