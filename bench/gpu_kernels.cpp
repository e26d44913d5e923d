// GPU benchmarks without a framework (the GPU machine has no Google Benchmark): CUDA events
// around each run, the median of many runs, an L2-sized buffer rewritten between runs (untimed),
// each kernel checked against the CPU before it is timed. scripts/gpu-check.sh runs it beside
// bench/peers/triton_gpu.py (the same workloads in Triton and PyTorch, timed the same way) and
// joins both with bench/gpu_table.py into one table of ratios (issue 15).
//
//   bench_gpu_kernels               a table: kernel, size, median us, GB/s, % of the copy ceiling
//   bench_gpu_kernels --json        the same rows as JSON lines (for bench/gpu_table.py)
//   bench_gpu_kernels compiled      the seed's add_fn, and add_fn followed by a relu, under
//                                   tessera::compile at 2^24 (the fill elided, the relu fused),
//                                   and host time per compiled call at n = 4; softmax (the op
//                                   and written with amax/exp/sum) and layer_norm compiled; then
//                                   the same add_fn as a CUDA AOT package: its load time, the
//                                   package at 2^24 and per call at n = 4 beside the JIT's (impl
//                                   "jit") (JSON lines)
//   bench_gpu_kernels compiled-first cold|warm   the compiled add_fn's first call in this
//                                   process (n = 4) and its recompile to a dynamic size (n = 5),
//                                   the cache as TESSERA_CACHE_DIR has it; the CUDA context's
//                                   creation apart (JSON lines)
//   bench_gpu_kernels autotune cold|warm   the first tuned launch of the seed's four add
//                                   configs and of an eight-config softmax, cold or warm as
//                                   TESSERA_CACHE_DIR has it (JSON lines)
//   bench_gpu_kernels reductions    the built-in reductions' rows of the table only
//   bench_gpu_kernels launch        host time of one hot launch (n = 1024) beside a bare
//                                   cuLaunchKernel of the same generated kernel (JSON lines)
//   bench_gpu_kernels matmul        Triton's tutorial matmul (fp16, bf16, tf32; 4096^3; configs
//                                   in matmul_rows) in TFLOP/s, checked against a float64 product
//                                   of two corners; impl "tessera <path> <config>": the path is
//                                   "tensor cores" (wgmma on sm_90), "wgmma, tiles stages - 2
//                                   ahead" (TESSERA_CUDA_WGMMA_ASYNC=1), "wgmma waited in its
//                                   iteration" (TESSERA_CUDA_WGMMA_ASYNC=0), "mma.sync"
//                                   (TESSERA_CUDA_WGMMA=0) or "CUDA cores" (TESSERA_CUDA_MMA=0)
//                                   (JSON lines)
//   bench_gpu_kernels attention     Triton's tutorial 06 forward (examples/attention.h), bf16,
//                                   4 x 32 heads x 4096 x {64, 128}, causal and not, autotuned
//                                   (JSON lines; the peers: triton_gpu.py attention)
//   bench_gpu_kernels training      issue 17's MLP block (LayerNorm, Linear, GELU, Linear +
//                                   residual; bf16, 8 x 1024 tokens x 768, hidden 3072) forward
//                                   and forward + backward (the six parameters' gradients):
//                                   tessera::compile (impl "tessera") beside tessera eager, and
//                                   the first compiled call (JSON lines)
//   bench_gpu_kernels training-profile one compiled and one eager step of that block between
//                                   cuProfilerStart/Stop, for ncu --profile-from-start off
//   bench_gpu_kernels first-launch cold|warm   the first launch of a new kernel in this process,
//                                   to its result (the cache as TESSERA_CACHE_DIR has it; JSON
//                                   lines)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include <dlfcn.h>
#include <unistd.h>

#include "../examples/attention.h"
#include "../examples/layer_norm.h"
#include "../examples/seed_autotune.h"
#include "backend/cuda/cuda_backend.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/module.h"
#include "tessera/aot.h"
#include "tessera/autograd.h"
#include "tessera/compile.h"
#include "tessera/tessera.h"
#include "tessera/tl.h"
#include "tessera/trt/scalar.h"
#include "tl/jit.h"

using namespace tessera;
namespace tl = tessera::tl;
namespace rc = tessera::runtime::cuda;

TL_JIT(add_kernel, tl::Ptr x, tl::Ptr y, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto mask = offs < n;
  tl::store(out + offs, tl::load(x + offs, mask) + tl::load(y + offs, mask), mask);
}

TL_JIT(softmax_kernel, tl::Ptr x, tl::Ptr out, tl::Int n_cols, tl::Const BLOCK) {
  auto row = tl::program_id(0);
  auto cols = tl::arange(0, BLOCK);
  auto mask = cols < n_cols;
  auto v = tl::load(x + row * n_cols + cols, mask, -INFINITY);
  auto e = tl::exp(v - tl::max(v, 0));
  tl::store(out + row * n_cols + cols, e / tl::sum(e, 0), mask);
}

// The same softmax with tl::fast_exp: Triton's tl.exp (ex2.approx of x * log2(e), up to 63 ulp at
// the ends of the range where tl::exp keeps 2; bench/experiments/softmax_run.sh measured both).
TL_JIT(softmax_fast_kernel, tl::Ptr x, tl::Ptr out, tl::Int n_cols, tl::Const BLOCK) {
  auto row = tl::program_id(0);
  auto cols = tl::arange(0, BLOCK);
  auto mask = cols < n_cols;
  auto v = tl::load(x + row * n_cols + cols, mask, -INFINITY);
  auto e = tl::fast_exp(v - tl::max(v, 0));
  tl::store(out + row * n_cols + cols, e / tl::sum(e, 0), mask);
}

TL_JIT(copy_kernel, tl::Ptr x, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto mask = offs < n;
  tl::store(out + offs, tl::load(x + offs, mask), mask);
}

// TB: b is stored [N, K] (a linear layer's weight: c = a @ b.T), K contiguous in b's tile.
TL_JIT(mm_kernel, tl::Ptr a_ptr, tl::Ptr b_ptr, tl::Ptr c_ptr, tl::Int M, tl::Int N, tl::Int K,
       tl::Const BM, tl::Const BN, tl::Const BK, tl::Const OUT, tl::Const TB) {
  auto pid_m = tl::program_id(0), pid_n = tl::program_id(1);
  auto offs_m = pid_m * BM + tl::arange(0, BM);
  auto offs_n = pid_n * BN + tl::arange(0, BN);
  auto offs_k = tl::arange(0, BK);
  const bool tb = TB.int_value() != 0;
  tl::Var a_ptrs = a_ptr + (offs_m[{tl::_, tl::None}] * K + offs_k[{tl::None, tl::_}]);
  tl::Var b_ptrs = tb ? b_ptr + (offs_n[{tl::None, tl::_}] * K + offs_k[{tl::_, tl::None}])
                      : b_ptr + (offs_k[{tl::_, tl::None}] * N + offs_n[{tl::None, tl::_}]);
  tl::Var acc = tl::zeros({BM, BN}, tl::float32);
  tl::range(0, tl::cdiv(K, BK), [&](tl::Tile) {
    acc = tl::dot(tl::load(a_ptrs), tl::load(b_ptrs), tl::Operand(acc));
    a_ptrs += BK;
    if (tb)
      b_ptrs += BK;
    else
      b_ptrs += BK * N;
  });
  tl::Tile out = acc;
  auto c_ptrs = c_ptr + offs_m[{tl::_, tl::None}] * N + offs_n[{tl::None, tl::_}];
  // OUT: 0 float16, 1 bfloat16, 2 float32 (the tf32 row)
  const int64_t o = OUT.int_value();
  tl::store(c_ptrs, o == 2 ? out : out.to(o == 1 ? tl::bfloat16 : tl::float16));
}

namespace {

bool g_json = false;

double median_us(const std::function<void()>& run, Tensor& flush) {
  for (int i = 0; i < 5; ++i) run();
  std::vector<double> t;
  rc::Event a(0), b(0);
  for (int i = 0; i < 50; ++i) {
    flush.fill_(static_cast<double>(i));  // evicts the inputs from L2 (untimed)
    a.record(rc::current_stream(0));
    run();
    b.record(rc::current_stream(0));
    b.synchronize();
    t.push_back(1000.0 * rc::Event::elapsed_ms(a, b));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void row(const char* what, const std::string& size, double us, double bytes, double copy_gbs) {
  const double gbs = bytes / us / 1e3;
  if (g_json) {
    std::printf(
        "{\"kernel\": \"%s\", \"size\": \"%s\", \"impl\": \"tessera\", \"us\": %.3f, "
        "\"gbs\": %.1f}\n",
        what, size.c_str(), us, gbs);
    return;
  }
  std::printf("| %-22s | %-14s | %9.2f | %8.0f | %5.0f%% |\n", what, size.c_str(), us, gbs,
              copy_gbs > 0 ? 100.0 * gbs / copy_gbs : 100.0);
}

void row_impl(const char* what, const std::string& size, const char* impl, double us,
              double bytes) {
  std::printf(
      "{\"kernel\": \"%s\", \"size\": \"%s\", \"impl\": \"%s\", \"us\": %.3f, "
      "\"gbs\": %.1f}\n",
      what, size.c_str(), impl, us, bytes / us / 1e3);
}

std::string pow2(int64_t n) {
  return "2^" + std::to_string(__builtin_ctzll(n));
}

double host_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Host microseconds per call over 2000 calls (the GPU's queue drained after, untimed).
double host_us_per_call(const std::function<void()>& call) {
  const double t0 = host_seconds();
  for (int i = 0; i < 2000; ++i) call();
  const double t1 = host_seconds();
  rc::current_stream(0).synchronize();
  return (t1 - t0) / 2000 * 1e6;
}

// The seed's add_fn as a CUDA AOT package (issue 18) beside the JIT-compiled function `jit`: the
// package's load, the kernel at 2^24 and the host time per call at n = 4 with every guard on.
template <class F, class C>
int aot_rows(F add_fn, C& jit, const Tensor& x, const Tensor& y, const Tensor& a, const Tensor& b,
             Tensor& flush) {
  char tmpl[] = "/tmp/tessera-bench-aot-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  const std::string path = dir + "/add_fn.tspkg";
  aot::ExportOptions o;
  o.name = "add_fn";
  o.dynamic_shapes = {{0, 0, aot::Dim("n", 2, int64_t{1} << 30)},
                      {1, 0, aot::Dim("n", 2, int64_t{1} << 30)}};
  aot::compile(path, add_fn, o, x, y);
  const double t0 = host_seconds();
  aot::Package p = aot::load(path);
  const double load_ms = (host_seconds() - t0) * 1e3;
  std::remove(path.c_str());
  ::rmdir(dir.c_str());
  if (!equal(p(x, y)[0].to_tensor().cpu(), x.cpu() + y.cpu()))
    return std::printf("add_fn package: wrong result\n"), 1;
  std::printf(
      "{\"kernel\": \"add_fn AOT package load\", \"size\": \"-\", \"impl\": \"tessera\", "
      "\"us\": %.1f}\n",
      load_ms * 1e3);
  const double n = static_cast<double>(x.numel());
  for (const char* impl : {"tessera", "jit"}) {
    const bool pkg = impl[0] == 't';
    row_impl("add_fn AOT package f32", "2^24", impl,
             median_us([&] { pkg ? (void)p(x, y) : (void)jit(x, y); }, flush), 12.0 * n);
  }
  for (int round = 0; round < 3; ++round) {
    for (const char* impl : {"tessera", "jit"}) {
      const bool pkg = impl[0] == 't';
      auto call = [&] { pkg ? (void)p(a, b) : (void)jit(a, b); };
      for (int i = 0; i < 100; ++i) call();
      rc::current_stream(0).synchronize();
      std::printf(
          "{\"kernel\": \"add_fn AOT package, host time per call\", \"size\": \"n=4\", "
          "\"impl\": \"%s\", \"us\": %.2f}\n",
          impl, host_us_per_call(call));
    }
  }
  return 0;
}

// Issue 17's row functions under tessera::compile (bench/peers/triton_gpu.py compiled times the
// same under torch.compile): softmax as the operator and written with amax, sub, exp, sum and
// div (float32, 4096 x {1024, 4096}), and the layer_norm operator (bfloat16, 16384 x 4096, with
// weight and bias); bytes are one read and one write of x.
int compiled_row_kernels(Tensor& flush) {
  const Device cuda("cuda");
  CompileOptions o;
  o.fullgraph = true;
  auto softmax_op = compile([](const Tensor& x) { return softmax(x, 1); }, o);
  auto softmax_ops = compile(
      [](const Tensor& x) {
        const Tensor e = exp(x - amax(x, {1}, true));
        return e / e.sum({1}, true);
      },
      o);
  for (int64_t cols : {1024, 4096}) {
    const Tensor x = randn({4096, cols}, TensorOptions().device(cuda));
    const Tensor want = softmax(x.cpu(), 1);
    const std::string size = "4096x" + std::to_string(cols);
    const std::pair<const char*, std::function<Tensor(const Tensor&)>> fns[] = {
        {"softmax compiled f32", [&](const Tensor& t) { return softmax_op(t); }},
        {"softmax from ops compiled f32", [&](const Tensor& t) { return softmax_ops(t); }}};
    for (const auto& fn : fns) {
      const char* what = fn.first;
      const auto& f = fn.second;
      if (!allclose(f(x).cpu(), want, 1e-5, 1e-6))
        return std::printf("%s: wrong result\n", what), 1;
      row(what, size, median_us([&] { (void)f(x); }, flush), 8.0 * 4096 * static_cast<double>(cols),
          0);
    }
  }
  const int64_t M = 16384, N = 4096;
  const TensorOptions bf = TensorOptions().device(cuda).dtype(DType::BFloat16);
  const Tensor x = randn({M, N}, bf), w = rand({N}, bf), b = randn({N}, bf);
  auto ln = compile([N](const Tensor& x, const Tensor& w,
                        const Tensor& b) { return layer_norm(x, {N}, w, b, 1e-5); },
                    o);
  const Tensor ref = layer_norm(x.cpu().to(DType::Float32), {N}, w.cpu().to(DType::Float32),
                                b.cpu().to(DType::Float32), 1e-5);
  if (!allclose(ln(x, w, b).cpu().to(DType::Float32), ref, 2e-2, 3e-2))
    return std::printf("layer_norm compiled: wrong result\n"), 1;
  row("layer_norm compiled bf16", "16384x4096", median_us([&] { (void)ln(x, w, b); }, flush),
      4.0 * M * N, 0);
  return 0;
}

// Autotuning on the GPU (issue 15), the first tuned launch in this process to its result: the
// seed's four add configs (BLOCK_SIZE 4 and 2, num_warps 8 and 4, num_stages 3 and 4; n = 4, as
// the seed) and a softmax over eight block sizes (1024 x 4096 float32, key n_cols); cold (an
// empty TESSERA_CACHE_DIR: every config compiled and timed) or warm (a new process: the tuning
// database's hit, the chosen kernel from the disk cache). Beside Triton's triton.autotune of the
// same kernels and configs (bench/peers/triton_gpu.py autotune).
int autotune_rows(const std::string& cache) {
  const TensorOptions f32 = TensorOptions().device(Device("cuda"));
  Tensor x = randn({4}, f32), y = randn({4}, f32), out = empty({4}, f32);
  Tensor a = randn({1024, 4096}, f32);
  rc::current_stream(0).synchronize();
  auto add_tuned =
      tl::autotune(seed_autotune::add_kernel_autotuned,
                   {tl::Config({{"BLOCK_SIZE", 4}}, 8, 3), tl::Config({{"BLOCK_SIZE", 4}}, 4, 4),
                    tl::Config({{"BLOCK_SIZE", 2}}, 8, 3), tl::Config({{"BLOCK_SIZE", 2}}, 4, 4)},
                   {});
  const double t0 = host_seconds();
  auto grid = [](const tl::Meta& m) { return tl::Grid{tl::cdiv(int64_t{4}, m["BLOCK_SIZE"])}; };
  add_tuned[grid](x, y, out, int64_t{4});
  rc::current_stream(0).synchronize();
  const double add_us = (host_seconds() - t0) * 1e6;
  if (!equal(out.cpu(), x.cpu() + y.cpu())) return std::printf("autotuned add: wrong\n"), 1;
  const int add_timed = add_tuned.last_round_timed();
  auto tuned = tl::autotune(
      seed_autotune::softmax_looped,
      seed_autotune::softmax_configs({32, 64, 128, 256, 512, 1024, 2048, 4096}), {"n_cols"});
  const double t1 = host_seconds();
  Tensor s = seed_autotune::softmax_with(tuned, a);
  rc::current_stream(0).synchronize();
  const double softmax_us = (host_seconds() - t1) * 1e6;
  if (!allclose(s.cpu(), softmax(a.cpu(), 1), 1e-5, 1e-7))
    return std::printf("autotuned softmax: wrong\n"), 1;
  const std::pair<const char*, std::pair<double, int>> rows[] = {
      {"seed add, 4 configs, n=4", {add_us, add_timed}},
      {"softmax, 8 configs, 1024x4096 f32", {softmax_us, tuned.last_round_timed()}}};
  for (const auto& [size, r] : rows) {
    std::printf(
        "{\"kernel\": \"autotune, first tuned launch, %s cache\", \"size\": \"%s\", "
        "\"impl\": \"tessera\", \"us\": %.1f, \"timed\": %d}\n",
        cache.c_str(), size, r.first, r.second);
  }
  return 0;
}

// The seed's add_fn: a zeros_like, then the user kernel over it.
Tensor seed_add_fn(const Tensor& x, const Tensor& y) {
  Tensor output = zeros_like(x);
  auto n = output.numel();
  auto grid = [&](const tl::Meta& m) { return tl::Grid{tl::cdiv(n, m["BLOCK"])}; };
  add_kernel[grid](x, y, output, n, tl::meta("BLOCK", 1024));
  return output;
}

// The first call of the compiled add_fn in this process (n = 4: trace, guards, the kernel's
// code generation and NVRTC with a cold TESSERA_CACHE_DIR, or its disk-cache hit with a warm
// one), to its result; then the call at n = 5 that recompiles it with a dynamic size. The CUDA
// context's creation (and the inputs') is timed apart, before both.
int compiled_first(const std::string& cache) {
  const double t_ctx = host_seconds();
  const TensorOptions f32 = TensorOptions().device(Device("cuda"));
  Tensor x = randn({4}, f32), y = randn({4}, f32), x5 = randn({5}, f32), y5 = randn({5}, f32);
  rc::current_stream(0).synchronize();
  const double ctx_us = (host_seconds() - t_ctx) * 1e6;
  CompileOptions o;
  o.fullgraph = true;
  const double t0 = host_seconds();
  auto c = compile(seed_add_fn, o);
  Tensor out = c(x, y);
  rc::current_stream(0).synchronize();
  const double first_us = (host_seconds() - t0) * 1e6;
  if (!equal(out.cpu(), x.cpu() + y.cpu())) return std::printf("add_fn first call: wrong\n"), 1;
  const double t1 = host_seconds();
  Tensor out5 = c(x5, y5);
  rc::current_stream(0).synchronize();
  const double recompile_us = (host_seconds() - t1) * 1e6;
  if (!equal(out5.cpu(), x5.cpu() + y5.cpu()) || c.stats().graphs != 2)
    return std::printf("add_fn recompile: wrong result or no recompile\n"), 1;
  const char* rows[][2] = {{"add_fn compiled, first call", "n=4"},
                           {"add_fn compiled, recompile to a dynamic size", "n=5 after n=4"},
                           {"CUDA context and inputs (not in the first call)", "-"}};
  const double us[] = {first_us, recompile_us, ctx_us};
  for (int i = 0; i < 3; ++i) {
    std::printf(
        "{\"kernel\": \"%s, %s caches\", \"size\": \"%s\", \"impl\": \"tessera\", "
        "\"us\": %.1f}\n",
        rows[i][0], cache.c_str(), rows[i][1], us[i]);
  }
  return 0;
}

// The seed's add_fn under tessera::compile (issue 17): the zeros_like is elided (the kernel
// stores every element) and a following relu runs inside the kernel's stores.
int compiled_rows() {
  g_json = true;
  const Device cuda("cuda");
  const TensorOptions f32 = TensorOptions().device(cuda);
  Tensor flush = empty({64 << 20}, f32);
  auto add_fn = seed_add_fn;
  auto add_relu = [&](const Tensor& x, const Tensor& y) { return add_fn(x, y).relu(); };
  const int64_t n = int64_t{1} << 24;
  Tensor x = randn({n}, f32), y = randn({n}, f32);
  CompileOptions o;
  o.fullgraph = true;
  auto c1 = compile(add_fn, o);
  auto c2 = compile(add_relu, o);
  if (!equal(c1(x, y).cpu(), x.cpu() + y.cpu())) return std::printf("add_fn: wrong result\n"), 1;
  if (!equal(c2(x, y).cpu(), (x.cpu() + y.cpu()).relu()))
    return std::printf("add_fn+relu: wrong result\n"), 1;
  row("add_fn compiled f32", "2^24", median_us([&] { (void)c1(x, y); }, flush), 12.0 * n, 0);
  row("add_fn+relu compiled f32", "2^24", median_us([&] { (void)c2(x, y); }, flush), 12.0 * n, 0);
  Tensor a = randn({4}, f32), b = randn({4}, f32);
  for (int i = 0; i < 100; ++i) (void)c1(a, b);
  rc::current_stream(0).synchronize();
  for (int round = 0; round < 3; ++round) {
    std::printf(
        "{\"kernel\": \"add_fn compiled, host time per call\", \"size\": \"n=4\", "
        "\"impl\": \"tessera\", \"us\": %.2f}\n",
        host_us_per_call([&] { (void)c1(a, b); }));
  }
  if (const int rc = compiled_row_kernels(flush)) return rc;
  return aot_rows(add_fn, c1, x, y, a, b, flush);
}

// Issue 17's MLP block in bfloat16 on the GPU (LayerNorm, Linear, GELU, Linear + residual; 8 x 1024
// tokens x 768, hidden 3072), eager and compiled.
struct MlpBlock {
  static constexpr int64_t T = 8 * 1024, D = 768, H = 3072;
  TensorOptions bf = TensorOptions().device(Device("cuda")).dtype(DType::BFloat16);
  Tensor x = randn({T, D}, bf), up = randn({T, D}, bf);
  Tensor lw = randn({D}, bf).requires_grad_(), lb = randn({D}, bf).requires_grad_();
  Tensor w1 = (randn({D, H}, bf) * 0.03).detach().requires_grad_();
  Tensor b1 = zeros({H}, bf).requires_grad_();
  Tensor w2 = (randn({H, D}, bf) * 0.03).detach().requires_grad_();
  Tensor b2 = zeros({D}, bf).requires_grad_();
  std::vector<Tensor> params = {lw, lb, w1, b1, w2, b2};
  std::function<Tensor(const Tensor&)> eager = [this](const Tensor& t) {
    const Tensor h = matmul(layer_norm(t, {D}, lw, lb, 1e-5), w1) + b1;
    return matmul(gelu(h, "tanh"), w2) + b2 + t;
  };
  Compiled<Tensor, std::tuple<Tensor>> compiled = compile(eager, [] {
    CompileOptions o;
    o.fullgraph = true;
    o.name = "mlp";
    return o;
  }());

  Tensor forward(bool c) {
    NoGradGuard no_grad;
    return c ? compiled(x) : eager(x);
  }
  std::vector<Tensor> step(bool c) {
    return autograd::grad({c ? compiled(x) : eager(x)}, params, {up});
  }
};

// Forward, then forward and backward of the parameters' gradients, compiled and eager, checked
// against each other first.
int training_rows() {
  g_json = true;
  Tensor flush = empty({64 << 20}, TensorOptions().device(Device("cuda")));
  MlpBlock m;
  const double t0 = host_seconds();
  auto got = m.step(true);
  rc::current_stream(0).synchronize();
  const double first = host_seconds() - t0;
  auto want = m.step(false);
  for (size_t i = 0; i < got.size(); ++i) {
    if (!allclose(got[i].cpu().to(DType::Float32), want[i].cpu().to(DType::Float32), 5e-2, 5e-1))
      return std::printf("mlp: gradient %zu of the compiled step differs from eager\n", i), 1;
  }
  if (!m.compiled.graph().backward) return std::printf("mlp: no compiled backward\n"), 1;
  const std::string size = "8x1024x768";
  for (bool c : {true, false}) {
    const char* impl = c ? "tessera" : "tessera eager";
    std::printf(
        "{\"kernel\": \"mlp block bf16 forward\", \"size\": \"%s\", \"impl\": \"%s\", "
        "\"us\": %.1f}\n",
        size.c_str(), impl, median_us([&] { (void)m.forward(c); }, flush));
    std::printf(
        "{\"kernel\": \"mlp block bf16 forward+backward\", \"size\": \"%s\", "
        "\"impl\": \"%s\", \"us\": %.1f}\n",
        size.c_str(), impl, median_us([&] { (void)m.step(c); }, flush));
  }
  std::printf(
      "{\"kernel\": \"mlp block first compiled step (trace, compile, run)\", \"size\": "
      "\"%s\", \"impl\": \"tessera\", \"us\": %.0f}\n",
      size.c_str(), first * 1e6);
  return 0;
}

// One compiled and one eager step of the MLP block between cuProfilerStart and cuProfilerStop, for
// `ncu --profile-from-start off` (scripts/gpu-check.sh's "profile training" step): each kernel's
// time, in launch order (TESSERA_LOGS=graph prints the compiled graphs beside it).
int training_profile() {
  using Fn = int (*)();
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  const auto start = lib ? reinterpret_cast<Fn>(dlsym(lib, "cuProfilerStart")) : nullptr;
  const auto stop = lib ? reinterpret_cast<Fn>(dlsym(lib, "cuProfilerStop")) : nullptr;
  if (!start || !stop) return std::printf("no cuProfilerStart in libcuda\n"), 1;
  MlpBlock m;
  for (bool c : {true, false}) {
    for (int i = 0; i < 2; ++i) (void)m.step(c);  // compiled, cached, allocator warm
    rc::current_stream(0).synchronize();
    std::printf("== %s step\n", c ? "compiled" : "eager");
    std::fflush(stdout);
    start();
    (void)m.step(c);
    rc::current_stream(0).synchronize();
    stop();
  }
  return 0;
}

// Keeps a value alive for the optimizer (a host-only loop would otherwise fold away).
void benchmark_sink(const void* p) {
  static const void* volatile sink = nullptr;
  sink = p;
}

// Host time per launch of the seed's add at n = 1024 through tessera, and through a bare
// cuLaunchKernel of the same generated kernel compiled by the same NVRTC (three rounds each).
int launch_overhead() {
  const Device cuda("cuda");
  const int64_t n = 1024;
  Tensor x = randn({n}, TensorOptions().device(cuda)), y = randn({n}, TensorOptions().device(cuda));
  Tensor out = empty({n}, TensorOptions().device(cuda));
  auto launch = [&] { add_kernel[{1}](x, y, out, n, tl::meta("BLOCK", 1024)); };
  for (int i = 0; i < 100; ++i) launch();
  rc::current_stream(0).synchronize();
  const auto& fn = *add_kernel.state().last->function;
  const backend::cuda::Emitted e = backend::cuda::emit(fn, 227 * 1024);
  const DeviceProperties props = get_device_properties(cuda);
  const std::string cubin =
      backend::cuda::compile_for_arch(e.source, "add_kernel", props.major * 10 + props.minor);
  rc::Module module(cubin, 0, "bare add_kernel");
  rc::CUfunction f = module.function(backend::cuda::entry_symbol(fn.name));
  trt::Grid grid{1, 1, 1};
  trt::Arg slots[4];
  slots[0].p = x.data_ptr();
  slots[1].p = y.data_ptr();
  slots[2].p = out.data_ptr();
  slots[3].i = n;
  void* params[2] = {&grid, slots};
  const rc::Driver& d = rc::require_driver("bench");
  rc::CUstream stream = rc::current_stream(0).handle();
  auto bare = [&] {
    d.cuLaunchKernel(f, 1, 1, 1, static_cast<unsigned>(e.threads), 1, 1,
                     static_cast<unsigned>(e.shared_bytes), stream, params, nullptr);
  };
  out.fill_(0.0);
  bare();
  rc::current_stream(0).synchronize();
  if (!equal(out.cpu(), x.cpu() + y.cpu())) return std::printf("bare launch: wrong result\n"), 1;
  for (int i = 0; i < 100; ++i) bare();
  rc::current_stream(0).synchronize();
  // Where tessera's time goes, each step alone: the runtime's launch call (device, stream,
  // journal) on the bare cubin; the backend's launch of the cached specialization with arguments
  // bound once (slot packing, then the runtime call); binding and the specialization lookup
  // without a launch (the host work before the backend).
  const unsigned dims[3] = {1, 1, 1};
  const unsigned block[3] = {static_cast<unsigned>(e.threads), 1, 1};
  const std::string what = "kernel add_kernel";
  auto runtime_call = [&] {
    rc::launch(f, 0, dims, block, static_cast<unsigned>(e.shared_bytes), params, what);
  };
  auto& st = add_kernel.state();
  const tl::KernelArg kargs[] = {tl::KernelArg(x), tl::KernelArg(y), tl::KernelArg(out),
                                 tl::KernelArg(SymInt(n)), tl::KernelArg(tl::meta("BLOCK", 1024))};
  const ArrayRef<tl::KernelArg> kargs_ref(kargs, 5);
  SmallVector<tl::detail::BoundArg, 16> bound;
  tl::detail::LaunchOptions opts;
  tl::detail::bind(st, kargs_ref, bound, opts, SourceLoc());
  const auto spec = tl::detail::get_kernel(st, bound, opts, SourceLoc());
  SmallVector<backend::Arg, 16> bargs(bound.size());
  for (size_t i = 0; i < bound.size(); ++i) {
    bargs[i].kind = static_cast<ir::ParamKind>(bound[i].kind);
    bargs[i].ptr = bound[i].ptr;
    bargs[i].i = bound[i].i;
    bargs[i].f = bound[i].f;
    bargs[i].tensor = bound[i].tensor;
  }
  auto backend_launch = [&] {
    spec->backend->launch(spec->code, backend::GridSize{trt::Grid{1, 1, 1}, 1},
                          ArrayRef<backend::Arg>(bargs.data(), bargs.size()));
  };
  auto host_only = [&] {
    SmallVector<tl::detail::BoundArg, 16> b;
    tl::detail::LaunchOptions o;
    tl::detail::bind(st, kargs_ref, b, o, SourceLoc());
    benchmark_sink(tl::detail::get_kernel(st, b, o, SourceLoc()).get());
  };
  // CUDA graphs (CompileOptions::cuda_graphs): a compiled chain of 24 unfused ops on 1024 floats
  // (24 launches a call) run as is, and replayed from its CUDA graph (two copies and one graph
  // launch a call).
  auto chain = [](const Tensor& x) {
    Tensor t = x;
    for (int i = 0; i < 8; ++i) t = (t * 1.001 + 0.5).sin();
    return t;
  };
  CompileOptions co;
  co.fullgraph = true;
  co.fuse = false;
  co.name = "chain24";
  auto chain_plain = compile(chain, co);
  co.cuda_graphs = true;
  auto chain_graphs = compile(chain, co);
  for (int i = 0; i < 3; ++i) {
    chain_plain(x);
    chain_graphs(x);
  }
  if (!allclose(chain_graphs(x).cpu(), chain(x.cpu()), 1e-5, 1e-5))
    return std::printf("chain24 with CUDA graphs: wrong (max diff %g)\n",
                       (chain_graphs(x).cpu() - chain(x.cpu())).abs().max().item<double>()),
           1;
  // (A graph the capture refuses runs as before: its rows then say so; TESSERA_LOGS=cuda_graphs
  // gives the reason.)
  const bool captured = chain_graphs.stats().cuda_graphs == 1;
  if (!captured)
    std::printf("chain24: no CUDA graph captured (TESSERA_LOGS=cuda_graphs says why)\n");
  for (int round = 0; round < 3; ++round) {
    for (auto [impl, fn_] : {std::pair<const char*, std::function<void()>>{"tessera", launch},
                             {"bare cuLaunchKernel", bare},
                             {"compiled chain of 24 ops, per call", [&] { chain_plain(x); }},
                             {captured ? "compiled chain of 24 ops, CUDA graphs, per call"
                                       : "compiled chain of 24 ops, CUDA graphs refused, per call",
                              [&] { chain_graphs(x); }},
                             {"step: the runtime's launch call", runtime_call},
                             {"step: the backend's launch, arguments bound once", backend_launch},
                             {"step: bind and specialization lookup, no launch", host_only}}) {
      std::printf(
          "{\"kernel\": \"hot launch host time\", \"size\": \"n=1024\", \"impl\": "
          "\"%s\", \"us\": %.2f}\n",
          impl, host_us_per_call(fn_));
    }
  }
  return 0;
}

// The first launch of the seed's add in this process, to its result: trace, specialize, generate,
// NVRTC and load with a cold TESSERA_CACHE_DIR; the disk cache's hit with a warm one.
int first_launch(const std::string& cache) {
  const Device cuda("cuda");
  const int64_t n = int64_t{1} << 20;
  Tensor x = randn({n}, TensorOptions().device(cuda)), y = randn({n}, TensorOptions().device(cuda));
  Tensor out = empty({n}, TensorOptions().device(cuda));
  rc::current_stream(0).synchronize();
  const double t0 = host_seconds();
  add_kernel[{tl::cdiv(n, 1024)}](x, y, out, n, tl::meta("BLOCK", 1024));
  rc::current_stream(0).synchronize();
  const double us = (host_seconds() - t0) * 1e6;
  if (!equal(out.cpu(), x.cpu() + y.cpu())) return std::printf("first launch: wrong result\n"), 1;
  std::printf(
      "{\"kernel\": \"first launch\", \"size\": \"add 2^20, %s cache\", \"impl\": "
      "\"tessera\", \"us\": %.1f}\n",
      cache.c_str(), us);
  return 0;
}

}  // namespace

// Triton's tutorial matmul shape at 4096^3 (sizes divisible by the blocks: no masks), fp16, bf16
// and float32 (tf32 tensor cores, Triton's default precision) in, fp32 accumulation, the same type
// out; the first and last 64 x 64 corners checked against float64 (a wrong one fails the run).
// Configs: the tutorial's 128 x 128 x 32 with 8
// warps (3 stages and 1), and Triton's Hopper configs 128 x 128 x 64 (4 warps, 4 stages) and
// 128 x 256 x 64 (8 warps, 3 stages); and bfloat16 x @ w.T (b stored [N, K]) at the Hopper
// configs, 4096^3 and 8192^3. The path is the knobs': wgmma on sm_90 by default,
// mma.sync with TESSERA_CUDA_WGMMA=0, CUDA cores with TESSERA_CUDA_MMA=0 (first config only).
int matmul_rows() {
  const Device cuda("cuda");
  Tensor flush = empty({64 << 20}, TensorOptions().device(cuda));
  const bool mma = knobs().cuda_mma;
  const std::string path = !mma                            ? "CUDA cores"
                           : !knobs().cuda_wgmma           ? "mma.sync"
                           : knobs().cuda_wgmma_async == 0 ? "wgmma waited in its iteration"
                           : knobs().cuda_wgmma_async == 1 ? "wgmma, tiles stages - 2 ahead"
                                                           : "tensor cores";
  struct Config {
    int64_t bm, bn, bk, warps, stages;
  };
  const Config configs[] = {
      {128, 128, 32, 8, 3}, {128, 128, 32, 8, 1}, {128, 128, 64, 4, 4}, {128, 256, 64, 8, 3}};
  bool wrong = false;
  // 4096^3 in every config and type; 8192^3 (the cuBLAS target) in bfloat16 at the two
  // Hopper configs
  for (const int64_t n : {int64_t{4096}, int64_t{8192}})
    for (const Config& cf : configs) {
      if (!mma && &cf != &configs[0]) continue;
      if (n == 8192 && (cf.bk != 64 || !mma)) continue;
      for (int variant = 0; variant < 4; ++variant) {
        const bool tb = variant == 3;  // (bfloat16 x @ w.T)
        const DType dt = variant == 0   ? DType::Float16
                         : variant == 2 ? DType::Float32
                                        : DType::BFloat16;
        if (n == 8192 && dt != DType::BFloat16) continue;
        if (tb && (cf.bk != 64 || !mma)) continue;
        Tensor a = randn({n, n}).to(dt).to(cuda), b = randn({n, n}).to(dt).to(cuda);
        Tensor c = empty({n, n}, TensorOptions().dtype(dt).device(cuda));
        auto run = [&] {
          mm_kernel[{n / cf.bm, n / cf.bn}](
              a, b, c, n, n, n, tl::meta("BM", cf.bm), tl::meta("BN", cf.bn), tl::meta("BK", cf.bk),
              tl::meta("OUT", dt == DType::Float32    ? 2
                              : dt == DType::BFloat16 ? 1
                                                      : 0),
              tl::meta("TB", tb), tl::num_warps(cf.warps), tl::num_stages(cf.stages));
        };
        const std::string cfg = std::to_string(cf.bm) + "x" + std::to_string(cf.bn) + "x" +
                                std::to_string(cf.bk) + " w" + std::to_string(cf.warps) + " s" +
                                std::to_string(cf.stages);
        // BENCH_MATMUL_ONLY: one config and dtype ("128x128x64 w4 s4 bfloat16", "... 8192"; for a
        // profiler)
        const char* only = std::getenv("BENCH_MATMUL_ONLY");
        const std::string kind = std::string(dtype_name(dt)) + (tb ? " x @ w.T" : "");
        const std::string which = cfg + " " + kind + (n == 4096 ? "" : " " + std::to_string(n));
        if (only && *only && which != only) continue;
        c.fill_(std::nan(""));
        run();
        // (b's first or last 64 columns of the product: of b.T when tb)
        auto b_cols = [&](int64_t at) {
          const Tensor hb = b.cpu();
          return (tb ? hb.narrow(0, at, 64).t() : hb.narrow(1, at, 64)).to(DType::Float64);
        };
        const Tensor want = a.cpu().narrow(0, 0, 64).to(DType::Float64).matmul(b_cols(0));
        const double err = (c.cpu().narrow(0, 0, 64).narrow(1, 0, 64).to(DType::Float64) - want)
                               .abs()
                               .max()
                               .item<double>();
        // one rounding of c (up to ~256), or tf32's inputs (10-bit mantissas, 4096 terms)
        const double tol = dt == DType::BFloat16 ? 2.0 : dt == DType::Float16 ? 0.25 : 1.0;
        // (the last rows too: they are the last warpgroup's)
        const Tensor want_end =
            a.cpu().narrow(0, n - 64, 64).to(DType::Float64).matmul(b_cols(n - 64));
        const double err_end =
            (c.cpu().narrow(0, n - 64, 64).narrow(1, n - 64, 64).to(DType::Float64) - want_end)
                .abs()
                .max()
                .item<double>();
        if (!(err <= tol) || !(err_end <= tol)) {
          std::printf("matmul %s %s %s: error %g / %g\n", kind.c_str(), path.c_str(), cfg.c_str(),
                      err, err_end);
          wrong = true;  // (the other configs still run; the run fails)
          continue;
        }
        const double us = median_us(run, flush);
        std::printf(
            "{\"kernel\": \"matmul %s\", \"size\": \"%ld^3\", \"impl\": \"tessera %s %s\", "
            "\"us\": %.1f, \"tflops\": %.1f}\n",
            kind.c_str(), static_cast<long>(n), path.c_str(), cfg.c_str(), us,
            2.0 * n * n * n / us / 1e6);
        std::fflush(stdout);
      }
    }
  return wrong ? 1 : 0;
}

// Issue 16's attention forward: Triton's tutorial 06 kernel as tessera writes it
// (examples/attention.h) at the shape, bfloat16, 4 x 32 heads of 4096 x D (D 64 and 128),
// causal and not, autotuned over BLOCK_M {64, 128} x BLOCK_N {32, 64, 128} x {4, 8} warps with 3
// stages (the peers' Triton kernel over the same configs); TFLOP/s of 4 Z H N^2 D, half of it when
// causal. The last 128 query rows of the first and last head are checked against float64 (a
// wrong result fails the run).
int attention_rows() {
  const Device cuda("cuda");
  Tensor flush = empty({64 << 20}, TensorOptions().device(cuda));
  std::vector<tl::Config> configs;
  for (int64_t bm : {64, 128})
    for (int64_t bn : {32, 64, 128})
      for (int warps : {4, 8})
        configs.push_back(tl::Config({{"BLOCK_M", bm}, {"BLOCK_N", bn}}, warps, 3));
  auto tuned = tl::autotune(attention_example::attn_fwd_kernel, configs,
                            {"N_CTX", "BLOCK_DMODEL", "IS_CAUSAL"});
  const int64_t Z = 4, H = 32, N = 4096, ZH = Z * H;
  const TensorOptions gpu = TensorOptions().device(cuda);
  const TensorOptions opt = TensorOptions().dtype(DType::BFloat16).device(cuda);
  bool wrong = false;
  for (const int64_t D : {int64_t{64}, int64_t{128}}) {
    Tensor q = (randn({ZH, N, D}, gpu) * 0.5).to(DType::BFloat16);
    Tensor k = (randn({ZH, N, D}, gpu) * 0.5).to(DType::BFloat16);
    Tensor v = randn({ZH, N, D}, gpu).to(DType::BFloat16);
    Tensor o = empty({ZH, N, D}, opt), lse = empty({ZH, N}, gpu);
    const double sm_scale = 1.0 / std::sqrt(static_cast<double>(D));
    for (const int causal : {0, 1}) {
      auto grid = [&](const tl::Meta& m) { return tl::Grid{tl::cdiv(N, m["BLOCK_M"]), ZH}; };
      auto run = [&] {
        tuned[grid](q, k, v, sm_scale, lse, o, q.stride(0), q.stride(1), k.stride(0), k.stride(1),
                    v.stride(0), v.stride(1), o.stride(0), o.stride(1), N,
                    tl::meta("BLOCK_DMODEL", D), tl::meta("IS_CAUSAL", causal));
      };
      o.fill_(std::nan(""));
      run();
      const std::string what =
          "attention fwd bf16 D=" + std::to_string(D) + (causal ? " causal" : "");
      double err = 0;
      for (const int64_t h : {int64_t{0}, ZH - 1}) {
        auto f64 = [&](const Tensor& t, int64_t from, int64_t rows) {
          return t.select(0, h).narrow(0, from, rows).cpu().to(DType::Float64);
        };
        const Tensor qh = f64(q, N - 128, 128), kh = f64(k, 0, N), vh = f64(v, 0, N);
        Tensor sc = qh.matmul(kh.t()) * sm_scale;
        if (causal) {
          const Tensor rows = arange(N - 128, N).view({128, 1}), cols = arange(N).view({1, N});
          sc = where(rows >= cols, sc, -INFINITY);
        }
        const Tensor want = softmax(sc, 1).matmul(vh);
        err = std::max(err, (f64(o, N - 128, 128) - want).abs().max().item<double>());
      }
      if (!(err <= 0.05)) {  // (bf16 q, p and output roundings: about 1e-2 here)
        std::printf("%s: error %g\n", what.c_str(), err);
        wrong = true;
        continue;
      }
      const double us = median_us(run, flush);
      const double flops = 4.0 * ZH * N * N * D * (causal ? 0.5 : 1.0);
      const auto best = tuned.best_config();
      std::printf(
          "{\"kernel\": \"%s\", \"size\": \"4x32x4096\", \"impl\": \"tessera\", \"us\": %.1f, "
          "\"tflops\": %.1f, \"config\": \"%s\", \"error\": %.3g}\n",
          what.c_str(), us, flops / us / 1e6, best ? best->str().c_str() : "?", err);
      std::fflush(stdout);
    }
  }
  return wrong ? 1 : 0;
}

int main(int argc, char** argv) {
  if (!cuda_is_available()) {
    std::printf("no CUDA GPU on this machine\n");
    return 0;
  }
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "launch") return launch_overhead();
  if (mode == "compiled") return compiled_rows();
  if (mode == "training") return training_rows();
  if (mode == "training-profile") return training_profile();
  if (mode == "matmul") return matmul_rows();
  if (mode == "attention") return attention_rows();
  if (mode == "first-launch") return first_launch(argc > 2 ? argv[2] : "cold");
  if (mode == "compiled-first") return compiled_first(argc > 2 ? argv[2] : "cold");
  if (mode == "autotune") return autotune_rows(argc > 2 ? argv[2] : "cold");
  g_json = mode == "--json";
  const bool only_reductions = mode == "reductions";
  const Device cuda("cuda");
  const auto on_gpu = [&](DType dt) { return TensorOptions().device(cuda).dtype(dt); };
  Tensor flush = empty({64 << 20}, on_gpu(DType::Float32));  // 256 MiB > L2
  if (!g_json)
    std::printf("| kernel | size | median us | GB/s | of copy |\n|---|---|---|---|---|\n");
  double copy_gbs = 0;
  for (int64_t n : only_reductions ? std::vector<int64_t>{}
                                   : std::vector<int64_t>{int64_t{1} << 28, int64_t{1} << 20,
                                                          int64_t{1} << 24}) {  // 2^28 first
    Tensor x = randn({n}, on_gpu(DType::Float32)), y = randn({n}, on_gpu(DType::Float32));
    Tensor out = empty({n}, on_gpu(DType::Float32));
    const auto grid = tl::Grid{tl::cdiv(n, 1024)};
    copy_kernel[grid](x, out, n, tl::meta("BLOCK", 1024));
    if (!equal(out.cpu(), x.cpu())) return std::printf("copy: wrong result\n"), 1;
    const double cu =
        median_us([&] { copy_kernel[grid](x, out, n, tl::meta("BLOCK", 1024)); }, flush);
    if (n == (int64_t{1} << 28)) copy_gbs = 8.0 * static_cast<double>(n) / cu / 1e3;
    row("copy f32", pow2(n), cu, 8.0 * n, copy_gbs);
    add_kernel[grid](x, y, out, n, tl::meta("BLOCK", 1024));
    if (!equal(out.cpu(), x.cpu() + y.cpu())) return std::printf("add: wrong result\n"), 1;
    const double us =
        median_us([&] { add_kernel[grid](x, y, out, n, tl::meta("BLOCK", 1024)); }, flush);
    row("add f32", pow2(n), us, 12.0 * n, copy_gbs);
  }
  for (int64_t n : only_reductions ? std::vector<int64_t>{}
                                   : std::vector<int64_t>{int64_t{1} << 24, int64_t{1} << 28}) {
    Tensor x = randn({n}, on_gpu(DType::BFloat16)), y = randn({n}, on_gpu(DType::BFloat16));
    Tensor out = empty({n}, on_gpu(DType::BFloat16));
    const auto grid = tl::Grid{tl::cdiv(n, 1024)};
    add_kernel[grid](x, y, out, n, tl::meta("BLOCK", 1024));
    if (!equal(out.cpu(), x.cpu() + y.cpu())) return std::printf("add bf16: wrong result\n"), 1;
    const double us =
        median_us([&] { add_kernel[grid](x, y, out, n, tl::meta("BLOCK", 1024)); }, flush);
    row("add bf16", pow2(n), us, 6.0 * n, copy_gbs);
  }
  for (int64_t cols :
       only_reductions ? std::vector<int64_t>{} : std::vector<int64_t>{1024, 4096, 16384}) {
    const int64_t rows = 4096;
    Tensor x = randn({rows, cols}, on_gpu(DType::Float32));
    Tensor out = empty({rows, cols}, on_gpu(DType::Float32));
    const int64_t block = cols;
    // num_warps: 4, 8 from 2048 columns, 16 from 4096 (bench/peers/triton_gpu.py uses the same).
    const int64_t warps = block >= 4096 ? 16 : block >= 2048 ? 8 : 4;
    softmax_kernel[{rows}](x, out, cols, tl::meta("BLOCK", block), tl::num_warps(warps));
    if (!allclose(out.cpu(), softmax(x.cpu(), 1), 1e-5, 1e-6))
      return std::printf("softmax: wrong result\n"), 1;
    const double us = median_us(
        [&] {
          softmax_kernel[{rows}](x, out, cols, tl::meta("BLOCK", block), tl::num_warps(warps));
        },
        flush);
    row("softmax f32", "4096x" + std::to_string(cols), us, 8.0 * rows * cols, copy_gbs);
    softmax_fast_kernel[{rows}](x, out, cols, tl::meta("BLOCK", block), tl::num_warps(warps));
    if (!allclose(out.cpu(), softmax(x.cpu(), 1), 1e-5, 1e-6))
      return std::printf("softmax fast_exp: wrong result\n"), 1;
    const double fast_us = median_us(
        [&] {
          softmax_fast_kernel[{rows}](x, out, cols, tl::meta("BLOCK", block), tl::num_warps(warps));
        },
        flush);
    row("softmax f32 fast_exp", "4096x" + std::to_string(cols), fast_us, 8.0 * rows * cols,
        copy_gbs);
  }
  if (!only_reductions) {
    // Triton's tutorial 05 forward (examples/layer_norm.h) with the tutorial's launch choices:
    // BLOCK_SIZE = min(64 KiB / element size, next power of two of N), num_warps = 8.
    const int64_t M = 16384, N = 4096;
    Tensor x = randn({M, N}, on_gpu(DType::BFloat16)), w = rand({N}, on_gpu(DType::BFloat16)),
           b = randn({N}, on_gpu(DType::BFloat16));
    Tensor y = empty({M, N}, on_gpu(DType::BFloat16)), mean = empty({M}, on_gpu(DType::Float32)),
           rstd = empty({M}, on_gpu(DType::Float32));
    auto ln = [&] {
      layer_norm_example::layer_norm_fwd[{M}](x, y, w, b, mean, rstd, N, N, 1e-5,
                                              tl::meta("BLOCK_SIZE", N), tl::num_warps(8));
    };
    ln();
    const Tensor ref = layer_norm(x.cpu().to(DType::Float32), {N}, w.cpu().to(DType::Float32),
                                  b.cpu().to(DType::Float32), 1e-5);
    if (!allclose(y.cpu().to(DType::Float32), ref, 2e-2, 3e-2))
      return std::printf("layer norm: wrong result\n"), 1;
    const double us = median_us(ln, flush);
    row("layer norm bf16", "16384x4096", us, 4.0 * M * N, copy_gbs);
  }
  // The built-in reductions a training step runs: bias gradients (a column sum of bf16
  // activations) and a whole-tensor sum (a loss), checked against the CPU's.
  for (const auto& [what, size, shape, dt, dims] : std::vector<
           std::tuple<const char*, const char*, std::vector<int64_t>, DType, std::vector<int64_t>>>{
           {"sum dim 0 bf16", "8192x3072", {8192, 3072}, DType::BFloat16, {0}},
           {"sum dim 0 bf16", "8192x768", {8192, 768}, DType::BFloat16, {0}},
           {"sum dim 1 bf16", "8192x3072", {8192, 3072}, DType::BFloat16, {1}},
           {"sum all f32", "2^24", {int64_t{1} << 24}, DType::Float32, {}}}) {
    const std::vector<SymInt> sizes(shape.begin(), shape.end());
    const Tensor x = randn(sizes, on_gpu(dt));
    const auto f = [&, dims = dims] { return dims.empty() ? x.sum() : x.sum(dims); };
    const Tensor want = x.cpu().to(DType::Float32).sum(dims).to(dt);
    if (!allclose(f().cpu().to(DType::Float32), want.to(DType::Float32), 1e-2, 1e-1))
      return std::printf("%s: wrong result\n", what), 1;
    const double bytes = static_cast<double>(x.numel() * static_cast<int64_t>(itemsize(dt)));
    row(what, size, median_us([&] { (void)f(); }, flush), bytes, copy_gbs);
  }
  return 0;
}
