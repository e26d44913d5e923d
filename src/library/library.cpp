// The non-template half of library.h: schema inference, kernels per device with overrides, and
// the checks on register_autograd.
#include <algorithm>
#include <mutex>
#include <sstream>

#include "tessera/library.h"

namespace tessera::library::detail {
namespace {

// Per-operator data of the library layer: default kernels and register_kernel overrides.
struct LibraryData {
  KernelFunction defaults[kNumDeviceTypes];
  KernelFunction overrides[kNumDeviceTypes];
};

// Registration paths hold this while they read or change an operator's LibraryData (dispatch reads
// only the kernels the entry publishes).
std::mutex& library_mutex() {
  static std::mutex m;
  return m;
}

LibraryData& data_of(const OperatorHandle& op) {
  if (!op.entry().library_slot()) op.entry().set_library_slot(std::make_shared<LibraryData>());
  return *static_cast<LibraryData*>(op.entry().library_slot().get());
}

DeviceType device_type_of(const OperatorHandle& op, std::string_view device) {
  try {
    return Device(std::string(device)).type();
  } catch (const Error&) {
    TS_ERROR(ValueError) << "[" << op.name() << "] unknown device type '" << device
                         << "' (expected cpu, cuda or meta)";
  }
}

}  // namespace

OperatorHandle define(std::string_view name, const CustomOpOptions& o,
                      const std::vector<std::string>& arg_types, const std::string& ret,
                      uint32_t tags) {
  const std::string full(name);
  TS_CHECK(full.find("::") != std::string::npos, ValueError)
      << "custom operator names are 'namespace::name', got '" << full << "'";
  TS_CHECK(full.rfind("aten::", 0) != 0, ValueError)
      << "[" << full << "] the aten namespace is reserved for built-in operators";
  std::string schema = o.schema;
  if (schema.empty()) {
    TS_CHECK(o.arg_names.empty() || o.arg_names.size() == arg_types.size(), ValueError)
        << "[" << full << "] arg_names has " << o.arg_names.size() << " names for "
        << arg_types.size() << " arguments";
    const bool all = o.mutates_args.size() == 1 && o.mutates_args[0] == "unknown";
    std::vector<std::string> names;
    for (size_t i = 0; i < arg_types.size(); ++i) {
      names.push_back(o.arg_names.empty() ? "arg" + std::to_string(i) : o.arg_names[i]);
    }
    for (const auto& m : o.mutates_args) {
      if (all) break;
      bool found = false;
      for (size_t i = 0; i < names.size(); ++i) {
        if (names[i] != m) continue;
        found = true;
        TS_CHECK(arg_types[i] == "Tensor", ValueError)
            << "[" << full << "] mutates_args names '" << m << "', which is a " << arg_types[i]
            << ", not a Tensor";
      }
      if (!found) {
        std::string known;
        for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
        TS_ERROR(ValueError) << "[" << full << "] mutates_args names '" << m
                             << "', which is not an argument ("
                             << "arguments: " << known << "; name them with arg_names)";
      }
    }
    std::ostringstream os;
    os << full << "(";
    char alias = 'a';
    for (size_t i = 0; i < arg_types.size(); ++i) {
      if (i) os << ", ";
      const bool written = arg_types[i] == "Tensor" &&
                           (all || std::find(o.mutates_args.begin(), o.mutates_args.end(),
                                             names[i]) != o.mutates_args.end());
      os << arg_types[i];
      if (written) os << "(" << alias++ << "!)";
      os << " " << names[i];
    }
    os << ") -> " << ret;
    schema = os.str();
  }
  const auto existing = find_op(full);
  TS_CHECK(!existing.has_value(), ValueError)
      << "[" << full << "] is already defined (" << existing->schema()
      << "); an operator name can be registered once per process";
  OperatorHandle op = define_op(schema, tags);
  TS_CHECK(op.name() == full || op.schema().base_name() == full, ValueError)
      << "[" << full << "] the given schema defines '" << op.name() << "' instead";
  return op;
}

void set_default_kernels(const OperatorHandle& op, const CustomOpOptions& o, KernelFunction k,
                         bool also_fake) {
  std::lock_guard<std::mutex> lock(library_mutex());
  LibraryData& d = data_of(op);
  std::vector<DeviceType> devices;
  if (o.device_types.empty()) {
    devices = {DeviceType::CPU, DeviceType::CUDA};
  } else {
    for (const auto& s : o.device_types) devices.push_back(device_type_of(op, s));
  }
  if (also_fake) devices.push_back(DeviceType::Meta);
  for (DeviceType t : devices) {
    d.defaults[static_cast<int>(t)] = k;
    op.entry().set_kernel(t, k);
  }
}

void set_device_kernel(const OperatorHandle& op, std::string_view device, KernelFunction k) {
  const DeviceType t = device_type_of(op, device);
  std::lock_guard<std::mutex> lock(library_mutex());
  data_of(op).overrides[static_cast<int>(t)] = k;
  op.entry().set_kernel(t, std::move(k));
}

void enable_device_kernel(const OperatorHandle& op, std::string_view device, bool enabled) {
  const DeviceType t = device_type_of(op, device);
  std::lock_guard<std::mutex> lock(library_mutex());
  LibraryData& d = data_of(op);
  const KernelFunction& o = d.overrides[static_cast<int>(t)];
  TS_CHECK(o.valid(), ValueError) << "[" << op.name() << "] has no kernel registered for '"
                                  << device << "' with register_kernel";
  op.entry().set_kernel(t, enabled ? o : d.defaults[static_cast<int>(t)]);
}

void set_autograd(const OperatorHandle& op, autograd::SetupContextFn setup,
                  autograd::BackwardFn backward) {
  for (const auto& a : op.schema().arguments()) {
    TS_CHECK(!a.is_written(), ValueError)
        << "[" << op.name()
        << "] register_autograd is only for operators that write none of their arguments, "
        << "but this one writes '" << a.name << "'";
  }
  TS_CHECK(backward != nullptr, ValueError)
      << "[" << op.name() << "] register_autograd needs a backward function";
  autograd::register_formula(op, std::move(setup), std::move(backward));
}

void kernel_mismatch(const OperatorHandle& op, const char* what) {
  TS_ERROR(TypeError) << "[" << op.name() << "] the " << what
                      << "'s C++ signature does not match the schema " << op.schema();
}

}  // namespace tessera::library::detail
