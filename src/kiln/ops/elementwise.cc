// Elementwise operators and fused elementwise chains.
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
  const bool unary = internal::IsUnary(op), binary = internal::IsBinary(op);
  if (!unary && !binary) {
    std::vector<std::string_view> known = UnaryOpNames();
    known.insert(known.end(), BinaryOpNames().begin(), BinaryOpNames().end());
    return internal::UnknownOp("elementwise", op, known);
  }
  const size_t arity = unary ? 1 : 2;
  if (inputs.size() != arity) {
    return InvalidArgument(op, " takes ", arity, " input", arity == 1 ? "" : "s", ", not ",
                           inputs.size());
  }
  if (unary) {
    KILN_RETURN_IF_ERROR(internal::CheckTensor(inputs[0], target, StrCat("input X of ", op)));
    const Shape& shape = inputs[0].shape;
    te::Tensor X = te::Placeholder("X", Extents(shape), inputs[0].dtype);
    te::Tensor Y = te::Compute("Y", Extents(shape), [&](const std::vector<ir::Var>& i) {
      return internal::ApplyUnary(op, X(std::vector<ir::Expr>(i.begin(), i.end())));
    });
    KILN_ASSIGN_OR_RETURN(te::Schedule s, te::Schedule::Create({Y}));
    return LowerFlat(s, Y, {X}, shape, target, name);
  }
  KILN_RETURN_IF_ERROR(internal::CheckTensor(inputs[0], target, StrCat("input A of ", op)));
  KILN_RETURN_IF_ERROR(internal::CheckTensor(inputs[1], target, StrCat("input B of ", op)));
  KILN_RETURN_IF_ERROR(CheckSameDtype(inputs[0], "A", inputs[1], "B", op));
  StatusOr<Shape> broadcast = BroadcastShapes(inputs[0].shape, inputs[1].shape);
  if (!broadcast.ok()) return broadcast.status().WithContext(op);
  const Shape out_shape = *broadcast;
  te::Tensor A = te::Placeholder("A", Extents(inputs[0].shape), inputs[0].dtype);
  te::Tensor B = te::Placeholder("B", Extents(inputs[1].shape), inputs[1].dtype);
  te::Tensor C = te::Compute("C", Extents(out_shape), [&](const std::vector<ir::Var>& i) {
    return internal::ApplyBinary(op, A(BroadcastIndex(inputs[0].shape, out_shape, i)),
                                 B(BroadcastIndex(inputs[1].shape, out_shape, i)));
  });
  KILN_ASSIGN_OR_RETURN(te::Schedule s, te::Schedule::Create({C}));
  return LowerFlat(s, C, {A, B}, out_shape, target, name);
}

StatusOr<ir::Function> ElementwiseChain(const TensorType& input,
                                        const std::vector<ChainStep>& steps, const Target& target,
                                        const std::string& name) {
  KILN_RETURN_IF_ERROR(internal::CheckTensor(input, target, "input X of the chain"));
  if (steps.empty()) return InvalidArgument("an elementwise chain needs at least one step");
  // Check every step and find the output shape before building anything.
  Shape shape = input.shape;
  int tensor_operands = 0;
  for (size_t k = 0; k < steps.size(); ++k) {
    const ChainStep& step = steps[k];
    const std::string where = StrCat("step ", k + 1, " (", step.op, ") of the chain");
    if (internal::IsUnary(step.op)) {
      if (step.tensor || step.constant) {
        return InvalidArgument(where, ": a unary op takes no operand");
      }
      continue;
    }
    if (!internal::IsBinary(step.op)) {
      std::vector<std::string_view> known = UnaryOpNames();
      known.insert(known.end(), BinaryOpNames().begin(), BinaryOpNames().end());
      return internal::UnknownOp("elementwise", step.op, known).WithContext(where);
    }
    if (step.tensor.has_value() == step.constant.has_value()) {
      return InvalidArgument(where,
                             ": a binary op takes exactly one operand, a tensor or a constant");
    }
    if (step.tensor) {
      const std::string operand = StrCat("B", k + 1);
      KILN_RETURN_IF_ERROR(
          internal::CheckTensor(*step.tensor, target, StrCat("operand ", operand, " of ", where)));
      KILN_RETURN_IF_ERROR(CheckSameDtype(input, "X", *step.tensor, operand, where));
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

  const ir::DataType dtype = input.dtype;
  te::Tensor X = te::Placeholder("X", Extents(input.shape), dtype);
  std::vector<te::Tensor> inputs = {X};
  std::vector<te::Tensor> stages;
  te::Tensor value = X;
  Shape value_shape = input.shape;
  for (size_t k = 0; k < steps.size(); ++k) {
    const ChainStep& step = steps[k];
    const bool last = k + 1 == steps.size();
    Shape step_shape = value_shape;
    te::Tensor operand;
    if (step.tensor) {
      operand = te::Placeholder(StrCat("B", k + 1), Extents(step.tensor->shape), dtype);
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
                                       : ir::FloatConst(dtype, *step.constant);
          return step.operand_first ? internal::ApplyBinary(step.op, other, v)
                                    : internal::ApplyBinary(step.op, v, other);
        });
    if (!last) stages.push_back(value);
    value_shape = step_shape;
  }
  KILN_ASSIGN_OR_RETURN(te::Schedule s, te::Schedule::Create({value}));
  for (const te::Tensor& t : stages) KILN_RETURN_IF_ERROR(s[t].ComputeInline());
  return LowerFlat(s, value, inputs, value_shape, target, name);
}

}  // namespace kiln::ops
