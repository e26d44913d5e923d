// Triton's tutorial 07 (libdevice functions), ported: an asin kernel with the math library's
// function (Triton's `libdevice.asin`, here `tl::asin`), then the same kernel calling a function of
// the user's own library (Triton's `extern_libs` path, here `tl::extern_elementwise` with a C++
// source for the CPU and a CUDA source for GPUs). Both against std::asin in double on fresh
// inputs. Runs on the GPU with `--cuda`.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>

#include <tessera/tessera.h>
#include <tessera/tl.h>

namespace tl = tessera::tl;
using tessera::Tensor;

TL_JIT(asin_kernel, tl::Ptr x_ptr, tl::Ptr y_ptr, tl::Int n_elements, tl::Const BLOCK_SIZE) {
  auto pid = tl::program_id(0);
  auto block_start = pid * BLOCK_SIZE;
  auto offsets = block_start + tl::arange(0, BLOCK_SIZE);
  auto mask = offsets < n_elements;
  auto x = tl::load(x_ptr + offsets, mask);
  x = tl::asin(x);
  tl::store(y_ptr + offsets, x, mask);
}

// The user's library: the same function under another name, from each platform's math library.
const tl::ExternLibrary& my_libdevice() {
  static const tl::ExternLibrary lib{
      "my_libdevice", "static inline float my_asinf(float x) { return __builtin_asinf(x); }",
      "__device__ float my_asinf(float x) { return asinf(x); }"};
  return lib;
}

TL_JIT(asin_kernel_extern, tl::Ptr x_ptr, tl::Ptr y_ptr, tl::Int n_elements, tl::Const BLOCK_SIZE) {
  auto pid = tl::program_id(0);
  auto block_start = pid * BLOCK_SIZE;
  auto offsets = block_start + tl::arange(0, BLOCK_SIZE);
  auto mask = offsets < n_elements;
  auto x = tl::load(x_ptr + offsets, mask);
  x = tl::extern_elementwise(my_libdevice(), {x},
                             {{{tessera::DType::Float32}, "my_asinf", tessera::DType::Float32}});
  tl::store(y_ptr + offsets, x, mask);
}

int main(int argc, char** argv) {
  const bool cuda = argc > 1 && std::strcmp(argv[1], "--cuda") == 0;
  const tessera::Device dev = cuda ? tessera::Device("cuda") : tessera::kCPU;
  const int64_t size = 98432;
  Tensor x = (tessera::rand({size}) * 2 - 1).to(dev);  // asin's domain [-1, 1]
  const Tensor xs = x.cpu().contiguous();
  bool ok = true;
  for (const tl::JITFunction* k : {&asin_kernel, &asin_kernel_extern}) {
    Tensor output = tessera::empty_like(x);
    (*k)[{tl::cdiv(size, 1024)}](x, output, size, tl::meta("BLOCK_SIZE", 1024));
    // Both are the platform math library's asinf: within 2 ulp of asin (docs/kernels.md).
    const Tensor got = output.cpu().contiguous();
    double err = 0;
    for (int64_t i = 0; i < size; ++i) {
      const double d = std::fabs(static_cast<double>(got.data_ptr<float>()[i]) -
                                 std::asin(static_cast<double>(xs.data_ptr<float>()[i])));
      err = std::isnan(d) ? INFINITY : std::max(err, d);
    }
    const bool good = err <= 2.5e-7;
    std::cout << (k == &asin_kernel ? "tl::asin" : "tl::extern_elementwise(my_asinf)") << " on "
              << dev.str() << ": max |error| " << err << (good ? ", matches" : ", MISMATCH")
              << "\n";
    ok = ok && good;
  }
  std::cout << (ok ? "tutorial_07_extern_functions: OK" : "tutorial_07_extern_functions: MISMATCH")
            << "\n";
  return ok ? 0 : 1;
}
