/** \file
 * Each built-in pointwise op, defined once as a functor over a value type `V` (DESIGN.md D6).
 * Instantiated with C++ scalars (the arithmetic type of a dtype) they are the bodies of the CPU
 * loops; the kernel language will instantiate the same definitions with `tl::Tile` to make tile
 * IR for fusion. Math goes through unqualified calls (`exp(x)`) and `pw::select`, so overloads
 * for tiles are found by argument-dependent lookup.
 *
 * Semantics follow PyTorch: integer arithmetic wraps (computed unsigned, never undefined),
 * floor division and remainder take the divisor's sign, maximum/minimum propagate NaN, shifts by
 * the bit width or more give 0 (or the sign fill for right shifts).
 */
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "tessera/error.h"

namespace tessera::pw {

using std::abs;
using std::ceil;
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

/** `c ? a : b` for scalars (the tile overload is `tl::where`). */
template <class C, class V>
inline V select(C c, V a, V b) {
  return c ? a : b;
}

template <class V>
inline constexpr bool is_int_v = std::is_integral_v<V> && !std::is_same_v<V, bool>;

template <class V>
inline V wrap_add(V a, V b) {
  if constexpr (is_int_v<V>) {
    using U = std::make_unsigned_t<V>;
    return static_cast<V>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}
template <class V>
inline V wrap_sub(V a, V b) {
  if constexpr (is_int_v<V>) {
    using U = std::make_unsigned_t<V>;
    return static_cast<V>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
  } else {
    return a - b;
  }
}
template <class V>
inline V wrap_mul(V a, V b) {
  if constexpr (is_int_v<V>) {
    using U = std::conditional_t<(sizeof(V) < sizeof(unsigned)), unsigned, std::make_unsigned_t<V>>;
    return static_cast<V>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else if constexpr (std::is_same_v<V, bool>) {
    return a && b;
  } else {
    return a * b;
  }
}
template <class V>
inline V wrap_neg(V a) {
  return wrap_sub(V(0), a);
}

[[noreturn]] void throw_zero_division(const char* op);

struct Add {
  template <class V>
  V operator()(V a, V b) const {
    if constexpr (std::is_same_v<V, bool>)
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
    if constexpr (std::is_same_v<V, bool>)
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
struct TruncDiv {
  template <class V>
  V operator()(V a, V b) const {
    if constexpr (is_int_v<V>) {
      if (b == 0) throw_zero_division("div");
      if constexpr (std::is_signed_v<V>) {
        if (b == -1) return wrap_neg(a);
      }
      return a / b;
    } else {
      return std::trunc(a / b);
    }
  }
};
struct FloorDiv {
  template <class V>
  V operator()(V a, V b) const {
    if constexpr (is_int_v<V>) {
      if (b == 0) throw_zero_division("div");
      if constexpr (std::is_signed_v<V>) {
        if (b == -1) return wrap_neg(a);
        const V q = a / b;
        return ((a % b != 0) && ((a < 0) != (b < 0))) ? V(q - 1) : q;
      } else {
        return a / b;
      }
    } else {
      if (b == 0) return a / b;
      const V m = fmod(a, b);
      V d = (a - m) / b;
      if (m != 0 && ((b < 0) != (m < 0))) d -= 1;
      if (d == 0) return std::copysign(V(0), a / b);
      V f = floor(d);
      if (d - f > V(0.5)) f += 1;
      return f;
    }
  }
};
struct Remainder {
  template <class V>
  V operator()(V a, V b) const {
    if constexpr (is_int_v<V>) {
      if (b == 0) throw_zero_division("remainder");
      if constexpr (std::is_signed_v<V>) {
        if (b == -1) return V(0);
        V r = a % b;
        return (r != 0 && ((r < 0) != (b < 0))) ? V(r + b) : r;
      } else {
        return a % b;
      }
    } else {
      V m = fmod(a, b);
      if (m != 0 && ((b < 0) != (m < 0))) m += b;
      return m;
    }
  }
};
struct Pow {
  template <class V>
  V operator()(V a, V b) const {
    if constexpr (is_int_v<V>) {
      if constexpr (std::is_signed_v<V>) {
        if (b < 0) {
          if (a == 1) return 1;
          if (a == -1) return (b % 2 == 0) ? V(1) : V(-1);
          return 0;
        }
      }
      V result = 1, base = a;
      for (auto e = b; e != 0; e /= 2) {
        if (e % 2) result = wrap_mul(result, base);
        base = wrap_mul(base, base);
      }
      return result;
    } else {
      return pow(a, b);
    }
  }
};
struct Maximum {
  template <class V>
  V operator()(V a, V b) const {
    if constexpr (std::is_floating_point_v<V>) {
      if (isnan(a)) return a;
      if (isnan(b)) return b;
    }
    return a > b ? a : b;
  }
};
struct Minimum {
  template <class V>
  V operator()(V a, V b) const {
    if constexpr (std::is_floating_point_v<V>) {
      if (isnan(a)) return a;
      if (isnan(b)) return b;
    }
    return a < b ? a : b;
  }
};

#define TS_COMPARE_FUNCTOR(Name, op)  \
  struct Name {                       \
    template <class V>                \
    bool operator()(V a, V b) const { \
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
  bool operator()(V a, V b) const {
    return (a != V(0)) && (b != V(0));
  }
};
struct LogicalOr {
  template <class V>
  bool operator()(V a, V b) const {
    return (a != V(0)) || (b != V(0));
  }
};
struct LogicalXor {
  template <class V>
  bool operator()(V a, V b) const {
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
struct ShiftLeft {
  template <class V>
  V operator()(V a, V b) const {
    using U = std::make_unsigned_t<V>;
    constexpr int kBits = static_cast<int>(sizeof(V) * 8);
    if (static_cast<std::make_signed_t<V>>(b) < 0 || static_cast<U>(b) >= static_cast<U>(kBits))
      return 0;
    return static_cast<V>(static_cast<U>(a) << static_cast<U>(b));
  }
};
struct ShiftRight {
  template <class V>
  V operator()(V a, V b) const {
    using U = std::make_unsigned_t<V>;
    constexpr int kBits = static_cast<int>(sizeof(V) * 8);
    if (static_cast<std::make_signed_t<V>>(b) < 0 || static_cast<U>(b) >= static_cast<U>(kBits)) {
      if constexpr (std::is_signed_v<V>)
        return a < 0 ? V(-1) : V(0);
      else
        return 0;
    }
    return static_cast<V>(a >> static_cast<U>(b));
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
    if constexpr (std::is_unsigned_v<V>)
      return a;
    else if constexpr (is_int_v<V>)
      return a < 0 ? wrap_neg(a) : a;
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
TS_MATH_FUNCTOR(GeluTanh,
                V(0.5) * x *
                    (V(1) + tanh(V(0.79788456080286535588) * (x + V(0.044715) * x * x * x))))
#undef TS_MATH_FUNCTOR

struct Relu {
  template <class V>
  V operator()(V x) const {
    if constexpr (std::is_floating_point_v<V>) {
      if (isnan(x)) return x;
    }
    return x > V(0) ? x : V(0);
  }
};
struct LogicalNot {
  template <class V>
  bool operator()(V a) const {
    return a == V(0);
  }
};
struct BitNot {
  template <class V>
  V operator()(V a) const {
    if constexpr (std::is_same_v<V, bool>)
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
    if constexpr (std::is_floating_point_v<V>) {
      if (isnan(x)) return x;
    }
    if (has_lo) x = Maximum()(x, lo);
    if (has_hi) x = Minimum()(x, hi);
    return x;
  }
};
struct Where {
  template <class V>
  V operator()(bool c, V a, V b) const {
    return select(c, a, b);
  }
};

}  // namespace tessera::pw
