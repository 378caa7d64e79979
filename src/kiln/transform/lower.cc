#include "kiln/transform/lower.h"

#include "kiln/ir/printer.h"
#include "kiln/ir/simplifier.h"

namespace kiln::transform {

StatusOr<ir::Function> Lower(const ir::Function& function, const LowerOptions& options) {
  KILN_RETURN_IF_ERROR(ir::Verify(function, options.verify));
  KILN_ASSIGN_OR_RETURN(ir::Function f, LowerThreadBindings(function));
  KILN_ASSIGN_OR_RETURN(f, Unroll(f, options.unroll));
  KILN_ASSIGN_OR_RETURN(f, Vectorize(f));
  KILN_ASSIGN_OR_RETURN(f, FlattenBuffers(f));
  KILN_ASSIGN_OR_RETURN(f, NarrowIndices(f));
  f = ir::Simplify(f);
  Status verified = ir::Verify(f, options.verify);
  if (!verified.ok()) {
    return Internal("lowering produced invalid IR (a kiln bug): ", verified.message(), "\n",
                    ir::Print(f));
  }
  return f;
}

}  // namespace kiln::transform
