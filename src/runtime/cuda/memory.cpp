// The caching allocator, copies, fills and pinned host memory.
#include "runtime/cuda/memory.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/cuda/graph.h"
#include "tessera/error.h"

namespace tessera::runtime::cuda {
namespace {

constexpr size_t kSmall = size_t(1) << 20;  // below: rounded to 512 bytes
constexpr size_t kSmallRound = 512;
constexpr size_t kLargeRound = size_t(2) << 20;  // at and above: rounded to 2 MiB

size_t round_size(size_t n) {
  const size_t r = n < kSmall ? kSmallRound : kLargeRound;
  return (n + r - 1) / r * r;
}

struct Block {
  CUdeviceptr ptr = 0;
  size_t size = 0;
  CUstream stream = nullptr;                   ///< the stream it was allocated for
  std::vector<CUstream> other_streams;         ///< record_stream: also used there
  std::vector<std::unique_ptr<Event>> events;  ///< pending uses, recorded at release
};

struct DeviceCache {
  std::mutex mutex;
  // Idle blocks per stream, by size (best fit: the smallest that is large enough).
  std::map<CUstream, std::multimap<size_t, std::unique_ptr<Block>>> idle;
  std::vector<std::unique_ptr<Block>> pending;  ///< released, waiting for other streams' events
  std::unordered_map<CUdeviceptr, std::unique_ptr<Block>> live;
  MemoryStats stats;
};

std::vector<std::unique_ptr<DeviceCache>>& caches() {
  static auto* v = [] {
    auto* c = new std::vector<std::unique_ptr<DeviceCache>>();  // never freed (outlives tensors)
    for (int i = 0; i < device_count(); ++i) c->push_back(std::make_unique<DeviceCache>());
    return c;
  }();
  return *v;
}

DeviceCache& cache_of(int device) {
  auto& v = caches();
  TS_CHECK(device >= 0 && static_cast<size_t>(device) < v.size(), DeviceError)
      << "cuda:" << device << " does not exist ("
      << (v.empty() ? std::string("no CUDA device is available")
                    : std::to_string(v.size()) + " devices")
      << ")";
  return *v[static_cast<size_t>(device)];
}

// Moves pending blocks whose other-stream work has finished back to their stream's idle list.
void collect_pending(DeviceCache& c) {
  for (size_t i = 0; i < c.pending.size();) {
    Block& b = *c.pending[i];
    const bool done =
        std::all_of(b.events.begin(), b.events.end(), [](const auto& e) { return e->query(); });
    if (!done) {
      ++i;
      continue;
    }
    b.events.clear();
    b.other_streams.clear();
    auto owned = std::move(c.pending[i]);
    c.pending.erase(c.pending.begin() + static_cast<std::ptrdiff_t>(i));
    c.idle[owned->stream].emplace(owned->size, std::move(owned));
  }
}

// Returns every idle block of the device to the driver (the caller holds the cache's mutex).
void free_idle(DeviceCache& c, int device) {
  const Driver& d = require_driver("empty_cache");
  set_device(device);
  for (auto& [stream, blocks] : c.idle) {
    for (auto& [size, b] : blocks) {
      check(d.cuMemFree(b->ptr), "cuMemFree", "cuda:" + std::to_string(device));
      c.stats.reserved_bytes -= b->size;
      ++c.stats.device_frees;
    }
    blocks.clear();
  }
}

std::string describe(const MemoryStats& s, int device) {
  size_t free_b = 0, total = 0;
  if (const Driver* d = driver()) d->cuMemGetInfo(&free_b, &total);
  std::ostringstream os;
  os << "cuda:" << device << " has " << format_bytes(s.allocated_bytes) << " in tensors, "
     << format_bytes(s.reserved_bytes) << " reserved by tessera, " << format_bytes(free_b)
     << " free of " << format_bytes(total);
  return os.str();
}

void* tensor_allocate(size_t nbytes, Device device) {
  return allocate(nbytes, device.index());
}
void tensor_release(void* p, Device device) {
  release(p, device.index());
}

}  // namespace

void* allocate(size_t nbytes, int device) {
  if (nbytes == 0) return nullptr;
  std::string why;
  TS_CHECK(driver(&why) != nullptr, DeviceError)
      << "cuda:" << device << " is not available: " << why
      << " (tessera::cuda_is_available() is false on this machine)";
  DeviceCache& c = cache_of(device);
  const size_t size = round_size(nbytes);
  const CUstream stream = current_stream(device).handle();
  std::lock_guard<std::mutex> lock(c.mutex);
  ++c.stats.allocations;
  if (!c.pending.empty()) collect_pending(c);
  auto& idle = c.idle[stream];
  // A cached block of at least the size, but not more than twice it (or 2 MiB more for large
  // ones), so that small requests do not pin large blocks.
  if (auto it = idle.lower_bound(size);
      it != idle.end() && it->first <= std::max(2 * size, size + kLargeRound)) {
    auto b = std::move(it->second);
    idle.erase(it);
    ++c.stats.cache_hits;
    c.stats.allocated_bytes += b->size;
    c.stats.peak_allocated_bytes = std::max(c.stats.peak_allocated_bytes, c.stats.allocated_bytes);
    void* p = reinterpret_cast<void*>(b->ptr);
    c.live.emplace(b->ptr, std::move(b));
    return p;
  }
  const Driver& d = require_driver("allocate");
  set_device(device);
  CUdeviceptr ptr = 0;
  CUresult r = d.cuMemAlloc(&ptr, size);
  if (r == kOutOfMemory) {
    free_idle(c, device);  // give the cache back and try once more
    r = d.cuMemAlloc(&ptr, size);
  }
  if (r == kOutOfMemory) {
    TS_ERROR(OutOfMemoryError) << "CUDA out of memory: tried to allocate " << format_bytes(nbytes)
                               << " (" << nbytes << " bytes), after giving the allocator's "
                               << "cached blocks back; " << describe(c.stats, device);
  }
  check(r, "cuMemAlloc",
        "allocate " + std::to_string(nbytes) + " bytes on cuda:" + std::to_string(device));
  ++c.stats.device_allocations;
  c.stats.reserved_bytes += size;
  c.stats.allocated_bytes += size;
  c.stats.peak_allocated_bytes = std::max(c.stats.peak_allocated_bytes, c.stats.allocated_bytes);
  auto b = std::make_unique<Block>();
  b->ptr = ptr;
  b->size = size;
  b->stream = stream;
  c.live.emplace(ptr, std::move(b));
  return reinterpret_cast<void*>(ptr);
}

void release(void* ptr, int device) {
  if (!ptr) return;
  DeviceCache& c = cache_of(device);
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.live.find(reinterpret_cast<CUdeviceptr>(ptr));
  TS_INTERNAL_ASSERT(it != c.live.end()) << "release of a pointer the CUDA allocator did not give";
  auto b = std::move(it->second);
  c.live.erase(it);
  ++c.stats.frees;
  c.stats.allocated_bytes -= b->size;
  if (b->other_streams.empty()) {
    c.idle[b->stream].emplace(b->size, std::move(b));
    return;
  }
  for (CUstream s : b->other_streams) {
    auto e = std::make_unique<Event>(device, false);
    e->record(Stream(device, s));
    b->events.push_back(std::move(e));
  }
  c.pending.push_back(std::move(b));
}

void record_stream(void* ptr, const Stream& stream) {
  DeviceCache& c = cache_of(stream.device());
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.live.find(reinterpret_cast<CUdeviceptr>(ptr));
  TS_CHECK(it != c.live.end(), ValueError)
      << "[record_stream] the pointer is not a live CUDA tensor's memory";
  Block& b = *it->second;
  if (stream.handle() == b.stream) return;
  if (std::find(b.other_streams.begin(), b.other_streams.end(), stream.handle()) ==
      b.other_streams.end())
    b.other_streams.push_back(stream.handle());
}

void empty_cache() {
  if (!driver()) return;
  auto& v = caches();
  for (size_t i = 0; i < v.size(); ++i) {
    std::lock_guard<std::mutex> lock(v[i]->mutex);
    collect_pending(*v[i]);
    free_idle(*v[i], static_cast<int>(i));
  }
}

MemoryStats memory_stats(int device) {
  DeviceCache& c = cache_of(device);
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.stats;
}

void reset_peak_stats(int device) {
  DeviceCache& c = cache_of(device);
  std::lock_guard<std::mutex> lock(c.mutex);
  const MemoryStats s = c.stats;
  c.stats = MemoryStats{};
  c.stats.allocated_bytes = s.allocated_bytes;
  c.stats.reserved_bytes = s.reserved_bytes;
  c.stats.peak_allocated_bytes = s.allocated_bytes;
}

void register_tensor_allocator() {
  static std::once_flag once;
  std::call_once(once, [] {
    runtime::register_allocator(DeviceType::CUDA, Allocator{tensor_allocate, tensor_release});
  });
}

void copy_to_device(void* dst, const void* src, size_t nbytes, int device) {
  if (nbytes == 0) return;
  const Driver& d = require_driver("copy to device");
  set_device(device);
  const CUstream stream = current_stream(device).handle();
  // A graph would keep the host address and read it again at every replay, long after `src`
  // is gone: the capture fails instead (and its graph runs as before).
  TS_CHECK(!capturing(stream), RuntimeError)
      << "copy of " << nbytes << " bytes from host memory to cuda:" << device
      << " inside a CUDA graph capture (a replay would read the host buffer again after it is "
         "gone)";
  check(d.cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(dst), src, nbytes, stream),
        "cuMemcpyHtoDAsync",
        "copy of " + std::to_string(nbytes) + " bytes to cuda:" + std::to_string(device));
}

void copy_to_host(void* dst, const void* src, size_t nbytes, int device) {
  if (nbytes == 0) return;
  const Driver& d = require_driver("copy to host");
  set_device(device);
  const Stream s = current_stream(device);
  check(d.cuMemcpyDtoHAsync(dst, reinterpret_cast<CUdeviceptr>(src), nbytes, s.handle()),
        "cuMemcpyDtoHAsync",
        "copy of " + std::to_string(nbytes) + " bytes from cuda:" + std::to_string(device));
  s.synchronize();
}

void copy_device(void* dst, int dst_device, const void* src, int src_device, size_t nbytes) {
  if (nbytes == 0) return;
  const Driver& d = require_driver("copy between devices");
  if (dst_device != src_device) {
    // Across devices (unified addressing lets the copy engine read the peer): order it after the
    // source's queued work, then run it on the destination's stream.
    Event ready(src_device, false);
    ready.record(current_stream(src_device));
    ready.block(current_stream(dst_device));
  }
  set_device(dst_device);
  check(d.cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src),
                            nbytes, current_stream(dst_device).handle()),
        "cuMemcpyDtoDAsync",
        "copy of " + std::to_string(nbytes) + " bytes from cuda:" + std::to_string(src_device) +
            " to cuda:" + std::to_string(dst_device));
}

void fill(void* dst, uint32_t pattern, size_t element_size, size_t count, int device) {
  if (count == 0) return;
  const Driver& d = require_driver("fill");
  set_device(device);
  const auto p = reinterpret_cast<CUdeviceptr>(dst);
  const CUstream s = current_stream(device).handle();
  const std::string what =
      "fill of " + std::to_string(count) + " elements on cuda:" + std::to_string(device);
  switch (element_size) {
    case 1:
      return check(d.cuMemsetD8Async(p, static_cast<unsigned char>(pattern), count, s),
                   "cuMemsetD8Async", what);
    case 2:
      return check(d.cuMemsetD16Async(p, static_cast<unsigned short>(pattern), count, s),
                   "cuMemsetD16Async", what);
    case 4:
      return check(d.cuMemsetD32Async(p, pattern, count, s), "cuMemsetD32Async", what);
    default:
      TS_INTERNAL_ASSERT(false) << "fill of " << element_size << "-byte elements";
  }
}

void* allocate_pinned(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  const Driver& d = require_driver("allocate_pinned");
  set_device(0);
  void* p = nullptr;
  check(d.cuMemHostAlloc(&p, nbytes, 0x01 /* CU_MEMHOSTALLOC_PORTABLE */), "cuMemHostAlloc",
        "pinned host memory of " + std::to_string(nbytes) + " bytes");
  return p;
}

void release_pinned(void* ptr) {
  if (!ptr) return;
  check(require_driver("release_pinned").cuMemFreeHost(ptr), "cuMemFreeHost", "pinned host memory");
}

}  // namespace tessera::runtime::cuda
