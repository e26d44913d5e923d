// AOT export (docs/aot.md): trace the function as tessera::compile does (the declared dimensions
// dynamic, every other size static), run the graph once on the example with an observer that
// records each kernel launch's specialization, compile every specialization (and a generic one
// where the example's alignment or divisibility may not hold later) into one shared object, and
// write the package.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdio>
#include <map>
#include <set>
#include <thread>

#include "aot/package.h"
#include "backend/cpu/toolchain.h"
#include "backend/cuda/cuda_backend.h"
#include "compile/capture.h"
#include "compile/executor.h"
#include "core/files.h"
#include "ops/pointwise.h"
#include "runtime/cuda/context.h"
#include "runtime/disk_cache.h"
#include "tessera/detail/hash.h"
#include "tessera/tensor.h"
#include "tessera/version.h"
#include "tl/jit.h"

namespace tessera::aot {
namespace {

using namespace tessera::compile_detail;
namespace ad = tessera::aot_detail;

std::string where(const ExportOptions& o) {
  return "[aot::compile " + o.name + "] ";
}

std::string loc_text(SourceLoc loc) {
  if (!loc.known()) return "";
  std::ostringstream os;
  os << loc;
  return os.str();
}

std::string schema_hash(const OperatorHandle& op) {
  return sha256_hex(op.schema().str()).substr(0, 16);
}

// Whether a package can hold a constant of this kind.
bool storable(const IValue& v) {
  if (v.is_symint_list()) {  // plain values (a symbolic list is a SymList argument)
    for (const SymInt& x : v.to_symint_list())
      if (x.is_symbolic()) return false;
    return true;
  }
  return v.is_none() || v.is_bool() || v.is_int() || v.is_double() || v.is_string() ||
         v.is_dtype() || v.is_device() || v.is_int_list() || v.is_double_list() || v.is_bool_list();
}

ad::SymRef ref(const compile_detail::SymRef& r) {
  return ad::SymRef{r.constant, r.slot};
}

// One kernel node's launch as the example ran it (the tuner's last call for autotuned launches).
struct Launch {
  SmallVector<tl::detail::BoundArg, 16> bound;
  tl::detail::LaunchOptions opts;
  std::shared_ptr<tl::detail::CompiledKernel> spec;
  std::vector<ad::Param> params;
  ad::SymRef grid[3];
  std::vector<ad::Variant> variants;
  std::string hook;  ///< the config's pre_hook, when it has one (refused)
};

// The dynamic dimensions the options declare, checked against the example: (tensor argument,
// dim) -> Dim.
std::map<std::pair<int, int>, Dim> declared_dims(const std::vector<IValue>& example,
                                                 const ExportOptions& o) {
  std::vector<const Tensor*> tensors;
  for (const IValue& v : example)
    if (v.is_tensor() && v.to_tensor().defined()) tensors.push_back(&v.to_tensor());
  std::map<std::pair<int, int>, Dim> dims;
  std::map<std::string, int64_t> size_of_name;
  for (const DynamicDim& dd : o.dynamic_shapes) {
    TS_CHECK(dd.arg >= 0 && static_cast<size_t>(dd.arg) < tensors.size(), CompileError)
        << where(o) << "Dim '" << dd.d.name << "' names tensor argument " << dd.arg << "; the "
        << "function takes " << tensors.size() << " tensor arguments";
    const Tensor& t = *tensors[static_cast<size_t>(dd.arg)];
    TS_CHECK(dd.dim >= 0 && dd.dim < t.dim(), CompileError)
        << where(o) << "Dim '" << dd.d.name << "' names dimension " << dd.dim
        << " of tensor argument " << dd.arg << ", which has " << t.dim();
    TS_CHECK(!dd.d.name.empty(), CompileError) << where(o) << "a Dim needs a name";
    TS_CHECK(dd.d.min >= 2 && dd.d.min <= dd.d.max, CompileError)
        << where(o) << "Dim '" << dd.d.name << "' has the range [" << dd.d.min << ", " << dd.d.max
        << "]; sizes 0 and 1 are always specialized, so the minimum is at least 2";
    const int64_t size = t.impl()->int_sizes()[dd.dim];
    TS_CHECK(size >= dd.d.min && size <= dd.d.max, CompileError)
        << where(o) << "the example's tensor argument " << dd.arg << " has size " << size
        << " in dimension " << dd.dim << ", outside Dim '" << dd.d.name << "' [" << dd.d.min << ", "
        << dd.d.max << "]";
    auto [it, fresh] = size_of_name.emplace(dd.d.name, size);
    TS_CHECK(fresh || it->second == size, CompileError)
        << where(o) << "Dim '" << dd.d.name << "' names dimensions of sizes " << it->second
        << " and " << size << " in the example; one Dim is one size";
    TS_CHECK(dims.emplace(std::make_pair(dd.arg, dd.dim), dd.d).second, CompileError)
        << where(o) << "tensor argument " << dd.arg << " dimension " << dd.dim
        << " is declared twice";
  }
  return dims;
}

class Exporter {
 public:
  Exporter(const Traced& fn, const std::vector<IValue>& example, const ExportOptions& o)
      : fn_(fn), example_(example), o_(o) {}

  std::string run() {
    auto dims = declared_dims(example_, o_);
    std::set<std::pair<int, int>> dyn;
    for (const auto& [k, d] : dims) dyn.insert(k);
    CaptureOptions co;
    co.name = o_.name;
    co.dynamic_dims = &dyn;
    Captured c;
    try {
      c = capture(fn_, example_, co);
    } catch (const GraphBreakError& e) {
      throw CompileError(where(o_) + "a package holds one whole graph: " + e.message(),
                         e.user_loc());
    }
    const compiler::Graph& g = *c.graph;
    manifest(g, c.guards, dims);
    record_launches(g, c.guards);
    schedule(g, c.guards);
    return package();
  }

 private:
  // Every tensor of the package on one device: the CPU, or one GPU (a CUDA package).
  void device(Device d, const std::string& what) {
    TS_CHECK(d.is_cpu() || d.is_cuda(), NotImplementedError)
        << where(o_) << what << " is on " << d.str() << "; packages run on the CPU or a CUDA GPU";
    if (!device_) {
      device_ = d;
      return;
    }
    TS_CHECK(*device_ == d, CompileError)
        << where(o_) << what << " is on " << d.str() << " and an earlier tensor on "
        << device_->str() << "; a package runs on one device";
  }
  bool cuda() const { return device_ && device_->is_cuda(); }

  void manifest(const compiler::Graph& g, const Guards& guards,
                const std::map<std::pair<int, int>, Dim>& dims) {
    m_.name = o_.name;
    m_.created_by = std::string("tessera ") + version() + " (build " + build_id() + ")";
    m_.isa = o_.isa.empty() ? ad::host_isa() : o_.isa;
    m_.cpu_features = ad::isa_features(m_.isa);
    const auto missing = ad::missing_cpu_features(m_.cpu_features);
    TS_CHECK(missing.empty(), CompileError)
        << where(o_) << "this CPU lacks " << missing.front() << " of ISA level " << m_.isa
        << ": the example could not run its code";
    // Leaves, and which tensor argument each tensor leaf is.
    std::map<size_t, int> tensor_index;
    int k = 0;
    for (size_t i = 0; i < example_.size(); ++i) {
      const IValue& v = example_[i];
      if (v.is_tensor() && v.to_tensor().defined()) tensor_index[i] = k++;
    }
    for (size_t i = 0; i < guards.leaves.size(); ++i) {
      const LeafGuard& lg = guards.leaves[i];
      ad::Leaf l;
      l.tensor = lg.tensor;
      if (!lg.tensor) {
        TS_CHECK(storable(lg.constant), CompileError)
            << where(o_) << "argument " << i << " is a " << lg.constant.type_name()
            << ", which a package cannot hold";
        l.constant = lg.constant;
        m_.leaves.push_back(l);
        continue;
      }
      device(lg.device, "argument " + std::to_string(i));
      l.dtype = lg.dtype;
      l.requires_grad = lg.requires_grad;
      l.contiguous = lg.contiguous;
      l.sizes = lg.sizes;
      l.symbol.assign(lg.size_symbol.begin(), lg.size_symbol.end());
      l.strides = lg.contiguous ? std::vector<int64_t>{} : lg.strides;
      l.offset = lg.offset;
      m_.leaves.push_back(l);
    }
    // Symbols: each a declared Dim; a declared dimension without one was specialized.
    m_.symbols.resize(guards.symbol_sources.size());
    std::vector<std::string> names(m_.symbols.size());
    for (const auto& [key, d] : dims) {
      size_t leaf = 0;
      for (const auto& [i, t] : tensor_index)
        if (t == key.first) leaf = i;
      const int s = guards.leaves[leaf].size_symbol[static_cast<size_t>(key.second)];
      TS_CHECK(s >= 0, CompileError)
          << where(o_) << "Dim '" << d.name << "' (tensor argument " << key.first << " dimension "
          << key.second << ") is static in the trace: the argument shares memory with another";
      ad::Symbol& sym = m_.symbols[static_cast<size_t>(s)];
      TS_CHECK(names[static_cast<size_t>(s)].empty() || names[static_cast<size_t>(s)] == d.name,
               CompileError)
          << where(o_) << "Dim '" << names[static_cast<size_t>(s)] << "' and Dim '" << d.name
          << "' have the same size in the example, so the trace treats them as one; give the "
             "example different sizes, or use one Dim";
      const bool first = names[static_cast<size_t>(s)].empty();
      names[static_cast<size_t>(s)] = d.name;
      sym.name = d.name;
      sym.min = first ? d.min : std::max(sym.min, d.min);
      sym.max = first ? d.max : std::min(sym.max, d.max);
    }
    for (size_t s = 0; s < m_.symbols.size(); ++s) {
      m_.symbols[s].leaf = static_cast<uint32_t>(guards.symbol_sources[s].first);
      m_.symbols[s].dim = static_cast<uint32_t>(guards.symbol_sources[s].second);
      m_.symbols[s].example = g.env->symbols[s].hint;
    }
    // A guard that pins a symbol to one value specializes a declared dimension.
    for (size_t gi = 0; gi < g.env->guards.size(); ++gi) {
      const auto& gd = g.env->guards[gi];
      // `a*s + b == 0` fixes s; `s % 2 == 0` (a view's divisibility) constrains it and stays a
      // guard checked at every call.
      namespace sym = compiler::sym;
      const sym::Expr* c = gd.condition;
      const bool linear_eq = c->kind == sym::Kind::Eq && c->args[0]->kind == sym::Kind::Poly &&
                             c->args[0]->terms.size() == 1 &&
                             c->args[0]->terms[0].atoms.size() == 1 &&
                             c->args[0]->terms[0].atoms[0]->kind == sym::Kind::Symbol;
      const bool pins = linear_eq || gd.why == "specialized";
      TS_CHECK(!pins, CompileError)
          << where(o_)
          << "the function specializes a dynamic dimension: " << guards.describe_guard(gi)
          << "; a package must run every size in its Dim ranges"
          << (gd.loc.known() ? "" : " (see TESSERA_LOGS=recompiles for the line)");
    }
    for (const auto& p : guards.alias_pairs)
      m_.alias_pairs.emplace_back(static_cast<uint32_t>(p.first), static_cast<uint32_t>(p.second));
    const auto& prog = guards.program();
    for (const auto& in : prog.raw_code()) {
      m_.prog_op.push_back(in.op);
      m_.prog_a.push_back(in.a);
      m_.prog_b.push_back(in.b);
      m_.prog_imm.push_back(in.imm);
    }
    m_.prog_outputs = prog.output_slots();
    // The guards as text with the Dims' names: "n <= 2147483647 (kernel k's 32-bit offsets, from
    // f.cpp:12)".
    for (size_t k2 = 0; k2 < guards.num_guards(); ++k2) {
      const auto& gd = g.env->guards[k2];
      std::string text = g.env->ctx.str(gd.condition);
      std::string named;
      for (size_t i = 0; i < text.size();) {
        size_t j = i + 1;
        const bool start = i == 0 || !(std::isalnum(static_cast<unsigned char>(text[i - 1])) ||
                                       text[i - 1] == '_');
        if (text[i] == 's' && start && j < text.size() &&
            std::isdigit(static_cast<unsigned char>(text[j]))) {
          while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
          const size_t sym = std::stoul(text.substr(i + 1, j - i - 1));
          if ((j == text.size() ||
               !(std::isalnum(static_cast<unsigned char>(text[j])) || text[j] == '_')) &&
              sym < m_.symbols.size()) {
            named += m_.symbols[sym].name;
            i = j;
            continue;
          }
        }
        named += text[i++];
      }
      named += " (" + gd.why;
      if (gd.loc.known()) named += ", from " + loc_text(gd.loc);
      m_.guards.push_back(named + ")");
    }
    for (size_t i = 0; i < g.outputs.size(); ++i) {
      ad::Output out;
      out.value = g.outputs[i];
      if (out.value < 0) {
        TS_CHECK(storable(g.constant_outputs[i]), CompileError)
            << where(o_) << "result " << i << " is a " << g.constant_outputs[i].type_name()
            << ", which a package cannot hold";
        out.constant = g.constant_outputs[i];
      }
      m_.outputs.push_back(out);
    }
  }

  // Runs the graph on the example; each kernel launch's specialization is recorded.
  void record_launches(const compiler::Graph& g, const Guards& guards) {
    Scratch s;
    std::string why;
    TS_INTERNAL_ASSERT(guards.match(example_, s, &why)) << "the example fails its guards: " << why;
    Executor ex(g, guards);
    const std::string want = cuda() ? "cuda" : "cpu";
    Executor::Observer observe = [&](const Executor::LaunchEvent& ev) {
      const compiler::Node& n = g.nodes[ev.node];
      auto& st = n.kernel->state();
      Launch l;
      if (ev.candidate && n.tuned) l.hook = n.tuned->launch_hook(*ev.candidate);
      tl::detail::bind(st, ev.args, l.bound, l.opts, n.loc);
      l.spec = tl::detail::get_kernel(st, l.bound, l.opts, n.loc);
      TS_CHECK(l.spec->backend->name() == want, NotImplementedError)
          << where(o_) << "kernel " << st.name << " ran on the " << l.spec->backend->name()
          << " backend; a package holds " << want << " code (unset TESSERA_INTERPRET and "
          << "TESSERA_CROSSCHECK)";
      TS_CHECK(!l.spec->code.checked, CompileError)
          << where(o_) << "kernel " << st.name << " was compiled in the checked mode; export "
          << "without TESSERA_DEBUG";
      for (size_t p = 0; p < l.bound.size(); ++p) {
        const auto& b = l.bound[p];
        ad::Param q;
        q.kind = static_cast<uint8_t>(b.kind);
        q.written = p < l.spec->written.size() && l.spec->written[p];
        q.i = b.i;
        q.f = b.f;
        const auto arg = static_cast<size_t>(b.arg);
        for (const auto& [a, v] : *ev.tensors)
          if (a == arg && b.kind == tl::JITFunction::ParamSpec::Kind::Pointer) {
            q.source = ad::Param::FromValue;
            q.value = v;
          }
        for (const auto& [a, r] : *ev.ints)
          if (a == arg) {
            q.source = ad::Param::FromSym;
            q.sym = ref(r);
          }
        TS_CHECK(q.kind != ad::Param::Pointer || q.source == ad::Param::FromValue, CompileError)
            << where(o_) << "kernel " << st.name << " parameter " << st.params[p].name
            << " is not a tensor of the graph";
        l.params.push_back(q);
      }
      for (int d = 0; d < 3; ++d) l.grid[d] = ref(ev.grid[d]);
      variants(n, l);  // while the launch's tensors are alive
      launches_[ev.node] = std::move(l);
    };
    // On a GPU, an operator whose kernel the tile lowering generates at run time (a pointwise
    // op, a reduction, a norm on CUDA tensors) cannot run from a package: refused by name.
    uint64_t runner_calls = ops_detail::device_runner_calls();
    Executor::OpObserver after_op = [&](size_t node) {
      const uint64_t now = ops_detail::device_runner_calls();
      const compiler::Node& n = g.nodes[node];
      TS_CHECK(!cuda() || now == runner_calls, NotImplementedError)
          << where(o_) << "operator " << n.op.schema().qualified_name()
          << (n.loc.known() ? " at " + loc_text(n.loc) : std::string()) << " runs on "
          << device_->str() << " through a kernel generated at run time, which a "
          << "package cannot ship yet; write it in a kernel of the function, or run it outside "
          << "the package";
      runner_calls = now;
    };
    ex.run(example_, s, &observe, &after_op);
  }

  // The variants of a launch: the example's specialization, then (where it assumed something of a
  // pointer's alignment or a size that a later call may break) a generic one.
  void variants(const compiler::Node& n, Launch& l) {
    std::vector<ad::Variant>& out = l.variants;
    out.clear();
    auto& st = n.kernel->state();
    ad::Variant spec;
    spec.assume.resize(l.params.size(), 0);
    auto generic_bound = l.bound;
    bool differs = false;
    for (size_t p = 0; p < l.params.size(); ++p) {
      auto& b = generic_bound[p];
      const ad::Param& q = l.params[p];
      const bool dynamic = q.kind == ad::Param::Pointer ||
                           (q.kind == ad::Param::Int && q.source == ad::Param::FromSym);
      if (!dynamic || b.dtype == DType::Bool) continue;
      uint8_t a = 0;
      if (b.div16) a |= ad::Variant::Div16;
      if (b.folded_one) a |= ad::Variant::IsOne;
      if (q.kind == ad::Param::Int && b.dtype == DType::Int32) a |= ad::Variant::Fits32;
      spec.assume[p] = a;
      differs |= a != 0;
      b.div16 = false;
      b.folded_one = false;
      if (q.kind == ad::Param::Int) b.dtype = DType::Int64;
    }
    spec.symbol = entry(*l.spec);
    spec.work_per_program = l.spec->code.work_per_program;
    out.push_back(spec);
    if (!differs) return;
    auto generic = tl::detail::prepare(st, generic_bound, l.opts, n.loc);
    ad::Variant gv;
    gv.assume.assign(l.params.size(), 0);
    gv.symbol = entry(*generic);
    gv.work_per_program = generic->code.work_per_program;
    out.push_back(gv);
  }

  // The entry point of a specialization's code: its function in the package's shared object,
  // or its CUDA module.
  std::string entry(const tl::detail::CompiledKernel& k) {
    TS_INTERNAL_ASSERT(!k.code.source.empty()) << "kernel " << k.name << " has no source";
    // (every module's entry is `tessera_kernel`: the JIT's source names the kernel after itself)
    const std::string source =
        cuda() ? backend::cuda::with_extern_entry(k.code.source, k.name, "tessera_kernel")
               : k.code.source;
    auto [it, fresh] = source_index_.emplace(source, sources_.size());
    if (fresh) {
      sources_.push_back(source);
      source_names_.push_back(k.name);
      ad::CudaModule mod;
      mod.threads = static_cast<uint32_t>(k.code.launch_threads);
      mod.shared_bytes = static_cast<uint64_t>(k.code.shared_bytes);
      modules_.push_back(mod);
    }
    return "tessera_kernel_" + std::to_string(it->second);
  }

  void schedule(const compiler::Graph& g, const Guards& guards) {
    m_.num_values = static_cast<uint32_t>(g.values.size());
    m_.inputs = g.inputs;
    m_.inputs.resize(m_.leaves.size(), -1);
    for (size_t c = 0; c < g.captured.size(); ++c) constant(g.captured[c], g.captured_values[c]);
    for (size_t k = 0; k < g.nodes.size(); ++k) {
      const compiler::Node& n = g.nodes[k];
      if (n.dead) continue;
      ad::Node out;
      out.loc = loc_text(n.loc);
      if (n.kind == compiler::Node::Kind::Kernel) {
        auto it = launches_.find(k);
        TS_INTERNAL_ASSERT(it != launches_.end())
            << "kernel node " << k << " did not launch on the example";
        Launch& l = it->second;
        // (Checked on the tuner's last call, its choice: trials of other configs do not count.)
        TS_CHECK(l.hook.empty(), NotImplementedError)
            << where(o_) << "kernel " << n.kernel->state().name << " (" << out.loc
            << ") runs its autotune config's pre_hook before every launch (" << l.hook
            << "), host code a package cannot hold; do that work in the function instead";
        out.kind = ad::Node::Kernel;
        out.kernel = n.kernel->state().name;
        out.params = l.params;
        for (int d = 0; d < 3; ++d) out.grid[d] = l.grid[d];
        out.variants = l.variants;
        m_.nodes.push_back(std::move(out));
        continue;
      }
      out.kind = ad::Node::Op;
      out.op = n.op.schema().qualified_name();
      out.schema_hash = schema_hash(n.op);
      for (const compiler::Arg& a : n.args) {
        ad::NodeArg na;
        switch (a.kind) {
          case compiler::Arg::Kind::Value:
            na.kind = ad::NodeArg::Value;
            na.value = a.value;
            break;
          case compiler::Arg::Kind::ValueList:
            na.kind = ad::NodeArg::ValueList;
            na.values = a.values;
            na.optional_list = a.optional_list;
            break;
          case compiler::Arg::Kind::Sym:
            na.kind = ad::NodeArg::Sym;
            na.sym = ref(guards.ref_of(a.expr));
            break;
          case compiler::Arg::Kind::SymList:
            na.kind = ad::NodeArg::SymList;
            for (auto* e : a.exprs) na.syms.push_back(ref(guards.ref_of(e)));
            break;
          case compiler::Arg::Kind::Constant:
            TS_CHECK(storable(a.constant), CompileError)
                << where(o_) << "argument '" << a.name << "' of " << out.op << " at " << out.loc
                << " is a " << a.constant.type_name() << ", which a package cannot hold";
            na.kind = ad::NodeArg::Constant;
            na.constant = a.constant;
            break;
        }
        out.args.push_back(std::move(na));
      }
      out.outputs = n.outputs;
      if (n.arena >= 0 && g.arenas[static_cast<size_t>(n.arena)].device.type() ==
                              (cuda() ? DeviceType::CUDA : DeviceType::CPU)) {
        // The memory plan's place, in the package's one arena (its device's).
        out.planned = true;
        out.arena_offset = ref(guards.ref_of(n.arena_offset));
        m_.has_arena = true;
        m_.arena_bytes = ref(guards.ref_of(g.arenas[static_cast<size_t>(n.arena)].bytes));
      }
      if (n.elide_when) {
        out.elide = true;
        out.elide_when = ref(guards.ref_of(n.elide_when));
        out.elided_op = n.elided_op.schema().qualified_name();
        out.elided_hash = schema_hash(n.elided_op);
        out.elided_drop = n.elided_drop;
      }
      m_.nodes.push_back(std::move(out));
    }
  }

  // A tensor the function closed over, stored in the constants section (a CUDA package's are
  // copied to the host here and to its GPU at load).
  void constant(const Tensor& t, int value) {
    const Device d = device_.value_or(Device(DeviceType::CPU));
    TS_CHECK(t.device() == d && t.is_contiguous() && t.impl()->int_offset() == 0,
             NotImplementedError)
        << where(o_) << "the function closes over a tensor that is not a dense tensor at offset 0 "
        << "on the package's device " << d.str() << " (" << t.device().str()
        << "); pass it as an argument instead";
    const Tensor host = t.device().is_cpu() ? t : t.to(Device(DeviceType::CPU));
    ad::Constant c;
    c.value = value;
    c.dtype = t.dtype();
    for (int64_t d = 0; d < t.dim(); ++d) c.sizes.push_back(t.impl()->int_sizes()[d]);
    constants_.resize((constants_.size() + 63) / 64 * 64, '\0');
    c.offset = constants_.size();
    c.nbytes = static_cast<uint64_t>(t.numel()) * itemsize(t.dtype());
    constants_.append(static_cast<const char*>(host.impl()->data()), c.nbytes);
    m_.constants.push_back(c);
  }

  std::string package() {
    std::vector<std::pair<ad::SectionId, std::string>> sections = {
        {ad::SectionId::Manifest, ad::encode_manifest(m_)},
        {ad::SectionId::Schedule, ad::encode_schedule(m_)}};
    if (cuda()) {
      sections.emplace_back(ad::SectionId::CudaObjects, ad::encode_cuda(cuda_code()));
    } else if (!sources_.empty()) {
      sections.emplace_back(ad::SectionId::CpuObject,
                            backend::cpu::compile_bundle(sources_, m_.isa));
    }
    if (!constants_.empty()) sections.emplace_back(ad::SectionId::Constants, constants_);
    return ad::write_container(sections);
  }

  // Every module compiled by NVRTC for every requested architecture, in parallel.
  ad::CudaCode cuda_code() {
    ad::CudaCode c;
    c.modules = modules_;
    std::vector<std::string> archs = o_.cuda_archs;
    if (archs.empty()) {
      const auto& info = runtime::cuda::device_info(device_->index());
      archs.push_back("sm_" + std::to_string(info.major * 10 + info.minor));
    }
    for (const std::string& a : archs) {
      int major = 0, minor = 0;
      bool specific = false;
      TS_CHECK(ad::parse_arch(a, major, minor, specific), ValueError)
          << where(o_) << "'" << a
          << "' is not a CUDA architecture (sm_80, sm_90, sm_90a, or compute_80 for PTX)";
      for (const ad::CudaArch& seen : c.archs)
        TS_CHECK(seen.name != a, ValueError) << where(o_) << "architecture " << a << " twice";
      ad::CudaArch arch;
      arch.name = a;
      arch.cubins.resize(sources_.size());
      c.archs.push_back(std::move(arch));
    }
    const size_t jobs = sources_.size() * c.archs.size();
    std::vector<std::exception_ptr> errors(jobs);
    std::atomic<size_t> next{0};
    auto work = [&] {
      for (size_t j; (j = next.fetch_add(1)) < jobs;) {
        ad::CudaArch& arch = c.archs[j / sources_.size()];
        const size_t m = j % sources_.size();
        int major = 0, minor = 0;
        bool specific = false;
        ad::parse_arch(arch.name, major, minor, specific);
        try {
          arch.cubins[m] = ad::is_ptx_arch(arch.name)
                               ? backend::cuda::compile_ptx_for_arch(sources_[m], source_names_[m],
                                                                     major * 10 + minor)
                               : backend::cuda::compile_for_arch(sources_[m], source_names_[m],
                                                                 major * 10 + minor, nullptr,
                                                                 specific ? "a" : "");
        } catch (...) {
          errors[j] = std::current_exception();
        }
      }
    };
    const size_t workers =
        std::min<size_t>(jobs, std::max<unsigned>(1, std::thread::hardware_concurrency()));
    std::vector<std::thread> threads;
    for (size_t t = 1; t < workers; ++t) threads.emplace_back(work);
    if (workers) work();
    for (auto& t : threads) t.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
    return c;
  }

  const Traced& fn_;
  const std::vector<IValue>& example_;
  const ExportOptions& o_;
  ad::Model m_;
  std::map<size_t, Launch> launches_;
  std::optional<Device> device_;
  std::vector<std::string> sources_, source_names_;
  std::vector<ad::CudaModule> modules_;
  std::map<std::string, size_t> source_index_;
  std::string constants_;
};

}  // namespace

namespace detail {

void export_package(const std::string& path, const compile_detail::Traced& fn,
                    const std::vector<IValue>& example, const ExportOptions& options) {
  ExportOptions o = options;
  if (o.name.empty()) o.name = loc_text(o.loc).empty() ? "package" : loc_text(o.loc);
  UserLocGuard loc(o.loc);
  const std::string bytes = Exporter(fn, example, o).run();
  // Written next to the destination and renamed into place: a reader never sees half a package.
  const std::string tmp = path + ".tmp-" + runtime::disk::unique_suffix();
  {
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    TS_CHECK(fd >= 0, RuntimeError) << "[aot::compile " << o.name << "] cannot write " << tmp;
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (w <= 0) break;
      done += static_cast<size_t>(w);
    }
    const bool ok = done == bytes.size() && ::fsync(fd) == 0;
    ::close(fd);
    if (!ok) ::unlink(tmp.c_str());
    TS_CHECK(ok, RuntimeError) << "[aot::compile " << o.name << "] writing " << tmp << " failed";
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    TS_ERROR(RuntimeError) << "[aot::compile " << o.name << "] cannot write " << path;
  }
}

}  // namespace detail
}  // namespace tessera::aot
