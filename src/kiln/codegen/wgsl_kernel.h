// KernelGenerator: one lowered function as a complete WGSL module with its
// metadata (internal to codegen; GenerateWgsl in wgsl_codegen.h is the public
// entry). It owns the module-level layout the kernel ABI fixes: enable
// directives, the uniform struct, the bindings, workgroup arrays, helper
// functions, and the entry point with its large-grid prologue; the body
// itself comes from FunctionEmitter.
#pragma once

#include <string>
#include <vector>

#include "kiln/codegen/compiled_module.h"
#include "kiln/codegen/wgsl_codegen.h"
#include "kiln/codegen/wgsl_emitter.h"
#include "kiln/codegen/wgsl_helpers.h"
#include "kiln/codegen/wgsl_names.h"
#include "kiln/ir/function.h"
#include "kiln/support/status.h"
#include "kiln/transform/lower_thread_bindings.h"

namespace kiln::codegen {

class KernelGenerator {
 public:
  KernelGenerator(const ir::Function& function, const CodegenOptions& options);

  StatusOr<CompiledFunction> Generate();

 private:
  // Metadata and WGSL declarations of every parameter, in ABI order.
  Status DeclareParams();
  // Access modes are known once the body has been emitted.
  void DeclareBindings();
  Status FillLaunchMetadata();
  std::string Assemble() const;

  const ir::Function& function_;
  const CodegenOptions& options_;
  transform::LaunchInfo launch_;
  CompiledFunction result_;

  // Names of the ABI's own declarations, taken before any parameter's.
  NameSupply names_;
  NameSupply fields_;        // members of the uniform struct
  std::string entry_point_;  // first, so it is the function's name whenever that is valid
  std::string args_type_;
  std::string args_;
  LaunchNames launch_names_;

  WgslHelpers helpers_;
  FunctionEmitter emitter_;
  std::vector<std::string> buffer_names_;  // by binding
  std::vector<int> buffer_lanes_;          // by binding: 1, or the vector width of its elements
  uint32_t num_scalars_ = 0;
  std::string uniform_fields_;  // struct members, one per line
  std::string scalar_lets_;     // the entry point's copies of scalar params
  std::string bindings_;        // @group(0) declarations
};

}  // namespace kiln::codegen
