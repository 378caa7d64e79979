// Parser of the text form (grammar in docs/ir.md).
//
// Errors are kCompileError statuses whose message reads
//   "line L, column C: expected X, found Y"
// (or "line L, column C: <what is wrong>" for errors that are not about the
// next token, such as an undefined name). Lines and columns are 1-based;
// columns count bytes. The parser checks syntax and names (every name
// declared before use, no redeclaration in scope); types are checked by
// Verify, so a parsed module may still be ill-typed.
#pragma once

#include <string_view>
#include <vector>

#include "kiln/ir/buffer.h"
#include "kiln/ir/expr.h"
#include "kiln/ir/function.h"
#include "kiln/ir/source_map.h"
#include "kiln/ir/stmt.h"
#include "kiln/support/status.h"

namespace kiln::ir {

// `module { fn ... fn ... }`
StatusOr<Module> ParseModule(std::string_view text);
// The same, recording where each function and statement was found in
// `text` (for Verify's messages).
StatusOr<Module> ParseModule(std::string_view text, SourceMap* source_map);
// One `fn name(...) { ... }`.
StatusOr<Function> ParseFunction(std::string_view text);
// A statement list (the inside of a block); names may refer to `vars` and `buffers`.
StatusOr<Stmt> ParseStmt(std::string_view text, const std::vector<Var>& vars = {},
                         const std::vector<Buffer>& buffers = {});
// One expression; names may refer to `vars` and `buffers`.
StatusOr<Expr> ParseExpr(std::string_view text, const std::vector<Var>& vars = {},
                         const std::vector<Buffer>& buffers = {});

// Whether `name` is an identifier of the text form ([A-Za-z_][A-Za-z0-9_]*)
// that is not a reserved word (`fn`, `f32`, `exp`, ...): what a function is
// named (Verify requires it).
bool IsIdentifier(std::string_view name);

}  // namespace kiln::ir
