#include "kiln/runtime/module.h"

#include <cstring>

#include "kiln/codegen/kernel_abi.h"
#include "kiln/codegen/module_format.h"
#include "kiln/codegen/module_validate.h"
#include "kiln/hal/queue.h"
#include "kiln/interp/interpreter.h"
#include "kiln/ir/parser.h"
#include "kiln/ir/types.h"
#include "kiln/support/file.h"

namespace kiln::runtime {
namespace {

using codegen::ParamKind;

std::string_view ScalarArgType(const Arg& arg) {
  if (std::holds_alternative<int32_t>(arg.scalar)) return "i32";
  if (std::holds_alternative<uint32_t>(arg.scalar)) return "u32";
  if (std::holds_alternative<float>(arg.scalar)) return "f32";
  return "buffer";
}

interp::Value ToValue(const Arg& arg) {
  if (auto* i = std::get_if<int32_t>(&arg.scalar)) return interp::Value::I32(*i);
  if (auto* u = std::get_if<uint32_t>(&arg.scalar)) return interp::Value::U32(*u);
  return interp::Value::F32(std::get<float>(arg.scalar));
}

}  // namespace

StatusOr<uint32_t> ElementBytes(std::string_view dtype) {
  KILN_ASSIGN_OR_RETURN(ir::DataType t, ir::DataType::FromString(dtype));
  if (t.is_bool()) return 4u;  // bool buffers hold 32-bit integers
  return static_cast<uint32_t>(t.StorageBytes());
}

codegen::CompileOptions CompileOptionsFor(const hal::Device& device) {
  codegen::CompileOptions o;
  const hal::Limits& l = device.limits();
  o.codegen.limits.max_invocations_per_workgroup = l.max_compute_invocations_per_workgroup;
  o.codegen.limits.max_workgroup_size_x = l.max_compute_workgroup_size_x;
  o.codegen.limits.max_workgroup_size_y = l.max_compute_workgroup_size_y;
  o.codegen.limits.max_workgroup_size_z = l.max_compute_workgroup_size_z;
  o.codegen.limits.max_workgroup_storage_bytes = l.max_compute_workgroup_storage_size;
  o.lower.verify.max_threads_per_workgroup = l.max_compute_invocations_per_workgroup;
  o.lower.verify.max_workgroup_storage_bytes = l.max_compute_workgroup_storage_size;
  return o;
}

StatusOr<std::unique_ptr<Module>> Module::Load(const std::shared_ptr<hal::Device>& device,
                                               codegen::CompiledModule compiled) {
  const codegen::DeviceLimits limits = CompileOptionsFor(*device).codegen.limits;
  KILN_RETURN_IF_ERROR(codegen::ValidateModule(compiled, &limits));
  auto module = std::unique_ptr<Module>(new Module());
  for (codegen::CompiledFunction& cf : compiled.functions) {
    auto fn = std::unique_ptr<Function>(new Function());
    fn->device_ = device;
    fn->compiled_ = std::move(cf);
    const codegen::KernelMetadata& md = fn->compiled_.metadata;
    const std::string where = StrCat("function '", md.name, "'");

    // Variables for the scalar parameters, by name, so the metadata's
    // expressions parse against them.
    std::vector<ir::Var> vars;
    fn->scalar_vars_.resize(md.params.size());
    fn->shapes_.resize(md.params.size());
    fn->strides_.resize(md.params.size());
    fn->element_bytes_.assign(md.params.size(), 0);
    for (size_t i = 0; i < md.params.size(); ++i) {
      const codegen::ParamInfo& p = md.params[i];
      if (p.kind != ParamKind::kScalar) continue;
      KILN_ASSIGN_OR_RETURN(ir::DataType t, ir::DataType::FromString(p.dtype));
      fn->scalar_vars_[i] = ir::Var(p.name, t);
      vars.push_back(fn->scalar_vars_[i]);
    }
    for (size_t i = 0; i < md.params.size(); ++i) {
      const codegen::ParamInfo& p = md.params[i];
      if (p.kind != ParamKind::kBuffer) continue;
      auto bytes = ElementBytes(p.dtype);
      if (!bytes.ok()) return bytes.status().WithContext(where);
      fn->element_bytes_[i] = *bytes;
      for (const std::string& extent : p.shape) {
        auto e = ir::ParseExpr(extent, vars);
        if (!e.ok()) {
          return DataLoss(where, ": shape '", extent, "' of parameter '", p.name,
                          "' does not parse: ", e.status().message());
        }
        fn->shapes_[i].push_back(*e);
      }
      if (!p.strides.empty() && p.strides.size() != p.shape.size()) {
        return DataLoss(where, ": parameter '", p.name, "' has ", p.strides.size(),
                        " strides for ", p.shape.size(), " dimensions");
      }
      for (const std::string& stride : p.strides) {
        auto e = ir::ParseExpr(stride, vars);
        if (!e.ok()) {
          return DataLoss(where, ": stride '", stride, "' of parameter '", p.name,
                          "' does not parse: ", e.status().message());
        }
        fn->strides_[i].push_back(*e);
      }
    }
    for (auto [text, out] : {std::pair{&md.num_blocks_x, &fn->num_blocks_x_},
                             std::pair{&md.num_blocks_y, &fn->num_blocks_y_}}) {
      auto e = ir::ParseExpr(*text, vars);
      if (!e.ok()) {
        return DataLoss(where, ": launch extent '", *text, "' does not parse: ",
                        e.status().message());
      }
      *out = *e;
    }

    for (const std::string& feature : md.required_features) {
      auto f = hal::ParseFeature(feature);
      if (!f.ok() || !device->HasFeature(*f)) {
        fn->availability_ = Unavailable(where, " needs the '", feature, "' feature, which ",
                                        device->Describe(), " does not offer");
        break;
      }
    }
    for (const codegen::ParamInfo& p : md.params) {
      if (p.kind != ParamKind::kBuffer) continue;
      if (p.binding != fn->bindings_.size()) {
        return DataLoss(where, ": parameter '", p.name, "' has binding ", p.binding, ", expected ",
                        fn->bindings_.size());
      }
      fn->bindings_.push_back(p.access == codegen::BufferAccess::kReadWrite
                                  ? hal::BindingKind::kStorage
                                  : hal::BindingKind::kReadOnlyStorage);
    }
    if (md.uniform_binding != fn->bindings_.size()) {
      return DataLoss(where, ": uniform binding ", md.uniform_binding, ", expected ",
                      fn->bindings_.size());
    }
    fn->bindings_.push_back(hal::BindingKind::kUniform);
    fn->prepare_mutex_ = &module->prepare_mutex_;
    module->index_.emplace(fn->name(), module->functions_.size());
    module->functions_.push_back(std::move(fn));
  }
  return module;
}

StatusOr<std::unique_ptr<Module>> Module::LoadFile(std::shared_ptr<hal::Device> device,
                                                   const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, ReadInputFile(path));
  auto compiled = codegen::DeserializeModule(bytes);
  if (!compiled.ok()) return compiled.status().WithContext(path);
  return Load(device, std::move(*compiled));
}

StatusOr<const Function*> Module::Find(std::string_view name) const {
  auto it = index_.find(name);
  if (it == index_.end()) {
    // Name a few: a module may hold thousands of functions.
    constexpr size_t kListed = 20;
    std::string names;
    for (size_t i = 0; i < functions_.size() && i < kListed; ++i) {
      names += (i ? ", " : "") + functions_[i]->name();
    }
    if (functions_.size() > kListed) names += StrCat(" and ", functions_.size() - kListed, " more");
    return InvalidArgument("the module has no function '", name, "' (it has: ", names, ")");
  }
  const Function* fn = functions_[it->second].get();
  if (fn->availability().ok()) KILN_RETURN_IF_ERROR(fn->Prepare());
  return fn;
}

size_t Module::prepared_count() const {
  size_t n = 0;
  for (const auto& f : functions_) n += f->prepared() ? 1 : 0;
  return n;
}

Status Function::Prepare() const {
  if (!prepared_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(*prepare_mutex_);
    if (!prepared_.load(std::memory_order_relaxed)) {
      prepare_status_ = availability_.ok() ? CreateExecutable() : availability_;
      prepared_.store(true, std::memory_order_release);
    }
  }
  return prepare_status_;
}

Status Function::CreateExecutable() const {
  const codegen::KernelMetadata& md = metadata();
  std::string wgsl = compiled_.wgsl;
  // Naga knows the subgroup builtins but not the directive.
  if (device_->impl().kind() == hal::ImplKind::kWgpu) wgsl = abi::StripSubgroupsEnable(wgsl);
  hal::ExecutableSpec spec{
      md.name, std::move(wgsl), {{md.entry_point, bindings_, md.uniform_block_size}}};
  auto exe = hal::LoadExecutable(*device_, spec);
  if (!exe.ok()) return exe.status().WithContext(StrCat("loading function '", md.name, "'"));
  executable_ = *exe;
  return Status();
}

StatusOr<uint64_t> Function::EvaluateExtent(const ir::Expr& expr, std::span<const Arg> args,
                                            std::string_view what) const {
  std::map<const ir::VarNode*, interp::Value> bindings;
  for (size_t i = 0; i < scalar_vars_.size(); ++i) {
    if (scalar_vars_[i].defined()) bindings[scalar_vars_[i].get()] = ToValue(args[i]);
  }
  auto v = interp::EvaluateScalar(expr, bindings);
  if (!v.ok()) return v.status().WithContext(StrCat("function '", name(), "': ", what));
  const int64_t n = v->AsInt();
  if (n < 0) {
    return InvalidArgument("function '", name(), "': ", what, " is ", n,
                           " for these arguments; it must not be negative");
  }
  return static_cast<uint64_t>(n);
}

StatusOr<uint64_t> Function::BufferElements(size_t param, std::span<const Arg> args) const {
  const std::string& pname = metadata().params[param].name;
  const std::vector<ir::Expr>& shape = shapes_[param];
  const std::vector<ir::Expr>& strides = strides_[param];
  std::vector<uint64_t> extents(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    KILN_ASSIGN_OR_RETURN(extents[d], EvaluateExtent(shape[d], args,
                                                     StrCat("extent ", d, " of parameter '",
                                                            pname, "'")));
  }
  // An empty buffer is touched nowhere, whatever its strides.
  for (uint64_t e : extents) {
    if (e == 0) return uint64_t{0};
  }
  auto overflow = [&]() {
    return InvalidArgument("function '", name(), "': the shape of parameter '", pname,
                           "' has more elements than 64 bits can count for these arguments");
  };
  if (strides.empty()) {
    // Dense row-major: the product of the extents.
    uint64_t elements = 1;
    for (uint64_t e : extents) {
      if (__builtin_mul_overflow(elements, e, &elements)) return overflow();
    }
    return elements;
  }
  // Strided: the furthest element is at sum((extent - 1) * stride).
  uint64_t last = 0;
  for (size_t d = 0; d < strides.size(); ++d) {
    KILN_ASSIGN_OR_RETURN(uint64_t stride, EvaluateExtent(strides[d], args,
                                                          StrCat("stride ", d, " of parameter '",
                                                                 pname, "'")));
    uint64_t reach = 0;
    if (__builtin_mul_overflow(extents[d] - 1, stride, &reach) ||
        __builtin_add_overflow(last, reach, &last)) {
      return overflow();
    }
  }
  if (last == UINT64_MAX) return overflow();
  return last + 1;
}

StatusOr<LaunchPlan> Function::Plan(std::span<const Arg> args) const {
  KILN_RETURN_IF_ERROR(availability_);
  const codegen::KernelMetadata& md = metadata();
  if (args.size() != md.params.size()) {
    return InvalidArgument("function '", md.name, "' takes ", md.params.size(),
                           " arguments, got ", args.size());
  }
  // Kinds and scalar types first: extents are evaluated from the scalars.
  for (size_t i = 0; i < args.size(); ++i) {
    const codegen::ParamInfo& p = md.params[i];
    const bool buffer = p.kind == ParamKind::kBuffer;
    if (buffer != args[i].is_buffer() || (!buffer && p.dtype != ScalarArgType(args[i]))) {
      return InvalidArgument("function '", md.name, "' argument ", i, " ('", p.name,
                             "'): expected ", buffer ? "a buffer" : p.dtype, ", got ",
                             ScalarArgType(args[i]));
    }
    if (buffer && !args[i].buffer) {
      return InvalidArgument("function '", md.name, "' argument ", i, " ('", p.name,
                             "'): no buffer");
    }
  }
  LaunchPlan plan;
  plan.buffer_bytes.assign(md.params.size(), 0);
  for (size_t i = 0; i < args.size(); ++i) {
    if (md.params[i].kind != ParamKind::kBuffer) continue;
    KILN_ASSIGN_OR_RETURN(uint64_t elements, BufferElements(i, args));
    if (__builtin_mul_overflow(elements, uint64_t{element_bytes_[i]}, &plan.buffer_bytes[i])) {
      return InvalidArgument("function '", md.name, "' argument ", i, " ('", md.params[i].name,
                             "'): ", elements, " elements overflow 64 bits of bytes");
    }
    if (args[i].buffer->size() < plan.buffer_bytes[i]) {
      return InvalidArgument("function '", md.name, "' argument ", i, " ('", md.params[i].name,
                             "'): a buffer of ", args[i].buffer->size(), " bytes, but ",
                             elements, " ", md.params[i].dtype, " elements need ",
                             plan.buffer_bytes[i]);
    }
  }
  KILN_ASSIGN_OR_RETURN(plan.num_blocks_x, EvaluateExtent(num_blocks_x_, args, "blockIdx.x extent"));
  KILN_ASSIGN_OR_RETURN(plan.num_blocks_y, EvaluateExtent(num_blocks_y_, args, "blockIdx.y extent"));
  const uint32_t max = device_->limits().max_compute_workgroups_per_dimension;
  if (plan.num_blocks_x > uint64_t(max) * max || plan.num_blocks_x > UINT32_MAX ||
      plan.num_blocks_y > max) {
    return InvalidArgument("function '", md.name, "': a grid of (", plan.num_blocks_x, ", ",
                           plan.num_blocks_y, ") blocks exceeds what the device can dispatch (",
                           max, " workgroups per dimension)");
  }
  abi::Dispatch d = abi::ComputeDispatch(plan.num_blocks_x, plan.num_blocks_y, max);
  plan.groups_x = d.x;
  plan.groups_y = d.y;
  plan.groups_z = d.z;

  uint32_t scalars = 0;
  plan.uniforms.assign(md.uniform_block_size, 0);
  for (size_t i = 0; i < args.size(); ++i) {
    const codegen::ParamInfo& p = md.params[i];
    if (p.kind != ParamKind::kScalar) continue;
    ++scalars;
    if (p.uniform_offset + 4 > plan.uniforms.size()) {
      return DataLoss("function '", md.name, "': scalar '", p.name, "' at offset ",
                      p.uniform_offset, " lies outside the ", plan.uniforms.size(),
                      "-byte uniform block");
    }
    std::visit(
        [&](auto v) {
          if constexpr (!std::is_same_v<decltype(v), std::monostate>) {
            std::memcpy(plan.uniforms.data() + p.uniform_offset, &v, 4);
          }
        },
        args[i].scalar);
  }
  const uint32_t words[2] = {d.x, d.num_blocks_x};
  if (abi::NumBlocksXOffset(scalars) + 4 > plan.uniforms.size()) {
    return DataLoss("function '", md.name, "': the uniform block of ", plan.uniforms.size(),
                    " bytes has no room for the launch words");
  }
  std::memcpy(plan.uniforms.data() + abi::GridDimXOffset(scalars), &words[0], 4);
  std::memcpy(plan.uniforms.data() + abi::NumBlocksXOffset(scalars), &words[1], 4);
  return plan;
}

Status Function::Record(hal::CommandBuffer& cb, std::span<const Arg> args) const {
  KILN_RETURN_IF_ERROR(Prepare());
  KILN_ASSIGN_OR_RETURN(LaunchPlan plan, Plan(args));
  if (plan.groups_x == 0 || plan.groups_y == 0 || plan.groups_z == 0) return Status();
  std::vector<hal::BufferBinding> bindings;
  for (size_t i = 0; i < args.size(); ++i) {
    if (metadata().params[i].kind != ParamKind::kBuffer) continue;
    // Bind what the kernel addresses (at least 4 bytes: bindings are words).
    bindings.push_back({args[i].buffer, 0,
                        std::max<uint64_t>(std::min(plan.buffer_bytes[i], args[i].buffer->size()), 
                                           std::min<uint64_t>(4, args[i].buffer->size()))});
  }
  return cb.Dispatch(executable_, 0, bindings, plan.uniforms, plan.groups_x, plan.groups_y,
                     plan.groups_z)
      .WithContext(StrCat("function '", name(), "'"));
}

Status Function::Call(std::span<const Arg> args) const {
  KILN_ASSIGN_OR_RETURN(auto cb,
                        hal::CommandBuffer::Create(device_, hal::CommandBufferMode::kOneShot,
                                                   {name(), false}));
  KILN_RETURN_IF_ERROR(Record(*cb, args));
  KILN_RETURN_IF_ERROR(cb->End());
  return hal::SubmitAndWait(*device_, *cb);
}

}  // namespace kiln::runtime
