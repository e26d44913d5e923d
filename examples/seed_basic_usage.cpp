// The seed's "basic usage": a user-defined vector-add kernel launched with a grid lambda and
// BLOCK_SIZE=4, printed as the recipe prints it, then the same kernel at a large size. Exits
// non-zero when the kernel disagrees with `x + y`.
#include <iostream>

#include <tessera/tessera.h>
#include <tessera/tl.h>

namespace tl = tessera::tl;
using tessera::Tensor;

TL_JIT(add_kernel, tl::Ptr in_ptr0, tl::Ptr in_ptr1, tl::Ptr out_ptr, tl::Int n_elements,
       tl::Const BLOCK_SIZE) {
  auto pid = tl::program_id(0);
  auto block_start = pid * BLOCK_SIZE;
  auto offsets = block_start + tl::arange(0, BLOCK_SIZE);
  auto mask = offsets < n_elements;
  auto x = tl::load(in_ptr0 + offsets, mask);
  auto y = tl::load(in_ptr1 + offsets, mask);
  auto output = x + y;
  tl::store(out_ptr + offsets, output, mask);
}

Tensor add_fn(const Tensor& x, const Tensor& y, int64_t block = 4) {
  Tensor output = tessera::zeros_like(x);
  auto n_elements = output.numel();
  auto grid = [&](const tl::Meta& meta) {
    return tl::Grid{tl::cdiv(n_elements, meta["BLOCK_SIZE"])};
  };
  add_kernel[grid](x, y, output, n_elements, tl::meta("BLOCK_SIZE", block));
  return output;
}

int main() {
  Tensor x = tessera::randn({4});
  Tensor y = tessera::randn({4});
  Tensor out = add_fn(x, y);
  std::cout << "Vector addition of\nX:\t" << x << "\nY:\t" << y << "\nis equal to\n" << out << "\n";
  bool ok = tessera::equal(out, x + y);

  Tensor a = tessera::randn({(1 << 20) + 3});
  Tensor b = tessera::randn({(1 << 20) + 3});
  ok = ok && tessera::equal(add_fn(a, b, 1024), a + b);
  std::cout << (ok ? "seed_basic_usage: OK" : "seed_basic_usage: MISMATCH") << "\n";
  return ok ? 0 : 1;
}
