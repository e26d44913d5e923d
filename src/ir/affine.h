/** \file
 * Affine forms of integer and pointer values over their tile's element index (Triton's AxisInfo,
 * made exact): `v[i] = base + sum_d coef[d] * i[d]`, where `base` is a uniform expression (a small
 * tree over scalar values and constants) and the coefficients are compile-time integers. From a
 * form follow contiguity (coefficient 1 along a dimension), constancy (coefficient 0) and the
 * base's divisibility; emitters use forms to prove masks true over a whole loop nest (the CPU's
 * unmasked fast path) and, for pointers, to choose vector widths.
 *
 * Exactness. A form is computed through splat, broadcast, expand_dims, permute, arange,
 * constants, add, sub, multiplication by a constant and addptr, in one element type. Those are
 * ring operations, so a 32-bit value always equals its form modulo 2^32: wherever `base + form`
 * over the indices in use fits int32 (one check, at the value itself), the form is its exact
 * value, whatever the intermediate steps did. 64-bit forms are exact while the base does not
 * overflow int64. `exact` marks forms that cannot wrap at all (no arithmetic on the way).
 */
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/ir.h"

namespace tessera::ir {

/** A node of a uniform expression: a constant, a scalar value of the function, or a sum,
 * difference, product or remainder (C's `%`, trt::irem's: a % 0 = a) of two nodes. Evaluated in
 * 64-bit integers. Remainders appear only in the forms of a rem_as_identity AffineInfo. */
struct UniformNode {
  enum class Kind : uint8_t { Constant, Value, Add, Sub, Mul, Rem } kind;
  int64_t constant = 0;
  ValueId value = kNoValue;
  int32_t a = -1, b = -1;  ///< operand nodes
};

struct AffineForm {
  SmallVector<int64_t, 4> coef;  ///< per dimension of the value's shape (empty for scalars)
  /** Empty when every coefficient is known; else per dimension 0 where coef[d] is known, or, for
   * a dimension whose term is not known (coef[d] then 0), a power of two dividing every value of
   * that term: `rows * K` with K an argument divisible by 16 (a coefficient known at run time:
   * 16), `(offs % M)[:, None] * stride` (any function of the row: the stride's divisor). The value
   * is the base plus one term per dimension. Only AffineInfo::loose_form gives such forms. */
  SmallVector<int64_t, 4> unknown;
  int32_t base = -1;                  ///< a UniformNode
  std::optional<int64_t> base_value;  ///< the base when known at compile time
  int64_t divisibility = 1;           ///< a power of two dividing the base (pointers: in bytes)
  bool exact = true;                  ///< no arithmetic on the way (cannot wrap)

  bool coef_known(size_t d) const { return unknown.empty() || unknown[d] == 0; }
  bool coefs_known() const {
    for (size_t d = 0; d < unknown.size(); ++d) {
      if (unknown[d] != 0) return false;
    }
    return true;
  }
  /** A power of two dividing the coefficient of dimension `d` (known or not; 2^30 for 0). */
  int64_t coef_divisibility(size_t d) const;

  bool uniform() const {
    for (size_t d = 0; d < coef.size(); ++d) {
      if (!coef_known(d) || coef[d] != 0) return false;
    }
    return true;
  }
};

class AffineInfo {
 public:
  /** `rem_as_identity`: `x % m` with m uniform takes x's form with its base B replaced by
   * B % m: the forms of code an emitter writes under a uniform guard that the tile does not wrap
   * (x >= 0 and 0 <= B % m + (x - B) < m over the whole tile: then x % m = B % m + (x - B)). */
  explicit AffineInfo(const Function& f, bool rem_as_identity = false);

  /** The form of `v`, or null when `v` is not affine (loaded, loop-carried, nonlinear, a float,
   * a coefficient known only at run time). */
  const AffineForm* form(ValueId v) const {
    const AffineForm* a = loose_form(v);
    return a && a->coefs_known() ? a : nullptr;
  }
  /** The form of `v` where some coefficients may be known only by a divisor (AffineForm::unknown):
   * what vector widths need (Triton's AxisInfo divisibility). */
  const AffineForm* loose_form(ValueId v) const {
    const int32_t i = index_[static_cast<size_t>(v)];
    return i < 0 ? nullptr : &forms_[static_cast<size_t>(i)];
  }
  const UniformNode& node(int32_t i) const { return nodes_[static_cast<size_t>(i)]; }

  /** How many consecutive elements along `dim` are consecutive integers (1 when not known). */
  int64_t contiguity(ValueId v, size_t dim) const;
  /** How many consecutive elements along `dim` are equal (1 when not known). */
  int64_t constancy(ValueId v, size_t dim) const;

 private:
  void region(const Region& r, int64_t iv_divisibility = 1);
  void op(const Op& op);
  int32_t add_node(UniformNode n);
  void set(ValueId v, AffineForm f);
  /** a's unknown coefficients for a sum (or difference) of x and y, whose known ones a holds. */
  static void combine_unknowns(AffineForm& a, const AffineForm& x, const AffineForm& y);

  const Function& f_;
  const bool rem_as_identity_;
  std::vector<int32_t> index_;
  std::vector<AffineForm> forms_;
  std::vector<UniformNode> nodes_;
};

}  // namespace tessera::ir
