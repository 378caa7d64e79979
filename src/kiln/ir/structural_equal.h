// Structural comparison of expressions.
#pragma once

#include "kiln/ir/expr.h"

namespace kiln::ir {

// True if a and b have the same shape, node by node: same kinds, types,
// operators and constant values, and the very same vars and buffers (vars
// are identity objects, so `x + 1` built from two different vars named x
// is not equal). Float constants compare by value, with NaN equal to NaN.
bool StructurallyEqual(const Expr& a, const Expr& b);

}  // namespace kiln::ir
