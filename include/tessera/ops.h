/** \file
 * Built-in operators, with PyTorch's names and semantics (broadcasting, type promotion, strided
 * inputs, `_out` variants that write into a given tensor, in-place `_` variants). Each is an
 * operator in the registry (`aten::name.overload`) and runs through the dispatcher, so modes,
 * autograd, wrapper tensor types and the graph compiler see it; each has a shape function, so it
 * runs on `meta` and fake tensors. The trailing `loc` parameter records the caller's line for
 * error messages; never pass it explicitly.
 */
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <tuple>
#include <vector>

#include "tessera/tensor.h"

namespace tessera {

using TensorList = ArrayRef<Tensor>;

// ---- factories ------------------------------------------------------------------------------
Tensor empty(SymIntArrayRef size, TensorOptions options = {}, TS_HERE);
Tensor empty_strided(SymIntArrayRef size, SymIntArrayRef stride, TensorOptions options = {},
                     TS_HERE);
Tensor zeros(SymIntArrayRef size, TensorOptions options = {}, TS_HERE);
Tensor ones(SymIntArrayRef size, TensorOptions options = {}, TS_HERE);
/** Filled with `value`; the dtype defaults from the value (bool, int64 or float32). */
Tensor full(SymIntArrayRef size, const Scalar& value, TensorOptions options = {}, TS_HERE);
/** A 0-dim tensor holding a size, which may be symbolic while a graph is traced (backward
 * formulas divide by sizes with it, so that a dynamic graph stays dynamic); int64 by default. */
Tensor size_tensor(const SymInt& size, TensorOptions options = {}, TS_HERE);
/** Values start, start+step, ... below end; int64 when all are integers, else float32. */
Tensor arange(const Scalar& end, TensorOptions options = {}, TS_HERE);
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step = 1,
              TensorOptions options = {}, TS_HERE);
Tensor empty_like(const Tensor& t, TensorOptions options = {}, TS_HERE);
Tensor zeros_like(const Tensor& t, TensorOptions options = {}, TS_HERE);
Tensor ones_like(const Tensor& t, TensorOptions options = {}, TS_HERE);
Tensor full_like(const Tensor& t, const Scalar& value, TensorOptions options = {}, TS_HERE);
/** Uniform in [0, 1) from the global Philox generator. */
Tensor rand(SymIntArrayRef size, TensorOptions options = {}, TS_HERE);
/** Standard normal (Box-Muller in double precision) from the global Philox generator. */
Tensor randn(SymIntArrayRef size, TensorOptions options = {}, TS_HERE);
/** Integers uniform in [low, high); int64 unless a dtype is given. */
Tensor randint(int64_t low, int64_t high, SymIntArrayRef size, TensorOptions options = {}, TS_HERE);
Tensor rand_like(const Tensor& t, TensorOptions options = {}, TS_HERE);
Tensor randn_like(const Tensor& t, TensorOptions options = {}, TS_HERE);
/** Seeds the global generator and resets its offset. */
void manual_seed(uint64_t seed);
/** The seed of the global generator. */
uint64_t initial_seed();
/** Reserves `n` consecutive Philox counters; returns the first (the stream's offset). */
uint64_t reserve_random_offset(uint64_t n);

// ---- pointwise ------------------------------------------------------------------------------
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = 1, TS_HERE);
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha = 1, TS_HERE);
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1, TS_HERE);
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha = 1, TS_HERE);
Tensor mul(const Tensor& a, const Tensor& b, TS_HERE);
Tensor mul(const Tensor& a, const Scalar& b, TS_HERE);
/** True division, or rounded with rounding_mode "trunc" or "floor". */
Tensor div(const Tensor& a, const Tensor& b,
           std::optional<std::string_view> rounding_mode = std::nullopt, TS_HERE);
Tensor div(const Tensor& a, const Scalar& b,
           std::optional<std::string_view> rounding_mode = std::nullopt, TS_HERE);
Tensor floor_divide(const Tensor& a, const Tensor& b, TS_HERE);
/** Python's `%`: the result has the divisor's sign. */
Tensor remainder(const Tensor& a, const Tensor& b, TS_HERE);
Tensor remainder(const Tensor& a, const Scalar& b, TS_HERE);
Tensor pow(const Tensor& a, const Tensor& b, TS_HERE);
Tensor pow(const Tensor& a, const Scalar& b, TS_HERE);
Tensor pow(const Scalar& a, const Tensor& b, TS_HERE);
Tensor maximum(const Tensor& a, const Tensor& b, TS_HERE);
Tensor minimum(const Tensor& a, const Tensor& b, TS_HERE);
Tensor eq(const Tensor& a, const Tensor& b, TS_HERE);
Tensor eq(const Tensor& a, const Scalar& b, TS_HERE);
Tensor ne(const Tensor& a, const Tensor& b, TS_HERE);
Tensor ne(const Tensor& a, const Scalar& b, TS_HERE);
Tensor lt(const Tensor& a, const Tensor& b, TS_HERE);
Tensor lt(const Tensor& a, const Scalar& b, TS_HERE);
Tensor le(const Tensor& a, const Tensor& b, TS_HERE);
Tensor le(const Tensor& a, const Scalar& b, TS_HERE);
Tensor gt(const Tensor& a, const Tensor& b, TS_HERE);
Tensor gt(const Tensor& a, const Scalar& b, TS_HERE);
Tensor ge(const Tensor& a, const Tensor& b, TS_HERE);
Tensor ge(const Tensor& a, const Scalar& b, TS_HERE);
Tensor logical_and(const Tensor& a, const Tensor& b, TS_HERE);
Tensor logical_or(const Tensor& a, const Tensor& b, TS_HERE);
Tensor logical_xor(const Tensor& a, const Tensor& b, TS_HERE);
Tensor logical_not(const Tensor& a, TS_HERE);
Tensor bitwise_and(const Tensor& a, const Tensor& b, TS_HERE);
Tensor bitwise_or(const Tensor& a, const Tensor& b, TS_HERE);
Tensor bitwise_xor(const Tensor& a, const Tensor& b, TS_HERE);
Tensor bitwise_not(const Tensor& a, TS_HERE);
Tensor bitwise_left_shift(const Tensor& a, const Tensor& b, TS_HERE);
Tensor bitwise_right_shift(const Tensor& a, const Tensor& b, TS_HERE);
/** Elements of `a` where `cond`, else of `b` (all broadcast). */
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b, TS_HERE);
Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b, TS_HERE);
Tensor clamp(const Tensor& a, const std::optional<Scalar>& min,
             const std::optional<Scalar>& max = std::nullopt, TS_HERE);

Tensor neg(const Tensor& a, TS_HERE);
Tensor abs(const Tensor& a, TS_HERE);
Tensor exp(const Tensor& a, TS_HERE);
Tensor exp2(const Tensor& a, TS_HERE);
Tensor log(const Tensor& a, TS_HERE);
Tensor log2(const Tensor& a, TS_HERE);
Tensor sqrt(const Tensor& a, TS_HERE);
Tensor rsqrt(const Tensor& a, TS_HERE);
Tensor sin(const Tensor& a, TS_HERE);
Tensor cos(const Tensor& a, TS_HERE);
Tensor tanh(const Tensor& a, TS_HERE);
Tensor sigmoid(const Tensor& a, TS_HERE);
Tensor erf(const Tensor& a, TS_HERE);
Tensor relu(const Tensor& a, TS_HERE);
/** approximate: "none" (erf) or "tanh". */
Tensor gelu(const Tensor& a, std::string_view approximate = "none", TS_HERE);
/** `grad` times GELU's derivative at `self` (PyTorch's gelu_backward): gelu's backward, one
 * kernel, computed in float for 16-bit floats and rounded once. */
Tensor gelu_backward(const Tensor& grad, const Tensor& self, std::string_view approximate = "none",
                     TS_HERE);
Tensor silu(const Tensor& a, TS_HERE);

// `_out` variants: write into `out` (resized when its shape differs; cast to its dtype).
Tensor& add_out(Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha = 1, TS_HERE);
Tensor& sub_out(Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha = 1, TS_HERE);
Tensor& mul_out(Tensor& out, const Tensor& a, const Tensor& b, TS_HERE);
Tensor& div_out(Tensor& out, const Tensor& a, const Tensor& b,
                std::optional<std::string_view> rounding_mode = std::nullopt, TS_HERE);
Tensor& remainder_out(Tensor& out, const Tensor& a, const Tensor& b, TS_HERE);
Tensor& pow_out(Tensor& out, const Tensor& a, const Tensor& b, TS_HERE);
Tensor& maximum_out(Tensor& out, const Tensor& a, const Tensor& b, TS_HERE);
Tensor& minimum_out(Tensor& out, const Tensor& a, const Tensor& b, TS_HERE);
Tensor& eq_out(Tensor& out, const Tensor& a, const Tensor& b, TS_HERE);
Tensor& lt_out(Tensor& out, const Tensor& a, const Tensor& b, TS_HERE);
Tensor& where_out(Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b, TS_HERE);
Tensor& exp_out(Tensor& out, const Tensor& a, TS_HERE);
Tensor& neg_out(Tensor& out, const Tensor& a, TS_HERE);
Tensor& sqrt_out(Tensor& out, const Tensor& a, TS_HERE);
/** The same for any built-in pointwise op, by name ("sin", "logical_and", ...). */
Tensor& pointwise_out(std::string_view op, Tensor& out, TensorList inputs, TS_HERE);

// ---- reductions -----------------------------------------------------------------------------
/** Sum of all elements; integers and bool sum to int64 unless `dtype` says otherwise. */
Tensor sum(const Tensor& a, std::optional<DType> dtype = std::nullopt, TS_HERE);
/** Sum over `dim` (all dims when empty). */
Tensor sum(const Tensor& a, IntArrayRef dim, bool keepdim = false,
           std::optional<DType> dtype = std::nullopt, TS_HERE);
Tensor& sum_out(Tensor& out, const Tensor& a, IntArrayRef dim, bool keepdim = false,
                std::optional<DType> dtype = std::nullopt, TS_HERE);
Tensor mean(const Tensor& a, std::optional<DType> dtype = std::nullopt, TS_HERE);
Tensor mean(const Tensor& a, IntArrayRef dim, bool keepdim = false,
            std::optional<DType> dtype = std::nullopt, TS_HERE);
Tensor prod(const Tensor& a, std::optional<DType> dtype = std::nullopt, TS_HERE);
Tensor prod(const Tensor& a, int64_t dim, bool keepdim = false,
            std::optional<DType> dtype = std::nullopt, TS_HERE);
/** Maximum over `dim` (all when empty); NaN propagates. */
Tensor amax(const Tensor& a, IntArrayRef dim = {}, bool keepdim = false, TS_HERE);
Tensor amin(const Tensor& a, IntArrayRef dim = {}, bool keepdim = false, TS_HERE);
/** Maximum of all elements. */
Tensor max(const Tensor& a, TS_HERE);
Tensor min(const Tensor& a, TS_HERE);
/** (values, indices) over `dim`; ties give the first index. */
std::tuple<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim = false, TS_HERE);
std::tuple<Tensor, Tensor> min(const Tensor& a, int64_t dim, bool keepdim = false, TS_HERE);
/** Index of the maximum (of the flattened tensor without `dim`); ties give the first index. */
Tensor argmax(const Tensor& a, std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
              TS_HERE);
Tensor argmin(const Tensor& a, std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
              TS_HERE);
/** Variance with Bessel's `correction` (1: unbiased), over `dim` (all when empty). */
Tensor var(const Tensor& a, IntArrayRef dim = {}, double correction = 1, bool keepdim = false,
           TS_HERE);
Tensor softmax(const Tensor& a, int64_t dim, std::optional<DType> dtype = std::nullopt, TS_HERE);
Tensor log_softmax(const Tensor& a, int64_t dim, std::optional<DType> dtype = std::nullopt,
                   TS_HERE);
Tensor cumsum(const Tensor& a, int64_t dim, std::optional<DType> dtype = std::nullopt, TS_HERE);

// ---- linear algebra and normalization --------------------------------------------------------
/** torch.matmul: dot, matrix-vector, matrix-matrix, batched with broadcasting. */
Tensor matmul(const Tensor& a, const Tensor& b, TS_HERE);
Tensor& matmul_out(Tensor& out, const Tensor& a, const Tensor& b, TS_HERE);
/** x @ weight.T + bias. */
Tensor linear(const Tensor& x, const Tensor& weight,
              const std::optional<Tensor>& bias = std::nullopt, TS_HERE);
Tensor layer_norm(const Tensor& x, IntArrayRef normalized_shape,
                  const std::optional<Tensor>& weight = std::nullopt,
                  const std::optional<Tensor>& bias = std::nullopt, double eps = 1e-5, TS_HERE);
/** eps defaults to the machine epsilon of the input's dtype, as PyTorch. */
Tensor rms_norm(const Tensor& x, IntArrayRef normalized_shape,
                const std::optional<Tensor>& weight = std::nullopt,
                std::optional<double> eps = std::nullopt, TS_HERE);

// ---- joining and indexing ---------------------------------------------------------------------
Tensor cat(TensorList tensors, int64_t dim = 0, TS_HERE);
Tensor& cat_out(Tensor& out, TensorList tensors, int64_t dim = 0, TS_HERE);
Tensor stack(TensorList tensors, int64_t dim = 0, TS_HERE);
Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index, TS_HERE);
/** `self` with `alpha * source` added at `index` along `dim`; repeated indices accumulate. */
Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                 const Scalar& alpha = 1, TS_HERE);
/** Rows of `weight` picked by `indices` (any shape). */
Tensor embedding(const Tensor& weight, const Tensor& indices, TS_HERE);

// ---- comparison of whole tensors --------------------------------------------------------------
Tensor isclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8,
               bool equal_nan = false, TS_HERE);
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8,
              bool equal_nan = false, TS_HERE);
/** Same shape and equal elements. */
bool equal(const Tensor& a, const Tensor& b, TS_HERE);

// ---- conversions --------------------------------------------------------------------------------
/** A copy with another dtype and/or device. */
Tensor to_copy(const Tensor& a, std::optional<DType> dtype, std::optional<Device> device, TS_HERE);

}  // namespace tessera
