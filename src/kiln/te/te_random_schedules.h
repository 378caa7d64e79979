// Random schedules of small tensor programs, for differential tests of the
// lowering. Each primitive is drawn as a record (a stage, axes from its
// current loop nest, a factor, a launch axis, a scope) and applied through
// Schedule::Apply, which either applies it or rejects it with an error and
// leaves the schedule as it was. Whatever lowers must compute what the
// unscheduled program computes: the CPU test runs both in the interpreter,
// the device test runs the scheduled kernels on a WebGPU device.
//
// A tuner applies primitives the same way, so every sequence must either
// lower to a correct kernel or fail with an error, never crash.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kiln/interp/interpreter.h"
#include "kiln/interp/value.h"
#include "kiln/te/schedule_impl.h"
#include "kiln/te/te.h"
#include "kiln/te/te_test_kernels.h"

namespace kiln::te::testing {

// A program, its inputs and outputs, and the values its size vars take.
struct FuzzProgram {
  std::string name;
  std::vector<Tensor> inputs, outputs;
  std::map<std::string, int32_t> sizes;
};

inline ir::Expr C32(int64_t v) {
  return ir::IntConst(ir::kI32, v);
}

inline constexpr int kFuzzPrograms = 17;

// Program `which` (0 .. kFuzzPrograms - 1), built with fresh tensors.
inline FuzzProgram MakeFuzzProgram(int which) {
  auto exp = [](const Expr& e) { return ir::Call(ir::Intrinsic::kExp, {e}); };
  switch (which) {
    case 0: {  // a row broadcast over symbolic sizes
      Var m = SizeVar("m"), n = SizeVar("n");
      Tensor A = Placeholder("A", {m, n}, ir::kF32), b = Placeholder("b", {n}, ir::kF32);
      Tensor C =
          Compute("C", {m, n}, [&](const std::vector<Var>& i) { return A(i[0], i[1]) + b(i[1]); });
      return {"add_row", {A, b}, {C}, {{"m", 5}, {"n", 37}}};
    }
    case 1: {  // matmul over symbolic sizes
      MatmulProgram p;
      return {"matmul", {p.A, p.B}, {p.C}, {{"M", 7}, {"N", 33}, {"K", 19}}};
    }
    case 2: {  // matmul at constant sizes (vector lanes can divide them)
      Tensor A = Placeholder("A", {C32(9), C32(12)}, ir::kF32);
      Tensor B = Placeholder("B", {C32(12), C32(20)}, ir::kF32);
      IterVar k = ReduceAxis(C32(12), "k");
      Tensor C = Compute("C", {C32(9), C32(20)}, [&](const std::vector<Var>& i) {
        return Sum(A(i[0], k) * B(k, i[1]), {k});
      });
      return {"matmul_const", {A, B}, {C}, {}};
    }
    case 3: {  // an injective producer read twice, its body binding a let
      Tensor A = Placeholder("A", {C32(6), C32(13)}, ir::kF32);
      Tensor B = Compute("B", {C32(6), C32(13)}, [&](const std::vector<Var>& i) {
        Var v("v", ir::kF32);
        return ir::Let(v, A(i[0], i[1]) * 2.0, v + 1.0);
      });
      Tensor C = Compute("C", {C32(6), C32(13)}, [&](const std::vector<Var>& i) {
        return B(i[0], i[1]) * B(i[0], i[1]) - A(i[0], i[1]);
      });
      return {"chain", {A}, {C}, {}};
    }
    case 4: {  // a stencil: each element of C reads three of B
      Tensor A = Placeholder("A", {C32(42)}, ir::kF32);
      Tensor B = Compute("B", {C32(42)}, [&](const std::vector<Var>& i) { return A(i[0]) * 3.0; });
      Tensor C = Compute("C", {C32(40)}, [&](const std::vector<Var>& i) {
        return B(i[0]) + B(i[0] + 1) * 2.0 + B(i[0] + 2);
      });
      return {"stencil", {A}, {C}, {}};
    }
    case 5: {  // row sums over symbolic sizes
      Var rows = SizeVar("rows"), cols = SizeVar("cols");
      Tensor X = Placeholder("X", {rows, cols}, ir::kF32);
      IterVar k = ReduceAxis(cols, "k");
      Tensor Y =
          Compute("Y", {rows}, [&](const std::vector<Var>& i) { return Sum(X(i[0], k), {k}); });
      return {"row_sum", {X}, {Y}, {{"rows", 6}, {"cols", 45}}};
    }
    case 6: {  // a scaled row maximum at constant sizes
      Tensor X = Placeholder("X", {C32(5), C32(70)}, ir::kF32);
      IterVar k = ReduceAxis(C32(70), "k");
      Tensor Y = Compute("Y", {C32(5)},
                         [&](const std::vector<Var>& i) { return Max(X(i[0], k), {k}) * 0.5; });
      return {"row_max", {X}, {Y}, {}};
    }
    case 7: {  // softmax: two row statistics and the normalised rows
      Tensor X = Placeholder("X", {C32(7), C32(24)}, ir::kF32);
      IterVar k1 = ReduceAxis(C32(24), "k"), k2 = ReduceAxis(C32(24), "k");
      Tensor M =
          Compute("M", {C32(7)}, [&](const std::vector<Var>& i) { return Max(X(i[0], k1), {k1}); });
      Tensor S = Compute("S", {C32(7)}, [&](const std::vector<Var>& i) {
        return Sum(exp(X(i[0], k2) - M(i[0])), {k2});
      });
      Tensor Y = Compute("Y", {C32(7), C32(24)}, [&](const std::vector<Var>& i) {
        return exp(X(i[0], i[1]) - M(i[0])) / S(i[0]);
      });
      return {"softmax", {X}, {Y}, {}};
    }
    case 8: {  // argmax: a tuple reducer
      ArgmaxProgram p;
      return {"argmax", {p.X}, {p.Y}, {{"rows", 4}, {"cols", 29}}};
    }
    case 9: {  // a stencil over a symbolic size
      StencilProgram p;
      return {"stencil_n", {p.A}, {p.C}, {{"n", 45}}};
    }
    case 10: {  // i32 sums of the positive elements of each row, chosen lazily
      Tensor X = Placeholder("X", {C32(9), C32(21)}, ir::kI32);
      IterVar k = ReduceAxis(C32(21), "k");
      Tensor Y = Compute("Y", {C32(9)}, [&](const std::vector<Var>& i) {
        const Expr x = X(i[0], k);
        return Sum(ir::IfThenElse(x > 0, x, ir::IntConst(ir::kI32, 0)), {k});
      });
      return {"positive_sums", {X}, {Y}, {}};
    }
    case 11: {  // f16 in, scaled and cast, three axes
      Tensor A = Placeholder("A", {C32(3), C32(5), C32(8)}, ir::kF16);
      Tensor B = Placeholder("B", {C32(5), C32(8)}, ir::kF16);
      Tensor C = Compute("C", {C32(3), C32(5), C32(8)}, [&](const std::vector<Var>& i) {
        return ir::Cast(ir::kF32, A(i[0], i[1], i[2]) * B(i[1], i[2])) * 0.25;
      });
      return {"f16_scale", {A, B}, {C}, {}};
    }
    case 13: {  // matmul reading A through a transposing stage (as the library's GEMM)
      TransposedAMatmulProgram p(12, 20, 9);
      return {"matmul_at", {p.A, p.B}, {p.C}, {}};
    }
    case 14: {  // a 2-D stencil: a producer read at three neighbours
      Tensor A = Placeholder("A", {C32(11), C32(14)}, ir::kF32);
      Tensor B = Compute("B", {C32(11), C32(14)},
                         [&](const std::vector<Var>& i) { return A(i[0], i[1]) - 0.5; });
      Tensor C = Compute("C", {C32(10), C32(13)}, [&](const std::vector<Var>& i) {
        return B(i[0], i[1]) + B(i[0] + 1, i[1]) * 2.0 + B(i[0], i[1] + 1);
      });
      return {"stencil_2d", {A}, {C}, {}};
    }
    case 15: {  // reads at divided and remaindered indices
      Tensor A = Placeholder("A", {C32(20)}, ir::kF32);
      Tensor C = Compute("C", {C32(37)}, [&](const std::vector<Var>& i) {
        return A(i[0] / 2) * A(i[0] % 3 + 4) + A(19 - i[0] / 3);
      });
      return {"div_mod", {A}, {C}, {}};
    }
    case 16: {  // the minimum and the product of each row (two reductions, two kernels)
      Tensor X = Placeholder("X", {C32(6), C32(10)}, ir::kF32);
      IterVar k1 = ReduceAxis(C32(10), "k"), k2 = ReduceAxis(C32(10), "k");
      Tensor M =
          Compute("M", {C32(6)}, [&](const std::vector<Var>& i) { return Min(X(i[0], k1), {k1}); });
      Tensor P = Compute("P", {C32(6)}, [&](const std::vector<Var>& i) {
        return Prod(X(i[0], k2) + 1.5, {k2}) + M(i[0]);
      });
      return {"min_prod", {X}, {P}, {}};
    }
    default: {  // a select of two inputs at symbolic sizes
      Var n = SizeVar("n");
      Tensor A = Placeholder("A", {n}, ir::kF32), B = Placeholder("B", {n}, ir::kF32);
      Tensor C = Compute("C", {n}, [&](const std::vector<Var>& i) {
        return ir::Select(A(i[0]) > B(i[0]), A(i[0]) - B(i[0]), B(i[0]) * 3.0);
      });
      return {"select", {A, B}, {C}, {{"n", 1000}}};
    }
  }
}

// Draws primitive records for a schedule.
class RandomPrimitives {
 public:
  explicit RandomPrimitives(uint64_t seed) : rng_(seed) {}

  int Below(int n) { return n <= 1 ? 0 : std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  // One record for `schedule` of `program`, valid or not.
  Primitive Draw(const Schedule& schedule, const FuzzProgram& program) {
    using Kind = Primitive::Kind;
    const auto& stages = schedule.impl().stages;
    const StageState& st = stages[Below(static_cast<int>(stages.size()))];
    Primitive p;
    p.stage = st.name();
    static const Kind kKinds[] = {Kind::kSplit,          Kind::kSplit,
                                  Kind::kSplit,          Kind::kFuse,
                                  Kind::kReorder,        Kind::kBind,
                                  Kind::kBind,           Kind::kBind,
                                  Kind::kUnroll,         Kind::kVectorize,
                                  Kind::kComputeInline,  Kind::kComputeAt,
                                  Kind::kComputeAt,      Kind::kCacheRead,
                                  Kind::kCacheWrite,     Kind::kSetScope,
                                  Kind::kStorageAlign,   Kind::kDoubleBuffer,
                                  Kind::kCopyAhead,      Kind::kRfactor,
                                  Kind::kSubgroupReduce, Kind::kFusedMultiplyAdd};
    p.kind = kKinds[Below(static_cast<int>(std::size(kKinds)))];
    const std::vector<IterVar>& leaves = st.leaves;
    auto leaf = [&]() {
      return leaves.empty() ? std::string("i")
                            : leaves[Below(static_cast<int>(leaves.size()))].name();
    };
    auto scope = [&]() { return std::string(Chance(0.5) ? "shared" : "local"); };
    static const int64_t kFactors[] = {1, 2, 3, 4, 4, 5, 8, 16, 32, 64};
    switch (p.kind) {
      case Kind::kSplit:
        p.axes = {leaf()};
        p.factor = kFactors[Below(static_cast<int>(std::size(kFactors)))];
        if (Chance(0.03)) p.factor = Chance(0.5) ? 0 : -3;  // invalid factors
        break;
      case Kind::kFuse: {
        const int i = Below(static_cast<int>(leaves.size()));
        p.axes = {leaf(), leaf()};
        if (i + 1 < static_cast<int>(leaves.size()) && Chance(0.8)) {
          p.axes = {leaves[i].name(), leaves[i + 1].name()};
        }
        break;
      }
      case Kind::kReorder: {
        std::vector<std::string> names;
        for (const IterVar& a : leaves) {
          if (Chance(0.7)) names.push_back(a.name());
        }
        std::shuffle(names.begin(), names.end(), rng_);
        p.axes = names;
        break;
      }
      case Kind::kBind: {
        static const char* kThreads[] = {"blockIdx.x", "blockIdx.y", "threadIdx.x", "threadIdx.y"};
        p.axes = {leaf()};
        p.thread = kThreads[Below(4)];
        break;
      }
      case Kind::kUnroll:
        p.axes = {leaf()};
        break;
      case Kind::kVectorize: {
        // Mostly a leaf of 2 to 4 iterations, the only extents that vectorize.
        std::vector<std::string> short_leaves;
        for (const IterVar& a : leaves) {
          const std::optional<int64_t> e = ir::AsConstInt(a.extent());
          if (e && *e >= 2 && *e <= 4) short_leaves.push_back(a.name());
        }
        p.axes = {short_leaves.empty() || Chance(0.2)
                      ? leaf()
                      : short_leaves[Below(static_cast<int>(short_leaves.size()))]};
        break;
      }
      case Kind::kComputeAt: {
        // Mostly a stage that reads this one.
        std::vector<const StageState*> readers;
        for (const StageState& r : stages) {
          for (const Tensor& t : r.op->inputs) {
            if (t.name() == st.name()) readers.push_back(&r);
          }
        }
        const StageState& target = !readers.empty() && Chance(0.8)
                                       ? *readers[Below(static_cast<int>(readers.size()))]
                                       : stages[Below(static_cast<int>(stages.size()))];
        p.target = target.name();
        if (!target.leaves.empty()) {
          p.axes = {target.leaves[Below(static_cast<int>(target.leaves.size()))].name()};
        } else {
          p.axes = {"i"};
        }
        break;
      }
      case Kind::kCacheRead: {
        // A tensor some stage reads, and some of its readers.
        std::vector<std::string> tensors;
        for (const Tensor& t : program.inputs) tensors.push_back(t.name());
        for (const StageState& s : stages) tensors.push_back(s.name());
        p.stage = tensors[Below(static_cast<int>(tensors.size()))];
        for (const StageState& s : stages) {
          bool reads = false;
          for (const Tensor& t : s.op->inputs) reads = reads || t.name() == p.stage;
          if ((reads && Chance(0.8)) || Chance(0.05)) p.axes.push_back(s.name());
        }
        p.scope = scope();
        break;
      }
      case Kind::kCacheWrite:
      case Kind::kSetScope:
        p.scope = Chance(0.05) ? "global" : scope();
        break;
      case Kind::kStorageAlign:
        p.axes = {st.op->axis.empty()
                      ? std::string("i")
                      : st.op->axis[Below(static_cast<int>(st.op->axis.size()))].name()};
        p.factor = Chance(0.5) ? 32 : 16;
        p.offset = Below(3);
        break;
      case Kind::kRfactor:
        p.axes = {leaf()};
        break;
      default:
        break;
    }
    return p;
  }

 private:
  std::mt19937_64 rng_;
};

// The usual start of a GPU schedule, for half of the cases: the output's
// outermost loop split by a power of two, its parts bound to blockIdx.x and
// threadIdx.x. Returns the number of threads.
inline StatusOr<int64_t> GuidedStart(Schedule& s, const FuzzProgram& program,
                                     RandomPrimitives& draw) {
  Stage out = s[program.outputs[0]];
  static const int64_t kThreads[] = {2, 4, 8, 16, 32, 64};
  const int64_t threads = kThreads[draw.Below(6)];
  KILN_ASSIGN_OR_RETURN(SplitResult r, out.Split(out.leaf_axes()[0], threads));
  KILN_RETURN_IF_ERROR(out.Bind(r.outer, ThreadAxis::kBlockX));
  KILN_RETURN_IF_ERROR(out.Bind(r.inner, ThreadAxis::kThreadX));
  return threads;
}

// Other usual starts, for some of the cases: a reduction across threads (its
// axis split, the inner part bound to threadIdx.x, the rows to blockIdx.x,
// sometimes through subgroups or an rfactor stage), or the innermost data
// axis split by a vector width and vectorized. Best effort.
inline void GuidedAcross(Schedule& s, const FuzzProgram& program, RandomPrimitives& draw) {
  Stage out = s[program.outputs[0]];
  if (!out.reduce_axes().empty()) {
    static const int64_t kWidths[] = {4, 8, 16, 32, 64};
    StatusOr<SplitResult> k = out.Split(out.reduce_axis(0), kWidths[draw.Below(5)]);
    if (!k.ok()) return;
    if (draw.Chance(0.3)) {
      StatusOr<Tensor> rf = s.Rfactor(program.outputs[0], k->inner);
      if (!rf.ok()) return;
      Stage y = s[program.outputs[0]];
      if (!y.Bind(y.leaf_axes()[0], ThreadAxis::kBlockX).ok()) return;
      (void)y.Bind(y.leaf_axes().back(), ThreadAxis::kThreadX);
      (void)s[*rf].ComputeAt(y, y.leaf_axes().back());
      return;
    }
    if (!out.Bind(out.leaf_axes()[0], ThreadAxis::kBlockX).ok()) return;
    if (!out.Bind(k->inner, ThreadAxis::kThreadX).ok()) return;
    if (draw.Chance(0.4)) (void)out.SubgroupReduce();
    return;
  }
  const std::vector<IterVar> leaves = out.leaf_axes();
  StatusOr<SplitResult> lanes = out.Split(leaves.back(), 2 + draw.Below(3));
  if (lanes.ok()) (void)out.Vectorize(lanes->inner);
}

// Staging, for some of the cases whose output reduces: the reduction split,
// one input cached in shared or local memory at the outer reduction loop,
// a shared copy spread over the `threads` threads (where the start bound
// them) and sometimes double-buffered or copied ahead. Best effort: a step
// that fails is left out.
inline void GuidedStaging(Schedule& s, const FuzzProgram& program, RandomPrimitives& draw,
                          int64_t threads) {
  Stage out = s[program.outputs[0]];
  if (out.reduce_axes().empty()) return;
  static const int64_t kSteps[] = {2, 3, 4, 8};
  StatusOr<SplitResult> k = out.Split(out.reduce_axis(0), kSteps[draw.Below(4)]);
  if (!k.ok()) return;
  const bool shared = draw.Chance(0.7);
  const Tensor& input = program.inputs[draw.Below(static_cast<int>(program.inputs.size()))];
  StatusOr<Tensor> cached = s.CacheRead(
      input, shared ? ir::MemoryScope::kShared : ir::MemoryScope::kLocal, {program.outputs[0]});
  if (!cached.ok()) return;
  Stage c = s[*cached];
  if (!c.ComputeAt(out, k->outer).ok()) return;
  if (shared && threads > 0) {
    IterVar all = c.leaf_axes()[0];
    for (size_t d = 1; d < c.leaf_axes().size(); ++d) {
      StatusOr<IterVar> fused = c.Fuse(all, c.leaf_axes()[1]);
      if (!fused.ok()) return;
      all = *fused;
    }
    StatusOr<SplitResult> spread = c.Split(all, threads);
    if (!spread.ok() || !c.Bind(spread->inner, ThreadAxis::kThreadX).ok()) return;
  }
  if (shared && draw.Chance(0.3)) (void)c.DoubleBuffer(draw.Chance(0.5));
  if (shared && draw.Chance(0.3)) (void)c.CopyAhead(draw.Chance(0.5));
}

// Called with each primitive Schedule::Apply rejects, its error, and the
// schedule's text before and after it.
using OnRejected = std::function<void(const Primitive&, const Status&, const std::string& before,
                                      const std::string& after)>;

// Case `seed`'s schedule of `program`: half of the cases start with blocks
// and threads, a fifth across threads or with vectors, some stage an input,
// then 1 to 16 random primitives, each applied or rejected.
inline StatusOr<Schedule> DrawSchedule(const FuzzProgram& program, uint64_t seed,
                                       const OnRejected& on_rejected = nullptr,
                                       std::map<std::string, int>* applied = nullptr) {
  KILN_ASSIGN_OR_RETURN(Schedule s, Schedule::Create(program.outputs));
  RandomPrimitives draw(seed);
  int64_t threads = 0;
  const int start = draw.Below(10);  // 0-4: blocks and threads; 5-6: across or vectors
  if (start < 5) {
    KILN_ASSIGN_OR_RETURN(threads, GuidedStart(s, program, draw));
  } else if (start < 7) {
    GuidedAcross(s, program, draw);
  }
  if (draw.Chance(0.4)) GuidedStaging(s, program, draw, threads);
  const int steps = 1 + draw.Below(16);
  for (int step = 0; step < steps; ++step) {
    const Primitive p = draw.Draw(s, program);
    const std::string before = s.ToString();
    const Status status = s.Apply(p);
    if (status.ok()) {
      if (applied != nullptr) ++(*applied)[std::string(Primitive::KindName(p.kind))];
    } else if (on_rejected) {
      on_rejected(p, status, before, s.ToString());
    }
  }
  return s;
}

// A run's buffers, by parameter name.
using HostBuffers = std::map<std::string, interp::HostBuffer>;

inline std::map<const ir::VarNode*, interp::Value> SizeBindings(const ir::Function& f,
                                                                const FuzzProgram& program) {
  std::map<const ir::VarNode*, interp::Value> bindings;
  for (const ir::Param& param : f.params()) {
    if (!param.is_scalar()) continue;
    auto it = program.sizes.find(param.name());
    bindings[param.var().get()] = interp::Value::I32(it == program.sizes.end() ? 0 : it->second);
  }
  return bindings;
}

// Runs `functions` in order in the interpreter over `buffers` (by name;
// missing ones, intermediates and outputs, are created poisoned).
inline Status RunInInterpreter(const std::vector<ir::Function>& functions,
                               const FuzzProgram& program, HostBuffers& buffers) {
  for (const ir::Function& f : functions) {
    const auto bindings = SizeBindings(f, program);
    std::vector<interp::ArgValue> args;
    for (const ir::Param& param : f.params()) {
      if (param.is_scalar()) {
        args.emplace_back(bindings.at(param.var().get()));
        continue;
      }
      auto it = buffers.find(param.name());
      if (it == buffers.end()) {
        std::vector<int64_t> shape;
        for (const ir::Expr& e : param.buffer().shape()) {
          KILN_ASSIGN_OR_RETURN(interp::Value v, interp::EvaluateScalar(e, bindings));
          shape.push_back(v.AsInt());
        }
        interp::HostBuffer b(param.buffer().dtype(), shape);
        for (uint8_t& byte : b.bytes) byte = 0xcd;
        it = buffers.emplace(param.name(), std::move(b)).first;
      }
      args.emplace_back(it->second);
    }
    KILN_RETURN_IF_ERROR(interp::Run(f, args));
    size_t a = 0;
    for (const ir::Param& param : f.params()) {
      if (param.is_buffer()) buffers[param.name()] = std::get<interp::HostBuffer>(args[a]);
      ++a;
    }
  }
  return Status::Ok();
}

// The program's inputs, random (floats in [-1, 1], integers in [-100, 100]),
// at the shapes `functions` give them. In a third of the seeds a few
// elements of each input are edge values instead: NaN, -0.0 and infinities
// for floats, the type's limits for integers.
inline StatusOr<HostBuffers> RandomInputs(const std::vector<ir::Function>& functions,
                                          const FuzzProgram& program, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::uniform_int_distribution<int> ints(-100, 100);
  HostBuffers buffers;
  std::map<const ir::VarNode*, interp::Value> bindings;
  for (const ir::Function& f : functions) bindings.merge(SizeBindings(f, program));
  for (const Tensor& t : program.inputs) {
    int64_t n = 1;
    std::vector<int64_t> shape;
    for (const ir::Expr& e : t.shape()) {
      KILN_ASSIGN_OR_RETURN(interp::Value v, interp::EvaluateScalar(e, bindings));
      shape.push_back(v.AsInt());
      n *= v.AsInt();
    }
    interp::HostBuffer b(t.dtype(), shape);
    for (int64_t i = 0; i < n; ++i) {
      b.Set(i, t.dtype().is_float() ? interp::Value::Float(t.dtype(), dist(rng))
                                    : interp::Value::Int(t.dtype(), ints(rng)));
    }
    if (seed % 3 == 0 && n > 0) {
      const double inf = std::numeric_limits<double>::infinity();
      const double floats[] = {std::nan(""), -0.0, inf, -inf};
      const int64_t limits[] = {std::numeric_limits<int32_t>::max(),
                                std::numeric_limits<int32_t>::min(), 0};
      for (int k = 0; k < 3; ++k) {
        const int64_t at = std::uniform_int_distribution<int64_t>(0, n - 1)(rng);
        b.Set(at, t.dtype().is_float() ? interp::Value::Float(t.dtype(), floats[rng() % 4])
                                       : interp::Value::Int(t.dtype(), limits[rng() % 3]));
      }
    }
    buffers.emplace(t.name(), std::move(b));
  }
  return buffers;
}

}  // namespace kiln::te::testing
