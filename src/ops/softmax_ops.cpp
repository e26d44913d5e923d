// softmax, log_softmax and cumsum along one dimension: the dimension is made the contiguous inner
// one (a copy only when it is not), rows are processed on the thread pool and written back in the
// input's logical layout. Float, float16 and bfloat16 softmax rows compute in float with the tile
// runtime's exp (as compiled kernels do), 16 lanes at a time, in clones for AVX-512, AVX2 and
// baseline x86-64; float64 rows and cumsum accumulate in double.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "tessera/trt/scalar.h"

#include "ops/cpu_loops.h"
#include "ops/cpu_rows.h"
#include "ops/pointwise.h"
#include "ops/register.h"

namespace tessera {
namespace {

using namespace ops_detail;

// Runs `row(in, out, n)` over every line along `dim`: `x` is the (already converted) input,
// `out` a contiguous tensor of x's shape and dtype `out_dt` (filled here).
template <class Row>
void along_dim(const Tensor& x, int64_t dim, const Tensor& out, Row row) {
  const int64_t nd = x.dim();
  if (nd == 0) {
    SymDimVector one{1};
    along_dim(detail::make_view(x, one, one, x.storage_offset()), 0,
              detail::make_view(out, one, one, out.storage_offset()), row);
    return;
  }
  DimVector perm;
  for (int64_t d = 0; d < nd; ++d) {
    if (d != dim) perm.push_back(d);
  }
  perm.push_back(dim);
  auto permuted = [&](const Tensor& t) {
    SymDimVector sizes, strides;
    for (int64_t d : perm) {
      sizes.push_back(t.sizes()[d]);
      strides.push_back(t.strides()[d]);
    }
    return detail::make_view(t, sizes, strides, t.storage_offset());
  };
  const Tensor xp = cpu_contiguous(permuted(x));
  const Tensor op = permuted(out);
  const bool direct = op.is_contiguous();
  const Tensor res = direct ? op : detail::make_empty(op.sizes(), out.dtype(), out.device());
  const int64_t N = x.impl()->int_sizes()[dim];
  const int64_t O = N == 0 ? 0 : x.impl()->int_numel() / N;
  const char* in = static_cast<const char*>(xp.impl()->data());
  char* o = static_cast<char*>(res.impl()->data());
  const int64_t in_row = N * static_cast<int64_t>(x.itemsize());
  const int64_t out_row = N * static_cast<int64_t>(out.itemsize());
  const int64_t grain = std::max<int64_t>(1, cpu::kGrain / std::max<int64_t>(N, 1));
  runtime::parallel_for(0, O, grain, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) row(in + r * in_row, o + r * out_row, N);
  });
  if (!direct) cpu_copy(op, res);
}

// A view of t with `dim` moved last (no copy); a 0-dim tensor as one line of one element.
Tensor dim_last(const Tensor& t, int64_t dim) {
  if (t.dim() == 0) return detail::make_view(t, {1}, {1}, t.storage_offset());
  SymDimVector sizes, strides;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (d == dim) continue;
    sizes.push_back(t.sizes()[d]);
    strides.push_back(t.strides()[d]);
  }
  sizes.push_back(t.sizes()[dim]);
  strides.push_back(t.strides()[dim]);
  return detail::make_view(t, sizes, strides, t.storage_offset());
}

// The float row of softmax / log_softmax, `o` may be `x`: the max (a NaN anywhere: the row is
// NaN), exp(x - max) once per element with trt::exp (within 1 ulp; the compiled row kernels use
// the same bits), summed in pairs of float vectors into double lanes, then scaled by the float
// 1 / sum (or log_softmax: x - max - log(sum)): within 3 ulp of a double softmax (2.8 worst over
// 20 seeds of SpecialValues.SoftmaxRows...'s rows; 2.5 with double lanes and a double scale, which
// took 1.9 ms against 1.48 for a 4096 x 1024 softmax on 2 cores, torch eager 1.34).
// Eager used to take two double exps per element: 17x torch's time for a 4096 x 1024 softmax.
TS_ROW_CLONES void softmax_row_f32(const float* x, float* o, int64_t n, bool log) {
  constexpr int L = 16;
  // The max in vector values (GCC/Clang vector types: 16-wide selects the compiler keeps in
  // registers; written as arrays, it did this pass one scalar at a time).
  typedef float F __attribute__((vector_size(L * sizeof(float))));
  typedef int32_t I __attribute__((vector_size(L * sizeof(float))));
  // Two independent chains of a compare and a blend (one chain was 5 cycles a vector, a fifth of
  // the row's time); the max is exact in any order.
  F vm = F{} - INFINITY, vm1 = vm;
  I vn = I{}, vn1 = I{};
  int64_t i = 0;
  for (; i + 2 * L <= n; i += 2 * L) {
    F v, v1;
    std::memcpy(&v, x + i, sizeof v);
    std::memcpy(&v1, x + i + L, sizeof v1);
    vn |= v != v;
    vn1 |= v1 != v1;
    vm = v > vm ? v : vm;
    vm1 = v1 > vm1 ? v1 : vm1;
  }
  vn |= vn1;
  vm = vm1 > vm ? vm1 : vm;
  for (; i + L <= n; i += L) {
    F v;
    std::memcpy(&v, x + i, sizeof v);
    vn |= v != v;
    vm = v > vm ? v : vm;
  }
  float m = -INFINITY;
  bool any_nan = false;
  for (; i < n; ++i) {
    any_nan = any_nan || x[i] != x[i];
    m = x[i] > m ? x[i] : m;
  }
  for (int l = 0; l < L; ++l) {
    any_nan = any_nan || vn[l] != 0;
    m = vm[l] > m ? vm[l] : m;
  }
  if (any_nan) {
    for (i = 0; i < n; ++i) o[i] = NAN;
    return;
  }
  if (std::isinf(m) && m < 0) m = 0;  // all -inf: exp(-inf - 0) = 0, then 0 / 0 = NaN (PyTorch's)
  // Entries below max - 104 (a -inf included) become max - 104 = lo: exp gives 0 there either
  // way, and the two-sum below stays finite (a -inf made it NaN). Far from 0 (|max| >= 2^26 or
  // so) max - 104 rounds to within 104 of the max, or to the max itself, where exp(lo - max) is
  // not 0: those rows (and +inf's) take double, one element at a time.
  const float lo = m - 104.0f;
  if (!(lo - m <= -104.0f)) {
    double s = 0;
    const double md = m;
    for (int64_t i = 0; i < n; ++i) s += std::exp(static_cast<double>(x[i]) - md);
    const double ls = std::log(s), inv = 1.0 / s;
    for (int64_t i = 0; i < n; ++i) {
      const double d = static_cast<double>(x[i]) - md;
      o[i] = static_cast<float>(log ? d - ls : std::exp(d) * inv);
    }
    return;
  }
  // exp(x - max) to within ~2 ulp however far x is from the max: x - max rounded to float (d)
  // goes through exp and its rounding error r (exact, by Knuth's two-sum) multiplies the result
  // by 1 + r. (x - max rounded alone put |x - max| / 2 ulp into the result: 17 ulp at x - max =
  // -30.) d lies in [lo - max, 0], within [-128, 0]: exp's polynomial without its clamps and
  // selects (the same bits; 7% of the row's time).
  auto exp_shifted = [m, lo](float v) {
    v = v > lo ? v : lo;
    const float d = v - m, vv = d + m, mm = d - vv;
    const float r = (v - vv) + (-m - mm);
    const float e = trt::exp_poly_bounded(d);
    return TRT_FMAF(e, r, e);
  };
  // The sum's rounding must not grow with the row (a plain float sum of 50000 exponentials was
  // off by ~100 ulp): pairs of float vectors (one rounding each, within 2^-24 of their sum) add
  // into double lanes. log_softmax's log(sum) near 0 needs the sum to its last bits: float lanes
  // with their rounding errors carried (Knuth's two-sum), 10% faster than each value into double.
  // (Vector types, as the max: with arrays the compiler kept the lanes in memory.)
  typedef double D __attribute__((vector_size(L / 2 * sizeof(double))));
  D acc0 = D{}, acc1 = D{};
  F fs = F{}, fc = F{};
  double s = 0;
  i = 0;
  for (; i + 2 * L <= n; i += 2 * L) {
    F e, e1;
    for (int l = 0; l < L; ++l) e[l] = exp_shifted(x[i + l]);
    for (int l = 0; l < L; ++l) e1[l] = exp_shifted(x[i + L + l]);
    const auto add = [&](F t) {
      acc0 += __builtin_convertvector(__builtin_shufflevector(t, t, 0, 1, 2, 3, 4, 5, 6, 7), D);
      acc1 +=
          __builtin_convertvector(__builtin_shufflevector(t, t, 8, 9, 10, 11, 12, 13, 14, 15), D);
    };
    if (log) {
      const F t = fs + e, bp = t - fs;
      fc += (fs - (t - bp)) + (e - bp);
      const F t1 = t + e1, bp1 = t1 - t;
      fc += (t - (t1 - bp1)) + (e1 - bp1);
      fs = t1;
    } else {
      std::memcpy(o + i, &e, sizeof e);
      std::memcpy(o + i + L, &e1, sizeof e1);
      add(e + e1);
    }
  }
  for (; i < n; ++i) {
    const float e = exp_shifted(x[i]);
    if (!log) o[i] = e;
    s += static_cast<double>(e);
  }
  for (int l = 0; l < L / 2; ++l) s += acc0[l] + acc1[l];
  for (int l = 0; l < L; ++l) s += static_cast<double>(fs[l]) + static_cast<double>(fc[l]);
  if (log) {  // within ~1 ulp: the log of the double sum is what keeps results near 0 exact
    const float ls = static_cast<float>(std::log(s));
    for (i = 0; i < n; ++i) o[i] = (x[i] - m) - ls;
  } else {
    const float inv = static_cast<float>(1.0 / s);
    for (i = 0; i < n; ++i) o[i] = o[i] * inv;
  }
}

DType softmax_dtype(const Tensor& self, std::optional<DType> dtype, const char* op) {
  const DType dt = dtype.value_or(self.dtype());
  TS_CHECK(is_floating_point(dt) && !is_float8(dt), DTypeError)
      << "[" << op << "] expected a floating point dtype, got " << dtype_name(dt);
  return dt;
}

template <bool Log>
Tensor softmax_impl(const Tensor& self, int64_t dim, std::optional<DType> dtype) {
  const char* op = Log ? "log_softmax" : "softmax";
  const DType dt = softmax_dtype(self, dtype, op);
  dim = detail::wrap_dim(dim, self.dim(), op);
  Tensor out = new_output(self, self.sizes(), dt);
  if (!out.has_data() || out.impl()->int_numel() == 0) return out;
  if (!self.device().is_cpu() || through_tiles()) {
    run_device_row(Log ? RowOp::LogSoftmax : RowOp::Softmax, dim_last(self, dim),
                   dim_last(out, dim), op);
    return out;
  }
  const Tensor x = cpu_to_dtype(self, dt);
  if (dt != DType::Float64) {
    visit_dtype<kFloats>(dt, op, [&]<class T>() {
      if constexpr (!std::is_same_v<T, double>) {
        along_dim(x, dim, out, [](const char* pi, char* po, int64_t n) {
          if constexpr (std::is_same_v<T, float>) {
            softmax_row_f32(reinterpret_cast<const float*>(pi), reinterpret_cast<float*>(po), n,
                            Log);
          } else {  // narrow floats through a float row
            static_assert(sizeof(T) == 2);
            constexpr bool bf16 = std::is_same_v<T, BFloat16>;
            thread_local std::vector<float> row;
            row.resize(static_cast<size_t>(n));
            narrow_row_to_float(reinterpret_cast<const uint16_t*>(pi), row.data(), n, bf16);
            softmax_row_f32(row.data(), row.data(), n, Log);
            float_row_to_narrow(row.data(), reinterpret_cast<uint16_t*>(po), n, bf16);
          }
        });
      }
    });
    return out;
  }
  visit_dtype<kFloats>(dt, op, [&]<class T>() {
    using V = opmath_t<T>;
    along_dim(x, dim, out, [](const char* pi, char* po, int64_t n) {
      const T* in = reinterpret_cast<const T*>(pi);
      T* o = reinterpret_cast<T*>(po);
      V m = -std::numeric_limits<V>::infinity();
      bool nan = false;
      for (int64_t i = 0; i < n; ++i) {
        const V v = static_cast<V>(in[i]);
        nan = nan || std::isnan(v);
        m = v > m ? v : m;
      }
      if (nan) {
        for (int64_t i = 0; i < n; ++i) o[i] = convert<T>(std::numeric_limits<V>::quiet_NaN());
        return;
      }
      if (std::isinf(m) && m < 0) m = 0;  // all -inf: exp(-inf - 0) = 0, as PyTorch gives NaN below
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += std::exp(static_cast<double>(static_cast<V>(in[i]) - m));
      if (Log) {
        const double ls = std::log(s);
        for (int64_t i = 0; i < n; ++i) {
          o[i] = convert<T>(static_cast<double>(static_cast<V>(in[i]) - m) - ls);
        }
      } else {
        const double inv = 1.0 / s;
        for (int64_t i = 0; i < n; ++i) {
          o[i] = convert<T>(std::exp(static_cast<double>(static_cast<V>(in[i]) - m)) * inv);
        }
      }
    });
  });
  return out;
}

Tensor cumsum_impl(const Tensor& self, int64_t dim, std::optional<DType> dtype) {
  const DType dt = dtype.value_or(is_integral(self.dtype(), true) ? DType::Int64 : self.dtype());
  dim = detail::wrap_dim(dim, self.dim(), "cumsum");
  Tensor out = new_output(self, self.sizes(), dt);
  if (!out.has_data() || out.impl()->int_numel() == 0) return out;
  if (!self.device().is_cpu() || through_tiles()) {
    run_device_row(RowOp::Cumsum, dim_last(self, dim), dim_last(out, dim), "cumsum");
    return out;
  }
  const Tensor x = cpu_to_dtype(self, dt);
  visit_dtype<kNumeric>(dt, "cumsum", [&]<class T>() {
    using V = opmath_t<T>;
    using Acc = std::conditional_t<std::is_floating_point_v<V>, double, V>;
    along_dim(x, dim, out, [](const char* pi, char* po, int64_t n) {
      const T* in = reinterpret_cast<const T*>(pi);
      T* o = reinterpret_cast<T*>(po);
      Acc acc = 0;
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (std::is_floating_point_v<V>) {
          acc += static_cast<double>(static_cast<V>(in[i]));
        } else {
          using U = std::make_unsigned_t<V>;
          acc = static_cast<V>(static_cast<U>(acc) + static_cast<U>(in[i]));
        }
        o[i] = convert<T>(acc);
      }
    });
  });
  return out;
}

}  // namespace

TS_REGISTER_OPS(softmax_ops) {
  Library lib("aten");
  const uint32_t t = kBuiltin | kTagReduction;
  lib.def("softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor", t);
  lib.def("log_softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor", t);
  lib.def("cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor", t);
  for (auto dev : {DeviceType::CPU, DeviceType::Meta}) {
    lib.impl("softmax.int", dev, softmax_impl<false>);
    lib.impl("log_softmax.int", dev, softmax_impl<true>);
    lib.impl("cumsum", dev, cumsum_impl);
  }
  lib.impl("softmax.int", DeviceType::CUDA, softmax_impl<false>);
  lib.impl("log_softmax.int", DeviceType::CUDA, softmax_impl<true>);
  lib.impl("cumsum", DeviceType::CUDA, cumsum_impl);
}

using SoftmaxSig = Tensor(const Tensor&, int64_t, std::optional<DType>);
Tensor softmax(const Tensor& a, int64_t dim, std::optional<DType> dtype, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::softmax.int", SoftmaxSig, a, dim, dtype);
}
Tensor log_softmax(const Tensor& a, int64_t dim, std::optional<DType> dtype, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::log_softmax.int", SoftmaxSig, a, dim, dtype);
}
Tensor cumsum(const Tensor& a, int64_t dim, std::optional<DType> dtype, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::cumsum", SoftmaxSig, a, dim, dtype);
}
Tensor Tensor::softmax(int64_t dim, SourceLoc loc) const {
  return tessera::softmax(*this, dim, std::nullopt, loc);
}
Tensor Tensor::log_softmax(int64_t dim, SourceLoc loc) const {
  return tessera::log_softmax(*this, dim, std::nullopt, loc);
}

}  // namespace tessera
