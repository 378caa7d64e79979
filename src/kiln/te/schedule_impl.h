// The state behind a Schedule, shared by the schedule primitives and Lower.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/ir/stmt.h"
#include "kiln/te/te.h"

namespace kiln::te {

// How a leaf axis was derived: a split of `parent` into outer/inner, or a
// fuse of outer/inner into `fused`.
struct Relation {
  enum class Kind : uint8_t { kSplit, kFuse } kind = Kind::kSplit;
  IterVar parent;  // split
  IterVar outer, inner;
  IterVar fused;  // fuse
  int64_t factor = 0;
};

struct StorageAlignment {
  int dim = 0;
  int64_t factor = 0, offset = 0;
};

struct StageState {
  Tensor tensor;  // the stage's identity (what users hold)
  // Its current definition: cache_read/cache_write/rfactor rewrite the reads
  // and reduction of a stage while the tensor, its buffer and its axes stay.
  std::shared_ptr<const OperationNode> op;
  std::vector<IterVar> all_axes;  // roots first, then every derived axis
  std::vector<IterVar> leaves;    // the loop nest, outermost first
  std::vector<Relation> relations;
  // Bound, unrolled or vectorized leaves (absent: serial).
  std::map<const IterVarNode*, ir::LoopKind> annotations;
  bool inlined = false;
  bool is_output = false;
  int applied = 0;  // primitives applied to this stage
  // compute_at: computed inside loop `attach_axis` of stage `attach_stage`.
  std::string attach_stage;
  IterVar attach_axis;
  ir::MemoryScope scope = ir::MemoryScope::kGlobal;
  bool scope_set = false;
  std::vector<StorageAlignment> alignments;
  bool double_buffer = false;
  bool double_buffer_branch_free = false;  // double_buffer(branch_free)
  bool copy_ahead = false;
  bool copy_ahead_registers = false;              // copy_ahead(registers)
  LastCopy copy_ahead_last = LastCopy::kSkipped;  // copy_ahead(registers, ...)
  bool subgroup_reduce = false;     // its cross-thread reduction combines through subgroups
  bool fused_multiply_add = false;  // its sum of products accumulates with fma

  const std::string& name() const { return tensor.name(); }
  bool attached() const { return attach_axis.defined(); }
};

struct ScheduleState {
  std::vector<Tensor> outputs;
  std::vector<StageState> stages;  // producers before consumers
  std::vector<Primitive> primitives;

  StageState* Find(const std::string& name);
  const StageState* Find(const std::string& name) const;
  // The stage whose tensor (identity) is `op`.
  const StageState* Find(const OperationNode* op) const;
};

}  // namespace kiln::te
