// Eager tensors on the CPU: factories, views, operators with broadcasting and promotion, and the
// registry under them. Checks its results against a direct computation.
#include <cmath>
#include <iostream>

#include <tessera/tessera.h>

using namespace tessera;

int main() {
  manual_seed(42);
  Tensor x = randn({4, 3});
  Tensor w = randn({2, 3});
  Tensor b = zeros({2});

  // A small layer: y = softmax(x @ w.T + b) along the last dimension.
  Tensor y = softmax(linear(x, w, b), -1);
  std::cout << "x =\n" << x << "\nsoftmax(linear(x, w, b)) =\n" << y << "\n";

  // The same by hand, element by element, in double precision.
  bool ok = true;
  for (int64_t i = 0; i < 4; ++i) {
    double logits[2], m = -INFINITY, s = 0;
    for (int64_t o = 0; o < 2; ++o) {
      logits[o] = 0;
      for (int64_t k = 0; k < 3; ++k) logits[o] += x[i][k].item<double>() * w[o][k].item<double>();
      m = std::max(m, logits[o]);
    }
    for (double l : logits) s += std::exp(l - m);
    for (int64_t o = 0; o < 2; ++o) {
      const double want = std::exp(logits[o] - m) / s;
      ok = ok && std::fabs(y[i][o].item<double>() - want) < 1e-5;
    }
  }

  // Views share storage; in-place writes go through them.
  Tensor grid = arange(0, 12, 1, float32).view({3, 4});
  grid.select(1, 0).fill_(-1);
  std::cout << "grid with its first column set to -1:\n" << grid << "\n";
  ok = ok && grid.sum().item<double>() == 66 - (0 + 4 + 8) - 3;

  // Integer tensors promote with float scalars, as in PyTorch.
  Tensor ints = arange(1, 5);
  Tensor halves = ints / 2;
  std::cout << ints << " / 2 = " << halves << "\n";
  ok = ok && halves.dtype() == float32 && halves[0].item<double>() == 0.5;

  std::cout << (ok ? "eager_basics: OK" : "eager_basics: MISMATCH") << "\n";
  return ok ? 0 : 1;
}
