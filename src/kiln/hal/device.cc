#include "kiln/hal/device.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "kiln/hal/bind_group_cache.h"
#include "kiln/hal/buffer.h"
#include "kiln/hal/builtins.h"
#include "kiln/hal/executable.h"
#include "kiln/hal/queue.h"
#include "kiln/hal/staging_buffer.h"
#include "kiln/support/file.h"
#include "kiln/support/log.h"

namespace kiln::hal {
namespace {

// WGPULimits as the implementation writes it. The pinned Dawn build's
// WGPULimits has four more trailing u32 fields than the header kiln compiles
// against, so every WGPULimits kiln hands to an implementation has room for
// them (set to "undefined", which asks for the default).
struct LimitsStorage {
  WGPULimits limits;
  uint32_t trailing[16];
  LimitsStorage() {
    std::memset(this, 0, sizeof(*this));
    std::fill(std::begin(trailing), std::end(trailing), WGPU_LIMIT_U32_UNDEFINED);
  }
};

Limits ToLimits(const WGPULimits& l) {
  Limits r;
  r.max_bind_groups = l.maxBindGroups;
  r.max_bindings_per_bind_group = l.maxBindingsPerBindGroup;
  r.max_dynamic_uniform_buffers_per_pipeline_layout = l.maxDynamicUniformBuffersPerPipelineLayout;
  r.max_storage_buffers_per_shader_stage = l.maxStorageBuffersPerShaderStage;
  r.max_uniform_buffers_per_shader_stage = l.maxUniformBuffersPerShaderStage;
  r.max_uniform_buffer_binding_size = l.maxUniformBufferBindingSize;
  r.max_storage_buffer_binding_size = l.maxStorageBufferBindingSize;
  r.min_uniform_buffer_offset_alignment = l.minUniformBufferOffsetAlignment;
  r.min_storage_buffer_offset_alignment = l.minStorageBufferOffsetAlignment;
  r.max_buffer_size = l.maxBufferSize;
  r.max_compute_workgroup_storage_size = l.maxComputeWorkgroupStorageSize;
  r.max_compute_invocations_per_workgroup = l.maxComputeInvocationsPerWorkgroup;
  r.max_compute_workgroup_size_x = l.maxComputeWorkgroupSizeX;
  r.max_compute_workgroup_size_y = l.maxComputeWorkgroupSizeY;
  r.max_compute_workgroup_size_z = l.maxComputeWorkgroupSizeZ;
  r.max_compute_workgroups_per_dimension = l.maxComputeWorkgroupsPerDimension;
  return r;
}

std::string_view AdapterTypeName(WGPUAdapterType type) {
  switch (type) {
    case WGPUAdapterType_DiscreteGPU: return "discrete-gpu";
    case WGPUAdapterType_IntegratedGPU: return "integrated-gpu";
    case WGPUAdapterType_CPU: return "cpu";
    default: return "unknown";
  }
}

std::string_view ErrorTypeName(WGPUErrorType type) {
  switch (type) {
    case WGPUErrorType_Validation: return "validation error";
    case WGPUErrorType_OutOfMemory: return "out of memory";
    case WGPUErrorType_Internal: return "internal error";
    default: return "error";
  }
}

StatusCode ErrorTypeCode(WGPUErrorType type, StatusCode validation_code) {
  switch (type) {
    case WGPUErrorType_Validation: return validation_code;
    case WGPUErrorType_OutOfMemory: return StatusCode::kOutOfMemory;
    default: return StatusCode::kInternal;
  }
}

StatusOr<WGPUInstance> CreateInstanceNow(const Implementation& impl) {
  WGPUInstanceDescriptor desc = {};
  WGPUInstanceFeatureName timed_wait = WGPUInstanceFeatureName_TimedWaitAny;
  if (impl.supports_timed_wait_any()) {
    desc.requiredFeatureCount = 1;
    desc.requiredFeatures = &timed_wait;
  }
  WGPUInstance instance = impl.procs().CreateInstance(&desc);
  if (!instance) return Unavailable(impl.name(), " (", impl.path(), "): wgpuCreateInstance failed");
  return instance;
}

// Dawn prints its adapter-discovery diagnostics ("Warning: Vulkan ...
// required.") to stderr; they go through kiln's log (--verbose, $KILN_LOG).
StatusOr<WGPUInstance> CreateInstance(const Implementation& impl) {
  StatusOr<WGPUInstance> instance = Internal("unreached");
  RouteStderrToLog(impl.name(), [&] { instance = CreateInstanceNow(impl); });
  return instance;
}

// Waits on a future with no device yet (adapter and device requests).
Status WaitInstanceFuture(const Implementation& impl, WGPUInstance instance, WGPUFuture future,
                          const bool& done, std::string_view what) {
  if (impl.supports_timed_wait_any()) {
    WGPUFutureWaitInfo info = {future, false};
    WGPUWaitStatus s = impl.procs().InstanceWaitAny(instance, 1, &info, UINT64_MAX);
    if (s != WGPUWaitStatus_Success) return Internal(what, ": wgpuInstanceWaitAny failed (", s, ")");
    return Status();
  }
  auto deadline = Clock::now() + std::chrono::seconds(60);
  while (!done) {
    impl.procs().InstanceProcessEvents(instance);
    if (done) break;
    if (Clock::now() > deadline) return DeadlineExceeded(what, ": no answer in 60 s");
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return Status();
}

struct AdapterRequest {
  bool done = false;
  WGPURequestAdapterStatus status = WGPURequestAdapterStatus_Error;
  WGPUAdapter adapter = nullptr;
  std::string message;
};

void EnsureHeadlessGl(Backend backend) {
  if (backend != Backend::kOpenGL && backend != Backend::kOpenGLES) return;
  // Mesa's EGL needs a platform without a display server; this must be set
  // before the implementation first touches EGL.
  setenv("EGL_PLATFORM", "surfaceless", /*overwrite=*/0);
  // Dawn's OpenGL backend closes libEGL when its adapter goes away, which
  // unmaps Mesa while llvmpipe's worker threads may still be running: the
  // process then crashed now and then (SIGSEGV in unmapped code, seen at
  // exit). Holding libEGL open for the life of the process, never to be
  // unloaded, keeps Mesa mapped.
  static void* const egl = dlopen("libEGL.so.1", RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE);
  (void)egl;
}

// Dawn's chained struct of toggles (not in the standard header), with the
// sType value of the pinned Dawn build.
struct DawnTogglesDescriptor {
  WGPUChainedStruct chain;
  size_t enabledToggleCount;
  const char* const* enabledToggles;
  size_t disabledToggleCount;
  const char* const* disabledToggles;
};
constexpr uint32_t kDawnTogglesDescriptorSType = 327690;

StatusOr<WGPUAdapter> RequestAdapterNow(const Implementation& impl, WGPUInstance instance,
                                        Backend backend, FeatureLevel level, PowerPreference power,
                                        bool trusted);

// Adapter discovery, its diagnostics routed like CreateInstance's.
StatusOr<WGPUAdapter> RequestAdapter(const Implementation& impl, WGPUInstance instance,
                                     Backend backend, FeatureLevel level, PowerPreference power,
                                     bool trusted = false) {
  StatusOr<WGPUAdapter> adapter = Internal("unreached");
  RouteStderrToLog(impl.name(), [&] {
    adapter = RequestAdapterNow(impl, instance, backend, level, power, trusted);
  });
  return adapter;
}

StatusOr<WGPUAdapter> RequestAdapterNow(const Implementation& impl, WGPUInstance instance,
                                        Backend backend, FeatureLevel level, PowerPreference power,
                                        bool trusted) {
  EnsureHeadlessGl(backend);
  WGPURequestAdapterOptions options = {};
  // Dawn grants the toggles of trusted mode only to an adapter requested
  // with unsafe APIs allowed.
  DawnTogglesDescriptor toggles = {};
  const char* unsafe[] = {"allow_unsafe_apis"};
  if (trusted && impl.kind() == ImplKind::kDawn) {
    toggles.chain.sType = static_cast<WGPUSType>(kDawnTogglesDescriptorSType);
    toggles.enabledToggleCount = 1;
    toggles.enabledToggles = unsafe;
    options.nextInChain = &toggles.chain;
  }
  options.featureLevel = level == FeatureLevel::kCompatibility ? WGPUFeatureLevel_Compatibility
                                                               : WGPUFeatureLevel_Core;
  options.powerPreference = power == PowerPreference::kLowPower ? WGPUPowerPreference_LowPower
                            : power == PowerPreference::kHighPerformance
                                ? WGPUPowerPreference_HighPerformance
                                : WGPUPowerPreference_Undefined;
  options.backendType = static_cast<WGPUBackendType>(impl.NativeBackend(backend));
  AdapterRequest req;
  WGPURequestAdapterCallbackInfo cb = {};
  cb.mode = WGPUCallbackMode_AllowProcessEvents;
  cb.callback = [](WGPURequestAdapterStatus status, WGPUAdapter adapter, WGPUStringView message,
                   void* ud1, void*) {
    auto* r = static_cast<AdapterRequest*>(ud1);
    r->status = status;
    r->adapter = adapter;
    r->message = FromStringView(message);
    r->done = true;
  };
  cb.userdata1 = &req;
  WGPUFuture f = impl.procs().InstanceRequestAdapter(instance, &options, cb);
  KILN_RETURN_IF_ERROR(WaitInstanceFuture(impl, instance, f, req.done, "requesting an adapter"));
  if (req.status != WGPURequestAdapterStatus_Success || !req.adapter) {
    return Unavailable(impl.name(), " offers no ", BackendName(backend), " adapter at the ",
                       FeatureLevelName(level), " feature level",
                       req.message.empty() ? "" : ": ", req.message);
  }
  return req.adapter;
}

AdapterReport ReadAdapterReport(const Implementation& impl, WGPUAdapter adapter,
                                FeatureLevel level) {
  const Procs& p = impl.procs();
  AdapterReport r;
  r.impl = impl.kind();
  r.library = impl.path();
  r.feature_level = level;
  WGPUAdapterInfo info = {};
  if (p.AdapterGetInfo(adapter, &info) == WGPUStatus_Success) {
    r.vendor = FromStringView(info.vendor);
    r.architecture = FromStringView(info.architecture);
    r.device = FromStringView(info.device);
    r.description = FromStringView(info.description);
    r.backend = impl.BackendFromNative(info.backendType);
    r.adapter_type = AdapterTypeName(info.adapterType);
    r.vendor_id = info.vendorID;
    r.device_id = info.deviceID;
    r.subgroup_min_size = info.subgroupMinSize;
    r.subgroup_max_size = info.subgroupMaxSize;
    p.AdapterInfoFreeMembers(info);
  }
  WGPUSupportedFeatures features = {};
  p.AdapterGetFeatures(adapter, &features);
  for (size_t i = 0; i < features.featureCount; ++i) {
    r.features.push_back(impl.NativeFeatureName(features.features[i]));
  }
  p.SupportedFeaturesFreeMembers(features);
  std::sort(r.features.begin(), r.features.end());
  LimitsStorage limits;
  if (p.AdapterGetLimits(adapter, &limits.limits) == WGPUStatus_Success) {
    r.limits = ToLimits(limits.limits);
  }
  return r;
}



struct Attempt {
  Backend backend;
  FeatureLevel level;
};

// The (backend, feature level) pairs to try, in order, for the options.
std::vector<Attempt> AttemptsFor(Backend backend, FeatureLevel level) {
  auto level_for = [&](Backend b) {
    if (level != FeatureLevel::kAuto) return level;
    return (b == Backend::kOpenGL || b == Backend::kOpenGLES) ? FeatureLevel::kCompatibility
                                                              : FeatureLevel::kCore;
  };
  if (backend != Backend::kDefault) return {{backend, level_for(backend)}};
  return {{Backend::kDefault, level == FeatureLevel::kAuto ? FeatureLevel::kCore : level},
          {Backend::kOpenGL, level_for(Backend::kOpenGL)},
          {Backend::kOpenGLES, level_for(Backend::kOpenGLES)}};
}

std::vector<ImplKind> ImplOrder(const DeviceOptions& options, Status* error) {
  if (options.impl) return {*options.impl};
  if (const char* env = std::getenv("KILN_IMPL"); env && *env) {
    auto kind = ParseImplKind(env);
    if (!kind.ok()) {
      *error = kind.status().WithContext("$KILN_IMPL");
      return {};
    }
    return {*kind};
  }
  return {ImplKind::kDawn, ImplKind::kWgpu};
}

}  // namespace

std::string FromStringView(WGPUStringView s) {
  if (!s.data) return "";
  if (s.length == WGPU_STRLEN) return std::string(s.data);
  return std::string(s.data, s.length);
}

std::string_view FeatureLevelName(FeatureLevel level) {
  switch (level) {
    case FeatureLevel::kAuto: return "auto";
    case FeatureLevel::kCore: return "core";
    case FeatureLevel::kCompatibility: return "compatibility";
  }
  return "auto";
}

StatusOr<FeatureLevel> ParseFeatureLevel(std::string_view name) {
  if (name == "auto") return FeatureLevel::kAuto;
  if (name == "core") return FeatureLevel::kCore;
  if (name == "compatibility" || name == "compat") return FeatureLevel::kCompatibility;
  return InvalidArgument("unknown feature level '", name, "': expected core or compatibility");
}

StatusOr<std::shared_ptr<Device>> Device::Create(const DeviceOptions& options_in) {
  DeviceOptions options = options_in;
  if (options.backend == Backend::kDefault) {
    if (const char* env = std::getenv("KILN_BACKEND"); env && *env) {
      auto backend = ParseBackend(env);
      if (!backend.ok()) return backend.status().WithContext("$KILN_BACKEND");
      options.backend = *backend;
    }
  }
  if (options.backend == Backend::kNull) {
    return InvalidArgument(
        "backend 'null' runs no work (it completes every dispatch without computing anything, "
        "so every result would be garbage): kiln makes no device on it");
  }
  if (!options.trusted.has_value()) {
    const char* env = std::getenv("KILN_TRUSTED");
    const std::string value = env ? env : "";
    if (value != "" && value != "0" && value != "1") {
      return InvalidArgument("$KILN_TRUSTED is '", value, "'; expected 1 (trusted mode) or 0");
    }
    options.trusted = value == "1";
  }
  // $KILN_BUFFER_POOL_MB fixes the capacity of the pool of freed buffers
  // where the options leave it automatic.
  if (const char* env = std::getenv("KILN_BUFFER_POOL_MB");
      env && *env && !options.buffer_pool_capacity) {
    const std::string_view text(env);
    uint64_t mib = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), mib);
    constexpr uint64_t kMostMib = uint64_t{1} << 24;  // 16 TiB
    if (error != std::errc() || end != text.data() + text.size() || mib > kMostMib) {
      return InvalidArgument("$KILN_BUFFER_POOL_MB is '", text,
                             "'; expected a whole number of MiB from 0 to ", kMostMib);
    }
    options.buffer_pool_capacity = mib << 20;
  }
  // The staging buffer holds any kernel's constants block: at least 4 KiB
  // (StagingBuffer::max_block_size), and a multiple of 256 bytes, the
  // largest uniform offset alignment WebGPU allows.
  if (options.staging_capacity < 4096 || options.staging_capacity % 256 != 0) {
    return InvalidArgument("DeviceOptions::staging_capacity is ", options.staging_capacity,
                           " bytes; expected a multiple of 256, at least 4096");
  }
  if (options.copy_piece_bytes < 4 || options.copy_piece_bytes % 4 != 0) {
    return InvalidArgument("DeviceOptions::copy_piece_bytes is ", options.copy_piece_bytes,
                           "; expected a multiple of 4, at least 4");
  }
  Status order_error;
  std::vector<ImplKind> order = ImplOrder(options, &order_error);
  KILN_RETURN_IF_ERROR(order_error);
  std::string errors;
  for (ImplKind kind : order) {
    auto impl = Implementation::LoadDefault(kind);
    if (!impl.ok()) {
      // A library the environment names but kiln refuses is an error, not a
      // reason to try the other implementation.
      if (impl.status().code() == StatusCode::kInvalidArgument) return impl.status();
      errors += "\n  " + impl.status().message();
      continue;
    }
    std::shared_ptr<Device> device(new Device());
    Status s = device->Initialize(*impl, options);
    if (s.ok()) return device;
    // Try the next implementation; report every failure if none works.
    errors += "\n  " + s.message();
  }
  return Unavailable("no WebGPU device could be created:", errors);
}

Status Device::Initialize(std::shared_ptr<Implementation> impl, const DeviceOptions& options) {
  impl_ = std::move(impl);
  const Procs& p = procs();
  KILN_ASSIGN_OR_RETURN(instance_, CreateInstance(*impl_));

  std::string errors;
  FeatureLevel level = FeatureLevel::kCore;
  for (const Attempt& a : AttemptsFor(options.backend, options.feature_level)) {
    auto adapter = RequestAdapter(*impl_, instance_, a.backend, a.level, options.power_preference,
                                  options.trusted.value_or(false));
    if (adapter.ok()) {
      // Dawn's Null backend runs nothing; it is only taken when asked for.
      WGPUAdapterInfo info = {};
      Backend got = Backend::kDefault;
      if (p.AdapterGetInfo(*adapter, &info) == WGPUStatus_Success) {
        got = impl_->BackendFromNative(info.backendType);
        p.AdapterInfoFreeMembers(info);
      }
      if (got == Backend::kNull) {
        p.AdapterRelease(*adapter);
        errors += (errors.empty() ? "" : "; ") + std::string("only the null backend by default");
        continue;
      }
      // An implementation may answer with another backend than the one
      // asked for (wgpu-native's one GL back end is desktop OpenGL where
      // the driver has it): the device would not be the one named.
      if (a.backend != Backend::kDefault && got != Backend::kDefault && got != a.backend) {
        p.AdapterRelease(*adapter);
        errors += (errors.empty() ? "" : "; ") +
                  StrCat("asked for the ", BackendName(a.backend), " backend, ", impl_->name(),
                         " offers ", BackendName(got), " instead (ask for backend '",
                         BackendName(got), "')");
        continue;
      }
      adapter_handle_ = *adapter;
      level = a.level;
      break;
    }
    errors += (errors.empty() ? "" : "; ") + adapter.status().message();
  }
  if (!adapter_handle_) return Unavailable(errors);
  adapter_ = ReadAdapterReport(*impl_, adapter_handle_, level);

  // Features: the required ones must be offered; optional ones when offered.
  std::vector<WGPUFeatureName> requested;
  auto adapter_has = [&](Feature f) {
    auto native = impl_->NativeFeature(f);
    return native && std::find(adapter_.features.begin(), adapter_.features.end(),
                               std::string(FeatureName(f))) != adapter_.features.end();
  };
  for (Feature f : options.required_features) {
    if (!adapter_has(f)) {
      return Unavailable(impl_->name(), " adapter '", adapter_.description, "' (",
                         BackendName(adapter_.backend), ") lacks required feature '",
                         FeatureName(f), "'");
    }
    requested.push_back(static_cast<WGPUFeatureName>(*impl_->NativeFeature(f)));
  }
  if (options.enable_optional_features) {
    for (Feature f : {Feature::kShaderF16, Feature::kSubgroups, Feature::kTimestampQuery}) {
      if (adapter_has(f) && std::find(options.required_features.begin(),
                                      options.required_features.end(),
                                      f) == options.required_features.end()) {
        requested.push_back(static_cast<WGPUFeatureName>(*impl_->NativeFeature(f)));
      }
    }
  }

  // Limits: ask for everything the adapter offers, so kernels get the
  // adapter's workgroup sizes and storage rather than the low defaults.
  LimitsStorage required;
  if (p.AdapterGetLimits(adapter_handle_, &required.limits) != WGPUStatus_Success) {
    return Internal(impl_->name(), ": wgpuAdapterGetLimits failed");
  }
  required.limits.nextInChain = nullptr;

  struct DeviceRequest {
    bool done = false;
    WGPURequestDeviceStatus status = WGPURequestDeviceStatus_Error;
    WGPUDevice device = nullptr;
    std::string message;
  } req;
  WGPUDeviceDescriptor desc = {};
  desc.label = ToStringView("kiln");
  // Dawn rounds timestamps down to 2^16 ns unless told otherwise, which
  // hides every dispatch shorter than that from profiling.
  DawnTogglesDescriptor toggles = {};
  const char* disabled_toggles[] = {"timestamp_quantization"};
  // Trusted mode: no robustness transform, no workgroup zero-initialisation.
  const char* trusted_toggles[] = {"disable_robustness", "disable_workgroup_init"};
  trusted_ = options.trusted.value_or(false);
  copy_piece_bytes_ = options.copy_piece_bytes;
  if (impl_->kind() == ImplKind::kDawn) {
    toggles.chain.sType = static_cast<WGPUSType>(kDawnTogglesDescriptorSType);
    toggles.disabledToggleCount = 1;
    toggles.disabledToggles = disabled_toggles;
    if (trusted_) {
      toggles.enabledToggleCount = 2;
      toggles.enabledToggles = trusted_toggles;
    }
    desc.nextInChain = &toggles.chain;
  }
  desc.requiredFeatureCount = requested.size();
  desc.requiredFeatures = requested.data();
  desc.requiredLimits = &required.limits;
  desc.deviceLostCallbackInfo.mode = WGPUCallbackMode_AllowSpontaneous;
  desc.deviceLostCallbackInfo.callback = &Device::OnDeviceLost;
  desc.deviceLostCallbackInfo.userdata1 = this;
  desc.uncapturedErrorCallbackInfo.callback = &Device::OnUncapturedError;
  desc.uncapturedErrorCallbackInfo.userdata1 = this;
  WGPURequestDeviceCallbackInfo cb = {};
  cb.mode = WGPUCallbackMode_AllowProcessEvents;
  cb.callback = [](WGPURequestDeviceStatus status, WGPUDevice device, WGPUStringView message,
                   void* ud1, void*) {
    auto* r = static_cast<DeviceRequest*>(ud1);
    r->status = status;
    r->device = device;
    r->message = FromStringView(message);
    r->done = true;
  };
  cb.userdata1 = &req;
  WGPUFuture f = p.AdapterRequestDevice(adapter_handle_, &desc, cb);
  KILN_RETURN_IF_ERROR(WaitInstanceFuture(*impl_, instance_, f, req.done, "requesting a device"));
  if (req.status != WGPURequestDeviceStatus_Success || !req.device) {
    return Unavailable(impl_->name(), ": device creation on '", adapter_.description,
                       "' failed: ", req.message);
  }
  device_ = req.device;
  queue_ = p.DeviceGetQueue(device_);

  LimitsStorage got;
  if (p.DeviceGetLimits(device_, &got.limits) != WGPUStatus_Success) {
    return Internal(impl_->name(), ": wgpuDeviceGetLimits failed");
  }
  limits_ = ToLimits(got.limits);
  features_.assign(kFeatureCount, false);
  for (int i = 0; i < kFeatureCount; ++i) {
    auto native = impl_->NativeFeature(static_cast<Feature>(i));
    features_[i] = native && p.DeviceHasFeature(device_, static_cast<WGPUFeatureName>(*native));
  }

  allocator_ = std::make_unique<BufferAllocator>(this, options.buffer_pool_capacity,
                                                 options.buffer_pool_floor);
  bind_group_cache_ = std::make_unique<BindGroupCache>(this, options.bind_group_cache_capacity);
  executable_cache_ = std::make_unique<ExecutableCache>();
  KILN_ASSIGN_OR_RETURN(staging_, StagingBuffer::Create(this, options.staging_capacity));
  builtins_ = std::make_unique<Builtins>();
  return Status();
}

Device::Device() {
  static std::atomic<uint64_t> next{1};
  serial_ = next.fetch_add(1, std::memory_order_relaxed);
}

Device::~Device() {
  destroying_ = true;
  builtins_.reset();
  staging_.reset();
  executable_cache_.reset();
  allocator_.reset();  // evicts its buffers' bind groups on the way out
  bind_group_cache_.reset();
  const Procs& p = procs();
  if (queue_) p.QueueRelease(queue_);
  if (device_) {
    if (!lost_) p.DeviceDestroy(device_);
    p.DeviceRelease(device_);
  }
  if (adapter_handle_) p.AdapterRelease(adapter_handle_);
  if (instance_) {
    p.InstanceProcessEvents(instance_);
    p.InstanceRelease(instance_);
  }
}

bool Device::HasFeature(Feature feature) const { return features_[static_cast<int>(feature)]; }

std::string Device::Describe() const {
  return StrCat(impl_->name(), " ", BackendName(adapter_.backend), " ",
                FeatureLevelName(adapter_.feature_level), trusted_ ? " trusted" : "", ": ",
                adapter_.description,
                adapter_.device.empty() || adapter_.device == adapter_.description
                    ? ""
                    : " / " + adapter_.device);
}

void Device::OnUncapturedError(WGPUDevice const*, WGPUErrorType type, WGPUStringView message,
                               void* userdata1, void*) {
  auto* self = static_cast<Device*>(userdata1);
  if (self->destroying_ || !self->sticky_error_.ok()) return;
  self->sticky_error_ =
      Status(ErrorTypeCode(type, StatusCode::kInternal),
             StrCat(self->impl_->name(), " reported an uncaptured ", ErrorTypeName(type), ": ",
                    FromStringView(message)));
}

void Device::OnDeviceLost(WGPUDevice const*, WGPUDeviceLostReason reason, WGPUStringView message,
                          void* userdata1, void*) {
  auto* self = static_cast<Device*>(userdata1);
  if (self->destroying_ || reason == WGPUDeviceLostReason_CallbackCancelled) return;
  self->lost_ = true;
  self->sticky_error_ = DeviceLost(self->impl_->name(), " device lost (reason ", reason,
                                   "): ", FromStringView(message));
}

Status Device::CheckHealthy() {
  if (!sticky_error_.ok()) return sticky_error_;
  if (lost_) return DeviceLost(impl_->name(), " device lost");
  return Status();
}

void Device::FreeDestroyed() {
  if (lost_) return;
  const Procs& p = procs();
  if (p.DeviceTick) {
    // Dawn's Vulkan back end frees a destroyed buffer's memory in a device
    // tick that finds the submission after its destruction complete, and
    // ticks only while work is scheduled (an empty command buffer submits
    // nothing). So: a submission clearing 4 bytes of a buffer of its own,
    // waited for; then another, and a tick while it is scheduled. (Waits of
    // 10 s at most: a best effort before an allocation's retry.)
    // (In error scopes: a device out of memory may refuse even these 4
    // bytes, which must not become the device's uncaptured error.)
    (void)WithErrorScopes("freeing destroyed buffers", StatusCode::kInternal, [&] {
      WGPUBufferDescriptor scratch_desc = {};
      scratch_desc.usage = WGPUBufferUsage_CopyDst;
      scratch_desc.size = 4;
      WGPUBuffer scratch = p.DeviceCreateBuffer(device_, &scratch_desc);
      const auto submit = [&] {
        WGPUCommandEncoderDescriptor desc = {};
        WGPUCommandEncoder encoder = p.DeviceCreateCommandEncoder(device_, &desc);
        p.CommandEncoderClearBuffer(encoder, scratch, 0, 4);
        WGPUCommandBuffer commands = p.CommandEncoderFinish(encoder, nullptr);
        p.QueueSubmit(queue_, 1, &commands);
        p.CommandBufferRelease(commands);
        p.CommandEncoderRelease(encoder);
      };
      submit();
      (void)WaitIdle(*this, std::chrono::seconds(10));
      submit();
      p.DeviceTick(device_);
      (void)WaitIdle(*this, std::chrono::seconds(10));
      p.BufferDestroy(scratch);
      p.BufferRelease(scratch);
    });
  }
  if (p.DevicePoll) p.DevicePoll(device_, /*wait=*/false, nullptr);
  p.InstanceProcessEvents(instance_);
}

void Device::Destroy() {
  if (lost_) return;
  procs().DeviceDestroy(device_);
  procs().InstanceProcessEvents(instance_);
  lost_ = true;
  if (sticky_error_.ok()) sticky_error_ = DeviceLost(impl_->name(), " device was destroyed");
}

Status Device::WaitFuture(WGPUFuture future, const bool& done, std::chrono::nanoseconds timeout,
                          std::string_view what) {
  const Procs& p = procs();
  if (impl_->supports_timed_wait_any()) {
    WGPUFutureWaitInfo info = {future, false};
    uint64_t ns = timeout == kInfinite ? UINT64_MAX : static_cast<uint64_t>(timeout.count());
    WGPUWaitStatus s = p.InstanceWaitAny(instance_, 1, &info, ns);
    if (s == WGPUWaitStatus_TimedOut) {
      return DeadlineExceeded(what, ": not done after ", timeout.count(), " ns");
    }
    if (s != WGPUWaitStatus_Success) {
      return Internal(what, ": wgpuInstanceWaitAny failed (status ", s, ")");
    }
    return Status();
  }
  // wgpu-native: poll the device, process events until the callback ran.
  auto start = Clock::now();
  auto sleep = std::chrono::microseconds(1);
  while (true) {
    p.InstanceProcessEvents(instance_);
    if (done) return Status();
    if (lost_) return CheckHealthy().WithContext(what);
    if (timeout == kInfinite && p.DevicePoll) {
      p.DevicePoll(device_, /*wait=*/true, nullptr);
      continue;
    }
    if (p.DevicePoll) p.DevicePoll(device_, /*wait=*/false, nullptr);
    p.InstanceProcessEvents(instance_);
    if (done) return Status();
    if (timeout != kInfinite && Clock::now() - start >= timeout) {
      return DeadlineExceeded(what, ": not done after ", timeout.count(), " ns");
    }
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, std::chrono::microseconds(200));
  }
}

void Device::PushErrorScopes() {
  procs().DevicePushErrorScope(device_, WGPUErrorFilter_Validation);
  procs().DevicePushErrorScope(device_, WGPUErrorFilter_OutOfMemory);
  // No internal-error scope: wgpu-native rejects that filter. Internal errors
  // reach the uncaptured-error handler and stick to the device instead.
}

Status Device::PopErrorScopes(std::string_view what, StatusCode validation_code) {
  struct Pop {
    bool done = false;
    WGPUPopErrorScopeStatus status = WGPUPopErrorScopeStatus_Error;
    WGPUErrorType type = WGPUErrorType_NoError;
    std::string message;
  };
  Pop pops[2];
  Status first;
  for (Pop& pop : pops) {
    WGPUPopErrorScopeCallbackInfo cb = {};
    cb.mode = WGPUCallbackMode_AllowProcessEvents;
    cb.callback = [](WGPUPopErrorScopeStatus status, WGPUErrorType type, WGPUStringView message,
                     void* ud1, void*) {
      auto* r = static_cast<Pop*>(ud1);
      r->status = status;
      r->type = type;
      r->message = FromStringView(message);
      r->done = true;
    };
    cb.userdata1 = &pop;
    WGPUFuture f = procs().DevicePopErrorScope(device_, cb);
    Status s = WaitFuture(f, pop.done, kInfinite, "waiting for an error scope");
    if (!s.ok() && first.ok()) first = s;
  }
  if (!first.ok()) return first.WithContext(what);
  // Scopes pop innermost first (out of memory, then validation); report
  // validation first since it explains the other.
  for (int i = 1; i >= 0; --i) {
    const Pop& pop = pops[i];
    if (pop.type != WGPUErrorType_NoError && pop.type != 0) {
      return Status(ErrorTypeCode(pop.type, validation_code),
                    StrCat(what, ": ", impl_->name(), " ", ErrorTypeName(pop.type), ": ",
                           pop.message));
    }
  }
  return CheckHealthy().WithContext(what);
}

Device::Enumeration Device::EnumerateAdapters() {
  Enumeration out;
  for (ImplKind kind : {ImplKind::kDawn, ImplKind::kWgpu}) {
    auto impl = Implementation::LoadDefault(kind);
    if (!impl.ok()) {
      out.errors.push_back(impl.status().message());
      out.misconfigured |= impl.status().code() == StatusCode::kInvalidArgument;
      continue;
    }
    auto instance = CreateInstance(**impl);
    if (!instance.ok()) {
      out.errors.push_back(instance.status().message());
      continue;
    }
    std::vector<std::string> seen;
    for (Backend b : {Backend::kVulkan, Backend::kMetal, Backend::kD3D12, Backend::kOpenGL,
                      Backend::kOpenGLES}) {
      FeatureLevel level = (b == Backend::kOpenGL || b == Backend::kOpenGLES)
                               ? FeatureLevel::kCompatibility
                               : FeatureLevel::kCore;
      auto adapter = RequestAdapter(**impl, *instance, b, level, PowerPreference::kHighPerformance);
      if (!adapter.ok()) continue;
      AdapterReport r = ReadAdapterReport(**impl, *adapter, level);
      (*impl)->procs().AdapterRelease(*adapter);
      std::string key = StrCat(BackendName(r.backend), "|", r.description, "|", r.device);
      if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
      seen.push_back(key);
      out.adapters.push_back(std::move(r));
    }
    (*impl)->procs().InstanceRelease(*instance);
  }
  return out;
}

}  // namespace kiln::hal
