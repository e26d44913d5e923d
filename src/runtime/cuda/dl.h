/** \file
 * What the dlopen loaders of the CUDA toolkit's libraries share (NVRTC, cuBLAS): where to look,
 * and resolving an entry point into a typed function pointer.
 */
#pragma once

#include <dlfcn.h>

#include <cstdlib>
#include <initializer_list>
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

/** The first of `names` that loads (RTLD_LOCAL) from the toolkit folders, each folder tried with
 * every name before the next folder; its path in `path`. Null when none loads. */
inline void* open_toolkit_library(std::initializer_list<const char*> names, std::string& path) {
  for (const auto& d : toolkit_dirs()) {
    for (const char* n : names) {
      if (void* lib = dlopen((d + n).c_str(), RTLD_NOW | RTLD_LOCAL)) {
        path = d + n;
        return lib;
      }
    }
  }
  return nullptr;
}

/** `out` = the entry point `name` of `lib`; false when it is missing. */
template <class F>
bool resolve_symbol(void* lib, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(lib, name));
  return out != nullptr;
}

}  // namespace tessera::runtime::cuda
