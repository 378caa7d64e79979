// The operator library on the CPU: broadcasting, the kernels' shapes and
// schedules, and every argument error.
#include "kiln/ops/ops.h"

#include <gtest/gtest.h>

#include <string>

#include "kiln/ir/printer.h"
#include "kiln/ir/verifier.h"

namespace kiln::ops {
namespace {

Target Default() {
  return Target{};
}

// An argument error by default; a feature the target lacks (shader-f16) is
// kUnavailable.
void ExpectError(const Status& status, const std::vector<std::string>& fragments,
                 StatusCode code = StatusCode::kInvalidArgument) {
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), code) << status;
  for (const std::string& f : fragments) {
    EXPECT_NE(status.message().find(f), std::string::npos)
        << "'" << f << "' not in: " << status.message();
  }
}

TEST(OpsTest, BroadcastShapes) {
  EXPECT_EQ(*BroadcastShapes({7, 1}, {1, 33}), (Shape{7, 33}));
  EXPECT_EQ(*BroadcastShapes({33}, {5, 33}), (Shape{5, 33}));
  EXPECT_EQ(*BroadcastShapes({5, 33}, {1}), (Shape{5, 33}));
  EXPECT_EQ(*BroadcastShapes({3, 1, 5, 1}, {4, 1, 7}), (Shape{3, 4, 5, 7}));
  ExpectError(BroadcastShapes({3}, {4}).status(), {"[3]", "[4]", "do not broadcast"});
  ExpectError(BroadcastShapes({2, 3}, {3, 3}).status(), {"[2, 3]", "[3, 3]", "dimension 0"});
}

TEST(OpsTest, ThreadsPerBlock) {
  TargetLimits limits;
  EXPECT_EQ(ThreadsPerBlock(1, limits), 1);
  EXPECT_EQ(ThreadsPerBlock(7, limits), 8);
  EXPECT_EQ(ThreadsPerBlock(1000, limits), 256);
  limits.max_invocations_per_workgroup = 128;
  EXPECT_EQ(ThreadsPerBlock(1000, limits), 128);
  limits.max_workgroup_size_x = 64;
  EXPECT_EQ(ThreadsPerBlock(1000, limits), 64);
}

TEST(OpsTest, BinaryKernelIsFusedSplitAndBound) {
  auto f = Elementwise("add", {{{7, 1}}, {{1, 33}}}, Default());
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string text = ir::Print(*f);
  EXPECT_NE(text.find("fn elementwise_add(A: buffer<f32>[7, 1], B: buffer<f32>[1, 33], "
                      "C: buffer<f32>[7, 33])"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("blockIdx.x(0, 1)"), std::string::npos) << text;  // 231 elements
  EXPECT_NE(text.find("threadIdx.x(0, 256)"), std::string::npos) << text;
  EXPECT_NE(text.find("< 231"), std::string::npos) << text;  // the tail guard
}

// At least 4 x 256 output elements: four contiguous elements per thread as
// one vector loop; fewer, or a reduction: one element (row) per thread.
TEST(OpsTest, FlatScheduleVectorizesLargeInjectiveKernels) {
  auto add = Elementwise("add", {{{4096}}, {{4096}}}, Default());
  ASSERT_TRUE(add.ok()) << add.status();
  const std::string text = ir::Print(*add);
  EXPECT_NE(text.find("for i_outer_outer in blockIdx.x(0, 4)"), std::string::npos) << text;
  EXPECT_NE(text.find("for i_outer_inner in threadIdx.x(0, 256)"), std::string::npos) << text;
  EXPECT_NE(text.find("for i_inner in vectorize(0, 4)"), std::string::npos) << text;
  EXPECT_EQ(text.find("if ("), std::string::npos) << text;  // 4 x 256 divides 4096

  auto tail = Elementwise("exp", {{{1023}}}, Default());
  ASSERT_TRUE(tail.ok()) << tail.status();
  EXPECT_EQ(ir::Print(*tail).find("vectorize"), std::string::npos) << ir::Print(*tail);
  auto big = Elementwise("exp", {{{1024}}}, Default());
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_NE(ir::Print(*big).find("vectorize(0, 4)"), std::string::npos) << ir::Print(*big);

  auto sum = Reduce("sum", {{4096, 8}}, false, Default());
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(ir::Print(*sum).find("vectorize"), std::string::npos) << ir::Print(*sum);
  auto softmax = Softmax({{2048, 8}}, Default());
  ASSERT_TRUE(softmax.ok()) << softmax.status();
  ASSERT_EQ(softmax->functions.size(), 3u);
  EXPECT_EQ(ir::Print(softmax->functions[0]).find("vectorize"), std::string::npos);
  EXPECT_EQ(ir::Print(softmax->functions[1]).find("vectorize"), std::string::npos);
  EXPECT_NE(ir::Print(softmax->functions[2]).find("vectorize(0, 4)"), std::string::npos)
      << ir::Print(softmax->functions[2]);
}

TEST(OpsTest, ChainIsOneKernelWithEveryStageInlined) {
  auto f = ElementwiseChain({{5, 33}},
                            {ChainStep::With("add", {{33}}), ChainStep::WithConstant("mul", 2.0),
                             ChainStep::Unary("relu"), ChainStep::Unary("tanh")},
                            Default(), "fused");
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string text = ir::Print(*f);
  EXPECT_NE(
      text.find("fn fused(X: buffer<f32>[5, 33], B1: buffer<f32>[33], Y: buffer<f32>[5, 33])"),
      std::string::npos)
      << text;
  EXPECT_EQ(text.find("T1"), std::string::npos) << text;
  EXPECT_EQ(text.find("T3"), std::string::npos) << text;
  EXPECT_NE(text.find("tanh("), std::string::npos) << text;
}

// relu and gelu let-bind their input: a chain of 40 of them is linear in
// size, not exponential.
TEST(OpsTest, LongChainsStaySmall) {
  std::vector<ChainStep> steps;
  for (int r = 0; r < 20; ++r) {
    steps.push_back(ChainStep::Unary("relu"));
    steps.push_back(ChainStep::Unary("gelu"));
  }
  auto f = ElementwiseChain({{1000}}, steps, Default());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_LT(ir::Print(*f).size(), 5000u);
}

TEST(OpsTest, ReduceKeepdimsShapesTheOutput) {
  auto f = Reduce("mean", {{33, 1000}}, /*keepdims=*/true, Default());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_NE(ir::Print(*f).find("fn reduce_mean(X: buffer<f32>[33, 1000], Y: buffer<f32>[33, 1])"),
            std::string::npos)
      << ir::Print(*f);
  auto g = Reduce("max", {{33, 1000}}, /*keepdims=*/false, Default(), "rowmax");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_NE(ir::Print(*g).find("fn rowmax(X: buffer<f32>[33, 1000], Y: buffer<f32>[33])"),
            std::string::npos)
      << ir::Print(*g);
}

TEST(OpsTest, SoftmaxIsThreeKernels) {
  auto seq = Softmax({{7, 33}}, Default());
  ASSERT_TRUE(seq.ok()) << seq.status();
  ASSERT_EQ(seq->functions.size(), 3u);
  EXPECT_EQ(seq->functions[0].name(), "softmax_max");
  EXPECT_EQ(seq->functions[1].name(), "softmax_sum");
  EXPECT_EQ(seq->functions[2].name(), "softmax_normalize");
  ASSERT_EQ(seq->intermediates.size(), 2u);
  EXPECT_EQ(seq->intermediates[0].name, "M");
  EXPECT_EQ(seq->intermediates[1].name, "S");
  EXPECT_EQ(seq->intermediates[1].shape, (Shape{7}));
}

TEST(OpsTest, F16WhereTheTargetHasIt) {
  Target target;
  target.shader_f16 = true;
  auto f = Elementwise("exp", {{{7}, ir::kF16}}, target);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_NE(ir::Print(*f).find("buffer<f16>"), std::string::npos);
  auto r = Reduce("sum", {{7, 33}, ir::kF16}, false, target);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectError(Elementwise("exp", {{{7}, ir::kF16}}, Default()).status(),
              {"input X of exp is f16", "shader-f16"}, StatusCode::kUnavailable);
}

TEST(OpsTest, FusedExpressionsComputeSharedValuesOnceAndCheckTheirNodes) {
  const Target t = Default();
  const TensorType x{{7, 33}}, b{{33}}, i{{33}, ir::kI32};
  // silu(x) + b: x is read once, into a let, as is x * sigmoid(x) read
  // twice by the square.
  auto f = ElementwiseFused(
      {x, b},
      {FusedNode::Input(0), FusedNode::Op("sigmoid", {0}), FusedNode::Op("mul", {0, 1}),
       FusedNode::Op("mul", {2, 2}), FusedNode::Input(1), FusedNode::Op("add", {3, 4})},
      t);
  ASSERT_TRUE(f.ok()) << f.status();
  std::vector<std::string> names;
  for (const ir::Param& p : f->params()) names.push_back(p.name());
  EXPECT_EQ(names, (std::vector<std::string>{"X0", "X1", "Y"}));
  const std::string text = ir::Print(*f);
  EXPECT_NE(text.find("let n0: f32 = X0["), std::string::npos) << text;
  EXPECT_NE(text.find("let n2: f32 = n0 * sigmoid(n0)"), std::string::npos) << text;
  EXPECT_EQ(text.find("sigmoid", text.find("sigmoid") + 1), std::string::npos) << text;
  EXPECT_EQ(f->name(), "fused");

  using N = FusedNode;
  ExpectError(ElementwiseFused({x}, {}, t).status(), {"at least one node"});
  FusedNode input_with_args = N::Input(0);
  input_with_args.args = {7};
  ExpectError(ElementwiseFused({x}, {input_with_args}, t).status(),
              {"node 0 of the fused expression", "takes no arguments"});
  ExpectError(ElementwiseFused({x}, {N::Input(1)}, t).status(),
              {"node 0 of the fused expression", "input 1 is out of range (1 inputs)"});
  ExpectError(ElementwiseFused({x}, {N::Input(0), N::Op("add", {0, 1})}, t).status(),
              {"node 1 (add)", "argument 1 is not an earlier node"});
  ExpectError(ElementwiseFused({x}, {N::Input(0), N::Op("add", {0})}, t).status(),
              {"node 1 (add)", "add takes 2 arguments, not 1"});
  ExpectError(ElementwiseFused({x}, {N::Input(0), N::Op("addd", {0})}, t).status(),
              {"unknown elementwise op 'addd'", "where", "cast"});
  ExpectError(
      ElementwiseFused({x, i}, {N::Input(0), N::Input(1), N::Op("add", {0, 1})}, t).status(),
      {"node 2 (add)", "dtype mismatch", "argument 0 is f32", "argument 1 is i32"});
  ExpectError(ElementwiseFused({x, i}, {N::Input(1), N::Op("exp", {0}), N::Input(0)}, t).status(),
              {"node 1 (exp)", "exp takes f32 or f16"});
  ExpectError(
      ElementwiseFused({x, TensorType{{5}}}, {N::Input(0), N::Input(1), N::Op("add", {0, 1})}, t)
          .status(),
      {"node 2 (add)", "[7, 33]", "[5]"});
  ExpectError(ElementwiseFused({x, b}, {N::Input(0), N::Op("exp", {0})}, t).status(),
              {"input X1 is not used", "node 1"});
  ExpectError(ElementwiseFused({}, {N::Constant(1.0)}, t).status(), {"uses no input"});
  ExpectError(
      ElementwiseFused({x}, {N::Input(0), N::Constant(0.5, ir::kI32), N::Op("add", {0, 1})}, t)
          .status(),
      {"node 1", "0.5 is not an i32"});
  ExpectError(ElementwiseFused({x}, {N::Input(0), N::Constant(0.5, ir::kF16)}, t).status(),
              {"the constant of node 1", "shader-f16"}, StatusCode::kUnavailable);
  ExpectError(ElementwiseFused({x}, {N::Input(0), N::CastTo(0, ir::kF16)}, t).status(),
              {"node 1 (cast)", "shader-f16"}, StatusCode::kUnavailable);
  // where: the condition of any dtype, the operands of one.
  auto w = ElementwiseFused(
      {x, i}, {N::Input(0), N::Input(1), N::Constant(-1, ir::kI32), N::Op("where", {0, 1, 2})}, t);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->params().back().buffer().dtype(), ir::kI32);
  ExpectError(
      ElementwiseFused({x, i},
                       {N::Input(1), N::Input(0), N::Constant(1.0), N::Op("where", {0, 1, 0})}, t)
          .status(),
      {"node 3 (where)", "argument 1 is f32 but argument 0 is i32"});
}

// ElementwiseFusedKernels: a graph that fits is the one kernel of
// ElementwiseFused (its inputs in their order, whatever order the graph
// reads them in); one that reads more tensors than a kernel binds runs as
// several, none binding more, the values computed apart as intermediates;
// one nesting deeper than kiln compiles is split until each kernel fits.
TEST(OpsTest, FusedExpressionsTooLargeForOneKernelRunAsSeveral) {
  using N = FusedNode;
  Target t = Default();
  const TensorType x{{7, 33}}, b{{33}};
  const std::vector<FusedNode> small = {N::Input(1), N::Input(0), N::Op("mul", {1, 1}),
                                        N::Op("add", {2, 0})};
  auto one = ElementwiseFusedKernels({x, b}, small, t);
  ASSERT_TRUE(one.ok()) << one.status();
  auto f = ElementwiseFused({x, b}, small, t);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(one->functions.size(), 1u);
  EXPECT_TRUE(one->intermediates.empty());
  EXPECT_EQ(ir::Print(one->functions[0]), ir::Print(*f));
  EXPECT_EQ(one->inputs, (std::vector<std::string>{"X0", "X1"}));
  // The same errors as one kernel's, but the limits.
  ExpectError(ElementwiseFusedKernels({x, b}, {N::Input(0), N::Op("exp", {0})}, t).status(),
              {"input X1 is not used", "node 1"});

  // Eleven inputs summed in a chain, with a target binding 4 buffers.
  t.limits.max_storage_buffers_per_stage = 4;
  std::vector<TensorType> inputs;
  std::vector<FusedNode> wide;
  for (int k = 0; k < 11; ++k) {
    inputs.push_back(k % 2 ? x : b);
    wide.push_back(N::Input(k));
    if (k > 0)
      wide.push_back(N::Op(k % 3 ? "add" : "mul",
                           {static_cast<int>(wide.size()) - 2, static_cast<int>(wide.size()) - 1}));
  }
  ExpectError(ElementwiseFused(inputs, wide, t).status(),
              {"uses 12 storage buffers", "allows 4 per stage"});
  auto several = ElementwiseFusedKernels(inputs, wide, t, "wide");
  ASSERT_TRUE(several.ok()) << several.status();
  EXPECT_GE(several->functions.size(), 4u);
  EXPECT_EQ(several->intermediates.size(), several->functions.size() - 1);
  for (const ir::Function& k : several->functions) {
    EXPECT_LE(k.params().size(), 4u) << k.name();
    EXPECT_EQ(k.name().rfind("wide_", 0), 0u) << k.name();
  }
  EXPECT_EQ(several->functions.back().params().back().name(), "Y");
  for (const IntermediateTensor& m : several->intermediates) {
    EXPECT_EQ(m.name[0], 'T') << m.name;
    EXPECT_EQ(m.shape, (Shape{7, 33})) << m.name;
  }

  // A node reading more tensors than a target binds, whatever is computed
  // apart: refused by name.
  Target three = Default();
  three.limits.max_storage_buffers_per_stage = 3;
  ExpectError(
      ElementwiseFusedKernels(
          {b, b, b}, {N::Input(0), N::Input(1), N::Input(2), N::Op("fma", {0, 1, 2})}, three)
          .status(),
      {"node 3 of the fused expression reads 3 tensors", "binds 3 storage buffers"});

  // A chain of 3000 negations: too deep for one kernel, and for ElementwiseFused.
  std::vector<FusedNode> deep = {N::Input(0)};
  for (int k = 0; k < 3000; ++k) deep.push_back(N::Op("neg", {k}));
  ExpectError(ElementwiseFused({x}, deep, Default()).status(), {"levels deep"});
  auto split = ElementwiseFusedKernels({x}, deep, Default());
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_GE(split->functions.size(), 3000u / 512);
  for (const ir::Function& k : split->functions) {
    EXPECT_LE(ir::DeepestExpression(k), ir::kMaxExprDepth) << k.name();
  }
}

// Every operator builds at the largest tensor the library takes
// (kMaxTensorElements), in any layout of it, and refuses one element more
// with an argument error, never a schedule's internal failure.
TEST(OpsTest, EveryOperatorBuildsAtTheElementLimit) {
  const Target t = Default();
  const int64_t n = kMaxTensorElements;
  ASSERT_EQ(n, int64_t{1} << 30);
  auto expect_builds = [](const auto& built, const std::string& what) {
    EXPECT_TRUE(built.ok()) << what << ": " << built.status();
  };
  for (const Shape& shape : std::vector<Shape>{{n}, {n, 1}, {1, n}, {32768, 32768}}) {
    const std::string s = ShapeToString(shape);
    expect_builds(Elementwise("exp", {{shape}}, t), "exp " + s);
    expect_builds(Elementwise("add", {{shape}, {{1}}}, t), "add " + s);
    expect_builds(Cast({shape}, ir::kI32, t), "cast " + s);
    expect_builds(ReduceAxes("max", {shape}, {0}, false, t), "max over axis 0 of " + s);
    expect_builds(ArgReduce("argmax", {shape}, 0, false, t), "argmax " + s);
    expect_builds(SoftmaxAxis({shape}, 0, t), "softmax " + s);
    expect_builds(LayerNorm({shape}, 1e-5, t), "layer norm " + s);
    expect_builds(RmsNorm({shape}, 1e-5, t), "rms norm " + s);
    expect_builds(Reshape({shape}, {n}, t), "reshape " + s);
    expect_builds(Slice({shape}, std::vector<int64_t>(shape.size(), 0),
                        std::vector<int64_t>(shape.size(), INT64_MAX),
                        std::vector<int64_t>(shape.size(), 1), t),
                  "slice " + s);
    if (shape.size() == 2) {
      expect_builds(Permute({shape}, {1, 0}, t), "permute " + s);
      expect_builds(Matmul({shape}, {{shape[1], 1}}, t), "matmul " + s + " @ [K, 1]");
      expect_builds(Matmul({{1, shape[0]}}, {shape}, t), "matmul [1, M] @ " + s);
      expect_builds(Reduce("sum", {shape}, false, t), "sum " + s);
      expect_builds(Gather({shape}, {{1}, ir::kI32}, t), "gather from " + s);
    }
  }
  expect_builds(Concat({{{n - 1}}, {{1}}}, 0, t), "concat to [2^30]");
  expect_builds(Pad({{n - 2}}, {1}, {1}, 0, t), "pad to [2^30]");
  expect_builds(Gather({{2, 1}}, {{n}, ir::kI32}, t), "gather of 2^30 indices");
  expect_builds(Pool2d("max", {{1, 32768, 32768, 1}}, t), "max pool of 2^30");
  // The implicit GEMM (16 filters of 16 channels) and the direct kernel.
  expect_builds(Conv2d({{1, 8192, 4096, 16}}, {{1, 1, 16, 32}}, t), "conv2d GEMM to 2^30");
  expect_builds(Conv2d({{1, 32768, 32768, 1}}, {{1, 1, 1, 1}}, t), "conv2d direct of 2^30");
  const TensorType qkv{{1, 1, n / 64, 64}};
  expect_builds(Attention(qkv, qkv, qkv, t), "attention over 2^24 keys of D = 64");
  expect_builds(PackedAttention({{1, n / 192, 192}}, 1, t),
                "packed attention over 2^30 / 192 rows of D = 64");
  expect_builds(Where({{n}, ir::kI32}, {{1}}, {{n}}, t), "where of 2^30");

  ExpectError(Elementwise("exp", {{{n + 1}}}, t).status(), {"[1073741825]", "more than 2^30"});
  ExpectError(LayerNorm({{n + 1}}, 1e-5, t).status(), {"more than 2^30"});
  ExpectError(Matmul({{n + 1, 1}}, {{1, 1}}, t).status(), {"more than 2^30"});
  ExpectError(Concat({{{n}}, {{1}}}, 0, t).status(), {"more than 2^30"});
  ExpectError(Pad({{n}}, {1}, {0}, 0, t).status(), {"more than 2^30"});
}

TEST(OpsTest, Errors) {
  const Target t = Default();
  using N = FusedNode;
  ExpectError(Elementwise("add", {{{3}}, {{4}}}, t).status(), {"add", "[3]", "[4]"});
  ExpectError(Elementwise("add", {{{7, 2}}, {{1, 33}}}, t).status(), {"[7, 2]", "[1, 33]"});
  ExpectError(Elementwise("exp", {{{}}}, t).status(), {"input X of exp", "rank 0", "1 to 4"});
  ExpectError(Elementwise("exp", {{{1, 2, 3, 4, 5}}}, t).status(), {"rank 5", "1 to 4"});
  ExpectError(Elementwise("exp", {{{7, 0}}}, t).status(), {"dimension 1 is 0"});
  ExpectError(Elementwise("exp", {{{65536, 65536}}}, t).status(), {"2^30"});
  // Inputs within the limit whose broadcast result is not (2^31 elements).
  ExpectError(
      Elementwise("add", {{{1, 65536}}, {{32768, 1}}}, t).status(),
      {"shapes [1, 65536] and [32768, 1] broadcast to [32768, 65536]", "more than 2^30 elements"});
  ExpectError(Where({{65536, 1}, ir::kI32}, {{1, 32768}}, {{1}}, t).status(),
              {"broadcast to [65536, 32768]", "more than 2^30 elements"});
  ExpectError(ElementwiseFused({{{1, 65536}}, {{32768, 1}}},
                               {N::Input(0), N::Input(1), N::Op("mul", {0, 1})}, t)
                  .status(),
              {"broadcast to [32768, 65536]", "more than 2^30 elements"});
  ExpectError(Elementwise("expp", {{{7}}}, t).status(),
              {"unknown elementwise op 'expp'", "exp", "pow"});
  ExpectError(Elementwise("add", {{{7}}}, t).status(), {"add takes 2 inputs, not 1"});
  ExpectError(Elementwise("exp", {{{7}}, {{7}}}, t).status(), {"exp takes 1 input, not 2"});
  Target f16 = t;
  f16.shader_f16 = true;
  ExpectError(Elementwise("add", {{{7}, ir::kF32}, {{7}, ir::kF16}}, f16).status(),
              {"dtype mismatch", "A is f32", "B is f16"});
  ExpectError(Elementwise("add", {{{7}, ir::kI64}, {{7}, ir::kI64}}, t).status(),
              {"input A of add has dtype i64", "f32, f16, i32 and u32"});
  ExpectError(Elementwise("add", {{{7}, ir::kU32}, {{7}, ir::kI32}}, t).status(),
              {"dtype mismatch", "A is u32", "B is i32"});

  ExpectError(ElementwiseChain({{7}}, {}, t).status(), {"at least one step"});
  ExpectError(
      ElementwiseChain({{7}}, {ChainStep::Unary("relu"), ChainStep::Unary("relux")}, t).status(),
      {"step 2 (relux)", "unknown elementwise op 'relux'"});
  ExpectError(ElementwiseChain({{7}}, {ChainStep::With("exp", {{7}})}, t).status(),
              {"step 1 (exp)", "takes no operand"});
  ExpectError(ElementwiseChain({{7}}, {ChainStep::Unary("add")}, t).status(),
              {"step 1 (add)", "exactly one operand"});
  ExpectError(ElementwiseChain({{7, 3}}, {ChainStep::With("add", {{4}})}, t).status(),
              {"step 1 (add)", "[7, 3]", "[4]"});
  ExpectError(
      ElementwiseChain({{7}, ir::kF32}, {ChainStep::With("add", {{7}, ir::kF16})}, f16).status(),
      {"dtype mismatch", "running value is f32", "B1 is f16"});
  std::vector<ChainStep> many(8, ChainStep::With("add", {{7}}));
  ExpectError(ElementwiseChain({{7}}, many, t).status(), {"10 storage buffers", "allows 8"});

  ExpectError(Reduce("median", {{7, 33}}, false, t).status(),
              {"unknown reduce op 'median'", "sum, mean, max, min, prod"});
  ExpectError(Reduce("sum", {{7, 33, 2}}, false, t).status(), {"rank 3", "2-D"});
  ExpectError(Reduce("sum", {{}}, false, t).status(), {"rank 0"});
  ExpectError(Softmax({{7}}, t).status(), {"input X of softmax", "rank 1", "2-D"});
  ExpectError(Softmax({{7, 3}, ir::kF16}, f16).status(), {"f32 only"});
}

// Integer, comparison and ternary ops: signatures, dtypes and errors.
TEST(OpsTest, IntegerComparisonAndTernaryOps) {
  const Target t = Default();
  const TensorType i7{{7}, ir::kI32}, f7{{7}};
  for (std::string_view op : {"add", "neg", "abs", "relu", "max", "bitwise_and", "popcount",
                              "shift_right", "lt", "clamp", "pow"}) {
    EXPECT_TRUE(ElementwiseOpTakes(op, ir::kI32)) << op;
  }
  for (std::string_view op : {"exp", "gelu", "fma", "floor"}) {
    EXPECT_FALSE(ElementwiseOpTakes(op, ir::kI32)) << op;
    EXPECT_TRUE(ElementwiseOpTakes(op, ir::kF16)) << op;
  }
  EXPECT_FALSE(ElementwiseOpTakes("bitwise_xor", ir::kF32));
  EXPECT_TRUE(ElementwiseOpTakes("add", ir::kU32));
  EXPECT_TRUE(ElementwiseOpTakes("shift_right", ir::kU32));
  EXPECT_FALSE(ElementwiseOpTakes("exp", ir::kU32));
  EXPECT_FALSE(ElementwiseOpTakes("add", ir::kU8));

  auto shl = Elementwise("shift_left", {i7, {{1}, ir::kI32}}, t);
  ASSERT_TRUE(shl.ok()) << shl.status();
  EXPECT_NE(ir::Print(*shl).find("buffer<i32>"), std::string::npos);
  auto lt = Elementwise("lt", {{{7, 1}}, {{1, 33}}}, t);
  ASSERT_TRUE(lt.ok()) << lt.status();
  ASSERT_EQ(lt->params().size(), 3u);
  EXPECT_EQ(lt->params()[2].name(), "C");
  EXPECT_EQ(lt->params()[2].buffer().dtype(), ir::kI32);
  EXPECT_EQ(lt->params()[2].buffer().shape().size(), 2u);
  auto clamp = Elementwise("clamp", {{{5, 7}}, {{7}}, {{5, 1}}}, t);
  ASSERT_TRUE(clamp.ok()) << clamp.status();
  std::vector<std::string> names;
  for (const ir::Param& p : clamp->params()) names.push_back(p.name());
  EXPECT_EQ(names, (std::vector<std::string>{"X", "Lo", "Hi", "Y"}));
  auto fma = Elementwise("fma", {f7, f7, {{1}}}, t);
  ASSERT_TRUE(fma.ok()) << fma.status();
  EXPECT_EQ(fma->params()[3].name(), "Y");

  ExpectError(Elementwise("exp", {i7}, t).status(),
              {"input X of exp is i32", "exp takes f32 or f16 tensors"});
  ExpectError(Elementwise("bitwise_or", {f7, f7}, t).status(),
              {"input A of bitwise_or is f32", "takes i32 or u32 tensors"});
  ExpectError(Elementwise("add", {i7, f7}, t).status(), {"dtype mismatch", "A is i32", "B is f32"});
  ExpectError(Elementwise("fma", {f7, f7}, t).status(), {"fma takes 3 inputs, not 2"});
  ExpectError(Elementwise("clamp", {f7, {{7}, ir::kI32}, f7}, t).status(),
              {"clamp: dtype mismatch", "X is f32", "Lo is i32"});
  ExpectError(Elementwise("clamp", {{{5, 7}}, {{7}}, {{4, 1}}}, t).status(),
              {"clamp: input Hi", "[5, 7]", "[4, 1]"});
  ExpectError(Elementwise("lt", {f7}, t).status(), {"lt takes 2 inputs, not 1"});
  ExpectError(Elementwise("less", {f7, f7}, t).status(),
              {"unknown elementwise op 'less'", "lt", "clamp"});

  auto chain = ElementwiseChain(i7,
                                {ChainStep::WithConstant("shift_left", 3), ChainStep::Unary("neg"),
                                 ChainStep::With("bitwise_xor", i7)},
                                t);
  ASSERT_TRUE(chain.ok()) << chain.status();
  ExpectError(ElementwiseChain(i7, {ChainStep::WithConstant("add", 0.5)}, t).status(),
              {"step 1 (add)", "0.5 is not an i32"});
  // A comparison makes the running value i32.
  auto mask = ElementwiseChain(f7,
                               {ChainStep::With("sub", f7), ChainStep::WithConstant("gt", 0.5),
                                ChainStep::With("bitwise_and", i7)},
                               t);
  ASSERT_TRUE(mask.ok()) << mask.status();
  EXPECT_EQ(mask->params().back().buffer().dtype(), ir::kI32);
  EXPECT_EQ(mask->params()[2].buffer().dtype(), ir::kI32);  // B3
  ExpectError(ElementwiseChain(f7, {ChainStep::WithConstant("lt", 0.0), ChainStep::Unary("exp")}, t)
                  .status(),
              {"step 2 (exp)", "the running value is i32", "f32 or f16"});
  ExpectError(
      ElementwiseChain(f7, {ChainStep::WithConstant("lt", 0.0), ChainStep::With("add", f7)}, t)
          .status(),
      {"step 2 (add)", "dtype mismatch", "running value is i32", "B2 is f32"});
  ExpectError(ElementwiseChain(
                  f7, {ChainStep::WithConstant("lt", 0.0), ChainStep::WithConstant("add", 0.5)}, t)
                  .status(),
              {"step 2 (add)", "0.5 is not an i32"});
  ExpectError(ElementwiseChain(i7, {ChainStep::WithConstant("add", 4294967296.0)}, t).status(),
              {"the constant 4294967296 is not an i32"});
  ExpectError(ElementwiseChain(i7, {ChainStep::Unary("exp")}, t).status(),
              {"step 1 (exp)", "the running value is i32", "f32 or f16"});
  ExpectError(ElementwiseChain(f7, {ChainStep::With("clamp", f7)}, t).status(),
              {"step 1 (clamp)", "operand C1", "two operands", "it is neither"});
  ExpectError(ElementwiseChain(f7, {ChainStep::Ternary("fma", i7, 1.0)}, t).status(),
              {"step 1 (fma)", "dtype mismatch", "running value is f32", "B1 is i32"});
  ExpectError(ElementwiseChain(f7, {ChainStep::Ternary("add", 1.0, 2.0)}, t).status(),
              {"step 1 (add)", "takes one operand"});
  ExpectError(ElementwiseChain(f7, {ChainStep::Ternary("where", f7, i7)}, t).status(),
              {"step 1 (where)", "dtype mismatch", "other operand is f32", "C1 is i32"});
  ExpectError(ElementwiseChain(f7, {ChainStep::Ternary("where", i7, 0.5)}, t).status(),
              {"step 1 (where)", "0.5 is not an i32", "other operand is i32"});
  ExpectError(ElementwiseChain(f7, {ChainStep::Ternary("clamp", TensorType{{2}}, 1.0)}, t).status(),
              {"step 1 (clamp)", "[7]", "[2]"});
  ExpectError(ElementwiseChain(f7, {ChainStep::Unary("cast")}, t).status(),
              {"step 1 (cast)", "needs a dtype"});
  ExpectError(
      ElementwiseChain(f7, {ChainStep::CastTo(ir::kI32), ChainStep::Unary("exp")}, t).status(),
      {"step 2 (exp)", "the running value is i32"});
  ChainStep bad_cast = ChainStep::CastTo(ir::kF32);
  bad_cast.constant = 1.0;
  ExpectError(ElementwiseChain(f7, {bad_cast}, t).status(), {"a cast takes no operand"});
  ChainStep typed_add = ChainStep::WithConstant("add", 1.0);
  typed_add.cast_to = ir::kF32;
  ExpectError(ElementwiseChain(f7, {typed_add}, t).status(), {"only a cast step takes a dtype"});
  ChainStep first_fma = ChainStep::Ternary("fma", 1.0, 2.0);
  first_fma.operand_first = true;
  ExpectError(ElementwiseChain(f7, {first_fma}, t).status(), {"operand_first"});
  ExpectError(ElementwiseChain(f7, {ChainStep::Unary("wher")}, t).status(),
              {"unknown elementwise op 'wher'", "where", "cast"});
  ExpectError(ElementwiseChain(f7, {ChainStep::With("add", i7)}, t).status(),
              {"dtype mismatch", "running value is f32", "B1 is i32"});

  MatmulOptions o;
  o.activation = "popcount";
  ExpectError(Matmul({{8, 8}}, {{8, 8}}, t, o).status(),
              {"matmul: the activation's input", "popcount takes i32"});
}

TEST(OpsTest, MatmulErrors) {
  const Target t = Default();
  ExpectError(Matmul({{7, 5}}, {{6, 3}}, t).status(),
              {"matmul", "[7, 5]", "[6, 3]", "contraction", "5 against 6"});
  ExpectError(Matmul({{7}}, {{7, 3}}, t).status(), {"input A of matmul", "rank 2 to 4"});
  ExpectError(Matmul({{2, 7, 5}}, {{3, 5, 4}}, t).status(), {"batch dimensions", "[2]", "[3]"});
  // A LastCopy outside the enum (a cast of a stray integer) is the caller's
  // error, not a schedule failing inside the GEMM.
  MatmulSchedule stray{1, 1, 16, false, true, true};
  stray.last_copy = static_cast<te::LastCopy>(99);
  ExpectError(Matmul({{7, 5}}, {{5, 3}}, t, {}, "", stray).status(),
              {"matmul schedule", "last_copy is 99", "0 to 3"});
  ExpectError(CheckMatmulSchedule(stray, t, "--matmul-schedule"),
              {"--matmul-schedule schedule", "last_copy is 99"});
  EXPECT_TRUE(CheckMatmulSchedule(MatmulSchedule{1, 1, 16, false, true}, t).ok());
  MatmulOptions o;
  o.bias = TensorType{{4}};
  ExpectError(Matmul({{7, 5}}, {{5, 3}}, t, o).status(), {"bias of matmul", "[4]", "[N] = [3]"});
  o = {};
  o.residual = TensorType{{3, 7}};
  ExpectError(Matmul({{7, 5}}, {{5, 3}}, t, o).status(), {"residual", "[7, 3]"});
  o = {};
  o.activation = "relux";
  ExpectError(Matmul({{7, 5}}, {{5, 3}}, t, o).status(),
              {"unknown activation op 'relux'", "known: neg, abs, exp", "gelu"});
  // The known list holds only ops an activation may be.
  for (const char* refused : {"isnan", "popcount", "bitwise_not"}) {
    EXPECT_EQ(Matmul({{7, 5}}, {{5, 3}}, t, o).status().message().find(refused), std::string::npos)
        << refused;
  }
  o.activation = "isnan";
  ExpectError(Matmul({{7, 5}}, {{5, 3}}, t, o).status(), {"matmul: activation isnan", "predicate"});
  o.activation = "bitwise_not";
  ExpectError(Matmul({{7, 5}}, {{5, 3}}, t, o).status(), {"bitwise_not", "f32 sum"});
  o = {};
  o.accumulate = ir::kF16;
  ExpectError(Matmul({{7, 5}}, {{5, 3}}, t, o).status(),
              {"f16 accumulation needs f16 inputs", "A and B are f32"});
  o.accumulate = ir::kI32;
  ExpectError(Matmul({{7, 5}}, {{5, 3}}, t, o).status(), {"accumulate is i32", "f32 or f16"});
  Target f16 = t;
  f16.shader_f16 = true;
  o.accumulate = ir::kF16;
  auto f16_sums = Matmul({{7, 5}, ir::kF16}, {{5, 3}, ir::kF16}, f16, o);
  ASSERT_TRUE(f16_sums.ok()) << f16_sums.status();
  EXPECT_NE(ir::Print(*f16_sums).find("acc_buf: f16["), std::string::npos);
  ExpectError(Matmul({{7, 5}, ir::kF16}, {{5, 3}, ir::kF16}, t, o).status(),
              {"input A of matmul", "shader-f16"}, StatusCode::kUnavailable);
  ExpectError(Matmul({{7, 5}}, {{5, 3}}, t, {}, "", MatmulSchedule{3, 1, 16, false, true}).status(),
              {"schedule", "rows must be 1, 2 or 4"});
  ExpectError(Matmul({{7, 5}}, {{5, 3}}, t, {}, "", MatmulSchedule{1, 1, 8, false, true}).status(),
              {"multiples of 16"});
  // 128x128 double-buffered tiles take 32 KiB; WebGPU's default limit is 16 KiB.
  ExpectError(Matmul({{7, 5}}, {{5, 3}}, t, {}, "", MatmulSchedule{2, 2, 16, true, true}).status(),
              {"32768 bytes", "16384"});
  // The rule fits the default limits.
  auto rule = DefaultMatmulSchedule(1, 4096, 4096, t);
  ASSERT_TRUE(rule.ok()) << rule.status();
  EXPECT_LE(rule->SharedBytes(), 16384);
  EXPECT_EQ(rule->block_m(), 128);
  EXPECT_TRUE(rule->unroll_k);
  auto small = DefaultMatmulSchedule(1, 33, 70, t);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->block_m(), 64);
  EXPECT_FALSE(small->unroll_k);
  // A side of at most 64 keeps the 64-wide tile there even where the
  // workgroups would call for the largest (the attention's P @ V).
  for (auto [m, n, bm, bn] :
       {std::tuple{512, 64, 128, 64}, {64, 512, 64, 128}, {512, 65, 128, 128}, {40, 33, 64, 64}}) {
    auto s = DefaultMatmulSchedule(384, m, n, t);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->block_m(), bm) << m << "x" << n;
    EXPECT_EQ(s->block_n(), bn) << m << "x" << n;
  }
  // An f32 matmul's tiles go through registers where the implementation is
  // known: under a branch for wgpu-native; for Dawn branch-free (the last
  // k-step loading and storing its own tile again), or in its default mode
  // with the 128x128 tile the last k-step peeled; not for f16 or the
  // convolution.
  EXPECT_FALSE(rule->copy_through_registers);
  for (const char* impl : {"dawn", "wgpu"}) {
    Target target = t;
    target.implementation = impl;
    const bool dawn = std::string(impl) == "dawn";
    auto r = DefaultMatmulSchedule(1, 4096, 4096, target);
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(r->copy_through_registers) << impl;
    EXPECT_EQ(r->last_copy, dawn ? te::LastCopy::kPeeled : te::LastCopy::kSkipped) << impl;
    Target trusted = target;
    trusted.trusted = true;
    EXPECT_EQ(DefaultMatmulSchedule(1, 4096, 4096, trusted)->last_copy,
              dawn ? te::LastCopy::kStoresAgain : te::LastCopy::kSkipped)
        << impl;
    auto batched = DefaultMatmulSchedule(384, 128, 128, target);
    ASSERT_TRUE(batched.ok());
    EXPECT_EQ(batched->block_n(), 64);
    EXPECT_EQ(batched->last_copy, dawn ? te::LastCopy::kStoresAgain : te::LastCopy::kSkipped)
        << impl;
    // Sums of products as fma for Dawn's f32 matmul only.
    EXPECT_EQ(r->fused_multiply_add, dawn) << impl;
    for (GemmKind kind : {GemmKind::kF16, GemmKind::kConv, GemmKind::kInt8}) {
      EXPECT_FALSE(DefaultMatmulSchedule(1, 4096, 4096, target, kind)->copy_through_registers);
      EXPECT_FALSE(DefaultMatmulSchedule(1, 4096, 4096, target, kind)->fused_multiply_add);
    }
    auto f = Matmul({{256, 64}}, {{64, 256}}, target);
    ASSERT_TRUE(f.ok()) << f.status();
    const std::string ir = ir::Print(*f);
    EXPECT_NE(ir.find("_staged["), std::string::npos) << impl;
    EXPECT_EQ(ir.find("min(k_outer + 1, 3)") != std::string::npos, dawn) << ir;
    EXPECT_EQ(ir.find("= fma(") != std::string::npos, dawn) << ir;
    // Peeled: 15 k-steps copying the next tile under no branch, the last
    // one's math after the loop.
    auto peeled = Matmul({{2048, 256}}, {{256, 4096}}, target);
    ASSERT_TRUE(peeled.ok()) << peeled.status();
    const std::string p = ir::Print(*peeled);
    EXPECT_EQ(p.find("for k_outer in serial(0, 15)") != std::string::npos, dawn) << impl;
    EXPECT_EQ(p.find("for k_outer in serial(0, 16)") != std::string::npos, !dawn) << impl;
    EXPECT_EQ(p.find("min(k_outer + 1"), std::string::npos) << impl;
  }
  // The last k-step's treatment applies to tiles copied through registers
  // or double-buffered, and a double buffer is branch-free or not.
  MatmulSchedule direct{2, 2, 16, false, true, false, te::LastCopy::kPeeled};
  ExpectError(Matmul({{256, 64}}, {{64, 256}}, t, {}, "", direct).status(),
              {"128x128 tile", "only tiles copied through registers or double-buffered"});
  MatmulSchedule twice{2, 2, 16, true, true, false, te::LastCopy::kStoresAgain};
  ExpectError(Matmul({{256, 64}}, {{64, 256}}, t, {}, "", twice).status(),
              {"a double buffer is branch-free or not"});
  // A target of 128 invocations (WebGPU's compatibility mode) gets
  // workgroups of 8 x 16 threads and tiles of half the rows.
  Target compat = t;
  compat.limits.max_invocations_per_workgroup = 128;
  compat.limits.max_workgroup_size_x = compat.limits.max_workgroup_size_y = 128;
  auto half = DefaultMatmulSchedule(1, 4096, 4096, compat);
  ASSERT_TRUE(half.ok()) << half.status();
  EXPECT_EQ(half->threads_y, 8);
  EXPECT_EQ(half->block_m(), 64);
  EXPECT_EQ(half->ToString(), "64x128 tile, k 16, single-buffered, unrolled, 8 x 16 threads");
  auto narrow = Matmul({{100, 64}}, {{64, 70}}, compat);
  ASSERT_TRUE(narrow.ok()) << narrow.status();
  EXPECT_NE(ir::Print(*narrow).find("threadIdx.y(0, 8)"), std::string::npos) << ir::Print(*narrow);
  EXPECT_EQ(DefaultMatmulSchedule(1, 4096, 4096, t)->threads_y, 16);
  ExpectError(
      Matmul({{256, 64}}, {{64, 256}}, compat, {}, "", MatmulSchedule{1, 1, 16, false, true})
          .status(),
      {"cannot run workgroups of 16 x 16 invocations"});
  // Below WebGPU's minimums no GEMM tile fits: a matmul is refused by name,
  // and a convolution runs its direct form.
  Target tiny = t;
  tiny.limits.max_invocations_per_workgroup = tiny.limits.max_workgroup_size_x = 64;
  tiny.limits.max_workgroup_size_y = 64;
  tiny.limits.max_workgroup_storage_bytes = 4096;
  ExpectError(Matmul({{64, 64}}, {{64, 64}}, tiny).status(),
              {"matmul: the target's workgroup storage (4096 bytes) holds no matmul tile"});
  ExpectError(MatmulInt8({{64, 16}, ir::kInt8x4}, {{64, 16}, ir::kInt8x4}, tiny).status(),
              {"matmul_int8: the target's"});
  Conv2dOptions padded;
  padded.pad_h = padded.pad_w = 1;
  ASSERT_TRUE(ConvUsesGemm({{1, 7, 7, 16}}, {{3, 3, 16, 32}}, padded));
  auto thin = Conv2d({{1, 7, 7, 16}}, {{3, 3, 16, 32}}, tiny, padded);
  ASSERT_TRUE(thin.ok()) << thin.status();
  EXPECT_EQ(ir::Print(*thin).find("shared"), std::string::npos) << ir::Print(*thin);
  MatmulSchedule odd{1, 1, 16, false, true};
  odd.threads_y = 4;
  ExpectError(Matmul({{256, 64}}, {{64, 256}}, t, {}, "", odd).status(),
              {"threads_y must be 8 or 16"});
  compat.limits.max_invocations_per_workgroup = 64;
  ExpectError(Matmul({{256, 64}}, {{64, 256}}, compat).status(),
              {"cannot run workgroups of 16 x 8 invocations"});
}

TEST(OpsTest, MatmulInt8SignatureAndErrors) {
  const Target t = Default();
  const ir::DataType i8x4 = ir::kInt8x4;
  auto f = MatmulInt8({{2, 7, 17}, i8x4}, {{33, 17}, i8x4}, t);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->name(), "matmul_int8");
  const std::string printed = ir::Print(*f);
  EXPECT_NE(printed.find("fn matmul_int8(A: buffer<int8x4>[2, 7, 17], B: buffer<int8x4>[33, 17], "
                         "C: buffer<i32>[2, 7, 33])"),
            std::string::npos)
      << printed;
  EXPECT_NE(printed.find("dot4i8("), std::string::npos) << printed;
  // Packing: int8x4 only, and i8 is told to pack.
  ExpectError(MatmulInt8({{7, 20}, ir::kI8}, {{3, 5}, i8x4}, t).status(),
              {"input A of matmul_int8", "dtype i8", "int8x4", "[..., M, K/4]", "pack"});
  ExpectError(MatmulInt8({{7, 5}, i8x4}, {{3, 5}, ir::kF32}, t).status(),
              {"input B of matmul_int8", "dtype f32", "[..., N, K/4]"});
  ExpectError(MatmulInt8({{7, 5}, i8x4}, {{3, 5}, ir::kI32}, t).status(),
              {"input B of matmul_int8", "dtype i32"});
  // Shapes.
  ExpectError(MatmulInt8({{7, 5}, i8x4}, {{3, 6}, i8x4}, t).status(),
              {"matmul_int8", "[7, 5]", "B (transposed) is [3, 6]", "5 against 6 int8x4 words"});
  ExpectError(MatmulInt8({{20}, i8x4}, {{3, 5}, i8x4}, t).status(),
              {"input A of matmul_int8", "rank 2 to 4"});
  ExpectError(MatmulInt8({{7, 5}, i8x4}, {{5}, i8x4}, t).status(),
              {"input B of matmul_int8", "rank 2 to 4"});
  ExpectError(MatmulInt8({{2, 7, 5}, i8x4}, {{3, 4, 5}, i8x4}, t).status(),
              {"matmul_int8: batch dimensions", "[2]", "[3]"});
  ExpectError(MatmulInt8({{7, 0}, i8x4}, {{3, 5}, i8x4}, t).status(),
              {"input A of matmul_int8", "dimension 1 is 0"});
  ExpectError(MatmulInt8({{1, 1, 1, 1, 5}, i8x4}, {{3, 5}, i8x4}, t).status(),
              {"input A of matmul_int8", "rank 5"});
  ExpectError(MatmulInt8({{65536, 4}, i8x4}, {{65536, 4}, i8x4}, t).status(),
              {"output C of matmul_int8", "more than 2^30 elements"});
  ExpectError(
      MatmulInt8({{7, 5}, i8x4}, {{3, 5}, i8x4}, t, "", MatmulSchedule{1, 1, 8, false, true})
          .status(),
      {"matmul_int8 schedule", "multiples of 16"});
}

TEST(OpsTest, ConvAndPoolErrors) {
  const Target t = Default();
  ExpectError(Conv2d({{1, 5, 5}}, {{3, 3, 4, 8}}, t).status(), {"input X of conv2d", "NHWC"});
  ExpectError(Conv2d({{1, 5, 5, 4}}, {{3, 3, 3, 8}}, t).status(),
              {"W has 3 input channels", "needs 4"});
  Conv2dOptions o;
  o.groups = 3;
  ExpectError(Conv2d({{1, 5, 5, 4}}, {{3, 3, 4, 8}}, t, o).status(), {"groups 3", "divide"});
  o = {};
  o.activation = "isinf";
  ExpectError(Conv2d({{1, 5, 5, 4}}, {{3, 3, 4, 8}}, t, o).status(),
              {"conv2d: activation isinf", "predicate"});
  o = {};
  ExpectError(Conv2d({{1, 2, 5, 4}}, {{3, 3, 4, 8}}, t, o).status(),
              {"window spans 3 along H", "has only 2"});
  o.stride_h = 0;
  ExpectError(Conv2d({{1, 5, 5, 4}}, {{3, 3, 4, 8}}, t, o).status(), {"strides"});
  o = {};
  o.pad_w = -1;
  ExpectError(Conv2d({{1, 5, 5, 4}}, {{3, 3, 4, 8}}, t, o).status(), {"padding"});
  o = {};
  o.bias = TensorType{{4}};
  ExpectError(Conv2d({{1, 5, 5, 4}}, {{3, 3, 4, 8}}, t, o).status(), {"bias of conv2d", "[8]"});
  o = {};
  o.nhwc = false;
  ExpectError(Conv2d({{1, 4, 5, 5}}, {{8, 3, 3, 3}}, t, o).status(), {"W has 3 input channels"});
  Pool2dOptions p;
  ExpectError(Pool2d("median", {{1, 4, 4, 2}}, t, p).status(), {"unknown pooling op 'median'"});
  p.pad_h = 2;
  ExpectError(Pool2d("max", {{1, 4, 4, 2}}, t, p).status(), {"at most half the window"});
  p = {};
  p.kernel_h = 0;
  ExpectError(Pool2d("avg", {{1, 4, 4, 2}}, t, p).status(), {"at least 1 x 1"});
  // Pooling's limits name what pooling has (no dilation); conv2d's all three.
  p = {};
  p.stride_h = (int64_t{1} << 30) + 1;
  const Status pool_limit = Pool2d("max", {{1, 4, 4, 2}}, t, p).status();
  ExpectError(pool_limit, {"max_pool2d: strides and padding must be at most 2^30", "1073741825"});
  EXPECT_EQ(pool_limit.message().find("dilation"), std::string::npos) << pool_limit;
  o = {};
  o.dilation_w = (int64_t{1} << 30) + 1;
  ExpectError(Conv2d({{1, 5, 5, 3}}, {{3, 3, 3, 8}}, t, o).status(),
              {"conv2d: strides, dilations and padding must be at most 2^30", "dilations 1 x "});
  // Which convolutions become a GEMM.
  EXPECT_TRUE(ConvUsesGemm({{1, 5, 5, 16}}, {{3, 3, 16, 64}}, {}));
  Conv2dOptions depthwise;
  depthwise.groups = 16;
  EXPECT_FALSE(ConvUsesGemm({{1, 5, 5, 16}}, {{3, 3, 1, 16}}, depthwise));
}

}  // namespace
}  // namespace kiln::ops
