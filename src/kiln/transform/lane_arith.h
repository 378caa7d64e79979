// Lane-aware integer arithmetic for building index expressions.
//
// Vectorize turns a loop variable into a ramp and FlattenBuffers folds
// several indices into one; both combine scalars with vectors. These helpers
// broadcast the scalar side (the IR has no implicit broadcast) and keep ramps
// in canonical form, so that a contiguous access stays recognisable as
// `ramp(base, 1, lanes)` for the code generator:
//   ramp(b, s, n) + broadcast(x, n)  -> ramp(b + x, s, n)
//   ramp(b1, s1, n) + ramp(b2, s2, n) -> ramp(b1 + b2, s1 + s2, n)
//   ramp(b, s, n) * broadcast(c, n)  -> ramp(b * c, s * c, n)
//   broadcast(x, n) op broadcast(y, n) -> broadcast(x op y, n)
// Operands must have the same element type; the lanes of the result are the
// larger of the two (a scalar is broadcast to a vector's lanes).
#pragma once

#include "kiln/ir/expr.h"

namespace kiln::transform {

ir::Expr LaneAdd(const ir::Expr& a, const ir::Expr& b);
ir::Expr LaneSub(const ir::Expr& a, const ir::Expr& b);
ir::Expr LaneMul(const ir::Expr& a, const ir::Expr& b);

// Scalar +, -, * that fold integer constants and the identities x + 0,
// x * 1 and x * 0 as they build, so index arithmetic stays readable
// without a simplifier run.
ir::Expr FoldedAdd(const ir::Expr& a, const ir::Expr& b);
ir::Expr FoldedSub(const ir::Expr& a, const ir::Expr& b);
ir::Expr FoldedMul(const ir::Expr& a, const ir::Expr& b);

// `e` with `lanes` lanes: e itself if it already has them, else a broadcast.
ir::Expr BroadcastTo(const ir::Expr& e, int lanes);

}  // namespace kiln::transform
