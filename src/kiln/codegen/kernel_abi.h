// The kernel ABI: the one contract between the WGSL code generator and the
// runtime that binds and dispatches its kernels. docs/kernel-abi.md says the
// same in prose; both sides test against the constants and helpers here.
//
// This header is deliberately free of the IR and of WebGPU types so that the
// HAL and runtime can include it without depending on codegen's libraries.
//
// Summary:
//   * Every binding is in @group(kBindGroup).
//   * Buffer parameter i (counting buffer parameters only, in parameter
//     order) is @binding(i), a storage buffer, read-only unless the kernel
//     stores to it.
//   * Scalar parameters (i32, u32, f32; 4 bytes each, in parameter order)
//     followed by the two words grid_dim_x and num_blocks_x form one uniform
//     struct at @binding(number of buffer parameters). The host binds it
//     with a dynamic offset; its host size is UniformBlockSize(num_scalars).
//   * blockIdx.x = workgroup_id.x + workgroup_id.z * grid_dim_x; kernels
//     return at once when blockIdx.x >= num_blocks_x. blockIdx.y =
//     workgroup_id.y. blockIdx.z does not exist for kernels.
//   * threadIdx.{x,y,z} = local_invocation_id.{x,y,z}; the workgroup size is
//     the kernel's thread extents, recorded in its metadata.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::abi {

// The bind group every kernel binding lives in.
inline constexpr uint32_t kBindGroup = 0;

// Each uniform field, scalar parameter or trailing launch word, is 4 bytes.
// Only 4-byte scalars are allowed in the block so that WGSL's uniform layout
// rules place field k at byte 4 * k, exactly the packed host layout.
inline constexpr uint32_t kUniformFieldBytes = 4;

// The host-side size of the uniform block is a multiple of this.
inline constexpr uint32_t kUniformBlockAlignment = 16;

// The launch words that follow the scalar parameters, in this order.
inline constexpr uint32_t kNumLaunchWords = 2;
inline constexpr std::string_view kGridDimXField = "grid_dim_x";      // workgroups along x
inline constexpr std::string_view kNumBlocksXField = "num_blocks_x";  // logical blockIdx.x extent

// The most scalar parameters a kernel takes: with the launch words, the
// uniform block's struct then has 16383 members, the most Tint's WGSL
// compiler accepts (its 65532 bytes also fit WebGPU's default
// maxUniformBufferBindingSize of 65536).
inline constexpr uint32_t kMaxScalarParams = 16383 - kNumLaunchWords;

// WebGPU's guaranteed minimum of maxComputeWorkgroupsPerDimension.
inline constexpr uint32_t kDefaultMaxWorkgroupsPerDimension = 65535;

// Features a kernel may require; the names are WebGPU's feature names.
inline constexpr std::string_view kFeatureShaderF16 = "shader-f16";
inline constexpr std::string_view kFeatureSubgroups = "subgroups";

// The WGSL directive emitted first in kernels that use subgroup builtins.
// Naga (through version 30 at least) accepts the builtins when the device
// has the capability but rejects the directive itself; a runtime driving a
// Naga-based implementation removes the line with StripSubgroupsEnable.
inline constexpr std::string_view kSubgroupsEnableDirective = "enable subgroups;\n";

// The @binding of the uniform block.
constexpr uint32_t UniformBinding(uint32_t num_buffer_params) {
  return num_buffer_params;
}

// Byte offset of scalar parameter `scalar_index` (counting scalars only).
constexpr uint32_t ScalarOffset(uint32_t scalar_index) {
  return scalar_index * kUniformFieldBytes;
}
constexpr uint32_t GridDimXOffset(uint32_t num_scalar_params) {
  return num_scalar_params * kUniformFieldBytes;
}
constexpr uint32_t NumBlocksXOffset(uint32_t num_scalar_params) {
  return (num_scalar_params + 1) * kUniformFieldBytes;
}

// The number of bytes the host writes for the uniform block: all fields,
// padded up to kUniformBlockAlignment. WGSL's own size of the struct may be
// smaller; binding the larger host size is always valid.
constexpr uint32_t UniformBlockSize(uint32_t num_scalar_params) {
  uint32_t raw = (num_scalar_params + kNumLaunchWords) * kUniformFieldBytes;
  return (raw + kUniformBlockAlignment - 1) / kUniformBlockAlignment * kUniformBlockAlignment;
}

// How the runtime dispatches a kernel with logical extents
// (num_blocks_x, num_blocks_y).
struct Dispatch {
  uint32_t x = 1;             // workgroups along x; also the grid_dim_x word
  uint32_t y = 1;             // workgroups along y (= num_blocks_y)
  uint32_t z = 1;             // workgroups along z: ceil(num_blocks_x / x)
  uint32_t num_blocks_x = 1;  // the num_blocks_x word
};

// z = ceil(N / max_per_dim), x = ceil(N / z): the fewest z-slices, and the
// N blocks spread evenly over them, so that fewer than z workgroups find no
// block (x = min(N, max_per_dim) would leave up to max_per_dim - 1 idle
// workgroups, which on large grids cost measurable launch time). An empty launch (N or Y zero)
// dispatches nothing: x = y = z = 0. The caller checks y and z against
// max_per_dim (a grid too large even for the x/z spread is an error).
constexpr Dispatch ComputeDispatch(uint64_t num_blocks_x, uint64_t num_blocks_y,
                                   uint32_t max_per_dim = kDefaultMaxWorkgroupsPerDimension) {
  Dispatch d;
  if (num_blocks_x == 0 || num_blocks_y == 0 || max_per_dim == 0) {
    d.x = d.y = d.z = 0;
    d.num_blocks_x = static_cast<uint32_t>(num_blocks_x);
    return d;
  }
  const uint64_t z = (num_blocks_x + max_per_dim - 1) / max_per_dim;
  d.x = static_cast<uint32_t>((num_blocks_x + z - 1) / z);
  d.y = static_cast<uint32_t>(num_blocks_y);
  d.z = static_cast<uint32_t>(z);
  d.num_blocks_x = static_cast<uint32_t>(num_blocks_x);
  return d;
}

// Removes a leading kSubgroupsEnableDirective line from a kernel's WGSL, for
// WGSL compilers that do not know the directive. Anything else is unchanged.
inline std::string StripSubgroupsEnable(std::string_view wgsl) {
  size_t pos = wgsl.find(kSubgroupsEnableDirective);
  if (pos == std::string_view::npos || (pos != 0 && wgsl[pos - 1] != '\n')) {
    return std::string(wgsl);
  }
  std::string out(wgsl.substr(0, pos));
  out.append(wgsl.substr(pos + kSubgroupsEnableDirective.size()));
  return out;
}

// The statement the code generator emits for a workgroup barrier.
inline constexpr std::string_view kWorkgroupBarrierStatement = "workgroupBarrier();";

// Follows every workgroupBarrier() of a kernel's WGSL with a storageBarrier().
// Tint's GLSL output (Dawn on OpenGL/OpenGLES) writes workgroupBarrier() as
// GLSL's barrier() alone, which Mesa compiles as an execution barrier only:
// it moved a workgroup-memory load past it, so the load saw a value written
// after the barrier. storageBarrier() becomes memoryBarrierBuffer() +
// barrier(), a memory barrier Mesa does not move loads across. A runtime
// driving Dawn's OpenGL backends applies this to every kernel.
inline std::string AddMemoryBarriersAfterWorkgroupBarriers(std::string_view wgsl) {
  std::string out;
  out.reserve(wgsl.size());
  size_t pos = 0;
  for (;;) {
    size_t at = wgsl.find(kWorkgroupBarrierStatement, pos);
    if (at == std::string_view::npos) break;
    at += kWorkgroupBarrierStatement.size();
    out.append(wgsl.substr(pos, at - pos));
    out.append(" storageBarrier();");
    pos = at;
  }
  out.append(wgsl.substr(pos));
  return out;
}

}  // namespace kiln::abi
