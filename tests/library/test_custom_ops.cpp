// User operators (torch.library's custom_op / triton_op / wrap_triton behaviours, after
// PyTorch's test_custom_ops.py): schema inference, both call forms, per-device kernels and their
// fallback, fake kernels, autograd through user formulas (including a backward that calls
// another triton_op), wrapper tensor types, and every registration error.
#include <gtest/gtest.h>

#include "tessera/library.h"
#include "tessera/tessera.h"
#include "testing.h"

using namespace tessera;
using namespace tessera::testing;
namespace tl = tessera::tl;

namespace {

TL_JIT(sin_kernel, tl::Ptr in_ptr0, tl::Ptr out_ptr, tl::Int n_elements, tl::Const BLOCK_SIZE) {
  auto pid = tl::program_id(0);
  auto offsets = pid * BLOCK_SIZE + tl::arange(0, BLOCK_SIZE);
  auto mask = offsets < n_elements;
  auto x = tl::load(in_ptr0 + offsets, mask);
  tl::store(out_ptr + offsets, tl::sin(x), mask);
}

TL_JIT(cos_kernel, tl::Ptr in_ptr0, tl::Ptr out_ptr, tl::Int n_elements, tl::Const BLOCK_SIZE) {
  auto pid = tl::program_id(0);
  auto offsets = pid * BLOCK_SIZE + tl::arange(0, BLOCK_SIZE);
  auto mask = offsets < n_elements;
  auto x = tl::load(in_ptr0 + offsets, mask);
  tl::store(out_ptr + offsets, tl::cos(x), mask);
}

TL_JIT(scale_kernel, tl::Ptr x, tl::Ptr out, tl::Float s, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = offs < n;
  tl::store(out + offs, tl::load(x + offs, m) * s, m);
}

Tensor launch_unary(const tl::JITFunction& k, const Tensor& x) {
  Tensor out = empty_like(x);
  auto n = x.numel();
  auto grid = [&](const tl::Meta& meta) { return tl::Grid{tl::cdiv(n, meta["BLOCK_SIZE"])}; };
  library::wrap_triton(k)[grid](x, out, n, tl::meta("BLOCK_SIZE", 64));
  return out;
}

// The seed's operators, defined once for the whole test binary.
auto& mycos() {
  static auto op = library::triton_op("testlib::mycos",
                                      [](const Tensor& x) { return launch_unary(cos_kernel, x); },
                                      {.arg_names = {"x"}});
  return op;
}
auto& mysin() {
  static auto op = [] {
    auto o = library::triton_op("testlib::mysin",
                                [](const Tensor& x) { return launch_unary(sin_kernel, x); },
                                {.arg_names = {"x"}});
    o.register_autograd([](autograd::AutogradContext& ctx,
                           const Tensor& grad) { return grad * mycos()(ctx.saved(0)); },
                        [](autograd::AutogradContext& ctx, const Tensor& x, const Tensor&) {
                          ctx.save_for_backward({x});
                        });
    return o;
  }();
  return op;
}

TEST(CustomOps, TritonOpBothCallForms) {
  Tensor x = randn({1000});
  EXPECT_EQ(mysin().schema().str(), "testlib::mysin(Tensor x) -> Tensor");
  EXPECT_TRUE(allclose(mysin()(x), x.sin(), 1e-6, 1e-6));
  EXPECT_TRUE(allclose(ops("testlib::mysin")(x).to_tensor(), x.sin(), 1e-6, 1e-6));
  EXPECT_TRUE(allclose(ops("testlib::mysin.default")(kw("x", x)).to_tensor(), x.sin(), 1e-6, 1e-6));
  EXPECT_TRUE(get_op("testlib::mysin").has_tag(kTagTritonOp));
}

TEST(CustomOps, TrainingThroughABackwardThatCallsAnotherTritonOp) {
  Tensor x = randn({300}, TensorOptions().dtype(DType::Float64)).requires_grad_();
  Tensor y = mysin()(x);
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(y.grad_fn()->name(), "testlib::mysinBackward");
  y.sum().backward();
  EXPECT_TRUE(allclose(x.grad(), x.detach().cos(), 1e-12, 1e-12));
  // Counting ops in the backward: the backward's mycos is visible to dispatch modes.
  struct Seen : DispatchMode {
    int mycos = 0;
    void handle(const OperatorHandle& op, Stack& s) override {
      if (op.name() == "testlib::mycos" && autograd::in_backward()) ++mycos;
      op.redispatch(s);
    }
  } seen;
  Tensor z = mysin()(x).sum();
  {
    ModeGuard g(&seen, ModeKind::Dispatch);
    z.backward();
  }
  EXPECT_EQ(seen.mycos, 1);
  EXPECT_TRUE(autograd::gradcheck(
      [](const std::vector<Tensor>& v) { return std::vector<Tensor>{mysin()(v[0])}; },
      {randn({7}, TensorOptions().dtype(DType::Float64)).requires_grad_()}));
}

TEST(CustomOps, RegisterKernelOverridesADeviceAndCanBeDisabled) {
  auto op = library::custom_op("testlib::twice", [](const Tensor& x) { return x * 2; });
  Tensor x = arange(4).to(DType::Float32);
  EXPECT_TRUE(equal(op(x), x * 2));
  op.register_kernel("cpu", [](const Tensor& t) { return t * 3; });
  EXPECT_TRUE(equal(op(x), x * 3));
  op.set_kernel_enabled("cpu", false);
  EXPECT_TRUE(equal(op(x), x * 2));
  op.set_kernel_enabled("cpu", true);
  EXPECT_TRUE(equal(op(x), x * 3));
  EXPECT_NE(error_of<ValueError>([&] {
              op.register_kernel("tpu", [](const Tensor& t) { return t; });
            }).find("tpu"),
            std::string::npos);
  EXPECT_NE(error_of<TypeError>([&] {
              op.register_kernel("cpu", [](const Tensor& t, int64_t) { return t; });
            }).find("does not match the schema"),
            std::string::npos);
}

TEST(CustomOps, FakeKernels) {
  Tensor m = empty({5, 3}, TensorOptions().device(Device("meta")));
  // A triton_op's body is its own fake kernel: launches on meta tensors do nothing.
  Tensor r = mysin()(m);
  EXPECT_TRUE(r.is_meta());
  EXPECT_TRUE(r.sizes().equals(m.sizes()));
  // A custom_op needs register_fake.
  auto op = library::custom_op("testlib::rowsum", [](const Tensor& x) { return x.sum({1}); },
                               {.arg_names = {"x"}});
  EXPECT_NE(error_of<NotImplementedError>([&] { op(m); }).find("testlib::rowsum"),
            std::string::npos);
  op.register_fake(
      [](const Tensor& x) { return empty({x.sizes()[0]}, TensorOptions().device(x.device())); });
  Tensor f = op(m);
  EXPECT_TRUE(f.is_meta());
  EXPECT_EQ(f.sizes()[0], 5);
}

TEST(CustomOps, SchemaInferenceCoversTheArgumentTypes) {
  auto op = library::custom_op(
      "testlib::many",
      [](const Tensor& x, int64_t k, double s, bool flag, std::optional<Tensor> bias,
         std::vector<Tensor> extra, std::string mode, std::vector<int64_t> dims) {
        Tensor r = x * s + static_cast<double>(k);
        if (bias) r = r + *bias;
        for (const auto& e : extra) r = r + e;
        if (flag && mode == "neg") r = -r;
        return std::make_tuple(r, r.sum(dims));
      },
      {.arg_names = {"x", "k", "s", "flag", "bias", "extra", "mode", "dims"}});
  EXPECT_EQ(op.schema().str(),
            "testlib::many(Tensor x, int k, float s, bool flag, Tensor? bias, Tensor[] extra, str "
            "mode, int[] dims) -> "
            "(Tensor, Tensor)");
  Tensor x = ones({2, 3});
  auto [r, s] = op(x, 2, 3.0, true, zeros({3}), std::vector<Tensor>{ones({2, 3})}, "neg",
                   std::vector<int64_t>{1});
  EXPECT_TRUE(equal(r, full({2, 3}, -6.0)));
  EXPECT_TRUE(equal(s, full({2}, -18.0)));
  // By name with keyword arguments and defaults filled from the schema.
  IValue t = ops("testlib::many")(x, 0, 1.0, false, IValue(), std::vector<Tensor>{}, "pos",
                                  std::vector<int64_t>{0});
  EXPECT_TRUE(t.is_tensor_list() || t.is_tuple());
}

TEST(CustomOps, MutatingOperators) {
  auto op = library::triton_op("testlib::scale_into",
                               [](const Tensor& x, const Tensor& out, double s) {
                                 auto n = x.numel();
                                 library::wrap_triton(scale_kernel)[{tl::cdiv(n, 32)}](
                                     x, out, s, n, tl::meta("BLOCK", 32));
                               },
                               {.mutates_args = {"out"}, .arg_names = {"x", "out", "s"}});
  EXPECT_EQ(op.schema().str(), "testlib::scale_into(Tensor x, Tensor(a!) out, float s) -> ()");
  Tensor x = arange(10).to(DType::Float32), out = zeros({10});
  const uint32_t v = out.version();
  op(x, out, 0.5);
  EXPECT_TRUE(allclose(out, x * 0.5));
  EXPECT_GT(out.version(), v);
  EXPECT_NE(error_of<ValueError>([&] {
              op.register_autograd([](autograd::AutogradContext&, const Tensor& g) { return g; });
            }).find("writes 'out'"),
            std::string::npos);
}

TEST(CustomOps, RegistrationErrors) {
  auto make = [] { return library::custom_op("testlib::dup", [](const Tensor& x) { return x; }); };
  make();
  EXPECT_NE(error_of<ValueError>(make).find("already defined"), std::string::npos);
  EXPECT_NE(error_of<ValueError>([] {
              library::custom_op("testlib::bad_mut", [](const Tensor& x) { return x.clone(); },
                                 {.mutates_args = {"y"}, .arg_names = {"x"}});
            }).find("'y', which is not an argument"),
            std::string::npos);
  EXPECT_NE(error_of<ValueError>([] {
              library::custom_op("testlib::bad_mut2",
                                 [](const Tensor& x, int64_t) { return x.clone(); },
                                 {.mutates_args = {"k"}, .arg_names = {"x", "k"}});
            }).find("not a Tensor"),
            std::string::npos);
  EXPECT_NE(error_of<ValueError>([] {
              library::custom_op("aten::mine", [](const Tensor& x) { return x; });
            }).find("reserved"),
            std::string::npos);
  EXPECT_NE(error_of<ValueError>([] {
              library::custom_op("nonamespace", [](const Tensor& x) { return x; });
            }).find("namespace::name"),
            std::string::npos);
  EXPECT_NE(error_of<TypeError>([] {
              library::custom_op("testlib::wrong_schema", [](const Tensor& x) { return x; },
                                 {.schema = "testlib::wrong_schema(Tensor x, int k) -> Tensor"});
            }).find("does not match the schema"),
            std::string::npos);
}

TEST(CustomOps, WrongGradientCountAndShapeAreErrorsAtBackward) {
  auto two = library::custom_op("testlib::grad_count", [](const Tensor& x) { return x * 1; },
                                {.arg_names = {"x"}});
  two.register_autograd([](autograd::AutogradContext&, const Tensor& g) {
    return std::vector<Tensor>{g, g};
  });
  Tensor x = randn({3}).requires_grad_();
  const std::string msg = error_of<ValueError>([&] { two(x).sum().backward(); });
  EXPECT_NE(msg.find("testlib::grad_count"), std::string::npos) << msg;
  EXPECT_NE(msg.find("returned 2 gradients, expected 1"), std::string::npos) << msg;

  auto shape = library::custom_op("testlib::grad_shape", [](const Tensor& x) { return x * 1; },
                                  {.arg_names = {"x"}});
  shape.register_autograd([](autograd::AutogradContext&, const Tensor& g) { return g.sum(); });
  EXPECT_NE(error_of<ValueError>([&] {
              shape(x).sum().backward();
            }).find("of shape [] for argument 'x' of shape [3]"),
            std::string::npos);

  auto none = library::custom_op("testlib::no_formula", [](const Tensor& x) { return x * 1; });
  Tensor y = none(x);
  EXPECT_TRUE(y.requires_grad());  // the error comes when a gradient is needed
  EXPECT_NE(error_of<NotImplementedError>([&] { y.sum().backward(); }).find("register_autograd"),
            std::string::npos);
}

TEST(CustomOps, BoxedSetupAndNeedsInputGrad) {
  auto op =
      library::custom_op("testlib::mul2", [](const Tensor& a, const Tensor& b) { return a * b; },
                         {.arg_names = {"a", "b"}});
  std::vector<bool> seen;
  op.register_autograd(
      [&](autograd::AutogradContext& ctx, const std::vector<Tensor>& g) {
        seen = {ctx.needs_input_grad(0), ctx.needs_input_grad(1)};
        auto s = ctx.saved_tensors();
        return std::vector<IValue>{ctx.needs_input_grad(0) ? IValue(g[0] * s[1]) : IValue(),
                                   ctx.needs_input_grad(1) ? IValue(g[0] * s[0]) : IValue()};
      },
      [](autograd::AutogradContext& ctx, const Stack& in, const Stack&) {
        ctx.save_for_backward({in[0].to_tensor(), in[1].to_tensor()});
      });
  Tensor a = randn({4}).requires_grad_(), b = randn({4});
  op(a, b).sum().backward();
  EXPECT_EQ(seen, (std::vector<bool>{true, false}));
  EXPECT_TRUE(allclose(a.grad(), b));
}

TEST(CustomOps, WrapperTensorTypesSeeTritonOps) {
  Tensor base = randn({50});
  Tensor x = TwoTensor::make(base, base * 2);
  Tensor y = mysin()(x);
  auto* w = wrapper_cast<TwoTensor>(y);
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(allclose(w->a_, base.sin(), 1e-6, 1e-6));
  EXPECT_TRUE(allclose(w->b_, (base * 2).sin(), 1e-6, 1e-6));
}

TEST(CustomOps, DeviceTypesRestrictTheFunction) {
  auto op = library::custom_op("testlib::cuda_only", [](const Tensor& x) { return x + 1; },
                               {.device_types = {"cuda"}, .arg_names = {"x"}});
  const std::string msg = error_of<NotImplementedError>([&] { op(zeros({2})); });
  EXPECT_NE(msg.find("testlib::cuda_only"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'cpu'"), std::string::npos) << msg;
  op.register_kernel("cpu", [](const Tensor& x) { return x + 2; });
  EXPECT_TRUE(equal(op(zeros({2})), full({2}, 2.0)));
}

TEST(CustomOps, CpuFallbackOfTheSeed) {
  auto op = library::triton_op("testlib::mysin_fallback",
                               [](const Tensor& x) { return launch_unary(sin_kernel, x); });
  op.register_kernel("cpu", [](const Tensor& x) { return tessera::sin(x); });
  Tensor x = randn({3});
  EXPECT_TRUE(allclose(op(x), x.sin()));
}

}  // namespace
