#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "runtime/thread_pool.h"
#include "tessera/error.h"

using namespace tessera;

TEST(ThreadPool, CoversTheRangeExactlyOnce) {
  for (int64_t n : {0, 1, 7, 1000, 100003}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    runtime::parallel_for(0, n, 16, [&](int64_t b, int64_t e) {
      EXPECT_LE(b, e);
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << i;
  }
}

/** Sets the pool's size for a test and restores the size it had. */
class PoolSize {
 public:
  explicit PoolSize(int n) : saved_(runtime::num_threads()) { runtime::set_num_threads(n); }
  ~PoolSize() { runtime::set_num_threads(saved_); }

 private:
  int saved_;
};

TEST(ThreadPool, UsesSeveralThreadsAndRespectsTheGrain) {
  const int before = runtime::num_threads();
  {
    PoolSize four(4);
    EXPECT_EQ(runtime::num_threads(), 4);
  }
  EXPECT_EQ(runtime::num_threads(), before);
  PoolSize four(4);
  std::mutex m;
  std::set<std::thread::id> threads;
  std::atomic<int64_t> min_chunk{INT64_MAX};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  runtime::parallel_for(0, 1 << 16, 1024, [&](int64_t b, int64_t e) {
    if (e < (1 << 16)) {
      int64_t cur = min_chunk.load();
      while (e - b < cur && !min_chunk.compare_exchange_weak(cur, e - b)) {
      }
    }
    {
      std::lock_guard<std::mutex> g(m);
      threads.insert(std::this_thread::get_id());
    }
    // Hold this chunk until a second thread has taken one (independent of machine load).
    for (;;) {
      {
        std::lock_guard<std::mutex> g(m);
        if (threads.size() > 1) break;
      }
      if (std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::yield();
    }
  });
  EXPECT_GE(min_chunk.load(), 1024);
  EXPECT_GT(threads.size(), 1u);
}

TEST(ThreadPool, SmallAndNestedLoopsRunInline) {
  const auto caller = std::this_thread::get_id();
  runtime::parallel_for(0, 10, 100,
                        [&](int64_t, int64_t) { EXPECT_EQ(std::this_thread::get_id(), caller); });
  std::atomic<int> nested_inline{0}, outer{0};
  runtime::parallel_for(0, 64, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      ++outer;
      EXPECT_TRUE(runtime::in_parallel_region());
      const auto me = std::this_thread::get_id();
      runtime::parallel_for(0, 1000, 1, [&](int64_t, int64_t) {
        if (std::this_thread::get_id() == me) ++nested_inline;
      });
    }
  });
  EXPECT_EQ(outer.load(), 64);
  EXPECT_GE(nested_inline.load(), 64);
  EXPECT_FALSE(runtime::in_parallel_region());
}

TEST(ThreadPool, TheFirstExceptionIsRethrownAfterAllChunksStop) {
  PoolSize four(4);
  std::atomic<int> ran{0}, active{0};
  struct Active {
    std::atomic<int>& n;
    explicit Active(std::atomic<int>& a) : n(a) { ++n; }
    ~Active() { --n; }
  };
  EXPECT_THROW(runtime::parallel_for(0, 1000, 1,
                                     [&](int64_t b, int64_t e) {
                                       Active in(active);
                                       ++ran;
                                       // Long enough that other chunks are in flight.
                                       std::this_thread::sleep_for(std::chrono::milliseconds(2));
                                       TS_CHECK(!(b <= 500 && 500 < e), ValueError)
                                           << "chunk " << b << " failed";
                                     }),
               ValueError);
  // Every chunk had returned when the exception reached the caller, and none starts later.
  EXPECT_EQ(active.load(), 0);
  const int after = ran.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(ran.load(), after);
  EXPECT_EQ(active.load(), 0);
  // The pool is usable afterwards.
  std::atomic<int64_t> sum{0};
  runtime::parallel_for(0, 100, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  EXPECT_EQ(sum.load(), 4950);
}

TEST(ThreadPool, UserLocationFollowsIntoTasks) {
  PoolSize four(4);
  UserLocGuard g(SourceLoc{"model.cpp", 77});
  const auto caller = std::this_thread::get_id();
  std::mutex m;
  std::vector<std::pair<std::thread::id, int>> seen;  // per chunk: its thread and the line it saw
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  runtime::parallel_for(0, 64, 1, [&](int64_t, int64_t) {
    std::lock_guard<std::mutex> lock(m);
    seen.emplace_back(std::this_thread::get_id(), UserLocGuard::current().line);
  });
  // Keep one chunk busy until a pool thread has run one, so that a pool thread is checked.
  std::atomic<bool> pool_ran{false};
  std::atomic<int> pool_line{0};
  runtime::parallel_for(0, 64, 1, [&](int64_t, int64_t) {
    if (std::this_thread::get_id() != caller) {
      pool_line = UserLocGuard::current().line;
      pool_ran = true;
      return;
    }
    while (!pool_ran && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  });
  ASSERT_TRUE(pool_ran.load());
  EXPECT_EQ(pool_line.load(), 77);
  ASSERT_FALSE(seen.empty());
  for (const auto& [id, line] : seen) EXPECT_EQ(line, 77);
  bool threw = false;
  std::atomic<bool> pool_threw{false};
  try {
    runtime::parallel_for(0, 64, 1, [&](int64_t, int64_t) {
      if (std::this_thread::get_id() != caller) {
        pool_threw = true;
        TS_CHECK(false, ValueError) << "boom";
      }
      while (!pool_threw && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    });
  } catch (const Error& e) {
    threw = true;
    EXPECT_EQ(e.user_loc().line, 77);  // thrown on a pool thread, with the caller's line
  }
  EXPECT_TRUE(threw);
}

TEST(ThreadPool, ConcurrentCallersDoNotDeadlock) {
  std::vector<std::thread> ts;
  std::atomic<int64_t> total{0};
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&] {
      for (int r = 0; r < 50; ++r) {
        runtime::parallel_for(0, 1000, 10, [&](int64_t b, int64_t e) { total += e - b; });
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(total.load(), 4 * 50 * 1000);
}
