// Triton's tutorial 04 (low-memory dropout), ported as written: the mask is not stored but
// regenerated from a seed and each element's offset with tl::rand. Checked on fresh inputs: the
// kept elements are x / (1 - p) and the dropped ones 0, with exactly Triton's mask for the seed
// (its conversion of the Philox words); the same seed gives the same mask, another seed another;
// about 1 - p of the elements are kept. Runs on the GPU with `--cuda`.
#include <cmath>
#include <cstring>
#include <iostream>

#include <tessera/detail/philox.h>
#include <tessera/tessera.h>
#include <tessera/tl.h>

namespace tl = tessera::tl;
using tessera::Tensor;

TL_JIT(seeded_dropout_kernel, tl::Ptr x_ptr, tl::Ptr output_ptr, tl::Int n_elements, tl::Float p,
       tl::Int seed, tl::Const BLOCK_SIZE) {
  // Compute memory offsets of the elements handled by this instance.
  auto pid = tl::program_id(0);
  auto block_start = pid * BLOCK_SIZE;
  auto offsets = block_start + tl::arange(0, BLOCK_SIZE);
  auto mask = offsets < n_elements;
  auto x = tl::load(x_ptr + offsets, mask);
  // Randomly prune it.
  auto random = tl::rand(seed, offsets);
  auto x_keep = random > p;
  auto output = tl::where(x_keep, x / (1 - p), 0.0f);
  tl::store(output_ptr + offsets, output, mask);
}

Tensor seeded_dropout(const Tensor& x, double p, int64_t seed) {
  Tensor output = tessera::empty_like(x);
  const int64_t n_elements = x.numel().guard_int();
  seeded_dropout_kernel[{tl::cdiv(n_elements, 1024)}](x, output, n_elements, p, seed,
                                                      tl::meta("BLOCK_SIZE", 1024));
  return output;
}

// Triton's uint32_to_uniform_float on the host.
float triton_uniform(uint32_t bits) {
  int32_t v;
  std::memcpy(&v, &bits, 4);
  return static_cast<float>(v < 0 ? ~v : v) * 4.656613e-10f;
}

int main(int argc, char** argv) {
  const bool cuda = argc > 1 && std::strcmp(argv[1], "--cuda") == 0;
  const tessera::Device dev = cuda ? tessera::Device("cuda") : tessera::kCPU;
  const int64_t n = 5000;
  const float p = 0.5f;
  Tensor x = tessera::randn({n});
  Tensor out = seeded_dropout(x.to(dev), p, 123).cpu();
  bool ok = true;
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool keep =
        triton_uniform(tessera::philox::random4(123, static_cast<uint64_t>(i)).v[0]) > p;
    const float got = out[i].item<float>(), xi = x[i].item<float>();
    const float want = keep ? xi / (1 - p) : 0.0f;
    if (std::fabs(got - want) > 2e-7f * std::fabs(want)) {
      if (ok) std::cout << "element " << i << ": got " << got << ", want " << want << "\n";
      ok = false;
    }
    kept += keep;
  }
  const bool same = tessera::equal(seeded_dropout(x.to(dev), p, 123).cpu(), out);
  const bool other = !tessera::equal(seeded_dropout(x.to(dev), p, 512).cpu(), out);
  const double frac = static_cast<double>(kept) / static_cast<double>(n);
  std::cout << "dropout p = " << p << " on " << dev.str() << ": Triton's mask "
            << (ok ? "yes" : "NO") << ", kept " << frac << ", same seed same mask "
            << (same ? "yes" : "NO") << ", another seed another mask " << (other ? "yes" : "NO")
            << "\n";
  ok = ok && same && other && std::fabs(frac - (1 - p)) < 0.05;
  std::cout << (ok ? "tutorial_04_dropout: OK" : "tutorial_04_dropout: MISMATCH") << "\n";
  return ok ? 0 : 1;
}
