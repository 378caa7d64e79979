// Unroll: loops marked `unroll` are replaced by copies of their body.
//
// The loop's min, extent and step must simplify to constants; copy k has
// the loop variable replaced by the constant min + k * step. Unrolled loops
// nested in unrolled loops are expanded from the inside out. A non-constant
// extent, or one above options.max_extent, is an error: the schedule asked
// for something the pass cannot do, and silently leaving a serial loop
// would hide that.
#pragma once

#include <cstdint>

#include "kiln/ir/function.h"
#include "kiln/support/status.h"

namespace kiln::transform {

struct UnrollOptions {
  // Upper bound on the extent of one unrolled loop (code size guard).
  int64_t max_extent = 256;
};

StatusOr<ir::Function> Unroll(const ir::Function& function, const UnrollOptions& options = {});

}  // namespace kiln::transform
