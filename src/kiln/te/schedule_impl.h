// The state behind a Schedule, shared by the schedule primitives and Lower.
#pragma once

#include <map>
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

struct StageState {
  Tensor tensor;
  std::vector<IterVar> all_axes;  // roots first, then every derived axis
  std::vector<IterVar> leaves;    // the loop nest, outermost first
  std::vector<Relation> relations;
  // Bound, unrolled or vectorized leaves (absent: serial).
  std::map<const IterVarNode*, ir::LoopKind> annotations;
  bool inlined = false;
  bool is_output = false;
  int applied = 0;  // primitives applied to this stage

  const std::string& name() const { return tensor.name(); }
};

struct Schedule::Impl {
  std::vector<Tensor> outputs;
  std::vector<StageState> stages;  // producers before consumers
  std::vector<Primitive> primitives;

  StageState* Find(const std::string& name);
  const StageState* Find(const OperationNode* op) const;
};

}  // namespace kiln::te
