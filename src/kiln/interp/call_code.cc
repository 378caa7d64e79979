// Intrinsic calls: lane-wise math and bit operations, if_then_else (which
// evaluates only the taken side, per thread) and the subgroup operations
// (which combine values across the threads of a subgroup).
#include <algorithm>
#include <array>

#include "kiln/interp/expr_code.h"
#include "kiln/interp/lane_ops.h"
#include "kiln/ir/expr_nodes.h"
#include "kiln/ir/printer.h"

namespace kiln::interp {
namespace {

class LanewiseCallCode : public ExprCode {
 public:
  LanewiseCallCode(const ir::Expr& expr, int num_threads, ir::Intrinsic op,
                   std::vector<ExprCodePtr> args)
      : ExprCode(expr, num_threads), op_(op), args_(std::move(args)) {}

  Status Eval(ExecState& state, const uint8_t* mask, const Lane** result) override {
    std::array<const Lane*, 3> args = {nullptr, nullptr, nullptr};
    for (size_t a = 0; a < args_.size(); ++a) {
      KILN_RETURN_IF_ERROR(args_[a]->Eval(state, mask, &args[a]));
    }
    const ir::DataType operand = args_[0]->elem();
    const int lanes = this->lanes();
    const size_t arity = args_.size();
    std::array<Lane, 3> lane_args;
    for (int t = 0; t < num_threads_; ++t) {
      if (mask[t] == 0) continue;
      for (int l = t * lanes; l < (t + 1) * lanes; ++l) {
        for (size_t a = 0; a < arity; ++a) lane_args[a] = args[a][l];
        out_[l] = IntrinsicLane(op_, operand, lane_args.data());
      }
    }
    *result = out_.data();
    return Status::Ok();
  }

 private:
  ir::Intrinsic op_;
  std::vector<ExprCodePtr> args_;
};

// if_then_else(c, a, b): a is evaluated only for the threads where c holds,
// b only for the others, so a guarded out-of-bounds load is never performed.
class IfThenElseCode : public ExprCode {
 public:
  IfThenElseCode(const ir::Expr& expr, int num_threads, ExprCodePtr cond, ExprCodePtr t,
                 ExprCodePtr f)
      : ExprCode(expr, num_threads),
        cond_(std::move(cond)),
        t_(std::move(t)),
        f_(std::move(f)),
        then_mask_(num_threads),
        else_mask_(num_threads) {}

  Status Eval(ExecState& state, const uint8_t* mask, const Lane** result) override {
    const Lane* c;
    KILN_RETURN_IF_ERROR(cond_->Eval(state, mask, &c));
    bool any_then = false;
    bool any_else = false;
    for (int t = 0; t < num_threads_; ++t) {
      const bool active = mask[t] != 0;
      then_mask_[t] = active && c[t].i != 0;
      else_mask_[t] = active && c[t].i == 0;
      any_then |= then_mask_[t] != 0;
      any_else |= else_mask_[t] != 0;
    }
    KILN_RETURN_IF_ERROR(EvalSide(state, *t_, then_mask_, any_then));
    KILN_RETURN_IF_ERROR(EvalSide(state, *f_, else_mask_, any_else));
    *result = out_.data();
    return Status::Ok();
  }

 private:
  Status EvalSide(ExecState& state, ExprCode& side, const std::vector<uint8_t>& side_mask,
                  bool any) {
    if (!any) return Status::Ok();
    const Lane* v;
    KILN_RETURN_IF_ERROR(side.Eval(state, side_mask.data(), &v));
    const int lanes = this->lanes();
    for (int t = 0; t < num_threads_; ++t) {
      if (side_mask[t] == 0) continue;
      for (int l = t * lanes; l < (t + 1) * lanes; ++l) out_[l] = v[l];
    }
    return Status::Ok();
  }

  ExprCodePtr cond_;
  ExprCodePtr t_;
  ExprCodePtr f_;
  std::vector<uint8_t> then_mask_;
  std::vector<uint8_t> else_mask_;
};

// Subgroup operations. Subgroup s holds the threads whose linear local index
// is in [s * size, (s + 1) * size); each operation combines the values of the
// subgroup's active threads, in increasing index order, and gives every
// active thread of the subgroup the result (lane by lane for vectors).
class SubgroupCode : public ExprCode {
 public:
  SubgroupCode(const ir::Expr& expr, int num_threads, ir::Intrinsic op,
               std::vector<ExprCodePtr> args)
      : ExprCode(expr, num_threads), op_(op), args_(std::move(args)) {}

  Status Eval(ExecState& state, const uint8_t* mask, const Lane** result) override {
    const Lane* value;
    KILN_RETURN_IF_ERROR(args_[0]->Eval(state, mask, &value));
    const Lane* source_lane = nullptr;
    if (op_ == ir::Intrinsic::kSubgroupShuffle) {
      KILN_RETURN_IF_ERROR(args_[1]->Eval(state, mask, &source_lane));
    }
    const int size = state.subgroup_size;
    const int lanes = this->lanes();
    const ir::DataType t_elem = elem();
    for (int first = 0; first < num_threads_; first += size) {
      const int end = std::min(num_threads_, first + size);
      int first_active = -1;
      for (int t = first; t < end && first_active < 0; ++t) {
        if (mask[t] != 0) first_active = t;
      }
      if (first_active < 0) continue;
      if (op_ == ir::Intrinsic::kSubgroupShuffle) {
        KILN_RETURN_IF_ERROR(Shuffle(state, mask, value, source_lane, first, end));
        continue;
      }
      for (int l = 0; l < lanes; ++l) {
        Lane combined = value[first_active * lanes + l];
        for (int t = first_active + 1; t < end; ++t) {
          if (mask[t] == 0) continue;
          combined = Combine(t_elem, combined, value[t * lanes + l]);
        }
        for (int t = first_active; t < end; ++t) {
          if (mask[t] != 0) out_[t * lanes + l] = combined;
        }
      }
    }
    *result = out_.data();
    return Status::Ok();
  }

 private:
  Lane Combine(ir::DataType t, Lane acc, Lane v) const {
    switch (op_) {
      case ir::Intrinsic::kSubgroupAdd:
        return BinaryLane(ir::BinaryOp::kAdd, t, acc, v);
      case ir::Intrinsic::kSubgroupMin:
        return BinaryLane(ir::BinaryOp::kMin, t, acc, v);
      case ir::Intrinsic::kSubgroupMax:
        return BinaryLane(ir::BinaryOp::kMax, t, acc, v);
      default:
        return acc;  // broadcast_first keeps the first active thread's value
    }
  }

  // Reading from a thread that does not take part (inactive, or past the
  // subgroup) is undefined on the GPU, so the reference refuses it.
  Status Shuffle(const ExecState& state, const uint8_t* mask, const Lane* value,
                 const Lane* source_lane, int first, int end) {
    const int lanes = this->lanes();
    for (int t = first; t < end; ++t) {
      if (mask[t] == 0) continue;
      const int64_t lane = source_lane[t].i;
      const int64_t source = first + lane;
      if (lane < 0 || lane >= state.subgroup_size || source >= end || mask[source] == 0) {
        return InvalidArgument("`", ir::Print(expr_), "` reads subgroup lane ", lane,
                               ", which is not an active thread of the subgroup (", state.Where(t),
                               ")");
      }
      for (int l = 0; l < lanes; ++l) out_[t * lanes + l] = value[source * lanes + l];
    }
    return Status::Ok();
  }

  ir::Intrinsic op_;
  std::vector<ExprCodePtr> args_;
};

// The subgroup builtins of each thread: with subgroups of
// ExecState::subgroup_size threads by linear local index, thread t is lane
// t % size of its subgroup.
class SubgroupBuiltinCode : public ExprCode {
 public:
  SubgroupBuiltinCode(const ir::Expr& expr, int num_threads, ir::Intrinsic op)
      : ExprCode(expr, num_threads), op_(op) {}

  Status Eval(ExecState& state, const uint8_t* mask, const Lane** result) override {
    const int size = state.subgroup_size;
    for (int t = 0; t < num_threads_; ++t) {
      if (mask[t] == 0) continue;
      out_[t].i = op_ == ir::Intrinsic::kSubgroupSize ? size : t % size;
    }
    *result = out_.data();
    return Status::Ok();
  }

 private:
  ir::Intrinsic op_;
};

// Whether the interpreter computes `op` lane by lane (operand types are the
// intrinsic table's, checked by the caller). An intrinsic added to the IR but
// not to the interpreter is refused here rather than computed wrong.
Status CheckLanewiseSupported(const ir::Expr& expr, ir::Intrinsic op) {
  switch (op) {
    case ir::Intrinsic::kExp:
    case ir::Intrinsic::kExp2:
    case ir::Intrinsic::kLog:
    case ir::Intrinsic::kLog2:
    case ir::Intrinsic::kSqrt:
    case ir::Intrinsic::kRsqrt:
    case ir::Intrinsic::kSin:
    case ir::Intrinsic::kCos:
    case ir::Intrinsic::kTanh:
    case ir::Intrinsic::kSigmoid:
    case ir::Intrinsic::kErf:
    case ir::Intrinsic::kPow:
    case ir::Intrinsic::kFloor:
    case ir::Intrinsic::kCeil:
    case ir::Intrinsic::kRound:
    case ir::Intrinsic::kTrunc:
    case ir::Intrinsic::kFma:
    case ir::Intrinsic::kAbs:
    case ir::Intrinsic::kBitwiseAnd:
    case ir::Intrinsic::kBitwiseOr:
    case ir::Intrinsic::kBitwiseXor:
    case ir::Intrinsic::kBitwiseNot:
    case ir::Intrinsic::kShiftLeft:
    case ir::Intrinsic::kShiftRight:
    case ir::Intrinsic::kPopcount:
    case ir::Intrinsic::kDot4I8:
      return Status::Ok();
    default:
      return Unimplemented("the interpreter does not support `", ir::Print(expr), "`");
  }
}

}  // namespace

StatusOr<ExprCodePtr> CompileCall(const ir::Expr& expr, CompileContext& context) {
  const auto* call = expr.as<ir::CallNode>();
  const int num_threads = context.num_threads();
  if (static_cast<int>(call->args.size()) != ir::IntrinsicArity(call->op)) {
    return IllTyped(expr, StrCat(ir::IntrinsicName(call->op), " takes ",
                                 ir::IntrinsicArity(call->op), " operands"));
  }
  std::vector<ExprCodePtr> args;
  for (const ir::Expr& arg : call->args) {
    KILN_ASSIGN_OR_RETURN(ExprCodePtr code, CompileExpr(arg, context));
    args.push_back(std::move(code));
  }
  const int lanes = expr.dtype().lanes;
  if (call->op == ir::Intrinsic::kIfThenElse) {
    if (args[0]->dtype() != ir::kBool || args[1]->lanes() != lanes || args[2]->lanes() != lanes) {
      return IllTyped(expr, "if_then_else takes a scalar bool and two values of its type");
    }
    return ExprCodePtr(new IfThenElseCode(expr, num_threads, std::move(args[0]), std::move(args[1]),
                                          std::move(args[2])));
  }
  // Operand types by the intrinsic table (the verifier's rules too).
  const ir::IntrinsicInfo& info = ir::GetIntrinsicInfo(call->op);
  std::vector<ir::DataType> types;
  for (const ir::Expr& arg : call->args) types.push_back(arg.dtype());
  for (size_t i = 0; i < types.size(); ++i) {
    if (!ir::OperandFits(info.operands[i], types[i], types)) {
      return IllTyped(expr, StrCat(ir::IntrinsicName(call->op), " takes ",
                                   ir::OperandRuleText(info.operands[i]), " as operand ", i,
                                   ", not ", types[i]));
    }
  }
  if (ir::IsSubgroupBuiltin(call->op)) {
    return ExprCodePtr(new SubgroupBuiltinCode(expr, num_threads, call->op));
  }
  if (ir::IsSubgroupIntrinsic(call->op)) {
    if (args[0]->lanes() != lanes ||
        (call->op == ir::Intrinsic::kSubgroupShuffle && args[1]->lanes() != 1)) {
      return IllTyped(expr, "operand lanes do not match the result");
    }
    return ExprCodePtr(new SubgroupCode(expr, num_threads, call->op, std::move(args)));
  }
  for (const ExprCodePtr& arg : args) {
    if (arg->lanes() != lanes) return IllTyped(expr, "operand lanes do not match the result");
  }
  KILN_RETURN_IF_ERROR(CheckLanewiseSupported(expr, call->op));
  return ExprCodePtr(new LanewiseCallCode(expr, num_threads, call->op, std::move(args)));
}

}  // namespace kiln::interp
