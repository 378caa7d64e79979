#include "kiln/transform/fallible_mutator.h"

namespace kiln::transform {

StatusOr<ir::Function> RewriteFunction(const ir::Function& function, FallibleMutator& mutator,
                                       std::string_view pass) {
  std::vector<ir::Param> params;
  bool params_changed = false;
  for (const ir::Param& param : function.params()) {
    if (!param.is_buffer()) {
      params.push_back(param);
      continue;
    }
    ir::Buffer buffer = mutator.MutateBuffer(param.buffer());
    params_changed = params_changed || buffer.get() != param.buffer().get();
    params.push_back(ir::Param::FromBuffer(buffer));
  }
  ir::Stmt body = mutator.MutateStmt(function.body());
  if (!mutator.status().ok()) {
    return mutator.status().WithContext(StrCat(pass, " of '", function.name(), "'"));
  }
  ir::Function result = params_changed ? function.WithParams(std::move(params)) : function;
  return result.WithBody(std::move(body));
}

}  // namespace kiln::transform
