// tessera::compile on the seed's add_fn: per-call time at n = 4 against eager, the guard check
// (a compiled function of four tensors that returns one), and, as modes for fresh processes, the
// first call and the recompile to dynamic shapes. bench/compare_cpu.py runs it beside
// torch.compile.
//
//   bench_compile_cpu                   Google Benchmark run
//   bench_compile_cpu --first-call-ms   milliseconds of the first compiled call (trace, kernel
//                                       compile or disk-cache load, run); cold or warm by
//                                       TESSERA_CACHE_DIR
//   bench_compile_cpu --recompile-ms    milliseconds of the call at n = 5 after one at n = 4 (the
//                                       recompile with a dynamic size: a re-trace; the kernel
//                                       specialization it needs is already compiled)
//   bench_compile_cpu --recompile-new-kernel-ms   the same with every kernel cache emptied first,
//                                       so the recompile also compiles its kernel anew (what
//                                       torch.compile does: it generates and builds new C++)
//   bench_compile_cpu --package-ms      AOT (issue 18): export the seed's add_fn with a dynamic n,
//                                       then the median of 5 loads of the package (ms)
//
// The AOT rows (BM_Package*) run the same functions from a package exported once (dynamic n),
// beside the compiled rows: the per-call cost with every guard on, and the kernel at 2^22.
#include <benchmark/benchmark.h>

#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "backend/cpu/toolchain.h"
#include "seed_add_kernel.h"
#include "tessera/aot.h"
#include "tessera/autograd.h"
#include "tessera/compile.h"
#include "tessera/tessera.h"
#include "tessera/tl.h"

using namespace tessera;
namespace tl = tessera::tl;

namespace {

using bench::add_kernel;

Tensor add_fn(const Tensor& x, const Tensor& y) {
  Tensor output = zeros_like(x);
  auto n_elements = output.numel();
  auto grid = [&](const tl::Meta& meta) {
    return tl::Grid{tl::cdiv(n_elements, meta["BLOCK_SIZE"])};
  };
  add_kernel[grid](x, y, output, n_elements, tl::meta("BLOCK_SIZE", 4));
  return output;
}

CompileOptions options() {
  CompileOptions o;
  o.fullgraph = true;
  o.name = "add_fn";
  return o;
}

void BM_EagerAddFnN4(benchmark::State& s) {
  Tensor x = randn({4}), y = randn({4});
  for (auto _ : s) benchmark::DoNotOptimize(add_fn(x, y));
}
BENCHMARK(BM_EagerAddFnN4);

/** Checks a benchmark's result once before timing; a mismatch fails the benchmark. */
bool verified(benchmark::State& s, bool ok) {
  if (!ok) s.SkipWithError("the compiled result differs from eager");
  return ok;
}

void BM_CompiledAddFnN4(benchmark::State& s) {
  auto compiled = compile(add_fn, options());
  Tensor x = randn({4}), y = randn({4});
  if (!verified(s, equal(compiled(x, y), x + y))) return;
  for (auto _ : s) benchmark::DoNotOptimize(compiled(x, y));
}
BENCHMARK(BM_CompiledAddFnN4);

void BM_CompiledAddFnDynamic(benchmark::State& s) {
  auto compiled = compile(add_fn, options());
  Tensor x4 = randn({4}), y4 = randn({4}), x = randn({5}), y = randn({5});
  compiled(x4, y4);
  if (!verified(s, equal(compiled(x, y), x + y) && compiled.stats().graphs == 2))
    return;  // dynamic
  for (auto _ : s) benchmark::DoNotOptimize(compiled(x, y));
}
BENCHMARK(BM_CompiledAddFnDynamic);

// Issue 17 at 2^22 floats: eager add_fn (fill, then the kernel) against compiled (the fill
// elided), and add_fn then relu (three passes eagerly; one kernel compiled, the relu in its
// stores). Bytes: the kernel's two reads and one write.
Tensor add_fn_1024(const Tensor& x, const Tensor& y) {
  Tensor output = zeros_like(x);
  auto n = output.numel();
  auto grid = [&](const tl::Meta& meta) { return tl::Grid{tl::cdiv(n, meta["BLOCK_SIZE"])}; };
  add_kernel[grid](x, y, output, n, tl::meta("BLOCK_SIZE", 1024));
  return output;
}
Tensor add_relu_1024(const Tensor& x, const Tensor& y) {
  return add_fn_1024(x, y).relu();
}
constexpr int64_t kLarge = int64_t{1} << 22;

template <bool kCompiled, bool kRelu>
void BM_AddFnLarge(benchmark::State& s) {
  Tensor x = randn({kLarge}), y = randn({kLarge});
  auto fn = kRelu ? add_relu_1024 : add_fn_1024;
  auto compiled = compile(fn, options());
  const Tensor expect = kRelu ? (x + y).relu() : x + y;
  if (!verified(s, equal(compiled(x, y), expect) && equal(fn(x, y), expect))) return;
  for (auto _ : s) benchmark::DoNotOptimize(kCompiled ? compiled(x, y) : fn(x, y));
  s.SetBytesProcessed(s.iterations() * 12 * kLarge);
}
BENCHMARK(BM_AddFnLarge<false, false>)->Name("BM_EagerAddFn2e22")->UseRealTime();
BENCHMARK(BM_AddFnLarge<true, false>)->Name("BM_CompiledAddFn2e22")->UseRealTime();
BENCHMARK(BM_AddFnLarge<false, true>)->Name("BM_EagerAddFnRelu2e22")->UseRealTime();
BENCHMARK(BM_AddFnLarge<true, true>)->Name("BM_CompiledAddFnRelu2e22")->UseRealTime();

// Issue 17, vertical fusion: bias, scale, activation and residual on 4096 x 1024 floats. Eagerly
// four ops (40 bytes per element moved); compiled, one generated kernel (12: x and the residual
// read, the result written; the bias is 4 KiB). Bytes counted: the fused kernel's 12. With ReLU
// the chain is memory-bound; with GELU (tanh) eager's CPU loop computes tanh with libm, the
// generated kernel with the tile runtime's vectorized polynomial.
template <bool kGelu>
Tensor bias_act_residual(const Tensor& x, const Tensor& bias, const Tensor& residual) {
  const Tensor h = (x + bias) * 0.5;
  return (kGelu ? gelu(h, "tanh") : h.relu()) + residual;
}
template <bool kGelu, int kMode>  // 0 eager, 1 compiled without fusion, 2 compiled
void BM_BiasActResidual(benchmark::State& s) {
  Tensor x = randn({4096, 1024}), bias = randn({1024}), r = randn({4096, 1024});
  CompileOptions o = options();
  o.name = "bias_act_residual";
  o.fuse = kMode == 2;
  auto fn = bias_act_residual<kGelu>;
  auto compiled = compile(fn, o);
  if (!verified(s, allclose(compiled(x, bias, r), fn(x, bias, r), 1e-5, 1e-5))) return;
  for (auto _ : s) benchmark::DoNotOptimize(kMode == 0 ? fn(x, bias, r) : compiled(x, bias, r));
  s.SetBytesProcessed(s.iterations() * 12 * x.numel());
}
BENCHMARK(BM_BiasActResidual<false, 0>)->Name("BM_EagerBiasReluResidual")->UseRealTime();
BENCHMARK(BM_BiasActResidual<false, 1>)->Name("BM_UnfusedBiasReluResidual")->UseRealTime();
BENCHMARK(BM_BiasActResidual<false, 2>)->Name("BM_CompiledBiasReluResidual")->UseRealTime();
BENCHMARK(BM_BiasActResidual<true, 0>)->Name("BM_EagerBiasGeluResidual")->UseRealTime();
BENCHMARK(BM_BiasActResidual<true, 1>)->Name("BM_UnfusedBiasGeluResidual")->UseRealTime();
BENCHMARK(BM_BiasActResidual<true, 2>)->Name("BM_CompiledBiasGeluResidual")->UseRealTime();

// Issue 17, segmented graph breaks: the chain above with a data read in the middle (a check that
// the pre-activation's sum is finite). Eagerly five ops; compiled, two segments (x + bias and
// * 0.5 in one kernel beside the sum, relu and + r in another) and the read between them, the
// function traced on every call. At 64 x 64 the rows show the host cost per call (the trace);
// at 4096 x 1024 the kernels. 0 eager, 1 compiled in segments, 2 compiled without the read
// (one graph: what the trace costs beside a guarded replay).
template <bool kRead>
Tensor checked_chain(const Tensor& x, const Tensor& bias, const Tensor& residual) {
  const Tensor h = (x + bias) * 0.5;
  if (kRead) {
    const double s = h.sum().item<double>();
    TS_CHECK(std::isfinite(s), ValueError) << "checked_chain: the sum is " << s;
  }
  return h.relu() + residual;
}
template <int kMode>
void BM_Segmented(benchmark::State& s) {
  const int64_t rows = s.range(0), cols = s.range(1);
  Tensor x = randn({rows, cols}), bias = randn({cols}), r = randn({rows, cols});
  CompileOptions o = options();
  o.name = "checked_chain";
  o.fullgraph = false;
  auto fn = kMode == 2 ? checked_chain<false> : checked_chain<true>;
  auto compiled = compile(fn, o);
  if (!verified(s, allclose(compiled(x, bias, r), fn(x, bias, r), 1e-5, 1e-5))) return;
  if (kMode == 1 && !verified(s, compiled.stats().segmented)) return;
  for (auto _ : s) benchmark::DoNotOptimize(kMode == 0 ? fn(x, bias, r) : compiled(x, bias, r));
  s.SetBytesProcessed(s.iterations() * 12 * x.numel());
}
BENCHMARK(BM_Segmented<0>)
    ->Name("BM_EagerCheckedChain")
    ->Args({64, 64})
    ->Args({4096, 1024})
    ->UseRealTime();
BENCHMARK(BM_Segmented<1>)
    ->Name("BM_SegmentedCheckedChain")
    ->Args({64, 64})
    ->Args({4096, 1024})
    ->UseRealTime();
BENCHMARK(BM_Segmented<2>)
    ->Name("BM_CompiledUncheckedChain")
    ->Args({64, 64})
    ->Args({4096, 1024})
    ->UseRealTime();

// Issue 17, persistent reductions: softmax and layer norm written with built-in ops on 4096 x 1024
// floats. Eagerly five (nine) ops, each a pass over memory; compiled, one generated kernel holding
// each row whole. Beside them the built-in `softmax` / `layer_norm` operators (one row kernel
// each). Bytes counted: one read and one write of x (8 per element).
Tensor softmax_ops(const Tensor& x) {
  const Tensor e = (x - x.amax({-1}, true)).exp();
  return e / e.sum({-1}, true);
}
Tensor layer_norm_ops(const Tensor& x, const Tensor& w, const Tensor& b) {
  const Tensor mean = x.mean({-1}, true);
  const Tensor xc = x - mean;
  const Tensor var = (xc * xc).mean({-1}, true);
  return xc * (var + 1e-5).rsqrt() * w + b;
}
// 0 eager, 1 compiled without fusion, 2 compiled, 3 the operator, 4 the operator compiled
template <bool kNorm, int kMode>
void BM_Rows(benchmark::State& s) {
  Tensor x = randn({4096, 1024}), w = randn({1024}), b = randn({1024});
  CompileOptions o = options();
  o.name = kNorm ? "layer_norm_ops" : "softmax_ops";
  o.fuse = kMode == 2 || kMode == 4;
  auto eager = [&] { return kNorm ? layer_norm_ops(x, w, b) : softmax_ops(x); };
  auto op = [&] { return kNorm ? layer_norm(x, {1024}, w, b, 1e-5) : softmax(x, -1); };
  auto cn = compile(layer_norm_ops, o);
  auto cs = compile(softmax_ops, o);
  auto cno = compile([](const Tensor& x, const Tensor& w,
                        const Tensor& b) { return layer_norm(x, {1024}, w, b, 1e-5); },
                     o);
  auto cso = compile([](const Tensor& x) { return softmax(x, -1); }, o);
  auto compiled = [&] {
    if (kMode == 4) return kNorm ? cno(x, w, b) : cso(x);
    return kNorm ? cn(x, w, b) : cs(x);
  };
  const Tensor expect = eager();
  if (!verified(s, allclose(compiled(), expect, 1e-4, 1e-5) && allclose(op(), expect, 1e-4, 1e-5)))
    return;
  for (auto _ : s) {
    benchmark::DoNotOptimize(kMode == 0 ? eager() : kMode == 3 ? op() : compiled());
  }
  s.SetBytesProcessed(s.iterations() * 8 * x.numel());
}
BENCHMARK(BM_Rows<false, 0>)->Name("BM_EagerSoftmaxOps")->UseRealTime();
BENCHMARK(BM_Rows<false, 1>)->Name("BM_UnfusedSoftmaxOps")->UseRealTime();
BENCHMARK(BM_Rows<false, 2>)->Name("BM_CompiledSoftmaxOps")->UseRealTime();
BENCHMARK(BM_Rows<false, 3>)->Name("BM_SoftmaxOperator")->UseRealTime();
BENCHMARK(BM_Rows<false, 4>)->Name("BM_CompiledSoftmaxOperator")->UseRealTime();
BENCHMARK(BM_Rows<true, 0>)->Name("BM_EagerLayerNormOps")->UseRealTime();
BENCHMARK(BM_Rows<true, 1>)->Name("BM_UnfusedLayerNormOps")->UseRealTime();
BENCHMARK(BM_Rows<true, 2>)->Name("BM_CompiledLayerNormOps")->UseRealTime();
BENCHMARK(BM_Rows<true, 3>)->Name("BM_LayerNormOperator")->UseRealTime();
BENCHMARK(BM_Rows<true, 4>)->Name("BM_CompiledLayerNormOperator")->UseRealTime();

// Issue 17, training under compile: forward and backward (autograd::grad with a given upstream
// gradient, as a training step's) of three functions on 4096 x 1024 floats whose inputs require
// grad. Eagerly every op and every formula is a pass; compiled, the forward and the backward are
// graphs of their own, each fused. Bytes counted: the forward's input and output and the
// backward's upstream gradient and x's gradient (16 per element), so rows compare by time.
//   PointwiseTrain   relu((x + bias) * 0.5) + residual    grads of x and bias
//   LayerNormTrain   gelu(layer_norm(x, w, b), tanh)       grads of x, w, b
//   SoftmaxTrain     softmax(x * 0.125 + mask, -1)         grad of x
Tensor train_fn(int kind, const Tensor& x, const Tensor& p, const Tensor& q) {
  if (kind == 0) return ((x + p) * 0.5).relu() + q;
  if (kind == 1) return gelu(layer_norm(x, {1024}, p, q, 1e-5), "tanh");
  return softmax(x * 0.125 + q, -1);
}
template <int kKind, int kMode>  // 0 eager, 1 compiled without fusion, 2 compiled
void BM_Train(benchmark::State& s) {
  Tensor x = randn({4096, 1024}).requires_grad_();
  Tensor p = randn({1024}).requires_grad_(kKind != 2);
  Tensor q = randn(kKind == 1 ? std::vector<SymInt>{1024} : std::vector<SymInt>{4096, 1024})
                 .requires_grad_(kKind == 1);
  Tensor up = randn({4096, 1024});
  CompileOptions o = options();
  o.name = "train";
  o.fuse = kMode == 2;
  auto compiled = compile([](const Tensor& x, const Tensor& p, const Tensor& q,
                             int64_t kind) { return train_fn(static_cast<int>(kind), x, p, q); },
                          o);
  std::vector<Tensor> wrt = {x};
  if (kKind != 2) wrt.push_back(p);
  if (kKind == 1) wrt.push_back(q);
  auto step = [&] {
    const Tensor out = kMode == 0 ? train_fn(kKind, x, p, q) : compiled(x, p, q, int64_t{kKind});
    return autograd::grad({out}, wrt, {up});
  };
  const auto want = [&] {
    Tensor out = train_fn(kKind, x, p, q);
    return autograd::grad({out}, wrt, {up});
  }();
  const auto got = step();
  bool ok = kMode == 0 || compiled.graph().backward != nullptr;
  for (size_t i = 0; i < got.size(); ++i) ok = ok && allclose(got[i], want[i], 1e-3, 1e-4);
  if (!verified(s, ok)) return;
  for (auto _ : s) benchmark::DoNotOptimize(step());
  s.SetBytesProcessed(s.iterations() * 16 * x.numel());
}
BENCHMARK(BM_Train<0, 0>)->Name("BM_EagerPointwiseTrain")->UseRealTime();
BENCHMARK(BM_Train<0, 1>)->Name("BM_UnfusedPointwiseTrain")->UseRealTime();
BENCHMARK(BM_Train<0, 2>)->Name("BM_CompiledPointwiseTrain")->UseRealTime();
BENCHMARK(BM_Train<1, 0>)->Name("BM_EagerLayerNormTrain")->UseRealTime();
BENCHMARK(BM_Train<1, 1>)->Name("BM_UnfusedLayerNormTrain")->UseRealTime();
BENCHMARK(BM_Train<1, 2>)->Name("BM_CompiledLayerNormTrain")->UseRealTime();
BENCHMARK(BM_Train<2, 0>)->Name("BM_EagerSoftmaxTrain")->UseRealTime();
BENCHMARK(BM_Train<2, 1>)->Name("BM_UnfusedSoftmaxTrain")->UseRealTime();
BENCHMARK(BM_Train<2, 2>)->Name("BM_CompiledSoftmaxTrain")->UseRealTime();

// Issue 17, memory planning: the MLP block (LayerNorm -> Linear -> GELU -> Linear + residual) of
// the targets at d = 256, hidden 1024, inference (no grad) and a training step (gradients
// of x and the four weights), compiled with plan_memory on (kPlan) and off. Counters: the plan's
// arena bytes per call beside the same allocations one by one (forward and backward graphs
// summed). In training most intermediates are saved for the backward (results of the forward
// graph, never planned).
struct Mlp {
  Tensor lw = randn({256}), lb = randn({256}), w1 = (randn({1024, 256}) * 0.05).requires_grad_(),
         b1 = randn({1024}).requires_grad_(), w2 = (randn({256, 1024}) * 0.05).requires_grad_(),
         b2 = randn({256}).requires_grad_();
  Tensor operator()(const Tensor& x) const {
    const Tensor h = gelu(linear(layer_norm(x, {256}, lw, lb, 1e-5), w1, b1), "tanh");
    return linear(h, w2, b2) + x;
  }
};
template <bool kTrain, bool kPlan>
void BM_MlpPlan(benchmark::State& s) {
  const Mlp mlp;
  Tensor x = randn({s.range(0), 256}).requires_grad_(kTrain);
  CompileOptions o = options();
  o.name = "mlp";
  o.plan_memory = kPlan;
  auto compiled = compile([&](const Tensor& x) { return mlp(x); }, o);
  const std::vector<Tensor> wrt = {x, mlp.w1, mlp.b1, mlp.w2, mlp.b2};
  const Tensor up = randn({s.range(0), 256});
  auto step = [&] {
    if (!kTrain) {
      NoGradGuard no_grad;
      return std::vector<Tensor>{compiled(x)};
    }
    return autograd::grad({compiled(x)}, wrt, {up});
  };
  const std::vector<Tensor> want =
      kTrain ? autograd::grad({mlp(x)}, wrt, {up}) : std::vector<Tensor>{mlp(x)};
  const std::vector<Tensor> got = step();
  bool ok = got.size() == want.size();
  for (size_t i = 0; ok && i < got.size(); ++i) ok = allclose(got[i], want[i], 1e-3, 1e-4);
  const CompiledGraph g = compiled.graph();
  ok = ok && (kTrain == (g.backward != nullptr)) && (kTrain || g.arenas.empty() != kPlan);
  if (!verified(s, ok)) return;
  double arena = 0, one_by_one = 0;
  for (const CompiledGraph* cg : {&g, g.backward.get()}) {
    if (!cg) continue;
    for (const auto& a : cg->arenas) {
      arena += std::stod(a.bytes);
      one_by_one += std::stod(a.unplanned_bytes);
    }
  }
  for (auto _ : s) benchmark::DoNotOptimize(step());
  s.counters["arena_KiB"] = arena / 1024;
  s.counters["one_by_one_KiB"] = one_by_one / 1024;
}
BENCHMARK(BM_MlpPlan<false, false>)
    ->Name("BM_MlpForwardUnplanned")
    ->Arg(16)
    ->Arg(512)
    ->UseRealTime();
BENCHMARK(BM_MlpPlan<false, true>)->Name("BM_MlpForwardPlanned")->Arg(16)->Arg(512)->UseRealTime();
BENCHMARK(BM_MlpPlan<true, false>)->Name("BM_MlpTrainUnplanned")->Arg(16)->Arg(512)->UseRealTime();
BENCHMARK(BM_MlpPlan<true, true>)->Name("BM_MlpTrainPlanned")->Arg(16)->Arg(512)->UseRealTime();

// The MLP block (LayerNorm -> Linear -> GELU -> Linear + residual), 2048 tokens x 768, hidden
// 3072, float32, its parameters closed over: forward and backward of the parameters' gradients.
// Matmuls are most of the time; the rest is what fusion and recomputation save.
template <int kMode>  // 0 eager, 2 compiled
void BM_MlpTrain(benchmark::State& s) {
  constexpr int64_t T = 2048, D = 768, H = 3072;
  Tensor x = randn({T, D}), up = randn({T, D});
  Tensor lw = randn({D}).requires_grad_(), lb = randn({D}).requires_grad_();
  Tensor w1 = (randn({D, H}) * 0.03).requires_grad_(), b1 = zeros({H}).requires_grad_();
  Tensor w2 = (randn({H, D}) * 0.03).requires_grad_(), b2 = zeros({D}).requires_grad_();
  auto mlp = [&](const Tensor& t) {
    const Tensor h = matmul(layer_norm(t, {D}, lw, lb, 1e-5), w1) + b1;
    return matmul(gelu(h, "tanh"), w2) + b2 + t;
  };
  CompileOptions o = options();
  o.name = "mlp";
  auto compiled = compile(mlp, o);
  const std::vector<Tensor> params = {lw, lb, w1, b1, w2, b2};
  auto step = [&] { return autograd::grad({kMode == 0 ? mlp(x) : compiled(x)}, params, {up}); };
  const auto want = autograd::grad({mlp(x)}, params, {up});
  const auto got = step();
  bool ok = kMode == 0 || compiled.graph().backward != nullptr;
  for (size_t i = 0; i < got.size(); ++i) ok = ok && allclose(got[i], want[i], 1e-3, 1e-2);
  if (!verified(s, ok)) return;
  for (auto _ : s) benchmark::DoNotOptimize(step());
}
BENCHMARK(BM_MlpTrain<0>)->Name("BM_EagerMlpTrain")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MlpTrain<2>)
    ->Name("BM_CompiledMlpTrain")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// AOT packages of add_fn (n = 4 example) and add_fn_1024 (2^22), n dynamic in [2, 2^24].
std::string package_of(Tensor (*fn)(const Tensor&, const Tensor&), int64_t n, const char* name) {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/tessera-bench-aot-XXXXXX";
    return std::string(::mkdtemp(tmpl));
  }();
  const std::string path = dir + "/" + name + ".tspkg";
  aot::ExportOptions o;
  o.name = name;
  o.dynamic_shapes = {{0, 0, aot::Dim("n", 2, 1 << 24)}, {1, 0, aot::Dim("n", 2, 1 << 24)}};
  aot::compile(path, fn, o, randn({n}), randn({n}));
  return path;
}

void BM_PackageAddFnN4(benchmark::State& s) {
  aot::Package p = aot::load(package_of(add_fn, 4, "add_fn_n4"));
  Tensor x = randn({4}), y = randn({4});
  if (!verified(s, equal(p(x, y)[0].to_tensor(), x + y))) return;
  for (auto _ : s) benchmark::DoNotOptimize(p(x, y));
}
BENCHMARK(BM_PackageAddFnN4);

void BM_PackageAddFn2e22(benchmark::State& s) {
  aot::Package p = aot::load(package_of(add_fn_1024, kLarge, "add_fn_2e22"));
  Tensor x = randn({kLarge}), y = randn({kLarge});
  if (!verified(s, equal(p(x, y)[0].to_tensor(), x + y))) return;
  for (auto _ : s) benchmark::DoNotOptimize(p(x, y));
  s.SetBytesProcessed(s.iterations() * 12 * kLarge);
}
BENCHMARK(BM_PackageAddFn2e22)->UseRealTime();

// The guards of four tensor arguments plus the executor's fixed cost: the body returns an input.
void BM_GuardsFourInputs(benchmark::State& s) {
  auto compiled = compile(
      [](const Tensor& a, const Tensor&, const Tensor&, const Tensor&) { return a; }, options());
  Tensor a = randn({4, 8}), b = randn({4}), c = randn({2, 2}), d = randn({16});
  compiled(a, b, c, d);
  for (auto _ : s) benchmark::DoNotOptimize(compiled(a, b, c, d));
}
BENCHMARK(BM_GuardsFourInputs);

// Only the guards of four tensor arguments (already flattened, as the call does once).
void BM_GuardCheckFourInputs(benchmark::State& s) {
  auto compiled = compile(
      [](const Tensor& a, const Tensor&, const Tensor&, const Tensor&) { return a; }, options());
  Tensor a = randn({4, 8}), b = randn({4}), c = randn({2, 2}), d = randn({16});
  compiled(a, b, c, d);
  const std::vector<IValue> leaves = {IValue(a), IValue(b), IValue(c), IValue(d)};
  for (auto _ : s) benchmark::DoNotOptimize(compiled.guards_pass_flat(leaves));
}
BENCHMARK(BM_GuardCheckFourInputs);

void BM_GuardCheckFourDynamicInputs(benchmark::State& s) {
  CompileOptions o = options();
  o.dynamic = true;
  auto compiled =
      compile([](const Tensor& a, const Tensor&, const Tensor&, const Tensor&) { return a; }, o);
  Tensor a = randn({4, 8}), b = randn({4}), c = randn({3, 5}), d = randn({16});
  compiled(a, b, c, d);
  const std::vector<IValue> leaves = {IValue(a), IValue(b), IValue(c), IValue(d)};
  for (auto _ : s) benchmark::DoNotOptimize(compiled.guards_pass_flat(leaves));
}
BENCHMARK(BM_GuardCheckFourDynamicInputs);

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--first-call-ms") == 0) {
    Tensor x = randn({4}), y = randn({4});
    const auto t0 = std::chrono::steady_clock::now();
    auto compiled = compile(add_fn, options());
    Tensor out = compiled(x, y);
    const double ms = ms_since(t0);
    if (!equal(out, x + y)) return 1;
    std::printf("%.2f\n", ms);
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "--package-ms") == 0) {
    const std::string path = package_of(add_fn, 4, "add_fn_load");
    std::vector<double> ms;
    for (int i = 0; i < 5; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      aot::Package p = aot::load(path);
      ms.push_back(ms_since(t0));
      Tensor x = randn({7}), y = randn({7});
      if (!equal(p(x, y)[0].to_tensor(), x + y)) return 1;
    }
    std::sort(ms.begin(), ms.end());
    std::printf("%.3f\n", ms[2]);
    return 0;
  }
  const bool new_kernel = argc > 1 && std::strcmp(argv[1], "--recompile-new-kernel-ms") == 0;
  if (argc > 1 && (std::strcmp(argv[1], "--recompile-ms") == 0 || new_kernel)) {
    auto compiled = compile(add_fn, options());
    compiled(randn({4}), randn({4}));
    if (new_kernel) {
      add_kernel.clear_memory_cache();
      backend::cpu::forget_loaded();
      backend::cpu::clear_cache();
    }
    Tensor x = randn({5}), y = randn({5});
    const auto t0 = std::chrono::steady_clock::now();
    Tensor out = compiled(x, y);
    const double ms = ms_since(t0);
    if (!equal(out, x + y) || compiled.stats().graphs != 2) return 1;
    std::printf("%.3f\n", ms);
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
