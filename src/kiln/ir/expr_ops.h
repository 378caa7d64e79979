// Operators and helper functions that build expressions, for writing IR in C++:
//
//   Var i("i", kI32);
//   Expr e = Select(i < n, A_load * 2.0, MakeZero(kF32));
//
// Arithmetic and comparison operators build BinaryNodes; they do not fold
// constants (use Simplify) and do not convert types: both operands must
// already agree, except that a plain C++ `int` / `double` operand becomes a
// constant of the other operand's type (`x + 1` with x: u32 is `x + 1u32`;
// `y * 2.0` with y: f16 is `y * 2.0f16`). Putting a double next to an integer
// expression is a KILN_CHECK failure.
//
// Note `==` builds an equality node; compare handles with same_as().
#pragma once

#include <vector>

#include "kiln/ir/expr.h"
#include "kiln/ir/expr_nodes.h"

namespace kiln::ir {

#define KILN_IR_DECLARE_BINARY_OPERATOR(OP)       \
  Expr operator OP(const Expr& a, const Expr& b); \
  Expr operator OP(const Expr& a, int b);         \
  Expr operator OP(int a, const Expr& b);         \
  Expr operator OP(const Expr& a, double b);      \
  Expr operator OP(double a, const Expr& b);

KILN_IR_DECLARE_BINARY_OPERATOR(+)
KILN_IR_DECLARE_BINARY_OPERATOR(-)
KILN_IR_DECLARE_BINARY_OPERATOR(*)
KILN_IR_DECLARE_BINARY_OPERATOR(/)
KILN_IR_DECLARE_BINARY_OPERATOR(%)
KILN_IR_DECLARE_BINARY_OPERATOR(==)
KILN_IR_DECLARE_BINARY_OPERATOR(!=)
KILN_IR_DECLARE_BINARY_OPERATOR(<)
KILN_IR_DECLARE_BINARY_OPERATOR(<=)
KILN_IR_DECLARE_BINARY_OPERATOR(>)
KILN_IR_DECLARE_BINARY_OPERATOR(>=)
#undef KILN_IR_DECLARE_BINARY_OPERATOR

Expr operator&&(const Expr& a, const Expr& b);
Expr operator||(const Expr& a, const Expr& b);
Expr operator!(const Expr& a);
// a negated: -0.0 - a for floats (a with its sign flipped, as IEEE 754's
// negation: -(+0) is -0), 0 - a for integers (wrapping).
Expr operator-(const Expr& a);
// Whether `op` is such a negation (its operand is op->b).
bool IsNegation(const BinaryNode* op);

Expr FloorDiv(const Expr& a, const Expr& b);
Expr FloorMod(const Expr& a, const Expr& b);
Expr Min(const Expr& a, const Expr& b);
Expr Max(const Expr& a, const Expr& b);
Expr Select(const Expr& cond, const Expr& t, const Expr& f);
Expr Cast(DataType dtype, const Expr& value);
Expr Reinterpret(DataType dtype, const Expr& value);
Expr Let(const Var& var, const Expr& value, const Expr& body);
Expr Ramp(const Expr& base, const Expr& stride, int lanes);
Expr Broadcast(const Expr& value, int lanes);
Expr Load(const Buffer& buffer, std::vector<Expr> indices);
Expr Call(Intrinsic op, std::vector<Expr> args);
// if_then_else(c, t, f): evaluates only the taken side.
Expr IfThenElse(const Expr& cond, const Expr& t, const Expr& f);

// Typed constants.
Expr IntConst(DataType dtype, int64_t value);
Expr FloatConst(DataType dtype, double value);
Expr BoolConst(bool value);

}  // namespace kiln::ir
