#include "backend/common/c_family.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "ir/op_traits.h"

namespace tessera::backend::cfamily {

using ir::Type;

const char* storage_type(DType d) {
  switch (d) {
    case DType::Bool:
      return "bool";
    case DType::Int8:
      return "int8_t";
    case DType::Int16:
      return "int16_t";
    case DType::Int32:
      return "int32_t";
    case DType::Int64:
      return "int64_t";
    case DType::UInt8:
      return "uint8_t";
    case DType::UInt16:
      return "uint16_t";
    case DType::UInt32:
      return "uint32_t";
    case DType::UInt64:
      return "uint64_t";
    case DType::Float16:
    case DType::BFloat16:
      return "uint16_t";
    case DType::Float32:
      return "float";
    case DType::Float64:
      return "double";
    case DType::Float8_e4m3fn:
    case DType::Float8_e5m2:
      return "uint8_t";
  }
  return "?";
}

bool narrow_float(DType d) {
  return d == DType::Float16 || d == DType::BFloat16 || is_float8(d);
}

const char* register_type(DType d) {
  if (narrow_float(d)) return "float";
  return storage_type(d);
}

std::string type_str(const Type& t) {
  if (t.ptr) return std::string(storage_type(t.elem)) + "*";
  return register_type(t.elem);
}

// Storage -> register value.
std::string load_conv(DType d, const std::string& e) {
  switch (d) {
    case DType::Float16:
      return "trt::half_to_float(" + e + ")";
    case DType::BFloat16:
      return "trt::bf16_to_float(" + e + ")";
    case DType::Float8_e4m3fn:
      return "trt::e4m3_to_float(" + e + ")";
    case DType::Float8_e5m2:
      return "trt::e5m2_to_float(" + e + ")";
    default:
      return e;
  }
}

namespace {

// `e` without an outer `trt::<fn>(...)` (its parentheses enclosing all the rest), else `e`.
std::string strip_call(const std::string& e, const std::string& fn) {
  const std::string head = "trt::" + fn + "(";
  if (e.size() <= head.size() || e.compare(0, head.size(), head) != 0 || e.back() != ')') return e;
  int depth = 0;
  for (size_t i = head.size() - 1; i < e.size(); ++i) {
    depth += e[i] == '(' ? 1 : e[i] == ')' ? -1 : 0;
    if (depth == 0 && i + 1 != e.size()) return e;  // the call ends before the expression does
  }
  return e.substr(head.size(), e.size() - head.size() - 1);
}

}  // namespace

// Register value -> storage. A value rounded to the storage type just before (a cast's result) is
// converted once: rounding to nearest even twice gives the same bits, NaNs and overflow included.
std::string store_conv(DType d, const std::string& e) {
  switch (d) {
    case DType::Float16:
      return "trt::float_to_half(" + strip_call(e, "round_f16") + ")";
    case DType::BFloat16:
      return "trt::float_to_bf16(" + strip_call(e, "round_bf16") + ")";
    case DType::Float8_e4m3fn:
      return "trt::float_to_e4m3(" + e + ")";
    case DType::Float8_e5m2:
      return "trt::float_to_e5m2(" + e + ")";
    default:
      return e;
  }
}

// Rounds a float register to a narrow float type's precision.
std::string round_to(DType d, const std::string& e) {
  switch (d) {
    case DType::Float16:
      return "trt::round_f16(" + e + ")";
    case DType::BFloat16:
      return "trt::round_bf16(" + e + ")";
    case DType::Float8_e4m3fn:
      return "trt::e4m3_to_float(trt::float_to_e4m3(" + e + "))";
    case DType::Float8_e5m2:
      return "trt::e5m2_to_float(trt::float_to_e5m2(" + e + "))";
    default:
      return e;
  }
}

std::string float_literal(double v, bool single) {
  if (std::isnan(v)) return single ? "TRT_NANF()" : "TRT_NAN()";
  if (std::isinf(v)) {
    return std::string(v < 0 ? "-" : "") + (single ? "TRT_INFF()" : "TRT_INF()");
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return std::string("(") + buf + (single ? "f" : "") + ")";
}

std::string int_literal(int64_t v, DType d) {
  if (d == DType::Bool) return v ? "true" : "false";
  if (d == DType::UInt64) return "((uint64_t)" + std::to_string(static_cast<uint64_t>(v)) + "ULL)";
  if (v == std::numeric_limits<int64_t>::min()) return "((int64_t)(-9223372036854775807LL - 1))";
  return std::string("((") + storage_type(d) + ")" + std::to_string(v) + "LL)";
}

std::string cast_expr(const Type& src, const Type& dst, const std::string& e) {
  const DType s = src.elem, d = dst.elem;
  if (s == d) return e;
  const std::string rt = register_type(d);
  if (d == DType::Bool) return "((" + e + ") != 0)";
  const bool sf = is_floating_point(s), df = is_floating_point(d);
  if (sf && !df) return std::string("trt::f2i<") + storage_type(d) + ">(" + e + ")";
  if (df) {
    if (d == DType::Float64) return "((double)(" + e + "))";
    return round_to(d, "((float)(" + e + "))");
  }
  return "((" + rt + ")(" + e + "))";
}

std::string reduce_init(ir::ReduceKind k, const Type& t) {
  const DType d = t.elem;
  const bool fl = is_floating_point(d);
  switch (k) {
    case ir::ReduceKind::Sum:
      return fl ? "0.0" : "0";
    case ir::ReduceKind::Max:
      // NaN: fmax_num takes the other operand, so NaNs are skipped and only an all-NaN input
      // gives NaN (IEEE maxNum over the tile, as Triton's max on NVIDIA GPUs).
      if (fl) return d == DType::Float64 ? "TRT_NAN()" : "TRT_NANF()";
      if (d == DType::Bool) return "false";
      return std::string("((") + storage_type(d) + ")" +
             (is_signed(d) ? "(" + int_literal(std::numeric_limits<int64_t>::min(), DType::Int64) +
                                 " >> (64 - 8 * sizeof(" + storage_type(d) + ")))"
                           : "0") +
             ")";
    case ir::ReduceKind::Xor:
      return "0";
    case ir::ReduceKind::ArgMax:
    case ir::ReduceKind::ArgMin:
      break;  // arg_reduce()
    case ir::ReduceKind::Min:
      if (fl) return d == DType::Float64 ? "TRT_NAN()" : "TRT_NANF()";
      if (d == DType::Bool) return "true";
      return std::string("((") + storage_type(d) + ")" +
             (is_signed(d) ? "(((uint64_t)-1 >> 1) >> (64 - 8 * sizeof(" +
                                 std::string(storage_type(d)) + ")))"
                           : "(~(uint64_t)0)") +
             ")";
  }
  return "0";
}

// `vec`: a and b are lanes16 values (integer lanes do not promote, so no narrowing cast).
std::string reduce_combine(ir::ReduceKind k, const Type& t, const std::string& a,
                           const std::string& b, bool vec) {
  const DType d = t.elem;
  const bool fl = is_floating_point(d);
  const std::string rt = register_type(d);
  switch (k) {
    case ir::ReduceKind::Sum:
      if (fl || vec) return "(" + a + " + " + b + ")";
      return "((" + rt + ")(" + a + " + " + b + "))";
    case ir::ReduceKind::Max:
      if (fl) return "trt::fmax_num(" + a + ", " + b + ")";
      if (d == DType::Bool) return "(" + a + " || " + b + ")";
      return "(" + b + " > " + a + " ? " + b + " : " + a + ")";
    case ir::ReduceKind::Min:
      if (fl) return "trt::fmin_num(" + a + ", " + b + ")";
      if (d == DType::Bool) return "(" + a + " && " + b + ")";
      return "(" + b + " < " + a + " ? " + b + " : " + a + ")";
    case ir::ReduceKind::Xor:
      if (vec) return "(" + a + " ^ " + b + ")";
      return "((" + rt + ")(" + a + " ^ " + b + "))";
    case ir::ReduceKind::ArgMax:
    case ir::ReduceKind::ArgMin:
      break;  // arg_reduce()
  }
  return a;
}

// A register value's bits as an unsigned integer of its width, and back (narrow floats: their
// storage conversions).
std::string to_bits(DType d, const std::string& e) {
  if (d == DType::Float32) return "trt::f2u(" + e + ")";
  if (d == DType::Float64) return "trt::d2u(" + e + ")";
  if (narrow_float(d)) return store_conv(d, e);
  return "((uint" + std::to_string(8 * itemsize(d)) + "_t)(" + e + "))";
}
std::string from_bits(DType d, const std::string& b) {
  if (d == DType::Float32) return "trt::u2f((uint32_t)(" + b + "))";
  if (d == DType::Float64) return "trt::u2d((uint64_t)(" + b + "))";
  const std::string bits = "((" + std::string(storage_type(d)) + ")(" + b + "))";
  return narrow_float(d) ? load_conv(d, bits) : bits;
}

std::string binary(ir::BinaryKind k, const Type& t, const std::string& a, const std::string& b) {
  const DType d = t.elem;
  const std::string rt = register_type(d);
  if (is_floating_point(d)) {
    std::string e;
    switch (k) {
      case ir::BinaryKind::Add:
        e = "(" + a + " + " + b + ")";
        break;
      case ir::BinaryKind::Sub:
        e = "(" + a + " - " + b + ")";
        break;
      case ir::BinaryKind::Mul:
        e = "(" + a + " * " + b + ")";
        break;
      case ir::BinaryKind::Div:
      case ir::BinaryKind::DivRn:
        e = "(" + a + " / " + b + ")";
        break;
      case ir::BinaryKind::Rem:
        e = (d == DType::Float64 ? "TRT_FMOD(" : "TRT_FMODF(") + a + ", " + b + ")";
        break;
      case ir::BinaryKind::Max:
        e = "trt::fmax_num(" + a + ", " + b + ")";
        break;
      case ir::BinaryKind::Min:
        e = "trt::fmin_num(" + a + ", " + b + ")";
        break;
      default:
        TS_INTERNAL_ASSERT(ir::is_math_binary(k)) << "bitwise op on floats";
        e = std::string("trt::") + ir::binary_name(k) + "(" + a + ", " + b + ")";
    }
    return round_to(d, e);
  }
  if (d == DType::Bool) {
    switch (k) {
      case ir::BinaryKind::And:
      case ir::BinaryKind::Mul:
      case ir::BinaryKind::Min:
        return "(" + a + " && " + b + ")";
      case ir::BinaryKind::Or:
      case ir::BinaryKind::Add:
      case ir::BinaryKind::Max:
        return "(" + a + " || " + b + ")";
      case ir::BinaryKind::Xor:
      case ir::BinaryKind::Sub:
        return "(" + a + " != " + b + ")";
      case ir::BinaryKind::Div:
        return a;
      case ir::BinaryKind::Rem:
        return "false";
      default:
        TS_INTERNAL_ASSERT(false) << "shift or umulhi on booleans";
    }
  }
  switch (k) {
    case ir::BinaryKind::Add:
      return "((" + rt + ")(" + a + " + " + b + "))";
    case ir::BinaryKind::Sub:
      return "((" + rt + ")(" + a + " - " + b + "))";
    case ir::BinaryKind::Mul:
      return "((" + rt + ")(" + a + " * " + b + "))";
    case ir::BinaryKind::Div:
      return "trt::idiv<" + rt + ">(" + a + ", " + b + ")";
    case ir::BinaryKind::Rem:
      return "trt::irem<" + rt + ">(" + a + ", " + b + ")";
    case ir::BinaryKind::Max:
      return "(" + a + " > " + b + " ? " + a + " : " + b + ")";
    case ir::BinaryKind::Min:
      return "(" + a + " < " + b + " ? " + a + " : " + b + ")";
    case ir::BinaryKind::And:
      return "((" + rt + ")(" + a + " & " + b + "))";
    case ir::BinaryKind::Or:
      return "((" + rt + ")(" + a + " | " + b + "))";
    case ir::BinaryKind::Xor:
      return "((" + rt + ")(" + a + " ^ " + b + "))";
    case ir::BinaryKind::Shl:
      return "trt::shl<" + rt + ">(" + a + ", " + b + ")";
    case ir::BinaryKind::Shr:
      return "trt::shr<" + rt + ">(" + a + ", " + b + ")";
    case ir::BinaryKind::UMulHi:
      return "trt::umulhi<" + rt + ">(" + a + ", " + b + ")";
    case ir::BinaryKind::DivRn:
      return "trt::idiv<" + rt + ">(" + a + ", " + b + ")";
    default:
      TS_INTERNAL_ASSERT(false) << ir::binary_name(k) << " of integers";
  }
  return a;
}

std::string unary(ir::UnaryKind k, const Type& t, const std::string& a) {
  const DType d = t.elem;
  const std::string rt = register_type(d);
  const bool fl = is_floating_point(d);
  switch (k) {
    case ir::UnaryKind::Neg:
      return fl ? "(-" + a + ")" : "((" + rt + ")(-" + a + "))";
    case ir::UnaryKind::Not:
      return d == DType::Bool ? "(!" + a + ")" : "((" + rt + ")(~" + a + "))";
    case ir::UnaryKind::Abs:
      if (fl) return "trt::abs(" + a + ")";
      if (!is_signed(d)) return a;
      return "(" + a + " < 0 ? (" + rt + ")(-" + a + ") : " + a + ")";
    default:
      break;
  }
  return round_to(d, std::string("trt::") + ir::unary_traits(k).math + "(" + a + ")");
}

const char* compare_operator(ir::CmpKind k) {
  static constexpr const char* kOps[] = {"==", "!=", "<", "<=", ">", ">="};
  return kOps[static_cast<int>(k)];
}

}  // namespace tessera::backend::cfamily
