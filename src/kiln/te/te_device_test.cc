// Tensor-expression kernels on a device: each is defined, scheduled,
// lowered, compiled for the device, run on fresh random inputs with its
// output poisoned first, and compared with a plain C++ reference (and with
// the interpreter, through check::RunAndCheck), at sizes that are not
// multiples of the tiles. CTest runs it once per device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kiln/check/check.h"
#include "kiln/codegen/wgsl_codegen.h"
#include "kiln/hal/buffer.h"
#include "kiln/hal/device.h"
#include "kiln/ir/expr_nodes.h"
#include "kiln/ir/printer.h"
#include "kiln/runtime/module.h"
#include "kiln/runtime/test_device.h"
#include "kiln/te/te.h"
#include "kiln/te/te_random_schedules.h"
#include "kiln/te/te_test_kernels.h"

namespace kiln::te {
namespace {

using runtime::Arg;

class TeDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    device_ = runtime::testing::TestDevice();
    ASSERT_TRUE(device_);
  }

  std::vector<float> Random(size_t n) {
    std::mt19937 rng(::testing::UnitTest::GetInstance()->random_seed() + 7919 * ++draws_);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
  }

  // Compiles `f` for the device and runs it on `inputs` (the f32 buffer
  // parameters before the output, in order) and `scalars` (the i32
  // parameters, in order); the output starts as NaN everywhere. Also
  // checks the kernel against the interpreter on other random inputs.
  std::vector<float> Run(const ir::Function& f, const std::vector<std::vector<float>>& inputs,
                         size_t output_elements, const std::vector<int32_t>& scalars) {
    SCOPED_TRACE(ir::Print(f));
    auto compiled = codegen::CompileModule(ir::Module{{f}}, check::CompileOptionsFor(*device_));
    EXPECT_TRUE(compiled.ok()) << compiled.status();
    if (!compiled.ok()) return {};
    auto loaded = runtime::LoadedModule::Load(device_, *compiled);
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    if (!loaded.ok()) return {};
    auto kernel = (*loaded)->Find(f.name());
    EXPECT_TRUE(kernel.ok()) << kernel.status();
    if (!kernel.ok()) return {};

    std::vector<Arg> args;
    std::vector<hal::BufferRef> keep;
    auto upload = [&](const void* data, size_t bytes) -> hal::BufferRef {
      auto b = device_->allocator().Allocate(bytes);
      EXPECT_TRUE(b.ok()) << b.status();
      if (!b.ok()) return nullptr;
      Status up = hal::Upload(*device_, *b, 0,
                              {static_cast<const uint8_t*>(data), static_cast<size_t>(bytes)});
      EXPECT_TRUE(up.ok()) << up;
      keep.push_back(*b);
      args.push_back(Arg::Buffer(*b));
      return *b;
    };
    for (const auto& in : inputs) upload(in.data(), in.size() * 4);
    std::vector<uint8_t> poison(output_elements * 4, 0xFF);  // NaN
    hal::BufferRef out = upload(poison.data(), poison.size());
    if (!out) return {};
    check::CheckOptions check;
    int s = 0;
    for (const ir::Param& p : f.params()) {
      if (p.is_scalar()) check.scalar_args[p.name()] = std::to_string(scalars.at(s++));
    }
    for (int32_t v : scalars) args.push_back(Arg::I32(v));
    Status called = (*kernel)->Call(args);
    EXPECT_TRUE(called.ok()) << called;
    std::vector<float> result(output_elements);
    Status down = hal::Download(*device_, out, 0,
                                {reinterpret_cast<uint8_t*>(result.data()), result.size() * 4});
    EXPECT_TRUE(down.ok()) << down;

    auto differential = check::RunAndCheck(**kernel, f, check);
    EXPECT_TRUE(differential.ok()) << differential.status();
    if (differential.ok()) {
      EXPECT_TRUE(differential->pass) << "seed " << differential->seed << "\n"
                                      << differential->Summary();
    }
    return result;
  }

  static void ExpectNear(const std::vector<float>& got, const std::vector<float>& want,
                         float tolerance, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_LE(std::fabs(got[i] - want[i]), tolerance * (1 + std::fabs(want[i])))
          << what << " [" << i << "]: " << got[i] << " vs " << want[i];
    }
  }

  std::shared_ptr<hal::Device> device_;
  int draws_ = 0;
};

struct Shape2 {
  int rows, cols;
};
const Shape2 kShapes[] = {{1, 1}, {7, 33}, {33, 100}, {100, 7}, {1, 100}};

// Checks `got` against the sum of each row of x[rows, cols] (accumulated in
// double). An f32 sum's rounding error grows with the sum of the magnitudes
// it adds (a row of 1000 values summed by one thread is off by about 1e-5
// where the sum itself is near 0), so each row's bound is 2^-16 of that sum
// of magnitudes: still far below one element of the row left out or added
// twice.
void ExpectRowSums(const std::vector<float>& got, const std::vector<float>& x, int rows, int cols) {
  ASSERT_EQ(got.size(), static_cast<size_t>(rows));
  for (int r = 0; r < rows; ++r) {
    double sum = 0, magnitude = 0;
    for (int q = 0; q < cols; ++q) {
      sum += x[r * cols + q];
      magnitude += std::fabs(x[r * cols + q]);
    }
    ASSERT_LE(std::fabs(got[r] - sum), std::ldexp(1.0 + magnitude, -16))
        << "Y [" << r << "]: " << got[r] << " vs " << sum;
  }
}

// C[i, j] = A[i, j] + b[j]: b broadcast over the rows; j split by 32 over
// threads, rows over blockIdx.y.
TEST_F(TeDeviceTest, ElementwiseAddBroadcastsARow) {
  Var m = SizeVar("m"), n = SizeVar("n");
  Tensor A = Placeholder("A", {m, n}, ir::kF32);
  Tensor b = Placeholder("b", {n}, ir::kF32);
  Tensor C =
      Compute("C", {m, n}, [&](const std::vector<Var>& i) { return A(i[0], i[1]) + b(i[1]); });
  auto s = Schedule::Create({C});
  ASSERT_TRUE(s.ok()) << s.status();
  Stage c = (*s)[C];
  auto j = c.Split(c.axis(1), 32);
  ASSERT_TRUE(j.ok()) << j.status();
  ASSERT_TRUE(c.Bind(c.axis(0), ThreadAxis::kBlockY).ok());
  ASSERT_TRUE(c.Bind(j->outer, ThreadAxis::kBlockX).ok());
  ASSERT_TRUE(c.Bind(j->inner, ThreadAxis::kThreadX).ok());
  auto f = Lower(*s, {C}, {A, b}, "add_row");
  ASSERT_TRUE(f.ok()) << f.status();
  for (Shape2 sh : kShapes) {
    SCOPED_TRACE(std::to_string(sh.rows) + "x" + std::to_string(sh.cols));
    auto a = Random(sh.rows * sh.cols), row = Random(sh.cols);
    std::vector<float> want(a.size());
    for (int r = 0; r < sh.rows; ++r) {
      for (int q = 0; q < sh.cols; ++q) want[r * sh.cols + q] = a[r * sh.cols + q] + row[q];
    }
    ExpectNear(Run(*f, {a, row}, want.size(), {sh.rows, sh.cols}), want, 0, "C");
  }
}

// D of the 2-D chain A -> B -> C -> D with B and C inlined, the output's
// two axes fused and split by 64 over blocks and threads.
StatusOr<ir::Function> InlineTwoAndLower(const Tensor& A, const Tensor& B, const Tensor& C,
                                         const Tensor& D, const std::string& name) {
  KILN_ASSIGN_OR_RETURN(Schedule s, Schedule::Create({D}));
  KILN_RETURN_IF_ERROR(s[B].ComputeInline());
  KILN_RETURN_IF_ERROR(s[C].ComputeInline());
  Stage d = s[D];
  KILN_ASSIGN_OR_RETURN(IterVar fused, d.Fuse(d.axis(0), d.axis(1)));
  KILN_ASSIGN_OR_RETURN(SplitResult parts, d.Split(fused, 64));
  KILN_RETURN_IF_ERROR(d.Bind(parts.outer, ThreadAxis::kBlockX));
  KILN_RETURN_IF_ERROR(d.Bind(parts.inner, ThreadAxis::kThreadX));
  return Lower(s, {D}, {A}, name);
}

// D = max(A * 2 - 1, 0) * 0.5 as three stages, the first two inlined; the
// output's two axes fused and split by 64 over blocks and threads.
TEST_F(TeDeviceTest, ComputeInlineFusesAChain) {
  Var m = SizeVar("m"), n = SizeVar("n");
  Tensor A = Placeholder("A", {m, n}, ir::kF32);
  Tensor B =
      Compute("B", {m, n}, [&](const std::vector<Var>& i) { return A(i[0], i[1]) * 2.0 - 1.0; });
  Tensor C = Compute("C", {m, n}, [&](const std::vector<Var>& i) {
    return ir::Max(B(i[0], i[1]), ir::FloatConst(ir::kF32, 0.0));
  });
  Tensor D = Compute("D", {m, n}, [&](const std::vector<Var>& i) { return C(i[0], i[1]) * 0.5; });
  auto f = InlineTwoAndLower(A, B, C, D, "chain");
  ASSERT_TRUE(f.ok()) << f.status();
  for (Shape2 sh : kShapes) {
    SCOPED_TRACE(std::to_string(sh.rows) + "x" + std::to_string(sh.cols));
    auto a = Random(sh.rows * sh.cols);
    std::vector<float> want(a.size());
    for (size_t i = 0; i < a.size(); ++i) want[i] = std::max(a[i] * 2.0f - 1.0f, 0.0f) * 0.5f;
    ExpectNear(Run(*f, {a}, want.size(), {sh.rows, sh.cols}), want, 1e-6f, "D");
  }
}

// Inlined stages whose bodies bind lets, read more than once: each copy
// gets its own bindings (the IR binds a variable once). B = relu(2A - 1)
// through a let; C = B + B * B; D = C - C / 2, all inlined into D.
TEST_F(TeDeviceTest, InlinedLetsAreBoundOncePerCopy) {
  Var m = SizeVar("m"), n = SizeVar("n");
  Tensor A = Placeholder("A", {m, n}, ir::kF32);
  Tensor B = Compute("B", {m, n}, [&](const std::vector<Var>& i) {
    Var v("v", ir::kF32);
    return ir::Let(v, A(i[0], i[1]) * 2.0 - 1.0,
                   ir::Select(v > 0.0, Expr(v), ir::FloatConst(ir::kF32, 0.0)));
  });
  Tensor C = Compute("C", {m, n}, [&](const std::vector<Var>& i) {
    return B(i[0], i[1]) + B(i[0], i[1]) * B(i[0], i[1]);
  });
  Tensor D = Compute(
      "D", {m, n}, [&](const std::vector<Var>& i) { return C(i[0], i[1]) - C(i[0], i[1]) / 2.0; });
  auto f = InlineTwoAndLower(A, B, C, D, "lets");
  ASSERT_TRUE(f.ok()) << f.status();
  for (Shape2 sh : kShapes) {
    SCOPED_TRACE(std::to_string(sh.rows) + "x" + std::to_string(sh.cols));
    auto a = Random(sh.rows * sh.cols);
    std::vector<float> want(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      const float b = std::max(a[i] * 2.0f - 1.0f, 0.0f), c = b + b * b;
      want[i] = c - c / 2.0f;
    }
    ExpectNear(Run(*f, {a}, want.size(), {sh.rows, sh.cols}), want, 1e-6f, "D");
  }
}

// C = A x B with 8x8 (or 16x16) threads per block and a serial k.
TEST_F(TeDeviceTest, MatmulSplitAndBound) {
  for (int tile : {8, 16}) {
    Var M = SizeVar("M"), N = SizeVar("N"), K = SizeVar("K");
    Tensor A = Placeholder("A", {M, K}, ir::kF32);
    Tensor B = Placeholder("B", {K, N}, ir::kF32);
    IterVar k = ReduceAxis(K, "k");
    Tensor C = Compute(
        "C", {M, N}, [&](const std::vector<Var>& i) { return Sum(A(i[0], k) * B(k, i[1]), {k}); });
    auto s = Schedule::Create({C});
    ASSERT_TRUE(s.ok()) << s.status();
    Stage c = (*s)[C];
    auto i = c.Split(c.axis(0), tile);
    auto j = c.Split(c.axis(1), tile);
    ASSERT_TRUE(i.ok() && j.ok());
    ASSERT_TRUE(c.Reorder({i->outer, j->outer, i->inner, j->inner}).ok());
    ASSERT_TRUE(c.Bind(i->outer, ThreadAxis::kBlockY).ok());
    ASSERT_TRUE(c.Bind(j->outer, ThreadAxis::kBlockX).ok());
    ASSERT_TRUE(c.Bind(i->inner, ThreadAxis::kThreadY).ok());
    ASSERT_TRUE(c.Bind(j->inner, ThreadAxis::kThreadX).ok());
    auto f = Lower(*s, {C}, {A, B}, "matmul");
    ASSERT_TRUE(f.ok()) << f.status();
    for (auto [m, n, kk] : {std::tuple{1, 1, 1}, {7, 33, 100}, {33, 7, 1}, {100, 100, 33}}) {
      SCOPED_TRACE("tile " + std::to_string(tile) + ", " + std::to_string(m) + "x" +
                   std::to_string(n) + "x" + std::to_string(kk));
      auto a = Random(m * kk), b = Random(kk * n);
      std::vector<float> want(m * n);
      for (int r = 0; r < m; ++r) {
        for (int q = 0; q < n; ++q) {
          float acc = 0;
          for (int t = 0; t < kk; ++t) acc += a[r * kk + t] * b[t * n + q];
          want[r * n + q] = acc;
        }
      }
      // Parameters: A, B, C, then M, K, N in order of first use.
      ExpectNear(Run(*f, {a, b}, want.size(), {m, kk, n}), want, 1e-4f, "C");
    }
  }
}

// Row reductions: rows split by 64 over blocks and threads, the reduction
// axis split by 4 and unrolled (guarded where 4 does not divide it).
void ScheduleRows(Schedule& s, const Tensor& t) {
  Stage st = s[t];
  auto r = st.Split(st.axis(0), 64);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(st.Bind(r->outer, ThreadAxis::kBlockX).ok());
  ASSERT_TRUE(st.Bind(r->inner, ThreadAxis::kThreadX).ok());
  auto k = st.Split(st.reduce_axis(0), 4);
  ASSERT_TRUE(k.ok()) << k.status();
  ASSERT_TRUE(st.Unroll(k->inner).ok());
}

TEST_F(TeDeviceTest, RowSum) {
  Var m = SizeVar("m"), n = SizeVar("n");
  Tensor X = Placeholder("X", {m, n}, ir::kF32);
  IterVar k = ReduceAxis(n, "k");
  Tensor Y = Compute("Y", {m}, [&](const std::vector<Var>& i) { return Sum(X(i[0], k), {k}); });
  auto s = Schedule::Create({Y});
  ASSERT_TRUE(s.ok()) << s.status();
  ScheduleRows(*s, Y);
  auto f = Lower(*s, {Y}, {X}, "row_sum");
  ASSERT_TRUE(f.ok()) << f.status();
  for (Shape2 sh : kShapes) {
    SCOPED_TRACE(std::to_string(sh.rows) + "x" + std::to_string(sh.cols));
    auto x = Random(sh.rows * sh.cols);
    ExpectRowSums(Run(*f, {x}, sh.rows, {sh.rows, sh.cols}), x, sh.rows, sh.cols);
  }
}

TEST_F(TeDeviceTest, RowMax) {
  Var m = SizeVar("m"), n = SizeVar("n");
  Tensor X = Placeholder("X", {m, n}, ir::kF32);
  IterVar k = ReduceAxis(n, "k");
  Tensor Y = Compute("Y", {m}, [&](const std::vector<Var>& i) { return Max(X(i[0], k), {k}); });
  auto s = Schedule::Create({Y});
  ASSERT_TRUE(s.ok()) << s.status();
  ScheduleRows(*s, Y);
  auto f = Lower(*s, {Y}, {X}, "row_max");
  ASSERT_TRUE(f.ok()) << f.status();
  for (Shape2 sh : kShapes) {
    SCOPED_TRACE(std::to_string(sh.rows) + "x" + std::to_string(sh.cols));
    auto x = Random(sh.rows * sh.cols);
    std::vector<float> want(sh.rows);
    for (int r = 0; r < sh.rows; ++r) {
      want[r] = *std::max_element(x.begin() + r * sh.cols, x.begin() + (r + 1) * sh.cols);
    }
    ExpectNear(Run(*f, {x}, want.size(), {sh.rows, sh.cols}), want, 0, "Y");
  }
}

// Four lanes per thread as one vector, 64 threads per block.
void ScheduleVectorized(Schedule& s, const Tensor& t, int rank) {
  Stage st = s[t];
  IterVar fused = st.axis(0);
  for (int d = 1; d < rank; ++d) {
    auto f = st.Fuse(fused, st.axis(d));
    ASSERT_TRUE(f.ok()) << f.status();
    fused = *f;
  }
  auto lanes = st.Split(fused, 4);
  ASSERT_TRUE(lanes.ok()) << lanes.status();
  auto parts = st.Split(lanes->outer, 64);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_TRUE(st.Bind(parts->outer, ThreadAxis::kBlockX).ok());
  ASSERT_TRUE(st.Bind(parts->inner, ThreadAxis::kThreadX).ok());
  ASSERT_TRUE(st.Vectorize(lanes->inner).ok());
}

const int kVectorSizes[] = {1, 3, 4, 7, 1000, 4097};

// Y = A * B + 1 vectorized by 4: a symbolic size (always the guarded
// vector/serial split) and constant sizes (no guard where 4 * 64 divides).
TEST_F(TeDeviceTest, VectorizedElementwiseWithAndWithoutTails) {
  auto check = [&](const Expr& extent, int n) {
    Tensor A = Placeholder("A", {extent}, ir::kF32);
    Tensor B = Placeholder("B", {extent}, ir::kF32);
    Tensor Y =
        Compute("Y", {extent}, [&](const std::vector<Var>& i) { return A(i[0]) * B(i[0]) + 1.0; });
    auto s = Schedule::Create({Y});
    ASSERT_TRUE(s.ok()) << s.status();
    ScheduleVectorized(*s, Y, 1);
    auto f = Lower(*s, {Y}, {A, B}, "mul_add");
    ASSERT_TRUE(f.ok()) << f.status();
    auto a = Random(n), b = Random(n);
    std::vector<float> want(n);
    for (int i = 0; i < n; ++i) want[i] = a[i] * b[i] + 1.0f;
    std::vector<int32_t> scalars;
    if (!extent.as<ir::IntImmNode>()) scalars.push_back(n);
    ExpectNear(Run(*f, {a, b}, n, scalars), want, 1e-6f, "Y");
  };
  Var n = SizeVar("n");
  for (int size : kVectorSizes) {
    SCOPED_TRACE("n = " + std::to_string(size));
    check(n, size);
  }
  for (int size : {1, 3, 4, 7, 1000, 1024, 4096, 4097}) {
    SCOPED_TRACE("constant " + std::to_string(size));
    check(ir::IntConst(ir::kI32, size), size);
  }
}

// A fused rank-2 output with a broadcast row, vectorized: columns of 12
// (contiguous lanes: the lane count divides the row) and of 7 (lanes cross
// rows, so the loads are gathers), with a relu (a let in the body).
TEST_F(TeDeviceTest, VectorizedFusedRowsWithBroadcast) {
  for (int cols : {12, 7}) {
    Var m = SizeVar("m");
    Expr c = ir::IntConst(ir::kI32, cols);
    Tensor A = Placeholder("A", {m, c}, ir::kF32);
    Tensor b = Placeholder("b", {c}, ir::kF32);
    Tensor C = Compute("C", {m, c}, [&](const std::vector<Var>& i) {
      ir::Var x("x", ir::kF32);
      return ir::Let(x, A(i[0], i[1]) + b(i[1]),
                     ir::Select(x > 0.0, x, ir::FloatConst(ir::kF32, 0.0)));
    });
    auto s = Schedule::Create({C});
    ASSERT_TRUE(s.ok()) << s.status();
    ScheduleVectorized(*s, C, 2);
    auto f = Lower(*s, {C}, {A, b}, "add_row_relu");
    ASSERT_TRUE(f.ok()) << f.status();
    for (int rows : kVectorSizes) {
      SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
      auto a = Random(rows * cols), row = Random(cols);
      std::vector<float> want(a.size());
      for (int r = 0; r < rows; ++r) {
        for (int q = 0; q < cols; ++q) {
          want[r * cols + q] = std::max(a[r * cols + q] + row[q], 0.0f);
        }
      }
      ExpectNear(Run(*f, {a, row}, want.size(), {rows}), want, 1e-6f, "C");
    }
  }
}

// Lanes that enter the guard with a stride (the vectorized axis is the
// outer part of a split) run as a guarded serial loop, still correct.
TEST_F(TeDeviceTest, VectorizedStridedLanesFallBackToSerial) {
  for (int n : {1, 7, 10, 12}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    Expr e = ir::IntConst(ir::kI32, n);
    Tensor A = Placeholder("A", {e}, ir::kF32);
    Tensor Y = Compute("Y", {e}, [&](const std::vector<Var>& i) { return A(i[0]) - 0.5; });
    auto s = Schedule::Create({Y});
    ASSERT_TRUE(s.ok());
    Stage y = (*s)[Y];
    auto parts = y.Split(y.axis(0), (n + 2) / 3);
    ASSERT_TRUE(parts.ok());
    ASSERT_TRUE(y.Reorder({parts->inner, parts->outer}).ok());
    ASSERT_TRUE(y.Bind(parts->inner, ThreadAxis::kThreadX).ok());
    if (n > 1) {
      ASSERT_TRUE(y.Vectorize(parts->outer).ok());
    }
    auto f = Lower(*s, {Y}, {A}, "strided");
    ASSERT_TRUE(f.ok()) << f.status();
    auto a = Random(n);
    std::vector<float> want(n);
    for (int i = 0; i < n; ++i) want[i] = a[i] - 0.5f;
    ExpectNear(Run(*f, {a}, n, {}), want, 0, "Y");
  }
}

std::vector<float> MatmulReference(const std::vector<float>& a, const std::vector<float>& b, int m,
                                   int n, int kk) {
  std::vector<float> want(static_cast<size_t>(m) * n);
  for (int r = 0; r < m; ++r) {
    for (int q = 0; q < n; ++q) {
      double acc = 0;
      for (int t = 0; t < kk; ++t) acc += double(a[r * kk + t]) * b[t * n + q];
      want[r * n + q] = static_cast<float>(acc);
    }
  }
  return want;
}

// Shared-memory tiles of A and B loaded cooperatively at each k step, a
// register tile of C per thread: with and without padding the tiles' rows
// and double buffering (its copies through registers) or copying one k
// step ahead, and with each thread's 8 x 8 elements spread over the tile in
// groups of 4 (strided regions), at sizes that leave every tile ragged;
// 11 and 12 double-buffer branch-free; three variants (3, 10 and 12)
// accumulate with fma.
TEST_F(TeDeviceTest, SharedMemoryMatmulFromCacheReadAndComputeAt) {
  testing::MatmulProgram p;
  for (int variant = 0; variant < 17; ++variant) {
    // 5 and 6: 0 and 4 with the tiles copied one k step ahead instead; 7
    // and 8 the same through registers, 9 and 10 branch-free; 11 and 12: 3
    // and 4 with branch-free double buffers; 13 and 14: 9 and 10 with the
    // stores under no branch either, 15 and 16 with the last step peeled
    // (K = 0 and K = 1 leave a loop of no iteration).
    const bool db_free = variant == 11 || variant == 12, ahead = variant >= 5 && !db_free;
    const bool registers = ahead && variant >= 7, branch_free = ahead && variant >= 9;
    const LastCopy last = !branch_free   ? LastCopy::kSkipped
                          : variant < 13 ? LastCopy::kLoadsAgain
                          : variant < 15 ? LastCopy::kStoresAgain
                                         : LastCopy::kPeeled;
    const bool strided = variant >= 4 && variant % 2 == 0;
    const bool align = variant % 2 == 1 || strided;
    const bool twice = ((variant / 2 == 1 || strided) && !ahead) || db_free;
    const bool fma = variant == 3 || variant == 10 || variant == 12;
    {
      testing::SharedMatmulOptions o;
      o.storage_align = align;
      o.double_buffer = twice;
      o.double_buffer_branch_free = db_free;
      o.copy_ahead = ahead;
      o.copy_ahead_registers = registers;
      o.copy_ahead_last = last;
      o.fused_multiply_add = fma;
      if (strided) {
        o.strided = true;
        o.tile = 64;
        o.per_thread = 8;
        o.vector_accumulators = true;  // guarded (symbolic sizes): lanes unrolled
      }
      auto s = testing::ScheduleSharedMatmul(p, o);
      ASSERT_TRUE(s.ok()) << s.status();
      // The padded tiles take more than WebGPU's default 16 KiB once
      // double-buffered: lowered for the device's own limits.
      auto f = Lower(*s, {p.C}, {p.A, p.B}, "shared_matmul", runtime::TargetLimitsOf(*device_));
      ASSERT_TRUE(f.ok()) << f.status();
      // K = 0: no k step, C all zeros (the inputs hold one value that is
      // never read: a binding is never empty).
      for (auto [m, n, kk] :
           {std::tuple{1, 1, 1}, {33, 7, 100}, {64, 64, 64}, {70, 45, 17}, {5, 3, 0}}) {
        SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(kk) +
                     (align ? " aligned" : "") + (twice ? " double-buffered" : "") +
                     (ahead ? " copied ahead" : "") + (registers ? " through registers" : "") +
                     (branch_free ? " " + std::string(LastCopyName(last)) : "") +
                     (strided ? " strided" : "") + (fma ? " fma" : ""));
        auto a = Random(std::max(m * kk, 1)), b = Random(std::max(kk * n, 1));
        ExpectNear(Run(*f, {a, b}, size_t(m) * n, {m, kk, n}), MatmulReference(a, b, m, n, kk),
                   1e-4f, "C");
      }
    }
  }
}

// The register-tiled schedule (A transposed through a shared stage, vector
// fragments in registers, every loop of a thread unrolled) at constant
// sizes its tiles divide, with 128 x 128 tiles of 8 x 8 per thread and
// 64 x 64 tiles of 4 x 4; the kernel's WGSL holds its accumulators in
// separate variables, reads its fragments as vectors and stores C as
// vectors.
TEST_F(TeDeviceTest, RegisterTiledMatmulInTePrimitives) {
  for (auto [tile, per, vectors] :
       {std::tuple<int64_t, int64_t, bool>{128, 8, false}, {64, 4, false}, {128, 8, true}}) {
    for (auto [m, n, kk] : {std::tuple{128, 128, 16}, {256, 128, 48}}) {
      SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(kk) +
                   ", tile " + std::to_string(tile) + (vectors ? ", vector accumulators" : ""));
      testing::TransposedAMatmulProgram p(m, n, kk);
      auto s = testing::ScheduleRegisterTiledMatmul(p, {tile, per, 16, vectors});
      ASSERT_TRUE(s.ok()) << s.status();
      auto f = Lower(*s, {p.C}, {p.A, p.B}, "tiled_matmul");
      ASSERT_TRUE(f.ok()) << f.status();
      auto wgsl = codegen::CompileFunction(*f);
      ASSERT_TRUE(wgsl.ok()) << wgsl.status();
      // Accumulators in registers, four columns to a vector (C is read from
      // them as vectors).
      EXPECT_NE(wgsl->wgsl.find("var C_local_buf_0 : vec4<f32>;"), std::string::npos) << wgsl->wgsl;
      EXPECT_NE(wgsl->wgsl.find("var AT_local_buf_0 : vec4<f32>;"), std::string::npos)
          << wgsl->wgsl;
      EXPECT_NE(wgsl->wgsl.find("var<storage, read> A : array<vec4<f32>>;"), std::string::npos)
          << wgsl->wgsl;
      // C stored as vectors straight from the accumulator registers.
      EXPECT_NE(wgsl->wgsl.find("var<storage, read_write> C : array<vec4<f32>>;"),
                std::string::npos)
          << wgsl->wgsl;
      EXPECT_EQ(wgsl->wgsl.find("C_local_buf["), std::string::npos) << wgsl->wgsl;
      if (vectors) {
        // One vector FMA per four accumulators: a broadcast A element times
        // a B fragment.
        EXPECT_NE(wgsl->wgsl.find("C_local_buf_0 = C_local_buf_0 + vec4<f32>(AT_local_buf_0"),
                  std::string::npos)
            << wgsl->wgsl;
      }
      auto a = Random(m * kk), b = Random(kk * n);
      ExpectNear(Run(*f, {a, b}, size_t(m) * n, {}), MatmulReference(a, b, m, n, kk), 1e-4f, "C");
    }
  }
}

// rfactor, then the reduction bound to threadIdx.x: partial sums per thread
// and a tree in shared memory; widths that are and are not powers of two.
TEST_F(TeDeviceTest, CrossThreadRowSumFromRfactor) {
  testing::RowSumProgram p;
  for (int64_t threads : {64, 48, 1}) {
    auto s = testing::ScheduleRowSumAcrossThreads(p, threads);
    ASSERT_TRUE(s.ok()) << s.status();
    auto f = Lower(*s, {p.Y}, {p.X}, "row_sum");
    ASSERT_TRUE(f.ok()) << f.status();
    for (const Shape2& sh : {Shape2{1, 1}, {7, 33}, {3, 1000}, {5, 47}}) {
      SCOPED_TRACE(std::to_string(threads) + " threads, " + std::to_string(sh.rows) + "x" +
                   std::to_string(sh.cols));
      auto x = Random(sh.rows * sh.cols);
      x[0] = -0.0f;
      ExpectRowSums(Run(*f, {x}, sh.rows, {sh.rows, sh.cols}), x, sh.rows, sh.cols);
    }
  }
}

// Several rows per workgroup: rows over threadIdx.y, the reduction across
// threadIdx.x, one tree per row in a [rows, threads] shared array.
TEST_F(TeDeviceTest, CrossThreadSumsOfSeveralRowsPerWorkgroup) {
  testing::RowSumProgram p;
  auto s = Schedule::Create({p.Y});
  ASSERT_TRUE(s.ok()) << s.status();
  Stage y = (*s)[p.Y];
  auto rows = y.Split(y.axis(0), 4);
  auto kk = y.Split(y.reduce_axis(0), 32);
  ASSERT_TRUE(rows.ok() && kk.ok());
  auto rf = s->Rfactor(p.Y, kk->inner);
  ASSERT_TRUE(rf.ok()) << rf.status();
  ASSERT_TRUE(y.Bind(rows->outer, ThreadAxis::kBlockX).ok());
  ASSERT_TRUE(y.Bind(rows->inner, ThreadAxis::kThreadY).ok());
  ASSERT_TRUE(y.Bind(y.reduce_axis(0), ThreadAxis::kThreadX).ok());
  ASSERT_TRUE((*s)[*rf].ComputeAt(y, y.reduce_axis(0)).ok());
  auto f = Lower(*s, {p.Y}, {p.X}, "rows_sum");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_NE(ir::Print(*f).find("Y_red: f32[4, 32] shared"), std::string::npos) << ir::Print(*f);
  for (const Shape2& sh : {Shape2{1, 1}, {7, 33}, {9, 100}, {4, 32}}) {
    SCOPED_TRACE(std::to_string(sh.rows) + "x" + std::to_string(sh.cols));
    auto x = Random(sh.rows * sh.cols);
    ExpectRowSums(Run(*f, {x}, sh.rows, {sh.rows, sh.cols}), x, sh.rows, sh.cols);
  }
}

// A chain of two shared stages computed at a serial loop, each step's
// values copied one step ahead (double buffering): neither, the last, or
// both double-buffered, at sizes the steps do and do not divide.
TEST_F(TeDeviceTest, PipelinedChainOfSharedStages) {
  for (int buffered : {0, 1, 2}) {
    testing::SharedChainProgram p(SizeVar("n"));
    auto s = testing::ScheduleSharedChain(p, /*spread=*/true);
    ASSERT_TRUE(s.ok()) << s.status();
    // P double-buffered and Q not is allowed (only a double-buffered reader
    // of a single-buffered stage at its loop is an error).
    if (buffered >= 1) {
      ASSERT_TRUE((*s)[p.P].DoubleBuffer().ok());
    }
    if (buffered >= 2) {
      ASSERT_TRUE((*s)[p.Q].DoubleBuffer().ok());
    }
    auto f = Lower(*s, {p.C}, {p.A}, "chain");
    ASSERT_TRUE(f.ok()) << f.status();
    for (int size : {1, 7, 64, 100, 1000}) {
      SCOPED_TRACE(std::to_string(buffered) + " double-buffered, n = " + std::to_string(size));
      auto a = Random(size);
      std::vector<float> want(size);
      for (int i = 0; i < size; ++i) want[i] = (2 * a[i] + 1) * 3;
      ExpectNear(Run(*f, {a}, want.size(), {size}), want, 1e-5f, "C");
    }
  }
}

// A producer computed per tile in shared memory, over the tile and its halo
// (bounds inference), read three times by each thread.
TEST_F(TeDeviceTest, StencilProducerComputedAtTheBlock) {
  testing::StencilProgram p;
  for (int64_t tile : {64, 7}) {
    auto s = testing::ScheduleStencil(p, tile);
    ASSERT_TRUE(s.ok()) << s.status();
    auto f = Lower(*s, {p.C}, {p.A}, "stencil");
    ASSERT_TRUE(f.ok()) << f.status();
    for (int n : {1, 7, 64, 65, 1000}) {
      SCOPED_TRACE("tile " + std::to_string(tile) + ", n " + std::to_string(n));
      auto a = Random(n + 2);
      std::vector<float> want(n);
      for (int i = 0; i < n; ++i) want[i] = 2 * a[i] + 2 * a[i + 1] + 2 * a[i + 2];
      ExpectNear(Run(*f, {a}, want.size(), {n}), want, 1e-6f, "C");
    }
  }
}

// A tuple reducer: argmax over (index, value), the first index of the
// largest value; rows with ties and with infinities. Reduced by one thread
// per row, and by 64 threads per row combining (index, value) pairs in
// shared memory or, where the device has subgroups, through shuffles.
TEST_F(TeDeviceTest, ArgmaxWithATupleReducer) {
  const bool has_subgroups = device_->HasFeature(hal::Feature::kSubgroups);
  for (const int mode : {0, 1, 2}) {
    const bool across = mode > 0, subgroups = mode == 2;
    if (subgroups && !has_subgroups) {
      std::printf("[ INFO     ] %s does not offer subgroups: no shuffled argmax\n",
                  device_->Describe().c_str());
      continue;
    }
    SCOPED_TRACE(subgroups ? "through subgroups" : across ? "across threads" : "a thread per row");
    testing::ArgmaxProgram p;
    auto s = Schedule::Create({p.Y});
    ASSERT_TRUE(s.ok()) << s.status();
    Stage y = (*s)[p.Y];
    if (across) {
      auto k = y.Split(y.reduce_axis(0), 64);
      ASSERT_TRUE(k.ok());
      ASSERT_TRUE(y.Bind(y.axis(0), ThreadAxis::kBlockX).ok());
      ASSERT_TRUE(y.Bind(k->inner, ThreadAxis::kThreadX).ok());
      if (subgroups) {
        ASSERT_TRUE(y.SubgroupReduce().ok());
      }
    } else {
      auto r = y.Split(y.axis(0), 32);
      ASSERT_TRUE(r.ok());
      ASSERT_TRUE(y.Bind(r->outer, ThreadAxis::kBlockX).ok());
      ASSERT_TRUE(y.Bind(r->inner, ThreadAxis::kThreadX).ok());
    }
    auto f = Lower(*s, {p.Y}, {p.X}, "argmax");
    ASSERT_TRUE(f.ok()) << f.status();
    for (const Shape2& sh : {Shape2{1, 1}, {7, 33}, {33, 100}, {100, 7}, {3, 1000}}) {
      SCOPED_TRACE(std::to_string(sh.rows) + "x" + std::to_string(sh.cols));
      auto x = Random(sh.rows * sh.cols);
      if (sh.cols > 3) {
        x[1] = x[3] = 5.0f;                              // a tie: index 1 wins
        x[sh.cols] = INFINITY;                           // row 1 (if any)
        x[sh.cols * (sh.rows > 2 ? 2 : 0) + 2] = -0.0f;  // no effect on the order
      }
      if (sh.cols > 900) x[sh.cols * 2 + 900] = x[sh.cols * 2 + 901] = 7.0f;  // a late tie
      std::vector<float> want(sh.rows);
      for (int row = 0; row < sh.rows; ++row) {
        int best = -1;
        float value = -INFINITY;
        for (int q = 0; q < sh.cols; ++q) {
          if (best < 0 || x[row * sh.cols + q] > value) {
            value = x[row * sh.cols + q];
            best = q;
          }
        }
        want[row] = static_cast<float>(best);
      }
      std::vector<float> got = Run(*f, {x}, want.size(), {sh.rows, sh.cols});
      // The output is i32: read its words as integers.
      std::vector<float> as_index(got.size());
      for (size_t i = 0; i < got.size(); ++i) {
        int32_t v;
        std::memcpy(&v, &got[i], 4);
        as_index[i] = static_cast<float>(v);
      }
      ExpectNear(as_index, want, 0, "Y");
    }
  }
}

// Y[row] = the `kind` reduction (sum, max or min) of X[row, :] (`dtype`), a
// row per workgroup across `threads` threads, combined through subgroups
// or the shared tree.
StatusOr<ir::Function> LowerRowReduction(ReducerKind kind, ir::DataType dtype, int64_t threads,
                                         bool subgroups) {
  Var rows = SizeVar("rows"), cols = SizeVar("cols");
  Tensor X = Placeholder("X", {rows, cols}, dtype);
  IterVar k = ReduceAxis(cols, "k");
  Tensor Y = Compute("Y", {rows}, [&](const std::vector<Var>& i) {
    const Expr x = X(i[0], k);
    switch (kind) {
      case ReducerKind::kSum:
        return Sum(x, {k});
      case ReducerKind::kMax:
        return Max(x, {k});
      case ReducerKind::kDeviceMax:
        return DeviceMax(x, {k});
      case ReducerKind::kDeviceMin:
        return DeviceMin(x, {k});
      default:
        return Min(x, {k});
    }
  });
  KILN_ASSIGN_OR_RETURN(Schedule s, Schedule::Create({Y}));
  Stage y = s[Y];
  KILN_ASSIGN_OR_RETURN(SplitResult kk, y.Split(y.reduce_axis(0), threads));
  KILN_RETURN_IF_ERROR(y.Bind(y.axis(0), ThreadAxis::kBlockX));
  KILN_RETURN_IF_ERROR(y.Bind(kk.inner, ThreadAxis::kThreadX));
  if (subgroups) KILN_RETURN_IF_ERROR(y.SubgroupReduce());
  return Lower(s, {Y}, {X}, "rows");
}

// i32 row sums and minima (at the type's limits) across 64 threads, through
// subgroups where the device has them and through the tree: integer
// subgroup operations, exact results.
TEST_F(TeDeviceTest, IntegerCrossThreadReductions) {
  const bool has_subgroups = device_->HasFeature(hal::Feature::kSubgroups);
  for (const ReducerKind kind : {ReducerKind::kSum, ReducerKind::kMin}) {
    for (const bool subgroups : {false, true}) {
      if (subgroups && !has_subgroups) continue;
      SCOPED_TRACE(std::string(ReducerName(kind)) + (subgroups ? " through subgroups" : " tree"));
      auto f = LowerRowReduction(kind, ir::kI32, 64, subgroups);
      ASSERT_TRUE(f.ok()) << f.status();
      for (const Shape2& sh : {Shape2{1, 1}, {3, 7}, {4, 1000}}) {
        SCOPED_TRACE(std::to_string(sh.rows) + "x" + std::to_string(sh.cols));
        std::vector<int32_t> x(sh.rows * sh.cols);
        std::mt19937 rng(::testing::UnitTest::GetInstance()->random_seed() + 41);
        std::uniform_int_distribution<int32_t> dist(-1000, 1000);
        for (int32_t& v : x) v = dist(rng);
        // Row 1 holds the lowest i32 (min's answer; sums stay in range).
        if (sh.rows > 1 && kind == ReducerKind::kMin) x[sh.cols + sh.cols - 1] = INT32_MIN;
        std::vector<float> words(x.size()), want(sh.rows);
        std::memcpy(words.data(), x.data(), x.size() * 4);
        for (int row = 0; row < sh.rows; ++row) {
          int64_t acc = kind == ReducerKind::kSum ? 0 : INT32_MAX;
          for (int q = 0; q < sh.cols; ++q) {
            const int32_t v = x[row * sh.cols + q];
            acc = kind == ReducerKind::kSum ? acc + v : std::min<int64_t>(acc, v);
          }
          const int32_t w = static_cast<int32_t>(acc);
          std::memcpy(&want[row], &w, 4);
        }
        std::vector<float> got = Run(*f, {words}, want.size(), {sh.rows, sh.cols});
        ASSERT_EQ(got.size(), want.size());
        for (int row = 0; row < sh.rows; ++row) {
          int32_t g, w;
          std::memcpy(&g, &got[row], 4);
          std::memcpy(&w, &want[row], 4);
          EXPECT_EQ(g, w) << "row " << row;
        }
      }
    }
  }
}

// Row sums, maxima and minima across 128 threads combined through
// subgroups (where the device has them) and through the shared tree: NaN
// propagates through max and min either way; device_max and device_min give
// for a row holding NaN either NaN or one of its other values, and the exact
// extremum elsewhere; rows shorter than the workgroup leave threads with
// nothing but the identity.
TEST_F(TeDeviceTest, CrossThreadReductionsThroughSubgroups) {
  const bool has_subgroups = device_->HasFeature(hal::Feature::kSubgroups);
  if (!has_subgroups) {
    std::printf("[ INFO     ] %s does not offer subgroups: only the shared tree runs\n",
                device_->Describe().c_str());
  }
  for (const ReducerKind kind : {ReducerKind::kSum, ReducerKind::kMax, ReducerKind::kMin,
                                 ReducerKind::kDeviceMax, ReducerKind::kDeviceMin}) {
    const bool device = kind == ReducerKind::kDeviceMax || kind == ReducerKind::kDeviceMin;
    const bool is_max = kind == ReducerKind::kMax || kind == ReducerKind::kDeviceMax;
    for (const bool subgroups : {false, true}) {
      if (subgroups && !has_subgroups) continue;
      SCOPED_TRACE(std::string(ReducerName(kind)) + (subgroups ? " through subgroups" : " tree"));
      auto f = LowerRowReduction(kind, ir::kF32, 128, subgroups);
      ASSERT_TRUE(f.ok()) << f.status();
      const std::string printed = ir::Print(*f);
      EXPECT_EQ(printed.find(kind == ReducerKind::kSum ? "subgroup_add" : "subgroup_m") !=
                    std::string::npos,
                subgroups)
          << printed;
      // Only the NaN-propagating reducers test for NaN.
      EXPECT_EQ(printed.find("!=") != std::string::npos,
                kind == ReducerKind::kMax || kind == ReducerKind::kMin)
          << printed;
      for (const Shape2& sh : {Shape2{1, 1}, {3, 7}, {5, 128}, {4, 1000}, {2, 4097}}) {
        SCOPED_TRACE(std::to_string(sh.rows) + "x" + std::to_string(sh.cols));
        auto x = Random(sh.rows * sh.cols);
        // Row 1: a NaN late in the row; row 2: -0.0 and an infinity.
        if (sh.rows > 1) x[sh.cols + sh.cols - 1] = NAN;
        if (sh.rows > 2) {
          x[2 * sh.cols] = -0.0f;
          x[2 * sh.cols + sh.cols / 2] = is_max ? INFINITY : -INFINITY;
        }
        std::vector<float> want(sh.rows);
        for (int row = 0; row < sh.rows; ++row) {
          double acc = kind == ReducerKind::kSum ? 0.0 : x[row * sh.cols];
          for (int q = 0; q < sh.cols; ++q) {
            const float v = x[row * sh.cols + q];
            if (kind == ReducerKind::kSum) {
              acc += v;
            } else if (std::isnan(v) || std::isnan(acc)) {
              acc = NAN;
            } else {
              acc = is_max ? std::max<double>(acc, v) : std::min<double>(acc, v);
            }
          }
          want[row] = static_cast<float>(acc);
        }
        std::vector<float> got = Run(*f, {x}, want.size(), {sh.rows, sh.cols});
        for (int row = 0; row < sh.rows; ++row) {
          const auto first = x.begin() + row * sh.cols;
          if (device && std::isnan(want[row])) {
            // NaN, or a value of the row's own.
            EXPECT_TRUE(std::isnan(got[row]) ||
                        std::find(first, first + sh.cols, got[row]) != first + sh.cols)
                << "row " << row << ": " << got[row];
          } else if (device) {
            // The extremum is one of the row's values: exact, bit for bit
            // (a -0.0 and a 0.0 compare equal, and either may be the answer).
            EXPECT_EQ(got[row], want[row]) << "row " << row;
          } else if (std::isnan(want[row]) || std::isinf(want[row])) {
            EXPECT_EQ(std::isnan(got[row]), std::isnan(want[row])) << "row " << row;
            if (std::isinf(want[row])) {
              EXPECT_EQ(got[row], want[row]) << "row " << row;
            }
          } else {
            EXPECT_NEAR(got[row], want[row], 1e-4f * (1 + sh.cols)) << "row " << row;
          }
        }
      }
    }
  }
}

// Three kernels from one program (LowerKernels): a numerically stable
// softmax whose row max and row sum are intermediates in global memory, each
// reduction across the threads of a workgroup.
TEST_F(TeDeviceTest, SoftmaxAsThreeKernels) {
  for (const Shape2& sh : {Shape2{1, 1}, {7, 33}, {5, 1000}}) {
    SCOPED_TRACE(std::to_string(sh.rows) + "x" + std::to_string(sh.cols));
    Tensor X = Placeholder("X", {sh.rows, sh.cols}, ir::kF32);
    IterVar k = ReduceAxis(sh.cols, "k"), k2 = ReduceAxis(sh.cols, "k2");
    Tensor M = Compute("M", {sh.rows},
                       [&](const std::vector<Var>& i) { return te::Max(X(i[0], k), {k}); });
    Tensor S = Compute("S", {sh.rows}, [&](const std::vector<Var>& i) {
      return Sum(ir::Call(ir::Intrinsic::kExp, {X(i[0], k2) - M(i[0])}), {k2});
    });
    Tensor Y = Compute("Y", {sh.rows, sh.cols}, [&](const std::vector<Var>& i) {
      return ir::Call(ir::Intrinsic::kExp, {X(i[0], i[1]) - M(i[0])}) / S(i[0]);
    });
    auto s = Schedule::Create({Y});
    ASSERT_TRUE(s.ok()) << s.status();
    for (const Tensor& t : {M, S}) {
      Stage st = (*s)[t];
      auto kk = st.Split(st.reduce_axis(0), 64);
      ASSERT_TRUE(kk.ok());
      auto rf = s->Rfactor(t, kk->inner);
      ASSERT_TRUE(rf.ok()) << rf.status();
      ASSERT_TRUE(st.Bind(st.axis(0), ThreadAxis::kBlockX).ok());
      ASSERT_TRUE(st.Bind(st.reduce_axis(0), ThreadAxis::kThreadX).ok());
      ASSERT_TRUE((*s)[*rf].ComputeAt(st, st.reduce_axis(0)).ok());
    }
    Stage y = (*s)[Y];
    auto j = y.Split(y.axis(1), 64);
    ASSERT_TRUE(j.ok());
    // Rows over blockIdx.y and column tiles over blockIdx.x: each kernel
    // has launch axes of its own.
    ASSERT_TRUE(y.Bind(y.axis(0), ThreadAxis::kBlockY).ok());
    ASSERT_TRUE(y.Bind(j->outer, ThreadAxis::kBlockX).ok());
    ASSERT_TRUE(y.Bind(j->inner, ThreadAxis::kThreadX).ok());
    auto kernels = LowerKernels(*s, {Y}, {X}, "softmax");
    ASSERT_TRUE(kernels.ok()) << kernels.status();
    ASSERT_EQ(kernels->functions.size(), 3u);
    ASSERT_EQ(kernels->intermediates.size(), 2u);
    EXPECT_EQ(kernels->functions[0].name(), "softmax_M");
    EXPECT_EQ(kernels->functions[2].name(), "softmax_Y");

    auto x = Random(sh.rows * sh.cols);
    // Each kernel runs (and is checked against the interpreter) on the
    // previous kernels' results.
    std::vector<float> m = Run(kernels->functions[0], {x}, sh.rows, {});
    std::vector<float> sum = Run(kernels->functions[1], {x, m}, sh.rows, {});
    std::vector<float> got = Run(kernels->functions[2], {x, m, sum}, x.size(), {});
    std::vector<float> want(x.size());
    for (int r = 0; r < sh.rows; ++r) {
      double mx = -INFINITY, total = 0;
      for (int q = 0; q < sh.cols; ++q) mx = std::max<double>(mx, x[r * sh.cols + q]);
      for (int q = 0; q < sh.cols; ++q) total += std::exp(x[r * sh.cols + q] - mx);
      for (int q = 0; q < sh.cols; ++q) {
        want[r * sh.cols + q] = static_cast<float>(std::exp(x[r * sh.cols + q] - mx) / total);
      }
    }
    ExpectNear(got, want, 1e-5f, "Y");
  }
}

// Random schedules (te_random_schedules.h) on the device: every kernel of
// the first 60 cases that lower runs on fresh random inputs, its outputs
// poisoned (f16 ones where the device has shader-f16), against the interpreter running the same IR.
// kiln_te_fuzz_test checks that IR against the unscheduled program; this checks what the device
// makes of it (barriers, shared memory, launch shapes, vectors).
TEST_F(TeDeviceTest, RandomSchedulesMatchTheInterpreter) {
  const bool has_subgroups = device_->HasFeature(hal::Feature::kSubgroups);
  const bool has_f16 = device_->HasFeature(hal::Feature::kShaderF16);
  int checked = 0, without_subgroups = 0, without_f16 = 0;
  for (uint64_t c = 1; checked < 60 && c < 1000; ++c) {
    const testing::FuzzProgram p =
        testing::MakeFuzzProgram(static_cast<int>(c % testing::kFuzzPrograms));
    auto s = testing::DrawSchedule(p, c);
    ASSERT_TRUE(s.ok()) << s.status();
    auto kernels = LowerKernels(*s, p.outputs, p.inputs, "fuzz");
    if (!kernels.ok()) continue;  // kiln_te_fuzz_test checks the errors
    const auto& prims = s->primitives();
    if (!has_subgroups && std::any_of(prims.begin(), prims.end(), [](const Primitive& prim) {
          return prim.kind == Primitive::Kind::kSubgroupReduce;
        })) {
      ++without_subgroups;
      continue;
    }
    if (!has_f16 && std::any_of(p.inputs.begin(), p.inputs.end(),
                                [](const Tensor& t) { return t.dtype() == ir::kF16; })) {
      ++without_f16;
      continue;
    }
    SCOPED_TRACE(p.name + ", case " + std::to_string(c) + ", schedule:\n" + s->ToString());
    auto compiled =
        codegen::CompileModule(ir::Module{kernels->functions}, check::CompileOptionsFor(*device_));
    if (!compiled.ok()) {
      ASSERT_EQ(compiled.status().code(), StatusCode::kInvalidArgument) << compiled.status();
      continue;
    }
    auto loaded = runtime::LoadedModule::Load(device_, *compiled);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    for (const ir::Function& f : kernels->functions) {
      SCOPED_TRACE(ir::Print(f));
      auto kernel = (*loaded)->Find(f.name());
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      check::CheckOptions options;
      for (const ir::Param& param : f.params()) {
        if (param.is_scalar())
          options.scalar_args[param.name()] = std::to_string(p.sizes.at(param.name()));
      }
      auto result = check::RunAndCheck(**kernel, f, options);
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_TRUE(result->pass) << "seed " << result->seed << "\n" << result->Summary();
    }
    ++checked;
  }
  std::printf("[ INFO     ] %d random schedules checked on %s", checked,
              device_->Describe().c_str());
  if (without_subgroups > 0) {
    std::printf(" (%d more need subgroups, which it lacks)", without_subgroups);
  }
  if (without_f16 > 0) std::printf(" (%d more need shader-f16, which it lacks)", without_f16);
  std::printf("\n");
  EXPECT_EQ(checked, 60);
}

}  // namespace
}  // namespace kiln::te
