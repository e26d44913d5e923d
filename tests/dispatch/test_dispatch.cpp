#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <new>
#include <set>
#include <thread>

#include "runtime/thread_pool.h"
#include "sym_test_node.h"
#include "tessera/detail/boxing.h"
#include "testing.h"

using namespace tessera;
using namespace tessera::testing;

// ---- allocation counting (for the fast-path test) -----------------------------------------------

namespace {
std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_allocs{0};
}  // namespace

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocs.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, size_t) noexcept {
  std::free(p);
}

namespace {

Tensor fvec_helper() {
  return from_vector(std::vector<float>{0.1f, 0.2f, 0.3f});
}

// ---- schemas ------------------------------------------------------------------------------------

TEST(Schema, ParsesAndPrintsRoundTrip) {
  const char* texts[] = {
      "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
      "aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
      "aten::max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
      "aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? "
      "dtype=None) -> Tensor",
      "mylib::f(Tensor?[] xs, SymInt[] size, float eps=1e-05, str mode='mean', Device? d=None) -> "
      "Tensor[]",
      "mylib::g() -> ()",
      "mylib::h(int[2] stride=1, ScalarType t=float32, bool[] flags=[True, False]) -> int",
  };
  for (const char* t : texts) {
    const FunctionSchema s = FunctionSchema::parse(t);
    EXPECT_EQ(FunctionSchema::parse(s.str()).str(), s.str()) << t;
  }
  const auto s = FunctionSchema::parse(texts[3]);
  EXPECT_EQ(s.qualified_name(), "aten::sum.dim_IntList");
  EXPECT_EQ(s.arguments().size(), 4u);
  EXPECT_TRUE(s.arguments()[1].type.optional);
  EXPECT_TRUE(s.arguments()[1].type.list);
  EXPECT_EQ(s.arguments()[1].type.list_size, 1);
  EXPECT_TRUE(s.arguments()[3].kwarg_only);
  EXPECT_FALSE(s.arguments()[2].default_value->to_bool());
  EXPECT_TRUE(FunctionSchema::parse(texts[1]).is_mutable());
  EXPECT_FALSE(s.is_mutable());
  const auto h = FunctionSchema::parse(texts[6]);
  EXPECT_EQ(h.arguments()[0].default_value->to_int_list(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(h.arguments()[1].default_value->to_dtype(), float32);
}

TEST(Schema, MalformedSchemasAreValueErrors) {
  for (const char* bad : {"add(Tensor x) -> Tensor",              // no namespace
                          "ns::f(Tensor x -> Tensor",             // unbalanced
                          "ns::f(Foo x) -> Tensor",               // unknown type
                          "ns::f(Tensor x, Tensor x) -> Tensor",  // duplicate name
                          "ns::f(int x=1, int y) -> int",         // required after default
                          "ns::f(Tensor x) -> Tensor extra junk", "ns::f(bool b=maybe) -> int",
                          "ns::f(int(a!) x) -> int"}) {
    const std::string msg = error_of<ValueError>([&] { FunctionSchema::parse(bad); });
    EXPECT_NE(msg.find("schema"), std::string::npos) << bad << ": " << msg;
  }
}

// Found by fuzz_schema (tests/fuzz/regressions/schema): text after a string default's closing
// quote was kept inside the string, so str() printed a schema that did not parse; a huge list
// size allocated gigabytes for its repeated default.
TEST(Schema, FuzzFindingsStringDefaultsAndListSizes) {
  EXPECT_NE(error_of<ValueError>([] {
              FunctionSchema::parse("ns::gelu(Tensor self, *, str approximate='none'e) -> Tensor");
            }).find("bad string literal"),
            std::string::npos);
  EXPECT_NE(error_of<ValueError>([] {
              FunctionSchema::parse("ns::f(str s='a'b') -> Tensor");
            }).find("bad string literal"),
            std::string::npos);
  EXPECT_NE(error_of<ValueError>([] {
              FunctionSchema::parse("ns::h(int[2444444444444444] s=0) -> Tensor");
            }).find("a list size above 4096"),
            std::string::npos);
  EXPECT_NE(error_of<ValueError>([] {
              FunctionSchema::parse("ns::h(int[] s=[1, 2) -> Tensor");
            }).find("schema"),
            std::string::npos);
  // A string holding one kind of quote prints with the other and reads back equal.
  const auto s = FunctionSchema::parse("ns::f(str s=\"it's\", str t='say \"hi\"') -> Tensor");
  EXPECT_EQ(s.arguments()[0].default_value->to_string(), "it's");
  EXPECT_EQ(s.arguments()[1].default_value->to_string(), "say \"hi\"");
  const auto again = FunctionSchema::parse(s.str());
  EXPECT_EQ(again.str(), s.str());
  EXPECT_EQ(again.arguments()[0].default_value->to_string(), "it's");
}

// ---- registry -----------------------------------------------------------------------------------

TEST(Registry, DefineFindAndErrors) {
  define_op("test_reg::twice(Tensor x) -> Tensor");
  EXPECT_TRUE(find_op("test_reg::twice").has_value());
  EXPECT_TRUE(find_op("test_reg::twice.default").has_value());
  EXPECT_NE(error_of<ValueError>([] {
              define_op("test_reg::twice(Tensor x) -> Tensor");
            }).find("already registered"),
            std::string::npos);
  const std::string msg = error_of<ValueError>([] { get_op("aten::mull.Tensor"); });
  EXPECT_NE(msg.find("unknown operator"), std::string::npos);
  EXPECT_NE(msg.find("did you mean 'aten::mul.Tensor'"), std::string::npos) << msg;
  // A kernel whose C++ signature does not match the schema is refused.
  Library lib("test_reg");
  const std::string mismatch = error_of<TypeError>(
      [&] { lib.impl("twice", DeviceType::CPU, [](const Tensor& x, int64_t) { return x; }); });
  EXPECT_NE(mismatch.find("signature does not match"), std::string::npos) << mismatch;
}

TEST(Registry, EveryBuiltinHasAShapeFunction) {
  int builtins = 0;
  for (const auto& op : all_ops()) {
    if (!op.has_tag(kTagBuiltin)) continue;
    ++builtins;
    const bool has_meta = op.entry().has_kernel(DeviceType::Meta) || op.entry().composite().valid();
    EXPECT_TRUE(has_meta) << op.name() << " has no shape function";
  }
  EXPECT_GT(builtins, 150);
}

TEST(Registry, CallByNameWithDefaultsAndKeywords) {
  Tensor x = arange(0, 4, 1, float32);
  Tensor r = ops("aten::add")(x, 1.5, kw("alpha", 2));  // picks add.Scalar
  EXPECT_TRUE(all_close(r, x + 3));
  Tensor s = ops("aten::add.Tensor")(x, x);
  EXPECT_TRUE(all_close(s, x * 2));
  IValue mx = ops("aten::max.dim")(x.view({2, 2}), 1);
  ASSERT_TRUE(mx.is_tuple());
  EXPECT_EQ(mx.to_tuple()[1].to_tensor()[0].item<int64_t>(), 1);
  EXPECT_EQ(ops("aten::sum.dim_IntList")(x.view({2, 2}), std::vector<int64_t>{1}).to_tensor().dim(),
            1);
  EXPECT_TRUE(ops("aten::equal")(x, x).to_bool());
  // Argument errors name the op and the argument.
  std::string e = error_of<TypeError>([&] { ops("aten::add.Tensor")(x, x, x, x); });
  EXPECT_NE(e.find("takes 2 positional arguments but 4 were given"), std::string::npos) << e;
  e = error_of<TypeError>([&] { ops("aten::add.Tensor")(x); });
  EXPECT_NE(e.find("missing required argument 'other'"), std::string::npos) << e;
  e = error_of<TypeError>([&] { ops("aten::add.Tensor")(x, x, kw("beta", 1)); });
  EXPECT_NE(e.find("unexpected keyword argument 'beta'"), std::string::npos) << e;
  e = error_of<TypeError>([&] { ops("aten::exp")(3); });
  EXPECT_NE(e.find("argument 'self' must be Tensor, not int"), std::string::npos) << e;
  e = error_of<TypeError>([&] { ops("aten::add")(x, "two"); });
  EXPECT_NE(e.find("no overload matches"), std::string::npos) << e;
  const int line = __LINE__ + 1;
  e = error_of<TypeError>([&] { ops("aten::add.Tensor")(x); });
  EXPECT_NE(e.find("test_dispatch.cpp:" + std::to_string(line)), std::string::npos) << e;
  EXPECT_THROW(ops("aten::nonexistent_op"), ValueError);
}

// ---- modes --------------------------------------------------------------------------------------

struct RecordingMode : DispatchMode {
  std::vector<std::string> seen;
  std::set<std::thread::id> threads;
  std::mutex m;
  void handle(const OperatorHandle& op, Stack& stack) override {
    {
      std::lock_guard<std::mutex> g(m);
      seen.push_back(op.name());
      threads.insert(std::this_thread::get_id());
    }
    op.redispatch(stack);
  }
};

TEST(Modes, FunctionModesSeeCompositesDispatchModesSeeDecompositions) {
  Tensor x = rand({2, 3}), w = rand({4, 3}), b = rand({4});
  RecordingMode fn, disp;
  {
    ModeGuard g1(&fn, ModeKind::Function);
    ModeGuard g2(&disp, ModeKind::Dispatch);
    Tensor y = linear(x, w, b);
    EXPECT_TRUE(y.sizes().equals(SymDimVector{2, 4}));
  }
  ASSERT_FALSE(fn.seen.empty());
  EXPECT_EQ(fn.seen.front(), "aten::linear");
  for (const auto& n : disp.seen) EXPECT_NE(n, "aten::linear");
  EXPECT_NE(std::find(disp.seen.begin(), disp.seen.end(), "aten::matmul"), disp.seen.end());
  EXPECT_NE(std::find(disp.seen.begin(), disp.seen.end(), "aten::add.Tensor"), disp.seen.end());
}

TEST(Modes, NestedModesInnermostFirstAndHandlersHideThemselves) {
  std::vector<std::string> order;
  struct Named : DispatchMode {
    std::vector<std::string>* order;
    std::string name;
    bool extra_call;
    void handle(const OperatorHandle& op, Stack& stack) override {
      order->push_back(name + ":" + op.name());
      if (extra_call) {
        extra_call = false;
        // An op called from inside a handler skips this mode but reaches the outer one.
        (void)tessera::neg(zeros({1}));
      }
      op.redispatch(stack);
    }
  };
  Named outer, inner;
  outer.order = inner.order = &order;
  outer.name = "outer";
  inner.name = "inner";
  outer.extra_call = false;
  inner.extra_call = true;
  Tensor x = ones({2});
  {
    ModeGuard a(&outer, ModeKind::Dispatch);
    ModeGuard b(&inner, ModeKind::Dispatch);
    (void)tessera::exp(x);
    EXPECT_EQ(active_modes(ModeKind::Dispatch).size(), 2u);
  }
  EXPECT_TRUE(active_modes(ModeKind::Dispatch).empty());
  // zeros is a composite: dispatch modes see its decomposition (full), never zeros itself.
  const std::vector<std::string> want = {"inner:aten::exp", "outer:aten::full", "outer:aten::neg",
                                         "outer:aten::exp"};
  EXPECT_EQ(order, want);
}

TEST(Modes, StateFollowsIntoThreadPoolTasks) {
  RecordingMode mode;
  NoGradGuard no_grad;
  std::atomic<int> grad_seen{0};
  {
    ModeGuard g(&mode, ModeKind::Dispatch);
    runtime::parallel_for(0, 64, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        (void)tessera::neg(ones({1}));
        if (grad_enabled()) ++grad_seen;
      }
    });
  }
  EXPECT_EQ(grad_seen.load(), 0);
  int negs = 0;
  for (const auto& n : mode.seen) negs += n == "aten::neg";
  EXPECT_EQ(negs, 64);
  if (runtime::num_threads() > 1) {
    EXPECT_GT(mode.threads.size(), 0u);
  }
}

TEST(Modes, GradModeGuards) {
  EXPECT_TRUE(grad_enabled());
  {
    NoGradGuard g;
    EXPECT_FALSE(grad_enabled());
    {
      GradModeGuard e(true);
      EXPECT_TRUE(grad_enabled());
    }
    EXPECT_FALSE(grad_enabled());
  }
  EXPECT_TRUE(grad_enabled());
}

// ---- the fast path ------------------------------------------------------------------------------

TEST(FastPath, NoModeCallAllocatesOnlyTheOutput) {
  Tensor a = ones({1024}), b = ones({1024});
  Tensor warm = add(a, b);  // first call initializes the cached handle
  g_allocs = 0;
  g_counting = true;
  Tensor c = add(a, b);
  g_counting = false;
  // The output's TensorImpl and StorageImpl; the data comes from posix_memalign.
  EXPECT_LE(g_allocs.load(), 2);

  RecordingMode mode;
  ModeGuard g(&mode, ModeKind::Dispatch);
  g_allocs = 0;
  g_counting = true;
  Tensor d = add(a, b);
  g_counting = false;
  EXPECT_GT(g_allocs.load(), 2);  // the boxed path boxes
}

// ---- wrapper tensor types -----------------------------------------------------------------------

// Holds two tensors and applies every op to both (the test subclass of PyTorch's suite).
TEST(WrapperTensors, HandlerReceivesEveryOp) {
  Tensor x = TwoTensor::make(fvec_helper(), fvec_helper() * 10);
  Tensor y = (x + 1).exp().sum();
  auto* w = wrapper_cast<TwoTensor>(y);
  ASSERT_NE(w, nullptr);
  const Tensor base = fvec_helper();
  EXPECT_TRUE(all_close(w->a_, (base + 1).exp().sum()));
  EXPECT_TRUE(all_close(w->b_, (base * 10 + 1).exp().sum(), 1e-4));
  // Composite ops decompose, and each piece reaches the handler.
  Tensor z = linear(TwoTensor::make(ones({2, 3}), zeros({2, 3})), ones({4, 3}));
  auto* wz = wrapper_cast<TwoTensor>(z);
  ASSERT_NE(wz, nullptr);
  EXPECT_EQ(wz->a_.sum().item<float>(), 24.0f);
  EXPECT_EQ(wz->b_.sum().item<float>(), 0.0f);
}

// ---- fake tensors with symbolic sizes ---------------------------------------------------------

TEST(FakeTensors, OpsPropagateSymbolicShapes) {
  auto log = std::make_shared<GuardLog>();
  SymInt s0(TestNode::symbol(log, "s0", 8));
  Tensor x = detail::make_fake({s0, 3}, float32, kCPU);
  EXPECT_TRUE(x.is_fake());
  EXPECT_TRUE(x.device().is_cpu());
  Tensor y = x.exp() + x;  // same symbol: broadcasting decides s0 == s0 structurally
  EXPECT_TRUE(y.is_fake());
  EXPECT_EQ(y.size(0).str(), "s0");
  Tensor z = y.sum({1});
  EXPECT_EQ(z.size(0).str(), "s0");
  Tensor f = x.flatten();
  EXPECT_EQ(f.size(0).str(), "(s0 * 3)");
  Tensor m = matmul(x, ones({3, 5}));
  EXPECT_EQ(m.size(0).str(), "s0");
  EXPECT_EQ(m.size(1).expect_int(), 5);
  EXPECT_EQ(x.numel().str(), "(s0 * 3)");
  EXPECT_NE(std::string(x.str()).find("FakeTensor(..."), std::string::npos);
  EXPECT_THROW(x.item(), ValueError);
  // Reading a symbolic size as an integer specializes it (the compiler records a guard).
  const size_t before = log->guards.size();
  int64_t n = x.size(0);
  EXPECT_EQ(n, 8);
  EXPECT_GT(log->guards.size(), before);
}

TEST(FakeTensors, DataDependentOpsRefuseFakeTensors) {
  Tensor x = detail::make_fake({2}, float32, kCPU);
  const std::string msg = error_of<ValueError>([&] { (void)allclose(x, x); });
  EXPECT_NE(msg.find("[allclose] reads tensor values"), std::string::npos) << msg;
}

}  // namespace

TEST(Dispatch, TheDispatchLogChannelNamesEveryCall) {
  Tensor x = ones({3}), y = ones({3});
  setenv("TESSERA_LOGS", "dispatch", 1);
  reload_knobs();
  ::testing::internal::CaptureStderr();
  Tensor z = x + y;                          // the typed fast path
  IValue w = ops("aten::mul.Tensor")(z, y);  // by name (boxed)
  const std::string err = ::testing::internal::GetCapturedStderr();
  unsetenv("TESSERA_LOGS");
  reload_knobs();
  EXPECT_NE(err.find("[tessera:dispatch] aten::add.Tensor -> cpu (float32[3], float32[3], 1)"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("[tessera:dispatch] aten::mul.Tensor -> cpu (float32[3], float32[3])"),
            std::string::npos)
      << err;
  EXPECT_TRUE(equal(w.to_tensor(), full({3}, 2.0)));
  ::testing::internal::CaptureStderr();
  Tensor again = x + y;  // the channel off: nothing printed
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_TRUE(equal(again, z));
}
