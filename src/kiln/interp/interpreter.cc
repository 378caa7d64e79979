#include "kiln/interp/interpreter.h"

#include <vector>

#include "kiln/interp/exec_state.h"
#include "kiln/interp/expr_code.h"
#include "kiln/interp/launch.h"
#include "kiln/interp/stmt_code.h"
#include "kiln/ir/printer.h"

namespace kiln::interp {
namespace {

// More threads than any WebGPU device allows in a workgroup, with room to
// spare; a larger product is a malformed kernel, not something to allocate for.
constexpr int64_t kMaxThreadsPerBlock = 1 << 16;

Lane LaneOf(const Value& value) {
  Lane lane;
  if (value.dtype.is_float()) {
    lane.f = value.f;
  } else {
    lane.i = value.i;
  }
  return lane;
}

void InitState(ExecState& state, const LaunchDims& dims, const CompileContext& context) {
  const int num_threads = static_cast<int>(dims.threads_per_block());
  state.num_threads = num_threads;
  state.workgroup_size = dims.threads;
  state.grid = dims.blocks;
  for (auto& index : state.thread_index) index.assign(num_threads, 0);
  for (int t = 0; t < num_threads; ++t) {
    // Linear local index t = x + X * (y + Y * z), as WGSL's local_invocation_index.
    state.thread_index[0][t] = t % dims.threads[0];
    state.thread_index[1][t] = (t / dims.threads[0]) % dims.threads[1];
    state.thread_index[2][t] = t / (dims.threads[0] * dims.threads[1]);
  }
  state.all_threads.assign(num_threads, 1);
  state.vars.resize(context.var_lanes().size());
  for (size_t slot = 0; slot < state.vars.size(); ++slot) {
    state.vars[slot].assign(static_cast<size_t>(num_threads) * context.var_lanes()[slot], Lane{0});
  }
  state.buffers.resize(context.num_buffer_slots());
}

// Binds a HostBuffer to a buffer parameter after checking it holds the
// parameter's element type and is large enough for the parameter's shape.
StatusOr<BufferBinding> BindHostBuffer(const ir::Buffer& param, HostBuffer& host,
                                       const ScalarBindings& scalars) {
  if (host.dtype != param.dtype()) {
    return InvalidArgument("buffer '", param.name(), "' holds ", param.dtype(),
                           " elements, got a buffer of ", host.dtype);
  }
  BufferBinding binding;
  binding.elem = param.dtype();
  binding.elem_bytes = param.dtype().StorageBytes();
  binding.data = host.bytes.data();
  if (host.bytes.size() % binding.elem_bytes != 0) {
    return InvalidArgument("buffer '", param.name(), "': ", host.bytes.size(),
                           " bytes is not a whole number of ", param.dtype(), " elements");
  }
  binding.num_elements = static_cast<int64_t>(host.bytes.size()) / binding.elem_bytes;
  std::vector<int64_t> shape;
  for (const ir::Expr& extent : param.shape()) {
    KILN_ASSIGN_OR_RETURN(Value v, EvaluateScalar(extent, scalars));
    if (v.AsInt() < 0) {
      return InvalidArgument("buffer '", param.name(), "' has extent `", ir::Print(extent),
                             "` = ", v.AsInt());
    }
    shape.push_back(v.AsInt());
  }
  std::vector<int64_t> strides;
  for (const ir::Expr& stride : param.strides()) {
    KILN_ASSIGN_OR_RETURN(Value v, EvaluateScalar(stride, scalars));
    strides.push_back(v.AsInt());
  }
  const int64_t required = SetLayout(binding, std::move(shape), std::move(strides));
  if (required == kLayoutOverflow) {
    return InvalidArgument("buffer '", param.name(),
                           "': its shape has more elements than 64 bits count");
  }
  if (binding.num_elements < required) {
    return InvalidArgument("buffer '", param.name(), "' needs ", required, " elements, got ",
                           binding.num_elements);
  }
  return binding;
}

}  // namespace

Status Run(const ir::Function& function, std::span<ArgValue> args, const RunOptions& options) {
  if (options.subgroup_size < 1) {
    return InvalidArgument("subgroup size ", options.subgroup_size, " is not positive");
  }
  KILN_ASSIGN_OR_RETURN(ScalarBindings scalars,
                        BindScalarArgs(function, std::span<const ArgValue>(args)));
  KILN_ASSIGN_OR_RETURN(LaunchDims dims, LaunchDimsFor(function, scalars));
  if (dims.threads_per_block() > kMaxThreadsPerBlock) {
    return InvalidArgument("'", function.name(), "' has ", dims.threads_per_block(),
                           " threads per workgroup");
  }

  CompileContext context(static_cast<int>(dims.threads_per_block()));
  const std::vector<ir::Param>& params = function.params();
  std::vector<int> slots(params.size());
  for (size_t p = 0; p < params.size(); ++p) {
    slots[p] = params[p].is_buffer() ? context.BindBuffer(params[p].buffer().get())
                                     : context.BindVar(params[p].var().get(), 1);
  }
  KILN_ASSIGN_OR_RETURN(StmtCodePtr body, CompileStmt(function.body(), context));

  ExecState state;
  InitState(state, dims, context);
  state.subgroup_size = options.subgroup_size;
  state.max_while_iterations = options.max_while_iterations;
  for (size_t p = 0; p < params.size(); ++p) {
    if (params[p].is_buffer()) {
      KILN_ASSIGN_OR_RETURN(
          state.buffers[slots[p]],
          BindHostBuffer(params[p].buffer(), std::get<HostBuffer>(args[p]), scalars));
    } else {
      std::vector<Lane>& slot = state.vars[slots[p]];
      std::fill(slot.begin(), slot.end(), LaneOf(std::get<Value>(args[p])));
    }
  }

  for (int64_t by = 0; by < dims.blocks[1]; ++by) {
    for (int64_t bx = 0; bx < dims.blocks[0]; ++bx) {
      state.block_index = {bx, by};
      KILN_RETURN_IF_ERROR_CTX(body->Exec(state, state.all_threads.data()), "'", function.name(),
                               "'");
    }
  }
  return Status::Ok();
}

StatusOr<Value> EvaluateScalar(const ir::Expr& expr,
                               const std::map<const ir::VarNode*, Value>& bindings) {
  if (!expr.defined()) return InvalidArgument("EvaluateScalar of a null expression");
  if (!expr.dtype().is_scalar()) {
    return InvalidArgument("`", ir::Print(expr), "` is not a scalar");
  }
  CompileContext context(1);
  for (const auto& [var, value] : bindings) context.BindVar(var, 1);
  KILN_ASSIGN_OR_RETURN(ExprCodePtr code, CompileExpr(expr, context));
  ExecState state;
  InitState(state, LaunchDims{}, context);
  for (const auto& [var, value] : bindings) {
    if (value.dtype != var->dtype) {
      return InvalidArgument("variable '", var->name, "' is a ", var->dtype, ", bound to a ",
                             value.dtype);
    }
    state.vars[context.FindVar(var)][0] = LaneOf(value);
  }
  const Lane* result;
  KILN_RETURN_IF_ERROR(code->Eval(state, state.all_threads.data(), &result));
  Value value;
  value.dtype = expr.dtype();
  if (value.dtype.is_float()) {
    value.f = result[0].f;
  } else {
    value.i = result[0].i;
  }
  return value;
}

}  // namespace kiln::interp
