// Expressions of kiln's loop-level IR: the base handle, and variables.
//
// Nodes are immutable and shared: an `Expr` is a reference-counted handle to
// a `const ExprNode`. Build nodes with each node type's static `make(...)`
// (in expr_nodes.h), or with the operators in expr_ops.h; inspect them with
// `expr.as<AddNode>()`-style downcasts, `expr.kind()`, or an ExprVisitor.
// `make` KILN_CHECKs only obvious construction bugs (null operands, lane
// counts); whether operand types agree is the verifier's job, so ill-typed
// trees can be built, printed, and then rejected with a readable message.
//
// Handle comparison: `a.same_as(b)` compares node identity. `==` and the
// other operators on Expr build comparison nodes (see expr_ops.h); to key a
// map by expression identity use `expr.get()`.
//
// Semantics of expressions (the interpreter and every backend implement these):
//  * Integer arithmetic wraps modulo 2^bits (two's complement); there is no
//    undefined behaviour on overflow. Casts between integer types truncate or
//    extend (sign-extend from signed sources).
//  * `/` and `%` on integers truncate toward zero (like C and WGSL): -7 / 2 ==
//    -3, -7 % 2 == -1. `floor_div` / `floor_mod` round toward negative
//    infinity: floor_div(-7, 2) == -4, floor_mod(-7, 2) == 1 (the result of
//    floor_mod has the sign of the divisor). Division by zero does not trap:
//    x / 0 == x and x % 0 == 0 (WGSL's rule), likewise for floor_div/floor_mod;
//    MIN / -1 == MIN and MIN % -1 == 0.
//  * Float arithmetic is IEEE 754 in the operand type, rounded to that type
//    after every operation (f16 included). Float `%` is truncated (fmod-like:
//    x - trunc(x / y) * y), floor_mod is x - floor(x / y) * y.
//  * Float to integer casts truncate toward zero and saturate at the target's
//    bounds; NaN converts to 0. Number to bool is `x != 0` (so NaN gives
//    true); bool to number gives 0 or 1.
//  * Operands are evaluated left to right; every operand of every node is
//    evaluated (`select(c, a, b)` evaluates a and b), except
//    `if_then_else(c, a, b)`, which evaluates only the side it returns, and
//    `&&` / `||`, which evaluate both sides too (they are not short-circuit:
//    expressions have no side effects apart from out-of-bounds loads, and
//    kernels must not rely on short-circuit to guard them; use if_then_else).
//  * A `let x = v in body` expression evaluates v once, then body with x bound.
//  * Vector operations act lane by lane; scalar operands of a vector operation
//    must be broadcast explicitly (no implicit conversions anywhere).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "kiln/ir/types.h"
#include "kiln/support/status.h"

namespace kiln::ir {

// One entry per expression node class (see expr_nodes.h).
enum class ExprKind : uint8_t {
  kIntImm,       // integer constant (also the unsigned types)
  kFloatImm,     // float constant
  kBoolImm,      // true / false
  kVar,          // a variable (scalar parameter, loop variable, let binding)
  kBinary,       // a op b: arithmetic, min/max, comparison, logical and/or
  kNot,          // !a
  kSelect,       // select(c, a, b): evaluates both a and b
  kCast,         // value conversion: f32(x)
  kReinterpret,  // bit cast: reinterpret<u32>(x)
  kLet,          // let x = v in body
  kRamp,         // ramp(base, stride, lanes): base + i*stride for lane i
  kBroadcast,    // broadcast(value, lanes)
  kLoad,         // buffer[index...]
  kCall,         // intrinsic call: exp(x), if_then_else(c, a, b), dot4i8(a, b), ...
};

// Base of every expression node. Fields are set once by make() and never change.
class ExprNode {
 public:
  virtual ~ExprNode() = default;

  ExprKind kind;
  DataType dtype;

 protected:
  explicit ExprNode(ExprKind k) : kind(k) {}
};

// A shared, immutable expression. Default-constructed handles are null
// ("undefined") and only valid where a field is documented as optional.
class Expr {
 public:
  Expr() = default;
  explicit Expr(std::shared_ptr<const ExprNode> node) : node_(std::move(node)) {}
  // An i32 constant; lets `For(..., 0, n, ...)` and `x + 1` read naturally.
  Expr(int value);  // NOLINT(google-explicit-constructor)

  bool defined() const { return node_ != nullptr; }
  const ExprNode* get() const { return node_.get(); }
  const ExprNode* operator->() const { return node_.get(); }
  const std::shared_ptr<const ExprNode>& node() const { return node_; }

  ExprKind kind() const { return node_->kind; }
  DataType dtype() const { return node_->dtype; }

  // Node identity, not structural equality.
  bool same_as(const Expr& other) const { return node_ == other.node_; }

  // The node as its concrete class T, or nullptr if it is another kind.
  template <typename T>
  const T* as() const {
    return node_ != nullptr && node_->kind == T::kKind ? static_cast<const T*>(node_.get())
                                                       : nullptr;
  }

 private:
  std::shared_ptr<const ExprNode> node_;
};

// A variable: an identity object. Two Vars with the same name are different
// variables; the printer renames one of them (x, x_1, ...) so the text form
// stays unambiguous.
class VarNode : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::kVar;
  VarNode() : ExprNode(kKind) {}

  std::string name;  // a hint for printing; identity is the node itself
};

class Var : public Expr {
 public:
  // Null var.
  Var() = default;
  // Creates a new, distinct variable.
  Var(std::string name, DataType dtype);
  // Wraps an existing VarNode handle (e.g. from `expr.as<VarNode>()` plus the
  // owning Expr). Precondition: `e` is a var.
  static Var FromExpr(const Expr& e);

  const VarNode* get() const { return static_cast<const VarNode*>(Expr::get()); }
  const VarNode* operator->() const { return get(); }
  const std::string& name() const { return get()->name; }

 private:
  explicit Var(std::shared_ptr<const ExprNode> node) : Expr(std::move(node)) {}
};

// Prints the expression in the text form (see printer.h).
std::ostream& operator<<(std::ostream& os, const Expr& e);

}  // namespace kiln::ir
