#include "kiln/interp/stmt_code.h"

#include <algorithm>
#include <new>
#include <vector>

#include "kiln/interp/buffer_access.h"
#include "kiln/interp/expr_code.h"
#include "kiln/interp/wgsl_semantics.h"
#include "kiln/ir/printer.h"

namespace kiln::interp {
namespace {

class SeqCode : public StmtCode {
 public:
  explicit SeqCode(std::vector<StmtCodePtr> stmts) : stmts_(std::move(stmts)) {}
  Status Exec(ExecState& state, const uint8_t* mask) override {
    for (const StmtCodePtr& stmt : stmts_) KILN_RETURN_IF_ERROR(stmt->Exec(state, mask));
    return Status::Ok();
  }

 private:
  std::vector<StmtCodePtr> stmts_;
};

// Stores each active thread's value of `value` into variable slot `slot`.
Status Bind(ExecState& state, const uint8_t* mask, ExprCode& value, int slot) {
  const Lane* v;
  KILN_RETURN_IF_ERROR(value.Eval(state, mask, &v));
  Lane* out = state.vars[slot].data();
  const int lanes = value.lanes();
  for (int t = 0; t < state.num_threads; ++t) {
    if (mask[t] == 0) continue;
    std::copy(v + t * lanes, v + (t + 1) * lanes, out + t * lanes);
  }
  return Status::Ok();
}

class LetStmtCode : public StmtCode {
 public:
  LetStmtCode(int slot, ExprCodePtr value, StmtCodePtr body)
      : slot_(slot), value_(std::move(value)), body_(std::move(body)) {}
  Status Exec(ExecState& state, const uint8_t* mask) override {
    KILN_RETURN_IF_ERROR(Bind(state, mask, *value_, slot_));
    return body_->Exec(state, mask);
  }

 private:
  int slot_;
  ExprCodePtr value_;
  StmtCodePtr body_;
};

class StoreCode : public StmtCode {
 public:
  StoreCode(BufferAccess access, ExprCodePtr value, int num_threads)
      : access_(std::move(access)),
        value_(std::move(value)),
        offsets_(static_cast<size_t>(num_threads) * access_.lanes()) {}

  Status Exec(ExecState& state, const uint8_t* mask) override {
    KILN_RETURN_IF_ERROR(access_.Offsets(state, mask, offsets_.data()));
    const Lane* v;
    KILN_RETURN_IF_ERROR(value_->Eval(state, mask, &v));
    const BufferBinding& binding = state.buffers[access_.buffer_slot()];
    const int lanes = access_.lanes();
    for (int t = 0; t < state.num_threads; ++t) {
      if (mask[t] == 0) continue;
      for (int l = t * lanes; l < (t + 1) * lanes; ++l) {
        StoreElement(binding.elem, v[l], binding.data + offsets_[l] * binding.elem_bytes);
      }
    }
    return Status::Ok();
  }

 private:
  BufferAccess access_;
  ExprCodePtr value_;
  std::vector<int64_t> offsets_;
};

// alloc: zero-filled storage, per thread (local), per execution (shared, so
// per workgroup) or once per launch (global).
class AllocateCode : public StmtCode {
 public:
  AllocateCode(const ir::Buffer& buffer, int slot, std::vector<ExprCodePtr> shape,
               std::vector<ExprCodePtr> strides, StmtCodePtr body)
      : buffer_(buffer),
        slot_(slot),
        shape_(std::move(shape)),
        strides_(std::move(strides)),
        body_(std::move(body)) {}

  Status Exec(ExecState& state, const uint8_t* mask) override {
    if (!AnyActive(mask, state.num_threads)) return Status::Ok();
    const bool per_launch = buffer_.scope() == ir::MemoryScope::kGlobal;
    if (!per_launch || storage_.empty()) {
      BufferBinding binding;
      binding.elem = buffer_.dtype();
      binding.elem_bytes = buffer_.dtype().StorageBytes();
      binding.per_thread = buffer_.scope() == ir::MemoryScope::kLocal;
      KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, Uniform(state, mask, shape_, "shape"));
      KILN_ASSIGN_OR_RETURN(std::vector<int64_t> strides,
                            Uniform(state, mask, strides_, "strides"));
      for (int64_t extent : shape) {
        if (extent < 0) {
          return InvalidArgument("alloc of '", buffer_.name(), "' with negative extent ", extent);
        }
      }
      binding.num_elements = SetLayout(binding, std::move(shape), std::move(strides));
      if (binding.num_elements < 0) {
        return InvalidArgument("alloc of '", buffer_.name(), "' with negative strides");
      }
      const int64_t copies = binding.per_thread ? state.num_threads : 1;
      int64_t bytes = 0;
      if (binding.num_elements == kLayoutOverflow ||
          __builtin_mul_overflow(binding.num_elements, copies, &bytes) ||
          __builtin_mul_overflow(bytes, int64_t{binding.elem_bytes}, &bytes)) {
        return InvalidArgument("alloc of '", buffer_.name(),
                               "' needs more bytes than 64 bits count");
      }
      try {
        storage_.assign(static_cast<size_t>(bytes), 0);
      } catch (const std::bad_alloc&) {
        return OutOfMemory("alloc of '", buffer_.name(), "': no host memory for ", bytes, " bytes");
      }
      binding.data = storage_.data();
      binding_ = std::move(binding);
    }
    state.buffers[slot_] = binding_;
    return body_->Exec(state, mask);
  }

 private:
  // Evaluates shape or stride expressions, which must agree across threads.
  StatusOr<std::vector<int64_t>> Uniform(ExecState& state, const uint8_t* mask,
                                         std::vector<ExprCodePtr>& exprs, const char* what) {
    std::vector<int64_t> values;
    for (ExprCodePtr& expr : exprs) {
      const Lane* v;
      KILN_RETURN_IF_ERROR(expr->Eval(state, mask, &v));
      int first = -1;
      for (int t = 0; t < state.num_threads; ++t) {
        if (mask[t] == 0) continue;
        if (first < 0) {
          first = t;
        } else if (v[t].i != v[first].i) {
          return InvalidArgument("alloc of '", buffer_.name(), "': ", what,
                                 " differs between threads (", state.Where(first), " and ",
                                 state.Where(t), ")");
        }
      }
      values.push_back(v[first].i);
    }
    return values;
  }

  ir::Buffer buffer_;
  int slot_;
  std::vector<ExprCodePtr> shape_;
  std::vector<ExprCodePtr> strides_;
  StmtCodePtr body_;
  std::vector<uint8_t> storage_;
  BufferBinding binding_;
};

// A serial (or unrolled, or vectorized) loop. Each thread has its own bounds;
// the loop runs while any thread still iterates.
class SerialForCode : public StmtCode {
 public:
  SerialForCode(int slot, ir::DataType type, ExprCodePtr min, ExprCodePtr extent,
                ExprCodePtr step, StmtCodePtr body, int num_threads)
      : slot_(slot),
        bits_(type.bits),
        is_signed_(type.is_int()),
        min_(std::move(min)),
        extent_(std::move(extent)),
        step_(std::move(step)),
        body_(std::move(body)),
        counter_(num_threads),
        end_(num_threads),
        step_value_(num_threads),
        active_(num_threads) {}

  Status Exec(ExecState& state, const uint8_t* mask) override {
    const Lane* min;
    const Lane* extent;
    const Lane* step;
    KILN_RETURN_IF_ERROR(min_->Eval(state, mask, &min));
    KILN_RETURN_IF_ERROR(extent_->Eval(state, mask, &extent));
    KILN_RETURN_IF_ERROR(step_->Eval(state, mask, &step));
    const int num_threads = state.num_threads;
    for (int t = 0; t < num_threads; ++t) {
      if (mask[t] == 0) continue;
      // The loop runs ceil(extent / step) times (none when extent <= 0),
      // whatever min is: end_ counts what is left of the extent, and the
      // variable wraps in its type like any integer.
      counter_[t] = min[t].i;
      end_[t] = extent[t].i;
      step_value_[t] = step[t].i;
      if (step_value_[t] <= 0) {
        return InvalidArgument("loop step ", step_value_[t], " is not positive (", state.Where(t),
                               ")");
      }
    }
    Lane* var = state.vars[slot_].data();
    for (;;) {
      bool any = false;
      for (int t = 0; t < num_threads; ++t) {
        active_[t] = mask[t] != 0 && end_[t] > 0;
        if (active_[t] != 0) {
          var[t].i = WrapInt(static_cast<uint64_t>(counter_[t]), bits_, is_signed_);
          any = true;
        }
      }
      if (!any) return Status::Ok();
      KILN_RETURN_IF_ERROR(body_->Exec(state, active_.data()));
      for (int t = 0; t < num_threads; ++t) {
        if (active_[t] != 0) {
          counter_[t] = static_cast<int64_t>(static_cast<uint64_t>(counter_[t]) +
                                             static_cast<uint64_t>(step_value_[t]));
          end_[t] -= step_value_[t];  // > 0 before, so this cannot overflow
        }
      }
    }
  }

 private:
  int slot_;
  int bits_;
  bool is_signed_;
  ExprCodePtr min_;
  ExprCodePtr extent_;
  ExprCodePtr step_;
  StmtCodePtr body_;
  std::vector<int64_t> counter_;
  std::vector<int64_t> end_;
  std::vector<int64_t> step_value_;
  std::vector<uint8_t> active_;
};

// A thread-bound loop: binds its variable to the thread's (or workgroup's)
// index on its axis and runs the body once.
class LaunchForCode : public StmtCode {
 public:
  LaunchForCode(ir::LoopKind kind, int slot, ExprCodePtr extent, StmtCodePtr body)
      : kind_(kind),
        axis_(ir::LaunchAxis(kind)),
        slot_(slot),
        extent_(std::move(extent)),
        body_(std::move(body)) {}

  Status Exec(ExecState& state, const uint8_t* mask) override {
    const Lane* extent;
    KILN_RETURN_IF_ERROR(extent_->Eval(state, mask, &extent));
    const bool is_thread = ir::IsThreadIdx(kind_);
    const int64_t launch_extent = is_thread ? state.workgroup_size[axis_] : state.grid[axis_];
    Lane* var = state.vars[slot_].data();
    for (int t = 0; t < state.num_threads; ++t) {
      if (mask[t] == 0) continue;
      if (extent[t].i != launch_extent) {
        return InvalidArgument(ir::LoopKindName(kind_), " loop with extent ", extent[t].i,
                               " in a launch whose extent on that axis is ", launch_extent, " (",
                               state.Where(t), ")");
      }
      var[t].i = is_thread ? state.thread_index[axis_][t] : state.block_index[axis_];
    }
    return body_->Exec(state, mask);
  }

 private:
  ir::LoopKind kind_;
  int axis_;
  int slot_;
  ExprCodePtr extent_;
  StmtCodePtr body_;
};

class WhileCode : public StmtCode {
 public:
  WhileCode(ExprCodePtr cond, StmtCodePtr body, int num_threads)
      : cond_(std::move(cond)), body_(std::move(body)), active_(num_threads) {}

  Status Exec(ExecState& state, const uint8_t* mask) override {
    const int num_threads = state.num_threads;
    std::copy(mask, mask + num_threads, active_.begin());
    for (int64_t iterations = 0;; ++iterations) {
      const Lane* cond;
      KILN_RETURN_IF_ERROR(cond_->Eval(state, active_.data(), &cond));
      bool any = false;
      for (int t = 0; t < num_threads; ++t) {
        active_[t] = active_[t] != 0 && cond[t].i != 0;
        any |= active_[t] != 0;
      }
      if (!any) return Status::Ok();
      if (iterations >= state.max_while_iterations) {
        return DeadlineExceeded("while (", ir::Print(cond_->expr()), ") ran more than ",
                                state.max_while_iterations, " iterations (block (",
                                state.block_index[0], ", ", state.block_index[1], "))");
      }
      KILN_RETURN_IF_ERROR(body_->Exec(state, active_.data()));
    }
  }

 private:
  ExprCodePtr cond_;
  StmtCodePtr body_;
  std::vector<uint8_t> active_;
};

class IfCode : public StmtCode {
 public:
  IfCode(ExprCodePtr cond, StmtCodePtr then_case, StmtCodePtr else_case, int num_threads)
      : cond_(std::move(cond)),
        then_(std::move(then_case)),
        else_(std::move(else_case)),
        then_mask_(num_threads),
        else_mask_(num_threads) {}

  Status Exec(ExecState& state, const uint8_t* mask) override {
    const Lane* cond;
    KILN_RETURN_IF_ERROR(cond_->Eval(state, mask, &cond));
    bool any_then = false;
    bool any_else = false;
    for (int t = 0; t < state.num_threads; ++t) {
      then_mask_[t] = mask[t] != 0 && cond[t].i != 0;
      else_mask_[t] = mask[t] != 0 && cond[t].i == 0;
      any_then |= then_mask_[t] != 0;
      any_else |= else_mask_[t] != 0;
    }
    if (any_then) KILN_RETURN_IF_ERROR(then_->Exec(state, then_mask_.data()));
    if (any_else && else_ != nullptr) KILN_RETURN_IF_ERROR(else_->Exec(state, else_mask_.data()));
    return Status::Ok();
  }

 private:
  ExprCodePtr cond_;
  StmtCodePtr then_;
  StmtCodePtr else_;  // may be null
  std::vector<uint8_t> then_mask_;
  std::vector<uint8_t> else_mask_;
};

// In lockstep every thread that reaches a barrier is already synchronised;
// what remains to check is that all threads of the workgroup reach it.
class BarrierCode : public StmtCode {
 public:
  explicit BarrierCode(const ir::Stmt& stmt) : stmt_(stmt) {}
  Status Exec(ExecState& state, const uint8_t* mask) override {
    int reached = 0;
    int missing = -1;
    for (int t = 0; t < state.num_threads; ++t) {
      if (mask[t] != 0) {
        ++reached;
      } else if (missing < 0) {
        missing = t;
      }
    }
    if (missing >= 0) {
      std::string text = ir::Print(stmt_);
      while (!text.empty() && text.back() == '\n') text.pop_back();
      return InvalidArgument("`", text, "` reached by ", reached, " of ", state.num_threads,
                             " threads of the workgroup (non-uniform control flow; ",
                             state.Where(missing), " does not reach it)");
    }
    return Status::Ok();
  }

 private:
  ir::Stmt stmt_;
};

class AssertCode : public StmtCode {
 public:
  AssertCode(ExprCodePtr cond, std::string message)
      : cond_(std::move(cond)), message_(std::move(message)) {}
  Status Exec(ExecState& state, const uint8_t* mask) override {
    const Lane* cond;
    KILN_RETURN_IF_ERROR(cond_->Eval(state, mask, &cond));
    for (int t = 0; t < state.num_threads; ++t) {
      if (mask[t] != 0 && cond[t].i == 0) {
        return InvalidArgument("assertion failed: ", message_, " (`", ir::Print(cond_->expr()),
                               "`, ", state.Where(t), ")");
      }
    }
    return Status::Ok();
  }

 private:
  ExprCodePtr cond_;
  std::string message_;
};

class EvaluateCode : public StmtCode {
 public:
  explicit EvaluateCode(ExprCodePtr value) : value_(std::move(value)) {}
  Status Exec(ExecState& state, const uint8_t* mask) override {
    const Lane* ignored;
    return value_->Eval(state, mask, &ignored);
  }

 private:
  ExprCodePtr value_;
};

Status IllTypedStmt(const ir::Stmt& stmt, std::string_view why) {
  std::string text = ir::Print(stmt);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return InvalidArgument("ill-typed statement `", text, "`: ", why);
}

StatusOr<ExprCodePtr> CompileScalarBool(const ir::Stmt& stmt, const ir::Expr& cond,
                                        CompileContext& context) {
  KILN_ASSIGN_OR_RETURN(ExprCodePtr code, CompileExpr(cond, context));
  if (code->dtype() != ir::kBool) return IllTypedStmt(stmt, "the condition is not a scalar bool");
  return code;
}

StatusOr<StmtCodePtr> CompileFor(const ir::Stmt& stmt, CompileContext& context) {
  const auto* op = stmt.as<ir::ForNode>();
  const int num_threads = context.num_threads();
  if (!op->loop_var.dtype().is_integer() || !op->loop_var.dtype().is_scalar()) {
    return IllTypedStmt(stmt, "the loop variable is not a scalar integer");
  }
  KILN_ASSIGN_OR_RETURN(ExprCodePtr min, CompileExpr(op->min, context));
  KILN_ASSIGN_OR_RETURN(ExprCodePtr extent, CompileExpr(op->extent, context));
  ExprCodePtr step;
  if (op->step.defined()) {
    KILN_ASSIGN_OR_RETURN(step, CompileExpr(op->step, context));
  } else {
    KILN_ASSIGN_OR_RETURN(step, CompileExpr(ir::MakeOne(op->loop_var.dtype()), context));
  }
  for (const ExprCode* bound : {min.get(), extent.get(), step.get()}) {
    if (bound->dtype() != op->loop_var.dtype()) {
      return IllTypedStmt(stmt, "loop bounds do not have the loop variable's type");
    }
  }
  const int slot = context.BindVar(op->loop_var.get(), 1);
  auto body = CompileStmt(op->body, context);
  context.UnbindVar(op->loop_var.get());
  if (!body.ok()) return body.status();
  if (ir::IsThreadBinding(op->kind)) {
    if (ir::LaunchAxis(op->kind) > (ir::IsThreadIdx(op->kind) ? 2 : 1)) {
      return Unimplemented("blockIdx.z is reserved by the kernel ABI");
    }
    return StmtCodePtr(
        new LaunchForCode(op->kind, slot, std::move(extent), std::move(body).value()));
  }
  return StmtCodePtr(new SerialForCode(slot, op->loop_var.dtype(), std::move(min),
                                       std::move(extent), std::move(step),
                                       std::move(body).value(), num_threads));
}

StatusOr<StmtCodePtr> CompileAllocate(const ir::Stmt& stmt, CompileContext& context) {
  const auto* op = stmt.as<ir::AllocateNode>();
  std::vector<ExprCodePtr> shape;
  std::vector<ExprCodePtr> strides;
  for (const ir::Expr& e : op->buffer.shape()) {
    KILN_ASSIGN_OR_RETURN(ExprCodePtr code, CompileExpr(e, context));
    shape.push_back(std::move(code));
  }
  for (const ir::Expr& e : op->buffer.strides()) {
    KILN_ASSIGN_OR_RETURN(ExprCodePtr code, CompileExpr(e, context));
    strides.push_back(std::move(code));
  }
  for (const auto* list : {&shape, &strides}) {
    for (const ExprCodePtr& code : *list) {
      if (!code->dtype().is_integer() || !code->dtype().is_scalar()) {
        return IllTypedStmt(stmt, "shapes and strides must be scalar integers");
      }
    }
  }
  const int slot = context.BindBuffer(op->buffer.get());
  auto body = CompileStmt(op->body, context);
  context.UnbindBuffer(op->buffer.get());
  if (!body.ok()) return body.status();
  return StmtCodePtr(new AllocateCode(op->buffer, slot, std::move(shape), std::move(strides),
                                      std::move(body).value()));
}

}  // namespace

StatusOr<StmtCodePtr> CompileStmt(const ir::Stmt& stmt, CompileContext& context) {
  const int num_threads = context.num_threads();
  if (!stmt.defined()) return StmtCodePtr(new SeqCode({}));
  switch (stmt.kind()) {
    case ir::StmtKind::kSeq: {
      std::vector<StmtCodePtr> stmts;
      for (const ir::Stmt& s : stmt.as<ir::SeqNode>()->stmts) {
        KILN_ASSIGN_OR_RETURN(StmtCodePtr code, CompileStmt(s, context));
        stmts.push_back(std::move(code));
      }
      return StmtCodePtr(new SeqCode(std::move(stmts)));
    }
    case ir::StmtKind::kLetStmt: {
      const auto* op = stmt.as<ir::LetStmtNode>();
      KILN_ASSIGN_OR_RETURN(ExprCodePtr value, CompileExpr(op->value, context));
      if (value->dtype() != op->var.dtype()) {
        return IllTypedStmt(stmt, "the value does not have the variable's type");
      }
      const int slot = context.BindVar(op->var.get(), value->lanes());
      auto body = CompileStmt(op->body, context);
      context.UnbindVar(op->var.get());
      if (!body.ok()) return body.status();
      return StmtCodePtr(new LetStmtCode(slot, std::move(value), std::move(body).value()));
    }
    case ir::StmtKind::kStore: {
      const auto* op = stmt.as<ir::StoreNode>();
      const int lanes = op->value.defined() ? op->value.dtype().lanes : 1;
      KILN_ASSIGN_OR_RETURN(BufferAccess access, BufferAccess::Compile(op->buffer, op->indices,
                                                                       lanes, "store", context));
      KILN_ASSIGN_OR_RETURN(ExprCodePtr value, CompileExpr(op->value, context));
      if (value->elem() != op->buffer.dtype()) {
        return IllTypedStmt(stmt, "the value does not have the buffer's element type");
      }
      return StmtCodePtr(new StoreCode(std::move(access), std::move(value), num_threads));
    }
    case ir::StmtKind::kAllocate:
      return CompileAllocate(stmt, context);
    case ir::StmtKind::kFor:
      return CompileFor(stmt, context);
    case ir::StmtKind::kWhile: {
      const auto* op = stmt.as<ir::WhileNode>();
      KILN_ASSIGN_OR_RETURN(ExprCodePtr cond, CompileScalarBool(stmt, op->cond, context));
      KILN_ASSIGN_OR_RETURN(StmtCodePtr body, CompileStmt(op->body, context));
      return StmtCodePtr(new WhileCode(std::move(cond), std::move(body), num_threads));
    }
    case ir::StmtKind::kIf: {
      const auto* op = stmt.as<ir::IfNode>();
      KILN_ASSIGN_OR_RETURN(ExprCodePtr cond, CompileScalarBool(stmt, op->cond, context));
      KILN_ASSIGN_OR_RETURN(StmtCodePtr then_case, CompileStmt(op->then_case, context));
      StmtCodePtr else_case;
      if (op->else_case.defined()) {
        KILN_ASSIGN_OR_RETURN(else_case, CompileStmt(op->else_case, context));
      }
      return StmtCodePtr(
          new IfCode(std::move(cond), std::move(then_case), std::move(else_case), num_threads));
    }
    case ir::StmtKind::kBarrier:
      return StmtCodePtr(new BarrierCode(stmt));
    case ir::StmtKind::kAssert: {
      const auto* op = stmt.as<ir::AssertNode>();
      KILN_ASSIGN_OR_RETURN(ExprCodePtr cond, CompileScalarBool(stmt, op->cond, context));
      return StmtCodePtr(new AssertCode(std::move(cond), op->message));
    }
    case ir::StmtKind::kEvaluate: {
      KILN_ASSIGN_OR_RETURN(ExprCodePtr value,
                            CompileExpr(stmt.as<ir::EvaluateNode>()->value, context));
      return StmtCodePtr(new EvaluateCode(std::move(value)));
    }
  }
  return Unimplemented("statement kind ", static_cast<int>(stmt.kind()));
}

}  // namespace kiln::interp
