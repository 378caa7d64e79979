// The operator library: each operator is a tensor-expression definition
// plus a default schedule chosen from the target's limits and the shapes,
// lowered to a verified ir::Function (or, for softmax, a short sequence of
// them). Shapes are constants; every argument is checked, and a wrong
// shape, dtype, op name or attribute is an error before anything is built.
//
//   ops::Target target{runtime::TargetLimitsOf(device)};
//   auto add = ops::Elementwise("add", {{{7, 1}}, {{1, 33}}}, target);  // C[7, 33]
//   auto chain = ops::ElementwiseChain({{1000}}, {ops::ChainStep::With("add", {{1000}}),
//                                                 ops::ChainStep::Unary("relu")}, target);
//   auto sum = ops::Reduce("sum", {{33, 1000}}, /*keepdims=*/false, target);
//   auto softmax = ops::Softmax({{33, 1000}}, target);  // three kernels, run in order
//
// docs/ops.md describes every operator, its schedule and its limits.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ir/function.h"
#include "kiln/ir/types.h"
#include "kiln/support/status.h"
#include "kiln/support/target_limits.h"

namespace kiln::ops {

using Shape = std::vector<int64_t>;

// A tensor argument: a constant shape (rank 1 to 4, every dimension at least
// 1, at most 2^31 - 1 elements) and an element type (f32, or f16 where the
// target has shader-f16).
struct TensorType {
  Shape shape;
  ir::DataType dtype = ir::kF32;
};

// What kernels are built for: the device's limits (runtime::TargetLimitsOf)
// and whether it has shader-f16.
struct Target {
  TargetLimits limits;
  bool shader_f16 = false;
};

// "[7, 1]".
std::string ShapeToString(const Shape& shape);
int64_t NumElements(const Shape& shape);

// numpy broadcasting of two shapes: aligned on the right, each pair of
// dimensions equal or one of them 1; the result takes the larger. An
// incompatible pair is an error naming both shapes.
StatusOr<Shape> BroadcastShapes(const Shape& a, const Shape& b);

// The operator names each kind accepts, in a fixed order.
//   unary:  neg abs exp exp2 log log2 sqrt rsqrt sin cos tanh sigmoid erf
//           floor ceil round trunc relu gelu
//   binary: add sub mul div max min pow
const std::vector<std::string_view>& UnaryOpNames();
const std::vector<std::string_view>& BinaryOpNames();
//   reduce: sum mean max min prod
const std::vector<std::string_view>& ReduceOpNames();

// An elementwise operator: one input for a unary op (Y = op(X)), two for a
// binary op (C = A op B, broadcast to BroadcastShapes(A, B)); both inputs of
// one dtype, the output of that dtype. The function's parameters are X, Y
// or A, B, C; `name` defaults to "elementwise_<op>". Schedule: every output axis
// fused, split by ThreadsPerBlock and bound to blockIdx.x / threadIdx.x,
// the tail guarded.
StatusOr<ir::Function> Elementwise(std::string_view op, const std::vector<TensorType>& inputs,
                                   const Target& target, std::string name = "");

// One step of an elementwise chain, applied to the running value v: a unary
// op (v = op(v)), or a binary op with a tensor operand (broadcast with v)
// or a constant: v = v op operand, or operand op v when `operand_first`.
struct ChainStep {
  std::string op;
  std::optional<TensorType> tensor;
  std::optional<double> constant;
  bool operand_first = false;

  static ChainStep Unary(std::string op) { return ChainStep{std::move(op), {}, {}, false}; }
  static ChainStep With(std::string op, TensorType tensor, bool operand_first = false) {
    return ChainStep{std::move(op), std::move(tensor), {}, operand_first};
  }
  static ChainStep WithConstant(std::string op, double constant, bool operand_first = false) {
    return ChainStep{std::move(op), {}, constant, operand_first};
  }
};

// The steps applied in order to `input`, as one kernel: each step is a
// stage, every stage but the last inlined into the next. Parameters: X,
// then one per tensor operand (named B<step>, steps counted from 1), then
// Y, whose shape is the broadcast of X with every tensor operand. All
// tensors of one dtype; at least one step; the buffers must fit the
// target's storage buffers per stage. Schedule: as Elementwise.
StatusOr<ir::Function> ElementwiseChain(const TensorType& input,
                                        const std::vector<ChainStep>& steps, const Target& target,
                                        const std::string& name = "chain");

// A reduction over the last axis of a 2-D input X[rows, cols]: sum, mean,
// max, min or prod. Y is [rows], or [rows, 1] with keepdims; f16 inputs
// accumulate in f32. Parameters X, Y; `name` defaults to "reduce_<op>".
// Schedule: one thread per row (rows fused, split by ThreadsPerBlock, bound
// to blockIdx.x / threadIdx.x), each thread reducing its row serially.
StatusOr<ir::Function> Reduce(std::string_view op, const TensorType& input, bool keepdims,
                              const Target& target, std::string name = "");

// A tensor that one kernel of a sequence writes and later ones read.
struct IntermediateTensor {
  std::string name;  // the parameter name in the kernels that use it
  Shape shape;
  ir::DataType dtype = ir::kF32;
};

// Kernels to run in order, passing intermediate tensors by parameter name.
struct KernelSequence {
  std::vector<ir::Function> functions;
  std::vector<IntermediateTensor> intermediates;
};

// Softmax over the last axis of a 2-D f32 input X[rows, cols], numerically
// stable, as three kernels (one materialised stage each):
//   <name>_max(X, M):          M[i] = max_k X[i, k]
//   <name>_sum(X, M, S):       S[i] = sum_k exp(X[i, k] - M[i])
//   <name>_normalize(X, M, S, Y): Y[i, j] = exp(X[i, j] - M[i]) / S[i]
// M and S ([rows], f32) are the intermediates. The reductions are
// scheduled like Reduce, the last kernel like Elementwise.
StatusOr<KernelSequence> Softmax(const TensorType& input, const Target& target,
                                 const std::string& name = "softmax");

// Threads per block of the default schedules for `elements` independent
// work items: min(256, maxComputeInvocationsPerWorkgroup,
// maxComputeWorkgroupSizeX, the next power of two >= elements).
int64_t ThreadsPerBlock(int64_t elements, const TargetLimits& limits);

// ---------------------------------------------------------------------------
// Matrix multiplication

// What Matmul fuses around C = A @ B, and how its operands are laid out.
struct MatmulOptions {
  bool transpose_a = false;            // A is [..., K, M] instead of [..., M, K]
  bool transpose_b = false;            // B is [..., N, K] instead of [..., K, N]
  std::optional<TensorType> bias;      // [N], added to every row
  std::string activation;              // "" or a unary op name, applied after the bias
  std::optional<TensorType> residual;  // the output's shape, added last
};

// How one matmul kernel is tiled. A workgroup of 16 x 16 threads computes
// a (64 * rows) x (64 * cols) tile of C; each thread a (4 * rows) x
// (4 * cols) register tile made of 4 x 4 blocks spaced 64 apart, so the
// vector reads of a warp from the shared tiles are contiguous. The k
// dimension advances k_tile at a time through shared tiles of A and B,
// double-buffered (the next tile loaded into registers during the math, one
// barrier per step) or not (two barriers per step).
struct MatmulSchedule {
  int rows = 2;     // 1 or 2
  int cols = 2;     // 1 or 2
  int k_tile = 16;  // 8 or 16; rows * k_tile and cols * k_tile multiples of 16
  bool double_buffer = true;
  bool unroll_k = true;  // the k-steps of a shared tile unrolled (a larger, faster kernel)

  int64_t block_m() const { return 64 * rows; }
  int64_t block_n() const { return 64 * cols; }
  // Bytes of workgroup memory the shared tiles take.
  int64_t SharedBytes() const;
  // "128x128 tile, k 16, double-buffered".
  std::string ToString() const;
  friend bool operator==(const MatmulSchedule&, const MatmulSchedule&) = default;
};

// The default rule: the largest tile that still gives the GPU at least 128
// workgroups (128 x 128, then 128 x 64 or 64 x 128, then 64 x 64), k_tile 16
// double-buffered where the target's workgroup storage holds it, else k 8
// double-buffered, else single-buffered. The k-steps are unrolled where the
// problem fills the GPU (at least 128 workgroups); smaller problems get the
// smaller kernel, which compiles faster and whose launch is not limited by
// its inner loop.
StatusOr<MatmulSchedule> DefaultMatmulSchedule(int64_t batch, int64_t m, int64_t n,
                                               const Target& target);

// C[batch..., M, N] = epilogue(A @ B): A is [..., M, K] and B [..., K, N]
// (rank 2 to 4; their batch dimensions broadcast as numpy's matmul does),
// f32 or f16 (f16 accumulates in f32). Parameters: A, B, then bias,
// residual where given, then C; `name` defaults to "matmul". The epilogue
// is v = acc (+ bias[n]) (activation) (+ residual). `schedule` overrides
// DefaultMatmulSchedule. Any shape works: tiles that do not divide M, N or
// K are guarded (loads clamped and zeroed, stores skipped); where they all
// divide, the kernel has no guards and uses vector loads and stores.
StatusOr<ir::Function> Matmul(const TensorType& a, const TensorType& b, const Target& target,
                              const MatmulOptions& options = {}, std::string name = "",
                              std::optional<MatmulSchedule> schedule = std::nullopt);

}  // namespace kiln::ops
