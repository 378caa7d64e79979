// Bounds inference for attached stages: the range of values an index
// expression takes while some of its variables run over known ranges.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kiln/ir/expr.h"

namespace kiln::te::internal {

// Inclusive bounds [min, max]; expressions over the variables left fixed.
struct Interval {
  ir::Expr min, max;
  static Interval Point(const ir::Expr& e) { return {e, e}; }
};
using IntervalMap = std::unordered_map<const ir::VarNode*, Interval>;

// The range of integer expression `e` when each variable of `ranges` takes
// any value of its interval (the others stay symbolic). Handles + - and *,
// / and % by positive constants, min, max, casts between integers, lets,
// select and if_then_else; nullopt for any other use of a ranged variable.
// Indices are taken as non-negative (% gives [0, c - 1]).
std::optional<Interval> EvalInterval(const ir::Expr& e, const IntervalMap& ranges);

// a - b when it is a constant: both are read as linear sums of terms
// (constants times other expressions), terms matched structurally.
std::optional<int64_t> ConstantDifference(const ir::Expr& a, const ir::Expr& b);

// A constant no smaller than a - b for every value the variables of
// `ranges` take, where a and b are min/max combinations of expressions
// whose pairwise differences are bounded: max(x, y) - b is bounded by the
// larger of x - b's and y - b's bounds, min(x, y) - b by the smaller, and
// likewise for b, so clamped halos such as max(min(4 i + 4, 999), 0) -
// min(max(4 i - 1, 0), 999) come out at 5 where no constant equals the
// difference. Where both are mins (or both maxes), operands are also
// paired: min(x1, y1) - min(x2, y2) is at most the
// larger of x1 - x2 and y1 - y2.
//
// Range ends may be symbolic, as a split loop's (n + 3) / 4 - 1 is: what
// is left of a - b after the mins and maxes, a linear sum, has each ranged
// variable replaced by the end that maximises it, and each quotient e / d
// (d > 0, floor division or e provably >= 0) whose coefficient is a
// multiple k d of d by k e (k > 0) or k (e - d + 1) (k < 0), until no
// such term is left (a coefficient d does not divide first scales the
// whole sum, which is divided back at the end). Variables of `nonnegative`
// (sizes the runtime checks are >= 0) then count as 0 under a negative
// coefficient. So min(4 i + 4, n - 1) - min(4 i + 1, n - 1), with i in
// [0, (n + 3) / 4 - 1], is bounded by 3, 4 i + 3 - n by 2 and 2 i + 2 - n
// by 1.
std::optional<int64_t> DifferenceUpperBound(
    const ir::Expr& a, const ir::Expr& b, const IntervalMap& ranges,
    const std::unordered_set<const ir::VarNode*>& nonnegative = {});

// `e` rewritten as a linear sum with equal terms collected (`a * 32 + b - a
// * 32` is `b`); integer scalars only.
ir::Expr CancelTerms(const ir::Expr& e);

// The smallest interval holding both.
Interval Union(const Interval& a, const Interval& b);

// One digit of a strided region: `extent` positions `stride` apart.
struct Digit {
  int64_t stride = 1, extent = 1;
  friend bool operator==(const Digit&, const Digit&) = default;
};
// The offsets {sum_i d_i * stride_i : 0 <= d_i < extent_i} of a strided
// region from its origin, digits in ascending stride, none overlapping the
// next (stride_i * extent_i <= stride_i+1). A thread's columns tx * 4 + j +
// 64 * c (j < 4, c < 2) are the digits {1 x 4, 64 x 2} from tx * 4: eight
// elements stored compactly, where their interval would take 68.
using Digits = std::vector<Digit>;

// Digits of extent 1 dropped, sorted by stride, a digit merged into the one
// below where they are contiguous (1 x 4 and 4 x 2 are 1 x 8); nullopt
// where two overlap.
std::optional<Digits> NormalizeDigits(Digits digits);
// How many offsets (the compact size), and the last one plus 1 (the span).
int64_t DigitCount(const Digits& digits);
int64_t DigitSpan(const Digits& digits);
// The offset at compact position `position`, and the compact position of
// `offset` (one of the region's offsets).
ir::Expr Spread(const ir::Expr& position, const Digits& digits);
ir::Expr Compact(const ir::Expr& offset, const Digits& digits);

}  // namespace kiln::te::internal
