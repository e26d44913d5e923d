#include "tessera/device.h"

#include <charconv>
#include <ostream>

#include "tessera/error.h"

namespace tessera {

const char* device_type_name(DeviceType t) {
  switch (t) {
    case DeviceType::CPU:
      return "cpu";
    case DeviceType::CUDA:
      return "cuda";
    case DeviceType::Meta:
      return "meta";
  }
  return "?";
}

Device::Device(std::string_view spec) : type_(DeviceType::CPU), index_(-1) {
  std::string_view kind = spec;
  std::string_view idx;
  if (auto colon = spec.find(':'); colon != std::string_view::npos) {
    kind = spec.substr(0, colon);
    idx = spec.substr(colon + 1);
  }
  if (kind == "cpu") {
    type_ = DeviceType::CPU;
  } else if (kind == "cuda") {
    type_ = DeviceType::CUDA;
    index_ = 0;
  } else if (kind == "meta") {
    type_ = DeviceType::Meta;
  } else {
    TS_ERROR(ValueError) << "unknown device '" << spec << "' (expected cpu, meta, cuda or cuda:N)";
  }
  if (!idx.empty()) {
    int v = -1;
    auto [p, ec] = std::from_chars(idx.data(), idx.data() + idx.size(), v);
    TS_CHECK(ec == std::errc() && p == idx.data() + idx.size() && v >= 0 && v < 128, ValueError)
        << "bad device index in '" << spec << "'";
    TS_CHECK(type_ == DeviceType::CUDA, ValueError)
        << "device '" << spec << "': only cuda devices take an index";
    index_ = static_cast<int8_t>(v);
  }
}

std::string Device::str() const {
  std::string s = device_type_name(type_);
  if (type_ == DeviceType::CUDA) {
    s += ':';
    s += std::to_string(index_);
  }
  return s;
}

std::ostream& operator<<(std::ostream& os, const Device& d) {
  return os << d.str();
}

}  // namespace tessera
