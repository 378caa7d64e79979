// Layer normalisation and RMS normalisation over the last axis: one TE
// kernel each, scheduled by the row-wise rule (rows.h).
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

using internal::RowView;

ir::Expr I32(int64_t v) {
  return ir::IntConst(ir::kI32, v);
}

// Layer or RMS norm over the last axis as TE: per row, layer norm's mean
// (Mean) and both norms' reciprocal standard deviation (R, from the mean
// of squared deviations: two passes, no cancellation for rows with a large
// mean) are reductions with keepdims shapes, computed per row by the
// row-wise rule (ScheduleRowwise); Y reads them with Gamma and Beta. A row
// holding NaN or an infinity (or values more than the largest f32 apart)
// has no finite mean, and IEEE arithmetic gives NaN throughout it: layer
// norm tests the mean for that.
StatusOr<ir::Function> NormKernel(bool rms, const TensorType& input, double eps,
                                  const Target& target, const std::string& name) {
  const std::string op = rms ? "rms_norm" : "layer_norm";
  KILN_RETURN_IF_ERROR(internal::CheckTensor(input, target, StrCat("input X of ", op)));
  if (!(eps >= 0.0) || eps > 1e30) {
    return InvalidArgument(op, ": eps is ", eps, "; it must be at least 0 and at most 1e30");
  }
  // The kernel adds eps in f32, where GPUs flush subnormals: a smaller eps
  // would act as 0 (a row of equal values would give NaN, not Beta).
  if (eps > 0.0 && eps < std::numeric_limits<float>::min()) {
    return InvalidArgument(op, ": eps is ", eps,
                           ", which f32 arithmetic takes as 0 (below the smallest normal f32, ",
                           std::numeric_limits<float>::min(), "); pass 0 or a larger eps");
  }
  const int rank = static_cast<int>(input.shape.size());
  const int last = rank - 1;
  const int64_t cols = input.shape.back();
  const RowView view = RowView::Make(input.shape, {last});
  const ir::DataType dtype = input.dtype;
  auto f32 = [&](const ir::Expr& e) { return dtype == ir::kF32 ? e : ir::Cast(ir::kF32, e); };
  const ir::Expr inv_n = ir::FloatConst(ir::kF32, 1.0 / static_cast<double>(cols));
  const ir::Expr eps_c = ir::FloatConst(ir::kF32, eps);

  te::Tensor X = te::Placeholder("X", internal::Extents(input.shape), dtype);
  te::Tensor gamma = te::Placeholder("Gamma", {I32(cols)}, dtype);
  te::Tensor beta = te::Placeholder("Beta", {I32(cols)}, dtype);
  Shape stat_shape = input.shape;
  stat_shape[last] = 1;
  auto x_at = [&](const std::vector<ir::Var>& i, const ir::Expr& at) {
    return f32(X(internal::WithAxisAt(i, last, at)));
  };
  auto row_of = [&](const std::vector<ir::Var>& i) {
    return internal::WithAxisAt(i, last, I32(0));
  };
  std::vector<te::Tensor> stats;
  te::Tensor mean;
  if (!rms) {
    te::IterVar k = te::ReduceAxis(I32(cols), "k");
    // Shifted by the row's first element: a row of equal values has exactly
    // that value as its mean (and Y = Beta), where a sum times f32(1 / D)
    // can be off by an ulp that the reciprocal deviation then magnifies.
    mean = te::Compute("Mean", internal::Extents(stat_shape), [&](const std::vector<ir::Var>& i) {
      const ir::Expr first = x_at(i, I32(0));
      return first + te::Sum(x_at(i, k) - first, {k}) * inv_n;
    });
    stats.push_back(mean);
  }
  // The value a row's statistics center x at.
  auto centered = [&](const std::vector<ir::Var>& i, const ir::Expr& x) {
    return rms ? x : x - mean(row_of(i));
  };
  te::IterVar k = te::ReduceAxis(I32(cols), "k");
  te::Tensor R =
      te::Compute("R", internal::Extents(stat_shape), [&](const std::vector<ir::Var>& i) {
        const ir::Expr d = centered(i, x_at(i, k));
        return ir::Call(ir::Intrinsic::kRsqrt, {te::Sum(d * d, {k}) * inv_n + eps_c});
      });
  stats.push_back(R);
  te::Tensor Y =
      te::Compute("Y", internal::Extents(input.shape), [&](const std::vector<ir::Var>& i) {
        const ir::Expr& c = i[last];
        ir::Expr out = centered(i, x_at(i, c)) * R(row_of(i)) * f32(gamma(c));
        if (!rms) {
          out = internal::NanIf(internal::IsNonFinite(mean(row_of(i))), out + f32(beta(c)));
        }
        return dtype == ir::kF32 ? out : ir::Cast(dtype, out);
      });
  KILN_ASSIGN_OR_RETURN(te::Schedule s, te::Schedule::Create({Y}));
  const internal::RowSchedule rule = internal::ChooseRowSchedule(view, target);
  KILN_RETURN_IF_ERROR(internal::ScheduleRowwise(s, Y, last, stats, view, rule));
  std::vector<te::Tensor> inputs = {X, gamma};
  if (!rms) inputs.push_back(beta);
  return te::Lower(s, {Y}, inputs, name, target.limits);
}

}  // namespace

StatusOr<ir::Function> LayerNorm(const TensorType& input, double eps, const Target& target,
                                 const std::string& name) {
  return NormKernel(false, input, eps, target, name);
}

StatusOr<ir::Function> RmsNorm(const TensorType& input, double eps, const Target& target,
                               const std::string& name) {
  return NormKernel(true, input, eps, target, name);
}

}  // namespace kiln::ops
