// Layer norm forward (Triton's tutorial 05): one program per row, runtime loops over column
// blocks carrying accumulators (tl::Var), mean and reciprocal std stored for a backward pass.
// examples/layer_norm.cpp checks it against the eager `layer_norm`; bench/kernels_cpu.cpp times it
// (kernels in a header are for one translation unit each, as the examples and benchmarks are).
#pragma once

#include <algorithm>

#include <tessera/tessera.h>
#include <tessera/tl.h>

namespace layer_norm_example {

namespace tl = tessera::tl;
using tessera::Tensor;

TL_JIT(layer_norm_fwd, tl::Ptr X, tl::Ptr Y, tl::Ptr W, tl::Ptr B, tl::Ptr Mean, tl::Ptr Rstd,
       tl::Int stride, tl::Int N, tl::Float eps, tl::Const BLOCK_SIZE) {
  auto row = tl::program_id(0);
  auto x_row = X + row * stride;
  auto y_row = Y + row * stride;
  tl::Var acc = tl::zeros({BLOCK_SIZE}, tl::float32);
  tl::range(0, N, BLOCK_SIZE, [&](tl::Tile off) {
    auto cols = off + tl::arange(0, BLOCK_SIZE);
    acc = acc + tl::load(x_row + cols, cols < N, 0.0).to(tl::float32);
  });
  auto mean = tl::sum(acc, 0) / N;
  tl::Var acc2 = tl::zeros({BLOCK_SIZE}, tl::float32);
  tl::range(0, N, BLOCK_SIZE, [&](tl::Tile off) {
    auto cols = off + tl::arange(0, BLOCK_SIZE);
    auto x = tl::load(x_row + cols, cols < N, 0.0).to(tl::float32);
    auto d = tl::where(cols < N, x - mean, 0.0);
    acc2 = acc2 + d * d;
  });
  auto var = tl::sum(acc2, 0) / N;
  auto rstd = 1 / tl::sqrt(var + eps);
  tl::store(Mean + row, mean);
  tl::store(Rstd + row, rstd);
  tl::range(0, N, BLOCK_SIZE, [&](tl::Tile off) {
    auto cols = off + tl::arange(0, BLOCK_SIZE);
    auto mask = cols < N;
    auto w = tl::load(W + cols, mask);
    auto b = tl::load(B + cols, mask);
    auto x = tl::load(x_row + cols, mask, 0.0).to(tl::float32);
    tl::store(y_row + cols, (x - mean) * rstd * w + b, mask);
  });
}

/** Layer norm of each row of `x` into `y`, with each row's mean and 1/std into `mean`, `rstd`. */
inline void layer_norm_into(const Tensor& x, const Tensor& w, const Tensor& b, double eps,
                            const Tensor& y, const Tensor& mean, const Tensor& rstd) {
  const int64_t M = x.size(0).guard_int(), N = x.size(1).guard_int();
  int64_t block = 1;
  while (block < N) block *= 2;
  block = std::min<int64_t>(4096, block);
  layer_norm_fwd[{M}](x, y, w, b, mean, rstd, x.stride(0), N, eps, tl::meta("BLOCK_SIZE", block));
}

inline Tensor layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  const int64_t M = x.size(0).guard_int();
  Tensor y = tessera::empty_like(x), mean = tessera::empty({M}), rstd = tessera::empty({M});
  layer_norm_into(x, w, b, eps, y, mean, rstd);
  return y;
}

}  // namespace layer_norm_example
