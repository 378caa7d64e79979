// Statements of kiln's loop-level IR.
//
// Like expressions, statements are immutable nodes behind a shared handle
// (`Stmt`), with a kind enum, `as<T>()` downcasts and static `make(...)`.
//
// Semantics:
//  * Statements run in order; `let x = v` binds x for its body only (in the
//    text form the body is the rest of the enclosing block).
//  * `for v in kind(min, extent[, step])` runs the body for v = min, min +
//    step, ... while v < min + extent (step > 0; default 1). min and extent
//    are evaluated once, before the first iteration. Serial, unrolled and
//    vectorized loops run in order (unrolled/vectorized are hints with the
//    same meaning). A thread-bound loop (threadIdx.x/y/z, blockIdx.x/y/z) has
//    min 0 and step 1; it binds v to that launch index, and its extent is the
//    launch extent along that axis: all iterations run concurrently, one per
//    thread or workgroup.
//  * `alloc` creates a buffer whose contents are undefined on entry and which
//    lives for its body only.
//  * `workgroup_barrier()` synchronizes the threads of a workgroup and makes
//    their shared memory writes visible to each other; every thread of the
//    workgroup must reach it (uniform control flow). `storage_barrier()`
//    does the same for global memory written by the workgroup.
//  * `assert(c, "msg")` states that c holds; a kernel where it fails is in
//    error (the interpreter reports it; codegen may drop the check).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kiln/ir/buffer.h"
#include "kiln/ir/expr.h"
#include "kiln/ir/expr_nodes.h"

namespace kiln::ir {

enum class StmtKind : uint8_t {
  kLetStmt,
  kStore,
  kAllocate,
  kFor,
  kWhile,
  kIf,
  kSeq,
  kBarrier,
  kAssert,
  kEvaluate,
};

class StmtNode {
 public:
  virtual ~StmtNode() = default;

  StmtKind kind;

 protected:
  explicit StmtNode(StmtKind k) : kind(k) {}
};

class Stmt {
 public:
  Stmt() = default;
  explicit Stmt(std::shared_ptr<const StmtNode> node) : node_(std::move(node)) {}

  bool defined() const { return node_ != nullptr; }
  const StmtNode* get() const { return node_.get(); }
  const StmtNode* operator->() const { return node_.get(); }
  const std::shared_ptr<const StmtNode>& node() const { return node_; }
  StmtKind kind() const { return node_->kind; }
  bool same_as(const Stmt& other) const { return node_ == other.node_; }

  template <typename T>
  const T* as() const {
    return node_ != nullptr && node_->kind == T::kKind ? static_cast<const T*>(node_.get())
                                                       : nullptr;
  }

 private:
  std::shared_ptr<const StmtNode> node_;
};

// let var = value; body
class LetStmtNode : public StmtNode {
 public:
  static constexpr StmtKind kKind = StmtKind::kLetStmt;
  LetStmtNode() : StmtNode(kKind) {}

  Var var;
  Expr value;
  Stmt body;

  static Stmt make(Var var, Expr value, Stmt body);
};

// buffer[indices...] = value. Indices follow LoadNode's rules; value has the
// buffer's element type with the lanes of the widest index.
class StoreNode : public StmtNode {
 public:
  static constexpr StmtKind kKind = StmtKind::kStore;
  StoreNode() : StmtNode(kKind) {}

  Buffer buffer;
  std::vector<Expr> indices;
  Expr value;

  static Stmt make(Buffer buffer, std::vector<Expr> indices, Expr value);
};

// alloc buffer { body }: the buffer's scope says where it lives.
class AllocateNode : public StmtNode {
 public:
  static constexpr StmtKind kKind = StmtKind::kAllocate;
  AllocateNode() : StmtNode(kKind) {}

  Buffer buffer;
  Stmt body;

  static Stmt make(Buffer buffer, Stmt body);
};

enum class LoopKind : uint8_t {
  kSerial,
  kUnrolled,
  kVectorized,
  kThreadX,  // threadIdx.x
  kThreadY,  // threadIdx.y
  kThreadZ,  // threadIdx.z
  kBlockX,   // blockIdx.x
  kBlockY,   // blockIdx.y
  kBlockZ,   // blockIdx.z: representable, but rejected by the verifier (the
             // kernel ABI reserves it for spreading large blockIdx.x grids)
};

// Text-form spelling: "serial", "unroll", "vectorize", "threadIdx.x", "blockIdx.y", ...
std::string_view LoopKindName(LoopKind kind);
std::optional<LoopKind> LoopKindFromName(std::string_view name);
bool IsThreadBinding(LoopKind kind);  // threadIdx.* or blockIdx.*
bool IsThreadIdx(LoopKind kind);      // threadIdx.*
bool IsBlockIdx(LoopKind kind);       // blockIdx.*
// Launch axis 0..2 (x, y, z) of a thread-binding kind.
int LaunchAxis(LoopKind kind);

class ForNode : public StmtNode {
 public:
  static constexpr StmtKind kKind = StmtKind::kFor;
  ForNode() : StmtNode(kKind) {}

  Var loop_var;
  Expr min;
  Expr extent;
  Expr step;  // always defined; constant 1 unless given
  LoopKind kind = LoopKind::kSerial;
  Stmt body;

  // `step` may be null, meaning 1 of the loop variable's type.
  static Stmt make(Var loop_var, Expr min, Expr extent, LoopKind kind, Stmt body,
                   Expr step = Expr());
};

// while (cond) { body }: cond is a scalar bool, re-evaluated before each iteration.
class WhileNode : public StmtNode {
 public:
  static constexpr StmtKind kKind = StmtKind::kWhile;
  WhileNode() : StmtNode(kKind) {}

  Expr cond;
  Stmt body;

  static Stmt make(Expr cond, Stmt body);
};

// if (cond) { then_case } else { else_case }; else_case may be null.
class IfNode : public StmtNode {
 public:
  static constexpr StmtKind kKind = StmtKind::kIf;
  IfNode() : StmtNode(kKind) {}

  Expr cond;
  Stmt then_case;
  Stmt else_case;  // optional

  static Stmt make(Expr cond, Stmt then_case, Stmt else_case = Stmt());
};

// A sequence of statements; the empty sequence is the no-op.
class SeqNode : public StmtNode {
 public:
  static constexpr StmtKind kKind = StmtKind::kSeq;
  SeqNode() : StmtNode(kKind) {}

  std::vector<Stmt> stmts;

  // Does not flatten or unwrap: make({s}) is a one-element sequence. Use
  // MakeSeq() for the canonical form.
  static Stmt make(std::vector<Stmt> stmts);
};

// Flattens nested sequences and drops no-ops; returns the single statement
// itself when only one remains, and NoOp() when none do.
Stmt MakeSeq(std::vector<Stmt> stmts);
// The empty sequence.
Stmt NoOp();
bool IsNoOp(const Stmt& s);

enum class BarrierKind : uint8_t {
  kWorkgroup,  // workgroup_barrier(): shared memory
  kStorage,    // storage_barrier(): global memory
};

class BarrierNode : public StmtNode {
 public:
  static constexpr StmtKind kKind = StmtKind::kBarrier;
  BarrierNode() : StmtNode(kKind) {}

  BarrierKind barrier = BarrierKind::kWorkgroup;

  static Stmt make(BarrierKind barrier = BarrierKind::kWorkgroup);
};

class AssertNode : public StmtNode {
 public:
  static constexpr StmtKind kKind = StmtKind::kAssert;
  AssertNode() : StmtNode(kKind) {}

  Expr cond;
  std::string message;

  static Stmt make(Expr cond, std::string message);
};

// Evaluates an expression for its effect (none today; kept so passes can
// turn a statement into something inert without losing it).
class EvaluateNode : public StmtNode {
 public:
  static constexpr StmtKind kKind = StmtKind::kEvaluate;
  EvaluateNode() : StmtNode(kKind) {}

  Expr value;

  static Stmt make(Expr value);
};

// Prints the statement in the text form (see printer.h).
std::ostream& operator<<(std::ostream& os, const Stmt& s);

}  // namespace kiln::ir
