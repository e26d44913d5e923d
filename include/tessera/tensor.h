/** \file
 * `Tensor`: a strided view of typed storage on a device, with sizes that may be symbolic.
 *
 * Metadata accessors are inline. Operator methods (`view`, `sum`, `+`, ...) go through the
 * operator registry like the free functions in `ops.h`; they are declared here and defined by the
 * ops layer. Every method that can fail takes a defaulted `SourceLoc` so that errors name the
 * caller's line.
 */
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/detail/intrusive_ptr.h"
#include "tessera/device.h"
#include "tessera/dtype.h"
#include "tessera/dtype_traits.h"
#include "tessera/error.h"
#include "tessera/scalar.h"
#include "tessera/symint.h"
#include "tessera/tensor_impl.h"

/** A trailing parameter that captures the caller's file and line. */
#define TS_HERE ::tessera::SourceLoc loc = ::tessera::SourceLoc::current()

namespace tessera {

namespace autograd {
class Node;
}

/** dtype, device and requires_grad for factories: `TensorOptions().dtype(float64)`. */
class TensorOptions {
 public:
  TensorOptions() = default;
  TensorOptions(DType d) : dtype_(d) {}    // NOLINT: `zeros({2}, float64)`
  TensorOptions(Device d) : device_(d) {}  // NOLINT: `zeros({2}, Device("meta"))`

  TensorOptions dtype(DType d) const {
    auto o = *this;
    o.dtype_ = d;
    return o;
  }
  TensorOptions device(Device d) const {
    auto o = *this;
    o.device_ = d;
    return o;
  }
  TensorOptions requires_grad(bool r) const {
    auto o = *this;
    o.requires_grad_ = r;
    return o;
  }
  std::optional<DType> dtype_opt() const { return dtype_; }
  std::optional<Device> device_opt() const { return device_; }
  DType dtype_or(DType d) const { return dtype_.value_or(d); }
  Device device_or(Device d) const { return device_.value_or(d); }
  bool requires_grad() const { return requires_grad_; }

 private:
  std::optional<DType> dtype_;
  std::optional<Device> device_;
  bool requires_grad_ = false;
};

inline TensorOptions dtype(DType d) {
  return TensorOptions().dtype(d);
}
inline TensorOptions device(Device d) {
  return TensorOptions().device(d);
}

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(IntrusivePtr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return static_cast<bool>(impl_); }
  TensorImpl* impl() const { return impl_.get(); }
  const IntrusivePtr<TensorImpl>& impl_ptr() const { return impl_; }
  /** The same tensor object (not just equal values). */
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }
  /** Shares storage with `o`. */
  bool is_alias_of(const Tensor& o) const;

  // ---- metadata -------------------------------------------------------------------------------
  SymIntArrayRef sizes() const { return impl_->sizes(); }
  SymIntArrayRef strides() const { return impl_->strides(); }
  /** Size of `dim`; negative dims count from the end. */
  SymInt size(int64_t dim) const;
  SymInt stride(int64_t dim) const;
  int64_t dim() const { return impl_->dim(); }
  int64_t ndim() const { return impl_->dim(); }
  SymInt numel() const { return impl_->numel(); }
  SymInt storage_offset() const { return impl_->storage_offset(); }
  DType dtype() const { return impl_->dtype(); }
  Device device() const { return impl_->device(); }
  size_t itemsize() const { return tessera::itemsize(impl_->dtype()); }
  bool is_contiguous() const { return impl_->is_contiguous(); }
  bool is_cpu() const { return device().is_cpu() && has_data(); }
  bool is_cuda() const { return device().is_cuda(); }
  bool is_meta() const { return device().is_meta(); }
  /** A fake tensor: no data, but a real device (what the graph compiler traces with). */
  bool is_fake() const { return (impl_->flags() & kTensorFake) != 0; }
  bool has_data() const { return impl_->has_data(); }
  bool is_floating_point() const { return tessera::is_floating_point(dtype()); }
  /** Bumped by in-place writes through any view of the same storage. */
  uint32_t version() const { return impl_->storage()->version(); }
  TensorOptions options() const { return TensorOptions().dtype(dtype()).device(device()); }

  /** Address of the first element; `ValueError` for meta and fake tensors. */
  void* data_ptr() const;
  /** Typed address; `DTypeError` when `T` is not this tensor's element type. */
  template <class T>
  T* data_ptr() const {
    check_data_ptr_type(dtype_of<T>());
    return static_cast<T*>(data_ptr());
  }
  /** The value of a one-element tensor. */
  Scalar item(TS_HERE) const;
  template <class T>
  T item(TS_HERE) const {
    return item(loc).to<T>();
  }

  /** PyTorch's format: `tensor([1., 2.])`. */
  std::string str() const;

  // ---- views (share storage) ------------------------------------------------------------------
  Tensor view(SymIntArrayRef size, TS_HERE) const;
  Tensor view(DType dtype, TS_HERE) const;
  Tensor reshape(SymIntArrayRef shape, TS_HERE) const;
  Tensor permute(IntArrayRef dims, TS_HERE) const;
  Tensor transpose(int64_t dim0, int64_t dim1, TS_HERE) const;
  /** Transpose of a tensor of at most 2 dimensions. */
  Tensor t(TS_HERE) const;
  Tensor narrow(int64_t dim, SymInt start, SymInt length, TS_HERE) const;
  /** Python's `x[start:end:step]` along `dim`; bounds are clamped as Python does. */
  Tensor slice(int64_t dim, std::optional<SymInt> start = std::nullopt,
               std::optional<SymInt> end = std::nullopt, SymInt step = 1, TS_HERE) const;
  Tensor select(int64_t dim, SymInt index, TS_HERE) const;
  /** `x[i]`: select along the first dimension. */
  Tensor operator[](int64_t index) const { return select(0, index); }
  Tensor expand(SymIntArrayRef size, TS_HERE) const;
  /** A view with the given geometry over this tensor's storage (`storage_offset` defaults to this
   * view's own); every element reached must lie inside the storage. */
  Tensor as_strided(SymIntArrayRef size, SymIntArrayRef stride,
                    std::optional<SymInt> storage_offset = std::nullopt, TS_HERE) const;
  Tensor expand_as(const Tensor& other, TS_HERE) const;
  Tensor unsqueeze(int64_t dim, TS_HERE) const;
  Tensor squeeze(TS_HERE) const;
  Tensor squeeze(int64_t dim, TS_HERE) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1, TS_HERE) const;
  Tensor unflatten(int64_t dim, SymIntArrayRef sizes, TS_HERE) const;
  Tensor movedim(int64_t source, int64_t destination, TS_HERE) const;
  /** This tensor if contiguous, else a contiguous copy. */
  Tensor contiguous(TS_HERE) const;
  /** An alias that autograd does not track. */
  Tensor detach(TS_HERE) const;

  // ---- copies and conversions -----------------------------------------------------------------
  Tensor clone(TS_HERE) const;
  Tensor to(DType dtype, TS_HERE) const;
  Tensor to(Device device, TS_HERE) const;
  Tensor to(TensorOptions options, TS_HERE) const;
  Tensor cpu(TS_HERE) const;
  /** Copies `src` (broadcast, converted) into this tensor. */
  Tensor& copy_(const Tensor& src, TS_HERE);
  Tensor& fill_(const Scalar& value, TS_HERE);
  Tensor& zero_(TS_HERE);
  /** Resizes in place (reallocating when needed); the contents are unspecified. */
  Tensor& resize_(SymIntArrayRef size, TS_HERE);

  // ---- math (the free functions in ops.h as methods) --------------------------------------------
  Tensor add(const Tensor& other, const Scalar& alpha = 1, TS_HERE) const;
  Tensor sub(const Tensor& other, const Scalar& alpha = 1, TS_HERE) const;
  Tensor mul(const Tensor& other, TS_HERE) const;
  Tensor div(const Tensor& other, TS_HERE) const;
  Tensor& add_(const Tensor& other, const Scalar& alpha = 1, TS_HERE);
  Tensor& add_(const Scalar& other, TS_HERE);
  Tensor& sub_(const Tensor& other, const Scalar& alpha = 1, TS_HERE);
  Tensor& mul_(const Tensor& other, TS_HERE);
  Tensor& mul_(const Scalar& other, TS_HERE);
  Tensor& div_(const Tensor& other, TS_HERE);
  Tensor& div_(const Scalar& other, TS_HERE);
  Tensor pow(const Scalar& exponent, TS_HERE) const;
  Tensor neg(TS_HERE) const;
  Tensor abs(TS_HERE) const;
  Tensor exp(TS_HERE) const;
  Tensor log(TS_HERE) const;
  Tensor sqrt(TS_HERE) const;
  Tensor rsqrt(TS_HERE) const;
  Tensor sin(TS_HERE) const;
  Tensor cos(TS_HERE) const;
  Tensor tanh(TS_HERE) const;
  Tensor sigmoid(TS_HERE) const;
  Tensor relu(TS_HERE) const;
  Tensor sum(std::optional<DType> dtype = std::nullopt, TS_HERE) const;
  Tensor sum(IntArrayRef dim, bool keepdim = false, std::optional<DType> dtype = std::nullopt,
             TS_HERE) const;
  Tensor mean(TS_HERE) const;
  Tensor mean(IntArrayRef dim, bool keepdim = false, TS_HERE) const;
  Tensor amax(IntArrayRef dim = {}, bool keepdim = false, TS_HERE) const;
  Tensor amin(IntArrayRef dim = {}, bool keepdim = false, TS_HERE) const;
  Tensor max(TS_HERE) const;
  Tensor min(TS_HERE) const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false, TS_HERE) const;
  Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdim = false, TS_HERE) const;
  Tensor softmax(int64_t dim, TS_HERE) const;
  Tensor log_softmax(int64_t dim, TS_HERE) const;
  Tensor matmul(const Tensor& other, TS_HERE) const;
  Tensor eq(const Tensor& other, TS_HERE) const;
  Tensor ne(const Tensor& other, TS_HERE) const;
  Tensor lt(const Tensor& other, TS_HERE) const;
  Tensor le(const Tensor& other, TS_HERE) const;
  Tensor gt(const Tensor& other, TS_HERE) const;
  Tensor ge(const Tensor& other, TS_HERE) const;
  bool equal(const Tensor& other, TS_HERE) const;
  bool allclose(const Tensor& other, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false,
                TS_HERE) const;

  // ---- autograd (autograd.h) ------------------------------------------------------------------
  /** Whether gradients flow to this tensor: a leaf that requires grad, or a recorded result. */
  bool requires_grad() const;
  /** Makes a leaf require grad (floating-point dtypes only). */
  Tensor& requires_grad_(bool requires_grad = true, TS_HERE);
  /** The gradient accumulated by `backward()` (undefined until then). */
  const Tensor& grad() const;
  /** The gradient slot itself (to reset it: `x.mutable_grad() = Tensor()`). */
  Tensor& mutable_grad();
  /** The backward node that produced this tensor; null for leaves. */
  std::shared_ptr<autograd::Node> grad_fn() const;
  /** The name of `grad_fn()` ("" when there is none): printing uses it below autograd. */
  std::string grad_fn_name() const;
  /** Whether no recorded operator produced this tensor. */
  bool is_leaf() const;
  /** Which result of `grad_fn()` this tensor is. */
  uint32_t output_nr() const;
  /** Computes gradients of this tensor into the leaves (`gradient` defaults to 1 for one element).
   */
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false,
                bool create_graph = false, TS_HERE) const;

 private:
  void check_data_ptr_type(DType t) const;
  IntrusivePtr<TensorImpl> impl_;
};

/** Prints in PyTorch's format. */
std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Arithmetic and comparison operators, as PyTorch's (comparisons return bool tensors).
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, const Scalar& b);
Tensor operator+(const Scalar& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Scalar& b);
Tensor operator-(const Scalar& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Scalar& b);
Tensor operator*(const Scalar& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Scalar& b);
Tensor operator/(const Scalar& a, const Tensor& b);
Tensor operator%(const Tensor& a, const Tensor& b);
Tensor operator%(const Tensor& a, const Scalar& b);
Tensor operator-(const Tensor& a);
Tensor operator&(const Tensor& a, const Tensor& b);
Tensor operator|(const Tensor& a, const Tensor& b);
Tensor operator^(const Tensor& a, const Tensor& b);
Tensor operator~(const Tensor& a);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, const Scalar& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Scalar& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Scalar& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Scalar& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Scalar& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Scalar& b);
Tensor& operator+=(Tensor& a, const Tensor& b);
Tensor& operator+=(Tensor& a, const Scalar& b);
Tensor& operator-=(Tensor& a, const Tensor& b);
Tensor& operator*=(Tensor& a, const Tensor& b);
Tensor& operator*=(Tensor& a, const Scalar& b);
Tensor& operator/=(Tensor& a, const Tensor& b);
Tensor& operator/=(Tensor& a, const Scalar& b);

/**
 * Wraps memory the caller owns as a CPU tensor (no copy). The memory must outlive every tensor
 * that views it; `deleter`, when given, runs when the last one dies.
 */
Tensor from_blob(void* data, IntArrayRef sizes, DType dtype, IntArrayRef strides = {},
                 StorageImpl::Deleter deleter = nullptr, void* ctx = nullptr);

/** Copies values into a new CPU tensor of `sizes` (default: 1-D). */
template <class T>
Tensor from_vector(const std::vector<T>& values, IntArrayRef sizes = {});
/** Copies values, converting to `dtype`. */
Tensor from_vector(const std::vector<double>& values, IntArrayRef sizes, DType dtype);

namespace detail {
/** A new tensor with uninitialized data, without dispatch (kernels allocate outputs with it). */
Tensor make_empty(SymIntArrayRef sizes, DType dtype, Device device, SymIntArrayRef strides = {});
/** A new tensor like `like` (device, fake-ness) but with the given sizes and dtype. */
Tensor make_empty_like(const Tensor& like, SymIntArrayRef sizes, DType dtype,
                       SymIntArrayRef strides = {});
/** A contiguous tensor of `sizes` at byte `offset` of `block` (a memory plan's arena): its own
 * storage (version counter, alias identity, bounds of `nbytes`), holding a reference to the
 * block until it dies. The caller checks that it lies inside the block. */
Tensor make_in_block(StorageImpl& block, size_t offset, IntArrayRef sizes, DType dtype);
/** A view of `base`'s storage with new geometry. */
Tensor make_view(const Tensor& base, SymIntArrayRef sizes, SymIntArrayRef strides, SymInt offset);
/** A fake tensor (no data, reports `device`) for tracing. */
Tensor make_fake(SymIntArrayRef sizes, DType dtype, Device device, SymIntArrayRef strides = {});
/** Normalizes a possibly negative dimension; `IndexError` naming `op` when out of range. */
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
/** Reads element `linear` (row-major logical order) of a CPU tensor as double. */
double read_double(const Tensor& t, int64_t linear);

/** What reads a traced (fake) tensor's values in the middle of a trace: the graph compiler's
 * segmented mode (a graph break without `fullgraph`) installs one on the tracing thread, so that
 * `item()` and `data_ptr()` on a traced tensor run the graph so far instead of failing. */
class TracedData {
 public:
  virtual ~TracedData() = default;
  /** The value of a one-element traced tensor. */
  virtual Scalar item(const Tensor& traced, SourceLoc loc) = 0;
  /** The data of a traced tensor (alive until the compiled call returns). */
  virtual void* data_ptr(const Tensor& traced) = 0;
};
/** This thread's reader of traced values (null outside a segmented trace). */
TracedData* traced_data() noexcept;
/** Installs `d` on this thread for the guard's lifetime. */
class TracedDataScope {
 public:
  explicit TracedDataScope(TracedData* d) noexcept;
  ~TracedDataScope();
  TracedDataScope(const TracedDataScope&) = delete;
  TracedDataScope& operator=(const TracedDataScope&) = delete;

 private:
  TracedData* saved_;
};
}  // namespace detail

}  // namespace tessera
