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

}  // namespace
