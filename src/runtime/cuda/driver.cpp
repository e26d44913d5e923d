// Loads libcuda with dlopen and resolves the entry points of driver.h (the `_v2` symbols where the
// driver's header maps a name to one).
#include "runtime/cuda/driver.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>

#include <mutex>
#include <sstream>

#include "tessera/error.h"

namespace tessera::runtime::cuda {
namespace {

struct Loaded {
  Driver driver{};
  bool ok = false;
  std::string why;
};

template <class F>
bool resolve(void* lib, const char* name, F& out, std::string& why) {
  out = reinterpret_cast<F>(dlsym(lib, name));
  if (!out && why.empty()) why = std::string("the driver has no ") + name;
  return out != nullptr;
}

Loaded load() {
  Loaded l;
  void* lib = nullptr;
  for (const char* name : {"libcuda.so.1", "libcuda.so"}) {
    lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      l.driver.path = name;
      break;
    }
  }
  if (!lib) {
    l.why = "no CUDA driver (libcuda.so.1 not found)";
    return l;
  }
  Driver& d = l.driver;
  std::string& w = l.why;
  bool ok = true;
  ok &= resolve(lib, "cuInit", d.cuInit, w);
  ok &= resolve(lib, "cuDriverGetVersion", d.cuDriverGetVersion, w);
  ok &= resolve(lib, "cuGetErrorName", d.cuGetErrorName, w);
  ok &= resolve(lib, "cuGetErrorString", d.cuGetErrorString, w);
  ok &= resolve(lib, "cuDeviceGetCount", d.cuDeviceGetCount, w);
  ok &= resolve(lib, "cuDeviceGet", d.cuDeviceGet, w);
  ok &= resolve(lib, "cuDeviceGetName", d.cuDeviceGetName, w);
  ok &= resolve(lib, "cuDeviceGetAttribute", d.cuDeviceGetAttribute, w);
  ok &= resolve(lib, "cuDeviceTotalMem_v2", d.cuDeviceTotalMem, w);
  ok &= resolve(lib, "cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain, w);
  ok &= resolve(lib, "cuCtxSetCurrent", d.cuCtxSetCurrent, w);
  ok &= resolve(lib, "cuCtxGetCurrent", d.cuCtxGetCurrent, w);
  ok &= resolve(lib, "cuCtxSynchronize", d.cuCtxSynchronize, w);
  ok &= resolve(lib, "cuMemGetInfo_v2", d.cuMemGetInfo, w);
  ok &= resolve(lib, "cuMemAlloc_v2", d.cuMemAlloc, w);
  ok &= resolve(lib, "cuMemFree_v2", d.cuMemFree, w);
  ok &= resolve(lib, "cuMemHostAlloc", d.cuMemHostAlloc, w);
  ok &= resolve(lib, "cuMemFreeHost", d.cuMemFreeHost, w);
  ok &= resolve(lib, "cuMemcpyHtoDAsync_v2", d.cuMemcpyHtoDAsync, w);
  ok &= resolve(lib, "cuMemcpyDtoHAsync_v2", d.cuMemcpyDtoHAsync, w);
  ok &= resolve(lib, "cuMemcpyDtoDAsync_v2", d.cuMemcpyDtoDAsync, w);
  ok &= resolve(lib, "cuMemsetD8Async", d.cuMemsetD8Async, w);
  ok &= resolve(lib, "cuMemsetD16Async", d.cuMemsetD16Async, w);
  ok &= resolve(lib, "cuMemsetD32Async", d.cuMemsetD32Async, w);
  ok &= resolve(lib, "cuStreamCreate", d.cuStreamCreate, w);
  ok &= resolve(lib, "cuStreamDestroy_v2", d.cuStreamDestroy, w);
  ok &= resolve(lib, "cuStreamSynchronize", d.cuStreamSynchronize, w);
  ok &= resolve(lib, "cuStreamQuery", d.cuStreamQuery, w);
  ok &= resolve(lib, "cuStreamWaitEvent", d.cuStreamWaitEvent, w);
  ok &= resolve(lib, "cuEventCreate", d.cuEventCreate, w);
  ok &= resolve(lib, "cuEventDestroy_v2", d.cuEventDestroy, w);
  ok &= resolve(lib, "cuEventRecord", d.cuEventRecord, w);
  ok &= resolve(lib, "cuEventSynchronize", d.cuEventSynchronize, w);
  ok &= resolve(lib, "cuEventQuery", d.cuEventQuery, w);
  ok &= resolve(lib, "cuEventElapsedTime", d.cuEventElapsedTime, w);
  ok &= resolve(lib, "cuModuleLoadData", d.cuModuleLoadData, w);
  ok &= resolve(lib, "cuModuleUnload", d.cuModuleUnload, w);
  ok &= resolve(lib, "cuModuleGetFunction", d.cuModuleGetFunction, w);
  ok &= resolve(lib, "cuFuncGetAttribute", d.cuFuncGetAttribute, w);
  ok &= resolve(lib, "cuFuncSetAttribute", d.cuFuncSetAttribute, w);
  ok &= resolve(lib, "cuLaunchKernel", d.cuLaunchKernel, w);
  if (!ok) return l;
  // Optional: CUDA graphs (a driver without them refuses capture, nothing else).
  std::string optional;
  resolve(lib, "cuStreamBeginCapture_v2", d.cuStreamBeginCapture, optional);
  resolve(lib, "cuStreamEndCapture", d.cuStreamEndCapture, optional);
  resolve(lib, "cuGraphInstantiateWithFlags", d.cuGraphInstantiateWithFlags, optional);
  resolve(lib, "cuGraphLaunch", d.cuGraphLaunch, optional);
  resolve(lib, "cuGraphExecDestroy", d.cuGraphExecDestroy, optional);
  resolve(lib, "cuGraphDestroy", d.cuGraphDestroy, optional);
  if (const CUresult r = d.cuInit(0); r != kSuccess) {
    const char* name = nullptr;
    d.cuGetErrorName(r, &name);
    l.why = std::string("cuInit failed: ") + (name ? name : std::to_string(r));
    return l;
  }
  d.cuDriverGetVersion(&d.version);
  l.ok = true;
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();  // never unloaded: kernels and memory outlive static destructors
  return l;
}

}  // namespace

const Driver* driver(std::string* why) {
  const Loaded& l = loaded();
  if (!l.ok && why) *why = l.why;
  return l.ok ? &l.driver : nullptr;
}

const Driver& require_driver(const char* what) {
  std::string why;
  const Driver* d = driver(&why);
  TS_CHECK(d != nullptr, RuntimeError) << "[" << what << "] needs CUDA, but " << why;
  return *d;
}

std::string error_text(CUresult r) {
  const Driver* d = driver();
  const char* name = nullptr;
  const char* text = nullptr;
  if (d) {
    d->cuGetErrorName(r, &name);
    d->cuGetErrorString(r, &text);
  }
  std::ostringstream os;
  os << (name ? name : "CUDA error " + std::to_string(r));
  if (text) os << ": " << text;
  return os.str();
}

bool is_sticky_fault(CUresult r) {
  switch (r) {
    case 700:  // CUDA_ERROR_ILLEGAL_ADDRESS
    case 710:  // CUDA_ERROR_ASSERT
    case 714:  // CUDA_ERROR_HARDWARE_STACK_ERROR
    case 715:  // CUDA_ERROR_ILLEGAL_INSTRUCTION
    case 716:  // CUDA_ERROR_MISALIGNED_ADDRESS
    case 717:  // CUDA_ERROR_INVALID_ADDRESS_SPACE
    case 718:  // CUDA_ERROR_INVALID_PC
    case 719:  // CUDA_ERROR_LAUNCH_FAILED (a trap)
      return true;
    default:
      return false;
  }
}

namespace {

// A ring of the latest launches not known to have finished (fixed storage: a launch copies its
// name, it allocates nothing).
struct Journal {
  static constexpr int kSlots = 64;
  struct Entry {
    int device;
    CUstream stream;
    char what[64];
  };
  std::mutex m;
  Entry ring[kSlots];
  int64_t first = 0, end = 0;  // live entries: [first, end), the oldest dropped past kSlots
  int64_t dropped = 0;         // launches that fell off the ring unfinished
};
Journal& journal() {
  static Journal* j = new Journal();  // never destroyed: launches may come during exit
  return *j;
}

}  // namespace

void journal_launch(int device, CUstream stream, const std::string& what) {
  Journal& j = journal();
  std::lock_guard<std::mutex> g(j.m);
  if (j.end - j.first == Journal::kSlots) {
    ++j.first;
    ++j.dropped;
  }
  Journal::Entry& e = j.ring[j.end++ % Journal::kSlots];
  e.device = device;
  e.stream = stream;
  const size_t n = std::min(what.size(), sizeof(e.what) - 1);
  std::memcpy(e.what, what.data(), n);
  e.what[n] = '\0';
}

void journal_finished(int device, CUstream stream, bool all) {
  Journal& j = journal();
  std::lock_guard<std::mutex> g(j.m);
  int64_t keep = j.end;
  for (int64_t i = j.end - 1; i >= j.first; --i) {
    const Journal::Entry& e = j.ring[i % Journal::kSlots];
    if (e.device == device && (all || e.stream == stream)) continue;
    if (--keep != i) j.ring[keep % Journal::kSlots] = e;  // compact toward the end, in order
  }
  j.first = keep;
  if (j.first == j.end) j.dropped = 0;
}

std::string journal_suspects() {
  Journal& j = journal();
  std::lock_guard<std::mutex> g(j.m);
  std::ostringstream os;
  constexpr int64_t kShown = 4;
  for (int64_t i = j.first; i < j.end && i < j.first + kShown; ++i) {
    const Journal::Entry& e = j.ring[i % Journal::kSlots];
    os << (i > j.first ? ", " : "") << e.what << " on cuda:" << e.device;
  }
  const int64_t more = std::max<int64_t>(j.end - j.first - kShown, 0) + j.dropped;
  if (more > 0) os << " (and " << more << " more)";
  return os.str();
}

void check(CUresult r, const char* call, const std::string& what) {
  if (r == kSuccess) return;
  if (is_sticky_fault(r)) {
    const std::string suspects = journal_suspects();
    TS_ERROR(RuntimeError) << "[" << what << "] " << call << " failed: " << error_text(r)
                           << ". A kernel faulted on the GPU, and the CUDA context is lost: every "
                              "later GPU call of this process fails (restart it). "
                           << (suspects.empty() ? std::string("No kernel of tessera's was queued.")
                                                : "Queued and not yet finished: " + suspects + ".")
                           << " To find the bad access, run with TESSERA_DEBUG=1 (checked "
                              "kernels) or CUDA_LAUNCH_BLOCKING=1 (the error at the faulting "
                              "launch).";
  }
  TS_ERROR(RuntimeError) << "[" << what << "] " << call << " failed: " << error_text(r);
}

}  // namespace tessera::runtime::cuda
