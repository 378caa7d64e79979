#include "kiln/ir/buffer.h"

namespace kiln::ir {

std::string_view MemoryScopeName(MemoryScope scope) {
  switch (scope) {
    case MemoryScope::kGlobal:
      return "global";
    case MemoryScope::kShared:
      return "shared";
    case MemoryScope::kLocal:
      return "local";
  }
  return "?";
}

Buffer::Buffer(std::string name, DataType dtype, std::vector<Expr> shape, std::vector<Expr> strides,
               MemoryScope scope) {
  KILN_CHECK_MSG(dtype.IsValid() && dtype.is_scalar() && !dtype.is_handle(),
                 "buffer element type must be a scalar value type: ", dtype);
  KILN_CHECK_MSG(!shape.empty(), "buffer ", name, " has no dimensions");
  KILN_CHECK_MSG(strides.empty() || strides.size() == shape.size(), "buffer ", name, " has ",
                 strides.size(), " strides for ", shape.size(), " dimensions");
  for (const Expr& e : shape) KILN_CHECK(e.defined());
  for (const Expr& e : strides) KILN_CHECK(e.defined());
  auto node = std::make_shared<BufferNode>();
  node->name = std::move(name);
  node->dtype = dtype;
  node->shape = std::move(shape);
  node->strides = std::move(strides);
  node->scope = scope;
  node_ = std::move(node);
}

Buffer Buffer::WithShape(std::vector<Expr> shape, std::vector<Expr> strides) const {
  return Buffer(name(), dtype(), std::move(shape), std::move(strides), scope());
}

}  // namespace kiln::ir
