// IRBuilder: writes kernels in C++ the way they read in the text form.
//
//   IRBuilder b("vadd");
//   Var n = b.ScalarParam("n", kI32);
//   Buffer A = b.BufferParam("A", kF32, {n});
//   Buffer C = b.BufferParam("C", kF32, {n});
//   b.For("bx", LoopKind::kBlockX, 0, (n + 63) / 64, [&](Var bx) {
//     b.For("tx", LoopKind::kThreadX, 0, 64, [&](Var tx) {
//       Var i = b.Let("i", bx * 64 + tx);
//       b.If(i < n, [&] { b.Store(C, {i}, Load(A, {i}) * 2.0); });
//     });
//   });
//   Function f = b.Build();
//
// Statements are appended to the innermost open block. `Let` binds a var for
// the rest of the current block (exactly like `let` in the text form). The
// builder does not verify: run Verify on the result. Misuse of the builder
// itself (Build with an open block, a body callback that escapes) is a
// KILN_CHECK failure.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kiln/ir/buffer.h"
#include "kiln/ir/expr.h"
#include "kiln/ir/expr_ops.h"
#include "kiln/ir/function.h"
#include "kiln/ir/stmt.h"

namespace kiln::ir {

class IRBuilder {
 public:
  explicit IRBuilder(std::string function_name);
  ~IRBuilder();
  IRBuilder(const IRBuilder&) = delete;
  IRBuilder& operator=(const IRBuilder&) = delete;

  // Parameters, in ABI order.
  Var ScalarParam(const std::string& name, DataType dtype);
  Buffer BufferParam(const std::string& name, DataType dtype, std::vector<Expr> shape,
                     std::vector<Expr> strides = {});
  void SetAttr(const std::string& key, AttrValue value);

  // Control flow; each callback emits the body.
  void For(const std::string& name, LoopKind kind, Expr min, Expr extent,
           const std::function<void(Var)>& body, Expr step = Expr());
  void If(Expr cond, const std::function<void()>& then_body,
          const std::function<void()>& else_body = nullptr);
  void While(Expr cond, const std::function<void()>& body);
  void Allocate(const std::string& name, DataType dtype, std::vector<Expr> shape, MemoryScope scope,
                const std::function<void(Buffer)>& body);

  // Binds a new var (of value's type) for the rest of the current block.
  Var Let(const std::string& name, Expr value);
  void Store(const Buffer& buffer, std::vector<Expr> indices, Expr value);
  void Barrier(BarrierKind kind = BarrierKind::kWorkgroup);
  void Assert(Expr cond, std::string message);
  void Evaluate(Expr value);
  // Appends an already built statement.
  void Emit(Stmt stmt);

  // The function built so far. KILN_CHECKs that no block is open. The
  // builder can keep being used afterwards (Build again for a larger body).
  Function Build() const;

 private:
  struct Block;
  void Open();
  Stmt Close();
  // The statement a finished block stands for (its lets wrapped around the rest).
  static Stmt Finish(Block block);

  std::string name_;
  std::vector<Param> params_;
  AttrMap attrs_;
  std::vector<Block> blocks_;
};

}  // namespace kiln::ir
