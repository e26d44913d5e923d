/** \file
 * Which pointer parameters a kernel reads and writes, from its tile IR (exactly: pointer
 * provenance through addptr, broadcasts, selects and loop-carried values). The launcher bumps the
 * version counters of written tensors only; the graph compiler builds on the same analysis.
 */
#pragma once

#include <vector>

#include "ir/ir.h"

namespace tessera::ir {

struct ParamAccess {
  bool read = false;
  bool written = false;
  bool atomic = false;  ///< updated by atomics (read and written too)
};

/** One entry per `f.params` (non-pointer parameters stay unread/unwritten). A pointer loaded
 * from memory could point anywhere: then every pointer parameter counts as read and written. */
std::vector<ParamAccess> param_access(const Function& f);

/** Per value: the pointer parameters it may derive from (bit i for parameter i; every parameter's
 * bit and bit 63 when a pointer was loaded from memory or made from an integer, which the checked
 * mode cannot bound). */
std::vector<uint64_t> pointer_provenance(const Function& f);

}  // namespace tessera::ir
