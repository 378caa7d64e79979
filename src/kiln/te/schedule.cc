// Schedules: stages, the primitives and their records.
#include <algorithm>
#include <functional>
#include <optional>
#include <sstream>
#include <unordered_set>

#include "kiln/ir/expr_nodes.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/simplifier.h"
#include "kiln/ir/structural_equal.h"
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
  if (const auto* imm = ir::Simplify(e).as<ir::IntImmNode>()) return imm->value;
  return std::nullopt;
}

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
      // Reductions accumulate innermost: no data axis inside a reduction axis.
      for (size_t k = 0; k + 1 < leaves.size(); ++k) {
        if (!leaves[k].is_reduce()) continue;
        for (size_t m = k + 1; m < leaves.size(); ++m) {
          if (!leaves[m].is_reduce()) {
            return InvalidArgument(at, ": it would put reduction axis ", Quote(leaves[k].name()),
                                   " outside data-parallel axis ", Quote(leaves[m].name()),
                                   "; reduction axes stay innermost in this version");
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
      KILN_ASSIGN_OR_RETURN(ThreadAxis thread, ThreadAxisFromName(p.thread));
      const ir::LoopKind kind = LoopKindOf(thread);
      const std::string to = " to " + p.thread;
      if (axis.is_reduce()) {
        return InvalidArgument(at, ": reduction axis ", Quote(axis.name()), " cannot be bound", to,
                               "; reduction axes stay serial in this version");
      }
      KILN_RETURN_IF_ERROR(not_annotated(axis));
      if (ir::IsThreadIdx(kind) && !ConstInt(axis.extent()).has_value()) {
        return InvalidArgument(at, ": axis ", Quote(axis.name()), " has extent ",
                               ir::Print(axis.extent()), "; binding it", to,
                               " needs a constant extent (split it first)");
      }
      for (const StageState& other : impl.stages) {
        if (other.inlined) continue;
        for (const auto& [node, bound] : other.annotations) {
          if (bound != kind) continue;
          const IterVar* prev = nullptr;
          for (const IterVar& a : other.all_axes) {
            if (a.get() == node) prev = &a;
          }
          if (&other == &stage) {
            return InvalidArgument(at, ": ", p.thread, " is already bound to axis ",
                                   Quote(prev->name()), "; axis ", Quote(axis.name()),
                                   " cannot be bound to it too");
          }
          if (!ir::StructurallyEqual(ir::Simplify(prev->extent()), ir::Simplify(axis.extent()))) {
            return InvalidArgument(at, ": binding axis ", Quote(axis.name()), " (extent ",
                                   ir::Print(axis.extent()), ")", to, ", which axis ",
                                   Quote(prev->name()), " of stage ", Quote(other.name()),
                                   " binds with extent ", ir::Print(prev->extent()));
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
      if (!ConstInt(axis.extent()).has_value()) {
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
      if (stage.tensor.op()->has_reduction) {
        return InvalidArgument(at, ": axis ", Quote(axis.name()),
                               " cannot be vectorized because the stage is a reduction (its "
                               "accumulator would sit inside the vector loop)");
      }
      KILN_RETURN_IF_ERROR(not_annotated(axis));
      const std::optional<int64_t> extent = ConstInt(axis.extent());
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
      stage.annotations[axis.get()] = ir::LoopKind::kVectorized;
      break;
    }
    case Kind::kComputeInline: {
      if (!p.axes.empty()) return InvalidArgument(at, ": compute_inline takes no axis");
      if (stage.tensor.op()->has_reduction) {
        return InvalidArgument(at, ": the stage is a reduction; only injective stages inline");
      }
      if (stage.is_output) {
        return InvalidArgument(at, ": the stage is an output of the schedule");
      }
      if (stage.applied > 0) {
        return InvalidArgument(at, ": the stage already has loop primitives applied");
      }
      stage.inlined = true;
      break;
    }
  }
  ++stage.applied;
  impl.primitives.push_back(p);
  return Status::Ok();
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

std::string Primitive::ToString() const {
  std::ostringstream os;
  os << stage << "." << KindName(kind) << "(";
  for (size_t i = 0; i < axes.size(); ++i) os << (i ? ", " : "") << axes[i];
  if (kind == Kind::kSplit) os << ", " << factor;
  if (kind == Kind::kBind) os << ", " << thread;
  os << ")";
  return os.str();
}

StageState* Schedule::Impl::Find(const std::string& name) {
  for (StageState& s : stages) {
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
Schedule& Schedule::operator=(const Schedule& o) {
  impl_ = std::make_unique<Impl>(*o.impl_);
  return *this;
}
Schedule::Schedule(Schedule&&) noexcept = default;
Schedule& Schedule::operator=(Schedule&&) noexcept = default;
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
    if (t.op()->is_placeholder) return;
    if (!t.op()->error.ok()) {
      error = t.op()->error;
      return;
    }
    StageState stage;
    stage.tensor = t;
    stage.all_axes = t.op()->axis;
    for (const IterVar& r : t.op()->reduce_axis) stage.all_axes.push_back(r);
    stage.leaves = stage.all_axes;
    s.impl_->stages.push_back(std::move(stage));
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
  for (size_t i = 0; i < impl_->stages.size(); ++i) {
    if (impl_->stages[i].tensor.same_as(tensor)) return Stage(this, static_cast<int>(i));
  }
  KILN_CHECK_MSG(false, "tensor '", tensor.name(), "' is not a compute stage of this schedule");
  return Stage(this, -1);
}

StatusOr<Stage> Schedule::FindStage(const std::string& name) {
  for (size_t i = 0; i < impl_->stages.size(); ++i) {
    if (impl_->stages[i].name() == name) return Stage(this, static_cast<int>(i));
  }
  return InvalidArgument("the schedule has no stage named '", name, "'");
}

Status Schedule::Apply(const Primitive& primitive) {
  StageState* stage = impl_->Find(primitive.stage);
  if (stage == nullptr) {
    return InvalidArgument(KindName(primitive.kind), ": the schedule has no stage named '",
                           primitive.stage, "'");
  }
  // Primitives either apply completely or not at all.
  StageState saved = *stage;
  Status status = ApplyTo(*impl_, *stage, primitive);
  if (!status.ok()) *stage = std::move(saved);
  return status;
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

namespace {

// The name of `axis` in stage `index`, or an error naming the stage it
// belongs to instead.
StatusOr<std::string> AxisName(const Schedule::Impl& impl, int index, const IterVar& axis,
                               std::string_view what) {
  const StageState& stage = impl.stages[index];
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
  return InvalidArgument(what, " of stage '", stage.name(), "': axis '", axis.name(),
                         "' is not an axis of this schedule");
}

}  // namespace

const std::string& Stage::name() const {
  return schedule_->impl_->stages[index_].name();
}

IterVar Stage::axis(int i) const {
  const auto& axes = schedule_->impl_->stages[index_].tensor.op()->axis;
  KILN_CHECK(i >= 0 && i < static_cast<int>(axes.size()));
  return axes[i];
}

IterVar Stage::reduce_axis(int i) const {
  const auto& axes = schedule_->impl_->stages[index_].tensor.op()->reduce_axis;
  KILN_CHECK(i >= 0 && i < static_cast<int>(axes.size()));
  return axes[i];
}

std::vector<IterVar> Stage::leaf_axes() const {
  return schedule_->impl_->stages[index_].leaves;
}

StatusOr<SplitResult> Stage::Split(const IterVar& axis, int64_t factor) {
  KILN_ASSIGN_OR_RETURN(std::string name, AxisName(*schedule_->impl_, index_, axis, "split"));
  Primitive p{Kind::kSplit, this->name(), {name}, factor, ""};
  KILN_RETURN_IF_ERROR(schedule_->Apply(p));
  const Relation& r = schedule_->impl_->stages[index_].relations.back();
  return SplitResult{r.outer, r.inner};
}

StatusOr<IterVar> Stage::Fuse(const IterVar& outer, const IterVar& inner) {
  KILN_ASSIGN_OR_RETURN(std::string a, AxisName(*schedule_->impl_, index_, outer, "fuse"));
  KILN_ASSIGN_OR_RETURN(std::string b, AxisName(*schedule_->impl_, index_, inner, "fuse"));
  Primitive p{Kind::kFuse, this->name(), {a, b}, 0, ""};
  KILN_RETURN_IF_ERROR(schedule_->Apply(p));
  return schedule_->impl_->stages[index_].relations.back().fused;
}

Status Stage::Reorder(const std::vector<IterVar>& order) {
  Primitive p{Kind::kReorder, this->name(), {}, 0, ""};
  for (const IterVar& a : order) {
    KILN_ASSIGN_OR_RETURN(std::string name, AxisName(*schedule_->impl_, index_, a, "reorder"));
    p.axes.push_back(name);
  }
  return schedule_->Apply(p);
}

Status Stage::Bind(const IterVar& axis, ThreadAxis thread) {
  KILN_ASSIGN_OR_RETURN(std::string name, AxisName(*schedule_->impl_, index_, axis, "bind"));
  return schedule_->Apply(
      Primitive{Kind::kBind, this->name(), {name}, 0, std::string(ThreadAxisName(thread))});
}

Status Stage::Unroll(const IterVar& axis) {
  KILN_ASSIGN_OR_RETURN(std::string name, AxisName(*schedule_->impl_, index_, axis, "unroll"));
  return schedule_->Apply(Primitive{Kind::kUnroll, this->name(), {name}, 0, ""});
}

Status Stage::Vectorize(const IterVar& axis) {
  KILN_ASSIGN_OR_RETURN(std::string name, AxisName(*schedule_->impl_, index_, axis, "vectorize"));
  return schedule_->Apply(Primitive{Kind::kVectorize, this->name(), {name}, 0, ""});
}

Status Stage::ComputeInline() {
  return schedule_->Apply(Primitive{Kind::kComputeInline, this->name(), {}, 0, ""});
}

}  // namespace kiln::te
