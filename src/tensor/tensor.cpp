#include "tessera/tensor.h"

#include <cstring>

#include "core/dtype_visit.h"

namespace tessera {

bool Tensor::is_alias_of(const Tensor& o) const {
  return defined() && o.defined() && impl_->storage() == o.impl_->storage();
}

namespace detail {
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  const int64_t n = ndim == 0 ? 1 : ndim;  // scalars accept dim 0 and -1, as PyTorch
  TS_CHECK(dim >= -n && dim < n, IndexError)
      << "[" << op << "] dimension out of range (expected to be in range of [" << -n << ", "
      << n - 1 << "], but got " << dim << ")";
  return dim < 0 ? dim + n : dim;
}
}  // namespace detail

SymInt Tensor::size(int64_t dim) const {
  TS_CHECK(this->dim() > 0, IndexError)
      << "[size] dimension specified as " << dim << " but tensor has no dimensions";
  return impl_->sizes()[detail::wrap_dim(dim, this->dim(), "size")];
}

SymInt Tensor::stride(int64_t dim) const {
  TS_CHECK(this->dim() > 0, IndexError)
      << "[stride] dimension specified as " << dim << " but tensor has no dimensions";
  return impl_->strides()[detail::wrap_dim(dim, this->dim(), "stride")];
}

namespace detail {
namespace {
thread_local TracedData* t_traced_data = nullptr;
}
TracedData* traced_data() noexcept {
  return t_traced_data;
}
TracedDataScope::TracedDataScope(TracedData* d) noexcept : saved_(t_traced_data) {
  t_traced_data = d;
}
TracedDataScope::~TracedDataScope() {
  t_traced_data = saved_;
}
}  // namespace detail

void* Tensor::data_ptr() const {
  TS_CHECK(defined(), ValueError) << "[data_ptr] the tensor is undefined";
  if (!has_data() && is_fake()) {
    if (detail::TracedData* d = detail::traced_data()) return d->data_ptr(*this);
  }
  TS_CHECK(has_data(), DataError) << "[data_ptr] a " << (is_fake() ? "fake" : "meta")
                                  << " tensor has no data";
  return impl_->data();
}

void Tensor::check_data_ptr_type(DType t) const {
  TS_CHECK(defined(), ValueError) << "[data_ptr] the tensor is undefined";
  TS_CHECK(t == dtype(), DTypeError) << "[data_ptr] expected element type " << dtype_name(dtype())
                                     << " but the requested type is " << dtype_name(t);
}

Scalar Tensor::item(SourceLoc loc) const {
  UserLocGuard g(loc);
  TS_CHECK(defined(), ValueError) << "[item] the tensor is undefined";
  TS_CHECK(numel() == 1, ValueError)
      << "[item] a tensor with " << numel() << " elements cannot be converted to a scalar";
  if (!has_data() && is_fake()) {
    if (detail::TracedData* d = detail::traced_data()) return d->item(*this, loc);
  }
  TS_CHECK(has_data(), DataError) << "[item] cannot read the value of a "
                                  << (is_fake() ? "fake" : "meta") << " tensor";
  if (device().is_cuda()) return to(kCPU).item(loc);  // synchronizes the device's stream
  TS_CHECK(device().is_cpu(), NotImplementedError) << "[item] on " << device();
  const void* p = impl_->data();
  return visit_dtype<kAllDTypes>(dtype(), "item", [&]<class T>() -> Scalar {
    const T v = *static_cast<const T*>(p);
    if constexpr (std::is_same_v<T, bool>)
      return Scalar(v);
    else if constexpr (std::is_integral_v<T>)
      return Scalar(static_cast<int64_t>(v));
    else
      return Scalar(static_cast<double>(static_cast<opmath_t<T>>(v)));
  });
}

Tensor from_blob(void* data, IntArrayRef sizes, DType dtype, IntArrayRef strides,
                 StorageImpl::Deleter deleter, void* ctx) {
  TS_CHECK(strides.empty() || strides.size() == sizes.size(), ShapeError)
      << "[from_blob] " << strides.size() << " strides for " << sizes.size() << " sizes";
  int64_t extent = 1;  // one past the largest element offset
  for (size_t d = 0; d < sizes.size(); ++d) {
    TS_CHECK(sizes[d] >= 0, ShapeError) << "[from_blob] negative size " << sizes[d];
    if (sizes[d] == 0) extent = 0;
  }
  const DimVector st = strides.empty() ? contiguous_int_strides(sizes) : DimVector(strides);
  if (extent != 0) {
    for (size_t d = 0; d < sizes.size(); ++d) extent += (sizes[d] - 1) * st[d];
  }
  auto storage =
      StorageImpl::wrap(data, static_cast<size_t>(extent) * itemsize(dtype), kCPU, deleter, ctx);
  IntrusivePtr<TensorImpl> impl(new TensorImpl(std::move(storage), dtype, kCPU));
  impl->set_geometry(to_sym(sizes), to_sym(IntArrayRef(st)), 0);
  return Tensor(std::move(impl));
}

namespace {
DimVector vector_sizes(size_t n, IntArrayRef sizes) {
  DimVector sz = sizes.empty() ? DimVector{static_cast<int64_t>(n)} : DimVector(sizes);
  int64_t numel = 1;
  for (auto s : sz) numel *= s;
  TS_CHECK(numel == static_cast<int64_t>(n), ShapeError)
      << "[from_vector] " << n << " values do not fill sizes " << IntArrayRef(sz);
  return sz;
}
}  // namespace

template <class T>
Tensor from_vector(const std::vector<T>& values, IntArrayRef sizes) {
  const DimVector sz = vector_sizes(values.size(), sizes);
  Tensor t = detail::make_empty(to_sym(IntArrayRef(sz)), dtype_of<T>(), kCPU);
  T* out = static_cast<T*>(t.impl()->data());
  for (size_t i = 0; i < values.size(); ++i) out[i] = values[i];
  return t;
}

#define TS_FROM_VECTOR(T) template Tensor from_vector<T>(const std::vector<T>&, IntArrayRef);
TS_FROM_VECTOR(bool)
TS_FROM_VECTOR(int8_t)
TS_FROM_VECTOR(int16_t)
TS_FROM_VECTOR(int32_t)
TS_FROM_VECTOR(int64_t)
TS_FROM_VECTOR(uint8_t)
TS_FROM_VECTOR(uint16_t)
TS_FROM_VECTOR(uint32_t)
TS_FROM_VECTOR(uint64_t)
TS_FROM_VECTOR(Half)
TS_FROM_VECTOR(BFloat16)
TS_FROM_VECTOR(float)
TS_FROM_VECTOR(double)
TS_FROM_VECTOR(Float8_e4m3fn)
TS_FROM_VECTOR(Float8_e5m2)
#undef TS_FROM_VECTOR

Tensor from_vector(const std::vector<double>& values, IntArrayRef sizes, DType dtype) {
  const DimVector sz = vector_sizes(values.size(), sizes);
  Tensor t = detail::make_empty(to_sym(IntArrayRef(sz)), dtype, kCPU);
  void* out = t.impl()->data();
  visit_dtype<kAllDTypes>(dtype, "from_vector", [&]<class T>() {
    for (size_t i = 0; i < values.size(); ++i) static_cast<T*>(out)[i] = convert<T>(values[i]);
  });
  return t;
}

namespace detail {

Tensor make_empty(SymIntArrayRef sizes, DType dtype, Device device, SymIntArrayRef strides) {
  for (const auto& s : sizes) {
    if (auto v = s.maybe_as_int()) {
      TS_CHECK(*v >= 0, ShapeError) << "negative dimension " << *v << " in sizes " << sizes;
    }
  }
  const SymDimVector st = strides.empty() ? contiguous_strides(sizes) : SymDimVector(strides);
  SymInt extent = 1;
  bool empty = false;
  for (const auto& s : sizes) empty = empty || (s.maybe_as_int() && *s.maybe_as_int() == 0);
  if (!empty) {
    for (size_t d = 0; d < sizes.size(); ++d) extent = extent + (sizes[d] - 1) * st[d];
  } else {
    extent = 0;
  }
  const SymInt nbytes = extent * static_cast<int64_t>(itemsize(dtype));
  IntrusivePtr<StorageImpl> storage;
  if (device.is_meta() || nbytes.is_symbolic()) {
    storage = StorageImpl::dataless(nbytes, device);
  } else {
    storage = StorageImpl::allocate(static_cast<size_t>(nbytes.expect_int()), device);
  }
  IntrusivePtr<TensorImpl> impl(new TensorImpl(std::move(storage), dtype, device));
  impl->set_geometry(sizes, st, 0);
  if (!device.is_meta() && !impl->storage()->has_data()) {
    impl->set_flag(kTensorNoData, true);
    impl->set_flag(kTensorFake, true);
  }
  return Tensor(std::move(impl));
}

Tensor make_fake(SymIntArrayRef sizes, DType dtype, Device device, SymIntArrayRef strides) {
  if (device.is_meta()) return make_empty(sizes, dtype, device, strides);
  const SymDimVector st = strides.empty() ? contiguous_strides(sizes) : SymDimVector(strides);
  SymInt extent = 1;
  for (size_t d = 0; d < sizes.size(); ++d) extent = extent + (sizes[d] - 1) * st[d];
  auto storage = StorageImpl::dataless(extent * static_cast<int64_t>(itemsize(dtype)), device);
  IntrusivePtr<TensorImpl> impl(new TensorImpl(std::move(storage), dtype, device));
  impl->set_geometry(sizes, st, 0);
  impl->set_flag(kTensorNoData, true);
  impl->set_flag(kTensorFake, true);
  return Tensor(std::move(impl));
}

namespace {
void release_block(void* block, void*) {
  static_cast<StorageImpl*>(block)->decref();
}
}  // namespace

Tensor make_in_block(StorageImpl& block, size_t offset, IntArrayRef sizes, DType dtype) {
  const SymDimVector sym_sizes = to_sym(sizes);
  const SymDimVector strides = contiguous_strides(sym_sizes);
  int64_t numel = 1;
  for (int64_t n : sizes) numel *= n;
  block.incref();
  auto storage = StorageImpl::wrap(static_cast<char*>(block.data()) + offset,
                                   static_cast<size_t>(numel) * itemsize(dtype), block.device(),
                                   release_block, &block);
  IntrusivePtr<TensorImpl> impl(new TensorImpl(std::move(storage), dtype, block.device()));
  impl->set_geometry(SymIntArrayRef(sym_sizes.data(), sym_sizes.size()),
                     SymIntArrayRef(strides.data(), strides.size()), 0);
  return Tensor(std::move(impl));
}

Tensor make_empty_like(const Tensor& like, SymIntArrayRef sizes, DType dtype,
                       SymIntArrayRef strides) {
  if (like.is_fake()) return make_fake(sizes, dtype, like.device(), strides);
  return make_empty(sizes, dtype, like.device(), strides);
}

Tensor make_view(const Tensor& base, SymIntArrayRef sizes, SymIntArrayRef strides, SymInt offset) {
  IntrusivePtr<TensorImpl> impl(
      new TensorImpl(base.impl()->storage_ptr(), base.dtype(), base.device()));
  impl->set_geometry(sizes, strides, std::move(offset));
  const uint8_t inherited = base.impl()->flags() & (kTensorNoData | kTensorFake);
  if (inherited & kTensorNoData) impl->set_flag(kTensorNoData, true);
  if (inherited & kTensorFake) impl->set_flag(kTensorFake, true);
  return Tensor(std::move(impl));
}

double read_double(const Tensor& t, int64_t linear) {
  const auto sizes = t.impl()->int_sizes();
  const auto strides = t.impl()->int_strides();
  int64_t off = 0;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    const int64_t i = linear % sizes[d];
    linear /= sizes[d];
    off += i * strides[d];
  }
  const char* base = static_cast<const char*>(t.impl()->data());
  return visit_dtype<kAllDTypes>(t.dtype(), "read", [&]<class T>() {
    return convert<double>(reinterpret_cast<const T*>(base)[off]);
  });
}

}  // namespace detail
}  // namespace tessera
