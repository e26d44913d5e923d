/** \file
 * The CUDA backend (DESIGN D3, D5): generated CUDA C++ compiled by NVRTC for each device's
 * architecture, cubins in the disk cache, launched on the device's current stream.
 */
#pragma once

#include <string>

#include "backend/backend.h"
#include "backend/cuda/emit.h"

namespace tessera::backend::cuda {

/** The backend of CUDA device `device` (one per device: its architecture is in its target key). */
const Backend& backend_for(int device);

/** NVRTC-compiles generated source for `sm_<arch>` with the tile runtime headers (tests compile
 * every generated kernel this way on machines without a GPU); a CompileError with NVRTC's log. */
std::string compile_for_arch(const std::string& source, const std::string& name, int arch);

}  // namespace tessera::backend::cuda
