/** \file
 * `SmallVector<T, N>`: a vector with N elements stored inline (sizes and strides of tensors), and
 * `ArrayRef<T>`: a non-owning view that, unlike std::span, binds to braced lists
 * (`x.view({2, 3})`).
 */
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <initializer_list>
#include <iterator>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace tessera {

template <class T>
class ArrayRef {
 public:
  using value_type = T;
  using iterator = const T*;
  using const_iterator = const T*;

  constexpr ArrayRef() = default;
  constexpr ArrayRef(const T& one) : data_(&one), size_(1) {}  // NOLINT
  constexpr ArrayRef(const T* data, size_t size) : data_(data), size_(size) {}
  constexpr ArrayRef(const T* begin, const T* end) : data_(begin), size_(end - begin) {}
  ArrayRef(const std::vector<T>& v) : data_(v.data()), size_(v.size()) {}  // NOLINT
  template <size_t N>
  constexpr ArrayRef(const T (&a)[N]) : data_(a), size_(N) {}  // NOLINT
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
#endif
  /** Binds a braced list for the duration of a call (the list outlives the full expression). */
  constexpr ArrayRef(std::initializer_list<T> il)  // NOLINT
      : data_(il.begin()), size_(il.size()) {}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  template <
      class C, class = decltype(std::declval<const C&>().data()),
      class = std::enable_if_t<std::is_same_v<
          std::remove_cv_t<std::remove_pointer_t<decltype(std::declval<const C&>().data())>>, T>>>
  ArrayRef(const C& c) : data_(c.data()), size_(c.size()) {}  // NOLINT

  constexpr const T* data() const {
    return data_;
  }
  constexpr size_t size() const {
    return size_;
  }
  constexpr bool empty() const {
    return size_ == 0;
  }
  constexpr const T* begin() const {
    return data_;
  }
  constexpr const T* end() const {
    return data_ + size_;
  }
  constexpr const T& operator[](size_t i) const {
    return data_[i];
  }
  constexpr const T& front() const {
    return data_[0];
  }
  constexpr const T& back() const {
    return data_[size_ - 1];
  }
  ArrayRef slice(size_t begin, size_t n) const {
    return ArrayRef(data_ + begin, n);
  }
  ArrayRef slice(size_t begin) const {
    return ArrayRef(data_ + begin, size_ - begin);
  }
  std::vector<T> vec() const {
    return std::vector<T>(begin(), end());
  }
  bool equals(ArrayRef o) const {
    return size_ == o.size_ && std::equal(begin(), end(), o.begin());
  }

 private:
  const T* data_ = nullptr;
  size_t size_ = 0;
};

template <class T, size_t N>
class SmallVector {
  static_assert(N > 0);

 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;

  SmallVector() = default;
  explicit SmallVector(size_t n, const T& v = T()) { assign(n, v); }
  SmallVector(std::initializer_list<T> il) { append(il.begin(), il.end()); }
  SmallVector(ArrayRef<T> a) { append(a.begin(), a.end()); }  // NOLINT
  template <class It, class = typename std::iterator_traits<It>::iterator_category>
  SmallVector(It b, It e) {
    append(b, e);
  }
  SmallVector(const SmallVector& o) { append(o.begin(), o.end()); }
  SmallVector(SmallVector&& o) noexcept { move_from(std::move(o)); }
  SmallVector& operator=(const SmallVector& o) {
    if (this != &o) {
      clear();
      append(o.begin(), o.end());
    }
    return *this;
  }
  SmallVector& operator=(SmallVector&& o) noexcept {
    if (this != &o) {
      clear();
      release();
      move_from(std::move(o));
    }
    return *this;
  }
  ~SmallVector() {
    clear();
    release();
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return ptr(); }
  const T* data() const { return ptr(); }
  T* begin() { return ptr(); }
  T* end() { return ptr() + size_; }
  const T* begin() const { return ptr(); }
  const T* end() const { return ptr() + size_; }
  T& operator[](size_t i) { return ptr()[i]; }
  const T& operator[](size_t i) const { return ptr()[i]; }
  T& back() { return ptr()[size_ - 1]; }
  const T& back() const { return ptr()[size_ - 1]; }
  operator ArrayRef<T>() const { return ArrayRef<T>(ptr(), size_); }  // NOLINT

  void reserve(size_t n) {
    if (n <= cap_) return;
    T* fresh = static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(alignof(T))));
    for (size_t i = 0; i < size_; ++i) {
      new (fresh + i) T(std::move(ptr()[i]));
      ptr()[i].~T();
    }
    release();
    heap_ = fresh;
    cap_ = n;
  }
  void push_back(const T& v) {
    if (size_ == cap_) {
      T copy(v);  // v may live inside this vector
      reserve(cap_ * 2);
      new (ptr() + size_) T(std::move(copy));
    } else {
      new (ptr() + size_) T(v);
    }
    ++size_;
  }
  template <class... A>
  T& emplace_back(A&&... a) {
    if (size_ == cap_) reserve(cap_ * 2);
    new (ptr() + size_) T(std::forward<A>(a)...);
    return ptr()[size_++];
  }
  void pop_back() { ptr()[--size_].~T(); }
  template <class It>
  void append(It b, It e) {
    reserve(size_ + static_cast<size_t>(std::distance(b, e)));
    for (; b != e; ++b) new (ptr() + size_++) T(*b);
  }
  void insert(T* pos, const T& v) {
    const size_t i = pos - ptr();
    push_back(v);
    std::rotate(ptr() + i, ptr() + size_ - 1, ptr() + size_);
  }
  void erase(T* pos) {
    std::move(pos + 1, end(), pos);
    pop_back();
  }
  void resize(size_t n, const T& v = T()) {
    while (size_ > n) pop_back();
    reserve(n);
    while (size_ < n) new (ptr() + size_++) T(v);
  }
  void assign(size_t n, const T& v) {
    clear();
    resize(n, v);
  }
  void clear() {
    while (size_ > 0) pop_back();
  }
  bool operator==(const SmallVector& o) const {
    return size_ == o.size_ && std::equal(begin(), end(), o.begin());
  }

 private:
  T* ptr() { return heap_ ? heap_ : reinterpret_cast<T*>(inline_); }
  const T* ptr() const { return heap_ ? heap_ : reinterpret_cast<const T*>(inline_); }
  void release() {
    if (heap_) ::operator delete(heap_, std::align_val_t(alignof(T)));
    heap_ = nullptr;
    cap_ = N;
  }
  void move_from(SmallVector&& o) {
    if (o.heap_) {
      heap_ = std::exchange(o.heap_, nullptr);
      cap_ = std::exchange(o.cap_, N);
      size_ = std::exchange(o.size_, 0);
    } else {
      for (size_t i = 0; i < o.size_; ++i) new (ptr() + i) T(std::move(o.ptr()[i]));
      size_ = o.size_;
      o.clear();
    }
  }

  alignas(T) unsigned char inline_[N * sizeof(T)];
  T* heap_ = nullptr;
  size_t size_ = 0;
  size_t cap_ = N;
};

}  // namespace tessera
