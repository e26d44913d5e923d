// Graph breaks without fullgraph: the function runs in segments, compiled graphs between the
// breaks (item(), data_ptr(), equal, a custom op without a fake kernel). Results equal eager's
// (computed in float64) on fresh random inputs; a segment traced the same way runs its compiled
// graph again; values the function holds across a break are a segment's results, the others
// stay inside its fused kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <thread>

#include "compile_testing.h"
#include "tessera/library.h"

using namespace tessera;
using namespace tessera::testing;
namespace tl = tessera::tl;

namespace {

TL_JIT(seg_add_kernel, tl::Ptr x_ptr, tl::Ptr y_ptr, tl::Ptr out_ptr, tl::Int n, tl::Const BLOCK) {
  auto offsets = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto mask = offsets < n;
  tl::store(out_ptr + offsets, tl::load(x_ptr + offsets, mask) + tl::load(y_ptr + offsets, mask),
            mask);
}

// The seed's add_fn: a fill, then a kernel that overwrites it.
Tensor add_fn(const Tensor& x, const Tensor& y) {
  Tensor out = zeros_like(x);
  const int64_t n = out.numel();
  seg_add_kernel[{tl::cdiv(n, 16)}](x, y, out, n, tl::meta("BLOCK", 16));
  return out;
}

CompileOptions named(std::string name) {
  CompileOptions o;
  o.name = std::move(name);
  return o;
}

// Rows of the graphs' nodes, for messages.
std::string listing(const std::vector<CompiledGraph>& gs) {
  std::string s;
  for (const auto& g : gs) s += g.text;
  return s;
}

// Operator nodes other than allocations.
int op_nodes(const CompiledGraph& g) {
  int n = 0;
  for (const auto& node : g.nodes)
    n += node.kind == CompiledGraph::Node::Kind::Op && node.target != "aten::empty";
  return n;
}

Tensor scaled_relu(const Tensor& x) {
  Tensor a = x.exp();
  Tensor total;
  {
    Tensor dropped = a * 2 + 1;  // dropped before the break: stays inside segment 1's kernel
    total = dropped.sum();
  }
  const double s = total.item<double>();
  TS_CHECK(std::isfinite(s), ValueError) << "scaled_relu: the sum is " << s;
  return ((a - 1) * 3).relu();
}

TEST(Segments, AnItemReadSplitsTheFunctionIntoCompiledSegments) {
  auto fn = compile(scaled_relu, named("scaled_relu"));
  for (int call = 0; call < 3; ++call) {
    Tensor x = randn({257});
    const Tensor x64 = x.to(DType::Float64);
    const Tensor want = ((x64.exp() - 1) * 3).relu();
    EXPECT_TRUE(all_close(fn(x), want.to(DType::Float32), 1e-5, 1e-5)) << call;
  }
  const auto st = fn.stats();
  EXPECT_TRUE(st.segmented);
  EXPECT_FALSE(st.eager);
  // Two segments, compiled once: the later calls traced to the same graphs.
  const auto gs = fn.graphs();
  ASSERT_EQ(gs.size(), 2u) << listing(gs);
  EXPECT_NE(gs[0].name.find("segment 1, to item()"), std::string::npos) << gs[0].name;
  EXPECT_NE(gs[0].name.find("test_segments.cpp"), std::string::npos) << gs[0].name;
  EXPECT_NE(gs[1].name.find("segment 2, to the return"), std::string::npos) << gs[1].name;
  // Segment 1 returns what the function still holds (a) and what item() reads, not `dropped`
  // (a temporary of the full expression that reads, or a variable in scope, would be).
  EXPECT_EQ(gs[0].outputs.size(), 2u) << gs[0].text;
  // Segment 2's pointwise chain is one generated kernel.
  EXPECT_EQ(gs[1].kernel_launches(), 1) << gs[1].text;
  EXPECT_EQ(op_nodes(gs[1]), 0) << gs[1].text;
}

TEST(Segments, ANumberReadIntoArithmeticIsAnInputOfTheNextSegment) {
  // Gradient clipping's shape: a norm read, a scale computed in C++, the tensors scaled.
  auto fn = compile(
      [](const Tensor& g) {
        const double norm = (g * g).sum().sqrt().item<double>();
        const double scale = norm > 1.0 ? 1.0 / norm : 1.0;
        return (g * scale + 0.5) / (scale + 1.0);  // three scalars that change per call
      },
      named("clip"));
  for (int call = 0; call < 4; ++call) {
    Tensor g = randn({16}) * (call + 1);
    const Tensor g64 = g.to(DType::Float64);
    const double norm = (g64 * g64).sum().sqrt().item<double>();
    const double scale = norm > 1.0 ? 1.0 / norm : 1.0;
    EXPECT_TRUE(
        all_close(fn(g), ((g64 * scale + 0.5) / (scale + 1.0)).to(DType::Float32), 1e-5, 1e-5))
        << call;
  }
  const auto gs = fn.graphs();
  ASSERT_EQ(gs.size(), 2u) << listing(gs);  // no recompile for new values
  EXPECT_EQ(gs[1].kernel_launches(), 1) << gs[1].text;
  EXPECT_EQ(gs[1].inputs.size(), 4u) << gs[1].text;  // g and the three scalars
}

TEST(Segments, ANumberReadIntoAComparisonOrWhereIsAnInputOfTheNextSegment) {
  // Magnitude pruning's shape: a threshold read from the data, the tensor compared with it and
  // the small elements replaced by a number that changes too.
  auto fn = compile(
      [](const Tensor& w) {
        const double t = w.abs().amax().item<double>() * 0.5;
        const Tensor keep = w.abs() >= t;
        return std::make_tuple(where(keep, w, t * 0.01), (w > t).to(DType::Float32) + (w < -t),
                               eq(w, t));
      },
      named("prune"));
  for (int call = 0; call < 4; ++call) {
    Tensor w = randn({64}) * (call + 1);
    w[3].fill_(w.abs().amax().item<double>() * 0.5);  // equal to the threshold: kept, eq true
    const double t = w.abs().amax().item<double>() * 0.5;
    const auto [pruned, sign, at] = fn(w);
    EXPECT_TRUE(equal(pruned, where(w.abs() >= t, w, t * 0.01))) << call;
    EXPECT_TRUE(equal(sign, (w > t).to(DType::Float32) + (w < -t))) << call;
    EXPECT_TRUE(equal(at, eq(w, t))) << call;
    EXPECT_TRUE(at[3].item<bool>()) << call;
  }
  const auto gs = fn.graphs();
  ASSERT_EQ(gs.size(), 2u) << listing(gs);  // no recompile for new thresholds
  for (const char* op : {"aten::ge.Scalar", "aten::gt.Scalar", "aten::lt.Scalar", "aten::eq.Scalar",
                         "aten::where.ScalarOther"})
    EXPECT_EQ(gs[1].text.find(op), std::string::npos) << op << "\n" << gs[1].text;
}

TEST(Segments, ANumberReadIntoASizeRecompilesTheNextSegmentExplained) {
  auto fn = compile(
      [](const Tensor& x) {
        const int64_t k = (x > 0.0).sum().item<int64_t>();
        return x.narrow(0, 0, k) * 2;  // k is a size: a constant of the next segment
      },
      named("narrow"));
  Tensor x = randn({64});
  x[0].fill_(1.0);
  EXPECT_TRUE(all_close(fn(x), x.narrow(0, 0, (x > 0.0).sum().item<int64_t>()) * 2));
  setenv("TESSERA_LOGS", "recompiles", 1);
  reload_knobs();
  ::testing::internal::CaptureStderr();
  Tensor x2 = x.abs() + 0.5;  // every element positive: another k
  const Tensor got = fn(x2);
  const std::string log = ::testing::internal::GetCapturedStderr();
  unsetenv("TESSERA_LOGS");
  reload_knobs();
  EXPECT_TRUE(all_close(got, x2 * 2));
  EXPECT_NE(log.find("segment 2, to the return: a new graph (`"), std::string::npos) << log;
  EXPECT_NE(log.find("aten::narrow"), std::string::npos) << log;
  EXPECT_EQ(fn.graphs().size(), 3u) << listing(fn.graphs());
}

TEST(Segments, ABranchOnTheValueReadCompilesEachPathOnce) {
  auto fn = compile(
      [](const Tensor& x) {
        if (x.sum().item<double>() > 0) return (x * 2).abs();
        return (x * 3).neg();
      },
      named("branch"));
  for (int call = 0; call < 6; ++call) {
    Tensor x = randn({64}) + (call % 2 ? 5.0 : -5.0);
    const Tensor x64 = x.to(DType::Float64);
    const Tensor want = x64.sum().item<double>() > 0 ? (x64 * 2).abs() : (x64 * 3).neg();
    EXPECT_TRUE(all_close(fn(x), want.to(DType::Float32))) << call;
  }
  // One first segment (the sum) and one second per path.
  EXPECT_EQ(fn.graphs().size(), 3u) << listing(fn.graphs());
  EXPECT_FALSE(fn.stats().eager);
}

TEST(Segments, ALoopOfBreaksMutationsAndEqualAgreeWithEager) {
  auto body = [](const Tensor& x, Tensor acc) {
    Tensor y = x;
    int steps = 0;
    while (y.abs().amax().item<double>() > 0.5 && steps < 10) {  // a break per step
      y = y * 0.5;
      acc.add_(y);  // the argument mutated in every segment
      ++steps;
    }
    const bool same = equal(y, x);  // a data-dependent operator between segments
    return std::make_tuple(y + steps, same);
  };
  auto fn = compile(body, named("halving"));
  for (int call = 0; call < 3; ++call) {
    Tensor x = randn({33}) * 4;
    Tensor acc = zeros({33}), acc_eager = zeros({33});
    auto [got, same] = fn(x, acc);
    auto [want, same_eager] = body(x, acc_eager);
    EXPECT_TRUE(all_close(got, want)) << call;
    EXPECT_TRUE(all_close(acc, acc_eager)) << call;
    EXPECT_EQ(same, same_eager);
  }
  EXPECT_TRUE(fn.stats().segmented);
}

TEST(Segments, ACustomOpWithoutAFakeKernelRunsBetweenSegments) {
  static auto nofake =
      library::custom_op("segmentlib::nofake", [](const Tensor& x) -> Tensor { return x * 3 - 1; });
  auto fn = compile([](const Tensor& x) -> Tensor { return nofake(x.sin() + 1).cos() * 2; },
                    named("nofake"));
  for (int call = 0; call < 2; ++call) {
    Tensor x = randn({40});
    const Tensor x64 = x.to(DType::Float64);
    const Tensor want = ((x64.sin() + 1) * 3 - 1).cos() * 2;
    EXPECT_TRUE(all_close(fn(x), want.to(DType::Float32), 1e-5, 1e-5)) << call;
  }
  const auto gs = fn.graphs();
  ASSERT_EQ(gs.size(), 2u) << listing(gs);
  EXPECT_NE(gs[0].name.find("segmentlib::nofake"), std::string::npos) << gs[0].name;
  EXPECT_EQ(gs[1].kernel_launches(), 1) << gs[1].text;  // cos and mul in one kernel
  // A fake kernel that reads its input's values: the operator runs eagerly the same way.
  static auto reads = library::custom_op("segmentlib::reads_in_fake",
                                         [](const Tensor& x) -> Tensor { return x * 2; });
  reads.register_fake([](const Tensor& x) {
    TS_CHECK(x.sum().item<double>() == x.sum().item<double>(), ValueError) << "never";
    return empty_like(x);
  });
  auto fn2 =
      compile([](const Tensor& x) -> Tensor { return reads(x.exp()) + 1; }, named("reads_in_fake"));
  Tensor x = randn({40});
  EXPECT_TRUE(all_close(fn2(x), x.exp() * 2 + 1, 1e-5, 1e-5));
  EXPECT_TRUE(fn2.stats().segmented);
  EXPECT_NE(fn2.graphs().at(0).name.find("segmentlib::reads_in_fake"), std::string::npos);
}

TEST(Segments, DataPtrReadsTheValuesComputedSoFar) {
  auto fn = compile(
      [](const Tensor& x) {
        Tensor y = (x + 1).contiguous();
        const float* p = y.data_ptr<float>();
        return y * static_cast<double>(p[0] + p[1]);
      },
      named("data_ptr"));
  Tensor x = randn({8});
  const Tensor y = x.to(DType::Float64) + 1;
  const double s = y[0].item<double>() + y[1].item<double>();
  EXPECT_TRUE(all_close(fn(x), (y * s).to(DType::Float32), 1e-5, 1e-5));
  EXPECT_TRUE(fn.stats().segmented);
}

TEST(Segments, AReadAfterAnInPlaceWriteSeesTheWrite) {
  auto fn = compile(
      [](Tensor x) {
        Tensor s = x.sum();
        const double a = s.item<double>();  // s is bound to its real value here
        s.add_(1);                          // ... and written in the next segment
        const double b = s.item<double>();
        x.mul_(2);
        const float first = x.data_ptr<float>()[0];  // an argument written in this segment
        return x * (b - a) + static_cast<double>(first);
      },
      named("writes"));
  for (int call = 0; call < 2; ++call) {
    Tensor x = randn({12});
    const Tensor x0 = x.clone();
    const Tensor got = fn(x);
    EXPECT_TRUE(all_close(x, x0 * 2)) << call;
    EXPECT_TRUE(all_close(got, x0 * 2 + x0[0].item<double>() * 2, 1e-5, 1e-5)) << call;
  }
}

TEST(Segments, GradientsFlowThroughSegments) {
  auto fn = compile(
      [](const Tensor& x) {
        const double m = x.detach().abs().amax().item<double>();
        return (x.sin() / m).sum();
      },
      named("grad"));
  Tensor x = randn({16}).requires_grad_();
  fn(x).backward();
  Tensor x2 = x.detach().clone().requires_grad_();
  const double m = x2.detach().abs().amax().item<double>();
  (x2.sin() / m).sum().backward();
  EXPECT_TRUE(all_close(x.grad(), x2.grad(), 1e-6, 1e-6));
}

TEST(Segments, ASecondSizeMakesTheSegmentsDynamic) {
  auto fn = compile(
      [](const Tensor& x, const Tensor& w) {
        Tensor h = (x * w).relu();
        const double m = h.amax().item<double>();
        return (h * (1.0 / (m + 1.0))).narrow(0, 1, x.size(0) - 1);  // a symbolic size
      },
      named("dynamic"));
  for (int64_t n : {8, 12, 16, 20, 24}) {
    Tensor x = randn({n, 32}), w = randn({32});
    const Tensor h = (x * w).relu();
    const double m = h.amax().item<double>();
    EXPECT_TRUE(all_close(fn(x, w), (h * (1.0 / (m + 1.0))).narrow(0, 1, n - 1), 1e-5, 1e-5)) << n;
  }
  // The first size static (two segments), then one dynamic graph per segment for every other.
  const auto gs = fn.graphs();
  ASSERT_EQ(gs.size(), 4u) << listing(gs);
  EXPECT_NE(gs[2].text.find("s0"), std::string::npos) << gs[2].text;
  EXPECT_FALSE(fn.stats().eager);
}

TEST(Segments, NewSizesCompileNewSegmentsUpToTheLimitThenEager) {
  CompileOptions o = named("sizes");
  o.dynamic = false;      // a graph per size
  o.recompile_limit = 2;  // three graphs per segment position
  auto fn = compile(
      [](const Tensor& x) {
        const double s = x.sum().item<double>();
        return x * s;
      },
      o);
  for (int64_t n : {5, 6, 7, 8, 9}) {
    Tensor x = randn({n});
    EXPECT_TRUE(all_close(fn(x), x * x.sum().item<double>(), 1e-5, 1e-5)) << n;
  }
  const auto st = fn.stats();
  EXPECT_TRUE(st.eager) << "past three graphs per position the function runs eagerly";
  EXPECT_LE(fn.graphs().size(), 6u) << listing(fn.graphs());
}

TEST(Segments, UserKernelsOnBothSidesOfABreak) {
  auto fn = compile(
      [](const Tensor& x, const Tensor& y) {
        Tensor s = add_fn(x, y);  // segment 1: the fill elided, the kernel
        if (s.amax().item<double>() > 100) return s;
        return add_fn(s, x).relu();  // segment 2: the kernel with relu at its stores
      },
      named("kernels"));
  for (int call = 0; call < 2; ++call) {
    Tensor x = randn({100}), y = randn({100});
    EXPECT_TRUE(all_close(fn(x, y), (x + y + x).relu())) << call;
  }
  const auto gs = fn.graphs();
  ASSERT_EQ(gs.size(), 2u) << listing(gs);
  EXPECT_EQ(gs[0].kernel_launches(), 1) << gs[0].text;
  EXPECT_FALSE(gs[0].find("aten::empty_like").empty() && gs[0].find("aten::empty").empty())
      << gs[0].text;  // the zeros became an allocation
  EXPECT_EQ(gs[1].find("seg_add_kernel+relu").size(), 1u) << gs[1].text;
}

TEST(Segments, ConcurrentCallsShareTheCompiledSegments) {
  auto fn = compile(scaled_relu, named("threads"));
  fn(randn({64}));
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        Tensor x = randn({64});
        if (!allclose(fn(x), ((x.exp() - 1) * 3).relu(), 1e-5, 1e-5)) ++bad;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(fn.graphs().size(), 2u);
}

TEST(Segments, AnErrorAfterABreakReachesTheCallerAndTheNextCallRuns) {
  auto fn = compile(scaled_relu, named("throws"));
  Tensor inf = full({8}, 1000.0);  // exp overflows: the check after the read throws
  const std::string msg = error_of<ValueError>([&] { fn(inf); });
  EXPECT_NE(msg.find("scaled_relu: the sum is inf"), std::string::npos) << msg;
  Tensor x = randn({8});
  EXPECT_TRUE(all_close(fn(x), ((x.exp() - 1) * 3).relu(), 1e-5, 1e-5));
}

TEST(Segments, FullgraphStillRefusesTheBreak) {
  auto fn = compile(scaled_relu, fullgraph("strict"));
  const std::string msg = error_of<CompileError>([&] { fn(randn({4})); });
  EXPECT_NE(msg.find("reading tensor data"), std::string::npos) << msg;
  EXPECT_FALSE(fn.stats().segmented);
}

}  // namespace
