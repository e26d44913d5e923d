/** \file
 * The tile IR as text: `print` writes every field of every op (results with their types,
 * operands, attributes, regions with typed arguments, source lines), values numbered in order of
 * definition, and `parse` reads that text back into an equal function. Pass tests are written as
 * text in, text out (tests/ir).
 *
 *     kernel @add(%0: *fp32 x {div16}, %1: i32 n, BLOCK: constexpr) attributes {num_warps = 4,
 *         num_stages = 3} {
 *       %2 = program_id {axis = 0} : i32  // add.cpp:3
 *       %3 = mul %2, %4 : i32
 *       %5 = cmp.lt %3, %1 : <128 x i1>
 *       store %6, %7, %5
 *       %8, %9 = for %10: i32 = %11 to %1 step %12 iter_args(%13: fp32 = %14) : (fp32) {
 *         ...
 *         yield %15
 *       }
 *     }
 */
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "ir/ir.h"

namespace tessera::ir {

/** Parses `print`'s text; a ValueError naming the line and column (and what was expected) when
 * the text is not a function. The result is verified. */
std::unique_ptr<Function> parse(std::string_view text);

/** Whether two functions are the same: every op's kind, fields, operands, results, types and
 * regions, every parameter, the attributes and the source lines, up to value numbering. */
bool same_function(const Function& a, const Function& b, std::string* why = nullptr);

}  // namespace tessera::ir
