// Tensor expressions: describe what a kernel computes as tensors defined
// element by element, schedule how its loops run (split, fuse, reorder,
// tile, bind, unroll, vectorize, inline, compute_at, cache_read/write,
// set_scope, rfactor, storage_align, double_buffer, copy_ahead,
// subgroup_reduce, fused_multiply_add), and lower the result to one verified
// ir::Function.
//
//   te::Var n = te::SizeVar("n");
//   te::Tensor A = te::Placeholder("A", {n}, ir::kF32);
//   te::Tensor B = te::Compute("B", {n}, [&](const auto& i) { return A(i[0]) * 2.0; });
//   auto s = te::Schedule::Create({B});              // StatusOr<Schedule>
//   auto [bx, tx] = *(*s)[B].Split((*s)[B].axis(0), 64);
//   (*s)[B].Bind(bx, te::ThreadAxis::kBlockX);
//   (*s)[B].Bind(tx, te::ThreadAxis::kThreadX);
//   auto f = te::Lower(*s, {B}, {A}, "double_it");   // StatusOr<ir::Function>
//
// Expressions are ordinary ir::Exprs: a tensor read `A(i, j)` is a load of
// the tensor's buffer, and compute bodies use the IR's operators and
// intrinsics. A reduction (Sum, Max, Min, Prod over ReduceAxis axes) may
// appear once in a compute body, anywhere in it (`Sum(X(i, k), {k}) / 4.0`).
//
// The schedule is data: each primitive is a record (Primitive) naming its
// stage and axes, so a schedule prints, compares and replays on a fresh
// Schedule of the same tensor program.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ir/buffer.h"
#include "kiln/ir/expr.h"
#include "kiln/ir/expr_ops.h"
#include "kiln/ir/function.h"
#include "kiln/ir/types.h"
#include "kiln/support/status.h"
#include "kiln/support/target_limits.h"

namespace kiln::te {

using ir::Expr;
using ir::Var;

// A symbolic size: an i32 scalar that becomes a scalar parameter of the
// lowered function when a shape uses it.
Var SizeVar(const std::string& name);

// An iteration axis: a loop variable with extent [0, extent). Data-parallel
// axes come from Compute's shape, reduction axes from ReduceAxis; split and
// fuse derive new ones. An identity object, like ir::Var.
class IterVarNode {
 public:
  Var var;
  Expr extent;
  bool is_reduce = false;
  std::string name;  // unique within its stage; what schedule records use
};
class IterVar {
 public:
  IterVar() = default;
  explicit IterVar(std::shared_ptr<IterVarNode> node) : node_(std::move(node)) {}
  bool defined() const { return node_ != nullptr; }
  const IterVarNode* get() const { return node_.get(); }
  const Var& var() const { return node_->var; }
  const Expr& extent() const { return node_->extent; }
  bool is_reduce() const { return node_->is_reduce; }
  const std::string& name() const { return node_->name; }
  bool same_as(const IterVar& o) const { return node_ == o.node_; }
  // The loop variable, so that an axis reads as an index: X(i, k).
  operator Expr() const { return node_->var; }  // NOLINT(google-explicit-constructor)

 private:
  std::shared_ptr<IterVarNode> node_;
};

// A reduction axis [0, extent) for Sum/Max/Min/Prod.
IterVar ReduceAxis(Expr extent, const std::string& name);

// Commutative, associative reductions with an identity. Each returns a
// placeholder expression that Compute recognises; use it only inside a
// compute body, at most once per body. Float Max and Min propagate NaN.
// DeviceMax and DeviceMin combine with the device's max and min (ir::Max,
// ir::Min, and subgroupMax/subgroupMin across threads), which leave NaN to
// the device: where the reduction meets a NaN, the result is NaN or the
// extremum of some of the other values. They cost one instruction per
// element where Max and Min cost a comparison, a NaN test and a select; use
// them for a statistic whose use catches a NaN anyway (softmax's maximum,
// whose row sum turns NaN from the NaN element itself). Integers: the same
// as Max and Min.
Expr Sum(Expr source, const std::vector<IterVar>& axes);
Expr Prod(Expr source, const std::vector<IterVar>& axes);
Expr Max(Expr source, const std::vector<IterVar>& axes);
Expr Min(Expr source, const std::vector<IterVar>& axes);
Expr DeviceMax(Expr source, const std::vector<IterVar>& axes);
Expr DeviceMin(Expr source, const std::vector<IterVar>& axes);
// `Sum(x, {k})`: a braced list of axes (not an ir::Expr).
Expr Sum(Expr source, std::initializer_list<IterVar> axes);
Expr Prod(Expr source, std::initializer_list<IterVar> axes);
Expr Max(Expr source, std::initializer_list<IterVar> axes);
Expr Min(Expr source, std::initializer_list<IterVar> axes);
Expr DeviceMax(Expr source, std::initializer_list<IterVar> axes);
Expr DeviceMin(Expr source, std::initializer_list<IterVar> axes);

// A user-defined commutative, associative reduction over one or more values
// (a tuple reducer when more than one, like argmax's (index, value)):
// `combine` maps the accumulated values and the next values to the new
// accumulated values, and `identity` gives each value's start. Lowering
// evaluates combine once per step, and a cross-thread reduction also
// combines two partial results with it (combine(partial, partial)): it must
// be associative and commutative, ties included (argmax breaks equal values
// by the smaller index, as below), or results depend on the order in which
// steps are combined.
struct CommReducer {
  std::string name;
  std::vector<Expr> identity;
  std::function<std::vector<Expr>(const std::vector<Expr>& acc, const std::vector<Expr>& next)>
      combine;
};
// One expression per value of the reduction of `sources` (one per value of
// the reducer) over `axes`; use them in a compute body (at most one
// reduction per body). E.g. an argmax:
//   CommReducer argmax{"argmax", {IntConst(kI32, 2147483647), FloatConst(kF32, -inf)},
//       [](auto& acc, auto& next) {
//         Expr take = next[1] > acc[1] || (next[1] == acc[1] && next[0] < acc[0]);
//         return std::vector<Expr>{Select(take, next[0], acc[0]),
//                                  Select(take, next[1], acc[1])}; }};
//   Compute("Y", {n}, [&](auto& i) { return Reduce(argmax, {k, X(i[0], k)}, {k})[0]; });
// Errors (reported by Schedule::Create): values, identities and combine's
// results that differ in number or type.
std::vector<Expr> Reduce(const CommReducer& reducer, const std::vector<Expr>& sources,
                         const std::vector<IterVar>& axes);

enum class ReducerKind : uint8_t { kSum, kProd, kMax, kMin, kDeviceMax, kDeviceMin, kCustom };
std::string_view ReducerName(ReducerKind kind);
// The reducer's identity in `dtype` (0, 1, -inf / lowest, +inf / highest).
Expr ReducerIdentity(ReducerKind kind, ir::DataType dtype);
// combine(acc, value). Float max and min propagate NaN (a NaN anywhere in
// the reduction gives NaN), unlike ir's min/max; device_max and device_min
// are ir's. With `multiply_add`, a
// float sum whose value is a product a * b combines as fma(a, b, acc).
Expr ReducerCombine(ReducerKind kind, const Expr& acc, const Expr& value,
                    bool multiply_add = false);

class Tensor;

// An operation producing one tensor: a placeholder (an input buffer) or a
// compute (one element per point of its shape).
class OperationNode {
 public:
  std::string name;
  bool is_placeholder = true;
  ir::Buffer buffer;                 // the tensor's storage: a parameter when materialised
  std::vector<IterVar> axis;         // compute: one per shape dimension
  std::vector<IterVar> reduce_axis;  // compute: the reduction's axes
  Expr body;                         // compute: the element value; uses reduce_var when reducing
  // A reduction: reduce_var stands for its result inside body.
  bool has_reduction = false;
  ReducerKind reducer = ReducerKind::kSum;
  Expr reduce_source;
  Var reduce_var;
  // kCustom: every value's source and result var (reduce_source and
  // reduce_var are the first), and combine's result per value in terms of
  // the accumulated values (custom_acc) and the next ones (custom_next).
  std::string custom_name;
  std::vector<Expr> reduce_sources;
  std::vector<Var> reduce_vars;
  std::vector<Var> custom_acc, custom_next;
  std::vector<Expr> custom_combine, custom_identity;
  std::vector<Tensor> inputs;  // tensors the body reads, in first-use order
  Status error;                // a malformed definition, reported by Schedule::Create
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<const OperationNode> op) : op_(std::move(op)) {}
  bool defined() const { return op_ != nullptr; }
  const OperationNode* op() const { return op_.get(); }
  const std::shared_ptr<const OperationNode>& op_ptr() const { return op_; }
  bool same_as(const Tensor& o) const { return op_ == o.op_; }
  const std::string& name() const { return op_->name; }
  ir::DataType dtype() const { return op_->buffer.dtype(); }
  const std::vector<Expr>& shape() const { return op_->buffer.shape(); }
  int rank() const { return op_->buffer.rank(); }
  const ir::Buffer& buffer() const { return op_->buffer; }

  // The element at `indices` (a load of the tensor's buffer).
  Expr operator()(std::vector<Expr> indices) const;
  template <typename... Ts>
  Expr operator()(const Ts&... indices) const {
    return (*this)(std::vector<Expr>{Expr(indices)...});
  }

 private:
  std::shared_ptr<const OperationNode> op_;
};

Tensor Placeholder(const std::string& name, std::vector<Expr> shape, ir::DataType dtype);

// Defines each element of a tensor of `shape`. fcompute receives one i32
// index var per dimension (named i, j for rank 1 and 2, i0, i1, ... beyond,
// unless `axis_names` says).
using ComputeFn = std::function<Expr(const std::vector<Var>&)>;
Tensor Compute(const std::string& name, std::vector<Expr> shape, const ComputeFn& fcompute,
               std::vector<std::string> axis_names = {});

// ---------------------------------------------------------------------------
// Schedules

enum class ThreadAxis : uint8_t { kBlockX, kBlockY, kThreadX, kThreadY };
std::string_view ThreadAxisName(ThreadAxis axis);  // "blockIdx.x", ...
StatusOr<ThreadAxis> ThreadAxisFromName(std::string_view name);

// Where a stage's values live: global (an output's buffer), shared (one
// array per workgroup) or local (one per thread). "global", "shared", "local".
std::string_view ScopeName(ir::MemoryScope scope);
StatusOr<ir::MemoryScope> ScopeFromName(std::string_view name);

// One schedule primitive, as data.
struct Primitive {
  enum class Kind : uint8_t {
    kSplit,
    kFuse,
    kReorder,
    kBind,
    kUnroll,
    kComputeInline,
    kVectorize,
    kComputeAt,
    kCacheRead,
    kCacheWrite,
    kSetScope,
    kStorageAlign,
    kDoubleBuffer,
    kRfactor,
    kSubgroupReduce,
    kCopyAhead,
    kFusedMultiplyAdd,
  };
  Kind kind = Kind::kSplit;
  std::string stage;              // cache_read: the tensor read
  std::vector<std::string> axes;  // split/bind/unroll/vectorize/compute_at/storage_align/rfactor:
                                  // 1; fuse: 2; reorder: any; cache_read: the readers
  int64_t factor = 0;             // split, storage_align; double_buffer: 1 if branch-free;
                                  // copy_ahead: its LastCopy
  std::string thread;             // bind: "blockIdx.x", ...
  std::string target;             // compute_at: the consumer stage
  std::string scope;              // cache_read/cache_write/set_scope: "shared", "local";
                                  // copy_ahead: "registers" or empty
  int64_t offset = 0;             // storage_align

  // "C.split(i, 16)", "C.bind(i_outer, blockIdx.x)", "C.vectorize(i_inner)",
  // "B.compute_inline()", "A_shared.compute_at(C, k_outer)",
  // "A.cache_read(shared, C)", "C.cache_write(local)",
  // "A_shared.storage_align(i, 32, 1)", "A_shared.double_buffer()",
  // "A_shared.double_buffer(branch_free)",
  // "A_shared.copy_ahead()", "A_shared.copy_ahead(registers)",
  // "A_shared.copy_ahead(registers, branch_free)", "A_shared.copy_ahead(registers, no_branch)",
  // "A_shared.copy_ahead(registers, peeled)",
  // "C.rfactor(k_inner)", "C.subgroup_reduce()", "C.fused_multiply_add()".
  std::string ToString() const;
  // The kind as records print it: "split", "compute_at", ...
  static std::string_view KindName(Kind kind);
  friend bool operator==(const Primitive&, const Primitive&) = default;
};

// The record `text` in Primitive::ToString's form ("C.split(i, 16)",
// "A.cache_read(shared, C, D)"), for Schedule::Apply. Names are not
// checked here (Apply resolves them); the stage's name ends at the first
// ".<kind>(" and the arguments are separated by ", ", so a record whose
// names hold ", " or a parenthesis is refused as ambiguous, and only text
// the parsed record prints back as is accepted. Errors name the record
// and what is wrong with it.
StatusOr<Primitive> ParsePrimitive(std::string_view text);

// What a copy ahead through registers (Stage::CopyAhead) does in the
// loop's last iteration, which has no next values to copy.
enum class LastCopy : uint8_t {
  // The loads and the stores sit under a branch that skips them there
  // ("copy_ahead(registers)").
  kSkipped,
  // No branch around the loads: every iteration loads, the last its own
  // values again (the loop index clamped to the last); the stores stay
  // under the branch ("copy_ahead(registers, branch_free)").
  kLoadsAgain,
  // ... and no branch around the stores either: the last iteration stores
  // its own values again after its math ("copy_ahead(registers, no_branch)").
  kStoresAgain,
  // The loop runs one iteration fewer, every one copying under no branch,
  // and the last iteration's math (without copies) follows the loop
  // ("copy_ahead(registers, peeled)"): a larger kernel without clamps.
  kPeeled,
};
// "", "branch_free", "no_branch", "peeled".
std::string_view LastCopyName(LastCopy last);
// The LastCopy of a name LastCopyName gives (not the empty one); an error
// naming the choices.
StatusOr<LastCopy> LastCopyFromName(std::string_view name);

class Schedule;
struct ScheduleState;
struct StageState;

struct SplitResult {
  IterVar outer, inner;
};

// A handle to one stage of a Schedule (a compute tensor). Every primitive
// checks its arguments and returns an error naming the stage, the axis and
// the reason, leaving the schedule as it was. A stage refers to its
// schedule's state, which moving the schedule carries along: it stays valid
// while the schedule it came from, or the one that schedule was moved into,
// lives.
class Stage {
 public:
  const std::string& name() const;
  // Root axes of the compute (before any split or fuse).
  IterVar axis(int i) const;
  IterVar reduce_axis(int i) const;
  // All root axes (cache_write and rfactor change a stage's reduction axes).
  std::vector<IterVar> axes() const;
  std::vector<IterVar> reduce_axes() const;
  // The current loop nest, outermost first.
  std::vector<IterVar> leaf_axes() const;

  // outer = axis / factor (extent ceil(extent / factor)), inner = axis % factor.
  // Where factor does not divide the extent, the body is guarded.
  StatusOr<SplitResult> Split(const IterVar& axis, int64_t factor);
  // A split into `nparts` parts: by the factor ceil(extent / nparts), which
  // is what the schedule records, so the outer axis has at most nparts
  // iterations (ceil(extent / factor)). The extent must be a constant.
  StatusOr<SplitResult> SplitParts(const IterVar& axis, int64_t nparts);
  // Two adjacent leaf axes (outer directly around inner) of the same kind.
  StatusOr<IterVar> Fuse(const IterVar& outer, const IterVar& inner);
  // The given leaf axes take the positions they occupy, in the given order.
  // A reduction axis may go outside a data axis only in a stage whose value
  // is its reduction itself (it then accumulates in place).
  Status Reorder(const std::vector<IterVar>& order);
  // A data axis to a launch axis; a reduction axis to threadIdx.x only (a
  // cross-thread reduction, one per stage, its reduction loops innermost).
  // The stages of one kernel bind a launch axis with one extent (checked
  // when lowering, where computed-at stages have their regions' extents).
  Status Bind(const IterVar& axis, ThreadAxis thread);
  Status Unroll(const IterVar& axis);
  // A data-parallel leaf axis of constant extent 2, 3 or 4 becomes a
  // vectorized loop: its lanes run as one vector operation. It must be the
  // innermost data-parallel leaf (checked here and again when lowering, as a
  // later reorder or split may move it). A reduction stage's data axis
  // vectorizes only as its innermost loop with every reduction loop outside
  // it (results accumulated in place, as a register tile's are); lowering
  // rejects it elsewhere. Where a split guard exists, lowering runs the vector body when
  // the last lane is in bounds and a guarded serial loop over the lanes
  // otherwise.
  Status Vectorize(const IterVar& axis);
  Status ComputeInline();

  // Tiles two adjacent data-parallel leaves: splits `x` by `x_factor` and
  // `y` by `y_factor`, then orders them x_outer, y_outer, x_inner, y_inner
  // (three records: two splits and a reorder).
  struct TileResult {
    IterVar x_outer, y_outer, x_inner, y_inner;
  };
  StatusOr<TileResult> Tile(const IterVar& x, const IterVar& y, int64_t x_factor, int64_t y_factor);

  // Computes this stage inside loop `axis` of `consumer`: at each iteration
  // of that loop, the part of this stage the consumer's loops inside it read
  // (found by bounds inference) is computed into a buffer of this stage's
  // scope (local unless set: cache_read/cache_write/SetScope), and the
  // consumer reads it there. A shared stage also covers the reads of every
  // thread of the workgroup, and barriers surround its computation. Its own
  // loops bound to a launch axis the consumer binds around `axis` run as
  // that launch index. The region must have a constant size (split the
  // consumer's loops by constants). Errors: an output, an inlined stage, a
  // consumer that does not read this stage, a vectorized `axis`.
  Status ComputeAt(const Stage& consumer, const IterVar& axis);
  // The memory scope of a stage computed at another stage's loop (shared or
  // local; an output stays global).
  Status SetScope(ir::MemoryScope scope);
  // Pads the stage's buffer so that the stride of dimension `axis` (a root
  // data axis) is `offset` modulo `factor` (e.g. 32, 1: rows of a shared
  // tile start in different banks). Only for shared and local stages.
  Status StorageAlign(const IterVar& axis, int64_t factor, int64_t offset);
  // A shared stage computed at a serial loop keeps two buffers, alternating
  // by the loop's parity, and the loop is software-pipelined: the first
  // iteration's copy runs before the loop, and each iteration, after one
  // barrier, copies the next iteration's values into the other buffer while
  // computing from its own. Lowering rejects a double-buffered stage that
  // reads a single-buffered one computed at the same loop. The next
  // iteration's loads go through registers (issued before the math, stored
  // after it) under a branch that skips them in the last iteration;
  // `branch_free`: every iteration loads, the last its own values again
  // (a clamped index), and stores them into the half nothing reads any
  // more, so neither the loads nor the stores sit under a branch.
  Status DoubleBuffer(bool branch_free = false);
  // A single-buffered shared stage computed at a serial loop is copied one
  // iteration ahead: the first iteration's copy runs before the loop, and
  // each iteration computes, then (after a barrier) copies the next
  // iteration's values, then a barrier. The same copies and barriers as at
  // the top of each iteration, in another order, which some shader
  // compilers schedule better. Every stage computed at that loop must be
  // copied ahead, and each may read only the kernel's inputs (lowering
  // checks both). With `through_registers`, the next iteration's values are
  // loaded into registers before the iteration computes and stored after
  // it, so the loads are in flight during the computation (recorded as
  // "A_shared.copy_ahead(registers)"); a copy of more than 64 values per
  // thread, or not a plain nest of loops and guards around its stores, is
  // copied directly as without. The loads sit under a branch that skips them
  // at the last iteration; `branch_free` drops it: every iteration loads,
  // the last one its own values again (the loop index clamped to the last),
  // which some shader compilers schedule better ("copy_ahead(registers,
  // branch_free)"; needs `through_registers`). The second form chooses
  // among every treatment of the last iteration (LastCopy).
  Status CopyAhead(bool through_registers = false, bool branch_free = false);
  Status CopyAhead(bool through_registers, LastCopy last);
  // The stage's cross-thread reduction (a reduction axis bound to
  // threadIdx.x) combines through subgroup operations instead of a
  // shared-memory tree: each subgroup reduces its threads' partials, one
  // barrier, then every subgroup reduces the subgroups' results. Sum, max
  // and min use the subgroup built-ins (float max/min still propagate NaN);
  // any other reducer, prod and tuple reducers included, a butterfly of
  // subgroup_shuffle. The kernel then needs
  // the device's subgroups feature. Lowering checks that the reduction axis
  // is the workgroup's only thread axis.
  Status SubgroupReduce();
  // The stage's float sum of products `Sum(a * b)` accumulates as
  // `fma(a, b, acc)`: one rounding per step instead of two, and one
  // instruction the shader compiler need not contract by itself (some do
  // not, and run the multiply and the add apart). Partial sums combined
  // across threads still add. Errors: a stage that is not a float sum
  // whose source is a product.
  Status FusedMultiplyAdd();

 private:
  friend class Schedule;
  Stage(ScheduleState* schedule, std::string name) : schedule_(schedule), name_(std::move(name)) {}
  StageState& state() const;
  ScheduleState* schedule_;
  std::string name_;  // stages are found by name: cache_read and rfactor add stages
};

class Schedule {
 public:
  // A schedule of every compute reachable from `outputs`, nothing applied.
  // Errors: a malformed compute definition (two reductions in one body, a
  // reduction axis outside any reduction, ...).
  static StatusOr<Schedule> Create(const std::vector<Tensor>& outputs);

  Schedule(const Schedule&);
  Schedule& operator=(const Schedule&);
  Schedule(Schedule&&) noexcept;
  Schedule& operator=(Schedule&&) noexcept;
  ~Schedule();

  // The stage of a compute tensor of this schedule; KILN_CHECKs that it is one.
  Stage operator[](const Tensor& tensor);
  // The stage named `name`, or an error.
  StatusOr<Stage> FindStage(const std::string& name);
  // The stage of `tensor` itself (not of another program's tensor of the
  // same name), or an error.
  StatusOr<Stage> FindStage(const Tensor& tensor);

  // A stage `<tensor>_<scope>` that copies `tensor` into `scope` (shared or
  // local) and that `readers` read instead of it; compute_at places it.
  StatusOr<Tensor> CacheRead(const Tensor& tensor, ir::MemoryScope scope,
                             const std::vector<Tensor>& readers);
  // Moves the computation of `tensor` (a stage with no primitives applied
  // yet) into a new stage `<tensor>_<scope>`; `tensor`'s stage becomes a
  // copy of it, keeping its axes. The usual use: a local accumulator tile
  // computed at the copy's loop.
  StatusOr<Tensor> CacheWrite(const Tensor& tensor, ir::MemoryScope scope);
  // Factors a reduction: `axis` (a reduction leaf of `tensor` made by
  // splitting one root reduction axis, `k` into `k_outer` and `k_inner`)
  // becomes a data axis of a new stage `<tensor>_rf`[axis extent, ...shape]
  // that reduces over the other reduction axes; `tensor` then reduces
  // `<tensor>_rf` over a new axis `<axis>_r` of the same extent. Binding that
  // axis to threadIdx.x makes a cross-thread reduction (a shared-memory tree).
  // `tensor`'s data-axis primitives are kept; its reduction leaves are
  // replaced.
  StatusOr<Tensor> Rfactor(const Tensor& tensor, const IterVar& axis);

  // Applies one recorded primitive (names resolved in this schedule).
  Status Apply(const Primitive& primitive);
  // Applies them in order; stops at the first error.
  Status Apply(const std::vector<Primitive>& primitives);
  // Applies the records of `text`, one per line as ToString prints them
  // (blank lines skipped), in order; on an error, naming the record's line,
  // the schedule is left as it was.
  Status ApplyText(std::string_view text);

  const std::vector<Primitive>& primitives() const;
  const std::vector<Tensor>& outputs() const;
  // One primitive per line, in the order applied.
  std::string ToString() const;
  friend bool operator==(const Schedule& a, const Schedule& b) {
    return a.primitives() == b.primitives();
  }

  using Impl = ScheduleState;
  const Impl& impl() const { return *impl_; }

 private:
  friend class Stage;
  Schedule();
  std::unique_ptr<Impl> impl_;
};

// Lowers the schedule's stages that produce `outputs` to one function whose
// parameters are `inputs` (placeholders), then `outputs` (buffers), then the
// size vars their shapes and bodies use (i32 scalars, in order of first
// use). Bound axes become launch loops (blocks outside threads), every other
// axis a serial, unrolled or vectorized loop in leaf order. The result
// passes ir::Verify. Errors: a placeholder read but not in `inputs`, a
// compute read that is neither inlined, computed at another stage nor an
// output, more than one root stage (see LowerKernels), a vectorized axis
// that is no longer the innermost data-parallel leaf. The function is
// verified against `limits` (workgroup size and shared memory; WebGPU's
// defaults unless given).
StatusOr<ir::Function> Lower(const Schedule& schedule, const std::vector<Tensor>& outputs,
                             const std::vector<Tensor>& inputs, const std::string& name,
                             const TargetLimits& limits = TargetLimits{});

// Several launches: every stage that is neither inlined nor computed at
// another stage's loop becomes a kernel of its own, `<name>_<stage>`, in
// stage order (producers first). A stage that is not an output is an
// intermediate: a global tensor that its kernel writes and later kernels
// read. Each kernel's parameters are the inputs and earlier intermediates
// it reads (in the order of `inputs`, then of the intermediates), its own
// result, then the size vars it uses. Run the functions in order, each
// intermediate allocated by the caller.
struct Kernels {
  std::vector<ir::Function> functions;
  std::vector<Tensor> intermediates;
};
StatusOr<Kernels> LowerKernels(const Schedule& schedule, const std::vector<Tensor>& outputs,
                               const std::vector<Tensor>& inputs, const std::string& name,
                               const TargetLimits& limits = TargetLimits{});

}  // namespace kiln::te
