// Whole kernels run by the interpreter and checked against plain C++:
// elementwise with broadcast, shared-memory reductions and matmul with
// barriers, vector loads and stores, gathers, while loops.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <iostream>

#include "kiln/interp/interp_test_util.h"
#include "kiln/interp/interpreter.h"
#include "kiln/ir/ir.h"
#include "kiln/ir/parser.h"

namespace kiln::interp {
namespace {

using namespace kiln::ir;  // NOLINT(build/namespaces): kernels read better unqualified
using testing::Contents;
using testing::MakeBuffer;
using testing::Poisoned;
using testing::RandomFloats;
using testing::RandomInts;
using testing::Verified;

TEST(KernelsTest, ElementwiseWithBroadcast) {
  // C[i, j] = A[i, j] * 2 + B[j], over a 2-D grid with a ragged edge.
  IRBuilder b("add_row");
  Var n = b.ScalarParam("n", kI32);
  Var m = b.ScalarParam("m", kI32);
  Buffer A = b.BufferParam("A", kF32, {n, m});
  Buffer B = b.BufferParam("B", kF32, {m});
  Buffer C = b.BufferParam("C", kF32, {n, m});
  b.For("by", LoopKind::kBlockY, 0, n, [&](Var by) {
    b.For("bx", LoopKind::kBlockX, 0, (m + 31) / 32, [&](Var bx) {
      b.For("tx", LoopKind::kThreadX, 0, 32, [&](Var tx) {
        Var j = b.Let("j", bx * 32 + tx);
        b.If(j < m, [&] { b.Store(C, {by, j}, Load(A, {by, j}) * 2.0 + Load(B, {j})); });
      });
    });
  });
  const int rows = 5;
  const int cols = 45;
  std::vector<float> a = RandomFloats(rows * cols, 1);
  std::vector<float> bias = RandomFloats(cols, 2);
  std::vector<ArgValue> args = {Value::I32(rows), Value::I32(cols),
                                HostBuffer::FromVector(kF32, {rows, cols}, a),
                                MakeBuffer(kF32, bias), Poisoned(kF32, rows * cols)};
  ASSERT_TRUE(interp::Run(Verified(b), args).ok());
  std::vector<float> c = Contents<float>(args[4]);
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < cols; ++j) {
      EXPECT_EQ(c[i * cols + j], a[i * cols + j] * 2.0f + bias[j]) << i << ", " << j;
    }
  }
}

// Tree reduction of 64 elements per workgroup in shared memory, with a
// barrier inside the loop that halves the stride.
TEST(KernelsTest, SharedMemoryTreeReduction) {
  IRBuilder b("block_sum");
  Var n = b.ScalarParam("n", kI32);
  Buffer A = b.BufferParam("A", kI32, {n});
  Buffer out = b.BufferParam("out", kI32, {(n + 63) / 64});
  b.For("bx", LoopKind::kBlockX, 0, (n + 63) / 64, [&](Var bx) {
    b.For("tx", LoopKind::kThreadX, 0, 64, [&](Var tx) {
      b.Allocate("partial", kI32, {64}, MemoryScope::kShared, [&](Buffer partial) {
        Var i = b.Let("i", bx * 64 + tx);
        b.Store(partial, {tx}, IfThenElse(i < n, Load(A, {i}), 0));
        b.Barrier();
        b.For("s", LoopKind::kSerial, 0, 6, [&](Var s) {
          Var stride = b.Let("stride", Call(Intrinsic::kShiftRight, {Expr(32), s}));
          b.If(tx < stride,
               [&] { b.Store(partial, {tx}, Load(partial, {tx}) + Load(partial, {tx + stride})); });
          b.Barrier();
        });
        b.If(tx == 0, [&] { b.Store(out, {bx}, Load(partial, {0})); });
      });
    });
  });
  const int count = 200;  // four workgroups, the last one partial
  std::vector<int32_t> a = RandomInts(count, 3, -1000, 1000);
  std::vector<ArgValue> args = {Value::I32(count), MakeBuffer(kI32, a), Poisoned(kI32, 4)};
  Status status = interp::Run(Verified(b), args);
  ASSERT_TRUE(status.ok()) << status;
  std::vector<int32_t> sums = Contents<int32_t>(args[2]);
  for (int block = 0; block < 4; ++block) {
    int32_t expected = 0;
    for (int i = block * 64; i < std::min(count, block * 64 + 64); ++i) expected += a[i];
    EXPECT_EQ(sums[block], expected) << block;
  }
}

// The same reduction with the stride in a per-thread local variable and a
// while loop around the barrier. The stride is uniform in fact, but the
// verifier cannot prove it and conservatively rejects the barrier; the
// interpreter runs it and would report a barrier that some thread misses.
TEST(KernelsTest, BarrierInsideWhileLoop) {
  IRBuilder b("block_max");
  Buffer A = b.BufferParam("A", kF32, {128});
  Buffer out = b.BufferParam("out", kF32, {2});
  b.For("bx", LoopKind::kBlockX, 0, 2, [&](Var bx) {
    b.For("tx", LoopKind::kThreadX, 0, 64, [&](Var tx) {
      b.Allocate("partial", kF32, {64}, MemoryScope::kShared, [&](Buffer partial) {
        b.Allocate("stride", kI32, {1}, MemoryScope::kLocal, [&](Buffer stride) {
          b.Store(partial, {tx}, Load(A, {bx * 64 + tx}));
          b.Store(stride, {0}, 32);
          b.Barrier();
          b.While(Load(stride, {0}) > 0, [&] {
            Var s = b.Let("s", Load(stride, {0}));
            b.If(tx < s, [&] {
              b.Store(partial, {tx}, Max(Load(partial, {tx}), Load(partial, {tx + s})));
            });
            b.Barrier();
            b.Store(stride, {0}, s / 2);
          });
          b.If(tx == 0, [&] { b.Store(out, {bx}, Load(partial, {0})); });
        });
      });
    });
  });
  std::vector<float> a = RandomFloats(128, 4);
  std::vector<ArgValue> args = {MakeBuffer(kF32, a), Poisoned(kF32, 2)};
  Status status = interp::Run(b.Build(), args);
  ASSERT_TRUE(status.ok()) << status;
  std::vector<float> result = Contents<float>(args[1]);
  EXPECT_EQ(result[0], *std::max_element(a.begin(), a.begin() + 64));
  EXPECT_EQ(result[1], *std::max_element(a.begin() + 64, a.end()));
}

// C = A * B with 16x16 tiles staged through shared memory.
Function TiledMatmul() {
  IRBuilder b("matmul");
  Var M = b.ScalarParam("M", kI32);
  Var N = b.ScalarParam("N", kI32);
  Var K = b.ScalarParam("K", kI32);
  Buffer A = b.BufferParam("A", kF32, {M, K});
  Buffer B = b.BufferParam("B", kF32, {K, N});
  Buffer C = b.BufferParam("C", kF32, {M, N});
  b.For("by", LoopKind::kBlockY, 0, M / 16, [&](Var by) {
    b.For("bx", LoopKind::kBlockX, 0, N / 16, [&](Var bx) {
      b.For("ty", LoopKind::kThreadY, 0, 16, [&](Var ty) {
        b.For("tx", LoopKind::kThreadX, 0, 16, [&](Var tx) {
          b.Allocate("As", kF32, {16, 16}, MemoryScope::kShared, [&](Buffer As) {
            b.Allocate("Bs", kF32, {16, 16}, MemoryScope::kShared, [&](Buffer Bs) {
              b.Allocate("acc", kF32, {1}, MemoryScope::kLocal, [&](Buffer acc) {
                b.Store(acc, {0}, FloatConst(kF32, 0.0));
                b.For("kt", LoopKind::kSerial, 0, K / 16, [&](Var kt) {
                  b.Store(As, {ty, tx}, Load(A, {by * 16 + ty, kt * 16 + tx}));
                  b.Store(Bs, {ty, tx}, Load(B, {kt * 16 + ty, bx * 16 + tx}));
                  b.Barrier();
                  b.For("k", LoopKind::kSerial, 0, 16, [&](Var k) {
                    b.Store(acc, {0}, Load(acc, {0}) + Load(As, {ty, k}) * Load(Bs, {k, tx}));
                  });
                  b.Barrier();
                });
                b.Store(C, {by * 16 + ty, bx * 16 + tx}, Load(acc, {0}));
              });
            });
          });
        });
      });
    });
  });
  return Verified(b);
}

TEST(KernelsTest, TiledMatmulWithSharedMemory) {
  const int m = 64;
  const int n = 64;
  const int k = 64;
  std::vector<float> a = RandomFloats(m * k, 5);
  std::vector<float> bm = RandomFloats(k * n, 6);
  std::vector<ArgValue> args = {Value::I32(m),
                                Value::I32(n),
                                Value::I32(k),
                                HostBuffer::FromVector(kF32, {m, k}, a),
                                HostBuffer::FromVector(kF32, {k, n}, bm),
                                Poisoned(kF32, m * n)};
  const Function f = TiledMatmul();
  const auto start = std::chrono::steady_clock::now();
  Status status = interp::Run(f, args);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(status.ok()) << status;
  // Informational only: tests never assert on time.
  std::cout << "64x64x64 matmul: "
            << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count() << " ms\n";
  std::vector<float> c = Contents<float>(args[5]);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      float expected = 0;
      for (int p = 0; p < k; ++p) expected = expected + a[i * k + p] * bm[p * n + j];
      EXPECT_NEAR(c[i * n + j], expected, 1e-5f) << i << ", " << j;
    }
  }
}

TEST(KernelsTest, VectorLoadsStoresAndGathers) {
  // out[4i .. 4i+3] = A[4i .. 4i+3] * 2 + A[idx[4i .. 4i+3]] (a gather), and
  // scattered[idx[4i + l]] = float(i) (a scatter).
  IRBuilder b("vec4");
  Buffer A = b.BufferParam("A", kF32, {64});
  Buffer idx = b.BufferParam("idx", kI32, {64});
  Buffer out = b.BufferParam("out", kF32, {64});
  Buffer scattered = b.BufferParam("scattered", kF32, {64});
  b.For("tx", LoopKind::kThreadX, 0, 16, [&](Var tx) {
    Var base = b.Let("base", tx * 4);
    Var contiguous = b.Let("contiguous", Load(A, {Ramp(base, 1, 4)}));
    Var gathered = b.Let("gathered", Load(A, {Load(idx, {Ramp(base, 1, 4)})}));
    b.Store(out, {Ramp(base, 1, 4)}, contiguous * Broadcast(FloatConst(kF32, 2.0), 4) + gathered);
    b.Store(scattered, {Load(idx, {Ramp(base, 1, 4)})}, Broadcast(Cast(kF32, tx), 4));
  });
  std::vector<float> a = RandomFloats(64, 7);
  // A permutation, so the scatter writes every element once.
  std::vector<int32_t> perm(64);
  for (int i = 0; i < 64; ++i) perm[i] = (i * 37 + 11) % 64;
  std::vector<ArgValue> args = {MakeBuffer(kF32, a), MakeBuffer(kI32, perm), Poisoned(kF32, 64),
                                Poisoned(kF32, 64)};
  Status status = interp::Run(Verified(b), args);
  ASSERT_TRUE(status.ok()) << status;
  std::vector<float> result = Contents<float>(args[2]);
  std::vector<float> scatter = Contents<float>(args[3]);
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(result[i], a[i] * 2.0f + a[perm[i]]) << i;
    EXPECT_EQ(scatter[perm[i]], static_cast<float>(i / 4)) << i;
  }
}

TEST(KernelsTest, StridedBufferAndVectorStride) {
  // Reads a column-major view (strides [1, 4]) with a strided ramp.
  IRBuilder b("transpose");
  Buffer A = b.BufferParam("A", kI32, {4, 4}, {1, 4});
  Buffer out = b.BufferParam("out", kI32, {16});
  b.For("tx", LoopKind::kThreadX, 0, 4, [&](Var tx) {
    b.Store(out, {Ramp(tx * 4, 1, 4)}, Load(A, {Broadcast(tx, 4), Ramp(0, 1, 4)}));
  });
  std::vector<int32_t> a(16);
  for (int i = 0; i < 16; ++i) a[i] = i;
  std::vector<ArgValue> args = {MakeBuffer(kI32, a), Poisoned(kI32, 16)};
  Status status = interp::Run(Verified(b), args);
  ASSERT_TRUE(status.ok()) << status;
  std::vector<int32_t> result = Contents<int32_t>(args[1]);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) EXPECT_EQ(result[i * 4 + j], i + j * 4);
  }
}

TEST(KernelsTest, WhileLoopWithDivergentTripCounts) {
  // Collatz steps: every thread leaves the loop after its own number of trips.
  IRBuilder b("collatz");
  Buffer A = b.BufferParam("A", kI32, {32});
  Buffer steps = b.BufferParam("steps", kI32, {32});
  b.For("tx", LoopKind::kThreadX, 0, 32, [&](Var tx) {
    b.Allocate("x", kI32, {1}, MemoryScope::kLocal, [&](Buffer x) {
      b.Allocate("count", kI32, {1}, MemoryScope::kLocal, [&](Buffer count) {
        b.Store(x, {0}, Load(A, {tx}));
        b.Store(count, {0}, 0);
        b.While(Load(x, {0}) != 1, [&] {
          Var v = b.Let("v", Load(x, {0}));
          b.Store(x, {0}, Select(v % 2 == 0, v / 2, v * 3 + 1));
          b.Store(count, {0}, Load(count, {0}) + 1);
        });
        b.Store(steps, {tx}, Load(count, {0}));
      });
    });
  });
  std::vector<int32_t> a = RandomInts(32, 8, 1, 1000);
  std::vector<ArgValue> args = {MakeBuffer(kI32, a), Poisoned(kI32, 32)};
  Status status = interp::Run(Verified(b), args);
  ASSERT_TRUE(status.ok()) << status;
  std::vector<int32_t> result = Contents<int32_t>(args[1]);
  for (int i = 0; i < 32; ++i) {
    int32_t v = a[i];
    int32_t expected = 0;
    while (v != 1) {
      v = v % 2 == 0 ? v / 2 : 3 * v + 1;
      ++expected;
    }
    EXPECT_EQ(result[i], expected) << a[i];
  }
}

TEST(KernelsTest, LocalMemoryIsPerThreadAndSharedPerBlock) {
  // Each thread fills its own local array with its index; each workgroup
  // counts its threads in shared memory through thread 0.
  IRBuilder b("memory_scopes");
  Buffer local_out = b.BufferParam("local_out", kI32, {2, 8});
  Buffer shared_out = b.BufferParam("shared_out", kI32, {2});
  b.For("bx", LoopKind::kBlockX, 0, 2, [&](Var bx) {
    b.For("tx", LoopKind::kThreadX, 0, 8, [&](Var tx) {
      b.Allocate("mine", kI32, {4}, MemoryScope::kLocal, [&](Buffer mine) {
        b.Allocate("slots", kI32, {8}, MemoryScope::kShared, [&](Buffer slots) {
          b.For("i", LoopKind::kSerial, 0, 4, [&](Var i) { b.Store(mine, {i}, tx * 10 + i); });
          b.Store(slots, {tx}, 1 + bx);
          b.Barrier();
          b.Store(local_out, {bx, tx}, Load(mine, {0}) + Load(mine, {3}));
          b.If(tx == 0, [&] {
            Expr total = Load(slots, {0});
            for (int k = 1; k < 8; ++k) total = total + Load(slots, {k});
            b.Store(shared_out, {bx}, total);
          });
        });
      });
    });
  });
  std::vector<ArgValue> args = {Poisoned(kI32, 16), Poisoned(kI32, 2)};
  Status status = interp::Run(Verified(b), args);
  ASSERT_TRUE(status.ok()) << status;
  std::vector<int32_t> local = Contents<int32_t>(args[0]);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(local[i], (i % 8) * 20 + 3);
  EXPECT_EQ(Contents<int32_t>(args[1]), (std::vector<int32_t>{8, 16}));
}

TEST(KernelsTest, GlobalAllocationLivesForTheLaunch) {
  // Workgroups run in order (blockIdx.y outer, blockIdx.x inner), so each one
  // sees what the earlier ones left in the per-launch scratch buffer, which
  // starts zeroed.
  IRBuilder b("running_total");
  Buffer out = b.BufferParam("out", kI32, {4});
  b.For("bx", LoopKind::kBlockX, 0, 4, [&](Var bx) {
    b.Allocate("seen", kI32, {4}, MemoryScope::kGlobal, [&](Buffer seen) {
      b.Store(seen, {bx}, bx + 1);
      b.Store(out, {bx}, Load(seen, {0}) + Load(seen, {1}) + Load(seen, {2}) + Load(seen, {3}));
    });
  });
  std::vector<ArgValue> args = {Poisoned(kI32, 4)};
  Status status = interp::Run(Verified(b), args);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(Contents<int32_t>(args[0]), (std::vector<int32_t>{1, 3, 6, 10}));
}

TEST(KernelsTest, TextFormKernel) {
  // Row softmax, one 32-thread workgroup (and subgroup) per row.
  StatusOr<Function> f = ParseFunction(R"(
    fn softmax(X: buffer<f32>[rows, 32], Y: buffer<f32>[rows, 32], rows: i32) {
      for row in blockIdx.x(0, rows) {
        for tx in threadIdx.x(0, 32) {
          let x: f32 = X[row, tx]
          let e: f32 = exp(x - subgroup_max(x))
          Y[row, tx] = e / subgroup_add(e)
        }
      }
    })");
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE(Verify(*f).ok()) << Verify(*f);
  const int rows = 6;
  std::vector<float> x = RandomFloats(rows * 32, 9, -4, 4);
  std::vector<ArgValue> args = {HostBuffer::FromVector(kF32, {rows, 32}, x),
                                Poisoned(kF32, rows * 32), Value::I32(rows)};
  Status status = interp::Run(*f, args);
  ASSERT_TRUE(status.ok()) << status;
  std::vector<float> y = Contents<float>(args[1]);
  for (int r = 0; r < rows; ++r) {
    const float* row = x.data() + r * 32;
    const float m = *std::max_element(row, row + 32);
    float sum = 0;
    for (int i = 0; i < 32; ++i) sum += std::exp(row[i] - m);
    for (int i = 0; i < 32; ++i) {
      EXPECT_NEAR(y[r * 32 + i], std::exp(row[i] - m) / sum, 1e-6f) << r << ", " << i;
    }
  }
}

}  // namespace
}  // namespace kiln::interp
