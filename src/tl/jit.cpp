// Kernels: TL_JIT signatures, argument binding, specialization keys, the in-memory cache,
// compilation (trace -> tile IR -> pipeline -> C++ -> system compiler) and launches on the
// thread pool.
#include "tl/jit.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cstring>
#include <iostream>
#include <limits>
#include <mutex>
#include <set>
#include <sstream>

#include "ir/access.h"
#include "ir/coverage.h"
#include "ir/passes.h"
#include "runtime/thread_pool.h"
#include "tessera/detail/hash.h"
#include "tessera/env.h"
#include "tl/launch_op.h"
#include "tl/trace.h"

namespace tessera::tl {

using Kind = JITFunction::ParamSpec::Kind;

namespace detail {
namespace {

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Pointer:
      return "a pointer (tl::Ptr)";
    case Kind::Int:
      return "an integer (tl::Int)";
    case Kind::Float:
      return "a float (tl::Float)";
    case Kind::Constexpr:
      return "a constexpr (tl::Const)";
  }
  return "?";
}

const char* arg_name(KernelArg::Kind k) {
  switch (k) {
    case KernelArg::Kind::Tensor:
      return "a tensor";
    case KernelArg::Kind::Int:
      return "an integer";
    case KernelArg::Kind::Float:
      return "a float";
    case KernelArg::Kind::Bool:
      return "a bool";
    case KernelArg::Kind::DType:
      return "a dtype";
    case KernelArg::Kind::Meta:
      return "tl::meta";
    case KernelArg::Kind::Option:
      return "a launch option";
  }
  return "?";
}

[[noreturn]] void launch_error(const KernelState& s, SourceLoc loc, const std::string& msg) {
  std::ostringstream os;
  os << "[kernel " << s.name << "] ";
  if (loc.known()) os << loc << ": ";
  os << msg;
  throw CompileError(os.str(), loc);
}

std::string param_list(const KernelState& s) {
  std::string r;
  for (size_t i = 0; i < s.params.size(); ++i) r += (i ? ", " : "") + s.params[i].name;
  return r;
}

DType int_type(int64_t v) {
  return (v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max())
             ? DType::Int32
             : DType::Int64;
}

// Binds one positional value (or a meta value) to parameter `i`.
void bind_value(const KernelState& s, size_t i, const KernelArg& a, BoundArg& b, SourceLoc loc) {
  const auto& p = s.params[i];
  b.kind = p.kind;
  auto mismatch = [&] {
    launch_error(
        s, loc,
        "parameter '" + p.name + "' is " + kind_name(p.kind) + " but got " + arg_name(a.kind));
  };
  switch (p.kind) {
    case Kind::Pointer: {
      if (a.kind != KernelArg::Kind::Tensor) mismatch();
      const Tensor& t = *a.tensor;
      if (!t.defined()) launch_error(s, loc, "parameter '" + p.name + "' got an undefined tensor");
      if (!t.has_data()) {
        // Meta or fake: the launch is checked, then does nothing (Launcher::run).
        b.tensor = &t;
        b.dtype = t.dtype();
        b.div16 = true;
        break;
      }
      b.tensor = &t;
      b.dtype = t.dtype();
      b.ptr = t.impl()->data();
      b.div16 = (reinterpret_cast<uintptr_t>(b.ptr) % 16) == 0;
      break;
    }
    case Kind::Int: {
      int64_t v = 0;
      if (a.kind == KernelArg::Kind::Int) {
        if (a.sym.is_symbolic()) {
          launch_error(s, loc,
                       "parameter '" + p.name + "' got a symbolic size outside tessera::compile");
        }
        v = a.sym.expect_int();
        b.dtype = int_type(v);
      } else if (a.kind == KernelArg::Kind::Bool) {
        v = a.i;
        b.dtype = DType::Bool;
      } else {
        mismatch();
      }
      b.i = v;
      if (!s.no_specialize[i] && b.dtype != DType::Bool) {
        b.folded_one = v == 1;
        b.div16 = !b.folded_one && v % 16 == 0;
      }
      break;
    }
    case Kind::Float:
      if (a.kind == KernelArg::Kind::Float) {
        b.f = a.f;
      } else if (a.kind == KernelArg::Kind::Int) {
        b.f = static_cast<double>(a.sym.expect_int());
      } else {
        mismatch();
      }
      b.dtype = DType::Float32;
      break;
    case Kind::Constexpr:
      switch (a.kind) {
        case KernelArg::Kind::Int:
          if (a.sym.is_symbolic()) {
            launch_error(s, loc,
                         "constexpr parameter '" + p.name +
                             "' got a symbolic size outside tessera::compile");
          }
          b.constant = meta(p.name, a.sym.expect_int());
          break;
        case KernelArg::Kind::Float:
          b.constant = meta(p.name, a.f);
          break;
        case KernelArg::Kind::Bool:
          b.constant = meta(p.name, a.i != 0);
          break;
        case KernelArg::Kind::DType:
          b.constant = meta(p.name, a.dtype);
          break;
        case KernelArg::Kind::Meta:
          b.constant = a.meta;
          break;
        default:
          mismatch();
      }
      break;
  }
}

}  // namespace

size_t KeyHash::operator()(ArrayRef<uint64_t> k) const {
  uint64_t h = 0x243f6a8885a308d3ull;
  for (uint64_t w : k) h = hash_mix(h, w);
  return static_cast<size_t>(h);
}

void bind(const KernelState& s, ArrayRef<KernelArg> args, SmallVector<BoundArg, 16>& out,
          LaunchOptions& opts, SourceLoc loc) {
  if (!s.param_error.empty()) launch_error(s, s.loc, s.param_error);
  const size_t n = s.params.size();
  TS_CHECK(n <= 64, CompileError) << "[kernel " << s.name << "] has " << n
                                  << " parameters; at most 64";
  out.assign(n, BoundArg{});
  SmallVector<bool, 16> set(n, false);
  size_t positional = 0;
  for (const auto& a : args) {
    if (a.kind == KernelArg::Kind::Option) {
      const int64_t v = a.option.value;
      switch (a.option.kind) {
        case LaunchOption::Kind::NumWarps:
          if (v < 1 || v > 32 || (v & (v - 1)) != 0)
            launch_error(s, a.loc,
                         "num_warps must be a power of 2 in 1..32, got " + std::to_string(v));
          opts.num_warps = v;
          break;
        case LaunchOption::Kind::NumStages:
          if (v < 1) launch_error(s, a.loc, "num_stages must be >= 1, got " + std::to_string(v));
          opts.num_stages = v;
          break;
        case LaunchOption::Kind::MaxNReg:
          if (v < 1 || v > 255)
            launch_error(
                s, a.loc,
                "maxnreg is a per-thread register limit in 1..255, got " + std::to_string(v));
          opts.maxnreg = v;
          break;
      }
      continue;
    }
    if (a.kind == KernelArg::Kind::Meta) {
      size_t i = 0;
      while (i < n && s.params[i].name != a.meta.name) ++i;
      if (i == n) {
        launch_error(s, loc,
                     "tl::meta names unknown parameter '" + std::string(a.meta.name) +
                         "' (parameters: " + param_list(s) + ")");
      }
      if (set[i]) launch_error(s, loc, "parameter '" + s.params[i].name + "' is given twice");
      KernelArg as_arg = a;
      if (s.params[i].kind != Kind::Constexpr) {
        // tl::meta on a runtime parameter binds its value as that parameter's kind.
        switch (a.meta.kind) {
          case MetaArg::Kind::Int:
            as_arg = KernelArg(a.meta.i, loc);
            break;
          case MetaArg::Kind::Float:
            as_arg = KernelArg(a.meta.f, loc);
            break;
          case MetaArg::Kind::Bool:
            as_arg = KernelArg(a.meta.i != 0, loc);
            break;
          case MetaArg::Kind::DType:
            as_arg = KernelArg(a.meta.dtype, loc);
            break;
        }
      }
      bind_value(s, i, as_arg, out[i], loc);
      out[i].arg = static_cast<int16_t>(&a - args.begin());
      set[i] = true;
      continue;
    }
    while (positional < n && set[positional]) ++positional;
    if (positional >= n) {
      launch_error(
          s, loc, "expected " + std::to_string(n) + " arguments (" + param_list(s) + "), got more");
    }
    bind_value(s, positional, a, out[positional], loc);
    out[positional].arg = static_cast<int16_t>(&a - args.begin());
    set[positional] = true;
  }
  for (size_t i = 0; i < n; ++i) {
    if (set[i]) continue;
    const auto& p = s.params[i];
    launch_error(s, loc,
                 "missing argument for parameter '" + p.name + "' (" + kind_name(p.kind) +
                     (p.kind == Kind::Constexpr
                          ? "; pass it positionally or as tl::meta(\"" + p.name + "\", value)"
                          : "") +
                     ")");
  }
  // One device for every tensor: the kernel runs there.
  const BoundArg* first = nullptr;
  for (size_t i = 0; i < n; ++i) {
    const BoundArg& b = out[i];
    if (!b.tensor || !b.tensor->has_data()) continue;
    if (!first) {
      first = &b;
      continue;
    }
    if (b.tensor->device() != first->tensor->device()) {
      launch_error(s, loc,
                   "parameter '" + s.params[i].name + "' is a tensor on " +
                       b.tensor->device().str() + " but an earlier one is on " +
                       first->tensor->device().str() +
                       "; a kernel's tensors must be on one device (move them with .to())");
    }
  }
}

void make_key(const SmallVector<BoundArg, 16>& bound, const LaunchOptions& opts, Key& key) {
  key.clear();
  for (const auto& b : bound) {
    switch (b.kind) {
      case Kind::Pointer:
        key.push_back(1u | (uint64_t(b.dtype) << 8) | (uint64_t(b.div16) << 16));
        break;
      case Kind::Int:
        key.push_back(2u | (uint64_t(b.dtype) << 8) | (uint64_t(b.div16) << 16) |
                      (uint64_t(b.folded_one) << 17));
        break;
      case Kind::Float:
        key.push_back(3u);
        break;
      case Kind::Constexpr: {
        key.push_back(4u | (uint64_t(b.constant.kind) << 8));
        uint64_t w = 0;
        switch (b.constant.kind) {
          case MetaArg::Kind::Int:
          case MetaArg::Kind::Bool:
            w = static_cast<uint64_t>(b.constant.i);
            break;
          case MetaArg::Kind::Float:
            std::memcpy(&w, &b.constant.f, 8);
            break;
          case MetaArg::Kind::DType:
            w = static_cast<uint64_t>(b.constant.dtype);
            break;
        }
        key.push_back(w);
        break;
      }
    }
  }
  key.push_back(static_cast<uint64_t>(opts.num_warps));
  key.push_back(static_cast<uint64_t>(opts.num_stages));
  key.push_back(static_cast<uint64_t>(opts.maxnreg));
  // The backend's target (device, ISA, toolchain) and the checked mode.
  key.push_back(backend_of(bound).target_hash());
  key.push_back(knobs().debug ? 1u : 0u);
}

const backend::Backend& backend_of(const SmallVector<BoundArg, 16>& bound) {
  Device device = kCPU;
  for (const auto& b : bound) {
    if (b.tensor) {
      device = b.tensor->device();
      break;
    }
  }
  return backend::for_device(device);
}

std::shared_ptr<CompiledKernel> prepare(
    KernelState& s, const SmallVector<BoundArg, 16>& bound, const LaunchOptions& opts,
    SourceLoc /*loc: errors while tracing carry the kernel's own lines*/) {
  auto out = std::make_shared<CompiledKernel>();
  auto function = std::make_shared<ir::Function>();
  ir::Function& f = *function;
  f.name = s.name;
  {
    TraceContext ctx(f, s.name);
    ir::Builder& b = ctx.builder();
    b.set_loc(s.loc);
    std::vector<Tile> handles;
    for (size_t i = 0; i < s.params.size(); ++i) {
      const auto& p = s.params[i];
      const BoundArg& a = bound[i];
      ir::Param param{p.name, static_cast<ir::ParamKind>(p.kind), ir::kNoValue, a.div16};
      ir::ValueId v = ir::kNoValue;
      switch (a.kind) {
        case Kind::Pointer:
          v = param.value = f.new_value(ir::Type::pointer(a.dtype), nullptr, p.name);
          break;
        case Kind::Int:
          if (a.folded_one) {
            v = b.constant_int(1, ir::Type::scalar(DType::Int32));
          } else {
            v = param.value = f.new_value(ir::Type::scalar(a.dtype), nullptr, p.name);
          }
          break;
        case Kind::Float:
          v = param.value = f.new_value(ir::Type::scalar(DType::Float32), nullptr, p.name);
          break;
        case Kind::Constexpr:
          switch (a.constant.kind) {
            case MetaArg::Kind::Int:
              v = b.constant_int(a.constant.i, ir::Type::scalar(int_type(a.constant.i)));
              break;
            case MetaArg::Kind::Float:
              v = b.constant_float(a.constant.f, ir::Type::scalar(DType::Float32));
              break;
            case MetaArg::Kind::Bool:
              v = b.constant_int(a.constant.i, ir::Type::scalar(DType::Bool));
              break;
            case MetaArg::Kind::DType:
              // An int constant holding the DType, known to be one (Tile::dtype_value()).
              v = b.constant_int(static_cast<int64_t>(a.constant.dtype),
                                 ir::Type::scalar(DType::Int32));
              ctx.dtype_values().push_back(v);
              break;
          }
          break;
      }
      f.params.push_back(param);
      handles.push_back(ctx.tile(v));
      out->meta.entries.push_back(
          {p.name,
           a.kind == Kind::Constexpr
               ? a.constant
               : (a.kind == Kind::Int ? meta(p.name, a.i) : meta(p.name, a.f)),
           SymInt(), false});
    }
    if (s.closure) {
      s.closure(handles.data());
    } else {
      s.invoke(s.body, handles.data());
    }
  }
  const backend::Backend& be = backend_of(bound);
  f.attrs.num_warps = opts.num_warps;
  f.attrs.num_stages = opts.num_stages;
  f.attrs.maxnreg = opts.maxnreg;
  f.attrs.target = be.target_key();
  if (!be.evaluates_asserts(knobs().debug)) ir::strip_asserts(f);
  out->direct_stores = ir::direct_stores(f);
  out->direct_loads = ir::direct_loads(f);
  ir::run_pipeline(f);
  out->ir = ir::print(f);
  for (const auto& a : ir::param_access(f)) {
    out->written.push_back(a.written);
    out->read.push_back(a.read);
  }
  out->backend = &be;
  out->function = function;
  out->name = s.name;
  be.generate(std::move(function), knobs().debug, out->code);
  return out;
}

void build(const std::vector<CompiledKernel*>& all) {
  // One batch per backend (the CPU's compiles in parallel; the interpreter builds nothing).
  std::vector<const backend::Backend*> backends;
  for (const CompiledKernel* k : all) {
    if (std::find(backends.begin(), backends.end(), k->backend) == backends.end())
      backends.push_back(k->backend);
  }
  for (const backend::Backend* be : backends) {
    std::vector<backend::Kernel*> batch;
    for (CompiledKernel* k : all) {
      if (k->backend == be) batch.push_back(&k->code);
    }
    be->build(batch);
  }
}

std::shared_ptr<CompiledKernel> compile(KernelState& s, const SmallVector<BoundArg, 16>& bound,
                                        const LaunchOptions& opts, SourceLoc loc) {
  auto k = prepare(s, bound, opts, loc);
  build({k.get()});
  return k;
}

std::vector<std::shared_ptr<CompiledKernel>> lookup_or_prepare(KernelState& s,
                                                               const std::vector<Spec>& specs,
                                                               SourceLoc loc,
                                                               std::vector<std::string>* errors) {
  std::vector<std::shared_ptr<CompiledKernel>> out(specs.size());
  std::vector<std::vector<uint64_t>> keys(specs.size());
  if (errors) errors->assign(specs.size(), std::string());
  for (size_t i = 0; i < specs.size(); ++i) {
    Key key;
    make_key(specs[i].bound, specs[i].opts, key);
    keys[i].assign(key.begin(), key.end());
    {
      std::lock_guard<std::mutex> g(s.mutex);
      auto it = s.cache.find(keys[i]);
      if (it != s.cache.end()) {
        out[i] = it->second;
        continue;
      }
    }
    // The same specialization twice in one batch is prepared once.
    bool shared = false;
    for (size_t j = 0; j < i && !shared; ++j) {
      if (keys[j] == keys[i]) {
        out[i] = out[j];
        if (errors) (*errors)[i] = (*errors)[j];
        shared = true;
      }
    }
    if (shared) continue;
    if (!errors) {
      out[i] = prepare(s, specs[i].bound, specs[i].opts, loc);
      continue;
    }
    try {
      out[i] = prepare(s, specs[i].bound, specs[i].opts, loc);
    } catch (const Error& e) {
      (*errors)[i] = e.what();
    }
  }
  return out;
}

void build_missing(KernelState& s, const std::vector<Spec>& specs,
                   std::vector<std::shared_ptr<CompiledKernel>>& kernels) {
  std::vector<CompiledKernel*> missing;
  for (const auto& k : kernels) {
    if (k && !k->code.built && std::find(missing.begin(), missing.end(), k.get()) == missing.end())
      missing.push_back(k.get());
  }
  build(missing);
  std::lock_guard<std::mutex> g(s.mutex);
  for (size_t i = 0; i < kernels.size(); ++i) {
    if (!kernels[i]) continue;
    Key key;
    make_key(specs[i].bound, specs[i].opts, key);
    auto [it, inserted] =
        s.cache.emplace(std::vector<uint64_t>(key.begin(), key.end()), kernels[i]);
    if (inserted) {
      s.last_source = it->second->code.source;
      s.last_ir = it->second->ir;
      s.last_from_disk = it->second->code.from_disk;
      s.last_compile_ms = it->second->code.compile_ms;
    }
    kernels[i] = it->second;
  }
}

size_t prebuild(const std::vector<PendingBuild>& launches) {
  struct One {
    KernelState* state;
    std::vector<Spec> specs;
    std::vector<std::shared_ptr<CompiledKernel>> kernels;
  };
  std::vector<One> all;
  std::vector<CompiledKernel*> missing;
  std::vector<std::pair<const KernelState*, std::vector<uint64_t>>> seen;  // (launched twice)
  for (const PendingBuild& l : launches) {
    One o{l.state, std::vector<Spec>(1), {}};
    try {
      bind(*l.state, l.args, o.specs[0].bound, o.specs[0].opts, l.loc);
      Key key;
      make_key(o.specs[0].bound, o.specs[0].opts, key);
      std::pair<const KernelState*, std::vector<uint64_t>> id{l.state, {key.begin(), key.end()}};
      if (std::find(seen.begin(), seen.end(), id) != seen.end()) continue;
      seen.push_back(std::move(id));
      std::vector<std::string> errors;
      o.kernels = lookup_or_prepare(*l.state, o.specs, l.loc, &errors);
    } catch (const std::exception&) {
      continue;  // (its launch reports it)
    }
    CompiledKernel* k = o.kernels[0].get();
    if (!k || k->code.built) continue;
    if (std::find(missing.begin(), missing.end(), k) == missing.end()) missing.push_back(k);
    all.push_back(std::move(o));
  }
  if (missing.empty()) return 0;
  try {
    build(missing);
  } catch (const std::exception&) {
    // A kernel that did not compile is built again by its launch, which reports why.
  }
  size_t built = 0;
  for (One& o : all) {
    if (!o.kernels[0]->code.built) continue;
    build_missing(*o.state, o.specs, o.kernels);  // (built: only enters the in-memory cache)
    ++built;
  }
  return built;
}

std::shared_ptr<CompiledKernel> get_kernel(KernelState& s, const SmallVector<BoundArg, 16>& bound,
                                           const LaunchOptions& opts, SourceLoc loc) {
  Key key;
  make_key(bound, opts, key);
  const ArrayRef<uint64_t> k(key.data(), key.size());
  {
    std::lock_guard<std::mutex> g(s.mutex);
    if (s.last && k.equals(s.last_key)) return s.last;
    auto it = s.cache.find(k);
    if (it != s.cache.end()) {
      s.last = it->second;
      s.last_key.assign(key.begin(), key.end());
      return it->second;
    }
  }
  auto compiled = compile(s, bound, opts, loc);
  std::lock_guard<std::mutex> g(s.mutex);
  auto [it, inserted] = s.cache.emplace(std::vector<uint64_t>(key.begin(), key.end()), compiled);
  s.last = it->second;
  s.last_key.assign(key.begin(), key.end());
  s.last_source = it->second->code.source;
  s.last_ir = it->second->ir;
  s.last_from_disk = compiled->code.from_disk;
  s.last_compile_ms = compiled->code.compile_ms;
  return it->second;
}

}  // namespace detail

// ---- JITFunction
// ----------------------------------------------------------------------------------

namespace {

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.erase(s.begin());
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

}  // namespace

JITFunction::JITFunction(const char* name, const char* param_text, detail::ErasedBody body,
                         detail::BodyInvoker invoke, const int* kinds, size_t arity,
                         const char* file, int line)
    : state_(std::make_unique<detail::KernelState>()) {
  auto& s = *state_;
  s.name = name;
  s.body = body;
  s.invoke = invoke;
  s.loc = SourceLoc{file, line};
  // The kinds come from the parameters' types; the names from the signature's text.
  std::stringstream ss(param_text);
  std::string item;
  size_t i = 0;
  while (std::getline(ss, item, ',')) {
    item = trim(item);
    if (item.empty()) continue;
    const size_t sp = item.find_last_of(" \t&*");
    const std::string pname = sp == std::string::npos ? item : trim(item.substr(sp + 1));
    const auto kind = i < arity ? static_cast<ParamSpec::Kind>(kinds[i]) : ParamSpec::Kind::Int;
    s.params.push_back(ParamSpec{pname, kind});
    ++i;
  }
  if (s.params.size() != arity) {
    s.param_error = "could not read the parameter names of TL_JIT (" +
                    std::to_string(s.params.size()) + " names for " + std::to_string(arity) +
                    " parameters)";
  }
  s.no_specialize.assign(s.params.size(), false);
}

JITFunction::JITFunction(std::unique_ptr<detail::KernelState> state) : state_(std::move(state)) {}

JITFunction::~JITFunction() = default;

const std::string& JITFunction::name() const {
  return state_->name;
}
const std::vector<JITFunction::ParamSpec>& JITFunction::params() const {
  return state_->params;
}
SourceLoc JITFunction::location() const {
  return state_->loc;
}

JITFunction& JITFunction::do_not_specialize(std::initializer_list<std::string_view> names) {
  for (auto n : names) {
    size_t i = 0;
    while (i < state_->params.size() && state_->params[i].name != n) ++i;
    TS_CHECK(i < state_->params.size(), ValueError)
        << "[kernel " << state_->name << "] do_not_specialize: no parameter named '" << n << "'";
    state_->no_specialize[i] = true;
  }
  return *this;
}

size_t JITFunction::num_specializations() const {
  std::lock_guard<std::mutex> g(state_->mutex);
  return state_->cache.size();
}

void JITFunction::clear_memory_cache() const {
  std::lock_guard<std::mutex> g(state_->mutex);
  state_->cache.clear();
  state_->last.reset();
  state_->last_key.clear();
}

bool JITFunction::last_from_disk() const {
  std::lock_guard<std::mutex> g(state_->mutex);
  return state_->last_from_disk;
}

double JITFunction::last_compile_ms() const {
  std::lock_guard<std::mutex> g(state_->mutex);
  return state_->last_compile_ms;
}

std::string JITFunction::last_source() const {
  std::lock_guard<std::mutex> g(state_->mutex);
  return state_->last_source;
}

std::string JITFunction::last_ir() const {
  std::lock_guard<std::mutex> g(state_->mutex);
  return state_->last_ir;
}

// ---- Meta, Grid, launch
// -----------------------------------------------------------------------------

int64_t Meta::operator[](std::string_view name) const {
  for (const auto& e : entries) {
    if (e.name != name) continue;
    if (e.is_symbolic) return static_cast<int64_t>(e.symbolic);  // specializes, with a guard
    TS_CHECK(e.value.kind == MetaArg::Kind::Int || e.value.kind == MetaArg::Kind::Bool, TypeError)
        << "meta-parameter '" << name << "' is not an integer";
    return e.value.i;
  }
  std::string known;
  for (const auto& e : entries) known += (known.empty() ? "" : ", ") + e.name;
  TS_ERROR(ValueError) << "the grid asked for meta-parameter '" << name
                       << "', which the launch does not "
                       << "have (it has: " << known << ")";
}

bool Meta::contains(std::string_view name) const {
  for (const auto& e : entries) {
    if (e.name == name) return true;
  }
  return false;
}

double Meta::float_value(std::string_view name) const {
  for (const auto& e : entries) {
    if (e.name == name)
      return e.value.kind == MetaArg::Kind::Float ? e.value.f : static_cast<double>(e.value.i);
  }
  TS_ERROR(ValueError) << "no meta-parameter named '" << name << "'";
}

namespace detail {
void cdiv_error(const SymInt& a, const SymInt& b, SourceLoc loc) {
  std::ostringstream os;
  os << "tl::cdiv(" << a << ", " << b << "): the divisor must be positive";
  throw ValueError(os.str(), loc);  // the message gains "(at file:line)"
}
}  // namespace detail

Grid::Grid(std::initializer_list<SymInt> dims, SourceLoc l) : loc(l) {
  TS_CHECK(dims.size() >= 1 && dims.size() <= 3, ValueError)
      << "a launch grid has 1 to 3 dimensions, got " << dims.size();
  int i = 0;
  for (const auto& d : dims) this->dims[i++] = d;
  ndim = static_cast<int>(dims.size());
}

void Launcher::run(ArrayRef<KernelArg> args) const {
  UserLocGuard guard(loc_);
  // With a mode or a wrapper tensor active the launch is an operator call (DESIGN.md D12): graph
  // capture, FLOP counting and wrapper types see it; otherwise it runs directly.
  if (detail::launch_needs_dispatch(args)) {
    detail::dispatch_launch(*this, args);
    return;
  }
  if (target_) {
    target_->launch(*this, args);
    return;
  }
  run_kernel(args);
}

void Launcher::run_kernel(ArrayRef<KernelArg> args, const Grid* grid_override) const {
  auto& s = fn_.state();

  SmallVector<detail::BoundArg, 16> bound;
  detail::LaunchOptions opts;
  detail::bind(s, args, bound, opts, loc_);
  // Tensors without data (meta, fake): the arguments are checked, nothing is computed. A
  // triton_op's body is its own shape function this way.
  for (const auto& b : bound) {
    if (b.tensor && !b.tensor->has_data()) return;
  }
  const auto kernel = detail::get_kernel(s, bound, opts, loc_);
  const Grid g = grid_override ? *grid_override : grid_fn_ ? (*grid_fn_)(kernel->meta) : grid_;
  int64_t dims[3] = {1, 1, 1};
  for (int d = 0; d < 3; ++d) {
    if (g.dims[d].is_symbolic()) {
      detail::launch_error(s, loc_, "the grid has a symbolic size outside tessera::compile");
    }
    dims[d] = g.dims[d].expect_int();
    if (dims[d] < 0)
      detail::launch_error(s, loc_, "negative grid dimension " + std::to_string(dims[d]));
    // CUDA's limits on every backend: program ids are int32, so a kernel is portable.
    static constexpr int64_t kMaxGrid[3] = {(int64_t{1} << 31) - 1, 65535, 65535};
    if (dims[d] > kMaxGrid[d]) {
      static constexpr const char* kAxis[3] = {"x", "y", "z"};
      std::ostringstream os;
      os << "grid dimension " << d << " (" << kAxis[d] << ") is " << dims[d] << ", above the limit "
         << kMaxGrid[d] << " (program ids are int32; y and z are below 65536 as on CUDA)";
      detail::launch_error(s, loc_, os.str());
    }
  }
  const int64_t total = dims[0] * dims[1] * dims[2];
  if (total == 0) return;
  if (detail::recording()) {  // a dispatched launch: what ran, for the modes that asked
    std::vector<ir::ParamValue> params;
    for (const auto& b : bound) params.push_back({b.i, b.f});
    detail::record_run(s.name, kernel->function, params, dims);
  }
  SmallVector<backend::Arg, 16> args_out(bound.size());
  for (size_t i = 0; i < bound.size(); ++i) {
    const auto& b = bound[i];
    backend::Arg& a = args_out[i];
    a.kind = static_cast<ir::ParamKind>(b.kind);
    a.ptr = b.ptr;
    a.i = b.i;
    a.f = b.f;
    a.tensor = b.tensor;
  }
  kernel->backend->launch(kernel->code,
                          backend::GridSize{trt::Grid{dims[0], dims[1], dims[2]}, total},
                          ArrayRef<backend::Arg>(args_out.data(), args_out.size()));
  for (size_t i = 0; i < bound.size(); ++i) {
    if (bound[i].tensor && kernel->written[i]) bound[i].tensor->impl()->storage()->bump_version();
  }
}

}  // namespace tessera::tl
