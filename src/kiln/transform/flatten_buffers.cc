#include "kiln/transform/flatten_buffers.h"

#include <unordered_map>

#include "kiln/ir/expr_ops.h"
#include "kiln/ir/mutator.h"
#include "kiln/transform/fallible_mutator.h"
#include "kiln/transform/lane_arith.h"

namespace kiln::transform {
namespace {

using ir::Buffer;
using ir::DataType;
using ir::Expr;
using ir::Stmt;

bool NeedsFlattening(const Buffer& buffer) {
  return buffer.rank() != 1 || !buffer.strides().empty();
}

// `e` converted to the scalar integer type `type`, keeping its lanes.
Expr CastIndex(const Expr& e, DataType type) {
  if (e.dtype().element_of() == type) return e;
  if (auto value = ir::AsConstInt(e); value && e.dtype().lanes == 1) {
    return ir::IntConst(type, *value);
  }
  return ir::Cast(type.with_lanes(e.dtype().lanes), e);
}

class Flattener : public FallibleMutator {
 public:
  Buffer Flat(const Buffer& buffer) {
    if (!NeedsFlattening(buffer)) return buffer;
    auto it = flat_.find(buffer.get());
    if (it != flat_.end()) return it->second;
    // The element count is computed in the type of the first extent.
    DataType type = buffer.shape()[0].dtype();
    Expr size;
    if (buffer.strides().empty()) {
      size = buffer.shape()[0];
      for (int d = 1; d < buffer.rank(); ++d) {
        size = FoldedMul(size, CastIndex(buffer.shape()[d], type));
      }
    } else {
      size = ir::MakeOne(type);
      for (int d = 0; d < buffer.rank(); ++d) {
        Expr last = FoldedSub(CastIndex(buffer.shape()[d], type), ir::MakeOne(type));
        size = FoldedAdd(size, FoldedMul(last, CastIndex(buffer.strides()[d], type)));
      }
    }
    Buffer flat(buffer.name(), buffer.dtype(), {size}, {}, buffer.scope());
    flat_.emplace(buffer.get(), flat);
    return flat;
  }

  Buffer MutateBuffer(const Buffer& buffer) override { return Flat(buffer); }

  Expr MutateLoad(const ir::LoadNode* op, const Expr& e) override {
    if (!NeedsFlattening(op->buffer)) return ir::StmtMutator::MutateLoad(op, e);
    return ir::Load(Flat(op->buffer), {FlatIndex(op->buffer, op->indices)});
  }

  Stmt MutateStore(const ir::StoreNode* op, const Stmt& s) override {
    if (!NeedsFlattening(op->buffer)) return ir::StmtMutator::MutateStore(op, s);
    Expr index = FlatIndex(op->buffer, op->indices);
    return ir::StoreNode::make(Flat(op->buffer), {index}, MutateExpr(op->value));
  }

  Stmt MutateAllocate(const ir::AllocateNode* op, const Stmt& s) override {
    if (!NeedsFlattening(op->buffer)) return ir::StmtMutator::MutateAllocate(op, s);
    return ir::AllocateNode::make(Flat(op->buffer), MutateStmt(op->body));
  }

 private:
  Expr FlatIndex(const Buffer& buffer, const std::vector<Expr>& raw_indices) {
    std::vector<Expr> indices;
    for (const Expr& index : raw_indices) indices.push_back(MutateExpr(index));
    if (static_cast<int>(indices.size()) != buffer.rank()) {
      Fail("buffer '", buffer.name(), "' has rank ", buffer.rank(), " but is indexed with ",
           indices.size(), " indices");
      return indices.empty() ? ir::MakeZero(ir::kI32) : indices[0];
    }
    DataType type = indices[0].dtype().element_of();
    Expr flat;
    if (buffer.strides().empty()) {
      flat = indices[0];
      for (size_t d = 1; d < indices.size(); ++d) {
        flat =
            LaneAdd(LaneMul(flat, CastIndex(buffer.shape()[d], type)), CastIndex(indices[d], type));
      }
    } else {
      for (size_t d = 0; d < indices.size(); ++d) {
        Expr term = LaneMul(CastIndex(indices[d], type), CastIndex(buffer.strides()[d], type));
        flat = flat.defined() ? LaneAdd(flat, term) : term;
      }
    }
    return flat;
  }

  std::unordered_map<const ir::BufferNode*, Buffer> flat_;
};

}  // namespace

StatusOr<ir::Function> FlattenBuffers(const ir::Function& function,
                                      const FlattenBuffersOptions& options) {
  Flattener flattener;
  return RewriteFunction(function, flattener, "FlattenBuffers");
}

}  // namespace kiln::transform
