/** \file
 * The C++ type of each dtype (`cpp_type_t<DType::Float32>` is `float`) and back (`dtype_of<T>()`).
 */
#pragma once

#include <cstdint>
#include <type_traits>

#include "tessera/dtype.h"
#include "tessera/float_types.h"

namespace tessera {

template <DType D>
struct dtype_cpp;
#define TS_DTYPE_CPP(D, T)     \
  template <>                  \
  struct dtype_cpp<DType::D> { \
    using type = T;            \
  };
TS_DTYPE_CPP(Bool, bool)
TS_DTYPE_CPP(Int8, int8_t)
TS_DTYPE_CPP(Int16, int16_t)
TS_DTYPE_CPP(Int32, int32_t)
TS_DTYPE_CPP(Int64, int64_t)
TS_DTYPE_CPP(UInt8, uint8_t)
TS_DTYPE_CPP(UInt16, uint16_t)
TS_DTYPE_CPP(UInt32, uint32_t)
TS_DTYPE_CPP(UInt64, uint64_t)
TS_DTYPE_CPP(Float16, Half)
TS_DTYPE_CPP(BFloat16, BFloat16)
TS_DTYPE_CPP(Float32, float)
TS_DTYPE_CPP(Float64, double)
TS_DTYPE_CPP(Float8_e4m3fn, Float8_e4m3fn)
TS_DTYPE_CPP(Float8_e5m2, Float8_e5m2)
#undef TS_DTYPE_CPP

/** The C++ storage type of a dtype. */
template <DType D>
using cpp_type_t = typename dtype_cpp<D>::type;

/** The dtype of a C++ storage type. */
template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, bool>)
    return DType::Bool;
  else if constexpr (std::is_same_v<T, int8_t>)
    return DType::Int8;
  else if constexpr (std::is_same_v<T, int16_t>)
    return DType::Int16;
  else if constexpr (std::is_same_v<T, int32_t>)
    return DType::Int32;
  else if constexpr (std::is_same_v<T, int64_t>)
    return DType::Int64;
  else if constexpr (std::is_same_v<T, uint8_t>)
    return DType::UInt8;
  else if constexpr (std::is_same_v<T, uint16_t>)
    return DType::UInt16;
  else if constexpr (std::is_same_v<T, uint32_t>)
    return DType::UInt32;
  else if constexpr (std::is_same_v<T, uint64_t>)
    return DType::UInt64;
  else if constexpr (std::is_same_v<T, Half>)
    return DType::Float16;
  else if constexpr (std::is_same_v<T, BFloat16>)
    return DType::BFloat16;
  else if constexpr (std::is_same_v<T, float>)
    return DType::Float32;
  else if constexpr (std::is_same_v<T, double>)
    return DType::Float64;
  else if constexpr (std::is_same_v<T, Float8_e4m3fn>)
    return DType::Float8_e4m3fn;
  else if constexpr (std::is_same_v<T, Float8_e5m2>)
    return DType::Float8_e5m2;
  else
    static_assert(!sizeof(T), "not a tessera element type");
}

}  // namespace tessera
