/** \file
 * Knobs (DESIGN.md D10): environment variables with the `TESSERA_` prefix, read in one place.
 *
 * - `TESSERA_CACHE_DIR`: on-disk cache root (default `~/.cache/tessera`).
 * - `TESSERA_NUM_THREADS`: size of the CPU thread pool (default: all cores).
 * - `TESSERA_LOGS`: comma list of log channels: `cache` (disk cache hits, misses, rebuilds),
 *   `recompiles` (why a compiled function recompiled), `graph` (each compiled graph),
 *   `graph_breaks` (why a function runs in segments or eagerly), `crosscheck` (kernels
 * TESSERA_CROSSCHECK did not compare, and why), `dispatch` (every operator call: the operator, the
 * kernel's device and the arguments' shapes; slows every call), `all`.
 * - `TESSERA_DUMP`: comma list of dumps: `ir` (tile IR as traced and after optimization), `src`
 *   (generated C++ and CUDA, and after a CUDA build its registers, shared memory and spills);
 * written to stderr, or with `TESSERA_DUMP_DIR` set, one file per distinct kernel text in that
 * directory (`<kernel>-<hash>.ir`, `<kernel>-<hash>.cpp`).
 * - `TESSERA_CXX`: the C++ compiler for JIT kernels (default: `c++`, `g++`, `clang++` on PATH).
 * - `TESSERA_PRINT_AUTOTUNING=1`: prints each tuning round (key, every config's time, the winner).
 * - `TESSERA_PROGRESS`: progress lines of long autotuning rounds and compile batches on stderr.
 *   Unset or `auto`: on a terminal, once the work has taken a second; `0`: never; `1`/`always`:
 *   always, from the start, one line per update (logs, CI).
 * - `TESSERA_INTERPRET=1`: kernels run in the reference interpreter of the tile IR (no compiler).
 * - `TESSERA_DEBUG=1`: kernels are compiled with every load, store and atomic checked against the
 *   bounds of the tensor it points into (reported, suppressed, the process keeps running) and
 *   with device_assert active; with TESSERA_INTERPRET=1 too, the interpreter checks.
 * - `TESSERA_CROSSCHECK`: a testing mode for kernels launched on CPU tensors. `cuda`: each launch
 *   also runs the kernel's CUDA code on a GPU copy of its arguments and compares what both wrote
 *   (a mismatch is a RuntimeError naming the kernel, the argument and the first element);
 *   `nvrtc`: each kernel is also compiled for CUDA (sm_90) by NVRTC, no GPU needed.
 * - `TESSERA_DEVICE`: reserved for the CUDA backend; setting it warns that it changes nothing yet.
 *
 * An unknown `TESSERA_*` variable gets a one-time warning naming the known ones, so a typo does
 * not silently do nothing.
 */
#pragma once

#include <string>
#include <vector>

namespace tessera {

struct Knobs {
  std::string cache_dir;
  int num_threads = 0;  ///< 0: hardware concurrency
  std::vector<std::string> logs;
  std::vector<std::string> dump;
  std::string dump_dir;  ///< TESSERA_DUMP_DIR; empty: dumps go to stderr
  bool debug = false;
  bool interpret = false;
  bool print_autotuning = false;
  enum class Progress { Auto, Never, Always } progress = Progress::Auto;  ///< TESSERA_PROGRESS
  std::string device;
  std::string cxx;
  std::string crosscheck;  ///< TESSERA_CROSSCHECK: "", "cuda", "nvrtc" or "sim"
  /** TESSERA_CUDA_MMA (default on; 0 turns it off): tl::dot of float16/bfloat16 tiles on tensor
   * cores in CUDA code; off, the CUDA-core path (one FMA per term in order, as the CPU). */
  bool cuda_mma = true;
  /** TESSERA_CUDA_WGMMA (default on; 0 turns it off): on sm_90 devices, tensor-core dots whose
   * shapes allow it run on Hopper's warpgroup instructions (wgmma, kernels compiled for sm_90a);
   * off, on mma.sync as on sm_80. */
  bool cuda_wgmma = true;
  /** TESSERA_CUDA_WGMMA_ASYNC (0, 1 or 2; default 2): how a pipelined loop's wgmma overlaps the
   * next iteration. 2: tiles requested stages - 1 iterations ahead, after a second barrier once
   * the products of the iteration before are done in every warpgroup (Triton's order; the fastest
   * on an H100 at every config: docs/benchmarks.md); 1: stages - 2 ahead, one barrier an
   * iteration; 0: each iteration waits for its own products. */
  int cuda_wgmma_async = 2;
  /** TESSERA_CUDA_WGMMA_RS (default on; 0 turns it off): a wgmma whose A is computed in registers
   * in its accumulator's layout (attention's `p`) reads A from those registers; off, A goes
   * through a tile in shared memory. */
  bool cuda_wgmma_rs = true;
  /** TESSERA_CUDA_RING_REQUEST_FIRST (default off; 1 turns it on): a pipelined loop whose dots
   * are not overlapped with the next iteration requests its next tiles before waiting for its
   * own, and its last dot keeps a trailing barrier (two barriers an iteration; the order before
   * 2026-12-07, kept for A/B measurements). Off: wait, barrier, then request (one barrier). */
  bool cuda_ring_request_first = false;
  /** TESSERA_CUDA_WGMMA_DEFER (auto, 0 or 1): in a pipelined loop of two dots (attention's),
   * the last one, `acc * alpha + p @ v` with p in registers, is issued without waiting: its
   * products overlap the rest of the iteration and the next one's requests, and are waited for
   * where the next iteration first reads the accumulator; its ring keeps one more slot (the one
   * the products in flight read). Auto: in blocks of two or more warpgroups (measured faster
   * there, slower in 4-warp blocks: docs/benchmarks.md). -1 auto, 0 off, 1 every block. */
  int cuda_wgmma_defer = -1;
  /** TESSERA_CPU_DOT512 (auto, 0 or 1): CPU tl::dot micro-kernels on 64-byte vectors where the
   * kernel compiler has AVX-512. Auto: on Intel CPUs with AVX-512 (two 512-bit FMA units; on
   * AMD's, 512-bit FMAs are two halves and the 32-byte kernel is faster). -1 auto, 0 off, 1 on. */
  int cpu_dot512 = -1;
  /** TESSERA_COLUMN_SUMS (auto, 0 or 1): sums over the rows of a generated row kernel's values
   * (a norm's weight and bias gradients) added in the kernel's programs instead of a kernel of
   * their own. Auto: on the CPU (on an H100 it made the MLP block's training step 3% slower;
   * docs/decisions.md). -1 auto, 0 off, 1 on every device. */
  int column_sums = -1;
  /** TESSERA_NVRTC_PREFETCH (default on; 0 turns it off): when the CUDA runtime finds a device, a
   * background thread reads NVRTC's library into the page cache, so that a fresh machine's first
   * compile does not wait for the disk (docs/decisions.md). */
  bool nvrtc_prefetch = true;

  bool log_enabled(const std::string& channel) const;
  bool dump_enabled(const std::string& what) const;
};

/** The knobs, read from the environment on first use. */
const Knobs& knobs();
/** Re-reads the environment (tests and tools that set variables at run time). */
void reload_knobs();

/** Writes a `what` dump (`ir`, `src`) of `kernel` when enabled in `TESSERA_DUMP`: to stderr, or to
 * `$TESSERA_DUMP_DIR/<kernel>-<hash of identity>.<ext>` (written whole, then renamed into place;
 * `identity` is the part of the text that names the code, without timings). */
void dump(const std::string& what, const std::string& kernel, const std::string& identity,
          const std::string& text, const char* ext);

/** Writes `msg` to stderr once per distinct message, prefixed "tessera: warning: ". */
void warn_once(const std::string& msg);
/** Writes a log line to stderr when `channel` is enabled in `TESSERA_LOGS`. */
void log(const std::string& channel, const std::string& msg);

}  // namespace tessera
