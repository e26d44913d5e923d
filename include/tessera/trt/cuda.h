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

}  // namespace trt
