#include "kiln/transform/lower.h"

#include <gtest/gtest.h>

#include "kiln/ir/ir.h"
#include "kiln/transform/testing.h"

namespace kiln::transform {
namespace {

using namespace ::kiln::ir;  // NOLINT: IR builder vocabulary

// A scheduled kernel using every pass: 2-D buffers, i64 indices, an
// unrolled loop and a vectorized one.
Function ScaleRows() {
  IRBuilder b("scale_rows");
  Var n = b.ScalarParam("n", kI32);
  Buffer A = b.BufferParam("A", kF32, {n, 8});
  Buffer B = b.BufferParam("B", kF32, {n, 8});
  b.For("bx", LoopKind::kBlockX, 0, (n + 63) / 64, [&](Var bx) {
    b.For("tx", LoopKind::kThreadX, 0, 64, [&](Var tx) {
      Var row = b.Let("row", Cast(kI64, bx * 64 + tx));
      b.If(row < Cast(kI64, n), [&] {
        b.For("half", LoopKind::kUnrolled, IntConst(kI64, 0), IntConst(kI64, 2), [&](Var half) {
          b.For("v", LoopKind::kVectorized, IntConst(kI64, 0), IntConst(kI64, 4), [&](Var v) {
            Expr col = half * IntConst(kI64, 4) + v;
            b.Store(B, {row, col}, Load(A, {row, col}) * 2.0);
          });
        });
      });
    });
  });
  return b.Build();
}

TEST(LowerTest, ProducesFlatVector32BitIr) {
  StatusOr<Function> lowered = Lower(ScaleRows());
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  std::string text = Print(*lowered);
  // Flattened parameters, the launch recorded, loops expanded.
  EXPECT_NE(text.find("A: buffer<f32>[n * 8]"), std::string::npos) << text;
  EXPECT_NE(text.find("\"launch.workgroup_size_x\": 64"), std::string::npos) << text;
  EXPECT_EQ(text.find("unroll("), std::string::npos) << text;
  EXPECT_EQ(text.find("vectorize("), std::string::npos) << text;
  EXPECT_EQ(text.find("i64"), std::string::npos) << text;
  // Two contiguous vector stores, one per unrolled half.
  size_t first = text.find("B[ramp(");
  ASSERT_NE(first, std::string::npos) << text;
  EXPECT_NE(text.find("B[ramp(", first + 1), std::string::npos) << text;
  EXPECT_TRUE(Verify(*lowered).ok());
}

TEST(LowerTest, InvalidInputIsRejectedByTheVerifier) {
  IRBuilder b("ill_typed");
  Buffer A = b.BufferParam("A", kF32, {4});
  b.Store(A, {0}, IntConst(kI32, 1));  // i32 into an f32 buffer
  StatusOr<Function> lowered = Lower(b.Build());
  ASSERT_FALSE(lowered.ok());
  EXPECT_EQ(lowered.status().code(), StatusCode::kCompileError) << lowered.status();
}

// (A loop the verifier accepts and a pass refuses: unrolled beyond the
// pass's limit.)
TEST(LowerTest, PassErrorsComeBackUnchanged) {
  IRBuilder b("long_unroll");
  Buffer A = b.BufferParam("A", kF32, {1000});
  b.For("u", LoopKind::kUnrolled, 0, 1000, [&](Var u) { b.Store(A, {u}, FloatConst(kF32, 0.0)); });
  ExpectError(Lower(b.Build()), StatusCode::kInvalidArgument,
              "Unroll of 'long_unroll': unrolled loop `u` has extent 1000, more than the limit of "
              "256");
}

TEST(LowerTest, PassesRunInOrderUnderTheirNames) {
  std::vector<std::string> seen;
  LowerOptions options;
  options.verify_each_pass = true;
  options.observer = [&](std::string_view pass, const Function& f, double ms) {
    seen.emplace_back(pass);
    EXPECT_GE(ms, 0.0);
    EXPECT_TRUE(Verify(f).ok()) << pass;
  };
  ASSERT_TRUE(Lower(ScaleRows(), options).ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"lower-thread-bindings", "unroll", "vectorize",
                                            "flatten-buffers", "narrow-indices", "simplify"}));
  EXPECT_NE(FindLoweringPass("unroll"), nullptr);
  EXPECT_EQ(FindLoweringPass("no-such-pass"), nullptr);
}

// A pass that breaks the IR (drops the buffer a store names from the
// parameters) is named at once when every pass is verified.
StatusOr<Function> BrokenPass(const Function& f, const LowerOptions&) {
  std::vector<Param> params;
  for (const Param& p : f.params()) {
    if (!p.is_buffer() || p.buffer().name() != "B") params.push_back(p);
  }
  return f.WithParams(std::move(params));
}

TEST(LowerTest, VerifyingEachPassNamesTheOneThatBrokeTheIr) {
  const Pass passes[] = {{"unroll", LoweringPasses()[1].run},
                         {"drop-a-buffer", BrokenPass},
                         {"vectorize", LoweringPasses()[2].run}};
  LowerOptions options;
  options.verify_each_pass = true;
  StatusOr<Function> result = RunPasses(ScaleRows(), passes, options);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInternal);
  EXPECT_NE(result.status().message().find("pass 'drop-a-buffer' produced invalid IR"),
            std::string::npos)
      << result.status();
  // Without it, the error comes at the end, without the pass's name.
  options.verify_each_pass = false;
  result = RunPasses(ScaleRows(), passes, options);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().message().find("drop-a-buffer"), std::string::npos);
}

// A while loop whose condition only lowering shows to be always true (a let
// too large for the verifier to look through, (n - n) * (...) == 0) is the
// user's error, not an internal one.
TEST(LowerTest, WhileLoopEndlessOnceLoweredIsACompileError) {
  IRBuilder b("spin");
  Var n = b.ScalarParam("n", kI32);
  Buffer A = b.BufferParam("A", kF32, {4});
  b.For("tx", LoopKind::kThreadX, 0, 1, [&](Var tx) {
    Expr sum = n;
    for (int i = 0; i < 40; ++i) sum = sum + n;
    Var z = b.Let("z", (n - n) * sum);
    b.While(z == 0, [&] { b.Store(A, {0}, FloatConst(kF32, 1.0)); });
  });
  Function f = b.Build();
  ASSERT_TRUE(Verify(f).ok()) << Verify(f);
  StatusOr<Function> lowered = Lower(f);
  ASSERT_FALSE(lowered.ok());
  EXPECT_EQ(lowered.status().code(), StatusCode::kCompileError);
  EXPECT_NE(lowered.status().message().find("a while loop's condition is always true once lowered"),
            std::string::npos)
      << lowered.status();
  EXPECT_EQ(lowered.status().message().find("kiln bug"), std::string::npos);
}

}  // namespace
}  // namespace kiln::transform
