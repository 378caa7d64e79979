// Where the parser found each function and statement of a module, so that
// errors found later (by Verify) point into the user's text rather than
// into the module as printed.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/ir/stmt.h"

namespace kiln::ir {

struct SourceLocation {
  int line = 0;    // 1-based
  int column = 0;  // 1-based, in bytes
};

struct SourceMap {
  // Every statement node the parser made, at its first token. A block is at
  // its first statement; a `let` at the keyword.
  std::unordered_map<const StmtNode*, SourceLocation> stmts;
  // The `fn` keyword of each function, in module order.
  std::vector<SourceLocation> functions;
  // The parsed text, line by line, for quoting.
  std::vector<std::string> lines;
};

}  // namespace kiln::ir
