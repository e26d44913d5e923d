/** \file
 * Device memory allocators. The CPU one returns 64-byte-aligned blocks (2 MiB-aligned from 2 MiB,
 * kept for reuse when freed); other backends register theirs (CUDA's caching allocator) under
 * their device type.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tessera/device.h"

namespace tessera::runtime {

struct Allocator {
  void* (*allocate)(size_t nbytes, Device device) = nullptr;
  void (*release)(void* ptr, Device device) = nullptr;
};

/** The allocator of a device type; `DeviceError` when none is registered. */
const Allocator& allocator_for(DeviceType type);
void register_allocator(DeviceType type, Allocator a);

/** Frees the CPU blocks of 2 MiB and more kept for reuse (up to 1 GiB is kept; an allocation
 * that fails frees them and tries again). */
void cpu_empty_cache();
/** Bytes of freed CPU blocks kept for reuse (0 in sanitizer builds, which keep none). */
size_t cpu_cached_bytes();

/** A byte count for people: "512 B", "3.50 MiB", "4.00 TiB". */
std::string format_bytes(uint64_t n);

/** Alignment of CPU allocations, in bytes. */
inline constexpr size_t kCpuAlignment = 64;

}  // namespace tessera::runtime
