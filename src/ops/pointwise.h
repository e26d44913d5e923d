/** \file
 * The shared machinery of pointwise operators: a descriptor per op (name, result-type rule,
 * allowed dtypes, the CPU loop) and the functional / `out=` / in-place drivers that apply
 * PyTorch's broadcasting, promotion and output rules once for every op. A kernel works on meta
 * and fake tensors too: it computes shapes and dtypes and skips the loop when there is no data.
 */
#pragma once

#include "core/dtype_visit.h"
#include "ops/cpu_loops.h"
#include "ops/op_utils.h"

namespace tessera::ops_detail {

/** How an op's compute and result dtypes follow from the promoted input dtype. */
enum class ResultRule : uint8_t {
  Same,        ///< result = promoted type (add, maximum, neg, ...)
  ToFloat,     ///< integer and bool inputs compute in the default float type (div, exp, ...)
  BoolOut,     ///< compute in the promoted type, result bool (comparisons)
  LogicalOut,  ///< any type in, bool out (logical_and, logical_not)
};

/** Runs the loop: out (of the result dtype) = f(inputs converted to `compute`). */
using PointwiseRunner = void (*)(const Tensor& out, ArrayRef<Tensor> inputs, DType compute,
                                 const void* extra);

/** Which functor of ops/pointwise_functors.h an op applies: the tile lowering
 * (src/tl/op_tiles.cpp) instantiates the same functor with tiles. */
enum class PwOp : uint8_t {
  None,  // no tile lowering
  Add,
  Sub,
  Mul,
  Div,
  TruncDiv,
  FloorDiv,
  Remainder,
  Pow,
  Maximum,
  Minimum,
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  LogicalAnd,
  LogicalOr,
  LogicalXor,
  BitAnd,
  BitOr,
  BitXor,
  Shl,
  Shr,
  Neg,
  Abs,
  Exp,
  Exp2,
  Log,
  Log2,
  Sqrt,
  Rsqrt,
  Sin,
  Cos,
  Tanh,
  Sigmoid,
  Erf,
  Relu,
  Gelu,
  GeluTanh,
  GeluBackward,      // two inputs: the gradient, then gelu's input
  GeluTanhBackward,  // the same for the tanh form
  Silu,
  LogicalNot,
  BitNot,
  Clamp,
  Where,    // three inputs: the condition, then the two values
  IsClose,  // two inputs, computed in float64; extra: IsCloseArgs
  Copy,     // one input converted to the output's dtype (copies between views, any dtype)
};

struct PointwiseDesc {
  const char* name;
  ResultRule rule;
  DTypeSet allowed;  ///< compute dtypes the loop supports
  PointwiseRunner run;
  PwOp op = PwOp::None;
};

/** Contiguous float32 `o = op(x)` for the transcendental unary ops through the tile runtime's
 * math (pointwise_fast.cpp); false (nothing done) for other ops. */
bool fast_unary_f32(PwOp op, const float* x, float* o, int64_t n);
/** The same on float16 (`bf16` false) or bfloat16 bits: computed in float, rounded once, as the
 * library loops compute narrow floats. */
bool fast_unary_narrow(PwOp op, const uint16_t* x, uint16_t* o, int64_t n, bool bf16);
/** The same for the binary ops that have such a loop (gelu_backward): `o = op(a, b)`. */
bool has_fast_binary(PwOp op);
bool fast_binary_f32(PwOp op, const float* a, const float* b, float* o, int64_t n);
bool fast_binary_narrow(PwOp op, const uint16_t* a, const uint16_t* b, uint16_t* o, int64_t n,
                        bool bf16);
/** Contiguous float16 / bfloat16 `a + b`, `a - b`, `a * b`, `a / b` (no alpha) through float rows
 * converted 1024 at a time (vectorized; the library's loop converts one element at a time in
 * baseline x86-64): the same bits. False (nothing done) for other ops. */
bool fast_arith_narrow(PwOp op, const uint16_t* a, const uint16_t* b, uint16_t* o, int64_t n,
                       bool bf16);

/** `extra` of add and sub: alpha (a Scalar). Of clamp: */
struct ClampArgs {
  std::optional<Scalar> lo, hi;
};
/** `extra` of isclose. */
struct IsCloseArgs {
  double rtol, atol;
  bool equal_nan;
};

/**
 * Runs an op where the precompiled CPU loops cannot (GPU tensors): `out` = the op applied to
 * `inputs` (broadcast to out's shape, each in its own dtype, on out's device or 0-dim CPU
 * scalars) computed in `compute`. Registered by a higher layer (the tile lowering).
 */
using DevicePointwiseRunner = void (*)(const PointwiseDesc& d, const Tensor& out,
                                       ArrayRef<Tensor> inputs, DType compute, const void* extra);
void set_device_pointwise_runner(DevicePointwiseRunner run);
/** Runs `d` through the device runner: inputs broadcast to out's shape (0-dim tensors of another
 * device kept as they are); a NotImplementedError naming the op where there is none. */
void run_on_device(const PointwiseDesc& d, const Tensor& out, ArrayRef<Tensor> inputs,
                   DType compute, const void* extra);

/** The reductions with a tile lowering. */
enum class ReduceOp : uint8_t { Sum, Mean, Prod, Max, Min, Var };
/**
 * Reduces `rows` (a view of the input: its kept dimensions first, `kept` of them, then the
 * reduced ones; any strides) into `out` (contiguous, one element per kept index, its dtype the
 * result's). Max/Min propagate NaN; with `indices` (int64, like out) they also give the first
 * index of the result in the reduced elements' order (a NaN wins). Var: the sum of squared
 * deviations from the mean over max(0, N - correction). Registered by the tile lowering.
 */
using DeviceReduceRunner = void (*)(ReduceOp op, const Tensor& rows, int64_t kept,
                                    const Tensor& out, const Tensor* indices, double correction,
                                    const char* name);
void set_device_reduce_runner(DeviceReduceRunner run);
/** Runs a reduction through the registered runner (a NotImplementedError naming `name` if none). */
void run_device_reduce(ReduceOp op, const Tensor& rows, int64_t kept, const Tensor& out,
                       const Tensor* indices, const char* name, double correction = 0);

/** Ops that map each line along one dimension to a line of the same length. */
enum class RowOp : uint8_t { Softmax, LogSoftmax, Cumsum };
/**
 * `op` along the last dimension of `in_rows` into `out_rows` (views of one shape, any strides; the
 * input converted to out's dtype first, as the CPU does). Registered by the tile lowering.
 */
using DeviceRowRunner = void (*)(RowOp op, const Tensor& in_rows, const Tensor& out_rows,
                                 const char* name);
void set_device_row_runner(DeviceRowRunner run);
void run_device_row(RowOp op, const Tensor& in_rows, const Tensor& out_rows, const char* name);

/**
 * layer_norm (rms_norm when `rms`: no mean) of `x` over its trailing `normalized` dimensions into
 * `out` (contiguous, x's shape and dtype), with optional contiguous weight and bias of the
 * normalized shape. Registered by the tile lowering.
 */
using DeviceNormRunner = void (*)(bool rms, const Tensor& x, int64_t normalized,
                                  const Tensor* weight, const Tensor* bias, double eps,
                                  const Tensor& out, const char* name);
void set_device_norm_runner(DeviceNormRunner run);
void run_device_norm(bool rms, const Tensor& x, int64_t normalized, const Tensor* weight,
                     const Tensor* bias, double eps, const Tensor& out, const char* name);

/**
 * Indexing along one dimension, over contiguous `src` and `out` seen as [A, S, B] and [A, I, B]
 * (`index`: I int64 values in [-S, S), checked by the caller, contiguous on out's device).
 * Gather (index_select): out[a, i, b] = src[a, index[i], b], with `src` [A, S, B] and `out`
 * [A, I, B]. Add (index_add): out[a, index[i], b] += alpha * src[a, i, b] with `src` [A, I, B] and
 * `out` [A, S, B] (repeated indices accumulate, in no fixed order). Registered by the tile
 * lowering.
 */
enum class IndexOp : uint8_t { Gather, Add };
struct IndexGeometry {
  int64_t A, S, B, I;
};
using DeviceIndexRunner = void (*)(IndexOp op, const Tensor& src, const Tensor& index,
                                   const Tensor& out, IndexGeometry g, const Scalar& alpha,
                                   const char* name);
void set_device_index_runner(DeviceIndexRunner run);
void run_device_index(IndexOp op, const Tensor& src, const Tensor& index, const Tensor& out,
                      IndexGeometry g, const Scalar& alpha, const char* name);

/**
 * C[b] = A[b] @ B[b] for `batches` contiguous row-major matrices of one dtype (A: M x K,
 * B: K x N, C: M x N; every size positive): the tile lowering's matmul, used where cuBLAS is
 * absent and for integers. Registered by the tile lowering.
 */
using DeviceMatmulRunner = void (*)(const Tensor& A, const Tensor& B, const Tensor& C,
                                    int64_t batches, int64_t M, int64_t N, int64_t K);
void set_device_matmul_runner(DeviceMatmulRunner run);
void run_device_matmul(const Tensor& A, const Tensor& B, const Tensor& C, int64_t batches,
                       int64_t M, int64_t N, int64_t K);

/** How many times this thread has called a device runner (AOT export refuses operators that
 * need one: their kernels are generated at run time). */
uint64_t device_runner_calls();

/** Whether CPU tensors go through the device runners on this thread (ScopedThroughTiles). */
bool through_tiles();
/** Sends CPU tensors through the device runners too, on this thread while alive (tests compare
 * the tile lowering with the precompiled loops). */
class ScopedThroughTiles {
 public:
  ScopedThroughTiles();
  ~ScopedThroughTiles();
  ScopedThroughTiles(const ScopedThroughTiles&) = delete;
  ScopedThroughTiles& operator=(const ScopedThroughTiles&) = delete;

 private:
  bool saved_;
};

DType compute_dtype(const PointwiseDesc& d, DType promoted);
DType result_dtype(const PointwiseDesc& d, DType compute);

/**
 * Functional form: broadcasts `inputs`, promotes to `promoted` (the caller's result type, which
 * accounts for wrapped scalars), allocates the output like the first tensor input and runs.
 */
Tensor pointwise(const PointwiseDesc& d, ArrayRef<Tensor> inputs, DType promoted,
                 const void* extra = nullptr);
/** `out=` form: resizes and casts as PyTorch does. */
Tensor& pointwise_out(const PointwiseDesc& d, ArrayRef<Tensor> inputs, DType promoted, Tensor& out,
                      const void* extra = nullptr);
/** In-place form: `self` is also inputs[0]; the broadcast shape must equal self's. */
void pointwise_inplace(const PointwiseDesc& d, Tensor& self, ArrayRef<Tensor> inputs,
                       DType promoted, const void* extra = nullptr);

/** A 0-dim CPU tensor holding `s` converted to `dtype` (for Scalar overloads). */
Tensor scalar_tensor(const Scalar& s, DType dtype);

/** Loop for a functor `F` taking N values of the compute type. */
template <class F, DTypeSet Set, bool BoolOut, int N>
void run_functor(const Tensor& out, ArrayRef<Tensor> in, DType compute, const void*) {
  visit_dtype<Set>(compute, "pointwise", [&]<class T>() {
    using Out = std::conditional_t<BoolOut, bool, T>;
    using V = opmath_t<T>;
    if constexpr (N == 1) {
      cpu::StridedIter<2> it({&out, &in[0]});
      cpu::cpu_kernel<Out, T>(it, [](V a) { return F()(a); });
    } else if constexpr (N == 2) {
      cpu::StridedIter<3> it({&out, &in[0], &in[1]});
      cpu::cpu_kernel<Out, T, T>(it, [](V a, V b) { return F()(a, b); });
    } else {
      static_assert(N == 1 || N == 2);
    }
  });
}

}  // namespace tessera::ops_detail
