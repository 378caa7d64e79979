// Matmul and MatmulInt8: shapes, the schedule rule, and the GEMM's tensor
// expressions (gemm.h) reading plain tensors.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kiln/ir/expr_ops.h"
#include "kiln/ops/gemm.h"
#include "kiln/ops/internal.h"
#include "kiln/ops/ops.h"

namespace kiln::ops {
namespace {

using internal::kEnoughWorkgroups;
using ir::Expr;

int64_t CeilDiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// The checked shapes of one matmul.
struct Shapes {
  Shape batch;  // the output's batch dimensions
  int64_t batch_count = 1;
  int64_t m = 0, n = 0, k = 0;
  Shape out;
};

// The shapes of `op` on A and B (already checked as tensors, dtypes aside):
// ranks, the contraction dimension (`k_unit` names what it counts), batch
// dimensions that broadcast, and the output's size.
StatusOr<Shapes> ContractionShapes(std::string_view op, const Shape& a, const Shape& b,
                                   bool transpose_a, bool transpose_b, std::string_view k_unit) {
  if (a.size() < 2) {
    return InvalidArgument("input A of ", op, " has shape ", ShapeToString(a), "; ", op,
                           " needs rank 2 to 4");
  }
  if (b.size() < 2) {
    return InvalidArgument("input B of ", op, " has shape ", ShapeToString(b), "; ", op,
                           " needs rank 2 to 4");
  }
  const size_t ra = a.size(), rb = b.size();
  Shapes s;
  s.m = transpose_a ? a[ra - 1] : a[ra - 2];
  const int64_t ka = transpose_a ? a[ra - 2] : a[ra - 1];
  const int64_t kb = transpose_b ? b[rb - 1] : b[rb - 2];
  s.n = transpose_b ? b[rb - 2] : b[rb - 1];
  if (ka != kb) {
    return InvalidArgument(op, ": A", transpose_a ? " (transposed)" : "", " is ", ShapeToString(a),
                           " and B", transpose_b ? " (transposed)" : "", " is ", ShapeToString(b),
                           ": the contraction dimension differs (", ka, " against ", kb, k_unit,
                           ")");
  }
  s.k = ka;
  StatusOr<Shape> batch =
      BroadcastShapes(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2));
  if (!batch.ok()) return batch.status().WithContext(StrCat(op, ": batch dimensions"));
  s.batch = *batch;
  s.batch_count = NumElements(s.batch);
  s.out = s.batch;
  s.out.push_back(s.m);
  s.out.push_back(s.n);
  // The output's size, as any tensor's (its dtype is checked by the caller).
  KILN_RETURN_IF_ERROR(
      internal::CheckTensor({s.out, ir::kF32}, Target{}, StrCat("output C of ", op)));
  return s;
}

StatusOr<Shapes> CheckShapes(const TensorType& a, const TensorType& b, const Target& target,
                             const MatmulOptions& o) {
  KILN_RETURN_IF_ERROR(internal::CheckTensor(a, target, "input A of matmul"));
  KILN_RETURN_IF_ERROR(internal::CheckTensor(b, target, "input B of matmul"));
  KILN_ASSIGN_OR_RETURN(
      Shapes s, ContractionShapes("matmul", a.shape, b.shape, o.transpose_a, o.transpose_b, ""));
  if (a.dtype != b.dtype) {
    return InvalidArgument("matmul: dtype mismatch: A is ", a.dtype.ToString(), " but B is ",
                           b.dtype.ToString());
  }
  if (o.bias) {
    KILN_RETURN_IF_ERROR(internal::CheckTensor(*o.bias, target, "bias of matmul"));
    if (o.bias->shape != Shape{s.n}) {
      return InvalidArgument("bias of matmul has shape ", ShapeToString(o.bias->shape),
                             "; it must be [N] = [", s.n, "]");
    }
    if (o.bias->dtype != a.dtype) {
      return InvalidArgument("matmul: bias is ", o.bias->dtype.ToString(), " but A is ",
                             a.dtype.ToString());
    }
  }
  if (o.residual) {
    KILN_RETURN_IF_ERROR(internal::CheckTensor(*o.residual, target, "residual of matmul"));
    if (o.residual->shape != s.out) {
      return InvalidArgument("residual of matmul has shape ", ShapeToString(o.residual->shape),
                             "; it must be the output's shape ", ShapeToString(s.out));
    }
    if (o.residual->dtype != a.dtype) {
      return InvalidArgument("matmul: residual is ", o.residual->dtype.ToString(), " but A is ",
                             a.dtype.ToString());
    }
  }
  KILN_RETURN_IF_ERROR(internal::CheckActivation(o.activation, "matmul"));
  if (o.accumulate != ir::kF32 && o.accumulate != ir::kF16) {
    return InvalidArgument("matmul: accumulate is ", o.accumulate.ToString(),
                           "; it must be f32 or f16");
  }
  if (o.accumulate == ir::kF16 && a.dtype != ir::kF16) {
    return InvalidArgument("matmul: f16 accumulation needs f16 inputs; A and B are ",
                           a.dtype.ToString());
  }
  const uint32_t buffers = 3 + (o.bias ? 1 : 0) + (o.residual ? 1 : 0);
  if (buffers > target.limits.max_storage_buffers_per_stage) {
    return InvalidArgument("matmul needs ", buffers, " storage buffers; the target allows ",
                           target.limits.max_storage_buffers_per_stage, " per stage");
  }
  return s;
}

// The indices of an operand of shape `shape` whose batch dimensions
// broadcast to the output's `coords` (aligned on the right, a 1 read at 0),
// followed by `last`.
std::vector<Expr> OperandIndex(const Shape& shape, const std::vector<Expr>& coords,
                               std::vector<Expr> last) {
  const size_t batch_rank = shape.size() - 2;
  std::vector<Expr> index;
  for (size_t d = 0; d < batch_rank; ++d) {
    const size_t out_d = coords.size() - batch_rank + d;
    index.push_back(shape[d] == 1 ? ir::IntConst(ir::kI32, 0) : coords[out_d]);
  }
  index.insert(index.end(), last.begin(), last.end());
  return index;
}

// An operand of MatmulInt8: int8x4, rank 2 to 4 (checked with the shapes).
Status CheckInt8Operand(const TensorType& t, std::string_view what, std::string_view layout) {
  if (t.dtype != ir::kInt8x4) {
    return InvalidArgument(what, " has dtype ", t.dtype.ToString(), "; it must be int8x4 (", layout,
                           ", K packed four i8 to a word",
                           t.dtype == ir::kI8 ? ": pack i8 data first" : "", ")");
  }
  return internal::CheckTensor({t.shape, ir::kF32}, Target{}, what);
}

// The caller's schedule, or the default rule's for the shapes.
StatusOr<MatmulSchedule> ScheduleFor(const std::optional<MatmulSchedule>& schedule,
                                     const Shapes& sh, const Target& target, GemmKind kind) {
  if (schedule) return *schedule;
  return DefaultMatmulSchedule(sh.batch_count, sh.m, sh.n, target, kind);
}

}  // namespace

int64_t MatmulSchedule::SharedBytes() const {
  return (double_buffer ? 2 : 1) * int64_t{k_tile} * (block_m() + block_n()) * 4;
}

std::string MatmulSchedule::ToString() const {
  return StrCat(block_m(), "x", block_n(), " tile, k ", k_tile,
                double_buffer ? ", double-buffered" : ", single-buffered",
                unroll_k ? ", unrolled" : "",
                threads_y != 16 ? StrCat(", ", threads_y, " x 16 threads") : "");
}

Status CheckMatmulSchedule(const MatmulSchedule& schedule, const Target& target,
                           std::string_view what) {
  return internal::CheckGemmSchedule(schedule, target, what);
}

StatusOr<MatmulSchedule> DefaultMatmulSchedule(int64_t batch, int64_t m, int64_t n,
                                               const Target& target, GemmKind kind) {
  MatmulSchedule s;
  // Workgroups of 16 x 16 threads where the target runs them, else 8 x 16
  // (tiles of half the rows).
  const TargetLimits& limits = target.limits;
  const int threads_y =
      limits.max_invocations_per_workgroup >= 256 && limits.max_workgroup_size_y >= 16 ? 16 : 8;
  auto workgroups = [&](int rows, int cols) {
    return batch * CeilDiv(m, 4 * threads_y * rows) * CeilDiv(n, 64 * cols);
  };
  // The 128x128 tile only where it makes several waves of workgroups (a
  // GPU's size is not visible through WebGPU): the batched matmul of
  // attention shapes made 384 of them, and ran 13.9 TFLOP/s on the H200
  // against 16.3 with 768 of 128x64 (BENCHMARKS.md).
  if (workgroups(2, 2) >= 4 * kEnoughWorkgroups) {
    s.rows = s.cols = 2;
  } else if (workgroups(2, 1) >= kEnoughWorkgroups || workgroups(1, 2) >= kEnoughWorkgroups) {
    // The longer side keeps the larger tile.
    s.rows = m >= n ? 2 : 1;
    s.cols = m >= n ? 1 : 2;
  } else {
    s.rows = s.cols = 1;
  }
  // A side the problem fills at most half of keeps the smaller tile: the
  // larger one's other half would compute nothing but guarded waste (the
  // attention's P @ V, N = 64, ran its 128-column tiles half empty).
  if (n <= 64) s.cols = 1;
  if (m <= 4 * threads_y) s.rows = 1;
  const uint32_t storage = target.limits.max_workgroup_storage_bytes;
  const bool unroll = workgroups(s.rows, s.cols) >= kEnoughWorkgroups;
  // The f32 matmul's tiles through registers, as each implementation's
  // shader compiler runs it faster (H200, 4096^3, BENCHMARKS.md): wgpu-native
  // 46.2 TFLOP/s under a branch against 42.0 copied directly (40.9
  // branch-free); Dawn 41.6 branch-free against 41.3 (40.4 under a branch),
  // 42.7 against 41.6 in its trusted mode. The f16 matmul and the
  // convolution ran slower through registers on wgpu-native (34.9 against
  // 42.2, 37.0 against 38.6). Dawn's shader compiler does not contract the
  // sums of products into fused multiply-adds by itself: written as fma, its
  // branch-free f32 matmul ran 44.4 against 41.6 (45.0 against 42.7
  // trusted). Through Dawn, what the copies do at the last k-step matters
  // as much, and differently in each mode (4096^3 / the batched matmul):
  // the loads again with the stores under a branch 44.3 / 22.4 (trusted
  // 44.9 / 22.8), loads and stores under no branch 43.3 / 22.7 (trusted
  // 47.3 / 23.0), the last k-step peeled 47.1 / 21.8 (trusted 46.2 / 22.1).
  const bool wgpu = target.implementation == "wgpu", dawn = target.implementation == "dawn";
  const bool registers = kind == GemmKind::kF32 && (wgpu || dawn);
  const te::LastCopy last = !registers || !dawn ? te::LastCopy::kSkipped
                            : !target.trusted && s.rows == 2 && s.cols == 2
                                ? te::LastCopy::kPeeled
                                : te::LastCopy::kStoresAgain;
  const bool fma = registers && dawn;
  // Single-buffered tiles first: on the H200 (Dawn/Vulkan) the double-buffered
  // kernel ran at 25.7 TFLOP/s against 36.2 for the single-buffered one
  // (BENCHMARKS.md).
  for (MatmulSchedule candidate :
       {MatmulSchedule{s.rows, s.cols, 16, false, unroll, registers, last, fma},
        MatmulSchedule{s.rows, s.cols, 8, false, unroll, registers, last, fma},
        MatmulSchedule{1, 1, 16, false, unroll, registers, last, fma}}) {
    if ((candidate.rows * candidate.k_tile) % 16 != 0 ||
        (candidate.cols * candidate.k_tile) % 16 != 0) {
      continue;
    }
    candidate.threads_y = threads_y;
    if (candidate.SharedBytes() <= storage) return candidate;
  }
  return InvalidArgument(
      kind == GemmKind::kInt8 ? "matmul_int8" : "matmul", ": the target's workgroup storage (",
      storage, " bytes) holds no matmul tile (the smallest takes ",
      [&] {
        MatmulSchedule smallest{1, 1, 16, false, false};
        smallest.threads_y = threads_y;
        return smallest.SharedBytes();
      }(),
      ")");
}

StatusOr<ir::Function> Matmul(const TensorType& a, const TensorType& b, const Target& target,
                              const MatmulOptions& options, std::string name,
                              std::optional<MatmulSchedule> schedule) {
  KILN_ASSIGN_OR_RETURN(Shapes sh, CheckShapes(a, b, target, options));
  KILN_ASSIGN_OR_RETURN(
      MatmulSchedule s,
      ScheduleFor(schedule, sh, target, a.dtype == ir::kF16 ? GemmKind::kF16 : GemmKind::kF32));
  internal::TeGemmSpec spec;
  spec.name = name.empty() ? "matmul" : std::move(name);
  spec.out_dtype = a.dtype;
  spec.batch = sh.batch;
  spec.m = sh.m;
  spec.n = sh.n;
  spec.k = sh.k;
  const te::Tensor A = te::Placeholder("A", internal::Extents(a.shape), a.dtype);
  const te::Tensor B = te::Placeholder("B", internal::Extents(b.shape), a.dtype);
  spec.inputs = {A, B};
  te::Tensor bias, residual;
  if (options.bias) {
    bias = te::Placeholder("bias", internal::Extents(options.bias->shape), a.dtype);
    spec.inputs.push_back(bias);
  }
  if (options.residual) {
    residual = te::Placeholder("residual", internal::Extents(options.residual->shape), a.dtype);
    spec.inputs.push_back(residual);
  }
  const bool f16_sums = options.accumulate == ir::kF16;
  if (f16_sums) spec.math = internal::GemmMath::kF16;
  const ir::DataType word = f16_sums ? ir::kF16 : ir::kF32;
  auto as_word = [word](const ir::Expr& v) { return v.dtype() == word ? v : ir::Cast(word, v); };
  spec.a = [&, A](const std::vector<te::Var>& coords, const te::Var& k, const te::Var& i) {
    const std::vector<ir::Expr> at =
        options.transpose_a ? std::vector<ir::Expr>{k, i} : std::vector<ir::Expr>{i, k};
    return as_word(A(OperandIndex(a.shape, {coords.begin(), coords.end()}, at)));
  };
  spec.b = [&, B](const std::vector<te::Var>& coords, const te::Var& k, const te::Var& j) {
    const std::vector<ir::Expr> at =
        options.transpose_b ? std::vector<ir::Expr>{j, k} : std::vector<ir::Expr>{k, j};
    return as_word(B(OperandIndex(b.shape, {coords.begin(), coords.end()}, at)));
  };
  spec.a_k_contiguous = !options.transpose_a;
  spec.b_k_contiguous = options.transpose_b;
  if (options.bias || options.residual || !options.activation.empty()) {
    spec.epilogue = [&](ir::Expr v, const std::vector<te::Var>& coords, const te::Var& i,
                        const te::Var& j) {
      auto as_f32 = [](const ir::Expr& x) {
        return x.dtype() == ir::kF32 ? x : ir::Cast(ir::kF32, x);
      };
      if (options.bias) v = v + as_f32(bias(j));
      if (!options.activation.empty()) v = internal::ApplyUnary(options.activation, v);
      if (options.residual) {
        std::vector<ir::Expr> at(coords.begin(), coords.end());
        at.push_back(i);
        at.push_back(j);
        v = v + as_f32(residual(at));
      }
      return v;
    };
  }
  return internal::BuildTeGemm(spec, s, target);
}

StatusOr<ir::Function> MatmulInt8(const TensorType& a, const TensorType& b, const Target& target,
                                  std::string name, std::optional<MatmulSchedule> schedule) {
  KILN_RETURN_IF_ERROR(CheckInt8Operand(a, "input A of matmul_int8", "[..., M, K/4]"));
  KILN_RETURN_IF_ERROR(CheckInt8Operand(b, "input B of matmul_int8", "[..., N, K/4]"));
  KILN_ASSIGN_OR_RETURN(
      Shapes sh, ContractionShapes("matmul_int8", a.shape, b.shape, false, true, " int8x4 words"));
  KILN_ASSIGN_OR_RETURN(MatmulSchedule s, ScheduleFor(schedule, sh, target, GemmKind::kInt8));
  internal::TeGemmSpec spec;
  spec.name = name.empty() ? "matmul_int8" : std::move(name);
  spec.math = internal::GemmMath::kDot4I8;
  spec.out_dtype = ir::kI32;
  spec.batch = sh.batch;
  spec.m = sh.m;
  spec.n = sh.n;
  spec.k = sh.k;  // in words
  const te::Tensor A = te::Placeholder("A", internal::Extents(a.shape), ir::kInt8x4);
  const te::Tensor B = te::Placeholder("B", internal::Extents(b.shape), ir::kInt8x4);
  spec.inputs = {A, B};
  // Packed words one at a time: vectors of int8x4 have no WGSL type.
  spec.a = [&, A](const std::vector<te::Var>& coords, const te::Var& k, const te::Var& i) {
    return ir::Reinterpret(ir::kU32,
                           A(OperandIndex(a.shape, {coords.begin(), coords.end()}, {i, k})));
  };
  spec.b = [&, B](const std::vector<te::Var>& coords, const te::Var& k, const te::Var& j) {
    return ir::Reinterpret(ir::kU32,
                           B(OperandIndex(b.shape, {coords.begin(), coords.end()}, {j, k})));
  };
  spec.a_k_contiguous = spec.b_k_contiguous = true;
  spec.a_vectors = spec.b_vectors = false;
  return internal::BuildTeGemm(spec, s, target);
}

}  // namespace kiln::ops
