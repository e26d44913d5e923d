/** \file
 * What the GPU test files share: a case that needs a GPU skips itself with a message where
 * there is none, and the device the cases use.
 */
#pragma once

#include <gtest/gtest.h>

#include "tessera/tessera.h"

#define REQUIRE_GPU() \
  if (!::tessera::cuda_is_available()) GTEST_SKIP() << "no CUDA GPU on this machine"

namespace tessera::testing {
inline const Device kGpu("cuda");
}  // namespace tessera::testing
