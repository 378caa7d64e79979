#include "kiln/transform/narrow_indices.h"

#include <cstdint>
#include <limits>
#include <unordered_map>

#include "kiln/ir/expr_ops.h"
#include "kiln/ir/mutator.h"
#include "kiln/ir/printer.h"
#include "kiln/transform/fallible_mutator.h"

namespace kiln::transform {
namespace {

using ir::Buffer;
using ir::DataType;
using ir::Expr;
using ir::Stmt;
using ir::Var;

bool Is64BitInteger(DataType t) {
  return t.is_integer() && t.bits == 64;
}

DataType Narrow(DataType t) {
  return Is64BitInteger(t) ? DataType{t.code, 32, t.lanes} : t;
}

bool FitsIn(DataType narrow, int64_t value) {
  if (narrow.is_int()) {
    return value >= std::numeric_limits<int32_t>::min() &&
           value <= std::numeric_limits<int32_t>::max();
  }
  return static_cast<uint64_t>(value) <= std::numeric_limits<uint32_t>::max();
}

class Narrower : public FallibleMutator {
 public:
  Buffer NarrowBuffer(const Buffer& buffer) {
    auto it = buffers_.find(buffer.get());
    if (it != buffers_.end()) return it->second;
    Buffer result = buffer;
    if (Is64BitInteger(buffer.dtype())) {
      Fail("buffer '", buffer.name(), "' has 64-bit elements (", buffer.dtype(),
           "), which WGSL cannot hold and narrowing would change");
    } else {
      bool changed = false;
      std::vector<Expr> shape, strides;
      for (const Expr& e : buffer.shape()) shape.push_back(NarrowExtent(e, buffer, changed));
      for (const Expr& e : buffer.strides()) strides.push_back(NarrowExtent(e, buffer, changed));
      if (changed) result = buffer.WithShape(std::move(shape), std::move(strides));
    }
    buffers_.emplace(buffer.get(), result);
    return result;
  }

  Buffer MutateBuffer(const Buffer& buffer) override { return NarrowBuffer(buffer); }

  Expr MutateIntImm(const ir::IntImmNode* op, const Expr& e) override {
    if (!Is64BitInteger(op->dtype)) return e;
    DataType narrow = Narrow(op->dtype);
    if (!FitsIn(narrow, op->value)) {
      Fail("constant `", ir::Print(e), "` does not fit in ", narrow);
      return e;
    }
    return ir::IntConst(narrow, op->value);
  }

  Expr MutateVar(const ir::VarNode* op, const Expr& e) override {
    auto it = vars_.find(op);
    return it == vars_.end() ? e : it->second;
  }

  Expr MutateCast(const ir::CastNode* op, const Expr& e) override {
    Expr value = MutateExpr(op->value);
    DataType target = Narrow(op->dtype);
    if (value.dtype() == target) return value;
    return ir::Cast(target, value);
  }

  Expr MutateReinterpret(const ir::ReinterpretNode* op, const Expr& e) override {
    if (Is64BitInteger(op->dtype) || Is64BitInteger(op->value.dtype())) {
      Fail("`", ir::Print(e), "` reinterprets 64-bit integer bits, which cannot be narrowed");
      return e;
    }
    return ir::StmtMutator::MutateReinterpret(op, e);
  }

  Expr MutateLet(const ir::LetNode* op, const Expr& e) override {
    Expr value = MutateExpr(op->value);
    Var var = Rebind(op->var, value.dtype());
    return ir::LetNode::make(var, value, MutateExpr(op->body));
  }

  Expr MutateLoad(const ir::LoadNode* op, const Expr& e) override {
    std::vector<Expr> indices;
    for (const Expr& index : op->indices) indices.push_back(MutateExpr(index));
    return ir::LoadNode::make(NarrowBuffer(op->buffer), std::move(indices));
  }

  Stmt MutateLetStmt(const ir::LetStmtNode* op, const Stmt& s) override {
    Expr value = MutateExpr(op->value);
    Var var = Rebind(op->var, value.dtype());
    return ir::LetStmtNode::make(var, value, MutateStmt(op->body));
  }

  Stmt MutateStore(const ir::StoreNode* op, const Stmt& s) override {
    std::vector<Expr> indices;
    for (const Expr& index : op->indices) indices.push_back(MutateExpr(index));
    return ir::StoreNode::make(NarrowBuffer(op->buffer), std::move(indices), MutateExpr(op->value));
  }

  Stmt MutateAllocate(const ir::AllocateNode* op, const Stmt& s) override {
    Buffer buffer = NarrowBuffer(op->buffer);
    return ir::AllocateNode::make(buffer, MutateStmt(op->body));
  }

  Stmt MutateFor(const ir::ForNode* op, const Stmt& s) override {
    Expr min = MutateExpr(op->min);
    Expr extent = MutateExpr(op->extent);
    Expr step = MutateExpr(op->step);
    if (Is64BitInteger(op->loop_var.dtype())) {
      auto lo = ir::AsConstInt(op->min);
      auto n = ir::AsConstInt(op->extent);
      if (lo && n && !FitsIn(Narrow(op->loop_var.dtype()), *lo + *n)) {
        Fail("loop `", op->loop_var.name(), "` over [", *lo, ", ", *lo + *n, ") does not fit in ",
             Narrow(op->loop_var.dtype()));
      }
    }
    Var var = Rebind(op->loop_var, min.dtype());
    return ir::ForNode::make(var, min, extent, op->kind, MutateStmt(op->body), step);
  }

 private:
  template <typename... Args>
  void Fail(const Args&... args) {
    FallibleMutator::Fail("cannot narrow to 32 bits: ", args...);
  }

  // A buffer extent or stride, narrowed; constants are checked to fit.
  Expr NarrowExtent(const Expr& e, const Buffer& buffer, bool& changed) {
    Expr narrow = MutateExpr(e);
    if (!narrow.same_as(e)) changed = true;
    return narrow;
  }

  // The var bound in place of `var` (a new one when its type narrows).
  Var Rebind(const Var& var, DataType narrowed) {
    if (var.dtype() == narrowed) return var;
    Var fresh(var.name(), narrowed);
    vars_[var.get()] = fresh;
    return fresh;
  }

  std::unordered_map<const ir::VarNode*, Expr> vars_;
  std::unordered_map<const ir::BufferNode*, Buffer> buffers_;
};

}  // namespace

StatusOr<ir::Function> NarrowIndices(const ir::Function& function,
                                     const NarrowIndicesOptions& options) {
  Narrower narrower;
  return RewriteFunction(function, narrower, "NarrowIndices");
}

}  // namespace kiln::transform
