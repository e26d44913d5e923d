// The CUDA backend: the stage-1 emitter (backend/cuda/emit.h), NVRTC straight to a cubin for the
// device's architecture with only our own headers, cubins in the disk cache, and the launch glue
// (a block of num_warps * 32 threads per program, dynamic shared memory, the current stream).
#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include <sys/stat.h>

#include "backend/backend.h"
#include "backend/common/link_inputs.h"
#include "backend/cpu/embedded_headers.h"
#include "backend/cuda/emit.h"
#include "core/files.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/jitlink.h"
#include "runtime/cuda/memory.h"
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

// The options of every compile (the backend's key holds them; the one that depends on NVRTC's
// version follows from the library, which the key names).
const std::vector<std::string>& base_options() {
  static const std::vector<std::string> o = {"-lineinfo", "--fmad=false", "-Xptxas=-v"};
  return o;
}

const std::vector<std::string>& nvrtc_options() {
  // No contraction of a * b + c into one multiply-add: the CPU's code does not contract either,
  // so elementwise results agree bit for bit (DESIGN D4).
  // ptxas's report (-v) gives each kernel's registers and spills (TESSERA_DUMP, cache ls);
  // NVRTC's own cache (12.9 on) would skip ptxas and its report on a hit, and tessera's disk cache
  // already keeps every cubin, so it is off.
  static const std::vector<std::string> o = [] {
    std::vector<std::string> v = base_options();
    const rc::NvrtcInfo* n = rc::nvrtc();
    if (n && (n->major > 12 || (n->major == 12 && n->minor >= 9))) v.emplace_back("--no-cache");
    return v;
  }();
  return o;
}

// A kernel's cubin: NVRTC's, or for a kernel calling precompiled extern functions NVRTC's LTO-IR
// linked with their files by nvJitLink (link_inputs.h: the source names them).
rc::CompiledCubin compile_kernel(const std::string& source, const std::string& name, int arch,
                                 std::string arch_suffix = "") {
  if (arch_suffix.empty() && needs_sm90a(source)) arch_suffix = "a";  // (wgmma)
  const std::vector<LinkInput> links = link_inputs(source);
  if (links.empty())
    return rc::compile_cubin(source, name, arch, headers(), nvrtc_options(), arch_suffix);
  std::vector<std::string> files;
  for (const LinkInput& in : links) {
    check_unchanged(in, name);
    files.push_back(in.path);
  }
  const rc::CompiledCubin ir =
      rc::compile_ltoir(source, name, arch, headers(), nvrtc_options(), arch_suffix);
  rc::CompiledCubin linked;
  try {
    linked = rc::link_cubin(ir.cubin, files, name, arch, arch_suffix);
  } catch (const CompileError& e) {
    std::string names;
    for (const std::string& f : files) names += (names.empty() ? "'" : ", '") + f + "'";
    throw CompileError("kernel '" + name + "': linking the extern functions' CUDA objects " +
                           names + " failed: " + e.what(),
                       SourceLoc{});
  }
  linked.ms += ir.ms;
  return linked;
}

std::string jitlink_version() {
  const rc::NvrtcInfo* n = rc::jitlink();
  return n ? std::to_string(n->major) + "." + std::to_string(n->minor) : std::string("none");
}

// A built kernel: its module on the device and what a launch needs.
struct Loaded {
  std::unique_ptr<rc::Module> module;
  rc::CUfunction fn = nullptr;
  int threads = 128;
  int64_t shared_bytes = 0;
  std::string what;  ///< "kernel <name>": errors and the launch journal (made once, at load)
};

std::string resources_of(const rc::PtxasReport& r) {
  return (r.registers >= 0 ? std::to_string(r.registers) : std::string("?")) +
         " registers, spills " + std::to_string(r.spill_stores) + "/" +
         std::to_string(r.spill_loads) + " bytes";
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device) : device_(device) {
    const rc::DeviceInfo& info = rc::device_info(device);
    arch_ = info.major * 10 + info.minor;
    max_shared_ = info.max_shared_optin > 0 ? info.max_shared_optin : 48 * 1024;
    make_key();
  }
  /** Compiles for `sm_<arch>` without a device: builds cubins (and caches them), loads nothing. */
  CudaBackend(int arch, int64_t max_shared) : device_(-1), arch_(arch), max_shared_(max_shared) {
    make_key();
  }

  const char* name() const override { return "cuda"; }
  int arch() const { return arch_; }
  const std::string& target_key() const override { return key_; }

  void generate(std::shared_ptr<const ir::Function> f, bool checked, Kernel& out) const override {
    const Emitted e = emit(*f, max_shared_, checked, arch_);
    if (knobs().dump_enabled("src"))
      dump("src", f->name, e.source, "// ---- CUDA of kernel " + f->name + " ----\n" + e.source,
           "cu");
    out.name = f->name;
    out.function = std::move(f);
    out.checked = checked;
    out.sites = e.sites;
    out.source = e.source;
    out.launch_threads = e.threads;
    out.shared_bytes = e.shared_bytes;
    Sha256 h;
    h.field(e.source).field(key_);
    if (!link_inputs(e.source).empty()) h.field("nvJitLink " + jitlink_version());
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
        read_resources(*info, *todo[i]);
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
          log("cache",
              "NVRTC compiles kernel " + todo[i]->name + " for sm_" + std::to_string(arch_));
          const rc::CompiledCubin c = compile_kernel(todo[i]->source, todo[i]->name, arch_);
          log("cache", "NVRTC compiled kernel " + todo[i]->name + " in " +
                           std::to_string(static_cast<int64_t>(c.ms)) + " ms (" +
                           resources_of(c.resources) + ")");
          cubins[i] = c.cubin;
          todo[i]->compile_ms = c.ms;
          todo[i]->registers = c.resources.registers;
          todo[i]->stack_bytes = c.resources.stack_bytes;
          todo[i]->spill_stores = c.resources.spill_stores;
          todo[i]->spill_loads = c.resources.spill_loads;
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
    if (knobs().dump_enabled("src")) {
      for (const Kernel* k : todo) {
        const std::string text =
            "// ---- CUDA resources of kernel " + k->name + " ----\n" + resources_line(*k) + "\n";
        dump("src", k->name, k->source, text, "res");
      }
    }
    for (size_t i = 0; i < todo.size(); ++i) {
      if (device_ >= 0) {
        load(*todo[i], cubins[i]);
      } else {
        todo[i]->built = true;  // compile-only: the cubin is checked and cached, not loaded
      }
    }
  }

  void launch(const Kernel& k, const GridSize& g, ArrayRef<Arg> args) const override {
    launch_checked(k, g, args, true);
  }

  /** A launch; a checked kernel's violations are reported when `report` (the cross-check runs the
   * CUDA side of a checked kernel without reporting what the CPU side reports). */
  void launch_checked(const Kernel& k, const GridSize& g, ArrayRef<Arg> args, bool report) const {
    const auto* l = static_cast<const Loaded*>(k.binary.get());
    TS_INTERNAL_ASSERT(l && l->fn) << "launch of an unbuilt or compile-only CUDA kernel";
    if (g.total == 0) return;
    trt::Grid grid{g.grid.x, g.grid.y, g.grid.z};
    trt::Arg slots[65];  // the parameters, and the checked mode's record buffer
    const size_t n = pack_slots(args, slots);
    void* params[2] = {&grid, slots};
    const unsigned dims[3] = {static_cast<unsigned>(g.grid.x), static_cast<unsigned>(g.grid.y),
                              static_cast<unsigned>(g.grid.z)};
    const unsigned block[3] = {static_cast<unsigned>(l->threads), 1, 1};
    if (!k.checked) {
      rc::launch(l->fn, device_, dims, block, static_cast<unsigned>(l->shared_bytes), params,
                 l->what);
      return;
    }
    // The checked mode: bounds in, records out (reported after the kernel, as on the CPU).
    const std::vector<PointerBounds> bounds = tensor_bounds(args);
    auto dbg = std::make_unique<trt::GpuDebug>();
    std::memset(dbg.get(), 0, sizeof(trt::GpuDebug));
    for (size_t i = 0; i < bounds.size() && i < 64; ++i) {
      if (!bounds[i].known) continue;
      dbg->lo[i] = bounds[i].lo;
      dbg->hi[i] = bounds[i].hi;
    }
    void* d = rc::allocate(sizeof(trt::GpuDebug), device_);
    try {
      rc::copy_to_device(d, dbg.get(), sizeof(trt::GpuDebug), device_);
      slots[n].p = d;
      rc::launch(l->fn, device_, dims, block, static_cast<unsigned>(l->shared_bytes), params,
                 l->what);
      rc::copy_to_host(dbg.get(), d, sizeof(trt::GpuDebug), device_);
    } catch (...) {
      rc::release(d, device_);
      throw;
    }
    rc::release(d, device_);
    if (report) report_checks(k, bounds, *dbg);
  }

 private:
  void make_key() {
    Sha256 h;
    // (NVRTC named, not loaded: a warm process's first kernel loads a cached cubin, no NVRTC)
    h.field(rc::nvrtc_identity()).field(headers_digest());
    for (const auto& o : base_options()) h.field(o);
    key_ = "cuda:sm_" + std::to_string(arch_) + ":" + h.hex().substr(0, 16);
  }

  // Reports a checked launch's records through the shared report functions (the first of each
  // kind in full, then the totals), as the CPU backend's launch does.
  static void report_checks(const Kernel& k, const std::vector<PointerBounds>& bounds,
                            const trt::GpuDebug& d) {
    CheckCounters c;
    const auto& params = k.function->params;
    for (int kind = 0; kind < 4; ++kind) {
      const auto kept = std::min<unsigned long long>(d.count[kind], trt::GpuDebug::kRecords);
      for (unsigned long long i = 0; i < kept; ++i) {
        const trt::GpuCheckRecord& r = d.rec[kind][i];
        const CheckSite& st = k.sites.at(static_cast<size_t>(r.site));
        const int32_t pid[3] = {r.pid0, r.pid1, r.pid2};
        switch (kind) {
          case trt::kCheckOutOfBounds: {
            const bool known = r.param >= 0 && static_cast<size_t>(r.param) < params.size();
            report_out_of_bounds(k.name, st.what.c_str(), st.loc, pid, r.lane,
                                 known ? params[static_cast<size_t>(r.param)].name : "?",
                                 known ? bounds[static_cast<size_t>(r.param)] : PointerBounds{},
                                 static_cast<uintptr_t>(r.value), c);
            break;
          }
          case trt::kCheckOverflow:
            report_int_overflow(k.name, st.loc, pid, r.lane, r.value, c);
            break;
          case trt::kCheckAssert:
            report_assert_failure(k.name, st.loc, st.text, pid, r.lane, c);
            break;
          default:
            report_false_hint(k.name, st.loc, st.text, pid, r.lane, c);
            break;
        }
      }
    }
    // The totals (records past the first ones were counted on the device only).
    c.violations = static_cast<int64_t>(d.count[trt::kCheckOutOfBounds]);
    c.overflows = static_cast<int64_t>(d.count[trt::kCheckOverflow]);
    c.assert_failures = static_cast<int64_t>(d.count[trt::kCheckAssert]);
    c.false_hints = static_cast<int64_t>(d.count[trt::kCheckHint]);
    finish_checks(k.name, c);
  }

  static void read_resources(const runtime::disk::Info& info, Kernel& k) {
    auto num = [&](const char* key, int64_t fallback) {
      const std::string v = info.get(key);
      char* end = nullptr;
      const long long x = v.empty() ? fallback : std::strtoll(v.c_str(), &end, 10);
      return (v.empty() || (end && *end == '\0')) ? static_cast<int64_t>(x) : fallback;
    };
    k.registers = static_cast<int>(num("registers", -1));
    k.stack_bytes = num("stack_bytes", 0);
    k.spill_stores = num("spill_stores", 0);
    k.spill_loads = num("spill_loads", 0);
  }

  void save(const Kernel& k, const std::string& cubin) const {
    const std::string staged = store().stage();
    runtime::disk::write_atomic(staged + "/kernel.cubin", cubin, "a CUDA kernel's cubin");
    runtime::disk::Info info;
    info.values["kernel"] = k.name;
    info.values["arch"] = "sm_" + std::to_string(arch_);
    info.values["threads"] = std::to_string(k.launch_threads);
    info.values["shared_bytes"] = std::to_string(k.shared_bytes);
    info.values["registers"] = std::to_string(k.registers);
    info.values["stack_bytes"] = std::to_string(k.stack_bytes);
    info.values["spill_stores"] = std::to_string(k.spill_stores);
    info.values["spill_loads"] = std::to_string(k.spill_loads);
    runtime::disk::Store::record_file(info, staged, "kernel.cubin");
    store().publish(staged, k.disk_key, info);
  }

  void load(Kernel& k, const std::string& cubin) const {
    auto l = std::make_shared<Loaded>();
    l->module = std::make_unique<rc::Module>(cubin, device_, "kernel " + k.name);
    l->fn = l->module->function(entry_symbol(k.name));
    // ptxas's log did not say (it is kept only from a compile): the loaded function does.
    if (k.registers < 0) k.registers = l->module->resources(l->fn).registers;
    l->threads = k.launch_threads;
    l->shared_bytes = k.shared_bytes;
    l->what = "kernel " + k.name;
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

const Backend& compile_only_backend(int arch) {
  static std::mutex m;
  static auto* all = new std::vector<std::unique_ptr<CudaBackend>>();
  std::lock_guard<std::mutex> g(m);
  for (auto& b : *all) {
    if (b->arch() == arch) return *b;
  }
  // The opt-in shared memory per block of the architecture's largest parts.
  const int64_t shared = arch >= 90 ? 227 * 1024 : arch >= 80 ? 163 * 1024 : 96 * 1024;
  all->push_back(std::make_unique<CudaBackend>(arch, shared));
  return *all->back();
}

std::string resources_line(const Kernel& k) {
  std::string s = (k.registers >= 0 ? std::to_string(k.registers) : std::string("?")) +
                  " registers, " + std::to_string(k.shared_bytes) + " bytes shared, " +
                  std::to_string(k.stack_bytes) + " bytes stack, spills " +
                  std::to_string(k.spill_stores) + "/" + std::to_string(k.spill_loads) +
                  " bytes stored/loaded, " + std::to_string(k.launch_threads) + " threads";
  return s;
}

std::vector<CacheEntry> cache_entries() {
  std::vector<CacheEntry> out;
  for (const auto& key : store().keys()) {
    CacheEntry e;
    e.key = key;
    const std::string dir = store().dir_of(key);
    const auto info = runtime::disk::Info::parse(files::read_file(dir + "/info"));
    if (info) {
      e.kernel = info->get("kernel");
      e.arch = info->get("arch");
      e.resources = info->get("registers", "?") + " regs, " + info->get("shared_bytes", "?") +
                    " B shared, spills " + info->get("spill_stores", "?") + "/" +
                    info->get("spill_loads", "?") + " B";
      const auto num = [&](const char* k) {
        const std::string v = info->get(k);
        char* end = nullptr;
        const long long x = std::strtoll(v.c_str(), &end, 10);
        return !v.empty() && end && *end == '\0' ? static_cast<int64_t>(x) : int64_t{-1};
      };
      e.registers = static_cast<int>(num("registers"));
      e.shared_bytes = num("shared_bytes");
      e.spill_stores = num("spill_stores");
      e.spill_loads = num("spill_loads");
    }
    struct stat st;
    if (::stat((dir + "/kernel.cubin").c_str(), &st) == 0) {
      e.bytes = static_cast<uint64_t>(st.st_size);
      e.mtime = st.st_mtime;
    }
    out.push_back(std::move(e));
  }
  return out;
}

size_t clear_cache() {
  return store().clear();
}

void launch_without_reports(const Backend& cuda, const Kernel& k, const GridSize& g,
                            ArrayRef<Arg> args) {
  static_cast<const CudaBackend&>(cuda).launch_checked(k, g, args, false);
}

// A kernel generated with Hopper's wgmma compiles only for sm_90a.
void check_target(const std::string& source, const std::string& name, int arch) {
  if (needs_sm90a(source) && arch != 90) {
    throw CompileError("kernel '" + name +
                           "' was generated for sm_90a (its dots run on Hopper's wgmma): it "
                           "cannot be compiled for sm_" +
                           std::to_string(arch) +
                           " (package it for sm_90a, or generate it with TESSERA_CUDA_WGMMA=0)",
                       SourceLoc{});
  }
}

std::string compile_ptx_for_arch(const std::string& source, const std::string& name, int arch) {
  check_target(source, name, arch);
  if (!link_inputs(source).empty()) {
    throw CompileError("kernel '" + name +
                           "' links precompiled CUDA objects, so it is a cubin for one "
                           "architecture: it cannot be packaged as PTX (package cubins)",
                       SourceLoc{});
  }
  return rc::compile_ptx(source, name, arch, headers(), nvrtc_options(),
                         needs_sm90a(source) ? "a" : "")
      .cubin;
}

std::string compile_for_arch(const std::string& source, const std::string& name, int arch,
                             rc::PtxasReport* report, const std::string& arch_suffix) {
  check_target(source, name, arch);
  rc::CompiledCubin c = compile_kernel(source, name, arch, arch_suffix);
  if (report) *report = c.resources;
  return std::move(c.cubin);
}

}  // namespace tessera::backend::cuda
