// The interpreter's API: launch grids, scalar evaluation, argument checks,
// and the errors a kernel can run into.
#include "kiln/interp/interpreter.h"

#include <gtest/gtest.h>

#include "kiln/interp/interp_test_util.h"
#include "kiln/ir/ir.h"
#include "kiln/ir/parser.h"

namespace kiln::interp {
namespace {

using namespace kiln::ir;  // NOLINT(build/namespaces): kernels read better unqualified
using testing::Contents;
using testing::MakeBuffer;
using testing::Poisoned;
using testing::Verified;

// out[i] = A[i] + 1 for i < n, in workgroups of 64 threads.
Function AddOne() {
  IRBuilder b("add_one");
  Var n = b.ScalarParam("n", kI32);
  Buffer A = b.BufferParam("A", kF32, {n});
  Buffer out = b.BufferParam("out", kF32, {n});
  b.For("bx", LoopKind::kBlockX, 0, (n + 63) / 64, [&](Var bx) {
    b.For("tx", LoopKind::kThreadX, 0, 64, [&](Var tx) {
      Var i = b.Let("i", bx * 64 + tx);
      b.If(i < n, [&] { b.Store(out, {i}, Load(A, {i}) + 1.0); });
    });
  });
  return Verified(b);
}

bool Contains(const Status& status, std::string_view text) {
  return status.message().find(text) != std::string::npos;
}

TEST(InterpreterTest, RunsOverTheWholeGrid) {
  std::vector<float> a = testing::RandomFloats(150, 30);
  std::vector<ArgValue> args = {Value::I32(150), MakeBuffer(kF32, a), Poisoned(kF32, 150)};
  Status status = interp::Run(AddOne(), args);
  ASSERT_TRUE(status.ok()) << status;
  std::vector<float> out = Contents<float>(args[2]);
  for (int i = 0; i < 150; ++i) EXPECT_EQ(out[i], a[i] + 1.0f);
}

TEST(InterpreterTest, LaunchDimsComeFromTheThreadBoundLoops) {
  std::vector<ArgValue> args = {Value::I32(150), HostBuffer(), HostBuffer()};
  auto dims = ComputeLaunchDims(AddOne(), args);
  ASSERT_TRUE(dims.ok()) << dims.status();
  EXPECT_EQ(dims->blocks, (std::array<int64_t, 2>{3, 1}));
  EXPECT_EQ(dims->threads, (std::array<int64_t, 3>{64, 1, 1}));
  EXPECT_EQ(dims->num_blocks(), 3);
  EXPECT_EQ(dims->threads_per_block(), 64);
}

TEST(InterpreterTest, LaunchExtentsMayUseEnclosingLets) {
  // Not verifiable (launch extents must use scalar parameters only), but the
  // interpreter does not need that restriction.
  IRBuilder b("let_extent");
  Var n = b.ScalarParam("n", kI32);
  Buffer out = b.BufferParam("out", kI32, {n});
  Var blocks = b.Let("blocks", (n + 7) / 8);
  b.For("bx", LoopKind::kBlockX, 0, blocks, [&](Var bx) {
    b.For("tx", LoopKind::kThreadX, 0, 8, [&](Var tx) {
      Var i = b.Let("i", bx * 8 + tx);
      b.If(i < n, [&] { b.Store(out, {i}, i); });
    });
  });
  std::vector<ArgValue> args = {Value::I32(20), Poisoned(kI32, 20)};
  auto dims = ComputeLaunchDims(b.Build(), args);
  ASSERT_TRUE(dims.ok()) << dims.status();
  EXPECT_EQ(dims->blocks[0], 3);
  ASSERT_TRUE(interp::Run(b.Build(), args).ok());
  std::vector<int32_t> result = Contents<int32_t>(args[1]);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(result[i], i);
}

TEST(InterpreterTest, ZeroBlocksRunNothing) {
  std::vector<ArgValue> args = {Value::I32(0), HostBuffer(kF32, {0}), HostBuffer(kF32, {0})};
  EXPECT_TRUE(interp::Run(AddOne(), args).ok());
}

TEST(InterpreterTest, EvaluateScalar) {
  Var n("n", kI32);
  auto value = EvaluateScalar((n + 63) / 64 * 2, {{n.get(), Value::I32(100)}});
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, Value::I32(4));

  Var x("x", kF32);
  auto f = EvaluateScalar(Call(Intrinsic::kSqrt, {x}) * 2.0, {{x.get(), Value::F32(2.25f)}});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->f, 3.0);

  auto unbound = EvaluateScalar(n + 1, {});
  EXPECT_FALSE(unbound.ok());
  EXPECT_TRUE(Contains(unbound.status(), "'n'")) << unbound.status();

  Buffer A("A", kI32, {4});
  auto load = EvaluateScalar(Load(A, {0}), {});
  EXPECT_FALSE(load.ok());

  auto wrong_type = EvaluateScalar(n + 1, {{n.get(), Value::U32(3)}});
  EXPECT_FALSE(wrong_type.ok());
}

TEST(InterpreterTest, RejectsArgumentsThatDoNotMatch) {
  const Function f = AddOne();
  std::vector<ArgValue> too_few = {Value::I32(4), MakeBuffer(kF32, std::vector<float>(4))};
  EXPECT_EQ(interp::Run(f, too_few).code(), StatusCode::kInvalidArgument);

  std::vector<ArgValue> wrong_scalar = {Value::U32(4), MakeBuffer(kF32, std::vector<float>(4)),
                                        Poisoned(kF32, 4)};
  Status status = interp::Run(f, wrong_scalar);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(status, "must be a i32")) << status;

  std::vector<ArgValue> scalar_for_buffer = {Value::I32(4), Value::I32(4), Poisoned(kF32, 4)};
  EXPECT_EQ(interp::Run(f, scalar_for_buffer).code(), StatusCode::kInvalidArgument);

  std::vector<ArgValue> wrong_dtype = {Value::I32(4), MakeBuffer(kI32, std::vector<int32_t>(4)),
                                       Poisoned(kF32, 4)};
  EXPECT_EQ(interp::Run(f, wrong_dtype).code(), StatusCode::kInvalidArgument);

  std::vector<ArgValue> too_small = {Value::I32(100), MakeBuffer(kF32, std::vector<float>(100)),
                                     Poisoned(kF32, 99)};
  status = interp::Run(f, too_small);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(status, "'out' needs 100 elements, got 99")) << status;
}

TEST(InterpreterTest, SizesThatOverflow64BitsAreErrors) {
  // n^3 elements for n = 2^31 - 1 wrap to a small count if multiplied blindly.
  StatusOr<Function> cube = ParseFunction(R"(
fn cube(A: buffer<f32>[n, n, n], n: i32) {
  A[0, 0, 0] = 1.0
})");
  ASSERT_TRUE(cube.ok()) << cube.status();
  std::vector<ArgValue> args = {Poisoned(kF32, 4), Value::I32(2147483647)};
  Status status = interp::Run(*cube, args);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(status, "buffer 'A': its shape has more elements than 64 bits count"))
      << status;

  StatusOr<Function> local = ParseFunction(R"(
fn big(A: buffer<f32>[1]) {
  alloc t: f32[2147483647, 2147483647, 2147483647] local {
    t[0, 0, 0] = 1.0
    A[0] = t[0, 0, 0]
  }
})");
  ASSERT_TRUE(local.ok()) << local.status();
  std::vector<ArgValue> one = {Poisoned(kF32, 1)};
  status = interp::Run(*local, one);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(status, "alloc of 't' needs more bytes than 64 bits count")) << status;
}

TEST(InterpreterTest, OutOfBoundsAccessIsAnError) {
  IRBuilder b("overrun");
  Buffer A = b.BufferParam("A", kF32, {8});
  Buffer out = b.BufferParam("out", kF32, {16});
  b.For("bx", LoopKind::kBlockX, 0, 2, [&](Var bx) {
    b.For("tx", LoopKind::kThreadX, 0, 8,
          [&](Var tx) { b.Store(out, {bx * 8 + tx}, Load(A, {bx * 8 + tx})); });
  });
  std::vector<ArgValue> args = {MakeBuffer(kF32, std::vector<float>(8)), Poisoned(kF32, 16)};
  Status status = interp::Run(Verified(b), args);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(status, "out-of-bounds load of buffer 'A'")) << status;
  EXPECT_TRUE(Contains(status, "index 8 of dimension 0 is outside the extent 8")) << status;
  EXPECT_TRUE(Contains(status, "block (1, 0), thread (0, 0, 0)")) << status;

  IRBuilder s("store_overrun");
  Buffer C = s.BufferParam("C", kI32, {4, 4});
  s.For("tx", LoopKind::kThreadX, 0, 4, [&](Var tx) { s.Store(C, {tx, tx + 1}, tx); });
  std::vector<ArgValue> store_args = {Poisoned(kI32, 16)};
  status = interp::Run(Verified(s), store_args);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(status, "out-of-bounds store of buffer 'C'")) << status;
  EXPECT_TRUE(Contains(status, "index 4 of dimension 1 is outside the extent 4")) << status;
}

TEST(InterpreterTest, VectorAccessOutOfBoundsNamesTheLane) {
  IRBuilder b("vector_overrun");
  Buffer A = b.BufferParam("A", kF32, {6});
  Buffer out = b.BufferParam("out", kF32, {8});
  b.For("tx", LoopKind::kThreadX, 0, 2,
        [&](Var tx) { b.Store(out, {Ramp(tx * 4, 1, 4)}, Load(A, {Ramp(tx * 4, 1, 4)})); });
  std::vector<ArgValue> args = {MakeBuffer(kF32, std::vector<float>(6)), Poisoned(kF32, 8)};
  Status status = interp::Run(Verified(b), args);
  EXPECT_TRUE(Contains(status, "index 6 (lane 2)")) << status;
}

TEST(InterpreterTest, FailingAssertIsAnError) {
  IRBuilder b("checked");
  Buffer A = b.BufferParam("A", kI32, {4});
  b.For("tx", LoopKind::kThreadX, 0, 4,
        [&](Var tx) { b.Assert(Load(A, {tx}) >= 0, "inputs must be non-negative"); });
  const Function f = Verified(b);
  std::vector<ArgValue> good = {MakeBuffer(kI32, std::vector<int32_t>{0, 1, 2, 3})};
  EXPECT_TRUE(interp::Run(f, good).ok());
  std::vector<ArgValue> bad = {MakeBuffer(kI32, std::vector<int32_t>{0, 1, -2, 3})};
  Status status = interp::Run(f, bad);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(status, "assertion failed: inputs must be non-negative")) << status;
  EXPECT_TRUE(Contains(status, "thread (2, 0, 0)")) << status;
}

TEST(InterpreterTest, WhileLoopIterationBound) {
  IRBuilder b("forever");
  Buffer A = b.BufferParam("A", kI32, {1});
  b.While(Load(A, {0}) >= 0, [&] { b.Store(A, {0}, Load(A, {0}) + 1); });
  const Function f = Verified(b);
  std::vector<ArgValue> args = {MakeBuffer(kI32, std::vector<int32_t>{0})};
  RunOptions options;
  options.max_while_iterations = 1000;
  Status status = interp::Run(f, args, options);
  EXPECT_EQ(status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(Contains(status, "more than 1000 iterations")) << status;
  // Exactly at the bound is fine: A counts up from -1000 to 0.
  std::vector<ArgValue> bounded = {MakeBuffer(kI32, std::vector<int32_t>{-1000})};
  EXPECT_TRUE(interp::Run(f, bounded, options).ok());
}

// The verifier rejects the kernels of the next three tests; the interpreter
// must still refuse them when it is handed one.
TEST(InterpreterTest, BarrierInDivergentControlFlowIsAnError) {
  IRBuilder b("divergent_barrier");
  Buffer A = b.BufferParam("A", kI32, {8});
  b.For("tx", LoopKind::kThreadX, 0, 8, [&](Var tx) {
    b.If(tx < 4, [&] {
      b.Barrier();
      b.Store(A, {tx}, 1);
    });
  });
  std::vector<ArgValue> args = {Poisoned(kI32, 8)};
  Status status = interp::Run(b.Build(), args);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(status, "reached by 4 of 8 threads")) << status;
}

TEST(InterpreterTest, ShuffleFromAnInactiveLaneIsAnError) {
  IRBuilder b("bad_shuffle");
  Buffer A = b.BufferParam("A", kI32, {8});
  b.For("tx", LoopKind::kThreadX, 0, 8, [&](Var tx) {
    b.If(tx < 4, [&] {
      b.Store(A, {tx}, Call(Intrinsic::kSubgroupShuffle, {tx, Cast(kU32, tx + 4)}));
    });
  });
  std::vector<ArgValue> args = {Poisoned(kI32, 8)};
  Status status = interp::Run(b.Build(), args);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(status, "subgroup lane 4")) << status;
}

TEST(InterpreterTest, ThreadExtentsMustAgree) {
  IRBuilder b("two_extents");
  Buffer A = b.BufferParam("A", kI32, {8});
  b.For("tx", LoopKind::kThreadX, 0, 8, [&](Var tx) { b.Store(A, {tx}, 1); });
  b.For("tx2", LoopKind::kThreadX, 0, 4, [&](Var tx) { b.Store(A, {tx}, 2); });
  std::vector<ArgValue> args = {Poisoned(kI32, 8)};
  Status status = interp::Run(b.Build(), args);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(status, "threadIdx.x is bound with extents 8 and 4")) << status;
}

TEST(InterpreterTest, ScalarParametersOfEveryType) {
  IRBuilder b("scalars");
  Var i = b.ScalarParam("i", kI32);
  Var u = b.ScalarParam("u", kU32);
  Var f = b.ScalarParam("f", kF32);
  Buffer out = b.BufferParam("out", kF32, {1});
  b.Store(out, {0}, Cast(kF32, i) + Cast(kF32, u) * f);
  std::vector<ArgValue> args = {Value::I32(-3), Value::U32(4), Value::F32(0.5f), Poisoned(kF32, 1)};
  ASSERT_TRUE(interp::Run(Verified(b), args).ok());
  EXPECT_EQ(Contents<float>(args[3])[0], -1.0f);
}

TEST(InterpreterTest, HostBufferValueAccess) {
  HostBuffer h(kF16, {3});
  h.Set(0, Value::F32(1.0f / 3.0f));
  EXPECT_EQ(h.At<uint16_t>(0), 0x3555);
  EXPECT_EQ(h.Get(0).dtype, kF16);
  HostBuffer flags(kBool, {2});
  flags.Set(1, Value::Bool(true));
  EXPECT_EQ(flags.At<int32_t>(1), 1);
  EXPECT_EQ(flags.Get(1), Value::Bool(true));
  EXPECT_EQ(flags.num_elements(), 2);
}

}  // namespace
}  // namespace kiln::interp
