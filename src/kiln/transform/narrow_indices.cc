#include "kiln/transform/narrow_indices.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <unordered_map>

#include "kiln/ir/expr_ops.h"
#include "kiln/ir/mutator.h"
#include "kiln/ir/printer.h"
#include "kiln/transform/fallible_mutator.h"

namespace kiln::transform {
namespace {

using ir::Buffer;
using ir::DataType;
using ir::Expr;
using ir::Stmt;
using ir::Var;

bool Is64BitInteger(DataType t) {
  return t.is_integer() && t.bits == 64;
}

DataType Narrow(DataType t) {
  return Is64BitInteger(t) ? DataType{t.code, 32, t.lanes} : t;
}

using Int128 = __int128;

// The values an integer expression takes, in exact (unwrapped) arithmetic.
struct Range {
  Int128 lo, hi;
  bool operator<=(const Range& outer) const { return outer.lo <= lo && hi <= outer.hi; }
};

Range Point(Int128 v) {
  return {v, v};
}
Range Union(const Range& a, const Range& b) {
  return {std::min(a.lo, b.lo), std::max(a.hi, b.hi)};
}

// Every value of integer (or bool) type t.
Range TypeRange(DataType t) {
  if (t.is_bool()) return {0, 1};
  if (t.is_uint()) return {0, (Int128{1} << t.bits) - 1};
  Int128 half = Int128{1} << (t.bits - 1);
  return {-half, half - 1};
}

// `r` if the type holds all of it, else the whole type (the value wrapped).
Range Wrapped(DataType t, const Range& r) {
  Range full = TypeRange(t);
  return r <= full ? r : full;
}

std::string ToString(Int128 v) {
  return v < 0 ? std::to_string(static_cast<int64_t>(v)) : std::to_string(static_cast<uint64_t>(v));
}

Int128 MaxMagnitude(const Range& r) {
  return std::max(r.lo < 0 ? -r.lo : r.lo, r.hi < 0 ? -r.hi : r.hi);
}

// The range of a + b, a - b or a * b, exactly; nullopt past 128 bits.
std::optional<Range> Arith(ir::BinaryOp op, const Range& a, const Range& b) {
  Int128 c[4];
  bool overflow = false;
  if (op == ir::BinaryOp::kAdd) {
    overflow |= __builtin_add_overflow(a.lo, b.lo, &c[0]);
    overflow |= __builtin_add_overflow(a.hi, b.hi, &c[1]);
    c[2] = c[0], c[3] = c[1];
  } else if (op == ir::BinaryOp::kSub) {
    overflow |= __builtin_sub_overflow(a.lo, b.hi, &c[0]);
    overflow |= __builtin_sub_overflow(a.hi, b.lo, &c[1]);
    c[2] = c[0], c[3] = c[1];
  } else {
    overflow |= __builtin_mul_overflow(a.lo, b.lo, &c[0]);
    overflow |= __builtin_mul_overflow(a.lo, b.hi, &c[1]);
    overflow |= __builtin_mul_overflow(a.hi, b.lo, &c[2]);
    overflow |= __builtin_mul_overflow(a.hi, b.hi, &c[3]);
  }
  if (overflow) return std::nullopt;
  return Range{*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
}

// The range of a division or remainder of exact operands (either rounding;
// x / 0 == x and x % 0 == 0).
Range DivRange(ir::BinaryOp op, const Range& a, const Range& b) {
  bool quotient = op == ir::BinaryOp::kDiv || op == ir::BinaryOp::kFloorDiv;
  if (b.lo == b.hi && b.lo > 0) {
    Int128 c = b.lo;
    auto floor_div = [c](Int128 x) { return x >= 0 ? x / c : -((-x + c - 1) / c); };
    if (op == ir::BinaryOp::kDiv) return {a.lo / c, a.hi / c};
    if (op == ir::BinaryOp::kFloorDiv) return {floor_div(a.lo), floor_div(a.hi)};
    if (a.lo >= 0) return {0, std::min(c - 1, a.hi)};
    return {op == ir::BinaryOp::kFloorMod ? 0 : -(c - 1), c - 1};
  }
  Int128 m = quotient ? MaxMagnitude(a) : std::max(MaxMagnitude(a), MaxMagnitude(b));
  return {-m, m};
}

// What the narrowed program computes: every 64-bit value v becomes a 32-bit
// value congruent to v modulo 2^32, since + - * and the bitwise operations
// commute with wrap-around. That is all an index (an out-of-bounds index is a
// kernel bug either way) or a cast to 32 bits or fewer needs. Every other use
// (comparison, division, min, max, conversion to float or bool, loop bounds,
// buffer extents) needs the value itself, so it must provably lie in the
// 32-bit type: ranges come from constants, casts of narrower values, loop
// bounds and lets, and the pass refuses what it cannot prove.
class Narrower : public FallibleMutator {
 public:
  Buffer NarrowBuffer(const Buffer& buffer) {
    auto it = buffers_.find(buffer.get());
    if (it != buffers_.end()) return it->second;
    Buffer result = buffer;
    if (Is64BitInteger(buffer.dtype())) {
      Fail("buffer '", buffer.name(), "' has 64-bit elements (", buffer.dtype(),
           "), which WGSL cannot hold and narrowing would change");
    } else {
      bool changed = false;
      std::vector<Expr> shape, strides;
      for (const Expr& e : buffer.shape()) shape.push_back(NarrowExtent(e, buffer, changed));
      for (const Expr& e : buffer.strides()) strides.push_back(NarrowExtent(e, buffer, changed));
      if (changed) result = buffer.WithShape(std::move(shape), std::move(strides));
    }
    buffers_.emplace(buffer.get(), result);
    return result;
  }

  Buffer MutateBuffer(const Buffer& buffer) override { return NarrowBuffer(buffer); }

  Expr MutateIntImm(const ir::IntImmNode* op, const Expr& e) override {
    if (!Is64BitInteger(op->dtype)) return e;
    // Its low 32 bits; uses that need the value itself check its range.
    DataType narrow = Narrow(op->dtype);
    uint32_t low = static_cast<uint32_t>(op->uvalue());
    return ir::IntConst(narrow,
                        narrow.is_int() ? int64_t{static_cast<int32_t>(low)} : int64_t{low});
  }

  Expr MutateVar(const ir::VarNode* op, const Expr& e) override {
    auto it = vars_.find(op);
    return it == vars_.end() ? e : it->second;
  }

  Expr MutateBinary(const ir::BinaryNode* op, const Expr& e) override {
    bool ring = op->op == ir::BinaryOp::kAdd || op->op == ir::BinaryOp::kSub ||
                op->op == ir::BinaryOp::kMul;
    Expr result = ir::StmtMutator::MutateBinary(op, e);
    if (!ring) RequireExact(e, {op->a, op->b});
    return result;
  }

  Expr MutateCast(const ir::CastNode* op, const Expr& e) override {
    DataType from = op->value.dtype();
    if (Is64BitInteger(op->dtype) && from.is_float()) {
      Fail("`", ir::Print(e), "` converts a float to a 64-bit integer, which 32 bits ",
           "would clamp differently; convert to ", Narrow(op->dtype), " instead");
    }
    // To 32 bits or fewer, the low bits are all that count.
    if (Is64BitInteger(from) && (op->dtype.is_float() || op->dtype.is_bool())) {
      RequireExact(e, {op->value});
    }
    Expr value = MutateExpr(op->value);
    DataType target = Narrow(op->dtype);
    if (value.dtype() == target) return value;
    return ir::Cast(target, value);
  }

  Expr MutateCall(const ir::CallNode* op, const Expr& e) override {
    using ir::Intrinsic;
    if (!op->args.empty() && Is64BitInteger(op->args[0].dtype())) {
      switch (op->op) {
        case Intrinsic::kShiftLeft:
        case Intrinsic::kShiftRight:
          if (op->op == Intrinsic::kShiftRight) RequireExact(e, {op->args[0]});
          if (!(Eval(op->args[1]) <= Range{0, 31})) {
            Fail("`", ir::Print(e), "` shifts by `", ir::Print(op->args[1]),
                 "`, which may lie outside [0, 31] (it is in ", RangeText(op->args[1]),
                 "), where a 32-bit shift differs from a 64-bit one");
          }
          break;
        case Intrinsic::kAbs:
        case Intrinsic::kPopcount:
        case Intrinsic::kSubgroupMin:
        case Intrinsic::kSubgroupMax:
          RequireExact(e, {op->args[0]});
          if (op->op == Intrinsic::kPopcount && Eval(op->args[0]).lo < 0) {
            Fail("`", ir::Print(e), "` counts the bits of `", ir::Print(op->args[0]),
                 "`, which may be negative (it is in ", RangeText(op->args[0]),
                 "): a negative 64-bit value has 32 more set bits than its 32-bit form");
          }
          break;
        default:  // bitwise and, or, xor, not; subgroup add, broadcast, shuffle
          break;
      }
    }
    return ir::StmtMutator::MutateCall(op, e);
  }

  Expr MutateReinterpret(const ir::ReinterpretNode* op, const Expr& e) override {
    if (Is64BitInteger(op->dtype) || Is64BitInteger(op->value.dtype())) {
      Fail("`", ir::Print(e), "` reinterprets 64-bit integer bits, which cannot be narrowed");
      return e;
    }
    return ir::StmtMutator::MutateReinterpret(op, e);
  }

  Expr MutateLet(const ir::LetNode* op, const Expr& e) override {
    Expr value = MutateExpr(op->value);
    if (op->var.dtype().is_integer()) ranges_[op->var.get()] = Eval(op->value);
    Var var = Rebind(op->var, value.dtype());
    return ir::LetNode::make(var, value, MutateExpr(op->body));
  }

  Expr MutateLoad(const ir::LoadNode* op, const Expr& e) override {
    std::vector<Expr> indices;
    for (const Expr& index : op->indices) indices.push_back(MutateExpr(index));
    return ir::LoadNode::make(NarrowBuffer(op->buffer), std::move(indices));
  }

  Stmt MutateLetStmt(const ir::LetStmtNode* op, const Stmt& s) override {
    Expr value = MutateExpr(op->value);
    if (op->var.dtype().is_integer()) ranges_[op->var.get()] = Eval(op->value);
    Var var = Rebind(op->var, value.dtype());
    return ir::LetStmtNode::make(var, value, MutateStmt(op->body));
  }

  Stmt MutateStore(const ir::StoreNode* op, const Stmt& s) override {
    std::vector<Expr> indices;
    for (const Expr& index : op->indices) indices.push_back(MutateExpr(index));
    return ir::StoreNode::make(NarrowBuffer(op->buffer), std::move(indices), MutateExpr(op->value));
  }

  Stmt MutateAllocate(const ir::AllocateNode* op, const Stmt& s) override {
    Buffer buffer = NarrowBuffer(op->buffer);
    return ir::AllocateNode::make(buffer, MutateStmt(op->body));
  }

  Stmt MutateFor(const ir::ForNode* op, const Stmt& s) override {
    Expr min = MutateExpr(op->min);
    Expr extent = MutateExpr(op->extent);
    Expr step = MutateExpr(op->step);
    DataType type = op->loop_var.dtype();
    Range lo = Eval(op->min), n = Eval(op->extent);
    Range values{lo.lo, lo.hi + std::max<Int128>(n.hi, 0)};  // and the end
    if (Is64BitInteger(type)) {
      Range narrow = TypeRange(Narrow(type));
      if (!(lo <= narrow) || !(n <= narrow) || !(values <= narrow)) {
        Fail("loop `", op->loop_var.name(), "` over [", ToString(values.lo), ", ",
             ToString(values.hi), ") (from `", ir::Print(op->min), "`, extent `",
             ir::Print(op->extent), "`) may not fit in ", Narrow(type));
      }
    }
    ranges_[op->loop_var.get()] = values <= TypeRange(type)
                                      ? Range{values.lo, std::max(values.lo, values.hi - 1)}
                                      : TypeRange(type);
    Var var = Rebind(op->loop_var, min.dtype());
    return ir::ForNode::make(var, min, extent, op->kind, MutateStmt(op->body), step);
  }

 private:
  template <typename... Args>
  void Fail(const Args&... args) {
    FallibleMutator::Fail("cannot narrow to 32 bits: ", args...);
  }

  // The exact values `e` (an integer expression of the input) may take.
  Range Eval(const Expr& e) {
    using ir::BinaryOp;
    using ir::Intrinsic;
    DataType t = e.dtype().element_of();
    if (!t.is_integer()) return {0, 1};  // bool; floats are never asked
    if (const auto* imm = e.as<ir::IntImmNode>()) {
      return Point(t.is_uint() ? Int128{imm->uvalue()} : Int128{imm->value});
    }
    if (const auto* var = e.as<ir::VarNode>()) {
      auto it = ranges_.find(var);
      return it == ranges_.end() ? TypeRange(t) : it->second;
    }
    if (const auto* cast = e.as<ir::CastNode>()) {
      DataType from = cast->value.dtype();
      if (from.is_bool()) return {0, 1};
      if (!from.is_integer()) return TypeRange(t);
      return Wrapped(t, Eval(cast->value));
    }
    if (const auto* bin = e.as<ir::BinaryNode>()) {
      Range a = Eval(bin->a), b = Eval(bin->b);
      switch (bin->op) {
        case BinaryOp::kAdd:
        case BinaryOp::kSub:
        case BinaryOp::kMul: {
          std::optional<Range> r = Arith(bin->op, a, b);
          return r ? Wrapped(t, *r) : TypeRange(t);
        }
        case BinaryOp::kDiv:
        case BinaryOp::kMod:
        case BinaryOp::kFloorDiv:
        case BinaryOp::kFloorMod:
          return Wrapped(t, DivRange(bin->op, a, b));
        case BinaryOp::kMin:
          return {std::min(a.lo, b.lo), std::min(a.hi, b.hi)};
        case BinaryOp::kMax:
          return {std::max(a.lo, b.lo), std::max(a.hi, b.hi)};
        default:
          return TypeRange(t);
      }
    }
    if (const auto* select = e.as<ir::SelectNode>()) {
      return Union(Eval(select->true_value), Eval(select->false_value));
    }
    if (const auto* let = e.as<ir::LetNode>()) {
      if (let->var.dtype().is_integer()) ranges_[let->var.get()] = Eval(let->value);
      return Eval(let->body);
    }
    if (const auto* ramp = e.as<ir::RampNode>()) {
      std::optional<Range> span = Arith(BinaryOp::kMul, Eval(ramp->stride), {0, ramp->lanes - 1});
      std::optional<Range> r = span ? Arith(BinaryOp::kAdd, Eval(ramp->base), *span) : span;
      return r ? Wrapped(t, *r) : TypeRange(t);
    }
    if (const auto* broadcast = e.as<ir::BroadcastNode>()) return Eval(broadcast->value);
    if (const auto* call = e.as<ir::CallNode>()) {
      auto arg = [&](size_t i) { return Eval(call->args[i]); };
      switch (call->op) {
        case Intrinsic::kAbs:
          return Wrapped(t, {0, MaxMagnitude(arg(0))});
        case Intrinsic::kIfThenElse:
          return Union(arg(1), arg(2));
        case Intrinsic::kBitwiseAnd: {
          Range a = arg(0), b = arg(1);
          if (a.lo >= 0 && b.lo >= 0) return {0, std::min(a.hi, b.hi)};
          if (a.lo >= 0 || b.lo >= 0) return {0, a.lo >= 0 ? a.hi : b.hi};
          return TypeRange(t);
        }
        case Intrinsic::kShiftRight: {
          Range a = arg(0);
          return {std::min<Int128>(a.lo, 0), std::max<Int128>(a.hi, 0)};
        }
        case Intrinsic::kPopcount:
          return {0, t.bits};
        case Intrinsic::kSubgroupMin:
        case Intrinsic::kSubgroupMax:
        case Intrinsic::kSubgroupBroadcastFirst:
        case Intrinsic::kSubgroupShuffle:
          return arg(0);
        default:
          return TypeRange(t);
      }
    }
    return TypeRange(t);
  }

  std::string RangeText(const Expr& e) {
    Range r = Eval(e);
    return "[" + ToString(r.lo) + ", " + ToString(r.hi) + "]";
  }

  // `use` needs the values of its 64-bit `operands` themselves, not just
  // their low 32 bits.
  void RequireExact(const Expr& use, std::initializer_list<Expr> operands) {
    for (const Expr& operand : operands) {
      if (!Is64BitInteger(operand.dtype())) continue;
      DataType narrow = Narrow(operand.dtype());
      if (Eval(operand) <= TypeRange(narrow)) continue;
      Fail("`", ir::Print(use), "` needs the value of `", ir::Print(operand),
           "`, which may lie outside ", narrow.element_of(), " (it is in ", RangeText(operand),
           ") where 32-bit arithmetic would give another result; bound it (e.g. by loop "
           "extents and casts of 32-bit values) or compute in 32 bits");
      return;
    }
  }

  // A buffer extent or stride, narrowed; it must fit.
  Expr NarrowExtent(const Expr& e, const Buffer& buffer, bool& changed) {
    if (Is64BitInteger(e.dtype()) && !(Eval(e) <= TypeRange(Narrow(e.dtype())))) {
      Fail("buffer '", buffer.name(), "' has extent or stride `", ir::Print(e),
           "`, which may not fit in ", Narrow(e.dtype()), " (it is in ", RangeText(e), ")");
    }
    Expr narrow = MutateExpr(e);
    if (!narrow.same_as(e)) changed = true;
    return narrow;
  }

  // The var bound in place of `var` (a new one when its type narrows).
  Var Rebind(const Var& var, DataType narrowed) {
    if (var.dtype() == narrowed) return var;
    Var fresh(var.name(), narrowed);
    vars_[var.get()] = fresh;
    return fresh;
  }

  std::unordered_map<const ir::VarNode*, Expr> vars_;
  std::unordered_map<const ir::VarNode*, Range> ranges_;
  std::unordered_map<const ir::BufferNode*, Buffer> buffers_;
};

}  // namespace

StatusOr<ir::Function> NarrowIndices(const ir::Function& function,
                                     const NarrowIndicesOptions& options) {
  Narrower narrower;
  return RewriteFunction(function, narrower, "NarrowIndices");
}

}  // namespace kiln::transform
