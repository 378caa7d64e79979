// Algebraic simplification that preserves the semantics in expr.h exactly.
//
//  * constant folding of arithmetic, comparisons, logic, casts and integer
//    bit operations, with wrap-around and truncating/flooring division as
//    documented (division by a zero constant is left alone);
//  * identities: x + 0, x - 0, x * 1, x / 1, x * 0 and x % 1 (integers
//    only, since 0 * NaN is NaN), x - x (integers only), min(x, x), !!x,
//    x && true, x || false, ...;
//  * reassociation of integer constants: (x + 3) + 4 -> x + 7,
//    (x - 3) + 4 -> x + 1, (x * 4) * 2 -> x * 8;
//  * division: (x * c) % c -> 0 for integer c != 0 always (wrap-around
//    keeps the product a multiple of c only when c divides 2^bits, so this
//    is limited to powers of two), and (x * c) / c -> x,
//    (x * c + y) / c -> x, (x * c + y) % c -> y, for / % floor_div and
//    floor_mod, only where the range analysis proves that x * c + y does not
//    wrap and that 0 <= y < c and x * c + y >= 0 (so truncation and flooring
//    agree). Ranges come from constants, loop variables with constant bounds,
//    lets, and the caller's RangeMap;
//  * select / if_then_else with a constant condition, `if (true)` /
//    `if (false)`, loops with zero extent, lets of constants and vars
//    inlined.
// Float expressions are folded only where the result is exact in IEEE
// arithmetic of the type (constant folding rounds to the type).
#pragma once

#include <cstdint>
#include <unordered_map>

#include "kiln/ir/expr.h"
#include "kiln/ir/function.h"
#include "kiln/ir/stmt.h"

namespace kiln::ir {

// Known inclusive bounds of an integer variable.
struct IntRange {
  int64_t min;
  int64_t max;
};
using RangeMap = std::unordered_map<const VarNode*, IntRange>;

Expr Simplify(const Expr& e, const RangeMap& ranges = {});
Stmt Simplify(const Stmt& s);
Function Simplify(const Function& f);

}  // namespace kiln::ir
