/** \file
 * Internal switches of the matmul kernels, for tests.
 */
#pragma once

namespace tessera::ops_detail {

/** Makes float32/float64 matmul use the built-in blocked kernel even when OpenBLAS is linked. */
void set_force_builtin_matmul(bool on);

}  // namespace tessera::ops_detail
