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

#include <stdint.h>

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
inline T idiv(T a, T b) {
  if (b == 0) return static_cast<T>(-1);
  if (static_cast<T>(-1) < 0 && b == static_cast<T>(-1)) {
    using U = typename make_unsigned_t_<T>::type;
    return static_cast<T>(U(0) - static_cast<U>(a));
  }
  return static_cast<T>(a / b);
}

template <class T>
inline T irem(T a, T b) {
  if (b == 0) return a;
  if (static_cast<T>(-1) < 0 && b == static_cast<T>(-1)) return 0;
  return static_cast<T>(a % b);
}

// IEEE maxNum/minNum: a NaN operand gives the other one; ties give b. Written as one select on
// an or of two comparisons (works on GCC/Clang vector types too), which vectorizes to fewer
// instructions than the nested form `(a != a) ? b : (b != b) ? a : (a > b ? a : b)`.
template <class T>
inline T fmax_num(T a, T b) {
  return ((b >= a) | (a != a)) ? b : a;
}
template <class T>
inline T fmin_num(T a, T b) {
  return ((b <= a) | (a != a)) ? b : a;
}

}  // namespace trt
