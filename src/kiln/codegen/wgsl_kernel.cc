#include "kiln/codegen/wgsl_kernel.h"

#include <array>

#include "kiln/codegen/extent_lowering.h"
#include "kiln/codegen/kernel_abi.h"
#include "kiln/codegen/wgsl_packing.h"
#include "kiln/codegen/wgsl_types.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/verifier.h"

namespace kiln::codegen {
namespace {

// A storage array's element type: the scalar, or a vector of `lanes`.
std::string ElementType(ir::DataType dtype, int lanes) {
  std::string scalar = *WgslStorageType(dtype);
  return lanes > 1 ? StrCat("vec", lanes, "<", scalar, ">") : scalar;
}

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

StatusOr<ExtentExpr> LaunchExtent(const ir::Expr& extent, const std::vector<ir::Param>& params,
                                  std::string_view what) {
  if (!extent.defined()) return ExtentExpr::Constant(1);
  return LowerExtent(extent, params, what);
}

}  // namespace

KernelGenerator::KernelGenerator(const ir::Function& function, const CodegenOptions& options)
    : function_(function),
      options_(options),
      entry_point_(names_.Fresh(function.name())),
      args_type_(names_.Fresh("KernelArgs")),
      args_(names_.Fresh("args")),
      launch_names_{names_.Fresh("block_x"), names_.Fresh("wid"), names_.Fresh("lid"),
                    names_.Fresh("sg_lane"), names_.Fresh("sg_size")},
      emitter_(names_, helpers_, launch_names_) {
  fields_.Reserve(abi::kGridDimXField);
  fields_.Reserve(abi::kNumBlocksXField);
}

StatusOr<CompiledFunction> KernelGenerator::Generate() {
  KILN_ASSIGN_OR_RETURN(launch_, transform::CollectLaunchInfo(function_));
  KILN_RETURN_IF_ERROR(CheckWorkgroupSize(launch_.workgroup_size, options_.limits));
  result_.metadata.name = function_.name();
  result_.metadata.entry_point = entry_point_;
  emitter_.CollectLets(function_.body());
  emitter_.SetSource(options_.source);
  KILN_RETURN_IF_ERROR(DeclareParams());
  if (num_scalars_ > abi::kMaxScalarParams) {
    return InvalidArgument("it has ", num_scalars_, " scalar parameters; a kernel takes at most ",
                           abi::kMaxScalarParams,
                           " (its uniform block's fields; pass more values in a buffer)");
  }
  if (abi::UniformBlockSize(num_scalars_) > options_.limits.max_uniform_buffer_binding_size) {
    return InvalidArgument("its ", num_scalars_, " scalar parameters take a uniform block of ",
                           abi::UniformBlockSize(num_scalars_),
                           " bytes, more than the target's maxUniformBufferBindingSize of ",
                           options_.limits.max_uniform_buffer_binding_size,
                           " (pass more values in a buffer)");
  }

  emitter_.EmitBody(function_.body(), 1);
  KILN_RETURN_IF_ERROR(emitter_.status());
  // Lowering may add blocks (guards) to what the verifier counted.
  if (emitter_.deepest_block() > ir::kMaxWgslNestedBlocks + 1) {
    return InvalidArgument("its WGSL nests blocks ", emitter_.deepest_block() - 1,
                           " deep (loops, ifs, if_then_else and the guards lowering adds), more "
                           "than the ",
                           ir::kMaxWgslNestedBlocks,
                           " WebGPU implementations accept; nest fewer of them");
  }
  if (emitter_.workgroup_bytes() > options_.limits.max_workgroup_storage_bytes) {
    return InvalidArgument("shared allocations take ", emitter_.workgroup_bytes(),
                           " bytes, more than the device's maxComputeWorkgroupStorageSize of ",
                           options_.limits.max_workgroup_storage_bytes);
  }
  DeclareBindings();
  KILN_RETURN_IF_ERROR(FillLaunchMetadata());
  result_.wgsl = Assemble();
  return std::move(result_);
}

Status KernelGenerator::DeclareParams() {
  KernelMetadata& meta = result_.metadata;
  for (const ir::Param& param : function_.params()) {
    ParamInfo info;
    info.name = param.name();
    if (param.is_buffer()) {
      const ir::Buffer& buffer = param.buffer();
      if (!IsStorableType(buffer.dtype())) {
        return Unimplemented("buffer parameter '", param.name(), "' has element type ",
                             buffer.dtype(),
                             "; kernel buffers hold f32, f16, i32, u32, bool or int8x4");
      }
      info.kind = ParamKind::kBuffer;
      info.dtype = *DTypeFromName(buffer.dtype().ToString());
      info.binding = static_cast<uint32_t>(buffer_names_.size());
      for (const ir::Expr& extent : buffer.shape()) {
        KILN_ASSIGN_OR_RETURN(ExtentExpr e, LowerExtent(extent, function_.params(),
                                                        "the shape of '" + param.name() + "'"));
        info.shape.push_back(std::move(e));
      }
      for (const ir::Expr& stride : buffer.strides()) {
        KILN_ASSIGN_OR_RETURN(ExtentExpr e, LowerExtent(stride, function_.params(),
                                                        "a stride of '" + param.name() + "'"));
        info.strides.push_back(std::move(e));
      }
      buffer_names_.push_back(names_.Fresh(param.name()));
      emitter_.BindBuffer(buffer.get(), buffer_names_.back());
      // Accessed only by aligned vectors: an array of vectors, one load or
      // store per access (docs/kernel-abi.md).
      const int lanes = ChooseParamPacking(buffer, function_.body(), &emitter_.lets()).lanes;
      buffer_lanes_.push_back(lanes);
      info.lanes = static_cast<uint32_t>(lanes);
      if (lanes > 1) emitter_.PackBuffer(buffer.get(), lanes);
    } else {
      const ir::Var& var = param.var();
      if (!IsUniformScalar(var.dtype())) {
        return InvalidArgument("scalar parameter '", param.name(), "' has type ", var.dtype(),
                               "; the kernel ABI passes only i32, u32 and f32 scalars");
      }
      std::string type = *WgslValueType(var.dtype());
      info.kind = ParamKind::kScalar;
      info.dtype = *DTypeFromName(var.dtype().ToString());
      info.uniform_offset = abi::ScalarOffset(num_scalars_++);
      // Scalars are copied out of the uniform block once, at the top, so the
      // body reads them like any other value.
      std::string field = fields_.Fresh(param.name());
      std::string local = names_.Fresh(param.name());
      uniform_fields_ += StrCat("  ", field, " : ", type, ",\n");
      scalar_lets_ += StrCat("  let ", local, " : ", type, " = ", args_, ".", field, ";\n");
      emitter_.BindVar(var.get(), local);
    }
    meta.params.push_back(std::move(info));
  }
  return Status::Ok();
}

void KernelGenerator::DeclareBindings() {
  KernelMetadata& meta = result_.metadata;
  for (size_t i = 0; i < meta.params.size(); ++i) {
    ParamInfo& info = meta.params[i];
    if (info.kind != ParamKind::kBuffer) continue;
    const ir::Buffer& buffer = function_.params()[i].buffer();
    bool written = emitter_.stored(buffer.get());
    info.access = written ? BufferAccess::kReadWrite : BufferAccess::kRead;
    bindings_ +=
        StrCat("@group(", abi::kBindGroup, ") @binding(", info.binding, ") var<storage, ",
               written ? "read_write" : "read", "> ", buffer_names_[info.binding], " : array<",
               ElementType(buffer.dtype(), buffer_lanes_[info.binding]), ">;\n");
  }
  meta.uniform_binding = abi::UniformBinding(static_cast<uint32_t>(buffer_names_.size()));
  bindings_ += StrCat("@group(", abi::kBindGroup, ") @binding(", meta.uniform_binding,
                      ") var<uniform> ", args_, " : ", args_type_, ";\n");
}

Status KernelGenerator::FillLaunchMetadata() {
  KernelMetadata& meta = result_.metadata;
  bool f16_buffer = false;
  for (const ir::Param& param : function_.params()) {
    f16_buffer |= param.is_buffer() && param.buffer().dtype() == ir::kF16;
  }
  if (f16_buffer || emitter_.uses_f16()) {
    meta.required_features.emplace_back(abi::kFeatureShaderF16);
  }
  if (emitter_.uses_subgroups()) meta.required_features.emplace_back(abi::kFeatureSubgroups);
  KILN_ASSIGN_OR_RETURN(meta.num_blocks_x, LaunchExtent(launch_.num_blocks[0], function_.params(),
                                                        "the blockIdx.x extent"));
  KILN_ASSIGN_OR_RETURN(meta.num_blocks_y, LaunchExtent(launch_.num_blocks[1], function_.params(),
                                                        "the blockIdx.y extent"));
  for (int axis = 0; axis < 3; ++axis) {
    meta.workgroup_size[axis] = static_cast<uint32_t>(launch_.workgroup_size[axis]);
  }
  meta.uniform_block_size = abi::UniformBlockSize(num_scalars_);
  meta.workgroup_storage_bytes = static_cast<uint32_t>(emitter_.workgroup_bytes());
  meta.loops_terminate = !emitter_.has_while_loops();
  return Status::Ok();
}

std::string KernelGenerator::Assemble() const {
  const KernelMetadata& meta = result_.metadata;
  auto requires_feature = [&](std::string_view feature) {
    for (const std::string& f : meta.required_features) {
      if (f == feature) return true;
    }
    return false;
  };
  std::string wgsl;
  if (requires_feature(abi::kFeatureShaderF16)) wgsl += "enable f16;\n";
  if (requires_feature(abi::kFeatureSubgroups)) {
    wgsl += abi::kSubgroupsEnableDirective;
    // The IR verifier already keeps subgroup operations out of thread-
    // dependent control flow; Tint's analysis is more conservative (it calls
    // every storage load non-uniform), so its check is turned off. Naga does
    // not know the rule and only warns.
    wgsl += "diagnostic(off, subgroup_uniformity);\n";
  }
  if (!wgsl.empty()) wgsl += "\n";
  wgsl += StrCat("struct ", args_type_, " {\n", uniform_fields_, "  ", abi::kGridDimXField,
                 " : u32,\n  ", abi::kNumBlocksXField, " : u32,\n}\n\n");
  wgsl += bindings_;
  if (!emitter_.workgroup_decls().empty()) wgsl += "\n" + emitter_.workgroup_decls();
  wgsl += "\n" + helpers_.Definitions();
  wgsl += StrCat("@compute @workgroup_size(", meta.workgroup_size[0], ", ", meta.workgroup_size[1],
                 ", ", meta.workgroup_size[2], ")\n");
  const std::string& wid = launch_names_.workgroup_id;
  std::string subgroup_builtins;
  if (emitter_.uses_subgroup_invocation_id()) {
    subgroup_builtins += StrCat(", @builtin(subgroup_invocation_id) ",
                                launch_names_.subgroup_invocation_id, " : u32");
  }
  if (emitter_.uses_subgroup_size()) {
    subgroup_builtins +=
        StrCat(", @builtin(subgroup_size) ", launch_names_.subgroup_size, " : u32");
  }
  wgsl += StrCat("fn ", meta.entry_point, "(@builtin(workgroup_id) ", wid,
                 " : vec3<u32>, @builtin(local_invocation_id) ", launch_names_.local_id,
                 " : vec3<u32>", subgroup_builtins, ") {\n");
  // The large-grid prologue (kernel_abi.h). It is the first statement and
  // depends only on the workgroup id and a uniform, so whole workgroups
  // return together and no barrier is skipped by part of one.
  const std::string& bx = launch_names_.block_x;
  wgsl += StrCat("  let ", bx, " : u32 = ", wid, ".x + ", wid, ".z * ", args_, ".",
                 abi::kGridDimXField, ";\n");
  wgsl +=
      StrCat("  if (", bx, " >= ", args_, ".", abi::kNumBlocksXField, ") {\n    return;\n  }\n");
  wgsl += scalar_lets_;
  wgsl += emitter_.output();
  wgsl += "}\n";
  return wgsl;
}

}  // namespace kiln::codegen
