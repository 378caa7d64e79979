// Integer expressions read as linear sums: constant + sum of coefficient *
// term, through +, - and products with constants. The terms are whatever
// else the expression holds (variables, divisions, loads), matched
// structurally, so equal terms merge and cancel. Used to cancel a region's
// origin from an index (te) and to split indices into rows and lanes
// (codegen).
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "kiln/ir/expr.h"
#include "kiln/ir/types.h"

namespace kiln::ir {

struct LinearSum {
  int64_t constant = 0;
  std::vector<std::pair<Expr, int64_t>> terms;  // in order of first appearance

  // Adds coefficient * term, merged with a structurally equal term.
  void Add(const Expr& term, int64_t coefficient);
  // The sum as an expression of `type`: the constant, then each term whose
  // coefficient is not 0 added or subtracted, simplified.
  Expr ToExpr(DataType type) const;
};

// Where given, the value to read in place of a variable (a let-bound value),
// or a null Expr to keep the variable as a term.
using ExpandVar = std::function<Expr(const VarNode*)>;

// Adds `e` * scale to `out`. False where a coefficient leaves the range of
// i32 (out then holds part of e); `expand` is followed at most 16 deep.
bool AddLinear(const Expr& e, int64_t scale, LinearSum& out, const ExpandVar& expand = {});

}  // namespace kiln::ir
