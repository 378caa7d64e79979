#include "kiln/ops/gemm.h"

#include <string>
#include <utility>
#include <vector>

#include "kiln/ir/expr_ops.h"
#include "kiln/ir/mutator.h"
#include "kiln/ir/verifier.h"
#include "kiln/ops/internal.h"

namespace kiln::ops::internal {
namespace {

constexpr int kThreads = 16;  // along x (C's columns); along y, MatmulSchedule::threads_y
constexpr int kLanes = 4;

std::vector<te::Var> Prefix(const std::vector<te::Var>& v, size_t n) {
  return {v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n)};
}

// An index (coords..., x, y).
std::vector<ir::Expr> Index(const std::vector<te::Var>& coords, const ir::Expr& x,
                            const ir::Expr& y) {
  std::vector<ir::Expr> index(coords.begin(), coords.end());
  index.push_back(x);
  index.push_back(y);
  return index;
}

// The stages and the schedule.
class TeGemm {
 public:
  TeGemm(const TeGemmSpec& spec, const MatmulSchedule& schedule)
      : spec_(spec), s_(schedule), batch_rank_(spec.batch.size()) {}

  StatusOr<ir::Function> Build(const Target& target) {
    Define();
    KILN_ASSIGN_OR_RETURN(te::Schedule schedule, te::Schedule::Create({c_}));
    KILN_RETURN_IF_ERROR(Apply(schedule));
    KILN_ASSIGN_OR_RETURN(ir::Function f,
                          te::Lower(schedule, {c_}, spec_.inputs, spec_.name, target.limits));
    if (!spec_.out_index) return f;
    return StoreToOutput(f, target);
  }

 private:
  void Define() {
    std::vector<ir::Expr> tile_a = Extents(spec_.batch), tile_b = tile_a, out = tile_a;
    const int64_t m = spec_.m, n = spec_.n, k = spec_.k;
    for (auto [shape, x, y] : {std::tuple{&tile_a, k, m}, {&tile_b, k, n}, {&out, m, n}}) {
      shape->push_back(ir::IntConst(ir::kI32, x));
      shape->push_back(ir::IntConst(ir::kI32, y));
    }
    const size_t r = batch_rank_;
    a_tile_ = te::Compute("A_tile", tile_a, [&](const std::vector<te::Var>& i) {
      return spec_.a(Prefix(i, r), i[r], i[r + 1]);
    });
    b_tile_ = te::Compute("B_tile", tile_b, [&](const std::vector<te::Var>& i) {
      return spec_.b(Prefix(i, r), i[r], i[r + 1]);
    });
    te::IterVar kk = te::ReduceAxis(ir::IntConst(ir::kI32, k), "k");
    acc_ = te::Compute("acc", out, [&](const std::vector<te::Var>& i) {
      const std::vector<te::Var> coords = Prefix(i, r);
      ir::Expr x = a_tile_(Index(coords, kk.var(), i[r]));
      ir::Expr y = b_tile_(Index(coords, kk.var(), i[r + 1]));
      if (spec_.math == GemmMath::kDot4I8) {
        return te::Sum(ir::Call(ir::Intrinsic::kDot4I8,
                                {ir::Reinterpret(ir::kInt8x4, x), ir::Reinterpret(ir::kInt8x4, y)}),
                       {kk});
      }
      return te::Sum(x * y, {kk});
    });
    c_ = te::Compute("C", out, [&](const std::vector<te::Var>& i) {
      const std::vector<te::Var> coords = Prefix(i, r);
      ir::Expr sum = acc_(Index(coords, i[r], i[r + 1]));
      if (!spec_.epilogue) {
        return sum.dtype() == spec_.out_dtype ? sum : ir::Cast(spec_.out_dtype, sum);
      }
      if (sum.dtype() == ir::kF16) sum = ir::Cast(ir::kF32, sum);
      ir::Expr v = spec_.epilogue(sum, coords, i[r], i[r + 1]);
      return v.dtype() == spec_.out_dtype ? v : ir::Cast(spec_.out_dtype, v);
    });
  }

  // The function with C's stores sent to the output tensor (spec.out_index)
  // and C's parameter replaced by it.
  StatusOr<ir::Function> StoreToOutput(const ir::Function& f, const Target& target) const {
    const ir::Buffer c = f.params().back().buffer();
    const ir::Buffer out(spec_.out_name, spec_.out_dtype, Extents(spec_.out_shape));
    class Redirect : public ir::StmtMutator {
     public:
      Redirect(const TeGemmSpec& spec, ir::Buffer c, ir::Buffer out)
          : spec_(spec), c_(std::move(c)), out_(std::move(out)) {}
      ir::Stmt MutateStore(const ir::StoreNode* op, const ir::Stmt& s) override {
        if (!op->buffer.same_as(c_)) return ir::StmtMutator::MutateStore(op, s);
        const size_t r = op->indices.size() - 2;
        std::vector<ir::Expr> coords(op->indices.begin(),
                                     op->indices.begin() + static_cast<std::ptrdiff_t>(r));
        return ir::StoreNode::make(out_,
                                   spec_.out_index(coords, op->indices[r], op->indices[r + 1]),
                                   MutateExpr(op->value));
      }
      ir::Expr MutateLoad(const ir::LoadNode* op, const ir::Expr& e) override {
        if (op->buffer.same_as(c_)) read_c = true;
        return ir::StmtMutator::MutateLoad(op, e);
      }
      bool read_c = false;

     private:
      const TeGemmSpec& spec_;
      const ir::Buffer c_, out_;
    };
    Redirect redirect(spec_, c, out);
    ir::Stmt body = redirect.MutateStmt(f.body());
    if (redirect.read_c) return Internal(spec_.name, ": the GEMM's kernel reads C");
    std::vector<ir::Param> params = f.params();
    params.back() = ir::Param::FromBuffer(out);
    ir::Function g = f.WithBody(body).WithParams(params);
    ir::VerifyOptions options;
    options.limits = target.limits;
    KILN_RETURN_IF_ERROR(ir::Verify(g, options));
    return g;
  }

  // C's tile axis `x` (of block extent `block`) split into (tile, group,
  // thread, lane): x = tile * block + group * 64 + thread * 4 + lane.
  struct Split4 {
    te::IterVar tile, group, thread, lane;
  };
  static StatusOr<Split4> SplitTile(te::Stage& st, const te::IterVar& x, int64_t block,
                                    int64_t threads) {
    Split4 out;
    KILN_ASSIGN_OR_RETURN(te::SplitResult t, st.Split(x, block));
    KILN_ASSIGN_OR_RETURN(te::SplitResult l, st.Split(t.inner, kLanes));
    KILN_ASSIGN_OR_RETURN(te::SplitResult g, st.Split(l.outer, threads));
    return Split4{t.outer, g.outer, g.inner, l.inner};
  }

  Status Apply(te::Schedule& sch) {
    const int64_t bm = s_.block_m(), bn = s_.block_n();
    // Which tiles are whole (no guard against the extents): C's, and each
    // operand's.
    const bool whole_m = spec_.m % bm == 0, whole_n = spec_.n % bn == 0;
    const bool whole_k = spec_.k % s_.k_tile == 0;
    const size_t r = batch_rank_;

    // C: blocks, threads, each thread's strided 4 x 4 blocks.
    te::Stage c = sch[c_];
    KILN_ASSIGN_OR_RETURN(Split4 i, SplitTile(c, c.axis(static_cast<int>(r)), bm, s_.threads_y));
    KILN_ASSIGN_OR_RETURN(Split4 j, SplitTile(c, c.axis(static_cast<int>(r + 1)), bn, kThreads));
    std::vector<te::IterVar> order;
    for (size_t d = 0; d < r; ++d) order.push_back(c.axis(static_cast<int>(d)));
    for (const te::IterVar& a :
         {i.tile, j.tile, i.thread, j.thread, i.group, i.lane, j.group, j.lane}) {
      order.push_back(a);
    }
    KILN_RETURN_IF_ERROR(c.Reorder(order));
    te::IterVar block = order[0];
    for (size_t d = 1; d < r + 2; ++d) {
      KILN_ASSIGN_OR_RETURN(block, c.Fuse(block, order[d]));
    }
    KILN_RETURN_IF_ERROR(c.Bind(block, te::ThreadAxis::kBlockX));
    KILN_RETURN_IF_ERROR(c.Bind(i.thread, te::ThreadAxis::kThreadY));
    KILN_RETURN_IF_ERROR(c.Bind(j.thread, te::ThreadAxis::kThreadX));
    for (const te::IterVar& a : {i.group, i.lane, j.group}) KILN_RETURN_IF_ERROR(c.Unroll(a));
    if (whole_m && whole_n && spec_.out_vectors) {
      KILN_RETURN_IF_ERROR(c.Vectorize(j.lane));
    } else {
      KILN_RETURN_IF_ERROR(c.Unroll(j.lane));
    }

    // The accumulators, at the thread, k outside their loops.
    KILN_ASSIGN_OR_RETURN(te::Tensor a_frag,
                          sch.CacheRead(a_tile_, ir::MemoryScope::kLocal, {acc_}));
    KILN_ASSIGN_OR_RETURN(te::Tensor b_frag,
                          sch.CacheRead(b_tile_, ir::MemoryScope::kLocal, {acc_}));
    te::Stage acc = sch[acc_];
    KILN_RETURN_IF_ERROR(acc.SetScope(ir::MemoryScope::kLocal));
    KILN_RETURN_IF_ERROR(acc.ComputeAt(c, j.thread));
    KILN_ASSIGN_OR_RETURN(te::SplitResult ks, acc.Split(acc.reduce_axis(0), s_.k_tile));
    order = {ks.outer, ks.inner};
    for (const te::IterVar& a : acc.axes()) order.push_back(a);
    KILN_RETURN_IF_ERROR(acc.Reorder(order));
    if (s_.unroll_k) KILN_RETURN_IF_ERROR(acc.Unroll(ks.inner));
    if (s_.fused_multiply_add && spec_.math != GemmMath::kDot4I8) {
      KILN_RETURN_IF_ERROR(acc.FusedMultiplyAdd());
    }
    KILN_RETURN_IF_ERROR(acc.Unroll(acc.axis(static_cast<int>(r))));
    // Four columns at a time: a vector FMA of a broadcast A element and a
    // B fragment (dot4i8 takes scalar words).
    KILN_ASSIGN_OR_RETURN(te::SplitResult acc_lanes,
                          acc.Split(acc.axis(static_cast<int>(r + 1)), kLanes));
    KILN_RETURN_IF_ERROR(acc.Unroll(acc_lanes.outer));
    if (spec_.math == GemmMath::kDot4I8) {
      KILN_RETURN_IF_ERROR(acc.Unroll(acc_lanes.inner));
    } else {
      KILN_RETURN_IF_ERROR(acc.Vectorize(acc_lanes.inner));
    }

    // The operands' tiles in shared memory at each step of k.
    for (auto [tile, k_contiguous, vectors] :
         {std::tuple{a_tile_, spec_.a_k_contiguous, spec_.a_vectors && whole_m && whole_k},
          {b_tile_, spec_.b_k_contiguous, spec_.b_vectors && whole_n && whole_k}}) {
      te::Stage st = sch[tile];
      KILN_RETURN_IF_ERROR(st.SetScope(ir::MemoryScope::kShared));
      KILN_RETURN_IF_ERROR(st.ComputeAt(acc, ks.outer));
      // Single-buffered tiles are copied one k step ahead: 2-11% faster on
      // the H200 for f32, f16 and the convolution (BENCHMARKS.md, "Copies
      // one iteration ahead").
      if (s_.double_buffer) {
        KILN_RETURN_IF_ERROR(st.DoubleBuffer(s_.last_copy != te::LastCopy::kSkipped));
      }
      if (s_.CopiesAhead(spec_.math == GemmMath::kDot4I8)) {
        KILN_RETURN_IF_ERROR(st.CopyAhead(s_.copy_through_registers, s_.last_copy));
      }
      const te::IterVar kx = st.axis(static_cast<int>(r)), x = st.axis(static_cast<int>(r + 1));
      if (k_contiguous) KILN_RETURN_IF_ERROR(st.Reorder({x, kx}));
      KILN_ASSIGN_OR_RETURN(te::IterVar fused, k_contiguous ? st.Fuse(x, kx) : st.Fuse(kx, x));
      if (vectors) {
        KILN_ASSIGN_OR_RETURN(te::SplitResult lanes, st.Split(fused, kLanes));
        KILN_RETURN_IF_ERROR(st.Vectorize(lanes.inner));
        fused = lanes.outer;
      }
      KILN_ASSIGN_OR_RETURN(te::SplitResult per, st.Split(fused, s_.threads_y * kThreads));
      KILN_ASSIGN_OR_RETURN(te::SplitResult t, st.Split(per.inner, kThreads));
      KILN_RETURN_IF_ERROR(st.Bind(t.outer, te::ThreadAxis::kThreadY));
      KILN_RETURN_IF_ERROR(st.Bind(t.inner, te::ThreadAxis::kThreadX));
      if (per.outer.defined()) KILN_RETURN_IF_ERROR(st.Unroll(per.outer));
    }

    // Each k-step's fragments, as vectors.
    for (const te::Tensor& frag : {a_frag, b_frag}) {
      te::Stage st = sch[frag];
      KILN_RETURN_IF_ERROR(st.ComputeAt(acc, ks.inner));
      KILN_ASSIGN_OR_RETURN(te::SplitResult lanes,
                            st.Split(st.axis(static_cast<int>(r + 1)), kLanes));
      KILN_RETURN_IF_ERROR(st.Unroll(lanes.outer));
      KILN_RETURN_IF_ERROR(st.Vectorize(lanes.inner));
    }
    return Status::Ok();
  }

  const TeGemmSpec& spec_;
  const MatmulSchedule s_;
  const size_t batch_rank_;
  te::Tensor a_tile_, b_tile_, acc_, c_;
};

// That the math suits the spec and the target: the int8 GEMM writes i32
// with no epilogue; f16 math needs shader-f16.
Status CheckGemmMath(std::string_view name, GemmMath math, bool epilogue, ir::DataType out,
                     const Target& target) {
  if (math == GemmMath::kDot4I8 && (epilogue || out != ir::kI32)) {
    return Internal(name, ": the int8 GEMM writes i32 with no epilogue");
  }
  if (math == GemmMath::kF16 && !target.shader_f16) {
    return Unavailable(name, ": f16 accumulation needs shader-f16, which the target lacks");
  }
  return Status::Ok();
}

}  // namespace

Status CheckGemmSchedule(const MatmulSchedule& s, const Target& target, std::string_view what) {
  // A field out of its range is quoted as given (the tile it would make
  // can be any size); the rest by the tile it makes.
  auto bad_field = [&](const std::string& why) {
    return InvalidArgument(what, " schedule (rows ", s.rows, ", cols ", s.cols, ", k_tile ",
                           s.k_tile, ", threads_y ", s.threads_y, "): ", why);
  };
  if (s.rows != 1 && s.rows != 2 && s.rows != 4) return bad_field("rows must be 1, 2 or 4");
  if (s.cols != 1 && s.cols != 2 && s.cols != 4) return bad_field("cols must be 1, 2 or 4");
  if (s.k_tile != 8 && s.k_tile != 16 && s.k_tile != 32) {
    return bad_field("k_tile must be 8, 16 or 32");
  }
  if (s.threads_y != 8 && s.threads_y != 16) return bad_field("threads_y must be 8 or 16");
  if (static_cast<int>(s.last_copy) > static_cast<int>(te::LastCopy::kPeeled)) {
    return bad_field(StrCat("last_copy is ", static_cast<int>(s.last_copy),
                            "; it must be a te::LastCopy, 0 to 3"));
  }
  auto bad = [&](const std::string& why) {
    return InvalidArgument(what, " schedule ", s.ToString(), ": ", why);
  };
  if ((s.rows * s.k_tile) % 16 != 0 || (s.cols * s.k_tile) % 16 != 0) {
    return bad(
        "rows * k_tile and cols * k_tile must be multiples of 16 (each thread loads whole "
        "vectors of both tiles)");
  }
  if (s.last_copy != te::LastCopy::kSkipped && !s.copy_through_registers && !s.double_buffer) {
    return bad(
        "only tiles copied through registers or double-buffered treat the last k-step "
        "apart (copied directly, every copy is under a branch)");
  }
  if (s.double_buffer && s.last_copy != te::LastCopy::kSkipped &&
      s.last_copy != te::LastCopy::kLoadsAgain) {
    return bad(
        "a double buffer is branch-free or not; no_branch and peeled are for tiles "
        "copied ahead");
  }
  if (s.SharedBytes() > target.limits.max_workgroup_storage_bytes) {
    return bad(StrCat("its shared tiles take ", s.SharedBytes(),
                      " bytes; the target's workgroup storage is ",
                      target.limits.max_workgroup_storage_bytes));
  }
  if (target.limits.max_invocations_per_workgroup < uint32_t(s.threads_y * kThreads) ||
      target.limits.max_workgroup_size_x < uint32_t(kThreads) ||
      target.limits.max_workgroup_size_y < uint32_t(s.threads_y)) {
    return bad(StrCat("the target cannot run workgroups of ", kThreads, " x ", s.threads_y,
                      " invocations"));
  }
  return Status::Ok();
}

StatusOr<ir::Function> BuildTeGemm(const TeGemmSpec& spec, const MatmulSchedule& schedule,
                                   const Target& target) {
  KILN_RETURN_IF_ERROR(CheckGemmSchedule(schedule, target, spec.name));
  KILN_RETURN_IF_ERROR(
      CheckGemmMath(spec.name, spec.math, bool(spec.epilogue), spec.out_dtype, target));
  int64_t batch_count = 1;
  for (int64_t d : spec.batch) batch_count *= d;
  const int64_t blocks = batch_count * ((spec.m + schedule.block_m() - 1) / schedule.block_m()) *
                         ((spec.n + schedule.block_n() - 1) / schedule.block_n());
  if (blocks > (int64_t{1} << 31) - 1) {
    return InvalidArgument(spec.name, ": ", blocks, " workgroups is more than 2^31 - 1");
  }
  TeGemm gemm(spec, schedule);
  StatusOr<ir::Function> f = gemm.Build(target);
  if (!f.ok()) return Internal(spec.name, ": the GEMM's schedule failed: ", f.status().message());
  return f;
}

}  // namespace kiln::ops::internal
