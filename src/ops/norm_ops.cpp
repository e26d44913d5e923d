// layer_norm and rms_norm over the trailing `normalized_shape` dimensions; statistics in double.
// Float32 rows (and float16 / bfloat16 rows, converted to float and back) in clones for AVX-512,
// AVX2 and baseline x86-64 (cpu_rows.h): statistics in double lanes, outputs in float; float64
// one element at a time. Their backward on the CPU (norm_backward_cpu, called by the autograd
// formulas for real CPU tensors without create_graph) is one pass of rows as well.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "tessera/trt/scalar.h"

#include "ops/cpu_loops.h"
#include "ops/cpu_rows.h"
#include "ops/pointwise.h"
#include "ops/register.h"

namespace tessera {
namespace {

using namespace ops_detail;

// Checks the trailing dims of x against normalized_shape; returns the row length.
void check_norm_shapes(const char* op, const Tensor& x, IntArrayRef shape,
                       const std::optional<Tensor>& weight, const std::optional<Tensor>& bias) {
  TS_CHECK(!shape.empty(), ShapeError) << "[" << op << "] expected normalized_shape to be at least "
                                       << "1-dimensional";
  const int64_t k = static_cast<int64_t>(shape.size());
  bool ok = x.dim() >= k;
  for (int64_t i = 0; ok && i < k; ++i) ok = x.sizes()[x.dim() - k + i] == shape[i];
  TS_CHECK(ok, ShapeError) << "[" << op << "] given normalized_shape=" << shape
                           << ", expected input with shape [*, " <<
      [&] {
        std::string s;
        for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
        return s;
      }() << "], but got input of size "
                           << x.sizes();
  for (const auto* p : {&weight, &bias}) {
    if (!*p) continue;
    TS_CHECK((*p)->sizes().equals(to_sym(shape)), ShapeError)
        << "[" << op << "] expected weight and bias of shape " << shape << ", got "
        << (*p)->sizes();
    TS_CHECK((*p)->dtype() == x.dtype(), DTypeError)
        << "[" << op << "] expected weight and bias of dtype " << dtype_name(x.dtype()) << ", got "
        << dtype_name((*p)->dtype());
  }
  TS_CHECK(is_floating_point(x.dtype()) && !is_float8(x.dtype()), DTypeError)
      << "[" << op << "] expected a floating point input, got " << dtype_name(x.dtype());
}

// The sum of f(0..n) in 16 double lanes (vectorizable), then the tail and the lanes; inlined
// into the row functions' clones.
template <class F>
__attribute__((always_inline)) inline double lane_sum(int64_t n, F f) {
  constexpr int L = 16;
  double acc[L] = {}, s = 0;
  int64_t i = 0;
  for (; i + L <= n; i += L)
    for (int l = 0; l < L; ++l) acc[l] += f(i + l);
  for (; i < n; ++i) s += f(i);
  for (int l = 0; l < L; ++l) s += acc[l];
  return s;
}

// A float32 row. The statistics in one pass of 16 double lanes: the sums of x - x[0] and of its
// square (exact or within a double rounding each: a difference of two floats and its square), the
// variance from them (x[0] is one of the row's values, so the cancellation in
// S2 - S1^2 / n costs at most ~n double roundings). Then each output in float: x - mean with the
// mean as two floats (hi + lo: exact up to a rounding of each subtraction, however far the row is
// from 0), times 1/std as two floats, then one fma with the weight and the bias: within 3 ulp of
// |xhat * w| plus half an ulp of the result (NormRowsMatchADoubleReferenceInEveryAffineForm).
// The double output pass it replaces (convert x, w, b; round once) was most of the row's work:
// 4096 x 1024 with weight and bias 1.14 -> 0.61-0.68 ms on 2 cores (PyTorch eager 0.71-0.96).
TS_ROW_CLONES void norm_row_f32(const float* x, const float* w, const float* b, float* o, int64_t n,
                                double eps, bool rms) {
  // (Vector types: written with arrays of lanes, GCC split the two sums over zmm, ymm, xmm and
  // scalar registers.)
  typedef float F8 __attribute__((vector_size(8 * sizeof(float))));
  typedef double D8 __attribute__((vector_size(8 * sizeof(double))));
  const double x0 = rms ? 0.0 : static_cast<double>(x[0]);
  const D8 x0v = D8{} + x0;
  D8 s1a{}, s1b{}, s2a{}, s2b{};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    F8 u, v;
    std::memcpy(&u, x + i, sizeof u);
    std::memcpy(&v, x + i + 8, sizeof v);
    const D8 du = __builtin_convertvector(u, D8) - x0v, dv = __builtin_convertvector(v, D8) - x0v;
    s1a += du;
    s2a += du * du;
    s1b += dv;
    s2b += dv * dv;
  }
  double t1 = 0, t2 = 0;
  for (; i < n; ++i) {
    const double d = static_cast<double>(x[i]) - x0;
    t1 += d;
    t2 += d * d;
  }
  for (int l = 0; l < 8; ++l) t1 += s1a[l] + s1b[l], t2 += s2a[l] + s2b[l];
  const double dn = static_cast<double>(n);
  const double shift = rms ? 0.0 : t1 / dn;  // mean - x0
  const double var = std::max(0.0, (t2 - t1 * shift) / dn);
  const double mean = x0 + shift;
  const double inv = 1.0 / std::sqrt(var + eps);
  const float mh = static_cast<float>(mean), ml = static_cast<float>(mean - mh);
  const float ih = static_cast<float>(inv), il = static_cast<float>(inv - ih);
  auto t = [&](int64_t k) {
    const float d = (x[k] - mh) - ml;
    return TRT_FMAF(d, ih, d * il);
  };
  if (w && b) {
    for (int64_t k = 0; k < n; ++k) o[k] = TRT_FMAF(t(k), w[k], b[k]);
  } else if (w) {
    for (int64_t k = 0; k < n; ++k) o[k] = t(k) * w[k];
  } else if (b) {
    for (int64_t k = 0; k < n; ++k) o[k] = t(k) + b[k];
  } else {
    for (int64_t k = 0; k < n; ++k) o[k] = t(k);
  }
}

template <bool Rms>
Tensor norm_impl(const Tensor& x, IntArrayRef shape, const std::optional<Tensor>& weight,
                 const std::optional<Tensor>& bias, double eps) {
  const char* op = Rms ? "rms_norm" : "layer_norm";
  check_norm_shapes(op, x, shape, weight, bias);
  Tensor out = new_output(x, x.sizes(), x.dtype());
  if (!out.has_data() || out.impl()->int_numel() == 0) return out;
  if (!x.device().is_cpu() || through_tiles()) {
    const Tensor w = weight ? weight->contiguous() : Tensor(),
                 b = bias ? bias->contiguous() : Tensor();
    run_device_norm(Rms, x, static_cast<int64_t>(shape.size()), weight ? &w : nullptr,
                    bias ? &b : nullptr, eps, out, op);
    return out;
  }
  int64_t N = 1;
  for (int64_t s : shape) N *= s;
  const int64_t O = x.impl()->int_numel() / N;
  const Tensor xc = cpu_contiguous(x);
  const Tensor wc = weight ? cpu_contiguous(*weight) : Tensor();
  const Tensor bc = bias ? cpu_contiguous(*bias) : Tensor();
  if (x.dtype() == DType::Float32 || x.dtype() == DType::Float16 || x.dtype() == DType::BFloat16) {
    // float16 / bfloat16 rows through the float row: converted exactly, rounded once at the end
    // (4096 x 1024 bfloat16 with weight and bias: 4.95 -> 0.6 ms; one element at a time in
    // double before).
    const bool narrow = x.dtype() != DType::Float32, bf16 = x.dtype() == DType::BFloat16;
    const Tensor wf = wc.defined() ? cpu_to_dtype(wc, DType::Float32) : Tensor();
    const Tensor bf = bc.defined() ? cpu_to_dtype(bc, DType::Float32) : Tensor();
    const float* w = wf.defined() ? static_cast<const float*>(wf.impl()->data()) : nullptr;
    const float* b = bf.defined() ? static_cast<const float*>(bf.impl()->data()) : nullptr;
    const void* in = xc.impl()->data();
    void* o = out.impl()->data();
    runtime::parallel_for(0, O, std::max<int64_t>(1, cpu::kGrain / N), [&](int64_t r0, int64_t r1) {
      if (!narrow) {
        for (int64_t r = r0; r < r1; ++r) {
          norm_row_f32(static_cast<const float*>(in) + r * N, w, b, static_cast<float*>(o) + r * N,
                       N, eps, Rms);
        }
        return;
      }
      // One buffer per chunk of rows (a thread_local would grow the library's TLS segment past
      // what a late dlopen allows: LibraryTls.StaticTlsSegmentFitsTheDlopenSurplus).
      std::vector<float> row(static_cast<size_t>(N));
      for (int64_t r = r0; r < r1; ++r) {
        narrow_row_to_float(static_cast<const uint16_t*>(in) + r * N, row.data(), N, bf16);
        norm_row_f32(row.data(), w, b, row.data(), N, eps, Rms);  // in place: o[k] after x[k]
        float_row_to_narrow(row.data(), static_cast<uint16_t*>(o) + r * N, N, bf16);
      }
    });
    return out;
  }
  visit_dtype<kFloats>(x.dtype(), op, [&]<class T>() {
    using V = opmath_t<T>;
    const T* in = static_cast<const T*>(xc.impl()->data());
    const T* w = wc.defined() ? static_cast<const T*>(wc.impl()->data()) : nullptr;
    const T* b = bc.defined() ? static_cast<const T*>(bc.impl()->data()) : nullptr;
    T* o = static_cast<T*>(out.impl()->data());
    const int64_t grain = std::max<int64_t>(1, cpu::kGrain / N);
    runtime::parallel_for(0, O, grain, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* row = in + r * N;
        double mean = 0, ss = 0;
        if (!Rms) {
          for (int64_t i = 0; i < N; ++i) mean += static_cast<double>(static_cast<V>(row[i]));
          mean /= static_cast<double>(N);
        }
        for (int64_t i = 0; i < N; ++i) {
          const double d = static_cast<double>(static_cast<V>(row[i])) - mean;
          ss += d * d;
        }
        const double inv = 1.0 / std::sqrt(ss / static_cast<double>(N) + eps);
        T* orow = o + r * N;
        for (int64_t i = 0; i < N; ++i) {
          double y = (static_cast<double>(static_cast<V>(row[i])) - mean) * inv;
          if (w) y *= static_cast<double>(static_cast<V>(w[i]));
          if (b) y += static_cast<double>(static_cast<V>(b[i]));
          orow[i] = convert<T>(y);
        }
      }
    });
  });
  return out;
}

// One row of layer_norm's (rms_norm's) backward: the row's statistics as the forward computes
// them, x's gradient rstd * (g w - mean(g w) - xhat mean(g w xhat)) (no mean(g w) term for
// rms_norm) into dx when given, and g * xhat and g added into dw and db when given. Four passes
// over the row: the mean, the squares, the sums (with dw and db), dx.
template <class T>
__attribute__((always_inline)) inline void norm_backward_row(const T* x, const T* w, const T* g,
                                                             T* dx, double* dw, double* db,
                                                             int64_t n, double eps, bool rms) {
  using V = opmath_t<T>;
  constexpr int L = 16;
  const auto at = [](const T* p, int64_t i) { return static_cast<double>(static_cast<V>(p[i])); };
  const double dn = static_cast<double>(n);
  const double mean = rms ? 0.0 : lane_sum(n, [&](int64_t i) { return at(x, i); }) / dn;
  const double ss = lane_sum(n, [&](int64_t i) {
    const double d = at(x, i) - mean;
    return d * d;
  });
  const double rstd = 1.0 / std::sqrt(ss / dn + eps);
  const auto xhat = [&](int64_t i) { return (at(x, i) - mean) * rstd; };
  const auto gw = [&](int64_t i) { return w ? at(g, i) * at(w, i) : at(g, i); };
  // sum(g w) and sum(g w xhat) in lanes, dw and db alongside.
  double sa[L] = {}, sb[L] = {}, ta = 0, tb = 0;
  const auto step = [&](int64_t i, double& a, double& b) {
    const double xh = xhat(i), gi = at(g, i), gwi = gw(i);
    a += gwi;
    b += gwi * xh;
    if (dw) dw[i] += gi * xh;
    if (db) db[i] += gi;
  };
  int64_t i = 0;
  for (; i + L <= n; i += L)
    for (int l = 0; l < L; ++l) step(i + l, sa[l], sb[l]);
  for (; i < n; ++i) step(i, ta, tb);
  for (int l = 0; l < L; ++l) ta += sa[l], tb += sb[l];
  if (!dx) return;
  const double a = rms ? 0.0 : ta / dn, b = tb / dn;
  for (int64_t k = 0; k < n; ++k) dx[k] = convert<T>(rstd * (gw(k) - a - xhat(k) * b));
}

// The float32 instantiation in clones for AVX-512, AVX2 and baseline x86-64 (as the forward's).
TS_ROW_CLONES void norm_backward_row_f32(const float* x, const float* w, const float* g, float* dx,
                                         double* dw, double* db, int64_t n, double eps, bool rms) {
  norm_backward_row<float>(x, w, g, dx, dw, db, n, eps, rms);
}

}  // namespace

namespace ops_detail {

NormGrads norm_backward_cpu(bool rms, const Tensor& x, int64_t normalized, const Tensor* w,
                            const Tensor& g, double eps, bool need_x, bool need_w, bool need_b) {
  const char* op = rms ? "rms_norm_backward" : "layer_norm_backward";
  TS_CHECK(x.device().is_cpu() && g.device().is_cpu() && g.sizes().equals(x.sizes()) &&
               g.dtype() == x.dtype() && normalized >= 1 && normalized <= x.dim(),
           InternalError)
      << "[" << op << "] expects CPU x and its gradient of one shape and dtype";
  need_w = need_w && w != nullptr;
  need_b = need_b && !rms;
  NormGrads r;
  std::vector<SymInt> wshape;
  int64_t N = 1;
  for (int64_t d = x.dim() - normalized; d < x.dim(); ++d) {
    wshape.push_back(x.sizes()[d]);
    N *= x.sizes()[d].expect_int();
  }
  if (need_x) r.x = new_output(x, x.sizes(), x.dtype());
  if (need_w) r.w = new_output(x, wshape, x.dtype());
  if (need_b) r.b = new_output(x, wshape, x.dtype());
  const int64_t total = x.impl()->int_numel();
  if (N == 0) return r;
  const int64_t O = total / N;
  // Fixed blocks of rows, each with its own double partial sums of dw and db (at most 32 MiB
  // of them), summed in block order at the end.
  const int64_t blocks = std::clamp<int64_t>(std::min<int64_t>(64, (int64_t{1} << 22) / N), 1,
                                             std::max<int64_t>(O, 1));
  const int64_t per = (O + blocks - 1) / blocks;
  const bool sums = need_w || need_b;
  std::vector<double> pw(need_w ? static_cast<size_t>(blocks * N) : 0),
      pb(need_b ? static_cast<size_t>(blocks * N) : 0);
  const Tensor xc = cpu_contiguous(x), gc = cpu_contiguous(g);
  const Tensor wc = w ? cpu_contiguous(*w) : Tensor();
  visit_dtype<kFloats>(x.dtype(), op, [&]<class T>() {
    const T* xp = static_cast<const T*>(xc.impl()->data());
    const T* gp = static_cast<const T*>(gc.impl()->data());
    const T* wp = w ? static_cast<const T*>(wc.impl()->data()) : nullptr;
    T* dxp = need_x ? static_cast<T*>(r.x.impl()->data()) : nullptr;
    const int64_t grain = sums ? 1 : std::max<int64_t>(1, cpu::kGrain / N);
    const int64_t units = sums ? blocks : O;
    runtime::parallel_for(0, units, grain, [&](int64_t u0, int64_t u1) {
      for (int64_t u = u0; u < u1; ++u) {
        const int64_t r0 = sums ? u * per : u, r1 = sums ? std::min(O, r0 + per) : u + 1;
        double* dw = need_w ? pw.data() + u * N : nullptr;
        double* db = need_b ? pb.data() + u * N : nullptr;
        for (int64_t row = r0; row < r1; ++row) {
          T* dxr = dxp ? dxp + row * N : nullptr;
          if constexpr (std::is_same_v<T, float>) {
            norm_backward_row_f32(xp + row * N, wp, gp + row * N, dxr, dw, db, N, eps, rms);
          } else {
            norm_backward_row<T>(xp + row * N, wp, gp + row * N, dxr, dw, db, N, eps, rms);
          }
        }
      }
    });
    for (auto [part, out] : {std::pair{&pw, &r.w}, std::pair{&pb, &r.b}}) {
      if (part->empty()) continue;
      T* o = static_cast<T*>(out->impl()->data());
      for (int64_t i = 0; i < N; ++i) {
        double s = 0;
        for (int64_t u = 0; u < blocks; ++u) s += (*part)[static_cast<size_t>(u * N + i)];
        o[i] = convert<T>(s);
      }
    }
  });
  return r;
}

double default_norm_eps(DType t) {
  switch (t) {
    case DType::Float16:
      return 0.0009765625;
    case DType::BFloat16:
      return 0.0078125;
    case DType::Float64:
      return 2.220446049250313e-16;
    default:
      return 1.1920928955078125e-07;
  }
}

}  // namespace ops_detail

TS_REGISTER_OPS(norm_ops) {
  Library lib("aten");
  lib.def(
      "layer_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
      "float eps=1e-05) -> Tensor",
      kBuiltin);
  lib.def(
      "rms_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, float? eps=None) -> "
      "Tensor",
      kBuiltin);
  for (auto dev : {DeviceType::CPU, DeviceType::Meta, DeviceType::CUDA}) {
    lib.impl("layer_norm", dev, norm_impl<false>);
    lib.impl("rms_norm", dev,
             [](const Tensor& x, IntArrayRef shape, const std::optional<Tensor>& w,
                std::optional<double> eps) {
               return norm_impl<true>(x, shape, w, std::nullopt,
                                      eps.value_or(default_norm_eps(x.dtype())));
             });
  }
}

Tensor layer_norm(const Tensor& x, IntArrayRef shape, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::layer_norm",
          Tensor(const Tensor&, IntArrayRef, const std::optional<Tensor>&,
                 const std::optional<Tensor>&, double),
          x, shape, weight, bias, eps);
}
Tensor rms_norm(const Tensor& x, IntArrayRef shape, const std::optional<Tensor>& weight,
                std::optional<double> eps, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::rms_norm",
          Tensor(const Tensor&, IntArrayRef, const std::optional<Tensor>&, std::optional<double>),
          x, shape, weight, eps);
}

}  // namespace tessera
