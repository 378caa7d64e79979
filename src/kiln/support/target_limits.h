// The limits of a target device that kernels are compiled for and checked
// against: one struct, filled once from a device (runtime::TargetLimitsOf)
// or from command-line flags, and read by the verifier, the code generator
// and the runtime. Defaults are WebGPU's guaranteed minimums.
#pragma once

#include <cstdint>

namespace kiln {

struct TargetLimits {
  uint32_t max_invocations_per_workgroup = 256;          // maxComputeInvocationsPerWorkgroup
  uint32_t max_workgroup_size_x = 256;                   // maxComputeWorkgroupSizeX
  uint32_t max_workgroup_size_y = 256;                   // maxComputeWorkgroupSizeY
  uint32_t max_workgroup_size_z = 64;                    // maxComputeWorkgroupSizeZ
  uint32_t max_workgroup_storage_bytes = 16384;          // maxComputeWorkgroupStorageSize
  uint32_t max_storage_buffers_per_stage = 8;            // maxStorageBuffersPerShaderStage
  uint64_t max_storage_buffer_binding_size = 134217728;  // maxStorageBufferBindingSize
  uint32_t min_storage_buffer_offset_alignment = 256;    // minStorageBufferOffsetAlignment
  uint64_t max_uniform_buffer_binding_size = 65536;      // maxUniformBufferBindingSize
};

// What a workgroup variable of `bytes` counts against
// max_workgroup_storage_bytes: WebGPU sums each variable's size rounded up
// to 16.
constexpr int64_t WorkgroupVariableBytes(int64_t bytes) {
  return (bytes + 15) / 16 * 16;
}

}  // namespace kiln
