/** \file
 * The kernel language (DESIGN.md D1-D3): Triton's programming model and semantics in C++.
 *
 *     TL_JIT(add_kernel, tl::Ptr x, tl::Ptr y, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
 *       auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
 *       auto mask = offs < n;
 *       tl::store(out + offs, tl::load(x + offs, mask) + tl::load(y + offs, mask), mask);
 *     }
 *     add_kernel[{tl::cdiv(n, 1024)}](x, y, out, n, tl::meta("BLOCK", 1024));
 *
 * A launch binds the arguments (tensors become typed pointers), computes the specialization key
 * (dtypes, constexpr values, divisible-by-16 and equal-to-1 bits), and on a miss traces the body
 * with `Tile` handles into tile IR, optimizes it, generates C++ and compiles it (cached in memory
 * and on disk). The grid then runs on the thread pool.
 *
 * Semantics follow triton.language: broadcasting, Triton's type promotion (a scalar of a lower or
 * equal kind does not change a tile's type), C-style integer `/` and `%`, masks with `other`.
 * C++ control flow runs at trace time (it unrolls); runtime control flow is `tl::range` and
 * `tl::if_`, and values that change across iterations are `tl::Var`s. As in Triton, masks combine
 * with `&`, `|` and `~` (C++'s `&&`, `||` and `!` test constexprs at trace time). A grid lambda
 * written inline needs parentheses, `kernel[([&](const tl::Meta& m) {...})](...)`, because `[[`
 * starts an attribute in C++; a named lambda needs none.
 */
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/detail/function_ref.h"
#include "tessera/dtype.h"
#include "tessera/error.h"
#include "tessera/symint.h"
#include "tessera/tensor.h"

namespace tessera::tl {

using namespace tessera::dtypes;  // tl::float32, tl::int32, ...

class Tile;
class Var;
struct Operand;

/** A subscript entry for `x[{tl::_, tl::None}]` (Python's `x[:, None]`). */
enum class IndexSpec : uint8_t { All, NewAxis };
inline constexpr IndexSpec _ = IndexSpec::All;
inline constexpr IndexSpec None = IndexSpec::NewAxis;

/** A traced value: a scalar, a pointer, or a tile (block) of either. Immutable; copying copies
 * the handle. Assigning to a Tile declared outside the current `tl::range`/`tl::if_` region is
 * an error: such values are `tl::Var`s. */
class Tile {
 public:
  Tile();
  Tile(const Tile& o);
  Tile& operator=(const Tile& o);

  /** Element type (the pointee's for pointers). */
  DType dtype() const;
  bool is_ptr() const;
  std::vector<int64_t> shape() const;
  int64_t rank() const;
  bool is_constant() const;
  /** The value of a constant (a constexpr parameter, or arithmetic on constants). */
  int64_t int_value(TS_HERE) const;
  double float_value(TS_HERE) const;
  /** Trace-time truth of a constant (C++ `if`/`for` on constexprs); an error for runtime values. */
  explicit operator bool() const;

  /** The DType a dtype constexpr parameter holds (`tl::meta("DTYPE", tl::float16)`). */
  DType dtype_value(TS_HERE) const;

  /** Converts the element type (`x.to(tl::float32)`, or `x.to(DTYPE.dtype_value())`); a pointer
   * to `tl::int64`/`tl::uint64` gives its address. */
  Tile to(DType dtype, TS_HERE) const;
  /** An int64 address (or another pointer) as a pointer to `p`'s element type
   * (`addr.to(tl::pointer_type(tl::float16))`: pointer tables, as Triton's grouped GEMM). */
  Tile to(struct PointerType p, TS_HERE) const;
  /** `x[{tl::_, tl::None}]`: keep (`_`) or insert (`None`) dimensions. */
  Tile operator[](std::initializer_list<IndexSpec> index) const;

  /** Compound assignment rebinds the handle (`offs += BLOCK`), as in Python: allowed where a
   * plain assignment is (a Tile of the current region); loop-carried values are `tl::Var`s. */
  Tile& operator+=(const Operand& v);
  Tile& operator-=(const Operand& v);
  Tile& operator*=(const Operand& v);
  Tile& operator/=(const Operand& v);
  Tile& operator%=(const Operand& v);
  Tile& operator&=(const Operand& v);
  Tile& operator|=(const Operand& v);
  Tile& operator^=(const Operand& v);
  Tile& operator<<=(const Operand& v);
  Tile& operator>>=(const Operand& v);

  int32_t id() const { return id_; }

 private:
  friend struct Access;
  int32_t id_ = -1;
  uint32_t trace_ = 0;
  uint32_t scope_ = 0;
};

/** `tl::pointer_type(tl::float16)`: the target of a cast to a pointer. */
struct PointerType {
  DType elem;
};
inline PointerType pointer_type(DType elem) {
  return {elem};
}

/** Parameter handle types of a TL_JIT signature: each type declares its parameter's kind (a
 * pointer to a tensor's elements, an integer, a float, a constexpr). They are tiles in the body. */
struct Ptr : Tile {
  Ptr() = default;
  Ptr(const Tile& t) : Tile(t) {}  // NOLINT
  static constexpr int kParamKind = 0;
};
struct Int : Tile {
  Int() = default;
  Int(const Tile& t) : Tile(t) {}  // NOLINT
  static constexpr int kParamKind = 1;
};
struct Float : Tile {
  Float() = default;
  Float(const Tile& t) : Tile(t) {}  // NOLINT
  static constexpr int kParamKind = 2;
};
struct Const : Tile {
  Const() = default;
  Const(const Tile& t) : Tile(t) {}  // NOLINT
  static constexpr int kParamKind = 3;
};

/** An operand of a kernel-language function: a Tile, a Var, or a C++ number (a literal:
 * integers are i32 when they fit, else i64; floating literals are fp32; bools are i1). It also
 * records the caller's line, which errors and the IR keep. */
struct Operand {
  Operand(const Tile& t, SourceLoc loc = SourceLoc::current());  // NOLINT
  Operand(const Var& v, SourceLoc loc = SourceLoc::current());   // NOLINT
  template <class T>
  requires std::is_arithmetic_v<T> Operand(T v, SourceLoc loc = SourceLoc::current())
      : loc(loc) {  // NOLINT
    if constexpr (std::is_same_v<T, bool>)
      tile = literal_bool(v);
    else if constexpr (std::is_integral_v<T>)
      tile = literal_int(static_cast<int64_t>(v), std::is_unsigned_v<T> && sizeof(T) == 8);
    else
      tile = literal_float(static_cast<double>(v));
  }

  Tile tile;
  SourceLoc loc;

 private:
  static Tile literal_int(int64_t v, bool unsigned64);
  static Tile literal_float(double v);
  static Tile literal_bool(bool v);
};

/** A value that changes across a region (loop-carried or assigned in a branch). Not copyable, so
 * a lambda cannot capture a silent copy. */
class Var {
 public:
  Var(Operand init);  // NOLINT
  Var(const Tile& init, SourceLoc loc = SourceLoc::current())
      : Var(Operand(init, loc)) {}  // NOLINT
  template <class T>
  requires std::is_arithmetic_v<T> Var(T init, SourceLoc loc = SourceLoc::current())
      : Var(Operand(init, loc)) {}  // NOLINT
  Var(const Var&) = delete;
  Var& operator=(const Var&) = delete;
  Var& operator=(Operand value);
  Var& operator=(const Tile& value) { return *this = Operand(value, SourceLoc{}); }
  template <class T>
  requires std::is_arithmetic_v<T> Var& operator=(T value) {
    return *this = Operand(value, SourceLoc{});
  }
  /** The current value. */
  Tile get() const;
  operator Tile() const { return get(); }  // NOLINT

  // The Tile interface on the current value (no `tl::Tile(v)` wrapping needed).
  DType dtype() const { return get().dtype(); }
  bool is_ptr() const { return get().is_ptr(); }
  std::vector<int64_t> shape() const { return get().shape(); }
  int64_t rank() const { return get().rank(); }
  Tile to(DType dtype, SourceLoc loc = SourceLoc::current()) const { return get().to(dtype, loc); }
  Tile operator[](std::initializer_list<IndexSpec> index) const { return get()[index]; }

  /** Compound assignment records a new value (`acc += tl::dot(a, b)`, `ptrs += BK * stride`). */
  Var& operator+=(const Operand& v);
  Var& operator-=(const Operand& v);
  Var& operator*=(const Operand& v);
  Var& operator/=(const Operand& v);
  Var& operator%=(const Operand& v);
  Var& operator&=(const Operand& v);
  Var& operator|=(const Operand& v);
  Var& operator^=(const Operand& v);
  Var& operator<<=(const Operand& v);
  Var& operator>>=(const Operand& v);

 private:
  int32_t index_;
  uint32_t trace_;
};

// ---- program, creation --------------------------------------------------------------------------
/** The index of this program along `axis` (0, 1, 2) of the launch grid. */
Tile program_id(int axis, TS_HERE);
/** The grid's size along `axis`. */
Tile num_programs(int axis, TS_HERE);
/** [start, end) as i32; end - start must be a power of 2 and both constexprs. */
Tile arange(Operand start, Operand end, TS_HERE);
Tile zeros(std::initializer_list<Operand> shape, DType dtype, TS_HERE);
Tile full(std::initializer_list<Operand> shape, Operand value, DType dtype, TS_HERE);
Tile cast(Operand x, DType dtype, TS_HERE);
/** Hints, as Triton's, one value per dimension (a single value for scalars and 1-D tiles):
 * `multiple_of`: along dimension d, the first value of every run of consecutive values
 * (x, x+1, ...) is a multiple of n[d] (so `multiple_of(pid * B + arange(0, B), B)` holds, and a
 * tile with no runs longer than 1 has every element a multiple); `max_contiguous`: along
 * dimension d, each aligned group of n[d] elements holds consecutive values. They return `x`; the
 * debug mode and the interpreter check them (a false hint is a device_assert failure). */
Tile multiple_of(Operand x, Operand n, TS_HERE);
Tile multiple_of(Operand x, std::initializer_list<Operand> n, TS_HERE);
Tile max_contiguous(Operand x, Operand n, TS_HERE);
Tile max_contiguous(Operand x, std::initializer_list<Operand> n, TS_HERE);
/** `tl.max_constancy`: along dimension d, each aligned group of n[d] elements holds one value.
 * Checked like the other hints (a warning when false, in the checked mode and the interpreter). */
Tile max_constancy(Operand x, Operand n, TS_HERE);
Tile max_constancy(Operand x, std::initializer_list<Operand> n, TS_HERE);
/** `tl.assume(cond)`: a promise to the compiler that `cond` holds (every lane). Nothing relies on
 * it yet; the checked mode and the interpreter evaluate it and warn when it is false, as for a
 * false hint. A condition false when traced is a CompileError. */
void assume(Operand cond, TS_HERE);
/** Inserts a size-1 dimension at `axis` (negative from the end). */
Tile expand_dims(Operand x, int axis, TS_HERE);
/** Broadcasts to `shape` (dims of size 1 stretch). */
Tile broadcast_to(Operand x, std::initializer_list<Operand> shape, TS_HERE);
Tile zeros_like(Operand x, TS_HERE);
/** Row-major reshape (the element count must match). `can_reorder` is accepted as Triton's. */
Tile reshape(Operand x, std::initializer_list<Operand> shape, bool can_reorder = false, TS_HERE);
/** Output dim d is input dim dims[d]; `trans` reverses all dims. */
Tile permute(Operand x, std::initializer_list<int> dims, TS_HERE);
Tile trans(Operand x, TS_HERE);
/** Stacks two tiles (broadcast together) along a new last dimension of size 2. */
Tile join(Operand a, Operand b, TS_HERE);
/** The inverse of join: the two halves of a last dimension of size 2. */
std::pair<Tile, Tile> split(Operand x, TS_HERE);
/** Concatenates along dim 0 (tiles of one shape; the order is kept). */
Tile cat(Operand a, Operand b, bool can_reorder = false, TS_HERE);
/** `tl.gather(src, index, axis)`: the result has index's shape; element i is src at i with its
 * `axis` coordinate replaced by index[i]. `index` is an integer tile of src's rank whose other
 * dimensions equal src's. An index outside [0, src.shape[axis]) reads the nearest element on
 * compiled backends (Triton leaves it undefined) and is an error in the interpreter. */
Tile gather(Operand src, Operand index, int axis, TS_HERE);
/** `x` in reverse order along `dim` (the last by default; `tl.flip`): an index remapping. */
Tile flip(Operand x, int dim = -1, TS_HERE);
/** A 1-D view of every element, row-major (`can_reorder` accepted as Triton's). */
Tile ravel(Operand x, bool can_reorder = false, TS_HERE);
/** Interleaves two tiles along their last dimension: [a0, b0, a1, b1, ...] (`tl.interleave`). */
Tile interleave(Operand a, Operand b, TS_HERE);
/** `tl.softmax` along `axis` (the last by default): exp(x - max) / sum, in x's type. */
Tile softmax(Operand x, int axis = -1, bool keep_dims = true, TS_HERE);
/** `tl.swizzle2d`: maps (i, j) of a size_i x size_j grid to groups of size_g rows traversed
 * column by column (the grouped launch order of Triton's matmul tutorial). */
std::pair<Tile, Tile> swizzle2d(Operand i, Operand j, Operand size_i, Operand size_j,
                                Operand size_g, TS_HERE);
/** `tl.histogram`: an int32 tile of `num_bins` counts of the values of integer tile `x` in
 * [0, num_bins) (values outside are not counted; `mask` false lanes neither). */
Tile histogram(Operand x, int64_t num_bins, std::optional<Operand> mask = std::nullopt, TS_HERE);
/** `tl.sort`: x sorted along its last dimension (a power of two), ascending or descending, by a
 * bitonic network of selects, so every value keeps its bits. NaNs compare false with everything:
 * where they are, the order is unspecified (as Triton's). */
Tile sort(Operand x, int dim = -1, bool descending = false, TS_HERE);
/** `tl.topk`: the k largest values along the last dimension, largest first (k a power of two no
 * larger than that dimension); the result's last dimension is k. */
Tile topk(Operand x, int64_t k, int dim = -1, TS_HERE);
/** A library of the user's own element functions for `tl::extern_elementwise` (Triton's extern
 * libraries). Each backend takes its definitions either as source, compiled into every kernel that
 * calls them (`cpu_source`: C++; `cuda_source`: CUDA `__device__` functions), or precompiled
 * (Triton's `lib_path`), linked into every kernel that calls them:
 * - `cpu_objects`: object files, static archives or shared objects (`.o`, `.a`, `.so`) built with
 *   `-fPIC`, the functions with C linkage; a shared object is found at run time by its path.
 * - `cuda_objects`: relocatable device code (`nvcc -rdc=true` / `-dc`: `.o`, `.a`, `.cubin`,
 *   `.fatbin`, `.ptx`), linked by nvJitLink; LTO-IR (`nvcc -dc -dlto`, `.ltoir` or such an
 *   object) is optimized together with the kernel, so its functions inline. The functions are
 *   `extern "C" __device__`.
 * tessera declares each function called from its ExternSymbol (`extern "C"`, the C types of the
 * dtypes), and a kernel's cache key holds each file's SHA-256 (read when the kernel is traced).
 * A backend with neither source nor objects refuses the kernel with a CompileError naming the
 * function; the interpreter refuses every extern call. Source text is part of the kernel: keep it
 * fixed for a kernel's lifetime in a process. */
struct ExternLibrary {
  std::string name;
  std::string cpu_source;
  std::string cuda_source;
  std::vector<std::string> cpu_objects = {};
  std::vector<std::string> cuda_objects = {};
};
/** One overload of an extern function: its argument dtypes, the symbol to call and its result
 * dtype (an entry of Triton's `arg_type_symbol_dict`). Arguments and results are bool, integers,
 * float32 or float64 (convert narrower floats first). */
struct ExternSymbol {
  std::vector<DType> args;
  std::string symbol;
  DType result;
};
/** `tl.extern_elementwise`: calls, element by element, the overload of `symbols` whose argument
 * dtypes are the arguments' (tiles broadcast together; numbers are int32 / float32 literals).
 * An impure function (`is_pure = false`) is never merged with an equal call, moved or dropped. */
Tile extern_elementwise(const ExternLibrary& lib, std::initializer_list<Operand> args,
                        const std::vector<ExternSymbol>& symbols, bool is_pure = true, TS_HERE);
/** `tl.inline_asm_elementwise`: PTX run per element on CUDA, `constraints` as Triton's ("=r,r,r":
 * the output's registers, then each argument's; r: 32 bits, l: 64, h: 16, f: float32, d:
 * float64; a float in an integer register travels as its bits, and float16, bfloat16 and float8
 * arguments and results always do, as unsigned integers of their width). With `pack` > 1 (Triton's
 * registers), values narrower than 32 bits share a register, min(32 / bits, pack) side by side,
 * and wider ones take `pack` registers each, so the constraints list `pack / per_register`
 * registers for the output and for each argument. tessera runs the assembly once per element,
 * that element in every lane, and takes the first lane of the first output register: Triton's
 * results for assembly that works lane by lane, at up to `pack` times its instructions. The CPU
 * backend runs `cpu_body` instead, a C++ function body of one element of each argument `a0, a1,
 * ...` returning the result (empty: CPU kernels refuse it). */
Tile inline_asm_elementwise(std::string_view asm_text, std::string_view constraints,
                            std::initializer_list<Operand> args, DType dtype, bool is_pure = true,
                            int pack = 1, std::string_view cpu_body = {}, TS_HERE);
/** The same with several outputs (Triton's tuple `dtype`): a tile per dtype, the outputs'
 * registers first in the constraints, in order ("=r,=r,r,r": two outputs of one register each,
 * then the arguments'). `cpu_bodies` holds one C++ body per output (or none). Each output is its
 * own call of the assembly (identical pure statements the CUDA compiler may merge), so the
 * assembly must be pure. As in Triton, an output may share a register with an argument: read
 * every argument before writing an output (PTX temporaries in `{ .reg .b32 t; ... }` help). */
std::vector<Tile> inline_asm_elementwise(std::string_view asm_text, std::string_view constraints,
                                         std::initializer_list<Operand> args,
                                         const std::vector<DType>& dtypes, bool is_pure = true,
                                         int pack = 1,
                                         const std::vector<std::string>& cpu_bodies = {}, TS_HERE);
/** The same bits as another element type of the same width. */
Tile bitcast(Operand x, DType dtype, TS_HERE);

// ---- arithmetic (operators below), math
// ----------------------------------------------------------
Tile where(Operand cond, Operand a, Operand b, TS_HERE);
Tile maximum(Operand a, Operand b, TS_HERE);
Tile minimum(Operand a, Operand b, TS_HERE);
Tile abs(Operand x, TS_HERE);
Tile exp(Operand x, TS_HERE);
Tile log(Operand x, TS_HERE);
Tile sqrt(Operand x, TS_HERE);
Tile rsqrt(Operand x, TS_HERE);
Tile sin(Operand x, TS_HERE);
Tile cos(Operand x, TS_HERE);
Tile exp2(Operand x, TS_HERE);
Tile log2(Operand x, TS_HERE);
Tile floor(Operand x, TS_HERE);
Tile ceil(Operand x, TS_HERE);
Tile erf(Operand x, TS_HERE);
/** Triton's `libdevice.tanh`. */
Tile tanh(Operand x, TS_HERE);
/** Triton's libdevice binary functions, by the platform's math library (within its ulps):
 * `pow(a, b)`, `atan2(a, b)`, `hypot(a, b)` (one operand may be an integer, promoted). */
Tile pow(Operand a, Operand b, TS_HERE);
Tile atan2(Operand a, Operand b, TS_HERE);
Tile hypot(Operand a, Operand b, TS_HERE);
/** Exact on every backend (comparisons and bit operations): NaN, infinity and finiteness tests
 * and the sign bit (i1 tiles); `copysign(a, b)` (|a| with b's sign), `fmod(a, b)` (C's: the
 * float `%`), `fdim(a, b)` (a - b where a > b, else +0; NaN when either is). */
Tile isnan(Operand x, TS_HERE);
Tile isinf(Operand x, TS_HERE);
Tile isfinite(Operand x, TS_HERE);
Tile signbit(Operand x, TS_HERE);
Tile copysign(Operand a, Operand b, TS_HERE);
Tile fmod(Operand a, Operand b, TS_HERE);
Tile fdim(Operand a, Operand b, TS_HERE);
/** Triton's `tl.math` / libdevice functions computed by the platform's math library (glibc on the
 * CPU, CUDA's on GPUs; docs/kernels.md lists their ulps). `round` rounds halves away from zero,
 * `rint` to even, `trunc` toward zero. */
Tile asin(Operand x, TS_HERE);
Tile acos(Operand x, TS_HERE);
Tile atan(Operand x, TS_HERE);
Tile sinh(Operand x, TS_HERE);
Tile cosh(Operand x, TS_HERE);
Tile asinh(Operand x, TS_HERE);
Tile acosh(Operand x, TS_HERE);
Tile atanh(Operand x, TS_HERE);
Tile expm1(Operand x, TS_HERE);
Tile log1p(Operand x, TS_HERE);
Tile log10(Operand x, TS_HERE);
Tile cbrt(Operand x, TS_HERE);
Tile erfc(Operand x, TS_HERE);
Tile trunc(Operand x, TS_HERE);
Tile round(Operand x, TS_HERE);
Tile rint(Operand x, TS_HERE);
Tile tan(Operand x, TS_HERE);
Tile lgamma(Operand x, TS_HERE);
Tile tgamma(Operand x, TS_HERE);
/** As `rint` (halves to even). */
Tile nearbyint(Operand x, TS_HERE);
/** 10^x. */
Tile exp10(Operand x, TS_HERE);
/** The inverse of `erf` on (-1, 1): +-inf at +-1, NaN beyond. */
Tile erfinv(Operand x, TS_HERE);
/** IEEE remainder: a - b * n with n the integer nearest a / b (halves to even); exact. */
Tile remainder(Operand a, Operand b, TS_HERE);
/** The next representable value after `a` toward `b` (float32 and float64 only: a narrow type's
 * neighbour is not float32's). */
Tile nextafter(Operand a, Operand b, TS_HERE);
/** x * 2^n with one rounding, `n` an integer tile or number (libdevice's `ldexp`). */
Tile ldexp(Operand x, Operand n, TS_HERE);
/** The unbiased exponent of x as int32 (C's `ilogb`): floor(log2(|x|)) for finite nonzero x,
 * subnormals included; INT_MIN for 0 and NaN, INT_MAX for infinities. Exact on every backend. */
Tile ilogb(Operand x, TS_HERE);
/** C's `frexp`: {m, e} with x = m * 2^e, 0.5 <= |m| < 1 and e int32 for finite nonzero x;
 * {x, 0} for zeros, infinities and NaN. Exact on every backend. */
std::pair<Tile, Tile> frexp(Operand x, TS_HERE);
/** Triton's libdevice fast variants (`fast_expf`, ...): CUDA's fast intrinsics for float32 on
 * GPUs (`__expf`, `__sinf`, ..., with their documented, larger errors), the accurate functions on
 * the CPU, in the interpreter and for float64. */
Tile fast_exp(Operand x, TS_HERE);
/** 2^x as Triton's float32 `exp2` computes it on GPUs (`ex2.approx.f32`, about 2 ulp; attention
 * kernels' exponential); the accurate `exp2` elsewhere. */
Tile fast_exp2(Operand x, TS_HERE);
Tile fast_exp10(Operand x, TS_HERE);
Tile fast_log(Operand x, TS_HERE);
Tile fast_log2(Operand x, TS_HERE);
Tile fast_log10(Operand x, TS_HERE);
Tile fast_sin(Operand x, TS_HERE);
Tile fast_cos(Operand x, TS_HERE);
Tile fast_tan(Operand x, TS_HERE);
Tile fast_pow(Operand a, Operand b, TS_HERE);
Tile fast_dividef(Operand a, Operand b, TS_HERE);
/** 1 / (1 + exp(-x)). */
Tile sigmoid(Operand x, TS_HERE);
/** a * b + c with one rounding. */
Tile fma(Operand a, Operand b, Operand c, TS_HERE);
/** Correctly rounded division and square root (`/` on floats may multiply by a reciprocal, within
 * 1.5 ulp; `tl::sqrt` is correctly rounded already). */
Tile div_rn(Operand a, Operand b, TS_HERE);
Tile sqrt_rn(Operand x, TS_HERE);
/** The high half of the product of two integers taken as unsigned. */
Tile umulhi(Operand a, Operand b, TS_HERE);
/** minimum(maximum(x, lo), hi); with `propagate_nan`, a NaN in x gives NaN. */
Tile clamp(Operand x, Operand lo, Operand hi, bool propagate_nan = false, TS_HERE);
/** Ceiling division of integers (tiles or constexprs). */
Tile cdiv(Operand a, Operand b, TS_HERE);
/** `tl.dot`'s options: the output dtype (float32 for float inputs, float64 for float64, int32 for
 * int8; fp16/bf16 outputs accumulate in float32) and how float32 inputs are rounded: "tf32"
 * (Triton's default on GPUs: inputs rounded to 10 mantissa bits), "tf32x3" (three tf32 products
 * per term, the small ones first: near float32 accuracy) or "ieee" (exact float32 products). */
struct DotOptions {
  std::optional<DType> out_dtype;
  std::string input_precision = "tf32";
};
/** a [M, K] @ b [K, N] (+ acc [M, N]); every dimension at least 16. Each term is one fused
 * multiply-add, k ascending. */
Tile dot(Operand a, Operand b, std::optional<Operand> acc = std::nullopt, DotOptions options = {},
         TS_HERE);
/** `tl.dot_scaled`: the product of two blocks in OCP microscaling formats, as Triton's software
 * emulation computes it: each operand decoded and multiplied by its scales, upcast to bfloat16
 * (exact for e2m1 and fp8 elements times a power of two within range), then `tl::dot` with
 * float32 accumulation. Formats: "e2m1" (uint8, two fp4 values per byte packed along K, the first
 * in the low bits: lhs [M, K/2], rhs [K/2, N]), "e4m3", "e5m2" (uint8 or the float8 dtype), "bf16",
 * "fp16". Scales are e8m0 exponents in uint8 (2^(s-127); 255 is NaN unless `fast_math`), lhs
 * [M, K/32] and rhs [N, K/32], or none. Only K packing (`lhs_k_pack`, `rhs_k_pack` true). */
Tile dot_scaled(Operand lhs, std::optional<Operand> lhs_scale, std::string_view lhs_format,
                Operand rhs, std::optional<Operand> rhs_scale, std::string_view rhs_format,
                std::optional<Operand> acc = std::nullopt, bool fast_math = false,
                bool lhs_k_pack = true, bool rhs_k_pack = true, DType out_dtype = DType::Float32,
                TS_HERE);

/** Host-side ceiling division, for grids. */
namespace detail {
[[noreturn]] void cdiv_error(const SymInt& a, const SymInt& b, SourceLoc loc);
}
/** Ceiling division for grids, `(a + b - 1) // b` without overflow; `b` must be positive (a
 * ValueError naming the caller's line otherwise). */
inline int64_t cdiv(int64_t a, int64_t b, SourceLoc loc = SourceLoc::current()) {
  if (b <= 0) detail::cdiv_error(SymInt(a), SymInt(b), loc);
  return a / b + (a % b > 0);
}
inline SymInt cdiv(const SymInt& a, const SymInt& b, SourceLoc loc = SourceLoc::current()) {
  if (auto v = b.maybe_as_int(); v && *v <= 0) detail::cdiv_error(a, b, loc);
  return tessera::cdiv(a, b);
}
inline SymInt cdiv(const SymInt& a, int64_t b, SourceLoc loc = SourceLoc::current()) {
  return cdiv(a, SymInt(b), loc);
}
inline SymInt cdiv(int64_t a, const SymInt& b, SourceLoc loc = SourceLoc::current()) {
  return cdiv(SymInt(a), b, loc);
}

// ---- memory -----------------------------------------------------------------------------------
/** Loads from a pointer (tile); masked-off elements read `other` (0 when absent). */
Tile load(Operand ptr, TS_HERE);
Tile load(Operand ptr, Operand mask, TS_HERE);
Tile load(Operand ptr, Operand mask, Operand other, TS_HERE);
/** Stores `value` (cast to the pointee type); masked-off elements are not written. */
void store(Operand ptr, Operand value, TS_HERE);
void store(Operand ptr, Operand value, Operand mask, TS_HERE);

// ---- block pointers and tensor descriptors ------------------------------------------------------
/** `tl.make_block_ptr`: a `block_shape` window at `offsets` into a tensor of `shape` and `strides`
 * (in elements) whose first element is at `base`. Nothing is read when it is made; `tl::load` and
 * `tl::store` through it compute every element's address, and mask the dimensions listed in their
 * `boundary_check` against [0, shape). A loop-carried block pointer is assigned like a `tl::Var`
 * (`p = tl::advance(p, {0, BLOCK_K})` inside `tl::range`); like a Var it is not copyable. `order`
 * (the memory order of the dimensions, fastest last as in Triton's `(1, 0)`) must be a
 * permutation of the dimensions; the CUDA backend will use it for TMA. */
class BlockPtr {
 public:
  BlockPtr(const BlockPtr&) = delete;
  BlockPtr(BlockPtr&&) noexcept;
  /** Records `o` as this block pointer's new value (base, shape, strides and offsets; the block
   * shape and element type must be the same). */
  BlockPtr& operator=(const BlockPtr& o);
  ~BlockPtr();

  int64_t rank() const { return static_cast<int64_t>(block_.size()); }
  const std::vector<int64_t>& block_shape() const { return block_; }
  const std::vector<int>& order() const { return order_; }
  DType dtype() const;

  // The current components (tiles of the trace).
  Tile base() const;
  Tile shape(int64_t d) const;
  Tile stride(int64_t d) const;
  Tile offset(int64_t d) const;

 private:
  friend struct BlockPtrAccess;
  BlockPtr() = default;
  std::vector<std::unique_ptr<Var>> parts_;  // base, then shape, strides and offsets per dim
  std::vector<int64_t> block_;
  std::vector<int> order_;
};
BlockPtr make_block_ptr(Operand base, std::initializer_list<Operand> shape,
                        std::initializer_list<Operand> strides,
                        std::initializer_list<Operand> offsets,
                        std::initializer_list<int64_t> block_shape,
                        std::initializer_list<int> order, TS_HERE);
/** The same block pointer moved by `offsets` (one per dimension). */
BlockPtr advance(const BlockPtr& p, std::initializer_list<Operand> offsets, TS_HERE);
/** The block at `p`; the dimensions in `boundary_check` are masked against the tensor's shape, and
 * masked elements read `padding_option`'s value: "zero" (also for "", where Triton leaves them
 * undefined) or "nan" (floating types). Unchecked dimensions must be in bounds. */
Tile load(const BlockPtr& p, std::initializer_list<int> boundary_check = {},
          std::string_view padding_option = "", TS_HERE);
/** Stores `value` (the block's shape, cast to the element type) at `p`; elements outside the
 * dimensions in `boundary_check` are not written. */
void store(const BlockPtr& p, Operand value, std::initializer_list<int> boundary_check = {},
           TS_HERE);

/** `tl.make_tensor_descriptor`: a tensor of `shape` and `strides` at `base` read and written in
 * blocks of `block_shape` (1 to 5 dimensions). Loads read elements outside the tensor as zero (or
 * NaN with `padding_option` "nan"); stores skip them. As Triton's (TMA's rules), the last
 * dimension must be contiguous (stride 1: a constant stride is checked when traced, a runtime
 * one by the checked mode and the interpreter, as are a 16-byte aligned base and leading strides
 * of whole 16-byte units). */
class TensorDescriptor {
 public:
  /** The block at element `offsets` (one per dimension). */
  Tile load(std::initializer_list<Operand> offsets, TS_HERE) const;
  void store(std::initializer_list<Operand> offsets, Operand value, TS_HERE) const;
  const std::vector<int64_t>& block_shape() const { return block_; }
  DType dtype() const { return base_.dtype(); }

 private:
  friend struct BlockPtrAccess;
  Tile base_;
  std::vector<Tile> shape_, strides_;
  std::vector<int64_t> block_;
  bool nan_padding_ = false;
};
TensorDescriptor make_tensor_descriptor(Operand base, std::initializer_list<Operand> shape,
                                        std::initializer_list<Operand> strides,
                                        std::initializer_list<int64_t> block_shape,
                                        std::string_view padding_option = "zero", TS_HERE);

// ---- atomics (Triton's: each returns the old values; a masked-off lane does nothing, gives 0) --
struct AtomicOptions {
  std::string sem = "acq_rel";  ///< "acq_rel", "acquire", "release", "relaxed"
  std::string scope = "gpu";    ///< "gpu", "cta", "sys" (one coherent memory on the CPU)
};
Tile atomic_add(Operand ptr, Operand val, std::optional<Operand> mask = std::nullopt,
                AtomicOptions o = {}, TS_HERE);
Tile atomic_max(Operand ptr, Operand val, std::optional<Operand> mask = std::nullopt,
                AtomicOptions o = {}, TS_HERE);
Tile atomic_min(Operand ptr, Operand val, std::optional<Operand> mask = std::nullopt,
                AtomicOptions o = {}, TS_HERE);
Tile atomic_and(Operand ptr, Operand val, std::optional<Operand> mask = std::nullopt,
                AtomicOptions o = {}, TS_HERE);
Tile atomic_or(Operand ptr, Operand val, std::optional<Operand> mask = std::nullopt,
               AtomicOptions o = {}, TS_HERE);
Tile atomic_xor(Operand ptr, Operand val, std::optional<Operand> mask = std::nullopt,
                AtomicOptions o = {}, TS_HERE);
Tile atomic_xchg(Operand ptr, Operand val, std::optional<Operand> mask = std::nullopt,
                 AtomicOptions o = {}, TS_HERE);
/** Stores `val` where `*ptr == cmp` (compared bitwise); returns the old values. */
Tile atomic_cas(Operand ptr, Operand cmp, Operand val, AtomicOptions o = {}, TS_HERE);

// ---- assertions and printing --------------------------------------------------------------------
/** A trace-time check of a constexpr condition (`tl.static_assert`; `static_assert` is a C++
 * keyword): a CompileError with `message` and the caller's line when it does not hold. */
void static_assert_(Operand cond, std::string_view message = "", TS_HERE);
/** A run-time check, active in the debug mode and the interpreter (as Triton's, which checks only
 * under TRITON_DEBUG): failing lanes are reported with kernel, line, program and lane, and the
 * launch then throws a RuntimeError. Kernels compiled without TESSERA_DEBUG skip it. */
void device_assert(Operand cond, std::string_view message = "", TS_HERE);
/** Prints every element, one line each: `pid (x, y, z) idx (i, j) prefix: value`. */
void device_print(std::string_view prefix, std::initializer_list<Operand> values, TS_HERE);
void device_print(std::string_view prefix, Operand value, TS_HERE);

// ---- random numbers (Philox 4x32, the tensor factories' streams: element `offset` of seed `seed`)
// --
/** The four uint32 outputs of Philox for each offset (Triton's randint4x). */
std::array<Tile, 4> randint4x(Operand seed, Operand offset, int n_rounds = 10, TS_HERE);
/** The first output (uint32). */
Tile randint(Operand seed, Operand offset, int n_rounds = 10, TS_HERE);
/** float32 uniform in [0, 1): bit for bit `tessera::rand` (float32) at the same seed and offset. */
Tile rand(Operand seed, Operand offset, int n_rounds = 10, TS_HERE);
/** float32 standard normal: bit for bit `tessera::randn` (float32) at the same seed and offset. */
Tile randn(Operand seed, Operand offset, int n_rounds = 10, TS_HERE);

// ---- reductions -------------------------------------------------------------------------------
/** Sum over `axis` (all dims when omitted). Integers narrower than 32 bits sum in (u)int32 and
 * bfloat16 in float32, as Triton. */
Tile sum(Operand x, TS_HERE);
Tile sum(Operand x, int axis, TS_HERE);
/** Maximum / minimum over `axis`; a NaN is ignored unless every element is NaN. */
Tile max(Operand x, TS_HERE);
Tile max(Operand x, int axis, TS_HERE);
Tile min(Operand x, TS_HERE);
Tile min(Operand x, int axis, TS_HERE);
/** The same over `axis`, keeping it as a size-1 dimension when `keep_dims`. */
Tile sum(Operand x, int axis, bool keep_dims, TS_HERE);
Tile max(Operand x, int axis, bool keep_dims, TS_HERE);
Tile min(Operand x, int axis, bool keep_dims, TS_HERE);
/** Bitwise xor of integers over all dims, or over `axis`. */
Tile xor_sum(Operand x, TS_HERE);
Tile xor_sum(Operand x, int axis, bool keep_dims = false, TS_HERE);
/** The int32 index of the largest / smallest value along `axis`: the first of equal values; a
 * NaN counts as largest (argmax) and smallest (argmin), as torch.argmax/argmin. */
Tile argmax(Operand x, int axis, bool keep_dims = false, TS_HERE);
Tile argmin(Operand x, int axis, bool keep_dims = false, TS_HERE);

/** A combine function over N values: (a_1..a_N, b_1..b_N) -> N values (scalars). */
using CombineFn =
    FunctionRef<std::vector<Tile>(const std::vector<Tile>& a, const std::vector<Tile>& b)>;
/** `tl.reduce` with a user combine function over several inputs of one shape (e.g. Welford's
 * mean and variance), folded left to right along `axis`; the combine must be pure. */
std::vector<Tile> reduce(const std::vector<Tile>& inputs, int axis, CombineFn combine,
                         bool keep_dims = false, TS_HERE);
Tile reduce(Operand input, int axis, FunctionRef<Tile(Tile, Tile)> combine, bool keep_dims = false,
            TS_HERE);
/** Inclusive scans along `axis` (from the end with `reverse`). */
std::vector<Tile> associative_scan(const std::vector<Tile>& inputs, int axis, CombineFn combine,
                                   bool reverse = false, TS_HERE);
Tile associative_scan(Operand input, int axis, FunctionRef<Tile(Tile, Tile)> combine,
                      bool reverse = false, TS_HERE);
/** Running sums and products (accumulating in tl::sum's types: 32-bit ints, float32 for fp16/bf16).
 */
Tile cumsum(Operand x, int axis = 0, bool reverse = false, TS_HERE);
Tile cumprod(Operand x, int axis = 0, bool reverse = false, TS_HERE);

// ---- runtime control flow -----------------------------------------------------------------------
/** A loop from lo to hi (exclusive) by step, executed at run time; `body` receives the index. */
void range(Operand lo, Operand hi, Operand step, FunctionRef<void(Tile)> body, TS_HERE);
/** `tl.range`'s options: `loop_unroll_factor` unrolls on every backend; `num_stages` (the
 * software pipeline's depth for the loads feeding a dot), `flatten`, `warp_specialize` and
 * `disallow_acc_multi_buffer` are kept on the loop in the IR for the GPU's pipelining. */
struct RangeOptions {
  int num_stages = 0;
  int loop_unroll_factor = 0;
  bool flatten = false;
  bool warp_specialize = false;
  bool disallow_acc_multi_buffer = false;
};
void range(Operand lo, Operand hi, Operand step, FunctionRef<void(Tile)> body, RangeOptions options,
           TS_HERE);
/** `tl.static_range`: unrolled while tracing, the body sees constant indices (the same as a C++
 * `for` over constants; for ports that keep Triton's spelling). */
void static_range(Operand lo, Operand hi, Operand step, FunctionRef<void(Tile)> body, TS_HERE);
void static_range(Operand lo, Operand hi, FunctionRef<void(Tile)> body, TS_HERE);
void range(Operand lo, Operand hi, FunctionRef<void(Tile)> body, TS_HERE);
/** A loop executed at run time while `cond()` (a scalar) holds; Vars assigned in `body` carry
 * across iterations. The condition must not assign Vars. */
void while_(FunctionRef<Tile()> cond, FunctionRef<void()> body, TS_HERE);
/** A branch on a scalar condition, executed at run time. */
void if_(Operand cond, FunctionRef<void()> then_body, TS_HERE);
void if_(Operand cond, FunctionRef<void()> then_body, FunctionRef<void()> else_body, TS_HERE);

// ---- operators (Triton's: C-style integer division, comparisons give i1 tiles)
// -------------------
Tile operator+(Operand a, Operand b);
Tile operator-(Operand a, Operand b);
Tile operator*(Operand a, Operand b);
Tile operator/(Operand a, Operand b);
Tile operator%(Operand a, Operand b);
Tile operator-(Operand a);
Tile operator&(Operand a, Operand b);
Tile operator|(Operand a, Operand b);
Tile operator^(Operand a, Operand b);
/** Shifts: arithmetic right shift for signed types, logical for unsigned; an amount that is
 * negative or at least the width shifts everything out. */
Tile operator<<(Operand a, Operand b);
Tile operator>>(Operand a, Operand b);
/** Bitwise not; on i1 (masks) it is logical not, as Triton's `~mask`. */
Tile operator~(Operand a);
Tile operator==(Operand a, Operand b);
Tile operator!=(Operand a, Operand b);
Tile operator<(Operand a, Operand b);
Tile operator<=(Operand a, Operand b);
Tile operator>(Operand a, Operand b);
Tile operator>=(Operand a, Operand b);

#define TESSERA_TL_COMPOUND(op)                                \
  inline Tile& Tile::operator op##=(const Operand& v) {        \
    return *this = (Operand(*this, v.loc) op v);               \
  }                                                            \
  inline Var& Var::operator op##=(const Operand& v) {          \
    return *this = Operand(Operand(*this, v.loc) op v, v.loc); \
  }
TESSERA_TL_COMPOUND(+)
TESSERA_TL_COMPOUND(-)
TESSERA_TL_COMPOUND(*)
TESSERA_TL_COMPOUND(/)
TESSERA_TL_COMPOUND(%)
TESSERA_TL_COMPOUND(&)
TESSERA_TL_COMPOUND(|)
TESSERA_TL_COMPOUND(^)
TESSERA_TL_COMPOUND(<<)
TESSERA_TL_COMPOUND(>>)
#undef TESSERA_TL_COMPOUND

// ---- kernels and launches -----------------------------------------------------------------------

/** A named constexpr argument: `tl::meta("BLOCK_SIZE", 1024)`. */
struct MetaArg {
  std::string_view name;
  enum class Kind : uint8_t { Int, Float, Bool, DType } kind;
  int64_t i = 0;
  double f = 0;
  DType dtype = DType::Float32;
};
inline MetaArg meta(std::string_view name, int64_t v) {
  return {name, MetaArg::Kind::Int, v};
}
inline MetaArg meta(std::string_view name, int v) {
  return meta(name, int64_t(v));
}
inline MetaArg meta(std::string_view name, double v) {
  return {name, MetaArg::Kind::Float, 0, v};
}
inline MetaArg meta(std::string_view name, bool v) {
  return {name, MetaArg::Kind::Bool, v};
}
inline MetaArg meta(std::string_view name, DType d) {
  return {name, MetaArg::Kind::DType, 0, 0, d};
}

/** A meta-parameter value that owns its data (configs, heuristics' results, a launch's
 * variants): an integer, a bool, a float or a dtype. */
struct MetaValue {
  MetaArg::Kind kind = MetaArg::Kind::Int;
  int64_t i = 0;
  double f = 0;
  DType dtype = DType::Float32;

  MetaValue() = default;
  template <class T>
  requires(std::is_integral_v<T> && !std::is_same_v<T, bool>) MetaValue(T v)
      : kind(MetaArg::Kind::Int), i(static_cast<int64_t>(v)) {}  // NOLINT
  MetaValue(bool v) : kind(MetaArg::Kind::Bool), i(v) {}         // NOLINT
  template <class T>
  requires std::is_floating_point_v<T> MetaValue(T v)
      : kind(MetaArg::Kind::Float), f(static_cast<double>(v)) {}  // NOLINT
  MetaValue(DType d) : kind(MetaArg::Kind::DType), dtype(d) {}    // NOLINT

  MetaArg as_meta(std::string_view name) const;
  std::string str() const;
  bool operator==(const MetaValue& o) const;
};

/** Launch options, as Triton's (accepted on the CPU, where they do not change the code). */
struct LaunchOption {
  enum class Kind : uint8_t { NumWarps, NumStages, MaxNReg } kind;
  int64_t value;
  /** "num_warps", "num_stages", "maxnreg". */
  const char* name() const {
    return kind == Kind::NumWarps    ? "num_warps"
           : kind == Kind::NumStages ? "num_stages"
                                     : "maxnreg";
  }
};
inline LaunchOption num_warps(int64_t n) {
  return {LaunchOption::Kind::NumWarps, n};
}
inline LaunchOption num_stages(int64_t n) {
  return {LaunchOption::Kind::NumStages, n};
}
/** A per-thread register limit for the kernel (CUDA; kept in the IR on other backends). */
inline LaunchOption maxnreg(int64_t n) {
  return {LaunchOption::Kind::MaxNReg, n};
}

/** One launch argument. Converting constructors record the launch's source line. */
struct KernelArg {
  enum class Kind : uint8_t { Tensor, Int, Float, Bool, DType, Meta, Option } kind;
  const Tensor* tensor = nullptr;
  int64_t i = 0;
  double f = 0;
  DType dtype = DType::Float32;
  SymInt sym;
  MetaArg meta;
  LaunchOption option{LaunchOption::Kind::NumWarps, 0};
  SourceLoc loc;

  KernelArg(const Tensor& t, SourceLoc l = SourceLoc::current())  // NOLINT
      : kind(Kind::Tensor), tensor(&t), loc(l) {}
  KernelArg(const SymInt& s, SourceLoc l = SourceLoc::current())  // NOLINT
      : kind(Kind::Int), sym(s), loc(l) {}
  template <class T>
  requires(std::is_integral_v<T> && !std::is_same_v<T, bool>)
      KernelArg(T v, SourceLoc l = SourceLoc::current())  // NOLINT
      : kind(Kind::Int), i(static_cast<int64_t>(v)), sym(static_cast<int64_t>(v)), loc(l) {}
  template <class T>
  requires std::is_floating_point_v<T> KernelArg(T v, SourceLoc l = SourceLoc::current())  // NOLINT
      : kind(Kind::Float), f(static_cast<double>(v)), loc(l) {}
  KernelArg(bool v, SourceLoc l = SourceLoc::current())  // NOLINT
      : kind(Kind::Bool), i(v), loc(l) {}
  KernelArg(DType d, SourceLoc l = SourceLoc::current())  // NOLINT
      : kind(Kind::DType), dtype(d), loc(l) {}
  KernelArg(MetaArg m, SourceLoc l = SourceLoc::current())  // NOLINT
      : kind(Kind::Meta), meta(m), loc(l) {}
  KernelArg(LaunchOption o, SourceLoc l = SourceLoc::current())  // NOLINT
      : kind(Kind::Option), option(o), loc(l) {}
};

/** The meta-parameters (constexpr values by name) a grid callable receives. */
class Meta {
 public:
  /** The integer value of a constexpr; `ValueError` naming the known ones when missing. */
  int64_t operator[](std::string_view name) const;
  bool contains(std::string_view name) const;
  double float_value(std::string_view name) const;

  struct Entry {
    std::string name;
    MetaArg value;
    SymInt symbolic;  ///< while tracing: the symbolic value of an integer argument (read guards it)
    bool is_symbolic = false;
  };
  std::vector<Entry> entries;
};

/** A launch grid of up to three dimensions. Its constructors record the launch's source line. */
struct Grid {
  Grid() = default;
  Grid(std::initializer_list<SymInt> dims,
       SourceLoc loc = SourceLoc::current());  // NOLINT: `kernel[{n}]`
  Grid(const SymInt& x, SourceLoc loc = SourceLoc::current()) : Grid({x}, loc) {}    // NOLINT
  Grid(int64_t x, SourceLoc loc = SourceLoc::current()) : Grid({SymInt(x)}, loc) {}  // NOLINT
  Grid(int x, SourceLoc loc = SourceLoc::current()) : Grid({SymInt(x)}, loc) {}      // NOLINT
  SymInt dims[3] = {1, 1, 1};
  int ndim = 0;
  SourceLoc loc;
};

/** A grid computed from the meta-parameters: `kernel[[&](const tl::Meta& m) { ... }]`. */
struct GridFn {
  template <class F>
  requires std::is_invocable_v<F&, const Meta&> GridFn(F&& f, SourceLoc l = SourceLoc::current())
      : fn(f), loc(l) {}  // NOLINT
  FunctionRef<Grid(const Meta&)> fn;
  SourceLoc loc;
};

/** What `kernel[...]` takes: a grid, its dimensions or a grid callable, with the line of the
 * launch itself (the `kernel[grid]` expression, also when `grid` is a variable made elsewhere),
 * which launch errors name. */
struct LaunchGrid {
  LaunchGrid(const Grid& g, SourceLoc l = SourceLoc::current()) : grid(g), loc(l) {}  // NOLINT
  LaunchGrid(std::initializer_list<SymInt> dims, SourceLoc l = SourceLoc::current())  // NOLINT
      : grid(dims, l), loc(l) {}
  LaunchGrid(const SymInt& x, SourceLoc l = SourceLoc::current())  // NOLINT
      : grid({x}, l), loc(l) {}
  LaunchGrid(int64_t x, SourceLoc l = SourceLoc::current())  // NOLINT
      : grid({SymInt(x)}, l), loc(l) {}
  LaunchGrid(int x, SourceLoc l = SourceLoc::current())  // NOLINT
      : grid({SymInt(x)}, l), loc(l) {}
  LaunchGrid(const GridFn& f, SourceLoc l = SourceLoc::current())  // NOLINT
      : fn(f.fn), loc(l) {}
  template <class F>
  requires std::is_invocable_v<F&, const Meta&> LaunchGrid(F&& f,  // NOLINT
                                                           SourceLoc l = SourceLoc::current())
      : fn(FunctionRef<Grid(const Meta&)>(f)), loc(l) {}
  Grid grid;
  std::optional<FunctionRef<Grid(const Meta&)>> fn;  ///< the callable (it lives for the call)
  SourceLoc loc;
};

class JITFunction;
class Launcher;

namespace detail {
/** What a launch goes through before the kernel: autotuning and heuristics (tessera/autotune.h)
 * implement it; a plain kernel has none. */
class LaunchTarget {
 public:
  virtual ~LaunchTarget() = default;
  virtual void launch(const Launcher& launcher, ArrayRef<KernelArg> args) const = 0;
};
}  // namespace detail

/** `kernel[grid]`: holds the grid until the call supplies the arguments. */
class Launcher {
 public:
  Launcher(const JITFunction& fn, const LaunchGrid& g)
      : fn_(fn), grid_(g.grid), grid_fn_(g.fn), loc_(g.loc) {}
  Launcher(const detail::LaunchTarget& target, const JITFunction& fn, const LaunchGrid& g)
      : fn_(fn), target_(&target), grid_(g.grid), grid_fn_(g.fn), loc_(g.loc) {}

  template <class... A>
  void operator()(A&&... args) const {
    if constexpr (sizeof...(A) == 0) {
      run({});
    } else {
      const KernelArg list[] = {KernelArg(std::forward<A>(args), loc_)...};
      run(ArrayRef<KernelArg>(list, sizeof...(A)));
    }
  }
  void run(ArrayRef<KernelArg> args) const;
  const Grid& grid() const { return grid_; }
  const std::optional<FunctionRef<Grid(const Meta&)>>& grid_fn() const { return grid_fn_; }
  const JITFunction& function() const { return fn_; }
  /** The autotuner or heuristics the launch goes through (null for a plain kernel). */
  const detail::LaunchTarget* target() const { return target_; }
  SourceLoc location() const { return loc_; }
  /** Launches the kernel itself with these arguments and grid, bypassing the target (the
   * autotuner's last step). */
  void run_kernel(ArrayRef<KernelArg> args, const Grid* grid_override = nullptr) const;

 private:
  const JITFunction& fn_;
  const detail::LaunchTarget* target_ = nullptr;
  Grid grid_;
  std::optional<FunctionRef<Grid(const Meta&)>> grid_fn_;
  SourceLoc loc_;
};

namespace detail {
struct KernelState;
struct JITAccess;
/** Calls a kernel body with parameter handles (type-erased by TL_JIT). */
/** A kernel body with its parameter list erased (cast back by the invoker that knows it). */
using ErasedBody = void (*)();
using BodyInvoker = void (*)(ErasedBody body, const Tile* params);
template <class... P, size_t... I>
void invoke_body(void (*f)(P...), const Tile* params, std::index_sequence<I...>) {
  f(std::decay_t<P>(params[I])...);
}
template <class P>
inline constexpr bool is_param_v = std::is_same_v<P, Ptr> || std::is_same_v<P, Int> ||
                                   std::is_same_v<P, Float> || std::is_same_v<P, Const>;
/** The kinds of a TL_JIT signature's parameters, from their types. */
template <class... P>
const std::array<int, sizeof...(P) + 1>& param_kinds() {
  static_assert((is_param_v<std::decay_t<P>> && ...),
                "TL_JIT parameters are tl::Ptr, tl::Int, tl::Float or tl::Const");
  static const std::array<int, sizeof...(P) + 1> kinds = {std::decay_t<P>::kParamKind..., -1};
  return kinds;
}
}  // namespace detail

/** A kernel: its body, parameter names and kinds, and its caches. Made by `TL_JIT`. */
class JITFunction {
 public:
  struct ParamSpec {
    std::string name;
    enum class Kind : uint8_t { Pointer, Int, Float, Constexpr } kind;
  };

  template <class... P>
  JITFunction(const char* name, const char* param_text, void (*body)(P...), const char* file,
              int line)
      : JITFunction(
            name, param_text, reinterpret_cast<detail::ErasedBody>(body),
            [](detail::ErasedBody b, const Tile* params) {
              detail::invoke_body(reinterpret_cast<void (*)(P...)>(b), params,
                                  std::index_sequence_for<P...>{});
            },
            detail::param_kinds<P...>().data(), sizeof...(P), file, line) {}
  ~JITFunction();
  JITFunction(const JITFunction&) = delete;
  JITFunction& operator=(const JITFunction&) = delete;

  const std::string& name() const;
  const std::vector<ParamSpec>& params() const;
  /** Where the kernel is defined. */
  SourceLoc location() const;

  Launcher operator[](const LaunchGrid& grid) const { return Launcher(*this, grid); }

  /** Never specializes these integer parameters on ==1 or divisibility by 16. */
  JITFunction& do_not_specialize(std::initializer_list<std::string_view> names);

  /** Number of compiled specializations held in memory. */
  size_t num_specializations() const;
  /** Drops the in-memory specializations (the next launch finds them on disk, or recompiles). */
  void clear_memory_cache() const;
  /** Whether the most recent compile was served by the disk cache, and its compiler time. */
  bool last_from_disk() const;
  double last_compile_ms() const;
  /** The generated C++ and tile IR of the most recently compiled specialization (tests, tools). */
  std::string last_source() const;
  std::string last_ir() const;

  detail::KernelState& state() const { return *state_; }

 private:
  JITFunction(const char* name, const char* param_text, detail::ErasedBody body,
              detail::BodyInvoker invoke, const int* kinds, size_t arity, const char* file,
              int line);
  explicit JITFunction(std::unique_ptr<detail::KernelState> state);
  friend struct detail::JITAccess;  // kernels the graph compiler derives (tl/fused.h)
  std::unique_ptr<detail::KernelState> state_;
};

}  // namespace tessera::tl

/** Defines a kernel: `TL_JIT(name, tl::Ptr x, tl::Int n, tl::Const BLOCK) { body }`. */
#define TL_JIT(kname, ...)                                                                      \
  static void kname##_tl_body(__VA_ARGS__);                                                     \
  ::tessera::tl::JITFunction kname(#kname, #__VA_ARGS__, &kname##_tl_body, __FILE__, __LINE__); \
  static void kname##_tl_body(__VA_ARGS__)
