/** \file
 * Inline C expressions of tile-IR values at one element, shared by the C++-family emitters (the
 * CPU's C++ and CUDA C++): a value is its scalar variable, its stored array's element, or the
 * expression of its defining op evaluated at that element (index, pointer and mask tiles are
 * never stored). Emitters derive from `ExprPrinter` and override `op_expr` where they add
 * something (the CPU's checked mode and proven masks).
 */
#pragma once

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "backend/common/checks.h"
#include "ir/ir.h"
#include "ir/materialize.h"
#include "ir/uses.h"

namespace tessera::ir {
class AffineInfo;
}

namespace tessera::backend::cfamily {

using Index = std::vector<std::string>;

/** Row-major flat index of `idx` into an array of `shape` (size-1 and "0" terms left out). */
std::string flat(const SmallVector<int64_t, 4>& shape, const Index& idx);

/** The uniform guards under which integer `x % m`, for x = B + offsets with offsets in [lo, hi]
 * (lo <= 0 <= hi) and B, m uniform 64-bit expressions, is x - (B - B % m): x >= 0 and the
 * offsets do not carry B % m past a multiple of m (m <= 0 fails the last). */
std::vector<std::string> rem_no_straddle_guards(const std::string& base, const std::string& mod,
                                                int64_t lo, int64_t hi);
/** What `x % m` is x minus under rem_no_straddle_guards: B - B % m. */
std::string rem_shift_expr(const std::string& base, const std::string& mod);

class ExprPrinter {
 public:
  /** `checked`: the checked mode (TESSERA_DEBUG): loads, stores and atomics check their pointers
   * against the bounds of the tensors they derive from, int32 `+ - *` report wrapping, asserts
   * report; the generated code calls the runtime's `trt::dbg_*` through `_dbg`, which each
   * emitter declares (the CPU's callbacks, the GPU's record buffer: the same calls). */
  /** `reread_loads`: the materialization plan's (ir/materialize.h); the CPU emitter's choice. */
  ExprPrinter(const ir::Function& f, bool checked, bool reread_loads = false);
  virtual ~ExprPrinter() = default;

 protected:
  /** The C name of a value. */
  static std::string name(ir::ValueId v) { return "v" + std::to_string(v); }
  /** `v` at element `idx`: its variable, its array's element, or its op's inline expression. */
  std::string expr(ir::ValueId v, const Index& idx);
  /** Where `v` lives: the materialization plan's choice unless an emitter overrides it (the CUDA
   * emitter keeps some arrays in registers, loads included). */
  virtual ir::Storage storage(ir::ValueId v) const { return plan_.storage(v); }
  /** Element `idx` of the array holding `v` (row-major in memory unless an emitter overrides
   * it). */
  virtual std::string array_ref(ir::ValueId v, const Index& idx);
  /** The inline expression of `op`'s result at `idx` (elementwise and view-like ops). */
  virtual std::string op_expr(const ir::Op& op, const Index& idx);
  /** A pointer offset as a 64-bit expression: chains of +, - and * over signed integers of at
   * most 32 bits are evaluated in 64 bits, so compilers see addresses affine in the loop index;
   * the result differs from 32-bit wrapping arithmetic only where that arithmetic overflows,
   * which addresses memory outside the tensor anyway (docs/decisions.md, "pointer offsets"). */
  std::string offset_expr(ir::ValueId v, const Index& idx);
  /** A uniform expression of ir/affine.h (node `node` of `a`) as a 64-bit C expression. */
  std::string uniform_expr(const ir::AffineInfo& a, int32_t node) const;
  /** Whether integer `x % m` (`op`) equals `x` at `idx` for the code being written (an emitter
   * that versions loops proves it under a guard); offset_expr then goes through it. */
  virtual bool rem_is_identity(const ir::Op& op, const Index& idx) {
    (void)op, (void)idx;
    return false;
  }
  /** Where rem_is_identity holds, what `x % m` is x minus at `idx` (a uniform expression, a
   * multiple of m; empty for 0). */
  virtual std::string rem_shift(const ir::Op& op, const Index& idx) {
    (void)op, (void)idx;
    return {};
  }
  /** The index into operand `k` of view-like `op` for the result index `idx` (ir/index_map.h). */
  Index source_index(const ir::Op& op, const Index& idx, size_t k = 0) const;

  // ---- the checked mode ----
  /** The site number of checked op `op` (what: "load", "store", "atomic", "assert",
   * "overflow"); the launch reports violations by it. */
  int site(const ir::Op& op, const char* what);
  /** The lane index of `idx` in the tile of `op`'s first operand. */
  std::string lane(const ir::Op& op, const Index& idx) const;
  /** The bounds check of the pointer lane of a load, store or atomic (true when in bounds;
   * "true" for a pointer that derives from no parameter the check knows). */
  std::string check(const ir::Op& op, const char* what, const Index& idx);
  /** The guard of a store's or masked atomic's lane: its mask and, checked, its bounds check (""
   * for none). `mask`: the operand index of the mask, or 0 for none. */
  std::string lane_guard(const ir::Op& op, size_t mask, const char* what, const Index& idx);
  /** A store of one lane as a statement (in the checked mode the value first, then the guarded
   * write). */
  std::string store_stmt(const ir::Op& op, const Index& idx);
  /** A checked device_assert of one lane as a statement. */
  std::string assert_stmt(const ir::Op& op, const Index& idx);

  // ---- writing the program ----
  /** Appends `s` as a line at the current indentation. */
  void line(const std::string& s);
  /** A new local name: `prefix` and a number. */
  std::string fresh(const char* prefix) { return std::string(prefix) + std::to_string(counter_++); }
  /** The first lines: what made the code (`flavour`, e.g. " (CUDA, stage 1)"), the specialization
   * (each parameter's type or constexpr), the runtime header's include, and the libraries of the
   * kernel's tl::extern_elementwise calls in this backend's language (CUDA or C++). */
  void preamble(const char* flavour, const char* runtime_header, bool cuda);
  /** A local per runtime parameter, read from the argument slots `_a` (`aligned`: pointers
   * specialized as 16-byte aligned say so to the compiler), and in the checked mode `_dbg`, a
   * `debug_type*` from the slot after them. */
  void declare_params(const char* debug_type, bool aligned);

  const ir::Function& f_;
  const ir::UseInfo uses_;
  const ir::MaterializationPlan plan_;
  const bool checked_;
  std::vector<uint64_t> prov_;  // checked: per value, the pointer parameters it derives from
  std::vector<CheckSite> sites_;
  std::map<const ir::Op*, int> site_of_;
  std::ostringstream out_;
  int indent_ = 0;
  int counter_ = 0;
};

/** The call that performs atomic `op` (Atomic or AtomicCas) on pointer `p` with value `v` (`c`
 * and `nv`: the compare-and-swap's operands) through the runtime's atomics (trt::atomic_*). */
std::string atomic_call(const ir::Function& f, const ir::Op& op, const std::string& p,
                        const std::string& v, const std::string& c, const std::string& nv);

/** device_print's printf format pieces for operand `k` of `op`: the escaped prefix and label, the
 * conversion and the cast that opens the argument. */
struct PrintFormat {
  std::string prefix, label, conversion, cast;
};
PrintFormat print_format(const ir::Function& f, const ir::Op& op, size_t k);

}  // namespace tessera::backend::cfamily
