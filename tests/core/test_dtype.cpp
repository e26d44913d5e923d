#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <vector>

#include "core/dtype_visit.h"
#include "tessera/dtype.h"
#include "tessera/float_types.h"
#include "tessera/scalar.h"

using namespace tessera;

TEST(DType, NamesSizesAndParsing) {
  EXPECT_EQ(itemsize(DType::Float32), 4u);
  EXPECT_EQ(itemsize(DType::BFloat16), 2u);
  EXPECT_EQ(itemsize(DType::Float8_e5m2), 1u);
  EXPECT_EQ(itemsize(DType::UInt64), 8u);
  EXPECT_STREQ(dtype_name(DType::Float8_e4m3fn), "float8_e4m3fn");
  std::ostringstream os;
  os << float64;
  EXPECT_EQ(os.str(), "tessera.float64");
  for (int i = 0; i < kNumDTypes; ++i) {
    auto t = static_cast<DType>(i);
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);
  }
  EXPECT_EQ(parse_dtype("bf16"), DType::BFloat16);
  EXPECT_EQ(parse_dtype("tessera.int8"), DType::Int8);
  EXPECT_FALSE(parse_dtype("float17").has_value());
}

TEST(DType, PromotionMatchesPyTorch) {
  EXPECT_EQ(promote_types(uint8, int8), int16);
  EXPECT_EQ(promote_types(uint8, int16), int16);
  EXPECT_EQ(promote_types(uint8, int64), int64);
  EXPECT_EQ(promote_types(int8, int32), int32);
  EXPECT_EQ(promote_types(bool_, int8), int8);
  EXPECT_EQ(promote_types(bool_, bool_), bool_);
  EXPECT_EQ(promote_types(float16, bfloat16), float32);
  EXPECT_EQ(promote_types(float16, int64), float16);
  EXPECT_EQ(promote_types(bfloat16, int32), bfloat16);
  EXPECT_EQ(promote_types(float32, float64), float64);
  EXPECT_EQ(promote_types(uint32, float16), float16);
  EXPECT_EQ(promote_types(uint16, uint16), uint16);
  EXPECT_THROW(promote_types(uint16, int32), DTypeError);
  EXPECT_THROW(promote_types(float8_e4m3fn, float32), DTypeError);
  EXPECT_THROW(promote_types(float8_e4m3fn, float8_e5m2), DTypeError);
  // Symmetric everywhere it is defined.
  for (int i = 0; i < kNumDTypes; ++i) {
    for (int j = 0; j < kNumDTypes; ++j) {
      auto a = static_cast<DType>(i), b = static_cast<DType>(j);
      try {
        EXPECT_EQ(promote_types(a, b), promote_types(b, a))
            << dtype_name(a) << " " << dtype_name(b);
      } catch (const DTypeError&) {
        EXPECT_THROW(promote_types(b, a), DTypeError);
      }
    }
  }
}

TEST(DType, ResultTypeWithScalars) {
  auto rt = [](std::initializer_list<std::pair<DType, OperandKind>> ops) {
    ResultType r;
    for (auto [t, k] : ops) r.add(t, k);
    return r.result();
  };
  using K = OperandKind;
  EXPECT_EQ(rt({{int32, K::Tensor}, {float64, K::WrappedNumber}}), float32);
  EXPECT_EQ(rt({{float16, K::Tensor}, {float64, K::WrappedNumber}}), float16);
  EXPECT_EQ(rt({{int8, K::Tensor}, {int64, K::WrappedNumber}}), int8);
  EXPECT_EQ(rt({{bool_, K::Tensor}, {int64, K::WrappedNumber}}), int64);
  EXPECT_EQ(rt({{bool_, K::Tensor}, {bool_, K::WrappedNumber}}), bool_);
  EXPECT_EQ(rt({{int32, K::Tensor}, {int64, K::ZeroDim}}), int32);
  EXPECT_EQ(rt({{int32, K::Tensor}, {float64, K::ZeroDim}}), float64);
  EXPECT_EQ(rt({{float32, K::Tensor}, {float64, K::ZeroDim}}), float32);
  EXPECT_EQ(rt({{float32, K::ZeroDim}, {float64, K::WrappedNumber}}), float32);
  EXPECT_EQ(rt({{int64, K::ZeroDim}, {float64, K::WrappedNumber}}), float32);
  EXPECT_EQ(rt({{uint8, K::Tensor}, {int8, K::Tensor}}), int16);
}

TEST(DType, CanCast) {
  EXPECT_TRUE(can_cast(int64, float32));
  EXPECT_FALSE(can_cast(float32, int64));
  EXPECT_FALSE(can_cast(int32, bool_));
  EXPECT_TRUE(can_cast(bool_, int32));
  EXPECT_TRUE(can_cast(float64, float16));
}

// ---- narrow float conversions against a brute-force nearest-value reference -----------------

namespace {

struct Format {
  const char* name;
  int codes;                  // number of codes (2^bits)
  float (*decode)(uint32_t);  // code -> float
  uint32_t (*encode)(float);  // float -> code
  uint32_t sign_bit;
  double overflow_to_special_at;  // |x| >= this -> special (inf or NaN)
  bool has_inf;
};

// Nearest representable value, ties to the even code, for finite |x| below the overflow point.
uint32_t reference_encode(const Format& f, float x,
                          const std::vector<std::pair<double, uint32_t>>& pos) {
  const double ax = std::fabs(static_cast<double>(x));
  auto it = std::lower_bound(pos.begin(), pos.end(), std::make_pair(ax, 0u));
  uint32_t code;
  if (it == pos.end()) {
    code = pos.back().second;
  } else if (it->first == ax || it == pos.begin()) {
    code = it->second;
  } else {
    auto lo = std::prev(it);
    const double dlo = ax - lo->first, dhi = it->first - ax;
    if (dlo < dhi)
      code = lo->second;
    else if (dhi < dlo)
      code = it->second;
    else
      code = (lo->second % 2 == 0) ? lo->second : it->second;
  }
  return std::signbit(x) ? (code | f.sign_bit) : code;
}

void check_format(const Format& f, const std::vector<float>& samples) {
  std::vector<std::pair<double, uint32_t>> pos;
  for (uint32_t c = 0; c < f.sign_bit; ++c) {
    float v = f.decode(c);
    if (std::isfinite(v)) pos.emplace_back(v, c);
  }
  std::sort(pos.begin(), pos.end());
  for (float x : samples) {
    const uint32_t got = f.encode(x);
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(f.decode(got))) << f.name << " NaN";
      continue;
    }
    if (std::fabs(static_cast<double>(x)) >= f.overflow_to_special_at) {
      const float d = f.decode(got);
      if (f.has_inf) {
        EXPECT_TRUE(std::isinf(d) && std::signbit(d) == std::signbit(x)) << f.name << " " << x;
      } else {
        EXPECT_TRUE(std::isnan(d)) << f.name << " " << x;
      }
      continue;
    }
    const uint32_t want = reference_encode(f, x, pos);
    ASSERT_EQ(got, want) << f.name << " x=" << x;
  }
}

std::vector<float> samples() {
  std::vector<float> s;
  std::mt19937 rng(1234);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) s.push_back(std::bit_cast<float>(bits(rng)));
  // Exact ties and neighbours around every half / bf16 boundary region.
  std::uniform_real_distribution<float> small(-600.f, 600.f);
  for (int i = 0; i < 100000; ++i) s.push_back(small(rng));
  for (float v : {0.f,
                  -0.f,
                  1.f,
                  65504.f,
                  65519.f,
                  65520.f,
                  448.f,
                  464.f,
                  465.f,
                  479.f,
                  480.f,
                  57344.f,
                  61439.f,
                  61440.f,
                  1e-8f,
                  5.96e-8f,
                  2.98e-8f,
                  2.99e-8f,
                  std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::denorm_min()})
    s.push_back(v);
  return s;
}

}  // namespace

TEST(FloatTypes, KnownValues) {
  EXPECT_EQ(Half(1.0f).x, 0x3c00);
  EXPECT_EQ(Half(65504.0f).x, 0x7bff);
  EXPECT_EQ(Half(65520.0f).x, 0x7c00);
  EXPECT_EQ(Half(std::ldexp(1.0f, -24)).x, 0x0001);
  EXPECT_EQ(Half(-2.0f).x, 0xc000);
  EXPECT_EQ(BFloat16(1.0f).x, 0x3f80);
  EXPECT_EQ(BFloat16(std::numeric_limits<float>::quiet_NaN()).x, 0x7fc0);
  EXPECT_EQ(Float8_e4m3fn(448.0f).x, 0x7e);
  EXPECT_EQ(Float8_e4m3fn(464.0f).x, 0x7e);  // tie to even
  EXPECT_EQ(Float8_e4m3fn(470.0f).x, 0x7f);  // rounds past 448: NaN
  EXPECT_EQ(Float8_e4m3fn(-1e9f).x, 0xff);
  EXPECT_EQ(Float8_e4m3fn(std::ldexp(1.0f, -9)).x, 0x01);
  EXPECT_TRUE(std::isnan(static_cast<float>(Float8_e4m3fn(0x7f, from_bits))));
  EXPECT_EQ(static_cast<float>(Float8_e4m3fn(0x7e, from_bits)), 448.0f);
  EXPECT_EQ(Float8_e5m2(57344.0f).x, 0x7b);
  EXPECT_EQ(Float8_e5m2(1e6f).x, 0x7c);
  EXPECT_TRUE(std::isinf(static_cast<float>(Float8_e5m2(0x7c, from_bits))));
  EXPECT_EQ(static_cast<float>(Half(0x0001, from_bits)), std::ldexp(1.0f, -24));
}

TEST(FloatTypes, RoundToNearestEvenEverywhere) {
  const auto s = samples();
  check_format(
      {"float16", 65536, [](uint32_t c) { return detail::half_bits_to_float(uint16_t(c)); },
       [](float x) { return uint32_t(detail::float_to_half_bits(x)); }, 0x8000, 65520.0, true},
      s);
  check_format(
      {"bfloat16", 65536, [](uint32_t c) { return detail::bfloat16_bits_to_float(uint16_t(c)); },
       [](float x) { return uint32_t(detail::float_to_bfloat16_bits(x)); }, 0x8000,
       std::ldexp(1.0, 128) - std::ldexp(1.0, 119), true},
      s);
  check_format({"e4m3fn", 256, [](uint32_t c) { return detail::e4m3fn_bits_to_float(uint8_t(c)); },
                [](float x) { return uint32_t(detail::float_to_e4m3fn_bits(x)); }, 0x80,
                464.0 + 1e-9, false},
               s);
  check_format(
      {"e5m2", 256, [](uint32_t c) { return detail::e5m2_bits_to_float(uint8_t(c)); },
       [](float x) { return uint32_t(detail::float_to_e5m2_bits(x)); }, 0x80, 61440.0, true},
      s);
}

TEST(FloatTypes, DecodeEncodeRoundTrip) {
  for (uint32_t c = 0; c < 65536; ++c) {
    const float h = detail::half_bits_to_float(uint16_t(c));
    if (!std::isnan(h)) {
      ASSERT_EQ(detail::float_to_half_bits(h), c);
    }
    const float b = detail::bfloat16_bits_to_float(uint16_t(c));
    if (!std::isnan(b)) {
      ASSERT_EQ(detail::float_to_bfloat16_bits(b), c);
    }
  }
  for (uint32_t c = 0; c < 256; ++c) {
    const float a = detail::e4m3fn_bits_to_float(uint8_t(c));
    if (!std::isnan(a)) {
      ASSERT_EQ(detail::float_to_e4m3fn_bits(a), c);
    }
    const float b = detail::e5m2_bits_to_float(uint8_t(c));
    if (!std::isnan(b)) {
      ASSERT_EQ(detail::float_to_e5m2_bits(b), c);
    }
  }
}

TEST(Convert, IntegerAndBoolRules) {
  EXPECT_EQ(convert<int32_t>(-2.7f), -2);
  EXPECT_EQ(convert<int8_t>(300.0), static_cast<int8_t>(300));
  EXPECT_EQ(convert<int64_t>(std::nan("")), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(convert<uint64_t>(1.8e19), static_cast<uint64_t>(1.8e19));
  EXPECT_TRUE(convert<bool>(std::nan("")));
  EXPECT_FALSE(convert<bool>(-0.0f));
  EXPECT_EQ(convert<float>(Half(1.5f)), 1.5f);
  EXPECT_EQ(convert<BFloat16>(3.0).x, BFloat16(3.0f).x);
  EXPECT_EQ(convert<int32_t>(BFloat16(-7.9f)), -7);
}

TEST(Convert, VisitDTypeRejectsOutsideSet) {
  int calls = 0;
  visit_dtype<kFloats>(float32, "test_op", [&]<class T>() { calls += std::is_same_v<T, float>; });
  EXPECT_EQ(calls, 1);
  try {
    visit_dtype<kFloats>(int32, "test_op", [&]<class T>() {});
    FAIL();
  } catch (const DTypeError& e) {
    EXPECT_NE(std::string(e.what()).find("[test_op] not implemented for 'int32'"),
              std::string::npos);
  }
}

TEST(Scalar, KindsAndPrinting) {
  EXPECT_TRUE(Scalar(1).is_integral());
  EXPECT_TRUE(Scalar(1.5f).is_floating_point());
  EXPECT_TRUE(Scalar(true).is_bool());
  EXPECT_EQ(Scalar(2.0).str(), "2.0");
  EXPECT_EQ(Scalar(0.1).str(), "0.1");
  EXPECT_EQ(Scalar(false).str(), "False");
  EXPECT_EQ(Scalar(-3).str(), "-3");
  EXPECT_EQ(Scalar(2.0).to_int(), 2);
  EXPECT_THROW(Scalar(2.5).to_int(), TypeError);
  EXPECT_EQ(Scalar(3).dtype(), int64);
  EXPECT_EQ(Scalar(3.0).dtype(), float64);
}

#include "tessera/detail/hash.h"

TEST(Hash, Sha256KnownAnswers) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  std::string million(1000000, 'a');
  EXPECT_EQ(sha256_hex(million), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  Sha256 a, b;
  a.field("ab").field("c");
  b.field("a").field("bc");
  EXPECT_NE(a.hex(), b.hex());
}
