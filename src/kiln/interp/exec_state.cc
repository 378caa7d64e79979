#include "kiln/interp/exec_state.h"

#include "kiln/support/status.h"

namespace kiln::interp {

int64_t SetLayout(BufferBinding& binding, std::vector<int64_t> shape,
                  std::vector<int64_t> strides) {
  bool overflow = false;
  if (strides.empty()) {
    strides.assign(shape.size(), 1);
    for (size_t d = shape.size(); d-- > 1;) {
      overflow |= __builtin_mul_overflow(strides[d], shape[d], &strides[d - 1]);
    }
  }
  int64_t span = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) span = 0;
  }
  if (span != 0) {
    for (size_t d = 0; d < shape.size(); ++d) {
      int64_t step = 0;
      overflow |= __builtin_mul_overflow(shape[d] - 1, strides[d], &step) ||
                  __builtin_add_overflow(span, step, &span);
    }
  }
  binding.shape = std::move(shape);
  binding.strides = std::move(strides);
  return overflow ? kLayoutOverflow : span;
}

std::string ExecState::Where(int thread) const {
  return StrCat("block (", block_index[0], ", ", block_index[1], "), thread (",
                thread_index[0][thread], ", ", thread_index[1][thread], ", ",
                thread_index[2][thread], ")");
}

int CompileContext::BindVar(const ir::VarNode* var, int lanes) {
  ++var_depth_[var];
  auto it = var_slots_.find(var);
  if (it != var_slots_.end()) {
    // The same variable bound again (in a disjoint scope): reuse its slot.
    if (var_lanes_[it->second] < lanes) var_lanes_[it->second] = lanes;
    return it->second;
  }
  const int slot = static_cast<int>(var_lanes_.size());
  var_lanes_.push_back(lanes);
  var_slots_.emplace(var, slot);
  return slot;
}

void CompileContext::UnbindVar(const ir::VarNode* var) {
  auto it = var_depth_.find(var);
  if (it != var_depth_.end() && --it->second == 0) var_depth_.erase(it);
}

int CompileContext::FindVar(const ir::VarNode* var) const {
  if (var_depth_.count(var) == 0) return -1;
  return var_slots_.at(var);
}

int CompileContext::BindBuffer(const ir::BufferNode* buffer) {
  ++buffer_depth_[buffer];
  auto it = buffer_slots_.find(buffer);
  if (it != buffer_slots_.end()) return it->second;
  const int slot = num_buffer_slots_++;
  buffer_slots_.emplace(buffer, slot);
  return slot;
}

void CompileContext::UnbindBuffer(const ir::BufferNode* buffer) {
  auto it = buffer_depth_.find(buffer);
  if (it != buffer_depth_.end() && --it->second == 0) buffer_depth_.erase(it);
}

int CompileContext::FindBuffer(const ir::BufferNode* buffer) const {
  if (buffer_depth_.count(buffer) == 0) return -1;
  return buffer_slots_.at(buffer);
}

}  // namespace kiln::interp
