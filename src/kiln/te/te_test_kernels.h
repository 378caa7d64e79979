// Tensor programs with the staging primitives (cache_read, cache_write,
// compute_at, storage_align, double_buffer, rfactor), shared by the CPU and
// device tests of te.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kiln/te/te.h"

namespace kiln::te::testing {

struct MatmulProgram {
  Var M = SizeVar("M"), N = SizeVar("N"), K = SizeVar("K");
  Tensor A = Placeholder("A", {M, K}, ir::kF32);
  Tensor B = Placeholder("B", {K, N}, ir::kF32);
  IterVar k = ReduceAxis(K, "k");
  Tensor C = Compute("C", {M, N},
                     [&](const std::vector<Var>& i) { return Sum(A(i[0], k) * B(k, i[1]), {k}); });
};

struct SharedMatmulOptions {
  int64_t tile = 32;       // of C per workgroup (tile x tile)
  int64_t per_thread = 4;  // of C per thread (per_thread x per_thread)
  int64_t k_tile = 8;
  bool storage_align = true;
  bool double_buffer = false;
  bool double_buffer_branch_free = false;         // ... its loads and stores under no branch
  bool copy_ahead = false;                        // single-buffered tiles copied one k step ahead
  bool copy_ahead_registers = false;              // ... through registers loaded before the math
  LastCopy copy_ahead_last = LastCopy::kSkipped;  // ... and its last step (branch_free, ...)
  // A thread's elements as groups of 4 spread across the tile (rows
  // 4 * ty + (tile / per_thread * 4) * g + i), not per_thread adjacent rows:
  // its registers and fragments are then strided regions.
  bool strided = false;
  // The accumulators' columns four at a time, a vector per update (a
  // reduction's data axis vectorized inside the reduction loops).
  bool vector_accumulators = false;
  bool fused_multiply_add = false;  // the accumulators' sums of products as fma
};

// The local accumulator stage's column axis `j` unrolled, or split by 4 with
// the lanes vectorized.
inline Status ScheduleAccumulatorColumns(Stage l, const IterVar& j, bool vectors) {
  if (!vectors) return l.Unroll(j);
  KILN_ASSIGN_OR_RETURN(SplitResult lanes, l.Split(j, 4));
  KILN_RETURN_IF_ERROR(l.Unroll(lanes.outer));
  return l.Vectorize(lanes.inner);
}

// C's tiles: a tile x tile block per workgroup (blockIdx.y, blockIdx.x),
// per_thread x per_thread of it per thread (threadIdx.y, threadIdx.x), or
// where `strided` groups of 4 of it tile / per_thread * 4 apart; returns the
// per-thread splits (outer: the thread, inner: its elements).
inline StatusOr<std::pair<SplitResult, SplitResult>> TileOverThreads(Stage c, int64_t tile,
                                                                     int64_t per_thread,
                                                                     bool strided = false) {
  KILN_ASSIGN_OR_RETURN(Stage::TileResult t, c.Tile(c.axis(0), c.axis(1), tile, tile));
  SplitResult ti, tj;
  if (strided) {
    // x = group * (threads * 4) + thread * 4 + lane.
    KILN_ASSIGN_OR_RETURN(SplitResult xi, c.Split(t.x_inner, 4));
    KILN_ASSIGN_OR_RETURN(SplitResult xg, c.Split(xi.outer, tile / per_thread));
    KILN_ASSIGN_OR_RETURN(SplitResult yi, c.Split(t.y_inner, 4));
    KILN_ASSIGN_OR_RETURN(SplitResult yg, c.Split(yi.outer, tile / per_thread));
    KILN_RETURN_IF_ERROR(c.Reorder({xg.inner, yg.inner, xg.outer, xi.inner, yg.outer, yi.inner}));
    ti = {xg.inner, xi.inner};
    tj = {yg.inner, yi.inner};
  } else {
    KILN_ASSIGN_OR_RETURN(ti, c.Split(t.x_inner, per_thread));
    KILN_ASSIGN_OR_RETURN(tj, c.Split(t.y_inner, per_thread));
    KILN_RETURN_IF_ERROR(c.Reorder({ti.outer, tj.outer, ti.inner, tj.inner}));
  }
  KILN_RETURN_IF_ERROR(c.Bind(t.x_outer, ThreadAxis::kBlockY));
  KILN_RETURN_IF_ERROR(c.Bind(t.y_outer, ThreadAxis::kBlockX));
  KILN_RETURN_IF_ERROR(c.Bind(ti.outer, ThreadAxis::kThreadY));
  KILN_RETURN_IF_ERROR(c.Bind(tj.outer, ThreadAxis::kThreadX));
  return std::pair{ti, tj};
}

// The classic GPU matmul schedule: a workgroup per tile of C, each thread a
// register tile (C cached locally, computed at the thread loop and reduced
// with k outside its data loops), and tiles of A and B staged in shared
// memory at each step of k, loaded cooperatively by all the threads.
inline StatusOr<Schedule> ScheduleSharedMatmul(const MatmulProgram& p,
                                               const SharedMatmulOptions& o = {}) {
  KILN_ASSIGN_OR_RETURN(Schedule s, Schedule::Create({p.C}));
  KILN_ASSIGN_OR_RETURN(Tensor as, s.CacheRead(p.A, ir::MemoryScope::kShared, {p.C}));
  KILN_ASSIGN_OR_RETURN(Tensor bs, s.CacheRead(p.B, ir::MemoryScope::kShared, {p.C}));
  KILN_ASSIGN_OR_RETURN(Tensor cl, s.CacheWrite(p.C, ir::MemoryScope::kLocal));
  Stage c = s[p.C];
  KILN_ASSIGN_OR_RETURN(auto threads_split, TileOverThreads(c, o.tile, o.per_thread, o.strided));
  const auto& [ti, tj] = threads_split;

  Stage l = s[cl];
  KILN_RETURN_IF_ERROR(l.ComputeAt(c, tj.outer));
  KILN_ASSIGN_OR_RETURN(SplitResult kk, l.Split(l.reduce_axis(0), o.k_tile));
  KILN_RETURN_IF_ERROR(l.Reorder({kk.outer, kk.inner, l.axis(0), l.axis(1)}));
  KILN_RETURN_IF_ERROR(l.Unroll(l.axis(0)));
  KILN_RETURN_IF_ERROR(ScheduleAccumulatorColumns(l, l.axis(1), o.vector_accumulators));
  if (o.fused_multiply_add) KILN_RETURN_IF_ERROR(l.FusedMultiplyAdd());

  const int64_t threads = (o.tile / o.per_thread) * (o.tile / o.per_thread);
  for (const Tensor& t_shared : {as, bs}) {
    Stage st = s[t_shared];
    KILN_RETURN_IF_ERROR(st.ComputeAt(l, kk.outer));
    if (o.storage_align) KILN_RETURN_IF_ERROR(st.StorageAlign(st.axis(0), 32, 1));
    if (o.double_buffer) KILN_RETURN_IF_ERROR(st.DoubleBuffer(o.double_buffer_branch_free));
    if (o.copy_ahead) {
      KILN_RETURN_IF_ERROR(st.CopyAhead(o.copy_ahead_registers, o.copy_ahead_last));
    }
    // The tile's elements, spread over the threads of the workgroup.
    KILN_ASSIGN_OR_RETURN(IterVar fused, st.Fuse(st.axis(0), st.axis(1)));
    KILN_ASSIGN_OR_RETURN(SplitResult f, st.Split(fused, threads));
    KILN_ASSIGN_OR_RETURN(SplitResult fy, st.Split(f.inner, o.tile / o.per_thread));
    KILN_RETURN_IF_ERROR(st.Bind(fy.outer, ThreadAxis::kThreadY));
    KILN_RETURN_IF_ERROR(st.Bind(fy.inner, ThreadAxis::kThreadX));
  }
  return s;
}

// The matmul with A read through a transposing stage (k-major in shared
// memory, as the library's GEMM keeps it), at constant sizes.
struct TransposedAMatmulProgram {
  TransposedAMatmulProgram(int64_t m, int64_t n, int64_t k_extent)
      : A(Placeholder("A", {ir::IntConst(ir::kI32, m), ir::IntConst(ir::kI32, k_extent)},
                      ir::kF32)),
        B(Placeholder("B", {ir::IntConst(ir::kI32, k_extent), ir::IntConst(ir::kI32, n)},
                      ir::kF32)),
        k(ReduceAxis(ir::IntConst(ir::kI32, k_extent), "k")),
        AT(Compute("AT", {ir::IntConst(ir::kI32, k_extent), ir::IntConst(ir::kI32, m)},
                   [this](const std::vector<Var>& i) { return A(i[1], i[0]); })),
        C(Compute(
            "C", {ir::IntConst(ir::kI32, m), ir::IntConst(ir::kI32, n)},
            [this](const std::vector<Var>& i) { return Sum(AT(k, i[0]) * B(k, i[1]), {k}); })) {}
  Tensor A, B;
  IterVar k;
  Tensor AT, C;
};

struct RegisterTiledMatmulOptions {
  int64_t tile = 128;      // of C per workgroup (tile x tile)
  int64_t per_thread = 8;  // of C per thread (per_thread x per_thread)
  int64_t k_tile = 16;
  bool vector_accumulators = false;  // as in SharedMatmulOptions
};

// A register-tiled matmul in TE primitives alone: the schedule of
// ScheduleSharedMatmul, plus A transposed into shared memory by its own
// stage (loaded along k, four elements at a time), each thread's rows of
// A and columns of B for one k-step copied into registers as 4-lane
// vectors (cache_read into local, computed at the k-step, vectorized), and
// every loop inside a thread unrolled, so its accumulators, fragments and
// indices are constants (separate registers in WGSL). The sizes must be
// constants that the tiles divide (the vector copies need whole tiles).
inline StatusOr<Schedule> ScheduleRegisterTiledMatmul(const TransposedAMatmulProgram& p,
                                                      const RegisterTiledMatmulOptions& o = {}) {
  KILN_ASSIGN_OR_RETURN(Schedule s, Schedule::Create({p.C}));
  KILN_RETURN_IF_ERROR(s[p.AT].SetScope(ir::MemoryScope::kShared));
  KILN_ASSIGN_OR_RETURN(Tensor bs, s.CacheRead(p.B, ir::MemoryScope::kShared, {p.C}));
  KILN_ASSIGN_OR_RETURN(Tensor cl, s.CacheWrite(p.C, ir::MemoryScope::kLocal));
  KILN_ASSIGN_OR_RETURN(Tensor al, s.CacheRead(p.AT, ir::MemoryScope::kLocal, {cl}));
  KILN_ASSIGN_OR_RETURN(Tensor bl, s.CacheRead(bs, ir::MemoryScope::kLocal, {cl}));
  Stage c = s[p.C];
  KILN_ASSIGN_OR_RETURN(auto threads_split, TileOverThreads(c, o.tile, o.per_thread));
  const auto& [ti, tj] = threads_split;
  KILN_RETURN_IF_ERROR(c.Unroll(ti.inner));
  // C stored from the registers four elements at a time.
  KILN_ASSIGN_OR_RETURN(SplitResult cv, c.Split(tj.inner, 4));
  KILN_RETURN_IF_ERROR(c.Unroll(cv.outer));
  KILN_RETURN_IF_ERROR(c.Vectorize(cv.inner));

  Stage l = s[cl];
  KILN_RETURN_IF_ERROR(l.ComputeAt(c, tj.outer));
  KILN_ASSIGN_OR_RETURN(SplitResult kk, l.Split(l.reduce_axis(0), o.k_tile));
  KILN_RETURN_IF_ERROR(l.Reorder({kk.outer, kk.inner, l.axis(0), l.axis(1)}));
  KILN_RETURN_IF_ERROR(l.Unroll(kk.inner));
  KILN_RETURN_IF_ERROR(l.Unroll(l.axis(0)));
  KILN_RETURN_IF_ERROR(ScheduleAccumulatorColumns(l, l.axis(1), o.vector_accumulators));

  const int64_t side = o.tile / o.per_thread;
  const int64_t threads = side * side;
  for (const Tensor& shared : {p.AT, bs}) {
    Stage st = s[shared];
    KILN_RETURN_IF_ERROR(st.ComputeAt(l, kk.outer));
    IterVar fused;
    if (shared.same_as(p.AT)) {
      // m outer and k inner: each thread loads four consecutive k of A.
      KILN_RETURN_IF_ERROR(st.Reorder({st.axis(1), st.axis(0)}));
      KILN_ASSIGN_OR_RETURN(fused, st.Fuse(st.axis(1), st.axis(0)));
    } else {
      KILN_ASSIGN_OR_RETURN(fused, st.Fuse(st.axis(0), st.axis(1)));
    }
    KILN_ASSIGN_OR_RETURN(SplitResult lanes, st.Split(fused, 4));
    KILN_ASSIGN_OR_RETURN(SplitResult f, st.Split(lanes.outer, threads));
    KILN_ASSIGN_OR_RETURN(SplitResult fy, st.Split(f.inner, side));
    KILN_RETURN_IF_ERROR(st.Bind(fy.outer, ThreadAxis::kThreadY));
    KILN_RETURN_IF_ERROR(st.Bind(fy.inner, ThreadAxis::kThreadX));
    KILN_RETURN_IF_ERROR(st.Vectorize(lanes.inner));
  }
  for (const Tensor& fragment : {al, bl}) {
    Stage st = s[fragment];
    KILN_RETURN_IF_ERROR(st.ComputeAt(l, kk.inner));
    KILN_ASSIGN_OR_RETURN(SplitResult lanes, st.Split(st.axis(1), 4));
    KILN_RETURN_IF_ERROR(st.Unroll(st.axis(0)));
    KILN_RETURN_IF_ERROR(st.Unroll(lanes.outer));
    KILN_RETURN_IF_ERROR(st.Vectorize(lanes.inner));
  }
  return s;
}

struct RowSumProgram {
  Var rows = SizeVar("rows"), cols = SizeVar("cols");
  Tensor X = Placeholder("X", {rows, cols}, ir::kF32);
  IterVar k = ReduceAxis(cols, "k");
  Tensor Y = Compute("Y", {rows}, [&](const std::vector<Var>& i) { return Sum(X(i[0], k), {k}); });
};

// A row per workgroup: k split by `threads`, rfactor'd on the inner part so
// each thread sums a strided slice, then a tree across the threads.
inline StatusOr<Schedule> ScheduleRowSumAcrossThreads(const RowSumProgram& p, int64_t threads) {
  KILN_ASSIGN_OR_RETURN(Schedule s, Schedule::Create({p.Y}));
  Stage y = s[p.Y];
  KILN_ASSIGN_OR_RETURN(SplitResult kk, y.Split(y.reduce_axis(0), threads));
  KILN_ASSIGN_OR_RETURN(Tensor rf, s.Rfactor(p.Y, kk.inner));
  KILN_RETURN_IF_ERROR(y.Bind(y.axis(0), ThreadAxis::kBlockX));
  KILN_RETURN_IF_ERROR(y.Bind(y.reduce_axis(0), ThreadAxis::kThreadX));
  KILN_RETURN_IF_ERROR(s[rf].ComputeAt(y, y.reduce_axis(0)));
  return s;
}

// A chain C = (2 A + 1) * 3 through two computes P = 2 A and Q = P + 1.
struct SharedChainProgram {
  explicit SharedChainProgram(Expr n) : n(std::move(n)) {}
  Expr n;
  Tensor A = Placeholder("A", {n}, ir::kF32);
  Tensor P = Compute("P", {n}, [&](const std::vector<Var>& i) { return A(i[0]) * 2.0f; });
  Tensor Q = Compute("Q", {n}, [&](const std::vector<Var>& i) { return P(i[0]) + 1.0f; });
  Tensor C = Compute("C", {n}, [&](const std::vector<Var>& i) { return Q(i[0]) * 3.0f; });
};

// C in blocks of 64 over blockIdx.x, each block in 8 serial steps of 8
// threads; P and Q in shared memory, computed at the step loop (by 8
// threads each when `spread`, else by the first thread).
inline StatusOr<Schedule> ScheduleSharedChain(const SharedChainProgram& p, bool spread) {
  KILN_ASSIGN_OR_RETURN(Schedule s, Schedule::Create({p.C}));
  Stage c = s[p.C];
  KILN_ASSIGN_OR_RETURN(SplitResult blocks, c.Split(c.axis(0), 64));
  KILN_ASSIGN_OR_RETURN(SplitResult steps, c.Split(blocks.inner, 8));
  KILN_RETURN_IF_ERROR(c.Bind(blocks.outer, ThreadAxis::kBlockX));
  KILN_RETURN_IF_ERROR(c.Bind(steps.inner, ThreadAxis::kThreadX));
  for (const Tensor& t : {p.P, p.Q}) {
    Stage st = s[t];
    KILN_RETURN_IF_ERROR(st.SetScope(ir::MemoryScope::kShared));
    KILN_RETURN_IF_ERROR(st.ComputeAt(c, steps.outer));
    if (spread) {
      KILN_ASSIGN_OR_RETURN(SplitResult lanes, st.Split(st.axis(0), 8));
      KILN_RETURN_IF_ERROR(st.Bind(lanes.inner, ThreadAxis::kThreadX));
    }
  }
  return s;
}

// A stencil whose producer is computed per tile in shared memory: the
// region of P each tile reads is the tile plus a halo of 2.
struct StencilProgram {
  Var n = SizeVar("n");
  Tensor A = Placeholder("A", {n + 2}, ir::kF32);
  Tensor P = Compute("P", {n + 2}, [&](const std::vector<Var>& i) { return A(i[0]) * 2.0f; });
  Tensor C = Compute(
      "C", {n}, [&](const std::vector<Var>& i) { return P(i[0]) + P(i[0] + 1) + P(i[0] + 2); });
};

inline StatusOr<Schedule> ScheduleStencil(const StencilProgram& p, int64_t tile) {
  KILN_ASSIGN_OR_RETURN(Schedule s, Schedule::Create({p.C}));
  Stage c = s[p.C];
  KILN_ASSIGN_OR_RETURN(SplitResult i, c.Split(c.axis(0), tile));
  KILN_RETURN_IF_ERROR(c.Bind(i.outer, ThreadAxis::kBlockX));
  KILN_RETURN_IF_ERROR(c.Bind(i.inner, ThreadAxis::kThreadX));
  Stage pr = s[p.P];
  KILN_RETURN_IF_ERROR(pr.SetScope(ir::MemoryScope::kShared));
  KILN_RETURN_IF_ERROR(pr.ComputeAt(c, i.outer));
  KILN_ASSIGN_OR_RETURN(SplitResult j, pr.Split(pr.axis(0), tile));
  KILN_RETURN_IF_ERROR(pr.Bind(j.inner, ThreadAxis::kThreadX));
  return s;
}

// Argmax along rows with a tuple reducer over (index, value): the first
// index of the largest value.
inline CommReducer ArgmaxReducer() {
  // The larger value, then on equal values the smaller index: associative
  // and commutative, so partial results combine in any order.
  return CommReducer{"argmax",
                     {ir::IntConst(ir::kI32, 2147483647), ir::FloatConst(ir::kF32, -INFINITY)},
                     [](const std::vector<Expr>& acc, const std::vector<Expr>& next) {
                       const Expr take =
                           next[1] > acc[1] || (next[1] == acc[1] && next[0] < acc[0]);
                       return std::vector<Expr>{ir::Select(take, next[0], acc[0]),
                                                ir::Select(take, next[1], acc[1])};
                     }};
}

struct ArgmaxProgram {
  Var rows = SizeVar("rows"), cols = SizeVar("cols");
  Tensor X = Placeholder("X", {rows, cols}, ir::kF32);
  IterVar k = ReduceAxis(cols, "k");
  Tensor Y = Compute("Y", {rows}, [&](const std::vector<Var>& i) {
    return Reduce(ArgmaxReducer(), {k, X(i[0], k)}, {k})[0];
  });
};

}  // namespace kiln::te::testing
