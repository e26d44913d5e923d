// Halide 14 (Debian's libhalide14-0-dev) on the workloads of kernels_cpu.cpp, each pipeline
// scheduled by hand the way a Halide user would: vectorized at the host's vector width, parallel
// over rows (or blocks), reductions split across vector lanes with rfactor. Halide's standard
// `exp` (not `fast_exp`), like tessera's. Built only when Halide is found; bench/compare_cpu.py
// runs it beside tessera and PyTorch.
//
//   bench_halide_cpu                 Google Benchmark run of add, softmax, layer norm
//   bench_halide_cpu --compile-ms    prints the milliseconds from defining the add pipeline to its
//                                    first result in a fresh process (JIT compile incl. LLVM init)
#include <Halide.h>
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

using namespace Halide;

namespace {

constexpr int kVec = 16;  // f32 lanes of AVX-512; Halide legalizes for narrower hosts

template <typename T>
Buffer<float> random_buffer(T dist, std::initializer_list<int> sizes) {
  Buffer<float> b(std::vector<int>(sizes.begin(), sizes.end()));
  std::mt19937 gen(42);
  b.for_each_value([&](float& v) { v = dist(gen); });
  return b;
}

struct AddPipeline {
  ImageParam a{Float(32), 1, "a"}, b{Float(32), 1, "b"};
  Func out{"add"};
  Var x{"x"}, xo{"xo"}, xi{"xi"};
  AddPipeline() {
    out(x) = a(x) + b(x);
    out.split(x, xo, xi, 16384, TailStrategy::GuardWithIf).parallel(xo).vectorize(xi, kVec);
  }
};

// Row softmax of in(c, r): c is the innermost (contiguous) dimension.
struct SoftmaxPipeline {
  ImageParam in{Float(32), 2, "in"};
  Func mx{"mx"}, ex{"ex"}, sm{"sm"}, out{"softmax"};
  Var c{"c"}, r{"r"}, u{"u"};
  SoftmaxPipeline() {
    RDom k(0, in.dim(0).extent());
    mx(r) = Float(32).min();
    mx(r) = max(mx(r), in(k, r));
    ex(c, r) = exp(in(c, r) - mx(r));
    sm(r) = 0.0f;
    sm(r) += ex(k, r);
    out(c, r) = ex(c, r) / sm(r);

    out.parallel(r).vectorize(c, kVec);
    RVar ko, ki;
    Func mxv = mx.update().split(k, ko, ki, kVec).rfactor(ki, u);
    mx.compute_at(out, r);
    mxv.compute_at(out, r).vectorize(u).update().vectorize(u);
    ex.compute_at(out, r).vectorize(c, kVec);
    RVar ko2, ki2;
    Func smv = sm.update().split(k, ko2, ki2, kVec).rfactor(ki2, u);
    sm.compute_at(out, r);
    smv.compute_at(out, r).vectorize(u).update().vectorize(u);
  }
};

struct LayerNormPipeline {
  ImageParam in{Float(32), 2, "x"}, w{Float(32), 1, "w"}, b{Float(32), 1, "b"};
  Func sum1{"sum1"}, d{"d"}, sum2{"sum2"}, out{"layer_norm"};
  Var c{"c"}, r{"r"}, u{"u"};
  LayerNormPipeline() {
    RDom k(0, in.dim(0).extent());
    Expr n = cast<float>(in.dim(0).extent());
    sum1(r) = 0.0f;
    sum1(r) += in(k, r);
    d(c, r) = in(c, r) - sum1(r) / n;
    sum2(r) = 0.0f;
    sum2(r) += d(k, r) * d(k, r);
    out(c, r) = d(c, r) * (1.0f / sqrt(sum2(r) / n + 1e-5f)) * w(c) + b(c);

    out.parallel(r).vectorize(c, kVec);
    RVar ko, ki, ko2, ki2;
    Func s1 = sum1.update().split(k, ko, ki, kVec).rfactor(ki, u);
    sum1.compute_at(out, r);
    s1.compute_at(out, r).vectorize(u).update().vectorize(u);
    d.compute_at(out, r).vectorize(c, kVec);
    Func s2 = sum2.update().split(k, ko2, ki2, kVec).rfactor(ki2, u);
    sum2.compute_at(out, r);
    s2.compute_at(out, r).vectorize(u).update().vectorize(u);
  }
};

void BM_HalideAdd(benchmark::State& s) {
  const int n = 1 << 24;
  AddPipeline p;
  Buffer<float> a = random_buffer(std::uniform_real_distribution<float>(0, 1), {n});
  Buffer<float> b = random_buffer(std::uniform_real_distribution<float>(0, 1), {n});
  Buffer<float> out(n);
  p.a.set(a);
  p.b.set(b);
  p.out.compile_jit(get_jit_target_from_environment());
  for (auto _ : s) p.out.realize(out);
  s.SetBytesProcessed(s.iterations() * int64_t(n) * 12);
}
BENCHMARK(BM_HalideAdd)->UseRealTime();

void BM_HalideSoftmax(benchmark::State& s) {
  SoftmaxPipeline p;
  Buffer<float> x = random_buffer(std::normal_distribution<float>(0, 1), {1024, 4096});
  Buffer<float> y(1024, 4096);
  p.in.set(x);
  p.out.compile_jit(get_jit_target_from_environment());
  for (auto _ : s) p.out.realize(y);
  s.SetBytesProcessed(s.iterations() * int64_t(4096) * 1024 * 8);
}
BENCHMARK(BM_HalideSoftmax)->UseRealTime();

void BM_HalideLayerNorm(benchmark::State& s) {
  LayerNormPipeline p;
  Buffer<float> x = random_buffer(std::normal_distribution<float>(0, 1), {4096, 4096});
  Buffer<float> w = random_buffer(std::uniform_real_distribution<float>(0, 1), {4096});
  Buffer<float> b = random_buffer(std::normal_distribution<float>(0, 1), {4096});
  Buffer<float> y(4096, 4096);
  p.in.set(x);
  p.w.set(w);
  p.b.set(b);
  p.out.compile_jit(get_jit_target_from_environment());
  for (auto _ : s) p.out.realize(y);
  s.SetBytesProcessed(s.iterations() * int64_t(4096) * 4096 * 8);
}
BENCHMARK(BM_HalideLayerNorm)->UseRealTime();

// Checks every timed pipeline, at the size it is timed, against a double-precision reference
// once, so that a wrong schedule cannot report a fast time.
bool check_add() {
  const int n = 1 << 24;
  AddPipeline p;
  Buffer<float> a = random_buffer(std::uniform_real_distribution<float>(0, 1), {n});
  Buffer<float> b = random_buffer(std::uniform_real_distribution<float>(-1, 1), {n});
  p.a.set(a);
  p.b.set(b);
  Buffer<float> out = p.out.realize({n});
  for (int i = 0; i < n; ++i) {
    if (out(i) != a(i) + b(i)) return false;  // one rounding, exactly as float addition
  }
  return true;
}

bool check_softmax() {
  const int cols = 1024, rows = 4096;
  SoftmaxPipeline sp;
  Buffer<float> x = random_buffer(std::normal_distribution<float>(0, 1), {cols, rows});
  sp.in.set(x);
  Buffer<float> y = sp.out.realize({cols, rows});
  for (int r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (int c = 0; c < cols; ++c) m = std::max(m, double(x(c, r)));
    for (int c = 0; c < cols; ++c) s += std::exp(double(x(c, r)) - m);
    for (int c = 0; c < cols; ++c) {
      const double want = std::exp(double(x(c, r)) - m) / s;
      if (std::abs(y(c, r) - want) > 1e-6 + 1e-5 * want) return false;
    }
  }
  return true;
}

bool check_layer_norm() {
  const int n = 4096;
  LayerNormPipeline p;
  Buffer<float> x = random_buffer(std::normal_distribution<float>(0, 1), {n, n});
  Buffer<float> w = random_buffer(std::uniform_real_distribution<float>(0, 1), {n});
  Buffer<float> b = random_buffer(std::normal_distribution<float>(0, 1), {n});
  p.in.set(x);
  p.w.set(w);
  p.b.set(b);
  Buffer<float> y = p.out.realize({n, n});
  for (int r = 0; r < n; ++r) {
    double mean = 0, var = 0;
    for (int c = 0; c < n; ++c) mean += x(c, r);
    mean /= n;
    for (int c = 0; c < n; ++c) var += (x(c, r) - mean) * (x(c, r) - mean);
    const double rstd = 1 / std::sqrt(var / n + 1e-5);
    for (int c = 0; c < n; ++c) {
      const double want = (x(c, r) - mean) * rstd * w(c) + b(c);
      if (std::abs(y(c, r) - want) > 1e-4 + 1e-4 * std::abs(want)) return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--compile-ms") == 0) {
    const auto t0 = std::chrono::steady_clock::now();
    AddPipeline p;
    Buffer<float> a(4), b(4), out(4);
    for (int i = 0; i < 4; ++i) a(i) = b(i) = float(i);
    p.a.set(a);
    p.b.set(b);
    p.out.realize(out);
    const auto t1 = std::chrono::steady_clock::now();
    if (out(3) != 6.0f) return 1;
    std::printf("%.2f\n", std::chrono::duration<double, std::milli>(t1 - t0).count());
    return 0;
  }
  const struct {
    const char* name;
    bool (*check)();
  } checks[] = {{"add", check_add}, {"softmax", check_softmax}, {"layer norm", check_layer_norm}};
  for (const auto& c : checks) {
    if (!c.check()) {
      std::fprintf(stderr, "bench_halide_cpu: the %s pipeline disagrees with the reference\n",
                   c.name);
      return 1;
    }
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
