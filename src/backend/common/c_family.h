/** \file
 * C expressions for the tile runtime's scalar semantics, shared by the C++-family emitters (the
 * CPU backend's C++; the CUDA backend's CUDA C++): C types of IR types, literals, conversions
 * between storage and register values, casts, bit casts, and the arithmetic of binary, unary and
 * reduction ops. The functions they call (`trt::half_to_float`, `trt::fmax_num`, `trt::exp`, ...)
 * are declared by every backend's runtime header with the same meaning.
 */
#pragma once

#include <string>

#include "ir/ir.h"

namespace tessera::backend::cfamily {

/** The C type an element is stored as in memory (narrow floats: their bits). */
const char* storage_type(DType d);
/** fp16, bf16 and the fp8 types: computed in float registers. */
bool narrow_float(DType d);
/** The C type a value of element type `d` is computed in. */
const char* register_type(DType d);
/** A value's C type: a pointer to the storage type, or the register type. */
std::string type_str(const ir::Type& t);
/** A stored element `e` as a register value, and back. */
std::string load_conv(DType d, const std::string& e);
std::string store_conv(DType d, const std::string& e);
/** A float register rounded to a narrow float type's precision (others: unchanged). */
std::string round_to(DType d, const std::string& e);
/** Exact literals: hexadecimal floats, typed integers. */
std::string float_literal(double v, bool single);
std::string int_literal(int64_t v, DType d);
/** Triton's conversion of `e` from `src`'s element type to `dst`'s. */
std::string cast_expr(const ir::Type& src, const ir::Type& dst, const std::string& e);
/** A reduction's identity, and one combining step (`vec`: lane values, no narrowing cast). */
std::string reduce_init(ir::ReduceKind k, const ir::Type& t);
std::string reduce_combine(ir::ReduceKind k, const ir::Type& t, const std::string& a,
                           const std::string& b, bool vec = false);
/** A register value's bits as an unsigned integer of its width, and back. */
std::string to_bits(DType d, const std::string& e);
std::string from_bits(DType d, const std::string& b);
/** The binary and unary ops of the IR on register values of type `t`. */
std::string binary(ir::BinaryKind k, const ir::Type& t, const std::string& a, const std::string& b);
std::string unary(ir::UnaryKind k, const ir::Type& t, const std::string& a);
/** A comparison's C operator. */
const char* compare_operator(ir::CmpKind k);

/** Index expressions as C text, for ir/index_map.h's maps (`operand_index`). */
struct CIndexAlgebra {
  using Index = std::string;
  Index zero() const { return "0"; }
  Index constant(int64_t c) const { return std::to_string(c); }
  Index mul_add(const Index& acc, int64_t n, const Index& i) const {
    return "(" + acc + " * " + std::to_string(n) + " + " + i + ")";
  }
  Index div_mod(const Index& flat, int64_t stride, int64_t n) const {
    return "((" + flat + " / " + std::to_string(stride) + ") % " + std::to_string(n) + ")";
  }
  Index minus(const Index& i, int64_t c) const { return "(" + i + " - " + std::to_string(c) + ")"; }
  Index reverse(const Index& i, int64_t n) const {
    return "(" + std::to_string(n - 1) + " - " + i + ")";
  }
};

}  // namespace tessera::backend::cfamily
