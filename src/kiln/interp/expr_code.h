// Compiled expressions: the IR lowered to a tree of nodes that evaluate an
// expression for all threads of a workgroup at once. Internal to the
// interpreter.
//
// Each node owns the buffer its result goes to (sized once at compile time
// for the workgroup), so evaluation allocates nothing. Variables are resolved
// to slots of ExecState::vars at compile time.
#pragma once

#include <memory>
#include <vector>

#include "kiln/interp/exec_state.h"
#include "kiln/interp/lane.h"
#include "kiln/ir/expr.h"
#include "kiln/support/status.h"

namespace kiln::interp {

class ExprCode {
 public:
  ExprCode(const ir::Expr& expr, int num_threads);
  virtual ~ExprCode() = default;
  ExprCode(const ExprCode&) = delete;
  ExprCode& operator=(const ExprCode&) = delete;

  // Computes the value for every thread t with mask[t] != 0 and points
  // *result at num_threads * lanes() lanes, thread major. The lanes of
  // inactive threads are unspecified. The result stays valid until the node
  // is evaluated again.
  virtual Status Eval(ExecState& state, const uint8_t* mask, const Lane** result) = 0;

  const ir::Expr& expr() const { return expr_; }
  ir::DataType dtype() const { return dtype_; }
  ir::DataType elem() const { return dtype_.element_of(); }
  int lanes() const { return dtype_.lanes; }

 protected:
  ir::Expr expr_;
  ir::DataType dtype_;
  int num_threads_;
  std::vector<Lane> out_;  // num_threads * lanes
};

using ExprCodePtr = std::unique_ptr<ExprCode>;

StatusOr<ExprCodePtr> CompileExpr(const ir::Expr& expr, CompileContext& context);

// Intrinsic calls (call_code.cc).
StatusOr<ExprCodePtr> CompileCall(const ir::Expr& expr, CompileContext& context);

// "ill-typed expression `e`: <why>", for IR the verifier should have rejected.
Status IllTyped(const ir::Expr& expr, std::string_view why);

}  // namespace kiln::interp
