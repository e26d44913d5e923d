// The operator registry: name -> OperatorEntry. Entries are never removed, so handles stay valid.
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <sstream>

#include "tessera/detail/boxing.h"
#include "tessera/dispatch.h"

namespace tessera {
namespace {

struct Registry {
  std::shared_mutex mutex;
  std::map<std::string, std::unique_ptr<OperatorEntry>, std::less<>> by_name;
  std::map<std::string, std::vector<OperatorEntry*>, std::less<>> by_base;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: kernels outlive static destructors
  return *r;
}

std::string normalize(std::string_view name) {
  std::string n(name);
  if (n.size() > 8 && n.compare(n.size() - 8, 8, ".default") == 0) n.resize(n.size() - 8);
  return n;
}

// Edit distance, for "did you mean" suggestions.
size_t distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] =
          std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1] ? 1 : 0)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

struct OperatorEntry::Published {
  std::mutex mutex;
  std::vector<std::unique_ptr<const KernelFunction>> kernels;
  std::vector<std::unique_ptr<const std::shared_ptr<void>>> slots;
};

namespace {
const KernelFunction kNoKernel{};
const std::shared_ptr<void> kNoSlot{};
}  // namespace

OperatorEntry::OperatorEntry(FunctionSchema schema, uint32_t tags)
    : schema_(std::move(schema)),
      name_(schema_.qualified_name()),
      tags_(tags),
      composite_(&kNoKernel),
      autograd_(&kNoSlot),
      flops_(&kNoSlot),
      library_(&kNoSlot),
      published_(std::make_unique<Published>()) {
  for (auto& k : kernels_) k.store(&kNoKernel, std::memory_order_relaxed);
}

OperatorEntry::~OperatorEntry() = default;

void OperatorEntry::set_kernel(DeviceType t, KernelFunction k) {
  std::lock_guard<std::mutex> lock(published_->mutex);
  for (const auto& slot : kernels_) {
    const KernelFunction& other = *slot.load(std::memory_order_relaxed);
    if (other.valid() && other.signature && k.signature && *other.signature != *k.signature) {
      detail::throw_kernel_mismatch(*this, "kernel", *k.signature);
    }
  }
  published_->kernels.push_back(std::make_unique<const KernelFunction>(std::move(k)));
  kernels_[static_cast<int>(t)].store(published_->kernels.back().get(), std::memory_order_release);
}

void OperatorEntry::set_composite(KernelFunction k) {
  std::lock_guard<std::mutex> lock(published_->mutex);
  published_->kernels.push_back(std::make_unique<const KernelFunction>(std::move(k)));
  composite_.store(published_->kernels.back().get(), std::memory_order_release);
}

void OperatorEntry::publish(Slot& slot, std::shared_ptr<void> v) {
  std::lock_guard<std::mutex> lock(published_->mutex);
  published_->slots.push_back(std::make_unique<const std::shared_ptr<void>>(std::move(v)));
  slot.store(published_->slots.back().get(), std::memory_order_release);
}

const FunctionSchema& OperatorHandle::schema() const {
  return entry_->schema();
}
const std::string& OperatorHandle::name() const {
  return entry_->name();
}
bool OperatorHandle::has_tag(OpTag t) const {
  return (entry_->tags() & t) != 0;
}

OperatorHandle define_op(std::string_view schema, uint32_t tags, std::string_view default_ns) {
  FunctionSchema fs = FunctionSchema::parse(schema, default_ns);
  const std::string name = fs.qualified_name();
  auto& r = registry();
  std::unique_lock<std::shared_mutex> g(r.mutex);
  auto it = r.by_name.find(name);
  TS_CHECK(it == r.by_name.end(), ValueError)
      << "operator " << name << " is already registered (schema: " << it->second->schema() << ")";
  auto entry = std::make_unique<OperatorEntry>(std::move(fs), tags);
  OperatorEntry* raw = entry.get();
  r.by_base[raw->schema().base_name()].push_back(raw);
  r.by_name.emplace(name, std::move(entry));
  return OperatorHandle(raw);
}

std::optional<OperatorHandle> find_op(std::string_view name) {
  auto& r = registry();
  std::shared_lock<std::shared_mutex> g(r.mutex);
  auto it = r.by_name.find(normalize(name));
  if (it == r.by_name.end()) return std::nullopt;
  return OperatorHandle(it->second.get());
}

OperatorHandle get_op(std::string_view name) {
  if (auto op = find_op(name)) return *op;
  auto& r = registry();
  std::shared_lock<std::shared_mutex> g(r.mutex);
  std::string best;
  size_t best_d = 4;
  for (const auto& [n, e] : r.by_name) {
    const size_t d = distance(n, name);
    if (d < best_d) {
      best_d = d;
      best = n;
    }
  }
  std::ostringstream os;
  os << "unknown operator '" << name << "'";
  if (!best.empty()) os << "; did you mean '" << best << "'?";
  TS_ERROR(ValueError) << os.str();
}

std::vector<OperatorHandle> overloads(std::string_view base_name) {
  auto& r = registry();
  std::shared_lock<std::shared_mutex> g(r.mutex);
  std::vector<OperatorHandle> out;
  auto it = r.by_base.find(base_name);
  if (it != r.by_base.end()) {
    for (auto* e : it->second) out.emplace_back(e);
  }
  return out;
}

std::vector<OperatorHandle> all_ops() {
  auto& r = registry();
  std::shared_lock<std::shared_mutex> g(r.mutex);
  std::vector<OperatorHandle> out;
  for (const auto& [n, e] : r.by_name) out.emplace_back(e.get());
  return out;
}

namespace detail {

void throw_kernel_mismatch(const OperatorEntry& op, const char* what, const std::type_info&) {
  TS_ERROR(TypeError) << "[" << op.name() << "] the " << what
                      << "'s C++ signature does not match the schema " << op.schema()
                      << " (or another kernel of this op)";
}

void check_typed_signature(const OperatorEntry& op, const std::type_info& sig) {
  auto check = [&](const KernelFunction& k) {
    TS_CHECK(!k.valid() || !k.signature || *k.signature == sig, TypeError)
        << "[" << op.name() << "] called with a C++ signature that differs from its kernels'";
  };
  for (auto d : {DeviceType::CPU, DeviceType::CUDA, DeviceType::Meta}) check(op.kernel(d));
  check(op.composite());
}

}  // namespace detail
}  // namespace tessera
