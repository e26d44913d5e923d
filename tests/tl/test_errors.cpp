// Every diagnostic of the kernel language: a CompileError naming the kernel and the user's line.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "tessera/tl.h"
#include "testing.h"

using namespace tessera;
namespace tl = tessera::tl;

namespace {

int g_line = 0;  // set by a kernel body to the line of the statement that must fail

TL_JIT(err_shape, tl::Ptr x) {
  g_line = __LINE__ + 1;
  auto bad = tl::arange(0, 4) + tl::arange(0, 8);
  tl::store(x + tl::arange(0, 4), bad);
}
TL_JIT(err_rank, tl::Ptr x) {
  auto r = tl::arange(0, 4);
  g_line = __LINE__ + 1;
  auto bad = r[{tl::None, tl::_}] + tl::arange(0, 8);  // [1, 4] and [8]: 4 against 8
  tl::store(x + r, tl::sum(bad, 0));
}
TL_JIT(err_mask, tl::Ptr x) {
  auto offs = tl::arange(0, 8);
  g_line = __LINE__ + 1;
  auto v = tl::load(x + offs, tl::arange(0, 4) < 2);
  tl::store(x + offs, v);
}
TL_JIT(err_arange, tl::Ptr x) {
  g_line = __LINE__ + 1;
  auto offs = tl::arange(0, 3);
  tl::store(x + offs, 1.0);
}
TL_JIT(err_runtime_constexpr, tl::Ptr x, tl::Int n) {
  g_line = __LINE__ + 1;
  auto offs = tl::arange(0, n);
  tl::store(x + offs, 1.0);
}
TL_JIT(err_bitwise_float, tl::Ptr x) {
  auto v = tl::load(x + tl::arange(0, 4));
  g_line = __LINE__ + 1;
  tl::store(x + tl::arange(0, 4), v & 1);
}
TL_JIT(err_ptr_float, tl::Ptr x) {
  g_line = __LINE__ + 1;
  auto p = x + 1.5;
  tl::store(p, 1.0);
}
TL_JIT(err_outer_tile, tl::Ptr x, tl::Int n) {
  tl::Tile acc = tl::zeros({4}, tl::float32);
  tl::range(0, n, [&](tl::Tile) {
    g_line = __LINE__ + 1;
    acc = acc + 1.0;
  });
  tl::store(x + tl::arange(0, 4), acc);
}
TL_JIT(err_var_type, tl::Ptr x, tl::Int n) {
  tl::Var acc = tl::zeros({4}, tl::float32);
  tl::range(0, n, [&](tl::Tile) {
    g_line = __LINE__ + 1;
    acc = acc.get().to(tl::float16);
  });
  tl::store(x + tl::arange(0, 4), acc);
}
TL_JIT(err_cxx_if, tl::Ptr x, tl::Int n) {
  g_line = __LINE__ + 1;
  if (n > 3) tl::store(x, 1.0);
}
TL_JIT(err_if_tile, tl::Ptr x) {
  auto offs = tl::arange(0, 4);
  g_line = __LINE__ + 1;
  tl::if_(offs < 2, [&] { tl::store(x, 1.0); });
}
TL_JIT(err_range_step, tl::Ptr x, tl::Int n) {
  g_line = __LINE__ + 1;
  tl::range(0, n, 0, [&](tl::Tile i) { tl::store(x + i, 1.0); });
}
TL_JIT(err_load_value, tl::Ptr x, tl::Int n) {
  g_line = __LINE__ + 1;
  auto v = tl::load(n);
  tl::store(x, v);
}
TL_JIT(err_exp_int, tl::Ptr x, tl::Int n) {
  g_line = __LINE__ + 1;
  tl::store(x, tl::exp(n));
}
TL_JIT(err_axis, tl::Ptr x) {
  auto v = tl::load(x + tl::arange(0, 4));
  g_line = __LINE__ + 1;
  tl::store(x, tl::sum(v, 2));
}
TL_JIT(err_fp8_math, tl::Ptr x) {
  auto v = tl::load(x + tl::arange(0, 4));
  g_line = __LINE__ + 1;
  tl::store(x + tl::arange(0, 4), v + v);
}
TL_JIT(err_udiv_mixed, tl::Ptr x, tl::Ptr y) {
  auto a = tl::load(x + tl::arange(0, 4));
  auto b = tl::load(y + tl::arange(0, 4));
  g_line = __LINE__ + 1;
  tl::store(x + tl::arange(0, 4), a / b);
}
TL_JIT(ok_kernel, tl::Ptr x, tl::Int n, tl::Const B) {
  auto offs = tl::arange(0, B);
  tl::store(x + offs, tl::load(x + offs, offs < n) + 1, offs < n);
}

void expect_trace_error(const std::function<void()>& launch, const std::string& kernel,
                        const std::string& what) {
  g_line = 0;
  try {
    launch();
    ADD_FAILURE() << kernel << ": no error";
  } catch (const CompileError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("[kernel " + kernel + "]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("test_errors.cpp:" + std::to_string(g_line)), std::string::npos)
        << kernel << ": expected line " << g_line << " in: " << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << kernel << ": not a CompileError: " << e.what();
  }
}

TEST(KernelDiagnostics, TraceErrorsNameKernelAndLine) {
  Tensor x = zeros({16}), xi = zeros({16}, int32), xu = zeros({16}, uint32),
         x8 = zeros({16}, float8_e4m3fn);
  expect_trace_error([&] { err_shape[{1}](x); }, "err_shape",
                     "shape mismatch: [4] and [8] cannot be broadcast");
  expect_trace_error([&] { err_rank[{1}](x); }, "err_rank",
                     "[1, 4] and [8] cannot be broadcast (dimension 1 after aligning the last "
                     "dimensions)");
  expect_trace_error([&] { err_mask[{1}](x); }, "err_mask",
                     "mask shape [4] does not match the pointer shape [8]");
  expect_trace_error([&] { err_arange[{1}](x); }, "err_arange",
                     "arange's range must be a power of 2, got 3");
  expect_trace_error([&] { err_runtime_constexpr[{1}](x, 4); }, "err_runtime_constexpr",
                     "arange's end must be a constexpr integer");
  expect_trace_error([&] { err_bitwise_float[{1}](x); }, "err_bitwise_float",
                     "needs integer operands");
  expect_trace_error([&] { err_ptr_float[{1}](x); }, "err_ptr_float",
                     "pointer arithmetic needs an integer offset");
  expect_trace_error([&] { err_outer_tile[{1}](x, 4); }, "err_outer_tile",
                     "declared outside this tl::range / tl::if_ region is assigned inside");
  expect_trace_error([&] { err_var_type[{1}](x, 4); }, "err_var_type",
                     "values carried across a region keep their type");
  expect_trace_error([&] { err_cxx_if[{1}](x, 4); }, "err_cxx_if",
                     "a runtime value is used as a C++ condition");
  expect_trace_error([&] { err_if_tile[{1}](x); }, "err_if_tile",
                     "tl::if_ needs a scalar condition");
  expect_trace_error([&] { err_range_step[{1}](x, 4); }, "err_range_step", "step must be positive");
  expect_trace_error([&] { err_load_value[{1}](x, 4); }, "err_load_value",
                     "tl::load expects a pointer");
  expect_trace_error([&] { err_exp_int[{1}](x, 4); }, "err_exp_int",
                     "tl::exp expects a floating point argument");
  expect_trace_error([&] { err_axis[{1}](x); }, "err_axis", "axis 2 is out of range");
  expect_trace_error([&] { err_fp8_math[{1}](x8); }, "err_fp8_math", "arithmetic on float8 values");
  expect_trace_error([&] { err_udiv_mixed[{1}](xi, xu); }, "err_udiv_mixed",
                     "different signedness");
}

void expect_launch_error(const std::function<void()>& launch, int line, const std::string& what) {
  try {
    launch();
    ADD_FAILURE() << "no error";
  } catch (const CompileError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("[kernel ok_kernel]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("test_errors.cpp:" + std::to_string(line)), std::string::npos) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
  }
}

TEST(KernelDiagnostics, LaunchErrorsNameTheParameter) {
  Tensor x = zeros({16});
  expect_launch_error([&] { ok_kernel[{1}](x, 4, 16, 5); }, __LINE__,
                      "expected 3 arguments (x, n, B), got more");
  expect_launch_error([&] { ok_kernel[{1}](x, 4); }, __LINE__,
                      "missing argument for parameter 'B'");
  expect_launch_error([&] { ok_kernel[{1}](x, x, 16); }, __LINE__,
                      "parameter 'n' is an integer (tl::Int) but got a tensor");
  expect_launch_error([&] { ok_kernel[{1}](4, 4, 16); }, __LINE__,
                      "parameter 'x' is a pointer (tl::Ptr) but got an integer");
  expect_launch_error([&] { ok_kernel[{1}](x, 4, tl::meta("BLOCK", 16)); }, __LINE__,
                      "tl::meta names unknown parameter 'BLOCK' (parameters: x, n, B)");
  expect_launch_error([&] { ok_kernel[{1}](x, 4, 16, tl::meta("B", 16)); }, __LINE__,
                      "parameter 'B' is given twice");
  // On a meta tensor the arguments are still checked; nothing runs.
  expect_launch_error([&] { ok_kernel[{1}](zeros({4}, Device("meta")), x, 16); }, __LINE__,
                      "parameter 'n' is an integer (tl::Int) but got a tensor");
  ok_kernel[{1}](zeros({4}, Device("meta")), 4, 16);
  expect_launch_error([&] { ok_kernel[{1}](x, 4, x); }, __LINE__,
                      "parameter 'B' is a constexpr (tl::Const) but got a tensor");
  // A grid callable that asks for a meta-parameter the launch lacks.
  auto grid = [](const tl::Meta& m) { return m["BLOCK"]; };
  try {
    ok_kernel[grid](x, 4, 16);
    ADD_FAILURE();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("meta-parameter 'BLOCK'"), std::string::npos) << e.what();
  }
  // A parameter type that is not a kernel-language type is a compile-time error now (the
  // tl_jit_parameter_types CTest compiles one and checks the message).
  // A grid made elsewhere: the error names the launch's line, not the grid's.
  const tl::Grid made_elsewhere{1};
  expect_launch_error([&] { ok_kernel[made_elsewhere](x, x, 16); }, __LINE__,
                      "parameter 'n' is an integer (tl::Int) but got a tensor");
  auto grid_fn = [](const tl::Meta&) { return tl::Grid{1}; };
  expect_launch_error([&] { ok_kernel[grid_fn](x, x, 16); }, __LINE__,
                      "parameter 'n' is an integer (tl::Int) but got a tensor");
}

TL_JIT(grid_add_kernel, tl::Ptr x, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  tl::store(out + offs, tl::load(x + offs, offs < n) + 1.0f, offs < n);
}

TEST(KernelDiagnostics, GridsAboveCudasLimitsNameTheDimension) {
  Tensor x = zeros({1000}), out = zeros({1000});
  struct Case {
    tl::Grid grid;
    const char* want;
  };
  const Case cases[] = {
      {tl::Grid{int64_t{1} << 31},
       "grid dimension 0 (x) is 2147483648, above the limit 2147483647"},
      {tl::Grid{1, 65536}, "grid dimension 1 (y) is 65536, above the limit 65535"},
      {tl::Grid{1, 1, 70000}, "grid dimension 2 (z) is 70000, above the limit 65535"},
  };
  for (const auto& c : cases) {
    const std::string msg = tessera::testing::error_of<CompileError>(
        [&] { grid_add_kernel[c.grid](x, out, 1000, tl::meta("BLOCK", 16)); });
    EXPECT_NE(msg.find(c.want), std::string::npos) << msg;
    EXPECT_NE(msg.find("[kernel grid_add_kernel]"), std::string::npos) << msg;
  }
  EXPECT_TRUE(equal(out, zeros({1000})));  // nothing ran
  // At the limits, launches run (an empty y/z grid of one program each).
  grid_add_kernel[{tl::cdiv(1000, 16), 1, 1}](x, out, 1000, tl::meta("BLOCK", 16));
  EXPECT_TRUE(equal(out, ones({1000})));
}

TEST(KernelDiagnostics, CdivNeedsAPositiveDivisorAndDoesNotOverflow) {
  EXPECT_EQ(tl::cdiv(int64_t{10}, int64_t{4}), 3);
  EXPECT_EQ(tl::cdiv(int64_t{0}, int64_t{4}), 0);
  EXPECT_EQ(tl::cdiv(int64_t{-5}, int64_t{4}), -1);  // (a + b - 1) // b, as Triton's
  const int64_t big = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(tl::cdiv(big, int64_t{2}), big / 2 + 1);  // a + b - 1 would overflow
  EXPECT_EQ(tl::cdiv(big, big), 1);
  auto zero_block = [] { (void)tl::cdiv(int64_t{7}, int64_t{0}); };
  const int line = __LINE__ - 1;
  const std::string msg = tessera::testing::error_of<ValueError>(zero_block);
  EXPECT_NE(msg.find("tl::cdiv(7, 0): the divisor must be positive (at test_errors.cpp:" +
                     std::to_string(line) + ")"),
            std::string::npos)
      << msg;
  EXPECT_NE(tessera::testing::error_of<ValueError>([] {
              (void)tl::cdiv(SymInt(7), int64_t{-2});
            }).find("the divisor must be positive"),
            std::string::npos);
  EXPECT_EQ(tl::cdiv(SymInt(big), SymInt(3)).expect_int(), big / 3 + 1);
}

TEST(KernelDiagnostics, LanguageOutsideAKernel) {
  try {
    (void)tl::program_id(0);
    ADD_FAILURE();
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("can only be used in a kernel body"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("test_errors.cpp"), std::string::npos);
  }
}

TEST(KernelDiagnostics, AFailedTraceLeavesTheKernelUsable) {
  Tensor x = zeros({16});
  EXPECT_THROW(ok_kernel[{1}](x, 4, 3), CompileError);  // arange(0, 3)
  ok_kernel[{1}](x, 4, 16);
  EXPECT_EQ(x.sum().item<float>(), 4.0f);
}

// A 2048x1024 fp32 tile read again after a store (8 MiB of arrays: the store may have changed
// what a second load would read, so the tile is kept): on the CPU a program's tiles live on its
// thread's stack, so the kernel is a CompileError naming the tile and its line, not a crash
// (issue 19); smaller tiles run, and the interpreter (heap tiles) runs the large one.
TL_JIT(big_tile_kernel, tl::Ptr x, tl::Ptr y, tl::Const R, tl::Const C) {
  auto offs = tl::expand_dims(tl::arange(0, R), 1) * C + tl::expand_dims(tl::arange(0, C), 0);
  auto a = tl::load(x + offs);
  tl::store(y + offs, a * 2.0f);
  tl::store(y + offs, a * 2.0f + a);
}

TEST(KernelDiagnostics, TilesTooLargeForAProgramsStackAreACompileError) {
  // The CPU's limit alone (a CUDA cross-check would refuse these tiles for shared memory first).
  tessera::testing::ScopedEnv cpu_only("TESSERA_CROSSCHECK", "");
  Tensor x = ones({int64_t{2048} * 1024}), y = zeros({int64_t{2048} * 1024});
  {
    tessera::testing::ScopedEnv compiled("TESSERA_INTERPRET", "0");
    const std::string msg = tessera::testing::error_of<CompileError>(
        [&] { big_tile_kernel[{1}](x, y, tl::meta("R", 2048), tl::meta("C", 1024)); });
    EXPECT_NE(msg.find("[kernel big_tile_kernel] its tiles need 8.00 MiB of local arrays on the "
                       "CPU, more than a program's stack holds (6.00 MiB)"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("the largest is <2048x1024x fp32> at test_errors.cpp:"), std::string::npos)
        << msg;
    big_tile_kernel[{1}](x, y, tl::meta("R", 256), tl::meta("C", 1024));
    EXPECT_EQ(y.sum().item<float>(), 3.0f * 256 * 1024);
  }
  tessera::testing::ScopedEnv interpret("TESSERA_INTERPRET", "1");
  big_tile_kernel[{1}](x, y, tl::meta("R", 2048), tl::meta("C", 1024));
  EXPECT_EQ(y.sum().item<float>(), 3.0f * 2048 * 1024);
}

}  // namespace
