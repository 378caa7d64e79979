// 2-D convolution (as an implicit GEMM, the GEMM family's tensor
// expressions and schedule, or directly where the GEMM would be too thin)
// and 2-D pooling, all tensor expressions.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kiln/ir/expr_ops.h"
#include "kiln/ops/gemm.h"
#include "kiln/ops/internal.h"
#include "kiln/ops/ops.h"
#include "kiln/te/te.h"

namespace kiln::ops {
namespace {

using ir::Expr;

Expr I32(int64_t v) {
  return ir::IntConst(ir::kI32, v);
}
int I(int64_t v) {
  return static_cast<int>(v);
}

// The checked geometry of one convolution or pooling.
struct Geometry {
  int64_t n = 0, c = 0, h = 0, w = 0;  // input
  int64_t f = 0, kh = 0, kw = 0;       // filters (pooling: f = c)
  int64_t oh = 0, ow = 0;              // output
  int64_t groups = 1, cg = 0, fg = 0;  // channels and filters per group
  Shape out;
};

// `dilated`: the operator takes dilations (conv2d; pooling's are 1).
Status CheckWindow(std::string_view what, const Conv2dOptions& o, bool dilated) {
  if (o.stride_h < 1 || o.stride_w < 1) {
    return InvalidArgument(what, ": strides must be at least 1, got ", o.stride_h, " x ",
                           o.stride_w);
  }
  if (o.dilation_h < 1 || o.dilation_w < 1) {
    return InvalidArgument(what, ": dilations must be at least 1, got ", o.dilation_h, " x ",
                           o.dilation_w);
  }
  if (o.pad_h < 0 || o.pad_w < 0) {
    return InvalidArgument(what, ": padding must not be negative, got ", o.pad_h, " x ", o.pad_w);
  }
  const int64_t limit = int64_t{1} << 30;
  if (o.stride_h > limit || o.stride_w > limit || o.dilation_h > limit || o.dilation_w > limit ||
      o.pad_h > limit || o.pad_w > limit) {
    return InvalidArgument(what,
                           dilated ? ": strides, dilations and padding" : ": strides and padding",
                           " must be at most 2^30; got strides ", o.stride_h, " x ", o.stride_w,
                           dilated ? StrCat(", dilations ", o.dilation_h, " x ", o.dilation_w) : "",
                           ", padding ", o.pad_h, " x ", o.pad_w);
  }
  return Status::Ok();
}

// Output extent of one spatial axis, or an error.
StatusOr<int64_t> OutExtent(std::string_view what, std::string_view axis, int64_t in,
                            int64_t kernel, int64_t stride, int64_t pad, int64_t dilation) {
  const int64_t span = dilation * (kernel - 1) + 1;
  const int64_t padded = in + 2 * pad;
  if (padded < span) {
    // (Pooling has no dilation: its window is its kernel.)
    return InvalidArgument(what, ": the window spans ", span, " along ", axis, " (kernel ", kernel,
                           dilation == 1 ? "" : StrCat(", dilation ", dilation),
                           ") but the padded input has only ", padded);
  }
  return (padded - span) / stride + 1;
}

StatusOr<Geometry> CheckConv(const TensorType& x, const TensorType& w, const Target& target,
                             const Conv2dOptions& o) {
  // (The ranks first: the generic checks would name ranks 1 to 4.)
  if (x.shape.size() != 4) {
    return InvalidArgument("input X of conv2d has shape ", ShapeToString(x.shape), "; it must be ",
                           o.nhwc ? "NHWC" : "NCHW", " (rank 4)");
  }
  if (w.shape.size() != 4) {
    return InvalidArgument("weights W of conv2d have shape ", ShapeToString(w.shape),
                           "; they must be ",
                           o.nhwc ? "[KH, KW, C/groups, F]" : "[F, C/groups, KH, KW]", " (rank 4)");
  }
  KILN_RETURN_IF_ERROR(internal::CheckTensor(x, target, "input X of conv2d"));
  KILN_RETURN_IF_ERROR(internal::CheckTensor(w, target, "weights W of conv2d"));
  if (x.dtype != w.dtype) {
    return InvalidArgument("conv2d: dtype mismatch: X is ", x.dtype.ToString(), " but W is ",
                           w.dtype.ToString());
  }
  KILN_RETURN_IF_ERROR(CheckWindow("conv2d", o, /*dilated=*/true));
  Geometry g;
  g.n = x.shape[0];
  g.c = o.nhwc ? x.shape[3] : x.shape[1];
  g.h = o.nhwc ? x.shape[1] : x.shape[2];
  g.w = o.nhwc ? x.shape[2] : x.shape[3];
  g.kh = o.nhwc ? w.shape[0] : w.shape[2];
  g.kw = o.nhwc ? w.shape[1] : w.shape[3];
  const int64_t wc = o.nhwc ? w.shape[2] : w.shape[1];
  g.f = o.nhwc ? w.shape[3] : w.shape[0];
  g.groups = o.groups;
  if (o.groups < 1 || g.c % o.groups != 0 || g.f % o.groups != 0) {
    return InvalidArgument("conv2d: groups ", o.groups, " must be at least 1 and divide both the ",
                           g.c, " input channels and the ", g.f, " filters");
  }
  g.cg = g.c / o.groups;
  g.fg = g.f / o.groups;
  if (wc != g.cg) {
    return InvalidArgument("conv2d: W has ", wc, " input channels per filter; X has ", g.c,
                           " channels in ", o.groups, " group(s), so W needs ", g.cg);
  }
  KILN_ASSIGN_OR_RETURN(g.oh,
                        OutExtent("conv2d", "H", g.h, g.kh, o.stride_h, o.pad_h, o.dilation_h));
  KILN_ASSIGN_OR_RETURN(g.ow,
                        OutExtent("conv2d", "W", g.w, g.kw, o.stride_w, o.pad_w, o.dilation_w));
  g.out = o.nhwc ? Shape{g.n, g.oh, g.ow, g.f} : Shape{g.n, g.f, g.oh, g.ow};
  KILN_RETURN_IF_ERROR(internal::CheckTensor({g.out, x.dtype}, target, "output Y of conv2d"));
  if (o.bias) {
    KILN_RETURN_IF_ERROR(internal::CheckTensor(*o.bias, target, "bias of conv2d"));
    if (o.bias->shape != Shape{g.f} || o.bias->dtype != x.dtype) {
      return InvalidArgument("bias of conv2d is ", o.bias->dtype.ToString(),
                             ShapeToString(o.bias->shape), "; it must be ", x.dtype.ToString(), "[",
                             g.f, "] (one per filter)");
    }
  }
  KILN_RETURN_IF_ERROR(internal::CheckActivation(o.activation, "conv2d"));
  if (g.kh * g.kw * g.cg > std::numeric_limits<int32_t>::max()) {
    return InvalidArgument("conv2d: the reduction has more than 2^31 - 1 terms");
  }
  return g;
}

Expr ToF32(const Expr& v) {
  return v.dtype().is_float() && v.dtype().bits == 32
             ? v
             : ir::Cast(ir::kF32.with_lanes(v.dtype().lanes), v);
}

// The input row/column a window tap reads, and whether it is inside.
struct Tap {
  Expr ih, iw, inside;
};
Tap TapAt(const Geometry& g, const Conv2dOptions& o, const Expr& oh, const Expr& ow, const Expr& kh,
          const Expr& kw) {
  Expr ih = oh * I(o.stride_h) + kh * I(o.dilation_h) - I(o.pad_h);
  Expr iw = ow * I(o.stride_w) + kw * I(o.dilation_w) - I(o.pad_w);
  Expr inside = ih >= 0 && ih < I(g.h) && iw >= 0 && iw < I(g.w);
  return {ih, iw, inside};
}
Expr Clamp(const Expr& v, int64_t hi) {
  return ir::Max(ir::Min(v, I(hi - 1)), 0);
}

// An output element's (image, channel, row, column) from its index vars,
// and the input element of a window tap, in either layout.
struct Pixel {
  Expr n, c, oh, ow;
};
Pixel PixelOf(const std::vector<ir::Var>& i, bool nhwc) {
  return nhwc ? Pixel{i[0], i[3], i[1], i[2]} : Pixel{i[0], i[1], i[2], i[3]};
}
Expr ReadTap(const te::Tensor& X, const Geometry& g, bool nhwc, const Expr& n, const Expr& ch,
             const Tap& t) {
  return nhwc ? X(n, Clamp(t.ih, g.h), Clamp(t.iw, g.w), ch)
              : X(n, ch, Clamp(t.ih, g.h), Clamp(t.iw, g.w));
}

// The implicit GEMM as tensor expressions (gemm.h), its C the output
// tensor's elements in the GEMM's order. NHWC: per group, M = N*OH*OW
// output pixels, N = the group's filters, K = KH*KW*C/groups (kh, kw, c
// with c fastest), so A is a gather from X (four consecutive k one vector
// of X where C/groups % 4 == 0) and B is W read as [K, F]; C is [groups,
// pixels, filters]. NCHW: per (image, group), M = the group's filters, N =
// OH*OW, K = C/groups*KH*KW (c, kh, kw with kw fastest), so A is W read as
// [F, K] and B a gather from X; C is [images, groups, filters, pixels].
StatusOr<ir::Function> ConvGemm(const TensorType& x, const TensorType& w, const Geometry& g,
                                const Conv2dOptions& o, const Target& target,
                                const std::string& name) {
  internal::TeGemmSpec spec;
  spec.name = name;
  spec.out_dtype = x.dtype;
  const int64_t pixels = g.oh * g.ow;
  if (o.nhwc) {
    spec.batch = {g.groups};
    spec.m = g.n * pixels;
    spec.n = g.fg;
  } else {
    spec.batch = {g.n, g.groups};
    spec.m = g.fg;
    spec.n = pixels;
  }
  spec.k = g.kh * g.kw * g.cg;
  const te::Tensor X = te::Placeholder("X", internal::Extents(x.shape), x.dtype);
  const te::Tensor W = te::Placeholder("W", internal::Extents(w.shape), x.dtype);
  spec.inputs = {X, W};
  te::Tensor bias;
  if (o.bias) {
    bias = te::Placeholder("bias", {I32(g.f)}, x.dtype);
    spec.inputs.push_back(bias);
  }
  // k -> (kh, kw, c) for NHWC (c fastest), (c, kh, kw) for NCHW (kw fastest).
  struct KIndex {
    Expr kh, kw, c;
  };
  auto split_k = [&](const Expr& kk) {
    if (o.nhwc) return KIndex{kk / I(g.kw * g.cg), (kk / I(g.cg)) % I(g.kw), kk % I(g.cg)};
    return KIndex{(kk / I(g.kw)) % I(g.kh), kk % I(g.kw), kk / I(g.kh * g.kw)};
  };
  const Expr zero = ir::FloatConst(ir::kF32, 0.0);
  // The input element that output pixel `p` (of image `image`, or of the
  // fused N*OH*OW where image is unset) reads at k, in group `group`.
  auto tap = [&, zero](Expr image, const Expr& p, const Expr& kk, const Expr& group) {
    const bool fused = !image.defined();
    if (fused) image = p / I(pixels);
    const Expr q = fused ? p % I(pixels) : p;
    const KIndex ki = split_k(kk);
    const Tap t = TapAt(g, o, q / I(g.ow), q % I(g.ow), ki.kh, ki.kw);
    return ir::Select(t.inside, ToF32(ReadTap(X, g, o.nhwc, image, group * I(g.cg) + ki.c, t)),
                      zero);
  };
  if (o.nhwc) {
    spec.a = [=](const std::vector<te::Var>& coords, const te::Var& kk, const te::Var& p) {
      return tap(Expr(), p, kk, coords[0]);
    };
    spec.b = [=, &g](const std::vector<te::Var>& coords, const te::Var& kk, const te::Var& j) {
      const KIndex ki = split_k(kk);
      return ToF32(W(ki.kh, ki.kw, ki.c, coords[0] * I(g.fg) + j));
    };
    spec.a_k_contiguous = true;
    spec.a_vectors = g.cg % 4 == 0;
    spec.b_k_contiguous = false;
    spec.out_index = [&g, pixels](const std::vector<Expr>& coords, const Expr& p, const Expr& j) {
      const Expr q = p % I(pixels);
      return std::vector<Expr>{p / I(pixels), q / I(g.ow), q % I(g.ow), coords[0] * I(g.fg) + j};
    };
  } else {
    spec.a = [=, &g](const std::vector<te::Var>& coords, const te::Var& kk, const te::Var& i) {
      const KIndex ki = split_k(kk);
      return ToF32(W(coords[1] * I(g.fg) + i, ki.c, ki.kh, ki.kw));
    };
    spec.b = [=](const std::vector<te::Var>& coords, const te::Var& kk, const te::Var& p) {
      return tap(coords[0], p, kk, coords[1]);
    };
    // Neither operand is contiguous along its tile's axes (kw, then ow
    // with the window's offset): scalar copies.
    spec.a_k_contiguous = true;
    spec.b_k_contiguous = false;
    spec.a_vectors = spec.b_vectors = false;
    spec.out_index = [&g](const std::vector<Expr>& coords, const Expr& i, const Expr& p) {
      return std::vector<Expr>{coords[0], coords[1] * I(g.fg) + i, p / I(g.ow), p % I(g.ow)};
    };
    // Four pixels from a multiple of 4 share an output row where OW % 4 == 0.
    spec.out_vectors = g.ow % 4 == 0;
  }
  spec.out_name = "Y";
  spec.out_shape = g.out;
  if (o.bias || !o.activation.empty()) {
    spec.epilogue = [&, bias](Expr v, const std::vector<te::Var>& coords, const te::Var& i,
                              const te::Var& j) {
      if (o.bias) {
        // The filter: the column (NHWC) or the row (NCHW) within the group.
        v = v + ToF32(o.nhwc ? bias(coords[0] * I(g.fg) + j) : bias(coords[1] * I(g.fg) + i));
      }
      if (!o.activation.empty()) v = internal::ApplyUnary(o.activation, v);
      return v;
    };
  }
  KILN_ASSIGN_OR_RETURN(MatmulSchedule s,
                        DefaultMatmulSchedule(o.nhwc ? g.groups : g.n * g.groups, spec.m, spec.n,
                                              target, GemmKind::kConv));
  return internal::BuildTeGemm(spec, s, target);
}

// The direct form: one thread per output element, the window and the
// group's channels reduced serially (depthwise and other thin groups).
StatusOr<ir::Function> ConvDirect(const TensorType& x, const TensorType& w, const Geometry& g,
                                  const Conv2dOptions& o, const Target& target,
                                  const std::string& name) {
  te::Tensor X = te::Placeholder("X", internal::Extents(x.shape), x.dtype);
  te::Tensor W = te::Placeholder("W", internal::Extents(w.shape), x.dtype);
  std::vector<te::Tensor> inputs = {X, W};
  te::Tensor bias;
  if (o.bias) {
    bias = te::Placeholder("bias", {I32(g.f)}, x.dtype);
    inputs.push_back(bias);
  }
  te::IterVar rkh = te::ReduceAxis(I32(g.kh), "kh");
  te::IterVar rkw = te::ReduceAxis(I32(g.kw), "kw");
  te::IterVar rc = te::ReduceAxis(I32(g.cg), "c");
  te::Tensor Y = te::Compute("Y", internal::Extents(g.out), [&](const std::vector<ir::Var>& i) {
    const Pixel px = PixelOf(i, o.nhwc);
    const Expr& f = px.c;
    Expr ch = (f / I(g.fg)) * I(g.cg) + rc;
    Tap t = TapAt(g, o, px.oh, px.ow, rkh, rkw);
    Expr xv = ReadTap(X, g, o.nhwc, px.n, ch, t);
    Expr wv = o.nhwc ? W(rkh, rkw, rc, f) : W(f, rc, rkh, rkw);
    // A tap on the padding reads 0 and still multiplies its weight, as the
    // implicit GEMM's (and numpy's padded input) do: an inf or NaN weight
    // makes NaN there too.
    Expr term = ir::Select(t.inside, ToF32(xv), ir::FloatConst(ir::kF32, 0.0)) * ToF32(wv);
    Expr v = te::Sum(term, {rkh, rkw, rc});
    if (o.bias) v = v + ToF32(bias(f));
    if (!o.activation.empty()) v = internal::ApplyUnary(o.activation, v);
    return x.dtype == ir::kF32 ? v : ir::Cast(x.dtype, v);
  });
  KILN_ASSIGN_OR_RETURN(te::Schedule s, te::Schedule::Create({Y}));
  KILN_RETURN_IF_ERROR(internal::ScheduleFlat(s, Y, 4, NumElements(g.out), target));
  return te::Lower(s, {Y}, inputs, name, target.limits);
}

}  // namespace

StatusOr<ir::Function> Conv2d(const TensorType& x, const TensorType& w, const Target& target,
                              const Conv2dOptions& options, std::string name) {
  KILN_ASSIGN_OR_RETURN(Geometry g, CheckConv(x, w, target, options));
  if (name.empty()) name = "conv2d";
  const uint32_t buffers = 3 + (options.bias ? 1 : 0);
  if (buffers > target.limits.max_storage_buffers_per_stage) {
    return InvalidArgument("conv2d needs ", buffers, " storage buffers; the target allows ",
                           target.limits.max_storage_buffers_per_stage, " per stage");
  }
  // A GEMM needs enough filters per group and reduction terms to fill its
  // tiles; thinner convolutions (depthwise) run directly.
  if (ConvUsesGemm(x, w, options)) {
    StatusOr<ir::Function> gemm = ConvGemm(x, w, g, options, target, name);
    // The arguments are checked: a GEMM refused here is one whose tiles the
    // target's limits (below WebGPU's minimums) do not hold, and the direct
    // form runs there instead.
    if (gemm.ok() || gemm.status().code() != StatusCode::kInvalidArgument) return gemm;
  }
  return ConvDirect(x, w, g, options, target, name);
}

bool ConvUsesGemm(const TensorType& x, const TensorType& w, const Conv2dOptions& options) {
  if (x.shape.size() != 4 || w.shape.size() != 4 || options.groups < 1) return false;
  const int64_t f = options.nhwc ? w.shape[3] : w.shape[0];
  const int64_t cg = options.nhwc ? w.shape[2] : w.shape[1];
  const int64_t taps = options.nhwc ? w.shape[0] * w.shape[1] : w.shape[2] * w.shape[3];
  return f / options.groups >= 16 && taps * cg >= 16;
}

StatusOr<ir::Function> Pool2d(std::string_view op, const TensorType& x, const Target& target,
                              const Pool2dOptions& options, std::string name) {
  if (op != "max" && op != "avg") {
    return InvalidArgument("unknown pooling op '", op, "'; known: max, avg");
  }
  const std::string what = StrCat(op, "_pool2d");
  if (x.shape.size() != 4) {
    return InvalidArgument("input X of ", what, " has shape ", ShapeToString(x.shape),
                           "; it must be ", options.nhwc ? "NHWC" : "NCHW", " (rank 4)");
  }
  KILN_RETURN_IF_ERROR(internal::CheckTensor(x, target, StrCat("input X of ", what)));
  if (options.kernel_h < 1 || options.kernel_w < 1) {
    return InvalidArgument(what, ": the window must be at least 1 x 1, got ", options.kernel_h,
                           " x ", options.kernel_w);
  }
  if (options.kernel_h > int64_t{1} << 30 || options.kernel_w > int64_t{1} << 30) {
    return InvalidArgument(what, ": the window must be at most 2^30 x 2^30, got ", options.kernel_h,
                           " x ", options.kernel_w);
  }
  Conv2dOptions window;
  window.nhwc = options.nhwc;
  window.stride_h = options.stride_h > 0 ? options.stride_h : options.kernel_h;
  window.stride_w = options.stride_w > 0 ? options.stride_w : options.kernel_w;
  window.pad_h = options.pad_h;
  window.pad_w = options.pad_w;
  if (options.stride_h < 0 || options.stride_w < 0) {
    return InvalidArgument(what, ": strides must be at least 1 (0: the window), got ",
                           options.stride_h, " x ", options.stride_w);
  }
  KILN_RETURN_IF_ERROR(CheckWindow(what, window, /*dilated=*/false));
  if (options.pad_h * 2 >= options.kernel_h + 1 || options.pad_w * 2 >= options.kernel_w + 1) {
    return InvalidArgument(what, ": padding ", options.pad_h, " x ", options.pad_w,
                           " must be at most half the window (", options.kernel_h, " x ",
                           options.kernel_w, "), so every window holds an input element");
  }
  Geometry g;
  g.n = x.shape[0];
  g.c = options.nhwc ? x.shape[3] : x.shape[1];
  g.h = options.nhwc ? x.shape[1] : x.shape[2];
  g.w = options.nhwc ? x.shape[2] : x.shape[3];
  g.kh = options.kernel_h;
  g.kw = options.kernel_w;
  KILN_ASSIGN_OR_RETURN(g.oh, OutExtent(what, "H", g.h, g.kh, window.stride_h, window.pad_h, 1));
  KILN_ASSIGN_OR_RETURN(g.ow, OutExtent(what, "W", g.w, g.kw, window.stride_w, window.pad_w, 1));
  g.out = options.nhwc ? Shape{g.n, g.oh, g.ow, g.c} : Shape{g.n, g.c, g.oh, g.ow};
  if (name.empty()) name = what;
  const bool is_max = op == "max";
  te::Tensor X = te::Placeholder("X", internal::Extents(x.shape), x.dtype);
  te::IterVar rkh = te::ReduceAxis(I32(g.kh), "kh");
  te::IterVar rkw = te::ReduceAxis(I32(g.kw), "kw");
  te::Tensor Y = te::Compute("Y", internal::Extents(g.out), [&](const std::vector<ir::Var>& i) {
    const Pixel px = PixelOf(i, options.nhwc);
    const Expr &oh = px.oh, &ow = px.ow;
    Tap t = TapAt(g, window, oh, ow, rkh, rkw);
    Expr xv = ToF32(ReadTap(X, g, options.nhwc, px.n, px.c, t));
    Expr v;
    if (is_max) {
      v = te::Max(ir::Select(t.inside, xv, ir::FloatConst(ir::kF32, -INFINITY)), {rkh, rkw});
    } else {
      // The mean over the window's elements inside the input (padding not counted).
      Expr sum = te::Sum(ir::Select(t.inside, xv, ir::FloatConst(ir::kF32, 0.0)), {rkh, rkw});
      Expr h0 = oh * I(window.stride_h) - I(window.pad_h);
      Expr w0 = ow * I(window.stride_w) - I(window.pad_w);
      Expr rows = ir::Min(h0 + I(g.kh), I(g.h)) - ir::Max(h0, 0);
      Expr cols = ir::Min(w0 + I(g.kw), I(g.w)) - ir::Max(w0, 0);
      v = sum / ir::Cast(ir::kF32, rows * cols);
    }
    return x.dtype == ir::kF32 ? v : ir::Cast(x.dtype, v);
  });
  KILN_ASSIGN_OR_RETURN(te::Schedule s, te::Schedule::Create({Y}));
  KILN_RETURN_IF_ERROR(internal::ScheduleFlat(s, Y, 4, NumElements(g.out), target));
  return te::Lower(s, {Y}, {X}, name, target.limits);
}

}  // namespace kiln::ops
