// Reductions (over any axes, and over the last axis of a 2-D input),
// arg-reductions, softmax and log-softmax.
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "kiln/ir/expr_ops.h"
#include "kiln/ops/internal.h"
#include "kiln/ops/ops.h"
#include "kiln/ops/rows.h"
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
    KILN_ASSIGN_OR_RETURN(ir::Function f, te::Lower(s, {M}, {X}, name + "_max", target.limits));
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
    KILN_ASSIGN_OR_RETURN(ir::Function f, te::Lower(s, {S}, {X, M}, name + "_sum", target.limits));
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
    KILN_ASSIGN_OR_RETURN(ir::Function f,
                          te::Lower(s, {Y}, {X, M, S}, name + "_normalize", target.limits));
    seq.functions.push_back(std::move(f));
  }
  seq.intermediates = {{"M", {rows}, f32}, {"S", {rows}, f32}};
  return seq;
}

// ---------------------------------------------------------------------------
// Reductions over any axes, arg-reductions, softmax and log-softmax over an
// axis: TE computes scheduled by the row rules (rows.h).

namespace {

using internal::RowView;

ir::Expr I32(int64_t v) {
  return ir::IntConst(ir::kI32, v);
}

ir::Expr ToDtype(const ir::Expr& v, ir::DataType dtype) {
  return dtype == ir::kF32 ? v : ir::Cast(dtype, v);
}

// The reduced dimensions of extent other than 1, one reduction axis each
// ("k<dim>"), in dimension order.
std::vector<te::IterVar> RowReduceAxes(const RowView& view) {
  std::vector<te::IterVar> axes;
  for (int d : view.reduced) {
    if (view.shape[d] != 1) axes.push_back(te::ReduceAxis(I32(view.shape[d]), StrCat("k", d)));
  }
  return axes;
}

// The indices into X of the element that output index `i` (over
// view.OutputShape(keepdims)) reads at reduction axes `k` (RowReduceAxes).
std::vector<ir::Expr> RowInputIndex(const RowView& view, bool keepdims,
                                    const std::vector<ir::Var>& i,
                                    const std::vector<te::IterVar>& k) {
  std::vector<ir::Expr> index(view.shape.size());
  size_t next_out = 0, next_k = 0;
  for (int d = 0; d < static_cast<int>(view.shape.size()); ++d) {
    const bool reduced =
        std::find(view.reduced.begin(), view.reduced.end(), d) != view.reduced.end();
    if (reduced) {
      index[d] = view.shape[d] == 1 ? I32(0) : ir::Expr(k[next_k++].var());
      if (keepdims) ++next_out;
    } else {
      index[d] = i[keepdims ? d : next_out++];
    }
  }
  return index;
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
  KILN_RETURN_IF_ERROR(internal::CheckData(input, target, StrCat("input X of ", what)));
  const bool ints = internal::IsIntegerData(input.dtype);
  if (ints && op == "mean") {
    return InvalidArgument("input X of ", what, " is ", input.dtype.ToString(),
                           "; mean takes f32 or f16 (cast the integers first)");
  }
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

  // Y[o] = op over the reduced axes of f32(X): sums, products, maxima and
  // minima accumulate in f32 (max and min propagate NaN); mean is the sum
  // divided by the count. i32 and u32 reduce in their own type (sums and
  // products wrap).
  te::Tensor X = te::Placeholder("X", Extents(input.shape), input.dtype);
  const std::vector<te::IterVar> k = RowReduceAxes(view);
  te::Tensor Y = te::Compute("Y", Extents(out_shape), [&](const std::vector<ir::Var>& i) {
    ir::Expr x = X(RowInputIndex(view, keepdims, i, k));
    if (input.dtype == ir::kF16) x = ir::Cast(ir::kF32, x);
    ir::Expr v = x;
    if (!k.empty()) {
      v = op == "max"    ? te::Max(x, k)
          : op == "min"  ? te::Min(x, k)
          : op == "prod" ? te::Prod(x, k)
                         : te::Sum(x, k);
    }
    if (op == "mean") v = v / ir::FloatConst(ir::kF32, static_cast<double>(view.length));
    return ints ? v : ToDtype(v, input.dtype);
  });
  return internal::LowerRows(Y, X, static_cast<int>(out_shape.size()), view, !k.empty(), target,
                             name);
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
  KILN_RETURN_IF_ERROR(internal::CheckData(input, target, StrCat("input X of ", op)));
  const int rank = static_cast<int>(input.shape.size());
  KILN_ASSIGN_OR_RETURN(int a, internal::NormalizeAxis(axis, rank, StrCat(op, ": axis")));
  if (name.empty()) name = std::string(op);
  const bool is_max = op == "argmax";
  const bool ints = internal::IsIntegerData(input.dtype);
  const RowView view = RowView::Make(input.shape, {a});
  const Shape out_shape = view.OutputShape(keepdims);

  // (index, value) pairs: the better of two is the NaN (NaN counts as
  // beyond every number), then the strictly larger (argmax) or smaller
  // (argmin) value, then on equal values (or two NaNs) the smaller index.
  // The order is total, so the reducer is associative and commutative and
  // partial results combine across threads.
  auto better = [&](const ir::Expr& xi, const ir::Expr& xv, const ir::Expr& bi,
                    const ir::Expr& bv) {
    ir::Expr strictly = is_max ? xv > bv : xv < bv;
    if (ints) return strictly || (xv == bv && xi < bi);
    ir::Expr xn = internal::IsNan(xv), bn = internal::IsNan(bv);
    return (xn && (!bn || xi < bi)) || (!xn && !bn && (strictly || (xv == bv && xi < bi)));
  };
  const double inf = std::numeric_limits<double>::infinity();
  // The value's identity: an integer input compares in its own type (its
  // lowest or highest value, which loses every tie to a real element's
  // smaller index), every other in f32.
  const ir::Expr worst = input.dtype == ir::kU32 ? ir::IntConst(ir::kU32, is_max ? 0 : 4294967295)
                         : ints                  ? I32(is_max ? std::numeric_limits<int32_t>::min()
                                                              : std::numeric_limits<int32_t>::max())
                                                 : ir::FloatConst(ir::kF32, is_max ? -inf : inf);
  te::CommReducer reducer{std::string(op),
                          {I32(std::numeric_limits<int32_t>::max()), worst},
                          [&](const std::vector<ir::Expr>& acc, const std::vector<ir::Expr>& next) {
                            ir::Expr take = better(next[0], next[1], acc[0], acc[1]);
                            return std::vector<ir::Expr>{ir::Select(take, next[0], acc[0]),
                                                         ir::Select(take, next[1], acc[1])};
                          }};
  te::Tensor X = te::Placeholder("X", Extents(input.shape), input.dtype);
  const std::vector<te::IterVar> k = RowReduceAxes(view);
  te::Tensor Y = te::Compute("Y", Extents(out_shape), [&](const std::vector<ir::Var>& i) {
    if (k.empty()) return I32(0);  // one element along the axis
    ir::Expr x = X(RowInputIndex(view, keepdims, i, k));
    if (input.dtype == ir::kF16) x = ir::Cast(ir::kF32, x);
    return te::Reduce(reducer, {k[0].var(), x}, k)[0];
  });
  return internal::LowerRows(Y, X, static_cast<int>(out_shape.size()), view, !k.empty(), target,
                             name);
}

namespace {

// Softmax or log-softmax along `axis` as TE: the row statistics M (the
// maximum) and S (the sum of exp(x - M)) are reductions with keepdims
// shapes, computed per row by the row-wise rule (ScheduleRowwise); Y reads
// them. A row holding NaN or +inf, or only -inf, gives NaN (as IEEE
// arithmetic on x - max does): M is the device's maximum (te::DeviceMax, one
// instruction per element), which may pass over a NaN, but then that NaN
// element makes S NaN; and where M is not finite (a NaN the maximum kept,
// +inf, or a row of -inf), Y tests it.
StatusOr<ir::Function> SoftmaxKernel(bool log, const TensorType& input, int64_t axis,
                                     const Target& target, const std::string& name) {
  const std::string op = log ? "log_softmax" : "softmax";
  KILN_RETURN_IF_ERROR(internal::CheckTensor(input, target, StrCat("input X of ", op)));
  const int rank = static_cast<int>(input.shape.size());
  KILN_ASSIGN_OR_RETURN(int a, internal::NormalizeAxis(axis, rank, StrCat(op, ": axis")));
  const RowView view = RowView::Make(input.shape, {a});
  auto exp = [](const ir::Expr& e) { return ir::Call(ir::Intrinsic::kExp, {e}); };
  auto f32 = [&](const ir::Expr& e) { return input.dtype == ir::kF32 ? e : ir::Cast(ir::kF32, e); };
  te::Tensor X = te::Placeholder("X", Extents(input.shape), input.dtype);
  Shape stat_shape = input.shape;
  stat_shape[a] = 1;
  // X at index i with axis a at `at`; a statistic at the row of i.
  auto x_at = [&](const std::vector<ir::Var>& i, const ir::Expr& at) {
    return f32(X(internal::WithAxisAt(i, a, at)));
  };
  auto row_of = [&](const std::vector<ir::Var>& i) { return internal::WithAxisAt(i, a, I32(0)); };
  te::IterVar k1 = te::ReduceAxis(I32(view.length), "k");
  te::Tensor M = te::Compute("M", Extents(stat_shape), [&](const std::vector<ir::Var>& i) {
    return te::DeviceMax(x_at(i, k1), {k1});
  });
  te::IterVar k2 = te::ReduceAxis(I32(view.length), "k");
  te::Tensor S = te::Compute("S", Extents(stat_shape), [&](const std::vector<ir::Var>& i) {
    return te::Sum(exp(x_at(i, k2) - M(row_of(i))), {k2});
  });
  te::Tensor Y = te::Compute("Y", Extents(input.shape), [&](const std::vector<ir::Var>& i) {
    const ir::Expr m = M(row_of(i)), sum = S(row_of(i)), x = x_at(i, i[a]);
    // One reciprocal per row (a loop invariant), not a division per element.
    const ir::Expr out = log ? x - m - ir::Call(ir::Intrinsic::kLog, {sum})
                             : exp(x - m) * (ir::FloatConst(ir::kF32, 1.0) / sum);
    return ToDtype(internal::NanIf(internal::IsNonFinite(m), out), input.dtype);
  });
  KILN_ASSIGN_OR_RETURN(te::Schedule s, te::Schedule::Create({Y}));
  const internal::RowSchedule rule = internal::ChooseRowSchedule(view, target);
  KILN_RETURN_IF_ERROR(internal::ScheduleRowwise(s, Y, a, {M, S}, view, rule));
  return te::Lower(s, {Y}, {X}, name, target.limits);
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
