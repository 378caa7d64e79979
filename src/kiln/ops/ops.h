// The operator library: each operator is a tensor-expression definition
// plus a default schedule chosen from the target's limits and the shapes,
// lowered to a verified ir::Function (or, for softmax, a short sequence of
// them). Shapes are constants; every argument is checked, and a wrong
// shape, dtype, op name or attribute is an error before anything is built.
//
//   ops::Target target{runtime::TargetLimitsOf(device),
//                      device.HasFeature(hal::Feature::kShaderF16),
//                      device.HasFeature(hal::Feature::kSubgroups),
//                      std::string(device.impl().name()), device.trusted()};
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
#include <utility>
#include <vector>

#include "kiln/ir/function.h"
#include "kiln/ir/types.h"
#include "kiln/support/status.h"
#include "kiln/support/target_limits.h"
#include "kiln/te/te.h"

namespace kiln::ops {

using Shape = std::vector<int64_t>;

// The most elements an operator's tensor holds: 2^30, a 4 GiB binding of
// f32 (no implementation here binds more). Indices are i32, and the
// schedules' splits round extents up to their factors, so a tensor of up
// to 2^31 - 1 elements could not be split safely.
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 30;

// A tensor argument: a constant shape (rank 1 to 4, every dimension at least
// 1, at most kMaxTensorElements) and an element type (f32, or f16 where the
// target has shader-f16; i32 or int8x4 words where an operator says so).
struct TensorType {
  Shape shape;
  ir::DataType dtype = ir::kF32;
};

// What kernels are built for: the device's limits (runtime::TargetLimitsOf)
// and whether it has shader-f16 and subgroups. With `subgroups`, the
// cooperative reductions combine through subgroup operations and need the
// feature (their metadata lists it); without, through a shared-memory tree.
// The subgroup size is read at run time (WGSL's subgroup_size builtin), so
// no size is part of the target.
struct Target {
  TargetLimits limits;
  bool shader_f16 = false;
  bool subgroups = false;
  // The WebGPU implementation that compiles the kernels ("dawn" or "wgpu";
  // empty: unknown): where the two shader compilers schedule the same
  // kernel differently, a rule picks the order that is faster with each
  // (docs/ops.md).
  std::string implementation;
  // Whether the device runs in trusted mode (hal::DeviceOptions::trusted),
  // which a rule may schedule differently for (docs/ops.md).
  bool trusted = false;
};

// "[7, 1]".
std::string ShapeToString(const Shape& shape);
int64_t NumElements(const Shape& shape);

// numpy broadcasting of two shapes: aligned on the right, each pair of
// dimensions equal or one of them 1; the result takes the larger. An
// incompatible pair is an error naming both shapes.
StatusOr<Shape> BroadcastShapes(const Shape& a, const Shape& b);

// The operator names each kind accepts, in a fixed order.
//   unary:   neg abs exp exp2 log log2 sqrt rsqrt sin cos tanh sigmoid erf
//            floor ceil round trunc relu gelu bitwise_not popcount sign
//            square reciprocal isnan isinf isfinite (the last three, the
//            predicates, give i32 1 where true, else 0, as comparisons do)
//   binary:  add sub mul div floor_div floor_mod max min pow bitwise_and
//            bitwise_or bitwise_xor shift_left shift_right
//   compare: eq ne lt le gt ge (an i32 result, 1 where true, else 0)
//   ternary: fma (a * b + c) clamp (numpy's clip: min(max(x, lo), hi))
const std::vector<std::string_view>& UnaryOpNames();
const std::vector<std::string_view>& BinaryOpNames();
const std::vector<std::string_view>& CompareOpNames();
const std::vector<std::string_view>& TernaryOpNames();
const std::vector<std::string_view>& PredicateOpNames();  // the unary ops giving i32 0 or 1
//   reduce:  sum mean max min prod
const std::vector<std::string_view>& ReduceOpNames();
// Whether elementwise op `op` takes tensors of `dtype`: the float math
// (exp through trunc, gelu, fma) takes f32 and f16; the bit operations
// (bitwise_*, popcount, shifts) take i32 and u32; the rest (neg abs relu
// sign square add sub mul div floor_div floor_mod max min pow, the
// comparisons, clamp) take f32, f16, i32 and u32. Integer arithmetic is the
// IR's (docs/ir.md): it wraps, div truncates toward zero and floor_div
// rounds toward -inf (floor_mod takes the divisor's sign), x / 0 = x and
// floor_mod(x, 0) = 0, shifts take their amount modulo 32, shift_right is
// arithmetic on i32 and logical on u32; pow wraps, and for a negative i32
// exponent is the truncation of 1 / x^-e (1 for x = 1, +-1 for x = -1, else
// 0, x = 0 included). On u32, neg is 0 - x (wrapping), abs is x and sign is
// 0 or 1.
bool ElementwiseOpTakes(std::string_view op, ir::DataType dtype);

// An elementwise operator: one input for a unary op (Y = op(X)), two for a
// binary op or comparison (C = A op B, broadcast to BroadcastShapes(A, B)),
// three for a ternary op (Y = fma(A, B, C) or clamp(X, Lo, Hi), all three
// broadcast); the inputs of one dtype that the op takes
// (ElementwiseOpTakes), the output of that dtype, or i32 for a comparison.
// The function's parameters are X, Y; A, B, C; A, B, C, Y (fma) or X, Lo,
// Hi, Y (clamp); `name` defaults to "elementwise_<op>". Schedule: every
// output axis fused, split by ThreadsPerBlock and bound to blockIdx.x /
// threadIdx.x, the tail guarded (vectorized where large: ScheduleFlat).
StatusOr<ir::Function> Elementwise(std::string_view op, const std::vector<TensorType>& inputs,
                                   const Target& target, std::string name = "");

// An operand of a chain step: a tensor (broadcast with the running value)
// or a constant.
struct ChainOperand {
  std::optional<TensorType> tensor;
  std::optional<double> constant;

  ChainOperand(TensorType t) : tensor(std::move(t)) {}  // NOLINT: implicit by design
  ChainOperand(double c) : constant(c) {}               // NOLINT: implicit by design
};

// One step of an elementwise chain, applied to the running value v:
//   Unary(op):               v = op(v)
//   With(op, tensor) / WithConstant(op, constant): a binary op or comparison,
//                            v = v op operand (operand op v when
//                            `operand_first`)
//   Ternary(op, a, b):       fma: v = v * a + b; clamp: v = clamp(v, a, b);
//                            where: v = (v != 0 ? a : b), v the condition
//   CastTo(dtype):           v = dtype(v), by Cast's rules
struct ChainStep {
  std::string op;
  std::optional<TensorType> tensor;  // the first operand
  std::optional<double> constant;
  bool operand_first = false;
  std::optional<TensorType> second_tensor;  // a ternary step's second operand
  std::optional<double> second_constant;
  std::optional<ir::DataType> cast_to;  // a "cast" step's type

  static ChainStep Unary(std::string op) {
    ChainStep s;
    s.op = std::move(op);
    return s;
  }
  static ChainStep With(std::string op, TensorType tensor, bool operand_first = false) {
    ChainStep s = Unary(std::move(op));
    s.tensor = std::move(tensor);
    s.operand_first = operand_first;
    return s;
  }
  static ChainStep WithConstant(std::string op, double constant, bool operand_first = false) {
    ChainStep s = Unary(std::move(op));
    s.constant = constant;
    s.operand_first = operand_first;
    return s;
  }
  static ChainStep Ternary(std::string op, ChainOperand a, ChainOperand b) {
    ChainStep s = Unary(std::move(op));
    s.tensor = std::move(a.tensor);
    s.constant = a.constant;
    s.second_tensor = std::move(b.tensor);
    s.second_constant = b.constant;
    return s;
  }
  static ChainStep CastTo(ir::DataType dtype) {
    ChainStep s = Unary("cast");
    s.cast_to = dtype;
    return s;
  }
};

// The steps applied in order to `input`, as one kernel: each step is a
// stage, every stage but the last inlined into the next. Parameters: X,
// then one per tensor operand (a step's first operand named B<step>, its
// second C<step>, steps counted from 1), then Y, whose shape is the
// broadcast of X with every tensor operand. The running value starts as X's
// dtype (f32, f16, i32 or u32); it is i32 after a comparison, the operands'
// dtype after a where (a tensor operand's, else X's: constants alone take
// X's dtype) and the cast's after a cast. Each step's op must take the running value's dtype
// and its operands must have it (a where's operands share a dtype; its
// condition may be any); constants where the operand is i32 or u32 are
// integers in its range. At least one step; the buffers must fit the target's
// storage buffers per stage. Schedule: as Elementwise.
StatusOr<ir::Function> ElementwiseChain(const TensorType& input,
                                        const std::vector<ChainStep>& steps, const Target& target,
                                        const std::string& name = "chain");

// A node of a fused elementwise expression: an input tensor, a constant, or
// an op on earlier nodes (by index). Ops: the unary, binary, comparison and
// ternary ops, "where" (args cond, a, b: cond != 0 ? a : b, a float NaN
// counting as true) and "cast" (to `dtype`, by Cast's rules).
struct FusedNode {
  enum class Kind : uint8_t { kInput, kConstant, kOp };
  Kind kind = Kind::kOp;
  int input = 0;                  // kInput: the index into the inputs
  double value = 0;               // kConstant
  ir::DataType dtype = ir::kF32;  // kConstant: its type; "cast": the result's
  std::string op;                 // kOp
  std::vector<int> args;          // kOp: earlier nodes

  static FusedNode Input(int k) {
    FusedNode n;
    n.kind = Kind::kInput;
    n.input = k;
    return n;
  }
  static FusedNode Constant(double value, ir::DataType dtype = ir::kF32) {
    FusedNode n;
    n.kind = Kind::kConstant;
    n.value = value;
    n.dtype = dtype;
    return n;
  }
  static FusedNode Op(std::string op, std::vector<int> args) {
    FusedNode n;
    n.op = std::move(op);
    n.args = std::move(args);
    return n;
  }
  static FusedNode CastTo(int arg, ir::DataType dtype) {
    FusedNode n = Op("cast", {arg});
    n.dtype = dtype;
    return n;
  }
};

// An elementwise expression over several tensors as one kernel: the value
// of the last node, broadcast over every input (numpy's rules; a constant
// broadcasts to anything). A node used more than once is computed once per
// element (a let). Each op's operands share a dtype the op takes (a
// comparison gives i32, a where's condition may be any and its result is
// its operands' dtype, a cast gives its dtype); i32 and u32 constants are
// integers in their range. Parameters X0 .. X<n-1>, Y. Errors: no nodes, an argument
// that is not an earlier node, an input index out of range, an input the
// output does not use, an output that uses no input, and the checks of
// Elementwise. Schedule: as Elementwise.
//   // silu(x) + b: x * sigmoid(x) + b
//   auto f = ops::ElementwiseFused({{{7, 33}}, {{33}}},
//                                  {FusedNode::Input(0), FusedNode::Op("sigmoid", {0}),
//                                   FusedNode::Op("mul", {0, 1}), FusedNode::Input(1),
//                                   FusedNode::Op("add", {2, 3})}, target);
StatusOr<ir::Function> ElementwiseFused(const std::vector<TensorType>& inputs,
                                        const std::vector<FusedNode>& nodes, const Target& target,
                                        const std::string& name = "fused");

// A reduction over the last axis of a 2-D input X[rows, cols]: sum, mean,
// max, min or prod. Y is [rows], or [rows, 1] with keepdims; f16 inputs
// accumulate in f32. Parameters X, Y; `name` defaults to "reduce_<op>".
// Schedule: as ReduceAxes over axis 1 (the row rules of rows.h).
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
  // The names of its input tensors in the order its callers pass them;
  // empty: in order of first use by the kernels.
  std::vector<std::string> inputs;
};

// The same expression as kernels to run in order, where one kernel cannot
// hold it: one that would read more tensors than the target binds storage
// buffers per stage, or nest deeper than kiln compiles, has parts computed
// into intermediate tensors by kernels of their own first (`T<j>`, node j's
// value; halfway down the deepest path where too deep). Inputs X0 ..
// X<n-1> (`inputs` of the sequence), output Y. Kernels are named
// `<name>_<j>` after the node each computes, or `name` where one kernel
// does it all (as ElementwiseFused's). Errors: those of ElementwiseFused but
// the buffer and depth limits.
StatusOr<KernelSequence> ElementwiseFusedKernels(const std::vector<TensorType>& inputs,
                                                 const std::vector<FusedNode>& nodes,
                                                 const Target& target,
                                                 const std::string& name = "fused");

// Softmax over the last axis of a 2-D f32 input X[rows, cols], numerically
// stable, as three kernels (one materialised stage each):
//   <name>_max(X, M):          M[i] = max_k X[i, k]
//   <name>_sum(X, M, S):       S[i] = sum_k exp(X[i, k] - M[i])
//   <name>_normalize(X, M, S, Y): Y[i, j] = exp(X[i, j] - M[i]) / S[i]
// M and S ([rows], f32) are the intermediates. The reductions are
// scheduled like Reduce, the last kernel like Elementwise.
StatusOr<KernelSequence> Softmax(const TensorType& input, const Target& target,
                                 const std::string& name = "softmax");

// ===========================================================================
// Reductions over any axes, arg-reductions, softmax and log-softmax over an
// axis, layer and RMS norm (reduce.cc, norm.cc). Each is one TE kernel
// scheduled by the row rules (rows.h): a workgroup per output with a
// cross-thread reduction (subgroups where the target has them, else a tree
// in shared memory) where the reduction is long (and rows contiguous), else
// a thread per output; docs/ops.md gives the rule. f16 inputs compute in f32.

// sum, mean, max, min or prod over `axes` (each in [-rank, rank), distinct,
// at least one) of X; Y drops the reduced axes, or keeps them as 1 with
// keepdims ([1] when every axis is reduced without keepdims). max and min
// propagate NaN. i32 and u32 reduce in their type (sums and products wrap;
// no mean). Parameters X, Y; `name` defaults to "reduce_<op>".
StatusOr<ir::Function> ReduceAxes(std::string_view op, const TensorType& input,
                                  const std::vector<int>& axes, bool keepdims, const Target& target,
                                  std::string name = "");

//   arg-reduce: argmax argmin
const std::vector<std::string_view>& ArgReduceOpNames();

// The index along `axis` of the largest (argmax) or smallest (argmin)
// element, as i32: the first on ties; a NaN counts as beyond every number,
// so the first NaN's index is returned where there is one. Parameters X, Y
// (i32, X's shape without `axis`, or with it as 1 under keepdims); `name`
// defaults to the op.
StatusOr<ir::Function> ArgReduce(std::string_view op, const TensorType& input, int axis,
                                 bool keepdims, const Target& target, std::string name = "");

// Softmax (exp(x - max) / sum) or log-softmax (x - max - log(sum)) along
// `axis`, numerically stable, in one kernel. Parameters X, Y (X's shape).
// A row holding NaN or +inf, or only -inf, gives NaN (IEEE arithmetic's
// answer, kept where compilers assume no NaN or infinity: rows.h,
// IsNonFinite).
StatusOr<ir::Function> SoftmaxAxis(const TensorType& input, int axis, const Target& target,
                                   const std::string& name = "softmax");
StatusOr<ir::Function> LogSoftmax(const TensorType& input, int axis, const Target& target,
                                  const std::string& name = "log_softmax");

// Normalisation over the last axis (D = its extent), in one kernel:
//   layer_norm: Y = (X - mean) * rsqrt(var + eps) * Gamma + Beta, var the
//               biased variance; parameters X, Gamma[D], Beta[D], Y
//   rms_norm:   Y = X * rsqrt(mean(X^2) + eps) * Gamma; parameters X, Gamma[D], Y
// Gamma and Beta have X's dtype; eps is finite and >= 0. A layer-norm row
// holding NaN or an infinity gives NaN (IEEE arithmetic's answer, kept for
// one-element rows too).
StatusOr<ir::Function> LayerNorm(const TensorType& input, double eps, const Target& target,
                                 const std::string& name = "layer_norm");
StatusOr<ir::Function> RmsNorm(const TensorType& input, double eps, const Target& target,
                               const std::string& name = "rms_norm");

// ===========================================================================
// Data movement, where and cast (movement.cc): elementwise kernels (one
// thread per output element, the default flat schedule). Tensors are f32,
// f16 (with shader-f16), i32 or u32.

// Y[i_0, ..., i_n] = X[i_perm^-1...]: output axis d is input axis perm[d];
// perm is a permutation of 0..rank-1. Parameters X, Y.
StatusOr<ir::Function> Permute(const TensorType& input, const std::vector<int>& perm,
                               const Target& target, const std::string& name = "permute");

// A copy of X with a new shape of as many elements (one entry may be -1:
// inferred). Parameters X, Y. (A reshape of a dense tensor is also
// metadata only: a caller may reuse X's buffer instead of running this.)
StatusOr<ir::Function> Reshape(const TensorType& input, const Shape& shape, const Target& target,
                               const std::string& name = "reshape");

// The inputs (2 or more, one dtype and rank, equal but for `axis`) joined
// along `axis`. Parameters X0, X1, ..., Y.
StatusOr<ir::Function> Concat(const std::vector<TensorType>& inputs, int axis, const Target& target,
                              const std::string& name = "concat");

// Python slicing per axis: X[starts[d]:stops[d]:steps[d]] for every axis d
// (one entry per axis; negative starts and stops count from the end, out of
// range ones are clamped, steps are non-zero and may be negative; use
// INT64_MAX / INT64_MIN for an open end). Every output dimension must be at
// least 1. Parameters X, Y.
StatusOr<ir::Function> Slice(const TensorType& input, const std::vector<int64_t>& starts,
                             const std::vector<int64_t>& stops, const std::vector<int64_t>& steps,
                             const Target& target, const std::string& name = "slice");

// Embedding lookup: Y[..., d] = Table[clamp(Indices[...], 0, V - 1), d] for
// Table[V, D] (f32, f16, i32 or u32) and i32 Indices of rank 1 to 3; an index
// out of [0, V) is clamped into it. Parameters Table, Indices, Y.
StatusOr<ir::Function> Gather(const TensorType& table, const TensorType& indices,
                              const Target& target, const std::string& name = "gather");

// X padded with `before[d]` and `after[d]` (>= 0) elements of `value` on
// each axis. Parameters X, Y.
StatusOr<ir::Function> Pad(const TensorType& input, const std::vector<int64_t>& before,
                           const std::vector<int64_t>& after, double value, const Target& target,
                           const std::string& name = "pad");

// C = Cond != 0 ? A : B with numpy broadcasting of all three; Cond is i32,
// u32 or of A's dtype (a float NaN counts as true); A and B share a dtype.
// Parameters Cond, A, B, C.
StatusOr<ir::Function> Where(const TensorType& cond, const TensorType& a, const TensorType& b,
                             const Target& target, const std::string& name = "where");

// X converted to `dtype` (f32, f16, i32, u32; X of one of them too) by the
// IR's cast rules (float to i32 or u32 truncates toward zero and saturates,
// NaN gives 0; between i32 and u32 the bits are kept). Parameters X, Y;
// `name` defaults to "cast_<dtype>".
StatusOr<ir::Function> Cast(const TensorType& input, ir::DataType dtype, const Target& target,
                            std::string name = "");

// The 8-bit tensor `input` (i8 or u8, its n bytes packed four to a 32-bit
// word, the first in the low bits: X, ceil(n / 4) i32 words) as n i32
// values Y: sign-extended for i8, zero-extended for u8. Parameters X, Y;
// `name` defaults to "unpack_i8" / "unpack_u8".
StatusOr<ir::Function> UnpackBytes(const TensorType& input, const Target& target,
                                   std::string name = "");

// The i32 values X of `shape` as bytes (each its low 8 bits: int8 and uint8
// wrap, as numpy's astype), packed four to a word of Y (ceil(n / 4) i32
// words, the last word's unused bytes 0). Parameters X, Y; `name` defaults
// to "pack_bytes".
StatusOr<ir::Function> PackBytes(const Shape& shape, const Target& target, std::string name = "");

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
  // What the products are summed in: f32 (the default, for every input
  // dtype), or f16 for f16 inputs (packed half-precision FMAs, about twice
  // the arithmetic rate where the device has it, with f16's rounding at every
  // step: the sums of K products carry errors that grow with K; docs/ops.md).
  ir::DataType accumulate = ir::kF32;
};

// How one matmul kernel is tiled. A workgroup of 16 x 16 threads (8 x 16
// with threads_y 8) computes a (4 * threads_y * rows) x (64 * cols) tile of
// C; each thread a (4 * rows) x (4 * cols) register tile made of 4 x 4
// blocks spaced 4 * threads_y (rows) and 64 (columns) apart, so the
// vector reads of a warp from the shared tiles are contiguous. The k
// dimension advances k_tile at a time through shared tiles of A and B,
// double-buffered (the next tile loaded into registers during the math, one
// barrier per step) or not (two barriers per step).
struct MatmulSchedule {
  int rows = 2;     // 1, 2 or 4
  int cols = 2;     // 1, 2 or 4
  int k_tile = 16;  // 8, 16 or 32; rows * k_tile and cols * k_tile multiples of 16
  bool double_buffer = true;
  bool unroll_k = true;  // the k-steps of a shared tile unrolled (a larger, faster kernel)
  // Single-buffered tiles copied ahead through registers: the next k-step's
  // global loads issued before the math, stored into the tiles after it
  // (te::Stage::CopyAhead(true)).
  bool copy_through_registers = false;
  // ... and what the copies do at the last k-step (te::LastCopy): skip it
  // under a branch, load (kLoadsAgain) or load and store (kStoresAgain) its
  // own tile again under no branch, or leave the loop one k-step early with
  // its math after it (kPeeled). Double-buffered tiles, which always copy
  // through registers, take kSkipped or kLoadsAgain (loads and stores under
  // no branch, te::Stage::DoubleBuffer(true)).
  te::LastCopy last_copy = te::LastCopy::kSkipped;
  // The accumulators' sums of products as fma(a, b, acc), one rounding per
  // step (te::Stage::FusedMultiplyAdd); the int8 GEMM's dot4I8 has none.
  bool fused_multiply_add = false;
  // Threads along C's rows: 16 (a workgroup of 16 x 16), or 8 (8 x 16, for
  // targets that run at most 128 invocations per workgroup, as WebGPU's
  // compatibility mode guarantees), which halves block_m.
  int threads_y = 16;

  int64_t block_m() const { return int64_t{4} * threads_y * rows; }
  int64_t block_n() const { return int64_t{64} * cols; }
  // Bytes of workgroup memory the shared tiles take.
  int64_t SharedBytes() const;
  // "128x128 tile, k 16, double-buffered".
  std::string ToString() const;
  // Whether a GEMM under this schedule copies its single-buffered tiles one
  // k-step ahead (te::Stage::CopyAhead): every GEMM but the int8 one, which
  // that order made 20% slower on the H200 (BENCHMARKS.md).
  bool CopiesAhead(bool int8) const { return !double_buffer && !int8; }
  friend bool operator==(const MatmulSchedule&, const MatmulSchedule&) = default;
};

// What a GEMM computes, where the rule's choice depends on it.
enum class GemmKind : uint8_t {
  kF32,   // a matmul of f32 operands
  kF16,   // a matmul of f16 operands
  kConv,  // the convolution's implicit GEMM (its tiles gathered from the input)
  kInt8,  // the int8 matmul
};

// The default rule: 128 x 128 tiles where that makes at least 512
// workgroups, else 128 x 64 or 64 x 128 where that makes at least 128, else
// 64 x 64, in each case the smaller tile along a side that fits it (N <= 64:
// 64 columns; M <= 4 * threads_y: the smaller rows); k_tile 16
// where the target's workgroup storage holds it, else 8, single-buffered
// (measured faster than double-buffering on the H200; BENCHMARKS.md). An f32
// matmul's tiles are copied ahead through registers where the target's
// implementation is known: under a branch through wgpu-native (10% faster
// there, 2-5% slower through Dawn), branch-free through Dawn (1-3% faster
// there, 11% slower through wgpu-native); the other kinds copy directly (the
// f16 matmul and the convolution ran slower through registers on
// wgpu-native); through Dawn the f32 matmul's sums of products are written as
// `fma` (its shader compiler leaves them unfused). The k-steps are unrolled
// where the problem fills the GPU (at least 128 workgroups); smaller problems get the smaller
// kernel, which compiles faster and whose launch is not limited by its inner loop.
// Workgroups of 16 x 16 threads, or 8 x 16 (threads_y 8) where the target runs
// fewer than 256 invocations per workgroup or 16 along y.
StatusOr<MatmulSchedule> DefaultMatmulSchedule(int64_t batch, int64_t m, int64_t n,
                                               const Target& target,
                                               GemmKind kind = GemmKind::kF32);

// That `schedule` is well formed and fits the target (what Matmul,
// MatmulInt8 and the implicit-GEMM Conv2d check of a schedule given them);
// errors name `what`.
Status CheckMatmulSchedule(const MatmulSchedule& schedule, const Target& target,
                           std::string_view what = "matmul");

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

// The int8 matmul, C[batch..., M, N] (i32) = A @ B^T accumulated exactly in
// i32, with int8 operands packed along K four to an int8x4 word (lane j of
// word w is element 4w + j; dot4i8 pairs lanes, so either byte order works
// if both operands use it): A is [..., M, K/4] (row-major A[M, K] packed),
// B is [..., N, K/4] (B given transposed, as weights are stored: B^T[N, K]
// packed), rank 2 to 4, batch dimensions broadcasting as in Matmul. K must
// be a multiple of 4; pad both operands with zeros along K otherwise (the
// zeros add nothing). Sums are exact for K < 2^17 (|a b| <= 2^14); beyond,
// i32 sums wrap. Parameters A, B, C; `name` defaults to "matmul_int8". The
// kernel is Matmul's (`schedule`, whose k_tile counts words, overrides
// DefaultMatmulSchedule), each product of two words one dot4i8 (WGSL
// dot4I8Packed, the packed_4x8_integer_dot_product language feature).
StatusOr<ir::Function> MatmulInt8(const TensorType& a, const TensorType& b, const Target& target,
                                  std::string name = "",
                                  std::optional<MatmulSchedule> schedule = std::nullopt);

// ---------------------------------------------------------------------------
// Convolution and pooling (conv.cc)

struct Conv2dOptions {
  // NHWC input and output with weights [KH, KW, C/groups, F] (HWIO); else
  // NCHW with weights [F, C/groups, KH, KW] (OIHW).
  bool nhwc = true;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;  // zeros on both sides of each axis
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;              // divides C and F; groups == C with one filter each is depthwise
  std::optional<TensorType> bias;  // [F]
  std::string activation;          // "" or a unary op name, after the bias
};

// Y = activation(conv2d(X, W) + bias), OH = (H + 2 pad_h - dilation_h (KH - 1) - 1) / stride_h
// + 1 (and OW alike). Parameters X, W, bias where given, Y; f32 or f16 (f16
// accumulates in f32); `name` defaults to "conv2d". Schedule: an implicit
// GEMM on Matmul's kernel where each group has at least 16 filters and 16
// reduction terms (ConvUsesGemm): NHWC as M = N*OH*OW pixels by the group's
// filters with K = KH*KW*C/groups, NCHW as the filters by OH*OW pixels per
// image; otherwise (depthwise and thin groups) one thread per output
// element reducing its window.
StatusOr<ir::Function> Conv2d(const TensorType& x, const TensorType& w, const Target& target,
                              const Conv2dOptions& options = {}, std::string name = "");
bool ConvUsesGemm(const TensorType& x, const TensorType& w, const Conv2dOptions& options);

struct Pool2dOptions {
  bool nhwc = true;
  int64_t kernel_h = 2, kernel_w = 2;
  int64_t stride_h = 0, stride_w = 0;  // 0: the window's size
  int64_t pad_h = 0, pad_w = 0;        // at most half the window
};

// Max or average ("max", "avg") pooling over windows of X (NHWC or NCHW).
// Padding is not counted: max ignores it, avg divides by the number of
// input elements in the window. Parameters X, Y; `name` defaults to
// "<op>_pool2d". Schedule: one thread per output element.
StatusOr<ir::Function> Pool2d(std::string_view op, const TensorType& x, const Target& target,
                              const Pool2dOptions& options = {}, std::string name = "");

// ---------------------------------------------------------------------------
// Attention (attention.cc)

// The fused attention kernel's blocking: a workgroup of (queries / 4) x
// (keys / 4) threads computes `queries` queries against blocks of `keys`
// keys; each thread a 4 x 4 tile of the block's scores and 4 rows of the
// output. `own_v`: V's blocks in a shared buffer of their own instead of
// replacing K's (three barriers per block instead of four, a block more of
// workgroup memory); only with the read-ahead (at most 4 vectors of a
// block per thread). `unroll_scores`: the scores' loop over D written out
// (D / 4 steps). `unsigned_indices`: the kernel's index arithmetic in u32
// rather than i32 (every index is non-negative; the same values).
struct AttentionTile {
  int64_t queries = 64;
  int64_t keys = 32;
  bool own_v = false;
  bool unroll_scores = false;
  bool unsigned_indices = false;
  int64_t threads() const { return queries / 4 * (keys / 4); }
  // "64 queries x 32 keys per block, 128 threads" (", V in a buffer of its
  // own", ", the scores' loop over D unrolled", ", unsigned indices").
  std::string ToString() const;
  friend bool operator==(const AttentionTile&, const AttentionTile&) = default;
};

struct AttentionOptions {
  bool causal = false;                // key j is visible to query i where j <= i
  std::optional<TensorType> mask;     // [Sq, Sk], added to the scores (Q's dtype)
  std::optional<double> scale;        // default 1 / sqrt(D)
  std::optional<AttentionTile> tile;  // default DefaultAttentionTile
};

// O = softmax(Q K^T * scale + mask) V over the keys, fused: Q [..., Sq, D],
// K and V [..., Sk, D] with Q's batch dimensions (rank 2 to 4), D a multiple
// of 4 up to 128; f32 or f16 (computes in f32). Parameters Q, K, V, mask
// where given, O (Q's shape); `name` defaults to "attention". A query that
// sees no key (all masked with -inf) gives NaN. Schedule: a workgroup per
// tile of queries (options.tile, else DefaultAttentionTile), keys and values
// through shared memory a block at a time with an online softmax, each
// thread a 4 x 4 register tile of the block's scores and 4 queries of the
// output.
StatusOr<ir::Function> Attention(const TensorType& q, const TensorType& k, const TensorType& v,
                                 const Target& target, const AttentionOptions& options = {},
                                 std::string name = "");

// Self-attention over the heads of one packed projection, as a transformer's
// fused q/k/v matmul writes it: QKV [..., S, 3 * heads * D] (rank 2 to 4),
// each row its query's heads side by side, then its key's, then its value's
// (numpy's reshape to [..., S, 3, heads, D]); O [..., S, heads * D], the
// heads side by side, ready for the output projection. The kernel is
// Attention's, reading Q, K and V where they lie and writing O in place,
// with no copies to split or merge the heads. Options as Attention's (the
// mask [S, S]); parameters QKV, mask where given, O; `name` defaults to
// "packed_attention".
StatusOr<ir::Function> PackedAttention(const TensorType& qkv, int64_t heads, const Target& target,
                                       const AttentionOptions& options = {}, std::string name = "");

// Bytes of workgroup memory the kernel takes: Q (D x queries f32), a block
// of K or V (D x keys; with own_v, one of each), the block's probabilities
// and the partial row statistics (keys + keys / 4 rows of queries + 4).
int64_t AttentionSharedBytes(const AttentionTile& tile, int64_t head_dim);
// The first of these tiles (queries x keys) that fits the target's
// workgroup storage and size and leaves each thread at most 4 vectors of
// output columns (failing that, the first that fits): 64x32, 32x32, 16x32,
// 32x16, 16x16, 16x8, 8x8; with own_v where the read-ahead holds and the
// extra block still fits (the H200's D = 64 tile), and then through Dawn
// (target.implementation "dawn") with unroll_scores.
StatusOr<AttentionTile> DefaultAttentionTile(int64_t head_dim, const Target& target);
// That `tile` is well formed (queries a multiple of 4 up to 256, keys a
// multiple of 4 up to 128) and fits the target for this D.
Status CheckAttentionTile(const AttentionTile& tile, int64_t head_dim, const Target& target);

}  // namespace kiln::ops
