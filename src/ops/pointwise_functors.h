/** \file
 * Each built-in pointwise op, defined once as a functor over a value type `V` (DESIGN.md D6).
 * Instantiated with C++ scalars (the arithmetic type of a dtype) they are the bodies of the CPU
 * loops; instantiated with tile values (src/tl/op_tiles.cpp: a `tl::Tile` that knows its
 * element type at compile time) they trace the same op into tile IR, for GPU tensors and fusion.
 * So the bodies branch on types only (`if constexpr` on `elem_t<V>`), never on values: a value
 * choice is `select(c, a, b)`, and every operand of a select is safe to compute (no division by
 * zero, no shift past the width). Math goes through unqualified calls (`exp(x)`), so the tile
 * overloads are found by argument-dependent lookup.
 *
 * Semantics follow PyTorch: integer arithmetic wraps (computed unsigned, never undefined),
 * floor division and remainder take the divisor's sign, maximum/minimum propagate NaN, shifts by
 * the bit width or more give 0 (or the sign fill for right shifts).
 */
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "tessera/error.h"

namespace tessera::pw {

using std::abs;
using std::ceil;
using std::copysign;
using std::cos;
using std::erf;
using std::exp;
using std::exp2;
using std::floor;
using std::fmod;
using std::isnan;
using std::log;
using std::log2;
using std::pow;
using std::sin;
using std::sqrt;
using std::tanh;
using std::trunc;

/** The element type a value computes in: a scalar's own type; tile values specialize this with
 * `type` (their element type) and `rebind<U>` (the tile value of another element type). */
template <class V>
struct element_of {
  using type = V;
};
template <class V>
using elem_t = typename element_of<V>::type;
template <class V>
inline constexpr bool is_tile_v = !std::is_arithmetic_v<V>;

/** `c ? a : b` for scalars (tiles overload it with `tl::where`). */
template <class C, class V>
inline V select(C c, V a, V b) {
  return c ? a : b;
}

/** `static_cast<To>(v)`, for tiles a conversion of every element. */
template <class To, class V>
inline auto cast(const V& v) {
  if constexpr (is_tile_v<V>)
    return typename element_of<V>::template rebind<To>(v);
  else
    return static_cast<To>(v);
}

template <class V>
inline constexpr bool is_int_v = std::is_integral_v<elem_t<V>> && !std::is_same_v<elem_t<V>, bool>;
template <class V>
inline constexpr bool is_float_v = std::is_floating_point_v<elem_t<V>>;
template <class V>
inline constexpr bool is_bool_v = std::is_same_v<elem_t<V>, bool>;

// Integer arithmetic wraps: computed unsigned on scalars (never undefined); tile integer
// arithmetic wraps by definition.
template <class V>
inline V wrap_add(V a, V b) {
  if constexpr (is_int_v<V> && !is_tile_v<V>) {
    using U = std::make_unsigned_t<V>;
    return static_cast<V>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}
template <class V>
inline V wrap_sub(V a, V b) {
  if constexpr (is_int_v<V> && !is_tile_v<V>) {
    using U = std::make_unsigned_t<V>;
    return static_cast<V>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
  } else {
    return a - b;
  }
}
template <class V>
inline V wrap_mul(V a, V b) {
  if constexpr (is_bool_v<V>) {
    return a && b;
  } else if constexpr (is_int_v<V> && !is_tile_v<V>) {
    using U = std::conditional_t<(sizeof(V) < sizeof(unsigned)), unsigned, std::make_unsigned_t<V>>;
    return static_cast<V>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return a * b;
  }
}
template <class V>
inline V wrap_neg(V a) {
  return wrap_sub(V(0), a);
}

[[noreturn]] void throw_zero_division(const char* op);

/** Integer division by zero: an error on the CPU (PyTorch's ZeroDivisionError); a tile computes
 * 0 there (GPU kernels raise nothing, as PyTorch's CUDA kernels). */
template <class V>
inline void check_nonzero(const V& b, const char* op) {
  if constexpr (!is_tile_v<V>) {
    if (b == 0) throw_zero_division(op);
  }
}

struct Add {
  template <class V>
  V operator()(V a, V b) const {
    if constexpr (is_bool_v<V>)
      return a || b;
    else
      return wrap_add(a, b);
  }
};
/** a + alpha * b. */
template <class V>
struct AddScaled {
  V alpha;
  V operator()(V a, V b) const {
    if constexpr (is_bool_v<V>)
      return a || (alpha && b);
    else
      return wrap_add(a, wrap_mul(alpha, b));
  }
};
struct Sub {
  template <class V>
  V operator()(V a, V b) const {
    return wrap_sub(a, b);
  }
};
struct Mul {
  template <class V>
  V operator()(V a, V b) const {
    return wrap_mul(a, b);
  }
};
/** True division (floating types). */
struct Div {
  template <class V>
  V operator()(V a, V b) const {
    return a / b;
  }
};
/** a / b truncated, for integers with no undefined case: the divisor is replaced by 1 where it
 * is 0 (result 0) or -1 (result -a, wrapping). */
template <class V>
inline V safe_int_div(V a, V b) {
  if constexpr (std::is_signed_v<elem_t<V>>) {
    const auto neg1 = b == V(-1), zero = b == V(0);
    const V q = V(a / select(neg1 || zero, V(1), b));
    return select(neg1, wrap_neg(a), select(zero, V(0), q));
  } else {
    const auto zero = b == V(0);
    return select(zero, V(0), V(a / select(zero, V(1), b)));
  }
}
struct TruncDiv {
  template <class V>
  V operator()(V a, V b) const {
    if constexpr (is_int_v<V>) {
      check_nonzero(b, "div");
      return safe_int_div(a, b);
    } else {
      return trunc(a / b);
    }
  }
};
struct FloorDiv {
  template <class V>
  V operator()(V a, V b) const {
    if constexpr (is_int_v<V>) {
      check_nonzero(b, "div");
      const V q = safe_int_div(a, b);
      if constexpr (std::is_signed_v<elem_t<V>>) {
        // Inexact with operands of opposite signs: one less (b == -1 and b == 0 are exact).
        const auto inexact = wrap_mul(q, b) != a && b != V(0);
        return select(inexact && ((a < V(0)) != (b < V(0))), wrap_sub(q, V(1)), q);
      } else {
        return q;
      }
    } else {
      const V m = fmod(a, b);
      V d = (a - m) / b;
      d = select(m != V(0) && ((b < V(0)) != (m < V(0))), d - V(1), d);
      V f = floor(d);
      f = select(d - f > V(0.5), f + V(1), f);
      const V r = select(d == V(0), copysign(V(0), a / b), f);
      return select(b == V(0), a / b, r);
    }
  }
};
struct Remainder {
  template <class V>
  V operator()(V a, V b) const {
    if constexpr (is_int_v<V>) {
      check_nonzero(b, "remainder");
      const auto bad = b == V(0) || b == V(std::is_signed_v<elem_t<V>> ? -1 : 0);
      const V r = select(bad, V(0), V(a % select(bad, V(1), b)));
      if constexpr (std::is_signed_v<elem_t<V>>)
        return select(r != V(0) && ((r < V(0)) != (b < V(0))), wrap_add(r, b), r);
      else
        return r;
    } else {
      const V m = fmod(a, b);
      return select(m != V(0) && ((b < V(0)) != (m < V(0))), m + b, m);
    }
  }
};
struct Pow {
  template <class V>
  V operator()(V a, V b) const {
    if constexpr (is_int_v<V>) {
      using E = elem_t<V>;
      V result(1), base = a;
      if constexpr (is_tile_v<V>) {
        // Square-and-multiply over every exponent bit (no loop on values).
        V e = b;
        for (size_t i = 0; i < sizeof(E) * 8; ++i) {
          result = select((e & V(1)) != V(0), wrap_mul(result, base), result);
          base = wrap_mul(base, base);
          e = cast<E>(cast<std::make_unsigned_t<E>>(e) >> cast<std::make_unsigned_t<E>>(V(1)));
        }
      } else {
        for (auto e = b; e != 0; e /= 2) {
          if (e % 2) result = wrap_mul(result, base);
          base = wrap_mul(base, base);
        }
      }
      if constexpr (std::is_signed_v<E>) {
        // Negative exponents: 1 for a base of 1, +-1 for -1, else 0.
        const V odd = select((b & V(1)) != V(0), V(-1), V(1));
        const V neg = select(a == V(1), V(1), select(a == V(-1), odd, V(0)));
        return select(b < V(0), neg, result);
      } else {
        return result;
      }
    } else {
      return pow(a, b);
    }
  }
};
struct Maximum {
  template <class V>
  V operator()(V a, V b) const {
    if constexpr (is_float_v<V>)
      return select(isnan(a), a, select(isnan(b), b, select(a > b, a, b)));
    else
      return select(a > b, a, b);
  }
};
struct Minimum {
  template <class V>
  V operator()(V a, V b) const {
    if constexpr (is_float_v<V>)
      return select(isnan(a), a, select(isnan(b), b, select(a < b, a, b)));
    else
      return select(a < b, a, b);
  }
};

#define TS_COMPARE_FUNCTOR(Name, op)  \
  struct Name {                       \
    template <class V>                \
    auto operator()(V a, V b) const { \
      return a op b;                  \
    }                                 \
  };
TS_COMPARE_FUNCTOR(Eq, ==)
TS_COMPARE_FUNCTOR(Ne, !=)
TS_COMPARE_FUNCTOR(Lt, <)
TS_COMPARE_FUNCTOR(Le, <=)
TS_COMPARE_FUNCTOR(Gt, >)
TS_COMPARE_FUNCTOR(Ge, >=)
#undef TS_COMPARE_FUNCTOR

struct LogicalAnd {
  template <class V>
  auto operator()(V a, V b) const {
    return (a != V(0)) && (b != V(0));
  }
};
struct LogicalOr {
  template <class V>
  auto operator()(V a, V b) const {
    return (a != V(0)) || (b != V(0));
  }
};
struct LogicalXor {
  template <class V>
  auto operator()(V a, V b) const {
    return (a != V(0)) != (b != V(0));
  }
};
struct BitAnd {
  template <class V>
  V operator()(V a, V b) const {
    return static_cast<V>(a & b);
  }
};
struct BitOr {
  template <class V>
  V operator()(V a, V b) const {
    return static_cast<V>(a | b);
  }
};
struct BitXor {
  template <class V>
  V operator()(V a, V b) const {
    return static_cast<V>(a ^ b);
  }
};
/** Whether a shift amount is negative or at least the width (PyTorch: the result is 0, or the
 * sign fill for right shifts), and the amount made safe to shift by. */
template <class V>
inline auto shift_amount(V b) {
  using E = elem_t<V>;
  using U = std::make_unsigned_t<E>;
  constexpr auto kBits = static_cast<U>(sizeof(E) * 8);
  const auto bu = cast<U>(b);
  const auto out = cast<std::make_signed_t<E>>(b) < cast<std::make_signed_t<E>>(V(0)) ||
                   bu >= decltype(bu)(kBits);
  return std::pair{out, select(out, decltype(bu)(0), bu)};
}
struct ShiftLeft {
  template <class V>
  V operator()(V a, V b) const {
    using E = elem_t<V>;
    const auto [out, sh] = shift_amount(b);
    const V shifted = cast<E>(cast<std::make_unsigned_t<E>>(a) << sh);
    return select(out, V(0), shifted);
  }
};
struct ShiftRight {
  template <class V>
  V operator()(V a, V b) const {
    using E = elem_t<V>;
    const auto [out, sh] = shift_amount(b);
    const V shifted = cast<E>(a >> cast<E>(sh));
    if constexpr (std::is_signed_v<E>)
      return select(out, select(a < V(0), V(-1), V(0)), shifted);
    else
      return select(out, V(0), shifted);
  }
};

// ---- unary ----------------------------------------------------------------------------------

struct Neg {
  template <class V>
  V operator()(V a) const {
    return wrap_neg(a);
  }
};
struct Abs {
  template <class V>
  V operator()(V a) const {
    if constexpr (std::is_unsigned_v<elem_t<V>>)
      return a;
    else if constexpr (is_int_v<V>)
      return select(a < V(0), wrap_neg(a), a);
    else
      return abs(a);
  }
};
#define TS_MATH_FUNCTOR(Name, expr) \
  struct Name {                     \
    template <class V>              \
    V operator()(V x) const {       \
      return expr;                  \
    }                               \
  };
TS_MATH_FUNCTOR(Exp, exp(x))
TS_MATH_FUNCTOR(Exp2, exp2(x))
TS_MATH_FUNCTOR(Log, log(x))
TS_MATH_FUNCTOR(Log2, log2(x))
TS_MATH_FUNCTOR(Sqrt, sqrt(x))
TS_MATH_FUNCTOR(Rsqrt, V(1) / sqrt(x))
TS_MATH_FUNCTOR(Sin, sin(x))
TS_MATH_FUNCTOR(Cos, cos(x))
TS_MATH_FUNCTOR(Tanh, tanh(x))
TS_MATH_FUNCTOR(Erf, erf(x))
TS_MATH_FUNCTOR(Sigmoid, V(1) / (V(1) + exp(-x)))
TS_MATH_FUNCTOR(Silu, x / (V(1) + exp(-x)))
TS_MATH_FUNCTOR(Gelu, V(0.5) * x * (V(1) + erf(x * V(0.70710678118654752440))))
// 0.5 x (1 + tanh(u)) with u = sqrt(2 / pi) (x + 0.044715 x^3), as x sigmoid(2u) = x / (1 + e^-2u):
// one exp and one division instead of tanh's exp, division and polynomial (a third of the GPU's
// instructions), and no cancellation in 1 + tanh(u) where x < 0 (closer to the exact value).
TS_MATH_FUNCTOR(GeluTanh,
                x / (V(1) + exp(x * (V(-1.5957691216057308) + V(-0.07135481627260025) * x * x))))
#undef TS_MATH_FUNCTOR
// GELU's derivative times the gradient g, in one op (PyTorch's gelu_backward): computed in the
// compute type and rounded once, where its formula as separate ops rounds at every step.
struct GeluBackward {
  template <class V>
  V operator()(V g, V x) const {
    const V cdf = V(0.5) * (V(1) + erf(x * V(0.70710678118654752440)));
    const V pdf = exp(V(-0.5) * x * x) * V(0.39894228040143267794);  // 1 / sqrt(2 pi)
    return g * (cdf + x * pdf);
  }
};
// d/dx x s(x) with s = sigmoid(2u) (GeluTanh's form): s + x s (1 - s) 2u', 2u' = 2 sqrt(2 / pi)
// (1 + 3 * 0.044715 x^2); PyTorch's 0.5 (1 + t) + 0.5 x (1 - t^2) u' with t = tanh(u) = 2s - 1.
// 1 - s as e s (e = e^-2u; 1 where e is inf): no cancellation where s is near 1.
struct GeluTanhBackward {
  template <class V>
  V operator()(V g, V x) const {
    const V x2 = x * x;
    const V e = exp(x * (V(-1.5957691216057308) + V(-0.07135481627260025) * x2));
    const V s = V(1) / (V(1) + e);
    const V q = select(e < V(3.0e38), e * s, V(1));
    return g * (s + x * (s * q) * (V(1.5957691216057308) + V(0.21406444881780076) * x2));
  }
};

struct Relu {
  template <class V>
  V operator()(V x) const {
    if constexpr (is_float_v<V>)
      return select(x > V(0) || isnan(x), x, V(0));
    else
      return select(x > V(0), x, V(0));
  }
};
struct LogicalNot {
  template <class V>
  auto operator()(V a) const {
    return a == V(0);
  }
};
struct BitNot {
  template <class V>
  V operator()(V a) const {
    if constexpr (is_bool_v<V>)
      return !a;
    else
      return static_cast<V>(~a);
  }
};
/** Clamps to [lo, hi]; either bound may be absent; NaN propagates. */
template <class V>
struct Clamp {
  bool has_lo, has_hi;
  V lo, hi;
  V operator()(V x) const {
    V r = x;
    if (has_lo) r = Maximum()(r, lo);
    if (has_hi) r = Minimum()(r, hi);
    if constexpr (is_float_v<V>)
      return select(isnan(x), x, r);
    else
      return r;
  }
};
/** `isclose` in float64: equal values (infinities included), NaN against NaN when `equal_nan`,
 * else finite values within `atol + rtol * |q|`. */
template <class V>
struct IsClose {
  V rtol, atol;
  bool equal_nan;
  auto operator()(V p, V q) const {
    const V inf(std::numeric_limits<elem_t<V>>::infinity());
    const auto finite = (abs(p) < inf) && (abs(q) < inf);
    auto close = (p == q) || (finite && (abs(p - q) <= atol + rtol * abs(q)));
    if (equal_nan) close = close || (isnan(p) && isnan(q));
    return close;
  }
};
struct Where {
  template <class C, class V>
  V operator()(C c, V a, V b) const {
    if constexpr (std::is_arithmetic_v<V> && std::is_arithmetic_v<C>) {
      // Bitwise, without a branch: a mask of random signs (relu's backward) would mispredict half
      // the time (8.9 -> 0.5 ms at 4096 x 1024 floats), and the loop vectorizes.
      using U = std::conditional_t<
          sizeof(V) == 1, uint8_t,
          std::conditional_t<sizeof(V) == 2, uint16_t,
                             std::conditional_t<sizeof(V) == 4, uint32_t, uint64_t>>>;
      const U m = static_cast<U>(U(0) - static_cast<U>(static_cast<bool>(c)));
      const U r = static_cast<U>((std::bit_cast<U>(a) & m) | (std::bit_cast<U>(b) & ~m));
      return std::bit_cast<V>(r);
    } else {
      return select(c, a, b);
    }
  }
};

}  // namespace tessera::pw
