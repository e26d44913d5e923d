/** \file
 * Helpers for tests of kernels: running a check in every mode a kernel can run in, and exact
 * float32 dot options.
 */
#pragma once

#include <cstdlib>

#include "tessera/env.h"
#include "tessera/tl.h"
#include "testing.h"

namespace tessera::testing {

/** Runs `f(mode)` compiled, then interpreted (`TESSERA_INTERPRET=1`). */
template <class F>
void compiled_and_interpreted(F&& f) {
  f("compiled");
  ScopedEnv interpret("TESSERA_INTERPRET", "1");
  f("interpreted");
}

/** Runs `f(mode)` compiled, then compiled with checks (`TESSERA_DEBUG=1`): for kernels the
 * interpreter refuses (compiled code of the user's, tl::extern_elementwise). */
template <class F>
void compiled_and_checked(F&& f) {
  ScopedEnv compiled("TESSERA_INTERPRET", "0");  // also in CTest's interpreted pass
  f("compiled");
  ScopedEnv debug("TESSERA_DEBUG", "1");
  f("checked");
}

/** Runs `f(mode)` compiled, compiled with checks (`TESSERA_DEBUG=1`), then interpreted. The
 * knobs come back as they were (a CTest pass's own TESSERA_* settings stay in force). */
template <class F>
void every_mode(F&& f) {
  f("compiled");
  {
    ScopedEnv debug("TESSERA_DEBUG", "1");
    f("checked");
  }
  ScopedEnv interpret("TESSERA_INTERPRET", "1");
  f("interpreted");
}

/** Exact float32 products in `tl::dot` (the default is tf32, as Triton's on NVIDIA GPUs). */
inline tl::DotOptions ieee() {
  tl::DotOptions o;
  o.input_precision = "ieee";
  return o;
}

}  // namespace tessera::testing
