// Copies and conversions: copy_, clone, to / _to_copy, fill_, zero_, resize_.
#include "ops/device_copy.h"
#include "ops/pointwise.h"
#include "ops/register.h"

namespace tessera {
namespace {

using namespace ops_detail;

void check_copy_shape(const Tensor& self, const Tensor& src) {
  const auto shape = broadcast_shapes(self.sizes(), src.sizes(), "copy_");
  TS_CHECK(SymIntArrayRef(shape).equals(self.sizes()), ShapeError)
      << "[copy_] the source of shape " << src.sizes()
      << " cannot be broadcast to the destination's shape " << self.sizes();
}

// CPU to CPU: the precompiled loops, or the tile lowering's copy kernel under ScopedThroughTiles
// (tests check the GPU's copy kernel on the CPU that way).
void copy_on_cpu(const Tensor& dst, const Tensor& src) {
  if (through_tiles()) {
    if (dst.numel().expect_int() > 0) tile_copy(dst, src);
  } else {
    cpu_copy(dst, src);
  }
}

// Any pair of devices (the kernel is the destination's: CPU or CUDA).
Tensor& copy_any(Tensor& self, const Tensor& src) {
  check_copy_shape(self, src);
  TS_CHECK(src.has_data(), ValueError) << "[copy_] cannot copy from a tensor without data ("
                                       << (src.is_fake() ? "fake" : "meta") << ")";
  check_no_partial_overlap(self, src, "copy_");
  if (self.is_same(src)) return self;
  if (self.device().is_cpu() && src.device().is_cpu()) {
    copy_on_cpu(self, src);
  } else {
    copy_between(self, src);
  }
  bump_version(self);
  return self;
}

Tensor& copy_meta(Tensor& self, const Tensor& src) {
  check_copy_shape(self, src);
  return self;
}

Tensor clone_impl(const Tensor& self) {
  Tensor out = detail::make_empty(self.sizes(), self.dtype(), self.device());
  if (self.device().is_cpu()) {
    copy_on_cpu(out, self);
  } else {
    copy_between(out, self);
  }
  return out;
}

Tensor clone_meta(const Tensor& self) {
  return new_output(self, self.sizes(), self.dtype());
}

Tensor to_copy_impl(const Tensor& self, std::optional<DType> dtype, std::optional<Device> device) {
  const DType dt = dtype.value_or(self.dtype());
  const Device dev = device.value_or(self.device());
  if (dev.is_meta() || !self.has_data()) {
    if (dev.is_meta()) return detail::make_empty(self.sizes(), dt, dev);
    return detail::make_fake(self.sizes(), dt, dev);
  }
  Tensor out = detail::make_empty(self.sizes(), dt, dev);
  if (dev.is_cpu() && self.device().is_cpu()) {
    copy_on_cpu(out, self);
  } else {
    copy_between(out, self);
  }
  return out;
}

Tensor to_dtype_composite(const Tensor& self, DType dtype) {
  if (dtype == self.dtype()) return self;
  return to_copy(self, dtype, std::nullopt);
}

Tensor to_device_composite(const Tensor& self, Device device, std::optional<DType> dtype) {
  if (device == self.device() && (!dtype || *dtype == self.dtype())) return self;
  return to_copy(self, dtype, device);
}

Tensor& fill_cpu(Tensor& self, const Scalar& value) {
  cpu_fill(self, value);
  bump_version(self);
  return self;
}

Tensor& fill_cuda(Tensor& self, const Scalar& value) {
  cuda_fill(self, value);
  bump_version(self);
  return self;
}

Tensor& fill_meta(Tensor& self, const Scalar&) {
  return self;
}

Tensor& zero_composite(Tensor& self) {
  return self.fill_(0);
}

Tensor& resize_impl(Tensor& self, SymIntArrayRef size) {
  for (const auto& s : size) {
    TS_CHECK(s >= 0, ShapeError) << "[resize_] negative size in " << size;
  }
  const SymInt numel = sym_product(size);
  const SymInt need = (self.storage_offset() + numel) * static_cast<int64_t>(self.itemsize());
  StorageImpl* st = self.impl()->storage();
  if (!st->nbytes().is_symbolic() && !need.is_symbolic()) {
    if (need.expect_int() > st->nbytes().expect_int()) {
      st->grow(static_cast<size_t>(need.expect_int()));
    }
  }
  self.impl()->set_geometry(size, {}, self.storage_offset());
  return self;
}

}  // namespace

TS_REGISTER_OPS(copy_ops) {
  using namespace ops_detail;
  Library lib("aten");
  lib.def("copy_(Tensor(a!) self, Tensor src) -> Tensor(a!)", kBuiltin | kTagInplace);
  lib.impl("copy_", DeviceType::CPU, copy_any);
  lib.impl("copy_", DeviceType::CUDA, copy_any);
  lib.fake("copy_", copy_meta);
  lib.def("clone(Tensor self) -> Tensor", kBuiltin);
  lib.impl("clone", DeviceType::CPU, clone_impl);
  lib.impl("clone", DeviceType::CUDA, clone_impl);
  lib.fake("clone", clone_meta);
  lib.def("_to_copy(Tensor self, *, ScalarType? dtype=None, Device? device=None) -> Tensor",
          kBuiltin);
  lib.impl_all("_to_copy", to_copy_impl);
  lib.def("to.dtype(Tensor(a) self, ScalarType dtype) -> Tensor(a)", kBuiltin);
  lib.composite("to.dtype", to_dtype_composite);
  lib.def("to.device(Tensor(a) self, Device device, ScalarType? dtype=None) -> Tensor(a)",
          kBuiltin);
  lib.composite("to.device", to_device_composite);
  lib.def("fill_.Scalar(Tensor(a!) self, Scalar value) -> Tensor(a!)", kBuiltin | kTagInplace);
  lib.impl("fill_.Scalar", DeviceType::CPU, fill_cpu);
  lib.impl("fill_.Scalar", DeviceType::CUDA, fill_cuda);
  lib.fake("fill_.Scalar", fill_meta);
  lib.def("zero_(Tensor(a!) self) -> Tensor(a!)", kBuiltin | kTagInplace);
  lib.composite("zero_", zero_composite);
  lib.def("resize_(Tensor(a!) self, SymInt[] size) -> Tensor(a!)", kBuiltin | kTagInplace);
  lib.impl_all("resize_", resize_impl);
}

Tensor to_copy(const Tensor& a, std::optional<DType> dtype, std::optional<Device> device,
               SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::_to_copy", Tensor(const Tensor&, std::optional<DType>, std::optional<Device>), a,
          dtype, device);
}

Tensor Tensor::clone(SourceLoc loc) const {
  UserLocGuard g(loc);
  TS_CALL("aten::clone", Tensor(const Tensor&), *this);
}
Tensor Tensor::to(DType dtype, SourceLoc loc) const {
  UserLocGuard g(loc);
  TS_CALL("aten::to.dtype", Tensor(const Tensor&, DType), *this, dtype);
}
Tensor Tensor::to(Device device, SourceLoc loc) const {
  UserLocGuard g(loc);
  TS_CALL("aten::to.device", Tensor(const Tensor&, Device, std::optional<DType>), *this, device,
          std::nullopt);
}
Tensor Tensor::to(TensorOptions options, SourceLoc loc) const {
  UserLocGuard g(loc);
  TS_CALL("aten::to.device", Tensor(const Tensor&, Device, std::optional<DType>), *this,
          options.device_or(device()), options.dtype_opt());
}
Tensor Tensor::cpu(SourceLoc loc) const {
  return to(kCPU, loc);
}
Tensor& Tensor::copy_(const Tensor& src, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::copy_", Tensor & (Tensor&, const Tensor&), *this, src);
}
Tensor& Tensor::fill_(const Scalar& value, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::fill_.Scalar", Tensor & (Tensor&, const Scalar&), *this, value);
}
Tensor& Tensor::zero_(SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::zero_", Tensor & (Tensor&), *this);
}
Tensor& Tensor::resize_(SymIntArrayRef size, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::resize_", Tensor & (Tensor&, SymIntArrayRef), *this, size);
}

}  // namespace tessera
