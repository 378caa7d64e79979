#include "kiln/codegen/module_validate.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "kiln/codegen/kernel_abi.h"
#include "kiln/support/file.h"

namespace kiln::codegen {
namespace {

// The format's strings are UTF-8 text (an implementation handed other bytes
// as WGSL or a label may not survive them).
Status CheckText(std::string_view text, std::string_view what) {
  return kiln::CheckText(text, what, StatusCode::kDataLoss);
}

Status CheckFunction(const CompiledFunction& f) {
  const KernelMetadata& m = f.metadata;
  KILN_RETURN_IF_ERROR(CheckText(m.entry_point, "the entry point's name"));
  KILN_RETURN_IF_ERROR(CheckText(f.wgsl, "the WGSL"));
  KILN_RETURN_IF_ERROR(CheckText(f.source_ir, "the source IR"));
  for (const ParamInfo& p : m.params) KILN_RETURN_IF_ERROR(CheckText(p.name, "a parameter's name"));
  for (const std::string& feature : m.required_features) {
    KILN_RETURN_IF_ERROR(CheckText(feature, "a required feature's name"));
  }
  if (m.entry_point.empty() ||
      f.wgsl.find(StrCat("fn ", m.entry_point, "(")) == std::string::npos) {
    return DataLoss("entry point '", m.entry_point, "' is not declared in the WGSL");
  }
  std::set<std::string> names;
  uint32_t buffers = 0, scalars = 0;
  bool f16 = false;
  for (const ParamInfo& p : m.params) {
    if (p.name.empty() || !names.insert(p.name).second) {
      return DataLoss("parameter name '", p.name, "' is empty or repeated");
    }
    if (static_cast<uint8_t>(p.dtype) > kLastDType) {
      return DataLoss("parameter '", p.name, "' has unknown type ", static_cast<int>(p.dtype));
    }
    if (p.kind == ParamKind::kBuffer) {
      if (p.binding != buffers || p.uniform_offset != 0) {
        return DataLoss("buffer parameter '", p.name, "' has binding ", p.binding, ", expected ",
                        buffers, " (buffers are bound in parameter order)");
      }
      if (!p.strides.empty() && p.strides.size() != p.shape.size()) {
        return DataLoss("buffer parameter '", p.name, "' has ", p.strides.size(), " strides for ",
                        p.shape.size(), " dimensions");
      }
      if (p.lanes != 1 && p.lanes != 2 && p.lanes != 4) {
        return DataLoss("buffer parameter '", p.name, "' has ", p.lanes,
                        " lanes per array element; expected 1, 2 or 4");
      }
      f16 |= p.dtype == DType::kF16;
      ++buffers;
    } else {
      if (p.dtype != DType::kI32 && p.dtype != DType::kU32 && p.dtype != DType::kF32) {
        return DataLoss("scalar parameter '", p.name, "' has type ", DTypeName(p.dtype),
                        "; expected i32, u32 or f32");
      }
      if (p.uniform_offset != abi::ScalarOffset(scalars) || p.binding != 0 || !p.shape.empty() ||
          p.access != BufferAccess::kRead || p.lanes != 1) {
        return DataLoss("scalar parameter '", p.name, "' is at uniform offset ", p.uniform_offset,
                        ", expected ", abi::ScalarOffset(scalars),
                        " (and has no binding, shape, access or lanes)");
      }
      ++scalars;
    }
  }
  if (scalars > abi::kMaxScalarParams) {
    return DataLoss(scalars, " scalar parameters; a kernel takes at most ", abi::kMaxScalarParams);
  }
  if (m.uniform_binding != abi::UniformBinding(buffers)) {
    return DataLoss("uniform binding ", m.uniform_binding, ", expected ",
                    abi::UniformBinding(buffers));
  }
  if (m.uniform_block_size != abi::UniformBlockSize(scalars)) {
    return DataLoss("uniform block size ", m.uniform_block_size, ", expected ",
                    abi::UniformBlockSize(scalars));
  }
  const auto& w = m.workgroup_size;
  if (w[0] == 0 || w[1] == 0 || w[2] == 0) {
    return DataLoss("workgroup size (", w[0], ", ", w[1], ", ", w[2], ") has an empty axis");
  }
  const std::string declared = StrCat("@workgroup_size(", w[0], ", ", w[1], ", ", w[2], ")");
  if (f.wgsl.find(declared) == std::string::npos) {
    return DataLoss("workgroup size (", w[0], ", ", w[1], ", ", w[2],
                    ") is not the WGSL's @workgroup_size");
  }
  if (f16 && std::find(m.required_features.begin(), m.required_features.end(),
                       abi::kFeatureShaderF16) == m.required_features.end()) {
    return DataLoss("f16 buffers without the '", abi::kFeatureShaderF16, "' feature listed");
  }
  // Extents read only integer scalar parameters.
  std::vector<bool> integer_params;
  for (const ParamInfo& p : m.params) {
    integer_params.push_back(p.kind == ParamKind::kScalar &&
                             (p.dtype == DType::kI32 || p.dtype == DType::kU32));
  }
  for (const ParamInfo& p : m.params) {
    for (const ExtentExpr& e : p.shape) KILN_RETURN_IF_ERROR(Validate(e, integer_params));
    for (const ExtentExpr& e : p.strides) KILN_RETURN_IF_ERROR(Validate(e, integer_params));
  }
  KILN_RETURN_IF_ERROR(Validate(m.num_blocks_x, integer_params));
  KILN_RETURN_IF_ERROR(Validate(m.num_blocks_y, integer_params));
  return Status::Ok();
}

}  // namespace

Status ValidateModule(const CompiledModule& module) {
  std::set<std::string> names;
  for (size_t i = 0; i < module.functions.size(); ++i) {
    const std::string& name = module.functions[i].metadata.name;
    if (name.empty()) return DataLoss("invalid module: function ", i, " has no name");
    if (Status text = CheckText(name, StrCat("function ", i, "'s name")); !text.ok()) {
      return DataLoss("invalid module: ", text.message());
    }
    if (!names.insert(name).second) {
      return DataLoss("invalid module: two functions are named '", name, "'");
    }
    Status s = CheckFunction(module.functions[i]);
    if (!s.ok()) {
      return Status(s.code(), StrCat(s.code() == StatusCode::kDataLoss ? "invalid module: " : "",
                                     "function '", name, "': ", s.message()));
    }
  }
  return Status::Ok();
}

std::string FitsLimits(const KernelMetadata& m, const TargetLimits& limits) {
  const auto& w = m.workgroup_size;
  const uint64_t invocations = uint64_t{w[0]} * w[1] * w[2];
  if (w[0] > limits.max_workgroup_size_x || w[1] > limits.max_workgroup_size_y ||
      w[2] > limits.max_workgroup_size_z || invocations > limits.max_invocations_per_workgroup) {
    return StrCat("a workgroup of (", w[0], ", ", w[1], ", ", w[2],
                  "), beyond the device's limits (", limits.max_workgroup_size_x, ", ",
                  limits.max_workgroup_size_y, ", ", limits.max_workgroup_size_z, "; ",
                  limits.max_invocations_per_workgroup, " invocations)");
  }
  if (m.workgroup_storage_bytes > limits.max_workgroup_storage_bytes) {
    return StrCat(m.workgroup_storage_bytes,
                  " bytes of workgroup storage, more than the device's "
                  "maxComputeWorkgroupStorageSize of ",
                  limits.max_workgroup_storage_bytes);
  }
  if (m.uniform_block_size > limits.max_uniform_buffer_binding_size) {
    return StrCat("a uniform block of ", m.uniform_block_size,
                  " bytes, more than the device's maxUniformBufferBindingSize of ",
                  limits.max_uniform_buffer_binding_size);
  }
  uint32_t buffers = 0;
  for (const ParamInfo& p : m.params) buffers += p.kind == ParamKind::kBuffer ? 1 : 0;
  if (buffers > limits.max_storage_buffers_per_stage) {
    return StrCat(buffers,
                  " storage buffers, more than the device's "
                  "maxStorageBuffersPerShaderStage of ",
                  limits.max_storage_buffers_per_stage);
  }
  return std::string();
}

}  // namespace kiln::codegen
