// Fused scaled dot-product attention with an online softmax: the scores
// never reach memory.
//
// One workgroup of 64 threads per 64 queries of one (batch, head); a thread
// owns one query (its row of Q, pre-scaled, and its output accumulator in
// registers). Keys and values pass through shared memory a block at a time;
// for each block a thread computes its scores, the block's maximum, rescales
// its running sum and accumulator to the new maximum, and adds
// exp(score - max) * V for every key. The kernel is written with the IR
// builder (the block loop carries state across a reduction, which tensor
// expressions cannot express).
#include <cmath>
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

constexpr int kQueries = 64;  // threads and queries per workgroup
constexpr int64_t kMaxHeadDim = 128;

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
  Shape batch;
  int64_t batch_count = 1, sq = 0, sk = 0, d = 0;
};

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
  if (s.d % 4 != 0 || s.d > kMaxHeadDim) {
    return InvalidArgument("attention: the head dimension D = ", s.d,
                           " must be a multiple of 4 up to ", kMaxHeadDim);
  }
  if (o.mask) {
    KILN_RETURN_IF_ERROR(internal::CheckTensor(*o.mask, target, "mask of attention"));
    if (o.mask->shape != Shape{s.sq, s.sk} || o.mask->dtype != q.dtype) {
      return InvalidArgument("mask of attention is ", o.mask->dtype.ToString(),
                             ShapeToString(o.mask->shape), "; it must be ", q.dtype.ToString(),
                             "[Sq, Sk] = [", s.sq, ", ", s.sk, "] (added to the scores)");
    }
  }
  if (o.scale && !std::isfinite(*o.scale)) {
    return InvalidArgument("attention: the scale must be finite, got ", *o.scale);
  }
  const uint32_t buffers = 4 + (o.mask ? 1 : 0);
  if (buffers > target.limits.max_storage_buffers_per_stage) {
    return InvalidArgument("attention needs ", buffers, " storage buffers; the target allows ",
                           target.limits.max_storage_buffers_per_stage, " per stage");
  }
  if (target.limits.max_invocations_per_workgroup < kQueries ||
      target.limits.max_workgroup_size_x < kQueries) {
    return InvalidArgument("attention: the target cannot run workgroups of ", kQueries,
                           " invocations");
  }
  return s;
}

}  // namespace

// Bytes of workgroup memory for blocks of kb keys: K and V (kb x D f32
// each) and every thread's kb scores.
int64_t AttentionSharedBytes(int64_t kb, int64_t head_dim) {
  return (2 * kb * head_dim + kQueries * kb) * 4;
}

int64_t AttentionKeyBlock(int64_t head_dim, const Target& target) {
  int64_t kb = 32;
  while (kb > 4 && AttentionSharedBytes(kb, head_dim) > target.limits.max_workgroup_storage_bytes) {
    kb /= 2;
  }
  return kb;
}

StatusOr<ir::Function> Attention(const TensorType& q, const TensorType& k, const TensorType& v,
                                 const Target& target, const AttentionOptions& o,
                                 std::string name) {
  KILN_ASSIGN_OR_RETURN(Shapes s, CheckAttention(q, k, v, target, o));
  if (name.empty()) name = "attention";
  const int64_t d = s.d, d4 = d / 4;
  const int64_t kb = AttentionKeyBlock(d, target);
  if (AttentionSharedBytes(kb, d) > target.limits.max_workgroup_storage_bytes) {
    return InvalidArgument("attention: the target's workgroup storage (",
                           target.limits.max_workgroup_storage_bytes,
                           " bytes) cannot hold key and value blocks of D = ", d);
  }
  const int64_t q_blocks = (s.sq + kQueries - 1) / kQueries;
  const int64_t k_blocks = (s.sk + kb - 1) / kb;
  const double scale = o.scale ? *o.scale : 1.0 / std::sqrt(static_cast<double>(d));
  const int I_sq = static_cast<int>(s.sq), I_sk = static_cast<int>(s.sk);

  ir::IRBuilder b(name);
  Buffer Q = b.BufferParam("Q", q.dtype, internal::Extents(q.shape));
  Buffer K = b.BufferParam("K", q.dtype, internal::Extents(k.shape));
  Buffer V = b.BufferParam("V", q.dtype, internal::Extents(v.shape));
  Buffer M;
  if (o.mask) M = b.BufferParam("mask", q.dtype, internal::Extents(o.mask->shape));
  Buffer O = b.BufferParam("O", q.dtype, internal::Extents(q.shape));

  b.For("block", ir::LoopKind::kBlockX, 0, I32(s.batch_count * q_blocks), [&](const Var& block) {
    b.Allocate("Ks", ir::kF32, {I32(kb * d)}, ir::MemoryScope::kShared, [&](const Buffer& Ks) {
      b.Allocate("Vs", ir::kF32, {I32(kb * d)}, ir::MemoryScope::kShared, [&](const Buffer& Vs) {
        b.Allocate(
            "Ss", ir::kF32, {I32(kQueries * kb)}, ir::MemoryScope::kShared, [&](const Buffer& Ss) {
              b.For("t", ir::LoopKind::kThreadX, 0, I32(kQueries), [&](const Var& t) {
                Var batch = b.Let("batch", block / static_cast<int>(q_blocks));
                Var row = b.Let("row", (block % static_cast<int>(q_blocks)) * kQueries + t);
                Var qrow = b.Let("qrow", ir::Min(row, I_sq - 1));
                std::vector<Expr> coords(s.batch.size());
                int64_t stride = 1;
                for (int i = static_cast<int>(s.batch.size()) - 1; i >= 0; --i) {
                  coords[i] = b.Let(StrCat("b", i), (batch / static_cast<int>(stride)) %
                                                        static_cast<int>(s.batch[i]));
                  stride *= s.batch[i];
                }
                auto at = [&](const Expr& r, const Expr& c) {
                  std::vector<Expr> index = coords;
                  index.push_back(r);
                  index.push_back(c);
                  return index;
                };
                auto local = [&](const char* n, int64_t size,
                                 const std::function<void(const Buffer&)>& f) {
                  b.Allocate(n, ir::kF32, {I32(size)}, ir::MemoryScope::kLocal, f);
                };
                local("q", d, [&](const Buffer& qv) {
                  local("acc", d, [&](const Buffer& acc) {
                    {
                      // Each thread's scores of the block, in shared memory (a row per
                      // thread): a dynamically indexed local array would not stay in
                      // registers anyway.
                      const Buffer& score = Ss;
                      const Expr score_base = t * static_cast<int>(kb);
                      local("state", 8, [&](const Buffer& state) {
                        // [0]: running max, [1]: running sum, [2]: the block's max,
                        // [4..7]: a dot product's lanes.
                        // D in steps of 4, unrolled: q and acc are indexed by constants only,
                        // so they become registers (separate variables).
                        auto over_d = [&](const char*, const std::function<void(const Expr&)>& f) {
                          for (int64_t i = 0; i < d4; ++i) f(I32(4 * i));
                        };
                        over_d("i", [&](const Expr& c) {
                          b.Store(qv, {ir::Ramp(c, 1, 4)},
                                  ToF32(ir::Load(Q, at(qrow, ir::Ramp(c, 1, 4)))) *
                                      ir::Broadcast(F32(scale), 4));
                          b.Store(acc, {ir::Ramp(c, 1, 4)}, ir::Broadcast(F32(0.0), 4));
                        });
                        b.Store(state, {I32(0)}, NegInf());
                        b.Store(state, {I32(1)}, F32(0.0));
                        // Causal: blocks past the workgroup's last query hold no visible key.
                        Expr last_row =
                            ir::Min(((block % static_cast<int>(q_blocks)) + 1) * kQueries, I_sq) -
                            1;
                        Expr blocks = o.causal ? ir::Min(last_row / static_cast<int>(kb) + 1,
                                                         static_cast<int>(k_blocks))
                                               : I32(k_blocks);
                        b.For("kblock", ir::LoopKind::kSerial, 0, blocks, [&](const Var& kbv) {
                          // Cooperative load of kb keys and values (rows past Sk clamped; masked
                          // below).
                          const int64_t vectors = kb * d4;
                          for (int64_t p = 0; p < (vectors + kQueries - 1) / kQueries; ++p) {
                            Expr idx = t + static_cast<int>(p * kQueries);
                            auto load = [&] {
                              Expr r = idx / static_cast<int>(d4),
                                   c = (idx % static_cast<int>(d4)) * 4;
                              Expr key = ir::Min(kbv * static_cast<int>(kb) + r, I_sk - 1);
                              Expr slot = ir::Ramp(r * static_cast<int>(d) + c, 1, 4);
                              b.Store(Ks, {slot}, ToF32(ir::Load(K, at(key, ir::Ramp(c, 1, 4)))));
                              b.Store(Vs, {slot}, ToF32(ir::Load(V, at(key, ir::Ramp(c, 1, 4)))));
                            };
                            if ((p + 1) * kQueries <= vectors) {
                              load();
                            } else {
                              b.If(idx < static_cast<int>(vectors), load);
                            }
                          }
                          b.Barrier();
                          // Scores, masked, and the block's maximum (state[2], from the running
                          // max).
                          b.Store(state, {I32(2)}, ir::Load(state, {I32(0)}));
                          b.For("j", ir::LoopKind::kSerial, 0, I32(kb), [&](const Var& j) {
                            b.Store(state, {Vec(4)}, ir::Broadcast(F32(0.0), 4));
                            over_d("i", [&](const Expr& c) {
                              b.Store(state, {Vec(4)},
                                      ir::Load(state, {Vec(4)}) +
                                          ir::Load(qv, {ir::Ramp(c, 1, 4)}) *
                                              ir::Load(Ks, {ir::Ramp(j * static_cast<int>(d) + c, 1,
                                                                     4)}));
                            });
                            Expr sum = (ir::Load(state, {I32(4)}) + ir::Load(state, {I32(5)})) +
                                       (ir::Load(state, {I32(6)}) + ir::Load(state, {I32(7)}));
                            Expr key = kbv * static_cast<int>(kb) + j;
                            if (o.mask) {
                              sum = sum + ToF32(ir::Load(M, {qrow, ir::Min(key, I_sk - 1)}));
                            }
                            Expr visible = key < I_sk;
                            if (o.causal) visible = visible && key <= row;
                            Var sj = b.Let("s", ir::Select(visible, sum, NegInf()));
                            b.Store(score, {score_base + j}, sj);
                            b.Store(state, {I32(2)}, ir::Max(ir::Load(state, {I32(2)}), sj));
                          });
                          Var m_new = b.Let("m_new", ir::Load(state, {I32(2)}));
                          // All scores so far -inf: keep exp() away from -inf - -inf.
                          Var m_safe =
                              b.Let("m_safe", ir::Select(m_new == NegInf(), F32(0.0), m_new));
                          Var corr = b.Let("corr", Exp(ir::Load(state, {I32(0)}) - m_safe));
                          b.Store(state, {I32(0)}, m_new);
                          over_d("i", [&](const Expr& c) {
                            b.Store(acc, {ir::Ramp(c, 1, 4)},
                                    ir::Load(acc, {ir::Ramp(c, 1, 4)}) * ir::Broadcast(corr, 4));
                          });
                          b.Store(state, {I32(1)}, ir::Load(state, {I32(1)}) * corr);
                          b.For("j2", ir::LoopKind::kSerial, 0, I32(kb), [&](const Var& j) {
                            Var p = b.Let("p", Exp(ir::Load(score, {score_base + j}) - m_safe));
                            b.Store(state, {I32(1)}, ir::Load(state, {I32(1)}) + p);
                            over_d("i", [&](const Expr& c) {
                              b.Store(acc, {ir::Ramp(c, 1, 4)},
                                      ir::Load(acc, {ir::Ramp(c, 1, 4)}) +
                                          ir::Broadcast(p, 4) *
                                              ir::Load(Vs, {ir::Ramp(j * static_cast<int>(d) + c, 1,
                                                                     4)}));
                            });
                          });
                          b.Barrier();
                        });
                        b.If(row < I_sq, [&] {
                          Var inv = b.Let("inv", F32(1.0) / ir::Load(state, {I32(1)}));
                          over_d("i", [&](const Expr& c) {
                            Expr out = ir::Load(acc, {ir::Ramp(c, 1, 4)}) * ir::Broadcast(inv, 4);
                            if (q.dtype != ir::kF32) out = ir::Cast(q.dtype.with_lanes(4), out);
                            b.Store(O, at(row, ir::Ramp(c, 1, 4)), out);
                          });
                        });
                      });
                    }
                  });
                });
              });
            });
      });
    });
  });
  ir::Function f = b.Build();
  ir::VerifyOptions verify;
  verify.limits = target.limits;
  Status verified = ir::Verify(f, verify);
  if (!verified.ok()) return Internal("attention built an invalid kernel: ", verified.message());
  return f;
}

}  // namespace kiln::ops
