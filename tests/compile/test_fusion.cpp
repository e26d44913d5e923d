// Vertical fusion of built-in pointwise chains under tessera::compile (issue 17): a run of
// pointwise ops becomes one generated kernel whose intermediates never reach memory; what is used
// after the run is stored, what another node touches in between ends the run, an input written in
// between ends it, autograd keeps the ops as called. Outputs are poisoned when allocated (every
// `empty` the graph runs is filled with NaN or -77), and results are compared with eager and with
// a float64 reference on fresh random inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>

#include "compile_testing.h"
#include "tessera/compile.h"
#include "tessera/tessera.h"
#include "tessera/testing.h"
#include "testing.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

// The generated kernels of the newest graph.
std::vector<const CompiledGraph::Node*> fused_kernels(const CompiledGraph& g) {
  std::vector<const CompiledGraph::Node*> out;
  for (const auto& n : g.nodes) {
    if (n.kind == CompiledGraph::Node::Kind::Kernel && n.target.rfind("fused_", 0) == 0)
      out.push_back(&n);
  }
  return out;
}

Tensor f64(const Tensor& t) {
  return t.to(DType::Float64);
}

TEST(CompilePointwise, ComparisonsAndWhereFuseAMaskedChain) {
  // relu's backward, `where(y > 0, g, 0)`, and masks in general: the comparison computes in its
  // operands' dtype, its bool result feeds where or is stored as a result of its own.
  auto fn = [](const Tensor& x, const Tensor& y) {
    const Tensor m = x.sin() > y;
    return std::make_tuple(where(m, x * 2, y), where(x <= 0.25, x, 0.5) * 3, m);
  };
  auto compiled = compile(fn, fullgraph("masks"));
  for (DType dt : {DType::Float32, DType::BFloat16}) {
    Tensor x = randn({37, 19}).to(dt), y = randn({19}).to(dt);
    std::tuple<Tensor, Tensor, Tensor> got;
    run_poisoned([&] { got = compiled(x, y); });
    const auto [a, b, m] = fn(x, y);
    EXPECT_TRUE(equal(std::get<0>(got), a)) << dtype_name(dt);
    EXPECT_TRUE(equal(std::get<1>(got), b)) << dtype_name(dt);
    EXPECT_TRUE(equal(std::get<2>(got), m)) << dtype_name(dt);
    EXPECT_EQ(std::get<2>(got).dtype(), DType::Bool);
  }
  EXPECT_EQ(fused_kernels(compiled.graph()).size(), 1u) << compiled.graph().text;
  // Comparisons of integers keep the promotion rules of their ops: as called.
  auto ints = compile([](const Tensor& i) { return where(i > 2, i, 7); }, fullgraph("int_masks"));
  Tensor i = arange(0, 10, 1, TensorOptions().dtype(DType::Int32));
  EXPECT_TRUE(equal(ints(i), where(i > 2, i, 7)));
  EXPECT_TRUE(fused_kernels(ints.graph()).empty()) << ints.graph().text;
}

TEST(CompilePointwise, ClampJoinsAChainWithItsBoundsAsEager) {
  // Both bounds, one of them, bounds crossed (min > max gives max, as eager), NaN through, and
  // integers: each as eager computes it, in the chain's one kernel.
  auto fn = [](const Tensor& x, const Tensor& b) {
    const Tensor h = (x + b) * 2;
    return std::make_tuple(clamp(h, -1.0, 1.0).exp(), clamp(h, std::nullopt, 0.5) - x,
                           clamp(h.sin(), 0.25, -0.25), clamp(h, 0.0, std::nullopt).sqrt());
  };
  auto compiled = compile(fn, fullgraph("clamps"));
  for (DType dt : {DType::Float32, DType::BFloat16}) {
    Tensor x = randn({33, 20}).to(dt), b = randn({20}).to(dt);
    x[3][4].fill_(NAN);
    std::tuple<Tensor, Tensor, Tensor, Tensor> got;
    run_poisoned([&] { got = compiled(x, b); });
    const auto want = fn(x, b);
    EXPECT_TRUE(all_close(std::get<0>(got), std::get<0>(want), 0, 0, true)) << dtype_name(dt);
    EXPECT_TRUE(all_close(std::get<1>(got), std::get<1>(want), 0, 0, true)) << dtype_name(dt);
    EXPECT_TRUE(all_close(std::get<2>(got), std::get<2>(want), 0, 0, true)) << dtype_name(dt);
    EXPECT_TRUE(all_close(std::get<3>(got), std::get<3>(want), 0, 0, true)) << dtype_name(dt);
    EXPECT_TRUE(std::isnan(std::get<0>(got)[3][4].item<double>()));
    // (crossed bounds: every element is the max, -0.25, but NaN)
    EXPECT_EQ(std::get<2>(got)[0][0].item<double>(), -0.25);
  }
  const CompiledGraph g = compiled.graph();
  EXPECT_EQ(fused_kernels(g).size(), 1u) << g.text;
  EXPECT_TRUE(g.find("aten::clamp").empty()) << g.text;
  // Integers clamp in their dtype; a float bound on an integer tensor promotes: left as called.
  auto ints = compile(
      [](const Tensor& i) { return std::make_tuple(clamp(i * 3, 2, 20), clamp(i + 1, 0.5, 4.5)); },
      fullgraph("int_clamps"));
  Tensor i = arange(-5, 10, 1, TensorOptions().dtype(DType::Int32));
  const auto [ci, cf] = ints(i);
  EXPECT_TRUE(equal(ci, clamp(i * 3, 2, 20)));
  EXPECT_TRUE(equal(cf, clamp(i + 1, 0.5, 4.5)));
  EXPECT_EQ(cf.dtype(), DType::Float32);
  EXPECT_EQ(ints.graph().find("aten::clamp").size(), 1u) << ints.graph().text;
}

TEST(CompilePointwise, Float64ScalarsAreExact) {
  // A scalar operand is the op's value in its compute type: in a float64 chain, 0.1 as a double
  // (a tile-language float literal is float32, which would be off by about 1e-9).
  auto fn = [](const Tensor& x) { return ((x * 0.1).exp() + 1.3) * 0.3 - 0.7; };
  auto compiled = compile(fn, fullgraph("f64_scalars"));
  Tensor x = randn({1000}, TensorOptions().dtype(DType::Float64));
  Tensor got;
  run_poisoned([&] { got = compiled(x); });
  EXPECT_EQ(fused_kernels(compiled.graph()).size(), 1u) << compiled.graph().text;
  EXPECT_TRUE(equal(got, fn(x))) << got << fn(x);
}

TEST(CompilePointwise, AChainWithABiasAndScalarsIsOneKernel) {
  auto fn = [](const Tensor& x, const Tensor& y, const Tensor& bias) {
    return ((x * y + bias) * 0.5).sigmoid() - x;
  };
  auto compiled = compile(fn, fullgraph("chain"));
  for (int64_t rows : {33, 7, 130}) {  // static, then dynamic
    Tensor x = randn({rows, 24}), y = randn({rows, 24}), bias = randn({24});
    compiled(x, y, bias);  // traces (the trace runs the ops on fakes)
    Tensor got;
    const auto calls = run_poisoned([&] { got = compiled(x, y, bias); });
    EXPECT_TRUE(all_close(got, fn(x, y, bias), 1e-5, 1e-6)) << rows;
    EXPECT_TRUE(all_close(f64(got), fn(f64(x), f64(y), f64(bias)), 1e-5, 1e-6)) << rows;
    for (const char* op : {"aten::mul.Tensor", "aten::add.Tensor", "aten::mul.Scalar",
                           "aten::sigmoid", "aten::sub.Tensor"})
      EXPECT_EQ(calls.count(op), 0u) << op;
    const CompiledGraph g = compiled.graph();
    EXPECT_EQ(g.kernel_launches(), 1) << g.text;
    const auto k = fused_kernels(g);
    ASSERT_EQ(k.size(), 1u) << g.text;
    EXPECT_EQ(k[0]->target, "fused_mul_add_mul_sigmoid_sub");
    ASSERT_EQ(k[0]->fused_from.size(), 5u);
    EXPECT_EQ(k[0]->fused_from[2].op, "aten::mul.Scalar");
    EXPECT_EQ(k[0]->writes.size(), 1u);  // only the result is stored
    EXPECT_EQ(k[0]->reads.size(), 3u);   // x once, y, the bias
    EXPECT_NE(g.text.find("fused 5 pointwise ops"), std::string::npos) << g.text;
  }
  EXPECT_EQ(compiled.stats().graphs, 2);
  // A long chain: one kernel, named by its first six ops.
  auto long_chain = compile(
      [](const Tensor& x) {
        Tensor y = x;
        for (int i = 0; i < 9; ++i) y = (y * 0.9 + 0.1).tanh();
        return y;
      },
      fullgraph("long"));
  Tensor x = randn({3000});
  Tensor got;
  run_poisoned([&] { got = long_chain(x); });
  Tensor want = x;
  for (int i = 0; i < 9; ++i) want = (want * 0.9 + 0.1).tanh();
  EXPECT_TRUE(all_close(got, want, 1e-5, 1e-6));
  const CompiledGraph g = long_chain.graph();
  const auto k = fused_kernels(g);
  ASSERT_EQ(k.size(), 1u) << g.text;
  EXPECT_EQ(k[0]->target, "fused_mul_add_tanh_mul_add_tanh_and_21_more");
}

TEST(CompilePointwise, ValuesUsedAfterTheChainAreStoredTheRestNever) {
  // `a` is returned too; `b` only feeds `c`.
  auto fn = [](const Tensor& x, const Tensor& y) {
    Tensor a = x.exp();
    Tensor b = a * y;
    Tensor c = b.relu() + 1;
    return std::vector<Tensor>{a, c};
  };
  auto compiled = compile(fn, fullgraph("two_outputs"));
  Tensor x = randn({1000}), y = randn({1000});
  std::vector<Tensor> got;
  run_poisoned([&] { got = compiled(x, y); });
  const auto want = fn(x, y);
  EXPECT_TRUE(all_close(got[0], want[0]));
  EXPECT_TRUE(all_close(got[1], want[1]));
  const CompiledGraph g = compiled.graph();
  const auto k = fused_kernels(g);
  ASSERT_EQ(k.size(), 1u) << g.text;
  EXPECT_EQ(k[0]->writes.size(), 2u) << g.text;
  // A value another node needs in memory (a reduction) ends the chain before that node; the ops
  // after it form a chain of their own that reads it.
  auto split = compile(
      [](const Tensor& x) {
        Tensor a = x * 2;
        Tensor s = a.sum();
        Tensor b = (a + 1).exp();
        return std::vector<Tensor>{b.neg(), s};
      },
      fullgraph("split"));
  std::vector<Tensor> r;
  run_poisoned([&] { r = split(x); });
  EXPECT_TRUE(all_close(r[0], (x * 2 + 1).exp().neg()));
  EXPECT_TRUE(all_close(r[1], (x * 2).sum(), 1e-4));
  const CompiledGraph gs = split.graph();
  const auto ks = fused_kernels(gs);
  ASSERT_EQ(ks.size(), 1u) << gs.text;
  EXPECT_EQ(ks[0]->target, "fused_add_exp_neg");
}

TEST(CompilePointwise, AnInputWrittenBetweenTheOpsEndsTheChain) {
  // a reads y before the in-place add, d after it: one kernel at d's place would read the new y
  // for both.
  auto fn = [](const Tensor& x, Tensor y) {
    Tensor a = x * y;
    y.add_(1);
    return a + y;
  };
  auto compiled = compile(fn, fullgraph("written"));
  Tensor x = randn({64}), y = randn({64});
  Tensor y2 = y.clone();
  const Tensor want = fn(x, y2);
  Tensor got;
  run_poisoned([&] { got = compiled(x, y); });
  EXPECT_TRUE(equal(got, want));
  EXPECT_TRUE(equal(y, y2));  // the mutation reached the caller's tensor
  EXPECT_TRUE(fused_kernels(compiled.graph()).empty()) << compiled.graph().text;
  // Written before the chain reads it: the chain sees the new values and fuses.
  auto before = compile(
      [](const Tensor& x, Tensor y) {
        Tensor a = x * 3;
        y.mul_(2);
        return (a + y).tanh();
      },
      fullgraph("written_before"));
  Tensor y3 = y.clone();
  Tensor got2;
  run_poisoned([&] { got2 = before(x, y); });
  EXPECT_TRUE(all_close(got2, (x * 3 + y3 * 2).tanh()));
  EXPECT_EQ(fused_kernels(before.graph()).size(), 1u) << before.graph().text;
}

// Horizontal fusion: ops that read the same input join one kernel where the earlier ones may move
// to the later one's place; not where another node needs an earlier result in memory first.
TEST(CompilePointwise, SiblingsThatReadOneInputShareAKernel) {
  auto both = compile(
      [](const Tensor& x) {
        return std::vector<Tensor>{x.sin(), x.cos() * 2};
      },
      fullgraph("siblings"));
  Tensor x = randn({5000});
  std::vector<Tensor> r;
  run_poisoned([&] { r = both(x); });
  EXPECT_TRUE(all_close(r[0], x.sin(), 1e-5, 1e-6));
  EXPECT_TRUE(all_close(r[1], x.cos() * 2, 1e-5, 1e-6));
  const CompiledGraph g = both.graph();
  ASSERT_EQ(fused_kernels(g).size(), 1u) << g.text;
  EXPECT_EQ(fused_kernels(g)[0]->reads.size(), 1u) << g.text;
  auto kept = compile(
      [](const Tensor& x) {
        Tensor a = x * 2;
        Tensor t = a.sum();  // needs a in memory here
        return std::vector<Tensor>{a, x.sin() * t};
      },
      fullgraph("kept_apart"));
  std::vector<Tensor> k;
  run_poisoned([&] { k = kept(x); });
  EXPECT_TRUE(equal(k[0], x * 2));
  EXPECT_TRUE(all_close(k[1], x.sin() * (x * 2).sum(), 1e-4, 1e-4));
  const CompiledGraph gk = kept.graph();
  ASSERT_EQ(fused_kernels(gk).size(), 1u) << gk.text;
  EXPECT_EQ(fused_kernels(gk)[0]->target, "fused_sin_mul") << gk.text;
  EXPECT_EQ(gk.find("aten::mul.Scalar").size(), 1u) << gk.text;
}

TEST(CompilePointwise, BroadcastsStridedInputsAndZeroDimTensors) {
  auto fn = [](const Tensor& x, const Tensor& col, const Tensor& t, const Tensor& s) {
    return (x - col) * t.t() / s + x.abs().sqrt();
  };
  auto compiled = compile(fn, fullgraph("broadcast"));
  for (int64_t n : {5, 9}) {
    Tensor x = randn({n, 6}), col = randn({n, 1}), t = randn({6, n}), s = tessera::full({}, 3.0);
    Tensor got;
    run_poisoned([&] { got = compiled(x, col, t, s); });
    EXPECT_TRUE(all_close(got, fn(x, col, t, s), 1e-5, 1e-6)) << n;
    EXPECT_TRUE(all_close(f64(got), fn(f64(x), f64(col), f64(t), f64(s)), 1e-5, 1e-6)) << n;
    ASSERT_EQ(fused_kernels(compiled.graph()).size(), 1u) << compiled.graph().text;
  }
}

TEST(CompilePointwise, EveryStepRoundsToItsDtypeAsEager) {
  // bfloat16: each op's result is rounded to bfloat16 before the next, as eager stores it.
  auto fn = [](const Tensor& x, const Tensor& y, const Tensor& z) { return (x * y + z) * 3; };
  auto compiled = compile(fn, fullgraph("bf16"));
  const TensorOptions bf16 = TensorOptions().dtype(DType::BFloat16);
  Tensor x = randn({4097}, bf16), y = randn({4097}, bf16), z = randn({4097}, bf16);
  Tensor got;
  run_poisoned([&] { got = compiled(x, y, z); });
  EXPECT_TRUE(equal(got, fn(x, y, z)));
  EXPECT_EQ(fused_kernels(compiled.graph()).size(), 1u);
  // Integers, and a true division of integers into floats.
  auto ints = compile(
      [](const Tensor& i, const Tensor& j) {
        return std::vector<Tensor>{(i * 3 + j) - 7, (i + j) / 4};
      },
      fullgraph("ints"));
  Tensor i = randint(-100, 100, {300}), j = randint(-100, 100, {300});
  std::vector<Tensor> r;
  run_poisoned([&] { r = ints(i, j); });
  EXPECT_TRUE(equal(r[0], (i * 3 + j) - 7));
  EXPECT_TRUE(equal(r[1], (i + j) / 4));
  EXPECT_EQ(r[1].dtype(), DType::Float32);
  // Two chains that share their inputs: one kernel (horizontal fusion) with two outputs.
  const CompiledGraph gi = ints.graph();
  ASSERT_EQ(fused_kernels(gi).size(), 1u) << gi.text;
  EXPECT_EQ(fused_kernels(gi)[0]->writes.size(), 2u) << gi.text;
}

TEST(CompilePointwise, WithGradBothHalvesFuseAndFuseFalseKeepsTheOpsAsCalled) {
  auto fn = [](const Tensor& x) { return (x * x).sin() + 1; };
  auto compiled = compile(fn, fullgraph("grad"));
  Tensor x = randn({50}, TensorOptions().dtype(DType::Float64)).requires_grad_();
  compiled(x).sum().backward();
  Tensor xr = x.detach().clone().requires_grad_();
  fn(xr).sum().backward();
  EXPECT_TRUE(all_close(x.grad(), xr.grad()));
  // Training under compile (test_training.cpp): the forward and the backward are graphs of
  // their own, and both fuse.
  const CompiledGraph g = compiled.graph();
  ASSERT_TRUE(g.backward);
  EXPECT_EQ(fused_kernels(g).size(), 1u) << g.text;
  EXPECT_EQ(fused_kernels(*g.backward).size(), 1u) << g.backward->text;
  CompileOptions o = fullgraph("unfused");
  o.fuse = false;
  auto unfused = compile(fn, o);
  Tensor y = randn({50});
  EXPECT_TRUE(all_close(unfused(y), fn(y)));
  EXPECT_TRUE(fused_kernels(unfused.graph()).empty()) << unfused.graph().text;
  EXPECT_EQ(unfused.graph().find("aten::sin").size(), 1u);
}

// Softmax, layer norm and RMS norm written with built-in ops: one generated kernel each, holding a
// row whole (reductions and the ops around them in registers), against eager and float64.
Tensor softmax_ops(const Tensor& x) {
  const Tensor e = (x - x.amax({-1}, true)).exp();
  return e / e.sum({-1}, true);
}
Tensor layer_norm_ops(const Tensor& x, const Tensor& w, const Tensor& b) {
  const Tensor mean = x.mean({-1}, true);
  const Tensor xc = x - mean;
  const Tensor var = (xc * xc).mean({-1}, true);
  return xc * (var + 1e-5).rsqrt() * w + b;
}
Tensor rms_norm_ops(const Tensor& x, const Tensor& w) {
  return x * ((x * x).mean({-1}, true) + 1e-6).rsqrt() * w;
}

TEST(CompileRows, SoftmaxLayerNormAndRmsNormAreOneKernelEach) {
  auto sm = compile(softmax_ops, fullgraph("softmax"));
  for (int64_t cols : {781, 64, 1000}) {
    Tensor x = randn({37, cols}) * 4;
    Tensor got;
    run_poisoned([&] { got = sm(x); });
    EXPECT_TRUE(all_close(got, softmax_ops(x), 1e-5, 1e-7)) << cols;
    EXPECT_TRUE(all_close(f64(got), softmax_ops(f64(x)), 1e-5, 1e-7)) << cols;
    const CompiledGraph g = sm.graph();
    EXPECT_EQ(g.kernel_launches(), 1) << g.text;
    const auto k = fused_kernels(g);
    ASSERT_EQ(k.size(), 1u) << g.text;
    EXPECT_EQ(k[0]->target, "fused_amax_sub_exp_sum_div");
    EXPECT_EQ(k[0]->grid[0], "37") << g.text;  // a program per row
  }
  auto ln = compile(layer_norm_ops, fullgraph("layer_norm"));
  for (int64_t rows : {16, 5, 33}) {
    Tensor x = randn({rows, 300}) * 3 + 1, w = randn({300}), b = randn({300});
    Tensor got;
    run_poisoned([&] { got = ln(x, w, b); });
    EXPECT_TRUE(all_close(got, layer_norm_ops(x, w, b), 1e-4, 1e-5)) << rows;
    EXPECT_TRUE(all_close(f64(got), layer_norm_ops(f64(x), f64(w), f64(b)), 1e-4, 1e-5)) << rows;
    const CompiledGraph g = ln.graph();
    ASSERT_EQ(fused_kernels(g).size(), 1u) << g.text;
    EXPECT_EQ(g.kernel_launches(), 1) << g.text;
  }
  auto rms = compile(rms_norm_ops, fullgraph("rms_norm"));
  const TensorOptions bf16 = TensorOptions().dtype(DType::BFloat16);
  Tensor x = randn({4, 8, 512}, bf16), w = randn({512}, bf16);
  Tensor got;
  run_poisoned([&] { got = rms(x, w); });
  EXPECT_TRUE(all_close(f64(got), f64(rms_norm_ops(x, w)), 2e-2, 2e-2));
  EXPECT_EQ(fused_kernels(rms.graph()).size(), 1u) << rms.graph().text;
}

// A row max only shifted (`x - amax(x)`) into a sum that every output divides by or subtracts the
// log of needs no pass for its NaNs: a row holding one is NaN throughout either way. Where an
// output does not go through the sum (the shift itself, the exponentials), the max keeps its NaN
// rule. Rows with a NaN first, last, and with infinities, against eager.
TEST(CompileRows, AmaxSkipsItsNanPassOnlyWhereEveryOutputIsNanInANanRow) {
  auto log_softmax_ops = [](const Tensor& x) {
    const Tensor d = x - x.amax({-1}, true);
    return d - d.exp().sum({-1}, true).log();
  };
  auto shift_ops = [](const Tensor& x) { return x - x.amax({-1}, true); };
  auto both_ops = [](const Tensor& x) {
    const Tensor e = (x - x.amax({-1}, true)).exp();
    return std::vector<Tensor>{e / e.sum({-1}, true), e};
  };
  auto sm = compile(softmax_ops, fullgraph("softmax_nan"));
  auto lsm = compile(log_softmax_ops, fullgraph("log_softmax_nan"));
  auto shift = compile(shift_ops, fullgraph("shift_nan"));
  auto both = compile(both_ops, fullgraph("both_nan"));
  Tensor x = randn({9, 300}) * 5;
  x.select(0, 1).select(0, 0).fill_(NAN);
  x.select(0, 2).select(0, 299).fill_(NAN);
  x.select(0, 3).select(0, 17).fill_(INFINITY);
  x.select(0, 4).select(0, 5).fill_(-INFINITY);
  x.select(0, 5).fill_(-INFINITY);
  x.select(0, 6).select(0, 8).fill_(NAN);
  x.select(0, 6).select(0, 9).fill_(INFINITY);
  const char* relaxed = "amax without its NaN pass";
  auto check = [&](auto& compiled, const Tensor& got, const Tensor& want, bool skips) {
    EXPECT_TRUE(all_close(got, want, 1e-5, 1e-6, /*equal_nan=*/true)) << got << want;
    const CompiledGraph g = compiled.graph();
    ASSERT_EQ(fused_kernels(g).size(), 1u) << g.text;
    EXPECT_EQ(g.text.find(relaxed) != std::string::npos, skips) << g.text;
  };
  Tensor got;
  run_poisoned([&] { got = sm(x); });
  check(sm, got, softmax_ops(x), true);
  EXPECT_TRUE(std::isnan(got[1][150].item<float>()));  // the whole row, as eager
  run_poisoned([&] { got = lsm(x); });
  check(lsm, got, log_softmax_ops(x), true);
  run_poisoned([&] { got = shift(x); });
  check(shift, got, shift_ops(x), false);
  EXPECT_TRUE(std::isnan(got[2][0].item<float>()));  // eager's max is NaN: so is every shift
  std::vector<Tensor> two;
  run_poisoned([&] { two = both(x); });
  const std::vector<Tensor> want = both_ops(x);
  check(both, two[0], want[0], false);
  EXPECT_TRUE(all_close(two[1], want[1], 1e-5, 1e-6, /*equal_nan=*/true));
}

TEST(CompileRows, PerRowResultsNansAndWhatStaysOut) {
  // The row statistics are results too: stored one per row, kept and dropped dimensions.
  // A per-row input ([20, 1]) joins per-row ops.
  auto stats = compile(
      [](const Tensor& x, const Tensor& c) {
        const Tensor m = x.amax({-1}, false);
        const Tensor s = (x - x.amax({-1}, true)).exp().sum({-1}, false);
        return std::vector<Tensor>{m, s.log() + m, x.amin({1}, true) * c};
      },
      fullgraph("stats"));
  Tensor x = randn({20, 50}), c = randn({20, 1});
  x.select(0, 3).select(0, 7).fill_(NAN);  // a NaN: amax, amin and the sum give NaN in row 3
  std::vector<Tensor> r;
  run_poisoned([&] { r = stats(x, c); });
  const Tensor m = x.amax({-1}, false);
  EXPECT_TRUE(all_close(r[0], m, 1e-6, 1e-6, /*equal_nan=*/true));
  EXPECT_TRUE(
      all_close(r[1], (x - x.amax({-1}, true)).exp().sum({-1}, false).log() + m, 1e-5, 1e-6, true));
  EXPECT_TRUE(all_close(r[2], x.amin({1}, true) * c, 1e-6, 1e-6, true));
  const CompiledGraph gs = stats.graph();
  // max, softmax's sum and min read x: one kernel (horizontal fusion), three results.
  ASSERT_EQ(fused_kernels(gs).size(), 1u) << gs.text;
  EXPECT_EQ(gs.kernel_launches(), 1) << gs.text;
  EXPECT_EQ(fused_kernels(gs)[0]->writes.size(), 3u) << gs.text;
  EXPECT_TRUE(std::isnan(r[0][3].item<float>()));
  EXPECT_FALSE(std::isnan(r[0][4].item<float>()));
  // Reductions over another dimension stay as called.
  auto cols =
      compile([](const Tensor& x) { return (x - x.amax({0}, true)).exp(); }, fullgraph("columns"));
  Tensor y = randn({30, 40});
  EXPECT_TRUE(all_close(cols(y), (y - y.amax({0}, true)).exp()));
  EXPECT_EQ(cols.graph().find("aten::amax").size(), 1u) << cols.graph().text;
  // A transposed input: each row read through its strides (rows of stride 1, elements of 40).
  auto tr = compile(softmax_ops, fullgraph("transposed_rows"));
  Tensor t = randn({40, 30}).t();
  Tensor gt;
  run_poisoned([&] { gt = tr(t); });
  EXPECT_TRUE(all_close(gt, softmax_ops(t.contiguous()), 1e-5, 1e-7));
  EXPECT_EQ(fused_kernels(tr.graph()).size(), 1u) << tr.graph().text;
}

// Rows longer than a program holds (16384) are passes over the row in blocks: softmax reads its
// row three times, layer norm's statistics come from a pass each; the results are eager's, per-row
// results and NaNs included, for any row length once the length is dynamic.
TEST(CompileRows, RowsLongerThanABlockArePassesOverTheRow) {
  auto sm = compile(softmax_ops, fullgraph("long_softmax"));
  Tensor x = randn({3, 20000}) * 4;
  Tensor got;
  run_poisoned([&] { got = sm(x); });
  EXPECT_TRUE(all_close(got, softmax_ops(x), 1e-5, 1e-8));
  EXPECT_TRUE(all_close(f64(got), softmax_ops(f64(x)), 1e-5, 1e-8));
  CompiledGraph g = sm.graph();
  EXPECT_EQ(g.kernel_launches(), 1) << g.text;
  ASSERT_EQ(fused_kernels(g).size(), 1u) << g.text;
  EXPECT_EQ(fused_kernels(g)[0]->grid[0], "3") << g.text;  // still a program per row
  // Per-row results with NaNs, a per-row input, max, min and a sum of exponentials.
  auto stats = compile(
      [](const Tensor& x, const Tensor& c) {
        const Tensor m = x.amax({-1}, false);
        const Tensor s = (x - x.amax({-1}, true)).exp().sum({-1}, false);
        return std::vector<Tensor>{m, s.log() + m, (x.abs() + 1).amin({1}, true) * c,
                                   x.mean({1}) - c.view({4})};
      },
      fullgraph("long_stats"));
  Tensor y = randn({4, 17000}), c = randn({4, 1});
  y.select(0, 2).select(0, 16999).fill_(NAN);  // in the last block of row 2
  std::vector<Tensor> r;
  run_poisoned([&] { r = stats(y, c); });
  const Tensor m = y.amax({-1}, false);
  EXPECT_TRUE(all_close(r[0], m, 1e-6, 1e-6, true));
  EXPECT_TRUE(
      all_close(r[1], (y - y.amax({-1}, true)).exp().sum({-1}, false).log() + m, 1e-5, 1e-6, true));
  EXPECT_TRUE(all_close(r[2], (y.abs() + 1).amin({1}, true) * c, 1e-6, 1e-6, true));
  EXPECT_TRUE(all_close(r[3], y.mean({1}) - c.view({4}), 1e-5, 1e-6, true));
  EXPECT_TRUE(std::isnan(r[0][2].item<float>()) && std::isnan(r[2][2][0].item<float>()));
  EXPECT_FALSE(std::isnan(r[0][1].item<float>()) || std::isnan(r[2][1][0].item<float>()));
  EXPECT_EQ(stats.graph().kernel_launches(), 1) << stats.graph().text;
  // The row operators with weights, in float32 and bfloat16.
  const int64_t N = 20000;
  auto ops = compile(
      [](const Tensor& x, const Tensor& w, const Tensor& b) {
        const int64_t n = 20000;
        return std::vector<Tensor>{log_softmax(x, 1), layer_norm(x, {n}, w, b, 1e-3),
                                   rms_norm(x, {n}, w), softmax(x * 0.5 + b, -1)};
      },
      fullgraph("long_row_ops"));
  Tensor xo = randn({5, N}) * 2 + 0.5, w = randn({N}), b = randn({N});
  run_poisoned([&] { r = ops(xo, w, b); });
  EXPECT_TRUE(all_close(r[0], log_softmax(xo, 1), 1e-5, 1e-5));
  EXPECT_TRUE(all_close(f64(r[1]), layer_norm(f64(xo), {N}, f64(w), f64(b), 1e-3), 1e-4, 1e-5));
  EXPECT_TRUE(all_close(f64(r[2]), rms_norm(f64(xo), {N}, f64(w)), 1e-4, 1e-5));
  EXPECT_TRUE(all_close(r[3], softmax(xo * 0.5 + b, -1), 1e-5, 1e-8));
  g = ops.graph();
  EXPECT_EQ(fused_kernels(g).size(), 1u) << g.text;
  EXPECT_EQ(g.kernel_launches(), 1) << g.text;
  const TensorOptions bf16 = TensorOptions().dtype(DType::BFloat16);
  auto bf = compile([](const Tensor& x, const Tensor& w) { return layer_norm(x, {20000}, w); },
                    fullgraph("long_bf16_norm"));
  Tensor xb = randn({3, N}, bf16), wb = randn({N}, bf16);
  Tensor gb;
  run_poisoned([&] { gb = bf(xb, wb); });
  EXPECT_TRUE(all_close(f64(gb), f64(layer_norm(xb, {N}, wb)), 1e-2, 1e-2));
  // Dynamic row lengths: a long row first (passes, no length guard), then any length.
  CompileOptions dyn = fullgraph("dynamic_long_softmax");
  dyn.dynamic = true;
  auto ds = compile(softmax_ops, dyn);
  for (int64_t cols : {18000, 40000, 5, 4096, 4097}) {
    Tensor z = randn({2, cols}) * 3;
    Tensor gz;
    run_poisoned([&] { gz = ds(z); });
    EXPECT_TRUE(all_close(gz, softmax_ops(z), 1e-5, 1e-8)) << cols;
  }
  EXPECT_EQ(ds.stats().graphs, 1) << ds.graph().text;
  // Inputs read through their strides, with dynamic sizes and strides (index-map parameters).
  auto dt =
      compile([](const Tensor& a, const Tensor& b) { return softmax_ops(a.t() * 2 + b); }, dyn);
  for (int64_t cols : {1000, 18000, 30000}) {
    Tensor a = randn({cols, 2}), b = randn({2, cols});
    Tensor gz;
    run_poisoned([&] { gz = dt(a, b); });
    EXPECT_TRUE(all_close(gz, softmax_ops(a.t() * 2 + b), 1e-5, 1e-8)) << cols;
  }
  EXPECT_EQ(fused_kernels(dt.graph()).size(), 1u) << dt.graph().text;
}

// The built-in row operators compile to the same row kernels, alone or with the ops around them:
// `softmax(x * scale + mask)` is one pass.
// Sums over the rows of a row kernel's values (a norm's weight and bias gradients) are added in
// its programs, ROWS rows each, into partial sums per program that a small sum adds: the [R, N]
// operands never reach memory. Row counts that ROWS does not divide (the last program's rows past
// R add nothing), one row, dynamic row counts other than the one ROWS was chosen for, bfloat16
// (float32 partials, the sum rounded once), 3-d inputs summed over both leading dims in any order;
// what stays a sum of its own; TESSERA_COLUMN_SUMS=0.
TEST(CompileRows, ColumnSumsOfARowKernelAreAddedInItsPrograms) {
  auto fn = [](const Tensor& x, const Tensor& w) {
    const Tensor y = (x - x.mean({-1}, true)) * w;
    return std::make_tuple(y.exp().sum({0}), (y * y).sum({0}), y.sum({-1}));
  };
  auto compiled = compile(fn, fullgraph("column_sums"));
  for (int64_t rows : {1, 2053, 9, 8, 1000, 3}) {  // static, then dynamic rows
    for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16}) {
      Tensor x = randn({rows, 37}).to(dt), w = randn({37}).to(dt);
      std::tuple<Tensor, Tensor, Tensor> got;
      run_poisoned([&] { got = compiled(x, w); });
      const CompiledGraph g = compiled.graph();
      if (dt == DType::BFloat16) {  // each step rounded as eager rounds it: eager's sums, reordered
        const auto [a, b, c] = fn(x, w);
        EXPECT_TRUE(all_close(std::get<0>(got), a, 1e-2, 1e-2)) << rows;
        EXPECT_TRUE(all_close(std::get<1>(got), b, 1e-2, 1e-2)) << rows;
        EXPECT_TRUE(all_close(std::get<2>(got), c, 1e-2, 1e-2)) << rows;
        EXPECT_EQ(std::get<0>(got).dtype(), dt);
        EXPECT_EQ(g.find("aten::_to_copy").size(), 2u) << g.text;
        EXPECT_EQ(fused_kernels(g)[0]->writes.size(), 3u) << g.text;
        continue;
      }
      const auto [a, b, c] = fn(f64(x), f64(w));
      const double tol = dt == DType::Float32 ? 1e-5 : 1e-12;
      EXPECT_TRUE(all_close(f64(std::get<0>(got)), a, tol, tol)) << rows << dtype_name(dt);
      EXPECT_TRUE(all_close(f64(std::get<1>(got)), b, tol, tol)) << rows << dtype_name(dt);
      EXPECT_TRUE(all_close(f64(std::get<2>(got)), c, tol, 1e-4)) << rows << dtype_name(dt);
      EXPECT_EQ(std::get<0>(got).dtype(), dt);
      ASSERT_EQ(fused_kernels(g).size(), 1u) << g.text;
      // The per-row sum and two partial sums: no [R, 37] value is stored.
      EXPECT_EQ(fused_kernels(g)[0]->writes.size(), 3u) << g.text;
      EXPECT_NE(g.text.find("ROWS="), std::string::npos) << g.text;
      EXPECT_EQ(g.find("aten::sum.dim_IntList").size(), 2u) << g.text;
    }
  }
  // 3-d, the leading dims in either order, negative or not.
  auto three = compile(
      [](const Tensor& x) {
        const Tensor y = x.softmax(-1);
        return std::make_tuple(y.sum({0, 1}), (y * x).sum({-2, 0}), y);
      },
      fullgraph("column_sums_3d"));
  Tensor x3 = randn({5, 67, 24});
  std::tuple<Tensor, Tensor, Tensor> r3;
  run_poisoned([&] { r3 = three(x3); });
  const Tensor y3 = f64(x3).softmax(-1);
  EXPECT_TRUE(all_close(f64(std::get<0>(r3)), y3.sum({0, 1}), 1e-5, 1e-5));
  EXPECT_TRUE(all_close(f64(std::get<1>(r3)), (y3 * f64(x3)).sum({-2, 0}), 1e-5, 1e-5));
  EXPECT_TRUE(all_close(f64(std::get<2>(r3)), y3, 1e-5, 1e-7));
  ASSERT_EQ(fused_kernels(three.graph()).size(), 1u) << three.graph().text;
  EXPECT_EQ(fused_kernels(three.graph())[0]->writes.size(), 3u) << three.graph().text;
  // Stay sums of their own: keepdim, one leading dim of three, an input's sum.
  auto stay = compile(
      [](const Tensor& x) {
        const Tensor y = x.softmax(-1);
        return std::make_tuple(y.sum({0, 1}, true), y.sum({0}), x.sum({0, 1}));
      },
      fullgraph("column_sums_stay"));
  std::tuple<Tensor, Tensor, Tensor> rs;
  run_poisoned([&] { rs = stay(x3); });
  EXPECT_TRUE(all_close(std::get<0>(rs), x3.softmax(-1).sum({0, 1}, true), 1e-5, 1e-5));
  EXPECT_TRUE(all_close(std::get<1>(rs), x3.softmax(-1).sum({0}), 1e-5, 1e-5));
  EXPECT_TRUE(all_close(std::get<2>(rs), x3.sum({0, 1}), 1e-5, 1e-5));
  EXPECT_EQ(stay.graph().text.find("ROWS="), std::string::npos) << stay.graph().text;
  EXPECT_EQ(stay.graph().find("aten::sum.dim_IntList").size(), 3u) << stay.graph().text;
  // Switched off: the same function, a kernel and two sums of [R, N] values it stores.
  ScopedEnv off("TESSERA_COLUMN_SUMS", "0");
  auto unfolded = compile(fn, fullgraph("column_sums_off"));
  Tensor x = randn({100, 37}), w = randn({37});
  std::tuple<Tensor, Tensor, Tensor> ru;
  run_poisoned([&] { ru = unfolded(x, w); });
  EXPECT_TRUE(all_close(std::get<0>(ru), std::get<0>(fn(x, w)), 1e-5, 1e-5));
  EXPECT_EQ(unfolded.graph().text.find("ROWS="), std::string::npos) << unfolded.graph().text;
  ASSERT_EQ(fused_kernels(unfolded.graph()).size(), 1u) << unfolded.graph().text;
  EXPECT_EQ(fused_kernels(unfolded.graph())[0]->writes.size(), 3u) << unfolded.graph().text;
}

TEST(CompileRows, SoftmaxAndNormOperatorsBecomeRowKernelsWithTheirNeighbours) {
  auto attn =
      compile([](const Tensor& s, const Tensor& mask) { return softmax(s * 0.125 + mask, -1); },
              fullgraph("scaled_softmax"));
  Tensor sc = randn({3, 40, 77}) * 8, mask = randn({77});
  Tensor got;
  run_poisoned([&] { got = attn(sc, mask); });
  EXPECT_TRUE(all_close(got, softmax(sc * 0.125 + mask, -1), 1e-5, 1e-7));
  EXPECT_TRUE(all_close(f64(got), softmax(f64(sc) * 0.125 + f64(mask), -1), 1e-5, 1e-7));
  CompiledGraph g = attn.graph();
  EXPECT_EQ(g.kernel_launches(), 1) << g.text;
  ASSERT_EQ(fused_kernels(g).size(), 1u) << g.text;
  EXPECT_EQ(fused_kernels(g)[0]->target, "fused_mul_add_softmax");
  // Alone, each is a kernel of its own; weight and bias optional; rms_norm's default eps.
  auto ops = compile(
      [](const Tensor& x, const Tensor& w, const Tensor& b) {
        return std::vector<Tensor>{log_softmax(x, 1), layer_norm(x, {96}, w, b, 1e-3),
                                   layer_norm(x, {96}), rms_norm(x, {96}, w),
                                   rms_norm(x, {96}, std::nullopt, 1e-2)};
      },
      fullgraph("row_ops"));
  Tensor x = randn({50, 96}) * 2 + 0.5, w = randn({96}), b = randn({96});
  std::vector<Tensor> r;
  run_poisoned([&] { r = ops(x, w, b); });
  EXPECT_TRUE(all_close(r[0], log_softmax(x, 1), 1e-5, 1e-5));
  EXPECT_TRUE(all_close(r[1], layer_norm(x, {96}, w, b, 1e-3), 1e-4, 1e-5));
  EXPECT_TRUE(all_close(r[2], layer_norm(x, {96}), 1e-4, 1e-5));
  EXPECT_TRUE(all_close(r[3], rms_norm(x, {96}, w), 1e-4, 1e-5));
  EXPECT_TRUE(all_close(r[4], rms_norm(x, {96}, std::nullopt, 1e-2), 1e-4, 1e-5));
  g = ops.graph();  // five row ops of x: one kernel that reads x once
  EXPECT_EQ(fused_kernels(g).size(), 1u) << g.text;
  EXPECT_EQ(g.kernel_launches(), 1) << g.text;
  // A NaN row stays NaN; a bfloat16 norm rounds once, at the end.
  Tensor xn = x.clone();
  xn.select(0, 2).select(0, 5).fill_(NAN);
  std::vector<Tensor> rn;
  run_poisoned([&] { rn = ops(xn, w, b); });
  EXPECT_TRUE(all_close(rn[0], log_softmax(xn, 1), 1e-5, 1e-5, true));
  EXPECT_TRUE(all_close(rn[1], layer_norm(xn, {96}, w, b, 1e-3), 1e-4, 1e-5, true));
  auto bf = compile([](const Tensor& x, const Tensor& w) { return layer_norm(x, {96}, w); },
                    fullgraph("bf16_norm"));
  const TensorOptions bf16 = TensorOptions().dtype(DType::BFloat16);
  Tensor xb = randn({30, 96}, bf16), wb = randn({96}, bf16);
  Tensor gb;
  run_poisoned([&] { gb = bf(xb, wb); });
  EXPECT_TRUE(all_close(f64(gb), f64(layer_norm(xb, {96}, wb)), 1e-2, 1e-2));
  EXPECT_EQ(fused_kernels(bf.graph()).size(), 1u);
  // Over another dimension the operator stays as called.
  auto cols = compile([](const Tensor& x) { return softmax(x, 0); }, fullgraph("softmax_dim0"));
  EXPECT_TRUE(all_close(cols(x), softmax(x, 0)));
  EXPECT_TRUE(fused_kernels(cols.graph()).empty()) << cols.graph().text;
}

}  // namespace

TEST(CompilePointwise, AFusedOutputTakesTheMemoryOfAnInputThatDies) {
  // h (a matmul's result) is read by the fused chain and by nothing after it: the chain's result
  // is stored in h's memory (one allocation fewer); x, which the caller holds, is not. A kernel
  // of two outputs keeps both apart (the first's stores could overwrite what the second reads).
  auto fn = [](const Tensor& x, const Tensor& w, const Tensor& bias) {
    const Tensor h = matmul(x, w);
    const Tensor h2 = matmul(x, w * 2);
    return std::make_tuple(((h + bias).relu() * 2 - x).exp(), h2.sin() + 1, h2.cos() * 2);
  };
  auto compiled = compile(fn, fullgraph("in_place"));
  Tensor x = randn({64, 32}), w = randn({32, 32}) * 0.1, bias = randn({32});
  std::tuple<Tensor, Tensor, Tensor> got;
  run_poisoned([&] { got = compiled(x, w, bias); });
  const auto [a, b, c] = fn(x, w, bias);
  EXPECT_TRUE(all_close(std::get<0>(got), a, 1e-5, 1e-6));
  EXPECT_TRUE(all_close(std::get<1>(got), b, 1e-5, 1e-6));
  EXPECT_TRUE(all_close(std::get<2>(got), c, 1e-5, 1e-6));
  EXPECT_TRUE(all_close(x, x.clone()));  // the caller's input is intact
  const CompiledGraph g = compiled.graph();
  const auto fused = fused_kernels(g);
  ASSERT_FALSE(fused.empty()) << g.text;
  const auto* mm = g.find("aten::matmul").at(0);
  bool in_place = false;
  for (const auto* k : fused)
    for (int w_id : k->writes) in_place = in_place || w_id == mm->outputs[0];
  EXPECT_TRUE(in_place) << g.text;
  const auto* mm2 = g.find("aten::matmul").at(1);
  for (const auto* k : fused)
    for (int w_id : k->writes) EXPECT_NE(w_id, mm2->outputs[0]) << g.text;
  // x's memory is never written: it is the caller's.
  for (const auto& n : g.nodes)
    for (int w_id : n.writes) EXPECT_NE(w_id, g.inputs[0]) << g.text;
}
