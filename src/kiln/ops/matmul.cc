// Matmul: the register-tiled kernel its schedule rule builds.
//
// The contraction is C[b, m, n] = sum_k A[b, m, k] * B[b, k, n]. Its
// schedule is fixed in shape and parameterised by MatmulSchedule: a 16 x 16
// workgroup per (64 rows) x (64 cols) tile of C, shared tiles of A (stored
// k-major, so a thread's rows are one vector) and B, each thread's
// accumulators as 4-lane vectors the code generator keeps as separate
// variables, the k-steps of a shared tile unrolled, and double buffering of
// the shared tiles. The kernel is written directly with the IR builder:
// tensor expressions have no cache_read/compute_at to express the staging.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kiln/ir/builder.h"
#include "kiln/ir/expr_ops.h"
#include "kiln/ir/verifier.h"
#include "kiln/ops/internal.h"
#include "kiln/ops/ops.h"

namespace kiln::ops {
namespace {

using ir::Buffer;
using ir::Expr;
using ir::Var;

constexpr int kThreads = 16;           // per side of the workgroup
constexpr int kInvocations = 16 * 16;  // per workgroup
constexpr int64_t kEnoughWorkgroups = 128;

int64_t CeilDiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

Status CheckSchedule(const MatmulSchedule& s, const Target& target) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("matmul schedule ", s.ToString(), ": ", why);
  };
  if (s.rows != 1 && s.rows != 2) return bad("rows must be 1 or 2");
  if (s.cols != 1 && s.cols != 2) return bad("cols must be 1 or 2");
  if (s.k_tile != 8 && s.k_tile != 16) return bad("k_tile must be 8 or 16");
  if ((s.rows * s.k_tile) % 16 != 0 || (s.cols * s.k_tile) % 16 != 0) {
    return bad(
        "rows * k_tile and cols * k_tile must be multiples of 16 (each thread loads whole "
        "vectors of both tiles)");
  }
  if (s.SharedBytes() > target.limits.max_workgroup_storage_bytes) {
    return bad(StrCat("its shared tiles take ", s.SharedBytes(),
                      " bytes; the target's workgroup storage is ",
                      target.limits.max_workgroup_storage_bytes));
  }
  if (target.limits.max_invocations_per_workgroup < kInvocations ||
      target.limits.max_workgroup_size_x < kThreads ||
      target.limits.max_workgroup_size_y < kThreads) {
    return bad("the target cannot run workgroups of 16 x 16 invocations");
  }
  return Status::Ok();
}

// The checked shapes of one matmul.
struct Shapes {
  Shape batch;  // the output's batch dimensions
  int64_t batch_count = 1;
  int64_t m = 0, n = 0, k = 0;
  Shape out;
};

StatusOr<Shapes> CheckShapes(const TensorType& a, const TensorType& b, const Target& target,
                             const MatmulOptions& o) {
  KILN_RETURN_IF_ERROR(internal::CheckTensor(a, target, "input A of matmul"));
  KILN_RETURN_IF_ERROR(internal::CheckTensor(b, target, "input B of matmul"));
  if (a.shape.size() < 2) {
    return InvalidArgument("input A of matmul has shape ", ShapeToString(a.shape),
                           "; matmul needs rank 2 to 4");
  }
  if (b.shape.size() < 2) {
    return InvalidArgument("input B of matmul has shape ", ShapeToString(b.shape),
                           "; matmul needs rank 2 to 4");
  }
  if (a.dtype != b.dtype) {
    return InvalidArgument("matmul: dtype mismatch: A is ", a.dtype.ToString(), " but B is ",
                           b.dtype.ToString());
  }
  const size_t ra = a.shape.size(), rb = b.shape.size();
  Shapes s;
  s.m = o.transpose_a ? a.shape[ra - 1] : a.shape[ra - 2];
  const int64_t ka = o.transpose_a ? a.shape[ra - 2] : a.shape[ra - 1];
  const int64_t kb = o.transpose_b ? b.shape[rb - 1] : b.shape[rb - 2];
  s.n = o.transpose_b ? b.shape[rb - 2] : b.shape[rb - 1];
  if (ka != kb) {
    return InvalidArgument("matmul: A", o.transpose_a ? " (transposed)" : "", " is ",
                           ShapeToString(a.shape), " and B", o.transpose_b ? " (transposed)" : "",
                           " is ", ShapeToString(b.shape), ": the contraction dimension differs (",
                           ka, " against ", kb, ")");
  }
  s.k = ka;
  StatusOr<Shape> batch = BroadcastShapes(Shape(a.shape.begin(), a.shape.end() - 2),
                                          Shape(b.shape.begin(), b.shape.end() - 2));
  if (!batch.ok()) return batch.status().WithContext("matmul: batch dimensions");
  s.batch = *batch;
  s.batch_count = NumElements(s.batch);
  s.out = s.batch;
  s.out.push_back(s.m);
  s.out.push_back(s.n);
  KILN_RETURN_IF_ERROR(internal::CheckTensor({s.out, a.dtype}, target, "output C of matmul"));
  if (o.bias) {
    KILN_RETURN_IF_ERROR(internal::CheckTensor(*o.bias, target, "bias of matmul"));
    if (o.bias->shape != Shape{s.n}) {
      return InvalidArgument("bias of matmul has shape ", ShapeToString(o.bias->shape),
                             "; it must be [N] = [", s.n, "]");
    }
    if (o.bias->dtype != a.dtype) {
      return InvalidArgument("matmul: bias is ", o.bias->dtype.ToString(), " but A is ",
                             a.dtype.ToString());
    }
  }
  if (o.residual) {
    KILN_RETURN_IF_ERROR(internal::CheckTensor(*o.residual, target, "residual of matmul"));
    if (o.residual->shape != s.out) {
      return InvalidArgument("residual of matmul has shape ", ShapeToString(o.residual->shape),
                             "; it must be the output's shape ", ShapeToString(s.out));
    }
    if (o.residual->dtype != a.dtype) {
      return InvalidArgument("matmul: residual is ", o.residual->dtype.ToString(), " but A is ",
                             a.dtype.ToString());
    }
  }
  if (!o.activation.empty() && !internal::IsUnary(o.activation)) {
    return internal::UnknownOp("activation", o.activation, UnaryOpNames());
  }
  const uint32_t buffers = 3 + (o.bias ? 1 : 0) + (o.residual ? 1 : 0);
  if (buffers > target.limits.max_storage_buffers_per_stage) {
    return InvalidArgument("matmul needs ", buffers, " storage buffers; the target allows ",
                           target.limits.max_storage_buffers_per_stage, " per stage");
  }
  return s;
}

// The indices of an operand of shape `shape` whose batch dimensions
// broadcast to the output's `coords` (aligned on the right, a 1 read at 0),
// followed by `last`.
std::vector<Expr> OperandIndex(const Shape& shape, const std::vector<Expr>& coords,
                               std::vector<Expr> last) {
  const size_t batch_rank = shape.size() - 2;
  std::vector<Expr> index;
  for (size_t d = 0; d < batch_rank; ++d) {
    const size_t out_d = coords.size() - batch_rank + d;
    index.push_back(shape[d] == 1 ? ir::IntConst(ir::kI32, 0) : coords[out_d]);
  }
  index.insert(index.end(), last.begin(), last.end());
  return index;
}

// One operand's path from global memory to its shared tile. The tile holds
// k_tile rows of `tile` elements (the operand's M or N extent), k-major.
// Each thread moves `vectors` 4-element vectors per tile, along k where the
// operand is contiguous in k (row-major A, transposed B), else along M/N.
class OperandTile {
 public:
  OperandTile(ir::IRBuilder& b, Buffer global, Shape shape, bool k_contiguous, int64_t extent,
              int64_t k, int64_t tile, int k_tile, std::vector<Expr> batch_index, Expr origin)
      : b_(b),
        global_(std::move(global)),
        shape_(std::move(shape)),
        k_contiguous_(k_contiguous),
        extent_(extent),
        k_(k),
        tile_(tile),
        k_tile_(k_tile),
        batch_index_(std::move(batch_index)),
        origin_(std::move(origin)),
        vectors_(static_cast<int>(tile * k_tile / 4 / kInvocations)),
        vector_path_(extent % tile == 0 && k % k_tile == 0) {}

  int vectors() const { return vectors_; }

  // Per-thread offsets within the tile, fixed for the whole kernel.
  void Bind(const Var& tid, const std::string& prefix) {
    for (int q = 0; q < vectors_; ++q) {
      Expr idx = tid + q * kInvocations;
      const int64_t per_row = k_contiguous_ ? k_tile_ / 4 : tile_ / 4;
      Var row = b_.Let(StrCat(prefix, "_r", q), idx / static_cast<int>(per_row));
      Var col = b_.Let(StrCat(prefix, "_c", q), (idx % static_cast<int>(per_row)) * 4);
      // k_contiguous: row is the M/N offset and col the k offset; else the reverse.
      rows_.push_back(row);
      cols_.push_back(col);
    }
  }

  // Loads the tile at k offset `k0` into the stage registers.
  void Load(const Expr& k0, const Buffer& stage) {
    for (int q = 0; q < vectors_; ++q) {
      Expr outer = origin_ + (k_contiguous_ ? Expr(rows_[q]) : Expr(cols_[q]));
      Expr kk = k0 + (k_contiguous_ ? Expr(cols_[q]) : Expr(rows_[q]));
      if (vector_path_) {
        Expr value = k_contiguous_ ? At(outer, ir::Ramp(kk, 1, 4), true)
                                   : At(ir::Ramp(outer, 1, 4), kk, false);
        b_.Store(stage, {ir::Ramp(ir::IntConst(ir::kI32, 4 * q), 1, 4)}, ToF32(value));
        continue;
      }
      for (int e = 0; e < 4; ++e) {
        Expr o = k_contiguous_ ? outer : outer + e;
        Expr kv = k_contiguous_ ? kk + e : kk;
        Expr in = (o < static_cast<int>(extent_)) && (kv < static_cast<int>(k_));
        Expr value = At(ir::Min(o, static_cast<int>(extent_ - 1)),
                        ir::Min(kv, static_cast<int>(k_ - 1)), k_contiguous_);
        b_.Store(stage, {ir::IntConst(ir::kI32, 4 * q + e)},
                 ir::Select(in, ToF32(value), ir::FloatConst(ir::kF32, 0.0)));
      }
    }
  }

  // Stores the stage registers into the shared tile at element offset `base`.
  void Store(const Buffer& shared, const Expr& base, const Buffer& stage) {
    const int tile = static_cast<int>(tile_);
    for (int q = 0; q < vectors_; ++q) {
      if (!k_contiguous_) {
        // One vector along M/N: k row rows_[q], elements cols_[q]..+3.
        b_.Store(shared, {ir::Ramp(base + rows_[q] * tile + cols_[q], 1, 4)},
                 ir::Load(stage, {ir::Ramp(ir::IntConst(ir::kI32, 4 * q), 1, 4)}));
        continue;
      }
      for (int e = 0; e < 4; ++e) {
        b_.Store(shared, {base + (cols_[q] + e) * tile + rows_[q]},
                 ir::Load(stage, {ir::IntConst(ir::kI32, 4 * q + e)}));
      }
    }
  }

 private:
  // The operand element at (outer, k) (either may be a ramp).
  Expr At(const Expr& outer, const Expr& k, bool k_last) const {
    return ir::Load(
        global_, OperandIndex(shape_, batch_index_,
                              k_last ? std::vector<Expr>{outer, k} : std::vector<Expr>{k, outer}));
  }
  Expr ToF32(const Expr& v) const {
    if (global_.dtype() == ir::kF32) return v;
    return ir::Cast(ir::kF32.with_lanes(v.dtype().lanes), v);
  }

  ir::IRBuilder& b_;
  Buffer global_;
  Shape shape_;
  bool k_contiguous_;
  int64_t extent_, k_, tile_;
  int k_tile_;
  std::vector<Expr> batch_index_;
  Expr origin_;
  int vectors_;
  bool vector_path_;
  std::vector<Var> rows_, cols_;
};

}  // namespace

int64_t MatmulSchedule::SharedBytes() const {
  return (double_buffer ? 2 : 1) * int64_t{k_tile} * (block_m() + block_n()) * 4;
}

std::string MatmulSchedule::ToString() const {
  return StrCat(block_m(), "x", block_n(), " tile, k ", k_tile,
                double_buffer ? ", double-buffered" : ", single-buffered",
                unroll_k ? ", unrolled" : "");
}

StatusOr<MatmulSchedule> DefaultMatmulSchedule(int64_t batch, int64_t m, int64_t n,
                                               const Target& target) {
  MatmulSchedule s;
  auto workgroups = [&](int rows, int cols) {
    return batch * CeilDiv(m, 64 * rows) * CeilDiv(n, 64 * cols);
  };
  if (workgroups(2, 2) >= kEnoughWorkgroups) {
    s.rows = s.cols = 2;
  } else if (workgroups(2, 1) >= kEnoughWorkgroups || workgroups(1, 2) >= kEnoughWorkgroups) {
    // The longer side keeps the larger tile.
    s.rows = m >= n ? 2 : 1;
    s.cols = m >= n ? 1 : 2;
  } else {
    s.rows = s.cols = 1;
  }
  const uint32_t storage = target.limits.max_workgroup_storage_bytes;
  const bool unroll = workgroups(s.rows, s.cols) >= kEnoughWorkgroups;
  // Single-buffered tiles first: on the H200 (Dawn/Vulkan) the double-buffered
  // kernel ran at 25.7 TFLOP/s against 36.2 for the single-buffered one
  // (BENCHMARKS.md).
  for (MatmulSchedule candidate : {MatmulSchedule{s.rows, s.cols, 16, false, unroll},
                                   MatmulSchedule{s.rows, s.cols, 8, false, unroll},
                                   MatmulSchedule{1, 1, 16, false, unroll}}) {
    if ((candidate.rows * candidate.k_tile) % 16 != 0 ||
        (candidate.cols * candidate.k_tile) % 16 != 0) {
      continue;
    }
    if (candidate.SharedBytes() <= storage) return candidate;
  }
  return InvalidArgument("matmul: the target's workgroup storage (", storage,
                         " bytes) holds no matmul tile (the smallest takes ",
                         MatmulSchedule{1, 1, 16, false, false}.SharedBytes(), ")");
}

namespace {

// Writes one matmul kernel: the launch and shared tiles (Build), each
// thread's set-up (Thread), the k loop (MainLoop) and the epilogue.
class MatmulKernel {
 public:
  MatmulKernel(const TensorType& a, const TensorType& b, const MatmulOptions& options,
               const Shapes& shapes, const MatmulSchedule& schedule, const std::string& name)
      : a_(a),
        b_(b),
        o_(options),
        sh_(shapes),
        s_(schedule),
        B_(name),
        dtype_(a.dtype),
        bm_(static_cast<int>(schedule.block_m())),
        bn_(static_cast<int>(schedule.block_n())),
        bk_(schedule.k_tile),
        tiles_m_(CeilDiv(shapes.m, bm_)),
        tiles_n_(CeilDiv(shapes.n, bn_)),
        tiles_k_(CeilDiv(shapes.k, bk_)) {}

  StatusOr<ir::Function> Build(const Target& target) {
    const int64_t blocks = sh_.batch_count * tiles_m_ * tiles_n_;
    if (blocks > (int64_t{1} << 31) - 1) {
      return InvalidArgument("matmul: ", blocks, " workgroups is more than 2^31 - 1");
    }
    A_ = B_.BufferParam("A", dtype_, internal::Extents(a_.shape));
    Bm_ = B_.BufferParam("B", dtype_, internal::Extents(b_.shape));
    if (o_.bias) bias_ = B_.BufferParam("bias", dtype_, internal::Extents(o_.bias->shape));
    if (o_.residual) {
      residual_ = B_.BufferParam("residual", dtype_, internal::Extents(o_.residual->shape));
    }
    C_ = B_.BufferParam("C", dtype_, internal::Extents(sh_.out));
    const int64_t stages = s_.double_buffer ? 2 : 1;
    B_.For("block", ir::LoopKind::kBlockX, 0, I32(blocks), [&](const Var& block) {
      B_.Allocate("As", ir::kF32, {I32(stages * bk_ * bm_)}, ir::MemoryScope::kShared,
                  [&](const Buffer& As) {
                    B_.Allocate("Bs", ir::kF32, {I32(stages * bk_ * bn_)}, ir::MemoryScope::kShared,
                                [&](const Buffer& Bs) {
                                  As_ = As;
                                  Bs_ = Bs;
                                  Threads(block);
                                });
                  });
    });
    ir::Function f = B_.Build();
    ir::VerifyOptions verify;
    verify.limits = target.limits;
    Status verified = ir::Verify(f, verify);
    if (!verified.ok()) return Internal("matmul built an invalid kernel: ", verified.message());
    return f;
  }

 private:
  static Expr I32(int64_t v) { return ir::IntConst(ir::kI32, v); }
  static Expr Vec(int start) { return ir::Ramp(I32(start), 1, 4); }

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
    coords_.assign(sh_.batch.size(), Expr());
    int64_t stride = 1;
    for (int d = static_cast<int>(sh_.batch.size()) - 1; d >= 0; --d) {
      coords_[d] = B_.Let(StrCat("b", d),
                          (batch / static_cast<int>(stride)) % static_cast<int>(sh_.batch[d]));
      stride *= sh_.batch[d];
    }
    m0_ = B_.Let("m0", tile_m * bm_);
    n0_ = B_.Let("n0", tile_n * bn_);
    Var tid = B_.Let("tid", ty_ * kThreads + tx_);
    OperandTile a_tile(B_, A_, a_.shape, !o_.transpose_a, sh_.m, sh_.k, bm_, bk_, coords_, m0_);
    OperandTile b_tile(B_, Bm_, b_.shape, o_.transpose_b, sh_.n, sh_.k, bn_, bk_, coords_, n0_);
    a_tile.Bind(tid, "a");
    b_tile.Bind(tid, "b");
    const int accumulators = 16 * s_.rows * s_.cols;
    auto local = [&](const char* name, int size, const std::function<void(const Buffer&)>& body) {
      B_.Allocate(name, ir::kF32, {I32(size)}, ir::MemoryScope::kLocal, body);
    };
    local("acc", accumulators, [&](const Buffer& acc) {
      local("a_frag", 4 * s_.rows, [&](const Buffer& a_frag) {
        local("b_frag", 4 * s_.cols, [&](const Buffer& b_frag) {
          local("a_next", 4 * a_tile.vectors(), [&](const Buffer& a_next) {
            local("b_next", 4 * b_tile.vectors(), [&](const Buffer& b_next) {
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
        Math(cur * a_stage, cur * b_stage);
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
          Expr a_value = ir::Broadcast(ir::Load(a_frag_, {I32(4 * r + i)}), 4);
          for (int c = 0; c < s_.cols; ++c) {
            const int g = (r * 4 + i) * s_.cols + c;
            B_.Store(acc_, {Vec(4 * g)},
                     ir::Load(acc_, {Vec(4 * g)}) + a_value * ir::Load(b_frag_, {Vec(4 * c)}));
          }
        }
      }
    });
  }

  // v (f32, 1 or 4 lanes) at (row, col..): bias, activation, residual, then C.
  void Finish(Expr v, const Expr& row, const Expr& col) {
    const int lanes = v.dtype().lanes;
    Expr col_index = lanes == 1 ? col : ir::Ramp(col, 1, lanes);
    auto as_f32 = [&](const Expr& x) {
      return dtype_ == ir::kF32 ? x : ir::Cast(ir::kF32.with_lanes(lanes), x);
    };
    if (o_.bias) v = v + as_f32(ir::Load(bias_, {col_index}));
    if (!o_.activation.empty()) v = internal::ApplyUnary(o_.activation, v);
    std::vector<Expr> out_index = coords_;
    out_index.push_back(row);
    out_index.push_back(col_index);
    if (o_.residual) v = v + as_f32(ir::Load(residual_, out_index));
    B_.Store(C_, out_index, dtype_ == ir::kF32 ? v : ir::Cast(dtype_.with_lanes(lanes), v));
  }

  void Epilogue() {
    const bool guard = sh_.m % bm_ != 0 || sh_.n % bn_ != 0;
    for (int r = 0; r < s_.rows; ++r) {
      for (int i = 0; i < 4; ++i) {
        Var row = B_.Let(StrCat("row", r, i), m0_ + (ty_ * 4 + (r * 64 + i)));
        for (int c = 0; c < s_.cols; ++c) {
          const int g = (r * 4 + i) * s_.cols + c;
          Var col = B_.Let(StrCat("col", r, i, c), n0_ + (tx_ * 4 + c * 64));
          // Activations are applied lane by lane (they are defined on scalars).
          if (!guard && o_.activation.empty()) {
            Finish(ir::Load(acc_, {Vec(4 * g)}), row, col);
            continue;
          }
          for (int j = 0; j < 4; ++j) {
            auto lane = [&] { Finish(ir::Load(acc_, {I32(4 * g + j)}), row, col + j); };
            if (!guard) {
              lane();
              continue;
            }
            B_.If((row < static_cast<int>(sh_.m)) && (col + j < static_cast<int>(sh_.n)), lane);
          }
        }
      }
    }
  }

  const TensorType& a_;
  const TensorType& b_;
  const MatmulOptions& o_;
  const Shapes& sh_;
  const MatmulSchedule s_;
  ir::IRBuilder B_;
  const ir::DataType dtype_;
  const int bm_, bn_, bk_;
  const int64_t tiles_m_, tiles_n_, tiles_k_;
  Buffer A_, Bm_, bias_, residual_, C_;
  Buffer As_, Bs_, acc_, a_frag_, b_frag_;
  Var ty_, tx_;
  Expr m0_, n0_;
  std::vector<Expr> coords_;
};

}  // namespace

StatusOr<ir::Function> Matmul(const TensorType& a, const TensorType& b, const Target& target,
                              const MatmulOptions& options, std::string name,
                              std::optional<MatmulSchedule> schedule) {
  KILN_ASSIGN_OR_RETURN(Shapes sh, CheckShapes(a, b, target, options));
  if (name.empty()) name = "matmul";
  MatmulSchedule s;
  if (schedule) {
    s = *schedule;
  } else {
    KILN_ASSIGN_OR_RETURN(s, DefaultMatmulSchedule(sh.batch_count, sh.m, sh.n, target));
  }
  KILN_RETURN_IF_ERROR(CheckSchedule(s, target));
  MatmulKernel kernel(a, b, options, sh, s, name);
  return kernel.Build(target);
}

}  // namespace kiln::ops
