// The template of the reduction-shaped kernels (reductions over any axes,
// arg-reductions, softmax, layer and RMS norm): a tensor seen as outputs by
// a reduction index, each output reduced either by one thread serially or
// by one workgroup cooperatively (strided reads, then subgroup operations
// where the target has subgroups, or a tree through shared memory). TE
// cannot bind reduction axes, so these kernels are written with
// the IR builder; the schedule is chosen by ChooseRowSchedule from the shape
// and the target's limits.
#pragma once

#include <functional>
#include <vector>

#include "kiln/ir/builder.h"
#include "kiln/ops/ops.h"

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
  // Indices into the tensor of element r of output o.
  std::vector<ir::Expr> Index(const ir::Expr& o, const ir::Expr& r) const;
  // Indices into the reduced tensor (keepdims: reduced axes of extent 1;
  // otherwise the kept axes only, or [0] when every axis is reduced).
  std::vector<ir::Expr> OutputIndex(const ir::Expr& o, bool keepdims) const;
  Shape OutputShape(bool keepdims) const;
};

struct RowSchedule {
  bool cooperative = false;  // a workgroup per output (else a thread per output)
  int64_t threads = 1;       // per workgroup
  int64_t cached = 0;        // values per thread kept in registers across passes (0: none)
  // Cooperative reductions by sum, max and min (Reduce) combine through
  // subgroup operations (the target has subgroups), else a shared tree.
  bool subgroups = false;
};

// A workgroup per output where the reduction is long enough to share:
// length >= 32 with contiguous (trailing) rows, or length >= 256 with fewer
// than 256 outputs otherwise; a thread per output elsewhere. `passes` > 1
// caches the thread's values in registers when that takes at most 16 of
// them, so that X is read once. Cooperative schedules use subgroups where
// the target has them.
RowSchedule ChooseRowSchedule(const RowView& view, const Target& target, int passes);

// f32 NaN test on the bits (safe from fast-math folding of x != x).
ir::Expr IsNan(const ir::Expr& x);
// f32 NaN or infinity test on the bits. WGSL lets compilers assume neither
// occurs, so `x - m` may fold to 0 where m is x itself (a one-element row);
// kernels whose IEEE result is NaN for such rows test a row statistic (the
// max, the mean) with this and give NaN.
ir::Expr IsNonFinite(const ir::Expr& x);
// NaN where `poisoned`, else `value` (f32).
ir::Expr NanIf(const ir::Expr& poisoned, const ir::Expr& value);

// Emits one kernel of the template into a builder whose parameters are
// already declared.
class RowKernel {
 public:
  using Values = std::vector<ir::Expr>;
  using CombineFn = std::function<Values(const Values& a, const Values& b)>;

  // `slots`: the dtypes of the values Combine will combine (one shared
  // array of `threads` each when cooperative).
  RowKernel(ir::IRBuilder& b, RowView view, RowSchedule schedule, std::vector<ir::DataType> slots);

  // The launch loops; `body` is emitted once, per (output, thread).
  void Emit(const std::function<void()>& body);
  // The output index o (inside Emit's body).
  const ir::Expr& output() const { return o_; }
  // True in the thread that writes the output's results.
  ir::Expr IsWriter() const;
  // A pass over this thread's share of the row: fn(r, x) with x the element
  // (loaded from X, or from the register cache after the first pass) as f32.
  void Pass(const ir::Buffer& x,
            const std::function<void(const ir::Expr& r, const ir::Expr& x)>& fn);
  // Per-thread values combined over the output's threads (identity in a
  // thread that saw no element); the results are let-bound and the same in
  // every thread of the output. Cooperative: a tree in shared memory.
  Values Combine(const Values& values, const CombineFn& combine);
  // One value per thread reduced over the output's threads by `op` ("sum",
  // "max", "min" or "prod"; max and min propagate NaN), like Combine with
  // ReduceCombine. Cooperative with subgroups (sum, max, min): each subgroup
  // reduces with subgroup_add/max/min, its lane 0 leaves the partial in a
  // shared slot (the others the identity), and after one barrier every
  // subgroup reduces the slots, lane l taking slots l, l + size, ...
  ir::Expr Reduce(std::string_view op, const ir::Expr& value);
  // Accumulators: a local array of `n` values of `dtype`, live for `body`.
  void Locals(const std::string& name, ir::DataType dtype, int64_t n,
              const std::function<void(const ir::Buffer&)>& body);

 private:
  ir::IRBuilder& b_;
  RowView view_;
  RowSchedule schedule_;
  std::vector<ir::DataType> slot_types_;
  std::vector<ir::Buffer> slots_;
  ir::Buffer cache_;
  ir::Buffer gather_;
  bool cache_filled_ = false;
  ir::Expr o_, tx_;
  int combines_ = 0;
};

// A reducer for the template: identity and combine in f32, NaN propagating
// for max and min.
ir::Expr ReduceIdentity(std::string_view op);
ir::Expr ReduceCombine(std::string_view op, const ir::Expr& acc, const ir::Expr& x);

}  // namespace kiln::ops::internal

namespace kiln::ops::internal {

// Simplifies and verifies a built kernel against the target's limits.
StatusOr<ir::Function> FinishKernel(const ir::IRBuilder& b, const Target& target);

// `axis` in [-rank, rank) made non-negative; errors name `what`.
StatusOr<int> NormalizeAxis(int64_t axis, int rank, std::string_view what);

}  // namespace kiln::ops::internal
