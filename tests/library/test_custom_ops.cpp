// User operators (torch.library's custom_op / triton_op / wrap_triton behaviours, after
// PyTorch's test_custom_ops.py): schema inference, both call forms, per-device kernels and their
// fallback, fake kernels, autograd through user formulas (including a backward that calls
// another triton_op), wrapper tensor types, and every registration error.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

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
  EXPECT_TRUE(all_close(mysin()(x), x.sin(), 1e-6, 1e-6));
  EXPECT_TRUE(all_close(ops("testlib::mysin")(x).to_tensor(), x.sin(), 1e-6, 1e-6));
  EXPECT_TRUE(
      all_close(ops("testlib::mysin.default")(kw("x", x)).to_tensor(), x.sin(), 1e-6, 1e-6));
  EXPECT_TRUE(get_op("testlib::mysin").has_tag(kTagTritonOp));
}

TEST(CustomOps, TrainingThroughABackwardThatCallsAnotherTritonOp) {
  Tensor x = randn({300}, TensorOptions().dtype(DType::Float64)).requires_grad_();
  Tensor y = mysin()(x);
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(y.grad_fn()->name(), "testlib::mysinBackward");
  y.sum().backward();
  EXPECT_TRUE(all_close(x.grad(), x.detach().cos(), 1e-12, 1e-12));
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

TEST(CustomOps, OptionsFirstTritonOpAndCustomOp) {
  // The decorator form's order: name, options, function.
  static auto op = library::triton_op(
      "testlib::scale_opts_first", {.arg_names = {"x", "s"}}, [](const Tensor& x, double s) {
        Tensor out = empty_like(x);
        auto n = x.numel();
        library::wrap_triton(scale_kernel)[{tl::cdiv(n, 32)}](x, out, s, n, tl::meta("BLOCK", 32));
        return out;
      });
  EXPECT_EQ(op.schema().str(), "testlib::scale_opts_first(Tensor x, float s) -> Tensor");
  EXPECT_TRUE(get_op("testlib::scale_opts_first").has_tag(kTagTritonOp));
  Tensor x = randn({100});
  EXPECT_TRUE(all_close(op(x, 2.5), x * 2.5));
  EXPECT_TRUE(
      all_close(ops("testlib::scale_opts_first")(kw("s", -1.0), kw("x", x)).to_tensor(), -x));
  auto c = library::custom_op("testlib::opts_first_custom",
                              {.mutates_args = {"out"}, .arg_names = {"x", "out"}},
                              [](const Tensor& x, const Tensor& out) { Tensor(out).copy_(x * 2); });
  EXPECT_EQ(c.schema().str(), "testlib::opts_first_custom(Tensor x, Tensor(a!) out) -> ()");
  Tensor out = zeros({100});
  c(x, out);
  EXPECT_TRUE(all_close(out, x * 2));
  EXPECT_FALSE(get_op("testlib::opts_first_custom").has_tag(kTagTritonOp));
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
  // By name, positionally: the tuple's values.
  IValue t = ops("testlib::many")(x, 0, 1.0, false, IValue(), std::vector<Tensor>{}, "pos",
                                  std::vector<int64_t>{0});
  ASSERT_TRUE(t.is_tuple());
  EXPECT_TRUE(equal(t.to_tuple()[0].to_tensor(), x));
  EXPECT_TRUE(equal(t.to_tuple()[1].to_tensor(), full({3}, 2.0)));
}

TEST(CustomOps, KeywordArgumentsAndDefaultsByName) {
  auto op = library::custom_op(
      "testlib::affine_kw",
      [](const Tensor& x, int64_t k, double s, bool neg) {
        Tensor r = x * s + static_cast<double>(k);
        return neg ? -r : r;
      },
      {.schema = "testlib::affine_kw(Tensor x, int k=2, float s=1.5, bool neg=False) -> Tensor"});
  EXPECT_EQ(op.schema().str(),
            "testlib::affine_kw(Tensor x, int k=2, float s=1.5, bool neg=False) -> Tensor");
  Tensor x = arange(4).to(DType::Float32);
  auto call = ops("testlib::affine_kw");
  EXPECT_TRUE(equal(call(x).to_tensor(), x * 1.5 + 2));              // every default
  EXPECT_TRUE(equal(call(x, kw("s", 3.0)).to_tensor(), x * 3 + 2));  // one keyword, others default
  EXPECT_TRUE(equal(call(x, 5, kw("neg", true)).to_tensor(), -(x * 1.5 + 5)));
  EXPECT_TRUE(equal(call(kw("neg", true), kw("x", x), kw("k", 0), kw("s", 2.0)).to_tensor(),
                    -(x * 2)));  // keywords in any order
  const std::string msg = error_of<TypeError>([&] { call(x, kw("scale", 2.0)); });
  EXPECT_NE(msg.find("scale"), std::string::npos) << msg;
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
  EXPECT_TRUE(all_close(out, x * 0.5));
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
  EXPECT_TRUE(all_close(a.grad(), b));
}

TEST(CustomOps, WrapperTensorTypesSeeTritonOps) {
  Tensor base = randn({50});
  Tensor x = TwoTensor::make(base, base * 2);
  Tensor y = mysin()(x);
  auto* w = wrapper_cast<TwoTensor>(y);
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(all_close(w->a_, base.sin(), 1e-6, 1e-6));
  EXPECT_TRUE(all_close(w->b_, (base * 2).sin(), 1e-6, 1e-6));
}

TEST(CustomOps, AKernelLaunchIsAnOperatorThatModesAndWrapperTypesSee) {
  // Launched directly (no custom op around it) on a wrapper type: the launch is dispatched as
  // tessera::kernel_launch and the wrapper runs it on both halves.
  Tensor a = randn({50}), b = randn({50});
  Tensor x = TwoTensor::make(a, b);
  Tensor out = TwoTensor::make(zeros({50}), zeros({50}));
  auto n = int64_t{50};
  sin_kernel[{tl::cdiv(n, 64)}](x, out, n, tl::meta("BLOCK_SIZE", 64));
  auto* w = wrapper_cast<TwoTensor>(out);
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(all_close(w->a_, a.sin(), 1e-6, 1e-6));
  EXPECT_TRUE(all_close(w->b_, b.sin(), 1e-6, 1e-6));
  // A dispatch mode sees the launch as an operator call, with its tensors.
  struct Seen : DispatchMode {
    int launches = 0;
    size_t tensors = 0;
    void handle(const OperatorHandle& op, Stack& s) override {
      if (op.name() == "tessera::kernel_launch") {
        ++launches;
        tensors = s.back().to_tensor_list().size();
      }
      op.redispatch(s);
    }
  } seen;
  Tensor y = empty({50});
  {
    ModeGuard g(&seen, ModeKind::Dispatch);
    sin_kernel[{tl::cdiv(n, 64)}](a, y, n, tl::meta("BLOCK_SIZE", 64));
  }
  EXPECT_EQ(seen.launches, 1);
  EXPECT_EQ(seen.tensors, 2u);
  EXPECT_TRUE(all_close(y, a.sin(), 1e-6, 1e-6));
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
  // The fallback computes what the kernel computes, so which one ran is observed by counting.
  static int kernel_calls = 0, fallback_calls = 0;
  auto op = library::triton_op("testlib::mysin_fallback", [](const Tensor& x) {
    ++kernel_calls;
    return launch_unary(sin_kernel, x);
  });
  Tensor x = randn({3});
  EXPECT_TRUE(all_close(op(x), x.sin()));
  EXPECT_EQ(kernel_calls, 1);
  op.register_kernel("cpu", [](const Tensor& x) {
    ++fallback_calls;
    return tessera::sin(x);
  });
  EXPECT_TRUE(all_close(op(x), x.sin()));
  EXPECT_EQ(fallback_calls, 1);
  EXPECT_EQ(kernel_calls, 1);
  op.set_kernel_enabled("cpu", false);  // back to the triton_op's body
  EXPECT_TRUE(all_close(op(x), x.sin()));
  EXPECT_EQ(fallback_calls, 1);
  EXPECT_EQ(kernel_calls, 2);
}

TEST(CustomOps, RegistrationWhileOtherThreadsDispatch) {
  // Kernels are replaced while four threads call the operator: every call runs one whole kernel
  // (never a mix of two, never a freed one).
  auto op = library::custom_op("testlib::swapped", [](const Tensor& x) { return x * 2; },
                               {.arg_names = {"x"}});
  // Each kernel owns its factor; a kernel that is destroyed poisons it first, so a call that
  // runs a kernel freed under it (or a torn kernel record) computes a wrong value.
  struct Factor {
    double v;
    ~Factor() { v = -1; }
  };
  auto make = [](double k) {
    auto factor = std::make_shared<Factor>(Factor{k});
    return [factor](const Tensor& x) {
      const double f = factor->v;
      std::this_thread::yield();  // widen the window in which the kernel may be replaced
      return x * (f == factor->v ? f : -1.0);
    };
  };
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0}, calls{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      Tensor x = ones({1});
      while (!stop.load()) {
        const double v = op(x).item<double>();
        if (v != 2 && v != 3 && v != 5) ++bad;
        ++calls;
      }
    });
  }
  while (calls.load() == 0) std::this_thread::yield();
  // Register while the callers run: until they made 20000 calls (or 3 s passed).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  for (int i = 0; calls.load() < 20000 && std::chrono::steady_clock::now() < deadline; ++i) {
    op.register_kernel("cpu", make(i % 2 ? 3.0 : 5.0));
    if (i % 7 == 0) op.set_kernel_enabled("cpu", false);
    if (i % 50 == 0) {
      op.register_autograd([](autograd::AutogradContext&, const Tensor& g) { return g; });
    }
    std::this_thread::yield();
  }
  stop = true;
  for (auto& th : callers) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GE(calls.load(), 20000);
}

}  // namespace
