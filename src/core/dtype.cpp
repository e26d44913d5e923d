#include "tessera/dtype.h"

#include <ostream>
#include <string>

#include "core/dtype_visit.h"
#include "tessera/error.h"

namespace tessera {
namespace {

struct DTypeInfo {
  const char* name;
  size_t size;
};

constexpr DTypeInfo kInfo[kNumDTypes] = {
    {"bool", 1},     {"int8", 1},    {"int16", 2},   {"int32", 4},         {"int64", 8},
    {"uint8", 1},    {"uint16", 2},  {"uint32", 4},  {"uint64", 8},        {"float16", 2},
    {"bfloat16", 2}, {"float32", 4}, {"float64", 8}, {"float8_e4m3fn", 1}, {"float8_e5m2", 1},
};

const DTypeInfo& info(DType t) {
  const int i = static_cast<int>(t);
  TS_INTERNAL_ASSERT(i >= 0 && i < kNumDTypes) << "bad dtype code " << i;
  return kInfo[i];
}

}  // namespace

size_t itemsize(DType t) {
  return info(t).size;
}
const char* dtype_name(DType t) {
  return info(t).name;
}

std::ostream& operator<<(std::ostream& os, DType t) {
  return os << "tessera." << dtype_name(t);
}

std::optional<DType> parse_dtype(std::string_view name) {
  if (name.substr(0, 8) == "tessera.") name.remove_prefix(8);
  for (int i = 0; i < kNumDTypes; ++i) {
    if (name == kInfo[i].name) return static_cast<DType>(i);
  }
  struct Alias {
    const char* name;
    DType t;
  };
  static constexpr Alias kAliases[] = {
      {"i8", DType::Int8},
      {"i16", DType::Int16},
      {"i32", DType::Int32},
      {"i64", DType::Int64},
      {"u8", DType::UInt8},
      {"u16", DType::UInt16},
      {"u32", DType::UInt32},
      {"u64", DType::UInt64},
      {"f16", DType::Float16},
      {"half", DType::Float16},
      {"bf16", DType::BFloat16},
      {"f32", DType::Float32},
      {"float", DType::Float32},
      {"f64", DType::Float64},
      {"double", DType::Float64},
      {"long", DType::Int64},
      {"int", DType::Int32},
      {"short", DType::Int16},
      {"i1", DType::Bool},
      {"int1", DType::Bool},
      {"fp8e4nv", DType::Float8_e4m3fn},
      {"fp8e5", DType::Float8_e5m2},
      {"float8e4nv", DType::Float8_e4m3fn},
      {"float8e5", DType::Float8_e5m2},
  };
  for (const auto& a : kAliases) {
    if (name == a.name) return a.t;
  }
  return std::nullopt;
}

DType default_float_dtype() {
  return DType::Float32;
}

namespace detail {
void throw_unsupported_dtype(const char* op, DType t) {
  TS_ERROR(DTypeError) << "[" << op << "] not implemented for '" << dtype_name(t) << "'";
}
}  // namespace detail

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (is_float8(a) || is_float8(b)) {
    TS_ERROR(DTypeError) << "promotion for float8 types is not supported, attempted to promote "
                         << dtype_name(a) << " and " << dtype_name(b);
  }
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  if (is_unsigned_wide(a) || is_unsigned_wide(b)) {
    // PyTorch promotes uint16/32/64 only with floating types (int64 could overflow).
    if (is_floating_point(a)) return a;
    if (is_floating_point(b)) return b;
    TS_ERROR(DTypeError) << "promotion for uint16, uint32, uint64 types is not supported, "
                         << "attempted to promote " << dtype_name(a) << " and " << dtype_name(b);
  }
  const bool fa = is_floating_point(a), fb = is_floating_point(b);
  if (fa && fb) {
    if (a == DType::Float64 || b == DType::Float64) return DType::Float64;
    if (a == DType::Float32 || b == DType::Float32) return DType::Float32;
    return DType::Float32;  // float16 with bfloat16
  }
  if (fa) return a;
  if (fb) return b;
  // Both integers among int8..int64 and uint8.
  auto rank = [](DType t) {
    switch (t) {
      case DType::Int8:
        return 1;
      case DType::Int16:
        return 2;
      case DType::Int32:
        return 3;
      case DType::Int64:
        return 4;
      default:
        return 0;  // uint8
    }
  };
  if (a == DType::UInt8 || b == DType::UInt8) {
    const DType other = a == DType::UInt8 ? b : a;
    return other == DType::Int8 ? DType::Int16 : other;
  }
  return rank(a) >= rank(b) ? a : b;
}

bool can_cast(DType from, DType to) {
  if (is_floating_point(from) && is_integral(to, /*include_bool=*/false)) return false;
  if (from != DType::Bool && to == DType::Bool) return false;
  return true;
}

void ResultType::add(DType t, OperandKind kind) {
  auto& slot = kind == OperandKind::Tensor ? dim_ : kind == OperandKind::ZeroDim ? zero_ : wrapped_;
  if (kind == OperandKind::WrappedNumber && is_floating_point(t)) t = default_float_dtype();
  slot = slot ? promote_types(*slot, t) : t;
}

namespace {
// PyTorch's combine_categories: a higher-priority operand decides the type unless a lower one
// moves it to a higher category (bool -> integer -> floating).
std::optional<DType> combine(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (is_floating_point(*higher)) return higher;
  if (*higher == DType::Bool || is_floating_point(*lower)) return promote_types(*higher, *lower);
  return higher;
}
}  // namespace

DType ResultType::result() const {
  auto r = combine(dim_, combine(zero_, wrapped_));
  TS_INTERNAL_ASSERT(r.has_value()) << "result type of no operands";
  return *r;
}

}  // namespace tessera
