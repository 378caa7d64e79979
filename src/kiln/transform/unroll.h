// Unroll: loops marked `unroll` are replaced by copies of their body.
//
// The loop's min, extent and step must simplify to constants; copy k has
// the loop variable replaced by the constant min + k * step. Unrolled loops
// nested in unrolled loops are expanded from the inside out. A non-constant
// extent, one above options.max_extent, or copies of more than
// options.max_nodes IR nodes in all, is an error: the schedule asked
// for something the pass cannot do, and silently leaving a serial loop
// would hide that.
#pragma once

#include <cstdint>

#include "kiln/ir/function.h"
#include "kiln/ir/verifier.h"
#include "kiln/support/status.h"

namespace kiln::transform {

struct UnrollOptions {
  // Upper bound on the extent of one unrolled loop (code size guard).
  int64_t max_extent = ir::kMaxUnrollExtent;
  // Upper bound on the IR nodes (statements and expressions) the copies of
  // a function's unrolled loops hold in all, counted as each loop is
  // expanded: nested loops multiply, and 256 x 256 x 256 copies would
  // exhaust memory long before any driver compiled them. The library's
  // largest kernels unroll to under 30000 nodes.
  int64_t max_nodes = 1 << 20;
};

StatusOr<ir::Function> Unroll(const ir::Function& function, const UnrollOptions& options = {});

}  // namespace kiln::transform
