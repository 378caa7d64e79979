// Reductions (over any axes, and over the last axis of a 2-D input),
// arg-reductions, softmax and log-softmax.
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "kiln/ir/builder.h"
#include "kiln/ir/expr_ops.h"
#include "kiln/ops/internal.h"
#include "kiln/ops/ops.h"
#include "kiln/ops/row_kernel.h"
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
  KILN_RETURN_IF_ERROR(CheckMatrix(input, target, StrCat("input X of reduce ", op)));
  return ReduceAxes(op, input, {1}, keepdims, target, std::move(name));
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

// ---------------------------------------------------------------------------
// Reductions over any axes, arg-reductions, softmax and log-softmax over an
// axis: kernels of the row template (row_kernel.h).

namespace {

using internal::RowKernel;
using internal::RowView;

ir::Expr I32(int64_t v) {
  return ir::IntConst(ir::kI32, v);
}

ir::Expr ToDtype(const ir::Expr& v, ir::DataType dtype) {
  return dtype == ir::kF32 ? v : ir::Cast(dtype, v);
}

}  // namespace

StatusOr<ir::Function> ReduceAxes(std::string_view op, const TensorType& input,
                                  const std::vector<int>& axes, bool keepdims, const Target& target,
                                  std::string name) {
  const auto& known = ReduceOpNames();
  if (std::find(known.begin(), known.end(), op) == known.end()) {
    return internal::UnknownOp("reduce", op, known);
  }
  const std::string what = StrCat("reduce ", op);
  KILN_RETURN_IF_ERROR(internal::CheckTensor(input, target, StrCat("input X of ", what)));
  const int rank = static_cast<int>(input.shape.size());
  if (axes.empty()) {
    return InvalidArgument(what, ": no axes to reduce; list every axis to reduce all of them");
  }
  std::vector<int> reduced;
  for (size_t k = 0; k < axes.size(); ++k) {
    KILN_ASSIGN_OR_RETURN(
        int a, internal::NormalizeAxis(axes[k], rank, StrCat(what, ": axis ", k, " of axes")));
    if (std::find(reduced.begin(), reduced.end(), a) != reduced.end()) {
      return InvalidArgument(what, ": axis ", a, " is listed twice in axes");
    }
    reduced.push_back(a);
  }
  if (name.empty()) name = StrCat("reduce_", op);
  const RowView view = RowView::Make(input.shape, reduced);
  const Shape out_shape = view.OutputShape(keepdims);
  internal::RowSchedule schedule = internal::ChooseRowSchedule(view, target, 1);
  // No subgroup product in the IR: prod combines through the tree.
  if (op == "prod") schedule.subgroups = false;

  ir::IRBuilder b(name);
  ir::Buffer x = b.BufferParam("X", input.dtype, internal::Extents(input.shape));
  ir::Buffer y = b.BufferParam("Y", input.dtype, internal::Extents(out_shape));
  RowKernel k(b, view, schedule, {ir::kF32});
  k.Emit([&]() {
    k.Locals("acc", ir::kF32, 1, [&](const ir::Buffer& acc) {
      b.Store(acc, {I32(0)}, internal::ReduceIdentity(op));
      k.Pass(x, [&](const ir::Expr&, const ir::Expr& v) {
        b.Store(acc, {I32(0)}, internal::ReduceCombine(op, ir::Load(acc, {I32(0)}), v));
      });
      // mean: the sum, divided.
      ir::Expr value = k.Reduce(op == "mean" ? "sum" : op, ir::Load(acc, {I32(0)}));
      if (op == "mean") value = value / ir::FloatConst(ir::kF32, static_cast<double>(view.length));
      b.If(k.IsWriter(), [&]() {
        b.Store(y, view.OutputIndex(k.output(), keepdims), ToDtype(value, input.dtype));
      });
    });
  });
  return internal::FinishKernel(b, target);
}

const std::vector<std::string_view>& ArgReduceOpNames() {
  static const std::vector<std::string_view> kNames = {"argmax", "argmin"};
  return kNames;
}

StatusOr<ir::Function> ArgReduce(std::string_view op, const TensorType& input, int axis,
                                 bool keepdims, const Target& target, std::string name) {
  const auto& known = ArgReduceOpNames();
  if (std::find(known.begin(), known.end(), op) == known.end()) {
    return internal::UnknownOp("arg-reduce", op, known);
  }
  KILN_RETURN_IF_ERROR(internal::CheckTensor(input, target, StrCat("input X of ", op)));
  const int rank = static_cast<int>(input.shape.size());
  KILN_ASSIGN_OR_RETURN(int a, internal::NormalizeAxis(axis, rank, StrCat(op, ": axis")));
  if (name.empty()) name = std::string(op);
  const bool is_max = op == "argmax";
  const RowView view = RowView::Make(input.shape, {a});
  const Shape out_shape = view.OutputShape(keepdims);
  internal::RowSchedule schedule = internal::ChooseRowSchedule(view, target, 1);
  // The (value, index) pairs combine through the tree, subgroups or not.
  schedule.subgroups = false;

  // (value, index) pairs: the better of two is the NaN (NaN counts as
  // beyond every number), then the strictly larger (argmax) or smaller
  // (argmin) value, then on equal values (or two NaNs) the smaller index.
  auto better = [&](const ir::Expr& xv, const ir::Expr& xi, const ir::Expr& bv,
                    const ir::Expr& bi) {
    ir::Expr xn = internal::IsNan(xv), bn = internal::IsNan(bv);
    ir::Expr strictly = is_max ? xv > bv : xv < bv;
    return (xn && (!bn || xi < bi)) || (!xn && !bn && (strictly || (xv == bv && xi < bi)));
  };
  const double inf = std::numeric_limits<double>::infinity();
  ir::IRBuilder b(name);
  ir::Buffer x = b.BufferParam("X", input.dtype, internal::Extents(input.shape));
  ir::Buffer y = b.BufferParam("Y", ir::kI32, internal::Extents(out_shape));
  RowKernel k(b, view, schedule, {ir::kF32, ir::kI32});
  k.Emit([&]() {
    k.Locals("best", ir::kF32, 1, [&](const ir::Buffer& bv) {
      k.Locals("best_index", ir::kI32, 1, [&](const ir::Buffer& bi) {
        b.Store(bv, {I32(0)}, ir::FloatConst(ir::kF32, is_max ? -inf : inf));
        b.Store(bi, {I32(0)}, I32(std::numeric_limits<int32_t>::max()));
        k.Pass(x, [&](const ir::Expr& r, const ir::Expr& v) {
          ir::Var xv = b.Let("v", v);
          ir::Var take =
              b.Let("take", better(xv, r, ir::Load(bv, {I32(0)}), ir::Load(bi, {I32(0)})));
          b.If(take, [&]() {
            b.Store(bv, {I32(0)}, xv);
            b.Store(bi, {I32(0)}, r);
          });
        });
        RowKernel::Values res = k.Combine(
            {ir::Load(bv, {I32(0)}), ir::Load(bi, {I32(0)})}, [&](const auto& p, const auto& q) {
              ir::Expr t = better(q[0], q[1], p[0], p[1]);
              return RowKernel::Values{ir::Select(t, q[0], p[0]), ir::Select(t, q[1], p[1])};
            });
        b.If(k.IsWriter(), [&]() { b.Store(y, view.OutputIndex(k.output(), keepdims), res[1]); });
      });
    });
  });
  return internal::FinishKernel(b, target);
}

namespace {

StatusOr<ir::Function> SoftmaxKernel(bool log, const TensorType& input, int64_t axis,
                                     const Target& target, const std::string& name) {
  const std::string op = log ? "log_softmax" : "softmax";
  KILN_RETURN_IF_ERROR(internal::CheckTensor(input, target, StrCat("input X of ", op)));
  const int rank = static_cast<int>(input.shape.size());
  KILN_ASSIGN_OR_RETURN(int a, internal::NormalizeAxis(axis, rank, StrCat(op, ": axis")));
  const RowView view = RowView::Make(input.shape, {a});
  const internal::RowSchedule schedule = internal::ChooseRowSchedule(view, target, 3);
  const ir::Expr zero = ir::FloatConst(ir::kF32, 0.0);

  ir::IRBuilder b(name);
  ir::Buffer x = b.BufferParam("X", input.dtype, internal::Extents(input.shape));
  ir::Buffer y = b.BufferParam("Y", input.dtype, internal::Extents(input.shape));
  RowKernel k(b, view, schedule, {ir::kF32});
  auto exp = [](const ir::Expr& e) { return ir::Call(ir::Intrinsic::kExp, {e}); };
  k.Emit([&]() {
    k.Locals("acc", ir::kF32, 1, [&](const ir::Buffer& acc) {
      // The row's maximum (NaN propagates).
      b.Store(acc, {I32(0)}, internal::ReduceIdentity("max"));
      k.Pass(x, [&](const ir::Expr&, const ir::Expr& v) {
        b.Store(acc, {I32(0)}, internal::ReduceCombine("max", ir::Load(acc, {I32(0)}), v));
      });
      ir::Expr m = k.Reduce("max", ir::Load(acc, {I32(0)}));
      // The sum of exp(x - max).
      b.Store(acc, {I32(0)}, zero);
      k.Pass(x, [&](const ir::Expr&, const ir::Expr& v) {
        b.Store(acc, {I32(0)}, ir::Load(acc, {I32(0)}) + exp(v - m));
      });
      ir::Expr s = k.Reduce("sum", ir::Load(acc, {I32(0)}));
      ir::Var scale = b.Let(
          "scale", log ? ir::Call(ir::Intrinsic::kLog, {s}) : ir::FloatConst(ir::kF32, 1.0) / s);
      // A row holding NaN or +inf, or only -inf, gives NaN (as IEEE
      // arithmetic on x - max does): the maximum is then not finite.
      ir::Var poisoned = b.Let("poisoned", internal::IsNonFinite(m));
      k.Pass(x, [&](const ir::Expr& r, const ir::Expr& v) {
        ir::Expr out = log ? v - m - scale : exp(v - m) * scale;
        b.Store(y, view.Index(k.output(), r), ToDtype(internal::NanIf(poisoned, out), input.dtype));
      });
    });
  });
  return internal::FinishKernel(b, target);
}

}  // namespace

StatusOr<ir::Function> SoftmaxAxis(const TensorType& input, int axis, const Target& target,
                                   const std::string& name) {
  return SoftmaxKernel(false, input, axis, target, name);
}

StatusOr<ir::Function> LogSoftmax(const TensorType& input, int axis, const Target& target,
                                  const std::string& name) {
  return SoftmaxKernel(true, input, axis, target, name);
}

}  // namespace kiln::ops
