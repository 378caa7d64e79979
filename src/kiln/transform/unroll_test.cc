#include "kiln/transform/unroll.h"

#include <gtest/gtest.h>

#include "kiln/ir/ir.h"
#include "kiln/transform/testing.h"

namespace kiln::transform {
namespace {

using namespace ::kiln::ir;  // NOLINT: IR builder vocabulary

TEST(UnrollTest, ConstantLoopIsExpanded) {
  IRBuilder b("fill");
  Buffer A = b.BufferParam("A", kI32, {8});
  b.For("k", LoopKind::kUnrolled, 1, 3, [&](Var k) { b.Store(A, {k * 2}, k); });
  EXPECT_EQ(PrintedOrError(Unroll(b.Build())), R"(fn fill(A: buffer<i32>[8]) {
  A[1 * 2] = 1
  A[2 * 2] = 2
  A[3 * 2] = 3
}
)");
}

TEST(UnrollTest, StepAndNestedSerialLoopsAreKept) {
  IRBuilder b("steps");
  Var n = b.ScalarParam("n", kI32);
  Buffer A = b.BufferParam("A", kI32, {n, 8});
  b.For("i", LoopKind::kSerial, 0, n, [&](Var i) {
    b.For(
        "k", LoopKind::kUnrolled, 0, 8,
        [&](Var k) {
          b.Store(A, {i, k}, i);
        },
        4);
  });
  EXPECT_EQ(PrintedOrError(Unroll(b.Build())), R"(fn steps(n: i32, A: buffer<i32>[n, 8]) {
  for i in serial(0, n) {
    A[i, 0] = i
    A[i, 4] = i
  }
}
)");
}

TEST(UnrollTest, EachCopyBindsItsOwnVariablesAndBuffers) {
  IRBuilder b("lets");
  Buffer A = b.BufferParam("A", kI32, {4});
  b.For("k", LoopKind::kUnrolled, 0, 2, [&](Var k) {
    Var t = b.Let("t", Load(A, {k}) + 1);
    b.Allocate("tmp", kI32, {1}, MemoryScope::kLocal, [&](Buffer tmp) {
      b.Store(tmp, {0}, t);
      b.Store(A, {k + 2}, Load(tmp, {0}));
    });
  });
  StatusOr<Function> f = Unroll(b.Build());
  ASSERT_TRUE(f.ok()) << f.status();
  // The verifier rejects a variable bound twice or a buffer allocated twice.
  EXPECT_TRUE(Verify(*f).ok()) << Verify(*f) << "\n" << Print(*f);
  EXPECT_EQ(Print(*f), R"(fn lets(A: buffer<i32>[4]) {
  let t: i32 = A[0] + 1
  alloc tmp: i32[1] local {
    tmp[0] = t
    A[0 + 2] = tmp[0]
  }
  let t_1: i32 = A[1] + 1
  alloc tmp_1: i32[1] local {
    tmp_1[0] = t_1
    A[1 + 2] = tmp_1[0]
  }
}
)");
}

// Shared memory is not multiplied by the trip count: the copies share one
// allocation around them, where local buffers stay one per copy.
TEST(UnrollTest, CopiesShareOneSharedAllocation) {
  IRBuilder b("staged");
  Buffer A = b.BufferParam("A", kI32, {4});
  b.For("k", LoopKind::kUnrolled, 0, 2, [&](Var k) {
    b.Allocate("tile", kI32, {64}, MemoryScope::kShared, [&](Buffer tile) {
      b.Store(tile, {k}, Load(A, {k}));
      b.Store(A, {k + 2}, Load(tile, {k}));
    });
  });
  StatusOr<Function> f = Unroll(b.Build());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(Verify(*f).ok()) << Verify(*f) << "\n" << Print(*f);
  EXPECT_EQ(Print(*f), R"(fn staged(A: buffer<i32>[4]) {
  alloc tile: i32[64] shared {
    tile[0] = A[0]
    A[0 + 2] = tile[0]
    tile[1] = A[1]
    A[1 + 2] = tile[1]
  }
}
)");
}

TEST(UnrollTest, NonConstantExtentIsAnError) {
  IRBuilder b("dyn");
  Var n = b.ScalarParam("n", kI32);
  Buffer A = b.BufferParam("A", kI32, {n});
  b.For("k", LoopKind::kUnrolled, 0, n, [&](Var k) { b.Store(A, {k}, k); });
  ExpectError(Unroll(b.Build()), StatusCode::kInvalidArgument,
              "unrolled loop `k` needs a constant min, extent and step");
}

TEST(UnrollTest, ExtentAboveTheLimitIsAnError) {
  IRBuilder b("huge");
  Buffer A = b.BufferParam("A", kI32, {1000});
  b.For("k", LoopKind::kUnrolled, 0, 1000, [&](Var k) { b.Store(A, {k}, k); });
  ExpectError(Unroll(b.Build(), {.max_extent = 64}), StatusCode::kInvalidArgument,
              "has extent 1000, more than the limit of 64");
}

TEST(UnrollTest, NestedCopiesAboveTheNodeLimitAreAnError) {
  // Three loops of 256 are each within the extent limit; their product of
  // copies is not, and is refused before it is built.
  IRBuilder b("cube");
  Buffer A = b.BufferParam("A", kI32, {1});
  b.For("i", LoopKind::kUnrolled, 0, 256, [&](Var i) {
    b.For("j", LoopKind::kUnrolled, 0, 256, [&](Var j) {
      b.For("k", LoopKind::kUnrolled, 0, 256, [&](Var k) { b.Store(A, {0}, i + j + k); });
    });
  });
  ExpectError(Unroll(b.Build()), StatusCode::kInvalidArgument,
              "unrolled loop `i` makes 256 copies of a body of");
  ExpectError(Unroll(b.Build()), StatusCode::kInvalidArgument,
              "(its unrolled loops expanded): the function's unrolled copies would hold more "
              "than the limit of 1048576 nodes");
}

TEST(UnrollTest, NodeLimitCountsEveryUnrolledLoop) {
  // Sibling loops share the function's limit; exactly at it is allowed.
  auto build = [] {
    IRBuilder b("siblings");
    Buffer A = b.BufferParam("A", kI32, {8});
    for (int n = 0; n < 2; ++n) {
      b.For("k", LoopKind::kUnrolled, 0, 8, [&](Var k) { b.Store(A, {k}, k); });
    }
    return b.Build();
  };
  // Each copy of `A[k] = k` is a store, its index and its value: 3 nodes.
  auto ok = Unroll(build(), {.max_nodes = 48});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ExpectError(Unroll(build(), {.max_nodes = 47}), StatusCode::kInvalidArgument,
              "unrolled loop `k` makes 8 copies of a body of 3 IR nodes: the function's unrolled "
              "copies would hold more than the limit of 47 nodes");
}

}  // namespace
}  // namespace kiln::transform
