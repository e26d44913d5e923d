/** \file
 * The state of an autotuned or heuristic kernel: its layers, the candidates of a launch (one per
 * config, heuristics applied: tl::Variant) and the choice among them. Other layers see it only
 * as a tl::VariantSource (src/tl/variants.h).
 */
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "tessera/autotune.h"
#include "tessera/detail/function_ref.h"
#include "tl/variants.h"

namespace tessera::tl::detail {

using Candidate = Variant;

class TunedState : public LaunchTarget,
                   public VariantSource,
                   public std::enable_shared_from_this<TunedState> {
 public:
  struct Layer {
    bool autotune = false;
    std::vector<std::pair<std::string, Heuristic>> heuristics;
    std::vector<Config> configs;
    std::vector<std::string> key;
    AutotuneOptions options;
    SourceLoc loc;
  };

  const JITFunction* kernel = nullptr;
  std::vector<Layer> layers;  ///< innermost first
  int tune_layer = -1;
  bool has_heuristics = false;  ///< a heuristics layer exists (candidates depend on the arguments)

  /** The launch's arguments by parameter name. */
  Args named(ArrayRef<KernelArg> args) const;
  /** Every candidate for these arguments: one per config (or one), heuristics evaluated. */
  std::vector<Candidate> candidates(const Args& named, SourceLoc loc) const;
  /** The candidate to launch for these (real) arguments: from memory, the tuning database, or a
   * tuning round that calls `launch_candidate(i)` for trials. */
  size_t choose(ArrayRef<KernelArg> args, const Args& named, const std::vector<Candidate>& cands,
                FunctionRef<void(size_t)> launch_candidate, SourceLoc loc) const;
  /** Runs a candidate's config pre_hook (before its real launch). */
  void before_launch(const Args& named, const Candidate& c) const;
  /** The autotune config a candidate launches with (null: none, e.g. heuristics only). */
  const Config* config_of(const Candidate& c) const;

  void launch(const Launcher& launcher, ArrayRef<KernelArg> args) const override;

  // VariantSource
  std::shared_ptr<const std::vector<Variant>> variants(ArrayRef<KernelArg> args,
                                                       SourceLoc loc) const override;
  void run(ArrayRef<KernelArg> args, const std::vector<Variant>& variants,
           FunctionRef<void(size_t)> run_variant, SourceLoc loc) const override;
  std::shared_ptr<const VariantSource> shared() const override { return shared_from_this(); }
  std::string launch_hook(const Variant& v) const override;

  std::string name() const;

  // Results, for TunedKernel's accessors.
  mutable std::mutex mutex;
  struct WordsHash {
    size_t operator()(const std::vector<int64_t>& v) const;
  };
  mutable std::unordered_map<std::vector<int64_t>, int, WordsHash>
      choices;  ///< tuning key -> config
  /** Candidates when no heuristic layer exists (they depend only on the configs). */
  mutable std::shared_ptr<const std::vector<Candidate>> fixed_cands;
  mutable int last_config = -1;
  mutable std::vector<std::pair<int, double>> last_timings;
  mutable int rounds = 0;
  mutable int last_timed = 0;

 private:
  int tune(ArrayRef<KernelArg> args, const Args& named, const std::vector<Candidate>& cands,
           FunctionRef<void(size_t)> launch_candidate, const std::string& key, SourceLoc loc) const;
  /** The tuning key as words (the in-memory lookup) and as text (records, messages). */
  void key_words(const Args& named, std::vector<int64_t>& out) const;
  std::string key_text(const Args& named) const;
};

}  // namespace tessera::tl::detail
