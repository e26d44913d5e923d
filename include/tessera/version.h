/** \file
 * Version and build information.
 */
#pragma once

#include <string>

namespace tessera {

/** "0.1.0". */
const char* version();
/** A string that changes with every build of the library (part of cache keys). */
const std::string& build_id();
/** The matmul backend this build uses: "OpenBLAS" or "built-in". */
const char* matmul_backend();
/** Whether a CUDA driver can be loaded on this machine (the analogue of `has_triton()`). */
bool cuda_is_available();

}  // namespace tessera
