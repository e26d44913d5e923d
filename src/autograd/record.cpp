// The dispatcher's autograd level: records a backward node for every differentiable operator call
// whose inputs require grad. In-place operators are recorded as their out-of-place form followed
// by a copy, so that every formula is written once.
#include "autograd/internal.h"
#include "ops/register.h"
#include "tessera/detail/boxing.h"
#include "tessera/ops.h"

namespace tessera::autograd {
namespace {

template <class F>
void for_each_tensor(const IValue& v, F f) {
  if (v.is_tensor()) {
    f(v.to_tensor());
  } else if (v.is_tensor_list()) {
    for (const auto& t : v.to_tensor_list()) f(t);
  } else if (v.is_optional_tensor_list()) {
    for (const auto& t : v.to_optional_tensor_list()) {
      if (t) f(*t);
    }
  }
}

bool is_out_variant(const FunctionSchema& s) {
  for (const auto& a : s.arguments()) {
    if (a.kwarg_only && a.is_written()) return true;
  }
  return false;
}

bool is_inplace(const FunctionSchema& s) {
  return !s.arguments().empty() && s.arguments()[0].is_written() && !s.arguments()[0].kwarg_only;
}

// A backward for operators without a formula: the error comes when the gradient is needed.
std::shared_ptr<const Formula> missing_formula() {
  static const auto f = [] {
    auto m = std::make_shared<Formula>();
    m->backward = [](AutogradContext& ctx, const std::vector<Tensor>&) -> std::vector<IValue> {
      TS_ERROR(NotImplementedError)
          << "[" << ctx.op_name()
          << "] has no autograd formula, so no gradient flows through it: "
             "register one with register_autograd (or call it under NoGradGuard)";
    };
    return m;
  }();
  return f;
}

void record_inplace(const OperatorHandle& op, Stack& stack, size_t nargs) {
  const std::string& name = op.name();
  IValue* args = &stack[stack.size() - nargs];
  Tensor self = args[0].to_tensor();
  const AutogradMeta* m = meta_of(self);
  TS_CHECK(!(m && m->requires_grad && !m->grad_fn), RuntimeError)
      << "[" << name << "] a leaf tensor that requires grad is used in an in-place operation; "
      << "do it under NoGradGuard, or on a clone";
  TS_CHECK(!(m && m->is_view), NotImplementedError)
      << "[" << name
      << "] in-place operations on views of tensors that require grad are not supported "
      << "yet; use the out-of-place operator";
  const FunctionSchema& s = op.schema();
  if (s.name() == "fill_" || s.name() == "zero_") {
    // The result no longer depends on the old value.
    op.redispatch(stack);
    if (AutogradMeta* mm = meta_of(self)) {
      mm->grad_fn.reset();
      refresh_flag(self);
    }
    return;
  }
  TS_CHECK(s.name() != "resize_", RuntimeError)
      << "[" << name << "] cannot resize a tensor that requires grad";
  Tensor result;
  if (s.name() == "copy_") {
    const Tensor& src = args[1].to_tensor();
    result = src.to(self.dtype()).expand(self.sizes());
  } else {
    std::string functional = s.base_name();
    TS_INTERNAL_ASSERT(!functional.empty() && functional.back() == '_') << "in-place op " << name;
    functional.pop_back();
    if (!s.overload().empty()) functional += "." + s.overload();
    auto fop = find_op(functional);
    TS_CHECK(fop.has_value(), NotImplementedError)
        << "[" << name << "] has no out-of-place form to differentiate (" << functional << ")";
    // The formula may save `self`; give it a copy that the write below leaves alone.
    Stack fstack(args, args + nargs);
    fstack[0] = IValue(self.clone());
    fop->call(fstack);
    result = fstack.back().to_tensor();
  }
  {
    NoGradGuard ng;
    self.copy_(result);
  }
  if (AutogradMeta* rm = meta_of(result); rm && rm->grad_fn) {
    set_history(self, rm->grad_fn, rm->output_nr);
  }
  stack.resize(stack.size() - nargs);
  stack.emplace_back(self);
}

void record(const OperatorHandle& op, Stack& stack) {
  const OperatorEntry& e = op.entry();
  const FunctionSchema& schema = e.schema();
  const size_t nargs = schema.arguments().size();
  IValue* args = &stack[stack.size() - nargs];
  bool any = false;
  for (size_t i = 0; i < nargs; ++i)
    for_each_tensor(args[i], [&](const Tensor& t) { any = any || requires_grad(t); });
  std::shared_ptr<const Formula> f = formula_of(e);
  if (!any || (f && f->nondifferentiable)) {
    op.redispatch(stack);
    return;
  }
  TS_CHECK(!is_out_variant(schema), RuntimeError)
      << "[" << e.name()
      << "] out= arguments do not support automatic differentiation, but an input requires "
      << "grad: use the functional form, or call it under NoGradGuard";
  if (is_inplace(schema)) return record_inplace(op, stack, nargs);
  if (!f) f = missing_formula();

  const SourceLoc loc = UserLocGuard::current();
  auto node = std::make_shared<FormulaNode>(e, f, loc);
  auto& slots = node->slots();
  slots.resize(nargs);
  std::vector<bool> needs(nargs, false);
  std::vector<const TensorImpl*> input_impls;
  for (size_t i = 0; i < nargs; ++i) {
    const IValue& v = args[i];
    auto& slot = slots[i];
    if (v.is_tensor()) {
      slot.kind = FormulaNode::ArgSlot::Kind::Tensor;
    } else if (v.is_tensor_list() || v.is_optional_tensor_list()) {
      slot.kind = FormulaNode::ArgSlot::Kind::TensorList;
    } else {
      continue;
    }
    slot.first_edge = static_cast<uint32_t>(node->next_edges().size());
    for_each_tensor(v, [&](const Tensor& t) {
      node->mutable_next_edges().push_back(gradient_edge(t));
      node->input_meta().push_back(TensorMeta::of(t));
      needs[i] = needs[i] || requires_grad(t);
      input_impls.push_back(t.impl());
      ++slot.count;
    });
  }

  Stack inputs(args, args + nargs);
  op.redispatch(stack);

  const size_t nret = schema.returns().size();
  IValue* rets = &stack[stack.size() - nret];
  auto& ctx = node->ctx().impl();
  ctx.needs_input_grad = std::move(needs);
  ctx.node = node;
  node->output_meta().resize(nret);
  const bool view = e.tags() & kTagView;
  for (size_t i = 0; i < nret; ++i) {
    if (!rets[i].is_tensor()) continue;
    Tensor t = rets[i].to_tensor();
    if (!t.defined() || !is_floating_point(t.dtype())) continue;
    // A result that is an input itself (an alias returned as is) gets its own TensorImpl.
    for (const TensorImpl* in : input_impls) {
      if (in == t.impl()) {
        t = shallow_alias(t);
        rets[i] = IValue(t);
        break;
      }
    }
    set_history(t, node, static_cast<uint32_t>(i));
    if (view) ensure_meta(t).is_view = true;
    node->output_meta()[i] = TensorMeta::of(t);
    ctx.outputs.resize(nret, nullptr);
    ctx.outputs[i] = t.impl();
  }
  if (f->setup) {
    NoGradGuard ng;
    f->setup(node->ctx(), inputs, Stack(rets, rets + nret));
  }
  ctx.outputs.clear();
}

}  // namespace

TS_REGISTER_OPS(autograd_hook) {
  set_autograd_handler(&record);
}

}  // namespace tessera::autograd
