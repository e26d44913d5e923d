// Training under compile (issue 17): with grad enabled and an input (or a closed-over tensor)
// that requires grad, the forward and its backward are traced as one joint graph below autograd
// and split; the backward formulas (a triton_op's registered backward included) run as a compiled
// graph through one CompiledFunctionBackward node. Gradients are compared with eager autograd and
// with float64 references on fresh random inputs; the backward's allocations are poisoned.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "backend/cpu/toolchain.h"
#include "compile_testing.h"
#include "tessera/autograd.h"
#include "tessera/compile.h"
#include "tessera/library.h"
#include "tessera/tessera.h"
#include "tessera/testing.h"
#include "testing.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

TL_JIT(train_sin_kernel, tl::Ptr x, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto mask = offs < n;
  tl::store(out + offs, tl::sin(tl::load(x + offs, mask)), mask);
}

TL_JIT(train_cos_kernel, tl::Ptr x, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto mask = offs < n;
  tl::store(out + offs, tl::cos(tl::load(x + offs, mask)), mask);
}

Tensor leaf(std::vector<SymInt> sizes, DType dtype = DType::Float64) {
  return randn(sizes, TensorOptions().dtype(dtype)).requires_grad_();
}

Tensor fresh(const Tensor& t) {
  return t.detach().clone().requires_grad_();
}

// The seed's operators: mysin whose registered backward calls the mycos triton_op.
auto& mycos() {
  static auto op = library::triton_op("trainlib::mycos", [](const Tensor& x) {
    Tensor out = empty_like(x);
    auto n = x.numel();
    library::wrap_triton(train_cos_kernel)[{tl::cdiv(n, 16)}](x, out, n, tl::meta("BLOCK", 16));
    return out;
  });
  return op;
}

auto& mysin() {
  static auto op = [] {
    auto o = library::triton_op("trainlib::mysin", [](const Tensor& x) {
      Tensor out = empty_like(x);
      auto n = x.numel();
      library::wrap_triton(train_sin_kernel)[{tl::cdiv(n, 16)}](x, out, n, tl::meta("BLOCK", 16));
      return out;
    });
    o.register_autograd([](autograd::AutogradContext& ctx,
                           const Tensor& grad) { return grad * mycos()(ctx.saved(0)); },
                        [](autograd::AutogradContext& ctx, const Tensor& x, const Tensor&) {
                          ctx.save_for_backward({x});
                        });
    return o;
  }();
  return op;
}

}  // namespace

TEST(CompileTraining, TheSeedsMysinTrainsWithItsMycosBackwardCompiled) {
  auto fn = [](const Tensor& x) { return mysin()(x * 2).sum(); };
  auto compiled = compile(fn, fullgraph("mysin_loss"));
  for (int64_t n : {20, 37}) {
    Tensor x = leaf({n});
    Tensor loss = compiled(x);
    ASSERT_TRUE(loss.requires_grad());
    EXPECT_EQ(loss.grad_fn_name(), "CompiledFunctionBackward");
    PoisonAndCount mode;
    {
      ModeGuard g(&mode, ModeKind::Dispatch);
      loss.backward();
    }
    // d/dx sum(sin(2x)) = 2 cos(2x), against float64 math.
    Tensor want = (x.detach() * 2).cos() * 2;
    EXPECT_TRUE(all_close(x.grad(), want, 1e-12, 1e-12)) << x.grad() << want;
    EXPECT_EQ(mode.calls.count("trainlib::mycos"), 0u) << "the backward ran eagerly";
    Tensor xe = fresh(x);
    fn(xe).backward();
    EXPECT_TRUE(all_close(x.grad(), xe.grad(), 1e-12, 1e-12));
  }
  const CompiledGraph g = compiled.graph();
  ASSERT_TRUE(g.backward) << g.text;
  // The forward: the sin kernel (traced into) with x * 2 in its loads; the backward: the cos
  // kernel of the registered formula, traced into as well, with x * 2 computed again in its
  // loads (x is saved, not 2x) and its two multiplications (the formula's and the chain rule's)
  // in its stores: one launch each way.
  EXPECT_EQ(g.find("mul+train_sin_kernel").size(), 1u) << g.text;
  EXPECT_TRUE(g.find("trainlib::mysin").empty()) << g.text;
  EXPECT_EQ(g.kernel_launches(), 1) << g.text;
  EXPECT_EQ(g.backward->find("mul+train_cos_kernel+mul+mul").size(), 1u) << g.backward->text;
  EXPECT_EQ(g.backward->kernel_launches(), 1) << g.backward->text;
  EXPECT_TRUE(g.backward->find("trainlib::mycos").empty()) << g.backward->text;
}

// The first call builds every kernel of the forward and of the backward in one batch (compiled
// in parallel) before anything runs: the backward's kernel is on disk before the backward runs.
TEST(CompileTraining, TheFirstCallBuildsTheBackwardsKernelsWithTheForwards) {
  ScopedEnv compiled_mode("TESSERA_INTERPRET", "0");  // (the interpreter builds nothing)
  // A cache folder of its own, empty: other test processes share the default one.
  const std::string dir = "/tmp/tessera-prebuild-test-" + std::to_string(::getpid());
  ScopedEnv cache("TESSERA_CACHE_DIR", dir.c_str());
  struct Clear {
    std::string dir;
    ~Clear() {
      backend::cpu::clear_cache();
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } clear{dir};
  backend::cpu::clear_cache();
  auto fn = [](const Tensor& x) { return mysin()(x * 3).sum(); };
  auto compiled = compile(fn, fullgraph("mysin_prebuild"));
  Tensor x = leaf({53});
  Tensor loss = compiled(x);
  std::vector<std::string> kernels;
  for (const auto& e : backend::cpu::cache_entries()) kernels.push_back(e.kernel);
  auto built = [&](const std::string& name) {
    return std::any_of(kernels.begin(), kernels.end(),
                       [&](const std::string& k) { return k.find(name) != std::string::npos; });
  };
  // (the graph's kernels: x * 3 fused into the sin kernel's loads; the backward's formula and
  // chain rule around the cos kernel)
  EXPECT_TRUE(built("mul+train_sin_kernel")) << ::testing::PrintToString(kernels);
  EXPECT_TRUE(built("mul+train_cos_kernel+mul+mul")) << ::testing::PrintToString(kernels);
  loss.backward();
  EXPECT_TRUE(all_close(x.grad(), (x.detach() * 3).cos() * 3, 1e-12, 1e-12));
}

TEST(CompileTraining, PointwiseChainsTrainAsFusedKernelsBothWays) {
  auto fn = [](const Tensor& x, const Tensor& w, const Tensor& b) {
    return ((x * w + b).relu() * 0.5 + x.sin() * x).sum();
  };
  auto compiled = compile(fn, fullgraph("chain_loss"));
  Tensor x = leaf({64, 48}), w = leaf({48}), b = leaf({48});
  (void)compiled(fresh(x), fresh(w), fresh(b));  // traced here: the counts below are one call's
  PoisonAndCount mode;
  {
    ModeGuard g(&mode, ModeKind::Dispatch);
    compiled(x, w, b).backward();
  }
  Tensor xe = fresh(x), we = fresh(w), be = fresh(b);
  fn(xe, we, be).backward();
  EXPECT_TRUE(all_close(x.grad(), xe.grad(), 1e-12, 1e-12));
  EXPECT_TRUE(all_close(w.grad(), we.grad(), 1e-12, 1e-12));
  EXPECT_TRUE(all_close(b.grad(), be.grad(), 1e-12, 1e-12));
  // Against float64 math: d/dx = relu'(xw + b) * 0.5 * w + cos(x) * x + sin(x).
  Tensor xd = x.detach(), wd = w.detach(), bd = b.detach();
  Tensor on = ((xd * wd + bd) > 0.0).to(DType::Float64);
  EXPECT_TRUE(all_close(x.grad(), on * 0.5 * wd + xd.cos() * xd + xd.sin(), 1e-12, 1e-12));
  EXPECT_TRUE(all_close(b.grad(), (on * 0.5).sum({0}), 1e-12, 1e-12));
  const CompiledGraph g = compiled.graph();
  ASSERT_TRUE(g.backward);
  int fused = 0;
  for (const auto& n : g.backward->nodes) fused += n.target.rfind("fused_", 0) == 0;
  EXPECT_GE(fused, 1) << g.backward->text;
  EXPECT_EQ(mode.calls.count("aten::relu"), 0u) << "the forward's relu ran as an operator";
}

TEST(CompileTraining, NormsAndSoftmaxTrainLikeEager) {
  auto fn = [](const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& t) {
    Tensor y = layer_norm(x, {32}, w, b);
    Tensor p = softmax(gelu(y) * 0.5, -1);
    return (p * t).sum() + rms_norm(x, {32}).mean();
  };
  auto compiled = compile(fn, fullgraph("norm_loss"));
  for (int64_t rows : {16, 24, 40}) {  // static, then dynamic rows
    Tensor x = leaf({rows, 32}), w = leaf({32}), b = leaf({32});
    Tensor t = randn({rows, 32}, TensorOptions().dtype(DType::Float64));
    {
      PoisonAndCount mode;
      ModeGuard g(&mode, ModeKind::Dispatch);
      compiled(x, w, b, t).backward();
    }
    Tensor xe = fresh(x), we = fresh(w), be = fresh(b);
    fn(xe, we, be, t).backward();
    EXPECT_TRUE(all_close(x.grad(), xe.grad(), 1e-10, 1e-12)) << rows;
    EXPECT_TRUE(all_close(w.grad(), we.grad(), 1e-10, 1e-12)) << rows;
    EXPECT_TRUE(all_close(b.grad(), be.grad(), 1e-10, 1e-12)) << rows;
  }
  EXPECT_EQ(compiled.stats().graphs, 2);
  EXPECT_TRUE(compiled.graph().backward);
}

TEST(CompileTraining, ClosedOverParametersGetTheirGradients) {
  Tensor w = leaf({16}), bias = leaf({16});
  auto fn = [&](const Tensor& x) { return ((x * w).tanh() + bias).pow(2.0).sum(); };
  auto compiled = compile(fn, fullgraph("closure_loss"));
  Tensor x = randn({8, 16}, TensorOptions().dtype(DType::Float64));  // no grad: only the params
  compiled(x).backward();
  Tensor wg = w.grad().clone(), bg = bias.grad().clone();
  fn(x).backward();  // eager adds the same again
  EXPECT_TRUE(all_close(wg * 2, w.grad(), 1e-12, 1e-12));
  EXPECT_TRUE(all_close(bg * 2, bias.grad(), 1e-12, 1e-12));
  EXPECT_TRUE(compiled.graph().backward);
  // A parameter that stops requiring grad is a guard: a new graph, without a backward for it.
  bias.requires_grad_(false);
  compiled(x).backward();
  EXPECT_EQ(compiled.stats().graphs, 2);
  EXPECT_TRUE(all_close(w.grad(), wg * 3, 1e-12, 1e-12));
  EXPECT_TRUE(all_close(bias.grad(), bg * 2, 1e-12, 1e-12));
}

TEST(CompileTraining, GradcheckPassesThroughTheCompiledFunction) {
  auto compiled = compile(
      [](const Tensor& x, const Tensor& y) { return (x.exp() * y).sigmoid() + x * y.cos(); },
      fullgraph("gradcheck_fn"));
  Tensor x = leaf({5, 3}), y = leaf({3});
  EXPECT_TRUE(autograd::gradcheck(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{compiled(in[0], in[1])}; },
      {x, y}));
  int joint = 0;  // gradcheck also evaluates without grad: a second graph
  for (const CompiledGraph& g : compiled.graphs()) joint += g.backward != nullptr;
  EXPECT_EQ(joint, 1);
}

TEST(CompileTraining, DoubleBackwardAndASecondBackwardAreClearErrors) {
  auto compiled = compile([](const Tensor& x) { return (x.sin() * x).sum(); }, fullgraph("twice"));
  Tensor x = leaf({10});
  Tensor loss = compiled(x);
  std::string msg = error_of<NotImplementedError>(
      [&] { autograd::grad({loss}, {x}, {}, /*retain_graph=*/true, /*create_graph=*/true); });
  EXPECT_NE(msg.find("[twice] double backward"), std::string::npos) << msg;
  // retain_graph keeps the saved tensors: two backwards accumulate twice the gradient.
  loss.backward({}, /*retain_graph=*/true);
  loss.backward();
  Tensor xd = x.detach();
  EXPECT_TRUE(all_close(x.grad(), (xd.cos() * xd + xd.sin()) * 2, 1e-12, 1e-12));
  msg = error_of<RuntimeError>([&] { loss.backward(); });
  EXPECT_NE(msg.find("retain_graph=true"), std::string::npos) << msg;
}

TEST(CompileTraining, ASavedTensorModifiedInPlaceIsAnError) {
  auto compiled =
      compile([](const Tensor& x, const Tensor& y) { return (x * y).sum(); }, fullgraph("inplace"));
  Tensor x = leaf({6});
  Tensor y = randn({6}, TensorOptions().dtype(DType::Float64));
  Tensor loss = compiled(x, y);
  y.add_(1.0);
  const std::string msg = error_of<RuntimeError>([&] { loss.backward(); });
  EXPECT_NE(msg.find("[inplace]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("modified by an in-place operation"), std::string::npos) << msg;
}

TEST(CompileTraining, GradModeIsGuarded) {
  auto compiled = compile([](const Tensor& x) { return mysin()(x).sum(); }, fullgraph("mode"));
  Tensor x = leaf({12});
  {
    NoGradGuard no_grad;
    EXPECT_FALSE(compiled(x).requires_grad());
  }
  EXPECT_EQ(compiled.stats().graphs, 1);
  Tensor loss = compiled(x);  // grad mode on: not the graph traced without it
  EXPECT_EQ(compiled.stats().graphs, 2);
  ASSERT_EQ(loss.grad_fn_name(), "CompiledFunctionBackward");
  loss.backward();
  EXPECT_TRUE(all_close(x.grad(), x.detach().cos(), 1e-12, 1e-12));
  {
    NoGradGuard no_grad;
    EXPECT_FALSE(compiled(x).requires_grad());  // back to the first graph
  }
  EXPECT_EQ(compiled.stats().graphs, 2);
}

TEST(CompileTraining, UnusedResultsAndInputsReturnedAsIs) {
  auto fn = [](const Tensor& x) { return std::make_tuple(x.sin(), x.cos() * 3, x); };
  auto compiled = compile(fn, fullgraph("three"));
  Tensor x = leaf({9});
  auto [s, c, same] = compiled(x);
  EXPECT_EQ(same.impl(), x.impl());
  EXPECT_TRUE(c.requires_grad());
  s.sum().backward();  // c gets no gradient: zeros in the compiled backward
  EXPECT_TRUE(all_close(x.grad(), x.detach().cos(), 1e-12, 1e-12));
  auto [s2, c2, same2] = compiled(x);
  (void)s2;
  (void)same2;
  c2.sum().backward();
  EXPECT_TRUE(all_close(x.grad(), x.detach().cos() - x.detach().sin() * 3, 1e-12, 1e-12));
}

TEST(CompileTraining, ABackwardThatCannotBeTracedRunsAsAutogradRecordsIt) {
  // The formula reads tensor data (item()): it cannot run on fake tensors, so the forward is
  // traced alone and autograd records its operators as the graph replays: triton_ops stay
  // whole (their formulas apply) and built-in ops stay as called (no fused kernels).
  static auto scale = [] {
    auto op = library::triton_op("trainlib::scale_by_sum", [](const Tensor& x) {
      Tensor out = empty_like(x);
      auto n = x.numel();
      library::wrap_triton(train_sin_kernel)[{tl::cdiv(n, 16)}](x, out, n, tl::meta("BLOCK", 16));
      return out;
    });
    op.register_autograd(
        [](autograd::AutogradContext& ctx, const Tensor& grad) {
          const Tensor x = ctx.saved(0);
          return grad * x.cos() * (x.sum().item<double>() > -1e300 ? 1.0 : 0.0);
        },
        [](autograd::AutogradContext& ctx, const Tensor& x, const Tensor&) {
          ctx.save_for_backward({x});
        });
    return op;
  }();
  auto compiled =
      compile([](const Tensor& x) { return scale((x * 0.5).exp()).sum(); }, fullgraph("item"));
  Tensor x = leaf({7});
  compiled(x).backward();
  Tensor e = (x.detach() * 0.5).exp();
  EXPECT_TRUE(all_close(x.grad(), e.cos() * e * 0.5, 1e-12, 1e-12));
  const CompiledGraph g = compiled.graph();
  EXPECT_FALSE(g.backward);
  EXPECT_FALSE(compiled.stats().eager);
  EXPECT_EQ(g.find("trainlib::scale_by_sum").size(), 1u) << g.text;
  for (const auto& n : g.nodes) EXPECT_NE(n.target.rfind("fused_", 0), 0u) << g.text;
}

TEST(CompileTraining, CheapForwardValuesAreRecomputedNotSaved) {
  // relu's backward needs its result; computing it again from x and b in the backward kernel
  // costs reading x (the caller holds it anyway) instead of writing and reading the result.
  auto fn = [](const Tensor& x, const Tensor& b) { return ((x + b) * 0.5).relu() * x; };
  auto compiled = compile(fn, fullgraph("recompute"));
  Tensor x = leaf({40, 24}), b = leaf({24});
  Tensor up = randn({40, 24}, TensorOptions().dtype(DType::Float64));
  const auto got = autograd::grad({compiled(x, b)}, {x, b}, {up});
  Tensor xe = fresh(x), be = fresh(b);
  const auto want = autograd::grad({fn(xe, be)}, {xe, be}, {up});
  EXPECT_TRUE(all_close(got[0], want[0], 1e-12, 1e-12));
  EXPECT_TRUE(all_close(got[1], want[1], 1e-12, 1e-12));
  const CompiledGraph g = compiled.graph();
  ASSERT_TRUE(g.backward);
  // Saved: only the inputs (no intermediate of the forward).
  for (size_t i = static_cast<size_t>(g.user_outputs); i < g.outputs.size(); ++i)
    EXPECT_EQ(g.values[static_cast<size_t>(g.outputs[i])].producer, -1) << g.text;
  bool relu_again = false;
  for (const auto& n : g.backward->nodes) {
    for (const auto& f : n.fused_from) relu_again = relu_again || f.op == "aten::relu";
  }
  EXPECT_TRUE(relu_again) << g.backward->text;
  // The layer norm's output is recomputed from x, w and b by the backward's row kernel.
  auto ln = compile([](const Tensor& x, const Tensor& w,
                       const Tensor& b) { return gelu(layer_norm(x, {24}, w, b), "tanh"); },
                    fullgraph("ln_recompute"));
  Tensor w = leaf({24});
  (void)autograd::grad({ln(x, w, b)}, {x, w, b}, {up});
  const CompiledGraph lg = ln.graph();
  ASSERT_TRUE(lg.backward);
  EXPECT_EQ(lg.outputs.size(), 4u) << lg.text;  // the result, then x, w, b
  // GELU's derivative is one op (gelu_backward), fused into a backward kernel, not a call.
  bool gelu_fused = false;
  for (const auto& n : lg.backward->nodes) {
    for (const auto& f : n.fused_from) gelu_fused = gelu_fused || f.op == "aten::gelu_backward";
  }
  EXPECT_TRUE(gelu_fused) << lg.backward->text;
  EXPECT_TRUE(lg.backward->find("aten::gelu_backward").empty()) << lg.backward->text;
  // Not when both sides need the value in memory anyway: gelu(x) feeds a matmul in the forward
  // and, transposed, in the backward (w's gradient): saved, not computed again.
  auto mm = compile([](const Tensor& x, const Tensor& w) { return matmul(gelu(x), w); },
                    fullgraph("mm_saved"));
  Tensor w2 = leaf({24, 8});
  Tensor up2 = randn({40, 8}, TensorOptions().dtype(DType::Float64));
  const auto mg = autograd::grad({mm(x, w2)}, {x, w2}, {up2});
  Tensor xe2 = fresh(x), we2 = fresh(w2);
  const auto mw = autograd::grad({matmul(gelu(xe2), we2)}, {xe2, we2}, {up2});
  EXPECT_TRUE(all_close(mg[0], mw[0], 1e-12, 1e-12));
  EXPECT_TRUE(all_close(mg[1], mw[1], 1e-12, 1e-12));
  const CompiledGraph gm = mm.graph();
  ASSERT_TRUE(gm.backward);
  EXPECT_TRUE(gm.backward->find("aten::gelu").empty()) << gm.backward->text;
}

TEST(CompileTraining, ABiasAddOnAMatmulIsRecomputedFromTheMatmulsResult) {
  // gelu(x @ w1 + b1) @ w2: the matmul's result is in memory in the forward anyway, so the
  // backward reads it (and b1) and adds again in GELU's derivative kernel; saving the sum would
  // cost the forward a write of the whole hidden activation.
  auto fn = [](const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2) {
    return matmul(gelu(matmul(x, w1) + b1, "tanh"), w2);
  };
  auto compiled = compile(fn, fullgraph("mlp_recompute"));
  Tensor x = leaf({16, 8}), w1 = leaf({8, 32}), b1 = leaf({32}), w2 = leaf({32, 8});
  Tensor up = randn({16, 8}, TensorOptions().dtype(DType::Float64));
  const auto got = autograd::grad({compiled(x, w1, b1, w2)}, {x, w1, b1, w2}, {up});
  Tensor xe = fresh(x), w1e = fresh(w1), b1e = fresh(b1), w2e = fresh(w2);
  const auto want = autograd::grad({fn(xe, w1e, b1e, w2e)}, {xe, w1e, b1e, w2e}, {up});
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_TRUE(all_close(got[i], want[i], 1e-12, 1e-12)) << i;
  const CompiledGraph g = compiled.graph();
  ASSERT_TRUE(g.backward);
  // The forward's bias + GELU kernel stores GELU's result only (the next matmul's operand).
  bool fused = false;
  for (const auto& n : g.nodes) {
    if (n.target.rfind("fused_", 0) != 0) continue;
    fused = true;
    EXPECT_EQ(n.writes.size(), 1u) << g.text;
  }
  EXPECT_TRUE(fused) << g.text;
  // Saved: the inputs, the first matmul's result and GELU's result, nothing else.
  int saved_intermediates = 0;
  for (size_t i = static_cast<size_t>(g.user_outputs); i < g.outputs.size(); ++i) {
    const int p = g.values[static_cast<size_t>(g.outputs[i])].producer;
    if (p >= 0) ++saved_intermediates;
  }
  EXPECT_EQ(saved_intermediates, 2) << g.text;
  // The backward adds b1 again inside GELU's derivative kernel.
  bool add_in_derivative = false;
  for (const auto& n : g.backward->nodes) {
    bool add = false, derivative = false;
    for (const auto& f : n.fused_from) {
      add = add || f.op == "aten::add.Tensor";
      derivative = derivative || f.op == "aten::gelu_backward";
    }
    add_in_derivative = add_in_derivative || (add && derivative);
  }
  EXPECT_TRUE(add_in_derivative) << g.backward->text;
}

TEST(CompileTraining, RandomOpsAreNeverRecomputed) {
  // A dropout mask drawn in the forward must be the one the backward uses.
  auto fn = [](const Tensor& x) { return x * (rand_like(x) > 0.5) * 2; };
  auto compiled = compile(fn, fullgraph("dropout"));
  for (int i = 0; i < 3; ++i) {
    Tensor x = leaf({300});
    Tensor y = compiled(x);
    y.sum().backward();
    // d/dx = 2 * keep, and keep = y / (2x).
    Tensor keep = (y.detach() != 0.0).to(DType::Float64);
    EXPECT_TRUE(all_close(x.grad(), keep * 2, 0, 0)) << i;
  }
  EXPECT_TRUE(compiled.graph().backward);
}

TEST(CompileTraining, AValueWrittenLaterIsNotRecomputedFrom) {
  // buf changes after r is computed from it: r must be saved, not computed again from buf.
  auto fn = [](const Tensor& x, Tensor buf) {
    const Tensor r = (buf * 2).relu();
    buf.add_(1.0);
    return r * x;
  };
  auto compiled = compile(fn, fullgraph("written"));
  Tensor x = leaf({30});
  Tensor buf = randn({30}, TensorOptions().dtype(DType::Float64)), buf_e = buf.clone();
  Tensor up = randn({30}, TensorOptions().dtype(DType::Float64));
  const Tensor want = (buf * 2).relu() * up;
  const auto got = autograd::grad({compiled(x, buf)}, {x}, {up});
  EXPECT_TRUE(all_close(got[0], want, 0, 0));
  EXPECT_TRUE(all_close(buf, buf_e + 1, 0, 0));
  EXPECT_TRUE(compiled.graph().backward);
}

TEST(CompileTraining, NoDifferentiableResultMeansNoBackwardAndFusedOps) {
  // x requires grad but no result depends on it differentiably: one graph, fused, no backward.
  auto fn = [](const Tensor& x, const Tensor& y) { return (x.detach() * 2 + y).relu(); };
  auto compiled = compile(fn, fullgraph("detached"));
  Tensor x = leaf({33}), y = randn({33}, TensorOptions().dtype(DType::Float64));
  Tensor got = compiled(x, y);
  EXPECT_FALSE(got.requires_grad());
  EXPECT_TRUE(all_close(got, fn(x, y), 0, 0));
  const CompiledGraph g = compiled.graph();
  EXPECT_FALSE(g.backward);
  EXPECT_EQ(g.kernel_launches(), 1) << g.text;
}

TEST(CompileTraining, AParameterUpdatedBeforeTheBackwardIsAnError) {
  // The backward reads w (x's gradient is g * w): an optimizer step between the forward and the
  // backward would give a gradient of another w, an error as in eager mode (mul saved w).
  Tensor w = leaf({8});
  auto compiled = compile([&](const Tensor& x) { return (x * w).sum(); }, fullgraph("step"));
  Tensor x = leaf({8});
  Tensor loss = compiled(x);
  {
    NoGradGuard no_grad;
    w.sub_(w * 0.1);
  }
  const std::string msg = error_of<RuntimeError>([&] { loss.backward(); });
  EXPECT_NE(msg.find("[step]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("closes over"), std::string::npos) << msg;
  // In the usual order (backward, then the step) nothing is wrong.
  Tensor loss2 = compiled(x);
  loss2.backward();
  EXPECT_TRUE(all_close(x.grad(), w.detach(), 1e-12, 1e-12));
}

// Every differentiable built-in op through the joint trace: the compiled gradients against eager
// autograd's, each at two sizes (static, then dynamic), with an upstream gradient of fresh values.
TEST(CompileTraining, EveryFormulaCompiledAgreesWithEager) {
  using Fn = std::function<Tensor(const Tensor&, const Tensor&)>;
  const std::vector<std::pair<const char*, Fn>> cases = {
      {"exp log sqrt",
       [](const Tensor& a, const Tensor&) { return (a.abs() + 1).log().exp().sqrt(); }},
      {"rsqrt pow div",
       [](const Tensor& a, const Tensor& b) {
         return (a.abs() + 1).rsqrt().pow(3.0) / (b.abs() + 2);
       }},
      {"sin cos tanh",
       [](const Tensor& a, const Tensor& b) { return a.sin() * b.cos() + (a * b).tanh(); }},
      {"sigmoid silu gelu",
       [](const Tensor& a, const Tensor& b) {
         return sigmoid(a) + silu(b) * gelu(a) + gelu(b, "tanh");
       }},
      {"erf abs neg", [](const Tensor& a, const Tensor& b) { return erf(a) - b.abs() * -a; }},
      {"maximum minimum clamp",
       [](const Tensor& a, const Tensor& b) {
         return maximum(a, b) + minimum(a, b * 2) + clamp(a, -0.5, 0.5);
       }},
      {"where relu",
       [](const Tensor& a, const Tensor& b) { return where(a > b, a * 3, b.relu()); }},
      {"sum mean dims",
       [](const Tensor& a, const Tensor& b) {
         return (a * b).sum({0}, true) + a.mean({1}, true) + b.mean();
       }},
      {"amax var prod",
       [](const Tensor& a, const Tensor& b) {
         return a.amax({1}, true) + var(b, {1}, 1.0, true) + prod(a * 0.1 + 1, 1, true);
       }},
      {"softmax log_softmax",
       [](const Tensor& a, const Tensor& b) { return softmax(a, -1) * log_softmax(b, 0); }},
      {"layer_norm rms_norm",
       [](const Tensor& a, const Tensor& b) {
         return layer_norm(a, {a.sizes()[1]}) + rms_norm(b, {b.sizes()[1]});
       }},
      {"matmul transpose",
       [](const Tensor& a, const Tensor& b) {
         return matmul(a, b.transpose(0, 1)).sum({1}, true) + a;
       }},
      {"views",
       [](const Tensor& a, const Tensor& b) {
         return a.narrow(1, 1, 3).sum({1}, true) + b.select(1, 0).unsqueeze(1) +
                a.slice(0, 1).sum();
       }},
      {"cat cumsum",
       [](const Tensor& a, const Tensor& b) {
         return cumsum(cat({a, b * 2}, 1), 1).narrow(1, 0, 5);
       }},
  };
  for (const auto& [name, fn] : cases) {
    auto compiled = compile(fn, fullgraph(name));
    for (int64_t rows : {6, 9}) {
      Tensor a = leaf({rows, 5}), b = leaf({rows, 5});
      Tensor ae = fresh(a), be = fresh(b);
      Tensor out = compiled(a, b);
      Tensor up = randn(out.sizes(), TensorOptions().dtype(DType::Float64));
      const auto got = autograd::grad({out}, {a, b}, {up}, false, false, /*allow_unused=*/true);
      const auto want = autograd::grad({fn(ae, be)}, {ae, be}, {up}, false, false, true);
      for (size_t i = 0; i < 2; ++i) {
        ASSERT_EQ(got[i].defined(), want[i].defined()) << name;
        if (want[i].defined()) {
          EXPECT_TRUE(all_close(got[i], want[i], 1e-10, 1e-12)) << name << " " << i;
        }
      }
    }
    EXPECT_TRUE(compiled.graph().backward) << name;
  }
}

TEST(CompileTraining, FactoriesOfSymbolicSizesTrace) {
  // ones / zeros / full / rand of a dynamic graph's sizes (a backward's zeros of the input's
  // shape, narrow's; or the user's own): shape-only while tracing, real when the graph runs.
  auto fn = [](const Tensor& x) {
    return x + ones(x.sizes(), TensorOptions().dtype(x.dtype())) * 2 +
           rand(x.sizes(), TensorOptions().dtype(x.dtype())) * 0;
  };
  CompileOptions o = fullgraph("factories");
  o.dynamic = true;
  auto compiled = compile(fn, o);
  for (int64_t n : {5, 12}) {
    Tensor x = randn({n, 3}, TensorOptions().dtype(DType::Float64));
    EXPECT_TRUE(all_close(compiled(x), x + 2, 0, 0)) << n;
  }
  EXPECT_EQ(compiled.stats().graphs, 1);
}
