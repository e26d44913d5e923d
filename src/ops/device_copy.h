/** \file
 * Copies and fills of tensors on any device, for the built-in operators' CUDA kernels until the
 * CUDA emitter generates them (issue 14): contiguous data moves with one cuMemcpy or cuMemset;
 * anything else (strided views, dtype conversions, broadcasting) goes through the host, where the
 * CPU loops do the element work on the bytes of the views' storage span. Correct for every view;
 * the fast paths are the common cases (whole tensors, contiguous results).
 */
#pragma once

#include "tessera/tensor.h"

namespace tessera::ops_detail {

/** A CPU tensor holding `t`'s values (contiguous; `t` itself when it is already on the CPU).
 * Reading a CUDA tensor synchronizes its device's current stream. */
Tensor to_host(const Tensor& t);
/** Copies `src` into `dst` (any devices, dtypes; `src` broadcast to `dst`'s shape). */
void copy_between(const Tensor& dst, const Tensor& src);
/** Fills a CUDA tensor with `value` (converted to its dtype). */
void cuda_fill(const Tensor& dst, const Scalar& value);

}  // namespace tessera::ops_detail
