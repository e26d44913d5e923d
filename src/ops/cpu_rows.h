/** \file
 * Row loops of the eager CPU operators that use the tile runtime's branch-free math
 * (`tessera/trt/scalar.h`): the attribute that clones a function for AVX-512, AVX2 and baseline
 * x86-64 (the library itself is built for baseline x86-64; a clone is picked once, at load), and
 * float16 / bfloat16 rows converted to float and back (bit for bit the library's conversions,
 * vectorized). Files that use trt's math are compiled with -fno-math-errno -fno-trapping-math
 * -ffp-contract=off (CMakeLists.txt): without them nothing vectorizes.
 */
#pragma once

#include <cstdint>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TS_ROW_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TS_ROW_CLONES
#endif

namespace tessera::ops_detail {

/** `out[i] = in[i]` for float16 (`bf16` false) or bfloat16 bits. */
void narrow_row_to_float(const uint16_t* in, float* out, int64_t n, bool bf16);
/** `out[i] = in[i]` rounded to float16 or bfloat16 bits (to nearest even). */
void float_row_to_narrow(const float* in, uint16_t* out, int64_t n, bool bf16);

}  // namespace tessera::ops_detail
