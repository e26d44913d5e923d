/** \file
 * A host simulator for generated CUDA kernels (TESSERA_CROSSCHECK=sim): the CUDA source the CUDA
 * backend generates, compiled by the system C++ compiler with this header in front, runs every
 * thread of a block as a fiber (ucontext) of the launching thread, switched where it waits.
 * Barriers are real barriers, shared memory is one buffer per launch (poisoned before each block),
 * and the warp-collective instructions the tile runtime uses are computed from their definitions in
 * the PTX ISA across the warp's 32 threads: shuffles, `ldmatrix` (x2 and x4, transposed or not),
 * `mma.sync.m16n8k16` with float16/bfloat16 inputs and float32 accumulators, Hopper's
 * `wgmma.mma_async` from swizzled shared-memory descriptors, whose products land only at the
 * `wgmma.wait_group` that completes them (the accumulator is NaN in flight; operands rewritten in
 * flight stop the run), and `cp.async` groups, whose destinations are poisoned at the issue and
 * written at the `wait_group` that completes them (a read before the wait, or a tile rewritten
 * while still read, sees the poison, as a race on a GPU could). So machines
 * without a GPU check the CUDA emitter's layouts, fragments and pipelines against the CPU backend.
 * Not a performance model, and not the whole of CUDA: what generated kernels use.
 */
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include <ucontext.h>

#define TRT_SIM 1
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__
#define __align__(n) alignas(n)

#include "tessera/trt/scalar.h"

namespace trt_sim {

struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};

}  // namespace trt_sim

static thread_local trt_sim::Dim3 threadIdx, blockIdx;

namespace trt_sim {

struct Copy {
  void* dst;
  const void* src;
  int bytes;
};

/** One wgmma of a thread, from its issue to the wait that completes its group: the accumulator
 * it updates, its operands (A's descriptor, or the warp's A values from registers, copied at the
 * issue as the hardware reads them), and the accumulator's values before and after, computed at
 * the issue. */
struct WgmmaOp {
  float* d;
  int n;
  bool rs, bf16, kb;
  uint64_t da, db;
  std::vector<float> a;  // rs: the warp's 16 x 16 A, row-major
  std::vector<float> in, out;
};

/** What the threads of one launch share. A block's threads are fibers on the launching OS
 * thread, switched only where one waits (a barrier, a warp instruction): a barrier costs a couple
 * of context switches per thread, and a run is deterministic. */
struct Launch {
  int threads = 0;
  unsigned char* smem = nullptr;
  ucontext_t scheduler;
  std::vector<ucontext_t> fiber;
  std::vector<std::unique_ptr<char[]>> stacks;
  std::vector<char> done;
  unsigned long block_gen = 0;
  int block_count = 0;
  std::vector<unsigned long> warp_gen;
  std::vector<int> warp_count;
  std::vector<uint64_t> xchg;                        // per warp: 32 lanes of 8 words
  std::vector<std::vector<Copy>> open;               // per thread: cp.async since the last commit
  std::vector<std::vector<std::vector<Copy>>> wait;  // per thread: committed groups in flight
  std::vector<std::vector<WgmmaOp>> wg_open;         // per thread: wgmma since the last commit
  std::vector<std::vector<std::vector<WgmmaOp>>> wg_wait;  // per thread: groups in flight
};

static thread_local Launch* t_launch = nullptr;
static thread_local int t_tid = 0;

inline unsigned char* shared_memory() {
  return t_launch->smem;
}
inline int lane() {
  return t_tid & 31;
}
// Back to the scheduler, which runs the other threads before resuming this one.
inline void yield() {
  Launch& l = *t_launch;
  swapcontext(&l.fiber[static_cast<size_t>(t_tid)], &l.scheduler);
}
inline void block_barrier() {
  Launch& l = *t_launch;
  const unsigned long gen = l.block_gen;
  if (++l.block_count == l.threads) {
    l.block_count = 0;
    ++l.block_gen;
    return;
  }
  while (l.block_gen == gen) yield();
}
// This warp's exchange slots (8 words per lane) and its barrier.
inline uint64_t* warp_slots() {
  return &t_launch->xchg[static_cast<size_t>(t_tid >> 5) * 256];
}
inline void warp_sync() {
  Launch& l = *t_launch;
  const auto w = static_cast<size_t>(t_tid >> 5);
  const unsigned long gen = l.warp_gen[w];
  if (++l.warp_count[w] == 32) {
    l.warp_count[w] = 0;
    ++l.warp_gen[w];
    return;
  }
  while (l.warp_gen[w] == gen) yield();
}

template <class T>
T shfl_xor(T v, int m) {
  uint64_t* s = warp_slots();
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  s[lane() * 8] = bits;
  warp_sync();
  const uint64_t r = s[(lane() ^ m) * 8];
  warp_sync();
  T out;
  std::memcpy(&out, &r, sizeof(T));
  return out;
}

/** ldmatrix.m8n8 with `count` (2 or 4) tiles: lane 8q + i gives the address of row i of tile q;
 * lane 4g + t receives in r[q] tile q's row g, columns 2t and 2t + 1 (or, transposed, rows 2t
 * and 2t + 1 of column g), the lower column (row) in the low half. */
template <bool TRANS>
void ldmatrix(uint32_t* r, int count, const uint16_t* p) {
  uint64_t* s = warp_slots();
  s[lane() * 8] = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p));
  warp_sync();
  const int g = lane() >> 2, t = lane() & 3;
  for (int q = 0; q < count; ++q) {
    auto row = [&](int i) {
      return reinterpret_cast<const uint16_t*>(static_cast<uintptr_t>(s[(8 * q + i) * 8]));
    };
    const uint16_t lo = TRANS ? row(2 * t)[g] : row(g)[2 * t];
    const uint16_t hi = TRANS ? row(2 * t + 1)[g] : row(g)[2 * t + 1];
    r[q] = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
  }
  warp_sync();
}

/** mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}: d += A B over the warp, with the fragment
 * layouts of the PTX ISA (A: register i of lane 4g + t holds row g + 8 (i & 1), columns
 * 2t + 8 (i >> 1) and the next; B: register j holds rows 2t + 8j and the next of column g;
 * C/D: d[e] is row g + 8 (e >> 1), column 2t + (e & 1)). */
template <bool BF16>
void mma_16816(float* d, const uint32_t* a, const uint32_t* b) {
  uint64_t* s = warp_slots();
  for (int i = 0; i < 4; ++i) s[lane() * 8 + i] = a[i];
  for (int j = 0; j < 2; ++j) s[lane() * 8 + 4 + j] = b[j];
  warp_sync();
  auto value = [&](int ln, int reg, int half) {
    const auto w = static_cast<uint32_t>(s[ln * 8 + reg]);
    const auto h = static_cast<uint16_t>(half ? w >> 16 : w & 0xffffu);
    return BF16 ? trt::bf16_to_float(h) : trt::half_to_float(h);
  };
  auto A = [&](int r, int k) {
    return value(4 * (r % 8) + (k % 8) / 2, r / 8 + 2 * (k / 8), k % 2);
  };
  auto B = [&](int k, int n) { return value(4 * n + (k % 8) / 2, 4 + k / 8, k % 2); };
  const int g = lane() >> 2, t = lane() & 3;
  for (int e = 0; e < 4; ++e) {
    const int row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
    float sum = d[e];
    for (int k = 0; k < 16; ++k) sum = __builtin_fmaf(A(row, k), B(k, col), sum);
    d[e] = sum;
  }
  warp_sync();
}

/** mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 (A: register i of lane 4g + t holds row
 * g + 8 (i & 1), column t + 4 (i >> 1); B: register j holds row t + 4j of column g). */
inline void mma_1688_tf32(float* d, const uint32_t* a, const uint32_t* b) {
  uint64_t* s = warp_slots();
  for (int i = 0; i < 4; ++i) s[lane() * 8 + i] = a[i];
  for (int j = 0; j < 2; ++j) s[lane() * 8 + 4 + j] = b[j];
  warp_sync();
  auto value = [&](int ln, int reg) {
    // The tensor core reads 19 bits of each: the low 13 of the mantissa are ignored.
    const auto w = static_cast<uint32_t>(s[ln * 8 + reg]) & 0xffffe000u;
    float f;
    std::memcpy(&f, &w, 4);
    return f;
  };
  auto A = [&](int r, int k) { return value(4 * (r % 8) + k % 4, r / 8 + 2 * (k / 4)); };
  auto B = [&](int k, int n) { return value(4 * n + k % 4, 4 + k / 4); };
  const int g = lane() >> 2, t = lane() & 3;
  for (int e = 0; e < 4; ++e) {
    const int row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
    float sum = d[e];
    for (int k = 0; k < 8; ++k) sum = __builtin_fmaf(A(row, k), B(k, col), sum);
    d[e] = sum;
  }
  warp_sync();
}

/** A wgmma descriptor's fields (start address, LBO, SBO in bytes; the swizzle row's bytes). */
struct WgmmaDesc {
  int64_t start, lbo, sbo, swizzle;
};
inline WgmmaDesc wgmma_decode(uint64_t x) {
  const int mode = static_cast<int>(x >> 62);
  const int64_t sw = mode == 1 ? 128 : mode == 2 ? 64 : mode == 3 ? 32 : 0;
  if (sw == 0) {
    std::fprintf(stderr, "trt_sim::wgmma: only swizzled layouts are simulated\n");
    std::abort();
  }
  return WgmmaDesc{static_cast<int64_t>(x & 0x3fff) << 4,
                   static_cast<int64_t>((x >> 16) & 0x3fff) << 4,
                   static_cast<int64_t>((x >> 32) & 0x3fff) << 4, sw};
}
/** The 16-bit value at byte offset `o` of a swizzled tile (swizzle rows of `sw` bytes). */
inline float wgmma_value(int64_t o, int64_t sw, bool bf16) {
  o ^= ((o >> 7) & (sw / 16 - 1)) << 4;  // the 16-byte chunk moves within its swizzle row
  uint16_t h;
  std::memcpy(&h, shared_memory() + o, 2);
  return bf16 ? trt::bf16_to_float(h) : trt::half_to_float(h);
}
/** This thread's N / 2 accumulators d[i] (row 16 q + g + 8 ((i >> 1) & 1), column 8 (i >> 2) +
 * 2t + (i & 1) for warp q of the warpgroup and lane 4g + t) += the sum over k < 16 of
 * A(row, k) B[k][col], B found through its descriptor: N-major (row k at k % 8 swizzle rows,
 * groups of 8 k SBO apart, each swizzle row's S / 2 columns, slabs of them LBO apart) or, when
 * `kb`, K-major (as A is: column c at c % 8 swizzle rows, groups of 8 columns SBO apart). */
template <class FA>
void wgmma_products(float* d, int n, FA A, uint64_t db, bool bf16, bool kb) {
  const WgmmaDesc b = wgmma_decode(db);
  const int64_t eb = b.swizzle / 2;
  auto B = [&](int k, int c) {
    if (kb)
      return wgmma_value(b.start + c / 8 * b.sbo + c % 8 * b.swizzle + 2 * k, b.swizzle, bf16);
    return wgmma_value(b.start + c / eb * b.lbo + k / 8 * b.sbo + k % 8 * b.swizzle + 2 * (c % eb),
                       b.swizzle, bf16);
  };
  const int q = (t_tid >> 5) & 3, g = lane() >> 2, t = lane() & 3;
  for (int i = 0; i < n / 2; ++i) {
    const int row = 16 * q + g + 8 * ((i >> 1) & 1), col = 8 * (i >> 2) + 2 * t + (i & 1);
    float sum = d[i];
    for (int k = 0; k < 16; ++k) sum = __builtin_fmaf(A(row, k), B(k, col), sum);
    d[i] = sum;
  }
}

// wgmma's products complete at the wait_group that covers their group, not at the issue: from the
// issue to that wait the accumulator holds NaN (a read of it in flight spoils the result), and at
// the wait the products are computed again from shared memory as it is then: operands rewritten
// in flight (a ring slot refilled too early) stop the run with a message. So the simulator checks
// the ordering of asynchronous products that the hardware leaves undefined.

[[noreturn]] inline void wgmma_fail(const char* what) {
  std::fprintf(stderr, "trt_sim::wgmma: %s (thread %d)\n", what, t_tid);
  std::abort();
}

/** The products of `op` added to `acc` (op.n / 2 floats), its operands read now. */
inline void wgmma_compute(const WgmmaOp& op, float* acc) {
  if (op.rs) {
    auto A = [&](int m, int k) { return op.a[static_cast<size_t>((m % 16) * 16 + k)]; };
    wgmma_products(acc, op.n, A, op.db, op.bf16, op.kb);
  } else {
    const WgmmaDesc a = wgmma_decode(op.da);
    auto A = [&](int m, int k) {
      return wgmma_value(a.start + m / 8 * a.sbo + m % 8 * a.swizzle + 2 * k, a.swizzle, op.bf16);
    };
    wgmma_products(acc, op.n, A, op.db, op.bf16, op.kb);
  }
}

/** The latest wgmma of this thread still in flight (committed or not) that updates `d`, or
 * null. */
inline const WgmmaOp* wgmma_in_flight(const float* d) {
  const Launch& l = *t_launch;
  const auto& open = l.wg_open[static_cast<size_t>(t_tid)];
  const auto& groups = l.wg_wait[static_cast<size_t>(t_tid)];
  for (auto o = open.rbegin(); o != open.rend(); ++o) {
    if (o->d == d) return &*o;
  }
  for (auto g = groups.rbegin(); g != groups.rend(); ++g) {
    for (auto o = g->rbegin(); o != g->rend(); ++o) {
      if (o->d == d) return &*o;
    }
  }
  return nullptr;
}

inline void wgmma_issue(WgmmaOp op) {
  if (const WgmmaOp* prev = wgmma_in_flight(op.d)) {
    op.in = prev->out;  // (the products it adds to are still in flight: chained, as the hardware's)
  } else {
    op.in.assign(op.d, op.d + op.n / 2);
  }
  op.out = op.in;
  wgmma_compute(op, op.out.data());
  for (int i = 0; i < op.n / 2; ++i) op.d[i] = __builtin_nanf("");
  t_launch->wg_open[static_cast<size_t>(t_tid)].push_back(std::move(op));
}

/** wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16} with A K-major and B N-major (K-major
 * when `kb`: imm-trans-b 0) in shared memory, found through their descriptors (the PTX ISA's
 * canonical layouts; A: row m of its 8-row group at m % 8 swizzle rows, groups SBO apart, the 16 k
 * of one instruction in one swizzle row). The products land at the wait (above). */
inline void wgmma(float* d, int n, uint64_t da, uint64_t db, bool bf16, bool kb) {
  wgmma_issue(WgmmaOp{d, n, false, bf16, kb, da, db, {}, {}, {}});
}

/** The same with A from registers: `a` is this thread's four registers of its warp's 16 rows of A
 * (mma.sync's m16n8k16 A fragment: register r of lane 4g + t holds row g + 8 (r & 1), columns
 * 2t + 8 (r >> 1) and the next, low half first). The warp's lanes exchange their fragments. */
inline void wgmma_rs(float* d, int n, const uint32_t* a, uint64_t db, bool bf16, bool kb) {
  uint64_t* s = warp_slots();
  for (int r = 0; r < 4; ++r) s[lane() * 8 + r] = a[r];
  warp_sync();
  WgmmaOp op{d, n, true, bf16, kb, 0, db, std::vector<float>(256), {}, {}};
  for (int r = 0; r < 16; ++r) {
    for (int k = 0; k < 16; ++k) {
      const auto w =
          static_cast<uint32_t>(s[(4 * (r % 8) + (k % 8) / 2) * 8 + r / 8 + 2 * (k / 8)]);
      const auto h = static_cast<uint16_t>(k % 2 ? w >> 16 : w & 0xffffu);
      op.a[static_cast<size_t>(r * 16 + k)] = bf16 ? trt::bf16_to_float(h) : trt::half_to_float(h);
    }
  }
  warp_sync();
  wgmma_issue(std::move(op));
}

/** wgmma.commit_group: this thread's wgmma since the last commit become one group. */
inline void wgmma_commit() {
  Launch& l = *t_launch;
  auto& open = l.wg_open[static_cast<size_t>(t_tid)];
  l.wg_wait[static_cast<size_t>(t_tid)].push_back(std::move(open));
  open.clear();
}

/** wgmma.wait_group N: completes all but the `pending` newest groups, oldest first. */
inline void wgmma_wait(size_t pending) {
  auto& groups = t_launch->wg_wait[static_cast<size_t>(t_tid)];
  while (groups.size() > pending) {
    std::vector<WgmmaOp> done = std::move(groups.front());
    groups.erase(groups.begin());
    for (const WgmmaOp& op : done) {
      std::vector<float> again = op.in;
      wgmma_compute(op, again.data());
      if (std::memcmp(again.data(), op.out.data(), again.size() * sizeof(float)) != 0)
        wgmma_fail(
            "shared memory a wgmma reads changed between its issue and its wait (a tile "
            "rewritten while its products were in flight)");
    }
    for (const WgmmaOp& op : done) {
      if (!wgmma_in_flight(op.d)) std::memcpy(op.d, op.out.data(), op.out.size() * sizeof(float));
    }
  }
}

/** cp.async: the destination is poisoned at the issue (the earliest the hardware may write it:
 * a tile still read there, by a wgmma in flight included, sees the change) and written at the
 * wait_group that completes the group (the latest: a read before the wait sees the poison). */
inline void cp_async(void* dst, const void* src, int bytes) {
  std::memset(dst, 0xa5, static_cast<size_t>(bytes));
  t_launch->open[static_cast<size_t>(t_tid)].push_back({dst, src, bytes});
}
inline void cp_async_commit() {
  auto& open = t_launch->open[static_cast<size_t>(t_tid)];
  t_launch->wait[static_cast<size_t>(t_tid)].push_back(std::move(open));
  open.clear();
}
inline void cp_async_wait(size_t pending) {
  auto& groups = t_launch->wait[static_cast<size_t>(t_tid)];
  while (groups.size() > pending) {
    for (const Copy& c : groups.front()) std::memcpy(c.dst, c.src, static_cast<size_t>(c.bytes));
    groups.erase(groups.begin());
  }
}

template <class F>
struct FiberStart {
  F* body;
  int64_t program;
};

template <class F>
void fiber_main(unsigned lo, unsigned hi, int t) {
  const auto* s = reinterpret_cast<const FiberStart<F>*>((static_cast<uintptr_t>(hi) << 32) |
                                                         static_cast<uintptr_t>(lo));
  (*s->body)(static_cast<unsigned>(t), s->program);
  if (!t_launch->wg_open[static_cast<size_t>(t)].empty() ||
      !t_launch->wg_wait[static_cast<size_t>(t)].empty())
    wgmma_fail("a thread ended with wgmma products in flight (no wait_group covered them)");
  t_launch->done[static_cast<size_t>(t)] = 1;
}

/** Runs programs [pb, pe) of grid `g` one block after another, `threads` fibers per block and
 * `smem_bytes` of shared memory; `body(t, p)` is thread t of program p. */
template <class F>
void run(const trt::Grid& g, int64_t pb, int64_t pe, int threads, int64_t smem_bytes, F body) {
  (void)g;
  constexpr size_t kStack = 256 * 1024;
  const auto n = static_cast<size_t>(threads);
  const size_t warps = (n + 31) / 32;
  Launch l;
  l.threads = threads;
  l.warp_gen.assign(warps, 0);
  l.warp_count.assign(warps, 0);
  l.xchg.assign(warps * 256, 0);
  l.fiber.resize(n);
  l.stacks.resize(n);
  l.open.resize(n);
  l.wait.resize(n);
  l.wg_open.resize(n);
  l.wg_wait.resize(n);
  // (1024-byte aligned, as kernels using wgmma's swizzled tiles align their dynamic shared memory)
  std::vector<unsigned char> smem(static_cast<size_t>(smem_bytes) + 1024);
  l.smem = smem.data() + (1024 - reinterpret_cast<uintptr_t>(smem.data()) % 1024) % 1024;
  Launch* const saved = t_launch;
  const int saved_tid = t_tid;
  t_launch = &l;
  for (int64_t p = pb; p < pe; ++p) {
    std::memset(l.smem, 0xa5, static_cast<size_t>(smem_bytes));  // poison
    l.done.assign(n, 0);
    FiberStart<F> start{&body, p};
    const auto at = reinterpret_cast<uintptr_t>(&start);
    for (size_t t = 0; t < n; ++t) {
      l.open[t].clear();
      l.wait[t].clear();
      l.wg_open[t].clear();
      l.wg_wait[t].clear();
      if (!l.stacks[t]) l.stacks[t].reset(new char[kStack]);
      ucontext_t& c = l.fiber[t];
      getcontext(&c);
      c.uc_stack.ss_sp = l.stacks[t].get();
      c.uc_stack.ss_size = kStack;
      c.uc_link = &l.scheduler;
      // (makecontext passes ints: the start's address in two halves, and the thread)
      makecontext(&c, reinterpret_cast<void (*)()>(&fiber_main<F>), 3,
                  static_cast<unsigned>(at & 0xffffffffu), static_cast<unsigned>(at >> 32),
                  static_cast<int>(t));
    }
    // Round robin: each thread runs until it waits or ends.
    for (size_t alive = n; alive > 0;) {
      alive = 0;
      for (size_t t = 0; t < n; ++t) {
        if (l.done[t]) continue;
        t_tid = static_cast<int>(t);
        threadIdx.x = static_cast<unsigned>(t);
        swapcontext(&l.scheduler, &l.fiber[t]);
        alive += !l.done[t];
      }
    }
  }
  t_launch = saved;
  t_tid = saved_tid;
}

}  // namespace trt_sim

// ---- what generated code and the tile runtime call
// -----------------------------------------------

inline void __syncthreads() {
  trt_sim::block_barrier();
}
inline void __threadfence() {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
template <class T>
T __shfl_xor_sync(unsigned, T v, int m) {
  return trt_sim::shfl_xor(v, m);
}
template <class T>
T atomicCAS(T* p, T expected, T desired) {
  __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return expected;  // the old value, whether or not it was replaced
}
template <class T>
T atomicAdd(T* p, T v) {
  return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
inline size_t __cvta_generic_to_shared(const void* p) {
  return static_cast<size_t>(static_cast<const unsigned char*>(p) - trt_sim::shared_memory());
}

#include "tessera/trt/cuda.h"
