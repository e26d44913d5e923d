// Loading and running AOT packages (docs/aot.md). Nothing here generates or compiles code: the
// kernels come from the package's shared object, the operators from the registry by name (their
// schema hashes checked), the sizes from the package's size program.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstring>
#include <sstream>

#include "aot/package.h"
#include "compile/sym.h"
#include "core/files.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/module.h"
#include "runtime/thread_pool.h"
#include "tessera/detail/hash.h"
#include "tessera/dispatch.h"
#include "tessera/ops.h"
#include "tessera/tensor.h"
#include "tessera/trt/cpu.h"

namespace tessera::aot {

namespace ad = tessera::aot_detail;

class LoadedPackage {
 public:
  ad::Model m;
  PackageInfo info;
  std::unique_ptr<compiler::sym::Program> program;
  std::vector<Tensor> constant_values;  ///< per value id (undefined where not a constant)
  std::vector<std::optional<OperatorHandle>> ops, elided_ops;  ///< per node
  std::vector<std::vector<trt::KernelFn>> fns;                 ///< per node, per variant
  std::vector<size_t> run_base;                                ///< per node: its first counter
  std::unique_ptr<std::atomic<uint64_t>[]> runs;               ///< launches per variant
  void* handle = nullptr;
  // A CUDA package: its GPU, the architecture whose cubins were loaded, one module per entry.
  Device device{DeviceType::CPU};
  std::string arch;
  std::vector<std::unique_ptr<runtime::cuda::Module>> modules;
  std::vector<runtime::cuda::CUfunction> cu_fns;  ///< per module
  std::vector<std::vector<uint32_t>> module_of;   ///< per node, per variant
  std::vector<std::string> launch_what;           ///< per node: what a failed launch names
  /** Per node: the values no later node or result uses, dropped once it ran (their memory
   * serves later nodes). */
  std::vector<std::vector<int32_t>> drop_after;

  LoadedPackage() = default;
  LoadedPackage(const LoadedPackage&) = delete;
  LoadedPackage& operator=(const LoadedPackage&) = delete;
  /** CPU launches are synchronous; CUDA ones are queued, so the GPU finishes them before the
   * modules go: when the last Package is gone no kernel of it runs. */
  ~LoadedPackage() {
    if (handle) ::dlclose(handle);
    if (!modules.empty()) {
      try {
        runtime::cuda::synchronize(device.index());
      } catch (...) {  // a failed device: unloading is all that is left
      }
    }
  }

  std::vector<IValue> run(const std::vector<IValue>& args) const;

 private:
  Tensor planned_tensor(const ad::Node& n, const std::vector<int64_t>& values,
                        const IntrusivePtr<StorageImpl>& arena, int64_t arena_bytes) const;
  void check_arguments(const std::vector<IValue>& args, std::vector<int64_t>& symbols) const;
  [[noreturn]] void input_error(size_t i, const std::string& what, int kind) const;
};

namespace {

std::string dims_text(const ad::Model& m, const ad::Leaf& l) {
  std::ostringstream os;
  os << dtype_name(l.dtype) << "[";
  for (size_t d = 0; d < l.sizes.size(); ++d) {
    if (d) os << ", ";
    if (l.symbol[d] >= 0) {
      os << m.symbols[static_cast<size_t>(l.symbol[d])].name;
    } else {
      os << l.sizes[d];
    }
  }
  os << "]";
  return os.str();
}

PackageInfo make_info(const ad::Container& c, const ad::Model& m) {
  PackageInfo info;
  info.name = m.name;
  info.created_by = m.created_by;
  info.isa = m.isa;
  info.device = m.cuda ? "cuda" : "cpu";
  for (const ad::CudaArch& a : m.cuda_code.archs) info.cuda_archs.push_back(a.name);
  info.format_major = c.major;
  info.format_minor = c.minor;
  info.cpu_features = m.cpu_features;
  info.sha256 = c.sha256;
  for (const ad::Symbol& s : m.symbols) info.dims.emplace_back(s.name, s.min, s.max);
  for (size_t i = 0; i < m.leaves.size(); ++i) {
    const ad::Leaf& l = m.leaves[i];
    PackageArg a;
    a.tensor = l.tensor;
    a.dtype = l.dtype;
    for (size_t d = 0; d < l.sizes.size(); ++d) {
      const int32_t sym = l.symbol[d];
      a.sizes.push_back(sym < 0 ? l.sizes[d] : m.symbols[static_cast<size_t>(sym)].example);
      a.dims.push_back(sym < 0 ? "" : m.symbols[static_cast<size_t>(sym)].name);
    }
    info.args.push_back(a);
    std::string s = "arg" + std::to_string(i) + ": ";
    if (!l.tensor) {
      s += "constant " + std::string(l.constant.type_name());
    } else {
      s += dims_text(m, l);
      std::vector<int64_t> dense(l.sizes.size(), 1);
      for (size_t d = l.sizes.size(); d-- > 1;)
        dense[d - 1] = dense[d] * std::max<int64_t>(l.sizes[d], 1);
      if (!l.contiguous && !l.strides.empty() && l.strides != dense) {
        s += " strides (";
        for (size_t d = 0; d < l.strides.size(); ++d)
          s += (d ? ", " : "") + std::to_string(l.strides[d]);
        s += ")";
      }
    }
    info.inputs.push_back(s);
  }
  for (const ad::Symbol& s : m.symbols) {
    info.guards.push_back(s.name + " in [" + std::to_string(s.min) + ", " + std::to_string(s.max) +
                          "]");
  }
  for (const auto& g : m.guards) info.guards.push_back(g);
  for (const ad::Node& n : m.nodes) {
    if (n.kind == ad::Node::Op) {
      info.nodes.push_back("op " + n.op + (n.elide ? " (elided when its fill is dead)" : "") +
                           (n.planned ? " (in the memory plan's arena)" : ""));
    } else {
      info.nodes.push_back("kernel " + n.kernel + " (" + std::to_string(n.variants.size()) +
                           (n.variants.size() == 1 ? " variant)" : " variants)"));
    }
  }
  for (const auto& [id, bytes] : c.sections)
    info.sections.emplace_back(ad::section_name(id), bytes.size());
  return info;
}

// A file mapped copy-on-write (the constants of a CPU package are its pages).
struct Mapping {
  void* p = nullptr;
  size_t n = 0;
  Mapping() = default;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (p) ::munmap(p, n);
  }
};

ad::Container read(const std::string& path, const LoadOptions& o) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st;
  const bool ok = fd >= 0 && ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  const int err = errno;
  auto m = std::make_shared<Mapping>();
  if (ok && st.st_size > 0) {
    m->n = static_cast<size_t>(st.st_size);
    void* p = ::mmap(nullptr, m->n, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    m->p = p == MAP_FAILED ? nullptr : p;
  }
  if (fd >= 0) ::close(fd);
  TS_CHECK(ok, PackageError) << "cannot read package " << path << ": "
                             << (fd >= 0 ? "not a regular file" : std::strerror(err));
  TS_CHECK(m->p || m->n == 0, PackageError) << "cannot map package " << path;
  const std::string_view bytes(static_cast<const char*>(m->p), m->p ? m->n : 0);
  ad::Container c = ad::read_container(std::move(m), bytes, path);
  if (!o.expected_sha256.empty()) {
    TS_CHECK(c.sha256 == o.expected_sha256, PackageError)
        << path << ": SHA-256 " << c.sha256 << ", expected " << o.expected_sha256;
  }
  return c;
}

ad::Model decode_checked(const ad::Container& c, const std::string& path) {
  try {
    return ad::decode(c, path);
  } catch (const PackageError&) {
    throw;
  } catch (const Error& e) {
    throw PackageError(path + ": " + e.message());
  }
}

// The package's shared object, loaded from a private directory that is removed right after.
void* load_object(std::string_view bytes, const std::string& path) {
  const char* tmpdir = std::getenv("TMPDIR");
  std::string dir = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/tessera-aot-XXXXXX";
  TS_CHECK(::mkdtemp(dir.data()) != nullptr, RuntimeError)
      << path
      << ": cannot make a private directory for the package's code: " << std::strerror(errno);
  const std::string so = dir + "/kernels.so";
  const int fd = ::open(so.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0700);
  bool ok = fd >= 0;
  size_t done = 0;
  while (ok && done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w <= 0) ok = false;
    done += w > 0 ? static_cast<size_t>(w) : 0;
  }
  if (fd >= 0) ::close(fd);
  void* h = ok ? ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL) : nullptr;
  const std::string why = ok ? (h ? "" : ::dlerror()) : std::strerror(errno);
  ::unlink(so.c_str());
  ::rmdir(dir.c_str());
  TS_CHECK(h != nullptr, PackageError) << path << ": the package's CPU code does not load: " << why;
  return h;
}

std::string schema_hash(const OperatorHandle& op) {
  return sha256_hex(op.schema().str()).substr(0, 16);
}

std::optional<OperatorHandle> resolve(const std::string& name, const std::string& hash,
                                      const std::string& path, const std::string& loc) {
  auto op = find_op(name);
  TS_CHECK(op.has_value(), PackageError)
      << path << ": the package calls operator " << name << " (from " << loc
      << "), which this process does not define; load the library that defines it first";
  TS_CHECK(schema_hash(*op) == hash, PackageError)
      << path << ": operator " << name << " has another schema than when the package was made ("
      << op->schema().str() << ")";
  return op;
}

bool same_constant(const IValue& a, const IValue& b) {
  if (a.is_none() || b.is_none()) return a.is_none() && b.is_none();
  if (a.is_bool() && b.is_bool()) return a.to_bool() == b.to_bool();
  if (a.is_int() && b.is_int()) return a.to_int() == b.to_int();
  if (a.is_double() && b.is_double()) return a.to_double() == b.to_double();
  if (a.is_string() && b.is_string()) return a.to_string() == b.to_string();
  if (a.is_dtype() && b.is_dtype()) return a.to_dtype() == b.to_dtype();
  return false;
}

int64_t value_of(const ad::SymRef& r, const std::vector<int64_t>& values) {
  return r.slot < 0 ? r.constant : values[static_cast<size_t>(r.slot)];
}

}  // namespace

enum { kValue, kType, kDType, kDevice, kShape };

void LoadedPackage::input_error(size_t i, const std::string& what, int kind) const {
  const std::string msg = "package '" + m.name + "': arg" + std::to_string(i) + " " + what;
  switch (kind) {
    case kType:
      throw TypeError(msg);
    case kDType:
      throw DTypeError(msg);
    case kDevice:
      throw DeviceError(msg);
    case kShape:
      throw ShapeError(msg);
    default:
      throw ValueError(msg);
  }
}

void LoadedPackage::check_arguments(const std::vector<IValue>& args,
                                    std::vector<int64_t>& symbols) const {
  TS_CHECK(args.size() == m.leaves.size(), ValueError)
      << "package '" << m.name << "' takes " << m.leaves.size() << " arguments, got "
      << args.size();
  symbols.assign(m.symbols.size(), -1);
  for (size_t i = 0; i < m.leaves.size(); ++i) {
    const ad::Leaf& l = m.leaves[i];
    const IValue& a = args[i];
    if (!l.tensor) {
      if (a.is_tensor() || !same_constant(a, l.constant))
        input_error(i, "must be the constant the package was made with", kValue);
      continue;
    }
    if (!a.is_tensor() || !a.to_tensor().defined())
      input_error(i, std::string("must be a tensor, got ") + a.type_name(), kType);
    const Tensor& t = a.to_tensor();
    if (t.dtype() != l.dtype)
      input_error(
          i, std::string("is ") + dtype_name(t.dtype()) + ", the package takes " + dims_text(m, l),
          kDType);
    if (t.device() != device)
      input_error(i,
                  "is on " + t.device().str() + "; the package runs on " +
                      (device.is_cpu() ? std::string("the CPU") : device.str()),
                  kDevice);
    if (!t.has_data() || t.impl()->has_symbolic_shape())
      input_error(i, "has no data (a meta or fake tensor)", kValue);
    if (t.dim() != static_cast<int64_t>(l.sizes.size()))
      input_error(
          i, "has " + std::to_string(t.dim()) + " dimensions, the package takes " + dims_text(m, l),
          kShape);
    const auto sizes = t.impl()->int_sizes();
    for (size_t d = 0; d < l.sizes.size(); ++d) {
      const int64_t v = sizes[d];
      if (l.symbol[d] < 0) {
        if (v != l.sizes[d])
          input_error(i,
                      "has size " + std::to_string(v) + " in dimension " + std::to_string(d) +
                          ", the package takes " + dims_text(m, l) + " (exported static)",
                      kShape);
        continue;
      }
      const ad::Symbol& s = m.symbols[static_cast<size_t>(l.symbol[d])];
      int64_t& bound = symbols[static_cast<size_t>(l.symbol[d])];
      if (v < s.min || v > s.max)
        input_error(i,
                    "has size " + std::to_string(v) + " in dimension " + std::to_string(d) +
                        ", outside Dim '" + s.name + "' [" + std::to_string(s.min) + ", " +
                        std::to_string(s.max) + "]",
                    kShape);
      if (bound >= 0 && bound != v)
        input_error(i,
                    "has size " + std::to_string(v) + " in dimension " + std::to_string(d) +
                        ", but Dim '" + s.name + "' is " + std::to_string(bound) +
                        " in an earlier argument",
                    kShape);
      bound = v;
    }
    if (l.contiguous) {
      if (!t.is_contiguous()) input_error(i, "must be contiguous", kShape);
    } else {
      const auto strides = t.impl()->int_strides();
      for (size_t d = 0; d < l.strides.size(); ++d)
        if (strides[d] != l.strides[d])
          input_error(i,
                      "has stride " + std::to_string(strides[d]) + " in dimension " +
                          std::to_string(d) + ", the package takes " + std::to_string(l.strides[d]),
                      kShape);
    }
    if (t.impl()->int_offset() != l.offset)
      input_error(i,
                  "has storage offset " + std::to_string(t.impl()->int_offset()) +
                      ", the package takes " + std::to_string(l.offset),
                  kShape);
    if (t.requires_grad() != l.requires_grad)
      input_error(i, l.requires_grad ? "must require grad" : "must not require grad", kValue);
  }
  std::vector<size_t> tensors;
  for (size_t i = 0; i < m.leaves.size(); ++i)
    if (m.leaves[i].tensor) tensors.push_back(i);
  for (size_t a = 0; a < tensors.size(); ++a) {
    const StorageImpl* sa = args[tensors[a]].to_tensor().impl()->storage();
    for (size_t b = a + 1; b < tensors.size(); ++b) {
      const bool shares = sa == args[tensors[b]].to_tensor().impl()->storage();
      bool traced = false;
      for (const auto& p : m.alias_pairs) traced |= p.first == tensors[a] && p.second == tensors[b];
      TS_CHECK(shares == traced, ValueError)
          << "package '" << m.name << "': arg" << tensors[a] << " and arg" << tensors[b]
          << (traced ? " must share memory" : " must not share memory") << ", as when exported";
    }
  }
}

// A planned allocation: a contiguous tensor at its offset in the arena, checked to lie inside it
// (the offsets come from the package, untrusted).
Tensor LoadedPackage::planned_tensor(const ad::Node& n, const std::vector<int64_t>& values,
                                     const IntrusivePtr<StorageImpl>& arena,
                                     int64_t arena_bytes) const {
  const DType dtype = n.args[1].constant.to_dtype();
  const auto& syms = n.args[0].syms;
  DimVector sizes(syms.size());
  int64_t numel = 1;
  bool overflow = false;
  for (size_t d = 0; d < syms.size(); ++d) {
    sizes[d] = value_of(syms[d], values);
    overflow = overflow || sizes[d] < 0 || __builtin_mul_overflow(numel, sizes[d], &numel);
  }
  int64_t nbytes = 0, end = 0;
  const int64_t offset = value_of(n.arena_offset, values);
  overflow = overflow ||
             __builtin_mul_overflow(numel, static_cast<int64_t>(itemsize(dtype)), &nbytes) ||
             __builtin_add_overflow(offset, nbytes, &end);
  TS_CHECK(!overflow && offset >= 0 && offset % 64 == 0 && end <= arena_bytes && arena,
           PackageError)
      << "package '" << m.name << "': the planned allocation at " << n.loc << " (offset " << offset
      << ", " << nbytes << " bytes) lies outside its arena of " << arena_bytes << " bytes";
  return tessera::detail::make_in_block(*arena, static_cast<size_t>(offset), sizes, dtype);
}

std::vector<IValue> LoadedPackage::run(const std::vector<IValue>& args) const {
  std::vector<int64_t> symbols, values(program->num_outputs());
  check_arguments(args, symbols);
  TS_CHECK(program->run(symbols.data(), values.data()), ValueError)
      << "package '" << m.name << "': a size expression divides by zero or overflows";
  for (size_t k = 0; k < m.guards.size(); ++k) {
    TS_CHECK(values[k] != 0, ValueError)
        << "package '" << m.name << "': the arguments fail the guard " << m.guards[k];
  }
  std::vector<Tensor> vals(m.num_values);
  for (size_t i = 0; i < m.inputs.size(); ++i)
    if (m.inputs[i] >= 0) vals[static_cast<size_t>(m.inputs[i])] = args[i].to_tensor();
  for (const ad::Constant& c : m.constants)
    vals[static_cast<size_t>(c.value)] = constant_values[static_cast<size_t>(c.value)];
  // The memory plan's arena: one block for the call's planned allocations (format 1.2).
  IntrusivePtr<StorageImpl> arena;
  int64_t arena_bytes = 0;
  if (m.has_arena) {
    arena_bytes = value_of(m.arena_bytes, values);
    TS_CHECK(arena_bytes >= 0, ValueError)
        << "package '" << m.name << "': its memory plan is " << arena_bytes << " bytes";
    if (arena_bytes > 0) arena = StorageImpl::allocate(static_cast<size_t>(arena_bytes), device);
  }
  Stack st;
  for (size_t k = 0; k < m.nodes.size(); ++k) {
    const ad::Node& n = m.nodes[k];
    if (k > 0) {
      for (int32_t v : drop_after[k - 1]) vals[static_cast<size_t>(v)] = Tensor();
    }
    if (n.planned) {
      vals[static_cast<size_t>(n.outputs[0])] = planned_tensor(n, values, arena, arena_bytes);
      continue;
    }
    if (n.kind == ad::Node::Kernel) {
      trt::Arg slots[64];
      for (size_t p = 0; p < n.params.size(); ++p) {
        const ad::Param& q = n.params[p];
        switch (q.kind) {
          case ad::Param::Pointer: {
            const Tensor& t = vals[static_cast<size_t>(q.value)];
            TS_CHECK(t.defined(), ValueError)
                << "package '" << m.name << "': kernel " << n.kernel << " (" << n.loc
                << ") is given a tensor that an operator of the package did not produce";
            slots[p].p = t.impl()->data();
            break;
          }
          case ad::Param::Int:
            slots[p].i = q.source == ad::Param::FromSym ? value_of(q.sym, values) : q.i;
            break;
          case ad::Param::Float:
            slots[p].f =
                q.source == ad::Param::FromSym ? static_cast<double>(value_of(q.sym, values)) : q.f;
            break;
          default:
            slots[p].i = 0;
        }
      }
      // The first variant whose assumptions hold (the last assumes nothing).
      size_t v = 0;
      for (; v + 1 < n.variants.size(); ++v) {
        bool holds = true;
        for (size_t p = 0; p < n.params.size() && holds; ++p) {
          const uint8_t a = n.variants[v].assume[p];
          if (!a) continue;
          const int64_t x = n.params[p].kind == ad::Param::Pointer
                                ? static_cast<int64_t>(reinterpret_cast<uintptr_t>(slots[p].p))
                                : slots[p].i;
          if ((a & ad::Variant::Div16) && x % 16 != 0) holds = false;
          if ((a & ad::Variant::IsOne) && x != 1) holds = false;
          if ((a & ad::Variant::Fits32) && (x < INT32_MIN || x > INT32_MAX)) holds = false;
        }
        if (holds) break;
      }
      int64_t dims[3];
      static constexpr int64_t kMaxGrid[3] = {(int64_t{1} << 31) - 1, 65535, 65535};
      for (int d = 0; d < 3; ++d) {
        dims[d] = value_of(n.grid[d], values);
        TS_CHECK(dims[d] >= 0 && dims[d] <= kMaxGrid[d], ValueError)
            << "package '" << m.name << "': kernel " << n.kernel << " (" << n.loc
            << ") has grid dimension " << d << " of " << dims[d] << " for these sizes";
      }
      const int64_t total = dims[0] * dims[1] * dims[2];
      if (total == 0) continue;
      runs[run_base[k] + v].fetch_add(1, std::memory_order_relaxed);
      trt::Grid grid{dims[0], dims[1], dims[2]};
      if (m.cuda) {
        const uint32_t mod = module_of[k][v];
        const ad::CudaModule& cm = m.cuda_code.modules[mod];
        void* params[2] = {&grid, slots};
        const unsigned g3[3] = {static_cast<unsigned>(dims[0]), static_cast<unsigned>(dims[1]),
                                static_cast<unsigned>(dims[2])};
        const unsigned block[3] = {cm.threads, 1, 1};
        runtime::cuda::launch(cu_fns[mod], device.index(), g3, block,
                              static_cast<unsigned>(cm.shared_bytes), params, launch_what[k]);
      } else {
        runtime::run_programs(fns[k][v], n.variants[v].work_per_program, grid, total, slots);
      }
      for (const ad::Param& q : n.params)
        if (q.written) vals[static_cast<size_t>(q.value)].impl()->storage()->bump_version();
      continue;
    }
    st.clear();
    const bool elide = n.elide && value_of(n.elide_when, values) != 0;
    for (size_t ai = 0; ai < n.args.size(); ++ai) {
      if (elide && static_cast<int32_t>(ai) == n.elided_drop) continue;
      const ad::NodeArg& a = n.args[ai];
      switch (a.kind) {
        case ad::NodeArg::Value:
          st.emplace_back(vals[static_cast<size_t>(a.value)]);
          break;
        case ad::NodeArg::ValueList:
          if (a.optional_list) {
            std::vector<std::optional<Tensor>> l;
            for (int32_t v : a.values)
              l.push_back(v < 0 ? std::nullopt
                                : std::optional<Tensor>(vals[static_cast<size_t>(v)]));
            st.emplace_back(std::move(l));
          } else {
            std::vector<Tensor> l;
            for (int32_t v : a.values) l.push_back(vals[static_cast<size_t>(v)]);
            st.emplace_back(std::move(l));
          }
          break;
        case ad::NodeArg::Sym:
          st.emplace_back(SymInt(value_of(a.sym, values)));
          break;
        case ad::NodeArg::SymList: {
          std::vector<SymInt> l;
          for (const auto& r : a.syms) l.emplace_back(value_of(r, values));
          st.emplace_back(std::move(l));
          break;
        }
        default:
          st.push_back(a.constant);
      }
    }
    (elide ? *elided_ops[k] : *ops[k]).call(st);
    for (size_t o = 0; o < n.outputs.size() && o < st.size(); ++o) {
      if (n.outputs[o] >= 0) vals[static_cast<size_t>(n.outputs[o])] = st[o].to_tensor();
    }
  }
  std::vector<IValue> out;
  for (const ad::Output& o : m.outputs) {
    if (o.value >= 0) {
      const Tensor& t = vals[static_cast<size_t>(o.value)];
      TS_CHECK(t.defined(), InternalError)
          << "package '" << m.name << "': a result was never computed";
      out.emplace_back(t);
    } else {
      out.push_back(o.constant);
    }
  }
  return out;
}

std::vector<IValue> Package::run(const std::vector<IValue>& args) const {
  return p_->run(args);
}

const PackageInfo& Package::info() const {
  return p_->info;
}

std::vector<std::pair<std::string, std::vector<uint64_t>>> Package::variant_runs() const {
  std::vector<std::pair<std::string, std::vector<uint64_t>>> out;
  for (size_t k = 0; k < p_->m.nodes.size(); ++k) {
    const ad::Node& n = p_->m.nodes[k];
    if (n.kind != ad::Node::Kernel) continue;
    std::vector<uint64_t> counts;
    for (size_t v = 0; v < n.variants.size(); ++v)
      counts.push_back(p_->runs[p_->run_base[k] + v].load(std::memory_order_relaxed));
    out.emplace_back(n.kernel, std::move(counts));
  }
  return out;
}

namespace {

// A CUDA package's cubins for this GPU's architecture, loaded from memory by the driver.
void load_cuda(LoadedPackage& p, const std::string& path, const LoadOptions& o) {
  namespace rc = runtime::cuda;
  const ad::Model& m = p.m;
  std::string archs;
  for (const ad::CudaArch& a : m.cuda_code.archs) archs += (archs.empty() ? "" : ", ") + a.name;
  const int index = o.device < 0 ? 0 : o.device;
  const int count = rc::device_count();
  TS_CHECK(index < count, PackageError)
      << path << ": the package runs on a CUDA GPU (" << archs << ") and "
      << (count == 0 ? std::string("this machine has none")
                     : "device " + std::to_string(index) + " does not exist (" +
                           std::to_string(count) + " here)");
  p.device = Device(DeviceType::CUDA, static_cast<int8_t>(index));
  const rc::DeviceInfo& info = rc::device_info(index);
  std::vector<std::string> names;
  for (const ad::CudaArch& a : m.cuda_code.archs) names.push_back(a.name);
  const int pick = ad::pick_arch(names, info.major, info.minor);
  TS_CHECK(pick >= 0, PackageError)
      << path << ": the package has code for " << archs << " and none of it runs on cuda:" << index
      << " (" << info.name << ", sm_" << info.major << info.minor
      << "); export it again with cuda_archs including sm_" << info.major << info.minor;
  const ad::CudaArch& arch = m.cuda_code.archs[static_cast<size_t>(pick)];
  p.arch = arch.name;
  for (size_t i = 0; i < m.cuda_code.modules.size(); ++i) {
    const std::string what = path + ": module " + std::to_string(i) + " (" + arch.name + ")";
    p.modules.push_back(std::make_unique<rc::Module>(arch.cubins[i], index, what));
    rc::CUfunction fn = p.modules.back()->function("tessera_kernel");
    const uint64_t shared = m.cuda_code.modules[i].shared_bytes;
    if (shared > 48 * 1024) {
      rc::set_device(index);
      rc::check(
          rc::require_driver("a package's kernel")
              .cuFuncSetAttribute(fn, static_cast<int>(rc::FuncAttr::MaxDynamicSharedSizeBytes),
                                  static_cast<int>(shared)),
          "cuFuncSetAttribute",
          what + " asks for " + std::to_string(shared) + " bytes of shared memory");
    }
    p.cu_fns.push_back(fn);
  }
  p.module_of.resize(m.nodes.size());
  for (size_t k = 0; k < m.nodes.size(); ++k) {
    for (const ad::Variant& v : m.nodes[k].variants)
      p.module_of[k].push_back(static_cast<uint32_t>(ad::entry_index(v.symbol)));
    p.launch_what.push_back("package '" + m.name + "' kernel " + m.nodes[k].kernel + " (" +
                            m.nodes[k].loc + ")");
  }
}

}  // namespace

PackageInfo inspect(const std::string& path, const LoadOptions& options) {
  const ad::Container c = read(path, options);
  const ad::Model m = decode_checked(c, path);
  return make_info(c, m);
}

Package load(const std::string& path, const LoadOptions& options) {
  auto p = std::make_shared<LoadedPackage>();
  const ad::Container c = read(path, options);
  p->m = decode_checked(c, path);
  const ad::Model& m = p->m;
  p->info = make_info(c, m);
  const auto missing = ad::missing_cpu_features(m.cpu_features);
  if (!missing.empty()) {
    std::string list;
    for (const auto& f : missing) list += (list.empty() ? "" : ", ") + f;
    TS_ERROR(PackageError) << path << ": the package's code is for " << m.isa
                           << " and this CPU lacks " << list;
  }
  std::vector<compiler::sym::Program::RawInstr> code(m.prog_op.size());
  for (size_t i = 0; i < code.size(); ++i)
    code[i] = {m.prog_op[i], m.prog_a[i], m.prog_b[i], m.prog_imm[i]};
  try {
    p->program = std::make_unique<compiler::sym::Program>(
        compiler::sym::Program::from_raw(code, m.prog_outputs, m.symbols.size()));
  } catch (const Error& e) {
    throw PackageError(path + ": manifest: " + e.message());
  }
  p->ops.resize(m.nodes.size());
  p->elided_ops.resize(m.nodes.size());
  p->fns.resize(m.nodes.size());
  bool has_kernels = false;
  for (size_t k = 0; k < m.nodes.size(); ++k) {
    const ad::Node& n = m.nodes[k];
    if (n.kind == ad::Node::Kernel) {
      has_kernels = true;
      continue;
    }
    p->ops[k] = resolve(n.op, n.schema_hash, path, n.loc);
    if (n.elide) p->elided_ops[k] = resolve(n.elided_op, n.elided_hash, path, n.loc);
  }
  if (m.cuda) {
    load_cuda(*p, path, options);
  } else if (has_kernels) {
    const std::string_view object = c.section(ad::SectionId::CpuObject);
    TS_CHECK(!object.empty(), PackageError)
        << path << ": the package launches kernels but has no CPU code section";
    p->handle = load_object(object, path);
    for (size_t k = 0; k < m.nodes.size(); ++k) {
      for (const ad::Variant& v : m.nodes[k].variants) {
        auto fn = reinterpret_cast<trt::KernelFn>(::dlsym(p->handle, v.symbol.c_str()));
        TS_CHECK(fn != nullptr, PackageError)
            << path << ": kernel " << m.nodes[k].kernel << " has no entry point " << v.symbol
            << " in the package's code";
        p->fns[k].push_back(fn);
      }
    }
  }
  // Lifetimes: a value no later node reads, writes or returns is dropped after its last use.
  {
    std::vector<int64_t> last(m.num_values, -1);
    std::vector<bool> keep(m.num_values, false);
    for (int32_t v : m.inputs)
      if (v >= 0) keep[static_cast<size_t>(v)] = true;
    for (const ad::Output& o : m.outputs)
      if (o.value >= 0) keep[static_cast<size_t>(o.value)] = true;
    for (const ad::Constant& c2 : m.constants) keep[static_cast<size_t>(c2.value)] = true;
    for (size_t k = 0; k < m.nodes.size(); ++k) {
      const ad::Node& n = m.nodes[k];
      auto use = [&](int32_t v) {
        if (v >= 0) last[static_cast<size_t>(v)] = static_cast<int64_t>(k);
      };
      for (const ad::NodeArg& a : n.args) {
        if (a.kind == ad::NodeArg::Value) use(a.value);
        for (int32_t v : a.values) use(v);
      }
      for (const ad::Param& q : n.params)
        if (q.source == ad::Param::FromValue) use(q.value);
      for (int32_t v : n.outputs) use(v);
    }
    p->drop_after.assign(m.nodes.size(), {});
    for (size_t v = 0; v < last.size(); ++v) {
      if (last[v] >= 0 && !keep[v])
        p->drop_after[static_cast<size_t>(last[v])].push_back(static_cast<int32_t>(v));
    }
  }
  size_t counters = 0;
  for (const ad::Node& n : m.nodes) {
    p->run_base.push_back(counters);
    counters += n.variants.size();
  }
  p->runs = std::make_unique<std::atomic<uint64_t>[]>(counters);
  p->constant_values.resize(m.num_values);
  const std::string_view bytes = c.section(ad::SectionId::Constants);
  for (const ad::Constant& k : m.constants) {
    std::vector<SymInt> sizes(k.sizes.begin(), k.sizes.end());
    // In place: the file's own pages (64-byte aligned in it), which the tensor keeps mapped.
    const bool in_place = !options.copy_constants && !m.cuda && k.nbytes > 0 &&
                          reinterpret_cast<uintptr_t>(bytes.data() + k.offset) % 64 == 0;
    Tensor t;
    if (in_place) {
      std::vector<int64_t> dims(k.sizes.begin(), k.sizes.end());
      auto keep = std::make_unique<std::shared_ptr<const void>>(c.keep);
      t = from_blob(
          const_cast<char*>(bytes.data() + k.offset), dims, k.dtype, {},
          [](void* ctx, void*) { delete static_cast<std::shared_ptr<const void>*>(ctx); },
          keep.get());
      (void)keep.release();  // the tensor's storage owns it now
    } else {
      t = empty(sizes, TensorOptions().dtype(k.dtype));
      if (k.nbytes) std::memcpy(t.impl()->data(), bytes.data() + k.offset, k.nbytes);
    }
    p->constant_values[static_cast<size_t>(k.value)] = m.cuda ? t.to(p->device) : t;
  }
  return Package(std::move(p));
}

}  // namespace tessera::aot
