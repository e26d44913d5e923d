// The CPU backend: the C++ emitter, the system compiler in batches (toolchain.h), and the launch
// glue (the grid on the thread pool; the checked mode's context and reports).
#include <array>
#include <iostream>
#include <mutex>
#include <set>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/emit.h"
#include "backend/cpu/toolchain.h"
#include "runtime/thread_pool.h"
#include "tessera/detail/hash.h"
#include "tessera/env.h"
#include "tessera/tensor.h"

namespace tessera::backend::cpu {
namespace {

void run_programs(trt::KernelFn fn, int64_t work_per_program, const GridSize& g,
                  const trt::Arg* slots) {
  runtime::run_programs(fn, work_per_program, g.grid, g.total, slots);
}

struct Loaded {
  trt::KernelFn fn = nullptr;
};

// One checked launch: the kernel's reports arrive here through trt::DebugCtx.
struct CheckedLaunch {
  const Kernel* kernel = nullptr;
  std::vector<PointerBounds> bounds;
  CheckCounters counters;
  // An inlined int32 expression is evaluated once per use: each (site, program, lane) is
  // reported once, as the interpreter does.
  std::mutex seen_mutex;
  std::set<std::array<int64_t, 5>> seen_overflows;
};

void report_oob(void* ctx, int site, int param, uintptr_t addr, int32_t p0, int32_t p1, int32_t p2,
                int64_t lane) {
  auto* c = static_cast<CheckedLaunch*>(ctx);
  const CheckSite& st = c->kernel->sites.at(static_cast<size_t>(site));
  const int32_t pid[3] = {p0, p1, p2};
  const auto& params = c->kernel->function->params;
  const bool known = param >= 0 && static_cast<size_t>(param) < params.size();
  report_out_of_bounds(c->kernel->name, st.what.c_str(), st.loc, pid, lane,
                       known ? params[static_cast<size_t>(param)].name : std::string("?"),
                       known ? c->bounds[static_cast<size_t>(param)] : PointerBounds{}, addr,
                       c->counters);
}

void report_overflow(void* ctx, int site, int32_t p0, int32_t p1, int32_t p2, int64_t lane,
                     int64_t exact) {
  auto* c = static_cast<CheckedLaunch*>(ctx);
  {
    std::lock_guard<std::mutex> g(c->seen_mutex);
    if (!c->seen_overflows.insert({site, p0, p1, p2, lane}).second) return;
  }
  const CheckSite& st = c->kernel->sites.at(static_cast<size_t>(site));
  const int32_t pid[3] = {p0, p1, p2};
  report_int_overflow(c->kernel->name, st.loc, pid, lane, exact, c->counters);
}

void report_assert(void* ctx, int site, int32_t p0, int32_t p1, int32_t p2, int64_t lane) {
  auto* c = static_cast<CheckedLaunch*>(ctx);
  const CheckSite& st = c->kernel->sites.at(static_cast<size_t>(site));
  const int32_t pid[3] = {p0, p1, p2};
  if (st.hint) {
    report_false_hint(c->kernel->name, st.loc, st.text, pid, lane, c->counters);
  } else {
    report_assert_failure(c->kernel->name, st.loc, st.text, pid, lane, c->counters);
  }
}

class CpuBackend final : public Backend {
 public:
  const char* name() const override { return "cpu"; }

  const std::string& target_key() const override {
    static const std::string key = [] {
      const CompilerInfo& c = compiler();
      Sha256 h;
      h.field(c.path).field(c.version).field(c.target);
      for (const auto& f : c.flags) h.field(f);
      return "cpu:" + h.hex().substr(0, 16);
    }();
    return key;
  }

  void generate(std::shared_ptr<const ir::Function> f, bool checked, Kernel& out) const override {
    const Emitted e = emit(*f, checked);
    if (knobs().dump_enabled("src"))
      dump("src", f->name, e.source, "// ---- C++ of kernel " + f->name + " ----\n" + e.source,
           "cpp");
    out.name = f->name;
    out.function = std::move(f);
    out.checked = checked;
    out.source = e.source;
    out.work_per_program = e.work_per_program;
    out.sites = e.sites;
    out.disk_key = source_key(e.source);
    out.code_key = out.disk_key;
  }

  void build(const std::vector<Kernel*>& kernels) const override {
    std::vector<Kernel*> todo;
    for (Kernel* k : kernels) {
      if (!k->built) todo.push_back(k);
    }
    if (todo.empty()) return;
    std::vector<KernelSource> sources;
    sources.reserve(todo.size());
    for (const Kernel* k : todo) sources.push_back({k->source, k->name});
    const auto bins = compile_many(sources);
    for (size_t i = 0; i < todo.size(); ++i) {
      todo[i]->binary = std::make_shared<const Loaded>(Loaded{bins[i].fn});
      todo[i]->from_disk = bins[i].from_disk;
      todo[i]->compile_ms = bins[i].compile_ms;
      todo[i]->built = true;
    }
  }

  void launch(const Kernel& k, const GridSize& g, ArrayRef<Arg> args) const override {
    const trt::KernelFn fn = static_cast<const Loaded*>(k.binary.get())->fn;
    trt::Arg slots[65];  // the parameters, and the checked mode's context
    const size_t n = pack_slots(args, slots);
    if (!k.checked) {
      run_programs(fn, k.work_per_program, g, slots);
      return;
    }
    CheckedLaunch c;
    c.kernel = &k;
    c.bounds = tensor_bounds(args);
    std::vector<uintptr_t> lo(64, 0), hi(64, 0);
    for (size_t i = 0; i < c.bounds.size() && i < 64; ++i) {
      if (!c.bounds[i].known) continue;
      lo[i] = c.bounds[i].lo;
      hi[i] = c.bounds[i].hi;
    }
    trt::DebugCtx dbg{lo.data(), hi.data(), &report_oob, &report_assert, &report_overflow, &c};
    slots[n].p = &dbg;
    run_programs(fn, k.work_per_program, g, slots);
    finish_checks(k.name, c.counters);
  }
};

}  // namespace

trt::KernelFn kernel_fn(const Kernel& k) {
  return k.binary ? static_cast<const Loaded*>(k.binary.get())->fn : nullptr;
}

}  // namespace tessera::backend::cpu

namespace tessera::backend {
const Backend& cpu_backend() {
  static const cpu::CpuBackend b;
  return b;
}
}  // namespace tessera::backend
