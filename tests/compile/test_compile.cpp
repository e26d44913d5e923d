// tessera::compile, after PyTorch's test_triton_kernels.py behaviours: grids of every form,
// constexprs, static and dynamic shapes, views and offsets, exact write sets, the expanded-write
// error, aligned and unaligned sizes in one graph, explained recompiles, the recompile limit,
// triton_op traced into and custom_op kept opaque, graph breaks, DCE and CSE; results always equal
// eager on fresh random inputs.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "runtime/allocator.h"
#include "tessera/compile.h"
#include "tessera/library.h"
#include "tessera/tessera.h"
#include "testing.h"

using namespace tessera;
using namespace tessera::testing;
namespace tl = tessera::tl;

namespace {

TL_JIT(add_kernel, tl::Ptr in_ptr0, tl::Ptr in_ptr1, tl::Ptr out_ptr, tl::Int n_elements,
       tl::Const BLOCK_SIZE) {
  auto pid = tl::program_id(0);
  auto offsets = pid * BLOCK_SIZE + tl::arange(0, BLOCK_SIZE);
  auto mask = offsets < n_elements;
  auto x = tl::load(in_ptr0 + offsets, mask);
  auto y = tl::load(in_ptr1 + offsets, mask);
  tl::store(out_ptr + offsets, x + y, mask);
}

Tensor add_fn(const Tensor& x, const Tensor& y) {
  Tensor output = zeros_like(x);
  auto n_elements = output.numel();
  auto grid = [&](const tl::Meta& meta) {
    return tl::Grid{tl::cdiv(n_elements, meta["BLOCK_SIZE"])};
  };
  add_kernel[grid](x, y, output, n_elements, tl::meta("BLOCK_SIZE", 4));
  return output;
}

CompileOptions full(std::string name = "fn") {
  CompileOptions o;
  o.fullgraph = true;
  o.name = std::move(name);
  return o;
}

TEST(Compile, SeedAddFnStaticThenDynamic) {
  auto compiled = compile(add_fn, full("add_fn"));
  for (int64_t n : {4, 5, 6, 7, 4096, 3}) {
    Tensor x = randn({n}), y = randn({n});
    EXPECT_TRUE(equal(compiled(x, y), x + y)) << n;
  }
  // Static on the first call, dynamic after one recompile, then no more.
  EXPECT_EQ(compiled.stats().graphs, 2);
  EXPECT_EQ(compiled.stats().recompiles, 1);
  const std::string g = compiled.stats().last_graph;
  EXPECT_NE(g.find("kernel add_kernel[(s0 + 3)//4, 1, 1]"), std::string::npos) << g;
  EXPECT_NE(g.find("writes"), std::string::npos) << g;
}

TEST(Compile, EveryGridFormAndConstexprForm) {
  auto tuple_grid = [](const Tensor& x, const Tensor& y) {
    Tensor out = empty_like(x);
    auto n = x.numel();
    add_kernel[tl::Grid{tl::cdiv(n, 32)}](x, y, out, n, tl::meta("BLOCK_SIZE", 32));
    return out;
  };
  auto int_grid_positional_constexpr = [](const Tensor& x, const Tensor& y) {
    Tensor out = empty_like(x);
    auto n = x.numel();
    add_kernel[tl::cdiv(n, 16)](x, y, out, n, 16);  // BLOCK_SIZE given positionally
    return out;
  };
  struct GridOf {
    static tl::Grid make(const tl::Meta& m, const SymInt& n) {
      return tl::Grid{tl::cdiv(n, m["BLOCK_SIZE"])};
    }
  };
  auto function_grid = [](const Tensor& x, const Tensor& y) {
    Tensor out = empty_like(x);
    auto n = x.numel();
    auto grid = [n](const tl::Meta& m) { return GridOf::make(m, n); };
    add_kernel[grid](x, y, out, n, tl::meta("BLOCK_SIZE", 64));
    return out;
  };
  auto a = compile(tuple_grid, full()), b = compile(int_grid_positional_constexpr, full()),
       c = compile(function_grid, full());
  for (int64_t n : {40, 41, 1000}) {
    Tensor x = randn({n}), y = randn({n});
    EXPECT_TRUE(equal(a(x, y), x + y));
    EXPECT_TRUE(equal(b(x, y), x + y));
    EXPECT_TRUE(equal(c(x, y), x + y));
  }
  EXPECT_EQ(a.stats().graphs, 2);
}

TEST(Compile, DynamicFromTheStartSharesOneGraphForAlignedAndUnalignedSizes) {
  CompileOptions o = full();
  o.dynamic = true;
  auto compiled = compile(add_fn, o);
  add_kernel.clear_memory_cache();         // earlier tests specialized it too
  for (int64_t n : {16, 17, 32, 33, 2}) {  // divisible by 16 or not: a kernel variant, not a guard
    Tensor x = randn({n}), y = randn({n});
    EXPECT_TRUE(equal(compiled(x, y), x + y)) << n;
  }
  EXPECT_EQ(compiled.stats().graphs, 1);
  EXPECT_EQ(add_kernel.num_specializations(), 2u);
}

TL_JIT(strided_copy, tl::Ptr src, tl::Ptr dst, tl::Int rows, tl::Int cols, tl::Int src_stride,
       tl::Const BLOCK) {
  (void)rows;  // one program per row
  auto r = tl::program_id(0);
  auto c = tl::arange(0, BLOCK);
  auto m = c < cols;
  tl::store(dst + r * cols + c, tl::load(src + r * src_stride + c, m) * 2.0, m);
}

TEST(Compile, ViewsStridesAndStorageOffsets) {
  auto fn = [](const Tensor& x) {
    Tensor v = x.narrow(1, 1, 5);  // a view with an offset and row stride 8
    Tensor out = empty({v.size(0), v.size(1)});
    strided_copy[{v.size(0)}](v, out, v.size(0), v.size(1), v.stride(0), tl::meta("BLOCK", 8));
    return out;
  };
  auto compiled = compile(fn, full());
  for (int64_t rows : {3, 4, 9}) {
    Tensor x = randn({rows, 8});
    EXPECT_TRUE(equal(compiled(x), x.narrow(1, 1, 5) * 2)) << rows;
  }
  // An argument that is itself a view with an offset.
  auto g = compile([](const Tensor& v) { return add_fn(v, v); }, full());
  Tensor base = randn({20});
  Tensor v = base.narrow(0, 3, 10);
  EXPECT_TRUE(equal(g(v), v + v));
}

TL_JIT(write_set_kernel, tl::Ptr a, tl::Ptr b, tl::Ptr c, tl::Ptr d, tl::Int n, tl::Const B) {
  // Reads a; writes b in a loop; writes c in one branch only; reduces into d; never writes a.
  auto offs = tl::arange(0, B);
  tl::Var acc = tl::zeros({B}, tl::float32);
  tl::range(0, n, B, [&](tl::Tile start) {
    auto o = start + offs;
    auto v = tl::load(a + o, o < n, 0.0);
    tl::store(b + o, v + 1.0, o < n);
    acc = acc + v;
  });
  tl::if_(n > 100, [&] { tl::store(c + offs, acc); });
  tl::store(d, tl::sum(acc, 0));
}

TEST(Compile, WriteSetsComeExactlyFromTheKernelIr) {
  auto fn = [](const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& d) {
    write_set_kernel[{1}](a, b, c, d, a.numel(), tl::meta("B", 16));
    return d.clone();
  };
  auto compiled = compile(fn, full());
  Tensor a = randn({50}), b = zeros({50}), c = zeros({16}), d = zeros({1});
  Tensor r = compiled(a, b, c, d);
  EXPECT_NEAR(r.item<double>(), a.sum().item<double>(), 1e-4);
  EXPECT_TRUE(all_close(b, a + 1));
  const std::string g = compiled.stats().last_graph;
  EXPECT_NE(g.find("(%0, %1!, %2!, %3!,"), std::string::npos) << g;  // a read, b/c/d written
}

TEST(Compile, WritingAnExpandedTensorIsAnError) {
  auto fn = [](const Tensor& x) {
    Tensor out = zeros({1}).expand({x.size(0)});
    add_kernel[{1}](x, x, out, x.numel(), tl::meta("BLOCK_SIZE", 16));
    return out;
  };
  auto compiled = compile(fn, full());
  const std::string msg = error_of<CompileError>([&] { compiled(randn({8})); });
  EXPECT_NE(msg.find("overlaps itself"), std::string::npos) << msg;
  EXPECT_NE(msg.find("out_ptr"), std::string::npos) << msg;
}

TEST(Compile, AConstexprFedByASizeRecompilesWithAnExplanation) {
  auto fn = [](const Tensor& x, const Tensor& y) {
    Tensor out = empty_like(x);
    const int64_t block = x.size(0).guard_int();  // specializes the symbol: a guard on this line
    add_kernel[{1}](x, y, out, x.numel(), tl::meta("BLOCK_SIZE", block));
    return out;
  };
  const int line = __LINE__ - 4;
  CompileOptions o = full();
  o.dynamic = true;
  auto compiled = compile(fn, o);
  setenv("TESSERA_LOGS", "recompiles", 1);
  reload_knobs();
  ::testing::internal::CaptureStderr();
  Tensor x = randn({8}), y = randn({8});
  EXPECT_TRUE(equal(compiled(x, y), x + y));
  Tensor x2 = randn({16}), y2 = randn({16});
  EXPECT_TRUE(equal(compiled(x2, y2), x2 + y2));
  const std::string log = ::testing::internal::GetCapturedStderr();
  unsetenv("TESSERA_LOGS");
  reload_knobs();
  EXPECT_EQ(compiled.stats().graphs, 2);
  EXPECT_NE(log.find("s0 == 8 failed"), std::string::npos) << log;
  EXPECT_NE(log.find("test_compile.cpp:" + std::to_string(line)), std::string::npos) << log;
  // An implicit conversion cannot take a location: the guard names the last traced call.
  auto implicit = compile(
      [](const Tensor& x) {
        Tensor y = mul(x, 2.0);  // a function call carries its line; operators cannot
        const int64_t n = x.size(0);
        return y + static_cast<double>(n);
      },
      o);
  const int implicit_line = __LINE__ - 5;  // the line of `mul` above
  implicit(randn({5}));
  setenv("TESSERA_LOGS", "recompiles", 1);
  reload_knobs();
  ::testing::internal::CaptureStderr();
  implicit(randn({6}));
  const std::string log2 = ::testing::internal::GetCapturedStderr();
  unsetenv("TESSERA_LOGS");
  reload_knobs();
  EXPECT_NE(log2.find("after the call at test_compile.cpp:" + std::to_string(implicit_line)),
            std::string::npos)
      << log2;
}

TEST(Compile, ADynamicGridDoesNotRecompileUnderALimitOfOne) {
  CompileOptions o = full();
  o.recompile_limit = 1;
  auto compiled = compile(add_fn, o);
  for (int64_t n : {10, 11, 12, 100, 1000, 7}) {
    Tensor x = randn({n}), y = randn({n});
    EXPECT_TRUE(equal(compiled(x, y), x + y));
  }
  EXPECT_EQ(compiled.stats().recompiles, 1);
  // Past the limit: an error under fullgraph, eager otherwise.
  auto dtype_fn = compile([](const Tensor& x) { return x * 2; }, o);
  dtype_fn(randn({4}));
  dtype_fn(randn({4}, TensorOptions().dtype(DType::Float64)));
  const std::string msg =
      error_of<CompileError>([&] { dtype_fn(randn({4}, TensorOptions().dtype(DType::BFloat16))); });
  EXPECT_NE(msg.find("recompile_limit=1"), std::string::npos) << msg;
  CompileOptions lenient;
  lenient.recompile_limit = 0;
  auto eager = compile([](const Tensor& x) { return x * 2; }, lenient);
  eager(randn({4}));
  Tensor x64 = randn({4}, TensorOptions().dtype(DType::Float64));
  EXPECT_TRUE(equal(eager(x64), x64 * 2));
  EXPECT_TRUE(eager.stats().eager);
}

// x += 1 in place (reads and writes x).
TL_JIT(inc_kernel, tl::Ptr x_ptr, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = offs < n;
  tl::store(x_ptr + offs, tl::load(x_ptr + offs, m) + 1.0f, m);
}

// `f(x, x)`: the same tensor twice is one traced input, so it goes dynamic like any other
// argument (it stayed static and recompiled per size until the limit before).
TEST(Compile, TheSameTensorTwiceGoesDynamic) {
  auto fn = [](const Tensor& x, const Tensor& y) {
    auto n = y.numel();                                      // symbolic once dynamic
    inc_kernel[tl::cdiv(n, 8)](y, n, tl::meta("BLOCK", 8));  // y += 1, seen through x
    return x * 2.0;
  };
  auto compiled = compile(fn, full("same_twice"));
  for (int64_t n : {12, 20, 33, 7}) {
    Tensor buf = randn({n});
    const Tensor want = (buf + 1.0) * 2.0;
    EXPECT_TRUE(all_close(compiled(buf, buf), want)) << n;
  }
  EXPECT_EQ(compiled.stats().graphs, 2);  // static, then one dynamic graph
  EXPECT_EQ(compiled.stats().recompiles, 1);
  const CompiledGraph g = compiled.graph();
  ASSERT_EQ(g.inputs.size(), 2u);
  EXPECT_EQ(g.inputs[0], g.inputs[1]);  // one input
  EXPECT_EQ(g.values.at(static_cast<size_t>(g.inputs[0])).sizes, std::vector<std::string>{"s0"});
  // Two distinct tensors of the same size: not the traced sharing, a new graph, right values.
  Tensor p = randn({9}), q = randn({9});
  const Tensor want = p * 2.0;
  EXPECT_TRUE(all_close(compiled(p, q), want));
  EXPECT_EQ(compiled.stats().graphs, 3);
  // The same storage seen through another view is not the same tensor: x = buf[0:8], y = buf.
  Tensor buf = randn({16}), ref = buf.clone();
  EXPECT_TRUE(all_close(compiled(buf.slice(0, 0, 8), buf), (ref.slice(0, 0, 8) + 1.0) * 2.0));
}

TEST(Compile, AliasedArgumentsShareMemoryAsTraced) {
  CompileOptions o = full("aliased");
  // y is incremented in place by a kernel, then x is read: when they alias, x sees the update.
  auto fn = [](const Tensor& x, const Tensor& y) {
    const int64_t n = y.numel().guard_int();
    inc_kernel[{tl::cdiv(n, 8)}](y, n, tl::meta("BLOCK", 8));
    return x * 2.0;
  };
  auto compiled = compile(fn, o);
  Tensor buf = randn({12});
  Tensor want_buf = buf.clone();
  Tensor got = compiled(buf, buf);  // the same tensor twice
  EXPECT_TRUE(all_close(got, (want_buf + 1.0) * 2.0));
  EXPECT_TRUE(all_close(buf, want_buf + 1.0));
  // Overlapping views with offsets: y = buf[4:12] is incremented, x = buf[0:8] sees half of it.
  Tensor b2 = randn({12}), ref = b2.clone();
  Tensor x = b2.slice(0, 0, 8), y = b2.slice(0, 4, 12);
  setenv("TESSERA_LOGS", "recompiles", 1);
  reload_knobs();
  ::testing::internal::CaptureStderr();
  Tensor p = randn({12}), q = randn({12});  // the first graph's sizes, but not aliased
  Tensor got3 = compiled(p, q);
  Tensor got2 = compiled(x, y);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(all_close(got3, p * 2.0));
  unsetenv("TESSERA_LOGS");
  reload_knobs();
  Tensor want2 = ref.slice(0, 0, 8).clone();
  want2.slice(0, 4, 8).add_(1.0);
  EXPECT_TRUE(all_close(got2, want2 * 2.0)) << got2;
  EXPECT_TRUE(all_close(b2.slice(0, 4, 12), ref.slice(0, 4, 12) + 1.0));
  EXPECT_NE(log.find("arg0 and arg1 share memory failed"), std::string::npos) << log;
  EXPECT_EQ(compiled.stats().graphs, 3);
  // The same aliasing again: no new graph.
  Tensor b3 = randn({12});
  Tensor want3 = b3.slice(0, 0, 8).clone();
  want3.slice(0, 4, 8).add_(1.0);
  EXPECT_TRUE(all_close(compiled(b3.slice(0, 0, 8), b3.slice(0, 4, 12)), want3 * 2.0));
  EXPECT_EQ(compiled.stats().graphs, 3);
}

TL_JIT(sin_kernel, tl::Ptr x, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  auto o = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  tl::store(out + o, tl::sin(tl::load(x + o, o < n)), o < n);
}

TEST(Compile, TritonOpsAreTracedIntoCustomOpsStayOpaque) {
  static auto mysin = library::triton_op("compilelib::mysin", [](const Tensor& x) {
    Tensor out = empty_like(x);
    auto n = x.numel();
    library::wrap_triton(sin_kernel)[{tl::cdiv(n, 32)}](x, out, n, tl::meta("BLOCK", 32));
    return out;
  });
  static auto opaque =
      library::custom_op("compilelib::opaque", [](const Tensor& x) { return x * 3; });
  opaque.register_fake([](const Tensor& x) { return empty_like(x); });
  auto fn = compile([](const Tensor& x) { return opaque(mysin(x)); }, full());
  Tensor x = randn({100});
  EXPECT_TRUE(all_close(fn(x), x.sin() * 3, 1e-6, 1e-6));
  const std::string g = fn.stats().last_graph;
  EXPECT_EQ(g.find("compilelib::mysin"), std::string::npos) << g;
  EXPECT_NE(g.find("kernel sin_kernel"), std::string::npos) << g;
  EXPECT_NE(g.find("extern compilelib::opaque"), std::string::npos) << g;
  // Without a fake kernel, a custom_op cannot be traced.
  static auto nofake =
      library::custom_op("compilelib::nofake", [](const Tensor& x) { return x * 3; });
  auto bad = compile([](const Tensor& x) { return nofake(x); }, full());
  const std::string msg = error_of<CompileError>([&] { bad(x); });
  EXPECT_NE(msg.find("register_fake"), std::string::npos) << msg;
}

TEST(Compile, InputsThatRequireGradTraceTheTritonOpsBackwardToo) {
  static auto mysin2 = [] {
    auto op = library::triton_op("compilelib::mysin2", [](const Tensor& x) {
      Tensor out = empty_like(x);
      auto n = x.numel();
      library::wrap_triton(sin_kernel)[{tl::cdiv(n, 32)}](x, out, n, tl::meta("BLOCK", 32));
      return out;
    });
    op.register_autograd(
        [](autograd::AutogradContext& ctx, const Tensor& g) { return g * ctx.saved(0).cos(); },
        [](autograd::AutogradContext& ctx, const Tensor& x, const Tensor&) {
          ctx.save_for_backward({x});
        });
    return op;
  }();
  auto fn = compile([](const Tensor& x) { return mysin2(x * 2).sum(); }, full());
  Tensor x = randn({20}, TensorOptions().dtype(DType::Float64)).requires_grad_();
  fn(x).backward();
  EXPECT_TRUE(all_close(x.grad(), (x.detach() * 2).cos() * 2, 1e-12, 1e-12));
  // The forward traces into the triton_op; its registered backward is a graph of its own.
  const CompiledGraph g = fn.graph();
  ASSERT_TRUE(g.backward);
  EXPECT_TRUE(g.find("compilelib::mysin2").empty()) << g.text;
  EXPECT_EQ(g.find("mul+sin_kernel").size(), 1u) << g.text;  // x * 2 in its loads
}

TEST(Compile, GraphBreaksNameCauseAndLine) {
  auto reads = [](const Tensor& x) {
    const double s = x.sum().item<double>();  // reads data
    return x * s;
  };
  const int line = __LINE__ - 3;
  auto strict = compile(reads, full("reads"));
  const std::string msg = error_of<CompileError>([&] { strict(randn({4})); });
  EXPECT_NE(msg.find("reading tensor data"), std::string::npos) << msg;
  EXPECT_NE(msg.find("test_compile.cpp:" + std::to_string(line)), std::string::npos) << msg;
  EXPECT_NE(msg.find("fullgraph"), std::string::npos) << msg;
  // Without fullgraph the function runs in segments (test_segments.cpp), correctly.
  auto lenient = compile(reads);
  Tensor x = randn({4});
  EXPECT_TRUE(all_close(lenient(x), x * x.sum().item<double>()));
  EXPECT_TRUE(lenient.stats().segmented);
  EXPECT_FALSE(lenient.stats().eager);
}

TEST(Compile, GuardsOnDtypeScalarsAndMutatedInputs) {
  auto fn = compile(
      [](const Tensor& x, double alpha, const Tensor& out) {
        Tensor t = x * alpha;
        add_kernel[{tl::cdiv(x.numel(), 64)}](t, x, out, x.numel(), tl::meta("BLOCK_SIZE", 64));
        return t.sum();
      },
      full());
  Tensor x = randn({30}), out = zeros({30});
  fn(x, 2.0, out);
  EXPECT_TRUE(all_close(out, x * 3));  // the write into an input persists
  fn(x, 3.0, out);                     // a new scalar: a recompile
  EXPECT_TRUE(all_close(out, x * 4));
  EXPECT_EQ(fn.stats().graphs, 2);
  Tensor x64 = randn({30}, TensorOptions().dtype(DType::Float64));
  Tensor out64 = zeros({30}, TensorOptions().dtype(DType::Float64));
  fn(x64, 3.0, out64);
  EXPECT_TRUE(all_close(out64, x64 * 4));
  EXPECT_EQ(fn.stats().graphs, 3);
}

TEST(Compile, DeadCodeAndCommonSubexpressionsAreRemoved) {
  auto fn = compile(
      [](const Tensor& x) {
        Tensor unused = x.exp() * 7;  // dead
        (void)unused;
        return x.sin() + x.sin();  // one sin
      },
      full());
  Tensor x = randn({16});
  EXPECT_TRUE(all_close(fn(x), x.sin() * 2));
  const std::string g = fn.stats().last_graph;
  EXPECT_EQ(g.find("aten::exp"), std::string::npos) << g;
  const size_t first = g.find("aten::sin");
  ASSERT_NE(first, std::string::npos) << g;
  EXPECT_EQ(g.find("aten::sin", first + 1), std::string::npos) << g;
}

// Counts the operators a compiled call runs (the executor's calls go through the dispatcher).
struct OpCounter : DispatchMode {
  std::map<std::string, int> calls;
  void handle(const OperatorHandle& op, Stack& stack) override {
    ++calls[op.name()];
    op.redispatch(stack);
  }
};

std::map<std::string, int> ops_run(const std::function<void()>& call) {
  OpCounter counter;
  ModeGuard guard(&counter, ModeKind::Dispatch);
  call();
  return counter.calls;
}

TEST(CompileFills, TheSeedsZerosLikeIsElidedWhereTheKernelStoresEveryElement) {
  auto compiled = compile(add_fn, full("add_fn"));
  Tensor x = randn({4096}), y = randn({4096});
  EXPECT_TRUE(equal(compiled(x, y), x + y));
  // Static sizes: proven at compile time, the fill becomes an allocation.
  std::string g = compiled.stats().last_graph;
  EXPECT_NE(g.find("= aten::empty_like(%0,"), std::string::npos) << g;
  EXPECT_NE(g.find("fill of aten::full_like elided: kernel add_kernel stores every element"),
            std::string::npos)
      << g;
  auto calls = ops_run([&] { EXPECT_TRUE(equal(compiled(x, y), x + y)); });
  EXPECT_EQ(calls["aten::full_like"], 0);
  EXPECT_EQ(calls["aten::empty_like"], 1);
  // Dynamic sizes: the 32-bit offsets cover 2^31 - 1 elements, a guard.
  Tensor x2 = randn({4099}), y2 = randn({4099});
  EXPECT_TRUE(equal(compiled(x2, y2), x2 + y2));
  g = compiled.stats().last_graph;
  EXPECT_NE(g.find("fill of aten::full_like elided: kernel add_kernel stores every element"),
            std::string::npos)
      << g;
  EXPECT_NE(g.find("guard s0 <= 2147483647  # kernel add_kernel's 32-bit offsets"),
            std::string::npos)
      << g;
  calls = ops_run([&] { EXPECT_TRUE(equal(compiled(x, y), x + y)); });
  EXPECT_EQ(calls["aten::full_like"], 0);
  EXPECT_EQ(calls["aten::empty_like"], 1);
}

TEST(CompileFills, AFillStaysWhereAKernelCoversHalfReadsItOrStoresUnprovably) {
  // Half coverage: programs of 4 elements, one per 8. The sevens must survive.
  auto half = [](const Tensor& x, const Tensor& y) {
    Tensor out = full_like(x, 7.0);
    auto n = x.numel();
    add_kernel[tl::cdiv(n, 8)](x, y, out, n, tl::meta("BLOCK_SIZE", 4));
    return out;
  };
  auto compiled = compile(half, full("half"));
  for (int64_t n : {64, 3, 50, 4}) {  // static; then dynamic: elided for n <= 4 only
    Tensor x = randn({n}), y = randn({n});
    const Tensor expect = half(x, y);
    EXPECT_TRUE(equal(compiled(x, y), expect)) << n;  // compiles (traces) on a new size
    const auto calls = ops_run([&] { EXPECT_TRUE(equal(compiled(x, y), expect)) << n; });
    EXPECT_EQ(calls.count("aten::full_like") ? calls.at("aten::full_like") : 0, n > 4 ? 1 : 0) << n;
  }
  EXPECT_EQ(compiled.stats().graphs, 2);
  // Static: decided at compile time.
  auto st = compile(half, [] {
    CompileOptions o = full("half_static");
    o.dynamic = false;
    return o;
  }());
  Tensor x = randn({64}), y = randn({64});
  EXPECT_TRUE(equal(st(x, y), half(x, y)));
  std::string g = st.stats().last_graph;
  EXPECT_NE(g.find("fill kept: kernel add_kernel does not store every element"), std::string::npos)
      << g;
  // A kernel that loads what it stores (out += x) needs the fill.
  auto acc = compile(
      [](const Tensor& x) {
        Tensor out = full_like(x, 1.0);
        auto n = x.numel();
        add_kernel[tl::cdiv(n, 4)](x, out, out, n, tl::meta("BLOCK_SIZE", 4));
        return out;
      },
      full("acc"));
  Tensor a = randn({12});
  EXPECT_TRUE(all_close(acc(a), a + 1));
  g = acc.stats().last_graph;
  EXPECT_NE(g.find("fill kept: kernel add_kernel loads from it"), std::string::npos) << g;
  // Offsets through a runtime row length (r * cols + c): not linear, kept, and said why.
  auto rows = compile(
      [](const Tensor& x) {
        Tensor out = zeros({x.size(0), x.size(1)});
        strided_copy[{x.size(0)}](x, out, x.size(0), x.size(1), x.stride(0), tl::meta("BLOCK", 8));
        return out;
      },
      full("rows"));
  Tensor m = randn({3, 5});
  EXPECT_TRUE(equal(rows(m), m * 2));
  g = rows.stats().last_graph;
  EXPECT_NE(g.find("fill kept: kernel strided_copy stores through 'dst', but its stored offsets "
                   "are not linear"),
            std::string::npos)
      << g;
  // Stores in a loop or a branch only (write_set_kernel's b and c) prove nothing.
  auto nested = compile(
      [](const Tensor& a) {
        Tensor b = zeros({50}), c = zeros({16}), d = zeros({1});
        write_set_kernel[{1}](a, b, c, d, a.numel(), tl::meta("B", 16));
        return std::vector<Tensor>{b, c, d};
      },
      full("nested"));
  Tensor in = randn({50});
  const auto r = nested(in);
  EXPECT_TRUE(all_close(r[0], in + 1));
  EXPECT_TRUE(equal(r[1], zeros({16})));  // n <= 100: the branch did not run
  g = nested.stats().last_graph;
  EXPECT_NE(g.find("stores through 'b', but no store through it at the kernel's top level"),
            std::string::npos)
      << g;
  // d is stored at its one element by one program: the fill goes.
  EXPECT_NE(g.find("fill of aten::full elided"), std::string::npos) << g;
}

// Epilogue fusion (research/graph_compiler.md §4): PyTorch's test_fusion_relu_epilogue and its
// no-fusion cases, a bias add without annotation, a transposed epilogue left alone.
TEST(CompileEpilogues, ReluAfterTheSeedKernelIsOneKernel) {
  auto fn = [](const Tensor& x, const Tensor& y) { return add_fn(x, y).relu(); };
  auto compiled = compile(fn, full("add_relu"));
  for (int64_t n : {4096, 4099, 37}) {  // static, then dynamic
    Tensor x = randn({n}), y = randn({n});
    EXPECT_TRUE(equal(compiled(x, y), (x + y).relu())) << n;
    const std::string g = compiled.stats().last_graph;
    EXPECT_NE(g.find("kernel add_kernel+relu["), std::string::npos) << g;
    EXPECT_EQ(g.find("= aten::relu("), std::string::npos) << g;
    EXPECT_NE(g.find("epilogue aten::relu fused"), std::string::npos) << g;
  }
  Tensor x = randn({4099}), y = randn({4099});
  const Tensor expect = (x + y).relu();
  Tensor got;
  const auto calls = ops_run([&] { got = compiled(x, y); });
  EXPECT_TRUE(equal(got, expect));
  EXPECT_EQ(calls.count("aten::relu"), 0u);
  EXPECT_EQ(calls.count("aten::full_like"), 0u);
  // Epilogues chain: each fused op's result is the kernel's output again.
  auto chain =
      compile([](const Tensor& x, const Tensor& y) { return add_fn(x, y).relu().sigmoid().neg(); },
              full("chain"));
  EXPECT_TRUE(all_close(chain(x, y), (x + y).relu().sigmoid().neg()));
  EXPECT_NE(chain.stats().last_graph.find("kernel add_kernel+relu+sigmoid+neg["), std::string::npos)
      << chain.stats().last_graph;
  // Scalar operands (`* 2`, `- 1`) fuse as constants of the kernel's dtype.
  auto scaled =
      compile([](const Tensor& x, const Tensor& y) { return (add_fn(x, y) * 2.5 - 1).relu(); },
              full("scaled"));
  EXPECT_TRUE(equal(scaled(x, y), ((x + y) * 2.5 - 1).relu()));
  const CompiledGraph gs = scaled.graph();
  EXPECT_EQ(gs.kernel_launches(), 1) << gs.text;
  EXPECT_EQ(gs.find("add_kernel+mul+sub+relu").size(), 1u) << gs.text;
}

// The graph as data (issue 20): what a graph runs, reads, writes and fused, without parsing text.
TEST(CompileGraphData, NodesInputsWritesAndFusedFrom) {
  auto fn = [](const Tensor& x, const Tensor& y) { return add_fn(x, y).relu().sigmoid(); };
  auto compiled = compile(fn, full("graph_data"));
  EXPECT_THROW(compiled.graph(), CompileError);  // nothing compiled yet
  Tensor x = randn({64}), y = randn({64});
  EXPECT_TRUE(all_close(compiled(x, y), (x + y).relu().sigmoid()));
  const CompiledGraph g = compiled.graph();
  EXPECT_EQ(g.name, "graph_data");
  EXPECT_EQ(g.text, compiled.stats().last_graph);
  EXPECT_EQ(g.kernel_launches(), 1);
  ASSERT_EQ(g.inputs.size(), 2u);
  ASSERT_EQ(g.outputs.size(), 1u);
  const auto kernels = g.find("add_kernel+relu+sigmoid");
  ASSERT_EQ(kernels.size(), 1u) << g.text;
  const CompiledGraph::Node& k = *kernels[0];
  EXPECT_EQ(k.kind, CompiledGraph::Node::Kind::Kernel);
  ASSERT_EQ(k.fused_from.size(), 2u);
  EXPECT_EQ(k.fused_from[0].op, "aten::relu");
  EXPECT_EQ(k.fused_from[1].op, "aten::sigmoid");
  EXPECT_TRUE(k.fused_from[0].loc.known());
  EXPECT_EQ(k.grid, (std::vector<std::string>{"16", "1", "1"}));
  // The kernel reads both inputs and writes the tensor the function returns.
  EXPECT_EQ(k.reads, (std::vector<int>{g.inputs[0], g.inputs[1]}));
  ASSERT_EQ(k.writes.size(), 1u);
  const CompiledGraph::Value& out = g.values.at(static_cast<size_t>(k.writes[0]));
  EXPECT_EQ(out.storage, g.values.at(static_cast<size_t>(g.outputs[0])).storage);
  EXPECT_EQ(out.sizes, (std::vector<std::string>{"64"}));
  EXPECT_EQ(out.dtype, DType::Float32);
  // The output buffer is made by an earlier node (the fill, now an `empty`), not an input.
  ASSERT_GE(out.producer, 0);
  EXPECT_LT(out.producer, static_cast<int>(&k - g.nodes.data()));
  EXPECT_TRUE(g.find("aten::relu").empty());
  // Dynamic after a new size: a second graph, sizes symbolic.
  Tensor x2 = randn({100}), y2 = randn({100});
  EXPECT_TRUE(all_close(compiled(x2, y2), (x2 + y2).relu().sigmoid()));
  const auto all = compiled.graphs();
  ASSERT_EQ(all.size(), 2u);
  const CompiledGraph::Value& in = all[1].values.at(static_cast<size_t>(all[1].inputs[0]));
  EXPECT_EQ(in.sizes, (std::vector<std::string>{"s0"}));
  EXPECT_EQ(all[1].find("add_kernel+relu+sigmoid").at(0)->grid[0], "(s0 + 3)//4");
}

TEST(CompileEpilogues, ABiasAddFusesWithoutAnnotationStaticAndDynamic) {
  // The kernel writes a [rows, 24] output as flat memory; the bias broadcasts along rows: element
  // i of the output reads bias[i % 24].
  auto plain = [](const Tensor& x, const Tensor& y, const Tensor& bias) {
    Tensor out = empty({x.size(0), x.size(1)});
    auto n = x.numel();
    add_kernel[tl::cdiv(n, 16)](x, y, out, n, tl::meta("BLOCK_SIZE", 16));
    return out + bias;
  };
  auto compiled = compile(plain, full("bias"));
  for (int64_t rows : {5, 9, 2}) {
    Tensor x = randn({rows, 24}), y = randn({rows, 24}), bias = randn({24});
    EXPECT_TRUE(equal(compiled(x, y, bias), x + y + bias)) << rows;
    const std::string g = compiled.stats().last_graph;
    EXPECT_NE(g.find("kernel add_kernel+add["), std::string::npos) << g;
    EXPECT_EQ(g.find("= aten::add.Tensor("), std::string::npos) << g;
  }
  // Both sizes dynamic from the start: the row length reaches the kernel as an argument.
  CompileOptions o = full("bias_dyn");
  o.dynamic = true;
  auto dyn = compile(plain, o);
  for (int64_t cols : {24, 7, 130}) {
    Tensor x = randn({3, cols}), y = randn({3, cols}), bias = randn({cols});
    EXPECT_TRUE(equal(dyn(x, y, bias), x + y + bias)) << cols;
  }
  const std::string g = dyn.stats().last_graph;
  EXPECT_NE(g.find("kernel add_kernel+add["), std::string::npos) << g;
  EXPECT_EQ(dyn.stats().graphs, 1);
  // A column bias ([rows, 1]) and a full-size residual, as the first operand.
  auto col = compile(
      [](const Tensor& x, const Tensor& y, const Tensor& c) {
        Tensor out = empty_like(x);
        auto n = x.numel();
        add_kernel[tl::cdiv(n, 16)](x, y, out, n, tl::meta("BLOCK_SIZE", 16));
        return c * out;
      },
      full("col"));
  Tensor x = randn({6, 10}), y = randn({6, 10}), c = randn({6, 1});
  EXPECT_TRUE(equal(col(x, y, c), c * (x + y)));
  EXPECT_NE(col.stats().last_graph.find("kernel add_kernel+mul["), std::string::npos)
      << col.stats().last_graph;
}

// Column sums of a [rows, BLOCK] tensor through a loop-carried pointer (`ptrs += BLOCK`): the
// optimizer makes it an induction variable, but as traced it is not `x + offsets`.
TL_JIT(column_sums_kernel, tl::Ptr x, tl::Ptr out, tl::Int rows, tl::Const BLOCK) {
  const auto cols = tl::arange(0, BLOCK);
  tl::Var ptrs(x + cols);
  tl::Var acc(tl::zeros({BLOCK}, tessera::DType::Float32));
  tl::range(0, rows, 1, [&](tl::Tile) {
    acc += tl::load(ptrs);
    ptrs += BLOCK;
  });
  tl::store(out + cols, acc);
}

// Prologues: a pointwise op whose result only a kernel reads runs inside the kernel's loads.
TEST(CompilePrologues, OpsBeforeTheKernelRunInsideItsLoads) {
  auto launch = [](const Tensor& a, const Tensor& b) {
    Tensor out = empty_like(a);
    auto n = a.numel();
    add_kernel[tl::cdiv(n, 16)](a, b, out, n, tl::meta("BLOCK_SIZE", 16));
    return out;
  };
  auto fn = [launch](const Tensor& x, const Tensor& y, const Tensor& bias) {
    return launch(x.exp().relu(), y + bias);
  };
  auto compiled = compile(fn, full("prologue"));
  for (int64_t rows : {3, 7, 11}) {  // 24 * rows elements: the last block is masked
    Tensor x = randn({rows, 24}), y = randn({rows, 24}), bias = randn({24});
    EXPECT_TRUE(all_close(compiled(x, y, bias), x.exp().relu() + (y + bias))) << rows;
    const CompiledGraph g = compiled.graph();
    EXPECT_EQ(g.kernel_launches(), 1) << g.text;
    ASSERT_EQ(g.find("exp+relu+add+add_kernel").size() + g.find("add+exp+relu+add_kernel").size(),
              1u)
        << g.text;
    EXPECT_TRUE(g.find("aten::exp").empty()) << g.text;
    EXPECT_TRUE(g.find("aten::relu").empty()) << g.text;
  }
  // A scalar operand: `launch(x * 0.5, y)`.
  auto half = compile([launch](const Tensor& x, const Tensor& y) { return launch(x * 0.5, y); },
                      full("prologue_scalar"));
  Tensor xs = randn({5, 24}), ys = randn({5, 24});
  EXPECT_TRUE(equal(half(xs, ys), xs * 0.5 + ys));
  EXPECT_EQ(half.graph().find("mul+add_kernel").size(), 1u) << half.graph().text;
  auto note_of = [](auto& c) {
    const std::string g = c.stats().last_graph;
    const size_t at = g.find("(prologue)");
    return at == std::string::npos ? g : g.substr(at, g.find('\n', at) - at);
  };
  Tensor x = randn({40}), y = randn({40});
  // Its result is returned too: computed once, in memory.
  auto both = compile(
      [launch](const Tensor& x, const Tensor& y) {
        Tensor r = x.relu();
        return std::vector<Tensor>{launch(r, y), r};
      },
      full("prologue_result"));
  auto r = both(x, y);
  EXPECT_TRUE(equal(r[0], x.relu() + y));
  EXPECT_TRUE(equal(r[1], x.relu()));
  EXPECT_NE(note_of(both).find("also a result"), std::string::npos) << note_of(both);
  // Its operand is written between the op and the kernel: the kernel must see the old values.
  auto written = compile(
      [launch](const Tensor& x, Tensor y) {
        Tensor r = y.relu();
        y.add_(5);
        return launch(x, r);
      },
      full("prologue_written"));
  Tensor y2 = y.clone();
  EXPECT_TRUE(equal(written(x, y2), x + y.relu()));
  EXPECT_NE(note_of(written).find("written between"), std::string::npos) << note_of(written);
  // A kernel that stores to what it reads (out += x) takes no prologue there.
  auto rw = compile(
      [](const Tensor& x) {
        Tensor acc = x.abs();
        auto n = x.numel();
        add_kernel[tl::cdiv(n, 8)](x, acc, acc, n, tl::meta("BLOCK_SIZE", 8));
        return acc;
      },
      full("prologue_rw"));
  EXPECT_TRUE(equal(rw(x), x + x.abs()));
  EXPECT_EQ(rw.graph().find("aten::abs").size(), 1u) << rw.graph().text;
  // Loads through a loop-carried pointer: the prologue stays outside (its hook could not follow
  // the address), and the sums are of relu(x).
  auto carried = compile(
      [](const Tensor& x) {
        Tensor out = empty({16});
        column_sums_kernel[1](x.relu(), out, x.size(0), tl::meta("BLOCK", 16));
        return out;
      },
      full("prologue_loop_carried"));
  Tensor xc = randn({9, 16});
  EXPECT_TRUE(all_close(carried(xc), xc.relu().sum({0}), 1e-5, 1e-6));
  EXPECT_EQ(carried.graph().find("aten::relu").size(), 1u) << carried.graph().text;
}

TEST(CompileEpilogues, EachRuleThatKeepsAnOpOutOfTheKernel) {
  auto note_of = [](auto& compiled) {
    const std::string g = compiled.stats().last_graph;
    const size_t at = g.find("not fused into kernel");
    return at == std::string::npos ? g : g.substr(at, g.find('\n', at) - at);
  };
  Tensor x = randn({40}), y = randn({40});
  // Read-write tensors (PyTorch's test_no_fusion_for_read_write_tensors): out += x.
  auto rw = compile(
      [](const Tensor& x) {
        Tensor out = full_like(x, 2.0);
        auto n = x.numel();
        add_kernel[tl::cdiv(n, 8)](x, out, out, n, tl::meta("BLOCK_SIZE", 8));
        return out.relu();
      },
      full("rw"));
  EXPECT_TRUE(equal(rw(x), (x + 2).relu()));
  EXPECT_NE(note_of(rw).find("the kernel loads from its output"), std::string::npos) << note_of(rw);
  // The kernel's output is also returned: its value before the op is live.
  auto both = compile(
      [](const Tensor& x, const Tensor& y) {
        Tensor out = add_fn(x, y);
        return std::vector<Tensor>{out, out.relu()};
      },
      full("both"));
  const auto r = both(x, y);
  EXPECT_TRUE(equal(r[0], x + y));
  EXPECT_TRUE(equal(r[1], (x + y).relu()));
  EXPECT_NE(note_of(both).find("also a result"), std::string::npos) << note_of(both);
  // A transposed epilogue (#184247): out.t() is a view, then a copy; nothing fuses, and the
  // values land where eager puts them.
  auto tr = compile(
      [](const Tensor& x, const Tensor& y) {
        Tensor out = empty({4, 10});
        auto n = x.numel();
        add_kernel[tl::cdiv(n, 8)](x, y, out, n, tl::meta("BLOCK_SIZE", 8));
        return out.t().contiguous().relu();
      },
      full("transposed"));
  EXPECT_TRUE(equal(tr(x, y), (x + y).view({4, 10}).t().contiguous().relu()));
  EXPECT_EQ(tr.stats().last_graph.find("+relu"), std::string::npos) << tr.stats().last_graph;
  // A fill the kernel may not overwrite everywhere: relu(7) must be where the kernel did not store.
  auto filled = compile(
      [](const Tensor& x, const Tensor& y) {
        Tensor out = full_like(x, -7.0);
        auto n = x.numel();
        add_kernel[tl::cdiv(n, 16)](x, y, out, n, tl::meta("BLOCK_SIZE", 8));
        return out.relu();
      },
      full("filled"));
  Tensor expect = full_like(x, -7.0);
  expect.narrow(0, 0, 24).copy_((x + y).narrow(0, 0, 24));
  EXPECT_TRUE(equal(filled(x, y), expect.relu()));
  EXPECT_NE(note_of(filled).find("filled before the kernel"), std::string::npos) << note_of(filled);
  // An operand computed after the kernel (from its output's sibling) and a result of another
  // dtype stay outside.
  auto later = compile(
      [](const Tensor& x, const Tensor& y) {
        Tensor out = add_fn(x, y);
        Tensor z = y.exp();
        return out * z;
      },
      full("later"));
  EXPECT_TRUE(all_close(later(x, y), (x + y) * y.exp()));
  EXPECT_NE(note_of(later).find("computed after the kernel"), std::string::npos) << note_of(later);
  auto promoted =
      compile([](const Tensor& x, const Tensor& y, const Tensor& d) { return add_fn(x, y) + d; },
              full("p"));
  Tensor d = randn({40}, TensorOptions().dtype(float64));
  EXPECT_TRUE(equal(promoted(x, y, d), (x + y).to(float64) + d));
  EXPECT_NE(note_of(promoted).find("another dtype"), std::string::npos) << note_of(promoted);
}

}  // namespace
namespace {

TEST(Compile, TuplesVectorsAndOptionalsFlatten) {
  auto fn = compile(
      [](const std::vector<Tensor>& xs, std::optional<Tensor> bias) {
        Tensor s = xs[0] + xs[1];
        if (bias) s = s + *bias;
        return std::make_tuple(s, s.sum());
      },
      full());
  Tensor a = randn({3}), b = randn({3}), c = randn({3});
  auto [s, total] = fn(std::vector<Tensor>{a, b}, std::optional<Tensor>(c));
  EXPECT_TRUE(all_close(s, a + b + c));
  EXPECT_NEAR(total.item<double>(), (a + b + c).sum().item<double>(), 1e-5);
  auto [s2, t2] = fn(std::vector<Tensor>{a, b}, std::nullopt);
  EXPECT_TRUE(all_close(s2, a + b));
  EXPECT_EQ(fn.stats().graphs, 2);  // the optional's presence is part of the guard
}

// ---- guards: each one checked by values and recompile counts
// -------------------------------------

// Copies a 2-D tensor through its strides (the kernel sees raw memory: a missing stride or offset
// guard gives wrong values, not an error).
TL_JIT(copy2d_kernel, tl::Ptr src, tl::Ptr dst, tl::Int rows, tl::Int cols, tl::Int s0, tl::Int s1,
       tl::Const BLOCK) {
  (void)rows;  // one program per row
  auto r = tl::program_id(0);
  auto c = tl::arange(0, BLOCK);
  auto m = c < cols;
  tl::store(dst + r * cols + c, tl::load(src + r * s0 + c * s1, m), m);
}

Tensor copy2d_fn(const Tensor& x) {
  Tensor out = empty({x.size(0), x.size(1)});
  copy2d_kernel[{x.size(0)}](x, out, x.size(0), x.size(1), x.stride(0), x.stride(1),
                             tl::meta("BLOCK", 16));
  return out;
}

TEST(CompileGuards, ATransposedArgumentAfterAContiguousOne) {
  auto compiled = compile(copy2d_fn, full());
  Tensor a = randn({6, 6});
  EXPECT_TRUE(equal(compiled(a), a));
  Tensor t = randn({6, 6}).t();  // same sizes, other strides
  EXPECT_TRUE(equal(compiled(t), t.contiguous()));
  EXPECT_EQ(compiled.stats().graphs, 2);
  EXPECT_TRUE(equal(compiled(a), a));  // both graphs stay
  EXPECT_TRUE(equal(compiled(t), t.contiguous()));
  EXPECT_EQ(compiled.stats().graphs, 2);
}

TEST(CompileGuards, AStorageOffset) {
  auto compiled = compile(add_fn, full());
  Tensor base = randn({20}), other = randn({10});
  Tensor v0 = base.narrow(0, 0, 10);
  EXPECT_TRUE(equal(compiled(v0, other), v0 + other));
  Tensor v3 = base.narrow(0, 3, 10);  // same sizes and strides, offset 3
  EXPECT_TRUE(equal(compiled(v3, other), v3 + other));
  EXPECT_EQ(compiled.stats().graphs, 2);
}

TEST(CompileGuards, DuckSizedArgumentsThatStopBeingEqual) {
  CompileOptions o = full();
  o.dynamic = true;
  // Traced with x and y of one size: both are s0. y's size is read for the kernel's bound.
  auto fn = [](const Tensor& x, const Tensor& y) {
    Tensor out = zeros_like(x);
    auto n = y.numel();
    add_kernel[{tl::cdiv(n, 8)}](x, x, out, n, tl::meta("BLOCK_SIZE", 8));
    return out;
  };
  auto compiled = compile(fn, o);
  Tensor x = randn({16}), y = randn({16});
  EXPECT_TRUE(equal(compiled(x, y), x + x));
  Tensor x2 = randn({24}), y2 = randn({8});  // no longer equal: the shared symbol must not bind
  Tensor want = zeros({24});
  want.narrow(0, 0, 8).copy_(x2.narrow(0, 0, 8) * 2);
  EXPECT_TRUE(equal(compiled(x2, y2), want));
  EXPECT_EQ(compiled.stats().graphs, 2);
  EXPECT_EQ(compiled.stats().recompiles, 1);
  Tensor x3 = randn({40}), y3 = randn({40});  // equal again: the first graph
  EXPECT_TRUE(equal(compiled(x3, y3), x3 + x3));
  EXPECT_EQ(compiled.stats().graphs, 2);
}

TEST(CompileGuards, RequiresGradFlips) {
  static auto mysin3 = [] {
    auto op = library::triton_op("compilelib::mysin3", [](const Tensor& x) {
      Tensor out = empty_like(x);
      auto n = x.numel();
      library::wrap_triton(sin_kernel)[{tl::cdiv(n, 32)}](x, out, n, tl::meta("BLOCK", 32));
      return out;
    });
    op.register_autograd(
        [](autograd::AutogradContext& ctx, const Tensor& g) { return g * ctx.saved(0).cos(); },
        [](autograd::AutogradContext& ctx, const Tensor& x, const Tensor&) {
          ctx.save_for_backward({x});
        });
    return op;
  }();
  auto fn = compile([](const Tensor& x) { return mysin3(x).sum(); }, full());
  Tensor x = randn({20}, TensorOptions().dtype(DType::Float64));
  EXPECT_NEAR(fn(x).item<double>(), x.sin().sum().item<double>(), 1e-12);
  EXPECT_FALSE(fn(x).requires_grad());
  Tensor xg = x.clone().requires_grad_();
  Tensor s = fn(xg);  // must not replay the graph traced without grad
  EXPECT_EQ(fn.stats().graphs, 2);
  ASSERT_TRUE(s.requires_grad());
  s.backward();
  EXPECT_TRUE(all_close(xg.grad(), x.cos(), 1e-12, 1e-12));
  EXPECT_NEAR(fn(x).item<double>(), x.sin().sum().item<double>(), 1e-12);  // back to the first
  EXPECT_EQ(fn.stats().graphs, 2);
}

TEST(CompileGuards, DynamicFalseRecompilesPerSize) {
  CompileOptions o = full();
  o.dynamic = false;
  auto compiled = compile(add_fn, o);
  int64_t sizes[] = {5, 6, 7, 5};
  for (int64_t n : sizes) {
    Tensor x = randn({n}), y = randn({n});
    EXPECT_TRUE(equal(compiled(x, y), x + y)) << n;
  }
  EXPECT_EQ(compiled.stats().graphs, 3);
  EXPECT_EQ(compiled.stats().recompiles, 2);
  EXPECT_EQ(compiled.stats().last_graph.find("s0"), std::string::npos)
      << compiled.stats().last_graph;
}

TEST(CompileGuards, DynamicDimsAreSymbolicFromTheStart) {
  CompileOptions o = full();
  o.dynamic_dims = {{0, 0}};  // rows of x symbolic, columns static
  auto compiled = compile(copy2d_fn, o);
  for (int64_t rows : {3, 4, 9}) {
    Tensor x = randn({rows, 5});
    EXPECT_TRUE(equal(compiled(x), x)) << rows;
  }
  EXPECT_EQ(compiled.stats().graphs, 1);
  EXPECT_EQ(compiled.stats().recompiles, 0);
  const std::string g = compiled.stats().last_graph;
  EXPECT_NE(g.find("copy2d_kernel[s0, 1, 1]"), std::string::npos) << g;
  Tensor wide = randn({4, 7});  // the static dimension changes: one recompile
  EXPECT_TRUE(equal(compiled(wide), wide));
  EXPECT_EQ(compiled.stats().graphs, 2);
}

TEST(CompileGuards, ACacheHitReplaysTheGraphWithoutCallingFn) {
  static std::atomic<int> calls{0};
  calls = 0;
  auto fn = [](const Tensor& x, const Tensor& y) {
    ++calls;
    return add_fn(x, y);
  };
  auto compiled = compile(fn, full());
  Tensor x = randn({12}), y = randn({12});
  EXPECT_TRUE(equal(compiled(x, y), x + y));
  EXPECT_EQ(calls.load(), 1);  // the trace
  for (int i = 0; i < 3; ++i) {
    Tensor a = randn({12}), b = randn({12});
    EXPECT_TRUE(equal(compiled(a, b), a + b));
  }
  EXPECT_EQ(calls.load(), 1);
  Tensor a = randn({13}), b = randn({13});
  EXPECT_TRUE(equal(compiled(a, b), a + b));
  EXPECT_EQ(calls.load(), 2);  // a recompile traces again
}

// ---- re-entrant and concurrent calls
// -------------------------------------------------------------

// An extern custom op whose kernel is itself a compiled function on other sizes: the inner call
// must not overwrite the outer graph's sizes and grids while the outer graph runs.
auto& inner_compiled() {
  static auto f = [] {
    CompileOptions o = full("inner");
    o.dynamic = true;
    return compile(add_fn, o);
  }();
  return f;
}

TEST(CompileReentrancy, ACompiledFunctionCalledFromInsideAnotherGraph) {
  static auto halves = [] {
    auto op = library::custom_op("compilelib::first_half_doubled", [](const Tensor& x) {
      Tensor h = x.narrow(0, 0, x.size(0).guard_int() / 2).contiguous();
      Tensor r = x.clone();
      r.narrow(0, 0, h.size(0)).copy_(inner_compiled()(h, h.clone()));
      return r;
    });
    op.register_fake([](const Tensor& x) { return empty_like(x); });
    return op;
  }();
  CompileOptions o = full("outer");
  o.dynamic = true;
  auto outer =
      compile([](const Tensor& x, const Tensor& y) { return add_fn(halves(add_fn(x, y)), y); }, o);
  for (int64_t n : {40, 64, 18}) {
    Tensor x = randn({n}), y = randn({n});
    Tensor s = x + y;
    Tensor want = s.clone();
    want.narrow(0, 0, n / 2).mul_(2);
    want = want + y;
    EXPECT_TRUE(all_close(outer(x, y), want)) << n;
  }
  EXPECT_EQ(outer.stats().graphs, 1);
  EXPECT_EQ(inner_compiled().stats().graphs, 1);
}

TEST(CompileReentrancy, EightThreadsCallOneFunctionWithChangingSizes) {
  CompileOptions o = full("shared");
  o.dynamic = false;  // every size a graph: threads compile and replay at once
  o.recompile_limit = 1000;
  auto compiled = compile(add_fn, o);
  constexpr int kThreads = 8, kSizes = 12, kRounds = 6;
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        for (int k = 0; k < kSizes; ++k) {
          const int64_t n = 3 + (k + t + r) % kSizes;
          Tensor x = tessera::full({n}, static_cast<double>(t)),
                 y = tessera::full({n}, static_cast<double>(k));
          try {
            if (!equal(compiled(x, y), x + y)) ++bad;
          } catch (const std::exception&) {
            ++bad;
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  // Each size compiled exactly once, however the threads raced.
  EXPECT_EQ(compiled.stats().graphs, kSizes);
  EXPECT_EQ(compiled.stats().recompiles, kSizes - 1);
}

}  // namespace

namespace {

// Counts the CPU bytes live at once (the high-water mark) while installed; forwards to the
// allocator it replaced.
struct PeakCounter {
  static inline runtime::Allocator inner;
  static inline std::mutex mutex;
  static inline std::map<void*, size_t> live;
  static inline size_t bytes = 0, peak = 0;

  PeakCounter() {
    inner = runtime::allocator_for(DeviceType::CPU);
    bytes = peak = 0;
    live.clear();
    runtime::register_allocator(DeviceType::CPU, {&allocate, &release});
  }
  ~PeakCounter() { runtime::register_allocator(DeviceType::CPU, inner); }
  static void* allocate(size_t n, Device d) {
    void* p = inner.allocate(n, d);
    std::lock_guard<std::mutex> g(mutex);
    live[p] = n;
    bytes += n;
    peak = std::max(peak, bytes);
    return p;
  }
  static void release(void* p, Device d) {
    {
      std::lock_guard<std::mutex> g(mutex);
      auto it = live.find(p);
      if (it != live.end()) {
        bytes -= it->second;
        live.erase(it);
      }
    }
    inner.release(p, d);
  }
};

}  // namespace

TEST(CompileMemory, IntermediatesAreFreedAfterTheirLastUse) {
  // Eight unfused ops on 1 MiB tensors: eagerly each intermediate dies when the next op has
  // read it; the graph frees it after its last use too, so a call holds two or three at once,
  // not all eight.
  auto fn = [](const Tensor& x) {
    Tensor t = x;
    for (int i = 0; i < 8; ++i) t = (t * 0.5).sin();
    return t;
  };
  CompileOptions o;
  o.fullgraph = true;
  o.fuse = false;
  auto compiled = compile(fn, o);
  Tensor x = randn({256, 1024});
  Tensor want = fn(x);
  (void)compiled(x);  // traced
  const size_t mib = size_t(1) << 20;
  size_t peak = 0;
  Tensor got;
  {
    PeakCounter counter;
    got = compiled(x);
    peak = PeakCounter::peak;
  }
  EXPECT_TRUE(all_close(got, want, 1e-6, 1e-6));
  EXPECT_GE(peak, 2 * mib);
  EXPECT_LE(peak, 3 * mib) << "intermediates outlived their last use: " << peak << " bytes at once";
}
