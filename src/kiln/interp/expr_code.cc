#include "kiln/interp/expr_code.h"

#include <algorithm>
#include <array>

#include "kiln/interp/buffer_access.h"
#include "kiln/interp/lane_ops.h"
#include "kiln/interp/wgsl_semantics.h"
#include "kiln/ir/expr_nodes.h"
#include "kiln/ir/printer.h"

namespace kiln::interp {

ExprCode::ExprCode(const ir::Expr& expr, int num_threads)
    : expr_(expr),
      dtype_(expr.dtype()),
      num_threads_(num_threads),
      out_(static_cast<size_t>(num_threads) * expr.dtype().lanes) {}

Status IllTyped(const ir::Expr& expr, std::string_view why) {
  return InvalidArgument("ill-typed expression `", ir::Print(expr), "`: ", why);
}

namespace {

// A constant: filled once, for every thread.
class ConstCode : public ExprCode {
 public:
  ConstCode(const ir::Expr& expr, int num_threads, Lane value) : ExprCode(expr, num_threads) {
    std::fill(out_.begin(), out_.end(), value);
  }
  Status Eval(ExecState&, const uint8_t*, const Lane** result) override {
    *result = out_.data();
    return Status::Ok();
  }
};

class VarCode : public ExprCode {
 public:
  VarCode(const ir::Expr& expr, int num_threads, int slot)
      : ExprCode(expr, num_threads), slot_(slot) {}
  Status Eval(ExecState& state, const uint8_t*, const Lane** result) override {
    *result = state.vars[slot_].data();
    return Status::Ok();
  }

 private:
  int slot_;
};

class BinaryCode : public ExprCode {
 public:
  BinaryCode(const ir::Expr& expr, int num_threads, ir::BinaryOp op, ExprCodePtr a, ExprCodePtr b)
      : ExprCode(expr, num_threads), op_(op), a_(std::move(a)), b_(std::move(b)) {}

  Status Eval(ExecState& state, const uint8_t* mask, const Lane** result) override {
    const Lane* a;
    const Lane* b;
    KILN_RETURN_IF_ERROR(a_->Eval(state, mask, &a));
    KILN_RETURN_IF_ERROR(b_->Eval(state, mask, &b));
    const ir::DataType operand = a_->elem();
    const int lanes = this->lanes();
    for (int t = 0; t < num_threads_; ++t) {
      if (mask[t] == 0) continue;
      for (int l = t * lanes; l < (t + 1) * lanes; ++l) {
        out_[l] = BinaryLane(op_, operand, a[l], b[l]);
      }
    }
    *result = out_.data();
    return Status::Ok();
  }

 private:
  ir::BinaryOp op_;
  ExprCodePtr a_;
  ExprCodePtr b_;
};

class NotCode : public ExprCode {
 public:
  NotCode(const ir::Expr& expr, int num_threads, ExprCodePtr a)
      : ExprCode(expr, num_threads), a_(std::move(a)) {}

  Status Eval(ExecState& state, const uint8_t* mask, const Lane** result) override {
    const Lane* a;
    KILN_RETURN_IF_ERROR(a_->Eval(state, mask, &a));
    const int lanes = this->lanes();
    for (int t = 0; t < num_threads_; ++t) {
      if (mask[t] == 0) continue;
      for (int l = t * lanes; l < (t + 1) * lanes; ++l) out_[l].i = a[l].i == 0 ? 1 : 0;
    }
    *result = out_.data();
    return Status::Ok();
  }

 private:
  ExprCodePtr a_;
};

// select(c, a, b): both sides evaluated for every active thread.
class SelectCode : public ExprCode {
 public:
  SelectCode(const ir::Expr& expr, int num_threads, ExprCodePtr cond, ExprCodePtr t, ExprCodePtr f)
      : ExprCode(expr, num_threads), cond_(std::move(cond)), t_(std::move(t)), f_(std::move(f)) {}

  Status Eval(ExecState& state, const uint8_t* mask, const Lane** result) override {
    const Lane* c;
    const Lane* a;
    const Lane* b;
    KILN_RETURN_IF_ERROR(cond_->Eval(state, mask, &c));
    KILN_RETURN_IF_ERROR(t_->Eval(state, mask, &a));
    KILN_RETURN_IF_ERROR(f_->Eval(state, mask, &b));
    const int lanes = this->lanes();
    const int cond_lanes = cond_->lanes();
    for (int t = 0; t < num_threads_; ++t) {
      if (mask[t] == 0) continue;
      for (int l = 0; l < lanes; ++l) {
        const int i = t * lanes + l;
        const bool take_true = c[t * cond_lanes + (cond_lanes == 1 ? 0 : l)].i != 0;
        out_[i] = take_true ? a[i] : b[i];
      }
    }
    *result = out_.data();
    return Status::Ok();
  }

 private:
  ExprCodePtr cond_;
  ExprCodePtr t_;
  ExprCodePtr f_;
};

class CastCode : public ExprCode {
 public:
  CastCode(const ir::Expr& expr, int num_threads, ExprCodePtr value)
      : ExprCode(expr, num_threads), value_(std::move(value)) {}

  Status Eval(ExecState& state, const uint8_t* mask, const Lane** result) override {
    const Lane* v;
    KILN_RETURN_IF_ERROR(value_->Eval(state, mask, &v));
    const ir::DataType from = value_->elem();
    const ir::DataType to = elem();
    const int lanes = this->lanes();
    for (int t = 0; t < num_threads_; ++t) {
      if (mask[t] == 0) continue;
      for (int l = t * lanes; l < (t + 1) * lanes; ++l) out_[l] = CastLane(from, to, v[l]);
    }
    *result = out_.data();
    return Status::Ok();
  }

 private:
  ExprCodePtr value_;
};

// A bit cast. The lanes of a value are concatenated lane 0 first (lane 0 in
// the low bits, as WGSL's bitcast between vec2<f16> and u32 does) and read
// back as the target's lanes.
class ReinterpretCode : public ExprCode {
 public:
  ReinterpretCode(const ir::Expr& expr, int num_threads, ExprCodePtr value)
      : ExprCode(expr, num_threads), value_(std::move(value)) {}

  Status Eval(ExecState& state, const uint8_t* mask, const Lane** result) override {
    const Lane* v;
    KILN_RETURN_IF_ERROR(value_->Eval(state, mask, &v));
    const ir::DataType from = value_->elem();
    const ir::DataType to = elem();
    const int from_lanes = value_->lanes();
    const int to_lanes = lanes();
    for (int t = 0; t < num_threads_; ++t) {
      if (mask[t] == 0) continue;
      // At most 4 lanes of 64 bits.
      std::array<uint64_t, 4> words = {0, 0, 0, 0};
      for (int l = 0; l < from_lanes; ++l) {
        PutBits(words, l * from.bits, from.bits, LaneBits(from, v[t * from_lanes + l]));
      }
      for (int l = 0; l < to_lanes; ++l) {
        out_[t * to_lanes + l] = LaneFromBits(to, GetBits(words, l * to.bits, to.bits));
      }
    }
    *result = out_.data();
    return Status::Ok();
  }

 private:
  static void PutBits(std::array<uint64_t, 4>& words, int at, int width, uint64_t bits) {
    for (int b = 0; b < width; ++b) {
      if ((bits >> b) & 1u) words[(at + b) / 64] |= uint64_t{1} << ((at + b) % 64);
    }
  }
  static uint64_t GetBits(const std::array<uint64_t, 4>& words, int at, int width) {
    uint64_t bits = 0;
    for (int b = 0; b < width; ++b) {
      if ((words[(at + b) / 64] >> ((at + b) % 64)) & 1u) bits |= uint64_t{1} << b;
    }
    return bits;
  }

  ExprCodePtr value_;
};

class LetCode : public ExprCode {
 public:
  LetCode(const ir::Expr& expr, int num_threads, int slot, ExprCodePtr value, ExprCodePtr body)
      : ExprCode(expr, num_threads),
        slot_(slot),
        value_(std::move(value)),
        body_(std::move(body)) {}

  Status Eval(ExecState& state, const uint8_t* mask, const Lane** result) override {
    const Lane* v;
    KILN_RETURN_IF_ERROR(value_->Eval(state, mask, &v));
    Lane* slot = state.vars[slot_].data();
    const int lanes = value_->lanes();
    for (int t = 0; t < num_threads_; ++t) {
      if (mask[t] == 0) continue;
      for (int l = t * lanes; l < (t + 1) * lanes; ++l) slot[l] = v[l];
    }
    return body_->Eval(state, mask, result);
  }

 private:
  int slot_;
  ExprCodePtr value_;
  ExprCodePtr body_;
};

class RampCode : public ExprCode {
 public:
  RampCode(const ir::Expr& expr, int num_threads, ExprCodePtr base, ExprCodePtr stride)
      : ExprCode(expr, num_threads), base_(std::move(base)), stride_(std::move(stride)) {}

  Status Eval(ExecState& state, const uint8_t* mask, const Lane** result) override {
    const Lane* base;
    const Lane* stride;
    KILN_RETURN_IF_ERROR(base_->Eval(state, mask, &base));
    KILN_RETURN_IF_ERROR(stride_->Eval(state, mask, &stride));
    const ir::DataType t_elem = elem();
    const int lanes = this->lanes();
    for (int t = 0; t < num_threads_; ++t) {
      if (mask[t] == 0) continue;
      // base + l * stride, computed in the element type like the scalar ops
      // (for floats not the same as adding the stride again and again).
      for (int l = 0; l < lanes; ++l) {
        Lane index;
        if (t_elem.is_float()) {
          index.f = l;
        } else {
          index.i = l;
        }
        out_[t * lanes + l] = BinaryLane(ir::BinaryOp::kAdd, t_elem, base[t],
                                         BinaryLane(ir::BinaryOp::kMul, t_elem, index, stride[t]));
      }
    }
    *result = out_.data();
    return Status::Ok();
  }

 private:
  ExprCodePtr base_;
  ExprCodePtr stride_;
};

class BroadcastCode : public ExprCode {
 public:
  BroadcastCode(const ir::Expr& expr, int num_threads, ExprCodePtr value)
      : ExprCode(expr, num_threads), value_(std::move(value)) {}

  Status Eval(ExecState& state, const uint8_t* mask, const Lane** result) override {
    const Lane* v;
    KILN_RETURN_IF_ERROR(value_->Eval(state, mask, &v));
    const int lanes = this->lanes();
    for (int t = 0; t < num_threads_; ++t) {
      if (mask[t] == 0) continue;
      for (int l = 0; l < lanes; ++l) out_[t * lanes + l] = v[t];
    }
    *result = out_.data();
    return Status::Ok();
  }

 private:
  ExprCodePtr value_;
};

class LoadCode : public ExprCode {
 public:
  LoadCode(const ir::Expr& expr, int num_threads, BufferAccess access)
      : ExprCode(expr, num_threads),
        access_(std::move(access)),
        offsets_(static_cast<size_t>(num_threads) * expr.dtype().lanes) {}

  Status Eval(ExecState& state, const uint8_t* mask, const Lane** result) override {
    KILN_RETURN_IF_ERROR(access_.Offsets(state, mask, offsets_.data()));
    const BufferBinding& binding = state.buffers[access_.buffer_slot()];
    const int lanes = this->lanes();
    for (int t = 0; t < num_threads_; ++t) {
      if (mask[t] == 0) continue;
      for (int l = t * lanes; l < (t + 1) * lanes; ++l) {
        out_[l] = LoadElement(binding.elem, binding.data + offsets_[l] * binding.elem_bytes);
      }
    }
    *result = out_.data();
    return Status::Ok();
  }

 private:
  BufferAccess access_;
  std::vector<int64_t> offsets_;
};

Lane ConstantLane(const ir::Expr& expr) {
  Lane lane;
  lane.i = 0;
  if (const auto* i = expr.as<ir::IntImmNode>()) {
    lane.i = WrapInt(static_cast<uint64_t>(i->value), expr.dtype().bits, expr.dtype().is_int());
  } else if (const auto* f = expr.as<ir::FloatImmNode>()) {
    lane.f = ir::RoundToFloatType(expr.dtype(), f->value);
  } else if (const auto* b = expr.as<ir::BoolImmNode>()) {
    lane.i = b->value ? 1 : 0;
  }
  return lane;
}

// Checks that an operand has `lanes` lanes (the verifier's job; the
// interpreter re-checks what would otherwise read past a result buffer).
Status CheckLanes(const ir::Expr& expr, const ExprCode& operand, int lanes) {
  if (operand.lanes() != lanes) {
    return IllTyped(expr, StrCat("operand `", ir::Print(operand.expr()), "` has ", operand.lanes(),
                                 " lanes, expected ", lanes));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<ExprCodePtr> CompileExpr(const ir::Expr& expr, CompileContext& context) {
  if (!expr.defined()) return InvalidArgument("null expression");
  const int num_threads = context.num_threads();
  const int lanes = expr.dtype().lanes;
  switch (expr.kind()) {
    case ir::ExprKind::kIntImm:
    case ir::ExprKind::kFloatImm:
    case ir::ExprKind::kBoolImm:
      return ExprCodePtr(new ConstCode(expr, num_threads, ConstantLane(expr)));
    case ir::ExprKind::kVar: {
      const int slot = context.FindVar(expr.as<ir::VarNode>());
      if (slot < 0) {
        return InvalidArgument("variable '", expr.as<ir::VarNode>()->name,
                               "' is used outside its scope");
      }
      return ExprCodePtr(new VarCode(expr, num_threads, slot));
    }
    case ir::ExprKind::kBinary: {
      const auto* op = expr.as<ir::BinaryNode>();
      KILN_ASSIGN_OR_RETURN(ExprCodePtr a, CompileExpr(op->a, context));
      KILN_ASSIGN_OR_RETURN(ExprCodePtr b, CompileExpr(op->b, context));
      KILN_RETURN_IF_ERROR(CheckLanes(expr, *a, lanes));
      KILN_RETURN_IF_ERROR(CheckLanes(expr, *b, lanes));
      if (a->elem() != b->elem()) {
        return IllTyped(expr, StrCat("operand types differ: ", a->dtype(), " and ", b->dtype()));
      }
      return ExprCodePtr(new BinaryCode(expr, num_threads, op->op, std::move(a), std::move(b)));
    }
    case ir::ExprKind::kNot: {
      KILN_ASSIGN_OR_RETURN(ExprCodePtr a, CompileExpr(expr.as<ir::NotNode>()->a, context));
      KILN_RETURN_IF_ERROR(CheckLanes(expr, *a, lanes));
      return ExprCodePtr(new NotCode(expr, num_threads, std::move(a)));
    }
    case ir::ExprKind::kSelect: {
      const auto* op = expr.as<ir::SelectNode>();
      KILN_ASSIGN_OR_RETURN(ExprCodePtr c, CompileExpr(op->cond, context));
      KILN_ASSIGN_OR_RETURN(ExprCodePtr t, CompileExpr(op->true_value, context));
      KILN_ASSIGN_OR_RETURN(ExprCodePtr f, CompileExpr(op->false_value, context));
      if (c->lanes() != 1) KILN_RETURN_IF_ERROR(CheckLanes(expr, *c, lanes));
      KILN_RETURN_IF_ERROR(CheckLanes(expr, *t, lanes));
      KILN_RETURN_IF_ERROR(CheckLanes(expr, *f, lanes));
      return ExprCodePtr(
          new SelectCode(expr, num_threads, std::move(c), std::move(t), std::move(f)));
    }
    case ir::ExprKind::kCast: {
      KILN_ASSIGN_OR_RETURN(ExprCodePtr v, CompileExpr(expr.as<ir::CastNode>()->value, context));
      KILN_RETURN_IF_ERROR(CheckLanes(expr, *v, lanes));
      return ExprCodePtr(new CastCode(expr, num_threads, std::move(v)));
    }
    case ir::ExprKind::kReinterpret: {
      KILN_ASSIGN_OR_RETURN(ExprCodePtr v,
                            CompileExpr(expr.as<ir::ReinterpretNode>()->value, context));
      if (v->elem().bits * v->lanes() != expr.dtype().bits * lanes || v->lanes() > 4 || lanes > 4) {
        return IllTyped(expr, StrCat("cannot reinterpret ", v->dtype(), " as ", expr.dtype()));
      }
      return ExprCodePtr(new ReinterpretCode(expr, num_threads, std::move(v)));
    }
    case ir::ExprKind::kLet: {
      const auto* op = expr.as<ir::LetNode>();
      KILN_ASSIGN_OR_RETURN(ExprCodePtr value, CompileExpr(op->value, context));
      const int slot = context.BindVar(op->var.get(), value->lanes());
      auto body = CompileExpr(op->body, context);
      context.UnbindVar(op->var.get());
      if (!body.ok()) return body.status();
      if (op->var.dtype() != value->dtype()) {
        return IllTyped(expr, StrCat("let of a ", op->var.dtype(), " to a ", value->dtype()));
      }
      return ExprCodePtr(
          new LetCode(expr, num_threads, slot, std::move(value), std::move(body).value()));
    }
    case ir::ExprKind::kRamp: {
      const auto* op = expr.as<ir::RampNode>();
      KILN_ASSIGN_OR_RETURN(ExprCodePtr base, CompileExpr(op->base, context));
      KILN_ASSIGN_OR_RETURN(ExprCodePtr stride, CompileExpr(op->stride, context));
      KILN_RETURN_IF_ERROR(CheckLanes(expr, *base, 1));
      KILN_RETURN_IF_ERROR(CheckLanes(expr, *stride, 1));
      return ExprCodePtr(new RampCode(expr, num_threads, std::move(base), std::move(stride)));
    }
    case ir::ExprKind::kBroadcast: {
      KILN_ASSIGN_OR_RETURN(ExprCodePtr v,
                            CompileExpr(expr.as<ir::BroadcastNode>()->value, context));
      KILN_RETURN_IF_ERROR(CheckLanes(expr, *v, 1));
      return ExprCodePtr(new BroadcastCode(expr, num_threads, std::move(v)));
    }
    case ir::ExprKind::kLoad: {
      const auto* op = expr.as<ir::LoadNode>();
      if (expr.dtype().element_of() != op->buffer.dtype()) {
        return IllTyped(
            expr, StrCat("a load of ", expr.dtype(), " from a buffer of ", op->buffer.dtype()));
      }
      KILN_ASSIGN_OR_RETURN(BufferAccess access,
                            BufferAccess::Compile(op->buffer, op->indices, lanes, "load", context));
      return ExprCodePtr(new LoadCode(expr, num_threads, std::move(access)));
    }
    case ir::ExprKind::kCall:
      return CompileCall(expr, context);
  }
  return Unimplemented("expression kind ", static_cast<int>(expr.kind()));
}

}  // namespace kiln::interp
