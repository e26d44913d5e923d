#include "tl/trace.h"

#include <atomic>

namespace tessera::tl {
namespace {
thread_local TraceContext* t_current = nullptr;
std::atomic<uint32_t> g_next_trace{1};
}  // namespace

TraceContext::TraceContext(ir::Function& f, std::string kernel)
    : f_(f), b_(f), kernel_(std::move(kernel)), id_(g_next_trace++), prev_(t_current) {
  scopes_.push_back(0);
  t_current = this;
}

TraceContext::~TraceContext() { t_current = prev_; }

TraceContext* TraceContext::current_or_null() { return t_current; }

TraceContext& TraceContext::current(SourceLoc loc) {
  if (!t_current) {
    std::ostringstream where;
    if (loc.known()) where << " (called at " << loc << ")";
    TS_ERROR(CompileError) << "tessera::tl functions and operators on tl::Tile can only be used in a "
                           << "kernel body (TL_JIT) while it is traced" << where.str();
  }
  return *t_current;
}

ir::ValueId TraceContext::value(const Tile& t, SourceLoc loc) const {
  if (t.id() < 0) fail(loc, "use of an empty tl::Tile (default-constructed and never assigned)");
  if (Access::trace(t) != id_) {
    fail(loc, "a tl::Tile from another kernel trace was used (tiles do not outlive the body that "
              "made them)");
  }
  return t.id();
}

bool TraceContext::scope_active(uint32_t s) const {
  for (uint32_t x : scopes_) {
    if (x == s) return true;
  }
  return false;
}

void TraceContext::pop_scope() {
  const uint32_t s = scopes_.back();
  scopes_.pop_back();
  for (auto& v : vars_) {
    if (v.scope == s) v.alive = false;
  }
}

int32_t TraceContext::new_var(ir::ValueId init, SourceLoc loc) {
  vars_.push_back(VarState{init, f_.type(init), scope(), true, loc});
  return static_cast<int32_t>(vars_.size() - 1);
}

void TraceContext::fail(SourceLoc loc, const std::string& msg) const {
  std::ostringstream os;
  os << "[kernel " << kernel_ << "] ";
  if (loc.known()) os << loc << ": ";
  os << msg;
  throw CompileError(os.str(), loc.known() ? loc : UserLocGuard::current());
}

void KernelError::raise() {
  TraceContext* c = TraceContext::current_or_null();
  if (c) c->fail(loc_, os_.str());
  throw CompileError(os_.str(), loc_);
}

}  // namespace tessera::tl
