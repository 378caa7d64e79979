#include "kiln/codegen/module_validate.h"

#include <algorithm>
#include <set>
#include <string>

#include "kiln/codegen/kernel_abi.h"
#include "kiln/codegen/wgsl_types.h"
#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/types.h"

namespace kiln::codegen {
namespace {

std::string_view KindName(ParamKind kind) {
  return kind == ParamKind::kBuffer ? "buffer" : "scalar";
}

// The parameters of the carried source IR agree with the metadata's.
Status CheckSourceIr(const CompiledFunction& f) {
  const KernelMetadata& m = f.metadata;
  auto source = ir::ParseFunction(f.source_ir);
  if (!source.ok()) return DataLoss("the source IR does not parse: ", source.status().message());
  if (source->name() != m.name) {
    return DataLoss("the source IR is of function '", source->name(), "'");
  }
  const std::vector<ir::Param>& params = source->params();
  if (params.size() != m.params.size()) {
    return DataLoss("the metadata lists ", m.params.size(), " parameters, the source IR has ",
                    params.size());
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const ParamInfo& p = m.params[i];
    const bool buffer = params[i].is_buffer();
    const std::string name = buffer ? params[i].buffer().name() : params[i].var().name();
    const ir::DataType dtype = buffer ? params[i].buffer().dtype() : params[i].var().dtype();
    if (name != p.name || buffer != (p.kind == ParamKind::kBuffer) || dtype.ToString() != p.dtype) {
      return DataLoss("parameter ", i, " is ", KindName(p.kind), " '", p.name, "' of type ",
                      p.dtype, " in the metadata but ", buffer ? "buffer" : "scalar", " '", name,
                      "' of type ", dtype, " in the source IR");
    }
    if (buffer) {
      std::vector<std::string> shape;
      for (const ir::Expr& e : params[i].buffer().shape()) shape.push_back(ir::Print(e));
      if (shape != p.shape) {
        return DataLoss("the shape of parameter '", p.name, "' differs from the source IR's");
      }
    }
  }
  return Status::Ok();
}

Status CheckFunction(const CompiledFunction& f, const DeviceLimits* limits) {
  const KernelMetadata& m = f.metadata;
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
    auto dtype = ir::DataType::FromString(p.dtype);
    if (!dtype.ok()) return DataLoss("parameter '", p.name, "' has unknown type '", p.dtype, "'");
    if (p.kind == ParamKind::kBuffer) {
      if (!IsStorableType(*dtype)) {
        return DataLoss("buffer parameter '", p.name, "' has type ", p.dtype,
                        ", which a storage buffer cannot hold");
      }
      if (p.binding != buffers || p.uniform_offset != 0) {
        return DataLoss("buffer parameter '", p.name, "' has binding ", p.binding, ", expected ",
                        buffers, " (buffers are bound in parameter order)");
      }
      f16 |= *dtype == ir::kF16;
      ++buffers;
    } else {
      if (*dtype != ir::kI32 && *dtype != ir::kU32 && *dtype != ir::kF32) {
        return DataLoss("scalar parameter '", p.name, "' has type ", p.dtype,
                        "; expected i32, u32 or f32");
      }
      if (p.uniform_offset != abi::ScalarOffset(scalars) || p.binding != 0 || !p.shape.empty() ||
          p.access != BufferAccess::kRead) {
        return DataLoss("scalar parameter '", p.name, "' is at uniform offset ", p.uniform_offset,
                        ", expected ", abi::ScalarOffset(scalars),
                        " (and has no binding, shape or access)");
      }
      ++scalars;
    }
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
  if (limits != nullptr) {
    const uint64_t invocations = uint64_t{w[0]} * w[1] * w[2];
    if (w[0] > limits->max_workgroup_size_x || w[1] > limits->max_workgroup_size_y ||
        w[2] > limits->max_workgroup_size_z ||
        invocations > limits->max_invocations_per_workgroup) {
      return InvalidArgument("workgroup size (", w[0], ", ", w[1], ", ", w[2],
                             ") exceeds the device's limits (", limits->max_workgroup_size_x, ", ",
                             limits->max_workgroup_size_y, ", ", limits->max_workgroup_size_z, "; ",
                             limits->max_invocations_per_workgroup, " invocations)");
    }
    if (m.workgroup_storage_bytes > limits->max_workgroup_storage_bytes) {
      return InvalidArgument("workgroup storage of ", m.workgroup_storage_bytes,
                             " bytes exceeds the device's maxComputeWorkgroupStorageSize of ",
                             limits->max_workgroup_storage_bytes);
    }
  }
  if (!f.source_ir.empty()) KILN_RETURN_IF_ERROR(CheckSourceIr(f));
  return Status::Ok();
}

}  // namespace

Status ValidateModule(const CompiledModule& module, const DeviceLimits* limits) {
  std::set<std::string> names;
  for (size_t i = 0; i < module.functions.size(); ++i) {
    const std::string& name = module.functions[i].metadata.name;
    if (name.empty()) return DataLoss("invalid module: function ", i, " has no name");
    if (!names.insert(name).second) {
      return DataLoss("invalid module: two functions are named '", name, "'");
    }
    Status s = CheckFunction(module.functions[i], limits);
    if (!s.ok()) {
      return Status(s.code(), StrCat(s.code() == StatusCode::kDataLoss ? "invalid module: " : "",
                                     "function '", name, "': ", s.message()));
    }
  }
  return Status::Ok();
}

}  // namespace kiln::codegen
