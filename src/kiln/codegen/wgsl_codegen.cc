#include "kiln/codegen/wgsl_codegen.h"

#include "kiln/codegen/wgsl_kernel.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/verifier.h"

namespace kiln::codegen {

StatusOr<CompiledFunction> GenerateWgsl(const ir::Function& lowered,
                                        const CodegenOptions& options) {
  StatusOr<CompiledFunction> result = KernelGenerator(lowered, options).Generate();
  if (!result.ok()) return result.status().WithContext(StrCat("kernel '", lowered.name(), "'"));
  return result;
}

StatusOr<CompiledFunction> CompileFunction(const ir::Function& function,
                                           const CompileOptions& options) {
  transform::LowerOptions lower = options.lower;
  // One set of limits: the verifier inside Lower checks the codegen's.
  lower.verify.max_threads_per_workgroup = options.codegen.limits.max_invocations_per_workgroup;
  lower.verify.max_workgroup_storage_bytes = options.codegen.limits.max_workgroup_storage_bytes;
  StatusOr<ir::Function> lowered = transform::Lower(function, lower);
  if (!lowered.ok()) return lowered.status().WithContext(StrCat("kernel '", function.name(), "'"));
  KILN_ASSIGN_OR_RETURN(CompiledFunction compiled, GenerateWgsl(*lowered, options.codegen));
  // Callers pass tensors of the source shapes, not the flattened ones.
  for (size_t i = 0; i < function.params().size(); ++i) {
    const ir::Param& param = function.params()[i];
    if (!param.is_buffer()) continue;
    // Strides travel with the shape: a strided buffer reaches further than
    // the product of its extents.
    ParamInfo& info = compiled.metadata.params[i];
    info.shape.clear();
    info.strides.clear();
    for (const ir::Expr& extent : param.buffer().shape()) info.shape.push_back(ir::Print(extent));
    for (const ir::Expr& stride : param.buffer().strides()) {
      info.strides.push_back(ir::Print(stride));
    }
  }
  compiled.source_ir = ir::Print(function);
  return compiled;
}

StatusOr<CompiledModule> CompileModule(const ir::Module& module, const CompileOptions& options) {
  // Module-level checks (distinct function names) before any function's.
  KILN_RETURN_IF_ERROR(ir::Verify(module, options.lower.verify));
  CompiledModule compiled;
  for (const ir::Function& function : module.functions) {
    KILN_ASSIGN_OR_RETURN(CompiledFunction f, CompileFunction(function, options));
    compiled.functions.push_back(std::move(f));
  }
  return compiled;
}

}  // namespace kiln::codegen
