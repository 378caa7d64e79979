// Executables: WGSL plus a description of each entry point's bindings.
//
// kiln's HAL knows nothing of the IR: an executable is WGSL source and, for
// each entry point, the kinds of its bindings in @group(0) @binding(0..n-1).
// At most one binding is kUniform: the kernel's constants, bound from the
// shared staging buffer with a dynamic offset. Loading creates the shader
// module, explicit bind group and pipeline layouts, and the compute
// pipelines (asynchronously, all entry points at once). WGSL the
// implementation rejects comes back as kCompileError with its messages and
// line numbers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/support/status.h"
#include <webgpu.h>

namespace kiln::hal {

class Device;
class Implementation;

enum class BindingKind { kReadOnlyStorage, kStorage, kUniform };

struct EntryPointLayout {
  std::string name;
  std::vector<BindingKind> bindings;
  // Bytes of the kUniform binding's block (a multiple of 16); 0 if none.
  uint32_t constants_size = 0;
  // Per binding, the fewest bytes its range may have (the layout's
  // minBindingSize: for a storage binding, the size of one element of the
  // shader's array, 16 for `array<vec4<f32>>`); empty or 0: no minimum
  // beyond WebGPU's. A dispatch binding fewer bytes is refused when
  // recorded, and a shader needing more fails to load.
  std::vector<uint64_t> min_binding_sizes;
  // The name its dispatches carry in a profile's timings (the kernel's own
  // name, where the entry point's had to change for WGSL); empty: `name`.
  std::string timing_name;
};

// Binding `i`'s minimum size in `layout` (0: none).
inline uint64_t MinBindingSize(const EntryPointLayout& layout, size_t i) {
  return i < layout.min_binding_sizes.size() ? layout.min_binding_sizes[i] : 0;
}

struct ExecutableSpec {
  std::string label;
  std::string wgsl;
  std::vector<EntryPointLayout> entry_points;
  // The WGSL's every loop terminates (a bounded trip count), so an
  // implementation need not bound loops itself: wgpu-native then compiles
  // it with bounds checks but without its loop-bounding counters (Naga's
  // ForceLoopBounding), which cost 2.6x on the H200 (BENCHMARKS.md).
  bool loops_terminate = false;
};

struct EntryPoint {
  EntryPointLayout layout;
  int uniform_binding = -1;
  WGPUBindGroupLayout bind_group_layout = nullptr;
  WGPUPipelineLayout pipeline_layout = nullptr;
  WGPUComputePipeline pipeline = nullptr;
};

class Executable {
 public:
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  const std::string& label() const { return label_; }
  size_t entry_point_count() const { return entry_points_.size(); }
  const EntryPoint& entry_point(size_t i) const { return entry_points_[i]; }
  // Index of the entry point called `name`, or kInvalidArgument.
  StatusOr<uint32_t> FindEntryPoint(std::string_view name) const;
  // Whether it was loaded on `device` (its pipelines are that device's).
  bool BelongsTo(const Device& device) const;

 private:
  friend class ExecutableLoader;
  Executable() = default;
  // Releasing WebGPU objects needs only the entry points; executables may
  // outlive the Device object (the device cache holds them strongly).
  std::shared_ptr<const Implementation> impl_;
  uint64_t device_serial_ = 0;  // Device::serial of the device it was loaded on
  std::string label_;
  WGPUShaderModule module_ = nullptr;
  std::vector<EntryPoint> entry_points_;
};

using ExecutableRef = std::shared_ptr<Executable>;

// An executable being loaded; pipelines compile in the implementation's
// background while the caller goes on.
class PendingExecutable {
 public:
  PendingExecutable(PendingExecutable&&) noexcept;
  PendingExecutable& operator=(PendingExecutable&&) noexcept;
  ~PendingExecutable();
  // Blocks until every pipeline is ready or one failed.
  StatusOr<ExecutableRef> Wait();

 private:
  friend class ExecutableLoader;
  struct State;
  explicit PendingExecutable(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// Starts loading `spec`: validates the layouts, compiles the WGSL (errors
// come back at once) and starts every pipeline's asynchronous creation.
StatusOr<PendingExecutable> LoadExecutableAsync(Device& device, const ExecutableSpec& spec);
// Loads `spec`, or returns the cached executable for identical source and
// layouts.
StatusOr<ExecutableRef> LoadExecutable(Device& device, const ExecutableSpec& spec);

// Compiles `wgsl` with the implementation's WGSL compiler and discards the
// result: OK, or kCompileError with its messages. No pipeline is made.
Status CheckWgsl(Device& device, std::string_view label, const std::string& wgsl);

struct ExecutableCacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t size = 0;
};

class ExecutableCache {
 public:
  ExecutableRef Find(const std::string& key);
  void Insert(const std::string& key, ExecutableRef executable);
  void Clear() { map_.clear(); }
  ExecutableCacheStats stats() const { return stats_; }

 private:
  std::unordered_map<std::string, ExecutableRef> map_;
  ExecutableCacheStats stats_;
};

}  // namespace kiln::hal
