/** \file
 * Internals of kernel launches shared with later layers (the graph compiler records launches
 * instead of running them; the autotuner compiles many specializations at once).
 */
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "tessera/detail/small_vector.h"
#include "tessera/tl.h"

namespace tessera::ir {
class Function;
}

namespace tessera::tl::detail {

/** A launch argument bound to its parameter. */
struct BoundArg {
  JITFunction::ParamSpec::Kind kind;
  DType dtype = DType::Int32;  ///< pointee (pointers) or value type (ints, floats)
  void* ptr = nullptr;
  int64_t i = 0;
  double f = 0;
  bool div16 = false;
  bool folded_one = false;  ///< an int equal to 1, specialized to a constant
  MetaArg constant;         ///< constexpr value
  const Tensor* tensor = nullptr;
  int16_t arg = -1;  ///< the launch argument it was bound from
};

/** A specialization: the backend it runs on, its generated (and, once built, loaded) code, and
 * what the layers above read of it. */
struct CompiledKernel {
  const backend::Backend* backend = nullptr;
  backend::Kernel code;
  std::string name;                              ///< the kernel's
  std::string ir;                                ///< the optimized tile IR, printed
  Meta meta;                                     ///< the constexpr values, for grid callables
  std::vector<bool> written;                     ///< per parameter: the kernel may store through it
  std::vector<bool> read;                        ///< per parameter: the kernel may load through it
  std::shared_ptr<const ir::Function> function;  ///< the optimized tile IR (cost analysis)
  /** Per parameter: every store (load) through it addresses it as `param + offsets` in the traced
   * IR, before optimization (ir::direct_stores / direct_loads): what a derived kernel's store and
   * load hooks see when they trace the same body (the optimized IR can make a loop-carried
   * pointer direct, which the hooks cannot follow). */
  std::vector<bool> direct_stores, direct_loads;
};

using Key = SmallVector<uint64_t, 24>;

struct KeyHash {
  using is_transparent = void;
  size_t operator()(ArrayRef<uint64_t> k) const;
  size_t operator()(const std::vector<uint64_t>& k) const { return (*this)(ArrayRef<uint64_t>(k)); }
};
struct KeyEq {
  using is_transparent = void;
  bool operator()(ArrayRef<uint64_t> a, ArrayRef<uint64_t> b) const { return a.equals(b); }
  bool operator()(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) const {
    return a == b;
  }
  bool operator()(const std::vector<uint64_t>& a, ArrayRef<uint64_t> b) const {
    return b.equals(a);
  }
  bool operator()(ArrayRef<uint64_t> a, const std::vector<uint64_t>& b) const {
    return a.equals(b);
  }
};

struct KernelState {
  std::string name;
  std::vector<JITFunction::ParamSpec> params;
  std::string param_error;  ///< a malformed TL_JIT signature, reported at the first launch
  detail::ErasedBody body = nullptr;
  BodyInvoker invoke = nullptr;
  /** A kernel made by the graph compiler (tl/fused.h): its body as a closure, used instead of
   * `body` and `invoke`. */
  std::function<void(const Tile* params)> closure;
  SourceLoc loc;
  std::vector<bool> no_specialize;

  mutable std::mutex mutex;
  std::unordered_map<std::vector<uint64_t>, std::shared_ptr<CompiledKernel>, KeyHash, KeyEq> cache;
  std::shared_ptr<CompiledKernel> last;
  std::vector<uint64_t> last_key;
  std::string last_source, last_ir;
  bool last_from_disk = false;
  double last_compile_ms = 0;
};

/** The backend a specialization of these arguments runs on (the arguments' device; the
 * interpreter under `TESSERA_INTERPRET=1`). */
const backend::Backend& backend_of(const SmallVector<BoundArg, 16>& bound);

/** Binds launch arguments to parameters; a CompileError naming the parameter on a mismatch. */
/** A launch's options (`tl::num_warps`, `tl::num_stages`, `tl::maxnreg`): part of the key, and
 * attributes of the kernel's IR. */
struct LaunchOptions {
  int64_t num_warps = 4, num_stages = 3;
  int64_t maxnreg = 0;  ///< 0: no limit
};

void bind(const KernelState& s, ArrayRef<KernelArg> args, SmallVector<BoundArg, 16>& out,
          LaunchOptions& opts, SourceLoc loc);
/** The specialization key of bound arguments. */
void make_key(const SmallVector<BoundArg, 16>& bound, const LaunchOptions& opts, Key& key);
/** Traces, optimizes and generates one specialization: everything but the binary
 * (`code.built` stays false). */
std::shared_ptr<CompiledKernel> prepare(KernelState& s, const SmallVector<BoundArg, 16>& bound,
                                        const LaunchOptions& opts, SourceLoc loc);
/** Compiles prepared specializations, all in one batch (one compiler run per core). */
void build(const std::vector<CompiledKernel*>& kernels);
/** Traces, optimizes, generates and compiles one specialization. */
std::shared_ptr<CompiledKernel> compile(KernelState& s, const SmallVector<BoundArg, 16>& bound,
                                        const LaunchOptions& opts, SourceLoc loc);

/** One launch's specialization request. */
struct Spec {
  SmallVector<BoundArg, 16> bound;
  LaunchOptions opts;
};
/** Finds several specializations in the in-memory cache, or prepares them (unbuilt until
 * `build_missing`). With `errors`, a specialization that fails to trace leaves a null entry and
 * its message there instead of throwing. */
std::vector<std::shared_ptr<CompiledKernel>> lookup_or_prepare(
    KernelState& s, const std::vector<Spec>& specs, SourceLoc loc,
    std::vector<std::string>* errors = nullptr);
/** Builds the prepared (unbuilt, non-null) entries of `kernels` in one batch and puts them in the
 * in-memory cache. */
void build_missing(KernelState& s, const std::vector<Spec>& specs,
                   std::vector<std::shared_ptr<CompiledKernel>>& kernels);
/** A launch to build before it runs (`prebuild`). */
struct PendingBuild {
  KernelState* state = nullptr;
  ArrayRef<KernelArg> args;
  SourceLoc loc;
};
/** Builds the specializations these launches will need that are not built yet, all in one batch
 * per backend, so that their compiles run in parallel, and runs nothing: a compiled graph's first
 * call builds all its kernels at once instead of one per launch. Tensors without data (stand-ins)
 * specialize as 16-byte aligned. A launch that fails to bind, trace or compile is skipped: it
 * reports its error when it runs. Returns how many specializations were built. */
size_t prebuild(const std::vector<PendingBuild>& launches);
/** Finds or compiles the specialization for bound arguments (the in-memory cache). */
std::shared_ptr<CompiledKernel> get_kernel(KernelState& s, const SmallVector<BoundArg, 16>& bound,
                                           const LaunchOptions& opts, SourceLoc loc);

}  // namespace tessera::tl::detail
