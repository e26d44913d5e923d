// The benchmark half of Triton's tutorials (their `triton.testing.perf_report` sections): each
// tutorial run with `--bench` times its kernel beside the eager composition a user would otherwise
// write, on the same inputs, in one process. Rounds alternate between the two (so a busy machine
// slows both alike); each round takes the median of its repetitions and the table shows the best
// round of each side.
//
//   tutorial_03_matmul --bench [--cuda] [--rounds R]
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <tessera/tessera.h>

namespace tutorial_bench {

struct Args {
  bool cuda = false;
  bool bench = false;
  int rounds = 5;
  tessera::Device device() const { return cuda ? tessera::Device("cuda") : tessera::kCPU; }
};

inline Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--cuda") == 0) {
      a.cuda = true;
    } else if (std::strcmp(argv[i], "--bench") == 0) {
      a.bench = true;
    } else if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      a.rounds = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--cuda] [--bench [--rounds R]]\n", argv[0]);
      std::exit(2);
    }
  }
  return a;
}

/** Waits for the work queued on `t`'s device (reads one element back; a no-op wait on the CPU). */
inline void sync(const tessera::Tensor& t) {
  if (t.device().is_cuda() && t.numel() > 0) (void)t.flatten().narrow(0, 0, 1).cpu();
}

/** Milliseconds of one call: the median of `reps` timed calls after one warm-up call. */
inline double median_ms(const std::function<tessera::Tensor()>& fn, int reps) {
  sync(fn());
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    sync(fn());
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(ms.begin(), ms.begin() + reps / 2, ms.end());
  return ms[reps / 2];
}

inline void header() {
  std::printf("%-52s %10s %10s %8s %14s\n", "case", "kernel ms", "eager ms", "ratio",
              "kernel rate");
}

/**
 * One row: the tutorial's kernel beside the eager composition, rounds alternating, best round of
 * each; `work` is the FLOPs (or bytes, with `unit` "GB/s") one call does; the ratio is eager time
 * over kernel time (above 1: the kernel is faster).
 */
inline void row(const std::string& name, const Args& args,
                const std::function<tessera::Tensor()>& kernel,
                const std::function<tessera::Tensor()>& eager, double work,
                const char* unit = "GFLOP/s", int reps = 5) {
  double best_k = 1e300, best_e = 1e300;
  for (int r = 0; r < args.rounds; ++r) {
    best_k = std::min(best_k, median_ms(kernel, reps));
    best_e = std::min(best_e, median_ms(eager, reps));
  }
  std::printf("%-52s %10.3f %10.3f %7.2fx %9.1f %s\n", name.c_str(), best_k, best_e,
              best_e / best_k, work / best_k * 1e-6, unit);
  std::fflush(stdout);
}

}  // namespace tutorial_bench
