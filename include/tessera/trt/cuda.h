/** \file
 * The CUDA tile runtime (`trt`): what generated CUDA kernels call beyond the portable part in
 * `trt/scalar.h` (which they share with the CPU, so elementwise math agrees bit for bit). Compiled
 * by NVRTC with no other header (no libcu++, no cuda_fp16.h: DESIGN D3). Primitives only: the
 * compiler computes every layout and index (DESIGN D4); here are warp shuffles, block barriers
 * and atomics with tessera's semantics.
 */
#pragma once

#include "tessera/trt/scalar.h"

namespace trt {

// Tensor-core code paths: on sm_80 and later, and in the host simulator (trt/cuda_sim.h), which
// computes the warp-collective instructions from their definitions.
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800) || defined(TRT_SIM)
#define TRT_SM80 1
#else
#define TRT_SM80 0
#endif
// Hopper's warpgroup instructions (wgmma): sm_90a only (the emitter compiles a kernel that uses
// them for sm_90a), and the simulator.
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)) || \
    defined(TRT_SIM)
#define TRT_SM90A 1
#else
#define TRT_SM90A 0
#endif

/** `N` consecutive values of `T` as one aligned access: the generated code loads and stores runs
 * of a tile's elements through it (one LDG/STG of up to 16 bytes). */
template <class T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

/** The bits of `f` as a `To` of the same size. */
template <class To, class From>
TRT_INLINE To bit_copy(From f) {
  union {
    From f;
    To t;
  } u;
  u.f = f;
  return u.t;
}

// ---- the checked mode (TESSERA_DEBUG=1): the calls of trt/cpu.h, recorded in a GpuDebug -------

TRT_INLINE void dbg_record(GpuDebug* d, int kind, int site, int param, int32_t pid0, int32_t pid1,
                           int32_t pid2, int64_t lane, int64_t value) {
  const unsigned long long i = atomicAdd(&d->count[kind], 1ull);
  if (i >= (unsigned long long)GpuDebug::kRecords) return;
  GpuCheckRecord& r = d->rec[kind][i];
  r.site = site;
  r.param = param;
  r.pid0 = pid0;
  r.pid1 = pid1;
  r.pid2 = pid2;
  r.lane = lane;
  r.value = value;
}
/** An int32 add (kind 0), subtract (1) or multiply (2): the wrapped result, recorded when the
 * exact one does not fit. */
TRT_INLINE int32_t dbg_arith32(GpuDebug* d, int site, int kind, int32_t a, int32_t b, int32_t pid0,
                               int32_t pid1, int32_t pid2, int64_t lane) {
  const int64_t x = a, y = b;
  const int64_t r = kind == 0 ? x + y : kind == 1 ? x - y : x * y;
  if (r != (int64_t)(int32_t)r) dbg_record(d, kCheckOverflow, site, -1, pid0, pid1, pid2, lane, r);
  return (int32_t)(uint32_t)(uint64_t)r;
}
/** Whether [p, p + size) lies in one of the parameters in `params`; otherwise records it
 * (against the first of them) and returns false. */
TRT_INLINE bool dbg_ok(GpuDebug* d, int site, uint64_t params, const void* p, uint64_t size,
                       int32_t pid0, int32_t pid1, int32_t pid2, int64_t lane) {
  const uint64_t a = (uint64_t)(uintptr_t)p;
  int first = -1;
  for (int i = 0; i < 64; ++i) {
    if (!((params >> i) & 1u)) continue;
    if (first < 0) first = i;
    if (d->lo[i] <= a && a + size <= d->hi[i]) return true;
  }
  dbg_record(d, kCheckOutOfBounds, site, first, pid0, pid1, pid2, lane, (int64_t)a);
  return false;
}
TRT_INLINE void dbg_assert(GpuDebug* d, int site, int hint, int32_t pid0, int32_t pid1,
                           int32_t pid2, int64_t lane) {
  dbg_record(d, hint ? kCheckHint : kCheckAssert, site, -1, pid0, pid1, pid2, lane, 0);
}

// ---- warp shuffles (any 4- or 8-byte register value; bool through int) -------------------------

TRT_INLINE float shfl_xor(float v, int m) {
  return __shfl_xor_sync(0xffffffffu, v, m);
}
TRT_INLINE double shfl_xor(double v, int m) {
  return __shfl_xor_sync(0xffffffffu, v, m);
}
TRT_INLINE int32_t shfl_xor(int32_t v, int m) {
  return __shfl_xor_sync(0xffffffffu, v, m);
}
TRT_INLINE uint32_t shfl_xor(uint32_t v, int m) {
  return __shfl_xor_sync(0xffffffffu, v, m);
}
TRT_INLINE int64_t shfl_xor(int64_t v, int m) {
  return __shfl_xor_sync(0xffffffffu, (long long)v, m);
}
TRT_INLINE uint64_t shfl_xor(uint64_t v, int m) {
  return __shfl_xor_sync(0xffffffffu, (unsigned long long)v, m);
}
TRT_INLINE int8_t shfl_xor(int8_t v, int m) {
  return (int8_t)__shfl_xor_sync(0xffffffffu, (int)v, m);
}
TRT_INLINE uint8_t shfl_xor(uint8_t v, int m) {
  return (uint8_t)__shfl_xor_sync(0xffffffffu, (unsigned)v, m);
}
TRT_INLINE int16_t shfl_xor(int16_t v, int m) {
  return (int16_t)__shfl_xor_sync(0xffffffffu, (int)v, m);
}
TRT_INLINE uint16_t shfl_xor(uint16_t v, int m) {
  return (uint16_t)__shfl_xor_sync(0xffffffffu, (unsigned)v, m);
}
TRT_INLINE bool shfl_xor(bool v, int m) {
  return __shfl_xor_sync(0xffffffffu, (int)v, m) != 0;
}

// ---- atomics ------------------------------------------------------------------------------------
// kind: 0 add, 1 max, 2 min, 3 and, 4 or, 5 xor, 6 xchg (ir::AtomicKind); order: 0 relaxed,
// 1 acquire, 2 release, 3 acq_rel (ir::MemOrder), at device scope, by fences around a relaxed
// read-modify-write (the PTX memory model's mapping). Every update is a compare-and-swap loop on
// the element's bits with the same rules as the CPU runtime (floats: max/min as tl.maximum /
// tl.minimum, a NaN operand loses; narrow floats rounded to the storage type).

TRT_INLINE void fence_before(int o) {
  if (o == 2 || o == 3) __threadfence();
}
TRT_INLINE void fence_after(int o) {
  if (o == 1 || o == 3) __threadfence();
}

/** Compare-and-swap on 2, 4 or 8 bytes; 1-byte values swap within their aligned 32-bit word. */
TRT_INLINE uint32_t cas_raw(uint32_t* p, uint32_t cmp, uint32_t val) {
  return atomicCAS((unsigned*)p, cmp, val);
}
TRT_INLINE uint64_t cas_raw(uint64_t* p, uint64_t cmp, uint64_t val) {
  return atomicCAS((unsigned long long*)p, (unsigned long long)cmp, (unsigned long long)val);
}
TRT_INLINE uint16_t cas_raw(uint16_t* p, uint16_t cmp, uint16_t val) {
  return atomicCAS((unsigned short*)p, (unsigned short)cmp, (unsigned short)val);
}
TRT_INLINE uint8_t cas_raw(uint8_t* p, uint8_t cmp, uint8_t val) {
  uint32_t* word = (uint32_t*)((uintptr_t)p & ~(uintptr_t)3);
  const uint32_t shift = (uint32_t)((uintptr_t)p & 3) * 8;
  uint32_t old = *(volatile uint32_t*)word;
  for (;;) {
    const uint8_t cur = (uint8_t)(old >> shift);
    if (cur != cmp) return cur;
    const uint32_t next = (old & ~(0xffu << shift)) | ((uint32_t)val << shift);
    const uint32_t seen = atomicCAS((unsigned*)word, old, next);
    if (seen == old) return cur;
    old = seen;
  }
}

template <int N>
struct bits_of;
template <>
struct bits_of<1> {
  typedef uint8_t type;
};
template <>
struct bits_of<2> {
  typedef uint16_t type;
};
template <>
struct bits_of<4> {
  typedef uint32_t type;
};
template <>
struct bits_of<8> {
  typedef uint64_t type;
};

/** Compare-and-swap on the bits: stores `val` if `*p` equals `cmp`; returns the old bits. */
template <class S>
TRT_INLINE S atomic_cas_bits(S* p, S cmp, S val, int o) {
  typedef typename bits_of<sizeof(S)>::type B;
  fence_before(o);
  const B r = cas_raw((B*)p, bit_copy<B>(cmp), bit_copy<B>(val));
  fence_after(o);
  return bit_copy<S>(r);
}

template <class T>
TRT_INLINE T rmw_int(int kind, T old, T v) {
  switch (kind) {
    case 0:
      return (T)(old + v);
    case 1:
      return v > old ? v : old;
    case 2:
      return v < old ? v : old;
    case 3:
      return (T)(old & v);
    case 4:
      return (T)(old | v);
    case 5:
      return (T)(old ^ v);
    default:
      return v;
  }
}

/** A read-modify-write by compare-and-swap on storage S holding register values R. */
template <class S, class R, class ToR, class ToS, class Update>
TRT_INLINE R atomic_cas_loop(S* p, R v, int o, ToR to_r, ToS to_s, Update update) {
  typedef typename bits_of<sizeof(S)>::type B;
  fence_before(o);
  B old = *(volatile B*)p;
  for (;;) {
    const R ro = to_r(bit_copy<S>(old));
    const S ns = to_s(update(ro, v));
    const B seen = cas_raw((B*)p, old, bit_copy<B>(ns));
    if (seen == old) {
      fence_after(o);
      return ro;
    }
    old = seen;
  }
}

template <class T>
TRT_INLINE T atomic_int(int kind, T* p, T v, int o) {
  return atomic_cas_loop(
      p, v, o, [](T b) { return b; }, [](T b) { return b; },
      [kind](T a, T b) { return rmw_int(kind, a, b); });
}
TRT_INLINE float atomic_f32(int kind, float* p, float v, int o) {
  return atomic_cas_loop(
      p, v, o, [](float b) { return b; }, [](float b) { return b; },
      [kind](float a, float b) { return rmw_value(kind, a, b); });
}
TRT_INLINE double atomic_f64(int kind, double* p, double v, int o) {
  return atomic_cas_loop(
      p, v, o, [](double b) { return b; }, [](double b) { return b; },
      [kind](double a, double b) { return rmw_value(kind, a, b); });
}
/** float16 (bf16 = false) or bfloat16 storage; the update is rounded to the storage type. */
TRT_INLINE float atomic_f16(int kind, uint16_t* p, float v, int o, bool bf16) {
  auto update = [kind](float a, float b) { return rmw_value(kind, a, b); };
  if (bf16) {
    return atomic_cas_loop(
        p, v, o, [](uint16_t b) { return bf16_to_float(b); },
        [](float f) { return float_to_bf16(f); }, update);
  }
  return atomic_cas_loop(
      p, v, o, [](uint16_t b) { return half_to_float(b); },
      [](float f) { return float_to_half(f); }, update);
}

// ---- tensor cores ------------------------------------------------------------------------------

/** Two 16-bit floats (float16, or bfloat16 when `BF16`) of values `lo`, `hi` (exactly
 * representable: they were loaded from that type) as one register of an mma fragment, `lo` in the
 * low half. */
template <bool BF16>
TRT_INLINE uint32_t mma_pack(float lo, float hi) {
  if (BF16) return (bit_copy<uint32_t>(lo) >> 16) | (bit_copy<uint32_t>(hi) & 0xffff0000u);
  return uint32_t(float_to_half(lo)) | (uint32_t(float_to_half(hi)) << 16);
}

/** One `mma.sync.m16n8k16` with float32 accumulation: d (4 floats) += a (4 registers) b (2), the
 * operands float16, or bfloat16 when `BF16`, in the PTX ISA's m16n8k16 fragment layouts. */
template <bool BF16>
TRT_INLINE void mma_16816(float* d, const uint32_t* a, const uint32_t* b) {
#if defined(TRT_SIM)
  trt_sim::mma_16816<BF16>(d, a, b);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if (BF16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
#else
  (void)d, (void)a, (void)b;
#endif
}

/**
 * c = a @ b + c on tensor cores, for the whole block: `a` (M x K), `b` (K x N) and `c` (M x N,
 * float32) row-major in shared memory, the inputs float16 or bfloat16 values held as floats. Each
 * warp takes 16 x 8 tiles of c in turn and runs `mma.sync.m16n8k16` over K (PTX ISA, the
 * m16n8k16 fragment layouts: lane = 4 * group + t holds a[group (+8)][2t (+1) (+8)],
 * b[2t (+1) (+8)][group] and c[group (+8)][2t (+1)]). The products are exact and the sums are in
 * float32 in the tensor core's order, not one FMA per term in order (the CUDA-core path's).
 * Every thread of the block calls it; the caller synchronizes before and after. (The path for an
 * accumulator that does not live in registers: mma_tile below is the fast one.)
 */
template <int M, int N, int K, bool BF16>
TRT_INLINE void mma_dot(const float* a, const float* b, float* c, int tid, int threads) {
  static_assert(M % 16 == 0 && N % 8 == 0 && K % 16 == 0, "mma_dot tiles are 16 x 8 x 16");
  const int warp = tid >> 5, lane = tid & 31, warps = threads >> 5;
  const int g = lane >> 2, t = lane & 3;
  for (int tile = warp; tile < (M / 16) * (N / 8); tile += warps) {
    const int m0 = tile / (N / 8) * 16, n0 = tile % (N / 8) * 8;
    float* c0 = c + (m0 + g) * N + n0 + 2 * t;
    float* c1 = c0 + 8 * N;
    float d[4] = {c0[0], c0[1], c1[0], c1[1]};
#pragma unroll 4
    for (int k0 = 0; k0 < K; k0 += 16) {
      const float* ar0 = a + (m0 + g) * K + k0 + 2 * t;
      const float* ar1 = ar0 + 8 * K;
      const float* bc = b + (k0 + 2 * t) * N + n0 + g;
      const uint32_t af[4] = {mma_pack<BF16>(ar0[0], ar0[1]), mma_pack<BF16>(ar1[0], ar1[1]),
                              mma_pack<BF16>(ar0[8], ar0[9]), mma_pack<BF16>(ar1[8], ar1[9])};
      const uint32_t bf[2] = {mma_pack<BF16>(bc[0], bc[N]), mma_pack<BF16>(bc[8 * N], bc[9 * N])};
#if TRT_SM80
      mma_16816<BF16>(d, af, bf);
#else
      (void)af, (void)bf;
      for (int k = k0; k < k0 + 16; ++k) {  // before sm_80: the same tile on CUDA cores
        d[0] = fma(a[(m0 + g) * K + k], b[k * N + n0 + 2 * t], d[0]);
        d[1] = fma(a[(m0 + g) * K + k], b[k * N + n0 + 2 * t + 1], d[1]);
        d[2] = fma(a[(m0 + g + 8) * K + k], b[k * N + n0 + 2 * t], d[2]);
        d[3] = fma(a[(m0 + g + 8) * K + k], b[k * N + n0 + 2 * t + 1], d[3]);
      }
#endif
    }
    c0[0] = d[0];
    c0[1] = d[1];
    c1[0] = d[2];
    c1[1] = d[3];
  }
}

/** The shared-memory address of `p` (a pointer into shared memory) as ldmatrix takes it. */
TRT_INLINE uint32_t shared_address(const void* p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}

/** cp.async: `BYTES` (4, 8 or 16) from global memory to shared memory without passing through
 * registers, completed by cp_async_wait (and visible to other threads after a barrier). */
template <int BYTES>
TRT_INLINE void cp_async(void* dst, const void* src) {
#if defined(TRT_SIM)
  trt_sim::cp_async(dst, src, BYTES);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if (BYTES == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(shared_address(dst)), "l"(src)
                 : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(shared_address(dst)), "l"(src),
                 "n"(BYTES)
                 : "memory");
  }
#else
  for (int i = 0; i < BYTES / 4; ++i) ((uint32_t*)dst)[i] = ((const uint32_t*)src)[i];
#endif
}
/** Closes this thread's group of cp.async copies issued since the last commit. */
TRT_INLINE void cp_async_commit() {
#if defined(TRT_SIM)
  trt_sim::cp_async_commit();
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
/** Waits until at most `N` of this thread's committed groups are still in flight. */
template <int N>
TRT_INLINE void cp_async_wait() {
#if defined(TRT_SIM)
  trt_sim::cp_async_wait(N);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

/** ldmatrix: four 8 x 8 tiles of 16-bit values (lane l gives the address of row l % 8 of tile
 * l / 8) as mma fragment registers r[q] (tile q), transposed when `TRANS`. */
template <bool TRANS>
TRT_INLINE void ldmatrix_x4(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3,
                            const uint16_t* p) {
#if defined(TRT_SIM)
  uint32_t r[4];
  trt_sim::ldmatrix<TRANS>(r, 4, p);
  r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3];
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
  if (TRANS) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(shared_address(p)));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(shared_address(p)));
  }
#else
  (void)p;
  r0 = r1 = r2 = r3 = 0;
#endif
}
/** Two 8 x 8 tiles (lanes 0-15 give the row addresses), transposed when `TRANS`. */
template <bool TRANS>
TRT_INLINE void ldmatrix_x2(uint32_t& r0, uint32_t& r1, const uint16_t* p) {
#if defined(TRT_SIM)
  uint32_t r[2];
  trt_sim::ldmatrix<TRANS>(r, 2, p);
  r0 = r[0], r1 = r[1];
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
  if (TRANS) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
                 : "=r"(r0), "=r"(r1)
                 : "r"(shared_address(p)));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
                 : "=r"(r0), "=r"(r1)
                 : "r"(shared_address(p)));
  }
#else
  (void)p;
  r0 = r1 = 0;
#endif
}

/**
 * c += a @ b on tensor cores with the accumulator in registers: the block's warps form a WM x WN
 * grid over c (M x N, float32), each warp a (M / WM) x (N / WN) rectangle of 16 x 8 tiles, TM x TN
 * of them; `c` is this thread's TM * TN * 4 accumulators, tile (i, j)'s at 4 (i * TN + j) in the
 * m16n8k16 order (row g, columns 2t and 2t + 1; then row g + 8), which is the emitter's Mma
 * layout of c's elements. `a` (M x K) and `b` (K x N) are 16-bit values (float16, or bfloat16 when
 * `BF16`) in shared memory, row-major with rows of PA and PB elements (padded so that ldmatrix's
 * eight rows fall in distinct banks); with `KB`, b is stored K-major instead: column n of b is
 * row n of the tile, K elements in a row of PB (x @ w.T's w as it lies in memory). Per 16 of K
 * each warp loads its A fragments (ldmatrix.x4) and B fragments (ldmatrix.x4.trans, or without
 * .trans from a K-major b; two tiles of N at a time) once and runs TM x TN mma.sync. The caller
 * synchronizes before (the operands written) and after (before they are overwritten).
 */
template <int M, int N, int K, int WM, int WN, bool BF16, int PA, int PB, bool KB = false>
TRT_INLINE void mma_tile(const uint16_t* a, const uint16_t* b, float* c, int tid) {
  constexpr int TM = M / WM / 16, TN = N / WN / 8;
  static_assert(TM >= 1 && TN >= 1 && M == WM * TM * 16 && N == WN * TN * 8 && K % 16 == 0,
                "mma_tile: each warp takes whole 16 x 8 tiles, K by 16");
  static_assert(PA % 8 == 0 && PB % 8 == 0, "mma_tile: rows of 16 bytes for ldmatrix");
  const int warp = tid >> 5, lane = tid & 31;
  const int m0 = warp / WN * (M / WM), n0 = warp % WN * (N / WN);
#if TRT_SM80
#pragma unroll
  for (int k0 = 0; k0 < K; k0 += 16) {
    uint32_t af[TM][4], bf[TN + 1][2];
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      ldmatrix_x4<false>(af[i][0], af[i][1], af[i][2], af[i][3],
                         a + (m0 + i * 16 + (lane & 15)) * PA + k0 + (lane >> 4) * 8);
    }
#pragma unroll
    for (int j = 0; j < TN; j += 2) {
      if (KB) {  // lanes 8q + i: row i of tile q, q = 2 (n half) + (k half)
        const uint16_t* p = b + (n0 + j * 8 + (lane & 7)) * PB + k0 + ((lane >> 3) & 1) * 8;
        if (j + 1 < TN) {
          ldmatrix_x4<false>(bf[j][0], bf[j][1], bf[j + 1][0], bf[j + 1][1],
                             p + (lane >> 4) * 8 * PB);
        } else {
          ldmatrix_x2<false>(bf[j][0], bf[j][1], p);
        }
        continue;
      }
      const uint16_t* p = b + (k0 + (lane & 15)) * PB + n0 + j * 8;
      if (j + 1 < TN) {
        ldmatrix_x4<true>(bf[j][0], bf[j][1], bf[j + 1][0], bf[j + 1][1], p + (lane >> 4) * 8);
      } else {
        ldmatrix_x2<true>(bf[j][0], bf[j][1], p);
      }
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
      for (int j = 0; j < TN; ++j) mma_16816<BF16>(c + (i * TN + j) * 4, af[i], bf[j]);
    }
  }
#else  // before sm_80: the same elements on CUDA cores, one FMA per term in order
  const int g = lane >> 2, t = lane & 3;
  for (int i = 0; i < TM; ++i) {
    for (int j = 0; j < TN; ++j) {
      for (int e = 0; e < 4; ++e) {
        const int row = m0 + i * 16 + g + (e >> 1) * 8, col = n0 + j * 8 + 2 * t + (e & 1);
        float acc = c[(i * TN + j) * 4 + e];
        for (int k = 0; k < K; ++k) {
          const uint16_t x = a[row * PA + k], y = KB ? b[col * PB + k] : b[k * PB + col];
          acc = BF16 ? fma(bf16_to_float(x), bf16_to_float(y), acc)
                     : fma(half_to_float(x), half_to_float(y), acc);
        }
        c[(i * TN + j) * 4 + e] = acc;
      }
    }
  }
#endif
}

/** One `mma.sync.m16n8k8` with tf32 inputs and float32 accumulation: d (4 floats) += a (4
 * registers of tf32 bits) b (2); PTX's m16n8k8 .tf32 layouts: a[i] of lane 4g + t is row
 * g + 8 (i & 1), column t + 4 (i >> 1); b[j] is row t + 4j, column g; d as for m16n8k16. */
TRT_INLINE void mma_1688_tf32(float* d, const uint32_t* a, const uint32_t* b) {
#if defined(TRT_SIM)
  trt_sim::mma_1688_tf32(d, a, b);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  (void)d, (void)a, (void)b;
#endif
}

/**
 * mma_tile for float32 operands at tf32 precision (Triton's default for a float32 dot): the same
 * warp grid and accumulator order; `a` and `b` are float32 values in shared memory (rows of PA
 * and PB: K + 4 and N + 8 put a fragment's 32 lanes in distinct banks), rounded to tf32 by
 * trt::to_tf32 (the CPU backend's rounding) as each fragment is read, then `mma.sync.m16n8k8`
 * per 8 of K. Products of tf32 values are exact in float32; the sums are in the tensor core's
 * order.
 */
template <int M, int N, int K, int WM, int WN, int PA, int PB>
TRT_INLINE void mma_tile_tf32(const float* a, const float* b, float* c, int tid) {
  constexpr int TM = M / WM / 16, TN = N / WN / 8;
  static_assert(TM >= 1 && TN >= 1 && M == WM * TM * 16 && N == WN * TN * 8 && K % 8 == 0,
                "mma_tile_tf32: each warp takes whole 16 x 8 tiles, K by 8");
  const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int m0 = warp / WN * (M / WM), n0 = warp % WN * (N / WN);
#if TRT_SM80
#pragma unroll
  for (int k0 = 0; k0 < K; k0 += 8) {
    uint32_t af[TM][4], bf[TN][2];
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const float* p = a + (m0 + i * 16 + g) * PA + k0 + t;
      af[i][0] = bit_copy<uint32_t>(to_tf32(p[0]));
      af[i][1] = bit_copy<uint32_t>(to_tf32(p[8 * PA]));
      af[i][2] = bit_copy<uint32_t>(to_tf32(p[4]));
      af[i][3] = bit_copy<uint32_t>(to_tf32(p[8 * PA + 4]));
    }
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const float* q = b + (k0 + t) * PB + n0 + j * 8 + g;
      bf[j][0] = bit_copy<uint32_t>(to_tf32(q[0]));
      bf[j][1] = bit_copy<uint32_t>(to_tf32(q[4 * PB]));
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
      for (int j = 0; j < TN; ++j) mma_1688_tf32(c + (i * TN + j) * 4, af[i], bf[j]);
    }
  }
#else  // before sm_80: the same elements on CUDA cores, one FMA per term in order
  for (int i = 0; i < TM; ++i) {
    for (int j = 0; j < TN; ++j) {
      for (int e = 0; e < 4; ++e) {
        const int row = m0 + i * 16 + g + (e >> 1) * 8, col = n0 + j * 8 + 2 * t + (e & 1);
        float acc = c[(i * TN + j) * 4 + e];
        for (int k = 0; k < K; ++k)
          acc = fma(to_tf32(a[row * PA + k]), to_tf32(b[k * PB + col]), acc);
        c[(i * TN + j) * 4 + e] = acc;
      }
    }
  }
#endif
}

// ---- Hopper: wgmma with both operands in shared memory ---------------------------------------
//
// A warpgroup (four consecutive warps, the first's index divisible by 4) computes a 64 x N tile
// per `wgmma.mma_async.m64nNk16` from operands in shared memory that it finds through 64-bit
// descriptors (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate": the matrix
// descriptor and the canonical layouts). Both operand tiles are stored in "swizzle rows" of S
// bytes (S = 128, 64 or 32, the widest that divides a tile row's bytes): a tile row wider than S
// is cut into slabs of S bytes, each slab holding every row, and within each aligned group of
// 1024 bytes the 16-byte chunk c of byte offset o moves to c ^ ((o >> 7) & (S / 16 - 1)) (the
// swizzle the descriptor's mode names; tiles start 1024-byte aligned). A (M x K) is K-major, its
// 8-row groups SBO = 8 S apart; B (K x N) is N-major (wgmma's transposed B), 8 rows of K SBO =
// 8 S apart, slabs of N LBO = K S apart; or, for a B whose K is contiguous in memory, K-major as
// A is (wgmma's own B: 8-column groups SBO = 8 S apart, slabs of K LBO = N S apart). The
// accumulator of wgmma is, per warp of the warpgroup, 16 rows in mma.sync's m16n8 C layout across
// N: the emitter's Mma layout with the warps in one column (each warp TM row tiles of 16, TN
// column tiles of 8), once A's rows are stored in the order wgmma_a_index gives so that each
// wgmma's 64 rows are the warpgroup's.

/** Element offset of (r, k) in a wgmma A tile (M x K 16-bit values, K-major, swizzle rows of S
 * bytes) for a block of WARPS warps whose warp w holds rows [w TM 16, (w + 1) TM 16): row r of
 * warp 4 g + q, row tile i, is stored at row (g TM + i) 64 + 16 q + r % 16. */
template <int M, int TM, int S>
TRT_INLINE int wgmma_a_index(int r, int k) {
  constexpr int E = S / 2;
  const int w = r / (TM * 16), i = r / 16 % TM;
  const int row = ((w >> 2) * TM + i) * 64 + (w & 3) * 16 + (r & 15);
  const int e = k / E * (M * E) + row * E + k % E;
  return e ^ (((e >> 6) & (S / 16 - 1)) << 3);
}
/** Element offset of (k, n) in a wgmma B tile (K x N 16-bit values, N-major, swizzle rows of S
 * bytes). */
template <int K, int S>
TRT_INLINE int wgmma_b_index(int k, int n) {
  constexpr int E = S / 2;
  const int e = n / E * (K * E) + k * E + n % E;
  return e ^ (((e >> 6) & (S / 16 - 1)) << 3);
}

/** Element offset of (k, n) in a K-major wgmma B tile (K x N 16-bit values stored as wgmma's
 * non-transposed B: column n of B is row n of the tile, K elements long in swizzle rows of S
 * bytes; x @ w.T's w as it lies in memory). */
template <int N, int S>
TRT_INLINE int wgmma_bk_index(int k, int n) {
  constexpr int E = S / 2;
  const int e = k / E * (N * E) + n * E + k % E;
  return e ^ (((e >> 6) & (S / 16 - 1)) << 3);
}

/** A shared-memory matrix descriptor: start address, leading and stride byte offsets, swizzle. */
TRT_INLINE uint64_t wgmma_desc(const void* p, uint32_t lbo, uint32_t sbo, int swizzle) {
  const uint64_t mode = swizzle == 128 ? 1 : swizzle == 64 ? 2 : swizzle == 32 ? 3 : 0;
  return (uint64_t)((shared_address(p) & 0x3ffff) >> 4) | ((uint64_t)((lbo >> 4) & 0x3fff) << 16) |
         ((uint64_t)((sbo >> 4) & 0x3fff) << 32) | (mode << 62);
}

/** Makes this thread's shared-memory writes (stores, completed cp.async copies) visible to the
 * async proxy that wgmma reads through. */
TRT_INLINE void fence_async_shared() {
#if !defined(TRT_SIM) && TRT_SM90A
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}
TRT_INLINE void wgmma_fence() {
#if !defined(TRT_SIM) && TRT_SM90A
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}
TRT_INLINE void wgmma_commit() {
#if defined(TRT_SIM)
  trt_sim::wgmma_commit();
#elif TRT_SM90A
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}
template <int N>
TRT_INLINE void wgmma_wait() {
#if defined(TRT_SIM)
  trt_sim::wgmma_wait(N);
#elif TRT_SM90A
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
#endif
}

/** Pins `r` (N registers a wgmma in flight updated) after the wait that completed it: each is an
 * input and output of an empty volatile asm, so no read of them moves above the wait (CUTLASS's
 * warpgroup_fence_operand). */
template <int N>
TRT_INLINE void wgmma_fence_operands(float* r) {
#if !defined(TRT_SIM) && TRT_SM90A
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
#else
  (void)r;
#endif
}

/** One `wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}` with A K-major and B N-major (or
 * K-major when `KB`) from descriptors: d (N / 2 floats of this thread) += A B. The kernel source
 * defines the specializations it uses (the instruction's operand list has N / 2 registers). */
template <int N, bool BF16, bool KB>
TRT_INLINE void wgmma_op(float* d, uint64_t a, uint64_t b);

/** B's descriptor for wgmma_issue(_rs): a K x N tile N-major (or K-major when `KB`) in swizzle
 * rows of SB bytes. */
template <int N, int K, int SB, bool KB>
TRT_INLINE uint64_t wgmma_b_desc(const uint16_t* b) {
  return KB ? wgmma_desc(b, N * SB, 8 * SB, SB) : wgmma_desc(b, K * SB, 8 * SB, SB);
}
/** The 16-byte offset, from B's descriptor, of the product at k0 (of 16) and columns n0. */
template <int N, int K, int SB, bool KB>
TRT_INLINE uint64_t wgmma_b_offset(int k0, int n0) {
  constexpr int EB = SB / 2;
  return (uint64_t)((KB ? k0 / EB * (N * EB) + n0 * EB + k0 % EB : n0 / EB * (K * EB) + k0 * EB) /
                    8);
}

/**
 * Issues c += a @ b on Hopper's tensor cores as one committed group, the accumulator in registers
 * in the Mma layout with the block's WARPS warps in one column (warp w: rows [w TM 16,
 * (w + 1) TM 16), all N columns; `c` is this thread's TM * N / 2 accumulators, tile (i, j) at
 * 4 (i N / 8 + j)). `a` is an M x K tile stored by wgmma_a_index, `b` a K x N tile stored by
 * wgmma_b_index (or wgmma_bk_index when `KB`), 16-bit values (float16, or bfloat16 when `BF16`),
 * swizzle rows of SA and SB bytes. Per 16 of K, warpgroup g issues one wgmma per row tile i (rows
 * [(g TM + i) 64, + 64) of the stored A) and per 256 columns. The operands must be visible to the
 * async proxy (fenced, then a barrier); `c` and the operands may not be touched until a wgmma_wait
 * covers the group.
 */
template <int M, int N, int K, int WARPS, bool BF16, int SA, int SB, bool KB>
TRT_INLINE void wgmma_issue(const uint16_t* a, const uint16_t* b, float* c, int tid) {
  constexpr int TM = M / (16 * WARPS), NI = N <= 256 ? N : 256;
  constexpr int EA = SA / 2, EB = SB / 2;
  static_assert(WARPS % 4 == 0 && TM >= 1 && M == TM * 16 * WARPS && N % 8 == 0 && N % NI == 0 &&
                    K % 16 == 0 && K % EA == 0 && (KB ? K : N) % EB == 0 && EA % 16 == 0 &&
                    (!KB || EB % 16 == 0),
                "wgmma_tile: warpgroups of 64 rows, N by 8 up to 256 per instruction, K by 16");
#if TRT_SM90A
  const int g = tid >> 7;
  // One descriptor per operand; each product's is that plus its constant 16-byte offset (the
  // start field's 14 bits cannot carry: shared memory is below 256 KB).
  const uint64_t da0 = wgmma_desc(a + g * TM * 64 * EA, M * SA, 8 * SA, SA);
  const uint64_t db0 = wgmma_b_desc<N, K, SB, KB>(b);
  wgmma_fence();
#pragma unroll
  for (int k0 = 0; k0 < K; k0 += 16) {
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const uint64_t da = da0 + (uint64_t)((k0 / EA * (M * EA) + i * 64 * EA + k0 % EA) / 8);
#pragma unroll
      for (int n0 = 0; n0 < N; n0 += NI)
        wgmma_op<NI, BF16, KB>(c + (i * (N / 8) + n0 / 8) * 4, da,
                               db0 + wgmma_b_offset<N, K, SB, KB>(k0, n0));
    }
  }
  wgmma_commit();
#else
  static_assert(M < 0, "wgmma_issue needs sm_90a");
  (void)a, (void)b, (void)c, (void)tid;
#endif
}

/** One `wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}` with A from registers: `a` is this
 * thread's four 32-bit registers of A's 64 x 16 block (mma.sync's m16n8k16 A fragment for its
 * warp's 16 rows: two 16-bit values each, row g, g + 8, g, g + 8 and columns 2t, 2t, 8 + 2t,
 * 8 + 2t for lane 4g + t), B from its descriptor (N-major, or K-major when `KB`). The kernel
 * source defines the specializations it uses. */
template <int N, bool BF16, bool KB>
TRT_INLINE void wgmma_op_rs(float* d, const uint32_t* a, uint64_t b);

/**
 * wgmma_issue with A in registers: `a` is this thread's A (M x K) in the Mma layout of the
 * accumulator's warps (warp w: rows [w TM 16, (w + 1) TM 16)), its 16-bit values packed two to a
 * register: word 2 (i K / 8 + j) + h holds row tile i, column tile j, row half h (the columns 2t
 * and 2t + 1 of lane 4g + t) -- the layout a dot's accumulator of the same rows has, so that a
 * tile computed from one (attention's p) is A without a trip through shared memory. Per 16 of K
 * and row tile i, words 2 (i K / 8 + k0 / 8) .. + 3 are the instruction's A fragment. B and the
 * rest as wgmma_issue.
 */
template <int M, int N, int K, int WARPS, bool BF16, int SB, bool KB = false>
TRT_INLINE void wgmma_issue_rs(const uint32_t* a, const uint16_t* b, float* c, int tid) {
  constexpr int TM = M / (16 * WARPS), NI = N <= 256 ? N : 256;
  constexpr int EB = SB / 2;
  static_assert(WARPS % 4 == 0 && TM >= 1 && M == TM * 16 * WARPS && N % 8 == 0 && N % NI == 0 &&
                    K % 16 == 0 && (KB ? K : N) % EB == 0 && (!KB || EB % 16 == 0),
                "wgmma_issue_rs: warpgroups of 64 rows, N by 8 up to 256 per instruction, K by 16");
#if TRT_SM90A
  (void)tid;
  const uint64_t db0 = wgmma_b_desc<N, K, SB, KB>(b);
  wgmma_fence();
#pragma unroll
  for (int k0 = 0; k0 < K; k0 += 16) {
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
      for (int n0 = 0; n0 < N; n0 += NI)
        wgmma_op_rs<NI, BF16, KB>(c + (i * (N / 8) + n0 / 8) * 4, a + (i * (K / 8) + k0 / 8) * 2,
                                  db0 + wgmma_b_offset<N, K, SB, KB>(k0, n0));
    }
  }
  wgmma_commit();
#else
  static_assert(M < 0, "wgmma_issue_rs needs sm_90a");
  (void)a, (void)b, (void)c, (void)tid;
#endif
}

/** wgmma_issue for operands just written: fences them, synchronizes the block, issues, and waits
 * for the products (the caller synchronizes before the operands are written again). */
template <int M, int N, int K, int WARPS, bool BF16, int SA, int SB, bool KB = false>
TRT_INLINE void wgmma_tile(const uint16_t* a, const uint16_t* b, float* c, int tid) {
  fence_async_shared();
  __syncthreads();
  wgmma_issue<M, N, K, WARPS, BF16, SA, SB, KB>(a, b, c, tid);
  wgmma_wait<0>();
}

/** wgmma_issue for operands already visible to the async proxy (a pipelined loop's tiles, fenced
 * with the block synchronized after they landed; a loop-invariant tile fenced where it was
 * written): issues and waits for the products. */
template <int M, int N, int K, int WARPS, bool BF16, int SA, int SB, bool KB = false>
TRT_INLINE void wgmma_now(const uint16_t* a, const uint16_t* b, float* c, int tid) {
  wgmma_issue<M, N, K, WARPS, BF16, SA, SB, KB>(a, b, c, tid);
  wgmma_wait<0>();
}
/** wgmma_issue_rs with B visible to the async proxy: issues and waits for the products. */
template <int M, int N, int K, int WARPS, bool BF16, int SB, bool KB = false>
TRT_INLINE void wgmma_now_rs(const uint32_t* a, const uint16_t* b, float* c, int tid) {
  wgmma_issue_rs<M, N, K, WARPS, BF16, SB, KB>(a, b, c, tid);
  wgmma_wait<0>();
}

/** In a pipelined loop (the emitter's for_op): issues this iteration's products and waits only
 * for the previous iteration's, so the tensor cores work while the next tiles are requested; the
 * loop fences and synchronizes before, and waits for all after. */
template <int M, int N, int K, int WARPS, bool BF16, int SA, int SB, bool KB = false>
TRT_INLINE void wgmma_tile_async(const uint16_t* a, const uint16_t* b, float* c, int tid) {
  wgmma_issue<M, N, K, WARPS, BF16, SA, SB, KB>(a, b, c, tid);
  wgmma_wait<1>();
}

}  // namespace trt
