// Tests of the WGSL code generator against the kernel ABI and of each
// construct it translates. Whole-file goldens are in wgsl_golden_test.cc.
#include "kiln/codegen/wgsl_codegen.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>

#include "kiln/codegen/kernel_abi.h"
#include "kiln/codegen/module_format.h"
#include "kiln/ir/ir.h"

namespace kiln::codegen {
namespace {

using namespace ::kiln::ir;  // NOLINT: IR builder vocabulary

// Whether `text` contains `fragment`, showing both when it does not.
testing::AssertionResult Contains(const std::string& text, std::string_view fragment) {
  if (text.find(fragment) != std::string::npos) return testing::AssertionSuccess();
  return testing::AssertionFailure() << "missing:\n" << fragment << "\nin:\n" << text;
}

// With KILN_WGSL_DUMP_DIR set, every module a test generates is written there
// as <kernel>.wgsl, for checking with external WGSL compilers.
void MaybeDump(const CompiledFunction& f) {
  const char* dir = std::getenv("KILN_WGSL_DUMP_DIR");
  if (dir != nullptr) std::ofstream(StrCat(dir, "/", f.metadata.entry_point, ".wgsl")) << f.wgsl;
}

CompiledFunction Generate(const Function& f, const CodegenOptions& options = {}) {
  StatusOr<CompiledFunction> result = GenerateWgsl(f, options);
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return CompiledFunction{};
  MaybeDump(*result);
  return *result;
}

Status GenerateError(const Function& f, const CodegenOptions& options = {}) {
  StatusOr<CompiledFunction> result = GenerateWgsl(f, options);
  EXPECT_FALSE(result.ok()) << result->wgsl;
  return result.status();
}

// Parameters interleaving buffers and scalars; B is stored to, A and C not.
Function Interleaved() {
  IRBuilder b("interleaved");
  Buffer A = b.BufferParam("A", kF32, {4});
  Var n = b.ScalarParam("n", kI32);
  Buffer B = b.BufferParam("B", kF32, {4});
  Var alpha = b.ScalarParam("alpha", kF32);
  Buffer C = b.BufferParam("C", kU32, {4});
  Var k = b.ScalarParam("k", kU32);
  b.For("tx", LoopKind::kThreadX, 0, 4, [&](Var tx) {
    b.If(tx < n, [&] { b.Store(B, {tx}, Load(A, {tx}) * alpha + Cast(kF32, Load(C, {tx}) + k)); });
  });
  return b.Build();
}

TEST(WgslAbiTest, BuffersBindInParameterOrderWithInferredAccess) {
  CompiledFunction f = Generate(Interleaved());
  EXPECT_TRUE(Contains(f.wgsl,
                       "@group(0) @binding(0) var<storage, read> A : array<f32>;\n"
                       "@group(0) @binding(1) var<storage, read_write> B : array<f32>;\n"
                       "@group(0) @binding(2) var<storage, read> C : array<u32>;\n"
                       "@group(0) @binding(3) var<uniform> args : KernelArgs;\n"));
  const std::vector<ParamInfo>& params = f.metadata.params;
  ASSERT_EQ(params.size(), 6u);
  EXPECT_EQ(params[0].binding, 0u);
  EXPECT_EQ(params[0].access, BufferAccess::kRead);
  EXPECT_EQ(params[2].binding, 1u);
  EXPECT_EQ(params[2].access, BufferAccess::kReadWrite);
  EXPECT_EQ(params[4].binding, 2u);
  EXPECT_EQ(params[4].access, BufferAccess::kRead);
  EXPECT_EQ(params[4].dtype, DType::kU32);
  ASSERT_EQ(params[4].shape.size(), 1u);
  EXPECT_EQ(params[4].shape[0].text, "4");
}

TEST(WgslAbiTest, ScalarsAndLaunchWordsFormOnePackedUniformBlock) {
  CompiledFunction f = Generate(Interleaved());
  EXPECT_TRUE(Contains(f.wgsl,
                       "struct KernelArgs {\n  n : i32,\n  alpha : f32,\n  k : u32,\n"
                       "  grid_dim_x : u32,\n  num_blocks_x : u32,\n}\n"));
  EXPECT_TRUE(Contains(f.wgsl,
                       "  let n : i32 = args.n;\n  let alpha : f32 = args.alpha;\n"
                       "  let k : u32 = args.k;\n"));
  const std::vector<ParamInfo>& params = f.metadata.params;
  EXPECT_EQ(params[1].kind, ParamKind::kScalar);
  EXPECT_EQ(params[1].uniform_offset, 0u);
  EXPECT_EQ(params[3].uniform_offset, 4u);
  EXPECT_EQ(params[5].uniform_offset, 8u);
  EXPECT_EQ(f.metadata.uniform_binding, 3u);
  EXPECT_EQ(f.metadata.uniform_block_size, 32u);  // 5 words -> 20 bytes -> 32
  EXPECT_EQ(f.metadata.uniform_block_size, abi::UniformBlockSize(3));
}

TEST(WgslAbiTest, UniformBlockIsPresentWithoutScalars) {
  IRBuilder b("no_scalars");
  Buffer A = b.BufferParam("A", kF32, {1});
  b.Store(A, {0}, FloatConst(kF32, 1.0));
  CompiledFunction f = Generate(b.Build());
  EXPECT_TRUE(Contains(f.wgsl,
                       "struct KernelArgs {\n  grid_dim_x : u32,\n"
                       "  num_blocks_x : u32,\n}\n"));
  EXPECT_TRUE(Contains(f.wgsl, "@group(0) @binding(1) var<uniform> args : KernelArgs;"));
  EXPECT_EQ(f.metadata.uniform_block_size, 16u);
  EXPECT_EQ(f.metadata.num_blocks_x.text, "1");
  EXPECT_EQ(f.metadata.num_blocks_y.text, "1");
}

TEST(WgslAbiTest, LargeGridPrologueRecombinesBlockIdxXAndReturnsFirst) {
  IRBuilder b("grid");
  Var n = b.ScalarParam("n", kI32);
  Var m = b.ScalarParam("m", kI32);
  Buffer A = b.BufferParam("A", kI32, {m * n});
  b.For("by", LoopKind::kBlockY, 0, m, [&](Var by) {
    b.For("bx", LoopKind::kBlockX, 0, n, [&](Var bx) {
      b.For("tx", LoopKind::kThreadX, 0, 8, [&](Var tx) {
        b.For("tz", LoopKind::kThreadZ, 0, 2, [&](Var tz) {
          b.Store(A, {by * n + bx}, tx + tz);
          b.Barrier();
        });
      });
    });
  });
  CompiledFunction f = Generate(b.Build());
  EXPECT_TRUE(Contains(f.wgsl,
                       "@compute @workgroup_size(8, 1, 2)\n"
                       "fn grid(@builtin(workgroup_id) wid : vec3<u32>, "
                       "@builtin(local_invocation_id) lid : vec3<u32>) {\n"
                       "  let block_x : u32 = wid.x + wid.z * args.grid_dim_x;\n"
                       "  if (block_x >= args.num_blocks_x) {\n    return;\n  }\n"));
  EXPECT_TRUE(Contains(f.wgsl, "let by : i32 = i32(wid.y);"));
  EXPECT_TRUE(Contains(f.wgsl, "let bx : i32 = i32(block_x);"));
  EXPECT_TRUE(Contains(f.wgsl, "let tz : i32 = i32(lid.z);"));
  // The early return precedes every barrier.
  EXPECT_LT(f.wgsl.find("return;"), f.wgsl.find("workgroupBarrier();"));
  EXPECT_EQ(f.metadata.num_blocks_x.text, "n");
  EXPECT_EQ(f.metadata.num_blocks_y.text, "m");
  EXPECT_EQ(f.metadata.workgroup_size, (std::array<uint32_t, 3>{8, 1, 2}));
  EXPECT_EQ(f.metadata.entry_point, "grid");
}

TEST(WgslAbiTest, LaunchExtentsAndShapesParseOverScalarParameters) {
  // The runtime parses these texts with the call's scalar parameters in scope.
  IRBuilder b("tiles");
  Var rows = b.ScalarParam("rows", kI32);
  Var cols = b.ScalarParam("cols", kI32);
  Buffer A = b.BufferParam("A", kF32, {rows, cols * 2});
  b.For("by", LoopKind::kBlockY, 0, (rows + 7) / 8, [&](Var by) {
    b.For("bx", LoopKind::kBlockX, 0, Max((cols + 31) / 32, 1), [&](Var bx) {
      b.For("tx", LoopKind::kThreadX, 0, 32, [&](Var tx) {
        b.Store(A, {by, bx * 32 + tx}, FloatConst(kF32, 0.0));
      });
    });
  });
  StatusOr<CompiledFunction> f = CompileFunction(b.Build());
  ASSERT_TRUE(f.ok()) << f.status();
  std::vector<std::string> texts = {f->metadata.num_blocks_x.text, f->metadata.num_blocks_y.text};
  for (const ExtentExpr& dim : f->metadata.params[2].shape) texts.push_back(dim.text);
  for (const std::string& text : texts) {
    StatusOr<Expr> parsed = ParseExpr(text, {rows, cols});
    ASSERT_TRUE(parsed.ok()) << text << ": " << parsed.status();
    EXPECT_EQ(Print(*parsed), text);
  }
  EXPECT_EQ(f->metadata.num_blocks_y.text, "(rows + 7) / 8");
}

TEST(WgslAbiTest, BlockIdxZIsRejected) {
  IRBuilder b("z");
  Buffer A = b.BufferParam("A", kI32, {4});
  b.For("bz", LoopKind::kBlockZ, 0, 4, [&](Var bz) { b.Store(A, {bz}, bz); });
  Status status = GenerateError(b.Build());
  EXPECT_TRUE(Contains(status.message(), "blockIdx.z is reserved by the kernel ABI"));
}

TEST(WgslAbiTest, WorkgroupSizeIsCheckedAgainstDeviceLimits) {
  IRBuilder b("big_group");
  Buffer A = b.BufferParam("A", kI32, {512});
  b.For("tx", LoopKind::kThreadX, 0, 128, [&](Var tx) {
    b.For("ty", LoopKind::kThreadY, 0, 4, [&](Var ty) { b.Store(A, {ty * 128 + tx}, tx); });
  });
  Function f = b.Build();
  Status status = GenerateError(f);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(status.message(),
                       "kernel 'big_group': workgroup size (128, 4, 1) has 512 "
                       "invocations, more than the device's "
                       "maxComputeInvocationsPerWorkgroup of 256"));
  CodegenOptions narrow;
  narrow.limits.max_invocations_per_workgroup = 1024;
  narrow.limits.max_workgroup_size_x = 64;
  EXPECT_TRUE(Contains(GenerateError(f, narrow).message(),
                       "workgroup size 128 along X exceeds the device's "
                       "maxComputeWorkgroupSizeX of 64"));
  CodegenOptions roomy;
  roomy.limits.max_invocations_per_workgroup = 1024;
  EXPECT_EQ(Generate(f, roomy).metadata.workgroup_size, (std::array<uint32_t, 3>{128, 4, 1}));
}

TEST(WgslAbiTest, WorkgroupStorageIsCheckedAgainstDeviceLimits) {
  IRBuilder b("big_tile");
  Buffer A = b.BufferParam("A", kF32, {1});
  b.Allocate("tile", kF32, {8192}, MemoryScope::kShared, [&](Buffer tile) {
    b.Store(tile, {0}, FloatConst(kF32, 1.0));
    b.Store(A, {0}, Load(tile, {0}));
  });
  Status status = GenerateError(b.Build());
  EXPECT_TRUE(Contains(status.message(),
                       "shared allocations take 32768 bytes, more than the "
                       "device's maxComputeWorkgroupStorageSize of 16384"));
}

TEST(WgslAbiTest, NamesAreSanitisedAndNeverReserved) {
  IRBuilder b("my.kernel");
  Var loop = b.ScalarParam("loop", kI32);
  Buffer var_buffer = b.BufferParam("var", kF32, {4});
  Buffer exp_buffer = b.BufferParam("exp", kF32, {4});
  Buffer args_buffer = b.BufferParam("args", kF32, {4});
  b.For("tx", LoopKind::kThreadX, 0, 4, [&](Var tx) {
    Var let = b.Let("let", Load(var_buffer, {tx}) + Load(exp_buffer, {tx}));
    b.Store(args_buffer, {tx}, Call(Intrinsic::kExp, {let}) + Cast(kF32, loop));
  });
  CompiledFunction f = Generate(b.Build());
  EXPECT_EQ(f.metadata.entry_point, "my_kernel");
  EXPECT_EQ(f.metadata.name, "my.kernel");
  EXPECT_TRUE(Contains(f.wgsl, "fn my_kernel("));
  EXPECT_TRUE(Contains(f.wgsl, "var<storage, read> var_1 : array<f32>;"));
  EXPECT_TRUE(Contains(f.wgsl, "var<storage, read> exp_1 : array<f32>;"));
  EXPECT_TRUE(Contains(f.wgsl, "var<storage, read_write> args_1 : array<f32>;"));
  EXPECT_TRUE(Contains(f.wgsl, "loop_1 : i32,"));  // the uniform field
  EXPECT_TRUE(Contains(f.wgsl, "let let_1 : f32 = var_1[tx] + exp_1[tx];"));
  EXPECT_TRUE(Contains(f.wgsl, "args_1[tx] = exp(let_1) + f32(loop_1);"));
  // The metadata keeps the IR's names.
  EXPECT_EQ(f.metadata.params[1].name, "var");
}

TEST(WgslCodegenTest, BoolBuffersAreI32ConvertedOnLoadAndStore) {
  IRBuilder b("bools");
  Buffer In = b.BufferParam("In", kBool, {4});
  Buffer Out = b.BufferParam("Out", kBool, {4});
  b.For("tx", LoopKind::kThreadX, 0, 4, [&](Var tx) { b.Store(Out, {tx}, !Load(In, {tx})); });
  CompiledFunction f = Generate(b.Build());
  EXPECT_TRUE(Contains(f.wgsl, "var<storage, read> In : array<i32>;"));
  EXPECT_TRUE(Contains(f.wgsl, "var<storage, read_write> Out : array<i32>;"));
  EXPECT_TRUE(Contains(f.wgsl, "Out[tx] = select(0i, 1i, !(In[tx] != 0i));"));
  EXPECT_EQ(f.metadata.params[0].dtype, DType::kBool);
}

TEST(WgslCodegenTest, HalfPrecisionEnablesF16) {
  IRBuilder b("halves");
  Buffer A = b.BufferParam("A", kF16, {4});
  b.For("tx", LoopKind::kThreadX, 0, 4,
        [&](Var tx) { b.Store(A, {tx}, Load(A, {tx}) * FloatConst(kF16, 1.5)); });
  CompiledFunction f = Generate(b.Build());
  EXPECT_EQ(f.wgsl.rfind("enable f16;\n", 0), 0u);
  EXPECT_TRUE(Contains(f.wgsl, "var<storage, read_write> A : array<f16>;"));
  EXPECT_TRUE(Contains(f.wgsl, "A[tx] = A[tx] * 1.5h;"));
  EXPECT_EQ(f.metadata.required_features, std::vector<std::string>{"shader-f16"});
}

TEST(WgslCodegenTest, SubgroupBuiltinsEnableSubgroups) {
  IRBuilder b("reduce");
  Buffer A = b.BufferParam("A", kF32, {32});
  b.For("tx", LoopKind::kThreadX, 0, 32, [&](Var tx) {
    Var lane0 = b.Let("first", Call(Intrinsic::kSubgroupBroadcastFirst, {Load(A, {tx})}));
    Var shuffled =
        b.Let("shuffled", Call(Intrinsic::kSubgroupShuffle, {Load(A, {tx}), Cast(kU32, tx)}));
    b.Store(A, {tx}, Call(Intrinsic::kSubgroupMax, {lane0 + shuffled}));
  });
  CompiledFunction f = Generate(b.Build());
  EXPECT_EQ(f.wgsl.rfind("enable subgroups;\ndiagnostic(off, subgroup_uniformity);\n", 0), 0u);
  EXPECT_TRUE(Contains(f.wgsl, "subgroupBroadcastFirst(A[tx])"));
  EXPECT_TRUE(Contains(f.wgsl, "subgroupShuffle(A[tx], u32(tx))"));
  EXPECT_TRUE(Contains(f.wgsl, "subgroupMax(first + shuffled)"));
  EXPECT_EQ(f.metadata.required_features, std::vector<std::string>{"subgroups"});
  EXPECT_FALSE(Contains(abi::StripSubgroupsEnable(f.wgsl), "enable subgroups"));
}

TEST(WgslCodegenTest, SubgroupBuiltinsAreEntryPointParameters) {
  // Only the builtins the body reads are declared.
  IRBuilder lane_only("lane_only");
  Buffer A = lane_only.BufferParam("A", kI32, {64});
  lane_only.For("tx", LoopKind::kThreadX, 0, 64, [&](Var tx) {
    lane_only.Store(A, {tx}, Call(Intrinsic::kSubgroupInvocationId, {}) * 2);
  });
  CompiledFunction f = Generate(lane_only.Build());
  EXPECT_TRUE(Contains(f.wgsl,
                       "@builtin(local_invocation_id) lid : vec3<u32>, "
                       "@builtin(subgroup_invocation_id) sg_lane : u32) {"))
      << f.wgsl;
  EXPECT_FALSE(Contains(f.wgsl, "@builtin(subgroup_size)")) << f.wgsl;
  EXPECT_TRUE(Contains(f.wgsl, "A[tx] = i32(sg_lane) * 2i;")) << f.wgsl;
  EXPECT_EQ(f.wgsl.rfind("enable subgroups;\n", 0), 0u);
  EXPECT_EQ(f.metadata.required_features, std::vector<std::string>{"subgroups"});

  // Both, with names that do not clash with the kernel's own.
  IRBuilder both("both");
  Buffer B = both.BufferParam("B", kI32, {64});
  Var sg_lane = both.ScalarParam("sg_lane", kI32);
  both.For("tx", LoopKind::kThreadX, 0, 64, [&](Var tx) {
    both.Store(
        B, {tx},
        Call(Intrinsic::kSubgroupInvocationId, {}) + Call(Intrinsic::kSubgroupSize, {}) * sg_lane);
  });
  CompiledFunction g = Generate(both.Build());
  EXPECT_TRUE(Contains(g.wgsl,
                       "@builtin(subgroup_invocation_id) sg_lane : u32, "
                       "@builtin(subgroup_size) sg_size : u32) {"))
      << g.wgsl;
  EXPECT_TRUE(Contains(g.wgsl, "let sg_lane_1 : i32 = args.sg_lane;")) << g.wgsl;
  EXPECT_TRUE(Contains(g.wgsl, "i32(sg_lane) + i32(sg_size) * sg_lane_1")) << g.wgsl;

  // Kernels without them declare neither.
  IRBuilder none("none");
  Buffer C = none.BufferParam("C", kI32, {64});
  none.For("tx", LoopKind::kThreadX, 0, 64,
           [&](Var tx) { none.Store(C, {tx}, Call(Intrinsic::kSubgroupAdd, {tx})); });
  CompiledFunction h = Generate(none.Build());
  EXPECT_FALSE(Contains(h.wgsl, "sg_lane")) << h.wgsl;
  EXPECT_FALSE(Contains(h.wgsl, "sg_size")) << h.wgsl;
}

TEST(WgslCodegenTest, ContiguousAndGatheredVectorAccesses) {
  IRBuilder b("vectors");
  Buffer A = b.BufferParam("A", kF32, {16});
  Buffer B = b.BufferParam("B", kF32, {16});
  b.For("tx", LoopKind::kThreadX, 0, 4, [&](Var tx) {
    Expr contiguous = Load(A, {Ramp(tx * 4, 1, 4)});
    Expr gathered = Load(A, {Ramp(tx, 4, 4)});
    b.Store(B, {Ramp(tx, 4, 4)}, contiguous + gathered * Broadcast(FloatConst(kF32, 2.0), 4));
  });
  CompiledFunction f = Generate(b.Build());
  EXPECT_TRUE(Contains(f.wgsl,
                       "let index : vec4<i32> = vec4<i32>(tx) + "
                       "vec4<i32>(0i, 1i, 2i, 3i) * 4i;"));
  EXPECT_TRUE(Contains(f.wgsl, "let base : i32 = tx * 4i;"));
  EXPECT_TRUE(Contains(f.wgsl, "vec4<f32>(A[base], A[base + 1i], A[base + 2i], A[base + 3i])"));
  EXPECT_TRUE(Contains(f.wgsl,
                       "vec4<f32>(A[index[0]], A[index[1]], A[index[2]], "
                       "A[index[3]]) * vec4<f32>(2f)"));
  EXPECT_TRUE(Contains(f.wgsl, "B[index[3]] = value[3];"));
}

TEST(WgslCodegenTest, IfThenElseEvaluatesOnlyTheTakenSide) {
  IRBuilder b("guarded");
  Var n = b.ScalarParam("n", kI32);
  Buffer A = b.BufferParam("A", kF32, {n});
  b.For("tx", LoopKind::kThreadX, 0, 64, [&](Var tx) {
    b.Store(A, {tx % n},
            IfThenElse(tx < n, Load(A, {tx}), Call(Intrinsic::kSqrt, {FloatConst(kF32, 2.0)})));
  });
  CompiledFunction f = Generate(b.Build());
  EXPECT_TRUE(Contains(f.wgsl,
                       "  var cond_value : f32;\n"
                       "  if (tx < n) {\n"
                       "    cond_value = A[tx];\n"
                       "  } else {\n"
                       "    cond_value = sqrt(kiln_rt_f32(2f));\n"
                       "  }\n"
                       "  A[kiln_rem_i32(tx, n)] = cond_value;\n"));
}

TEST(WgslCodegenTest, SelectEvaluatesBothSides) {
  IRBuilder b("sel");
  Buffer A = b.BufferParam("A", kI32, {4});
  b.For("tx", LoopKind::kThreadX, 0, 4,
        [&](Var tx) { b.Store(A, {tx}, Select(tx > 1, Load(A, {tx}), -tx)); });
  EXPECT_TRUE(Contains(Generate(b.Build()).wgsl, "A[tx] = select(0i - tx, A[tx], tx > 1i);"));
}

TEST(WgslCodegenTest, WhileLoopHoistsConditionStatementsIntoTheLoop) {
  IRBuilder b("spin");
  Buffer A = b.BufferParam("A", kI32, {2});
  b.While(IfThenElse(Load(A, {0}) > 0, Load(A, {1}), IntConst(kI32, 0)) < 10,
          [&] { b.Store(A, {1}, Load(A, {1}) + 1); });
  b.While(Load(A, {0}) < 3, [&] { b.Store(A, {0}, Load(A, {0}) + 1); });
  CompiledFunction f = Generate(b.Build());
  EXPECT_TRUE(Contains(f.wgsl,
                       "  loop {\n"
                       "    var cond_value : i32;\n"
                       "    if (A[0i] > 0i) {\n"
                       "      cond_value = A[1i];\n"
                       "    } else {\n"
                       "      cond_value = 0i;\n"
                       "    }\n"
                       "    if (!(cond_value < 10i)) {\n"
                       "      break;\n"
                       "    }\n"
                       "    A[1i] = A[1i] + 1i;\n"
                       "  }\n"));
  EXPECT_TRUE(Contains(f.wgsl, "  while (A[0i] < 3i) {\n    A[0i] = A[0i] + 1i;\n  }\n"));
}

// The metadata says whether every loop terminates: `for` loops run bounded
// trip counts, a `while` loop need not end.
TEST(WgslCodegenTest, MetadataSaysWhetherLoopsTerminate) {
  IRBuilder b("counted");
  Var n = b.ScalarParam("n", kI32);
  Buffer A = b.BufferParam("A", kI32, {n});
  b.For("i", LoopKind::kSerial, 0, n, [&](Var i) { b.Store(A, {i}, i); });
  EXPECT_TRUE(Generate(b.Build()).metadata.loops_terminate);
  IRBuilder w("searching");
  Buffer B = w.BufferParam("B", kI32, {4});
  w.While(Load(B, {0}) < 3, [&] { w.Store(B, {0}, Load(B, {0}) + 1); });
  EXPECT_FALSE(Generate(w.Build()).metadata.loops_terminate);
}

TEST(WgslCodegenTest, SerialLoopsEvaluateBoundsOnce) {
  IRBuilder b("loops");
  Var n = b.ScalarParam("n", kI32);
  Buffer A = b.BufferParam("A", kI32, {n});
  b.For(
      "i", LoopKind::kSerial, 2, n - 2, [&](Var i) { b.Store(A, {i}, i); }, 3);
  b.For("j", LoopKind::kSerial, 0, 4, [&](Var j) { b.Store(A, {j}, j); });
  CompiledFunction f = Generate(b.Build());
  // n - 2 is not known to be small: a trip counter, so that 2 + (n - 2)
  // and the last `i += 3` cannot overflow.
  EXPECT_TRUE(Contains(f.wgsl,
                       "  let i_extent : i32 = n - 2i;\n"
                       "  let i_trips : u32 = select(0u, (u32(i_extent) - 1u) / 3u + 1u, "
                       "i_extent > 0i);\n"
                       "  for (var i_k : u32 = 0u; i_k < i_trips; i_k++) {\n"
                       "    let i : i32 = 2i + i32(i_k) * 3i;\n"));
  EXPECT_TRUE(Contains(f.wgsl, "for (var j : i32 = 0i; j < 4i; j++) {"));
}

TEST(WgslCodegenTest, IntegerDivisionFollowsTheIrForNegativeOperands) {
  IRBuilder b("divs");
  Buffer A = b.BufferParam("A", kI32, {4});
  Buffer U = b.BufferParam("U", kU32, {2});
  Buffer F = b.BufferParam("F", kF32, {2});
  b.Store(A, {0}, Load(A, {0}) / Load(A, {1}));
  b.Store(A, {1}, Load(A, {0}) % Load(A, {1}));
  b.Store(A, {2}, FloorDiv(Load(A, {2}), Load(A, {3})));
  b.Store(A, {3}, FloorMod(Load(A, {2}), Load(A, {3})));
  b.Store(U, {0}, FloorDiv(Load(U, {0}), Load(U, {1})));
  b.Store(F, {0}, FloorDiv(Load(F, {0}), Load(F, {1})));
  b.Store(F, {1}, FloorMod(Load(F, {0}), Load(F, {1})));
  b.Store(U, {1}, Load(U, {0}) % Load(U, {1}));
  b.Store(A, {0}, Load(A, {0}) / 3);
  b.Store(A, {1}, Load(A, {1}) / -1);
  b.Store(U, {1}, Load(U, {1}) / IntConst(kU32, 5));
  CompiledFunction f = Generate(b.Build());
  // A divisor that may be 0 (or -1 under MIN) goes through a helper that
  // gives WGSL's results on every back end; other constants divide directly.
  EXPECT_TRUE(Contains(f.wgsl, "A[0i] = kiln_div_i32(A[0i], A[1i]);"));
  EXPECT_TRUE(Contains(f.wgsl, "A[1i] = kiln_rem_i32(A[0i], A[1i]);"));
  EXPECT_TRUE(Contains(f.wgsl, "A[2i] = kiln_floor_div_i32(A[2i], A[3i]);"));
  EXPECT_TRUE(Contains(f.wgsl, "A[3i] = kiln_floor_mod_i32(A[2i], A[3i]);"));
  EXPECT_TRUE(Contains(f.wgsl, "U[0i] = kiln_div_u32(U[0i], U[1i]);"));
  EXPECT_TRUE(Contains(f.wgsl, "U[1i] = kiln_rem_u32(U[0i], U[1i]);"));
  EXPECT_TRUE(Contains(f.wgsl, "A[0i] = A[0i] / 3i;"));
  EXPECT_TRUE(Contains(f.wgsl, "A[1i] = kiln_div_i32(A[1i], -1i);")) << f.wgsl;
  EXPECT_TRUE(Contains(f.wgsl, "U[1i] = U[1i] / 5u;"));
  EXPECT_TRUE(Contains(f.wgsl,
                       "fn kiln_div_i32(a : i32, b : i32) -> i32 {\n"
                       "  return a / select(b, i32(1), (b == i32()) | ((a == i32(-2147483647 - 1)) "
                       "& (b == i32(-1))));\n}\n"));
  EXPECT_TRUE(Contains(f.wgsl,
                       "fn kiln_div_u32(a : u32, b : u32) -> u32 {\n"
                       "  return a / select(b, u32(1), b == u32());\n}\n"));
  EXPECT_TRUE(Contains(f.wgsl,
                       "fn kiln_rem_u32(a : u32, b : u32) -> u32 {\n"
                       "  return a % select(b, u32(1), b == u32());\n}\n"));
  EXPECT_TRUE(Contains(f.wgsl,
                       "fn kiln_rem_i32(a : i32, b : i32) -> i32 {\n"
                       "  return select(a - b * kiln_div_i32(a, b), i32(), b == i32());\n}\n"));
  EXPECT_FALSE(Contains(f.wgsl, " % b)"));  // signed `%` is never emitted
  EXPECT_TRUE(Contains(f.wgsl, "F[0i] = floor(F[0i] / F[1i]);"));
  EXPECT_TRUE(Contains(f.wgsl, "F[1i] = kiln_floor_mod_f32(F[0i], F[1i]);"));
  EXPECT_TRUE(Contains(f.wgsl,
                       "fn kiln_floor_div_i32(a : i32, b : i32) -> i32 {\n"
                       "  let q = kiln_div_i32(a, b);\n  let r = kiln_rem_i32(a, b);\n"
                       "  return select(q, q - i32(1), (r != i32()) & "
                       "((r < i32()) != (b < i32())));\n}\n"));
}

// A constant zero divisor is a WGSL shader-creation error even where the
// dividend is not constant: the IR's results (x / 0 == x, x % 0 == 0) are
// emitted instead.
// A float less (or over) itself goes on the bits: a driver assuming finite
// values folds x - x to 0 and x / x to 1.
TEST(WgslCodegenTest, FloatOperandLessItselfIsComputedOnTheBits) {
  IRBuilder b("self");
  Buffer F = b.BufferParam("F", kF32, {4});
  b.Store(F, {0}, Load(F, {0}) - Load(F, {0}));
  b.Store(F, {1}, Load(F, {1}) / Load(F, {1}));
  b.Store(F, {2}, Load(F, {2}) - Load(F, {3}));
  CompiledFunction f = Generate(b.Build());
  EXPECT_TRUE(Contains(f.wgsl, "F[0i] = kiln_self_minus_f32(F[0i]);")) << f.wgsl;
  EXPECT_TRUE(Contains(f.wgsl, "F[1i] = kiln_self_over_f32(F[1i]);")) << f.wgsl;
  EXPECT_TRUE(Contains(f.wgsl, "F[2i] = F[2i] - F[3i];")) << f.wgsl;
}

TEST(WgslCodegenTest, ConstantZeroDivisorsGiveTheIrsResults) {
  IRBuilder b("f");
  Buffer A = b.BufferParam("A", kI32, {8});
  Buffer U = b.BufferParam("U", kU32, {4});
  b.Store(A, {0}, Load(A, {0}) / 0);
  b.Store(A, {1}, Load(A, {1}) % 0);
  b.Store(A, {2}, FloorDiv(Load(A, {2}), MakeZero(kI32)));
  b.Store(A, {3}, FloorMod(Load(A, {3}), MakeZero(kI32)));
  b.Store(U, {0}, Load(U, {0}) / MakeZero(kU32));
  b.Store(U, {1}, Load(U, {1}) % MakeZero(kU32));
  b.Store(U, {2}, FloorDiv(Load(U, {2}), MakeZero(kU32)));
  b.Store(A, {4}, Load(A, {4}) / 1);
  // The quotient is its dividend, parenthesised as the dividend needs.
  b.Store(A, {5}, Load(A, {5}) - (Load(A, {6}) + Load(A, {7})) / 0);
  b.Store(A, {6}, Load(A, {6}) + Call(Intrinsic::kShiftLeft, {Load(A, {7}), 2}) / 0);
  b.Store(A, {7}, Load(A, {7}) * (Load(A, {5}) / 0));
  CompiledFunction f = Generate(b.Build());
  EXPECT_TRUE(Contains(f.wgsl, "A[0i] = A[0i];")) << f.wgsl;
  EXPECT_TRUE(Contains(f.wgsl, "A[1i] = i32();")) << f.wgsl;
  EXPECT_TRUE(Contains(f.wgsl, "A[2i] = A[2i];")) << f.wgsl;
  EXPECT_TRUE(Contains(f.wgsl, "A[3i] = i32();")) << f.wgsl;
  EXPECT_TRUE(Contains(f.wgsl, "U[0i] = U[0i];")) << f.wgsl;
  EXPECT_TRUE(Contains(f.wgsl, "U[2i] = U[2i];")) << f.wgsl;
  EXPECT_TRUE(Contains(f.wgsl, "U[1i] = u32();")) << f.wgsl;
  EXPECT_TRUE(Contains(f.wgsl, "A[4i] = A[4i] / 1i;")) << f.wgsl;
  EXPECT_TRUE(Contains(f.wgsl, "A[5i] = A[5i] - (A[6i] + A[7i]);")) << f.wgsl;
  EXPECT_TRUE(Contains(f.wgsl, "A[6i] = A[6i] + (A[7i] << ")) << f.wgsl;
  EXPECT_TRUE(Contains(f.wgsl, "A[7i] = A[7i] * A[5i];")) << f.wgsl;
}

// A float divided by a constant zero is written without the division (a
// driver's fast math may fold `x / 0f` to anything): a multiply by the
// signed infinity, and NaN for the remainders.
TEST(WgslCodegenTest, FloatConstantZeroDivisorsAreSpelledWithoutADivision) {
  IRBuilder b("f");
  Buffer F = b.BufferParam("F", kF32, {8});
  b.Store(F, {0}, Load(F, {0}) / MakeConst(kF32, 0.0));
  b.Store(F, {1}, FloorDiv(Load(F, {1}) + Load(F, {2}), MakeConst(kF32, -0.0)));
  b.Store(F, {2}, FloorMod(Load(F, {2}), MakeConst(kF32, 0.0)));
  b.Store(F, {3}, Load(F, {3}) / MakeConst(kF32, 2.0));
  CompiledFunction f = Generate(b.Build());
  EXPECT_TRUE(Contains(f.wgsl, "F[0i] = F[0i] * kiln_f32_from_bits(0x7f800000u);")) << f.wgsl;
  EXPECT_TRUE(Contains(f.wgsl, "F[1i] = (F[1i] + F[2i]) * kiln_f32_from_bits(0xff800000u);"))
      << f.wgsl;
  EXPECT_TRUE(Contains(f.wgsl, "F[2i] = kiln_f32_from_bits(0x7fc00000u);")) << f.wgsl;
  EXPECT_TRUE(Contains(f.wgsl, "F[3i] = F[3i] / 2f;")) << f.wgsl;
  EXPECT_FALSE(Contains(f.wgsl, "/ 0f")) << f.wgsl;
}

// Arithmetic with a constant zero operand goes through helpers on the bits
// (a driver's fast math folds x * 0f to 0 and x + 0f to x); -0.0 added or
// +0.0 subtracted is the identity, left to the driver; other constants stay.
TEST(WgslCodegenTest, FloatConstantZeroOperandsGoThroughTheBits) {
  IRBuilder b("f");
  Buffer F = b.BufferParam("F", kF32, {14});
  Buffer H = b.BufferParam("H", kF16, {2});
  b.Store(F, {12}, MakeConst(kF32, 0.0) % Load(F, {12}));
  b.Store(F, {13}, FloorMod(MakeConst(kF32, -0.0), Load(F, {13})));
  b.Store(F, {0}, Load(F, {0}) * MakeConst(kF32, 0.0));
  b.Store(F, {1}, MakeConst(kF32, -0.0) * Load(F, {1}));
  b.Store(F, {2}, Load(F, {2}) + MakeConst(kF32, 0.0));
  b.Store(F, {3}, Load(F, {3}) - MakeConst(kF32, -0.0));
  b.Store(F, {4}, MakeConst(kF32, 0.0) - Load(F, {4}));
  b.Store(F, {5}, MakeConst(kF32, -0.0) / Load(F, {5}));
  b.Store(F, {6}, FloorDiv(MakeConst(kF32, 0.0), Load(F, {6})));
  b.Store(F, {7}, Load(F, {7}) + MakeConst(kF32, -0.0));
  b.Store(F, {8}, Load(F, {8}) * MakeConst(kF32, 1.0));
  b.Store(H, {0}, Load(H, {0}) * MakeConst(kF16, 0.0));
  b.Store(F, {9}, -Load(F, {9}));  // -0.0 - x: WGSL's negation
  b.Store(F, {10}, Load(F, {10}) * -(Load(F, {10}) + Load(F, {11})));
  CompiledFunction f = Generate(b.Build());
  EXPECT_TRUE(Contains(f.wgsl, "F[0i] = kiln_times_zero_f32(F[0i], 0u);")) << f.wgsl;
  EXPECT_TRUE(Contains(f.wgsl, "F[1i] = kiln_times_zero_f32(F[1i], 0x80000000u);")) << f.wgsl;
  EXPECT_TRUE(Contains(f.wgsl, "F[2i] = kiln_plus_zero_f32(F[2i]);")) << f.wgsl;
  EXPECT_TRUE(Contains(f.wgsl, "F[3i] = kiln_plus_zero_f32(F[3i]);")) << f.wgsl;
  EXPECT_TRUE(Contains(f.wgsl, "F[4i] = kiln_zero_minus_f32(F[4i]);")) << f.wgsl;
  EXPECT_TRUE(Contains(f.wgsl, "F[5i] = kiln_zero_over_f32(F[5i], 0x80000000u);")) << f.wgsl;
  EXPECT_TRUE(Contains(f.wgsl, "F[6i] = kiln_zero_over_f32(F[6i], 0u);")) << f.wgsl;
  EXPECT_TRUE(Contains(f.wgsl, "F[7i] = F[7i] + kiln_f32_from_bits(0x80000000u);")) << f.wgsl;
  EXPECT_TRUE(Contains(f.wgsl, "F[8i] = F[8i] * 1f;")) << f.wgsl;
  EXPECT_TRUE(Contains(f.wgsl, "H[0i] = f16(kiln_times_zero_f32(f32(H[0i]), 0u));")) << f.wgsl;
  EXPECT_TRUE(Contains(f.wgsl, "F[9i] = -F[9i];")) << f.wgsl;
  EXPECT_TRUE(Contains(f.wgsl, "F[10i] = F[10i] * (-(F[10i] + F[11i]));")) << f.wgsl;
  EXPECT_TRUE(Contains(f.wgsl, "F[12i] = kiln_zero_mod_f32(F[12i]);")) << f.wgsl;
  EXPECT_TRUE(Contains(f.wgsl, "F[13i] = kiln_zero_mod_f32(F[13i]);")) << f.wgsl;
}

// fma with a constant zero multiplicand is the exact product plus the
// addend (drivers folded fma(x, 0f, c) to c); f16 pow runs in f32.
TEST(WgslCodegenTest, FmaOfAZeroAndHalfPow) {
  IRBuilder b("f");
  Buffer F = b.BufferParam("F", kF32, {4});
  Buffer H = b.BufferParam("H", kF16, {2});
  const Expr zero = MakeConst(kF32, 0.0), one = MakeConst(kF32, 1.0);
  b.Store(F, {0}, Call(Intrinsic::kFma, {Load(F, {0}), zero, one}));
  b.Store(F, {1}, Call(Intrinsic::kFma, {zero, Load(F, {1}), zero}));
  b.Store(F, {2}, Call(Intrinsic::kFma, {Load(F, {2}), Load(F, {3}), one}));
  b.Store(H, {0}, Call(Intrinsic::kPow, {Load(H, {0}), Load(H, {1})}));
  CompiledFunction f = Generate(b.Build());
  EXPECT_TRUE(Contains(f.wgsl, "F[0i] = kiln_times_zero_f32(F[0i], 0u) + 1f;")) << f.wgsl;
  EXPECT_TRUE(Contains(f.wgsl, "F[1i] = kiln_plus_zero_f32(kiln_times_zero_f32(F[1i], 0u));"))
      << f.wgsl;
  EXPECT_TRUE(Contains(f.wgsl, "F[2i] = fma(F[2i], F[3i], 1f);")) << f.wgsl;
  EXPECT_TRUE(Contains(f.wgsl, "H[0i] = f16(pow(f32(H[0i]), f32(H[1i])));")) << f.wgsl;
}

TEST(WgslCodegenTest, MathIntrinsics) {
  IRBuilder b("math");
  Buffer A = b.BufferParam("A", kF32, {16});
  Expr x = Load(A, {0});
  const std::pair<Intrinsic, const char*> unary[] = {
      {Intrinsic::kExp, "exp(A[0i])"},
      {Intrinsic::kLog, "log(A[0i])"},
      {Intrinsic::kSqrt, "sqrt(A[0i])"},
      {Intrinsic::kRsqrt, "inverseSqrt(A[0i])"},
      {Intrinsic::kTanh, "kiln_tanh_f32(A[0i])"},
      {Intrinsic::kAbs, "abs(A[0i])"},
      {Intrinsic::kFloor, "floor(A[0i])"},
      {Intrinsic::kCeil, "ceil(A[0i])"},
      {Intrinsic::kRound, "round(A[0i])"},
      {Intrinsic::kErf, "kiln_erf_f32(A[0i])"},
      {Intrinsic::kSigmoid, "1f / (1f + exp(-(A[0i])))"},
  };
  int slot = 1;
  for (const auto& [op, text] : unary) b.Store(A, {slot++}, Call(op, {x}));
  b.Store(A, {slot++}, Call(Intrinsic::kPow, {x, x}));
  b.Store(A, {slot++}, Call(Intrinsic::kFma, {x, x, x}));
  CompiledFunction f = Generate(b.Build());
  slot = 1;
  for (const auto& [op, text] : unary) {
    EXPECT_TRUE(Contains(f.wgsl, StrCat("A[", slot++, "i] = ", text, ";")));
  }
  EXPECT_TRUE(Contains(f.wgsl, "= pow(A[0i], A[0i]);"));
  EXPECT_TRUE(Contains(f.wgsl, "= fma(A[0i], A[0i], A[0i]);"));
  EXPECT_TRUE(Contains(f.wgsl, "fn kiln_erf_f32(x : f32) -> f32 {"));
}

TEST(WgslCodegenTest, ErfHelperIsAccurateToAMillionth) {
  // The same polynomial the helper evaluates, in double precision.
  auto approx = [](double x) {
    double t = 1.0 / (1.0 + 0.3275911 * std::abs(x));
    double p = t * (0.254829592 +
                    t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    return (x < 0 ? -1 : 1) * (1.0 - p * std::exp(-x * x));
  };
  for (double x = -6; x <= 6; x += 0.001) EXPECT_NEAR(approx(x), std::erf(x), 1e-6) << x;
}

TEST(WgslCodegenTest, ShiftsBitOpsAndInt8x4) {
  IRBuilder b("bits");
  Buffer A = b.BufferParam("A", kI32, {4});
  Buffer P = b.BufferParam("P", kInt8x4, {2});
  b.Store(A, {0}, Call(Intrinsic::kShiftLeft, {Load(A, {0}), Load(A, {1})}));
  b.Store(A, {1}, Call(Intrinsic::kShiftRight, {Load(A, {0}), IntConst(kI32, 3)}));
  b.Store(
      A, {2},
      Call(Intrinsic::kBitwiseXor, {Load(A, {0}), Call(Intrinsic::kBitwiseNot, {Load(A, {1})})}));
  b.Store(A, {3},
          Call(Intrinsic::kDot4I8, {Load(P, {0}), Load(P, {1})}) + Reinterpret(kI32, Load(P, {0})));
  CompiledFunction f = Generate(b.Build());
  EXPECT_TRUE(Contains(f.wgsl, "var<storage, read> P : array<u32>;"));
  EXPECT_TRUE(Contains(f.wgsl, "A[0i] = A[0i] << (u32(A[1i]) & 31u);"));
  EXPECT_TRUE(Contains(f.wgsl, "A[1i] = A[0i] >> (u32(3i) & 31u);"));
  EXPECT_TRUE(Contains(f.wgsl, "A[2i] = A[0i] ^ (~A[1i]);"));
  EXPECT_TRUE(Contains(f.wgsl, "A[3i] = dot4I8Packed(P[0i], P[1i]) + bitcast<i32>(P[0i]);"));
  EXPECT_EQ(f.metadata.params[1].dtype, DType::kInt8x4);
}

TEST(WgslCodegenTest, ConstantsWithoutLiteralsGoThroughBits) {
  IRBuilder b("specials");
  Buffer A = b.BufferParam("A", kF32, {6});
  Buffer I = b.BufferParam("I", kI32, {1});
  b.Store(A, {5}, FloatConst(kF32, -NAN));  // -nan keeps its sign
  b.Store(A, {0}, FloatConst(kF32, INFINITY));
  b.Store(A, {1}, FloatConst(kF32, NAN));
  b.Store(A, {2}, FloatConst(kF32, -0.25));
  // The largest f32's shortest decimal (3.4028235e38) lies above it, and
  // WGSL refuses that literal.
  b.Store(A, {3}, FloatConst(kF32, std::numeric_limits<float>::max()));
  b.Store(A, {4}, FloatConst(kF32, std::numeric_limits<float>::lowest()));
  b.Store(I, {0}, IntConst(kI32, INT32_MIN));
  CompiledFunction f = Generate(b.Build());
  EXPECT_TRUE(Contains(f.wgsl, "A[0i] = kiln_f32_from_bits(0x7f800000u);"));
  EXPECT_TRUE(Contains(f.wgsl, "A[1i] = kiln_f32_from_bits(0x7fc00000u);"));
  EXPECT_TRUE(Contains(f.wgsl, "A[5i] = kiln_f32_from_bits(0xffc00000u);"));
  EXPECT_TRUE(Contains(f.wgsl, "A[2i] = -0.25f;"));
  EXPECT_TRUE(Contains(f.wgsl, "A[3i] = 3.40282346e+38f;"));
  EXPECT_TRUE(Contains(f.wgsl, "A[4i] = -3.40282346e+38f;"));
  EXPECT_EQ(static_cast<float>(3.40282346e+38), std::numeric_limits<float>::max());
  EXPECT_TRUE(Contains(f.wgsl, "I[0i] = i32(-2147483648);"));
}

TEST(WgslCodegenTest, SharedAndLocalMemory) {
  IRBuilder b("memories");
  Buffer A = b.BufferParam("A", kF32, {64});
  b.For("tx", LoopKind::kThreadX, 0, 64, [&](Var tx) {
    b.Allocate("tile", kF32, {64}, MemoryScope::kShared, [&](Buffer tile) {
      b.Allocate("flags", kBool, {2}, MemoryScope::kLocal, [&](Buffer flags) {
        b.Store(tile, {tx}, Load(A, {tx}));
        b.Barrier();
        b.Store(flags, {0}, Load(tile, {63 - tx}) > 0.0);
        b.Store(A, {tx}, Select(Load(flags, {0}), Load(tile, {63 - tx}), FloatConst(kF32, 0.0)));
        b.Barrier(BarrierKind::kStorage);
      });
    });
  });
  CompiledFunction f = Generate(b.Build());
  EXPECT_TRUE(Contains(f.wgsl, "\nvar<workgroup> tile : array<f32, 64>;\n"));
  EXPECT_TRUE(Contains(f.wgsl, "  var flags : array<i32, 2>;\n"));
  EXPECT_TRUE(Contains(f.wgsl, "workgroupBarrier();"));
  EXPECT_TRUE(Contains(f.wgsl, "storageBarrier();"));
  EXPECT_TRUE(Contains(f.wgsl, "flags[0i] = select(0i, 1i, kiln_gt_f32(tile[63i - tx], 0f));"));
  EXPECT_EQ(f.metadata.workgroup_storage_bytes, 256u);
}

TEST(WgslCodegenTest, UnloweredIrIsRejectedWithTheMissingPass) {
  IRBuilder b1("two_d");
  Buffer A = b1.BufferParam("A", kF32, {4, 4});
  b1.Store(A, {1, 2}, FloatConst(kF32, 0.0));
  EXPECT_TRUE(Contains(GenerateError(b1.Build()).message(),
                       "buffer 'A' is accessed with 2 indices; WGSL arrays take one "
                       "(run FlattenBuffers first)"));

  IRBuilder b2("wide");
  Buffer B = b2.BufferParam("B", kF32, {4});
  b2.For("i", LoopKind::kSerial, IntConst(kI64, 0), IntConst(kI64, 4),
         [&](Var i) { b2.Store(B, {i}, FloatConst(kF32, 0.0)); });
  EXPECT_TRUE(Contains(GenerateError(b2.Build()).message(),
                       "type i64 has no WGSL equivalent; run NarrowIndices first"));

  IRBuilder b3("vector_loop");
  Buffer C = b3.BufferParam("C", kF32, {4});
  b3.For("v", LoopKind::kVectorized, 0, 4, [&](Var v) { b3.Store(C, {v}, FloatConst(kF32, 0.0)); });
  EXPECT_TRUE(Contains(GenerateError(b3.Build()).message(),
                       "loop `v` is still marked vectorize; run Vectorize first"));

  IRBuilder b4("bytes");
  Buffer D = b4.BufferParam("D", kU8, {4});
  b4.Store(D, {0}, IntConst(kU8, 1));
  EXPECT_TRUE(
      Contains(GenerateError(b4.Build()).message(), "buffer parameter 'D' has element type u8"));
}

TEST(CompileTest, CompileFunctionLowersAndKeepsSourceShapes) {
  IRBuilder b("rows");
  Var n = b.ScalarParam("n", kI32);
  Buffer A = b.BufferParam("A", kF32, {n, 4});
  b.For("bx", LoopKind::kBlockX, 0, n, [&](Var bx) {
    b.For("v", LoopKind::kVectorized, 0, 4, [&](Var v) {
      b.Store(A, {bx, v}, Load(A, {bx, v}) + 1.0);
    });
  });
  StatusOr<CompiledFunction> f = CompileFunction(b.Build());
  ASSERT_TRUE(f.ok()) << f.status();
  MaybeDump(*f);
  ASSERT_EQ(f->metadata.params[1].shape.size(), 2u);
  EXPECT_EQ(f->metadata.params[1].shape[0].text, "n");
  EXPECT_EQ(f->metadata.params[1].shape[1].text, "4");
  EXPECT_EQ(f->metadata.params[1].access, BufferAccess::kReadWrite);
  EXPECT_EQ(f->metadata.num_blocks_x.text, "n");
  // The source travels with the kernel, for checking against the interpreter.
  StatusOr<Function> source = ParseFunction(f->source_ir);
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ(Print(*source), f->source_ir);
  // A is read and written only as aligned vectors: an array of vec4, one
  // access each (docs/kernel-abi.md).
  EXPECT_TRUE(Contains(f->wgsl, "var<storage, read_write> A : array<vec4<f32>>;")) << f->wgsl;
  EXPECT_TRUE(Contains(f->wgsl, "A[bx] = A[bx] + vec4<f32>(1f);")) << f->wgsl;
}

// The WGSL of the kernel in IR text `text`; a test failure (and "") where it
// does not parse or compile.
std::string WgslOf(std::string_view text) {
  StatusOr<Function> f = ParseFunction(text);
  if (!f.ok()) {
    ADD_FAILURE() << f.status();
    return "";
  }
  StatusOr<CompiledFunction> c = CompileFunction(*f);
  if (!c.ok()) {
    ADD_FAILURE() << c.status();
    return "";
  }
  return c->wgsl;
}

// Indices written through let-bound variables still prove alignment: the
// lets are followed (integer arithmetic is split into its quotient, a value
// that loads is divided exactly), and a let that is not a multiple of the
// width leaves its array plain (tests/corpus/packed_through_lets.kir runs
// the same on every device).
TEST(CompileTest, IndicesThroughLetsArePackedWhereAligned) {
  const std::string w = WgslOf(R"(
fn lets(X: buffer<f32>[n], O: buffer<i32>[n], Y: buffer<f32>[n], Z: buffer<f32>[n], n: i32) {
  for b in blockIdx.x(0, n / 64) {
    alloc T: f32[64] shared {
      for t in threadIdx.x(0, 16) {
        let base: i32 = t * 4
        let row = b * 64 + base
        T[ramp(base, 1, 4)] = X[ramp(row, 1, 4)]
        workgroup_barrier()
        let off: i32 = ((O[row] % 8 + 8) % 8) * 4 + 9
        Y[ramp(row, 1, 4)] = T[ramp(off - 1, 1, 4)] + broadcast(T[off + 2], 4)
        let odd = row + 1
        Z[ramp(odd, 1, 4)] = T[ramp(base, 1, 4)]
      }
    }
  }
})");
  ASSERT_FALSE(w.empty());
  EXPECT_TRUE(Contains(w, "var<storage, read> X : array<vec4<f32>>;")) << w;
  EXPECT_TRUE(Contains(w, "var<storage, read_write> Y : array<vec4<f32>>;")) << w;
  EXPECT_TRUE(Contains(w, "var<storage, read_write> Z : array<f32>;")) << w;
  EXPECT_TRUE(Contains(w, "var<workgroup> T : array<vec4<f32>, 16>;")) << w;
  EXPECT_TRUE(Contains(w, "T[t] = X[b * 16i + t];")) << w;
  EXPECT_TRUE(Contains(w, "T[(off - 1i) / 4i] + vec4<f32>(T[(off - 1i) / 4i].w)")) << w;
}

// A vector stored with a stride (a transposed tile) goes lane by lane into
// the vec4 elements of a packed array, which its unit-stride reads keep
// (tests/corpus/strided_lanes.kir runs it on every device).
TEST(CompileTest, StridedVectorAccessesGoLaneByLaneIntoPackedArrays) {
  const std::string w = WgslOf(R"(
fn transpose(X: buffer<f32>[n], Y: buffer<f32>[n], n: i32) {
  for b in blockIdx.x(0, n / 64) {
    alloc T: f32[64] shared {
      for t in threadIdx.x(0, 16) {
        T[ramp(t * 4, 16, 4)] = X[ramp(b * 64 + t * 4, 1, 4)]
        workgroup_barrier()
        Y[ramp(b * 64 + t * 4, 1, 4)] = T[ramp(t * 4, 1, 4)] + T[ramp(t * 4, 16, 4)]
      }
    }
  }
})");
  ASSERT_FALSE(w.empty());
  EXPECT_TRUE(Contains(w, "var<workgroup> T : array<vec4<f32>, 16>;")) << w;
  EXPECT_TRUE(Contains(w, "T[t].x = value[0];")) << w;
  EXPECT_TRUE(Contains(w, "T[t + 12i].x = value[3];")) << w;
  EXPECT_TRUE(Contains(w, "T[t] + vec4<f32>(T[t].x, T[t + 4i].x, T[t + 8i].x, T[t + 12i].x)")) << w;
}

// A remainder by a multiple of the width keeps the dividend's alignment
// (truncating or flooring alike): the fused index of a vectorized
// elementwise kernel, `(f * 4) % 256`, is a vector access.
TEST(CompileTest, RemaindersByMultiplesOfTheWidthStayAligned) {
  const std::string w = WgslOf(R"(
fn rows(X: buffer<f32>[n], B: buffer<f32>[256], Y: buffer<f32>[n], n: i32) {
  for b in blockIdx.x(0, n / 1024) {
    for t in threadIdx.x(0, 256) {
      let f = b * 256 + t
      Y[ramp(f * 4, 1, 4)] = X[ramp(f * 4, 1, 4)] + B[ramp((f * 4) % 256, 1, 4)]
      Y[ramp(floor_mod(f * 4 + 8, 256) + 1, 1, 4)] = X[ramp(f * 4 + 2, 1, 4)]
    }
  }
})");
  ASSERT_FALSE(w.empty());
  EXPECT_TRUE(Contains(w, "var<storage, read> B : array<vec4<f32>>;")) << w;
  EXPECT_TRUE(Contains(w, "B[kiln_rem_i32(f * 4i, 256i) / 4i]")) << w;
  // X is also read at f * 4 + 2 and Y written at an odd offset: plain.
  EXPECT_TRUE(Contains(w, "var<storage, read> X : array<f32>;")) << w;
  EXPECT_TRUE(Contains(w, "var<storage, read_write> Y : array<f32>;")) << w;
}

// Workgroup arrays whose every index is a row plus a column the loop bounds
// keep within the row are declared as rows: a constant row needs no clamp
// under robustness, and a column that does not change in a loop is clamped
// once (tests/corpus/workgroup_rows.kir runs such arrays on every device).
TEST(CompileTest, WorkgroupArraysAreLaidOutInRowsWhereColumnsStayInside) {
  const std::string w = WgslOf(R"(
fn rows(X: buffer<f32>[n], Y: buffer<f32>[n], n: i32) {
  for b in blockIdx.x(0, n / 128) {
    alloc T: f32[128] shared {
      alloc U: f32[32] shared {
        for t in threadIdx.x(0, 8) {
          for k in unroll(0, 4) {
            T[ramp(k * 32 + t * 4, 1, 4)] = X[ramp(b * 128 + k * 32 + t * 4, 1, 4)]
          }
          U[t * 4] = 1.0
          workgroup_barrier()
          for k in unroll(0, 4) {
            let col = t * 4
            Y[ramp(b * 128 + k * 32 + col, 1, 4)] = T[ramp((3 - k) * 32 + col, 1, 4)] + broadcast(T[k * 32 + col + 1] + U[t + 3], 4)
          }
        }
      }
    }
  }
})");
  ASSERT_FALSE(w.empty());
  EXPECT_TRUE(Contains(w, "var<workgroup> T : array<array<vec4<f32>, 8>, 4>;")) << w;
  EXPECT_TRUE(Contains(w, "T[2i][t] = X[b * 32i + 16i + t];")) << w;
  EXPECT_TRUE(Contains(w, "T[0i][t] + vec4<f32>(T[3i][t].y + U[t + 3i])")) << w;
  // U[t * 4] reaches 28 and U[t + 3] 10: no row shorter than the array
  // holds both, so U stays flat.
  EXPECT_TRUE(Contains(w, "var<workgroup> U : array<f32, 32>;")) << w;
}

TEST(CompileTest, CompileModuleCompilesEveryFunctionAndRoundTrips) {
  IRBuilder b1("first");
  Buffer A = b1.BufferParam("A", kF32, {1});
  b1.Store(A, {0}, FloatConst(kF32, 1.0));
  IRBuilder b2("second");
  Var n = b2.ScalarParam("n", kU32);
  Buffer B = b2.BufferParam("B", kU32, {n});
  b2.For("tx", LoopKind::kThreadX, 0, 16,
         [&](Var tx) { b2.If(Cast(kU32, tx) < n, [&] { b2.Store(B, {tx}, n); }); });
  ir::Module module{{b1.Build(), b2.Build()}};
  StatusOr<CompiledModule> compiled = CompileModule(module);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  ASSERT_EQ(compiled->functions.size(), 2u);
  for (const CompiledFunction& f : compiled->functions) MaybeDump(f);
  EXPECT_EQ(compiled->functions[1].metadata.workgroup_size, (std::array<uint32_t, 3>{16, 1, 1}));
  StatusOr<CompiledModule> loaded = DeserializeModule(SerializeModule(*compiled));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(*loaded, *compiled);
}

TEST(CompileTest, CompileModuleRejectsDuplicateNames) {
  IRBuilder b("twin");
  Buffer A = b.BufferParam("A", kF32, {1});
  b.Store(A, {0}, FloatConst(kF32, 1.0));
  ir::Module module{{b.Build(), b.Build()}};
  StatusOr<CompiledModule> compiled = CompileModule(module);
  ASSERT_FALSE(compiled.ok());
  EXPECT_TRUE(Contains(compiled.status().message(), "twin")) << compiled.status();
}

TEST(CompileTest, CompileErrorsNameTheKernel) {
  IRBuilder b("broken");
  Buffer A = b.BufferParam("A", kF32, {1000});
  b.For("u", LoopKind::kUnrolled, 0, 1000, [&](Var u) { b.Store(A, {u}, FloatConst(kF32, 0.0)); });
  StatusOr<CompiledFunction> f = CompileFunction(b.Build());
  ASSERT_FALSE(f.ok());
  EXPECT_TRUE(Contains(f.status().message(), "kernel 'broken': Unroll of 'broken'")) << f.status();
}

// A constant index outside its array, reached only after unrolling or
// through lets, is refused by the compiler, naming the buffer and the
// index, rather than by the implementation's WGSL compiler at load. Constant
// indices inside the array compile.
TEST(CompileTest, ConstantIndicesOutsideTheirArraysAreRefused) {
  struct Case {
    const char* body;
    const char* message;
  };
  const Case cases[] = {
      {"  let k: i32 = 0 - 1\n  A[k] = 1.0\n",
       "buffer 'A' is indexed at -1 once loops are unrolled and constants folded: an index is "
       "never negative; WGSL refuses a constant index outside its array"},
      {"  alloc v: f32[4] local {\n    let a: i32 = 3\n    let b: i32 = a + 2\n    v[b] = 1.0\n"
       "    A[0] = v[0]\n  }\n",
       "buffer 'v' is indexed at 5 once loops are unrolled and constants folded, past its 4 "
       "elements"},
      {"  for i in serial(0, 1) {\n    A[i - 1] = 1.0\n  }\n", "indexed at -1"},
      {"  alloc v: f32[4] local {\n    for j in unroll(0, 4) {\n      v[j] = A[j]\n    }\n"
       "    for j in unroll(0, 4) {\n      A[j] = v[j + 1]\n    }\n  }\n",
       "buffer 'v' is indexed at 4"},
      {"  alloc acc: f32[4] local {\n    acc[ramp(0, 64, 4)] = broadcast(1.0, 4)\n"
       "    A[0] = acc[0]\n  }\n",
       "buffer 'acc' is indexed at 192"},
  };
  for (const Case& c : cases) {
    const std::string text = StrCat("module {\nfn f(A: buffer<f32>[4]) {\n", c.body, "}\n}\n");
    StatusOr<ir::Module> module = ir::ParseModule(text);
    ASSERT_TRUE(module.ok()) << module.status() << "\n" << text;
    StatusOr<CompiledModule> compiled = CompileModule(*module);
    ASSERT_FALSE(compiled.ok()) << text << compiled->functions[0].wgsl;
    EXPECT_EQ(compiled.status().code(), StatusCode::kInvalidArgument) << compiled.status();
    EXPECT_TRUE(Contains(compiled.status().message(), "kernel 'f'")) << compiled.status();
    EXPECT_TRUE(Contains(compiled.status().message(), c.message)) << compiled.status();
  }
  // Constant indices inside their arrays; and past a buffer parameter's
  // extent under a guard (a runtime-sized array in WGSL, which its compilers
  // refuse only negative constant indices into).
  const std::string fine =
      "module {\nfn f(A: buffer<f32>[4], n: i32) {\n  let a: i32 = 1\n  let b: i32 = a + 2\n"
      "  A[b] = 1.0\n  A[ramp(0, 1, 4)] = broadcast(2.0, 4)\n"
      "  for j in unroll(0, 8) {\n    if (j < n) {\n      A[j] = 1.0\n    }\n  }\n}\n}\n";
  StatusOr<ir::Module> module = ir::ParseModule(fine);
  ASSERT_TRUE(module.ok()) << module.status();
  StatusOr<CompiledModule> compiled = CompileModule(*module);
  EXPECT_TRUE(compiled.ok()) << compiled.status();
}

// With the parser's source map, the refusal points at the innermost loop of
// the user's text around the access (unrolled loops are gone by then).
TEST(CompileTest, ConstantIndexErrorsNameTheLoopAroundThem) {
  const std::string text =
      "module {\nfn f(A: buffer<f32>[n], n: i32) {\n"
      "  for tx in threadIdx.x(0, 64) {\n"
      "    for j in serial(0, n) {\n"
      "      for u in unroll(0, 3) {\n"
      "        A[u - 2] = 1.0\n"
      "      }\n    }\n  }\n}\n}\n";
  ir::SourceMap source;
  StatusOr<ir::Module> module = ir::ParseModule(text, &source);
  ASSERT_TRUE(module.ok()) << module.status();
  CompileOptions options;
  StatusOr<CompiledModule> without = CompileModule(*module, options);
  ASSERT_FALSE(without.ok());
  EXPECT_TRUE(Contains(without.status().message(), "buffer 'A' is indexed at -2 once loops"))
      << without.status();
  options.lower.source = &source;
  StatusOr<CompiledModule> with = CompileModule(*module, options);
  ASSERT_FALSE(with.ok());
  EXPECT_TRUE(Contains(with.status().message(),
                       "buffer 'A' is indexed at -2 (in the loop `j` at line 4, column 5) once "
                       "loops are unrolled"))
      << with.status();
}

}  // namespace
}  // namespace kiln::codegen
