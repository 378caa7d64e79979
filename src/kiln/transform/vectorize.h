// Vectorize: loops marked `vectorize` become single vector operations.
//
// A vectorized loop `for v in vectorize(min, n, step)` needs a constant
// extent n of 2, 3 or 4 (WGSL's vector sizes). Its body runs once with v
// replaced by ramp(min, step, n): expressions that depend on v become n-lane
// vectors (contiguous loads and stores keep stride-1 ramp indices; other
// vector indices become gathers and scatters), and invariant operands of
// vector operations are broadcast.
//
// Unvectorizable bodies are an error naming the statement: control flow
// (if, while, if_then_else) or loop bounds that depend on v; barriers,
// allocations, nested thread-bound or vectorized loops; stores whose index
// does not depend on v (every lane would write one element); subgroup
// operations, dot4i8 and reinterprets of values that depend on v.
#pragma once

#include "kiln/ir/function.h"
#include "kiln/ir/source_map.h"
#include "kiln/support/status.h"

namespace kiln::transform {

struct VectorizeOptions {
  // Where the parser found the statements (may be null): refusals of a loop
  // then start with its line and column.
  const ir::SourceMap* source = nullptr;
};

StatusOr<ir::Function> Vectorize(const ir::Function& function,
                                 const VectorizeOptions& options = {});

}  // namespace kiln::transform
