// Each verifier rule, violated once: the message names the function, the
// line of the printed text, the offending line, and what was expected.
#include "kiln/ir/verifier.h"

#include <gtest/gtest.h>

#include "kiln/ir/builder.h"
#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/source_map.h"

namespace kiln::ir {
namespace {

struct VerifyErrorCase {
  const char* name;
  const char* text;  // a module
  const char* message;
};

class VerifyErrorTest : public ::testing::TestWithParam<VerifyErrorCase> {};

TEST_P(VerifyErrorTest, ReportsTheOffendingNode) {
  StatusOr<Module> m = ParseModule(GetParam().text);
  ASSERT_TRUE(m.ok()) << m.status();
  // The cases are written in printed form, so the line numbers are those of the text.
  ASSERT_EQ(Print(*m), GetParam().text);
  Status s = Verify(*m);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kCompileError);
  EXPECT_EQ(s.message(), GetParam().message);
}

const VerifyErrorCase kVerifyErrors[] = {
    {"OperandTypes",
     "module {\n"
     "fn f(A: buffer<f32>[4], n: i32) {\n"
     "  A[0] = A[1] + f32(n) * 2.0 + n\n"
     "}\n"
     "}\n",
     "function 'f', line 3: `A[0] = A[1] + f32(n) * 2.0 + n`: operands of `A[1] + f32(n) * 2.0 + "
     "n` have different types: f32 and i32"},
    {"StoredType",
     "module {\n"
     "fn f(A: buffer<f32>[4]) {\n"
     "  A[0] = 1\n"
     "}\n"
     "}\n",
     "function 'f', line 3: `A[0] = 1`: stored value `1` has type i32; buffer 'A' at these "
     "indices needs f32"},
    {"VectorStoreType",
     "module {\n"
     "fn f(A: buffer<f32>[8]) {\n"
     "  A[ramp(0, 1, 4)] = 1.0\n"
     "}\n"
     "}\n",
     "function 'f', line 3: `A[ramp(0, 1, 4)] = 1.0`: stored value `1.0` has type f32; buffer "
     "'A' at these indices needs f32x4"},
    {"FloatIndex",
     "module {\n"
     "fn f(A: buffer<f32>[4]) {\n"
     "  A[0] = A[1.0]\n"
     "}\n"
     "}\n",
     "function 'f', line 3: `A[0] = A[1.0]`: `1.0` has type f32; expected an integer index"},
    {"IndexCount",
     "module {\n"
     "fn f(A: buffer<f32>[4, 4]) {\n"
     "  A[0] = 1.0\n"
     "}\n"
     "}\n",
     "function 'f', line 3: `A[0] = 1.0`: buffer 'A' has 2 dimensions but is indexed with 1"},
    {"IndexLanes",
     "module {\n"
     "fn f(A: buffer<f32>[4, 4]) {\n"
     "  A[ramp(0, 1, 2), ramp(0, 1, 4)] = broadcast(1.0, 4)\n"
     "}\n"
     "}\n",
     "function 'f', line 3: `A[ramp(0, 1, 2), ramp(0, 1, 4)] = broadcast(1.0, 4)`: indices of "
     "buffer 'A' have different lane counts"},
    {"NonBoolCondition",
     "module {\n"
     "fn f(A: buffer<f32>[4], n: i32) {\n"
     "  if (n) {\n"
     "    A[0] = 1.0\n"
     "  }\n"
     "}\n"
     "}\n",
     "function 'f', line 3: `if (n)`: `n` has type i32; expected bool"},
    {"BadIntrinsicOperand",
     "module {\n"
     "fn f(A: buffer<f32>[4], n: i32) {\n"
     "  A[0] = f32(exp(n))\n"
     "}\n"
     "}\n",
     "function 'f', line 3: `A[0] = f32(exp(n))`: `n` has type i32; expected a float (operand of "
     "exp)"},
    {"BadReinterpret",
     "module {\n"
     "fn f(A: buffer<f32>[4], n: i32) {\n"
     "  A[0] = reinterpret<f16>(n)\n"
     "}\n"
     "}\n",
     "function 'f', line 3: `A[0] = reinterpret<f16>(n)`: cannot reinterpret `n` of type i32 as "
     "f16 (bit widths must match)"},
    {"ScalarParamType",
     "module {\n"
     "fn f(A: buffer<f32>[4], n: i64) {\n"
     "}\n"
     "}\n",
     "function 'f', line 2: `fn f(A: buffer<f32>[4], n: i64)`: scalar parameter 'n' has type i64; "
     "expected i32, u32 or f32"},
    {"LaunchExtentsDisagree",
     "module {\n"
     "fn f(A: buffer<f32>[64]) {\n"
     "  for tx in threadIdx.x(0, 64) {\n"
     "    A[tx] = 0.0\n"
     "  }\n"
     "  for tx_1 in threadIdx.x(0, 32) {\n"
     "    A[tx_1] = 1.0\n"
     "  }\n"
     "}\n"
     "}\n",
     "function 'f', line 6: `for tx_1 in threadIdx.x(0, 32)`: threadIdx.x is bound with extent "
     "`32` here but with extent `64` elsewhere"},
    {"ThreadExtentNotConstant",
     "module {\n"
     "fn f(A: buffer<f32>[n], n: i32) {\n"
     "  for tx in threadIdx.x(0, n) {\n"
     "    A[tx] = 0.0\n"
     "  }\n"
     "}\n"
     "}\n",
     "function 'f', line 3: `for tx in threadIdx.x(0, n)`: threadIdx.x extent `n` must be a "
     "positive constant (it is the workgroup size)"},
    {"TooManyThreads",
     "module {\n"
     "fn f(A: buffer<f32>[512]) {\n"
     "  for ty in threadIdx.y(0, 16) {\n"
     "    for tx in threadIdx.x(0, 32) {\n"
     "      A[ty * 32 + tx] = 0.0\n"
     "    }\n"
     "  }\n"
     "}\n"
     "}\n",
     "function 'f', line 4: `for tx in threadIdx.x(0, 32)`: the workgroup has more than 256 "
     "threads (threadIdx.x = 32, threadIdx.y = 16)"},
    {"ThreadZBeyondItsAxis",
     "module {\n"
     "fn f(A: buffer<f32>[65]) {\n"
     "  for tz in threadIdx.z(0, 65) {\n"
     "    A[tz] = 0.0\n"
     "  }\n"
     "}\n"
     "}\n",
     "function 'f', line 3: `for tz in threadIdx.z(0, 65)`: threadIdx.z extent 65 exceeds the "
     "target's maxComputeWorkgroupSizeZ of 64"},
    {"BlockZ",
     "module {\n"
     "fn f(A: buffer<f32>[4]) {\n"
     "  for bz in blockIdx.z(0, 4) {\n"
     "    A[bz] = 0.0\n"
     "  }\n"
     "}\n"
     "}\n",
     "function 'f', line 3: `for bz in blockIdx.z(0, 4)`: blockIdx.z is reserved by the kernel ABI "
     "(it carries the large-grid split of blockIdx.x); use blockIdx.x or blockIdx.y"},
    {"BlockExtentUsesLoopVar",
     "module {\n"
     "fn f(A: buffer<f32>[16]) {\n"
     "  for i in serial(0, 4) {\n"
     "    for bx in blockIdx.x(0, i + 1) {\n"
     "      A[bx] = 0.0\n"
     "    }\n"
     "  }\n"
     "}\n"
     "}\n",
     "function 'f', line 4: `for bx in blockIdx.x(0, i + 1)`: blockIdx.x extent `i + 1` may use "
     "only constants and scalar parameters"},
    {"NestedSameAxis",
     "module {\n"
     "fn f(A: buffer<f32>[16]) {\n"
     "  for bx in blockIdx.x(0, 4) {\n"
     "    for bx_1 in blockIdx.x(0, 4) {\n"
     "      A[bx * 4 + bx_1] = 0.0\n"
     "    }\n"
     "  }\n"
     "}\n"
     "}\n",
     "function 'f', line 4: `for bx_1 in blockIdx.x(0, 4)`: blockIdx.x is bound inside a loop "
     "already bound to blockIdx.x"},
    {"ThreadLoopMin",
     "module {\n"
     "fn f(A: buffer<f32>[16]) {\n"
     "  for tx in threadIdx.x(1, 4) {\n"
     "    A[tx] = 0.0\n"
     "  }\n"
     "}\n"
     "}\n",
     "function 'f', line 3: `for tx in threadIdx.x(1, 4)`: threadIdx.x loop starts at `1`; "
     "expected 0"},
    {"NonConstantStep",
     "module {\n"
     "fn f(A: buffer<f32>[16], s: i32) {\n"
     "  for i in serial(0, 16, s) {\n"
     "    A[i] = 0.0\n"
     "  }\n"
     "}\n"
     "}\n",
     "function 'f', line 3: `for i in serial(0, 16, s)`: loop step `s` must be a positive "
     "constant"},
    {"LoopBoundTypes",
     "module {\n"
     "fn f(A: buffer<f32>[16], n: u32) {\n"
     "  for i in serial(0, n) {\n"
     "    A[i] = 0.0\n"
     "  }\n"
     "}\n"
     "}\n",
     "function 'f', line 3: `for i in serial(0, n)`: `n` has type u32; the loop variable 'i' has "
     "type i32"},
    {"BarrierUnderThreadCondition",
     "module {\n"
     "fn f(A: buffer<f32>[64]) {\n"
     "  for tx in threadIdx.x(0, 64) {\n"
     "    let half: i32 = tx / 2\n"
     "    if (half < 16) {\n"
     "      A[tx] = 0.0\n"
     "      workgroup_barrier()\n"
     "    }\n"
     "  }\n"
     "}\n"
     "}\n",
     "function 'f', line 7: `workgroup_barrier()`: workgroup_barrier() is under control flow that "
     "may differ between threads (it uses a thread index, a value derived from one, a memory load "
     "or a subgroup result: `if (half < 16)` at line 5); every thread of the workgroup "
     "must reach it"},
    {"BarrierUnderLoadedCondition",
     "module {\n"
     "fn f(A: buffer<f32>[64]) {\n"
     "  while (A[0] < 1.0) {\n"
     "    storage_barrier()\n"
     "  }\n"
     "}\n"
     "}\n",
     "function 'f', line 4: `storage_barrier()`: storage_barrier() is under control flow that "
     "may differ between threads (it uses a thread index, a value derived from one, a memory load "
     "or a subgroup result: `while (A[0] < 1.0)` at line 3); every thread of the "
     "workgroup must reach it"},
    {"SubgroupUnderThreadCondition",
     "module {\n"
     "fn f(A: buffer<f32>[64]) {\n"
     "  for tx in threadIdx.x(0, 64) {\n"
     "    A[tx] = if_then_else(tx < 32, subgroup_add(A[tx]), 0.0)\n"
     "  }\n"
     "}\n"
     "}\n",
     "function 'f', line 4: `A[tx] = if_then_else(tx < 32, subgroup_add(A[tx]), 0.0)`: "
     "`subgroup_add(A[tx])` is under control flow that may differ between threads (it uses a "
     "thread index, a value derived from one, a memory load or a subgroup result: `A[tx] = "
     "if_then_else(tx < 32, subgroup_add(A[tx]), 0.0)` at line 4); every thread of the workgroup "
     "must reach it"},
    {"SharedTooLarge",
     "module {\n"
     "fn f(A: buffer<f32>[64]) {\n"
     "  alloc a: f32[2048] shared {\n"
     "    alloc b: f32[2049] shared {\n"
     "      A[0] = a[0] + b[0]\n"
     "    }\n"
     "  }\n"
     "}\n"
     "}\n",
     "function 'f', line 4: `alloc b: f32[2049] shared`: shared buffers need 16400 bytes in all, "
     "more than the limit of 16384"},
    {"VectorOfFive",
     "module {\n"
     "fn f(A: buffer<f32>[8]) {\n"
     "  for v in vectorize(0, 5) {\n"
     "    A[v] = 1.0\n"
     "  }\n"
     "}\n"
     "}\n",
     "function 'f', line 3: `for v in vectorize(0, 5)`: vectorized loop 'v' has extent `5`; it "
     "must be a constant 2, 3 or 4 (the WGSL vector sizes)"},
    {"UnrollOfUnknownExtent",
     "module {\n"
     "fn f(A: buffer<f32>[n], n: i32) {\n"
     "  for u in unroll(0, n) {\n"
     "    A[u] = 1.0\n"
     "  }\n"
     "}\n"
     "}\n",
     "function 'f', line 3: `for u in unroll(0, n)`: unrolled loop 'u' has min `0` and extent "
     "`n`; both must be constants"},
    {"NegativeStride",
     "module {\n"
     "fn f(A: buffer<f32>[4] strides [-1]) {\n"
     "  A[0] = 1.0\n"
     "}\n"
     "}\n",
     "function 'f', line 2: `fn f(A: buffer<f32>[4] strides [-1])`: buffer 'A' has stride -1; "
     "strides are positive"},
    {"MoreElementsThanTheExtentTypeCounts",
     "module {\n"
     "fn f(A: buffer<f32>[65536, 32768]) {\n"
     "  A[0, 0] = 1.0\n"
     "}\n"
     "}\n",
     "function 'f', line 2: `fn f(A: buffer<f32>[65536, 32768])`: buffer 'A' has 2147483648 "
     "elements, more than its extents' type i32 counts (2147483647): kiln indexes a buffer in "
     "the type of its first extent"},
    {"StridedSpanPastTheExtentType",
     "module {\n"
     "fn f(A: buffer<f32>[3, 2] strides [2000000000, 1]) {\n"
     "  A[0, 0] = 1.0\n"
     "}\n"
     "}\n",
     "function 'f', line 2: `fn f(A: buffer<f32>[3, 2] strides [2000000000, 1])`: buffer 'A' "
     "has 4000000002 elements, more than its extents' type i32 counts (2147483647): kiln "
     "indexes a buffer in the type of its first extent"},
    {"NegativeBlockExtent",
     "module {\n"
     "fn f(A: buffer<f32>[4]) {\n"
     "  for b in blockIdx.x(0, 2 - 6) {\n"
     "    A[0] = 1.0\n"
     "  }\n"
     "}\n"
     "}\n",
     "function 'f', line 3: `for b in blockIdx.x(0, 2 - 6)`: blockIdx.x extent `2 - 6` is -4; a "
     "launch extent may be 0 (no blocks) but never negative"},
    {"NegativeExtent",
     "module {\n"
     "fn f(A: buffer<f32>[-4]) {\n"
     "  A[0] = 1.0\n"
     "}\n"
     "}\n",
     "function 'f', line 2: `fn f(A: buffer<f32>[-4])`: buffer 'A' has extent -4; extents are at "
     "least 0"},
    {"LocalTooLarge",
     "module {\n"
     "fn f(A: buffer<f32>[64]) {\n"
     "  alloc s: f32[256, 256] local {\n"
     "    A[0] = s[0, 0]\n"
     "  }\n"
     "}\n"
     "}\n",
     "function 'f', line 3: `alloc s: f32[256, 256] local`: local buffer 's' holds 65536 "
     "elements; a local buffer holds at most 65535"},
    {"LocalOverflowingSize",
     "module {\n"
     "fn f(A: buffer<f32>[64]) {\n"
     "  alloc s: f32[65536, 65536, 65536] local {\n"
     "    A[0] = s[0, 0, 0]\n"
     "  }\n"
     "}\n"
     "}\n",
     "function 'f', line 3: `alloc s: f32[65536, 65536, 65536] local`: local buffer 's' holds at "
     "least 1099511627776 elements; a local buffer holds at most 65535"},
    {"SharedPaddedTooLarge",  // 12 rows of 20, padded to a stride of 640: 7060 elements
     "module {\n"
     "fn f(A: buffer<f32>[64]) {\n"
     "  alloc a: f32[12, 20] strides [640, 1] shared {\n"
     "    A[0] = a[0, 0]\n"
     "  }\n"
     "}\n"
     "}\n",
     "function 'f', line 3: `alloc a: f32[12, 20] strides [640, 1] shared`: shared buffers need "
     "28240 bytes in all, more than the limit of 16384"},
    {"SharedExtentNotConstant",
     "module {\n"
     "fn f(A: buffer<f32>[n], n: i32) {\n"
     "  alloc a: f32[n] shared {\n"
     "    A[0] = a[0]\n"
     "  }\n"
     "}\n"
     "}\n",
     "function 'f', line 3: `alloc a: f32[n] shared`: shared buffer 'a' has extent `n`; expected a "
     "positive constant"},
    {"ParamShapeUsesBuffer",
     "module {\n"
     "fn f(S: buffer<i32>[1], A: buffer<f32>[S[0]]) {\n"
     "}\n"
     "}\n",
     "function 'f', line 2: `fn f(S: buffer<i32>[1], A: buffer<f32>[S[0]])`: shape of parameter "
     "'A' uses `S[0]`; expected constants and scalar parameters only"},
    {"DuplicateFunction",
     "module {\n"
     "fn f() {\n"
     "}\n"
     "\n"
     "fn f() {\n"
     "}\n"
     "}\n",
     "function 'f', line 5: the module already has a function of this name"},
    {"ErrorInALaterFunction",
     "module {\n"
     "fn g(A: buffer<f32>[4]) {\n"
     "  A[0] = 1.0\n"
     "}\n"
     "\n"
     "fn h() {\n"
     "}\n"
     "\n"
     "fn f(A: buffer<f32>[64]) {\n"
     "  for tx in threadIdx.x(0, 64) {\n"
     "    if (tx < 16) {\n"
     "      workgroup_barrier()\n"
     "    }\n"
     "  }\n"
     "}\n"
     "}\n",
     "function 'f', line 12: `workgroup_barrier()`: workgroup_barrier() is under control flow "
     "that may differ between threads (it uses a thread index, a value derived from one, a memory "
     "load or a subgroup result: `if (tx < 16)` at line 11); every thread of the "
     "workgroup must reach it"},
    {"WhileConditionTrueForTheValuesOfItsVariables",
     "module {\n"
     "fn f(A: buffer<f32>[4], n: i32) {\n"
     "  for tx in threadIdx.x(0, 1) {\n"
     "    let z: i32 = n - n + 1\n"
     "    for u in unroll(0, 2) {\n"
     "      while (tx < 5 && z == 1 && u <= 1) {\n"
     "        A[0] = 1.0\n"
     "      }\n"
     "    }\n"
     "  }\n"
     "}\n"
     "}\n",
     "function 'f', line 6: `while (tx < 5 && z == 1 && u <= 1)`: the condition `tx < 5 && z == 1 "
     "&& u <= 1` is always true (for the values its variables take here), so the loop never ends "
     "(only its condition can end a while loop)"},
    {"DuplicateFunctionAfterOthers",
     "module {\n"
     "fn f(A: buffer<f32>[4]) {\n"
     "  A[0] = 1.0\n"
     "}\n"
     "\n"
     "fn g() {\n"
     "}\n"
     "\n"
     "fn f() {\n"
     "}\n"
     "}\n",
     "function 'f', line 9: the module already has a function of this name"},
    {"WhileConditionAlwaysTrue",
     "module {\n"
     "fn f(A: buffer<f32>[4]) {\n"
     "  while (1 < 2 && true) {\n"
     "    A[0] = 1.0\n"
     "  }\n"
     "}\n"
     "}\n",
     "function 'f', line 3: `while (1 < 2 && true)`: the condition `1 < 2 && true` is always "
     "true, so the loop never ends (only its condition can end a while loop)"},
};

INSTANTIATE_TEST_SUITE_P(Errors, VerifyErrorTest, ::testing::ValuesIn(kVerifyErrors),
                         [](const auto& info) { return std::string(info.param.name); });

// Errors the text form cannot express (the parser resolves names), built in C++.
TEST(VerifierTest, VarUsedOutsideItsScope) {
  IRBuilder b("f");
  Buffer a = b.BufferParam("A", kI32, {Expr(4)});
  Var escaped;
  b.For("i", LoopKind::kSerial, 0, 4, [&](Var i) { escaped = i; });
  b.Store(a, {0}, escaped);
  Status s = Verify(b.Build());
  EXPECT_EQ(s.message(),
            "function 'f', line 4: `A[0] = i`: variable 'i' is used outside the scope of its "
            "definition");
}

TEST(VerifierTest, UndefinedVar) {
  IRBuilder b("f");
  Buffer a = b.BufferParam("A", kI32, {Expr(4)});
  b.Store(a, {0}, Var("ghost", kI32));
  EXPECT_EQ(Verify(b.Build()).message(),
            "function 'f', line 2: `A[0] = ghost`: variable 'ghost' is used but never defined");
}

TEST(VerifierTest, VarBoundTwice) {
  Var x("x", kI32);
  Buffer a("A", kI32, {Expr(4)});
  Stmt first = LetStmtNode::make(x, 1, StoreNode::make(a, {0}, x));
  Stmt second = LetStmtNode::make(x, 1, StoreNode::make(a, {0}, x));
  Function f("f", {Param::FromBuffer(a)}, MakeSeq({first, second}));
  EXPECT_EQ(Verify(f).message(),
            "function 'f', line 4: `let x: i32 = 1`: variable 'x' is defined twice (each variable "
            "is bound exactly once)");
}

TEST(VerifierTest, SubgroupsCanBeDisallowed) {
  StatusOr<Module> m =
      ParseModule("module { fn f(A: buffer<f32>[4]) { A[0] = subgroup_add(A[1]) } }");
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(Verify(*m).ok());
  VerifyOptions options;
  options.allow_subgroups = false;
  EXPECT_EQ(Verify(*m, options).message(),
            "function 'f', line 3: `A[0] = subgroup_add(A[1])`: `subgroup_add(A[1])` needs "
            "subgroups, which these options do not allow");
}

TEST(VerifierTest, SubgroupBuiltinsVaryBetweenThreadsAndNeedSubgroups) {
  // Read anywhere, even under thread-dependent control flow.
  StatusOr<Module> reads = ParseModule(
      "module { fn f(A: buffer<i32>[64]) { for tx in threadIdx.x(0, 64) { if (tx < 3) { "
      "A[tx] = subgroup_invocation_id() + subgroup_size() } } } }");
  ASSERT_TRUE(reads.ok()) << reads.status();
  EXPECT_TRUE(Verify(*reads).ok()) << Verify(*reads);
  VerifyOptions no_subgroups;
  no_subgroups.allow_subgroups = false;
  EXPECT_EQ(Verify(*reads, no_subgroups).message(),
            "function 'f', line 5: `A[tx] = subgroup_invocation_id() + subgroup_size()`: "
            "`subgroup_invocation_id()` needs subgroups, which these options do not allow");
  // A barrier under a condition on the lane is not reached by every thread.
  StatusOr<Module> barrier = ParseModule(
      "module { fn f(A: buffer<i32>[64]) { for tx in threadIdx.x(0, 64) { "
      "let lane: i32 = subgroup_invocation_id() if (lane == 0) { workgroup_barrier() } } } }");
  ASSERT_TRUE(barrier.ok()) << barrier.status();
  Status s = Verify(*barrier);
  EXPECT_NE(s.message().find("workgroup_barrier() is under control flow that may differ between "
                             "threads"),
            std::string::npos)
      << s;
  // So does the subgroup size, conservatively.
  StatusOr<Module> size = ParseModule(
      "module { fn f(A: buffer<i32>[64]) { for tx in threadIdx.x(0, 64) { "
      "if (subgroup_size() > 4) { A[tx] = subgroup_add(tx) } } } }");
  ASSERT_TRUE(size.ok()) << size.status();
  s = Verify(*size);
  EXPECT_NE(s.message().find("`subgroup_add(tx)` is under control flow that may differ between "
                             "threads"),
            std::string::npos)
      << s;
}

TEST(VerifierTest, BadFunctionName) {
  Function f("my kernel", {}, NoOp());
  EXPECT_EQ(Verify(f).message(),
            "function 'my kernel', line 1: `fn my_kernel()`: function name 'my kernel' is not an "
            "identifier (or is reserved)");
}

TEST(VerifierTest, UniformBarriersAndSharedWithinLimitPass) {
  StatusOr<Module> m = ParseModule(R"(module {
    fn f(A: buffer<f32>[64], n: i32) {
      for bx in blockIdx.x(0, n) {
        alloc t: f32[4096] shared {
          for tx in threadIdx.x(0, 64) {
            for k in serial(0, n) {
              if (bx < 3) { workgroup_barrier() }
            }
            t[tx] = A[tx]
          }
        }
      }
    }
  })");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(Verify(*m).ok()) << Verify(*m);
  VerifyOptions small;
  small.limits.max_workgroup_storage_bytes = 1024;
  EXPECT_FALSE(Verify(*m, small).ok());
}

// Expressions deeper than kMaxExprDepth (only the builder makes them; the
// parser stops earlier) are refused before anything recursive visits them,
// however deep.
TEST(VerifierTest, ExpressionsDeeperThanTheLimitAreRefused) {
  Buffer a("A", kF32, {Expr(4)});
  for (int depth : {kMaxExprDepth, kMaxExprDepth + 1, 8000}) {
    Expr value = LoadNode::make(a, {Expr(0)});  // 2 deep
    for (int k = 2; k < depth; ++k) value = -value;
    EXPECT_EQ(ExprDepth(value), std::min(depth, kMaxExprDepth + 1));
    Function f("f", {Param::FromBuffer(a)}, StoreNode::make(a, {Expr(1)}, value));
    Status s = Verify(f);
    if (depth <= kMaxExprDepth) {
      EXPECT_TRUE(s.ok()) << s;
    } else {
      EXPECT_EQ(s.message(),
                "function 'f': an expression nests more than 512 levels deep; kiln compiles "
                "expressions up to that depth (split a long one with let statements)");
    }
  }
  // Shared operands are measured once: 2^60 paths, 62 levels.
  Expr x = LoadNode::make(a, {Expr(0)});
  for (int k = 0; k < 60; ++k) x = x + x;
  EXPECT_EQ(ExprDepth(x), 62);
  // Small expressions (measured without the shared-node table), with and
  // without a cap below their depth.
  Expr small = LoadNode::make(a, {Expr(0)}) * 2.0f + LoadNode::make(a, {Expr(1) + Expr(2)});
  EXPECT_EQ(ExprDepth(small), 4);  // + over load over (1 + 2) over 1
  EXPECT_EQ(ExprDepth(small, 2), 3);
  EXPECT_EQ(ExprDepth(Expr(7)), 1);
  Expr y = LoadNode::make(a, {Expr(0)});
  for (int k = 0; k < 6; ++k) y = y + y;  // 127 paths through shared nodes
  EXPECT_EQ(ExprDepth(y), 8);
}

// What the WGSL target would refuse after lowering, refused at its line
// when the options ask.
TEST(VerifierTest, KernelRulesAtTheirLineWhenAsked) {
  const char* text =
      "module {\n"
      "fn f(A: buffer<f32>[300], B: buffer<f64>[4]) {\n"
      "  for i in unroll(0, 300) {\n"
      "    A[i] = 1.0\n"
      "  }\n"
      "}\n"
      "}\n";
  SourceMap source;
  auto module = ParseModule(text, &source);
  ASSERT_TRUE(module.ok()) << module.status();
  VerifyOptions options;
  EXPECT_TRUE(Verify(*module, options, source).ok());  // the interpreter runs it
  options.max_unrolled_extent = 300;
  options.kernel_buffer_types = true;
  EXPECT_EQ(Verify(*module, options, source).message(),
            "function 'f', line 2, column 1: `fn f(A: buffer<f32>[300], B: buffer<f64>[4])`: "
            "buffer parameter 'B' has element type f64; kernel buffers hold f32, f16, i32, u32, "
            "bool or int8x4");
  options.kernel_buffer_types = false;
  EXPECT_TRUE(Verify(*module, options, source).ok());
  options.max_unrolled_extent = 299;
  EXPECT_EQ(Verify(*module, options, source).message(),
            "function 'f', line 3, column 3: `for i in unroll(0, 300)`: unrolled loop 'i' has "
            "extent 300, more than the limit of 299 (unroll the inner loop of a split instead)");
}

// The module of `text` with its source map (an empty module, and a test
// failure, where it does not parse).
Module ParsedOrEmpty(const std::string& text, SourceMap& source) {
  StatusOr<Module> m = ParseModule(text, &source);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *std::move(m) : Module{};
}

// A long line is quoted up to 160 characters, then counted.
TEST(VerifierTest, LongLinesAreQuotedInPart) {
  std::string sum;
  for (int i = 0; i < 50; ++i) sum += "1.0 + ";
  const std::string text =
      "module {\nfn f(A: buffer<f32>[4], n: i32) {\n  A[0] = " + sum + "n\n}\n}\n";
  SourceMap source;
  const std::string message = Verify(ParsedOrEmpty(text, source), {}, source).message();
  const std::string line = "A[0] = " + sum + "n";
  EXPECT_NE(message.find("`" + line.substr(0, 160) + " ... (" + std::to_string(line.size() - 160) +
                         " more characters)`: "),
            std::string::npos)
      << message;
}

// Constant indices outside their dimension, and statements nested deeper
// than WGSL functions hold, refused at their line when the options ask.
TEST(VerifierTest, ConstantIndicesAndNestingAtTheirLineWhenAsked) {
  const char* text =
      "module {\n"
      "fn f(A: buffer<f32>[n, 4], S: buffer<f32>[8], n: i32) {\n"
      "  A[n - 1, 3] = 1.0\n"
      "  A[-1, 0] = 1.0\n"
      "  A[0, 2 * 2] = S[7]\n"
      "  A[0, 0] = S[8 - 8]\n"
      "}\n"
      "}\n";
  SourceMap source;
  const Module module = ParsedOrEmpty(text, source);
  VerifyOptions options;
  EXPECT_TRUE(Verify(module, options, source).ok());  // the interpreter reports it when run
  options.constant_indices_in_bounds = true;
  EXPECT_EQ(Verify(module, options, source).message(),
            "function 'f', line 4, column 3: `A[-1, 0] = 1.0`: `-1`, the index of buffer 'A' in "
            "dimension 0, is -1; an index is never negative");
  const Module fixed = ParsedOrEmpty(
      std::string(text).replace(std::string(text).find("A[-1, 0]"), 8, "A[0, 0]"), source);
  EXPECT_EQ(Verify(fixed, options, source).message(),
            "function 'f', line 5, column 3: `A[0, 2 * 2] = S[7]`: `2 * 2`, the index of buffer "
            "'A' in dimension 1, is 4, past the dimension's extent 4");

  // Nesting: serial loops and ifs count, thread-bound and unrolled loops not.
  auto nest = [](int ifs) {
    std::string body = "A[0, 0] = 1.0";
    for (int d = 0; d < ifs; ++d) {
      body = StrCat(d % 2 ? "for k" + std::to_string(d) + " in serial(0, n) {\n"
                          : "if (n > " + std::to_string(d) + ") {\n",
                    body, "\n}");
    }
    return StrCat("module {\nfn f(A: buffer<f32>[n, 4], n: i32) {\n",
                  "for tx in threadIdx.x(0, 4) {\nfor u in unroll(0, 2) {\n", body,
                  "\n}\n}\n}\n}\n");
  };
  options.max_nested_blocks = 3;
  const Module three = ParsedOrEmpty(nest(3), source);
  EXPECT_TRUE(Verify(three, options, source).ok()) << Verify(three, options, source);
  EXPECT_EQ(Verify(ParsedOrEmpty(nest(4), source), options, source).message(),
            "function 'f', line 8, column 1: `if (n > 0)`: loops and ifs nest more than 3 deep "
            "here, the most a WGSL function can hold (WebGPU implementations refuse deeper "
            "statements; each `else if` is an if inside the one before)");
  // An `else if` is found at its `if`: the third of a chain is a level too deep.
  std::string chain = "module {\nfn f(A: buffer<f32>[n, 4], n: i32) {\nif (n == 0) {\n}";
  for (int k = 1; k <= 4; ++k) chain += StrCat(" else if (n == ", k, ") {\nA[0, 0] = 1.0\n}");
  EXPECT_EQ(Verify(ParsedOrEmpty(chain + "\n}\n}\n", source), options, source).message(),
            "function 'f', line 8, column 8: `} else if (n == 3)`: loops and ifs nest more "
            "than 3 deep here, the most a WGSL function can hold (WebGPU implementations refuse "
            "deeper statements; each `else if` is an if inside the one before)");
  EXPECT_EQ(Verify(ParsedOrEmpty("module {\nfn f(A: buffer<f32>[n, 4], n: i32) {\nif (n == 0) "
                                 "{\n} else if (n) {\n}\n}\n}\n",
                                 source),
                   options, source)
                .message(),
            "function 'f', line 4, column 8: `} else if (n)`: `n` has type i32; expected bool");
}

// One expression on its own: type rules only, with free variables and
// buffers, a shared operand checked once, and no line in the message.
TEST(VerifierTest, CheckExpressionTypesChecksTypesAlone) {
  Buffer a("A", kF32, {Expr(4)});
  Buffer n("N", kI32, {Expr(4)});
  Var i("i", kI32);
  Expr x = LoadNode::make(a, {i});
  for (int k = 0; k < 60; ++k) x = x + x;  // 2^60 paths
  EXPECT_TRUE(CheckExpressionTypes(x).ok());
  Var t("t", kF32);
  EXPECT_TRUE(CheckExpressionTypes(LetNode::make(t, x, t * t) + LetNode::make(t, x, t)).ok());

  Status s = CheckExpressionTypes(Call(Intrinsic::kExp, {LoadNode::make(n, {i})}));
  EXPECT_EQ(s.code(), StatusCode::kCompileError);
  EXPECT_EQ(s.message(), "`N[i]` has type i32; expected a float (operand of exp)");
  s = CheckExpressionTypes(x + LoadNode::make(n, {i}));
  EXPECT_EQ(s.message(),
            "operands of an expression of type f32 with more than 256 operations have different "
            "types: f32 and i32");
  s = CheckExpressionTypes(LoadNode::make(a, {FloatConst(kF32, 1.0)}));
  EXPECT_EQ(s.message(), "`1.0` has type f32; expected an integer index");
  Expr deep = x;
  for (int k = 0; k < kMaxExprDepth; ++k) deep = -deep;
  EXPECT_FALSE(CheckExpressionTypes(deep).ok());
}

// With the parser's SourceMap, errors point into the user's text (its own
// layout, comments and blank lines), not into the module as printed.
TEST(VerifierTest, SourceMapGivesTheUsersLineAndColumn) {
  const char* text =
      "// a comment, then a blank line\n"
      "\n"
      "module {\n"
      "fn ok(A: buffer<f32>[4]) { A[0] = 1.0 }\n"
      "fn f(A: buffer<f32>[4],\n"
      "     n: i32) {\n"
      "  for i in serial(0, 4) {\n"
      "    let x: f32 = A[i]\n"
      "\n"
      "        A[i] = x + n\n"
      "  }\n"
      "}\n"
      "}\n";
  SourceMap source;
  StatusOr<Module> m = ParseModule(text, &source);
  ASSERT_TRUE(m.ok()) << m.status();
  Status s = Verify(*m, {}, source);
  EXPECT_EQ(s.code(), StatusCode::kCompileError);
  EXPECT_EQ(s.message(),
            "function 'f', line 10, column 9: `A[i] = x + n`: operands of `x + n` have different "
            "types: f32 and i32");
  // Without it, the line is that of the printed module.
  EXPECT_EQ(Verify(*m).message().find("line 10"), std::string::npos) << Verify(*m);
}

// An expression too deep to compile is reported at its statement's line in
// the user's text (the printed module is never made for it).
TEST(VerifierTest, SourceMapLocatesTooDeepExpressions) {
  std::string chain = "A[0]";
  for (int i = 0; i < 600; ++i) chain += " + 1.0";
  const std::string text =
      "module {\nfn f(A: buffer<f32>[4]) {\n  A[2] = 1.0\n\n  A[1] = " + chain + "\n}\n}\n";
  SourceMap source;
  StatusOr<Module> m = ParseModule(text, &source);
  ASSERT_TRUE(m.ok()) << m.status();
  Status s = Verify(*m, {}, source);
  EXPECT_EQ(s.code(), StatusCode::kCompileError);
  EXPECT_EQ(s.message().rfind("function 'f', line 5, column 3: `A[1] = A[0] + 1.0 + ", 0), 0)
      << s.message().substr(0, 200);
  EXPECT_NE(s.message().find("nests more than 512 levels deep"), std::string::npos);
}

TEST(VerifierTest, SourceMapLocatesFunctionsAndLets) {
  const char* text =
      "module {\n"
      "  fn f(A: buffer<f32>[4]) { A[0] = 1.0 }\n"
      "\n"
      "  fn f(A: buffer<f32>[4]) { A[0] = 1.0 }\n"
      "}\n";
  SourceMap source;
  StatusOr<Module> m = ParseModule(text, &source);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(Verify(*m, {}, source).message(),
            "function 'f', line 4, column 3: the module already has a function of this name");

  const char* scalar =
      "module {\n"
      "fn g(A: buffer<f32>[4],\n"
      "     h: f16) {\n"
      "  A[0] = 1.0\n"
      "}\n"
      "}\n";
  m = ParseModule(scalar, &source);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(Verify(*m, {}, source).message(),
            "function 'g', line 2, column 1: `fn g(A: buffer<f32>[4],`: scalar parameter 'h' has "
            "type f16; expected i32, u32 or f32");

  const char* let =
      "module {\n"
      "fn k(A: buffer<f32>[4]) {\n"
      "  A[1] = 2.0\n"
      "      let y: f32 = 1\n"
      "  A[0] = y\n"
      "}\n"
      "}\n";
  m = ParseModule(let, &source);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(Verify(*m, {}, source).message().substr(0, 40),
            "function 'k', line 4, column 7: `let y: ");
}

}  // namespace
}  // namespace kiln::ir
