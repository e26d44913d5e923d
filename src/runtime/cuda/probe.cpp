// Finds the CUDA driver at run time (DESIGN.md D5): tessera never links against CUDA.
#include <dlfcn.h>

#include "tessera/version.h"

namespace tessera {

bool cuda_is_available() {
  static const bool available = [] {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return false;
    using InitFn = int (*)(unsigned);
    using CountFn = int (*)(int*);
    auto init = reinterpret_cast<InitFn>(dlsym(lib, "cuInit"));
    auto count = reinterpret_cast<CountFn>(dlsym(lib, "cuDeviceGetCount"));
    int n = 0;
    return init && count && init(0) == 0 && count(&n) == 0 && n > 0;
  }();
  return available;
}

}  // namespace tessera
