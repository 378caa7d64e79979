// LowerThreadBindings: the launch axes of a kernel, collected and checked.
//
// Thread-bound loops (threadIdx.x/y/z, blockIdx.x/y) say how a kernel is
// launched. This pass collects them into LaunchInfo, checks them against the
// kernel ABI (docs/kernel-abi.md), and records the result as function
// attributes so the lowered IR states its own launch:
//   launch.num_blocks_x, launch.num_blocks_y  IR expression text ("1" if unbound)
//   launch.workgroup_size_x/_y/_z            integers (1 if unbound)
//
// Errors (kInvalidArgument): blockIdx.z bound (the ABI reserves it for
// spreading large blockIdx.x grids); a thread-bound loop with min other than
// 0 or step other than 1; a threadIdx extent that is not a positive constant;
// one axis bound with different extents in different places; a blockIdx
// extent that uses anything but scalar parameters (the runtime evaluates it
// from the call's arguments).
#pragma once

#include <array>
#include <cstdint>

#include "kiln/ir/expr.h"
#include "kiln/ir/function.h"
#include "kiln/support/status.h"

namespace kiln::transform {

inline constexpr char kAttrNumBlocksX[] = "launch.num_blocks_x";
inline constexpr char kAttrNumBlocksY[] = "launch.num_blocks_y";
inline constexpr char kAttrWorkgroupSizeX[] = "launch.workgroup_size_x";
inline constexpr char kAttrWorkgroupSizeY[] = "launch.workgroup_size_y";
inline constexpr char kAttrWorkgroupSizeZ[] = "launch.workgroup_size_z";

struct LaunchInfo {
  // Logical extents of blockIdx.x and blockIdx.y; undefined where unbound.
  std::array<ir::Expr, 2> num_blocks;
  // Extents of threadIdx.x/y/z; 1 where unbound.
  std::array<int64_t, 3> workgroup_size = {1, 1, 1};
};

// Collects and checks the launch axes of `function` (see above).
StatusOr<LaunchInfo> CollectLaunchInfo(const ir::Function& function);

struct LowerThreadBindingsOptions {};

// CollectLaunchInfo, then the function with the launch.* attributes set.
StatusOr<ir::Function> LowerThreadBindings(const ir::Function& function,
                                           const LowerThreadBindingsOptions& options = {});

}  // namespace kiln::transform
