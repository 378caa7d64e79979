#include "kiln/transform/unroll.h"

#include "kiln/ir/expr_ops.h"
#include "kiln/ir/mutator.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/simplifier.h"

namespace kiln::transform {
namespace {

using ir::Expr;
using ir::Stmt;

class Unroller : public ir::StmtMutator {
 public:
  explicit Unroller(const UnrollOptions& options) : options_(options) {}

  const Status& status() const { return status_; }

  Stmt MutateFor(const ir::ForNode* op, const Stmt& s) override {
    if (op->kind != ir::LoopKind::kUnrolled) return ir::StmtMutator::MutateFor(op, s);
    Stmt body = MutateStmt(op->body);
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
    // The loop runs while v < min + extent, stepping by step.
    for (int64_t v = *min; v < *min + *extent; v += *step) {
      ir::VarMap map{{op->loop_var.get(), ir::IntConst(op->loop_var.dtype(), v)}};
      copies.push_back(ir::Substitute(body, map));
    }
    return ir::MakeSeq(std::move(copies));
  }

 private:
  template <typename... Args>
  void Fail(const Args&... args) {
    if (status_.ok()) status_ = InvalidArgument(args...);
  }

  UnrollOptions options_;
  Status status_;
};

}  // namespace

StatusOr<ir::Function> Unroll(const ir::Function& function, const UnrollOptions& options) {
  Unroller unroller(options);
  Stmt body = unroller.MutateStmt(function.body());
  KILN_RETURN_IF_ERROR_CTX(unroller.status(), "Unroll of '", function.name(), "'");
  return function.WithBody(std::move(body));
}

}  // namespace kiln::transform
