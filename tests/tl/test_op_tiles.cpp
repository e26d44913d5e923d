// The built-in pointwise ops lowered to tile kernels (src/tl/op_tiles.cpp): the functors of
// ops/pointwise_functors.h instantiated with tiles must compute what the precompiled CPU loops
// compute from the same functors, for every op, dtype and layout, edge values included. Here on
// CPU tensors (ops_detail::ScopedThroughTiles sends them through the tile kernel); the
// CTest cross-check passes compile the same kernels for CUDA (nvrtc) and run them there (gpu).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "ops/pointwise.h"
#include "tessera/tessera.h"
#include "testing.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

enum class Exact { Bits, Math };  // Math: libm on the CPU loops, trt's polynomials in kernels

struct OpCase {
  const char* name;
  int arity;
  DTypeSet dtypes;
  Domain domain0, domain1;
  Exact exact;
  Fn fn;
};

const std::vector<OpCase>& cases() {
  using D = Domain;
  using V = const std::vector<Tensor>&;
  static const std::vector<OpCase> c = {
      {"add", 2, kNumericAndBool, D::Any, D::Any, Exact::Bits, [](V x) { return x[0] + x[1]; }},
      {"add alpha", 2, kNumeric, D::Any, D::Any, Exact::Bits,
       [](V x) { return add(x[0], x[1], 3); }},
      {"sub alpha", 2, kNumeric, D::Any, D::Any, Exact::Bits,
       [](V x) { return sub(x[0], x[1], 2); }},
      {"mul", 2, kNumericAndBool, D::Any, D::Any, Exact::Bits, [](V x) { return x[0] * x[1]; }},
      {"div", 2, kNumeric, D::Any, D::NonZero, Exact::Bits, [](V x) { return x[0] / x[1]; }},
      {"div trunc", 2, kNumeric, D::Any, D::NonZero, Exact::Bits,
       [](V x) { return div(x[0], x[1], "trunc"); }},
      {"div floor", 2, kNumeric, D::Any, D::NonZero, Exact::Bits,
       [](V x) { return div(x[0], x[1], "floor"); }},
      {"remainder", 2, kNumeric, D::Any, D::NonZero, Exact::Bits,
       [](V x) { return remainder(x[0], x[1]); }},
      {"pow", 2, kNumeric, D::Positive, D::Small, Exact::Math, [](V x) { return pow(x[0], x[1]); }},
      {"maximum", 2, kNumericAndBool, D::Any, D::Any, Exact::Bits,
       [](V x) { return maximum(x[0], x[1]); }},
      {"minimum", 2, kNumericAndBool, D::Any, D::Any, Exact::Bits,
       [](V x) { return minimum(x[0], x[1]); }},
      {"eq", 2, kNumericAndBool, D::Small, D::Small, Exact::Bits,
       [](V x) { return eq(x[0], x[1]); }},
      {"ne", 2, kNumericAndBool, D::Small, D::Small, Exact::Bits,
       [](V x) { return ne(x[0], x[1]); }},
      {"lt", 2, kNumericAndBool, D::Any, D::Any, Exact::Bits, [](V x) { return lt(x[0], x[1]); }},
      {"le", 2, kNumericAndBool, D::Small, D::Small, Exact::Bits,
       [](V x) { return le(x[0], x[1]); }},
      {"gt", 2, kNumericAndBool, D::Any, D::Any, Exact::Bits, [](V x) { return gt(x[0], x[1]); }},
      {"ge", 2, kNumericAndBool, D::Small, D::Small, Exact::Bits,
       [](V x) { return ge(x[0], x[1]); }},
      {"logical_and", 2, kNumericAndBool, D::Small, D::Small, Exact::Bits,
       [](V x) { return logical_and(x[0], x[1]); }},
      {"logical_or", 2, kNumericAndBool, D::Small, D::Small, Exact::Bits,
       [](V x) { return logical_or(x[0], x[1]); }},
      {"logical_xor", 2, kNumericAndBool, D::Small, D::Small, Exact::Bits,
       [](V x) { return logical_xor(x[0], x[1]); }},
      {"bitwise_and", 2, kIntsAndBool, D::Any, D::Any, Exact::Bits,
       [](V x) { return bitwise_and(x[0], x[1]); }},
      {"bitwise_or", 2, kIntsAndBool, D::Any, D::Any, Exact::Bits,
       [](V x) { return bitwise_or(x[0], x[1]); }},
      {"bitwise_xor", 2, kIntsAndBool, D::Any, D::Any, Exact::Bits,
       [](V x) { return bitwise_xor(x[0], x[1]); }},
      {"bitwise_left_shift", 2, kInts, D::Any, D::Any, Exact::Bits,
       [](V x) { return bitwise_left_shift(x[0], x[1]); }},
      {"bitwise_right_shift", 2, kInts, D::Any, D::Any, Exact::Bits,
       [](V x) { return bitwise_right_shift(x[0], x[1]); }},
      {"neg", 1, kNumeric, D::Any, D::Any, Exact::Bits, [](V x) { return neg(x[0]); }},
      {"abs", 1, kNumeric, D::Any, D::Any, Exact::Bits, [](V x) { return abs(x[0]); }},
      {"relu", 1, kNumeric, D::Any, D::Any, Exact::Bits, [](V x) { return relu(x[0]); }},
      {"sqrt", 1, kNumeric, D::Positive, D::Any, Exact::Bits, [](V x) { return sqrt(x[0]); }},
      {"rsqrt", 1, kFloats, D::Positive, D::Any, Exact::Bits, [](V x) { return rsqrt(x[0]); }},
      {"exp", 1, kNumeric, D::Any, D::Any, Exact::Math, [](V x) { return exp(x[0]); }},
      {"exp2", 1, kFloats, D::Any, D::Any, Exact::Math, [](V x) { return exp2(x[0]); }},
      {"log", 1, kFloats, D::Positive, D::Any, Exact::Math, [](V x) { return log(x[0]); }},
      {"log2", 1, kFloats, D::Positive, D::Any, Exact::Math, [](V x) { return log2(x[0]); }},
      {"sin", 1, kFloats, D::Any, D::Any, Exact::Math, [](V x) { return sin(x[0]); }},
      {"cos", 1, kFloats, D::Any, D::Any, Exact::Math, [](V x) { return cos(x[0]); }},
      {"tanh", 1, kFloats, D::Any, D::Any, Exact::Math, [](V x) { return tanh(x[0]); }},
      {"sigmoid", 1, kFloats, D::Any, D::Any, Exact::Math, [](V x) { return sigmoid(x[0]); }},
      {"erf", 1, kFloats, D::Any, D::Any, Exact::Math, [](V x) { return erf(x[0]); }},
      {"gelu", 1, kFloats, D::Any, D::Any, Exact::Math, [](V x) { return gelu(x[0]); }},
      {"gelu tanh", 1, kFloats, D::Any, D::Any, Exact::Math,
       [](V x) { return gelu(x[0], "tanh"); }},
      {"silu", 1, kFloats, D::Any, D::Any, Exact::Math, [](V x) { return silu(x[0]); }},
      {"logical_not", 1, kNumericAndBool, D::Small, D::Any, Exact::Bits,
       [](V x) { return logical_not(x[0]); }},
      {"bitwise_not", 1, kIntsAndBool, D::Any, D::Any, Exact::Bits,
       [](V x) { return bitwise_not(x[0]); }},
      {"clamp", 1, kNumeric, D::Any, D::Any, Exact::Bits, [](V x) { return clamp(x[0], -1, 2); }},
      {"clamp min", 1, kNumeric, D::Any, D::Any, Exact::Bits,
       [](V x) { return clamp(x[0], 0, std::nullopt); }},
  };
  return c;
}

const OpCase& find(std::string_view name) {
  for (const OpCase& c : cases()) {
    if (c.name == name) return c;
  }
  throw std::logic_error("no case " + std::string(name));
}

// Random values of `domain` with the dtype's edge values mixed in (NaN, infinities, signed
// zeros; the integer extremes, 0 and -1), unless the domain excludes them.
Tensor edgy(IntArrayRef shape, DType d, Domain domain, bool huge = true) {
  Tensor t = random_tensor(shape, d, domain);
  if (domain != Domain::Any || d == DType::Bool) return t;
  std::vector<double> edges;
  if (is_floating_point(d)) {
    edges = {std::nan(""), INFINITY, -INFINITY, -0.0, 0.0, 1.0, -1.0, huge ? 1e30 : 1e4, -1e-30};
  } else if (is_signed(d)) {
    const double bits = static_cast<double>(itemsize(d) * 8);
    edges = {0,
             -1,
             1,
             -std::ldexp(1.0, static_cast<int>(bits) - 1),
             std::ldexp(1.0, static_cast<int>(bits) - 1) - 1,
             bits,
             bits + 3,
             -bits};
  } else {
    edges = {0, 1, std::ldexp(1.0, static_cast<int>(itemsize(d) * 8)) - 1};
  }
  Tensor flat = t.view({-1});
  for (size_t i = 0; i < edges.size() && static_cast<int64_t>(2 * i + 1) < flat.numel(); ++i) {
    const Scalar v =
        is_floating_point(d) ? Scalar(edges[i]) : Scalar(static_cast<int64_t>(edges[i]));
    flat[static_cast<int64_t>(3 * i % flat.numel())].fill_(v);
  }
  return t;
}

::testing::AssertionResult agree(const OpCase& c, const Tensor& got, const Tensor& want) {
  if (c.exact == Exact::Bits || !is_floating_point(want.dtype())) {
    // NaNs of either sign and payload count as equal (the CPU's NaN and the kernel's may differ).
    if (is_floating_point(want.dtype())) {
      return all_close(got.to(DType::Float64), want.to(DType::Float64), 0, 0, true);
    }
    return bitwise_equal(got, want);
  }
  const double rtol = want.dtype() == DType::Float64   ? 1e-14
                      : want.dtype() == DType::Float32 ? 2e-6
                      : want.dtype() == DType::Float16 ? 1e-3
                                                       : 8e-3;
  // Absolute as well: composites cancel (gelu's 1 + tanh(x) for x < 0), so an ulp of an
  // intermediate near 1 shows in a small result.
  return all_close(got.to(DType::Float64), want.to(DType::Float64), rtol, rtol, true);
}

void check(const OpCase& c, DType d, const std::vector<Tensor>& in, const std::string& what) {
  const Tensor want = c.fn(in);
  Tensor got;
  {
    ops_detail::ScopedThroughTiles tiles;
    got = c.fn(in);
  }
  EXPECT_TRUE(got.sizes().equals(want.sizes())) << c.name << " " << dtype_name(d) << " " << what;
  EXPECT_EQ(got.dtype(), want.dtype()) << c.name << " " << dtype_name(d) << " " << what;
  EXPECT_TRUE(agree(c, got, want)) << c.name << " " << dtype_name(d) << " " << what;
}

void sweep(std::initializer_list<DType> dtypes) {
  for (const OpCase& c : cases()) {
    for (DType d : dtypes) {
      if ((c.dtypes & dtype_bit(d)) == 0) continue;
      // sin and cos: within their documented range (|x| <= 1e4, docs/kernels.md).
      const bool huge = std::string_view(c.name) != "sin" && std::string_view(c.name) != "cos";
      std::vector<Tensor> in = {edgy({3, 50}, d, c.domain0, huge)};
      if (c.arity == 2) in.push_back(edgy({3, 50}, d, c.domain1));
      check(c, d, in, "contiguous");
    }
  }
}

// Every op at every dtype, through the reference interpreter (no compiles: the whole surface).
TEST(PointwiseTiles, EveryOpAndDtypeAgreesWithTheCpuLoopsInterpreted) {
  ScopedEnv interpret("TESSERA_INTERPRET", "1");
  sweep({DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int8, DType::Int16,
         DType::Int32, DType::Int64, DType::UInt8, DType::UInt32, DType::Bool});
}

// Compiled: every op at the common dtypes (each a kernel specialization).
TEST(PointwiseTiles, EveryOpAgreesWithTheCpuLoopsCompiled) {
  sweep({DType::Float32, DType::Int32, DType::BFloat16});
}

TEST(PointwiseTiles, LayoutsBroadcastsScalarsAndMixedDtypes) {
  const OpCase& add_case = find("add alpha");
  const OpCase& floor_case = find("div floor");
  Tensor a = random_tensor({4, 1, 6}, DType::Float32), b = random_tensor({5, 1}, DType::Float32);
  check(add_case, DType::Float32, {a, b}, "broadcast [4,1,6] + [5,1]");
  Tensor t = random_tensor({6, 9}, DType::Int32).t(), u = random_tensor({9, 6}, DType::Int32);
  check(floor_case, DType::Int32, {t, edgy({9, 6}, DType::Int32, Domain::NonZero)}, "transposed");
  Tensor big = random_tensor({8, 20}, DType::Float64);
  Tensor sliced = big.slice(1, 3, 17, 2);  // strided and offset
  check(find("exp"), DType::Float64, {sliced}, "strided slice (exp)");
  // Mixed dtypes promote (int32 + float16 -> float16), and Scalar operands.
  check(add_case, DType::Float16, {u, random_tensor({9, 6}, DType::Float16)}, "int32 + float16");
  const OpCase scalar_case{"mul scalar",
                           1,
                           kNumeric,
                           Domain::Any,
                           Domain::Any,
                           Exact::Bits,
                           [](const std::vector<Tensor>& x) { return x[0] * 2.5; }};
  check(scalar_case, DType::Float32, {random_tensor({7}, DType::Float32)}, "tensor * scalar");
  const OpCase zero_dim{"0-dim",
                        2,
                        kNumeric,
                        Domain::Any,
                        Domain::Any,
                        Exact::Bits,
                        [](const std::vector<Tensor>& x) { return x[0] - x[1]; }};
  check(zero_dim, DType::Float32,
        {random_tensor({}, DType::Float32), random_tensor({}, DType::Float32)}, "0-dim");
  check(zero_dim, DType::Float32,
        {random_tensor({0, 3}, DType::Float32), random_tensor({0, 3}, DType::Float32)}, "empty");
  // Out= with a cast and in place.
  Tensor out = empty({4, 5, 6}, TensorOptions().dtype(DType::Float64));
  Tensor want = empty_like(out);
  add_out(want, a, b);
  {
    ops_detail::ScopedThroughTiles tiles;
    add_out(out, a, b);
  }
  EXPECT_TRUE(bitwise_equal(out, want));
  Tensor x = random_tensor({33}, DType::Float32), y = x.clone();
  x.mul_(3);
  {
    ops_detail::ScopedThroughTiles tiles;
    y.mul_(3);
  }
  EXPECT_TRUE(bitwise_equal(y, x));
}

// A CPU scalar operand (`x * 2.5`'s 0-dim tensor, a user's 0-dim CPU tensor) is a kernel
// parameter, not a loaded operand (on a GPU: no copy to the device, and nothing a CUDA graph
// would read again from freed host memory): its value in a carrier type, converted to its dtype in
// the kernel. Every dtype of tensor and of scalar, the scalar first or second, edge values.
TEST(PointwiseTiles, CpuScalarOperandsAreKernelParametersOfTheirOwnDtype) {
  const auto same = [](const Tensor& got, const Tensor& want) -> bool {
    if (!got.sizes().equals(want.sizes()) || got.dtype() != want.dtype()) return false;
    return is_floating_point(want.dtype())
               ? bool(all_close(got.to(DType::Float64), want.to(DType::Float64), 0, 0, true))
               : bool(bitwise_equal(got, want));
  };
  const auto both = [&](const std::function<Tensor()>& f, const std::string& what) {
    const Tensor want = f();
    Tensor got;
    {
      ops_detail::ScopedThroughTiles tiles;
      got = f();
    }
    EXPECT_TRUE(same(got, want)) << what;
  };
  const double nan = std::nan(""), inf = INFINITY;
  // (each dtype pair is a specialization of its own; the values are launch arguments)
  for (DType d : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int8,
                  DType::Int64, DType::UInt8, DType::Bool}) {
    const std::string dn = dtype_name(d);
    const Tensor x = edgy({5, 40}, d, Domain::Any);
    if (d != DType::Bool) {
      both([&] { return add(x, 7, 2); }, dn + " + 7 alpha 2");
      both([&] { return 2.5 / x; }, "2.5 / " + dn + " (the scalar first, promotes integers)");
    }
    both([&] { return where(x > 0, x, 1); }, "where(" + dn + " > 0, x, 1)");
  }
  // A 0-dim CPU tensor of another dtype: its own dtype's value, then promotion as eager.
  for (DType d : {DType::Float32, DType::Int32, DType::BFloat16}) {
    const Tensor x = edgy({5, 40}, d, Domain::Any);
    for (DType sd : {DType::Float64, DType::Float16, DType::Int64, DType::UInt8}) {
      for (double v : {0.0, -0.0, 1.5, -3.0, 255.0, nan, inf, -inf}) {
        if (!is_floating_point(sd) && (std::isnan(v) || std::isinf(v) || v != std::trunc(v)))
          continue;
        if (sd == DType::UInt8 && v < 0) continue;
        const Tensor s = ops_detail::scalar_tensor(v, sd);
        both([&] { return x - s; },
             dtype_name(d) + std::string(" - 0-dim ") + dtype_name(sd) + " " + std::to_string(v));
      }
    }
  }
  // Values a float64 or float32 carrier would round: int64 beyond 2^53, uint8 255.
  const Tensor big = full({8}, int64_t{1} << 62, TensorOptions().dtype(DType::Int64));
  both([&] { return big + ops_detail::scalar_tensor(int64_t{(1LL << 53) + 1}, DType::Int64); },
       "int64 + 2^53 + 1");
  both([&] { return big - 9007199254740993LL; }, "int64 - (2^53 + 1)");
  const Tensor u8 = full({8}, 3, TensorOptions().dtype(DType::UInt8));
  both([&] { return u8 * ops_detail::scalar_tensor(255, DType::UInt8); }, "uint8 * 255 (wraps)");
  // Three CPU scalars at once: where(c, a, b) with every operand 0-dim on the CPU.
  both(
      [] {
        return where(ops_detail::scalar_tensor(true, DType::Bool),
                     ops_detail::scalar_tensor(1.25, DType::Float32),
                     ops_detail::scalar_tensor(-2, DType::Int32));
      },
      "where of three 0-dim tensors");
}

// Rows long enough for the by-rows kernel (a program per block of the innermost dimension, outer
// offsets computed once): a bias broadcast along rows, a column broadcast, a transposed operand (a
// strided innermost dimension), three dimensions, an output of a transposed layout, a row that
// is not a multiple of the block, and three operands of three stride kinds (where).
TEST(PointwiseTiles, LongRowsRunByRowsWithEveryStrideKind) {
  const OpCase& add_case = find("add alpha");
  const auto f32 = [](std::vector<int64_t> shape) { return random_tensor(shape, DType::Float32); };
  check(add_case, DType::Float32, {f32({37, 768}), f32({768})}, "[37, 768] + bias [768]");
  check(add_case, DType::Float32, {f32({37, 1000}), f32({37, 1})}, "[37, 1000] + [37, 1]");
  check(add_case, DType::Float32, {f32({600, 37}).t(), f32({37, 600})}, "transposed + dense");
  check(add_case, DType::Float32, {f32({3, 5, 530}), f32({5, 1})}, "[3, 5, 530] + [5, 1]");
  check(add_case, DType::BFloat16,
        {random_tensor({9, 3000}, DType::BFloat16), random_tensor({3000}, DType::BFloat16)},
        "bfloat16 [9, 3000] + [3000]");
  check(find("exp"), DType::Float64,
        {random_tensor({4, 1400}, DType::Float64).slice(1, 1, 1399, 2)}, "a strided row (exp)");
  const OpCase where3{"where rows",
                      3,
                      kFloats,
                      Domain::Any,
                      Domain::Any,
                      Exact::Bits,
                      [](const std::vector<Tensor>& x) { return where(x[0] > 0, x[1], x[2]); }};
  check(where3, DType::Float32, {f32({6, 700}), f32({700}), f32({700, 6}).t()},
        "where(dense, broadcast, transposed)");
  // The output itself transposed (out= into a column-major tensor).
  Tensor a = f32({9, 600}), b = f32({600});
  Tensor out = empty({600, 9}).t(), want = empty({9, 600});
  add_out(want, a, b);
  {
    ops_detail::ScopedThroughTiles tiles;
    add_out(out, a, b);
  }
  EXPECT_TRUE(bitwise_equal(out.contiguous(), want));
}

TEST(PointwiseTiles, WhereWithBroadcastsEveryDtypeAndScalars) {
  for (DType d : {DType::Float32, DType::Float64, DType::BFloat16, DType::Int32, DType::Int8,
                  DType::UInt8, DType::Bool, DType::Float8_e4m3fn, DType::Float8_e5m2}) {
    const Tensor cond = random_tensor({4, 1, 9}, DType::Bool);
    const Tensor a = edgy({4, 6, 9}, d, Domain::Any), b = random_tensor({6, 1}, d);
    const Tensor want = where(cond, a, b);
    ops_detail::ScopedThroughTiles tiles;
    EXPECT_TRUE(bitwise_equal(where(cond, a, b), want)) << dtype_name(d);
  }
  const Tensor cond = random_tensor({50}, DType::Bool), a = random_tensor({50}, DType::Float32);
  const Tensor want = where(cond, a, 2.5);
  ops_detail::ScopedThroughTiles tiles;
  EXPECT_TRUE(bitwise_equal(where(cond, a, 2.5), want));
}

// isclose through the tile kernel: infinities, NaNs (with and without equal_nan), tolerances at
// their edge, broadcasting, every input dtype (computed in float64 as on the CPU).
TEST(PointwiseTiles, IsCloseEdgesAgreeWithTheCpu) {
  const double inf = INFINITY, nan = NAN;
  const Tensor a =
      from_vector(std::vector<double>{1, inf, -inf, inf, nan, nan, 1, 1.5, 2, 0, 1e300}, {11});
  const Tensor b = from_vector(
      std::vector<double>{1, inf, inf, 5, nan, 1, inf, 1, 2.0000001, 1e-9, -1e300}, {11});
  for (bool equal_nan : {false, true}) {
    for (double rtol : {0.0, 1e-5, 0.5}) {
      const Tensor want = isclose(a, b, rtol, 1e-8, equal_nan);
      ops_detail::ScopedThroughTiles tiles;
      EXPECT_TRUE(bitwise_equal(isclose(a, b, rtol, 1e-8, equal_nan), want))
          << "rtol=" << rtol << " equal_nan=" << equal_nan;
    }
  }
  for (DType d : {DType::Float32, DType::BFloat16, DType::Int32, DType::UInt8}) {
    const Tensor x = random_tensor({4, 1, 7}, d), y = random_tensor({5, 1}, d);
    const Tensor want = isclose(x, y, 0.3, 0.5);
    ops_detail::ScopedThroughTiles tiles;
    EXPECT_TRUE(bitwise_equal(isclose(x, y, 0.3, 0.5), want)) << dtype_name(d);
  }
}

// Integer division by zero: the CPU loops raise PyTorch's error; a tile kernel computes 0 there
// (GPU kernels raise nothing, as PyTorch's CUDA kernels) and does not trap.
TEST(PointwiseTiles, IntegerDivisionByZeroIsZeroInKernels) {
  Tensor a = from_vector(std::vector<int32_t>{7, -7, 5}, {3});
  Tensor b = from_vector(std::vector<int32_t>{0, 2, 0}, {3});
  EXPECT_NE(error_of([&] { (void)div(a, b, "floor"); }).find("ZeroDivisionError"),
            std::string::npos);
  ops_detail::ScopedThroughTiles tiles;
  const Tensor q = div(a, b, "floor"), r = remainder(a, b);
  EXPECT_TRUE(bitwise_equal(q, from_vector(std::vector<int32_t>{0, -4, 0}, {3})));
  EXPECT_TRUE(bitwise_equal(r, from_vector(std::vector<int32_t>{0, 1, 0}, {3})));
}

// ---- reductions
// ----------------------------------------------------------------------------------

struct ReduceCase {
  const char* name;
  DTypeSet dtypes;
  bool exact;  // max/min and integer sums: bit for bit; float sums: the accumulation may differ
  std::function<Tensor(const Tensor&)> fn;
};

void check_reduce(const ReduceCase& c, const Tensor& x, const std::string& what) {
  const Tensor want = c.fn(x);
  Tensor got;
  {
    ops_detail::ScopedThroughTiles tiles;
    got = c.fn(x);
  }
  const std::string label = std::string(c.name) + " " + dtype_name(x.dtype()) + " " + what;
  ASSERT_TRUE(got.sizes().equals(want.sizes())) << label;
  ASSERT_EQ(got.dtype(), want.dtype()) << label;
  if (c.exact || !is_floating_point(want.dtype())) {
    if (is_floating_point(want.dtype())) {
      EXPECT_TRUE(all_close(got.to(DType::Float64), want.to(DType::Float64), 0, 0, true)) << label;
    } else {
      EXPECT_TRUE(bitwise_equal(got, want)) << label;
    }
  } else {
    // The kernel sums float32 lanes (PyTorch's CUDA reductions do too); the CPU sums in double.
    const double tol = want.dtype() == DType::Float64   ? 1e-12
                       : want.dtype() == DType::Float32 ? 2e-5
                                                        : 1e-2;
    EXPECT_TRUE(all_close(got.to(DType::Float64), want.to(DType::Float64), tol, tol, true))
        << label;
  }
}

const std::vector<ReduceCase>& reduce_cases() {
  using T = const Tensor&;
  static const std::vector<ReduceCase> c = {
      {"sum all", kNumericAndBool, false, [](T x) { return x.sum(); }},
      {"sum dim 1", kNumericAndBool, false, [](T x) { return x.sum({1}); }},
      {"sum dims 0,2 keepdim", kNumeric, false,
       [](T x) {
         return x.sum({0, 2}, true);
       }},
      {"mean dim -1", kFloats, false, [](T x) { return x.mean({-1}); }},
      {"prod dim 0", kNumeric, false, [](T x) { return prod(x, int64_t{0}); }},
      {"amax dim 2", kNumericAndBool, true, [](T x) { return x.amax({2}); }},
      {"amin dims 0,1", kNumericAndBool, true,
       [](T x) {
         return x.amin({0, 1});
       }},
      {"var dim 1", kFloats, false, [](T x) { return var(x, {1}); }},
      {"var all, correction 0, keepdim", kFloats, false, [](T x) { return var(x, {}, 0, true); }},
      {"max all", kNumeric, true, [](T x) { return x.max(); }},
      {"min all", kNumeric, true, [](T x) { return x.min(); }},
  };
  return c;
}

void reduce_sweep(std::initializer_list<DType> dtypes) {
  for (const ReduceCase& c : reduce_cases()) {
    for (DType d : dtypes) {
      if ((c.dtypes & dtype_bit(d)) == 0) continue;
      const Domain dom = std::string_view(c.name).starts_with("prod") ? Domain::Unit : Domain::Any;
      check_reduce(c, edgy({4, 37, 9}, d, dom), "contiguous");
    }
  }
}

TEST(ReduceTiles, EveryReductionAndDtypeAgreesWithTheCpuLoopsInterpreted) {
  ScopedEnv interpret("TESSERA_INTERPRET", "1");
  reduce_sweep({DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int8,
                DType::Int32, DType::Int64, DType::UInt8, DType::Bool});
}

TEST(ReduceTiles, EveryReductionAgreesWithTheCpuLoopsCompiled) {
  reduce_sweep({DType::Float32, DType::Int32});
}

TEST(ReduceTiles, ViewsLongRowsEmptyAndNaN) {
  const ReduceCase& sum1 = reduce_cases()[1];
  const ReduceCase& amax2 = reduce_cases()[5];
  // A transposed, sliced input (no copy: the kernel reads the strided view).
  Tensor big = random_tensor({30, 3, 40}, DType::Float32);
  check_reduce(sum1, big.permute({2, 0, 1}).slice(0, 1, 39, 2), "permuted slice");
  check_reduce(amax2, big.slice(2, 0, 40, 3), "strided");
  // Rows longer than a block, and a whole-tensor sum over several blocks.
  check_reduce(reduce_cases()[0], random_tensor({3, 5000}, DType::Float32), "5000-long rows");
  check_reduce(sum1, random_tensor({2, 0, 4}, DType::Float32), "empty reduced dim");
  // NaN wins max/min wherever it is.
  Tensor x = random_tensor({2, 3, 700}, DType::Float32);
  x[1][2][650].fill_(std::nan(""));
  check_reduce(amax2, x, "NaN in a later block");
}

// Column reductions (the outputs contiguous, the reduced elements strided: a bias gradient) and
// reductions split over several programs per output (few outputs, many elements). Integer values
// in floats make every sum exact in float32, so the kernels' partial sums must agree bit for bit
// with the CPU's (a chunk read twice or dropped shows).
TEST(ReduceTiles, ColumnsAndSplitReductionsAgreeExactly) {
  const auto ints = [](IntArrayRef shape, DType d) {
    return random_tensor(shape, DType::Int32).to(d);
  };
  const auto same = [](const std::function<Tensor(const Tensor&)>& f, const Tensor& x,
                       const std::string& what) {
    const Tensor want = f(x);
    Tensor got;
    {
      ops_detail::ScopedThroughTiles tiles;
      got = f(x);
    }
    ASSERT_TRUE(got.sizes().equals(want.sizes())) << what;
    ASSERT_EQ(got.dtype(), want.dtype()) << what;
    if (is_floating_point(want.dtype())) {
      EXPECT_TRUE(all_close(got.to(DType::Float64), want.to(DType::Float64), 0, 0, true)) << what;
    } else {
      EXPECT_TRUE(bitwise_equal(got, want)) << what;
    }
  };
  using T = const Tensor&;
  const auto sum0 = [](T x) { return x.sum({0}); };
  // Columns: 3 outputs over 20000 rows (split on any machine), a bias gradient's shape, bfloat16.
  same(sum0, ints({20000, 3}, DType::Float32), "sum(0) [20000, 3]");
  same(sum0, ints({3000, 200}, DType::Float32), "sum(0) [3000, 200]");
  same(sum0, ints({700, 130}, DType::BFloat16), "sum(0) bfloat16 [700, 130]");
  same(sum0, ints({5000, 7}, DType::Int8), "sum(0) int8 [5000, 7]");
  same(sum0, random_tensor({3000, 5}, DType::Bool), "sum(0) bool [3000, 5]");
  same(
      [](T x) {
        return x.sum({0, 1});
      },
      ints({64, 70, 5}, DType::Float32), "sum(0, 1) [64, 70, 5]");
  same([](T x) { return x.sum({1}); }, ints({4, 900, 70}, DType::Float32),
       "sum(1) [4, 900, 70] (two kept dimensions)");
  same([](T x) { return x.t().sum({1}); }, ints({3000, 40}, DType::Float32), "x.t().sum(1)");
  same(sum0, ints({0, 5}, DType::Float32), "sum(0) of no rows");
  same([](T x) { return x.amax({0}); }, ints({4000, 9}, DType::Int32), "amax(0) int32");
  same([](T x) { return x.amin({0}); }, ints({4000, 9}, DType::Float32), "amin(0)");
  Tensor nan = ints({4000, 9}, DType::Float32);
  nan[3990][4].fill_(std::nan(""));
  nan[17][8].fill_(std::nan(""));
  same([](T x) { return x.amax({0}); }, nan, "amax(0), NaN in the first and last chunk");
  // Split rows: a whole-tensor sum, few long rows.
  same([](T x) { return x.sum(); }, ints({1 << 20}, DType::Float32), "sum() of 2^20");
  same([](T x) { return x.sum({1}); }, ints({3, 50000}, DType::Float32), "sum(1) [3, 50000]");
  same([](T x) { return x.sum(); }, ints({300, 300}, DType::Int64), "sum() int64");
  same([](T x) { return x.max(); }, nan, "max() with NaN");
  same([](T x) { return x.min(); }, ints({100000}, DType::Int16), "min() int16");
  // A mean divides by the whole count, not by a chunk's: within one rounding of the CPU's.
  const auto mean_of = [&](const std::function<Tensor(T)>& f, const Tensor& x, const char* what) {
    const Tensor want = f(x);
    ops_detail::ScopedThroughTiles tiles;
    EXPECT_TRUE(all_close(f(x).to(DType::Float64), want.to(DType::Float64), 1e-6, 0)) << what;
  };
  mean_of([](T x) { return x.mean(IntArrayRef{0}); }, ints({20000, 3}, DType::Float32), "mean(0)");
  mean_of([](T x) { return x.mean(); }, ints({1 << 20}, DType::Float32), "mean()");
  // Products of partial products: values near 1 so the float32 products stay finite.
  const Tensor unit = random_tensor({3000, 6}, DType::Float32, Domain::Unit) * 0.01 + 1.0;
  const Tensor want = prod(unit, int64_t{0});
  ops_detail::ScopedThroughTiles tiles;
  EXPECT_TRUE(all_close(prod(unit, int64_t{0}), want, 1e-5, 0));
}

// ---- softmax
// -------------------------------------------------------------------------------------

void check_softmax(const Tensor& x, int64_t dim, bool log, const std::string& what,
                   std::optional<DType> dtype = std::nullopt) {
  const auto f = [&] { return log ? log_softmax(x, dim, dtype) : softmax(x, dim, dtype); };
  const Tensor want = f();
  Tensor got;
  {
    ops_detail::ScopedThroughTiles tiles;
    got = f();
  }
  const DType d = want.dtype();
  const double tol = d == DType::Float64   ? 1e-12
                     : d == DType::Float32 ? 2e-5
                     : d == DType::Float16 ? 2e-3
                                           : 1.6e-2;
  ASSERT_EQ(got.dtype(), d) << what;
  EXPECT_TRUE(all_close(got.to(DType::Float64), want.to(DType::Float64), tol, tol, true))
      << (log ? "log_softmax " : "softmax ") << dtype_name(d) << " " << what;
}

TEST(SoftmaxTiles, AgreesWithTheCpuAlongEveryDimAndDtype) {
  for (const bool interp : {true, false}) {
    ScopedEnv mode("TESSERA_INTERPRET", interp ? "1" : nullptr);
    for (DType d : {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16}) {
      if (!interp && d != DType::Float32) continue;
      const Tensor x = random_tensor({5, 37, 6}, d);
      for (int64_t dim : {0, 1, -1}) {
        check_softmax(x, dim, false, "dim " + std::to_string(dim));
        check_softmax(x, dim, true, "dim " + std::to_string(dim));
      }
    }
  }
}

TEST(SoftmaxTiles, LongRowsViewsNaNAndInfinities) {
  check_softmax(random_tensor({3, 5000}, DType::Float32), 1, false, "5000-long rows");
  check_softmax(random_tensor({3, 5000}, DType::Float32), 1, true, "5000-long rows");
  const Tensor big = random_tensor({40, 30}, DType::Float32);
  check_softmax(big.t().slice(0, 2, 28, 3), 1, false, "transposed slice");
  check_softmax(random_tensor({4, 9}, DType::Int32), 1, false, "int input, dtype=", DType::Float32);
  Tensor x = random_tensor({4, 9}, DType::Float32);
  x[1][3].fill_(std::nan(""));
  x[2].fill_(-INFINITY);  // every element -inf: NaN, as on the CPU
  x[3][5].fill_(INFINITY);
  check_softmax(x, 1, false, "NaN, -inf row, +inf");
  check_softmax(x, 1, true, "NaN, -inf row, +inf");
  check_softmax(random_tensor({}, DType::Float32), 0, false, "0-dim");
}

// max/min along a dim with indices, argmax/argmin: values and the first index of the result
// (ties keep the first, a NaN wins), as the CPU loops.
TEST(ReduceTiles, IndicesOfMaxMinArgmaxArgmin) {
  for (const bool interp : {true, false}) {
    ScopedEnv mode("TESSERA_INTERPRET", interp ? "1" : nullptr);
    for (DType d : {DType::Float32, DType::Int32, DType::BFloat16, DType::UInt8}) {
      if (!interp && d != DType::Float32 && d != DType::Int32) continue;
      // Few distinct values: ties across lanes and blocks; edges (NaN, inf) for floats.
      Tensor x = edgy({6, 1300}, d, Domain::Small);
      if (is_floating_point(d)) {
        x[1][700].fill_(std::nan(""));
        x[1][1200].fill_(std::nan(""));
        x[2][5].fill_(INFINITY);
      }
      const auto [v1, i1] = max(x, 1);
      const auto [v0, i0] = min(x, 0, true);
      const Tensor a1 = argmax(x, 1), a0 = argmin(x), at = argmax(x.t());
      ops_detail::ScopedThroughTiles tiles;
      const std::string what = std::string(dtype_name(d)) + (interp ? " interpreted" : "");
      const auto [gv1, gi1] = max(x, 1);
      const auto [gv0, gi0] = min(x, 0, true);
      EXPECT_TRUE(bitwise_equal(gi1, i1)) << what;
      EXPECT_TRUE(bitwise_equal(gi0, i0)) << what;
      EXPECT_TRUE(all_close(gv1.to(DType::Float64), v1.to(DType::Float64), 0, 0, true)) << what;
      EXPECT_TRUE(all_close(gv0.to(DType::Float64), v0.to(DType::Float64), 0, 0, true)) << what;
      EXPECT_TRUE(bitwise_equal(argmax(x, 1), a1)) << what;
      EXPECT_TRUE(bitwise_equal(argmin(x), a0)) << what;
      EXPECT_TRUE(bitwise_equal(argmax(x.t()), at)) << what << " (a transposed view, no dim)";
    }
  }
}

TEST(SoftmaxTiles, CumsumAlongEveryDimIntegersExact) {
  for (const bool interp : {true, false}) {
    ScopedEnv mode("TESSERA_INTERPRET", interp ? "1" : nullptr);
    const Tensor xi = random_tensor({4, 2500, 3}, DType::Int32),
                 xf = random_tensor({4, 2500, 3}, DType::Float32);
    for (int64_t dim : {0, 1, 2}) {
      const Tensor wi = cumsum(xi, dim), wf = cumsum(xf, dim), wd = cumsum(xi, dim, DType::Float64);
      ops_detail::ScopedThroughTiles tiles;
      const std::string what = "dim " + std::to_string(dim) + (interp ? " interpreted" : "");
      EXPECT_TRUE(bitwise_equal(cumsum(xi, dim), wi)) << what;  // int64 wraps the same
      // float32 running sums over 2500 elements, the CPU's in double: near zero crossings the
      // error is absolute, about sqrt(n) * eps * |sum| (1.2e-4 seen), so atol 2e-3.
      EXPECT_TRUE(all_close(cumsum(xf, dim).to(DType::Float64), wf.to(DType::Float64), 1e-4, 2e-3))
          << what;
      EXPECT_TRUE(bitwise_equal(cumsum(xi, dim, DType::Float64), wd)) << what;  // exact in double
    }
  }
}

// ---- layer_norm and rms_norm
// ----------------------------------------------------------------------

TEST(NormTiles, LayerNormAndRmsNormAgreeWithTheCpu) {
  for (const bool interp : {true, false}) {
    ScopedEnv mode("TESSERA_INTERPRET", interp ? "1" : nullptr);
    for (DType d : {DType::Float32, DType::Float64, DType::BFloat16}) {
      if (!interp && d != DType::Float32) continue;
      const double tol = d == DType::Float64 ? 1e-12 : d == DType::Float32 ? 2e-5 : 1.6e-2;
      const Tensor x = random_tensor({6, 5, 40}, d), w = random_tensor({5, 40}, d),
                   b = random_tensor({5, 40}, d);
      const Tensor big = random_tensor({40, 6, 5}, d), rows = random_tensor({2, 3000}, d);
      const std::vector<std::pair<std::string, std::function<Tensor()>>> cases = {
          {"layer_norm last", [&] { return layer_norm(x, {40}); }},
          {"layer_norm two dims, weight, bias",
           [&] {
             return layer_norm(x, {5, 40}, w, b, 1e-3);
           }},
          {"rms_norm weight",
           [&] {
             return rms_norm(x, {5, 40}, w);
           }},
          {"layer_norm of a permuted view",
           [&] {
             return layer_norm(big.permute({1, 2, 0}), {40});
           }},
          {"layer_norm 3000-long rows", [&] { return layer_norm(rows, {3000}); }},
      };
      for (const auto& [what, f] : cases) {
        const Tensor want = f();
        Tensor got;
        {
          ops_detail::ScopedThroughTiles tiles;
          got = f();
        }
        EXPECT_TRUE(all_close(got.to(DType::Float64), want.to(DType::Float64), tol, tol, true))
            << what << " " << dtype_name(d) << (interp ? " interpreted" : "");
      }
    }
  }
}

// Offsets past int32: a kept offset and a reduced one that each fit but whose sum does not (the
// storage is reserved, not touched: only the four elements read are written).
TEST(ReduceTiles, OffsetsPastInt32UseWideIndices) {
  const int64_t row = (int64_t{3} << 29);  // 1.5 * 2^30 bytes between rows
  Tensor big = empty({2, row}, TensorOptions().dtype(DType::UInt8));
  Tensor x = big.slice(1, 0, row, int64_t{1} << 29).slice(1, 0, 2);  // [2, 2], strides (row, 2^29)
  x.fill_(7);
  x[1][1].fill_(200);
  const Tensor want = x.sum({1});
  ops_detail::ScopedThroughTiles tiles;
  EXPECT_TRUE(bitwise_equal(x.sum({1}), want));
  EXPECT_EQ(want[1].item<int64_t>(), 207);
}

// index_select, index_add and embedding through the tile kernel: every dtype, each dimension,
// negative and repeated indices, int32 indices, non-contiguous inputs; out-of-range indices are
// the CPU's IndexError (checked before the launch).
TEST(IndexTiles, IndexSelectIndexAddEmbeddingAgreeWithTheCpu) {
  const Tensor idx = from_vector(std::vector<int64_t>{2, 0, -1, 2, 4, -5, 1}, {7});
  for (DType d : {DType::Float32, DType::BFloat16, DType::Float64, DType::Int8, DType::Int32,
                  DType::Int64, DType::UInt8, DType::Bool}) {
    const Tensor x = edgy({5, 6, 5}, d, Domain::Any);
    for (int64_t dim : {0, 2}) {
      const Tensor want = index_select(x, dim, idx);
      ops_detail::ScopedThroughTiles tiles;
      EXPECT_TRUE(bitwise_equal(index_select(x, dim, idx), want)) << dtype_name(d) << " " << dim;
      EXPECT_TRUE(bitwise_equal(index_select(x.transpose(0, 2), dim, idx.to(DType::Int32)),
                                index_select(x.transpose(0, 2).contiguous(), dim, idx)))
          << dtype_name(d) << " transposed";
    }
    if (d == DType::Bool) continue;
    const Tensor src = random_tensor({5, 7, 5}, d, Domain::Small);
    const Tensor want = index_add(x, 1, idx, src, 3);
    ops_detail::ScopedThroughTiles tiles;
    const Tensor got = index_add(x, 1, idx, src, 3);
    if (is_floating_point(d)) {
      const double tol = d == DType::BFloat16 ? 2e-2 : 1e-6;
      EXPECT_TRUE(all_close(got.to(DType::Float64), want.to(DType::Float64), tol, tol, true))
          << dtype_name(d);
    } else {
      EXPECT_TRUE(bitwise_equal(got, want)) << dtype_name(d);  // integers wrap the same way
    }
  }
  const Tensor w = random_tensor({9, 4}, DType::Float32);
  const Tensor ids = from_vector(std::vector<int64_t>{8, 0, 3, 3, 8, 1}, {2, 3});
  const Tensor want = embedding(w, ids);
  ops_detail::ScopedThroughTiles tiles;
  EXPECT_TRUE(bitwise_equal(embedding(w, ids), want));
  const std::string err = error_of<IndexError>([&] { index_select(w, 0, ids.reshape({-1}) + 1); });
  EXPECT_NE(err.find("[index_select] index 9 is out of range for dimension 0 with size 9"),
            std::string::npos)
      << err;
  const std::string low = error_of<IndexError>([&] { index_select(w, 1, ids.reshape({-1}) - 9); });
  EXPECT_NE(low.find("index -9 is out of range for dimension 1 with size 4"), std::string::npos)
      << low;
}

// matmul through the tile kernel (the GPU's path without cuBLAS, and for integers): every dtype,
// vectors, broadcast batches, K = 0, sizes off the block multiples, transposed operands, out=.
TEST(MatmulTiles, AgreesWithTheCpuForEveryDtypeAndShape) {
  using Shape = std::vector<int64_t>;
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{65, 130}, {130, 67}}, {{4}, {4}},
      {{4}, {4, 19}},         {{19, 4}, {4}},
      {{2, 3, 17}, {17, 5}},  {{2, 1, 3, 4}, {5, 4, 2}},
      {{3, 0}, {0, 4}},       {{0, 4}, {4, 3}}};
  for (DType d : {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16, DType::Int8,
                  DType::Int32, DType::Int64, DType::UInt8}) {
    for (const auto& [sa, sb] : shapes) {
      const Tensor a = random_tensor(sa, d, Domain::Unit), b = random_tensor(sb, d, Domain::Unit);
      const Tensor want = matmul(a, b);
      Tensor got;
      {
        ops_detail::ScopedThroughTiles tiles;
        got = matmul(a, b);
      }
      const std::string what = std::string(dtype_name(d)) + " " + ::testing::PrintToString(sa) +
                               " @ " + ::testing::PrintToString(sb);
      ASSERT_TRUE(got.sizes().equals(want.sizes())) << what;
      if (!is_floating_point(d)) {
        EXPECT_TRUE(bitwise_equal(got, want)) << what;  // wrapping sums agree exactly
        continue;
      }
      const double tol = d == DType::Float64   ? 1e-12
                         : d == DType::Float32 ? 1e-5
                         : d == DType::Float16 ? 2e-3
                                               : 1e-2;
      EXPECT_TRUE(all_close(got.to(DType::Float64), want.to(DType::Float64), tol, tol)) << what;
    }
  }
  // Transposed operands and the out= form (int32 wraps past 2^31 the same way).
  const Tensor x = random_tensor({40, 33}, DType::Int32, Domain::Any) * 100000000;
  const Tensor y = random_tensor({21, 40}, DType::Int32, Domain::Any);
  const Tensor want = matmul(x.t(), y.t());
  Tensor out = empty({33, 21}, TensorOptions().dtype(DType::Int32));
  poison(out);
  ops_detail::ScopedThroughTiles tiles;
  matmul_out(out, x.t(), y.t());
  EXPECT_TRUE(bitwise_equal(out, want));
}

// Copies through the tile kernel (what GPU views, conversions and broadcasts run): every pair of
// dtypes bit for bit against the CPU loops, transposed and broadcast sources, strided
// destinations.
TEST(CopyTiles, EveryDtypePairViewsAndBroadcastsAgreeWithTheCpu) {
  const std::vector<DType> all = {
      DType::Bool,     DType::Int8,    DType::Int16,   DType::Int32,         DType::Int64,
      DType::UInt8,    DType::UInt16,  DType::UInt32,  DType::UInt64,        DType::Float16,
      DType::BFloat16, DType::Float32, DType::Float64, DType::Float8_e4m3fn, DType::Float8_e5m2};
  // Every pair interpreted; compiled, the pairs from five representative dtypes (each pair is a
  // kernel specialization: compiles cost CI time).
  const std::vector<DType> compiled_from = {DType::Bool, DType::Int64, DType::BFloat16,
                                            DType::Float32, DType::Float8_e4m3fn};
  for (const bool interp : {true, false}) {
    ScopedEnv mode("TESSERA_INTERPRET", interp ? "1" : nullptr);
    for (DType from : interp ? all : compiled_from) {
      const Tensor x = random_tensor({7, 9}, from);
      for (DType to : all) {
        const Tensor want = x.t().to(to);
        Tensor got;
        {
          ops_detail::ScopedThroughTiles tiles;
          got = x.t().to(to);
        }
        EXPECT_TRUE(bitwise_equal(got, want))
            << dtype_name(from) << " -> " << dtype_name(to) << (interp ? " interpreted" : "");
      }
    }
  }
  const Tensor row = random_tensor({9}, DType::Float32);
  Tensor a = zeros({4, 18}, TensorOptions().dtype(DType::BFloat16)), b = a.clone();
  a.slice(1, 0, 18, 2).copy_(row);  // broadcast into a strided view, with a conversion
  {
    ops_detail::ScopedThroughTiles tiles;
    b.slice(1, 0, 18, 2).copy_(row);
  }
  EXPECT_TRUE(bitwise_equal(b, a));
}

}  // namespace
