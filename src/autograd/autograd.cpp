// Autograd's recording side: per-tensor state, the Tensor methods, saved variables, the formula
// registry, the dispatcher hook that records nodes, and the nodes themselves.
#include <atomic>
#include <cctype>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "autograd/internal.h"
#include "tessera/detail/boxing.h"
#include "tessera/ops.h"

namespace tessera::autograd {

// ---- per-tensor state ---------------------------------------------------------------------------

AutogradMeta* meta_of(const Tensor& t) {
  if (!t.defined()) return nullptr;
  return static_cast<AutogradMeta*>(t.impl()->autograd_meta());
}

AutogradMeta& ensure_meta(const Tensor& t) {
  if (auto* m = meta_of(t)) return *m;
  t.impl()->set_autograd_meta(std::make_unique<AutogradMeta>());
  return *meta_of(t);
}

void refresh_flag(const Tensor& t) {
  const AutogradMeta* m = meta_of(t);
  t.impl()->set_flag(kTensorAutograd, m && (m->requires_grad || m->grad_fn));
}

bool requires_grad(const Tensor& t) {
  const AutogradMeta* m = meta_of(t);
  return m && (m->requires_grad || m->grad_fn);
}

Tensor shallow_alias(const Tensor& t) {
  return detail::make_view(t, t.sizes(), t.strides(), t.storage_offset());
}

void set_history(const Tensor& t, const std::shared_ptr<Node>& fn, uint32_t output_nr) {
  AutogradMeta& m = ensure_meta(t);
  m.grad_fn = fn;
  m.output_nr = output_nr;
  m.requires_grad = false;
  refresh_flag(t);
}

Edge gradient_edge(const Tensor& t) {
  AutogradMeta* m = meta_of(t);
  if (!m) return {};
  if (m->grad_fn) return Edge{m->grad_fn, m->output_nr};
  if (!m->requires_grad) return {};
  std::shared_ptr<Node> acc = m->grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t);
    m->grad_accumulator = acc;
  }
  return Edge{acc, 0};
}

TensorMeta TensorMeta::of(const Tensor& t) {
  TensorMeta m;
  if (!t.defined()) return m;
  m.sizes = SymDimVector(t.sizes().begin(), t.sizes().end());
  m.dtype = t.dtype();
  m.device = t.device();
  m.defined = true;
  return m;
}

Tensor TensorMeta::zeros() const {
  return tessera::zeros(sizes, TensorOptions().dtype(dtype).device(device));
}

namespace {
thread_local bool t_in_backward = false;
std::atomic<uint64_t> g_sequence{0};
}  // namespace

bool in_backward() {
  return t_in_backward;
}
BackwardScope::BackwardScope() : prev(t_in_backward) {
  t_in_backward = true;
}
BackwardScope::~BackwardScope() {
  t_in_backward = prev;
}

Node::Node() : sequence_nr_(g_sequence.fetch_add(1, std::memory_order_relaxed)) {}
Node::~Node() = default;

std::string backward_name(const std::string& op_name) {
  std::string ns, base = op_name;
  if (auto p = op_name.find("::"); p != std::string::npos) {
    ns = op_name.substr(0, p);
    base = op_name.substr(p + 2);
  }
  if (auto p = base.find('.'); p != std::string::npos) base = base.substr(0, p);
  if (ns != "aten") return (ns.empty() ? "" : ns + "::") + base + "Backward";
  std::string camel;
  bool up = true;
  for (char c : base) {
    if (c == '_') {
      up = true;
      continue;
    }
    camel += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    up = false;
  }
  return camel + "Backward";
}

// ---- the context --------------------------------------------------------------------------------

AutogradContext::AutogradContext() : impl_(std::make_unique<Impl>()) {}
AutogradContext::~AutogradContext() = default;
AutogradContext::AutogradContext(AutogradContext&&) noexcept = default;
AutogradContext& AutogradContext::operator=(AutogradContext&&) noexcept = default;

void AutogradContext::save_for_backward(std::vector<Tensor> tensors) {
  Impl& s = *impl_;
  s.saved.clear();
  for (const Tensor& t : tensors) {
    SavedVariable v;
    if (t.defined()) {
      v.defined = true;
      v.version = t.version();
      for (size_t i = 0; i < s.outputs.size(); ++i) {
        if (s.outputs[i] == t.impl()) {
          v.is_output = true;
          v.owner = s.node;
          v.output_nr = static_cast<uint32_t>(i);
        }
      }
      // A result keeps no reference to its own grad_fn (that would be a cycle).
      v.data = v.is_output ? shallow_alias(t) : t;
    }
    s.saved.push_back(std::move(v));
  }
}

Tensor AutogradContext::saved(size_t i) const {
  const Impl& s = *impl_;
  TS_CHECK(!s.released, RuntimeError)
      << "[" << s.op_name
      << "] trying to run the backward through the graph a second time (or to read "
      << "saved tensors after they were freed): pass retain_graph=true to the first backward";
  TS_CHECK(i < s.saved.size(), IndexError)
      << "[" << s.op_name << "] saved tensor " << i << " of " << s.saved.size() << " requested";
  const SavedVariable& v = s.saved[i];
  if (!v.defined) return Tensor();
  if (v.data.version() != v.version) {
    std::ostringstream where;
    where << "saved tensor " << i << (v.is_output ? ", a result" : ", an input");
    if (s.loc.known()) where << " of the call at " << s.loc;
    TS_ERROR(RuntimeError) << "[" << s.op_name << "] a tensor saved for the backward ("
                           << where.str()
                           << ") was modified by an in-place operation: it was at version "
                           << v.version << " and is now at version " << v.data.version()
                           << "; clone it before modifying it, or modify it after the backward";
  }
  if (!v.is_output) return v.data;
  // A result: re-attach its history so that a create_graph backward can differentiate through it.
  Tensor t = shallow_alias(v.data);
  if (auto owner = v.owner.lock()) set_history(t, owner, v.output_nr);
  return t;
}

std::vector<Tensor> AutogradContext::saved_tensors() const {
  std::vector<Tensor> out;
  for (size_t i = 0; i < impl_->saved.size(); ++i) out.push_back(saved(i));
  if (impl_->released) saved(0);  // the error, even when nothing was saved
  return out;
}

bool AutogradContext::needs_input_grad(size_t arg) const {
  return arg < impl_->needs_input_grad.size() && impl_->needs_input_grad[arg];
}

void AutogradContext::set(std::string key, IValue value) {
  for (auto& [k, v] : impl_->values) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  impl_->values.emplace_back(std::move(key), std::move(value));
}

const IValue& AutogradContext::get(std::string_view key) const {
  for (const auto& [k, v] : impl_->values) {
    if (k == key) return v;
  }
  TS_ERROR(ValueError) << "[" << impl_->op_name << "] the autograd context has no value '" << key
                       << "' (set it in setup_context with ctx.set)";
}

const std::string& AutogradContext::op_name() const {
  return impl_->op_name;
}

// ---- the formula registry -----------------------------------------------------------------------

namespace {
struct FormulaSlot {
  std::shared_ptr<const Formula> formula;
};
}  // namespace

void ensure_builtin_formulas() {
  static std::once_flag once;
  std::call_once(once, register_builtin_derivatives);
}

std::shared_ptr<const Formula> formula_of(const OperatorEntry& op) {
  ensure_builtin_formulas();
  const auto& slot = op.autograd_slot();
  return slot ? static_cast<const FormulaSlot*>(slot.get())->formula : nullptr;
}

void set_formula(const OperatorHandle& op, SetupContextFn setup, BackwardFn backward) {
  TS_CHECK(backward != nullptr, ValueError)
      << "[" << op.name() << "] register_formula needs a backward function";
  auto f = std::make_shared<Formula>();
  f->setup = std::move(setup);
  f->backward = std::move(backward);
  auto slot = std::make_shared<FormulaSlot>();
  slot->formula = std::move(f);
  op.entry().set_autograd_slot(std::move(slot));
}

void set_nondifferentiable(std::string_view op) {
  auto f = std::make_shared<Formula>();
  f->nondifferentiable = true;
  auto slot = std::make_shared<FormulaSlot>();
  slot->formula = std::move(f);
  get_op(op).entry().set_autograd_slot(std::move(slot));
}

void register_formula(const OperatorHandle& op, SetupContextFn setup, BackwardFn backward) {
  ensure_builtin_formulas();  // so that the built-in table never replaces a user's formula
  set_formula(op, std::move(setup), std::move(backward));
}

void register_formula(std::string_view op, SetupContextFn setup, BackwardFn backward) {
  register_formula(get_op(op), std::move(setup), std::move(backward));
}

void register_nondifferentiable(std::string_view op) {
  ensure_builtin_formulas();
  set_nondifferentiable(op);
}

bool has_formula(const OperatorHandle& op) {
  return formula_of(op.entry()) != nullptr;
}

bool is_nondifferentiable(const OperatorHandle& op) {
  auto f = formula_of(op.entry());
  return f && f->nondifferentiable;
}

// ---- nodes --------------------------------------------------------------------------------------

FormulaNode::FormulaNode(const OperatorEntry& op, std::shared_ptr<const Formula> formula,
                         SourceLoc loc)
    : op_(op), name_(backward_name(op.name())), formula_(std::move(formula)) {
  set_forward_location(loc);
  ctx_.impl().op_name = op.name();
  ctx_.impl().loc = loc;
}

void FormulaNode::release_variables() {
  ctx_.impl().saved.clear();
  ctx_.impl().released = true;
}

std::vector<Tensor> FormulaNode::apply(std::vector<Tensor>&& grads) {
  auto& outs = output_meta();
  for (size_t i = 0; i < grads.size() && i < outs.size(); ++i) {
    if (!grads[i].defined() && outs[i].defined && is_floating_point(outs[i].dtype))
      grads[i] = outs[i].zeros();
  }
  std::vector<IValue> result = formula_->backward(ctx_, grads);
  const auto& args = op_.schema().arguments();
  TS_CHECK(result.size() == args.size(), ValueError)
      << "[" << op_.name() << "] the backward returned " << result.size() << " gradient"
      << (result.size() == 1 ? "" : "s") << ", expected " << args.size()
      << " (one per argument of the schema, None for arguments without one)";
  std::vector<Tensor> input_grads(next_edges().size());
  auto check_shape = [&](const Tensor& g, uint32_t edge, const Argument& arg) {
    const TensorMeta& want = input_meta()[edge];
    if (!g.defined() || !want.defined) return Tensor();
    if (!same_sizes(g.sizes(), want.sizes)) {
      std::ostringstream os;
      os << "[" << op_.name() << "] the backward returned a gradient of shape " << g.sizes()
         << " for argument '" << arg.name << "' of shape " << SymIntArrayRef(want.sizes);
      TS_ERROR(ValueError) << os.str();
    }
    return g.dtype() == want.dtype || !is_floating_point(want.dtype) ? g : g.to(want.dtype);
  };
  for (size_t a = 0; a < args.size(); ++a) {
    const ArgSlot& s = slots_[a];
    IValue& r = result[a];
    const bool none = r.is_none() || (r.is_tensor() && !r.to_tensor().defined());
    if (none) continue;
    switch (s.kind) {
      case ArgSlot::Kind::Other:
        TS_ERROR(ValueError) << "[" << op_.name()
                             << "] the backward returned a gradient for argument '" << args[a].name
                             << "', which is not a tensor (return None there)";
      case ArgSlot::Kind::Tensor:
        TS_CHECK(r.is_tensor(), ValueError) << "[" << op_.name() << "] the gradient for argument '"
                                            << args[a].name << "' must be a Tensor";
        if (s.count) input_grads[s.first_edge] = check_shape(r.to_tensor(), s.first_edge, args[a]);
        break;
      case ArgSlot::Kind::TensorList: {
        TS_CHECK(r.is_tensor_list(), ValueError)
            << "[" << op_.name() << "] the gradient for argument '" << args[a].name
            << "' must be a list of tensors";
        const auto& list = r.to_tensor_list();
        TS_CHECK(list.size() == s.count, ValueError)
            << "[" << op_.name() << "] the gradient for argument '" << args[a].name << "' has "
            << list.size() << " tensors, the argument had " << s.count;
        for (uint32_t k = 0; k < s.count; ++k) {
          input_grads[s.first_edge + k] = check_shape(list[k], s.first_edge + k, args[a]);
        }
        break;
      }
    }
  }
  return input_grads;
}

AccumulateGrad::AccumulateGrad(Tensor variable) : variable_(std::move(variable)) {
  input_meta().push_back(TensorMeta::of(variable_));
  output_meta().push_back(TensorMeta::of(variable_));
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grads) {
  Tensor g = std::move(grads.at(0));
  if (!g.defined()) return {};
  AutogradMeta& m = ensure_meta(variable_);
  // Own the gradient's memory: it may be an expanded view or a tensor the caller still holds.
  if (!grad_enabled() && (!g.is_contiguous() || g.impl()->use_count() > 1)) g = g.clone();
  m.grad = m.grad.defined() ? m.grad + g : g;
  return {};
}

}  // namespace tessera::autograd

// ---- Tensor's autograd methods
// ----------------------------------------------------------------------

namespace tessera {

using autograd::AutogradMeta;

bool Tensor::requires_grad() const {
  return autograd::requires_grad(*this);
}

Tensor& Tensor::requires_grad_(bool r, SourceLoc loc) {
  UserLocGuard g(loc);
  AutogradMeta* m = autograd::meta_of(*this);
  TS_CHECK(!(m && m->grad_fn) || r, RuntimeError)
      << "requires_grad_(false) on a tensor computed from others (not a leaf): use detach() "
         "instead";
  TS_CHECK(!r || tessera::is_floating_point(dtype()), DTypeError)
      << "only tensors of floating-point dtype can require gradients, not " << dtype_name(dtype());
  if (m && m->grad_fn) return *this;
  autograd::ensure_meta(*this).requires_grad = r;
  autograd::refresh_flag(*this);
  return *this;
}

const Tensor& Tensor::grad() const {
  static const Tensor undefined;
  const AutogradMeta* m = autograd::meta_of(*this);
  return m ? m->grad : undefined;
}

Tensor& Tensor::mutable_grad() {
  return autograd::ensure_meta(*this).grad;
}

std::shared_ptr<autograd::Node> Tensor::grad_fn() const {
  const AutogradMeta* m = autograd::meta_of(*this);
  return m ? m->grad_fn : nullptr;
}

std::string Tensor::grad_fn_name() const {
  const auto fn = grad_fn();
  return fn ? fn->name() : std::string();
}

bool Tensor::is_leaf() const {
  return grad_fn() == nullptr;
}

uint32_t Tensor::output_nr() const {
  const AutogradMeta* m = autograd::meta_of(*this);
  return m ? m->output_nr : 0;
}

void Tensor::backward(const Tensor& gradient, bool retain_graph, bool create_graph,
                      SourceLoc loc) const {
  autograd::backward({*this},
                     gradient.defined() ? std::vector<Tensor>{gradient} : std::vector<Tensor>{},
                     retain_graph, create_graph, loc);
}

}  // namespace tessera
