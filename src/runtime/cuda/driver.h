/** \file
 * The CUDA driver API subset tessera uses, declared here and loaded with dlopen (DESIGN.md D5):
 * nothing links against CUDA, so one binary runs with or without a GPU. Every failing call is a
 * `tessera::RuntimeError` naming the call, what it was doing and CUDA's own error name and text.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera::runtime::cuda {

// ---- the driver's types, as its ABI has them ----------------------------------------------------
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
struct CUctx_st;
using CUcontext = CUctx_st*;
struct CUstream_st;
using CUstream = CUstream_st*;
struct CUevent_st;
using CUevent = CUevent_st*;
struct CUmod_st;
using CUmodule = CUmod_st*;
struct CUfunc_st;
using CUfunction = CUfunc_st*;
struct CUgraph_st;
using CUgraph = CUgraph_st*;
struct CUgraphExec_st;
using CUgraphExec = CUgraphExec_st*;

inline constexpr CUresult kSuccess = 0;
inline constexpr CUresult kNotReady = 600;   ///< CUDA_ERROR_NOT_READY (a query, not a failure)
inline constexpr CUresult kOutOfMemory = 2;  ///< CUDA_ERROR_OUT_OF_MEMORY
inline constexpr CUresult kNoDevice = 100;   ///< CUDA_ERROR_NO_DEVICE
inline constexpr unsigned kEventDisableTiming = 2;  ///< CU_EVENT_DISABLE_TIMING
inline constexpr unsigned kStreamNonBlocking = 1;   ///< CU_STREAM_NON_BLOCKING
inline constexpr int kCaptureModeRelaxed = 2;       ///< CU_STREAM_CAPTURE_MODE_RELAXED

/** Device attributes (CUdevice_attribute values). */
enum class Attr : int {
  MaxThreadsPerBlock = 1,
  MultiprocessorCount = 16,
  ClockRate = 13,
  MemoryClockRate = 36,
  GlobalMemoryBusWidth = 37,
  L2CacheSize = 38,
  ComputeCapabilityMajor = 75,
  ComputeCapabilityMinor = 76,
  MaxSharedMemoryPerBlockOptin = 97,
};

/** Function attributes (CUfunction_attribute values). */
enum class FuncAttr : int {
  MaxThreadsPerBlock = 0,
  SharedSizeBytes = 1,
  LocalSizeBytes = 3,
  NumRegs = 4,
  MaxDynamicSharedSizeBytes = 8,
};

/** The entry points, resolved once. */
struct Driver {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDriverGetVersion)(int*);
  CUresult (*cuGetErrorName)(CUresult, const char**);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuDeviceTotalMem)(size_t*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxGetCurrent)(CUcontext*);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuMemGetInfo)(size_t*, size_t*);
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemHostAlloc)(void**, size_t, unsigned);
  CUresult (*cuMemFreeHost)(void*);
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream);
  CUresult (*cuMemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream);
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  CUresult (*cuMemsetD16Async)(CUdeviceptr, unsigned short, size_t, CUstream);
  CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream);
  CUresult (*cuStreamCreate)(CUstream*, unsigned);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuStreamQuery)(CUstream);
  CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned);
  CUresult (*cuEventCreate)(CUevent*, unsigned);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventQuery)(CUevent);
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent);
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuFuncGetAttribute)(int*, int, CUfunction);
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**);
  // CUDA graphs (stream capture): optional, null where the driver lacks them.
  CUresult (*cuStreamBeginCapture)(CUstream, int) = nullptr;
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph*) = nullptr;
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec*, CUgraph, unsigned long long) = nullptr;
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream) = nullptr;
  CUresult (*cuGraphExecDestroy)(CUgraphExec) = nullptr;
  CUresult (*cuGraphDestroy)(CUgraph) = nullptr;
  int version = 0;   ///< e.g. 13000 for CUDA 13.0
  std::string path;  ///< the library that was loaded
};

/** The driver, loaded and initialized on first use; null when there is none or `cuInit` fails
 * (`why` then says which). Thread-safe. */
const Driver* driver(std::string* why = nullptr);
/** The driver, or a RuntimeError naming `what` needed it and why it is missing. */
const Driver& require_driver(const char* what);

/** Whether `r` is a fault that loses the context (illegal address, trap, misaligned access, ...):
 * every later call in the process fails with it. */
bool is_sticky_fault(CUresult r);

/** The launch journal: the kernels queued and not yet known to have finished, so that a fault,
 * which surfaces at a later call, names its suspects. `journal_launch` copies at most 63
 * characters of `what` (no allocation); `journal_finished` forgets the kernels of `stream` of
 * `device` (of all its streams when `all`) after a successful synchronization. */
void journal_launch(int device, CUstream stream, const std::string& what);
void journal_finished(int device, CUstream stream, bool all);
/** "kernel a on cuda:0, kernel b on cuda:0 (and 3 more)": the oldest unfinished launches first. */
std::string journal_suspects();

/** CUDA's name and description of an error code ("CUDA_ERROR_OUT_OF_MEMORY: out of memory"). */
std::string error_text(CUresult r);
/** Throws a RuntimeError "[what] call failed: CUDA_ERROR_...: ..." unless `r` is success; a
 * sticky fault also names the kernels that may have caused it and says the context is lost. */
void check(CUresult r, const char* call, const std::string& what);

}  // namespace tessera::runtime::cuda
