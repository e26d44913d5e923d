// Autograd's behaviour: recording, backward, accumulation, retain_graph, no_grad, higher order,
// in-place rules and the version-counter check, each with the error a user would get.
#include <gtest/gtest.h>

#include <cmath>

#include "tessera/autograd.h"
#include "tessera/tessera.h"
#include "testing.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

Tensor leaf(std::vector<double> v, DType dt = DType::Float64) {
  return from_vector(v, {static_cast<int64_t>(v.size())}, dt).requires_grad_();
}

TEST(Autograd, LeavesAccumulateGradients) {
  Tensor w = leaf({1, -2, 3});
  EXPECT_TRUE(w.requires_grad());
  EXPECT_TRUE(w.is_leaf());
  Tensor loss = (w * w).sum();
  EXPECT_FALSE(loss.is_leaf());
  ASSERT_NE(loss.grad_fn(), nullptr);
  EXPECT_EQ(loss.grad_fn()->name(), "SumBackward");
  loss.backward(Tensor(), /*retain_graph=*/true);
  EXPECT_TRUE(all_close(w.grad(), from_vector(std::vector<double>{2, -4, 6})));
  loss.backward();  // accumulates
  EXPECT_TRUE(all_close(w.grad(), from_vector(std::vector<double>{4, -8, 12})));
  EXPECT_NE(error_of([&] { loss.backward(); }).find("second time"), std::string::npos);
}

TEST(Autograd, GradientsMeetAndSplitAcrossTheGraph) {
  Tensor x = leaf({0.5, 1.5});
  Tensor a = x.exp();
  Tensor y = (a * x + a.sin() - x).sum();  // x used three times, a twice
  y.backward();
  const Tensor xd = x.detach();
  Tensor want = xd.exp() * xd + xd.exp() + xd.exp().cos() * xd.exp() - 1;
  EXPECT_TRUE(all_close(x.grad(), want, 1e-12, 1e-12));
}

TEST(Autograd, NoGradRecordsNothing) {
  Tensor x = leaf({1, 2});
  Tensor y;
  {
    NoGradGuard g;
    y = x * 2;
  }
  EXPECT_FALSE(y.requires_grad());
  EXPECT_EQ(y.grad_fn(), nullptr);
  Tensor z = x.detach() * 2;
  EXPECT_FALSE(z.requires_grad());
}

TEST(Autograd, IntegerResultsDoNotRequireGrad) {
  Tensor x = leaf({3, 1, 2});
  auto [v, i] = max(x.view({1, 3}), 1);
  EXPECT_TRUE(v.requires_grad());
  EXPECT_FALSE(i.requires_grad());
  EXPECT_FALSE((x > 1).requires_grad());
  EXPECT_FALSE(argmax(x).requires_grad());
}

TEST(Autograd, GradReturnsWithoutAccumulating) {
  Tensor x = leaf({1, 2, 3}), u = leaf({4});
  Tensor y = (x * x * x).sum();
  auto g = autograd::grad({y}, {x});
  EXPECT_TRUE(all_close(g[0], from_vector(std::vector<double>{3, 12, 27})));
  EXPECT_FALSE(x.grad().defined());
  EXPECT_NE(error_of([&] {
              autograd::grad({(x * 2).sum()}, {x, u});
            }).find("allow_unused"),
            std::string::npos);
  auto g2 = autograd::grad({(x * 2).sum()}, {x, u}, {}, false, false, /*allow_unused=*/true);
  EXPECT_FALSE(g2[1].defined());
}

TEST(Autograd, SecondDerivativesWithCreateGraph) {
  Tensor x = leaf({0.5, -1.0, 2.0});
  Tensor y = (x * x * x).sum();
  auto g = autograd::grad({y}, {x}, {}, false, /*create_graph=*/true);
  EXPECT_TRUE(g[0].requires_grad());
  auto h = autograd::grad({g[0].sum()}, {x});
  EXPECT_TRUE(all_close(h[0], x.detach() * 6));
  // Through saved results too: d2/dx2 exp(x) = exp(x).
  Tensor z = x.exp().sum();
  auto gz = autograd::grad({z}, {x}, {}, false, true);
  auto hz = autograd::grad({gz[0].sum()}, {x});
  EXPECT_TRUE(all_close(hz[0], x.detach().exp()));
}

TEST(Autograd, NonScalarOutputsNeedAGradient) {
  Tensor x = leaf({1, 2});
  Tensor y = x * 3;
  EXPECT_NE(error_of([&] { y.backward(); }).find("single-element"), std::string::npos);
  y.backward(from_vector(std::vector<double>{1, 10}));
  EXPECT_TRUE(all_close(x.grad(), from_vector(std::vector<double>{3, 30})));
  EXPECT_NE(error_of([&] { (x.detach() * 2).sum().backward(); }).find("does not require grad"),
            std::string::npos);
}

TEST(Autograd, RequiresGradRules) {
  Tensor i = arange(3);
  EXPECT_NE(error_of<DTypeError>([&] { i.requires_grad_(); }).find("floating-point"),
            std::string::npos);
  Tensor x = leaf({1});
  Tensor y = x * 2;
  EXPECT_NE(error_of([&] { y.requires_grad_(false); }).find("detach"), std::string::npos);
  Tensor z = zeros({2}, TensorOptions().requires_grad(true));
  EXPECT_TRUE(z.requires_grad());
  EXPECT_TRUE(z.is_leaf());
}

TEST(Autograd, SavedTensorModifiedInPlaceIsAnError) {
  Tensor x = leaf({1, 2});
  Tensor a = x * 1;      // a non-leaf
  Tensor y = mul(a, a);  // saves a (the function form takes the caller's line; operators cannot)
  const int line = __LINE__ - 1;
  a.add_(1);  // bumps a's version
  const std::string msg = error_of([&] { y.sum().backward(); });
  EXPECT_NE(msg.find("aten::mul.Tensor"), std::string::npos) << msg;
  EXPECT_NE(msg.find("modified by an in-place operation"), std::string::npos) << msg;
  EXPECT_NE(msg.find("version 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("test_engine.cpp:" + std::to_string(line)), std::string::npos) << msg;
}

TEST(Autograd, InPlaceOnLeavesAndViewsIsRefused) {
  Tensor x = leaf({1, 2});
  EXPECT_NE(error_of([&] { x.mul_(2); }).find("leaf tensor that requires grad"), std::string::npos);
  Tensor v = (x * 1).narrow(0, 0, 1);
  EXPECT_NE(error_of<NotImplementedError>([&] { v.add_(1); }).find("views"), std::string::npos);
  Tensor out = empty({2}, TensorOptions().dtype(DType::Float64));
  EXPECT_NE(error_of([&] { add_out(out, x, x); }).find("out= arguments"), std::string::npos);
  {
    NoGradGuard g;  // allowed without recording
    x.mul_(2);
  }
  EXPECT_TRUE(all_close(x.detach(), from_vector(std::vector<double>{2, 4})));
}

TEST(Autograd, InPlaceOnIntermediatesIsDifferentiated) {
  Tensor x = leaf({1, 2, 3}), w = leaf({0.5, 0.25, 2});
  Tensor a = x * 2;
  a.mul_(w);  // a = 2 x w
  a.add_(x);  // a = 2 x w + x
  a.sum().backward();
  EXPECT_TRUE(all_close(x.grad(), w.detach() * 2 + 1));
  EXPECT_TRUE(all_close(w.grad(), x.detach() * 2));
  // copy_ into an intermediate routes the gradient to the source only.
  Tensor b = x * 3, src = leaf({7, 8, 9});
  b.copy_(src * 2);
  b.sum().backward();
  EXPECT_TRUE(all_close(src.grad(), full({3}, 2.0, TensorOptions().dtype(DType::Float64))));
}

TEST(Autograd, BroadcastGradientsAreSummedBackAndCastToTheInputDtype) {
  Tensor a = leaf({1, 2, 3});  // [3]
  Tensor b =
      randn({2, 1}, TensorOptions().dtype(DType::Float32)).requires_grad_();  // [2, 1], float32
  Tensor y = (a * b).sum();
  y.backward();
  ASSERT_TRUE(b.grad().sizes().equals(b.sizes()));
  EXPECT_EQ(b.grad().dtype(), DType::Float32);
  EXPECT_NEAR(b.grad().sum().item<double>(), 12.0, 1e-6);
  EXPECT_TRUE(all_close(a.grad(), b.detach().sum().to(DType::Float64).expand({3})));
}

TEST(Autograd, BackwardOpsGoThroughDispatchModes) {
  struct Counter : DispatchMode {
    int backward_muls = 0;
    void handle(const OperatorHandle& op, Stack& s) override {
      if (op.name() == "aten::mul.Tensor" && autograd::in_backward()) ++backward_muls;
      op.redispatch(s);
    }
  } counter;
  Tensor x = leaf({1, 2}), y = leaf({3, 4});
  Tensor z = (x * y).sum();
  {
    ModeGuard g(&counter, ModeKind::Dispatch);
    z.backward();
  }
  EXPECT_EQ(counter.backward_muls, 2);  // one per input of the forward mul
}

}  // namespace
