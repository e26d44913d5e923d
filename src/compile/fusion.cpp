// The graph compiler's fusion passes: epilogues and prologues into user kernels (EpilogueFusion),
// and built-in ops into generated kernels (ChainFusion: pointwise chains, row reductions, siblings;
// its comment says how groups form).
//
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
#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "compile/graph.h"
#include "runtime/cuda/context.h"
#include "tessera/env.h"
#include "tl/fused.h"

namespace tessera::compiler {
namespace {

using ops_detail::PwOp;

struct Lowering {
  PwOp op;
  int tensors;          ///< tensor operands, first in the schema
  bool alpha;           ///< add/sub: the argument after the operands
  bool floats_only;     ///< the op computes in floats only
  bool scalar = false;  ///< a Scalar operand after the tensor (`x * 2`: mul.Scalar)
};

const Lowering* lowering_of(const Node& n) {
  static const std::map<std::string, Lowering, std::less<>> kTable = {
      {"aten::relu", {PwOp::Relu, 1, false, false}},
      {"aten::neg", {PwOp::Neg, 1, false, false}},
      {"aten::abs", {PwOp::Abs, 1, false, false}},
      {"aten::exp", {PwOp::Exp, 1, false, true}},
      {"aten::exp2", {PwOp::Exp2, 1, false, true}},
      {"aten::log2", {PwOp::Log2, 1, false, true}},
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
      {"aten::gelu_backward", {PwOp::GeluBackward, 2, false, true}},
      {"aten::add.Tensor", {PwOp::Add, 2, true, false}},
      {"aten::sub.Tensor", {PwOp::Sub, 2, true, false}},
      {"aten::mul.Tensor", {PwOp::Mul, 2, false, false}},
      {"aten::div.Tensor", {PwOp::Div, 2, false, true}},
      {"aten::maximum", {PwOp::Maximum, 2, false, false}},
      {"aten::minimum", {PwOp::Minimum, 2, false, false}},
      {"aten::pow.Tensor_Tensor", {PwOp::Pow, 2, false, true}},
      {"aten::add.Scalar", {PwOp::Add, 1, true, false, true}},
      {"aten::sub.Scalar", {PwOp::Sub, 1, true, false, true}},
      {"aten::mul.Scalar", {PwOp::Mul, 1, false, false, true}},
      {"aten::div.Scalar", {PwOp::Div, 1, false, true, true}},
      {"aten::pow.Tensor_Scalar", {PwOp::Pow, 1, false, true, true}},
      // Comparisons (a bool result, computed in the operands' dtype) and where: a backward's
      // masks (`where(y > 0, g, 0)` of relu).
      {"aten::gt.Tensor", {PwOp::Gt, 2, false, false}},
      {"aten::ge.Tensor", {PwOp::Ge, 2, false, false}},
      {"aten::lt.Tensor", {PwOp::Lt, 2, false, false}},
      {"aten::le.Tensor", {PwOp::Le, 2, false, false}},
      {"aten::eq.Tensor", {PwOp::Eq, 2, false, false}},
      {"aten::ne.Tensor", {PwOp::Ne, 2, false, false}},
      {"aten::gt.Scalar", {PwOp::Gt, 1, false, false, true}},
      {"aten::ge.Scalar", {PwOp::Ge, 1, false, false, true}},
      {"aten::lt.Scalar", {PwOp::Lt, 1, false, false, true}},
      {"aten::le.Scalar", {PwOp::Le, 1, false, false, true}},
      {"aten::eq.Scalar", {PwOp::Eq, 1, false, false, true}},
      {"aten::ne.Scalar", {PwOp::Ne, 1, false, false, true}},
      {"aten::where.self", {PwOp::Where, 3, false, false}},
      {"aten::where.ScalarOther", {PwOp::Where, 2, false, false, true}},
      // Bounds as numbers (a step's ClampArgs, as eager's kernel takes them).
      {"aten::clamp", {PwOp::Clamp, 1, false, false}},
  };
  if (n.dead || n.kind != Node::Kind::Op) return nullptr;
  auto it = kTable.find(n.op.name());
  return it == kTable.end() ? nullptr : &it->second;
}

// The op node `n` computes (its lowering's, with gelu's and gelu_backward's `approximate`).
PwOp lowered_op(const Node& n, const Lowering& low) {
  const bool gelu = n.op.name() == "aten::gelu", back = n.op.name() == "aten::gelu_backward";
  if (!gelu && !back) return low.op;
  const IValue& approx = n.args[gelu ? 1 : 2].constant;
  const bool tanh = approx.is_string() && approx.to_string() == "tanh";
  if (gelu) return tanh ? PwOp::GeluTanh : PwOp::Gelu;
  return tanh ? PwOp::GeluTanhBackward : PwOp::GeluBackward;
}

// Whether an op may run inside a user kernel as an epilogue or prologue (tl::EpilogueSpec holds
// operands and alpha): not pow (kept out of user kernels), nor clamp (its bounds are not there).
bool lowers_into_kernel(const Lowering* low) {
  return low && low->op != PwOp::Pow && low->op != PwOp::Clamp;
}

bool is_comparison(PwOp op) {
  return op == PwOp::Gt || op == PwOp::Ge || op == PwOp::Lt || op == PwOp::Le || op == PwOp::Eq ||
         op == PwOp::Ne;
}

tl::FusedInt fused_int(sym::ExprPtr e, std::vector<sym::ExprPtr>& params) {
  if (auto c = e->constant()) return {false, *c};
  params.push_back(e);
  return {true, 0};
}

// Where element i of a dense tensor of `shape` (row-major) is in X broadcast to that shape: the
// dimensions collapsed where X is contiguous across them too; false when X does not broadcast.
// `params` gets the map's symbolic integers (its sizes, then its strides).
bool broadcast_map(sym::Context& ctx, const TensorInfo& x, const std::vector<sym::ExprPtr>& shape,
                   tl::EpilogueSpec::Input& in, std::vector<sym::ExprPtr>& params) {
  const size_t rank = shape.size(), xr = x.sizes.size();
  if (xr > rank) return false;
  std::vector<sym::ExprPtr> sizes, strides;
  for (size_t d = 0; d < rank; ++d) {
    sym::ExprPtr stride = ctx.constant(0);
    if (d + xr >= rank) {
      const size_t xd = d + xr - rank;
      if (x.sizes[xd] == shape[d]) {
        stride = x.strides[xd];
      } else if (x.sizes[xd]->constant() != 1) {
        return false;
      }
    }
    if (shape[d]->constant() == 1) continue;
    if (!sizes.empty() && strides.back() == ctx.mul(stride, shape[d])) {
      sizes.back() = ctx.mul(sizes.back(), shape[d]);
      strides.back() = stride;
      continue;
    }
    sizes.push_back(shape[d]);
    strides.push_back(stride);
  }
  if (sizes.empty()) {  // one element
    sizes.push_back(ctx.constant(1));
    strides.push_back(ctx.constant(0));
  }
  in.identity = sizes.size() == 1 && strides[0]->constant() == 1;
  sizes[0] = ctx.constant(0);  // the outermost size is never needed
  if (!in.identity) {
    for (auto* e : sizes) in.sizes.push_back(fused_int(e, params));
    for (auto* e : strides) in.strides.push_back(fused_int(e, params));
  }
  return true;
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
      // Prologues chain too (exp, then relu, before the kernel's loads).
      for (size_t a = 0; a < g_.nodes[k].args.size(); ++a) {
        while (try_prologue(k, a)) ++fused;
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
    if (!lowers_into_kernel(low)) return false;
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
    spec.op = lowered_op(epi, *low);
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
      in_exprs_.emplace_back();
      if (!broadcast_map(ctx_, xv.tensor, wt.sizes, in, in_exprs_.back()))
        return refuse("an operand does not broadcast to the output");
      spec.operands.push_back(static_cast<int>(spec.inputs.size()));
      spec.inputs.push_back(std::move(in));
      extra.push_back(o.value);
    }
    if (!scalar_operand(*low, epi, spec)) return refuse("its scalar operand is not a constant");
    if (low->alpha) spec.alpha = epi.args[alpha_index(*low)].constant.to_scalar();
    if (epi.op.name() == "aten::div.Tensor" && !epi.args[2].constant.is_none())
      return refuse("division with a rounding mode");
    std::string short_name = epi.op.name().substr(epi.op.name().find("::") + 2);
    short_name = short_name.substr(0, short_name.find('.'));
    spec.name = kname + "+" + short_name;
    // The derived kernel: the base's arguments, the inputs, the index maps' integers.
    std::vector<Arg> ints;
    for (const auto& params : in_exprs_) {
      for (sym::ExprPtr x : params) {
        Arg arg;
        arg.kind = Arg::Kind::Sym;
        arg.expr = x;
        ints.push_back(std::move(arg));
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

  // Fuses the pointwise op that computes kernel k's read argument `ai` (R = op(X, ...)) into the
  // kernel's loads, if one may be: the kernel then reads X through that parameter and applies the
  // op itself. Legal when R is used by nothing else (not a result, not another node's input, one
  // argument of the kernel), the kernel only loads it, as `pointer + offsets`; R and X are dense
  // of one shape and dtype (the offsets address both); the op's other inputs broadcast to R and
  // are not written between the op and the kernel, nor by it.
  bool try_prologue(size_t k, size_t ai) {
    Node& kernel = g_.nodes[k];
    const Arg& a = kernel.args[ai];
    in_exprs_.clear();
    if (a.kind != Arg::Kind::Value || a.value < 0 || !a.read || a.written || !a.direct_load ||
        kernel.tuned)
      return false;
    const int r = a.value;
    const Value& rv = g_.values[static_cast<size_t>(r)];
    if (rv.producer < 0) return false;
    const size_t pi = static_cast<size_t>(rv.producer);
    Node& pro = g_.nodes[pi];
    const Lowering* low = lowering_of(pro);
    if (!lowers_into_kernel(low) || pro.outputs.size() != 1 || pro.outputs[0] != r ||
        !pro.writes.empty())
      return false;
    const std::string kname = kernel.kernel->name();
    auto refuse = [&](const std::string& why) {
      pro.note = "not fused into kernel " + kname + " (prologue): " + why;
      return false;
    };
    const TensorInfo& rt = info(r);
    const int s = storage(r);
    if (!g_.contiguous(rt)) return refuse("its result is not contiguous");
    for (int o : g_.outputs) {
      if (o >= 0 && storage(o) == s) return refuse("its result is also a result");
    }
    // Factories that take only its metadata (`empty_like(r)`) take X's instead, which is the same.
    std::vector<size_t> like;
    for (size_t j = pi + 1; j < g_.nodes.size(); ++j) {
      const Node& n = g_.nodes[j];
      if (j == k || n.dead || !g_.touches(n, s)) continue;
      const bool factory = n.kind == Node::Kind::Op && n.op.name().size() > 5 &&
                           n.op.name().compare(n.op.name().size() - 5, 5, "_like") == 0 &&
                           n.op.name().rfind("aten::", 0) == 0 && n.args[0].value == r &&
                           n.writes.empty();
      bool only_self = factory;
      for (size_t i = 1; only_self && i < n.args.size(); ++i) {
        if (n.args[i].kind == Arg::Kind::Value && n.args[i].value >= 0 &&
            storage(n.args[i].value) == s)
          only_self = false;
      }
      if (!only_self) return refuse("its result is used by another node");
      like.push_back(j);
    }
    for (size_t i = 0; i < kernel.args.size(); ++i) {
      const Arg& o = kernel.args[i];
      if (i != ai && o.kind == Arg::Kind::Value && o.value >= 0 && storage(o.value) == s)
        return refuse("the kernel takes its result twice");
    }
    if (rt.dtype == DType::Bool || (low->floats_only && !is_floating_point(rt.dtype)))
      return refuse("the op computes in another dtype than its result's");
    // X: the first operand of R's dtype and shape, dense; the other operands are extra inputs.
    int x = -1;
    for (int t = 0; t < low->tensors && x < 0; ++t) {
      const Arg& o = pro.args[static_cast<size_t>(t)];
      if (o.kind == Arg::Kind::Value && o.value >= 0 && info(o.value).dtype == rt.dtype &&
          info(o.value).sizes == rt.sizes && g_.contiguous(info(o.value)) &&
          info(o.value).device == rt.device)
        x = o.value;
    }
    if (x < 0) return refuse("no operand has its result's shape, dtype and layout");
    tl::EpilogueSpec spec;
    spec.target = param_of(kernel, ai);
    spec.op = lowered_op(pro, *low);
    spec.compute = rt.dtype;
    std::vector<int> extra;
    for (int t = 0; t < low->tensors; ++t) {
      const Arg& o = pro.args[static_cast<size_t>(t)];
      if (o.kind != Arg::Kind::Value || o.value < 0) return refuse("an operand is not a tensor");
      if (o.value == x) {
        spec.operands.push_back(-1);
        continue;
      }
      const TensorInfo& ot = info(o.value);
      if (ot.dtype != rt.dtype || ot.device != rt.device)
        return refuse("an operand has another dtype or device");
      tl::EpilogueSpec::Input in;
      in_exprs_.emplace_back();
      if (!broadcast_map(ctx_, ot, rt.sizes, in, in_exprs_.back()))
        return refuse("an operand does not broadcast to its result");
      spec.operands.push_back(static_cast<int>(spec.inputs.size()));
      spec.inputs.push_back(std::move(in));
      extra.push_back(o.value);
    }
    // Every operand (X too) unwritten from the op through the kernel.
    for (int t = 0; t < low->tensors; ++t) {
      const int os = storage(pro.args[static_cast<size_t>(t)].value);
      for (size_t j = pi + 1; j <= k; ++j) {
        if (!g_.nodes[j].dead && writes(g_.nodes[j], os))
          return refuse("an operand is written between the op and the kernel");
      }
    }
    if (!scalar_operand(*low, pro, spec)) return refuse("its scalar operand is not a constant");
    if (low->alpha) spec.alpha = pro.args[alpha_index(*low)].constant.to_scalar();
    if (pro.op.name() == "aten::div.Tensor" && !pro.args[2].constant.is_none())
      return refuse("division with a rounding mode");
    std::string short_name = pro.op.name().substr(pro.op.name().find("::") + 2);
    short_name = short_name.substr(0, short_name.find('.'));
    spec.name = short_name + "+" + kname;
    std::shared_ptr<const tl::JITFunction> derived =
        tl::make_prologue_kernel(*kernel.kernel, std::move(spec));
    g_.derived.push_back(derived);
    kernel.kernel = derived.get();
    kernel.args[ai].value = x;
    for (size_t j : like) g_.nodes[j].args[0].value = x;
    for (int e : extra) {
      Arg arg;
      arg.kind = Arg::Kind::Value;
      arg.value = e;
      arg.read = true;
      kernel.args.push_back(std::move(arg));
    }
    for (const auto& params : in_exprs_) {
      for (sym::ExprPtr e : params) {
        Arg arg;
        arg.kind = Arg::Kind::Sym;
        arg.expr = e;
        kernel.args.push_back(std::move(arg));
      }
    }
    std::ostringstream note;
    note << "prologue " << pro.op.name() << " fused";
    if (pro.loc.known()) note << " (" << pro.loc << ")";
    kernel.note += (kernel.note.empty() ? "" : "; ") + note.str();
    kernel.fused_from.emplace_back(pro.op.name(), pro.loc);
    pro.dead = true;
    return true;
  }

  // A `.Scalar` op's constant operand (`x * 2`), after its tensor; false when it is not constant.
  static bool scalar_operand(const Lowering& low, const Node& n, tl::EpilogueSpec& spec) {
    if (!low.scalar) return true;
    const Arg& a = n.args[static_cast<size_t>(low.tensors)];
    if (a.kind != Arg::Kind::Constant || !a.constant.is_scalar()) return false;
    spec.operands.push_back(-2 - static_cast<int>(spec.constants.size()));
    spec.constants.push_back(a.constant.to_scalar());
    return true;
  }
  static size_t alpha_index(const Lowering& low) {
    return static_cast<size_t>(low.tensors + (low.scalar ? 1 : 0));
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
  /** Per input of the candidate being built: its index map's symbolic integers. */
  std::vector<std::vector<sym::ExprPtr>> in_exprs_;
};

// Vertical fusion into generated kernels (tl::make_pointwise_kernel).
//
// Flat: pointwise ops of one shape connected through the values they compute become one kernel
// that loads the inputs once, computes every op in registers and stores only the values used
// after it (or returned).
//
// Rows: reductions along the last dimension of a shape F = [..., N] (sum, mean, amax, amin), the
// pointwise ops of shape F around them and the pointwise ops on their per-row results (shape
// [..., 1] or [...]) become one kernel holding each row whole (a persistent reduction): softmax,
// layer norm or a normalization written with built-in ops run in one pass over memory. On the CPU,
// sums of the group's values over every dimension but the last (a norm's weight and bias
// gradients) join too: each program then holds ROWS rows and adds them into partial sums, and a
// small sum over the partials follows the kernel (column_sum).
//
// A group grows from a seed: rows, forward from a reduction through the ops that consume the
// group's values (the last one becomes the sink), then in both modes back from the sink through
// the producers of the members' operands, latest first. The kernel runs where the sink ran, so a
// node may join only when no other node between it and the sink touches its result (that node
// needs it in memory before the kernel runs) or writes one of its operands (the kernel reads them
// where the sink ran). The kernel runs after `empty` allocations of its outputs.
// Row maxima that need not find their row's NaNs (Reduce::Max -> MaxOfRow, one pass instead of
// two): a max m of x whose only users are `x - m`, when every output stores a value that is NaN
// across the whole row once any element of `x - m` is NaN (through NaN-keeping arithmetic and a
// sum or mean over the row: softmax and log-softmax written with amax). A row holding a NaN then
// gives all-NaN outputs either way (eager's m is NaN; here x - m is NaN at the NaN, and the sum
// spreads it); a row without one has the same m. Returns how many maxima it relaxed.
int relax_row_maxima(tl::PointwiseSpec& spec) {
  using R = tl::PointwiseSpec::Reduce;
  using K = tl::PointwiseSpec::Operand::Kind;
  using ops_detail::PwOp;
  const size_t ns = spec.steps.size();
  auto keeps_nan = [](PwOp op) {
    switch (op) {
      case PwOp::Add:
      case PwOp::Sub:
      case PwOp::Mul:
      case PwOp::Div:
      case PwOp::Neg:
      case PwOp::Exp:
      case PwOp::Exp2:
      case PwOp::Log:
      case PwOp::Log2:
      case PwOp::Sqrt:
      case PwOp::Rsqrt:
        return true;
      default:
        return false;
    }
  };
  auto same = [](const tl::PointwiseSpec::Operand& a, const tl::PointwiseSpec::Operand& b) {
    return a.kind == b.kind && a.kind != K::Constant && a.index == b.index;
  };
  int relaxed = 0;
  for (size_t r = 0; r < ns; ++r) {
    const tl::PointwiseSpec::Step& max = spec.steps[r];
    if (max.reduce != R::Max || !is_floating_point(max.compute)) continue;
    if (std::find(spec.outputs.begin(), spec.outputs.end(), r) != spec.outputs.end()) continue;
    // NaN at an element (`lane`), or across the row (`row`), when x holds a NaN.
    std::vector<char> lane(ns, 0), row(ns, 0);
    bool only_shifts = true;
    for (size_t u = r + 1; u < ns; ++u) {
      const tl::PointwiseSpec::Step& st = spec.steps[u];
      bool reads_max = false, nan_lane = false, nan_row = false;
      for (const auto& o : st.operands) {
        if (o.kind != K::Step) continue;
        reads_max = reads_max || o.index == r;
        nan_lane = nan_lane || lane[o.index];
        nan_row = nan_row || row[o.index];
      }
      if (reads_max) {
        only_shifts = only_shifts && st.op == PwOp::Sub && st.reduce == R::None &&
                      st.operands.size() == 2 && same(st.operands[0], max.operands[0]) &&
                      st.operands[1].kind == K::Step && st.operands[1].index == r &&
                      st.alpha.to_double() == 1.0 && is_floating_point(st.compute);
        lane[u] = 1;
        continue;
      }
      if (st.reduce == R::Sum || st.reduce == R::Mean) {
        const auto& o = st.operands[0];
        row[u] = o.kind == K::Step && lane[o.index];
      } else if (st.reduce == R::None && keeps_nan(st.op) && is_floating_point(st.compute)) {
        lane[u] = nan_lane || nan_row;
        row[u] = nan_row;
      }
    }
    if (!only_shifts) continue;
    bool all = !spec.outputs.empty();
    for (size_t o : spec.outputs) all = all && row[o];
    if (!all) continue;
    spec.steps[r].reduce = R::MaxOfRow;
    ++relaxed;
  }
  return relaxed;
}

class ChainFusion {
 public:
  ChainFusion(Graph& g, bool rows) : g_(g), ctx_(g.env->ctx), rows_(rows) {}

  int run() {
    std::vector<Group> groups;
    std::vector<bool> used(g_.nodes.size(), false);
    for (size_t i = g_.nodes.size(); i-- > 0;) {
      if (used[i]) continue;
      Group grp;
      if (rows_ ? !reduction(g_.nodes[i], grp) : !pointwise(g_.nodes[i])) continue;
      if (!rows_) grp.shape = info(g_.nodes[i].outputs[0]).sizes;
      grp.device = info(g_.nodes[i].outputs[0]).device;
      grow(grp, i, used);
      // One op alone gains nothing, but a composite row op (softmax, a norm) in one pass does;
      // it may still join a group that reads the same input (below).
      if (grp.leaves.size() > kMaxInputs) continue;
      for (size_t m : grp.members) used[m] = true;
      groups.push_back(std::move(grp));
    }
    merge_siblings(groups);
    // Applied from the last sink back, so that the positions of the groups not yet applied hold.
    std::sort(groups.begin(), groups.end(),
              [](const Group& a, const Group& b) { return a.members.back() > b.members.back(); });
    int fused = 0;
    for (Group& grp : groups) {
      const bool alone_pays =
          grp.members.size() == 1 && composite_of(g_.nodes[grp.members[0]]) != Composite::None;
      if (grp.members.size() < 2 && !alone_pays) continue;
      fused += apply(grp) ? static_cast<int>(grp.members.size()) : 0;
    }
    return fused;
  }

 private:
  static constexpr size_t kMaxOps = 64, kMaxInputs = 12;
  static constexpr size_t kNamedOps = 6;  ///< ops named in the kernel's name
  static constexpr int64_t kBlock = 1024;
  static constexpr int64_t kMaxRow = 16384;    ///< the longest row a program holds whole
  static constexpr int64_t kLoopBlock = 4096;  ///< longer rows: the block each pass walks

  enum class Space : uint8_t { None, Full, RowKeep, RowDrop };
  struct Group {
    std::vector<size_t> members;           ///< node indices, ascending (the sink last)
    std::vector<int> values;               ///< each member's result
    std::vector<int> leaves;               ///< values read from outside, in first-use order
    std::vector<sym::ExprPtr> shape;       ///< F
    std::vector<sym::ExprPtr> keep, drop;  ///< rows: F with the last dimension 1, and without it
    Device device;
  };

  const TensorInfo& info(int v) const { return g_.values[static_cast<size_t>(v)].tensor; }
  int storage(int v) const { return g_.storage_of(v); }

  Space space_of(const Group& grp, int v) const {
    const auto& sz = info(v).sizes;
    if (sz == grp.shape) return Space::Full;
    if (rows_ && sz == grp.keep) return Space::RowKeep;
    if (rows_ && sz == grp.drop) return Space::RowDrop;
    return Space::None;
  }
  const std::vector<sym::ExprPtr>& shape_of(const Group& grp, Space sp) const {
    return sp == Space::Full ? grp.shape : sp == Space::RowKeep ? grp.keep : grp.drop;
  }

  // A pointwise op with a tile lowering, computing out of place into a tensor of its own.
  bool pointwise(const Node& n) const {
    const Lowering* low = lowering_of(n);
    if (!low || n.outputs.size() != 1 || n.outputs[0] < 0 || !n.writes.empty()) return false;
    const DType r = info(n.outputs[0]).dtype;
    if (!is_comparison(low->op) &&
        (r == DType::Bool || (low->floats_only && !is_floating_point(r))))
      return false;
    const std::string& name = n.op.name();
    if ((name == "aten::div.Tensor" || name == "aten::div.Scalar") && !n.args[2].constant.is_none())
      return false;  // rounding modes have their own ops
    for (int t = 0; t < low->tensors; ++t) {
      const Arg& a = n.args[static_cast<size_t>(t)];
      if (a.kind != Arg::Kind::Value || a.value < 0 ||
          info(a.value).device != info(n.outputs[0]).device)
        return false;
    }
    if (low->scalar) {
      const Arg& a = n.args[static_cast<size_t>(low->tensors)];
      if (a.kind != Arg::Kind::Constant || !a.constant.is_scalar()) return false;
    }
    if (low->op == PwOp::Clamp) {
      // Numbers or None (one at least), the result of the input's dtype (no promotion to repeat).
      bool any = false;
      for (size_t a = 1; a < 3; ++a) {
        const Arg& b = n.args[a];
        if (b.kind != Arg::Kind::Constant || !(b.constant.is_none() || b.constant.is_scalar()))
          return false;
        any = any || !b.constant.is_none();
      }
      if (!any || info(n.args[0].value).dtype != r) return false;
    }
    if (is_comparison(low->op)) {
      // Float operands of one dtype (the compute dtype, without a promotion rule to repeat).
      const DType x = info(n.args[0].value).dtype;
      if (!is_floating_point(x) || (low->tensors == 2 && info(n.args[1].value).dtype != x))
        return false;
    }
    return low->op != PwOp::Where || info(n.args[0].value).dtype == DType::Bool;
  }

  // A reduction along the last dimension of a float tensor into its own dtype (its result one
  // value per row), or a composite row op (softmax, log_softmax, layer_norm, rms_norm over the last
  // dimension: its result of the input's shape); `grp` (when its shape is not set yet) takes the
  // op's spaces. False for other nodes, and for one whose input is not of the group's shape F.
  bool reduction(const Node& n, Group& grp) const {
    const bool composite = composite_of(n) != Composite::None;
    if ((!composite && reduce_op(n) == tl::PointwiseSpec::Reduce::None) || n.outputs.size() != 1 ||
        n.outputs[0] < 0 || !n.writes.empty() || n.args[0].kind != Arg::Kind::Value ||
        n.args[0].value < 0)
      return false;
    const TensorInfo& x = info(n.args[0].value);
    const TensorInfo& r = info(n.outputs[0]);
    if (!is_floating_point(x.dtype) || r.dtype != x.dtype || x.device != r.device ||
        x.sizes.empty())
      return false;
    const int64_t rank = static_cast<int64_t>(x.sizes.size());
    if (composite) {
      if (!composite_args(n, x)) return false;
    } else {
      // dim: exactly the last; keepdim a constant; no dtype argument.
      const IValue& dim = n.args[1].constant;
      if (n.args[1].kind != Arg::Kind::Constant || !dim.is_int_list() ||
          dim.to_int_list().size() != 1)
        return false;
      const int64_t d = dim.to_int_list()[0];
      if (d != -1 && d != rank - 1) return false;
      if (n.args.size() > 3 && !n.args[3].constant.is_none()) return false;
    }
    if (x.sizes.back()->constant() == 1) return false;
    std::vector<sym::ExprPtr> keep = x.sizes, drop = x.sizes;
    keep.back() = ctx_.constant(1);
    drop.pop_back();
    if (grp.shape.empty()) {
      grp.shape = x.sizes;
      grp.keep = std::move(keep);
      grp.drop = std::move(drop);
    } else if (x.sizes != grp.shape) {
      return false;
    }
    return composite ? r.sizes == grp.shape : r.sizes == grp.keep || r.sizes == grp.drop;
  }

  // Built-in row ops the row kernels compute whole (as eager's CPU loops: the statistics in
  // float32, or float64 for float64, rounded once at the end).
  enum class Composite : uint8_t { None, Softmax, LogSoftmax, LayerNorm, RmsNorm };
  static Composite composite_of(const Node& n) {
    if (n.dead || n.kind != Node::Kind::Op) return Composite::None;
    const std::string& name = n.op.name();
    if (name == "aten::softmax.int") return Composite::Softmax;
    if (name == "aten::log_softmax.int") return Composite::LogSoftmax;
    if (name == "aten::layer_norm") return Composite::LayerNorm;
    if (name == "aten::rms_norm") return Composite::RmsNorm;
    return Composite::None;
  }
  static bool optional_tensor(const Arg& a) { return a.kind == Arg::Kind::Value && a.value >= 0; }
  // The arguments a row kernel computes: the last dimension, no dtype conversion, constant eps;
  // weight and bias (when given) broadcast along the row.
  bool composite_args(const Node& n, const TensorInfo& x) const {
    const int64_t rank = static_cast<int64_t>(x.sizes.size());
    switch (composite_of(n)) {
      case Composite::Softmax:
      case Composite::LogSoftmax: {
        const IValue& dim = n.args[1].constant;
        if (n.args[1].kind != Arg::Kind::Constant || !dim.is_int()) return false;
        if (dim.to_int() != -1 && dim.to_int() != rank - 1) return false;
        return n.args[2].kind == Arg::Kind::Constant && n.args[2].constant.is_none();
      }
      case Composite::LayerNorm:
      case Composite::RmsNorm: {
        const IValue& shape = n.args[1].constant;
        if (n.args[1].kind != Arg::Kind::Constant || !shape.is_int_list() ||
            shape.to_int_list().size() != 1 || x.sizes.back()->constant() != shape.to_int_list()[0])
          return false;
        const size_t last = composite_of(n) == Composite::LayerNorm ? 4 : 3;
        for (size_t a = 2; a < last; ++a) {
          if (optional_tensor(n.args[a]) && info(n.args[a].value).sizes.size() != 1) return false;
          if (!optional_tensor(n.args[a]) && !n.args[a].constant.is_none()) return false;
        }
        const IValue& eps = n.args[last].constant;
        return n.args[last].kind == Arg::Kind::Constant && (eps.is_none() || eps.is_scalar());
      }
      case Composite::None:
        break;
    }
    return false;
  }
  static tl::PointwiseSpec::Reduce reduce_op(const Node& n) {
    using R = tl::PointwiseSpec::Reduce;
    if (n.dead || n.kind != Node::Kind::Op) return R::None;
    const std::string& name = n.op.name();
    if (name == "aten::sum.dim_IntList") return R::Sum;
    if (name == "aten::mean.dim") return R::Mean;
    if (name == "aten::amax") return R::Max;
    if (name == "aten::amin") return R::Min;
    return R::None;
  }

  std::vector<int> operands(const Node& n) const {
    if (reduce_op(n) != tl::PointwiseSpec::Reduce::None) return {n.args[0].value};
    const Composite c = composite_of(n);
    if (c != Composite::None) {
      std::vector<int> out = {n.args[0].value};
      const size_t last = c == Composite::LayerNorm ? 4 : c == Composite::RmsNorm ? 3 : 2;
      for (size_t a = 2; a < last; ++a) {
        if (optional_tensor(n.args[a])) out.push_back(n.args[a].value);
      }
      return out;
    }
    std::vector<int> out;
    for (int t = 0; t < lowering_of(n)->tensors; ++t)
      out.push_back(n.args[static_cast<size_t>(t)].value);
    return out;
  }

  // Whether node n computes something of the group's spaces from the group's values (of the
  // spaces it may read: a row value broadcasts along the row only kept as [..., 1]) and inputs
  // from outside that broadcast to its space.
  bool fits(Group& grp, const Node& n, const std::vector<bool>& member) const {
    if (rows_ && column_sum(grp, n, member)) return true;
    Space sp;
    std::vector<Space> allowed;
    if (rows_ &&
        (reduce_op(n) != tl::PointwiseSpec::Reduce::None || composite_of(n) != Composite::None)) {
      if (!reduction(n, grp)) return false;
      sp = space_of(grp, n.outputs[0]);
      allowed = {Space::Full};
    } else {
      if (!pointwise(n)) return false;
      sp = space_of(grp, n.outputs[0]);
      if (sp == Space::Full) allowed = {Space::Full, Space::RowKeep};
      if (sp == Space::RowKeep || sp == Space::RowDrop) allowed = {sp};
    }
    if (sp == Space::None || info(n.outputs[0]).device != grp.device) return false;
    for (int v : operands(n)) {
      const int p = g_.values[static_cast<size_t>(v)].producer;
      if (p >= 0 && member[static_cast<size_t>(p)]) {
        if (column_sum_node(g_.nodes[static_cast<size_t>(p)])) return false;  // only after it
        if (std::find(allowed.begin(), allowed.end(), space_of(grp, v)) == allowed.end())
          return false;
        continue;
      }
      for (size_t m = 0; m < member.size(); ++m) {
        if (member[m] && storage(g_.nodes[m].outputs[0]) == storage(v)) return false;
      }
      tl::EpilogueSpec::Input in;
      std::vector<sym::ExprPtr> params;
      if (!broadcast_map(ctx_, info(v), shape_of(grp, read_space(grp, n)), in, params))
        return false;
    }
    return true;
  }

  // Column sums (rows only; on the CPU unless TESSERA_COLUMN_SUMS says otherwise): `sum(v, dims)`
  // over every dimension but the last, of a member's value v of the whole space, a float into its
  // own dtype, when rows are held whole. The kernel adds each program's rows into an accumulator
  // and stores a partial sum per program (float32 for narrower floats); a sum over the partials (a
  // small tensor) follows it. The bias and weight gradients of a layer norm or a linear layer
  // then never store their [R, N] operand (docs/decisions.md).
  bool column_sum_node(const Node& n) const {
    if (n.dead || n.kind != Node::Kind::Op || n.op.name() != "aten::sum.dim_IntList" ||
        n.outputs.size() != 1 || n.outputs[0] < 0 || !n.writes.empty() ||
        n.args[0].kind != Arg::Kind::Value || n.args[0].value < 0 ||
        n.args[1].kind != Arg::Kind::Constant || !n.args[1].constant.is_int_list() ||
        n.args[2].kind != Arg::Kind::Constant || !n.args[2].constant.is_bool() ||
        n.args[2].constant.to_bool() || (n.args.size() > 3 && !n.args[3].constant.is_none()))
      return false;
    const TensorInfo& x = info(n.args[0].value);
    const TensorInfo& r = info(n.outputs[0]);
    const int64_t rank = static_cast<int64_t>(x.sizes.size());
    if (rank < 2 || r.dtype != x.dtype || r.device != x.device || !is_floating_point(x.dtype) ||
        r.sizes.size() != 1 || r.sizes[0] != x.sizes.back())
      return false;
    std::vector<bool> seen(static_cast<size_t>(rank), false);
    for (int64_t d : n.args[1].constant.to_int_list()) {
      if (d < 0) d += rank;
      if (d < 0 || d >= rank - 1 || seen[static_cast<size_t>(d)]) return false;
      seen[static_cast<size_t>(d)] = true;
    }
    for (int64_t d = 0; d + 1 < rank; ++d) {
      if (!seen[static_cast<size_t>(d)]) return false;
    }
    return true;
  }
  bool column_sum(const Group& grp, const Node& n, const std::vector<bool>& member) const {
    const int on = knobs().column_sums;
    if (on == 0 || (on < 0 && !grp.device.is_cpu()) || !column_sum_node(n) ||
        info(n.args[0].value).sizes != grp.shape)
      return false;
    const int p = g_.values[static_cast<size_t>(n.args[0].value)].producer;
    if (p < 0 || !member[static_cast<size_t>(p)] ||
        column_sum_node(g_.nodes[static_cast<size_t>(p)]))
      return false;
    return ctx_.evaluate(grp.shape.back(), g_.env->hints()) <= kMaxRow;  // held whole
  }

  // Whether node p may join a group whose kernel runs at `sink` (see the class comment).
  bool may_join(const std::vector<bool>& member, size_t p, size_t sink) const {
    const Node& n = g_.nodes[p];
    const int s = storage(n.outputs[0]);
    const std::vector<int> in = operands(n);
    for (size_t j = p + 1; j < sink; ++j) {
      const Node& o = g_.nodes[j];
      if (o.dead || member[j]) continue;
      if (g_.touches(o, s)) return false;
      for (int w : o.writes) {
        for (int v : in) {
          if (storage(w) == storage(v)) return false;
        }
      }
    }
    return true;
  }

  void grow(Group& grp, size_t seed, const std::vector<bool>& used) {
    std::vector<bool> member(g_.nodes.size(), false);
    member[seed] = true;
    size_t count = 1, sink = seed;
    // Rows: forward, then back from the sink, again while either adds a member (a consumer of a
    // producer the backward step added: the weight gradient's `g * xhat` of layer norm's
    // backward, whose reduction seeded the group after xhat).
    for (size_t before = 0; before != count && count < kMaxOps;) {
      before = count;
      if (rows_) scan_forward(grp, seed, used, member, count, sink);
      grow_back(grp, used, member, count, sink);
    }
    collect(grp, member);
  }

  // Forward: each node that reads the group's values joins (and becomes the sink) if it fits;
  // the first that reads them and does not, or writes an operand of a member, ends the scan.
  void scan_forward(Group& grp, size_t seed, const std::vector<bool>& used,
                    std::vector<bool>& member, size_t& count, size_t& sink) const {
    {
      for (size_t j = seed + 1; j < g_.nodes.size() && count < kMaxOps; ++j) {
        const Node& n = g_.nodes[j];
        if (n.dead || member[j]) continue;
        bool reads = false, writes = false;
        for (size_t m = 0; m < j; ++m) {
          if (!member[m]) continue;
          reads = reads || g_.touches(n, storage(g_.nodes[m].outputs[0]));
          for (int w : n.writes) {
            for (int v : operands(g_.nodes[m])) writes = writes || storage(w) == storage(v);
          }
        }
        if (reads && !used[j] && fits(grp, n, member)) {
          member[j] = true;
          sink = std::max(sink, j);
          ++count;
          continue;
        }
        if (reads || writes) break;
      }
    }
  }

  // Back from the sink: producers, latest first (a producer's later consumers are decided
  // before it).
  void grow_back(Group& grp, const std::vector<bool>& used, std::vector<bool>& member,
                 size_t& count, size_t sink) const {
    std::set<size_t, std::greater<>> pending;
    auto push_producers = [&](size_t i) {
      for (int v : operands(g_.nodes[i])) {
        const int p = g_.values[static_cast<size_t>(v)].producer;
        if (p >= 0 && !member[static_cast<size_t>(p)]) pending.insert(static_cast<size_t>(p));
      }
    };
    for (size_t i = 0; i <= sink; ++i) {
      if (member[i]) push_producers(i);
    }
    while (!pending.empty() && count < kMaxOps) {
      const size_t p = *pending.begin();
      pending.erase(pending.begin());
      const Node& n = g_.nodes[p];
      if (member[p] || used[p] || n.dead || !fits(grp, n, member) || !may_join(member, p, sink))
        continue;
      member[p] = true;
      ++count;
      push_producers(p);
    }
  }

  // The group's members (ascending), their values and the values they read from outside.
  void collect(Group& grp, const std::vector<bool>& member) const {
    grp.members.clear();
    grp.values.clear();
    grp.leaves.clear();
    for (size_t i = 0; i < member.size(); ++i) {
      if (!member[i]) continue;
      grp.members.push_back(i);
      grp.values.push_back(g_.nodes[i].outputs[0]);
    }
    for (size_t i : grp.members) {
      for (int v : operands(g_.nodes[i])) {
        const bool inside = std::find(grp.values.begin(), grp.values.end(), v) != grp.values.end();
        if (!inside && std::find(grp.leaves.begin(), grp.leaves.end(), v) == grp.leaves.end())
          grp.leaves.push_back(v);
      }
    }
  }

  // Horizontal fusion: groups (or ops alone) of the same spaces that read a common input become
  // one kernel, which loads it once, where every member of the one with the earlier sink may move
  // to the later sink.
  void merge_siblings(std::vector<Group>& groups) const {
    for (bool merged_one = true; merged_one;) {
      merged_one = false;
      for (size_t a = 0; a < groups.size() && !merged_one; ++a) {
        for (size_t b = a + 1; b < groups.size() && !merged_one; ++b) {
          if (!siblings(groups[a], groups[b])) continue;
          const bool a_late = groups[a].members.back() > groups[b].members.back();
          const Group& late = a_late ? groups[a] : groups[b];
          const Group& early = a_late ? groups[b] : groups[a];
          std::vector<bool> member(g_.nodes.size(), false);
          for (const Group* grp : {&late, &early}) {
            for (size_t m : grp->members) member[m] = true;
          }
          bool legal = true;
          for (size_t m : early.members) legal = legal && may_join(member, m, late.members.back());
          if (!legal) continue;
          Group merged = late;
          collect(merged, member);
          if (merged.leaves.size() > kMaxInputs) continue;
          groups[a] = std::move(merged);
          groups.erase(groups.begin() + static_cast<std::ptrdiff_t>(b));
          merged_one = true;  // look again: the merged group may take others
        }
      }
    }
  }
  bool siblings(const Group& a, const Group& b) const {
    if (a.shape != b.shape || a.keep != b.keep || a.drop != b.drop || a.device != b.device ||
        a.members.size() + b.members.size() > kMaxOps)
      return false;
    for (int l : a.leaves) {
      if (std::find(b.leaves.begin(), b.leaves.end(), l) != b.leaves.end()) return true;
    }
    return false;
  }

  // Whether value v is needed after the group: a result of the graph, or touched by a live node
  // that is not a member.
  bool escapes(const Group& grp, int v) const {
    for (int o : g_.outputs) {
      if (o >= 0 && storage(o) == storage(v)) return true;
    }
    for (size_t j = grp.members.front(); j < g_.nodes.size(); ++j) {
      const Node& n = g_.nodes[j];
      if (n.dead || std::find(grp.members.begin(), grp.members.end(), j) != grp.members.end())
        continue;
      if (g_.touches(n, storage(v))) return true;
    }
    return false;
  }

  // Whether 32-bit indices reach every element of the space and of each input: statically, or
  // under a guard at these sizes (larger sizes recompile); else 64-bit indices.
  bool narrow(const Group& grp, sym::ExprPtr numel, int64_t block, SourceLoc loc,
              const std::string& name) {
    const sym::ExprPtr limit = ctx_.constant(std::numeric_limits<int32_t>::max());
    sym::ExprPtr cond = ctx_.le(ctx_.add(numel, ctx_.constant(block)), limit);
    for (int l : grp.leaves) {
      const TensorInfo& x = info(l);
      sym::ExprPtr reach = ctx_.constant(0);
      for (size_t d = 0; d < x.sizes.size(); ++d)
        reach = ctx_.add(reach, ctx_.mul(ctx_.sub(x.sizes[d], ctx_.constant(1)), x.strides[d]));
      cond = ctx_.logical_and(cond, ctx_.le(reach, limit));
    }
    if (auto known = ctx_.statically_known(cond)) return *known;
    if (ctx_.evaluate(cond, g_.env->hints()) == 0) return false;
    g_.env->add_guard(cond, loc, "generated kernel " + name + "'s 32-bit indices");
    return true;
  }

  static DType accumulator(DType t) {
    return t == DType::Float64 ? DType::Float64 : DType::Float32;
  }

  // A composite row op as steps (`st` holds its operands: x, then weight and bias when given; its
  // result dtype), its statistics in the accumulator's dtype: all but the last step go into
  // `steps`, and `st` becomes the last.
  void expand(const Node& n, tl::PointwiseSpec::Step& st,
              std::vector<tl::PointwiseSpec::Step>& steps) const {
    using Operand = tl::PointwiseSpec::Operand;
    using R = tl::PointwiseSpec::Reduce;
    const DType acc = accumulator(st.result);
    const std::vector<Operand> in = st.operands;
    auto push = [&](PwOp op, R reduce, bool row, std::vector<Operand> operands) {
      tl::PointwiseSpec::Step s;
      s.op = op;
      s.reduce = reduce;
      s.compute = s.result = acc;
      s.row = row;
      s.operands = std::move(operands);
      steps.push_back(std::move(s));
      Operand o;
      o.kind = Operand::Kind::Step;
      o.index = steps.size() - 1;
      return o;
    };
    auto constant = [&](double v) {
      Operand o;
      o.kind = Operand::Kind::Constant;
      o.value = Scalar(v);
      o.dtype = acc;
      return o;
    };
    auto last = [&](PwOp op, std::vector<Operand> operands) {
      st.op = op;
      st.reduce = R::None;
      st.compute = acc;
      st.row = false;
      st.operands = std::move(operands);
    };
    const Composite c = composite_of(n);
    if (c == Composite::Softmax || c == Composite::LogSoftmax) {
      // A NaN in the row makes x - m NaN there, then the sum, then every element: no NaN pass.
      const Operand m = push(PwOp::None, R::MaxOfRow, true, {in[0]});
      const Operand d = push(PwOp::Sub, R::None, false, {in[0], m});
      const Operand e = push(PwOp::Exp, R::None, false, {d});
      const Operand sum = push(PwOp::None, R::Sum, true, {e});
      if (c == Composite::Softmax) return last(PwOp::Div, {e, sum});
      return last(PwOp::Sub, {d, push(PwOp::Log, R::None, true, {sum})});
    }
    // Norms: (x - mean) * rsqrt(mean of squares + eps) [* weight] [+ bias]; RMS norm centres
    // nothing.
    const bool layer = c == Composite::LayerNorm;
    const IValue& eps_arg = n.args[layer ? 4 : 3].constant;
    const double eps = eps_arg.is_none() ? ops_detail::default_norm_eps(st.result)
                                         : eps_arg.to_scalar().to_double();
    Operand x = in[0];
    if (layer) x = push(PwOp::Sub, R::None, false, {x, push(PwOp::None, R::Mean, true, {x})});
    const Operand var = push(PwOp::None, R::Mean, true, {push(PwOp::Mul, R::None, false, {x, x})});
    const Operand inv =
        push(PwOp::Rsqrt, R::None, true, {push(PwOp::Add, R::None, true, {var, constant(eps)})});
    Operand y = x;
    std::vector<Operand> affine(in.begin() + 1, in.end());  // weight, bias as given
    const bool has_w = optional_tensor(n.args[2]);
    const bool has_b = layer && optional_tensor(n.args[3]);
    if (!has_w && !has_b) return last(PwOp::Mul, {y, inv});
    y = push(PwOp::Mul, R::None, false, {y, inv});
    if (has_w && !has_b) return last(PwOp::Mul, {y, affine[0]});
    if (has_w) y = push(PwOp::Mul, R::None, false, {y, affine[0]});
    return last(PwOp::Add, {y, affine.back()});
  }

  // The space node n reads its operands in: a row op's own, F for the others.
  Space read_space(const Group& grp, const Node& n) const {
    if (reduce_op(n) != tl::PointwiseSpec::Reduce::None || composite_of(n) != Composite::None)
      return Space::Full;
    const Space sp = space_of(grp, n.outputs[0]);
    return sp == Space::Full ? Space::Full : sp;
  }

  // A storage no value has yet.
  int fresh_storage() const {
    int s = 0;
    for (const Value& v : g_.values) s = std::max(s, v.tensor.storage + 1);
    return s;
  }

  bool apply(Group& grp) {
    using Operand = tl::PointwiseSpec::Operand;
    // The outputs: values used after the group; each is stored densely.
    std::vector<size_t> out_steps;
    // Column sums: members that sum a member's value over the rows (after it: see fits).
    std::vector<bool> col(grp.members.size(), false);
    bool any_col = false;
    for (size_t k = 0; k < grp.members.size(); ++k) {
      col[k] = column_sum_node(g_.nodes[grp.members[k]]);
      any_col = any_col || col[k];
    }
    for (size_t k = 0; k < grp.values.size(); ++k) {
      if (col[k] || !escapes(grp, grp.values[k])) continue;
      if (!g_.contiguous(info(grp.values[k]))) return false;
      out_steps.push_back(k);
    }
    tl::PointwiseSpec spec;
    spec.name = "fused";
    // Inputs: a leaf per space it is read in (rows: a per-row input is read once per row).
    std::vector<std::pair<int, Space>> inputs;
    std::vector<std::vector<sym::ExprPtr>> params;
    auto input_of = [&](int v, Space sp) -> std::optional<size_t> {
      const std::pair<int, Space> key{v, sp};
      const auto it = std::find(inputs.begin(), inputs.end(), key);
      if (it != inputs.end()) return static_cast<size_t>(it - inputs.begin());
      tl::PointwiseSpec::Input in;
      in.row = sp != Space::Full;
      params.emplace_back();
      if (rows_ && sp == Space::Full) {
        // At the row's map over the leading dimensions, plus j times its stride along the row.
        TensorInfo lead = info(v);
        sym::ExprPtr last = ctx_.constant(0);
        if (!lead.sizes.empty()) {
          if (lead.sizes.back() == grp.shape.back()) {
            last = lead.strides.back();
          } else if (lead.sizes.back()->constant() != 1) {
            return std::nullopt;
          }
          lead.sizes.pop_back();
          lead.strides.pop_back();
        }
        in.split = true;
        if (!broadcast_map(ctx_, lead, grp.drop, in, params.back())) return std::nullopt;
        in.last_stride = fused_int(last, params.back());
      } else if (!broadcast_map(ctx_, info(v), shape_of(grp, sp), in, params.back())) {
        return std::nullopt;
      }
      inputs.push_back(key);
      spec.inputs.push_back(std::move(in));
      return inputs.size() - 1;
    };
    std::ostringstream note;
    note << "fused " << grp.members.size() << (rows_ ? " ops in rows of " : " pointwise ops")
         << (rows_ ? ctx_.str(grp.shape.back()) : "") << ":";
    std::vector<std::pair<std::string, SourceLoc>> fused_from;
    std::vector<size_t> step_of(grp.members.size());  // each member's (last) step
    std::vector<size_t> col_members;  // the column sums' members, as spec.column_sums
    for (size_t k = 0; k < grp.members.size(); ++k) {
      const Node& n = g_.nodes[grp.members[k]];
      if (col[k]) {
        const auto at = std::find(grp.values.begin(), grp.values.end(), n.args[0].value);
        spec.column_sums.push_back(step_of[static_cast<size_t>(at - grp.values.begin())]);
        col_members.push_back(k);
        note << (k ? ", " : " ") << n.op.name() << " over the rows";
        if (n.loc.known()) note << " (" << n.loc << ")";
        fused_from.emplace_back(n.op.name(), n.loc);
        continue;
      }
      const Space reads = read_space(grp, n);
      std::vector<Operand> ops;
      for (int v : operands(n)) {
        Operand o;
        const auto step =
            std::find(grp.values.begin(), grp.values.begin() + static_cast<long>(k), v);
        if (step != grp.values.begin() + static_cast<long>(k)) {
          o.kind = Operand::Kind::Step;
          o.index = step_of[static_cast<size_t>(step - grp.values.begin())];
        } else {
          const auto in = input_of(v, reads);
          if (!in) return false;
          o.index = *in;
        }
        ops.push_back(o);
      }
      tl::PointwiseSpec::Step st;
      st.result = info(n.outputs[0]).dtype;
      // The pointwise ops here compute in their result dtype; comparisons in their operands'.
      st.compute = st.result;
      if (const Lowering* l = lowering_of(n); l && is_comparison(l->op))
        st.compute = info(n.args[0].value).dtype;
      st.row = space_of(grp, n.outputs[0]) != Space::Full;
      st.reduce = reduce_op(n);
      st.operands = std::move(ops);
      const Lowering* low = lowering_of(n);
      if (composite_of(n) != Composite::None) {
        expand(n, st, spec.steps);
      } else if (low) {
        st.op = lowered_op(n, *low);
      } else {
        st.compute = accumulator(st.result);
      }
      if (low && low->scalar) {
        Operand o;
        o.kind = Operand::Kind::Constant;
        o.value = n.args[static_cast<size_t>(low->tensors)].constant.to_scalar();
        o.dtype = st.compute;  // as eager's scalar_tensor(b, promoted)
        st.operands.push_back(o);
      }
      if (low && low->op == PwOp::Clamp) {
        for (size_t a = 1; a < 3; ++a) {
          const IValue& b = n.args[a].constant;
          (a == 1 ? st.clamp.lo : st.clamp.hi) =
              b.is_none() ? std::nullopt : std::optional<Scalar>(b.to_scalar());
        }
      }
      if (low && low->alpha)
        st.alpha =
            n.args[static_cast<size_t>(low->tensors + (low->scalar ? 1 : 0))].constant.to_scalar();
      step_of[k] = spec.steps.size();
      spec.steps.push_back(std::move(st));
      std::string short_name = n.op.name().substr(n.op.name().find("::") + 2);
      short_name = short_name.substr(0, short_name.find('.'));
      if (k < kNamedOps) spec.name += "_" + short_name;
      note << (k ? ", " : " ") << n.op.name();
      if (n.loc.known()) note << " (" << n.loc << ")";
      fused_from.emplace_back(n.op.name(), n.loc);
    }
    if (inputs.size() > kMaxInputs) return false;
    if (grp.members.size() > kNamedOps)
      spec.name += "_and_" + std::to_string(grp.members.size() - kNamedOps) + "_more";
    for (size_t k : out_steps) spec.outputs.push_back(step_of[k]);
    const Node& last = g_.nodes[grp.members.back()];
    sym::ExprPtr numel = ctx_.constant(1);
    for (sym::ExprPtr d : grp.shape) numel = ctx_.mul(numel, d);
    // Rows: each program holds a row whole, in a block of the next power of two.
    sym::ExprPtr row_len = nullptr;
    if (rows_) {
      row_len = grp.shape.back();
      const int64_t n_now = ctx_.evaluate(row_len, g_.env->hints());
      int64_t block = 1;
      while (block < n_now) block *= 2;
      if (block > kMaxRow) {  // passes over the row in blocks (any length: no guard)
        spec.looped = true;
        block = kLoopBlock;
      }
      spec.row_block = block;
    }
    spec.wide = !narrow(grp, numel, rows_ ? spec.row_block : kBlock, last.loc, spec.name);
    const std::string name = spec.name;
    if (rows_ && !row_len->constant() && !spec.looped) {
      g_.env->add_guard(ctx_.le(row_len, ctx_.constant(spec.row_block)), last.loc,
                        "generated kernel " + name + " holds rows of at most " +
                            std::to_string(spec.row_block) + " elements");
    }
    const int64_t block = rows_ ? spec.row_block : kBlock;
    if (rows_ && relax_row_maxima(spec) > 0)
      note << "; amax without its NaN pass (every output is NaN across a row with a NaN anyway)";
    sym::ExprPtr rows = ctx_.constant(1);
    for (sym::ExprPtr d : grp.drop) rows = ctx_.mul(rows, d);
    // Column sums: ROWS rows a program. CPU: at most 256 programs of at least 8 rows (the partial
    // sums, 256 x N, stay small beside the [R, N] operand they replace). GPU: at most 16 programs
    // per multiprocessor of at least 4 rows (each program's rows run one after the other; only
    // with TESSERA_COLUMN_SUMS=1: 3% slower for the MLP block's step on an H100).
    int64_t rows_per_program = 0;
    if (any_col) {
      const int64_t r_now = std::max<int64_t>(ctx_.evaluate(rows, g_.env->hints()), 1);
      const bool gpu = grp.device.is_cuda();
      const int64_t most =
          gpu ? 16 * int64_t{std::max(1, runtime::cuda::device_info(std::max(0, grp.device.index()))
                                             .multiprocessors)}
              : 256;
      const int64_t least = gpu ? 4 : 8;
      const int64_t programs = std::clamp<int64_t>((r_now + least - 1) / least, 1, most);
      rows_per_program = (r_now + programs - 1) / programs;
    }
    std::shared_ptr<const tl::JITFunction> kernel = tl::make_pointwise_kernel(std::move(spec));
    g_.derived.push_back(kernel);
    // The outputs' allocations, then the kernel.
    std::vector<Node> added;
    for (size_t k : out_steps) {
      Node e = empty_node(info(grp.values[k]), grp.values[k], g_.nodes[grp.members[k]].loc);
      e.note = "the output of " + name;
      added.push_back(std::move(e));
    }
    // Each column sum's partials: [programs, N] in its accumulator's dtype, a storage of their own.
    const sym::ExprPtr programs =
        any_col ? ctx_.ceildiv(rows, ctx_.constant(rows_per_program)) : nullptr;
    std::vector<int> partials;
    for (size_t c : col_members) {
      Value p;
      p.kind = Value::Kind::Tensor;
      p.tensor.dtype = accumulator(info(g_.nodes[grp.members[c]].outputs[0]).dtype);
      p.tensor.device = grp.device;
      p.tensor.sizes = {programs, row_len};
      p.tensor.strides = {row_len, ctx_.constant(1)};
      p.tensor.offset = ctx_.constant(0);
      p.tensor.storage = fresh_storage();
      const int v = g_.add_value(std::move(p));
      partials.push_back(v);
      Node e = empty_node(info(v), v, g_.nodes[grp.members[c]].loc);
      e.note = "the partial column sums of " + name;
      added.push_back(std::move(e));
    }
    Node k;
    k.kind = Node::Kind::Kernel;
    k.kernel = kernel.get();
    k.loc = last.loc;
    for (size_t o : out_steps) {
      Arg a;
      a.kind = Arg::Kind::Value;
      a.value = grp.values[o];
      a.written = true;
      a.direct = true;
      k.args.push_back(std::move(a));
      k.writes.push_back(grp.values[o]);
    }
    for (int v : partials) {
      Arg a;
      a.kind = Arg::Kind::Value;
      a.value = v;
      a.written = true;
      a.direct = true;
      k.args.push_back(std::move(a));
      k.writes.push_back(v);
    }
    for (const auto& in : inputs) {
      Arg a;
      a.kind = Arg::Kind::Value;
      a.value = in.first;
      a.read = true;
      k.args.push_back(std::move(a));
    }
    auto sym_arg = [](sym::ExprPtr e) {
      Arg a;
      a.kind = Arg::Kind::Sym;
      a.expr = e;
      return a;
    };
    k.args.push_back(sym_arg(numel));
    if (rows_) k.args.push_back(sym_arg(row_len));
    if (any_col) k.args.push_back(sym_arg(rows));
    for (const auto& ps : params) {
      for (sym::ExprPtr e : ps) k.args.push_back(sym_arg(e));
    }
    Arg meta;
    meta.role = Arg::Role::Meta;
    meta.name = "BLOCK";
    meta.constant = IValue(block);
    k.args.push_back(std::move(meta));
    if (any_col) {
      Arg r;
      r.role = Arg::Role::Meta;
      r.name = "ROWS";
      r.constant = IValue(rows_per_program);
      k.args.push_back(std::move(r));
    }
    // CUDA: a warp per 512 elements of the row, 1 to 16 (H100, compiled, against a warp per 256:
    // layer_norm bf16 16384 x 4096 2322 -> 2657 GB/s, softmax f32 4096 x 1024 2101 -> 2153,
    // 4096 x 4096 2710 -> 2740; a warp per 1024 lost at 1024 columns, 1942).
    if (rows_) {
      Arg warps;
      warps.role = Arg::Role::Option;
      const tl::LaunchOption opt{tl::LaunchOption::Kind::NumWarps,
                                 std::clamp<int64_t>(block / 512, 1, 16)};
      warps.option = opt.kind;
      warps.name = opt.name();
      warps.constant = IValue(opt.value);
      k.args.push_back(std::move(warps));
    }
    k.grid[0] = any_col ? programs : rows_ ? rows : ctx_.ceildiv(numel, ctx_.constant(kBlock));
    k.grid[1] = k.grid[2] = ctx_.constant(1);
    for (size_t m : grp.members) {
      if (!g_.nodes[m].note.empty()) note << "; " << g_.nodes[m].note;
    }
    k.note = note.str();
    k.fused_from = std::move(fused_from);
    k.in_place_ok = true;  // tl::make_pointwise_kernel loads a program's elements, then stores
    added.push_back(std::move(k));
    // The column sums: the original sums, over the partials' first dimension (float32 partials
    // of a narrower float: summed in float32, then rounded once, as eager's sum rounds).
    for (size_t c = 0; c < col_members.size(); ++c) {
      Node sum = g_.nodes[grp.members[col_members[c]]];
      const int result = sum.outputs[0];
      sum.args[0].value = partials[c];
      sum.args[1].constant = IValue(std::vector<int64_t>{0});
      sum.note = "the sum of " + name + "'s partial column sums";
      const DType dt = info(result).dtype, acc = info(partials[c]).dtype;
      if (dt == acc) {
        added.push_back(std::move(sum));
        continue;
      }
      Value wide;
      wide.kind = Value::Kind::Tensor;
      wide.tensor = info(result);
      wide.tensor.dtype = acc;
      wide.tensor.storage = fresh_storage();
      sum.outputs[0] = g_.add_value(std::move(wide));
      Node to;
      to.kind = Node::Kind::Op;
      to.op = get_op("aten::_to_copy");
      to.loc = sum.loc;
      Arg self, dtype, device;
      self.kind = Arg::Kind::Value;
      self.value = sum.outputs[0];
      self.name = "self";
      dtype.constant = IValue(dt);
      dtype.name = "dtype";
      device.name = "device";
      to.args = {std::move(self), std::move(dtype), std::move(device)};
      to.outputs = {result};
      to.note = "the column sum rounded once";
      added.push_back(std::move(sum));
      added.push_back(std::move(to));
    }
    for (size_t m : grp.members) g_.nodes[m].dead = true;
    const size_t at = grp.members.back() + 1, added_count = added.size();
    g_.insert_nodes(at, std::move(added));
    for (size_t o = 0; o < out_steps.size(); ++o)
      g_.values[static_cast<size_t>(grp.values[out_steps[o]])].producer = static_cast<int>(at + o);
    for (size_t c = 0; c < partials.size(); ++c)
      g_.values[static_cast<size_t>(partials[c])].producer =
          static_cast<int>(at + out_steps.size() + c);
    for (size_t i = at + out_steps.size() + partials.size() + 1; i < at + added_count; ++i)
      g_.values[static_cast<size_t>(g_.nodes[i].outputs[0])].producer = static_cast<int>(i);
    return true;
  }

  Graph& g_;
  sym::Context& ctx_;
  const bool rows_;
};

}  // namespace

int Graph::fuse_epilogues() {
  return EpilogueFusion(*this).run();
}

int Graph::fuse_rows() {
  return ChainFusion(*this, true).run();
}

int Graph::fuse_pointwise() {
  return ChainFusion(*this, false).run();
}

}  // namespace tessera::compiler
