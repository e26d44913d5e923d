/** \file
 * The data behind a `Tensor`: `StorageImpl` (bytes on a device, a version counter shared by all
 * views) and `TensorImpl` (sizes, strides, offset, dtype, device, flags the dispatcher reads).
 * Users rarely touch these; wrapper tensor types derive from `TensorImpl`.
 */
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "tessera/detail/intrusive_ptr.h"
#include "tessera/device.h"
#include "tessera/dtype.h"
#include "tessera/symint.h"

namespace tessera {

/** Bytes on a device. Meta and fake storages have a size but no data. */
class StorageImpl : public RefCounted {
 public:
  using Deleter = void (*)(void* ctx, void* data);

  /** Allocates `nbytes` on `device` (64-byte aligned on the CPU). */
  static IntrusivePtr<StorageImpl> allocate(size_t nbytes, Device device);
  /** A storage with no data (meta tensors, fake tensors of the graph compiler). */
  static IntrusivePtr<StorageImpl> dataless(SymInt nbytes, Device device);
  /** Wraps memory the caller owns; `deleter(ctx, data)` runs when the last tensor dies. */
  static IntrusivePtr<StorageImpl> wrap(void* data, size_t nbytes, Device device, Deleter deleter,
                                        void* ctx);

  ~StorageImpl() override;

  void* data() const { return data_; }
  bool has_data() const { return !dataless_; }
  const SymInt& nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  /** Whether `resize_` may reallocate (false for wrapped user memory). */
  bool resizable() const { return resizable_; }
  /** Grows the allocation to at least `nbytes`, keeping the contents. */
  void grow(size_t nbytes);

  /** Bumped by every in-place write through any view of this storage. */
  uint32_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  StorageImpl() = default;

  void* data_ = nullptr;
  SymInt nbytes_ = 0;
  Device device_;
  Deleter deleter_ = nullptr;
  void* ctx_ = nullptr;
  bool resizable_ = false;
  bool dataless_ = false;
  std::atomic<uint32_t> version_{0};
};

/** Per-tensor autograd data, defined by the autograd layer. */
class AutogradMetaBase {
 public:
  virtual ~AutogradMetaBase() = default;
};

/** Bits the dispatcher tests on every call (see `dispatch.h`). */
enum TensorFlags : uint8_t {
  kTensorWrapper = 1,   ///< a wrapper tensor type: its handler receives every op
  kTensorAutograd = 2,  ///< requires grad or has a grad function
  kTensorNoData = 4,    ///< meta or fake: ops run their shape function
  kTensorFake = 8,      ///< no data, but reports a real device (the compiler's fake tensors)
};

class TensorImpl : public RefCounted {
 public:
  TensorImpl(IntrusivePtr<StorageImpl> storage, DType dtype, Device device);
  ~TensorImpl() override;

  SymIntArrayRef sizes() const { return sizes_; }
  SymIntArrayRef strides() const { return strides_; }
  const SymInt& storage_offset() const { return offset_; }
  const SymInt& numel() const { return numel_; }
  int64_t dim() const { return static_cast<int64_t>(sizes_.size()); }
  /** Plain sizes; an internal error when symbolic (kernels only see plain tensors). */
  IntArrayRef int_sizes() const { return as_int_array(sizes_); }
  IntArrayRef int_strides() const { return as_int_array(strides_); }
  int64_t int_numel() const { return numel_.expect_int(); }
  int64_t int_offset() const { return offset_.expect_int(); }
  bool has_symbolic_shape() const { return symbolic_; }

  /** Sets the geometry; `strides` empty means contiguous. */
  void set_geometry(SymIntArrayRef sizes, SymIntArrayRef strides, SymInt offset);
  /** Whether the layout is row-major dense (sizes of 1 and empty tensors are). */
  bool is_contiguous() const;

  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  StorageImpl* storage() const { return storage_.get(); }
  const IntrusivePtr<StorageImpl>& storage_ptr() const { return storage_; }
  void set_storage(IntrusivePtr<StorageImpl> s) { storage_ = std::move(s); }
  /** Address of the first element; null for meta and fake tensors. */
  void* data() const;
  bool has_data() const { return (flags_ & kTensorNoData) == 0; }

  uint8_t flags() const { return flags_; }
  void set_flag(TensorFlags f, bool on) { flags_ = on ? (flags_ | f) : (flags_ & ~f); }

  AutogradMetaBase* autograd_meta() const { return autograd_meta_.get(); }
  void set_autograd_meta(std::unique_ptr<AutogradMetaBase> m) { autograd_meta_ = std::move(m); }

 private:
  IntrusivePtr<StorageImpl> storage_;
  SymDimVector sizes_, strides_;
  SymInt offset_ = 0;
  SymInt numel_ = 1;
  DType dtype_;
  Device device_;
  uint8_t flags_ = 0;
  bool symbolic_ = false;
  mutable int8_t contiguous_ = -1;  // -1: not computed yet
  std::unique_ptr<AutogradMetaBase> autograd_meta_;
};

/** Row-major strides for `sizes`. */
SymDimVector contiguous_strides(SymIntArrayRef sizes);
DimVector contiguous_int_strides(IntArrayRef sizes);

}  // namespace tessera
