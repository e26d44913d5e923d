/** \file
 * Loading cubins and launching their kernels (the CUDA backend's launch glue builds on this).
 */
#pragma once

#include <string>

#include "runtime/cuda/context.h"

namespace tessera::runtime::cuda {

/** What the compiler gave a kernel (`TESSERA_DUMP`, `tessera cache ls`). */
struct KernelResources {
  int registers = 0;
  int local_bytes = 0;   ///< per thread: spills and stack arrays
  int shared_bytes = 0;  ///< static shared memory
  int max_threads = 0;   ///< per block, as compiled
};

/** A cubin loaded into one device's context (owning). */
class Module {
 public:
  /** Loads `cubin` on `device`; a RuntimeError naming `what` if the driver refuses it. */
  Module(const std::string& cubin, int device, const std::string& what);
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /** The `extern "C"` kernel `name`; a RuntimeError when the cubin has none. */
  CUfunction function(const std::string& name) const;
  KernelResources resources(CUfunction f) const;
  int device() const { return device_; }

 private:
  int device_;
  CUmodule module_ = nullptr;
  std::string what_;
};

/** Launches `f` on the device's current stream with the kernel parameters `args` (pointers to
 * each argument's value, as cuLaunchKernel takes them); failures name `what`. */
void launch(CUfunction f, int device, const unsigned grid[3], const unsigned block[3],
            unsigned shared_bytes, void** args, const std::string& what);

}  // namespace tessera::runtime::cuda
