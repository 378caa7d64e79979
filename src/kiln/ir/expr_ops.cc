#include "kiln/ir/expr_ops.h"

#include <cmath>

namespace kiln::ir {
namespace {

// A C++ number next to an expression becomes a constant of the expression's type.
Expr Like(const Expr& other, int value) {
  return MakeConst(other.dtype(), int64_t{value});
}
Expr Like(const Expr& other, double value) {
  return MakeConst(other.dtype(), value);
}

}  // namespace

#define KILN_IR_DEFINE_BINARY_OPERATOR(OP, KIND)   \
  Expr operator OP(const Expr& a, const Expr& b) { \
    return BinaryNode::make(KIND, a, b);           \
  }                                                \
  Expr operator OP(const Expr& a, int b) {         \
    return BinaryNode::make(KIND, a, Like(a, b));  \
  }                                                \
  Expr operator OP(int a, const Expr& b) {         \
    return BinaryNode::make(KIND, Like(b, a), b);  \
  }                                                \
  Expr operator OP(const Expr& a, double b) {      \
    return BinaryNode::make(KIND, a, Like(a, b));  \
  }                                                \
  Expr operator OP(double a, const Expr& b) {      \
    return BinaryNode::make(KIND, Like(b, a), b);  \
  }

KILN_IR_DEFINE_BINARY_OPERATOR(+, BinaryOp::kAdd)
KILN_IR_DEFINE_BINARY_OPERATOR(-, BinaryOp::kSub)
KILN_IR_DEFINE_BINARY_OPERATOR(*, BinaryOp::kMul)
KILN_IR_DEFINE_BINARY_OPERATOR(/, BinaryOp::kDiv)
KILN_IR_DEFINE_BINARY_OPERATOR(%, BinaryOp::kMod)
KILN_IR_DEFINE_BINARY_OPERATOR(==, BinaryOp::kEq)
KILN_IR_DEFINE_BINARY_OPERATOR(!=, BinaryOp::kNe)
KILN_IR_DEFINE_BINARY_OPERATOR(<, BinaryOp::kLt)
KILN_IR_DEFINE_BINARY_OPERATOR(<=, BinaryOp::kLe)
KILN_IR_DEFINE_BINARY_OPERATOR(>, BinaryOp::kGt)
KILN_IR_DEFINE_BINARY_OPERATOR(>=, BinaryOp::kGe)
#undef KILN_IR_DEFINE_BINARY_OPERATOR

Expr operator&&(const Expr& a, const Expr& b) {
  return BinaryNode::make(BinaryOp::kAnd, a, b);
}
Expr operator||(const Expr& a, const Expr& b) {
  return BinaryNode::make(BinaryOp::kOr, a, b);
}
Expr operator!(const Expr& a) {
  return NotNode::make(a);
}
Expr operator-(const Expr& a) {
  // -0.0 - a is exactly a with its sign flipped, +0 and NaN included; 0 - a
  // would give +0 for +0.
  if (a.dtype().is_float()) return BinaryNode::make(BinaryOp::kSub, MakeConst(a.dtype(), -0.0), a);
  return BinaryNode::make(BinaryOp::kSub, MakeZero(a.dtype()), a);
}

bool IsNegation(const BinaryNode* op) {
  if (op->op != BinaryOp::kSub) return false;
  if (!op->a.dtype().is_float()) return IsConstInt(op->a, 0);
  std::optional<double> c = AsConstFloat(op->a);
  return c.has_value() && *c == 0 && std::signbit(*c);
}

Expr FloorDiv(const Expr& a, const Expr& b) {
  return BinaryNode::make(BinaryOp::kFloorDiv, a, b);
}
Expr FloorMod(const Expr& a, const Expr& b) {
  return BinaryNode::make(BinaryOp::kFloorMod, a, b);
}
Expr Min(const Expr& a, const Expr& b) {
  return BinaryNode::make(BinaryOp::kMin, a, b);
}
Expr Max(const Expr& a, const Expr& b) {
  return BinaryNode::make(BinaryOp::kMax, a, b);
}
Expr Select(const Expr& cond, const Expr& t, const Expr& f) {
  return SelectNode::make(cond, t, f);
}
Expr Cast(DataType dtype, const Expr& value) {
  return CastNode::make(dtype, value);
}
Expr Reinterpret(DataType dtype, const Expr& value) {
  return ReinterpretNode::make(dtype, value);
}
Expr Let(const Var& var, const Expr& value, const Expr& body) {
  return LetNode::make(var, value, body);
}
Expr Ramp(const Expr& base, const Expr& stride, int lanes) {
  return RampNode::make(base, stride, lanes);
}
Expr Broadcast(const Expr& value, int lanes) {
  return BroadcastNode::make(value, lanes);
}
Expr Load(const Buffer& buffer, std::vector<Expr> indices) {
  return LoadNode::make(buffer, std::move(indices));
}
Expr Call(Intrinsic op, std::vector<Expr> args) {
  return CallNode::make(op, std::move(args));
}
Expr IfThenElse(const Expr& cond, const Expr& t, const Expr& f) {
  return CallNode::make(Intrinsic::kIfThenElse, {cond, t, f});
}

Expr IntConst(DataType dtype, int64_t value) {
  return IntImmNode::make(dtype, value);
}
Expr FloatConst(DataType dtype, double value) {
  return FloatImmNode::make(dtype, value);
}
Expr BoolConst(bool value) {
  return BoolImmNode::make(value);
}

}  // namespace kiln::ir
