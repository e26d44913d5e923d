/** \file
 * Copies and fills of tensors on any device: contiguous data of one dtype moves with one
 * cuMemcpy or cuMemset; conversions, strided views and broadcasts on a GPU run the tile
 * lowering's copy kernel (`aten_pointwise` with `PwOp::Copy`) on the destination's device, after
 * one dense transfer of the source when it lives elsewhere. A dense GPU destination of a CPU
 * source is converted on the host and sent in one transfer.
 */
#pragma once

#include "tessera/tensor.h"

namespace tessera::ops_detail {

/** A CPU tensor holding `t`'s values (contiguous; `t` itself when it is already on the CPU).
 * Reading a CUDA tensor synchronizes its device's current stream. */
Tensor to_host(const Tensor& t);
/** Copies `src` into `dst` (any devices, dtypes; `src` broadcast to `dst`'s shape). */
void copy_between(const Tensor& dst, const Tensor& src);
/** `dst` = `src` (broadcast, converted) by the tile lowering's copy kernel on dst's device
 * (`src` on that device, or a 0-dim CPU tensor). */
void tile_copy(const Tensor& dst, const Tensor& src);
/** Fills a CUDA tensor with `value` (converted to its dtype). */
void cuda_fill(const Tensor& dst, const Scalar& value);

}  // namespace tessera::ops_detail
