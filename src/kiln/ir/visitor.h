// Read-only traversal of expressions and statements.
//
// Subclass, override the Visit* methods for the nodes of interest, and call
// the base method to keep recursing into children. Defaults visit every
// child expression/statement in evaluation order. Binding occurrences (the
// var of a let or the loop var of a for) are not visited with VisitVar: only
// uses are. Buffers referenced by loads, stores and allocations are reported
// through VisitBuffer (default: nothing); the shape/stride expressions of an
// allocated buffer are visited by VisitAllocate, those of parameter buffers
// are not visited at all.
#pragma once

#include "kiln/ir/expr.h"
#include "kiln/ir/expr_nodes.h"
#include "kiln/ir/stmt.h"

namespace kiln::ir {

class ExprVisitor {
 public:
  virtual ~ExprVisitor() = default;

  // Dispatches on e's kind. Null expressions are ignored.
  virtual void VisitExpr(const Expr& e);

  virtual void VisitIntImm(const IntImmNode* op) {}
  virtual void VisitFloatImm(const FloatImmNode* op) {}
  virtual void VisitBoolImm(const BoolImmNode* op) {}
  virtual void VisitVar(const VarNode* op) {}
  virtual void VisitBinary(const BinaryNode* op);
  virtual void VisitNot(const NotNode* op);
  virtual void VisitSelect(const SelectNode* op);
  virtual void VisitCast(const CastNode* op);
  virtual void VisitReinterpret(const ReinterpretNode* op);
  virtual void VisitLet(const LetNode* op);  // value, then body
  virtual void VisitRamp(const RampNode* op);
  virtual void VisitBroadcast(const BroadcastNode* op);
  virtual void VisitLoad(const LoadNode* op);  // VisitBuffer, then indices
  virtual void VisitCall(const CallNode* op);

  // Called for each buffer a load/store/alloc names.
  virtual void VisitBuffer(const Buffer& buffer) {}
};

// Visits statements and, through ExprVisitor, the expressions inside them.
class StmtVisitor : public ExprVisitor {
 public:
  // Dispatches on s's kind. Null statements are ignored.
  virtual void VisitStmt(const Stmt& s);

  virtual void VisitLetStmt(const LetStmtNode* op);    // value, body
  virtual void VisitStore(const StoreNode* op);        // VisitBuffer, indices, value
  virtual void VisitAllocate(const AllocateNode* op);  // VisitBuffer, shape, strides, body
  virtual void VisitFor(const ForNode* op);            // min, extent, step, body
  virtual void VisitWhile(const WhileNode* op);        // cond, body
  virtual void VisitIf(const IfNode* op);              // cond, then, else
  virtual void VisitSeq(const SeqNode* op);
  virtual void VisitBarrier(const BarrierNode* op) {}
  virtual void VisitAssert(const AssertNode* op);
  virtual void VisitEvaluate(const EvaluateNode* op);
};

}  // namespace kiln::ir
