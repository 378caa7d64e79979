#include "kiln/runtime/module.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include "kiln/codegen/kernel_abi.h"
#include "kiln/codegen/module_format.h"
#include "kiln/codegen/module_validate.h"
#include "kiln/hal/queue.h"
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

}  // namespace

TargetLimits TargetLimitsOf(const hal::Device& device) {
  const hal::Limits& l = device.limits();
  TargetLimits t;
  t.max_invocations_per_workgroup = l.max_compute_invocations_per_workgroup;
  t.max_workgroup_size_x = l.max_compute_workgroup_size_x;
  t.max_workgroup_size_y = l.max_compute_workgroup_size_y;
  t.max_workgroup_size_z = l.max_compute_workgroup_size_z;
  t.max_workgroup_storage_bytes = l.max_compute_workgroup_storage_size;
  t.max_storage_buffers_per_stage = l.max_storage_buffers_per_shader_stage;
  t.max_storage_buffer_binding_size = l.max_storage_buffer_binding_size;
  t.min_storage_buffer_offset_alignment = l.min_storage_buffer_offset_alignment;
  t.max_uniform_buffer_binding_size = l.max_uniform_buffer_binding_size;
  return t;
}

StatusOr<std::unique_ptr<LoadedModule>> LoadedModule::Load(
    const std::shared_ptr<hal::Device>& device, codegen::CompiledModule compiled) {
  if (!device) return InvalidArgument("loading a module: no device");
  KILN_RETURN_IF_ERROR(codegen::ValidateModule(compiled));
  const TargetLimits limits = TargetLimitsOf(*device);
  auto module = std::unique_ptr<LoadedModule>(new LoadedModule());
  for (codegen::CompiledFunction& cf : compiled.functions) {
    auto fn = std::unique_ptr<Kernel>(new Kernel());
    fn->device_ = device;
    fn->compiled_ = std::move(cf);
    const codegen::KernelMetadata& md = fn->compiled_.metadata;
    const std::string where = StrCat("function '", md.name, "'");
    fn->element_bytes_.assign(md.params.size(), 0);
    for (size_t i = 0; i < md.params.size(); ++i) {
      if (md.params[i].kind == ParamKind::kBuffer) {
        fn->element_bytes_[i] = codegen::DTypeBufferBytes(md.params[i].dtype);
      }
    }
    // What the device cannot run loads as unavailable, like a missing
    // feature: the rest of the module works.
    const std::string beyond = codegen::FitsLimits(md, limits);
    if (!beyond.empty()) {
      fn->availability_ = Unavailable(where, " needs ", beyond, " on ", device->Describe());
    }
    for (const std::string& feature : md.required_features) {
      if (!fn->availability_.ok()) break;
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

StatusOr<std::unique_ptr<LoadedModule>> LoadedModule::LoadFile(std::shared_ptr<hal::Device> device,
                                                               const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, ReadInputFile(path));
  auto compiled = codegen::DeserializeModule(bytes);
  if (!compiled.ok()) return compiled.status().WithContext(path);
  return Load(device, std::move(*compiled));
}

StatusOr<const Kernel*> LoadedModule::Find(std::string_view name) const {
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
  const Kernel* fn = functions_[it->second].get();
  if (fn->availability().ok()) KILN_RETURN_IF_ERROR(fn->Prepare());
  return fn;
}

size_t LoadedModule::prepared_count() const {
  size_t n = 0;
  for (const auto& f : functions_) n += f->prepared() ? 1 : 0;
  return n;
}

Status Kernel::Prepare() const {
  if (!prepared_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(*prepare_mutex_);
    if (!prepared_.load(std::memory_order_relaxed)) {
      prepare_status_ = availability_.ok() ? CreateExecutable() : availability_;
      prepared_.store(true, std::memory_order_release);
    }
  }
  return prepare_status_;
}

Status Kernel::CreateExecutable() const {
  const codegen::KernelMetadata& md = metadata();
  std::string wgsl = compiled_.wgsl;
  // Naga knows the subgroup builtins but not the directive.
  if (device_->impl().kind() == hal::ImplKind::kWgpu) wgsl = abi::StripSubgroupsEnable(wgsl);
  // Tint's GLSL barrier needs a memory barrier beside it on Mesa (kernel_abi.h).
  const hal::Backend backend = device_->adapter().backend;
  if (device_->impl().kind() == hal::ImplKind::kDawn &&
      (backend == hal::Backend::kOpenGL || backend == hal::Backend::kOpenGLES)) {
    wgsl = abi::AddMemoryBarriersAfterWorkgroupBarriers(wgsl);
  }
  // Each buffer binding holds at least one element of its WGSL array, so
  // WebGPU checks the WGSL's arrays against the metadata's when the pipeline
  // is made, not at a dispatch.
  std::vector<uint64_t> min_sizes(bindings_.size(), 0);
  for (size_t i = 0; i < md.params.size(); ++i) {
    if (md.params[i].kind == ParamKind::kBuffer)
      min_sizes[md.params[i].binding] = MinBindingBytes(i);
  }
  hal::ExecutableSpec spec{
      md.name,
      std::move(wgsl),
      {{md.entry_point, bindings_, md.uniform_block_size, std::move(min_sizes), md.name}},
      md.loops_terminate};
  auto exe = hal::LoadExecutable(*device_, spec);
  if (!exe.ok()) return exe.status().WithContext(StrCat("loading function '", md.name, "'"));
  executable_ = *exe;
  return Status();
}

std::vector<int64_t> Kernel::ScalarValues(std::span<const Arg> args) {
  std::vector<int64_t> values(args.size(), 0);
  for (size_t i = 0; i < args.size(); ++i) {
    if (auto* v = std::get_if<int32_t>(&args[i].scalar)) values[i] = *v;
    if (auto* v = std::get_if<uint32_t>(&args[i].scalar)) values[i] = *v;
  }
  return values;
}

StatusOr<uint64_t> Kernel::EvaluateExtent(const codegen::ExtentExpr& expr,
                                          std::span<const int64_t> scalars,
                                          const std::function<std::string()>& what) const {
  // Messages are built only on failure: this runs for every call.
  auto v = codegen::Evaluate(expr, scalars);
  if (!v.ok()) return v.status().WithContext(StrCat("function '", name(), "': ", what()));
  if (*v < 0) {
    return InvalidArgument("function '", name(), "': ", what(), " `", expr.text, "` is ", *v,
                           " for these arguments; it must not be negative");
  }
  return static_cast<uint64_t>(*v);
}

StatusOr<uint64_t> Kernel::BufferElements(size_t param, std::span<const Arg> args) const {
  if (param >= metadata().params.size() || metadata().params[param].kind != ParamKind::kBuffer ||
      args.size() != metadata().params.size()) {
    return InvalidArgument("function '", name(), "': BufferElements of parameter ", param, " with ",
                           args.size(), " arguments");
  }
  KILN_RETURN_IF_ERROR(CheckArgKinds(args, /*scalars_only=*/true));
  return Elements(param, ScalarValues(args));
}

StatusOr<uint64_t> Kernel::Elements(size_t param, std::span<const int64_t> scalars) const {
  const codegen::ParamInfo& p = metadata().params[param];
  uint64_t inline_extents[8];
  std::vector<uint64_t> more;
  if (p.shape.size() > std::size(inline_extents)) more.resize(p.shape.size());
  uint64_t* extents = more.empty() ? inline_extents : more.data();
  for (size_t d = 0; d < p.shape.size(); ++d) {
    KILN_ASSIGN_OR_RETURN(extents[d], EvaluateExtent(p.shape[d], scalars, [&] {
                            return StrCat("extent ", d, " of parameter '", p.name, "'");
                          }));
  }
  // An empty buffer is touched nowhere, whatever its strides.
  for (size_t d = 0; d < p.shape.size(); ++d) {
    if (extents[d] == 0) return uint64_t{0};
  }
  auto overflow = [&]() {
    return InvalidArgument("function '", name(), "': the shape of parameter '", p.name,
                           "' has more elements than 64 bits can count for these arguments");
  };
  if (p.strides.empty()) {
    // Dense row-major: the product of the extents.
    uint64_t elements = 1;
    for (size_t d = 0; d < p.shape.size(); ++d) {
      if (__builtin_mul_overflow(elements, extents[d], &elements)) return overflow();
    }
    return elements;
  }
  // Strided: the furthest element is at sum((extent - 1) * stride).
  uint64_t last = 0;
  for (size_t d = 0; d < p.strides.size(); ++d) {
    KILN_ASSIGN_OR_RETURN(uint64_t stride, EvaluateExtent(p.strides[d], scalars, [&] {
                            return StrCat("stride ", d, " of parameter '", p.name, "'");
                          }));
    if (stride == 0) {  // (as the verifier refuses a constant one)
      return InvalidArgument("function '", name(), "': stride ", d, " of parameter '", p.name,
                             "' `", p.strides[d].text,
                             "` is 0 for these arguments; strides are positive");
    }
    uint64_t reach = 0;
    if (__builtin_mul_overflow(extents[d] - 1, stride, &reach) ||
        __builtin_add_overflow(last, reach, &last)) {
      return overflow();
    }
  }
  if (last == UINT64_MAX) return overflow();
  return last + 1;
}

Status Kernel::CheckArgKinds(std::span<const Arg> args, bool scalars_only) const {
  const codegen::KernelMetadata& md = metadata();
  if (args.size() != md.params.size()) {
    return InvalidArgument("function '", md.name, "' takes ", md.params.size(), " arguments, got ",
                           args.size());
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const codegen::ParamInfo& p = md.params[i];
    const bool buffer = p.kind == ParamKind::kBuffer;
    if (buffer && scalars_only) continue;
    auto where = [&] {
      return StrCat("function '", md.name, "' argument ", i, " ('", p.name, "')");
    };
    if (!args[i].is_buffer() && args[i].buffer) {
      return InvalidArgument(where(),
                             ": holds both a scalar and a buffer (Arg::Buffer or "
                             "Arg::I32/U32/F32 make one of them)");
    }
    if (args[i].is_buffer() && !args[i].buffer) {
      return InvalidArgument(where(), ": holds neither a buffer nor a scalar",
                             buffer ? "" : StrCat(" (expected ", codegen::DTypeName(p.dtype), ")"));
    }
    const std::string_view expected = buffer ? "a buffer" : codegen::DTypeName(p.dtype);
    if (buffer != args[i].is_buffer() ||
        (!buffer && codegen::DTypeName(p.dtype) != ScalarArgType(args[i]))) {
      return InvalidArgument(where(), ": expected ", expected, ", got ", ScalarArgType(args[i]));
    }
  }
  return Status();
}

StatusOr<LaunchPlan> Kernel::Plan(std::span<const Arg> args) const {
  KILN_RETURN_IF_ERROR(availability_);
  const codegen::KernelMetadata& md = metadata();
  // Kinds and scalar types first: extents are evaluated from the scalars.
  KILN_RETURN_IF_ERROR(CheckArgKinds(args, /*scalars_only=*/false));
  const std::vector<int64_t> scalar_values = ScalarValues(args);
  const hal::Limits& limits = device_->limits();
  LaunchPlan plan;
  plan.buffer_bytes.assign(md.params.size(), 0);
  std::vector<size_t> binding_param;  // the parameter of each binding
  for (size_t i = 0; i < args.size(); ++i) {
    const codegen::ParamInfo& p = md.params[i];
    if (p.kind != ParamKind::kBuffer) continue;
    auto where = [&] {
      return StrCat("function '", md.name, "' argument ", i, " ('", p.name, "')");
    };
    KILN_ASSIGN_OR_RETURN(uint64_t elements, Elements(i, scalar_values));
    if (__builtin_mul_overflow(elements, uint64_t{element_bytes_[i]}, &plan.buffer_bytes[i])) {
      return InvalidArgument(where(), ": ", elements, " elements overflow 64 bits of bytes");
    }
    // The view: inside the buffer, aligned for a storage binding, large
    // enough for what the kernel reaches.
    const Arg& a = args[i];
    const hal::DeviceBuffer& buffer = *a.buffer;
    if (buffer.device() != device_.get()) {
      KILN_RETURN_IF_ERROR(hal::CheckOwnBuffer(*device_, buffer, where() + ": the buffer"));
    }
    if (a.offset > buffer.size()) {
      return InvalidArgument(where(), ": offset ", a.offset, " is past the end of the buffer of ",
                             buffer.size(), " bytes");
    }
    if (a.offset % limits.min_storage_buffer_offset_alignment != 0) {
      return InvalidArgument(where(), ": offset ", a.offset, " is not a multiple of ",
                             limits.min_storage_buffer_offset_alignment,
                             " (the device's minStorageBufferOffsetAlignment)");
    }
    const uint64_t view = a.length == hal::kWholeBuffer ? buffer.size() - a.offset : a.length;
    if (view > buffer.size() - a.offset) {
      return InvalidArgument(where(), ": a view of ", view, " bytes at offset ", a.offset,
                             " does not fit the buffer of ", buffer.size(), " bytes");
    }
    if (view < plan.buffer_bytes[i]) {
      return InvalidArgument(where(), ": a ",
                             a.offset == 0 && a.length == hal::kWholeBuffer ? "buffer" : "view",
                             " of ", view, " bytes, but ", elements, " ",
                             codegen::DTypeName(p.dtype), " elements need ", plan.buffer_bytes[i]);
    }
    if (!(buffer.usage() & WGPUBufferUsage_Storage)) {
      return InvalidArgument(where(), ": the buffer was not created with storage usage");
    }
    // Bind what the kernel reaches, at least a word (bindings are words)
    // and one element of the WGSL array (a vector where the kernel reads
    // the buffer only as aligned vectors).
    uint64_t bound = std::max<uint64_t>(plan.buffer_bytes[i], std::min<uint64_t>(4, view));
    if (bound == 0) return InvalidArgument(where(), ": an empty view");
    if (const uint64_t min = MinBindingBytes(i); bound < min) {
      if (view < min) {
        return InvalidArgument(where(), ": a ",
                               a.offset == 0 && a.length == hal::kWholeBuffer ? "buffer" : "view",
                               " of ", view, " bytes, but the kernel accesses it only as ", p.lanes,
                               "-element vectors, so it is bound ", min,
                               " bytes at a time; give it at least ", min, " bytes");
      }
      bound = min;
    }
    if ((bound + 3) / 4 * 4 > limits.max_storage_buffer_binding_size) {
      return InvalidArgument(where(), ": ", bound,
                             " bytes exceed the device's "
                             "maxStorageBufferBindingSize of ",
                             limits.max_storage_buffer_binding_size);
    }
    plan.bindings.push_back({a.buffer, a.offset, bound});
    binding_param.push_back(i);
  }
  // One buffer bound twice: WebGPU forbids a buffer written by a dispatch
  // from being bound to it read-only as well, and two written views of it
  // may not overlap (the writes would race; Dawn refuses the dispatch, with
  // an error that fails the device's later work).
  for (size_t a = 0; a < plan.bindings.size(); ++a) {
    for (size_t b = a + 1; b < plan.bindings.size(); ++b) {
      const hal::BufferBinding &x = plan.bindings[a], &y = plan.bindings[b];
      if (x.buffer != y.buffer) continue;
      const size_t i = binding_param[a], j = binding_param[b];
      const bool i_written = md.params[i].access == codegen::BufferAccess::kReadWrite;
      const bool j_written = md.params[j].access == codegen::BufferAccess::kReadWrite;
      if (i_written != j_written) {
        const size_t w = i_written ? i : j, r = i_written ? j : i;
        return InvalidArgument("function '", md.name, "': argument ", w, " ('", md.params[w].name,
                               "') is written and argument ", r, " ('", md.params[r].name,
                               "') only read, but they view the same buffer");
      }
      if (i_written && x.offset < y.offset + y.length && y.offset < x.offset + x.length) {
        return InvalidArgument("function '", md.name, "': arguments ", i, " ('", md.params[i].name,
                               "') and ", j, " ('", md.params[j].name,
                               "') are both written, and their views of one buffer overlap "
                               "(bytes ",
                               x.offset, " to ", x.offset + x.length, " and ", y.offset, " to ",
                               y.offset + y.length, ")");
      }
    }
  }
  KILN_ASSIGN_OR_RETURN(plan.num_blocks_x, EvaluateExtent(md.num_blocks_x, scalar_values, [] {
                          return std::string("blockIdx.x extent");
                        }));
  KILN_ASSIGN_OR_RETURN(plan.num_blocks_y, EvaluateExtent(md.num_blocks_y, scalar_values, [] {
                          return std::string("blockIdx.y extent");
                        }));
  const uint32_t max = device_->limits().max_compute_workgroups_per_dimension;
  // An empty grid (either extent 0) dispatches nothing, however large the other.
  const bool empty = plan.num_blocks_x == 0 || plan.num_blocks_y == 0;
  if (!empty && (plan.num_blocks_x > uint64_t(max) * max || plan.num_blocks_x > UINT32_MAX ||
                 plan.num_blocks_y > max)) {
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

Status Kernel::Record(hal::CommandBuffer& cb, std::span<const Arg> args) const {
  if (&cb.device() != device_.get()) {
    return InvalidArgument("function '", name(), "': command buffer '", cb.label(),
                           "' records for another device than the module's (", device_->Describe(),
                           ")");
  }
  KILN_RETURN_IF_ERROR(Prepare());
  KILN_ASSIGN_OR_RETURN(LaunchPlan plan, Plan(args));
  if (plan.groups_x == 0 || plan.groups_y == 0 || plan.groups_z == 0) return Status();
  // Plan checked everything the HAL's dispatch validation would.
  Status s = cb.DispatchPrevalidated(executable_, 0, plan.bindings, plan.uniforms, plan.groups_x,
                                     plan.groups_y, plan.groups_z);
  if (!s.ok()) return s.WithContext(StrCat("function '", name(), "'"));
  return s;
}

Status Kernel::Call(std::span<const Arg> args) const {
  KILN_ASSIGN_OR_RETURN(auto cb, hal::CommandBuffer::Create(
                                     device_, hal::CommandBufferMode::kOneShot, {name(), false}));
  KILN_RETURN_IF_ERROR(Record(*cb, args));
  KILN_RETURN_IF_ERROR(cb->End());
  return hal::SubmitAndWait(*device_, *cb);
}

}  // namespace kiln::runtime
