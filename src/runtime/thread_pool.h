/** \file
 * The CPU thread pool: one persistent set of workers for every parallel loop in tessera (eager
 * ops now, tile-kernel grids later). Fork-join only: `parallel_for` returns when every chunk ran.
 * The calling thread works too; a loop that is small, nested in another, or started while the
 * pool is busy with another thread's loop runs inline. Thread-local state (grad mode, modes,
 * user location) follows the chunks.
 */
#pragma once

#include <cstdint>

#include "tessera/detail/function_ref.h"

namespace trt {
union Arg;
struct Grid;
}  // namespace trt

namespace tessera::runtime {

/** Number of threads loops use (workers plus the caller). */
int num_threads();
/** Resizes the pool (tests, `TESSERA_NUM_THREADS`); not while a loop runs. */
void set_num_threads(int n);
/** True inside a chunk of a parallel loop. */
bool in_parallel_region();

/**
 * Calls `body(b, e)` over disjoint subranges covering [begin, end), each at least `grain` long
 * except the last, in parallel. The first exception thrown by a chunk is rethrown here after all
 * chunks stopped.
 */
void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  FunctionRef<void(int64_t, int64_t)> body);

/** A compiled CPU kernel's entry point (trt::KernelFn, trt/cpu.h). */
using KernelEntry = void (*)(const trt::Grid* grid, int64_t pid_begin, int64_t pid_end,
                             const trt::Arg* args);
/** Runs programs [0, total) of `grid` with `slots` on the pool, in chunks sized by the kernel's
 * work per program (the CPU backend's launches and AOT packages' both). */
void run_programs(KernelEntry fn, int64_t work_per_program, const trt::Grid& grid, int64_t total,
                  const trt::Arg* slots);

}  // namespace tessera::runtime
