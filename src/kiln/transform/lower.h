// Lower: the pass pipeline from a scheduled kernel to what the WGSL code
// generator accepts.
//
//   Verify -> LowerThreadBindings -> Unroll -> Vectorize -> FlattenBuffers
//          -> NarrowIndices -> Simplify -> Verify
//
// Thread bindings are checked first so that launch errors are reported
// against the source. Unrolling precedes vectorization so a vectorized loop
// may contain unrolled ones; vectorization precedes flattening so that
// contiguous accesses in the innermost dimension stay stride-1 ramps; the
// final Verify catches any pass producing ill-formed IR (a kiln bug, reported
// as kInternal).
#pragma once

#include "kiln/ir/function.h"
#include "kiln/ir/verifier.h"
#include "kiln/support/status.h"
#include "kiln/transform/flatten_buffers.h"
#include "kiln/transform/lower_thread_bindings.h"
#include "kiln/transform/narrow_indices.h"
#include "kiln/transform/unroll.h"
#include "kiln/transform/vectorize.h"

namespace kiln::transform {

struct LowerOptions {
  ir::VerifyOptions verify;
  UnrollOptions unroll;
};

StatusOr<ir::Function> Lower(const ir::Function& function, const LowerOptions& options = {});

}  // namespace kiln::transform
