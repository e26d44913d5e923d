/** \file
 * GPU memory: the caching allocator behind CUDA tensors, copies between host and device, fills,
 * and pinned host buffers.
 *
 * The allocator (PyTorch's design, reduced): requests are rounded up (to 512 bytes below 1 MiB,
 * to 2 MiB above) and served from blocks freed earlier on the same stream, so a freed block is
 * reused by work queued after the free on that stream with no synchronization. A block also used
 * on another stream (`record_stream`) waits for that stream's work before it is reused. When
 * cuMemAlloc fails, the cached blocks are returned to the driver and the allocation retried;
 * `empty_cache()` returns them on demand. `memory_stats()` counts bytes and events per device.
 */
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/cuda/context.h"

namespace tessera::runtime::cuda {

/** Allocates `nbytes` on `device` for use on its current stream (null for 0 bytes). */
void* allocate(size_t nbytes, int device);
/** Frees a block from `allocate` into the cache of the stream it was allocated on. */
void release(void* ptr, int device);
/** Marks a block as used by `stream` too: it is not reused before that stream's work so far. */
void record_stream(void* ptr, const Stream& stream);
/** Returns every cached, idle block to the driver (all devices). */
void empty_cache();

struct MemoryStats {
  size_t allocated_bytes = 0;  ///< in live blocks (rounded sizes)
  size_t reserved_bytes = 0;   ///< live + cached, as obtained from cuMemAlloc
  size_t peak_allocated_bytes = 0;
  int64_t allocations = 0, frees = 0;
  int64_t cache_hits = 0;                            ///< allocations served from the cache
  int64_t device_allocations = 0, device_frees = 0;  ///< cuMemAlloc / cuMemFree calls
};
MemoryStats memory_stats(int device);
/** Clears the peak and the event counters (not the byte counts). */
void reset_peak_stats(int device);

/** Registers the allocator for `DeviceType::CUDA` tensors (done once, on first use). */
void register_tensor_allocator();

// ---- copies and fills on the current stream -----------------------------------------------------
/** Host to device; returns once `src` may be reused. */
void copy_to_device(void* dst, const void* src, size_t nbytes, int device);
/** Device to host; synchronizes the current stream (the data is there on return). */
void copy_to_host(void* dst, const void* src, size_t nbytes, int device);
/** Device to device, on the same device or across devices. */
void copy_device(void* dst, int dst_device, const void* src, int src_device, size_t nbytes);
/** Sets `count` elements of 1, 2 or 4 bytes to `pattern`. */
void fill(void* dst, uint32_t pattern, size_t element_size, size_t count, int device);

// ---- pinned host memory
// --------------------------------------------------------------------------
/** Page-locked host memory (fast, asynchronous copies); released with `release_pinned`. */
void* allocate_pinned(size_t nbytes);
void release_pinned(void* ptr);

}  // namespace tessera::runtime::cuda
