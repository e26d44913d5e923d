// TESSERA_CROSSCHECK: kernels launched on CPU tensors run on the CPU backend as usual, and their
// tile IR is also generated for CUDA. With "nvrtc" the CUDA code is compiled by NVRTC for sm_90
// (no GPU needed: CI checks that every kernel the suites generate compiles); with "cuda" it also
// runs on a GPU copy of the launch's arguments and what both wrote is compared, so every kernel of
// every suite is a test of the CUDA emitter against the CPU one; with "sim" the same comparison
// runs the CUDA code in the host simulator (trt/cuda_sim.h: the source compiled by the system C++
// compiler, a host thread per CUDA thread, the warp instructions computed from their PTX
// definitions), so machines without a GPU check tensor-core layouts and pipelines too.
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <sstream>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/toolchain.h"
#include "backend/cuda/cuda_backend.h"
#include "core/dtype_visit.h"
#include "ir/access.h"
#include "ir/passes.h"
#include "ir/text.h"
#include "ir/uses.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/memory.h"
#include "tessera/env.h"
#include "tessera/error.h"
#include "tessera/tensor.h"
#include "tessera/tensor_impl.h"

namespace tessera::backend::cuda {
namespace {

namespace rc = runtime::cuda;

constexpr int kGpu = 0;         // the GPU the "cuda" mode runs on
constexpr int kNvrtcArch = 90;  // the architecture the "nvrtc" mode compiles for

bool has_op(const ir::Function& f, ir::OpKind kind) {
  bool found = false;
  ir::walk(f.body, [&](const ir::Op* op) { found = found || op->kind == kind; });
  return found;
}

// Whether what the kernel writes depends on the order its programs run in: exchanges,
// compare-and-swaps, and atomics whose old values are used (tickets, locks). Float atomic adds
// differ only by rounding and are compared within the tolerance.
bool order_dependent(const ir::Function& f) {
  const ir::UseInfo uses(f);
  bool dep = false;
  ir::walk(f.body, [&](const ir::Op* op) {
    if (op->kind == ir::OpKind::AtomicCas) dep = true;
    if (op->kind != ir::OpKind::Atomic) return;
    if (static_cast<ir::AtomicKind>(op->sub) == ir::AtomicKind::Xchg) dep = true;
    for (ir::ValueId r : op->results) dep = dep || !uses.uses(r).empty();
  });
  return dep;
}

// Whether the kernel makes pointers out of integers (a table of addresses): those are the CPU
// tensors' addresses, which mean nothing on the GPU, so such a kernel runs on the CPU alone.
bool makes_pointers_from_integers(const ir::Function& f) {
  bool found = false;
  ir::walk(f.body, [&](const ir::Op* op) {
    if (op->kind != ir::OpKind::Cast && op->kind != ir::OpKind::Bitcast) return;
    found = found || (f.type(op->result()).ptr && !f.type(op->operands[0]).ptr);
  });
  return found;
}

// The relative tolerance of a floating dtype's results: reductions may add in another order,
// and a narrow result may round the other way.
double tolerance(DType t) {
  switch (t) {
    case DType::Float64:
      return 1e-10;
    case DType::Float32:
      return 1e-4;
    case DType::Float16:
      return 2e-3;
    case DType::BFloat16:
      return 1.6e-2;
    case DType::Float8_e4m3fn:
      return 0.13;
    case DType::Float8_e5m2:
      return 0.26;
    default:
      return 0;
  }
}

// A storage copied to the GPU (or, simulated, to host memory of its own) for the CUDA run.
struct Mirror {
  const StorageImpl* storage = nullptr;
  const char* host = nullptr;
  size_t bytes = 0;
  void* dev = nullptr;
  std::unique_ptr<char[]> sim;  // the simulator's copy (dev points into it)
  std::vector<char> result;  // the GPU's bytes after the run (read back; the simulator's in place)
  const char* after() const { return sim ? sim.get() : result.data(); }
};

struct Mirrors {
  explicit Mirrors(bool simulated) : simulated(simulated) {}
  bool simulated;
  std::vector<Mirror> all;
  ~Mirrors() {
    for (auto& m : all) {
      if (m.dev && !simulated) rc::release(m.dev, kGpu);
    }
  }
  Mirror& of(const StorageImpl* s) {
    for (auto& m : all) {
      if (m.storage == s) return m;
    }
    Mirror m;
    m.storage = s;
    m.host = static_cast<const char*>(s->data());
    m.bytes = static_cast<size_t>(s->nbytes().expect_int());
    if (simulated) {
      m.sim.reset(new char[std::max<size_t>(m.bytes, 1)]);  // 16-byte aligned, as cudaMalloc's
      m.dev = m.sim.get();
      if (m.bytes) std::memcpy(m.dev, m.host, m.bytes);
      all.push_back(std::move(m));
      return all.back();
    }
    m.dev = rc::allocate(std::max<size_t>(m.bytes, 1), kGpu);
    all.push_back(std::move(m));
    Mirror& added = all.back();
    if (added.bytes) rc::copy_to_device(added.dev, added.host, added.bytes, kGpu);
    return added;
  }
  // The bytes the CUDA run left, read back from the GPU (the simulator wrote them in place).
  void fetch() {
    if (simulated) return;
    for (auto& m : all) {
      m.result.resize(m.bytes);
      if (m.bytes) rc::copy_to_host(m.result.data(), m.dev, m.bytes, kGpu);
    }
  }
};

// The simulator's translation unit for generated CUDA `e`: the runtime header first, the kernel
// renamed, shared memory the launch's buffer, and an entry point with the CPU kernels' signature
// that runs the grid (trt_sim::run).
std::string sim_source(const Kernel& k) {
  std::string src = k.source;
  auto replace = [&](const std::string& from, const std::string& to) {
    const size_t at = src.find(from);
    TS_INTERNAL_ASSERT(at != std::string::npos)
        << "[kernel " << k.name << "] TESSERA_CROSSCHECK=sim: no '" << from << "' in the CUDA code";
    src.replace(at, from.size(), to);
  };
  replace("#include \"tessera/trt/cuda.h\"", "#include \"tessera/trt/cuda_sim.h\"");
  // (aligned to 1024 bytes where wgmma reads swizzled tiles, as the simulator's buffer is)
  replace(src.find("__align__(1024) unsigned char _smem[]") != std::string::npos
              ? "extern __shared__ __align__(1024) unsigned char _smem[];"
              : "extern __shared__ __align__(16) unsigned char _smem[];",
          "unsigned char* const _smem = trt_sim::shared_memory();");
  src +=
      "\nextern \"C\" __attribute__((visibility(\"default\"))) void tessera_kernel(\n"
      "    const trt::Grid* _g, int64_t _pb, int64_t _pe, const trt::Arg* _args) {\n"
      "  _Slots _s;\n"
      "  std::memcpy(_s.a, _args, sizeof _s.a);\n"
      "  const trt::Grid _grid = *_g;\n"
      "  trt_sim::run(_grid, _pb, _pe, " +
      std::to_string(k.launch_threads) + ", " + std::to_string(k.shared_bytes) +
      ", [&](unsigned _t, int64_t _p) {\n"
      "    threadIdx.x = _t;\n"
      "    blockIdx.x = (unsigned)(_p % _grid.x);\n"
      "    blockIdx.y = (unsigned)(_p / _grid.x % _grid.y);\n"
      "    blockIdx.z = (unsigned)(_p / (_grid.x * _grid.y));\n"
      "    tessera::" +
      entry_name(k.name) +
      "(_grid, _s);\n"
      "  });\n"
      "}\n";
  return src;
}

// The simulator's build of a shadow kernel.
struct SimBinary {
  trt::KernelFn fn = nullptr;
};

// Compares parameter `name`'s memory [b.lo, b.hi) after the CPU run (`cpu`) and the CUDA run
// (`gpu`, the same offsets in the mirror's copy); throws at the first element outside tolerance.
void compare(const std::string& kernel, const std::string& name, DType dtype,
             const PointerBounds& b, const char* cpu, const char* gpu) {
  const auto count = static_cast<int64_t>((b.hi - b.lo) / static_cast<uintptr_t>(b.elem_size));
  const int64_t first = static_cast<int64_t>(b.lo - b.base) / b.elem_size;
  visit_dtype<kAllDTypes>(dtype, "TESSERA_CROSSCHECK", [&]<class T>() {
    const T* c = reinterpret_cast<const T*>(cpu);
    const T* g = reinterpret_cast<const T*>(gpu);
    const double rtol = tolerance(dtype);
    double scale = 0;
    if (rtol > 0) {
      for (int64_t i = 0; i < count; ++i) {
        const double v = std::fabs(convert<double>(c[i]));
        if (std::isfinite(v)) scale = std::max(scale, v);
      }
    }
    int64_t bad = 0, first_bad = -1;
    for (int64_t i = 0; i < count; ++i) {
      bool same;
      if (rtol == 0) {
        same = std::memcmp(&c[i], &g[i], sizeof(T)) == 0;
      } else {
        const double x = convert<double>(c[i]), y = convert<double>(g[i]);
        same = (std::isnan(x) && std::isnan(y)) || x == y ||
               std::fabs(x - y) <= rtol * (std::fabs(x) + scale);
      }
      if (!same && bad++ == 0) first_bad = i;
    }
    if (!bad) return;
    std::ostringstream msg;
    msg.precision(9);
    msg << "[kernel " << kernel << "] TESSERA_CROSSCHECK: CUDA and CPU results differ in '" << name
        << "' (" << dtype_name(dtype) << "): element " << first + first_bad << " is "
        << convert<double>(c[first_bad]) << " on the CPU and " << convert<double>(g[first_bad])
        << " on CUDA; " << bad << " of " << count << " elements differ";
    if (rtol > 0) msg << " beyond a relative tolerance of " << rtol;
    TS_ERROR(RuntimeError) << msg.str();
  });
}

class CrossCheck final : public Backend {
 public:
  explicit CrossCheck(std::string mode)
      : mode_(std::move(mode)), run_(mode_ == "cuda" || mode_ == "sim"), sim_(mode_ == "sim") {
    key_ = cpu_backend().target_key() + "+crosscheck:" + mode_;
  }

  const char* name() const override { return "cpu"; }
  const std::string& target_key() const override { return key_; }

  void generate(std::shared_ptr<const ir::Function> f, bool checked, Kernel& out) const override {
    // The CUDA side without device_print (the CPU's run prints); the rest is the same IR.
    std::shared_ptr<const ir::Function> g = f;
    if (has_op(*f, ir::OpKind::Print)) {
      std::shared_ptr<ir::Function> copy = ir::parse(ir::print(*f));
      ir::strip_prints(*copy);
      g = std::move(copy);
    }
    cpu_backend().generate(std::move(f), checked, out);
    auto shadow = std::make_shared<Kernel>();
    cuda().generate(std::move(g), checked, *shadow);
    out.shadow = std::move(shadow);
  }

  void build(const std::vector<Kernel*>& kernels) const override {
    cpu_backend().build(kernels);
    std::vector<Kernel*> shadows;
    for (Kernel* k : kernels) {
      if (k->shadow && !k->shadow->built) shadows.push_back(k->shadow.get());
    }
    if (shadows.empty()) return;
    if (!sim_) return cuda().build(shadows);
    for (Kernel* s : shadows) {
      // Checked kernels and user C++/PTX functions run on the CPU alone (launch).
      if (s->checked || has_op(*s->function, ir::OpKind::Extern)) continue;
      auto bin = std::make_shared<SimBinary>();
      bin->fn = cpu::compile(sim_source(*s), s->name + " (CUDA, simulated)").fn;
      s->binary = std::move(bin);
      s->built = true;
    }
  }

  void launch(const Kernel& k, const GridSize& g, ArrayRef<Arg> args) const override {
    if (!run_ || !k.shadow || g.total == 0) {
      cpu_backend().launch(k, g, args);
      return;
    }
    if (makes_pointers_from_integers(*k.function)) {
      log("crosscheck",
          "kernel " + k.name + ": makes pointers from integers (CPU addresses); not run on CUDA");
      cpu_backend().launch(k, g, args);
      return;
    }
    if (sim_ && !k.shadow->binary) {
      log("crosscheck",
          "kernel " + k.name + ": checked, or calls user functions; not run in the CUDA simulator");
      cpu_backend().launch(k, g, args);
      return;
    }
    // The GPU copies first: the CPU's run may write what it reads.
    Mirrors mirrors(sim_);
    SmallVector<Arg, 16> dev(args.begin(), args.end());
    mirrors.all.reserve(args.size());  // `of` points into it
    std::vector<Mirror*> of(args.size(), nullptr);
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i].kind != ir::ParamKind::Pointer) continue;
      const Tensor* t = args[i].tensor;
      if (!t || !t->has_data()) {
        // A pointer with no tensor behind it cannot be copied: the CPU runs alone.
        log("crosscheck",
            "kernel " + k.name + ": a pointer argument without a tensor; not run on CUDA");
        cpu_backend().launch(k, g, args);
        return;
      }
      Mirror& m = mirrors.of(t->impl()->storage());
      of[i] = &m;
      dev[i].ptr = static_cast<char*>(m.dev) + (static_cast<const char*>(args[i].ptr) - m.host);
    }
    const bool trace = knobs().log_enabled("crosscheck");
    if (trace) log("crosscheck", "kernel " + k.name + ": arguments copied; running on the CPU");
    cpu_backend().launch(k, g, args);
    if (trace) log("crosscheck", "kernel " + k.name + ": running on CUDA");
    // A checked kernel's violations are the CPU side's to report (once); the CUDA side skips
    // the same lanes, so what both write still agrees.
    if (sim_) {
      trt::Arg slots[65];  // as the CUDA launch packs them
      pack_slots(ArrayRef<Arg>(dev.data(), dev.size()), slots);
      static_cast<const SimBinary*>(k.shadow->binary.get())->fn(&g.grid, 0, g.total, slots);
    } else {
      launch_without_reports(cuda(), *k.shadow, g, ArrayRef<Arg>(dev.data(), dev.size()));
    }
    mirrors.fetch();
    if (trace) log("crosscheck", "kernel " + k.name + ": CUDA done; comparing");
    if (order_dependent(*k.function)) {
      log("crosscheck",
          "kernel " + k.name + ": not compared (its atomics make results depend on program order)");
      return;
    }
    const auto access = ir::param_access(*k.function);
    const auto bounds = tensor_bounds(args);
    for (size_t i = 0; i < args.size(); ++i) {
      if (!of[i] || !access[i].written || !bounds[i].known) continue;
      const Mirror& m = *of[i];
      const size_t off = bounds[i].lo - reinterpret_cast<uintptr_t>(m.host);
      compare(k.name, k.function->params[i].name, args[i].tensor->dtype(), bounds[i], m.host + off,
              m.after() + off);
    }
  }

 private:
  const Backend& cuda() const {
    if (!run_ || sim_) return compile_only_backend(kNvrtcArch);
    TS_CHECK(rc::device_count() > kGpu, RuntimeError)
        << "TESSERA_CROSSCHECK=cuda runs every kernel on a GPU too, and this machine has none "
           "(TESSERA_CROSSCHECK=nvrtc compiles the CUDA code without running it)";
    return backend_for(kGpu);
  }

  std::string mode_;
  bool run_, sim_;
  std::string key_;
};

}  // namespace

const Backend& crosscheck_backend(const std::string& mode) {
  static std::mutex m;
  static auto* all = new std::vector<std::unique_ptr<CrossCheck>>();
  std::lock_guard<std::mutex> g(m);
  for (auto& b : *all) {
    if (b->target_key().ends_with(":" + mode)) return *b;
  }
  all->push_back(std::make_unique<CrossCheck>(mode));
  return *all->back();
}

}  // namespace tessera::backend::cuda
