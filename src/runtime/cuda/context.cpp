// Devices, primary contexts, per-thread current streams and events.
#include "runtime/cuda/context.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/cuda/nvrtc.h"
#include "tessera/env.h"
#include "tessera/error.h"

namespace tessera::runtime::cuda {
namespace {

struct Devices {
  int count = 0;
  std::vector<DeviceInfo> info;
  std::vector<CUcontext> contexts;  ///< primary contexts, retained for the process's life
};

const Devices& devices() {
  static const Devices d = [] {
    Devices out;
    const Driver* drv = driver();
    if (!drv || drv->cuDeviceGetCount(&out.count) != kSuccess) {
      out.count = 0;
      return out;
    }
    // NVRTC's library read into the page cache while the contexts are made (a fresh machine's
    // first compile otherwise reads ~110 MB itself).
    if (out.count > 0 && knobs().nvrtc_prefetch) prefetch_nvrtc();
    for (int i = 0; i < out.count; ++i) {
      CUdevice dev = 0;
      check(drv->cuDeviceGet(&dev, i), "cuDeviceGet", "cuda:" + std::to_string(i));
      DeviceInfo info;
      char name[256] = {0};
      drv->cuDeviceGetName(name, sizeof name, dev);
      info.name = name;
      auto attr = [&](Attr a) {
        int v = 0;
        drv->cuDeviceGetAttribute(&v, static_cast<int>(a), dev);
        return v;
      };
      info.major = attr(Attr::ComputeCapabilityMajor);
      info.minor = attr(Attr::ComputeCapabilityMinor);
      info.multiprocessors = attr(Attr::MultiprocessorCount);
      info.l2_bytes = static_cast<size_t>(attr(Attr::L2CacheSize));
      info.max_shared_optin = attr(Attr::MaxSharedMemoryPerBlockOptin);
      drv->cuDeviceTotalMem(&info.total_memory, dev);
      CUcontext ctx = nullptr;
      check(drv->cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain",
            "cuda:" + std::to_string(i));
      out.info.push_back(info);
      out.contexts.push_back(ctx);
    }
    return out;
  }();
  return d;
}

void check_index(int index, const char* what) {
  const int n = devices().count;
  TS_CHECK(index >= 0 && index < n, DeviceError)
      << "[" << what << "] cuda:" << index << " does not exist ("
      << (n == 0 ? std::string("no CUDA device is available") : std::to_string(n) + " devices")
      << ")";
}

// This thread's current stream per device (null: the legacy default stream).
std::vector<CUstream>& thread_streams() {
  thread_local std::vector<CUstream> s;
  return s;
}

}  // namespace

int device_count() {
  return devices().count;
}

const DeviceInfo& device_info(int index) {
  check_index(index, "device_info");
  return devices().info[static_cast<size_t>(index)];
}

namespace {
std::atomic<uint64_t> g_used_devices{0};  // bit d: cuda:d has had its context made current
}  // namespace

void set_device(int index) {
  check_index(index, "set_device");
  thread_local CUcontext current = nullptr;
  const CUcontext ctx = devices().contexts[static_cast<size_t>(index)];
  if (current == ctx) return;
  check(require_driver("set_device").cuCtxSetCurrent(ctx), "cuCtxSetCurrent",
        "cuda:" + std::to_string(index));
  current = ctx;
  if (index < 64) g_used_devices.fetch_or(uint64_t{1} << index, std::memory_order_acq_rel);
}

Stream Stream::create(int device) {
  set_device(device);
  CUstream s = nullptr;
  check(require_driver("Stream::create").cuStreamCreate(&s, kStreamNonBlocking), "cuStreamCreate",
        "cuda:" + std::to_string(device));
  return Stream(device, s);
}

void Stream::synchronize() const {
  set_device(device_);
  check(require_driver("Stream::synchronize").cuStreamSynchronize(handle_), "cuStreamSynchronize",
        "cuda:" + std::to_string(device_));
  journal_finished(device_, handle_, false);
}

bool Stream::query() const {
  set_device(device_);
  const CUresult r = require_driver("Stream::query").cuStreamQuery(handle_);
  if (r == kNotReady) return false;
  check(r, "cuStreamQuery", "cuda:" + std::to_string(device_));
  return true;
}

Stream current_stream(int device) {
  check_index(device, "current_stream");
  auto& s = thread_streams();
  const auto i = static_cast<size_t>(device);
  return Stream(device, i < s.size() ? s[i] : nullptr);
}

StreamGuard::StreamGuard(Stream s) : saved_(current_stream(s.device())) {
  auto& v = thread_streams();
  const auto i = static_cast<size_t>(s.device());
  if (v.size() <= i) v.resize(i + 1, nullptr);
  v[i] = s.handle();
}

StreamGuard::~StreamGuard() {
  thread_streams()[static_cast<size_t>(saved_.device())] = saved_.handle();
}

void synchronize_used() {
  const uint64_t used = g_used_devices.load(std::memory_order_acquire);
  for (int d = 0; d < 64; ++d) {
    if ((used >> d) & 1u) synchronize(d);
  }
}

void synchronize(int device) {
  set_device(device);
  check(require_driver("synchronize").cuCtxSynchronize(), "cuCtxSynchronize",
        "cuda:" + std::to_string(device));
  journal_finished(device, nullptr, true);
}

Event::Event(int device, bool timing) : device_(device) {
  set_device(device);
  check(require_driver("Event").cuEventCreate(&event_, timing ? 0u : kEventDisableTiming),
        "cuEventCreate", "cuda:" + std::to_string(device));
}

Event::~Event() {
  if (const Driver* d = driver(); d && event_) d->cuEventDestroy(event_);
}

void Event::record(const Stream& s) {
  set_device(device_);
  check(require_driver("Event::record").cuEventRecord(event_, s.handle()), "cuEventRecord",
        "cuda:" + std::to_string(device_));
}

void Event::synchronize() const {
  check(require_driver("Event::synchronize").cuEventSynchronize(event_), "cuEventSynchronize",
        "cuda:" + std::to_string(device_));
}

bool Event::query() const {
  const CUresult r = require_driver("Event::query").cuEventQuery(event_);
  if (r == kNotReady) return false;
  check(r, "cuEventQuery", "cuda:" + std::to_string(device_));
  return true;
}

void Event::block(const Stream& s) const {
  set_device(s.device());
  check(require_driver("Event::block").cuStreamWaitEvent(s.handle(), event_, 0),
        "cuStreamWaitEvent", "cuda:" + std::to_string(s.device()));
}

float Event::elapsed_ms(const Event& start, const Event& end) {
  float ms = 0;
  check(require_driver("Event::elapsed_ms").cuEventElapsedTime(&ms, start.event_, end.event_),
        "cuEventElapsedTime", "cuda:" + std::to_string(start.device_));
  return ms;
}

}  // namespace tessera::runtime::cuda
