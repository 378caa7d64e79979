// Schedules: stages, the primitives and their records.
#include <algorithm>
#include <charconv>
#include <functional>
#include <iterator>
#include <optional>
#include <sstream>
#include <unordered_set>

#include "kiln/ir/expr_nodes.h"
#include "kiln/ir/mutator.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/simplifier.h"
#include "kiln/ir/structural_equal.h"
#include "kiln/ir/visitor.h"
#include "kiln/te/bounds.h"
#include "kiln/te/schedule_impl.h"
#include "kiln/te/te.h"

namespace kiln::te {
namespace {

using Kind = Primitive::Kind;

std::string_view KindName(Kind kind) {
  switch (kind) {
    case Kind::kSplit:
      return "split";
    case Kind::kFuse:
      return "fuse";
    case Kind::kReorder:
      return "reorder";
    case Kind::kBind:
      return "bind";
    case Kind::kUnroll:
      return "unroll";
    case Kind::kComputeInline:
      return "compute_inline";
    case Kind::kVectorize:
      return "vectorize";
    case Kind::kComputeAt:
      return "compute_at";
    case Kind::kCacheRead:
      return "cache_read";
    case Kind::kCacheWrite:
      return "cache_write";
    case Kind::kSetScope:
      return "set_scope";
    case Kind::kStorageAlign:
      return "storage_align";
    case Kind::kDoubleBuffer:
      return "double_buffer";
    case Kind::kRfactor:
      return "rfactor";
    case Kind::kSubgroupReduce:
      return "subgroup_reduce";
    case Kind::kCopyAhead:
      return "copy_ahead";
    case Kind::kFusedMultiplyAdd:
      return "fused_multiply_add";
  }
  return "?";
}

ir::LoopKind LoopKindOf(ThreadAxis axis) {
  switch (axis) {
    case ThreadAxis::kBlockX:
      return ir::LoopKind::kBlockX;
    case ThreadAxis::kBlockY:
      return ir::LoopKind::kBlockY;
    case ThreadAxis::kThreadX:
      return ir::LoopKind::kThreadX;
    case ThreadAxis::kThreadY:
      return ir::LoopKind::kThreadY;
  }
  return ir::LoopKind::kSerial;
}

std::string Quote(const std::string& s) {
  return "'" + s + "'";
}

int Position(const std::vector<IterVar>& axes, const IterVarNode* node) {
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i].get() == node) return static_cast<int>(i);
  }
  return -1;
}

IterVar NewAxis(StageState& stage, const std::string& name, const Expr& extent, bool is_reduce) {
  auto taken = [&](const std::string& n) {
    return std::any_of(stage.all_axes.begin(), stage.all_axes.end(),
                       [&](const IterVar& a) { return a.name() == n; });
  };
  std::string unique = name;
  for (int k = 1; taken(unique); ++k) unique = name + "_" + std::to_string(k);
  auto node = std::make_shared<IterVarNode>();
  node->var = Var(unique, ir::kI32);
  node->extent = ir::Simplify(extent);
  node->is_reduce = is_reduce;
  node->name = unique;
  IterVar axis(std::move(node));
  stage.all_axes.push_back(axis);
  return axis;
}

std::optional<int64_t> ConstInt(const Expr& e) {
  const Expr simplified = ir::Simplify(e);
  if (const auto* imm = simplified.as<ir::IntImmNode>()) return imm->value;
  return std::nullopt;
}

// Whether `e` is a sum of integer constants and variables times constants
// (after its equal terms are collected): its range over independent ranges
// of its variables is then exact.
bool IsAffine(const Expr& e) {
  if (e.as<ir::IntImmNode>() != nullptr || e.as<ir::VarNode>() != nullptr) return true;
  const auto* b = e.as<ir::BinaryNode>();
  if (b == nullptr) return false;
  if (b->op == ir::BinaryOp::kAdd || b->op == ir::BinaryOp::kSub) {
    return IsAffine(b->a) && IsAffine(b->b);
  }
  if (b->op != ir::BinaryOp::kMul) return false;
  return (b->a.as<ir::IntImmNode>() != nullptr && IsAffine(b->b)) ||
         (b->b.as<ir::IntImmNode>() != nullptr && IsAffine(b->a));
}

// A compute's reads that are out of bounds for every schedule: an index
// that is an affine function of the compute's axes and reaches past its
// tensor's extent (or below 0) for some point of the compute's domain,
// provably (constant extents, or a symbolic bound that differs from the
// extent by a constant). Reads under a select or if_then_else are left
// alone: their guard may keep them in bounds.
class DefinitionBounds : public ir::ExprVisitor {
 public:
  DefinitionBounds(const Tensor& tensor, internal::IntervalMap ranges)
      : tensor_(tensor), ranges_(std::move(ranges)) {}
  Status status() const { return status_; }

  void VisitSelect(const ir::SelectNode* op) override { VisitExpr(op->cond); }
  void VisitCall(const ir::CallNode* op) override {
    if (op->op == ir::Intrinsic::kIfThenElse) {
      VisitExpr(op->args[0]);
      return;
    }
    ir::ExprVisitor::VisitCall(op);
  }
  void VisitLoad(const ir::LoadNode* op) override {
    ir::ExprVisitor::VisitLoad(op);
    if (!status_.ok()) return;
    const ir::Buffer& buffer = op->buffer;
    for (size_t d = 0; d < op->indices.size() && d < buffer.shape().size(); ++d) {
      const Expr index = internal::CancelTerms(op->indices[d]);
      if (!index.dtype().is_scalar() || !IsAffine(index)) continue;
      const std::optional<internal::Interval> range = internal::EvalInterval(index, ranges_);
      if (!range) continue;
      const Expr& extent = buffer.shape()[d];
      const std::optional<int64_t> past = internal::ConstantDifference(range->max, extent);
      const std::optional<int64_t> below = ConstInt(range->min);
      if ((past && *past >= 0) || (below && *below < 0)) {
        status_ = InvalidArgument("compute '", tensor_.name(), "' reads '", buffer.name(),
                                  "' out of bounds: index ", d, " (", ir::Print(op->indices[d]),
                                  ") runs over [", ir::Print(ir::Simplify(range->min)), ", ",
                                  ir::Print(ir::Simplify(range->max)), "], and dimension ", d,
                                  " of '", buffer.name(), "' has extent ", ir::Print(extent));
      }
    }
  }

 private:
  const Tensor& tensor_;
  internal::IntervalMap ranges_;
  Status status_;
};

// The leaf axis `name` of `stage`, or an error saying why not.
StatusOr<IterVar> Leaf(const StageState& stage, const std::string& name, std::string_view what) {
  for (const IterVar& a : stage.leaves) {
    if (a.name() == name) return a;
  }
  for (const IterVar& a : stage.all_axes) {
    if (a.name() == name) {
      return InvalidArgument(what, " of stage ", Quote(stage.name()), ": axis ", Quote(name),
                             " is no longer a loop of the nest (it was split or fused)");
    }
  }
  return InvalidArgument(what, " of stage ", Quote(stage.name()), ": the stage has no axis ",
                         Quote(name));
}

Status ApplyTo(Schedule::Impl& impl, StageState& stage, const Primitive& p) {
  const std::string what = std::string(KindName(p.kind));
  const std::string at = what + " of stage " + Quote(stage.name());
  if (stage.inlined) {
    return InvalidArgument(at, ": the stage is inlined and has no loops of its own");
  }
  auto not_annotated = [&](const IterVar& axis) -> Status {
    auto it = stage.annotations.find(axis.get());
    if (it == stage.annotations.end()) return Status::Ok();
    std::string state = "bound to " + std::string(ir::LoopKindName(it->second));
    if (it->second == ir::LoopKind::kUnrolled) state = "unrolled";
    if (it->second == ir::LoopKind::kVectorized) state = "vectorized";
    return InvalidArgument(at, ": axis ", Quote(axis.name()), " is already ", state);
  };
  switch (p.kind) {
    case Kind::kSplit: {
      if (p.axes.size() != 1) return InvalidArgument(at, ": split takes one axis");
      KILN_ASSIGN_OR_RETURN(IterVar axis, Leaf(stage, p.axes[0], what));
      if (p.factor <= 0) {
        return InvalidArgument(at, ": axis ", Quote(axis.name()), " split by ", p.factor,
                               "; the factor must be positive");
      }
      // Loop extents are i32: ceil(extent / factor) = (extent + factor - 1)
      // / factor must not overflow.
      const std::optional<int64_t> n = ir::AsConstInt(ir::Simplify(axis.extent()));
      if (p.factor > (int64_t{1} << 30) || (n && *n + p.factor - 1 > INT32_MAX)) {
        return InvalidArgument(at, ": axis ", Quote(axis.name()), " split by ", p.factor,
                               "; the factor must be at most 2^30, and the extent plus the "
                               "factor at most 2^31");
      }
      KILN_RETURN_IF_ERROR(not_annotated(axis));
      const int pos = Position(stage.leaves, axis.get());
      const Expr f = Expr(static_cast<int>(p.factor));
      Relation r;
      r.kind = Relation::Kind::kSplit;
      r.parent = axis;
      r.factor = p.factor;
      r.outer =
          NewAxis(stage, axis.name() + "_outer", (axis.extent() + (f - 1)) / f, axis.is_reduce());
      r.inner = NewAxis(stage, axis.name() + "_inner", f, axis.is_reduce());
      stage.leaves[pos] = r.outer;
      stage.leaves.insert(stage.leaves.begin() + pos + 1, r.inner);
      stage.relations.push_back(r);
      break;
    }
    case Kind::kFuse: {
      if (p.axes.size() != 2) return InvalidArgument(at, ": fuse takes two axes");
      KILN_ASSIGN_OR_RETURN(IterVar outer, Leaf(stage, p.axes[0], what));
      KILN_ASSIGN_OR_RETURN(IterVar inner, Leaf(stage, p.axes[1], what));
      const int po = Position(stage.leaves, outer.get());
      const int pi = Position(stage.leaves, inner.get());
      if (pi != po + 1) {
        return InvalidArgument(at, ": axis ", Quote(outer.name()), " must be directly outside ",
                               Quote(inner.name()), " in the nest to fuse them");
      }
      if (outer.is_reduce() != inner.is_reduce()) {
        return InvalidArgument(at, ": axes ", Quote(outer.name()), " and ", Quote(inner.name()),
                               " are not both reduction or both data-parallel axes");
      }
      KILN_RETURN_IF_ERROR(not_annotated(outer));
      KILN_RETURN_IF_ERROR(not_annotated(inner));
      // Loop extents are i32: the fused extent must be one.
      const std::optional<int64_t> no = ir::AsConstInt(ir::Simplify(outer.extent()));
      const std::optional<int64_t> ni = ir::AsConstInt(ir::Simplify(inner.extent()));
      if (no && ni && *no > 0 && *ni > INT32_MAX / *no) {
        return InvalidArgument(at, ": axes ", Quote(outer.name()), " (extent ", *no, ") and ",
                               Quote(inner.name()), " (extent ", *ni,
                               ") fused would have an extent past 2^31 - 1, the largest loop");
      }
      Relation r;
      r.kind = Relation::Kind::kFuse;
      r.outer = outer;
      r.inner = inner;
      r.fused = NewAxis(stage, outer.name() + "_" + inner.name() + "_fused",
                        outer.extent() * inner.extent(), outer.is_reduce());
      stage.leaves[po] = r.fused;
      stage.leaves.erase(stage.leaves.begin() + pi);
      stage.relations.push_back(r);
      break;
    }
    case Kind::kReorder: {
      if (p.axes.empty()) return InvalidArgument(at, ": no axes to reorder");
      std::vector<IterVar> axes;
      std::vector<int> positions;
      for (const std::string& name : p.axes) {
        KILN_ASSIGN_OR_RETURN(IterVar axis, Leaf(stage, name, what));
        const int pos = Position(stage.leaves, axis.get());
        if (std::find(positions.begin(), positions.end(), pos) != positions.end()) {
          return InvalidArgument(at, ": axis ", Quote(name), " is named twice");
        }
        axes.push_back(axis);
        positions.push_back(pos);
      }
      std::vector<IterVar> leaves = stage.leaves;
      std::vector<int> sorted = positions;
      std::sort(sorted.begin(), sorted.end());
      for (size_t k = 0; k < axes.size(); ++k) leaves[sorted[k]] = axes[k];
      // A data axis inside a reduction axis accumulates in place, which
      // needs the stage's value to be its reduction itself.
      const bool custom = stage.op->has_reduction && stage.op->reducer == ReducerKind::kCustom;
      const bool bare =
          stage.op->has_reduction && !custom && stage.op->body.same_as(stage.op->reduce_var);
      for (size_t k = 0; k + 1 < leaves.size() && !bare; ++k) {
        if (!leaves[k].is_reduce()) continue;
        for (size_t m = k + 1; m < leaves.size(); ++m) {
          if (!leaves[m].is_reduce()) {
            return InvalidArgument(at, ": it would put reduction axis ", Quote(leaves[k].name()),
                                   " outside data-parallel axis ", Quote(leaves[m].name()),
                                   custom ? "; a user-defined reducer keeps its reduction axes "
                                            "innermost"
                                          : "; only a stage whose value is its reduction itself "
                                            "accumulates in place (reduction axes stay innermost "
                                            "otherwise)");
          }
        }
      }
      // A vectorized axis stays the innermost data-parallel loop.
      for (size_t k = 0; k < leaves.size(); ++k) {
        auto it = stage.annotations.find(leaves[k].get());
        if (it == stage.annotations.end() || it->second != ir::LoopKind::kVectorized) continue;
        for (size_t m = k + 1; m < leaves.size(); ++m) {
          if (!leaves[m].is_reduce()) {
            return InvalidArgument(at, ": it would put data-parallel axis ",
                                   Quote(leaves[m].name()), " inside vectorized axis ",
                                   Quote(leaves[k].name()),
                                   "; a vectorized axis stays the innermost loop");
          }
        }
      }
      stage.leaves = std::move(leaves);
      break;
    }
    case Kind::kBind: {
      if (p.axes.size() != 1) return InvalidArgument(at, ": bind takes one axis");
      KILN_ASSIGN_OR_RETURN(IterVar axis, Leaf(stage, p.axes[0], what));
      StatusOr<ThreadAxis> parsed = ThreadAxisFromName(p.thread);
      if (!parsed.ok()) return parsed.status().WithContext(at + ", axis " + Quote(axis.name()));
      const ThreadAxis thread = *parsed;
      const ir::LoopKind kind = LoopKindOf(thread);
      const std::string to = " to " + p.thread;
      if (axis.is_reduce() && kind != ir::LoopKind::kThreadX) {
        return InvalidArgument(at, ": reduction axis ", Quote(axis.name()), " cannot be bound", to,
                               "; a reduction axis binds to threadIdx.x only (a cross-thread "
                               "reduction)");
      }
      if (axis.is_reduce()) {
        for (const auto& [node, bound] : stage.annotations) {
          for (const IterVar& a : stage.leaves) {
            if (a.get() == node && a.is_reduce() && ir::IsThreadIdx(bound)) {
              return InvalidArgument(at, ": reduction axis ", Quote(a.name()),
                                     " is already bound to a thread; one reduction axis per "
                                     "stage runs across threads");
            }
          }
        }
      }
      KILN_RETURN_IF_ERROR(not_annotated(axis));
      // A stage computed at another's loop gets its extents from its region:
      // lowering checks those, and that the stages of one kernel bind each
      // launch axis with one extent.
      if (ir::IsThreadIdx(kind) && stage.is_output && !ConstInt(axis.extent()).has_value()) {
        return InvalidArgument(at, ": axis ", Quote(axis.name()), " has extent ",
                               ir::Print(axis.extent()), "; binding it", to,
                               " needs a constant extent (split it first)");
      }
      for (const auto& [node, bound] : stage.annotations) {
        if (bound != kind) continue;
        for (const IterVar& a : stage.all_axes) {
          if (a.get() == node) {
            return InvalidArgument(at, ": ", p.thread, " is already bound to axis ",
                                   Quote(a.name()), "; axis ", Quote(axis.name()),
                                   " cannot be bound to it too");
          }
        }
      }
      stage.annotations[axis.get()] = kind;
      break;
    }
    case Kind::kUnroll: {
      if (p.axes.size() != 1) return InvalidArgument(at, ": unroll takes one axis");
      KILN_ASSIGN_OR_RETURN(IterVar axis, Leaf(stage, p.axes[0], what));
      KILN_RETURN_IF_ERROR(not_annotated(axis));
      // A stage computed at another's loop gets its extents from the region
      // it computes; lowering checks those.
      if (stage.is_output && !ConstInt(axis.extent()).has_value()) {
        return InvalidArgument(at, ": axis ", Quote(axis.name()), " has extent ",
                               ir::Print(axis.extent()),
                               "; only axes of constant extent can be unrolled");
      }
      stage.annotations[axis.get()] = ir::LoopKind::kUnrolled;
      break;
    }
    case Kind::kVectorize: {
      if (p.axes.size() != 1) return InvalidArgument(at, ": vectorize takes one axis");
      KILN_ASSIGN_OR_RETURN(IterVar axis, Leaf(stage, p.axes[0], what));
      if (axis.is_reduce()) {
        return InvalidArgument(at, ": reduction axis ", Quote(axis.name()),
                               " cannot be vectorized; reduction axes stay serial in this "
                               "version");
      }
      // A reduction stage's data axis vectorizes where the result
      // accumulates in place with every reduction loop outside the vector
      // loop; lowering checks the loop order.
      KILN_RETURN_IF_ERROR(not_annotated(axis));
      // A stage computed at another's loop computes a region of its axes,
      // whose extents lowering knows: it checks them there.
      const std::optional<int64_t> extent =
          stage.attached() ? std::optional<int64_t>(2) : ConstInt(axis.extent());
      if (!extent.has_value()) {
        return InvalidArgument(at, ": axis ", Quote(axis.name()), " has extent ",
                               ir::Print(axis.extent()),
                               "; only axes of constant extent 2, 3 or 4 can be vectorized "
                               "(split it first)");
      }
      if (*extent < 2 || *extent > 4) {
        return InvalidArgument(at, ": axis ", Quote(axis.name()), " has extent ", *extent,
                               "; a vectorized axis needs extent 2, 3 or 4 (the WGSL vector "
                               "sizes)");
      }
      const int pos = Position(stage.leaves, axis.get());
      for (size_t m = pos + 1; m < stage.leaves.size(); ++m) {
        if (!stage.leaves[m].is_reduce()) {
          return InvalidArgument(
              at, ": axis ", Quote(axis.name()), " is not the innermost data-parallel loop (axis ",
              Quote(stage.leaves[m].name()), " is inside it); reorder it innermost first");
        }
      }
      for (const StageState& other : impl.stages) {
        if (other.attach_stage == stage.name() && other.attach_axis.same_as(axis)) {
          return InvalidArgument(at, ": stage ", Quote(other.name()), " is computed at loop ",
                                 Quote(axis.name()),
                                 "; a stage cannot be computed inside a vector loop");
        }
      }
      stage.annotations[axis.get()] = ir::LoopKind::kVectorized;
      break;
    }
    case Kind::kComputeInline: {
      if (!p.axes.empty()) return InvalidArgument(at, ": compute_inline takes no axis");
      if (stage.op->has_reduction) {
        return InvalidArgument(at, ": the stage is a reduction; only injective stages inline");
      }
      if (stage.attached()) {
        return InvalidArgument(at, ": the stage is computed at stage ", Quote(stage.attach_stage));
      }
      if (stage.is_output) {
        return InvalidArgument(at, ": the stage is an output of the schedule");
      }
      if (stage.applied > 0) {
        // (Counted: every primitive on the stage, set_scope and storage_align too.)
        return InvalidArgument(at,
                               ": the stage already has primitives applied; an inlined stage has "
                               "no loops, memory or layout of its own");
      }
      for (const StageState& other : impl.stages) {
        if (other.attach_stage == stage.name()) {
          return InvalidArgument(at, ": stage ", Quote(other.name()),
                                 " is computed at one of its loops");
        }
      }
      stage.inlined = true;
      break;
    }
    case Kind::kComputeAt: {
      if (p.axes.size() != 1 || p.target.empty()) {
        return InvalidArgument(at, ": compute_at takes a consumer stage and one of its axes");
      }
      if (stage.is_output) {
        return InvalidArgument(at,
                               ": the stage is an output of the schedule; outputs are "
                               "computed at the root of the kernel");
      }
      if (stage.attached()) {
        return InvalidArgument(at, ": the stage is already computed at stage ",
                               Quote(stage.attach_stage));
      }
      const StageState* consumer = impl.Find(p.target);
      if (consumer == nullptr) {
        return InvalidArgument(at, ": the schedule has no stage named ", Quote(p.target));
      }
      if (consumer == &stage) return InvalidArgument(at, ": a stage cannot be computed at itself");
      if (consumer->inlined) {
        return InvalidArgument(at, ": stage ", Quote(p.target), " is inlined and has no loops");
      }
      const IterVar* axis = nullptr;
      for (const IterVar& a : consumer->leaves) {
        if (a.name() == p.axes[0]) axis = &a;
      }
      if (axis == nullptr) {
        return InvalidArgument(at, ": stage ", Quote(p.target), " has no loop ", Quote(p.axes[0]));
      }
      auto kind = consumer->annotations.find(axis->get());
      if (kind != consumer->annotations.end() && kind->second == ir::LoopKind::kVectorized) {
        return InvalidArgument(at, ": loop ", Quote(p.axes[0]), " of stage ", Quote(p.target),
                               " is vectorized; a stage cannot be computed inside a vector loop");
      }
      if (consumer < &stage) {
        return InvalidArgument(at, ": stage ", Quote(p.target),
                               " does not read this stage (it comes before it)");
      }
      // The consumer reads the stage, itself or through the stages it
      // reads (which may be computed at the same loop).
      std::unordered_set<const OperationNode*> seen;
      std::vector<const OperationNode*> todo = {consumer->tensor.op()};
      bool reads = false;
      while (!todo.empty() && !reads) {
        const OperationNode* t = todo.back();
        todo.pop_back();
        const StageState* of = impl.Find(t);
        for (const Tensor& in : (of != nullptr ? of->op.get() : t)->inputs) {
          reads = reads || in.op() == stage.tensor.op();
          if (seen.insert(in.op()).second) todo.push_back(in.op());
        }
      }
      if (!reads) {
        return InvalidArgument(at, ": stage ", Quote(p.target),
                               " does not read this stage, directly or through other stages");
      }
      stage.attach_stage = p.target;
      stage.attach_axis = *axis;
      if (!stage.scope_set) stage.scope = ir::MemoryScope::kLocal;
      break;
    }
    case Kind::kSetScope: {
      KILN_ASSIGN_OR_RETURN(ir::MemoryScope scope, ScopeFromName(p.scope));
      if (stage.is_output) {
        return InvalidArgument(at, ": the stage is an output of the schedule and stays global");
      }
      if (scope == ir::MemoryScope::kGlobal) {
        return InvalidArgument(at,
                               ": only outputs are global in this version; use shared or "
                               "local");
      }
      if (std::any_of(impl.primitives.begin(), impl.primitives.end(), [&](const Primitive& q) {
            return q.kind == Kind::kSetScope && q.stage == stage.name();
          })) {
        return InvalidArgument(at, ": the stage's scope is already set (to ",
                               ScopeName(stage.scope), "); set_scope applies once per stage");
      }
      stage.scope = scope;
      stage.scope_set = true;
      break;
    }
    case Kind::kStorageAlign: {
      if (p.axes.size() != 1) return InvalidArgument(at, ": storage_align takes one axis");
      int dim = -1;
      for (size_t d = 0; d < stage.op->axis.size(); ++d) {
        if (stage.op->axis[d].name() == p.axes[0]) dim = static_cast<int>(d);
      }
      if (dim < 0) {
        return InvalidArgument(at, ": ", Quote(p.axes[0]),
                               " is not a root data axis (a dimension) of the stage");
      }
      if (p.factor <= 0 || p.factor > (int64_t{1} << 30) || p.offset < 0 || p.offset >= p.factor) {
        return InvalidArgument(at, ": factor ", p.factor, " and offset ", p.offset,
                               "; the factor must be in [1, 2^30] and 0 <= offset < factor");
      }
      if (stage.is_output) {
        return InvalidArgument(at, ": the stage is an output; its layout is the caller's");
      }
      for (const auto& a : stage.alignments) {
        if (a.dim == dim) {
          return InvalidArgument(at, ": dimension ", Quote(p.axes[0]),
                                 " is already aligned (factor ", a.factor, ", offset ", a.offset,
                                 ")");
        }
      }
      stage.alignments.push_back({dim, p.factor, p.offset});
      break;
    }
    case Kind::kDoubleBuffer: {
      if (!p.axes.empty()) return InvalidArgument(at, ": double_buffer takes no axis");
      if (p.factor != 0 && p.factor != 1) {
        return InvalidArgument(at, ": double_buffer's factor is 0 or 1 (branch_free), not ",
                               p.factor);
      }
      if (stage.is_output) {
        return InvalidArgument(at,
                               ": the stage is an output; only shared stages computed at "
                               "a loop double-buffer");
      }
      if (stage.copy_ahead) {
        return InvalidArgument(at,
                               ": the stage is copied ahead; a stage is double-buffered "
                               "or copied ahead, not both");
      }
      if (stage.double_buffer) return InvalidArgument(at, ": the stage is already double-buffered");
      stage.double_buffer = true;
      stage.double_buffer_branch_free = p.factor == 1;
      break;
    }
    case Kind::kCopyAhead: {
      if (!p.axes.empty()) return InvalidArgument(at, ": copy_ahead takes no axis");
      if (!p.scope.empty() && p.scope != "registers") {
        return InvalidArgument(at, ": copy_ahead copies directly or through \"registers\", not ",
                               Quote(p.scope));
      }
      if (p.factor < 0 || p.factor > static_cast<int64_t>(LastCopy::kPeeled)) {
        return InvalidArgument(at, ": copy_ahead's factor is a LastCopy (0 to 3), not ", p.factor);
      }
      if (p.factor != 0 && p.scope.empty()) {
        return InvalidArgument(at, ": copy_ahead is ",
                               LastCopyName(static_cast<LastCopy>(p.factor)),
                               " only through registers");
      }
      if (stage.is_output) {
        return InvalidArgument(at,
                               ": the stage is an output; only shared stages computed at "
                               "a loop are copied ahead");
      }
      if (stage.double_buffer) {
        return InvalidArgument(at,
                               ": the stage is double-buffered, which already copies "
                               "ahead; a stage is double-buffered or copied ahead, not both");
      }
      if (stage.copy_ahead) return InvalidArgument(at, ": the stage is already copied ahead");
      stage.copy_ahead = true;
      stage.copy_ahead_registers = p.scope == "registers";
      stage.copy_ahead_last = static_cast<LastCopy>(p.factor);
      break;
    }
    case Kind::kSubgroupReduce: {
      if (!p.axes.empty()) return InvalidArgument(at, ": subgroup_reduce takes no axis");
      if (!stage.op->has_reduction) {
        return InvalidArgument(at, ": the stage is not a reduction");
      }
      if (stage.subgroup_reduce) {
        return InvalidArgument(at, ": the stage already combines through subgroups");
      }
      stage.subgroup_reduce = true;
      break;
    }
    case Kind::kFusedMultiplyAdd: {
      if (!p.axes.empty()) return InvalidArgument(at, ": fused_multiply_add takes no axis");
      const OperationNode& op = *stage.op;
      if (!op.has_reduction || op.reducer != ReducerKind::kSum) {
        return InvalidArgument(at,
                               ": the stage is not a sum (fused_multiply_add needs a float "
                               "sum of products)");
      }
      const auto* mul = op.reduce_source.as<ir::BinaryNode>();
      if (!op.reduce_source.dtype().is_float() || mul == nullptr || mul->op != ir::BinaryOp::kMul) {
        return InvalidArgument(at, ": the stage sums ",
                               op.reduce_source.dtype().is_float() ? "something other than a "
                                                                     "product"
                                                                   : "integers",
                               " (fused_multiply_add needs a float sum of products)");
      }
      if (stage.fused_multiply_add) {
        return InvalidArgument(at, ": the stage already accumulates with fma");
      }
      stage.fused_multiply_add = true;
      break;
    }
    case Kind::kCacheRead:
    case Kind::kCacheWrite:
    case Kind::kRfactor:
      KILN_CHECK_MSG(false, "handled by Schedule::Apply");
  }
  ++stage.applied;
  impl.primitives.push_back(p);
  return Status::Ok();
}

// Replaces loads of one buffer by loads of another at the same indices.
class ReplaceLoads : public ir::ExprMutator {
 public:
  ReplaceLoads(const ir::Buffer& from, const ir::Buffer& to) : from_(from), to_(to) {}
  ir::Buffer MutateBuffer(const ir::Buffer& buffer) override {
    return buffer.same_as(from_) ? to_ : buffer;
  }
  ir::Expr Apply(const ir::Expr& e) { return e.defined() ? MutateExpr(e) : e; }

 private:
  ir::Buffer from_, to_;
};

// Every tensor of the schedule's graph (stages and the placeholders they
// read) named `name`, or an undefined tensor.
Tensor FindTensor(const Schedule::Impl& impl, const std::string& name) {
  for (const StageState& stage : impl.stages) {
    if (stage.name() == name) return stage.tensor;
    for (const Tensor& in : stage.op->inputs) {
      if (in.name() == name) return in;
    }
  }
  return Tensor();
}

std::string UniqueTensorName(const Schedule::Impl& impl, const std::string& base) {
  std::string name = base;
  for (int k = 1; FindTensor(impl, name).defined(); ++k) name = base + "_" + std::to_string(k);
  return name;
}

StatusOr<ir::MemoryScope> CacheScope(const Primitive& p, const std::string& at) {
  KILN_ASSIGN_OR_RETURN(ir::MemoryScope scope, ScopeFromName(p.scope));
  if (scope == ir::MemoryScope::kGlobal) {
    return InvalidArgument(at, ": a cache is shared or local, not global");
  }
  return scope;
}

// A fresh copy of each axis (new var, same name and extent), and the map
// from the old vars to the new ones.
std::vector<IterVar> CloneAxes(const std::vector<IterVar>& axes, ir::VarMap& map) {
  std::vector<IterVar> out;
  for (const IterVar& a : axes) {
    auto node = std::make_shared<IterVarNode>(*a.get());
    node->var = Var(a.var().name(), a.var().dtype());
    map[a.var().get()] = node->var;
    out.emplace_back(std::move(node));
  }
  return out;
}

// A stage with nothing applied; a cache's has its scope set.
StageState NewStage(const Tensor& tensor, std::optional<ir::MemoryScope> scope = std::nullopt) {
  StageState stage;
  if (scope) {
    stage.scope = *scope;
    stage.scope_set = true;
  }
  stage.tensor = tensor;
  stage.op = tensor.op_ptr();
  stage.all_axes = tensor.op()->axis;
  for (const IterVar& r : tensor.op()->reduce_axis) stage.all_axes.push_back(r);
  stage.leaves = stage.all_axes;
  return stage;
}

int IndexOf(const Schedule::Impl& impl, const std::string& name) {
  for (size_t i = 0; i < impl.stages.size(); ++i) {
    if (impl.stages[i].name() == name) return static_cast<int>(i);
  }
  return -1;
}

Status CacheRead(Schedule::Impl& impl, const Primitive& p) {
  const std::string at = "cache_read of tensor " + Quote(p.stage);
  const Tensor tensor = FindTensor(impl, p.stage);
  if (!tensor.defined()) return InvalidArgument(at, ": the schedule has no such tensor");
  KILN_ASSIGN_OR_RETURN(ir::MemoryScope scope, CacheScope(p, at));
  if (p.axes.empty()) return InvalidArgument(at, ": no reader is named");
  int first = static_cast<int>(impl.stages.size());
  for (const std::string& reader : p.axes) {
    const int index = IndexOf(impl, reader);
    if (index < 0) return InvalidArgument(at, ": the schedule has no stage named ", Quote(reader));
    const StageState& r = impl.stages[index];
    bool reads = false;
    for (const Tensor& in : r.op->inputs) reads |= in.same_as(tensor);
    if (!reads) {
      // Read through a stage inlined into the reader: the cache belongs
      // to that stage's reads, which inlining has already substituted.
      std::vector<const StageState*> through;
      for (const Tensor& in : r.op->inputs) {
        const StageState* s = impl.Find(in.op());
        if (s != nullptr && s->inlined) through.push_back(s);
      }
      for (size_t i = 0; i < through.size(); ++i) {
        for (const Tensor& in : through[i]->op->inputs) {
          if (in.same_as(tensor)) {
            return InvalidArgument(at, ": stage ", Quote(reader),
                                   " reads it only through the inlined stage ",
                                   Quote(through[i]->name()), "; name ", Quote(through[i]->name()),
                                   " as the reader in a cache_read made before its compute_inline");
          }
          const StageState* s = impl.Find(in.op());
          if (s != nullptr && s->inlined &&
              std::find(through.begin(), through.end(), s) == through.end()) {
            through.push_back(s);
          }
        }
      }
      return InvalidArgument(at, ": stage ", Quote(reader), " does not read it");
    }
    // A stage computed at a reader would be left computed where nothing
    // reads it: the reader reads the cache from here on.
    const StageState* source = impl.Find(tensor.op());
    if (source != nullptr && source->attach_stage == reader) {
      return InvalidArgument(at, ": ", Quote(p.stage), " is computed at stage ", Quote(reader),
                             ", which would read the cache instead (cache_read before "
                             "compute_at, and compute ",
                             Quote(p.stage), " at the cache or elsewhere)");
    }
    first = std::min(first, index);
  }
  const Tensor cache = Compute(
      UniqueTensorName(impl, tensor.name() + "_" + std::string(ScopeName(scope))), tensor.shape(),
      [&](const std::vector<Var>& i) { return tensor(std::vector<Expr>(i.begin(), i.end())); });
  KILN_RETURN_IF_ERROR(cache.op()->error);
  for (const std::string& reader : p.axes) {
    StageState& r = impl.stages[IndexOf(impl, reader)];
    auto op = std::make_shared<OperationNode>(*r.op);
    ReplaceLoads replace(tensor.buffer(), cache.buffer());
    op->body = replace.Apply(op->body);
    op->reduce_source = replace.Apply(op->reduce_source);
    for (Tensor& in : op->inputs) {
      if (in.same_as(tensor)) in = cache;
    }
    r.op = std::move(op);
  }
  impl.stages.insert(impl.stages.begin() + first, NewStage(cache, scope));
  return Status::Ok();
}

Status CacheWrite(Schedule::Impl& impl, const Primitive& p) {
  const std::string at = "cache_write of stage " + Quote(p.stage);
  const int index = IndexOf(impl, p.stage);
  if (index < 0) return InvalidArgument(at, ": the schedule has no such stage");
  KILN_ASSIGN_OR_RETURN(ir::MemoryScope scope, CacheScope(p, at));
  StageState& stage = impl.stages[index];
  if (stage.inlined || stage.applied > 0) {
    return InvalidArgument(at, ": cache_write comes before any other primitive on the stage");
  }
  const OperationNode& old = *stage.op;
  auto cache = std::make_shared<OperationNode>(old);
  cache->name = UniqueTensorName(impl, old.name + "_" + std::string(ScopeName(scope)));
  cache->buffer = ir::Buffer(cache->name, old.buffer.dtype(), old.buffer.shape());
  ir::VarMap map;
  cache->axis = CloneAxes(old.axis, map);
  cache->reduce_axis = CloneAxes(old.reduce_axis, map);
  cache->body = ir::Substitute(old.body, map);
  if (old.has_reduction) cache->reduce_source = ir::Substitute(old.reduce_source, map);
  for (Expr& e : cache->reduce_sources) e = ir::Substitute(e, map);
  const Tensor cached(cache);

  auto copy = std::make_shared<OperationNode>(old);
  std::vector<Expr> indices;
  for (const IterVar& a : old.axis) indices.push_back(a.var());
  copy->body = ir::Load(cache->buffer, indices);
  copy->has_reduction = false;
  copy->reducer = ReducerKind::kSum;
  copy->reduce_sources.clear();
  copy->reduce_vars.clear();
  copy->reduce_axis.clear();
  copy->reduce_source = Expr();
  copy->reduce_var = Var();
  copy->inputs = {cached};
  stage.op = std::move(copy);
  stage.all_axes = old.axis;
  stage.leaves = old.axis;

  impl.stages.insert(impl.stages.begin() + index, NewStage(cached, scope));
  return Status::Ok();
}

Status Rfactor(Schedule::Impl& impl, const Primitive& p) {
  const std::string at = "rfactor of stage " + Quote(p.stage);
  const int index = IndexOf(impl, p.stage);
  if (index < 0) return InvalidArgument(at, ": the schedule has no such stage");
  if (p.axes.size() != 1) return InvalidArgument(at, ": rfactor takes one axis");
  StageState& stage = impl.stages[index];
  const OperationNode& old = *stage.op;
  if (!old.has_reduction || stage.inlined) {
    return InvalidArgument(at, ": the stage is not a reduction");
  }
  if (old.reducer == ReducerKind::kCustom) {
    return InvalidArgument(at, ": the stage reduces with user-defined reducer '", old.custom_name,
                           "'; rfactor supports sum, prod, max, min, device_max and device_min");
  }
  if (stage.fused_multiply_add) {
    // Its products would move to the new stage, and it would sum partials.
    return InvalidArgument(at,
                           ": the stage accumulates with fma (fused_multiply_add); rfactor "
                           "first, then fused_multiply_add the new stage");
  }
  KILN_ASSIGN_OR_RETURN(IterVar axis, Leaf(stage, p.axes[0], "rfactor"));
  if (!axis.is_reduce()) {
    return InvalidArgument(at, ": axis ", Quote(axis.name()), " is not a reduction axis");
  }
  const Relation* split = nullptr;
  int reduce_relations = 0;
  for (const Relation& r : stage.relations) {
    const IterVar& first = r.kind == Relation::Kind::kSplit ? r.parent : r.outer;
    if (!first.is_reduce()) continue;
    ++reduce_relations;
    if (r.kind == Relation::Kind::kSplit && (r.inner.same_as(axis) || r.outer.same_as(axis))) {
      split = &r;
    }
  }
  if (split == nullptr || reduce_relations != 1) {
    return InvalidArgument(at, ": axis ", Quote(axis.name()),
                           " must come from the one split of a root reduction axis (split "
                           "k, then rfactor k_inner or k_outer)");
  }
  const bool is_inner = split->inner.same_as(axis);
  const IterVar& other = is_inner ? split->outer : split->inner;
  const Expr k_extent = split->parent.extent();
  const int factor = static_cast<int>(split->factor);

  // <T>_rf[v, i...] = reduce over (other, the other root reduction axes) of
  // the source at k = other * factor + v (or v * factor + other).
  auto rf = std::make_shared<OperationNode>();
  rf->name = UniqueTensorName(impl, old.name + "_rf");
  rf->is_placeholder = false;
  ir::VarMap map;
  std::vector<IterVar> v_axis = CloneAxes({axis}, map);
  auto v_node = std::make_shared<IterVarNode>(*v_axis[0].get());
  v_node->is_reduce = false;
  const IterVar v(v_node);
  rf->axis = {v};
  for (const IterVar& a : CloneAxes(old.axis, map)) rf->axis.push_back(a);
  const IterVar o = CloneAxes({other}, map)[0];
  rf->reduce_axis = {o};
  std::vector<IterVar> other_roots;
  for (const IterVar& r : old.reduce_axis) {
    if (!r.same_as(split->parent)) other_roots.push_back(r);
  }
  for (const IterVar& r : CloneAxes(other_roots, map)) rf->reduce_axis.push_back(r);
  const Expr k = is_inner ? Expr(o.var()) * factor + v.var() : Expr(v.var()) * factor + o.var();
  map[split->parent.var().get()] = k;
  Expr source = ir::Substitute(old.reduce_source, map);
  const std::optional<int64_t> k_const = ConstInt(k_extent);
  if (!k_const || *k_const % factor != 0) {
    source = ir::IfThenElse(k < k_extent, source, ReducerIdentity(old.reducer, source.dtype()));
  }
  rf->has_reduction = true;
  rf->reducer = old.reducer;
  rf->reduce_source = source;
  rf->reduce_var = Var(std::string(ReducerName(old.reducer)), source.dtype());
  rf->body = rf->reduce_var;
  std::vector<Expr> rf_shape = {ir::Simplify(axis.extent())};
  for (const Expr& e : old.buffer.shape()) rf_shape.push_back(e);
  rf->buffer = ir::Buffer(rf->name, source.dtype(), rf_shape);
  rf->inputs = old.inputs;
  const Tensor rf_tensor(rf);

  // T = reduce over <axis>_r of <T>_rf[<axis>_r, i...].
  auto node = std::make_shared<IterVarNode>();
  node->name = axis.name() + "_r";
  node->var = Var(node->name, ir::kI32);
  node->extent = ir::Simplify(axis.extent());
  node->is_reduce = true;
  const IterVar r_axis(node);
  auto rewritten = std::make_shared<OperationNode>(old);
  std::vector<Expr> indices = {r_axis.var()};
  for (const IterVar& a : old.axis) indices.push_back(a.var());
  rewritten->reduce_axis = {r_axis};
  rewritten->reduce_source = ir::Load(rf->buffer, indices);
  rewritten->inputs.insert(rewritten->inputs.begin(), rf_tensor);
  stage.op = std::move(rewritten);
  auto keep = [](const IterVar& a) { return !a.is_reduce(); };
  std::vector<IterVar> all, leaves;
  std::copy_if(stage.all_axes.begin(), stage.all_axes.end(), std::back_inserter(all), keep);
  std::copy_if(stage.leaves.begin(), stage.leaves.end(), std::back_inserter(leaves), keep);
  all.push_back(r_axis);
  leaves.push_back(r_axis);
  for (const IterVar& a : stage.all_axes) {
    if (a.is_reduce()) stage.annotations.erase(a.get());
  }
  std::vector<Relation> relations;
  for (const Relation& r : stage.relations) {
    const IterVar& first = r.kind == Relation::Kind::kSplit ? r.parent : r.outer;
    if (!first.is_reduce()) relations.push_back(r);
  }
  stage.all_axes = std::move(all);
  stage.leaves = std::move(leaves);
  stage.relations = std::move(relations);
  impl.stages.insert(impl.stages.begin() + index, NewStage(rf_tensor));
  return Status::Ok();
}

Status ApplyGraphPrimitive(Schedule::Impl& impl, const Primitive& p) {
  switch (p.kind) {
    case Kind::kCacheRead:
      KILN_RETURN_IF_ERROR(CacheRead(impl, p));
      break;
    case Kind::kCacheWrite:
      KILN_RETURN_IF_ERROR(CacheWrite(impl, p));
      break;
    case Kind::kRfactor:
      KILN_RETURN_IF_ERROR(Rfactor(impl, p));
      break;
    default:
      KILN_CHECK_MSG(false, "not a graph primitive");
  }
  impl.primitives.push_back(p);
  return Status::Ok();
}

// The name of `axis` in stage `stage_name`, or an error naming the stage it
// belongs to instead.
StatusOr<std::string> AxisName(const Schedule::Impl& impl, const std::string& stage_name,
                               const IterVar& axis, std::string_view what) {
  const StageState* found = impl.Find(stage_name);
  if (found == nullptr) {
    return InvalidArgument(what, ": stage '", stage_name, "' is not a stage of this schedule");
  }
  const StageState& stage = *found;
  if (!axis.defined()) {
    return InvalidArgument(what, " of stage '", stage.name(), "': the axis is undefined");
  }
  for (const IterVar& a : stage.all_axes) {
    if (a.var().same_as(axis.var())) return a.name();
  }
  for (const StageState& other : impl.stages) {
    for (const IterVar& a : other.all_axes) {
      if (a.var().same_as(axis.var())) {
        return InvalidArgument(what, " of stage '", stage.name(), "': axis '", a.name(),
                               "' belongs to stage '", other.name(), "'");
      }
    }
  }
  for (const IterVar& a : stage.all_axes) {
    if (a.name() == axis.name()) {
      return InvalidArgument(what, " of stage '", stage.name(), "': axis '", axis.name(),
                             "' is not an axis of this schedule, though the stage has an axis of "
                             "that name: the handle is another schedule's, or from before a "
                             "primitive made the stage's axes anew (rfactor does); take the axis "
                             "from this stage again");
    }
  }
  return InvalidArgument(what, " of stage '", stage.name(), "': axis '", axis.name(),
                         "' is not an axis of this schedule");
}

}  // namespace

std::string_view ThreadAxisName(ThreadAxis axis) {
  return ir::LoopKindName(LoopKindOf(axis));
}

StatusOr<ThreadAxis> ThreadAxisFromName(std::string_view name) {
  for (ThreadAxis a :
       {ThreadAxis::kBlockX, ThreadAxis::kBlockY, ThreadAxis::kThreadX, ThreadAxis::kThreadY}) {
    if (ThreadAxisName(a) == name) return a;
  }
  return InvalidArgument("'", name,
                         "' is not a launch axis (blockIdx.x, blockIdx.y, threadIdx.x, "
                         "threadIdx.y)");
}

std::string_view ScopeName(ir::MemoryScope scope) {
  return ir::MemoryScopeName(scope);
}

StatusOr<ir::MemoryScope> ScopeFromName(std::string_view name) {
  for (ir::MemoryScope s :
       {ir::MemoryScope::kGlobal, ir::MemoryScope::kShared, ir::MemoryScope::kLocal}) {
    if (ScopeName(s) == name) return s;
  }
  return InvalidArgument("'", name, "' is not a memory scope (global, shared, local)");
}

std::string_view LastCopyName(LastCopy last) {
  switch (last) {
    case LastCopy::kSkipped:
      return "";
    case LastCopy::kLoadsAgain:
      return "branch_free";
    case LastCopy::kStoresAgain:
      return "no_branch";
    case LastCopy::kPeeled:
      return "peeled";
  }
  return "?";
}

StatusOr<LastCopy> LastCopyFromName(std::string_view name) {
  for (LastCopy l : {LastCopy::kLoadsAgain, LastCopy::kStoresAgain, LastCopy::kPeeled}) {
    if (name == LastCopyName(l)) return l;
  }
  return InvalidArgument("last is 'branch_free', 'no_branch' or 'peeled', not ",
                         Quote(std::string(name)));
}

std::string_view Primitive::KindName(Kind kind) {
  return te::KindName(kind);
}

std::string Primitive::ToString() const {
  std::ostringstream os;
  os << stage << "." << KindName(kind) << "(";
  std::vector<std::string> args;
  if (kind == Kind::kComputeAt) args.push_back(target);
  if (kind == Kind::kCacheRead || kind == Kind::kCacheWrite || kind == Kind::kSetScope ||
      (kind == Kind::kCopyAhead && !scope.empty())) {
    args.push_back(scope);
  }
  if (kind == Kind::kDoubleBuffer && factor == 1) args.push_back("branch_free");
  if (kind == Kind::kCopyAhead && factor != 0) {
    args.emplace_back(LastCopyName(static_cast<LastCopy>(factor)));
  }
  args.insert(args.end(), axes.begin(), axes.end());
  if (kind == Kind::kSplit || kind == Kind::kStorageAlign) args.push_back(std::to_string(factor));
  if (kind == Kind::kStorageAlign) args.push_back(std::to_string(offset));
  if (kind == Kind::kBind) args.push_back(thread);
  for (size_t i = 0; i < args.size(); ++i) os << (i ? ", " : "") << args[i];
  os << ")";
  return os.str();
}

namespace {

// The decimal integer `text` (an optional '-', digits), or nullopt.
std::optional<int64_t> RecordInteger(std::string_view text) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

StatusOr<Primitive> ParsePrimitive(std::string_view text) {
  const std::string at = StrCat("record `", text, "`");
  // The kind: the first ".<kind>(" of the text.
  std::optional<Kind> kind;
  size_t open = std::string_view::npos, dot = std::string_view::npos;
  for (int k = 0; k <= static_cast<int>(Kind::kFusedMultiplyAdd); ++k) {
    const std::string pattern = StrCat(".", KindName(static_cast<Kind>(k)), "(");
    const size_t found = text.find(pattern);
    if (found != std::string_view::npos && (dot == std::string_view::npos || found < dot)) {
      dot = found;
      open = found + pattern.size() - 1;
      kind = static_cast<Kind>(k);
    }
  }
  if (!kind || dot == 0) {
    return InvalidArgument(at,
                           ": a record is STAGE.PRIMITIVE(ARGUMENTS), as a schedule prints "
                           "them (\"C.split(i, 16)\")");
  }
  if (text.back() != ')') return InvalidArgument(at, ": the record does not end with ')'");
  Primitive p;
  p.kind = *kind;
  p.stage = std::string(text.substr(0, dot));
  std::vector<std::string> args;
  const std::string_view inside = text.substr(open + 1, text.size() - open - 2);
  for (size_t start = 0; !inside.empty();) {
    const size_t comma = inside.find(", ", start);
    args.emplace_back(
        inside.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (args.back().empty()) return InvalidArgument(at, ": an argument is empty");
    if (comma == std::string_view::npos) break;
    start = comma + 2;
  }
  const std::string_view name = KindName(*kind);
  auto count = [&](size_t least, size_t most) -> Status {
    if (args.size() >= least && args.size() <= most) return Status::Ok();
    const std::string wanted = least == most             ? std::to_string(least)
                               : most == args.max_size() ? StrCat("at least ", least)
                                                         : StrCat(least, " to ", most);
    // Why the count may be off: a name holding ", ", or arguments
    // separated by a comma alone.
    const bool bare_comma = std::any_of(args.begin(), args.end(),
                                        [](const std::string& a) { return a.find(',') != a.npos; });
    const char* hint = bare_comma && args.size() < least
                           ? " (arguments are separated by ', ', a comma and a space)"
                       : args.size() > most && most > 0
                           ? " (if a name holds ', ', it reads as two arguments)"
                           : "";
    return InvalidArgument(at, ": ", name, " takes ", wanted, " argument(s), not ", args.size(),
                           hint);
  };
  auto integer = [&](const std::string& arg, const char* what) -> StatusOr<int64_t> {
    std::optional<int64_t> value = RecordInteger(arg);
    if (!value) {
      return InvalidArgument(at, ": ", name, "'s ", what, " is a decimal integer, not '", arg, "'");
    }
    return *value;
  };
  constexpr size_t kAny = std::vector<std::string>().max_size();
  switch (*kind) {
    case Kind::kSplit: {
      KILN_RETURN_IF_ERROR(count(2, 2));
      p.axes = {args[0]};
      KILN_ASSIGN_OR_RETURN(p.factor, integer(args[1], "factor"));
      break;
    }
    case Kind::kFuse:
      KILN_RETURN_IF_ERROR(count(2, 2));
      p.axes = args;
      break;
    case Kind::kReorder:
      KILN_RETURN_IF_ERROR(count(1, kAny));
      p.axes = args;
      break;
    case Kind::kBind:
      KILN_RETURN_IF_ERROR(count(2, 2));
      p.axes = {args[0]};
      p.thread = args[1];
      break;
    case Kind::kUnroll:
    case Kind::kVectorize:
    case Kind::kRfactor:
      KILN_RETURN_IF_ERROR(count(1, 1));
      p.axes = args;
      break;
    case Kind::kComputeInline:
    case Kind::kSubgroupReduce:
    case Kind::kFusedMultiplyAdd:
      KILN_RETURN_IF_ERROR(count(0, 0));
      break;
    case Kind::kComputeAt:
      KILN_RETURN_IF_ERROR(count(2, 2));
      p.target = args[0];
      p.axes = {args[1]};
      break;
    case Kind::kCacheRead:
      KILN_RETURN_IF_ERROR(count(2, kAny));
      p.scope = args[0];
      p.axes.assign(args.begin() + 1, args.end());
      break;
    case Kind::kCacheWrite:
    case Kind::kSetScope:
      KILN_RETURN_IF_ERROR(count(1, 1));
      p.scope = args[0];
      break;
    case Kind::kStorageAlign: {
      KILN_RETURN_IF_ERROR(count(3, 3));
      p.axes = {args[0]};
      KILN_ASSIGN_OR_RETURN(p.factor, integer(args[1], "factor"));
      KILN_ASSIGN_OR_RETURN(p.offset, integer(args[2], "offset"));
      break;
    }
    case Kind::kDoubleBuffer:
      KILN_RETURN_IF_ERROR(count(0, 1));
      if (!args.empty()) {
        if (args[0] != "branch_free") {
          return InvalidArgument(at, ": double_buffer's argument is 'branch_free', not '", args[0],
                                 "'");
        }
        p.factor = 1;
      }
      break;
    case Kind::kCopyAhead: {
      KILN_RETURN_IF_ERROR(count(0, 2));
      size_t next = 0;
      if (next < args.size() && args[next] == "registers") p.scope = args[next++];
      if (next < args.size()) {
        StatusOr<LastCopy> last = LastCopyFromName(args[next++]);
        if (!last.ok()) return InvalidArgument(at, ": copy_ahead's ", last.status().message());
        p.factor = static_cast<int64_t>(*last);
      }
      if (next != args.size()) {
        return InvalidArgument(at, ": copy_ahead takes [registers[, LAST]]; '", args[next],
                               "' is out of place");
      }
      break;
    }
  }
  // A name holding ", " or a parenthesis could be read as another record
  // (`my.fuse(x.split(i, 2)`: a fuse of 'my', or a split of 'my.fuse(x'),
  // and only text the record prints back as is its text (`C.split(i, 04)`
  // is not).
  std::vector<const std::string*> names = {&p.stage, &p.target, &p.thread, &p.scope};
  for (const std::string& a : p.axes) names.push_back(&a);
  for (const std::string* n : names) {
    if (n->find(", ") != std::string::npos || n->find_first_of("()") != std::string::npos) {
      return InvalidArgument(at, ": the record is ambiguous: '", *n,
                             "' holds ', ' or a parenthesis; apply such records as Primitive "
                             "values");
    }
  }
  if (const std::string printed = p.ToString(); printed != text) {
    return InvalidArgument(at, ": the record reads as `", printed, "`, not as itself");
  }
  return p;
}

Status Schedule::ApplyText(std::string_view text) {
  const ScheduleState saved = *impl_;
  int line_number = 0;
  for (size_t start = 0; start <= text.size();) {
    const size_t end = std::min(text.find('\n', start), text.size());
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_number;
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) {
      line.remove_suffix(1);
    }
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    if (line.empty()) continue;
    StatusOr<Primitive> p = ParsePrimitive(line);
    Status applied = p.ok() ? Apply(*p) : p.status();
    if (!applied.ok()) {
      *impl_ = saved;
      return applied.WithContext(StrCat("line ", line_number));
    }
  }
  return Status::Ok();
}

StageState* Schedule::Impl::Find(const std::string& name) {
  for (StageState& s : stages) {
    if (s.name() == name) return &s;
  }
  return nullptr;
}

const StageState* Schedule::Impl::Find(const std::string& name) const {
  for (const StageState& s : stages) {
    if (s.name() == name) return &s;
  }
  return nullptr;
}

const StageState* Schedule::Impl::Find(const OperationNode* op) const {
  for (const StageState& s : stages) {
    if (s.tensor.op() == op) return &s;
  }
  return nullptr;
}

Schedule::Schedule() : impl_(std::make_unique<Impl>()) {}
Schedule::Schedule(const Schedule& o) : impl_(std::make_unique<Impl>(*o.impl_)) {}
// Assignments keep each state where it is, so stages keep theirs: a copy
// overwrites this schedule's state, a move swaps the two states.
Schedule& Schedule::operator=(const Schedule& o) {
  if (!impl_) {
    impl_ = std::make_unique<Impl>(*o.impl_);  // this one was moved from
  } else if (this != &o) {
    *impl_ = *o.impl_;
  }
  return *this;
}
Schedule::Schedule(Schedule&&) noexcept = default;
Schedule& Schedule::operator=(Schedule&& o) noexcept {
  impl_.swap(o.impl_);
  return *this;
}
Schedule::~Schedule() = default;

StatusOr<Schedule> Schedule::Create(const std::vector<Tensor>& outputs) {
  Schedule s;
  s.impl_->outputs = outputs;
  std::unordered_set<const OperationNode*> visited;
  std::unordered_set<std::string> names;
  Status error;
  std::function<void(const Tensor&)> visit = [&](const Tensor& t) {
    if (!visited.insert(t.op()).second || !error.ok()) return;
    for (const Tensor& in : t.op()->inputs) visit(in);
    if (!names.insert(t.name()).second) {
      error = InvalidArgument("two tensors are named '", t.name(),
                              "'; schedules name stages by their tensors");
      return;
    }
    if (!t.op()->error.ok()) {
      error = t.op()->error;
      return;
    }
    if (t.op()->is_placeholder) return;
    internal::IntervalMap ranges;
    for (const auto* axes : {&t.op()->axis, &t.op()->reduce_axis}) {
      for (const IterVar& a : *axes) {
        ranges[a.var().get()] = {ir::IntConst(a.var().dtype(), 0), ir::Simplify(a.extent() - 1)};
      }
    }
    DefinitionBounds bounds(t, std::move(ranges));
    bounds.VisitExpr(t.op()->body);
    bounds.VisitExpr(t.op()->reduce_source);
    for (const Expr& e : t.op()->reduce_sources) bounds.VisitExpr(e);
    if (!bounds.status().ok()) {
      error = bounds.status();
      return;
    }
    s.impl_->stages.push_back(NewStage(t));
  };
  for (const Tensor& t : outputs) {
    if (!t.defined()) return InvalidArgument("an output tensor is undefined");
    if (t.op()->is_placeholder) {
      return InvalidArgument("output '", t.name(), "' is a placeholder, not a compute");
    }
    visit(t);
  }
  KILN_RETURN_IF_ERROR(error);
  for (StageState& stage : s.impl_->stages) {
    for (const Tensor& t : outputs) stage.is_output |= t.same_as(stage.tensor);
  }
  return s;
}

Stage Schedule::operator[](const Tensor& tensor) {
  const StageState* stage = tensor.defined() ? impl_->Find(tensor.op()) : nullptr;
  KILN_CHECK_MSG(stage != nullptr, "tensor '", tensor.defined() ? tensor.name() : "?",
                 "' is not a compute stage of this schedule");
  return Stage(impl_.get(), stage->name());
}

StatusOr<Stage> Schedule::FindStage(const Tensor& tensor) {
  if (!tensor.defined()) return InvalidArgument("the tensor is undefined");
  if (const StageState* stage = impl_->Find(tensor.op())) return Stage(impl_.get(), stage->name());
  if (impl_->Find(tensor.name()) != nullptr) {
    return InvalidArgument("tensor '", tensor.name(),
                           "' is not a stage of this schedule: its stage of that name computes "
                           "another tensor (one of another program)");
  }
  return InvalidArgument("tensor '", tensor.name(), "' is not a compute stage of this schedule");
}

StatusOr<Stage> Schedule::FindStage(const std::string& name) {
  if (impl_->Find(name) == nullptr) {
    return InvalidArgument("the schedule has no stage named '", name, "'");
  }
  return Stage(impl_.get(), name);
}

namespace {

// That `tensor` is one of the schedule's own: a stage's, or a placeholder a
// stage reads (primitives name tensors, so another program's tensor of the
// same name would otherwise stand for this one).
Status CheckOwnTensor(const Schedule::Impl& impl, const Tensor& tensor, std::string_view what) {
  if (impl.Find(tensor.op()) != nullptr) return Status::Ok();
  for (const StageState& s : impl.stages) {
    for (const Tensor& in : s.op->inputs) {
      if (in.op() == tensor.op()) return Status::Ok();
    }
  }
  return InvalidArgument(what, ": tensor '", tensor.name(),
                         "' is not one of this schedule's tensors (a tensor of another program?)");
}

}  // namespace

StatusOr<Tensor> Schedule::CacheRead(const Tensor& tensor, ir::MemoryScope scope,
                                     const std::vector<Tensor>& readers) {
  if (!tensor.defined()) return InvalidArgument("cache_read: the tensor is undefined");
  KILN_RETURN_IF_ERROR(CheckOwnTensor(*impl_, tensor, "cache_read"));
  Primitive p{Kind::kCacheRead, tensor.name()};
  p.scope = std::string(ScopeName(scope));
  for (const Tensor& r : readers) {
    if (!r.defined())
      return InvalidArgument("cache_read of '", tensor.name(), "': a reader is undefined");
    KILN_RETURN_IF_ERROR(CheckOwnTensor(*impl_, r, "cache_read of '" + tensor.name() + "'"));
    p.axes.push_back(r.name());
  }
  const std::string name =
      UniqueTensorName(*impl_, tensor.name() + "_" + std::string(ScopeName(scope)));
  KILN_RETURN_IF_ERROR(Apply(p));
  return impl_->Find(name)->tensor;
}

StatusOr<Tensor> Schedule::CacheWrite(const Tensor& tensor, ir::MemoryScope scope) {
  if (!tensor.defined()) return InvalidArgument("cache_write: the tensor is undefined");
  KILN_RETURN_IF_ERROR(CheckOwnTensor(*impl_, tensor, "cache_write"));
  Primitive p{Kind::kCacheWrite, tensor.name()};
  p.scope = std::string(ScopeName(scope));
  KILN_RETURN_IF_ERROR(Apply(p));
  const StageState* stage = impl_->Find(tensor.op());
  return stage->op->inputs[0];
}

StatusOr<Tensor> Schedule::Rfactor(const Tensor& tensor, const IterVar& axis) {
  if (!tensor.defined() || impl_->Find(tensor.op()) == nullptr) {
    return InvalidArgument("rfactor: tensor ",
                           Quote(tensor.defined() ? tensor.name() : std::string("(undefined)")),
                           " is not a stage of this schedule");
  }
  KILN_ASSIGN_OR_RETURN(std::string name,
                        AxisName(*impl_, impl_->Find(tensor.op())->name(), axis, "rfactor"));
  KILN_RETURN_IF_ERROR(Apply(Primitive{Kind::kRfactor, tensor.name(), {name}}));
  return impl_->Find(tensor.op())->op->inputs[0];
}

// Schedule::Apply, on the state a schedule and its stages share.
static Status ApplyPrimitive(ScheduleState& impl, const Primitive& primitive) {
  if (primitive.kind == Kind::kCacheRead || primitive.kind == Kind::kCacheWrite ||
      primitive.kind == Kind::kRfactor) {
    // These add a stage and rewrite others: all or nothing.
    ScheduleState saved = impl;
    Status status = ApplyGraphPrimitive(impl, primitive);
    if (!status.ok()) impl = std::move(saved);
    return status;
  }
  StageState* stage = impl.Find(primitive.stage);
  if (stage == nullptr) {
    return InvalidArgument(KindName(primitive.kind), ": the schedule has no stage named '",
                           primitive.stage, "'");
  }
  // Primitives either apply completely or not at all.
  StageState saved = *stage;
  Status status = ApplyTo(impl, *stage, primitive);
  if (!status.ok()) *stage = std::move(saved);
  return status;
}

Status Schedule::Apply(const Primitive& primitive) {
  return ApplyPrimitive(*impl_, primitive);
}

Status Schedule::Apply(const std::vector<Primitive>& primitives) {
  for (const Primitive& p : primitives) KILN_RETURN_IF_ERROR(Apply(p));
  return Status::Ok();
}

const std::vector<Primitive>& Schedule::primitives() const {
  return impl_->primitives;
}
const std::vector<Tensor>& Schedule::outputs() const {
  return impl_->outputs;
}

std::string Schedule::ToString() const {
  std::string out;
  for (const Primitive& p : impl_->primitives) out += p.ToString() + "\n";
  return out;
}

// ---------------------------------------------------------------------------
// Stage

StageState& Stage::state() const {
  StageState* stage = schedule_->Find(name_);
  KILN_CHECK_MSG(stage != nullptr, "stage '", name_, "' is not in its schedule");
  return *stage;
}

const std::string& Stage::name() const {
  return name_;
}

IterVar Stage::axis(int i) const {
  const auto& axes = state().op->axis;
  KILN_CHECK(i >= 0 && i < static_cast<int>(axes.size()));
  return axes[i];
}

IterVar Stage::reduce_axis(int i) const {
  const auto& axes = state().op->reduce_axis;
  KILN_CHECK(i >= 0 && i < static_cast<int>(axes.size()));
  return axes[i];
}

std::vector<IterVar> Stage::axes() const {
  return state().op->axis;
}

std::vector<IterVar> Stage::reduce_axes() const {
  return state().op->reduce_axis;
}

std::vector<IterVar> Stage::leaf_axes() const {
  return state().leaves;
}

StatusOr<SplitResult> Stage::Split(const IterVar& axis, int64_t factor) {
  KILN_ASSIGN_OR_RETURN(std::string name, AxisName(*schedule_, name_, axis, "split"));
  KILN_RETURN_IF_ERROR(ApplyPrimitive(*schedule_, Primitive{Kind::kSplit, name_, {name}, factor}));
  const Relation& r = state().relations.back();
  return SplitResult{r.outer, r.inner};
}

StatusOr<SplitResult> Stage::SplitParts(const IterVar& axis, int64_t nparts) {
  KILN_ASSIGN_OR_RETURN(std::string name, AxisName(*schedule_, name_, axis, "split"));
  const std::string at = "split of stage '" + name_ + "'";
  if (nparts <= 0 || nparts > (int64_t{1} << 30)) {
    return InvalidArgument(at, ": axis '", name, "' split into ", nparts,
                           " parts; the number of parts must be in [1, 2^30]");
  }
  const std::optional<int64_t> extent = ir::AsConstInt(ir::Simplify(axis.extent()));
  if (!extent) {
    return InvalidArgument(at, ": axis '", name, "' has the extent ",
                           ir::Print(ir::Simplify(axis.extent())),
                           ", not a constant; split a symbolic extent by a factor");
  }
  return Split(axis, std::max<int64_t>(1, (*extent + nparts - 1) / nparts));
}

StatusOr<IterVar> Stage::Fuse(const IterVar& outer, const IterVar& inner) {
  KILN_ASSIGN_OR_RETURN(std::string a, AxisName(*schedule_, name_, outer, "fuse"));
  KILN_ASSIGN_OR_RETURN(std::string b, AxisName(*schedule_, name_, inner, "fuse"));
  KILN_RETURN_IF_ERROR(ApplyPrimitive(*schedule_, Primitive{Kind::kFuse, name_, {a, b}}));
  return state().relations.back().fused;
}

Status Stage::Reorder(const std::vector<IterVar>& order) {
  Primitive p{Kind::kReorder, name_};
  for (const IterVar& a : order) {
    KILN_ASSIGN_OR_RETURN(std::string name, AxisName(*schedule_, name_, a, "reorder"));
    p.axes.push_back(name);
  }
  return ApplyPrimitive(*schedule_, p);
}

Status Stage::Bind(const IterVar& axis, ThreadAxis thread) {
  KILN_ASSIGN_OR_RETURN(std::string name, AxisName(*schedule_, name_, axis, "bind"));
  return ApplyPrimitive(
      *schedule_, Primitive{Kind::kBind, name_, {name}, 0, std::string(ThreadAxisName(thread))});
}

Status Stage::Unroll(const IterVar& axis) {
  KILN_ASSIGN_OR_RETURN(std::string name, AxisName(*schedule_, name_, axis, "unroll"));
  return ApplyPrimitive(*schedule_, Primitive{Kind::kUnroll, name_, {name}});
}

Status Stage::Vectorize(const IterVar& axis) {
  KILN_ASSIGN_OR_RETURN(std::string name, AxisName(*schedule_, name_, axis, "vectorize"));
  return ApplyPrimitive(*schedule_, Primitive{Kind::kVectorize, name_, {name}});
}

Status Stage::ComputeInline() {
  return ApplyPrimitive(*schedule_, Primitive{Kind::kComputeInline, name_});
}

StatusOr<Stage::TileResult> Stage::Tile(const IterVar& x, const IterVar& y, int64_t x_factor,
                                        int64_t y_factor) {
  const std::vector<IterVar> leaves = state().leaves;
  KILN_ASSIGN_OR_RETURN(std::string xn, AxisName(*schedule_, name_, x, "tile"));
  KILN_ASSIGN_OR_RETURN(std::string yn, AxisName(*schedule_, name_, y, "tile"));
  int px = -1, py = -1;
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (leaves[i].same_as(x)) px = static_cast<int>(i);
    if (leaves[i].same_as(y)) py = static_cast<int>(i);
  }
  // An axis that a split or fuse replaced says so.
  if (px < 0) KILN_RETURN_IF_ERROR(Leaf(state(), xn, "tile").status());
  if (py < 0) KILN_RETURN_IF_ERROR(Leaf(state(), yn, "tile").status());
  if (px < 0 || py != px + 1) {
    return InvalidArgument("tile of stage '", name_, "': axis '", xn,
                           "' must be a loop directly outside loop '", yn, "'");
  }
  // All three records or none.
  ScheduleState saved = *schedule_;
  auto tile = [&]() -> StatusOr<TileResult> {
    KILN_ASSIGN_OR_RETURN(SplitResult sx, Split(x, x_factor));
    KILN_ASSIGN_OR_RETURN(SplitResult sy, Split(y, y_factor));
    KILN_RETURN_IF_ERROR(Reorder({sx.outer, sy.outer, sx.inner, sy.inner}));
    return TileResult{sx.outer, sy.outer, sx.inner, sy.inner};
  };
  StatusOr<TileResult> result = tile();
  if (result.ok()) return result;
  *schedule_ = std::move(saved);
  // The error is tile's, though a split or reorder inside it found it.
  std::string message = result.status().message();
  for (const std::string inner : {"split of stage", "reorder of stage"}) {
    if (message.rfind(inner, 0) == 0) message = "tile of stage" + message.substr(inner.size());
  }
  return Status(result.status().code(), message);
}

Status Stage::ComputeAt(const Stage& consumer, const IterVar& axis) {
  if (consumer.schedule_ != schedule_ || schedule_->Find(consumer.name()) == nullptr) {
    return InvalidArgument("compute_at of stage '", name_, "': stage '", consumer.name(),
                           "' is not a stage of this schedule (a stage of another schedule)");
  }
  StatusOr<std::string> name = AxisName(*schedule_, consumer.name(), axis, "compute_at");
  if (!name.ok()) {
    // The error names the stage being moved as well as the consumer.
    const std::string prefix = "compute_at of stage '" + consumer.name() + "'";
    std::string message = name.status().message();
    if (message.rfind(prefix, 0) == 0) {
      message = "compute_at of stage '" + name_ + "' at stage '" + consumer.name() + "'" +
                message.substr(prefix.size());
    }
    return Status(name.status().code(), message);
  }
  Primitive p{Kind::kComputeAt, name_, {*name}};
  p.target = consumer.name();
  return ApplyPrimitive(*schedule_, p);
}

Status Stage::SetScope(ir::MemoryScope scope) {
  Primitive p{Kind::kSetScope, name_};
  p.scope = std::string(ScopeName(scope));
  return ApplyPrimitive(*schedule_, p);
}

Status Stage::StorageAlign(const IterVar& axis, int64_t factor, int64_t offset) {
  KILN_ASSIGN_OR_RETURN(std::string name, AxisName(*schedule_, name_, axis, "storage_align"));
  Primitive p{Kind::kStorageAlign, name_, {name}, factor};
  p.offset = offset;
  return ApplyPrimitive(*schedule_, p);
}

Status Stage::DoubleBuffer(bool branch_free) {
  return ApplyPrimitive(*schedule_, Primitive{Kind::kDoubleBuffer, name_, {}, branch_free ? 1 : 0});
}

Status Stage::CopyAhead(bool through_registers, bool branch_free) {
  return CopyAhead(through_registers, branch_free ? LastCopy::kLoadsAgain : LastCopy::kSkipped);
}

Status Stage::CopyAhead(bool through_registers, LastCopy last) {
  Primitive p{Kind::kCopyAhead, name_};
  if (through_registers) p.scope = "registers";
  p.factor = static_cast<int64_t>(last);
  return ApplyPrimitive(*schedule_, p);
}

Status Stage::SubgroupReduce() {
  return ApplyPrimitive(*schedule_, Primitive{Kind::kSubgroupReduce, name_});
}

Status Stage::FusedMultiplyAdd() {
  return ApplyPrimitive(*schedule_, Primitive{Kind::kFusedMultiplyAdd, name_});
}

}  // namespace kiln::te
