// Lane-wise operations on the interpreter's lane representation (lane.h),
// with the semantics of wgsl_semantics.h. Internal to the interpreter.
#pragma once

#include "kiln/interp/lane.h"
#include "kiln/ir/expr_nodes.h"
#include "kiln/ir/types.h"

namespace kiln::interp {

// a op b for operands of scalar type `t` (integer, bool, int8x4 or float).
// Comparisons and logic give a bool lane.
Lane BinaryLane(ir::BinaryOp op, ir::DataType t, Lane a, Lane b);

// True if `a` is ordered before `b` in scalar type `t` (for min/max and
// comparisons).
bool LessLane(ir::DataType t, Lane a, Lane b);

// The lane-wise intrinsics (math, abs, bit operations, dot4i8) on operands of
// scalar type `t` (the first operand's); `args` has IntrinsicArity(op) lanes.
Lane IntrinsicLane(ir::Intrinsic op, ir::DataType t, const Lane* args);

}  // namespace kiln::interp
