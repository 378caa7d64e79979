#include "kiln/ir/simplifier.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "kiln/ir/const_fold.h"
#include "kiln/ir/expr_nodes.h"
#include "kiln/ir/mutator.h"
#include "kiln/ir/structural_equal.h"
#include "kiln/ir/visitor.h"

namespace kiln::ir {
namespace {

// Whether `e` reads `var`.
bool Reads(const Expr& e, const VarNode* var) {
  struct Finder : ExprVisitor {
    const VarNode* var;
    bool found = false;
    void VisitVar(const VarNode* op) override { found |= op == var; }
  } finder;
  finder.var = var;
  finder.VisitExpr(e);
  return finder.found;
}

using Int128 = __int128;

// The values a scalar integer type can hold, or nullopt for u64 (whose upper
// half does not fit the int64 ranges used here).
std::optional<IntRange> TypeRange(DataType t) {
  if (!t.is_integer() || !t.is_scalar() || (t.is_uint() && t.bits == 64)) return std::nullopt;
  if (t.is_uint()) return IntRange{0, static_cast<int64_t>((uint64_t{1} << t.bits) - 1)};
  if (t.bits == 64) {
    return IntRange{std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
  }
  int64_t half = int64_t{1} << (t.bits - 1);
  return IntRange{-half, half - 1};
}

// The range as an IntRange if it fits type t, else nullopt (the operation
// may wrap, so nothing is known).
std::optional<IntRange> Fit(DataType t, Int128 lo, Int128 hi) {
  std::optional<IntRange> limits = TypeRange(t);
  if (!limits || lo < limits->min || hi > limits->max) return std::nullopt;
  return IntRange{static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
}

bool IsPowerOfTwo(int64_t c) {
  return c > 0 && (c & (c - 1)) == 0;
}

class Simplifier : public StmtMutator {
 public:
  explicit Simplifier(const RangeMap& ranges) : ranges_(ranges) {}

  // A sound range of e's value for scalar integers of up to 63 bits (and
  // i64); nullopt for other types. Where an operation might wrap, its range
  // is the whole type.
  std::optional<IntRange> Bound(const Expr& e) const {
    DataType t = e.dtype();
    std::optional<IntRange> full = TypeRange(t);
    if (!full) return std::nullopt;
    if (const auto* imm = e.as<IntImmNode>()) return IntRange{imm->value, imm->value};
    if (const auto* v = e.as<VarNode>()) {
      auto it = ranges_.find(v);
      return it != ranges_.end() ? it->second : *full;
    }
    if (const auto* cast = e.as<CastNode>()) {
      // An integer cast keeps the value when the whole source range fits.
      std::optional<IntRange> r = Bound(cast->value);
      return r && Fit(t, r->min, r->max) ? *r : *full;
    }
    const auto* op = e.as<BinaryNode>();
    if (op == nullptr) return full;
    std::optional<IntRange> a = Bound(op->a), b = Bound(op->b);
    if (!a || !b) return full;
    switch (op->op) {
      case BinaryOp::kAdd:
      case BinaryOp::kSub:
      case BinaryOp::kMul:
        return ExactRange(op->op, t, *a, *b).value_or(*full);
      case BinaryOp::kMin:
        return IntRange{std::min(a->min, b->min), std::min(a->max, b->max)};
      case BinaryOp::kMax:
        return IntRange{std::max(a->min, b->min), std::max(a->max, b->max)};
      case BinaryOp::kDiv:
      case BinaryOp::kFloorDiv: {
        if (b->min != b->max || b->min <= 0) return full;
        // Both divisions are monotonic in the dividend for a positive divisor.
        int64_t c = b->min;
        return IntRange{IntBinary(op->op, t, a->min, c), IntBinary(op->op, t, a->max, c)};
      }
      case BinaryOp::kMod:
      case BinaryOp::kFloorMod: {
        if (b->min != b->max || b->min <= 0) return full;
        int64_t c = b->min;
        if (a->min >= 0) return IntRange{0, std::min(a->max, c - 1)};
        if (op->op == BinaryOp::kFloorMod) return IntRange{0, c - 1};
        // The truncated remainder takes the dividend's sign.
        return IntRange{std::max(a->min, -(c - 1)), std::min(std::max<int64_t>(a->max, 0), c - 1)};
      }
      default:
        return full;
    }
  }

  // The mathematical range of a op b (+, -, *) for operands in the given
  // ranges, if it fits the type, i.e. if the operation cannot wrap.
  static std::optional<IntRange> ExactRange(BinaryOp op, DataType t, IntRange a, IntRange b) {
    Int128 a0 = a.min, a1 = a.max, b0 = b.min, b1 = b.max;
    switch (op) {
      case BinaryOp::kAdd:
        return Fit(t, a0 + b0, a1 + b1);
      case BinaryOp::kSub:
        return Fit(t, a0 - b1, a1 - b0);
      case BinaryOp::kMul: {
        Int128 p[] = {a0 * b0, a0 * b1, a1 * b0, a1 * b1};
        return Fit(t, *std::min_element(p, p + 4), *std::max_element(p, p + 4));
      }
      default:
        return std::nullopt;
    }
  }

  // ------------------------------------------------------------ expressions

  Expr MutateBinary(const BinaryNode* op, const Expr& e) override {
    Expr a = MutateExpr(op->a);
    Expr b = MutateExpr(op->b);
    Expr rewritten = SimplifyBinary(op->op, a, b);
    if (rewritten.defined()) return rewritten;
    if (a.same_as(op->a) && b.same_as(op->b)) return e;
    return BinaryNode::make(op->op, a, b);
  }

  Expr MutateNot(const NotNode* op, const Expr& e) override {
    Expr a = MutateExpr(op->a);
    if (const auto* imm = a.as<BoolImmNode>()) return BoolImmNode::make(!imm->value);
    if (const auto* inner = a.as<NotNode>()) return inner->a;
    return a.same_as(op->a) ? e : NotNode::make(a);
  }

  Expr MutateSelect(const SelectNode* op, const Expr& e) override {
    Expr c = MutateExpr(op->cond);
    Expr t = MutateExpr(op->true_value);
    Expr f = MutateExpr(op->false_value);
    if (const auto* imm = c.as<BoolImmNode>()) return imm->value ? t : f;
    if (StructurallyEqual(t, f)) return t;
    if (c.same_as(op->cond) && t.same_as(op->true_value) && f.same_as(op->false_value)) return e;
    return SelectNode::make(c, t, f);
  }

  Expr MutateCast(const CastNode* op, const Expr& e) override {
    Expr v = MutateExpr(op->value);
    if (v.dtype() == op->dtype) return v;
    if (std::optional<Expr> folded = FoldCast(op->dtype, v)) return *folded;
    if (const auto* bc = v.as<BroadcastNode>()) {
      if (std::optional<Expr> folded = FoldCast(op->dtype.element_of(), bc->value)) {
        return BroadcastNode::make(*folded, bc->lanes);
      }
    }
    return v.same_as(op->value) ? e : CastNode::make(op->dtype, v);
  }

  Expr MutateLet(const LetNode* op, const Expr& e) override {
    Expr value = MutateExpr(op->value);
    if (IsTrivial(value)) return MutateExpr(Substitute(op->body, {{op->var.get(), value}}));
    ScopedRange range(this, op->var, Bound(value));
    Expr body = MutateExpr(op->body);
    // A body that does not read the var is the let's value (expressions have
    // no side effects): `(let v = x in 0.0)` is the constant 0.0, seen as one.
    if (!Reads(body, op->var.get())) return body;
    if (body.get() == op->var.get()) return value;  // (let v = e in v) is e
    if (value.same_as(op->value) && body.same_as(op->body)) return e;
    return LetNode::make(op->var, value, body);
  }

  Expr MutateCall(const CallNode* op, const Expr& e) override {
    if (op->op == Intrinsic::kIfThenElse) {
      Expr c = MutateExpr(op->args[0]);
      if (const auto* imm = c.as<BoolImmNode>()) {
        return MutateExpr(imm->value ? op->args[1] : op->args[2]);
      }
    }
    Expr result = ExprMutator::MutateCall(op, e);
    const auto* call = result.as<CallNode>();
    if (call != nullptr) {
      if (std::optional<Expr> folded = FoldCall(call->op, call->args)) return *folded;
    }
    if (call != nullptr && call->op == Intrinsic::kIfThenElse &&
        StructurallyEqual(call->args[1], call->args[2])) {
      return call->args[1];  // both sides alike: nothing to choose (and no side effects)
    }
    return result;
  }

  // ------------------------------------------------------------ statements

  Stmt MutateLetStmt(const LetStmtNode* op, const Stmt& s) override {
    Expr value = MutateExpr(op->value);
    if (IsTrivial(value)) return MutateStmt(Substitute(op->body, {{op->var.get(), value}}));
    ScopedRange range(this, op->var, Bound(value));
    Stmt body = MutateStmt(op->body);
    if (value.same_as(op->value) && body.same_as(op->body)) return s;
    return LetStmtNode::make(op->var, value, body);
  }

  Stmt MutateFor(const ForNode* op, const Stmt& s) override {
    Expr min = MutateExpr(op->min);
    Expr extent = MutateExpr(op->extent);
    Expr step = MutateExpr(op->step);
    std::optional<int64_t> n = AsConstInt(extent);
    bool empty = n.has_value() && (extent.dtype().is_int() ? *n <= 0 : *n == 0);
    if (empty && !IsThreadBinding(op->kind)) {
      return NoOp();
    }
    // A serial or unrolled loop over one value is its body with the loop var
    // bound to it (so that, say, a local array indexed by it and constants
    // is indexed by constants alone).
    std::optional<int64_t> stride = AsConstInt(step);
    if (n == 1 && stride && *stride >= 1 &&
        (op->kind == LoopKind::kSerial || op->kind == LoopKind::kUnrolled)) {
      return MutateStmt(LetStmtNode::make(op->loop_var, min, op->body));
    }
    // The loop var lies in [min, min + extent - 1] (a positive step only skips values).
    std::optional<IntRange> var_range;
    std::optional<IntRange> lo = Bound(min), count = Bound(extent);
    if (lo && count && count->max >= 1) {
      var_range = Fit(op->loop_var.dtype(), lo->min, Int128{lo->max} + count->max - 1);
    }
    ScopedRange range(this, op->loop_var, var_range);
    Stmt body = MutateStmt(op->body);
    if (min.same_as(op->min) && extent.same_as(op->extent) && step.same_as(op->step) &&
        body.same_as(op->body)) {
      return s;
    }
    return ForNode::make(op->loop_var, min, extent, op->kind, body, step);
  }

  Stmt MutateIf(const IfNode* op, const Stmt& s) override {
    Expr c = MutateExpr(op->cond);
    if (const auto* imm = c.as<BoolImmNode>()) {
      Stmt taken = imm->value ? op->then_case : op->else_case;
      return taken.defined() ? MutateStmt(taken) : NoOp();
    }
    Stmt t = MutateStmt(op->then_case);
    Stmt f = MutateStmt(op->else_case);
    if (f.defined() && IsNoOp(f)) f = Stmt();
    if (IsNoOp(t) && !f.defined()) return NoOp();
    if (c.same_as(op->cond) && t.same_as(op->then_case) && f.same_as(op->else_case)) return s;
    return IfNode::make(c, t, f);
  }

  Stmt MutateWhile(const WhileNode* op, const Stmt& s) override {
    Expr c = MutateExpr(op->cond);
    if (const auto* imm = c.as<BoolImmNode>(); imm != nullptr && !imm->value) return NoOp();
    Stmt body = MutateStmt(op->body);
    if (c.same_as(op->cond) && body.same_as(op->body)) return s;
    return WhileNode::make(c, body);
  }

  Stmt MutateSeq(const SeqNode* op, const Stmt& s) override {
    std::vector<Stmt> stmts;
    bool changed = false;
    for (const Stmt& child : op->stmts) {
      stmts.push_back(MutateStmt(child));
      changed |= !stmts.back().same_as(child) || IsNoOp(child) || child.as<SeqNode>();
    }
    return changed ? MakeSeq(std::move(stmts)) : s;
  }

  Stmt MutateAssert(const AssertNode* op, const Stmt& s) override {
    Expr c = MutateExpr(op->cond);
    if (const auto* imm = c.as<BoolImmNode>(); imm != nullptr && imm->value) return NoOp();
    return c.same_as(op->cond) ? s : AssertNode::make(c, op->message);
  }

  Stmt MutateAllocate(const AllocateNode* op, const Stmt& s) override {
    Stmt result = StmtMutator::MutateAllocate(op, s);
    const auto* alloc = result.as<AllocateNode>();
    return alloc != nullptr && IsNoOp(alloc->body) ? NoOp() : result;
  }

 private:
  // Binds a var's range for the lifetime of the object.
  class ScopedRange {
   public:
    ScopedRange(Simplifier* s, const Var& v, std::optional<IntRange> range) : s_(s), v_(v.get()) {
      if (range) s_->ranges_[v_] = *range;
    }
    ~ScopedRange() { s_->ranges_.erase(v_); }

   private:
    Simplifier* s_;
    const VarNode* v_;
  };

  // Constants and plain vars are inlined into a let's body.
  static bool IsTrivial(const Expr& e) {
    return e.as<IntImmNode>() || e.as<FloatImmNode>() || e.as<BoolImmNode>() || e.as<VarNode>();
  }

  // ------------------------------------------------------------ binary rules

  // x + c, written x - |c| for negative c (signed view of the constant).
  static Expr AddConst(const Expr& x, int64_t c) {
    DataType t = x.dtype();
    c = WrapToIntType(t, c);
    if (c == 0) return x;
    int64_t as_signed = WrapToIntType(DataType::Int(t.bits), c);
    bool is_min = t.bits < 64 ? as_signed == -(int64_t{1} << (t.bits - 1))
                              : as_signed == std::numeric_limits<int64_t>::min();
    if (as_signed < 0 && !is_min) {
      return BinaryNode::make(BinaryOp::kSub, x, IntImmNode::make(t, -as_signed));
    }
    return BinaryNode::make(BinaryOp::kAdd, x, IntImmNode::make(t, c));
  }

  // Matches x + c and x - c (as x + (-c)) with an integer constant c.
  static bool MatchAddConst(const Expr& e, Expr* x, int64_t* c) {
    const auto* op = e.as<BinaryNode>();
    if (op == nullptr || (op->op != BinaryOp::kAdd && op->op != BinaryOp::kSub)) return false;
    const auto* imm = op->b.as<IntImmNode>();
    if (imm == nullptr) return false;
    *x = op->a;
    *c = op->op == BinaryOp::kAdd ? imm->value : static_cast<int64_t>(uint64_t{0} - imm->uvalue());
    return true;
  }

  // Matches x * c with a positive integer constant c.
  static bool MatchMulConst(const Expr& e, Expr* x, int64_t* c) {
    const auto* op = e.as<BinaryNode>();
    if (op == nullptr || op->op != BinaryOp::kMul) return false;
    const auto* imm = op->b.as<IntImmNode>();
    if (imm == nullptr || imm->value <= 0) return false;
    *x = op->a;
    *c = imm->value;
    return true;
  }

  // x where a + b is (x / c) * c + x % c (or the floor pair) for a positive
  // constant c: the quotient times c plus the remainder is the dividend for
  // both roundings, and nothing wraps (|q * c| <= |x|). Also with x itself
  // a quotient y / k whose division the first term merged (y / (k * c)).
  static Expr MatchQuotientPlusRemainder(const Expr& a, const Expr& b) {
    Expr q;
    int64_t c;
    const auto* rem = b.as<BinaryNode>();
    if (!MatchMulConst(a, &q, &c) || rem == nullptr) return Expr();
    const auto* div = q.as<BinaryNode>();
    if (div == nullptr) return Expr();
    const BinaryOp rounding = div->op;
    const bool pair = (rounding == BinaryOp::kDiv && rem->op == BinaryOp::kMod) ||
                      (rounding == BinaryOp::kFloorDiv && rem->op == BinaryOp::kFloorMod);
    std::optional<int64_t> d = AsConstInt(div->b);
    if (!pair || !d || !IsConstInt(rem->b, c)) return Expr();
    if (*d == c && StructurallyEqual(div->a, rem->a)) return div->a;
    const auto* inner = rem->a.as<BinaryNode>();
    if (inner == nullptr || inner->op != rounding) return Expr();
    std::optional<int64_t> k = AsConstInt(inner->b);
    if (!k || *k <= 0 || *d / c != *k || *d % c != 0 || !StructurallyEqual(div->a, inner->a)) {
      return Expr();
    }
    return rem->a;
  }

  // The rewritten a op b, or a null Expr when no rule applies.
  Expr SimplifyBinary(BinaryOp op, const Expr& a, const Expr& b) {
    if (a.dtype() != b.dtype()) return Expr();  // ill-typed: leave for the verifier
    if (std::optional<Expr> folded = FoldBinary(op, a, b)) return *folded;
    if (Expr v = SimplifyVector(op, a, b); v.defined()) return v;
    DataType t = a.dtype();
    if (t.is_bool()) return SimplifyLogic(op, a, b);
    if (IsComparison(op)) return SimplifyCompare(op, a, b);
    if (op == BinaryOp::kMin || op == BinaryOp::kMax) {
      if (StructurallyEqual(a, b)) return a;
      return Expr();
    }
    if (t.is_float()) return SimplifyFloat(op, a, b);
    if (!t.is_integer()) return Expr();
    // Constants go right for + and *, so the rules below see x + c and x * c.
    if ((op == BinaryOp::kAdd || op == BinaryOp::kMul) && a.as<IntImmNode>() &&
        !b.as<IntImmNode>()) {
      Expr swapped = SimplifyBinary(op, b, a);
      return swapped.defined() ? swapped : BinaryNode::make(op, b, a);
    }
    std::optional<int64_t> cb = AsConstInt(b);
    switch (op) {
      case BinaryOp::kAdd:
      case BinaryOp::kSub: {
        if (op == BinaryOp::kSub && StructurallyEqual(a, b)) return MakeZero(t);
        if (op == BinaryOp::kAdd && t.is_scalar()) {
          if (Expr x = MatchQuotientPlusRemainder(a, b); x.defined()) return x;
          if (Expr x = MatchQuotientPlusRemainder(b, a); x.defined()) return x;
        }
        if (!cb || !t.is_scalar()) return Expr();
        int64_t c = op == BinaryOp::kAdd ? *cb : static_cast<int64_t>(uint64_t{0} - *cb);
        Expr x;
        int64_t c0;
        // (x + c0) + c == x + (c0 + c): exact in wrap-around arithmetic.
        if (MatchAddConst(a, &x, &c0)) return AddConst(x, IntBinary(BinaryOp::kAdd, t, c0, c));
        if (c == 0) return a;
        // Canonical spelling of adding a negative constant.
        Expr canonical = AddConst(a, c);
        const auto* bin = canonical.as<BinaryNode>();
        return bin->op == op ? Expr() : canonical;
      }
      case BinaryOp::kMul: {
        if (!cb) return Expr();
        if (*cb == 0) return MakeZero(t);
        if (*cb == 1) return a;
        Expr x;
        int64_t c0;
        if (t.is_scalar() && MatchMulConst(a, &x, &c0)) {
          return BinaryNode::make(BinaryOp::kMul, x,
                                  IntImmNode::make(t, IntBinary(BinaryOp::kMul, t, c0, *cb)));
        }
        return Expr();
      }
      case BinaryOp::kDiv:
      case BinaryOp::kFloorDiv:
      case BinaryOp::kMod:
      case BinaryOp::kFloorMod:
        return SimplifyDivMod(op, a, b);
      default:
        return Expr();
    }
  }

  Expr SimplifyDivMod(BinaryOp op, const Expr& a, const Expr& b) {
    DataType t = a.dtype();
    std::optional<int64_t> cb = AsConstInt(b);
    if (!cb || *cb <= 0 || !t.is_scalar()) return Expr();
    int64_t c = *cb;
    bool is_div = op == BinaryOp::kDiv || op == BinaryOp::kFloorDiv;
    if (c == 1) return is_div ? a : MakeZero(t);
    // (x / c0) / c == x / (c0 * c) for positive constants, both roundings.
    if (const auto* inner = a.as<BinaryNode>(); inner && is_div && inner->op == op) {
      std::optional<int64_t> c0 = AsConstInt(inner->b);
      if (c0 && *c0 > 0 && *c0 <= TypeRange(t)->max / c) {
        return BinaryNode::make(op, inner->a, IntImmNode::make(t, *c0 * c));
      }
    }
    std::optional<IntRange> ra = Bound(a);
    // 0 <= a < c: the quotient is 0 and the remainder a, for both roundings.
    if (ra && ra->min >= 0 && ra->max < c) return is_div ? MakeZero(t) : a;
    Expr x, y;
    int64_t m;
    // a = x * m + y, with y possibly absent (0).
    if (MatchMulConst(a, &x, &m)) {
      y = Expr();
    } else if (const auto* add = a.as<BinaryNode>(); add && add->op == BinaryOp::kAdd) {
      if (MatchMulConst(add->a, &x, &m)) {
        y = add->b;
      } else if (MatchMulConst(add->b, &x, &m)) {
        y = add->a;
      } else {
        return Expr();
      }
    } else {
      return Expr();
    }
    if (m % c != 0) return Expr();
    // (x * m) % c == 0 even with wrap-around when c divides 2^bits.
    if (!y.defined() && !is_div && IsPowerOfTwo(c)) return MakeZero(t);
    // The rest needs x * m + y computed without wrap-around, 0 <= y < c, and
    // for truncating division with y != 0 a non-negative dividend (then
    // truncation and flooring agree; with y == 0 the division is exact).
    std::optional<IntRange> rx = Bound(x);
    if (!rx || x.dtype() != t) return Expr();
    IntRange ry = IntRange{0, 0};
    if (y.defined()) {
      std::optional<IntRange> r = Bound(y);
      if (!r) return Expr();
      ry = *r;
    }
    std::optional<IntRange> product = ExactRange(BinaryOp::kMul, t, *rx, IntRange{m, m});
    if (!product) return Expr();
    std::optional<IntRange> sum = ExactRange(BinaryOp::kAdd, t, *product, ry);
    if (!sum || ry.min < 0 || ry.max >= c) return Expr();
    bool floor_like = op == BinaryOp::kFloorDiv || op == BinaryOp::kFloorMod;
    if (!floor_like && y.defined() && sum->min < 0) return Expr();
    if (!is_div) return y.defined() ? y : MakeZero(t);
    return m == c ? x : BinaryNode::make(BinaryOp::kMul, x, IntImmNode::make(t, m / c));
  }

  Expr SimplifyCompare(BinaryOp op, const Expr& a, const Expr& b) {
    DataType t = a.dtype();
    if (t.is_integer() && StructurallyEqual(a, b)) {
      bool equal_holds = op == BinaryOp::kEq || op == BinaryOp::kLe || op == BinaryOp::kGe;
      return MakeConst(DataType::Bool(t.lanes), int64_t{equal_holds ? 1 : 0});
    }
    std::optional<IntRange> ra = Bound(a), rb = Bound(b);
    if (!ra || !rb) return Expr();
    auto known = [&](bool always, bool never) -> Expr {
      if (always) return BoolImmNode::make(true);
      if (never) return BoolImmNode::make(false);
      return Expr();
    };
    switch (op) {
      case BinaryOp::kLt:
        return known(ra->max < rb->min, ra->min >= rb->max);
      case BinaryOp::kLe:
        return known(ra->max <= rb->min, ra->min > rb->max);
      case BinaryOp::kGt:
        return known(ra->min > rb->max, ra->max <= rb->min);
      case BinaryOp::kGe:
        return known(ra->min >= rb->max, ra->max < rb->min);
      case BinaryOp::kEq:
        return known(false, ra->max < rb->min || ra->min > rb->max);
      case BinaryOp::kNe:
        return known(ra->max < rb->min || ra->min > rb->max, false);
      default:
        return Expr();
    }
  }

  Expr SimplifyLogic(BinaryOp op, const Expr& a, const Expr& b) {
    const auto* ca = a.as<BoolImmNode>();
    const auto* cb = b.as<BoolImmNode>();
    if (op == BinaryOp::kAnd) {
      if (cb) return cb->value ? a : b;  // x && true == x; x && false == false
      if (ca) return ca->value ? b : a;
      if (StructurallyEqual(a, b)) return a;
    } else if (op == BinaryOp::kOr) {
      if (cb) return cb->value ? b : a;
      if (ca) return ca->value ? a : b;
      if (StructurallyEqual(a, b)) return a;
    }
    return Expr();
  }

  // Only rewrites exact in IEEE arithmetic: x * 1, x / 1, x - 0 (not x + 0,
  // which turns -0 into +0).
  Expr SimplifyFloat(BinaryOp op, const Expr& a, const Expr& b) {
    auto is_const = [](const Expr& e, double v) {
      const auto* imm = e.as<FloatImmNode>();
      return imm != nullptr && imm->value == v && !std::signbit(imm->value);
    };
    if ((op == BinaryOp::kMul || op == BinaryOp::kDiv) && is_const(b, 1.0)) return a;
    if (op == BinaryOp::kMul && is_const(a, 1.0)) return b;
    if (op == BinaryOp::kSub && is_const(b, 0.0)) return a;
    return Expr();
  }

  // Lane-wise rules for broadcasts and ramps: exact, since every lane
  // computes the same scalar operation.
  Expr SimplifyVector(BinaryOp op, const Expr& a, const Expr& b) {
    const auto* ba = a.as<BroadcastNode>();
    const auto* bb = b.as<BroadcastNode>();
    if (ba && bb) {
      Expr scalar = SimplifyBinary(op, ba->value, bb->value);
      if (!scalar.defined()) scalar = BinaryNode::make(op, ba->value, bb->value);
      return BroadcastNode::make(scalar, ba->lanes);
    }
    if (!a.dtype().is_integer()) return Expr();
    const auto* ra = a.as<RampNode>();
    const auto* rb = b.as<RampNode>();
    auto simplified = [&](BinaryOp o, const Expr& x, const Expr& y) {
      Expr r = SimplifyBinary(o, x, y);
      return r.defined() ? r : BinaryNode::make(o, x, y);
    };
    if (op == BinaryOp::kAdd || op == BinaryOp::kSub) {
      if (ra && bb)
        return RampNode::make(simplified(op, ra->base, bb->value), ra->stride, ra->lanes);
      if (ba && rb && op == BinaryOp::kAdd) {
        return RampNode::make(simplified(op, ba->value, rb->base), rb->stride, rb->lanes);
      }
      if (ra && rb) {
        return RampNode::make(simplified(op, ra->base, rb->base),
                              simplified(op, ra->stride, rb->stride), ra->lanes);
      }
    }
    if (op == BinaryOp::kMul && ra && bb) {
      return RampNode::make(simplified(op, ra->base, bb->value),
                            simplified(op, ra->stride, bb->value), ra->lanes);
    }
    if (ra && bb) return SimplifyRampDivMod(op, *ra, bb->value);
    return Expr();
  }

  // ramp(b, s, n) / c -> broadcast(b / c, n) and ramp(b, s, n) % c ->
  // ramp(b % c, s, n) where no two lanes lie on either side of a multiple
  // of c: b is a multiple of g, g divides c and s * (n - 1) < g (so b % c
  // is at most c - g and the last lane's remainder at most c - 1), b's
  // range is known, and for truncating / and % b >= 0 (so the first lane's
  // remainder is not negative).
  Expr SimplifyRampDivMod(BinaryOp op, const RampNode& ramp, const Expr& divisor) {
    const bool is_div = op == BinaryOp::kDiv || op == BinaryOp::kFloorDiv;
    if (!is_div && op != BinaryOp::kMod && op != BinaryOp::kFloorMod) return Expr();
    std::optional<int64_t> c = AsConstInt(divisor), s = AsConstInt(ramp.stride);
    if (!c || !s || *c <= 0 || *s < 0 || *c > (int64_t{1} << 30)) return Expr();
    const int64_t g = std::gcd(KnownMultiple(ramp.base), *c);
    if (*s * (ramp.lanes - 1) >= g) return Expr();
    // A known range also rules out wrap-around in b (which would break b's
    // divisibility by g).
    std::optional<IntRange> r = Bound(ramp.base);
    if (!r) return Expr();
    if ((op == BinaryOp::kDiv || op == BinaryOp::kMod) && r->min < 0) return Expr();
    Expr scalar = SimplifyBinary(op, ramp.base, divisor);
    if (!scalar.defined()) scalar = BinaryNode::make(op, ramp.base, divisor);
    if (is_div) return BroadcastNode::make(scalar, ramp.lanes);
    return RampNode::make(scalar, ramp.stride, ramp.lanes);
  }

  // A positive integer that provably divides the integer scalar e (0: e is
  // 0, a multiple of everything; 1 where nothing is known).
  static int64_t KnownMultiple(const Expr& e) {
    constexpr int64_t kCap = int64_t{1} << 30;
    if (const auto* imm = e.as<IntImmNode>()) {
      const int64_t v = imm->value < 0 ? -imm->value : imm->value;
      return v > kCap ? 1 : v;
    }
    const auto* bin = e.as<BinaryNode>();
    if (bin == nullptr) return 1;
    const int64_t a = KnownMultiple(bin->a), b = KnownMultiple(bin->b);
    switch (bin->op) {
      case BinaryOp::kAdd:
      case BinaryOp::kSub:
      case BinaryOp::kMin:
      case BinaryOp::kMax:
        return std::gcd(a, b) == 0 ? 0 : std::gcd(a, b);
      case BinaryOp::kMul:
        if (a == 0 || b == 0) return 0;
        return a > kCap / b ? 1 : a * b;
      case BinaryOp::kMod:
      case BinaryOp::kFloorMod:
        // a - c * q: a multiple of whatever divides both a and c.
        return b == 0 ? 1 : std::gcd(a, b);
      default:
        return 1;
    }
  }

  RangeMap ranges_;
};

}  // namespace

Expr Simplify(const Expr& e, const RangeMap& ranges) {
  // A few passes reach the rules that only apply after an earlier rewrite.
  Expr current = e;
  for (int i = 0; i < 4; ++i) {
    Expr next = Simplifier(ranges).MutateExpr(current);
    if (next.same_as(current)) break;
    current = next;
  }
  return current;
}

Stmt Simplify(const Stmt& s) {
  Stmt current = s;
  for (int i = 0; i < 4; ++i) {
    Stmt next = Simplifier({}).MutateStmt(current);
    if (next.same_as(current)) break;
    current = next;
  }
  return current;
}

Function Simplify(const Function& f) {
  Stmt body = Simplify(f.body());
  return body.same_as(f.body()) ? f : f.WithBody(body);
}

}  // namespace kiln::ir
