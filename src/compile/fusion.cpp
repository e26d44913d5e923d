// Epilogue fusion into user kernels (research/graph_compiler.md §4): a pointwise op that reads a
// kernel's output W runs inside the kernel, at W's stores (tl/fused.h). Legal when
//   1. W's value before the op is dead: the op is the only node touching W's memory after the
//      kernel, and W is not a result;
//   2. the kernel neither loads nor atomically updates W, W is one argument of it, and every store
//      through W is `W + offsets` (ir::direct_stores), so the element each store writes is known;
//   3. W is dense (contiguous), and the op's other inputs broadcast to W's shape: each is read at
//      the element's own index (the #184247 rule: the epilogue reads W where it writes its result);
//   4. W comes from `empty` (elements the kernel does not store are undefined either way), or the
//      kernel stores every element (ir/coverage): a fill's value would otherwise skip the op;
//   5. the op's result has W's shape and dtype (it is stored in W's memory), its inputs are
//      computed before the kernel and not written by it or until the op.
#include <map>
#include <sstream>
#include <string>

#include "compile/graph.h"
#include "tl/fused.h"

namespace tessera::compiler {
namespace {

using ops_detail::PwOp;

struct Lowering {
  PwOp op;
  int tensors;       ///< tensor operands, first in the schema
  bool alpha;        ///< add/sub: the third argument
  bool floats_only;  ///< the op computes in floats only
};

const Lowering* lowering_of(const Node& n) {
  static const std::map<std::string, Lowering, std::less<>> kTable = {
      {"aten::relu", {PwOp::Relu, 1, false, false}},
      {"aten::neg", {PwOp::Neg, 1, false, false}},
      {"aten::abs", {PwOp::Abs, 1, false, false}},
      {"aten::exp", {PwOp::Exp, 1, false, true}},
      {"aten::log", {PwOp::Log, 1, false, true}},
      {"aten::sqrt", {PwOp::Sqrt, 1, false, true}},
      {"aten::rsqrt", {PwOp::Rsqrt, 1, false, true}},
      {"aten::sin", {PwOp::Sin, 1, false, true}},
      {"aten::cos", {PwOp::Cos, 1, false, true}},
      {"aten::tanh", {PwOp::Tanh, 1, false, true}},
      {"aten::sigmoid", {PwOp::Sigmoid, 1, false, true}},
      {"aten::erf", {PwOp::Erf, 1, false, true}},
      {"aten::silu", {PwOp::Silu, 1, false, true}},
      {"aten::gelu", {PwOp::Gelu, 1, false, true}},
      {"aten::add.Tensor", {PwOp::Add, 2, true, false}},
      {"aten::sub.Tensor", {PwOp::Sub, 2, true, false}},
      {"aten::mul.Tensor", {PwOp::Mul, 2, false, false}},
      {"aten::div.Tensor", {PwOp::Div, 2, false, true}},
      {"aten::maximum", {PwOp::Maximum, 2, false, false}},
      {"aten::minimum", {PwOp::Minimum, 2, false, false}},
  };
  if (n.dead || n.kind != Node::Kind::Op) return nullptr;
  auto it = kTable.find(n.op.name());
  return it == kTable.end() ? nullptr : &it->second;
}

class EpilogueFusion {
 public:
  explicit EpilogueFusion(Graph& g) : g_(g), ctx_(g.env->ctx) {}

  int run() {
    int fused = 0;
    for (size_t k = 0; k < g_.nodes.size(); ++k) {
      if (g_.nodes[k].dead || g_.nodes[k].kind != Node::Kind::Kernel) continue;
      // One epilogue per written argument; a fused kernel may take another (relu, then * 2).
      for (size_t a = 0; a < g_.nodes[k].args.size(); ++a) {
        while (try_fuse(k, a)) ++fused;
      }
    }
    return fused;
  }

 private:
  int storage(int v) const { return g_.storage_of(v); }
  const TensorInfo& info(int v) const { return g_.values[static_cast<size_t>(v)].tensor; }
  bool writes(const Node& n, int s) const {
    for (int w : n.writes) {
      if (storage(w) == s) return true;
    }
    return false;
  }

  // Fuses the op reading kernel k's written argument a, if one may be; notes why not on the op.
  bool try_fuse(size_t k, size_t ai) {
    Node& kernel = g_.nodes[k];
    const Arg& a = kernel.args[ai];
    in_exprs_.clear();
    if (a.kind != Arg::Kind::Value || !a.written || a.value < 0) return false;
    const int w = a.value;
    const int s = storage(w);
    const size_t e = g_.next_toucher(k, s);
    if (e == g_.nodes.size()) return false;
    Node& epi = g_.nodes[e];
    const Lowering* low = lowering_of(epi);
    if (!low) return false;
    const std::string kname = kernel.kernel->name();
    auto refuse = [&](const std::string& why) {
      epi.note = "not fused into kernel " + kname + ": " + why;
      return false;
    };
    // Rule 2.
    if (kernel.tuned) return refuse("autotuned kernels take no epilogue yet");
    if (a.read) return refuse("the kernel loads from its output");
    if (!a.direct) return refuse("a store's address is not the output pointer plus offsets");
    for (size_t i = 0; i < kernel.args.size(); ++i) {
      const Arg& o = kernel.args[i];
      if (i != ai && o.kind == Arg::Kind::Value && o.value >= 0 && storage(o.value) == s)
        return refuse(o.read ? "the kernel loads from its output"
                             : "the kernel takes its output twice");
    }
    // Rule 4.
    const Value& wv = g_.values[static_cast<size_t>(w)];
    const Node* producer = wv.producer >= 0 ? &g_.nodes[static_cast<size_t>(wv.producer)] : nullptr;
    const bool from_empty =
        producer && producer->kind == Node::Kind::Op && !producer->elide_when &&
        (producer->op.name() == "aten::empty" || producer->op.name() == "aten::empty_like" ||
         producer->op.name() == "aten::empty_strided");
    if (!from_empty && !(a.covers && ctx_.statically_known(a.covers) == true))
      return refuse("its output is filled before the kernel, which may not store every element");
    // Rule 3 (W) and 5 (the result).
    const TensorInfo& wt = info(w);
    if (!g_.contiguous(wt)) return refuse("the kernel's output is not contiguous");
    if (epi.outputs.size() != 1 || epi.outputs[0] < 0 || !epi.writes.empty())
      return refuse("the op writes in place");
    const int result = epi.outputs[0];
    const TensorInfo& rt = info(result);
    if (rt.dtype != wt.dtype) return refuse("the op's result has another dtype");
    if (rt.sizes != wt.sizes) return refuse("the op's result has another shape (broadcast)");
    if (wt.dtype == DType::Bool || (low->floats_only && !is_floating_point(wt.dtype)))
      return refuse("the op computes in another dtype than the output's");
    // Rule 1.
    for (int o : g_.outputs) {
      if (o >= 0 && storage(o) == s) return refuse("the kernel's output is also a result");
    }
    if (g_.next_toucher(e, s) != g_.nodes.size())
      return refuse("the kernel's output is used again after the op");
    // The op's operands: W, or inputs computed before the kernel (rule 5) read at W's index.
    tl::EpilogueSpec spec;
    spec.target = param_of(kernel, ai);
    spec.op = low->op;
    spec.compute = wt.dtype;
    std::vector<int> extra;
    for (int t = 0; t < low->tensors; ++t) {
      const Arg& o = epi.args[static_cast<size_t>(t)];
      if (o.kind != Arg::Kind::Value || o.value < 0) return refuse("an operand is not a tensor");
      if (o.value == w) {
        spec.operands.push_back(-1);
        continue;
      }
      if (storage(o.value) == s) return refuse("an operand is a view of the kernel's output");
      const Value& xv = g_.values[static_cast<size_t>(o.value)];
      if (xv.producer >= static_cast<int>(k))
        return refuse("an operand is computed after the kernel");
      if (xv.tensor.dtype != wt.dtype || xv.tensor.device != wt.device)
        return refuse("an operand has another dtype or device");
      for (size_t j = k; j < e; ++j) {
        if (!g_.nodes[j].dead && writes(g_.nodes[j], storage(o.value)))
          return refuse("an operand is written between the kernel and the op");
      }
      tl::EpilogueSpec::Input in;
      if (!index_map(xv.tensor, wt, in))
        return refuse("an operand does not broadcast to the output");
      spec.operands.push_back(static_cast<int>(spec.inputs.size()));
      spec.inputs.push_back(std::move(in));
      extra.push_back(o.value);
    }
    if (low->alpha) spec.alpha = epi.args[2].constant.to_scalar();
    if (epi.op.name() == "aten::gelu") {
      const IValue& approx = epi.args[1].constant;
      spec.op = approx.is_string() && approx.to_string() == "tanh" ? PwOp::GeluTanh : PwOp::Gelu;
    }
    if (epi.op.name() == "aten::div.Tensor" && !epi.args[2].constant.is_none())
      return refuse("division with a rounding mode");
    std::string short_name = epi.op.name().substr(epi.op.name().find("::") + 2);
    short_name = short_name.substr(0, short_name.find('.'));
    spec.name = kname + "+" + short_name;
    // The derived kernel: the base's arguments, the inputs, the index maps' integers.
    std::vector<Arg> ints;
    for (size_t i = 0; i < spec.inputs.size(); ++i) {
      for (auto* list : {&in_exprs_[i].first, &in_exprs_[i].second}) {
        for (sym::ExprPtr x : *list) {
          if (x->constant()) continue;
          Arg arg;
          arg.kind = Arg::Kind::Sym;
          arg.expr = x;
          ints.push_back(std::move(arg));
        }
      }
    }
    std::shared_ptr<const tl::JITFunction> derived =
        tl::make_epilogue_kernel(*kernel.kernel, std::move(spec));
    g_.derived.push_back(derived);
    kernel.kernel = derived.get();
    for (int x : extra) {
      Arg arg;
      arg.kind = Arg::Kind::Value;
      arg.value = x;
      kernel.args.push_back(std::move(arg));
    }
    for (auto& arg : ints) kernel.args.push_back(std::move(arg));
    std::ostringstream note;
    note << "epilogue " << epi.op.name() << " fused";
    if (epi.loc.known()) note << " (" << epi.loc << ")";
    kernel.note += (kernel.note.empty() ? "" : "; ") + note.str();
    kernel.fused_from.emplace_back(epi.op.name(), epi.loc);
    epi.dead = true;
    replace(result, w, e);
    return true;
  }

  // The base kernel's parameter bound to argument `ai` (positional arguments fill the parameters
  // that metas did not name, in order).
  static size_t param_of(const Node& n, size_t ai) {
    const auto& params = n.kernel->params();
    std::vector<bool> set(params.size(), false);
    for (const Arg& a : n.args) {
      if (a.role != Arg::Role::Meta) continue;
      for (size_t p = 0; p < params.size(); ++p) {
        if (params[p].name == a.name) set[p] = true;
      }
    }
    size_t pos = 0;
    for (size_t i = 0; i < n.args.size(); ++i) {
      if (n.args[i].role != Arg::Role::Positional) continue;
      while (pos < set.size() && set[pos]) ++pos;
      if (i == ai) return pos;
      set[pos] = true;
    }
    TS_INTERNAL_ASSERT(false) << "argument " << ai << " of kernel " << n.kernel->name()
                              << " binds no parameter";
    return 0;
  }

  // Where element i of W (row-major over W's sizes) is in X (broadcast to W's shape): W's
  // dimensions collapsed where X is contiguous across them too; false when X does not broadcast.
  bool index_map(const TensorInfo& x, const TensorInfo& w, tl::EpilogueSpec::Input& in) {
    const size_t rank = w.sizes.size(), xr = x.sizes.size();
    if (xr > rank) return false;
    std::vector<sym::ExprPtr> sizes, strides;
    for (size_t d = 0; d < rank; ++d) {
      sym::ExprPtr stride = ctx_.constant(0);
      if (d + xr >= rank) {
        const size_t xd = d + xr - rank;
        if (x.sizes[xd] == w.sizes[d]) {
          stride = x.strides[xd];
        } else if (x.sizes[xd]->constant() != 1) {
          return false;
        }
      }
      if (w.sizes[d]->constant() == 1) continue;
      if (!sizes.empty() && strides.back() == ctx_.mul(stride, w.sizes[d])) {
        sizes.back() = ctx_.mul(sizes.back(), w.sizes[d]);
        strides.back() = stride;
        continue;
      }
      sizes.push_back(w.sizes[d]);
      strides.push_back(stride);
    }
    if (sizes.empty()) {  // one element
      sizes.push_back(ctx_.constant(1));
      strides.push_back(ctx_.constant(0));
    }
    in.identity = sizes.size() == 1 && strides[0]->constant() == 1;
    sizes[0] = ctx_.constant(0);  // the outermost size is never needed
    std::pair<std::vector<sym::ExprPtr>, std::vector<sym::ExprPtr>> exprs;
    if (!in.identity) {
      for (auto* e : sizes) in.sizes.push_back(fused_int(e, exprs.first));
      for (auto* e : strides) in.strides.push_back(fused_int(e, exprs.second));
    }
    in_exprs_.push_back(std::move(exprs));
    return true;
  }
  static tl::FusedInt fused_int(sym::ExprPtr e, std::vector<sym::ExprPtr>& params) {
    if (auto c = e->constant()) return {false, *c};
    params.push_back(e);
    return {true, 0};
  }

  // Every use of value `from` after node `after` (and the results) becomes `to`.
  void replace(int from, int to, size_t after) {
    for (size_t j = after + 1; j < g_.nodes.size(); ++j) {
      Node& n = g_.nodes[j];
      for (Arg& a : n.args) {
        if (a.kind == Arg::Kind::Value && a.value == from) a.value = to;
        if (a.kind == Arg::Kind::ValueList) {
          for (int& v : a.values) v = v == from ? to : v;
        }
      }
      for (int& v : n.writes) v = v == from ? to : v;
    }
    for (int& o : g_.outputs) o = o == from ? to : o;
  }

  Graph& g_;
  sym::Context& ctx_;
  /** Per input of the candidate being built: its index map's symbolic sizes and strides. */
  std::vector<std::pair<std::vector<sym::ExprPtr>, std::vector<sym::ExprPtr>>> in_exprs_;
};

}  // namespace

int Graph::fuse_epilogues() {
  return EpilogueFusion(*this).run();
}

}  // namespace tessera::compiler
