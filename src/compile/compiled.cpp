// tessera::compile: tracing on fake tensors into a graph, guards, the interpreted executor, and
// the cache of guarded graphs with automatic dynamic shapes and explained recompiles.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <unordered_map>

#include "compile/graph.h"
#include "tessera/compile.h"
#include "tessera/detail/boxing.h"
#include "tessera/env.h"
#include "tessera/tl.h"
#include "tl/jit.h"
#include "tl/launch_op.h"
#include "tl/variants.h"

namespace tessera::compile_detail {

using namespace tessera::compiler;

namespace {

/** Something the trace cannot capture (a graph break). */
class GraphBreakError : public CompileError {
 public:
  using CompileError::CompileError;
};

[[noreturn]] void graph_break(const std::string& cause, SourceLoc loc) {
  std::ostringstream os;
  os << "graph break: " << cause;
  throw GraphBreakError(os.str(), loc);
}

// ---- tracing ------------------------------------------------------------------------------------

class Tracer final : public DispatchMode {
 public:
  Tracer(Graph& g, bool grad_inputs) : g_(g), grad_inputs_(grad_inputs) {}

  int add_tensor(const Tensor& t, int producer) {
    Value v;
    v.kind = Value::Kind::Tensor;
    v.tensor.dtype = t.dtype();
    v.tensor.device = t.device();
    for (const auto& s : t.sizes()) v.tensor.sizes.push_back(g_.env->expr_of(s));
    for (const auto& s : t.strides()) v.tensor.strides.push_back(g_.env->expr_of(s));
    v.tensor.offset = g_.env->expr_of(t.storage_offset());
    v.tensor.storage = storage_of(t);
    v.producer = producer;
    const int id = g_.add_value(std::move(v));
    by_impl_[t.impl()] = id;
    keep_.push_back(t);
    return id;
  }

  int value_of(const Tensor& t) {
    if (auto it = by_impl_.find(t.impl()); it != by_impl_.end()) return it->second;
    TS_CHECK(t.has_data(), CompileError)
        << "a fake tensor from outside this trace reached the graph";
    // A real tensor the function closes over: an implicit input, guarded by identity.
    const int id = add_tensor(t, -1);
    g_.captured.push_back(t);
    g_.captured_values.push_back(id);
    return id;
  }

  Arg arg_of(const IValue& v) {
    Arg a;
    if (v.is_tensor()) {
      if (!v.to_tensor().defined()) {
        a.kind = Arg::Kind::Constant;
        return a;
      }
      a.kind = Arg::Kind::Value;
      a.value = value_of(v.to_tensor());
    } else if (v.is_tensor_list()) {
      a.kind = Arg::Kind::ValueList;
      for (const auto& t : v.to_tensor_list()) a.values.push_back(value_of(t));
    } else if (v.is_optional_tensor_list()) {
      a.kind = Arg::Kind::ValueList;
      a.optional_list = true;
      for (const auto& t : v.to_optional_tensor_list())
        a.values.push_back(t && t->defined() ? value_of(*t) : -1);
    } else if (v.is_symint() && v.to_symint().is_symbolic()) {
      a.kind = Arg::Kind::Sym;
      a.expr = g_.env->expr_of(v.to_symint());
    } else if (v.is_symint_list() && any_symbolic(v.to_symint_list())) {
      a.kind = Arg::Kind::SymList;
      for (const auto& s : v.to_symint_list()) a.exprs.push_back(g_.env->expr_of(s));
    } else {
      a.kind = Arg::Kind::Constant;
      a.constant = v;
    }
    return a;
  }

  void handle(const OperatorHandle& op, Stack& stack) override {
    const auto& schema = op.schema();
    const size_t nargs = schema.arguments().size();
    const SourceLoc loc = UserLocGuard::current();
    if (loc.known()) g_.env->last_loc = loc;
    IValue* args = &stack[stack.size() - nargs];
    if (tl::is_kernel_launch(op)) {
      // A kernel launch (DESIGN.md D12): recorded as a kernel node instead of run.
      const tl::LaunchView launch = tl::launch_of(stack);
      on_launch(*launch.launcher, ArrayRef<tl::KernelArg>(launch.args.data(), launch.args.size()));
      stack.resize(stack.size() - nargs);
      return;
    }
    if (op.has_tag(kTagDataDependent)) graph_break("reading tensor data (" + op.name() + ")", loc);
    if (op.has_tag(kTagTritonOp) && !grad_inputs_) {
      // Trace into the body: its operators and kernel launches become the graph's nodes. The
      // body is the op's fake kernel; run it with this mode visible again.
      ModeGuard again(this, ModeKind::Dispatch);
      const KernelFunction& k = op.entry().kernel(DeviceType::Meta);
      k.boxed(op.entry(), k.functor, stack);
      return;
    }
    Node n;
    n.kind = op.has_tag(kTagCustomOp) ? Node::Kind::Extern : Node::Kind::Op;
    n.op = op;
    n.loc = loc;
    for (size_t i = 0; i < nargs; ++i) {
      Arg a = arg_of(args[i]);
      a.name = schema.arguments()[i].name;
      if (schema.arguments()[i].is_written() && a.kind == Arg::Kind::Value)
        n.writes.push_back(a.value);
      n.args.push_back(std::move(a));
    }
    // The shape function runs, with this mode hidden: kernels its body launches record nothing.
    try {
      op.redispatch(stack);
    } catch (const NotImplementedError& e) {
      if (op.has_tag(kTagCustomOp)) {
        graph_break("the custom operator " + op.name() +
                        " has no fake kernel to compute its result shapes "
                        "(register one with register_fake)",
                    loc);
      }
      graph_break(std::string("the operator cannot run on fake tensors: ") + e.message(), loc);
    }
    const size_t nret = schema.returns().size();
    const int index = static_cast<int>(g_.nodes.size());
    for (size_t i = 0; i < nret; ++i) {
      const IValue& r = stack[stack.size() - nret + i];
      if (r.is_tensor() && r.to_tensor().defined()) {
        const Tensor& t = r.to_tensor();
        auto it = by_impl_.find(t.impl());
        n.outputs.push_back(it != by_impl_.end() ? it->second : add_tensor(t, index));
        n.constant_outputs.emplace_back();
      } else {
        TS_CHECK(!r.is_tensor_list(), NotImplementedError)
            << "[" << op.name()
            << "] operators returning tensor lists are not supported by the graph compiler yet";
        n.outputs.push_back(-1);
        n.constant_outputs.push_back(r);
      }
    }
    g_.nodes.push_back(std::move(n));
  }

  void on_launch(const tl::Launcher& launch, ArrayRef<tl::KernelArg> args) {
    const tl::JITFunction& fn = launch.function();
    const SourceLoc loc = launch.location();
    if (loc.known()) g_.env->last_loc = loc;
    Node n;
    n.kind = Node::Kind::Kernel;
    n.kernel = &fn;
    n.loc = loc;
    // The same arguments with symbolic integers replaced by their values while tracing: the
    // launch is bound and its specialization compiled now, for the IR's write set.
    std::vector<tl::KernelArg> hinted(args.begin(), args.end());
    std::vector<bool> symbolic(args.size(), false);
    for (size_t i = 0; i < args.size(); ++i) {
      const tl::KernelArg& k = args[i];
      Arg a;
      switch (k.kind) {
        case tl::KernelArg::Kind::Tensor:
          if (!k.tensor->defined()) break;
          a.kind = Arg::Kind::Value;
          a.value = value_of(*k.tensor);
          break;
        case tl::KernelArg::Kind::Int:
          if (k.sym.is_symbolic()) {
            a.kind = Arg::Kind::Sym;
            a.expr = g_.env->expr_of(k.sym);
            hinted[i] = tl::KernelArg(g_.env->hint(a.expr), loc);
            symbolic[i] = true;
          } else {
            a.constant = IValue(k.sym.expect_int());
          }
          break;
        case tl::KernelArg::Kind::Float:
          a.constant = IValue(k.f);
          break;
        case tl::KernelArg::Kind::Bool:
          a.constant = IValue(k.i != 0);
          break;
        case tl::KernelArg::Kind::DType:
          a.constant = IValue(k.dtype);
          break;
        case tl::KernelArg::Kind::Meta:
          a.role = Arg::Role::Meta;
          a.name = std::string(k.meta.name);
          switch (k.meta.kind) {
            case tl::MetaArg::Kind::Int:
              a.constant = IValue(k.meta.i);
              break;
            case tl::MetaArg::Kind::Float:
              a.constant = IValue(k.meta.f);
              break;
            case tl::MetaArg::Kind::Bool:
              a.constant = IValue(k.meta.i != 0);
              break;
            case tl::MetaArg::Kind::DType:
              a.constant = IValue(k.meta.dtype);
              break;
          }
          break;
        case tl::KernelArg::Kind::Option:
          a.role = k.option.kind == tl::LaunchOption::Kind::NumWarps ? Arg::Role::NumWarps
                                                                     : Arg::Role::NumStages;
          a.name = a.role == Arg::Role::NumWarps ? "num_warps" : "num_stages";
          a.constant = IValue(k.option.value);
          break;
      }
      n.args.push_back(std::move(a));
    }
    // An autotuned or heuristic launch: one variant per config, heuristics evaluated now (a
    // heuristic that reads a size specializes it, with a guard). All variants are compiled in one
    // batch; the tuning itself happens on the first call with real tensors, once per key.
    const tl::VariantSource* tuned = tl::variant_source(launch);
    std::vector<tl::Variant> cands(1);
    if (tuned) cands = *tuned->variants(args, loc);
    std::vector<std::vector<tl::KernelArg>> cand_args;
    SmallVector<tl::KernelArg, 16> with;
    for (const auto& c : cands) {
      tl::with_variant(ArrayRef<tl::KernelArg>(hinted.data(), hinted.size()), c, loc, with);
      cand_args.emplace_back(with.begin(), with.end());
    }
    tl::PreparedVariants prepared(fn, std::move(cand_args), loc, /*tolerate_failures=*/tuned);
    prepared.build();
    const auto& params = fn.params();
    // Positional arguments -> parameters (as the binding assigns them), for symbolic grid meta.
    std::vector<int> param_of(args.size(), -1);
    {
      std::vector<bool> set(params.size(), false);
      size_t pos = 0;
      for (size_t i = 0; i < args.size(); ++i) {
        if (args[i].kind == tl::KernelArg::Kind::Option) continue;
        if (args[i].kind == tl::KernelArg::Kind::Meta) {
          for (size_t p = 0; p < params.size(); ++p) {
            if (params[p].name == args[i].meta.name) set[p] = true;
          }
          continue;
        }
        while (pos < set.size() && set[pos]) ++pos;
        if (pos < set.size()) {
          param_of[i] = static_cast<int>(pos);
          set[pos] = true;
        }
      }
    }
    for (size_t j = 0; j < prepared.size(); ++j) {
      const auto& kernel = prepared.kernel(j);
      if (!kernel) continue;
      // Exact write set from the kernel's IR (the union over configs); a written argument must
      // not overlap itself.
      for (size_t p = 0; p < params.size(); ++p) {
        const Tensor* bound = prepared.param_tensor(j, p);
        if (!bound || p >= kernel->written.size() || !kernel->written[p]) continue;
        for (size_t i = 0; i < args.size(); ++i) {
          if (args[i].kind != tl::KernelArg::Kind::Tensor || hinted[i].tensor != bound) continue;
          Arg& a = n.args[i];
          if (a.written) continue;
          a.written = true;
          n.writes.push_back(a.value);
          const Tensor& t = *args[i].tensor;
          for (int64_t d = 0; d < t.dim(); ++d) {
            const int64_t size = g_.env->hint(g_.env->expr_of(t.sizes()[d]));
            const int64_t stride = g_.env->hint(g_.env->expr_of(t.strides()[d]));
            if (size > 1 && stride == 0) {
              TS_ERROR(CompileError)
                  << "[kernel " << fn.name() << "] stores through parameter '" << params[p].name
                  << "', whose tensor overlaps itself (dimension " << d
                  << " is expanded): clone it before the launch";
            }
          }
        }
      }
      // The grid, symbolically: a grid function sees symbolic integer arguments (reading one
      // specializes it, with a guard).
      tl::Grid grid;
      if (launch.grid_fn()) {
        tl::Meta meta = kernel->meta;
        for (size_t i = 0; i < args.size(); ++i) {
          if (!symbolic[i] || param_of[i] < 0 ||
              static_cast<size_t>(param_of[i]) >= meta.entries.size())
            continue;
          meta.entries[static_cast<size_t>(param_of[i])].symbolic = args[i].sym;
          meta.entries[static_cast<size_t>(param_of[i])].is_symbolic = true;
        }
        grid = (*launch.grid_fn())(meta);
      } else {
        grid = launch.grid();
      }
      Node::Variant v;
      v.cand = cands[j];
      for (int d = 0; d < 3; ++d) v.grid[d] = g_.env->expr_of(grid.dims[d]);
      n.variants.push_back(std::move(v));
    }
    if (n.variants.empty()) {
      std::string all;
      for (size_t c = 0; c < cands.size(); ++c)
        all += "\n  candidate " + std::to_string(c) + ": " + prepared.error(c);
      TS_ERROR(CompileError) << "[kernel " << fn.name()
                             << "] every autotuning config failed:" << all;
    }
    for (int d = 0; d < 3; ++d) n.grid[d] = n.variants[0].grid[d];
    if (tuned) {
      n.tuned = tuned->shared();
    } else {
      n.variants.clear();
    }
    g_.nodes.push_back(std::move(n));
  }

 private:
  int storage_of(const Tensor& t) {
    auto [it, fresh] = storages_.emplace(t.impl()->storage(), static_cast<int>(storages_.size()));
    return it->second;
  }

  Graph& g_;
  bool grad_inputs_;
  std::unordered_map<const TensorImpl*, int> by_impl_;
  std::unordered_map<const StorageImpl*, int> storages_;
  std::vector<Tensor> keep_;
};

// Installs the tracer for the duration of a trace.
struct TraceScope {
  TraceScope(Tracer& t) : mode(&t, ModeKind::Dispatch) {}
  ModeGuard mode;
};

// ---- guards
// ---------------------------------------------------------------------------------------

/** What one argument leaf must look like. */
struct LeafGuard {
  bool tensor = false;
  IValue constant;  ///< non-tensor leaves: the exact value
  DType dtype = DType::Float32;
  Device device;
  int64_t dim = 0;
  bool requires_grad = false;
  bool contiguous = false;       ///< dynamic sizes: strides must be contiguous
  std::vector<int64_t> sizes;    ///< static size, or -1 when symbolic
  std::vector<int> size_symbol;  ///< symbol index per dim (-1 static)
  std::vector<int64_t> strides;  ///< static strides (empty when `contiguous`)
  int64_t offset = 0;
  const void* storage = nullptr;  ///< captured tensors: identity
  uint64_t key = 0;               ///< dtype, device, rank and grad packed (one compare)
};

/** dtype, device, rank, autograd flag and "plain sizes with data" in one word. */
inline uint64_t pack_key(const TensorImpl* t) {
  const Device d = t->device();
  const uint64_t flags = t->flags();
  const bool plain = !t->has_symbolic_shape() && t->has_data();
  return static_cast<uint64_t>(t->dtype()) | (static_cast<uint64_t>(d.type()) << 8) |
         (static_cast<uint64_t>(static_cast<uint8_t>(d.index())) << 16) |
         (static_cast<uint64_t>(t->dim()) << 24) |
         (static_cast<uint64_t>((flags & kTensorAutograd) != 0) << 40) |
         (static_cast<uint64_t>(plain) << 41);
}

std::string leaf_name(size_t i) {
  return "arg" + std::to_string(i);
}

}  // namespace

// ---- a compiled graph and its guards
// -------------------------------------------------------------------

struct Entry {
  std::unique_ptr<Graph> graph;
  std::vector<LeafGuard> leaves;
  std::vector<std::pair<size_t, size_t>> alias_pairs;  ///< leaf pairs that shared storage
  std::vector<std::pair<size_t, int>> symbol_sources;  ///< per symbol: (leaf, dim)
  std::unique_ptr<sym::Program> program;  ///< env guards first, then every expression the run needs
  size_t num_guards = 0;
  std::unordered_map<sym::ExprPtr, size_t> slot;  ///< expression -> program output
  std::vector<size_t> tensor_leaves;              ///< positions of the tensor arguments

  struct Scratch {
    std::vector<int64_t> symbols, values;
  };

  /** An integer known at call start: a constant or an output of `program`. */
  struct SymRef {
    int64_t constant = 0;
    int64_t slot = -1;
    int64_t get(const Scratch& s) const {
      return slot < 0 ? constant : s.values[static_cast<size_t>(slot)];
    }
  };
  /** A kernel node's launch arguments, built once: constants, metas and options filled in; tensors
   * and symbolic integers patched per call. */
  struct KernelPlan {
    std::vector<tl::KernelArg> args;
    std::vector<std::pair<size_t, int>> tensors;  ///< (argument, value id)
    std::vector<std::pair<size_t, SymRef>> ints;  ///< (argument, integer)
    SymRef grid[3];
    std::vector<std::array<SymRef, 3>> variant_grids;  ///< autotuned launches: per candidate
    std::vector<tl::Variant> cands;
  };
  std::vector<KernelPlan> kernel_plans;  ///< per node (empty for other nodes)

  /** An autotuned launch: the tuner picks a candidate for the real arguments (tuning on its first
   * call for a key), then the candidate's kernel runs with its grid. */
  void run_tuned(const Node& n, const KernelPlan& plan, ArrayRef<tl::KernelArg> args,
                 const Scratch& s) const {
    auto run = [&](size_t i) {
      SmallVector<tl::KernelArg, 16> a;
      tl::with_variant(args, plan.cands[i], n.loc, a);
      const auto& gr = plan.variant_grids[i];
      const tl::Grid grid({SymInt(gr[0].get(s)), SymInt(gr[1].get(s)), SymInt(gr[2].get(s))},
                          n.loc);
      tl::Launcher(*n.kernel, tl::LaunchGrid(grid, n.loc))
          .run_kernel(ArrayRef<tl::KernelArg>(a.data(), a.size()));
    };
    n.tuned->run(args, plan.cands, run, n.loc);
  }

  SymRef ref_of(sym::ExprPtr e) const {
    if (auto c = e->constant()) return {*c, -1};
    return {0, static_cast<int64_t>(slot.at(e))};
  }

  void plan_kernels() {
    static const Tensor undefined;
    const Graph& g = *graph;
    kernel_plans.resize(g.nodes.size());
    for (size_t k = 0; k < g.nodes.size(); ++k) {
      const Node& n = g.nodes[k];
      if (n.dead || n.kind != Node::Kind::Kernel) continue;
      KernelPlan& plan = kernel_plans[k];
      for (const Arg& a : n.args) {
        const size_t i = plan.args.size();
        switch (a.role) {
          case Arg::Role::Meta: {
            const IValue& c = a.constant;
            plan.args.emplace_back(c.is_bool()    ? tl::meta(a.name, c.to_bool())
                                   : c.is_int()   ? tl::meta(a.name, c.to_int())
                                   : c.is_dtype() ? tl::meta(a.name, c.to_dtype())
                                                  : tl::meta(a.name, c.to_double()),
                                   n.loc);
            continue;
          }
          case Arg::Role::NumWarps:
            plan.args.emplace_back(tl::num_warps(a.constant.to_int()), n.loc);
            continue;
          case Arg::Role::NumStages:
            plan.args.emplace_back(tl::num_stages(a.constant.to_int()), n.loc);
            continue;
          case Arg::Role::Positional:
            break;
        }
        switch (a.kind) {
          case Arg::Kind::Value:
            plan.args.emplace_back(undefined, n.loc);
            plan.tensors.emplace_back(i, a.value);
            break;
          case Arg::Kind::Sym:
            plan.args.emplace_back(SymInt(0), n.loc);
            plan.ints.emplace_back(i, ref_of(a.expr));
            break;
          case Arg::Kind::Constant: {
            const IValue& c = a.constant;
            if (c.is_bool()) {
              plan.args.emplace_back(c.to_bool(), n.loc);
            } else if (c.is_int()) {
              plan.args.emplace_back(c.to_int(), n.loc);
            } else if (c.is_double()) {
              plan.args.emplace_back(c.to_double(), n.loc);
            } else if (c.is_dtype()) {
              plan.args.emplace_back(c.to_dtype(), n.loc);
            } else {
              plan.args.emplace_back(undefined, n.loc);  // an undefined tensor argument
            }
            break;
          }
          default:
            TS_INTERNAL_ASSERT(false) << "a list argument to a kernel";
        }
      }
      for (int d = 0; d < 3; ++d) plan.grid[d] = ref_of(n.grid[d]);
      for (const auto& v : n.variants) {
        plan.variant_grids.push_back({ref_of(v.grid[0]), ref_of(v.grid[1]), ref_of(v.grid[2])});
        plan.cands.push_back(v.cand);
      }
    }
  }

  int64_t value_of(sym::ExprPtr e, const Scratch& s) const {
    if (auto c = e->constant()) return *c;
    return s.values[slot.at(e)];
  }

  /** Checks every guard; on failure writes the first failed one to `why` (when given). */
  bool match(const std::vector<IValue>& args, Scratch& s, std::string* why) const {
    auto fail = [&](const std::string& msg) {
      if (why) *why = msg;
      return false;
    };
    if (args.size() != leaves.size()) return fail("the arguments' structure changed");
    s.symbols.assign(symbol_sources.size(), -1);  // unbound (sizes bound to symbols are >= 2)
    for (size_t i = 0; i < leaves.size(); ++i) {
      const LeafGuard& g = leaves[i];
      const IValue& a = args[i];
      if (!g.tensor) {
        if (a.is_tensor() || !ivalue_equal(a, g.constant)) {
          if (!why) return false;
          std::ostringstream os;
          os << leaf_name(i) << " == " << g.constant << " failed (got " << a << ")";
          return fail(os.str());
        }
        continue;
      }
      if (!a.is_tensor() || !a.to_tensor().defined()) return fail(leaf_name(i) + " is a tensor");
      const Tensor& t = a.to_tensor();
      const TensorImpl* impl = t.impl();
      if (__builtin_expect(pack_key(impl) == g.key, 1)) {
        // dtype, device, rank and requires_grad as traced; sizes plain: compare the raw words.
        const SymInt* sz = impl->sizes().data();
        for (int64_t d = 0; d < g.dim; ++d) {
          const int sym_index = g.size_symbol[static_cast<size_t>(d)];
          const int64_t v = sz[d].raw();
          if (sym_index < 0) {
            if (v != g.sizes[static_cast<size_t>(d)]) goto slow;
          } else {
            int64_t& bound = s.symbols[static_cast<size_t>(sym_index)];
            if (v < 2 || (bound >= 0 && bound != v)) goto slow;
            bound = v;
          }
        }
        if (g.contiguous) {
          if (!impl->is_contiguous()) goto slow;
        } else {
          const SymInt* st = impl->strides().data();
          for (int64_t d = 0; d < g.dim; ++d) {
            if (st[d].raw() != g.strides[static_cast<size_t>(d)]) goto slow;
          }
        }
        if (impl->storage_offset().raw() != g.offset) goto slow;
        continue;
      }
    slow:
      if (!why) return false;
      if (t.dtype() != g.dtype) {
        return fail(leaf_name(i) + ".dtype == " + dtype_name(g.dtype) + " failed (got " +
                    dtype_name(t.dtype()) + ")");
      }
      if (!(t.device() == g.device))
        return fail(leaf_name(i) + ".device == " + g.device.str() + " failed");
      if (impl->dim() != g.dim) {
        return fail(leaf_name(i) + ".dim() == " + std::to_string(g.dim) + " failed (got " +
                    std::to_string(impl->dim()) + ")");
      }
      if (t.requires_grad() != g.requires_grad) {
        return fail(leaf_name(i) + ".requires_grad == " + (g.requires_grad ? "true" : "false") +
                    " failed");
      }
      if (impl->has_symbolic_shape() || !impl->has_data())
        return fail(leaf_name(i) + " has data and plain sizes");
      const auto sizes = impl->int_sizes();
      for (int64_t d = 0; d < g.dim; ++d) {
        const int sym_index = g.size_symbol[static_cast<size_t>(d)];
        auto dn = [&] { return leaf_name(i) + ".size(" + std::to_string(d) + ")"; };
        if (sym_index < 0) {
          if (sizes[d] != g.sizes[static_cast<size_t>(d)]) {
            return fail(dn() + " == " + std::to_string(g.sizes[static_cast<size_t>(d)]) +
                        " failed (got " + std::to_string(sizes[d]) + ")");
          }
          continue;
        }
        if (sizes[d] < 2)
          return fail(dn() + " >= 2 failed (got " + std::to_string(sizes[d]) +
                      "; sizes 0 and 1 are specialized)");
        const size_t s_idx = static_cast<size_t>(sym_index);
        if (s.symbols[s_idx] < 0) {
          s.symbols[s_idx] = sizes[d];
        } else if (s.symbols[s_idx] != sizes[d]) {
          return fail(dn() + " == " + graph->env->symbols[s_idx].source + " failed (got " +
                      std::to_string(sizes[d]) + " and " + std::to_string(s.symbols[s_idx]) + ")");
        }
      }
      if (g.contiguous) {
        if (!impl->is_contiguous()) return fail(leaf_name(i) + " is contiguous");
      } else {
        const auto strides = impl->int_strides();
        for (int64_t d = 0; d < g.dim; ++d) {
          if (strides[d] != g.strides[static_cast<size_t>(d)]) {
            return fail(leaf_name(i) + ".stride(" + std::to_string(d) +
                        ") == " + std::to_string(g.strides[static_cast<size_t>(d)]) +
                        " failed (got " + std::to_string(strides[d]) + ")");
          }
        }
      }
      if (impl->int_offset() != g.offset) {
        return fail(leaf_name(i) + ".storage_offset() == " + std::to_string(g.offset) +
                    " failed (got " + std::to_string(impl->int_offset()) + ")");
      }
    }
    // Tensor arguments share memory exactly as when traced.
    for (size_t a = 0; a < tensor_leaves.size(); ++a) {
      const StorageImpl* sa = args[tensor_leaves[a]].to_tensor().impl()->storage();
      for (size_t b = a + 1; b < tensor_leaves.size(); ++b) {
        const bool shares = sa == args[tensor_leaves[b]].to_tensor().impl()->storage();
        const bool traced = std::find(alias_pairs.begin(), alias_pairs.end(),
                                      std::pair<size_t, size_t>{
                                          tensor_leaves[a], tensor_leaves[b]}) != alias_pairs.end();
        if (shares != traced) {
          return fail(leaf_name(tensor_leaves[a]) + " and " + leaf_name(tensor_leaves[b]) +
                      (traced ? " share memory" : " do not share memory") + " failed");
        }
      }
    }
    if (program->size() == 0) return true;
    s.values.resize(program->num_outputs());
    if (!program->run(s.symbols.data(), s.values.data()))
      return fail("a size expression divides by zero");
    for (size_t k = 0; k < num_guards; ++k) {
      if (s.values[k] == 0) {
        const auto& gd = graph->env->guards[k];
        std::ostringstream os;
        os << graph->env->ctx.str(gd.condition) << " failed (" << gd.why;
        if (gd.loc.known())
          os << (gd.why.find("after the call at") != std::string::npos ? " " : ", guard from ")
             << gd.loc;
        os << ")";
        return fail(os.str());
      }
    }
    return true;
  }

  static bool ivalue_equal(const IValue& a, const IValue& b) {
    if (a.is_none() || b.is_none()) return a.is_none() && b.is_none();
    if (a.is_bool() && b.is_bool()) return a.to_bool() == b.to_bool();
    if (a.is_int() && b.is_int()) return a.to_int() == b.to_int();
    if (a.is_double() && b.is_double()) return a.to_double() == b.to_double();
    return false;
  }

  /** Runs the graph on real arguments (after `match`). */
  std::vector<IValue> run(const std::vector<IValue>& args, const Scratch& s) const {
    const Graph& g = *graph;
    SmallVector<Tensor, 16> vals(g.values.size());
    Stack st;  // reused by every operator node
    for (size_t i = 0; i < g.inputs.size(); ++i) {
      if (g.inputs[i] >= 0) vals[static_cast<size_t>(g.inputs[i])] = args[i].to_tensor();
    }
    for (size_t c = 0; c < g.captured.size(); ++c)
      vals[static_cast<size_t>(g.captured_values[c])] = g.captured[c];
    auto sym_value = [&](sym::ExprPtr e) { return value_of(e, s); };
    for (const Node& n : g.nodes) {
      if (n.dead) continue;
      UserLocGuard loc(n.loc);
      if (n.kind == Node::Kind::Kernel) {
        const KernelPlan& plan = kernel_plans[static_cast<size_t>(&n - g.nodes.data())];
        SmallVector<tl::KernelArg, 16> kargs(
            ArrayRef<tl::KernelArg>(plan.args.data(), plan.args.size()));
        for (const auto& [i, v] : plan.tensors) kargs[i].tensor = &vals[static_cast<size_t>(v)];
        for (const auto& [i, r] : plan.ints) kargs[i].sym = SymInt(r.get(s));
        if (n.tuned) {
          run_tuned(n, plan, ArrayRef<tl::KernelArg>(kargs.data(), kargs.size()), s);
          continue;
        }
        tl::Grid grid(
            {SymInt(plan.grid[0].get(s)), SymInt(plan.grid[1].get(s)), SymInt(plan.grid[2].get(s))},
            n.loc);
        tl::Launcher(*n.kernel, tl::LaunchGrid(grid, n.loc))
            .run(ArrayRef<tl::KernelArg>(kargs.data(), kargs.size()));
        continue;
      }
      st.clear();
      st.reserve(n.args.size());
      for (const Arg& a : n.args) {
        switch (a.kind) {
          case Arg::Kind::Value:
            st.emplace_back(vals[static_cast<size_t>(a.value)]);
            break;
          case Arg::Kind::ValueList:
            if (a.optional_list) {
              std::vector<std::optional<Tensor>> l;
              for (int v : a.values)
                l.push_back(v < 0 ? std::nullopt
                                  : std::optional<Tensor>(vals[static_cast<size_t>(v)]));
              st.emplace_back(std::move(l));
            } else {
              std::vector<Tensor> l;
              for (int v : a.values) l.push_back(vals[static_cast<size_t>(v)]);
              st.emplace_back(std::move(l));
            }
            break;
          case Arg::Kind::Sym:
            st.emplace_back(SymInt(sym_value(a.expr)));
            break;
          case Arg::Kind::SymList: {
            std::vector<SymInt> l;
            for (auto* e : a.exprs) l.emplace_back(sym_value(e));
            st.emplace_back(std::move(l));
            break;
          }
          case Arg::Kind::Constant:
            st.push_back(a.constant);
            break;
        }
      }
      n.op.call(st);
      for (size_t k = 0; k < n.outputs.size(); ++k) {
        if (n.outputs[k] >= 0) vals[static_cast<size_t>(n.outputs[k])] = st[k].to_tensor();
      }
    }
    std::vector<IValue> out;
    for (size_t i = 0; i < g.outputs.size(); ++i) {
      if (g.outputs[i] >= 0) {
        out.emplace_back(vals[static_cast<size_t>(g.outputs[i])]);
      } else {
        out.push_back(g.constant_outputs[i]);
      }
    }
    return out;
  }
};

// ---- the compiled function
// ------------------------------------------------------------------------------

/** The guarded graphs of one compiled function: an append-only list that callers read without a
 * lock while one thread at a time appends (under the function's miss lock). Readers load the size,
 * then the array; an array is published before any size that counts its new slot, and replaced
 * arrays are kept until the list dies, so a reader never sees a slot that is not filled. */
class EntryList {
 public:
  size_t size() const { return size_.load(std::memory_order_acquire); }
  const Entry& operator[](size_t i) const { return *items_.load(std::memory_order_acquire)[i]; }
  const Entry& back() const { return (*this)[size() - 1]; }

  /** Appends (the caller holds the miss lock). */
  const Entry& push_back(std::unique_ptr<Entry> e) {
    const size_t n = size_.load(std::memory_order_relaxed);
    if (n == capacity_) {
      capacity_ = capacity_ ? 2 * capacity_ : 4;
      auto grown = std::make_unique<Entry*[]>(capacity_);
      for (size_t i = 0; i < n; ++i) grown[i] = arrays_.back()[i];
      items_.store(grown.get(), std::memory_order_release);
      arrays_.push_back(std::move(grown));
    }
    Entry* raw = e.get();
    owned_.push_back(std::move(e));
    arrays_.back()[n] = raw;
    size_.store(n + 1, std::memory_order_release);
    return *raw;
  }

 private:
  std::atomic<Entry* const*> items_{nullptr};
  std::atomic<size_t> size_{0};
  size_t capacity_ = 0;
  std::vector<std::unique_ptr<Entry*[]>> arrays_;  ///< the current one last
  std::vector<std::unique_ptr<Entry>> owned_;
};

/** One call's scratch (guard symbols, size and grid values) from a per-thread stack: a compiled
 * function called from inside another's graph (a custom op's kernel) gets a level of its own.
 * Levels are allocated once per depth, so a hot call allocates nothing. */
struct ScratchLease {
  ScratchLease() : scratch(acquire()) {}
  ~ScratchLease() { --stack().depth; }
  ScratchLease(const ScratchLease&) = delete;
  ScratchLease& operator=(const ScratchLease&) = delete;
  Entry::Scratch& scratch;

 private:
  struct Stack {
    std::vector<std::unique_ptr<Entry::Scratch>> levels;
    size_t depth = 0;
  };
  static Stack& stack() {
    thread_local Stack s;
    return s;
  }
  static Entry::Scratch& acquire() {
    Stack& s = stack();
    if (s.depth == s.levels.size()) s.levels.push_back(std::make_unique<Entry::Scratch>());
    return *s.levels[s.depth++];
  }
};

class CompiledFunction {
 public:
  CompiledFunction(CompileOptions o, Traced fn, SourceLoc loc)
      : opts_(std::move(o)), fn_(std::move(fn)), loc_(loc) {
    if (opts_.name.empty()) opts_.name = "compiled function";
    for (auto [leaf, dim] : opts_.dynamic_dims) dynamic_.insert({leaf, dim});
  }

  std::vector<IValue> call(const std::vector<IValue>& args) {
    if (eager_.load(std::memory_order_acquire)) return fn_(args);
    ScratchLease lease;  // this call's own sizes and grids (a graph node may call another)
    Entry::Scratch& s = lease.scratch;
    const size_t seen = entries_.size();
    for (size_t i = 0; i < seen; ++i) {
      if (const Entry& e = entries_[i]; e.match(args, s, nullptr)) return e.run(args, s);
    }
    // A miss: one thread at a time explains it, learns dynamic dimensions and compiles again.
    std::unique_lock<std::recursive_mutex> lock(miss_mutex_);  // recursive: fn may call itself
    if (eager_.load(std::memory_order_relaxed)) {
      lock.unlock();
      return fn_(args);
    }
    for (size_t i = seen; i < entries_.size(); ++i) {  // compiled meanwhile by another thread
      if (const Entry& e = entries_[i]; e.match(args, s, nullptr)) {
        lock.unlock();
        return e.run(args, s);
      }
    }
    std::string why;
    if (entries_.size() > 0) {
      entries_.back().match(args, s, &why);
      ++recompiles_;
      if (knobs().log_enabled("recompiles")) {
        log("recompiles", opts_.name + " #" + std::to_string(entries_.size() + 1) + ": " + why);
      }
      if (recompiles_ > opts_.recompile_limit) {
        TS_CHECK(!opts_.fullgraph, CompileError)
            << "[" << opts_.name
            << "] recompiled more than recompile_limit=" << opts_.recompile_limit
            << " times; the last guard that failed: " << why;
        warn_once("tessera::compile: " + opts_.name +
                  " hit recompile_limit=" + std::to_string(opts_.recompile_limit) +
                  " (last failed guard: " + why + "); running it eagerly from now on");
        eager_.store(true, std::memory_order_release);
        lock.unlock();
        return fn_(args);
      }
      if (opts_.dynamic != false) learn_dynamic(entries_.back(), args);
    }
    std::unique_ptr<Entry> entry;
    try {
      entry = trace(args);
    } catch (const GraphBreakError& e) {
      if (opts_.fullgraph)
        throw CompileError("[" + opts_.name + "] " + e.message() + " (fullgraph=true)",
                           e.user_loc());
      log("graph_breaks", opts_.name + ": " + e.what() + "; running the function eagerly");
      eager_.store(true, std::memory_order_release);
      lock.unlock();
      return fn_(args);
    }
    TS_INTERNAL_ASSERT(entry->match(args, s, &why))
        << opts_.name << ": a fresh graph fails its own guards: " << why;
    const Entry& e = entries_.push_back(std::move(entry));
    lock.unlock();
    return e.run(args, s);
  }

  bool guards_pass(const std::vector<IValue>& args) const {
    ScratchLease lease;
    const size_t n = entries_.size();
    for (size_t i = 0; i < n; ++i) {
      if (entries_[i].match(args, lease.scratch, nullptr)) return true;
    }
    return false;
  }

  Stats stats() const {
    std::lock_guard<std::recursive_mutex> lock(miss_mutex_);
    Stats st;
    st.graphs = static_cast<int>(entries_.size());
    st.recompiles = recompiles_;
    st.eager = eager_.load();
    if (entries_.size() > 0) st.last_graph = entries_.back().graph->str();
    return st;
  }

 private:
  void learn_dynamic(const Entry& last, const std::vector<IValue>& args) {
    size_t tensor_index = 0;
    for (size_t i = 0; i < last.leaves.size() && i < args.size(); ++i) {
      const LeafGuard& g = last.leaves[i];
      if (!g.tensor) continue;
      const size_t k = tensor_index++;
      if (!args[i].is_tensor() || !args[i].to_tensor().defined()) continue;
      const Tensor& t = args[i].to_tensor();
      if (t.dim() != g.dim) continue;
      for (int64_t d = 0; d < g.dim; ++d) {
        const int64_t now = t.impl()->int_sizes()[d];
        if (g.size_symbol[static_cast<size_t>(d)] < 0 && now != g.sizes[static_cast<size_t>(d)]) {
          dynamic_.insert({static_cast<int>(k), static_cast<int>(d)});
        }
      }
    }
  }

  std::unique_ptr<Entry> trace(const std::vector<IValue>& args) {
    auto entry = std::make_unique<Entry>();
    entry->graph = std::make_unique<Graph>();
    Graph& g = *entry->graph;
    g.name = opts_.name;
    g.env = IntrusivePtr<ShapeEnv>(new ShapeEnv());
    ShapeEnv& env = *g.env;
    // With inputs that require grad, triton_ops stay whole so that their autograd formulas
    // apply when the graph runs (autograd under compile is the next slice's).
    bool grad_inputs = false;
    for (const IValue& a : args)
      grad_inputs = grad_inputs ||
                    (a.is_tensor() && a.to_tensor().defined() && a.to_tensor().requires_grad());
    grad_inputs = grad_inputs && grad_enabled();
    Tracer tracer(g, grad_inputs);
    std::vector<IValue> fakes;
    std::map<int64_t, SymInt> duck;  // equal sizes share a symbol (duck sizing)
    size_t tensor_index = 0;
    // Arguments sharing memory are traced as views of one fake storage, with static sizes; the
    // guards then require the same sharing.
    std::map<const StorageImpl*, int> storage_uses;
    for (const IValue& a : args) {
      if (a.is_tensor() && a.to_tensor().defined() && a.to_tensor().has_data())
        ++storage_uses[a.to_tensor().impl()->storage()];
    }
    std::map<const StorageImpl*, Tensor> shared_fakes;
    for (size_t i = 0; i < args.size(); ++i) {
      const IValue& a = args[i];
      LeafGuard lg;
      if (!a.is_tensor() || !a.to_tensor().defined()) {
        lg.constant = a.is_tensor() ? IValue() : a;
        entry->leaves.push_back(lg);
        fakes.push_back(a);
        g.inputs.push_back(-1);
        continue;
      }
      const Tensor& t = a.to_tensor();
      TS_CHECK(t.has_data() && !t.impl()->has_symbolic_shape(), CompileError)
          << "[" << opts_.name << "] argument " << i << " has no data (compile real tensors)";
      const size_t k = tensor_index++;
      lg.tensor = true;
      lg.dtype = t.dtype();
      lg.device = t.device();
      lg.dim = t.dim();
      lg.requires_grad = t.requires_grad();
      lg.offset = t.impl()->int_offset();
      lg.key = pack_key(t.impl());
      const auto sizes = t.impl()->int_sizes();
      const bool aliased = storage_uses[t.impl()->storage()] > 1;
      const bool contiguous = t.is_contiguous();
      SymDimVector fsizes;
      for (int64_t d = 0; d < t.dim(); ++d) {
        const bool dyn =
            !aliased && contiguous && sizes[d] >= 2 &&
            (opts_.dynamic == true || dynamic_.count({static_cast<int>(k), static_cast<int>(d)}));
        lg.sizes.push_back(dyn ? -1 : sizes[d]);
        if (!dyn) {
          lg.size_symbol.push_back(-1);
          fsizes.push_back(sizes[d]);
          continue;
        }
        auto it = duck.find(sizes[d]);
        if (it == duck.end()) {
          SymInt s = env.create_symbol(leaf_name(i) + ".size(" + std::to_string(d) + ")", sizes[d]);
          it = duck.emplace(sizes[d], s).first;
          entry->symbol_sources.push_back({i, static_cast<int>(d)});
        }
        const auto* node = dynamic_cast<SymExprNode*>(it->second.node().get());
        lg.size_symbol.push_back(node->expr()->symbol);
        fsizes.push_back(it->second);
      }
      lg.contiguous = contiguous && std::any_of(lg.size_symbol.begin(), lg.size_symbol.end(),
                                                [](int s) { return s >= 0; });
      if (!lg.contiguous) {
        for (const auto& st : t.impl()->int_strides()) lg.strides.push_back(st);
      }
      Tensor fake;
      if (aliased) {
        const StorageImpl* st = t.impl()->storage();
        auto it = shared_fakes.find(st);
        if (it == shared_fakes.end()) {
          const int64_t elems =
              st->nbytes().expect_int() / static_cast<int64_t>(itemsize(t.dtype()));
          it = shared_fakes
                   .emplace(st,
                            detail::make_fake(SymDimVector{SymInt(elems)}, t.dtype(), t.device()))
                   .first;
        }
        TS_CHECK(it->second.dtype() == t.dtype(), NotImplementedError)
            << "[" << opts_.name << "] argument " << i
            << " shares memory with an argument of another dtype; the graph compiler does not "
               "support that yet";
        SymDimVector fstrides;
        for (const auto& st2 : t.impl()->int_strides()) fstrides.push_back(st2);
        fake = detail::make_view(it->second, fsizes, fstrides, lg.offset);
        entry->leaves.push_back(lg);
        g.inputs.push_back(tracer.add_tensor(fake, -1));
        fakes.emplace_back(fake);
        continue;
      }
      fake = lg.contiguous ? detail::make_fake(fsizes, t.dtype(), t.device())
                           : detail::make_fake(fsizes, t.dtype(), t.device(), t.strides());
      if (lg.offset != 0 || !lg.contiguous) {
        fake = detail::make_view(fake, fake.sizes(), lg.contiguous ? fake.strides() : t.strides(),
                                 lg.offset);
      }
      entry->leaves.push_back(lg);
      g.inputs.push_back(tracer.add_tensor(fake, -1));
      fakes.emplace_back(fake);
    }
    for (size_t i = 0; i < entry->leaves.size(); ++i) {
      if (entry->leaves[i].tensor) entry->tensor_leaves.push_back(i);
    }
    // Aliasing among tensor arguments.
    for (size_t i = 0; i < args.size(); ++i) {
      for (size_t j = i + 1; j < args.size(); ++j) {
        if (!entry->leaves[i].tensor || !entry->leaves[j].tensor) continue;
        if (args[i].to_tensor().impl()->storage() == args[j].to_tensor().impl()->storage()) {
          entry->alias_pairs.push_back({i, j});
        }
      }
    }
    std::vector<IValue> outs;
    try {
      TraceScope scope(tracer);
      outs = fn_(fakes);
    } catch (const DataError& e) {
      // item(), data_ptr() and the like on a traced (fake) tensor: a graph break at that line.
      graph_break("reading tensor data (" + e.message() + ")", e.user_loc());
    }
    for (const IValue& o : outs) {
      if (o.is_tensor() && o.to_tensor().defined()) {
        g.outputs.push_back(tracer.value_of(o.to_tensor()));
        g.constant_outputs.emplace_back();
      } else {
        g.outputs.push_back(-1);
        g.constant_outputs.push_back(o.is_tensor() ? IValue() : o);
      }
    }
    g.verify();
    g.eliminate_dead_code();
    g.eliminate_common_subexpressions();
    g.eliminate_dead_code();
    g.verify();
    // One program for the guards and every expression the run needs.
    std::vector<sym::ExprPtr> roots;
    for (const auto& gd : env.guards) roots.push_back(gd.condition);
    entry->num_guards = roots.size();
    auto need = [&](sym::ExprPtr e) {
      if (!e || e->constant() || entry->slot.count(e)) return;
      entry->slot[e] = roots.size();
      roots.push_back(e);
    };
    for (const Node& n : g.nodes) {
      if (n.dead) continue;
      for (const Arg& a : n.args) {
        if (a.kind == Arg::Kind::Sym) need(a.expr);
        for (auto* e : a.exprs) need(e);
      }
      for (auto* e : n.grid) need(e);
      for (const auto& v : n.variants) {
        for (auto* e : v.grid) need(e);
      }
    }
    entry->program = std::make_unique<sym::Program>(env.ctx, roots);
    entry->plan_kernels();
    if (knobs().log_enabled("graph")) log("graph", g.str());
    return entry;
  }

  CompileOptions opts_;
  Traced fn_;
  SourceLoc loc_;
  EntryList entries_;  ///< read without a lock; appended under miss_mutex_
  mutable std::recursive_mutex miss_mutex_;
  std::set<std::pair<int, int>> dynamic_;  ///< under miss_mutex_
  int recompiles_ = 0;                     ///< under miss_mutex_
  std::atomic<bool> eager_{false};
};

std::shared_ptr<CompiledFunction> make_compiled(CompileOptions options, Traced fn, SourceLoc loc) {
  return std::make_shared<CompiledFunction>(std::move(options), std::move(fn), loc);
}

std::vector<IValue> call_compiled(CompiledFunction& f, const std::vector<IValue>& args) {
  return f.call(args);
}

Stats stats(const CompiledFunction& f) {
  return f.stats();
}

bool guards_pass(const CompiledFunction& f, const std::vector<IValue>& args) {
  return f.guards_pass(args);
}

}  // namespace tessera::compile_detail
