// Algebraic simplification that preserves the semantics in expr.h exactly.
//
//  * constant folding: integer arithmetic with wrap-around and truncating /
//    flooring division (division by a constant zero is left for run time),
//    comparisons, logic, casts, integer bit intrinsics, and float + - * /
//    rounded to the type (float math intrinsics are never folded);
//  * identities: x + 0, x - 0, x * 1, x / 1, and for integers x * 0, x % 1,
//    x - x, x == x; min(x, x); x * 1.0, x / 1.0, x - 0.0 for floats (not
//    x + 0.0, x * 0.0 or x - x: signed zeros, NaN, infinities); !!b,
//    b && true, b || false, ...;
//  * reassociation of integer constants, exact under wrap-around:
//    (x + 3) + 4 -> x + 7, (x - 3) + 4 -> x + 1, (x * 4) * 2 -> x * 8,
//    constants moved right (3 + x -> x + 3), x + -3 -> x - 3;
//  * quotient and remainder: (x / c) * c + x % c -> x and likewise with
//    floor_div/floor_mod (any x; c a positive constant), also where x is
//    itself a quotient y / k merged into the first term as y / (k * c);
//    (x / c0) / c -> x / (c0 * c) for positive constants (either
//    rounding) whose product fits the type;
//  * division, only where provably safe: (x * m) % c -> 0 when c divides m
//    and is a power of two (a multiple of c stays one under wrap-around);
//    (x * m + y) / c -> x * (m / c) and (x * m + y) % c -> y (for /, %,
//    floor_div, floor_mod; c divides m) when the range analysis proves that
//    x * m + y cannot wrap, that 0 <= y < c, and for truncating / and % with
//    y present that the dividend is not negative; a / c -> 0 and a % c -> a
//    when 0 <= a < c. Ranges come from constants, loop variables (thread
//    indices included) with known bounds, lets, and the caller's RangeMap;
//  * ramp(b, s, n) / c -> broadcast(b / c, n) and ramp(b, s, n) % c ->
//    ramp(b % c, s, n) (all four roundings) where b is provably a multiple
//    of some g that divides c with s * (n - 1) < g, b's range is known, and
//    for truncating / and % b >= 0: no two lanes straddle a multiple of c
//    (four channels of an NHWC tap stay one vector load);
//  * comparisons decided by ranges (tx < 64 inside threadIdx.x(0, 64));
//  * select / if_then_else with a constant condition or equal sides;
//    broadcasts and ramps combined lane-wise;
//  * statements: if (true) / if (false), while (false), assert(true), loops
//    of zero extent, empty allocations and branches removed; serial and
//    unrolled loops of extent 1 replaced by their body (the loop var bound
//    to the loop's min); lets of constants and variables inlined.
// Simplify never changes a type and returns the very same handle when
// nothing changed.
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
