/** \file
 * The tile runtime headers, embedded in the library at build time (cmake/embed_trt.cmake).
 */
#pragma once

namespace tessera::backend::cpu {

struct EmbeddedHeader {
  const char* path;  ///< relative include path, e.g. "tessera/trt/cpu.h"
  const char* text;
};

extern const EmbeddedHeader kTrtHeaders[];
extern const int kNumTrtHeaders;

}  // namespace tessera::backend::cpu
