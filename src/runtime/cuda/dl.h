/** \file
 * What the dlopen loaders of the CUDA toolkit's libraries share (NVRTC, cuBLAS): where to look,
 * and resolving an entry point into a typed function pointer.
 */
#pragma once

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace tessera::runtime::cuda {

/** The folders a toolkit library is looked for in, in order: $CUDA_HOME/lib64 and /lib,
 * /usr/local/cuda/lib64, then "" (the loader's own search path). Each ends with '/'. */
inline std::vector<std::string> toolkit_dirs() {
  std::vector<std::string> dirs;
  if (const char* home = std::getenv("CUDA_HOME"); home && *home) {
    dirs.push_back(std::string(home) + "/lib64/");
    dirs.push_back(std::string(home) + "/lib/");
  }
  dirs.push_back("/usr/local/cuda/lib64/");
  dirs.push_back("");
  return dirs;
}

/** `out` = the entry point `name` of `lib`; false when it is missing. */
template <class F>
bool resolve_symbol(void* lib, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(lib, name));
  return out != nullptr;
}

}  // namespace tessera::runtime::cuda
