/** \file
 * The tracing context of the kernel language: while a kernel body runs under a `TraceContext`,
 * every `tl::` call records tile IR through its builder. Holds the region (scope) stack, the
 * `tl::Var`s and their current SSA values, and reports user mistakes as `CompileError`s naming
 * the kernel and the user's line.
 */
#pragma once

#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "tessera/tl.h"

namespace tessera::tl {

/** Friend access to Tile internals. */
struct Access {
  static Tile make(ir::ValueId id, uint32_t trace, uint32_t scope) {
    Tile t;
    t.id_ = id;
    t.trace_ = trace;
    t.scope_ = scope;
    return t;
  }
  static uint32_t trace(const Tile& t) { return t.trace_; }
  static uint32_t scope(const Tile& t) { return t.scope_; }
};

class TraceContext {
 public:
  TraceContext(ir::Function& f, std::string kernel);
  ~TraceContext();
  TraceContext(const TraceContext&) = delete;
  TraceContext& operator=(const TraceContext&) = delete;

  /** The context of the trace running on this thread; a CompileError outside kernels. */
  static TraceContext& current(SourceLoc loc);
  static TraceContext* current_or_null();

  ir::Builder& builder() { return b_; }
  ir::Function& function() { return f_; }
  const std::string& kernel() const { return kernel_; }
  uint32_t id() const { return id_; }

  /** Sets the location the next ops get. */
  void at(SourceLoc loc) {
    if (loc.known()) b_.set_loc(loc);
  }
  SourceLoc loc() const { return b_.loc(); }

  /** A Tile handle for `v` in the current scope. */
  Tile tile(ir::ValueId v) const { return Access::make(v, id_, scopes_.back()); }
  /** The IR value of a handle; an error if it belongs to another trace. */
  ir::ValueId value(const Tile& t, SourceLoc loc) const;
  const ir::Type& type(ir::ValueId v) const { return f_.type(v); }

  // ---- scopes -----------------------------------------------------------------------------
  uint32_t scope() const { return scopes_.back(); }
  bool scope_active(uint32_t s) const;
  void push_scope() { scopes_.push_back(next_scope_++); }
  void pop_scope();

  // ---- Vars -------------------------------------------------------------------------------
  struct VarState {
    ir::ValueId value;
    ir::Type type;
    uint32_t scope;
    bool alive;
    SourceLoc loc;
  };
  int32_t new_var(ir::ValueId init, SourceLoc loc);
  VarState& var(int32_t index) { return vars_.at(static_cast<size_t>(index)); }
  /** Values that are dtype constexprs (an int constant holding the DType). */
  std::vector<ir::ValueId>& dtype_values() { return dtype_values_; }
  std::vector<VarState>& vars() { return vars_; }

  /** Throws CompileError "[kernel K] file:line: msg". */
  [[noreturn]] void fail(SourceLoc loc, const std::string& msg) const;

  /** Sees every store before it is emitted (pointer, value and mask, normalized to the store's
   * shape; mask kNoValue when none) and returns the value to store: a fused epilogue's rewrite
   * (tl/fused.h). Unset for ordinary kernels. */
  std::function<ir::ValueId(ir::ValueId ptr, ir::ValueId value, ir::ValueId mask)> store_hook;
  /** Sees every load before it is emitted (pointer, mask and other, normalized to the load's
   * shape; mask and other kNoValue when none) and returns the value loaded instead, or kNoValue
   * for the load itself: a fused prologue's rewrite (tl/fused.h). Unset for ordinary kernels. */
  std::function<ir::ValueId(ir::ValueId ptr, ir::ValueId mask, ir::ValueId other)> load_hook;

 private:
  ir::Function& f_;
  ir::Builder b_;
  std::string kernel_;
  uint32_t id_;
  std::vector<uint32_t> scopes_;
  uint32_t next_scope_ = 1;
  std::vector<VarState> vars_;
  std::vector<ir::ValueId> dtype_values_;
  TraceContext* prev_;
};

/** Streams a message and throws it as a kernel CompileError at `loc`. */
class KernelError {
 public:
  explicit KernelError(SourceLoc loc) : loc_(loc) {}
  template <class T>
  KernelError& operator<<(const T& v) {
    os_ << v;
    return *this;
  }
  [[noreturn]] void raise();

 private:
  SourceLoc loc_;
  std::ostringstream os_;
};

}  // namespace tessera::tl

/** `TL_CHECK(cond, loc) << "msg"`: a user mistake in a kernel. */
#define TL_CHECK(cond, loc)                           \
  if (__builtin_expect(static_cast<bool>(cond), 1)) { \
  } else                                              \
    ::tessera::tl::KernelRaise() & ::tessera::tl::KernelError(loc)

namespace tessera::tl {
struct KernelRaise {
  [[noreturn]] void operator&(KernelError& e) const { e.raise(); }
  [[noreturn]] void operator&(KernelError&& e) const { e.raise(); }
};
}  // namespace tessera::tl
