// What compiled interpreter code reads and writes while it runs (ExecState),
// and what the compiler tracks while lowering IR to that code
// (CompileContext). Internal to the interpreter.
//
// Values of one expression for all threads of a workgroup are stored thread
// major: lane l of thread t is at [t * lanes + l]. A mask is one byte per
// thread, non-zero for the threads that execute.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/interp/lane.h"
#include "kiln/ir/buffer.h"
#include "kiln/ir/expr.h"

namespace kiln::interp {

// Where a buffer's elements are, as seen by loads and stores.
struct BufferBinding {
  ir::DataType elem;
  int elem_bytes = 4;
  uint8_t* data = nullptr;
  int64_t num_elements = 0;  // for a per-thread buffer: the elements of one thread
  bool per_thread = false;   // local scope: thread t's copy starts at t * num_elements
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // in elements, always one per dimension
};

// Sets the binding's shape and strides (dense row-major when `strides` is
// empty) and returns the number of elements the layout spans: the largest
// offset plus one, or 0 when an extent is 0; kLayoutOverflow when that
// does not fit in 64 bits. Extents must be non-negative.
inline constexpr int64_t kLayoutOverflow = INT64_MAX;
int64_t SetLayout(BufferBinding& binding, std::vector<int64_t> shape, std::vector<int64_t> strides);

struct ExecState {
  int num_threads = 1;
  std::array<int64_t, 3> workgroup_size = {1, 1, 1};
  std::array<std::vector<int64_t>, 3> thread_index;  // [axis][thread]
  std::array<int64_t, 2> block_index = {0, 0};
  std::array<int64_t, 2> grid = {1, 1};  // blockIdx.x/y extents of the launch
  int subgroup_size = 32;
  int64_t max_while_iterations = 0;

  std::vector<std::vector<Lane>> vars;  // by variable slot; num_threads * lanes each
  std::vector<BufferBinding> buffers;   // by buffer slot
  std::vector<uint8_t> all_threads;     // the mask with every thread set

  // "block (bx, by), thread (x, y, z)" for messages.
  std::string Where(int thread) const;
};

// True if any thread of the mask is set.
inline bool AnyActive(const uint8_t* mask, int num_threads) {
  for (int t = 0; t < num_threads; ++t) {
    if (mask[t] != 0) return true;
  }
  return false;
}

// Assigns variable and buffer slots while IR is compiled. A variable gets
// its slot where it is bound (parameter, let, loop); uses look it up, so a
// use outside the binding's scope is caught at compile time.
class CompileContext {
 public:
  explicit CompileContext(int num_threads) : num_threads_(num_threads) {}

  int num_threads() const { return num_threads_; }

  // The slot of `var`, created on first binding.
  int BindVar(const ir::VarNode* var, int lanes);
  // Marks the end of a binding's scope.
  void UnbindVar(const ir::VarNode* var);
  // The slot of a bound variable, or -1.
  int FindVar(const ir::VarNode* var) const;

  int BindBuffer(const ir::BufferNode* buffer);
  void UnbindBuffer(const ir::BufferNode* buffer);
  int FindBuffer(const ir::BufferNode* buffer) const;

  // Lanes per thread of every variable slot, by slot.
  const std::vector<int>& var_lanes() const { return var_lanes_; }
  int num_buffer_slots() const { return num_buffer_slots_; }

 private:
  int num_threads_;
  std::unordered_map<const ir::VarNode*, int> var_slots_;  // every var ever bound
  std::unordered_map<const ir::VarNode*, int> var_depth_;  // bindings in scope
  std::vector<int> var_lanes_;
  std::unordered_map<const ir::BufferNode*, int> buffer_slots_;
  std::unordered_map<const ir::BufferNode*, int> buffer_depth_;
  int num_buffer_slots_ = 0;
};

}  // namespace kiln::interp
