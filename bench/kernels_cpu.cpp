// tessera's kernels on the CPU: the seed's add, fused softmax and layer norm (the examples'
// kernels, examples/*.h), a tl::dot matmul, with the eager operators beside them (writing into
// preallocated outputs as the kernels do), and the launch overhead of a one-program grid against
// calling the compiled function directly. Every benchmark checks its result against eager once
// before timing (a wrong result is reported as an error, not a time). `make bench` runs it;
// bench/compare_cpu.py puts PyTorch and Halide beside it in one run.
//
//   bench_kernels_cpu                    Google Benchmark run
//   bench_kernels_cpu --first-result-ms  prints the milliseconds from the first launch of the seed
//                                        kernel (x, y of 4 elements, BLOCK_SIZE=4) to its result:
//                                        the cold compile with an empty TESSERA_CACHE_DIR, the
//                                        disk-cache load with a warm one
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "examples/fused_softmax.h"
#include "examples/layer_norm.h"
#include "seed_add_kernel.h"
#include "tessera/tessera.h"
#include "tessera/tl.h"
#include "tl/jit.h"

using namespace tessera;
namespace tl = tessera::tl;

namespace {

using bench::add_kernel;

// Triton's matmul tutorial without grouping: one program per BM x BN block, K in steps of BK.
TL_JIT(matmul_kernel, tl::Ptr a, tl::Ptr b, tl::Ptr c, tl::Int M, tl::Int N, tl::Int K,
       tl::Const BM, tl::Const BN, tl::Const BK) {
  (void)M;  // the grid covers M and N exactly (512 = 8 x 64): no masks
  auto rm = tl::program_id(0) * BM + tl::arange(0, BM);
  auto rn = tl::program_id(1) * BN + tl::arange(0, BN);
  auto rk = tl::arange(0, BK);
  tl::Var acc = tl::zeros({BM, BN}, tl::float32);
  tl::DotOptions o;
  o.input_precision = "ieee";
  tl::range(0, K, BK, [&](tl::Tile k0) {
    auto ka = k0 + rk;
    auto ta = tl::load(a + rm[{tl::_, tl::None}] * K + ka[{tl::None, tl::_}]);
    auto tb = tl::load(b + ka[{tl::_, tl::None}] * N + rn[{tl::None, tl::_}]);
    acc = tl::dot(ta, tb, tl::Operand(acc), o);
  });
  tl::store(c + rm[{tl::_, tl::None}] * N + rn[{tl::None, tl::_}], acc);
}

TL_JIT(tiny_kernel, tl::Ptr x, tl::Const BLOCK) {
  auto offs = tl::arange(0, BLOCK);
  tl::store(x + offs, tl::load(x + offs) + 1);
}

/** Checks a benchmark's result once before timing; a mismatch fails the benchmark. */
bool verified(benchmark::State& s, bool ok, const char* what) {
  if (!ok) s.SkipWithError((std::string(what) + ": the result differs from eager").c_str());
  return ok;
}

void BM_AddKernel(benchmark::State& s) {
  const int64_t n = int64_t(1) << 24, block = s.range(0);
  Tensor a = rand({n}), b = rand({n}), out = empty({n});
  add_kernel[{tl::cdiv(n, block)}](a, b, out, n, tl::meta("BLOCK_SIZE", block));
  if (!verified(s, equal(out, a + b), "add_kernel")) return;
  for (auto _ : s) add_kernel[{tl::cdiv(n, block)}](a, b, out, n, tl::meta("BLOCK_SIZE", block));
  s.SetBytesProcessed(s.iterations() * n * 12);
}
BENCHMARK(BM_AddKernel)->Arg(1024)->Arg(4096)->Arg(16384)->UseRealTime();

void BM_AddEager(benchmark::State& s) {
  const int64_t n = int64_t(1) << 24;
  Tensor a = rand({n}), b = rand({n}), out = empty({n});
  for (auto _ : s) add_out(out, a, b);
  s.SetBytesProcessed(s.iterations() * n * 12);
}
BENCHMARK(BM_AddEager)->UseRealTime();

void BM_SoftmaxKernel(benchmark::State& s) {
  Tensor x = randn({4096, 1024}), y = empty({4096, 1024});
  fused_softmax::softmax_into(x, y);
  if (!verified(s, allclose(y, softmax(x, 1), 1e-5, 1e-7), "softmax_kernel")) return;
  for (auto _ : s) fused_softmax::softmax_into(x, y);
  s.SetBytesProcessed(s.iterations() * 4096 * 1024 * 8);
}
BENCHMARK(BM_SoftmaxKernel)->UseRealTime();

void BM_SoftmaxEager(benchmark::State& s) {
  Tensor x = randn({4096, 1024});
  for (auto _ : s) benchmark::DoNotOptimize(softmax(x, 1));
  s.SetBytesProcessed(s.iterations() * 4096 * 1024 * 8);
}
BENCHMARK(BM_SoftmaxEager)->UseRealTime();

// The example's kernel (Triton's tutorial 05: three passes over each row, mean and rstd stored).
void BM_LayerNormKernel(benchmark::State& s) {
  Tensor x = randn({4096, 4096}), y = empty({4096, 4096}), w = rand({4096}), b = randn({4096});
  Tensor mean = empty({4096}), rstd = empty({4096});
  layer_norm_example::layer_norm_into(x, w, b, 1e-5, y, mean, rstd);
  if (!verified(s, allclose(y, layer_norm(x, {4096}, w, b, 1e-5), 1e-4, 1e-5), "layer_norm_fwd"))
    return;
  for (auto _ : s) layer_norm_example::layer_norm_into(x, w, b, 1e-5, y, mean, rstd);
  s.SetBytesProcessed(s.iterations() * 4096 * 4096 * 8);
}
BENCHMARK(BM_LayerNormKernel)->UseRealTime();

// The same normalization as one tile per row (the whole row in registers, read once): what a
// kernel written for rows that fit one block gets.
TL_JIT(layer_norm_one_block, tl::Ptr X, tl::Ptr Y, tl::Ptr W, tl::Ptr B, tl::Int stride, tl::Int N,
       tl::Float eps, tl::Const BLOCK) {
  auto row = tl::program_id(0);
  auto cols = tl::arange(0, BLOCK);
  auto mask = cols < N;
  auto x = tl::load(X + row * stride + cols, mask, 0.0);
  auto mean = tl::sum(x, 0) / N;
  auto d = tl::where(mask, x - mean, 0.0);
  auto rstd = tl::rsqrt(tl::sum(d * d, 0) / N + eps);
  tl::store(Y + row * stride + cols, d * rstd * tl::load(W + cols, mask) + tl::load(B + cols, mask),
            mask);
}

void BM_LayerNormOneBlockKernel(benchmark::State& s) {
  Tensor x = randn({4096, 4096}), y = empty({4096, 4096}), w = rand({4096}), b = randn({4096});
  auto run = [&] {
    layer_norm_one_block[{4096}](x, y, w, b, 4096, 4096, 1e-5, tl::meta("BLOCK", 4096));
  };
  run();
  if (!verified(s, allclose(y, layer_norm(x, {4096}, w, b, 1e-5), 1e-4, 1e-5),
                "layer_norm_one_block"))
    return;
  for (auto _ : s) run();
  s.SetBytesProcessed(s.iterations() * 4096 * 4096 * 8);
}
BENCHMARK(BM_LayerNormOneBlockKernel)->UseRealTime();

void BM_LayerNormEager(benchmark::State& s) {
  Tensor x = randn({4096, 4096}), w = rand({4096}), b = randn({4096});
  for (auto _ : s) benchmark::DoNotOptimize(layer_norm(x, {4096}, w, b));
  s.SetBytesProcessed(s.iterations() * 4096 * 4096 * 8);
}
BENCHMARK(BM_LayerNormEager)->UseRealTime();

// 512^3 float32 matmul: tl::dot (64 x 64 x 64 blocks) against OpenBLAS (eager matmul_out), both
// into a preallocated output.
void BM_MatmulKernel(benchmark::State& s) {
  Tensor a = randn({512, 512}), b = randn({512, 512}), c = empty({512, 512});
  auto run = [&] {
    matmul_kernel[{8, 8}](a, b, c, 512, 512, 512, tl::meta("BM", 64), tl::meta("BN", 64),
                          tl::meta("BK", 64));
  };
  run();
  if (!verified(s, allclose(c, matmul(a, b), 1e-4, 1e-4), "matmul_kernel")) return;
  for (auto _ : s) run();
  s.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * 512 * 512 * 512 * s.iterations(), benchmark::Counter::kIsRate,
                         benchmark::Counter::kIs1000);
}
BENCHMARK(BM_MatmulKernel)->UseRealTime();

void BM_MatmulEager(benchmark::State& s) {
  Tensor a = randn({512, 512}), b = randn({512, 512}), c = empty({512, 512});
  for (auto _ : s) matmul_out(c, a, b);
  s.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * 512 * 512 * 512 * s.iterations(), benchmark::Counter::kIsRate,
                         benchmark::Counter::kIs1000);
}
BENCHMARK(BM_MatmulEager)->UseRealTime();

void BM_HotLaunch(benchmark::State& s) {
  Tensor x = zeros({16});
  tiny_kernel[{1}](x, tl::meta("BLOCK", 16));
  if (!verified(s, equal(x, ones({16})), "tiny_kernel")) return;
  for (auto _ : s) tiny_kernel[{1}](x, tl::meta("BLOCK", 16));
}
BENCHMARK(BM_HotLaunch);

void BM_DirectCall(benchmark::State& s) {
  Tensor x = zeros({16});
  tiny_kernel[{1}](x, tl::meta("BLOCK", 16));
  const auto fn = backend::cpu::kernel_fn(tiny_kernel.state().last->code);
  trt::Arg args[2];
  args[0].p = x.data_ptr();
  const trt::Grid g{1, 1, 1};
  for (auto _ : s) {
    fn(&g, 0, 1, args);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_DirectCall);

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--first-result-ms") == 0) {
    Tensor x = randn({4}), y = randn({4}), out = zeros({4});
    const auto t0 = std::chrono::steady_clock::now();
    auto grid = [&](const tl::Meta& meta) { return tl::Grid{tl::cdiv(4, meta["BLOCK_SIZE"])}; };
    add_kernel[grid](x, y, out, 4, tl::meta("BLOCK_SIZE", 4));
    const auto t1 = std::chrono::steady_clock::now();
    if (!equal(out, x + y)) return 1;
    std::printf("%.2f\n", std::chrono::duration<double, std::milli>(t1 - t0).count());
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
