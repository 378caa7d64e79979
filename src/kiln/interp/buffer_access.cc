#include "kiln/interp/buffer_access.h"

#include "kiln/ir/printer.h"

namespace kiln::interp {

StatusOr<BufferAccess> BufferAccess::Compile(const ir::Buffer& buffer,
                                             const std::vector<ir::Expr>& indices, int lanes,
                                             std::string_view what, CompileContext& context) {
  BufferAccess access;
  access.buffer_ = buffer;
  access.index_exprs_ = indices;
  access.lanes_ = lanes;
  access.what_ = what;
  access.buffer_slot_ = context.FindBuffer(buffer.get());
  if (access.buffer_slot_ < 0) {
    return InvalidArgument(what, " of buffer '", buffer.name(), "' outside its scope");
  }
  if (indices.size() != buffer.shape().size()) {
    return InvalidArgument(what, " of buffer '", buffer.name(), "' with ", indices.size(),
                           " indices; the buffer has ", buffer.shape().size(), " dimensions");
  }
  for (const ir::Expr& index : indices) {
    KILN_ASSIGN_OR_RETURN(ExprCodePtr code, CompileExpr(index, context));
    if (!code->dtype().is_integer() || (code->lanes() != 1 && code->lanes() != lanes)) {
      return IllTyped(index, StrCat("an index of a ", lanes, "-lane ", what,
                                    " must be an integer scalar or have ", lanes, " lanes"));
    }
    access.indices_.push_back(std::move(code));
  }
  return access;
}

Status BufferAccess::Offsets(ExecState& state, const uint8_t* mask, int64_t* offsets) {
  const int num_threads = state.num_threads;
  const BufferBinding& binding = state.buffers[buffer_slot_];
  for (int t = 0; t < num_threads; ++t) {
    if (mask[t] == 0) continue;
    for (int l = 0; l < lanes_; ++l) offsets[t * lanes_ + l] = 0;
  }
  for (size_t d = 0; d < indices_.size(); ++d) {
    const Lane* index;
    KILN_RETURN_IF_ERROR(indices_[d]->Eval(state, mask, &index));
    const int index_lanes = indices_[d]->lanes();
    const bool index_is_u64 = indices_[d]->dtype().is_uint() && indices_[d]->dtype().bits == 64;
    const int64_t extent = binding.shape[d];
    const int64_t stride = binding.strides[d];
    for (int t = 0; t < num_threads; ++t) {
      if (mask[t] == 0) continue;
      for (int l = 0; l < lanes_; ++l) {
        const int64_t i = index[t * index_lanes + (index_lanes == 1 ? 0 : l)].i;
        if (i < 0 || i >= extent) {  // a u64 index past INT64_MAX reads as negative
          return OutOfBounds(
              state, t,
              StrCat("index ",
                     index_is_u64 ? std::to_string(static_cast<uint64_t>(i)) : std::to_string(i),
                     lanes_ > 1 ? StrCat(" (lane ", l, ")") : std::string(), " of dimension ", d,
                     " is outside the extent ", extent));
        }
        offsets[t * lanes_ + l] += i * stride;
      }
    }
  }
  // Strides that are not those of the dense layout could still reach past the
  // storage; check the flattened offset too.
  for (int t = 0; t < num_threads; ++t) {
    if (mask[t] == 0) continue;
    for (int l = 0; l < lanes_; ++l) {
      int64_t& offset = offsets[t * lanes_ + l];
      if (offset < 0 || offset >= binding.num_elements) {
        return OutOfBounds(state, t,
                           StrCat("element offset ", offset, " is outside the buffer's ",
                                  binding.num_elements, " elements"));
      }
      if (binding.per_thread) offset += static_cast<int64_t>(t) * binding.num_elements;
    }
  }
  return Status::Ok();
}

Status BufferAccess::OutOfBounds(const ExecState& state, int thread,
                                 std::string_view detail) const {
  std::string indices;
  for (size_t d = 0; d < index_exprs_.size(); ++d) {
    if (d > 0) indices += ", ";
    indices += ir::Print(index_exprs_[d]);
  }
  return InvalidArgument("out-of-bounds ", what_, " of buffer '", buffer_.name(), "' at `",
                         buffer_.name(), "[", indices, "]`: ", detail, " (", state.Where(thread),
                         ")");
}

}  // namespace kiln::interp
