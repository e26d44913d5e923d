// The CPU tile runtime's math against double-precision references: the precision contract of
// include/tessera/trt/cpu.h.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "tessera/float_types.h"
#include "tessera/trt/cpu.h"

namespace {

// Distance in units in the last place between a float result and the exact value.
double ulp_error(float got, double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0 : 1e30;
  if (std::isinf(want)) return got == static_cast<float>(want) ? 0 : 1e30;
  const float w = static_cast<float>(want);
  if (std::isinf(w)) return std::isinf(got) ? 0 : 1e30;  // rounds past FLT_MAX
  const double ulp = std::fabs(static_cast<double>(std::nextafter(std::fabs(w), INFINITY)) -
                               std::fabs(static_cast<double>(w)));
  const double denom = ulp > 0 ? ulp : std::numeric_limits<float>::denorm_min();
  return std::fabs(static_cast<double>(got) - want) / denom;
}

template <class F, class R>
double max_ulp(F f, R ref, float lo, float hi, int n, float* worst_x = nullptr) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(lo, hi);
  double worst = 0;
  for (int i = 0; i < n; ++i) {
    const float x = dist(rng);
    const double e = ulp_error(f(x), ref(static_cast<double>(x)));
    if (e > worst) {
      worst = e;
      if (worst_x) *worst_x = x;
    }
  }
  return worst;
}

TEST(TrtMath, ExpWithinTwoUlp) {
  float wx = 0;
  EXPECT_LE(max_ulp([](float x) { return trt::exp(x); }, [](double x) { return std::exp(x); }, -87,
                    88, 400000, &wx),
            2.0)
      << "worst at " << wx;
  EXPECT_LE(max_ulp([](float x) { return trt::exp(x); }, [](double x) { return std::exp(x); }, -103,
                    -87, 100000, &wx),
            2.0)
      << "subnormal results, worst at " << wx;
  // Every float near the overflow and underflow edges.
  for (const auto& [lo, hi] : {std::pair<float, float>{88.0f, 89.5f}, {-105.0f, -103.0f}}) {
    double worst = 0;
    for (float x = lo; x <= hi; x = std::nextafter(x, INFINITY)) {
      const double e = ulp_error(trt::exp(x), std::exp(static_cast<double>(x)));
      if (e > worst) {
        worst = e;
        wx = x;
      }
    }
    EXPECT_LE(worst, 2.0) << "edge [" << lo << ", " << hi << "], worst at " << wx;
  }
  EXPECT_EQ(trt::exp(-INFINITY), 0.0f);
  EXPECT_EQ(trt::exp(-1e30f), 0.0f);
  EXPECT_EQ(trt::exp(1e30f), INFINITY);
  EXPECT_TRUE(std::isnan(trt::exp(-NAN)));
  EXPECT_EQ(trt::exp(INFINITY), INFINITY);
  EXPECT_EQ(trt::exp(100.0f), INFINITY);
  EXPECT_TRUE(std::isnan(trt::exp(NAN)));
  EXPECT_EQ(trt::exp(0.0f), 1.0f);
}

TEST(TrtMath, LogWithinTwoUlp) {
  float wx = 0;
  EXPECT_LE(max_ulp([](float x) { return trt::log(x); }, [](double x) { return std::log(x); },
                    1e-30f, 1e30f, 400000, &wx),
            2.0)
      << "worst at " << wx;
  EXPECT_LE(max_ulp([](float x) { return trt::log(x); }, [](double x) { return std::log(x); }, 0.5f,
                    2.0f, 400000, &wx),
            2.0)
      << "worst at " << wx;
  EXPECT_LE(max_ulp([](float x) { return trt::log(x); }, [](double x) { return std::log(x); },
                    1e-44f, 1e-38f, 100000, &wx),
            2.0)
      << "subnormal inputs, worst at " << wx;
  EXPECT_EQ(trt::log(0.0f), -INFINITY);
  EXPECT_TRUE(std::isnan(trt::log(-1.0f)));
  EXPECT_EQ(trt::log(INFINITY), INFINITY);
  EXPECT_EQ(trt::log(1.0f), 0.0f);
}

TEST(TrtMath, SinCosWithinTwoUlp) {
  float wx = 0;
  for (auto range : {std::pair<float, float>{-3.2f, 3.2f}, {-100.0f, 100.0f}, {-1e4f, 1e4f}}) {
    EXPECT_LE(max_ulp([](float x) { return trt::sin(x); }, [](double x) { return std::sin(x); },
                      range.first, range.second, 300000, &wx),
              2.0)
        << "sin, worst at " << wx;
    EXPECT_LE(max_ulp([](float x) { return trt::cos(x); }, [](double x) { return std::cos(x); },
                      range.first, range.second, 300000, &wx),
              2.0)
        << "cos, worst at " << wx;
  }
  EXPECT_TRUE(std::isnan(trt::sin(INFINITY)));
  EXPECT_TRUE(std::isnan(trt::cos(NAN)));
}

TEST(TrtMath, TanhWithinTwoUlp) {
  float wx = 0;
  auto f = [](float x) { return trt::tanh(x); };
  auto ref = [](double x) { return std::tanh(x); };
  EXPECT_LE(max_ulp(f, ref, -20, 20, 400000, &wx), 2.0) << "worst at " << wx;
  EXPECT_LE(max_ulp(f, ref, -1e-3f, 1e-3f, 100000, &wx), 2.0) << "worst at " << wx;
  // Every float where the polynomial hands over to the exp form (|x| = 0.625), both signs.
  double worst = 0;
  for (float x = 0.55f; x <= 0.7f; x = std::nextafter(x, INFINITY)) {
    for (float sx : {x, -x}) {
      const double e = ulp_error(trt::tanh(sx), std::tanh(static_cast<double>(sx)));
      if (e > worst) {
        worst = e;
        wx = sx;
      }
    }
  }
  EXPECT_LE(worst, 2.0) << "near 0.625, worst at " << wx;
  for (float tiny : {1e-30f, 1e-40f, -1e-40f}) EXPECT_EQ(trt::tanh(tiny), tiny);
  EXPECT_EQ(trt::tanh(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(trt::tanh(-0.0f)));
  EXPECT_EQ(trt::tanh(INFINITY), 1.0f);
  EXPECT_EQ(trt::tanh(-INFINITY), -1.0f);
  EXPECT_EQ(trt::tanh(50.0f), 1.0f);
  EXPECT_EQ(trt::tanh(-1e30f), -1.0f);
  EXPECT_TRUE(std::isnan(trt::tanh(NAN)));
}

// The host's erf polynomial: 1.212 ulp at most over every positive float (checked once, 53 s);
// here random inputs and every float where its forms hand over (0.921875) and where it reaches 1.
TEST(TrtMath, ErfWithinOnePointTwoFiveUlp) {
  float wx = 0;
  auto f = [](float x) { return trt::erf(x); };
  auto ref = [](double x) { return std::erf(x); };
  EXPECT_LE(max_ulp(f, ref, -6, 6, 400000, &wx), 1.25) << "worst at " << wx;
  EXPECT_LE(max_ulp(f, ref, -1e-3f, 1e-3f, 100000, &wx), 1.25) << "worst at " << wx;
  for (const auto& [lo, hi] : {std::pair<float, float>{0.85f, 1.0f}, {3.8f, 4.2f}}) {
    double worst = 0;
    for (float x = lo; x <= hi; x = std::nextafter(x, INFINITY)) {
      for (float sx : {x, -x}) {
        const double e = ulp_error(trt::erf(sx), std::erf(static_cast<double>(sx)));
        if (e > worst) {
          worst = e;
          wx = sx;
        }
      }
    }
    EXPECT_LE(worst, 1.25) << "[" << lo << ", " << hi << "], worst at " << wx;
  }
  for (float tiny : {1e-30f, 1e-40f, -1e-40f})
    EXPECT_LE(ulp_error(trt::erf(tiny), std::erf(static_cast<double>(tiny))), 1.25) << tiny;
  EXPECT_EQ(trt::erf(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(trt::erf(-0.0f)));
  EXPECT_EQ(trt::erf(INFINITY), 1.0f);
  EXPECT_EQ(trt::erf(-INFINITY), -1.0f);
  EXPECT_EQ(trt::erf(4.5f), 1.0f);
  EXPECT_EQ(trt::erf(-1e30f), -1.0f);
  EXPECT_TRUE(std::isnan(trt::erf(NAN)));
}

TEST(TrtMath, NarrowFloatConversionsMatchTheLibrary) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 300000; ++i) {
    float f;
    const uint32_t b = bits(rng);
    std::memcpy(&f, &b, 4);
    ASSERT_EQ(trt::float_to_half(f), tessera::detail::float_to_half_bits(f)) << f;
    ASSERT_EQ(trt::float_to_bf16(f), tessera::detail::float_to_bfloat16_bits(f)) << f;
    ASSERT_EQ(trt::float_to_e4m3(f), tessera::detail::float_to_e4m3fn_bits(f)) << f;
    ASSERT_EQ(trt::float_to_e5m2(f), tessera::detail::float_to_e5m2_bits(f)) << f;
  }
  for (uint32_t c = 0; c < 65536; ++c) {
    const float a = trt::half_to_float(static_cast<uint16_t>(c));
    const float b = tessera::detail::half_bits_to_float(static_cast<uint16_t>(c));
    ASSERT_TRUE(a == b || (std::isnan(a) && std::isnan(b))) << c;
  }
  for (uint32_t c = 0; c < 256; ++c) {
    const float a = trt::e4m3_to_float(static_cast<uint8_t>(c));
    const float b = tessera::detail::e4m3fn_bits_to_float(static_cast<uint8_t>(c));
    ASSERT_TRUE(a == b || (std::isnan(a) && std::isnan(b))) << c;
  }
}

TEST(TrtMath, IntegerDivisionNeverTraps) {
  EXPECT_EQ(trt::idiv<int32_t>(7, 0), -1);
  EXPECT_EQ(trt::irem<int32_t>(7, 0), 7);
  EXPECT_EQ(trt::idiv<int32_t>(INT32_MIN, -1), INT32_MIN);
  EXPECT_EQ(trt::irem<int32_t>(INT32_MIN, -1), 0);
  EXPECT_EQ(trt::idiv<int32_t>(-7, 2), -3);
  EXPECT_EQ(trt::irem<int32_t>(-7, 2), -1);
  EXPECT_EQ(trt::idiv<uint32_t>(7, 0), 0xffffffffu);
}

}  // namespace
