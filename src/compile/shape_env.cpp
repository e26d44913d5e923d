#include "compile/shape_env.h"

namespace tessera::compiler {

SymInt ShapeEnv::create_symbol(std::string source, int64_t hint) {
  const std::string name = "s" + std::to_string(symbols.size());
  symbols.push_back({std::move(source), hint});
  return wrap(ctx.new_symbol(name, {2, sym::Range::kInf}));
}

SymInt ShapeEnv::wrap(sym::ExprPtr e) {
  if (auto c = e->constant()) return SymInt(*c);
  return SymInt(SymNode(new SymExprNode(IntrusivePtr<ShapeEnv>(this), e)));
}

sym::ExprPtr ShapeEnv::expr_of(const SymInt& s) {
  if (auto v = s.maybe_as_int()) return ctx.constant(*v);
  auto* n = dynamic_cast<SymExprNode*>(s.node().get());
  TS_INTERNAL_ASSERT(n && &n->env() == this) << "a symbolic size from another trace: " << s;
  return n->expr();
}

std::vector<int64_t> ShapeEnv::hints() const {
  std::vector<int64_t> h;
  for (const auto& s : symbols) h.push_back(s.hint);
  return h;
}

int64_t ShapeEnv::hint(sym::ExprPtr e) {
  return ctx.evaluate(e, hints());
}

void ShapeEnv::add_guard(sym::ExprPtr condition, SourceLoc loc, std::string why) {
  if (condition->kind == sym::Kind::BoolConst) return;  // decided by the ranges
  if (!loc.known() && last_loc.known()) {
    loc = last_loc;
    why += ", after the call at";
  }
  for (const auto& g : guards) {
    if (g.condition == condition) return;
  }
  guards.push_back({condition, loc, std::move(why)});
}

// ---- SymExprNode
// -----------------------------------------------------------------------------------

sym::ExprPtr SymExprNode::other(const SymNode& o) const {
  auto* n = dynamic_cast<SymExprNode*>(o.get());
  TS_INTERNAL_ASSERT(n != nullptr) << "mixing symbolic sizes of different kinds";
  return n->e_;
}

#define TS_BINARY(name, call)                   \
  SymNode SymExprNode::name(const SymNode& o) { \
    return make(env_->ctx.call(e_, other(o)));  \
  }
TS_BINARY(add, add)
TS_BINARY(sub, sub)
TS_BINARY(mul, mul)
TS_BINARY(floordiv, floordiv)
TS_BINARY(mod, mod)
TS_BINARY(min, min)
TS_BINARY(max, max)
TS_BINARY(eq, eq)
TS_BINARY(ne, ne)
TS_BINARY(lt, lt)
TS_BINARY(le, le)
TS_BINARY(gt, gt)
TS_BINARY(ge, ge)
TS_BINARY(logical_and, logical_and)
TS_BINARY(logical_or, logical_or)
#undef TS_BINARY

SymNode SymExprNode::neg() {
  return make(env_->ctx.neg(e_));
}
SymNode SymExprNode::logical_not() {
  return make(env_->ctx.logical_not(e_));
}
SymNode SymExprNode::wrap_int(int64_t v) {
  return make(env_->ctx.constant(v));
}
SymNode SymExprNode::wrap_bool(bool v) {
  return make(env_->ctx.boolean(v));
}

std::optional<int64_t> SymExprNode::constant_int() const {
  if (e_->is_bool()) return std::nullopt;
  return e_->constant();
}
std::optional<bool> SymExprNode::constant_bool() const {
  if (e_->kind != sym::Kind::BoolConst) return std::nullopt;
  return e_->value != 0;
}

int64_t SymExprNode::guard_int(SourceLoc loc) {
  const int64_t v = env_->hint(e_);
  env_->add_guard(env_->ctx.eq(e_, env_->ctx.constant(v)), loc,
                  "specialized to " + std::to_string(v));
  return v;
}

bool SymExprNode::guard_bool(SourceLoc loc) {
  const bool v = env_->hint(e_) != 0;
  env_->add_guard(v ? e_ : env_->ctx.logical_not(e_), loc, "branch");
  return v;
}

std::string SymExprNode::str() const {
  return env_->ctx.str(e_);
}

}  // namespace tessera::compiler
