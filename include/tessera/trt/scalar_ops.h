/** \file
 * Scalar semantics of tile-IR operations, shared by the compiler (constant folding, the
 * reference interpreter) and the generated CPU code, so the three agree bit for bit.
 * Dependency-free: generated kernels include it.
 *
 * Integer arithmetic wraps (two's complement). Integer division truncates toward zero and the
 * remainder takes the dividend's sign (C and Triton); dividing by zero gives -1 (all bits set, as
 * NVIDIA GPUs do) and the remainder by zero gives the dividend; INT_MIN / -1 gives INT_MIN.
 * Nothing here traps. `maximum`/`minimum` return the other operand when one is NaN (IEEE maxNum,
 * Triton's default).
 */
#pragma once

#if defined(__CUDACC_RTC__)
// NVRTC compiles with our headers only (no system headers): the fixed-width types by hand.
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef unsigned long long uintptr_t;
#else
#include <stdint.h>
#endif

#if defined(__CUDACC__)
#define TRT_HD __host__ __device__ inline
#else
#define TRT_HD inline
#endif

namespace trt {

template <class T>
struct make_unsigned_t_;
template <>
struct make_unsigned_t_<int8_t> {
  using type = uint8_t;
};
template <>
struct make_unsigned_t_<int16_t> {
  using type = uint16_t;
};
template <>
struct make_unsigned_t_<int32_t> {
  using type = uint32_t;
};
template <>
struct make_unsigned_t_<int64_t> {
  using type = uint64_t;
};
template <>
struct make_unsigned_t_<uint8_t> {
  using type = uint8_t;
};
template <>
struct make_unsigned_t_<uint16_t> {
  using type = uint16_t;
};
template <>
struct make_unsigned_t_<uint32_t> {
  using type = uint32_t;
};
template <>
struct make_unsigned_t_<uint64_t> {
  using type = uint64_t;
};

template <class T>
TRT_HD T idiv(T a, T b) {
  if (b == 0) return static_cast<T>(-1);
  if (static_cast<T>(-1) < 0 && b == static_cast<T>(-1)) {
    using U = typename make_unsigned_t_<T>::type;
    return static_cast<T>(U(0) - static_cast<U>(a));
  }
  return static_cast<T>(a / b);
}

template <class T>
TRT_HD T irem(T a, T b) {
  if (b == 0) return a;
  if (static_cast<T>(-1) < 0 && b == static_cast<T>(-1)) return 0;
  return static_cast<T>(a % b);
}

/** Shifts never trap or depend on the host: an amount that is negative or at least the width
 * shifts everything out (0, or -1 for an arithmetic right shift of a negative value). Right
 * shifts are arithmetic for signed types and logical for unsigned ones (C and Triton). */
template <class T>
TRT_HD T shl(T a, T b) {
  using U = typename make_unsigned_t_<T>::type;
  const U n = static_cast<U>(b);
  return n >= 8 * sizeof(T) ? static_cast<T>(0) : static_cast<T>(static_cast<U>(a) << n);
}
template <class T>
TRT_HD T shr(T a, T b) {
  using U = typename make_unsigned_t_<T>::type;
  const U n = static_cast<U>(b);
  const T fill = static_cast<T>(-1) < static_cast<T>(0) ? static_cast<T>(a >> (8 * sizeof(T) - 1))
                                                        : static_cast<T>(0);
  return n >= 8 * sizeof(T) ? fill : static_cast<T>(a >> n);
}
/** The unsigned type twice `bytes` wide (umulhi's product). */
template <int bytes>
struct double_width_ {
  using type = uint64_t;
};
template <>
struct double_width_<1> {
  using type = uint16_t;
};
template <>
struct double_width_<2> {
  using type = uint32_t;
};
/** The high half of the product of a and b taken as unsigned (Triton's umulhi). */
template <class T>
TRT_HD T umulhi(T a, T b) {
  using U = typename make_unsigned_t_<T>::type;
  if (sizeof(T) == 8) {
#if defined(__CUDA_ARCH__)
    return static_cast<T>(__umul64hi(static_cast<uint64_t>(static_cast<U>(a)),
                                     static_cast<uint64_t>(static_cast<U>(b))));
#else
    const unsigned __int128 p =
        static_cast<unsigned __int128>(static_cast<U>(a)) * static_cast<U>(b);
    return static_cast<T>(static_cast<U>(p >> 64));
#endif
  }
  // The product in exactly twice the width: GCC 12 vectorizes a 16-bit umulhi widened to 64 bits
  // into a signed multiply-high (-O3 -march=native; x86 with AVX2 or AVX-512).
  using P = typename double_width_<sizeof(T)>::type;
  const P p = static_cast<P>(static_cast<P>(static_cast<U>(a)) * static_cast<P>(static_cast<U>(b)));
  return static_cast<T>(
      static_cast<U>(p >> (sizeof(T) == 8 ? 0 : 8 * sizeof(T))));  // (8: handled above)
}

// IEEE maxNum/minNum: a NaN operand gives the other one; ties give b. Written as one select on
// an or of two comparisons (works on GCC/Clang vector types too), which vectorizes to fewer
// instructions than the nested form `(a != a) ? b : (b != b) ? a : (a > b ? a : b)`.
template <class T>
TRT_HD T fmax_num(T a, T b) {
  return ((b >= a) | (a != a)) ? b : a;
}
template <class T>
TRT_HD T fmin_num(T a, T b) {
  return ((b <= a) | (a != a)) ? b : a;
}

}  // namespace trt
