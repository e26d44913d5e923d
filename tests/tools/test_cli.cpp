// The `tessera` command line, run as a user runs it: the kernel cache commands against a cache
// this test fills, doctor's report, version, and the errors for unknown commands.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "runtime/cuda/nvrtc.h"
#include "tessera/env.h"
#include "tessera/tl.h"
#include "testing.h"

using namespace tessera;
namespace tl = tessera::tl;

namespace {

TL_JIT(cli_cached_kernel, tl::Ptr x, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  tl::store(out + offs, tl::load(x + offs, offs < n) * 3.0f, offs < n);
}

struct CliRun {
  int status = -1;
  std::string out;
};

/** Runs the CLI with arguments (stdout and stderr together) in this test's cache directory. */
CliRun cli(const std::string& args) {
  CliRun r;
  const std::string cmd = std::string(TESSERA_CLI) + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t k;
  while ((k = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, k);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = knobs().cache_dir;
    dir_ = ::testing::TempDir() + "tessera-cli-" + std::to_string(::getpid());
    ::setenv("TESSERA_CACHE_DIR", dir_.c_str(), 1);
    reload_knobs();
  }
  void TearDown() override {
    ::setenv("TESSERA_CACHE_DIR", saved_.c_str(), 1);
    reload_knobs();
  }
  std::string saved_, dir_;
};

TEST_F(Cli, CacheStatsLsAndClearSeeTheKernelsThisProcessCompiled) {
  EXPECT_EQ(cli("cache clear").status, 0);
  CliRun stats = cli("cache stats");
  EXPECT_EQ(stats.status, 0);
  EXPECT_NE(stats.out.find("kernels: 0"), std::string::npos) << stats.out;
  EXPECT_NE(stats.out.find("cache: " + dir_), std::string::npos) << stats.out;

  cli_cached_kernel.clear_memory_cache();
  Tensor x = arange(0, 50, 1, float32), out = zeros({50});
  cli_cached_kernel[{4}](x, out, 50, tl::meta("BLOCK", 16));
  cli_cached_kernel[{2}](x, out, 50, tl::meta("BLOCK", 32));  // a second specialization
  ASSERT_TRUE(equal(out, x * 3));

  stats = cli("cache stats");
  EXPECT_NE(stats.out.find("kernels: 2"), std::string::npos) << stats.out;
  EXPECT_EQ(stats.out.find("bytes: 0\n"), std::string::npos) << stats.out;
  const CliRun ls = cli("cache ls");
  EXPECT_EQ(ls.status, 0);
  size_t lines = 0;
  for (size_t p = ls.out.find("cli_cached_kernel"); p != std::string::npos;
       p = ls.out.find("cli_cached_kernel", p + 1))
    ++lines;
  EXPECT_EQ(lines, 2u) << ls.out;
  const CliRun clear = cli("cache clear");
  EXPECT_EQ(clear.status, 0);
  EXPECT_NE(clear.out.find("removed 2 kernels from " + dir_), std::string::npos) << clear.out;
  EXPECT_NE(cli("cache stats").out.find("kernels: 0"), std::string::npos);
  // The cleared kernels are rebuilt by the next process that needs them; this one still has them.
  cli_cached_kernel[{4}](x, out, 50, tl::meta("BLOCK", 16));
  EXPECT_TRUE(equal(out, x * 3));
}

TEST_F(Cli, CacheLsShowsCudaKernelsWithTheirRegistersAndSpills) {
  if (!runtime::cuda::nvrtc()) GTEST_SKIP() << "no NVRTC on this machine";
  EXPECT_EQ(cli("cache clear").status, 0);
  // TESSERA_CROSSCHECK=nvrtc compiles the kernel's CUDA too (no GPU needed).
  ::setenv("TESSERA_CROSSCHECK", "nvrtc", 1);
  reload_knobs();
  cli_cached_kernel.clear_memory_cache();
  Tensor x = arange(0, 50, 1, float32), out = zeros({50});
  cli_cached_kernel[{4}](x, out, 50, tl::meta("BLOCK", 16));
  ::unsetenv("TESSERA_CROSSCHECK");
  reload_knobs();
  EXPECT_TRUE(equal(out, x * 3));
  const CliRun stats = cli("cache stats");
  EXPECT_NE(stats.out.find(", cuda 1)"), std::string::npos) << stats.out;
  const CliRun ls = cli("cache ls");
  const size_t at = ls.out.find("sm_90   cli_cached_kernel  (");
  ASSERT_NE(at, std::string::npos) << ls.out;
  const std::string line = ls.out.substr(at, ls.out.find('\n', at) - at);
  // ptxas's figures: a small elementwise kernel uses a handful of registers and never spills.
  EXPECT_NE(line.find(" regs, 0 B shared, spills 0/0 B)"), std::string::npos) << line;
  EXPECT_EQ(line.find("(? regs"), std::string::npos) << line;
  EXPECT_EQ(line.find("(-1 regs"), std::string::npos) << line;
  EXPECT_EQ(cli("cache clear").status, 0);
  EXPECT_NE(cli("cache stats").out.find("kernels: 0 (cpu 0, cuda 0)"), std::string::npos);
}

TEST(PtxasLog, RegistersStackAndSpillsAreRead) {
  const std::string log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'tessera_kernel' for 'sm_90'\n"
      "ptxas info    : Function properties for tessera_kernel\n"
      "ptxas         .     24 bytes stack frame, 16 bytes spill stores, 8 bytes spill loads\n"
      "ptxas info    : Used 255 registers, used 1 barriers, 256 bytes smem\n";
  const runtime::cuda::PtxasReport r = runtime::cuda::parse_ptxas_log(log);
  EXPECT_EQ(r.registers, 255);
  EXPECT_EQ(r.stack_bytes, 24);
  EXPECT_EQ(r.spill_stores, 16);
  EXPECT_EQ(r.spill_loads, 8);
  EXPECT_EQ(runtime::cuda::parse_ptxas_log("").registers, -1);
}

TEST_F(Cli, DoctorReportsTheMachine) {
  const CliRun d = cli("doctor");
  EXPECT_EQ(d.status, 0) << d.out;
  for (const char* line : {"tessera ", "cpu:", "cpu features:", "c++ compiler (kernel JIT):",
                           "matmul:", "cuda driver:", "nvrtc:", "cache dir:"}) {
    EXPECT_NE(d.out.find(line), std::string::npos) << line << "\n" << d.out;
  }
  EXPECT_NE(d.out.find("cache dir:  " + dir_), std::string::npos) << d.out;
}

TEST_F(Cli, VersionHelpAndUnknownCommands) {
  const CliRun v = cli("version");
  EXPECT_EQ(v.status, 0);
  EXPECT_EQ(v.out.rfind("tessera ", 0), 0u) << v.out;
  const CliRun help = cli("--help");
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("cache ls|stats|clear"), std::string::npos) << help.out;
  const CliRun none = cli("");
  EXPECT_EQ(none.status, 1);
  const CliRun bad = cli("cache frobnicate");
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.out.find("unknown subcommand 'frobnicate'"), std::string::npos) << bad.out;
  const CliRun unknown = cli("frobnicate");
  EXPECT_NE(unknown.status, 0);
  EXPECT_NE(unknown.out.find("frobnicate"), std::string::npos) << unknown.out;
}

}  // namespace
