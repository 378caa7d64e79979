// Lowering a schedule to one ir::Function.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "kiln/ir/expr_nodes.h"
#include "kiln/ir/linear.h"
#include "kiln/ir/mutator.h"
#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/simplifier.h"
#include "kiln/ir/structural_equal.h"
#include "kiln/ir/text_syntax.h"
#include "kiln/ir/verifier.h"
#include "kiln/ir/visitor.h"
#include "kiln/te/bounds.h"
#include "kiln/te/schedule_impl.h"
#include "kiln/te/te.h"

namespace kiln::te {
namespace {

using internal::ConstantDifference;
using internal::EvalInterval;
using internal::Interval;
using internal::IntervalMap;
using internal::Union;
using ir::Stmt;

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

// Gives every variable bound inside a statement (loop vars, lets) and every
// buffer allocated inside it a new identity, for a second copy of a loop
// body: the IR binds each variable and defines each buffer once.
class RenewBindings : public ir::StmtMutator {
 public:
  ir::Buffer MutateBuffer(const ir::Buffer& buffer) override {
    auto it = buffers_.find(buffer.get());
    return it == buffers_.end() ? buffer : it->second;
  }
  Stmt MutateAllocate(const ir::AllocateNode* op, const Stmt& s) override {
    const ir::Buffer& b = op->buffer;
    std::vector<ir::Expr> shape, strides;
    for (const ir::Expr& e : b.shape()) shape.push_back(MutateExpr(e));
    for (const ir::Expr& e : b.strides()) strides.push_back(MutateExpr(e));
    ir::Buffer fresh(b.name(), b.dtype(), std::move(shape), std::move(strides), b.scope());
    buffers_[b.get()] = fresh;
    return ir::AllocateNode::make(fresh, MutateStmt(op->body));
  }
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
  std::unordered_map<const ir::BufferNode*, ir::Buffer> buffers_;
};

// Replaces reads of inlined stages by their bodies at the read's indices,
// each copy with its own let bindings (a body read twice would otherwise
// bind its lets twice, which the IR does not allow).
class Inliner : public ir::ExprMutator {
 public:
  explicit Inliner(const Schedule::Impl& impl) : impl_(impl) {}

  ir::Expr MutateLoad(const ir::LoadNode* op, const ir::Expr& e) override {
    ir::Expr mutated = ir::ExprMutator::MutateLoad(op, e);
    const auto* load = mutated.as<ir::LoadNode>();
    for (const StageState& stage : impl_.stages) {
      if (!stage.inlined || !stage.tensor.buffer().same_as(load->buffer)) continue;
      const OperationNode* producer = stage.op.get();
      ir::VarMap map;
      for (size_t d = 0; d < producer->axis.size(); ++d) {
        map[producer->axis[d].var().get()] = load->indices[d];
      }
      // The producer's own reads of inlined stages are expanded too.
      return MutateExpr(RenewBindings().MutateExpr(ir::Substitute(producer->body, map)));
    }
    return mutated;
  }

 private:
  const Schedule::Impl& impl_;
};

// A double buffer's copy for the next iteration in two halves, so that the
// latency of its global loads hides behind the loop's body: `load` reads
// the values into registers (`staging`, one per value the thread copies),
// `store` writes them into the buffer's other half after the body.
struct StagedCopy {
  ir::Buffer staging;
  Stmt load, store;
};

class CopyStager {
 public:
  static constexpr int64_t kMaxValues = 64;

  // nullopt where `copy` is not a nest of lets, guards and loops of
  // constant extent (serial, unrolled or vectorized) around stores to
  // `target`, or copies more than kMaxValues values per thread.
  static std::optional<StagedCopy> Stage(const Stmt& copy, const ir::Buffer& target) {
    CopyStager stager(target);
    const std::optional<int64_t> count = stager.Count(copy);
    if (!count || *count == 0 || *count > kMaxValues) return std::nullopt;
    stager.staging_ = ir::Buffer(target.name() + "_staged", target.dtype(),
                                 {ir::IntConst(ir::kI32, *count)}, {}, ir::MemoryScope::kLocal);
    auto [load, store] = stager.Build(copy, ir::IntConst(ir::kI32, 0));
    return StagedCopy{stager.staging_, load, RenewBindings().MutateStmt(store)};
  }

 private:
  explicit CopyStager(ir::Buffer target) : target_(std::move(target)) {}

  // The values `s` copies per thread.
  std::optional<int64_t> Count(const Stmt& s) const {
    if (const auto* f = s.as<ir::ForNode>()) {
      const std::optional<int64_t> min = ir::AsConstInt(ir::Simplify(f->min));
      const std::optional<int64_t> extent = ir::AsConstInt(ir::Simplify(f->extent));
      const std::optional<int64_t> step = ir::AsConstInt(ir::Simplify(f->step));
      if (min != 0 || !extent || step != 1 ||
          (f->kind != ir::LoopKind::kSerial && f->kind != ir::LoopKind::kUnrolled &&
           f->kind != ir::LoopKind::kVectorized)) {
        return std::nullopt;
      }
      const std::optional<int64_t> body = Count(f->body);
      if (!body) return std::nullopt;
      return *body * *extent;
    }
    if (const auto* let = s.as<ir::LetStmtNode>()) return Count(let->body);
    if (const auto* branch = s.as<ir::IfNode>()) {
      if (branch->else_case.defined()) return std::nullopt;
      return Count(branch->then_case);
    }
    if (const auto* seq = s.as<ir::SeqNode>()) {
      int64_t n = 0;
      for (const Stmt& st : seq->stmts) {
        const std::optional<int64_t> c = Count(st);
        if (!c) return std::nullopt;
        n += *c;
      }
      return n;
    }
    if (const auto* store = s.as<ir::StoreNode>()) {
      if (!store->buffer.same_as(target_) || store->value.dtype().lanes != 1) return std::nullopt;
      return 1;
    }
    return std::nullopt;
  }

  // The two halves of `s`, whose first value goes to register `slot`.
  std::pair<Stmt, Stmt> Build(const Stmt& s, const ir::Expr& slot) const {
    if (const auto* f = s.as<ir::ForNode>()) {
      const ir::Expr per = ir::IntConst(ir::kI32, *Count(f->body));
      auto [load, store] = Build(f->body, ir::Simplify(slot + f->loop_var * per));
      // Unrolled, so the registers are indexed by constants.
      const ir::LoopKind kind =
          f->kind == ir::LoopKind::kVectorized ? f->kind : ir::LoopKind::kUnrolled;
      return {ir::ForNode::make(f->loop_var, f->min, f->extent, kind, load),
              ir::ForNode::make(f->loop_var, f->min, f->extent, kind, store)};
    }
    if (const auto* let = s.as<ir::LetStmtNode>()) {
      auto [load, store] = Build(let->body, slot);
      return {ir::LetStmtNode::make(let->var, let->value, load),
              ir::LetStmtNode::make(let->var, let->value, store)};
    }
    if (const auto* branch = s.as<ir::IfNode>()) {
      auto [load, store] = Build(branch->then_case, slot);
      return {ir::IfNode::make(branch->cond, load), ir::IfNode::make(branch->cond, store)};
    }
    if (const auto* seq = s.as<ir::SeqNode>()) {
      std::vector<Stmt> loads, stores;
      ir::Expr at = slot;
      for (const Stmt& st : seq->stmts) {
        auto [load, store] = Build(st, at);
        loads.push_back(load);
        stores.push_back(store);
        at = ir::Simplify(at + static_cast<int>(*Count(st)));
      }
      return {ir::MakeSeq(loads), ir::MakeSeq(stores)};
    }
    const auto* store = s.as<ir::StoreNode>();
    return {ir::StoreNode::make(staging_, {slot}, store->value),
            ir::StoreNode::make(store->buffer, store->indices, ir::Load(staging_, {slot}))};
  }

  ir::Buffer target_;
  ir::Buffer staging_;
};

bool IsTrue(const ir::Expr& e) {
  const auto* b = e.as<ir::BoolImmNode>();
  return b != nullptr && b->value;
}

// Where an attached stage's values live while its consumer runs: its buffer
// (shared or local), the region's origin in the tensor's coordinates, and
// for a double buffer the index of the half in use.
struct Placement {
  ir::Buffer buffer;
  std::vector<ir::Expr> min;
  std::vector<internal::Digits> digits;  // per dimension; empty: contiguous
  ir::Expr half;                         // undefined: single buffer
};

// Replaces loads of placed tensors by loads of their buffers, relative to
// the region's origin. `roots` gives the values of the reading stage's
// let-bound root axes in its loop variables: an index written with a root
// axis (`k`) is expanded before the origin is subtracted, so the terms they
// share cancel (`k - (k_outer * 16 + k_inner)` is `k_inner`, a constant
// once the loop is unrolled).
class Relocate : public ir::ExprMutator {
 public:
  Relocate(const std::unordered_map<const ir::BufferNode*, Placement>& placements, ir::VarMap roots,
           const ir::RangeMap& ranges)
      : placements_(placements), roots_(std::move(roots)), ranges_(ranges) {}
  ir::Expr MutateLoad(const ir::LoadNode* op, const ir::Expr& e) override {
    ir::Expr mutated = ir::ExprMutator::MutateLoad(op, e);
    const auto* load = mutated.as<ir::LoadNode>();
    auto it = placements_.find(load->buffer.get());
    if (it == placements_.end()) return mutated;
    const Placement& p = it->second;
    std::vector<ir::Expr> indices;
    if (p.half.defined()) indices.push_back(p.half);
    for (size_t d = 0; d < load->indices.size(); ++d) {
      const ir::Expr& index = load->indices[d];
      const internal::Digits& digits = p.digits[d];
      const int lanes = index.dtype().lanes;
      if (lanes > 1) {
        const ir::Expr offset = index - ir::Broadcast(p.min[d], lanes);
        indices.push_back(
            digits.empty() ? offset : ir::Simplify(internal::Compact(offset, digits), ranges_));
        continue;
      }
      const ir::Expr relative = internal::CancelTerms(index - p.min[d]);
      const ir::Expr substituted = roots_.empty() ? index : ir::Substitute(index, roots_);
      if (substituted.get() == index.get()) {
        indices.push_back(
            digits.empty() ? relative : ir::Simplify(internal::Compact(relative, digits), ranges_));
        continue;
      }
      const ir::Expr expanded = internal::CancelTerms(substituted - p.min[d]);
      if (!digits.empty()) {
        // A strided region's position, in the leaf loops' vars, where the
        // ranges of the loops take its divisions apart.
        indices.push_back(ir::Simplify(internal::Compact(expanded, digits), ranges_));
        continue;
      }
      // The expansion only where it leaves fewer terms.
      indices.push_back(TermCount(expanded) < TermCount(relative) ? expanded : relative);
    }
    return ir::Load(p.buffer, indices);
  }

 private:
  static int TermCount(const ir::Expr& e) {
    const auto* b = e.as<ir::BinaryNode>();
    if (b != nullptr && (b->op == ir::BinaryOp::kAdd || b->op == ir::BinaryOp::kSub)) {
      return TermCount(b->a) + TermCount(b->b);
    }
    return ir::AsConstInt(e) ? 0 : 1;
  }
  const std::unordered_map<const ir::BufferNode*, Placement>& placements_;
  const ir::VarMap roots_;
  const ir::RangeMap& ranges_;
};

// Every load of `buffer` in an expression.
class LoadFinder : public ir::ExprVisitor {
 public:
  explicit LoadFinder(const ir::Buffer& buffer) : buffer_(buffer) {}
  void VisitLoad(const ir::LoadNode* op) override {
    if (op->buffer.same_as(buffer_)) loads.push_back(op);
    ir::ExprVisitor::VisitLoad(op);
  }
  std::vector<const ir::LoadNode*> loads;

 private:
  ir::Buffer buffer_;
};

// The launch indices bound around a point of the kernel.
using ThreadContext = std::map<ir::LoopKind, ir::Var>;

// How one stage's loops are laid out once lowered.
class StageLayout {
 public:
  StageLayout(const StageState& stage, const std::vector<ir::Expr>* region_extent)
      : stage_(stage), op_(*stage.op) {
    for (size_t d = 0; d < op_.axis.size(); ++d) {
      extents_[op_.axis[d].get()] = region_extent ? (*region_extent)[d] : op_.axis[d].extent();
    }
    for (const IterVar& r : op_.reduce_axis) extents_[r.get()] = r.extent();
    for (const Relation& r : stage.relations) {
      if (r.kind == Relation::Kind::kSplit) {
        split_of_[r.parent.get()] = &r;
        const ir::Expr f = ir::IntConst(ir::kI32, r.factor);
        extents_[r.outer.get()] = ir::Simplify((extent(r.parent) + (f - 1)) / f);
        extents_[r.inner.get()] = f;
      } else {
        fused_into_[r.outer.get()] = &r;
        fused_into_[r.inner.get()] = &r;
        extents_[r.fused.get()] = ir::Simplify(extent(r.outer) * extent(r.inner));
      }
    }
    // Launch loops outermost (blocks, then threads), then the serial data
    // loops in leaf order, then the reduction loops. Where a reduction leaf
    // comes before a data leaf (`mixed`), the serial loops keep their leaf
    // order from the first reduction leaf on (reduce_loops holds them all).
    for (int pass = 0; pass < 2; ++pass) {
      for (const IterVar& a : stage.leaves) {
        const ir::LoopKind kind = loop_kind(a);
        if (a.is_reduce() || !ir::IsThreadBinding(kind)) continue;
        if ((ir::IsBlockIdx(kind) ? 0 : 1) == pass) data_loops.push_back(a);
      }
    }
    bool seen_reduce = false;
    for (const IterVar& a : stage.leaves) {
      if (!a.is_reduce() && ir::IsThreadBinding(loop_kind(a))) continue;
      seen_reduce |= a.is_reduce();
      if (seen_reduce) {
        reduce_loops.push_back(a);
        mixed |= !a.is_reduce();
      } else {
        data_loops.push_back(a);
      }
    }
  }

  ir::Expr extent(const IterVar& axis) const { return extents_.at(axis.get()); }
  ir::LoopKind loop_kind(const IterVar& axis) const {
    auto it = stage_.annotations.find(axis.get());
    if (it == stage_.annotations.end()) return ir::LoopKind::kSerial;
    // A vectorized axis whose region at the consumer's loop leaves one
    // lane is a scalar loop.
    if (it->second == ir::LoopKind::kVectorized) {
      auto e = extents_.find(axis.get());
      if (e != extents_.end() && ir::AsConstInt(ir::Simplify(e->second)) == 1) {
        return ir::LoopKind::kSerial;
      }
    }
    return it->second;
  }
  bool DividesExactly(const IterVar& parent, int64_t factor) const {
    const std::optional<int64_t> e = ir::AsConstInt(ir::Simplify(extent(parent)));
    return e.has_value() && *e % factor == 0;
  }
  // An axis's value in terms of the leaf loop vars.
  ir::Expr value(const IterVar& axis) const {
    if (auto it = split_of_.find(axis.get()); it != split_of_.end()) {
      const Relation& r = *it->second;
      return value(r.outer) * static_cast<int>(r.factor) + value(r.inner);
    }
    if (auto it = fused_into_.find(axis.get()); it != fused_into_.end()) {
      const Relation& r = *it->second;
      const ir::Expr fused = value(r.fused);
      return axis.same_as(r.outer) ? fused / extent(r.inner) : fused % extent(r.inner);
    }
    return axis.var();
  }
  // The loops in the order they are emitted.
  std::vector<IterVar> order() const {
    std::vector<IterVar> all = data_loops;
    all.insert(all.end(), reduce_loops.begin(), reduce_loops.end());
    return all;
  }

  std::vector<IterVar> data_loops, reduce_loops;
  bool mixed = false;
  const std::unordered_map<const IterVarNode*, const Relation*>& split_of() const {
    return split_of_;
  }
  const std::unordered_map<const IterVarNode*, const Relation*>& fused_into() const {
    return fused_into_;
  }

 private:
  const StageState& stage_;
  const OperationNode& op_;
  std::unordered_map<const IterVarNode*, ir::Expr> extents_;
  std::unordered_map<const IterVarNode*, const Relation*> split_of_, fused_into_;
};

// The region of each attached stage, and the statements of the kernel.
// Whether `s` ends with a barrier that every thread reaches once: its last
// statement, through allocations, lets and loops that run at least once.
bool EndsWithBarrier(const Stmt& s) {
  if (s.as<ir::BarrierNode>() != nullptr) return true;
  if (const auto* seq = s.as<ir::SeqNode>()) {
    return !seq->stmts.empty() && EndsWithBarrier(seq->stmts.back());
  }
  if (const auto* a = s.as<ir::AllocateNode>()) return EndsWithBarrier(a->body);
  if (const auto* l = s.as<ir::LetStmtNode>()) return EndsWithBarrier(l->body);
  if (const auto* f = s.as<ir::ForNode>()) {
    const std::optional<int64_t> extent = ir::AsConstInt(ir::Simplify(f->extent));
    return !ir::IsThreadBinding(f->kind) && ir::AsConstInt(f->min) == 0 && extent.has_value() &&
           *extent >= 1 && EndsWithBarrier(f->body);
  }
  return false;
}

// Whether `s` holds a barrier anywhere.
bool HasBarrier(const Stmt& s) {
  class Finder : public ir::StmtVisitor {
   public:
    void VisitBarrier(const ir::BarrierNode* op) override { found = true; }
    bool found = false;
  };
  Finder finder;
  finder.VisitStmt(s);
  return finder.found;
}

// The subgroup's reduction of `v` by `kind` (sum, max, min, device_max or
// device_min), the same in each of its threads. Float max and min propagate
// NaN: subgroup max/min leave it unspecified, so a NaN anywhere in the
// subgroup (counted with an integer subgroup max) gives NaN; device_max and
// device_min leave it so.
ir::Expr SubgroupCombine(ReducerKind kind, const ir::Expr& v) {
  if (kind == ReducerKind::kSum) return ir::Call(ir::Intrinsic::kSubgroupAdd, {v});
  const bool max = kind == ReducerKind::kMax || kind == ReducerKind::kDeviceMax;
  ir::Expr m = ir::Call(max ? ir::Intrinsic::kSubgroupMax : ir::Intrinsic::kSubgroupMin, {v});
  if (!v.dtype().is_float() || kind == ReducerKind::kDeviceMax || kind == ReducerKind::kDeviceMin) {
    return m;
  }
  const ir::Expr nan_seen =
      ir::Call(ir::Intrinsic::kSubgroupMax,
               {ir::Select(v != v,  // NOLINT(misc-redundant-expression): the IR's NaN test
                           ir::IntConst(ir::kI32, 1), ir::IntConst(ir::kI32, 0))});
  return ir::Select(nan_seen > 0,
                    ir::FloatConst(v.dtype(), std::numeric_limits<double>::quiet_NaN()), m);
}

class KernelLowering {
 public:
  KernelLowering(const Schedule::Impl& impl, std::string at) : impl_(impl), at_(std::move(at)) {}

  StatusOr<Stmt> Run(const StageState& root, const std::vector<const StageState*>& attached) {
    attached_ = attached;
    root_ = &root;
    // The kernel's output is a parameter, so the runtime refuses a negative
    // value of a size var that is one of its dimensions.
    for (const ir::Expr& e : root.tensor.buffer().shape()) {
      if (const auto* v = e.as<ir::VarNode>()) output_sizes_.insert(v);
    }
    // Regions from consumers to producers.
    for (auto it = attached.rbegin(); it != attached.rend(); ++it) {
      KILN_RETURN_IF_ERROR(InferRegion(**it));
    }
    for (const StageState* s : attached) KILN_RETURN_IF_ERROR(Place(*s));
    // Every loop of the kernel over its extent, to prove regions in bounds.
    for (const StageState* s : attached) NoteLoopRanges(*s);
    NoteLoopRanges(root);
    for (const auto& [var, range] : loop_ranges_) {
      if (std::optional<int64_t> max = ir::AsConstInt(range.max)) int_ranges_[var] = {0, *max};
    }
    // The launch axes of the kernel, one extent each.
    KILN_RETURN_IF_ERROR(NoteThreads(root));
    for (const StageState* s : attached) KILN_RETURN_IF_ERROR(NoteThreads(*s));
    Stmt body = LowerStage(root, ThreadContext{});
    KILN_RETURN_IF_ERROR(error_);
    return body;
  }

 private:
  Status NoteThreads(const StageState& s) {
    auto layout = Layout(s);
    for (const IterVar& a : s.leaves) {
      auto it = s.annotations.find(a.get());
      if (it == s.annotations.end() || !ir::IsThreadBinding(it->second)) continue;
      const ir::LoopKind kind = it->second;
      const ir::Expr extent = ir::Simplify(layout->extent(a));
      if (ir::IsThreadIdx(kind) && !ir::AsConstInt(extent)) {
        return InvalidArgument(at_, ": stage '", s.name(), "' binds axis '", a.name(), "' to ",
                               ir::LoopKindName(kind), " with extent ", ir::Print(extent),
                               "; a thread axis needs a constant extent (split it first)");
      }
      auto [known, inserted] = launch_extents_.try_emplace(kind, extent, &s);
      if (!inserted && !ir::StructurallyEqual(known->second.first, extent)) {
        return InvalidArgument(at_, ": stage '", s.name(), "' binds ", ir::LoopKindName(kind),
                               " with extent ", ir::Print(extent), " but stage '",
                               known->second.second->name(), "' of the same kernel with ",
                               ir::Print(known->second.first));
      }
      if (ir::IsThreadIdx(kind)) thread_extents_[kind] = extent;
    }
    return Status::Ok();
  }

 public:
  // That the kernel's thread axes fit the target's workgroup: each
  // within its axis's limit, their product within the invocations'.
  Status CheckWorkgroup(const TargetLimits& limits) const {
    int64_t total = 1;
    std::string axes;
    for (const auto& [kind, bound] : launch_extents_) {
      if (!ir::IsThreadIdx(kind)) continue;
      const std::optional<int64_t> extent = ir::AsConstInt(bound.first);
      if (!extent) continue;  // NoteThreads refused it
      total *= *extent;
      axes += StrCat(axes.empty() ? "" : ", ", ir::LoopKindName(kind), " = ", *extent, " (stage '",
                     bound.second->name(), "')");
      const uint32_t limit = kind == ir::LoopKind::kThreadX ? limits.max_workgroup_size_x
                                                            : limits.max_workgroup_size_y;
      if (*extent > limit) {
        return InvalidArgument(at_, ": stage '", bound.second->name(), "' binds ",
                               ir::LoopKindName(kind), " with extent ", *extent,
                               "; the target allows ", limit, " (split the axis further)");
      }
    }
    if (total > limits.max_invocations_per_workgroup) {
      return InvalidArgument(at_, ": the workgroup would have ", total, " threads (", axes,
                             "); the target allows ", limits.max_invocations_per_workgroup,
                             " (split a thread axis further, or bind fewer)");
    }
    return Status::Ok();
  }

 private:
  const StageState& StageNamed(const std::string& name) const { return *impl_.Find(name); }

  // Whether stage `s` reads tensor `t`, directly or through inlined stages.
  bool Reads(const StageState& s, const Tensor& t) const {
    for (const Tensor& in : s.op->inputs) {
      if (in.same_as(t)) return true;
      const StageState* producer = impl_.Find(in.name());
      if (producer != nullptr && producer->inlined && Reads(*producer, t)) return true;
    }
    return false;
  }

  // Each loop of stage `s` over its extent, into `out`.
  void AddLoopRanges(const StageState& s, IntervalMap& out) {
    auto layout = Layout(s);
    for (const IterVar& a : s.leaves) {
      out[a.var().get()] = {ir::IntConst(ir::kI32, 0), ir::Simplify(layout->extent(a) - 1)};
    }
  }
  void NoteLoopRanges(const StageState& s) { AddLoopRanges(s, loop_ranges_); }

  // Whether dimension `d` of placed stage `s`'s region lies inside the
  // tensor for every iteration of the kernel's loops (constants decide).
  bool RegionInBounds(const StageState& s, size_t d) const {
    const Region& region = regions_.at(&s);
    std::optional<Interval> origin = EvalInterval(region.min[d], loop_ranges_);
    if (!origin) return false;
    const std::optional<int64_t> lo = ir::AsConstInt(ir::Simplify(origin->min));
    const std::optional<int64_t> hi =
        ir::AsConstInt(ir::Simplify(origin->max + region.span[d] - 1));
    const std::optional<int64_t> size = ir::AsConstInt(ir::Simplify(s.tensor.buffer().shape()[d]));
    return lo && hi && size && *lo >= 0 && *hi < *size;
  }

  // The expressions of a stage with inlined producers expanded: its body
  // and, for a reduction, its source.
  std::vector<ir::Expr> Expressions(const StageState& s) const {
    Inliner inliner(impl_);
    std::vector<ir::Expr> out = {inliner.MutateExpr(s.op->body)};
    if (s.op->has_reduction) out.push_back(inliner.MutateExpr(s.op->reduce_source));
    for (const ir::Expr& e : s.op->reduce_sources) out.push_back(inliner.MutateExpr(e));
    return out;
  }

  std::unique_ptr<StageLayout> Layout(const StageState& s) const {
    auto it = regions_.find(&s);
    return std::make_unique<StageLayout>(s, it == regions_.end() ? nullptr : &it->second.extent);
  }

  // The range of each root axis var of `s` (data, then reduction) while the
  // leaves in `relaxed` (and the `outer` vars) run over their extents, the
  // others fixed. Errors (under `at`): an axis whose value in its leaves has
  // no bounds (a fuse of symbolic extents).
  StatusOr<IntervalMap> RootRanges(const StageState& s, const StageLayout& layout,
                                   const std::unordered_set<const IterVarNode*>& relaxed,
                                   const IntervalMap& outer, const std::string& at) const {
    IntervalMap leaf_ranges = outer;
    for (const IterVar& a : s.leaves) {
      if (relaxed.count(a.get()) != 0) {
        leaf_ranges[a.var().get()] = {ir::IntConst(ir::kI32, 0),
                                      ir::Simplify(layout.extent(a) - 1)};
      }
    }
    IntervalMap out;
    auto region = regions_.find(&s);
    auto bound = [&](const IterVar& axis, const ir::Expr& v) -> Status {
      std::optional<Interval> i = EvalInterval(v, leaf_ranges);
      if (!i) {
        return InvalidArgument(at, ": cannot bound axis '", axis.name(), "' of stage '", s.name(),
                               "', ", ir::Print(ir::Simplify(v)),
                               " in its loops (fuse or split only axes of constant extent "
                               "inside the loop)");
      }
      out[axis.var().get()] = *i;
      return Status::Ok();
    };
    for (size_t d = 0; d < s.op->axis.size(); ++d) {
      ir::Expr v = layout.value(s.op->axis[d]);
      if (region != regions_.end()) v = region->second.At(d, v);
      KILN_RETURN_IF_ERROR(bound(s.op->axis[d], v));
    }
    for (const IterVar& r : s.op->reduce_axis) KILN_RETURN_IF_ERROR(bound(r, layout.value(r)));
    return out;
  }

  Status InferRegion(const StageState& p) {
    const std::string at = at_ + ": stage '" + p.name() + "' computed at '" + p.attach_stage +
                           "', loop '" + p.attach_axis.name() + "'";
    const StageState& c = StageNamed(p.attach_stage);
    auto c_layout = Layout(c);
    const std::vector<IterVar> order = c_layout->order();
    int pos = -1;
    for (size_t i = 0; i < order.size(); ++i) {
      if (order[i].same_as(p.attach_axis)) pos = static_cast<int>(i);
    }
    if (pos < 0) return InvalidArgument(at, ": the loop is no longer in the nest");
    // The consumer's loops inside the attach point run freely; for a shared
    // stage so do its thread-bound loops (every thread reads the buffer).
    std::unordered_set<const IterVarNode*> relaxed;
    for (size_t i = pos + 1; i < order.size(); ++i) relaxed.insert(order[i].get());
    if (p.scope == ir::MemoryScope::kShared) {
      for (const IterVar& a : order) {
        if (ir::IsThreadIdx(c_layout->loop_kind(a))) relaxed.insert(a.get());
      }
    }
    IntervalMap c_leaf_ranges;
    for (const IterVar& a : c.leaves) {
      if (relaxed.count(a.get()) != 0) {
        c_leaf_ranges[a.var().get()] = {ir::IntConst(ir::kI32, 0),
                                        ir::Simplify(c_layout->extent(a) - 1)};
      }
    }
    // A shared stage serves the threads bound further out too.
    IntervalMap outer_threads;
    if (p.scope == ir::MemoryScope::kShared) {
      for (const StageState* d = &c; d->attached();) {
        d = &StageNamed(d->attach_stage);
        auto d_layout = Layout(*d);
        for (const IterVar& a : d->leaves) {
          if (ir::IsThreadIdx(d_layout->loop_kind(a))) {
            outer_threads[a.var().get()] = {ir::IntConst(ir::kI32, 0),
                                            ir::Simplify(d_layout->extent(a) - 1)};
          }
        }
      }
    }
    c_leaf_ranges.insert(outer_threads.begin(), outer_threads.end());
    const ir::Buffer& buffer = p.tensor.buffer();
    std::vector<std::optional<Interval>> region(buffer.rank());
    // A local stage read by its consumer alone at strided positions (a
    // thread's columns tx * 4 + 64 * c + j) is stored compactly: per
    // dimension the digit form every read shares, while there is one.
    std::vector<std::optional<DigitForm>> forms(buffer.rank());
    std::vector<bool> formable(buffer.rank(), p.scope == ir::MemoryScope::kLocal);
    bool read = false;
    std::vector<const StageState*> readers = {&c};
    for (const StageState* s : attached_) {
      if (s != &p) readers.push_back(s);
    }
    for (const StageState* r : readers) {
      std::vector<ir::Expr> exprs = Expressions(*r);
      LoadFinder finder(buffer);
      for (const ir::Expr& e : exprs) finder.VisitExpr(e);
      if (finder.loads.empty()) continue;
      IntervalMap ranges;
      if (r == &c) {
        KILN_ASSIGN_OR_RETURN(ranges, RootRanges(c, *c_layout, relaxed, outer_threads, at));
      } else {
        // A reader computed inside the consumer: where, and over what region.
        int rpos = -1;
        if (r->attach_stage == c.name()) {
          for (size_t i = 0; i < order.size(); ++i) {
            if (order[i].same_as(r->attach_axis)) rpos = static_cast<int>(i);
          }
        }
        if (rpos < pos) {
          return InvalidArgument(at, ": stage '", r->name(),
                                 "' reads it too but is not computed inside that loop");
        }
        auto r_layout = Layout(*r);
        const Region& rr = regions_.at(r);
        for (size_t d = 0; d < r->op->axis.size(); ++d) {
          std::optional<Interval> lo = EvalInterval(rr.min[d], c_leaf_ranges);
          std::optional<Interval> hi =
              EvalInterval(ir::Simplify(rr.min[d] + rr.span[d] - 1), c_leaf_ranges);
          if (!lo || !hi)
            return InvalidArgument(at, ": cannot bound the region of stage '", r->name(), "'");
          ranges[r->op->axis[d].var().get()] = {lo->min, hi->max};
        }
        for (const IterVar& red : r->op->reduce_axis) {
          ranges[red.var().get()] = {ir::IntConst(ir::kI32, 0), ir::Simplify(red.extent() - 1)};
        }
      }
      for (const ir::LoadNode* load : finder.loads) {
        for (int d = 0; d < buffer.rank(); ++d) {
          std::optional<Interval> i = EvalInterval(load->indices[d], ranges);
          if (!i || load->indices[d].dtype().lanes != 1) {
            return InvalidArgument(at, ": cannot bound index ", ir::Print(load->indices[d]),
                                   " of its read in stage '", r->name(), "'");
          }
          region[d] = region[d] ? Union(*region[d], *i) : *i;
          if (!formable[d]) continue;
          std::optional<DigitForm> f =
              r == &c ? DigitFormOf(load->indices[d], c, *c_layout, relaxed) : std::nullopt;
          formable[d] =
              f.has_value() && (!forms[d] || (forms[d]->digits == f->digits &&
                                              ConstantDifference(forms[d]->base, f->base) == 0));
          if (formable[d] && !forms[d]) forms[d] = std::move(f);
        }
        read = true;
      }
    }
    if (!read) return InvalidArgument(at, ": stage '", c.name(), "' does not read it");
    Region out;
    for (int d = 0; d < buffer.rank(); ++d) {
      const Interval& i = *region[d];
      std::optional<int64_t> diff = ConstantDifference(i.max, i.min);
      if (!diff) {
        // A clamped index (min/max by constants) moves the region's ends
        // apart by an amount that varies: allocate its largest, over every
        // value of the loops around the attach point. The positions past
        // the region's end that this adds are computed where they lie in
        // the tensor (RegionInBounds guards the rest) and never read.
        IntervalMap fixed;
        for (const StageState* s = &c;; s = &StageNamed(s->attach_stage)) {
          AddLoopRanges(*s, fixed);
          if (!s->attached()) break;
        }
        diff = internal::DifferenceUpperBound(i.max, i.min, fixed, output_sizes_);
      }
      if (!diff || *diff < 0) {
        return InvalidArgument(
            at, ": the region it computes along dimension ", d, " is [",
            ir::Print(ir::Simplify(i.min)), ", ", ir::Print(ir::Simplify(i.max)),
            "], whose size is not a constant, nor bounded by one over the loops around the "
            "attach point; split the consumer's loops by constants (multiples of any constant "
            "the index divides by), clamp indices to constants or to sizes of the kernel's "
            "output, or compute the stage inline or at a loop where the index is one element");
      }
      if (formable[d] &&
          internal::DigitSpan(forms[d]->digits) > internal::DigitCount(forms[d]->digits)) {
        const internal::Digits& digits = forms[d]->digits;
        out.min.push_back(ir::Simplify(forms[d]->base));
        out.extent.push_back(ir::IntConst(ir::kI32, internal::DigitCount(digits)));
        out.span.push_back(ir::IntConst(ir::kI32, internal::DigitSpan(digits)));
        out.digits.push_back(digits);
        continue;
      }
      out.min.push_back(ir::Simplify(i.min));
      out.extent.push_back(ir::IntConst(ir::kI32, *diff + 1));
      out.span.push_back(out.extent.back());
      out.digits.emplace_back();
    }
    regions_[&p] = std::move(out);
    return Status::Ok();
  }

  // Emits `kind` bound to `var`: a launch loop, or where the context binds
  // that launch axis already, a let of the context's index.
  Stmt MakeLoop(const ir::Var& var, const ir::Expr& extent, ir::LoopKind kind,
                const ThreadContext& ctx, const Stmt& body) {
    if (kind == ir::LoopKind::kUnrolled && !ir::AsConstInt(ir::Simplify(extent)) && error_.ok()) {
      error_ = InvalidArgument(at_, ": loop '", var.name(), "' is unrolled but has extent ",
                               ir::Print(ir::Simplify(extent)),
                               "; only loops of constant extent unroll");
    }
    if (ir::IsThreadBinding(kind)) {
      auto it = ctx.find(kind);
      if (it != ctx.end()) return ir::LetStmtNode::make(var, it->second, body);
    }
    // A loop of one iteration is its index, 0.
    if ((kind == ir::LoopKind::kSerial || kind == ir::LoopKind::kUnrolled) &&
        ir::AsConstInt(ir::Simplify(extent)) == 1) {
      return ir::LetStmtNode::make(var, ir::IntConst(var.dtype(), 0), body);
    }
    return ir::ForNode::make(var, 0, extent, kind, body);
  }

  // Whether loop `axis` of stage `s` (with `including_axis`, the loops
  // inside it) may start more than once in one thread: a loop around it
  // that is not a launch axis, of `s` or of the stages `s` is computed in.
  bool MayRunAgain(const StageState& s, const IterVar& axis, bool including_axis = false) const {
    for (const IterVar& v : s.leaves) {
      const bool at = v.same_as(axis);
      if (at && !including_axis) break;
      const auto kind = s.annotations.find(v.get());
      if (kind == s.annotations.end() || !ir::IsThreadBinding(kind->second)) return true;
      if (at) break;
    }
    if (s.attach_stage.empty()) return false;
    const StageState* consumer = root_->name() == s.attach_stage ? root_ : nullptr;
    for (const StageState* a : attached_) {
      if (a->name() == s.attach_stage) consumer = a;
    }
    return consumer == nullptr || MayRunAgain(*consumer, s.attach_axis, true);
  }

  // The attached stages emitted at the top of loop `axis` of stage `s`,
  // around `body`. Double-buffered stages are software-pipelined: their
  // copy for the loop's first iteration runs before the loop (AroundLoop),
  // and each iteration, after one barrier, copies for the next iteration
  // (`axis` + 1, while below `extent`) into the other half while the body
  // reads this iteration's half.
  Stmt EmitAttached(const StageState& s, const IterVar& axis, const ThreadContext& ctx,
                    const Stmt& body, const ir::Expr& extent = ir::Expr()) {
    std::vector<const StageState*> here;
    for (const StageState* a : attached_) {
      if (a->attach_stage == s.name() && a->attach_axis.same_as(axis)) here.push_back(a);
    }
    if (CopiesAhead(s, axis, here, extent)) return Rotated(s, axis, ctx, here, body, extent);
    // Producers first: allocations nest outward from the last.
    std::vector<Stmt> seq;
    std::vector<Stmt> next_copies, next_loads, next_stores, free_loads, free_stores;
    std::vector<ir::Buffer> staging;
    // The copy for the first iteration writes the half the loop's last
    // iteration read when it has an odd count: where an enclosing loop runs
    // the pipeline again, every thread must be done reading it first (the
    // loop itself ends without a barrier).
    if (std::any_of(here.begin(), here.end(),
                    [](const StageState* p) { return p->double_buffer; }) &&
        MayRunAgain(s, axis)) {
      prologues_[axis.get()].push_back(ir::BarrierNode::make());
    }
    for (const StageState* p : here) {
      if (!p->double_buffer) continue;
      KILN_CHECK(extent.defined());
      for (const StageState* q : here) {
        if (!q->double_buffer && Reads(*p, q->tensor) && error_.ok()) {
          error_ = InvalidArgument(at_, ": double-buffered stage '", p->name(), "' reads stage '",
                                   q->name(),
                                   "', computed at the same loop without double "
                                   "buffering: its copy for the next iteration would read "
                                   "this iteration's values; double-buffer both or neither");
        }
      }
      // A copy that reads an earlier double-buffered stage of this loop
      // waits for that stage's copy.
      bool reads_earlier = false;
      for (const StageState* q : here) {
        if (q == p) break;
        reads_earlier = reads_earlier || (q->double_buffer && Reads(*p, q->tensor));
      }
      if (reads_earlier) {
        prologues_[axis.get()].push_back(ir::BarrierNode::make());
        next_copies.push_back(ir::BarrierNode::make());
      }
      const Stmt lowered = LowerStage(*p, ctx);
      prologues_[axis.get()].push_back(RenewBindings().MutateStmt(
          ir::Substitute(lowered, {{axis.var().get(), ir::IntConst(axis.var().dtype(), 0)}})));
      const Stmt next = ir::Substitute(lowered, {{axis.var().get(), axis.var() + 1}});
      // Through registers where it can: not where another double-buffered
      // stage of this loop reads this one or is read by it (the reader's
      // copy needs the values stored first).
      bool read_later = false;
      for (const StageState* q : here) {
        read_later = read_later || (q != p && q->double_buffer && Reads(*q, p->tensor));
      }
      std::optional<StagedCopy> staged;
      const bool free = p->double_buffer_branch_free;
      if (!reads_earlier && !read_later) {
        staged = CopyStager::Stage(free ? BranchFreeNext(*p, ctx, axis, extent) : next,
                                   placements_.at(p->tensor.buffer().get()).buffer);
      }
      if (!staged) {
        next_copies.push_back(next);
        continue;
      }
      (free ? free_loads : next_loads).push_back(staged->load);
      (free ? free_stores : next_stores).push_back(staged->store);
      staging.push_back(staged->staging);
    }
    const bool pipelined = !next_copies.empty() || !next_loads.empty() || !free_loads.empty();
    if (pipelined) seq.push_back(ir::BarrierNode::make());
    if (!next_loads.empty()) {
      seq.push_back(ir::IfNode::make(axis.var() + 1 < extent, ir::MakeSeq(next_loads)));
    }
    seq.insert(seq.end(), free_loads.begin(), free_loads.end());
    if (!next_copies.empty()) {
      seq.push_back(ir::IfNode::make(axis.var() + 1 < extent, ir::MakeSeq(next_copies)));
    }
    // One barrier between two shared stages, not two; none between two
    // single-buffered shared stages where the second does not read the
    // first (the barrier before the first also orders the second's writes);
    // none after a stage whose lowering ends with one (a cross-thread
    // reduction). At a launch loop, which a workgroup runs once, no earlier
    // iteration reads the buffers: no barrier before the first stage.
    const auto kind = s.annotations.find(axis.get());
    bool after_barrier = pipelined || (kind != s.annotations.end() && ir::IsBlockIdx(kind->second));
    std::vector<const StageState*> single;
    for (const StageState* p : here) {
      if (!p->double_buffer) single.push_back(p);
    }
    for (size_t i = 0; i < single.size(); ++i) {
      const StageState* p = single[i];
      const bool shared = p->scope == ir::MemoryScope::kShared;
      if (shared && !after_barrier) seq.push_back(ir::BarrierNode::make());
      Stmt lowered = LowerStage(*p, ctx);
      const bool ends_with_barrier = EndsWithBarrier(lowered);
      seq.push_back(std::move(lowered));
      const StageState* next = i + 1 < single.size() ? single[i + 1] : nullptr;
      const bool independent_next = shared && next != nullptr &&
                                    next->scope == ir::MemoryScope::kShared &&
                                    !Reads(*next, p->tensor);
      if (shared && !independent_next && !ends_with_barrier) {
        seq.push_back(ir::BarrierNode::make());
      }
      after_barrier = shared;
    }
    seq.push_back(body);
    if (!next_stores.empty()) {
      seq.push_back(ir::IfNode::make(axis.var() + 1 < extent, ir::MakeSeq(next_stores)));
    }
    seq.insert(seq.end(), free_stores.begin(), free_stores.end());
    Stmt out = ir::MakeSeq(seq);
    for (auto it = single.rbegin(); it != single.rend(); ++it) {
      out = ir::AllocateNode::make(placements_.at((*it)->tensor.buffer().get()).buffer, out);
    }
    for (auto it = staging.rbegin(); it != staging.rend(); ++it) {
      out = ir::AllocateNode::make(*it, out);
    }
    return out;
  }

  // The copy of double-buffered stage `p` for the iteration after `axis`'s,
  // branch-free: it reads the values of iteration min(axis + 1, extent - 1)
  // (the last iteration its own again) and writes the half of iteration
  // axis + 1, which the body does not read (in the last iteration, nothing
  // reads it any more).
  Stmt BranchFreeNext(const StageState& p, const ThreadContext& ctx, const IterVar& axis,
                      const ir::Expr& extent) {
    Placement& placement = placements_.at(p.tensor.buffer().get());
    const ir::Expr own_half = placement.half;
    const ir::Var half(p.name() + "_half", ir::kI32);
    placement.half = half;
    const Stmt lowered = LowerStage(p, ctx);
    placement.half = own_half;
    const ir::Var& k = axis.var();
    return ir::Substitute(lowered,
                          {{k.get(), ir::Min(k + 1, extent - 1)}, {half.get(), (k + 1) % 2}});
  }

  // Whether the stages `here` attached at loop `axis` of `s` are copied
  // one iteration ahead (Rotated): they all are (copy_ahead); an error where
  // only some are. (CollectStages checks that each is shared, reads only the
  // kernel's inputs, so none reads another, and sits at a serial loop.)
  bool CopiesAhead(const StageState& s, const IterVar& axis,
                   const std::vector<const StageState*>& here, const ir::Expr& extent) {
    const auto ahead =
        std::count_if(here.begin(), here.end(), [](const StageState* p) { return p->copy_ahead; });
    if (ahead == 0) return false;
    for (const StageState* p : here) {
      if (p->copy_ahead && extent.defined()) continue;
      if (error_.ok()) {
        error_ = InvalidArgument(at_, ": stage '", p->name(), "' is computed at loop '",
                                 axis.name(), "' of stage '", s.name(), "'",
                                 p->copy_ahead ? ", which is not a loop that can be copied ahead"
                                               : " without copy_ahead, where other stages are "
                                                 "copied ahead; copy all of a loop's stages "
                                                 "ahead or none");
      }
      return false;
    }
    return true;
  }

  // Single-buffered copies loaded one iteration ahead: the copies for the
  // loop's first iteration run before it (AroundLoop, under `0 < extent`
  // where that is not known), and each iteration runs `body`, a barrier
  // (the body's reads are done), the copies for the next iteration (while
  // below `extent`) and a barrier (they are visible). The same barriers as
  // copies at the top of each iteration, in the order the H200's shader
  // compilers schedule better: 2-8% on the f32 matmul (BENCHMARKS.md).
  // Where a stage is copied ahead `peeled`, the loop runs one iteration
  // fewer, each copying under no branch, and `body` for the last iteration
  // follows it (MakeLoopAt).
  Stmt Rotated(const StageState& s, const IterVar& axis, const ThreadContext& ctx,
               const std::vector<const StageState*>& here, const Stmt& body,
               const ir::Expr& extent) {
    const bool peeled = std::any_of(here.begin(), here.end(), [](const StageState* p) {
      return p->copy_ahead_registers && p->copy_ahead_last == LastCopy::kPeeled;
    });
    std::vector<Stmt> first, next, loads, free_loads, stores, free_stores;
    std::vector<ir::Buffer> staging;
    for (const StageState* p : here) {
      const Stmt lowered = LowerStage(*p, ctx);
      first.push_back(RenewBindings().MutateStmt(
          ir::Substitute(lowered, {{axis.var().get(), ir::IntConst(axis.var().dtype(), 0)}})));
      const ir::Buffer& buffer = placements_.at(p->tensor.buffer().get()).buffer;
      const Stmt copy = ir::Substitute(lowered, {{axis.var().get(), axis.var() + 1}});
      rotated_[axis.get()].push_back(buffer);
      // copy_ahead(registers): the loads before the body, the stores after;
      // the last iteration loads its own values again where the loads are
      // under no branch (in a peeled loop, every iteration has a next).
      const LastCopy last = peeled ? LastCopy::kPeeled : p->copy_ahead_last;
      std::optional<StagedCopy> staged;
      if (p->copy_ahead_registers) {
        const bool clamped = last == LastCopy::kLoadsAgain || last == LastCopy::kStoresAgain;
        staged = CopyStager::Stage(
            clamped
                ? ir::Substitute(lowered, {{axis.var().get(), ir::Min(axis.var() + 1, extent - 1)}})
                : copy,
            buffer);
      }
      if (!staged) {
        (peeled ? free_stores : next).push_back(copy);
        continue;
      }
      (last == LastCopy::kSkipped ? loads : free_loads).push_back(staged->load);
      (last == LastCopy::kSkipped || last == LastCopy::kLoadsAgain ? stores : free_stores)
          .push_back(staged->store);
      staging.push_back(staged->staging);
    }
    Stmt prologue = ir::MakeSeq(first);
    const ir::Expr runs = ir::Simplify(ir::IntConst(extent.dtype(), 0) < extent);
    const auto* known = runs.as<ir::BoolImmNode>();
    const bool surely_runs = known != nullptr && known->value;
    if (!surely_runs) prologue = ir::IfNode::make(runs, prologue);
    prologues_[axis.get()].push_back(prologue);
    prologues_[axis.get()].push_back(ir::BarrierNode::make());
    if (peeled) {
      // The last iteration's math; a barrier after it where the loop may
      // start again (its next first copies overwrite the tiles).
      Stmt tail = RenewBindings().MutateStmt(
          ir::Substitute(body, {{axis.var().get(), ir::Simplify(extent - 1)}}));
      if (MayRunAgain(s, axis)) tail = ir::MakeSeq({tail, ir::BarrierNode::make()});
      peeled_[axis.get()] = surely_runs ? tail : ir::IfNode::make(runs, tail);
    }
    const ir::Expr more = axis.var() + 1 < extent;
    std::vector<Stmt> seq;
    if (!loads.empty()) seq.push_back(ir::IfNode::make(more, ir::MakeSeq(loads)));
    seq.insert(seq.end(), free_loads.begin(), free_loads.end());
    seq.push_back(body);
    seq.push_back(ir::BarrierNode::make());
    for (const std::vector<Stmt>* copies : {&stores, &next}) {
      if (!copies->empty()) seq.push_back(ir::IfNode::make(more, ir::MakeSeq(*copies)));
    }
    seq.insert(seq.end(), free_stores.begin(), free_stores.end());
    seq.push_back(ir::BarrierNode::make());
    Stmt out = ir::MakeSeq(seq);
    for (auto it = staging.rbegin(); it != staging.rend(); ++it) {
      out = ir::AllocateNode::make(*it, out);
    }
    return out;
  }

  // Loop `var` of `extent` around `body`; where its copies ahead are
  // peeled (Rotated), one iteration fewer and the last one's math after it.
  Stmt MakeLoopAt(const StageState& s, const IterVar& axis, const ir::Expr& extent,
                  ir::LoopKind kind, const ThreadContext& ctx, const Stmt& body) {
    auto it = peeled_.find(axis.get());
    // (A peeled loop runs one iteration fewer; its last one follows it.)
    if (const auto n = ir::AsConstInt(ir::Simplify(extent));
        kind == ir::LoopKind::kUnrolled && n && *n - (it != peeled_.end()) > ir::kMaxUnrollExtent &&
        error_.ok()) {
      error_ = InvalidArgument(at_, ": axis '", axis.name(), "' of stage '", s.tensor.name(),
                               "' is unrolled but has extent ", *n, ", more than the ",
                               ir::kMaxUnrollExtent,
                               " iterations an unrolled loop may have; split it and unroll "
                               "the inner axis");
    }
    if (it == peeled_.end()) return MakeLoop(axis.var(), extent, kind, ctx, body);
    Stmt tail = std::move(it->second);
    peeled_.erase(it);
    const ir::Expr fewer = ir::Simplify(extent - 1);
    if (const auto n = ir::AsConstInt(fewer); n && *n <= 0) return tail;
    return ir::MakeSeq({MakeLoop(axis.var(), fewer, kind, ctx, body), tail});
  }

  // The double buffers of the stages attached at loop `axis` of `s`, and
  // the buffers of its rotated stages, around the loop (each lives from one
  // iteration to the next), with the copies for the loop's first iteration
  // before it.
  Stmt AroundLoop(const StageState& s, const IterVar& axis, Stmt loop) {
    if (auto it = prologues_.find(axis.get()); it != prologues_.end()) {
      std::vector<Stmt> seq = it->second;
      seq.push_back(loop);
      loop = ir::MakeSeq(seq);
      prologues_.erase(it);
    }
    for (auto it = attached_.rbegin(); it != attached_.rend(); ++it) {
      const StageState* a = *it;
      if (a->double_buffer && a->attach_stage == s.name() && a->attach_axis.same_as(axis)) {
        loop = ir::AllocateNode::make(placements_.at(a->tensor.buffer().get()).buffer, loop);
      }
    }
    if (auto it = rotated_.find(axis.get()); it != rotated_.end()) {
      for (auto b = it->second.rbegin(); b != it->second.rend(); ++b) {
        loop = ir::AllocateNode::make(*b, loop);
      }
      rotated_.erase(it);
    }
    return loop;
  }

  // Allocates the buffer of attached stage `p` inside loop `axis` of its
  // consumer (strides for storage_align, two halves for a double buffer).
  Status Place(const StageState& p) {
    const Region& region = regions_.at(&p);
    std::vector<ir::Expr> shape = region.extent;
    std::vector<int64_t> ext;
    ext.reserve(shape.size());
    for (const ir::Expr& e : shape) ext.push_back(*ir::AsConstInt(e));
    std::vector<int64_t> strides(ext.size());
    int64_t stride = 1;
    const int64_t kMax = INT32_MAX;
    for (int d = static_cast<int>(ext.size()) - 1; d >= 0; --d) {
      for (const StorageAlignment& a : p.alignments) {
        // The next stride at or above `stride` that is offset modulo factor.
        if (a.dim == d) stride += ((a.offset - stride % a.factor) % a.factor + a.factor) % a.factor;
      }
      strides[d] = stride;
      if (stride > kMax || (ext[d] > 0 && stride > kMax / ext[d])) {
        return InvalidArgument(at_, ": stage '", p.name(), "' needs a buffer of ", ext.size(),
                               " dimensions whose elements (aligned by storage_align) "
                               "pass 2^31; align less, or compute the stage at an inner loop");
      }
      stride *= ext[d];
    }
    std::vector<ir::Expr> stride_exprs;
    stride_exprs.reserve(strides.size() + 1);
    for (int64_t st : strides) stride_exprs.push_back(ir::IntConst(ir::kI32, st));
    Placement placement;
    placement.min = region.min;
    placement.digits = region.digits;
    if (p.double_buffer) {
      shape.insert(shape.begin(), ir::IntConst(ir::kI32, 2));
      stride_exprs.insert(stride_exprs.begin(), ir::IntConst(ir::kI32, stride));
      placement.half = p.attach_axis.var() % 2;
    }
    if (p.alignments.empty()) stride_exprs.clear();
    placement.buffer =
        ir::Buffer(p.name() + "_buf", p.tensor.dtype(), shape, stride_exprs, p.scope);
    placements_[p.tensor.buffer().get()] = placement;
    return Status::Ok();
  }

  Stmt LowerStage(const StageState& stage, const ThreadContext& outer_ctx);
  // That `stage`'s cross-thread reduction over `width` threads can combine
  // through subgroups: the reduction axis is the workgroup's only thread
  // axis (a subgroup then never holds threads of two reductions, whatever
  // the device's subgroup size), the values are 32-bit or f16 numbers, and
  // for a butterfly of shuffles (reducers other than sum, max and min) the
  // width is a power of two (no subgroup is partly filled but the only one).
  Status CheckSubgroupReduce(const StageState& stage, int64_t width, bool only_axis,
                             const std::vector<ir::DataType>& types, bool butterfly) const;

  const Schedule::Impl& impl_;
  std::string at_;
  const StageState* root_ = nullptr;
  std::unordered_set<const ir::VarNode*> output_sizes_;  // size vars the runtime keeps >= 0
  std::vector<const StageState*> attached_;
  // An attached stage's region: per dimension its origin, its size as
  // stored (`extent`) and the positions it covers from the origin (`span`,
  // the extent unless the dimension is strided, `digits` not empty).
  struct Region {
    std::vector<ir::Expr> min, extent, span;
    std::vector<internal::Digits> digits;
    // The tensor index at stored position `position` along `d`.
    ir::Expr At(size_t d, const ir::Expr& position) const {
      return min[d] + (digits[d].empty() ? position : internal::Spread(position, digits[d]));
    }
  };
  // An index as an origin plus digits over the relaxed loops.
  struct DigitForm {
    ir::Expr base;
    internal::Digits digits;
  };
  std::optional<DigitForm> DigitFormOf(const ir::Expr& index, const StageState& c,
                                       const StageLayout& layout,
                                       const std::unordered_set<const IterVarNode*>& relaxed) const;
  std::unordered_map<const StageState*, Region> regions_;
  std::unordered_map<const ir::BufferNode*, Placement> placements_;
  ir::RangeMap int_ranges_;  // the kernel's loops of constant extent
  std::map<ir::LoopKind, ir::Expr> thread_extents_;
  // The first iteration's copies of the double-buffered stages at a loop,
  // from EmitAttached to AroundLoop.
  std::unordered_map<const IterVarNode*, std::vector<Stmt>> prologues_;
  // The buffers of the stages loaded one iteration ahead at a loop, from
  // Rotated to AroundLoop.
  std::unordered_map<const IterVarNode*, std::vector<ir::Buffer>> rotated_;
  // The last iteration of a loop whose copies ahead are peeled, from
  // Rotated to MakeLoopAt.
  std::unordered_map<const IterVarNode*, Stmt> peeled_;
  std::map<ir::LoopKind, std::pair<ir::Expr, const StageState*>> launch_extents_;
  IntervalMap loop_ranges_;
  Status error_;
};

// `index` (read by consumer `c`) as a base plus digits: each relaxed loop of
// `c` a digit of its constant coefficient and extent, and each root axis of
// `c` stored strided (its loops all relaxed) the digits of that axis scaled
// by its coefficient. nullopt where the index is not such a sum.
std::optional<KernelLowering::DigitForm> KernelLowering::DigitFormOf(
    const ir::Expr& index, const StageState& c, const StageLayout& layout,
    const std::unordered_set<const IterVarNode*>& relaxed) const {
  if (index.dtype() != ir::kI32) return std::nullopt;
  std::unordered_map<const ir::VarNode*, int64_t> loop_extent;
  for (const IterVar& a : c.leaves) {
    if (relaxed.count(a.get()) == 0) continue;
    const std::optional<int64_t> e = ir::AsConstInt(ir::Simplify(layout.extent(a)));
    if (!e) return std::nullopt;
    loop_extent[a.var().get()] = *e;
  }
  struct Uses : ir::ExprVisitor {
    const std::unordered_map<const ir::VarNode*, int64_t>* vars;
    const std::unordered_map<const ir::VarNode*, const internal::Digits*>* holders;
    bool relaxed = false, fixed = false;
    void VisitVar(const ir::VarNode* op) override {
      (vars->count(op) != 0 || holders->count(op) != 0 ? relaxed : fixed) = true;
    }
  };
  // The consumer's root axes in its loop vars; a strided one as a stand-in
  // var for its stored position.
  std::unordered_map<const ir::VarNode*, ir::Expr> expand;
  std::unordered_map<const ir::VarNode*, const internal::Digits*> holders;
  std::vector<ir::Var> stand_ins, alias_vars;  // alias_vars keep the aliases alive
  ir::VarMap aliases;
  const auto c_region = regions_.find(&c);
  for (size_t d = 0; d < c.op->axis.size(); ++d) {
    ir::Expr v = layout.value(c.op->axis[d]);
    if (c_region != regions_.end()) {
      const internal::Digits& digits = c_region->second.digits[d];
      if (!digits.empty()) {
        Uses uses;
        uses.vars = &loop_extent;
        uses.holders = &holders;
        uses.VisitExpr(v);
        if (uses.fixed) return std::nullopt;
        stand_ins.emplace_back(c.op->axis[d].name() + "_position", ir::kI32);
        holders[stand_ins.back().get()] = &digits;
        v = stand_ins.back();
      }
      // The axis at the region's origin plus its loop value. Where that
      // value is the axis's own var (a leaf), the var stands for the loop
      // under an alias, so that the expansion does not expand it again.
      const ir::Var& self = c.op->axis[d].var();
      FreeVars used;
      used.VisitExpr(v);
      if (std::any_of(used.vars.begin(), used.vars.end(),
                      [&](const ir::Var& u) { return u.same_as(self); })) {
        ir::Var alias(self.name(), self.dtype());
        if (auto it = loop_extent.find(self.get()); it != loop_extent.end()) {
          loop_extent[alias.get()] = it->second;
        }
        aliases[alias.get()] = self;
        v = ir::Substitute(v, ir::VarMap{{self.get(), alias}});
        alias_vars.push_back(alias);
      }
      v = c_region->second.min[d] + v;
    }
    expand[c.op->axis[d].var().get()] = v;
  }
  for (const IterVar& r : c.op->reduce_axis) expand[r.var().get()] = layout.value(r);
  ir::LinearSum sum;
  const bool linear = ir::AddLinear(index, 1, sum, [&](const ir::VarNode* v) -> ir::Expr {
    auto it = expand.find(v);
    return it == expand.end() ? ir::Expr() : it->second;
  });
  if (!linear) return std::nullopt;
  internal::Digits digits;
  ir::LinearSum base;
  base.constant = sum.constant;
  for (const auto& [term, coefficient] : sum.terms) {
    if (coefficient == 0) continue;
    if (const auto* v = term.as<ir::VarNode>()) {
      if (auto it = loop_extent.find(v); it != loop_extent.end()) {
        if (coefficient < 0) return std::nullopt;
        digits.push_back(internal::Digit{coefficient, it->second});
        continue;
      }
      if (auto it = holders.find(v); it != holders.end()) {
        if (coefficient < 0) return std::nullopt;
        for (const internal::Digit& g : *it->second) {
          digits.push_back(internal::Digit{coefficient * g.stride, g.extent});
        }
        continue;
      }
    }
    Uses uses;
    uses.vars = &loop_extent;
    uses.holders = &holders;
    uses.VisitExpr(term);
    if (uses.relaxed) return std::nullopt;
    base.Add(term, coefficient);
  }
  std::optional<internal::Digits> normal = internal::NormalizeDigits(std::move(digits));
  if (!normal) return std::nullopt;
  return DigitForm{ir::Substitute(base.ToExpr(ir::kI32), aliases), *normal};
}

Status KernelLowering::CheckSubgroupReduce(const StageState& stage, int64_t width, bool only_axis,
                                           const std::vector<ir::DataType>& types,
                                           bool butterfly) const {
  auto error = [&](const auto&... why) {
    return InvalidArgument(at_, ": stage '", stage.name(), "' asks for subgroup_reduce, but ",
                           why...);
  };
  bool alone = only_axis;
  for (const auto& [kind, extent] : thread_extents_) {
    const std::optional<int64_t> e = ir::AsConstInt(ir::Simplify(extent));
    if (kind == ir::LoopKind::kThreadX ? e != width : e != 1) alone = false;
  }
  if (!alone) {
    return error(
        "its reduction axis is not the workgroup's only thread axis (a subgroup would "
        "mix threads of several reductions); combine through the shared-memory tree");
  }
  for (const ir::DataType& dtype : types) {
    if (dtype.lanes != 1 ||
        !(dtype == ir::kF32 || dtype == ir::kI32 || dtype == ir::kU32 || dtype == ir::kF16)) {
      return error("it reduces ", dtype.ToString(),
                   " values; subgroups combine f32, f16, i32 and u32");
    }
  }
  if (butterfly && (width & (width - 1)) != 0) {
    return error("its reduction runs over ", width,
                 " threads; a reducer other than sum, max and min combines through shuffles, "
                 "which need a power of two");
  }
  return Status::Ok();
}

Stmt KernelLowering::LowerStage(const StageState& stage, const ThreadContext& outer_ctx) {
  const OperationNode* op = stage.op.get();
  const auto region_it = regions_.find(&stage);
  const Region* region = region_it == regions_.end() ? nullptr : &region_it->second;
  const std::unique_ptr<StageLayout> layout_ptr = Layout(stage);
  const StageLayout& layout = *layout_ptr;
  const auto& split_of = layout.split_of();
  const auto& fused_into = layout.fused_into();
  auto value = [&](const IterVar& axis) { return layout.value(axis); };

  // The stage's expressions: inlined producers expanded, root data axes in
  // the tensor's coordinates (the region's origin added), placed tensors
  // read from their buffers.
  ir::VarMap global;
  if (region != nullptr) {
    for (size_t d = 0; d < op->axis.size(); ++d) {
      if (region->digits[d].empty()) {
        global[op->axis[d].var().get()] = region->min[d] + op->axis[d].var();
      }
    }
  }
  Inliner inliner(impl_);

  // The vectorized leaf, if any, and its lane count.
  IterVar vec;
  int64_t lanes = 0;
  for (const IterVar& a : stage.leaves) {
    if (layout.loop_kind(a) == ir::LoopKind::kVectorized) {
      vec = a;
      lanes = ir::AsConstInt(ir::Simplify(layout.extent(a))).value_or(0);
    }
  }
  // A computed-at stage's vectorized axis (checked here, where its region
  // is known) spans 2, 3 or 4 elements of that region.
  if (vec.defined() && (lanes < 2 || lanes > 4) && error_.ok()) {
    error_ = InvalidArgument(
        at_, ": stage '", stage.name(), "' vectorizes axis '", vec.name(), "', whose extent is ",
        ir::Print(ir::Simplify(layout.extent(vec))), " where the stage is computed (at '",
        stage.attach_stage, "', loop '", stage.attach_axis.name(),
        "'); a vectorized axis needs extent 2, 3 or 4 (the WGSL vector sizes): split it by the "
        "lanes first, or compute the stage at an inner loop");
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
      const std::optional<int64_t> e = ir::AsConstInt(ir::Simplify(layout.extent(r.inner)));
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
  // The let-bound root axes' values (in their lane forms in a vectorized
  // stage; none where the lanes enter otherwise).
  ir::VarMap roots;
  for (const auto* axes : {&op->axis, &op->reduce_axis}) {
    for (const IterVar& a : *axes) {
      if (is_leaf(a)) continue;
      if (!vec.defined()) {
        roots[a.var().get()] = value(a);
      } else if (std::optional<LaneForm> f = lane_form(a)) {
        roots[a.var().get()] = f->lane ? f->base + vec.var() : f->base;
      }
    }
  }
  // A strided dimension's index in the tensor, in the leaf loops' vars,
  // where the loops' ranges take the spreading divisions apart.
  if (region != nullptr) {
    for (size_t d = 0; d < op->axis.size(); ++d) {
      if (region->digits[d].empty()) continue;
      const IterVar& a = op->axis[d];
      const ir::Expr position = is_leaf(a) ? ir::Expr(a.var()) : lane_value(a);
      global[a.var().get()] =
          region->min[d] + ir::Simplify(internal::Spread(position, region->digits[d]), int_ranges_);
    }
  }
  Relocate relocate(placements_, std::move(roots), int_ranges_);
  auto prepare = [&](const ir::Expr& e) {
    return relocate.MutateExpr(inliner.MutateExpr(global.empty() ? e : ir::Substitute(e, global)));
  };
  // The guard of the splits that do not divide, for data or reduction axes,
  // and for a placed stage the tensor's own bounds (undefined: none).
  // `hoisted`: every index in terms of the leaf loop vars rather than a root
  // axis's let-bound var.
  auto guard_of = [&](bool reduce, bool hoisted) -> ir::Expr {
    ir::Expr guard;
    auto add = [&](const ir::Expr& cond) { guard = guard.defined() ? (guard && cond) : cond; };
    for (const Relation& r : stage.relations) {
      if (r.kind != Relation::Kind::kSplit || r.parent.is_reduce() != reduce ||
          layout.DividesExactly(r.parent, r.factor)) {
        continue;
      }
      const ir::Expr at =
          is_root(r.parent) && !hoisted ? ir::Expr(r.parent.var()) : lane_value(r.parent);
      add(at < layout.extent(r.parent));
    }
    if (region != nullptr && !reduce) {
      for (size_t d = 0; d < op->axis.size(); ++d) {
        if (RegionInBounds(stage, d)) continue;
        const IterVar& a = op->axis[d];
        const ir::Expr local = hoisted ? lane_value(a) : ir::Expr(a.var());
        const ir::Expr at = region->At(d, local);
        const ir::Expr lo = ir::Simplify(at >= 0), hi = ir::Simplify(at < op->buffer.shape()[d]);
        if (!IsTrue(lo)) add(lo);
        if (!IsTrue(hi)) add(hi);
      }
    }
    return guard;
  };
  // Lets binding the root axes that are not loops themselves, and the
  // guard, when `guarded`.
  auto wrap = [&](bool reduce, Stmt body, bool guarded = true) -> Stmt {
    const ir::Expr guard = guarded ? guard_of(reduce, false) : ir::Expr();
    if (guard.defined()) body = ir::IfNode::make(guard, body);
    const auto& roots = reduce ? op->reduce_axis : op->axis;
    // None where nothing reads it (its uses expanded into the loop vars); the
    // values are in loop vars, so the lets add no use of another root.
    FreeVars free;
    free.VisitStmt(body);
    for (auto it = roots.rbegin(); it != roots.rend(); ++it) {
      if (is_leaf(*it)) continue;
      const bool used = std::any_of(free.vars.begin(), free.vars.end(),
                                    [&](const ir::Var& v) { return v.same_as(it->var()); });
      if (used) body = ir::LetStmtNode::make(it->var(), lane_value(*it), body);
    }
    return body;
  };
  // The launch context inside each loop.
  std::unordered_map<const IterVarNode*, ThreadContext> ctx_inside;
  {
    ThreadContext ctx = outer_ctx;
    for (const IterVar& a : layout.order()) {
      const ir::LoopKind kind = layout.loop_kind(a);
      if (ir::IsThreadBinding(kind) && ctx.count(kind) == 0) ctx[kind] = a.var();
      ctx_inside[a.get()] = ctx;
    }
  }
  // A stage computed at another's loop runs in each workgroup and thread
  // that reach the loop. Its loops may bind threads only where those share
  // a shared stage's work: never a workgroup (each computes the region it
  // reads itself), nor a thread in a local stage (one copy per thread, which
  // each thread computes whole).
  if (stage.attached() && error_.ok()) {
    for (const IterVar& a : stage.leaves) {
      const ir::LoopKind kind = layout.loop_kind(a);
      if (!ir::IsThreadBinding(kind)) continue;
      const bool block = !ir::IsThreadIdx(kind);
      if (!block && stage.scope != ir::MemoryScope::kLocal) continue;
      error_ = InvalidArgument(
          at_, ": stage '", stage.name(), "' is computed at '", stage.attach_stage, "', loop '",
          stage.attach_axis.name(), "', and binds axis '", a.name(), "' to ",
          ir::LoopKindName(kind), ": ",
          block ? "a stage computed at another's loop cannot bind a workgroup axis (each "
                  "workgroup computes the part it reads)"
                : "a local stage is one copy per thread, which each thread computes whole; "
                  "only a shared stage spreads its work over the threads");
      break;
    }
  }
  auto context_at = [&](const std::vector<IterVar>& loops) {
    return loops.empty() ? outer_ctx : ctx_inside.at(loops.back().get());
  };
  // A vectorized reduction's lanes run unrolled where a guard depends on
  // them (vector_lanes false).
  bool vector_lanes = true;
  auto kind_of = [&](const IterVar& a) {
    return !vector_lanes && vec.defined() && a.same_as(vec) ? ir::LoopKind::kUnrolled
                                                            : layout.loop_kind(a);
  };
  auto nest = [&](const std::vector<IterVar>& loops, Stmt body, const ThreadContext& ctx0) {
    for (int k = static_cast<int>(loops.size()) - 1; k >= 0; --k) {
      const IterVar& a = loops[k];
      body = EmitAttached(stage, a, ctx_inside.at(a.get()), body, layout.extent(a));
      const ThreadContext& ctx = k == 0 ? ctx0 : ctx_inside.at(loops[k - 1].get());
      body = AroundLoop(stage, a, MakeLoopAt(stage, a, layout.extent(a), kind_of(a), ctx, body));
    }
    return body;
  };
  // A store the whole workgroup would repeat (a global or shared result of a
  // stage that binds fewer launch threads than the kernel) is made by the
  // first thread along each missing axis.
  auto single_store = [&](Stmt store, const ThreadContext& ctx) {
    if (stage.scope == ir::MemoryScope::kLocal) return store;
    for (const auto& [kind, extent] : thread_extents_) {
      if (ctx.count(kind) != 0) continue;
      ir::Var t(std::string(kind == ir::LoopKind::kThreadX   ? "tx0"
                            : kind == ir::LoopKind::kThreadY ? "ty0"
                                                             : "tz0"),
                ir::kI32);
      store = ir::ForNode::make(t, 0, extent, kind, ir::IfNode::make(t == 0, store));
    }
    return store;
  };

  std::vector<ir::Expr> out_indices;
  for (const IterVar& a : op->axis) out_indices.push_back(a.var());
  const ir::Buffer& out = stage.tensor.buffer();
  auto make_store = [&](const ir::Expr& v) {
    if (region == nullptr) return ir::StoreNode::make(out, out_indices, v);
    const Placement& p = placements_.at(out.get());
    std::vector<ir::Expr> indices = out_indices;
    if (p.half.defined()) indices.insert(indices.begin(), p.half);
    return ir::StoreNode::make(p.buffer, indices, v);
  };
  std::vector<IterVar> data_loops = layout.data_loops;
  const ThreadContext data_ctx = context_at(data_loops);

  if (op->has_reduction && vec.defined() &&
      !(layout.mixed && op->reducer != ReducerKind::kCustom &&
        layout.order().back().same_as(vec))) {
    if (error_.ok()) {
      error_ = InvalidArgument(
          at_, ": stage '", stage.name(), "' is a reduction and vectorizes axis '", vec.name(),
          "': a reduction's data axis vectorizes only as its innermost loop with every reduction "
          "loop outside it (the result then accumulates in place, a vector at a time), and not "
          "with a user-defined reducer");
    }
    return ir::MakeSeq({});
  }
  if (op->has_reduction && vec.defined()) {
    vector_lanes = !guard_of(false, true).defined() && !guard_of(true, true).defined();
  }
  if (op->has_reduction) {
    // The reducer as n values (one for sum/prod/max/min, one per value of
    // a user-defined tuple reducer): types, identities, prepared sources,
    // and combine(a, b) giving new values from two sets of them.
    const bool custom = op->reducer == ReducerKind::kCustom;
    const size_t n = custom ? op->reduce_sources.size() : 1;
    std::vector<ir::DataType> types;
    std::vector<ir::Expr> identity, sources;
    for (size_t k = 0; k < n; ++k) {
      const ir::Expr& src = custom ? op->reduce_sources[k] : op->reduce_source;
      types.push_back(src.dtype());
      identity.push_back(custom ? op->custom_identity[k]
                                : ReducerIdentity(op->reducer, src.dtype()));
      sources.push_back(prepare(src));
    }
    using Values = std::vector<ir::Expr>;
    auto combine = [&](const Values& a, const Values& b) -> Values {
      if (!custom) return {ReducerCombine(op->reducer, a[0], b[0], stage.fused_multiply_add)};
      ir::VarMap m;
      for (size_t k = 0; k < n; ++k) {
        m[op->custom_acc[k].get()] = a[k];
        m[op->custom_next[k].get()] = b[k];
      }
      Values out;
      for (size_t k = 0; k < n; ++k) out.push_back(ir::Substitute(op->custom_combine[k], m));
      return out;
    };
    // One buffer per value ("<stage><suffix>", with the value's number for
    // a tuple reducer).
    auto buffers = [&](const std::string& suffix, const std::vector<ir::Expr>& shape,
                       ir::MemoryScope scope) {
      std::vector<ir::Buffer> out;
      for (size_t k = 0; k < n; ++k) {
        out.emplace_back(op->name + suffix + (custom ? std::to_string(k) : ""), types[k], shape,
                         std::vector<ir::Expr>{}, scope);
      }
      return out;
    };
    auto loads = [&](const std::vector<ir::Buffer>& bufs, const std::vector<ir::Expr>& idx) {
      Values out;
      for (const ir::Buffer& buf : bufs) out.push_back(ir::Load(buf, idx));
      return out;
    };
    // Stores values[k] into bufs[k] at idx, every value computed before any
    // store (a tuple reducer's new values read the old ones).
    auto store_all = [&](const std::vector<ir::Buffer>& bufs, const std::vector<ir::Expr>& idx,
                         const Values& values) -> Stmt {
      if (n == 1) return ir::StoreNode::make(bufs[0], idx, values[0]);
      std::vector<ir::Var> fresh;
      std::vector<Stmt> stores;
      for (size_t k = 0; k < n; ++k) {
        fresh.emplace_back(op->custom_name + "_new" + std::to_string(k), types[k]);
        stores.push_back(ir::StoreNode::make(bufs[k], idx, fresh[k]));
      }
      Stmt s = ir::MakeSeq(stores);
      for (size_t k = n; k-- > 0;) s = ir::LetStmtNode::make(fresh[k], values[k], s);
      return s;
    };
    auto allocate_all = [](const std::vector<ir::Buffer>& bufs, Stmt body) {
      for (auto it = bufs.rbegin(); it != bufs.rend(); ++it) {
        body = ir::AllocateNode::make(*it, body);
      }
      return body;
    };
    auto result = [&](const Values& values) {
      ir::VarMap m;
      for (size_t k = 0; k < n; ++k) {
        m[(custom ? op->reduce_vars[k] : op->reduce_var).get()] = values[k];
      }
      // The body in the tensor's coordinates first, then the values: they
      // are loads of this stage's own buffers, indexed by its loop vars.
      return ir::Substitute(prepare(op->body), m);
    };
    const std::vector<ir::Buffer> accs =
        buffers("_acc", {ir::IntConst(ir::kI32, 1)}, ir::MemoryScope::kLocal);
    const std::vector<ir::Expr> at0 = {ir::IntConst(ir::kI32, 0)};
    const Values acc0 = loads(accs, at0);
    Stmt update;
    if (!custom && (op->reducer == ReducerKind::kMax || op->reducer == ReducerKind::kMin) &&
        types[0].is_float()) {
      // The NaN-propagating combine reads the value three times: bind it once.
      ir::Var v(op->name + "_v", types[0]);
      update = ir::LetStmtNode::make(v, sources[0], store_all(accs, at0, combine(acc0, {v})));
    } else {
      update = store_all(accs, at0, combine(acc0, sources));
    }
    const Stmt init = store_all(accs, at0, identity);

    std::vector<IterVar> reduce_loops = layout.reduce_loops;
    IterVar across;  // a reduction leaf bound to threadIdx.x
    for (const IterVar& a : reduce_loops) {
      if (ir::IsThreadIdx(layout.loop_kind(a))) across = a;
    }
    if (stage.subgroup_reduce && !across.defined()) {
      error_ = InvalidArgument(at_, ": stage '", stage.name(),
                               "' asks for subgroup_reduce but binds no reduction axis to "
                               "threadIdx.x");
      return ir::MakeSeq({});
    }
    if (custom && layout.mixed) {
      error_ = InvalidArgument(at_, ": stage '", stage.name(),
                               "' reduces with user-defined "
                               "reducer '",
                               op->custom_name,
                               "', which keeps its reduction loops "
                               "innermost (no in-place reduction)");
      return ir::MakeSeq({});
    }
    if (layout.mixed && across.defined()) {
      error_ =
          InvalidArgument(at_, ": stage '", stage.name(), "' binds reduction axis '", across.name(),
                          "' to threadIdx.x but has data loops inside its reduction loops; "
                          "a cross-thread reduction keeps its reduction loops innermost");
      return ir::MakeSeq({});
    }
    if (layout.mixed) {
      // Reduction loops outside data loops: the result accumulates in place
      // (a stage whose value is its reduction: Reorder checks it). Each
      // element starts at the identity, then every reduction step updates
      // it.
      std::vector<IterVar> inner_data;
      for (const IterVar& a : reduce_loops) {
        if (!a.is_reduce()) inner_data.push_back(a);
      }
      const ThreadContext store_ctx = context_at(layout.order());
      auto current = [&]() -> ir::Expr {
        if (region == nullptr) return ir::Load(out, out_indices);
        const Placement& p = placements_.at(out.get());
        std::vector<ir::Expr> indices = out_indices;
        if (p.half.defined()) indices.insert(indices.begin(), p.half);
        return ir::Load(p.buffer, indices);
      };
      Stmt init_in_place = wrap(false, single_store(make_store(identity[0]), store_ctx));
      for (auto it = inner_data.rbegin(); it != inner_data.rend(); ++it) {
        init_in_place =
            ir::ForNode::make(it->var(), 0, layout.extent(*it), kind_of(*it), init_in_place);
      }
      Stmt step = wrap(
          false, wrap(true, single_store(make_store(combine({current()}, sources)[0]), store_ctx)));
      Stmt body = ir::MakeSeq(
          {RenewBindings().MutateStmt(init_in_place), nest(reduce_loops, step, data_ctx)});
      return nest(data_loops, body, outer_ctx);
    }
    if (!across.defined()) {
      const ThreadContext store_ctx = context_at(data_loops);
      Stmt reduction = nest(reduce_loops, wrap(true, update), data_ctx);
      Stmt store = single_store(make_store(result(acc0)), store_ctx);
      if (HasBarrier(reduction)) {
        // Stages computed at the reduction's loops synchronise the
        // workgroup: every thread runs the loops, and the data guard holds
        // only the update and the store (as in a cross-thread reduction).
        const ir::Expr data_guard = guard_of(false, false);
        if (data_guard.defined()) {
          reduction =
              nest(reduce_loops, ir::IfNode::make(data_guard, wrap(true, update)), data_ctx);
          store = ir::IfNode::make(data_guard, store);
        }
        Stmt inner = allocate_all(accs, ir::MakeSeq({init, reduction, store}));
        return nest(data_loops, wrap(false, inner, /*guarded=*/false), outer_ctx);
      }
      Stmt inner = allocate_all(accs, ir::MakeSeq({init, reduction, store}));
      return nest(data_loops, wrap(false, inner), outer_ctx);
    }
    // A cross-thread reduction: each thread reduces its share into acc, the
    // partials meet in shared memory, and either a tree combines them,
    // halving the active threads with a barrier between levels, or
    // (subgroup_reduce) subgroup operations do. Barriers are reached by
    // every thread: the data guard holds only the update and the store.
    const int64_t width = *ir::AsConstInt(ir::Simplify(layout.extent(across)));
    std::vector<ir::Expr> slot_prefix;
    std::vector<ir::Expr> red_shape;
    for (const IterVar& a : data_loops) {
      if (ir::IsThreadIdx(layout.loop_kind(a))) {
        slot_prefix.push_back(data_ctx.at(layout.loop_kind(a)));
        red_shape.push_back(layout.extent(a));
      }
    }
    red_shape.push_back(ir::IntConst(ir::kI32, width));
    const std::vector<ir::Buffer> reds = buffers("_red", red_shape, ir::MemoryScope::kShared);
    auto slot = [&](const ir::Expr& t) {
      std::vector<ir::Expr> idx = slot_prefix;
      idx.push_back(t);
      return idx;
    };
    const ir::Expr data_guard = guard_of(false, false);
    auto guarded = [&](const Stmt& s) {
      return data_guard.defined() ? ir::IfNode::make(data_guard, s) : s;
    };
    std::vector<IterVar> serial(reduce_loops.begin(), reduce_loops.end());
    serial.erase(std::find_if(serial.begin(), serial.end(),
                              [&](const IterVar& a) { return a.same_as(across); }));
    ThreadContext across_ctx = data_ctx;
    if (across_ctx.count(ir::LoopKind::kThreadX) == 0) {
      across_ctx[ir::LoopKind::kThreadX] = across.var();
    }
    // ctx_inside for the serial reduction loops: inside `across`.
    for (const IterVar& a : serial) ctx_inside[a.get()] = across_ctx;
    ctx_inside[across.get()] = across_ctx;
    std::vector<Stmt> partial_seq = {init, nest(serial, guarded(wrap(true, update)), across_ctx)};
    std::vector<Stmt> seq;
    ir::Expr total_at_0;  // the reduction, read by the storing thread
    if (stage.subgroup_reduce) {
      // Data loops bound to thread axes of extent 1 hold one reduction per
      // workgroup as much as no such loop does.
      const bool only_reduction =
          std::all_of(red_shape.begin(), red_shape.end() - 1,
                      [](const ir::Expr& e) { return ir::AsConstInt(ir::Simplify(e)) == 1; });
      const bool builtin = op->reducer != ReducerKind::kCustom && op->reducer != ReducerKind::kProd;
      if (Status checked =
              CheckSubgroupReduce(stage, width, only_reduction, types, /*butterfly=*/!builtin);
          !checked.ok()) {
        error_ = checked;
        return ir::MakeSeq({});
      }
      // Each subgroup reduces its threads' partials; lane 0 leaves the
      // result in its thread's slot, the others the identity. After one
      // barrier every subgroup gathers all `width` slots (lane l: l,
      // l + size, ...) and reduces them across its lanes again, so the
      // workgroup's first thread holds the whole reduction.
      const std::string& base = across.name();
      const ir::Expr tx = across_ctx.at(ir::LoopKind::kThreadX);
      ir::Var lane(base + "_lane", ir::kI32), size(base + "_sg_size", ir::kI32);
      // The subgroup's reduction of the values in `bufs`, left in them in
      // every lane: sum, max and min through the subgroup operations; any
      // other reducer by a butterfly of shuffles (lane l combines with lane
      // l ^ offset, offsets halving from the subgroup's size, or the
      // width's where the workgroup is one partial subgroup).
      auto in_subgroup = [&](const std::vector<ir::Buffer>& bufs) -> Stmt {
        if (builtin) {
          return store_all(bufs, at0, {SubgroupCombine(op->reducer, loads(bufs, at0)[0])});
        }
        const ir::Expr lanes = ir::Min(size, ir::IntConst(ir::kI32, width));
        std::vector<Stmt> steps;
        for (int64_t offset = 64; offset >= 1; offset /= 2) {
          if (offset >= width) continue;
          // Every lane shuffles (the calls stay in uniform control flow);
          // where the partner would lie past the subgroup, a lane reads its
          // own values and keeps them.
          const ir::Expr inside = ir::IntConst(ir::kI32, offset) < lanes;
          const ir::Expr partner =
              ir::Cast(ir::kU32, ir::Select(inside,
                                            ir::Call(ir::Intrinsic::kBitwiseXor,
                                                     {lane, ir::IntConst(ir::kI32, offset)}),
                                            lane));
          std::vector<ir::Var> shuffled;
          shuffled.reserve(bufs.size());
          for (const ir::Buffer& buf : bufs) {
            shuffled.emplace_back(buf.name() + "_from" + std::to_string(offset), buf.dtype());
          }
          const Values old = loads(bufs, at0);
          const Values combined = combine(old, Values(shuffled.begin(), shuffled.end()));
          Values kept;
          for (size_t k = 0; k < n; ++k) kept.push_back(ir::Select(inside, combined[k], old[k]));
          Stmt step = store_all(bufs, at0, kept);
          for (size_t k = n; k-- > 0;) {
            step = ir::LetStmtNode::make(
                shuffled[k], ir::Call(ir::Intrinsic::kSubgroupShuffle, {old[k], partner}), step);
          }
          steps.push_back(step);
        }
        return ir::MakeSeq(steps);
      };
      const std::vector<ir::Buffer> gather =
          buffers("_gather", {ir::IntConst(ir::kI32, 1)}, ir::MemoryScope::kLocal);
      ir::Var kk(base + "_g", ir::kI32);
      ir::Var j(base + "_j", ir::kI32);
      const ir::Expr trips = (ir::IntConst(ir::kI32, width) + size - 1) / size;
      Stmt gather_loop = ir::ForNode::make(
          kk, 0, trips, ir::LoopKind::kSerial,
          ir::LetStmtNode::make(
              j, kk * size + lane,
              ir::IfNode::make(
                  j < static_cast<int>(width),
                  store_all(gather, at0, combine(loads(gather, at0), loads(reds, slot(j)))))));
      Values lane0;
      for (size_t k = 0; k < n; ++k) {
        lane0.push_back(ir::Select(lane == 0, ir::Load(accs[k], at0), identity[k]));
      }
      Stmt store = ir::IfNode::make(tx == 0, guarded(make_store(result(loads(gather, at0)))));
      partial_seq.push_back(ir::LetStmtNode::make(
          lane, ir::Call(ir::Intrinsic::kSubgroupInvocationId, {}),
          ir::LetStmtNode::make(
              size, ir::Call(ir::Intrinsic::kSubgroupSize, {}),
              ir::MakeSeq(
                  {in_subgroup(accs), store_all(reds, slot(tx), lane0), ir::BarrierNode::make(),
                   allocate_all(gather, ir::MakeSeq({store_all(gather, at0, identity), gather_loop,
                                                     in_subgroup(gather), store}))}))));
      Stmt partial = allocate_all(accs, ir::MakeSeq(partial_seq));
      partial = EmitAttached(stage, across, across_ctx, partial);
      seq.push_back(MakeLoop(across.var(), width, ir::LoopKind::kThreadX, data_ctx, partial));
    } else {
      partial_seq.push_back(store_all(reds, slot(across.var()), acc0));
      Stmt partial = allocate_all(accs, ir::MakeSeq(partial_seq));
      partial = EmitAttached(stage, across, across_ctx, partial);
      seq = {MakeLoop(across.var(), width, ir::LoopKind::kThreadX, data_ctx, partial),
             ir::BarrierNode::make()};
      int half = 1;
      while (half * 2 < width) half *= 2;
      for (; half >= 1; half /= 2) {
        ir::Var t(across.name() + "_t" + std::to_string(half), ir::kI32);
        Stmt level = ir::IfNode::make(
            t < half && t + half < static_cast<int>(width),
            store_all(reds, slot(t), combine(loads(reds, slot(t)), loads(reds, slot(t + half)))));
        seq.push_back(MakeLoop(t, width, ir::LoopKind::kThreadX, data_ctx, level));
        seq.push_back(ir::BarrierNode::make());
      }
      ir::Var t0(across.name() + "_t0", ir::kI32);
      Stmt store = guarded(make_store(result(loads(reds, slot(ir::IntConst(ir::kI32, 0))))));
      if (data_ctx.count(ir::LoopKind::kThreadX) != 0) {
        store = ir::IfNode::make(ir::Expr(data_ctx.at(ir::LoopKind::kThreadX)) == 0, store);
      } else {
        store = ir::ForNode::make(t0, 0, ir::IntConst(ir::kI32, width), ir::LoopKind::kThreadX,
                                  ir::IfNode::make(t0 == 0, store));
      }
      seq.push_back(store);
    }
    // The last barrier keeps the next use of the slots after this read.
    seq.push_back(ir::BarrierNode::make());
    Stmt body = allocate_all(reds, ir::MakeSeq(seq));
    return nest(data_loops, wrap(false, body, /*guarded=*/false), outer_ctx);
  }

  const ThreadContext store_ctx = context_at(data_loops);
  Stmt inner = single_store(make_store(prepare(op->body)), store_ctx);
  if (!vec.defined()) return nest(data_loops, wrap(false, inner), outer_ctx);

  // The vectorized axis is the innermost data loop (Vectorize checks it and
  // reorder keeps it so).
  KILN_CHECK(data_loops.back().same_as(vec));
  data_loops.pop_back();
  const ir::Expr guard = guard_of(false, true);
  auto lane_loop = [&](ir::LoopKind kind, Stmt body) {
    return ir::ForNode::make(vec.var(), 0, layout.extent(vec), kind, std::move(body));
  };
  if (!guard.defined()) {
    return nest(data_loops, lane_loop(ir::LoopKind::kVectorized, wrap(false, inner)), outer_ctx);
  }
  // Every guard is `index < extent` with the index `base + v` or free of v
  // (lane_form), so it grows with the lane: the last lane in bounds means
  // every lane is. Where some index takes v otherwise, the lanes run as a
  // guarded serial loop.
  // Where no guard depends on v at all, it simply surrounds the vector loop.
  bool monotone = region == nullptr, lane_free = region == nullptr;
  for (const Relation& r : stage.relations) {
    if (r.kind == Relation::Kind::kSplit && !r.parent.is_reduce() &&
        !layout.DividesExactly(r.parent, r.factor)) {
      std::optional<LaneForm> f = lane_form(r.parent);
      monotone &= f.has_value();
      lane_free &= f.has_value() && !f->lane;
    }
  }
  Stmt vector = lane_loop(ir::LoopKind::kVectorized, wrap(false, inner, /*guarded=*/false));
  if (lane_free) return nest(data_loops, ir::IfNode::make(guard, vector), outer_ctx);
  Stmt serial = lane_loop(ir::LoopKind::kSerial, wrap(false, inner));
  if (!monotone) return nest(data_loops, serial, outer_ctx);
  const ir::Expr last_lane =
      ir::Substitute(guard, {{vec.var().get(), ir::IntConst(ir::kI32, lanes - 1)}});
  return nest(data_loops, ir::IfNode::make(last_lane, vector, RenewBindings().MutateStmt(serial)),
              outer_ctx);
}

}  // namespace

namespace {

// The stages reachable from `outputs`: those materialised at the root of a
// kernel (outputs, and with `split` the other stages neither inlined nor
// computed at another), and those computed at a loop, in stage order.
struct Graph {
  std::vector<const StageState*> roots, attached;
};

// The first tensor stage `s` reads, directly or through inlined stages,
// that is not a placeholder; "" where it reads only the kernel's inputs.
std::string ReadOtherThanInputs(const Schedule::Impl& impl, const StageState& s) {
  for (const Tensor& in : s.op->inputs) {
    if (in.op()->is_placeholder) continue;
    const StageState* producer = impl.Find(in.name());
    if (producer == nullptr || !producer->inlined) return in.name();
    if (std::string read = ReadOtherThanInputs(impl, *producer); !read.empty()) return read;
  }
  return "";
}

// The root stage that `s` is computed in, following compute_at.
const StageState* RootOf(const Schedule::Impl& impl, const StageState* s) {
  while (s != nullptr && s->attached()) s = impl.Find(s->attach_stage);
  return s;
}

Status InlinedTooDeep(const std::string& at) {
  return InvalidArgument(at, ": the stages inlined into the kernel nest an expression more than ",
                         ir::kMaxExprDepth,
                         " levels deep, the most kiln compiles; inline fewer (compute some at "
                         "a loop, or as kernels of their own)");
}

// A bound on the depth of each stage's expressions with its inlined
// producers expanded: a read of an inlined stage counts that stage's bound
// plus its deepest index. Reported before anything recursive expands them
// (stages each small enough can nest without limit); the exact depth is
// checked after lowering, so a bound only somewhat above the limit passes
// here.
class InlinedDepth {
 public:
  explicit InlinedDepth(const Schedule::Impl& impl) {
    for (const StageState& s : impl.stages) {
      if (s.inlined) inlined_[s.tensor.buffer().get()] = &s;
    }
  }

  int Of(const StageState& s) {
    if (auto it = stages_.find(&s); it != stages_.end()) return it->second;
    int depth = Depth(s.op->body);
    if (s.op->reduce_source.defined()) depth = std::max(depth, Depth(s.op->reduce_source));
    for (const Expr& e : s.op->reduce_sources) depth = std::max(depth, Depth(e));
    stages_[&s] = depth;
    return depth;
  }

 private:
  // Each body is at most kMaxExprDepth deep (Compute checks), so this
  // recursion is too; producers are measured in stage order, first.
  int Depth(const Expr& e) {
    if (!e.defined()) return 0;
    if (auto it = exprs_.find(e.get()); it != exprs_.end()) return it->second;
    int deepest = 0;
    struct Children : ir::ExprVisitor {
      InlinedDepth* self;
      int* deepest;
      void VisitExpr(const Expr& c) override { *deepest = std::max(*deepest, self->Depth(c)); }
    } children;
    children.self = this;
    children.deepest = &deepest;
    int depth = 0;
    if (const auto* load = e.as<ir::LoadNode>();
        load != nullptr && inlined_.count(load->buffer.get())) {
      for (const Expr& i : load->indices) children.VisitExpr(i);
      depth = Of(*inlined_.at(load->buffer.get())) + deepest;
    } else {
      children.ir::ExprVisitor::VisitExpr(e);  // visits e's operands through VisitExpr
      depth = 1 + deepest;
    }
    exprs_[e.get()] = depth;
    return depth;
  }

  std::unordered_map<const ir::BufferNode*, const StageState*> inlined_;
  std::unordered_map<const StageState*, int> stages_;
  std::unordered_map<const ir::ExprNode*, int> exprs_;
};

StatusOr<Graph> CollectStages(const Schedule::Impl& impl, const std::vector<Tensor>& outputs,
                              const std::vector<Tensor>& inputs, const std::string& at,
                              bool split) {
  if (outputs.empty()) return InvalidArgument(at, ": no outputs");
  for (const Tensor& t : inputs) {
    if (!t.defined() || !t.op()->is_placeholder) {
      return InvalidArgument(at, ": input '", t.defined() ? t.name() : "?",
                             "' is not a placeholder");
    }
  }
  // Inputs and outputs become the kernel's parameters, named by their tensors.
  std::vector<const Tensor*> params;
  for (const auto* list : {&inputs, &outputs}) {
    for (const Tensor& t : *list) {
      if (!t.defined()) return InvalidArgument(at, ": an output is undefined");
      if (t.name().empty()) {
        return InvalidArgument(at,
                               ": a tensor with an empty name; the kernel's parameters take "
                               "their tensors' names");
      }
      for (const Tensor* seen : params) {
        if (seen->same_as(t)) {
          return InvalidArgument(at, ": tensor '", t.name(), "' is listed twice among the ",
                                 list == &inputs ? "inputs" : "outputs and inputs");
        }
        if (seen->name() == t.name()) {
          return InvalidArgument(at, ": two different tensors are named '", t.name(),
                                 "'; the kernel's parameters take their names");
        }
      }
      params.push_back(&t);
    }
  }
  Graph g;
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
    // Before anything recursive looks at it.
    for (const Expr& e : {t.op()->body, t.op()->reduce_source}) {
      if (ir::ExprDepth(e) > ir::kMaxExprDepth) {
        error = InvalidArgument(at, ": stage '", t.name(),
                                "' computes an expression nested more "
                                "than ",
                                ir::kMaxExprDepth, " levels deep, the most kiln compiles");
        return;
      }
    }
    if (stage->attached()) {
      g.attached.push_back(stage);
    } else if (!stage->inlined) {
      bool is_output = false;
      for (const Tensor& o : outputs) is_output |= o.same_as(t);
      if (!is_output && !split) {
        error = InvalidArgument(at, ": stage '", t.name(), "' is read by '",
                                reader ? reader->name() : "?",
                                "' but is neither inlined, computed at another stage nor an "
                                "output (LowerKernels makes it a kernel of its own)");
        return;
      }
      // Memory scopes and padding are of a stage computed at a loop: a
      // stage of its own is a global kernel, where they would be ignored.
      if (stage->scope_set || !stage->alignments.empty()) {
        const bool set_scope =
            std::any_of(impl.primitives.begin(), impl.primitives.end(), [&](const Primitive& p) {
              return p.kind == Primitive::Kind::kSetScope && p.stage == t.name();
            });
        error = InvalidArgument(
            at, ": stage '", t.name(), "' has ",
            stage->scope_set
                ? StrCat(ScopeName(stage->scope), " memory (",
                         set_scope ? "set_scope" : "a cache stage of cache_read or cache_write",
                         ")")
                : std::string("a storage_align"),
            " but is not computed at another stage's loop (compute_at), so it would be a kernel "
            "of its own writing global memory");
        return;
      }
      g.roots.push_back(stage);
    }
    for (const Tensor& in : stage->op->inputs) visit(in, &t);
  };
  for (const Tensor& o : outputs) {
    const StageState* stage = o.op()->is_placeholder ? nullptr : impl.Find(o.op());
    if (stage != nullptr && stage->inlined) {
      return InvalidArgument(at, ": output '", o.name(),
                             "' is inlined (compute_inline) into its readers and has no loops of "
                             "its own; an output cannot be inlined");
    }
  }
  for (const Tensor& o : outputs) visit(o, nullptr);
  KILN_RETURN_IF_ERROR(error);
  InlinedDepth inlined_depth(impl);
  for (const StageState& s : impl.stages) {
    // Every stage in order (producers first, so that nothing recurses
    // through a chain of them); twice the limit is well within what the
    // recursive passes take.
    if (inlined_depth.Of(s) > 2 * ir::kMaxExprDepth) return InlinedTooDeep(at);
  }
  std::sort(g.roots.begin(), g.roots.end());
  std::sort(g.attached.begin(), g.attached.end());
  // A stage computed at another's loop exists only inside that loop's
  // kernel: every stage that reads it (through inlined stages too) must be
  // in the same kernel.
  auto kernel_of = [&](const StageState* s) { return RootOf(impl, s); };
  auto in_graph = [&](const StageState* s) {
    return std::find(g.roots.begin(), g.roots.end(), s) != g.roots.end() ||
           std::find(g.attached.begin(), g.attached.end(), s) != g.attached.end();
  };
  // Each stage of the graph's expressions, inlined stages expanded into
  // them (once: every attached stage's readers are looked up in them).
  std::vector<std::pair<const StageState*, std::vector<Expr>>> expanded;
  for (const StageState& r : impl.stages) {
    if (r.inlined || !in_graph(&r)) continue;
    Inliner inline_all(impl);
    std::vector<Expr> exprs = {inline_all.MutateExpr(r.op->body)};
    if (r.op->has_reduction) {
      for (const Expr& e : r.op->reduce_sources) exprs.push_back(inline_all.MutateExpr(e));
      if (r.op->reduce_source.defined()) {
        exprs.push_back(inline_all.MutateExpr(r.op->reduce_source));
      }
    }
    expanded.emplace_back(&r, std::move(exprs));
  }
  // The stages of the graph whose computation loads `t`.
  auto readers_of = [&](const Tensor& t, std::vector<const StageState*>& readers) {
    for (const auto& [r, exprs] : expanded) {
      LoadFinder loads(t.buffer());
      for (const Expr& e : exprs) loads.VisitExpr(e);
      if (!loads.loads.empty()) readers.push_back(r);
    }
  };
  // The position of `axis` among `stage`'s loops (-1: not one of them).
  auto leaf_position = [](const StageState* stage, const IterVar& axis) {
    for (size_t i = 0; i < stage->leaves.size(); ++i) {
      if (stage->leaves[i].same_as(axis)) return static_cast<int>(i);
    }
    return -1;
  };
  for (const StageState* s : g.attached) {
    std::vector<const StageState*> readers;
    readers_of(s->tensor, readers);
    const StageState* consumer = impl.Find(s->attach_stage);
    for (const StageState* r : readers) {
      if (kernel_of(s) == nullptr || consumer == nullptr) continue;
      if (kernel_of(r) != kernel_of(s)) {
        return InvalidArgument(at, ": stage '", s->name(), "' is computed at stage '",
                               s->attach_stage, "' (in the kernel of '", kernel_of(s)->name(),
                               "'), but stage '", r->name(), "', in the kernel of '",
                               kernel_of(r)->name(),
                               "', reads it too; a stage computed at another's loop exists only "
                               "in that kernel (leave it at the root, or compute it where every "
                               "reader is)");
      }
      if (r == consumer) continue;
      // Another reader must run inside the loop the stage is computed at:
      // computed (through other stages, perhaps) at that loop of the
      // consumer or at one inside it.
      const StageState* inside = r;
      while (inside != nullptr && inside->attached() && inside->attach_stage != consumer->name()) {
        inside = impl.Find(inside->attach_stage);
      }
      // Launch loops are emitted blocks first, then threads, whatever the
      // leaf order: where either loop is one, the verifier decides.
      auto launch = [&](const IterVar& axis) {
        auto kind = consumer->annotations.find(axis.get());
        return kind != consumer->annotations.end() && ir::IsThreadBinding(kind->second);
      };
      if (inside != nullptr && inside->attached() &&
          (launch(inside->attach_axis) || launch(s->attach_axis))) {
        continue;
      }
      const bool seen =
          inside != nullptr && inside->attached() &&
          leaf_position(consumer, inside->attach_axis) >= leaf_position(consumer, s->attach_axis);
      if (!seen) {
        return InvalidArgument(at, ": stage '", s->name(), "' is computed at loop '",
                               s->attach_axis.name(), "' of stage '", s->attach_stage,
                               "', but stage '", r->name(),
                               "' reads it too, outside that loop, where it does not exist "
                               "(compute it where every reader is)");
      }
    }
  }
  for (const StageState* s : g.attached) {
    const StageState* consumer = impl.Find(s->attach_stage);
    // At a reduction loop, the stage exists during the reduction only: the
    // consumer's value after it (its body around the reduction) cannot read
    // it.
    if (consumer != nullptr && s->attach_axis.is_reduce() && consumer->op->has_reduction) {
      LoadFinder after(s->tensor.buffer());
      after.VisitExpr(Inliner(impl).MutateExpr(consumer->op->body));
      if (!after.loads.empty()) {
        return InvalidArgument(at, ": stage '", s->name(), "' is computed at loop '",
                               s->attach_axis.name(), "' of stage '", s->attach_stage,
                               "', a reduction loop, but '", s->attach_stage,
                               "' also reads it after its reduction, where it no longer exists "
                               "(compute it at a data loop of '",
                               s->attach_stage, "')");
      }
    }
    const bool in_graph =
        std::find(g.roots.begin(), g.roots.end(), consumer) != g.roots.end() ||
        std::find(g.attached.begin(), g.attached.end(), consumer) != g.attached.end();
    if (!in_graph) {
      return InvalidArgument(at, ": stage '", s->name(), "' is computed at stage '",
                             s->attach_stage, "', which is not part of this kernel");
    }
    // A pipelined stage (its copy for the next iteration made during this
    // one): shared, at a loop that is not a launch axis.
    auto pipelined = [&](const char* is, const char* primitive) -> Status {
      if (s->scope != ir::MemoryScope::kShared) {
        return InvalidArgument(at, ": stage '", s->name(), "' is ", is, " but not shared");
      }
      auto kind = consumer->annotations.find(s->attach_axis.get());
      if (kind != consumer->annotations.end() && ir::IsThreadBinding(kind->second)) {
        return InvalidArgument(at, ": stage '", s->name(), "' is ", is, " at loop '",
                               s->attach_axis.name(), "', which is a launch axis; ", primitive,
                               " needs a serial loop");
      }
      return Status::Ok();
    };
    if (s->double_buffer) {
      KILN_RETURN_IF_ERROR(pipelined("double-buffered", "double buffering"));
      // The next iteration's copy is staged through registers one store at a
      // time, which a reduction (whose stores read its own accumulator)
      // cannot be.
      if (s->op->has_reduction) {
        return InvalidArgument(at, ": stage '", s->name(),
                               "' is double-buffered but is a reduction: only a copy or an "
                               "elementwise stage is staged through registers for the next "
                               "iteration (copy_ahead computes a reduction whole)");
      }
    }
    if (s->copy_ahead) {
      KILN_RETURN_IF_ERROR(pipelined("copied ahead", "copy_ahead"));
      if (const std::string read = ReadOtherThanInputs(impl, *s); !read.empty()) {
        return InvalidArgument(at, ": stage '", s->name(), "' is copied ahead but reads '", read,
                               "', which is not an input of the kernel: its values for the "
                               "next iteration may not be ready");
      }
    }
  }
  for (const StageState* r : g.roots) {
    if (r->double_buffer) {
      return InvalidArgument(at, ": stage '", r->name(),
                             "' is double-buffered but not computed at a loop");
    }
    if (r->copy_ahead) {
      return InvalidArgument(at, ": stage '", r->name(),
                             "' is copied ahead but not computed at a loop");
    }
  }
  return g;
}

// Every buffer a statement loads.
class LoadedBuffers : public ir::StmtVisitor {
 public:
  void VisitExpr(const ir::Expr& e) override {
    if (const auto* load = e.as<ir::LoadNode>()) seen.insert(load->buffer.get());
    ir::StmtVisitor::VisitExpr(e);
  }
  std::unordered_set<const ir::BufferNode*> seen;
};

// The shared allocations of a statement: their bytes in all, and each one's
// name, type, extents and bytes for a message.
class SharedAllocations : public ir::StmtVisitor {
 public:
  void VisitAllocate(const ir::AllocateNode* op) override {
    const ir::Buffer& b = op->buffer;
    if (b.scope() == ir::MemoryScope::kLocal && oversized_local.empty()) {
      std::optional<int64_t> elements = ir::AllocatedElements(b);
      if (elements && *elements > ir::kMaxLocalElements) {
        oversized_local =
            StrCat("local buffer '", b.name(), "' would hold ", *elements,
                   " elements (its region and its padding); a local buffer holds "
                   "at most ",
                   ir::kMaxLocalElements, " (compute the stage at an inner loop, or pad less)");
      }
    }
    if (b.scope() == ir::MemoryScope::kShared) {
      // A shape that is not constant is the verifier's to report.
      if (std::optional<int64_t> elements = ir::AllocatedElements(b)) {
        const int64_t bytes = *elements * b.dtype().StorageBytes();
        total += WorkgroupVariableBytes(bytes);
        std::string extents;
        for (const ir::Expr& e : b.shape()) {
          extents += StrCat(extents.empty() ? "" : ", ", ir::Print(e));
        }
        std::string strides;
        for (const ir::Expr& e : b.strides()) {
          strides += StrCat(strides.empty() ? " strides [" : ", ", ir::Print(e));
        }
        if (!strides.empty()) strides += "]";
        list += StrCat(list.empty() ? "" : ", ", b.name(), ": ", b.dtype().ToString(), "[", extents,
                       "]", strides, " ", bytes, " bytes");
      }
    }
    ir::StmtVisitor::VisitAllocate(op);
  }
  int64_t total = 0;
  std::string list;
  // The first local buffer over the verifier's limit, described; "" if none.
  std::string oversized_local;
};

// A kernel's name is the function's: an identifier of the IR's text form.
Status CheckKernelName(const std::string& name, const std::string& at) {
  if (ir::IsIdentifier(name)) return Status::Ok();
  return InvalidArgument(at, ": the kernel name '", name,
                         "' is not an identifier ([A-Za-z_][A-Za-z0-9_]*, not a word the IR "
                         "reserves such as fn, let, f32 or exp)");
}

// One kernel: `root` and the stages computed in it. Its buffer parameters
// are `reads` (those it loads, in order), then its output.
StatusOr<ir::Function> LowerKernel(const Schedule::Impl& impl, const StageState& root,
                                   const std::vector<const StageState*>& attached,
                                   const std::vector<ir::Buffer>& readable, const std::string& name,
                                   bool every_input, const TargetLimits& limits) {
  const std::string at = "lowering '" + name + "'";
  std::vector<const StageState*> mine;
  for (const StageState* s : attached) {
    if (RootOf(impl, s) == &root) mine.push_back(s);
  }
  KernelLowering lowering(impl, at);
  KILN_ASSIGN_OR_RETURN(Stmt body, lowering.Run(root, mine));
  KILN_RETURN_IF_ERROR(lowering.CheckWorkgroup(limits));
  LoadedBuffers loads;
  loads.VisitStmt(body);

  std::vector<ir::Param> params;
  std::vector<ir::Buffer> buffers;
  for (const ir::Buffer& b : readable) {
    if (every_input || loads.seen.count(b.get()) != 0) buffers.push_back(b);
  }
  buffers.push_back(root.tensor.buffer());
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
    // Kernels are called with their parameters by name: no two may share one.
    for (const ir::Param& p : params) {
      if (p.name() == v.name()) {
        return InvalidArgument(at, ": size var '", v.name(), "' has the name of ",
                               p.is_buffer() ? "tensor" : "another size var", " '", p.name(),
                               "'; the kernel's parameters take their names, which must differ");
      }
    }
    params.push_back(ir::Param::FromVar(v));
  }
  ir::Function f = ir::Simplify(ir::Function(name, params, body));
  SharedAllocations shared;
  shared.VisitStmt(f.body());
  if (shared.total > limits.max_workgroup_storage_bytes) {
    return InvalidArgument(at, ": the kernel's shared buffers need ", shared.total,
                           " bytes of workgroup storage (", shared.list, "); the target allows ",
                           limits.max_workgroup_storage_bytes,
                           " (compute shared stages at an inner loop, split their axes, or "
                           "pad less)");
  }
  if (!shared.oversized_local.empty()) return InvalidArgument(at, ": ", shared.oversized_local);
  int64_t bound = 0;
  std::string buffer_names;
  for (const ir::Param& p : f.params()) {
    if (!p.is_buffer()) continue;
    ++bound;
    buffer_names += (buffer_names.empty() ? "" : ", ") + p.name();
  }
  if (bound > limits.max_storage_buffers_per_stage) {
    return InvalidArgument(at, ": the kernel binds ", bound, " storage buffers (", buffer_names,
                           "); the target allows ", limits.max_storage_buffers_per_stage,
                           " per shader stage (maxStorageBuffersPerShaderStage)");
  }
  // Stages inlined into one another can nest deeper than any one of them:
  // the user's expression, not a lowering error (and not printed).
  if (ir::DeepestExpression(f) > ir::kMaxExprDepth) return InlinedTooDeep(at);
  ir::VerifyOptions options;
  options.limits = limits;
  Status verified = ir::Verify(f, options);
  if (!verified.ok()) {
    return Status(verified.code(), at + ": the lowered function does not verify: " +
                                       verified.message() + "\n" + ir::Print(f));
  }
  return f;
}

}  // namespace

StatusOr<ir::Function> Lower(const Schedule& schedule, const std::vector<Tensor>& outputs,
                             const std::vector<Tensor>& inputs, const std::string& name,
                             const TargetLimits& limits) {
  const Schedule::Impl& impl = schedule.impl();
  const std::string at = "lowering '" + name + "'";
  KILN_RETURN_IF_ERROR(CheckKernelName(name, at));
  KILN_ASSIGN_OR_RETURN(Graph g, CollectStages(impl, outputs, inputs, at, /*split=*/false));
  if (g.roots.size() != 1) {
    std::string names;
    for (const StageState* s : g.roots) {
      names += (names.empty() ? "'" : ", '") + s->name() + "'";
    }
    return InvalidArgument(at, ": this version lowers one output stage per kernel, not ",
                           g.roots.size(), " (", names, "); LowerKernels makes one kernel each");
  }
  std::vector<ir::Buffer> readable;
  readable.reserve(inputs.size());
  for (const Tensor& t : inputs) readable.push_back(t.buffer());
  return LowerKernel(impl, *g.roots[0], g.attached, readable, name, /*every_input=*/true, limits);
}

StatusOr<Kernels> LowerKernels(const Schedule& schedule, const std::vector<Tensor>& outputs,
                               const std::vector<Tensor>& inputs, const std::string& name,
                               const TargetLimits& limits) {
  const Schedule::Impl& impl = schedule.impl();
  const std::string at = "lowering '" + name + "'";
  KILN_RETURN_IF_ERROR(CheckKernelName(name, at));
  KILN_ASSIGN_OR_RETURN(Graph g, CollectStages(impl, outputs, inputs, at, /*split=*/true));
  Kernels out;
  std::vector<ir::Buffer> readable;
  readable.reserve(inputs.size());
  for (const Tensor& t : inputs) readable.push_back(t.buffer());
  std::unordered_set<std::string> taken;
  for (const StageState* root : g.roots) {
    // The stage's name made an identifier (as parameters' names are), and
    // unique among the kernels ('B-' and 'B_' are kernel_B_ and kernel_B__2).
    std::string kernel = name + "_" + ir::SanitizeName(root->name());
    for (int k = 2; !taken.insert(kernel).second; ++k) {
      kernel = name + "_" + ir::SanitizeName(root->name()) + "_" + std::to_string(k);
    }
    KILN_ASSIGN_OR_RETURN(ir::Function f, LowerKernel(impl, *root, g.attached, readable, kernel,
                                                      /*every_input=*/false, limits));
    out.functions.push_back(std::move(f));
    bool is_output = false;
    for (const Tensor& o : outputs) is_output |= o.same_as(root->tensor);
    if (!is_output) out.intermediates.push_back(root->tensor);
    // Later kernels read this one's result.
    readable.push_back(root->tensor.buffer());
  }
  return out;
}

}  // namespace kiln::te
