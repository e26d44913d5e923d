/** \file
 * Device memory allocators. The CPU one returns 64-byte-aligned blocks; other backends register
 * theirs (the CUDA backend, later) under their device type.
 */
#pragma once

#include <cstddef>

#include "tessera/device.h"

namespace tessera::runtime {

struct Allocator {
  void* (*allocate)(size_t nbytes, Device device) = nullptr;
  void (*release)(void* ptr, Device device) = nullptr;
};

/** The allocator of a device type; `DeviceError` when none is registered. */
const Allocator& allocator_for(DeviceType type);
void register_allocator(DeviceType type, Allocator a);

/** Alignment of CPU allocations, in bytes. */
inline constexpr size_t kCpuAlignment = 64;

}  // namespace tessera::runtime
