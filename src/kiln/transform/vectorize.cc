#include "kiln/transform/vectorize.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "kiln/ir/expr_ops.h"
#include "kiln/ir/linear.h"
#include "kiln/ir/mutator.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/simplifier.h"
#include "kiln/ir/structural_equal.h"
#include "kiln/ir/visitor.h"
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
    return ir::StoreNode::make(op->buffer, std::move(indices), WidenTo(value, lanes));
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
  Expr Widen(const Expr& e) { return WidenTo(e, std::max(Lanes(e), lanes_)); }

  // `e` broadcast to `lanes`; an int8x4, a scalar with no vector type, is
  // refused.
  Expr WidenTo(const Expr& e, int lanes) {
    if (e.dtype() == ir::kInt8x4 && lanes > Lanes(e)) {
      return Unsupported(e, "an int8x4 value used by every lane (int8x4 has no vector type)");
    }
    return BroadcastTo(e, lanes);
  }

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

// The buffer accesses of a vectorized loop's body, and its let values.
class Accesses : public ir::StmtVisitor {
 public:
  struct OfBuffer {
    ir::Buffer buffer;
    std::vector<const std::vector<Expr>*> stores, loads;
  };
  void VisitStore(const ir::StoreNode* op) override {
    Of(op->buffer).stores.push_back(&op->indices);
    ir::StmtVisitor::VisitStore(op);
  }
  void VisitLoad(const ir::LoadNode* op) override {
    Of(op->buffer).loads.push_back(&op->indices);
    ir::StmtVisitor::VisitLoad(op);
  }
  void VisitLetStmt(const ir::LetStmtNode* op) override {
    lets[op->var.get()] = op->value;
    let_order.emplace_back(op->var.get(), op->value);
    ir::StmtVisitor::VisitLetStmt(op);
  }
  void VisitLet(const ir::LetNode* op) override {
    lets[op->var.get()] = op->value;
    let_order.emplace_back(op->var.get(), op->value);
    ir::StmtVisitor::VisitLet(op);
  }
  void VisitFor(const ir::ForNode* op) override {
    loops[op->loop_var.get()] = op;
    ir::StmtVisitor::VisitFor(op);
  }
  std::vector<OfBuffer> buffers;
  // The loops inside the body: their variables take several values in one
  // iteration of the vectorized loop.
  std::unordered_map<const ir::VarNode*, const ir::ForNode*> loops;
  std::unordered_map<const ir::VarNode*, Expr> lets;
  // The lets in the order they are defined: a value reads only lets before it.
  std::vector<std::pair<const ir::VarNode*, Expr>> let_order;

 private:
  OfBuffer& Of(const ir::Buffer& buffer) {
    for (OfBuffer& b : buffers) {
      if (b.buffer.get() == buffer.get()) return b;
    }
    buffers.push_back({buffer, {}, {}});
    return buffers.back();
  }
};

// Whether an expression reads one of `vars` (the loop variable and the lets
// whose values read it), or, where `stored` is given, loads one of the
// buffers in it.
class UsesVar : public ir::ExprVisitor {
 public:
  explicit UsesVar(const std::unordered_set<const ir::VarNode*>& vars,
                   const std::vector<Accesses::OfBuffer>* stored = nullptr)
      : vars_(vars), stored_(stored) {}
  void VisitVar(const ir::VarNode* op) override {
    if (vars_.count(op)) found = true;
  }
  void VisitLoad(const ir::LoadNode* op) override {
    if (stored_) {
      for (const Accesses::OfBuffer& b : *stored_) {
        if (b.buffer.get() == op->buffer.get() && !b.stores.empty()) found = true;
      }
    }
    ir::ExprVisitor::VisitLoad(op);
  }
  bool found = false;

 private:
  const std::unordered_set<const ir::VarNode*>& vars_;
  const std::vector<Accesses::OfBuffer>* stored_;
};

// "[i, j + 1]"
std::string IndexText(const std::vector<Expr>& index) {
  std::string text = "[";
  for (size_t d = 0; d < index.size(); ++d) text += StrCat(d ? ", " : "", ir::Print(index[d]));
  return text + "]";
}

// A vectorized loop runs its iterations' statements lane by lane, one
// statement after another, where the loop runs each iteration whole: the
// same only where no iteration reads or writes an element another writes.
// Proved here for the buffers the body stores to: one index for all their
// stores and loads, an unstrided buffer, and an index of which some
// dimension is c * v + (terms free of v) with c != 0, so the lanes' elements
// are distinct. A term that takes several values within one iteration (it
// reads a loop inside the body, or loads a buffer the body stores to) must
// then not let one lane reach another's elements: its coefficient is a
// multiple of c * lanes, or it is the variable of a loop with constant bounds
// and all such terms together span less than |c|. (A buffer stored once per
// iteration at an index free of such terms, and not loaded, needs no proof:
// where lanes share an element, the last lane's store is the last, as in
// the loop.)
Status CheckIndependent(const ir::ForNode* loop, int64_t lanes) {
  Accesses accesses;
  accesses.VisitStmt(loop->body);
  const ir::VarNode* v = loop->loop_var.get();
  auto expand = [&](const ir::VarNode* var) -> Expr {
    auto it = accesses.lets.find(var);
    return it == accesses.lets.end() ? Expr() : it->second;
  };
  // v and every let that reads it, however long the chain of lets.
  std::unordered_set<const ir::VarNode*> reads_v = {v};
  auto uses_v = [&](const Expr& e) {
    UsesVar uses(reads_v);
    uses.VisitExpr(e);
    return uses.found;
  };
  for (const auto& [var, value] : accesses.let_order) {
    if (uses_v(value)) reads_v.insert(var);
  }
  // The inner loops' variables, the lets that read them or load a stored
  // buffer: values that change within one iteration.
  std::unordered_set<const ir::VarNode*> within;
  for (const auto& [var, _] : accesses.loops) within.insert(var);
  auto varies_within = [&](const Expr& e) {
    UsesVar uses(within, &accesses.buffers);
    uses.VisitExpr(e);
    return uses.found;
  };
  for (const auto& [var, value] : accesses.let_order) {
    if (varies_within(value)) within.insert(var);
  }
  // The most two values of an inner loop's variable can differ by, where
  // its bounds are constants.
  auto spread = [&](const Expr& term) -> std::optional<int64_t> {
    const ir::VarNode* var = term.as<ir::VarNode>();
    auto it = var ? accesses.loops.find(var) : accesses.loops.end();
    if (it == accesses.loops.end()) return std::nullopt;
    auto min = ir::AsConstInt(ir::Simplify(it->second->min));
    auto extent = ir::AsConstInt(ir::Simplify(it->second->extent));
    if (!min || !extent || *min < INT32_MIN || *extent > INT32_MAX) return std::nullopt;
    if (*extent <= 1) return 0;
    // No wrapping in the variable's type between its first and last value.
    const int64_t top = var->dtype.is_uint() ? int64_t{UINT32_MAX} : int64_t{INT32_MAX};
    if (*min + *extent - 1 > top) return std::nullopt;
    return *extent - 1;
  };
  // int8x4 is a scalar with no vector type: its values stay uniform.
  struct Packed : ir::StmtVisitor {
    std::function<bool(const Expr&)> varying;
    Expr found;
    void VisitExpr(const Expr& e) override {
      if (!found.defined() && e.defined() && e.dtype() == ir::kInt8x4 && varying(e)) found = e;
      ir::StmtVisitor::VisitExpr(e);
    }
  } packed;
  packed.varying = uses_v;
  packed.VisitStmt(loop->body);
  if (packed.found.defined()) {
    return InvalidArgument("cannot vectorize loop `", loop->loop_var.name(), "`: `",
                           ir::Print(packed.found),
                           "` is an int8x4 value that differs across the loop's iterations, and "
                           "int8x4 has no vector type (make it a serial or unrolled loop)");
  }
  for (const Accesses::OfBuffer& b : accesses.buffers) {
    if (b.stores.empty()) continue;
    const std::vector<Expr>& index = *b.stores[0];
    if (b.stores.size() == 1 && b.loads.empty() &&
        std::none_of(index.begin(), index.end(), varies_within)) {
      continue;
    }
    auto refuse = [&](std::string_view why) {
      return InvalidArgument("cannot vectorize loop `", loop->loop_var.name(), "`: ", why,
                             " (a vectorized loop runs its body one statement at a time for all "
                             "its iterations, which must then not depend on each other; make it "
                             "a serial or unrolled loop)");
    };
    // The dimensions of `index` that keep lanes apart, each with its
    // coefficient c of the loop variable.
    std::vector<std::pair<size_t, int64_t>> apart;
    for (size_t d = 0; d < index.size(); ++d) {
      ir::LinearSum sum;
      if (!ir::AddLinear(index[d], 1, sum, expand)) continue;
      int64_t coefficient = 0;
      bool rest_free = true;
      std::vector<std::pair<Expr, int64_t>> changing;
      for (const auto& [term, c] : sum.terms) {
        const ir::VarNode* var = term.as<ir::VarNode>();
        if (var == v) {
          coefficient += c;
        } else if (c != 0 && uses_v(term)) {
          rest_free = false;
        } else if (c != 0 && varies_within(term)) {
          changing.emplace_back(term, c);
        }
      }
      if (coefficient == 0 || !rest_free) continue;
      // |c| < 2^31 and lanes <= 4: no overflow; each spread term adds at
      // most 2^31 * 2^32.
      const int64_t period = coefficient * lanes;
      int64_t span = 0;
      bool bounded = true;
      for (const auto& [term, c] : changing) {
        if (c % period == 0) continue;
        std::optional<int64_t> s = spread(term);
        if (!s || span >= std::abs(coefficient)) {
          bounded = false;
          break;
        }
        span += std::abs(c) * *s;
      }
      if (bounded && span < std::abs(coefficient)) apart.emplace_back(d, coefficient);
    }
    // Another access of the buffer is at `index`, or differs from it in one
    // dimension that keeps lanes apart by a multiple of c * lanes (an
    // unrolled `a[s * 4 + v]`): lane v's elements there are lane v's at
    // `index` moved by whole vectors, never another lane's.
    auto alike = [&](const std::vector<Expr>* other) {
      if (other->size() != index.size()) return false;
      std::vector<size_t> differ;
      for (size_t d = 0; d < index.size(); ++d) {
        if (!ir::StructurallyEqual((*other)[d], index[d])) differ.push_back(d);
      }
      if (differ.empty()) return true;
      if (differ.size() > 1) return false;
      for (const auto& [d, coefficient] : apart) {
        if (d != differ[0]) continue;
        ir::LinearSum diff;
        if (!ir::AddLinear((*other)[d], 1, diff, expand) ||
            !ir::AddLinear(index[d], -1, diff, expand)) {
          return false;
        }
        const int64_t period = coefficient * lanes;
        if (diff.constant % period != 0) return false;
        for (const auto& [term, c] : diff.terms) {
          if (c != 0 && (c % period != 0 || uses_v(term))) return false;
        }
        return true;
      }
      return false;
    };
    for (const auto* other : b.stores) {
      if (!alike(other)) {
        return refuse(StrCat("`", b.buffer.name(), "` is stored at two indices, ", IndexText(index),
                             " and ", IndexText(*other), ", which iterations may share"));
      }
    }
    for (const auto* other : b.loads) {
      if (!alike(other)) {
        return refuse(StrCat("`", b.buffer.name(), "` is stored and loaded at different indices, ",
                             IndexText(index), " and ", IndexText(*other),
                             ", which iterations may share"));
      }
    }
    if (!b.buffer.strides().empty()) {
      return refuse(StrCat("`", b.buffer.name(),
                           "`, stored and loaded, has strides, which may place two iterations' "
                           "elements at one address"));
    }
    if (apart.empty()) {
      const bool once = b.loads.empty() && b.stores.size() == 1;
      return refuse(StrCat("`", b.buffer.name(), "` is stored",
                           b.loads.empty() ? "" : " and loaded", " at ", IndexText(index),
                           ", which may be one element for two "
                           "iterations",
                           once ? " (its store runs more than once in each)" : ""));
    }
  }
  return Status::Ok();
}

// Finds vectorized loops and replaces each with its vectorized body.
class LoopFinder : public FallibleMutator {
 public:
  explicit LoopFinder(const ir::SourceMap* source) : source_(source) {}

  Stmt MutateFor(const ir::ForNode* op, const Stmt& s) override {
    if (op->kind != ir::LoopKind::kVectorized) return ir::StmtMutator::MutateFor(op, s);
    // Where the loop was parsed, looked up only for a refusal.
    auto at = [&] { return ir::LoopLocationPrefix(source_, op->loop_var.get()); };
    auto extent = ir::AsConstInt(ir::Simplify(op->extent));
    if (!extent || *extent < 2 || *extent > 4) {
      Fail(at(), "vectorized loop `", op->loop_var.name(), "` has extent ", ir::Print(op->extent),
           "; it must be a constant 2, 3 or 4 (the WGSL vector sizes)");
      return s;
    }
    auto step = ir::AsConstInt(ir::Simplify(op->step));
    if (!step || *step != 1) {
      Fail(at(), "vectorized loop `", op->loop_var.name(), "` has step ", ir::Print(op->step),
           "; a vectorized loop steps by 1 (its extent is its lanes)");
      return s;
    }
    if (Status independent = CheckIndependent(op, *extent); !independent.ok()) {
      Fail(at(), independent.message());
      return s;
    }
    Expr ramp = ir::RampNode::make(op->min, op->step, static_cast<int>(*extent));
    const bool failed_before = !status().ok();
    BodyVectorizer vectorizer(op->loop_var.get(), ramp, shared_status());
    Stmt vectorized = vectorizer.MutateStmt(op->body);
    if (const std::string where = failed_before || status().ok() ? "" : at(); !where.empty()) {
      Status& status = shared_status();
      status = Status(status.code(),
                      where + "in loop `" + op->loop_var.name() + "`: " + status.message());
    }
    return vectorized;
  }

 private:
  const ir::SourceMap* source_;
};

}  // namespace

StatusOr<ir::Function> Vectorize(const ir::Function& function, const VectorizeOptions& options) {
  LoopFinder finder(options.source);
  return RewriteFunction(function, finder, "Vectorize");
}

}  // namespace kiln::transform
