// Whole-text golden tests: small kernels, already in lowered form, and the
// exact WGSL they produce, kept in testdata/<name>.wgsl. The same files are
// checked by validate_wgsl.sh with Naga, and compiled by Tint and Naga in the
// runtime's tests. Set KILN_UPDATE_GOLDENS=1 to rewrite them after an
// intended change, then review the diff.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>

#include "kiln/codegen/wgsl_codegen.h"
#include "kiln/ir/ir.h"

namespace kiln::codegen {
namespace {

using namespace ::kiln::ir;  // NOLINT: IR builder vocabulary

// C[i] = A[i] + alpha * B[i] over a 1-D grid.
Function Saxpy() {
  IRBuilder b("saxpy");
  Var n = b.ScalarParam("n", kI32);
  Var alpha = b.ScalarParam("alpha", kF32);
  Buffer A = b.BufferParam("A", kF32, {n});
  Buffer B = b.BufferParam("B", kF32, {n});
  Buffer C = b.BufferParam("C", kF32, {n});
  b.For("bx", LoopKind::kBlockX, 0, (n + 63) / 64, [&](Var bx) {
    b.For("tx", LoopKind::kThreadX, 0, 64, [&](Var tx) {
      Var i = b.Let("i", bx * 64 + tx);
      b.If(i < n, [&] { b.Store(C, {i}, Load(A, {i}) + alpha * Load(B, {i})); });
    });
  });
  return b.Build();
}

// vec4 copy with a contiguous load and store, and a gathered (transposing) load.
Function Vec4Transpose() {
  IRBuilder b("vec4_transpose");
  Buffer A = b.BufferParam("A", kF32, {16});
  Buffer B = b.BufferParam("B", kF32, {16});
  Buffer C = b.BufferParam("C", kF32, {16});
  b.For("tx", LoopKind::kThreadX, 0, 4, [&](Var tx) {
    b.Store(B, {Ramp(tx * 4, 1, 4)}, Load(A, {Ramp(tx * 4, 1, 4)}));
    b.Store(C, {Ramp(tx * 4, 1, 4)}, Load(A, {Ramp(tx, 4, 4)}));
  });
  return b.Build();
}

// Per-workgroup sum in shared memory: barriers, a serial loop, a local array.
Function BlockSum() {
  IRBuilder b("block_sum");
  Var n = b.ScalarParam("n", kI32);
  Buffer A = b.BufferParam("A", kF32, {n});
  Buffer Out = b.BufferParam("Out", kF32, {(n + 127) / 128});
  b.For("bx", LoopKind::kBlockX, 0, (n + 127) / 128, [&](Var bx) {
    b.For("tx", LoopKind::kThreadX, 0, 128, [&](Var tx) {
      b.Allocate("partial", kF32, {128}, MemoryScope::kShared, [&](Buffer partial) {
        b.Allocate("acc", kF32, {1}, MemoryScope::kLocal, [&](Buffer acc) {
          Var i = b.Let("i", bx * 128 + tx);
          b.Store(acc, {0}, Select(i < n, Load(A, {Min(i, n - 1)}), FloatConst(kF32, 0.0)));
          b.Store(partial, {tx}, Load(acc, {0}));
          b.Barrier();
          b.For("s", LoopKind::kSerial, 0, 7, [&](Var s) {
            Var stride = b.Let("stride", Call(Intrinsic::kShiftRight, {IntConst(kI32, 64), s}));
            b.If(tx < stride, [&] {
              b.Store(partial, {tx}, Load(partial, {tx}) + Load(partial, {tx + stride}));
            });
            b.Barrier();
          });
          b.If(tx == 0, [&] { b.Store(Out, {bx}, Load(partial, {0})); });
        });
      });
    });
  });
  return b.Build();
}

// bool buffers, if_then_else evaluating one side, a while loop, floor division.
Function Masked() {
  IRBuilder b("masked");
  Var n = b.ScalarParam("n", kI32);
  Buffer Mask = b.BufferParam("mask", kBool, {n});
  Buffer A = b.BufferParam("A", kI32, {n});
  Buffer Flags = b.BufferParam("flags", kBool, {n});
  b.For("bx", LoopKind::kBlockX, 0, n, [&](Var bx) {
    Var m = b.Let("m", Load(Mask, {bx}));
    Var safe = b.Let("safe", IfThenElse(m, Load(A, {FloorMod(bx - 3, n)}), IntConst(kI32, -1)));
    Var steps = b.Let("steps", FloorDiv(safe, 4));
    b.Store(Flags, {bx}, !m || (steps > 2));
    b.Allocate("count", kI32, {1}, MemoryScope::kLocal, [&](Buffer count) {
      b.Store(count, {0}, IntConst(kI32, 0));
      b.While(Load(count, {0}) < steps, [&] { b.Store(count, {0}, Load(count, {0}) + 1); });
      b.Store(A, {bx}, Load(count, {0}));
    });
  });
  return b.Build();
}

// f16 storage and math; erf and sigmoid in half precision.
Function HalfGelu() {
  IRBuilder b("half_gelu");
  Var n = b.ScalarParam("n", kI32);
  Buffer X = b.BufferParam("X", kF16, {n});
  Buffer Y = b.BufferParam("Y", kF16, {n});
  b.For("bx", LoopKind::kBlockX, 0, (n + 31) / 32, [&](Var bx) {
    b.For("tx", LoopKind::kThreadX, 0, 32, [&](Var tx) {
      Var i = b.Let("i", bx * 32 + tx);
      b.If(i < n, [&] {
        Var x = b.Let("x", Load(X, {i}));
        Expr erf = Call(Intrinsic::kErf, {x * FloatConst(kF16, 0.70710678)});
        Expr gate = Call(Intrinsic::kSigmoid, {x});
        b.Store(Y, {i}, x * FloatConst(kF16, 0.5) * (FloatConst(kF16, 1.0) + erf) + gate - gate);
      });
    });
  });
  return b.Build();
}

// f16 pairs reinterpreted as u32 and back, and an f16 infinity.
Function HalfBits() {
  IRBuilder b("half_bits");
  Buffer H = b.BufferParam("H", kF16, {4});
  Buffer W = b.BufferParam("W", kU32, {2});
  b.For("tx", LoopKind::kThreadX, 0, 2, [&](Var tx) {
    Var packed = b.Let("packed", Reinterpret(kU32, Load(H, {Ramp(tx * 2, 1, 2)})));
    b.Store(W, {tx}, packed);
    Var pair =
        b.Let("pair", Reinterpret(DataType::Float(16, 2),
                                  Call(Intrinsic::kBitwiseXor, {packed, IntConst(kU32, 1)})));
    b.Store(H, {Ramp(tx * 2, 1, 2)}, Max(pair, Broadcast(FloatConst(kF16, -INFINITY), 2)));
  });
  return b.Build();
}

// Subgroup reduction and int8x4 dot products over a 2-D grid.
Function SubgroupDot() {
  IRBuilder b("subgroup_dot");
  Var rows = b.ScalarParam("rows", kU32);
  Buffer A = b.BufferParam("A", kInt8x4, {rows * 32});
  Buffer B = b.BufferParam("B", kInt8x4, {32});
  Buffer Out = b.BufferParam("Out", kI32, {rows});
  b.For("by", LoopKind::kBlockY, 0, Cast(kI32, rows), [&](Var by) {
    b.For("tx", LoopKind::kThreadX, 0, 32, [&](Var tx) {
      Var part = b.Let("part", Call(Intrinsic::kDot4I8, {Load(A, {by * 32 + tx}), Load(B, {tx})}));
      Var total = b.Let("total", Call(Intrinsic::kSubgroupAdd, {part}));
      b.If(tx == 0, [&] { b.Store(Out, {by}, total); });
    });
  });
  return b.Build();
}

// A workgroup sum through the subgroup builtins: lane 0 of each subgroup
// leaves its subgroup's sum in shared memory, every subgroup gathers the
// slots by lane and adds them again.
Function SubgroupLanes() {
  IRBuilder b("subgroup_lanes");
  Buffer X = b.BufferParam("X", kF32, {64});
  Buffer Out = b.BufferParam("Out", kF32, {64});
  b.Allocate("s", kF32, {64}, MemoryScope::kShared, [&](Buffer s) {
    b.For("tx", LoopKind::kThreadX, 0, 64, [&](Var tx) {
      Var lane = b.Let("lane", Call(Intrinsic::kSubgroupInvocationId, {}));
      Var size = b.Let("size", Call(Intrinsic::kSubgroupSize, {}));
      Var part = b.Let("part", Call(Intrinsic::kSubgroupAdd, {Load(X, {tx})}));
      b.Store(s, {tx}, Select(lane == 0, part, FloatConst(kF32, 0.0)));
      b.Barrier();
      b.Allocate("acc", kF32, {1}, MemoryScope::kLocal, [&](Buffer acc) {
        b.Store(acc, {0}, FloatConst(kF32, 0.0));
        b.For("k", LoopKind::kSerial, 0, (size + 63) / size, [&](Var k) {
          Var j = b.Let("j", k * size + lane);
          b.If(j < 64, [&] { b.Store(acc, {0}, Load(acc, {0}) + Load(s, {j})); });
        });
        b.Store(Out, {tx}, Call(Intrinsic::kSubgroupAdd, {Load(acc, {0})}));
      });
    });
  });
  return b.Build();
}

// Constants without literal spellings, shifts, and a max reduction.
Function RowMax() {
  IRBuilder b("row_max");
  Var cols = b.ScalarParam("cols", kI32);
  Buffer X = b.BufferParam("X", kF32, {cols});
  Buffer Out = b.BufferParam("Out", kF32, {1});
  Buffer Bits = b.BufferParam("Bits", kU32, {1});
  b.Allocate("best", kF32, {1}, MemoryScope::kLocal, [&](Buffer best) {
    b.Store(best, {0}, FloatConst(kF32, -INFINITY));
    b.For("j", LoopKind::kSerial, 0, cols,
          [&](Var j) { b.Store(best, {0}, Max(Load(best, {0}), Load(X, {j}))); });
    b.Store(Out, {0}, Load(best, {0}));
    b.Store(Bits, {0},
            Call(Intrinsic::kShiftLeft, {Reinterpret(kU32, Load(best, {0})), IntConst(kU32, 1)}));
  });
  return b.Build();
}

struct Golden {
  const char* name;
  std::function<Function()> build;
};

const Golden kGoldens[] = {
    {"saxpy", Saxpy},    {"vec4_transpose", Vec4Transpose}, {"block_sum", BlockSum},
    {"masked", Masked},  {"half_gelu", HalfGelu},           {"subgroup_dot", SubgroupDot},
    {"row_max", RowMax}, {"half_bits", HalfBits},           {"subgroup_lanes", SubgroupLanes},
};

std::string GoldenPath(const std::string& name) {
  return std::string(KILN_CODEGEN_TESTDATA_DIR) + "/" + name + ".wgsl";
}

class WgslGoldenTest : public testing::TestWithParam<Golden> {};

TEST_P(WgslGoldenTest, MatchesGoldenFile) {
  const Golden& golden = GetParam();
  Function f = golden.build();
  ASSERT_TRUE(Verify(f).ok()) << Verify(f);
  StatusOr<CompiledFunction> compiled = GenerateWgsl(f);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  std::string path = GoldenPath(golden.name);
  if (std::getenv("KILN_UPDATE_GOLDENS") != nullptr) {
    std::ofstream(path) << compiled->wgsl;
    GTEST_SKIP() << "rewrote " << path;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << "missing golden file " << path;
  std::stringstream expected;
  expected << in.rdbuf();
  EXPECT_EQ(compiled->wgsl, expected.str()) << "golden " << path;
}

INSTANTIATE_TEST_SUITE_P(Kernels, WgslGoldenTest, testing::ValuesIn(kGoldens),
                         [](const testing::TestParamInfo<Golden>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace kiln::codegen
