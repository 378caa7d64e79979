#include "kiln/transform/lower_thread_bindings.h"

#include <string>
#include <unordered_set>

#include "kiln/ir/printer.h"
#include "kiln/ir/simplifier.h"
#include "kiln/ir/structural_equal.h"
#include "kiln/ir/visitor.h"

namespace kiln::transform {
namespace {

using ir::Expr;
using ir::LoopKind;

// The vars an expression uses.
class VarUses : public ir::ExprVisitor {
 public:
  void VisitVar(const ir::VarNode* op) override { uses.insert(op); }
  std::unordered_set<const ir::VarNode*> uses;
};

class LaunchCollector : public ir::StmtVisitor {
 public:
  explicit LaunchCollector(const ir::Function& function) {
    for (const ir::Param& param : function.params()) {
      if (param.is_scalar()) scalar_params_.insert(param.var().get());
    }
  }

  void VisitFor(const ir::ForNode* op) override {
    if (ir::IsThreadBinding(op->kind) && status_.ok()) Check(op);
    ir::StmtVisitor::VisitFor(op);
  }

  StatusOr<LaunchInfo> Result() const {
    if (!status_.ok()) return status_;
    return info_;
  }

 private:
  template <typename... Args>
  void Fail(const ir::ForNode* op, const Args&... args) {
    if (status_.ok()) {
      status_ = InvalidArgument("loop `", op->loop_var.name(), "` bound to ",
                                ir::LoopKindName(op->kind), ": ", args...);
    }
  }

  void Check(const ir::ForNode* op) {
    if (op->kind == LoopKind::kBlockZ) {
      return Fail(op,
                  "blockIdx.z is reserved by the kernel ABI (it carries the overflow of "
                  "large blockIdx.x grids); use blockIdx.x or blockIdx.y");
    }
    if (!ir::IsConstInt(ir::Simplify(op->min), 0) || !ir::IsConstInt(ir::Simplify(op->step), 1)) {
      return Fail(op, "a launch axis needs min 0 and step 1, got min ", ir::Print(op->min),
                  " and step ", ir::Print(op->step));
    }
    const Expr& extent = op->extent;
    int axis = ir::LaunchAxis(op->kind);
    if (ir::IsThreadIdx(op->kind)) {
      auto value = ir::AsConstInt(ir::Simplify(extent));
      if (!value || *value <= 0) {
        return Fail(op, "the workgroup size must be a positive constant, got ",
                    ir::Print(op->extent));
      }
      if (thread_seen_[axis] && info_.workgroup_size[axis] != *value) {
        return Fail(op, "extent ", *value, " differs from extent ", info_.workgroup_size[axis],
                    " bound to the same axis elsewhere");
      }
      thread_seen_[axis] = true;
      info_.workgroup_size[axis] = *value;
      return;
    }
    VarUses uses;
    uses.VisitExpr(extent);
    for (const ir::VarNode* var : uses.uses) {
      if (!scalar_params_.count(var)) {
        return Fail(op, "the grid extent ", ir::Print(op->extent), " uses `", var->name,
                    "`, which is not a scalar parameter");
      }
    }
    Expr& seen = info_.num_blocks[axis];
    if (seen.defined() && !ir::StructurallyEqual(seen, extent)) {
      return Fail(op, "extent ", ir::Print(extent), " differs from extent ", ir::Print(seen),
                  " bound to the same axis elsewhere");
    }
    seen = extent;
  }

  std::unordered_set<const ir::VarNode*> scalar_params_;
  std::array<bool, 3> thread_seen_ = {false, false, false};
  LaunchInfo info_;
  Status status_;
};

}  // namespace

StatusOr<LaunchInfo> CollectLaunchInfo(const ir::Function& function) {
  LaunchCollector collector(function);
  collector.VisitStmt(function.body());
  StatusOr<LaunchInfo> info = collector.Result();
  if (!info.ok()) return info.status().WithContext(StrCat("function '", function.name(), "'"));
  return info;
}

StatusOr<ir::Function> LowerThreadBindings(const ir::Function& function,
                                           const LowerThreadBindingsOptions& options) {
  KILN_ASSIGN_OR_RETURN(LaunchInfo info, CollectLaunchInfo(function));
  auto text = [](const Expr& e) { return e.defined() ? ir::Print(e) : std::string("1"); };
  return function.WithAttr(kAttrNumBlocksX, text(info.num_blocks[0]))
      .WithAttr(kAttrNumBlocksY, text(info.num_blocks[1]))
      .WithAttr(kAttrWorkgroupSizeX, info.workgroup_size[0])
      .WithAttr(kAttrWorkgroupSizeY, info.workgroup_size[1])
      .WithAttr(kAttrWorkgroupSizeZ, info.workgroup_size[2]);
}

}  // namespace kiln::transform
