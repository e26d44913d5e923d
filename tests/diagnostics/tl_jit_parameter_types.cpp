// Must not compile: a TL_JIT parameter whose type is not a kernel-language parameter type. The
// CTest `tl_jit_parameter_types` compiles this file and expects the static_assert's message.
#include <tessera/tl.h>

namespace tl = tessera::tl;

TL_JIT(bad_parameter_type, tl::Ptr x, tl::Tile n) {
  tl::store(x + n, 1.0);
}
