// Lower: the pass pipeline from a scheduled kernel to what the WGSL code
// generator accepts.
//
//   (verify the input) -> lower-thread-bindings -> unroll -> vectorize
//     -> flatten-buffers -> narrow-indices -> simplify -> (verify)
//
// Thread bindings are checked first so that launch errors are reported
// against the source. Unrolling precedes vectorization so a vectorized loop
// may contain unrolled ones; vectorization precedes flattening so that
// contiguous accesses in the innermost dimension stay stride-1 ramps; the
// final verification catches any pass producing ill-formed IR (a kiln bug,
// reported as kInternal). With verify_each_pass, the IR is verified after
// every pass, so the pass that broke it is named at once.
//
// The pipeline is a named list of passes (LoweringPasses) run by one driver
// (RunPasses), which an observer can watch: `kiln compile --print-after
// PASS|all` and `--time-passes` are built on it.
#pragma once

#include <functional>
#include <span>
#include <string_view>

#include "kiln/ir/function.h"
#include "kiln/ir/verifier.h"
#include "kiln/support/status.h"
#include "kiln/transform/flatten_buffers.h"
#include "kiln/transform/lower_thread_bindings.h"
#include "kiln/transform/narrow_indices.h"
#include "kiln/transform/unroll.h"
#include "kiln/transform/vectorize.h"

namespace kiln::transform {

// Called after each pass with the pass's name, its result and the
// milliseconds it took.
using PassObserver =
    std::function<void(std::string_view pass, const ir::Function& result, double ms)>;

struct LowerOptions {
  ir::VerifyOptions verify;
  UnrollOptions unroll;
  // Verify the IR after every pass (tests and debug builds turn this on).
#ifdef NDEBUG
  bool verify_each_pass = false;
#else
  bool verify_each_pass = true;
#endif
  PassObserver observer;  // may be empty
  // Where the parser found the function's statements (may be null; kept
  // alive by the caller while lowering runs): a pass refusing a loop of the
  // user's says at which line and column.
  const ir::SourceMap* source = nullptr;
};

// One pass of the pipeline.
struct Pass {
  std::string_view name;  // as `kiln compile --print-after` takes it
  StatusOr<ir::Function> (*run)(const ir::Function& function, const LowerOptions& options);
};

// The lowering pipeline, in order.
std::span<const Pass> LoweringPasses();

// The pass called `name`, or null.
const Pass* FindLoweringPass(std::string_view name);

// Verifies `function` (the input: errors are the user's), runs `passes` in
// order, then verifies the result (errors are kInternal, naming the pass
// when verify_each_pass is on).
StatusOr<ir::Function> RunPasses(const ir::Function& function, std::span<const Pass> passes,
                                 const LowerOptions& options);

// RunPasses with LoweringPasses().
StatusOr<ir::Function> Lower(const ir::Function& function, const LowerOptions& options = {});

}  // namespace kiln::transform
