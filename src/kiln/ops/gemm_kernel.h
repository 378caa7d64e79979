// The register-tiled GEMM kernel behind Conv2d's implicit GEMM (internal
// to ops), written with the IR builder; Matmul and MatmulInt8 are tensor
// expressions (gemm.h) with the same schedule.
//
// C[batch][m, n] = epilogue(sum_k A[batch](m, k) * B[batch](k, n)), where a
// GemmSpec says how the operands are read (an implicit im2col gather for
// convolution), what the products are and where each result goes: a
// convolution's output pixels and filters are the GEMM's rows and columns
// of another tensor's layout, which the TE definition (whose C is the
// output tensor itself) does not express yet. The schedule is
// MatmulSchedule (ops.h): a 16 x 16 workgroup per (64 * rows) x (64 * cols)
// tile of C, shared tiles of A and B stored k-major, each thread's
// accumulators as 4-lane vectors that the code generator keeps as separate
// variables, the k-steps of a tile unrolled, and optionally double-buffered
// tiles.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kiln/ir/buffer.h"
#include "kiln/ir/builder.h"
#include "kiln/ir/expr.h"
#include "kiln/ops/gemm.h"
#include "kiln/ops/ops.h"

namespace kiln::ops::internal {

// How one operand of a GEMM is read, as f32. `outer` is the row of A (m) or
// the column of B (n).
struct OperandSource {
  // Vectors of the operand's shared tile run along k (else along m or n).
  bool k_contiguous = true;
  // The element at (outer, k), zero where outside the operand; `outer` and
  // `k` may lie beyond the extents (ragged tiles).
  std::function<ir::Expr(const ir::Expr& outer, const ir::Expr& k)> element;
  // Where set: four elements from (outer, k) along the contiguous axis as a
  // 4-lane vector. Used only when every tile is whole (no index beyond the
  // extents), so it needs no guard against them.
  std::function<ir::Expr(const ir::Expr& outer, const ir::Expr& k)> vector;
};

struct GemmSpec {
  std::string name;
  ir::DataType dtype = ir::kF32;  // of the output; the math is f32
  Shape batch;                    // the batch dimensions (coords passed below)
  int64_t m = 0, n = 0, k = 0;
  // Declares the kernel's parameters on the builder, in order, and returns
  // the output buffer.
  std::function<ir::Buffer(ir::IRBuilder&)> declare;
  // The operands for the batch element at `coords` (one per batch dim).
  std::function<OperandSource(const std::vector<ir::Expr>&coords)> a, b;
  // The output element (coords, row, col) as indices of the output buffer;
  // `col` may be a 4-lane ramp, when the columns are contiguous there.
  std::function<std::vector<ir::Expr>(const std::vector<ir::Expr>& coords, const ir::Expr& row,
                                      const ir::Expr& col)>
      out_index;
  // Whether 4 adjacent columns of C are adjacent in the output buffer, so
  // whole tiles can store vectors.
  bool vector_store = true;
  // The epilogue after the accumulation: v (1 or 4 lanes) at
  // (coords, row, col) -> v. Unset: v unchanged. Activations are applied per
  // lane (the kernel asks for scalars when `scalar_epilogue`).
  std::function<ir::Expr(const ir::Expr& v, const std::vector<ir::Expr>& coords,
                         const ir::Expr& row, const ir::Expr& col)>
      epilogue;
  bool scalar_epilogue = false;
};

// The verified kernel.
StatusOr<ir::Function> BuildGemm(const GemmSpec& spec, const MatmulSchedule& schedule,
                                 const Target& target);

}  // namespace kiln::ops::internal
