// A WebGPU device: adapter choice, features and limits, errors and loss.
//
// Device::Create picks an implementation (Dawn or wgpu-native), a backend and
// a feature level, requests the features kernels need and the adapter's best
// compute limits, and installs handlers that turn uncaptured errors and device
// loss into Status values carrying the implementation's message. Nothing here
// aborts the process.
//
// Threading: a Device and every object made from it are used from one thread
// at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/hal/implementation.h"
#include "kiln/support/status.h"

namespace kiln::hal {

class BindGroupCache;
class BufferAllocator;
class Builtins;
class ExecutableCache;
class StagingBuffer;

enum class FeatureLevel { kAuto, kCore, kCompatibility };
std::string_view FeatureLevelName(FeatureLevel level);
StatusOr<FeatureLevel> ParseFeatureLevel(std::string_view name);

enum class PowerPreference { kDefault, kLowPower, kHighPerformance };

// The subset of WebGPU limits kiln's compute path depends on.
struct Limits {
  uint32_t max_bind_groups = 0;
  uint32_t max_bindings_per_bind_group = 0;
  uint32_t max_dynamic_uniform_buffers_per_pipeline_layout = 0;
  uint32_t max_storage_buffers_per_shader_stage = 0;
  uint32_t max_uniform_buffers_per_shader_stage = 0;
  uint64_t max_uniform_buffer_binding_size = 0;
  uint64_t max_storage_buffer_binding_size = 0;
  uint32_t min_uniform_buffer_offset_alignment = 0;
  uint32_t min_storage_buffer_offset_alignment = 0;
  uint64_t max_buffer_size = 0;
  uint32_t max_compute_workgroup_storage_size = 0;
  uint32_t max_compute_invocations_per_workgroup = 0;
  uint32_t max_compute_workgroup_size_x = 0;
  uint32_t max_compute_workgroup_size_y = 0;
  uint32_t max_compute_workgroup_size_z = 0;
  uint32_t max_compute_workgroups_per_dimension = 0;
};

struct AdapterReport {
  ImplKind impl = ImplKind::kDawn;
  std::string library;
  Backend backend = Backend::kDefault;
  FeatureLevel feature_level = FeatureLevel::kCore;
  std::string vendor, architecture, device, description;
  uint32_t vendor_id = 0, device_id = 0;
  std::string adapter_type;           // "discrete-gpu", "cpu", ...
  std::vector<std::string> features;  // names, kiln's or the implementation's
  Limits limits;
  // Threads per subgroup, fewest and most (0 where the adapter does not say).
  uint32_t subgroup_min_size = 0, subgroup_max_size = 0;
};

struct DeviceOptions {
  // Empty: $KILN_IMPL if set, else Dawn then wgpu-native, the first that
  // gives a working adapter.
  std::optional<ImplKind> impl;
  // kDefault: $KILN_BACKEND if set, else the implementation's first choice
  // (Vulkan/Metal/D3D12 at the core level, then OpenGL/OpenGLES at the
  // compatibility level).
  Backend backend = Backend::kDefault;
  FeatureLevel feature_level = FeatureLevel::kAuto;
  PowerPreference power_preference = PowerPreference::kHighPerformance;
  // Creation fails, naming the feature, if the adapter lacks one of these.
  std::vector<Feature> required_features;
  // Also enable shader-f16, subgroups and timestamp-query when offered.
  bool enable_optional_features = true;
  // Bytes of the shared uniform staging buffer kernels' constants go through
  // (each dispatch binds only its own block of it, at a dynamic offset).
  uint32_t staging_capacity = 1024 * 1024;
  // Most bind groups kept in the device-wide cache.
  size_t bind_group_cache_capacity = 1024;
  // Most bytes of freed buffers kept for reuse ($KILN_BUFFER_POOL_MB when
  // not set here). Unset: automatic, as many bytes as were ever live at once
  // (a loop's next step reuses its last step's buffers), at least
  // buffer_pool_floor; the pool is emptied when the device runs out of memory.
  std::optional<uint64_t> buffer_pool_capacity;
  uint64_t buffer_pool_floor = 256ull << 20;
  // Largest buffer copy or clear recorded as one WebGPU command; larger ones
  // go as several (Mesa's lavapipe crashed copying 2 GiB or more in one
  // command). A multiple of 4, at least 4.
  uint64_t copy_piece_bytes = 1ull << 30;
  // Trusted mode ($KILN_TRUSTED=1 when not set here): the implementation's
  // robustness transform is off (no index clamping or bounds checks in
  // kernels) and, on Dawn, workgroup memory is not zero-initialised. For
  // kernels whose every access is in bounds: an out-of-bounds access is then
  // undefined behaviour on the GPU, which may read or corrupt any memory of
  // the process's device. Off by default.
  std::optional<bool> trusted;
};

using Clock = std::chrono::steady_clock;
inline constexpr std::chrono::nanoseconds kInfinite = std::chrono::nanoseconds::max();

class Device : public std::enable_shared_from_this<Device> {
 public:
  static StatusOr<std::shared_ptr<Device>> Create(const DeviceOptions& options = {});

  // Every adapter each loadable implementation offers (for `kiln info`),
  // and for each implementation that could not be loaded, why.
  struct Enumeration {
    std::vector<AdapterReport> adapters;
    std::vector<std::string> errors;
    // Whether a library named by $KILN_DAWN_LIBRARY / $KILN_WGPU_LIBRARY was
    // refused (one of `errors` says why).
    bool misconfigured = false;
  };
  static Enumeration EnumerateAdapters();

  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const Implementation& impl() const { return *impl_; }
  std::shared_ptr<const Implementation> impl_ref() const { return impl_; }
  const Procs& procs() const { return impl_->procs(); }
  WGPUDevice handle() const { return device_; }
  WGPUQueue queue() const { return queue_; }
  const AdapterReport& adapter() const { return adapter_; }
  // Whether the device was made in trusted mode (DeviceOptions::trusted).
  bool trusted() const { return trusted_; }
  // DeviceOptions::copy_piece_bytes.
  uint64_t copy_piece_bytes() const { return copy_piece_bytes_; }
  const Limits& limits() const { return limits_; }
  bool HasFeature(Feature feature) const;
  // One line: "dawn vulkan core: NVIDIA H200 (...)".
  std::string Describe() const;
  // A number no other device of this process has had: an identity that,
  // unlike the object's address, is never reused after the device is gone.
  uint64_t serial() const { return serial_; }

  // OK while the device is usable; else the first uncaptured error or the
  // loss, with the implementation's message. Errors stick: once reported they
  // are returned again (a device with an uncaptured error is not trusted).
  Status CheckHealthy();

  // Lets the implementation free the memory of destroyed objects no work
  // uses (Dawn's Vulkan back end frees it once a later submission completes:
  // an empty one is submitted and waited for, up to 10 s; wgpu-native's poll;
  // events processed): after BufferAllocator::Trim, before an allocation is
  // tried again.
  void FreeDestroyed();

  // Destroys the WebGPU device; later calls fail with kDeviceLost. Models a
  // lost device for tests and for callers that want to abandon work.
  void Destroy();

  // Waits for a future made with CallbackMode_AllowProcessEvents, processing
  // events; kDeadlineExceeded after `timeout`.
  Status WaitFuture(WGPUFuture future, const bool& done, std::chrono::nanoseconds timeout,
                    std::string_view what);

  // Runs `fn` inside validation and out-of-memory error scopes and
  // returns the first error raised, as kind `validation_code`, prefixed with
  // `what`.
  template <typename Fn>
  Status WithErrorScopes(std::string_view what, StatusCode validation_code, Fn&& fn) {
    PushErrorScopes();
    fn();
    return PopErrorScopes(what, validation_code);
  }

  BufferAllocator& allocator() { return *allocator_; }
  BindGroupCache& bind_group_cache() { return *bind_group_cache_; }
  ExecutableCache& executable_cache() { return *executable_cache_; }
  StagingBuffer& staging() { return *staging_; }
  const StagingBuffer& staging() const { return *staging_; }
  Builtins& builtins() { return *builtins_; }

 private:
  Device();
  uint64_t serial_ = 0;
  Status Initialize(std::shared_ptr<Implementation> impl, const DeviceOptions& options);
  void PushErrorScopes();
  Status PopErrorScopes(std::string_view what, StatusCode validation_code);

  static void OnUncapturedError(WGPUDevice const* device, WGPUErrorType type,
                                WGPUStringView message, void* userdata1, void* userdata2);
  static void OnDeviceLost(WGPUDevice const* device, WGPUDeviceLostReason reason,
                           WGPUStringView message, void* userdata1, void* userdata2);

  std::shared_ptr<Implementation> impl_;
  WGPUInstance instance_ = nullptr;
  WGPUAdapter adapter_handle_ = nullptr;
  WGPUDevice device_ = nullptr;
  WGPUQueue queue_ = nullptr;
  AdapterReport adapter_;
  bool trusted_ = false;
  uint64_t copy_piece_bytes_ = 1ull << 30;
  Limits limits_;
  std::vector<bool> features_;  // indexed by Feature
  Status sticky_error_;
  bool lost_ = false;
  bool destroying_ = false;

  std::unique_ptr<BufferAllocator> allocator_;
  std::unique_ptr<BindGroupCache> bind_group_cache_;
  std::unique_ptr<ExecutableCache> executable_cache_;
  std::unique_ptr<StagingBuffer> staging_;
  std::unique_ptr<Builtins> builtins_;

  friend struct DeviceFactory;
};

// webgpu.h string views.
inline WGPUStringView ToStringView(std::string_view s) {
  return WGPUStringView{s.data(), s.size()};
}
std::string FromStringView(WGPUStringView s);

}  // namespace kiln::hal
