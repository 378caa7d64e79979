#include "kiln/transform/vectorize.h"

#include <gtest/gtest.h>

#include "kiln/ir/ir.h"
#include "kiln/transform/testing.h"

namespace kiln::transform {
namespace {

using namespace ::kiln::ir;  // NOLINT: IR builder vocabulary

TEST(VectorizeTest, ContiguousAccessesBecomeRampsAndInvariantsBroadcasts) {
  IRBuilder b("axpy");
  Var n = b.ScalarParam("n", kI32);
  Var alpha = b.ScalarParam("alpha", kF32);
  Buffer X = b.BufferParam("X", kF32, {n});
  Buffer Y = b.BufferParam("Y", kF32, {n});
  b.For("i", LoopKind::kSerial, 0, n / 4, [&](Var i) {
    b.For("v", LoopKind::kVectorized, 0, 4, [&](Var v) {
      Var j = b.Let("j", i * 4 + v);
      b.Store(Y, {j}, alpha * Load(X, {j}) + Load(Y, {j}));
    });
  });
  EXPECT_EQ(PrintedOrError(Vectorize(b.Build())),
            R"(fn axpy(n: i32, alpha: f32, X: buffer<f32>[n], Y: buffer<f32>[n]) {
  for i in serial(0, n / 4) {
    Y[ramp(i * 4, 1, 4)] = broadcast(alpha, 4) * X[ramp(i * 4, 1, 4)] + Y[ramp(i * 4, 1, 4)]
  }
}
)");
}

TEST(VectorizeTest, StridedAccessesBecomeGathers) {
  IRBuilder b("transpose");
  Buffer A = b.BufferParam("A", kF32, {16});
  Buffer B = b.BufferParam("B", kF32, {16});
  b.For("i", LoopKind::kSerial, 0, 4, [&](Var i) {
    b.For("v", LoopKind::kVectorized, 0, 4,
          [&](Var v) { b.Store(B, {i * 4 + v}, Load(A, {v * 4 + i})); });
  });
  EXPECT_EQ(PrintedOrError(Vectorize(b.Build())),
            R"(fn transpose(A: buffer<f32>[16], B: buffer<f32>[16]) {
  for i in serial(0, 4) {
    B[ramp(i * 4, 1, 4)] = A[ramp(i, 4, 4)]
  }
}
)");
}

TEST(VectorizeTest, CallsAndSelectsAreWidened) {
  IRBuilder b("relu3");
  Buffer A = b.BufferParam("A", kF32, {3});
  b.For("v", LoopKind::kVectorized, 0, 3, [&](Var v) {
    Expr x = Load(A, {v});
    b.Store(A, {v}, Select(x > 0.0, Call(Intrinsic::kExp, {x}), FloatConst(kF32, 0.0)));
  });
  EXPECT_EQ(PrintedOrError(Vectorize(b.Build())), R"(fn relu3(A: buffer<f32>[3]) {
  A[ramp(0, 1, 3)] = select(A[ramp(0, 1, 3)] > broadcast(0.0, 3), exp(A[ramp(0, 1, 3)]), broadcast(0.0, 3))
}
)");
}

// f32 <-> u32 keeps one lane per lane and widens (a reinterpret that packs
// or splits lanes, f16x2 <-> u32, is still refused).
TEST(VectorizeTest, ReinterpretsOfOneWidthAreWidened) {
  IRBuilder b("signs");
  Buffer A = b.BufferParam("A", kF32, {4});
  Buffer U = b.BufferParam("U", kU32, {4});
  b.For("v", LoopKind::kVectorized, 0, 4,
        [&](Var v) { b.Store(U, {v}, Reinterpret(kU32, Load(A, {v}))); });
  EXPECT_EQ(PrintedOrError(Vectorize(b.Build())),
            R"(fn signs(A: buffer<f32>[4], U: buffer<u32>[4]) {
  U[ramp(0, 1, 4)] = reinterpret<u32x4>(A[ramp(0, 1, 4)])
}
)");
}

TEST(VectorizeTest, ExtentOtherThanTwoToFourIsAnError) {
  IRBuilder b("wide");
  Buffer A = b.BufferParam("A", kF32, {8});
  b.For("v", LoopKind::kVectorized, 0, 8, [&](Var v) { b.Store(A, {v}, FloatConst(kF32, 0.0)); });
  ExpectError(Vectorize(b.Build()), StatusCode::kInvalidArgument,
              "vectorized loop `v` has extent 8; it must be a constant 2, 3 or 4");
}

TEST(VectorizeTest, VaryingConditionIsAnError) {
  IRBuilder b("branchy");
  Buffer A = b.BufferParam("A", kF32, {4});
  b.For("v", LoopKind::kVectorized, 0, 4,
        [&](Var v) { b.If(v < 2, [&] { b.Store(A, {v}, FloatConst(kF32, 0.0)); }); });
  ExpectError(Vectorize(b.Build()), StatusCode::kInvalidArgument,
              "cannot vectorize an if condition that depends on the loop variable");
}

TEST(VectorizeTest, VaryingInt8x4IsAnError) {
  // A uniform int8x4 stays scalar; one that varies would need a vector type.
  auto dot = [](bool varying) {
    IRBuilder b("packed");
    Buffer I = b.BufferParam("I", kI32, {4});
    Buffer O = b.BufferParam("O", kI32, {4});
    b.For("v", LoopKind::kVectorized, 0, 2, [&](Var v) {
      Expr first = Reinterpret(kInt8x4, varying ? Load(I, {v}) : Load(I, {1}));
      b.Store(O, {v}, Call(Intrinsic::kDot4I8, {first, Reinterpret(kInt8x4, Load(I, {0}))}) + v);
    });
    return Vectorize(b.Build());
  };
  ExpectError(dot(true), StatusCode::kInvalidArgument,
              "cannot vectorize loop `v`: `reinterpret<int8x4>(I[v])` is an int8x4 value that "
              "differs across the loop's iterations");
  EXPECT_TRUE(dot(false).ok());
  // Nor is a uniform one stored at every lane.
  IRBuilder b("copied");
  Buffer A = b.BufferParam("A", kInt8x4, {4});
  Buffer O = b.BufferParam("O", kInt8x4, {4});
  b.For("v", LoopKind::kVectorized, 0, 4, [&](Var v) { b.Store(O, {v}, Load(A, {0})); });
  ExpectError(Vectorize(b.Build()), StatusCode::kInvalidArgument,
              "cannot vectorize an int8x4 value used by every lane");
}

TEST(VectorizeTest, InvariantStoreIsAnError) {
  IRBuilder b("sum");
  Buffer A = b.BufferParam("A", kF32, {4});
  Buffer S = b.BufferParam("S", kF32, {1});
  b.For("v", LoopKind::kVectorized, 0, 4,
        [&](Var v) { b.Store(S, {0}, Load(S, {0}) + Load(A, {v})); });
  ExpectError(Vectorize(b.Build()), StatusCode::kInvalidArgument,
              "`S` is stored and loaded at [0], which may be one element for two iterations");
  IRBuilder c("last");
  Buffer T = c.BufferParam("T", kF32, {1});
  c.For("v", LoopKind::kVectorized, 0, 4, [&](Var v) { c.Store(T, {0}, Cast(kF32, v)); });
  ExpectError(Vectorize(c.Build()), StatusCode::kInvalidArgument,
              "a store whose index does not depend on the loop variable");
}

// Iterations that read or write what another writes are refused: the
// vectorized body runs one statement for every lane before the next.
TEST(VectorizeTest, DependencesBetweenIterationsAreAnError) {
  {
    IRBuilder b("shift");
    Buffer O = b.BufferParam("O", kI32, {5});
    b.For("j", LoopKind::kVectorized, 0, 4, [&](Var j) {
      b.Store(O, {j}, j);
      b.Store(O, {j + 1}, Load(O, {j}) + 1);
    });
    ExpectError(Vectorize(b.Build()), StatusCode::kInvalidArgument,
                "cannot vectorize loop `j`: `O` is stored at two indices, [j] and [j + 1]");
  }
  {
    IRBuilder b("reverse");
    Buffer O = b.BufferParam("O", kI32, {4});
    b.For("j", LoopKind::kVectorized, 0, 4, [&](Var j) { b.Store(O, {3 - j}, Load(O, {j}) + 10); });
    ExpectError(Vectorize(b.Build()), StatusCode::kInvalidArgument,
                "`O` is stored and loaded at different indices, [3 - j] and [j]");
  }
  {
    IRBuilder b("halves");
    Buffer O = b.BufferParam("O", kI32, {2});
    b.For("j", LoopKind::kVectorized, 0, 4,
          [&](Var j) { b.Store(O, {j / 2}, Load(O, {j / 2}) + 1); });
    ExpectError(Vectorize(b.Build()), StatusCode::kInvalidArgument,
                "`O` is stored and loaded at [j / 2], which may be one element for two iterations");
  }
  {
    // One element per iteration, read then written: vectorized.
    IRBuilder b("own");
    Buffer O = b.BufferParam("O", kI32, {8});
    b.For("j", LoopKind::kVectorized, 0, 4, [&](Var j) {
      Var k = b.Let("k", j * 2 + 1);
      b.Store(O, {k}, Load(O, {k}) + 1);
      b.Store(O, {k}, Load(O, {k}) * 3);
    });
    const std::string printed = PrintedOrError(Vectorize(b.Build()));
    EXPECT_NE(printed.find("O[ramp(1, 2, 4)] = O[ramp(1, 2, 4)] + broadcast(1, 4)"),
              std::string::npos)
        << printed;
  }
}

// A loop inside the vectorized one runs its body for every lane before its
// next iteration, where the loop ran it whole for each iteration in turn:
// an element one lane's inner iterations store and another's reach is
// refused.
TEST(VectorizeTest, InnerLoopsReachingAnotherLanesElementsAreAnError) {
  // v + s: iteration v's s = 1 stores the element iteration v + 1's s = 0 does.
  auto inner = [](bool let, bool load) {
    IRBuilder b("overlap");
    Buffer X = b.BufferParam("X", kF32, {8});
    b.For("v", LoopKind::kVectorized, 0, 4, [&](Var v) {
      b.For("s", LoopKind::kSerial, 0, 2, [&](Var s) {
        Expr index = let ? Expr(b.Let("k", v + s)) : v + s;
        Expr value = Cast(kF32, v * 10 + s);
        b.Store(X, {index}, load ? Load(X, {index}) * 2.0 + value : value);
      });
    });
    return Vectorize(b.Build());
  };
  ExpectError(inner(false, false), StatusCode::kInvalidArgument,
              "cannot vectorize loop `v`: `X` is stored at [v + s], which may be one element for "
              "two iterations (its store runs more than once in each)");
  ExpectError(inner(true, false), StatusCode::kInvalidArgument, "`X` is stored at [k]");
  ExpectError(inner(false, true), StatusCode::kInvalidArgument,
              "`X` is stored and loaded at [v + s], which may be one element for two iterations");

  // v * 8 + s: lanes 8 apart, s spanning 8 values (0 to 7) or 9, or an
  // extent not known.
  auto rows = [](Expr extent, LoopKind kind) {
    IRBuilder b("rows");
    Var n = b.ScalarParam("n", kI32);
    Buffer X = b.BufferParam("X", kF32, {40 + n});
    b.For("v", LoopKind::kVectorized, 0, 4, [&](Var v) {
      b.For("s", kind, 0, extent.defined() ? extent : n,
            [&](Var s) { b.Store(X, {v * 8 + s}, Cast(kF32, s)); });
    });
    return Vectorize(b.Build());
  };
  EXPECT_TRUE(rows(IntConst(kI32, 8), LoopKind::kSerial).ok());
  EXPECT_TRUE(rows(IntConst(kI32, 8), LoopKind::kUnrolled).ok());
  ExpectError(rows(IntConst(kI32, 9), LoopKind::kSerial), StatusCode::kInvalidArgument,
              "`X` is stored at [v * 8 + s], which may be one element for two iterations");
  ExpectError(rows(Expr(), LoopKind::kSerial), StatusCode::kInvalidArgument,
              "`X` is stored at [v * 8 + s]");

  // s * 4 + v, s * 8 + v (lanes interleaved, whatever the extent), a loaded
  // accumulator at the lane's own element, and s * 2 + v (refused).
  for (int period : {4, 8, 2}) {
    IRBuilder b("interleaved");
    Var n = b.ScalarParam("n", kI32);
    Buffer X = b.BufferParam("X", kF32, {n * 8 + 8});
    Buffer Y = b.BufferParam("Y", kF32, {4});
    b.For("v", LoopKind::kVectorized, 0, 4, [&](Var v) {
      b.Store(Y, {v}, FloatConst(kF32, 0.0));
      b.For("s", LoopKind::kSerial, 0, n, [&](Var s) {
        b.Store(Y, {v}, Load(Y, {v}) + Load(X, {s * period + v}));
        b.Store(X, {s * period + v}, Load(X, {s * period + v}) + 1.0);
      });
    });
    if (period == 2) {
      ExpectError(Vectorize(b.Build()), StatusCode::kInvalidArgument,
                  "`X` is stored and loaded at [s * 2 + v]");
    } else {
      EXPECT_TRUE(Vectorize(b.Build()).ok()) << period;
    }
  }
}

// An unrolled loop inside leaves accesses whole vectors apart: accepted;
// part of a vector apart, or apart in two dimensions: refused.
TEST(VectorizeTest, AccessesWholeVectorsApartAreIndependent) {
  auto copies = [](std::vector<std::pair<int, int>> offsets) {
    IRBuilder b("copies");
    Buffer X = b.BufferParam("X", kF32, {4, 16});
    b.For("v", LoopKind::kVectorized, 0, 4, [&](Var v) {
      for (auto [row, column] : offsets) {
        const Expr at = column == 0 ? Expr(v) : column > 0 ? v + column : v - (-column);
        b.Store(X, {row, at}, Load(X, {row, at}) + Cast(kF32, v));
      }
    });
    return Vectorize(b.Build());
  };
  const std::string printed = PrintedOrError(copies({{1, 0}, {1, 4}, {1, 12}}));
  EXPECT_NE(printed.find("X[1, ramp(12, 1, 4)] = X[1, ramp(12, 1, 4)] + "), std::string::npos)
      << printed;
  ExpectError(copies({{1, 0}, {1, 2}}), StatusCode::kInvalidArgument,
              "`X` is stored at two indices, [1, v] and [1, v + 2]");
  ExpectError(copies({{1, 0}, {2, 4}}), StatusCode::kInvalidArgument,
              "`X` is stored at two indices, [1, v] and [2, v + 4]");
  ExpectError(copies({{1, 0}, {1, -6}}), StatusCode::kInvalidArgument,
              "`X` is stored at two indices, [1, v] and [1, v - 6]");
  EXPECT_TRUE(copies({{1, 0}, {1, -8}}).ok());
}

// The loop variable reached through a long chain of lets still counts:
// j - 2 * (k / 2), k = j through 40 lets, is j % 2 (lanes 0, 1, 0, 1).
TEST(VectorizeTest, LoopVariableBehindLongLetChainsIsSeen) {
  for (int links : {1, 15, 16, 17, 33, 40, 300}) {
    IRBuilder b("chain");
    Buffer O = b.BufferParam("O", kI32, {4});
    b.For("j", LoopKind::kVectorized, 0, 4, [&](Var j) {
      Var k = b.Let("k0", j);
      for (int i = 1; i < links; ++i) k = b.Let("k" + std::to_string(i), k + 0);
      Expr index = j - (k / 2) * 2;
      b.Store(O, {index}, Load(O, {index}) + 1);
    });
    ExpectError(Vectorize(b.Build()), StatusCode::kInvalidArgument,
                "which may be one element for two iterations");
  }
}

TEST(VectorizeTest, StepOtherThanOneIsAnError) {
  IRBuilder b("stride");
  Buffer O = b.BufferParam("O", kI32, {8});
  b.For(
      "j", LoopKind::kVectorized, 1, 4, [&](Var j) { b.Store(O, {j}, j); }, 2);
  ExpectError(Vectorize(b.Build()), StatusCode::kInvalidArgument,
              "vectorized loop `j` has step 2; a vectorized loop steps by 1");
}

TEST(VectorizeTest, BarrierIsAnError) {
  IRBuilder b("sync");
  Buffer A = b.BufferParam("A", kF32, {4});
  b.For("v", LoopKind::kVectorized, 0, 4, [&](Var v) {
    b.Store(A, {v}, FloatConst(kF32, 0.0));
    b.Barrier();
  });
  ExpectError(Vectorize(b.Build()), StatusCode::kInvalidArgument, "cannot vectorize a barrier");
}

}  // namespace
}  // namespace kiln::transform
