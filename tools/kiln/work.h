// The work a kernel declares: its IR function's "flops" attribute, an
// integer or an expression over its scalar parameters ("2 * M * N * K"),
// which `kiln compile` checks and `kiln bench kernel` evaluates.
//
// Expression grammar, evaluated in double precision (so 2 * M * N * K
// cannot wrap):
//   expr   := term { ("+" | "-") term }
//   term   := factor { ("*" | "/") factor }
//   factor := number | name | ("min" | "max") "(" expr "," expr ")"
//           | "(" expr ")" | "-" factor
// Numbers are decimal (digits, an optional fraction and exponent), of any
// size; names are the function's scalar parameters.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ir/function.h"
#include "kiln/runtime/module.h"
#include "kiln/support/status.h"

namespace kiln::tool {

// `text` evaluated with `scalars` (name -> value); errors say where in the
// text and what was expected, or which name is unknown.
StatusOr<double> EvaluateWork(std::string_view text, const std::map<std::string, double>& scalars);

// That `f`'s "flops" attribute, if any, is a non-negative integer or an
// expression over its scalar parameters; errors name the function.
Status CheckDeclaredWork(const ir::Function& f);

// The work `f` declares for a call with `args` (its arguments in parameter
// order); nullopt where it declares none. Errors: a malformed attribute, a
// negative or infinite result.
StatusOr<std::optional<double>> DeclaredWork(const ir::Function& f,
                                             const std::vector<runtime::Arg>& args);

}  // namespace kiln::tool
