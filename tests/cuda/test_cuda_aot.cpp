// CUDA AOT packages (issue 18, docs/aot.md): exported from GPU tensors with cubins for every
// requested architecture, loaded from memory by the driver and run on the GPU; the package's
// results equal the JIT's and a double reference. Without a GPU each case skips itself (the
// section's format and checks are tested on any machine in tests/aot).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "gpu_testing.h"
#include "tessera/aot.h"
#include "tessera/autotune.h"
#include "tessera/tessera.h"
#include "tessera/tl.h"
#include "testing.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

TL_JIT(gpu_aot_add, tl::Ptr in_ptr0, tl::Ptr in_ptr1, tl::Ptr out_ptr, tl::Int n_elements,
       tl::Const BLOCK_SIZE) {
  auto offsets = tl::program_id(0) * BLOCK_SIZE + tl::arange(0, BLOCK_SIZE);
  auto mask = offsets < n_elements;
  tl::store(out_ptr + offsets,
            tl::load(in_ptr0 + offsets, mask) + tl::load(in_ptr1 + offsets, mask), mask);
}

TL_JIT(gpu_aot_axpb, tl::Ptr x, tl::Ptr w, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = offs < n;
  tl::store(out + offs, tl::load(x + offs, m) * tl::load(w + offs, m) + 1.0f, m);
}

// The seed's add_fn: a fill the kernel overwrites (elided), then the kernel.
Tensor add_fn(const Tensor& x, const Tensor& y) {
  Tensor output = zeros_like(x);
  auto n_elements = output.numel();
  auto grid = [&](const tl::Meta& meta) {
    return tl::Grid{tl::cdiv(n_elements, meta["BLOCK_SIZE"])};
  };
  gpu_aot_add[grid](x, y, output, n_elements, tl::meta("BLOCK_SIZE", 256));
  return output;
}

std::string output(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  char buf[512];
  while (p && std::fgets(buf, sizeof buf, p)) out += buf;
  if (p) ::pclose(p);
  return out;
}

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "/tessera-cuda-aot-" + std::to_string(::getpid()) + "-" + name;
}

aot::ExportOptions dynamic_n(int64_t lo, int64_t hi) {
  aot::ExportOptions o;
  o.name = "add_fn";
  o.dynamic_shapes = {{0, 0, aot::Dim("n", lo, hi)}, {1, 0, aot::Dim("n", lo, hi)}};
  return o;
}

// x + y in double on the CPU, rounded to float: the kernel's one rounding.
Tensor add_reference(const Tensor& x, const Tensor& y) {
  return (x.cpu().to(DType::Float64) + y.cpu().to(DType::Float64)).to(DType::Float32);
}

}  // namespace

TEST(CudaAot, SeedAddFnRunsOnTheGpuFromAPackageWithTwoArchitectures) {
  REQUIRE_GPU();
  const std::string path = temp_path("seed.tspkg");
  aot::ExportOptions o = dynamic_n(16, 1 << 24);
  o.cuda_archs = {"sm_80", "sm_90"};
  aot::compile(path, add_fn, o, randn({4096}).to(kGpu), randn({4096}).to(kGpu));
  aot::Package p = aot::load(path);
  const aot::PackageInfo& info = p.info();
  EXPECT_EQ(info.device, "cuda");
  EXPECT_EQ(info.cuda_archs, (std::vector<std::string>{"sm_80", "sm_90"}));
  ASSERT_EQ(info.nodes.size(), 2u);
  EXPECT_EQ(info.nodes[0], "op aten::empty_like");
  EXPECT_EQ(info.nodes[1], "kernel gpu_aot_add (2 variants)");
  uint64_t want[2] = {0, 0};
  for (int64_t n : {16, 17, 1000, 4096, 1 << 20, (1 << 20) + 3}) {
    Tensor x = randn({n}).to(kGpu), y = randn({n}).to(kGpu);
    Tensor out = p(x, y)[0].to_tensor();
    ASSERT_TRUE(out.device().is_cuda());
    ASSERT_EQ(out.numel(), n);
    EXPECT_TRUE(equal(out.cpu(), add_reference(x, y))) << "n = " << n;
    EXPECT_TRUE(equal(out.cpu(), add_fn(x, y).cpu())) << "the JIT's result, n = " << n;
    ++want[n % 16 == 0 ? 0 : 1];
    EXPECT_EQ(p.variant_runs()[0].second, std::vector<uint64_t>(want, want + 2)) << "n = " << n;
  }
  // The guards: a CPU tensor, another dtype, a size outside the Dim.
  Tensor x = randn({64}).to(kGpu);
  EXPECT_NE(error_of<DeviceError>([&] { p(randn({64}), x); }).find("arg0 is on cpu"),
            std::string::npos);
  EXPECT_NE(error_of<DTypeError>([&] { p(x, x.to(DType::Float64)); }).find("arg1 is float64"),
            std::string::npos);
  EXPECT_NE(error_of<ShapeError>([&] {
              p(randn({8}).to(kGpu), randn({8}).to(kGpu));
            }).find("outside Dim 'n'"),
            std::string::npos);
  // The loader alone (linked to libtessera_runtime only), with no compiler reachable.
  const std::string loader = std::string("env PATH=/nonexistent ") + TESSERA_AOT_LOADER;
  std::string out = output(loader + " inspect " + path);
  EXPECT_NE(out.find("cuda code: sm_80, sm_90"), std::string::npos) << out;
  out = output(loader + " run " + path + " --size n=5000 --repeat 3");
  EXPECT_NE(out.find("(median of 3, on cuda:0)"), std::string::npos) << out;
  EXPECT_NE(out.find("result 0: float32[5000], sum"), std::string::npos) << out;
  ::unlink(path.c_str());
}

TEST(CudaAot, APackageWithoutThisGpusArchitectureIsRefusedListingItsOwn) {
  REQUIRE_GPU();
  const std::string path = temp_path("other-arch.tspkg");
  const DeviceProperties props = get_device_properties(kGpu);
  // An architecture of another major version than this GPU's.
  const std::string other = props.major >= 9 ? "sm_80" : "sm_90";
  aot::ExportOptions o = dynamic_n(16, 1 << 20);
  o.cuda_archs = {other};
  aot::compile(path, add_fn, o, randn({256}).to(kGpu), randn({256}).to(kGpu));
  EXPECT_EQ(aot::inspect(path).cuda_archs, std::vector<std::string>{other});
  const std::string e = error_of<aot::PackageError>([&] { aot::load(path); });
  EXPECT_NE(e.find("has code for " + other + " and none of it runs on cuda:0"), std::string::npos)
      << e;
  EXPECT_NE(error_of<ValueError>([&] {
              aot::ExportOptions bad = dynamic_n(16, 1 << 20);
              bad.cuda_archs = {"sm_9"};
              aot::compile(temp_path("bad.tspkg"), add_fn, bad, randn({256}).to(kGpu),
                           randn({256}).to(kGpu));
            }).find("'sm_9' is not a CUDA architecture"),
            std::string::npos);
  ::unlink(path.c_str());
}

// PTX for an older virtual architecture, and no cubin for this GPU: the driver compiles the PTX
// at load (how a package runs on GPUs newer than the ones it was built for).
TEST(CudaAot, APackageWithOnlyPtxRunsThroughTheDriversCompiler) {
  REQUIRE_GPU();
  const std::string path = temp_path("ptx.tspkg");
  aot::ExportOptions o = dynamic_n(16, 1 << 20);
  o.cuda_archs = {"compute_80"};
  aot::compile(path, add_fn, o, randn({512}).to(kGpu), randn({512}).to(kGpu));
  aot::Package p = aot::load(path);
  EXPECT_EQ(p.info().cuda_archs, std::vector<std::string>{"compute_80"});
  for (int64_t n : {512, 1001}) {
    Tensor x = randn({n}).to(kGpu), y = randn({n}).to(kGpu);
    EXPECT_TRUE(equal(p(x, y)[0].to_tensor().cpu(), add_reference(x, y))) << "n = " << n;
  }
  ::unlink(path.c_str());
}

TEST(CudaAot, ClosedOverGpuTensorsAndAutotunedLaunchesShipInThePackage) {
  REQUIRE_GPU();
  Tensor w = randn({1000}).to(kGpu);
  static const auto tuned =
      tl::autotune(gpu_aot_axpb,
                   {tl::Config({{"BLOCK", 128}}, 4, 1), tl::Config({{"BLOCK", 512}}, 4, 1)}, {"n"});
  auto fn = [w](const Tensor& x) {
    Tensor out = empty_like(x);
    auto n = out.numel();
    auto grid = [&](const tl::Meta& m) { return tl::Grid{tl::cdiv(n, m["BLOCK"])}; };
    tuned[grid](x, w, out, n);
    return out;
  };
  const std::string path = temp_path("tuned.tspkg");
  aot::ExportOptions o;
  o.name = "axpb";
  aot::compile(path, fn, o, randn({1000}).to(kGpu));
  aot::Package p = aot::load(path);
  Tensor x = randn({1000}).to(kGpu);
  Tensor got = p(x)[0].to_tensor();
  const Tensor want = (x.cpu().to(DType::Float64) * w.cpu().to(DType::Float64) + 1.0);
  EXPECT_LE((got.cpu().to(DType::Float64) - want).abs().max().item<double>(), 1e-5);
  uint64_t launches = 0;
  const auto runs = p.variant_runs();
  for (uint64_t c : runs[0].second) launches += c;
  EXPECT_EQ(launches, 1u);  // the tuner ran at export; one launch per call here
  ::unlink(path.c_str());
}

TEST(CudaAot, AnOperatorWhoseGpuKernelIsGeneratedAtRunTimeIsRefusedAtExport) {
  REQUIRE_GPU();
  // A reduction after the kernel runs through the tile lowering's generated kernel on a GPU.
  auto fn = [](const Tensor& x) { return add_fn(x, x).sum(); };
  const std::string e = error_of<NotImplementedError>([&] {
    aot::ExportOptions o;
    o.name = "sum";
    aot::compile(temp_path("sum.tspkg"), fn, o, randn({256}).to(kGpu));
  });
  EXPECT_NE(e.find("sum"), std::string::npos) << e;
  EXPECT_NE(e.find("generated at run time"), std::string::npos) << e;
  EXPECT_NE(e.find("test_cuda_aot.cpp"), std::string::npos) << "the user's line: " << e;
}

TEST(CudaAot, AnEpilogueFusedIntoTheUserKernelShipsInsideIt) {
  REQUIRE_GPU();
  // sin after the seed's kernel is fused into its stores (compile's epilogue fusion): the
  // package's kernel computes it, and no operator is left to run.
  auto fn = [](const Tensor& x, const Tensor& y) { return add_fn(x, y).sin(); };
  const std::string path = temp_path("epilogue.tspkg");
  aot::compile(path, fn, dynamic_n(16, 1 << 20), randn({1024}).to(kGpu), randn({1024}).to(kGpu));
  aot::Package p = aot::load(path);
  const std::vector<std::string> want_nodes = {"op aten::empty_like",
                                               "kernel gpu_aot_add+sin (2 variants)"};
  EXPECT_EQ(p.info().nodes, want_nodes);
  Tensor x = randn({3000}).to(kGpu), y = randn({3000}).to(kGpu);
  const Tensor want = add_reference(x, y).to(DType::Float64).sin();
  const Tensor got = p(x, y)[0].to_tensor().cpu().to(DType::Float64);
  EXPECT_LE((got - want).abs().max().item<double>(), 1e-6);
  ::unlink(path.c_str());
}
