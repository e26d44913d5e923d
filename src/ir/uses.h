/** \file
 * Use lists and defining regions of a function's values: who reads each value, in which region,
 * and where each value is defined (its region and position). Built once per function by a walk;
 * analyses and emitters query it instead of walking again.
 */
#pragma once

#include <vector>

#include "ir/ir.h"

namespace tessera::ir {

struct Use {
  const Op* user;
  const Region* region;  ///< the region `user` sits in
};

class UseInfo {
 public:
  explicit UseInfo(const Function& f);

  /** Every op that reads `v`, in program order. */
  const std::vector<Use>& uses(ValueId v) const { return uses_[static_cast<size_t>(v)]; }
  /** The region `v` is defined in (an op result's or a region argument's); null for parameters. */
  const Region* def_region(ValueId v) const { return def_region_[static_cast<size_t>(v)]; }
  /** The position of `v`'s defining op in its region; -1 for region arguments and parameters. */
  int def_pos(ValueId v) const { return def_pos_[static_cast<size_t>(v)]; }
  /** Whether `v` is read exactly once, in the region that defines it. */
  bool single_local_use(ValueId v) const {
    const auto& u = uses(v);
    return u.size() == 1 && u[0].region == def_region(v);
  }

 private:
  void walk(const Region& r);

  std::vector<std::vector<Use>> uses_;
  std::vector<const Region*> def_region_;
  std::vector<int> def_pos_;
};

}  // namespace tessera::ir
