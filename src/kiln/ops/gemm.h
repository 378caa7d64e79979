// The GEMM family as tensor expressions (internal to ops): the definition
// that Matmul and MatmulInt8 share, and the schedule rule that makes it
// fast.
//
//   A_tile[batch..., k, i] = the A element (i, k), as the math's word
//   B_tile[batch..., k, j] = the B element (k, j), as the math's word
//   acc[batch..., i, j]    = sum over k of A_tile[.., k, i] * B_tile[.., k, j]
//                            (dot4i8 of packed int8 words for GemmMath::kDot4I8)
//   C[batch..., i, j]      = epilogue(acc[batch..., i, j])
//
// The schedule (MatmulSchedule): C in (4 * threads_y * rows) x (64 * cols)
// tiles, one per workgroup of threads_y x 16 threads (batch and tile indices
// fused into blockIdx.x); each thread's (4 * rows) x (4 * cols) elements in
// 4 x 4 blocks 4 * threads_y and 64 apart (strided thread tiles: a warp's reads of the shared
// tiles are contiguous), accumulated in registers (acc local, computed at
// the thread); A_tile and B_tile k-major in shared memory at each step of
// k_tile, copied by all the threads as 4-lane vectors along the operand's
// contiguous axis where the operand's tiles are whole (along k and its
// own axis), double-buffered when asked (the next step's values loaded
// into registers before the math, stored after it); each k-step's
// fragments of A_tile and B_tile read into registers as vectors; the
// k-steps unrolled when asked; C stored as vectors where C's tiles are
// whole.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kiln/ops/ops.h"
#include "kiln/te/te.h"

namespace kiln::ops::internal {

// Workgroups that fill the GPU enough for the large tile and unrolled
// k-steps (DefaultMatmulSchedule).
inline constexpr int64_t kEnoughWorkgroups = 128;

// How a GEMM multiplies and accumulates.
enum class GemmMath {
  // Words f32, accumulated in f32.
  kF32,
  // Words f16, multiplied and accumulated in f16 (the epilogue runs in f32
  // on the widened sums).
  kF16,
  // Words u32, each four i8 along k (k counts words); accumulated in i32 by
  // dot4i8. No epilogue.
  kDot4I8,
};

struct TeGemmSpec {
  std::string name;
  GemmMath math = GemmMath::kF32;
  ir::DataType out_dtype = ir::kF32;
  Shape batch;  // the output's batch dimensions
  int64_t m = 0, n = 0, k = 0;
  // The kernel's buffer parameters before C, in order: the placeholders
  // that `a`, `b` and `epilogue` read.
  std::vector<te::Tensor> inputs;
  // The operands' elements as the math's word: A at (coords, k, i), B at
  // (coords, k, j), zero-padding included where the operand has some.
  std::function<ir::Expr(const std::vector<te::Var>&coords, const te::Var&k, const te::Var&outer)>
      a, b;
  // Along which axis the operand's source is contiguous (k, or i / j), for
  // 4-lane vector copies; false where it is neither (a gather).
  bool a_k_contiguous = true, b_k_contiguous = false;
  bool a_vectors = true, b_vectors = true;
  // C's value from the sum (in f32 for kF16: the sum widened) at (coords,
  // i, j); unset: the sum, cast to out_dtype.
  std::function<ir::Expr(const ir::Expr& sum, const std::vector<te::Var>& coords, const te::Var& i,
                         const te::Var& j)>
      epilogue;
  // Where the output is not C itself (C[batch..., m, n], row-major): the
  // output tensor's name and shape, and the output element that C's element
  // (coords, i, j) is stored to, each element exactly once (a convolution's
  // pixels and filters are the GEMM's rows and columns of an NHWC or NCHW
  // tensor). C's stores are rewritten after lowering; C itself is never read.
  std::string out_name;
  Shape out_shape;
  std::function<std::vector<ir::Expr>(const std::vector<ir::Expr>& coords, const ir::Expr& i,
                                      const ir::Expr& j)>
      out_index;
  // Whether four adjacent columns j (from a multiple of 4) of a whole tile
  // are four adjacent output elements, so C stores vectors.
  bool out_vectors = true;
};

// The schedule's validity for `target` (tile sizes, workgroup storage).
Status CheckGemmSchedule(const MatmulSchedule& s, const Target& target, std::string_view what);

// The verified kernel: parameters spec.inputs, then C.
StatusOr<ir::Function> BuildTeGemm(const TeGemmSpec& spec, const MatmulSchedule& schedule,
                                   const Target& target);

}  // namespace kiln::ops::internal
