// Memory planning (graph.h plan_memory): a compiled call's intermediates in one arena per device,
// values whose lives do not overlap sharing bytes, results and inputs never in it; operator
// results written through `.out` overloads. Every test checks values against eager or float64
// references with planned memory poisoned first, and the plan's invariant is checked again here
// from the public graph data (no two values alive at once share a byte).

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <thread>

#include "compile_testing.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

CompileOptions named(std::string name, bool fuse = true, bool plan = true) {
  CompileOptions o = fullgraph(std::move(name));
  o.fuse = fuse;
  o.plan_memory = plan;
  return o;
}

int64_t element_bytes(const CompiledGraph::Value& v) {
  int64_t n = static_cast<int64_t>(itemsize(v.dtype));
  for (const auto& s : v.sizes) n *= std::stoll(s);
  return n;
}

// Re-derives the plan's invariant from the graph as data (static sizes): per planned allocation,
// [its node, the last node touching its storage] and [offset, offset + bytes); two allocations
// of one arena alive at the same node must not share a byte, and none is a result's or an
// input's storage. Returns how many allocations it checked.
int check_plan(const CompiledGraph& g) {
  std::set<int> pinned;
  for (int v : g.inputs) {
    if (v >= 0) pinned.insert(g.values[static_cast<size_t>(v)].storage);
  }
  for (int v : g.outputs) {
    if (v >= 0) pinned.insert(g.values[static_cast<size_t>(v)].storage);
  }
  std::map<int, size_t> last;  // storage -> last node
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const auto& n = g.nodes[k];
    for (const auto* list : {&n.inputs, &n.writes, &n.outputs}) {
      for (int v : *list) last[g.values[static_cast<size_t>(v)].storage] = k;
    }
  }
  struct Placed {
    size_t first, last;
    int arena;
    int64_t begin, end;
  };
  std::vector<Placed> placed;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const auto& n = g.nodes[k];
    if (n.arena < 0) continue;
    EXPECT_EQ(n.target, "aten::empty");
    EXPECT_EQ(n.outputs.size(), 1u);
    const auto& v = g.values[static_cast<size_t>(n.outputs[0])];
    EXPECT_FALSE(pinned.count(v.storage)) << "a result or input in the arena: %" << v.id;
    const int64_t off = std::stoll(n.arena_offset);
    EXPECT_EQ(off % 64, 0) << n.arena_offset;
    placed.push_back({k, last.at(v.storage), n.arena, off, off + element_bytes(v)});
    EXPECT_LE(placed.back().end, std::stoll(g.arenas.at(static_cast<size_t>(n.arena)).bytes));
  }
  for (size_t i = 0; i < placed.size(); ++i) {
    for (size_t j = i + 1; j < placed.size(); ++j) {
      const Placed& a = placed[i];
      const Placed& b = placed[j];
      const bool together = a.arena == b.arena && a.first <= b.last && b.first <= a.last;
      const bool apart = a.end <= b.begin || b.end <= a.begin;
      // In place: b's operator (the node after its allocation) is a's last use, a pointwise
      // `.out` writing b over a's identical bytes.
      const auto& op = g.nodes[std::min(b.first + 1, g.nodes.size() - 1)];
      const bool in_place = a.begin == b.begin && a.end == b.end && a.last == b.first + 1 &&
                            !op.planned_from.empty() && op.writes.size() == 1;
      EXPECT_TRUE(!together || apart || in_place)
          << "nodes " << a.first << " and " << b.first << " are alive together and share bytes\n"
          << g.text;
    }
  }
  return static_cast<int>(placed.size());
}

// Compiles `fn` planned and unplanned, runs both on `x` (planned memory poisoned): the same
// kernels, so bit-identical results, and within `rtol` of eager. Returns the planned graph.
template <class F>
CompiledGraph run_planned_and_unplanned(F fn, const std::string& name, bool fuse, const Tensor& x,
                                        double rtol) {
  auto planned = compile(fn, named(name, fuse));
  auto unplanned = compile(fn, named(name + "_unplanned", fuse, false));
  Tensor got;
  run_poisoned([&] { got = planned(x); });
  EXPECT_TRUE(equal(got, unplanned(x)));
  EXPECT_TRUE(all_close(got, fn(x), rtol, 1e-5));
  EXPECT_TRUE(unplanned.graph().arenas.empty());
  return planned.graph();
}

int planned_allocations(const CompiledGraph& g) {
  int n = 0;
  for (const auto& a : g.arenas) n += a.values;
  return n;
}

}  // namespace

TEST(MemoryPlan, AChainOfIntermediatesSharesBytesAndMatchesTheUnplannedCall) {
  // Unfused, every op's result is an allocation (`x * 2.0` too, as mul.Scalar_out); none lives
  // long. Planned and unplanned run the same kernels: bit-identical results.
  auto fn = [](const Tensor& x) {
    Tensor a = x.sin();
    Tensor b = a.cos() * 2.0;
    Tensor c = (b + a).exp();
    Tensor d = c.tanh() - b;
    Tensor e = d.relu() + c;
    return (e * e).sum(1);
  };
  const CompiledGraph g =
      run_planned_and_unplanned(fn, "chain", /*fuse=*/false, randn({32, 48}), 1e-5);
  ASSERT_EQ(g.arenas.size(), 1u) << g.text;
  EXPECT_EQ(g.arenas[0].device, Device(DeviceType::CPU));
  EXPECT_GE(g.arenas[0].values, 10) << g.text;
  EXPECT_EQ(check_plan(g), g.arenas[0].values);
  // 32 x 48 floats = 6144 bytes each; a pointwise op whose input dies there stores its result
  // over it (in place), so three blocks serve the ten values (at most three are alive at once:
  // a, b and b + a; then b, c and tanh(c)).
  EXPECT_EQ(std::stoll(g.arenas[0].bytes), 3 * 6144) << g.text;
  EXPECT_EQ(g.find("aten::mul.Scalar").size(), 1u) << g.text;
  EXPECT_EQ(g.find("aten::mul.Scalar")[0]->target, "aten::mul.Scalar_out") << g.text;
  EXPECT_NE(g.find("aten::exp")[0]->note.find("stored over"), std::string::npos) << g.text;
  EXPECT_GT(std::stoll(g.arenas[0].unplanned_bytes), 8 * 6144) << g.text;
  // The ops run as their .out overloads, found by the name called.
  ASSERT_EQ(g.find("aten::sin").size(), 1u) << g.text;
  EXPECT_EQ(g.find("aten::sin")[0]->target, "aten::sin.out");
  EXPECT_EQ(g.find("aten::sin")[0]->planned_from, "aten::sin");
  // with or without the overload called (as unplanned graphs' targets name it)
  EXPECT_EQ(g.find("aten::add.Tensor").size(), 2u) << g.text;
  EXPECT_EQ(g.find("aten::add").size(), 2u) << g.text;
  EXPECT_EQ(g.find("aten::add")[0]->planned_from, "aten::add.Tensor");
  EXPECT_EQ(g.find("aten::ad").size(), 0u) << g.text;
  EXPECT_EQ(g.find("aten::add.Scalar").size(), 0u) << g.text;
  // The result is a reduction's, allocated on its own (the caller keeps it).
  const auto sums = g.find("aten::sum.dim_IntList");
  ASSERT_EQ(sums.size(), 1u) << g.text;
  EXPECT_TRUE(sums[0]->planned_from.empty());
}

TEST(MemoryPlan, ScalarOperatorsRunAsTheirScalarOutOverloads) {
  // Each op with a Scalar operand has a `.Scalar_out` (`pow(2, x)`: `pow.Scalar_out`) that the
  // plan runs into the arena; the results are bit-identical to the allocating overloads'.
  auto fn = [](const Tensor& x) {
    Tensor a = add(x, 1.5, 2.0);
    Tensor b = sub(a, 0.25);
    Tensor c = mul(b, 3.0);
    Tensor d = div(c, 2.0, "floor") + div(c, 7.0) + div(c, -2.0, "trunc");
    Tensor e = pow(d, 2.0) * 0.01;
    Tensor f = pow(2.0, e.tanh());
    Tensor g = where(gt(b, 0.0), f, remainder(d, 3.0));
    return maximum(g, b) - minimum(eq(c, 0.0).to(DType::Float32), f);
  };
  const CompiledGraph g =
      run_planned_and_unplanned(fn, "scalars", /*fuse=*/false, randn({16, 40}), 1e-5);
  ASSERT_EQ(g.arenas.size(), 1u) << g.text;
  EXPECT_EQ(check_plan(g), g.arenas[0].values);
  for (const char* op : {"aten::add.Scalar", "aten::sub.Scalar", "aten::mul.Scalar",
                         "aten::div.Scalar", "aten::pow.Tensor_Scalar", "aten::pow.Scalar",
                         "aten::gt.Scalar", "aten::eq.Scalar", "aten::remainder.Scalar"}) {
    const auto found = g.find(op);
    ASSERT_FALSE(found.empty()) << op << "\n" << g.text;
    for (const auto* n : found)
      EXPECT_EQ(n->target, std::string(op) + "_out") << op << "\n" << g.text;
  }
}

TEST(MemoryPlan, FusedKernelsAndMatmulsBetweenThemArePlanned) {
  // A block of linear layers: fused epilogues' outputs and matmul results in the arena.
  const Tensor w1 = randn({64, 96}) * 0.1, w2 = randn({96, 64}) * 0.1, b1 = randn({96});
  auto fn = [&](const Tensor& x) {
    Tensor h = (matmul(x, w1) + b1).relu();
    Tensor y = matmul(h, w2) * 0.5 + x;
    Tensor z = matmul(y.sin(), w1).exp();
    return matmul(z, w2);
  };
  const CompiledGraph g =
      run_planned_and_unplanned(fn, "mlp", /*fuse=*/true, randn({16, 64}), 1e-4);
  EXPECT_GE(planned_allocations(g), 3) << g.text;
  EXPECT_EQ(check_plan(g), planned_allocations(g));
  int matmul_out = 0;
  for (const auto* n : g.find("aten::matmul")) matmul_out += n->target == "aten::matmul.out";
  EXPECT_EQ(matmul_out, 3) << g.text;  // the last one is the result
}

TEST(MemoryPlan, ResultsViewsOfResultsAndInputsStayOutOfTheArena) {
  // h is returned through a view (its transpose); x is the caller's; only x * x is planned.
  auto fn = [](const Tensor& x) {
    Tensor t = x * x;
    Tensor h = t.sin();
    return std::make_tuple(h.t(), x.view({-1}));
  };
  auto c = compile(fn, named("views", /*fuse=*/false));
  const Tensor x = randn({8, 12});
  std::tuple<Tensor, Tensor> got;
  run_poisoned([&] { got = c(x); });
  EXPECT_TRUE(equal(std::get<0>(got), (x * x).sin().t()));
  EXPECT_TRUE(std::get<1>(got).is_alias_of(x));
  const CompiledGraph g = c.graph();
  EXPECT_EQ(check_plan(g), 1) << g.text;
  // The results outlive the call's arena: a second call with other data leaves them intact.
  const Tensor first = std::get<0>(got).clone();
  c(randn({8, 12}));
  EXPECT_TRUE(equal(std::get<0>(got), first));
}

TEST(MemoryPlan, DynamicSizesPlanSlotsInTheSymbols) {
  auto fn = [](const Tensor& x, const Tensor& y) {
    Tensor a = x.exp();
    Tensor b = a * y.sin();  // y: a smaller tensor broadcast along rows
    Tensor c = (b + a).tanh();
    return c.sum(0) + y.cos().sum(0);
  };
  CompileOptions o = named("dynamic", /*fuse=*/false);
  o.dynamic = true;
  auto c = compile(fn, o);
  for (int64_t rows : {5, 17, 64, 3}) {
    const Tensor x = randn({rows, 24}), y = randn({1, 24});
    Tensor got;
    run_poisoned([&] { got = c(x, y); });
    EXPECT_TRUE(all_close(got, fn(x, y), 1e-5, 1e-5)) << rows;
  }
  EXPECT_EQ(c.stats().graphs, 1);
  const CompiledGraph g = c.graph();
  ASSERT_EQ(g.arenas.size(), 1u) << g.text;
  EXPECT_NE(g.arenas[0].bytes.find('s'), std::string::npos) << g.arenas[0].bytes;
  EXPECT_GE(g.arenas[0].values, 4) << g.text;
  EXPECT_NE(g.arenas[0].bytes, g.arenas[0].unplanned_bytes) << g.text;  // slots were reused
}

TEST(MemoryPlan, PlanMemoryFalseAllocatesEachValueAsEagerDoes) {
  auto fn = [](const Tensor& x) { return (x.sin() * x.cos()).exp().sum(); };
  auto c = compile(fn, named("off", false, false));
  auto on = compile(fn, named("on", false, true));
  const Tensor x = randn({10, 10});
  c(x);  // compiled here: the counts below are of one call each
  on(x);
  const auto calls = run_poisoned([&] { EXPECT_TRUE(equal(c(x), on(x))); });
  EXPECT_TRUE(c.graph().arenas.empty());
  EXPECT_EQ(calls.at("aten::sin"), 1);
  EXPECT_EQ(calls.at("aten::sin.out"), 1);  // the planned call's
  EXPECT_EQ(c.graph().find("aten::sin")[0]->target, "aten::sin");
  EXPECT_EQ(planned_allocations(on.graph()), 4) << on.graph().text;  // sin, cos, mul, exp
}

TEST(MemoryPlan, TrainingPlansTheForwardAndTheBackward) {
  // Both halves replay without autograd recording: both are planned; gradients match eager's.
  Tensor w1 = (randn({32, 48}) * 0.2).requires_grad_(),
         w2 = (randn({48, 8}) * 0.2).requires_grad_();
  auto fn = [&](const Tensor& x) {
    Tensor h = matmul(x, w1).tanh();
    return (matmul(h * h, w2).sin() + 1.0).sum();
  };
  auto c = compile(fn, named("train"));
  const Tensor x = randn({6, 32});
  Tensor loss = c(x);
  loss.backward();
  const Tensor g1 = w1.grad().clone(), g2 = w2.grad().clone();
  w1.mutable_grad() = Tensor();
  w2.mutable_grad() = Tensor();
  fn(x).backward();
  EXPECT_TRUE(all_close(g1, w1.grad(), 1e-4, 1e-5));
  EXPECT_TRUE(all_close(g2, w2.grad(), 1e-4, 1e-5));
  const CompiledGraph g = c.graph();
  ASSERT_NE(g.backward, nullptr) << g.text;
  EXPECT_EQ(check_plan(g), planned_allocations(g));
  EXPECT_GE(planned_allocations(*g.backward), 1) << g.backward->text;
  EXPECT_EQ(check_plan(*g.backward), planned_allocations(*g.backward));
}

TEST(MemoryPlan, ConcurrentCallsEachHaveTheirOwnArena) {
  auto fn = [](const Tensor& x) {
    Tensor a = x.sin() * 3.0;
    Tensor b = a.exp() - x;
    return (b * a).cos();
  };
  auto c = compile(fn, named("threads", /*fuse=*/false));
  std::vector<Tensor> xs, want;
  for (int i = 0; i < 4; ++i) {
    xs.push_back(randn({64, 64}));
    want.push_back(fn(xs.back()));
  }
  c(xs[0]);  // compiled once, before the threads
  std::vector<int> ok(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      bool all = true;
      for (int r = 0; r < 20; ++r)
        all = all && equal(c(xs[static_cast<size_t>(t)]), want[static_cast<size_t>(t)]);
      ok[static_cast<size_t>(t)] = all;
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_TRUE(ok[static_cast<size_t>(t)]) << t;
  EXPECT_GE(planned_allocations(c.graph()), 3);
}

// CompileOptions::cuda_graphs on CPU tensors changes nothing: the graph runs as before.
TEST(CudaGraphsOption, OnCpuTensorsTheGraphRunsAsBefore) {
  auto fn = [](const Tensor& x) { return (x.sin() * 2.0).exp().sum(1); };
  CompileOptions o = named("cpu_graphs");
  o.cuda_graphs = true;
  auto c = compile(fn, o);
  for (int i = 0; i < 3; ++i) {
    const Tensor x = randn({8, 16});
    EXPECT_TRUE(all_close(c(x), fn(x), 1e-5, 1e-5)) << i;
  }
  EXPECT_EQ(c.stats().cuda_graphs, 0);
  EXPECT_EQ(c.stats().graphs, 1);
}
