// Autotuning cost on the CPU: tuning 8 softmax configs cold (compiles included) and warm (a
// tuning-database hit in a new process), and compiling the 8 configs in parallel (one translation
// unit per core), in one translation unit, and one compiler run after another.
//
//   bench_tune_cpu               runs everything (fresh cache directories, child processes) and
//                                prints a markdown table; --rounds N (default 3) medians
//   bench_tune_cpu --tune-ms     one process: milliseconds of the first tuned launch (cold or warm
//                                by TESSERA_CACHE_DIR)
//   bench_tune_cpu --compile-ms  one process: milliseconds to compile the 8 configs three ways
//   bench_tune_cpu --launch-ns   one process: ns per hot launch, plain and autotuned
//   bench_tune_cpu --do-bench-ms one process: do_bench's result for a 20000-sqrt body beside a
//   plain
//                                loop's mean for the same body
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/toolchain.h"
#include "examples/seed_autotune.h"
#include "tessera/env.h"
#include "tessera/testing.h"
#include "tl/jit.h"

using namespace tessera;
namespace tl = tessera::tl;

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

const std::initializer_list<int> kBlocks = {32, 64, 128, 256, 512, 1024, 2048, 4096};

int tune_ms() {
  Tensor x = randn({1024, 4096});
  auto tuned = tl::autotune(seed_autotune::softmax_looped, seed_autotune::softmax_configs(kBlocks),
                            {"n_cols"});
  const auto t0 = Clock::now();
  Tensor y = seed_autotune::softmax_with(tuned, x);
  const double ms = ms_since(t0);
  if (!allclose(y, softmax(x, 1), 1e-5, 1e-7)) {
    std::fprintf(stderr, "softmax mismatch\n");
    return 1;
  }
  std::printf("%.3f %d\n", ms, tuned.last_round_timed());
  return 0;
}

// The 8 configs' generated sources, prepared (traced, optimized, emitted) without compiling.
std::vector<backend::cpu::KernelSource> sources() {
  Tensor x = randn({64, 4096}), y = empty_like(x);
  auto& s = seed_autotune::softmax_looped.state();
  std::vector<tl::detail::Spec> specs;
  for (int b : kBlocks) {
    const tl::KernelArg args[] = {y,
                                  x,
                                  x.stride(0).guard_int(),
                                  y.stride(0).guard_int(),
                                  int64_t(4096),
                                  tl::meta("BLOCK_SIZE", b)};
    tl::detail::Spec sp;
    tl::detail::bind(s, ArrayRef<tl::KernelArg>(args, 6), sp.bound, sp.opts, {});
    specs.push_back(std::move(sp));
  }
  std::vector<backend::cpu::KernelSource> out;
  for (const auto& k : tl::detail::lookup_or_prepare(s, specs, {}))
    out.push_back({k->code.source, s.name});
  return out;
}

int compile_ms() {
  const auto src = sources();
  auto fresh = [] {
    backend::cpu::forget_loaded();
    backend::cpu::clear_cache();
  };
  fresh();
  auto t0 = Clock::now();
  backend::cpu::compile_many(src);  // one translation unit per core, in parallel
  const double parallel = ms_since(t0);
  fresh();
  t0 = Clock::now();
  backend::cpu::compile_many(src, 1);  // one translation unit
  const double one = ms_since(t0);
  fresh();
  t0 = Clock::now();
  for (const auto& k : src) backend::cpu::compile(k.source, k.kernel);  // one compiler run each
  const double serial = ms_since(t0);
  std::printf("%.3f %.3f %.3f\n", parallel, one, serial);
  return 0;
}

// Nanoseconds per launch of the seed's add at n = 4: the kernel itself, and autotuned over the
// seed's four configs once the choice is made (the cost of the key and the lookup).
int launch_ns() {
  Tensor x = randn({4}), y = randn({4}), out = empty({4});
  const int64_t n = 4;
  auto grid = [&](const tl::Meta& m) { return tl::Grid{tl::cdiv(n, m["BLOCK_SIZE"])}; };
  tl::AutotuneOptions o;
  o.warmup = 1;
  o.rep = 2;
  auto tuned =
      tl::autotune(seed_autotune::add_kernel_autotuned,
                   {tl::Config({{"BLOCK_SIZE", 4}}, 8, 3), tl::Config({{"BLOCK_SIZE", 4}}, 4, 4),
                    tl::Config({{"BLOCK_SIZE", 2}}, 8, 3), tl::Config({{"BLOCK_SIZE", 2}}, 4, 4)},
                   {}, o);
  tuned[grid](x, y, out, n);
  const int iters = 200000;
  double best_plain = 1e300, best_tuned = 1e300;
  for (int r = 0; r < 5; ++r) {
    auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i)
      seed_autotune::add_kernel_autotuned[grid](x, y, out, n, tl::meta("BLOCK_SIZE", 4));
    best_plain = std::min(best_plain, ms_since(t0) * 1e6 / iters);
    t0 = Clock::now();
    for (int i = 0; i < iters; ++i) tuned[grid](x, y, out, n);
    best_tuned = std::min(best_tuned, ms_since(t0) * 1e6 / iters);
  }
  std::printf("%.1f %.1f\n", best_plain, best_tuned);
  return 0;
}

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  ::pclose(p);
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int driver(int rounds) {
  char self[4096];
  const ssize_t len = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) return 1;
  self[len] = 0;
  std::vector<double> cold, warm, par, one, ser;
  int cold_timed = 0, warm_timed = -1;
  for (int r = 0; r < rounds; ++r) {
    char tmpl[] = "/tmp/tessera-bench-tune-XXXXXX";
    const std::string dir = ::mkdtemp(tmpl);
    const std::string env = "TESSERA_CACHE_DIR=" + dir + " ";
    double ms = 0;
    int timed = 0;
    std::sscanf(run(env + self + " --tune-ms").c_str(), "%lf %d", &ms, &timed);
    cold.push_back(ms);
    cold_timed = timed;
    std::sscanf(run(env + self + " --tune-ms").c_str(), "%lf %d", &ms, &timed);
    warm.push_back(ms);
    warm_timed = timed;
    double a = 0, b = 0, c = 0;
    std::sscanf(run(env + self + " --compile-ms").c_str(), "%lf %lf %lf", &a, &b, &c);
    par.push_back(a);
    one.push_back(b);
    ser.push_back(c);
    run("rm -rf '" + dir + "'");
  }
  double plain = 0, tuned = 0, bench_timed = 0, bench_plain = 0;
  std::sscanf(run(std::string(self) + " --launch-ns").c_str(), "%lf %lf", &plain, &tuned);
  std::sscanf(run(std::string(self) + " --do-bench-ms").c_str(), "%lf %lf", &bench_timed,
              &bench_plain);
  const double c = median(cold), w = median(warm);
  std::printf(
      "## Autotuning 8 softmax configs on the CPU (1024x4096 float32; median of %d fresh "
      "processes)\n\n",
      rounds);
  std::printf("| measure | ms | note |\n|---|---|---|\n");
  std::printf(
      "| cold: first tuned launch, empty caches | %.1f | %d configs compiled and timed (warmup 25 "
      "ms, rep 100 ms each) |\n",
      c, cold_timed);
  std::printf(
      "| warm: first tuned launch in a new process | %.2f | %d timed (database hit); %.2f%% of "
      "cold (target < 1%%) |\n",
      w, warm_timed, 100.0 * w / c);
  std::printf(
      "| compile 8 configs: one translation unit per core, in parallel | %.1f | %u cores |\n",
      median(par), std::max(1u, std::thread::hardware_concurrency()));
  std::printf("| compile 8 configs: one translation unit | %.1f | %.2fx of parallel |\n",
              median(one), median(one) / median(par));
  std::printf(
      "| compile 8 configs: 8 compiler runs, one after another | %.1f | %.2fx of parallel |\n",
      median(ser), median(ser) / median(par));
  std::printf("| hot launch, the seed's add at n = 4: the kernel | %.4f | %.0f ns |\n", plain / 1e6,
              plain);
  std::printf(
      "| hot launch, autotuned over the seed's four configs | %.4f | %.0f ns (+%.0f ns for the key "
      "and lookup) |\n",
      tuned / 1e6, tuned, tuned - plain);
  std::printf(
      "| do_bench of a 20000-sqrt body | %.4f | a plain loop's mean: %.4f ms (%.2fx; the LLC flush "
      "between runs is untimed) |\n",
      bench_timed, bench_plain, bench_plain > 0 ? bench_timed / bench_plain : 0.0);
  return 0;
}

// do_bench's own cost: a compute-bound body (cache flushes do not change its time), timed by
// do_bench and by a plain loop of the same runs (what the unit tests no longer time).
int do_bench_ms() {
  volatile double sink = 0;
  auto work = [&] {
    double acc = 0;
    for (int i = 0; i < 20000; ++i) acc += __builtin_sqrt(static_cast<double>(i) + sink);
    sink = acc;
  };
  const auto t0 = Clock::now();
  for (int i = 0; i < 100; ++i) work();
  const double plain = ms_since(t0) / 100;
  const double timed = testing::do_bench(work, 2, 10);
  std::printf("%.4f %.4f\n", timed, plain);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && !std::strcmp(argv[1], "--do-bench-ms")) return do_bench_ms();
  if (argc > 1 && !std::strcmp(argv[1], "--tune-ms")) return tune_ms();
  if (argc > 1 && !std::strcmp(argv[1], "--compile-ms")) return compile_ms();
  if (argc > 1 && !std::strcmp(argv[1], "--launch-ns")) return launch_ns();
  int rounds = 3;
  if (argc > 2 && !std::strcmp(argv[1], "--rounds")) rounds = std::max(1, std::atoi(argv[2]));
  return driver(rounds);
}
