// Bounds inference for attached stages: the range of values an index
// expression takes while some of its variables run over known ranges.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>

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

// `e` rewritten as a linear sum with equal terms collected (`a * 32 + b - a
// * 32` is `b`); integer scalars only.
ir::Expr CancelTerms(const ir::Expr& e);

// The smallest interval holding both.
Interval Union(const Interval& a, const Interval& b);

}  // namespace kiln::te::internal
