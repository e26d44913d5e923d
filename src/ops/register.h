/** \file
 * Registration helpers for built-in operators: `TS_REGISTER_OPS(name) { ... }` runs a block once
 * when the library loads; `TS_CALL(schema_name, Sig, args...)` calls an operator through a typed,
 * cached handle (the pattern of every public op function).
 */
#pragma once

#include "ops/op_utils.h"
#include "tessera/detail/boxing.h"
#include "tessera/ops.h"

/** Runs the following block at library load time. */
#define TS_REGISTER_OPS(name)                                   \
  static void ts_register_##name();                             \
  [[maybe_unused]] static const int ts_registered_##name = [] { \
    ts_register_##name();                                       \
    return 0;                                                   \
  }();                                                          \
  static void ts_register_##name()

/** Calls operator `name` with C++ signature `Sig` (a cached typed handle). */
#define TS_CALL(name, Sig, ...)                        \
  do {                                                 \
    static const ::tessera::TypedOp<Sig> ts_op_{name}; \
    return ts_op_(__VA_ARGS__);                        \
  } while (0)

namespace tessera::ops_detail {
inline constexpr uint32_t kBuiltin = kTagBuiltin;
}
