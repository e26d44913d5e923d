/** \file
 * Compile-time dispatch over dtypes: `visit_dtype<kFloating>(dt, "op", [&]<class T>() {...})`
 * instantiates the body only for the types in the set and throws a `DTypeError` naming the op
 * for the others. Internal: include it from .cpp files only (it instantiates a body per type).
 */
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "tessera/dtype.h"
#include "tessera/dtype_traits.h"
#include "tessera/error.h"
#include "tessera/float_types.h"

namespace tessera {

/** A set of dtypes as a bit mask, usable as a template argument. */
using DTypeSet = uint32_t;
constexpr DTypeSet dtype_bit(DType t) {
  return DTypeSet(1) << static_cast<int>(t);
}

inline constexpr DTypeSet kBoolSet = dtype_bit(DType::Bool);
inline constexpr DTypeSet kSignedInts = dtype_bit(DType::Int8) | dtype_bit(DType::Int16) |
                                        dtype_bit(DType::Int32) | dtype_bit(DType::Int64);
inline constexpr DTypeSet kUnsignedInts = dtype_bit(DType::UInt8) | dtype_bit(DType::UInt16) |
                                          dtype_bit(DType::UInt32) | dtype_bit(DType::UInt64);
inline constexpr DTypeSet kInts = kSignedInts | kUnsignedInts;
inline constexpr DTypeSet kFloat8 = dtype_bit(DType::Float8_e4m3fn) | dtype_bit(DType::Float8_e5m2);
/** Floating types with arithmetic (float8 is storage and casts only, as in PyTorch). */
inline constexpr DTypeSet kFloats = dtype_bit(DType::Float16) | dtype_bit(DType::BFloat16) |
                                    dtype_bit(DType::Float32) | dtype_bit(DType::Float64);
inline constexpr DTypeSet kNumeric = kInts | kFloats;
inline constexpr DTypeSet kNumericAndBool = kNumeric | kBoolSet;
inline constexpr DTypeSet kIntsAndBool = kInts | kBoolSet;
inline constexpr DTypeSet kAllDTypes = kNumericAndBool | kFloat8;

template <class T>
inline constexpr bool is_narrow_float_v =
    std::is_same_v<T, Half> || std::is_same_v<T, BFloat16> || std::is_same_v<T, Float8_e4m3fn> ||
    std::is_same_v<T, Float8_e5m2>;

/** The type arithmetic on `T` is done in: float for the narrow floats, `T` otherwise. */
template <class T>
using opmath_t = std::conditional_t<is_narrow_float_v<T>, float, T>;

/**
 * Converts one element. Floating to integer truncates toward zero; NaN and values outside int64
 * become int64's minimum before wrapping to a narrower type (what x86 gives PyTorch), so no
 * conversion is undefined behaviour. Anything to bool is `v != 0`.
 */
template <class To, class From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (is_narrow_float_v<From>) {
    return convert<To>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (is_narrow_float_v<To>) {
    if constexpr (std::is_same_v<From, double>)
      return To(v);
    else
      return To(static_cast<float>(v));
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    if constexpr (std::is_same_v<To, uint64_t>) {
      if (v >= From(9223372036854775808.0)) {
        return v < From(18446744073709551616.0) ? static_cast<uint64_t>(v) : uint64_t(1) << 63;
      }
    }
    int64_t i;
    if (!(v >= From(-9223372036854775808.0) && v < From(9223372036854775808.0))) {
      i = std::numeric_limits<int64_t>::min();
    } else {
      i = static_cast<int64_t>(v);
    }
    return static_cast<To>(i);
  } else {
    return static_cast<To>(v);
  }
}

namespace detail {
[[noreturn]] void throw_unsupported_dtype(const char* op, DType t);
}

/**
 * Calls `f.template operator()<T>()` with the C++ type of `t` when `t` is in `Set`; otherwise
 * throws `DTypeError` "[op] not implemented for 'dtype'".
 */
template <DTypeSet Set, class F>
decltype(auto) visit_dtype(DType t, const char* op, F&& f) {
#define TS_VISIT_CASE(D)                                    \
  case DType::D:                                            \
    if constexpr ((Set & dtype_bit(DType::D)) != 0) {       \
      return f.template operator()<cpp_type_t<DType::D>>(); \
    } else {                                                \
      break;                                                \
    }
  switch (t) {
    TS_VISIT_CASE(Bool)
    TS_VISIT_CASE(Int8)
    TS_VISIT_CASE(Int16)
    TS_VISIT_CASE(Int32)
    TS_VISIT_CASE(Int64)
    TS_VISIT_CASE(UInt8)
    TS_VISIT_CASE(UInt16)
    TS_VISIT_CASE(UInt32)
    TS_VISIT_CASE(UInt64)
    TS_VISIT_CASE(Float16)
    TS_VISIT_CASE(BFloat16)
    TS_VISIT_CASE(Float32)
    TS_VISIT_CASE(Float64)
    TS_VISIT_CASE(Float8_e4m3fn)
    TS_VISIT_CASE(Float8_e5m2)
  }
#undef TS_VISIT_CASE
  detail::throw_unsupported_dtype(op, t);
}

}  // namespace tessera
