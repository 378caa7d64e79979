#include "kiln/ir/builder.h"

#include <gtest/gtest.h>

#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/verifier.h"

namespace kiln::ir {
namespace {

TEST(BuilderTest, BuildsTheElementwiseKernel) {
  IRBuilder b("vadd");
  Var n = b.ScalarParam("n", kI32);
  Buffer a = b.BufferParam("A", kF32, {n});
  Buffer bb = b.BufferParam("B", kF32, {n});
  Buffer c = b.BufferParam("C", kF32, {n});
  b.SetAttr("tag", "elementwise");
  b.For("bx", LoopKind::kBlockX, 0, (n + 63) / 64, [&](Var bx) {
    b.For("tx", LoopKind::kThreadX, 0, 64, [&](Var tx) {
      Var i = b.Let("i", bx * 64 + tx);
      b.If(i < n, [&] { b.Store(c, {i}, Load(a, {i}) + Load(bb, {i})); });
    });
  });
  Function f = b.Build();
  const char* expected =
      "fn vadd(n: i32, A: buffer<f32>[n], B: buffer<f32>[n], C: buffer<f32>[n]) attributes "
      "{\"tag\": \"elementwise\"} {\n"
      "  for bx in blockIdx.x(0, (n + 63) / 64) {\n"
      "    for tx in threadIdx.x(0, 64) {\n"
      "      let i: i32 = bx * 64 + tx\n"
      "      if (i < n) {\n"
      "        C[i] = A[i] + B[i]\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n";
  EXPECT_EQ(Print(f), expected);
  EXPECT_TRUE(Verify(f).ok()) << Verify(f);
  StatusOr<Function> parsed = ParseFunction(expected);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(Print(*parsed), expected);
}

TEST(BuilderTest, SharedMemoryReductionWithElseAndWhile) {
  IRBuilder b("reduce");
  Buffer x = b.BufferParam("X", kF32, {Expr(256)});
  Buffer y = b.BufferParam("Y", kF32, {Expr(1)});
  b.For("tx", LoopKind::kThreadX, 0, 128, [&](Var tx) {
    b.Allocate("tile", kF32, {128}, MemoryScope::kShared, [&](Buffer tile) {
      b.Store(tile, {tx}, Load(x, {tx}) + Load(x, {tx + 128}));
      b.Barrier();
      b.Allocate("stride", kI32, {1}, MemoryScope::kLocal, [&](Buffer stride) {
        b.Store(stride, {0}, 64);
        b.While(Load(stride, {0}) > 0, [&] {
          b.If(tx < Load(stride, {0}), [&] {
            b.Store(tile, {tx}, Load(tile, {tx}) + Load(tile, {tx + Load(stride, {0})}));
          });
          b.Barrier();
          b.Store(stride, {0}, Load(stride, {0}) / 2);
        });
      });
      b.If(
          tx == 0, [&] { b.Store(y, {0}, Load(tile, {0})); },
          [&] { b.Assert(tx > 0, "positive"); });
    });
  });
  Function f = b.Build();
  EXPECT_EQ(Print(f),
            "fn reduce(X: buffer<f32>[256], Y: buffer<f32>[1]) {\n"
            "  for tx in threadIdx.x(0, 128) {\n"
            "    alloc tile: f32[128] shared {\n"
            "      tile[tx] = X[tx] + X[tx + 128]\n"
            "      workgroup_barrier()\n"
            "      alloc stride: i32[1] local {\n"
            "        stride[0] = 64\n"
            "        while (stride[0] > 0) {\n"
            "          if (tx < stride[0]) {\n"
            "            tile[tx] = tile[tx] + tile[tx + stride[0]]\n"
            "          }\n"
            "          workgroup_barrier()\n"
            "          stride[0] = stride[0] / 2\n"
            "        }\n"
            "      }\n"
            "      if (tx == 0) {\n"
            "        Y[0] = tile[0]\n"
            "      } else {\n"
            "        assert(tx > 0, \"positive\")\n"
            "      }\n"
            "    }\n"
            "  }\n"
            "}\n");
  // The while condition loads shared memory, so the barrier inside it is
  // (conservatively) under thread-dependent control flow.
  EXPECT_FALSE(Verify(f).ok());
}

TEST(BuilderTest, LetsScopeOverTheRestOfTheBlock) {
  IRBuilder b("lets");
  Buffer a = b.BufferParam("A", kI32, {Expr(4)});
  b.Store(a, {0}, 1);
  Var x = b.Let("x", Expr(2));
  Var y = b.Let("y", x * 3);
  b.Store(a, {1}, y);
  b.Store(a, {2}, x);
  Function f = b.Build();
  const auto* seq = f.body().as<SeqNode>();
  ASSERT_NE(seq, nullptr);
  ASSERT_EQ(seq->stmts.size(), 2u);
  EXPECT_NE(seq->stmts[1].as<LetStmtNode>(), nullptr);
  EXPECT_EQ(Print(f),
            "fn lets(A: buffer<i32>[4]) {\n"
            "  A[0] = 1\n"
            "  let x: i32 = 2\n"
            "  let y: i32 = x * 3\n"
            "  A[1] = y\n"
            "  A[2] = x\n"
            "}\n");
  // Build leaves the builder usable.
  b.Store(a, {3}, 4);
  EXPECT_NE(Print(b.Build()).find("A[3] = 4"), std::string::npos);
}

}  // namespace
}  // namespace kiln::ir
