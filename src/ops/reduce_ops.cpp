// Reductions: sum, mean, prod, amax/amin, max/min (with indices), argmax/argmin, var.
//
// The input is laid out as rows [kept, reduced] (a permuted view, copied only when the reduced
// elements are not already contiguous), then each row is reduced on the thread pool. Floating
// sums accumulate in double with eight independent lanes (deterministic, pipelines well); integer
// sums in int64. NaN propagates through max/min, and wins argmax/argmin; ties give the first index.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/cpu_loops.h"
#include "ops/device_copy.h"
#include "ops/pointwise.h"
#include "ops/register.h"

namespace tessera {
namespace {

using namespace ops_detail;

struct ReducePlan {
  SymDimVector out_shape;
  DimVector reduced;  // sorted
  DimVector kept;
};

ReducePlan plan_reduce(const Tensor& x, std::optional<IntArrayRef> dims, bool keepdim,
                       const char* op) {
  ReducePlan p;
  const int64_t nd = x.dim();
  uint64_t mask = 0;
  if (!dims || dims->empty()) {
    mask = nd >= 64 ? ~uint64_t(0) : ((uint64_t(1) << nd) - 1);
  } else {
    for (int64_t d : wrap_dims(*dims, nd, op)) mask |= uint64_t(1) << d;
  }
  for (int64_t d = 0; d < nd; ++d) {
    if (mask & (uint64_t(1) << d)) {
      p.reduced.push_back(d);
      if (keepdim) p.out_shape.push_back(1);
    } else {
      p.kept.push_back(d);
      p.out_shape.push_back(x.sizes()[d]);
    }
  }
  return p;
}

// A view of x with its kept dims first and its reduced dims last (no copy).
Tensor rows_view(const Tensor& x, const ReducePlan& p) {
  SymDimVector sizes, strides;
  for (const auto& dims : {p.kept, p.reduced}) {
    for (int64_t d : dims) {
      sizes.push_back(x.sizes()[d]);
      strides.push_back(x.strides()[d]);
    }
  }
  return detail::make_view(x, sizes, strides, x.storage_offset());
}

// A contiguous [O, N] layout of x: kept dims first, reduced dims last.
Tensor as_rows(const Tensor& x, const ReducePlan& p, int64_t& O, int64_t& N) {
  O = 1;
  N = 1;
  for (int64_t d : p.kept) O *= x.impl()->int_sizes()[d];
  for (int64_t d : p.reduced) N *= x.impl()->int_sizes()[d];
  SymDimVector sizes, strides;
  for (int64_t d : p.kept) {
    sizes.push_back(x.sizes()[d]);
    strides.push_back(x.strides()[d]);
  }
  for (int64_t d : p.reduced) {
    sizes.push_back(x.sizes()[d]);
    strides.push_back(x.strides()[d]);
  }
  return cpu_contiguous(detail::make_view(x, sizes, strides, x.storage_offset()));
}

template <class F>
void for_rows(int64_t O, int64_t N, F f) {
  const int64_t grain = std::max<int64_t>(1, cpu::kGrain / std::max<int64_t>(N, 1));
  runtime::parallel_for(0, O, grain, [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) f(o);
  });
}

// Sum of n values with eight independent double lanes (fixed order: deterministic).
template <class T>
double sum_lanes(const T* x, int64_t n) {
  double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) lane[k] += static_cast<double>(static_cast<opmath_t<T>>(x[i + k]));
  }
  double tail = 0;
  for (; i < n; ++i) tail += static_cast<double>(static_cast<opmath_t<T>>(x[i]));
  return ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7])) +
         tail;
}

// x dense with its reduced dims one block of dims and dims after it (a bias gradient's sum over
// the rows): x as [A, R, B], summed over R. Blocks of 256 columns accumulate in double over a
// fixed slice of the rows each (slices by size only: deterministic on any thread count), then the
// slices add in order. One read of x; the rows path would first copy x transposed.
bool column_block(const Tensor& x, const ReducePlan& p, int64_t& A, int64_t& R, int64_t& B) {
  if (p.reduced.empty() || !x.is_contiguous()) return false;
  const int64_t r0 = p.reduced[0], r1 = p.reduced[p.reduced.size() - 1];
  if (r1 - r0 + 1 != static_cast<int64_t>(p.reduced.size())) return false;
  const auto sizes = x.impl()->int_sizes();
  A = R = B = 1;
  for (int64_t d = 0; d < x.dim(); ++d) (d < r0 ? A : d <= r1 ? R : B) *= sizes[d];
  return B > 1;
}

template <class T>
void sum_columns(const T* in, T* out, int64_t A, int64_t R, int64_t B, bool mean) {
  constexpr int64_t kCols = 256;
  const int64_t blocks = (B + kCols - 1) / kCols;
  const int64_t slices = std::clamp<int64_t>(R / 512, 1, 16);
  const int64_t per = (R + slices - 1) / slices;
  std::vector<double> partial(static_cast<size_t>(slices * A * B));
  const int64_t tasks = A * blocks * slices;
  const int64_t grain = std::max<int64_t>(1, cpu::kGrain / std::max<int64_t>(per * kCols, 1));
  runtime::parallel_for(0, tasks, grain, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t s = t % slices, blk = (t / slices) % blocks, a = t / (slices * blocks);
      const int64_t c0 = blk * kCols, n = std::min(kCols, B - c0);
      double* acc = partial.data() + (s * A + a) * B + c0;
      const T* base = in + a * R * B + c0;
      for (int64_t r = s * per; r < std::min(R, (s + 1) * per); ++r) {
        const T* row = base + r * B;
        for (int64_t j = 0; j < n; ++j)
          acc[j] += static_cast<double>(static_cast<opmath_t<T>>(row[j]));
      }
    }
  });
  for (int64_t i = 0; i < A * B; ++i) {
    double v = 0;
    for (int64_t s = 0; s < slices; ++s) v += partial[static_cast<size_t>(s * A * B + i)];
    out[i] = convert<T>(mean ? v / static_cast<double>(R) : v);
  }
}

enum class SumKind { Sum, Mean, Prod };

DType sum_result_dtype(DType in, std::optional<DType> dtype, SumKind kind, const char* op) {
  if (dtype) return *dtype;
  if (kind == SumKind::Mean) {
    TS_CHECK(is_floating_point(in), DTypeError)
        << "[" << op << "] could not infer output dtype. Input dtype must be a floating point "
        << "dtype; got " << dtype_name(in);
    return in;
  }
  return is_integral(in, /*include_bool=*/true) ? DType::Int64 : in;
}

Tensor sum_like(const Tensor& self, std::optional<IntArrayRef> dims, bool keepdim,
                std::optional<DType> dtype, SumKind kind, const char* op) {
  const DType out_dt = sum_result_dtype(self.dtype(), dtype, kind, op);
  if (kind == SumKind::Mean) {
    TS_CHECK(is_floating_point(out_dt), DTypeError)
        << "[" << op << "] the dtype must be a floating point dtype, got " << dtype_name(out_dt);
  }
  const ReducePlan p = plan_reduce(self, dims, keepdim, op);
  Tensor out = new_output(self, p.out_shape, out_dt);
  if (!out.has_data()) return out;
  if (!self.device().is_cpu() || through_tiles()) {
    const ReduceOp r = kind == SumKind::Sum    ? ReduceOp::Sum
                       : kind == SumKind::Mean ? ReduceOp::Mean
                                               : ReduceOp::Prod;
    run_device_reduce(r, rows_view(self, p), static_cast<int64_t>(p.kept.size()), out, nullptr, op);
    return out;
  }
  const Tensor x = cpu_to_dtype(self, out_dt);
  int64_t A, R, B;
  if (kind != SumKind::Prod && is_floating_point(out_dt) && column_block(x, p, A, R, B)) {
    visit_dtype<kFloats>(out_dt, op, [&]<class T>() {
      sum_columns(static_cast<const T*>(x.impl()->data()), static_cast<T*>(out.impl()->data()), A,
                  R, B, kind == SumKind::Mean);
    });
    return out;
  }
  int64_t O, N;
  const Tensor rows = as_rows(x, p, O, N);
  visit_dtype<kNumeric>(out_dt, op, [&]<class T>() {
    const T* in = static_cast<const T*>(rows.impl()->data());
    T* o = static_cast<T*>(out.impl()->data());
    for_rows(O, N, [&](int64_t r) {
      const T* row = in + r * N;
      if constexpr (std::is_floating_point_v<opmath_t<T>>) {
        if (kind == SumKind::Prod) {
          double acc = 1;
          for (int64_t i = 0; i < N; ++i)
            acc *= static_cast<double>(static_cast<opmath_t<T>>(row[i]));
          o[r] = convert<T>(acc);
        } else {
          double s = sum_lanes(row, N);
          if (kind == SumKind::Mean) s /= static_cast<double>(N);
          o[r] = convert<T>(s);
        }
      } else {
        using U = std::make_unsigned_t<std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>>;
        U acc = kind == SumKind::Prod ? U(1) : U(0);
        for (int64_t i = 0; i < N; ++i) {
          acc = kind == SumKind::Prod ? static_cast<U>(acc * static_cast<U>(row[i]))
                                      : static_cast<U>(acc + static_cast<U>(row[i]));
        }
        o[r] = static_cast<T>(acc);
      }
    });
  });
  return out;
}

// ---- max / min / argmax / argmin ------------------------------------------------------------

template <bool IsMax, class V>
inline bool better(V cand, V best) {
  if constexpr (std::is_floating_point_v<V>) {
    if (std::isnan(best)) return false;
    if (std::isnan(cand)) return true;
  }
  return IsMax ? cand > best : cand < best;
}

// Reduces rows to the extreme value and/or its first index.
template <bool IsMax>
void extreme_rows(const Tensor& self, const ReducePlan& p, const Tensor* values,
                  const Tensor* indices, const char* op) {
  int64_t O, N;
  const Tensor rows = as_rows(self, p, O, N);
  TS_CHECK(N > 0, IndexError) << "[" << op << "] expected reduction dim to have non-zero size";
  visit_dtype<kNumericAndBool>(self.dtype(), op, [&]<class T>() {
    using V = opmath_t<T>;
    const T* in = static_cast<const T*>(rows.impl()->data());
    T* vo = values ? static_cast<T*>(values->impl()->data()) : nullptr;
    int64_t* io = indices ? static_cast<int64_t*>(indices->impl()->data()) : nullptr;
    for_rows(O, N, [&](int64_t r) {
      const T* row = in + r * N;
      V best = static_cast<V>(row[0]);
      int64_t at = 0;
      for (int64_t i = 1; i < N; ++i) {
        const V v = static_cast<V>(row[i]);
        if (better<IsMax>(v, best)) {
          best = v;
          at = i;
        }
      }
      if (vo) vo[r] = convert<T>(best);
      if (io) io[r] = at;
    });
  });
}

template <bool IsMax>
Tensor amax_impl(const Tensor& self, IntArrayRef dims, bool keepdim) {
  const char* op = IsMax ? "amax" : "amin";
  const ReducePlan p = plan_reduce(self, dims, keepdim, op);
  for (int64_t d : p.reduced) {
    TS_CHECK(!(self.sizes()[d] == 0), IndexError)
        << "[" << op << "] expected reduction dim " << d << " to have non-zero size";
  }
  Tensor out = new_output(self, p.out_shape, self.dtype());
  if (!out.has_data()) return out;
  if (!self.device().is_cpu() || through_tiles()) {
    run_device_reduce(IsMax ? ReduceOp::Max : ReduceOp::Min, rows_view(self, p),
                      static_cast<int64_t>(p.kept.size()), out, nullptr, op);
  } else {
    extreme_rows<IsMax>(self, p, &out, nullptr, op);
  }
  return out;
}

template <bool IsMax>
Tensor max_all_impl(const Tensor& self) {
  const char* op = IsMax ? "max" : "min";
  TS_CHECK(!(self.numel() == 0), ValueError)
      << "[" << op << "] operation does not have an identity, so it cannot reduce an empty tensor; "
      << "specify a dim";
  return amax_impl<IsMax>(self, {}, false);
}

template <bool IsMax>
std::tuple<Tensor, Tensor> max_dim_impl(const Tensor& self, int64_t dim, bool keepdim) {
  const char* op = IsMax ? "max" : "min";
  const int64_t d = detail::wrap_dim(dim, self.dim(), op);
  const ReducePlan p = plan_reduce(self, IntArrayRef(&d, 1), keepdim, op);
  if (self.dim() > 0) {
    TS_CHECK(!(self.sizes()[d] == 0), IndexError)
        << "[" << op << "] expected reduction dim " << d << " to have non-zero size";
  }
  Tensor values = new_output(self, p.out_shape, self.dtype());
  Tensor indices = new_output(self, p.out_shape, DType::Int64);
  if (!values.has_data()) return {values, indices};
  if (!self.device().is_cpu() || through_tiles()) {
    run_device_reduce(IsMax ? ReduceOp::Max : ReduceOp::Min, rows_view(self, p),
                      static_cast<int64_t>(p.kept.size()), values, &indices, op);
  } else {
    extreme_rows<IsMax>(self, p, &values, &indices, op);
  }
  return {values, indices};
}

template <bool IsMax>
Tensor argmax_impl(const Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  const char* op = IsMax ? "argmax" : "argmin";
  if (!dim) {
    TS_CHECK(!(self.numel() == 0), IndexError)
        << "[" << op << "] expected reduction dim to be specified for input.numel() == 0";
    if (self.has_data() && (!self.device().is_cpu() || through_tiles())) {
      // Every dim reduced in the logical order (the index is into the flattened tensor).
      const ReducePlan p = plan_reduce(self, std::nullopt, keepdim, op);
      Tensor out = new_output(self, p.out_shape, DType::Int64);
      const Tensor values = new_output(self, p.out_shape, self.dtype());
      run_device_reduce(IsMax ? ReduceOp::Max : ReduceOp::Min, rows_view(self, p), 0, values, &out,
                        op);
      return out;
    }
    const Tensor flat = self.is_contiguous()
                            ? detail::make_view(self, {self.numel()}, {1}, self.storage_offset())
                            : detail::make_view(cpu_contiguous(self), {self.numel()}, {1}, 0);
    const ReducePlan p = plan_reduce(flat, std::nullopt, keepdim, op);
    SymDimVector shape;
    if (keepdim) shape.assign(static_cast<size_t>(self.dim()), SymInt(1));
    Tensor out = new_output(self, shape, DType::Int64);
    if (out.has_data()) extreme_rows<IsMax>(flat, p, nullptr, &out, op);
    return out;
  }
  return std::get<1>(max_dim_impl<IsMax>(self, *dim, keepdim));
}

// ---- var --------------------------------------------------------------------------------------

Tensor var_impl(const Tensor& self, std::optional<IntArrayRef> dims, double correction,
                bool keepdim) {
  TS_CHECK(is_floating_point(self.dtype()), DTypeError)
      << "[var] expected a floating point input, got " << dtype_name(self.dtype());
  const ReducePlan p = plan_reduce(self, dims, keepdim, "var");
  Tensor out = new_output(self, p.out_shape, self.dtype());
  if (!out.has_data()) return out;
  if (!self.device().is_cpu() || through_tiles()) {
    run_device_reduce(ReduceOp::Var, rows_view(self, p), static_cast<int64_t>(p.kept.size()), out,
                      nullptr, "var", correction);
    return out;
  }
  int64_t O, N;
  const Tensor rows = as_rows(self, p, O, N);
  visit_dtype<kFloats>(self.dtype(), "var", [&]<class T>() {
    const T* in = static_cast<const T*>(rows.impl()->data());
    T* o = static_cast<T*>(out.impl()->data());
    for_rows(O, N, [&](int64_t r) {
      const T* row = in + r * N;
      const double mean = N > 0 ? sum_lanes(row, N) / static_cast<double>(N) : 0.0;
      double ss = 0;
      for (int64_t i = 0; i < N; ++i) {
        const double dv = static_cast<double>(static_cast<opmath_t<T>>(row[i])) - mean;
        ss += dv * dv;
      }
      const double denom = std::max(0.0, static_cast<double>(N) - correction);
      o[r] = convert<T>(N == 0 ? std::numeric_limits<double>::quiet_NaN() : ss / denom);
    });
  });
  return out;
}

}  // namespace

TS_REGISTER_OPS(reduce_ops) {
  Library lib("aten");
  const uint32_t t = kBuiltin | kTagReduction;
  lib.def("sum(Tensor self, *, ScalarType? dtype=None) -> Tensor", t);
  lib.def(
      "sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> "
      "Tensor",
      t);
  lib.def(
      "sum.IntList_out(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None, "
      "Tensor(a!) out) -> Tensor(a!)",
      t);
  lib.def("mean(Tensor self, *, ScalarType? dtype=None) -> Tensor", t);
  lib.def(
      "mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
      t);
  lib.def("prod(Tensor self, *, ScalarType? dtype=None) -> Tensor", t);
  lib.def(
      "prod.dim_int(Tensor self, int dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
      t);
  lib.def("amax(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor", t);
  lib.def("amin(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor", t);
  lib.def("max(Tensor self) -> Tensor", t);
  lib.def("min(Tensor self) -> Tensor", t);
  lib.def("max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
          t);
  lib.def("min.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
          t);
  lib.def("argmax(Tensor self, int? dim=None, bool keepdim=False) -> Tensor", t);
  lib.def("argmin(Tensor self, int? dim=None, bool keepdim=False) -> Tensor", t);
  lib.def("var(Tensor self, int[1]? dim=None, float correction=1, bool keepdim=False) -> Tensor",
          t);

  using OptDims = std::optional<IntArrayRef>;
  for (auto dev : {DeviceType::CPU, DeviceType::Meta, DeviceType::CUDA}) {
    lib.impl("sum", dev, [](const Tensor& a, std::optional<DType> dt) {
      return sum_like(a, std::nullopt, false, dt, SumKind::Sum, "sum");
    });
    lib.impl("sum.dim_IntList", dev,
             [](const Tensor& a, OptDims d, bool k, std::optional<DType> dt) {
               return sum_like(a, d, k, dt, SumKind::Sum, "sum");
             });
    lib.impl(
        "sum.IntList_out", dev,
        [](const Tensor& a, OptDims d, bool k, std::optional<DType> dt, Tensor& out) -> Tensor& {
          const Tensor r = sum_like(a, d, k, dt, SumKind::Sum, "sum");
          return write_out(out, r.sizes(), r.dtype(), "sum", {a}, [&](const Tensor& target) {
            if (target.device().is_cpu())
              cpu_copy(target, r);
            else
              copy_between(target, r);
          });
        });
    lib.impl("mean", dev, [](const Tensor& a, std::optional<DType> dt) {
      return sum_like(a, std::nullopt, false, dt, SumKind::Mean, "mean");
    });
    lib.impl("mean.dim", dev, [](const Tensor& a, OptDims d, bool k, std::optional<DType> dt) {
      return sum_like(a, d, k, dt, SumKind::Mean, "mean");
    });
    lib.impl("prod", dev, [](const Tensor& a, std::optional<DType> dt) {
      return sum_like(a, std::nullopt, false, dt, SumKind::Prod, "prod");
    });
    lib.impl("prod.dim_int", dev, [](const Tensor& a, int64_t d, bool k, std::optional<DType> dt) {
      const int64_t w = detail::wrap_dim(d, a.dim(), "prod");
      return sum_like(a, IntArrayRef(&w, 1), k, dt, SumKind::Prod, "prod");
    });
    lib.impl("amax", dev, amax_impl<true>);
    lib.impl("amin", dev, amax_impl<false>);
    lib.impl("max", dev, max_all_impl<true>);
    lib.impl("min", dev, max_all_impl<false>);
    lib.impl("max.dim", dev, max_dim_impl<true>);
    lib.impl("min.dim", dev, max_dim_impl<false>);
    lib.impl("argmax", dev, argmax_impl<true>);
    lib.impl("argmin", dev, argmax_impl<false>);
    lib.impl("var", dev, var_impl);
  }
}

// ---- public functions ---------------------------------------------------------------------------

namespace {
std::optional<IntArrayRef> opt_dims(IntArrayRef d) {
  if (d.empty()) return std::nullopt;
  return d;
}
}  // namespace

Tensor sum(const Tensor& a, std::optional<DType> dtype, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::sum", Tensor(const Tensor&, std::optional<DType>), a, dtype);
}
Tensor sum(const Tensor& a, IntArrayRef dim, bool keepdim, std::optional<DType> dtype,
           SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::sum.dim_IntList",
          Tensor(const Tensor&, std::optional<IntArrayRef>, bool, std::optional<DType>), a,
          opt_dims(dim), keepdim, dtype);
}
Tensor& sum_out(Tensor& out, const Tensor& a, IntArrayRef dim, bool keepdim,
                std::optional<DType> dtype, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::sum.IntList_out",
          Tensor & (const Tensor&, std::optional<IntArrayRef>, bool, std::optional<DType>, Tensor&),
          a, opt_dims(dim), keepdim, dtype, out);
}
Tensor mean(const Tensor& a, std::optional<DType> dtype, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::mean", Tensor(const Tensor&, std::optional<DType>), a, dtype);
}
Tensor mean(const Tensor& a, IntArrayRef dim, bool keepdim, std::optional<DType> dtype,
            SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::mean.dim",
          Tensor(const Tensor&, std::optional<IntArrayRef>, bool, std::optional<DType>), a,
          opt_dims(dim), keepdim, dtype);
}
Tensor prod(const Tensor& a, std::optional<DType> dtype, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::prod", Tensor(const Tensor&, std::optional<DType>), a, dtype);
}
Tensor prod(const Tensor& a, int64_t dim, bool keepdim, std::optional<DType> dtype, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::prod.dim_int", Tensor(const Tensor&, int64_t, bool, std::optional<DType>), a, dim,
          keepdim, dtype);
}
Tensor amax(const Tensor& a, IntArrayRef dim, bool keepdim, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::amax", Tensor(const Tensor&, IntArrayRef, bool), a, dim, keepdim);
}
Tensor amin(const Tensor& a, IntArrayRef dim, bool keepdim, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::amin", Tensor(const Tensor&, IntArrayRef, bool), a, dim, keepdim);
}
Tensor max(const Tensor& a, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::max", Tensor(const Tensor&), a);
}
Tensor min(const Tensor& a, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::min", Tensor(const Tensor&), a);
}
using MaxDimSig = std::tuple<Tensor, Tensor>(const Tensor&, int64_t, bool);
std::tuple<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::max.dim", MaxDimSig, a, dim, keepdim);
}
std::tuple<Tensor, Tensor> min(const Tensor& a, int64_t dim, bool keepdim, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::min.dim", MaxDimSig, a, dim, keepdim);
}
Tensor argmax(const Tensor& a, std::optional<int64_t> dim, bool keepdim, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::argmax", Tensor(const Tensor&, std::optional<int64_t>, bool), a, dim, keepdim);
}
Tensor argmin(const Tensor& a, std::optional<int64_t> dim, bool keepdim, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::argmin", Tensor(const Tensor&, std::optional<int64_t>, bool), a, dim, keepdim);
}
Tensor var(const Tensor& a, IntArrayRef dim, double correction, bool keepdim, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::var", Tensor(const Tensor&, std::optional<IntArrayRef>, double, bool), a,
          opt_dims(dim), correction, keepdim);
}

Tensor Tensor::sum(std::optional<DType> dtype, SourceLoc loc) const {
  return tessera::sum(*this, dtype, loc);
}
Tensor Tensor::sum(IntArrayRef dim, bool keepdim, std::optional<DType> dtype, SourceLoc loc) const {
  return tessera::sum(*this, dim, keepdim, dtype, loc);
}
Tensor Tensor::mean(SourceLoc loc) const {
  return tessera::mean(*this, std::nullopt, loc);
}
Tensor Tensor::mean(IntArrayRef dim, bool keepdim, SourceLoc loc) const {
  return tessera::mean(*this, dim, keepdim, std::nullopt, loc);
}
Tensor Tensor::amax(IntArrayRef dim, bool keepdim, SourceLoc loc) const {
  return tessera::amax(*this, dim, keepdim, loc);
}
Tensor Tensor::amin(IntArrayRef dim, bool keepdim, SourceLoc loc) const {
  return tessera::amin(*this, dim, keepdim, loc);
}
Tensor Tensor::max(SourceLoc loc) const {
  return tessera::max(*this, loc);
}
Tensor Tensor::min(SourceLoc loc) const {
  return tessera::min(*this, loc);
}
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim, SourceLoc loc) const {
  return tessera::argmax(*this, dim, keepdim, loc);
}
Tensor Tensor::argmin(std::optional<int64_t> dim, bool keepdim, SourceLoc loc) const {
  return tessera::argmin(*this, dim, keepdim, loc);
}

}  // namespace tessera
