#include "kiln/codegen/kernel_abi.h"

#include <gtest/gtest.h>

namespace kiln::abi {
namespace {

TEST(KernelAbiTest, UniformLayoutIsPackedFourByteFieldsPaddedTo16) {
  EXPECT_EQ(UniformBlockSize(0), 16u);  // the two launch words alone
  EXPECT_EQ(UniformBlockSize(2), 16u);
  EXPECT_EQ(UniformBlockSize(3), 32u);
  EXPECT_EQ(UniformBlockSize(6), 32u);
  EXPECT_EQ(UniformBlockSize(7), 48u);
  EXPECT_EQ(ScalarOffset(2), 8u);
  EXPECT_EQ(GridDimXOffset(3), 12u);
  EXPECT_EQ(NumBlocksXOffset(3), 16u);
  EXPECT_EQ(UniformBinding(4), 4u);
}

TEST(KernelAbiTest, SmallGridsUseXOnly) {
  Dispatch d = ComputeDispatch(100, 3);
  EXPECT_EQ(d.x, 100u);
  EXPECT_EQ(d.y, 3u);
  EXPECT_EQ(d.z, 1u);
  EXPECT_EQ(d.num_blocks_x, 100u);
}

TEST(KernelAbiTest, LargeGridsSpreadEvenlyOverZ) {
  Dispatch d = ComputeDispatch(200000, 1);
  EXPECT_EQ(d.z, 4u);  // ceil(200000 / 65535)
  EXPECT_EQ(d.x, 50000u);
  // 2^16 blocks: two slices of 32768, not 65535 + 65535 with 65534 idle.
  d = ComputeDispatch(65536, 1);
  EXPECT_EQ(d.x, 32768u);
  EXPECT_EQ(d.z, 2u);
  EXPECT_EQ(ComputeDispatch(10, 1, 4).z, 3u);
  EXPECT_EQ(ComputeDispatch(10, 1, 4).x, 4u);
  // Every count: enough workgroups, fewer than z idle, x within the limit.
  for (uint64_t n : {65535ull, 65536ull, 70001ull, 131071ull, 131072ull, 4294967295ull}) {
    d = ComputeDispatch(n, 1);
    EXPECT_GE(uint64_t{d.x} * d.z, n) << n;
    EXPECT_LT(uint64_t{d.x} * d.z - n, uint64_t{d.z}) << n;
    EXPECT_LE(d.x, 65535u) << n;
  }
}

TEST(KernelAbiTest, EmptyGridDispatchesNothing) {
  Dispatch d = ComputeDispatch(0, 5);
  EXPECT_EQ(d.x * d.y * d.z, 0u);
}

TEST(KernelAbiTest, StripSubgroupsEnableRemovesOnlyTheDirective) {
  EXPECT_EQ(StripSubgroupsEnable("enable f16;\nenable subgroups;\nfn f() {}\n"),
            "enable f16;\nfn f() {}\n");
  EXPECT_EQ(StripSubgroupsEnable("fn f() {}\n"), "fn f() {}\n");
}

}  // namespace
}  // namespace kiln::abi

namespace kiln::abi {
namespace {

TEST(KernelAbiTest, MemoryBarriersFollowEveryWorkgroupBarrier) {
  EXPECT_EQ(AddMemoryBarriersAfterWorkgroupBarriers(
                "a();\n  workgroupBarrier();\n  b();\n  workgroupBarrier();\n"),
            "a();\n  workgroupBarrier(); storageBarrier();\n  b();\n"
            "  workgroupBarrier(); storageBarrier();\n");
  EXPECT_EQ(AddMemoryBarriersAfterWorkgroupBarriers("no barriers"), "no barriers");
  EXPECT_EQ(AddMemoryBarriersAfterWorkgroupBarriers(""), "");
}

}  // namespace
}  // namespace kiln::abi
