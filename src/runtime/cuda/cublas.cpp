// cuBLAS loaded with dlopen: a handle per thread and device, on the current stream.
#include "runtime/cuda/cublas.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <vector>

#include "runtime/cuda/context.h"
#include "runtime/cuda/dl.h"
#include "tessera/error.h"

namespace tessera::runtime::cuda {
namespace {

// cuBLAS's ABI (cublas_api.h, library_types.h).
using Status = int;
struct HandleSt;
using Handle = HandleSt*;
constexpr Status kOk = 0;
constexpr int kOpN = 0, kOpT = 1;
constexpr int kDefaultMath = 0;  // no TF32 for float32 (as PyTorch by default)
constexpr int kAlgoDefault = -1;
constexpr int kR16F = 2, kR16BF = 14, kR32F = 0, kR64F = 1;
constexpr int kCompute32F = 68, kCompute64F = 70;

struct Api {
  Status (*create)(Handle*);
  Status (*set_stream)(Handle, CUstream);
  Status (*set_math_mode)(Handle, int);
  Status (*get_property)(int, int*);  // MAJOR_VERSION 0, MINOR_VERSION 1, PATCH_LEVEL 2
  const char* (*status_string)(Status);
  Status (*gemm)(Handle, int, int, int, int, int, const void*, const void*, int, int, long long,
                 const void*, int, int, long long, const void*, void*, int, int, long long, int,
                 int, int);
};

struct Loaded {
  Api api{};
  CublasInfo info;
  std::string why;
  bool ok = false;
};

Loaded load() {
  Loaded l;
  void* lib = nullptr;
  for (const auto& dir : toolkit_dirs()) {
    // libcublas needs libcublasLt by soname: loaded first from the same place, it is found.
    if (!dlopen((dir + "libcublasLt.so.13").c_str(), RTLD_NOW | RTLD_GLOBAL)) continue;
    lib = dlopen((dir + "libcublas.so.13").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      l.info.path = dir + "libcublas.so.13";
      break;
    }
  }
  if (!lib) {
    l.why =
        "no cuBLAS (looked for libcublas.so.13 and libcublasLt.so.13 under $CUDA_HOME/lib64, "
        "/usr/local/cuda/lib64 and the loader's path)";
    return l;
  }
  Api& a = l.api;
  l.ok = resolve_symbol(lib, "cublasCreate_v2", a.create) &&
         resolve_symbol(lib, "cublasSetStream_v2", a.set_stream) &&
         resolve_symbol(lib, "cublasSetMathMode", a.set_math_mode) &&
         resolve_symbol(lib, "cublasGetProperty", a.get_property) &&
         resolve_symbol(lib, "cublasGetStatusString", a.status_string) &&
         resolve_symbol(lib, "cublasGemmStridedBatchedEx", a.gemm);
  if (!l.ok) {
    l.why = l.info.path + " lacks an entry point tessera uses (" + dlerror() + ")";
    return l;
  }
  a.get_property(0, &l.info.major);
  a.get_property(1, &l.info.minor);
  return l;
}

Loaded& loaded() {
  static Loaded l = load();
  return l;
}

void check(Status s, const char* call) {
  if (s == kOk) return;
  const char* text = loaded().api.status_string ? loaded().api.status_string(s) : "";
  TS_CHECK(false, RuntimeError) << "[matmul] " << call << " failed: cuBLAS status " << s << " ("
                                << (text ? text : "?") << ")";
}

// One handle per thread and device (a handle is not for concurrent use); kept for the
// thread's life and never destroyed (destroying at exit races the driver's own teardown).
Handle handle_for(int device) {
  thread_local std::map<int, Handle> handles;
  auto it = handles.find(device);
  if (it != handles.end()) return it->second;
  set_device(device);
  const Api& a = loaded().api;
  Handle h = nullptr;
  check(a.create(&h), "cublasCreate");
  check(a.set_math_mode(h, kDefaultMath), "cublasSetMathMode");
  handles.emplace(device, h);
  return h;
}

}  // namespace

const CublasInfo* cublas(std::string* why) {
  const Loaded& l = loaded();
  if (!l.ok) {
    if (why) *why = l.why;
    return nullptr;
  }
  return &l.info;
}

void gemm_batched(int device, GemmType type, int64_t batches, int64_t M, int64_t N, int64_t K,
                  const GemmOperand& A, const GemmOperand& B, void* C) {
  std::string why;
  TS_CHECK(cublas(&why) != nullptr, RuntimeError) << "[matmul] " << why;
  constexpr int64_t kMax = 0x7fffffff;
  TS_CHECK(M > 0 && N > 0 && K > 0 && M <= kMax && N <= kMax && K <= kMax && batches <= kMax,
           ValueError)
      << "[matmul] cuBLAS sizes out of range: " << batches << " x " << M << "x" << K << " @ " << K
      << "x" << N;
  // Column-major, C^T (N x M) = B^T (N x K) A^T (K x M): a row-major operand is its transpose
  // in column-major terms (no op), a column-major one needs cuBLAS's transpose.
  TS_CHECK(A.ld <= kMax && B.ld <= kMax && A.ld >= std::max<int64_t>(1, A.transposed ? M : K) &&
               B.ld >= std::max<int64_t>(1, B.transposed ? K : N),
           ValueError)
      << "[matmul] cuBLAS leading dimensions out of range: " << A.ld << " and " << B.ld;
  const Api& a = loaded().api;
  Handle h = handle_for(device);
  set_device(device);
  check(a.set_stream(h, current_stream(device).handle()), "cublasSetStream");
  const int dt = type == GemmType::F16    ? kR16F
                 : type == GemmType::BF16 ? kR16BF
                 : type == GemmType::F32  ? kR32F
                                          : kR64F;
  const float alpha32 = 1, beta32 = 0;
  const double alpha64 = 1, beta64 = 0;
  const bool f64 = type == GemmType::F64;
  const void* alpha = f64 ? static_cast<const void*>(&alpha64) : &alpha32;
  const void* beta = f64 ? static_cast<const void*>(&beta64) : &beta32;
  // Row-major C = A B is column-major C^T = B^T A^T: cuBLAS gets B first, with N rows.
  const int m = static_cast<int>(N), n = static_cast<int>(M), k = static_cast<int>(K);
  check(a.gemm(h, B.transposed ? kOpT : kOpN, A.transposed ? kOpT : kOpN, m, n, k, alpha, B.data,
               dt, static_cast<int>(B.ld), B.batch_stride, A.data, dt, static_cast<int>(A.ld),
               A.batch_stride, beta, C, dt, m, M * N, static_cast<int>(batches),
               f64 ? kCompute64F : kCompute32F, kAlgoDefault),
        "cublasGemmStridedBatchedEx");
}

}  // namespace tessera::runtime::cuda
