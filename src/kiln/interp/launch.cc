#include "kiln/interp/launch.h"

#include <optional>

#include "kiln/ir/printer.h"
#include "kiln/ir/stmt.h"

namespace kiln::interp {
namespace {

// Walks the statements, keeping the lets whose values can be computed from
// the scalar arguments, and evaluates the extent of every thread-bound loop.
class LaunchCollector {
 public:
  explicit LaunchCollector(ScalarBindings bindings) : bindings_(std::move(bindings)) {}

  Status Visit(const ir::Stmt& stmt) {
    if (!stmt.defined()) return Status::Ok();
    switch (stmt.kind()) {
      case ir::StmtKind::kSeq:
        for (const ir::Stmt& s : stmt.as<ir::SeqNode>()->stmts) KILN_RETURN_IF_ERROR(Visit(s));
        return Status::Ok();
      case ir::StmtKind::kLetStmt: {
        const auto* op = stmt.as<ir::LetStmtNode>();
        // A let that reads buffers or loop variables is not needed for the
        // grid: leave it unbound.
        auto value = EvaluateScalar(op->value, bindings_);
        if (value.ok()) bindings_[op->var.get()] = *value;
        Status status = Visit(op->body);
        bindings_.erase(op->var.get());
        return status;
      }
      case ir::StmtKind::kFor: {
        const auto* op = stmt.as<ir::ForNode>();
        if (ir::IsThreadBinding(op->kind)) KILN_RETURN_IF_ERROR(Record(op));
        return Visit(op->body);
      }
      case ir::StmtKind::kAllocate:
        return Visit(stmt.as<ir::AllocateNode>()->body);
      case ir::StmtKind::kWhile:
        return Visit(stmt.as<ir::WhileNode>()->body);
      case ir::StmtKind::kIf: {
        const auto* op = stmt.as<ir::IfNode>();
        KILN_RETURN_IF_ERROR(Visit(op->then_case));
        return Visit(op->else_case);
      }
      default:
        return Status::Ok();
    }
  }

  LaunchDims dims() const { return dims_; }

 private:
  Status Record(const ir::ForNode* op) {
    const std::string_view name = ir::LoopKindName(op->kind);
    auto value = EvaluateScalar(op->extent, bindings_);
    if (!value.ok()) {
      return value.status().WithContext(StrCat("cannot compute the extent `", ir::Print(op->extent),
                                               "` of ", name, " from the scalar arguments"));
    }
    const int64_t extent = value->AsInt();
    const int axis = ir::LaunchAxis(op->kind);
    const bool is_thread = ir::IsThreadIdx(op->kind);
    if (!is_thread && axis > 1) return Unimplemented(name, " is reserved by the kernel ABI");
    if (extent < (is_thread ? 1 : 0)) {
      return InvalidArgument(name, " extent `", ir::Print(op->extent), "` is ", extent);
    }
    std::optional<int64_t>& seen = is_thread ? threads_[axis] : blocks_[axis];
    if (seen.has_value() && *seen != extent) {
      return InvalidArgument(name, " is bound with extents ", *seen, " and ", extent);
    }
    seen = extent;
    (is_thread ? dims_.threads[axis] : dims_.blocks[axis]) = extent;
    return Status::Ok();
  }

  ScalarBindings bindings_;
  LaunchDims dims_;
  std::optional<int64_t> threads_[3];
  std::optional<int64_t> blocks_[2];
};

}  // namespace

StatusOr<ScalarBindings> BindScalarArgs(const ir::Function& function,
                                        std::span<const ArgValue> args) {
  const std::vector<ir::Param>& params = function.params();
  if (args.size() != params.size()) {
    return InvalidArgument("'", function.name(), "' takes ", params.size(), " arguments, got ",
                           args.size());
  }
  ScalarBindings bindings;
  for (size_t p = 0; p < params.size(); ++p) {
    const ir::Param& param = params[p];
    const auto* scalar = std::get_if<Value>(&args[p]);
    if (param.is_buffer() != (scalar == nullptr)) {
      return InvalidArgument("argument ", p, " of '", function.name(), "' (", param.name(),
                             ") must be a ", param.is_buffer() ? "buffer" : "scalar");
    }
    if (scalar == nullptr) continue;
    if (scalar->dtype != param.var().dtype()) {
      return InvalidArgument("argument ", p, " of '", function.name(), "' (", param.name(),
                             ") must be a ", param.var().dtype(), ", got a ", scalar->dtype);
    }
    bindings[param.var().get()] = *scalar;
  }
  return bindings;
}

StatusOr<LaunchDims> LaunchDimsFor(const ir::Function& function, const ScalarBindings& scalars) {
  LaunchCollector collector(scalars);
  KILN_RETURN_IF_ERROR_CTX(collector.Visit(function.body()), "launch grid of '", function.name(),
                           "'");
  return collector.dims();
}

StatusOr<LaunchDims> ComputeLaunchDims(const ir::Function& function,
                                       std::span<const ArgValue> args) {
  KILN_ASSIGN_OR_RETURN(ScalarBindings scalars, BindScalarArgs(function, args));
  return LaunchDimsFor(function, scalars);
}

}  // namespace kiln::interp
