// Rewriting traversal: returns a new tree, sharing every unchanged subtree.
//
// Each Mutate* method gets the node and the handle that holds it, and returns
// the replacement (the same handle when nothing changed: defaults rebuild a
// node only when a child came back different, so identity is preserved for
// untouched parts). As in visitor.h, binding vars are not mutated by default
// and buffers go through MutateBuffer (default: unchanged). A subclass that
// replaces a buffer must return the same replacement for every use of it
// (keep a map).
#pragma once

#include <unordered_map>

#include "kiln/ir/expr.h"
#include "kiln/ir/expr_nodes.h"
#include "kiln/ir/stmt.h"

namespace kiln::ir {

class ExprMutator {
 public:
  virtual ~ExprMutator() = default;

  // Dispatches on e's kind. Returns null for null.
  virtual Expr MutateExpr(const Expr& e);

  virtual Expr MutateIntImm(const IntImmNode* op, const Expr& e) { return e; }
  virtual Expr MutateFloatImm(const FloatImmNode* op, const Expr& e) { return e; }
  virtual Expr MutateBoolImm(const BoolImmNode* op, const Expr& e) { return e; }
  virtual Expr MutateVar(const VarNode* op, const Expr& e) { return e; }
  virtual Expr MutateBinary(const BinaryNode* op, const Expr& e);
  virtual Expr MutateNot(const NotNode* op, const Expr& e);
  virtual Expr MutateSelect(const SelectNode* op, const Expr& e);
  virtual Expr MutateCast(const CastNode* op, const Expr& e);
  virtual Expr MutateReinterpret(const ReinterpretNode* op, const Expr& e);
  virtual Expr MutateLet(const LetNode* op, const Expr& e);
  virtual Expr MutateRamp(const RampNode* op, const Expr& e);
  virtual Expr MutateBroadcast(const BroadcastNode* op, const Expr& e);
  virtual Expr MutateLoad(const LoadNode* op, const Expr& e);
  virtual Expr MutateCall(const CallNode* op, const Expr& e);

  virtual Buffer MutateBuffer(const Buffer& buffer) { return buffer; }
};

class StmtMutator : public ExprMutator {
 public:
  // Dispatches on s's kind. Returns null for null.
  virtual Stmt MutateStmt(const Stmt& s);

  virtual Stmt MutateLetStmt(const LetStmtNode* op, const Stmt& s);
  virtual Stmt MutateStore(const StoreNode* op, const Stmt& s);
  virtual Stmt MutateAllocate(const AllocateNode* op, const Stmt& s);
  virtual Stmt MutateFor(const ForNode* op, const Stmt& s);
  virtual Stmt MutateWhile(const WhileNode* op, const Stmt& s);
  virtual Stmt MutateIf(const IfNode* op, const Stmt& s);
  virtual Stmt MutateSeq(const SeqNode* op, const Stmt& s);
  virtual Stmt MutateBarrier(const BarrierNode* op, const Stmt& s) { return s; }
  virtual Stmt MutateAssert(const AssertNode* op, const Stmt& s);
  virtual Stmt MutateEvaluate(const EvaluateNode* op, const Stmt& s);
};

// Replaces uses of the given vars (keys are VarNode identities).
using VarMap = std::unordered_map<const VarNode*, Expr>;
Expr Substitute(const Expr& e, const VarMap& map);
Stmt Substitute(const Stmt& s, const VarMap& map);

}  // namespace kiln::ir
