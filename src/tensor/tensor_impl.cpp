#include "tessera/tensor_impl.h"

#include <cstring>

#include "runtime/allocator.h"

namespace tessera {

IntrusivePtr<StorageImpl> StorageImpl::allocate(size_t nbytes, Device device) {
  TS_CHECK(!device.is_meta(), InternalError) << "allocate() on meta";
  const auto& a = runtime::allocator_for(device.type());
  IntrusivePtr<StorageImpl> s(new StorageImpl());
  s->data_ = a.allocate(nbytes, device);
  s->nbytes_ = static_cast<int64_t>(nbytes);
  s->device_ = device;
  s->resizable_ = true;
  return s;
}

IntrusivePtr<StorageImpl> StorageImpl::dataless(SymInt nbytes, Device device) {
  IntrusivePtr<StorageImpl> s(new StorageImpl());
  s->nbytes_ = std::move(nbytes);
  s->device_ = device;
  s->resizable_ = true;
  s->dataless_ = true;
  return s;
}

IntrusivePtr<StorageImpl> StorageImpl::wrap(void* data, size_t nbytes, Device device,
                                            Deleter deleter, void* ctx) {
  IntrusivePtr<StorageImpl> s(new StorageImpl());
  s->data_ = data;
  s->nbytes_ = static_cast<int64_t>(nbytes);
  s->device_ = device;
  s->deleter_ = deleter;
  s->ctx_ = ctx;
  s->resizable_ = false;
  return s;
}

StorageImpl::~StorageImpl() {
  if (deleter_) {
    deleter_(ctx_, data_);
  } else if (resizable_ && data_) {
    runtime::allocator_for(device_.type()).release(data_, device_);
  }
}

void StorageImpl::grow(size_t nbytes) {
  const int64_t have = nbytes_.expect_int();
  if (static_cast<int64_t>(nbytes) <= have) return;
  TS_CHECK(resizable_, ValueError)
      << "cannot resize a tensor that wraps memory tessera does not own (from_blob)";
  if (dataless_) {
    nbytes_ = static_cast<int64_t>(nbytes);
    return;
  }
  TS_CHECK(device_.is_cpu(), NotImplementedError) << "resizing storage on " << device_;
  const auto& a = runtime::allocator_for(device_.type());
  void* fresh = a.allocate(nbytes, device_);
  if (have > 0) std::memcpy(fresh, data_, static_cast<size_t>(have));
  if (data_) a.release(data_, device_);
  data_ = fresh;
  nbytes_ = static_cast<int64_t>(nbytes);
}

TensorImpl::TensorImpl(IntrusivePtr<StorageImpl> storage, DType dtype, Device device)
    : storage_(std::move(storage)), dtype_(dtype), device_(device) {
  sizes_.push_back(0);
  strides_.push_back(1);
  numel_ = 0;
  if (storage_ && !storage_->has_data()) flags_ |= kTensorNoData;
  if (device.is_meta()) flags_ |= kTensorNoData;
}

TensorImpl::~TensorImpl() = default;

void TensorImpl::set_geometry(SymIntArrayRef sizes, SymIntArrayRef strides, SymInt offset) {
  sizes_ = SymDimVector(sizes);
  if (strides.empty()) {
    strides_ = contiguous_strides(sizes);
  } else {
    TS_INTERNAL_ASSERT(strides.size() == sizes.size()) << "sizes and strides differ in rank";
    strides_ = SymDimVector(strides);
  }
  offset_ = std::move(offset);
  numel_ = sym_product(sizes_);
  symbolic_ = any_symbolic(sizes_) || any_symbolic(strides_) || offset_.is_symbolic();
  contiguous_ = -1;
}

bool TensorImpl::is_contiguous() const {
  if (contiguous_ >= 0) return contiguous_ != 0;
  bool c = true;
  if (!(numel_ == 0)) {
    SymInt expected = 1;
    for (int64_t d = dim() - 1; d >= 0; --d) {
      if (sizes_[d] == 1) continue;
      if (!(strides_[d] == expected)) {
        c = false;
        break;
      }
      expected = expected * sizes_[d];
    }
  }
  contiguous_ = c ? 1 : 0;
  return c;
}

void* TensorImpl::data() const {
  if (!has_data() || !storage_ || !storage_->data()) return nullptr;
  return static_cast<char*>(storage_->data()) +
         offset_.expect_int() * static_cast<int64_t>(itemsize(dtype_));
}

SymDimVector contiguous_strides(SymIntArrayRef sizes) {
  SymDimVector strides(sizes.size(), SymInt(1));
  SymInt acc = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    strides[d] = acc;
    // PyTorch: a size-0 or size-1 dim still advances by max(size, 1).
    const SymInt& s = sizes[d];
    if (auto v = s.maybe_as_int()) {
      acc = acc * (*v > 1 ? *v : 1);
    } else {
      acc = acc * s;
    }
  }
  return strides;
}

DimVector contiguous_int_strides(IntArrayRef sizes) {
  DimVector strides(sizes.size(), 1);
  int64_t acc = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    strides[d] = acc;
    acc *= sizes[d] > 1 ? sizes[d] : 1;
  }
  return strides;
}

}  // namespace tessera
