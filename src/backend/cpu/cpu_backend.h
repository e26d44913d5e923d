/** \file
 * The CPU backend's own entry points beyond backend.h (benchmarks call a loaded kernel directly).
 */
#pragma once

#include "backend/backend.h"

namespace tessera::backend::cpu {

/** The loaded entry point of a built CPU kernel (null when not built). */
trt::KernelFn kernel_fn(const Kernel& k);

}  // namespace tessera::backend::cpu
