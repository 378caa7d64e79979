// Buffers: the memory kernels load from and store to.
//
// A Buffer is an identity object (like Var): a name, an element type, a
// shape, optional strides and a memory scope. Function parameters are global
// buffers; `alloc` statements introduce shared (workgroup) or local
// (per-thread) buffers, or global scratch buffers.
//
// Indexing: a load or store gives one index per dimension (`A[i, j]` for a
// 2-D buffer). Without strides the layout is dense row-major (the last index
// varies fastest); with strides, element (i0, ..., ik) lives at offset
// sum(i_d * strides[d]) elements from the start. Shapes and strides are
// integer expressions that may refer to the function's scalar parameters.
// Out-of-bounds accesses are a kernel bug with no defined result.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ir/expr.h"

namespace kiln::ir {

enum class MemoryScope : uint8_t {
  kGlobal,  // device memory, visible to every workgroup (storage buffers)
  kShared,  // workgroup memory, shared by the threads of one workgroup
  kLocal,   // private to one thread
};

// "global", "shared", "local".
std::string_view MemoryScopeName(MemoryScope scope);

class BufferNode {
 public:
  std::string name;           // a hint for printing; identity is the node itself
  DataType dtype;             // element type; scalar (lanes == 1), never handle
  std::vector<Expr> shape;    // one integer extent per dimension; at least one
  std::vector<Expr> strides;  // empty (dense row-major) or one per dimension
  MemoryScope scope = MemoryScope::kGlobal;
};

class Buffer {
 public:
  Buffer() = default;
  // Creates a new, distinct buffer. KILN_CHECKs that dtype is a scalar
  // non-handle type, the shape is non-empty, and strides are empty or match
  // the shape's rank.
  Buffer(std::string name, DataType dtype, std::vector<Expr> shape, std::vector<Expr> strides = {},
         MemoryScope scope = MemoryScope::kGlobal);

  bool defined() const { return node_ != nullptr; }
  const BufferNode* get() const { return node_.get(); }
  const BufferNode* operator->() const { return node_.get(); }
  bool same_as(const Buffer& other) const { return node_ == other.node_; }

  const std::string& name() const { return node_->name; }
  DataType dtype() const { return node_->dtype; }
  const std::vector<Expr>& shape() const { return node_->shape; }
  const std::vector<Expr>& strides() const { return node_->strides; }
  MemoryScope scope() const { return node_->scope; }
  int rank() const { return static_cast<int>(node_->shape.size()); }

  // A new buffer like this one with a different shape/strides (e.g. after a
  // pass rewrote the expressions in them). It is a distinct buffer.
  Buffer WithShape(std::vector<Expr> shape, std::vector<Expr> strides) const;

 private:
  std::shared_ptr<const BufferNode> node_;
};

}  // namespace kiln::ir
