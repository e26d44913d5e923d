// The AOT package's bytes: the container (header, section table, digests) and the model's encoding.
// Little-endian fixed-width integers throughout; strings and lists are a u32 count, then items.
#include "aot/package.h"

#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "tessera/detail/hash.h"
#include "tessera/device.h"

namespace tessera::aot_detail {
namespace {

class Writer {
 public:
  std::string buf;
  void u8(uint8_t v) { buf.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) { raw(&v, 4); }
  void i32(int32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void i64(int64_t v) { raw(&v, 8); }
  void f64(double v) { raw(&v, 8); }
  void str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    buf += s;
  }
  void raw(const void* p, size_t n) { buf.append(static_cast<const char*>(p), n); }
  void sym(const SymRef& r) {
    i64(r.constant);
    i64(r.slot);
  }
  template <class T, class F>
  void list(const std::vector<T>& v, F&& item) {
    u32(static_cast<uint32_t>(v.size()));
    for (const T& x : v) item(x);
  }
  void ivalue(const IValue& v);
};

/** Reads untrusted bytes: every read is bounds-checked, every count limited. */
class Reader {
 public:
  Reader(std::string_view data, std::string where) : d_(data), where_(std::move(where)) {}
  uint8_t u8() { return take<uint8_t>(); }
  uint32_t u32() { return take<uint32_t>(); }
  int32_t i32() { return take<int32_t>(); }
  uint64_t u64() { return take<uint64_t>(); }
  int64_t i64() { return take<int64_t>(); }
  double f64() { return take<double>(); }
  bool flag() {
    const uint8_t v = u8();
    check(v <= 1, "a flag is " + std::to_string(v));
    return v != 0;
  }
  /** A count of items of at least `min_bytes` each: bounded by the limit and the bytes left. */
  size_t count(size_t min_bytes = 1) {
    const uint32_t n = u32();
    check(n <= kMaxCount, "a count of " + std::to_string(n) + " is above the limit");
    check(static_cast<uint64_t>(n) * std::max<size_t>(min_bytes, 1) <= d_.size() - pos_,
          "a count of " + std::to_string(n) + " runs past the end");
    return n;
  }
  std::string str() {
    const uint32_t n = u32();
    check(n <= kMaxString, "a string of " + std::to_string(n) + " bytes is above the limit");
    check(n <= d_.size() - pos_, "a string runs past the end");
    std::string s(d_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  /** Bytes of any length up to what is left (a cubin). */
  std::string blob() {
    const uint64_t n = u64();
    check(n <= d_.size() - pos_, "a block of " + std::to_string(n) + " bytes runs past the end");
    std::string s(d_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  SymRef sym(size_t slots) {
    SymRef r;
    r.constant = i64();
    r.slot = i64();
    check(r.slot >= -1 && r.slot < static_cast<int64_t>(slots),
          "a size reference to slot " + std::to_string(r.slot) + " of " + std::to_string(slots));
    return r;
  }
  DType dtype() {
    const uint8_t t = u8();
    check(t < kNumDTypes, "an unknown dtype " + std::to_string(t));
    return static_cast<DType>(t);
  }
  IValue ivalue();
  void done() { check(pos_ == d_.size(), std::to_string(d_.size() - pos_) + " bytes left over"); }
  void check(bool ok, const std::string& what) const {
    TS_CHECK(ok, aot::PackageError) << where_ << ": " << what << " (at byte " << pos_ << ")";
  }

 private:
  template <class T>
  T take() {
    check(sizeof(T) <= d_.size() - pos_, "truncated");
    T v;
    std::memcpy(&v, d_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string_view d_;
  size_t pos_ = 0;
  std::string where_;
};

enum class VTag : uint8_t {
  None,
  Bool,
  Int,
  Double,
  String,
  DType,
  Device,
  IntList,
  DoubleList,
  BoolList,
  SymIntList
};

void Writer::ivalue(const IValue& v) {
  if (v.is_none()) {
    u8(uint8_t(VTag::None));
  } else if (v.is_bool()) {
    u8(uint8_t(VTag::Bool));
    u8(v.to_bool());
  } else if (v.is_int()) {
    u8(uint8_t(VTag::Int));
    i64(v.to_int());
  } else if (v.is_double()) {
    u8(uint8_t(VTag::Double));
    f64(v.to_double());
  } else if (v.is_string()) {
    u8(uint8_t(VTag::String));
    str(v.to_string());
  } else if (v.is_dtype()) {
    u8(uint8_t(VTag::DType));
    u8(static_cast<uint8_t>(v.to_dtype()));
  } else if (v.is_device()) {
    u8(uint8_t(VTag::Device));
    u8(static_cast<uint8_t>(v.to_device().type()));
    i32(v.to_device().index());
  } else if (v.is_int_list()) {
    u8(uint8_t(VTag::IntList));
    list(v.to_int_list(), [&](int64_t x) { i64(x); });
  } else if (v.is_symint_list()) {  // plain values (a symbolic list is a SymList argument)
    u8(uint8_t(VTag::SymIntList));
    list(v.to_symint_list(), [&](const SymInt& x) { i64(x.expect_int()); });
  } else if (v.is_double_list()) {
    u8(uint8_t(VTag::DoubleList));
    list(v.to_double_list(), [&](double x) { f64(x); });
  } else if (v.is_bool_list()) {
    u8(uint8_t(VTag::BoolList));
    const auto& l = v.to_bool_list();
    u32(static_cast<uint32_t>(l.size()));
    for (bool b : l) u8(b);
  } else {
    TS_ERROR(InternalError) << "an AOT constant of type " << v.type_name() << " passed export";
  }
}

IValue Reader::ivalue() {
  const uint8_t tag = u8();
  switch (static_cast<VTag>(tag)) {
    case VTag::None:
      return IValue();
    case VTag::Bool:
      return IValue(flag());
    case VTag::Int:
      return IValue(i64());
    case VTag::Double:
      return IValue(f64());
    case VTag::String:
      return IValue(str());
    case VTag::DType:
      return IValue(dtype());
    case VTag::Device: {
      const uint8_t t = u8();
      const int32_t index = i32();
      check(t <= static_cast<uint8_t>(DeviceType::Meta) && index >= -1 && index < 128,
            "an unknown device");
      return IValue(Device(static_cast<DeviceType>(t), static_cast<int8_t>(index)));
    }
    case VTag::IntList: {
      std::vector<int64_t> l(count(8));
      for (auto& x : l) x = i64();
      return IValue(std::move(l));
    }
    case VTag::SymIntList: {
      std::vector<SymInt> l;
      const size_t n = count(8);
      l.reserve(n);
      for (size_t i = 0; i < n; ++i) l.emplace_back(i64());
      return IValue(std::move(l));
    }
    case VTag::DoubleList: {
      std::vector<double> l(count(8));
      for (auto& x : l) x = f64();
      return IValue(std::move(l));
    }
    case VTag::BoolList: {
      std::vector<bool> l(count(1));
      for (size_t i = 0; i < l.size(); ++i) l[i] = flag();
      return IValue(std::move(l));
    }
  }
  check(false, "an unknown constant tag " + std::to_string(tag));
  return IValue();
}

}  // namespace

const char* section_name(uint32_t id) {
  switch (static_cast<SectionId>(id)) {
    case SectionId::Manifest:
      return "manifest";
    case SectionId::Schedule:
      return "schedule";
    case SectionId::CpuObject:
      return "cpu-object";
    case SectionId::Constants:
      return "constants";
    case SectionId::CudaObjects:
      return "cuda-objects";
  }
  return "unknown";
}

// ---- the model ---------------------------------------------------------------------------------

std::string encode_manifest(const Model& m) {
  Writer w;
  w.str(m.name);
  w.str(m.created_by);
  w.u32(m.abi);
  w.str(m.isa);
  w.list(m.cpu_features, [&](const std::string& s) { w.str(s); });
  w.list(m.symbols, [&](const Symbol& s) {
    w.str(s.name);
    w.u32(s.leaf);
    w.u32(s.dim);
    w.i64(s.min);
    w.i64(s.max);
    w.i64(s.example);
  });
  w.list(m.leaves, [&](const Leaf& l) {
    w.u8(l.tensor);
    if (!l.tensor) {
      w.ivalue(l.constant);
      return;
    }
    w.u8(static_cast<uint8_t>(l.dtype));
    w.u8(l.requires_grad);
    w.u8(l.contiguous);
    w.list(l.sizes, [&](int64_t v) { w.i64(v); });
    for (int32_t s : l.symbol) w.i32(s);
    w.list(l.strides, [&](int64_t v) { w.i64(v); });
    w.i64(l.offset);
  });
  w.list(m.alias_pairs, [&](const std::pair<uint32_t, uint32_t>& p) {
    w.u32(p.first);
    w.u32(p.second);
  });
  w.u32(static_cast<uint32_t>(m.prog_op.size()));
  for (size_t i = 0; i < m.prog_op.size(); ++i) {
    w.u8(m.prog_op[i]);
    w.i32(m.prog_a[i]);
    w.i32(m.prog_b[i]);
    w.i64(m.prog_imm[i]);
  }
  w.list(m.prog_outputs, [&](int32_t o) { w.i32(o); });
  w.list(m.guards, [&](const std::string& s) { w.str(s); });
  w.list(m.outputs, [&](const Output& o) {
    w.i32(o.value);
    if (o.value < 0) w.ivalue(o.constant);
  });
  return w.buf;
}

std::string encode_schedule(const Model& m) {
  Writer w;
  w.u32(m.num_values);
  w.list(m.inputs, [&](int32_t v) { w.i32(v); });
  w.list(m.constants, [&](const Constant& c) {
    w.i32(c.value);
    w.u8(static_cast<uint8_t>(c.dtype));
    w.list(c.sizes, [&](int64_t v) { w.i64(v); });
    w.u64(c.offset);
    w.u64(c.nbytes);
  });
  w.list(m.nodes, [&](const Node& n) {
    w.u8(n.kind);
    w.str(n.loc);
    if (n.kind == Node::Op) {
      w.str(n.op);
      w.str(n.schema_hash);
      w.list(n.args, [&](const NodeArg& a) {
        w.u8(a.kind);
        switch (a.kind) {
          case NodeArg::Value:
            w.i32(a.value);
            break;
          case NodeArg::ValueList:
            w.u8(a.optional_list);
            w.list(a.values, [&](int32_t v) { w.i32(v); });
            break;
          case NodeArg::Sym:
            w.sym(a.sym);
            break;
          case NodeArg::SymList:
            w.list(a.syms, [&](const SymRef& r) { w.sym(r); });
            break;
          default:
            w.ivalue(a.constant);
        }
      });
      w.list(n.outputs, [&](int32_t v) { w.i32(v); });
      w.u8(n.elide);
      if (n.elide) {
        w.sym(n.elide_when);
        w.str(n.elided_op);
        w.str(n.elided_hash);
        w.i32(n.elided_drop);
      }
      w.u8(n.planned);
      if (n.planned) w.sym(n.arena_offset);
      return;
    }
    w.str(n.kernel);
    w.list(n.params, [&](const Param& p) {
      w.u8(p.kind);
      w.u8(p.source);
      w.u8(p.written);
      w.i32(p.value);
      w.sym(p.sym);
      w.i64(p.i);
      w.f64(p.f);
    });
    for (const SymRef& g : n.grid) w.sym(g);
    w.list(n.variants, [&](const Variant& v) {
      w.str(v.symbol);
      w.i64(v.work_per_program);
      for (uint8_t a : v.assume) w.u8(a);
    });
  });
  w.u8(m.has_arena);
  if (m.has_arena) w.sym(m.arena_bytes);
  return w.buf;
}

std::string encode_cuda(const CudaCode& c) {
  Writer w;
  w.list(c.modules, [&](const CudaModule& m) {
    w.u32(m.threads);
    w.u64(m.shared_bytes);
  });
  w.list(c.archs, [&](const CudaArch& a) {
    w.str(a.name);
    for (const std::string& cubin : a.cubins) {
      w.u64(cubin.size());
      w.buf += cubin;
    }
  });
  return w.buf;
}

bool is_ptx_arch(const std::string& name) {
  return name.rfind("compute_", 0) == 0;
}

bool parse_arch(const std::string& name, int& major, int& minor, bool& specific) {
  const size_t pre = is_ptx_arch(name) ? 8 : name.rfind("sm_", 0) == 0 ? 3 : 0;
  if (pre == 0 || name.size() < pre + 2 || name.size() > pre + 4) return false;
  size_t end = name.size();
  specific = name.back() == 'a';
  if (specific && pre == 8) return false;  // PTX is for a plain virtual architecture
  if (specific) --end;
  if (end - pre < 2 || end - pre > 3) return false;
  int v = 0;
  for (size_t i = pre; i < end; ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
    v = v * 10 + (name[i] - '0');
  }
  major = v / 10;
  minor = v % 10;
  return major >= 1;
}

int pick_arch(const std::vector<std::string>& archs, int major, int minor) {
  int best = -1, best_minor = -1;
  for (size_t i = 0; i < archs.size(); ++i) {
    int ma = 0, mi = 0;
    bool specific = false;
    if (is_ptx_arch(archs[i]) || !parse_arch(archs[i], ma, mi, specific) || ma != major ||
        mi > minor)
      continue;
    if (specific && mi != minor) continue;
    // Among equal minors the arch-specific target is preferred (it can hold wgmma code).
    const int rank = mi * 2 + (specific ? 1 : 0);
    if (rank > best_minor) {
      best_minor = rank;
      best = static_cast<int>(i);
    }
  }
  if (best >= 0) return best;
  // No cubin: the newest PTX not above the device, which the driver compiles at load.
  int best_version = -1;
  for (size_t i = 0; i < archs.size(); ++i) {
    int ma = 0, mi = 0;
    bool specific = false;
    if (!is_ptx_arch(archs[i]) || !parse_arch(archs[i], ma, mi, specific)) continue;
    const int v = ma * 10 + mi;
    if (v <= major * 10 + minor && v > best_version) {
      best_version = v;
      best = static_cast<int>(i);
    }
  }
  return best;
}

int64_t entry_index(const std::string& symbol) {
  static constexpr char kPrefix[] = "tessera_kernel_";
  const size_t n = sizeof(kPrefix) - 1;
  if (symbol.size() <= n || symbol.size() > n + 9 || symbol.compare(0, n, kPrefix) != 0) return -1;
  if (symbol.size() > n + 1 && symbol[n] == '0') return -1;  // one spelling per index
  int64_t v = 0;
  for (size_t i = n; i < symbol.size(); ++i) {
    if (symbol[i] < '0' || symbol[i] > '9') return -1;
    v = v * 10 + (symbol[i] - '0');
  }
  return v;
}

namespace {
CudaCode decode_cuda(std::string_view bytes, const std::string& origin) {
  CudaCode c;
  Reader r(bytes, origin + ": cuda-objects");
  c.modules.resize(r.count(12));
  for (CudaModule& m : c.modules) {
    m.threads = r.u32();
    m.shared_bytes = r.u64();
    r.check(m.threads >= 1 && m.threads <= 1024,
            "a kernel of " + std::to_string(m.threads) + " threads per block");
    r.check(m.shared_bytes <= (uint64_t{1} << 20),
            "a kernel with " + std::to_string(m.shared_bytes) + " bytes of shared memory");
  }
  c.archs.resize(r.count(4));
  r.check(!c.archs.empty(), "no architecture");
  r.check(c.archs.size() <= 64, std::to_string(c.archs.size()) + " architectures");
  for (size_t i = 0; i < c.archs.size(); ++i) {
    CudaArch& a = c.archs[i];
    a.name = r.str();
    int major = 0, minor = 0;
    bool specific = false;
    r.check(parse_arch(a.name, major, minor, specific), "an architecture '" + a.name + "'");
    for (size_t j = 0; j < i; ++j)
      r.check(c.archs[j].name != a.name, "architecture " + a.name + " appears twice");
    a.cubins.resize(c.modules.size());
    for (std::string& cubin : a.cubins) {
      cubin = r.blob();
      r.check(!cubin.empty(), "an empty cubin for " + a.name);
      // The driver reads PTX up to its NUL: one past the end would read outside the package.
      r.check(!is_ptx_arch(a.name) || cubin.back() == '\0',
              "PTX for " + a.name + " without its terminating NUL");
    }
  }
  r.done();
  return c;
}
}  // namespace

Model decode(const Container& c, const std::string& origin) {
  Model m;
  Reader r(c.section(SectionId::Manifest), origin + ": manifest");
  m.name = r.str();
  m.created_by = r.str();
  m.abi = r.u32();
  TS_CHECK(m.abi == kRuntimeAbi, aot::PackageError)
      << origin << ": the package's kernels use runtime ABI " << m.abi << "; this tessera runs "
      << kRuntimeAbi << " (export it again with this version)";
  m.isa = r.str();
  m.cpu_features.resize(r.count(4));
  for (auto& f : m.cpu_features) f = r.str();
  m.symbols.resize(r.count(40));
  for (auto& s : m.symbols) {
    s.name = r.str();
    s.leaf = r.u32();
    s.dim = r.u32();
    s.min = r.i64();
    s.max = r.i64();
    s.example = r.i64();
    r.check(s.min <= s.example && s.example <= s.max,
            "Dim '" + s.name + "' has its example outside its range");
    r.check(s.min >= 2 && s.min <= s.max, "Dim '" + s.name + "' has the range [" +
                                              std::to_string(s.min) + ", " + std::to_string(s.max) +
                                              "]");
  }
  m.leaves.resize(r.count(1));
  for (size_t li = 0; li < m.leaves.size(); ++li) {
    Leaf& l = m.leaves[li];
    l.tensor = r.flag();
    if (!l.tensor) {
      l.constant = r.ivalue();
      continue;
    }
    l.dtype = r.dtype();
    l.requires_grad = r.flag();
    l.contiguous = r.flag();
    l.sizes.resize(r.count(12));
    r.check(l.sizes.size() <= 64, "a tensor of rank " + std::to_string(l.sizes.size()));
    for (auto& v : l.sizes) {
      v = r.i64();
      r.check(v >= -1, "a negative size");
    }
    l.symbol.resize(l.sizes.size());
    for (size_t d = 0; d < l.symbol.size(); ++d) {
      l.symbol[d] = r.i32();
      const int32_t s = l.symbol[d];
      r.check(s >= -1 && s < static_cast<int32_t>(m.symbols.size()),
              "a dimension bound to symbol " + std::to_string(s));
      r.check((s < 0) == (l.sizes[d] >= 0), "a dimension both static and symbolic");
    }
    l.strides.resize(r.count(8));
    r.check(l.contiguous ? l.strides.empty() : l.strides.size() == l.sizes.size(),
            "strides that do not match the rank");
    for (auto& v : l.strides) v = r.i64();
    l.offset = r.i64();
    r.check(l.offset >= 0, "a negative storage offset");
  }
  for (const Symbol& s : m.symbols) {
    r.check(s.leaf < m.leaves.size() && m.leaves[s.leaf].tensor &&
                s.dim < m.leaves[s.leaf].sizes.size(),
            "Dim '" + s.name + "' names a dimension that does not exist");
  }
  m.alias_pairs.resize(r.count(8));
  for (auto& p : m.alias_pairs) {
    p.first = r.u32();
    p.second = r.u32();
    r.check(p.first < m.leaves.size() && p.second < m.leaves.size() && p.first < p.second,
            "an alias pair out of range");
  }
  const size_t ncode = r.count(17);
  m.prog_op.resize(ncode);
  m.prog_a.resize(ncode);
  m.prog_b.resize(ncode);
  m.prog_imm.resize(ncode);
  for (size_t i = 0; i < ncode; ++i) {
    m.prog_op[i] = r.u8();
    m.prog_a[i] = r.i32();
    m.prog_b[i] = r.i32();
    m.prog_imm[i] = r.i64();
  }
  m.prog_outputs.resize(r.count(4));
  for (auto& o : m.prog_outputs) o = r.i32();
  m.guards.resize(r.count(4));
  for (auto& g : m.guards) g = r.str();
  r.check(m.guards.size() <= m.prog_outputs.size(), "more guards than program outputs");
  const size_t slots = m.prog_outputs.size();
  m.outputs.resize(r.count(4));
  // (output value ids are checked against the schedule below)
  for (auto& o : m.outputs) {
    o.value = r.i32();
    if (o.value < 0) o.constant = r.ivalue();
  }
  r.done();

  Reader s(c.section(SectionId::Schedule), origin + ": schedule");
  m.num_values = s.u32();
  s.check(m.num_values <= kMaxCount, "too many values");
  const auto value_ok = [&](int32_t v, bool none_ok) {
    return (none_ok && v == -1) || (v >= 0 && static_cast<uint32_t>(v) < m.num_values);
  };
  m.inputs.resize(s.count(4));
  s.check(m.inputs.size() == m.leaves.size(), "inputs do not match the manifest's arguments");
  for (size_t i = 0; i < m.inputs.size(); ++i) {
    m.inputs[i] = s.i32();
    s.check(value_ok(m.inputs[i], !m.leaves[i].tensor) && (m.inputs[i] >= 0 || !m.leaves[i].tensor),
            "an input's value id");
  }
  const uint64_t const_bytes = c.section(SectionId::Constants).size();
  m.constants.resize(s.count(21));
  for (auto& k : m.constants) {
    k.value = s.i32();
    s.check(value_ok(k.value, false), "a constant's value id");
    k.dtype = s.dtype();
    k.sizes.resize(s.count(8));
    s.check(k.sizes.size() <= 64, "a constant of rank " + std::to_string(k.sizes.size()));
    uint64_t numel = 1;
    for (auto& v : k.sizes) {
      v = s.i64();
      s.check(v >= 0 && v < (int64_t{1} << 40), "a constant's size");
      s.check(!__builtin_mul_overflow(numel, static_cast<uint64_t>(v), &numel),
              "a constant's size overflows");
    }
    k.offset = s.u64();
    k.nbytes = s.u64();
    uint64_t want = 0;
    s.check(!__builtin_mul_overflow(numel, itemsize(k.dtype), &want) && want == k.nbytes,
            "a constant's byte count does not match its sizes");
    s.check(k.offset % 64 == 0 && k.offset <= const_bytes && k.nbytes <= const_bytes - k.offset,
            "a constant outside the constants section");
  }
  m.nodes.resize(s.count(6));
  for (Node& n : m.nodes) {
    n.kind = s.u8();
    s.check(n.kind < Node::kKinds, "an unknown node kind");
    n.loc = s.str();
    if (n.kind == Node::Op) {
      n.op = s.str();
      n.schema_hash = s.str();
      n.args.resize(s.count(2));
      for (NodeArg& a : n.args) {
        a.kind = s.u8();
        s.check(a.kind < NodeArg::kKinds, "an unknown argument kind");
        switch (a.kind) {
          case NodeArg::Value:
            a.value = s.i32();
            s.check(value_ok(a.value, false), "an argument's value id");
            break;
          case NodeArg::ValueList:
            a.optional_list = s.flag();
            a.values.resize(s.count(4));
            for (auto& v : a.values) {
              v = s.i32();
              s.check(value_ok(v, a.optional_list), "a list argument's value id");
            }
            break;
          case NodeArg::Sym:
            a.sym = s.sym(slots);
            break;
          case NodeArg::SymList:
            a.syms.resize(s.count(16));
            for (auto& x : a.syms) x = s.sym(slots);
            break;
          default:
            a.constant = s.ivalue();
        }
      }
      n.outputs.resize(s.count(4));
      for (auto& v : n.outputs) {
        v = s.i32();
        s.check(value_ok(v, true), "an output's value id");
      }
      n.elide = s.flag();
      if (n.elide) {
        n.elide_when = s.sym(slots);
        n.elided_op = s.str();
        n.elided_hash = s.str();
        n.elided_drop = s.i32();
        s.check(n.elided_drop >= 0 && static_cast<size_t>(n.elided_drop) < n.args.size(),
                "an elided argument out of range");
      }
      if (c.minor >= 2) {
        n.planned = s.flag();
        if (n.planned) {
          n.arena_offset = s.sym(slots);
          // aten::empty(size, dtype, device) with one result: what the runtime places itself.
          s.check(n.op == "aten::empty" && !n.elide && n.outputs.size() == 1 && n.outputs[0] >= 0 &&
                      n.args.size() == 3 && n.args[0].kind == NodeArg::SymList &&
                      n.args[1].kind == NodeArg::Constant && n.args[1].constant.is_dtype(),
                  "a planned allocation that is not aten::empty(size, dtype, device)");
        }
      }
      continue;
    }
    n.kernel = s.str();
    n.params.resize(s.count(40));
    s.check(n.params.size() <= 64,
            "a kernel with " + std::to_string(n.params.size()) + " parameters");
    for (Param& p : n.params) {
      p.kind = s.u8();
      p.source = s.u8();
      p.written = s.flag();
      s.check(p.kind < Param::kKinds && p.source < Param::kSources, "an unknown parameter kind");
      p.value = s.i32();
      p.sym = s.sym(slots);
      p.i = s.i64();
      p.f = s.f64();
      s.check((p.kind == Param::Pointer) == (p.source == Param::FromValue),
              "a pointer parameter not bound to a tensor");
      s.check(!p.written || p.kind == Param::Pointer, "a written parameter that is not a pointer");
      s.check(p.source != Param::FromValue || value_ok(p.value, false), "a parameter's value id");
      s.check(p.source != Param::FromSym || p.kind == Param::Int || p.kind == Param::Float,
              "a size bound to a parameter that is not a number");
    }
    for (SymRef& g : n.grid) g = s.sym(slots);
    n.variants.resize(s.count(12));
    s.check(!n.variants.empty(), "a kernel without code");
    for (Variant& v : n.variants) {
      v.symbol = s.str();
      v.work_per_program = s.i64();
      s.check(v.work_per_program >= 1, "a variant's work per program");
      v.assume.resize(n.params.size());
      for (size_t p = 0; p < v.assume.size(); ++p) {
        v.assume[p] = s.u8();
        s.check(v.assume[p] < 8, "an unknown assumption");
        s.check(v.assume[p] == 0 || n.params[p].kind == Param::Pointer ||
                    n.params[p].kind == Param::Int,
                "an assumption on a parameter that is not a pointer or an integer");
      }
    }
    s.check(n.variants.back().assume == std::vector<uint8_t>(n.params.size(), 0) ||
                n.variants.size() == 1,
            "a kernel whose last variant assumes something");
  }
  if (c.minor >= 2) {
    m.has_arena = s.flag();
    if (m.has_arena) m.arena_bytes = s.sym(slots);
  }
  for (const Node& n : m.nodes)
    s.check(!n.planned || m.has_arena, "a planned allocation without an arena");
  for (const Output& o : m.outputs) s.check(value_ok(o.value, true), "a result's value id");
  s.done();
  // Data flow: every value is defined (an input, a constant or an earlier node's output) before
  // a node reads it, and every result is defined at the end.
  std::vector<bool> defined(m.num_values, false);
  for (int32_t v : m.inputs)
    if (v >= 0) defined[static_cast<size_t>(v)] = true;
  for (const Constant& k : m.constants) defined[static_cast<size_t>(k.value)] = true;
  const auto need = [&](int32_t v, size_t node) {
    s.check(v < 0 || defined[static_cast<size_t>(v)], "node " + std::to_string(node) +
                                                          " reads value " + std::to_string(v) +
                                                          " before it is defined");
  };
  for (size_t k = 0; k < m.nodes.size(); ++k) {
    const Node& n = m.nodes[k];
    for (const NodeArg& a : n.args) {
      if (a.kind == NodeArg::Value) need(a.value, k);
      for (int32_t v : a.values) need(v, k);
    }
    for (const Param& p : n.params)
      if (p.source == Param::FromValue) need(p.value, k);
    for (int32_t v : n.outputs)
      if (v >= 0) defined[static_cast<size_t>(v)] = true;
  }
  for (const Output& o : m.outputs) need(o.value, m.nodes.size());
  const std::string_view cuda = c.section(SectionId::CudaObjects);
  m.cuda = !cuda.empty();
  if (m.cuda) {
    s.check(c.section(SectionId::CpuObject).empty(), "a package with both CPU and CUDA code");
    m.cuda_code = decode_cuda(cuda, origin);
  }
  for (const Node& n : m.nodes) {
    for (const Variant& v : n.variants) {
      const int64_t i = entry_index(v.symbol);
      s.check(i >= 0, "an entry point '" + v.symbol + "'");
      s.check(!m.cuda || static_cast<uint64_t>(i) < m.cuda_code.modules.size(),
              "entry point " + v.symbol + " of kernel " + n.kernel + " has no CUDA module");
    }
  }
  return m;
}

// ---- the container -----------------------------------------------------------------------------
// Header: magic (8), major (u32), minor (u32), section count (u32), reserved (u32); then per
// section: id (u32), reserved (u32), offset (u64), size (u64), SHA-256 (64 hex digits). Sections
// follow, each at a 64-byte-aligned offset (constants are mmap-able in place).

namespace {
constexpr size_t kHeader = 24, kEntry = 88;

std::string raw_digest(std::string_view bytes) {
  Sha256 h;
  h.update(bytes);
  return h.hex();
}
}  // namespace

std::string write_container(const std::vector<std::pair<SectionId, std::string>>& sections) {
  Writer w;
  w.raw(kMagic, 8);
  w.u32(kFormatMajor);
  w.u32(kFormatMinor);
  w.u32(static_cast<uint32_t>(sections.size()));
  w.u32(0);
  uint64_t offset = kHeader + kEntry * sections.size();
  for (const auto& [id, bytes] : sections) {
    offset = (offset + 63) / 64 * 64;
    w.u32(static_cast<uint32_t>(id));
    w.u32(0);
    w.u64(offset);
    w.u64(bytes.size());
    const std::string hex = raw_digest(bytes);
    w.raw(hex.data(), hex.size());
    offset += bytes.size();
  }
  for (const auto& [id, bytes] : sections) {
    w.buf.resize((w.buf.size() + 63) / 64 * 64, '\0');
    w.buf += bytes;
  }
  return w.buf;
}

Container read_container(std::string data, const std::string& origin) {
  auto owned = std::make_shared<const std::string>(std::move(data));
  const std::string_view bytes = *owned;
  return read_container(std::move(owned), bytes, origin);
}

Container read_container(std::shared_ptr<const void> keep, std::string_view data,
                         const std::string& origin) {
  Container c;
  c.keep = std::move(keep);
  c.data = data;
  c.sha256 = raw_digest(c.data);
  Reader r(c.data, origin);
  r.check(c.data.size() >= kHeader && std::memcmp(c.data.data(), kMagic, 8) == 0,
          "not a tessera package (no magic number)");
  r.u64();
  c.major = r.u32();
  c.minor = r.u32();
  TS_CHECK(c.major == kFormatMajor, aot::PackageError)
      << origin << ": package format " << c.major << "." << c.minor << "; this tessera reads "
      << kFormatMajor << ".x";
  const uint32_t n = r.u32();
  r.u32();
  r.check(n <= kMaxSections,
          std::to_string(n) + " sections (at most " + std::to_string(kMaxSections) + ")");
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t id = r.u32();
    r.u32();
    const uint64_t offset = r.u64(), size = r.u64();
    std::string digest(64, '\0');
    for (auto& ch : digest) ch = static_cast<char>(r.u8());
    r.check(offset <= c.data.size() && size <= c.data.size() - offset,
            std::string("section ") + section_name(id) + " lies outside the file");
    r.check(offset >= kHeader + kEntry * n,
            std::string("section ") + section_name(id) + " overlaps the header");
    for (const auto& s : c.sections)
      r.check(s.first != id, std::string("section ") + section_name(id) + " appears twice");
    r.check(id >= static_cast<uint32_t>(SectionId::Manifest) &&
                id <= static_cast<uint32_t>(SectionId::CudaObjects),
            "section " + std::to_string(id) + " is unknown to this tessera (format " +
                std::to_string(kFormatMajor) + "." + std::to_string(kFormatMinor) + ")");
    const std::string_view bytes(c.data.data() + offset, size);
    r.check(raw_digest(bytes) == digest,
            std::string("section ") + section_name(id) + " is damaged (its SHA-256 differs)");
    c.sections.emplace_back(id, bytes);
  }
  for (SectionId need : {SectionId::Manifest, SectionId::Schedule}) {
    bool found = false;
    for (const auto& s : c.sections) found |= s.first == static_cast<uint32_t>(need);
    r.check(found, std::string("no ") + section_name(static_cast<uint32_t>(need)) + " section");
  }
  return c;
}

std::string_view Container::section(SectionId id) const {
  for (const auto& [sid, bytes] : sections)
    if (sid == static_cast<uint32_t>(id)) return bytes;
  return {};
}

// ---- CPU features ------------------------------------------------------------------------------

std::vector<std::string> isa_features(const std::string& isa) {
  std::vector<std::string> f = {"sse4.2", "popcnt"};
  if (isa == "x86-64-v2") return f;
  for (const char* x : {"avx", "avx2", "fma", "bmi", "bmi2", "f16c"}) f.emplace_back(x);
  if (isa == "x86-64-v3") return f;
  for (const char* x : {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"})
    f.emplace_back(x);
  if (isa == "x86-64-v4") return f;
  TS_ERROR(ValueError) << "unknown ISA level '" << isa << "' (x86-64-v2, x86-64-v3 or x86-64-v4)";
}

bool cpu_has(const std::string& feature) {
#if defined(__x86_64__)
  __builtin_cpu_init();
#define TS_FEATURE(name) \
  if (feature == name) return __builtin_cpu_supports(name);
  TS_FEATURE("sse4.2")
  TS_FEATURE("popcnt")
  TS_FEATURE("avx")
  TS_FEATURE("avx2")
  TS_FEATURE("fma")
  TS_FEATURE("bmi")
  TS_FEATURE("bmi2")
  if (feature == "f16c") {  // (clang 14's __builtin_cpu_supports does not know it)
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
  }
  TS_FEATURE("avx512f")
  TS_FEATURE("avx512bw")
  TS_FEATURE("avx512cd")
  TS_FEATURE("avx512dq")
  TS_FEATURE("avx512vl")
#undef TS_FEATURE
#endif
  return false;
}

std::string host_isa() {
  for (const char* isa : {"x86-64-v4", "x86-64-v3", "x86-64-v2"}) {
    bool all = true;
    for (const auto& f : isa_features(isa)) all = all && cpu_has(f);
    if (all) return isa;
  }
  TS_ERROR(NotImplementedError) << "AOT packages need an x86-64 CPU with SSE4.2 at least";
}

std::vector<std::string> missing_cpu_features(const std::vector<std::string>& needed) {
  std::vector<std::string> missing;
  for (const auto& f : needed)
    if (!cpu_has(f)) missing.push_back(f);
  return missing;
}

}  // namespace tessera::aot_detail
