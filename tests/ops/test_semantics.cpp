// Operator semantics the harness does not cover: promotion across dtype pairs, special values,
// out= and in-place rules, determinism, and one test per user-facing diagnostic.
#include <bit>
#include <cmath>
#include <functional>
#include <optional>
#include <string>

#include "ops/op_utils.h"
#include "runtime/thread_pool.h"
#include "testing.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

Tensor fvec(std::vector<float> v) {
  return from_vector(v);
}

const std::vector<DType> kPromotable = {bool_, int8,    int16,    int32,   int64,
                                        uint8, float16, bfloat16, float32, float64};

TEST(Devices, MixedDevicesAreAnErrorNamingBoth) {
  // Fake tensors carry a device without memory, so the check runs without a GPU.
  Tensor cpu = zeros({3}), cpu_scalar = zeros({});
  Tensor gpu = detail::make_fake(SymDimVector{SymInt(3)}, float32, Device("cuda"));
  Tensor gpu1 = detail::make_fake(SymDimVector{SymInt(3)}, float32, Device("cuda:1"));
  for (auto order :
       {std::pair<const Tensor*, const Tensor*>{&cpu, &gpu}, {&gpu, &cpu}, {&gpu, &gpu1}}) {
    const std::string msg = error_of<DeviceError>([&] {
      ops_detail::check_same_device("aten::add", {order.first, order.second});
    });
    EXPECT_NE(msg.find("[aten::add] expected all tensors to be on the same device"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find(order.first->device().str() + " and " + order.second->device().str()),
              std::string::npos)
        << msg;
  }
  // CPU scalars join any device, in any position.
  ops_detail::check_same_device("aten::add", {&cpu_scalar, &gpu});
  ops_detail::check_same_device("aten::add", {&gpu, &cpu_scalar, &gpu});
  ops_detail::check_same_device("aten::add", {&cpu_scalar, &cpu});
}

TEST(Promotion, BinaryOpsFollowPromoteTypesForEveryPair) {
  for (DType a : kPromotable) {
    for (DType b : kPromotable) {
      Tensor x = full({3}, 2, a), y = full({3}, 1, b);
      const DType want = promote_types(a, b);
      Tensor r = add(x, y);
      EXPECT_EQ(r.dtype(), want) << dtype_name(a) << " + " << dtype_name(b);
      const double expect = (a == bool_ && b == bool_) ? 1.0 : (a == bool_ ? 2.0 : 3.0);
      if (want != bool_) {
        EXPECT_EQ(r[1].item<double>(), a == bool_ ? 1.0 + 1.0 : expect)
            << dtype_name(a) << " + " << dtype_name(b);
      }
      EXPECT_EQ(mul(x, y).dtype(), want);
      EXPECT_EQ(lt(x, y).dtype(), bool_);
      EXPECT_EQ(div(x, y).dtype(), is_floating_point(want) ? want : float32);
    }
  }
}

TEST(Promotion, ScalarsAndZeroDimTensors) {
  Tensor i32 = full({2}, 3, int32);
  EXPECT_EQ((i32 + 2.5).dtype(), float32);
  EXPECT_EQ((i32 + 2).dtype(), int32);
  EXPECT_EQ((full({2}, 100, int8) + 1000).dtype(), int8);  // the scalar wraps into int8
  EXPECT_EQ((full({2}, 100, int8) + 1000)[0].item<int64_t>(), static_cast<int8_t>(1100));
  EXPECT_EQ((full({2}, 1, float16) + 1e5)[0].item<double>(), INFINITY);
  EXPECT_EQ((full({2}, true) + 1).dtype(), int64);
  EXPECT_EQ((full({2}, true) + true).dtype(), bool_);
  EXPECT_EQ(add(i32, full({}, 1.5, float64)).dtype(), float64);  // 0-dim float moves the category
  EXPECT_EQ(add(i32, full({}, 7, int64)).dtype(), int32);        // but not the width
  EXPECT_EQ(add(full({2}, 1, float32), full({}, 1, float64)).dtype(), float32);
  EXPECT_EQ(where(full({2}, true), i32, 2.5).dtype(), float32);
  EXPECT_EQ(clamp(i32, 0.5).dtype(), float32);
  EXPECT_EQ(pow(2, i32).dtype(), int32);
  EXPECT_EQ(pow(2.0, i32).dtype(), float32);
}

TEST(SpecialValues, NaNInfAndZeroDivision) {
  Tensor x = fvec({NAN, 1, -INFINITY});
  EXPECT_TRUE(std::isnan(maximum(x, fvec({0, 0, 0}))[0].item<double>()));
  EXPECT_TRUE(std::isnan(minimum(fvec({0, 0, 0}), x)[0].item<double>()));
  EXPECT_TRUE(std::isnan(amax(x).item<double>()));
  EXPECT_EQ(argmax(x).item<int64_t>(), 0);
  EXPECT_EQ(argmin(fvec({3, 1, NAN, 1})).item<int64_t>(), 2);
  EXPECT_EQ(argmax(fvec({1, 5, 5, 2})).item<int64_t>(), 1);  // ties: first index
  EXPECT_TRUE(std::isnan(relu(x)[0].item<double>()));
  EXPECT_TRUE(std::isnan(clamp(x, 0, 1)[0].item<double>()));
  EXPECT_EQ((fvec({1}) / 0)[0].item<double>(), INFINITY);
  EXPECT_EQ(div(fvec({-7}), fvec({2}), "floor")[0].item<double>(), -4.0);
  EXPECT_EQ(remainder(fvec({-7}), fvec({2}))[0].item<double>(), 1.0);
  EXPECT_EQ(remainder(full({1}, -7), 2)[0].item<int64_t>(), 1);
  EXPECT_EQ(div(full({1}, -7), full({1}, 2), "trunc")[0].item<int64_t>(), -3);
  EXPECT_EQ(div(full({1}, INT64_MIN), full({1}, -1), "floor")[0].item<int64_t>(), INT64_MIN);
  const std::string e =
      error_of<ValueError>([] { (void)div(full({1}, 5), full({1}, 0), "floor"); });
  EXPECT_NE(e.find("ZeroDivisionError"), std::string::npos) << e;
  EXPECT_THROW((void)remainder(full({1}, 5), 0), ValueError);
  EXPECT_TRUE(std::isnan(softmax(fvec({NAN, 1}), 0)[1].item<double>()));
  EXPECT_EQ(bitwise_left_shift(full({1}, 1, int32), full({1}, 40, int32))[0].item<int64_t>(), 0);
  EXPECT_EQ(bitwise_right_shift(full({1}, -8, int32), full({1}, 40, int32))[0].item<int64_t>(), -1);
}

// Float softmax rows compute in float (the tile runtime's exp, a two-sum correction of x - max, a
// compensated sum): within a few ulp of a double reference however wide the row's range; masked
// (-inf) entries are exactly 0, an all -inf row NaN (PyTorch's), and narrow floats round the float
// result.
TEST(SpecialValues, SoftmaxRowsAreWithinAFewUlpsAndMaskedEntriesAreZero) {
  Tensor x = randn({16, 3000}) * 10;  // x - max down to about -80
  const Tensor sm = softmax(x, 1), ls = log_softmax(x, 1);
  const Tensor rs = softmax(x.to(float64), 1), rl = log_softmax(x.to(float64), 1);
  auto worst_ulps = [](const Tensor& got, const Tensor& ref) {
    double worst = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
      const double r = ref.data_ptr<double>()[i];
      if (r == 0 || std::fabs(r) < 1e-37) continue;  // subnormal results: absolute error
      const double ulp = std::ldexp(1.0, std::ilogb(static_cast<float>(r)) - 23);
      worst = std::max(worst, std::fabs(got.data_ptr<float>()[i] - r) / ulp);
    }
    return worst;
  };
  EXPECT_LE(worst_ulps(sm, rs), 4.0);
  EXPECT_LE(worst_ulps(ls, rl), 1.5);
  // Rows whose max is far from 0, where max - 104 rounds to the max or near it: entries far below
  // the max still vanish (they once came out as exp(0) = 1), the rest within the same ulps.
  const float big = 3.4028235e38f;
  for (const std::vector<float>& r :
       std::vector<std::vector<float>>{{1e30f, 0.0f, -1e30f, 1e30f, 5e29f},
                                       {3e8f, 3e8f - 64, 1.0f, -INFINITY, 3e8f - 2048},
                                       {-1e9f, -1e9f + 64, -2e9f, -1e9f - 32},
                                       {-big, -INFINITY, -big},
                                       {big, -big, 0.0f, big}}) {
    const Tensor row = fvec(r).reshape({1, -1});
    const Tensor got = softmax(row, 1), ref = softmax(row.to(float64), 1);
    const Tensor got_log = log_softmax(row, 1), ref_log = log_softmax(row.to(float64), 1);
    EXPECT_LE(worst_ulps(got, ref), 4.0) << r[0];
    EXPECT_LE(worst_ulps(got_log, ref_log), 1.5) << r[0];
    for (int64_t j = 0; j < row.numel(); ++j) {
      const double want = ref.data_ptr<double>()[j];
      if (want < 1e-45) EXPECT_EQ(got.data_ptr<float>()[j], 0.0f) << r[0] << " [" << j << "]";
    }
  }
  Tensor masked = randn({3, 40});
  masked.select(0, 0).narrow(0, 5, 20).fill_(-INFINITY);
  masked.select(0, 2).fill_(-INFINITY);
  const Tensor m = softmax(masked, 1);
  for (int64_t j = 5; j < 25; ++j) EXPECT_EQ(m[0][j].item<float>(), 0.0f) << j;
  EXPECT_NEAR(m[0].sum().item<double>(), 1.0, 1e-6);
  EXPECT_TRUE(std::isnan(m[2][0].item<float>()));
  EXPECT_EQ(log_softmax(masked, 1)[0][7].item<float>(), -INFINITY);
  for (DType dt : {float16, bfloat16}) {
    const Tensor xn = x.to(dt);
    EXPECT_TRUE(equal(softmax(xn, 1), softmax(xn.to(float32), 1).to(dt))) << dtype_name(dt);
    EXPECT_TRUE(equal(log_softmax(xn, 1), log_softmax(xn.to(float32), 1).to(dt))) << dtype_name(dt);
  }
}

// Contiguous float32 exp, tanh, sigmoid, ... run the tile runtime's math (pointwise_fast.cpp); the
// same ops on strided tensors run the library loops (the C library's math). Special values take
// the same class (NaN, infinities, zeros) and finite results agree within a few ulp, each within
// its contract of a double reference.
TEST(SpecialValues, FastFloatMathAgreesWithTheLibraryLoops) {
  const std::vector<float> special = {
      0.0f,   -0.0f,   1e-40f, -1e-40f, 1e-20f,   1.0f,      -1.0f, 0.5f,       88.7f, 89.5f,
      -87.3f, -104.5f, 1e30f,  -1e30f,  INFINITY, -INFINITY, NAN,   3.1415927f, 1e5f,  -1e5f,
      20.0f,  -20.0f,  0.625f, -0.625f, 9.0f,     -9.0f,     1e-3f, -200.0f};
  const int64_t n = static_cast<int64_t>(special.size());
  Tensor x = empty({2, n});
  x.select(0, 0).copy_(fvec(special));
  x.select(0, 1).copy_(randn({n}) * 10);
  const Tensor strided = x.t().contiguous().t();  // the same values, not contiguous
  ASSERT_FALSE(strided.is_contiguous());
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&)> f;
    double ulps;  // against a double reference, on random finite inputs
  };
  const std::vector<Case> cases = {
      {"exp", [](const Tensor& t) { return t.exp(); }, 1.5},
      {"exp2", [](const Tensor& t) { return exp2(t); }, 2.5},
      {"log", [](const Tensor& t) { return t.log(); }, 1.5},
      {"log2", [](const Tensor& t) { return log2(t); }, 2.0},
      {"sin", [](const Tensor& t) { return t.sin(); }, 2.0},
      {"cos", [](const Tensor& t) { return t.cos(); }, 2.0},
      {"tanh", [](const Tensor& t) { return t.tanh(); }, 2.0},
      {"sigmoid", [](const Tensor& t) { return t.sigmoid(); }, 3.0},
      {"silu", [](const Tensor& t) { return silu(t); }, 3.0},
      {"gelu_tanh", [](const Tensor& t) { return gelu(t, "tanh"); }, 0},
  };
  auto ulp_of = [](double r) { return std::ldexp(1.0, std::ilogb(static_cast<float>(r)) - 23); };
  for (const Case& c : cases) {
    const Tensor fast = c.f(x), slow = c.f(strided).contiguous();
    for (int64_t i = 0; i < 2 * n; ++i) {
      const float a = fast.data_ptr<float>()[i], b = slow.data_ptr<float>()[i];
      const std::string at = std::string(c.name) + " of " + std::to_string(x.data_ptr<float>()[i]);
      if (std::isnan(b) || std::isinf(b) || b == 0) {
        EXPECT_TRUE(std::isnan(b) ? std::isnan(a) : a == b) << at << ": " << a << " vs " << b;
      } else if (std::fabs(b) > 1e-37) {
        EXPECT_LE(std::fabs(a - b), 6 * ulp_of(b)) << at << ": " << a << " vs " << b;
      }
    }
    // float16 / bfloat16 compute in float and round once: exactly the float32 result rounded.
    for (DType dt : {float16, bfloat16}) {
      const Tensor xn = x.to(dt);
      const Tensor got = c.f(xn), want = c.f(xn.to(float32)).to(dt);
      const Tensor gn = ne(got, got), wn = ne(want, want);  // NaN lanes
      EXPECT_TRUE(equal(gn, wn) &&
                  equal(where(gn, zeros({}, dt), got), where(wn, zeros({}, dt), want)))
          << c.name << " " << dtype_name(dt);
    }
    if (c.ulps == 0) continue;  // gelu's tanh form cancels near its zero: no ulp contract
    Tensor r = randn({4096}) * 8;
    if (std::string(c.name).rfind("log", 0) == 0) r = r.abs() + 1e-3;
    const Tensor got = c.f(r), ref = c.f(r.to(float64));
    double worst = 0;
    for (int64_t i = 0; i < r.numel(); ++i) {
      const double want = ref.data_ptr<double>()[i];
      if (std::fabs(want) < 1e-37) continue;
      worst = std::max(worst, std::fabs(got.data_ptr<float>()[i] - want) / ulp_of(want));
    }
    EXPECT_LE(worst, c.ulps) << c.name;
  }
}

// Contiguous float16 / bfloat16 <-> float32 copies take the vectorized rows (cpu_rows.h; F16C
// for float16 where the CPU has it). Every float16 and bfloat16 bit pattern to float, and a sweep
// of float bit patterns (every 4093rd: all exponents, NaNs, infinities and subnormals among them)
// back, against the library's scalar conversions (float_types.h), bit for bit: NaNs included
// (the hardware quiets a signalling float16 NaN, 0x7c01 -> 0x7fc02000, where the library keeps
// 0x7f802000).
TEST(SpecialValues, NarrowFloatConversionsOfContiguousTensorsMatchTheScalarOnes) {
  Tensor bits = empty({65536}, int32);
  for (int32_t i = 0; i < 65536; ++i) bits.data_ptr<int32_t>()[i] = i;
  const Tensor u16 = bits.to(int16);  // the patterns 0..65535 (wrapping to int16)
  for (DType dt : {float16, bfloat16}) {
    const Tensor got = u16.view(dt).to(float32).view(int32);
    int64_t bad = 0;
    for (int32_t i = 0; i < 65536; ++i) {
      const auto h = static_cast<uint16_t>(i);
      const float want =
          dt == float16 ? detail::half_bits_to_float(h) : detail::bfloat16_bits_to_float(h);
      bad += got.data_ptr<int32_t>()[i] != std::bit_cast<int32_t>(want);
    }
    EXPECT_EQ(bad, 0) << dtype_name(dt) << " to float32";
  }
  const int64_t n = int64_t{1} << 20;
  Tensor fbits = empty({n}, int32);
  for (int64_t i = 0; i < n; ++i)
    fbits.data_ptr<int32_t>()[i] = static_cast<int32_t>(static_cast<uint32_t>(i) * 4093u);
  for (DType dt : {float16, bfloat16}) {
    const Tensor got = fbits.view(float32).to(dt).view(int16);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float f = std::bit_cast<float>(fbits.data_ptr<int32_t>()[i]);
      const uint16_t want =
          dt == float16 ? detail::float_to_half_bits(f) : detail::float_to_bfloat16_bits(f);
      bad += static_cast<uint16_t>(got.data_ptr<int16_t>()[i]) != want;
    }
    EXPECT_EQ(bad, 0) << "float32 to " << dtype_name(dt);
  }
}

// float16 / bfloat16 add, sub, mul, div on contiguous tensors go through float rows converted
// in blocks (fast_arith_narrow); strided operands take the library's element loop. Both give the
// float result rounded once: the same bits on specials (NaN, inf, zeros of both signs,
// subnormals, overflow past the format's max) and random values, and alpha is honoured.
TEST(SpecialValues, NarrowArithmeticRowsAgreeWithTheLibraryLoops) {
  const std::vector<float> special = {0.0f,   -0.0f,  1.0f,  -1.0f,  65504.0f, -65504.0f, 6e-8f,
                                      -6e-8f, 1e-40f, 3e38f, -3e38f, INFINITY, -INFINITY, NAN,
                                      0.1f,   3.0f,   1e4f,  -7.5f,  2.5e-5f,  1e-3f,     300.0f};
  const int64_t n = static_cast<int64_t>(special.size());
  Tensor a = empty({2, n * n}), b = empty({2, n * n});
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {  // every pair of specials, then random values
      a.data_ptr<float>()[i * n + j] = special[static_cast<size_t>(i)];
      b.data_ptr<float>()[i * n + j] = special[static_cast<size_t>(j)];
    }
  }
  a.select(0, 1).copy_(randn({n * n}) * 100);
  b.select(0, 1).copy_(randn({n * n}) * 100);
  for (DType dt : {float16, bfloat16}) {
    const Tensor an = a.to(dt), bn = b.to(dt);
    const Tensor as = an.t().contiguous().t(), bs = bn.t().contiguous().t();  // strided copies
    ASSERT_FALSE(as.is_contiguous());
    struct Case {
      const char* name;
      std::function<Tensor(const Tensor&, const Tensor&)> f;
    };
    const std::vector<Case> cases = {
        {"add", [](const Tensor& x, const Tensor& y) { return x + y; }},
        {"sub", [](const Tensor& x, const Tensor& y) { return x - y; }},
        {"mul", [](const Tensor& x, const Tensor& y) { return x * y; }},
        {"div", [](const Tensor& x, const Tensor& y) { return x / y; }},
        {"add alpha", [](const Tensor& x, const Tensor& y) { return add(x, y, 3); }},
    };
    for (const Case& c : cases) {
      const Tensor fast = c.f(an, bn), slow = c.f(as, bs).contiguous();
      const Tensor fnan = ne(fast, fast), snan = ne(slow, slow);
      EXPECT_TRUE(equal(fnan, snan) &&
                  equal(where(fnan, zeros({}, dt), fast), where(snan, zeros({}, dt), slow)))
          << c.name << " " << dtype_name(dt);
      // Rounding once from float: the float32 result of the rounded operands, rounded.
      const Tensor want = c.f(an.to(float32), bn.to(float32)).to(dt);
      const Tensor wnan = ne(want, want);
      EXPECT_TRUE(equal(fnan, wnan) &&
                  equal(where(fnan, zeros({}, dt), fast), where(wnan, zeros({}, dt), want)))
          << c.name << " " << dtype_name(dt) << " against float";
    }
  }
}

// layer_norm / rms_norm float32 rows (statistics in double lanes, outputs in float): every affine
// form, rows of every remainder length, centred and far from 0 (a mean of 1000 with unit spread,
// where a float mean alone would put ~250 ulp into every output), against float64. The contract:
// within 3 ulp of max(|xhat * w|, |y|) (the float output pass's roundings, the mean and 1/std
// carried as two floats each). float16 / bfloat16 rows are the float row rounded once.
TEST(SpecialValues, NormRowsMatchADoubleReferenceInEveryAffineForm) {
  auto ulp_of = [](double r) { return std::ldexp(1.0, std::ilogb(static_cast<float>(r)) - 23); };
  for (double shift : {2.0, 1000.0}) {
    for (int64_t n : {7, 64, 1000}) {
      Tensor x = randn({9, n}) * (shift == 2.0 ? 3.0 : 1.0) + shift, w = randn({n}), b = randn({n});
      const Tensor xd = x.to(float64), wd = w.to(float64), bd = b.to(float64);
      const std::vector<std::optional<Tensor>> ws = {std::nullopt, w}, bs = {std::nullopt, b};
      auto check = [&](const Tensor& got, const Tensor& want, const std::optional<Tensor>& bias,
                       const std::string& what) {
        const double* wv = want.data_ptr<double>();
        double worst = 0;
        for (int64_t i = 0; i < 9 * n; ++i) {
          const double tw = wv[i] - (bias ? bias->data_ptr<double>()[i % n] : 0.0);
          const double scale = std::max(std::fabs(tw), std::fabs(wv[i]));
          worst = std::max(worst, std::fabs(got.data_ptr<float>()[i] - wv[i]) / ulp_of(scale));
        }
        EXPECT_LE(worst, 3.0) << what << " n " << n << " mean " << shift;
      };
      for (int wi = 0; wi < 2; ++wi) {
        for (int bi = 0; bi < 2; ++bi) {
          const std::optional<Tensor> wr = wi ? std::optional<Tensor>(wd) : std::nullopt;
          const std::optional<Tensor> br = bi ? std::optional<Tensor>(bd) : std::nullopt;
          const Tensor want = layer_norm(xd, {n}, wr, br, 1e-5);
          check(layer_norm(x, {n}, ws[wi], bs[bi], 1e-5), want, br,
                "layer_norm w " + std::to_string(wi) + " b " + std::to_string(bi));
          for (DType dt : {float16, bfloat16}) {  // the float row of the rounded inputs, rounded
            auto narrow = [&](const std::optional<Tensor>& t) {
              return t ? std::optional<Tensor>(t->to(dt)) : std::nullopt;
            };
            const Tensor got = layer_norm(x.to(dt), {n}, narrow(ws[wi]), narrow(bs[bi]), 1e-5);
            auto wide = [&](const std::optional<Tensor>& t) {
              return t ? std::optional<Tensor>(t->to(dt).to(float32)) : std::nullopt;
            };
            const Tensor want_n =
                layer_norm(x.to(dt).to(float32), {n}, wide(ws[wi]), wide(bs[bi]), 1e-5).to(dt);
            EXPECT_TRUE(equal(got, want_n))
                << dtype_name(dt) << " n " << n << " w " << wi << " b " << bi << " mean " << shift;
          }
        }
        const std::optional<Tensor> wr = wi ? std::optional<Tensor>(wd) : std::nullopt;
        check(rms_norm(x, {n}, ws[wi], 1e-6), rms_norm(xd, {n}, wr, 1e-6), std::nullopt,
              "rms_norm w " + std::to_string(wi));
      }
    }
  }
}

TEST(EmptyAndScalarTensors, ReductionIdentities) {
  Tensor e = zeros({0, 3});
  EXPECT_EQ(e.sum().item<double>(), 0.0);
  EXPECT_TRUE(sum(e, {0}).sizes().equals(SymDimVector{3}));
  EXPECT_TRUE(std::isnan(e.mean().item<double>()));
  EXPECT_EQ(prod(e).item<double>(), 1.0);
  EXPECT_THROW((void)e.max(), ValueError);
  EXPECT_THROW((void)amax(e, {0}), IndexError);
  EXPECT_TRUE(amax(e, {1}).sizes().equals(SymDimVector{0}));
  Tensor s = full({}, 4.0);
  EXPECT_EQ(s.sum().item<double>(), 4.0);
  EXPECT_EQ((s * s).dim(), 0);
  EXPECT_EQ(sum(s, {0}).item<double>(), 4.0);  // dim 0 of a scalar is allowed
  EXPECT_EQ(argmax(s).item<int64_t>(), 0);
  EXPECT_EQ(softmax(s, 0).item<double>(), 1.0);
}

TEST(OutVariants, ResizeCastAndRefuse) {
  Tensor a = fvec({1, 2, 3}), b = fvec({10, 20, 30});
  Tensor out = empty({0});
  add_out(out, a, b);
  EXPECT_TRUE(out.sizes().equals(SymDimVector{3}));
  EXPECT_EQ(out[2].item<double>(), 33.0);
  Tensor wrong = zeros({2, 2});
  add_out(wrong, a, b);  // resized, with a warning
  EXPECT_TRUE(wrong.sizes().equals(SymDimVector{3}));
  Tensor f64 = empty({3}, float64);
  add_out(f64, full({3}, 1), full({3}, 2));  // int64 result cast into float64
  EXPECT_EQ(f64[0].item<double>(), 3.0);
  Tensor i64 = empty({3}, int64);
  const std::string e = error_of<DTypeError>([&] { add_out(i64, a, b); });
  EXPECT_NE(e.find("[add] result type float32 can't be cast to the desired output type int64"),
            std::string::npos)
      << e;
  // A strided (transposed) out= is written through its strides.
  Tensor base = zeros({3, 2});
  Tensor tview = base.t();
  add_out(tview, fvec({1, 2, 3}).expand({2, 3}), full({}, 1.0f));
  EXPECT_EQ(base[2][1].item<double>(), 4.0);
  // Partial overlap between out and an input is refused.
  Tensor buf = arange(0, 6, 1, float32);
  Tensor o = buf.narrow(0, 1, 4);
  const std::string ov =
      error_of<ValueError>([&] { add_out(o, buf.narrow(0, 0, 4), buf.narrow(0, 0, 4)); });
  EXPECT_NE(ov.find("refer to a single memory location"), std::string::npos) << ov;
  Tensor r = empty({2}, bool_);
  eq_out(r, fvec({1, 2}), fvec({1, 3}));
  EXPECT_TRUE(r[0].item<bool>());
  Tensor pr = empty({1}, float32);
  pointwise_out("sin", pr, {fvec({0})});
  EXPECT_EQ(pr[0].item<double>(), 0.0);
}

TEST(InPlace, RulesAndVersions) {
  Tensor x = zeros({2, 3});
  Tensor row = x[1];
  const uint32_t v0 = x.version();
  row.add_(fvec({1, 2, 3}));
  EXPECT_GT(x.version(), v0);
  EXPECT_EQ(x[1][2].item<double>(), 3.0);
  x += 1;
  x *= fvec({2, 2, 2});
  x /= 2;
  EXPECT_EQ(x[0][0].item<double>(), 1.0);
  Tensor small = zeros({3});
  const std::string e = error_of<ShapeError>([&] { small.add_(zeros({2, 3})); });
  EXPECT_NE(e.find("[add_] output with shape [3] doesn't match the broadcast shape [2, 3]"),
            std::string::npos)
      << e;
  Tensor ints = zeros({3}, int64);
  const std::string d = error_of<DTypeError>([&] { ints.add_(fvec({1, 2, 3})); });
  EXPECT_NE(d.find("can't be cast"), std::string::npos) << d;
  ints.add_(full({3}, 2, int32));
  EXPECT_EQ(ints.sum().item<int64_t>(), 6);
  Tensor h = zeros({2}, float16);
  h.add_(fvec({0.5f, 1.5f}));  // float32 result cast back into float16
  EXPECT_EQ(h[1].item<double>(), 1.5);
}

TEST(Determinism, ResultsDoNotDependOnTheThreadCount) {
  manual_seed(7);
  Tensor x = randn({300, 1000});
  const int saved = runtime::num_threads();
  runtime::set_num_threads(1);
  Tensor s1 = x.sum(), m1 = sum(x, {0}), k1 = softmax(x, 1);
  runtime::set_num_threads(4);
  Tensor s2 = x.sum(), m2 = sum(x, {0}), k2 = softmax(x, 1);
  runtime::set_num_threads(saved);
  EXPECT_TRUE(equal(s1, s2));
  EXPECT_TRUE(equal(m1, m2));
  EXPECT_TRUE(equal(k1, k2));
}

// ---- diagnostics: each names the op and the caller's line ---------------------------------------

struct Diag {
  const char* what;
  std::function<void()> provoke;
  const char* expect;
  int line;
};

#define DIAG(what, code, expect)         \
  Diag {                                 \
    what, [] { code; }, expect, __LINE__ \
  }

TEST(Diagnostics, EveryUserErrorIsTypedAndNamesOpAndLine) {
  const Tensor a = zeros({2, 3}), b = zeros({4});
  const std::vector<Diag> diags = {
      DIAG("broadcast", (void)add(zeros({2, 3}), zeros({4})),
           "[add] the size of tensor a (3) must match"),
      DIAG("bitwise on float", (void)bitwise_and(zeros({2}), zeros({2})),
           "[bitwise_and] not implemented for 'float32'"),
      DIAG("dim out of range", (void)sum(zeros({2, 3}), {5}),
           "dimension out of range (expected to be in range of [-2, 1], but got 5)"),
      DIAG("matmul shapes", (void)matmul(zeros({2, 3}), zeros({4, 5})),
           "[matmul] mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"),
      DIAG("matmul dtypes", (void)matmul(zeros({2, 3}), zeros({3, 5}, float64)),
           "[matmul] expected both operands to have the same dtype"),
      DIAG("cat ranks", (void)cat({zeros({2, 3}), zeros({3})}),
           "[cat] tensors must have same number of dimensions"),
      DIAG("cat sizes", (void)cat({zeros({2, 3}), zeros({2, 4})}, 0),
           "[cat] sizes of tensors must match except in dimension 0"),
      DIAG("select index", (void)zeros({2, 3}).select(1, 7),
           "[select] index 7 is out of bounds for dimension 1 with size 3"),
      DIAG("view strides", (void)zeros({3, 4}).t().view({12}),
           "[view] view size is not compatible"),
      DIAG("view numel", (void)zeros({3, 4}).view({5, 3}),
           "[view] shape '[5, 3]' is invalid for input of size 12"),
      DIAG("expand", (void)zeros({3}).expand({2, 4}),
           "[expand] the expanded size of the tensor (4) must match the existing size (3)"),
      DIAG("permute", (void)zeros({2, 3}).permute({0, 0}),
           "[permute] dim 0 appears multiple times"),
      DIAG("gelu mode", (void)gelu(zeros({2}), "fast"),
           "[gelu] approximate argument must be either 'none' or 'tanh'"),
      DIAG("div mode", (void)div(zeros({2}), zeros({2}), "round"),
           "[div] expected rounding_mode to be one of None, 'trunc', or 'floor'"),
      DIAG("where cond", (void)where(zeros({2}), zeros({2}), zeros({2})),
           "[where] expected condition to be a boolean tensor"),
      DIAG("sub bool", (void)sub(full({2}, true), full({2}, false)),
           "[sub] subtraction, the `-` operator, with two bool tensors"),
      DIAG("neg bool", (void)neg(full({2}, true)),
           "[neg] negation, the `-` operator, on a bool tensor"),
      DIAG("float8 math", (void)add(zeros({2}, float8_e4m3fn), zeros({2}, float8_e4m3fn)),
           "[add] not implemented for 'float8_e4m3fn'"),
      DIAG("uint32 promotion", (void)add(zeros({2}, uint32), zeros({2}, int32)),
           "promotion for uint16, uint32, uint64 types is not supported"),
      DIAG("layer_norm shape", (void)layer_norm(zeros({2, 3}), {4}),
           "[layer_norm] given normalized_shape=[4], expected input with shape [*, 4]"),
      DIAG("mean of ints", (void)mean(zeros({2}, int64)), "[mean] could not infer output dtype"),
      DIAG("rand dtype", (void)rand({2}, int32), "[rand] expected a floating point dtype"),
      DIAG("arange step", (void)arange(0, 5, 0), "[arange] step must be nonzero"),
      DIAG("negative size", (void)zeros({2, -1}), "[full] negative dimension -1"),
      DIAG("item numel", (void)zeros({3}).item(),
           "[item] a tensor with 3 elements cannot be converted to a scalar"),
      DIAG("index_select range", (void)index_select(zeros({3}), 0, full({1}, 5)),
           "[index_select] index 5 is out of range"),
      DIAG("index dtype", (void)index_select(zeros({3}), 0, zeros({1})),
           "[index_select] expected index of dtype int64 or int32"),
      DIAG("isclose dtypes", (void)isclose(zeros({2}), zeros({2}, float64)),
           "[isclose] expected both inputs to have the same dtype"),
      DIAG("device mismatch",
           (void)add(zeros({2}), detail::make_fake({2}, float32, Device("cuda"))),
           "[add] expected all tensors to be on the same device"),
      DIAG("pow negative int", (void)pow(full({2}, 2), -1),
           "[pow] integers to negative integer powers are not allowed"),
      DIAG("alpha float on ints", (void)add(full({2}, 1), full({2}, 1), 0.5),
           "[add] for integral input tensors, argument alpha must not be a floating point number"),
      DIAG("stack sizes", (void)stack({zeros({2}), zeros({3})}),
           "[stack] expects each tensor to be equal size"),
      DIAG("clamp bounds", (void)clamp(zeros({2}), std::nullopt, std::nullopt),
           "[clamp] at least one of 'min' or 'max' must not be None"),
      DIAG("softmax int", (void)softmax(zeros({2}, int64), 0),
           "[softmax] expected a floating point dtype"),
  };
  for (const auto& d : diags) {
    std::string msg;
    try {
      d.provoke();
      ADD_FAILURE() << d.what << ": no error";
      continue;
    } catch (const Error& e) {
      msg = e.what();
      EXPECT_EQ(e.user_loc().line, d.line) << d.what << ": " << msg;
    } catch (const std::exception& e) {
      ADD_FAILURE() << d.what << ": not a tessera::Error: " << e.what();
      continue;
    }
    EXPECT_NE(msg.find(d.expect), std::string::npos) << d.what << ": " << msg;
    EXPECT_NE(msg.find("test_semantics.cpp:" + std::to_string(d.line)), std::string::npos)
        << d.what << ": " << msg;
  }
}

TEST(Diagnostics, ErrorTypes) {
  EXPECT_THROW((void)add(zeros({2, 3}), zeros({4})), ShapeError);
  EXPECT_THROW((void)bitwise_and(zeros({2}), zeros({2})), DTypeError);
  EXPECT_THROW((void)sum(zeros({2}), {3}), IndexError);
  EXPECT_THROW((void)add(zeros({2}), detail::make_fake({2}, float32, Device("cuda"))), DeviceError);
  if (!cuda_is_available()) {
    EXPECT_THROW((void)zeros({2}, Device("cuda")), DeviceError);
  }
  EXPECT_THROW(Device("tpu"), ValueError);
}

}  // namespace

namespace {

// as_strided: any geometry inside the storage; reaching past its end is an error naming the op
// (not a view that reads freed memory).
TEST(Views, AsStridedStaysInsideTheStorage) {
  const Tensor base = arange(12);
  const Tensor v = base.as_strided({3, 2}, {4, 1}, 1);
  EXPECT_TRUE(v.equal(from_vector(std::vector<int64_t>{1, 2, 5, 6, 9, 10}, {3, 2})));
  EXPECT_TRUE(base.narrow(0, 2, 3).as_strided({2}, {5}).equal(
      from_vector(std::vector<int64_t>{2, 7}, {2})));  // the view's own offset by default
  EXPECT_EQ(base.as_strided({0, 5}, {100, 100}, 11).numel(), 0);  // empty: nothing reached
  const std::string err = error_of<ShapeError>([&] { base.as_strided({3, 2}, {4, 1}, 3); });
  EXPECT_NE(err.find("[as_strided] the view reaches element 12 of a storage of 12 elements"),
            std::string::npos)
      << err;
}

}  // namespace
