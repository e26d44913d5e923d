// The layers above the ops on GPU tensors (issue 14): triton_op with autograd (the seed's mysin
// and its mycos backward), per-device kernels of a custom_op, FLOP counting, wrapper tensor types
// and tessera::compile graphs, each on cuda:0 and checked against the CPU. Without a GPU each
// case skips itself.
#include <cstdio>

#include <gtest/gtest.h>

#include "gpu_testing.h"
#include "runtime/cuda/memory.h"
#include "tessera/compile.h"
#include "tessera/flop_counter.h"
#include "tessera/library.h"
#include "tessera/tessera.h"
#include "tessera/tl.h"
#include "testing.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

TL_JIT(gpu_sin_kernel, tl::Ptr x, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = offs < n;
  tl::store(out + offs, tl::sin(tl::load(x + offs, m)), m);
}
TL_JIT(gpu_cos_kernel, tl::Ptr x, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = offs < n;
  tl::store(out + offs, tl::cos(tl::load(x + offs, m)), m);
}

Tensor launch(const tl::JITFunction& k, const Tensor& x) {
  Tensor out = empty_like(x);
  const int64_t n = x.numel();
  library::wrap_triton(k)[{tl::cdiv(n, 256)}](x, out, n, tl::meta("BLOCK", 256));
  return out;
}

auto& gpu_cos() {
  static auto op = library::triton_op("cudatest::mycos",
                                      [](const Tensor& x) { return launch(gpu_cos_kernel, x); },
                                      {.arg_names = {"x"}});
  return op;
}
auto& gpu_sin() {
  static auto op = [] {
    auto o = library::triton_op("cudatest::mysin",
                                [](const Tensor& x) { return launch(gpu_sin_kernel, x); },
                                {.arg_names = {"x"}});
    o.register_autograd([](autograd::AutogradContext& ctx,
                           const Tensor& grad) { return grad * gpu_cos()(ctx.saved(0)); },
                        [](autograd::AutogradContext& ctx, const Tensor& x, const Tensor&) {
                          ctx.save_for_backward({x});
                        });
    return o;
  }();
  return op;
}

// The seed's training step on the GPU: forward and backward kernels run there, the gradient
// stays there and equals the CPU's.
TEST(CudaLibrary, TritonOpWithAutogradOnGpuTensors) {
  REQUIRE_GPU();
  const Tensor host = random_tensor({1000}, DType::Float32);
  Tensor x = host.to(kGpu).requires_grad_();
  Tensor y = gpu_sin()(x);
  ASSERT_TRUE(y.device().is_cuda());
  y.sum().backward();
  ASSERT_TRUE(x.grad().device().is_cuda());
  EXPECT_TRUE(all_close(y.detach().cpu(), host.sin(), 1e-6, 1e-6));
  EXPECT_TRUE(all_close(x.grad().cpu(), host.cos(), 1e-6, 1e-6));
}

// register_kernel("cuda") overrides the default for GPU tensors only.
TEST(CudaLibrary, RegisterKernelPicksTheInputsDevice) {
  REQUIRE_GPU();
  static auto op = library::custom_op("cudatest::scale", [](const Tensor& x) { return x * 3; });
  op.register_kernel("cuda", [](const Tensor& x) { return x * 2; });
  const Tensor host = random_tensor({33}, DType::Float32);
  const Tensor on_gpu = op(host.to(kGpu));
  ASSERT_TRUE(on_gpu.device().is_cuda());
  EXPECT_TRUE(all_close(on_gpu.cpu(), host * 2));
  EXPECT_TRUE(all_close(op(host), host * 3));
}

// FLOP counting sees GPU matmuls (a registered formula) and GPU kernel launches.
TEST(CudaLibrary, FlopCounterCountsGpuWork) {
  REQUIRE_GPU();
  const Tensor a = random_tensor({64, 32}, DType::Float32).to(kGpu);
  const Tensor b = random_tensor({32, 16}, DType::Float32).to(kGpu);
  FlopCounterMode::Options quiet;
  quiet.display = false;
  int64_t gpu_flops = 0, cpu_flops = 0;
  {
    FlopCounterMode counter(quiet);
    (void)matmul(a, b);
    (void)gpu_sin()(a);
    gpu_flops = counter.get_total_flops();
  }
  {
    FlopCounterMode counter(quiet);
    (void)matmul(a.cpu(), b.cpu());
    (void)gpu_sin()(a.cpu());
    cpu_flops = counter.get_total_flops();
  }
  EXPECT_GE(gpu_flops, 2 * 64 * 32 * 16);
  EXPECT_EQ(gpu_flops, cpu_flops);
}

// A wrapper tensor type holding two GPU tensors: built-in ops and user kernels apply to both.
TEST(CudaLibrary, WrapperTensorTypesOfGpuTensors) {
  REQUIRE_GPU();
  const Tensor a = random_tensor({40}, DType::Float32), b = random_tensor({40}, DType::Float32);
  Tensor x = TwoTensor::make(a.to(kGpu), b.to(kGpu));
  Tensor y = gpu_sin()(x) + 1;
  auto* w = wrapper_cast<TwoTensor>(y);
  ASSERT_NE(w, nullptr);
  ASSERT_TRUE(w->a_.device().is_cuda());
  EXPECT_TRUE(all_close(w->a_.cpu(), a.sin() + 1, 1e-6, 1e-6));
  EXPECT_TRUE(all_close(w->b_.cpu(), b.sin() + 1, 1e-6, 1e-6));
}

// A compiled graph of built-in ops and a user kernel runs on the GPU, recompiling for new sizes
// as on the CPU, and its results stay there.
TEST(CudaLibrary, CompiledGraphsRunOnTheGpu) {
  REQUIRE_GPU();
  auto fn = [](const Tensor& x, const Tensor& w) {
    return softmax(matmul(gpu_sin()(x), w) * 0.5, -1).sum({0});
  };
  CompileOptions o;
  o.fullgraph = true;
  o.name = "gpu_graph";
  auto compiled = compile(fn, o);
  for (int64_t n : {8, 24, 40}) {
    const Tensor x = random_tensor({n, 16}, DType::Float32),
                 w = random_tensor({16, 5}, DType::Float32);
    const Tensor got = compiled(x.to(kGpu), w.to(kGpu));
    ASSERT_TRUE(got.device().is_cuda()) << n;
    EXPECT_TRUE(all_close(got.cpu(), fn(x, w), 1e-5, 1e-5)) << n;
  }
  EXPECT_GE(compiled.stats().graphs, 1);
}

// A function that reads a GPU value (item() copies it to the host) runs in segments: the GPU
// graphs before and after the read, the branch decided on the real value, results on the GPU.
TEST(CudaLibrary, SegmentsAroundAnItemReadRunOnTheGpu) {
  REQUIRE_GPU();
  auto fn = [](const Tensor& x) -> Tensor {
    const Tensor e = (x * 0.5).exp();
    if (e.amax().item<double>() > 2.0) return (e - 1).relu() * 3;
    return e.neg();
  };
  CompileOptions o;
  o.name = "gpu_segments";
  auto compiled = compile(fn, o);
  for (double shift : {4.0, -8.0, 4.0}) {
    const Tensor x = random_tensor({4, 300}, DType::Float32) + shift;
    const Tensor got = compiled(x.to(kGpu));
    ASSERT_TRUE(got.device().is_cuda());
    EXPECT_TRUE(all_close(got.cpu(), fn(x), 1e-5, 1e-5)) << shift;
  }
  EXPECT_TRUE(compiled.stats().segmented);
  EXPECT_EQ(compiled.graphs().size(), 3u);  // the read's segment, then one per branch
}

// Memory planning on the GPU: a compiled call's intermediates (matmul results through
// matmul.out, an unfused chain's .out results) in one cuda:0 arena at 256-byte offsets, poisoned
// when placed; results close to the unplanned graph's and the CPU's.
TEST(CudaLibrary, PlannedIntermediatesShareOneGpuArena) {
  REQUIRE_GPU();
  const Tensor w = random_tensor({64, 64}, DType::Float32) * 0.1;
  const Tensor wg = w.to(kGpu);
  auto fn = [](const Tensor& x, const Tensor& w) {
    Tensor h = (matmul(x, w) + 1.0).relu();
    Tensor a = h.sin();
    Tensor b = a.cos() * a;
    return matmul((b + h).exp(), w);
  };
  for (bool fuse : {true, false}) {
    CompileOptions o;
    o.fullgraph = true;
    o.fuse = fuse;
    o.name = fuse ? "gpu_plan" : "gpu_plan_unfused";
    auto planned = compile(fn, o);
    o.plan_memory = false;
    auto unplanned = compile(fn, o);
    const Tensor x = random_tensor({48, 64}, DType::Float32);
    compile_detail::set_planned_allocation_hook([](Tensor& t) { poison(t); });
    const Tensor got = planned(x.to(kGpu), wg);
    compile_detail::set_planned_allocation_hook(nullptr);
    ASSERT_TRUE(got.device().is_cuda());
    // (Close, not bit-identical: on an H100 the planned and unplanned graphs differed at
    // rounding level, both within float tolerance of the CPU; the cause is not known yet.)
    const Tensor ref = unplanned(x.to(kGpu), wg).cpu();
    EXPECT_TRUE(all_close(got.cpu(), ref, 1e-5, 1e-6))
        << fuse << " max diff " << (got.cpu() - ref).abs().max().item<double>() << "\n"
        << planned.graph().text << unplanned.graph().text;
    // (what a rounding-level difference comes from: the same graph twice, each plan)
    const bool same_unplanned = equal(unplanned(x.to(kGpu), wg).cpu(), ref);
    const bool same_planned = equal(planned(x.to(kGpu), wg).cpu(), got.cpu());
    const bool same = equal(got.cpu(), ref);
    std::printf(
        "[ note ] fuse=%d: planned == unplanned: %d; unplanned twice equal: %d; planned "
        "twice equal: %d\n",
        fuse, same, same_unplanned, same_planned);
    // Against a float64 reference, as accurate as the CPU's float32 (the last matmul cancels:
    // its result is far smaller than its terms, so a fixed tolerance was marginal on an H100).
    const Tensor ref64 = fn(x.to(DType::Float64), w.to(DType::Float64));
    const double cpu_err = (fn(x, w).to(DType::Float64) - ref64).abs().max().item<double>();
    const double gpu_err = (got.cpu().to(DType::Float64) - ref64).abs().max().item<double>();
    EXPECT_LE(gpu_err, 4 * cpu_err + 1e-6) << fuse << ": the CPU's float32 error " << cpu_err;
    std::printf("[ note ] fuse=%d: max error vs float64: GPU %.3g, CPU float32 %.3g\n", fuse,
                gpu_err, cpu_err);
    const CompiledGraph g = planned.graph();
    ASSERT_EQ(g.arenas.size(), 1u) << g.text;
    EXPECT_TRUE(g.arenas[0].device.is_cuda());
    EXPECT_GE(g.arenas[0].values, fuse ? 1 : 5) << g.text;
    for (const auto& n : g.nodes) {
      if (n.arena >= 0) {
        EXPECT_EQ(std::stoll(n.arena_offset) % 256, 0) << g.text;
      }
    }
  }
}

// CUDA graphs: the second call of a size captures the graph's work (a user kernel, a fused
// pointwise kernel, a reduction), later calls replay it with new arguments; every result equals
// the CPU's, and an earlier call's results are not overwritten by later replays.
TEST(CudaLibrary, CudaGraphsReplayAGraphWithNewArgumentsEachCall) {
  REQUIRE_GPU();
  const Tensor w = random_tensor({64}, DType::Float32);
  const Tensor wg = w.to(kGpu);
  auto body = [](const Tensor& x, const Tensor& y, const Tensor& w) {
    const Tensor a = launch(gpu_sin_kernel, x);
    const Tensor h = (a * y + w).relu();
    return std::make_tuple(h, h.sum(1));
  };
  CompileOptions o;
  o.fullgraph = true;
  o.cuda_graphs = true;
  o.name = "gpu_graphs";
  auto compiled = compile([&](const Tensor& x, const Tensor& y) { return body(x, y, wg); }, o);
  std::vector<std::tuple<Tensor, Tensor>> got, want;
  for (int i = 0; i < 5; ++i) {
    const Tensor x = random_tensor({32, 64}, DType::Float32) + i;
    const Tensor y = random_tensor({32, 64}, DType::Float32);
    got.push_back(compiled(x.to(kGpu), y.to(kGpu)));
    want.push_back(body(x, y, w));
  }
  EXPECT_EQ(compiled.stats().cuda_graphs, 1);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(all_close(std::get<0>(got[i]).cpu(), std::get<0>(want[i]), 1e-5, 1e-5)) << i;
    EXPECT_TRUE(all_close(std::get<1>(got[i]).cpu(), std::get<1>(want[i]), 1e-4, 1e-4)) << i;
  }
  // Another size: its first call warms, its second captures a second graph.
  for (int i = 0; i < 3; ++i) {
    const Tensor x = random_tensor({7, 64}, DType::Float32),
                 y = random_tensor({7, 64}, DType::Float32);
    const auto [h, sums] = compiled(x.to(kGpu), y.to(kGpu));
    EXPECT_TRUE(all_close(h.cpu(), std::get<0>(body(x, y, w)), 1e-5, 1e-5)) << i;
  }
  EXPECT_EQ(compiled.stats().cuda_graphs, 2);
}

// Operators with a number (`t * 1.001`, `2.0 / t`, `where(c, t, 0.5)`) in a CUDA graph, unfused and
// memory-planned (their `.Scalar_out` overloads write into the arena): the number is a kernel
// parameter, not a copy from host memory the replay would read again after it is freed. Each
// call's result matches eager's for its own input.
TEST(CudaLibrary, CudaGraphsReplayOperatorsWithNumbers) {
  REQUIRE_GPU();
  // (a closed-over CPU number: its value at each call, as eager reads it)
  Tensor scale = full({}, 2.0, TensorOptions().dtype(DType::Float64));
  auto body = [&](const Tensor& x) {
    Tensor t = x;
    for (int i = 0; i < 4; ++i) t = (t * 1.001 + 0.5).sin();
    return where(t > 0, 2.0 / (t.abs() + 1), 0.5) - pow(2, t) * scale;
  };
  CompileOptions o;
  o.fullgraph = true;
  o.fuse = false;
  o.cuda_graphs = true;
  o.name = "gpu_graphs_numbers";
  auto compiled = compile(body, o);
  std::vector<Tensor> xs, got;
  for (int i = 0; i < 5; ++i) {
    xs.push_back(random_tensor({1000}, DType::Float32) * (i + 1));
    got.push_back(compiled(xs.back().to(kGpu)));
  }
  EXPECT_EQ(compiled.stats().cuda_graphs, 1);
  for (size_t i = 0; i < xs.size(); ++i)
    EXPECT_TRUE(all_close(got[i].cpu(), body(xs[i]), 1e-5, 1e-5)) << i;
  // The closed-over number changes: the size is captured again, and replays the new value.
  scale.fill_(-3.0);
  for (int i = 0; i < 2; ++i) {
    const Tensor y = compiled(xs[0].to(kGpu));
    EXPECT_TRUE(all_close(y.cpu(), body(xs[0]), 1e-5, 1e-5)) << i;
  }
  EXPECT_EQ(compiled.stats().cuda_graphs, 1);
}

// A number operand of a GPU operator costs no device allocation or copy: `x * 2` allocates its
// result only.
TEST(CudaLibrary, ANumberOperandIsNotCopiedToTheDevice) {
  REQUIRE_GPU();
  const Tensor x = random_tensor({4096}, DType::Float32).to(kGpu);
  Tensor warm = x * 2.0;  // the kernel's first launch
  runtime::cuda::reset_peak_stats(0);
  const auto before = runtime::cuda::memory_stats(0);
  const Tensor y = x * 3.0 + 1;
  const auto after = runtime::cuda::memory_stats(0);
  EXPECT_EQ(after.allocations - before.allocations, 2);  // x * 3 and its + 1, nothing else
  EXPECT_TRUE(all_close(y.cpu(), x.cpu() * 3.0 + 1, 1e-6, 1e-6));
}

// What a replay would get wrong is refused and runs as before: a function that writes its
// argument (a replay would write the static copy).
TEST(CudaLibrary, CudaGraphsRefuseAFunctionThatWritesItsArgument) {
  REQUIRE_GPU();
  CompileOptions o;
  o.fullgraph = true;
  o.cuda_graphs = true;
  o.name = "gpu_graphs_refused";
  auto compiled = compile(
      [](const Tensor& x) {
        Tensor t = x;
        t.add_(1.0);
        return t * 2.0;
      },
      o);
  const Tensor x = random_tensor({16}, DType::Float32);
  Tensor xg = x.to(kGpu);
  Tensor last;
  for (int i = 0; i < 3; ++i) last = compiled(xg);
  EXPECT_TRUE(all_close(xg.cpu(), x + 3.0, 1e-6, 1e-6));
  EXPECT_TRUE(all_close(last.cpu(), (x + 3.0) * 2.0, 1e-6, 1e-6));
  EXPECT_EQ(compiled.stats().cuda_graphs, 0);
}

}  // namespace
