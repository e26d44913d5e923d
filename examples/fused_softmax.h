// Fused row softmax (Triton's tutorial 02): one program per row, the row read once, max and sum
// reduced in registers. examples/fused_softmax.cpp checks it against the eager `softmax`;
// bench/kernels_cpu.cpp times it (kernels in a header are for one translation unit each, as the
// examples and benchmarks are).
#pragma once

#include <cmath>

#include <tessera/tessera.h>
#include <tessera/tl.h>

namespace fused_softmax {

namespace tl = tessera::tl;
using tessera::Tensor;

TL_JIT(softmax_kernel, tl::Ptr output_ptr, tl::Ptr input_ptr, tl::Int input_row_stride,
       tl::Int output_row_stride, tl::Int n_cols, tl::Const BLOCK_SIZE) {
  auto row_idx = tl::program_id(0);
  auto col_offsets = tl::arange(0, BLOCK_SIZE);
  auto input_ptrs = input_ptr + row_idx * input_row_stride + col_offsets;
  auto mask = col_offsets < n_cols;
  auto row = tl::load(input_ptrs, mask, -INFINITY);
  auto row_minus_max = row - tl::max(row, 0);
  auto numerator = tl::exp(row_minus_max);
  auto denominator = tl::sum(numerator, 0);
  auto softmax_output = numerator / denominator;
  tl::store(output_ptr + row_idx * output_row_stride + col_offsets, softmax_output, mask);
}

inline int64_t next_power_of_2(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

/** Softmax of each row of `x` into `y` (same shape). */
inline void softmax_into(const Tensor& x, const Tensor& y) {
  const int64_t n_rows = x.size(0).guard_int(), n_cols = x.size(1).guard_int();
  softmax_kernel[{n_rows}](y, x, x.stride(0), y.stride(0), n_cols,
                           tl::meta("BLOCK_SIZE", next_power_of_2(n_cols)));
}

inline Tensor softmax(const Tensor& x) {
  Tensor y = tessera::empty_like(x);
  softmax_into(x, y);
  return y;
}

}  // namespace fused_softmax
