/** \file
 * The materialization plan: which tile values an emitter recomputes where they are used (inline
 * expressions), which live in a scalar register, and which are stored in an array (a tile in
 * memory or registers), and which arrays the reduction consuming them writes (one pass over the
 * tile instead of two). A property of the IR and the op-trait table (kCheap), computed once per
 * function; the CPU emitter prints by it.
 */
#pragma once

#include <vector>

#include "ir/ir.h"
#include "ir/uses.h"

namespace tessera::ir {

enum class Storage : uint8_t {
  Inline,  ///< recomputed per element where used (cheap ops; loads and math used once)
  Scalar,  ///< a scalar variable
  Array,   ///< a tile materialized once
};

class MaterializationPlan {
 public:
  /** `reread_loads`: a load used by several ops (a row's max and its exp) stays inline, read again
   * by each, where its address is cheap and nothing writes memory until the last of them (the
   * CPU: the second read hits the cache, where a stored copy is one more pass of writes and
   * reads). Off, such a load is stored once (the CUDA emitter keeps it in registers). */
  MaterializationPlan(const Function& f, const UseInfo& uses, bool reread_loads = false);

  Storage storage(ValueId v) const { return storage_[static_cast<size_t>(v)]; }
  /** Whether array `v` is written by the reduction that consumes it (fused into its loop). */
  bool fused_into_reduction(ValueId v) const { return fused_[static_cast<size_t>(v)]; }

 private:
  void classify(const Region& r);
  void store_dot_operands(const Region& r);
  bool expensive_inline(ValueId v, int& budget) const;
  void place_loads(const Region& r);
  bool reads_memory_inline(ValueId v, int depth) const;
  void fuse_into_reductions(const Region& r);

  const Function& f_;
  const UseInfo& uses_;
  std::vector<Storage> storage_;
  std::vector<bool> fused_;
  std::vector<int64_t> inline_size_;  ///< ops in each inline value's expanded expression
  const bool reread_loads_;
  /** The most ops one load is read again by (reread_loads). */
  static constexpr size_t kMaxRereads = 4;
  /** The largest expression a value used more than once is recomputed as (ops). */
  static constexpr int64_t kMaxSharedInline = 48;
};

}  // namespace tessera::ir
