/** \file
 * Devices: `cpu`, `meta` (shapes and dtypes, no data) and `cuda:N`.
 */
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>

namespace tessera {

/** The kind of device a tensor lives on. The order is part of the cache format: append only. */
enum class DeviceType : uint8_t { CPU, CUDA, Meta };
inline constexpr int kNumDeviceTypes = 3;

/** A device: a type and, for CUDA, an index. */
class Device {
 public:
  constexpr Device(DeviceType type = DeviceType::CPU, int8_t index = -1)
      : type_(type), index_(type == DeviceType::CUDA && index < 0 ? 0 : index) {}
  /** Parses "cpu", "meta", "cuda", "cuda:1"; `ValueError` otherwise. */
  Device(std::string_view spec);  // NOLINT: implicit, as torch.device("cuda")
  Device(const char* spec) : Device(std::string_view(spec)) {}  // NOLINT

  constexpr DeviceType type() const { return type_; }
  /** The CUDA ordinal; -1 for cpu and meta. */
  constexpr int index() const { return index_; }
  constexpr bool is_cpu() const { return type_ == DeviceType::CPU; }
  constexpr bool is_cuda() const { return type_ == DeviceType::CUDA; }
  constexpr bool is_meta() const { return type_ == DeviceType::Meta; }

  /** "cpu", "meta", "cuda:0". */
  std::string str() const;

  constexpr bool operator==(const Device& o) const {
    return type_ == o.type_ && index_ == o.index_;
  }
  constexpr bool operator!=(const Device& o) const { return !(*this == o); }

 private:
  DeviceType type_;
  int8_t index_;
};

/** "cpu", "cuda" or "meta". */
const char* device_type_name(DeviceType t);

/** What kernels size their grids by (Triton's tutorials read `multi_processor_count`): a GPU's
 * name, multiprocessors, compute capability and memory; for the CPU its model and the thread
 * pool's threads (the programs that run at once). A DeviceError for a GPU that does not exist. */
struct DeviceProperties {
  std::string name;
  int multi_processor_count = 0;
  int major = 0, minor = 0;  ///< compute capability (0 for the CPU)
  size_t total_memory = 0;   ///< bytes (0 for the CPU)
};
DeviceProperties get_device_properties(Device device);
std::ostream& operator<<(std::ostream& os, const Device& d);

inline constexpr Device kCPU{DeviceType::CPU};
inline constexpr Device kMeta{DeviceType::Meta};

}  // namespace tessera

template <>
struct std::hash<tessera::Device> {
  size_t operator()(const tessera::Device& d) const noexcept {
    return (size_t(d.type()) << 8) ^ size_t(uint8_t(d.index()));
  }
};
