// Fused scaled dot-product attention with an online softmax: the scores
// never reach memory.
//
// A workgroup computes a tile of queries of one (batch, head) against blocks
// of keys, as two small matrix products per block with register tiles (the
// way the GEMM's schedule does): each thread owns 4 queries x 4 keys of the
// block's scores S = Q K^T and 4 queries x (D / threads across) columns of
// the output accumulator. Q (pre-scaled) stays in shared memory, k-major;
// each block of K passes through shared memory k-major, and the block of V
// through a buffer of its own (own_v) or in K's place; both are read from
// device memory into registers one block ahead where a thread moves at most
// 4 vectors of each. Per block: the scores, the new row maxima (partial
// maxima combined through shared memory), P = exp(S - max) into shared
// memory, the accumulator and the per-thread partial row sums rescaled (the
// online softmax), then O += P V. The row sums are combined once at the end.
// The scores' loop over D may be unrolled (unroll_scores; the rule's choice
// through Dawn).
// The kernel is written with the IR builder: the block loop carries state
// across a reduction, which tensor expressions cannot express.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
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

constexpr int64_t kMaxHeadDim = 128;
constexpr int kQueries = 4;  // queries of a thread's tile of scores
constexpr int kKeys = 4;     // keys of a thread's tile of scores
// Vectors of a block of K (and of V) per thread up to which the next block
// is read ahead into registers.
constexpr int kMaxPrefetchRounds = 4;

Expr I32(int64_t v) {
  return ir::IntConst(ir::kI32, v);
}
Expr F32(double v) {
  return ir::FloatConst(ir::kF32, v);
}
Expr Vec(int64_t start) {
  return ir::Ramp(I32(start), 1, 4);
}
Expr ToF32(const Expr& v) {
  return v.dtype().bits == 32 ? v : ir::Cast(ir::kF32.with_lanes(v.dtype().lanes), v);
}
Expr Exp(const Expr& x) {
  return ir::Call(ir::Intrinsic::kExp, {x});
}
Expr NegInf() {
  return F32(-INFINITY);
}

struct Shapes {
  Shape batch;  // with `heads`, the leading dimensions, then the heads
  int64_t batch_count = 1, sq = 0, sk = 0, d = 0;
  // Where > 0, Q, K and V are one packed tensor [..., S, 3 * heads * D] and
  // O is [..., S, heads * D] (PackedAttention).
  int64_t heads = 0;
};

// What both entry points check past the shapes: the mask, the scale and the
// storage buffers the kernel binds (`tensors`, the mask besides); errors
// name the operator `op`.
Status CheckOptions(std::string_view op, const Shapes& s, ir::DataType dtype, int tensors,
                    const Target& target, const AttentionOptions& o) {
  if (o.mask) {
    KILN_RETURN_IF_ERROR(internal::CheckTensor(*o.mask, target, StrCat("mask of ", op)));
    if (o.mask->shape != Shape{s.sq, s.sk} || o.mask->dtype != dtype) {
      return InvalidArgument("mask of ", op, " is ", o.mask->dtype.ToString(),
                             ShapeToString(o.mask->shape), "; it must be ", dtype.ToString(),
                             "[Sq, Sk] = [", s.sq, ", ", s.sk, "] (added to the scores)");
    }
  }
  // (The kernels multiply by it in f32: a double beyond f32 is inf there.)
  if (o.scale && !std::isfinite(static_cast<float>(*o.scale))) {
    char shown[32];  // every digit: a value just past f32's largest must not read as it
    std::snprintf(shown, sizeof shown, "%.17g", *o.scale);
    return InvalidArgument(
        op, ": the scale must be finite as an f32, got ", shown,
        std::isfinite(*o.scale) ? " (beyond f32's largest, 3.4028234663852886e+38)" : "");
  }
  const uint32_t buffers = tensors + (o.mask ? 1 : 0);
  if (buffers > target.limits.max_storage_buffers_per_stage) {
    return InvalidArgument(op, " needs ", buffers, " storage buffers; the target allows ",
                           target.limits.max_storage_buffers_per_stage, " per stage");
  }
  return Status::Ok();
}

Status CheckHeadDim(std::string_view op, int64_t d) {
  if (d % 4 != 0 || d > kMaxHeadDim) {
    return InvalidArgument(op, ": the head dimension D = ", d, " must be a multiple of 4 up to ",
                           kMaxHeadDim);
  }
  return Status::Ok();
}

StatusOr<Shapes> CheckAttention(const TensorType& q, const TensorType& k, const TensorType& v,
                                const Target& target, const AttentionOptions& o) {
  KILN_RETURN_IF_ERROR(internal::CheckTensor(q, target, "query Q of attention"));
  KILN_RETURN_IF_ERROR(internal::CheckTensor(k, target, "key K of attention"));
  KILN_RETURN_IF_ERROR(internal::CheckTensor(v, target, "value V of attention"));
  if (q.shape.size() < 2) {
    return InvalidArgument("query Q of attention has shape ", ShapeToString(q.shape),
                           "; it must be [..., Sq, D] (rank 2 to 4)");
  }
  if (k.dtype != q.dtype || v.dtype != q.dtype) {
    return InvalidArgument("attention: dtype mismatch: Q is ", q.dtype.ToString(), ", K ",
                           k.dtype.ToString(), ", V ", v.dtype.ToString());
  }
  const size_t r = q.shape.size();
  Shapes s;
  s.batch = Shape(q.shape.begin(), q.shape.end() - 2);
  s.batch_count = NumElements(s.batch);
  s.sq = q.shape[r - 2];
  s.d = q.shape[r - 1];
  if (k.shape.size() != r || v.shape.size() != r ||
      Shape(k.shape.begin(), k.shape.end() - 2) != s.batch || k.shape != v.shape ||
      k.shape[r - 1] != s.d) {
    return InvalidArgument(
        "attention: K and V must be [..., Sk, D] with Q's batch dimensions and D; "
        "Q is ",
        ShapeToString(q.shape), ", K ", ShapeToString(k.shape), ", V ", ShapeToString(v.shape));
  }
  s.sk = k.shape[r - 2];
  KILN_RETURN_IF_ERROR(CheckHeadDim("attention", s.d));
  KILN_RETURN_IF_ERROR(CheckOptions("attention", s, q.dtype, 4, target, o));
  return s;
}

StatusOr<Shapes> CheckPackedAttention(const TensorType& qkv, int64_t heads, const Target& target,
                                      const AttentionOptions& o) {
  KILN_RETURN_IF_ERROR(internal::CheckTensor(qkv, target, "QKV of packed_attention"));
  const size_t r = qkv.shape.size();
  if (r < 2) {
    return InvalidArgument("QKV of packed_attention has shape ", ShapeToString(qkv.shape),
                           "; it must be [..., S, 3 * heads * D] (rank 2 to 4)");
  }
  const int64_t width = qkv.shape[r - 1];
  if (heads < 1 || heads > width || width % (3 * heads) != 0) {
    return InvalidArgument("QKV of packed_attention has shape ", ShapeToString(qkv.shape),
                           ": its last dimension must be 3 * heads * D for heads = ", heads,
                           heads < 1 ? " (heads must be at least 1)" : "");
  }
  Shapes s;
  s.heads = heads;
  s.batch = Shape(qkv.shape.begin(), qkv.shape.end() - 2);
  s.batch.push_back(heads);
  s.batch_count = NumElements(s.batch);
  s.sq = s.sk = qkv.shape[r - 2];
  s.d = width / (3 * heads);
  KILN_RETURN_IF_ERROR(CheckHeadDim("packed_attention", s.d));
  KILN_RETURN_IF_ERROR(CheckOptions("packed_attention", s, qkv.dtype, 2, target, o));
  return s;
}

// Vectors of a block of K (or V) each thread moves.
int64_t ReadRounds(const AttentionTile& tile, int64_t head_dim) {
  return (tile.keys * (head_dim / 4) + tile.threads() - 1) / tile.threads();
}

// Writes the kernel for one tile shape; see the comment at the top.
class AttentionKernel {
 public:
  AttentionKernel(const Shapes& s, const AttentionTile& tile, ir::DataType dtype,
                  const AttentionOptions& o, double scale, const std::string& name)
      : s_(s),
        o_(o),
        dtype_(dtype),
        scale_(scale),
        b_(name),
        bq_(static_cast<int>(tile.queries)),
        bk_(static_cast<int>(tile.keys)),
        ny_(bq_ / kQueries),
        nx_(bk_ / kKeys),
        threads_(ny_ * nx_),
        d_(static_cast<int>(s.d)),
        d4_(d_ / 4),
        cols_((d4_ + nx_ - 1) / nx_),
        pstride_(bq_ + 4),
        q_blocks_((s.sq + bq_ - 1) / bq_),
        k_blocks_((s.sk + bk_ - 1) / bk_),
        split_(tile.own_v),
        unroll_scores_(tile.unroll_scores),
        index_type_(tile.unsigned_indices ? ir::kU32 : ir::kI32) {}

  ir::Function Build() {
    if (s_.heads > 0) {
      Q_ = K_ = V_ = b_.BufferParam("QKV", dtype_, internal::Extents(PackedShape(3)));
    } else {
      Q_ = b_.BufferParam("Q", dtype_, internal::Extents(QShape()));
      K_ = b_.BufferParam("K", dtype_, internal::Extents(KShape()));
      V_ = b_.BufferParam("V", dtype_, internal::Extents(KShape()));
    }
    if (o_.mask) M_ = b_.BufferParam("mask", dtype_, internal::Extents(o_.mask->shape));
    O_ = b_.BufferParam("O", dtype_, internal::Extents(s_.heads > 0 ? PackedShape(1) : QShape()));
    b_.For("block", ir::LoopKind::kBlockX, 0, I32(s_.batch_count * q_blocks_),
           [&](const Var& block) {
             Shared("Qs", d_ * bq_, [&](const Buffer& qs) {
               Shared("KVs", d_ * bk_, [&](const Buffer& kvs) {
                 auto rest = [&](const Buffer& vs) {
                   Shared("Ps", bk_ * pstride_, [&](const Buffer& ps) {
                     Shared("Red", nx_ * pstride_, [&](const Buffer& red) {
                       Qs_ = qs;
                       KVs_ = kvs;
                       Vs_ = vs;
                       Ps_ = ps;
                       Red_ = red;
                       b_.For("t", ir::LoopKind::kThreadX, 0, I32(threads_),
                              [&](const Var& t) { Thread(block, t); });
                     });
                   });
                 };
                 // With own_v, V has a block of its own.
                 if (split_) {
                   Shared("Vs", d_ * bk_, rest);
                 } else {
                   rest(kvs);
                 }
               });
             });
           });
    return b_.Build();
  }

 private:
  Shape QShape() const {
    Shape shape = s_.batch;
    shape.push_back(s_.sq);
    shape.push_back(s_.d);
    return shape;
  }
  Shape KShape() const {
    Shape shape = s_.batch;
    shape.push_back(s_.sk);
    shape.push_back(s_.d);
    return shape;
  }
  // Packed: the leading dimensions, S, then `parts` x heads x D.
  Shape PackedShape(int64_t parts) const {
    Shape shape(s_.batch.begin(), s_.batch.end() - 1);
    shape.push_back(s_.sq);
    shape.push_back(parts * s_.heads * s_.d);
    return shape;
  }
  void Shared(const char* name, int64_t size, const std::function<void(const Buffer&)>& body) {
    b_.Allocate(name, ir::kF32, {I32(size)}, ir::MemoryScope::kShared, body);
  }
  void Local(const char* name, int64_t size, const std::function<void(const Buffer&)>& body) {
    b_.Allocate(name, ir::kF32, {I32(size)}, ir::MemoryScope::kLocal, body);
  }
  // Index arithmetic is in index_type_: `e` (an i32 loop or thread
  // variable) or the constant `v` in it.
  Expr Ix(const Expr& e) const { return index_type_ == ir::kI32 ? e : ir::Cast(index_type_, e); }
  Expr C(int64_t v) const { return ir::IntConst(index_type_, v); }
  // The 4 indices from `base` up.
  static Expr Span4(const Expr& base) { return ir::Ramp(base, ir::IntConst(base.dtype(), 1), 4); }
  // Which tensor an index is into; packed, Q's, K's and V's columns follow
  // each other in every row of QKV.
  enum Part { kQ = 0, kK = 1, kV = 2, kO = 3 };
  const Buffer& BufferOf(Part part) const {
    switch (part) {
      case kQ:
        return Q_;
      case kK:
        return K_;
      case kV:
        return V_;
      case kO:
        break;
    }
    return O_;
  }
  // The index of the 4 elements from column `col` of row `row` of the
  // workgroup's (batch, head) in `part`.
  std::vector<Expr> At(Part part, const Expr& row, const Expr& col) const {
    std::vector<Expr> index = coords_;
    Expr column = col;
    if (s_.heads > 0) {
      const Expr head = index.back();
      index.pop_back();
      const int64_t offset = part == kO ? 0 : part * s_.heads * s_.d;
      column = head * C(s_.d) + C(offset) + col;
    }
    index.push_back(row);
    index.push_back(Span4(column));
    return index;
  }
  // The loop over `count` vectors of 4 moved by all threads: f(vector index),
  // guarded on the last round where the threads do not divide `count`.
  void Cooperative(int64_t count, const std::function<void(const Expr&, int)>& f) {
    for (int64_t p = 0; p * threads_ < count; ++p) {
      Expr idx = t_ + static_cast<int>(p * threads_);
      const int round = static_cast<int>(p);
      if ((p + 1) * threads_ <= count) {
        f(idx, round);
      } else {
        b_.If(idx < static_cast<int>(count), [&] { f(idx, round); });
      }
    }
  }
  int Rounds() const { return static_cast<int>(ReadRounds({bq_, bk_}, d_)); }
  // The block of K or V at key k0 into `stage` registers, a vector per round
  // of the cooperative loop; Store* then moves them into KVs: K k-major
  // (KVs[c * Bk + key]), V row-major (KVs[key * D + c]). Keys past Sk read
  // key Sk - 1 (K's are hidden by the scores' mask); V's are zero there, since
  // their probability 0 times an infinite value would be NaN.
  void LoadBlock(Part part, const Expr& k0, const Buffer& stage, bool k_major) {
    Cooperative(bk_ * d4_, [&](const Expr& idx, int p) {
      Expr r = k_major ? idx % bk_ : idx / d4_;
      Expr c = k_major ? (idx / bk_) * 4 : (idx % d4_) * 4;
      Expr key = ir::Min(k0 + r, C(s_.sk - 1));
      Expr value = ToF32(ir::Load(BufferOf(part), At(part, key, c)));
      if (!k_major && s_.sk % bk_ != 0) {
        value = ir::Select(ir::Broadcast(k0 + r < C(s_.sk), 4), value, ir::Broadcast(F32(0), 4));
      }
      b_.Store(stage, {Vec(4 * p)}, value);
    });
  }
  void StoreK(const Buffer& stage) {
    Cooperative(bk_ * d4_, [&](const Expr& idx, int p) {
      Expr r = idx % bk_, c = (idx / bk_) * 4;
      for (int e = 0; e < 4; ++e) {
        b_.Store(KVs_, {(c + e) * bk_ + r}, ir::Load(stage, {I32(4 * p + e)}));
      }
    });
  }
  void StoreV(const Buffer& stage) {
    Cooperative(bk_ * d4_, [&](const Expr& idx, int p) {
      Expr r = idx / d4_, c = (idx % d4_) * 4;
      b_.Store(Vs_, {Span4(r * d_ + c)}, ir::Load(stage, {Vec(4 * p)}));
    });
  }
  // Column vector ci of the thread's accumulator columns, guarded where the
  // threads across do not divide D / 4.
  void OverColumns(const std::function<void(int, const Expr&)>& f) {
    for (int ci = 0; ci < cols_; ++ci) {
      Expr c4 = tx_ + ci * nx_;
      if ((ci + 1) * nx_ <= d4_) {
        f(ci, c4 * 4);
      } else {
        b_.If(c4 < d4_, [&] { f(ci, c4 * 4); });
      }
    }
  }
  Expr AccVec(int qi, int ci) const { return Vec((qi * cols_ + ci) * 4); }

  void Thread(const Var& block_var, const Var& t) {
    t_ = Ix(t);
    const Expr block = Ix(block_var);
    ty_ = b_.Let("ty", t_ / nx_);
    tx_ = b_.Let("tx", t_ % nx_);
    Var batch = b_.Let("batch", block / static_cast<int>(q_blocks_));
    Var q_block = b_.Let("q_block", block % static_cast<int>(q_blocks_));
    q0_ = b_.Let("q0", q_block * bq_);
    coords_ = internal::UnflattenIndex(b_, batch, s_.batch, "b");
    Local("stage", 4, [&](const Buffer& stage) {
      stage_ = stage;
      // Q, scaled, k-major: Qs[c * Bq + query].
      Cooperative(bq_ * d4_, [&](const Expr& idx, int) {
        Expr r = idx % bq_, c = (idx / bq_) * 4;
        Expr row = ir::Min(q0_ + r, C(s_.sq - 1));
        b_.Store(stage_, {Vec(0)},
                 ToF32(ir::Load(Q_, At(kQ, row, c))) * ir::Broadcast(F32(scale_), 4));
        for (int e = 0; e < 4; ++e) {
          b_.Store(Qs_, {(c + e) * bq_ + r}, ir::Load(stage_, {I32(e)}));
        }
      });
      Local("s", kQueries * kKeys, [&](const Buffer& sc) {
        Local("acc", kQueries * cols_ * 4, [&](const Buffer& acc) {
          Local("m", kQueries, [&](const Buffer& m) {
            Local("l", kQueries, [&](const Buffer& l) {
              Local("af", kQueries, [&](const Buffer& af) {
                Local("bf", 4, [&](const Buffer& bf) {
                  Local("pt", kQueries * kKeys, [&](const Buffer& pt) {
                    s_buf_ = sc;
                    acc_ = acc;
                    m_ = m;
                    l_ = l;
                    af_ = af;
                    bf_ = bf;
                    pt_ = pt;
                    Body();
                  });
                });
              });
            });
          });
        });
      });
    });
  }

  // The thread's kQueries queries as vectors of 4: h-th at ty * kQueries + 4 h.
  Expr QueryVec(const Expr& base, int h) const { return Span4(base + ty_ * kQueries + 4 * h); }
  // Red[x][thread's queries] combined over x = 0..nx (max, or sum) into `into`.
  void CombineRed(const Buffer& into, bool max) {
    for (int h = 0; h < kQueries / 4; ++h) {
      b_.Store(into, {Vec(4 * h)}, ir::Load(Red_, {QueryVec(C(0), h)}));
      for (int x = 1; x < nx_; ++x) {
        Expr other = ir::Load(Red_, {QueryVec(C(x * pstride_), h)});
        Expr mine = ir::Load(into, {Vec(4 * h)});
        b_.Store(into, {Vec(4 * h)}, max ? ir::Max(mine, other) : mine + other);
      }
    }
  }
  void StoreRed(const Buffer& from) {
    for (int h = 0; h < kQueries / 4; ++h) {
      b_.Store(Red_, {QueryVec(tx_ * pstride_, h)}, ir::Load(from, {Vec(4 * h)}));
    }
  }

  void Body() {
    for (int qi = 0; qi < kQueries; ++qi) {
      for (int ci = 0; ci < cols_; ++ci) b_.Store(acc_, {AccVec(qi, ci)}, ir::Broadcast(F32(0), 4));
    }
    for (int h = 0; h < kQueries / 4; ++h) {
      b_.Store(m_, {Vec(4 * h)}, ir::Broadcast(NegInf(), 4));
      b_.Store(l_, {Vec(4 * h)}, ir::Broadcast(F32(0), 4));
    }
    // Causal: blocks past the workgroup's last query hold no visible key.
    Expr last_row = ir::Min(q0_ + bq_, C(s_.sq)) - 1;
    Expr blocks = o_.causal ? ir::Min(last_row / bk_ + 1, C(k_blocks_)) : C(k_blocks_);
    // Where each thread moves at most kMaxPrefetchRounds vectors of a block,
    // each block's K and V reach registers one block ahead (the last block
    // loads itself again), so their global reads overlap the math; they are
    // stored into shared memory where it is free: V once the scores are done
    // with K, the next K once the output is done with V. Otherwise (more
    // registers than that would hold, and CPU drivers compile the values
    // kept across barriers slowly) each block is read when it is needed.
    const bool prefetch = Rounds() <= kMaxPrefetchRounds;
    Local("kn", 4 * Rounds(), [&](const Buffer& kn) {
      Local("vn", 4 * Rounds(), [&](const Buffer& vn) {
        if (prefetch) {
          LoadBlock(kK, C(0), kn, /*k_major=*/true);
          StoreK(kn);
          LoadBlock(kV, C(0), vn, /*k_major=*/false);
          b_.Barrier();
        }
        b_.For("kb", ir::LoopKind::kSerial, 0, ir::Cast(ir::kI32, blocks), [&](const Var& kb_var) {
          const Expr kb = Ix(kb_var);
          Var k0 = b_.Let("k0", kb * bk_);
          Expr next;
          if (split_) {
            // K in KVs, V in Vs: V stored while the scores read K, the next
            // K while the probabilities are made.
            next = b_.Let("next", ir::Min(kb + 1, blocks - 1) * bk_);
            LoadBlock(kK, next, kn, /*k_major=*/true);
            Scores(k0);
            StoreV(vn);
            b_.Barrier();
            LoadBlock(kV, next, vn, /*k_major=*/false);
            StoreK(kn);
            Softmax();
            b_.Barrier();
            Accumulate();
            b_.Barrier();
            return;
          }
          if (prefetch) {
            next = b_.Let("next", ir::Min(kb + 1, blocks - 1) * bk_);
            LoadBlock(kK, next, kn, /*k_major=*/true);
          } else {
            LoadBlock(kK, k0, kn, /*k_major=*/true);
            StoreK(kn);
            b_.Barrier();
          }
          Scores(k0);
          b_.Barrier();
          if (!prefetch) LoadBlock(kV, k0, vn, /*k_major=*/false);
          StoreV(vn);  // V replaces K
          if (prefetch) LoadBlock(kV, next, vn, /*k_major=*/false);
          Softmax();
          b_.Barrier();
          Accumulate();
          b_.Barrier();
          if (prefetch) {
            StoreK(kn);
            b_.Barrier();
          }
        });
      });
    });
    Finish();
  }

  // s = Q K^T for the thread's 4 x 4 tile, masked; its partial row maxima
  // (with the running maxima) into Red[tx][query].
  void Scores(const Expr& k0) {
    for (int qi = 0; qi < kQueries; ++qi) b_.Store(s_buf_, {Vec(qi * 4)}, ir::Broadcast(F32(0), 4));
    const ir::LoopKind kind = unroll_scores_ ? ir::LoopKind::kUnrolled : ir::LoopKind::kSerial;
    b_.For("kc", kind, 0, I32(d4_), [&](const Var& kc_var) {
      const Expr kc = Ix(kc_var);
      for (int e = 0; e < 4; ++e) {
        Expr k = kc * 4 + e;
        for (int h = 0; h < kQueries / 4; ++h) {
          b_.Store(af_, {Vec(4 * h)}, ir::Load(Qs_, {QueryVec(k * bq_, h)}));
        }
        b_.Store(bf_, {Vec(0)}, ir::Load(KVs_, {Span4(k * bk_ + tx_ * kKeys)}));
        for (int qi = 0; qi < kQueries; ++qi) {
          b_.Store(s_buf_, {Vec(qi * 4)},
                   ir::Load(s_buf_, {Vec(qi * 4)}) +
                       ir::Broadcast(ir::Load(af_, {I32(qi)}), 4) * ir::Load(bf_, {Vec(0)}));
        }
      }
    });
    const bool ragged = s_.sk % bk_ != 0;
    for (int qi = 0; qi < kQueries; ++qi) {
      Expr row = q0_ + ty_ * kQueries + qi;
      Expr mx = ir::Load(m_, {I32(qi)});
      for (int kj = 0; kj < kKeys; ++kj) {
        Expr key = k0 + tx_ * kKeys + kj;
        Expr v = ir::Load(s_buf_, {I32(qi * 4 + kj)});
        if (o_.mask) {
          v = v + ToF32(ir::Load(M_, {ir::Min(row, C(s_.sq - 1)), ir::Min(key, C(s_.sk - 1))}));
        }
        Expr visible;
        if (ragged) visible = key < static_cast<int>(s_.sk);
        if (o_.causal) visible = visible.defined() ? (visible && key <= row) : key <= row;
        if (visible.defined()) v = ir::Select(visible, v, NegInf());
        b_.Store(s_buf_, {I32(qi * 4 + kj)}, v);
        mx = ir::Max(mx, ir::Load(s_buf_, {I32(qi * 4 + kj)}));
      }
      b_.Store(pt_, {I32(qi)}, mx);
    }
    StoreRed(pt_);
  }

  // The new row maxima from every thread's partial ones; P = exp(s - max)
  // into Ps[key][query]; the accumulator and partial sums rescaled.
  void Softmax() {
    CombineRed(af_, /*max=*/true);
    for (int qi = 0; qi < kQueries; ++qi) {
      Var m_new = b_.Let(StrCat("m_new", qi), ir::Load(af_, {I32(qi)}));
      // All scores so far -inf: keep exp() away from -inf - -inf.
      Var m_safe = b_.Let(StrCat("m_safe", qi), ir::Select(m_new == NegInf(), F32(0.0), m_new));
      Var corr = b_.Let(StrCat("corr", qi), Exp(ir::Load(m_, {I32(qi)}) - m_safe));
      b_.Store(m_, {I32(qi)}, m_new);
      b_.Store(s_buf_, {Vec(qi * 4)},
               Exp(ir::Load(s_buf_, {Vec(qi * 4)}) - ir::Broadcast(m_safe, 4)));
      auto p = [&](int kj) { return ir::Load(s_buf_, {I32(qi * 4 + kj)}); };
      b_.Store(l_, {I32(qi)}, ir::Load(l_, {I32(qi)}) * corr + ((p(0) + p(1)) + (p(2) + p(3))));
      for (int ci = 0; ci < cols_; ++ci) {
        b_.Store(acc_, {AccVec(qi, ci)}, ir::Load(acc_, {AccVec(qi, ci)}) * ir::Broadcast(corr, 4));
      }
      for (int kj = 0; kj < kKeys; ++kj) b_.Store(pt_, {I32(kj * kQueries + qi)}, p(kj));
    }
    for (int kj = 0; kj < kKeys; ++kj) {
      for (int h = 0; h < kQueries / 4; ++h) {
        b_.Store(Ps_, {QueryVec((tx_ * kKeys + kj) * pstride_, h)},
                 ir::Load(pt_, {Vec(kj * kQueries + 4 * h)}));
      }
    }
  }

  // acc += P V over the block's keys.
  void Accumulate() {
    b_.For("jc", ir::LoopKind::kSerial, 0, I32(bk_ / 4), [&](const Var& jc_var) {
      const Expr jc = Ix(jc_var);
      for (int e = 0; e < 4; ++e) {
        Expr j = jc * 4 + e;
        for (int h = 0; h < kQueries / 4; ++h) {
          b_.Store(af_, {Vec(4 * h)}, ir::Load(Ps_, {QueryVec(j * pstride_, h)}));
        }
        OverColumns([&](int ci, const Expr& c) {
          b_.Store(bf_, {Vec(0)}, ir::Load(Vs_, {Span4(j * d_ + c)}));
          for (int qi = 0; qi < kQueries; ++qi) {
            b_.Store(acc_, {AccVec(qi, ci)},
                     ir::Load(acc_, {AccVec(qi, ci)}) +
                         ir::Broadcast(ir::Load(af_, {I32(qi)}), 4) * ir::Load(bf_, {Vec(0)}));
          }
        });
      }
    });
  }

  // The row sums from every thread's partial ones, then O = acc / sum.
  void Finish() {
    StoreRed(l_);
    b_.Barrier();
    CombineRed(l_, /*max=*/false);
    for (int qi = 0; qi < kQueries; ++qi) {
      Var row = b_.Let(StrCat("row", qi), q0_ + ty_ * kQueries + qi);
      b_.If(row < static_cast<int>(s_.sq), [&] {
        Var inv = b_.Let(StrCat("inv", qi), F32(1.0) / ir::Load(l_, {I32(qi)}));
        OverColumns([&](int ci, const Expr& c) {
          Expr out = ir::Load(acc_, {AccVec(qi, ci)}) * ir::Broadcast(inv, 4);
          if (dtype_ != ir::kF32) out = ir::Cast(dtype_.with_lanes(4), out);
          b_.Store(O_, At(kO, row, c), out);
        });
      });
    }
  }

  const Shapes& s_;
  const AttentionOptions& o_;
  const ir::DataType dtype_;
  const double scale_;
  ir::IRBuilder b_;
  const int bq_, bk_;  // queries and keys per block
  const int ny_, nx_;  // threads along queries and along keys (or output columns)
  const int threads_, d_, d4_;
  const int cols_;     // vectors of output columns per thread
  const int pstride_;  // row stride of Ps and Red
  const int64_t q_blocks_, k_blocks_;
  // Whether V's blocks have a buffer of their own (Vs_; else they replace K's
  // in KVs_): 3 barriers per block instead of 4.
  const bool split_;
  // Whether the scores' loop over D is unrolled.
  const bool unroll_scores_;
  // The type of the index arithmetic: i32, or u32 (unsigned_indices).
  const ir::DataType index_type_;
  Buffer Q_, K_, V_, M_, O_, Qs_, KVs_, Vs_, Ps_, Red_;
  Buffer stage_, s_buf_, acc_, m_, l_, af_, bf_, pt_;
  Expr t_, ty_, tx_, q0_;
  std::vector<Expr> coords_;
};

// The tiles tried, fastest first where they fit.
constexpr AttentionTile kTiles[] = {{64, 32}, {32, 32}, {16, 32}, {32, 16},
                                    {16, 16}, {16, 8},  {8, 8}};
// Vectors of output columns per thread above which the accumulator no
// longer fits registers well (and CPU drivers compile the kernel slowly).
constexpr int64_t kMaxColumnVectors = 4;

bool Fits(const AttentionTile& tile, int64_t head_dim, const Target& target) {
  return AttentionSharedBytes(tile, head_dim) <= target.limits.max_workgroup_storage_bytes &&
         tile.threads() <= target.limits.max_invocations_per_workgroup &&
         tile.threads() <= target.limits.max_workgroup_size_x;
}

}  // namespace

std::string AttentionTile::ToString() const {
  return StrCat(queries, " queries x ", keys, " keys per block, ", threads(), " threads",
                own_v ? ", V in a buffer of its own" : "",
                unroll_scores ? ", the scores' loop over D unrolled" : "",
                unsigned_indices ? ", unsigned indices" : "");
}

int64_t AttentionSharedBytes(const AttentionTile& tile, int64_t head_dim) {
  const int64_t stride = tile.queries + 4;
  return 4 * (head_dim * tile.queries + (tile.own_v ? 2 : 1) * head_dim * tile.keys +
              (tile.keys + tile.keys / kKeys) * stride);
}

StatusOr<AttentionTile> DefaultAttentionTile(int64_t head_dim, const Target& target) {
  // First the tiles whose accumulators stay small, then any that fits.
  for (bool small_accumulator : {true, false}) {
    for (const AttentionTile& tile : kTiles) {
      const int64_t across = tile.keys / kKeys;
      const int64_t column_vectors = (head_dim / 4 + across - 1) / across;
      if (Fits(tile, head_dim, target) &&
          (!small_accumulator || column_vectors <= kMaxColumnVectors)) {
        // V's own buffer where the read-ahead holds and it still fits;
        // then through Dawn the scores' loop over D unrolled and the
        // indices in u32 (each faster through Dawn, slower through
        // wgpu-native: BENCHMARKS.md).
        AttentionTile own = tile;
        own.own_v = true;
        if (ReadRounds(own, head_dim) <= kMaxPrefetchRounds && Fits(own, head_dim, target)) {
          own.unroll_scores = own.unsigned_indices = target.implementation == "dawn";
          return own;
        }
        return tile;
      }
    }
  }
  const AttentionTile& last = kTiles[std::size(kTiles) - 1];
  return InvalidArgument("attention: the target's workgroup storage (",
                         target.limits.max_workgroup_storage_bytes, " bytes) and workgroup size (",
                         target.limits.max_invocations_per_workgroup,
                         " invocations) cannot hold the smallest tile (", last.ToString(), ", ",
                         AttentionSharedBytes(last, head_dim), " bytes) for D = ", head_dim);
}

Status CheckAttentionTile(const AttentionTile& tile, int64_t head_dim, const Target& target) {
  // Sizes out of range are quoted as given (the threads they would make can
  // be any number); the rest by the tile they make.
  auto bad_size = [&](const std::string& why) {
    return InvalidArgument("attention tile (queries ", tile.queries, ", keys ", tile.keys,
                           "): ", why);
  };
  if (tile.queries < 4 || tile.queries > 256 || tile.queries % 4 != 0) {
    return bad_size("queries must be a multiple of 4 from 4 to 256");
  }
  if (tile.keys < 4 || tile.keys > 128 || tile.keys % 4 != 0) {
    return bad_size("keys must be a multiple of 4 from 4 to 128");
  }
  auto bad = [&](const std::string& why) {
    return InvalidArgument("attention tile ", tile.ToString(), ": ", why);
  };
  if (const int64_t rounds = ReadRounds(tile, head_dim);
      tile.own_v && rounds > kMaxPrefetchRounds) {
    return bad(StrCat("V's own buffer needs the read-ahead, at most ", kMaxPrefetchRounds,
                      " vectors of a block per thread; for D = ", head_dim, " each moves ",
                      rounds));
  }
  if (!Fits(tile, head_dim, target)) {
    return bad(StrCat(
        "for D = ", head_dim, " it takes ", AttentionSharedBytes(tile, head_dim),
        " bytes of workgroup storage and ", tile.threads(), " invocations; the target allows ",
        target.limits.max_workgroup_storage_bytes, " and ",
        std::min(target.limits.max_invocations_per_workgroup, target.limits.max_workgroup_size_x)));
  }
  return Status::Ok();
}

namespace {

StatusOr<ir::Function> BuildAttention(const Shapes& s, ir::DataType dtype, const Target& target,
                                      const AttentionOptions& o, const std::string& name) {
  AttentionTile tile;
  if (o.tile) {
    KILN_RETURN_IF_ERROR(CheckAttentionTile(*o.tile, s.d, target));
    tile = *o.tile;
  } else {
    KILN_ASSIGN_OR_RETURN(tile, DefaultAttentionTile(s.d, target));
  }
  const double scale = o.scale ? *o.scale : 1.0 / std::sqrt(static_cast<double>(s.d));
  AttentionKernel kernel(s, tile, dtype, o, scale, name);
  ir::Function f = kernel.Build();
  ir::VerifyOptions verify;
  verify.limits = target.limits;
  Status verified = ir::Verify(f, verify);
  if (!verified.ok()) return Internal(name, " built an invalid kernel: ", verified.message());
  return f;
}

}  // namespace

StatusOr<ir::Function> Attention(const TensorType& q, const TensorType& k, const TensorType& v,
                                 const Target& target, const AttentionOptions& o,
                                 std::string name) {
  KILN_ASSIGN_OR_RETURN(Shapes s, CheckAttention(q, k, v, target, o));
  return BuildAttention(s, q.dtype, target, o, name.empty() ? "attention" : name);
}

StatusOr<ir::Function> PackedAttention(const TensorType& qkv, int64_t heads, const Target& target,
                                       const AttentionOptions& o, std::string name) {
  KILN_ASSIGN_OR_RETURN(Shapes s, CheckPackedAttention(qkv, heads, target, o));
  return BuildAttention(s, qkv.dtype, target, o, name.empty() ? "packed_attention" : name);
}

}  // namespace kiln::ops
