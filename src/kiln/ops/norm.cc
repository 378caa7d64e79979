// Layer normalisation and RMS normalisation over the last axis: one kernel
// of the row template (row_kernel.h) each.
#include <string>
#include <vector>

#include "kiln/ir/builder.h"
#include "kiln/ir/expr_ops.h"
#include "kiln/ops/internal.h"
#include "kiln/ops/ops.h"
#include "kiln/ops/row_kernel.h"

namespace kiln::ops {
namespace {

using internal::RowKernel;
using internal::RowView;

ir::Expr I32(int64_t v) {
  return ir::IntConst(ir::kI32, v);
}

ir::Expr Sum1(RowKernel& k, const ir::Expr& v) {
  return k.Reduce("sum", v);
}

StatusOr<ir::Function> NormKernel(bool rms, const TensorType& input, double eps,
                                  const Target& target, const std::string& name) {
  const std::string op = rms ? "rms_norm" : "layer_norm";
  KILN_RETURN_IF_ERROR(internal::CheckTensor(input, target, StrCat("input X of ", op)));
  if (!(eps >= 0.0) || eps > 1e30) {
    return InvalidArgument(op, ": eps is ", eps, "; it must be finite and at least 0");
  }
  const int rank = static_cast<int>(input.shape.size());
  const int64_t cols = input.shape.back();
  const RowView view = RowView::Make(input.shape, {rank - 1});
  const internal::RowSchedule schedule = internal::ChooseRowSchedule(view, target, rms ? 2 : 3);
  const ir::DataType dtype = input.dtype;
  auto f32 = [&](const ir::Expr& e) { return dtype == ir::kF32 ? e : ir::Cast(ir::kF32, e); };
  const ir::Expr inv_n = ir::FloatConst(ir::kF32, 1.0 / static_cast<double>(cols));
  const ir::Expr eps_c = ir::FloatConst(ir::kF32, eps);

  ir::IRBuilder b(name);
  ir::Buffer x = b.BufferParam("X", dtype, internal::Extents(input.shape));
  ir::Buffer gamma = b.BufferParam("Gamma", dtype, {I32(cols)});
  ir::Buffer beta;
  if (!rms) beta = b.BufferParam("Beta", dtype, {I32(cols)});
  ir::Buffer y = b.BufferParam("Y", dtype, internal::Extents(input.shape));
  RowKernel k(b, view, schedule, {ir::kF32});
  k.Emit([&]() {
    k.Locals("acc", ir::kF32, 1, [&](const ir::Buffer& acc) {
      const ir::Expr a0 = ir::Load(acc, {I32(0)});
      ir::Expr center = ir::FloatConst(ir::kF32, 0.0);
      ir::Expr poisoned;
      if (!rms) {
        // The mean, then the variance as the mean of squared deviations
        // (two passes: no cancellation for rows with a large mean).
        b.Store(acc, {I32(0)}, ir::FloatConst(ir::kF32, 0.0));
        k.Pass(x, [&](const ir::Expr&, const ir::Expr& v) { b.Store(acc, {I32(0)}, a0 + v); });
        center = b.Let("mean", Sum1(k, a0) * inv_n);
        // A row holding NaN or an infinity (or overflowing) has no finite
        // mean, and IEEE arithmetic gives NaN throughout it.
        poisoned = b.Let("poisoned", internal::IsNonFinite(center));
      }
      b.Store(acc, {I32(0)}, ir::FloatConst(ir::kF32, 0.0));
      k.Pass(x, [&](const ir::Expr&, const ir::Expr& v) {
        ir::Expr d = rms ? v : v - center;
        b.Store(acc, {I32(0)}, a0 + d * d);
      });
      ir::Var rstd = b.Let("rstd", ir::Call(ir::Intrinsic::kRsqrt, {Sum1(k, a0) * inv_n + eps_c}));
      k.Pass(x, [&](const ir::Expr& r, const ir::Expr& v) {
        ir::Expr out = (rms ? v : v - center) * rstd * f32(ir::Load(gamma, {r}));
        if (!rms) out = internal::NanIf(poisoned, out + f32(ir::Load(beta, {r})));
        b.Store(y, view.Index(k.output(), r), dtype == ir::kF32 ? out : ir::Cast(dtype, out));
      });
    });
  });
  return internal::FinishKernel(b, target);
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
