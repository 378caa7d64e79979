// Every operator's default schedule rule for random targets: limits from
// below WebGPU's compatibility-mode minimums up to a desktop GPU's, with and
// without subgroups, each implementation and mode. The kernel fits the
// target it was built for (threads, workgroup sizes, workgroup storage,
// storage buffers; the verifier's checks) or the operator is refused with an
// argument error that names it, and never where the target offers at least
// WebGPU's compatibility-mode limits; and on the interpreter (random subgroup
// sizes, outputs poisoned) the kernel computes what the kernel built for
// WebGPU's default limits computes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kiln/interp/interpreter.h"
#include "kiln/ir/verifier.h"
#include "kiln/ops/ops.h"
#include "kiln/support/status.h"

namespace kiln::ops {
namespace {

struct Op {
  std::string name;
  std::function<StatusOr<ir::Function>(const Target&)> build;
};

std::vector<Op> Ops() {
  const TensorType f32_2d{{33, 70}}, f16_2d{{33, 70}, ir::kF16};
  std::vector<Op> ops;
  auto add = [&](std::string name, std::function<StatusOr<ir::Function>(const Target&)> build) {
    ops.push_back({std::move(name), std::move(build)});
  };
  add("matmul 33x70 @ 70x17", [](const Target& t) { return Matmul({{33, 70}}, {{70, 17}}, t); });
  add("matmul 64x32 @ 32x128, whole tiles", [](const Target& t) {
    return Matmul({{64, 32}}, {{32, 128}}, t);
  });
  add("batched matmul, transposed, bias, gelu, residual", [](const Target& t) {
    MatmulOptions o;
    o.transpose_a = true;
    o.transpose_b = true;
    o.bias = TensorType{{40}};
    o.activation = "gelu";
    o.residual = TensorType{{2, 3, 9, 40}};
    return Matmul({{2, 1, 20, 9}}, {{3, 40, 20}}, t, o);
  });
  add("matmul f16 17x36 @ 36x65", [](const Target& t) {
    return Matmul({{17, 36}, ir::kF16}, {{36, 65}, ir::kF16}, t);
  });
  add("matmul int8 9x8 @ 8x20 words", [](const Target& t) {
    return MatmulInt8({{9, 8}, ir::DataType::Int8x4()}, {{20, 8}, ir::DataType::Int8x4()}, t);
  });
  for (const char* op : {"sum", "mean", "max", "min", "prod"}) {
    add(StrCat(op, " over the last axis of 33x70"), [op](const Target& t) {
      return ReduceAxes(op, {{33, 70}}, {1}, false, t);
    });
    add(StrCat(op, " over axes 0 and 2 of 5x7x300"), [op](const Target& t) {
      return ReduceAxes(op, {{5, 7, 300}}, {0, 2}, true, t);
    });
  }
  add("sum over the last axis of 3x1000 f16", [](const Target& t) {
    return ReduceAxes("sum", {{3, 1000}, ir::kF16}, {1}, false, t);
  });
  add("sum over the first axis of 300x9", [](const Target& t) {
    return ReduceAxes("sum", {{300, 9}}, {0}, false, t);
  });
  add("argmax over the last axis of 7x300", [](const Target& t) {
    return ArgReduce("argmax", {{7, 300}}, 1, false, t);
  });
  add("argmin over axis 0 of 50x3", [](const Target& t) {
    return ArgReduce("argmin", {{50, 3}}, 0, true, t);
  });
  add("softmax 9x300", [](const Target& t) { return SoftmaxAxis({{9, 300}}, 1, t); });
  add("softmax over axis 0 of 30x5", [](const Target& t) { return SoftmaxAxis({{30, 5}}, 0, t); });
  add("log_softmax 5x1000", [](const Target& t) { return LogSoftmax({{5, 1000}}, 1, t); });
  add("layer norm 9x260", [](const Target& t) { return LayerNorm({{9, 260}}, 1e-5, t); });
  add("layer norm f16 4x1000", [](const Target& t) {
    return LayerNorm({{4, 1000}, ir::kF16}, 1e-5, t);
  });
  add("rms norm 9x33", [](const Target& t) { return RmsNorm({{9, 33}}, 1e-6, t); });
  add("conv2d NHWC 3x3 16->32, padded", [](const Target& t) {
    Conv2dOptions o;
    o.pad_h = o.pad_w = 1;
    o.bias = TensorType{{32}};
    o.activation = "relu";
    return Conv2d({{1, 9, 7, 16}}, {{3, 3, 16, 32}}, t, o);
  });
  add("conv2d NCHW 3x3 16->16, stride 2, dilation 2", [](const Target& t) {
    Conv2dOptions o;
    o.nhwc = false;
    o.stride_h = o.stride_w = 2;
    o.dilation_h = o.dilation_w = 2;
    o.pad_h = 2;
    return Conv2d({{2, 16, 9, 9}}, {{16, 16, 3, 3}}, t, o);
  });
  add("conv2d depthwise NHWC", [](const Target& t) {
    Conv2dOptions o;
    o.groups = 8;
    o.pad_h = o.pad_w = 1;
    return Conv2d({{1, 6, 6, 8}}, {{3, 3, 1, 8}}, t, o);
  });
  add("max pool 3x3 stride 2, padded", [](const Target& t) {
    Pool2dOptions o;
    o.kernel_h = o.kernel_w = 3;
    o.stride_h = o.stride_w = 2;
    o.pad_h = o.pad_w = 1;
    return Pool2d("max", {{1, 9, 9, 5}}, t, o);
  });
  add("avg pool NCHW", [](const Target& t) {
    Pool2dOptions o;
    o.nhwc = false;
    return Pool2d("avg", {{2, 3, 7, 8}}, t, o);
  });
  for (int64_t d : {16, 64, 128}) {
    add(StrCat("attention D ", d, ", causal"), [d](const Target& t) {
      AttentionOptions o;
      o.causal = true;
      return Attention({{2, 33, d}}, {{2, 40, d}}, {{2, 40, d}}, t, o);
    });
  }
  add("packed attention, 3 heads of D 16, causal", [](const Target& t) {
    AttentionOptions o;
    o.causal = true;
    return PackedAttention({{2, 33, 3 * 3 * 16}}, 3, t, o);
  });
  add("attention with a mask", [](const Target& t) {
    AttentionOptions o;
    o.mask = TensorType{{7, 70}};
    return Attention({{7, 32}}, {{70, 32}}, {{70, 32}}, t, o);
  });
  add("add, broadcasting", [](const Target& t) {
    return Elementwise("add", {{{33, 1}}, {{70}}}, t);
  });
  add("fma f16", [](const Target& t) {
    return Elementwise("fma", {{{4097}, ir::kF16}, {{1}, ir::kF16}, {{4097}, ir::kF16}}, t);
  });
  add("permute", [](const Target& t) { return Permute({{3, 5, 7}}, {2, 0, 1}, t); });
  add("concat", [](const Target& t) { return Concat({{{3, 5}}, {{3, 9}}, {{3, 1}}}, 1, t); });
  add("slice with a negative step", [](const Target& t) {
    return Slice({{10, 9}}, {8, 0}, {std::numeric_limits<int64_t>::min(), 9}, {-3, 2}, t);
  });
  add("gather", [](const Target& t) { return Gather({{11, 6}}, {{4, 3}, ir::kI32}, t); });
  add("pad", [](const Target& t) { return Pad({{3, 4}}, {1, 0}, {2, 3}, -1.5, t); });
  add("where", [](const Target& t) { return Where({{5, 1}, ir::kI32}, {{1, 6}}, {{5, 6}}, t); });
  add("cast to i32", [](const Target& t) { return Cast({{100}}, ir::kI32, t); });
  add("cast to u32", [](const Target& t) { return Cast({{100}, ir::kF16}, ir::kU32, t); });
  add("unpack i8", [](const Target& t) { return UnpackBytes({{3, 33}, ir::kI8}, t); });
  add("pack bytes", [](const Target& t) { return PackBytes({101}, t); });
  return ops;
}

// A target at WebGPU's compatibility-mode minimums or above that binds the
// kernel's `buffers`: every operator must build for it.
bool AtLeastCompatibility(const Target& t, size_t buffers) {
  return t.limits.max_invocations_per_workgroup >= 128 && t.limits.max_workgroup_size_x >= 128 &&
         t.limits.max_workgroup_size_y >= 128 && t.limits.max_workgroup_storage_bytes >= 16384 &&
         t.limits.max_storage_buffers_per_stage >= std::max<size_t>(4, buffers);
}

Target RandomTarget(std::mt19937& rng) {
  auto pick = [&](std::initializer_list<uint32_t> v) { return *(v.begin() + rng() % v.size()); };
  Target t;
  t.limits.max_invocations_per_workgroup = pick({64, 128, 256, 512, 1024});
  t.limits.max_workgroup_size_x =
      std::min(t.limits.max_invocations_per_workgroup, pick({64, 128, 256, 1024}));
  t.limits.max_workgroup_size_y =
      std::min(t.limits.max_invocations_per_workgroup, pick({64, 128, 256, 1024}));
  t.limits.max_workgroup_storage_bytes = pick({8192, 16384, 32768, 49152, 65536});
  t.limits.max_storage_buffers_per_stage = pick({3, 4, 5, 8, 10});
  t.subgroups = rng() % 2 == 0;
  t.shader_f16 = true;
  t.implementation = std::vector<std::string>{"", "dawn", "wgpu"}[rng() % 3];
  t.trusted = rng() % 2 == 0;
  return t;
}

std::string Describe(const Target& t) {
  return StrCat("target: ", t.limits.max_invocations_per_workgroup, " invocations, size x ",
                t.limits.max_workgroup_size_x, ", y ", t.limits.max_workgroup_size_y, ", ",
                t.limits.max_workgroup_storage_bytes, " bytes of workgroup storage, ",
                t.limits.max_storage_buffers_per_stage, " storage buffers, subgroups ",
                t.subgroups ? "yes" : "no", ", implementation '", t.implementation, "'",
                t.trusted ? ", trusted" : "");
}

// Random arguments for `f`'s parameters, the last (the output) poisoned.
std::vector<interp::ArgValue> RandomArgs(const ir::Function& f, std::mt19937& rng) {
  std::vector<interp::ArgValue> args;
  for (size_t p = 0; p < f.params().size(); ++p) {
    const ir::Buffer& b = f.params()[p].buffer();
    std::vector<int64_t> shape;
    for (const ir::Expr& e : b.shape()) shape.push_back(e.as<ir::IntImmNode>()->value);
    interp::HostBuffer h(b.dtype(), shape);
    const bool output = p + 1 == f.params().size();
    for (int64_t i = 0; i < h.num_elements(); ++i) {
      if (b.dtype().is_float()) {
        h.Set(i, interp::Value::Float(b.dtype(),
                                      output ? std::numeric_limits<double>::quiet_NaN()
                                             : std::uniform_real_distribution<double>(-2, 2)(rng)));
      } else if (b.dtype().is_int8x4()) {
        h.Set(i, interp::Value::Int(b.dtype(), output ? 0x7f7f7f7f : rng()));
      } else {
        h.Set(i, interp::Value::Int(b.dtype(), output ? -12345 : static_cast<int>(rng() % 9) - 1));
      }
    }
    args.push_back(std::move(h));
  }
  return args;
}

TEST(OpsTargetsTest, RulesFitRandomTargetsAndComputeTheSame) {
  std::mt19937 rng(::testing::UnitTest::GetInstance()->random_seed() + 29);
  Target reference;
  reference.shader_f16 = true;
  const std::vector<Op> ops = Ops();
  int built = 0, refused = 0;
  for (int trial = 0; trial < 4; ++trial) {
    for (const Op& op : ops) {
      const Target target = RandomTarget(rng);
      SCOPED_TRACE(op.name + "; " + Describe(target));
      auto want_f = op.build(reference);
      ASSERT_TRUE(want_f.ok()) << want_f.status();
      auto f = op.build(target);
      if (!f.ok()) {
        ++refused;
        EXPECT_FALSE(AtLeastCompatibility(target, want_f->params().size())) << f.status();
        EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument) << f.status();
        EXPECT_FALSE(f.status().message().empty());
        continue;
      }
      ++built;
      // It fits the target: the verifier's limits, and the workgroup's
      // size along x and y.
      ir::VerifyOptions fits;
      fits.limits = target.limits;
      fits.allow_subgroups = target.subgroups;
      fits.kernel_buffer_types = true;
      const Status verified = ir::Verify(*f, fits);
      ASSERT_TRUE(verified.ok()) << verified;
      std::vector<interp::ArgValue> args = RandomArgs(*f, rng);
      auto dims = interp::ComputeLaunchDims(*f, args);
      ASSERT_TRUE(dims.ok()) << dims.status();
      EXPECT_LE(dims->threads[0], target.limits.max_workgroup_size_x);
      EXPECT_LE(dims->threads[1], target.limits.max_workgroup_size_y);

      std::vector<interp::ArgValue> want_args = args;
      ASSERT_TRUE(interp::Run(*want_f, want_args).ok());
      interp::RunOptions options;
      options.subgroup_size = 4 << (rng() % 5);
      SCOPED_TRACE(StrCat("subgroup size ", options.subgroup_size));
      const Status ran = interp::Run(*f, args, options);
      ASSERT_TRUE(ran.ok()) << ran;
      const auto& want = std::get<interp::HostBuffer>(want_args.back());
      const auto& got = std::get<interp::HostBuffer>(args.back());
      const bool f16 = want.dtype == ir::kF16;
      int bad = 0;
      for (int64_t i = 0; i < want.num_elements() && bad < 5; ++i) {
        const interp::Value w = want.Get(i), g = got.Get(i);
        if (!want.dtype.is_float()) {
          if (w.i != g.i) ++bad;
          EXPECT_EQ(g.i, w.i) << "element " << i;
          continue;
        }
        if (std::isnan(w.f)) {
          if (!std::isnan(g.f)) ++bad;
          EXPECT_TRUE(std::isnan(g.f)) << "element " << i << ": " << g.f;
          continue;
        }
        const double tol = (f16 ? 1e-2 : 1e-4) * (1 + std::abs(w.f));
        if (!(std::abs(g.f - w.f) <= tol)) ++bad;
        EXPECT_NEAR(g.f, w.f, tol) << "element " << i;
      }
    }
  }
  // Most random targets build every operator.
  EXPECT_GT(built, 3 * refused) << built << " built, " << refused << " refused";
}

}  // namespace
}  // namespace kiln::ops
