// Load (issue 19): threads launching different kernels, calling a compiled function and an
// autotuned kernel at once, in this process and in child processes that share its kernel cache
// and tuning database; cold caches, then warm. Every result must be right, nothing may deadlock
// (a watchdog turns a hang into a failure), and the caches must end exactly as one process
// running the same work alone leaves them: the same entries, each whole, no staging leftovers,
// the same tuning records.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/toolchain.h"
#include "runtime/disk_cache.h"
#include "tessera/autotune.h"
#include "tessera/compile.h"
#include "tessera/env.h"
#include "tessera/tessera.h"
#include "testing.h"
#include "tune/tune_db.h"

using namespace tessera;
namespace tl = tessera::tl;

namespace {

TL_JIT(stress_scale, tl::Ptr x, tl::Ptr y, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = offs < n;
  tl::store(y + offs, tl::load(x + offs, m) * 3.0f + 1.0f, m);
}

TL_JIT(stress_row_sum, tl::Ptr x, tl::Ptr out, tl::Int cols, tl::Const BLOCK) {
  auto row = tl::program_id(0);
  auto c = tl::arange(0, BLOCK);
  auto v = tl::load(x + row * cols + c, c < cols, 0.0f);
  tl::store(out + row, tl::sum(v, 0));
}

TL_JIT(stress_add, tl::Ptr a, tl::Ptr b, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = offs < n;
  tl::store(out + offs, tl::load(a + offs, m) + tl::load(b + offs, m), m);
}

TL_JIT(stress_tuned_mul, tl::Ptr a, tl::Ptr out, tl::Int n, tl::Const BLOCK) {
  auto offs = tl::program_id(0) * BLOCK + tl::arange(0, BLOCK);
  auto m = offs < n;
  auto v = tl::load(a + offs, m);
  tl::store(out + offs, v * v, m);
}

Tensor add_fn(const Tensor& a, const Tensor& b) {
  Tensor out = zeros_like(a);
  const int64_t n = out.numel();
  auto grid = [&](const tl::Meta& m) { return tl::Grid{tl::cdiv(n, m["BLOCK"])}; };
  stress_add[grid](a, b, out, n, tl::meta("BLOCK", 16));
  return out;
}

// Sizes are never multiples of 16 and never 1, so every call of a kernel at one BLOCK is one
// specialization (the entry counts below do not depend on which sizes a thread drew).
constexpr int64_t kSizes[] = {1000, 1003, 4097};
constexpr int64_t kBlocks[] = {32, 64, 128};

// The work of one thread: `iterations` random steps (at least one of each kind); returns how many
// results were wrong or threw.
template <class Compiled>
int work(int iterations, unsigned seed, Compiled& compiled, tl::TunedKernel& tuned) {
  std::mt19937 gen(seed);
  int bad = 0;
  for (int i = 0; i < iterations; ++i) {
    const int kind = i < 4 ? i : static_cast<int>(gen() % 4);
    const int64_t n = kSizes[gen() % 3];
    const double k = static_cast<double>(gen() % 7);
    try {
      Tensor x = arange(0, n, 1, float32) + k;
      switch (kind) {
        case 0: {  // one of three specializations of a kernel
          const int64_t block = kBlocks[gen() % 3];
          Tensor y = full({n}, -1.0);
          stress_scale[{tl::cdiv(n, block)}](x, y, n, tl::meta("BLOCK", block));
          bad += !equal(y, x * 3 + 1);
          break;
        }
        case 1: {  // a reduction, two specializations
          const int64_t block = gen() % 2 ? 64 : 128, rows = 7, cols = 60;
          Tensor m = (arange(0, rows * cols, 1, float32) + k).reshape({rows, cols});
          Tensor s = full({rows}, -1.0);
          stress_row_sum[{rows}](m, s, cols, tl::meta("BLOCK", block));
          bad += !equal(s, m.sum(1));
          break;
        }
        case 2:  // a compiled function (static, then dynamic, from any thread)
          bad += !equal(compiled(x, x * 2), x * 3);
          break;
        default: {  // an autotuned kernel: tuning records shared through the database
          const int64_t m = gen() % 2 ? 1000 : 3000;
          Tensor a = arange(0, m, 1, float32) + k, out = full({m}, -1.0);
          auto grid = [&](const tl::Meta& meta) { return tl::Grid{tl::cdiv(m, meta["BLOCK"])}; };
          tuned[grid](a, out, m);
          bad += !equal(out, a * a);
          break;
        }
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "stress: step %d (kind %d) threw: %s\n", i, kind, e.what());
      ++bad;
    }
  }
  return bad;
}

tl::TunedKernel make_tuned() {
  return tl::autotune(stress_tuned_mul, {tl::Config({{"BLOCK", 64}}), tl::Config({{"BLOCK", 128}})},
                      {"n"});
}

// `threads` threads doing `iterations` steps each in this process; the number of bad results.
int run_threads(int threads, int iterations, unsigned seed) {
  CompileOptions o;
  o.name = "stress_add_fn";
  auto compiled = compile(add_fn, o);
  tl::TunedKernel tuned = make_tuned();
  std::atomic<int> bad{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] { bad += work(iterations, seed + 977 * t, compiled, tuned); });
  }
  for (auto& th : pool) th.join();
  return bad.load();
}

// A child process: TS_STRESS_CHILD="<threads> <iterations> <seed>"; exits with the bad count
// (capped), or dies by SIGALRM if it hangs.
[[maybe_unused]] const int kChild = [] {
  if (const char* spec = std::getenv("TS_STRESS_CHILD")) {
    int threads = 0, iterations = 0;
    unsigned seed = 0;
    if (std::sscanf(spec, "%d %d %u", &threads, &iterations, &seed) != 3) std::_Exit(99);
    ::alarm(300);
    std::_Exit(std::min(run_threads(threads, iterations, seed), 98));
  }
  return 0;
}();

pid_t spawn(int threads, int iterations, unsigned seed) {
  const std::string spec =
      std::to_string(threads) + " " + std::to_string(iterations) + " " + std::to_string(seed);
  const pid_t p = ::fork();
  if (p == 0) {
    ::setenv("TS_STRESS_CHILD", spec.c_str(), 1);
    ::execl("/proc/self/exe", "stress-child", static_cast<char*>(nullptr));
    std::_Exit(97);
  }
  return p;
}

// What the caches hold: entry keys (each checked whole) and tuning record identities.
struct CacheState {
  std::set<std::string> kernels, records;
  std::vector<std::string> damaged, leftovers;
};

CacheState cache_state() {
  CacheState s;
  const runtime::disk::Store store("cpu");
  for (const std::string& key : store.keys()) {
    std::string why;
    if (store.open(key, &why)) {
      s.kernels.insert(key);
    } else {
      s.damaged.push_back(key + ": " + why);
    }
  }
  for (const tune::Record& r : tune::all()) s.records.insert(r.id());
  const std::filesystem::path tmp = store.root() + "/tmp";
  if (std::filesystem::exists(tmp)) {
    for (const auto& e : std::filesystem::directory_iterator(tmp))
      s.leftovers.push_back(e.path().string());
  }
  return s;
}

class Stress : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = knobs().cache_dir; }
  void TearDown() override { use_cache(saved_); }
  // A cache folder of its own; this process forgets what it loaded from the previous one.
  static void use_cache(const std::string& dir) {
    ::setenv("TESSERA_CACHE_DIR", dir.c_str(), 1);
    reload_knobs();
    for (auto* k : {&stress_scale, &stress_row_sum, &stress_add, &stress_tuned_mul})
      k->clear_memory_cache();
    backend::cpu::forget_loaded();
  }
  std::string saved_;
};

TEST_F(Stress, ThreadsAndProcessesShareOneCacheAndOneTuningDatabase) {
  const std::string base = "/tmp/tessera-stress-" + std::to_string(::getpid());
  const unsigned seed = tessera::testing::test_seed();
  constexpr int kIterations = 40, kThreads = 4, kChildren = 3, kChildThreads = 3;

  // The reference: one thread of this process alone, every kind of step and specialization.
  use_cache(base + "-alone");
  ASSERT_EQ(run_threads(1, 120, seed), 0);
  const CacheState alone = cache_state();
  ASSERT_TRUE(alone.damaged.empty());
  ASSERT_GE(alone.kernels.size(), 7u);  // 3 + 2 specializations, add_fn's kernel, 2 tuned configs

  // A watchdog: a deadlock fails the test instead of hanging CI.
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> lock(m);
    if (!cv.wait_for(lock, std::chrono::minutes(5), [&] { return done; })) {
      std::fprintf(stderr, "stress: no progress in 5 minutes: a deadlock\n");
      std::abort();
    }
  });

  use_cache(base + "-shared");
  for (const char* round : {"cold", "warm"}) {
    std::vector<pid_t> children;
    for (int c = 0; c < kChildren; ++c)
      children.push_back(spawn(kChildThreads, kIterations, seed + 101 * (c + 1)));
    EXPECT_EQ(run_threads(kThreads, kIterations, seed + 7), 0) << round << ": this process";
    for (size_t c = 0; c < children.size(); ++c) {
      int status = 0;
      ::waitpid(children[c], &status, 0);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
          << round << ": child " << c << " "
          << (WIFEXITED(status) ? "had " + std::to_string(WEXITSTATUS(status)) + " bad results"
                                : "died by signal " + std::to_string(WTERMSIG(status)));
    }
    const CacheState shared = cache_state();
    EXPECT_EQ(shared.damaged, std::vector<std::string>{}) << round;
    EXPECT_EQ(shared.leftovers, std::vector<std::string>{}) << round;
    EXPECT_EQ(shared.kernels, alone.kernels) << round << ": the same entries as one process";
    EXPECT_EQ(shared.records.size(), alone.records.size()) << round;
    EXPECT_EQ(shared.records, alone.records) << round;
    use_cache(base + "-shared");  // warm disk, cold memory for the next round
  }
  std::fprintf(stderr,
               "stress: %zu kernel entries and %zu tuning records, as one process leaves them, "
               "after %d threads x %d steps here and %d processes x %d threads x %d steps, cold "
               "then warm\n",
               alone.kernels.size(), alone.records.size(), kThreads, kIterations, kChildren,
               kChildThreads, kIterations);
  {
    std::lock_guard<std::mutex> lock(m);
    done = true;
  }
  cv.notify_all();
  watchdog.join();
  std::filesystem::remove_all(base + "-alone");
  std::filesystem::remove_all(base + "-shared");
}

}  // namespace
