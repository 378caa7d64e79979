#include "kiln/hal/executable.h"

#include <sstream>

#include "kiln/hal/device.h"
#include "kiln/hal/staging_buffer.h"
#include "kiln/support/file.h"

namespace kiln::hal {

struct PendingExecutable::State {
  Device* device = nullptr;
  std::string cache_key;
  ExecutableRef executable;
  struct Pipeline {
    bool done = false;
    WGPUCreatePipelineAsyncStatus status = WGPUCreatePipelineAsyncStatus_InternalError;
    WGPUComputePipeline pipeline = nullptr;
    std::string message;
    WGPUFuture future = {};
  };
  std::vector<std::unique_ptr<Pipeline>> pipelines;
};

class ExecutableLoader {
 public:
  static StatusOr<PendingExecutable> Start(Device& device, const ExecutableSpec& spec,
                                           std::string cache_key);
  static StatusOr<ExecutableRef> Finish(PendingExecutable::State& state);
};

namespace {

std::string CacheKey(const ExecutableSpec& spec) {
  std::ostringstream key;
  for (const EntryPointLayout& e : spec.entry_points) {
    key << e.name << '(' << e.constants_size << ':';
    for (BindingKind b : e.bindings) key << static_cast<int>(b);
    for (uint64_t m : e.min_binding_sizes) key << ',' << m;
    key << ')';
  }
  key << (spec.loops_terminate ? "T" : "L");
  key << '\n' << spec.wgsl;
  return key.str();
}

// The strings of `spec` that the implementation is handed besides the WGSL.
Status CheckNames(const ExecutableSpec& spec) {
  KILN_RETURN_IF_ERROR(CheckText(spec.label, "an executable's label"));
  for (const EntryPointLayout& e : spec.entry_points) {
    KILN_RETURN_IF_ERROR(
        CheckText(e.name, StrCat("executable '", spec.label, "': an entry point's name")));
  }
  return Status();
}

Status ValidateLayouts(const Device& device, const ExecutableSpec& spec) {
  KILN_RETURN_IF_ERROR(CheckNames(spec));
  if (spec.entry_points.empty()) {
    return InvalidArgument("executable '", spec.label, "' declares no entry points");
  }
  const Limits& limits = device.limits();
  for (const EntryPointLayout& e : spec.entry_points) {
    int uniforms = 0, storage = 0;
    for (BindingKind b : e.bindings) {
      if (b == BindingKind::kUniform)
        ++uniforms;
      else
        ++storage;
    }
    std::string where = StrCat("executable '", spec.label, "' entry point '", e.name, "'");
    if (uniforms > 1) return InvalidArgument(where, ": more than one uniform (constants) binding");
    if (uniforms == 1 && (e.constants_size == 0 || e.constants_size % 16 != 0)) {
      return InvalidArgument(where, ": constants_size ", e.constants_size,
                             " must be a positive multiple of 16");
    }
    if (uniforms == 0 && e.constants_size != 0) {
      return InvalidArgument(where, ": constants_size without a uniform binding");
    }
    if (e.constants_size > limits.max_uniform_buffer_binding_size) {
      return InvalidArgument(where, ": constants_size ", e.constants_size,
                             " exceeds maxUniformBufferBindingSize (",
                             limits.max_uniform_buffer_binding_size, ")");
    }
    if (e.constants_size > device.staging().capacity()) {
      return InvalidArgument(where, ": constants_size ", e.constants_size,
                             " exceeds the device's staging capacity (",
                             device.staging().capacity(), " bytes, DeviceOptions)");
    }
    if (!e.min_binding_sizes.empty() && e.min_binding_sizes.size() != e.bindings.size()) {
      return InvalidArgument(where, ": ", e.min_binding_sizes.size(), " minimum binding sizes for ",
                             e.bindings.size(), " bindings");
    }
    for (size_t i = 0; i < e.min_binding_sizes.size(); ++i) {
      if (e.bindings[i] == BindingKind::kUniform && e.min_binding_sizes[i] != 0) {
        return InvalidArgument(where, ": binding ", i,
                               " (constants) takes no minimum size; its block is constants_size");
      }
    }
    if (static_cast<uint32_t>(storage) > limits.max_storage_buffers_per_shader_stage) {
      return InvalidArgument(where, ": ", storage, " storage buffers exceed the device limit of ",
                             limits.max_storage_buffers_per_shader_stage);
    }
    if (e.bindings.size() > limits.max_bindings_per_bind_group) {
      return InvalidArgument(where, ": ", e.bindings.size(), " bindings exceed the limit of ",
                             limits.max_bindings_per_bind_group);
    }
  }
  return Status();
}

// "line 3:14: error: ..." lines from the compilation info, with the source
// line quoted.
std::string FormatCompilationMessages(const WGPUCompilationInfo* info, std::string_view source) {
  std::vector<std::string> lines;
  std::istringstream in{std::string(source)};
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::string out;
  for (size_t i = 0; info && i < info->messageCount; ++i) {
    const WGPUCompilationMessage& m = info->messages[i];
    if (m.type != WGPUCompilationMessageType_Error) continue;
    out += StrCat("\n  line ", m.lineNum, ":", m.linePos, ": ", FromStringView(m.message));
    if (m.lineNum >= 1 && m.lineNum <= lines.size()) {
      out += StrCat("\n    | ", lines[m.lineNum - 1]);
    }
  }
  return out;
}

// A shader module from `wgsl`; WGSL errors come back with the
// implementation's messages, line and column.
StatusOr<WGPUShaderModule> CreateShaderModule(Device& device, std::string_view label,
                                              const std::string& wgsl,
                                              bool loops_terminate = false) {
  // (wgpu-native has crashed on bytes that are not UTF-8.)
  KILN_RETURN_IF_ERROR(
      CheckText(wgsl, StrCat("the WGSL of '", label, "'"), StatusCode::kCompileError));
  const Procs& p = device.procs();
  WGPUShaderModule module = nullptr;
  WGPUShaderSourceWGSL source = {};
  source.chain.sType = WGPUSType_ShaderSourceWGSL;
  source.code = ToStringView(wgsl);
  WGPUShaderModuleDescriptor desc = {};
  desc.nextInChain = &source.chain;
  desc.label = ToStringView(label);
  Status compiled = device.WithErrorScopes(
      StrCat("compiling the WGSL of '", label, "'"), StatusCode::kCompileError, [&] {
        // wgpu-native's trusted mode: no bounds checks or loop bounding in
        // the shader (Dawn's is set on the device).
        if (device.trusted() && p.DeviceCreateShaderModuleTrusted != nullptr) {
          module = p.DeviceCreateShaderModuleTrusted(device.handle(), &desc, /*checks=*/0);
        } else if (loops_terminate && p.DeviceCreateShaderModuleTrusted != nullptr) {
          // Bounds checks stay (WGPUShaderRuntimeChecks_BoundsChecks).
          module = p.DeviceCreateShaderModuleTrusted(device.handle(), &desc, /*checks=*/1);
        } else {
          module = p.DeviceCreateShaderModule(device.handle(), &desc);
        }
      });
  if (compiled.ok()) return module;
  // The implementation's structured messages carry line and column.
  struct Info {
    bool done = false;
    std::string text;
    const std::string* source;
  } info{false, "", &wgsl};
  WGPUCompilationInfoCallbackInfo cb = {};
  cb.mode = WGPUCallbackMode_AllowProcessEvents;
  cb.callback = [](WGPUCompilationInfoRequestStatus status, const WGPUCompilationInfo* ci,
                   void* ud1, void*) {
    auto* i = static_cast<Info*>(ud1);
    if (status == WGPUCompilationInfoRequestStatus_Success) {
      i->text = FormatCompilationMessages(ci, *i->source);
    }
    i->done = true;
  };
  cb.userdata1 = &info;
  if (module && compiled.code() == StatusCode::kCompileError &&
      device.impl().supports_compilation_info()) {
    WGPUFuture f = p.ShaderModuleGetCompilationInfo(module, cb);
    Status waited = device.WaitFuture(f, info.done, std::chrono::seconds(10), "compilation info");
    if (waited.ok() && !info.text.empty()) {
      compiled = Status(compiled.code(), compiled.message() + "\nWGSL errors:" + info.text);
    }
  }
  if (module) p.ShaderModuleRelease(module);
  return compiled;
}

}  // namespace

StatusOr<PendingExecutable> ExecutableLoader::Start(Device& device, const ExecutableSpec& spec,
                                                    std::string cache_key) {
  KILN_RETURN_IF_ERROR(device.CheckHealthy());
  KILN_RETURN_IF_ERROR(ValidateLayouts(device, spec));
  const Procs& p = device.procs();
  auto exe = std::shared_ptr<Executable>(new Executable());
  exe->impl_ = device.impl_ref();
  exe->device_serial_ = device.serial();
  exe->label_ = spec.label;

  KILN_ASSIGN_OR_RETURN(exe->module_,
                        CreateShaderModule(device, spec.label, spec.wgsl, spec.loops_terminate));

  auto state = std::make_unique<PendingExecutable::State>();
  state->device = &device;
  state->cache_key = std::move(cache_key);
  for (const EntryPointLayout& layout : spec.entry_points) {
    EntryPoint ep;
    ep.layout = layout;
    std::vector<WGPUBindGroupLayoutEntry> entries(layout.bindings.size());
    for (size_t i = 0; i < layout.bindings.size(); ++i) {
      WGPUBindGroupLayoutEntry& e = entries[i];
      e = {};
      e.binding = static_cast<uint32_t>(i);
      e.visibility = WGPUShaderStage_Compute;
      if (i < layout.min_binding_sizes.size())
        e.buffer.minBindingSize = layout.min_binding_sizes[i];
      switch (layout.bindings[i]) {
        case BindingKind::kReadOnlyStorage:
          e.buffer.type = WGPUBufferBindingType_ReadOnlyStorage;
          break;
        case BindingKind::kStorage:
          e.buffer.type = WGPUBufferBindingType_Storage;
          break;
        case BindingKind::kUniform:
          e.buffer.type = WGPUBufferBindingType_Uniform;
          e.buffer.hasDynamicOffset = true;
          // Dispatches bind the whole block: a shader whose constants need
          // more fails to load instead of reading past it.
          e.buffer.minBindingSize = layout.constants_size;
          ep.uniform_binding = static_cast<int>(i);
          break;
      }
    }
    std::string where = StrCat("entry point '", layout.name, "' of '", spec.label, "'");
    WGPUBindGroupLayoutDescriptor bgl = {};
    bgl.entryCount = entries.size();
    bgl.entries = entries.data();
    WGPUPipelineLayoutDescriptor pl = {};
    pl.bindGroupLayoutCount = 1;
    Status layouts = device.WithErrorScopes(
        StrCat("creating the layouts of ", where), StatusCode::kInvalidArgument, [&] {
          ep.bind_group_layout = p.DeviceCreateBindGroupLayout(device.handle(), &bgl);
          pl.bindGroupLayouts = &ep.bind_group_layout;
          ep.pipeline_layout = p.DeviceCreatePipelineLayout(device.handle(), &pl);
        });
    exe->entry_points_.push_back(ep);  // released with `exe`, also on failure
    KILN_RETURN_IF_ERROR(layouts);

    auto pending = std::make_unique<PendingExecutable::State::Pipeline>();
    WGPUComputePipelineDescriptor cp = {};
    cp.label = ToStringView(layout.name);
    cp.layout = ep.pipeline_layout;
    cp.compute.module = exe->module_;
    cp.compute.entryPoint = ToStringView(layout.name);
    WGPUCreateComputePipelineAsyncCallbackInfo cb = {};
    cb.mode = WGPUCallbackMode_AllowProcessEvents;
    cb.callback = [](WGPUCreatePipelineAsyncStatus status, WGPUComputePipeline pipeline,
                     WGPUStringView message, void* ud1, void*) {
      auto* r = static_cast<PendingExecutable::State::Pipeline*>(ud1);
      r->status = status;
      r->pipeline = pipeline;
      r->message = FromStringView(message);
      r->done = true;
    };
    cb.userdata1 = pending.get();
    if (device.impl().supports_async_pipelines()) {
      pending->future = p.DeviceCreateComputePipelineAsync(device.handle(), &cp, cb);
    } else {
      Status s = device.WithErrorScopes(
          StrCat("creating the pipeline of ", where), StatusCode::kCompileError,
          [&] { pending->pipeline = p.DeviceCreateComputePipeline(device.handle(), &cp); });
      if (!s.ok()) {
        if (pending->pipeline) p.ComputePipelineRelease(pending->pipeline);
        return s;
      }
      pending->status = WGPUCreatePipelineAsyncStatus_Success;
      pending->done = true;
    }
    state->pipelines.push_back(std::move(pending));
  }
  state->executable = std::move(exe);
  return PendingExecutable(std::move(state));
}

StatusOr<ExecutableRef> ExecutableLoader::Finish(PendingExecutable::State& state) {
  Device& device = *state.device;
  Status first;
  for (size_t i = 0; i < state.pipelines.size(); ++i) {
    auto& pending = *state.pipelines[i];
    EntryPoint& ep = state.executable->entry_points_[i];
    Status s = pending.done ? Status()
                            : device.WaitFuture(pending.future, pending.done, kInfinite,
                                                "creating a pipeline");
    if (s.ok() && pending.status == WGPUCreatePipelineAsyncStatus_Success && pending.pipeline) {
      ep.pipeline = pending.pipeline;
      continue;
    }
    if (pending.pipeline) device.procs().ComputePipelineRelease(pending.pipeline);
    if (first.ok()) {
      first = s.ok() ? Status(pending.status == WGPUCreatePipelineAsyncStatus_ValidationError
                                  ? StatusCode::kCompileError
                                  : StatusCode::kInternal,
                              StrCat("creating the pipeline of entry point '", ep.layout.name,
                                     "' of '", state.executable->label(),
                                     "': ", device.impl().name(), ": ", pending.message))
                     : s;
    }
  }
  state.pipelines.clear();
  if (!first.ok()) return first;
  KILN_RETURN_IF_ERROR(device.CheckHealthy());
  if (!state.cache_key.empty()) device.executable_cache().Insert(state.cache_key, state.executable);
  return state.executable;
}

PendingExecutable::PendingExecutable(std::unique_ptr<State> state) : state_(std::move(state)) {}
PendingExecutable::PendingExecutable(PendingExecutable&&) noexcept = default;
PendingExecutable& PendingExecutable::operator=(PendingExecutable&&) noexcept = default;
PendingExecutable::~PendingExecutable() {
  // Pipelines still compiling must finish before their callbacks' storage
  // goes away.
  if (state_ && !state_->pipelines.empty()) (void)ExecutableLoader::Finish(*state_);
}

StatusOr<ExecutableRef> PendingExecutable::Wait() {
  if (!state_) return FailedPrecondition("PendingExecutable::Wait called twice");
  auto result = ExecutableLoader::Finish(*state_);
  state_.reset();
  return result;
}

StatusOr<PendingExecutable> LoadExecutableAsync(Device& device, const ExecutableSpec& spec) {
  return ExecutableLoader::Start(device, spec, CacheKey(spec));
}

Status CheckWgsl(Device& device, std::string_view label, const std::string& wgsl) {
  KILN_RETURN_IF_ERROR(device.CheckHealthy());
  KILN_RETURN_IF_ERROR(CheckText(label, "a shader's label"));
  KILN_ASSIGN_OR_RETURN(WGPUShaderModule module, CreateShaderModule(device, label, wgsl));
  device.procs().ShaderModuleRelease(module);
  return Status();
}

StatusOr<ExecutableRef> LoadExecutable(Device& device, const ExecutableSpec& spec) {
  // A lost or destroyed device loads nothing, not even what it has cached.
  KILN_RETURN_IF_ERROR(device.CheckHealthy());
  KILN_RETURN_IF_ERROR(CheckNames(spec));  // (also where the cache holds the executable)
  std::string key = CacheKey(spec);
  if (ExecutableRef cached = device.executable_cache().Find(key)) return cached;
  KILN_ASSIGN_OR_RETURN(PendingExecutable pending, ExecutableLoader::Start(device, spec, key));
  return pending.Wait();
}

Executable::~Executable() {
  const Procs& p = impl_->procs();
  for (EntryPoint& ep : entry_points_) {
    if (ep.pipeline) p.ComputePipelineRelease(ep.pipeline);
    if (ep.pipeline_layout) p.PipelineLayoutRelease(ep.pipeline_layout);
    if (ep.bind_group_layout) p.BindGroupLayoutRelease(ep.bind_group_layout);
  }
  if (module_) p.ShaderModuleRelease(module_);
}

bool Executable::BelongsTo(const Device& device) const {
  return device_serial_ == device.serial();
}

StatusOr<uint32_t> Executable::FindEntryPoint(std::string_view name) const {
  for (size_t i = 0; i < entry_points_.size(); ++i) {
    if (entry_points_[i].layout.name == name) return static_cast<uint32_t>(i);
  }
  return InvalidArgument("executable '", label_, "' has no entry point '", name, "'");
}

ExecutableRef ExecutableCache::Find(const std::string& key) {
  auto it = map_.find(key);
  if (it == map_.end()) {
    stats_.misses++;
    return nullptr;
  }
  stats_.hits++;
  return it->second;
}

void ExecutableCache::Insert(const std::string& key, ExecutableRef executable) {
  map_[key] = std::move(executable);
  stats_.size = map_.size();
}

}  // namespace kiln::hal
