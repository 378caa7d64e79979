// NarrowIndices: 64-bit integer arithmetic becomes 32-bit.
//
// WGSL has no 64-bit integers. Index arithmetic is often written in i64
// (loop variables, casts to i64 before multiplying extents); this pass
// rewrites every i64 value to i32 and every u64 value to u32: constants,
// loop and let variables, casts, and buffer extents.
//
// Narrowing is only done where it is provably safe at compile time;
// otherwise the pass fails with a kInvalidArgument naming the expression:
//   * a 64-bit constant must fit in the 32-bit type;
//   * a constant loop range (min + extent) and a constant buffer extent
//     must fit too;
//   * buffers whose elements are 64-bit values cannot be narrowed (their
//     data would change), nor can 64-bit reinterprets.
// Non-constant extents come from 32-bit scalar parameters; the runtime
// rejects buffers of 2^31 elements or more, so flat indices below such
// extents fit in i32.
#pragma once

#include "kiln/ir/function.h"
#include "kiln/support/status.h"

namespace kiln::transform {

struct NarrowIndicesOptions {};

StatusOr<ir::Function> NarrowIndices(const ir::Function& function,
                                     const NarrowIndicesOptions& options = {});

}  // namespace kiln::transform
