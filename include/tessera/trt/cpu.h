/** \file
 * The CPU tile runtime (`trt`): what generated CPU kernels call, beyond the portable part in
 * `trt/scalar.h` (math, conversions, argument slots). Every function here is branch-light and
 * vectorizes under `#pragma omp simd` (plain arithmetic, selects, bit casts), so the generated
 * loops stay vector loops without -ffast-math: 16-lane reduction vectors, atomics, the checked
 * mode's reports and the program index.
 */
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tessera/trt/scalar.h"

#if defined(__GNUC__)
#define TRT_EXPORT __attribute__((visibility("default")))
#else
#define TRT_EXPORT
#endif

namespace trt {

/** The entry point every generated kernel exports. */
using KernelFn = void (*)(const Grid* grid, int64_t pid_begin, int64_t pid_end, const Arg* args);

// ---- 16-lane vectors
// -----------------------------------------------------------------------------

/** 16 lanes of T as one GCC/Clang vector value: the accumulator of innermost-axis reductions stays
 * in registers (an array of 16 would go through the stack on every step). */
template <class T>
struct Lanes16 {
  typedef T type __attribute__((vector_size(16 * sizeof(T))));
};
template <class T>
using lanes16 = typename Lanes16<T>::type;

template <class T>
TRT_INLINE lanes16<T> splat16(T x) {
  return lanes16<T>{} + x;
}
template <class T>
TRT_INLINE lanes16<T> load16(const T* p) {
  lanes16<T> v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}

// ---- the dot micro-kernel
// --------------------------------------------------------------------------

#if defined(__AVX512F__)
/** 64-byte vectors and their fused multiply-add (the intrinsic's builtin, without
 * <immintrin.h>: kernels compile in milliseconds), for dot_block on AVX-512. */
template <class T>
struct Wide;
template <>
struct Wide<float> {
  typedef float type __attribute__((vector_size(64)));
  static TRT_INLINE type fma(type a, type b, type c) {
    return __builtin_ia32_vfmaddps512_mask(a, b, c, (unsigned short)-1, 4);
  }
};
template <>
struct Wide<double> {
  typedef double type __attribute__((vector_size(64)));
  static TRT_INLINE type fma(type a, type b, type c) {
    return __builtin_ia32_vfmaddpd512_mask(a, b, c, (unsigned char)-1, 4);
  }
};

/** dot_block with R rows x V vectors of c in zmm registers (the loops fully unrolled, so the
 * arrays of vectors are registers). */
template <class T, int R, int V, int M, int N, int K>
TRT_INLINE void dot_wide(const T* __restrict a, const T* __restrict b, T* __restrict c) {
  using W = typename Wide<T>::type;
  constexpr int L = 64 / sizeof(T);
  for (int i = 0; i < M; i += R) {
    for (int j0 = 0; j0 < N; j0 += V * L) {
      W acc[R][V];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
        for (int v = 0; v < V; ++v) __builtin_memcpy(&acc[r][v], c + (i + r) * N + j0 + v * L, 64);
      }
      for (int k = 0; k < K; ++k) {
        W y[V];
#pragma GCC unroll 2
        for (int v = 0; v < V; ++v) __builtin_memcpy(&y[v], b + k * N + j0 + v * L, 64);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const W x = a[(i + r) * K + k] - W{};  // a splat (x - 0 is x, -0 included)
#pragma GCC unroll 2
          for (int v = 0; v < V; ++v) acc[r][v] = Wide<T>::fma(x, y[v], acc[r][v]);
        }
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
        for (int v = 0; v < V; ++v) __builtin_memcpy(c + (i + r) * N + j0 + v * L, &acc[r][v], 64);
      }
    }
  }
}
#endif

/**
 * `c += a @ b` for row-major tiles held in arrays (a: M x K, b: K x N, c: M x N; M a multiple of
 * 4, N of 16): a 4 x 16 block of c stays in registers across the k loop. Every element of c gets
 * the multiply-adds of k = 0, 1, ... in that order, each fused (the interpreter's and the GPU's
 * rounding); `X3` makes each one a tf32x3 term. A function of its own, not inlined: written into a
 * large kernel, GCC kept the block on the stack and the loop ran at a third of this speed.
 * `Z` (the emitter's choice, TESSERA_CPU_DOT512) on AVX-512: explicit 64-byte vectors. GCC's
 * tuning for Intel's AVX-512 servers vectorizes the plain loop with 32-byte vectors (half of
 * their two 512-bit FMA units), and a 4 x 16 block of floats would be 4 zmm accumulators, too few
 * for the FMA latency; 4 x 32 (or 8 x 16) is 8.
 */
template <class T, int M, int N, int K, bool X3, bool Z = false>
__attribute__((noinline)) void dot_block(const T* __restrict a, const T* __restrict b,
                                         T* __restrict c) {
#if defined(__AVX512F__)
  constexpr int L = 64 / sizeof(T);
  if constexpr (Z && !X3 && N % (2 * L) == 0) {
    return dot_wide<T, 4, 2, M, N, K>(a, b, c);
  } else if constexpr (Z && !X3 && M % 8 == 0 && N % L == 0) {
    return dot_wide<T, 8, 1, M, N, K>(a, b, c);
  }
#endif
  for (int i = 0; i < M; i += 4) {
    for (int j0 = 0; j0 < N; j0 += 16) {
      T acc[4][16];
      for (int r = 0; r < 4; ++r) {
        for (int l = 0; l < 16; ++l) acc[r][l] = c[(i + r) * N + j0 + l];
      }
      for (int k = 0; k < K; ++k) {
        const T x0 = a[(i + 0) * K + k], x1 = a[(i + 1) * K + k];
        const T x2 = a[(i + 2) * K + k], x3 = a[(i + 3) * K + k];
        for (int l = 0; l < 16; ++l) {
          const T y = b[k * N + j0 + l];
          if constexpr (X3) {
            acc[0][l] = fma_tf32x3(x0, y, acc[0][l]);
            acc[1][l] = fma_tf32x3(x1, y, acc[1][l]);
            acc[2][l] = fma_tf32x3(x2, y, acc[2][l]);
            acc[3][l] = fma_tf32x3(x3, y, acc[3][l]);
          } else {
            acc[0][l] = fma(x0, y, acc[0][l]);
            acc[1][l] = fma(x1, y, acc[1][l]);
            acc[2][l] = fma(x2, y, acc[2][l]);
            acc[3][l] = fma(x3, y, acc[3][l]);
          }
        }
      }
      for (int r = 0; r < 4; ++r) {
        for (int l = 0; l < 16; ++l) c[(i + r) * N + j0 + l] = acc[r][l];
      }
    }
  }
}

// ---- atomics
// --------------------------------------------------------------------------------------- kind: 0
// add, 1 max, 2 min, 3 and, 4 or, 5 xor, 6 xchg (ir::AtomicKind); order: 0 relaxed, 1 acquire, 2
// release, 3 acq_rel (ir::MemOrder). Floats update by compare-and-swap loops on their bits; max/min
// follow tl.maximum/minimum (a NaN operand loses).

TRT_INLINE int mem_order(int o) {
  return o == 0   ? __ATOMIC_RELAXED
         : o == 1 ? __ATOMIC_ACQUIRE
         : o == 2 ? __ATOMIC_RELEASE
                  : __ATOMIC_ACQ_REL;
}
TRT_INLINE int fail_order(int o) {
  return (o == 1 || o == 3) ? __ATOMIC_ACQUIRE : __ATOMIC_RELAXED;
}
/** A read-modify-write by compare-and-swap on storage S holding register values R. */
template <class S, class R, class ToR, class ToS>
TRT_INLINE R atomic_cas_loop(S* p, int kind, R v, int o, ToR to_r, ToS to_s) {
  S old = __atomic_load_n(p, __ATOMIC_RELAXED);
  for (;;) {
    const R ro = to_r(old);
    const S ns = to_s(rmw_value(kind, ro, v));
    if (__atomic_compare_exchange_n(p, &old, ns, true, mem_order(o), fail_order(o))) return ro;
  }
}
template <class T>
TRT_INLINE T atomic_int(int kind, T* p, T v, int o) {
  switch (kind) {
    case 0:
      return __atomic_fetch_add(p, v, mem_order(o));
    case 3:
      return __atomic_fetch_and(p, v, mem_order(o));
    case 4:
      return __atomic_fetch_or(p, v, mem_order(o));
    case 5:
      return __atomic_fetch_xor(p, v, mem_order(o));
    case 6:
      return __atomic_exchange_n(p, v, mem_order(o));
    default: {
      T old = __atomic_load_n(p, __ATOMIC_RELAXED);
      for (;;) {
        const T nv = kind == 1 ? (v > old ? v : old) : (v < old ? v : old);
        if (__atomic_compare_exchange_n(p, &old, nv, true, mem_order(o), fail_order(o))) return old;
      }
    }
  }
}
TRT_INLINE float atomic_f32(int kind, float* p, float v, int o) {
  return atomic_cas_loop((uint32_t*)p, kind, v, o, [](uint32_t b) { return u2f(b); },
                         [](float f) { return f2u(f); });
}
TRT_INLINE double atomic_f64(int kind, double* p, double v, int o) {
  return atomic_cas_loop((uint64_t*)p, kind, v, o, [](uint64_t b) { return u2d(b); },
                         [](double d) { return d2u(d); });
}
/** float16 (bf16 = false) or bfloat16 storage; the update is rounded to the storage type. */
TRT_INLINE float atomic_f16(int kind, uint16_t* p, float v, int o, bool bf16) {
  if (bf16) {
    return atomic_cas_loop(
        p, kind, v, o, [](uint16_t b) { return bf16_to_float(b); },
        [](float f) { return float_to_bf16(f); });
  }
  return atomic_cas_loop(
      p, kind, v, o, [](uint16_t b) { return half_to_float(b); },
      [](float f) { return float_to_half(f); });
}
/** Compare-and-swap on the bits: stores `val` if `*p` equals `cmp`; returns the old bits. */
template <class S>
TRT_INLINE S atomic_cas_bits(S* p, S cmp, S val, int o) {
  __atomic_compare_exchange_n(p, &cmp, val, false, mem_order(o), fail_order(o));
  return cmp;
}

// ---- the checked mode (TESSERA_DEBUG) -----------------------------------------------------------
/** Passed to kernels compiled with checks (after the parameters): the bytes each pointer parameter
 * may touch, and the host's reporting functions. */
struct DebugCtx {
  const uintptr_t* lo;
  const uintptr_t* hi;
  void (*report_oob)(void* ctx, int site, int param, uintptr_t addr, int32_t pid0, int32_t pid1,
                     int32_t pid2, int64_t lane);
  void (*report_assert)(void* ctx, int site, int32_t pid0, int32_t pid1, int32_t pid2,
                        int64_t lane);
  void (*report_overflow)(void* ctx, int site, int32_t pid0, int32_t pid1, int32_t pid2,
                          int64_t lane, int64_t exact);
  void* ctx;
};
/** An int32 add (kind 0), subtract (1) or multiply (2) of the checked mode: the wrapped result, as
 * the plain operation gives, with a report when the exact result does not fit (an offset that
 * wrapped: `pid * BLOCK` past 2^31). */
TRT_INLINE int32_t dbg_arith32(const DebugCtx* d, int site, int kind, int32_t a, int32_t b,
                               int32_t pid0, int32_t pid1, int32_t pid2, int64_t lane) {
  const int64_t x = a, y = b;
  const int64_t r = kind == 0 ? x + y : kind == 1 ? x - y : x * y;
  if (r != (int64_t)(int32_t)r) d->report_overflow(d->ctx, site, pid0, pid1, pid2, lane, r);
  return (int32_t)(uint32_t)(uint64_t)r;
}
/** A failed device_assert (or, `hint`, a false tl::multiple_of / max_contiguous) of one lane. */
TRT_INLINE void dbg_assert(const DebugCtx* d, int site, int hint, int32_t pid0, int32_t pid1,
                           int32_t pid2, int64_t lane) {
  (void)hint;  // the site says which (the launch's table)
  d->report_assert(d->ctx, site, pid0, pid1, pid2, lane);
}
/** Whether [p, p + size) lies in the range of one of the parameters in `params` (the ones the
 * pointer may derive from); otherwise reports it (against the first of them) and returns false. */
TRT_INLINE bool dbg_ok(const DebugCtx* d, int site, uint64_t params, const void* p, uint64_t size,
                       int32_t pid0, int32_t pid1, int32_t pid2, int64_t lane) {
  const uintptr_t a = (uintptr_t)p;
  int first = -1;
  for (int i = 0; i < 64; ++i) {
    if (!((params >> i) & 1u)) continue;
    if (first < 0) first = i;
    if (d->lo[i] <= a && a + size <= d->hi[i]) return true;
  }
  d->report_oob(d->ctx, site, first, a, pid0, pid1, pid2, lane);
  return false;
}

// ---- the program index ------------------------------------------------------------------------
/** Splits a linear program index into (x, y, z), x fastest. */
TRT_INLINE void program_coords(const Grid* g, int64_t p, int32_t& x, int32_t& y, int32_t& z) {
  x = (int32_t)(p % g->x);
  const int64_t q = p / g->x;
  y = (int32_t)(q % g->y);
  z = (int32_t)(q / g->y);
}

}  // namespace trt
