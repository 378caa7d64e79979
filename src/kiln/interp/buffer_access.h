// Address computation for loads and stores: turns a buffer's per-dimension
// indices into element offsets for every lane of every active thread, and
// refuses accesses outside the buffer. Internal to the interpreter.
#pragma once

#include <string_view>
#include <vector>

#include "kiln/interp/exec_state.h"
#include "kiln/interp/expr_code.h"
#include "kiln/ir/buffer.h"

namespace kiln::interp {

class BufferAccess {
 public:
  // `lanes` is the access width (the widest index's lanes); `what` names the
  // access in messages ("load", "store"); `printed` is the accessing node as text.
  static StatusOr<BufferAccess> Compile(const ir::Buffer& buffer,
                                        const std::vector<ir::Expr>& indices, int lanes,
                                        std::string_view what, CompileContext& context);

  // Fills offsets[t * lanes + l] with the element offset (from the binding's
  // data) of lane l of each active thread t. Fails, naming the buffer, the
  // index and the extent, if one is outside the buffer.
  Status Offsets(ExecState& state, const uint8_t* mask, int64_t* offsets);

  int buffer_slot() const { return buffer_slot_; }
  int lanes() const { return lanes_; }

 private:
  Status OutOfBounds(const ExecState& state, int thread, std::string_view detail) const;

  ir::Buffer buffer_;
  std::vector<ir::Expr> index_exprs_;
  std::vector<ExprCodePtr> indices_;
  int buffer_slot_ = -1;
  int lanes_ = 1;
  std::string_view what_;
};

}  // namespace kiln::interp
