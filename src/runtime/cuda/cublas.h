/** \file
 * cuBLAS, loaded with dlopen (DESIGN.md D5) for the built-in `matmul` on CUDA tensors until
 * `tl::dot` competes with it (issue 16). Only the entry points used are declared here. Absent
 * cuBLAS is not an error: `matmul` then runs the tile kernel of src/tl/op_tiles.cpp.
 */
#pragma once

#include <cstdint>
#include <string>

namespace tessera::runtime::cuda {

/** The loaded library. */
struct CublasInfo {
  std::string path;
  int major = 0, minor = 0;
};
/** cuBLAS, found under $CUDA_HOME/lib64, /usr/local/cuda/lib64 or by soname (libcublas.so.13 after
 * its libcublasLt.so.13); null when absent (`why` says where it looked). Thread-safe. */
const CublasInfo* cublas(std::string* why = nullptr);

/** The element types `gemm_batched` takes (inputs and output alike). */
enum class GemmType : uint8_t { F16, BF16, F32, F64 };

/** One operand of `gemm_batched` as it lies in memory: row-major (element (i, j) at
 * `i * ld + j`) or, `transposed`, column-major (at `i + j * ld`); `batch_stride` elements between
 * consecutive matrices (0: one matrix for every batch). `ld` at least the row (column) length. */
struct GemmOperand {
  const void* data = nullptr;
  int64_t ld = 0;
  int64_t batch_stride = 0;
  bool transposed = false;
};

/**
 * C[b] = A[b] @ B[b] for `batches` products (A: M x K, B: K x N, read where they lie; C: M x N,
 * row-major and contiguous, consecutive in memory), queued on `device`'s current stream. Products
 * accumulate in float32 (float64 for F64) without TF32, as PyTorch's default. Every size and
 * leading dimension must be below 2^31 and M, N, K positive. A failing call is a RuntimeError
 * naming cuBLAS's status.
 */
void gemm_batched(int device, GemmType type, int64_t batches, int64_t M, int64_t N, int64_t K,
                  const GemmOperand& A, const GemmOperand& B, void* C);

}  // namespace tessera::runtime::cuda
