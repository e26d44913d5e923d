/** \file
 * Helpers shared by the built-in operators: broadcasting, result types, `out=` handling, and
 * dispatch-free CPU building blocks (conversion copies) that kernels use internally.
 */
#pragma once

#include <optional>
#include <string>

#include "tessera/detail/boxing.h"
#include "tessera/detail/function_ref.h"
#include "tessera/tensor.h"

namespace tessera::ops_detail {

/** Broadcasts two shapes (NumPy rules); `ShapeError` naming `op` when they do not broadcast. */
SymDimVector broadcast_shapes(SymIntArrayRef a, SymIntArrayRef b, const char* op);
/** A view of `t` broadcast to `shape` (zero strides), without dispatch. */
Tensor broadcast_to(const Tensor& t, SymIntArrayRef shape);

/** The operand category of a tensor for type promotion. */
inline OperandKind operand_kind(const Tensor& t) {
  return t.dim() == 0 ? OperandKind::ZeroDim : OperandKind::Tensor;
}
DType result_type(const Tensor& a, const Tensor& b);
DType result_type(const Tensor& a, const Scalar& b);
DType result_type(std::initializer_list<const Tensor*> ts);

/** Checks tensors share a device (0-dim CPU tensors may join CUDA ones, as in PyTorch). */
void check_same_device(const char* op, std::initializer_list<const Tensor*> ts);

/**
 * Prepares `out` for an `out=` variant: resizes it to `shape` when it differs (warning when it
 * had elements, as PyTorch), and checks `result` can be cast to its dtype.
 */
void prepare_out(Tensor& out, SymIntArrayRef shape, DType result, const char* op);
/**
 * Finishes an `out=` op: prepares `out` (prepare_out), refuses partial overlap with `inputs`, runs
 * `fill(target)` where target is `out` itself or, when out's dtype differs from `result` (or it is
 * not contiguous and `needs_contiguous`), a temporary that is then cast into `out`; bumps out's
 * version. Meta and fake outputs only get their shape.
 */
Tensor& write_out(Tensor& out, SymIntArrayRef shape, DType result, const char* op,
                  ArrayRef<Tensor> inputs, FunctionRef<void(const Tensor&)> fill,
                  bool needs_contiguous = false);
/** Errors when `out` partially overlaps `in` (the same memory read and written differently). */
void check_no_partial_overlap(const Tensor& out, const Tensor& in, const char* op);

/** `src` converted to `dtype` on the CPU (a copy unless already of that dtype), no dispatch. */
Tensor cpu_to_dtype(const Tensor& src, DType dtype);
/** A contiguous version of `src` (itself when contiguous), no dispatch. */
Tensor cpu_contiguous(const Tensor& src);
/** Copies `src` (broadcast to dst's shape, converted) into `dst`, both CPU, no dispatch. */
void cpu_copy(const Tensor& dst, const Tensor& src);
/** Fills `dst` with `value` converted to its dtype. */
void cpu_fill(const Tensor& dst, const Scalar& value);

/** Normalizes a list of dims (negative from the end) and checks for duplicates. */
DimVector wrap_dims(IntArrayRef dims, int64_t ndim, const char* op);

/** The output of a kernel: like `like` (device, fake-ness) with `sizes`, contiguous. */
inline Tensor new_output(const Tensor& like, SymIntArrayRef sizes, DType dtype) {
  return detail::make_empty_like(like, sizes, dtype);
}

/** Marks an in-place write (version counter). */
inline void bump_version(const Tensor& t) {
  t.impl()->storage()->bump_version();
}

/** rms_norm's eps when none is given: the machine epsilon of `t` (as PyTorch). */
double default_norm_eps(DType t);

/** The gradients of layer_norm (`rms`: rms_norm) over the last `normalized` dims of CPU tensor
 * `x` for the upstream gradient `g`, in one pass of rows on the thread pool (statistics and
 * sums in double, each result rounded once): x's (when `need_x`), the weight's (when `w` and
 * `need_w`) and the bias's (when `need_b`; layer_norm only); undefined where not asked. The
 * weight and bias gradients sum fixed blocks of rows, then the blocks in order: the same bits
 * at any thread count. */
struct NormGrads {
  Tensor x, w, b;
};
NormGrads norm_backward_cpu(bool rms, const Tensor& x, int64_t normalized, const Tensor* w,
                            const Tensor& g, double eps, bool need_x, bool need_w, bool need_b);

}  // namespace tessera::ops_detail
