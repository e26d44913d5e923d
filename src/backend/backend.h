/** \file
 * One interface for every backend (DESIGN.md D3, amended): a target key, code generation from
 * tile IR, building many kernels in one parallel batch, and launching with argument packing.
 *
 * The backends live one per folder: `backend/cpu` (C++ source, the system compiler, dlopen, the
 * thread pool) and `backend/interp` (the reference interpreter: no source, no build); the CUDA
 * backend joins them. The checked mode (`TESSERA_DEBUG`) is a property of generation
 * (`Kernel::checked`), not another backend. The kernel language (`tl`) asks `for_device` for the
 * backend of its arguments' device and knows nothing else about it.
 */
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/common/checks.h"
#include "ir/ir.h"
#include "tessera/detail/small_vector.h"
#include "tessera/device.h"
#include "tessera/trt/cpu.h"

namespace tessera {
class Tensor;
}

namespace tessera::backend {

/** A launch argument, bound to its parameter (constexprs are in the IR and pack nothing). */
struct Arg {
  ir::ParamKind kind = ir::ParamKind::Int;
  void* ptr = nullptr;
  int64_t i = 0;
  double f = 0;
  const Tensor* tensor = nullptr;  ///< pointers: the tensor (its view's bounds for checks)
};

/** One specialization on one backend: what generation made, then what the build added. */
struct Kernel {
  std::string name;
  std::shared_ptr<const ir::Function> function;  ///< the optimized tile IR (with its attributes)
  bool checked = false;  ///< generated with bounds, overflow and device_assert checks
  std::string source;    ///< generated code ("" for backends that run the IR)
  std::string disk_key;  ///< the disk cache's key of `source` ("" when not cached)
  /** Identifies the generated code: equal keys run the same code (autotuning times one of
   * them; tuning records are filed under it). */
  std::string code_key;
  int64_t work_per_program = 1;  ///< elements per program, to size thread-pool chunks
  int launch_threads = 0;        ///< GPU backends: threads per block
  int64_t shared_bytes = 0;      ///< GPU backends: dynamic shared memory per block
  std::vector<CheckSite> sites;  ///< checked kernels: what each reported site number is
  // Filled by `build`:
  bool built = false;
  bool from_disk = false;              ///< found in the disk cache (no compiler run)
  double compile_ms = 0;               ///< compiler time (0 on a cache hit)
  std::shared_ptr<const void> binary;  ///< the backend's loaded code
};

/** A grid of programs: its dimensions and their product. */
struct GridSize {
  trt::Grid grid;
  int64_t total = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  /** "cpu", "interp", "cuda". */
  virtual const char* name() const = 0;
  /** Everything outside the IR that changes generated code or its binary (device type, ISA,
   * compiler identity and flags, checked mode): part of the specialization and disk keys. */
  virtual const std::string& target_key() const = 0;
  /** A 64-bit digest of `target_key` for in-memory keys (computed once). */
  uint64_t target_hash() const {
    const uint64_t h = hash_.load(std::memory_order_relaxed);
    return h ? h : compute_hash();
  }
  /** Whether code generated with `checked` evaluates `device_assert`s (the interpreter always
   * does; compiled backends in the checked mode). When not, tl drops the asserts and what only
   * they use (hint checks) before generation, so they cost nothing. */
  virtual bool evaluates_asserts(bool checked) const { return checked; }
  /** Generates code for `f` (its attributes included) into `out`. */
  virtual void generate(std::shared_ptr<const ir::Function> f, bool checked, Kernel& out) const = 0;
  /** Builds every unbuilt kernel of `kernels` in one batch (in parallel where the toolchain
   * allows); kernels found in a cache are loaded. */
  virtual void build(const std::vector<Kernel*>& kernels) const = 0;
  /** Runs the grid on the device with `args` (one per parameter, in order). A checked kernel
   * reports violations and throws a RuntimeError after a failed device_assert. */
  virtual void launch(const Kernel& k, const GridSize& grid, ArrayRef<Arg> args) const = 0;

 private:
  uint64_t compute_hash() const;
  mutable std::atomic<uint64_t> hash_{0};
};

/** The arguments as the generated code's slots (one per parameter; constexprs pack 0); returns
 * how many were written. */
size_t pack_slots(ArrayRef<Arg> args, trt::Arg* slots);

/** The memory each pointer argument's view may touch (the checked mode's bounds). */
std::vector<PointerBounds> tensor_bounds(ArrayRef<Arg> args);

/** The CPU backend: C++ through the system compiler, run on the thread pool. */
const Backend& cpu_backend();
/** The reference interpreter of the tile IR (`TESSERA_INTERPRET=1`). */
const Backend& interp_backend();
/** The backend that runs kernels on `device` under the current knobs. */
const Backend& for_device(Device device);

}  // namespace tessera::backend
