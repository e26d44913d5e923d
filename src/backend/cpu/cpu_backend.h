/** \file
 * The CPU backend's own entry points beyond backend.h (benchmarks call a loaded kernel directly).
 */
#pragma once

#include "backend/backend.h"

namespace tessera::backend::cpu {

/** The loaded entry point of a built CPU kernel (null when not built). */
trt::KernelFn kernel_fn(const Kernel& k);

/** Runs every program of `g` with `slots` on the thread pool, in chunks sized by the kernel's
 * work per program (AOT packages launch their kernels through it too). */
void run_programs(trt::KernelFn fn, int64_t work_per_program, const GridSize& g,
                  const trt::Arg* slots);

}  // namespace tessera::backend::cpu
