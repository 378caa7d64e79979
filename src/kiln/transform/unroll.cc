#include "kiln/transform/unroll.h"

#include <algorithm>
#include <unordered_map>

#include "kiln/ir/expr_ops.h"
#include "kiln/ir/mutator.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/simplifier.h"
#include "kiln/ir/visitor.h"
#include "kiln/transform/fallible_mutator.h"

namespace kiln::transform {
namespace {

using ir::Expr;
using ir::Stmt;

// Gives every variable and buffer bound inside a statement a new identity.
// Each unrolled copy gets its own, because the IR binds every variable (and
// allocates every buffer) exactly once.
class RenewBindings : public ir::StmtMutator {
 public:
  Expr MutateVar(const ir::VarNode* op, const Expr& e) override {
    auto it = vars_.find(op);
    return it == vars_.end() ? e : it->second;
  }
  ir::Buffer MutateBuffer(const ir::Buffer& buffer) override {
    auto it = buffers_.find(buffer.get());
    return it == buffers_.end() ? buffer : it->second;
  }
  Expr MutateLet(const ir::LetNode* op, const Expr& e) override {
    Expr value = MutateExpr(op->value);
    ir::Var var = Renew(op->var);  // before the body, which uses it
    return ir::LetNode::make(var, value, MutateExpr(op->body));
  }
  Stmt MutateLetStmt(const ir::LetStmtNode* op, const Stmt& s) override {
    Expr value = MutateExpr(op->value);
    ir::Var var = Renew(op->var);  // before the body, which uses it
    return ir::LetStmtNode::make(var, value, MutateStmt(op->body));
  }
  Stmt MutateFor(const ir::ForNode* op, const Stmt& s) override {
    Expr min = MutateExpr(op->min);
    Expr extent = MutateExpr(op->extent);
    Expr step = MutateExpr(op->step);
    ir::Var var = Renew(op->loop_var);
    return ir::ForNode::make(var, min, extent, op->kind, MutateStmt(op->body), step);
  }
  Stmt MutateAllocate(const ir::AllocateNode* op, const Stmt& s) override {
    const ir::Buffer& old = op->buffer;
    std::vector<Expr> shape, strides;
    for (const Expr& e : old.shape()) shape.push_back(MutateExpr(e));
    for (const Expr& e : old.strides()) strides.push_back(MutateExpr(e));
    ir::Buffer fresh(old.name(), old.dtype(), std::move(shape), std::move(strides), old.scope());
    buffers_[old.get()] = fresh;
    Stmt body = MutateStmt(op->body);
    return ir::AllocateNode::make(fresh, body);
  }

 private:
  ir::Var Renew(const ir::Var& var) {
    ir::Var fresh(var.name(), var.dtype());
    vars_[var.get()] = fresh;
    return fresh;
  }

  std::unordered_map<const ir::VarNode*, Expr> vars_;
  std::unordered_map<const ir::BufferNode*, ir::Buffer> buffers_;
};

// Removes the shared allocations of a statement, keeping their bodies, and
// collects their buffers. Unrolled copies then share each buffer, allocated
// once around them: the copies run one after another, as the loop's
// iterations did, and shared memory is not multiplied by the trip count
// (WGSL allocates workgroup memory per kernel, not per scope).
class StripSharedAllocs : public ir::StmtMutator {
 public:
  Stmt MutateAllocate(const ir::AllocateNode* op, const Stmt& s) override {
    if (op->buffer.scope() != ir::MemoryScope::kShared) {
      return ir::StmtMutator::MutateAllocate(op, s);
    }
    buffers.push_back(op->buffer);
    return MutateStmt(op->body);
  }
  std::vector<ir::Buffer> buffers;
};

// The statements and expressions of a statement, every occurrence counted
// (each is printed once per occurrence).
class CountNodes : public ir::StmtVisitor {
 public:
  void VisitStmt(const Stmt& s) override {
    ++count;
    ir::StmtVisitor::VisitStmt(s);
  }
  void VisitExpr(const Expr& e) override {
    ++count;
    ir::StmtVisitor::VisitExpr(e);
  }
  int64_t count = 0;
};

class Unroller : public FallibleMutator {
 public:
  explicit Unroller(const UnrollOptions& options) : options_(options) {}

  Stmt MutateFor(const ir::ForNode* op, const Stmt& s) override {
    if (op->kind != ir::LoopKind::kUnrolled) return ir::StmtMutator::MutateFor(op, s);
    const int64_t copied_before = copied_nodes_;
    Stmt body = MutateStmt(op->body);
    const bool nested = copied_nodes_ > copied_before;
    auto min = ir::AsConstInt(ir::Simplify(op->min));
    auto extent = ir::AsConstInt(ir::Simplify(op->extent));
    auto step = ir::AsConstInt(ir::Simplify(op->step));
    if (!min || !extent || !step) {
      Fail("unrolled loop `", op->loop_var.name(), "` needs a constant min, extent and step; got (",
           ir::Print(op->min), ", ", ir::Print(op->extent), ", ", ir::Print(op->step), ")");
      return s;
    }
    if (*step <= 0) {
      Fail("unrolled loop `", op->loop_var.name(), "` has non-positive step ", *step);
      return s;
    }
    if (*extent > options_.max_extent) {
      Fail("unrolled loop `", op->loop_var.name(), "` has extent ", *extent,
           ", more than the limit of ", options_.max_extent);
      return s;
    }
    std::vector<Stmt> copies;
    // The loop runs ceil(extent / step) times; v wraps in its type
    // (IntConst wraps).
    const int64_t trips = *extent <= 0 ? 0 : *extent / *step + (*extent % *step != 0);
    // Checked before any copy is made: the copies' size is the product of
    // the nested trip counts.
    CountNodes body_nodes;
    body_nodes.VisitStmt(body);
    const int64_t room = std::max<int64_t>(options_.max_nodes - copied_nodes_, 0);
    if (trips > 0 && body_nodes.count > room / trips) {
      Fail("unrolled loop `", op->loop_var.name(), "` makes ", trips, " copies of a body of ",
           body_nodes.count, " IR nodes", nested ? " (its unrolled loops expanded)" : "",
           ": the function's unrolled copies would hold more than the limit of ",
           options_.max_nodes, " nodes; unroll fewer or smaller loops");
      return s;
    }
    copied_nodes_ += trips * body_nodes.count;
    StripSharedAllocs shared;
    if (trips > 1) body = shared.MutateStmt(body);
    for (int64_t k = 0; k < trips; ++k) {
      const auto v = static_cast<int64_t>(static_cast<uint64_t>(*min) +
                                          static_cast<uint64_t>(k) * static_cast<uint64_t>(*step));
      ir::VarMap map{{op->loop_var.get(), ir::IntConst(op->loop_var.dtype(), v)}};
      copies.push_back(RenewBindings().MutateStmt(ir::Substitute(body, map)));
    }
    Stmt out = ir::MakeSeq(std::move(copies));
    for (auto it = shared.buffers.rbegin(); it != shared.buffers.rend(); ++it) {
      out = ir::AllocateNode::make(*it, out);
    }
    return out;
  }

 private:
  UnrollOptions options_;
  int64_t copied_nodes_ = 0;  // IR nodes in the copies made so far
};

}  // namespace

StatusOr<ir::Function> Unroll(const ir::Function& function, const UnrollOptions& options) {
  Unroller unroller(options);
  return RewriteFunction(function, unroller, "Unroll");
}

}  // namespace kiln::transform
