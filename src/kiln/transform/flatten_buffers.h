// FlattenBuffers: every buffer becomes one-dimensional.
//
// WGSL storage buffers are runtime-sized arrays indexed by one integer, so
// each load and store of an N-d buffer is rewritten to one flat index:
// row-major (((i0 * n1 + i1) * n2 + i2) ...) for dense buffers, and
// sum(i_d * stride_d) for buffers with explicit strides. Flattened buffers
// have shape [product of the extents] (dense) or [1 + sum((n_d - 1) *
// stride_d)] (strided). Parameters and allocations are both flattened;
// one-dimensional dense buffers are left as they are.
//
// Vector indices stay ramps where possible (see lane_arith.h), so a
// contiguous vector access in the last dimension is still a stride-1 ramp.
// The flat index has the type of the first index; other indices and extents
// are cast to it.
#pragma once

#include "kiln/ir/function.h"
#include "kiln/support/status.h"

namespace kiln::transform {

struct FlattenBuffersOptions {};

StatusOr<ir::Function> FlattenBuffers(const ir::Function& function,
                                      const FlattenBuffersOptions& options = {});

}  // namespace kiln::transform
