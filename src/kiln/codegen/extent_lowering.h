// IR extent expressions (shapes, strides, launch extents) to the metadata's
// ExtentExpr programs.
#pragma once

#include <string_view>
#include <vector>

#include "kiln/codegen/extent_expr.h"
#include "kiln/ir/expr.h"
#include "kiln/ir/function.h"
#include "kiln/support/status.h"

namespace kiln::codegen {

// `e`, an integer expression over the integer scalar parameters of
// `params`, as a program: constants, parameters, + - * / %, floor_div,
// floor_mod, min, max and integer casts, of 32- or 64-bit integers. Anything
// else (a float, a load, a select) is kUnimplemented naming `what`.
StatusOr<ExtentExpr> LowerExtent(const ir::Expr& e, const std::vector<ir::Param>& params,
                                 std::string_view what);

}  // namespace kiln::codegen
