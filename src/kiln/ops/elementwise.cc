// Elementwise operators and fused elementwise chains.
#include <cmath>
#include <string>
#include <vector>

#include "kiln/ir/expr_ops.h"
#include "kiln/ops/internal.h"
#include "kiln/ops/ops.h"
#include "kiln/te/te.h"

namespace kiln::ops {
namespace {

using internal::BroadcastIndex;
using internal::Extents;

Status CheckSameDtype(const TensorType& first, std::string_view first_name, const TensorType& other,
                      std::string_view other_name, std::string_view where) {
  if (first.dtype != other.dtype) {
    return InvalidArgument(where, ": dtype mismatch: ", first_name, " is ", first.dtype.ToString(),
                           " but ", other_name, " is ", other.dtype.ToString());
  }
  return Status::Ok();
}

StatusOr<ir::Function> LowerFlat(te::Schedule& schedule, const te::Tensor& out,
                                 const std::vector<te::Tensor>& inputs, const Shape& out_shape,
                                 const Target& target, const std::string& name) {
  KILN_RETURN_IF_ERROR(internal::ScheduleFlat(schedule, out, static_cast<int>(out_shape.size()),
                                              NumElements(out_shape), target));
  return te::Lower(schedule, {out}, inputs, name, target.limits);
}

}  // namespace

StatusOr<ir::Function> Elementwise(std::string_view op, const std::vector<TensorType>& inputs,
                                   const Target& target, std::string name) {
  if (name.empty()) name = StrCat("elementwise_", op);
  const bool unary = internal::IsUnary(op), binary = internal::IsBinary(op),
             compare = internal::IsCompare(op), ternary = internal::IsTernary(op);
  if (!unary && !binary && !compare && !ternary) {
    return internal::UnknownOp("elementwise", op, internal::ElementwiseOpNames());
  }
  const size_t arity = unary ? 1 : ternary ? 3 : 2;
  if (inputs.size() != arity) {
    return InvalidArgument(op, " takes ", arity, " input", arity == 1 ? "" : "s", ", not ",
                           inputs.size());
  }
  // Parameter names: the inputs', then the output's.
  std::vector<std::string> names = unary           ? std::vector<std::string>{"X", "Y"}
                                   : !ternary      ? std::vector<std::string>{"A", "B", "C"}
                                   : op == "clamp" ? std::vector<std::string>{"X", "Lo", "Hi", "Y"}
                                                   : std::vector<std::string>{"A", "B", "C", "Y"};
  for (size_t k = 0; k < arity; ++k) {
    const std::string what = StrCat("input ", names[k], " of ", op);
    KILN_RETURN_IF_ERROR(internal::CheckData(inputs[k], target, what));
    if (k > 0) KILN_RETURN_IF_ERROR(CheckSameDtype(inputs[0], names[0], inputs[k], names[k], op));
    KILN_RETURN_IF_ERROR(internal::CheckOpDtype(op, inputs[k].dtype, what));
  }
  Shape out_shape = inputs[0].shape;
  for (size_t k = 1; k < arity; ++k) {
    StatusOr<Shape> broadcast = BroadcastShapes(out_shape, inputs[k].shape);
    if (!broadcast.ok()) {
      // A binary op's error names the op; a ternary op's the input too.
      return broadcast.status().WithContext(arity == 2 ? std::string(op)
                                                       : StrCat(op, ": input ", names[k]));
    }
    out_shape = *broadcast;
  }
  std::vector<te::Tensor> placeholders;
  for (size_t k = 0; k < arity; ++k) {
    placeholders.push_back(te::Placeholder(names[k], Extents(inputs[k].shape), inputs[k].dtype));
  }
  te::Tensor out =
      te::Compute(names[arity], Extents(out_shape), [&](const std::vector<ir::Var>& i) {
        std::vector<ir::Expr> v;
        for (size_t k = 0; k < arity; ++k) {
          v.push_back(placeholders[k](BroadcastIndex(inputs[k].shape, out_shape, i)));
        }
        if (unary) return internal::ApplyUnary(op, v[0]);
        if (binary) return internal::ApplyBinary(op, v[0], v[1]);
        if (compare) return internal::ApplyCompare(op, v[0], v[1]);
        return internal::ApplyTernary(op, v[0], v[1], v[2]);
      });
  KILN_ASSIGN_OR_RETURN(te::Schedule s, te::Schedule::Create({out}));
  return LowerFlat(s, out, placeholders, out_shape, target, name);
}

StatusOr<ir::Function> ElementwiseChain(const TensorType& input,
                                        const std::vector<ChainStep>& steps, const Target& target,
                                        const std::string& name) {
  KILN_RETURN_IF_ERROR(internal::CheckData(input, target, "input X of the chain"));
  if (steps.empty()) return InvalidArgument("an elementwise chain needs at least one step");
  // Check every step and find the output shape and each step's operand
  // dtype (the running value's: X's, i32 after a comparison) before
  // building anything.
  Shape shape = input.shape;
  int tensor_operands = 0;
  std::vector<ir::DataType> running(steps.size());
  ir::DataType dtype = input.dtype;
  for (size_t k = 0; k < steps.size(); ++k) {
    const ChainStep& step = steps[k];
    const std::string where = StrCat("step ", k + 1, " (", step.op, ") of the chain");
    running[k] = dtype;
    if (internal::IsTernary(step.op)) {
      return InvalidArgument(where, ": ", step.op,
                             " is not a chain step (a chain's steps take one operand; ternary "
                             "ops are Elementwise kernels)");
    }
    const bool compare = internal::IsCompare(step.op);
    if (internal::IsUnary(step.op) || internal::IsBinary(step.op)) {
      KILN_RETURN_IF_ERROR(internal::CheckOpDtype(
          step.op, dtype, StrCat(where, ": the running value (", dtype.ToString(), ")")));
    }
    if (compare) dtype = ir::kI32;
    if (internal::IsUnary(step.op)) {
      if (step.tensor || step.constant) {
        return InvalidArgument(where, ": a unary op takes no operand");
      }
      continue;
    }
    if (!internal::IsBinary(step.op) && !compare) {
      std::vector<std::string_view> known = UnaryOpNames();
      known.insert(known.end(), BinaryOpNames().begin(), BinaryOpNames().end());
      known.insert(known.end(), CompareOpNames().begin(), CompareOpNames().end());
      return internal::UnknownOp("elementwise", step.op, known).WithContext(where);
    }
    if (step.tensor.has_value() == step.constant.has_value()) {
      return InvalidArgument(where,
                             ": a binary op takes exactly one operand, a tensor or a constant");
    }
    if (step.constant && running[k] == ir::kI32 &&
        !(*step.constant >= -2147483648.0 && *step.constant <= 2147483647.0 &&
          *step.constant == std::trunc(*step.constant))) {
      return InvalidArgument(where, ": the constant ", *step.constant,
                             " is not an i32 (the running value is i32)");
    }
    if (step.tensor) {
      const std::string operand = StrCat("B", k + 1);
      KILN_RETURN_IF_ERROR(
          internal::CheckData(*step.tensor, target, StrCat("operand ", operand, " of ", where)));
      if (step.tensor->dtype != running[k]) {
        return InvalidArgument(where, ": dtype mismatch: the running value is ",
                               running[k].ToString(), " but ", operand, " is ",
                               step.tensor->dtype.ToString());
      }
      StatusOr<Shape> broadcast = BroadcastShapes(shape, step.tensor->shape);
      if (!broadcast.ok()) return broadcast.status().WithContext(where);
      shape = *broadcast;
      ++tensor_operands;
    }
  }
  const int buffers = tensor_operands + 2;
  if (buffers > static_cast<int>(target.limits.max_storage_buffers_per_stage)) {
    return InvalidArgument("the chain uses ", buffers, " storage buffers (X, ", tensor_operands,
                           " operands, Y); the target allows ",
                           target.limits.max_storage_buffers_per_stage, " per stage");
  }

  te::Tensor X = te::Placeholder("X", Extents(input.shape), input.dtype);
  std::vector<te::Tensor> inputs = {X};
  std::vector<te::Tensor> stages;
  te::Tensor value = X;
  Shape value_shape = input.shape;
  for (size_t k = 0; k < steps.size(); ++k) {
    const ChainStep& step = steps[k];
    const bool last = k + 1 == steps.size();
    Shape step_shape = value_shape;
    te::Tensor operand;
    const ir::DataType step_dtype = running[k];
    if (step.tensor) {
      operand = te::Placeholder(StrCat("B", k + 1), Extents(step.tensor->shape), step_dtype);
      inputs.push_back(operand);
      step_shape = *BroadcastShapes(value_shape, step.tensor->shape);
    }
    const te::Tensor prev = value;
    const Shape prev_shape = value_shape;
    value = te::Compute(
        last ? "Y" : StrCat("T", k + 1), Extents(step_shape), [&](const std::vector<ir::Var>& i) {
          ir::Expr v = prev(BroadcastIndex(prev_shape, step_shape, i));
          if (internal::IsUnary(step.op)) return internal::ApplyUnary(step.op, v);
          ir::Expr other = step.tensor ? operand(BroadcastIndex(step.tensor->shape, step_shape, i))
                           : step_dtype == ir::kI32
                               ? ir::IntConst(step_dtype, static_cast<int64_t>(*step.constant))
                               : ir::FloatConst(step_dtype, *step.constant);
          const ir::Expr& a = step.operand_first ? other : v;
          const ir::Expr& b = step.operand_first ? v : other;
          return internal::IsCompare(step.op) ? internal::ApplyCompare(step.op, a, b)
                                              : internal::ApplyBinary(step.op, a, b);
        });
    if (!last) stages.push_back(value);
    value_shape = step_shape;
  }
  KILN_ASSIGN_OR_RETURN(te::Schedule s, te::Schedule::Create({value}));
  for (const te::Tensor& t : stages) KILN_RETURN_IF_ERROR(s[t].ComputeInline());
  return LowerFlat(s, value, inputs, value_shape, target, name);
}

}  // namespace kiln::ops
