// AOT packages (issue 18, docs/aot.md): export, load and run; the guards at every call; damaged,
// hostile and mismatched packages refused with a PackageError naming the check.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <tuple>

#include "aot/package.h"
#include "tessera/aot.h"
#include "tessera/autotune.h"
#include "tessera/library.h"
#include "tessera/tessera.h"
#include "tessera/tl.h"
#include "testing.h"

using namespace tessera;
using tessera::testing::error_of;

namespace {

TL_JIT(aot_add_kernel, tl::Ptr in_ptr0, tl::Ptr in_ptr1, tl::Ptr out_ptr, tl::Int n_elements,
       tl::Const BLOCK_SIZE) {
  auto offsets = tl::program_id(0) * BLOCK_SIZE + tl::arange(0, BLOCK_SIZE);
  auto mask = offsets < n_elements;
  tl::store(out_ptr + offsets,
            tl::load(in_ptr0 + offsets, mask) + tl::load(in_ptr1 + offsets, mask), mask);
}

// One row of 16 elements per program, scaled by the number of rows: a kernel whose integer
// argument is 1 for the example (specialized to 1 there) and larger later.
TL_JIT(aot_rows_kernel, tl::Ptr x, tl::Ptr out, tl::Int rows, tl::Const ROW) {
  auto offs = tl::program_id(0) * ROW + tl::arange(0, ROW);
  auto mask = offs < rows * ROW;
  tl::store(out + offs, tl::load(x + offs, mask) * rows.to(tl::float32), mask);
}

TL_JIT(aot_copy_kernel, tl::Ptr x, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto mask = offs < n;
  tl::store(out + offs, tl::load(x + offs, mask), mask);
}

// The seed's add_fn: a fill the kernel overwrites, then the kernel.
Tensor add_fn(const Tensor& x, const Tensor& y) {
  Tensor output = zeros_like(x);
  auto n_elements = output.numel();
  auto grid = [&](const tl::Meta& meta) {
    return tl::Grid{tl::cdiv(n_elements, meta["BLOCK_SIZE"])};
  };
  aot_add_kernel[grid](x, y, output, n_elements, tl::meta("BLOCK_SIZE", 64));
  return output;
}

// Paths under the test's temporary directory, removed when the process ends.
std::string temp_path(const std::string& name) {
  struct Files {
    std::vector<std::string> paths;
    ~Files() {
      for (const auto& p : paths) ::unlink(p.c_str());
    }
  };
  static Files files;
  files.paths.push_back(::testing::TempDir() + "/tessera-aot-" + std::to_string(::getpid()) + "-" +
                        name);
  return files.paths.back();
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

aot::ExportOptions dynamic_n(int64_t lo, int64_t hi) {
  aot::ExportOptions o;
  o.name = "add_fn";
  o.dynamic_shapes = {{0, 0, aot::Dim("n", lo, hi)}, {1, 0, aot::Dim("n", lo, hi)}};
  return o;
}

// The seed's add_fn package, exported once for the tests that only read it.
const std::string& seed_package() {
  static const std::string path = [] {
    const std::string p = temp_path("seed.tspkg");
    Tensor x = randn({4096}), y = randn({4096});
    aot::compile(p, add_fn, dynamic_n(16, 1 << 20), x, y);
    return p;
  }();
  return path;
}

}  // namespace

TEST(Aot, SeedAddFnRunsFromThePackageAtEverySizeInItsRange) {
  aot::Package p = aot::load(seed_package());
  const aot::PackageInfo& info = p.info();
  ASSERT_EQ(info.inputs.size(), 2u);
  EXPECT_EQ(info.inputs[0], "arg0: float32[n]");
  // The fill is dead (the kernel covers every element at every n): an empty_like. The kernel
  // has the example's specialization (n divisible by 16, aligned pointers) and a generic one.
  ASSERT_EQ(info.nodes.size(), 2u) << info.nodes.size();
  EXPECT_EQ(info.nodes[0], "op aten::empty_like");
  EXPECT_EQ(info.nodes[1], "kernel aot_add_kernel (2 variants)");
  // Sizes the example did not have: those not divisible by 16 take the generic variant.
  uint64_t want[2] = {0, 0};
  for (int64_t n : {16, 17, 1000, 4096, 65537}) {
    Tensor x = randn({n}), y = randn({n});
    std::vector<IValue> out = p(x, y);
    ASSERT_EQ(out.size(), 1u);
    Tensor r = out[0].to_tensor();
    ASSERT_EQ(r.numel(), n);
    EXPECT_TRUE(equal(r, x + y)) << "n = " << n;
    ++want[n % 16 == 0 ? 0 : 1];
    const auto runs = p.variant_runs();
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].second, std::vector<uint64_t>(want, want + 2)) << "n = " << n;
  }
  // Memory from elsewhere (DLPack, from_blob) need not be 16-byte aligned: the generic variant.
  std::vector<float> buf(1025);
  Tensor x = from_blob(buf.data() + 1, {1024}, DType::Float32), y = randn({1024});
  x.copy_(randn({1024}));
  ASSERT_NE(reinterpret_cast<uintptr_t>(x.impl()->data()) % 16, 0u);
  EXPECT_TRUE(equal(p(x, y)[0].to_tensor(), x + y));
  EXPECT_EQ(p.variant_runs()[0].second[1], want[1] + 1);
}

TEST(Aot, EveryCallChecksItsArgumentsAgainstTheGuards) {
  aot::Package p = aot::load(seed_package());
  Tensor x = randn({64}), y = randn({64});
  EXPECT_NE(error_of<DTypeError>([&] { p(x.to(DType::Float64), y); }).find("arg0 is float64"),
            std::string::npos);
  EXPECT_NE(error_of<ShapeError>([&] {
              p(randn({8}), randn({8}));
            }).find("outside Dim 'n' [16, 1048576]"),
            std::string::npos);
  EXPECT_NE(error_of<ShapeError>([&] { p(randn({1 << 21}), randn({1 << 21})); }).find("Dim 'n'"),
            std::string::npos);
  EXPECT_NE(error_of<ShapeError>([&] {
              p(x, randn({65}));
            }).find("arg1 has size 65 in dimension 0, but Dim 'n' is 64"),
            std::string::npos);
  EXPECT_NE(error_of<ShapeError>([&] {
              p(randn({4, 16}), randn({4, 16}));
            }).find("dimensions"),
            std::string::npos);
  EXPECT_NE(error_of<ValueError>([&] { p.run({IValue(x)}); }).find("takes 2 arguments, got 1"),
            std::string::npos);
  EXPECT_NE(error_of<TypeError>([&] {
              p.run({IValue(x), IValue(int64_t{3})});
            }).find("arg1 must be a tensor"),
            std::string::npos);
  EXPECT_NE(error_of<ValueError>([&] { p(x, x); }).find("arg0 and arg1 must not share memory"),
            std::string::npos);
  Tensor wide = randn({64, 2});
  EXPECT_NE(error_of<ShapeError>([&] { p(wide.select(1, 0), y); }).find("arg0 must be contiguous"),
            std::string::npos);
}

// x + y through an autotuned add kernel (BLOCK_SIZE tuned).
Tensor tuned_add(const tl::TunedKernel& tuned, const Tensor& x, const Tensor& y) {
  Tensor out = empty_like(x);
  auto n = out.numel();
  auto grid = [&](const tl::Meta& m) { return tl::Grid{tl::cdiv(n, m["BLOCK_SIZE"])}; };
  tuned[grid](x, y, out, n);
  return out;
}

TEST(Aot, AnAutotunedLaunchShipsOneConfigThatRunsEverySize) {
  static const auto tuned = tl::autotune(
      aot_add_kernel,
      {tl::Config({{"BLOCK_SIZE", 32}}, 4, 3), tl::Config({{"BLOCK_SIZE", 128}}, 4, 3)},
      {"n_elements"});
  auto fn = [](const Tensor& x, const Tensor& y) { return tuned_add(tuned, x, y); };
  const std::string path = temp_path("tuned.tspkg");
  aot::compile(path, fn, dynamic_n(16, 1 << 16), randn({1024}), randn({1024}));
  aot::Package p = aot::load(path);
  // The tuner ran at export (every config timed there); the package runs one config per launch.
  ASSERT_EQ(p.variant_runs().size(), 1u);
  for (int64_t n : {100, 1024, 5000}) {
    Tensor x = randn({n}), y = randn({n});
    EXPECT_TRUE(equal(p(x, y)[0].to_tensor(), x + y)) << "n = " << n;
  }
  uint64_t launches = 0;
  const auto runs = p.variant_runs();
  for (uint64_t c : runs[0].second) launches += c;
  EXPECT_EQ(launches, 3u);  // no tuning at run time: one launch per call
}

// A config's pre_hook is host code run before every launch with that config: a package cannot
// hold it, so the export refuses it (and names the config) instead of dropping it.
TEST(Aot, AConfigWithAPreHookIsRefusedAtExport) {
  tl::Config with_hook({{"BLOCK_SIZE", 64}}, 4, 1);
  with_hook.pre_hook = [](const tl::Args&) {};
  static const auto tuned = tl::autotune(aot_add_kernel, {with_hook}, {"n_elements"});
  auto fn = [](const Tensor& x, const Tensor& y) { return tuned_add(tuned, x, y); };
  const std::string path = temp_path("hook.tspkg");
  const std::string e = error_of<NotImplementedError>(
      [&] { aot::compile(path, fn, dynamic_n(16, 1 << 16), randn({256}), randn({256})); });
  EXPECT_NE(e.find("kernel aot_add_kernel"), std::string::npos) << e;
  EXPECT_NE(e.find("pre_hook before every launch (BLOCK_SIZE: 64"), std::string::npos) << e;
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
}

TEST(Aot, StaticSizesAndClosedOverTensors) {
  Tensor w = randn({32});
  auto scale = [w](const Tensor& x) { return (x * w).relu(); };
  const std::string path = temp_path("scale.tspkg");
  aot::ExportOptions o;
  o.name = "scale";
  aot::compile(path, scale, o, randn({32}));
  aot::Package p = aot::load(path);
  EXPECT_EQ(p.info().inputs[0], "arg0: float32[32]");
  Tensor x = randn({32});
  EXPECT_TRUE(equal(p(x)[0].to_tensor(), (x * w).relu()));
  EXPECT_NE(error_of<ShapeError>([&] { p(randn({33})); }).find("exported static"),
            std::string::npos);
}

// A kernel calling a precompiled extern function (a static archive of C code): the package holds
// the function's code, so it runs after the archive is gone.
std::string& prebuilt_archive() {
  static std::string path;
  return path;
}

TL_JIT(aot_prebuilt_kernel, tl::Ptr x, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  tl::ExternLibrary lib;
  lib.name = "cubic";
  lib.cpu_objects = {prebuilt_archive()};
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto mask = offs < n;
  tl::store(out + offs,
            tl::extern_elementwise(lib, {tl::load(x + offs, mask)},
                                   {{{DType::Float32}, "aot_cubic", DType::Float32}}),
            mask);
}

TEST(Aot, APackageHoldsThePrecompiledExternFunctionsItsKernelsCall) {
  const std::string src = temp_path("cubic.cpp"), obj = temp_path("cubic.o");
  prebuilt_archive() = temp_path("libcubic.a");
  spit(src, "extern \"C\" float aot_cubic(float x) { return x * x * x - 2.0f; }\n");
  ASSERT_EQ(std::system(("c++ -O2 -fPIC -c " + src + " -o " + obj + " && ar rcs " +
                         prebuilt_archive() + " " + obj)
                            .c_str()),
            0);
  auto f = [](const Tensor& x) {
    Tensor out = empty_like(x);
    aot_prebuilt_kernel[{tl::cdiv(x.numel(), 128)}](x, out, x.numel(), tl::meta("BLOCK", 128));
    return out;
  };
  const std::string path = temp_path("cubic.tspkg");
  aot::ExportOptions o;
  o.name = "cubic";
  aot::compile(path, f, o, randn({300}));
  ::unlink(prebuilt_archive().c_str());
  ::unlink(obj.c_str());
  aot::Package p = aot::load(path);
  Tensor x = randn({300});
  const Tensor got = p(x)[0].to_tensor();
  for (int64_t i = 0; i < 300; ++i) {
    const float v = x[i].item<float>();
    EXPECT_FLOAT_EQ(got[i].item<float>(), v * v * v - 2.0f) << i;
  }
}

// The file mapped at `p` in this process ("" when none: heap or anonymous memory).
std::string mapped_file_of(const void* p) {
  std::ifstream maps("/proc/self/maps");
  const auto a = reinterpret_cast<uintptr_t>(p);
  for (std::string line; std::getline(maps, line);) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) != 2 || a < lo || a >= hi) continue;
    const size_t slash = line.find('/');
    return slash == std::string::npos ? "" : line.substr(slash);
  }
  return "";
}

// A CPU package's constants are the file's pages, mapped copy-on-write: a write through a result
// that is the constant itself stays in this process (the file, and a second load, keep the
// exported values); `copy_constants` gives new memory instead.
TEST(Aot, ConstantsAreMappedCopyOnWriteFromTheFile) {
  const Tensor w = arange(256).to(DType::Float32);
  auto fn = [w](const Tensor& x) { return std::make_tuple(w, x * w); };
  const std::string path = temp_path("mapped.tspkg");
  aot::ExportOptions o;
  o.name = "mapped";
  aot::compile(path, fn, o, randn({256}));
  const std::string sha = aot::inspect(path).sha256;
  for (bool copy : {false, true}) {
    aot::LoadOptions lo;
    lo.copy_constants = copy;
    aot::Package p = aot::load(path, lo);
    Tensor x = randn({256});
    std::vector<IValue> out = p(x);
    ASSERT_EQ(out.size(), 2u);
    Tensor c = out[0].to_tensor();
    EXPECT_TRUE(equal(c, w));
    char real[PATH_MAX];
    ASSERT_NE(::realpath(path.c_str(), real), nullptr);
    EXPECT_EQ(mapped_file_of(c.impl()->data()) == real, !copy) << mapped_file_of(c.impl()->data());
    EXPECT_TRUE(equal(out[1].to_tensor(), x * w));
    c.fill_(7.0);  // the package's constant itself, as the function returned it
    EXPECT_TRUE(equal(p(x)[1].to_tensor(), x * 7.0)) << "copy = " << copy;
    EXPECT_EQ(aot::inspect(path).sha256, sha) << "the file is unchanged, copy = " << copy;
    EXPECT_TRUE(equal(aot::load(path)(x)[0].to_tensor(), w)) << "a new load, copy = " << copy;
  }
}

TEST(Aot, RepeatedAndViewResultsAndANoneArgument) {
  auto fn = [](const Tensor& x, const std::optional<Tensor>& bias) {
    Tensor y = bias ? add_fn(x, *bias) : x.relu();
    return std::make_tuple(y, y, y.view({-1, 2}));
  };
  aot::ExportOptions o;
  o.name = "views";
  o.dynamic_shapes = {{0, 0, aot::Dim("n", 4, 1 << 16)}};
  const std::string path = temp_path("views.tspkg");
  aot::compile(path, fn, o, randn({64}), std::optional<Tensor>());
  aot::Package p = aot::load(path);
  Tensor x = randn({100});
  std::vector<IValue> out = p(x, std::optional<Tensor>());  // leaves: x, then `false` (no bias)
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(equal(out[0].to_tensor(), x.relu()));
  EXPECT_TRUE(equal(out[2].to_tensor(), x.relu().view({50, 2})));
  out[0].to_tensor().fill_(1.0);  // the results share memory as the function's did
  EXPECT_TRUE(equal(out[1].to_tensor(), ones({100})));
  EXPECT_TRUE(equal(out[2].to_tensor(), ones({50, 2})));
  // The view's divisibility is a guard of every call, not a specialization.
  const std::string odd = error_of<ValueError>([&] { p(randn({101}), std::optional<Tensor>()); });
  EXPECT_NE(odd.find("fail the guard n % 2 == 0"), std::string::npos) << odd;
  EXPECT_NE(error_of<ValueError>([&] {
              p.run({IValue(x), IValue(true)});
            }).find("arg1 must be the constant"),
            std::string::npos);
}

// PyTorch's equal_to_1 case: an integer argument 1 is specialized into the kernel (its code has
// no parameter left to read); a dynamic size that is 1 in the example would pin its Dim instead,
// which the export refuses (the specializing test below).
TEST(Aot, AnArgumentEqualToOneIsCompiledIntoTheKernel) {
  auto fn = [](const Tensor& x) {
    Tensor out = empty_like(x);
    aot_rows_kernel[{1}](x, out, 1, tl::meta("ROW", 16));
    return out;
  };
  aot::ExportOptions o;
  o.name = "rows";
  const std::string path = temp_path("rows.tspkg");
  aot::compile(path, fn, o, randn({16}));
  namespace ad = tessera::aot_detail;
  const ad::Model m = ad::decode(ad::read_container(slurp(path), "rows"), "rows");
  ASSERT_EQ(m.nodes.size(), 2u);
  ASSERT_EQ(m.nodes[1].params.size(), 4u);
  EXPECT_EQ(m.nodes[1].params[2].source, ad::Param::FromConstant);
  EXPECT_EQ(m.nodes[1].params[2].i, 1);
  // Variants only for the pointers' alignment: nothing to assume of a constant.
  for (const ad::Variant& v : m.nodes[1].variants) EXPECT_EQ(v.assume[2], 0) << v.symbol;
  aot::Package p = aot::load(path);
  Tensor x = randn({16});
  EXPECT_TRUE(equal(p(x)[0].to_tensor(), x));
}

// A kernel launched twice with one specialization is compiled and stored once.
TEST(Aot, ARepeatedKernelIsStoredOnce) {
  auto twice = [](const Tensor& x, const Tensor& y) { return add_fn(add_fn(x, y), y); };
  const std::string path = temp_path("twice.tspkg");
  aot::compile(path, twice, dynamic_n(16, 1 << 16), randn({256}), randn({256}));
  namespace ad = tessera::aot_detail;
  const ad::Model m = ad::decode(ad::read_container(slurp(path), "twice"), "twice");
  std::vector<std::vector<std::string>> symbols;
  for (const ad::Node& n : m.nodes) {
    if (n.kind != ad::Node::Kernel) continue;
    symbols.emplace_back();
    for (const ad::Variant& v : n.variants) symbols.back().push_back(v.symbol);
  }
  ASSERT_EQ(symbols.size(), 2u);
  EXPECT_EQ(symbols[0], symbols[1]);
  EXPECT_EQ(symbols[0], (std::vector<std::string>{"tessera_kernel_0", "tessera_kernel_1"}));
  aot::Package p = aot::load(path);
  Tensor x = randn({1000}), y = randn({1000});
  EXPECT_TRUE(equal(p(x, y)[0].to_tensor(), (x + y) + y));
}

// Ten dtypes through one package: each argument's dtype is checked at every call, and each
// kernel copies its own dtype exactly.
TEST(Aot, EveryCallChecksTheDtypeOfEachOfTenArguments) {
  const std::vector<DType> dtypes = {DType::Bool,    DType::Int8,   DType::Int16,   DType::Int32,
                                     DType::Int64,   DType::UInt8,  DType::Float16, DType::BFloat16,
                                     DType::Float32, DType::Float64};
  auto copies = [](const std::vector<Tensor>& xs) {
    std::vector<Tensor> out;
    for (const Tensor& x : xs) {
      out.push_back(empty_like(x));
      const auto n = x.numel();
      aot_copy_kernel[{tl::cdiv(n, 64)}](x, out.back(), n, tl::meta("BLOCK", 64));
    }
    return out;
  };
  auto inputs = [&](int64_t n) {
    std::vector<Tensor> xs;
    for (DType d : dtypes) xs.push_back((randn({n}) * 50.0).to(d));
    return xs;
  };
  aot::ExportOptions o;
  o.name = "copies";
  for (int i = 0; i < 10; ++i) o.dynamic_shapes.push_back({i, 0, aot::Dim("n", 2, 1 << 16)});
  const std::string path = temp_path("dtypes.tspkg");
  aot::compile(path, copies, o, inputs(128));
  aot::Package p = aot::load(path);
  const std::vector<Tensor> xs = inputs(333);
  // A vector flattens to its length, then its items: leaf 0 is the count (a constant 10).
  const std::vector<IValue> out = p(xs);
  ASSERT_EQ(out.size(), 11u);
  EXPECT_EQ(out[0].to_int(), 10);
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(out[i + 1].to_tensor().dtype(), dtypes[i]);
    EXPECT_TRUE(equal(out[i + 1].to_tensor(), xs[i])) << dtype_name(dtypes[i]);
    std::vector<Tensor> bad = xs;
    bad[i] = xs[i].to(dtypes[(i + 1) % 10]);
    const std::string e = error_of<DTypeError>([&] { p(bad); });
    EXPECT_NE(e.find("arg" + std::to_string(i + 1) + " is " + dtype_name(dtypes[(i + 1) % 10]) +
                     ", the package takes " + dtype_name(dtypes[i]) + "[n]"),
              std::string::npos)
        << e;
  }
}

// A custom_op with a CPU kernel runs from a package by name (PyTorch's AOTInductor refuses
// custom ops); the loading process must define it with the same schema (checked at load, in the
// hostile-model test below).
TEST(Aot, ACustomOpWithARegisteredKernelRunsFromThePackage) {
  static auto op = [] {
    auto o = library::custom_op("aottest::rowsum", [](const Tensor& x) { return x.sum({1}) * 2.0; },
                                {.arg_names = {"x"}});
    o.register_fake([](const Tensor& x) {
      return empty({x.sizes()[0]}, TensorOptions().dtype(x.dtype()).device(x.device()));
    });
    return o;
  }();
  auto fn = [](const Tensor& x) { return op(x).relu(); };
  aot::ExportOptions o;
  o.name = "rowsum";
  o.dynamic_shapes = {{0, 0, aot::Dim("rows", 2, 1 << 12)}};
  const std::string path = temp_path("custom.tspkg");
  aot::compile(path, fn, o, randn({8, 5}));
  aot::Package p = aot::load(path);
  EXPECT_EQ(p.info().nodes.front(), "op aottest::rowsum");
  Tensor x = randn({37, 5});
  EXPECT_TRUE(equal(p(x)[0].to_tensor(), (x.sum({1}) * 2.0).relu()));
}

// A chain of built-in pointwise ops is one generated kernel in the graph (issue 17); the package
// ships it like a user's kernel and runs it at every size in the exported range.
TEST(Aot, AFusedPointwiseChainRunsFromThePackageAtEverySize) {
  auto fn = [](const Tensor& x, const Tensor& b) { return ((x + b) * 0.5).sigmoid() - x; };
  aot::ExportOptions o;
  o.name = "chain";
  o.dynamic_shapes = {{0, 0, aot::Dim("rows", 2, 1 << 12)}};
  const std::string path = temp_path("chain.tspkg");
  aot::compile(path, fn, o, randn({8, 24}), randn({24}));
  aot::Package p = aot::load(path);
  const auto& nodes = p.info().nodes;
  EXPECT_TRUE(std::any_of(nodes.begin(), nodes.end(), [](const std::string& n) {
    return n.find("fused_add_mul_sigmoid_sub") != std::string::npos;
  })) << ::testing::PrintToString(nodes);
  for (int64_t rows : {2, 37, 1000}) {
    Tensor x = randn({rows, 24}), b = randn({24});
    EXPECT_TRUE(tessera::testing::all_close(p(x, b)[0].to_tensor(), fn(x, b), 1e-5, 1e-6)) << rows;
  }
}

// A pointwise op before a user kernel runs inside its loads (a prologue); the package ships the
// derived kernel.
TEST(Aot, APrologueFusedIntoTheUserKernelShipsInsideIt) {
  auto fn = [](const Tensor& x, const Tensor& y) { return add_fn(x.relu(), y); };
  aot::ExportOptions o;
  o.name = "prologue";
  o.dynamic_shapes = {{0, 0, aot::Dim("n", 2, 1 << 20)}, {1, 0, aot::Dim("n", 2, 1 << 20)}};
  const std::string path = temp_path("prologue.tspkg");
  aot::compile(path, fn, o, randn({64}), randn({64}));
  aot::Package p = aot::load(path);
  const auto& nodes = p.info().nodes;
  EXPECT_TRUE(std::any_of(nodes.begin(), nodes.end(), [](const std::string& n) {
    return n.find("relu+") != std::string::npos;
  })) << ::testing::PrintToString(nodes);
  for (int64_t n : {2, 77, 5000}) {
    Tensor x = randn({n}), y = randn({n});
    EXPECT_TRUE(equal(p(x, y)[0].to_tensor(), x.relu() + y)) << n;
  }
}

// A size read from tensor data (an unbacked size, e.g. a grid from `item()`) breaks the graph;
// a package is one whole graph, so the export refuses it and names the cause.
TEST(Aot, ASizeReadFromTensorDataIsRefusedAtExport) {
  auto fn = [](const Tensor& x) {
    const auto n = static_cast<int64_t>(x.sum().item<double>() > 0 ? 64 : 32);
    Tensor out = empty({n});
    aot_copy_kernel[{tl::cdiv(n, 64)}](x, out, n, tl::meta("BLOCK", 64));
    return out;
  };
  aot::ExportOptions o;
  o.name = "unbacked";
  const std::string path = temp_path("unbacked.tspkg");
  const std::string e = error_of<CompileError>([&] { aot::compile(path, fn, o, randn({64})); });
  EXPECT_NE(e.find("a package holds one whole graph"), std::string::npos) << e;
  EXPECT_NE(e.find("reading tensor data"), std::string::npos) << e;
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
}

TEST(Aot, ADynamicDimensionTheFunctionSpecializesFailsTheExport) {
  auto pick = [](const Tensor& x) {
    const int64_t n = x.size(0).guard_int();  // the line the error names
    return x * static_cast<double>(n);
  };
  aot::ExportOptions o;
  o.name = "pick";
  o.dynamic_shapes = {{0, 0, aot::Dim("n")}};
  const std::string path = temp_path("pick.tspkg");
  const std::string msg = error_of<CompileError>([&] { aot::compile(path, pick, o, randn({16})); });
  EXPECT_NE(msg.find("specializes a dynamic dimension"), std::string::npos) << msg;
  EXPECT_NE(msg.find("test_aot.cpp"), std::string::npos) << msg;
  EXPECT_NE(::access(path.c_str(), F_OK), 0) << "nothing is written when the export fails";
  // A Dim whose range excludes the example, and one name for two sizes.
  o.dynamic_shapes = {{0, 0, aot::Dim("n", 32, 64)}};
  EXPECT_NE(error_of<CompileError>([&] {
              aot::compile(path, pick, o, randn({16}));
            }).find("outside Dim 'n' [32, 64]"),
            std::string::npos);
  EXPECT_NE(error_of<CompileError>([&] {
              aot::compile(path, add_fn, dynamic_n(2, 100), randn({16}), randn({17}));
            }).find("one Dim is one size"),
            std::string::npos);
  o.dynamic_shapes = {{0, 0, aot::Dim("n", 1, 64)}};
  EXPECT_NE(error_of<CompileError>([&] {
              aot::compile(path, pick, o, randn({16}));
            }).find("minimum is at least 2"),
            std::string::npos);
}

TEST(Aot, DamagedPackagesAreRefusedWithTheCheckThatFailed) {
  const std::string good = slurp(seed_package());
  ASSERT_GT(good.size(), 200u);
  const std::string path = temp_path("damaged.tspkg");
  auto refused = [&](const std::string& bytes) {
    spit(path, bytes);
    return error_of<aot::PackageError>([&] { aot::load(path); });
  };
  EXPECT_NE(refused(good.substr(0, good.size() / 2)).find("outside the file"), std::string::npos);
  EXPECT_NE(refused(good.substr(0, 10)).find("no magic number"), std::string::npos);
  EXPECT_NE(refused("").find("no magic number"), std::string::npos);
  std::string flipped = good;
  flipped[flipped.size() - 100] ^= 0x10;  // inside the last section (the shared object)
  EXPECT_NE(refused(flipped).find("is damaged (its SHA-256 differs)"), std::string::npos);
  std::string future = good;
  future[8] = 2;  // major version
  EXPECT_NE(refused(future).find("package format 2." + std::to_string(aot_detail::kFormatMinor)),
            std::string::npos);
  std::string many = good;
  many[16] = 100;  // section count
  EXPECT_NE(refused(many).find("100 sections"), std::string::npos);
  // Every single-byte truncation of the header and table is an error, never a crash.
  for (size_t n = 0; n < 400 && n < good.size(); n += 7) refused(good.substr(0, n));
  // The file's digest.
  EXPECT_NE(error_of<aot::PackageError>([&] {
              aot::load(seed_package(), {.expected_sha256 = std::string(64, '0')});
            }).find("expected 0000"),
            std::string::npos);
  const aot::PackageInfo info = aot::inspect(seed_package());
  EXPECT_EQ(aot::load(seed_package(), {.expected_sha256 = info.sha256}).info().sha256, info.sha256);
}

TEST(Aot, HostileModelsAreRefusedWhereTheyPointOutside) {
  namespace ad = tessera::aot_detail;
  const ad::Container c = ad::read_container(slurp(seed_package()), "seed");
  const ad::Model good = ad::decode(c, "seed");
  const std::string path = temp_path("hostile.tspkg");
  auto write = [&](const ad::Model& m) {
    std::vector<std::pair<ad::SectionId, std::string>> s = {
        {ad::SectionId::Manifest, ad::encode_manifest(m)},
        {ad::SectionId::Schedule, ad::encode_schedule(m)},
        {ad::SectionId::CpuObject, std::string(c.section(ad::SectionId::CpuObject))}};
    spit(path, ad::write_container(s));
    return error_of<aot::PackageError>([&] { aot::load(path); });
  };
  {
    ad::Model m = good;  // the round trip itself loads and runs
    spit(path, ad::write_container(
                   {{ad::SectionId::Manifest, ad::encode_manifest(m)},
                    {ad::SectionId::Schedule, ad::encode_schedule(m)},
                    {ad::SectionId::CpuObject, std::string(c.section(ad::SectionId::CpuObject))}}));
    Tensor x = randn({100}), y = randn({100});
    EXPECT_TRUE(equal(aot::load(path)(x, y)[0].to_tensor(), x + y));
  }
  ad::Model m = good;
  m.nodes[1].params[0].value = 1000;
  EXPECT_NE(write(m).find("value id"), std::string::npos);
  m = good;
  m.nodes[1].params[2].value = static_cast<int32_t>(m.num_values++);  // a value nobody defines
  EXPECT_NE(write(m).find("before it is defined"), std::string::npos);
  m = good;
  m.nodes[0].schema_hash = "0123456789abcdef";
  EXPECT_NE(write(m).find("another schema"), std::string::npos);
  m = good;
  m.nodes[0].op = "nosuch::op";
  EXPECT_NE(write(m).find("does not define"), std::string::npos);
  m = good;
  m.nodes[1].variants[0].symbol = "tessera_kernel_99";
  EXPECT_NE(write(m).find("no entry point"), std::string::npos);
  m = good;
  m.nodes[1].variants[0].symbol = "system";
  EXPECT_NE(write(m).find("entry point 'system'"), std::string::npos);
  m = good;
  ASSERT_FALSE(m.prog_op.empty());
  m.prog_a.back() = static_cast<int32_t>(m.prog_a.size() + 5);
  m.prog_op.back() = 2;  // Add
  EXPECT_NE(write(m).find("not an earlier one"), std::string::npos);
  m = good;
  m.cpu_features.push_back("avx9000");
  EXPECT_NE(write(m).find("lacks avx9000"), std::string::npos);
  m = good;
  m.abi = ad::kRuntimeAbi + 1;
  EXPECT_NE(write(m).find("runtime ABI"), std::string::npos);
  m = good;
  m.symbols[0].min = 1;
  EXPECT_NE(write(m).find("has the range [1,"), std::string::npos);
}

// The memory plan ships in the package (format 1.2): matmul results and a fused kernel's output
// are planned allocations in one arena per call, at every size in the range; offsets read from
// the file are checked against the arena at run time.
TEST(Aot, TheMemoryPlanShipsAndItsOffsetsAreCheckedAtRunTime) {
  namespace ad = tessera::aot_detail;
  const Tensor w = randn({32, 32}) * 0.2;
  auto fn = [&](const Tensor& x) {
    const Tensor h = (matmul(x, w) + 1.0).tanh();
    return matmul(h * h, w).sum(1);
  };
  aot::ExportOptions o;
  o.name = "planned";
  o.dynamic_shapes = {{0, 0, aot::Dim("rows", 2, 1 << 12)}};
  const std::string path = temp_path("planned.tspkg");
  aot::compile(path, fn, o, randn({8, 32}));
  aot::Package p = aot::load(path);
  const auto& nodes = p.info().nodes;
  const auto planned = std::count_if(nodes.begin(), nodes.end(), [](const std::string& n) {
    return n.find("in the memory plan's arena") != std::string::npos;
  });
  EXPECT_GE(planned, 2) << ::testing::PrintToString(
      nodes);  // the fused kernel stores in place of the first matmul's result
  EXPECT_EQ(p.info().format_minor, 2u);
  for (int64_t rows : {2, 37, 1000}) {
    const Tensor x = randn({rows, 32});
    EXPECT_TRUE(tessera::testing::all_close(p(x)[0].to_tensor(), fn(x), 1e-4, 1e-5)) << rows;
  }
  // Hostile offsets: past the arena, or not aligned, fail the call naming the allocation.
  const ad::Container c = ad::read_container(slurp(path), "planned");
  const ad::Model good = ad::decode(c, "planned");
  ASSERT_TRUE(good.has_arena);
  size_t k = 0;
  while (k < good.nodes.size() && !good.nodes[k].planned) ++k;
  ASSERT_LT(k, good.nodes.size());
  const std::string bad_path = temp_path("planned-bad.tspkg");
  auto run_with = [&](const ad::Model& m) {
    spit(bad_path,
         ad::write_container(
             {{ad::SectionId::Manifest, ad::encode_manifest(m)},
              {ad::SectionId::Schedule, ad::encode_schedule(m)},
              {ad::SectionId::CpuObject, std::string(c.section(ad::SectionId::CpuObject))},
              {ad::SectionId::Constants, std::string(c.section(ad::SectionId::Constants))}}));
    return error_of<aot::PackageError>([&] { aot::load(bad_path)(randn({16, 32})); });
  };
  ad::Model m = good;
  m.nodes[k].arena_offset = ad::SymRef{int64_t{1} << 40, -1};
  EXPECT_NE(run_with(m).find("lies outside its arena"), std::string::npos);
  m = good;
  m.nodes[k].arena_offset = ad::SymRef{8, -1};
  EXPECT_NE(run_with(m).find("lies outside its arena"), std::string::npos);
  m = good;
  m.nodes[k].arena_offset = ad::SymRef{-64, -1};
  EXPECT_NE(run_with(m).find("lies outside its arena"), std::string::npos);
  m = good;
  size_t other = 0;  // a node that is not an allocation, marked planned
  while (other < good.nodes.size() &&
         (good.nodes[other].kind != ad::Node::Op || good.nodes[other].op == "aten::empty"))
    ++other;
  ASSERT_LT(other, good.nodes.size());
  m.nodes[other].planned = true;
  EXPECT_NE(run_with(m).find("a planned allocation that is not aten::empty"), std::string::npos);
  m = good;
  m.has_arena = false;
  EXPECT_NE(run_with(m).find("a planned allocation without an arena"), std::string::npos);
}

// Which architecture's cubins a device runs: its major version, the highest minor not above its
// own; an arch-specific target ("a") only on exactly its own.
TEST(Aot, ACudaDeviceTakesTheCubinsOfItsMajorWithTheHighestMinorNotAboveItsOwn) {
  namespace ad = tessera::aot_detail;
  const std::vector<std::string> archs = {"sm_80", "sm_86", "sm_90"};
  EXPECT_EQ(ad::pick_arch(archs, 8, 0), 0);
  EXPECT_EQ(ad::pick_arch(archs, 8, 9), 1);
  EXPECT_EQ(ad::pick_arch(archs, 9, 0), 2);
  EXPECT_EQ(ad::pick_arch(archs, 10, 0), -1);
  EXPECT_EQ(ad::pick_arch(archs, 7, 5), -1);
  EXPECT_EQ(ad::pick_arch({"sm_90a"}, 9, 0), 0);
  EXPECT_EQ(ad::pick_arch({"sm_90a"}, 9, 1), -1);
  EXPECT_EQ(ad::pick_arch({"sm_90", "sm_90a"}, 9, 0), 1);
  EXPECT_EQ(ad::pick_arch({"sm_90a", "sm_90"}, 9, 0), 0);
  EXPECT_EQ(ad::pick_arch({"sm_9x", "sm_100"}, 9, 0), -1);
  // No cubin for the device: the newest PTX not above it (the driver compiles it at load).
  EXPECT_EQ(ad::pick_arch({"compute_80", "compute_90"}, 9, 0), 1);
  EXPECT_EQ(ad::pick_arch({"compute_80", "compute_90"}, 8, 9), 0);
  EXPECT_EQ(ad::pick_arch({"compute_80", "compute_90"}, 10, 0), 1);
  EXPECT_EQ(ad::pick_arch({"compute_90"}, 8, 6), -1);
  EXPECT_EQ(ad::pick_arch({"sm_80", "compute_80"}, 8, 6), 0);
  EXPECT_EQ(ad::pick_arch({"sm_80", "compute_80"}, 9, 0), 1);
  EXPECT_TRUE(ad::is_ptx_arch("compute_90"));
  EXPECT_FALSE(ad::is_ptx_arch("sm_90"));
  int major = 0, minor = 0;
  bool specific = false;
  EXPECT_TRUE(ad::parse_arch("sm_100a", major, minor, specific));
  EXPECT_EQ(major * 10 + minor, 100);
  EXPECT_TRUE(specific);
  for (const char* bad : {"sm_", "sm_9", "sm_1000", "sm_90b", "SM_90", "sm_-9", "sm_05",
                          "compute_9", "compute_90a", "ptx_90"})
    EXPECT_FALSE(ad::parse_arch(bad, major, minor, specific)) << bad;
  EXPECT_EQ(ad::entry_index("tessera_kernel_0"), 0);
  EXPECT_EQ(ad::entry_index("tessera_kernel_17"), 17);
  for (const char* bad : {"tessera_kernel_", "tessera_kernel_01", "tessera_kernel_1x",
                          "tessera_kernel_9999999999", "system"})
    EXPECT_EQ(ad::entry_index(bad), -1) << bad;
}

// A CUDA package's section (cubins per architecture) read and checked on any machine; loading
// needs its GPU: without one the error says so, with one a damaged cubin is refused by name.
TEST(Aot, ACudaPackageIsCheckedAndInspectedAnywhereAndLoadsOnlyOnItsGpu) {
  namespace ad = tessera::aot_detail;
  const ad::Container c = ad::read_container(slurp(seed_package()), "seed");
  const ad::Model good = ad::decode(c, "seed");
  ad::CudaCode code;
  code.modules.resize(2);  // the seed's kernel: its specialization and the generic variant
  code.modules[1].shared_bytes = 1024;
  code.archs = {{"sm_80", {"cubin 0 for sm_80", "cubin 1 for sm_80"}},
                {"sm_90", {"cubin 0 for sm_90", "cubin 1 for sm_90"}}};
  const std::string path = temp_path("cuda.tspkg");
  auto write = [&](const ad::Model& m, const ad::CudaCode& cc, bool with_cpu = false) {
    std::vector<std::pair<ad::SectionId, std::string>> s = {
        {ad::SectionId::Manifest, ad::encode_manifest(m)},
        {ad::SectionId::Schedule, ad::encode_schedule(m)},
        {ad::SectionId::CudaObjects, ad::encode_cuda(cc)}};
    if (with_cpu)
      s.emplace_back(ad::SectionId::CpuObject, std::string(c.section(ad::SectionId::CpuObject)));
    spit(path, ad::write_container(s));
  };
  write(good, code);
  const aot::PackageInfo info = aot::inspect(path);
  EXPECT_EQ(info.device, "cuda");
  EXPECT_EQ(info.cuda_archs, (std::vector<std::string>{"sm_80", "sm_90"}));
  EXPECT_EQ(info.format_major, 1u);
  EXPECT_EQ(info.format_minor, ad::kFormatMinor);
  bool listed = false;
  for (const auto& [name, bytes] : info.sections) listed |= name == "cuda-objects";
  EXPECT_TRUE(listed);
  const ad::Model back = ad::decode(ad::read_container(slurp(path), "cuda"), "cuda");
  ASSERT_TRUE(back.cuda);
  EXPECT_EQ(back.cuda_code.modules[1].shared_bytes, 1024u);
  EXPECT_EQ(back.cuda_code.archs[1].cubins[1], "cubin 1 for sm_90");
  EXPECT_EQ(ad::encode_cuda(back.cuda_code), ad::encode_cuda(code));
  if (cuda_is_available()) {
    // Not a cubin: the driver refuses it, and the error names the package's module.
    const std::string e = error_of<RuntimeError>([&] { aot::load(path); });
    EXPECT_NE(e.find("module 0"), std::string::npos) << e;
  } else {
    const std::string e = error_of<aot::PackageError>([&] { aot::load(path); });
    EXPECT_NE(e.find("runs on a CUDA GPU (sm_80, sm_90) and this machine has none"),
              std::string::npos)
        << e;
  }
  // The section's own checks.
  auto refused = [&](const ad::Model& m, const ad::CudaCode& cc, bool with_cpu = false) {
    write(m, cc, with_cpu);
    return error_of<aot::PackageError>([&] { aot::inspect(path); });
  };
  EXPECT_NE(refused(good, code, true).find("both CPU and CUDA code"), std::string::npos);
  ad::CudaCode bad = code;
  bad.archs[1].name = "sm_80";
  EXPECT_NE(refused(good, bad).find("sm_80 appears twice"), std::string::npos);
  bad = code;
  bad.archs[0].name = "compute_8";
  EXPECT_NE(refused(good, bad).find("an architecture 'compute_8'"), std::string::npos);
  bad = code;
  bad.archs[0].name = "compute_80";  // PTX: the driver reads it up to a NUL, which must be there
  EXPECT_NE(refused(good, bad).find("PTX for compute_80 without its terminating NUL"),
            std::string::npos);
  for (auto& cubin : bad.archs[0].cubins) cubin.push_back('\0');
  write(good, bad);
  EXPECT_EQ(aot::inspect(path).cuda_archs, (std::vector<std::string>{"compute_80", "sm_90"}));
  bad = code;
  bad.archs.clear();
  EXPECT_NE(refused(good, bad).find("no architecture"), std::string::npos);
  bad = code;
  bad.modules[0].threads = 4096;
  EXPECT_NE(refused(good, bad).find("4096 threads"), std::string::npos);
  bad = code;
  bad.archs[0].cubins[1].clear();
  EXPECT_NE(refused(good, bad).find("an empty cubin for sm_80"), std::string::npos);
  bad = code;
  bad.modules.pop_back();
  for (auto& a : bad.archs) a.cubins.pop_back();
  EXPECT_NE(refused(good, bad).find("tessera_kernel_1 of kernel aot_add_kernel has no CUDA module"),
            std::string::npos);
  // A cubin's length past the section's end.
  std::string sec = ad::encode_cuda(code);
  sec.resize(sec.size() - 3);
  spit(path, ad::write_container({{ad::SectionId::Manifest, ad::encode_manifest(good)},
                                  {ad::SectionId::Schedule, ad::encode_schedule(good)},
                                  {ad::SectionId::CudaObjects, sec}}));
  EXPECT_NE(error_of<aot::PackageError>([&] { aot::inspect(path); }).find("runs past the end"),
            std::string::npos);
  // A section this version does not know is refused, not ignored.
  spit(path, ad::write_container({{ad::SectionId::Manifest, ad::encode_manifest(good)},
                                  {ad::SectionId::Schedule, ad::encode_schedule(good)},
                                  {static_cast<ad::SectionId>(9), "future"}}));
  EXPECT_NE(error_of<aot::PackageError>([&] { aot::inspect(path); })
                .find("section 9 is unknown to this tessera (format 1." +
                      std::to_string(ad::kFormatMinor) + ")"),
            std::string::npos);
}

namespace {
std::string output(const std::string& cmd, int* rc) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  char buf[512];
  while (p && std::fgets(buf, sizeof buf, p)) out += buf;
  const int status = p ? ::pclose(p) : -1;
  *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}
}  // namespace

// The loader alone: `tessera-aot` links libtessera_runtime and nothing that generates code, and
// runs a package where no compiler is reachable.
TEST(Aot, TheLoaderLinksNoCodeGeneratorAndNeedsNoCompiler) {
  int rc = 0;
  const std::string loader = TESSERA_AOT_LOADER;
  std::string needed = output("readelf -d " + loader + " | grep NEEDED", &rc);
  ASSERT_EQ(rc, 0) << needed;
  EXPECT_NE(needed.find("libtessera_runtime.so"), std::string::npos) << needed;
  EXPECT_EQ(needed.find("libtessera.so"), std::string::npos) << needed;
  EXPECT_EQ(needed.find("nvrtc"), std::string::npos) << needed;
  needed = output(std::string("readelf -d ") + TESSERA_RUNTIME_LIB + " | grep NEEDED", &rc);
  EXPECT_EQ(needed.find("libtessera.so"), std::string::npos) << needed;
  EXPECT_EQ(needed.find("nvrtc"), std::string::npos) << needed;
  // No symbol of the code generators or the JIT in the runtime library.
  const std::string syms = output(std::string("nm -DC --defined-only ") + TESSERA_RUNTIME_LIB +
                                      " | grep -cE "
                                      "'tessera::(tl|ir|backend|compile_detail)::' || true",
                                  &rc);
  EXPECT_EQ(std::stoi(syms), 0) << syms;
  const std::string out = output("env PATH=/nonexistent TESSERA_CXX=/nonexistent/c++ " + loader +
                                     " run " + seed_package() + " --size n=777 --repeat 2",
                                 &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("result 0: float32[777], sum"), std::string::npos) << out;
}

// The command line: inspect, verify and a run in a process with no compiler reachable.
TEST(Aot, CommandLineInspectsVerifiesAndRunsWithNoCompiler) {
  const std::string cli = TESSERA_CLI;
  int rc = 0;
  std::string out = output(cli + " aot inspect " + seed_package(), &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("kernel aot_add_kernel (2 variants)"), std::string::npos) << out;
  EXPECT_NE(out.find("n in [16, 1048576]"), std::string::npos) << out;
  out = output("env PATH=/nonexistent TESSERA_CXX=/nonexistent/c++ " + cli + " aot run " +
                   seed_package() + " --size n=1000 --repeat 3",
               &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("result 0: float32[1000], sum"), std::string::npos) << out;
  out = output(cli + " aot verify " + seed_package() + " --sha256 " + std::string(64, 'a'), &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("expected aaaa"), std::string::npos) << out;
}
