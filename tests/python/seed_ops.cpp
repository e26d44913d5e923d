// A library of C++ operators for the Python tests and docs/python.md: the seed's add kernel as a
// triton_op, and mysin (a triton_op whose backward calls the mycos triton_op), registered when the
// library is loaded (`tessera.load_library(path)`).
#include <tessera/library.h>
#include <tessera/tessera.h>
#include <tessera/tl.h>

namespace tl = tessera::tl;
using tessera::Tensor;

namespace {

TL_JIT(add_kernel, tl::Ptr in_ptr0, tl::Ptr in_ptr1, tl::Ptr out_ptr, tl::Int n_elements,
       tl::Const BLOCK_SIZE) {
  auto offsets = tl::program_id(0) * BLOCK_SIZE + tl::arange(0, BLOCK_SIZE);
  auto mask = offsets < n_elements;
  tl::store(out_ptr + offsets,
            tl::load(in_ptr0 + offsets, mask) + tl::load(in_ptr1 + offsets, mask), mask);
}

TL_JIT(sin_kernel, tl::Ptr in_ptr, tl::Ptr out_ptr, tl::Int n, tl::Const BLOCK_SIZE) {
  auto offsets = tl::program_id(0) * BLOCK_SIZE + tl::arange(0, BLOCK_SIZE);
  auto mask = offsets < n;
  tl::store(out_ptr + offsets, tl::sin(tl::load(in_ptr + offsets, mask)), mask);
}

TL_JIT(cos_kernel, tl::Ptr in_ptr, tl::Ptr out_ptr, tl::Int n, tl::Const BLOCK_SIZE) {
  auto offsets = tl::program_id(0) * BLOCK_SIZE + tl::arange(0, BLOCK_SIZE);
  auto mask = offsets < n;
  tl::store(out_ptr + offsets, tl::cos(tl::load(in_ptr + offsets, mask)), mask);
}

// out = f(x) elementwise with one of the kernels above, 1024 elements per program.
template <class Kernel>
Tensor unary(Kernel& kernel, const Tensor& x) {
  Tensor out = tessera::empty_like(x);
  const auto n = x.numel();  // a SymInt: under the compiler it stays symbolic
  tessera::library::wrap_triton(kernel)[{tl::cdiv(n, 1024)}](x, out, n,
                                                             tl::meta("BLOCK_SIZE", 1024));
  return out;
}

const bool registered = [] {
  using namespace tessera::library;
  static auto add = triton_op("pyseed::add",
                              [](const Tensor& x, const Tensor& y) {
                                Tensor out = tessera::empty_like(x);
                                const auto n = out.numel();
                                wrap_triton(add_kernel)[{tl::cdiv(n, 1024)}](
                                    x, y, out, n, tl::meta("BLOCK_SIZE", 1024));
                                return out;
                              },
                              {.mutates_args = {}, .arg_names = {"x", "y"}});
  static auto mycos =
      triton_op("pyseed::mycos", [](const Tensor& x) { return unary(cos_kernel, x); },
                {.mutates_args = {}, .arg_names = {"x"}});
  static auto mysin =
      triton_op("pyseed::mysin", [](const Tensor& x) { return unary(sin_kernel, x); },
                {.mutates_args = {}, .arg_names = {"x"}});
  (void)add;
  (void)mycos;
  (void)mysin;
  return true;
}();

}  // namespace
