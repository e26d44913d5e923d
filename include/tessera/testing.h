/** \file
 * Testing and benchmarking helpers: `assert_close` (as `torch.testing.assert_close`), and as
 * `triton.testing`, `do_bench` times a callable, `perf_report` sweeps a benchmark over its x
 * values and lines and writes a table and an SVG plot.
 *
 *     Tensor x = tessera::testing::make_tensor({64, 33}, DType::Float32);   // random values
 *     tessera::testing::poison(out);                   // NaN: a skipped element cannot pass
 *     tessera::testing::assert_close(got, want);   // an AssertionError saying where and by how
 * much double ms = tessera::testing::do_bench([&] { add_tuned[grid](x, y, out, n); });
 */
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/dtype.h"
#include "tessera/error.h"

namespace tessera {
class Tensor;
}

namespace tessera::testing {

/** How `assert_close` compares. */
struct CloseOptions {
  /** Give both or neither; by default from the dtype, as PyTorch: float16 1e-3/1e-5, bfloat16
   * 1.6e-2/1e-5, float32 1.3e-6/1e-5, float64 1e-7/1e-7, float8 1.25e-1/1e-5 (e4m3) and
   * 2.5e-1/1e-5 (e5m2), integers and bool exact. */
  std::optional<double> rtol = {}, atol = {};
  bool equal_nan = false;
  bool check_dtype = true;
  bool check_device = true;
  /** Prepended to the failure's message. */
  std::string msg = {};
};

/**
 * Checks that `actual` and `expected` have the same shape (and dtype and device, unless told
 * not to) and that every element is close: equal (infinities included), NaN against NaN with
 * `equal_nan`, or finite with |actual - expected| <= atol + rtol * |expected|. Any device (GPU
 * values are read back). A failure is an `AssertionError` naming the caller's line, the count of
 * mismatched elements, and the greatest absolute and relative differences with their indices.
 */
void assert_close(const Tensor& actual, const Tensor& expected, const CloseOptions& options = {},
                  SourceLoc loc = SourceLoc::current());

/** How `make_tensor` draws a tensor (after `torch.testing.make_tensor`). */
struct MakeTensorOptions {
  /** The values' range [low, high): by default [-9, 9] for floats and signed integers, [0, 10)
   * for unsigned ones; bool is true or false. Integers are drawn uniformly among the integers. */
  std::optional<double> low = {}, high = {};
  /** Where the tensor lives ("cpu", "cuda", "cuda:1"). */
  std::string device = "cpu";
  /** The same values in a view whose last dimension has stride 2 (a kernel must use strides). */
  bool noncontiguous = false;
  /** A seed for these values alone; by default a process-wide generator (seeded from
   * TESSERA_TEST_SEED when set, so a failing run can be repeated). */
  std::optional<uint64_t> seed = {};
};
/** A tensor of `shape` and `dtype` with random values, for tests. */
Tensor make_tensor(const std::vector<int64_t>& shape, DType dtype,
                   const MakeTensorOptions& options = {});
/** Fills `t` with values no kernel should leave behind: NaN for floats, -77 (signed) or 77
 * (unsigned) for integers, true for bool. Poison an output before a kernel writes it, and an
 * element the kernel skipped shows up in the comparison. */
void poison(Tensor& t);

struct BenchOptions {
  double warmup = 25;  ///< warm-up budget (ms, wall time including cache flushes)
  double rep = 100;    ///< measurement budget (ms)
  std::vector<double>
      quantiles;  ///< when given, `do_bench_all` returns these quantiles of the runs
  std::string return_mode = "mean";  ///< "mean", "median", "min", "max" (Triton's)
  bool flush_cache = true;  ///< overwrite a buffer the size of the last-level cache before each run
};

/** Times `fn` on the CPU with a steady clock: estimates its time from 5 calls, runs warm-up calls
 * for `warmup` ms and timed calls for `rep` ms (each after a cache flush, which is not timed).
 * Returns milliseconds, summarized by `return_mode`. */
double do_bench(const std::function<void()>& fn, double warmup = 25, double rep = 100);
double do_bench(const std::function<void()>& fn, const BenchOptions& options);
/** The requested quantiles (in order) of the timed runs, in milliseconds. */
std::vector<double> do_bench_quantiles(const std::function<void()>& fn,
                                       std::vector<double> quantiles, double warmup = 25,
                                       double rep = 100);

namespace detail {
/** The timed loop behind do_bench: `setup` and `teardown` run around every call of `fn`, untimed.
 * Returns every timed run (ms). */
std::vector<double> bench_runs(const std::function<void()>& fn, const std::function<void()>& setup,
                               const std::function<void()>& teardown, double warmup, double rep,
                               bool flush);
/** Why a timing loop stopped, or whether it goes on. */
enum class BenchStopReason { More, CannotWin, MedianKnown, Budget };
struct BenchStop {
  BenchStopReason reason = BenchStopReason::More;
  size_t runs = 0;  ///< the runs timed when it stopped
};
/** gpu_bench_runs' stopping rules on the runs so far (any order): `More` under 20 runs; then
 * `CannotWin` once the median's 95% interval lies above 1.05 `beat`, `MedianKnown` once the
 * interval is within 1% of the median, else `More`. */
BenchStopReason bench_stop(std::vector<double> runs, double beat);
/** bench_runs' loop for work queued on CUDA device `device`'s current stream (Triton's do_bench):
 * each run between two CUDA events, the device's L2 cache overwritten before it (untimed), no
 * host synchronization between runs. It stops before `rep` once the median is known to 1% (a 95%
 * interval from the runs' order statistics, after 20 runs at least), or once the runs show this
 * work cannot be within 5% of `beat` ms (the best time so far: a racing autotuner); `why`, when
 * given, receives the reason and the count. */
std::vector<double> gpu_bench_runs(const std::function<void()>& fn,
                                   const std::function<void()>& setup,
                                   const std::function<void()>& teardown, double warmup, double rep,
                                   bool flush, int device, double beat, BenchStop* why = nullptr);
double summarize(std::vector<double> runs, const std::string& mode);
double quantile(std::vector<double> sorted, double q);
}  // namespace detail

/** `triton.testing.Benchmark`: one plot, lines over x values. */
struct Benchmark {
  std::vector<std::string> x_names;  ///< the argument(s) the x axis sets (all to the same value)
  std::vector<double> x_vals;
  std::string line_arg;  ///< the argument that selects a line
  std::vector<std::string> line_vals;
  std::vector<std::string> line_names;                      ///< legend labels (default: line_vals)
  std::vector<std::pair<std::string, std::string>> styles;  ///< (color, dash: "-", "--", ":")
  std::string xlabel, ylabel = "ms";
  std::string plot_name = "benchmark";
  std::map<std::string, double> args;  ///< fixed arguments
  bool x_log = false, y_log = false;
  /** Categories instead of numbers on the x axis (one per x value, e.g. workloads): the chart
   * draws grouped bars, one per line, and the tables print the labels. */
  std::vector<std::string> x_labels;
};

/** One benchmark call's arguments. */
struct BenchArgs {
  std::map<std::string, double> values;  ///< x_names and the fixed args
  std::string line;                      ///< this line's value of `line_arg`
  double operator[](const std::string& name) const;
};

/** A measured point: the value and an optional band (min/max, or quantiles). */
struct Measure {
  double y = 0, y_min = 0, y_max = 0;
  Measure(double v) : y(v), y_min(v), y_max(v) {}  // NOLINT
  Measure(double v, double lo, double hi) : y(v), y_min(lo), y_max(hi) {}
};

struct PerfTable {
  Benchmark bench;
  std::vector<std::vector<Measure>> rows;  ///< per x value, per line
  std::string markdown() const;
  std::string csv() const;
  std::string svg(int width = 640, int height = 420) const;
  /** Reads what `csv()` writes (a first column of x values or, when any is not a number,
   * category labels; then a value, min and max column per line), or a plain CSV with one column
   * per line. Titles, labels and scales come from `base`. A ValueError names the line. */
  static PerfTable parse_csv(const std::string& text, Benchmark base = {});
};

/** Runs `fn` for every x value and line; prints the table when `print_data`, and writes
 * `<save_path>/<plot_name>.csv`, `.md` and `.svg` when `save_path` is given. */
PerfTable perf_report(const Benchmark& bench, const std::function<Measure(const BenchArgs&)>& fn,
                      bool print_data = true, const std::string& save_path = "");

}  // namespace tessera::testing
