#include "kiln/codegen/wgsl_codegen.h"

#include "kiln/codegen/extent_lowering.h"
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
  lower.verify.limits = options.codegen.limits;
  StatusOr<ir::Function> lowered = transform::Lower(function, lower);
  if (!lowered.ok()) return lowered.status().WithContext(StrCat("kernel '", function.name(), "'"));
  CodegenOptions codegen = options.codegen;
  if (codegen.source == nullptr) codegen.source = options.lower.source;
  KILN_ASSIGN_OR_RETURN(CompiledFunction compiled, GenerateWgsl(*lowered, codegen));
  // Callers pass tensors of the source shapes, not the flattened ones.
  for (size_t i = 0; i < function.params().size(); ++i) {
    const ir::Param& param = function.params()[i];
    if (!param.is_buffer()) continue;
    // Strides travel with the shape: a strided buffer reaches further than
    // the product of its extents.
    ParamInfo& info = compiled.metadata.params[i];
    info.shape.clear();
    info.strides.clear();
    const std::string name = param.buffer().name();
    for (const ir::Expr& extent : param.buffer().shape()) {
      auto e = LowerExtent(extent, function.params(), "the shape of '" + name + "'");
      if (!e.ok()) return e.status().WithContext(StrCat("kernel '", function.name(), "'"));
      info.shape.push_back(std::move(*e));
    }
    for (const ir::Expr& stride : param.buffer().strides()) {
      auto e = LowerExtent(stride, function.params(), "a stride of '" + name + "'");
      if (!e.ok()) return e.status().WithContext(StrCat("kernel '", function.name(), "'"));
      info.strides.push_back(std::move(*e));
    }
  }
  compiled.source_ir = ir::Print(function);
  return compiled;
}

ir::VerifyOptions SourceVerifyOptions(const CompileOptions& options) {
  ir::VerifyOptions verify = options.lower.verify;
  verify.limits = options.codegen.limits;
  verify.max_unrolled_extent = options.lower.unroll.max_extent;
  verify.kernel_buffer_types = true;
  verify.max_nested_blocks = ir::kMaxWgslNestedBlocks;
  verify.constant_indices_in_bounds = true;
  return verify;
}

StatusOr<CompiledModule> CompileModule(const ir::Module& module, const CompileOptions& options) {
  // Module-level checks (distinct function names) before any function's,
  // with the one set of limits.
  KILN_RETURN_IF_ERROR(ir::Verify(module, SourceVerifyOptions(options)));
  CompiledModule compiled;
  for (const ir::Function& function : module.functions) {
    KILN_ASSIGN_OR_RETURN(CompiledFunction f, CompileFunction(function, options));
    compiled.functions.push_back(std::move(f));
  }
  return compiled;
}

}  // namespace kiln::codegen
