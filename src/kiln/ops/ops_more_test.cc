// Reductions over any axes, arg-reductions, softmax, norms, data movement,
// where and cast on the CPU: the kernels' signatures and schedule rules, the
// time to build them, every argument error, the subgroup combine on the
// interpreter for every subgroup size, and fused expressions planned as
// several kernels against one kernel on the interpreter.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kiln/interp/interpreter.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/verifier.h"
#include "kiln/ops/ops.h"

namespace kiln::ops {
namespace {

// An argument error by default; a feature the target lacks (shader-f16) is
// kUnavailable.
void ExpectError(const Status& status, const std::vector<std::string>& fragments,
                 StatusCode code = StatusCode::kInvalidArgument) {
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), code) << status;
  for (const std::string& f : fragments) {
    EXPECT_NE(status.message().find(f), std::string::npos)
        << "'" << f << "' not in: " << status.message();
  }
}

bool Contains(const ir::Function& f, const std::string& text) {
  return ir::Print(f).find(text) != std::string::npos;
}

TEST(OpsMoreTest, LongRowsGetAWorkgroupShortRowsAThread) {
  // 33 rows of 1000: a workgroup of 256 per row, a tree in shared memory.
  auto coop = ReduceAxes("sum", {{33, 1000}}, {1}, false, Target{});
  ASSERT_TRUE(coop.ok()) << coop.status();
  EXPECT_TRUE(Contains(*coop, "blockIdx.x(0, 33)")) << ir::Print(*coop);
  EXPECT_TRUE(Contains(*coop, "threadIdx.x(0, 256)")) << ir::Print(*coop);
  EXPECT_TRUE(Contains(*coop, "workgroup_barrier()")) << ir::Print(*coop);
  EXPECT_TRUE(Contains(*coop, "shared")) << ir::Print(*coop);
  // Rows of 33: 64 threads.
  auto small = ReduceAxes("max", {{1000, 33}}, {-1}, false, Target{});
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_TRUE(Contains(*small, "threadIdx.x(0, 64)")) << ir::Print(*small);
  // 1000 rows of 7: a thread per row, no barrier.
  auto serial = ReduceAxes("sum", {{1000, 7}}, {1}, false, Target{});
  ASSERT_TRUE(serial.ok()) << serial.status();
  EXPECT_TRUE(Contains(*serial, "blockIdx.x(0, 4)")) << ir::Print(*serial);
  EXPECT_FALSE(Contains(*serial, "workgroup_barrier")) << ir::Print(*serial);
  // Over axis 0 of [33, 1000]: a thread per column (coalesced), no barrier.
  auto cols = ReduceAxes("sum", {{33, 1000}}, {0}, true, Target{});
  ASSERT_TRUE(cols.ok()) << cols.status();
  EXPECT_TRUE(Contains(*cols, "Y: buffer<f32>[1, 1000]")) << ir::Print(*cols);
  EXPECT_FALSE(Contains(*cols, "workgroup_barrier")) << ir::Print(*cols);
  // Smaller limits: 64 threads.
  Target small_limits;
  small_limits.limits.max_invocations_per_workgroup = 64;
  auto limited = ReduceAxes("sum", {{33, 1000}}, {1}, false, small_limits);
  ASSERT_TRUE(limited.ok()) << limited.status();
  EXPECT_TRUE(Contains(*limited, "threadIdx.x(0, 64)")) << ir::Print(*limited);
}

size_t Count(const ir::Function& f, const std::string& text) {
  const std::string printed = ir::Print(f);
  size_t n = 0;
  for (size_t at = printed.find(text); at != std::string::npos; at = printed.find(text, at + 1)) {
    ++n;
  }
  return n;
}

TEST(OpsMoreTest, CooperativeReductionsUseSubgroupsWhereTheTargetHasThem) {
  Target sg;
  sg.subgroups = true;
  const Target tree;
  for (const char* op : {"sum", "mean", "max", "min"}) {
    SCOPED_TRACE(op);
    auto with = ReduceAxes(op, {{33, 1000}}, {1}, false, sg);
    ASSERT_TRUE(with.ok()) << with.status();
    const std::string intrinsic = std::string(op) == "max"   ? "subgroup_max("
                                  : std::string(op) == "min" ? "subgroup_min("
                                                             : "subgroup_add(";
    // Two subgroup reductions (the lanes, then the gathered slots; max
    // also counts NaN with subgroup_max), two barriers, no tree.
    EXPECT_EQ(Count(*with, intrinsic), std::string(op) == "max" ? 4u : 2u) << ir::Print(*with);
    EXPECT_EQ(Count(*with, "subgroup_invocation_id()"), 1u) << ir::Print(*with);
    EXPECT_EQ(Count(*with, "subgroup_size()"), 1u) << ir::Print(*with);
    EXPECT_EQ(Count(*with, "workgroup_barrier()"), 2u) << ir::Print(*with);
    auto without = ReduceAxes(op, {{33, 1000}}, {1}, false, tree);
    ASSERT_TRUE(without.ok()) << without.status();
    EXPECT_EQ(Count(*without, "subgroup"), 0u) << ir::Print(*without);
    EXPECT_EQ(Count(*without, "workgroup_barrier()"), 10u) << ir::Print(*without);
  }
  // max and min also count NaN with an integer subgroup_max.
  auto mn = ReduceAxes("min", {{33, 1000}}, {1}, false, sg);
  ASSERT_TRUE(mn.ok());
  EXPECT_EQ(Count(*mn, "subgroup_max("), 2u) << ir::Print(*mn);
  // prod and the arg-reductions combine through a butterfly of shuffles
  // (offsets 64 .. 1 below the 256 threads, twice; one shuffle per value of
  // the (index, value) pairs), two barriers.
  auto prod = ReduceAxes("prod", {{33, 1000}}, {1}, false, sg);
  ASSERT_TRUE(prod.ok()) << prod.status();
  EXPECT_EQ(Count(*prod, "subgroup_shuffle("), 14u) << ir::Print(*prod);
  EXPECT_EQ(Count(*prod, "workgroup_barrier()"), 2u) << ir::Print(*prod);
  auto arg = ArgReduce("argmax", {{33, 1000}}, 1, false, sg);
  ASSERT_TRUE(arg.ok()) << arg.status();
  EXPECT_EQ(Count(*arg, "subgroup_shuffle("), 28u) << ir::Print(*arg);
  // A thread per output needs no combine at all.
  auto serial = ReduceAxes("sum", {{1000, 7}}, {1}, false, sg);
  ASSERT_TRUE(serial.ok()) << serial.status();
  EXPECT_EQ(Count(*serial, "subgroup"), 0u) << ir::Print(*serial);
  // Softmax and the norms: one subgroup combine per reduction.
  auto softmax = SoftmaxAxis({{33, 1000}}, 1, sg);
  ASSERT_TRUE(softmax.ok()) << softmax.status();
  EXPECT_EQ(Count(*softmax, "subgroup_invocation_id()"), 2u) << ir::Print(*softmax);
  auto layer = LayerNorm({{33, 1000}}, 1e-5, sg);
  ASSERT_TRUE(layer.ok()) << layer.status();
  EXPECT_EQ(Count(*layer, "subgroup_add("), 4u) << ir::Print(*layer);
  auto rms = RmsNorm({{33, 1000}}, 1e-5, sg);
  ASSERT_TRUE(rms.ok()) << rms.status();
  EXPECT_EQ(Count(*rms, "subgroup_add("), 2u) << ir::Print(*rms);
}

// The subgroup combine on the interpreter, for subgroup sizes from 4 to 128
// (more subgroups than a subgroup has lanes; one partial subgroup where the
// workgroup is smaller), against a reference in double on random rows with
// NaN, infinities and signed zeros for max and min.
TEST(OpsMoreTest, SubgroupCombineIsRightForEverySubgroupSize) {
  Target sg;
  sg.subgroups = true;
  std::mt19937 rng(::testing::UnitTest::GetInstance()->random_seed() + 17);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  // Rows of 33 (64 threads) and 1000 (256 threads).
  for (const Shape& shape : {Shape{5, 33}, Shape{5, 1000}}) {
    const int64_t rows = shape[0], cols = shape[1];
    std::vector<float> x(rows * cols);
    for (float& v : x) v = dist(rng);
    x[1 * cols + cols / 2] = nan;
    x[2 * cols + cols - 1] = inf;
    x[2 * cols + 3] = -inf;
    for (int64_t c = 0; c < cols; ++c) x[3 * cols + c] = c % 2 ? -0.0f : 0.0f;
    x[4 * cols] = nan;
    for (const char* op : {"sum", "mean", "max", "min", "softmax", "layer_norm"}) {
      const std::string name(op);
      StatusOr<ir::Function> f = name == "softmax"      ? SoftmaxAxis({shape}, 1, sg)
                                 : name == "layer_norm" ? LayerNorm({shape}, 1e-5, sg)
                                                        : ReduceAxes(name, {shape}, {1}, false, sg);
      ASSERT_TRUE(f.ok()) << f.status();
      ASSERT_GT(Count(*f, "subgroup_size()"), 0u) << ir::Print(*f);
      const bool elementwise = name == "softmax" || name == "layer_norm";
      // Reference, per row, in double; rows with a NaN (or an infinity,
      // for softmax and the norm) are left out of the elementwise ops.
      std::vector<double> want(elementwise ? rows * cols : rows);
      std::vector<bool> check(want.size(), true);
      for (int64_t r = 0; r < rows; ++r) {
        const float* row = x.data() + r * cols;
        double sum = 0, mx = -INFINITY, mn = INFINITY;
        bool nan_seen = false, inf_seen = false;
        for (int64_t c = 0; c < cols; ++c) {
          sum += row[c];
          nan_seen |= std::isnan(row[c]);
          inf_seen |= std::isinf(row[c]);
          mx = std::max<double>(mx, row[c]);
          mn = std::min<double>(mn, row[c]);
        }
        if (name == "sum") want[r] = sum;
        if (name == "mean") want[r] = sum / cols;
        if (name == "max") want[r] = nan_seen ? NAN : mx;
        if (name == "min") want[r] = nan_seen ? NAN : mn;
        if (!elementwise) continue;
        double mean = sum / cols, var = 0, total = 0;
        for (int64_t c = 0; c < cols; ++c) {
          var += (row[c] - mean) * (row[c] - mean);
          total += std::exp(row[c] - mx);
        }
        for (int64_t c = 0; c < cols; ++c) {
          check[r * cols + c] = !nan_seen && !inf_seen;
          want[r * cols + c] = name == "softmax" ? std::exp(row[c] - mx) / total
                                                 : (row[c] - mean) / std::sqrt(var / cols + 1e-5);
        }
      }
      for (int size : {4, 8, 16, 32, 64, 128}) {
        SCOPED_TRACE(name + " " + ShapeToString(shape) + " subgroup size " + std::to_string(size));
        std::vector<interp::ArgValue> args;
        args.push_back(interp::HostBuffer::FromVector(ir::kF32, shape, x));
        if (name == "layer_norm") {
          // Gamma 1, Beta 0.
          args.push_back(
              interp::HostBuffer::FromVector(ir::kF32, {cols}, std::vector<float>(cols, 1.0f)));
          args.push_back(
              interp::HostBuffer::FromVector(ir::kF32, {cols}, std::vector<float>(cols, 0.0f)));
        }
        args.push_back(interp::HostBuffer::FromVector(ir::kF32, {static_cast<int64_t>(want.size())},
                                                      std::vector<float>(want.size(), nan)));
        interp::RunOptions options;
        options.subgroup_size = size;
        Status run = interp::Run(*f, args, options);
        ASSERT_TRUE(run.ok()) << run;
        std::vector<float> got = std::get<interp::HostBuffer>(args.back()).ToVector<float>();
        for (size_t i = 0; i < want.size(); ++i) {
          if (!check[i]) continue;
          if (std::isnan(want[i])) {
            EXPECT_TRUE(std::isnan(got[i])) << i << ": " << got[i];
          } else if (std::isinf(want[i])) {
            EXPECT_EQ(got[i], want[i]) << i;
          } else {
            EXPECT_NEAR(got[i], want[i], 1e-4 * (1 + std::fabs(want[i]))) << i;
          }
        }
      }
    }
  }
}

// The shuffled combines (prod, argmax, argmin) on the interpreter, for
// subgroup sizes from 4 to 128, rows of 33 (64 threads) and 1000 (256): the
// products of values near 1, and the arg-reductions with ties across
// threads, NaN (its first index wins) and infinities.
TEST(OpsMoreTest, ShuffledCombinesAreRightForEverySubgroupSize) {
  Target sg;
  sg.subgroups = true;
  std::mt19937 rng(::testing::UnitTest::GetInstance()->random_seed() + 29);
  std::uniform_real_distribution<float> dist(0.98f, 1.02f);
  for (const Shape& shape : {Shape{4, 33}, Shape{4, 1000}}) {
    const int64_t rows = shape[0], cols = shape[1];
    std::vector<float> x(rows * cols);
    for (float& v : x) v = dist(rng);
    x[0 * cols + cols - 1] = x[0 * cols + 1] = 1.5f;  // a tie: index 1
    x[1 * cols + cols / 2] = std::numeric_limits<float>::quiet_NaN();
    x[1 * cols + cols - 2] = std::numeric_limits<float>::quiet_NaN();
    x[2 * cols + 5] = std::numeric_limits<float>::infinity();
    x[3 * cols + cols - 1] = -std::numeric_limits<float>::infinity();
    for (const char* op : {"prod", "argmax", "argmin"}) {
      const std::string name(op);
      const bool arg = name != "prod";
      StatusOr<ir::Function> f =
          arg ? ArgReduce(name, {shape}, 1, false, sg) : ReduceAxes(name, {shape}, {1}, false, sg);
      ASSERT_TRUE(f.ok()) << f.status();
      ASSERT_GT(Count(*f, "subgroup_shuffle("), 0u) << ir::Print(*f);
      std::vector<double> want(rows);
      for (int64_t r = 0; r < rows; ++r) {
        const float* row = x.data() + r * cols;
        double prod = 1;
        int64_t best = 0;
        for (int64_t c = 0; c < cols; ++c) {
          prod *= row[c];
          const bool nan = std::isnan(row[c]), best_nan = std::isnan(row[best]);
          const bool better = name == "argmax" ? row[c] > row[best] : row[c] < row[best];
          if (!best_nan && (nan || better)) best = c;
        }
        want[r] = arg ? static_cast<double>(best) : prod;
      }
      for (int size : {4, 8, 16, 32, 64, 128}) {
        SCOPED_TRACE(name + " " + ShapeToString(shape) + " subgroup size " + std::to_string(size));
        std::vector<interp::ArgValue> args;
        args.push_back(interp::HostBuffer::FromVector(ir::kF32, shape, x));
        if (arg) {
          args.push_back(
              interp::HostBuffer::FromVector(ir::kI32, {rows}, std::vector<int32_t>(rows, -7)));
        } else {
          args.push_back(interp::HostBuffer::FromVector(
              ir::kF32, {rows}, std::vector<float>(rows, std::numeric_limits<float>::quiet_NaN())));
        }
        interp::RunOptions options;
        options.subgroup_size = size;
        Status run = interp::Run(*f, args, options);
        ASSERT_TRUE(run.ok()) << run;
        const auto& out = std::get<interp::HostBuffer>(args.back());
        for (int64_t r = 0; r < rows; ++r) {
          if (arg) {
            EXPECT_EQ(out.ToVector<int32_t>()[r], static_cast<int32_t>(want[r])) << "row " << r;
          } else if (std::isnan(want[r]) || std::isinf(want[r])) {
            const float got = out.ToVector<float>()[r];
            EXPECT_TRUE(std::isnan(want[r]) ? std::isnan(got) : got == want[r]) << "row " << r;
          } else {
            EXPECT_NEAR(out.ToVector<float>()[r], want[r], 1e-4 * std::fabs(want[r]))
                << "row " << r;
          }
        }
      }
    }
  }
}

// Random elementwise graphs (f32 ops, and wheres of i32 comparisons) over
// up to twelve inputs of broadcasting shapes, planned by ElementwiseFusedKernels for targets
// binding 4 to 6 buffers per kernel, run kernel by kernel on the interpreter (intermediates by
// name), give bit for bit what ElementwiseFused's one kernel gives for a target that binds them
// all; every kernel binds at most the limit.
TEST(OpsMoreTest, FusedKernelsInOrderMatchOneKernel) {
  std::mt19937 rng(::testing::UnitTest::GetInstance()->random_seed() + 17);
  const std::vector<Shape> shapes = {{3, 5}, {5}, {3, 1}, {1, 5}, {1}};
  const char* ops2[] = {"add", "sub", "mul", "max", "min"};
  const char* ops1[] = {"neg", "abs", "square"};
  Target wide;
  wide.limits.max_storage_buffers_per_stage = 16;
  for (int trial = 0; trial < 60; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const int n_inputs = 2 + static_cast<int>(rng() % 11);
    std::vector<TensorType> inputs;
    std::vector<FusedNode> nodes;
    std::vector<interp::HostBuffer> values;
    for (int k = 0; k < n_inputs; ++k) {
      inputs.push_back({shapes[rng() % shapes.size()]});
      nodes.push_back(FusedNode::Input(k));
      std::vector<float> v(NumElements(inputs.back().shape));
      for (float& x : v) x = std::uniform_real_distribution<float>(-2, 2)(rng);
      values.push_back(interp::HostBuffer::FromVector(ir::kF32, inputs.back().shape, v));
    }
    // Ops on random earlier f32 nodes, then a chain through every f32 node
    // so that the output uses every input.
    std::vector<int> floats(nodes.size());
    for (size_t k = 0; k < floats.size(); ++k) floats[k] = static_cast<int>(k);
    auto add = [&](FusedNode n) {
      nodes.push_back(std::move(n));
      floats.push_back(static_cast<int>(nodes.size()) - 1);
    };
    const int extra = static_cast<int>(rng() % 30);
    for (int k = 0; k < extra; ++k) {
      const int a = floats[rng() % floats.size()], b = floats[rng() % floats.size()];
      const uint32_t pick = rng() % 8;
      if (pick == 0) {
        // An i32 comparison (an i32 intermediate where computed apart) and
        // a where reading it.
        nodes.push_back(FusedNode::Op("gt", {a, b}));
        const int c = floats[rng() % floats.size()], d = floats[rng() % floats.size()];
        add(FusedNode::Op("where", {static_cast<int>(nodes.size()) - 1, c, d}));
      } else {
        add(pick < 3 ? FusedNode::Op(ops1[rng() % 3], {a})
                     : FusedNode::Op(ops2[rng() % 5], {a, b}));
      }
    }
    const std::vector<int> made = floats;
    for (size_t k = 0; k + 1 < made.size(); ++k) {
      add(FusedNode::Op(ops2[rng() % 5], {static_cast<int>(nodes.size()) - 1, made[k]}));
    }
    auto one = ElementwiseFused(inputs, nodes, wide);
    ASSERT_TRUE(one.ok()) << one.status();
    std::vector<interp::ArgValue> args(values.begin(), values.end());
    Shape out;
    for (const ir::Expr& e : one->params().back().buffer().shape()) {
      out.push_back(e.as<ir::IntImmNode>()->value);
    }
    args.push_back(interp::HostBuffer(ir::kF32, out));
    ASSERT_TRUE(interp::Run(*one, args).ok());
    const std::vector<float> want = std::get<interp::HostBuffer>(args.back()).ToVector<float>();

    Target narrow = wide;
    narrow.limits.max_storage_buffers_per_stage = 4 + static_cast<uint32_t>(rng() % 3);
    auto seq = ElementwiseFusedKernels(inputs, nodes, narrow);
    ASSERT_TRUE(seq.ok()) << seq.status();
    std::map<std::string, interp::HostBuffer> named;
    for (int k = 0; k < n_inputs; ++k) named["X" + std::to_string(k)] = values[k];
    // Intermediates and Y poisoned with NaN.
    // (An i32 intermediate takes the same bits: 2143289344.)
    auto poisoned = [](const Shape& shape, ir::DataType dtype) {
      const std::vector<float> nan(NumElements(shape), std::numeric_limits<float>::quiet_NaN());
      interp::HostBuffer b(dtype, shape);
      std::memcpy(b.bytes.data(), nan.data(), b.bytes.size());
      return b;
    };
    for (const IntermediateTensor& m : seq->intermediates) {
      named[m.name] = poisoned(m.shape, m.dtype);
    }
    named["Y"] = poisoned(out, ir::kF32);
    for (const ir::Function& f : seq->functions) {
      ASSERT_LE(f.params().size(), narrow.limits.max_storage_buffers_per_stage) << ir::Print(f);
      std::vector<interp::ArgValue> call;
      for (const ir::Param& p : f.params()) call.push_back(named.at(p.name()));
      Status run = interp::Run(f, call);
      ASSERT_TRUE(run.ok()) << run << ir::Print(f);
      named[f.params().back().name()] = std::get<interp::HostBuffer>(call.back());
    }
    EXPECT_EQ(seq->functions.size() > 1,
              n_inputs + 1 > static_cast<int>(narrow.limits.max_storage_buffers_per_stage));
    const std::vector<float> got = named["Y"].ToVector<float>();
    ASSERT_EQ(got.size(), want.size());
    for (size_t e = 0; e < want.size(); ++e) {
      EXPECT_EQ(std::bit_cast<uint32_t>(got[e]), std::bit_cast<uint32_t>(want[e]))
          << "element " << e << ": " << got[e] << " vs " << want[e];
    }
  }
}

// Random graphs nesting deeper than one kernel compiles (averages, maxima,
// minima and negations of recent nodes, many read more than once) run as
// kernels in order, each within the depth kiln compiles, and two plans of
// one graph (one also bound to 4 buffers per kernel) give the same bits.
// Where ops may also read only the constant, a part of constants alone is
// never computed apart (it would have no shape): the graph runs, or is
// refused as too deep.
TEST(OpsMoreTest, DeepFusedKernelsInOrderAgree) {
  std::mt19937 rng(::testing::UnitTest::GetInstance()->random_seed() + 29);
  const Shape shape{2, 3};
  auto run = [&](const KernelSequence& seq, const std::vector<interp::HostBuffer>& values) {
    std::map<std::string, interp::HostBuffer> named;
    for (size_t k = 0; k < values.size(); ++k) named["X" + std::to_string(k)] = values[k];
    for (const IntermediateTensor& m : seq.intermediates) {
      named[m.name] = interp::HostBuffer::FromVector(
          m.dtype, m.shape,
          std::vector<float>(NumElements(m.shape), std::numeric_limits<float>::quiet_NaN()));
    }
    named["Y"] = interp::HostBuffer::FromVector(
        ir::kF32, shape, std::vector<float>(6, std::numeric_limits<float>::quiet_NaN()));
    for (const ir::Function& f : seq.functions) {
      EXPECT_LE(ir::DeepestExpression(f), ir::kMaxExprDepth) << f.name();
      std::vector<interp::ArgValue> call;
      for (const ir::Param& p : f.params()) call.push_back(named.at(p.name()));
      Status ran = interp::Run(f, call);
      EXPECT_TRUE(ran.ok()) << ran;
      named[f.params().back().name()] = std::get<interp::HostBuffer>(call.back());
    }
    return named["Y"].ToVector<float>();
  };
  for (int trial = 0; trial < 10; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const bool constant_ops = trial >= 6;
    // Fixed graphs where ops may read the constant alone: the first (seed
    // 87) is one where a split once computed apart a part of constants.
    if (constant_ops) rng.seed(81 + trial);
    const int n_inputs = 2 + static_cast<int>(rng() % 5);
    std::vector<TensorType> inputs;
    std::vector<FusedNode> nodes;
    std::vector<interp::HostBuffer> values;
    for (int k = 0; k < n_inputs; ++k) {
      inputs.push_back({k % 2 ? shape : Shape{3}});
      nodes.push_back(FusedNode::Input(k));
      std::vector<float> v(NumElements(inputs.back().shape));
      for (float& x : v) x = std::uniform_real_distribution<float>(-2, 2)(rng);
      values.push_back(interp::HostBuffer::FromVector(ir::kF32, inputs.back().shape, v));
    }
    const int half = static_cast<int>(nodes.size());
    nodes.push_back(FusedNode::Constant(0.5));
    // One of the last eight nodes, the constant only where constant_ops.
    auto recent = [&] {
      const int a = std::max(0, static_cast<int>(nodes.size()) - 1 - static_cast<int>(rng() % 8));
      return a == half && !constant_ops ? half - 1 : a;
    };
    for (int k = 0; k < 1200; ++k) {
      const int a = recent(), b = recent();
      switch (rng() % 4) {
        case 0:
          nodes.push_back(FusedNode::Op("add", {a, b}));
          nodes.push_back(FusedNode::Op("mul", {static_cast<int>(nodes.size()) - 1, half}));
          break;
        case 1:
          nodes.push_back(FusedNode::Op("max", {a, b}));
          break;
        case 2:
          nodes.push_back(FusedNode::Op("min", {a, b}));
          break;
        default:
          nodes.push_back(FusedNode::Op("neg", {a}));
      }
    }
    // The output uses every input.
    for (int k = 0; k < n_inputs; ++k) {
      nodes.push_back(FusedNode::Op("add", {static_cast<int>(nodes.size()) - 1, k}));
    }
    Target t;
    t.limits.max_storage_buffers_per_stage = 16;
    auto a = ElementwiseFusedKernels(inputs, nodes, t);
    if (constant_ops && !a.ok()) {
      EXPECT_NE(a.status().message().find("levels deep"), std::string::npos) << a.status();
      continue;
    }
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_GE(a->functions.size(), 2u);
    t.limits.max_storage_buffers_per_stage = 4;
    auto b = ElementwiseFusedKernels(inputs, nodes, t);
    ASSERT_TRUE(b.ok()) << b.status();
    const std::vector<float> ya = run(*a, values), yb = run(*b, values);
    ASSERT_EQ(ya.size(), yb.size());
    for (size_t e = 0; e < ya.size(); ++e) {
      EXPECT_EQ(std::bit_cast<uint32_t>(ya[e]), std::bit_cast<uint32_t>(yb[e])) << "element " << e;
    }
  }
}

TEST(OpsMoreTest, Signatures) {
  const Target t;
  auto all = ReduceAxes("mean", {{3, 4, 5}}, {0, 1, 2}, false, t);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_TRUE(Contains(*all, "fn reduce_mean(X: buffer<f32>[3, 4, 5], Y: buffer<f32>[1])"));
  auto keep = ReduceAxes("prod", {{3, 4, 5}}, {0, 2}, true, t, "p");
  ASSERT_TRUE(keep.ok()) << keep.status();
  EXPECT_TRUE(Contains(*keep, "fn p(X: buffer<f32>[3, 4, 5], Y: buffer<f32>[1, 4, 1])"));
  auto arg = ArgReduce("argmax", {{7, 33}}, -1, false, t);
  ASSERT_TRUE(arg.ok()) << arg.status();
  EXPECT_TRUE(Contains(*arg, "fn argmax(X: buffer<f32>[7, 33], Y: buffer<i32>[7])"));
  auto ln = LayerNorm({{7, 33}}, 1e-5, t);
  ASSERT_TRUE(ln.ok()) << ln.status();
  EXPECT_TRUE(Contains(*ln,
                       "fn layer_norm(X: buffer<f32>[7, 33], Gamma: buffer<f32>[33], "
                       "Beta: buffer<f32>[33], Y: buffer<f32>[7, 33])"))
      << ir::Print(*ln);
  auto rms = RmsNorm({{7, 33}}, 1e-5, t);
  ASSERT_TRUE(rms.ok()) << rms.status();
  EXPECT_TRUE(Contains(*rms,
                       "fn rms_norm(X: buffer<f32>[7, 33], Gamma: buffer<f32>[33], "
                       "Y: buffer<f32>[7, 33])"));
  auto perm = Permute({{2, 3, 4}}, {2, 0, 1}, t);
  ASSERT_TRUE(perm.ok()) << perm.status();
  EXPECT_TRUE(Contains(*perm, "fn permute(X: buffer<f32>[2, 3, 4], Y: buffer<f32>[4, 2, 3])"));
  auto reshape = Reshape({{6, 4}}, {-1, 8}, t);
  ASSERT_TRUE(reshape.ok()) << reshape.status();
  EXPECT_TRUE(Contains(*reshape, "Y: buffer<f32>[3, 8]"));
  auto cat = Concat({{{2, 3}}, {{2, 5}}, {{2, 1}}}, 1, t);
  ASSERT_TRUE(cat.ok()) << cat.status();
  EXPECT_TRUE(Contains(*cat,
                       "fn concat(X0: buffer<f32>[2, 3], X1: buffer<f32>[2, 5], "
                       "X2: buffer<f32>[2, 1], Y: buffer<f32>[2, 9])"));
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  auto slice = Slice({{10, 7}}, {-1, 1}, {kMin, 100}, {-3, 2}, t);
  ASSERT_TRUE(slice.ok()) << slice.status();
  EXPECT_TRUE(Contains(*slice, "Y: buffer<f32>[4, 3]")) << ir::Print(*slice);
  auto gather = Gather({{100, 16}}, {{3, 5}, ir::kI32}, t);
  ASSERT_TRUE(gather.ok()) << gather.status();
  EXPECT_TRUE(Contains(*gather,
                       "fn gather(Table: buffer<f32>[100, 16], Indices: buffer<i32>[3, 5], "
                       "Y: buffer<f32>[3, 5, 16])"));
  auto pad = Pad({{3, 4}}, {1, 0}, {2, 3}, 0.0, t);
  ASSERT_TRUE(pad.ok()) << pad.status();
  EXPECT_TRUE(Contains(*pad, "Y: buffer<f32>[6, 7]"));
  auto where = Where({{7, 1}, ir::kI32}, {{1, 33}}, {{33}}, t);
  ASSERT_TRUE(where.ok()) << where.status();
  EXPECT_TRUE(Contains(*where,
                       "fn where(Cond: buffer<i32>[7, 1], A: buffer<f32>[1, 33], "
                       "B: buffer<f32>[33], C: buffer<f32>[7, 33])"));
  auto cast = Cast({{5}}, ir::kI32, t);
  ASSERT_TRUE(cast.ok()) << cast.status();
  EXPECT_TRUE(Contains(*cast, "fn cast_i32(X: buffer<f32>[5], Y: buffer<i32>[5])"));
}

// Every operator builds at large shapes (its time is a benchmark figure:
// kiln bench ops reports each workload's build and compile time).
TEST(OpsMoreTest, BuildsAtLargeShapes) {
  const Target t;
  EXPECT_TRUE(ReduceAxes("max", {{4, 5, 6, 4097}}, {1, 3}, false, t).ok());
  EXPECT_TRUE(ArgReduce("argmin", {{33, 4097}}, 1, false, t).ok());
  EXPECT_TRUE(SoftmaxAxis({{33, 4097}}, 1, t).ok());
  EXPECT_TRUE(LogSoftmax({{33, 2048}}, 1, t).ok());
  EXPECT_TRUE(LayerNorm({{33, 4096}}, 1e-5, t).ok());
  EXPECT_TRUE(RmsNorm({{33, 4096}}, 1e-5, t).ok());
  EXPECT_TRUE(Permute({{7, 8, 9, 10}}, {3, 1, 0, 2}, t).ok());
  EXPECT_TRUE(Concat({{{7, 3}}, {{7, 4}}, {{7, 5}}, {{7, 6}}}, 1, t).ok());
}

TEST(OpsMoreTest, Errors) {
  const Target t;
  Target f16;
  f16.shader_f16 = true;
  ExpectError(ReduceAxes("median", {{7}}, {0}, false, t).status(), {"unknown reduce op"});
  ExpectError(ReduceAxes("sum", {{7, 3}}, {2}, false, t).status(),
              {"reduce sum", "axis 0 of axes is 2", "[-2, 2)"});
  ExpectError(ReduceAxes("sum", {{7, 3}}, {1, -1}, false, t).status(), {"axis 1 is listed twice"});
  ExpectError(ReduceAxes("sum", {{7, 3}}, {}, false, t).status(), {"no axes"});
  ExpectError(ReduceAxes("sum", {{7, 3}, ir::kF16}, {0}, false, t).status(),
              {"input X of reduce sum", "shader-f16"}, StatusCode::kUnavailable);
  ExpectError(ReduceAxes("sum", {{7, 0}}, {0}, false, t).status(), {"dimension 1 is 0"});
  ExpectError(ArgReduce("argmed", {{7}}, 0, false, t).status(), {"unknown arg-reduce op"});
  ExpectError(ArgReduce("argmax", {{7}}, 1, false, t).status(), {"argmax: axis is 1"});
  ExpectError(ArgReduce("argmin", {{7}, ir::kU16}, 0, false, t).status(),
              {"input X of argmin", "u16", "f32, f16, i32 and u32"});
  ExpectError(ReduceAxes("mean", {{7}, ir::kU32}, {0}, false, t).status(),
              {"input X of reduce mean is u32", "cast"});
  ExpectError(ReduceAxes("mean", {{7}, ir::kI32}, {0}, false, t).status(),
              {"input X of reduce mean is i32", "cast"});
  ExpectError(SoftmaxAxis({{7}, ir::kI32}, 0, t).status(), {"input X of softmax", "i32"});
  auto isum = ReduceAxes("sum", {{7, 33}, ir::kI32}, {1}, false, t);
  ASSERT_TRUE(isum.ok()) << isum.status();
  EXPECT_EQ(isum->params()[1].buffer().dtype(), ir::kI32);
  ExpectError(SoftmaxAxis({{7, 3}}, -3, t).status(), {"softmax: axis is -3"});
  ExpectError(LogSoftmax({{1, 2, 3, 4, 5}}, 0, t).status(), {"input X of log_softmax", "rank 5"});
  ExpectError(LayerNorm({{7, 3}}, -1.0, t).status(), {"layer_norm: eps is -1"});
  // An eps that f32 arithmetic takes as 0 (subnormal, flushed) is refused;
  // the smallest normal f32 and 0 itself are taken.
  ExpectError(LayerNorm({{7, 3}}, 1e-40, t).status(),
              {"layer_norm: eps is 1e-40", "takes as 0", "pass 0 or a larger eps"});
  ExpectError(RmsNorm({{7, 3}}, 1e-46, t).status(), {"rms_norm: eps is 1e-46", "takes as 0"});
  EXPECT_TRUE(LayerNorm({{7, 3}}, std::numeric_limits<float>::min(), t).ok());
  EXPECT_TRUE(RmsNorm({{7, 3}}, 0.0, t).ok());
  ExpectError(RmsNorm({{7, 3}}, std::numeric_limits<double>::quiet_NaN(), t).status(),
              {"rms_norm: eps"});
  ExpectError(RmsNorm({{7, 3}, ir::kF16}, 1e-5, t).status(), {"input X of rms_norm", "shader-f16"},
              StatusCode::kUnavailable);
  EXPECT_TRUE(RmsNorm({{7, 3}, ir::kF16}, 1e-5, f16).ok());

  ExpectError(Permute({{2, 3}}, {0}, t).status(), {"permute: perm has 1 entries"});
  ExpectError(Permute({{2, 3}}, {1, 1}, t).status(), {"perm entry 1 is 1"});
  ExpectError(Permute({{2, 3}, ir::kI64}, {1, 0}, t).status(),
              {"input X of permute", "f32, f16, i32 and u32"});
  ExpectError(Reshape({{6, 4}}, {5, 5}, t).status(), {"reshape", "25 elements", "24"});
  ExpectError(Reshape({{6, 4}}, {-1, 5}, t).status(), {"cannot infer dimension 0"});
  ExpectError(Reshape({{6, 4}}, {-1, -1}, t).status(), {"dimension 1", "is -1"});
  ExpectError(Reshape({{6, 4}}, {0, 4}, t).status(), {"dimension 0", "is 0"});
  ExpectError(Reshape({{24}}, {1, 2, 3, 2, 2}, t).status(), {"rank 5"});
  ExpectError(Concat({{{2, 3}}}, 0, t).status(), {"at least 2 inputs"});
  ExpectError(Concat({{{2, 3}}, {{3, 3}}}, 1, t).status(), {"concat: X1", "dimension 0 differs"});
  ExpectError(Concat({{{2, 3}}, {{2, 3, 1}}}, 0, t).status(), {"X1", "rank 3"});
  ExpectError(Concat({{{2, 3}}, {{2, 3}, ir::kI32}}, 0, t).status(), {"dtype mismatch"});
  ExpectError(Concat({{{2, 3}}, {{2, 3}}}, 2, t).status(), {"concat: axis is 2"});
  ExpectError(Concat(std::vector<TensorType>(8, TensorType{{2, 3}}), 0, t).status(),
              {"9 storage buffers"});
  ExpectError(Slice({{5, 5}}, {0}, {5, 5}, {1, 1}, t).status(), {"starts has 1 entries"});
  ExpectError(Slice({{5, 5}}, {0, 0}, {5, 5}, {1, 0}, t).status(), {"step 1 is 0"});
  ExpectError(Slice({{5, 5}}, {3, 0}, {2, 5}, {1, 1}, t).status(), {"axis 0", "is empty"});
  ExpectError(Gather({{10}}, {{3}, ir::kI32}, t).status(), {"Table of gather", "2-D"});
  ExpectError(Gather({{10, 4}}, {{3}}, t).status(), {"Indices of gather", "must be i32"});
  ExpectError(Gather({{10, 4}}, {{3, 2, 2, 2}, ir::kI32}, t).status(), {"ranks 1 to 3"});
  ExpectError(Pad({{3, 4}}, {1}, {1, 1}, 0.0, t).status(), {"pad: before and after"});
  ExpectError(Pad({{3, 4}}, {1, -1}, {1, 1}, 0.0, t).status(), {"axis 1", "at least 0"});
  ExpectError(Pad({{3, 4}, ir::kI32}, {1, 1}, {1, 1}, 0.5, t).status(), {"not an i32"});
  ExpectError(Where({{7}, ir::kI32}, {{7}}, {{7}, ir::kI32}, t).status(),
              {"where: dtype mismatch"});
  ExpectError(Where({{7}, ir::kF16}, {{7}}, {{7}}, f16).status(), {"Cond is f16"});
  ExpectError(Where({{5}, ir::kI32}, {{7}}, {{7}}, t).status(),
              {"where: Cond", "do not broadcast"});
  ExpectError(Cast({{5}}, ir::kF16, t).status(), {"result type of cast", "shader-f16"},
              StatusCode::kUnavailable);
  ExpectError(Cast({{5}}, ir::kU8, t).status(),
              {"the result type of cast has dtype u8; supported dtypes are f32, f16, i32 and u32"});
  ExpectError(Cast({{5}, ir::kInt8x4}, ir::kU32, t).status(), {"input X of cast", "int8x4"});
  ExpectError(UnpackBytes({{5}, ir::kI32}, t).status(),
              {"input X of unpack_bytes has dtype i32; it takes i8 or u8"});
  ExpectError(PackBytes({int64_t{1} << 31}, t).status(), {"input X of pack_bytes", "2^30"});
}

TEST(OpsMoreTest, AttentionTileFollowsWorkgroupStorage) {
  auto tile = [](int64_t d, uint32_t storage, uint32_t invocations = 256) {
    Target t;
    t.limits.max_workgroup_storage_bytes = storage;
    t.limits.max_invocations_per_workgroup = invocations;
    auto chosen = DefaultAttentionTile(d, t);
    return chosen.ok() ? StrCat(chosen->queries, "x", chosen->keys) : chosen.status().ToString();
  };
  EXPECT_EQ(tile(64, 48 << 10), "64x32");  // the H200's limit
  EXPECT_EQ(tile(64, 48 << 10, 64), "32x32");
  EXPECT_EQ(tile(64, 32 << 10), "32x32");
  EXPECT_EQ(tile(128, 48 << 10), "32x32");
  EXPECT_EQ(tile(128, 32 << 10), "16x32");  // not 32x16: 8 accumulator vectors per query
  EXPECT_EQ(tile(128, 16 << 10), "16x8");   // WebGPU's default limit: only the small ones fit
  EXPECT_EQ(tile(4, 16 << 10), "64x32");
  for (int64_t d : {4, 64, 128}) {
    Target t;
    t.limits.max_workgroup_storage_bytes = 48 << 10;
    auto chosen = DefaultAttentionTile(d, t);
    ASSERT_TRUE(chosen.ok());
    EXPECT_LE(AttentionSharedBytes(*chosen, d), 48 << 10);
  }
  ExpectError(Attention({{2, 9, 128}}, {{2, 9, 128}}, {{2, 9, 128}},
                        [] {
                          Target t;
                          t.limits.max_workgroup_storage_bytes = 8192;
                          return t;
                        }())
                  .status(),
              {"attention", "8192 bytes", "D = 128"});
  const Target t;
  ExpectError(Attention({{2, 9, 6}}, {{2, 9, 6}}, {{2, 9, 6}}, t).status(),
              {"D = 6", "multiple of 4"});
  ExpectError(Attention({{2, 9, 8}}, {{2, 5, 4}}, {{2, 5, 4}}, t).status(), {"K and V must be"});
  ExpectError(Attention({{9, 8}}, {{9, 8}}, {{9, 8}, ir::kF16}, t).status(), {"shader-f16"},
              StatusCode::kUnavailable);
  AttentionOptions masked;
  masked.mask = TensorType{{9, 8}};
  ExpectError(Attention({{9, 8}}, {{9, 8}}, {{9, 8}}, t, masked).status(),
              {"mask of attention", "[Sq, Sk] = [9, 9]"});
  AttentionOptions scaled;
  scaled.scale = std::numeric_limits<double>::infinity();
  ExpectError(Attention({{9, 8}}, {{9, 8}}, {{9, 8}}, t, scaled).status(),
              {"scale must be finite"});
  EXPECT_TRUE(Attention({{1, 12, 512, 64}}, {{1, 12, 512, 64}}, {{1, 12, 512, 64}}, t).ok());
  // The packed form: its own errors, each naming packed_attention.
  EXPECT_TRUE(PackedAttention({{2, 512, 3 * 12 * 64}}, 12, t).ok());
  EXPECT_TRUE(PackedAttention({{2, 3, 9, 3 * 2 * 8}}, 2, t).ok());
  ExpectError(PackedAttention({{48}}, 2, t).status(),
              {"QKV of packed_attention has shape [48]", "rank 2 to 4"});
  ExpectError(PackedAttention({{1, 2, 3, 5, 48}}, 2, t).status(),
              {"QKV of packed_attention", "ranks 1 to 4"});
  for (int64_t heads :
       {int64_t{0}, int64_t{-3}, int64_t{5}, int64_t{49}, std::numeric_limits<int64_t>::max()}) {
    ExpectError(PackedAttention({{5, 48}}, heads, t).status(),
                {"QKV of packed_attention has shape [5, 48]: its last dimension must be 3 * heads "
                 "* D for heads = ",
                 StrCat(heads)});
  }
  ExpectError(PackedAttention({{5, 48}}, 0, t).status(), {"(heads must be at least 1)"});
  ExpectError(PackedAttention({{5, 18}}, 1, t).status(),
              {"packed_attention: the head dimension D = 6 must be a multiple of 4"});
  ExpectError(PackedAttention({{5, 48}, ir::kF16}, 2, t).status(), {"shader-f16"},
              StatusCode::kUnavailable);
  ExpectError(PackedAttention({{9, 48}}, 2, t, masked).status(),
              {"mask of packed_attention is f32[9, 8]", "[Sq, Sk] = [9, 9]"});
  ExpectError(PackedAttention({{9, 48}}, 2, t, scaled).status(),
              {"packed_attention: the scale must be finite"});
  {
    Target two = t;
    two.limits.max_storage_buffers_per_stage = 2;
    EXPECT_TRUE(PackedAttention({{9, 48}}, 2, two).ok());
    AttentionOptions nine;
    nine.mask = TensorType{{9, 9}};
    ExpectError(PackedAttention({{9, 48}}, 2, two, nine).status(),
                {"packed_attention needs 3 storage buffers; the target allows 2"});
  }
  AttentionOptions tiled;
  for (const auto& [tile, why] : std::vector<std::pair<AttentionTile, std::string>>{
           {{66, 32}, "queries must be a multiple of 4"},
           {{0, 32}, "queries must be a multiple of 4 from 4 to 256"},
           {{32, 30}, "keys must be a multiple of 4"},
           {{32, 256}, "keys must be a multiple of 4 from 4 to 128"},
           {{64, 64}, "256 invocations"},
           {{256, 16}, "bytes of workgroup storage"}}) {
    tiled.tile = tile;
    ExpectError(Attention({{9, 8}}, {{9, 8}}, {{9, 8}}, t, tiled).status(),
                {"attention tile", why});
  }
  tiled.tile = AttentionTile{16, 16};
  EXPECT_TRUE(Attention({{9, 8}}, {{9, 8}}, {{9, 8}}, t, tiled).ok());
  // V in a buffer of its own: only with the read-ahead, and it takes a
  // block more of workgroup memory.
  tiled.tile = AttentionTile{16, 16, true};
  EXPECT_TRUE(Attention({{9, 8}}, {{9, 8}}, {{9, 8}}, t, tiled).ok());
  ExpectError(
      Attention({{9, 128}}, {{9, 128}}, {{9, 128}}, t, tiled).status(),
      {"attention tile 16 queries x 16 keys per block, 16 threads, V in a buffer of its own",
       "needs the read-ahead, at most 4 vectors of a block per thread; for D = 128 each "
       "moves 32"});
  EXPECT_EQ(AttentionSharedBytes({16, 16, true}, 8) - AttentionSharedBytes({16, 16}, 8),
            4 * 8 * 16);
  // The rule gives V its own buffer where the read-ahead holds and the
  // extra block fits: the H200's D = 64 tile (43,648 bytes of 49,152), not
  // D = 128 (each thread moves 16 vectors of a block) nor 32 x 32 at D = 64.
  EXPECT_TRUE(DefaultAttentionTile(8, t)->own_v);
  Target h200;
  h200.limits.max_workgroup_storage_bytes = 48 << 10;
  EXPECT_EQ(*DefaultAttentionTile(64, h200), (AttentionTile{64, 32, true}));
  EXPECT_EQ(AttentionSharedBytes({64, 32, true}, 64), 43648);
  EXPECT_EQ(*DefaultAttentionTile(128, h200), (AttentionTile{32, 32, false}));
  h200.limits.max_workgroup_storage_bytes = 32 << 10;
  EXPECT_EQ(*DefaultAttentionTile(64, h200), (AttentionTile{32, 32, false}));
  // Where the extra block does not fit, the same tile without it.
  h200.limits.max_workgroup_storage_bytes = AttentionSharedBytes({64, 32}, 64);
  EXPECT_EQ(*DefaultAttentionTile(64, h200), (AttentionTile{64, 32, false}));
  // Through Dawn, the tiles with V's own buffer unroll the scores' loop over
  // D and index in u32; not through wgpu-native, nor without V's own buffer.
  h200.limits.max_workgroup_storage_bytes = 48 << 10;
  h200.implementation = "dawn";
  EXPECT_EQ(*DefaultAttentionTile(64, h200), (AttentionTile{64, 32, true, true, true}));
  EXPECT_EQ(*DefaultAttentionTile(128, h200), (AttentionTile{32, 32, false, false, false}));
  h200.trusted = true;
  EXPECT_EQ(*DefaultAttentionTile(64, h200), (AttentionTile{64, 32, true, true, true}));
  h200.implementation = "wgpu";
  EXPECT_EQ(*DefaultAttentionTile(64, h200), (AttentionTile{64, 32, true, false, false}));
}

// The unrolled loop: the same kernel with the scores' loop over D written
// out, D / 4 steps of 4 k each.
TEST(OpsMoreTest, AttentionScoresLoopUnrolled) {
  Target t;
  t.limits.max_workgroup_storage_bytes = 48 << 10;
  const TensorType q{{2, 70, 32}};
  AttentionOptions o;
  o.tile = AttentionTile{32, 32, true, false};
  auto serial = Attention(q, q, q, t, o);
  ASSERT_TRUE(serial.ok()) << serial.status();
  o.tile = AttentionTile{32, 32, true, true};
  auto unrolled = Attention(q, q, q, t, o);
  ASSERT_TRUE(unrolled.ok()) << unrolled.status();
  EXPECT_EQ(Count(*serial, "unroll("), 0u);
  EXPECT_EQ(Count(*unrolled, "unroll("), 1u) << ir::Print(*unrolled);
  EXPECT_EQ(o.tile->ToString(),
            "32 queries x 32 keys per block, 64 threads, V in a buffer of its own, the scores' "
            "loop over D unrolled");
}

}  // namespace
}  // namespace kiln::ops
