// Eager operator costs: dispatch overhead on tiny tensors (typed fast path, a mode's boxed path,
// a call by name) and throughput of a few kernels on large ones.
#include <benchmark/benchmark.h>

#include "tessera/tessera.h"

using namespace tessera;

namespace {

struct NopMode : DispatchMode {};

void BM_AddTiny(benchmark::State& s) {
  Tensor a = ones({4}), b = ones({4});
  for (auto _ : s) benchmark::DoNotOptimize(add(a, b));
}
BENCHMARK(BM_AddTiny);

void BM_AddTinyUnderMode(benchmark::State& s) {
  Tensor a = ones({4}), b = ones({4});
  NopMode mode;
  ModeGuard g(&mode, ModeKind::Dispatch);
  for (auto _ : s) benchmark::DoNotOptimize(add(a, b));
}
BENCHMARK(BM_AddTinyUnderMode);

void BM_AddTinyByName(benchmark::State& s) {
  Tensor a = ones({4}), b = ones({4});
  OpRef op("aten::add.Tensor");
  for (auto _ : s) benchmark::DoNotOptimize(op(a, b));
}
BENCHMARK(BM_AddTinyByName);

// Autograd: recording one op (a node, its edges, saved inputs), and a forward + backward of a
// small graph.
void BM_MulTinyRecorded(benchmark::State& s) {
  Tensor a = ones({4}).requires_grad_(), b = ones({4});
  for (auto _ : s) benchmark::DoNotOptimize(mul(a, b));
}
BENCHMARK(BM_MulTinyRecorded);

void BM_ForwardBackwardTiny(benchmark::State& s) {
  Tensor w = ones({4}).requires_grad_(), x = ones({4});
  for (auto _ : s) {
    (w * x + w).sin().sum().backward();
    w.mutable_grad() = Tensor();
  }
}
BENCHMARK(BM_ForwardBackwardTiny);

void BM_ViewTiny(benchmark::State& s) {
  Tensor a = ones({4, 4});
  for (auto _ : s) benchmark::DoNotOptimize(a.view({16}));
}
BENCHMARK(BM_ViewTiny);

void BM_AddF32(benchmark::State& s) {
  const int64_t n = s.range(0);
  Tensor a = rand({n}), b = rand({n}), out = empty({n});
  for (auto _ : s) add_out(out, a, b);
  s.SetBytesProcessed(s.iterations() * n * 12);
}
BENCHMARK(BM_AddF32)->Arg(1 << 24)->UseRealTime();

// The pointwise functors whose value branches became selects (DESIGN D6: one definition for the
// CPU loops and the tile lowering): each over 2^22 elements into a preallocated output.
void BM_PointwiseOp(benchmark::State& s) {
  const int64_t n = 1 << 22;
  const bool ints = s.range(0) >= 4;
  const TensorOptions o = TensorOptions().dtype(ints ? DType::Int32 : DType::Float32);
  Tensor a = ints ? randint(-1000, 1000, {n}, o) : randn({n}, o);
  Tensor b = ints ? randint(1, 30, {n}, o) : randn({n}, o);
  Tensor out = empty({n}, o);
  for (auto _ : s) {
    switch (s.range(0)) {
      case 0:
        maximum_out(out, a, b);
        break;
      case 1:
        out.copy_(relu(a));
        break;
      case 2:
        out.copy_(clamp(a, -0.5, 0.5));
        break;
      case 3:
        div_out(out, a, b, "floor");
        break;
      case 4:
        div_out(out, a, b, "floor");
        break;
      case 5:
        remainder_out(out, a, b);
        break;
      default:
        out.copy_(bitwise_left_shift(a, b));
        break;
    }
  }
  static const char* kNames[] = {"maximum f32",   "relu f32",      "clamp f32", "floor div f32",
                                 "floor div i32", "remainder i32", "shl i32"};
  s.SetLabel(kNames[s.range(0)]);
  s.SetBytesProcessed(s.iterations() * n * 12);
}
BENCHMARK(BM_PointwiseOp)->DenseRange(0, 6)->UseRealTime();

void BM_SumF32(benchmark::State& s) {
  const int64_t n = s.range(0);
  Tensor a = rand({n});
  for (auto _ : s) benchmark::DoNotOptimize(a.sum());
  s.SetBytesProcessed(s.iterations() * n * 4);
}
BENCHMARK(BM_SumF32)->Arg(1 << 24)->UseRealTime();

void BM_SoftmaxF32(benchmark::State& s) {
  Tensor a = rand({4096, 1024});
  for (auto _ : s) benchmark::DoNotOptimize(softmax(a, -1));
  s.SetBytesProcessed(s.iterations() * 4096 * 1024 * 8);
}
BENCHMARK(BM_SoftmaxF32)->UseRealTime();

void BM_MatmulF32(benchmark::State& s) {
  const int64_t n = s.range(0);
  Tensor a = rand({n, n}), b = rand({n, n});
  for (auto _ : s) benchmark::DoNotOptimize(matmul(a, b));
  s.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * n * n * n * s.iterations() / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MatmulF32)->Arg(512)->UseRealTime();

}  // namespace
