// The row rules of the reduction-shaped operators (reductions over any
// axes, arg-reductions, softmax, layer and RMS norm), all TE computes: a
// tensor seen as outputs by a reduction index, each output reduced either
// by one thread serially or by one workgroup cooperatively (strided reads,
// then subgroup operations where the target has subgroups, or a tree
// through shared memory). ChooseRowSchedule picks from the shape and the
// target's limits; ScheduleRows and ScheduleRowwise apply the choice.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kiln/ir/expr_ops.h"
#include "kiln/ops/ops.h"
#include "kiln/te/te.h"

namespace kiln::ops::internal {

// A tensor of `shape` as outputs x reduction: the `reduced` axes (sorted,
// distinct) flatten row-major to the reduction index r in [0, length), the
// other axes to the output index o in [0, outputs).
struct RowView {
  Shape shape;
  std::vector<int> reduced;
  std::vector<int> kept;
  int64_t outputs = 1;
  int64_t length = 1;
  // The reduced axes are the last ones, ignoring axes of extent 1: each
  // output's elements are contiguous.
  bool trailing = false;

  static RowView Make(const Shape& shape, std::vector<int> reduced);
  // The reduced tensor's shape (keepdims: reduced axes of extent 1;
  // otherwise the kept axes only, or [1] when every axis is reduced).
  Shape OutputShape(bool keepdims) const;
};

struct RowSchedule {
  bool cooperative = false;  // a workgroup per output (else a thread per output)
  int64_t threads = 1;       // per workgroup
  // Cooperative reductions combine through subgroups (the target has
  // subgroups), else a shared tree.
  bool subgroups = false;
};

// A workgroup per output where the reduction is long enough to share:
// length >= 32 with contiguous (trailing) rows, or length >= 256 with fewer
// than 256 outputs otherwise; a thread per output elsewhere. Cooperative
// schedules use subgroups where the target has them.
RowSchedule ChooseRowSchedule(const RowView& view, const Target& target);

// The rule as a schedule of a reduction Y (rank `rank`, its reduction axes
// RowView's reduced ones): cooperative, Y's data axes fused and bound to
// blockIdx.x, its reduction axes fused, split by the threads, the inner
// part bound to threadIdx.x and the outer part unrolled when it takes at
// most 16 steps, combined through subgroups where the rule has them (sum,
// max and min by subgroup operations, other reducers by shuffles);
// otherwise a thread per output (ScheduleFlat).
Status ScheduleRows(te::Schedule& schedule, const te::Tensor& Y, int rank, const RowView& view,
                    const RowSchedule& rule, const Target& target);

// The row-wise rule for a TE stage Y (the shape of view.shape) that reads
// row statistics `stats` (reductions along `axis`, keepdims shapes, in the
// order they are computed): Y's other axes fused into the row index o and
// `axis` innermost. Cooperative: o bound to blockIdx.x, `axis` split across
// the threads as in ScheduleRows; each statistic computed at o in shared
// memory, its reduction split the same way and combined through subgroups
// where the rule has them; where the row's length is a multiple of 4 and at
// least 4 * threads, `axis` and the statistics' reductions are first split
// by 4 (Y's four lanes vectorized, the statistics' unrolled). Otherwise o
// split by the
// threads and bound, `axis` serial, each statistic computed at the thread's
// loop in registers. The statistics read X again from memory (in practice
// from the caches: a row is read three times in a row); staging the row in
// shared memory measured slower on the H200 (BENCHMARKS.md).
Status ScheduleRowwise(te::Schedule& schedule, const te::Tensor& Y, int axis,
                       const std::vector<te::Tensor>& stats, const RowView& view,
                       const RowSchedule& rule);

// Index `i` with its `axis` entry replaced by `at`: the element of a row at
// `at`, or with `at` 0 the index of the row's statistic (keepdims shape).
std::vector<ir::Expr> WithAxisAt(const std::vector<ir::Var>& i, int axis, const ir::Expr& at);

// Schedules the reduction Y (rank `rank`) of X by the row rule, a thread
// per output when `reduces` is false (every reduced extent 1: a copy), and
// lowers it against the target's limits.
StatusOr<ir::Function> LowerRows(te::Tensor Y, te::Tensor X, int rank, const RowView& view,
                                 bool reduces, const Target& target, const std::string& name);

// NaN where `poisoned`, else `value` (f32).
ir::Expr NanIf(const ir::Expr& poisoned, const ir::Expr& value);

}  // namespace kiln::ops::internal
