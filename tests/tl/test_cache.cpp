// The kernel caches: in memory (a hot launch does no IR work) and on disk (content-addressed,
// atomic, shared by processes, damaged entries rebuilt), and the generated code's quality.
#include <gtest/gtest.h>

#include <csignal>

#include <random>

#include <sys/wait.h>
#include <unistd.h>
#include <chrono>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backend/cpu/toolchain.h"
#include "ir/text.h"
#include "tessera/cache.h"
#include "tessera/tl.h"
#include "testing.h"

using namespace tessera;
namespace tl = tessera::tl;

namespace {

TL_JIT(cache_kernel, tl::Ptr x, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = offs < n;
  tl::store(out + offs, tl::load(x + offs, m) * 2 + 1, m);
}

// The same kernel with one operation changed (an "edited" kernel).
TL_JIT(cache_kernel_edited, tl::Ptr x, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = offs < n;
  tl::store(out + offs, tl::load(x + offs, m) * 3 + 1, m);
}

bool run_cache_kernel(int64_t block = 64) {
  Tensor x = arange(0, 100, 1, float32), out = zeros({100});
  cache_kernel[{tl::cdiv(100, block)}](x, out, 100, tl::meta("BLOCK", block));
  return equal(out, x * 2 + 1);
}

// Child mode: the test binary re-executed to act as a second process.
[[maybe_unused]] const int kChild = [] {
  if (const char* mode = std::getenv("TS_TEST_CHILD")) {
    const bool ok = std::string(mode) == "compile" && run_cache_kernel();
    std::_Exit(ok ? (cache_kernel.last_from_disk() ? 10 : 11) : 1);
  }
  return 0;
}();

class KernelCache : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = knobs().cache_dir;
    dir_ =
        "/tmp/tessera-cache-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++);
    setenv("TESSERA_CACHE_DIR", dir_.c_str(), 1);
    reload_knobs();
    fresh_process_view();
  }
  void TearDown() override {
    backend::cpu::clear_cache();
    setenv("TESSERA_CACHE_DIR", saved_.c_str(), 1);
    reload_knobs();
    fresh_process_view();
  }
  // Forget everything this process holds in memory, as a new process would.
  static void fresh_process_view() {
    cache_kernel.clear_memory_cache();
    cache_kernel_edited.clear_memory_cache();
    backend::cpu::forget_loaded();
  }
  static size_t entries() { return backend::cpu::cache_entries().size(); }

  std::string dir_, saved_;
  static inline int counter_ = 0;
};

TEST_F(KernelCache, SameKernelOneBinaryAndADiskHitAfterRestart) {
  ASSERT_TRUE(run_cache_kernel());
  EXPECT_FALSE(cache_kernel.last_from_disk());
  EXPECT_GT(cache_kernel.last_compile_ms(), 0);
  EXPECT_EQ(entries(), 1u);
  ASSERT_TRUE(run_cache_kernel());  // hot: the in-memory cache
  EXPECT_EQ(cache_kernel.num_specializations(), 1u);
  fresh_process_view();
  ASSERT_TRUE(run_cache_kernel());  // as a new process: found on disk, no compiler run
  EXPECT_TRUE(cache_kernel.last_from_disk());
  EXPECT_EQ(cache_kernel.last_compile_ms(), 0);
  EXPECT_EQ(entries(), 1u);
  const auto e = backend::cpu::cache_entries();
  EXPECT_EQ(e[0].kernel, "cache_kernel");
  EXPECT_GT(e[0].bytes, 0u);
}

TEST_F(KernelCache, EditedKernelsAndNewConstexprsRecompile) {
  ASSERT_TRUE(run_cache_kernel(64));
  Tensor x = arange(0, 100, 1, float32), out = zeros({100});
  cache_kernel_edited[{2}](x, out, 100, tl::meta("BLOCK", 64));
  EXPECT_TRUE(equal(out, x * 3 + 1));
  EXPECT_EQ(entries(), 2u);
  ASSERT_TRUE(run_cache_kernel(128));
  EXPECT_EQ(entries(), 3u);
}

// Runs the cache kernel in a child process; returns 10 (disk hit), 11 (compiled) or an error.
int child_run() {
  const pid_t p = ::fork();
  if (p == 0) {
    setenv("TS_TEST_CHILD", "compile", 1);
    execl("/proc/self/exe", "child", static_cast<char*>(nullptr));
    std::_Exit(2);
  }
  int status = 0;
  ::waitpid(p, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Damage is made between processes: a file this process has mapped must never be truncated
// (the cache itself only ever renames whole directories into place).
TEST_F(KernelCache, DamagedEntryIsRebuilt) {
  ASSERT_EQ(child_run(), 11);
  const auto e = backend::cpu::cache_entries();
  ASSERT_EQ(e.size(), 1u);
  {
    std::ifstream in(e[0].so, std::ios::binary);
    std::string head(100, '\0');
    in.read(head.data(), 100);
    in.close();
    std::ofstream outf(e[0].so, std::ios::binary | std::ios::trunc);
    outf.write(head.data(), 100);
  }
  EXPECT_EQ(child_run(), 11);  // truncated: rebuilt
  EXPECT_EQ(entries(), 1u);
  EXPECT_EQ(child_run(), 10);  // and found again
  // The same size, its middle overwritten (a bad disk, a stray write): the digest catches it, so
  // the entry is rebuilt instead of loaded and run (which died with SIGTRAP before digests).
  const auto e2 = backend::cpu::cache_entries();
  ASSERT_EQ(e2.size(), 1u);
  {
    std::fstream f(e2[0].so, std::ios::binary | std::ios::in | std::ios::out);
    f.seekg(0, std::ios::end);
    const std::streamoff size = f.tellg();
    ASSERT_GT(size, 4096);
    f.seekp(size / 2);
    const std::string junk(512, '\xcc');  // int3: a trap if ever executed
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  EXPECT_EQ(child_run(), 11);  // rebuilt, not run
  EXPECT_EQ(child_run(), 10);
  std::ofstream(backend::cpu::cache_entries().at(0).dir + "/info", std::ios::trunc) << "garbage";
  EXPECT_EQ(child_run(), 11);  // a damaged record: rebuilt
  EXPECT_EQ(child_run(), 10);
}

TEST_F(KernelCache, TwoProcessesShareOneEntry) {
  pid_t pids[2];
  for (pid_t& p : pids) {
    p = ::fork();
    if (p == 0) {
      setenv("TS_TEST_CHILD", "compile", 1);
      execl("/proc/self/exe", "child", static_cast<char*>(nullptr));
      std::_Exit(2);
    }
  }
  for (pid_t p : pids) {
    int status = 0;
    ::waitpid(p, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_TRUE(WEXITSTATUS(status) == 10 || WEXITSTATUS(status) == 11) << WEXITSTATUS(status);
  }
  EXPECT_EQ(entries(), 1u);
  EXPECT_EQ(child_run(), 10);  // a third process finds it on disk
}

// kill -9 at random points of a cold compile (issue 19): whatever the moment, the next process
// finds a whole entry or compiles again, and computes the right result; nothing half-written is
// ever loaded. Each round starts cold, so every kill lands in (or after) a compile.
TEST_F(KernelCache, KillNineAtAnyPointOfACompileLeavesNothingHalfWritten) {
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(child_run(), 11);
  const double cold_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  std::mt19937_64 gen(tessera::testing::test_seed());
  int killed = 0;
  for (int round = 0; round < 12; ++round) {
    backend::cpu::clear_cache();
    const auto delay =
        static_cast<useconds_t>(std::uniform_real_distribution<double>(0, 1.2 * cold_us)(gen));
    const pid_t p = ::fork();
    if (p == 0) {
      setenv("TS_TEST_CHILD", "compile", 1);
      execl("/proc/self/exe", "child", static_cast<char*>(nullptr));
      std::_Exit(2);
    }
    ::usleep(delay);
    ::kill(p, SIGKILL);
    int status = 0;
    ::waitpid(p, &status, 0);
    if (WIFSIGNALED(status)) {
      ++killed;
    } else {
      EXPECT_TRUE(WIFEXITED(status) && (WEXITSTATUS(status) == 10 || WEXITSTATUS(status) == 11));
    }
    const int next = child_run();  // 10: a whole entry found; 11: compiled again
    EXPECT_TRUE(next == 10 || next == 11)
        << "round " << round << ", killed after " << delay << " us of a " << cold_us
        << " us cold compile: the next process exited " << next;
    EXPECT_LE(entries(), 1u);
  }
  std::printf("kill -9 test: %d of 12 children killed, cold compile %.0f us\n", killed, cold_us);
  EXPECT_GT(killed, 0) << "no child was killed before it finished";
}

TEST_F(KernelCache, ClearRemovesEverything) {
  ASSERT_TRUE(run_cache_kernel(64));
  ASSERT_TRUE(run_cache_kernel(32));
  EXPECT_EQ(entries(), 2u);
  EXPECT_EQ(backend::cpu::clear_cache(), 2u);
  EXPECT_EQ(entries(), 0u);
  fresh_process_view();
  ASSERT_TRUE(run_cache_kernel(64));  // the runtime headers are written again
}

// The public API over the same cache: entries with their kernel and target, stats, clear.
TEST_F(KernelCache, ThePublicApiListsCountsAndClears) {
  ASSERT_TRUE(run_cache_kernel(64));
  ASSERT_TRUE(run_cache_kernel(32));
  const auto all = cache::entries();
  ASSERT_EQ(all.size(), 2u);
  for (const auto& e : all) {
    EXPECT_EQ(e.kernel, "cache_kernel");
    EXPECT_EQ(e.target, "cpu");
    EXPECT_GT(e.bytes, 0u);
    EXPECT_GT(e.modified, 0);
    EXPECT_EQ(e.registers, -1);  // a CPU kernel has no register count
  }
  EXPECT_EQ(cache::root(), dir_);
  const cache::Stats s = cache::stats();
  EXPECT_EQ(s.kernels, 2u);
  EXPECT_EQ(s.cpu_kernels, 2u);
  EXPECT_EQ(s.bytes, all[0].bytes + all[1].bytes);
  EXPECT_EQ(cache::clear(), 2u);
  EXPECT_TRUE(cache::entries().empty());
  fresh_process_view();
}

TEST(GeneratedCode, InnerLoopsVectorize) {
  if (knobs().interpret) GTEST_SKIP() << "the interpreter backend generates no C++";
  if (knobs().debug) GTEST_SKIP() << "checked kernels test every access; they do not vectorize";
#ifdef TESSERA_JIT_UBSAN
  GTEST_SKIP() << "a sanitizer build's kernels are instrumented by UBSan and do not vectorize "
                  "(the plain build checks vectorization)";
#endif
  ASSERT_TRUE(run_cache_kernel(1024));
  const std::string src = "/tmp/tessera-vec-check-" + std::to_string(::getpid()) + ".cpp";
  std::ofstream(src) << cache_kernel.last_source();
  const auto& c = backend::cpu::compiler();
  std::string cmd = c.path;
  for (const auto& f : c.flags) cmd += " " + f;
  cmd += " -I " + backend::cpu::include_dir() + " -fopt-info-vec-optimized -c -o /dev/null " + src +
         " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  ::pclose(p);
  ::unlink(src.c_str());
  if (c.version.find("clang") != std::string::npos)
    GTEST_SKIP() << "the vectorization report is GCC's -fopt-info-vec (the JIT's compiler is "
                 << c.version << ")";
  EXPECT_NE(out.find("loop vectorized"), std::string::npos) << out;
}

// Counts its traces: the body runs only when a specialization is traced.
int g_traces = 0;
TL_JIT(counted_kernel, tl::Ptr x, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  ++g_traces;
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = offs < n;
  tl::store(out + offs, tl::load(x + offs, m) * 2 + 1, m);
}

TEST(GeneratedCode, HotLaunchDoesNoIrWork) {
  Tensor x = arange(0, 100, 1, float32), out = zeros({100});
  g_traces = 0;
  counted_kernel[{2}](x, out, 100, tl::meta("BLOCK", 64));
  EXPECT_EQ(g_traces, 1);
  const size_t specs = counted_kernel.num_specializations();
  for (int i = 0; i < 100; ++i) counted_kernel[{2}](x, out, 100, tl::meta("BLOCK", 64));
  EXPECT_EQ(g_traces, 1);  // no launch traced again
  EXPECT_EQ(counted_kernel.num_specializations(), specs);
  EXPECT_TRUE(equal(out, x * 2 + 1));
  counted_kernel[{4}](x, out, 100, tl::meta("BLOCK", 32));  // a new constexpr: one trace
  EXPECT_EQ(g_traces, 2);
}

}  // namespace

// TESSERA_DUMP_DIR: one file per distinct kernel text; the IR file's final section parses back.
TEST_F(KernelCache, DumpsGoToFilesInTheDumpDirectory) {
  const std::string dumps = dir_ + "-dumps";
  const char* dump0 = std::getenv("TESSERA_DUMP");
  const char* dir0 = std::getenv("TESSERA_DUMP_DIR");
  const std::string saved_dump = dump0 ? dump0 : "", saved_dir = dir0 ? dir0 : "";
  setenv("TESSERA_DUMP", "ir,src", 1);
  setenv("TESSERA_DUMP_DIR", dumps.c_str(), 1);
  reload_knobs();
  ASSERT_TRUE(run_cache_kernel(64));
  fresh_process_view();
  ASSERT_TRUE(run_cache_kernel(64));  // the same code again: the same two files
  ASSERT_TRUE(run_cache_kernel(32));  // another specialization: two more
  // Put back what the environment had (a run of the suite may be dumping).
  if (dump0)
    setenv("TESSERA_DUMP", saved_dump.c_str(), 1);
  else
    unsetenv("TESSERA_DUMP");
  if (dir0)
    setenv("TESSERA_DUMP_DIR", saved_dir.c_str(), 1);
  else
    unsetenv("TESSERA_DUMP_DIR");
  reload_knobs();
  std::vector<std::string> ir_files, cpp_files;
  for (const auto& e : std::filesystem::directory_iterator(dumps)) {
    const std::string name = e.path().filename().string();
    EXPECT_EQ(name.rfind("cache_kernel-", 0), 0u) << name;
    if (e.path().extension() == ".ir") ir_files.push_back(e.path().string());
    if (e.path().extension() == ".cpp") cpp_files.push_back(e.path().string());
    EXPECT_TRUE(e.path().extension() == ".ir" || e.path().extension() == ".cpp") << name;
  }
  EXPECT_EQ(ir_files.size(), 2u);
  EXPECT_EQ(cpp_files.size(), 2u);
  for (const auto& path : ir_files) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string text = ss.str();
    const std::string marker = "after the pipeline ----\n";
    const size_t at = text.find(marker);
    ASSERT_NE(at, std::string::npos) << text;
    EXPECT_NE(text.find("as traced"), std::string::npos);
    const auto parsed = ir::parse(text.substr(at + marker.size()));
    EXPECT_EQ(parsed->name, "cache_kernel");
  }
  for (const auto& path : cpp_files) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    EXPECT_NE(ss.str().find("C++ of kernel cache_kernel"), std::string::npos);
    EXPECT_NE(ss.str().find("_pid0"), std::string::npos);
  }
  std::filesystem::remove_all(dumps);
}
