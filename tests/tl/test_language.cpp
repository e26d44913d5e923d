// The kernel language's first slice, feature by feature, against double-precision references on
// fresh random inputs with poisoned outputs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "tessera/tl.h"
#include "testing.h"
#include "tl_testing.h"

using namespace tessera;
using namespace tessera::testing;
namespace tl = tessera::tl;

namespace {

TL_JIT(add_kernel, tl::Ptr in_ptr0, tl::Ptr in_ptr1, tl::Ptr out_ptr, tl::Int n_elements,
       tl::Const BLOCK_SIZE) {
  auto pid = tl::program_id(0);
  auto offsets = pid * BLOCK_SIZE + tl::arange(0, BLOCK_SIZE);
  auto mask = offsets < n_elements;
  auto x = tl::load(in_ptr0 + offsets, mask);
  auto y = tl::load(in_ptr1 + offsets, mask);
  tl::store(out_ptr + offsets, x + y, mask);
}

Tensor poisoned_like(const Tensor& t) {
  Tensor o = empty_like(t);
  poison(o);
  return o;
}

void launch_add(const Tensor& x, const Tensor& y, Tensor& out, int64_t block) {
  const SymInt n = out.numel();
  auto grid = [&](const tl::Meta& m) { return tl::Grid{tl::cdiv(n, m["BLOCK_SIZE"])}; };
  add_kernel[grid](x, y, out, n, tl::meta("BLOCK_SIZE", block));
}

TEST(TileLanguage, SeedAddAtEveryEdge) {
  for (int64_t block : {4, 1024}) {
    for (int64_t n : {1, 3, 4, 5, 1023, 1024, 1025, 100003}) {
      Tensor x = randn({n}), y = randn({n});
      Tensor out = poisoned_like(x);
      launch_add(x, y, out, block);
      ASSERT_TRUE(equal(out, x + y)) << "n=" << n << " BLOCK=" << block;
    }
  }
}

TEST(TileLanguage, GridFormsTupleIntAndCallable) {
  Tensor x = randn({10}), y = randn({10});
  Tensor a = poisoned_like(x), b = poisoned_like(x), c = poisoned_like(x);
  add_kernel[{3}](x, y, a, 10, tl::meta("BLOCK_SIZE", 4));              // braced tuple
  add_kernel[tl::cdiv(10, 4)](x, y, b, 10, tl::meta("BLOCK_SIZE", 4));  // an integer
  add_kernel[([](const tl::Meta& m) { return tl::cdiv(10, m["BLOCK_SIZE"]); })](
      x, y, c, 10, 4);  // positional constexpr
  EXPECT_TRUE(equal(a, x + y));
  EXPECT_TRUE(equal(b, x + y));
  EXPECT_TRUE(equal(c, x + y));
}

TEST(TileLanguage, TensorsPassAsTypedPointers) {
  for (DType dt : {float16, bfloat16, float64, int32, int8, uint8, int64}) {
    Tensor x = random_tensor({77}, dt), y = random_tensor({77}, dt);
    Tensor out = poisoned_like(x);
    launch_add(x, y, out, 16);
    ASSERT_TRUE(equal(out, x + y)) << dtype_name(dt);  // same rounding / wrapping as eager
  }
  // A view with a storage offset points at its first element.
  Tensor base = randn({20});
  Tensor xv = base.narrow(0, 5, 8), yv = base.narrow(0, 11, 8);
  Tensor out = poisoned_like(xv);
  launch_add(xv, yv, out, 4);
  EXPECT_TRUE(equal(out, xv + yv));
}

TEST(TileLanguage, WritesBumpOnlyWrittenTensors) {
  Tensor x = randn({8}), y = randn({8}), out = zeros({8});
  const auto vx = x.version(), vo = out.version();
  launch_add(x, y, out, 8);
  EXPECT_EQ(x.version(), vx);
  EXPECT_GT(out.version(), vo);
}

// ---- arithmetic and promotion -------------------------------------------------------------------

TL_JIT(arith_kernel, tl::Ptr a, tl::Ptr b, tl::Ptr out_div, tl::Ptr out_rem, tl::Ptr out_mix,
       tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = offs < n;
  auto x = tl::load(a + offs, m, 1);
  auto y = tl::load(b + offs, m, 1);
  tl::store(out_div + offs, x / y, m);  // C-style division on integers
  tl::store(out_rem + offs, x % y, m);
  tl::store(out_mix + offs, (x * 3 - y) + (-x) / 2, m);
}

TEST(TileLanguage, IntegerDivisionAndRemainderAreCStyle) {
  const int64_t n = 200;
  Tensor a = randint(-50, 50, {n}, int32), b = randint(-9, 10, {n}, int32);
  b = where(b == 0, full({}, 7, int32), b);
  Tensor d = poisoned_like(a), r = poisoned_like(a), m = poisoned_like(a);
  arith_kernel[{tl::cdiv(n, 64)}](a, b, d, r, m, n, tl::meta("BLOCK", 64));
  for (int64_t i = 0; i < n; ++i) {
    const int32_t x = a[i].item<int32_t>(), y = b[i].item<int32_t>();
    ASSERT_EQ(d[i].item<int32_t>(), x / y) << x << " / " << y;
    ASSERT_EQ(r[i].item<int32_t>(), x % y) << x << " % " << y;
    ASSERT_EQ(m[i].item<int32_t>(), (x * 3 - y) + (-x) / 2);
  }
}

TL_JIT(promote_kernel, tl::Ptr i8, tl::Ptr f16, tl::Ptr i32, tl::Ptr o_i8, tl::Ptr o_f16,
       tl::Ptr o_f32, tl::Ptr o_div, tl::Const BLOCK) {
  auto offs = tl::arange(0, BLOCK);
  auto a = tl::load(i8 + offs);
  auto h = tl::load(f16 + offs);
  auto w = tl::load(i32 + offs);
  auto r8 = a * 2;    // a scalar of the same kind keeps int8
  auto rh = h * 2.5;  // a float scalar keeps float16
  auto rf = w + 1.5;  // an int tile with a float scalar becomes fp32
  auto rd = h / h;    // fp16 division computes in fp32
  static_assert(std::is_same_v<decltype(r8), tl::Tile>);
  if (r8.dtype() != tessera::int8 || rh.dtype() != tessera::float16 ||
      rf.dtype() != tessera::float32 || rd.dtype() != tessera::float32) {
    throw std::runtime_error("promotion mismatch");
  }
  tl::store(o_i8 + offs, r8);
  tl::store(o_f16 + offs, rh);
  tl::store(o_f32 + offs, rf);
  tl::store(o_div + offs, rd);
}

TEST(TileLanguage, TritonPromotionRules) {
  Tensor i8 = randint(-60, 60, {16}, int8), f16 = (randn({16}) + 3).to(float16),
         i32 = randint(-9, 9, {16}, int32);
  Tensor o8 = empty({16}, int8), oh = empty({16}, float16), of = empty({16}), od = empty({16});
  promote_kernel[{1}](i8, f16, i32, o8, oh, of, od, tl::meta("BLOCK", 16));
  EXPECT_TRUE(equal(o8, mul(i8, 2)));
  EXPECT_TRUE(equal(oh, (f16.to(float32) * 2.5).to(float16)));
  EXPECT_TRUE(equal(of, i32.to(float32) + 1.5));
  EXPECT_TRUE(all_close(od, ones({16})));
}

// ---- math, comparisons, where
// --------------------------------------------------------------------

TL_JIT(math_kernel, tl::Ptr x, tl::Ptr out, tl::Int n, tl::Const WHICH, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = offs < n;
  auto v = tl::load(x + offs, m, 1.0);
  tl::Tile r;
  switch (WHICH.int_value()) {  // C++ control flow on a constexpr runs at trace time
    case 0:
      r = tl::exp(v);
      break;
    case 1:
      r = tl::log(v);
      break;
    case 2:
      r = tl::sqrt(v);
      break;
    case 3:
      r = tl::rsqrt(v);
      break;
    case 4:
      r = tl::sin(v);
      break;
    case 5:
      r = tl::cos(v);
      break;
    case 6:
      r = tl::abs(v - 2);
      break;
    case 7:
      r = tl::maximum(v, 1.5);
      break;
    case 8:
      r = tl::minimum(v, 1.5);
      break;
    default:
      r = tl::where((v > 1) & ~(v > 3), v * v, -v);
      break;
  }
  tl::store(out + offs, r, m);
}

TEST(TileLanguage, MathAgainstDoubleReferences) {
  // Each function within its contract (docs/kernels.md), in ulps of the exact result: near a zero
  // of sin or cos an absolute tolerance would allow hundreds of ulps.
  const int64_t n = 5000;
  Tensor x = rand({n}) * 4 + 0.01;
  x.narrow(0, 0, 4).copy_(from_vector(std::vector<float>{3.14159274f, 1.57079637f, 1.0f, 0.01f},
                                      {4}));  // next to zeros of sin and cos
  struct Case {
    const char* name;
    double max_ulp;
    std::function<double(double)> ref;
  };
  const std::vector<Case> cases = {
      {"exp", 2, [](double v) { return std::exp(v); }},
      {"log", 2, [](double v) { return std::log(v); }},
      {"sqrt", 0.5, [](double v) { return std::sqrt(v); }},     // correctly rounded
      {"rsqrt", 2, [](double v) { return 1 / std::sqrt(v); }},  // two roundings (CUDA's: 2)
      {"sin", 2, [](double v) { return std::sin(v); }},
      {"cos", 2, [](double v) { return std::cos(v); }},
      {"abs", 0.5, [](double v) { return std::fabs(v - 2); }},  // one rounded subtraction
      {"maximum", 0, [](double v) { return std::max(v, 1.5); }},
      {"minimum", 0, [](double v) { return std::min(v, 1.5); }},
      {"where", 0.5, [](double v) { return (v > 1 && !(v > 3)) ? v * v : -v; }},
  };
  const Ref xr = to_ref(x);
  for (int which = 0; which < static_cast<int>(cases.size()); ++which) {
    const Case& c = cases[static_cast<size_t>(which)];
    Tensor out = poisoned_like(x);
    math_kernel[{tl::cdiv(n, 256)}](x, out, n, which, tl::meta("BLOCK", 256));
    const Ref got = to_ref(out);
    double worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < xr.data.size(); ++i) {
      const double u = ulp_error(static_cast<float>(got.data[i]), c.ref(xr.data[i]));
      if (u > worst) worst = u, at = i;
    }
    EXPECT_LE(worst, c.max_ulp) << c.name << ": " << worst << " ulp at x = " << xr.data[at]
                                << " (seed " << test_seed() << ")";
  }
}

// ---- 2-D tiles, broadcasting, reductions
// ---------------------------------------------------------

TL_JIT(rows_kernel, tl::Ptr x, tl::Ptr sums, tl::Ptr maxes, tl::Ptr mins, tl::Ptr colmax, tl::Int M,
       tl::Int N, tl::Int stride, tl::Const BM, tl::Const BN) {
  auto rows = tl::program_id(0) * BM + tl::arange(0, BM);
  auto cols = tl::arange(0, BN);
  auto mask = (rows[{tl::_, tl::None}] < M) & (cols[{tl::None, tl::_}] < N);
  auto ptrs = x + rows[{tl::_, tl::None}] * stride + tl::expand_dims(cols, 0);
  auto v = tl::load(ptrs, mask, 0.0);
  auto rmask = rows < M;
  tl::store(sums + rows, tl::sum(v, 1), rmask);
  tl::store(maxes + rows, tl::max(tl::where(mask, v, -1e30), 1), rmask);
  tl::store(mins + rows, tl::min(tl::where(mask, v, 1e30), -1), rmask);
  // A reduction over the other axis, written by program 0 only (a scalar branch).
  tl::if_(tl::program_id(0) == 0,
          [&] { tl::store(colmax + cols, tl::max(tl::where(mask, v, -1e30), 0), cols < N); });
}

TEST(TileLanguage, TwoDimensionalTilesAndReductions) {
  const int64_t M = 37, N = 13;
  Tensor x = randn({M, N});
  Tensor s = poisoned_like(x.select(1, 0)), mx = poisoned_like(s), mn = poisoned_like(s),
         cm = empty({16});
  rows_kernel[{tl::cdiv(M, 8)}](x, s, mx, mn, cm, M, N, x.stride(0), tl::meta("BM", 8),
                                tl::meta("BN", 16));
  EXPECT_TRUE(all_close(s, x.sum({1}), 1e-5, 1e-5));
  EXPECT_TRUE(equal(mx, amax(x, {1})));
  EXPECT_TRUE(equal(mn, amin(x, {1})));
  EXPECT_TRUE(equal(cm.narrow(0, 0, N), amax(x.narrow(0, 0, 8), {0})));
}

TL_JIT(softmax_kernel, tl::Ptr out, tl::Ptr in, tl::Int in_stride, tl::Int out_stride,
       tl::Int n_cols, tl::Const BLOCK) {
  auto row = tl::program_id(0);
  auto cols = tl::arange(0, BLOCK);
  auto mask = cols < n_cols;
  auto x = tl::load(in + row * in_stride + cols, mask, -INFINITY);
  auto z = x - tl::max(x, 0);
  auto num = tl::exp(z);
  tl::store(out + row * out_stride + cols, num / tl::sum(num, 0), mask);
}

TEST(TileLanguage, FusedSoftmaxMatchesEager) {
  for (auto [rows, cols] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {7, 5}, {64, 1000}, {3, 4096}}) {
    Tensor x = randn({rows, cols}) * 3;
    Tensor y = poisoned_like(x);
    int64_t block = 1;
    while (block < cols) block *= 2;
    softmax_kernel[{rows}](y, x, x.stride(0), y.stride(0), cols, tl::meta("BLOCK", block));
    EXPECT_TRUE(all_close(y, softmax(x, 1), 1e-5, 1e-7)) << rows << "x" << cols;
  }
}

// ---- division
// ---------------------------------------------------------------------------------------

TL_JIT(div_kernel, tl::Ptr x, tl::Ptr y, tl::Ptr out, tl::Float s, tl::Int n, tl::Const WHICH,
       tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = offs < n;
  auto v = tl::load(x + offs, m);
  tl::Tile r = v;
  if (WHICH == 0) r = v / s;                      // by a runtime scalar: a reciprocal under a guard
  if (WHICH == 1) r = v / 3.0;                    // by a constant
  if (WHICH == 2) r = v / tl::load(y + offs, m);  // tile by tile
  tl::store(out + offs, r, m);
}

// Distance in float ulps between a float result and the exact quotient (0 when both are the same
// special value).
double ulps(float got, double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0 : 1e30;
  const float w = static_cast<float>(want);
  if (std::isinf(w))
    return got == w ? 0 : (std::isinf(got) ? 1e30 : 2);  // past FLT_MAX: rounds to inf
  double ulp =
      std::fabs(static_cast<double>(std::nextafter(std::fabs(w), INFINITY)) - std::fabs(double(w)));
  if (ulp == 0) ulp = std::numeric_limits<float>::denorm_min();
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

// Float `/` is Triton's: within 2 ulp (div.full.f32). Divisors whose reciprocal is not a normal
// float (subnormal, huge, zero, inf, NaN) must take the exact division.
TEST(TileLanguage, FloatDivisionWithinTwoUlpForEveryDivisor) {
  const int64_t n = 3000;
  Tensor x = randn({n}) * 1000;
  float* xp = x.data_ptr<float>();
  const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-45f, 3e38f, -1e-30f, 1e30f};
  for (size_t i = 0; i < std::size(specials); ++i) xp[i] = specials[i];
  Tensor y = randn({n});
  const float divisors[] = {3.7f,      -2.5f,     1e-40f, 3e38f,    0x1p126f, 0x1p127f,
                            0x1p-126f, 0x1p-127f, 0.0f,   INFINITY, NAN,      1e-20f};
  for (int which = 0; which < 3; ++which) {
    for (float d : divisors) {
      if (which != 0 && d != divisors[0]) continue;
      Tensor out = poisoned_like(x);
      div_kernel[{tl::cdiv(n, 512)}](x, y, out, static_cast<double>(d), n, tl::meta("WHICH", which),
                                     tl::meta("BLOCK", 512));
      const float* o = out.data_ptr<float>();
      const float* yp = y.data_ptr<float>();
      double worst = 0;
      int64_t at = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double den = which == 0 ? d : which == 1 ? 3.0 : yp[i];
        const double e = ulps(o[i], static_cast<double>(xp[i]) / den);
        if (e > worst) worst = e, at = i;
      }
      EXPECT_LE(worst, 2.0) << "case " << which << ", divisor " << d << ": " << xp[at] << " gave "
                            << o[at];
    }
  }
}

// ---- masks decided once per loop nest --------------------------------------------------------

TL_JIT(mask_forms, tl::Ptr out, tl::Int base, tl::Int n, tl::Const BLOCK) {
  auto i = tl::arange(0, BLOCK);
  auto offs = base + i;     // increasing
  auto rev = base - i * 2;  // decreasing
  // One store per mask: each is its own loop nest with its own test.
  tl::store(out + i, tl::where(offs < n, 1, 0));
  tl::store(out + BLOCK + i, tl::where(offs >= n, 2, 0));
  tl::store(out + 2 * BLOCK + i, tl::where(rev > n, 4, 0));
  tl::store(out + 3 * BLOCK + i, tl::where(rev <= n, 8, 0));
  tl::store(out + 4 * BLOCK + i, tl::where(offs > 0, 16, 0));
  tl::store(out + 5 * BLOCK + i, tl::where(i < 40, 32, 0));
}

// A mask that holds for the whole tile is tested once and the loop runs unmasked; the test must
// agree with the lane-by-lane comparison in 32-bit wrapping arithmetic, including where the
// offsets wrap (then no shortcut applies).
TEST(TileLanguage, MasksAgreeWithLaneByLaneComparison) {
  const int32_t big = std::numeric_limits<int32_t>::max(),
                small = std::numeric_limits<int32_t>::min();
  const std::vector<std::pair<int32_t, int32_t>> cases = {
      {0, 5},        {0, 1000},      {10, 3},          {-100, -50}, {big - 2, 0},
      {big - 63, 0}, {small + 3, 0}, {small + 200, 7}, {5, 5}};
  for (auto [base, n] : cases) {
    Tensor out = empty({6 * 64}, int32);
    poison(out);
    mask_forms[{1}](out, int64_t(base), int64_t(n), tl::meta("BLOCK", 64));
    const int32_t* o = out.data_ptr<int32_t>();
    for (int32_t i = 0; i < 64; ++i) {
      const auto offs =
          static_cast<int32_t>(static_cast<uint32_t>(base) + static_cast<uint32_t>(i));
      const auto rev =
          static_cast<int32_t>(static_cast<uint32_t>(base) - static_cast<uint32_t>(i * 2));
      const int32_t want[] = {offs < n ? 1 : 0, offs >= n ? 2 : 0, rev > n ? 4 : 0,
                              rev <= n ? 8 : 0, offs > 0 ? 16 : 0, i < 40 ? 32 : 0};
      for (int k = 0; k < 6; ++k) {
        ASSERT_EQ(o[k * 64 + i], want[k])
            << "mask " << k << ", base " << base << ", n " << n << ", lane " << i;
      }
    }
  }
}

TL_JIT(nan_reductions, tl::Ptr x, tl::Ptr out, tl::Const BLOCK) {
  auto v = tl::load(x + tl::arange(0, BLOCK));
  tl::store(out, tl::max(v, 0));
  tl::store(out + 1, tl::min(v, 0));
  tl::store(out + 2, tl::sum(v, 0));
}

// max/min skip NaNs (IEEE maxNum/minNum over the tile); only an all-NaN tile gives NaN. sum
// propagates them.
TEST(TileLanguage, MaxAndMinSkipNaNsUnlessAllAreNaN) {
  for (int64_t block : {1, 8, 16, 128}) {
    Tensor x = full({block}, NAN), out = empty({3});
    nan_reductions[{1}](x, out, tl::meta("BLOCK", block));
    for (int k = 0; k < 3; ++k)
      EXPECT_TRUE(std::isnan(out.data_ptr<float>()[k])) << block << " " << k;
    x.data_ptr<float>()[block / 2] = -3.0f;
    nan_reductions[{1}](x, out, tl::meta("BLOCK", block));
    EXPECT_EQ(out.data_ptr<float>()[0], -3.0f) << block;
    EXPECT_EQ(out.data_ptr<float>()[1], -3.0f) << block;
    EXPECT_EQ(std::isnan(out.data_ptr<float>()[2]), block > 1) << block;
  }
}

// ---- reductions that write their producer's array --------------------------------------------

TL_JIT(sum_after_store, tl::Ptr p, tl::Ptr out, tl::Const BLOCK) {
  auto offs = tl::arange(0, BLOCK);
  auto x = tl::load(p + offs);
  tl::store(p + offs, tl::zeros({BLOCK}, tl::float32));  // x must be read before this
  tl::store(out, tl::sum(x, 0));
  auto e = tl::exp(x);  // reduced, then stored
  tl::store(out + 1, tl::sum(e, 0));
  tl::store(p + offs, e);
}

TEST(TileLanguage, ReductionsSeeValuesFromBeforeLaterStores) {
  for (int64_t block : {4, 16, 32, 128}) {
    Tensor p = randn({block}), before = p.clone(), out = empty({2});
    poison(out);
    sum_after_store[{1}](p, out, tl::meta("BLOCK", block));
    EXPECT_NEAR(out.data_ptr<float>()[0], before.sum().item<double>(), 1e-4) << block;
    EXPECT_NEAR(out.data_ptr<float>()[1], exp(before).sum().item<double>(), 1e-3) << block;
    EXPECT_TRUE(all_close(p, exp(before), 1e-6, 1e-7)) << block;
  }
}

// ---- runtime loops, Vars, branches
// ----------------------------------------------------------------

TL_JIT(row_sum_loop, tl::Ptr x, tl::Ptr out, tl::Int n_cols, tl::Int stride, tl::Const BLOCK) {
  auto row = tl::program_id(0);
  tl::Var acc = tl::zeros({BLOCK}, tl::float32);
  tl::Var count = 0;
  tl::range(0, n_cols, BLOCK, [&](tl::Tile start) {
    auto cols = start + tl::arange(0, BLOCK);
    acc = acc + tl::load(x + row * stride + cols, cols < n_cols, 0.0);
    count = count + 1;
  });
  auto total = tl::sum(acc, 0);
  tl::Var result = total;
  tl::if_(
      count > 2, [&] { result = total * 2; }, [&] { result = total - 1; });
  tl::store(out + row, result);
}

// Carried tiles updated together read each other's values from before the iteration (a tile
// that reads only itself elementwise is updated in place on the CPU, the others through
// temporaries): a += b with b -= a, a tile swapped with another, a tile reading one updated in
// place, and one reading itself at other elements (a flip: no in-place update).
TL_JIT(carried_together, tl::Ptr x, tl::Ptr out, tl::Int trips, tl::Const B) {
  auto offs = tl::arange(0, B);
  auto xv = tl::load(x + offs);
  tl::Var a = xv, b = xv * 2.0f, c = xv + 1.0f, d = xv - 3.0f, e = xv * 0.5f, f = xv;
  tl::range(0, trips, 1, [&](tl::Tile) {
    auto a2 = a + b, b2 = a - b;            // each reads the other
    tl::Tile c2 = d, d2 = c;                // a swap
    auto e2 = e * 0.5f + 1.0f, f2 = f + e;  // f reads e, which is updated in place
    a = a2;
    b = b2;
    c = c2;
    d = d2;
    e = e2;
    f = f2 + tl::flip(f, 0) * 0.25f;  // reads itself at the mirrored element
  });
  tl::store(out + offs, a);
  tl::store(out + B + offs, b);
  tl::store(out + 2 * B + offs, c);
  tl::store(out + 3 * B + offs, d);
  tl::store(out + 4 * B + offs, e);
  tl::store(out + 5 * B + offs, f);
}

TEST(TileLanguage, CarriedTilesUpdatedTogetherReadTheOldValues) {
  const int64_t B = 16;
  Tensor x = randn({B});
  const int64_t trips = 5;
  std::vector<double> a(B), b(B), c(B), d(B), e(B), f(B);
  for (int64_t i = 0; i < B; ++i) {
    const double v = x[i].item<float>();
    a[i] = v, b[i] = static_cast<float>(v * 2), c[i] = static_cast<float>(v + 1),
    d[i] = static_cast<float>(v - 3), e[i] = static_cast<float>(v * 0.5), f[i] = v;
  }
  for (int64_t t = 0; t < trips; ++t) {
    std::vector<double> a2(B), b2(B), e2(B), f2(B);
    for (int64_t i = 0; i < B; ++i) {
      a2[i] = static_cast<float>(a[i] + b[i]);
      b2[i] = static_cast<float>(a[i] - b[i]);
      e2[i] = static_cast<float>(static_cast<float>(e[i] * 0.5) + 1.0);
      f2[i] = static_cast<float>(static_cast<float>(f[i] + e[i]) +
                                 static_cast<float>(f[static_cast<size_t>(B - 1 - i)] * 0.25));
    }
    a = a2, b = b2, e = e2, f = f2;
    std::swap(c, d);
  }
  std::vector<double> want;
  for (const auto* v : {&a, &b, &c, &d, &e, &f}) want.insert(want.end(), v->begin(), v->end());
  every_mode([&](const char* mode) {
    Tensor out = poisoned_like(empty({6 * B}));
    carried_together[{1}](x, out, trips, tl::meta("B", B));
    for (int64_t i = 0; i < 6 * B; ++i)
      EXPECT_EQ(out[i].item<float>(), static_cast<float>(want[static_cast<size_t>(i)]))
          << mode << " element " << i;
  });
}

// Dots that accumulate into carried tiles (the CPU updates an accumulator in place when the dot
// alone reads it): one kept as `prev` before the update, two swapped, one that is its own left
// operand, one that is its own left operand, and a plain one. Small integers: every product and sum
// is exact in float32.
TL_JIT(carried_dots, tl::Ptr A, tl::Ptr Bm, tl::Ptr out, tl::Int trips, tl::Const B) {
  auto r = tl::arange(0, B);
  auto at = [&](tl::Ptr p, const tl::Tile& base) {
    return tl::load(p + base + r[{tl::_, tl::None}] * B + r[{tl::None, tl::_}]);
  };
  tl::DotOptions ieee;
  ieee.input_precision = "ieee";
  auto b = at(Bm, tl::zeros({}, tl::int32));
  tl::Var acc = tl::zeros({B, B}, tl::float32), prev = tl::zeros({B, B}, tl::float32);
  tl::Var x = b * 2.0f;
  tl::Var y = b - 1.0f;
  tl::Var z = b + 1.0f;
  tl::Var w = b;
  tl::Var plain = tl::zeros({B, B}, tl::float32);
  tl::range(0, trips, 1, [&](tl::Tile t) {
    auto a = at(A, t * B * B);
    auto next = tl::dot(a, b, tl::Operand(acc), ieee);
    prev = tl::Tile(acc);  // the old value: the dot must not have overwritten it
    acc = next;
    auto x2 = tl::dot(a, b, tl::Operand(y), ieee), y2 = tl::dot(a, b, tl::Operand(x), ieee);
    x = x2;
    y = y2;
    z = tl::dot(z * 0.25f, b, tl::Operand(z), ieee);  // reads its accumulator as an operand
    w = tl::dot(w, b, tl::Operand(w), ieee);          // is its own left operand
    plain = tl::dot(a, b, tl::Operand(plain), ieee);
  });
  auto o = r[{tl::_, tl::None}] * B + r[{tl::None, tl::_}];
  tl::store(out + o, acc);
  tl::store(out + B * B + o, prev);
  tl::store(out + 2 * B * B + o, x);
  tl::store(out + 3 * B * B + o, y);
  tl::store(out + 4 * B * B + o, z);
  tl::store(out + 5 * B * B + o, plain);
  tl::store(out + 6 * B * B + o, w);
}

TEST(TileLanguage, DotsIntoCarriedAccumulatorsReadTheOldValues) {
  const int64_t B = 16, trips = 3;
  Tensor a = randint(-2, 3, {trips, B, B}).to(DType::Float32);
  Tensor b = randint(-2, 3, {B, B}).to(DType::Float32);
  using Mat = std::vector<double>;
  auto el = [&](const Tensor& t, int64_t i) { return static_cast<double>(t.data_ptr<float>()[i]); };
  auto mm = [&](const Mat& x, int64_t t, const Mat& c) {  // x (or a[t] when x is empty) @ b + c
    Mat r = c;
    for (int64_t i = 0; i < B; ++i)
      for (int64_t j = 0; j < B; ++j)
        for (int64_t k = 0; k < B; ++k)
          r[i * B + j] +=
              (x.empty() ? el(a, (t * B + i) * B + k) : x[i * B + k]) * el(b, k * B + j);
    return r;
  };
  Mat acc(B * B, 0.0), prev = acc, x(B * B), y(B * B), z(B * B), w(B * B), plain = acc;
  for (int64_t i = 0; i < B * B; ++i)
    x[i] = el(b, i) * 2, y[i] = el(b, i) - 1, z[i] = el(b, i) + 1, w[i] = el(b, i);
  for (int64_t t = 0; t < trips; ++t) {
    prev = acc;
    acc = mm({}, t, acc);
    Mat x2 = mm({}, t, y), y2 = mm({}, t, x);
    x = x2, y = y2;
    Mat zq = z;
    for (double& v : zq) v *= 0.25;
    z = mm(zq, t, z);
    w = mm(w, t, w);
    plain = mm({}, t, plain);
  }
  Mat want;
  for (const Mat* m : {&acc, &prev, &x, &y, &z, &plain, &w})
    want.insert(want.end(), m->begin(), m->end());
  every_mode([&](const char* mode) {
    Tensor out = poisoned_like(empty({7 * B * B}));
    carried_dots[{1}](a, b, out, trips, tl::meta("B", B));
    for (int64_t i = 0; i < 7 * B * B; ++i)
      ASSERT_EQ(out.data_ptr<float>()[i], static_cast<float>(want[static_cast<size_t>(i)]))
          << mode << " tile " << i / (B * B) << " element " << i % (B * B);
  });
}

TL_JIT(dot_tiles, tl::Ptr a, tl::Ptr b, tl::Ptr c, tl::Const M, tl::Const N, tl::Const K) {
  auto rm = tl::arange(0, M), rn = tl::arange(0, N), rk = tl::arange(0, K);
  auto ta = tl::load(a + rm[{tl::_, tl::None}] * K + rk[{tl::None, tl::_}]);
  auto tb = tl::load(b + rk[{tl::_, tl::None}] * N + rn[{tl::None, tl::_}]);
  tl::DotOptions ieee;
  ieee.input_precision = "ieee";
  tl::store(c + rm[{tl::_, tl::None}] * N + rn[{tl::None, tl::_}],
            tl::dot(ta, tb, std::nullopt, ieee));
}

// The CPU dot's 64-byte-vector micro-kernel (TESSERA_CPU_DOT512=1; on by default on Intel's
// AVX-512 CPUs) gives every element the same fused multiply-adds in the same order as the 32-byte
// one: bit for bit equal, over its 4 x 32 and 8 x 16 blocks of floats and 4 x 16 of doubles.
// Where the kernel compiler has no AVX-512 both are the 32-byte kernel.
TEST(TileLanguage, TheWideCpuDotGivesTheSameBits) {
  struct Shape {
    int64_t m, n, k;
    DType dt;
  };
  for (const Shape& s : {Shape{32, 64, 32, DType::Float32}, Shape{32, 16, 16, DType::Float32},
                         Shape{16, 32, 16, DType::Float64}}) {
    SCOPED_TRACE(std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k));
    const Tensor a = randn({s.m, s.k}).to(s.dt), b = randn({s.k, s.n}).to(s.dt);
    Tensor out[2];
    for (int wide = 0; wide < 2; ++wide) {
      ScopedEnv env("TESSERA_CPU_DOT512", wide ? "1" : "0");
      dot_tiles.clear_memory_cache();
      out[wide] = poisoned_like(empty({s.m, s.n}, TensorOptions().dtype(s.dt)));
      dot_tiles[{1}](a, b, out[wide], tl::meta("M", s.m), tl::meta("N", s.n), tl::meta("K", s.k));
      if (!knobs().interpret) {  // (test_tl_interpreted: no C++ to look at)
        EXPECT_NE(dot_tiles.last_source().find(wide ? ", false, true>(" : ", false, false>("),
                  std::string::npos);
      }
    }
    EXPECT_TRUE(bitwise_equal(out[0], out[1]));
    const Tensor want = a.to(DType::Float64).matmul(b.to(DType::Float64));
    EXPECT_TRUE(all_close(out[1].to(DType::Float64), want, 1e-5, 1e-5));
  }
}

TEST(TileLanguage, RuntimeLoopsCarryVarsAndBranchesMergeThem) {
  for (int64_t cols : {5, 64, 200}) {
    Tensor x = randn({6, cols});
    Tensor out = poisoned_like(x.select(1, 0));
    row_sum_loop[{6}](x, out, cols, x.stride(0), tl::meta("BLOCK", 32));
    const int64_t trips = (cols + 31) / 32;
    Tensor want = trips > 2 ? x.sum({1}) * 2 : x.sum({1}) - 1;
    EXPECT_TRUE(all_close(out, want, 1e-5, 1e-5)) << cols;
  }
}

TL_JIT(unrolled_kernel, tl::Ptr x, tl::Ptr out, tl::Const REPEAT, tl::Const BLOCK) {
  auto offs = tl::arange(0, BLOCK);
  auto v = tl::load(x + offs);
  tl::Tile acc = tl::zeros({BLOCK}, tl::float32);
  for (int i = 0; i < REPEAT.int_value(); ++i) acc = acc + v * (i + 1);  // unrolled while tracing
  if (REPEAT) acc = acc + 0.5;                                           // constexpr condition
  tl::store(out + offs, acc);
}

TEST(TileLanguage, CxxControlFlowUnrollsAtTraceTime) {
  Tensor x = randn({8}), out = empty({8});
  unrolled_kernel[{1}](x, out, 3, tl::meta("BLOCK", 8));
  EXPECT_TRUE(all_close(out, x * 6 + 0.5));
  EXPECT_EQ(unrolled_kernel.last_ir().find("for "), std::string::npos);  // no runtime loop
}

// ---- strided views, 2-D grids, num_programs
// --------------------------------------------------------

TL_JIT(copy2d_kernel, tl::Ptr src, tl::Ptr dst, tl::Int rows, tl::Int cols, tl::Int s0, tl::Int s1,
       tl::Const BR, tl::Const BC) {
  auto r = tl::program_id(0) * BR + tl::arange(0, BR);
  auto c = tl::program_id(1) * BC + tl::arange(0, BC);
  auto mask = (r[{tl::_, tl::None}] < rows) & (c[{tl::None, tl::_}] < cols);
  auto v = tl::load(src + r[{tl::_, tl::None}] * s0 + c[{tl::None, tl::_}] * s1, mask);
  tl::store(dst + r[{tl::_, tl::None}] * cols + c[{tl::None, tl::_}], v + tl::num_programs(1),
            mask);
}

TEST(TileLanguage, StridedInputsAndTwoDimensionalGrids) {
  Tensor x = randn({9, 14}).t();  // 14 x 9, transposed strides
  Tensor out = poisoned_like(x.contiguous());
  copy2d_kernel[{tl::cdiv(14, 4), tl::cdiv(9, 4)}](x, out, 14, 9, x.stride(0), x.stride(1),
                                                   tl::meta("BR", 4), tl::meta("BC", 4));
  EXPECT_TRUE(equal(out, x + 3));
}

// ---- specialization
// ------------------------------------------------------------------------------

TL_JIT(scale_kernel, tl::Ptr x, tl::Ptr out, tl::Int n, tl::Int factor, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  tl::store(out + offs, tl::load(x + offs, offs < n) * factor, offs < n);
}

TEST(TileLanguage, SpecializesOnDivisibilityAndOne) {
  Tensor x = randn({64});
  Tensor out = empty({64});
  scale_kernel.clear_memory_cache();
  scale_kernel[{4}](x, out, 64, 3, tl::meta("BLOCK", 16));  // n % 16 == 0
  scale_kernel[{4}](x, out, 63, 3, tl::meta("BLOCK", 16));  // n not divisible
  scale_kernel[{4}](x, out, 64, 5, tl::meta("BLOCK", 16));  // same key as the first
  EXPECT_EQ(scale_kernel.num_specializations(), 2u);
  scale_kernel[{4}](x, out, 64, 1, tl::meta("BLOCK", 16));  // factor == 1 folds to a constant
  EXPECT_EQ(scale_kernel.num_specializations(), 3u);
  // A folded parameter has no value in the IR ("factor: int"), not "%N: i32 factor".
  EXPECT_NE(scale_kernel.last_ir().find("factor: int"), std::string::npos)
      << scale_kernel.last_ir();
  EXPECT_EQ(scale_kernel.last_ir().find("i32 factor"), std::string::npos);
  EXPECT_TRUE(equal(out, x));
  scale_kernel[{4}](x, out, 64, 2, tl::meta("BLOCK", 32));  // a new constexpr
  EXPECT_EQ(scale_kernel.num_specializations(), 4u);
  EXPECT_TRUE(equal(out.narrow(0, 0, 64), x * 2));
}

TL_JIT(scale_nospec_kernel, tl::Ptr x, tl::Ptr out, tl::Int n, tl::Int factor, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  tl::store(out + offs, tl::load(x + offs, offs < n) * factor, offs < n);
}

TEST(TileLanguage, DoNotSpecializeKeepsOneKernelForEveryValue) {
  scale_nospec_kernel.do_not_specialize({"n", "factor"});
  Tensor x = randn({64});
  for (int64_t n : {64, 63, 1, 32}) {
    for (int64_t f : {1, 16, 3}) {
      Tensor out = zeros({64});
      scale_nospec_kernel[{4}](x, out, n, f, tl::meta("BLOCK", 16));
      Tensor want = zeros({64});
      want.narrow(0, 0, n).copy_(x.narrow(0, 0, n) * static_cast<double>(f));
      EXPECT_TRUE(equal(out, want)) << n << " " << f;
    }
  }
  EXPECT_EQ(scale_nospec_kernel.num_specializations(), 1u);
  EXPECT_NE(scale_nospec_kernel.last_ir().find("i32 factor"), std::string::npos)
      << scale_nospec_kernel.last_ir();  // a runtime parameter, not a folded 1
  const std::string msg =
      error_of<ValueError>([] { scale_nospec_kernel.do_not_specialize({"m"}); });
  EXPECT_NE(msg.find("no parameter named 'm'"), std::string::npos) << msg;
}

}  // namespace
