#include "kiln/transform/narrow_indices.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

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
    // j may pass 2^31 (it wraps in 32 bits), but j - 2 * i is i again
    // modulo 2^32, which is all an index needs.
    Var j = b.Let("j", i * IntConst(kI64, 3));
    b.Store(A, {j - i * IntConst(kI64, 2)}, Cast(kF32, i));
  });
  EXPECT_EQ(PrintedOrError(NarrowIndices(b.Build())), R"(fn scale(n: i32, A: buffer<f32>[n]) {
  for i in serial(0, n) {
    let j: i32 = i * 3
    A[j - i * 2] = f32(i)
  }
}
)");
}

TEST(NarrowIndicesTest, ValuesBoundedByConstantsAndLoopsMayBeDividedAndCompared) {
  IRBuilder b("bounded");
  Var n = b.ScalarParam("n", kI32);
  Buffer A = b.BufferParam("A", kF32, {n});
  b.For("i", LoopKind::kSerial, IntConst(kI64, 0), IntConst(kI64, 1000), [&](Var i) {
    Var j = b.Let("j", i * IntConst(kI64, 2) + Cast(kI64, Cast(kI16, n)));
    b.If(j / IntConst(kI64, 2) < Cast(kI64, n),
         [&] { b.Store(A, {FloorMod(j, IntConst(kI64, 7))}, Cast(kF32, Min(j, i))); });
  });
  EXPECT_EQ(PrintedOrError(NarrowIndices(b.Build())), R"(fn bounded(n: i32, A: buffer<f32>[n]) {
  for i in serial(0, 1000) {
    let j: i32 = i * 2 + i32(i16(n))
    if (j / 2 < n) {
      A[floor_mod(j, 7)] = f32(min(j, i))
    }
  }
}
)");
}

TEST(NarrowIndicesTest, DivisionOfAValueThatMayPass32BitsIsRefused) {
  IRBuilder b("halve");
  Var n = b.ScalarParam("n", kI32);
  Buffer A = b.BufferParam("A", kF32, {n});
  b.For("i", LoopKind::kSerial, IntConst(kI64, 0), Cast(kI64, n), [&](Var i) {
    Var j = b.Let("j", i * IntConst(kI64, 2) + IntConst(kI64, 1));
    b.Store(A, {j / IntConst(kI64, 2)}, FloatConst(kF32, 0.0));
  });
  ExpectError(NarrowIndices(b.Build()), StatusCode::kInvalidArgument,
              "cannot narrow to 32 bits: `j / 2i64` needs the value of `j`, which may lie "
              "outside i32 (it is in [1, 4294967293])");
}

TEST(NarrowIndicesTest, UsesThatNeedTheWholeValueAreRefused) {
  struct Case {
    std::function<void(IRBuilder&, Buffer, Expr)> body;
    std::string error;
  };
  const std::vector<Case> cases = {
      {[](IRBuilder& b, Buffer A, Expr w) {
         b.If(w < IntConst(kI64, 5), [&] { b.Store(A, {0}, FloatConst(kF32, 1.0)); });
       },
       "`w < 5i64` needs the value of `w`"},
      {[](IRBuilder& b, Buffer A, Expr w) { b.Store(A, {0}, Cast(kF32, w)); },
       "`f32(w)` needs the value of `w`"},
      {[](IRBuilder& b, Buffer A, Expr w) {
         b.Store(A, {0}, Select(Cast(kBool, w), FloatConst(kF32, 1.0), FloatConst(kF32, 2.0)));
       },
       "`bool(w)` needs the value of `w`"},
      {[](IRBuilder& b, Buffer A, Expr w) {
         b.Store(A, {Cast(kI32, Max(w, IntConst(kI64, 0)))}, FloatConst(kF32, 1.0));
       },
       "`max(w, 0i64)` needs the value of `w`"},
      {[](IRBuilder& b, Buffer A, Expr w) {
         b.Store(A, {Cast(kI32, Call(Intrinsic::kShiftRight, {w, IntConst(kI64, 3)}))},
                 FloatConst(kF32, 1.0));
       },
       "`shift_right(w, 3i64)` needs the value of `w`"},
      {[](IRBuilder& b, Buffer A, Expr w) {
         b.Store(A, {Cast(kI32, Call(Intrinsic::kShiftLeft, {IntConst(kI64, 1), w}))},
                 FloatConst(kF32, 1.0));
       },
       "`shift_left(1i64, w)` shifts by `w`, which may lie outside [0, 31]"},
      {[](IRBuilder& b, Buffer A, Expr w) {
         b.Store(A, {Cast(kI32, Call(Intrinsic::kAbs, {w}))}, FloatConst(kF32, 1.0));
       },
       "`abs(w)` needs the value of `w`"},
      {[](IRBuilder& b, Buffer A, Expr w) {
         b.Store(A, {Cast(kI32, Cast(kI64, Load(A, {0})))}, FloatConst(kF32, 1.0));
       },
       "`i64(A[0])` converts a float to a 64-bit integer"},
  };
  for (const Case& c : cases) {
    IRBuilder b("refused");
    Var n = b.ScalarParam("n", kI32);
    Buffer A = b.BufferParam("A", kF32, {8});
    Var w = b.Let("w", Cast(kI64, n) * IntConst(kI64, 4));
    c.body(b, A, w);
    ExpectError(NarrowIndices(b.Build()), StatusCode::kInvalidArgument, c.error);
  }
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

TEST(NarrowIndicesTest, ConstantsKeepTheirLowBitsWhereThatIsAllTheirUseNeeds) {
  IRBuilder b("big");
  Buffer A = b.BufferParam("A", kF32, {8});
  b.For("i", LoopKind::kSerial, IntConst(kI64, 0), IntConst(kI64, 8), [&](Var i) {
    b.Store(A, {i + IntConst(kI64, 4294967296) - IntConst(kI64, 4294967296)},
            FloatConst(kF32, 0.0));
  });
  EXPECT_EQ(PrintedOrError(NarrowIndices(b.Build())), R"(fn big(A: buffer<f32>[8]) {
  for i in serial(0, 8) {
    A[i + 0 - 0] = 0.0
  }
}
)");
}

TEST(NarrowIndicesTest, ConstantThatDoesNotFitIsAnErrorWhereItsValueCounts) {
  IRBuilder b("big");
  Buffer A = b.BufferParam("A", kF32, {8});
  b.For("i", LoopKind::kSerial, IntConst(kI64, 0), IntConst(kI64, 8), [&](Var i) {
    b.Store(A, {(i + IntConst(kI64, 5000000000)) % IntConst(kI64, 8)}, FloatConst(kF32, 0.0));
  });
  ExpectError(NarrowIndices(b.Build()), StatusCode::kInvalidArgument,
              "`(i + 5000000000i64) % 8i64` needs the value of `i + 5000000000i64`, which may lie "
              "outside i32 (it is in [5000000000, 5000000007])");
}

TEST(NarrowIndicesTest, LoopRangeThatDoesNotFitIsAnError) {
  IRBuilder b("long");
  Buffer A = b.BufferParam("A", kF32, {8});
  b.For("i", LoopKind::kSerial, IntConst(kI64, 2147483000), IntConst(kI64, 1000),
        [&](Var i) { b.Store(A, {i % IntConst(kI64, 8)}, FloatConst(kF32, 0.0)); });
  ExpectError(NarrowIndices(b.Build()), StatusCode::kInvalidArgument,
              "loop `i` over [2147483000, 2147484000) (from `2147483000i64`, extent `1000i64`) "
              "may not fit in i32");
}

TEST(NarrowIndicesTest, SixtyFourBitBuffersAreRejected) {
  IRBuilder b("wide");
  Buffer A = b.BufferParam("A", kI64, {8});
  b.Store(A, {0}, IntConst(kI64, 1));
  ExpectError(NarrowIndices(b.Build()), StatusCode::kInvalidArgument,
              "buffer 'A' has 64-bit elements (i64)");
}

TEST(NarrowIndicesTest, NonConstantLoopsMustFitToo) {
  IRBuilder b("far");
  Var n = b.ScalarParam("n", kI32);
  Buffer A = b.BufferParam("A", kF32, {8});
  b.For("i", LoopKind::kSerial, Cast(kI64, n), Cast(kI64, n),
        [&](Var i) { b.Store(A, {0}, FloatConst(kF32, 0.0)); });
  ExpectError(NarrowIndices(b.Build()), StatusCode::kInvalidArgument,
              "loop `i` over [-2147483648, 4294967294) (from `i64(n)`, extent `i64(n)`) may not "
              "fit in i32");
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
