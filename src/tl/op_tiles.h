/** \file
 * The built-in pointwise ops' tile lowering, for kernels other than the ops' own: the graph
 * compiler's fused epilogues (tl/fused.h) apply an op to tiles inside a user's kernel.
 */
#pragma once

#include "ops/pointwise.h"
#include "tessera/tl.h"

namespace tessera::op_tiles {

/** `op` applied to `inputs` (tiles of one shape, each in its own dtype; `Where`: the condition
 * first) computed as the CPU loops compute it in `compute`; `extra` as the ops' runners take it
 * (add/sub: the alpha Scalar; clamp: ClampArgs; isclose: IsCloseArgs). Traces into the current
 * kernel. */
tl::Tile pointwise_tile(ops_detail::PwOp op, DType compute, ArrayRef<tl::Tile> inputs,
                        const void* extra);

}  // namespace tessera::op_tiles
