#include "kiln/transform/lower_thread_bindings.h"

#include <gtest/gtest.h>

#include "kiln/ir/ir.h"
#include "kiln/transform/testing.h"

namespace kiln::transform {
namespace {

using namespace ::kiln::ir;  // NOLINT: IR builder vocabulary

Function Grid2D(LoopKind outer = LoopKind::kBlockY) {
  IRBuilder b("grid");
  Var n = b.ScalarParam("n", kI32);
  Var m = b.ScalarParam("m", kI32);
  Buffer A = b.BufferParam("A", kF32, {m, n});
  b.For("by", outer, 0, m, [&](Var by) {
    b.For("bx", LoopKind::kBlockX, 0, (n + 15) / 16, [&](Var bx) {
      b.For("tx", LoopKind::kThreadX, 0, 16, [&](Var tx) {
        b.For("ty", LoopKind::kThreadY, 0, 2, [&](Var ty) {
          Var i = b.Let("i", bx * 16 + tx);
          b.If(i < n, [&] { b.Store(A, {by, i}, FloatConst(kF32, 1.0)); });
        });
      });
    });
  });
  return b.Build();
}

TEST(LowerThreadBindingsTest, CollectsLaunchAxes) {
  StatusOr<LaunchInfo> info = CollectLaunchInfo(Grid2D());
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(Print(info->num_blocks[0]), "(n + 15) / 16");
  EXPECT_EQ(Print(info->num_blocks[1]), "m");
  EXPECT_EQ(info->workgroup_size, (std::array<int64_t, 3>{16, 2, 1}));
}

TEST(LowerThreadBindingsTest, RecordsTheLaunchAsAttributes) {
  StatusOr<Function> f = LowerThreadBindings(Grid2D());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(std::get<std::string>(*f->GetAttr(kAttrNumBlocksX)), "(n + 15) / 16");
  EXPECT_EQ(std::get<std::string>(*f->GetAttr(kAttrNumBlocksY)), "m");
  EXPECT_EQ(std::get<int64_t>(*f->GetAttr(kAttrWorkgroupSizeX)), 16);
  EXPECT_EQ(std::get<int64_t>(*f->GetAttr(kAttrWorkgroupSizeY)), 2);
  EXPECT_EQ(std::get<int64_t>(*f->GetAttr(kAttrWorkgroupSizeZ)), 1);
  EXPECT_EQ(
      PrintedOrError(f).substr(0, PrintedOrError(f).find('\n')),
      R"(fn grid(n: i32, m: i32, A: buffer<f32>[m, n]) attributes {"launch.num_blocks_x": "(n + 15) / 16", "launch.num_blocks_y": "m", "launch.workgroup_size_x": 16, "launch.workgroup_size_y": 2, "launch.workgroup_size_z": 1} {)");
}

TEST(LowerThreadBindingsTest, KernelWithoutAxesRunsOneThread) {
  IRBuilder b("single");
  Buffer A = b.BufferParam("A", kF32, {1});
  b.Store(A, {0}, FloatConst(kF32, 1.0));
  StatusOr<LaunchInfo> info = CollectLaunchInfo(b.Build());
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_FALSE(info->num_blocks[0].defined());
  EXPECT_FALSE(info->num_blocks[1].defined());
  EXPECT_EQ(info->workgroup_size, (std::array<int64_t, 3>{1, 1, 1}));
}

TEST(LowerThreadBindingsTest, BlockIdxZIsReserved) {
  ExpectError(LowerThreadBindings(Grid2D(LoopKind::kBlockZ)), StatusCode::kInvalidArgument,
              "blockIdx.z is reserved by the kernel ABI");
}

TEST(LowerThreadBindingsTest, WorkgroupSizeMustBeConstant) {
  IRBuilder b("dyn");
  Var n = b.ScalarParam("n", kI32);
  Buffer A = b.BufferParam("A", kF32, {n});
  b.For("tx", LoopKind::kThreadX, 0, n, [&](Var tx) { b.Store(A, {tx}, FloatConst(kF32, 1.0)); });
  ExpectError(LowerThreadBindings(b.Build()), StatusCode::kInvalidArgument,
              "loop `tx` bound to threadIdx.x: the workgroup size must be a positive constant, "
              "got n");
}

TEST(LowerThreadBindingsTest, OneAxisNeedsOneExtent) {
  IRBuilder b("twice");
  Buffer A = b.BufferParam("A", kF32, {64});
  b.For("t0", LoopKind::kThreadX, 0, 64, [&](Var t) { b.Store(A, {t}, FloatConst(kF32, 1.0)); });
  b.For("t1", LoopKind::kThreadX, 0, 32, [&](Var t) { b.Store(A, {t}, FloatConst(kF32, 2.0)); });
  ExpectError(LowerThreadBindings(b.Build()), StatusCode::kInvalidArgument,
              "extent 32 differs from extent 64 bound to the same axis elsewhere");
}

TEST(LowerThreadBindingsTest, GridExtentMayOnlyUseScalarParameters) {
  IRBuilder b("nested");
  Var n = b.ScalarParam("n", kI32);
  Buffer A = b.BufferParam("A", kF32, {n});
  b.For("i", LoopKind::kSerial, 0, n, [&](Var i) {
    b.For("bx", LoopKind::kBlockX, 0, i, [&](Var bx) { b.Store(A, {bx}, FloatConst(kF32, 1.0)); });
  });
  ExpectError(LowerThreadBindings(b.Build()), StatusCode::kInvalidArgument,
              "the grid extent i uses `i`, which is not a scalar parameter");
}

TEST(LowerThreadBindingsTest, LaunchAxisNeedsMinZeroAndStepOne) {
  IRBuilder b("offset");
  Buffer A = b.BufferParam("A", kF32, {64});
  b.For("tx", LoopKind::kThreadX, 1, 63, [&](Var t) { b.Store(A, {t}, FloatConst(kF32, 1.0)); });
  ExpectError(LowerThreadBindings(b.Build()), StatusCode::kInvalidArgument,
              "a launch axis needs min 0 and step 1, got min 1 and step 1");
}

}  // namespace
}  // namespace kiln::transform
