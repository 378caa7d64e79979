// NarrowIndices: 64-bit integer arithmetic becomes 32-bit.
//
// WGSL has no 64-bit integers. Index arithmetic is often written in i64
// (loop variables, casts to i64 before multiplying extents); this pass
// rewrites every i64 value to i32 and every u64 value to u32: constants,
// loop and let variables, casts, and buffer extents.
//
// The narrowed program computes each 64-bit value modulo 2^32, exactly
// (+, -, * and the bitwise operations commute with wrap-around). That is
// what indices (an index outside its buffer is a kernel bug either way) and
// casts to 32 bits or fewer need. Every other use needs the value itself,
// so the pass proves it fits the 32-bit type, from the ranges of constants,
// casts of narrower values, loop bounds and lets, or fails with a
// kInvalidArgument naming the use and the range it found:
//   * comparisons, /, %, floor_div, floor_mod, min, max, abs, popcount,
//     subgroup min/max and shift_right need their 64-bit operands in range,
//     and conversions of a 64-bit value to a float or bool too;
//   * shift amounts must lie in [0, 31];
//   * a 64-bit constant must fit in the 32-bit type, and so must a loop's
//     min, extent and end and a buffer's extents and strides;
//   * buffers whose elements are 64-bit values cannot be narrowed (their
//     data would change), nor can 64-bit reinterprets or conversions of a
//     float to a 64-bit integer.
#pragma once

#include "kiln/ir/function.h"
#include "kiln/support/status.h"

namespace kiln::transform {

struct NarrowIndicesOptions {};

StatusOr<ir::Function> NarrowIndices(const ir::Function& function,
                                     const NarrowIndicesOptions& options = {});

}  // namespace kiln::transform
