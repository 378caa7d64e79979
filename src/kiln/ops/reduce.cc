// Reductions over the last axis of a 2-D input, and softmax.
#include <algorithm>
#include <string>
#include <vector>

#include "kiln/ir/expr_ops.h"
#include "kiln/ops/internal.h"
#include "kiln/ops/ops.h"
#include "kiln/te/te.h"

namespace kiln::ops {
namespace {

using internal::Extents;

Status CheckMatrix(const TensorType& input, const Target& target, std::string_view what) {
  KILN_RETURN_IF_ERROR(internal::CheckTensor(input, target, what));
  if (input.shape.size() != 2) {
    return InvalidArgument(what, " has shape ", ShapeToString(input.shape), " of rank ",
                           input.shape.size(), "; it must be 2-D (rows, cols)");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<ir::Function> Reduce(std::string_view op, const TensorType& input, bool keepdims,
                              const Target& target, std::string name) {
  const auto& known = ReduceOpNames();
  if (std::find(known.begin(), known.end(), op) == known.end()) {
    return internal::UnknownOp("reduce", op, known);
  }
  if (name.empty()) name = StrCat("reduce_", op);
  KILN_RETURN_IF_ERROR(CheckMatrix(input, target, StrCat("input X of reduce ", op)));
  const int64_t rows = input.shape[0], cols = input.shape[1];
  const ir::DataType dtype = input.dtype;
  const ir::DataType acc = ir::kF32;  // f16 accumulates in f32
  const Shape out_shape = keepdims ? Shape{rows, 1} : Shape{rows};

  te::Tensor X = te::Placeholder("X", Extents(input.shape), dtype);
  te::IterVar k = te::ReduceAxis(ir::IntConst(ir::kI32, cols), "k");
  te::Tensor Y = te::Compute("Y", Extents(out_shape), [&](const std::vector<ir::Var>& i) {
    ir::Expr x = X(i[0], k);
    if (dtype != acc) x = ir::Cast(acc, x);
    ir::Expr r;
    if (op == "sum" || op == "mean") {
      r = te::Sum(x, {k});
    } else if (op == "max") {
      r = te::Max(x, {k});
    } else if (op == "min") {
      r = te::Min(x, {k});
    } else {
      r = te::Prod(x, {k});
    }
    if (op == "mean") r = r / ir::FloatConst(acc, static_cast<double>(cols));
    return dtype != acc ? ir::Cast(dtype, r) : r;
  });
  KILN_ASSIGN_OR_RETURN(te::Schedule s, te::Schedule::Create({Y}));
  KILN_RETURN_IF_ERROR(
      internal::ScheduleFlat(s, Y, static_cast<int>(out_shape.size()), rows, target));
  return te::Lower(s, {Y}, {X}, name);
}

StatusOr<KernelSequence> Softmax(const TensorType& input, const Target& target,
                                 const std::string& name) {
  KILN_RETURN_IF_ERROR(CheckMatrix(input, target, "input X of softmax"));
  if (input.dtype != ir::kF32) {
    return InvalidArgument("input X of softmax is ", input.dtype.ToString(),
                           "; softmax supports f32 only");
  }
  const int64_t rows = input.shape[0], cols = input.shape[1];
  const ir::DataType f32 = ir::kF32;
  te::Tensor X = te::Placeholder("X", Extents(input.shape), f32);
  KernelSequence seq;

  // M[i] = max_k X[i, k]
  {
    te::IterVar k = te::ReduceAxis(ir::IntConst(ir::kI32, cols), "k");
    te::Tensor M = te::Compute("M", Extents({rows}), [&](const std::vector<ir::Var>& i) {
      return te::Max(X(i[0], k), {k});
    });
    KILN_ASSIGN_OR_RETURN(te::Schedule s, te::Schedule::Create({M}));
    KILN_RETURN_IF_ERROR(internal::ScheduleFlat(s, M, 1, rows, target));
    KILN_ASSIGN_OR_RETURN(ir::Function f, te::Lower(s, {M}, {X}, name + "_max"));
    seq.functions.push_back(std::move(f));
  }
  te::Tensor M = te::Placeholder("M", Extents({rows}), f32);
  // S[i] = sum_k exp(X[i, k] - M[i])
  {
    te::IterVar k = te::ReduceAxis(ir::IntConst(ir::kI32, cols), "k");
    te::Tensor S = te::Compute("S", Extents({rows}), [&](const std::vector<ir::Var>& i) {
      return te::Sum(ir::Call(ir::Intrinsic::kExp, {X(i[0], k) - M(i[0])}), {k});
    });
    KILN_ASSIGN_OR_RETURN(te::Schedule s, te::Schedule::Create({S}));
    KILN_RETURN_IF_ERROR(internal::ScheduleFlat(s, S, 1, rows, target));
    KILN_ASSIGN_OR_RETURN(ir::Function f, te::Lower(s, {S}, {X, M}, name + "_sum"));
    seq.functions.push_back(std::move(f));
  }
  te::Tensor S = te::Placeholder("S", Extents({rows}), f32);
  // Y[i, j] = exp(X[i, j] - M[i]) / S[i]
  {
    te::Tensor Y = te::Compute("Y", Extents(input.shape), [&](const std::vector<ir::Var>& i) {
      return ir::Call(ir::Intrinsic::kExp, {X(i[0], i[1]) - M(i[0])}) / S(i[0]);
    });
    KILN_ASSIGN_OR_RETURN(te::Schedule s, te::Schedule::Create({Y}));
    KILN_RETURN_IF_ERROR(internal::ScheduleFlat(s, Y, 2, rows * cols, target));
    KILN_ASSIGN_OR_RETURN(ir::Function f, te::Lower(s, {Y}, {X, M, S}, name + "_normalize"));
    seq.functions.push_back(std::move(f));
  }
  seq.intermediates = {{"M", {rows}, f32}, {"S", {rows}, f32}};
  return seq;
}

}  // namespace kiln::ops
