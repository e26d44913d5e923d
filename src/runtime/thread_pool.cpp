#include "runtime/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "tessera/detail/local_state.h"
#include "tessera/env.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define TS_CPU_RELAX() _mm_pause()
#else
#define TS_CPU_RELAX() std::this_thread::yield()
#endif

namespace tessera::runtime {
namespace {

thread_local bool t_in_parallel = false;

struct Job {
  FunctionRef<void(int64_t, int64_t)>* body;
  int64_t begin, end, chunk;
  std::atomic<int64_t> next;
  std::atomic<int64_t> chunks_left;
  detail::LocalState state;
  SourceLoc user_loc;
  std::mutex error_mutex;
  std::exception_ptr error;

  // Runs chunks until none are left. Returns after this thread's last chunk.
  void work() {
    detail::LocalStateGuard guard(state, user_loc);
    const bool was_parallel = t_in_parallel;
    t_in_parallel = true;
    for (;;) {
      const int64_t b = next.fetch_add(chunk, std::memory_order_relaxed);
      if (b >= end) break;
      const int64_t e = std::min(end, b + chunk);
      bool skip;
      {
        std::lock_guard<std::mutex> g(error_mutex);
        skip = error != nullptr;
      }
      if (!skip) {
        try {
          (*body)(b, e);
        } catch (...) {
          std::lock_guard<std::mutex> g(error_mutex);
          if (!error) error = std::current_exception();
        }
      }
      chunks_left.fetch_sub(1, std::memory_order_acq_rel);
    }
    t_in_parallel = was_parallel;
  }
};

class Pool {
 public:
  explicit Pool(int n) { start(n); }
  ~Pool() { stop(); }

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  void resize(int n) {
    stop();
    start(n);
  }

  // Runs the job on the workers and the caller; false when the pool is busy (caller runs inline).
  bool run(Job& job) {
    bool expected = false;
    if (!busy_.compare_exchange_strong(expected, true, std::memory_order_acquire)) return false;
    {
      std::lock_guard<std::mutex> g(m_);
      job_ = &job;
      active_ = 0;
      gen_.fetch_add(1, std::memory_order_release);
    }
    if (sleeping_.load(std::memory_order_acquire) > 0) cv_work_.notify_all();
    job.work();
    // Wait for chunks still running on workers, then for every worker to leave the job.
    for (int spin = 0; job.chunks_left.load(std::memory_order_acquire) > 0; ++spin) {
      if (spin < 4096) {
        TS_CPU_RELAX();
      } else {
        std::this_thread::yield();
      }
    }
    {
      std::unique_lock<std::mutex> lk(m_);
      job_ = nullptr;
      cv_done_.wait(lk, [&] { return active_ == 0; });
    }
    busy_.store(false, std::memory_order_release);
    return true;
  }

 private:
  void start(int n) {
    stop_ = false;
    // Workers start from the current generation: a job posted before a new thread first runs
    // must still count as new to it.
    const uint64_t gen = gen_.load();
    for (int i = 1; i < n; ++i) workers_.emplace_back([this, gen] { loop(gen); });
  }

  void stop() {
    {
      std::lock_guard<std::mutex> g(m_);
      stop_ = true;
      gen_.fetch_add(1);
    }
    cv_work_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  void loop(uint64_t seen) {
    for (;;) {
      // Spin briefly for the next job: loops often come in bursts.
      for (int spin = 0; spin < 2000 && gen_.load(std::memory_order_acquire) == seen; ++spin) {
        TS_CPU_RELAX();
      }
      Job* job;
      {
        std::unique_lock<std::mutex> lk(m_);
        if (gen_.load() == seen && !stop_) {
          sleeping_.fetch_add(1);
          cv_work_.wait(lk, [&] { return stop_ || gen_.load() != seen; });
          sleeping_.fetch_sub(1);
        }
        if (stop_) return;
        seen = gen_.load();
        job = job_;
        if (!job) continue;
        ++active_;
      }
      job->work();
      {
        std::lock_guard<std::mutex> g(m_);
        if (--active_ == 0) cv_done_.notify_all();
      }
    }
  }

  std::vector<std::thread> workers_;
  std::mutex m_;
  std::condition_variable cv_work_, cv_done_;
  std::atomic<uint64_t> gen_{0};
  std::atomic<int> sleeping_{0};
  std::atomic<bool> busy_{false};
  Job* job_ = nullptr;
  int active_ = 0;
  bool stop_ = false;
};

int default_threads() {
  if (int n = knobs().num_threads; n > 0) return n;
  const unsigned hc = std::thread::hardware_concurrency();
  return hc == 0 ? 1 : static_cast<int>(hc);
}

Pool& pool() {
  static Pool* p = new Pool(default_threads());  // never destroyed: workers may outlive statics
  return *p;
}

}  // namespace

int num_threads() {
  return pool().size();
}

void set_num_threads(int n) {
  pool().resize(std::max(1, n));
}

bool in_parallel_region() {
  return t_in_parallel;
}

void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  FunctionRef<void(int64_t, int64_t)> body) {
  if (begin >= end) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t range = end - begin;
  const int nt = t_in_parallel ? 1 : num_threads();
  if (nt == 1 || range <= grain) {
    body(begin, end);
    return;
  }
  const int64_t chunk = std::max(grain, (range + 4 * nt - 1) / (4 * nt));
  Job job;
  job.body = &body;
  job.begin = begin;
  job.end = end;
  job.chunk = chunk;
  job.next.store(begin);
  job.chunks_left.store((range + chunk - 1) / chunk);
  job.state = detail::local_state();
  job.user_loc = UserLocGuard::current();
  if (!pool().run(job)) {
    body(begin, end);
    return;
  }
  if (job.error) std::rethrow_exception(job.error);
}

void run_programs(KernelEntry fn, int64_t work_per_program, const trt::Grid& grid, int64_t total,
                  const trt::Arg* slots) {
  if (total == 1) {
    fn(&grid, 0, 1, slots);
    return;
  }
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(work_per_program, 1));
  parallel_for(0, total, grain, [&](int64_t b, int64_t e) { fn(&grid, b, e, slots); });
}

}  // namespace tessera::runtime
