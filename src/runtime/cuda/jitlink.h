/** \file
 * nvJitLink, loaded with dlopen like NVRTC (DESIGN.md D5): links a kernel's LTO-IR with the
 * user's precompiled device code (`tl::ExternLibrary::cuda_objects`) into one cubin, with no GPU.
 */
#pragma once

#include <string>
#include <vector>

#include "runtime/cuda/nvrtc.h"

namespace tessera::runtime::cuda {

/** The loaded library's path and version; null when absent (`why` says where it looked). */
const NvrtcInfo* jitlink(std::string* why = nullptr);

/** Links `ltoir` (a kernel from compile_ltoir, named `name` in messages) with `files` (cubins,
 * fatbins, PTX, LTO-IR, relocatable objects or archives, recognized by their contents) for
 * `sm_<arch><arch_suffix>` with link-time optimization, fused multiply-adds off (as the kernels'
 * own compiles) and ptxas's report in `resources`. A link error (an undefined function, an
 * object for another architecture) is a CompileError holding nvJitLink's log. */
CompiledCubin link_cubin(const std::string& ltoir, const std::vector<std::string>& files,
                         const std::string& name, int arch, const std::string& arch_suffix = "");

}  // namespace tessera::runtime::cuda
