// Constant folding with exactly the semantics stated in expr.h (wrap-around
// integers, truncating / and %, flooring floor_div / floor_mod, IEEE floats
// rounded to their type). Used by the simplifier; usable by any pass.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kiln/ir/expr.h"
#include "kiln/ir/expr_nodes.h"

namespace kiln::ir {

// a op b for scalar constant operands of one type, or nullopt when the
// operands are not both constants or the fold is not done (integer division
// by zero; float %, floor_div, floor_mod, min, max).
std::optional<Expr> FoldBinary(BinaryOp op, const Expr& a, const Expr& b);

// An integer intrinsic (bitwise_*, shift_left, shift_right, popcount, abs)
// of scalar integer constants, or nullopt. Float math is never folded: the
// device's exp, sin, ... may round differently from the host's.
std::optional<Expr> FoldCall(Intrinsic op, const std::vector<Expr>& args);

// Cast of a scalar constant to the scalar type `dtype`, or nullopt.
std::optional<Expr> FoldCast(DataType dtype, const Expr& value);

// Integer arithmetic of one scalar integer type on normalized values (see
// IntImmNode::value). Division by zero follows expr.h: x / 0 == x, x % 0 == 0.
int64_t IntBinary(BinaryOp op, DataType dtype, int64_t a, int64_t b);
// Comparisons (kEq .. kGe) of normalized integer values of `dtype`.
bool IntCompare(BinaryOp op, DataType dtype, int64_t a, int64_t b);

}  // namespace kiln::ir
