/** \file
 * A small intrusive reference-counted pointer (one atomic in the object, one word in the handle),
 * for the objects tensors and symbolic integers share.
 */
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>

namespace tessera {

/** Base of intrusively counted objects. */
class RefCounted {
 public:
  RefCounted() = default;
  RefCounted(const RefCounted&) = delete;
  RefCounted& operator=(const RefCounted&) = delete;
  virtual ~RefCounted() = default;

  void incref() const noexcept { refcount_.fetch_add(1, std::memory_order_relaxed); }
  void decref() const noexcept {
    if (refcount_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  uint32_t use_count() const noexcept { return refcount_.load(std::memory_order_relaxed); }

 private:
  mutable std::atomic<uint32_t> refcount_{0};
};

template <class T>
class IntrusivePtr {
 public:
  IntrusivePtr() noexcept = default;
  IntrusivePtr(std::nullptr_t) noexcept {}  // NOLINT
  /** Adopts `p` and counts one more reference. */
  explicit IntrusivePtr(T* p) noexcept : p_(p) {
    if (p_) p_->incref();
  }
  IntrusivePtr(const IntrusivePtr& o) noexcept : p_(o.p_) {
    if (p_) p_->incref();
  }
  IntrusivePtr(IntrusivePtr&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  template <class U>
  IntrusivePtr(const IntrusivePtr<U>& o) noexcept
      : IntrusivePtr(static_cast<T*>(o.get())) {}  // NOLINT
  ~IntrusivePtr() {
    if (p_) p_->decref();
  }
  IntrusivePtr& operator=(IntrusivePtr o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }

  T* get() const noexcept { return p_; }
  T* operator->() const noexcept { return p_; }
  T& operator*() const noexcept { return *p_; }
  explicit operator bool() const noexcept { return p_ != nullptr; }
  bool operator==(const IntrusivePtr& o) const noexcept { return p_ == o.p_; }
  void reset() noexcept { IntrusivePtr().swap_with(*this); }
  void swap_with(IntrusivePtr& o) noexcept { std::swap(p_, o.p_); }

 private:
  T* p_ = nullptr;
};

template <class T, class... Args>
IntrusivePtr<T> make_intrusive(Args&&... args) {
  return IntrusivePtr<T>(new T(std::forward<Args>(args)...));
}

}  // namespace tessera
