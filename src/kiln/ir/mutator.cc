#include "kiln/ir/mutator.h"

namespace kiln::ir {
namespace {

// Mutates each element; returns true if any changed.
bool MutateAll(ExprMutator* m, const std::vector<Expr>& in, std::vector<Expr>* out) {
  bool changed = false;
  out->reserve(in.size());
  for (const Expr& e : in) {
    out->push_back(m->MutateExpr(e));
    changed |= !out->back().same_as(e);
  }
  return changed;
}

}  // namespace

Expr ExprMutator::MutateExpr(const Expr& e) {
  if (!e.defined()) return e;
  switch (e.kind()) {
    case ExprKind::kIntImm:
      return MutateIntImm(e.as<IntImmNode>(), e);
    case ExprKind::kFloatImm:
      return MutateFloatImm(e.as<FloatImmNode>(), e);
    case ExprKind::kBoolImm:
      return MutateBoolImm(e.as<BoolImmNode>(), e);
    case ExprKind::kVar:
      return MutateVar(e.as<VarNode>(), e);
    case ExprKind::kBinary:
      return MutateBinary(e.as<BinaryNode>(), e);
    case ExprKind::kNot:
      return MutateNot(e.as<NotNode>(), e);
    case ExprKind::kSelect:
      return MutateSelect(e.as<SelectNode>(), e);
    case ExprKind::kCast:
      return MutateCast(e.as<CastNode>(), e);
    case ExprKind::kReinterpret:
      return MutateReinterpret(e.as<ReinterpretNode>(), e);
    case ExprKind::kLet:
      return MutateLet(e.as<LetNode>(), e);
    case ExprKind::kRamp:
      return MutateRamp(e.as<RampNode>(), e);
    case ExprKind::kBroadcast:
      return MutateBroadcast(e.as<BroadcastNode>(), e);
    case ExprKind::kLoad:
      return MutateLoad(e.as<LoadNode>(), e);
    case ExprKind::kCall:
      return MutateCall(e.as<CallNode>(), e);
  }
  return e;
}

Expr ExprMutator::MutateBinary(const BinaryNode* op, const Expr& e) {
  Expr a = MutateExpr(op->a);
  Expr b = MutateExpr(op->b);
  if (a.same_as(op->a) && b.same_as(op->b)) return e;
  return BinaryNode::make(op->op, a, b);
}

Expr ExprMutator::MutateNot(const NotNode* op, const Expr& e) {
  Expr a = MutateExpr(op->a);
  return a.same_as(op->a) ? e : NotNode::make(a);
}

Expr ExprMutator::MutateSelect(const SelectNode* op, const Expr& e) {
  Expr c = MutateExpr(op->cond);
  Expr t = MutateExpr(op->true_value);
  Expr f = MutateExpr(op->false_value);
  if (c.same_as(op->cond) && t.same_as(op->true_value) && f.same_as(op->false_value)) return e;
  return SelectNode::make(c, t, f);
}

Expr ExprMutator::MutateCast(const CastNode* op, const Expr& e) {
  Expr v = MutateExpr(op->value);
  return v.same_as(op->value) ? e : CastNode::make(op->dtype, v);
}

Expr ExprMutator::MutateReinterpret(const ReinterpretNode* op, const Expr& e) {
  Expr v = MutateExpr(op->value);
  return v.same_as(op->value) ? e : ReinterpretNode::make(op->dtype, v);
}

Expr ExprMutator::MutateLet(const LetNode* op, const Expr& e) {
  Expr v = MutateExpr(op->value);
  Expr body = MutateExpr(op->body);
  if (v.same_as(op->value) && body.same_as(op->body)) return e;
  return LetNode::make(op->var, v, body);
}

Expr ExprMutator::MutateRamp(const RampNode* op, const Expr& e) {
  Expr base = MutateExpr(op->base);
  Expr stride = MutateExpr(op->stride);
  if (base.same_as(op->base) && stride.same_as(op->stride)) return e;
  return RampNode::make(base, stride, op->lanes);
}

Expr ExprMutator::MutateBroadcast(const BroadcastNode* op, const Expr& e) {
  Expr v = MutateExpr(op->value);
  return v.same_as(op->value) ? e : BroadcastNode::make(v, op->lanes);
}

Expr ExprMutator::MutateLoad(const LoadNode* op, const Expr& e) {
  Buffer buffer = MutateBuffer(op->buffer);
  std::vector<Expr> indices;
  bool changed = MutateAll(this, op->indices, &indices);
  if (!changed && buffer.same_as(op->buffer)) return e;
  return LoadNode::make(buffer, std::move(indices));
}

Expr ExprMutator::MutateCall(const CallNode* op, const Expr& e) {
  std::vector<Expr> args;
  if (!MutateAll(this, op->args, &args)) return e;
  return CallNode::make(op->op, std::move(args));
}

Stmt StmtMutator::MutateStmt(const Stmt& s) {
  if (!s.defined()) return s;
  switch (s.kind()) {
    case StmtKind::kLetStmt:
      return MutateLetStmt(s.as<LetStmtNode>(), s);
    case StmtKind::kStore:
      return MutateStore(s.as<StoreNode>(), s);
    case StmtKind::kAllocate:
      return MutateAllocate(s.as<AllocateNode>(), s);
    case StmtKind::kFor:
      return MutateFor(s.as<ForNode>(), s);
    case StmtKind::kWhile:
      return MutateWhile(s.as<WhileNode>(), s);
    case StmtKind::kIf:
      return MutateIf(s.as<IfNode>(), s);
    case StmtKind::kSeq:
      return MutateSeq(s.as<SeqNode>(), s);
    case StmtKind::kBarrier:
      return MutateBarrier(s.as<BarrierNode>(), s);
    case StmtKind::kAssert:
      return MutateAssert(s.as<AssertNode>(), s);
    case StmtKind::kEvaluate:
      return MutateEvaluate(s.as<EvaluateNode>(), s);
  }
  return s;
}

Stmt StmtMutator::MutateLetStmt(const LetStmtNode* op, const Stmt& s) {
  Expr v = MutateExpr(op->value);
  Stmt body = MutateStmt(op->body);
  if (v.same_as(op->value) && body.same_as(op->body)) return s;
  return LetStmtNode::make(op->var, v, body);
}

Stmt StmtMutator::MutateStore(const StoreNode* op, const Stmt& s) {
  Buffer buffer = MutateBuffer(op->buffer);
  std::vector<Expr> indices;
  bool changed = MutateAll(this, op->indices, &indices);
  Expr v = MutateExpr(op->value);
  if (!changed && v.same_as(op->value) && buffer.same_as(op->buffer)) return s;
  return StoreNode::make(buffer, std::move(indices), v);
}

Stmt StmtMutator::MutateAllocate(const AllocateNode* op, const Stmt& s) {
  Buffer buffer = MutateBuffer(op->buffer);
  Stmt body = MutateStmt(op->body);
  if (buffer.same_as(op->buffer) && body.same_as(op->body)) return s;
  return AllocateNode::make(buffer, body);
}

Stmt StmtMutator::MutateFor(const ForNode* op, const Stmt& s) {
  Expr min = MutateExpr(op->min);
  Expr extent = MutateExpr(op->extent);
  Expr step = MutateExpr(op->step);
  Stmt body = MutateStmt(op->body);
  if (min.same_as(op->min) && extent.same_as(op->extent) && step.same_as(op->step) &&
      body.same_as(op->body)) {
    return s;
  }
  return ForNode::make(op->loop_var, min, extent, op->kind, body, step);
}

Stmt StmtMutator::MutateWhile(const WhileNode* op, const Stmt& s) {
  Expr c = MutateExpr(op->cond);
  Stmt body = MutateStmt(op->body);
  if (c.same_as(op->cond) && body.same_as(op->body)) return s;
  return WhileNode::make(c, body);
}

Stmt StmtMutator::MutateIf(const IfNode* op, const Stmt& s) {
  Expr c = MutateExpr(op->cond);
  Stmt t = MutateStmt(op->then_case);
  Stmt f = MutateStmt(op->else_case);
  if (c.same_as(op->cond) && t.same_as(op->then_case) && f.same_as(op->else_case)) return s;
  return IfNode::make(c, t, f);
}

Stmt StmtMutator::MutateSeq(const SeqNode* op, const Stmt& s) {
  std::vector<Stmt> stmts;
  bool changed = false;
  for (const Stmt& child : op->stmts) {
    stmts.push_back(MutateStmt(child));
    changed |= !stmts.back().same_as(child);
  }
  return changed ? SeqNode::make(std::move(stmts)) : s;
}

Stmt StmtMutator::MutateAssert(const AssertNode* op, const Stmt& s) {
  Expr c = MutateExpr(op->cond);
  return c.same_as(op->cond) ? s : AssertNode::make(c, op->message);
}

Stmt StmtMutator::MutateEvaluate(const EvaluateNode* op, const Stmt& s) {
  Expr v = MutateExpr(op->value);
  return v.same_as(op->value) ? s : EvaluateNode::make(v);
}

namespace {

class Substituter : public StmtMutator {
 public:
  explicit Substituter(const VarMap& map) : map_(map) {}

  Expr MutateVar(const VarNode* op, const Expr& e) override {
    auto it = map_.find(op);
    return it == map_.end() ? e : it->second;
  }

 private:
  const VarMap& map_;
};

}  // namespace

Expr Substitute(const Expr& e, const VarMap& map) {
  return Substituter(map).MutateExpr(e);
}
Stmt Substitute(const Stmt& s, const VarMap& map) {
  return Substituter(map).MutateStmt(s);
}

}  // namespace kiln::ir
