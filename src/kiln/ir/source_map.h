// Where the parser found each function and statement of a module, so that
// errors found later (by Verify) point into the user's text rather than
// into the module as printed.
#pragma once

#include <optional>
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

// Where the loop that binds `loop_var` was parsed, if the map has it.
// Lowering passes keep loop variables, so a pass can point into the user's
// text through them.
inline std::optional<SourceLocation> LoopLocation(const SourceMap& map, const VarNode* loop_var) {
  for (const auto& [node, at] : map.stmts) {
    if (node->kind == StmtKind::kFor &&
        static_cast<const ForNode*>(node)->loop_var.get() == loop_var) {
      return at;
    }
  }
  return std::nullopt;
}

// "line L, column C: " for the loop binding `loop_var` (with `map`, and
// where the map has it), else "".
inline std::string LoopLocationPrefix(const SourceMap* map, const VarNode* loop_var) {
  if (map == nullptr) return "";
  const std::optional<SourceLocation> at = LoopLocation(*map, loop_var);
  if (!at) return "";
  return "line " + std::to_string(at->line) + ", column " + std::to_string(at->column) + ": ";
}

}  // namespace kiln::ir
