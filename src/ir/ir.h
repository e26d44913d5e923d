/** \file
 * The tile IR (DESIGN.md D1, D3): what a traced kernel becomes, and what every backend consumes.
 *
 * Plain data in SSA form. A `Function` owns a table of values (each with a `Type`) and ops; ops
 * live in regions (the function body, loop bodies, branches). A value is defined by an op result
 * or a region argument. Types follow Triton: a scalar, a pointer to an element type, or a block
 * (tile) of either with a static shape whose dimensions are powers of two. Ops keep the user's
 * source line for diagnostics.
 */
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/detail/small_vector.h"
#include "tessera/dtype.h"
#include "tessera/error.h"

namespace tessera::ir {

/** The type of a value: element dtype, pointer-ness and block shape (empty for scalars). */
struct Type {
  DType elem = DType::Int32;
  bool ptr = false;
  SmallVector<int64_t, 4> shape;

  static Type scalar(DType d) { return Type{d, false, {}}; }
  static Type pointer(DType d) { return Type{d, true, {}}; }
  Type with_shape(ArrayRef<int64_t> s) const {
    Type t = *this;
    t.shape = SmallVector<int64_t, 4>(s);
    return t;
  }
  Type scalar_type() const { return Type{elem, ptr, {}}; }

  bool is_scalar() const { return shape.empty(); }
  bool is_block() const { return !shape.empty(); }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t numel() const;
  bool is_float() const { return !ptr && is_floating_point(elem); }
  bool is_int() const { return !ptr && is_integral(elem); }
  bool is_bool() const { return !ptr && elem == DType::Bool; }

  bool operator==(const Type& o) const {
    return elem == o.elem && ptr == o.ptr && shape == o.shape;
  }
  bool operator!=(const Type& o) const { return !(*this == o); }
  /** "fp32", "*fp16", "<4x8 x fp32>", "<128 x *fp32>". */
  std::string str() const;
};

/** Triton's short element names: i1, i8, u8, fp16, bf16, fp32, fp8e4nv, ... */
const char* elem_name(DType d);

using ValueId = int32_t;
inline constexpr ValueId kNoValue = -1;

enum class OpKind : uint8_t {
  Constant,     ///< attrs: ival (ints, bools) or fval (floats); a block type is a splat
  ProgramId,    ///< attr: axis
  NumPrograms,  ///< attr: axis
  Arange,       ///< attrs: start, end; result <end-start x i32>
  Splat,        ///< scalar -> block
  Broadcast,    ///< block -> block of larger shape (size-1 dims stretched)
  ExpandDims,   ///< attr: axis; inserts a size-1 dim
  Binary,       ///< sub: BinaryKind; operands of the result's type
  Compare,      ///< sub: CmpKind; result i1
  Unary,        ///< sub: UnaryKind
  Cast,         ///< element type conversion
  Select,       ///< cond ? a : b
  AddPtr,       ///< pointer + integer offset (in elements)
  Load,         ///< ptr [, mask [, other]]
  Store,        ///< ptr, value [, mask]
  Reduce,       ///< sub: ReduceKind; attr: axis
  For,     ///< operands: lb, ub, step, inits...; region args: iv, carried...; ival: LoopOptions
  If,      ///< operands: cond; regions: then, else
  Yield,   ///< terminator of For/If regions
  Fma,     ///< a * b + c rounded once (floats); operands of the result's type
  Dot,     ///< a [M, K] @ b [K, N] + acc [M, N]; sub: DotPrecision; result: acc's type
  Atomic,  ///< sub: AtomicKind; ival: MemOrder; operands: ptr, val [, mask]; result: the old values
  AtomicCas,  ///< ival: MemOrder; operands: ptr, cmp, val; result: the old values
  While,      ///< operands: inits; regions: cond (args: carried; yields one i1 scalar) and body
              ///< (args: carried; yields the carried values); results: the carried values
  Permute,    ///< ival: the permutation, 4 bits per output dim (output dim d is input dim perm[d])
  Reshape,    ///< row-major reinterpretation to the result's shape
  Join,       ///< two operands of one shape -> that shape + [2] (a new last dim)
  Extract,    ///< ival: 0 or 1; the operand's last dim (of size 2) removed at that index (split)
  Cat,        ///< two operands of one shape -> dim 0 doubled
  Flip,       ///< ival: the axis; the operand's elements in reverse order along it
  Gather,     ///< operands: src, index (integers, src's rank); ival: axis; result (index's shape):
              ///< src at the result's coordinates with the axis one replaced by index's element
  Bitcast,    ///< the same bits as another element type of the same width
  Extern,     ///< tl::extern_elementwise: a user's function of the operands' elements (scalars of
              ///< the operands' types), result of their shape; text: pack_extern (library, symbol,
              ///< the definitions per backend); sub 1: impure (never merged, moved or dropped)
  ReduceFn,   ///< tl.reduce with a combine function: operands: N tiles of one shape; ival: axis;
              ///< region: args a_1..a_N, b_1..b_N (scalars), yields N; results: N tiles without the
              ///< axis
  ScanFn,  ///< tl.associative_scan: as ReduceFn, results of the operands' shape; sub: 1 = reverse
  Assert,  ///< device_assert: operands: cond (i1); text: the message; sub 1: a hint's check (a
           ///< false hint is reported as a warning, not a failure); checked by the interpreter
  Print,   ///< device_print: operands: values; text: the prefix
};

enum class AtomicKind : uint8_t { Add, Max, Min, And, Or, Xor, Xchg };
enum class MemOrder : uint8_t { Relaxed, Acquire, Release, AcqRel };

/** How `Dot` treats float32 inputs: rounded to tf32 (Triton's default on NVIDIA GPUs), or exact
 * (ieee), or three tf32 products per term (tf32x3, trt::fma_tf32x3: within ~2^-21 of ieee). */
enum class DotPrecision : uint8_t { TF32, TF32x3, IEEE };

/** The tile IR's binary float math functions (floats only): the enumerator and the name, which is
 * the IR mnemonic and the runtime function every backend calls (`trt::pow(a, b)`). Pow, Atan2,
 * Hypot, Remainder (IEEE: a - b * rint(a / b)) and Nextafter are the platform math library's
 * (glibc / CUDA); Ldexp takes the exponent converted to the float type (exact below 2^24);
 * FastPow and FastDivide are CUDA's fast intrinsics on GPUs and the accurate functions elsewhere.
 */
#define TESSERA_IR_MATH_BINARY(X) \
  X(Pow, pow)                     \
  X(Atan2, atan2)                 \
  X(Hypot, hypot)                 \
  X(Remainder, remainder)         \
  X(Nextafter, nextafter)         \
  X(Ldexp, ldexp)                 \
  X(FastPow, fast_pow)            \
  X(FastDivide, fast_dividef)

/** Shl/Shr: integers; a shift by a negative amount or by the width or more gives 0 (Shr of a
 * negative signed value: -1). UMulHi: the high half of the unsigned product. DivRn: float
 * division correctly rounded (never rewritten as a multiplication by a reciprocal). */
enum class BinaryKind : uint8_t {
  Add,
  Sub,
  Mul,
  Div,
  Rem,
  Max,
  Min,
  And,
  Or,
  Xor,
  Shl,
  Shr,
  UMulHi,
  DivRn,
#define TESSERA_IR_ENUMERATOR(kind, fn) kind,
  TESSERA_IR_MATH_BINARY(TESSERA_IR_ENUMERATOR)
#undef TESSERA_IR_ENUMERATOR
};
/** Whether a binary kind is one of TESSERA_IR_MATH_BINARY (floats only, `trt::<name>(a, b)`). */
constexpr bool is_math_binary(BinaryKind k) {
  return k > BinaryKind::DivRn;
}
enum class CmpKind : uint8_t { EQ, NE, LT, LE, GT, GE };
/** The tile IR's float math functions, one entry each: the enumerator and the function's name,
 * which is its IR mnemonic and the runtime function every backend calls (`trt::exp`, declared in
 * each backend's runtime header and used by the interpreter). docs/adding-an-op.md adds one. */
#define TESSERA_IR_MATH_FUNCTIONS(X) \
  X(Exp, exp)                        \
  X(Log, log)                        \
  X(Sqrt, sqrt)                      \
  X(Rsqrt, rsqrt)                    \
  X(Sin, sin)                        \
  X(Cos, cos)                        \
  X(Exp2, exp2)                      \
  X(Log2, log2)                      \
  X(Floor, floor)                    \
  X(Ceil, ceil)                      \
  X(Erf, erf)                        \
  X(Tanh, tanh)                      \
  X(Asin, asin)                      \
  X(Acos, acos)                      \
  X(Atan, atan)                      \
  X(Sinh, sinh)                      \
  X(Cosh, cosh)                      \
  X(Asinh, asinh)                    \
  X(Acosh, acosh)                    \
  X(Atanh, atanh)                    \
  X(Expm1, expm1)                    \
  X(Log1p, log1p)                    \
  X(Log10, log10)                    \
  X(Cbrt, cbrt)                      \
  X(Erfc, erfc)                      \
  X(Trunc, trunc)                    \
  X(Round, round)                    \
  X(Rint, rint)                      \
  X(Tan, tan)                        \
  X(Lgamma, lgamma)                  \
  X(Tgamma, tgamma)                  \
  X(Nearbyint, nearbyint)            \
  X(Exp10, exp10)                    \
  X(Erfinv, erfinv)                  \
  X(FastExp, fast_exp)               \
  X(FastExp10, fast_exp10)           \
  X(FastLog, fast_log)               \
  X(FastLog2, fast_log2)             \
  X(FastLog10, fast_log10)           \
  X(FastSin, fast_sin)               \
  X(FastCos, fast_cos)               \
  X(FastTan, fast_tan)               \
  X(FastExp2, fast_exp2)

/** Neg, Not and Abs apply to integers too; the rest are TESSERA_IR_MATH_FUNCTIONS (floats). */
enum class UnaryKind : uint8_t {
  Neg,
  Not,
  Abs,
#define TESSERA_IR_ENUMERATOR(kind, fn) kind,
  TESSERA_IR_MATH_FUNCTIONS(TESSERA_IR_ENUMERATOR)
#undef TESSERA_IR_ENUMERATOR
};
/** ArgMax/ArgMin give the int32 index along the axis: the first of equal values; a NaN counts as
 * the largest (ArgMax) or the smallest (ArgMin) value, as torch.argmax/argmin. Xor: integers. */
enum class ReduceKind : uint8_t { Sum, Max, Min, Xor, ArgMax, ArgMin };

/** A For op's options (`tl::range(..., {.num_stages = 3, ...})`), packed into its `ival`:
 * honoured where they apply (the unroll factor on every backend), recorded for the GPU's
 * pipelining otherwise. */
struct LoopOptions {
  int num_stages = 0;          ///< 0: the kernel's
  int loop_unroll_factor = 0;  ///< 0: the compiler's choice
  bool flatten = false;
  bool warp_specialize = false;
  bool disallow_acc_multi_buffer = false;
  int64_t pack() const {
    return static_cast<int64_t>(num_stages & 0xffff) |
           (static_cast<int64_t>(loop_unroll_factor & 0xffff) << 16) |
           (static_cast<int64_t>(flatten) << 32) | (static_cast<int64_t>(warp_specialize) << 33) |
           (static_cast<int64_t>(disallow_acc_multi_buffer) << 34);
  }
  static LoopOptions unpack(int64_t v) {
    LoopOptions o;
    o.num_stages = static_cast<int>(v & 0xffff);
    o.loop_unroll_factor = static_cast<int>((v >> 16) & 0xffff);
    o.flatten = (v >> 32) & 1;
    o.warp_specialize = (v >> 33) & 1;
    o.disallow_acc_multi_buffer = (v >> 34) & 1;
    return o;
  }
};

/** An Extern op's text: a library of user functions (their definitions as C++ for the CPU and as
 * CUDA for GPUs, or precompiled objects to link; a backend with neither refuses the kernel) and
 * the function called. Packed with ASCII unit separators, which none of the parts may contain.
 * `cpu_objects` / `cuda_objects`: one line per file, "<sha256 of its bytes> <absolute path>". */
struct ExternCall {
  std::string library, symbol, cpu_source, cuda_source, cpu_objects, cuda_objects;
};
std::string pack_extern(const ExternCall& e);
ExternCall unpack_extern(const std::string& text);

/** Names of kinds and sub-kinds (ir/op_traits.h has the rest of what each one is). */
const char* op_name(OpKind k);
const char* binary_name(BinaryKind k);
const char* cmp_name(CmpKind k);
const char* unary_name(UnaryKind k);
const char* reduce_name(ReduceKind k);

struct Op;

/** A straight-line list of ops with arguments (one block per region). */
struct Region {
  std::vector<ValueId> args;
  std::vector<Op*> ops;
};

struct Op {
  OpKind kind;
  uint8_t sub = 0;    ///< BinaryKind / CmpKind / UnaryKind / ReduceKind
  int64_t ival = 0;   ///< integer constant, axis, arange start
  int64_t ival2 = 0;  ///< arange end
  double fval = 0;    ///< float constant
  std::string text;   ///< Assert's message, Print's prefix
  std::vector<ValueId> operands;
  std::vector<ValueId> results;
  std::vector<Region> regions;
  SourceLoc loc;

  ValueId result() const { return results.at(0); }
  bool has_side_effects() const;
};

/** A kernel parameter's role in the signature. */
enum class ParamKind : uint8_t { Pointer, Int, Float, Constexpr };

struct Param {
  std::string name;
  ParamKind kind;
  ValueId value = kNoValue;  ///< the body's argument (kNoValue for constexprs and folded ints)
  bool divisible_by_16 = false;
};

struct ValueInfo {
  Type type;
  Op* def = nullptr;  ///< null for region arguments
  std::string name;   ///< parameter or user-visible name, for printing
};

/** A kernel's launch attributes: part of its specialization, they reach code generation (the CPU
 * backend records them; the CUDA backend sizes blocks, pipelines and registers by them). */
struct LaunchAttributes {
  int64_t num_warps = 4;
  int64_t num_stages = 3;
  int64_t maxnreg = 0;  ///< a per-thread register limit; 0 for none
  std::string target;   ///< the backend's target key
};

class Function {
 public:
  std::string name;
  std::vector<Param> params;
  Region body;
  LaunchAttributes attrs;

  ValueId new_value(Type t, Op* def = nullptr, std::string name = "");
  const Type& type(ValueId v) const { return values_.at(static_cast<size_t>(v)).type; }
  ValueInfo& info(ValueId v) { return values_.at(static_cast<size_t>(v)); }
  const ValueInfo& info(ValueId v) const { return values_.at(static_cast<size_t>(v)); }
  Op* def(ValueId v) const { return values_.at(static_cast<size_t>(v)).def; }
  size_t num_values() const { return values_.size(); }

  /** A new op owned by this function (not yet placed in a region). */
  Op* new_op(OpKind kind);
  /** The constant value of `v` when it is defined by a Constant op. */
  const Op* constant(ValueId v) const;

 private:
  std::vector<ValueInfo> values_;
  std::vector<std::unique_ptr<Op>> ops_;
};

/** Visits every op, depth first, in program order. */
template <class F>
void walk(Region& r, F&& f) {
  for (Op* op : r.ops) {
    f(op);
    for (auto& sub : op->regions) walk(sub, f);
  }
}
template <class F>
void walk(const Region& r, F&& f) {
  for (const Op* op : r.ops) {
    f(op);
    for (const auto& sub : op->regions) walk(sub, f);
  }
}

/** Prints the function as text (`TESSERA_DUMP=ir`); without the launch attributes when
 * `attributes` is false (what the code itself is, for backends that ignore them). */
std::string print(const Function& f, bool attributes = true);

/** Checks internal consistency (types, dominance, terminators); an InternalError on failure. */
void verify(const Function& f);
/** The same checks for a function read from text (ir::parse): a ValueError on failure. */
void verify_parsed(const Function& f);

}  // namespace tessera::ir
