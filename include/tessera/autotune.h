/** \file
 * Autotuning and heuristics (the seed's `triton.autotune` and `triton.heuristics`), with a
 * persistent tuning database.
 *
 *     auto add_tuned = tl::autotune(add_kernel,
 *                                   {tl::Config({{"BLOCK_SIZE", 1024}}, 4, 3),
 *                                    tl::Config({{"BLOCK_SIZE", 4096}}, 8, 3)},
 *                                   {"n_elements"});
 *     add_tuned[grid](x, y, out, n);   // grid sees each config's BLOCK_SIZE
 *
 * A tuned kernel launches like a kernel. On the first launch for a tuning key (the values of the
 * `key` arguments, the tensors' dtypes and the specialization bits) every config is compiled, in
 * one batch, and timed with `do_bench`; the fastest is remembered in memory and in the tuning
 * database on disk, so a new process launches it without timing anything. Adding a config later
 * times only the new one beside the previous winner.
 *
 * `tl::heuristics(kernel, {{"NAME", fn}})` computes meta-parameters from the arguments. It
 * composes with `autotune` in either order, with Triton's meaning:
 * - `autotune(heuristics(k, ...), configs)`: the heuristics run for each config and see its
 *   meta-parameters (`args["BLOCK"]` is the config's).
 * - `heuristics(autotune(k, configs), ...)`: the heuristics run once per launch, before tuning,
 *   and their values are fixed for every config.
 * A name set twice (by the launch, a config or a heuristic) is a `CompileError`.
 */
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/tl.h"

namespace tessera::tl {

class Args;

/** One autotuning candidate: meta-parameter values and launch options (Triton's `Config`). */
class Config {
 public:
  Config(std::initializer_list<std::pair<std::string, MetaValue>> kwargs, int64_t num_warps = 4,
         int64_t num_stages = 3, std::optional<int64_t> maxnreg = std::nullopt);
  Config(std::vector<std::pair<std::string, MetaValue>> kwargs, int64_t num_warps = 4,
         int64_t num_stages = 3, std::optional<int64_t> maxnreg = std::nullopt);

  std::vector<std::pair<std::string, MetaValue>> kwargs;
  int64_t num_warps = 4;
  int64_t num_stages = 3;
  std::optional<int64_t> maxnreg;
  /** Runs before every launch with this config (trials and the real launch), as Triton's. */
  std::function<void(const Args&)> pre_hook;

  /** `BLOCK_SIZE: 1024, num_warps: 4, num_stages: 3` (Triton's format). */
  std::string str() const;
  /** The value of a meta-parameter of this config (null when absent). */
  const MetaValue* find(std::string_view name) const;
  bool operator==(const Config& o) const { return str() == o.str(); }
};

/** A launch's arguments by parameter name: what heuristics, hooks, pruning functions and
 * performance models see. Inside `tessera::compile`, tensors are fake and sizes symbolic:
 * reading an integer as a plain value specializes it, with a guard. */
class Args {
 public:
  struct Entry {
    std::string_view name;
    enum class Kind : uint8_t { Tensor, Int, Float, Meta } kind = Kind::Int;
    const Tensor* tensor = nullptr;
    SymInt sym;
    double f = 0;
    MetaValue meta;
  };

  bool contains(std::string_view name) const;
  /** A tensor argument; `ValueError` naming the arguments when there is none. */
  const Tensor& tensor(std::string_view name) const;
  /** An integer argument or an integer/bool meta-parameter. */
  int64_t operator[](std::string_view name) const;
  /** An integer argument without specializing it (symbolic while compiling). */
  SymInt sym(std::string_view name) const;
  double float_value(std::string_view name) const;
  /** A meta-parameter's value (or an integer/float argument's, as one). */
  MetaValue value(std::string_view name) const;
  const std::vector<Entry>& entries() const { return entries_; }

  // Filled by the autotuner.
  std::vector<Entry> entries_;
  std::string kernel_;

 private:
  const Entry& get(std::string_view name) const;
};

/** A heuristic: a meta-parameter value computed from the arguments. */
using Heuristic = std::function<MetaValue(const Args&)>;

/** `prune_configs_by`, as Triton's. */
struct PruneConfigsBy {
  /** Predicted time of a config (ms, or any monotone score); with `top_k`, only the best
   * predicted configs are timed. */
  std::function<double(const Config&, const Args&)> perf_model;
  /** How many configs to keep by `perf_model`: a count (>= 1), or a fraction (< 1). */
  double top_k = 0;
  /** Returns the configs worth timing for these arguments (a subset of `configs`). */
  std::function<std::vector<Config>(const std::vector<Config>& configs, const Args&)>
      early_config_prune;
};

/** Autotuning options. Every Triton option is accepted, and they compose (Triton drops
 * `reset_to_zero` and `restore_value` when a `pre_hook` is given; tessera runs both). */
struct AutotuneOptions {
  PruneConfigsBy prune_configs_by;
  /** Tensors zeroed before each trial and before the launch that follows tuning. */
  std::vector<std::string> reset_to_zero;
  /** Tensors saved before tuning and restored after each trial. */
  std::vector<std::string> restore_value;
  /** tessera: also save and restore every tensor the kernel both reads and writes (known from
   * its IR), so an in-place kernel is right after tuning without naming it in `restore_value`. */
  bool restore_written = true;
  /** Called before each trial (after `reset_to_zero`). */
  std::function<void(const Args&)> pre_hook;
  /** Called after each trial with its exception (null when it succeeded). */
  std::function<void(const Args&, std::exception_ptr)> post_hook;
  /** Time budgets of the default `do_bench`, in ms (Triton's defaults). */
  double warmup = 25;
  double rep = 100;
  /** A custom benchmark: runs `kernel_call` as it likes and returns its time in ms. */
  std::function<double(const std::function<void()>& kernel_call)> do_bench;
  /** Keep timings in the tuning database (`TESSERA_CACHE_DIR/tune`). */
  bool cache_results = true;
};

namespace detail {
class TunedState;
}

/** An autotuned and/or heuristic kernel. Launches like a kernel: `tuned[grid](args...)`. */
class TunedKernel {
 public:
  explicit TunedKernel(std::shared_ptr<detail::TunedState> s) : s_(std::move(s)) {}

  Launcher operator[](const LaunchGrid& grid) const;

  const JITFunction& kernel() const;
  /** The configs of the autotuning layer (empty for heuristics alone). */
  const std::vector<Config>& configs() const;
  /** The config chosen by the most recent launch. */
  std::optional<Config> best_config() const;
  /** The timings (ms) of the most recent tuning round, per config, in config order (configs not
   * timed are absent). */
  std::vector<std::pair<Config, double>> last_timings() const;
  /** How many tuning rounds ran (misses of the in-memory cache; a round served entirely by the
   * tuning database times nothing). */
  int tuning_rounds() const;
  /** How many configs the most recent round timed (0 when the database had them all). */
  int last_round_timed() const;
  /** Forgets the in-memory choices (the next launch reads the database, or tunes). */
  void clear_memory_cache() const;

  const std::shared_ptr<detail::TunedState>& state() const { return s_; }

 private:
  std::shared_ptr<detail::TunedState> s_;
};

/** `triton.autotune`: tunes `kernel` over `configs` per value of the `key` arguments. */
TunedKernel autotune(const JITFunction& kernel, std::vector<Config> configs,
                     std::vector<std::string> key, AutotuneOptions options = {}, TS_HERE);
TunedKernel autotune(const TunedKernel& inner, std::vector<Config> configs,
                     std::vector<std::string> key, AutotuneOptions options = {}, TS_HERE);

/** `triton.heuristics`: meta-parameters computed from the arguments at each launch. */
TunedKernel heuristics(const JITFunction& kernel,
                       std::vector<std::pair<std::string, Heuristic>> values, TS_HERE);
TunedKernel heuristics(const TunedKernel& inner,
                       std::vector<std::pair<std::string, Heuristic>> values, TS_HERE);

}  // namespace tessera::tl
