#include "kiln/ir/expr.h"

#include "kiln/ir/expr_nodes.h"

namespace kiln::ir {

Expr::Expr(int value) : Expr(IntImmNode::make(kI32, value)) {}

Var::Var(std::string name, DataType dtype) {
  KILN_CHECK_MSG(dtype.IsValid(), "invalid type for var ", name);
  auto node = std::make_shared<VarNode>();
  node->name = std::move(name);
  node->dtype = dtype;
  *this = Var(std::shared_ptr<const ExprNode>(std::move(node)));
}

Var Var::FromExpr(const Expr& e) {
  KILN_CHECK(e.as<VarNode>() != nullptr);
  return Var(e.node());
}

}  // namespace kiln::ir
