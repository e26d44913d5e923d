// The `tessera` command line, run as a user runs it: the kernel cache commands against a cache
// this test fills, doctor's report, version, and the errors for unknown commands.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

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
