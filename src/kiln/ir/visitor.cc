#include "kiln/ir/visitor.h"

namespace kiln::ir {

void ExprVisitor::VisitExpr(const Expr& e) {
  if (!e.defined()) return;
  switch (e.kind()) {
    case ExprKind::kIntImm:
      return VisitIntImm(e.as<IntImmNode>());
    case ExprKind::kFloatImm:
      return VisitFloatImm(e.as<FloatImmNode>());
    case ExprKind::kBoolImm:
      return VisitBoolImm(e.as<BoolImmNode>());
    case ExprKind::kVar:
      return VisitVar(e.as<VarNode>());
    case ExprKind::kBinary:
      return VisitBinary(e.as<BinaryNode>());
    case ExprKind::kNot:
      return VisitNot(e.as<NotNode>());
    case ExprKind::kSelect:
      return VisitSelect(e.as<SelectNode>());
    case ExprKind::kCast:
      return VisitCast(e.as<CastNode>());
    case ExprKind::kReinterpret:
      return VisitReinterpret(e.as<ReinterpretNode>());
    case ExprKind::kLet:
      return VisitLet(e.as<LetNode>());
    case ExprKind::kRamp:
      return VisitRamp(e.as<RampNode>());
    case ExprKind::kBroadcast:
      return VisitBroadcast(e.as<BroadcastNode>());
    case ExprKind::kLoad:
      return VisitLoad(e.as<LoadNode>());
    case ExprKind::kCall:
      return VisitCall(e.as<CallNode>());
  }
}

void ExprVisitor::VisitBinary(const BinaryNode* op) {
  VisitExpr(op->a);
  VisitExpr(op->b);
}

void ExprVisitor::VisitNot(const NotNode* op) {
  VisitExpr(op->a);
}

void ExprVisitor::VisitSelect(const SelectNode* op) {
  VisitExpr(op->cond);
  VisitExpr(op->true_value);
  VisitExpr(op->false_value);
}

void ExprVisitor::VisitCast(const CastNode* op) {
  VisitExpr(op->value);
}
void ExprVisitor::VisitReinterpret(const ReinterpretNode* op) {
  VisitExpr(op->value);
}

void ExprVisitor::VisitLet(const LetNode* op) {
  VisitExpr(op->value);
  VisitExpr(op->body);
}

void ExprVisitor::VisitRamp(const RampNode* op) {
  VisitExpr(op->base);
  VisitExpr(op->stride);
}

void ExprVisitor::VisitBroadcast(const BroadcastNode* op) {
  VisitExpr(op->value);
}

void ExprVisitor::VisitLoad(const LoadNode* op) {
  VisitBuffer(op->buffer);
  for (const Expr& index : op->indices) VisitExpr(index);
}

void ExprVisitor::VisitCall(const CallNode* op) {
  for (const Expr& arg : op->args) VisitExpr(arg);
}

void StmtVisitor::VisitStmt(const Stmt& s) {
  if (!s.defined()) return;
  switch (s.kind()) {
    case StmtKind::kLetStmt:
      return VisitLetStmt(s.as<LetStmtNode>());
    case StmtKind::kStore:
      return VisitStore(s.as<StoreNode>());
    case StmtKind::kAllocate:
      return VisitAllocate(s.as<AllocateNode>());
    case StmtKind::kFor:
      return VisitFor(s.as<ForNode>());
    case StmtKind::kWhile:
      return VisitWhile(s.as<WhileNode>());
    case StmtKind::kIf:
      return VisitIf(s.as<IfNode>());
    case StmtKind::kSeq:
      return VisitSeq(s.as<SeqNode>());
    case StmtKind::kBarrier:
      return VisitBarrier(s.as<BarrierNode>());
    case StmtKind::kAssert:
      return VisitAssert(s.as<AssertNode>());
    case StmtKind::kEvaluate:
      return VisitEvaluate(s.as<EvaluateNode>());
  }
}

void StmtVisitor::VisitLetStmt(const LetStmtNode* op) {
  VisitExpr(op->value);
  VisitStmt(op->body);
}

void StmtVisitor::VisitStore(const StoreNode* op) {
  VisitBuffer(op->buffer);
  for (const Expr& index : op->indices) VisitExpr(index);
  VisitExpr(op->value);
}

void StmtVisitor::VisitAllocate(const AllocateNode* op) {
  VisitBuffer(op->buffer);
  for (const Expr& e : op->buffer.shape()) VisitExpr(e);
  for (const Expr& e : op->buffer.strides()) VisitExpr(e);
  VisitStmt(op->body);
}

void StmtVisitor::VisitFor(const ForNode* op) {
  VisitExpr(op->min);
  VisitExpr(op->extent);
  VisitExpr(op->step);
  VisitStmt(op->body);
}

void StmtVisitor::VisitWhile(const WhileNode* op) {
  VisitExpr(op->cond);
  VisitStmt(op->body);
}

void StmtVisitor::VisitIf(const IfNode* op) {
  VisitExpr(op->cond);
  VisitStmt(op->then_case);
  VisitStmt(op->else_case);
}

void StmtVisitor::VisitSeq(const SeqNode* op) {
  for (const Stmt& s : op->stmts) VisitStmt(s);
}

void StmtVisitor::VisitAssert(const AssertNode* op) {
  VisitExpr(op->cond);
}
void StmtVisitor::VisitEvaluate(const EvaluateNode* op) {
  VisitExpr(op->value);
}

}  // namespace kiln::ir
