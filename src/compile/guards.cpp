#include "compile/guards.h"

#include <algorithm>
#include <optional>
#include <sstream>

namespace tessera::compile_detail {

using namespace tessera::compiler;

namespace {

bool ivalue_equal(const IValue& a, const IValue& b) {
  if (a.is_none() || b.is_none()) return a.is_none() && b.is_none();
  if (a.is_bool() && b.is_bool()) return a.to_bool() == b.to_bool();
  if (a.is_int() && b.is_int()) return a.to_int() == b.to_int();
  if (a.is_double() && b.is_double()) return a.to_double() == b.to_double();
  return false;
}

}  // namespace

uint64_t pack_key(const TensorImpl* t) {
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

void Guards::finish(const Graph& g) {
  graph_ = &g;
  std::vector<sym::ExprPtr> roots;
  for (const auto& gd : g.env->guards) roots.push_back(gd.condition);
  num_guards_ = roots.size();
  auto need = [&](sym::ExprPtr e) {
    if (!e || e->constant() || slot_.count(e)) return;
    slot_[e] = roots.size();
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
  program_ = std::make_unique<sym::Program>(g.env->ctx, roots);
}

int64_t Guards::value_of(sym::ExprPtr e, const Scratch& s) const {
  if (auto c = e->constant()) return *c;
  return s.values[slot_.at(e)];
}

SymRef Guards::ref_of(sym::ExprPtr e) const {
  if (auto c = e->constant()) return {*c, -1};
  return {0, static_cast<int64_t>(slot_.at(e))};
}

// The hot path of a tensor leaf: its packed key, then raw size, stride and offset words.
bool Guards::fast_leaf(const LeafGuard& g, const TensorImpl* impl, Scratch& s) const {
  if (__builtin_expect(pack_key(impl) != g.key, 0)) return false;
  // dtype, device, rank and requires_grad as traced; sizes plain: compare the raw words.
  const SymInt* sz = impl->sizes().data();
  for (int64_t d = 0; d < g.dim; ++d) {
    const int sym_index = g.size_symbol[static_cast<size_t>(d)];
    const int64_t v = sz[d].raw();
    if (sym_index < 0) {
      if (v != g.sizes[static_cast<size_t>(d)]) return false;
    } else {
      int64_t& bound = s.symbols[static_cast<size_t>(sym_index)];
      if (v < 2 || (bound >= 0 && bound != v)) return false;
      bound = v;
    }
  }
  if (g.contiguous) {
    if (!impl->is_contiguous()) return false;
  } else {
    const SymInt* st = impl->strides().data();
    for (int64_t d = 0; d < g.dim; ++d) {
      if (st[d].raw() != g.strides[static_cast<size_t>(d)]) return false;
    }
  }
  if (impl->storage_offset().raw() != g.offset) return false;
  return true;
}

// Why tensor leaf `i` fails its guard, or nullopt when it passes (the slow path of `match`, which
// also binds the leaf's symbols).
std::optional<std::string> Guards::explain_leaf(size_t i, const Tensor& t, Scratch& s) const {
  const LeafGuard& g = leaves[i];
  const TensorImpl* impl = t.impl();
  auto fail = [](std::string msg) { return std::optional<std::string>(std::move(msg)); };
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
      return fail(dn() + " == " + graph_->env->symbols[s_idx].source + " failed (got " +
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
                    ") == " + std::to_string(g.strides[static_cast<size_t>(d)]) + " failed (got " +
                    std::to_string(strides[d]) + ")");
      }
    }
  }
  if (impl->int_offset() != g.offset) {
    return fail(leaf_name(i) + ".storage_offset() == " + std::to_string(g.offset) +
                " failed (got " + std::to_string(impl->int_offset()) + ")");
  }
  return std::nullopt;
}

bool Guards::match(const std::vector<IValue>& args, Scratch& s, std::string* why) const {
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
    if (__builtin_expect(fast_leaf(g, impl, s), 1)) continue;
    if (!why) return false;
    if (auto msg = explain_leaf(i, t, s)) return fail(*msg);
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
  if (program_->size() == 0) return true;
  s.values.resize(program_->num_outputs());
  if (!program_->run(s.symbols.data(), s.values.data()))
    return fail("a size expression divides by zero");
  for (size_t k = 0; k < num_guards_; ++k) {
    if (s.values[k] == 0) {
      const auto& gd = graph_->env->guards[k];
      std::ostringstream os;
      os << graph_->env->ctx.str(gd.condition) << " failed (" << gd.why;
      if (gd.loc.known())
        os << (gd.why.find("after the call at") != std::string::npos ? " " : ", guard from ")
           << gd.loc;
      os << ")";
      return fail(os.str());
    }
  }
  return true;
}

}  // namespace tessera::compile_detail
