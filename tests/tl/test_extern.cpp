// The user's own element functions in kernels: tl::extern_elementwise (a library with C++ and
// CUDA sources, overloads picked by argument dtypes) and tl::inline_asm_elementwise (PTX on CUDA,
// a C++ body on the CPU); against host references, compiled and checked, and their refusals: the
// interpreter, a backend without its source, a missing overload, bad constraints.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "tessera/tessera.h"
#include "tessera/tl.h"
#include "testing.h"
#include "tl_testing.h"

using namespace tessera;
using namespace tessera::testing;
namespace tl = tessera::tl;

namespace {

// A small library: a soft clip in float32 and float64, and an integer gcd (a loop: not something
// an expression could inline).
const tl::ExternLibrary& mylib() {
  static const tl::ExternLibrary lib{
      "mylib",
      R"(static inline float my_soft_clip(float x, float k) { return k * __builtin_tanhf(x / k); }
static inline double my_soft_clip_d(double x, double k) { return k * __builtin_tanh(x / k); }
static inline int32_t my_gcd(int32_t a, int32_t b) {
  a = a < 0 ? -a : a;
  b = b < 0 ? -b : b;
  while (b != 0) { int32_t t = a % b; a = b; b = t; }
  return a;
})",
      R"(__device__ float my_soft_clip(float x, float k) { return k * tanhf(x / k); }
__device__ double my_soft_clip_d(double x, double k) { return k * tanh(x / k); }
__device__ int32_t my_gcd(int32_t a, int32_t b) {
  a = a < 0 ? -a : a;
  b = b < 0 ? -b : b;
  while (b != 0) { int32_t t = a % b; a = b; b = t; }
  return a;
})"};
  return lib;
}

const std::vector<tl::ExternSymbol>& soft_clip() {
  static const std::vector<tl::ExternSymbol> s = {
      {{DType::Float32, DType::Float32}, "my_soft_clip", DType::Float32},
      {{DType::Float64, DType::Float64}, "my_soft_clip_d", DType::Float64}};
  return s;
}

TL_JIT(extern_kernel, tl::Ptr x, tl::Ptr xd, tl::Ptr a, tl::Ptr b, tl::Ptr out, tl::Ptr outd,
       tl::Ptr g, tl::Int n, tl::Const BLOCK) {
  auto o = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = o < n;
  // A tile and a number (a float32 literal), broadcast together.
  tl::store(out + o, tl::extern_elementwise(mylib(), {tl::load(x + o, m), 2.0f}, soft_clip()), m);
  tl::store(outd + o,
            tl::extern_elementwise(mylib(), {tl::load(xd + o, m), tl::load(xd + o, m) * 0.0 + 3.0},
                                   soft_clip()),
            m);
  tl::store(g + o,
            tl::extern_elementwise(mylib(), {tl::load(a + o, m), tl::load(b + o, m)},
                                   {{{DType::Int32, DType::Int32}, "my_gcd", DType::Int32}}),
            m);
}

TEST(Extern, ALibraryFunctionPerElementPickedByDtypes) {
  const int64_t n = 1000;
  Tensor x = randn({n}) * 4, xd = (randn({n}) * 4).to(DType::Float64);
  Tensor a = randint(-1000, 1000, {n}, TensorOptions().dtype(DType::Int32)),
         b = randint(-1000, 1000, {n}, TensorOptions().dtype(DType::Int32));
  compiled_and_checked([&](const char* mode) {
    Tensor out = empty({n}), outd = empty({n}, TensorOptions().dtype(DType::Float64)),
           g = empty({n}, TensorOptions().dtype(DType::Int32));
    poison(out);
    poison(outd);
    poison(g);
    extern_kernel[{tl::cdiv(n, 256)}](x, xd, a, b, out, outd, g, n, tl::meta("BLOCK", 256));
    for (int64_t i = 0; i < n; ++i) {
      const float xv = x[i].item<float>();
      EXPECT_NEAR(out[i].item<float>(), 2.0f * std::tanh(xv / 2.0f), 1e-6) << mode << " " << xv;
      const double dv = xd[i].item<double>();
      EXPECT_NEAR(outd[i].item<double>(), 3.0 * std::tanh(dv / 3.0), 1e-14) << mode << " " << dv;
      const int32_t av = a[i].item<int32_t>(), bv = b[i].item<int32_t>();
      EXPECT_EQ(g[i].item<int32_t>(), std::gcd(av, bv))
          << mode << " gcd(" << av << ", " << bv << ")";
    }
  });
}

TL_JIT(extern_missing_kernel, tl::Ptr x, tl::Const WHICH) {
  auto v = tl::load(x + tl::arange(0, 16));
  if (WHICH.int_value() == 0) {  // no float16 overload
    tl::store(x, tl::sum(tl::extern_elementwise(mylib(), {v.to(tl::float16), 1.0f}, soft_clip())));
  } else if (WHICH.int_value() == 1) {  // a library without CPU source
    static const tl::ExternLibrary gpu_only{"gpu_only", "",
                                            "__device__ float f(float x) { return x; }"};
    tl::store(x + tl::arange(0, 16),
              tl::extern_elementwise(gpu_only, {v}, {{{DType::Float32}, "f", DType::Float32}}));
  } else if (WHICH.int_value() == 2) {  // float32 and int32: no such overload
    tl::store(x + tl::arange(0, 16), tl::extern_elementwise(mylib(), {v, 3}, soft_clip()));
  } else {
    tl::store(x + tl::arange(0, 16),
              tl::extern_elementwise(
                  mylib(), {v, v},
                  {{{DType::Float32, DType::Float32}, "not an identifier", DType::Float32}}));
  }
}

TEST(Extern, RefusalsNameTheFunctionAndTheLine) {
  Tensor x = zeros({16});
  std::string e;
  {
    ScopedEnv compiled("TESSERA_INTERPRET", "0");  // also in CTest's interpreted pass
    e = error_of([&] { extern_missing_kernel[{1}](x, tl::meta("WHICH", 0)); });
    EXPECT_NE(e.find("got <16x fp16> (convert it with .to(tl::float32) first)"), std::string::npos)
        << e;
    e = error_of([&] { extern_missing_kernel[{1}](x, tl::meta("WHICH", 1)); });
    EXPECT_NE(e.find("calls 'f' of library 'gpu_only', which has no CPU (C++) source"),
              std::string::npos)
        << e;
    EXPECT_NE(e.find("test_extern.cpp"), std::string::npos) << e;
    e = error_of([&] { extern_missing_kernel[{1}](x, tl::meta("WHICH", 2)); });
    EXPECT_NE(e.find("no function for arguments (float32, int32); it has:\n  (float32, float32) -> "
                     "my_soft_clip : float32\n  (float64, float64) -> my_soft_clip_d : float64"),
              std::string::npos)
        << e;
    e = error_of([&] { extern_missing_kernel[{1}](x, tl::meta("WHICH", 3)); });
    EXPECT_NE(e.find("'not an identifier' is not a C identifier"), std::string::npos) << e;
  }
  // The interpreter runs no compiled code: it refuses before any program runs.
  ScopedEnv interpret("TESSERA_INTERPRET", "1");
  const int64_t n = 8;
  Tensor f = zeros({n}), d = zeros({n}, TensorOptions().dtype(DType::Float64)),
         i = ones({n}, TensorOptions().dtype(DType::Int32));
  e = error_of<CompileError>(
      [&] { extern_kernel[{1}](f, d, i, i, f, d, i, n, tl::meta("BLOCK", 8)); });
  EXPECT_NE(e.find("kernel 'extern_kernel': tl::extern_elementwise calls 'my_soft_clip' of "
                   "library 'mylib', compiled code that the interpreter"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("test_extern.cpp"), std::string::npos) << e;
}

// Triton's inline-asm example shape: one 32-bit output, integer and float arguments. The CPU runs
// the C++ body; CUDA the PTX (compiled by NVRTC in the nvrtc pass, run in the GPU pass).
TL_JIT(asm_kernel, tl::Ptr x, tl::Ptr y, tl::Ptr out, tl::Ptr fout, tl::Int n, tl::Const BLOCK) {
  auto o = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = o < n;
  auto a = tl::load(x + o, m, 0), b = tl::load(y + o, m, 0);
  // (a << 3) + b with one PTX instruction (shl then add: mad with a power of two).
  tl::store(out + o,
            tl::inline_asm_elementwise("mad.lo.s32 $0, $1, 8, $2;", "=r,r,r", {a, b}, tl::int32,
                                       true, 1, "return a0 * 8 + a1;"),
            m);
  auto f = a.to(tl::float32);
  tl::store(fout + o,
            tl::inline_asm_elementwise("abs.f32 $0, $1;", "=f,f", {f}, tl::float32, true, 1,
                                       "return a0 < 0 ? -a0 : a0;"),
            m);
}

TL_JIT(asm_bad_kernel, tl::Ptr x, tl::Const WHICH) {
  auto a = tl::load(x + tl::arange(0, 16));
  if (WHICH.int_value() == 0) {  // no CPU body
    tl::store(x + tl::arange(0, 16),
              tl::inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", {a}, tl::int32));
  } else if (WHICH.int_value() == 1) {  // two arguments, one input constraint
    tl::store(x + tl::arange(0, 16),
              tl::inline_asm_elementwise("add.s32 $0, $1, $2;", "=r,r", {a, a}, tl::int32));
  } else if (WHICH.int_value() == 2) {  // pack 4
    tl::store(x + tl::arange(0, 16),
              tl::inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", {a}, tl::int32, true, 4));
  } else {  // a 64-bit value in a 32-bit register
    tl::store(x + tl::arange(0, 16),
              tl::inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", {a.to(tl::int64)}, tl::int32,
                                         true, 1, "return (int32_t)a0;"));
  }
}

TEST(Extern, InlineAsmRunsItsCppBodyOnTheCpu) {
  const int64_t n = 300;
  Tensor x = randint(-100, 100, {n}, TensorOptions().dtype(DType::Int32)),
         y = randint(-100, 100, {n}, TensorOptions().dtype(DType::Int32));
  compiled_and_checked([&](const char* mode) {
    Tensor out = empty({n}, TensorOptions().dtype(DType::Int32)), fout = empty({n});
    poison(out);
    poison(fout);
    asm_kernel[{tl::cdiv(n, 128)}](x, y, out, fout, n, tl::meta("BLOCK", 128));
    for (int64_t i = 0; i < n; ++i) {
      const int32_t a = x[i].item<int32_t>(), b = y[i].item<int32_t>();
      EXPECT_EQ(out[i].item<int32_t>(), a * 8 + b) << mode;
      EXPECT_EQ(fout[i].item<float>(), std::fabs(static_cast<float>(a))) << mode;
    }
  });
  Tensor z = zeros({16}, TensorOptions().dtype(DType::Int32));
  ScopedEnv compiled("TESSERA_INTERPRET", "0");
  std::string e = error_of([&] { asm_bad_kernel[{1}](z, tl::meta("WHICH", 0)); });
  EXPECT_NE(e.find("of library 'inline_asm', which has no CPU (C++) source"), std::string::npos)
      << e;
  e = error_of([&] { asm_bad_kernel[{1}](z, tl::meta("WHICH", 1)); });
  EXPECT_NE(e.find("must be one output (\"=r\") then one per argument (2)"), std::string::npos)
      << e;
  e = error_of([&] { asm_bad_kernel[{1}](z, tl::meta("WHICH", 2)); });
  EXPECT_NE(e.find("pack = 4 is not supported"), std::string::npos) << e;
  e = error_of([&] { asm_bad_kernel[{1}](z, tl::meta("WHICH", 3)); });
  EXPECT_NE(e.find("constraint 'r' cannot hold int64"), std::string::npos) << e;
}

}  // namespace
