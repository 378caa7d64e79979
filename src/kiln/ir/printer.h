// The text form of kiln IR (grammar in docs/ir.md).
//
// Printing is deterministic. Names are made unique per printed unit
// (function, or lone statement/expression): the first variable or buffer to
// use a name keeps it, later distinct ones with the same name get `_1`, `_2`,
// ...; characters that cannot appear in an identifier become `_`, and
// keywords get a trailing `_`. For any module that passes Verify,
// Print(ParseModule(Print(m))) == Print(m).
#pragma once

#include <string>
#include <unordered_map>

#include "kiln/ir/expr.h"
#include "kiln/ir/function.h"
#include "kiln/ir/stmt.h"

namespace kiln::ir {

std::string Print(const Module& module);
std::string Print(const Function& function);
std::string Print(const Stmt& stmt);
std::string Print(const Expr& expr);
std::string Print(DataType dtype);

// 1-based line of each printed statement in the text (for error messages).
using LineMap = std::unordered_map<const StmtNode*, int>;
std::string Print(const Module& module, LineMap* lines);
std::string Print(const Function& function, LineMap* lines);

}  // namespace kiln::ir
