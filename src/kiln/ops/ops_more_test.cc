// Reductions over any axes, arg-reductions, softmax, norms, data movement,
// where and cast on the CPU: the kernels' signatures and schedule rules, the
// time to build them, and every argument error.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kiln/ir/printer.h"
#include "kiln/ops/ops.h"

namespace kiln::ops {
namespace {

void ExpectError(const Status& status, const std::vector<std::string>& fragments) {
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status;
  for (const std::string& f : fragments) {
    EXPECT_NE(status.message().find(f), std::string::npos)
        << "'" << f << "' not in: " << status.message();
  }
}

bool Contains(const ir::Function& f, const std::string& text) {
  return ir::Print(f).find(text) != std::string::npos;
}

TEST(OpsMoreTest, LongRowsGetAWorkgroupShortRowsAThread) {
  // 33 rows of 1000: a workgroup of 256 per row, a tree in shared memory.
  auto coop = ReduceAxes("sum", {{33, 1000}}, {1}, false, Target{});
  ASSERT_TRUE(coop.ok()) << coop.status();
  EXPECT_TRUE(Contains(*coop, "blockIdx.x(0, 33)")) << ir::Print(*coop);
  EXPECT_TRUE(Contains(*coop, "threadIdx.x(0, 256)")) << ir::Print(*coop);
  EXPECT_TRUE(Contains(*coop, "workgroup_barrier()")) << ir::Print(*coop);
  EXPECT_TRUE(Contains(*coop, "shared")) << ir::Print(*coop);
  // Rows of 33: 64 threads.
  auto small = ReduceAxes("max", {{1000, 33}}, {-1}, false, Target{});
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_TRUE(Contains(*small, "threadIdx.x(0, 64)")) << ir::Print(*small);
  // 1000 rows of 7: a thread per row, no barrier.
  auto serial = ReduceAxes("sum", {{1000, 7}}, {1}, false, Target{});
  ASSERT_TRUE(serial.ok()) << serial.status();
  EXPECT_TRUE(Contains(*serial, "blockIdx.x(0, 4)")) << ir::Print(*serial);
  EXPECT_FALSE(Contains(*serial, "workgroup_barrier")) << ir::Print(*serial);
  // Over axis 0 of [33, 1000]: a thread per column (coalesced), no barrier.
  auto cols = ReduceAxes("sum", {{33, 1000}}, {0}, true, Target{});
  ASSERT_TRUE(cols.ok()) << cols.status();
  EXPECT_TRUE(Contains(*cols, "Y: buffer<f32>[1, 1000]")) << ir::Print(*cols);
  EXPECT_FALSE(Contains(*cols, "workgroup_barrier")) << ir::Print(*cols);
  // Smaller limits: 64 threads.
  Target small_limits;
  small_limits.limits.max_invocations_per_workgroup = 64;
  auto limited = ReduceAxes("sum", {{33, 1000}}, {1}, false, small_limits);
  ASSERT_TRUE(limited.ok()) << limited.status();
  EXPECT_TRUE(Contains(*limited, "threadIdx.x(0, 64)")) << ir::Print(*limited);
}

TEST(OpsMoreTest, Signatures) {
  const Target t;
  auto all = ReduceAxes("mean", {{3, 4, 5}}, {0, 1, 2}, false, t);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_TRUE(Contains(*all, "fn reduce_mean(X: buffer<f32>[3, 4, 5], Y: buffer<f32>[1])"));
  auto keep = ReduceAxes("prod", {{3, 4, 5}}, {0, 2}, true, t, "p");
  ASSERT_TRUE(keep.ok()) << keep.status();
  EXPECT_TRUE(Contains(*keep, "fn p(X: buffer<f32>[3, 4, 5], Y: buffer<f32>[1, 4, 1])"));
  auto arg = ArgReduce("argmax", {{7, 33}}, -1, false, t);
  ASSERT_TRUE(arg.ok()) << arg.status();
  EXPECT_TRUE(Contains(*arg, "fn argmax(X: buffer<f32>[7, 33], Y: buffer<i32>[7])"));
  auto ln = LayerNorm({{7, 33}}, 1e-5, t);
  ASSERT_TRUE(ln.ok()) << ln.status();
  EXPECT_TRUE(Contains(*ln,
                       "fn layer_norm(X: buffer<f32>[7, 33], Gamma: buffer<f32>[33], "
                       "Beta: buffer<f32>[33], Y: buffer<f32>[7, 33])"))
      << ir::Print(*ln);
  auto rms = RmsNorm({{7, 33}}, 1e-5, t);
  ASSERT_TRUE(rms.ok()) << rms.status();
  EXPECT_TRUE(Contains(*rms,
                       "fn rms_norm(X: buffer<f32>[7, 33], Gamma: buffer<f32>[33], "
                       "Y: buffer<f32>[7, 33])"));
  auto perm = Permute({{2, 3, 4}}, {2, 0, 1}, t);
  ASSERT_TRUE(perm.ok()) << perm.status();
  EXPECT_TRUE(Contains(*perm, "fn permute(X: buffer<f32>[2, 3, 4], Y: buffer<f32>[4, 2, 3])"));
  auto reshape = Reshape({{6, 4}}, {-1, 8}, t);
  ASSERT_TRUE(reshape.ok()) << reshape.status();
  EXPECT_TRUE(Contains(*reshape, "Y: buffer<f32>[3, 8]"));
  auto cat = Concat({{{2, 3}}, {{2, 5}}, {{2, 1}}}, 1, t);
  ASSERT_TRUE(cat.ok()) << cat.status();
  EXPECT_TRUE(Contains(*cat,
                       "fn concat(X0: buffer<f32>[2, 3], X1: buffer<f32>[2, 5], "
                       "X2: buffer<f32>[2, 1], Y: buffer<f32>[2, 9])"));
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  auto slice = Slice({{10, 7}}, {-1, 1}, {kMin, 100}, {-3, 2}, t);
  ASSERT_TRUE(slice.ok()) << slice.status();
  EXPECT_TRUE(Contains(*slice, "Y: buffer<f32>[4, 3]")) << ir::Print(*slice);
  auto gather = Gather({{100, 16}}, {{3, 5}, ir::kI32}, t);
  ASSERT_TRUE(gather.ok()) << gather.status();
  EXPECT_TRUE(Contains(*gather,
                       "fn gather(Table: buffer<f32>[100, 16], Indices: buffer<i32>[3, 5], "
                       "Y: buffer<f32>[3, 5, 16])"));
  auto pad = Pad({{3, 4}}, {1, 0}, {2, 3}, 0.0, t);
  ASSERT_TRUE(pad.ok()) << pad.status();
  EXPECT_TRUE(Contains(*pad, "Y: buffer<f32>[6, 7]"));
  auto where = Where({{7, 1}, ir::kI32}, {{1, 33}}, {{33}}, t);
  ASSERT_TRUE(where.ok()) << where.status();
  EXPECT_TRUE(Contains(*where,
                       "fn where(Cond: buffer<i32>[7, 1], A: buffer<f32>[1, 33], "
                       "B: buffer<f32>[33], C: buffer<f32>[7, 33])"));
  auto cast = Cast({{5}}, ir::kI32, t);
  ASSERT_TRUE(cast.ok()) << cast.status();
  EXPECT_TRUE(Contains(*cast, "fn cast_i32(X: buffer<f32>[5], Y: buffer<i32>[5])"));
}

// Every operator builds at large shapes (its time is a benchmark figure:
// kiln bench ops reports each workload's build and compile time).
TEST(OpsMoreTest, BuildsAtLargeShapes) {
  const Target t;
  EXPECT_TRUE(ReduceAxes("max", {{4, 5, 6, 4097}}, {1, 3}, false, t).ok());
  EXPECT_TRUE(ArgReduce("argmin", {{33, 4097}}, 1, false, t).ok());
  EXPECT_TRUE(SoftmaxAxis({{33, 4097}}, 1, t).ok());
  EXPECT_TRUE(LogSoftmax({{33, 2048}}, 1, t).ok());
  EXPECT_TRUE(LayerNorm({{33, 4096}}, 1e-5, t).ok());
  EXPECT_TRUE(RmsNorm({{33, 4096}}, 1e-5, t).ok());
  EXPECT_TRUE(Permute({{7, 8, 9, 10}}, {3, 1, 0, 2}, t).ok());
  EXPECT_TRUE(Concat({{{7, 3}}, {{7, 4}}, {{7, 5}}, {{7, 6}}}, 1, t).ok());
}

TEST(OpsMoreTest, Errors) {
  const Target t;
  Target f16;
  f16.shader_f16 = true;
  ExpectError(ReduceAxes("median", {{7}}, {0}, false, t).status(), {"unknown reduce op"});
  ExpectError(ReduceAxes("sum", {{7, 3}}, {2}, false, t).status(),
              {"reduce sum", "axis 0 of axes is 2", "[-2, 2)"});
  ExpectError(ReduceAxes("sum", {{7, 3}}, {1, -1}, false, t).status(), {"axis 1 is listed twice"});
  ExpectError(ReduceAxes("sum", {{7, 3}}, {}, false, t).status(), {"no axes"});
  ExpectError(ReduceAxes("sum", {{7, 3}, ir::kF16}, {0}, false, t).status(),
              {"input X of reduce sum", "shader-f16"});
  ExpectError(ReduceAxes("sum", {{7, 0}}, {0}, false, t).status(), {"dimension 1 is 0"});
  ExpectError(ArgReduce("argmed", {{7}}, 0, false, t).status(), {"unknown arg-reduce op"});
  ExpectError(ArgReduce("argmax", {{7}}, 1, false, t).status(), {"argmax: axis is 1"});
  ExpectError(ArgReduce("argmin", {{7}, ir::kI32}, 0, false, t).status(),
              {"input X of argmin", "i32"});
  ExpectError(SoftmaxAxis({{7, 3}}, -3, t).status(), {"softmax: axis is -3"});
  ExpectError(LogSoftmax({{1, 2, 3, 4, 5}}, 0, t).status(), {"input X of log_softmax", "rank 5"});
  ExpectError(LayerNorm({{7, 3}}, -1.0, t).status(), {"layer_norm: eps is -1"});
  ExpectError(RmsNorm({{7, 3}}, std::numeric_limits<double>::quiet_NaN(), t).status(),
              {"rms_norm: eps"});
  ExpectError(RmsNorm({{7, 3}, ir::kF16}, 1e-5, t).status(), {"input X of rms_norm", "shader-f16"});
  EXPECT_TRUE(RmsNorm({{7, 3}, ir::kF16}, 1e-5, f16).ok());

  ExpectError(Permute({{2, 3}}, {0}, t).status(), {"permute: perm has 1 entries"});
  ExpectError(Permute({{2, 3}}, {1, 1}, t).status(), {"perm entry 1 is 1"});
  ExpectError(Permute({{2, 3}, ir::kU32}, {1, 0}, t).status(),
              {"input X of permute", "f32, f16 and i32"});
  ExpectError(Reshape({{6, 4}}, {5, 5}, t).status(), {"reshape", "25 elements", "24"});
  ExpectError(Reshape({{6, 4}}, {-1, 5}, t).status(), {"cannot infer dimension 0"});
  ExpectError(Reshape({{6, 4}}, {-1, -1}, t).status(), {"dimension 1", "is -1"});
  ExpectError(Reshape({{6, 4}}, {0, 4}, t).status(), {"dimension 0", "is 0"});
  ExpectError(Reshape({{24}}, {1, 2, 3, 2, 2}, t).status(), {"rank 5"});
  ExpectError(Concat({{{2, 3}}}, 0, t).status(), {"at least 2 inputs"});
  ExpectError(Concat({{{2, 3}}, {{3, 3}}}, 1, t).status(), {"concat: X1", "dimension 0 differs"});
  ExpectError(Concat({{{2, 3}}, {{2, 3, 1}}}, 0, t).status(), {"X1", "rank 3"});
  ExpectError(Concat({{{2, 3}}, {{2, 3}, ir::kI32}}, 0, t).status(), {"dtype mismatch"});
  ExpectError(Concat({{{2, 3}}, {{2, 3}}}, 2, t).status(), {"concat: axis is 2"});
  ExpectError(Concat(std::vector<TensorType>(8, TensorType{{2, 3}}), 0, t).status(),
              {"9 storage buffers"});
  ExpectError(Slice({{5, 5}}, {0}, {5, 5}, {1, 1}, t).status(), {"starts has 1 entries"});
  ExpectError(Slice({{5, 5}}, {0, 0}, {5, 5}, {1, 0}, t).status(), {"step 1 is 0"});
  ExpectError(Slice({{5, 5}}, {3, 0}, {2, 5}, {1, 1}, t).status(), {"axis 0", "is empty"});
  ExpectError(Gather({{10}}, {{3}, ir::kI32}, t).status(), {"Table of gather", "2-D"});
  ExpectError(Gather({{10, 4}}, {{3}}, t).status(), {"Indices of gather", "must be i32"});
  ExpectError(Gather({{10, 4}}, {{3, 2, 2, 2}, ir::kI32}, t).status(), {"ranks 1 to 3"});
  ExpectError(Pad({{3, 4}}, {1}, {1, 1}, 0.0, t).status(), {"pad: before and after"});
  ExpectError(Pad({{3, 4}}, {1, -1}, {1, 1}, 0.0, t).status(), {"axis 1", "at least 0"});
  ExpectError(Pad({{3, 4}, ir::kI32}, {1, 1}, {1, 1}, 0.5, t).status(), {"not an i32"});
  ExpectError(Where({{7}, ir::kI32}, {{7}}, {{7}, ir::kI32}, t).status(),
              {"where: dtype mismatch"});
  ExpectError(Where({{7}, ir::kF16}, {{7}}, {{7}}, f16).status(), {"Cond is f16"});
  ExpectError(Where({{5}, ir::kI32}, {{7}}, {{7}}, t).status(),
              {"where: Cond", "do not broadcast"});
  ExpectError(Cast({{5}}, ir::kF16, t).status(), {"result type of cast", "shader-f16"});
  ExpectError(Cast({{5}}, ir::kU32, t).status(), {"result type of cast", "u32"});
}

}  // namespace
}  // namespace kiln::ops
