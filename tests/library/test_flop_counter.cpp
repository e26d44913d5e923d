// FlopCounterMode (after PyTorch's test_flop_counter.py): per-operator and total counts,
// backward counts, scopes and their nesting, custom formulas, nested counters, and tessera's
// derived counts for operators whose kernels have no formula.
#include <gtest/gtest.h>

#include <sstream>

#include "tessera/library.h"
#include "tessera/tessera.h"
#include "testing.h"

using namespace tessera;
using namespace tessera::testing;
namespace tl = tessera::tl;

namespace {

FlopCounterMode::Options quiet() {
  FlopCounterMode::Options o;
  o.display = false;
  return o;
}

TL_JIT(exp_kernel, tl::Ptr x, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = offs < n;
  // Per element: exp, mul, add = 3 FLOPs; 4 bytes read, 4 written.
  auto v = tl::load(x + offs, m);
  tl::store(out + offs, tl::exp(v) * 2.0 + 1.0, m);
}

TL_JIT(row_sum_kernel, tl::Ptr x, tl::Ptr out, tl::Int n_cols, tl::Const BLOCK) {
  // A runtime loop: its trip count comes from the launch's n_cols.
  auto row = tl::program_id(0);
  tl::Var acc = tl::zeros({BLOCK}, tl::float32);
  tl::range(0, n_cols, BLOCK, [&](tl::Tile start) {
    auto cols = start + tl::arange(0, BLOCK);
    acc = acc + tl::load(x + row * n_cols + cols, cols < n_cols, 0.0);
  });
  tl::store(out + row, tl::sum(acc, 0));
}

auto& myexp() {
  static auto op = library::triton_op("flopslib::myexp", [](const Tensor& x) {
    Tensor out = empty_like(x);
    auto n = x.numel();
    library::wrap_triton(exp_kernel)[{tl::cdiv(n, 128)}](x, out, n, tl::meta("BLOCK", 128));
    return out;
  });
  return op;
}

TEST(FlopCounter, MatmulCountsAndTotal) {
  Tensor a = randn({8, 16}), b = randn({16, 4});
  FlopCounterMode counter(quiet());
  matmul(a, b);
  matmul(randn({3, 8, 16}), b);  // batched
  EXPECT_EQ(counter.get_total_flops(), 2 * 8 * 16 * 4 + 3 * 2 * 8 * 16 * 4);
  auto counts = counter.get_flop_counts();
  EXPECT_EQ(counts["Global"]["aten::matmul"], counter.get_total_flops());
  EXPECT_TRUE(counter.counts().at("Global").at("aten::matmul").declared);
  EXPECT_EQ(counter.counts().at("Global").at("aten::matmul").calls, 2);
}

TEST(FlopCounter, BackwardIsCountedSeparately) {
  Tensor a = randn({8, 16}).requires_grad_(), b = randn({16, 4}).requires_grad_();
  FlopCounterMode counter(quiet());
  Tensor y = matmul(a, b);
  y.sum().backward();
  const auto& c = counter.counts().at("Global").at("aten::matmul");
  EXPECT_EQ(c.forward_flops, 2 * 8 * 16 * 4);
  EXPECT_EQ(c.backward_flops, 2 * c.forward_flops);  // one matmul per input
}

TEST(FlopCounter, LinearAndNormsHaveFormulas) {
  FlopCounterMode counter(quiet());
  linear(randn({5, 6}), randn({7, 6}), randn({7}));  // decomposes into matmul
  layer_norm(randn({4, 10}), {10}, ones({10}), zeros({10}));
  rms_norm(randn({4, 10}), {10});
  auto g = counter.get_flop_counts()["Global"];
  EXPECT_EQ(g["aten::matmul"], 2 * 5 * 6 * 7);
  EXPECT_EQ(g["aten::layer_norm"], 7 * 40);
  EXPECT_EQ(g["aten::rms_norm"], 3 * 40);
}

TEST(FlopCounter, ScopesNestAndIncludeTheirChildren) {
  Tensor a = randn({4, 4});
  FlopCounterMode counter(quiet());
  matmul(a, a);
  {
    FlopCounterMode::Scope outer("encoder");
    matmul(a, a);
    {
      FlopCounterMode::Scope inner("attention");
      matmul(a, a);
    }
  }
  const int64_t one = 2 * 4 * 4 * 4;
  auto c = counter.get_flop_counts();
  EXPECT_EQ(c["Global"]["aten::matmul"], 3 * one);
  EXPECT_EQ(c["encoder"]["aten::matmul"], 2 * one);
  EXPECT_EQ(c["encoder.attention"]["aten::matmul"], one);
  const std::string t = counter.table();
  EXPECT_NE(t.find("encoder"), std::string::npos) << t;
  EXPECT_EQ(t.find("attention"), std::string::npos) << "depth 2 hides the second level\n" << t;
}

TEST(FlopCounter, NestedCountersBothCount) {
  Tensor a = randn({4, 4});
  FlopCounterMode outer(quiet());
  {
    FlopCounterMode inner(quiet());
    matmul(a, a);
    EXPECT_EQ(inner.get_total_flops(), 128);
  }
  matmul(a, a);
  EXPECT_EQ(outer.get_total_flops(), 256);
}

TEST(FlopCounter, DerivedFromKernelsWithoutAFormula) {
  Tensor x = randn({1000});
  FlopCounterMode counter(quiet());
  myexp()(x);
  const auto& c = counter.counts().at("Global").at("flopslib::myexp");
  EXPECT_TRUE(c.derived);
  EXPECT_FALSE(c.declared);
  // 8 programs of 128 lanes (full tiles are counted): 3 FLOPs and 8 bytes per lane.
  EXPECT_EQ(c.forward_flops, 8 * 128 * 3);
  EXPECT_DOUBLE_EQ(c.bytes, 8 * 128 * 8.0);
  EXPECT_EQ(c.calls, 1);
  EXPECT_NE(counter.table().find("derived"), std::string::npos);
}

TEST(FlopCounter, DerivedCountsEvaluateRuntimeLoopBounds) {
  Tensor x = randn({6, 300}), out = empty({6});
  FlopCounterMode counter(quiet());
  row_sum_kernel[{6}](x, out, 300, tl::meta("BLOCK", 64));  // outside any operator
  const auto& c = counter.counts().at("Global").at("kernel row_sum_kernel");
  // Per row: 5 trips of a 64-wide add, then a 64-element sum.
  EXPECT_EQ(c.forward_flops, 6 * (5 * 64 + 64));
  EXPECT_FALSE(c.inexact);
  EXPECT_TRUE(all_close(out, x.sum({1}), 1e-4, 1e-4));
}

TEST(FlopCounter, AFormulaReplacesTheDerivedCount) {
  auto op = library::triton_op("flopslib::myexp2", [](const Tensor& x) { return myexp()(x) * 1; });
  register_flop_formula("flopslib::myexp2",
                        [](const std::vector<Shape>& in) { return numel(in[0]); });
  Tensor x = randn({1000});
  FlopCounterMode counter(quiet());
  op(x);
  const auto& g = counter.counts().at("Global");
  EXPECT_EQ(g.at("flopslib::myexp2").forward_flops, 1000);
  EXPECT_TRUE(g.at("flopslib::myexp2").declared);
  EXPECT_EQ(g.count("flopslib::myexp"), 0u);  // the inner op runs inside the counted one
}

TEST(FlopCounter, ARawFormulaSeesTheArgumentsThemselves) {
  // get_raw=True: the formula reads a scalar argument (the repeat count) and the result.
  auto op = library::custom_op("flopslib::repeat_exp",
                               [](const Tensor& x, int64_t times) {
                                 Tensor r = x;
                                 for (int64_t i = 0; i < times; ++i) r = r.exp();
                                 return r;
                               },
                               {.arg_names = {"x", "times"}});
  std::vector<int64_t> seen_times;
  register_raw_flop_formula("flopslib::repeat_exp", [&](const Stack& in, const Stack& out) {
    seen_times.push_back(in.at(1).to_int());
    return in.at(1).to_int() * out.at(0).to_tensor().numel().expect_int();
  });
  Tensor x = randn({10}) * 0.1;
  FlopCounterMode counter(quiet());
  Tensor y = op(x, 3);
  op(x, 2);
  EXPECT_TRUE(all_close(y, x.exp().exp().exp(), 1e-6, 1e-6));
  EXPECT_EQ(seen_times, (std::vector<int64_t>{3, 2}));
  const auto& g = counter.counts().at("Global");
  EXPECT_EQ(g.at("flopslib::repeat_exp").forward_flops, 3 * 10 + 2 * 10);
  EXPECT_TRUE(g.at("flopslib::repeat_exp").declared);
  EXPECT_EQ(g.count("aten::exp"), 0u);  // the declared op counts for its body
}

TEST(FlopCounter, PrintsATableOnExit) {
  std::ostringstream out;
  {
    FlopCounterMode::Options o;
    o.out = &out;
    FlopCounterMode counter(o);
    matmul(randn({2, 2}), randn({2, 2}));
  }
  EXPECT_NE(out.str().find("aten::matmul"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("100.00%"), std::string::npos) << out.str();
}

}  // namespace
