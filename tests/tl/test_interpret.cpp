// The reference interpreter (TESSERA_INTERPRET=1) against the compiled backend, dtype by dtype,
// and the bounds-checked debug mode (TESSERA_DEBUG=1). The whole tl, compile, library and tune
// suites also run interpreted (CTest's *_interpreted entries).
#include <gtest/gtest.h>

#include <cstdlib>

#include "tessera/env.h"
#include "tessera/tessera.h"
#include "tessera/tl.h"
#include "testing.h"

using namespace tessera;
using namespace tessera::testing;
namespace tl = tessera::tl;

namespace {

/** Runs `f` with the environment variable `name` set, then restores the knobs. */
template <class F>
void with_env(const char* name, F&& f) {
  ScopedEnv env(name, "1");
  f();
}

// Arithmetic, a comparison and a select, in the inputs' dtype.
TL_JIT(mix_kernel, tl::Ptr x, tl::Ptr y, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = offs < n;
  auto a = tl::load(x + offs, m);
  auto b = tl::load(y + offs, m);
  auto r = tl::where(a < b, a * b - a, b + b / (a * a + b));
  tl::store(out + offs, r, m);
}

TL_JIT(float_math_kernel, tl::Ptr x, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = offs < n;
  auto a = tl::load(x + offs, m, 1.0);
  tl::store(
      out + offs,
      tl::exp(a * 0.5f) + tl::sqrt(tl::abs(a)) - tl::sin(a) * tl::cos(a) + tl::rsqrt(a * a + 1.0f),
      m);
}

TL_JIT(row_reduce_kernel, tl::Ptr x, tl::Ptr sum_out, tl::Ptr max_out, tl::Int cols,
       tl::Const BLOCK) {
  auto row = tl::program_id(0);
  auto c = tl::arange(0, BLOCK);
  auto v = tl::load(x + row * cols + c, c < cols);
  tl::store(sum_out + row, tl::sum(v, 0));
  tl::store(max_out + row, tl::max(v, 0));
}

Tensor run_mix(const Tensor& x, const Tensor& y) {
  Tensor out = empty_like(x);
  poison(out);
  const int64_t n = x.numel().guard_int();
  mix_kernel[{tl::cdiv(n, 64)}](x, y, out, n, tl::meta("BLOCK", 64));
  return out;
}

TEST(Interpreter, EveryDtypeAgreesBitForBitWithTheCompiledKernel) {
  for (DType d : {DType::Int8, DType::Int16, DType::Int32, DType::Int64, DType::UInt8,
                  DType::Float16, DType::BFloat16, DType::Float32, DType::Float64}) {
    const int64_t n = 1000;
    Tensor x = random_tensor({n}, d), y = random_tensor({n}, d);
    const Tensor compiled = run_mix(x, y);
    Tensor interpreted;
    with_env("TESSERA_INTERPRET", [&] { interpreted = run_mix(x, y); });
    // Kernels compile with -ffp-contract=off: every float op is rounded as the interpreter does.
    EXPECT_TRUE(bitwise_equal(compiled, interpreted)) << dtype_name(d);
  }
}

TEST(Interpreter, MathFunctionsAreTheRuntimes) {
  for (DType d : {DType::Float32, DType::BFloat16, DType::Float16, DType::Float64}) {
    Tensor x = random_tensor({777}, d), out = empty_like(x), out2 = empty_like(x);
    float_math_kernel[{tl::cdiv(777, 128)}](x, out, 777, tl::meta("BLOCK", 128));
    with_env("TESSERA_INTERPRET", [&] {
      float_math_kernel[{tl::cdiv(777, 128)}](x, out2, 777, tl::meta("BLOCK", 128));
    });
    EXPECT_TRUE(bitwise_equal(out, out2)) << dtype_name(d);
  }
}

TEST(Interpreter, ReductionsIntegersExactFloatsWithinRounding) {
  const int64_t rows = 37, cols = 300;
  for (DType d : {DType::Int32, DType::Float32, DType::BFloat16}) {
    Tensor x = random_tensor({rows, cols}, d);
    Tensor s1 = empty({rows}, TensorOptions().dtype(d)), m1 = empty_like(s1), s2 = empty_like(s1),
           m2 = empty_like(s1);
    row_reduce_kernel[{rows}](x, s1, m1, cols, tl::meta("BLOCK", 512));
    with_env("TESSERA_INTERPRET",
             [&] { row_reduce_kernel[{rows}](x, s2, m2, cols, tl::meta("BLOCK", 512)); });
    EXPECT_TRUE(bitwise_equal(m1, m2)) << dtype_name(d);
    if (is_floating_point(d)) {
      // The documented exception (docs/kernels.md): the interpreter sums floats in double and
      // rounds once; the compiled kernel sums float lanes.
      EXPECT_TRUE(all_close(s1.to(DType::Float64), s2.to(DType::Float64),
                            d == DType::Float32 ? 1e-5 : 1e-2, 1e-3))
          << dtype_name(d);
    } else {
      EXPECT_TRUE(bitwise_equal(s1, s2)) << dtype_name(d);
    }
  }
}

// ---- TESSERA_DEBUG: bounds checks
// ------------------------------------------------------------------

// An off-by-one mask: `<=` reads and writes one element past the end.
constexpr int kOffByOneLine = __LINE__ + 4;  // the load and store below
TL_JIT(off_by_one_kernel, tl::Ptr x, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = offs <= n;
  tl::store(out + offs, tl::load(x + offs, m) + 1.0f, m);
}

/** Runs `f(mode)` in both debug modes: checks compiled into the kernel, and the interpreter. */
template <class F>
void debug_modes(F&& f) {
  for (const bool interp : {false, true}) {
    ScopedEnv debug("TESSERA_DEBUG", "1");
    ScopedEnv interpret("TESSERA_INTERPRET", interp ? "1" : nullptr);
    f(interp ? "interpreted" : "compiled with checks");
  }
}

TEST(DebugMode, CatchesAnOffByOneMaskAndKeepsRunning) {
  const int64_t n = 40;
  debug_modes([&](const char* mode) {
    // Both tensors are views into larger buffers, so the bad lane lands on real memory.
    Tensor xbuf = random_tensor({n + 8}, DType::Float32), obuf = zeros({n + 8});
    Tensor x = xbuf.slice(0, 0, n), out = obuf.slice(0, 0, n);
    ::testing::internal::CaptureStderr();
    off_by_one_kernel[{tl::cdiv(n, 16)}](x, out, n, tl::meta("BLOCK", 16));
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("[kernel off_by_one_kernel] out-of-bounds load at test_interpret.cpp:" +
                       std::to_string(kOffByOneLine)),
              std::string::npos)
        << mode << "\n"
        << err;
    EXPECT_NE(err.find("program (2, 0, 0), lane 8: element 40 of 'x' (valid: 0..39)"),
              std::string::npos)
        << mode << "\n"
        << err;
    EXPECT_NE(err.find("out-of-bounds store"), std::string::npos) << mode << "\n" << err;
    EXPECT_NE(err.find("element 40 of 'out'"), std::string::npos) << mode << "\n" << err;
    // In-bounds lanes ran; the bad store was suppressed (the element past the view is untouched).
    EXPECT_TRUE(all_close(out, x + 1.0)) << mode;
    EXPECT_EQ(obuf[n].item<float>(), 0.0f) << mode;
  });
  // Without the debug mode the compiled kernel writes past the view (what the checker catches).
  ScopedEnv unchecked("TESSERA_DEBUG", nullptr), compiled("TESSERA_INTERPRET", nullptr);
  Tensor xbuf = random_tensor({n + 8}, DType::Float32), obuf = zeros({n + 8});
  Tensor x = xbuf.slice(0, 0, n), out = obuf.slice(0, 0, n);
  off_by_one_kernel[{tl::cdiv(n, 16)}](x, out, n, tl::meta("BLOCK", 16));
  EXPECT_EQ(obuf[n].item<float>(), xbuf[n].item<float>() + 1.0f);
}

TL_JIT(shift_left_kernel, tl::Ptr x, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::arange(0, BLOCK);
  auto m = offs < n;
  tl::store(out + offs, tl::load(x + offs - 1, m), m);  // reads x[-1] in lane 0
}

TEST(DebugMode, ChecksTheViewNotTheAllocation) {
  debug_modes([&](const char* mode) {
    Tensor buf = random_tensor({64}, DType::Float32);
    Tensor x = buf.slice(0, 8, 40), out = zeros({32});
    ::testing::internal::CaptureStderr();
    shift_left_kernel[{1}](x, out, 32, tl::meta("BLOCK", 32));
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("lane 0: element -1 of 'x' (valid: 0..31)"), std::string::npos)
        << mode << "\n"
        << err;
    EXPECT_EQ(out[0].item<float>(), 0.0f) << mode;  // the suppressed load gives 0
    EXPECT_TRUE(all_close(out.slice(0, 1, 32), x.slice(0, 0, 31))) << mode;
  });
}

TEST(DebugMode, ManyViolationsAreSummarized) {
  debug_modes([&](const char* mode) {
    const int64_t n = 8;
    Tensor x = zeros({n}), out = zeros({n});
    ::testing::internal::CaptureStderr();
    off_by_one_kernel[{4}](x, out, 100,
                           tl::meta("BLOCK", 32));  // n is wrong: 120 lanes past the end
    const std::string err = ::testing::internal::GetCapturedStderr();
    size_t lines = 0;
    for (size_t p = err.find("out-of-bounds"); p != std::string::npos;
         p = err.find("out-of-bounds", p + 1))
      ++lines;
    EXPECT_EQ(lines, 11u) << mode << "\n" << err;  // ten reports and the summary
    EXPECT_NE(err.find("out-of-bounds accesses in this launch (the first 10 shown)"),
              std::string::npos)
        << mode << "\n"
        << err;
    EXPECT_TRUE(all_close(out, x + 1.0)) << mode;
  });
}

// int32 offsets that wrap: (pid + start) * BLOCK passes 2^31 in program 1.
constexpr int kWrapLine = __LINE__ + 3;  // the multiply below
TL_JIT(wrap_kernel, tl::Ptr out, tl::Int start, tl::Const BLOCK) {
  auto lanes = tl::arange(0, BLOCK);
  auto offs = (tl::program_id(0) + start) * BLOCK + lanes;
  tl::store(out + tl::program_id(0) * BLOCK + lanes, offs);
}

TEST(DebugMode, ReportsInt32ResultsThatWrap) {
  const int64_t start = (int64_t{1} << 28) - 1;  // program 0 ends at 2^31 - 1, program 1 wraps
  Tensor want = empty({16}, TensorOptions().dtype(DType::Int32));
  for (int64_t i = 0; i < 16; ++i) {
    const int64_t exact = (i / 8 + start) * 8 + i % 8;
    want[i].fill_(static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(exact))));
  }
  debug_modes([&](const char* mode) {
    Tensor out = empty({16}, TensorOptions().dtype(DType::Int32));
    poison(out);
    ::testing::internal::CaptureStderr();
    wrap_kernel[{2}](out, start, tl::meta("BLOCK", 8));
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("[kernel wrap_kernel] int32 overflow at test_interpret.cpp:" +
                       std::to_string(kWrapLine)),
              std::string::npos)
        << mode << "\n"
        << err;
    EXPECT_NE(err.find("program (1, 0, 0), lane 0: the result 2147483648 wrapped to -2147483648"),
              std::string::npos)
        << mode << "\n"
        << err;
    size_t reports = 0;
    for (size_t p = err.find("int32 overflow"); p != std::string::npos;
         p = err.find("int32 overflow", p + 1))
      ++reports;
    EXPECT_EQ(reports, 1u) << mode << "\n" << err;  // once, however often the value is used
    EXPECT_TRUE(equal(out, want)) << mode;          // the checked mode still wraps, as the GPU does
  });
  // Unchecked: the same wrapped values, silently.
  ScopedEnv unchecked("TESSERA_DEBUG", nullptr), compiled("TESSERA_INTERPRET", nullptr),
      quiet("TESSERA_LOGS", nullptr);  // nothing at all on stderr (a cross-check pass logs)
  Tensor out = empty({16}, TensorOptions().dtype(DType::Int32));
  ::testing::internal::CaptureStderr();
  wrap_kernel[{2}](out, start, tl::meta("BLOCK", 8));
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_TRUE(equal(out, want));
}

}  // namespace
