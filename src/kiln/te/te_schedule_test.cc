// The staging primitives on the CPU: what they lower to, their records and
// replay, and their errors.
#include <gtest/gtest.h>

#include <thread>

#include "kiln/codegen/wgsl_codegen.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/simplifier.h"
#include "kiln/te/bounds.h"
#include "kiln/te/te.h"
#include "kiln/te/te_random_schedules.h"
#include "kiln/te/te_test_kernels.h"

namespace kiln::te {
namespace {

using testing::MatmulProgram;

::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << part << "\" not in:\n" << text;
}

// How many times `part` occurs in `text`.
size_t Occurrences(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

void ExpectError(const Status& st, const std::string& text) {
  EXPECT_FALSE(st.ok()) << text;
  EXPECT_TRUE(Contains(st.message(), text)) << st;
}

// The shared-memory matmul under `o`, lowered and printed.
StatusOr<std::string> LowerSharedMatmul(const testing::SharedMatmulOptions& o) {
  MatmulProgram p;
  KILN_ASSIGN_OR_RETURN(Schedule s, testing::ScheduleSharedMatmul(p, o));
  KILN_ASSIGN_OR_RETURN(ir::Function f, Lower(s, {p.C}, {p.A, p.B}, "mm"));
  return ir::Print(f);
}

TEST(TeScheduleTest, SharedMatmulStagesTilesAndAccumulatesInRegisters) {
  MatmulProgram p;
  auto s = testing::ScheduleSharedMatmul(p);
  ASSERT_TRUE(s.ok()) << s.status();
  auto f = Lower(*s, {p.C}, {p.A, p.B}, "mm");
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string ir = ir::Print(*f);
  // Bounds inference: a 32 x 8 tile of A and an 8 x 32 tile of B per k
  // step, rows padded to 33; a 4 x 4 register tile of C per thread.
  EXPECT_TRUE(Contains(ir, "alloc A_shared_buf: f32[32, 8] strides [33, 1] shared"));
  EXPECT_TRUE(Contains(ir, "alloc B_shared_buf: f32[8, 32] strides [33, 1] shared"));
  EXPECT_TRUE(Contains(ir, "alloc C_local_buf: f32[4, 4] local"));
  // The copies into shared memory run on the consumer's threads, between
  // barriers; the tile is read relative to its origin, the reduction axis
  // `k = k_outer * 8 + k_inner` expanded so the origin cancels to `k_inner`
  // (a constant once that loop is unrolled).
  EXPECT_TRUE(Contains(ir, "A_shared_buf[i_1, j_1] = A[i_outer * 32 + i_1, k_outer * 8 + j_1]"));
  EXPECT_TRUE(Contains(ir,
                       "A_shared_buf[i_inner_outer * 4 + i_3, k_inner] * "
                       "B_shared_buf[k_inner, j_inner_outer * 4 + j_3]"))
      << ir;
  // The tiles of A and B are independent: one barrier before both copies,
  // one after.
  EXPECT_TRUE(Contains(ir, "workgroup_barrier()\n                  for i_j_fused_outer")) << ir;
  EXPECT_EQ(ir.find("threadIdx.x", ir.find("threadIdx.x") + 1), std::string::npos)
      << "one thread loop per axis:\n"
      << ir;
  auto compiled = codegen::CompileFunction(*f);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  EXPECT_TRUE(Contains(compiled->wgsl, "workgroupBarrier();"));
}

// copy_ahead: the copies into shared memory for the first k step run before
// the loop (where it runs at all), the next step's after each step's math,
// between the same two barriers.
TEST(TeScheduleTest, CopyAheadCopiesTheNextStepAfterTheMath) {
  testing::SharedMatmulOptions o;
  o.copy_ahead = true;
  MatmulProgram p;
  auto s = testing::ScheduleSharedMatmul(p, o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(Contains(s->ToString(), "A_shared.copy_ahead()\n")) << s->ToString();
  auto f = Lower(*s, {p.C}, {p.A, p.B}, "mm");
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string ir = ir::Print(*f);
  EXPECT_TRUE(Contains(ir, "if (0 < (K + 7) / 8) {\n                  for i_j_fused_outer in"))
      << ir;
  EXPECT_TRUE(Contains(ir, "A_shared_buf[i_1, j_1] = A[i_outer * 32 + i_1, j_1]")) << ir;
  EXPECT_TRUE(
      Contains(ir, "A_shared_buf[i_4, j_4] = A[i_outer * 32 + i_4, (k_outer + 1) * 8 + j_4]"))
      << ir;
  // The buffers live around the loop; one barrier after the first copies,
  // and in each step one after the math and one after the next copies.
  EXPECT_TRUE(Contains(ir,
                       "alloc A_shared_buf: f32[32, 8] strides [33, 1] shared {\n"
                       "              alloc B_shared_buf: f32[8, 32] strides [33, 1] shared {\n"
                       "                if (0 < (K + 7) / 8)"))
      << ir;
  EXPECT_TRUE(
      Contains(ir, "}\n                workgroup_barrier()\n                for k_outer in"))
      << ir;
  EXPECT_TRUE(Contains(ir,
                       "  workgroup_barrier()\n                  if (k_outer + 1 < (K + 7) / 8) {\n"
                       "                    for i_j_fused_outer_2 in"))
      << ir;
  EXPECT_EQ(Occurrences(ir, "workgroup_barrier()"), 3u) << ir;
  // The math reads the tiles as without copy_ahead.
  EXPECT_TRUE(Contains(ir,
                       "A_shared_buf[i_inner_outer * 4 + i_3, k_inner] * "
                       "B_shared_buf[k_inner, j_inner_outer * 4 + j_3]"))
      << ir;
}

// copy_ahead(registers): the next step's loads into registers before the
// math, their stores into the tiles after it, between the same barriers.
TEST(TeScheduleTest, CopyAheadThroughRegistersLoadsBeforeTheMath) {
  testing::SharedMatmulOptions o;
  o.copy_ahead = true;
  o.copy_ahead_registers = true;
  MatmulProgram p;
  auto s = testing::ScheduleSharedMatmul(p, o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(Contains(s->ToString(), "A_shared.copy_ahead(registers)\n")) << s->ToString();
  // A schedule is data: the record replays, and differs from copy_ahead().
  auto again = Schedule::Create({p.C});
  ASSERT_TRUE(again.ok());
  for (const Primitive& r : s->primitives()) ASSERT_TRUE(again->Apply(r).ok()) << r.ToString();
  EXPECT_EQ(again->ToString(), s->ToString());
  o.copy_ahead_registers = false;
  auto direct = testing::ScheduleSharedMatmul(p, o);
  ASSERT_TRUE(direct.ok());
  EXPECT_NE(direct->ToString(), s->ToString());
  Primitive bad{Primitive::Kind::kCopyAhead, "A_shared"};
  bad.scope = "local";
  ExpectError(again->Apply(bad),
              "copy_ahead copies directly or through \"registers\", not 'local'");

  auto f = Lower(*s, {p.C}, {p.A, p.B}, "mm");
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string ir = ir::Print(*f);
  const size_t load = ir.find("A_shared_buf_staged[");
  const size_t math = ir.find("C_local_buf[i_5, j_5] + A_shared_buf[");
  const size_t store = ir.find("= A_shared_buf_staged[");
  ASSERT_NE(load, std::string::npos) << ir;
  ASSERT_NE(math, std::string::npos) << ir;
  ASSERT_NE(store, std::string::npos) << ir;
  EXPECT_LT(load, math) << ir;
  EXPECT_LT(math, store) << ir;
  EXPECT_EQ(Occurrences(ir, "workgroup_barrier()"), 3u) << ir;
  auto compiled = codegen::CompileFunction(*f);
  ASSERT_TRUE(compiled.ok()) << compiled.status();

  // Branch-free: the loads are not under the loop's `k_outer + 1 <` branch
  // (only the stores are), and the last step loads its own tile again.
  o.copy_ahead_registers = true;
  o.copy_ahead_last = LastCopy::kLoadsAgain;
  auto free = testing::ScheduleSharedMatmul(p, o);
  ASSERT_TRUE(free.ok()) << free.status();
  EXPECT_TRUE(Contains(free->ToString(), "A_shared.copy_ahead(registers, branch_free)\n"));
  auto g = Lower(*free, {p.C}, {p.A, p.B}, "mm");
  ASSERT_TRUE(g.ok()) << g.status();
  const std::string branch_free = ir::Print(*g);
  EXPECT_TRUE(Contains(branch_free, "A[i_outer * 32 + i_3, min(k_outer + 1, (K + 7) / 8 - 1) * 8"))
      << branch_free;
  EXPECT_EQ(Occurrences(branch_free, "if (k_outer + 1 < (K + 7) / 8)"), 1u) << branch_free;
  EXPECT_EQ(Occurrences(ir, "if (k_outer + 1 < (K + 7) / 8)"), 2u) << ir;
  Primitive not_registers{Primitive::Kind::kCopyAhead, "A_shared"};
  not_registers.factor = 1;
  const std::string before = again->ToString();
  ExpectError(again->Apply(not_registers), "copy_ahead is branch_free only through registers");
  not_registers.factor = 4;
  ExpectError(again->Apply(not_registers), "copy_ahead's factor is a LastCopy (0 to 3), not 4");
  EXPECT_EQ(again->ToString(), before);  // a refused primitive changes nothing
}

// copy_ahead(registers, no_branch): neither the loads nor the stores sit
// under a branch (the last step loads and stores its own tile again);
// copy_ahead(registers, peeled): the loop runs one step fewer with the next
// step's index unclamped and no branch, and the last step's math follows
// it under `0 < extent` (K is symbolic). Both records replay.
TEST(TeScheduleTest, CopyAheadWithoutBranchOrWithTheLastStepPeeled) {
  testing::MatmulProgram p;
  testing::SharedMatmulOptions o;
  o.copy_ahead = true;
  o.copy_ahead_registers = true;
  o.copy_ahead_last = LastCopy::kStoresAgain;
  auto free = testing::ScheduleSharedMatmul(p, o);
  ASSERT_TRUE(free.ok()) << free.status();
  EXPECT_TRUE(Contains(free->ToString(), "A_shared.copy_ahead(registers, no_branch)\n"));
  auto f = Lower(*free, {p.C}, {p.A, p.B}, "mm");
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string no_branch = ir::Print(*f);
  EXPECT_TRUE(Contains(no_branch, "min(k_outer + 1, (K + 7) / 8 - 1) * 8")) << no_branch;
  EXPECT_EQ(Occurrences(no_branch, "if (k_outer + 1 < (K + 7) / 8)"), 0u) << no_branch;
  EXPECT_EQ(Occurrences(no_branch, "for k_outer in serial(0, (K + 7) / 8)"), 1u) << no_branch;

  o.copy_ahead_last = LastCopy::kPeeled;
  auto peeled = testing::ScheduleSharedMatmul(p, o);
  ASSERT_TRUE(peeled.ok()) << peeled.status();
  EXPECT_TRUE(Contains(peeled->ToString(), "A_shared.copy_ahead(registers, peeled)\n"));
  auto replay = Schedule::Create({p.C});
  ASSERT_TRUE(replay.ok()) << replay.status();
  for (const Primitive& prim : peeled->primitives()) ASSERT_TRUE(replay->Apply(prim).ok());
  EXPECT_EQ(replay->ToString(), peeled->ToString());
  EXPECT_NE(replay->ToString(), free->ToString());
  auto g = Lower(*peeled, {p.C}, {p.A, p.B}, "mm");
  ASSERT_TRUE(g.ok()) << g.status();
  const std::string ir = ir::Print(*g);
  EXPECT_EQ(Occurrences(ir, "min(k_outer + 1"), 0u) << ir;
  EXPECT_EQ(Occurrences(ir, "if (k_outer + 1 < (K + 7) / 8)"), 0u) << ir;
  EXPECT_EQ(Occurrences(ir, "for k_outer in serial(0, (K + 7) / 8 - 1)"), 1u) << ir;
  EXPECT_TRUE(Contains(ir, "if (0 < (K + 7) / 8)")) << ir;
  EXPECT_TRUE(codegen::CompileFunction(*g).ok());
  // The names records print read back; the empty one and others do not.
  for (LastCopy l : {LastCopy::kLoadsAgain, LastCopy::kStoresAgain, LastCopy::kPeeled}) {
    auto parsed = LastCopyFromName(LastCopyName(l));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, l);
  }
  ExpectError(LastCopyFromName("").status(), "last is 'branch_free', 'no_branch' or 'peeled'");
  ExpectError(LastCopyFromName("Peeled").status(), "not 'Peeled'");
}

// fused_multiply_add: the accumulators' update is one fma per element; the
// record replays; the stage must be a float sum of products (and rfactor
// then refuses it); a refused primitive changes nothing.
TEST(TeScheduleTest, FusedMultiplyAddAccumulatesWithFma) {
  testing::SharedMatmulOptions o;
  o.fused_multiply_add = true;
  MatmulProgram p;
  auto s = testing::ScheduleSharedMatmul(p, o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(Contains(s->ToString(), "C_local.fused_multiply_add()\n")) << s->ToString();
  auto again = Schedule::Create({p.C});
  ASSERT_TRUE(again.ok());
  for (const Primitive& r : s->primitives()) ASSERT_TRUE(again->Apply(r).ok()) << r.ToString();
  EXPECT_EQ(again->ToString(), s->ToString());
  auto f = Lower(*s, {p.C}, {p.A, p.B}, "mm");
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string ir = ir::Print(*f);
  EXPECT_TRUE(Contains(ir,
                       "C_local_buf[i_3, j_3] = fma(A_shared_buf[i_inner_outer * 4 + i_3, "
                       "k_inner], B_shared_buf[k_inner, j_inner_outer * 4 + j_3], "
                       "C_local_buf[i_3, j_3])"))
      << ir;
  EXPECT_EQ(ir.find(" + A_shared_buf["), std::string::npos) << ir;
  auto compiled = codegen::CompileFunction(*f);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  EXPECT_TRUE(Contains(compiled->wgsl, "fma("));

  Var n = SizeVar("n");
  Tensor X = Placeholder("X", {n, n}, ir::kF32);
  Tensor I = Placeholder("I", {n, n}, ir::kI32);
  IterVar k = ReduceAxis(n, "k");
  Tensor M = Compute("M", {n},
                     [&](const std::vector<Var>& i) { return Max(X(i[0], k) * X(i[0], k), {k}); });
  Tensor S = Compute("S", {n}, [&](const std::vector<Var>& i) { return Sum(X(i[0], k), {k}); });
  Tensor Q = Compute("Q", {n},
                     [&](const std::vector<Var>& i) { return Sum(I(i[0], k) * I(i[0], k), {k}); });
  auto bad = Schedule::Create({M, S, Q});
  ASSERT_TRUE(bad.ok()) << bad.status();
  const std::string before = bad->ToString();
  ExpectError((*bad)[M].FusedMultiplyAdd(),
              "fused_multiply_add of stage 'M': the stage is not a sum (fused_multiply_add "
              "needs a float sum of products)");
  ExpectError((*bad)[S].FusedMultiplyAdd(), "the stage sums something other than a product");
  ExpectError((*bad)[Q].FusedMultiplyAdd(), "the stage sums integers");
  Primitive with_axis{Primitive::Kind::kFusedMultiplyAdd, "S", {"k"}};
  ExpectError(bad->Apply(with_axis), "fused_multiply_add takes no axis");
  EXPECT_EQ(bad->ToString(), before);
  // A tensor of another program named like a stage is not that stage.
  Tensor other_m = Compute("M", {n}, [&](const std::vector<Var>& i) { return X(i[0], 0); });
  ExpectError(bad->FindStage(other_m).status(),
              "tensor 'M' is not a stage of this schedule: its stage of that name computes "
              "another tensor");
  ExpectError(bad->FindStage(X).status(), "tensor 'X' is not a compute stage of this schedule");
  ASSERT_TRUE(bad->FindStage(M).ok());

  // rfactor would move the products to a new stage: refused after
  // fused_multiply_add; the other order puts the fma in the new stage.
  Tensor D = Compute("D", {n},
                     [&](const std::vector<Var>& i) { return Sum(X(i[0], k) * X(k, i[0]), {k}); });
  auto order = Schedule::Create({D});
  ASSERT_TRUE(order.ok()) << order.status();
  Stage d = (*order)[D];
  auto kk = d.Split(d.reduce_axis(0), 4);
  ASSERT_TRUE(kk.ok()) << kk.status();
  ASSERT_TRUE(d.FusedMultiplyAdd().ok());
  const std::string with_fma = order->ToString();
  ExpectError(order->Rfactor(D, kk->inner).status(),
              "rfactor of stage 'D': the stage accumulates with fma (fused_multiply_add); "
              "rfactor first, then fused_multiply_add the new stage");
  EXPECT_EQ(order->ToString(), with_fma);
  IterVar k8 = ReduceAxis(ir::IntConst(ir::kI32, 16), "k8");
  Tensor F = Compute("F", {ir::IntConst(ir::kI32, 8)}, [&](const std::vector<Var>& i) {
    return Sum(X(i[0], k8) * X(k8, i[0]), {k8});
  });
  auto other = Schedule::Create({F});
  ASSERT_TRUE(other.ok()) << other.status();
  Stage fs = (*other)[F];
  auto k8s = fs.Split(fs.reduce_axis(0), 4);
  ASSERT_TRUE(k8s.ok()) << k8s.status();
  auto rf = other->Rfactor(F, k8s->inner);
  ASSERT_TRUE(rf.ok()) << rf.status();
  ASSERT_TRUE((*other)[*rf].FusedMultiplyAdd().ok());
  // A consumer stage of another schedule, even one of the same program,
  // is refused naming it (its name need not be a stage here).
  auto third = Schedule::Create({F});
  ASSERT_TRUE(third.ok()) << third.status();
  ExpectError((*third)[F].ComputeAt(fs, fs.axis(0)),
              "compute_at of stage 'F': stage 'F' is not a stage of this schedule");
  ExpectError((*third)[F].ComputeAt((*other)[*rf], fs.axis(0)),
              "stage 'F_rf' is not a stage of this schedule");
  ASSERT_TRUE((*other)[*rf].ComputeAt(fs, fs.axis(0)).ok());
  auto lowered = Lower(*other, {F}, {X}, "f");
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  const std::string rf_ir = ir::Print(*lowered);
  EXPECT_EQ(Occurrences(rf_ir, "= fma("), 1u) << rf_ir;
}

// With constant sizes that the tiles divide, the copies into shared memory
// need no bounds checks (bounds inference proves the regions inside the
// tensors) and their innermost axis can be a vector; ragged sizes keep the
// checks, and the vector lanes fall back to serial ones.
TEST(TeScheduleTest, RegionsProvedInBoundsNeedNoGuards) {
  for (int size : {64, 33}) {
    Tensor A = Placeholder("A", {size, size}, ir::kF32);
    Tensor B = Placeholder("B", {size, size}, ir::kF32);
    IterVar k = ReduceAxis(size, "k");
    Tensor C = Compute("C", {size, size}, [&](const std::vector<Var>& i) {
      return Sum(A(i[0], k) * B(k, i[1]), {k});
    });
    auto s = Schedule::Create({C});
    ASSERT_TRUE(s.ok());
    auto as = s->CacheRead(A, ir::MemoryScope::kShared, {C});
    ASSERT_TRUE(as.ok());
    Stage c = (*s)[C];
    auto t = c.Tile(c.axis(0), c.axis(1), 32, 32);
    ASSERT_TRUE(t.ok());
    ASSERT_TRUE(c.Bind(t->x_outer, ThreadAxis::kBlockY).ok());
    ASSERT_TRUE(c.Bind(t->y_outer, ThreadAxis::kBlockX).ok());
    ASSERT_TRUE(c.Bind(t->y_inner, ThreadAxis::kThreadX).ok());
    Stage a = (*s)[*as];
    ASSERT_TRUE(a.ComputeAt(c, t->y_inner).ok());
    auto rows = a.Split(a.axis(1), 4);
    ASSERT_TRUE(rows.ok());
    ASSERT_TRUE(a.Vectorize(rows->inner).ok());
    auto f = Lower(*s, {C}, {A, B}, "mm");
    ASSERT_TRUE(f.ok()) << f.status();
    const std::string ir = ir::Print(*f);
    SCOPED_TRACE(ir);
    const bool divides = size == 64;
    EXPECT_EQ(ir.find("in vectorize(0, 4)") != std::string::npos, divides);
    EXPECT_EQ(ir.find("< " + std::to_string(size)) != std::string::npos, !divides);
  }
}

// Double buffering pipelines the k loop: the first step's tiles are copied
// before the loop into half 0, and each step, after one barrier, copies the
// next step's tiles into the other half (while there is one) and computes
// from its own half.
TEST(TeScheduleTest, DoubleBufferPipelinesTheLoopWithOneBarrierPerStep) {
  testing::SharedMatmulOptions o;
  o.double_buffer = true;
  o.storage_align = false;
  auto lowered = LowerSharedMatmul(o);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  const std::string& ir = *lowered;
  EXPECT_TRUE(Contains(ir, "alloc A_shared_buf: f32[2, 32, 8] shared")) << ir;
  // The prologue, before the loop.
  const size_t prologue = ir.find("A_shared_buf[0, i_1, j_1] = A[i_outer * 32 + i_1, j_1]");
  const size_t loop = ir.find("for k_outer in serial(0, (K + 7) / 8)");
  ASSERT_NE(prologue, std::string::npos) << ir;
  ASSERT_NE(loop, std::string::npos) << ir;
  EXPECT_LT(prologue, loop);
  // The next step's copy, guarded, through registers: loaded before the
  // math on this half, stored into the other half after it.
  const size_t next = ir.find("if (k_outer + 1 < (K + 7) / 8)");
  ASSERT_NE(next, std::string::npos) << ir;
  EXPECT_GT(next, loop);
  EXPECT_TRUE(Contains(ir, "alloc A_shared_buf_staged: f32[4] local")) << ir;
  const size_t load = ir.find(
      "A_shared_buf_staged[i_j_fused_outer_2] = A[i_outer * 32 + i_3, (k_outer + 1) * 8 + j_3]");
  const size_t math = ir.find("A_shared_buf[k_outer % 2,");
  const size_t store =
      ir.find("A_shared_buf[(k_outer + 1) % 2, i_6, j_6] = A_shared_buf_staged[i_j_fused_outer_4]");
  ASSERT_NE(load, std::string::npos) << ir;
  ASSERT_NE(math, std::string::npos) << ir;
  ASSERT_NE(store, std::string::npos) << ir;
  EXPECT_LT(next, load);
  EXPECT_LT(load, math);
  EXPECT_LT(math, store);
  const size_t barriers = Occurrences(ir, "workgroup_barrier");
  EXPECT_EQ(barriers, 1u) << ir;
}

// Branch-free: every step loads (the last its own tile again, through a
// clamped index) and stores into the half the body does not read.
TEST(TeScheduleTest, BranchFreeDoubleBufferLoadsAndStoresUnderNoBranch) {
  testing::SharedMatmulOptions o;
  o.double_buffer = true;
  o.double_buffer_branch_free = true;
  o.storage_align = false;
  auto lowered = LowerSharedMatmul(o);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  const std::string& ir = *lowered;
  EXPECT_FALSE(Contains(ir, "if (k_outer + 1 < (K + 7) / 8)")) << ir;
  const size_t loop = ir.find("for k_outer in serial(0, (K + 7) / 8)");
  const size_t load = ir.find(
      "A_shared_buf_staged[i_j_fused_outer_2] = A[i_outer * 32 + i_3, min(k_outer + 1, (K + 7) / 8 "
      "- 1) * 8 + j_3]");
  const size_t math = ir.find("A_shared_buf[k_outer % 2,");
  const size_t store =
      ir.find("A_shared_buf[(k_outer + 1) % 2, i_6, j_6] = A_shared_buf_staged[i_j_fused_outer_4]");
  ASSERT_NE(loop, std::string::npos) << ir;
  ASSERT_NE(load, std::string::npos) << ir;
  ASSERT_NE(math, std::string::npos) << ir;
  ASSERT_NE(store, std::string::npos) << ir;
  EXPECT_LT(loop, load);
  EXPECT_LT(load, math);
  EXPECT_LT(math, store);
  EXPECT_EQ(Occurrences(ir, "workgroup_barrier"), 1u) << ir;
  MatmulProgram p;
  auto replay = testing::ScheduleSharedMatmul(p, o);
  ASSERT_TRUE(replay.ok());
  EXPECT_TRUE(Contains(replay->ToString(), "A_shared.double_buffer(branch_free)\n"));
}

// A thread's 8 x 8 elements of C in groups of 4 spread 32 apart over the
// 64 x 64 tile: its accumulators are stored compactly (8 x 8, not the 36 x
// 36 their interval spans), each read of them at the compact position.
TEST(TeScheduleTest, StridedThreadTilesAreStoredCompactly) {
  testing::SharedMatmulOptions o;
  o.tile = 64;
  o.per_thread = 8;
  o.strided = true;
  auto lowered = LowerSharedMatmul(o);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  const std::string& ir = *lowered;
  EXPECT_TRUE(Contains(ir, "alloc C_local_buf: f32[8, 8] local")) << ir;
  // C's element (group g, lane i) of the thread is at 4 * g + i.
  EXPECT_TRUE(Contains(ir,
                       "C_local_buf[i_inner_inner + i_inner_outer_outer * 4, "
                       "j_inner_inner + j_inner_outer_outer * 4]"))
      << ir;
  // The accumulator at compact position i is row i % 4 + i / 4 * 32 of the
  // thread's origin.
  EXPECT_TRUE(
      Contains(ir, "A_shared_buf[i_inner_outer_inner * 4 + i_2 % 4 + i_2 / 4 * 32, k_inner]"))
      << ir;

  // Its accumulators' columns vectorized: the sizes are symbolic, so every
  // update is guarded and the lanes run unrolled instead.
  o.vector_accumulators = true;
  auto vectors = LowerSharedMatmul(o);
  ASSERT_TRUE(vectors.ok()) << vectors.status();
  const std::string& guarded = *vectors;
  EXPECT_EQ(Occurrences(guarded, "vectorize("), 0u) << guarded;
  EXPECT_TRUE(Contains(guarded, "for j_inner in unroll(0, 4)")) << guarded;
}

// Shared stages computed at a block loop: a barrier after them (none
// before: no earlier iteration of the loop reads them), and between two of
// them only where the second reads the first.
TEST(TeScheduleTest, BarriersBetweenSharedStagesOnlyWhereOneReadsTheOther) {
  for (bool chained : {false, true}) {
    const int n = 256;
    Tensor A = Placeholder("A", {n}, ir::kF32);
    Tensor B = Placeholder("B", {n}, ir::kF32);
    Tensor P = Compute("P", {n}, [&](const std::vector<Var>& i) { return A(i[0]) * 2.0f; });
    Tensor Q = Compute("Q", {n}, [&](const std::vector<Var>& i) {
      return chained ? P(i[0]) + 1.0f : B(i[0]) + 1.0f;
    });
    Tensor C = Compute("C", {n}, [&](const std::vector<Var>& i) { return P(i[0]) * Q(i[0]); });
    auto s = Schedule::Create({C});
    ASSERT_TRUE(s.ok()) << s.status();
    Stage c = (*s)[C];
    auto split = c.Split(c.axis(0), 64);
    ASSERT_TRUE(split.ok()) << split.status();
    ASSERT_TRUE(c.Bind(split->outer, ThreadAxis::kBlockX).ok());
    ASSERT_TRUE(c.Bind(split->inner, ThreadAxis::kThreadX).ok());
    for (const Tensor& t : {P, Q}) {
      Stage st = (*s)[t];
      ASSERT_TRUE(st.SetScope(ir::MemoryScope::kShared).ok());
      ASSERT_TRUE(st.ComputeAt(c, split->outer).ok());
      auto inner = st.Split(st.axis(0), 64);
      ASSERT_TRUE(inner.ok()) << inner.status();
      ASSERT_TRUE(st.Bind(inner->inner, ThreadAxis::kThreadX).ok());
    }
    auto f = Lower(*s, {C}, {A, B}, "two_stages");
    ASSERT_TRUE(f.ok()) << f.status();
    const std::string ir = ir::Print(*f);
    const size_t barriers = Occurrences(ir, "workgroup_barrier");
    // None before the stages (a workgroup runs its block loop once), one
    // between P and Q where Q reads P, one before C reads them.
    EXPECT_EQ(barriers, chained ? 2u : 1u) << ir;
  }
}

TEST(TeScheduleTest, RfactorMakesACrossThreadTree) {
  testing::RowSumProgram p;
  auto s = testing::ScheduleRowSumAcrossThreads(p, 48);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->ToString(),
            "Y.split(k, 48)\nY.rfactor(k_inner)\nY.bind(i, blockIdx.x)\n"
            "Y.bind(k_inner_r, threadIdx.x)\nY_rf.compute_at(Y, k_inner_r)\n");
  auto f = Lower(*s, {p.Y}, {p.X}, "rs");
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string ir = ir::Print(*f);
  EXPECT_TRUE(Contains(ir, "alloc Y_red: f32[48] shared"));
  EXPECT_TRUE(Contains(ir, "k_inner_r_t32 < 32 && k_inner_r_t32 + 32 < 48"));
  EXPECT_TRUE(Contains(ir, "alloc Y_rf_buf: f32[1, 1] local"));
}

TEST(TeScheduleTest, ComputeAtInfersTheHalo) {
  testing::StencilProgram p;
  auto s = testing::ScheduleStencil(p, 64);
  ASSERT_TRUE(s.ok()) << s.status();
  auto f = Lower(*s, {p.C}, {p.A}, "st");
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string ir = ir::Print(*f);
  EXPECT_TRUE(Contains(ir, "alloc P_buf: f32[66] shared"));
  // The producer is guarded by its own extent where the region passes it.
  EXPECT_TRUE(Contains(ir, "i_outer * 64 + i < n + 2"));
}

// A stage computed at another's loop binds threads only to share a shared
// stage's work: a local stage's threads would each hold part of it, and a
// workgroup axis would leave each workgroup computing part of what it reads.
TEST(TeScheduleTest, AttachedStagesBindOnlyThreadsOfSharedWork) {
  for (const char* thread : {"threadIdx.y", "blockIdx.y"}) {
    SCOPED_TRACE(thread);
    testing::StencilProgram p;
    auto s = Schedule::Create({p.C});
    ASSERT_TRUE(s.ok());
    Stage c = (*s)[p.C], producer = (*s)[p.P];
    auto i = c.Split(c.axis(0), 8);
    ASSERT_TRUE(i.ok());
    ASSERT_TRUE(c.Bind(i->outer, ThreadAxis::kBlockX).ok());
    ASSERT_TRUE(c.Bind(i->inner, ThreadAxis::kThreadX).ok());
    ASSERT_TRUE(producer.ComputeAt(c, i->inner).ok());
    auto pi = producer.Split(producer.axis(0), 4);
    ASSERT_TRUE(pi.ok());
    ASSERT_TRUE(producer.Bind(pi->inner, *ThreadAxisFromName(thread)).ok());
    ExpectError(Lower(*s, {p.C}, {p.A}, "st").status(),
                std::string("stage 'P' is computed at 'C', loop 'i_inner', and binds axis "
                            "'i_inner' to ") +
                    thread);
    if (std::string(thread) == "threadIdx.y") {
      // Shared, the threads share its work.
      ASSERT_TRUE(producer.SetScope(ir::MemoryScope::kShared).ok());
      auto f = Lower(*s, {p.C}, {p.A}, "st");
      EXPECT_TRUE(f.ok()) << f.status();
    }
  }
}

// A cross-thread reduction computed at another stage's loop reads its
// result from its own slots, not at the tensor's coordinates.
TEST(TeScheduleTest, AttachedCrossThreadReductionReadsItsOwnSlot) {
  testing::FuzzProgram p = testing::MakeFuzzProgram(7);  // softmax: M, S, Y
  ASSERT_EQ(p.name, "softmax");
  auto s = Schedule::Create(p.outputs);
  ASSERT_TRUE(s.ok());
  Stage y = (*s)[p.outputs[0]];
  auto st = s->FindStage("S");
  ASSERT_TRUE(st.ok());
  ASSERT_TRUE(st->ComputeAt(y, y.axis(1)).ok());
  ASSERT_TRUE(st->Bind(st->axis(0), ThreadAxis::kThreadY).ok());
  ASSERT_TRUE(st->SetScope(ir::MemoryScope::kShared).ok());
  ASSERT_TRUE(st->Bind(st->reduce_axis(0), ThreadAxis::kThreadX).ok());
  auto k = LowerKernels(*s, p.outputs, p.inputs, "softmax");
  ASSERT_TRUE(k.ok()) << k.status();
  const std::string ir = ir::Print(k->functions.back());
  EXPECT_TRUE(Contains(ir, "S_buf[i_1] = S_red[i_1, 0]"));
}

TEST(TeScheduleTest, StagingSchedulesPrintCompareAndReplay) {
  MatmulProgram p;
  testing::SharedMatmulOptions o;
  o.double_buffer = true;
  auto s = testing::ScheduleSharedMatmul(p, o);
  ASSERT_TRUE(s.ok()) << s.status();
  const std::string text = s->ToString();
  EXPECT_TRUE(Contains(text, "A.cache_read(shared, C)\n"));
  EXPECT_TRUE(Contains(text, "C.cache_write(local)\n"));
  EXPECT_TRUE(Contains(text, "C_local.compute_at(C, j_inner_outer)\n"));
  EXPECT_TRUE(Contains(text, "A_shared.storage_align(i, 32, 1)\n"));
  EXPECT_TRUE(Contains(text, "A_shared.double_buffer()\n"));
  // Replayed on a fresh schedule of the same program: equal, same kernel.
  auto fresh = Schedule::Create({p.C});
  ASSERT_TRUE(fresh.ok());
  ASSERT_TRUE(fresh->Apply(s->primitives()).ok());
  EXPECT_TRUE(*fresh == *s);
  auto a = Lower(*s, {p.C}, {p.A, p.B}, "mm");
  auto b = Lower(*fresh, {p.C}, {p.A, p.B}, "mm");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(ir::Print(*a), ir::Print(*b));
}

// Every kind of record parses back from its text, and a schedule applied
// as text is the schedule printed; a bad record is an error naming its line
// and leaves the schedule as it was.
TEST(TeScheduleTest, RecordsParseFromTheirText) {
  auto record = [](Primitive::Kind kind, std::string stage, std::vector<std::string> axes) {
    Primitive p;
    p.kind = kind;
    p.stage = std::move(stage);
    p.axes = std::move(axes);
    return p;
  };
  using K = Primitive::Kind;
  std::vector<Primitive> all;
  all.push_back(record(K::kSplit, "C", {"i"}));
  all.back().factor = 16;
  all.push_back(record(K::kFuse, "C", {"i", "j"}));
  all.push_back(record(K::kReorder, "C", {"j", "i", "k"}));
  all.push_back(record(K::kBind, "C", {"i_outer"}));
  all.back().thread = "blockIdx.x";
  all.push_back(record(K::kUnroll, "C", {"i"}));
  all.push_back(record(K::kVectorize, "C", {"j_inner"}));
  all.push_back(record(K::kComputeInline, "B", {}));
  all.push_back(record(K::kComputeAt, "A_shared", {"k_outer"}));
  all.back().target = "C_local";
  all.push_back(record(K::kCacheRead, "A", {"C", "D"}));
  all.back().scope = "shared";
  all.push_back(record(K::kCacheWrite, "C", {}));
  all.back().scope = "local";
  all.push_back(record(K::kSetScope, "P", {}));
  all.back().scope = "shared";
  all.push_back(record(K::kStorageAlign, "A_shared", {"i"}));
  all.back().factor = 32;
  all.back().offset = 1;
  all.push_back(record(K::kDoubleBuffer, "A_shared", {}));
  all.push_back(record(K::kDoubleBuffer, "A_shared", {}));
  all.back().factor = 1;
  all.push_back(record(K::kRfactor, "Y", {"k_inner"}));
  all.push_back(record(K::kSubgroupReduce, "Y", {}));
  all.push_back(record(K::kFusedMultiplyAdd, "Y", {}));
  for (std::string_view scope : {"", "registers"}) {
    for (LastCopy last :
         {LastCopy::kSkipped, LastCopy::kLoadsAgain, LastCopy::kStoresAgain, LastCopy::kPeeled}) {
      all.push_back(record(K::kCopyAhead, "B_shared", {}));
      all.back().scope = scope;
      all.back().factor = static_cast<int64_t>(last);
    }
  }
  all.push_back(record(K::kSplit, "C.out", {"i"}));  // a dot in a name
  all.back().factor = -3;                            // (Apply refuses it; it parses)
  for (const Primitive& p : all) {
    StatusOr<Primitive> parsed = ParsePrimitive(p.ToString());
    ASSERT_TRUE(parsed.ok()) << p.ToString() << ": " << parsed.status();
    EXPECT_TRUE(*parsed == p) << p.ToString() << " came back as " << parsed->ToString();
  }

  const std::pair<const char*, const char*> bad[] = {
      {"C.split(i)", "record `C.split(i)`: split takes 2 argument(s), not 1"},
      {"C.split(i, 4x)", "split's factor is a decimal integer, not '4x'"},
      {"C.split(i, 4", "the record does not end with ')'"},
      {"C.tile(i, j, 4, 4)", "a record is STAGE.PRIMITIVE(ARGUMENTS)"},
      {".split(i, 4)", "a record is STAGE.PRIMITIVE(ARGUMENTS)"},
      {"C.fuse(i, , j)", "an argument is empty"},
      {"C.reorder()", "reorder takes at least 1 argument(s), not 0"},
      {"C.double_buffer(fast)", "double_buffer's argument is 'branch_free', not 'fast'"},
      {"C.copy_ahead(registers, sometimes)",
       "copy_ahead's last is 'branch_free', 'no_branch' or 'peeled', not 'sometimes'"},
      {"C.copy_ahead(registers, peeled, x)", "copy_ahead takes 0 to 2 argument(s), not 3"},
      {"C.storage_align(i, 32)", "storage_align takes 3 argument(s), not 2"},
      {"C.unroll(i, j)",
       "unroll takes 1 argument(s), not 2 (if a name holds ', ', it reads as two arguments)"},
      {"C.split(i,4)",
       "split takes 2 argument(s), not 1 (arguments are separated by ', ', a comma and a space)"},
      {"C.fused_multiply_add(x)", "fused_multiply_add takes 0 argument(s), not 1"},
      {"C.copy_ahead(peeled, registers)",
       "copy_ahead takes [registers[, LAST]]; 'registers' is "
       "out of place"},
      // What a name holding the separators prints as reads back differently.
      {"my.fuse(x.split(i, 2)",
       "the record is ambiguous: 'x.split(i' holds ', ' or a "
       "parenthesis"},
      {"C.split(i, 04)", "the record reads as `C.split(i, 4)`, not as itself"},
      {"C.split(i,  4)", "split's factor is a decimal integer, not ' 4'"},
  };
  for (const auto& [text, message] : bad) ExpectError(ParsePrimitive(text).status(), message);

  MatmulProgram p;
  testing::SharedMatmulOptions o;
  o.double_buffer = true;
  auto s = testing::ScheduleSharedMatmul(p, o);
  ASSERT_TRUE(s.ok()) << s.status();
  auto fresh = Schedule::Create({p.C});
  ASSERT_TRUE(fresh.ok());
  ASSERT_TRUE(fresh->ApplyText("\n  " + s->ToString() + "\r\n\n").ok());
  EXPECT_TRUE(*fresh == *s);
  // The second line fails: nothing of the first stays.
  auto other = Schedule::Create({p.C});
  ASSERT_TRUE(other.ok());
  ExpectError(other->ApplyText("C.split(i, 4)\nC.split(q, 4)\n"),
              "line 2: split of stage 'C': the stage has no axis 'q'");
  EXPECT_EQ(other->ToString(), "");
  ExpectError(other->ApplyText("C.split(i, 4)\n\nC.bind(i_outer)"),
              "line 3: record `C.bind(i_outer)`: bind takes 2 argument(s), not 1");
  EXPECT_EQ(other->ToString(), "");
}

TEST(TeScheduleTest, IllegalStagingIsAnError) {
  MatmulProgram p;
  auto s = Schedule::Create({p.C});
  ASSERT_TRUE(s.ok());
  Stage c = (*s)[p.C];
  ExpectError(s->CacheRead(p.A, ir::MemoryScope::kGlobal, {p.C}).status(),
              "cache_read of tensor 'A': a cache is shared or local, not global");
  ExpectError(s->CacheRead(p.A, ir::MemoryScope::kShared, {}).status(),
              "cache_read of tensor 'A': no reader is named");
  auto as = s->CacheRead(p.A, ir::MemoryScope::kShared, {p.C});
  ASSERT_TRUE(as.ok()) << as.status();
  ExpectError(s->CacheRead(p.B, ir::MemoryScope::kShared, {*as}).status(),
              "cache_read of tensor 'B': stage 'A_shared' does not read it");
  Stage a = (*s)[*as];
  ExpectError(c.ComputeAt(a, a.axis(0)), "compute_at of stage 'C': the stage is an output");
  ExpectError(a.ComputeAt(a, a.axis(0)), "a stage cannot be computed at itself");
  ExpectError(a.ComputeAt(c, a.axis(0)),
              "compute_at of stage 'A_shared' at stage 'C': axis 'i' belongs to stage "
              "'A_shared'");
  ExpectError(a.SetScope(ir::MemoryScope::kGlobal), "only outputs are global");
  ExpectError(c.SetScope(ir::MemoryScope::kShared), "the stage is an output of the schedule");
  ExpectError(a.StorageAlign(a.axis(0), 0, 0), "the factor must be in [1, 2^30]");
  ExpectError(a.StorageAlign(a.axis(0), (int64_t{1} << 30) + 1, 1),
              "the factor must be in [1, 2^30]");
  ExpectError(a.StorageAlign(a.axis(0), 32, 32), "0 <= offset < factor");
  ExpectError(c.StorageAlign(c.axis(0), 32, 1), "the stage is an output");
  ExpectError(c.DoubleBuffer(), "the stage is an output");
  ExpectError(s->Rfactor(p.C, c.axis(0)).status(),
              "rfactor of stage 'C': axis 'i' is not a reduction axis");
  ExpectError(s->Rfactor(p.C, c.reduce_axis(0)).status(),
              "must come from the one split of a root reduction axis");
  ExpectError(c.Tile(c.axis(1), c.axis(0), 4, 4).status(),
              "tile of stage 'C': axis 'j' must be a loop directly outside loop 'i'");
  const size_t leaves = c.leaf_axes().size();
  ExpectError(c.Tile(c.axis(0), c.axis(1), 4, 0).status(),
              "tile of stage 'C': axis 'j' split by 0; the factor must be positive");
  EXPECT_EQ(c.leaf_axes().size(), leaves);  // nothing of the failed tile stays
  // Failed primitives leave no record.
  EXPECT_EQ(s->ToString(), "A.cache_read(shared, C)\n");

  // A cache_write after other primitives; a compute_at whose region has no
  // constant size; a double buffer at a launch loop; a stage left at the
  // root but read by the output.
  ASSERT_TRUE(c.Split(c.axis(0), 4).ok());
  ExpectError(s->CacheWrite(p.C, ir::MemoryScope::kLocal).status(),
              "cache_write of stage 'C': cache_write comes before any other primitive");
  auto f = Lower(*s, {p.C}, {p.A, p.B}, "mm");
  ExpectError(f.status(),
              "stage 'A_shared' is read by 'C' but is neither inlined, computed at "
              "another stage nor an output");
  ASSERT_TRUE(a.ComputeAt(c, c.leaf_axes()[0]).ok());
  f = Lower(*s, {p.C}, {p.A, p.B}, "mm");
  ExpectError(f.status(),
              "the region it computes along dimension 1 is [0, K - 1], whose size "
              "is not a constant");

  // An axis a split replaced is named as such, not as out of order.
  MatmulProgram q;
  auto t = Schedule::Create({q.C});
  ASSERT_TRUE(t.ok());
  Stage qc = (*t)[q.C];
  ASSERT_TRUE(qc.Split(qc.axis(1), 4).ok());
  ExpectError(qc.Tile(qc.axis(0), qc.axis(1), 2, 2).status(),
              "tile of stage 'C': axis 'j' is no longer a loop of the nest (it was split or "
              "fused)");
}

// A reader that reads a tensor only through stages inlined into it is told
// where the reads went.
TEST(TeScheduleTest, CacheReadThroughAnInlinedStageSaysSo) {
  Tensor a = Placeholder("A", {Expr(12)}, ir::kF32);
  Tensor p = Compute("P", {Expr(12)}, [&](const std::vector<Var>& i) { return a(i[0]) * 2.0f; });
  Tensor p2 = Compute("P2", {Expr(12)}, [&](const std::vector<Var>& i) { return p(i[0]) * 3.0f; });
  Tensor q = Compute("Q", {Expr(12)}, [&](const std::vector<Var>& i) { return p2(i[0]) + 1.0f; });
  auto s = Schedule::Create({q});
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)[p].ComputeInline().ok());
  ASSERT_TRUE((*s)[p2].ComputeInline().ok());
  ExpectError(s->CacheRead(a, ir::MemoryScope::kShared, {q}).status(),
              "cache_read of tensor 'A': stage 'Q' reads it only through the inlined stage 'P'; "
              "name 'P' as the reader in a cache_read made before its compute_inline");
  ExpectError(s->CacheRead(p, ir::MemoryScope::kShared, {q}).status(),
              "cache_read of tensor 'P': stage 'Q' reads it only through the inlined stage 'P2'");
  EXPECT_EQ(s->ToString(), "P.compute_inline()\nP2.compute_inline()\n");
}

// A primitive that sets a property of a stage applies once: a second one
// is an error naming the stage, and leaves no record.
TEST(TeScheduleTest, RepeatedStagePropertiesAreErrors) {
  MatmulProgram p;
  auto s = Schedule::Create({p.C});
  ASSERT_TRUE(s.ok());
  auto as = s->CacheRead(p.A, ir::MemoryScope::kShared, {p.C});
  ASSERT_TRUE(as.ok()) << as.status();
  auto bs = s->CacheRead(p.B, ir::MemoryScope::kShared, {p.C});
  ASSERT_TRUE(bs.ok()) << bs.status();
  Stage a = (*s)[*as];
  Stage b = (*s)[*bs];
  Stage c = (*s)[p.C];
  ASSERT_TRUE(a.SetScope(ir::MemoryScope::kLocal).ok());
  ExpectError(a.SetScope(ir::MemoryScope::kShared),
              "set_scope of stage 'A_shared': the stage's scope is already set (to local)");
  ASSERT_TRUE(a.StorageAlign(a.axis(0), 32, 1).ok());
  ExpectError(a.StorageAlign(a.axis(0), 16, 1),
              "storage_align of stage 'A_shared': dimension 'i' is already aligned (factor 32, "
              "offset 1)");
  ASSERT_TRUE(a.DoubleBuffer().ok());
  ExpectError(a.DoubleBuffer(), "double_buffer of stage 'A_shared': the stage is already");
  ASSERT_TRUE(b.CopyAhead().ok());
  ExpectError(b.CopyAhead(true), "copy_ahead of stage 'B_shared': the stage is already copied");
  ASSERT_TRUE(c.FusedMultiplyAdd().ok());
  ExpectError(c.FusedMultiplyAdd(),
              "fused_multiply_add of stage 'C': the stage already accumulates with fma");
  ASSERT_TRUE(c.SubgroupReduce().ok());
  ExpectError(c.SubgroupReduce(), "subgroup_reduce of stage 'C': the stage already combines");
  // A record naming a launch axis kiln does not bind says where.
  ExpectError(s->Apply(Primitive{Primitive::Kind::kBind, "C", {"i"}, 0, "threadIdx.z"}),
              "bind of stage 'C', axis 'i': 'threadIdx.z' is not a launch axis");
  EXPECT_EQ(s->ToString(),
            "A.cache_read(shared, C)\nB.cache_read(shared, C)\nA_shared.set_scope(local)\n"
            "A_shared.storage_align(i, 32, 1)\nA_shared.double_buffer()\n"
            "B_shared.copy_ahead()\nC.fused_multiply_add()\nC.subgroup_reduce()\n");
}

// The kernel's parameters are its inputs and outputs, named by their
// tensors: each is listed once, and no two share a name.
TEST(TeScheduleTest, LoweringChecksItsParameterLists) {
  MatmulProgram p;
  auto s = Schedule::Create({p.C});
  ASSERT_TRUE(s.ok());
  ExpectError(Lower(*s, {p.C}, {p.A, p.B, p.A}, "mm").status(),
              "tensor 'A' is listed twice among the inputs");
  ExpectError(Lower(*s, {p.C, p.C}, {p.A, p.B}, "mm").status(),
              "tensor 'C' is listed twice among the outputs and inputs");
  Tensor other_a = Placeholder("A", {p.M, p.K}, ir::kF32);
  ExpectError(Lower(*s, {p.C}, {p.A, p.B, other_a}, "mm").status(),
              "two different tensors are named 'A'");
  Tensor unnamed = Placeholder("", {p.M}, ir::kF32);
  ExpectError(Lower(*s, {p.C}, {p.A, p.B, unnamed}, "mm").status(),
              "a tensor with an empty name; the kernel's parameters take their tensors' names");
  ExpectError(LowerKernels(*s, {p.C}, {p.B, p.B, p.A}, "mm").status(),
              "tensor 'B' is listed twice among the inputs");
  EXPECT_TRUE(Lower(*s, {p.C}, {p.A, p.B}, "mm").ok());
}

// A stage computed at a reader cannot then be cached for that reader: the
// reader would read the cache, and the stage be computed where nothing
// reads it.
TEST(TeScheduleTest, CacheReadOfAStageComputedAtItsReaderIsAnError) {
  Tensor A = Placeholder("A", {ir::IntConst(ir::kI32, 6), ir::IntConst(ir::kI32, 13)}, ir::kF32);
  Tensor B =
      Compute("B", A.shape(), [&](const std::vector<Var>& i) { return A(i[0], i[1]) * 2.0; });
  Tensor C =
      Compute("C", A.shape(), [&](const std::vector<Var>& i) { return B(i[0], i[1]) + 1.0; });
  auto s = Schedule::Create({C});
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)[B].ComputeAt((*s)[C], (*s)[C].axis(0)).ok());
  ExpectError(s->CacheRead(B, ir::MemoryScope::kShared, {C}).status(),
              "cache_read of tensor 'B': 'B' is computed at stage 'C', which would read the "
              "cache instead");
  EXPECT_EQ(s->ToString(), "B.compute_at(C, i)\n");
}

// Stages computed where some reader cannot see them: at one consumer
// while another kernel reads them, or at a reduction loop while the
// consumer reads them after the reduction. Errors naming the stages.
TEST(TeScheduleTest, AttachedStagesMustBeSeenByEveryReader) {
  const auto c = [](int64_t v) { return ir::IntConst(ir::kI32, v); };
  Tensor X = Placeholder("X", {c(6), c(10)}, ir::kF32);
  IterVar k1 = ReduceAxis(c(10), "k"), k2 = ReduceAxis(c(10), "k");
  Tensor M =
      Compute("M", {c(6)}, [&](const std::vector<Var>& i) { return Max(X(i[0], k1), {k1}); });
  Tensor S = Compute("S", {c(6)}, [&](const std::vector<Var>& i) {
    return Sum(X(i[0], k2) - M(i[0]), {k2}) + M(i[0]);
  });
  Tensor Y = Compute("Y", {c(6), c(10)},
                     [&](const std::vector<Var>& i) { return X(i[0], i[1]) - M(i[0]) + S(i[0]); });
  {
    auto s = Schedule::Create({Y});
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)[M].ComputeAt((*s)[Y], (*s)[Y].axis(0)).ok());
    ExpectError(LowerKernels(*s, {Y}, {X}, "k").status(),
                "stage 'M' is computed at stage 'Y' (in the kernel of 'Y'), but stage 'S', in the "
                "kernel of 'S', reads it too");
  }
  {
    auto s = Schedule::Create({S});
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)[M].ComputeAt((*s)[S], (*s)[S].reduce_axis(0)).ok());
    ExpectError(Lower(*s, {S}, {X}, "k").status(),
                "stage 'M' is computed at loop 'k' of stage 'S', a reduction loop, but 'S' also "
                "reads it after its reduction");
  }
  {
    // M at Y's inner loop, S (which reads M) at Y's outer one.
    auto s = Schedule::Create({Y});
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)[M].ComputeAt((*s)[Y], (*s)[Y].axis(1)).ok());
    ASSERT_TRUE((*s)[S].ComputeAt((*s)[Y], (*s)[Y].axis(0)).ok());
    ExpectError(Lower(*s, {Y}, {X}, "k").status(),
                "stage 'M' is computed at loop 'j' of stage 'Y', but stage 'S' reads it too, "
                "outside that loop");
    // Both at the outer loop: S sees M.
    auto t = Schedule::Create({Y});
    ASSERT_TRUE(t.ok());
    ASSERT_TRUE((*t)[M].ComputeAt((*t)[Y], (*t)[Y].axis(0)).ok());
    ASSERT_TRUE((*t)[S].ComputeAt((*t)[Y], (*t)[Y].axis(0)).ok());
    auto f = Lower(*t, {Y}, {X}, "k");
    ASSERT_TRUE(f.ok()) << f.status();
  }
}

TEST(TeScheduleTest, AStageWithAttachedProducersDoesNotInline) {
  Var n = SizeVar("n");
  Tensor X = Placeholder("X", {n}, ir::kF32);
  Tensor A = Compute("A", {n}, [&](const std::vector<Var>& i) { return X(i[0]) * 2.0f; });
  Tensor B = Compute("B", {n}, [&](const std::vector<Var>& i) { return A(i[0]) + 1.0f; });
  Tensor C = Compute("C", {n}, [&](const std::vector<Var>& i) { return B(i[0]) * 3.0f; });
  auto s = Schedule::Create({C});
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)[A].ComputeAt((*s)[B], (*s)[B].axis(0)).ok());
  ExpectError((*s)[B].ComputeInline(),
              "compute_inline of stage 'B': stage 'A' is computed at one of its loops");
}

TEST(TeScheduleTest, DoubleBufferNeedsASharedStageAtASerialLoop) {
  testing::StencilProgram p;
  auto s = testing::ScheduleStencil(p, 64);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)[p.P].DoubleBuffer().ok());
  ExpectError(Lower(*s, {p.C}, {p.A}, "st").status(),
              "stage 'P' is double-buffered at loop 'i_outer', which is a launch axis");
}

TEST(TeScheduleTest, CopyAheadNeedsSharedCopiesOfInputsAtASerialLoop) {
  {
    testing::StencilProgram p;
    auto s = testing::ScheduleStencil(p, 64);
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)[p.P].CopyAhead().ok());
    ExpectError(Lower(*s, {p.C}, {p.A}, "st").status(),
                "stage 'P' is copied ahead at loop 'i_outer', which is a launch axis; "
                "copy_ahead needs a serial loop");
    ExpectError((*s)[p.P].DoubleBuffer(), "a stage is double-buffered or copied ahead, not both");
    ExpectError((*s)[p.C].CopyAhead(), "the stage is an output");
  }
  {
    testing::StencilProgram p;
    auto s = testing::ScheduleStencil(p, 64);
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)[p.P].DoubleBuffer().ok());
    ExpectError((*s)[p.P].CopyAhead(), "the stage is double-buffered, which already copies ahead");
  }
  testing::SharedChainProgram p(ir::IntConst(ir::kI32, 256));
  {
    // Q reads P, computed at the same loop: its next step's values are not
    // there when Q would copy them.
    auto s = testing::ScheduleSharedChain(p, /*spread=*/false);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE((*s)[p.Q].CopyAhead().ok());
    ExpectError(Lower(*s, {p.C}, {p.A}, "chain").status(),
                "stage 'Q' is copied ahead but reads 'P', which is not an input of the kernel");
  }
  {
    // P alone (it reads the input A), with Q at the same loop not.
    auto s = testing::ScheduleSharedChain(p, /*spread=*/false);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE((*s)[p.P].CopyAhead().ok());
    ExpectError(Lower(*s, {p.C}, {p.A}, "chain").status(),
                "stage 'Q' is computed at loop 'i_inner_outer' of stage 'C' without copy_ahead, "
                "where other stages are copied ahead; copy all of a loop's stages ahead or none");
  }
}

TEST(TeScheduleTest, TupleReducerKeepsOneAccumulatorPerValue) {
  testing::ArgmaxProgram p;
  auto s = Schedule::Create({p.Y});
  ASSERT_TRUE(s.ok()) << s.status();
  auto f = Lower(*s, {p.Y}, {p.X}, "argmax");
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string ir = ir::Print(*f);
  EXPECT_TRUE(Contains(ir, "alloc Y_acc0: i32[1] local"));
  EXPECT_TRUE(Contains(ir, "alloc Y_acc1: f32[1] local"));
  EXPECT_TRUE(Contains(ir, "Y[i] = Y_acc0[0]"));
  // No factoring, no subgroups; across threads, one shared array per value.
  Stage y = (*s)[p.Y];
  auto k = y.Split(y.reduce_axis(0), 32);
  ASSERT_TRUE(k.ok());
  ExpectError(s->Rfactor(p.Y, k->inner).status(),
              "rfactor of stage 'Y': the stage reduces with user-defined reducer 'argmax'");
  ASSERT_TRUE(y.Bind(k->inner, ThreadAxis::kThreadX).ok());
  auto across = Lower(*s, {p.Y}, {p.X}, "argmax");
  ASSERT_TRUE(across.ok()) << across.status();
  const std::string tree = ir::Print(*across);
  EXPECT_TRUE(Contains(tree, "alloc Y_red0: i32[32] shared")) << tree;
  EXPECT_TRUE(Contains(tree, "alloc Y_red1: f32[32] shared")) << tree;
  // Through subgroups: a butterfly of shuffles, each value shuffled, with
  // offsets below the width (16 .. 1), twice (the lanes, then the slots).
  ASSERT_TRUE(y.SubgroupReduce().ok());
  auto shuffled = Lower(*s, {p.Y}, {p.X}, "argmax");
  ASSERT_TRUE(shuffled.ok()) << shuffled.status();
  const std::string butterfly = ir::Print(*shuffled);
  const size_t shuffles = Occurrences(butterfly, "subgroup_shuffle(");
  EXPECT_EQ(shuffles, 2u * 2u * 5u) << butterfly;
  EXPECT_TRUE(Contains(butterfly, "bitwise_xor(k_inner_lane, 16)")) << butterfly;
  EXPECT_FALSE(Contains(butterfly, "bitwise_xor(k_inner_lane, 32)")) << butterfly;
  // The record, replayed on a fresh schedule: equal, same kernel.
  EXPECT_EQ(s->primitives().back().ToString(), "Y.subgroup_reduce()");
  auto fresh = Schedule::Create({p.Y});
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  ASSERT_TRUE(fresh->Apply(s->primitives()).ok());
  EXPECT_TRUE(*fresh == *s);
  auto again = Lower(*fresh, {p.Y}, {p.X}, "argmax");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(ir::Print(*again), butterfly);
}

TEST(TeScheduleTest, ACopyAheadOfATupleReductionAllocatesItsAccumulatorsPerCopy) {
  // The prologue's copy and the loop's copy of the next step each hold
  // their own accumulators (the IR defines each buffer once).
  testing::ArgmaxProgram p;
  auto s = Schedule::Create({p.Y});
  ASSERT_TRUE(s.ok()) << s.status();
  auto cached = s->CacheWrite(p.Y, ir::MemoryScope::kShared);
  ASSERT_TRUE(cached.ok()) << cached.status();
  Stage y = (*s)[p.Y];
  auto split = y.Split(y.axis(0), 2);
  ASSERT_TRUE(split.ok());
  Stage c = (*s)[*cached];
  ASSERT_TRUE(c.CopyAhead().ok());
  ASSERT_TRUE(c.ComputeAt(y, split->outer).ok());
  auto f = Lower(*s, {p.Y}, {p.X}, "argmax");
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string ir = ir::Print(*f);
  // The printer names a second buffer of one name with a suffix.
  EXPECT_TRUE(Contains(ir, "alloc Y_shared_acc0: i32[1] local"));
  EXPECT_TRUE(Contains(ir, "alloc Y_shared_acc0_1: i32[1] local"));
  EXPECT_TRUE(Contains(ir, "alloc Y_shared_acc1_1: f32[1] local"));
}

TEST(TeScheduleTest, SubgroupShufflesNeedAPowerOfTwoWidth) {
  testing::ArgmaxProgram p;
  auto s = Schedule::Create({p.Y});
  ASSERT_TRUE(s.ok()) << s.status();
  Stage y = (*s)[p.Y];
  auto k = y.Split(y.reduce_axis(0), 48);
  ASSERT_TRUE(k.ok());
  ASSERT_TRUE(y.Bind(y.axis(0), ThreadAxis::kBlockX).ok());
  ASSERT_TRUE(y.Bind(k->inner, ThreadAxis::kThreadX).ok());
  ASSERT_TRUE(y.SubgroupReduce().ok());
  ExpectError(Lower(*s, {p.Y}, {p.X}, "argmax").status(),
              "its reduction runs over 48 threads; a reducer other than sum, max and min "
              "combines through shuffles, which need a power of two");
}

TEST(TeScheduleTest, SubgroupReduceChecksItsStage) {
  Var n = SizeVar("n");
  Tensor X = Placeholder("X", {n, n}, ir::kF32);
  IterVar k = ReduceAxis(n, "k");
  Tensor Y = Compute("Y", {n}, [&](const std::vector<Var>& i) { return Max(X(i[0], k), {k}); });
  Tensor P = Compute("P", {n}, [&](const std::vector<Var>& i) { return X(i[0], 0) * 2.0f; });
  auto s = Schedule::Create({Y, P});
  ASSERT_TRUE(s.ok()) << s.status();
  ExpectError((*s)[P].SubgroupReduce(),
              "subgroup_reduce of stage 'P': the stage is not a reduction");
  Stage y = (*s)[Y];
  ASSERT_TRUE(y.SubgroupReduce().ok());
  EXPECT_EQ(s->primitives().back().ToString(), "Y.subgroup_reduce()");
  // Lowering needs a reduction axis bound to threadIdx.x ...
  ExpectError(Lower(*s, {Y}, {X}, "m").status(),
              "stage 'Y' asks for subgroup_reduce but binds no reduction axis to threadIdx.x");
  // ... that is the workgroup's only thread axis.
  auto kk = y.Split(y.reduce_axis(0), 64);
  auto rr = y.Split(y.axis(0), 2);
  ASSERT_TRUE(kk.ok() && rr.ok());
  ASSERT_TRUE(y.Bind(rr->outer, ThreadAxis::kBlockX).ok());
  ASSERT_TRUE(y.Bind(rr->inner, ThreadAxis::kThreadY).ok());
  ASSERT_TRUE(y.Bind(kk->inner, ThreadAxis::kThreadX).ok());
  ExpectError(Lower(*s, {Y}, {X}, "m").status(),
              "its reduction axis is not the workgroup's only thread axis");
}

TEST(TeScheduleTest, MalformedReducersAreErrors) {
  Var n = SizeVar("n");
  Tensor X = Placeholder("X", {n, n}, ir::kF32);
  IterVar k = ReduceAxis(n, "k");
  CommReducer two_identities{"bad",
                             {ir::FloatConst(ir::kF32, 0), ir::FloatConst(ir::kF32, 0)},
                             [](const std::vector<Expr>& a, const std::vector<Expr>& b) {
                               return std::vector<Expr>{a[0] + b[0]};
                             }};
  Tensor Y = Compute("Y", {n}, [&](const std::vector<Var>& i) {
    return Reduce(two_identities, {X(i[0], k)}, {k})[0];
  });
  ExpectError(Schedule::Create({Y}).status(),
              "compute 'Y': reducer 'bad' reduces 1 values but has 2 identities and combine "
              "gives 1");
  CommReducer wrong_type{"mixed",
                         {ir::IntConst(ir::kI32, 0)},
                         [](const std::vector<Expr>& a, const std::vector<Expr>& b) {
                           return std::vector<Expr>{a[0] + b[0]};
                         }};
  IterVar k2 = ReduceAxis(n, "k2");
  Tensor Z = Compute("Z", {n}, [&](const std::vector<Var>& i) {
    return Reduce(wrong_type, {X(i[0], k2)}, {k2})[0];
  });
  ExpectError(Schedule::Create({Z}).status(),
              "compute 'Z': reducer 'mixed': identity 0 is i32 but value 0 is f32");
  // The combine function sees the values it combines, not an axis (where
  // partial results combine across threads, an axis has no one value).
  IterVar k3 = ReduceAxis(n, "k3");
  CommReducer uses_axis{"r",
                        {ir::FloatConst(ir::kF32, 0)},
                        [&](const std::vector<Expr>& a, const std::vector<Expr>& b) {
                          return std::vector<Expr>{a[0] + b[0] + ir::Cast(ir::kF32, k3.var())};
                        }};
  Tensor W = Compute("W", {n}, [&](const std::vector<Var>& i) {
    return Reduce(uses_axis, {X(i[0], k3)}, {k3})[0];
  });
  ExpectError(Schedule::Create({W}).status(),
              "compute 'W': reducer 'r' uses axis 'k3' in its combine function or identity, "
              "which may use only the values they combine (acc and next), constants and size "
              "vars");
  // Nor a tensor (each thread's partial would start from it).
  IterVar k4 = ReduceAxis(n, "k4");
  CommReducer reads_x{"r2", {X(0, 0)}, [&](const std::vector<Expr>& a, const std::vector<Expr>& b) {
                        return std::vector<Expr>{a[0] + b[0]};
                      }};
  Tensor V = Compute(
      "V", {n}, [&](const std::vector<Var>& i) { return Reduce(reads_x, {X(i[0], k4)}, {k4})[0]; });
  ExpectError(Schedule::Create({V}).status(),
              "compute 'V': reducer 'r2' reads tensor 'X' in its combine function or identity");
}

// A kernel's name is an identifier of the IR's text form, checked before
// lowering; a body that reads a tensor since freed names it.
TEST(TeScheduleTest, KernelNamesAndFreedTensors) {
  Tensor X = Placeholder("X", {8}, ir::kF32);
  Tensor B = Compute("B", {8}, [&](const std::vector<Var>& i) { return X(i[0]) * 2.0f; });
  auto s = Schedule::Create({B});
  ASSERT_TRUE(s.ok());
  for (const char* bad : {"", "fn", "f32", "1abc", "a b", "exp"}) {
    const std::string want = StrCat("lowering '", bad, "': the kernel name '", bad,
                                    "' is not an identifier ([A-Za-z_][A-Za-z0-9_]*, not a word "
                                    "the IR reserves such as fn, let, f32 or exp)");
    ExpectError(Lower(*s, {B}, {X}, bad).status(), want);
    ExpectError(LowerKernels(*s, {B}, {X}, bad).status(), want);
  }
  EXPECT_TRUE(Lower(*s, {B}, {X}, "_k2").ok());
  Expr read_of_freed;
  {
    Tensor T = Compute("T", {8}, [&](const std::vector<Var>& i) { return X(i[0]) * 3.0f; });
    read_of_freed = T(0);
  }
  Tensor C = Compute("C", {8}, [&](const std::vector<Var>& i) { return read_of_freed + X(i[0]); });
  ExpectError(Schedule::Create({C}).status(),
              "compute 'C' reads tensor 'T', which no longer exists: keep the tensor (what "
              "placeholder or compute returned) while expressions that read it are in use");
  // Tensors belong to the thread that made them.
  Status on_other_thread;
  std::thread([&] {
    Tensor Z = Compute("Z", {8}, [&](const std::vector<Var>& i) { return X(i[0]) + 1.0f; });
    on_other_thread = Schedule::Create({Z}).status();
  }).join();
  ExpectError(on_other_thread,
              "compute 'Z' reads buffer 'X', which is not a tensor made on this thread (tensors, "
              "like axes, belong to the thread that made them)");
}

// An inlined stage has no loops of its own: naming it as an output is an
// error (it would never be stored), whichever order the outputs come in.
TEST(TeScheduleTest, AnInlinedStageIsNoOutput) {
  Tensor X = Placeholder("X", {8}, ir::kF32);
  Tensor B = Compute("B", {8}, [&](const std::vector<Var>& i) { return X(i[0]) * 2.0f; });
  Tensor C = Compute("C", {8}, [&](const std::vector<Var>& i) { return B(i[0]) + 1.0f; });
  auto s = Schedule::Create({C});
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)[B].ComputeInline().ok());
  const char* want =
      "lowering 'k': output 'B' is inlined (compute_inline) into its readers and has no loops "
      "of its own; an output cannot be inlined";
  ExpectError(Lower(*s, {B}, {X}, "k").status(), want);
  ExpectError(LowerKernels(*s, {C, B}, {X}, "k").status(), want);
  ExpectError(LowerKernels(*s, {B, C}, {X}, "k").status(), want);
  EXPECT_TRUE(Lower(*s, {C}, {X}, "k").ok());
}

TEST(TeScheduleTest, LowerKernelsSplitsAtRootStages) {
  Var n = SizeVar("n");
  Tensor X = Placeholder("X", {n}, ir::kF32);
  Tensor Unused = Placeholder("Unused", {n}, ir::kF32);
  Tensor B = Compute("B", {n}, [&](const std::vector<Var>& i) { return X(i[0]) * 2.0f; });
  Tensor C = Compute("C", {n}, [&](const std::vector<Var>& i) { return B(n - 1 - i[0]); });
  auto s = Schedule::Create({C});
  ASSERT_TRUE(s.ok());
  ExpectError(Lower(*s, {C}, {X}, "rev").status(),
              "stage 'B' is read by 'C' but is neither inlined, computed at another stage nor "
              "an output (LowerKernels makes it a kernel of its own)");
  auto k = LowerKernels(*s, {C}, {X, Unused}, "rev");
  ASSERT_TRUE(k.ok()) << k.status();
  ASSERT_EQ(k->functions.size(), 2u);
  ASSERT_EQ(k->intermediates.size(), 1u);
  EXPECT_TRUE(k->intermediates[0].same_as(B));
  // Each kernel takes what it reads, then its result, then its sizes.
  EXPECT_TRUE(Contains(ir::Print(k->functions[0]),
                       "fn rev_B(X: buffer<f32>[n], B: buffer<f32>[n], n: i32)"));
  EXPECT_TRUE(Contains(ir::Print(k->functions[1]),
                       "fn rev_C(B: buffer<f32>[n], C: buffer<f32>[n], n: i32)"));
}

TEST(TeScheduleTest, CancelTermsCollectsLinearSums) {
  Var a("a", ir::kI32), b("b", ir::kI32);
  EXPECT_EQ(ir::Print(internal::CancelTerms(a * 32 + b - a * 32)), "b");
  EXPECT_EQ(ir::Print(internal::CancelTerms(a * 4 + 3 - (a * 4 + 1))), "2");
  EXPECT_EQ(internal::ConstantDifference(a * 8 + 7, a * 8), 7);
  EXPECT_FALSE(internal::ConstantDifference(a * 8, b * 8).has_value());
  // Interval arithmetic over a relaxed variable.
  internal::IntervalMap ranges{{b.get(), {ir::IntConst(ir::kI32, 0), ir::IntConst(ir::kI32, 7)}}};
  auto i = internal::EvalInterval(a * 8 + b, ranges);
  ASSERT_TRUE(i.has_value());
  EXPECT_EQ(internal::ConstantDifference(i->max, i->min), 7);
  EXPECT_FALSE(internal::EvalInterval(b * b, ranges).has_value());
}

// Clamped halos: no constant equals the region's size, but one bounds it
// over the loop's range; unbounded or symbolic differences give none.
TEST(TeScheduleTest, DifferenceUpperBoundThroughMinAndMax) {
  Var i("i", ir::kI32), n("n", ir::kI32);
  auto c = [](int64_t v) { return ir::IntConst(ir::kI32, v); };
  internal::IntervalMap ranges{{i.get(), {c(0), c(249)}}};
  const ir::Expr hi = ir::Max(ir::Min(i * 4 + 4, c(999)), ir::Max(i * 4 + 2, c(0)));
  const ir::Expr lo = ir::Min(ir::Min(i * 4 + 1, c(999)), ir::Max(i * 4 - 1, c(0)));
  EXPECT_FALSE(internal::ConstantDifference(hi, lo).has_value());
  EXPECT_EQ(internal::DifferenceUpperBound(hi, lo, ranges), 5);
  EXPECT_EQ(internal::DifferenceUpperBound(i * 4 + 7, i * 4, ranges), 7);
  // Clamps far from the loop's values: the bound holds, from the range.
  EXPECT_EQ(internal::DifferenceUpperBound(ir::Max(i, c(5)), ir::Min(i, c(5)), ranges), 244);
  // A min/max under a sum is lifted first: 999 - |999 - (4 i + 4)| is
  // min(4 i + 4, 1994 - 4 i).
  const ir::Expr reflected = c(999) - ir::Max(c(999) - (i * 4 + 4), i * 4 + 4 - c(999));
  EXPECT_EQ(internal::DifferenceUpperBound(reflected, ir::Max(i * 4 - 1, c(0)), ranges), 5);
  // Unions of clamped reads merge clamps of one bound: max(i - 1, 0) and
  // max(i - 2, 0) are max(i - 2, 0) at the low end.
  internal::Interval u = internal::Union(internal::Interval::Point(ir::Max(i - 1, c(0))),
                                         internal::Interval::Point(ir::Min(i + 1, c(999))));
  u = internal::Union(u, internal::Interval::Point(ir::Max(i - 2, c(0))));
  u = internal::Union(u, internal::Interval::Point(ir::Min(i + 2, c(999))));
  EXPECT_EQ(ir::Print(u.min), "min(min(max(i - 2, 0), i + 1), 999)");
  EXPECT_EQ(ir::Print(u.max), "max(max(i - 1, 0), min(i + 2, 999))");
  // i against a clamp to a symbolic n, or i unranged: no constant bound.
  EXPECT_FALSE(internal::DifferenceUpperBound(ir::Max(i, n), i, ranges).has_value());
  EXPECT_FALSE(
      internal::DifferenceUpperBound(ir::Max(i * 4, c(0)), ir::Min(i, c(9)), {}).has_value());
}

// Clamps to a symbolic size, bounded through the loop's symbolic extent
// (n + 3) / 4: 4 ((n + 3) / 4) is at most n + 3.
TEST(TeScheduleTest, DifferenceUpperBoundThroughSymbolicExtents) {
  Var i("i", ir::kI32), n("n", ir::kI32), m("m", ir::kI32);
  auto c = [](int64_t v) { return ir::IntConst(ir::kI32, v); };
  const internal::IntervalMap ranges{{i.get(), {c(0), (n + 3) / 4 - 1}}};
  const std::unordered_set<const ir::VarNode*> sizes{n.get()};
  auto bound = [&](const ir::Expr& a, const ir::Expr& b) {
    return internal::DifferenceUpperBound(a, b, ranges, sizes);
  };
  // 4 i + 3 - n <= 4 ((n + 3) / 4) - 4 + 3 - n <= 2.
  EXPECT_EQ(bound(i * 4 + 3, n), 2);
  // Paired clamps: min(4 i + 4, n - 1) - min(4 i + 1, n - 1) <= 3.
  EXPECT_EQ(bound(ir::Min(i * 4 + 4, n - 1), ir::Min(i * 4 + 1, n - 1)), 3);
  // The three-point stencil's region, as lowering forms it: 6 elements.
  const ir::Expr hi = ir::Max(ir::Min(i * 4 + 4, n - 1), ir::Max(i * 4 + 2, c(0)));
  const ir::Expr lo = ir::Min(ir::Min(i * 4 + 1, n - 1), ir::Max(i * 4 - 1, c(0)));
  EXPECT_EQ(bound(hi, lo), 5);
  // A size under a negative coefficient counts as 0 only where it is
  // known >= 0; under a positive one it is unbounded.
  EXPECT_EQ(bound(c(1) - n, c(0)), 1);
  EXPECT_FALSE(internal::DifferenceUpperBound(c(1) - n, c(0), ranges).has_value());
  EXPECT_FALSE(bound(n, c(0)).has_value());
  // m is related to nothing: no bound.
  EXPECT_FALSE(bound(ir::Min(i * 4 + 4, n - 1), ir::Min(i * 4 + 1, m - 1)).has_value());
  EXPECT_EQ(bound(ir::Min(i * 4 + 4, m - 1), ir::Max(i * 4 - 1, c(0))), 5);  // m only lowers it
  EXPECT_FALSE(bound(i * 4 + 3, m).has_value());
  // Quotients: a coefficient that the divisor does not divide scales the
  // sum; a truncating division of what may be negative bounds nothing.
  EXPECT_EQ(bound(i * 2 + 2, n), 1);  // 2 ((n + 3) / 4) - n <= (3 - n) / 2
  EXPECT_EQ(bound(i * 3, n), -1);     // 3 ((n + 3) / 4) - 3 - n <= (-3 - n) / 4
  const internal::IntervalMap signed_ranges{{i.get(), {c(0), (m - 3) / 4}}};
  EXPECT_FALSE(internal::DifferenceUpperBound(i * 4, m, signed_ranges, {m.get()}).has_value());
  const internal::IntervalMap floor_ranges{
      {i.get(), {c(0), ir::BinaryNode::make(ir::BinaryOp::kFloorDiv, m - 3, c(4))}}};
  EXPECT_EQ(internal::DifferenceUpperBound(i * 4, m, floor_ranges, {}), -3);
  // Huge coefficients give up rather than overflow.
  const internal::IntervalMap huge{{i.get(), {c(0), n * 2147483647}}};
  EXPECT_FALSE(
      internal::DifferenceUpperBound(i * 2147483647 * 2147483647, n, huge, sizes).has_value());
}

// Digits: normalised (sorted, merged where contiguous, rejected where they
// overlap), and Spread / Compact inverse on the region's positions.
TEST(TeScheduleTest, DigitsSpreadAndCompactTheirPositions) {
  using internal::Digit;
  using internal::Digits;
  EXPECT_EQ(internal::NormalizeDigits({Digit{4, 2}, Digit{1, 4}}), (Digits{Digit{1, 8}}));
  EXPECT_EQ(internal::NormalizeDigits({Digit{32, 2}, Digit{7, 1}, Digit{1, 4}}),
            (Digits{Digit{1, 4}, Digit{32, 2}}));
  EXPECT_FALSE(internal::NormalizeDigits({Digit{1, 8}, Digit{4, 2}}).has_value());
  const Digits digits = {Digit{1, 4}, Digit{32, 2}, Digit{128, 3}};
  EXPECT_EQ(internal::DigitCount(digits), 24);
  EXPECT_EQ(internal::DigitSpan(digits), 256 + 32 + 3 + 1);
  std::vector<int64_t> offsets;
  for (int64_t p = 0; p < internal::DigitCount(digits); ++p) {
    const auto offset =
        ir::AsConstInt(ir::Simplify(internal::Spread(ir::IntConst(ir::kI32, p), digits)));
    ASSERT_TRUE(offset.has_value());
    offsets.push_back(*offset);
    const auto back =
        ir::AsConstInt(ir::Simplify(internal::Compact(ir::IntConst(ir::kI32, *offset), digits)));
    EXPECT_EQ(back, p) << *offset;
  }
  EXPECT_EQ(offsets[3], 3);
  EXPECT_EQ(offsets[4], 32);
  EXPECT_EQ(offsets[8], 128);
  EXPECT_EQ(offsets[23], 256 + 32 + 3);
}

// A double-buffered stage copies the next step's values ahead, so it may not
// read a single-buffered stage computed at the same loop (whose values are
// this step's).
TEST(TeScheduleTest, DoubleBufferedStagesDoNotReadSingleBufferedOnesAtTheirLoop) {
  testing::SharedChainProgram p(ir::IntConst(ir::kI32, 256));
  auto s = testing::ScheduleSharedChain(p, /*spread=*/false);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE((*s)[p.Q].DoubleBuffer().ok());
  ExpectError(Lower(*s, {p.C}, {p.A}, "chain").status(),
              "double-buffered stage 'Q' reads stage 'P', computed at the same loop without "
              "double buffering");
  // Both double-buffered: Q's copies wait for P's (a barrier between them
  // before the loop and in each step), one barrier at the top of each step.
  ASSERT_TRUE((*s)[p.P].DoubleBuffer().ok());
  auto both = Lower(*s, {p.C}, {p.A}, "chain");
  ASSERT_TRUE(both.ok()) << both.status();
  const std::string ir = ir::Print(*both);
  const size_t barriers = Occurrences(ir, "workgroup_barrier");
  EXPECT_EQ(barriers, 3u) << ir;
}

// Lowering verifies shared memory against the limits it is given (WebGPU's
// 16 KiB by default): a 5000-element f32 stage fits in 32 KiB only.
TEST(TeScheduleTest, LoweringChecksTheGivenLimits) {
  const int n = 5000;
  Tensor A = Placeholder("A", {n}, ir::kF32);
  Tensor P = Compute("P", {n}, [&](const std::vector<Var>& i) { return A(i[0]) * 2.0f; });
  Tensor C = Compute("C", {n}, [&](const std::vector<Var>& i) { return P(i[0]) + 1.0f; });
  auto s = Schedule::Create({C});
  ASSERT_TRUE(s.ok()) << s.status();
  Stage c = (*s)[C];
  auto whole = c.Split(c.axis(0), n);
  ASSERT_TRUE(whole.ok());
  ASSERT_TRUE(c.Bind(whole->outer, ThreadAxis::kBlockX).ok());
  Stage p = (*s)[P];
  ASSERT_TRUE(p.SetScope(ir::MemoryScope::kShared).ok());
  ASSERT_TRUE(p.ComputeAt(c, whole->outer).ok());
  ExpectError(Lower(*s, {C}, {A}, "big").status(),
              "lowering 'big': the kernel's shared buffers need 20000 bytes of workgroup storage "
              "(P_buf: f32[5000] 20000 bytes); the target allows 16384");
  TargetLimits larger;
  larger.max_workgroup_storage_bytes = 32768;
  EXPECT_TRUE(Lower(*s, {C}, {A}, "big", larger).ok());
}

}  // namespace
}  // namespace kiln::te
