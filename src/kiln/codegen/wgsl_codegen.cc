#include "kiln/codegen/wgsl_codegen.h"

#include <array>

#include "kiln/codegen/kernel_abi.h"
#include "kiln/codegen/wgsl_emitter.h"
#include "kiln/codegen/wgsl_helpers.h"
#include "kiln/codegen/wgsl_names.h"
#include "kiln/codegen/wgsl_types.h"
#include "kiln/ir/printer.h"
#include "kiln/transform/lower_thread_bindings.h"

namespace kiln::codegen {
namespace {

Status CheckWorkgroupSize(const std::array<int64_t, 3>& size, const DeviceLimits& limits) {
  const std::array<uint32_t, 3> max_size = {
      limits.max_workgroup_size_x, limits.max_workgroup_size_y, limits.max_workgroup_size_z};
  const char* axis_names[] = {"X", "Y", "Z"};
  for (int axis = 0; axis < 3; ++axis) {
    if (size[axis] > max_size[axis]) {
      return InvalidArgument("workgroup size ", size[axis], " along ", axis_names[axis],
                             " exceeds the device's maxComputeWorkgroupSize", axis_names[axis],
                             " of ", max_size[axis]);
    }
  }
  int64_t invocations = size[0] * size[1] * size[2];
  if (invocations > limits.max_invocations_per_workgroup) {
    return InvalidArgument("workgroup size (", size[0], ", ", size[1], ", ", size[2], ") has ",
                           invocations,
                           " invocations, more than the device's "
                           "maxComputeInvocationsPerWorkgroup of ",
                           limits.max_invocations_per_workgroup);
  }
  return Status::Ok();
}

bool IsUniformScalar(ir::DataType type) {
  return type == ir::kI32 || type == ir::kU32 || type == ir::kF32;
}

std::string LaunchExtentText(const ir::Expr& extent) {
  return extent.defined() ? ir::Print(extent) : std::string("1");
}

// Everything GenerateWgsl assembles, before it becomes text.
struct KernelParts {
  std::string uniform_fields;  // struct members, one per line
  std::string bindings;        // @group(0) declarations
  std::string scalar_lets;     // the entry point's copies of scalar params
};

StatusOr<CompiledFunction> Generate(const ir::Function& function, const CodegenOptions& options) {
  KILN_ASSIGN_OR_RETURN(transform::LaunchInfo launch, transform::CollectLaunchInfo(function));
  KILN_RETURN_IF_ERROR(CheckWorkgroupSize(launch.workgroup_size, options.limits));

  CompiledFunction result;
  KernelMetadata& meta = result.metadata;
  meta.name = function.name();

  // Names of the entry point and the ABI's own declarations come first, so
  // parameters and locals never take them.
  NameSupply names;
  meta.entry_point = names.Fresh(function.name());
  const std::string args_type = names.Fresh("KernelArgs");
  const std::string args = names.Fresh("args");
  const LaunchNames launch_names{names.Fresh("block_x"), names.Fresh("wid"), names.Fresh("lid")};
  NameSupply fields;
  fields.Reserve(abi::kGridDimXField);
  fields.Reserve(abi::kNumBlocksXField);

  WgslHelpers helpers;
  FunctionEmitter emitter(names, helpers, launch_names);
  KernelParts parts;
  bool uses_f16 = false;
  uint32_t num_buffers = 0, num_scalars = 0;
  std::vector<std::string> buffer_names;
  for (const ir::Param& param : function.params()) {
    ParamInfo info;
    info.name = param.name();
    if (param.is_buffer()) {
      const ir::Buffer& buffer = param.buffer();
      if (!IsStorableType(buffer.dtype())) {
        return Unimplemented("buffer parameter '", param.name(), "' has element type ",
                             buffer.dtype(),
                             "; kernel buffers hold f32, f16, i32, u32, bool or int8x4");
      }
      uses_f16 |= buffer.dtype() == ir::kF16;
      info.kind = ParamKind::kBuffer;
      info.dtype = buffer.dtype().ToString();
      info.binding = num_buffers++;
      for (const ir::Expr& extent : buffer.shape()) info.shape.push_back(ir::Print(extent));
      buffer_names.push_back(names.Fresh(param.name()));
      emitter.BindBuffer(buffer.get(), buffer_names.back());
    } else {
      const ir::Var& var = param.var();
      if (!IsUniformScalar(var.dtype())) {
        return InvalidArgument("scalar parameter '", param.name(), "' has type ", var.dtype(),
                               "; the kernel ABI passes only i32, u32 and f32 scalars");
      }
      std::string type = *WgslValueType(var.dtype());
      info.kind = ParamKind::kScalar;
      info.dtype = var.dtype().ToString();
      info.uniform_offset = abi::ScalarOffset(num_scalars++);
      std::string field = fields.Fresh(param.name());
      std::string local = names.Fresh(param.name());
      parts.uniform_fields += StrCat("  ", field, " : ", type, ",\n");
      parts.scalar_lets += StrCat("  let ", local, " : ", type, " = ", args, ".", field, ";\n");
      emitter.BindVar(var.get(), local);
    }
    meta.params.push_back(std::move(info));
  }

  emitter.EmitBody(function.body(), 1);
  KILN_RETURN_IF_ERROR(emitter.status());
  if (emitter.workgroup_bytes() > options.limits.max_workgroup_storage_bytes) {
    return InvalidArgument("shared allocations take ", emitter.workgroup_bytes(),
                           " bytes, more than the device's maxComputeWorkgroupStorageSize of ",
                           options.limits.max_workgroup_storage_bytes);
  }

  // Bindings: buffers in parameter order, then the uniform block.
  for (size_t i = 0; i < meta.params.size(); ++i) {
    ParamInfo& info = meta.params[i];
    if (info.kind != ParamKind::kBuffer) continue;
    const ir::Buffer& buffer = function.params()[i].buffer();
    bool written = emitter.stored(buffer.get());
    info.access = written ? BufferAccess::kReadWrite : BufferAccess::kRead;
    parts.bindings +=
        StrCat("@group(", abi::kBindGroup, ") @binding(", info.binding, ") var<storage, ",
               written ? "read_write" : "read", "> ", buffer_names[info.binding], " : array<",
               *WgslStorageType(buffer.dtype()), ">;\n");
  }
  parts.bindings +=
      StrCat("@group(", abi::kBindGroup, ") @binding(", abi::UniformBinding(num_buffers),
             ") var<uniform> ", args, " : ", args_type, ";\n");

  uses_f16 |= emitter.uses_f16();
  if (uses_f16) meta.required_features.emplace_back(abi::kFeatureShaderF16);
  if (emitter.uses_subgroups()) meta.required_features.emplace_back(abi::kFeatureSubgroups);
  meta.num_blocks_x = LaunchExtentText(launch.num_blocks[0]);
  meta.num_blocks_y = LaunchExtentText(launch.num_blocks[1]);
  for (int axis = 0; axis < 3; ++axis) {
    meta.workgroup_size[axis] = static_cast<uint32_t>(launch.workgroup_size[axis]);
  }
  meta.uniform_binding = abi::UniformBinding(num_buffers);
  meta.uniform_block_size = abi::UniformBlockSize(num_scalars);
  meta.workgroup_storage_bytes = static_cast<uint32_t>(emitter.workgroup_bytes());

  std::string& wgsl = result.wgsl;
  if (uses_f16) wgsl += "enable f16;\n";
  if (emitter.uses_subgroups()) {
    wgsl += abi::kSubgroupsEnableDirective;
    // The IR verifier already keeps subgroup operations out of thread-
    // dependent control flow; Tint's analysis is more conservative (it calls
    // every storage load non-uniform), so its check is turned off. Naga does
    // not know the rule and only warns.
    wgsl += "diagnostic(off, subgroup_uniformity);\n";
  }
  if (!wgsl.empty()) wgsl += "\n";
  wgsl += StrCat("struct ", args_type, " {\n", parts.uniform_fields, "  ", abi::kGridDimXField,
                 " : u32,\n  ", abi::kNumBlocksXField, " : u32,\n}\n\n");
  wgsl += parts.bindings;
  if (!emitter.workgroup_decls().empty()) wgsl += "\n" + emitter.workgroup_decls();
  wgsl += "\n" + helpers.Definitions();
  wgsl += StrCat("@compute @workgroup_size(", meta.workgroup_size[0], ", ", meta.workgroup_size[1],
                 ", ", meta.workgroup_size[2], ")\n");
  wgsl += StrCat("fn ", meta.entry_point, "(@builtin(workgroup_id) ", launch_names.workgroup_id,
                 " : vec3<u32>, @builtin(local_invocation_id) ", launch_names.local_id,
                 " : vec3<u32>) {\n");
  // The large-grid prologue (kernel_abi.h). It is the first statement and
  // depends only on the workgroup id and a uniform, so whole workgroups
  // return together and no barrier is skipped by part of one.
  const std::string& bx = launch_names.block_x;
  wgsl += StrCat("  let ", bx, " : u32 = ", launch_names.workgroup_id, ".x + ",
                 launch_names.workgroup_id, ".z * ", args, ".", abi::kGridDimXField, ";\n");
  wgsl += StrCat("  if (", bx, " >= ", args, ".", abi::kNumBlocksXField, ") {\n    return;\n  }\n");
  wgsl += parts.scalar_lets;
  wgsl += emitter.output();
  wgsl += "}\n";
  return result;
}

}  // namespace

StatusOr<CompiledFunction> GenerateWgsl(const ir::Function& lowered,
                                        const CodegenOptions& options) {
  StatusOr<CompiledFunction> result = Generate(lowered, options);
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
    std::vector<std::string>& shape = compiled.metadata.params[i].shape;
    shape.clear();
    for (const ir::Expr& extent : param.buffer().shape()) shape.push_back(ir::Print(extent));
  }
  return compiled;
}

StatusOr<CompiledModule> CompileModule(const ir::Module& module, const CompileOptions& options) {
  CompiledModule compiled;
  for (const ir::Function& function : module.functions) {
    KILN_ASSIGN_OR_RETURN(CompiledFunction f, CompileFunction(function, options));
    compiled.functions.push_back(std::move(f));
  }
  return compiled;
}

}  // namespace kiln::codegen
