#include "kiln/transform/vectorize.h"

#include <algorithm>
#include <unordered_map>

#include "kiln/ir/expr_ops.h"
#include "kiln/ir/mutator.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/simplifier.h"
#include "kiln/transform/fallible_mutator.h"
#include "kiln/transform/lane_arith.h"

namespace kiln::transform {
namespace {

using ir::BinaryOp;
using ir::Expr;
using ir::Stmt;
using ir::Var;

int Lanes(const Expr& e) {
  return e.dtype().lanes;
}

// Rewrites the body of one vectorized loop.
class BodyVectorizer : public ir::StmtMutator {
 public:
  BodyVectorizer(const ir::VarNode* loop_var, Expr ramp, Status& status)
      : lanes_(Lanes(ramp)), status_(status) {
    vars_[loop_var] = std::move(ramp);
  }

  Expr MutateVar(const ir::VarNode* op, const Expr& e) override {
    auto it = vars_.find(op);
    return it == vars_.end() ? e : it->second;
  }

  Expr MutateBinary(const ir::BinaryNode* op, const Expr& e) override {
    Expr a = MutateExpr(op->a);
    Expr b = MutateExpr(op->b);
    if (a.same_as(op->a) && b.same_as(op->b)) return e;
    if (Lanes(a) == 1 && Lanes(b) == 1) return ir::BinaryNode::make(op->op, a, b);
    if (a.dtype().is_integer()) {
      if (op->op == BinaryOp::kAdd) return LaneAdd(a, b);
      if (op->op == BinaryOp::kSub) return LaneSub(a, b);
      if (op->op == BinaryOp::kMul) return LaneMul(a, b);
    }
    return ir::BinaryNode::make(op->op, Widen(a), Widen(b));
  }

  Expr MutateSelect(const ir::SelectNode* op, const Expr& e) override {
    Expr cond = MutateExpr(op->cond);
    Expr t = MutateExpr(op->true_value);
    Expr f = MutateExpr(op->false_value);
    if (Lanes(cond) == 1 && Lanes(t) == 1 && Lanes(f) == 1) {
      return ir::SelectNode::make(cond, t, f);
    }
    // A scalar condition may select whole vectors.
    return ir::SelectNode::make(cond, Widen(t), Widen(f));
  }

  Expr MutateCast(const ir::CastNode* op, const Expr& e) override {
    Expr value = MutateExpr(op->value);
    return ir::CastNode::make(op->dtype.with_lanes(Lanes(value)), value);
  }

  Expr MutateReinterpret(const ir::ReinterpretNode* op, const Expr& e) override {
    Expr value = MutateExpr(op->value);
    if (Lanes(value) == Lanes(op->value)) return ir::ReinterpretNode::make(op->dtype, value);
    // A scalar reinterpret between types of one width (f32 <-> u32, ...)
    // goes lane by lane; one that packs or splits lanes does not.
    if (op->dtype.lanes == 1 && op->value.dtype().lanes == 1 &&
        op->dtype.bits == op->value.dtype().bits) {
      return ir::ReinterpretNode::make(op->dtype.with_lanes(Lanes(value)), value);
    }
    return Unsupported(e, "reinterpret of a varying value");
  }

  Expr MutateLet(const ir::LetNode* op, const Expr& e) override {
    Expr value = MutateExpr(op->value);
    if (Inline(op->var, value)) return MutateExpr(op->body);
    Var var = Rebind(op->var, value);
    return ir::LetNode::make(var, value, MutateExpr(op->body));
  }

  Expr MutateRamp(const ir::RampNode* op, const Expr& e) override {
    if (Lanes(MutateExpr(op->base)) > 1 || Lanes(MutateExpr(op->stride)) > 1) {
      return Unsupported(e, "a ramp that depends on the loop variable");
    }
    return e;
  }

  Expr MutateBroadcast(const ir::BroadcastNode* op, const Expr& e) override {
    if (Lanes(MutateExpr(op->value)) > 1) {
      return Unsupported(e, "a broadcast that depends on the loop variable");
    }
    return e;
  }

  Expr MutateLoad(const ir::LoadNode* op, const Expr& e) override {
    std::vector<Expr> indices;
    for (const Expr& index : op->indices) {
      if (Lanes(index) > 1) return Unsupported(e, "a load that is already a vector");
      indices.push_back(MutateExpr(index));
    }
    return ir::LoadNode::make(op->buffer, std::move(indices));
  }

  Expr MutateCall(const ir::CallNode* op, const Expr& e) override {
    std::vector<Expr> args;
    bool varying = false;
    for (const Expr& arg : op->args) {
      args.push_back(MutateExpr(arg));
      varying |= Lanes(args.back()) > 1;
    }
    if (!varying) return ir::CallNode::make(op->op, std::move(args));
    if (op->op == ir::Intrinsic::kIfThenElse) {
      if (Lanes(args[0]) > 1) {
        return Unsupported(e, "if_then_else with a condition that depends on the loop variable");
      }
      return ir::CallNode::make(op->op, {args[0], Widen(args[1]), Widen(args[2])});
    }
    if (op->op == ir::Intrinsic::kDot4I8 || ir::IsSubgroupIntrinsic(op->op)) {
      return Unsupported(e, "this intrinsic on values that depend on the loop variable");
    }
    for (Expr& arg : args) arg = Widen(arg);
    return ir::CallNode::make(op->op, std::move(args));
  }

  Stmt MutateLetStmt(const ir::LetStmtNode* op, const Stmt& s) override {
    Expr value = MutateExpr(op->value);
    if (Inline(op->var, value)) return MutateStmt(op->body);
    Var var = Rebind(op->var, value);
    return ir::LetStmtNode::make(var, value, MutateStmt(op->body));
  }

  Stmt MutateStore(const ir::StoreNode* op, const Stmt& s) override {
    std::vector<Expr> indices;
    int lanes = 1;
    for (const Expr& index : op->indices) {
      indices.push_back(MutateExpr(index));
      lanes = std::max(lanes, Lanes(indices.back()));
    }
    Expr value = MutateExpr(op->value);
    if (Lanes(op->value) > 1) return Unsupported(s, "a store that is already a vector");
    if (lanes == 1) {
      return Unsupported(s, "a store whose index does not depend on the loop variable");
    }
    return ir::StoreNode::make(op->buffer, std::move(indices), BroadcastTo(value, lanes));
  }

  Stmt MutateAllocate(const ir::AllocateNode* op, const Stmt& s) override {
    return Unsupported(s, "an allocation");
  }

  Stmt MutateFor(const ir::ForNode* op, const Stmt& s) override {
    if (op->kind != ir::LoopKind::kSerial && op->kind != ir::LoopKind::kUnrolled) {
      return Unsupported(s, "a nested thread-bound or vectorized loop");
    }
    if (Varies(op->min) || Varies(op->extent) || Varies(op->step)) {
      return Unsupported(s, "a loop whose bounds depend on the loop variable");
    }
    return ir::StmtMutator::MutateFor(op, s);
  }

  Stmt MutateWhile(const ir::WhileNode* op, const Stmt& s) override {
    if (Varies(op->cond))
      return Unsupported(s, "a while condition that depends on the loop variable");
    return ir::StmtMutator::MutateWhile(op, s);
  }

  Stmt MutateIf(const ir::IfNode* op, const Stmt& s) override {
    if (Varies(op->cond))
      return Unsupported(s, "an if condition that depends on the loop variable");
    return ir::StmtMutator::MutateIf(op, s);
  }

  Stmt MutateBarrier(const ir::BarrierNode* op, const Stmt& s) override {
    return Unsupported(s, "a barrier");
  }

  Stmt MutateAssert(const ir::AssertNode* op, const Stmt& s) override {
    if (Varies(op->cond)) return Unsupported(s, "an assert that depends on the loop variable");
    return s;
  }

 private:
  Expr Widen(const Expr& e) { return BroadcastTo(e, std::max(Lanes(e), lanes_)); }

  bool Varies(const Expr& e) { return e.defined() && Lanes(MutateExpr(e)) > 1; }

  // A let whose value became a ramp (typically the index i * n + v) is
  // substituted rather than bound, so that its uses stay recognisable ramps
  // (contiguous accesses) instead of opaque vector variables (gathers).
  bool Inline(const Var& var, const Expr& value) {
    if (!value.as<ir::RampNode>() || Lanes(value) == Lanes(var)) return false;
    vars_[var.get()] = value;
    return true;
  }

  Var Rebind(const Var& var, const Expr& value) {
    if (var.dtype() == value.dtype()) return var;
    Var vector_var(var.name(), value.dtype());
    vars_[var.get()] = vector_var;
    return vector_var;
  }

  template <typename Node>
  Node Unsupported(const Node& node, std::string_view what) {
    if (status_.ok()) {
      status_ = InvalidArgument("cannot vectorize ", what, ": `", ir::Print(node), "`");
    }
    return node;
  }

  int lanes_;
  std::unordered_map<const ir::VarNode*, Expr> vars_;
  Status& status_;
};

// Finds vectorized loops and replaces each with its vectorized body.
class LoopFinder : public FallibleMutator {
 public:
  Stmt MutateFor(const ir::ForNode* op, const Stmt& s) override {
    if (op->kind != ir::LoopKind::kVectorized) return ir::StmtMutator::MutateFor(op, s);
    auto extent = ir::AsConstInt(ir::Simplify(op->extent));
    if (!extent || *extent < 2 || *extent > 4) {
      Fail("vectorized loop `", op->loop_var.name(), "` has extent ", ir::Print(op->extent),
           "; it must be a constant 2, 3 or 4 (the WGSL vector sizes)");
      return s;
    }
    Expr ramp = ir::RampNode::make(op->min, op->step, static_cast<int>(*extent));
    BodyVectorizer vectorizer(op->loop_var.get(), ramp, shared_status());
    return vectorizer.MutateStmt(op->body);
  }
};

}  // namespace

StatusOr<ir::Function> Vectorize(const ir::Function& function, const VectorizeOptions& options) {
  LoopFinder finder;
  return RewriteFunction(function, finder, "Vectorize");
}

}  // namespace kiln::transform
