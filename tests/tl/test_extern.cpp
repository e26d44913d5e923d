// The user's own element functions in kernels: tl::extern_elementwise (a library with C++ and
// CUDA sources, or precompiled objects linked in; overloads picked by argument dtypes) and
// tl::inline_asm_elementwise (PTX on CUDA, a C++ body on the CPU); against host references,
// compiled and checked, and their refusals: the interpreter, a backend without its source, a
// missing overload, bad constraints, objects that are missing, unlinkable or lack a function.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
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
  } else if (WHICH.int_value() == 2) {  // pack 3 of int16: not whole registers
    tl::store(x + tl::arange(0, 16),
              tl::inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", {a.to(tl::int16)}, tl::int16,
                                         true, 3, "return a0;")
                  .to(tl::int32));
  } else if (WHICH.int_value() == 5) {  // two outputs of impure assembly
    auto two =
        tl::inline_asm_elementwise("mov.b32 $0, $2; mov.b32 $1, $2;", "=r,=r,r", {a},
                                   {tl::int32, tl::int32}, false, 1, {"return a0;", "return a0;"});
    tl::store(x + tl::arange(0, 16), two[0] + two[1]);
  } else if (WHICH.int_value() == 4) {  // pack 2 of int32: two registers each, one given
    tl::store(x + tl::arange(0, 16), tl::inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", {a},
                                                                tl::int32, true, 2, "return a0;"));
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
  EXPECT_NE(e.find("must be 1 output (\"=r\") then one per argument register (1, 1)"),
            std::string::npos)
      << e;
  e = error_of([&] { asm_bad_kernel[{1}](z, tl::meta("WHICH", 2)); });
  EXPECT_NE(e.find("pack = 3 does not fill whole registers of the result (2 int16 per register)"),
            std::string::npos)
      << e;
  e = error_of([&] { asm_bad_kernel[{1}](z, tl::meta("WHICH", 5)); });
  EXPECT_NE(e.find("impure assembly with 2 outputs is not supported"), std::string::npos) << e;
  e = error_of([&] { asm_bad_kernel[{1}](z, tl::meta("WHICH", 4)); });
  EXPECT_NE(e.find("must be 2 outputs (\"=r\") then one per argument register (2), with pack = 2"),
            std::string::npos)
      << e;
  e = error_of([&] { asm_bad_kernel[{1}](z, tl::meta("WHICH", 3)); });
  EXPECT_NE(e.find("constraint 'r' cannot hold int64"), std::string::npos) << e;
}

// Packed inline assembly (Triton's `pack`): narrow values share 32-bit registers, a pack of
// wider ones takes a register each; the asm runs once per element with the element in every lane
// and the result is the first lane. Triton's own example (four uint8 in a register), a float32
// pair converted to a bfloat16x2 register, and half2 arithmetic on float16 bits. The CPU runs the
// C++ bodies; the nvrtc pass compiles the PTX, the GPU pass runs it against them.
TL_JIT(asm_packed_kernel, tl::Ptr x8, tl::Ptr y8, tl::Ptr xf, tl::Ptr ybf, tl::Ptr h, tl::Ptr yh,
       tl::Int n, tl::Const BLOCK) {
  auto o = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = o < n;
  tl::store(y8 + o,
            tl::inline_asm_elementwise("and.b32 $0, $1, 0x1F1F1F1F; \n shl.b32 $0, $0, 3;", "=r,r",
                                       {tl::load(x8 + o, m, 0)}, tl::int8, true, 4,
                                       "return (int8_t)((a0 & 0x1F) << 3);"),
            m);
  tl::store(
      ybf + o,
      tl::inline_asm_elementwise(
          "cvt.rn.bf16x2.f32 $0, $2, $1;", "=r,f,f", {tl::load(xf + o, m, 0.0f)}, tl::bfloat16,
          true, 2,
          "uint32_t u = trt::f2u(a0); return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);"),
      m);
  auto hv = tl::load(h + o, m, 0.0f);
  tl::store(yh + o,
            tl::inline_asm_elementwise(
                "add.rn.f16x2 $0, $1, $2;", "=r,r,r", {hv, hv * 2.0f}, tl::float16, true, 2,
                "return trt::float_to_half(trt::half_to_float(a0) + trt::half_to_float(a1));"),
            m);
}

TEST(Extern, PackedInlineAsmGivesEachElementItsLane) {
  const int64_t n = 1000;
  Tensor x8 = randint(0, 256, {n}, TensorOptions().dtype(DType::UInt8));
  Tensor xf = randn({n}) * 5;
  // multiples of 1/64 in [-8, 8]: exact in float16, and so are their sums
  Tensor h = (randint(-512, 512, {n}).to(DType::Float32) / 64.0f).to(DType::Float16);
  compiled_and_checked([&](const char* mode) {
    Tensor y8 = empty({n}, TensorOptions().dtype(DType::Int8)),
           ybf = empty({n}, TensorOptions().dtype(DType::BFloat16)),
           yh = empty({n}, TensorOptions().dtype(DType::Float16));
    poison(y8);
    poison(ybf);
    poison(yh);
    asm_packed_kernel[{tl::cdiv(n, 256)}](x8, y8, xf, ybf, h, yh, n, tl::meta("BLOCK", 256));
    const Tensor want_bf = xf.to(DType::BFloat16), want_h = (h.to(DType::Float32) * 3.0f);
    for (int64_t i = 0; i < n; ++i) {
      const int v = x8[i].item<uint8_t>();
      ASSERT_EQ(y8[i].item<int8_t>(), static_cast<int8_t>((v & 0x1F) << 3)) << mode << " " << i;
      ASSERT_EQ(ybf[i].to(DType::Float32).item<float>(),
                want_bf[i].to(DType::Float32).item<float>())
          << mode << " " << i;
      ASSERT_EQ(yh[i].to(DType::Float32).item<float>(), want_h[i].item<float>())
          << mode << " " << i;
    }
  });
}

// Several outputs (Triton's tuple dtype): one statement writes all of them, each a tile. A pair
// of 32-bit results (min and max), and a packed pair (the low and high nibbles of four bytes a
// register).
TL_JIT(asm_outputs_kernel, tl::Ptr x, tl::Ptr y, tl::Ptr lo, tl::Ptr hi, tl::Ptr b, tl::Ptr nlo,
       tl::Ptr nhi, tl::Int n, tl::Const BLOCK) {
  auto o = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = o < n;
  // (every argument is read before an output is written: an output may share an input's
  // register)
  auto mm = tl::inline_asm_elementwise(
      "{ .reg .s32 t; \n min.s32 t, $2, $3; \n max.s32 $1, $2, $3; \n mov.b32 $0, t; }",
      "=r,=r,r,r", {tl::load(x + o, m, 0), tl::load(y + o, m, 0)}, {tl::int32, tl::int32}, true, 1,
      {"return a0 < a1 ? a0 : a1;", "return a0 < a1 ? a1 : a0;"});
  tl::store(lo + o, mm[0], m);
  tl::store(hi + o, mm[1], m);
  auto nib = tl::inline_asm_elementwise(
      "{ .reg .b32 t; \n shr.b32 t, $2, 4; \n and.b32 $0, $2, 0x0F0F0F0F; \n "
      "and.b32 $1, t, 0x0F0F0F0F; }",
      "=r,=r,r", {tl::load(b + o, m, 0)}, {tl::uint8, tl::uint8}, true, 4,
      {"return (uint8_t)(a0 & 15);", "return (uint8_t)(a0 >> 4);"});
  tl::store(nlo + o, nib[0], m);
  tl::store(nhi + o, nib[1], m);
}

TEST(Extern, InlineAsmWithSeveralOutputsGivesATilePerOutput) {
  const int64_t n = 700;
  Tensor x = randint(-1000, 1000, {n}, TensorOptions().dtype(DType::Int32)),
         y = randint(-1000, 1000, {n}, TensorOptions().dtype(DType::Int32)),
         b = randint(0, 256, {n}, TensorOptions().dtype(DType::UInt8));
  compiled_and_checked([&](const char* mode) {
    const TensorOptions i32 = TensorOptions().dtype(DType::Int32),
                        u8 = TensorOptions().dtype(DType::UInt8);
    Tensor lo = empty({n}, i32), hi = empty({n}, i32), nlo = empty({n}, u8), nhi = empty({n}, u8);
    for (Tensor* t : {&lo, &hi, &nlo, &nhi}) poison(*t);
    asm_outputs_kernel[{tl::cdiv(n, 128)}](x, y, lo, hi, b, nlo, nhi, n, tl::meta("BLOCK", 128));
    for (int64_t i = 0; i < n; ++i) {
      const int32_t a = x[i].item<int32_t>(), c = y[i].item<int32_t>();
      ASSERT_EQ(lo[i].item<int32_t>(), std::min(a, c)) << mode << " " << i;
      ASSERT_EQ(hi[i].item<int32_t>(), std::max(a, c)) << mode << " " << i;
      const int v = b[i].item<uint8_t>();
      ASSERT_EQ(nlo[i].item<uint8_t>(), v & 15) << mode << " " << i;
      ASSERT_EQ(nhi[i].item<uint8_t>(), v >> 4) << mode << " " << i;
    }
  });
}

// ---- Precompiled libraries (Triton's `lib_path`): files the test builds in a fresh folder. Each
// variant adds its own constant, so a result says which file was linked.

const char* kCpuLib = R"(#include <stdint.h>
extern "C" float obj_poly(float x, float y) { return x * x - 3.0f * y + OFFSET; }
extern "C" int32_t obj_collatz(int32_t n) {
  if (n < 1) return -1;
  int32_t steps = 0;
  while (n != 1) { n = (n % 2) ? 3 * n + 1 : n / 2; ++steps; }
  return steps;
}
)";
const char* kCudaLib = R"(#include <stdint.h>
extern "C" __device__ float obj_poly(float x, float y) { return x * x - 3.0f * y + OFFSET; }
extern "C" __device__ int32_t obj_collatz(int32_t n) {
  if (n < 1) return -1;
  int32_t steps = 0;
  while (n != 1) { n = (n % 2) ? 3 * n + 1 : n / 2; ++steps; }
  return steps;
}
)";

std::string run_or_fail(const std::string& cmd) {
  const int rc = std::system((cmd + " > /dev/null 2>&1").c_str());
  if (rc != 0) ADD_FAILURE() << "failed (" << rc << "): " << cmd;
  return cmd;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// nvcc of $CUDA_HOME or /usr/local/cuda ("" when there is none).
std::string nvcc() {
  for (std::string home : {std::string(std::getenv("CUDA_HOME") ? std::getenv("CUDA_HOME") : ""),
                           std::string("/usr/local/cuda")}) {
    if (!home.empty() && std::filesystem::exists(home + "/bin/nvcc")) return home + "/bin/nvcc";
  }
  return "";
}

// Whether this process also generates CUDA for every kernel (the nvrtc, cuda and sim passes).
bool crosschecking() {
  const char* c = std::getenv("TESSERA_CROSSCHECK");
  return c && *c;
}

struct Prebuilt {
  std::string dir;
  std::vector<tl::ExternLibrary> libs;  // by WHICH: .o, .a, .so (CUDA: rdc .o, PTX, LTO-IR)
};

// Builds variant `which` (offset `offset`) into `dir`: its CPU file and, when crosschecking, its
// CUDA file.
tl::ExternLibrary build_variant(const std::string& dir, int which, int offset) {
  const std::string tag = std::to_string(which) + "_" + std::to_string(offset);
  const std::string def = " -DOFFSET=" + std::to_string(offset) + ".0f";
  write_text(dir + "/lib.cpp", kCpuLib);
  tl::ExternLibrary lib;
  lib.name = "prebuilt" + std::to_string(which);
  const std::string cxx = "c++ -O2 -fPIC" + def;
  if (which == 0) {
    run_or_fail(cxx + " -c " + dir + "/lib.cpp -o " + dir + "/libpoly.o");
    lib.cpu_objects = {dir + "/libpoly.o"};
  } else if (which == 1) {
    run_or_fail(cxx + " -c " + dir + "/lib.cpp -o " + dir + "/poly_a.o");
    std::filesystem::remove(dir + "/libpoly.a");
    run_or_fail("ar rcs " + dir + "/libpoly.a " + dir + "/poly_a.o");
    lib.cpu_objects = {dir + "/libpoly.a"};
  } else {
    run_or_fail(cxx + " -shared " + dir + "/lib.cpp -o " + dir + "/libpoly" + tag + ".so");
    lib.cpu_objects = {dir + "/libpoly" + tag + ".so"};
  }
  if (!crosschecking()) return lib;
  const std::string cu = nvcc();
  EXPECT_FALSE(cu.empty())
      << "TESSERA_CROSSCHECK is set but there is no nvcc to build CUDA objects";
  if (cu.empty()) return lib;
  write_text(dir + "/lib.cu", kCudaLib);
  const std::string base = cu + " -arch=sm_90 -rdc=true" + def + " " + dir + "/lib.cu";
  if (which == 0) {
    run_or_fail(base + " -c -o " + dir + "/libpoly_cuda.o");
    lib.cuda_objects = {dir + "/libpoly_cuda.o"};
  } else if (which == 1) {
    run_or_fail(base + " -ptx -o " + dir + "/libpoly.ptx");
    lib.cuda_objects = {dir + "/libpoly.ptx"};
  } else {
    run_or_fail(cu + " -gencode arch=compute_90,code=lto_90 -dc" + def + " " + dir + "/lib.cu -o " +
                dir + "/libpoly_lto" + tag + ".o");
    lib.cuda_objects = {dir + "/libpoly_lto" + tag + ".o"};
  }
  return lib;
}

Prebuilt& prebuilt() {
  static Prebuilt* p = [] {
    auto* b = new Prebuilt();
    // (the folder goes when the process ends; loaded kernels keep their mapped copies)
    static struct Remove {
      Prebuilt* of = nullptr;
      ~Remove() {
        std::error_code ec;
        if (of && !of->dir.empty()) std::filesystem::remove_all(of->dir, ec);
      }
    } remove;
    remove.of = b;
    std::string tmpl = (std::filesystem::temp_directory_path() / "tessera-extern-XXXXXX").string();
    b->dir = ::mkdtemp(tmpl.data()) ? tmpl : std::string();
    for (int w = 0; w < 3; ++w) b->libs.push_back(build_variant(b->dir, w, w + 1));
    return b;
  }();
  return *p;
}

const std::vector<tl::ExternSymbol>& poly_symbols() {
  static const std::vector<tl::ExternSymbol> s = {
      {{DType::Float32, DType::Float32}, "obj_poly", DType::Float32}};
  return s;
}

TL_JIT(prebuilt_kernel, tl::Ptr x, tl::Ptr y, tl::Ptr start, tl::Ptr out, tl::Ptr steps, tl::Int n,
       tl::Const WHICH, tl::Const BLOCK) {
  const tl::ExternLibrary& lib = prebuilt().libs.at(static_cast<size_t>(WHICH.int_value()));
  auto o = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = o < n;
  tl::store(out + o,
            tl::extern_elementwise(lib, {tl::load(x + o, m), tl::load(y + o, m)}, poly_symbols()),
            m);
  tl::store(steps + o,
            tl::extern_elementwise(lib, {tl::load(start + o, m, 1)},
                                   {{{DType::Int32}, "obj_collatz", DType::Int32}}),
            m);
}

int32_t collatz_steps(int32_t v) {
  if (v < 1) return -1;
  int32_t s = 0;
  for (int64_t k = v; k != 1; ++s) k = (k % 2) ? 3 * k + 1 : k / 2;
  return s;
}

// Runs every variant and checks each element against the host (`offsets[w]`: the constant the
// file linked for variant w adds).
void expect_prebuilt_results(const std::vector<int>& offsets) {
  const int64_t n = 777;
  Tensor x = randn({n}) * 3, y = randn({n}) * 3;
  Tensor start = randint(-5, 3000, {n}, TensorOptions().dtype(DType::Int32));
  compiled_and_checked([&](const char* mode) {
    for (int w = 0; w < 3; ++w) {
      Tensor out = empty({n}), steps = empty({n}, TensorOptions().dtype(DType::Int32));
      poison(out);
      poison(steps);
      prebuilt_kernel[{tl::cdiv(n, 256)}](x, y, start, out, steps, n, tl::meta("WHICH", w),
                                          tl::meta("BLOCK", 256));
      for (int64_t i = 0; i < n; ++i) {
        const float xv = x[i].item<float>(), yv = y[i].item<float>();
        const float want = xv * xv - 3.0f * yv + static_cast<float>(offsets[w]);
        ASSERT_NEAR(out[i].item<float>(), want, 1e-5f * (1 + std::fabs(want)))
            << mode << " variant " << w << " at " << i;
        ASSERT_EQ(steps[i].item<int32_t>(), collatz_steps(start[i].item<int32_t>()))
            << mode << " variant " << w << " at " << i;
      }
    }
  });
}

TEST(Extern, PrecompiledObjectsArchivesAndSharedObjectsLinkIntoKernels) {
  ASSERT_FALSE(prebuilt().dir.empty());
  expect_prebuilt_results({1, 2, 3});
  // New bytes at the same path are a new kernel: the file's digest is in its source (and so in
  // its cache key), not only its path.
  prebuilt().libs[1] = build_variant(prebuilt().dir, 1, 7);
  prebuilt_kernel.clear_memory_cache();
  expect_prebuilt_results({1, 7, 3});
}

TL_JIT(prebuilt_bad_kernel, tl::Ptr x, tl::Const WHICH) {
  auto v = tl::load(x + tl::arange(0, 16));
  const Prebuilt& p = prebuilt();
  tl::ExternLibrary lib = p.libs[0];
  std::vector<tl::ExternSymbol> symbols = poly_symbols();
  if (WHICH.int_value() == 0) {  // a file that is not there
    lib.cpu_objects = {p.dir + "/absent.o"};
  } else if (WHICH.int_value() == 1) {  // source and objects for one backend
    lib.cpu_source = "static inline float obj_poly(float x, float y) { return x; }";
  } else if (WHICH.int_value() == 2) {  // a function the files do not define
    symbols[0].symbol = "obj_absent";
  } else if (WHICH.int_value() == 3) {  // not an object file
    lib.cpu_objects = {p.dir + "/not_an_object.o"};
  } else {  // one symbol called with two signatures
    tl::store(
        x + tl::arange(0, 16),
        tl::extern_elementwise(lib, {v.to(tl::float64), v.to(tl::float64)},
                               {{{DType::Float64, DType::Float64}, "obj_poly", DType::Float64}}));
  }
  tl::store(x + tl::arange(0, 16), tl::extern_elementwise(lib, {v, v}, symbols));
}

TEST(Extern, PrecompiledObjectsThatCannotLinkAreClearErrors) {
  ASSERT_FALSE(prebuilt().dir.empty());
  write_text(prebuilt().dir + "/not_an_object.o", "this is text, not an ELF object\n");
  ScopedEnv compiled("TESSERA_INTERPRET", "0");
  Tensor x = zeros({16});
  std::string e = error_of([&] { prebuilt_bad_kernel[{1}](x, tl::meta("WHICH", 0)); });
  EXPECT_NE(e.find("cannot read the CPU object '" + prebuilt().dir +
                   "/absent.o': No such file or directory"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("test_extern.cpp"), std::string::npos) << e;
  e = error_of([&] { prebuilt_bad_kernel[{1}](x, tl::meta("WHICH", 1)); });
  EXPECT_NE(e.find("gives both CPU source and CPU objects"), std::string::npos) << e;
  e = error_of<CompileError>([&] { prebuilt_bad_kernel[{1}](x, tl::meta("WHICH", 2)); });
  EXPECT_NE(e.find("kernel 'prebuilt_bad_kernel' links the extern functions' objects '" +
                   prebuilt().dir + "/libpoly.o', but the loader refuses it"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("undefined symbol: obj_absent"), std::string::npos) << e;
  e = error_of<CompileError>([&] { prebuilt_bad_kernel[{1}](x, tl::meta("WHICH", 3)); });
  EXPECT_NE(e.find("kernel 'prebuilt_bad_kernel': linking the extern functions' objects '" +
                   prebuilt().dir + "/not_an_object.o' failed"),
            std::string::npos)
      << e;
  e = error_of<CompileError>([&] { prebuilt_bad_kernel[{1}](x, tl::meta("WHICH", 4)); });
  EXPECT_NE(e.find("calls 'obj_poly' of library 'prebuilt0' with two signatures"),
            std::string::npos)
      << e;
}

// The CUDA side of a library whose CPU objects define a function that its CUDA objects do not:
// the kernel builds for the CPU, and nvJitLink's refusal names the kernel, the file and the
// function (the nvrtc and cuda passes; elsewhere no CUDA is generated).
TL_JIT(prebuilt_cuda_missing_kernel, tl::Ptr x) {
  tl::ExternLibrary lib = prebuilt().libs[0];
  lib.cuda_objects = {prebuilt().dir + "/empty_cuda.o"};
  auto v = tl::load(x + tl::arange(0, 16));
  tl::store(x + tl::arange(0, 16), tl::extern_elementwise(lib, {v, v}, poly_symbols()));
}

TEST(Extern, CudaObjectsWithoutTheFunctionAreAClearError) {
  if (!crosschecking()) {
    // Without CUDA generation there is nothing to link: the kernel runs from its CPU objects.
    Tensor x = ones({16});
    write_text(prebuilt().dir + "/empty_cuda.o", "");
    ScopedEnv compiled("TESSERA_INTERPRET", "0");
    prebuilt_cuda_missing_kernel[{1}](x);
    EXPECT_EQ(x[3].item<float>(), 1.0f - 3.0f + 1.0f);
    return;
  }
  write_text(prebuilt().dir + "/empty.cu",
             "extern \"C\" __device__ float other(float x) { return x; }\n");
  run_or_fail(nvcc() + " -arch=sm_90 -rdc=true -c " + prebuilt().dir + "/empty.cu -o " +
              prebuilt().dir + "/empty_cuda.o");
  ScopedEnv compiled("TESSERA_INTERPRET", "0");
  Tensor x = ones({16});
  const std::string e = error_of<CompileError>([&] { prebuilt_cuda_missing_kernel[{1}](x); });
  EXPECT_NE(e.find("kernel 'prebuilt_cuda_missing_kernel': linking the extern functions' CUDA "
                   "objects '" +
                   prebuilt().dir + "/empty_cuda.o' failed"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("obj_poly"), std::string::npos) << e;
}

}  // namespace
