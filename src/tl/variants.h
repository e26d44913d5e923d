/** \file
 * A launch's variants: the public face the autotuner and the graph compiler share (DESIGN D12).
 *
 * A plain launch has one variant; an autotuned or heuristic launch (tune layer) has one per config
 * with its heuristics evaluated. `VariantSource` is what such a launch's target offers: its
 * variants for some arguments, and the choice among them for real arguments (tuning once per
 * key). `PreparedVariants` binds, specializes and generates the variants of one launch in one
 * go (found in the in-memory cache or traced; built later, in one batch, only where needed).
 */
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tessera/detail/function_ref.h"
#include "tessera/tl.h"
#include "tl/jit.h"

namespace tessera::tl {

/** One way to run a launch: meta-parameters added to its arguments, and launch options. */
struct Variant {
  std::vector<std::pair<std::string, MetaValue>> meta;
  bool has_options = false;
  int64_t num_warps = 4, num_stages = 3;
  int64_t maxnreg = 0;  ///< 0: none
  int config = -1;      ///< index into the autotuning layer's configs (-1: none)
};

/** The launch arguments of a variant: `args`, then its meta-parameters and options. */
void with_variant(ArrayRef<KernelArg> args, const Variant& v, SourceLoc loc,
                  SmallVector<KernelArg, 16>& out);

/** A launch target with variants (an autotuned or heuristic kernel). */
class VariantSource {
 public:
  virtual ~VariantSource() = default;
  /** Every variant for these arguments: one per config (or one), heuristics evaluated (shared:
   * without heuristics they are made once, and a hot launch allocates nothing). */
  virtual std::shared_ptr<const std::vector<Variant>> variants(ArrayRef<KernelArg> args,
                                                               SourceLoc loc) const = 0;
  /** Runs the launch for real arguments: picks one of `variants` (from memory, the tuning
   * database, or a tuning round that calls `run_variant(i)` for trials), runs its config's
   * pre_hook, then `run_variant(pick)`. */
  virtual void run(ArrayRef<KernelArg> args, const std::vector<Variant>& variants,
                   FunctionRef<void(size_t)> run_variant, SourceLoc loc) const = 0;
  /** A shared reference, for callers that keep it (a compiled graph's node). */
  virtual std::shared_ptr<const VariantSource> shared() const = 0;
  /** When `run` calls host code before launching variant `v` (an autotune config's pre_hook):
   * that config, as text; else "". AOT export refuses such launches. */
  virtual std::string launch_hook(const Variant& v) const {
    (void)v;
    return "";
  }
};

/** The variant source behind a launcher, or null for a plain launch. */
const VariantSource* variant_source(const Launcher& launch);

/** The specializations of several variants of one kernel launch, found in the in-memory cache or
 * traced and generated (not built: `build` compiles the ones needed in one batch). With
 * `tolerate_failures`, a variant that does not bind or trace keeps its error instead of throwing
 * (an autotuning config that does not fit). */
class PreparedVariants {
 public:
  PreparedVariants(const JITFunction& fn, std::vector<std::vector<KernelArg>> args, SourceLoc loc,
                   bool tolerate_failures);

  size_t size() const { return args_.size(); }
  /** Variant i's full argument list. */
  const std::vector<KernelArg>& args(size_t i) const { return args_[i]; }
  /** Variant i's specialization (null when it failed: `error(i)` says why). */
  const std::shared_ptr<detail::CompiledKernel>& kernel(size_t i) const { return kernels_[i]; }
  const std::string& error(size_t i) const { return errors_[i]; }
  /** The tensor variant i binds to each of its parameters (null for other parameters). */
  const Tensor* param_tensor(size_t i, size_t param) const;
  /** Compiles the unbuilt specializations of `which` (every variant when empty) in one batch and
   * puts them in the kernel's in-memory cache. */
  void build(const std::vector<size_t>& which = {});

 private:
  detail::KernelState& s_;
  SourceLoc loc_;
  std::vector<std::vector<KernelArg>> args_;
  std::vector<detail::Spec> specs_;  ///< per variant (unused for failed ones)
  std::vector<std::shared_ptr<detail::CompiledKernel>> kernels_;
  std::vector<std::string> errors_;
};

}  // namespace tessera::tl
