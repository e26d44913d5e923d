// Layer norm forward (Triton's tutorial 05): one program per row, runtime loops over column
// blocks carrying accumulators (tl::Var), mean and reciprocal std stored for a backward pass.
// Checked against the eager `layer_norm`.
#include <iostream>

#include <tessera/tessera.h>
#include <tessera/tl.h>

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

Tensor layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  const int64_t M = x.size(0), N = x.size(1);
  Tensor y = tessera::empty_like(x), mean = tessera::empty({M}), rstd = tessera::empty({M});
  const int64_t block = std::min<int64_t>(4096, [&] {
    int64_t p = 1;
    while (p < N) p *= 2;
    return p;
  }());
  layer_norm_fwd[{M}](x, y, w, b, mean, rstd, x.stride(0), N, eps, tl::meta("BLOCK_SIZE", block));
  return y;
}

int main() {
  bool ok = true;
  for (auto [M, N] : {std::pair<int64_t, int64_t>{1151, 8192}, {4096, 4096}, {7, 33}}) {
    Tensor x = tessera::randn({M, N}) * 2 + 1, w = tessera::rand({N}), b = tessera::randn({N});
    const bool good = tessera::allclose(layer_norm(x, w, b, 1e-5),
                                        tessera::layer_norm(x, {N}, w, b, 1e-5), 1e-4, 1e-5);
    std::cout << "layer_norm " << M << "x" << N << ": " << (good ? "matches" : "MISMATCH") << "\n";
    ok = ok && good;
  }
  std::cout << (ok ? "layer_norm: OK" : "layer_norm: MISMATCH") << "\n";
  return ok ? 0 : 1;
}
