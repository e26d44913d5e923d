// Layer norm forward (Triton's tutorial 05), checked against the eager `layer_norm` on fresh
// inputs.
#include <iostream>
#include <utility>

#include "layer_norm.h"

using layer_norm_example::layer_norm;
using tessera::Tensor;

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
