// Built-in operators as tile kernels (DESIGN.md D6): the pointwise functors of
// ops/pointwise_functors.h, instantiated with `TV<T>` (a tile whose element type is known at
// compile time), trace into one kernel over a strided index space; reductions (with indices),
// var, softmax, cumsum and layer/RMS norm are row kernels (a program per output or row). They run
// the ops where the precompiled CPU loops cannot (GPU tensors) and are the lowering fusion builds
// on. Registered with the ops layer at load time (`ops_detail::set_device_*_runner`).
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "core/dtype_visit.h"
#include "ir/builder.h"
#include "ops/pointwise.h"
#include "ops/pointwise_functors.h"
#include "runtime/cuda/context.h"
#include "runtime/thread_pool.h"
#include "tessera/dtype_traits.h"
#include "tessera/tl.h"
#include "tl/op_tiles.h"
#include "tl/trace.h"

namespace tessera::op_tiles {
namespace {

using ops_detail::PwOp;

/** A tile value of element type `T` (the compute type of a functor instantiation). */
template <class T>
struct TV {
  tl::Tile t;

  explicit TV(tl::Tile x) : t(std::move(x)) {}
  /** A constant of type T (exact: a double constant stays a double). */
  template <class A>
  requires std::is_arithmetic_v<A> TV(A v) : t(constant(static_cast<T>(v))) {}  // NOLINT
  /** Every element converted (`pw::cast`). */
  template <class U>
  explicit TV(const TV<U>& o) : t(o.t.to(dtype_of<T>())) {}

  static tl::Tile constant(T v) {
    auto& c = tl::TraceContext::current({});
    const ir::Type type = ir::Type::scalar(dtype_of<T>());
    if constexpr (std::is_floating_point_v<T>)
      return c.tile(c.builder().constant_float(static_cast<double>(v), type));
    else
      return c.tile(c.builder().constant_int(static_cast<int64_t>(v), type));
  }
};

// Arithmetic keeps the element type; comparisons give bool tiles.
#define TS_TV_BINARY(op)                              \
  template <class T>                                  \
  TV<T> operator op(const TV<T>& a, const TV<T>& b) { \
    return TV<T>(a.t op b.t);                         \
  }
TS_TV_BINARY(+)
TS_TV_BINARY(-)
TS_TV_BINARY(*)
TS_TV_BINARY(/)
TS_TV_BINARY(%)
TS_TV_BINARY(&)
TS_TV_BINARY(|)
TS_TV_BINARY(^)
TS_TV_BINARY(<<)
TS_TV_BINARY(>>)
#undef TS_TV_BINARY
#define TS_TV_COMPARE(op)                                \
  template <class T>                                     \
  TV<bool> operator op(const TV<T>& a, const TV<T>& b) { \
    return TV<bool>(a.t op b.t);                         \
  }
TS_TV_COMPARE(==)
TS_TV_COMPARE(!=)
TS_TV_COMPARE(<)
TS_TV_COMPARE(<=)
TS_TV_COMPARE(>)
TS_TV_COMPARE(>=)
#undef TS_TV_COMPARE
template <class T>
TV<T> operator-(const TV<T>& a) {
  return TV<T>(-a.t);
}
template <class T>
TV<T> operator~(const TV<T>& a) {
  return TV<T>(~a.t);
}
// Logic on bool tiles (both sides are computed: tiles have no short circuit).
inline TV<bool> operator&&(const TV<bool>& a, const TV<bool>& b) {
  return TV<bool>(a.t & b.t);
}
inline TV<bool> operator||(const TV<bool>& a, const TV<bool>& b) {
  return TV<bool>(a.t | b.t);
}
inline TV<bool> operator!(const TV<bool>& a) {
  return TV<bool>(a.t ^ TV<bool>(true).t);
}

template <class T>
TV<T> select(const TV<bool>& c, const TV<T>& a, const TV<T>& b) {
  return TV<T>(tl::where(c.t, a.t, b.t));
}
template <class T>
TV<bool> isnan(const TV<T>& a) {
  return TV<bool>(tl::isnan(a.t));
}
#define TS_TV_MATH1(fn)        \
  template <class T>           \
  TV<T> fn(const TV<T>& a) {   \
    return TV<T>(tl::fn(a.t)); \
  }
TS_TV_MATH1(abs)
TS_TV_MATH1(exp)
TS_TV_MATH1(exp2)
TS_TV_MATH1(log)
TS_TV_MATH1(log2)
TS_TV_MATH1(sqrt)
TS_TV_MATH1(sin)
TS_TV_MATH1(cos)
TS_TV_MATH1(tanh)
TS_TV_MATH1(erf)
TS_TV_MATH1(floor)
TS_TV_MATH1(ceil)
TS_TV_MATH1(trunc)
#undef TS_TV_MATH1
#define TS_TV_MATH2(fn)                      \
  template <class T>                         \
  TV<T> fn(const TV<T>& a, const TV<T>& b) { \
    return TV<T>(tl::fn(a.t, b.t));          \
  }
TS_TV_MATH2(fmod)
TS_TV_MATH2(pow)
TS_TV_MATH2(copysign)
#undef TS_TV_MATH2

}  // namespace
}  // namespace tessera::op_tiles

namespace tessera::pw {
template <class T>
struct element_of<op_tiles::TV<T>> {
  using type = T;
  template <class U>
  using rebind = op_tiles::TV<U>;
};
}  // namespace tessera::pw

namespace tessera::op_tiles {
namespace {

constexpr int kMaxRank = 6;
constexpr int kOperands = 4;  // the output and up to three inputs
constexpr int64_t kBlock = 1024;

/** A scalar parameter (alpha, clamp bounds) as the bits of its compute-type value, so a double
 * crosses the launch exactly (float kernel parameters are fp32, as Triton's); the kernel gets
 * them as two int32 halves (integer parameters are sizes, below 2^62). */
template <class V>
int64_t to_bits(V v) {
  if constexpr (std::is_same_v<V, float>)
    return std::bit_cast<int32_t>(v);
  else if constexpr (std::is_same_v<V, double>)
    return std::bit_cast<int64_t>(v);
  else
    return static_cast<int64_t>(v);
}
template <class E>
TV<E> from_bits(const tl::Tile* half) {
  const tl::Tile p = (half[1].to(DType::Int64) << 32) | (half[0].to(DType::Int64) & 0xffffffffLL);
  if constexpr (std::is_same_v<E, float>)
    return TV<E>(tl::bitcast(p.to(DType::Int32), DType::Float32));
  else if constexpr (std::is_same_v<E, double>)
    return TV<E>(tl::bitcast(p, DType::Float64));
  else if constexpr (std::is_same_v<E, bool>)
    return TV<E>(p != 0);
  else
    return TV<E>(p.to(dtype_of<E>()));
}
int32_t lo32(int64_t v) {
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v)));
}
int32_t hi32(int64_t v) {
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v) >> 32));
}
/** Appends a 64-bit pattern as the two int32 halves a kernel takes (`from_bits`). */
void append_bits(std::vector<tl::KernelArg>& args, int64_t bits) {
  args.emplace_back(lo32(bits));
  args.emplace_back(hi32(bits));
}
template <class V>
V scalar_param(const Scalar& s) {
  if constexpr (std::is_same_v<V, bool>)
    return s.to_bool();
  else if constexpr (std::is_integral_v<V>)
    return static_cast<V>(s.to_int());
  else
    return static_cast<V>(s.to_double());
}

struct Traced {
  PwOp op;
  DType compute;
  const tl::Tile* x;    // loaded inputs, in their own dtypes (where: the condition first)
  const tl::Tile* p;    // scalar parameters: two (low, high) int32 halves of each one's bits
  bool has_lo, has_hi;  // clamp's bounds present; has_lo is isclose's equal_nan
};

// The inputs converted as the CPU loops convert them: to the compute dtype, then its opmath type.
template <class T>
TV<opmath_t<T>> input(const Traced& c, int i) {
  return TV<opmath_t<T>>(c.x[i].to(dtype_of<T>()).to(dtype_of<opmath_t<T>>()));
}

template <DTypeSet Set, class Body>
tl::Tile with_compute(const Traced& c, Body body) {
  tl::Tile r;
  visit_dtype<Set>(c.compute, "pointwise", [&]<class T>() { r = body.template operator()<T>(); });
  return r;
}
template <class F, DTypeSet Set>
tl::Tile unary(const Traced& c) {
  return with_compute<Set>(c, [&]<class T>() { return F()(input<T>(c, 0)).t; });
}
template <class F, DTypeSet Set>
tl::Tile binary(const Traced& c) {
  return with_compute<Set>(c, [&]<class T>() { return F()(input<T>(c, 0), input<T>(c, 1)).t; });
}

tl::Tile add(const Traced& c, bool negate) {
  return with_compute<kNumericAndBool>(c, [&]<class T>() {
    using V = TV<opmath_t<T>>;
    V alpha = from_bits<opmath_t<T>>(c.p);
    if constexpr (!std::is_same_v<T, bool>) {
      if (negate) alpha = pw::wrap_neg(alpha);  // sub (never of bools)
    }
    return pw::AddScaled<V>{alpha}(input<T>(c, 0), input<T>(c, 1)).t;
  });
}

tl::Tile clamp(const Traced& c) {
  return with_compute<kNumeric>(c, [&]<class T>() {
    using V = TV<opmath_t<T>>;
    using E = opmath_t<T>;
    const V lo = c.has_lo ? from_bits<E>(c.p) : V(0), hi = c.has_hi ? from_bits<E>(c.p + 2) : V(0);
    return pw::Clamp<V>{c.has_lo, c.has_hi, lo, hi}(input<T>(c, 0)).t;
  });
}

tl::Tile apply(const Traced& c) {
  switch (c.op) {
    case PwOp::Add:
      return add(c, false);
    case PwOp::Sub:
      return add(c, true);
    case PwOp::Mul:
      return binary<pw::Mul, kNumericAndBool>(c);
    case PwOp::Div:
      return binary<pw::Div, kFloats>(c);
    case PwOp::TruncDiv:
      return binary<pw::TruncDiv, kNumeric>(c);
    case PwOp::FloorDiv:
      return binary<pw::FloorDiv, kNumeric>(c);
    case PwOp::Remainder:
      return binary<pw::Remainder, kNumeric>(c);
    case PwOp::Pow:
      return binary<pw::Pow, kNumeric>(c);
    case PwOp::Maximum:
      return binary<pw::Maximum, kNumericAndBool>(c);
    case PwOp::Minimum:
      return binary<pw::Minimum, kNumericAndBool>(c);
    case PwOp::Eq:
      return binary<pw::Eq, kNumericAndBool>(c);
    case PwOp::Ne:
      return binary<pw::Ne, kNumericAndBool>(c);
    case PwOp::Lt:
      return binary<pw::Lt, kNumericAndBool>(c);
    case PwOp::Le:
      return binary<pw::Le, kNumericAndBool>(c);
    case PwOp::Gt:
      return binary<pw::Gt, kNumericAndBool>(c);
    case PwOp::Ge:
      return binary<pw::Ge, kNumericAndBool>(c);
    case PwOp::LogicalAnd:
      return binary<pw::LogicalAnd, kNumericAndBool>(c);
    case PwOp::LogicalOr:
      return binary<pw::LogicalOr, kNumericAndBool>(c);
    case PwOp::LogicalXor:
      return binary<pw::LogicalXor, kNumericAndBool>(c);
    case PwOp::BitAnd:
      return binary<pw::BitAnd, kIntsAndBool>(c);
    case PwOp::BitOr:
      return binary<pw::BitOr, kIntsAndBool>(c);
    case PwOp::BitXor:
      return binary<pw::BitXor, kIntsAndBool>(c);
    case PwOp::Shl:
      return binary<pw::ShiftLeft, kInts>(c);
    case PwOp::Shr:
      return binary<pw::ShiftRight, kInts>(c);
    case PwOp::Neg:
      return unary<pw::Neg, kNumeric>(c);
    case PwOp::Abs:
      return unary<pw::Abs, kNumeric>(c);
    case PwOp::Exp:
      return unary<pw::Exp, kFloats>(c);
    case PwOp::Exp2:
      return unary<pw::Exp2, kFloats>(c);
    case PwOp::Log:
      return unary<pw::Log, kFloats>(c);
    case PwOp::Log2:
      return unary<pw::Log2, kFloats>(c);
    case PwOp::Sqrt:
      return unary<pw::Sqrt, kFloats>(c);
    case PwOp::Rsqrt:
      return unary<pw::Rsqrt, kFloats>(c);
    case PwOp::Sin:
      return unary<pw::Sin, kFloats>(c);
    case PwOp::Cos:
      return unary<pw::Cos, kFloats>(c);
    case PwOp::Tanh:
      return unary<pw::Tanh, kFloats>(c);
    case PwOp::Sigmoid:
      return unary<pw::Sigmoid, kFloats>(c);
    case PwOp::Erf:
      return unary<pw::Erf, kFloats>(c);
    case PwOp::Relu:
      return unary<pw::Relu, kNumeric>(c);
    case PwOp::Gelu:
      return unary<pw::Gelu, kFloats>(c);
    case PwOp::GeluTanh:
      return unary<pw::GeluTanh, kFloats>(c);
    case PwOp::GeluBackward:
      return binary<pw::GeluBackward, kFloats>(c);
    case PwOp::GeluTanhBackward:
      return binary<pw::GeluTanhBackward, kFloats>(c);
    case PwOp::Silu:
      return unary<pw::Silu, kFloats>(c);
    case PwOp::LogicalNot:
      return unary<pw::LogicalNot, kNumericAndBool>(c);
    case PwOp::BitNot:
      return unary<pw::BitNot, kIntsAndBool>(c);
    case PwOp::Clamp:
      return clamp(c);
    case PwOp::Where:
      // float8 has no arithmetic: a select of the values' bits.
      if ((kFloat8 & dtype_bit(c.compute)) != 0) {
        const auto bits = [&](int i) { return tl::bitcast(c.x[i].to(c.compute), DType::UInt8); };
        return tl::bitcast(tl::where(c.x[0].to(DType::Bool), bits(1), bits(2)), c.compute);
      }
      return with_compute<kNumericAndBool>(c, [&]<class T>() {
        return pw::Where()(TV<bool>(c.x[0].to(DType::Bool)), input<T>(c, 1), input<T>(c, 2)).t;
      });
    case PwOp::IsClose: {
      // In float64, as the CPU: the tolerances in p[0..3], equal_nan in the HAS_LO flag.
      using V = TV<double>;
      const pw::IsClose<V> f{from_bits<double>(c.p), from_bits<double>(c.p + 2), c.has_lo};
      return f(input<double>(c, 0), input<double>(c, 1)).t;
    }
    case PwOp::Copy:  // a conversion of any dtype (float8 included) to the output's
      return c.x[0].to(c.compute);
    case PwOp::None:
      break;
  }
  TS_INTERNAL_ASSERT(false) << "pointwise op without a tile lowering";
  return {};
}

int arity(PwOp op) {
  if (op == PwOp::Where) return 3;
  if (op == PwOp::IsClose || op == PwOp::GeluBackward || op == PwOp::GeluTanhBackward) return 2;
  return op >= PwOp::Neg ? 1 : 2;
}

// The element offset of linear index `idx` in an index space of `rank` dimensions (sizes[0] is
// never needed: the outermost index is what remains).
tl::Tile offset_of(tl::Tile idx, int rank, const tl::Tile* sizes, const tl::Tile* strides) {
  if (rank == 1) return idx * strides[0];
  tl::Tile at;
  for (int k = rank - 1; k >= 1; --k) {
    const tl::Tile i = idx % sizes[k];
    idx = idx / sizes[k];
    at = k == rank - 1 ? i * strides[k] : at + i * strides[k];
  }
  return at + idx * strides[0];
}

// The scalar parameters of an op (add/sub's alpha, clamp's bounds, isclose's tolerances) as the
// bits of their compute-type values, and clamp's (isclose's) flags.
void scalar_bits(PwOp op, DType compute, const void* extra, const char* name, int64_t bits[2],
                 bool& has_lo, bool& has_hi) {
  if (op != PwOp::Add && op != PwOp::Sub && op != PwOp::Clamp && op != PwOp::IsClose) return;
  visit_dtype<kNumericAndBool>(compute, name, [&]<class T>() {
    using V = opmath_t<T>;
    if (op == PwOp::Add || op == PwOp::Sub) {
      bits[0] = to_bits(scalar_param<V>(*static_cast<const Scalar*>(extra)));
    } else if (op == PwOp::Clamp) {
      const auto& c = *static_cast<const ops_detail::ClampArgs*>(extra);
      has_lo = c.lo.has_value();
      has_hi = c.hi.has_value();
      if (has_lo) bits[0] = to_bits(scalar_param<V>(*c.lo));
      if (has_hi) bits[1] = to_bits(scalar_param<V>(*c.hi));
    } else {
      const auto& c = *static_cast<const ops_detail::IsCloseArgs*>(extra);
      bits[0] = to_bits(c.rtol);
      bits[1] = to_bits(c.atol);
      has_lo = c.equal_nan;
    }
  });
}

// A CPU scalar operand of a GPU op (`x * 2.0`'s 0-dim tensor) travels as a kernel parameter, not as
// a copy to the device (a host-to-device copy per op, and one a CUDA graph cannot replay): its
// value in a type that holds it exactly (double; float for the narrower floats; int64 for integers
// and bools, unsigned ones by their bits), converted to its dtype in the kernel.
DType scalar_carrier(DType d) {
  if (d == DType::Float64) return DType::Float64;
  return is_floating_point(d) ? DType::Float32 : DType::Int64;
}
int64_t scalar_operand_bits(const Tensor& t) {
  int64_t bits = 0;
  visit_dtype<kAllDTypes>(t.dtype(), "pointwise", [&]<class T>() {
    const T v = *static_cast<const T*>(t.data_ptr());
    switch (scalar_carrier(t.dtype())) {
      case DType::Float64:
        bits = to_bits(static_cast<double>(v));
        break;
      case DType::Float32:
        bits = to_bits(static_cast<float>(v));
        break;
      default:
        if constexpr (std::is_integral_v<T>) bits = static_cast<int64_t>(v);
        break;
    }
  });
  return bits;
}
tl::Tile scalar_operand(const tl::Tile* half, DType dtype) {
  switch (scalar_carrier(dtype)) {
    case DType::Float64:
      return from_bits<double>(half).t.to(dtype);
    case DType::Float32:
      return from_bits<float>(half).t.to(dtype);
    default:
      return from_bits<int64_t>(half).t.to(dtype);
  }
}

// The widest power-of-two block in [lo, hi] that covers n elements with as few idle lanes as the
// narrowest (768 takes 256, 3072 takes 1024).
int64_t least_padding_block(int64_t n, int64_t hi, int64_t lo) {
  const auto padded = [&](int64_t b) { return (n + b - 1) / b * b; };
  for (int64_t b = hi; b > lo; b /= 2) {
    if (padded(b) == padded(lo)) return b;
  }
  return lo;
}

// One kernel for every op, dtype and layout: the op, the compute dtype and the rank are
// constexprs, so each combination is its own specialization (and its own cache entry). Element
// i of the collapsed index space is at sum_k idx_k * stride_k in each operand.
TL_JIT(aten_pointwise, tl::Ptr out, tl::Ptr x0, tl::Ptr x1, tl::Ptr x2, tl::Int n, tl::Int d1,
       tl::Int d2, tl::Int d3, tl::Int d4, tl::Int d5, tl::Int o0, tl::Int o1, tl::Int o2,
       tl::Int o3, tl::Int o4, tl::Int o5, tl::Int a0, tl::Int a1, tl::Int a2, tl::Int a3,
       tl::Int a4, tl::Int a5, tl::Int b0, tl::Int b1, tl::Int b2, tl::Int b3, tl::Int b4,
       tl::Int b5, tl::Int c0, tl::Int c1, tl::Int c2, tl::Int c3, tl::Int c4, tl::Int c5,
       tl::Int p0, tl::Int p1, tl::Int p2, tl::Int p3, tl::Int s0, tl::Int s1, tl::Int s2,
       tl::Int s3, tl::Int s4, tl::Int s5, tl::Const OP, tl::Const COMPUTE, tl::Const RANK,
       tl::Const CONTIG, tl::Const WIDE, tl::Const HAS_LO, tl::Const HAS_HI, tl::Const INNER,
       tl::Const SCALARS, tl::Const BLOCK) {
  const auto op = static_cast<PwOp>(OP.int_value());
  const int rank = static_cast<int>(RANK.int_value());
  const tl::Tile sizes[kMaxRank] = {n, d1, d2, d3, d4, d5};
  const tl::Tile strides[kOperands][kMaxRank] = {{o0, o1, o2, o3, o4, o5},
                                                 {a0, a1, a2, a3, a4, a5},
                                                 {b0, b1, b2, b3, b4, b5},
                                                 {c0, c1, c2, c3, c4, c5}};
  const int operands = 1 + arity(op);
  tl::Tile at[kOperands], mask;
  const int64_t inner = INNER.int_value();
  if (inner >= 0) {
    // By rows (INNER: each operand's innermost stride as a base-3 digit, 0: broadcast, 1: unit,
    // 2: the runtime stride): program (o, b) covers block b of the innermost dimension at outer
    // index o, so the outer offsets are scalars computed once and the row is a contiguous block
    // (no division per element; unit strides load as vectors).
    const tl::Tile o = WIDE ? tl::program_id(0).to(DType::Int64) : tl::program_id(0);
    tl::Tile j = tl::program_id(1) * BLOCK + tl::arange(0, BLOCK);
    if (WIDE) j = j.to(DType::Int64);
    mask = j < sizes[rank - 1];
    int64_t kinds = inner;
    for (int t = 0; t < operands; ++t, kinds /= 3) {
      const tl::Tile base = offset_of(o, rank - 1, sizes, strides[t]);
      const int64_t kind = kinds % 3;
      at[t] = kind == 0 ? tl::broadcast_to(base, {BLOCK})
                        : base + (kind == 1 ? j : j * strides[t][rank - 1]);
    }
  } else {
    tl::Tile offs = tl::program_id(0);
    if (WIDE) offs = offs.to(DType::Int64);
    offs = offs * BLOCK + tl::arange(0, BLOCK);
    mask = offs < n;
    // CONTIG: every operand is dense in the same order (one dimension of stride 1 after
    // collapsing).
    for (int t = 0; t < operands; ++t)
      at[t] = CONTIG ? offs : offset_of(offs, rank, sizes, strides[t]);
  }
  const tl::Tile ptrs[3] = {x0, x1, x2};
  const tl::Tile scalar_bits[6] = {s0, s1, s2, s3, s4, s5};
  tl::Tile x[3];
  for (int t = 1; t < operands; ++t) {
    const int64_t scalar = SCALARS.int_value() >> (8 * (t - 1)) & 0xff;
    x[t - 1] = scalar ? tl::broadcast_to(scalar_operand(&scalar_bits[2 * (t - 1)],
                                                        static_cast<DType>(scalar - 1)),
                                         {BLOCK})
                      : tl::load(ptrs[t - 1] + at[t], mask);
  }
  const tl::Tile p[4] = {p0, p1, p2, p3};
  const Traced c{op, COMPUTE.dtype_value(),     x,
                 p,  static_cast<bool>(HAS_LO), static_cast<bool>(HAS_HI)};
  tl::store(out + at[0], apply(c).to(out.dtype()), mask);
}

// The index space with size-1 dimensions dropped and dimensions merged where every operand is
// contiguous across them; sizes[0] is the total. False when more than kMaxRank remain.
struct Space {
  int rank = 0;
  int64_t numel = 1;
  int64_t sizes[kMaxRank] = {};
  int64_t strides[kOperands][kMaxRank] = {};
};
// Over dimensions [lo, hi) of the operands, all of ts[0]'s shape.
bool collapse(const Tensor* const ts[kOperands], int64_t lo, int64_t hi, Space& s) {
  std::vector<int64_t> size;
  std::vector<std::array<int64_t, kOperands>> stride;
  for (int64_t d = lo; d < hi; ++d) {
    const int64_t n = ts[0]->size(d).expect_int();
    s.numel *= n;
    if (n == 1) continue;
    std::array<int64_t, kOperands> st{};
    for (int t = 0; t < kOperands; ++t)
      st[t] = ts[t]->dim() == 0 ? 0 : ts[t]->stride(d).expect_int();
    if (!size.empty()) {
      bool merge = true;
      for (int t = 0; t < kOperands; ++t) merge = merge && stride.back()[t] == st[t] * n;
      if (merge) {
        size.back() *= n;
        stride.back() = st;
        continue;
      }
    }
    size.push_back(n);
    stride.push_back(st);
  }
  if (size.empty()) {
    size.push_back(1);
    stride.push_back({});
  }
  if (size.size() > static_cast<size_t>(kMaxRank)) return false;
  s.rank = static_cast<int>(size.size());
  for (int k = 0; k < s.rank; ++k) {
    s.sizes[k] = size[k];
    for (int t = 0; t < kOperands; ++t) s.strides[t][k] = stride[k][t];
  }
  s.sizes[0] = s.numel;  // the kernel's n (dimension 0's size is never needed)
  return true;
}

// The largest element offset of operand `t` in the space (in elements, from its data pointer).
int64_t reach(const Space& s, int t) {
  int64_t dims[kMaxRank];
  int64_t inner = 1;
  for (int k = s.rank - 1; k >= 1; --k) {
    dims[k] = s.sizes[k];
    inner *= s.sizes[k];
  }
  dims[0] = inner ? s.numel / inner : 0;
  int64_t r = 0;
  for (int k = 0; k < s.rank; ++k)
    r += std::max<int64_t>(dims[k] - 1, 0) * std::abs(s.strides[t][k]);
  return r;
}

constexpr int64_t kMaxNarrow = std::numeric_limits<int32_t>::max();

// Whether any offset of the space (or the linear index) passes int32.
bool needs_wide(const Space& s) {
  if (s.numel > kMaxNarrow) return true;
  for (int t = 0; t < kOperands; ++t) {
    if (reach(s, t) > kMaxNarrow) return true;
  }
  return false;
}

void run(const ops_detail::PointwiseDesc& d, const Tensor& out, ArrayRef<Tensor> inputs,
         DType compute, const void* extra) {
  // A CPU scalar operand (of a GPU op, or of a CPU op through tiles): a kernel parameter
  // (scalar_operand), its slot's pointer unused. (CPU work before this call is done: the value is
  // the one a load would read.)
  SmallVector<Tensor, 3> in;
  int64_t scalars = 0, operand_bits[3] = {0, 0, 0};
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& t = inputs[k];
    if (!(t.dim() == 0 && t.device().is_cpu())) {
      TS_INTERNAL_ASSERT(t.device() == out.device())
          << d.name << ": an operand on " << t.device() << " of an op on " << out.device();
      in.push_back(t);
      continue;
    }
    scalars |= (static_cast<int64_t>(t.dtype()) + 1) << (8 * k);
    operand_bits[k] = scalar_operand_bits(t);
    in.push_back(out);
  }
  Space s;
  const Tensor* ts[kOperands] = {&out, in.size() > 0 ? &in[0] : &out, in.size() > 1 ? &in[1] : &out,
                                 in.size() > 2 ? &in[2] : &out};
  TS_CHECK(collapse(ts, 0, out.dim(), s), NotImplementedError)
      << "[" << d.name << "] on " << out.device() << ": more than " << kMaxRank
      << " dimensions that cannot be merged";
  if (s.numel == 0) return;
  int64_t bits[2] = {0, 0};
  bool has_lo = false, has_hi = false;
  scalar_bits(d.op, compute, extra, d.name, bits, has_lo, has_hi);
  // Integer pow unrolls square-and-multiply over every exponent bit: its intermediate tiles are
  // stored (on CUDA, in shared memory at this stage), so it takes smaller blocks.
  const int64_t block = d.op == PwOp::Pow && !is_floating_point(compute) ? 128 : kBlock;
  bool contig = s.rank == 1;
  for (size_t t = 0; t <= in.size(); ++t) contig = contig && s.strides[t][0] == 1;
  // Rows (a broadcast bias, a transposed operand): a program per block of the innermost
  // dimension of an outer index, when that dimension is long enough to fill blocks (each stride
  // pattern is a specialization of its own: short rows keep the flat kernel).
  const int64_t inner_n = s.sizes[s.rank - 1], outer_n = s.numel / std::max<int64_t>(inner_n, 1);
  int64_t inner = -1, row_block = block;
  if (!contig && s.rank >= 2 && inner_n >= 512 && block == kBlock) {
    row_block = least_padding_block(inner_n, kBlock, 256);
    if ((inner_n + row_block - 1) / row_block <= 65535) {
      inner = 0;
      for (int64_t t = static_cast<int64_t>(in.size()); t >= 0; --t) {
        const int64_t st = s.strides[t][s.rank - 1];
        inner = inner * 3 + (st == 0 ? 0 : st == 1 ? 1 : 2);
      }
    }
  }
  std::vector<tl::KernelArg> args = {out};
  for (size_t k = 0; k < 3; ++k) args.emplace_back(k < in.size() ? in[k] : out);
  args.emplace_back(s.numel);
  for (int k = 1; k < kMaxRank; ++k) args.emplace_back(s.sizes[k]);
  for (const auto& st : s.strides) {
    for (const int64_t v : st) args.emplace_back(v);
  }
  append_bits(args, bits[0]);
  append_bits(args, bits[1]);
  for (const int64_t b : operand_bits) append_bits(args, b);
  for (const tl::MetaArg m :
       {tl::meta("OP", static_cast<int64_t>(d.op)), tl::meta("COMPUTE", compute),
        tl::meta("RANK", s.rank), tl::meta("CONTIG", contig), tl::meta("WIDE", needs_wide(s)),
        tl::meta("HAS_LO", has_lo), tl::meta("HAS_HI", has_hi), tl::meta("INNER", inner),
        tl::meta("SCALARS", scalars), tl::meta("BLOCK", inner >= 0 ? row_block : block)})
    args.emplace_back(m);
  // Straight to the kernel: the op itself already went through the dispatcher's modes.
  const tl::Grid grid = inner >= 0 ? tl::Grid{outer_n, (inner_n + row_block - 1) / row_block}
                                   : tl::Grid{(s.numel + block - 1) / block};
  aten_pointwise[grid].run_kernel(ArrayRef<tl::KernelArg>(args.data(), args.size()));
}

// ---- reductions ---------------------------------------------------------------------------------

using ops_detail::ReduceOp;
constexpr int kMaxReduceRank = 3;

// The identity of a reduction in the accumulator's dtype (Max/Min: the lowest/highest value, so a
// masked lane never wins).
tl::Tile identity(ReduceOp op, DType acc) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Mean:
    case ReduceOp::Var:
      return tl::zeros({}, acc);
    case ReduceOp::Prod:
      return tl::full({}, 1, acc);
    case ReduceOp::Max:
    case ReduceOp::Min: {
      const bool max = op == ReduceOp::Max;
      if (is_floating_point(acc)) return tl::full({}, max ? -INFINITY : INFINITY, acc);
      if (acc == DType::Bool) return tl::full({}, !max, acc);
      const int64_t bits = static_cast<int64_t>(itemsize(acc)) * 8;
      if (is_signed(acc)) {
        const tl::Tile one = tl::full({}, 1, acc);
        const tl::Tile top = one << tl::full({}, bits - 1, acc);  // the lowest value
        return max ? top : ~top;
      }
      return max ? tl::zeros({}, acc) : ~tl::zeros({}, acc);
    }
  }
  return {};
}

// One step: the accumulator tile and a new tile of values. Max/Min keep a NaN once seen.
tl::Tile combine(ReduceOp op, const tl::Tile& acc, const tl::Tile& v) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Mean:
    case ReduceOp::Var:
      return acc + v;
    case ReduceOp::Prod:
      return acc * v;
    case ReduceOp::Max:
    case ReduceOp::Min: {
      const tl::Tile better = op == ReduceOp::Max ? v > acc : v < acc;
      if (!is_floating_point(acc.dtype())) return tl::where(better, v, acc);
      return tl::where(acc != acc, acc, tl::where((v != v) | better, v, acc));
    }
  }
  return acc;
}

// What row kernels (reductions, softmax, norms) share: the program's row, int64 when `wide`; the
// offset of a row's first element from its kept index (up to three collapsed dimensions); and the
// element indices of the block starting at `start`.
tl::Tile row_id(bool wide) {
  const tl::Tile o = tl::program_id(0);
  return wide ? o.to(DType::Int64) : o;
}
tl::Tile row_offset(const tl::Tile& o, int kept, const tl::Tile& k1, const tl::Tile& k2,
                    const tl::Tile& ks0, const tl::Tile& ks1, const tl::Tile& ks2) {
  const tl::Tile sizes[kMaxReduceRank] = {k1, k1, k2}, strides[kMaxReduceRank] = {ks0, ks1, ks2};
  return offset_of(o, kept, sizes, strides);
}
tl::Tile block_indices(const tl::Tile& start, const tl::Tile& block, bool wide) {
  const tl::Tile j = tl::arange(0, block);
  return (wide ? j.to(DType::Int64) : j) + start;
}

// The elements [lo, hi) of a row one program reduces: all n, or with a split the chunk
// program_id(1) picks.
struct Span {
  tl::Tile lo, hi, split;  ///< split: the chunk's index (SPLIT only)
  bool chunked = false;

  Span(bool chunked_, bool wide, const tl::Tile& n, const tl::Tile& chunk)
      : hi(n), chunked(chunked_) {
    if (!chunked) return;
    split = wide ? tl::program_id(1).to(DType::Int64) : tl::program_id(1);
    lo = split * chunk;
    hi = tl::minimum(lo + chunk, n);
  }
  void range(const tl::Operand& step, FunctionRef<void(tl::Tile)> body) const {
    if (chunked)
      tl::range(lo, hi, step, body);
    else
      tl::range(0, hi, step, body);
  }
};

// A program per output element: its kept index picks the base, the reduced elements are read in
// blocks into an accumulator tile, which is folded at the end.
// With INDEX (max/min), `idx` gets the first index of the result along the reduced elements
// (a NaN wins), as torch.max(dim) and argmax.
//
// SPLIT (Sum, Mean, Prod, Max, Min): program (o, s) reduces elements [s * chunk, (s + 1) * chunk)
// of row o and stores its partial result at out + o * os_k + s * os_s, in the accumulator's
// dtype; a second launch reduces the partials. A Mean divides by `denom` (the whole row's count).
TL_JIT(aten_reduce, tl::Ptr x, tl::Ptr out, tl::Ptr idx, tl::Int k1, tl::Int k2, tl::Int ks0,
       tl::Int ks1, tl::Int ks2, tl::Int n, tl::Int r1, tl::Int r2, tl::Int rs0, tl::Int rs1,
       tl::Int rs2, tl::Int corr_lo, tl::Int corr_hi, tl::Int chunk, tl::Int denom, tl::Int os_k,
       tl::Int os_s, tl::Const OP, tl::Const ACC, tl::Const KEPT, tl::Const RED, tl::Const WIDE,
       tl::Const INDEX, tl::Const SPLIT, tl::Const BLOCK) {
  const auto op = static_cast<ReduceOp>(OP.int_value());
  const DType acc_t = ACC.dtype_value();
  const bool wide = static_cast<bool>(WIDE);
  const tl::Tile rsizes[kMaxReduceRank] = {n, r1, r2}, rstrides[kMaxReduceRank] = {rs0, rs1, rs2};
  const tl::Tile o = row_id(wide);
  const tl::Tile base =
      x + row_offset(o, static_cast<int>(KEPT.int_value()), k1, k2, ks0, ks1, ks2);
  const tl::Tile init = identity(op, acc_t);
  tl::Var acc(tl::broadcast_to(init, {BLOCK}));
  std::optional<tl::Var> at_idx;  // each lane's first best index (INDEX only)
  if (INDEX) at_idx.emplace(tl::zeros({BLOCK}, DType::Int64));
  const Span span(static_cast<bool>(SPLIT), wide, n, chunk);
  span.range(BLOCK, [&](tl::Tile start) {
    const tl::Tile j = block_indices(start, BLOCK, wide);
    const tl::Tile m = j < span.hi;
    const tl::Tile at = offset_of(j, static_cast<int>(RED.int_value()), rsizes, rstrides);
    const tl::Tile v = tl::where(m, tl::load(base + at, m).to(acc_t), init);
    if (INDEX) {
      // Strictly better (a NaN beats a number; the first NaN stays): later equal values lose.
      tl::Tile take = op == ReduceOp::Max ? v > acc : v < acc;
      if (is_floating_point(acc_t)) take = (acc == acc) & ((v != v) | take);
      *at_idx = tl::where(take, j.to(DType::Int64), tl::Tile(*at_idx));
      acc = tl::where(take, v, acc);
    } else {
      acc = combine(op, acc, v);
    }
  });
  const tl::Tile a = acc;
  tl::Tile r;
  switch (op) {
    case ReduceOp::Sum:
      r = tl::sum(a);
      break;
    case ReduceOp::Mean:
      r = tl::sum(a) / denom.to(acc_t);
      break;
    case ReduceOp::Var: {
      // A second pass: squared deviations from the mean (as the CPU, not sum-of-squares).
      const tl::Tile mean = tl::sum(a) / n.to(acc_t), zero = tl::zeros({}, acc_t);
      tl::Var ss(tl::zeros({BLOCK}, acc_t));
      tl::range(0, n, BLOCK, [&](tl::Tile start) {
        const tl::Tile j = block_indices(start, BLOCK, static_cast<bool>(WIDE));
        const tl::Tile m = j < n;
        const tl::Tile at = offset_of(j, static_cast<int>(RED.int_value()), rsizes, rstrides);
        const tl::Tile d = tl::where(m, tl::load(base + at, m).to(acc_t) - mean, zero);
        ss = ss + d * d;
      });
      const tl::Tile corr_bits[2] = {corr_lo, corr_hi};
      const tl::Tile corr = from_bits<double>(corr_bits).t.to(acc_t);
      const tl::Tile denom = tl::maximum(n.to(acc_t) - corr, zero);
      r = tl::sum(tl::Tile(ss)) / denom;
      break;
    }
    case ReduceOp::Prod:
      r = tl::reduce(a, 0, [](tl::Tile p, tl::Tile q) { return p * q; });
      break;
    case ReduceOp::Max:
    case ReduceOp::Min:
      r = op == ReduceOp::Max ? tl::max(a) : tl::min(a);
      if (is_floating_point(acc_t)) {
        const tl::Tile any_nan = tl::max(tl::where(a != a, 1, 0)) > 0;
        r = tl::where(any_nan, tl::full({}, NAN, acc_t), r);
      }
      if (INDEX) {
        // The smallest index among the lanes holding the result.
        tl::Tile holds = a == r;
        if (is_floating_point(acc_t)) holds = holds | ((a != a) & (r != r));
        const tl::Tile none = tl::full({}, std::numeric_limits<int64_t>::max(), DType::Int64);
        tl::store(idx + o, tl::min(tl::where(holds, tl::Tile(*at_idx), none)));
      }
      break;
  }
  tl::store(out + (SPLIT ? o * os_k + span.split * os_s : o), r.to(out.dtype()));
}

// Column reductions: the outputs are the contiguous elements (a bias gradient, `x.sum(0)` of a
// row-major matrix). A program holds BK neighbouring outputs and adds whole rows of them, ROWS
// rows per step (independent loads in flight), so each load is a contiguous row segment where a
// program per output would read one element per row; the accumulator is a 1-D tile, nothing is
// reduced across lanes. SPLIT as aten_reduce's.
TL_JIT(aten_reduce_cols, tl::Ptr x, tl::Ptr out, tl::Int K, tl::Int k1, tl::Int k2, tl::Int ks0,
       tl::Int ks1, tl::Int ks2, tl::Int n, tl::Int r1, tl::Int r2, tl::Int rs0, tl::Int rs1,
       tl::Int rs2, tl::Int chunk, tl::Int os_k, tl::Int os_s, tl::Const OP, tl::Const ACC,
       tl::Const KEPT, tl::Const RED, tl::Const WIDE, tl::Const SPLIT, tl::Const ROWS,
       tl::Const BK) {
  const auto op = static_cast<ReduceOp>(OP.int_value());
  const DType acc_t = ACC.dtype_value();
  const bool wide = static_cast<bool>(WIDE);
  const tl::Tile rsizes[kMaxReduceRank] = {n, r1, r2}, rstrides[kMaxReduceRank] = {rs0, rs1, rs2};
  const tl::Tile k = block_indices(row_id(wide) * BK, BK, wide);
  const tl::Tile km = k < K;
  const tl::Tile base =
      x + row_offset(k, static_cast<int>(KEPT.int_value()), k1, k2, ks0, ks1, ks2);
  const tl::Tile init = identity(op, acc_t);
  tl::Var acc(tl::broadcast_to(init, {BK}));
  const Span span(static_cast<bool>(SPLIT), wide, n, chunk);
  span.range(ROWS, [&](tl::Tile start) {
    std::vector<tl::Tile> v;  // every row's load first, then the sums
    for (int64_t u = 0; u < ROWS.int_value(); ++u) {
      const tl::Tile j = start + u;
      const tl::Tile m = km & (j < span.hi);
      const tl::Tile at = offset_of(j, static_cast<int>(RED.int_value()), rsizes, rstrides);
      v.push_back(tl::where(m, tl::load(base + at, m).to(acc_t), init));
    }
    for (const tl::Tile& x : v) acc = combine(op, acc, x);
  });
  tl::Tile r = acc;
  if (op == ReduceOp::Mean) r = r / n.to(acc_t);  // a split sums (its second pass divides)
  TS_INTERNAL_ASSERT(op != ReduceOp::Var) << "aten_reduce_cols: var takes the row kernel";
  tl::store(out + (SPLIT ? k * os_k + span.split * os_s : k), r.to(out.dtype()), km);
}

// The accumulator: float32 for narrow floats and float32 (as PyTorch's CUDA reductions), double
// for double, int64 for integer and bool sums and products, the input's type for max/min.
DType accumulator(ReduceOp op, DType in, DType out) {
  if (op == ReduceOp::Max || op == ReduceOp::Min)
    return is_floating_point(in) && in != DType::Float64 ? DType::Float32 : in;
  if (is_floating_point(out)) return out == DType::Float64 ? DType::Float64 : DType::Float32;
  return is_signed(out) || out == DType::Bool ? DType::Int64 : DType::UInt64;
}

// The geometry of a row kernel (reductions, norms): `x`'s first `kept` dimensions pick the row,
// the rest are the row's elements, each side collapsed to at most kMaxReduceRank dimensions.
struct Rows {
  Space kept, elems;
  bool wide = false;  ///< an offset (a kept one plus an element's) or an index passes int32

  /** The kernels' ten geometry parameters: kept sizes 1-2 and strides 0-2, the element count,
   * element sizes 1-2 and strides 0-2. */
  void append_args(std::vector<tl::KernelArg>& a) const {
    const int64_t* k = kept.strides[0];
    const int64_t* r = elems.strides[0];
    for (int64_t v : {kept.sizes[1], kept.sizes[2], k[0], k[1], k[2], elems.numel, elems.sizes[1],
                      elems.sizes[2], r[0], r[1], r[2]})
      a.emplace_back(v);
  }
};
Rows rows_of(const Tensor& x, int64_t kept, const Tensor& out, const char* name) {
  Rows r;
  const Tensor* ts[kOperands] = {&x, &x, &x, &x};
  TS_CHECK(collapse(ts, 0, kept, r.kept) && r.kept.rank <= kMaxReduceRank &&
               collapse(ts, kept, x.dim(), r.elems) && r.elems.rank <= kMaxReduceRank,
           NotImplementedError)
      << "[" << name << "] on " << out.device() << ": more than " << kMaxReduceRank
      << " kept or reduced dimensions that cannot be merged";
  r.wide = needs_wide(r.kept) || needs_wide(r.elems) ||
           reach(r.kept, 0) + reach(r.elems, 0) > kMaxNarrow ||
           r.kept.numel * r.elems.numel > kMaxNarrow;
  return r;
}

// Programs that keep the device busy: four per streaming multiprocessor, or per CPU thread.
int64_t busy_programs(const Device& d) {
  const int units = d.is_cuda()
                        ? runtime::cuda::device_info(std::max<int>(d.index(), 0)).multiprocessors
                        : runtime::num_threads();
  return 4 * int64_t{std::max(units, 1)};
}

// How many programs share each of `programs` reductions of n elements: enough for `busy` programs
// in all when the reductions alone are fewer, each reading at least `least` elements, in chunks
// that are a multiple of `step`. One when splitting does not pay.
struct Split {
  int64_t count = 1, chunk = 0;
};
Split split_of(int64_t programs, int64_t n, int64_t busy, int64_t least, int64_t step) {
  Split s;
  if (programs >= busy || n < 2 * least) return s;
  const int64_t want = std::min((busy + programs - 1) / programs, n / least);
  s.chunk = (n + want - 1) / want;
  s.chunk = (s.chunk + step - 1) / step * step;
  s.count = (n + s.chunk - 1) / s.chunk;
  return s;
}

// The column kernel's outputs per program: 16 bytes of each row per thread (four warps) at most,
// and no wider than wastes lanes: the block (down to 128) that covers K with the fewest idle ones.
int64_t column_block(int64_t K, DType dt) {
  return least_padding_block(K, 2048 / static_cast<int64_t>(itemsize(dt)), 128);
}

// A reduction's kernels: the column kernel where the outputs are the contiguous elements and the
// reduced ones are not, else a program per output; either split over several programs per output
// when the outputs alone would leave the device idle (`may_split`), the partials in an
// accumulator-typed [K, count] workspace that a row reduction then folds. A Mean divides by
// `denom` (the count before any split).
void reduce_rows(ReduceOp op, const Tensor& rows, int64_t kept, const Tensor& out,
                 const Tensor* indices, double correction, const char* name, int64_t denom,
                 bool may_split) {
  const Rows g = rows_of(rows, kept, out, name);
  if (g.kept.numel == 0) return;
  const int64_t K = g.kept.numel, n = g.elems.numel;
  if (denom < 0) denom = n;
  const DType acc = accumulator(op, rows.dtype(), out.dtype());
  const bool splits = may_split && indices == nullptr && op != ReduceOp::Var;
  const bool cols = indices == nullptr && op != ReduceOp::Var && K > 1 &&
                    g.kept.strides[0][g.kept.rank - 1] == 1 &&
                    g.elems.strides[0][g.elems.rank - 1] != 1;
  // Row programs: up to 8 elements a thread per step (four warps), the row's length if less.
  // Column programs: ROWS rows a step, each thread loading up to 16 bytes of each. Split row
  // programs: eight per SM. (H100, one run, against 16 elements a thread and four programs per
  // SM: bf16 x.sum(1) of 8192 x 3072 35.8 -> 31.1 us, float32 x.sum() of 2^24 54.4 -> 37.2 us;
  // 32 elements a thread was slower still, 46 and 59 us; column programs lost with eight.)
  // Column programs whose threads load under 16 bytes of a row (four warps over a narrow block)
  // take 16 rows a step, for as many bytes in flight (H100, against 8: bf16 x.sum(0) of
  // 8192 x 768 16.0 -> 14.7 us; 8192 x 3072, 16 bytes a thread, lost: 37.6 -> 38.6). The CPU
  // takes the same (its tile path: the op tests through tiles run what the GPU runs).
  const int64_t block =
      std::clamp<int64_t>(static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(n))), 512, 1024);
  const int64_t width = cols ? column_block(K, rows.dtype()) : block;
  const bool narrow = width * static_cast<int64_t>(itemsize(rows.dtype())) < 16 * 128;
  const int64_t rows_step = narrow ? 16 : 8;
  const int64_t programs = cols ? (K + width - 1) / width : K;
  const Split sp = splits ? split_of(programs, n, busy_programs(out.device()) * (cols ? 1 : 2),
                                     cols ? 2 * rows_step : 4 * block, cols ? rows_step : block)
                          : Split{};
  Tensor part;
  if (sp.count > 1) part = detail::make_empty({K * sp.count}, acc, out.device());
  const Tensor& dst = sp.count > 1 ? part : out;
  const ReduceOp first = sp.count > 1 && op == ReduceOp::Mean ? ReduceOp::Sum : op;
  std::vector<tl::KernelArg> args = {rows, dst};
  if (!cols) args.emplace_back(indices ? *indices : out);
  if (cols) args.emplace_back(K);
  g.append_args(args);
  if (!cols) append_bits(args, std::bit_cast<int64_t>(correction));
  args.emplace_back(sp.chunk);
  if (!cols) args.emplace_back(denom);
  args.emplace_back(sp.count);  // os_k, os_s: output k's partial s at k * count + s
  args.emplace_back(int64_t{1});
  const bool wide = g.wide || sp.count * K > kMaxNarrow;
  for (const tl::MetaArg m :
       {tl::meta("OP", static_cast<int64_t>(first)), tl::meta("ACC", acc),
        tl::meta("KEPT", g.kept.rank), tl::meta("RED", g.elems.rank), tl::meta("WIDE", wide)})
    args.emplace_back(m);
  if (!cols) args.emplace_back(tl::meta("INDEX", indices != nullptr));
  args.emplace_back(tl::meta("SPLIT", sp.count > 1));
  if (cols) {
    args.emplace_back(tl::meta("ROWS", rows_step));
    args.emplace_back(tl::meta("BK", width));
    aten_reduce_cols[{programs, sp.count}].run_kernel(
        ArrayRef<tl::KernelArg>(args.data(), args.size()));
  } else {
    args.emplace_back(tl::meta("BLOCK", block));
    aten_reduce[{programs, sp.count}].run_kernel(ArrayRef<tl::KernelArg>(args.data(), args.size()));
  }
  if (sp.count == 1) return;
  const Tensor partials = detail::make_view(part, {K, sp.count}, {sp.count, 1}, 0);
  reduce_rows(op, partials, 1, out, nullptr, correction, name, denom, false);
}

void reduce(ReduceOp op, const Tensor& rows, int64_t kept, const Tensor& out, const Tensor* indices,
            double correction, const char* name) {
  reduce_rows(op, rows, kept, out, indices, correction, name, -1, true);
}

// ---- softmax ------------------------------------------------------------------------------------

// A program per row: the row's maximum (a NaN anywhere makes the row NaN, as on the CPU), the sum
// of exp(x - max), then the outputs; three passes over the row in blocks.
TL_JIT(aten_softmax, tl::Ptr x, tl::Ptr out, tl::Int k1, tl::Int k2, tl::Int xs0, tl::Int xs1,
       tl::Int xs2, tl::Int os0, tl::Int os1, tl::Int os2, tl::Int n, tl::Int xsn, tl::Int osn,
       tl::Const LOG, tl::Const ACC, tl::Const KEPT, tl::Const WIDE, tl::Const BLOCK) {
  const DType acc_t = ACC.dtype_value(), out_t = out.dtype();
  const int kept = static_cast<int>(KEPT.int_value());
  const tl::Tile o = row_id(static_cast<bool>(WIDE));
  const tl::Tile xb = x + row_offset(o, kept, k1, k2, xs0, xs1, xs2);
  const tl::Tile ob = out + row_offset(o, kept, k1, k2, os0, os1, os2);
  const tl::Tile neg_inf = tl::full({}, -INFINITY, acc_t);
  // The row's values in blocks: the input converted to out's dtype, then to the accumulator's.
  const auto block = [&](tl::Tile start, tl::Tile& j, tl::Tile& m) {
    j = block_indices(start, BLOCK, static_cast<bool>(WIDE));
    m = j < n;
    return tl::load(xb + j * xsn, m).to(out_t).to(acc_t);
  };
  tl::Var mx(tl::broadcast_to(neg_inf, {BLOCK}));
  tl::Var nan(tl::zeros({BLOCK}, DType::Int32));
  tl::range(0, n, BLOCK, [&](tl::Tile start) {
    tl::Tile j, m;
    const tl::Tile val = block(start, j, m);
    mx = tl::where(m & (val > mx), val, mx);
    nan = nan | tl::where(m & (val != val), 1, 0);
  });
  tl::Tile row_max = tl::max(tl::Tile(mx));
  row_max = tl::where(row_max == neg_inf, tl::zeros({}, acc_t), row_max);  // all -inf: as the CPU
  const tl::Tile any_nan = tl::max(tl::Tile(nan)) > 0;
  tl::Var sum(tl::zeros({BLOCK}, acc_t));
  tl::range(0, n, BLOCK, [&](tl::Tile start) {
    tl::Tile j, m;
    const tl::Tile val = block(start, j, m);
    sum = sum + tl::where(m, tl::exp(val - row_max), tl::zeros({}, acc_t));
  });
  const tl::Tile total = tl::sum(tl::Tile(sum));
  const tl::Tile log_total = tl::log(total);
  tl::range(0, n, BLOCK, [&](tl::Tile start) {
    tl::Tile j, m;
    const tl::Tile val = block(start, j, m);
    tl::Tile r = LOG ? (val - row_max) - log_total : tl::exp(val - row_max) / total;
    r = tl::where(any_nan, tl::full({}, NAN, acc_t), r);
    tl::store(ob + j * osn, r.to(out_t), m);
  });
}

// A running sum along the row: each block's inclusive scan plus the sum of the blocks before it.
TL_JIT(aten_cumsum, tl::Ptr x, tl::Ptr out, tl::Int k1, tl::Int k2, tl::Int xs0, tl::Int xs1,
       tl::Int xs2, tl::Int os0, tl::Int os1, tl::Int os2, tl::Int n, tl::Int xsn, tl::Int osn,
       tl::Const ACC, tl::Const KEPT, tl::Const WIDE, tl::Const BLOCK) {
  const DType acc_t = ACC.dtype_value(), out_t = out.dtype();
  const int kept = static_cast<int>(KEPT.int_value());
  const tl::Tile o = row_id(static_cast<bool>(WIDE));
  const tl::Tile xb = x + row_offset(o, kept, k1, k2, xs0, xs1, xs2);
  const tl::Tile ob = out + row_offset(o, kept, k1, k2, os0, os1, os2);
  const tl::Tile zero = tl::zeros({}, acc_t);
  tl::Var carry(zero);
  tl::range(0, n, BLOCK, [&](tl::Tile start) {
    const tl::Tile j = block_indices(start, BLOCK, static_cast<bool>(WIDE));
    const tl::Tile m = j < n;
    const tl::Tile v = tl::where(m, tl::load(xb + j * xsn, m).to(out_t).to(acc_t), zero);
    tl::store(ob + j * osn, (tl::cumsum(v, 0) + carry).to(out_t), m);
    carry = carry + tl::sum(v);
  });
}

// Softmax, log_softmax and cumsum: a program per line along the last dimension of the views.
void row_op(ops_detail::RowOp op, const Tensor& in, const Tensor& out, const char* name) {
  const int64_t nd = in.dim();
  Space ks;
  const Tensor* ts[kOperands] = {&in, &out, &in, &in};
  TS_CHECK(collapse(ts, 0, nd - 1, ks) && ks.rank <= kMaxReduceRank, NotImplementedError)
      << "[" << name << "] on " << out.device() << ": more than " << kMaxReduceRank
      << " other dimensions that cannot be merged";
  const int64_t rows = ks.numel, n = in.size(nd - 1).expect_int();
  if (rows == 0 || n == 0) return;
  const int64_t xsn = in.stride(nd - 1).expect_int(), osn = out.stride(nd - 1).expect_int();
  const bool wide = needs_wide(ks) || reach(ks, 0) + (n - 1) * std::abs(xsn) > kMaxNarrow ||
                    reach(ks, 1) + (n - 1) * std::abs(osn) > kMaxNarrow || n > kMaxNarrow;
  const DType d = out.dtype();
  const DType acc = !is_floating_point(d) ? d
                    : d == DType::Float64 ? DType::Float64
                                          : DType::Float32;
  const int64_t* xs = ks.strides[0];
  const int64_t* os = ks.strides[1];
  std::vector<tl::KernelArg> args = {in, out};
  for (const int64_t v :
       {ks.sizes[1], ks.sizes[2], xs[0], xs[1], xs[2], os[0], os[1], os[2], n, xsn, osn})
    args.emplace_back(v);
  if (op != ops_detail::RowOp::Cumsum)
    args.emplace_back(tl::meta("LOG", op == ops_detail::RowOp::LogSoftmax));
  for (const tl::MetaArg m : {tl::meta("ACC", acc), tl::meta("KEPT", ks.rank),
                              tl::meta("WIDE", wide), tl::meta("BLOCK", int64_t{1024})})
    args.emplace_back(m);
  const ArrayRef<tl::KernelArg> a(args.data(), args.size());
  if (op == ops_detail::RowOp::Cumsum) {
    aten_cumsum[{rows}].run_kernel(a);
  } else {
    aten_softmax[{rows}].run_kernel(a);
  }
}

// ---- layer_norm and rms_norm
// ----------------------------------------------------------------------

// A program per row (the normalized elements): the mean (layer_norm), the mean of squared
// deviations, then the outputs, in blocks; statistics in the accumulator type (float32 or double).
TL_JIT(aten_norm, tl::Ptr x, tl::Ptr w, tl::Ptr b, tl::Ptr out, tl::Int k1, tl::Int k2, tl::Int ks0,
       tl::Int ks1, tl::Int ks2, tl::Int n, tl::Int r1, tl::Int r2, tl::Int rs0, tl::Int rs1,
       tl::Int rs2, tl::Int eps_lo, tl::Int eps_hi, tl::Const RMS, tl::Const HAS_W, tl::Const HAS_B,
       tl::Const ACC, tl::Const KEPT, tl::Const RED, tl::Const WIDE, tl::Const BLOCK) {
  const DType acc_t = ACC.dtype_value();
  const tl::Tile rsizes[kMaxReduceRank] = {n, r1, r2}, rstrides[kMaxReduceRank] = {rs0, rs1, rs2};
  const tl::Tile o = row_id(static_cast<bool>(WIDE));
  const tl::Tile xb = x + row_offset(o, static_cast<int>(KEPT.int_value()), k1, k2, ks0, ks1, ks2);
  const tl::Tile ob = out + o * n;
  const tl::Tile zero = tl::zeros({}, acc_t);
  const auto block = [&](tl::Tile start, tl::Tile& j, tl::Tile& m) {
    j = block_indices(start, BLOCK, static_cast<bool>(WIDE));
    m = j < n;
    const tl::Tile at = offset_of(j, static_cast<int>(RED.int_value()), rsizes, rstrides);
    return tl::where(m, tl::load(xb + at, m).to(acc_t), zero);
  };
  tl::Tile mean = zero;
  if (!RMS) {
    tl::Var sum(tl::zeros({BLOCK}, acc_t));
    tl::range(0, n, BLOCK, [&](tl::Tile start) {
      tl::Tile j, m;
      sum = sum + block(start, j, m);
    });
    mean = tl::sum(tl::Tile(sum)) / n.to(acc_t);
  }
  tl::Var ss(tl::zeros({BLOCK}, acc_t));
  tl::range(0, n, BLOCK, [&](tl::Tile start) {
    tl::Tile j, m;
    const tl::Tile v = block(start, j, m);
    const tl::Tile dev = tl::where(m, v - mean, zero);
    ss = ss + dev * dev;
  });
  const tl::Tile eps_bits[2] = {eps_lo, eps_hi};
  const tl::Tile eps = from_bits<double>(eps_bits).t.to(acc_t);  // exact: a double's bits
  const tl::Tile inv = 1.0f / tl::sqrt(tl::sum(tl::Tile(ss)) / n.to(acc_t) + eps);
  tl::range(0, n, BLOCK, [&](tl::Tile start) {
    tl::Tile j, m;
    tl::Tile y = (block(start, j, m) - mean) * inv;
    if (HAS_W) y = y * tl::load(w + j, m).to(acc_t);
    if (HAS_B) y = y + tl::load(b + j, m).to(acc_t);
    tl::store(ob + j, y.to(out.dtype()), m);
  });
}

void norm(bool rms, const Tensor& x, int64_t normalized, const Tensor* weight, const Tensor* bias,
          double eps, const Tensor& out, const char* name) {
  const Rows g = rows_of(x, x.dim() - normalized, out, name);
  if (g.kept.numel == 0 || g.elems.numel == 0) return;
  std::vector<tl::KernelArg> args = {x, weight ? *weight : out, bias ? *bias : out, out};
  g.append_args(args);
  append_bits(args, std::bit_cast<int64_t>(eps));
  const DType acc = x.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  for (const tl::MetaArg m :
       {tl::meta("RMS", rms), tl::meta("HAS_W", weight != nullptr),
        tl::meta("HAS_B", bias != nullptr), tl::meta("ACC", acc), tl::meta("KEPT", g.kept.rank),
        tl::meta("RED", g.elems.rank), tl::meta("WIDE", g.wide), tl::meta("BLOCK", int64_t{1024})})
    args.emplace_back(m);
  aten_norm[{g.kept.numel}].run_kernel(ArrayRef<tl::KernelArg>(args.data(), args.size()));
}

// ---- index_select and index_add -------------------------------------------------------------

// Element k of the [A, I, B] side: b = k % B, i = (k / B) % I, a = k / (B * I); its partner on the
// [A, S, B] side is at (a * S + s) * B + b with s = index[i] (negative: from the end). Gather
// copies bits; Add adds alpha * src atomically in the element type's opmath type.
TL_JIT(aten_index, tl::Ptr out, tl::Ptr src, tl::Ptr index, tl::Int n, tl::Int S, tl::Int B,
       tl::Int I, tl::Int alpha_lo, tl::Int alpha_hi, tl::Const ADD, tl::Const COMPUTE,
       tl::Const WIDE, tl::Const BLOCK) {
  tl::Tile k = tl::program_id(0);
  if (WIDE) k = k.to(DType::Int64);
  k = k * BLOCK + tl::arange(0, BLOCK);
  const tl::Tile m = k < n;
  const tl::Tile b = k % B, row = k / B;
  const tl::Tile i = row % I, a = row / I;
  tl::Tile s = tl::load(index + i, m);
  s = tl::where(s < 0, s + S, s);
  tl::Tile at = (a * S + s) * B + b;
  if (!WIDE) at = at.to(DType::Int32);  // the caller checked every offset fits
  if (!ADD) {
    tl::store(out + k, tl::load(src + at, m), m);
    return;
  }
  const tl::Tile halves[2] = {alpha_lo, alpha_hi};
  visit_dtype<kNumeric>(COMPUTE.dtype_value(), "index_add", [&]<class T>() {
    using E = opmath_t<T>;
    const tl::Tile v = tl::load(src + k, m).to(dtype_of<E>()) * from_bits<E>(halves).t;
    tl::atomic_add(out + at, v, m, tl::AtomicOptions{.sem = "relaxed"});
  });
}

void index(ops_detail::IndexOp op, const Tensor& src, const Tensor& idx, const Tensor& out,
           ops_detail::IndexGeometry g, const Scalar& alpha, const char* name) {
  const bool add = op == ops_detail::IndexOp::Add;
  const int64_t n = g.A * g.I * g.B;  // the [A, I, B] side
  if (n == 0) return;
  const bool wide = std::max(n, g.A * g.S * g.B) > kMaxNarrow;
  const DType d = out.dtype();
  int64_t bits = 0;
  if (add) {
    visit_dtype<kNumeric>(d, name,
                          [&]<class T>() { bits = to_bits(scalar_param<opmath_t<T>>(alpha)); });
  }
  std::vector<tl::KernelArg> args = {out, src, idx};
  for (const int64_t v : {n, g.S, g.B, g.I}) args.emplace_back(v);
  append_bits(args, bits);
  for (const tl::MetaArg m : {tl::meta("ADD", add), tl::meta("COMPUTE", d), tl::meta("WIDE", wide),
                              tl::meta("BLOCK", kBlock)})
    args.emplace_back(m);
  aten_index[{(n + kBlock - 1) / kBlock}].run_kernel(
      ArrayRef<tl::KernelArg>(args.data(), args.size()));
}

// ---- matmul ----------------------------------------------------------------------------------

// C[b] = A[b] @ B[b] over contiguous batches (A: M x K, B: K x N, C: M x N); one program per
// BM x BN tile of one batch. Floats go through tl::dot (exact float32 products, "ieee"; float16 and
// bfloat16 accumulate in float32, float64 in float64); integers multiply and sum a BM x BK x BN
// tile in their own type (wrapping, as the CPU), since tl::dot takes only 8-bit integers.
TL_JIT(aten_matmul, tl::Ptr a, tl::Ptr b, tl::Ptr c, tl::Int M, tl::Int N, tl::Int K,
       tl::Int tiles_n, tl::Int tiles, tl::Const ACC, tl::Const DOT, tl::Const WIDE, tl::Const BM,
       tl::Const BN, tl::Const BK) {
  tl::Tile pid = tl::program_id(0);
  if (WIDE) pid = pid.to(DType::Int64);
  const tl::Tile batch = pid / tiles, t = pid % tiles;
  const tl::Tile rm = (t / tiles_n) * BM + tl::arange(0, BM);
  const tl::Tile rn = (t % tiles_n) * BN + tl::arange(0, BN);
  const tl::Tile rk = tl::arange(0, BK);
  const tl::Tile ab = a + batch * M * K, bb = b + batch * K * N;
  const DType acc_t = ACC.dtype_value();
  tl::Var acc(tl::zeros({BM.int_value(), BN.int_value()}, acc_t));
  tl::range(0, K, BK, [&](tl::Tile k) {
    const tl::Tile ka = k + rk;
    const tl::Tile am = (rm[{tl::_, tl::None}] < M) & (ka[{tl::None, tl::_}] < K);
    const tl::Tile bm = (ka[{tl::_, tl::None}] < K) & (rn[{tl::None, tl::_}] < N);
    const tl::Tile x = tl::load(ab + rm[{tl::_, tl::None}] * K + ka[{tl::None, tl::_}], am, 0);
    const tl::Tile y = tl::load(bb + ka[{tl::_, tl::None}] * N + rn[{tl::None, tl::_}], bm, 0);
    if (DOT) {
      acc = tl::dot(x, y, tl::Operand(acc), {.out_dtype = acc_t, .input_precision = "ieee"});
    } else {
      const tl::Tile prod = x[{tl::_, tl::_, tl::None}] * y[{tl::None, tl::_, tl::_}];
      acc = acc + tl::sum(prod, 1).to(acc_t);
    }
  });
  const tl::Tile cm = (rm[{tl::_, tl::None}] < M) & (rn[{tl::None, tl::_}] < N);
  tl::store(c + batch * M * N + rm[{tl::_, tl::None}] * N + rn[{tl::None, tl::_}],
            tl::Tile(acc).to(c.dtype()), cm);
}

void matmul(const Tensor& A, const Tensor& B, const Tensor& C, int64_t batches, int64_t M,
            int64_t N, int64_t K) {
  const DType d = C.dtype();
  const bool dot = is_floating_point(d);
  const DType acc = d == DType::Float64 ? DType::Float64 : dot ? DType::Float32 : d;
  const int64_t bm = dot ? 64 : 16, bn = dot ? 64 : 16, bk = dot ? 32 : 16;
  const int64_t tiles_n = (N + bn - 1) / bn, tiles = ((M + bm - 1) / bm) * tiles_n;
  const int64_t programs = tiles * batches;
  const bool wide = std::max({batches * M * K, batches * K * N, batches * M * N,
                              programs * std::max(bm, bn)}) > kMaxNarrow;
  std::vector<tl::KernelArg> args = {A, B, C};
  for (const int64_t v : {M, N, K, tiles_n, tiles}) args.emplace_back(v);
  for (const tl::MetaArg m : {tl::meta("ACC", acc), tl::meta("DOT", dot), tl::meta("WIDE", wide),
                              tl::meta("BM", bm), tl::meta("BN", bn), tl::meta("BK", bk)})
    args.emplace_back(m);
  aten_matmul[{programs}].run_kernel(ArrayRef<tl::KernelArg>(args.data(), args.size()));
}

// The built-in ops' kernels specialize on dtypes, constexprs (the pointwise kernel's CONTIG: dense
// operands) and the row kernels' innermost strides only: sizes, strides and scalar bits vary with
// every shape, and specializing on them (== 1, divisible by 16) would compile a kernel per shape
// for nothing (the GPU op harness compiled over a thousand kernels for the comparisons alone).
void limit_specialization() {
  std::vector<std::string> ints = {"n", "p0", "p1", "p2", "p3"};
  for (int k = 1; k < kMaxRank; ++k) ints.push_back("d" + std::to_string(k));
  for (const char* o : {"o", "a", "b", "c"}) {
    for (int k = 0; k < kMaxRank; ++k) ints.push_back(o + std::to_string(k));
  }
  for (const auto& name : ints) aten_pointwise.do_not_specialize({name});
  aten_reduce.do_not_specialize({"k1", "k2", "ks0", "ks1", "ks2", "n", "r1", "r2", "rs1", "rs2",
                                 "corr_lo", "corr_hi", "chunk", "denom", "os_k", "os_s"});
  // The column kernel's strides stay specialized: its innermost kept stride is 1 (contiguous,
  // vector loads) and a row stride divisible by 16 keeps rows aligned.
  aten_reduce_cols.do_not_specialize({"K", "k1", "k2", "n", "r1", "r2", "chunk", "os_k", "os_s"});
  for (tl::JITFunction* f : {&aten_softmax, &aten_cumsum})
    f->do_not_specialize({"k1", "k2", "xs0", "xs1", "xs2", "os0", "os1", "os2", "n"});
  aten_norm.do_not_specialize(
      {"k1", "k2", "ks0", "ks1", "ks2", "n", "r1", "r2", "rs1", "rs2", "eps_lo", "eps_hi"});
  aten_index.do_not_specialize({"n", "S", "B", "I", "alpha_lo", "alpha_hi"});
}

[[maybe_unused]] const int registered = [] {
  limit_specialization();
  ops_detail::set_device_matmul_runner(&matmul);
  ops_detail::set_device_index_runner(&index);
  ops_detail::set_device_norm_runner(&norm);
  ops_detail::set_device_row_runner(&row_op);
  ops_detail::set_device_pointwise_runner(&run);
  ops_detail::set_device_reduce_runner(&reduce);
  return 0;
}();

}  // namespace

tl::Tile pointwise_tile(PwOp op, DType compute, ArrayRef<tl::Tile> inputs, const void* extra) {
  TS_INTERNAL_ASSERT(static_cast<int>(inputs.size()) == arity(op))
      << "pointwise_tile: " << inputs.size() << " inputs for an op of arity " << arity(op);
  int64_t bits[2] = {0, 0};
  bool has_lo = false, has_hi = false;
  scalar_bits(op, compute, extra, "pointwise", bits, has_lo, has_hi);
  const tl::Tile p[4] = {TV<int32_t>::constant(lo32(bits[0])), TV<int32_t>::constant(hi32(bits[0])),
                         TV<int32_t>::constant(lo32(bits[1])),
                         TV<int32_t>::constant(hi32(bits[1]))};
  const Traced c{op, compute, inputs.data(), p, has_lo, has_hi};
  return apply(c);
}

}  // namespace tessera::op_tiles
