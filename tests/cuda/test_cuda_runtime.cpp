// The CUDA runtime without an emitter (issue 14, first part): the driver and NVRTC loaded with
// dlopen, contexts, streams and events, the caching allocator, CUDA tensors, their factories and
// copies. Runs everywhere: with no GPU the GPU cases skip themselves (saying so) and the machine's
// own behaviour is checked instead (clear errors); NVRTC cases need only the toolkit (label nvrtc).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "runtime/cuda/context.h"
#include "runtime/cuda/graph.h"
#include "runtime/cuda/memory.h"
#include "runtime/cuda/module.h"
#include "runtime/cuda/nvrtc.h"
#include "tessera/tessera.h"
#include "tessera/tl.h"
#include "testing.h"

using namespace tessera;
using namespace tessera::testing;
namespace cuda = tessera::runtime::cuda;

namespace {

#define REQUIRE_GPU()                                     \
  if (!cuda_is_available())                               \
  GTEST_SKIP() << "no CUDA GPU on this machine (doctor: " \
               << (cuda::driver() ? "driver, no device" : "no driver") << ")"
#define REQUIRE_NVRTC() \
  if (!cuda::nvrtc()) GTEST_SKIP() << "no NVRTC on this machine (install the CUDA toolkit)"

const char* kAddOne = R"(
extern "C" __global__ void add_one(float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}
)";

// ---- without a GPU -----------------------------------------------------------------------------

TEST(CudaRuntime, AMachineWithoutAGpuSaysSo) {
  if (cuda_is_available()) GTEST_SKIP() << "this machine has a GPU";
  EXPECT_EQ(cuda::device_count(), 0);
  const std::string msg = error_of<DeviceError>([] { zeros({4}, TensorOptions().device("cuda")); });
  EXPECT_NE(msg.find("cuda:0 is not available"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cuda_is_available() is false"), std::string::npos) << msg;
  EXPECT_NE(error_of<DeviceError>([] { (void)cuda::device_info(0); }).find("cuda:0 does not exist"),
            std::string::npos);
  // Shapes on a CUDA device still work without memory: meta-like fake tensors carry the device.
  Tensor f = detail::make_fake(SymDimVector{SymInt(3)}, float32, Device("cuda"));
  EXPECT_EQ(f.device(), Device("cuda:0"));
}

// ---- NVRTC (no GPU needed)
// -----------------------------------------------------------------------

TEST(Nvrtc, CompilesToACubinForHopperWithoutAGpu) {
  REQUIRE_NVRTC();
  const auto* info = cuda::nvrtc();
  EXPECT_GE(info->major, 12);
  const cuda::CompiledCubin c = cuda::compile_cubin(kAddOne, "add_one", 90);
  ASSERT_GE(c.cubin.size(), 4u);
  EXPECT_EQ(c.cubin.compare(0, 4,
                            "\x7f"
                            "ELF"),
            0)
      << "a cubin is an ELF file";
  EXPECT_GT(c.ms, 0);
}

// The prefetch reads what a load opens: the library dlopen resolved (same file, through links)
// and its builtins beside it; asking twice starts nothing new and neither call loads anything.
TEST(Nvrtc, ThePrefetchNamesTheLibraryALoadOpensAndItsBuiltins) {
  REQUIRE_NVRTC();
  const std::vector<std::string> files = cuda::nvrtc_files();
  ASSERT_FALSE(files.empty()) << "NVRTC loaded from " << cuda::nvrtc()->path;
  char* real = ::realpath(cuda::nvrtc()->path.c_str(), nullptr);
  ASSERT_NE(real, nullptr) << cuda::nvrtc()->path;
  EXPECT_EQ(files[0], std::string(real));
  std::free(real);
  bool builtins = false;
  for (size_t i = 1; i < files.size(); ++i) {
    EXPECT_EQ(files[i].rfind(files[0].substr(0, files[0].rfind('/') + 1), 0), 0u) << files[i];
    builtins = builtins || files[i].find("/libnvrtc-builtins") != std::string::npos;
  }
  EXPECT_TRUE(builtins) << "no libnvrtc-builtins beside " << files[0];
  cuda::prefetch_nvrtc();
  cuda::prefetch_nvrtc();
  EXPECT_EQ(cuda::nvrtc_files(), files);
}

TEST(Nvrtc, OurHeadersAreTheOnlyIncludes) {
  REQUIRE_NVRTC();
  const std::string src =
      "#include \"mine.h\"\nextern \"C\" __global__ void k(float* x) { x[0] = "
      "kValue; }\n";
  const auto c = cuda::compile_cubin(src, "k", 90, {{"mine.h", "constexpr float kValue = 2;\n"}});
  EXPECT_FALSE(c.cubin.empty());
  // The system's CUDA headers are not on the path.
  const std::string msg = error_of<CompileError>([] {
    cuda::compile_cubin("#include <cuda_fp16.h>\nextern \"C\" __global__ void k() {}\n", "k", 90);
  });
  EXPECT_NE(msg.find("[kernel k] NVRTC could not compile"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cuda_fp16.h"), std::string::npos) << msg;
}

TEST(Nvrtc, ACompileErrorNamesTheKernelAndKeepsTheLog) {
  REQUIRE_NVRTC();
  const std::string msg = error_of<CompileError>([] {
    cuda::compile_cubin("extern \"C\" __global__ void broken(float* x) { x[0] = undefined_name; }",
                        "broken", 90);
  });
  EXPECT_NE(msg.find("[kernel broken]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("undefined_name"), std::string::npos) << msg;
  EXPECT_NE(msg.find("-arch=sm_90"), std::string::npos) << msg;
}

TEST(Nvrtc, CompilesInParallel) {
  REQUIRE_NVRTC();
  std::vector<std::thread> ts;
  std::vector<size_t> sizes(4, 0);
  for (int i = 0; i < 4; ++i) {
    ts.emplace_back([&, i] {
      sizes[static_cast<size_t>(i)] = cuda::compile_cubin(kAddOne, "add_one", 90).cubin.size();
    });
  }
  for (auto& t : ts) t.join();
  for (size_t s : sizes) EXPECT_GT(s, 0u);
}

// ---- on a GPU
// ------------------------------------------------------------------------------------

TEST(CudaRuntime, DevicesAndDriver) {
  REQUIRE_GPU();
  ASSERT_GE(cuda::device_count(), 1);
  const auto& info = cuda::device_info(0);
  EXPECT_FALSE(info.name.empty());
  EXPECT_GE(info.major, 7);
  EXPECT_GT(info.multiprocessors, 0);
  EXPECT_GT(info.total_memory, size_t(1) << 30);
  EXPECT_GE(cuda::driver()->version, 12000);
}

TEST(CudaRuntime, ACubinFromNvrtcLoadsAndRuns) {
  REQUIRE_GPU();
  REQUIRE_NVRTC();
  const auto& info = cuda::device_info(0);
  const auto c = cuda::compile_cubin(kAddOne, "add_one", info.major * 10 + info.minor);
  cuda::Module m(c.cubin, 0, "add_one");
  cuda::CUfunction f = m.function("add_one");
  EXPECT_GT(m.resources(f).registers, 0);
  Tensor host = random_tensor({1000}, float32);
  Tensor x = host.to(Device("cuda"));
  void* p = x.data_ptr();
  int n = 1000;
  void* args[] = {&p, &n};
  const unsigned grid[3] = {4, 1, 1}, block[3] = {256, 1, 1};
  cuda::launch(f, 0, grid, block, 0, args, "add_one");
  EXPECT_TRUE(equal(x.cpu(), host + 1));
  EXPECT_NE(error_of<RuntimeError>([&] { (void)m.function("nope"); }).find("kernel 'nope'"),
            std::string::npos);
}

TEST(CudaRuntime, StreamsEventsAndTheCurrentStream) {
  REQUIRE_GPU();
  cuda::Stream s = cuda::Stream::create(0);
  EXPECT_EQ(cuda::current_stream(0).handle(), nullptr);  // the legacy default stream
  {
    cuda::StreamGuard g(s);
    EXPECT_EQ(cuda::current_stream(0), s);
    cuda::Event a(0), b(0);
    a.record(s);
    Tensor big = zeros({1 << 24}, TensorOptions().device("cuda"));  // queued on s
    b.record(s);
    b.synchronize();
    EXPECT_TRUE(b.query());
    EXPECT_GE(cuda::Event::elapsed_ms(a, b), 0.0f);
    EXPECT_EQ(big.cpu().sum().item<double>(), 0.0);
  }
  EXPECT_EQ(cuda::current_stream(0).handle(), nullptr);
  s.synchronize();
  EXPECT_TRUE(s.query());
}

TEST(CudaRuntime, TheAllocatorReusesBlocksPerStreamAndCountsThem) {
  REQUIRE_GPU();
  cuda::empty_cache();
  cuda::reset_peak_stats(0);
  const auto before = cuda::memory_stats(0);
  void* a = cuda::allocate(1000, 0);
  cuda::release(a, 0);
  void* b = cuda::allocate(900, 0);  // the same 1024-byte class: the cached block
  EXPECT_EQ(a, b);
  const auto mid = cuda::memory_stats(0);
  EXPECT_EQ(mid.cache_hits - before.cache_hits, 1);
  EXPECT_EQ(mid.allocated_bytes - before.allocated_bytes, 1024u);
  // Another stream does not get a block freed on the default stream.
  cuda::Stream s = cuda::Stream::create(0);
  cuda::release(b, 0);
  {
    cuda::StreamGuard g(s);
    void* c = cuda::allocate(900, 0);
    EXPECT_NE(c, b);
    cuda::release(c, 0);
  }
  // record_stream: a block used on s is not reused before s's work.
  void* d = cuda::allocate(4 << 20, 0);
  cuda::record_stream(d, s);
  cuda::release(d, 0);
  cuda::empty_cache();
  const auto after = cuda::memory_stats(0);
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_GE(after.device_frees, 2);
  EXPECT_GE(after.peak_allocated_bytes, size_t(4) << 20);
  // Tensors use it: a freed tensor's block serves the next tensor of its size.
  cuda::reset_peak_stats(0);
  { Tensor t = empty({1 << 20}, TensorOptions().device("cuda")); }
  { Tensor t = empty({1 << 20}, TensorOptions().device("cuda")); }
  EXPECT_EQ(cuda::memory_stats(0).cache_hits, 1);
}

// A copy from host memory inside a capture would be replayed from the same host address long
// after the buffer is gone: the capture fails with the reason instead, and leaves no capture open.
TEST(CudaRuntime, ACopyFromTheHostInsideAGraphCaptureFailsTheCapture) {
  REQUIRE_GPU();
  cuda::Stream s = cuda::Stream::create(0);
  cuda::StreamGuard g(s);
  Tensor dst = empty({4}, TensorOptions().device("cuda"));
  const float host[4] = {1, 2, 3, 4};
  try {
    cuda::Graph::capture(
        s, [&] { cuda::copy_to_device(dst.data_ptr(), host, sizeof host, 0); }, "the test graph");
    ADD_FAILURE() << "captured a copy from the host";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("inside a CUDA graph capture"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(cuda::capturing(s.handle()));
  // The stream works as before: the same copy outside a capture.
  cuda::copy_to_device(dst.data_ptr(), host, sizeof host, 0);
  EXPECT_EQ(dst.cpu().sum().item<double>(), 10.0);
}

TEST(CudaTensors, FactoriesMatchTheCpuBitForBit) {
  REQUIRE_GPU();
  const TensorOptions g = TensorOptions().device("cuda");
  for (DType d : {float32, float64, float16, bfloat16, int8, int32, int64, bool_}) {
    const TensorOptions o = g.dtype(d);
    EXPECT_TRUE(bitwise_equal(zeros({7, 5}, o).cpu(), zeros({7, 5}, TensorOptions().dtype(d))))
        << dtype_name(d);
    EXPECT_TRUE(bitwise_equal(ones({33}, o).cpu(), ones({33}, TensorOptions().dtype(d))))
        << dtype_name(d);
    EXPECT_TRUE(bitwise_equal(full({3, 3}, 3, o).cpu(), full({3, 3}, 3, TensorOptions().dtype(d))))
        << dtype_name(d);
  }
  manual_seed(7);
  Tensor rg = randn({1000}, g), ug = rand({257}, g);
  manual_seed(7);
  Tensor rc = randn({1000}), uc = rand({257});
  EXPECT_TRUE(bitwise_equal(rg.cpu(), rc));
  EXPECT_TRUE(bitwise_equal(ug.cpu(), uc));
  EXPECT_TRUE(equal(arange(0, 10, 1, TensorOptions().device("cuda")).cpu(), arange(0, 10, 1)));
  EXPECT_EQ(rg.device(), Device("cuda:0"));
}

TEST(CudaTensors, RoundTripsOfEveryDtypeLayoutAndOffset) {
  REQUIRE_GPU();
  for (DType d : {float32, float64, float16, bfloat16, int8, int16, int32, int64, uint8, bool_}) {
    for (Layout l : kAllLayouts) {
      Tensor h = random_tensor({6, 10}, d, Domain::Any, l);
      Tensor g = h.to(Device("cuda"));
      EXPECT_TRUE(bitwise_equal(g.cpu(), h.contiguous())) << dtype_name(d) << " " << layout_name(l);
      // A view of a CUDA tensor back to the host (strided, offset).
      Tensor gv = g.narrow(1, 2, 5).transpose(0, 1);
      EXPECT_TRUE(bitwise_equal(gv.cpu(), h.narrow(1, 2, 5).transpose(0, 1).contiguous()))
          << dtype_name(d) << " " << layout_name(l);
    }
  }
}

TEST(CudaTensors, CopiesAcrossDevicesDtypesAndViews) {
  REQUIRE_GPU();
  Tensor h = random_tensor({8, 8}, float32);
  Tensor g = empty({8, 8}, TensorOptions().device("cuda").dtype(float64));
  poison(g);
  g.copy_(h);  // CPU float32 -> CUDA float64
  EXPECT_TRUE(equal(g.cpu(), h.to(float64)));
  Tensor g2 = zeros({8, 8}, TensorOptions().device("cuda"));
  g2.narrow(0, 2, 3).copy_(g.narrow(0, 0, 3));  // into a CUDA view, from a CUDA view, converting
  Tensor want = zeros({8, 8});
  want.narrow(0, 2, 3).copy_(h.narrow(0, 0, 3));
  EXPECT_TRUE(equal(g2.cpu(), want));
  Tensor back = zeros({8, 8});
  back.copy_(g2);  // CUDA -> CPU through copy_
  EXPECT_TRUE(equal(back, want));
  Tensor c = g2.clone();
  EXPECT_EQ(c.device(), Device("cuda:0"));
  EXPECT_TRUE(equal(c.cpu(), want));
  g2.fill_(2.5);
  EXPECT_TRUE(equal(g2.cpu(), full({8, 8}, 2.5)));
  g.t().fill_(-1.0);  // a transposed (non-dense-order) fill of an 8-byte dtype
  EXPECT_TRUE(equal(g.cpu(), full({8, 8}, -1.0, TensorOptions().dtype(float64))));
  EXPECT_EQ(g.narrow(0, 1, 1).narrow(1, 1, 1).item<double>(), -1.0);
  EXPECT_TRUE(allclose(g2, full({8, 8}, 2.5, TensorOptions().device("cuda"))));
}

TEST(CudaTensors, PrintingAndMixedDevices) {
  REQUIRE_GPU();
  Tensor g = arange(0, 3, 1, TensorOptions().device("cuda").dtype(float32));
  std::ostringstream os;
  os << g;
  EXPECT_NE(os.str().find("device='cuda:0'"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("0., 1., 2."), std::string::npos) << os.str();
  const std::string msg = error_of<Error>([&] { (void)(zeros({3}) + g); });
  EXPECT_NE(msg.find("cuda"), std::string::npos) << msg;
}

}  // namespace

namespace {

// ---- faults
// ---------------------------------------------------------------------------------------

// The launch journal (host-only): a fault names the launches not yet known to have finished,
// oldest first; a synchronized stream's launches are forgotten, another stream's are not.
// More than the GPU has: an OutOfMemoryError naming the size and the device's memory, after the
// cached blocks went back to the driver; the tensors alive stay intact and the next allocation
// works.
TEST(CudaRuntime, ATensorTooLargeIsAnOutOfMemoryErrorAfterTheCacheIsFreed) {
  REQUIRE_GPU();
  Tensor alive = full({1 << 20}, 3.0, TensorOptions().device("cuda"));
  { Tensor cached = empty({16 << 20}, TensorOptions().device("cuda")); }  // 64 MiB into the cache
  const size_t reserved = cuda::memory_stats(0).reserved_bytes;
  const std::string msg = error_of<OutOfMemoryError>(
      [] { (void)empty({int64_t{1} << 40}, TensorOptions().device("cuda")); });
  EXPECT_NE(msg.find("CUDA out of memory: tried to allocate 4.00 TiB"), std::string::npos) << msg;
  EXPECT_NE(msg.find("free of"), std::string::npos) << msg;
  EXPECT_LT(cuda::memory_stats(0).reserved_bytes, reserved);  // the 64 MiB block went back
  EXPECT_EQ(alive.sum().item<float>(), 3.0f * (1 << 20));
  Tensor next = ones({1 << 20}, TensorOptions().device("cuda"));
  EXPECT_EQ(next.sum().item<float>(), float(1 << 20));
}

TEST(CudaFaults, TheJournalNamesUnfinishedLaunchesOnly) {
  cuda::journal_finished(0, nullptr, true);
  cuda::journal_finished(1, nullptr, true);
  auto* s1 = reinterpret_cast<cuda::CUstream>(0x10);
  cuda::journal_launch(0, nullptr, "kernel first");
  cuda::journal_launch(0, s1, "kernel on_a_stream");
  cuda::journal_launch(1, nullptr, "kernel other_gpu");
  EXPECT_EQ(cuda::journal_suspects(),
            "kernel first on cuda:0, kernel on_a_stream on cuda:0, kernel other_gpu on cuda:1");
  cuda::journal_finished(0, nullptr, false);  // cuda:0's default stream synchronized
  EXPECT_EQ(cuda::journal_suspects(), "kernel on_a_stream on cuda:0, kernel other_gpu on cuda:1");
  for (int i = 0; i < 100; ++i) cuda::journal_launch(1, nullptr, "kernel k" + std::to_string(i));
  const std::string many = cuda::journal_suspects();
  EXPECT_NE(many.find("(and "), std::string::npos) << many;  // the ring keeps the latest 64
  const std::string err =
      error_of<RuntimeError>([] { cuda::check(700, "cuStreamSynchronize", "x"); });
  EXPECT_NE(err.find("A kernel faulted on the GPU, and the CUDA context is lost"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("Queued and not yet finished: kernel k36 on cuda:1"), std::string::npos)
      << err;
  cuda::journal_finished(0, nullptr, true);
  cuda::journal_finished(1, nullptr, true);
  EXPECT_EQ(cuda::journal_suspects(), "");
  const std::string none = error_of<RuntimeError>([] { cuda::check(719, "cuMemcpy", "y"); });
  EXPECT_NE(none.find("No kernel of tessera's was queued"), std::string::npos) << none;
  // Ordinary errors say nothing of faults.
  const std::string oom = error_of<RuntimeError>([] { cuda::check(2, "cuMemAlloc", "z"); });
  EXPECT_EQ(oom.find("faulted"), std::string::npos) << oom;
}

// A kernel that writes far outside its tensor, on the GPU.
TL_JIT(write_far_away, tl::Ptr out, tl::Const BLOCK) {
  const tl::Tile offs = tl::arange(0, BLOCK).to(DType::Int64) + (int64_t{1} << 40);
  tl::store(out + offs, tl::zeros({BLOCK.int_value()}, DType::Float32));
}

// A GPU fault in a child process (it poisons the context): the error at the next synchronizing
// call names the faulting kernel and says the context is lost.
TEST(CudaFaults, AnIllegalAddressIsAnErrorNamingTheKernel) {
  REQUIRE_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process: no CUDA state inherited
  EXPECT_EXIT(
      {
        Tensor t = zeros({16}, TensorOptions().device(Device("cuda")));
        std::string msg = "no error";
        try {
          write_far_away[{1}](t, tl::meta("BLOCK", 128));
          (void)t.cpu();
        } catch (const RuntimeError& e) {
          msg = e.what();
        }
        std::fprintf(stderr, "%s\n", msg.c_str());
        std::_Exit(msg.find("CUDA_ERROR_ILLEGAL_ADDRESS") != std::string::npos &&
                           msg.find("kernel write_far_away on cuda:0") != std::string::npos
                       ? 0
                       : 1);
      },
      ::testing::ExitedWithCode(0), "context is lost");
}

}  // namespace

namespace {

// DLPack on the GPU: the same device memory both ways, and a consumer's stream ordered after
// the work queued on ours (an event, no host wait).
TEST(CudaTensors, DlpackSharesDeviceMemoryAndOrdersStreams) {
  REQUIRE_GPU();
  const Tensor host = random_tensor({64, 33}, DType::Float32);
  Tensor g = host.to(Device("cuda"));
  const cuda::Stream consumer = cuda::Stream::create(0);
  DLManagedTensorVersioned* m = to_dlpack_versioned(g.t(), {.consumer_stream = consumer.handle()});
  EXPECT_EQ(m->dl_tensor.device.device_type, kDLCUDA);
  EXPECT_EQ(m->dl_tensor.device.device_id, 0);
  EXPECT_EQ(m->dl_tensor.data, g.impl()->data());
  Tensor back = from_dlpack(m);
  EXPECT_TRUE(back.device().is_cuda());
  EXPECT_EQ(back.impl()->data(), g.impl()->data());
  back.fill_(2.5);  // visible through the original
  EXPECT_TRUE(all_close(g.cpu(), full({64, 33}, 2.5f)));
  consumer.synchronize();
}

}  // namespace
