// Copies and fills across devices (see device_copy.h): one cuMemcpy/cuMemset for contiguous data,
// the tile lowering's copy kernel for conversions, views and broadcasts.
#include "ops/device_copy.h"

#include <cstring>

#include "ops/op_utils.h"
#include "ops/pointwise.h"
#include "runtime/cuda/memory.h"

namespace tessera::ops_detail {
namespace {

// Elements between a view's first element and its last, inclusive (strides are non-negative).
int64_t span_elements(const Tensor& t) {
  if (t.numel().expect_int() == 0) return 0;
  int64_t n = 1;
  const auto sizes = t.impl()->int_sizes();
  const auto strides = t.impl()->int_strides();
  for (size_t d = 0; d < sizes.size(); ++d) n += (sizes[d] - 1) * strides[d];
  return n;
}

bool dense(const Tensor& t) {
  return t.is_contiguous() && span_elements(t) == t.numel().expect_int();
}

/** A CUDA view's storage span copied to the host, and the view's geometry over that copy. */
struct HostSpan {
  Tensor buffer;  ///< 1-D, the span's elements
  Tensor view;    ///< `buffer` seen with the CUDA tensor's sizes and strides
};

HostSpan host_span(const Tensor& t) {
  const int64_t n = span_elements(t);
  HostSpan h;
  h.buffer = detail::make_empty(SymDimVector{SymInt(n)}, t.dtype(), kCPU);
  runtime::cuda::copy_to_host(h.buffer.data_ptr(), t.data_ptr(),
                              static_cast<size_t>(n) * t.itemsize(), t.device().index());
  h.view = detail::make_view(h.buffer, t.sizes(), t.strides(), SymInt(0));
  return h;
}

// A dense copy of `t` on its own device (t itself when dense).
Tensor densified(const Tensor& t) {
  if (dense(t)) return t;
  Tensor d = detail::make_empty(t.sizes(), t.dtype(), t.device());
  tile_copy(d, t);
  return d;
}

}  // namespace

void tile_copy(const Tensor& dst, const Tensor& src) {
  static const PointwiseDesc kCopy{"copy_", ResultRule::Same, kAllDTypes, nullptr, PwOp::Copy};
  run_on_device(kCopy, dst, {src}, dst.dtype(), nullptr);
}

Tensor to_host(const Tensor& t) {
  if (!t.device().is_cuda()) return t;
  return host_span(densified(t)).view;
}

void copy_between(const Tensor& dst, const Tensor& src) {
  if (dst.numel().expect_int() == 0) return;
  if (!dst.device().is_cuda()) {
    cpu_copy(dst, to_host(src));
    return;
  }
  const bool same = src.dtype() == dst.dtype() && src.sizes().equals(dst.sizes());
  const size_t nbytes = static_cast<size_t>(dst.numel().expect_int()) * dst.itemsize();
  if (same && dense(dst) && dense(src)) {
    if (src.device().is_cuda()) {
      runtime::cuda::copy_device(dst.data_ptr(), dst.device().index(), src.data_ptr(),
                                 src.device().index(), nbytes);
    } else {
      runtime::cuda::copy_to_device(dst.data_ptr(), src.data_ptr(), nbytes, dst.device().index());
    }
    return;
  }
  if (src.device() == dst.device()) {
    tile_copy(dst, src);
    return;
  }
  if (!src.device().is_cuda() && dense(dst)) {
    // From the host into a dense tensor: converted there, then one transfer.
    Tensor tmp = detail::make_empty(dst.sizes(), dst.dtype(), kCPU);
    cpu_copy(tmp, src);
    runtime::cuda::copy_to_device(dst.data_ptr(), tmp.data_ptr(), nbytes, dst.device().index());
    return;
  }
  // The source made dense where it is, moved in one transfer, then converted and laid out here.
  const Tensor from = src.device().is_cuda() ? densified(src) : cpu_contiguous(src);
  Tensor stage = detail::make_empty(from.sizes(), from.dtype(), dst.device());
  const size_t stage_bytes = static_cast<size_t>(from.numel().expect_int()) * from.itemsize();
  if (from.device().is_cuda()) {
    runtime::cuda::copy_device(stage.data_ptr(), dst.device().index(), from.data_ptr(),
                               from.device().index(), stage_bytes);
  } else {
    runtime::cuda::copy_to_device(stage.data_ptr(), from.data_ptr(), stage_bytes,
                                  dst.device().index());
  }
  tile_copy(dst, stage);
}

void cuda_fill(const Tensor& dst, const Scalar& value) {
  const int64_t n = dst.numel().expect_int();
  if (n == 0) return;
  const size_t size = dst.itemsize();
  if (dense(dst) && (size == 1 || size == 2 || size == 4)) {
    Tensor one = detail::make_empty(SymDimVector{}, dst.dtype(), kCPU);
    cpu_fill(one, value);  // the value's bits in the tensor's dtype
    uint32_t pattern = 0;
    std::memcpy(&pattern, one.data_ptr(), size);
    runtime::cuda::fill(dst.data_ptr(), pattern, size, static_cast<size_t>(n),
                        dst.device().index());
    return;
  }
  if (dense(dst)) {
    Tensor tmp = detail::make_empty(dst.sizes(), dst.dtype(), kCPU);
    cpu_fill(tmp, value);
    runtime::cuda::copy_to_device(dst.data_ptr(), tmp.data_ptr(), static_cast<size_t>(n) * size,
                                  dst.device().index());
    return;
  }
  tile_copy(dst, scalar_tensor(value, dst.dtype()));  // a 0-dim CPU scalar joins the kernel
}

}  // namespace tessera::ops_detail
