#include "kiln/ir/structural_equal.h"

#include <cmath>

#include "kiln/ir/expr_nodes.h"

namespace kiln::ir {
namespace {

bool AllEqual(const std::vector<Expr>& a, const std::vector<Expr>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!StructurallyEqual(a[i], b[i])) return false;
  }
  return true;
}

}  // namespace

bool StructurallyEqual(const Expr& a, const Expr& b) {
  if (a.same_as(b)) return true;
  if (!a.defined() || !b.defined()) return false;
  if (a.kind() != b.kind() || a.dtype() != b.dtype()) return false;
  switch (a.kind()) {
    case ExprKind::kIntImm:
      return a.as<IntImmNode>()->value == b.as<IntImmNode>()->value;
    case ExprKind::kFloatImm: {
      double x = a.as<FloatImmNode>()->value, y = b.as<FloatImmNode>()->value;
      // 0.0 and -0.0 differ (a select between them is no constant), as do
      // nan and -nan.
      return (x == y || (std::isnan(x) && std::isnan(y))) && std::signbit(x) == std::signbit(y);
    }
    case ExprKind::kBoolImm:
      return a.as<BoolImmNode>()->value == b.as<BoolImmNode>()->value;
    case ExprKind::kVar:
      return false;  // identity was checked above
    case ExprKind::kBinary: {
      const auto *x = a.as<BinaryNode>(), *y = b.as<BinaryNode>();
      return x->op == y->op && StructurallyEqual(x->a, y->a) && StructurallyEqual(x->b, y->b);
    }
    case ExprKind::kNot:
      return StructurallyEqual(a.as<NotNode>()->a, b.as<NotNode>()->a);
    case ExprKind::kSelect: {
      const auto *x = a.as<SelectNode>(), *y = b.as<SelectNode>();
      return StructurallyEqual(x->cond, y->cond) &&
             StructurallyEqual(x->true_value, y->true_value) &&
             StructurallyEqual(x->false_value, y->false_value);
    }
    case ExprKind::kCast:
      return StructurallyEqual(a.as<CastNode>()->value, b.as<CastNode>()->value);
    case ExprKind::kReinterpret:
      return StructurallyEqual(a.as<ReinterpretNode>()->value, b.as<ReinterpretNode>()->value);
    case ExprKind::kLet: {
      const auto *x = a.as<LetNode>(), *y = b.as<LetNode>();
      return x->var.same_as(y->var) && StructurallyEqual(x->value, y->value) &&
             StructurallyEqual(x->body, y->body);
    }
    case ExprKind::kRamp: {
      const auto *x = a.as<RampNode>(), *y = b.as<RampNode>();
      return x->lanes == y->lanes && StructurallyEqual(x->base, y->base) &&
             StructurallyEqual(x->stride, y->stride);
    }
    case ExprKind::kBroadcast: {
      const auto *x = a.as<BroadcastNode>(), *y = b.as<BroadcastNode>();
      return x->lanes == y->lanes && StructurallyEqual(x->value, y->value);
    }
    case ExprKind::kLoad: {
      const auto *x = a.as<LoadNode>(), *y = b.as<LoadNode>();
      return x->buffer.same_as(y->buffer) && AllEqual(x->indices, y->indices);
    }
    case ExprKind::kCall: {
      const auto *x = a.as<CallNode>(), *y = b.as<CallNode>();
      return x->op == y->op && AllEqual(x->args, y->args);
    }
  }
  return false;
}

}  // namespace kiln::ir
