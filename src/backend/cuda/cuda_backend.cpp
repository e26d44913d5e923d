// The CUDA backend: the stage-1 emitter (backend/cuda/emit.h), NVRTC straight to a cubin for the
// device's architecture with only our own headers, cubins in the disk cache, and the launch glue
// (a block of num_warps * 32 threads per program, dynamic shared memory, the current stream).
#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <thread>

#include "backend/backend.h"
#include "backend/cpu/embedded_headers.h"
#include "backend/cuda/emit.h"
#include "core/files.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/module.h"
#include "runtime/cuda/nvrtc.h"
#include "runtime/disk_cache.h"
#include "tessera/detail/hash.h"
#include "tessera/env.h"
#include "tessera/error.h"

namespace tessera::backend::cuda {
namespace {

namespace rc = runtime::cuda;

const runtime::disk::Store& store() {
  static const runtime::disk::Store s("cuda");
  return s;
}

// The tile runtime headers, given to NVRTC in memory.
const std::vector<rc::Header>& headers() {
  static const std::vector<rc::Header> h = [] {
    std::vector<rc::Header> out;
    for (int i = 0; i < cpu::kNumTrtHeaders; ++i)
      out.emplace_back(cpu::kTrtHeaders[i].path, cpu::kTrtHeaders[i].text);
    return out;
  }();
  return h;
}

std::string headers_digest() {
  static const std::string d = [] {
    Sha256 h;
    for (const auto& [path, text] : headers()) h.field(path).field(text);
    return h.hex();
  }();
  return d;
}

const std::vector<std::string>& nvrtc_options() {
  // No contraction of a * b + c into one multiply-add: the CPU's code does not contract either,
  // so elementwise results agree bit for bit (DESIGN D4).
  static const std::vector<std::string> o = {"-lineinfo", "--fmad=false"};
  return o;
}

// A built kernel: its module on the device and what a launch needs.
struct Loaded {
  std::unique_ptr<rc::Module> module;
  rc::CUfunction fn = nullptr;
  int threads = 128;
  int64_t shared_bytes = 0;
};

std::string nvrtc_version() {
  const rc::NvrtcInfo* n = rc::nvrtc();
  return n ? std::to_string(n->major) + "." + std::to_string(n->minor) : std::string("none");
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device) : device_(device) {
    const rc::DeviceInfo& info = rc::device_info(device);
    arch_ = info.major * 10 + info.minor;
    max_shared_ = info.max_shared_optin > 0 ? info.max_shared_optin : 48 * 1024;
    Sha256 h;
    h.field(nvrtc_version()).field(headers_digest());
    for (const auto& o : nvrtc_options()) h.field(o);
    key_ = "cuda:sm_" + std::to_string(arch_) + ":" + h.hex().substr(0, 16);
  }

  const char* name() const override { return "cuda"; }
  const std::string& target_key() const override { return key_; }

  void generate(std::shared_ptr<const ir::Function> f, bool checked, Kernel& out) const override {
    if (checked) {
      TS_ERROR(NotImplementedError)
          << "[kernel " << f->name
          << "] TESSERA_DEBUG's checks are not compiled for CUDA yet: run the kernel on CPU "
             "tensors (or with TESSERA_INTERPRET=1) to check it";
    }
    const Emitted e = emit(*f, max_shared_);
    if (knobs().dump_enabled("src"))
      dump("src", f->name, e.source, "// ---- CUDA of kernel " + f->name + " ----\n" + e.source,
           "cu");
    out.name = f->name;
    out.function = std::move(f);
    out.checked = false;
    out.source = e.source;
    out.launch_threads = e.threads;
    out.shared_bytes = e.shared_bytes;
    Sha256 h;
    h.field(e.source).field(key_);
    out.disk_key = h.hex();
    out.code_key = out.disk_key;
  }

  void build(const std::vector<Kernel*>& kernels) const override {
    std::vector<Kernel*> todo;
    for (Kernel* k : kernels) {
      if (!k->built) todo.push_back(k);
    }
    if (todo.empty()) return;
    // Cubins from the disk cache, or from NVRTC: the missing ones compiled in parallel.
    std::vector<std::string> cubins(todo.size());
    std::vector<size_t> missing;
    for (size_t i = 0; i < todo.size(); ++i) {
      std::string why;
      if (auto info = store().open(todo[i]->disk_key, &why)) {
        cubins[i] = files::read_file(store().dir_of(todo[i]->disk_key) + "/kernel.cubin");
        todo[i]->from_disk = true;
      } else {
        missing.push_back(i);
      }
    }
    std::vector<std::exception_ptr> errors(todo.size());
    std::atomic<size_t> next{0};
    auto work = [&] {
      for (size_t m; (m = next.fetch_add(1)) < missing.size();) {
        const size_t i = missing[m];
        try {
          const rc::CompiledCubin c =
              rc::compile_cubin(todo[i]->source, todo[i]->name, arch_, headers(), nvrtc_options());
          cubins[i] = c.cubin;
          todo[i]->compile_ms = c.ms;
          save(*todo[i], c.cubin);
        } catch (...) {
          errors[i] = std::current_exception();
        }
      }
    };
    const size_t workers = std::min<size_t>(
        missing.size(), std::max<unsigned>(1, std::thread::hardware_concurrency()));
    std::vector<std::thread> threads;
    for (size_t t = 1; t < workers; ++t) threads.emplace_back(work);
    if (workers) work();
    for (auto& t : threads) t.join();
    for (size_t i = 0; i < todo.size(); ++i) {
      if (errors[i]) std::rethrow_exception(errors[i]);
    }
    for (size_t i = 0; i < todo.size(); ++i) load(*todo[i], cubins[i]);
  }

  void launch(const Kernel& k, const GridSize& g, ArrayRef<Arg> args) const override {
    const auto* l = static_cast<const Loaded*>(k.binary.get());
    TS_INTERNAL_ASSERT(l && l->fn) << "launch of an unbuilt CUDA kernel";
    if (g.total == 0) return;
    trt::Grid grid{g.grid.x, g.grid.y, g.grid.z};
    trt::Arg slots[64];
    pack_slots(args, slots);
    void* params[2] = {&grid, slots};
    const unsigned dims[3] = {static_cast<unsigned>(g.grid.x), static_cast<unsigned>(g.grid.y),
                              static_cast<unsigned>(g.grid.z)};
    const unsigned block[3] = {static_cast<unsigned>(l->threads), 1, 1};
    rc::launch(l->fn, device_, dims, block, static_cast<unsigned>(l->shared_bytes), params,
               "kernel " + k.name);
  }

 private:
  void save(const Kernel& k, const std::string& cubin) const {
    const std::string staged = store().stage();
    runtime::disk::write_atomic(staged + "/kernel.cubin", cubin, "a CUDA kernel's cubin");
    runtime::disk::Info info;
    info.values["kernel"] = k.name;
    info.values["arch"] = "sm_" + std::to_string(arch_);
    info.values["threads"] = std::to_string(k.launch_threads);
    info.values["shared_bytes"] = std::to_string(k.shared_bytes);
    runtime::disk::Store::record_file(info, staged, "kernel.cubin");
    store().publish(staged, k.disk_key, info);
  }

  void load(Kernel& k, const std::string& cubin) const {
    auto l = std::make_shared<Loaded>();
    l->module = std::make_unique<rc::Module>(cubin, device_, "kernel " + k.name);
    l->fn = l->module->function("tessera_kernel");
    l->threads = k.launch_threads;
    l->shared_bytes = k.shared_bytes;
    if (l->shared_bytes > 48 * 1024) {
      rc::set_device(device_);
      rc::check(
          rc::require_driver("a CUDA kernel launch")
              .cuFuncSetAttribute(l->fn, static_cast<int>(rc::FuncAttr::MaxDynamicSharedSizeBytes),
                                  static_cast<int>(l->shared_bytes)),
          "cuFuncSetAttribute", "kernel " + k.name);
    }
    k.binary = std::move(l);
    k.built = true;
  }

  int device_ = 0;
  int arch_ = 90;
  int64_t max_shared_ = 48 * 1024;
  std::string key_;
};

}  // namespace

const Backend& backend_for(int device) {
  static std::mutex m;
  static std::vector<std::unique_ptr<CudaBackend>>* all =
      new std::vector<std::unique_ptr<CudaBackend>>();
  std::lock_guard<std::mutex> g(m);
  if (all->size() <= static_cast<size_t>(device)) all->resize(static_cast<size_t>(device) + 1);
  auto& b = (*all)[static_cast<size_t>(device)];
  if (!b) b = std::make_unique<CudaBackend>(device);
  return *b;
}

std::string compile_for_arch(const std::string& source, const std::string& name, int arch) {
  return rc::compile_cubin(source, name, arch, headers(), nvrtc_options()).cubin;
}

}  // namespace tessera::backend::cuda
