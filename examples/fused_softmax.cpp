// Fused row softmax (Triton's tutorial 02): one program per row, the row read once, max and sum
// reduced in registers. Checked against the eager `softmax`.
#include <cmath>
#include <iostream>

#include <tessera/tessera.h>
#include <tessera/tl.h>

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

int64_t next_power_of_2(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

Tensor softmax(const Tensor& x) {
  const int64_t n_rows = x.size(0), n_cols = x.size(1);
  Tensor y = tessera::empty_like(x);
  softmax_kernel[{n_rows}](y, x, x.stride(0), y.stride(0), n_cols,
                           tl::meta("BLOCK_SIZE", next_power_of_2(n_cols)));
  return y;
}

int main() {
  bool ok = true;
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1823, 781}, {4096, 1024}, {3, 5000}}) {
    Tensor x = tessera::randn({rows, cols});
    const bool good = tessera::allclose(softmax(x), tessera::softmax(x, 1), 1e-5, 1e-7);
    std::cout << "softmax " << rows << "x" << cols << ": " << (good ? "matches" : "MISMATCH")
              << "\n";
    ok = ok && good;
  }
  std::cout << (ok ? "fused_softmax: OK" : "fused_softmax: MISMATCH") << "\n";
  return ok ? 0 : 1;
}
