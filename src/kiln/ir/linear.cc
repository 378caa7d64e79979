#include "kiln/ir/linear.h"

#include "kiln/ir/expr_nodes.h"
#include "kiln/ir/expr_ops.h"
#include "kiln/ir/simplifier.h"
#include "kiln/ir/structural_equal.h"

namespace kiln::ir {
namespace {

constexpr int kMaxExpandDepth = 16;

bool Decompose(const Expr& e, int64_t scale, LinearSum& out, const ExpandVar& expand, int depth) {
  constexpr int64_t kLimit = int64_t{1} << 31;
  if (scale <= -kLimit || scale >= kLimit) return false;
  if (const auto* imm = e.as<IntImmNode>()) {
    out.constant += scale * imm->value;
    return true;
  }
  if (const auto* b = e.as<BinaryNode>()) {
    switch (b->op) {
      case BinaryOp::kAdd:
      case BinaryOp::kSub:
        return Decompose(b->a, scale, out, expand, depth) &&
               Decompose(b->b, b->op == BinaryOp::kAdd ? scale : -scale, out, expand, depth);
      case BinaryOp::kMul:
        if (std::optional<int64_t> c = AsConstInt(b->b); c && e.dtype().is_scalar()) {
          return Decompose(b->a, scale * *c, out, expand, depth);
        }
        if (std::optional<int64_t> c = AsConstInt(b->a); c && e.dtype().is_scalar()) {
          return Decompose(b->b, scale * *c, out, expand, depth);
        }
        break;
      default:
        break;
    }
  }
  if (const auto* var = e.as<VarNode>(); var && expand && depth < kMaxExpandDepth) {
    if (Expr value = expand(var); value.defined()) {
      return Decompose(value, scale, out, expand, depth + 1);
    }
  }
  out.Add(e, scale);
  return true;
}

}  // namespace

void LinearSum::Add(const Expr& term, int64_t coefficient) {
  for (auto& [t, c] : terms) {
    if (StructurallyEqual(t, term)) {
      c += coefficient;
      return;
    }
  }
  terms.emplace_back(term, coefficient);
}

Expr LinearSum::ToExpr(DataType type) const {
  Expr sum = IntConst(type, constant);
  for (const auto& [term, c] : terms) {
    if (c == 0) continue;
    const int64_t magnitude = c < 0 ? -c : c;
    const Expr scaled = magnitude == 1 ? term : term * IntConst(type, magnitude);
    sum = c < 0 ? sum - scaled : sum + scaled;
  }
  return Simplify(sum);
}

bool AddLinear(const Expr& e, int64_t scale, LinearSum& out, const ExpandVar& expand) {
  return Decompose(e, scale, out, expand, 0);
}

}  // namespace kiln::ir
