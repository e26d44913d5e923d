/** \file
 * Element types of tensors and tiles, and PyTorch's type-promotion rules.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string_view>

namespace tessera {

/** The element type of a tensor. The order is part of the on-disk cache format: append only. */
enum class DType : uint8_t {
  Bool,
  Int8,
  Int16,
  Int32,
  Int64,
  UInt8,
  UInt16,
  UInt32,
  UInt64,
  Float16,
  BFloat16,
  Float32,
  Float64,
  Float8_e4m3fn,
  Float8_e5m2,
};
inline constexpr int kNumDTypes = 15;

/** Short names, as users write them. */
namespace dtypes {
inline constexpr DType bool_ = DType::Bool;
inline constexpr DType int8 = DType::Int8;
inline constexpr DType int16 = DType::Int16;
inline constexpr DType int32 = DType::Int32;
inline constexpr DType int64 = DType::Int64;
inline constexpr DType uint8 = DType::UInt8;
inline constexpr DType uint16 = DType::UInt16;
inline constexpr DType uint32 = DType::UInt32;
inline constexpr DType uint64 = DType::UInt64;
inline constexpr DType float16 = DType::Float16;
inline constexpr DType bfloat16 = DType::BFloat16;
inline constexpr DType float32 = DType::Float32;
inline constexpr DType float64 = DType::Float64;
inline constexpr DType float8_e4m3fn = DType::Float8_e4m3fn;
inline constexpr DType float8_e5m2 = DType::Float8_e5m2;
}  // namespace dtypes
using namespace dtypes;  // NOLINT: `tessera::float32` reads as in PyTorch

/** Size of one element in bytes. */
size_t itemsize(DType t);
/** The name without prefix: "float32", "bool", "float8_e4m3fn". */
const char* dtype_name(DType t);
/** Parses a name such as "float32", "f32", "half", "bf16"; nullopt when unknown. */
std::optional<DType> parse_dtype(std::string_view name);
/** Prints "tessera.float32". */
std::ostream& operator<<(std::ostream& os, DType t);

constexpr bool is_floating_point(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 ||
         t == DType::Float64 || t == DType::Float8_e4m3fn || t == DType::Float8_e5m2;
}
constexpr bool is_float8(DType t) {
  return t == DType::Float8_e4m3fn || t == DType::Float8_e5m2;
}
/** Integer types; `include_bool` adds bool. */
constexpr bool is_integral(DType t, bool include_bool = false) {
  return (t >= DType::Int8 && t <= DType::UInt64) || (include_bool && t == DType::Bool);
}
constexpr bool is_signed(DType t) {
  return (t >= DType::Int8 && t <= DType::Int64) || is_floating_point(t);
}
constexpr bool is_unsigned_wide(DType t) {
  return t == DType::UInt16 || t == DType::UInt32 || t == DType::UInt64;
}

/** The default floating dtype (float32), used for float scalars and integer true division. */
DType default_float_dtype();

/**
 * PyTorch's `promote_types`: the smallest type both promote to. Throws `DTypeError` for pairs
 * PyTorch refuses (float8 with another type; uint16/32/64 with another integer type).
 */
DType promote_types(DType a, DType b);

/** Whether a value of type `from` may be written into `to` by an in-place op or `out=`. */
bool can_cast(DType from, DType to);

/** The category of an operand when computing a result type (PyTorch's `result_type`). */
enum class OperandKind : uint8_t {
  Tensor,         ///< a tensor with at least one dimension
  ZeroDim,        ///< a zero-dimensional tensor
  WrappedNumber,  ///< a C++ scalar (int, double, bool)
};

/** Accumulates PyTorch's result-type rule over operands. */
class ResultType {
 public:
  void add(DType t, OperandKind kind);
  /** The promoted type; `DTypeError` if no operand was added or types do not promote. */
  DType result() const;

 private:
  std::optional<DType> dim_, zero_, wrapped_;
};

}  // namespace tessera
