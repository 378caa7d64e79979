#include "kiln/ops/gemm_kernel.h"

#include <algorithm>
#include <string>
#include <vector>

#include "kiln/ir/expr_ops.h"
#include "kiln/ir/verifier.h"
#include "kiln/ops/internal.h"

namespace kiln::ops::internal {
namespace {

using ir::Buffer;
using ir::Expr;
using ir::Var;

constexpr int kThreads = 16;           // per side of the workgroup
constexpr int kInvocations = 16 * 16;  // per workgroup

int64_t CeilDiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
Expr I32(int64_t v) {
  return ir::IntConst(ir::kI32, v);
}
Expr Vec(int start) {
  return ir::Ramp(I32(start), 1, 4);
}

// One operand's path from global memory to its shared tile. The tile holds
// k_tile rows of `tile` elements (the operand's M or N extent), k-major.
// Each thread moves `vectors` 4-element vectors per tile, along k where the
// source is contiguous in k, else along M/N.
class OperandTile {
 public:
  OperandTile(ir::IRBuilder& b, OperandSource source, int64_t extent, int64_t k, int64_t tile,
              int k_tile, Expr origin)
      : b_(b),
        src_(std::move(source)),
        tile_(tile),
        k_tile_(k_tile),
        origin_(std::move(origin)),
        vectors_(static_cast<int>(tile * k_tile / 4 / kInvocations)),
        whole_(extent % tile == 0 && k % k_tile == 0) {}

  int vectors() const { return vectors_; }

  // Per-thread offsets within the tile, fixed for the whole kernel.
  void Bind(const Var& tid, const std::string& prefix) {
    for (int q = 0; q < vectors_; ++q) {
      Expr idx = tid + q * kInvocations;
      const int64_t per_row = src_.k_contiguous ? k_tile_ / 4 : tile_ / 4;
      // k_contiguous: row is the M/N offset and col the k offset; else the reverse.
      rows_.push_back(b_.Let(StrCat(prefix, "_r", q), idx / static_cast<int>(per_row)));
      cols_.push_back(b_.Let(StrCat(prefix, "_c", q), (idx % static_cast<int>(per_row)) * 4));
    }
  }

  // Loads the tile at k offset `k0` into the stage registers.
  void Load(const Expr& k0, const Buffer& stage) {
    const bool kc = src_.k_contiguous;
    for (int q = 0; q < vectors_; ++q) {
      Expr outer = origin_ + (kc ? Expr(rows_[q]) : Expr(cols_[q]));
      Expr kk = k0 + (kc ? Expr(cols_[q]) : Expr(rows_[q]));
      if (whole_ && src_.vector) {
        b_.Store(stage, {Vec(4 * q)}, src_.vector(outer, kk));
        continue;
      }
      for (int e = 0; e < 4; ++e) {
        b_.Store(stage, {I32(4 * q + e)}, src_.element(kc ? outer : outer + e, kc ? kk + e : kk));
      }
    }
  }

  // Stores the stage registers into the shared tile at element offset `base`.
  void Store(const Buffer& shared, const Expr& base, const Buffer& stage) {
    const int tile = static_cast<int>(tile_);
    for (int q = 0; q < vectors_; ++q) {
      if (!src_.k_contiguous) {
        // One vector along M/N: k row rows_[q], elements cols_[q]..+3.
        b_.Store(shared, {ir::Ramp(base + rows_[q] * tile + cols_[q], 1, 4)},
                 ir::Load(stage, {Vec(4 * q)}));
        continue;
      }
      for (int e = 0; e < 4; ++e) {
        b_.Store(shared, {base + (cols_[q] + e) * tile + rows_[q]},
                 ir::Load(stage, {I32(4 * q + e)}));
      }
    }
  }

 private:
  ir::IRBuilder& b_;
  OperandSource src_;
  int64_t tile_;
  int k_tile_;
  Expr origin_;
  int vectors_;
  bool whole_;  // no tile reaches beyond the extents
  std::vector<Var> rows_, cols_;
};

// Writes one kernel: the launch and shared tiles (Build), each thread's
// set-up (Thread), the k loop (MainLoop, Math) and the epilogue.
class GemmKernel {
 public:
  GemmKernel(const GemmSpec& spec, const MatmulSchedule& schedule)
      : spec_(spec),
        s_(schedule),
        B_(spec.name),
        bm_(static_cast<int>(schedule.block_m())),
        bn_(static_cast<int>(schedule.block_n())),
        bk_(schedule.k_tile),
        tiles_m_(CeilDiv(spec.m, bm_)),
        tiles_n_(CeilDiv(spec.n, bn_)),
        tiles_k_(CeilDiv(spec.k, bk_)) {}

  StatusOr<ir::Function> Build(const Target& target) {
    int64_t batch_count = 1;
    for (int64_t d : spec_.batch) batch_count *= d;
    const int64_t blocks = batch_count * tiles_m_ * tiles_n_;
    if (blocks > (int64_t{1} << 31) - 1) {
      return InvalidArgument(spec_.name, ": ", blocks, " workgroups is more than 2^31 - 1");
    }
    C_ = spec_.declare(B_);
    const int64_t stages = s_.double_buffer ? 2 : 1;
    B_.For("block", ir::LoopKind::kBlockX, 0, I32(blocks), [&](const Var& block) {
      B_.Allocate("As", ir::kF32, {I32(stages * bk_ * bm_)}, ir::MemoryScope::kShared,
                  [&](const Buffer& As) {
                    As_ = As;
                    B_.Allocate("Bs", ir::kF32, {I32(stages * bk_ * bn_)}, ir::MemoryScope::kShared,
                                [&](const Buffer& Bs) {
                                  Bs_ = Bs;
                                  Threads(block);
                                });
                  });
    });
    ir::Function f = B_.Build();
    ir::VerifyOptions verify;
    verify.limits = target.limits;
    Status verified = ir::Verify(f, verify);
    if (!verified.ok()) {
      return Internal(spec_.name, ": the GEMM kernel is invalid: ", verified.message());
    }
    return f;
  }

 private:
  void Threads(const Var& block) {
    B_.For("ty", ir::LoopKind::kThreadY, 0, I32(kThreads), [&](const Var& ty) {
      B_.For("tx", ir::LoopKind::kThreadX, 0, I32(kThreads), [&](const Var& tx) {
        ty_ = ty;
        tx_ = tx;
        Thread(block);
      });
    });
  }

  // block = ((batch * tiles_m) + tile_m) * tiles_n + tile_n.
  void Thread(const Var& block) {
    Var tile_n = B_.Let("tile_n", block % static_cast<int>(tiles_n_));
    Var rest = B_.Let("rest", block / static_cast<int>(tiles_n_));
    Var tile_m = B_.Let("tile_m", rest % static_cast<int>(tiles_m_));
    Var batch = B_.Let("batch", rest / static_cast<int>(tiles_m_));
    coords_ = UnflattenIndex(B_, batch, spec_.batch, "b");
    m0_ = B_.Let("m0", tile_m * bm_);
    n0_ = B_.Let("n0", tile_n * bn_);
    Var tid = B_.Let("tid", ty_ * kThreads + tx_);
    OperandTile a_tile(B_, spec_.a(coords_), spec_.m, spec_.k, bm_, bk_, m0_);
    OperandTile b_tile(B_, spec_.b(coords_), spec_.n, spec_.k, bn_, bk_, n0_);
    a_tile.Bind(tid, "a");
    b_tile.Bind(tid, "b");
    const int accumulators = 16 * s_.rows * s_.cols;
    auto local = [&](const char* name, ir::DataType dtype, int size,
                     const std::function<void(const Buffer&)>& body) {
      B_.Allocate(name, dtype, {I32(size)}, ir::MemoryScope::kLocal, body);
    };
    local("acc", ir::kF32, accumulators, [&](const Buffer& acc) {
      local("a_frag", ir::kF32, 4 * s_.rows, [&](const Buffer& a_frag) {
        local("b_frag", ir::kF32, 4 * s_.cols, [&](const Buffer& b_frag) {
          local("a_next", ir::kF32, 4 * a_tile.vectors(), [&](const Buffer& a_next) {
            local("b_next", ir::kF32, 4 * b_tile.vectors(), [&](const Buffer& b_next) {
              acc_ = acc;
              a_frag_ = a_frag;
              b_frag_ = b_frag;
              for (int g = 0; g < accumulators / 4; ++g) {
                B_.Store(acc, {Vec(4 * g)}, ir::Broadcast(ir::FloatConst(ir::kF32, 0.0), 4));
              }
              MainLoop(a_tile, b_tile, a_next, b_next);
              Epilogue();
            });
          });
        });
      });
    });
  }

  void MainLoop(OperandTile& a_tile, OperandTile& b_tile, const Buffer& a_next,
                const Buffer& b_next) {
    const int a_stage = bk_ * bm_, b_stage = bk_ * bn_;
    // The first tile, into stage 0.
    a_tile.Load(I32(0), a_next);
    b_tile.Load(I32(0), b_next);
    a_tile.Store(As_, I32(0), a_next);
    b_tile.Store(Bs_, I32(0), b_next);
    B_.Barrier();
    B_.For("kt", ir::LoopKind::kSerial, 0, I32(tiles_k_), [&](const Var& kt) {
      if (s_.double_buffer) {
        // The next tile, or the last one again on the last step: no branch
        // around the loads, and the stage written after the math is not read
        // again.
        Expr cur = kt % 2;
        Expr next = ir::Min(kt + 1, static_cast<int>(tiles_k_ - 1)) * bk_;
        a_tile.Load(next, a_next);
        b_tile.Load(next, b_next);
        // One copy of the math per stage, so every shared read has a constant
        // offset from the thread's base (a branch uniform over the workgroup).
        B_.If(
            cur == 0, [&] { Math(I32(0), I32(0)); }, [&] { Math(I32(a_stage), I32(b_stage)); });
        a_tile.Store(As_, (1 - cur) * a_stage, a_next);
        b_tile.Store(Bs_, (1 - cur) * b_stage, b_next);
        B_.Barrier();
        return;
      }
      Math(I32(0), I32(0));
      B_.Barrier();
      B_.If(kt + 1 < static_cast<int>(tiles_k_), [&] {
        a_tile.Load((kt + 1) * bk_, a_next);
        b_tile.Load((kt + 1) * bk_, b_next);
        a_tile.Store(As_, I32(0), a_next);
        b_tile.Store(Bs_, I32(0), b_next);
      });
      B_.Barrier();
    });
  }

  // The k-steps of one shared tile: a thread's rows of A and columns of B
  // as vectors, then rows x cols outer products into the accumulators.
  void Math(const Expr& a_base, const Expr& b_base) {
    const ir::LoopKind kind = s_.unroll_k ? ir::LoopKind::kUnrolled : ir::LoopKind::kSerial;
    B_.For("kk", kind, 0, I32(bk_), [&](const Var& kk) {
      for (int r = 0; r < s_.rows; ++r) {
        B_.Store(a_frag_, {Vec(4 * r)},
                 ir::Load(As_, {ir::Ramp(a_base + kk * bm_ + r * 64 + ty_ * 4, 1, 4)}));
      }
      for (int c = 0; c < s_.cols; ++c) {
        B_.Store(b_frag_, {Vec(4 * c)},
                 ir::Load(Bs_, {ir::Ramp(b_base + kk * bn_ + c * 64 + tx_ * 4, 1, 4)}));
      }
      for (int r = 0; r < s_.rows; ++r) {
        for (int i = 0; i < 4; ++i) {
          for (int c = 0; c < s_.cols; ++c) {
            const int g = (r * 4 + i) * s_.cols + c;
            Expr a_value = ir::Broadcast(ir::Load(a_frag_, {I32(4 * r + i)}), 4);
            B_.Store(acc_, {Vec(4 * g)},
                     ir::Load(acc_, {Vec(4 * g)}) + a_value * ir::Load(b_frag_, {Vec(4 * c)}));
          }
        }
      }
    });
  }

  // v (the accumulator, 1 or 4 lanes) at (row, col..): the epilogue, then
  // the output.
  void Finish(Expr v, const Expr& row, const Expr& col) {
    const int lanes = v.dtype().lanes;
    Expr col_index = lanes == 1 ? col : ir::Ramp(col, 1, lanes);
    if (spec_.epilogue) v = spec_.epilogue(v, coords_, row, col_index);
    Expr out =
        spec_.dtype.with_lanes(lanes) == v.dtype() ? v : ir::Cast(spec_.dtype.with_lanes(lanes), v);
    B_.Store(C_, spec_.out_index(coords_, row, col_index), out);
  }

  void Epilogue() {
    const bool guard = spec_.m % bm_ != 0 || spec_.n % bn_ != 0;
    const bool vector = !guard && spec_.vector_store && !spec_.scalar_epilogue;
    for (int r = 0; r < s_.rows; ++r) {
      for (int i = 0; i < 4; ++i) {
        Var row = B_.Let(StrCat("row", r, i), m0_ + (ty_ * 4 + (r * 64 + i)));
        for (int c = 0; c < s_.cols; ++c) {
          const int g = (r * 4 + i) * s_.cols + c;
          Var col = B_.Let(StrCat("col", r, i, c), n0_ + (tx_ * 4 + c * 64));
          if (vector) {
            Finish(ir::Load(acc_, {Vec(4 * g)}), row, col);
            continue;
          }
          for (int j = 0; j < 4; ++j) {
            auto lane = [&] { Finish(ir::Load(acc_, {I32(4 * g + j)}), row, col + j); };
            if (!guard) {
              lane();
              continue;
            }
            B_.If((row < static_cast<int>(spec_.m)) && (col + j < static_cast<int>(spec_.n)), lane);
          }
        }
      }
    }
  }

  const GemmSpec& spec_;
  const MatmulSchedule s_;
  ir::IRBuilder B_;
  const int bm_, bn_, bk_;
  const int64_t tiles_m_, tiles_n_, tiles_k_;
  Buffer C_, As_, Bs_, acc_, a_frag_, b_frag_;
  Var ty_, tx_;
  Expr m0_, n0_;
  std::vector<Expr> coords_;
};

}  // namespace

StatusOr<ir::Function> BuildGemm(const GemmSpec& spec, const MatmulSchedule& schedule,
                                 const Target& target) {
  KILN_RETURN_IF_ERROR(CheckGemmSchedule(schedule, target, spec.name));
  GemmKernel kernel(spec, schedule);
  return kernel.Build(target);
}

}  // namespace kiln::ops::internal
