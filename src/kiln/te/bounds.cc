// Interval evaluation of index expressions.
#include "kiln/te/bounds.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

#include "kiln/ir/expr_nodes.h"
#include "kiln/ir/expr_ops.h"
#include "kiln/ir/linear.h"
#include "kiln/ir/simplifier.h"
#include "kiln/ir/visitor.h"

namespace kiln::te::internal {
namespace {

using ir::BinaryOp;
using ir::Expr;

bool UsesAny(const Expr& e, const IntervalMap& ranges) {
  struct Finder : ir::ExprVisitor {
    const IntervalMap* ranges;
    bool found = false;
    void VisitVar(const ir::VarNode* op) override { found |= ranges->count(op) != 0; }
  } finder;
  finder.ranges = &ranges;
  finder.VisitExpr(e);
  return finder.found;
}

std::optional<int64_t> PositiveConstant(const Expr& e) {
  const std::optional<int64_t> c = ir::AsConstInt(ir::Simplify(e));
  if (c && *c > 0) return c;
  return std::nullopt;
}

// The operands of a nest of `op` (min or max): min(min(a, b), c) is a, b, c.
void Flatten(const Expr& e, BinaryOp op, std::vector<Expr>& out) {
  const auto* m = e.as<ir::BinaryNode>();
  if (m != nullptr && m->op == op && e.dtype().lanes == 1) {
    Flatten(m->a, op, out);
    Flatten(m->b, op, out);
  } else {
    out.push_back(e);
  }
}

// `a` and `b` as one expression under `op` (the smaller or larger of the
// two) where that is exact: their difference a constant, or both min/max
// of the same bound, min(max(x, c), max(y, c)) being max(min(x, y), c) and
// min(min(x, c), min(y, c)) min(min(x, y), c) (likewise for max), where
// min(x, y) folds. Null where neither applies.
Expr Merge(const Expr& a, const Expr& b, BinaryOp op) {
  const bool lower = op == BinaryOp::kMin;
  if (std::optional<int64_t> d = ConstantDifference(a, b)) return (*d <= 0) == lower ? a : b;
  const auto* x = a.as<ir::BinaryNode>();
  const auto* y = b.as<ir::BinaryNode>();
  if (x == nullptr || y == nullptr || x->op != y->op || a.dtype().lanes != 1 ||
      (x->op != BinaryOp::kMin && x->op != BinaryOp::kMax)) {
    return Expr();
  }
  for (const auto& [xc, xo] : {std::pair{x->b, x->a}, std::pair{x->a, x->b}}) {
    for (const auto& [yc, yo] : {std::pair{y->b, y->a}, std::pair{y->a, y->b}}) {
      if (ConstantDifference(xc, yc) != 0) continue;
      if (const std::optional<int64_t> d = ConstantDifference(xo, yo)) {
        return ir::BinaryNode::make(x->op, (*d <= 0) == lower ? xo : yo, xc);
      }
    }
  }
  return Expr();
}

// min(a, b) (op kMin) or max(a, b), its operands merged where exact: the
// union of many clamped reads, max(i - 1, 0) ... max(i - 12, 0) beside
// min(i + 1, 999) ..., stays a few clamps instead of a nest of dozens.
Expr Extreme(const Expr& a, const Expr& b, BinaryOp op) {
  std::vector<Expr> terms, more;
  Flatten(a, op, terms);
  Flatten(b, op, more);
  for (const Expr& m : more) {
    bool merged = false;
    for (Expr& t : terms) {
      if (Expr both = Merge(t, m, op); both.defined()) {
        t = both;
        merged = true;
        break;
      }
    }
    if (!merged) terms.push_back(m);
  }
  Expr out = terms[0];
  for (size_t k = 1; k < terms.size(); ++k) out = ir::BinaryNode::make(op, out, terms[k]);
  return out;
}
Expr Lower(const Expr& a, const Expr& b) {
  return Extreme(a, b, BinaryOp::kMin);
}
Expr Upper(const Expr& a, const Expr& b) {
  return Extreme(a, b, BinaryOp::kMax);
}

// `e` with a min or max inside a linear sum lifted to the top: r + c *
// min(x, y) is min(r + c x, r + c y) for c > 0 and max(...) for c < 0
// (likewise max). `e` itself where it holds none outside other terms.
Expr LiftMinMax(const Expr& e) {
  const Expr s = ir::Simplify(e);
  if (s.dtype() != ir::kI32) return s;
  if (const auto* m = s.as<ir::BinaryNode>();
      m != nullptr && (m->op == BinaryOp::kMin || m->op == BinaryOp::kMax)) {
    return s;
  }
  ir::LinearSum linear;
  if (!ir::AddLinear(s, 1, linear)) return s;
  for (size_t t = 0; t < linear.terms.size(); ++t) {
    const auto& [term, c] = linear.terms[t];
    const auto* m = term.as<ir::BinaryNode>();
    if (c == 0 || m == nullptr || (m->op != BinaryOp::kMin && m->op != BinaryOp::kMax)) continue;
    ir::LinearSum rest = linear;
    rest.terms[t].second = 0;
    const Expr r = rest.ToExpr(ir::kI32);
    const Expr k = ir::IntConst(ir::kI32, c);
    const bool keep = c > 0;
    const BinaryOp op = keep ? m->op : (m->op == BinaryOp::kMin ? BinaryOp::kMax : BinaryOp::kMin);
    return ir::BinaryNode::make(op, ir::Simplify(r + m->a * k), ir::Simplify(r + m->b * k));
  }
  return s;
}

// The constant `v` in the type of `like` (broadcast for a vector).
Expr Constant(const Expr& like, int64_t v) {
  const int lanes = like.dtype().lanes;
  const Expr c = ir::IntConst(like.dtype().with_lanes(1), v);
  return lanes == 1 ? c : ir::Broadcast(c, lanes);
}

// floor_div([lo, lo + k], d) where every term of lo has a coefficient
// that d divides: lo = d * q + r for q those terms divided by d and r a
// constant, so the quotients are exactly [q + floor(r / d), q + floor((r +
// k) / d)], whose size is a constant (where dividing the two ends would
// leave floor_div(4 i + 3, 2) - floor_div(4 i, 2), which nothing folds).
std::optional<Interval> FloorDivInterval(const Interval& x, int64_t d) {
  const ir::DataType type = x.min.dtype();
  if (type != ir::kI32 || d <= 1) return std::nullopt;
  std::optional<int64_t> k = ConstantDifference(x.max, x.min);
  ir::LinearSum lo;
  if (!k || *k < 0 || !ir::AddLinear(ir::Simplify(x.min), 1, lo)) return std::nullopt;
  ir::LinearSum quotient;
  for (const auto& [term, c] : lo.terms) {
    if (c % d != 0) return std::nullopt;
    quotient.Add(term, c / d);
  }
  auto floor_div = [](int64_t a, int64_t b) { return a / b - (a % b != 0 && a < 0 ? 1 : 0); };
  const Expr q = quotient.ToExpr(type);
  return Interval{ir::Simplify(q + ir::IntConst(type, floor_div(lo.constant, d))),
                  ir::Simplify(q + ir::IntConst(type, floor_div(lo.constant + *k, d)))};
}

}  // namespace

std::optional<int64_t> ConstantDifference(const Expr& a, const Expr& b) {
  ir::LinearSum linear;
  if (!ir::AddLinear(ir::Simplify(a), 1, linear) || !ir::AddLinear(ir::Simplify(b), -1, linear)) {
    return std::nullopt;
  }
  for (const auto& [term, c] : linear.terms) {
    if (c != 0) return std::nullopt;
  }
  return linear.constant;
}

namespace {

using VarSet = std::unordered_set<const ir::VarNode*>;

// What a bound is taken over, and the work it may still do.
struct BoundContext {
  const IntervalMap& ranges;
  const VarSet& nonnegative;
  int budget;
};

// `term` as e / d (truncating or floor division by a constant d > 0): the
// division and d; nullptr otherwise.
const ir::BinaryNode* QuotientByConstant(const Expr& term, int64_t& d) {
  const auto* q = term.as<ir::BinaryNode>();
  if (q == nullptr || (q->op != BinaryOp::kDiv && q->op != BinaryOp::kFloorDiv)) return nullptr;
  const std::optional<int64_t> divisor = ir::AsConstInt(q->b);
  if (!divisor || *divisor <= 0) return nullptr;
  d = *divisor;
  return q;
}

// Whether `e` is >= 0 wherever the loops run: a constant >= 0 plus
// non-negative multiples of loop variables (ranges start at 0), of
// variables of `nonnegative`, and of quotients of such by positive
// constants.
bool NonNegative(const Expr& e, const BoundContext& cx, int depth = 0) {
  ir::LinearSum linear;
  if (depth > 4 || !ir::AddLinear(e, 1, linear) || linear.constant < 0) return false;
  for (const auto& [term, c] : linear.terms) {
    if (c == 0) continue;
    if (c < 0) return false;
    if (const auto* v = term.as<ir::VarNode>()) {
      const auto range = cx.ranges.find(v);
      const std::optional<int64_t> lo =
          range == cx.ranges.end() ? std::nullopt : ir::AsConstInt(range->second.min);
      if (cx.nonnegative.count(v) == 0 && !(lo && *lo >= 0)) return false;
      continue;
    }
    int64_t d = 0;
    const ir::BinaryNode* q = QuotientByConstant(term, d);
    if (q == nullptr || !NonNegative(q->a, cx, depth + 1)) return false;
  }
  return true;
}

// The bound of a linear sum: ranged variables and quotients replaced by
// what bounds them from above (see the header), then the variables of
// `nonnegative` under negative coefficients taken at 0.
std::optional<int64_t> LinearUpperBound(ir::LinearSum linear, const BoundContext& cx) {
  // The sum is kept times `denominator`: a quotient e / d whose coefficient
  // d does not divide scales the whole sum until it does (2 (e / 4) is
  // (4 (e / 4)) / 2, at most e / 2), and the bound is divided back, down.
  int64_t denominator = 1;
  // A quotient the bound can replace: d q <= e, and d q >= e - d + 1
  // (floor division, or e >= 0).
  auto quotient = [&](const Expr& term, int64_t& d) -> const ir::BinaryNode* {
    const ir::BinaryNode* q = QuotientByConstant(term, d);
    return q != nullptr && (q->op == BinaryOp::kFloorDiv || NonNegative(q->a, cx)) ? q : nullptr;
  };
  // Each step adds products of i32 values: keep the sums far from int64's
  // ends.
  constexpr int64_t kLimit = int64_t{1} << 40;
  auto within_limits = [&](const ir::LinearSum& sum) {
    if (sum.constant <= -kLimit || sum.constant >= kLimit) return false;
    for (const auto& [term, c] : sum.terms) {
      if (c <= -kLimit || c >= kLimit) return false;
    }
    return true;
  };
  for (int round = 0; round < 8; ++round) {
    if (!within_limits(linear)) return std::nullopt;
    int64_t scale = 1;
    for (const auto& [term, c] : linear.terms) {
      if (c == 0) continue;
      int64_t d = 0;
      if (quotient(term, d) != nullptr) {
        const int64_t need = d / std::gcd(c < 0 ? -c : c, d);
        scale = std::lcm(scale, need);
        if (scale > (int64_t{1} << 16)) return std::nullopt;
      }
    }
    if (scale > 1) {
      denominator *= scale;
      if (denominator > (int64_t{1} << 16)) return std::nullopt;
      linear.constant *= scale;
      for (auto& [term, c] : linear.terms) c *= scale;
    }
    ir::LinearSum next;
    next.constant = linear.constant;
    bool replaced = false;
    for (const auto& [term, c] : linear.terms) {
      if (c == 0) continue;
      if (const auto* v = term.as<ir::VarNode>()) {
        if (const auto range = cx.ranges.find(v); range != cx.ranges.end()) {
          const Expr& end = c > 0 ? range->second.max : range->second.min;
          if (!end.defined() || !ir::AddLinear(ir::Simplify(end), c, next)) return std::nullopt;
          replaced = true;
          continue;
        }
      }
      int64_t d = 0;
      if (const ir::BinaryNode* q = quotient(term, d); q != nullptr && c % d == 0) {
        // (The scaling above made every coefficient a multiple of its d.)
        const int64_t k = c / d;
        int64_t slack = 0;
        if (!ir::AddLinear(q->a, k, next) ||
            (k < 0 && (__builtin_mul_overflow(k, 1 - d, &slack) ||
                       __builtin_add_overflow(next.constant, slack, &next.constant)))) {
          return std::nullopt;
        }
        replaced = true;
        continue;
      }
      next.Add(term, c);
    }
    if (!within_limits(next)) return std::nullopt;
    linear = std::move(next);
    if (!replaced) break;
  }
  for (const auto& [term, c] : linear.terms) {
    if (c == 0) continue;
    const auto* v = term.as<ir::VarNode>();
    if (c > 0 || v == nullptr || cx.nonnegative.count(v) == 0) return std::nullopt;
  }
  // floor(constant / denominator): the bound of an integer.
  const int64_t whole = linear.constant / denominator;
  return whole - (linear.constant % denominator < 0 ? 1 : 0);
}

std::optional<int64_t> DifferenceUpperBound(const Expr& a, const Expr& b, BoundContext& cx) {
  if (--cx.budget < 0) return std::nullopt;
  if (std::optional<int64_t> d = ConstantDifference(a, b)) return d;
  // A min or max on either side: the bound over its operands' bounds.
  // `larger`: the difference is the larger of the two operand differences
  // (a max in a, a min in b), else the smaller.
  auto split = [&](const Expr& x, const Expr& y, bool in_a, bool larger) -> std::optional<int64_t> {
    std::optional<int64_t> dx =
        in_a ? DifferenceUpperBound(x, b, cx) : DifferenceUpperBound(a, x, cx);
    std::optional<int64_t> dy =
        in_a ? DifferenceUpperBound(y, b, cx) : DifferenceUpperBound(a, y, cx);
    if (larger) {
      if (!dx || !dy) return std::nullopt;
      return std::max(*dx, *dy);
    }
    if (!dx) return dy;
    if (!dy) return dx;
    return std::min(*dx, *dy);
  };
  // Both sides a min, or both a max: the larger difference of paired
  // operands, either way round.
  auto paired = [&](const ir::BinaryNode& x, const ir::BinaryNode& y) -> std::optional<int64_t> {
    std::optional<int64_t> best;
    for (const auto& [y1, y2] : {std::pair{y.a, y.b}, std::pair{y.b, y.a}}) {
      const std::optional<int64_t> d1 = DifferenceUpperBound(x.a, y1, cx);
      const std::optional<int64_t> d2 = d1 ? DifferenceUpperBound(x.b, y2, cx) : std::nullopt;
      if (d2) best = std::min(best.value_or(INT64_MAX), std::max(*d1, *d2));
    }
    return best;
  };
  const Expr sa = LiftMinMax(a), sb = LiftMinMax(b);
  auto clamp = [](const Expr& e) {
    const auto* m = e.as<ir::BinaryNode>();
    return m != nullptr && m->dtype.lanes == 1 &&
                   (m->op == BinaryOp::kMin || m->op == BinaryOp::kMax)
               ? m
               : nullptr;
  };
  const ir::BinaryNode* ma = clamp(sa);
  const ir::BinaryNode* mb = clamp(sb);
  if (ma != nullptr || mb != nullptr) {
    const bool in_a = ma != nullptr;
    const ir::BinaryNode* m = in_a ? ma : mb;
    std::optional<int64_t> bound = split(m->a, m->b, in_a, (m->op == BinaryOp::kMax) == in_a);
    if (ma != nullptr && mb != nullptr && ma->op == mb->op) {
      if (const std::optional<int64_t> p = paired(*ma, *mb)) {
        bound = std::min(bound.value_or(INT64_MAX), *p);
      }
    }
    return bound;
  }
  // Neither is a min or max: a - b as a linear sum. (Terms other than
  // ranged variables and the quotients of their ends, such as divisions of
  // loop variables, are left unbounded: their interval would bound the
  // difference by about the tensor's size, where the caller should refuse
  // rather than allocate that much.)
  if (sa.dtype() != ir::kI32 || sb.dtype() != ir::kI32) return std::nullopt;
  ir::LinearSum linear;
  if (!ir::AddLinear(sa, 1, linear) || !ir::AddLinear(sb, -1, linear)) return std::nullopt;
  return LinearUpperBound(std::move(linear), cx);
}

}  // namespace

std::optional<int64_t> DifferenceUpperBound(
    const Expr& a, const Expr& b, const IntervalMap& ranges,
    const std::unordered_set<const ir::VarNode*>& nonnegative) {
  // min/max nests are small; the budget keeps a pathological one cheap.
  BoundContext cx{ranges, nonnegative, 4096};
  return DifferenceUpperBound(a, b, cx);
}

Expr CancelTerms(const Expr& e) {
  if (e.dtype() != ir::kI32) return e;
  ir::LinearSum linear;
  if (!ir::AddLinear(ir::Simplify(e), 1, linear)) return ir::Simplify(e);
  return linear.ToExpr(e.dtype());
}

Interval Union(const Interval& a, const Interval& b) {
  return {Lower(a.min, b.min), Upper(a.max, b.max)};
}

std::optional<Interval> EvalInterval(const Expr& e, const IntervalMap& ranges) {
  if (!UsesAny(e, ranges)) return Interval::Point(e);
  if (const auto* v = e.as<ir::VarNode>()) return ranges.at(v);
  if (const auto* cast = e.as<ir::CastNode>()) {
    if (!cast->dtype.is_int() && !cast->dtype.is_uint()) return std::nullopt;
    std::optional<Interval> x = EvalInterval(cast->value, ranges);
    if (!x) return std::nullopt;
    return Interval{ir::Cast(cast->dtype, x->min), ir::Cast(cast->dtype, x->max)};
  }
  if (const auto* let = e.as<ir::LetNode>()) {
    std::optional<Interval> value = EvalInterval(let->value, ranges);
    if (!value) return std::nullopt;
    IntervalMap inner = ranges;
    inner[let->var.get()] = *value;
    return EvalInterval(let->body, inner);
  }
  if (const auto* select = e.as<ir::SelectNode>()) {
    std::optional<Interval> t = EvalInterval(select->true_value, ranges);
    std::optional<Interval> f = EvalInterval(select->false_value, ranges);
    if (!t || !f) return std::nullopt;
    return Union(*t, *f);
  }
  if (const auto* call = e.as<ir::CallNode>()) {
    if (call->op != ir::Intrinsic::kIfThenElse) return std::nullopt;
    std::optional<Interval> t = EvalInterval(call->args[1], ranges);
    std::optional<Interval> f = EvalInterval(call->args[2], ranges);
    if (!t || !f) return std::nullopt;
    return Union(*t, *f);
  }
  const auto* b = e.as<ir::BinaryNode>();
  if (b == nullptr) return std::nullopt;
  std::optional<Interval> x = EvalInterval(b->a, ranges);
  std::optional<Interval> y = EvalInterval(b->b, ranges);
  if (!x || !y) return std::nullopt;
  switch (b->op) {
    case BinaryOp::kAdd:
      return Interval{x->min + y->min, x->max + y->max};
    case BinaryOp::kSub:
      return Interval{x->min - y->max, x->max - y->min};
    case BinaryOp::kMul: {
      const bool a_ranged = UsesAny(b->a, ranges);
      if (a_ranged && UsesAny(b->b, ranges)) return std::nullopt;
      const Interval& ranged = a_ranged ? *x : *y;
      const Expr& by = a_ranged ? b->b : b->a;
      std::optional<int64_t> c = ir::AsConstInt(ir::Simplify(by));
      if (!c) return std::nullopt;
      if (*c >= 0) return Interval{ranged.min * by, ranged.max * by};
      return Interval{ranged.max * by, ranged.min * by};
    }
    case BinaryOp::kDiv:
    case BinaryOp::kFloorDiv: {
      if (UsesAny(b->b, ranges)) return std::nullopt;
      std::optional<int64_t> d = PositiveConstant(b->b);
      if (!d) return std::nullopt;
      if (b->op == BinaryOp::kFloorDiv) {
        if (std::optional<Interval> exact = FloorDivInterval(*x, *d)) return exact;
      }
      return Interval{ir::BinaryNode::make(b->op, x->min, b->b),
                      ir::BinaryNode::make(b->op, x->max, b->b)};
    }
    case BinaryOp::kMod:
    case BinaryOp::kFloorMod: {
      if (UsesAny(b->b, ranges)) return std::nullopt;
      std::optional<int64_t> c = PositiveConstant(b->b);
      if (!c) return std::nullopt;
      return Interval{ir::IntConst(e.dtype(), 0), ir::IntConst(e.dtype(), *c - 1)};
    }
    case BinaryOp::kMin:
      return Interval{Lower(x->min, y->min), Lower(x->max, y->max)};
    case BinaryOp::kMax:
      return Interval{Upper(x->min, y->min), Upper(x->max, y->max)};
    default:
      return std::nullopt;
  }
}

std::optional<Digits> NormalizeDigits(Digits digits) {
  std::erase_if(digits, [](const Digit& d) { return d.extent == 1; });
  std::sort(digits.begin(), digits.end(),
            [](const Digit& a, const Digit& b) { return a.stride < b.stride; });
  Digits out;
  for (const Digit& d : digits) {
    if (d.stride <= 0 || d.extent <= 0) return std::nullopt;
    if (!out.empty()) {
      Digit& below = out.back();
      if (below.stride * below.extent > d.stride) return std::nullopt;
      if (below.stride * below.extent == d.stride) {
        below.extent *= d.extent;
        continue;
      }
    }
    out.push_back(d);
  }
  return out;
}

int64_t DigitCount(const Digits& digits) {
  int64_t n = 1;
  for (const Digit& d : digits) n *= d.extent;
  return n;
}

int64_t DigitSpan(const Digits& digits) {
  int64_t last = 0;
  for (const Digit& d : digits) last += d.stride * (d.extent - 1);
  return last + 1;
}

Expr Spread(const Expr& position, const Digits& digits) {
  Expr out = Constant(position, 0);
  int64_t below = 1;  // positions per step of this digit
  for (size_t i = 0; i < digits.size(); ++i) {
    Expr digit = position;
    if (below != 1) digit = digit / Constant(position, below);
    if (i + 1 < digits.size()) digit = digit % Constant(position, digits[i].extent);
    out = out + digit * Constant(position, digits[i].stride);
    below *= digits[i].extent;
  }
  return out;
}

Expr Compact(const Expr& offset, const Digits& digits) {
  Expr out = Constant(offset, 0);
  int64_t below = 1;
  for (size_t i = 0; i < digits.size(); ++i) {
    Expr digit = offset;
    if (i + 1 < digits.size()) digit = digit % Constant(offset, digits[i + 1].stride);
    if (digits[i].stride != 1) digit = digit / Constant(offset, digits[i].stride);
    out = out + digit * Constant(offset, below);
    below *= digits[i].extent;
  }
  return out;
}

}  // namespace kiln::te::internal
