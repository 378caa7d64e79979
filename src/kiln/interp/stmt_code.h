// Compiled statements: the IR lowered to nodes that execute a statement for
// all threads of a workgroup in lockstep, under an active mask. Internal to
// the interpreter.
#pragma once

#include <memory>

#include "kiln/interp/exec_state.h"
#include "kiln/ir/stmt.h"
#include "kiln/support/status.h"

namespace kiln::interp {

class StmtCode {
 public:
  StmtCode() = default;
  virtual ~StmtCode() = default;
  StmtCode(const StmtCode&) = delete;
  StmtCode& operator=(const StmtCode&) = delete;

  // Executes the statement for the threads t with mask[t] != 0.
  virtual Status Exec(ExecState& state, const uint8_t* mask) = 0;
};

using StmtCodePtr = std::unique_ptr<StmtCode>;

StatusOr<StmtCodePtr> CompileStmt(const ir::Stmt& stmt, CompileContext& context);

}  // namespace kiln::interp
