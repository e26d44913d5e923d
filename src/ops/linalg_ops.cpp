// matmul (torch.matmul's rules: dot, matrix-vector, matrix-matrix, batched with broadcasting)
// and linear. float32/float64 go to OpenBLAS when the build found it, else to a cache-blocked
// kernel parallel over rows; float16/bfloat16 compute in float32; integers use the same kernel.
// On CUDA: cuBLAS (loaded with dlopen) for floats, else the tile lowering's kernel.
#include <atomic>
#include <cstring>

#include "ops/cpu_loops.h"
#include "ops/linalg.h"
#include "ops/pointwise.h"
#include "ops/pointwise_functors.h"
#include "ops/register.h"
#include "runtime/cuda/cublas.h"
#include "tessera/version.h"

#if defined(TESSERA_HAVE_OPENBLAS)
#include <cblas.h>
#endif

namespace tessera {
namespace {

using namespace ops_detail;

std::atomic<bool> g_force_builtin{false};

// C[M,N] = A[M,K] @ B[K,N], all row-major and contiguous.
template <class T>
void gemm_blocked(int64_t M, int64_t N, int64_t K, const T* A, const T* B, T* C) {
  constexpr int64_t kBlockK = 256, kBlockN = 1024;
  const int64_t grain = std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(N * K, 1));
  runtime::parallel_for(0, M, grain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) std::memset(C + i * N, 0, sizeof(T) * static_cast<size_t>(N));
    for (int64_t kk = 0; kk < K; kk += kBlockK) {
      const int64_t k1 = std::min(K, kk + kBlockK);
      for (int64_t jj = 0; jj < N; jj += kBlockN) {
        const int64_t j1 = std::min(N, jj + kBlockN);
        for (int64_t i = i0; i < i1; ++i) {
          T* __restrict c = C + i * N;
          for (int64_t k = kk; k < k1; ++k) {
            const T a = A[i * K + k];
            const T* __restrict b = B + k * N;
            if constexpr (std::is_integral_v<T>) {
              // Integers wrap (computed unsigned: never undefined), as PyTorch's.
              for (int64_t j = jj; j < j1; ++j) c[j] = pw::wrap_add(c[j], pw::wrap_mul(a, b[j]));
            } else {
              for (int64_t j = jj; j < j1; ++j) c[j] += a * b[j];
            }
          }
        }
      }
    }
  });
}

template <class T>
void gemm(int64_t M, int64_t N, int64_t K, const T* A, const T* B, T* C) {
#if defined(TESSERA_HAVE_OPENBLAS)
  if (g_force_builtin.load(std::memory_order_relaxed)) {
    gemm_blocked(M, N, K, A, B, C);
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(M), static_cast<int>(N),
                static_cast<int>(K), 1.0f, A, static_cast<int>(K), B, static_cast<int>(N), 0.0f, C,
                static_cast<int>(N));
    return;
  } else if constexpr (std::is_same_v<T, double>) {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(M), static_cast<int>(N),
                static_cast<int>(K), 1.0, A, static_cast<int>(K), B, static_cast<int>(N), 0.0, C,
                static_cast<int>(N));
    return;
  }
#endif
  gemm_blocked(M, N, K, A, B, C);
}

struct MatmulShape {
  SymDimVector out;    // final output shape
  SymDimVector batch;  // broadcast batch dims
  SymInt M, K, N;
  bool a_vec, b_vec;  // 1-D operands
};

MatmulShape matmul_shape(const Tensor& a, const Tensor& b) {
  TS_CHECK(a.dim() >= 1 && b.dim() >= 1, ShapeError)
      << "[matmul] both arguments need at least 1 dimension, but got " << a.dim() << "D and "
      << b.dim() << "D";
  MatmulShape s;
  s.a_vec = a.dim() == 1;
  s.b_vec = b.dim() == 1;
  s.M = s.a_vec ? SymInt(1) : a.sizes()[a.dim() - 2];
  s.K = a.sizes()[a.dim() - 1];
  const SymInt kb = s.b_vec ? b.sizes()[0] : b.sizes()[b.dim() - 2];
  s.N = s.b_vec ? SymInt(1) : b.sizes()[b.dim() - 1];
  TS_CHECK(s.K == kb, ShapeError) << "[matmul] mat1 and mat2 shapes cannot be multiplied ("
                                  << (s.a_vec ? SymInt(1) : s.M) << "x" << s.K << " and " << kb
                                  << "x" << s.N << "); shapes " << a.sizes() << " and "
                                  << b.sizes();
  const SymIntArrayRef ab = s.a_vec ? SymIntArrayRef() : a.sizes().slice(0, a.dim() - 2);
  const SymIntArrayRef bb = s.b_vec ? SymIntArrayRef() : b.sizes().slice(0, b.dim() - 2);
  s.batch = broadcast_shapes(ab, bb, "matmul");
  s.out = s.batch;
  if (!s.a_vec) s.out.push_back(s.M);
  if (!s.b_vec) s.out.push_back(s.N);
  return s;
}

// How a BLAS (cuBLAS on the GPU, OpenBLAS on the CPU) reads `x` ([batch..., R, C]) where it lies:
// its matrices row-major (unit stride along C) or column-major (unit stride along R, a transposed
// weight or activation), its batch dimensions one stride apart or all broadcast. Nothing when it
// cannot (the caller copies).
std::optional<runtime::cuda::GemmOperand> gemm_operand(const Tensor& x, int64_t R, int64_t C) {
  constexpr int64_t kMax = 0x7fffffff;
  const int64_t nd = x.dim();
  const int64_t sr = x.stride(nd - 2).expect_int(), sc = x.stride(nd - 1).expect_int();
  runtime::cuda::GemmOperand g;
  g.data = static_cast<const char*>(x.impl()->data());
  if ((C == 1 || sc == 1) && (R == 1 ? C : sr) >= std::max<int64_t>(1, C)) {
    g.ld = R == 1 ? std::max<int64_t>(1, C) : sr;
  } else if ((R == 1 || sr == 1) && (C == 1 ? R : sc) >= std::max<int64_t>(1, R)) {
    g.transposed = true;
    g.ld = C == 1 ? std::max<int64_t>(1, R) : sc;
  } else {
    return std::nullopt;
  }
  if (g.ld > kMax) return std::nullopt;
  // The batch dimensions: one stride for the flattened batch index (or 0 for all broadcast).
  std::optional<int64_t> stride;
  int64_t inner = 1;  // batches inside the dimension looked at
  for (int64_t d = nd - 3; d >= 0; --d) {
    const int64_t n = x.size(d).expect_int(), st = x.stride(d).expect_int();
    if (n == 1) continue;
    if (!stride) {
      stride = st;
    } else if (st != *stride * inner) {
      return std::nullopt;
    }
    inner *= n;
  }
  g.batch_stride = stride.value_or(0);
  if (g.batch_stride < 0) return std::nullopt;
  return g;
}

// CPU float32/float64 products through OpenBLAS reading the operands where they lie, as cuBLAS
// does on the GPU: a transposed weight or activation (a backward's `w.t()`, `x.t()`) is passed
// as BLAS's transpose flag instead of copied (copying them was a tenth of the CPU MLP block's
// training step: docs/benchmarks.md). False where BLAS is absent or forced off, or an operand's
// layout needs a copy; `out` is contiguous of the operands' dtype.
bool blas_gemm_strided(const Tensor& out, const Tensor& A, const Tensor& B, int64_t batches,
                       int64_t M, int64_t N, int64_t K) {
#if defined(TESSERA_HAVE_OPENBLAS)
  const DType dt = out.dtype();
  if (g_force_builtin.load(std::memory_order_relaxed) || K == 0 ||
      (dt != DType::Float32 && dt != DType::Float64) || std::max({M, N, K}) > 0x7fffffff)
    return false;
  const auto ga = gemm_operand(A, M, K), gb = gemm_operand(B, K, N);
  if (!ga || !gb) return false;
  const auto ta = ga->transposed ? CblasTrans : CblasNoTrans;
  const auto tb = gb->transposed ? CblasTrans : CblasNoTrans;
  const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K);
  const int lda = static_cast<int>(ga->ld), ldb = static_cast<int>(gb->ld);
  for (int64_t i = 0; i < batches; ++i) {
    if (dt == DType::Float32) {
      const float* pa = static_cast<const float*>(ga->data) + i * ga->batch_stride;
      const float* pb = static_cast<const float*>(gb->data) + i * gb->batch_stride;
      float* pc = static_cast<float*>(out.impl()->data()) + i * M * N;
      cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, pa, lda, pb, ldb, 0.0f, pc, n);
    } else {
      const double* pa = static_cast<const double*>(ga->data) + i * ga->batch_stride;
      const double* pb = static_cast<const double*>(gb->data) + i * gb->batch_stride;
      double* pc = static_cast<double*>(out.impl()->data()) + i * M * N;
      cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, pa, lda, pb, ldb, 0.0, pc, n);
    }
  }
  return true;
#else
  (void)out, (void)A, (void)B, (void)batches, (void)M, (void)N, (void)K;
  return false;
#endif
}

// GPU tensors (and CPU ones under ScopedThroughTiles): cuBLAS for floats on CUDA where it loads
// (unless the built-in kernel is forced), reading the operands where they lie when their
// matrices are row- or column-major (a transposed view needs no copy); else the tile lowering's
// kernel on contiguous batches.
void matmul_on_device(const Tensor& out, const Tensor& a, const Tensor& b, const MatmulShape& s,
                      const SymDimVector& a_full, const SymDimVector& b_full) {
  const int64_t M = s.M.expect_int(), K = s.K.expect_int(), N = s.N.expect_int();
  if (K == 0) {
    Tensor o = out;
    o.zero_();
    return;
  }
  Tensor a2 = a, b2 = b;
  if (s.a_vec) a2 = detail::make_view(a2, {1, s.K}, {0, a2.strides()[0]}, a2.storage_offset());
  if (s.b_vec) b2 = detail::make_view(b2, {s.K, 1}, {b2.strides()[0], 0}, b2.storage_offset());
  Tensor A = broadcast_to(a2, a_full), B = broadcast_to(b2, b_full);
  int64_t batches = 1;
  for (const auto& d : s.batch) batches *= d.expect_int();
  const DType dt = out.dtype();
  constexpr int64_t kMax = 0x7fffffff;
  const bool fits = std::max({M, N, K, batches}) <= kMax;
  if (out.device().is_cuda() && is_floating_point(dt) && fits &&
      !g_force_builtin.load(std::memory_order_relaxed) && runtime::cuda::cublas()) {
    using runtime::cuda::GemmType;
    const GemmType t = dt == DType::Float16    ? GemmType::F16
                       : dt == DType::BFloat16 ? GemmType::BF16
                       : dt == DType::Float32  ? GemmType::F32
                                               : GemmType::F64;
    auto ga = gemm_operand(A, M, K), gb = gemm_operand(B, K, N);
    if (!ga) ga = gemm_operand(A = A.contiguous(), M, K);
    if (!gb) gb = gemm_operand(B = B.contiguous(), K, N);
    TS_INTERNAL_ASSERT(ga && gb) << "[matmul] contiguous operands cuBLAS cannot read";
    runtime::cuda::gemm_batched(out.device().index(), t, batches, M, N, K, *ga, *gb,
                                out.impl()->data());
    return;
  }
  run_device_matmul(A.contiguous(), B.contiguous(), out, batches, M, N, K);
}

// Writes a @ b into `out` (contiguous, of the result dtype).
void matmul_into(const Tensor& out, const Tensor& a, const Tensor& b, const MatmulShape& s,
                 DType dt) {
  const int64_t M = s.M.expect_int(), K = s.K.expect_int(), N = s.N.expect_int();
  SymDimVector a_full(s.batch), b_full(s.batch);
  a_full.push_back(s.M);
  a_full.push_back(s.K);
  b_full.push_back(s.K);
  b_full.push_back(s.N);
  if (!out.device().is_cpu() || through_tiles()) {
    matmul_on_device(out, a, b, s, a_full, b_full);
    return;
  }
  const DType compute = (dt == DType::Float16 || dt == DType::BFloat16) ? DType::Float32 : dt;
  Tensor a2 = cpu_to_dtype(a, compute), b2 = cpu_to_dtype(b, compute);
  if (s.a_vec) a2 = detail::make_view(a2, {1, s.K}, {0, a2.strides()[0]}, a2.storage_offset());
  if (s.b_vec) b2 = detail::make_view(b2, {s.K, 1}, {b2.strides()[0], 0}, b2.storage_offset());
  int64_t batches = 1;
  for (const auto& d : s.batch) batches *= d.expect_int();
  if (compute == dt &&
      blas_gemm_strided(out, broadcast_to(a2, a_full), broadcast_to(b2, b_full), batches, M, N, K))
    return;
  const Tensor A = cpu_contiguous(broadcast_to(a2, a_full));
  const Tensor B = cpu_contiguous(broadcast_to(b2, b_full));
  Tensor C = compute == dt ? out : detail::make_empty(out.sizes(), compute, out.device());
  visit_dtype<kNumeric>(compute, "matmul", [&]<class T>() {
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      TS_INTERNAL_ASSERT(false) << "narrow floats compute in float32";
    } else {
      const T* pa = static_cast<const T*>(A.impl()->data());
      const T* pb = static_cast<const T*>(B.impl()->data());
      T* pc = static_cast<T*>(C.impl()->data());
      for (int64_t i = 0; i < batches; ++i)
        gemm<T>(M, N, K, pa + i * M * K, pb + i * K * N, pc + i * M * N);
    }
  });
  if (!C.is_same(out)) cpu_copy(out, C);
}

void check_matmul_dtypes(const Tensor& a, const Tensor& b) {
  TS_CHECK(a.dtype() == b.dtype(), DTypeError)
      << "[matmul] expected both operands to have the same dtype, but got " << dtype_name(a.dtype())
      << " and " << dtype_name(b.dtype());
  TS_CHECK(a.dtype() != DType::Bool && !is_float8(a.dtype()), DTypeError)
      << "[matmul] not implemented for '" << dtype_name(a.dtype()) << "'";
}

Tensor matmul_impl(const Tensor& a, const Tensor& b) {
  check_same_device("matmul", {&a, &b});
  check_matmul_dtypes(a, b);
  const MatmulShape s = matmul_shape(a, b);
  Tensor out = new_output(a.has_data() ? b : a, s.out, a.dtype());
  if (out.has_data() && out.impl()->int_numel() > 0) matmul_into(out, a, b, s, a.dtype());
  return out;
}

Tensor& matmul_out_impl(const Tensor& a, const Tensor& b, Tensor& out) {
  check_same_device("matmul", {&a, &b, &out});
  check_matmul_dtypes(a, b);
  const MatmulShape s = matmul_shape(a, b);
  TS_CHECK(!out.is_alias_of(a) && !out.is_alias_of(b), ValueError)
      << "[matmul] out= must not alias an input";
  return write_out(
      out, s.out, a.dtype(), "matmul", {a, b},
      [&](const Tensor& target) {
        if (target.impl()->int_numel() > 0) matmul_into(target, a, b, s, a.dtype());
      },
      /*needs_contiguous=*/true);
}

Tensor linear_composite(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias) {
  TS_CHECK(w.dim() == 1 || w.dim() == 2, ShapeError)
      << "[linear] weight must be 1-D or 2-D, got " << w.dim() << "-D";
  Tensor y = matmul(x, w.dim() == 2 ? w.t() : w);
  if (bias) y = y + *bias;
  return y;
}

}  // namespace

TS_REGISTER_OPS(linalg_ops) {
  Library lib("aten");
  lib.def("matmul(Tensor self, Tensor other) -> Tensor", kBuiltin);
  lib.def("matmul.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)", kBuiltin);
  lib.def("linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor", kBuiltin);
  for (auto dev : {DeviceType::CPU, DeviceType::Meta, DeviceType::CUDA}) {
    lib.impl("matmul", dev, matmul_impl);
    lib.impl("matmul.out", dev, matmul_out_impl);
  }
  lib.composite("linear", linear_composite);
}

void ops_detail::set_force_builtin_matmul(bool on) {
  g_force_builtin.store(on);
}

const char* matmul_backend() {
#if defined(TESSERA_HAVE_OPENBLAS)
  return "OpenBLAS";
#else
  return "built-in";
#endif
}

Tensor matmul(const Tensor& a, const Tensor& b, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::matmul", Tensor(const Tensor&, const Tensor&), a, b);
}
Tensor& matmul_out(Tensor& out, const Tensor& a, const Tensor& b, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::matmul.out", Tensor & (const Tensor&, const Tensor&, Tensor&), a, b, out);
}
Tensor linear(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias, SourceLoc loc) {
  UserLocGuard g(loc);
  TS_CALL("aten::linear", Tensor(const Tensor&, const Tensor&, const std::optional<Tensor>&), x, w,
          bias);
}
Tensor Tensor::matmul(const Tensor& other, SourceLoc loc) const {
  return tessera::matmul(*this, other, loc);
}

}  // namespace tessera
