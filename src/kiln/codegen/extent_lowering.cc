#include "kiln/codegen/extent_lowering.h"

#include "kiln/ir/expr_nodes.h"
#include "kiln/ir/printer.h"

namespace kiln::codegen {
namespace {

class Lowerer {
 public:
  Lowerer(const std::vector<ir::Param>& params, std::string_view what)
      : params_(params), what_(what) {}

  Status Lower(const ir::Expr& e, int depth) {
    if (depth > 30) return Refuse(e, "it is nested too deeply");
    const ir::DataType t = e.dtype();
    if (!t.is_integer() || t.lanes != 1 || (t.bits != 32 && t.bits != 64)) {
      return Refuse(e, StrCat("its type is ", t, ", not a 32- or 64-bit integer"));
    }
    ExtentOp op;
    op.bits = static_cast<uint8_t>(t.bits);
    op.is_signed = t.is_int();
    if (const auto* imm = e.as<ir::IntImmNode>()) {
      op.code = ExtentOp::Code::kConst;
      op.value = imm->value;
      ops_.push_back(op);
      return Status::Ok();
    }
    if (const auto* var = e.as<ir::VarNode>()) {
      for (size_t i = 0; i < params_.size(); ++i) {
        if (params_[i].is_scalar() && params_[i].var().get() == var) {
          op.code = ExtentOp::Code::kParam;
          op.value = static_cast<int64_t>(i);
          ops_.push_back(op);
          return Status::Ok();
        }
      }
      return Refuse(e, StrCat("'", var->name, "' is not a scalar parameter"));
    }
    if (const auto* cast = e.as<ir::CastNode>()) {
      if (!cast->value.dtype().is_integer()) return Refuse(e, "it converts a non-integer");
      KILN_RETURN_IF_ERROR(Lower(cast->value, depth + 1));
      op.code = ExtentOp::Code::kCast;
      ops_.push_back(op);
      return Status::Ok();
    }
    if (const auto* bin = e.as<ir::BinaryNode>()) {
      switch (bin->op) {
        case ir::BinaryOp::kAdd:
          op.code = ExtentOp::Code::kAdd;
          break;
        case ir::BinaryOp::kSub:
          op.code = ExtentOp::Code::kSub;
          break;
        case ir::BinaryOp::kMul:
          op.code = ExtentOp::Code::kMul;
          break;
        case ir::BinaryOp::kDiv:
          op.code = ExtentOp::Code::kDiv;
          break;
        case ir::BinaryOp::kMod:
          op.code = ExtentOp::Code::kMod;
          break;
        case ir::BinaryOp::kFloorDiv:
          op.code = ExtentOp::Code::kFloorDiv;
          break;
        case ir::BinaryOp::kFloorMod:
          op.code = ExtentOp::Code::kFloorMod;
          break;
        case ir::BinaryOp::kMin:
          op.code = ExtentOp::Code::kMin;
          break;
        case ir::BinaryOp::kMax:
          op.code = ExtentOp::Code::kMax;
          break;
        default:
          return Refuse(e, StrCat("it uses '", ir::BinaryOpName(bin->op), "'"));
      }
      KILN_RETURN_IF_ERROR(Lower(bin->a, depth + 1));
      KILN_RETURN_IF_ERROR(Lower(bin->b, depth + 1));
      ops_.push_back(op);
      return Status::Ok();
    }
    return Refuse(e, "the runtime evaluates only integer arithmetic on scalar parameters");
  }

  std::vector<ExtentOp> Take() && { return std::move(ops_); }

 private:
  Status Refuse(const ir::Expr& e, std::string_view why) const {
    return Unimplemented(what_, " `", ir::Print(e), "` cannot be kernel metadata: ", why);
  }

  const std::vector<ir::Param>& params_;
  std::string_view what_;
  std::vector<ExtentOp> ops_;
};

}  // namespace

StatusOr<ExtentExpr> LowerExtent(const ir::Expr& e, const std::vector<ir::Param>& params,
                                 std::string_view what) {
  Lowerer lowerer(params, what);
  KILN_RETURN_IF_ERROR(lowerer.Lower(e, 0));
  ExtentExpr out;
  out.ops = std::move(lowerer).Take();
  out.text = ir::Print(e);
  return out;
}

}  // namespace kiln::codegen
