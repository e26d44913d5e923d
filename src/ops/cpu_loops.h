/** \file
 * The CPU loop engine for elementwise kernels: `StridedIter` walks an output and its inputs
 * (already broadcast to the output's shape, strides in bytes, 0 for broadcast dimensions) over
 * coalesced dimensions, in parallel chunks on the thread pool; `cpu_kernel<Out, In...>(it, f)`
 * runs `f` on each element's values in their arithmetic (opmath) type. Contiguous inner runs and
 * inputs broadcast along the inner dimension get tight loops the compiler vectorizes.
 */
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <utility>

#include "core/dtype_visit.h"
#include "runtime/thread_pool.h"
#include "tessera/tensor.h"

namespace tessera::cpu {

/** Elements per parallel chunk for cheap elementwise work. */
inline constexpr int64_t kGrain = 32768;

template <int N>  // N operands, operand 0 is the output
class StridedIter {
 public:
  /** `tensors[0]` is the output; each input must already have the output's shape (views with
   * zero strides for broadcast dimensions). */
  StridedIter(std::array<const Tensor*, N> tensors) {
    const Tensor& out = *tensors[0];
    const auto sizes = out.impl()->int_sizes();
    numel_ = out.impl()->int_numel();
    ndim_ = 0;
    for (int k = 0; k < N; ++k) {
      data_[k] = static_cast<char*>(tensors[k]->impl()->data());
      TS_INTERNAL_ASSERT(tensors[k]->dim() == out.dim())
          << "operand " << k << " has rank " << tensors[k]->dim() << ", output " << out.dim();
    }
    // Innermost first; drop size-1 dims; merge dims contiguous in every operand.
    for (int64_t d = out.dim() - 1; d >= 0; --d) {
      const int64_t size = sizes[d];
      if (size == 1) continue;
      int64_t st[N];
      for (int k = 0; k < N; ++k) {
        st[k] = tensors[k]->impl()->int_strides()[d] *
                static_cast<int64_t>(itemsize(tensors[k]->dtype()));
      }
      if (ndim_ > 0) {
        bool merge = true;
        for (int k = 0; k < N; ++k)
          merge = merge && st[k] == strides_[ndim_ - 1][k] * sizes_[ndim_ - 1];
        if (merge) {
          sizes_[ndim_ - 1] *= size;
          continue;
        }
      }
      TS_INTERNAL_ASSERT(ndim_ < kMaxDims) << "too many dimensions";
      sizes_[ndim_] = size;
      for (int k = 0; k < N; ++k) strides_[ndim_][k] = st[k];
      ++ndim_;
    }
    if (ndim_ == 0) {  // a single element
      sizes_[0] = 1;
      for (int k = 0; k < N; ++k) strides_[0][k] = 0;
      ndim_ = 1;
    }
  }

  int64_t numel() const { return numel_; }
  /** Inner-dimension byte strides of each operand. */
  const int64_t* inner_strides() const { return strides_[0]; }

  /**
   * Calls `loop(char* ptrs[N], const int64_t inner_strides[N], int64_t n)` over runs of the inner
   * dimension, splitting [0, numel) across threads.
   */
  template <class Loop>
  void for_each(Loop&& loop, int64_t grain = kGrain) const {
    if (numel_ == 0) return;
    runtime::parallel_for(0, numel_, grain, [&](int64_t begin, int64_t end) {
      int64_t idx[kMaxDims] = {};
      int64_t rem = begin;
      for (int d = 0; d < ndim_; ++d) {
        idx[d] = rem % sizes_[d];
        rem /= sizes_[d];
      }
      char* ptrs[N];
      for (int k = 0; k < N; ++k) {
        ptrs[k] = data_[k];
        for (int d = 0; d < ndim_; ++d) ptrs[k] += idx[d] * strides_[d][k];
      }
      int64_t pos = begin;
      while (pos < end) {
        const int64_t n = std::min(sizes_[0] - idx[0], end - pos);
        loop(ptrs, strides_[0], n);
        pos += n;
        // Advance to the start of the next inner run.
        for (int k = 0; k < N; ++k) ptrs[k] += n * strides_[0][k];
        idx[0] += n;
        for (int d = 0; d + 1 < ndim_ && idx[d] == sizes_[d]; ++d) {
          idx[d] = 0;
          ++idx[d + 1];
          for (int k = 0; k < N; ++k) {
            ptrs[k] += strides_[d + 1][k] - sizes_[d] * strides_[d][k];
          }
        }
      }
    });
  }

 private:
  static constexpr int kMaxDims = 16;
  char* data_[N];
  int64_t sizes_[kMaxDims];
  int64_t strides_[kMaxDims][N];
  int ndim_;
  int64_t numel_;
};

template <class T>
inline opmath_t<T> load(const void* p) {
  return static_cast<opmath_t<T>>(*static_cast<const T*>(p));
}

/**
 * Runs `out = f(in...)` elementwise. `Out` and `In...` are the operands' storage types; `f` takes
 * and returns arithmetic (opmath) values, converted with `convert<Out>`.
 */
template <class Out, class... In, class F>
void cpu_kernel(const StridedIter<1 + sizeof...(In)>& it, F f, int64_t grain = kGrain) {
  constexpr int N = 1 + sizeof...(In);
  it.for_each(
      [&](char** ptrs, const int64_t* st, int64_t n) {
        [&]<size_t... I>(std::index_sequence<I...>) {
          const bool contiguous =
              st[0] == sizeof(Out) && ((st[I + 1] == static_cast<int64_t>(sizeof(In))) && ...);
          if (contiguous) {
            Out* __restrict out = reinterpret_cast<Out*>(ptrs[0]);
            std::tuple<const In* __restrict...> in{reinterpret_cast<const In*>(ptrs[I + 1])...};
            for (int64_t i = 0; i < n; ++i) {
              out[i] = convert<Out>(f(static_cast<opmath_t<In>>(std::get<I>(in)[i])...));
            }
            return;
          }
          if constexpr (N == 3) {
            // One input broadcast along the inner dimension: hoist its value.
            using A = std::tuple_element_t<0, std::tuple<In...>>;
            using B = std::tuple_element_t<1, std::tuple<In...>>;
            if (st[0] == sizeof(Out) && st[1] == 0 && st[2] == static_cast<int64_t>(sizeof(B))) {
              Out* __restrict out = reinterpret_cast<Out*>(ptrs[0]);
              const auto a = load<A>(ptrs[1]);
              const B* __restrict b = reinterpret_cast<const B*>(ptrs[2]);
              for (int64_t i = 0; i < n; ++i)
                out[i] = convert<Out>(f(a, static_cast<opmath_t<B>>(b[i])));
              return;
            }
            if (st[0] == sizeof(Out) && st[2] == 0 && st[1] == static_cast<int64_t>(sizeof(A))) {
              Out* __restrict out = reinterpret_cast<Out*>(ptrs[0]);
              const A* __restrict a = reinterpret_cast<const A*>(ptrs[1]);
              const auto b = load<B>(ptrs[2]);
              for (int64_t i = 0; i < n; ++i)
                out[i] = convert<Out>(f(static_cast<opmath_t<A>>(a[i]), b));
              return;
            }
          }
          if constexpr (N == 4) {
            // The last input broadcast (`where(c, x, 0)`, a backward's mask): hoist its value.
            using A = std::tuple_element_t<0, std::tuple<In...>>;
            using B = std::tuple_element_t<1, std::tuple<In...>>;
            using C = std::tuple_element_t<2, std::tuple<In...>>;
            if (st[0] == sizeof(Out) && st[1] == static_cast<int64_t>(sizeof(A)) &&
                st[2] == static_cast<int64_t>(sizeof(B)) && st[3] == 0) {
              Out* __restrict out = reinterpret_cast<Out*>(ptrs[0]);
              const A* __restrict a = reinterpret_cast<const A*>(ptrs[1]);
              const B* __restrict b = reinterpret_cast<const B*>(ptrs[2]);
              const auto c = load<C>(ptrs[3]);
              for (int64_t i = 0; i < n; ++i) {
                out[i] = convert<Out>(
                    f(static_cast<opmath_t<A>>(a[i]), static_cast<opmath_t<B>>(b[i]), c));
              }
              return;
            }
          }
          for (int64_t i = 0; i < n; ++i) {
            *reinterpret_cast<Out*>(ptrs[0] + i * st[0]) =
                convert<Out>(f(load<In>(ptrs[I + 1] + i * st[I + 1])...));
          }
        }
        (std::index_sequence_for<In...>{});
      },
      grain);
}

}  // namespace tessera::cpu
