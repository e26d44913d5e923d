// testing::assert_close: PyTorch's checks, default tolerances and message.
#include <gtest/gtest.h>

#include <cmath>

#include "tessera/tessera.h"
#include "tessera/testing.h"
#include "testing.h"

using namespace tessera;
using tessera::testing::assert_close;
using tessera::testing::CloseOptions;
using tessera::testing::error_of;

namespace {

TEST(AssertClose, PassesWithinTheDtypesDefaultsAndSaysWhereItFails) {
  const Tensor x = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  assert_close(x, x.clone());
  assert_close(x, x + 5e-6f);  // within float32's atol 1e-5
  const Tensor y = x.clone();
  y[1][2].fill_(6.5f);
  y[0][1].fill_(2.25f);
  const std::string err = error_of<AssertionError>([&] { assert_close(y, x); });
  EXPECT_NE(err.find("Mismatched elements: 2 / 6 (33.3333%)"), std::string::npos) << err;
  EXPECT_NE(err.find("Greatest absolute difference: 0.5 at index (1, 2) (up to 1e-05 allowed)"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("Greatest relative difference: 0.125 at index (0, 1) (up to 1.3e-06"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("test_assert_close.cpp"), std::string::npos) << err;  // the caller's line
  // Looser tolerances given: passes.
  assert_close(y, x, {.rtol = 0.2, .atol = 0});
}

TEST(AssertClose, ShapeDtypeDeviceNaNAndInfinities) {
  const Tensor x = from_vector(std::vector<double>{NAN, INFINITY, -1}, {3});
  EXPECT_NE(error_of<AssertionError>([&] { assert_close(x, x.clone()); }).find("not close"),
            std::string::npos);  // NaN != NaN by default
  assert_close(x, x.clone(), {.equal_nan = true});
  const Tensor inf = from_vector(std::vector<double>{NAN, -INFINITY, -1}, {3});
  EXPECT_NE(error_of<AssertionError>([&] {
              assert_close(x, inf, {.equal_nan = true});
            }).find("Mismatched elements: 1 / 3"),
            std::string::npos);
  EXPECT_NE(error_of<AssertionError>([&] {
              assert_close(x, x.to(DType::Float32));
            }).find("the dtypes do not match: float64 != float32"),
            std::string::npos);
  assert_close(x, x.to(DType::Float32), {.equal_nan = true, .check_dtype = false});
  EXPECT_NE(error_of<AssertionError>([&] {
              assert_close(x, x.reshape({3, 1}));
            }).find("the shapes do not match: [3] != [3, 1]"),
            std::string::npos);
  EXPECT_NE(error_of<ValueError>([&] {
              assert_close(x, x, {.rtol = 1e-3});
            }).find("give both rtol and atol"),
            std::string::npos);
  // Integers are exact; a message is prepended.
  const Tensor i = arange(5);
  const std::string err =
      error_of<AssertionError>([&] { assert_close(i + 1, i, {.msg = "after the step"}); });
  EXPECT_NE(err.find("[assert_close] after the step: tensor-likes are not close"),
            std::string::npos)
      << err;
}

// make_tensor: shapes, dtypes, ranges, seeds and layouts; poison: an element a kernel skipped
// cannot pass assert_close.
TEST(MakeTensor, RangesSeedsLayoutsAndPoison) {
  using tessera::testing::make_tensor;
  using tessera::testing::MakeTensorOptions;
  for (DType d : {DType::Float32, DType::Float64, DType::Float16, DType::Int32, DType::Int8,
                  DType::UInt8, DType::Bool}) {
    const Tensor t = make_tensor({5, 7}, d);
    EXPECT_EQ(t.dtype(), d);
    EXPECT_EQ(t.dim(), 2);
    EXPECT_EQ(t.size(1).expect_int(), 7);
    const double lo = t.to(DType::Float64).min().item().to_double();
    const double hi = t.to(DType::Float64).max().item().to_double();
    if (d == DType::Bool) {
      EXPECT_GE(lo, 0);
      EXPECT_LE(hi, 1);
    } else if (d == DType::UInt8) {
      EXPECT_GE(lo, 0);
      EXPECT_LT(hi, 10);
    } else {
      EXPECT_GE(lo, -9);
      EXPECT_LE(hi, 9);
      EXPECT_LT(lo, 0) << dtype_name(d);  // 35 values: both signs drawn
    }
  }
  MakeTensorOptions o;
  o.low = 2;
  o.high = 3;
  o.seed = 42;
  const Tensor a = make_tensor({100}, DType::Float32, o);
  EXPECT_GE(a.min().item().to_double(), 2.0);
  EXPECT_LT(a.max().item().to_double(), 3.0);
  EXPECT_TRUE(equal(a, make_tensor({100}, DType::Float32, o)));  // the same seed, the same values
  o.seed = 43;
  EXPECT_FALSE(equal(a, make_tensor({100}, DType::Float32, o)));
  o.noncontiguous = true;
  const Tensor s = make_tensor({4, 6}, DType::Float32, o);
  EXPECT_FALSE(s.is_contiguous());
  EXPECT_EQ(s.stride(1), 2);
  o.low = 5;
  o.high = 5;
  EXPECT_NE(error_of<ValueError>([&] {
              (void)make_tensor({3}, DType::Float32, o);
            }).find("low 5 must be below high 5"),
            std::string::npos);
  // Poison, then a "kernel" that skips the last element: assert_close names it.
  Tensor want = make_tensor({8}, DType::Float32);
  Tensor out = empty({8});
  tessera::testing::poison(out);
  out.narrow(0, 0, 7).copy_(want.narrow(0, 0, 7));
  EXPECT_NE(error_of<AssertionError>([&] { assert_close(out, want); }).find("1 / 8"),
            std::string::npos);
  Tensor ints = empty({3}, TensorOptions().dtype(DType::Int32));
  tessera::testing::poison(ints);
  EXPECT_EQ(ints.sum().item().to_int(), -231);
}

}  // namespace
