// The reduction-shaped kernel template (row_kernel.h).
#include "kiln/ops/row_kernel.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "kiln/ir/expr_ops.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/simplifier.h"
#include "kiln/ir/verifier.h"

namespace kiln::ops::internal {
namespace {

ir::Expr I32(int64_t v) {
  return ir::IntConst(ir::kI32, v);
}

// The coordinates along `dims` of `shape` of the row-major flat index `flat`
// over those dimensions.
std::vector<ir::Expr> Unflatten(const ir::Expr& flat, const Shape& shape,
                                const std::vector<int>& dims) {
  std::vector<ir::Expr> out(dims.size());
  int64_t stride = 1;
  for (int k = static_cast<int>(dims.size()) - 1; k >= 0; --k) {
    const int64_t extent = shape[dims[k]];
    if (extent == 1) {
      out[k] = I32(0);
      continue;
    }
    ir::Expr q = stride == 1 ? flat : flat / I32(stride);
    // The outermost dimension of extent > 1 needs no modulo.
    bool outermost = true;
    for (int j = 0; j < k; ++j) outermost = outermost && shape[dims[j]] == 1;
    out[k] = outermost ? q : q % I32(extent);
    stride *= extent;
  }
  return out;
}

}  // namespace

RowView RowView::Make(const Shape& shape, std::vector<int> reduced) {
  RowView v;
  v.shape = shape;
  std::sort(reduced.begin(), reduced.end());
  v.reduced = reduced;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    if (std::find(reduced.begin(), reduced.end(), d) == reduced.end()) {
      v.kept.push_back(d);
      v.outputs *= shape[d];
    } else {
      v.length *= shape[d];
    }
  }
  // Trailing: no kept axis of extent > 1 after a reduced axis of extent > 1.
  v.trailing = true;
  bool seen_reduced = false;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    if (shape[d] == 1) continue;
    const bool is_reduced = std::find(reduced.begin(), reduced.end(), d) != reduced.end();
    if (is_reduced) seen_reduced = true;
    if (!is_reduced && seen_reduced) v.trailing = false;
  }
  return v;
}

std::vector<ir::Expr> RowView::Index(const ir::Expr& o, const ir::Expr& r) const {
  std::vector<ir::Expr> index(shape.size());
  std::vector<ir::Expr> ko = Unflatten(o, shape, kept);
  std::vector<ir::Expr> kr = Unflatten(r, shape, reduced);
  for (size_t k = 0; k < kept.size(); ++k) index[kept[k]] = ko[k];
  for (size_t k = 0; k < reduced.size(); ++k) index[reduced[k]] = kr[k];
  return index;
}

Shape RowView::OutputShape(bool keepdims) const {
  Shape out;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    const bool is_reduced = std::find(reduced.begin(), reduced.end(), d) != reduced.end();
    if (!is_reduced) {
      out.push_back(shape[d]);
    } else if (keepdims) {
      out.push_back(1);
    }
  }
  if (out.empty()) out.push_back(1);
  return out;
}

std::vector<ir::Expr> RowView::OutputIndex(const ir::Expr& o, bool keepdims) const {
  std::vector<ir::Expr> ko = Unflatten(o, shape, kept);
  if (!keepdims) {
    if (ko.empty()) return {I32(0)};
    return ko;
  }
  std::vector<ir::Expr> index(shape.size(), I32(0));
  for (size_t k = 0; k < kept.size(); ++k) index[kept[k]] = ko[k];
  return index;
}

RowSchedule ChooseRowSchedule(const RowView& view, const Target& target, int passes) {
  RowSchedule s;
  const int64_t n = view.length;
  s.cooperative = view.trailing ? n >= 32 : (n >= 256 && view.outputs < 256);
  if (s.cooperative) {
    // A power of two (for the tree), at most 256 and the target's limits.
    int64_t cap = std::min<int64_t>(
        {256, target.limits.max_invocations_per_workgroup, target.limits.max_workgroup_size_x});
    int64_t t = 1;
    while (t * 2 <= cap && t < n) t *= 2;
    s.threads = t;
  } else {
    s.threads = ThreadsPerBlock(view.outputs, target.limits);
  }
  const int64_t per_thread = s.cooperative ? (n + s.threads - 1) / s.threads : n;
  if (passes > 1 && per_thread <= 16) s.cached = per_thread;
  s.subgroups = s.cooperative && target.subgroups;
  return s;
}

namespace {
// |x|'s bits as u32 (the sign cleared), against which 0x7f800000 separates
// the finite values, the infinities and NaN.
ir::Expr MagnitudeBits(const ir::Expr& x) {
  return ir::Call(ir::Intrinsic::kBitwiseAnd,
                  {ir::Reinterpret(ir::kU32, x), ir::IntConst(ir::kU32, 0x7fffffff)});
}
}  // namespace

ir::Expr IsNan(const ir::Expr& x) {
  return MagnitudeBits(x) > ir::IntConst(ir::kU32, 0x7f800000);
}

ir::Expr IsNonFinite(const ir::Expr& x) {
  return MagnitudeBits(x) >= ir::IntConst(ir::kU32, 0x7f800000);
}

ir::Expr NanIf(const ir::Expr& poisoned, const ir::Expr& value) {
  return ir::Select(poisoned, ir::FloatConst(ir::kF32, std::numeric_limits<double>::quiet_NaN()),
                    value);
}

ir::Expr ReduceIdentity(std::string_view op) {
  const double inf = std::numeric_limits<double>::infinity();
  if (op == "max") return ir::FloatConst(ir::kF32, -inf);
  if (op == "min") return ir::FloatConst(ir::kF32, inf);
  if (op == "prod") return ir::FloatConst(ir::kF32, 1.0);
  return ir::FloatConst(ir::kF32, 0.0);
}

ir::Expr ReduceCombine(std::string_view op, const ir::Expr& acc, const ir::Expr& x) {
  // max/min: x wins where it is NaN or strictly better, so NaN propagates
  // and a NaN accumulator stays.
  if (op == "max") return ir::Select(x > acc || IsNan(x), x, acc);
  if (op == "min") return ir::Select(x < acc || IsNan(x), x, acc);
  if (op == "prod") return acc * x;
  return acc + x;
}

RowKernel::RowKernel(ir::IRBuilder& b, RowView view, RowSchedule schedule,
                     std::vector<ir::DataType> slots)
    : b_(b), view_(std::move(view)), schedule_(schedule), slot_types_(std::move(slots)) {}

ir::Expr RowKernel::IsWriter() const {
  return schedule_.cooperative ? tx_ == 0 : ir::BoolConst(true);
}

void RowKernel::Emit(const std::function<void()>& body) {
  const int64_t t = schedule_.threads;
  auto with_cache = [&]() {
    if (schedule_.cached == 0) {
      body();
      return;
    }
    b_.Allocate("xc", ir::kF32, {I32(schedule_.cached)}, ir::MemoryScope::kLocal,
                [&](const ir::Buffer& c) {
                  cache_ = c;
                  body();
                });
  };
  if (!schedule_.cooperative) {
    const int64_t blocks = (view_.outputs + t - 1) / t;
    b_.For("bx", ir::LoopKind::kBlockX, I32(0), I32(blocks), [&](const ir::Var& bx) {
      b_.For("tx", ir::LoopKind::kThreadX, I32(0), I32(t), [&](const ir::Var& tx) {
        tx_ = tx;
        ir::Var o = b_.Let("o", bx * I32(t) + tx);
        o_ = o;
        if (view_.outputs % t == 0) {
          with_cache();
        } else {
          b_.If(o < I32(view_.outputs), with_cache);
        }
      });
    });
    return;
  }
  b_.For("o", ir::LoopKind::kBlockX, I32(0), I32(view_.outputs), [&](const ir::Var& o) {
    o_ = o;
    // One shared array per slot, nested.
    std::function<void(size_t)> open = [&](size_t k) {
      if (k == slot_types_.size()) {
        b_.For("tx", ir::LoopKind::kThreadX, I32(0), I32(t), [&](const ir::Var& tx) {
          tx_ = tx;
          if (!schedule_.subgroups) {
            with_cache();
            return;
          }
          // Reduce's gathering accumulator.
          Locals("gather", ir::kF32, 1, [&](const ir::Buffer& g) {
            gather_ = g;
            with_cache();
          });
        });
        return;
      }
      b_.Allocate(StrCat("s", k), slot_types_[k], {I32(t)}, ir::MemoryScope::kShared,
                  [&](const ir::Buffer& s) {
                    slots_.push_back(s);
                    open(k + 1);
                  });
    };
    open(0);
  });
}

void RowKernel::Locals(const std::string& name, ir::DataType dtype, int64_t n,
                       const std::function<void(const ir::Buffer&)>& body) {
  b_.Allocate(name, dtype, {I32(n)}, ir::MemoryScope::kLocal, body);
}

// The most elements per thread that a pass unrolls.
constexpr int64_t kUnrolledPass = 16;

void RowKernel::Pass(const ir::Buffer& x,
                     const std::function<void(const ir::Expr& r, const ir::Expr& x)>& fn) {
  const int64_t n = view_.length;
  const int64_t t = schedule_.cooperative ? schedule_.threads : 1;
  auto load = [&](const ir::Expr& r) {
    ir::Expr v = ir::Load(x, view_.Index(o_, r));
    return x.dtype() == ir::kF32 ? v : ir::Cast(ir::kF32, v);
  };
  // Element v of every thread, one statement each: guarded where the last
  // ones fall past the row (every thread's element v is in the row when
  // (v + 1) * t <= n).
  auto steps = [&](int64_t count, const std::function<void(int64_t, const ir::Expr&)>& step) {
    for (int64_t v = 0; v < count; ++v) {
      const ir::Expr r = schedule_.cooperative ? tx_ + I32(v * t) : I32(v);
      if ((v + 1) * t <= n) {
        step(v, r);
      } else {
        b_.If(r < I32(n), [&] { step(v, r); });
      }
    }
  };
  if (schedule_.cached > 0) {
    const bool fill = !cache_filled_;
    cache_filled_ = true;
    steps(schedule_.cached, [&](int64_t v, const ir::Expr& r) {
      if (fill) b_.Store(cache_, {I32(v)}, load(r));
      fn(r, ir::Load(cache_, {I32(v)}));
    });
    return;
  }
  if (schedule_.cooperative && (n + t - 1) / t <= kUnrolledPass) {
    // Few elements per thread: each one a step of its own, so that their
    // loads are all in flight at once (a loop with a trip count computed
    // per thread is not unrolled by every compiler).
    steps((n + t - 1) / t, [&](int64_t, const ir::Expr& r) { fn(r, load(r)); });
  } else if (schedule_.cooperative) {
    b_.For(
        "r", ir::LoopKind::kSerial, tx_, I32(n) - tx_, [&](const ir::Var& r) { fn(r, load(r)); },
        I32(t));
  } else {
    b_.For("r", ir::LoopKind::kSerial, I32(0), I32(n), [&](const ir::Var& r) { fn(r, load(r)); });
  }
}

RowKernel::Values RowKernel::Combine(const Values& values, const CombineFn& combine) {
  KILN_CHECK(values.size() <= slot_types_.size());
  ++combines_;
  if (!schedule_.cooperative) {
    Values out;
    for (size_t k = 0; k < values.size(); ++k) {
      out.push_back(b_.Let(StrCat("red", combines_, "_", k), values[k]));
    }
    return out;
  }
  const int64_t t = schedule_.threads;
  for (size_t k = 0; k < values.size(); ++k) b_.Store(slots_[k], {tx_}, values[k]);
  b_.Barrier();
  for (int64_t half = t / 2; half >= 1; half /= 2) {
    b_.If(tx_ < I32(half), [&]() {
      Values a, c;
      for (size_t k = 0; k < values.size(); ++k) {
        a.push_back(ir::Load(slots_[k], {tx_}));
        c.push_back(ir::Load(slots_[k], {tx_ + I32(half)}));
      }
      Values r = combine(a, c);
      Values bound;
      for (size_t k = 0; k < values.size(); ++k) {
        bound.push_back(b_.Let(StrCat("c", k), r[k]));
      }
      for (size_t k = 0; k < values.size(); ++k) b_.Store(slots_[k], {tx_}, bound[k]);
    });
    b_.Barrier();
  }
  Values out;
  for (size_t k = 0; k < values.size(); ++k) {
    out.push_back(b_.Let(StrCat("red", combines_, "_", k), ir::Load(slots_[k], {I32(0)})));
  }
  // The slots may be written again by a later Combine.
  b_.Barrier();
  return out;
}

ir::Expr RowKernel::Reduce(std::string_view op, const ir::Expr& value) {
  const bool max = op == "max", min = op == "min";
  if (!schedule_.cooperative || !schedule_.subgroups || !(op == "sum" || max || min)) {
    return Combine({value}, [&](const Values& a, const Values& c) {
      return Values{ReduceCombine(op, a[0], c[0])};
    })[0];
  }
  KILN_CHECK(!slot_types_.empty() && slot_types_[0] == ir::kF32);
  ++combines_;
  const std::string tag = StrCat(combines_);
  const ir::Expr identity = ReduceIdentity(op);
  // The subgroup's reduction of `v`, the same in each of its threads.
  // subgroup_max/min leave NaN unspecified: a NaN anywhere in the subgroup
  // (counted with an integer subgroup_max) makes the result NaN.
  auto subgroup_reduce = [&](const std::string& name, const ir::Expr& v) -> ir::Expr {
    if (!max && !min) return b_.Let(name, ir::Call(ir::Intrinsic::kSubgroupAdd, {v}));
    ir::Var value = b_.Let(StrCat(name, "_in"), v);
    ir::Var m = b_.Let(StrCat(name, "_num"),
                       ir::Call(max ? ir::Intrinsic::kSubgroupMax : ir::Intrinsic::kSubgroupMin,
                                {ir::Expr(value)}));
    ir::Var nan =
        b_.Let(StrCat(name, "_nan"),
               ir::Call(ir::Intrinsic::kSubgroupMax, {ir::Select(IsNan(value), I32(1), I32(0))}));
    return b_.Let(
        name, ir::Select(nan > I32(0),
                         ir::FloatConst(ir::kF32, std::numeric_limits<double>::quiet_NaN()), m));
  };
  const int64_t t = schedule_.threads;
  ir::Expr partial = subgroup_reduce(StrCat("sg", tag), value);
  ir::Var lane = b_.Let(StrCat("lane", tag), ir::Call(ir::Intrinsic::kSubgroupInvocationId, {}));
  ir::Var size = b_.Let(StrCat("sg_size", tag), ir::Call(ir::Intrinsic::kSubgroupSize, {}));
  // One partial per subgroup among `t` slots, the identity elsewhere: which
  // threads form a subgroup is the device's choice.
  b_.Store(slots_[0], {tx_}, ir::Select(lane == I32(0), partial, identity));
  b_.Barrier();
  // Every subgroup gathers all t slots (lane l: l, l + size, ...; a
  // uniform trip count), then reduces across its lanes: every thread gets
  // the output's result.
  const ir::Buffer& acc = gather_;
  b_.Store(acc, {I32(0)}, identity);
  b_.For(StrCat("k", tag), ir::LoopKind::kSerial, I32(0), (I32(t) + size - I32(1)) / size,
         [&](const ir::Var& k) {
           ir::Var j = b_.Let(StrCat("j", tag), k * size + lane);
           b_.If(j < I32(t), [&]() {
             b_.Store(acc, {I32(0)},
                      ReduceCombine(op, ir::Load(acc, {I32(0)}), ir::Load(slots_[0], {j})));
           });
         });
  ir::Expr total = subgroup_reduce(StrCat("red", tag), ir::Load(acc, {I32(0)}));
  // The slots may be written again by a later reduction.
  b_.Barrier();
  return total;
}

}  // namespace kiln::ops::internal

namespace kiln::ops::internal {

StatusOr<ir::Function> FinishKernel(const ir::IRBuilder& b, const Target& target) {
  ir::Function f = ir::Simplify(b.Build());
  ir::VerifyOptions options;
  options.limits = target.limits;
  options.allow_subgroups = target.subgroups;
  Status verified = ir::Verify(f, options);
  if (!verified.ok()) {
    return Status(
        verified.code(),
        StrCat(f.name(), ": the kernel does not verify: ", verified.message(), "\n", ir::Print(f)));
  }
  return f;
}

StatusOr<int> NormalizeAxis(int64_t axis, int rank, std::string_view what) {
  if (axis < -rank || axis >= rank) {
    return InvalidArgument(what, " is ", axis, "; for a tensor of rank ", rank, " it must be in [",
                           -rank, ", ", rank, ")");
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

}  // namespace kiln::ops::internal
