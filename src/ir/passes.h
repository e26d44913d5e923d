/** \file
 * Tile-IR passes, one entry point each (STYLE.md), and the pipeline that runs them in order.
 */
#pragma once

#include "ir/ir.h"

namespace tessera::ir {

/** Folds constants the builder could not (after other rewrites) and applies algebraic
 * identities that are exact (x + 0, x * 1, select(c, x, x), int x * 0, ...). */
void canonicalize(Function& f);

/** Merges pure ops that compute the same value (scoped: an op in a loop body can reuse one
 * from an enclosing region, not the other way around). Loads are never merged. */
void cse(Function& f);

/** Removes ops without side effects whose results are unused. */
void dce(Function& f);

/** Loop-carried pointer tiles advanced by a loop-invariant uniform step (`ptrs += BK * stride`)
 * become induction variables: `init + ((iv - lb) / step_of_loop) * step` inside the loop, no
 * longer carried (when the loop's final value of them is unused). */
void pointer_induction(Function& f);

/** Removes every `assert` op (device_assert and hint checks) for code that does not evaluate
 * them; dce then removes what only they used. */
void strip_asserts(Function& f);
/** Removes every `device_print` op and what only they used (a kernel run a second time beside
 * the first, TESSERA_CROSSCHECK, prints once). */
void strip_prints(Function& f);

/**
 * The pipeline, top to bottom: verify, canonicalize, cse, dce, canonicalize, verify. With
 * `TESSERA_DUMP=ir` the IR is printed before and after, with the time of each pass.
 */
void run_pipeline(Function& f);

/** Replaces every use of `from` by `to` in `r` and its nested regions. */
void replace_all_uses(Region& r, ValueId from, ValueId to);

}  // namespace tessera::ir
