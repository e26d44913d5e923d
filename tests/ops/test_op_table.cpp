// Every built-in operator declared once for the harness: inputs, double reference, result dtype.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "op_harness.h"
#include "ops/linalg.h"
#include "runtime/allocator.h"
#include "tessera/version.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

using V = std::vector<double>;

const std::vector<DType> kFloatTypes = {float16, bfloat16, float32, float64};
const std::vector<DType> kSignedInts = {int8, int16, int32, int64};
const std::vector<DType> kNumericTypes = {int8,    int16,    int32,   int64,  uint8,
                                          float16, bfloat16, float32, float64};
const std::vector<DType> kWideUnsigned = {uint16, uint32, uint64};

std::vector<DType> concat(std::vector<DType> a, const std::vector<DType>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

const std::vector<std::vector<Shape>> kBinaryShapes = {
    {{2, 3}, {2, 3}}, {{2, 3}, {3}},    {{4, 1, 3}, {1, 5, 1}},
    {{}, {5}},        {{3, 0}, {3, 0}}, {{129, 257}, {129, 257}},
};
const std::vector<std::vector<Shape>> kUnaryShapes = {
    {{2, 3}}, {{}}, {{0}}, {{7, 1, 5}}, {{129, 257}}};

DType to_float(DType t) {
  return is_floating_point(t) ? t : float32;
}

OpSpec binary(std::string name, std::vector<DType> dtypes,
              std::function<Tensor(const Tensor&, const Tensor&)> op,
              std::function<double(double, double)> f, std::vector<Domain> domains = {}) {
  OpSpec s;
  s.name = std::move(name);
  s.dtypes = std::move(dtypes);
  s.shapes = kBinaryShapes;
  s.domains = std::move(domains);
  s.run = [op](const std::vector<Tensor>& in) { return op(in[0], in[1]); };
  s.ref = [f](const std::vector<Ref>& in, DType dt) {
    return pointwise_ref(in, [&](const V& a) { return f(round_to(dt, a[0]), round_to(dt, a[1])); });
  };
  return s;
}

OpSpec unary(std::string name, std::vector<DType> dtypes, std::function<Tensor(const Tensor&)> op,
             std::function<double(double)> f, Domain domain = Domain::Any) {
  OpSpec s;
  s.name = std::move(name);
  s.dtypes = std::move(dtypes);
  s.shapes = kUnaryShapes;
  s.domains = {domain};
  s.run = [op](const std::vector<Tensor>& in) { return op(in[0]); };
  s.ref = [f](const std::vector<Ref>& in, DType) {
    return pointwise_ref(in, [&](const V& a) { return f(a[0]); });
  };
  return s;
}

OpSpec with_out(OpSpec s, std::function<void(Tensor&, const std::vector<Tensor>&)> out) {
  s.run_out = std::move(out);
  return s;
}

double py_mod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((b < 0) != (m < 0))) m += b;
  return m;
}

// ---- pointwise binary ---------------------------------------------------------------------------

TEST(OpHarness, Add) {
  run_spec(with_out(
      binary(
          "add", concat(kNumericTypes, {bool_}), [](auto& a, auto& b) { return add(a, b); },
          [](double a, double b) { return a + b; }),
      [](Tensor& o, const std::vector<Tensor>& in) { add_out(o, in[0], in[1]); }));
  run_spec(binary(
      "add alpha=2", kNumericTypes, [](auto& a, auto& b) { return add(a, b, 2); },
      [](double a, double b) { return a + 2 * b; }));
  run_spec(unary(
      "add scalar", kNumericTypes, [](auto& a) { return a + 3; }, [](double a) { return a + 3; }));
}

TEST(OpHarness, Sub) {
  run_spec(with_out(binary(
                        "sub", kNumericTypes, [](auto& a, auto& b) { return sub(a, b); },
                        [](double a, double b) { return a - b; }),
                    [](Tensor& o, const std::vector<Tensor>& in) { sub_out(o, in[0], in[1]); }));
  run_spec(unary(
      "rsub scalar", kNumericTypes, [](auto& b) { return 5 - b; }, [](double b) { return 5 - b; }));
}

TEST(OpHarness, Mul) {
  run_spec(with_out(
      binary(
          "mul", concat(kNumericTypes, {bool_}), [](auto& a, auto& b) { return mul(a, b); },
          [](double a, double b) { return a * b; }),
      [](Tensor& o, const std::vector<Tensor>& in) { mul_out(o, in[0], in[1]); }));
}

TEST(OpHarness, Div) {
  auto s = with_out(
      binary(
          "div", concat(kNumericTypes, {bool_}), [](auto& a, auto& b) { return div(a, b); },
          [](double a, double b) { return a / b; }, {Domain::Any, Domain::NonZero}),
      [](Tensor& o, const std::vector<Tensor>& in) { div_out(o, in[0], in[1]); });
  s.dtypes = kNumericTypes;
  s.out_dtype = to_float;
  s.tol_scale = 2;
  run_spec(s);
  // "trunc" rounds the quotient as the kernels compute it (float32 for float32 and the narrow
  // floats, as PyTorch): a quotient a hair from an integer may round onto it first, and
  // trunc(-5.9999999) is then -6 in every implementation, not the exact quotient's -5. "floor" is
  // the exact quotient's floor (PyTorch's and Python's algorithm through fmod: 2.99999994 floors
  // to 2 where the float quotient 3.0 would give 3; the double quotient of two floats is never
  // rounded onto an integer).
  auto rounded = [](OpSpec s, double (*mode)(double), bool float_quotient) {
    s.ref = [mode, float_quotient](const std::vector<Ref>& in, DType dt) {
      return pointwise_ref(in, [&](const V& a) {
        const double q = round_to(dt, a[0]) / round_to(dt, a[1]);
        const bool narrow = is_floating_point(dt) && dt != DType::Float64 && float_quotient;
        return mode(narrow ? static_cast<double>(static_cast<float>(q)) : q);
      });
    };
    return s;
  };
  run_spec(rounded(
      binary("div trunc", kNumericTypes, [](auto& a, auto& b) { return div(a, b, "trunc"); },
             nullptr, {Domain::Any, Domain::NonZero}),
      [](double q) { return std::trunc(q); }, true));
  run_spec(rounded(
      binary("div floor", kNumericTypes, [](auto& a, auto& b) { return div(a, b, "floor"); },
             nullptr, {Domain::Any, Domain::NonZero}),
      [](double q) { return std::floor(q); }, false));
  run_spec(binary(
      "floor_divide", kSignedInts, [](auto& a, auto& b) { return floor_divide(a, b); },
      [](double a, double b) { return std::floor(a / b); }, {Domain::Any, Domain::NonZero}));
}

TEST(OpHarness, Remainder) {
  run_spec(
      with_out(binary("remainder", kNumericTypes, [](auto& a, auto& b) { return remainder(a, b); },
                      py_mod, {Domain::Any, Domain::NonZero}),
               [](Tensor& o, const std::vector<Tensor>& in) { remainder_out(o, in[0], in[1]); }));
}

TEST(OpHarness, Pow) {
  auto s = binary(
      "pow", kNumericTypes, [](auto& a, auto& b) { return pow(a, b); },
      [](double a, double b) { return std::pow(a, b); }, {Domain::Positive, Domain::Small});
  s.tol_scale = 4;
  run_spec(with_out(s, [](Tensor& o, const std::vector<Tensor>& in) { pow_out(o, in[0], in[1]); }));
  run_spec(unary(
      "pow scalar", kFloatTypes, [](auto& a) { return pow(a, 2); },
      [](double a) { return a * a; }));
}

// GELU's backward in one op: g * GELU'(x), both forms, against double formulas.
TEST(OpHarness, GeluBackward) {
  run_spec(binary(
      "gelu_backward", kFloatTypes, [](auto& g, auto& x) { return gelu_backward(g, x); },
      [](double g, double x) {
        const double cdf = 0.5 * (1 + std::erf(x / std::sqrt(2.0)));
        return g * (cdf + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI));
      }));
  run_spec(binary(
      "gelu_backward tanh", kFloatTypes,
      [](auto& g, auto& x) { return gelu_backward(g, x, "tanh"); },
      [](double g, double x) {
        const double k = std::sqrt(2 / M_PI), t = std::tanh(k * (x + 0.044715 * x * x * x));
        return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x));
      }));
}

TEST(OpHarness, MaximumMinimum) {
  run_spec(with_out(
      binary(
          "maximum", concat(kNumericTypes, {bool_}), [](auto& a, auto& b) { return maximum(a, b); },
          [](double a, double b) { return std::max(a, b); }),
      [](Tensor& o, const std::vector<Tensor>& in) { maximum_out(o, in[0], in[1]); }));
  run_spec(binary(
      "minimum", concat(kNumericTypes, {bool_}), [](auto& a, auto& b) { return minimum(a, b); },
      [](double a, double b) { return std::min(a, b); }));
}

TEST(OpHarness, Comparisons) {
  struct C {
    const char* name;
    Tensor (*op)(const Tensor&, const Tensor&, SourceLoc);
    std::function<bool(double, double)> f;
  };
  const std::vector<C> cases = {
      {"eq", &eq, std::equal_to<double>()}, {"ne", &ne, std::not_equal_to<double>()},
      {"lt", &lt, std::less<double>()},     {"le", &le, std::less_equal<double>()},
      {"gt", &gt, std::greater<double>()},  {"ge", &ge, std::greater_equal<double>()},
  };
  for (const auto& c : cases) {
    auto op = c.op;
    auto f = c.f;
    auto s = binary(
        c.name, concat(concat(kNumericTypes, kWideUnsigned), {bool_}),
        [op](auto& a, auto& b) { return op(a, b, SourceLoc{}); },
        [f](double a, double b) { return f(a, b) ? 1.0 : 0.0; }, {Domain::Small, Domain::Small});
    s.out_dtype = [](DType) { return bool_; };
    run_spec(s);
  }
}

TEST(OpHarness, Logical) {
  for (const auto& c :
       std::vector<std::tuple<const char*, Tensor (*)(const Tensor&, const Tensor&, SourceLoc),
                              std::function<bool(bool, bool)>>>{
           {"logical_and", &logical_and, [](bool a, bool b) { return a && b; }},
           {"logical_or", &logical_or, [](bool a, bool b) { return a || b; }},
           {"logical_xor", &logical_xor, [](bool a, bool b) { return a != b; }}}) {
    const char* name = std::get<0>(c);
    auto op = std::get<1>(c);
    auto f = std::get<2>(c);
    auto s = binary(
        name, concat(kNumericTypes, {bool_}),
        [op](auto& a, auto& b) { return op(a, b, SourceLoc{}); },
        [f](double a, double b) { return f(a != 0, b != 0) ? 1.0 : 0.0; },
        {Domain::Small, Domain::Small});
    s.out_dtype = [](DType) { return bool_; };
    run_spec(s);
  }
  auto s = unary(
      "logical_not", concat(kNumericTypes, {bool_}), [](auto& a) { return logical_not(a); },
      [](double a) { return a == 0 ? 1.0 : 0.0; }, Domain::Small);
  s.out_dtype = [](DType) { return bool_; };
  run_spec(s);
}

TEST(OpHarness, Bitwise) {
  const auto ints = concat(concat(kSignedInts, {uint8}), kWideUnsigned);
  auto as_i = [](double v) { return static_cast<int64_t>(v); };
  run_spec(binary(
      "bitwise_and", concat(ints, {bool_}), [](auto& a, auto& b) { return bitwise_and(a, b); },
      [=](double a, double b) { return static_cast<double>(as_i(a) & as_i(b)); }));
  run_spec(binary(
      "bitwise_or", concat(ints, {bool_}), [](auto& a, auto& b) { return a | b; },
      [=](double a, double b) { return static_cast<double>(as_i(a) | as_i(b)); }));
  run_spec(binary(
      "bitwise_xor", concat(ints, {bool_}), [](auto& a, auto& b) { return a ^ b; },
      [=](double a, double b) { return static_cast<double>(as_i(a) ^ as_i(b)); }));
  run_spec(unary(
      "bitwise_not", ints, [](auto& a) { return ~a; }, [](double a) { return -a - 1; }));
  run_spec(binary(
      "bitwise_left_shift", ints, [](auto& a, auto& b) { return bitwise_left_shift(a, b); },
      [](double a, double b) { return a * std::ldexp(1.0, static_cast<int>(b)); },
      {Domain::Any, Domain::Small}));
  run_spec(binary(
      "bitwise_right_shift", ints, [](auto& a, auto& b) { return bitwise_right_shift(a, b); },
      [](double a, double b) { return std::floor(a / std::ldexp(1.0, static_cast<int>(b))); },
      {Domain::Any, Domain::Small}));
}

TEST(OpHarness, Where) {
  OpSpec s;
  s.name = "where";
  s.dtypes = concat(kNumericTypes, {bool_, float8_e4m3fn});
  s.input_dtypes = [](DType dt, size_t i) { return i == 0 ? bool_ : dt; };
  // ... and a 0-dim other (`where(mask, g, 0)`, a backward's: a loop of its own).
  s.shapes = {{{2, 3}, {2, 3}, {2, 3}},
              {{3}, {2, 3}, {1}},
              {{129, 257}, {129, 257}, {129, 257}},
              {{129, 257}, {129, 257}, {}}};
  s.run = [](const std::vector<Tensor>& in) { return where(in[0], in[1], in[2]); };
  s.run_out = [](Tensor& o, const std::vector<Tensor>& in) { where_out(o, in[0], in[1], in[2]); };
  s.ref = [](const std::vector<Ref>& in, DType) {
    return pointwise_ref(in, [](const V& a) { return a[0] != 0 ? a[1] : a[2]; });
  };
  run_spec(s);
}

// ---- pointwise unary ----------------------------------------------------------------------------

TEST(OpHarness, UnaryMath) {
  const auto floats_and_int = concat(kFloatTypes, {int32, bool_});
  struct U {
    const char* name;
    Tensor (*op)(const Tensor&, SourceLoc);
    double (*f)(double);
    Domain domain;
    double tol;
  };
  const std::vector<U> cases = {
      {"exp", &tessera::exp, [](double x) { return std::exp(x); }, Domain::Any, 1},
      {"exp2", &tessera::exp2, [](double x) { return std::exp2(x); }, Domain::Any, 1},
      {"log", &tessera::log, [](double x) { return std::log(x); }, Domain::Positive, 1},
      {"log2", &tessera::log2, [](double x) { return std::log2(x); }, Domain::Positive, 1},
      {"sqrt", &tessera::sqrt, [](double x) { return std::sqrt(x); }, Domain::Positive, 1},
      {"rsqrt", &tessera::rsqrt, [](double x) { return 1 / std::sqrt(x); }, Domain::Positive, 1},
      {"sin", &tessera::sin, [](double x) { return std::sin(x); }, Domain::Any, 1},
      {"cos", &tessera::cos, [](double x) { return std::cos(x); }, Domain::Any, 1},
      {"tanh", &tessera::tanh, [](double x) { return std::tanh(x); }, Domain::Any, 1},
      {"sigmoid", &tessera::sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }, Domain::Any,
       1},
      {"erf", &tessera::erf, [](double x) { return std::erf(x); }, Domain::Any, 1},
  };
  for (const auto& c : cases) {
    auto f = c.f;
    auto s = unary(
        c.name, floats_and_int, [op = c.op](auto& a) { return op(a, SourceLoc{}); }, f, c.domain);
    s.out_dtype = [](DType t) { return is_floating_point(t) ? t : float32; };
    s.tol_scale = c.tol;
    run_spec(s);
  }
  auto s = with_out(unary(
                        "exp out", kFloatTypes, [](auto& a) { return tessera::exp(a); },
                        [](double x) { return std::exp(x); }),
                    [](Tensor& o, const std::vector<Tensor>& in) { exp_out(o, in[0]); });
  run_spec(s);
}

TEST(OpHarness, UnaryArith) {
  run_spec(
      with_out(unary(
                   "neg", kNumericTypes, [](auto& a) { return -a; }, [](double x) { return -x; }),
               [](Tensor& o, const std::vector<Tensor>& in) { neg_out(o, in[0]); }));
  run_spec(unary(
      "abs", kNumericTypes, [](auto& a) { return tessera::abs(a); },
      [](double x) { return std::fabs(x); }));
  run_spec(unary(
      "relu", kNumericTypes, [](auto& a) { return relu(a); },
      [](double x) { return x > 0 ? x : 0; }));
  run_spec(unary(
      "gelu", kFloatTypes, [](auto& a) { return gelu(a); },
      [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }));
  run_spec(unary(
      "gelu tanh", kFloatTypes, [](auto& a) { return gelu(a, "tanh"); },
      [](double x) {
        return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
      }));
  run_spec(unary(
      "silu", kFloatTypes, [](auto& a) { return silu(a); },
      [](double x) { return x / (1 + std::exp(-x)); }));
  run_spec(unary(
      "clamp", concat(kSignedInts, kFloatTypes), [](auto& a) { return clamp(a, -1, 2); },
      [](double x) { return std::min(std::max(x, -1.0), 2.0); }));
  run_spec(unary(
      "clamp max only", kFloatTypes, [](auto& a) { return clamp(a, std::nullopt, 0.5); },
      [](double x) { return std::min(x, 0.5); }));
}

TEST(OpHarness, Casts) {
  const std::vector<DType> all = {bool_,    int8,    int16,   int32,         int64,
                                  uint8,    uint16,  uint32,  uint64,        float16,
                                  bfloat16, float32, float64, float8_e4m3fn, float8_e5m2};
  for (DType to : all) {
    auto s = unary(
        std::string("to ") + dtype_name(to), all, [to](auto& a) { return a.to(to); },
        [](double x) { return x; }, Domain::Small);
    s.out_dtype = [to](DType) { return to; };
    s.ref = [to](const std::vector<Ref>& in, DType) {
      return pointwise_ref(in, [to](const V& a) {
        if (to == DType::Float8_e4m3fn)
          return static_cast<double>(static_cast<float>(Float8_e4m3fn(static_cast<float>(a[0]))));
        if (to == DType::Float8_e5m2)
          return static_cast<double>(static_cast<float>(Float8_e5m2(static_cast<float>(a[0]))));
        return round_to(to, a[0]);
      });
    };
    run_spec(s);
  }
}

// ---- reductions ---------------------------------------------------------------------------------

double sum_of(const V& v) {
  return std::accumulate(v.begin(), v.end(), 0.0);
}

OpSpec reduction(std::string name, std::vector<DType> dtypes, std::vector<int64_t> dims,
                 bool keepdim, std::function<Tensor(const Tensor&)> op,
                 std::function<double(const V&)> f,
                 std::vector<std::vector<Shape>> shapes = {
                     {{3, 4, 5}}, {{2, 0, 3}}, {{1, 70000}}}) {
  OpSpec s;
  s.name = std::move(name);
  s.dtypes = std::move(dtypes);
  s.shapes = std::move(shapes);
  s.run = [op](const std::vector<Tensor>& in) { return op(in[0]); };
  s.ref = [dims, keepdim, f](const std::vector<Ref>& in, DType) {
    return reduce_ref(in[0], dims, keepdim, f);
  };
  s.tol_scale = 4;
  return s;
}

// A float32 sum of 70000 values in [-1, 1] is about 150 in magnitude, but some seeds' sums cancel
// to O(1) while the rounding error stays that of the large partial sums (1.4e-4 seen, tiles
// interpreted, result 2.14): the tolerance is 40 x 1e-5 absolute plus relative, far below what a
// lost or doubled element changes (0.5 on average).
constexpr double kLongSumTolScale = 40;

TEST(OpHarness, Sum) {
  const auto int64_out = [](DType t) { return is_integral(t, true) ? int64 : t; };
  struct Config {
    std::vector<int64_t> dims;
    bool keepdim;
    std::vector<std::vector<Shape>> shapes;
  };
  const std::vector<Config> configs = {
      {{1}, false, {{{3, 4, 5}}, {{2, 0, 3}}, {{1, 70000}}}},
      {{-1}, true, {{{3, 4, 5}}, {{2, 0, 3}}, {{1, 70000}}}},
      {{0, 2}, false, {{{3, 4, 5}}, {{2, 0, 3}}}},
      {{0}, true, {{{3, 4, 5}}, {{70000, 2}}}},
      // Dense inputs summed over leading or middle dimensions: columns accumulated in blocks of
      // 256 over slices of the rows (several blocks, several slices, a partial block).
      {{0}, false, {{{2000, 513}}}},
      {{1}, true, {{{3, 700, 300}}}},
      {{}, false, {{{3, 4, 5}}, {{2, 0, 3}}, {{1, 70000}}}},
  };
  for (const auto& c : configs) {
    const std::vector<int64_t> d = c.dims;
    const bool k = c.keepdim;
    auto s = reduction(
        "sum", concat(kNumericTypes, {bool_}), d, k,
        [d, k](const Tensor& a) { return sum(a, d, k); }, sum_of, c.shapes);
    s.out_dtype = int64_out;
    s.run_out = [d, k](Tensor& o, const std::vector<Tensor>& in) { sum_out(o, in[0], d, k); };
    s.tol_scale = kLongSumTolScale;
    run_spec(s);
  }
  auto s = reduction(
      "sum all", kNumericTypes, {}, false, [](const Tensor& a) { return sum(a); }, sum_of);
  s.out_dtype = int64_out;
  s.tol_scale = kLongSumTolScale;
  run_spec(s);
}

TEST(OpHarness, MeanProdVar) {
  run_spec(reduction(
      "mean dim", kFloatTypes, {1}, false, [](const Tensor& a) { return mean(a, {1}); },
      [](const V& v) { return sum_of(v) / static_cast<double>(v.size()); },
      {{{3, 4, 5}}, {{1, 70000}}, {{2, 1500, 260}}}));
  run_spec(reduction(
      "mean all", kFloatTypes, {}, false, [](const Tensor& a) { return mean(a); },
      [](const V& v) { return sum_of(v) / static_cast<double>(v.size()); }, {{{3, 4, 5}}}));
  auto p = reduction(
      "prod", concat(kFloatTypes, {int32, int64}), {2}, true,
      [](const Tensor& a) { return prod(a, 2, true); },
      [](const V& v) {
        double r = 1;
        for (double x : v) r *= x;
        return r;
      },
      {{{3, 4, 5}}, {{2, 3, 0}}});
  p.out_dtype = [](DType t) { return is_integral(t) ? int64 : t; };
  p.domains = {Domain::Unit};
  run_spec(p);
  for (double corr : {1.0, 0.0}) {
    run_spec(reduction(
        "var", kFloatTypes, {0, 2}, false,
        [corr](const Tensor& a) {
          return var(a, {0, 2}, corr);
        },
        [corr](const V& v) {
          const double m = sum_of(v) / static_cast<double>(v.size());
          double ss = 0;
          for (double x : v) ss += (x - m) * (x - m);
          return ss / (static_cast<double>(v.size()) - corr);
        },
        {{{3, 4, 5}}, {{7, 2, 9}}}));
  }
}

TEST(OpHarness, MaxMinArg) {
  const auto types = concat(kNumericTypes, {bool_});
  auto mx = [](const V& v) { return *std::max_element(v.begin(), v.end()); };
  auto mn = [](const V& v) { return *std::min_element(v.begin(), v.end()); };
  const std::vector<std::vector<Shape>> shapes = {{{3, 4, 5}}, {{1, 70000}}};
  run_spec(reduction(
      "amax", types, {1}, false, [](const Tensor& a) { return amax(a, {1}); }, mx, shapes));
  run_spec(reduction(
      "amin keepdim", types, {-1}, true, [](const Tensor& a) { return amin(a, {-1}, true); }, mn,
      shapes));
  run_spec(reduction(
      "max all", types, {}, false, [](const Tensor& a) { return max(a); }, mx, shapes));
  run_spec(reduction(
      "min all", types, {}, false, [](const Tensor& a) { return min(a); }, mn, shapes));
  run_spec(reduction(
      "max.dim values", types, {1}, false, [](const Tensor& a) { return std::get<0>(max(a, 1)); },
      mx, shapes));
  auto first_index = [](bool is_max) {
    return [is_max](const V& v) {
      size_t best = 0;
      for (size_t i = 1; i < v.size(); ++i) {
        if (is_max ? v[i] > v[best] : v[i] < v[best]) best = i;
      }
      return static_cast<double>(best);
    };
  };
  for (bool is_max : {true, false}) {
    auto s = reduction(
        is_max ? "argmax dim" : "argmin dim", types, {1}, false,
        [is_max](const Tensor& a) { return is_max ? argmax(a, 1) : argmin(a, 1); },
        first_index(is_max), shapes);
    s.domains = {Domain::Small};  // many ties: the first index must win
    s.out_dtype = [](DType) { return int64; };
    run_spec(s);
    auto t = reduction(
        is_max ? "max.dim indices" : "min.dim indices", types, {1}, true,
        [is_max](const Tensor& a) {
          return std::get<1>(is_max ? max(a, 1, true) : min(a, 1, true));
        },
        first_index(is_max), shapes);
    t.domains = {Domain::Small};
    t.out_dtype = [](DType) { return int64; };
    run_spec(t);
  }
  auto flat = reduction(
      "argmax flat", types, {}, false, [](const Tensor& a) { return argmax(a); }, first_index(true),
      shapes);
  flat.domains = {Domain::Small};
  flat.out_dtype = [](DType) { return int64; };
  run_spec(flat);
}

// ---- softmax, cumsum ----------------------------------------------------------------------------

TEST(OpHarness, SoftmaxCumsum) {
  for (int64_t dim : {-1, 0, 1}) {
    OpSpec s;
    s.name = "softmax dim=" + std::to_string(dim);
    s.dtypes = kFloatTypes;
    s.shapes = {{{3, 4, 5}}, {{64, 1024}}};
    s.run = [dim](const std::vector<Tensor>& in) { return softmax(in[0], dim); };
    s.ref = [dim](const std::vector<Ref>& in, DType) {
      return along_ref(in[0], dim, [](const V& v) {
        const double m = *std::max_element(v.begin(), v.end());
        V e(v.size());
        double sum = 0;
        for (size_t i = 0; i < v.size(); ++i) sum += (e[i] = std::exp(v[i] - m));
        for (auto& x : e) x /= sum;
        return e;
      });
    };
    run_spec(s);
    s.name = "log_softmax dim=" + std::to_string(dim);
    s.run = [dim](const std::vector<Tensor>& in) { return log_softmax(in[0], dim); };
    s.ref = [dim](const std::vector<Ref>& in, DType) {
      return along_ref(in[0], dim, [](const V& v) {
        const double m = *std::max_element(v.begin(), v.end());
        double sum = 0;
        for (double x : v) sum += std::exp(x - m);
        V r(v.size());
        for (size_t i = 0; i < v.size(); ++i) r[i] = v[i] - m - std::log(sum);
        return r;
      });
    };
    s.tol_scale = 4;
    run_spec(s);
    OpSpec c;
    c.name = "cumsum dim=" + std::to_string(dim);
    c.dtypes = concat(kNumericTypes, {bool_});
    c.shapes = {{{3, 4, 5}}};
    c.out_dtype = [](DType t) { return is_integral(t, true) ? int64 : t; };
    c.run = [dim](const std::vector<Tensor>& in) { return cumsum(in[0], dim); };
    c.ref = [dim](const std::vector<Ref>& in, DType) {
      return along_ref(in[0], dim, [](const V& v) {
        V r(v.size());
        double acc = 0;
        for (size_t i = 0; i < v.size(); ++i) r[i] = acc += v[i];
        return r;
      });
    };
    c.tol_scale = 4;
    run_spec(c);
  }
}

// ---- matmul, linear, norms ----------------------------------------------------------------------

Ref matmul_ref(const Ref& a, const Ref& b) {
  // Promote 1-D operands, broadcast batches, multiply.
  Ref A = a, B = b;
  const bool av = A.shape.size() == 1, bv = B.shape.size() == 1;
  if (av) A.shape.insert(A.shape.begin(), 1);
  if (bv) B.shape.push_back(1);
  const int64_t M = A.shape[A.shape.size() - 2], K = A.shape.back(), N = B.shape.back();
  std::vector<int64_t> ab(A.shape.begin(), A.shape.end() - 2),
      bb(B.shape.begin(), B.shape.end() - 2);
  const size_t nb = std::max(ab.size(), bb.size());
  std::vector<int64_t> batch(nb, 1);
  for (size_t i = 0; i < ab.size(); ++i) batch[nb - ab.size() + i] = ab[i];
  for (size_t i = 0; i < bb.size(); ++i) {
    int64_t& s = batch[nb - bb.size() + i];
    if (s == 1) s = bb[i];
  }
  Ref out;
  out.shape = batch;
  if (!av) out.shape.push_back(M);
  if (!bv) out.shape.push_back(N);
  int64_t nbatch = 1;
  for (auto s : batch) nbatch *= s;
  auto index_of = [&](const std::vector<int64_t>& own, int64_t bi) {
    // Maps a flat broadcast batch index to the operand's own flat batch index.
    int64_t off = 0, stride = 1;
    for (int64_t d = static_cast<int64_t>(nb) - 1; d >= 0; --d) {
      const int64_t coord = bi % batch[d];
      bi /= batch[d];
      const int64_t od = d - static_cast<int64_t>(nb - own.size());
      if (od >= 0) {
        off += (own[od] == 1 ? 0 : coord) * stride;
        stride *= own[od];
      }
    }
    return off;
  };
  for (int64_t bi = 0; bi < nbatch; ++bi) {
    const int64_t ao = index_of(ab, bi) * M * K, bo = index_of(bb, bi) * K * N;
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += A.data[ao + i * K + k] * B.data[bo + k * N + j];
        out.data.push_back(acc);
      }
    }
  }
  return out;
}

TEST(OpHarness, Matmul) {
  OpSpec s;
  s.name = "matmul";
  s.dtypes = {float16, bfloat16, float32, float64, int32, int64};
  s.shapes = {{{3, 4}, {4, 5}},    {{4}, {4}},
              {{4}, {4, 2}},       {{3, 4}, {4}},
              {{2, 3, 4}, {4, 5}}, {{2, 1, 3, 4}, {5, 4, 2}},
              {{0, 4}, {4, 3}},    {{65, 130}, {130, 67}}};
  s.domains = {Domain::Unit, Domain::Unit};
  s.run = [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); };
  s.run_out = [](Tensor& o, const std::vector<Tensor>& in) { matmul_out(o, in[0], in[1]); };
  s.ref = [](const std::vector<Ref>& in, DType) { return matmul_ref(in[0], in[1]); };
  s.tol_scale = 10;
  run_spec(s);
  // The built-in blocked kernel (the path of builds without OpenBLAS) on the same cases.
  ops_detail::set_force_builtin_matmul(true);
  s.name = "matmul (built-in kernel)";
  run_spec(s);
  ops_detail::set_force_builtin_matmul(false);

  OpSpec l;
  l.name = "linear";
  l.dtypes = {float32, float64};
  l.shapes = {{{5, 4}, {3, 4}, {3}}, {{2, 6, 4}, {3, 4}, {3}}};
  l.run = [](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); };
  l.ref = [](const std::vector<Ref>& in, DType) {
    Ref wt = in[1];
    const int64_t O = wt.shape[0], I = wt.shape[1];
    wt.shape = {I, O};
    for (int64_t i = 0; i < I; ++i)
      for (int64_t o = 0; o < O; ++o) wt.data[i * O + o] = in[1].data[o * I + i];
    Ref y = matmul_ref(in[0], wt);
    return pointwise_ref({y, in[2]}, [](const V& a) { return a[0] + a[1]; });
  };
  l.tol_scale = 10;
  run_spec(l);
}

// Counts CPU allocations while installed; forwards to the allocator it replaced.
struct AllocationCounter {
  static inline runtime::Allocator inner;
  static inline std::atomic<int> count{0};
  static void* allocate(size_t n, Device d) {
    ++count;
    return inner.allocate(n, d);
  }
  static void release(void* p, Device d) { inner.release(p, d); }
};

// With OpenBLAS, float products read transposed and broadcast operands where they lie: the only
// CPU allocation is the result's (a copy of a transposed weight or activation was a tenth of a
// training step's time: docs/benchmarks.md). Values are OpHarness.Matmul's concern.
TEST(Matmul, FloatOperandsInAnyMajorOrderAreNotCopied) {
  if (std::string(matmul_backend()) != "OpenBLAS")
    GTEST_SKIP() << "built without OpenBLAS: the built-in kernel copies its operands";
  for (DType dt : {float32, float64}) {
    const Tensor a = randn({70, 33}).to(dt), w = randn({45, 33}).to(dt), b = randn({70, 45}).to(dt);
    const Tensor q = randn({2, 3, 17, 8}).to(dt), k = randn({2, 3, 19, 8}).to(dt);
    const Tensor x3 = randn({4, 17, 33}).to(dt);
    const std::vector<std::pair<const char*, std::function<Tensor()>>> cases = {
        {"a @ w.t()", [&] { return matmul(a, w.t()); }},
        {"a.t() @ b", [&] { return matmul(a.t(), b); }},
        {"b.t() @ a", [&] { return matmul(b.t(), a); }},
        {"q @ k^T, batched", [&] { return matmul(q, k.transpose(-1, -2)); }},
        {"batched @ a broadcast transposed weight", [&] { return matmul(x3, w.t()); }},
        {"a row slice @ w.t()", [&] { return matmul(a.slice(0, 3, 60), w.t()); }},
    };
    for (const auto& [what, run] : cases) {
      AllocationCounter::inner = runtime::allocator_for(DeviceType::CPU);
      AllocationCounter::count = 0;
      runtime::register_allocator(DeviceType::CPU,
                                  {&AllocationCounter::allocate, &AllocationCounter::release});
      const Tensor got = run();
      runtime::register_allocator(DeviceType::CPU, AllocationCounter::inner);
      EXPECT_EQ(AllocationCounter::count.load(), 1) << what << " " << dtype_name(dt);
      EXPECT_TRUE(allclose(got, run(), 0, 0)) << what;  // the same bits with the copies
    }
  }
}

TEST(OpHarness, Norms) {
  for (bool rms : {false, true}) {
    OpSpec s;
    s.name = rms ? "rms_norm" : "layer_norm";
    s.dtypes = kFloatTypes;
    s.shapes = {{{4, 3, 8}, {3, 8}, {3, 8}}, {{64, 1024}, {1024}, {1024}}};
    s.run = [rms](const std::vector<Tensor>& in) {
      std::vector<int64_t> shape;
      for (const auto& d : in[1].sizes()) shape.push_back(d.expect_int());
      return rms ? rms_norm(in[0], shape, in[1], 1e-6)
                 : layer_norm(in[0], shape, in[1], in[2], 1e-5);
    };
    s.ref = [rms](const std::vector<Ref>& in, DType) {
      const int64_t n = in[1].numel();
      Ref out = in[0];
      for (int64_t r = 0; r < in[0].numel() / n; ++r) {
        double mean = 0, ss = 0;
        for (int64_t i = 0; i < n; ++i) mean += in[0].data[r * n + i];
        mean = rms ? 0 : mean / static_cast<double>(n);
        for (int64_t i = 0; i < n; ++i) ss += std::pow(in[0].data[r * n + i] - mean, 2);
        const double inv = 1 / std::sqrt(ss / static_cast<double>(n) + (rms ? 1e-6 : 1e-5));
        for (int64_t i = 0; i < n; ++i) {
          double y = (in[0].data[r * n + i] - mean) * inv * in[1].data[i];
          if (!rms) y += in[2].data[i];
          out.data[r * n + i] = y;
        }
      }
      return out;
    };
    s.tol_scale = 4;
    run_spec(s);
  }
}

// ---- joining and indexing -----------------------------------------------------------------------

TEST(OpHarness, CatStack) {
  for (int64_t dim : {0, 1, -1}) {
    OpSpec s;
    s.name = "cat dim=" + std::to_string(dim);
    s.dtypes = concat(kNumericTypes, {bool_});
    s.shapes = dim == 0 ? std::vector<std::vector<Shape>>{{{2, 3}, {4, 3}, {0, 3}}}
                        : std::vector<std::vector<Shape>>{{{2, 3}, {2, 1}, {2, 4}}};
    s.run = [dim](const std::vector<Tensor>& in) { return cat(in, dim); };
    s.run_out = [dim](Tensor& o, const std::vector<Tensor>& in) { cat_out(o, in, dim); };
    s.ref = [dim](const std::vector<Ref>& in, DType) {
      Ref out;
      const int64_t d = dim < 0 ? dim + 2 : dim;
      out.shape = in[0].shape;
      out.shape[d] = 0;
      for (const auto& r : in) out.shape[d] += r.shape[d];
      const int64_t rows = out.shape[0];
      if (d == 0) {
        for (const auto& r : in) out.data.insert(out.data.end(), r.data.begin(), r.data.end());
      } else {
        for (int64_t i = 0; i < rows; ++i) {
          for (const auto& r : in) {
            const int64_t w = r.shape[1];
            out.data.insert(out.data.end(), r.data.begin() + i * w, r.data.begin() + (i + 1) * w);
          }
        }
      }
      return out;
    };
    run_spec(s);
  }
  OpSpec st;
  st.name = "stack";
  st.dtypes = {float32, int64};
  st.shapes = {{{2, 3}, {2, 3}}};
  st.run = [](const std::vector<Tensor>& in) { return stack(in, 1); };
  st.ref = [](const std::vector<Ref>& in, DType) {
    Ref out;
    out.shape = {2, 2, 3};
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t k = 0; k < 2; ++k)
        for (int64_t j = 0; j < 3; ++j) out.data.push_back(in[k].data[i * 3 + j]);
    return out;
  };
  run_spec(st);
}

TEST(OpHarness, IndexSelectEmbedding) {
  for (int64_t dim : {0, 1}) {
    OpSpec s;
    s.name = "index_select dim=" + std::to_string(dim);
    s.dtypes = concat(kNumericTypes, {bool_});
    s.input_dtypes = [](DType dt, size_t i) { return i == 1 ? int64 : dt; };
    s.shapes = {{{5, 5}, {7}}, {{5, 5, 3}, {0}}};
    s.domains = {Domain::Any, Domain::Small};
    s.run = [dim](const std::vector<Tensor>& in) { return index_select(in[0], dim, in[1]); };
    s.ref = [dim](const std::vector<Ref>& in, DType) {
      const Ref& x = in[0];
      Ref out;
      out.shape = x.shape;
      out.shape[dim] = in[1].numel();
      int64_t A = 1, B = 1;
      for (int64_t d = 0; d < dim; ++d) A *= x.shape[d];
      for (size_t d = dim + 1; d < x.shape.size(); ++d) B *= x.shape[d];
      for (int64_t a = 0; a < A; ++a)
        for (double idx : in[1].data)
          for (int64_t b = 0; b < B; ++b)
            out.data.push_back(x.data[(a * x.shape[dim] + static_cast<int64_t>(idx)) * B + b]);
      return out;
    };
    run_spec(s);
  }
  for (int64_t dim : {0, 1}) {
    OpSpec s;
    s.name = "index_add dim=" + std::to_string(dim);
    s.dtypes = {float32, float64, int32, int64, bfloat16};
    s.input_dtypes = [](DType dt, size_t i) { return i == 1 ? int64 : dt; };
    s.shapes = {dim == 0 ? std::vector<std::vector<int64_t>>{{5, 4}, {7}, {7, 4}}
                         : std::vector<std::vector<int64_t>>{{4, 5}, {7}, {4, 7}}};
    s.domains = {Domain::Small, Domain::Small, Domain::Small};
    s.run = [dim](const std::vector<Tensor>& in) { return index_add(in[0], dim, in[1], in[2], 2); };
    s.ref = [dim](const std::vector<Ref>& in, DType) {
      Ref out = in[0];
      const int64_t A = dim == 0 ? 1 : 4, S = 5, B = dim == 0 ? 4 : 1, I = 7;
      for (int64_t a = 0; a < A; ++a)
        for (int64_t i = 0; i < I; ++i)
          for (int64_t b = 0; b < B; ++b)
            out.data[static_cast<size_t>(
                (a * S + static_cast<int64_t>(in[1].data[static_cast<size_t>(i)])) * B + b)] +=
                2 * in[2].data[static_cast<size_t>((a * I + i) * B + b)];
      return out;
    };
    run_spec(s);
  }
  OpSpec e;
  e.name = "embedding";
  e.dtypes = {float32, bfloat16};
  e.input_dtypes = [](DType dt, size_t i) { return i == 1 ? int64 : dt; };
  e.shapes = {{{5, 3}, {2, 4}}};
  e.domains = {Domain::Any, Domain::Small};
  e.run = [](const std::vector<Tensor>& in) { return embedding(in[0], in[1]); };
  e.ref = [](const std::vector<Ref>& in, DType) {
    Ref out;
    out.shape = {2, 4, 3};
    for (double idx : in[1].data)
      for (int64_t j = 0; j < 3; ++j)
        out.data.push_back(in[0].data[static_cast<int64_t>(idx) * 3 + j]);
    return out;
  };
  run_spec(e);
}

TEST(OpHarness, IsClose) {
  auto s = binary(
      "isclose", kFloatTypes, [](auto& a, auto& b) { return isclose(a, b, 0.1, 0.5); },
      [](double a, double b) { return std::fabs(a - b) <= 0.5 + 0.1 * std::fabs(b) ? 1.0 : 0.0; });
  s.out_dtype = [](DType) { return bool_; };
  run_spec(s);
}

}  // namespace

namespace {

// ---- views and like-factories: values, and shape functions that reproduce sizes AND strides ----

Ref permute_ref(const Ref& x, const std::vector<int64_t>& perm) {
  Ref out;
  for (auto p : perm) out.shape.push_back(x.shape[p]);
  std::vector<int64_t> idx(perm.size()), src(perm.size());
  for (int64_t k = 0; k < x.numel(); ++k) {
    int64_t rem = k;
    for (int64_t d = static_cast<int64_t>(perm.size()) - 1; d >= 0; --d) {
      idx[d] = rem % out.shape[d];
      rem /= out.shape[d];
    }
    for (size_t d = 0; d < perm.size(); ++d) src[perm[d]] = idx[d];
    out.data.push_back(x.at(src));
  }
  return out;
}

OpSpec view_spec(std::string name, Shape shape, std::function<Tensor(const Tensor&)> op,
                 std::function<Ref(const Ref&)> ref) {
  OpSpec s;
  s.name = std::move(name);
  s.dtypes = {float32, int64, bool_, bfloat16};
  s.shapes = {{shape}};
  s.run = [op](const std::vector<Tensor>& in) { return op(in[0]); };
  s.ref = [ref](const std::vector<Ref>& in, DType) { return ref(in[0]); };
  return s;
}

Ref reshaped(Ref r, Shape s) {
  r.shape = std::move(s);
  return r;
}

TEST(OpHarness, Views) {
  run_spec(view_spec(
      "permute", {2, 3, 4},
      [](auto& x) {
        return x.permute({2, 0, 1});
      },
      [](const Ref& r) {
        return permute_ref(r, {2, 0, 1});
      }));
  run_spec(view_spec(
      "transpose", {2, 3, 4}, [](auto& x) { return x.transpose(0, 2); },
      [](const Ref& r) {
        return permute_ref(r, {2, 1, 0});
      }));
  run_spec(view_spec(
      "t", {3, 5}, [](auto& x) { return x.t(); },
      [](const Ref& r) {
        return permute_ref(r, {1, 0});
      }));
  run_spec(view_spec(
      "view", {2, 3, 4},
      [](auto& x) {
        return x.contiguous().view({4, -1});
      },
      [](const Ref& r) {
        return reshaped(r, {4, 6});
      }));
  run_spec(view_spec(
      "reshape", {2, 3, 4},
      [](auto& x) {
        return x.reshape({6, 4});
      },
      [](const Ref& r) {
        return reshaped(r, {6, 4});
      }));
  run_spec(view_spec(
      "flatten", {2, 3, 4}, [](auto& x) { return x.flatten(1); },
      [](const Ref& r) {
        return reshaped(r, {2, 12});
      }));
  run_spec(view_spec(
      "unsqueeze", {2, 3}, [](auto& x) { return x.unsqueeze(1); },
      [](const Ref& r) {
        return reshaped(r, {2, 1, 3});
      }));
  run_spec(view_spec(
      "squeeze", {2, 1, 3}, [](auto& x) { return x.squeeze(1); },
      [](const Ref& r) {
        return reshaped(r, {2, 3});
      }));
  run_spec(view_spec(
      "expand", {3, 1},
      [](auto& x) {
        return x.expand({2, 3, 4});
      },
      [](const Ref& r) {
        Ref out;
        out.shape = {2, 3, 4};
        for (int a = 0; a < 2; ++a)
          for (int64_t i = 0; i < 3; ++i)
            for (int j = 0; j < 4; ++j) out.data.push_back(r.data[i]);
        return out;
      }));
  run_spec(view_spec(
      "narrow", {4, 5}, [](auto& x) { return x.narrow(1, 1, 3); },
      [](const Ref& r) {
        Ref out;
        out.shape = {4, 3};
        for (int64_t i = 0; i < 4; ++i)
          for (int64_t j = 1; j < 4; ++j) out.data.push_back(r.data[i * 5 + j]);
        return out;
      }));
  run_spec(view_spec(
      "slice step", {4, 7}, [](auto& x) { return x.slice(1, 1, std::nullopt, 3); },
      [](const Ref& r) {
        Ref out;
        out.shape = {4, 2};
        for (int64_t i = 0; i < 4; ++i)
          for (int64_t j = 1; j < 7; j += 3) out.data.push_back(r.data[i * 7 + j]);
        return out;
      }));
  run_spec(view_spec(
      "select", {4, 5}, [](auto& x) { return x.select(0, -2); },
      [](const Ref& r) {
        Ref out;
        out.shape = {5};
        out.data.assign(r.data.begin() + 10, r.data.begin() + 15);
        return out;
      }));
  run_spec(view_spec(
      "movedim", {2, 3, 4}, [](auto& x) { return x.movedim(0, -1); },
      [](const Ref& r) {
        return permute_ref(r, {1, 2, 0});
      }));
  run_spec(view_spec(
      "contiguous", {3, 4}, [](auto& x) { return x.contiguous(); },
      [](const Ref& r) { return r; }));
  run_spec(view_spec(
      "clone", {3, 4}, [](auto& x) { return x.clone(); }, [](const Ref& r) { return r; }));
  run_spec(view_spec(
      "full_like", {3, 4}, [](auto& x) { return full_like(x, 2); },
      [](const Ref& r) {
        Ref out = r;
        for (auto& v : out.data) v = 2;
        return out;
      }));
  run_spec(view_spec(
      "zeros_like", {3, 4}, [](auto& x) { return zeros_like(x); },
      [](const Ref& r) {
        Ref out = r;
        for (auto& v : out.data) v = 0;
        return out;
      }));
}

}  // namespace
