// Loads libcuda with dlopen and resolves the entry points of driver.h (the `_v2` symbols where the
// driver's header maps a name to one).
#include "runtime/cuda/driver.h"

#include <dlfcn.h>

#include <mutex>
#include <sstream>

#include "tessera/error.h"

namespace tessera::runtime::cuda {
namespace {

struct Loaded {
  Driver driver{};
  bool ok = false;
  std::string why;
};

template <class F>
bool resolve(void* lib, const char* name, F& out, std::string& why) {
  out = reinterpret_cast<F>(dlsym(lib, name));
  if (!out && why.empty()) why = std::string("the driver has no ") + name;
  return out != nullptr;
}

Loaded load() {
  Loaded l;
  void* lib = nullptr;
  for (const char* name : {"libcuda.so.1", "libcuda.so"}) {
    lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      l.driver.path = name;
      break;
    }
  }
  if (!lib) {
    l.why = "no CUDA driver (libcuda.so.1 not found)";
    return l;
  }
  Driver& d = l.driver;
  std::string& w = l.why;
  bool ok = true;
  ok &= resolve(lib, "cuInit", d.cuInit, w);
  ok &= resolve(lib, "cuDriverGetVersion", d.cuDriverGetVersion, w);
  ok &= resolve(lib, "cuGetErrorName", d.cuGetErrorName, w);
  ok &= resolve(lib, "cuGetErrorString", d.cuGetErrorString, w);
  ok &= resolve(lib, "cuDeviceGetCount", d.cuDeviceGetCount, w);
  ok &= resolve(lib, "cuDeviceGet", d.cuDeviceGet, w);
  ok &= resolve(lib, "cuDeviceGetName", d.cuDeviceGetName, w);
  ok &= resolve(lib, "cuDeviceGetAttribute", d.cuDeviceGetAttribute, w);
  ok &= resolve(lib, "cuDeviceTotalMem_v2", d.cuDeviceTotalMem, w);
  ok &= resolve(lib, "cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain, w);
  ok &= resolve(lib, "cuCtxSetCurrent", d.cuCtxSetCurrent, w);
  ok &= resolve(lib, "cuCtxGetCurrent", d.cuCtxGetCurrent, w);
  ok &= resolve(lib, "cuCtxSynchronize", d.cuCtxSynchronize, w);
  ok &= resolve(lib, "cuMemGetInfo_v2", d.cuMemGetInfo, w);
  ok &= resolve(lib, "cuMemAlloc_v2", d.cuMemAlloc, w);
  ok &= resolve(lib, "cuMemFree_v2", d.cuMemFree, w);
  ok &= resolve(lib, "cuMemHostAlloc", d.cuMemHostAlloc, w);
  ok &= resolve(lib, "cuMemFreeHost", d.cuMemFreeHost, w);
  ok &= resolve(lib, "cuMemcpyHtoDAsync_v2", d.cuMemcpyHtoDAsync, w);
  ok &= resolve(lib, "cuMemcpyDtoHAsync_v2", d.cuMemcpyDtoHAsync, w);
  ok &= resolve(lib, "cuMemcpyDtoDAsync_v2", d.cuMemcpyDtoDAsync, w);
  ok &= resolve(lib, "cuMemsetD8Async", d.cuMemsetD8Async, w);
  ok &= resolve(lib, "cuMemsetD16Async", d.cuMemsetD16Async, w);
  ok &= resolve(lib, "cuMemsetD32Async", d.cuMemsetD32Async, w);
  ok &= resolve(lib, "cuStreamCreate", d.cuStreamCreate, w);
  ok &= resolve(lib, "cuStreamDestroy_v2", d.cuStreamDestroy, w);
  ok &= resolve(lib, "cuStreamSynchronize", d.cuStreamSynchronize, w);
  ok &= resolve(lib, "cuStreamQuery", d.cuStreamQuery, w);
  ok &= resolve(lib, "cuStreamWaitEvent", d.cuStreamWaitEvent, w);
  ok &= resolve(lib, "cuEventCreate", d.cuEventCreate, w);
  ok &= resolve(lib, "cuEventDestroy_v2", d.cuEventDestroy, w);
  ok &= resolve(lib, "cuEventRecord", d.cuEventRecord, w);
  ok &= resolve(lib, "cuEventSynchronize", d.cuEventSynchronize, w);
  ok &= resolve(lib, "cuEventQuery", d.cuEventQuery, w);
  ok &= resolve(lib, "cuEventElapsedTime", d.cuEventElapsedTime, w);
  ok &= resolve(lib, "cuModuleLoadData", d.cuModuleLoadData, w);
  ok &= resolve(lib, "cuModuleUnload", d.cuModuleUnload, w);
  ok &= resolve(lib, "cuModuleGetFunction", d.cuModuleGetFunction, w);
  ok &= resolve(lib, "cuFuncGetAttribute", d.cuFuncGetAttribute, w);
  ok &= resolve(lib, "cuFuncSetAttribute", d.cuFuncSetAttribute, w);
  ok &= resolve(lib, "cuLaunchKernel", d.cuLaunchKernel, w);
  if (!ok) return l;
  if (const CUresult r = d.cuInit(0); r != kSuccess) {
    const char* name = nullptr;
    d.cuGetErrorName(r, &name);
    l.why = std::string("cuInit failed: ") + (name ? name : std::to_string(r));
    return l;
  }
  d.cuDriverGetVersion(&d.version);
  l.ok = true;
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();  // never unloaded: kernels and memory outlive static destructors
  return l;
}

}  // namespace

const Driver* driver(std::string* why) {
  const Loaded& l = loaded();
  if (!l.ok && why) *why = l.why;
  return l.ok ? &l.driver : nullptr;
}

const Driver& require_driver(const char* what) {
  std::string why;
  const Driver* d = driver(&why);
  TS_CHECK(d != nullptr, RuntimeError) << "[" << what << "] needs CUDA, but " << why;
  return *d;
}

std::string error_text(CUresult r) {
  const Driver* d = driver();
  const char* name = nullptr;
  const char* text = nullptr;
  if (d) {
    d->cuGetErrorName(r, &name);
    d->cuGetErrorString(r, &text);
  }
  std::ostringstream os;
  os << (name ? name : "CUDA error " + std::to_string(r));
  if (text) os << ": " << text;
  return os.str();
}

void check(CUresult r, const char* call, const std::string& what) {
  if (r == kSuccess) return;
  TS_ERROR(RuntimeError) << "[" << what << "] " << call << " failed: " << error_text(r);
}

}  // namespace tessera::runtime::cuda
