/** \file
 * DLPack: tensors shared with other frameworks (PyTorch, NumPy, JAX, CuPy) without copying.
 *
 *     DLManagedTensorVersioned* m = tessera::to_dlpack_versioned(t);   // hand t's memory out
 *     Tensor u = tessera::from_dlpack(m);                                // take memory in
 *     // libtorch: Tensor x = tessera::from_dlpack(at::toDLPack(at_tensor));
 *
 * The exchange structs below are the DLPack ABI (version 1.1), written from the specification at
 * dmlc.github.io/dlpack. Where another copy of `dlpack.h` was included first (PyTorch's, for
 * one), its definitions are used instead: the layouts are the same by definition.
 *
 * Ownership follows the specification: `from_dlpack` takes the managed tensor and calls its
 * deleter when the last tessera tensor viewing that memory is gone; the struct `to_dlpack`
 * returns keeps the tensor's storage alive until the consumer calls its deleter (exactly once).
 */
#pragma once

#include <cstdint>

#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_

#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 1

#ifdef __cplusplus
extern "C" {
#endif

/** The version of the ABI a managed tensor follows. */
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

typedef enum {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17,
} DLDeviceType;

typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;

typedef enum {
  kDLInt = 0U,
  kDLUInt = 1U,
  kDLFloat = 2U,
  kDLOpaqueHandle = 3U,
  kDLBfloat = 4U,
  kDLComplex = 5U,
  kDLBool = 6U,
  kDLFloat8_e3m4 = 7U,
  kDLFloat8_e4m3 = 8U,
  kDLFloat8_e4m3b11fnuz = 9U,
  kDLFloat8_e4m3fn = 10U,
  kDLFloat8_e4m3fnuz = 11U,
  kDLFloat8_e5m2 = 12U,
  kDLFloat8_e5m2fnuz = 13U,
  kDLFloat8_e8m0fnu = 14U,
  kDLFloat6_e2m3fn = 15U,
  kDLFloat6_e3m2fn = 16U,
  kDLFloat4_e2m1fn = 17U,
} DLDataTypeCode;

/** An element type: a DLDataTypeCode, its width in bits, and vector lanes (1 for scalars). */
typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

/** A strided view: element (i0, i1, ...) is at data + byte_offset + sum(i_k * strides[k]) elements
 * (strides NULL: compact row-major). */
typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;

/** The legacy (unversioned) managed tensor. */
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;

#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)

/** The managed tensor of DLPack 1.x: the version first, so a consumer can check it before
 * reading anything else (a major version it does not know: call the deleter, read nothing). */
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // DLPACK_DLPACK_H_

#include "tessera/tensor.h"

namespace tessera {

/**
 * A tensor viewing the memory of `managed` (no copy), on its device (`kDLCPU` and
 * `kDLCUDAHost`: the CPU; `kDLCUDA`: `cuda:N`); takes ownership, and the producer's deleter runs
 * when the last tessera tensor viewing the memory dies. Errors (each a typed error naming
 * `from_dlpack`; the deleter is called before throwing, so nothing leaks): an unknown major
 * version, a device or element type tessera does not have, vector lanes, negative strides, a
 * byte offset that is not a whole number of elements. A tensor flagged read-only is copied
 * (tessera tensors are writable), and the producer's memory released at once.
 */
Tensor from_dlpack(DLManagedTensorVersioned* managed);
/** The same for the legacy struct (no version, no flags). */
Tensor from_dlpack(DLManagedTensor* managed);

/** How a tensor is handed out. */
struct DLPackExportOptions {
  /** CUDA: the stream the consumer will use (a `CUstream`; null: the consumer uses this
   * thread's current stream). tessera's current stream's work so far is ordered before the
   * consumer's by an event, without blocking the host. */
  void* consumer_stream = nullptr;
};

/**
 * `t` as a versioned managed tensor sharing its storage (no copy): shape, strides in elements,
 * data pointing at its first element. The storage stays alive until the consumer calls the
 * deleter. Tensors without data (meta, fake) are an error.
 */
DLManagedTensorVersioned* to_dlpack_versioned(const Tensor& t, DLPackExportOptions options = {});
/** The same as the legacy struct (for consumers of DLPack before 1.0). */
DLManagedTensor* to_dlpack(const Tensor& t, DLPackExportOptions options = {});

}  // namespace tessera
