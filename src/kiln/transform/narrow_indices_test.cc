#include "kiln/transform/narrow_indices.h"

#include <gtest/gtest.h>

#include "kiln/ir/ir.h"
#include "kiln/transform/testing.h"

namespace kiln::transform {
namespace {

using namespace ::kiln::ir;  // NOLINT: IR builder vocabulary

TEST(NarrowIndicesTest, SixtyFourBitIndexArithmeticBecomes32Bit) {
  IRBuilder b("scale");
  Var n = b.ScalarParam("n", kI32);
  Buffer A = b.BufferParam("A", kF32, {n});
  b.For("i", LoopKind::kSerial, IntConst(kI64, 0), Cast(kI64, n), [&](Var i) {
    Var j = b.Let("j", i * IntConst(kI64, 2) + IntConst(kI64, 1));
    b.Store(A, {j / IntConst(kI64, 2)}, Cast(kF32, j));
  });
  EXPECT_EQ(PrintedOrError(NarrowIndices(b.Build())), R"(fn scale(n: i32, A: buffer<f32>[n]) {
  for i in serial(0, n) {
    let j: i32 = i * 2 + 1
    A[j / 2] = f32(j)
  }
}
)");
}

TEST(NarrowIndicesTest, UnsignedIndicesNarrowToU32) {
  IRBuilder b("u");
  Buffer A = b.BufferParam("A", kF32, {8});
  b.For("i", LoopKind::kSerial, IntConst(kU64, 0), IntConst(kU64, 8),
        [&](Var i) { b.Store(A, {i}, FloatConst(kF32, 0.0)); });
  EXPECT_EQ(PrintedOrError(NarrowIndices(b.Build())), R"(fn u(A: buffer<f32>[8]) {
  for i in serial(0u32, 8u32) {
    A[i] = 0.0
  }
}
)");
}

TEST(NarrowIndicesTest, ConstantThatDoesNotFitIsAnErrorNamingIt) {
  IRBuilder b("big");
  Buffer A = b.BufferParam("A", kF32, {8});
  b.For("i", LoopKind::kSerial, IntConst(kI64, 0), IntConst(kI64, 8), [&](Var i) {
    b.Store(A, {(i + IntConst(kI64, 5000000000)) % IntConst(kI64, 8)}, FloatConst(kF32, 0.0));
  });
  ExpectError(NarrowIndices(b.Build()), StatusCode::kInvalidArgument,
              "constant `5000000000i64` does not fit in i32");
}

TEST(NarrowIndicesTest, LoopRangeThatDoesNotFitIsAnError) {
  IRBuilder b("long");
  Buffer A = b.BufferParam("A", kF32, {8});
  b.For("i", LoopKind::kSerial, IntConst(kI64, 2147483000), IntConst(kI64, 1000),
        [&](Var i) { b.Store(A, {i % IntConst(kI64, 8)}, FloatConst(kF32, 0.0)); });
  ExpectError(NarrowIndices(b.Build()), StatusCode::kInvalidArgument,
              "loop `i` over [2147483000, 2147484000) does not fit in i32");
}

TEST(NarrowIndicesTest, SixtyFourBitBuffersAreRejected) {
  IRBuilder b("wide");
  Buffer A = b.BufferParam("A", kI64, {8});
  b.Store(A, {0}, IntConst(kI64, 1));
  ExpectError(NarrowIndices(b.Build()), StatusCode::kInvalidArgument,
              "buffer 'A' has 64-bit elements (i64)");
}

TEST(NarrowIndicesTest, ThirtyTwoBitFunctionsAreUnchanged) {
  IRBuilder b("same");
  Var n = b.ScalarParam("n", kI32);
  Buffer A = b.BufferParam("A", kF32, {n});
  b.For("i", LoopKind::kSerial, 0, n, [&](Var i) { b.Store(A, {i}, FloatConst(kF32, 1.0)); });
  Function f = b.Build();
  EXPECT_EQ(PrintedOrError(NarrowIndices(f)), Print(f));
}

}  // namespace
}  // namespace kiln::transform
