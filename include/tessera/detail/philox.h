/** \file
 * Philox 4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), the
 * counter-based generator behind every random number in tessera: tensor factories and, later,
 * `tl::rand` inside kernels use the same streams, so one seed gives the same numbers everywhere.
 * Dependency-free so that generated kernels can include it.
 *
 * Stream layout (as Triton's `randint4x`): element `i` of a draw at offset `o` uses counter
 * (lo32(o + i), hi32(o + i), 0, 0) and key (lo32(seed), hi32(seed)).
 */
#pragma once

#include <cstdint>

namespace tessera::philox {

struct U32x4 {
  uint32_t v[4];
};

inline uint32_t mulhi32(uint32_t a, uint32_t b) {
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
}

/** Ten rounds of Philox 4x32 on counter `c` with key (k0, k1). */
inline U32x4 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                           uint32_t k1) {
  constexpr uint32_t kMulA = 0xD2511F53u, kMulB = 0xCD9E8D57u;
  constexpr uint32_t kKeyA = 0x9E3779B9u, kKeyB = 0xBB67AE85u;
  for (int r = 0; r < 10; ++r) {
    const uint32_t n0 = mulhi32(kMulB, c2) ^ c1 ^ k0;
    const uint32_t n2 = mulhi32(kMulA, c0) ^ c3 ^ k1;
    const uint32_t n1 = kMulB * c2;
    const uint32_t n3 = kMulA * c0;
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
    k0 += kKeyA;
    k1 += kKeyB;
  }
  return U32x4{{c0, c1, c2, c3}};
}

/** The four 32-bit outputs for element `offset` of stream `seed`. */
inline U32x4 random4(uint64_t seed, uint64_t offset) {
  return philox4x32_10(static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32), 0, 0,
                       static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

/** Uniform in [0, 1) with `bits` bits of precision (24 for float32, 11 float16, 8 bfloat16). */
inline float uniform_float(uint32_t x, int bits) {
  return static_cast<float>(x >> (32 - bits)) * (1.0f / static_cast<float>(1u << bits));
}

/** Uniform in [0, 1) with 53 bits, from two outputs. */
inline double uniform_double(uint32_t hi, uint32_t lo) {
  const uint64_t x = ((static_cast<uint64_t>(hi) << 32) | lo) >> 11;
  return static_cast<double>(x) * (1.0 / 9007199254740992.0);
}

}  // namespace tessera::philox
