// Lowering a schedule to one ir::Function.
#include <functional>
#include <numeric>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "kiln/ir/expr_nodes.h"
#include "kiln/ir/mutator.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/simplifier.h"
#include "kiln/ir/verifier.h"
#include "kiln/ir/visitor.h"
#include "kiln/te/schedule_impl.h"
#include "kiln/te/te.h"

namespace kiln::te {
namespace {

using ir::Stmt;

// Replaces reads of inlined stages by their bodies at the read's indices.
class Inliner : public ir::ExprMutator {
 public:
  explicit Inliner(const Schedule::Impl& impl) : impl_(impl) {}

  ir::Expr MutateLoad(const ir::LoadNode* op, const ir::Expr& e) override {
    ir::Expr mutated = ir::ExprMutator::MutateLoad(op, e);
    const auto* load = mutated.as<ir::LoadNode>();
    for (const StageState& stage : impl_.stages) {
      if (!stage.inlined || !stage.tensor.buffer().same_as(load->buffer)) continue;
      const OperationNode* producer = stage.tensor.op();
      ir::VarMap map;
      for (size_t d = 0; d < producer->axis.size(); ++d) {
        map[producer->axis[d].var().get()] = load->indices[d];
      }
      // The producer's own reads of inlined stages are expanded too.
      return MutateExpr(ir::Substitute(producer->body, map));
    }
    return mutated;
  }

 private:
  const Schedule::Impl& impl_;
};

// Free vars of statements (used but not bound inside), in first-use order.
class FreeVars : public ir::StmtVisitor {
 public:
  void VisitExpr(const ir::Expr& e) override {
    if (const auto* v = e.as<ir::VarNode>()) {
      if (bound_.count(v) == 0 && seen_.insert(v).second) vars.push_back(ir::Var::FromExpr(e));
    }
    ir::StmtVisitor::VisitExpr(e);
  }
  void VisitLet(const ir::LetNode* op) override {
    bound_.insert(op->var.get());
    ir::StmtVisitor::VisitLet(op);
  }
  void VisitLetStmt(const ir::LetStmtNode* op) override {
    bound_.insert(op->var.get());
    ir::StmtVisitor::VisitLetStmt(op);
  }
  void VisitFor(const ir::ForNode* op) override {
    bound_.insert(op->loop_var.get());
    ir::StmtVisitor::VisitFor(op);
  }
  std::vector<ir::Var> vars;

 private:
  std::unordered_set<const ir::VarNode*> bound_, seen_;
};

// Gives every variable bound inside a statement (loop vars, lets) a new
// identity, for a second copy of a loop body: the IR binds each variable
// once.
class RenewBindings : public ir::StmtMutator {
 public:
  ir::Expr MutateVar(const ir::VarNode* op, const ir::Expr& e) override {
    auto it = vars_.find(op);
    return it == vars_.end() ? e : it->second;
  }
  ir::Expr MutateLet(const ir::LetNode* op, const ir::Expr& e) override {
    ir::Expr value = MutateExpr(op->value);
    ir::Var var = Renew(op->var);
    return ir::LetNode::make(var, value, MutateExpr(op->body));
  }
  Stmt MutateLetStmt(const ir::LetStmtNode* op, const Stmt& s) override {
    ir::Expr value = MutateExpr(op->value);
    ir::Var var = Renew(op->var);
    return ir::LetStmtNode::make(var, value, MutateStmt(op->body));
  }
  Stmt MutateFor(const ir::ForNode* op, const Stmt& s) override {
    ir::Expr min = MutateExpr(op->min);
    ir::Expr extent = MutateExpr(op->extent);
    ir::Expr step = MutateExpr(op->step);
    ir::Var var = Renew(op->loop_var);
    return ir::ForNode::make(var, min, extent, op->kind, MutateStmt(op->body), step);
  }

 private:
  ir::Var Renew(const ir::Var& var) {
    ir::Var fresh(var.name(), var.dtype());
    vars_[var.get()] = fresh;
    return fresh;
  }
  std::unordered_map<const ir::VarNode*, ir::Expr> vars_;
};

bool DividesExactly(const IterVar& parent, int64_t factor) {
  const auto* imm = ir::Simplify(parent.extent()).as<ir::IntImmNode>();
  return imm != nullptr && imm->value % factor == 0;
}

Stmt LowerStage(const Schedule::Impl& impl, const StageState& stage) {
  const OperationNode* op = stage.tensor.op();
  Inliner inliner(impl);

  // Each axis's value in terms of the leaf loop vars.
  std::unordered_map<const IterVarNode*, const Relation*> split_of, fused_into;
  for (const Relation& r : stage.relations) {
    if (r.kind == Relation::Kind::kSplit) {
      split_of[r.parent.get()] = &r;
    } else {
      fused_into[r.outer.get()] = &r;
      fused_into[r.inner.get()] = &r;
    }
  }
  std::function<ir::Expr(const IterVar&)> value = [&](const IterVar& axis) -> ir::Expr {
    if (auto it = split_of.find(axis.get()); it != split_of.end()) {
      const Relation& r = *it->second;
      return value(r.outer) * static_cast<int>(r.factor) + value(r.inner);
    }
    if (auto it = fused_into.find(axis.get()); it != fused_into.end()) {
      const Relation& r = *it->second;
      const ir::Expr fused = value(r.fused);
      return axis.same_as(r.outer) ? fused / r.inner.extent() : fused % r.inner.extent();
    }
    return axis.var();  // a leaf
  };

  // The vectorized leaf, if any, and its lane count.
  IterVar vec;
  int64_t lanes = 0;
  for (const IterVar& a : stage.leaves) {
    auto it = stage.annotations.find(a.get());
    if (it != stage.annotations.end() && it->second == ir::LoopKind::kVectorized) {
      vec = a;
      lanes = ir::AsConstInt(ir::Simplify(a.extent())).value_or(0);
    }
  }
  // An axis's value as `base + v` (v the vectorized leaf, lane set) or
  // `base` (no dependence on v), where with the lane `base` is a
  // non-negative multiple of `align` (0: base is 0). This is what keeps
  // contiguous lanes contiguous through a fuse: with base a multiple of the
  // lane count L and a constant inner extent E that L divides,
  // (base + v) / E == base / E and (base + v) % E == base % E + v, so the
  // inner index is a ramp and the outer one a scalar. nullopt: v enters the
  // value in another way (a coefficient other than 1, or lanes that may
  // cross a fuse boundary).
  struct LaneForm {
    ir::Expr base;
    bool lane = false;
    int64_t align = 0;
  };
  std::function<std::optional<LaneForm>(const IterVar&)> lane_form =
      [&](const IterVar& axis) -> std::optional<LaneForm> {
    if (vec.defined() && axis.same_as(vec)) return LaneForm{ir::IntConst(ir::kI32, 0), true, 0};
    if (auto it = split_of.find(axis.get()); it != split_of.end()) {
      const Relation& r = *it->second;
      std::optional<LaneForm> o = lane_form(r.outer), i = lane_form(r.inner);
      if (!o || !i || o->lane) return std::nullopt;
      if (!i->lane) return LaneForm{value(axis)};
      return LaneForm{o->base * static_cast<int>(r.factor) + i->base, true,
                      std::gcd(r.factor, i->align)};
    }
    if (auto it = fused_into.find(axis.get()); it != fused_into.end()) {
      const Relation& r = *it->second;
      std::optional<LaneForm> f = lane_form(r.fused);
      if (!f) return std::nullopt;
      if (!f->lane) return LaneForm{value(axis)};
      const std::optional<int64_t> e = ir::AsConstInt(ir::Simplify(r.inner.extent()));
      if (!e || *e % lanes != 0 || f->align % lanes != 0) return std::nullopt;
      const ir::Expr ext = ir::IntConst(ir::kI32, *e);
      if (axis.same_as(r.outer)) return LaneForm{f->base / ext};
      return LaneForm{f->base % ext, true, std::gcd(*e, f->align)};
    }
    return LaneForm{axis.var()};
  };
  // value(axis), in the lane form where there is one.
  auto lane_value = [&](const IterVar& axis) -> ir::Expr {
    if (!vec.defined()) return value(axis);
    std::optional<LaneForm> f = lane_form(axis);
    if (!f) return value(axis);
    return f->lane ? f->base + vec.var() : f->base;
  };
  auto is_root = [&](const IterVar& axis) {
    for (const IterVar& a : op->axis) {
      if (a.same_as(axis)) return true;
    }
    for (const IterVar& a : op->reduce_axis) {
      if (a.same_as(axis)) return true;
    }
    return false;
  };
  auto is_leaf = [&](const IterVar& axis) {
    for (const IterVar& a : stage.leaves) {
      if (a.same_as(axis)) return true;
    }
    return false;
  };
  // The guard of the splits that do not divide, for data or reduction axes
  // (undefined: none). `hoisted`: every index in terms of the leaf loop vars
  // rather than a root axis's let-bound var.
  auto guard_of = [&](bool reduce, bool hoisted) -> ir::Expr {
    ir::Expr guard;
    for (const Relation& r : stage.relations) {
      if (r.kind != Relation::Kind::kSplit || r.parent.is_reduce() != reduce ||
          DividesExactly(r.parent, r.factor)) {
        continue;
      }
      const ir::Expr at =
          is_root(r.parent) && !hoisted ? ir::Expr(r.parent.var()) : lane_value(r.parent);
      const ir::Expr cond = at < r.parent.extent();
      guard = guard.defined() ? (guard && cond) : cond;
    }
    return guard;
  };
  // Lets binding the root axes that are not loops themselves, and the
  // guard, when `guarded`.
  auto wrap = [&](bool reduce, Stmt body, bool guarded = true) -> Stmt {
    const ir::Expr guard = guarded ? guard_of(reduce, false) : ir::Expr();
    if (guard.defined()) body = ir::IfNode::make(guard, body);
    const auto& roots = reduce ? op->reduce_axis : op->axis;
    for (auto it = roots.rbegin(); it != roots.rend(); ++it) {
      if (!is_leaf(*it)) body = ir::LetStmtNode::make(it->var(), lane_value(*it), body);
    }
    return body;
  };
  auto loop_kind = [&](const IterVar& axis) {
    auto it = stage.annotations.find(axis.get());
    return it == stage.annotations.end() ? ir::LoopKind::kSerial : it->second;
  };
  auto nest = [&](const std::vector<IterVar>& loops, Stmt body) {
    for (auto it = loops.rbegin(); it != loops.rend(); ++it) {
      body = ir::ForNode::make(it->var(), 0, it->extent(), loop_kind(*it), body);
    }
    return body;
  };

  std::vector<ir::Expr> out_indices;
  for (const IterVar& a : op->axis) out_indices.push_back(a.var());
  const ir::Buffer& out = stage.tensor.buffer();
  Stmt inner;
  if (!op->has_reduction) {
    inner = ir::StoreNode::make(out, out_indices, inliner.MutateExpr(op->body));
  } else {
    const ir::DataType acc_type = op->reduce_source.dtype();
    ir::Buffer acc(op->name + "_acc", acc_type, {1}, {}, ir::MemoryScope::kLocal);
    const ir::Expr acc0 = ir::Load(acc, {0});
    std::vector<IterVar> reduce_loops;
    for (const IterVar& a : stage.leaves) {
      if (a.is_reduce()) reduce_loops.push_back(a);
    }
    Stmt update = ir::StoreNode::make(
        acc, {0}, ReducerCombine(op->reducer, acc0, inliner.MutateExpr(op->reduce_source)));
    ir::VarMap result{{op->reduce_var.get(), acc0}};
    Stmt store =
        ir::StoreNode::make(out, out_indices, inliner.MutateExpr(ir::Substitute(op->body, result)));
    inner = ir::AllocateNode::make(
        acc, ir::MakeSeq({ir::StoreNode::make(acc, {0}, ReducerIdentity(op->reducer, acc_type)),
                          nest(reduce_loops, wrap(true, update)), store}));
  }
  // Launch loops outermost (blocks, then threads), then the serial data loops.
  std::vector<IterVar> data_loops;
  for (int pass = 0; pass < 3; ++pass) {
    for (const IterVar& a : stage.leaves) {
      if (a.is_reduce()) continue;
      const ir::LoopKind kind = loop_kind(a);
      const int rank = ir::IsBlockIdx(kind) ? 0 : ir::IsThreadIdx(kind) ? 1 : 2;
      if (rank == pass) data_loops.push_back(a);
    }
  }
  if (!vec.defined()) return nest(data_loops, wrap(false, inner));

  // The vectorized axis is the innermost data loop (Vectorize checks it and
  // reorder keeps it so).
  KILN_CHECK(data_loops.back().same_as(vec));
  data_loops.pop_back();
  const ir::Expr guard = guard_of(false, true);
  auto lane_loop = [&](ir::LoopKind kind, Stmt body) {
    return ir::ForNode::make(vec.var(), 0, vec.extent(), kind, std::move(body));
  };
  if (!guard.defined()) {
    return nest(data_loops, lane_loop(ir::LoopKind::kVectorized, wrap(false, inner)));
  }
  // Every guard is `index < extent` with the index `base + v` or free of v
  // (lane_form), so it grows with the lane: the last lane in bounds means
  // every lane is. Where some index takes v otherwise, the lanes run as a
  // guarded serial loop.
  // Where no guard depends on v at all, it simply surrounds the vector loop.
  bool monotone = true, lane_free = true;
  for (const Relation& r : stage.relations) {
    if (r.kind == Relation::Kind::kSplit && !r.parent.is_reduce() &&
        !DividesExactly(r.parent, r.factor)) {
      std::optional<LaneForm> f = lane_form(r.parent);
      monotone &= f.has_value();
      lane_free &= f.has_value() && !f->lane;
    }
  }
  Stmt vector = lane_loop(ir::LoopKind::kVectorized, wrap(false, inner, /*guarded=*/false));
  if (lane_free) return nest(data_loops, ir::IfNode::make(guard, vector));
  Stmt serial = lane_loop(ir::LoopKind::kSerial, wrap(false, inner));
  if (!monotone) return nest(data_loops, serial);
  const ir::Expr last_lane =
      ir::Substitute(guard, {{vec.var().get(), ir::IntConst(ir::kI32, lanes - 1)}});
  return nest(data_loops, ir::IfNode::make(last_lane, vector, RenewBindings().MutateStmt(serial)));
}

}  // namespace

StatusOr<ir::Function> Lower(const Schedule& schedule, const std::vector<Tensor>& outputs,
                             const std::vector<Tensor>& inputs, const std::string& name) {
  const Schedule::Impl& impl = schedule.impl();
  const std::string at = "lowering '" + name + "'";
  if (outputs.empty()) return InvalidArgument(at, ": no outputs");
  for (const Tensor& t : inputs) {
    if (!t.defined() || !t.op()->is_placeholder) {
      return InvalidArgument(at, ": input '", t.defined() ? t.name() : "?",
                             "' is not a placeholder");
    }
  }
  // The stages the outputs need, and the placeholders they read.
  std::vector<const StageState*> materialised;
  std::unordered_set<const OperationNode*> visited;
  Status error;
  std::function<void(const Tensor&, const Tensor*)> visit = [&](const Tensor& t,
                                                                const Tensor* reader) {
    if (!error.ok() || !visited.insert(t.op()).second) return;
    if (t.op()->is_placeholder) {
      for (const Tensor& in : inputs) {
        if (in.same_as(t)) return;
      }
      error = InvalidArgument(at, ": placeholder '", t.name(), "' is read but not an input");
      return;
    }
    const StageState* stage = impl.Find(t.op());
    if (stage == nullptr) {
      error = InvalidArgument(at, ": tensor '", t.name(), "' is not a stage of the schedule");
      return;
    }
    if (!stage->inlined) {
      bool is_output = false;
      for (const Tensor& o : outputs) is_output |= o.same_as(t);
      if (!is_output) {
        error = InvalidArgument(at, ": stage '", t.name(), "' is read by '",
                                reader ? reader->name() : "?",
                                "' but is neither inlined nor an output");
        return;
      }
      materialised.push_back(stage);
    }
    for (const Tensor& in : t.op()->inputs) visit(in, &t);
  };
  for (const Tensor& o : outputs) visit(o, nullptr);
  KILN_RETURN_IF_ERROR(error);
  if (materialised.size() != 1) {
    std::string names;
    for (const StageState* s : materialised) {
      names += (names.empty() ? "'" : ", '") + s->name() + "'";
    }
    return InvalidArgument(at, ": this version lowers one materialised stage per kernel, not ",
                           materialised.size(), " (", names, ")");
  }
  Stmt body = LowerStage(impl, *materialised[0]);

  std::vector<ir::Param> params;
  std::vector<ir::Buffer> buffers;
  buffers.reserve(inputs.size() + outputs.size());
  for (const Tensor& t : inputs) buffers.push_back(t.buffer());
  for (const Tensor& t : outputs) buffers.push_back(t.buffer());
  FreeVars free;
  for (const ir::Buffer& b : buffers) {
    params.push_back(ir::Param::FromBuffer(b));
    for (const ir::Expr& e : b.shape()) free.VisitExpr(e);
  }
  free.VisitStmt(body);
  for (const ir::Var& v : free.vars) {
    // An index var of a compute reaching another compute's body is a misuse.
    for (const StageState& stage : impl.stages) {
      for (const IterVar& a : stage.all_axes) {
        if (a.var().same_as(v)) {
          return InvalidArgument(at, ": the kernel uses axis '", a.name(), "' of stage '",
                                 stage.name(), "' outside that stage");
        }
      }
    }
    params.push_back(ir::Param::FromVar(v));
  }
  ir::Function f = ir::Simplify(ir::Function(name, params, body));
  Status verified = ir::Verify(f);
  if (!verified.ok()) {
    return Status(verified.code(), at + ": the lowered function does not verify: " +
                                       verified.message() + "\n" + ir::Print(f));
  }
  return f;
}

}  // namespace kiln::te
