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

TEST(ThreadPool, UsesSeveralThreadsAndRespectsTheGrain) {
  runtime::set_num_threads(4);
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
  runtime::set_num_threads(2);
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
  std::atomic<int> ran{0};
  EXPECT_THROW(runtime::parallel_for(0, 1000, 1,
                                     [&](int64_t b, int64_t) {
                                       ++ran;
                                       TS_CHECK(b != 500, ValueError) << "chunk " << b << " failed";
                                     }),
               ValueError);
  // The pool is usable afterwards.
  std::atomic<int64_t> sum{0};
  runtime::parallel_for(0, 100, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  EXPECT_EQ(sum.load(), 4950);
}

TEST(ThreadPool, UserLocationFollowsIntoTasks) {
  UserLocGuard g(SourceLoc{"model.cpp", 77});
  std::atomic<int> seen{0};
  runtime::parallel_for(0, 64, 1, [&](int64_t, int64_t) {
    if (UserLocGuard::current().line == 77) ++seen;
  });
  EXPECT_GT(seen.load(), 0);
  try {
    runtime::parallel_for(0, 64, 1,
                          [&](int64_t, int64_t) { TS_CHECK(false, ValueError) << "boom"; });
  } catch (const Error& e) {
    EXPECT_EQ(e.user_loc().line, 77);
  }
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
