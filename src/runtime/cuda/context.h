/** \file
 * CUDA devices, their primary contexts, streams and events (PyTorch's model): each device has a
 * current stream per thread, the legacy default stream unless a `StreamGuard` sets another; work
 * tessera queues (copies, fills, kernels) goes to the current stream, and host reads synchronize
 * it. Every thread that touches a device gets its primary context made current first, so pool and
 * compile threads work too.
 */
#pragma once

#include <cstddef>
#include <string>

#include "runtime/cuda/driver.h"

namespace tessera::runtime::cuda {

/** Number of CUDA devices (0 without a driver or a GPU). */
int device_count();

/** What `tessera doctor` shows of a device. */
struct DeviceInfo {
  std::string name;
  int major = 0, minor = 0;  ///< compute capability
  int multiprocessors = 0;
  size_t total_memory = 0;
  size_t l2_bytes = 0;
  int max_shared_optin = 0;  ///< bytes of shared memory a block may opt into
};
/** The device's properties; a DeviceError naming the index when it does not exist. */
const DeviceInfo& device_info(int index);

/** Makes device `index`'s primary context current on this thread (cheap when it already is). */
void set_device(int index);

/** A CUDA stream of one device (not owning: streams made by `Stream::create` live until the
 * process ends, as PyTorch's pooled streams do). */
class Stream {
 public:
  Stream() = default;
  Stream(int device, CUstream handle) : device_(device), handle_(handle) {}
  /** A new non-blocking stream on `device`. */
  static Stream create(int device);
  /** The legacy default stream of `device`. */
  static Stream default_stream(int device) { return Stream(device, nullptr); }

  int device() const { return device_; }
  CUstream handle() const { return handle_; }
  /** Waits for everything queued on the stream. */
  void synchronize() const;
  /** Whether all work queued so far has finished. */
  bool query() const;
  bool operator==(const Stream& o) const { return device_ == o.device_ && handle_ == o.handle_; }

 private:
  int device_ = 0;
  CUstream handle_ = nullptr;
};

/** This thread's current stream of `device`. */
Stream current_stream(int device);
/** Makes `s` the current stream of its device on this thread for the guard's lifetime. */
class StreamGuard {
 public:
  explicit StreamGuard(Stream s);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream saved_;
};

/** Waits for all work on `device` (every stream). */
void synchronize(int device);
/** Waits for all work on every device this process has used; nothing (one atomic load) in a
 * process that never touched a GPU. Host timers of GPU work (`do_bench`, autotuning) call it. */
void synchronize_used();

/** A CUDA event (owning), for ordering streams and timing. */
class Event {
 public:
  explicit Event(int device, bool timing = true);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record(const Stream& s);
  void synchronize() const;
  bool query() const;
  /** Makes `s` wait for this event (no host blocking). */
  void block(const Stream& s) const;
  /** Milliseconds between two recorded, completed timing events. */
  static float elapsed_ms(const Event& start, const Event& end);
  CUevent handle() const { return event_; }

 private:
  int device_;
  CUevent event_ = nullptr;
};

}  // namespace tessera::runtime::cuda
