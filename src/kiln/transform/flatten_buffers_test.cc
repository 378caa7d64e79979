#include "kiln/transform/flatten_buffers.h"

#include <gtest/gtest.h>

#include "kiln/ir/ir.h"
#include "kiln/transform/testing.h"

namespace kiln::transform {
namespace {

using namespace ::kiln::ir;  // NOLINT: IR builder vocabulary

std::string Flattened(const Function& f) {
  return PrintedOrError(FlattenBuffers(f));
}

TEST(FlattenBuffersTest, RowMajorAndStridedAccessesBecomeOneIndex) {
  IRBuilder b("add");
  Var n = b.ScalarParam("n", kI32);
  Var m = b.ScalarParam("m", kI32);
  Buffer A = b.BufferParam("A", kF32, {n, m});
  Buffer B = b.BufferParam("B", kF32, {n, m}, {1, n});  // column-major
  Buffer C = b.BufferParam("C", kF32, {n, m});
  b.For("i", LoopKind::kSerial, 0, n, [&](Var i) {
    b.For("j", LoopKind::kSerial, 0, m, [&](Var j) {
      b.Store(C, {i, j}, Load(A, {i, j}) + Load(B, {i, j}));
    });
  });
  EXPECT_EQ(
      Flattened(b.Build()),
      R"(fn add(n: i32, m: i32, A: buffer<f32>[n * m], B: buffer<f32>[1 + (n - 1) + (m - 1) * n], C: buffer<f32>[n * m]) {
  for i in serial(0, n) {
    for j in serial(0, m) {
      C[i * m + j] = A[i * m + j] + B[i + j * n]
    }
  }
}
)");
}

TEST(FlattenBuffersTest, ThreeDimensionsUseHornerForm) {
  IRBuilder b("copy3");
  Buffer A = b.BufferParam("A", kF32, {2, 3, 4});
  Buffer C = b.BufferParam("C", kF32, {24});
  b.For("i", LoopKind::kSerial, 0, 2, [&](Var i) {
    b.For("j", LoopKind::kSerial, 0, 3, [&](Var j) {
      b.For("k", LoopKind::kSerial, 0, 4, [&](Var k) {
        b.Store(C, {(i * 3 + j) * 4 + k}, Load(A, {i, j, k}));
      });
    });
  });
  EXPECT_EQ(Flattened(b.Build()), R"(fn copy3(A: buffer<f32>[24], C: buffer<f32>[24]) {
  for i in serial(0, 2) {
    for j in serial(0, 3) {
      for k in serial(0, 4) {
        C[(i * 3 + j) * 4 + k] = A[(i * 3 + j) * 4 + k]
      }
    }
  }
}
)");
}

TEST(FlattenBuffersTest, SharedAllocationsGetConstantFlatSize) {
  IRBuilder b("tile");
  Buffer A = b.BufferParam("A", kF32, {64});
  b.For("tx", LoopKind::kThreadX, 0, 8, [&](Var tx) {
    b.For("ty", LoopKind::kThreadY, 0, 8, [&](Var ty) {
      b.Allocate("T", kF32, {8, 8}, MemoryScope::kShared, [&](Buffer T) {
        b.Store(T, {ty, tx}, Load(A, {ty * 8 + tx}));
        b.Barrier();
        b.Store(A, {tx * 8 + ty}, Load(T, {ty, tx}));
      });
    });
  });
  EXPECT_EQ(Flattened(b.Build()), R"(fn tile(A: buffer<f32>[64]) {
  for tx in threadIdx.x(0, 8) {
    for ty in threadIdx.y(0, 8) {
      alloc T: f32[64] shared {
        T[ty * 8 + tx] = A[ty * 8 + tx]
        workgroup_barrier()
        A[tx * 8 + ty] = T[ty * 8 + tx]
      }
    }
  }
}
)");
}

TEST(FlattenBuffersTest, ContiguousVectorIndexStaysARamp) {
  IRBuilder b("vec");
  Var n = b.ScalarParam("n", kI32);
  Buffer A = b.BufferParam("A", kF32, {n, 4});
  b.For("i", LoopKind::kSerial, 0, n, [&](Var i) {
    b.Store(A, {i, Ramp(0, 1, 4)}, Broadcast(FloatConst(kF32, 1.0), 4));
  });
  EXPECT_EQ(Flattened(b.Build()), R"(fn vec(n: i32, A: buffer<f32>[n * 4]) {
  for i in serial(0, n) {
    A[ramp(i * 4, 1, 4)] = broadcast(1.0, 4)
  }
}
)");
}

TEST(FlattenBuffersTest, WrongNumberOfIndicesIsAnError) {
  IRBuilder b("bad");
  Buffer A = b.BufferParam("A", kF32, {4, 4});
  b.Store(A, {1}, FloatConst(kF32, 0.0));
  ExpectError(FlattenBuffers(b.Build()), StatusCode::kInvalidArgument,
              "buffer 'A' has rank 2 but is indexed with 1 indices");
}

}  // namespace
}  // namespace kiln::transform
