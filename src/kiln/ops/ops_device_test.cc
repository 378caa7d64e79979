// Operators on a device: each is built for the device's limits, compiled,
// run on fresh random inputs with its outputs poisoned (NaN) first, and
// compared with a plain C++ reference and with the interpreter (through
// check::RunAndCheck), at shapes that are not multiples of any tile. CTest
// runs it once per device.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <numbers>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kiln/check/check.h"
#include "kiln/codegen/wgsl_codegen.h"
#include "kiln/hal/buffer.h"
#include "kiln/hal/device.h"
#include "kiln/interp/half.h"
#include "kiln/interp/interpreter.h"
#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "kiln/ops/device_test_fixture.h"
#include "kiln/ops/ops.h"
#include "kiln/runtime/module.h"
#include "kiln/runtime/test_device.h"

namespace kiln::ops {
namespace {

using runtime::Arg;
using Tensors = std::map<std::string, std::vector<float>>;

class OpsDeviceTest : public testing::OpsDeviceFixture {
 protected:
  // RunInOrder, the outputs poisoned with a NaN that is also two f16 NaNs.
  void Run(const std::vector<ir::Function>& functions, const std::vector<std::string>& inputs,
           Tensors& tensors, bool differential = true) {
    std::string printed;
    for (const auto& f : functions) printed += ir::Print(f);
    SCOPED_TRACE(printed);
    RunInOrder(functions, inputs, tensors, differential, 0x7FC07FC0u);
  }

  static void ExpectNear(const std::vector<float>& got, const std::vector<float>& want,
                         float tolerance, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < want.size(); ++i) {
      if (std::isnan(want[i]) && std::isnan(got[i])) continue;
      ASSERT_LE(std::fabs(got[i] - want[i]), tolerance * (1 + std::fabs(want[i])))
          << what << " [" << i << "]: " << got[i] << " vs " << want[i];
    }
  }
};

using testing::BroadcastSource;

float RefUnary(const std::string& op, float x) {
  if (op == "neg") return -x;
  if (op == "abs") return std::fabs(x);
  if (op == "exp") return std::exp(x);
  if (op == "exp2") return std::exp2(x);
  if (op == "log") return std::log(x);
  if (op == "log2") return std::log2(x);
  if (op == "sqrt") return std::sqrt(x);
  if (op == "rsqrt") return 1.0f / std::sqrt(x);
  if (op == "sin") return std::sin(x);
  if (op == "cos") return std::cos(x);
  if (op == "tanh") return std::tanh(x);
  if (op == "sigmoid") return 1.0f / (1.0f + std::exp(-x));
  if (op == "erf") return std::erf(x);
  if (op == "floor") return std::floor(x);
  if (op == "ceil") return std::ceil(x);
  if (op == "round") return std::nearbyint(x);
  if (op == "trunc") return std::trunc(x);
  if (op == "relu") return x <= 0 ? 0.0f : x;
  if (op == "gelu") return 0.5f * x * (1.0f + std::erf(x / std::sqrt(2.0f)));
  if (op == "sign") return std::isnan(x) ? x : x > 0 ? 1.0f : x < 0 ? -1.0f : 0.0f;
  if (op == "square") return x * x;
  if (op == "reciprocal") return 1.0f / x;
  ADD_FAILURE() << "no reference for " << op;
  return 0;
}

float RefBinary(const std::string& op, float a, float b) {
  if (op == "add") return a + b;
  if (op == "sub") return a - b;
  if (op == "mul") return a * b;
  if (op == "div") return a / b;
  if (op == "floor_div") return static_cast<float>(std::floor(double(a) / b));
  if (op == "floor_mod") return static_cast<float>(a - b * std::floor(double(a) / b));
  // numpy's maximum and minimum: NaN where either is.
  if ((op == "max" || op == "min") && (std::isnan(a) || std::isnan(b))) return NAN;
  if (op == "max") return std::max(a, b);
  if (op == "min") return std::min(a, b);
  if (op == "pow") return std::pow(a, b);
  ADD_FAILURE() << "no reference for " << op;
  return 0;
}

// Ops defined only for positive inputs get inputs in [0.05, 2).
bool PositiveOnly(std::string_view op) {
  return op == "log" || op == "log2" || op == "sqrt" || op == "rsqrt" || op == "pow";
}

const Shape kUnaryShapes[] = {{1}, {7, 33}, {1000}, {5, 1, 33, 7}, {4097}, {1024}};

TEST_F(OpsDeviceTest, UnaryOps) {
  for (std::string_view name : UnaryOpNames()) {
    const std::string op(name);
    // i32 ops and the predicates (an i32 result): ops_more_device_test.cc
    if (!ElementwiseOpTakes(op, ir::kF32) ||
        std::find(PredicateOpNames().begin(), PredicateOpNames().end(), name) !=
            PredicateOpNames().end())
      continue;
    for (const Shape& shape : kUnaryShapes) {
      SCOPED_TRACE(op + " " + ShapeToString(shape));
      auto f = Elementwise(op, {{shape}}, target_);
      ASSERT_TRUE(f.ok()) << f.status();
      const int64_t n = NumElements(shape);
      Tensors t = {{"X", PositiveOnly(op) ? Random(n, 0.05f, 2.0f) : Random(n, -2.0f, 2.0f)},
                   {"Y", std::vector<float>(n)}};
      // The interpreter draws inputs in [-1, 1]: skip it where that is
      // outside the op's domain.
      ASSERT_NO_FATAL_FAILURE(Run({*f}, {"X"}, t, !PositiveOnly(op)));
      std::vector<float> want(n);
      for (int64_t i = 0; i < n; ++i) want[i] = RefUnary(op, t["X"][i]);
      ExpectNear(t["Y"], want, 1e-4f, "Y");
    }
  }
}

struct ShapePair {
  Shape a, b;
};
const ShapePair kBinaryShapes[] = {
    {{7, 1}, {1, 33}},
    {{33}, {5, 33}},
    {{1000}, {1000}},
    {{1}, {7}},
    {{7}, {1}},
    {{3, 1, 5, 1}, {4, 1, 7}},
    // Large enough for the vectorized default schedule: a tail, rows the
    // lanes cross (33 columns), rows they do not (64), broadcasts both ways.
    {{1027}, {1027}},
    {{64, 33}, {33}},
    {{5, 1, 64}, {7, 1}},
    {{4096}, {1}},
};

TEST_F(OpsDeviceTest, BinaryOpsBroadcast) {
  for (std::string_view name : BinaryOpNames()) {
    const std::string op(name);
    if (!ElementwiseOpTakes(op, ir::kF32)) continue;  // i32 ops: ops_more_device_test.cc
    for (const ShapePair& p : kBinaryShapes) {
      SCOPED_TRACE(op + " " + ShapeToString(p.a) + " " + ShapeToString(p.b));
      auto f = Elementwise(op, {{p.a}, {p.b}}, target_);
      ASSERT_TRUE(f.ok()) << f.status();
      auto out = BroadcastShapes(p.a, p.b);
      ASSERT_TRUE(out.ok());
      const int64_t n = NumElements(*out);
      const bool positive = PositiveOnly(op);
      Tensors t = {
          {"A", positive ? Random(NumElements(p.a), 0.05f, 2.0f) : Random(NumElements(p.a))},
          {"B", Random(NumElements(p.b))},
          {"C", std::vector<float>(n)}};
      const bool floors = op == "floor_div" || op == "floor_mod";
      if (op == "div" || floors) {  // keep divisors away from 0
        for (float& v : t["B"]) v = v < 0 ? v - 0.1f : v + 0.1f;
      }
      if (floors) {
        // Divisors that are powers of two: every quotient is exact, so the
        // device floors it as the reference does (a division within
        // WGSL's 2.5 ulp of a quotient near an integer might not).
        std::vector<int32_t> pick = RandomInts(NumElements(p.b), 0, 7);
        for (size_t i = 0; i < pick.size(); ++i) {
          t["B"][i] = (pick[i] % 2 ? -1.0f : 1.0f) * std::ldexp(1.0f, pick[i] / 2 - 2);
        }
      }
      // The interpreter's check draws its own inputs, with quotients
      // arbitrarily close to integers: not for the floor ops.
      ASSERT_NO_FATAL_FAILURE(Run({*f}, {"A", "B"}, t, !positive && !floors));
      std::vector<float> want(n);
      for (int64_t i = 0; i < n; ++i) {
        want[i] = RefBinary(op, t["A"][BroadcastSource(p.a, *out, i)],
                            t["B"][BroadcastSource(p.b, *out, i)]);
      }
      ExpectNear(t["C"], want, 1e-5f, "C");
    }
  }
}

// pow on floats is numpy's power at every edge: zero, negative and
// infinite bases, integer and fractional exponents, NaN in either operand;
// then random negative bases with integer exponents. A base of -0.0 keeps
// its sign for odd integer exponents (-0.0 or -inf), as in C and numpy.
TEST_F(OpsDeviceTest, FloatPowIsNumpysPower) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const std::vector<float> bases = {0.0f, -0.0f, 1.0f, -1.0f, 2.0f, -2.0f,  0.5f, -0.5f,
                                    3.0f, -3.0f, inf,  -inf,  nan,  1e-30f, -7.0f};
  const std::vector<float> exponents = {0.0f,  -0.0f, 1.0f, -1.0f, 2.0f, -2.0f, 3.0f, -3.0f, 0.5f,
                                        -0.5f, 2.5f,  inf,  -inf,  nan,  1e9f,  7.0f, 4.0f};
  const int64_t rows = static_cast<int64_t>(bases.size()), cols = int64_t(exponents.size());
  std::vector<float> a, b;
  for (float x : bases) {
    for (float y : exponents) {
      a.push_back(x);
      b.push_back(y);
    }
  }
  // Random negative and positive bases with integer exponents.
  const std::vector<float> more = Random(4 * cols, -3.0f, 3.0f);
  const std::vector<int32_t> powers = RandomInts(4 * cols, -6, 6);
  for (int64_t i = 0; i < 4 * cols; ++i) {
    a.push_back(more[i]);
    b.push_back(static_cast<float>(powers[i]));
  }
  const Shape shape = {rows + 4, cols};
  auto f = Elementwise("pow", {{shape}, {shape}}, target_);
  ASSERT_TRUE(f.ok()) << f.status();
  Tensors t = {{"A", a}, {"B", b}, {"C", std::vector<float>(a.size())}};
  ASSERT_NO_FATAL_FAILURE(Run({*f}, {"A", "B"}, t));
  for (size_t i = 0; i < a.size(); ++i) {
    const float want = std::pow(a[i], b[i]), got = t["C"][i];
    const bool same =
        (std::isnan(want) && std::isnan(got)) ||
        (want == got && std::signbit(want) == std::signbit(got)) ||
        (std::isfinite(want) && want != 0 && std::fabs(got - want) <= 1e-5f * std::fabs(want));
    EXPECT_TRUE(same) << "pow(" << a[i] << ", " << b[i] << "): " << got << ", numpy " << want;
  }
}

// `v` rounded once to f16 (to nearest, ties to even): `v` is rounded to
// f16's precision at its exponent while still a double, so the float that
// FloatToHalfBits then takes is already a half.
float RoundDoubleToHalf(double v) {
  if (v == 0 || !std::isfinite(v)) return interp::RoundToHalf(static_cast<float>(v));
  const double ulp = std::ldexp(1.0, std::max(std::ilogb(v) - 10, -24));
  return interp::RoundToHalf(static_cast<float>(std::nearbyint(v / ulp) * ulp));
}

// numpy's a // b and a % b for the operands below, rounded once to f32 or
// f16: flooring in double is exact for them (the exact quotient of two
// floats is never within double's rounding of an integer it is not, and
// a - q * b fits), then one rounding.
float NumpyFloor(bool mod, float a, float b, bool half) {
  const double q = std::floor(double(a) / b), m = double(a) - q * b;
  const auto round = [&](double v) { return half ? RoundDoubleToHalf(v) : float(v); };
  if (mod) return m == 0 ? std::copysign(0.0f, b) : round(m);
  return q == 0 ? std::copysign(0.0f, a / b) : round(q);
}

// floor_div and floor_mod on floats are numpy's (the exact quotient floored:
// 1 // 0.1 is 9, not the 10 of the rounded quotient; the remainder rounded
// once, a zero one of b's sign), with an fma that rounds once: in the
// interpreter, and on a device whose fma does. A device whose fma rounds
// the product first (lavapipe) floors the rounded quotient (docs/ops.md).
// The parameter: f16 operands rather than f32.
class FloatFloorTest : public OpsDeviceTest, public ::testing::WithParamInterface<bool> {
 protected:
  bool half() const { return GetParam(); }
  ir::DataType dtype() const { return half() ? ir::kF16 : ir::kF32; }

  // Quotients at or next to integers (1 / 0.1, 6 / 3, -tiny % big, 1 % -1,
  // signed zeros), quotients that are no f16 (65504 / 3: f16 is computed in
  // f32), then those of random mantissas and powers of ten below 2^20 in
  // size (f16 operands normal halves).
  void SetUp() override {
    OpsDeviceTest::SetUp();
    if (HasFatalFailure()) return;
    const std::vector<float> a = {1.0f, -1.0f,  1.0f,     6.0f,      -9.27e-5f, 0.3f,    -0.0f,
                                  0.0f, 5.0f,   -5.0f,    7.0f,      -7.0f,     0.7f,    1e6f,
                                  3.0f, -1e-4f, 65504.0f, -65504.0f, 65504.0f,  30001.0f},
                             b = {0.1f,  0.1f,   -1.0f, 3.0f,  3476.9f, 0.1f, 1.0f,
                                  -1.0f, 2.5f,   2.5f,  -0.7f, 0.7f,    0.1f, 0.1f,
                                  0.3f,  300.0f, 3.0f,  3.0f,  -7.0f,   0.5f};
    const double limit = 1 << 20;
    const auto add = [&](float x, float y) {
      if (half()) {
        x = interp::RoundToHalf(x);
        y = interp::RoundToHalf(y);
        if (!std::isfinite(x) || y == 0 || std::fabs(double(x) / y) >= limit) return;
      }
      a_.push_back(x);
      b_.push_back(y);
    };
    for (size_t i = 0; i < a.size(); ++i) add(a[i], b[i]);
    const int64_t n = 4099;
    const std::vector<float> ma = Random(n), mb = Random(n);
    const std::vector<int32_t> ea = RandomInts(n, -3, half() ? 3 : 6),
                               eb = RandomInts(n, -3, half() ? 2 : 3);
    const float smallest = half() ? std::ldexp(1.0f, -14) : 0.0f;
    for (int64_t i = 0; i < n; ++i) {
      float x = ma[i] * std::pow(10.0f, float(ea[i])), y = mb[i] * std::pow(10.0f, float(eb[i]));
      if (half()) {
        x = interp::RoundToHalf(x);
        y = interp::RoundToHalf(y);
      }
      if (std::fabs(y) <= smallest || std::fabs(x) < smallest ||
          std::fabs(double(x) / y) >= limit ||
          std::fabs(x) < std::ldexp(std::fabs(y), half() ? -12 : -20))
        continue;
      add(x, y);
    }
  }

  int64_t size() const { return static_cast<int64_t>(a_.size()); }

  // `op` over [size()] operands of dtype(), for `target`.
  ir::Function Op(bool mod, const Target& target) {
    auto f = Elementwise(mod ? "floor_mod" : "floor_div",
                         {{{size()}, dtype()}, {{size()}, dtype()}}, target);
    EXPECT_TRUE(f.ok()) << f.status();
    return f.ok() ? *f : ir::Function();
  }

  // The buffer's bytes for `values` of dtype(), as the 4-byte words that
  // Run moves (an f16 pair in each).
  std::vector<float> Words(const std::vector<float>& values) const {
    if (!half()) return values;
    std::vector<uint16_t> bits(values.size() + values.size() % 2);
    for (size_t i = 0; i < values.size(); ++i) bits[i] = interp::FloatToHalfBits(values[i]);
    std::vector<float> words(bits.size() / 2);
    std::memcpy(words.data(), bits.data(), bits.size() * 2);
    return words;
  }
  std::vector<float> Values(const std::vector<float>& words) const {
    if (!half()) return words;
    std::vector<uint16_t> bits(words.size() * 2);
    std::memcpy(bits.data(), words.data(), bits.size() * 2);
    std::vector<float> values(size());
    for (int64_t i = 0; i < size(); ++i) values[i] = interp::HalfBitsToFloat(bits[i]);
    return values;
  }

  void ExpectNumpys(bool mod, const std::vector<float>& got) {
    ASSERT_EQ(static_cast<int64_t>(got.size()), size());
    for (int64_t i = 0; i < size(); ++i) {
      const float want = NumpyFloor(mod, a_[i], b_[i], half());
      EXPECT_TRUE(got[i] == want && std::signbit(got[i]) == std::signbit(want))
          << dtype().ToString() << " " << a_[i] << (mod ? " % " : " // ") << b_[i] << ": " << got[i]
          << ", numpy " << want;
    }
  }

  std::vector<float> a_, b_;
};

TEST_P(FloatFloorTest, NumpysInTheInterpreter) {
  Target target = target_;
  target.shader_f16 = true;  // the interpreter computes in f16 whatever the device
  for (bool mod : {false, true}) {
    const auto buffer = [&](const std::vector<float>& values) {
      const std::vector<float> words = Words(values);
      interp::HostBuffer b = interp::HostBuffer::FromVector(dtype(), {size()}, words);
      b.bytes.resize(size() * dtype().StorageBytes());
      return b;
    };
    std::vector<interp::ArgValue> args = {buffer(a_), buffer(b_),
                                          buffer(std::vector<float>(size(), std::nanf("")))};
    Status run = interp::Run(Op(mod, target), args);
    ASSERT_TRUE(run.ok()) << run;
    std::vector<float> words((size() * dtype().StorageBytes() + 3) / 4);
    const auto& out = std::get<interp::HostBuffer>(args.back()).bytes;
    std::memcpy(words.data(), out.data(), out.size());
    ExpectNumpys(mod, Values(words));
  }
}

TEST_P(FloatFloorTest, NumpysWhereFmaRoundsOnce) {
  if (half() && !target_.shader_f16) GTEST_SKIP() << "the device has no shader-f16";
  // fma(1 + e, 1 + e, -(1 + 2e)) is e^2, or 0 with the product rounded
  // first: e = 2^-12 for f32, 2^-6 for f16 (in the low half of the word).
  const int e = half() ? -6 : -12;
  const std::string type = dtype().ToString();
  auto probe = ir::ParseFunction("fn fma_probe(A: buffer<" + type + ">[2], C: buffer<" + type +
                                 ">[2]) {\n  for tx in threadIdx.x(0, 1) {\n    C[0] = fma(A[0], "
                                 "A[0], -A[1])\n    C[1] = A[1]\n  }\n}");
  ASSERT_TRUE(probe.ok()) << probe.status();
  const float one_e = 1 + std::ldexp(1.0f, e), one_2e = 1 + std::ldexp(1.0f, e + 1);
  Tensors p = {{"A", Words({one_e, one_2e})}, {"C", Words({0.0f, 0.0f})}};
  ASSERT_NO_FATAL_FAILURE(Run({*probe}, {"A"}, p, /*differential=*/false));
  const float fma =
      half() ? interp::HalfBitsToFloat(static_cast<uint16_t>(std::bit_cast<uint32_t>(p["C"][0])))
             : p["C"][0];
  if (fma != std::ldexp(1.0f, 2 * e)) {
    GTEST_SKIP() << device_->Describe() << " rounds " << type << " fma's product first (fma gave "
                 << fma << "), so floor_div and floor_mod floor the rounded quotient there";
  }
  for (bool mod : {false, true}) {
    Tensors t = {{"A", Words(a_)}, {"B", Words(b_)}, {"C", Words(std::vector<float>(size()))}};
    ASSERT_NO_FATAL_FAILURE(Run({Op(mod, target_)}, {"A", "B"}, t, /*differential=*/false));
    ExpectNumpys(mod, Values(t["C"]));
  }
}

INSTANTIATE_TEST_SUITE_P(F32AndF16, FloatFloorTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "f16" : "f32";
                         });

// ((x + b) * s) then relu then tanh then (1 - v) then max with a row, as
// one kernel.
TEST_F(OpsDeviceTest, ElementwiseChainIsOneKernel) {
  for (auto [rows, cols] :
       {std::pair<int64_t, int64_t>{1, 1}, {7, 33}, {33, 1000}, {37, 41}, {256, 16}}) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
    const Shape x_shape = {rows, cols}, b_shape = {cols}, s_shape = {rows, 1};
    auto f = ElementwiseChain({x_shape},
                              {ChainStep::With("add", {b_shape}), ChainStep::With("mul", {s_shape}),
                               ChainStep::Unary("relu"), ChainStep::Unary("tanh"),
                               ChainStep::WithConstant("sub", 1.0, /*operand_first=*/true),
                               ChainStep::With("max", {{1, cols}})},
                              target_);
    ASSERT_TRUE(f.ok()) << f.status();
    const int64_t n = rows * cols;
    Tensors t = {{"X", Random(n, -2, 2)},
                 {"B1", Random(cols)},
                 {"B2", Random(rows)},
                 {"B6", Random(cols)},
                 {"Y", std::vector<float>(n)}};
    ASSERT_NO_FATAL_FAILURE(Run({*f}, {"X", "B1", "B2", "B6"}, t));
    std::vector<float> want(n);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        float v = (t["X"][r * cols + c] + t["B1"][c]) * t["B2"][r];
        v = std::tanh(v > 0 ? v : 0.0f);
        want[r * cols + c] = std::max(1.0f - v, t["B6"][c]);
      }
    }
    ExpectNear(t["Y"], want, 1e-5f, "Y");
  }
}

// A chain whose operand broadcasts the running value up: [33] then + [5, 33].
TEST_F(OpsDeviceTest, ElementwiseChainBroadcastsTheRunningValue) {
  auto f = ElementwiseChain({{33}}, {ChainStep::Unary("exp"), ChainStep::With("add", {{5, 33}})},
                            target_);
  ASSERT_TRUE(f.ok()) << f.status();
  Tensors t = {{"X", Random(33)}, {"B2", Random(5 * 33)}, {"Y", std::vector<float>(5 * 33)}};
  ASSERT_NO_FATAL_FAILURE(Run({*f}, {"X", "B2"}, t));
  std::vector<float> want(5 * 33);
  for (int r = 0; r < 5; ++r) {
    for (int c = 0; c < 33; ++c) want[r * 33 + c] = std::exp(t["X"][c]) + t["B2"][r * 33 + c];
  }
  ExpectNear(t["Y"], want, 1e-5f, "Y");
}

// relu, gelu and + 0.5, six times over: each step reads the previous one
// once (relu and gelu let-bind their input), so the kernel stays small.
TEST_F(OpsDeviceTest, LongChainOfReluAndGelu) {
  std::vector<ChainStep> steps;
  for (int r = 0; r < 6; ++r) {
    steps.push_back(ChainStep::Unary("relu"));
    steps.push_back(ChainStep::Unary("gelu"));
    steps.push_back(ChainStep::WithConstant("add", 0.5));
  }
  auto f = ElementwiseChain({{33, 7}}, steps, target_);
  ASSERT_TRUE(f.ok()) << f.status();
  Tensors t = {{"X", Random(33 * 7, -2, 2)}, {"Y", std::vector<float>(33 * 7)}};
  ASSERT_NO_FATAL_FAILURE(Run({*f}, {"X"}, t));
  std::vector<float> want(33 * 7);
  for (size_t i = 0; i < want.size(); ++i) {
    float v = t["X"][i];
    for (int r = 0; r < 6; ++r) v = RefUnary("gelu", RefUnary("relu", v)) + 0.5f;
    want[i] = v;
  }
  ExpectNear(t["Y"], want, 1e-4f, "Y");
}

TEST_F(OpsDeviceTest, Reductions) {
  for (std::string_view name : ReduceOpNames()) {
    const std::string op(name);
    for (auto [rows, cols] :
         {std::pair<int64_t, int64_t>{1, 1}, {7, 33}, {33, 1000}, {1000, 7}, {1, 1000}}) {
      for (bool keepdims : {false, true}) {
        SCOPED_TRACE(op + " " + std::to_string(rows) + "x" + std::to_string(cols) +
                     (keepdims ? " keepdims" : ""));
        auto f = Reduce(op, {{rows, cols}}, keepdims, target_);
        ASSERT_TRUE(f.ok()) << f.status();
        // prod: values near 1 so that long rows stay finite.
        Tensors t = {{"X", op == "prod" ? Random(rows * cols, 0.99f, 1.01f) : Random(rows * cols)},
                     {"Y", std::vector<float>(rows)}};
        ASSERT_NO_FATAL_FAILURE(Run({*f}, {"X"}, t));
        std::vector<float> want(rows);
        for (int64_t r = 0; r < rows; ++r) {
          const float* row = t["X"].data() + r * cols;
          double acc = op == "prod" ? 1.0 : 0.0;
          if (op == "max") acc = *std::max_element(row, row + cols);
          if (op == "min") acc = *std::min_element(row, row + cols);
          for (int64_t c = 0; c < cols; ++c) {
            if (op == "sum" || op == "mean") acc += row[c];
            if (op == "prod") acc *= row[c];
          }
          if (op == "mean") acc /= cols;
          want[r] = static_cast<float>(acc);
        }
        ExpectNear(t["Y"], want, 1e-4f, "Y");
      }
    }
  }
}

TEST_F(OpsDeviceTest, SoftmaxInThreeKernels) {
  for (auto [rows, cols] :
       {std::pair<int64_t, int64_t>{1, 1}, {7, 33}, {33, 1000}, {1000, 7}, {1, 1000}}) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
    auto seq = Softmax({{rows, cols}}, target_);
    ASSERT_TRUE(seq.ok()) << seq.status();
    ASSERT_EQ(seq->functions.size(), 3u);
    // Large inputs: without the row max subtracted, exp would overflow.
    Tensors t = {{"X", Random(rows * cols, -50, 100)}, {"Y", std::vector<float>(rows * cols)}};
    for (const IntermediateTensor& m : seq->intermediates) {
      t[m.name] = std::vector<float>(NumElements(m.shape));
    }
    ASSERT_NO_FATAL_FAILURE(Run(seq->functions, {"X"}, t));
    std::vector<float> want(rows * cols);
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = t["X"].data() + r * cols;
      const float mx = *std::max_element(row, row + cols);
      double sum = 0;
      for (int64_t c = 0; c < cols; ++c) sum += std::exp(static_cast<double>(row[c]) - mx);
      for (int64_t c = 0; c < cols; ++c) {
        want[r * cols + c] = static_cast<float>(std::exp(static_cast<double>(row[c]) - mx) / sum);
      }
    }
    ExpectNear(t["Y"], want, 1e-5f, "Y");
    for (int64_t r = 0; r < rows; ++r) {
      double total = 0;
      for (int64_t c = 0; c < cols; ++c) total += t["Y"][r * cols + c];
      EXPECT_NEAR(total, 1.0, 1e-4) << "row " << r;
    }
  }
}

// The default flat schedule computes four contiguous elements per thread as
// one vector where the output has at least 4 x 256 elements: the kernel's
// WGSL has vector arithmetic; a same-shape add whose size 4 divides reads
// and writes its buffers as arrays of vec4 (one access per operand), and one
// with a tail loads each operand's lanes from consecutive indices of one base.
TEST_F(OpsDeviceTest, ElementwiseKernelsAreVectorized) {
  auto add = Elementwise("add", {{{1 << 16}}, {{1 << 16}}}, target_);
  ASSERT_TRUE(add.ok()) << add.status();
  auto wgsl = codegen::CompileFunction(*add, check::CompileOptionsFor(*device_));
  ASSERT_TRUE(wgsl.ok()) << wgsl.status();
  EXPECT_NE(wgsl->wgsl.find("var<storage, read> A : array<vec4<f32>>;"), std::string::npos)
      << wgsl->wgsl;
  EXPECT_NE(wgsl->wgsl.find("var<storage, read_write> C : array<vec4<f32>>;"), std::string::npos)
      << wgsl->wgsl;
  auto tail = Elementwise("add", {{{(1 << 16) + 3}}, {{(1 << 16) + 3}}}, target_);
  ASSERT_TRUE(tail.ok()) << tail.status();
  auto tail_wgsl = codegen::CompileFunction(*tail, check::CompileOptionsFor(*device_));
  ASSERT_TRUE(tail_wgsl.ok()) << tail_wgsl.status();
  EXPECT_NE(tail_wgsl->wgsl.find("vec4<f32>(A[base], A[base + 1i], A[base + 2i], A[base + 3i]) + "
                                 "vec4<f32>(B[base], B[base + 1i], B[base + 2i], B[base + 3i])"),
            std::string::npos)
      << tail_wgsl->wgsl;
  EXPECT_NE(tail_wgsl->wgsl.find("C[base + 3i] = "), std::string::npos) << tail_wgsl->wgsl;
  auto chain = ElementwiseChain(
      {{64, 256}}, {ChainStep::With("add", {{256}}), ChainStep::Unary("relu")}, target_);
  ASSERT_TRUE(chain.ok()) << chain.status();
  auto chain_wgsl = codegen::CompileFunction(*chain, check::CompileOptionsFor(*device_));
  ASSERT_TRUE(chain_wgsl.ok()) << chain_wgsl.status();
  // The row of 256 is a multiple of the lanes: the lanes stay in one row,
  // at a multiple of four (through the `%` of the fuse), so X and the
  // broadcast row are read as vectors.
  EXPECT_NE(chain_wgsl->wgsl.find("var<storage, read> X : array<vec4<f32>>;"), std::string::npos)
      << chain_wgsl->wgsl;
  EXPECT_NE(chain_wgsl->wgsl.find("var<storage, read> B1 : array<vec4<f32>>;"), std::string::npos)
      << chain_wgsl->wgsl;
  // Below the threshold: one element per thread.
  auto small = Elementwise("add", {{{1000}}, {{1000}}}, target_);
  ASSERT_TRUE(small.ok()) << small.status();
  auto small_wgsl = codegen::CompileFunction(*small, check::CompileOptionsFor(*device_));
  ASSERT_TRUE(small_wgsl.ok()) << small_wgsl.status();
  EXPECT_EQ(small_wgsl->wgsl.find("vec4<f32>"), std::string::npos) << small_wgsl->wgsl;
}

// Data movement, where and cast at sizes that take the vectorized flat
// schedule (concat and pad read through if_then_else and stay one element
// per thread), f32 and i32, against the interpreter on its random inputs.
TEST_F(OpsDeviceTest, MovementOpsAtVectorizedSizes) {
  const ir::DataType i32 = ir::kI32;
  std::vector<StatusOr<ir::Function>> built;
  built.push_back(Permute({{48, 67}}, {1, 0}, target_, "permute_f32"));
  built.push_back(Permute({{3, 40, 33}, i32}, {2, 0, 1}, target_, "permute_i32"));
  built.push_back(Reshape({{41, 100}}, {100, 41}, target_));
  built.push_back(Concat({{{33, 40}}, {{33, 7}}}, 1, target_));
  built.push_back(Slice({{100, 90}}, {3, INT64_MAX}, {INT64_MAX, INT64_MIN}, {1, -2}, target_));
  built.push_back(Gather({{50, 64}}, {{7, 5}, i32}, target_, "gather_f32"));
  built.push_back(Gather({{50, 63}, i32}, {{33}, i32}, target_, "gather_i32"));
  built.push_back(Pad({{30, 40}}, {1, 2}, {3, 4}, -1.0, target_));
  built.push_back(Where({{4097}, i32}, {{4097}}, {{1}}, target_));
  built.push_back(Cast({{4099}}, i32, target_));
  std::vector<ir::Function> functions;
  int vectorized = 0;
  for (auto& f : built) {
    ASSERT_TRUE(f.ok()) << f.status();
    vectorized += ir::Print(*f).find("vectorize(0, 4)") != std::string::npos;
    functions.push_back(*f);
  }
  EXPECT_EQ(vectorized, 8);  // all but concat and pad
  CheckAgainstInterpreter(functions);
}

// f16 kernels, where the device has shader-f16, against the interpreter
// (which computes in f16 the same way) on the checker's random inputs.
TEST_F(OpsDeviceTest, F16AgainstTheInterpreter) {
  if (!target_.shader_f16) GTEST_SKIP() << "the device has no shader-f16";
  std::vector<ir::Function> functions;
  auto add = Elementwise("add", {{{7, 1}, ir::kF16}, {{1, 33}, ir::kF16}}, target_);
  auto gelu = Elementwise("gelu", {{{1000}, ir::kF16}}, target_);
  // The vectorized default schedule, with a tail and with a broadcast row.
  auto gelu_vec = Elementwise("gelu", {{{4099}, ir::kF16}}, target_, "gelu_vec");
  auto add_vec = Elementwise("add", {{{37, 64}, ir::kF16}, {{64}, ir::kF16}}, target_, "add_vec");
  auto chain = ElementwiseChain(
      {{33}, ir::kF16}, {ChainStep::Unary("tanh"), ChainStep::With("mul", {{5, 33}, ir::kF16})},
      target_);
  auto sum = Reduce("sum", {{33, 100}, ir::kF16}, false, target_);
  auto mx = Reduce("max", {{7, 33}, ir::kF16}, true, target_);
  for (auto* f : {&add, &gelu, &gelu_vec, &add_vec, &chain, &sum, &mx}) {
    ASSERT_TRUE(f->ok()) << f->status();
    functions.push_back(**f);
  }
  CheckAgainstInterpreter(functions);
}

// f16 gelu and sigmoid compute in f32 and round once: in f16 itself
// 1 + erf(x) cancels (gelu(-3) 8% off, gelu(-4) 0) and exp(-x) overflows
// (sigmoid(-12) 0), and the interpreter would agree with such a kernel.
TEST_F(OpsDeviceTest, F16GeluAndSigmoidRoundOnceFromF32) {
  if (!target_.shader_f16) GTEST_SKIP() << "the device has no shader-f16";
  std::vector<float> x;
  for (int i = -16 * 32; i <= 8 * 32; ++i) x.push_back(interp::RoundToHalf(i / 32.0f + 0.01f));
  for (float v : {-65504.0f, 65504.0f, -0.0f, 0.0f, 6.1e-5f, -6e-8f}) x.push_back(v);
  if (x.size() % 2) x.push_back(1.0f);
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint16_t> bits(n);
  for (int64_t i = 0; i < n; ++i) bits[i] = interp::FloatToHalfBits(x[i]);
  std::vector<float> words(n / 2);
  std::memcpy(words.data(), bits.data(), n * 2);
  for (const std::string op : {"gelu", "sigmoid"}) {
    SCOPED_TRACE(op);
    auto f = Elementwise(op, {{{n}, ir::kF16}}, target_);
    ASSERT_TRUE(f.ok()) << f.status();
    Tensors t = {{"X", words}, {"Y", std::vector<float>(n / 2)}};
    ASSERT_NO_FATAL_FAILURE(Run({*f}, {"X"}, t, /*differential=*/false));
    std::vector<uint16_t> out(n);
    std::memcpy(out.data(), t["Y"].data(), n * 2);
    for (int64_t i = 0; i < n; ++i) {
      const double v = x[i];
      const double exact =
          op == "gelu" ? v / 2 * std::erfc(-v / std::numbers::sqrt2) : 1 / (1 + std::exp(-v));
      const float want = RoundDoubleToHalf(exact), got = interp::HalfBitsToFloat(out[i]);
      // Two f16 units in the last place, and what f32's 1 + erf(x) loses
      // to cancellation (gelu) or two subnormal units (sigmoid).
      const double ulp = std::ldexp(1.0, std::max(std::ilogb(std::fabs(want) + 1e-30) - 10, -24));
      const double slack = std::max(2 * ulp, op == "gelu" ? 4e-7 : 1.2e-7);
      EXPECT_LE(std::fabs(double(got) - want), slack)
          << op << "(" << v << "): " << got << ", rounded from f64 " << want;
    }
  }
}

// ---------------------------------------------------------------------------
// Matmul

struct MatmulCase {
  Shape a, b;
  MatmulOptions options;
  std::optional<MatmulSchedule> schedule;
};

// C = epilogue(A @ B) in double precision, with numpy's batch broadcasting;
// `scale` gets sum_k |a * b| per element, the size of the rounding error.
void ReferenceMatmul(const MatmulCase& c, const Tensors& t, const Shape& out,
                     std::vector<double>& want, std::vector<double>& scale) {
  const Shape& as = c.a;
  const Shape& bs = c.b;
  const int64_t m = out[out.size() - 2], n = out[out.size() - 1];
  const int64_t k = c.options.transpose_a ? as[as.size() - 2] : as[as.size() - 1];
  const Shape batch(out.begin(), out.end() - 2);
  const int64_t batches = NumElements(batch);
  want.assign(NumElements(out), 0.0);
  scale.assign(want.size(), 0.0);
  Shape a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  for (int64_t bi = 0; bi < batches; ++bi) {
    const int64_t a_off = BroadcastSource(a_batch, batch, bi) * as[as.size() - 2] * as.back();
    const int64_t b_off = BroadcastSource(b_batch, batch, bi) * bs[bs.size() - 2] * bs.back();
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0, mag = 0;
        for (int64_t p = 0; p < k; ++p) {
          const double x = t.at("A")[a_off + (c.options.transpose_a ? p * m + i : i * k + p)];
          const double y = t.at("B")[b_off + (c.options.transpose_b ? j * k + p : p * n + j)];
          sum += x * y;
          if (!std::isnan(x * y)) mag += std::fabs(x * y);
        }
        const int64_t o = (bi * m + i) * n + j;
        if (c.options.bias) sum += t.at("bias")[j];
        if (!c.options.activation.empty()) {
          sum = RefUnary(c.options.activation, static_cast<float>(sum));
        }
        if (c.options.residual) sum += t.at("residual")[o];
        want[o] = sum;
        scale[o] = mag + 1;
      }
    }
  }
}

class MatmulDeviceTest : public OpsDeviceTest {
 protected:
  // Builds the case, runs it on fresh random inputs with C poisoned, and
  // compares every element with the reference.
  void Check(const MatmulCase& c, bool differential = false) {
    auto f = Matmul({c.a}, {c.b}, target_, c.options, "", c.schedule);
    ASSERT_TRUE(f.ok()) << f.status();
    Tensors t;
    t["A"] = Random(NumElements(c.a));
    t["B"] = Random(NumElements(c.b));
    std::vector<std::string> inputs = {"A", "B"};
    const ir::Param& out_param = f->params().back();
    Shape out;
    for (const ir::Expr& e : out_param.buffer().shape()) out.push_back(*ir::AsConstInt(e));
    if (c.options.bias) {
      t["bias"] = Random(c.options.bias->shape[0]);
      inputs.push_back("bias");
    }
    if (c.options.residual) {
      t["residual"] = Random(NumElements(out));
      inputs.push_back("residual");
    }
    t["C"] = std::vector<float>(NumElements(out));
    // A NaN in A makes its row of C NaN, whatever the tiling.
    const bool with_nan = NumElements(c.a) > 3;
    if (with_nan) t["A"][2] = std::nanf("");
    Run({*f}, inputs, t, differential);
    std::vector<double> want, scale;
    ReferenceMatmul(c, t, out, want, scale);
    for (size_t o = 0; o < want.size(); ++o) {
      if (std::isnan(want[o])) {
        ASSERT_TRUE(std::isnan(t["C"][o])) << "C[" << o << "] = " << t["C"][o] << ", want NaN";
        continue;
      }
      ASSERT_LE(std::fabs(t["C"][o] - want[o]), 1e-5 * scale[o])
          << "C[" << o << "] of " << f->name() << " " << ShapeToString(c.a) << " @ "
          << ShapeToString(c.b) << ": " << t["C"][o] << " vs " << want[o];
    }
  }
};

TEST_F(MatmulDeviceTest, OddShapesWithTheDefaultSchedule) {
  for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{{1, 1, 1},
                                                            {7, 33, 5},
                                                            {33, 7, 1000},
                                                            {65, 129, 17},
                                                            {130, 257, 33},
                                                            {4097, 5, 7},
                                                            {3, 4097, 4}}) {
    SCOPED_TRACE(StrCat(m, "x", n, "x", k));
    Check({{m, k}, {k, n}, {}, {}});
  }
}

// A spread of matmul schedules (tile shapes, k tiles, double buffering,
// unrolling, the copies through registers and their last k-step).
const MatmulSchedule kScheduleSweep[] = {
    MatmulSchedule{2, 2, 16, false, true}, MatmulSchedule{2, 2, 8, true, false},
    MatmulSchedule{2, 1, 16, false, false}, MatmulSchedule{1, 2, 16, true, false},
    MatmulSchedule{1, 1, 16, false, true}, MatmulSchedule{4, 2, 8, false, false},
    MatmulSchedule{1, 4, 16, false, false},
    MatmulSchedule{2, 1, 32, false, true, true, te::LastCopy::kLoadsAgain, true},
    MatmulSchedule{1, 1, 32, true, true, false, te::LastCopy::kLoadsAgain},
    MatmulSchedule{2, 2, 16, false, true, true, te::LastCopy::kStoresAgain, true},
    MatmulSchedule{1, 2, 16, false, false, true, te::LastCopy::kPeeled},
    MatmulSchedule{2, 2, 16, false, true, true, te::LastCopy::kPeeled, true},
    // Workgroups of 8 x 16 threads (targets of 128 invocations).
    MatmulSchedule{2, 2, 16, false, true, false, te::LastCopy::kSkipped, false, 8},
    MatmulSchedule{1, 2, 16, false, false, true, te::LastCopy::kStoresAgain, true, 8},
    MatmulSchedule{2, 2, 8, true, false, false, te::LastCopy::kSkipped, false, 8}};

// Those of `schedules` whose shared tiles fit the target; the others are
// named as skipped.
std::vector<MatmulSchedule> SchedulesThatFit(const Target& target,
                                             std::span<const MatmulSchedule> schedules) {
  std::vector<MatmulSchedule> out;
  for (const MatmulSchedule& s : schedules) {
    if (s.SharedBytes() > target.limits.max_workgroup_storage_bytes) {
      std::printf("skipping %s: the device has %u bytes of workgroup storage\n",
                  s.ToString().c_str(), target.limits.max_workgroup_storage_bytes);
      continue;
    }
    out.push_back(s);
  }
  return out;
}

TEST_F(MatmulDeviceTest, AlignedShapesTakeTheVectorPath) {
  Check({{64, 16}, {16, 64}, {}, {}}, /*differential=*/true);
  Check({{128, 64}, {64, 192}, {}, {}});
}

TEST_F(MatmulDeviceTest, EverySchedule) {
  for (const MatmulSchedule& s : SchedulesThatFit(target_, kScheduleSweep)) {
    SCOPED_TRACE(s.ToString());
    // Aligned for the first schedule (the one large shapes get), ragged for the rest.
    if (s == MatmulSchedule{2, 2, 16, false, true}) {
      Check({{256, 64}, {64, 256}, {}, s});
    } else {
      Check({{200, 72}, {72, 300}, {}, s});
    }
  }
}

TEST_F(MatmulDeviceTest, TransposedOperands) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE(StrCat("transpose_a ", ta, " transpose_b ", tb));
      MatmulOptions o;
      o.transpose_a = ta;
      o.transpose_b = tb;
      auto shape = [](bool t, int64_t rows, int64_t cols) {
        return t ? Shape{cols, rows} : Shape{rows, cols};
      };
      Check({shape(ta, 33, 47), shape(tb, 47, 65), o, {}});
      // The vector path of a transposed operand (A: vectors along M; B: scalar stores).
      if (ta && tb) Check({shape(ta, 128, 64), shape(tb, 64, 128), o, {}});
    }
  }
}

TEST_F(MatmulDeviceTest, BatchedWithBroadcasting) {
  Check({{2, 3, 33, 17}, {3, 17, 20}, {}, {}});
  Check({{4, 64, 64}, {64, 128}, {}, {}});
  MatmulOptions o;
  o.transpose_b = true;
  Check({{5, 1, 64, 32}, {1, 3, 64, 32}, o, {}});
}

TEST_F(MatmulDeviceTest, FusedEpilogue) {
  MatmulOptions o;
  o.bias = TensorType{{65}};
  o.activation = "tanh";
  Check({{33, 40}, {40, 65}, o, {}});
  // The aligned kernel: vector epilogue without an activation, lanes with one.
  o.bias = TensorType{{128}};
  o.residual = TensorType{{2, 64, 128}};
  o.activation = "";
  Check({{2, 64, 32}, {32, 128}, o, {}});
  o.activation = "relu";
  Check({{2, 64, 32}, {32, 128}, o, {}});
}

TEST_F(MatmulDeviceTest, F16AgainstTheInterpreter) {
  if (!target_.shader_f16) GTEST_SKIP() << "the device has no shader-f16";
  MatmulOptions o;
  o.bias = TensorType{{64}, ir::kF16};
  o.activation = "relu";
  std::vector<ir::Function> functions;
  auto odd = Matmul({{7, 33}, ir::kF16}, {{33, 20}, ir::kF16}, target_, {}, "mm_odd");
  auto aligned = Matmul({{64, 16}, ir::kF16}, {{16, 64}, ir::kF16}, target_, o, "mm_aligned");
  for (auto* f : {&odd, &aligned}) {
    ASSERT_TRUE(f->ok()) << f->status();
    functions.push_back(**f);
  }
  CheckAgainstInterpreter(functions);
}

// f16 accumulation: the products summed in f16 (packed half FMAs), against
// the interpreter running the same kernel with f16 rounding at every step;
// ragged and aligned tiles, 1 x 1 x 1, 4097 rows, a transposed batched
// operand, and an epilogue computed in f32 on the widened sums.
TEST_F(MatmulDeviceTest, F16AccumulationAgainstTheInterpreter) {
  if (!target_.shader_f16) GTEST_SKIP() << "the device has no shader-f16";
  MatmulOptions f16_sums;
  f16_sums.accumulate = ir::kF16;
  MatmulOptions epilogue = f16_sums;
  epilogue.bias = TensorType{{64}, ir::kF16};
  epilogue.activation = "relu";
  MatmulOptions transposed = f16_sums;
  transposed.transpose_a = true;
  std::vector<ir::Function> functions;
  auto odd = Matmul({{7, 33}, ir::kF16}, {{33, 20}, ir::kF16}, target_, f16_sums, "mm_odd");
  auto aligned =
      Matmul({{64, 16}, ir::kF16}, {{16, 64}, ir::kF16}, target_, epilogue, "mm_aligned");
  auto batched =
      Matmul({{2, 24, 40}, ir::kF16}, {{24, 36}, ir::kF16}, target_, transposed, "mm_batched");
  auto one = Matmul({{1, 1}, ir::kF16}, {{1, 1}, ir::kF16}, target_, f16_sums, "mm_one");
  auto tall = Matmul({{4097, 8}, ir::kF16}, {{8, 3}, ir::kF16}, target_, f16_sums, "mm_tall");
  for (auto* f : {&odd, &aligned, &batched, &one, &tall}) {
    ASSERT_TRUE(f->ok()) << f->status();
    functions.push_back(**f);
  }
  // The accumulators are f16.
  const std::string ir_text = ir::Print(functions[0]);
  EXPECT_NE(ir_text.find("acc_buf: f16["), std::string::npos) << ir_text;
  CheckAgainstInterpreter(functions);
}

// ---------------------------------------------------------------------------
// Int8 matmul

// Four int8 values to a word along the last axis: lane j of word w is
// element 4w + j (the low byte first).
std::vector<uint32_t> PackInt8(const std::vector<int32_t>& values) {
  std::vector<uint32_t> words(values.size() / 4, 0);
  for (size_t i = 0; i < values.size(); ++i) {
    words[i / 4] |= (static_cast<uint32_t>(values[i]) & 0xFFu) << (8 * (i % 4));
  }
  return words;
}

// The WGSL bits of a NaN: an unlikely i32 (2143289344) to poison C with.
constexpr uint32_t kPoison = 0x7FC00000u;

struct Int8Case {
  Shape a, b;  // [..., M, K/4] and [..., N, K/4], int8x4
  std::optional<MatmulSchedule> schedule;
};

class MatmulInt8DeviceTest : public testing::OpsDeviceFixture {
 protected:
  void SetUp() override {
    OpsDeviceFixture::SetUp();
    if (HasFatalFailure()) return;
    // dot4I8Packed is the WGSL language feature packed_4x8_integer_dot_product:
    // a device whose compiler lacks it rejects this kernel.
    auto probe = ir::ParseFunction(R"(
fn dot4i8_probe(A: buffer<int8x4>[1], C: buffer<i32>[1]) {
  for tx in threadIdx.x(0, 1) {
    C[0] = dot4i8(A[0], A[0])
  }
})");
    ASSERT_TRUE(probe.ok()) << probe.status();
    auto loaded = Load({*probe});
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    auto kernel = (*loaded)->Find("dot4i8_probe");
    if (!kernel.ok()) {
      GTEST_SKIP() << device_->Describe()
                   << " cannot run dot4I8Packed (WGSL packed_4x8_integer_dot_product): "
                   << kernel.status();
    }
  }

  // Runs the case on fresh random int8 values (with -128 and 127 at fixed
  // places; or each mapped through `map`, where given) with C poisoned, and
  // compares every element of C exactly with a 64-bit reference.
  void Check(const Int8Case& c, const std::function<int32_t(int32_t)>& map = nullptr,
             bool differential = false) {
    const Shape& as = c.a;
    const Shape& bs = c.b;
    SCOPED_TRACE(StrCat(ShapeToString(as), " x ", ShapeToString(bs), "^T (int8x4)",
                        c.schedule ? " " + c.schedule->ToString() : ""));
    auto f = MatmulInt8({as, ir::kInt8x4}, {bs, ir::kInt8x4}, target_, "", c.schedule);
    ASSERT_TRUE(f.ok()) << f.status();
    Shape out;
    for (const ir::Expr& e : f->params().back().buffer().shape()) out.push_back(*ir::AsConstInt(e));
    auto values = [&](int64_t n) {
      std::vector<int32_t> v = RandomInts(n, -128, 127);
      if (map) {
        for (int32_t& x : v) x = map(x);
      } else {
        v[0] = -128;
        if (n > 1) v[n - 1] = 127;
        if (n > 5) v[5] = -128;
      }
      return v;
    };
    const std::vector<int32_t> a = values(NumElements(as) * 4);
    const std::vector<int32_t> b = values(NumElements(bs) * 4);
    std::vector<uint32_t> c_words(NumElements(out), kPoison);
    std::vector<uint32_t> a_words = PackInt8(a), b_words = PackInt8(b);

    auto loaded = Load({*f});
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    auto kernel = (*loaded)->Find(f->name());
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    std::vector<runtime::Arg> args;
    std::vector<hal::BufferRef> buffers;
    for (std::vector<uint32_t>* words : {&a_words, &b_words, &c_words}) {
      auto buffer = device_->allocator().Allocate(words->size() * 4);
      ASSERT_TRUE(buffer.ok()) << buffer.status();
      Status up = hal::Upload(*device_, *buffer, 0,
                              {reinterpret_cast<const uint8_t*>(words->data()), words->size() * 4});
      ASSERT_TRUE(up.ok()) << up;
      buffers.push_back(*buffer);
      args.push_back(runtime::Arg::Buffer(*buffer));
    }
    Status called = (*kernel)->Call(args);
    ASSERT_TRUE(called.ok()) << called;
    Status down = hal::Download(*device_, buffers[2], 0,
                                {reinterpret_cast<uint8_t*>(c_words.data()), c_words.size() * 4});
    ASSERT_TRUE(down.ok()) << down;

    const int64_t m = out[out.size() - 2], n = out.back(), k = as.back() * 4;
    const Shape batch(out.begin(), out.end() - 2);
    const Shape a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
    for (int64_t bi = 0; bi < NumElements(batch); ++bi) {
      const int64_t a_off = BroadcastSource(a_batch, batch, bi) * m * k;
      const int64_t b_off = BroadcastSource(b_batch, batch, bi) * n * k;
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          int64_t sum = 0;
          for (int64_t p = 0; p < k; ++p) {
            sum += int64_t{a[a_off + i * k + p]} * b[b_off + j * k + p];
          }
          const int64_t o = (bi * m + i) * n + j;
          ASSERT_EQ(static_cast<int32_t>(c_words[o]), sum)
              << "C[" << o << "] (batch " << bi << ", row " << i << ", column " << j << ")";
        }
      }
    }
    if (differential) CheckAgainstInterpreter({*f});
  }
};

TEST_F(MatmulInt8DeviceTest, OddShapesWithTheDefaultSchedule) {
  const std::vector<int64_t> ks = {4, 68, 132, 1028};  // K: 1, 17, 33 and 257 words
  int next_k = 0;
  for (int64_t m : {1, 7, 33, 100}) {
    for (int64_t n : {1, 7, 33, 100}) {
      const int64_t k = ks[next_k++ % ks.size()];
      Check({{m, k / 4}, {n, k / 4}, {}});
    }
  }
}

TEST_F(MatmulInt8DeviceTest, AlignedShapesTakeTheUnguardedPath) {
  Check({{64, 16}, {64, 16}, {}}, nullptr, /*differential=*/true);
  Check({{128, 64}, {192, 64}, {}});
}

TEST_F(MatmulInt8DeviceTest, ExtremeValuesSumExactly) {
  // Every product 16384: K = 4096 sums to 2^26.
  Check({{33, 1024}, {7, 1024}, {}}, [](int32_t) { return -128; });
  // Random signs of the extremes (products 16384, -16256, 16129).
  Check({{64, 1024}, {64, 1024}, {}}, [](int32_t x) { return x < 0 ? -128 : 127; });
}

// The int8 GEMM is the f32 one's template with another inner product: one
// schedule of each feature the f32 sweep varies (k 8, 16 and 32, double
// buffering, each treatment of the last k-step, 8 x 16 threads), which
// halves what the CPU drivers compile.
TEST_F(MatmulInt8DeviceTest, ScheduleOfEachFeature) {
  const MatmulSchedule features[] = {
      {2, 2, 16, false, true},
      {2, 2, 8, true, false},
      {4, 2, 8, false, false},
      {2, 1, 32, false, true, true, te::LastCopy::kLoadsAgain, true},
      {2, 2, 16, false, true, true, te::LastCopy::kStoresAgain, true},
      {1, 2, 16, false, false, true, te::LastCopy::kPeeled},
      {1, 2, 16, false, false, true, te::LastCopy::kStoresAgain, true, 8}};
  for (const MatmulSchedule& s : SchedulesThatFit(target_, features)) {
    SCOPED_TRACE(s.ToString());
    if (s == MatmulSchedule{2, 2, 16, false, true}) {
      Check({{256, 64}, {256, 64}, s});
    } else {
      Check({{200, 72}, {300, 72}, s});
    }
  }
}

TEST_F(MatmulInt8DeviceTest, BatchedWithBroadcasting) {
  Check({{2, 3, 33, 17}, {3, 20, 17}, {}});
  Check({{4, 64, 16}, {128, 16}, {}});
  Check({{5, 1, 64, 8}, {1, 3, 64, 8}, {}}, nullptr, /*differential=*/true);
}

// ---------------------------------------------------------------------------
// Convolution and pooling

struct ConvCase {
  Shape x, w;
  Conv2dOptions o;
};

class ConvDeviceTest : public OpsDeviceTest {
 protected:
  // Runs the case on fresh random inputs with Y poisoned and compares every
  // element with a double-precision reference.
  // `wgsl_has`: what the compiled kernel must contain.
  void Check(const ConvCase& c, bool expect_gemm, const std::vector<std::string>& wgsl_has = {}) {
    SCOPED_TRACE(StrCat(c.o.nhwc ? "NHWC " : "NCHW ", ShapeToString(c.x), " * ", ShapeToString(c.w),
                        " stride ", c.o.stride_h, "x", c.o.stride_w, " pad ", c.o.pad_h, "x",
                        c.o.pad_w, " dilation ", c.o.dilation_h, "x", c.o.dilation_w, " groups ",
                        c.o.groups));
    EXPECT_EQ(ConvUsesGemm({c.x}, {c.w}, c.o), expect_gemm);
    auto f = Conv2d({c.x}, {c.w}, target_, c.o);
    ASSERT_TRUE(f.ok()) << f.status();
    if (!wgsl_has.empty()) {
      auto wgsl = codegen::CompileFunction(*f, check::CompileOptionsFor(*device_));
      ASSERT_TRUE(wgsl.ok()) << wgsl.status();
      for (const std::string& s : wgsl_has) {
        EXPECT_NE(wgsl->wgsl.find(s), std::string::npos) << s << " in\n" << wgsl->wgsl;
      }
    }
    Shape out;
    for (const ir::Expr& e : f->params().back().buffer().shape()) out.push_back(*ir::AsConstInt(e));
    Tensors t;
    t["X"] = Random(NumElements(c.x));
    t["W"] = Random(NumElements(c.w));
    std::vector<std::string> inputs = {"X", "W"};
    const bool nhwc = c.o.nhwc;
    const int64_t f_count = nhwc ? c.w[3] : c.w[0];
    if (c.o.bias) {
      t["bias"] = Random(f_count);
      inputs.push_back("bias");
    }
    t["Y"] = std::vector<float>(NumElements(out));
    Run({*f}, inputs, t, /*differential=*/false);
    const int64_t n = c.x[0], ch = nhwc ? c.x[3] : c.x[1], h = nhwc ? c.x[1] : c.x[2],
                  w = nhwc ? c.x[2] : c.x[3];
    const int64_t kh = nhwc ? c.w[0] : c.w[2], kw = nhwc ? c.w[1] : c.w[3];
    const int64_t cg = ch / c.o.groups, fg = f_count / c.o.groups;
    const int64_t oh = nhwc ? out[1] : out[2], ow = nhwc ? out[2] : out[3];
    auto X = [&](int64_t b, int64_t y, int64_t x, int64_t k) {
      return double(t["X"][nhwc ? ((b * h + y) * w + x) * ch + k : ((b * ch + k) * h + y) * w + x]);
    };
    auto W = [&](int64_t fi, int64_t k, int64_t a, int64_t bb) {
      return double(t["W"][nhwc ? ((a * kw + bb) * cg + k) * f_count + fi
                                : ((fi * cg + k) * kh + a) * kw + bb]);
    };
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t fi = 0; fi < f_count; ++fi) {
        for (int64_t y = 0; y < oh; ++y) {
          for (int64_t x = 0; x < ow; ++x) {
            double sum = 0, mag = 1;
            const int64_t g = fi / fg;
            for (int64_t a = 0; a < kh; ++a) {
              for (int64_t bb = 0; bb < kw; ++bb) {
                const int64_t iy = y * c.o.stride_h + a * c.o.dilation_h - c.o.pad_h;
                const int64_t ix = x * c.o.stride_w + bb * c.o.dilation_w - c.o.pad_w;
                if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                for (int64_t k = 0; k < cg; ++k) {
                  const double p = X(b, iy, ix, g * cg + k) * W(fi, k, a, bb);
                  sum += p;
                  mag += std::fabs(p);
                }
              }
            }
            if (c.o.bias) sum += t["bias"][fi];
            if (!c.o.activation.empty()) sum = RefUnary(c.o.activation, float(sum));
            const int64_t o = nhwc ? ((b * oh + y) * ow + x) * f_count + fi
                                   : ((b * f_count + fi) * oh + y) * ow + x;
            ASSERT_LE(std::fabs(t["Y"][o] - sum), 1e-5 * mag)
                << "Y[" << o << "] = " << t["Y"][o] << ", want " << sum;
          }
        }
      }
    }
  }
};

TEST_F(ConvDeviceTest, DenseAsImplicitGemm) {
  Conv2dOptions o;
  Check({{2, 7, 9, 8}, {3, 3, 8, 20}, o}, true);  // NHWC, ragged tiles
  o.stride_h = 2;
  o.pad_h = o.pad_w = 1;
  o.dilation_w = 2;
  Check({{1, 11, 10, 5}, {3, 2, 5, 33}, o}, true);  // odd channels: lane loads
  o = {};
  o.pad_h = o.pad_w = 1;
  o.bias = TensorType{{64}};
  o.activation = "relu";
  // Whole tiles, epilogue: four channels of a tap are one vector of X.
  Check({{2, 8, 8, 16}, {3, 3, 16, 64}, o}, true,
        {"X : array<vec4<f32>>", "W : array<vec4<f32>>", "Y : array<vec4<f32>>"});
  // Whole rows and filters, ragged k (3 * 3 * 12 = 108): vector stores.
  Check({{1, 16, 8, 12}, {3, 3, 12, 64}, o}, true, {"Y : array<vec4<f32>>"});
  o = {};
  o.nhwc = false;
  o.pad_h = 2;
  o.stride_w = 3;
  Check({{2, 6, 9, 10}, {17, 6, 3, 3}, o}, true);  // NCHW
  o.bias = TensorType{{64}};
  o.stride_w = 1;
  o.pad_h = o.pad_w = 1;
  Check({{1, 4, 8, 16}, {64, 4, 3, 3}, o}, true,
        {"Y : array<vec4<f32>>"});                 // NCHW, vector stores of rows
  Check({{2, 4, 8, 14}, {64, 4, 3, 3}, o}, true);  // rows of 14: scalar stores
}

TEST_F(ConvDeviceTest, GroupsAndDepthwise) {
  Conv2dOptions o;
  o.groups = 2;
  Check({{1, 5, 6, 8}, {3, 3, 4, 32}, o}, true);  // two groups of 16 filters: GEMM
  o.nhwc = false;
  Check({{1, 8, 5, 6}, {32, 4, 3, 3}, o}, true);
  o = {};
  o.groups = 6;
  o.pad_h = o.pad_w = 1;
  Check({{2, 7, 5, 6}, {3, 3, 1, 12}, o}, false);  // depthwise, multiplier 2: direct
  o.nhwc = false;
  o.stride_h = o.stride_w = 2;
  o.bias = TensorType{{12}};
  Check({{2, 6, 7, 5}, {12, 1, 3, 3}, o}, false);
}

TEST_F(ConvDeviceTest, Pooling) {
  for (bool nhwc : {true, false}) {
    for (const char* op : {"max", "avg"}) {
      Pool2dOptions o;
      o.nhwc = nhwc;
      o.kernel_h = 3;
      o.kernel_w = 2;
      o.stride_h = 2;
      o.stride_w = 1;
      o.pad_h = 1;
      o.pad_w = 1;
      const Shape xs = nhwc ? Shape{2, 7, 6, 3} : Shape{2, 3, 7, 6};
      auto f = Pool2d(op, {xs}, target_, o);
      ASSERT_TRUE(f.ok()) << f.status();
      Shape out;
      for (const ir::Expr& e : f->params().back().buffer().shape()) {
        out.push_back(*ir::AsConstInt(e));
      }
      Tensors t;
      t["X"] = Random(NumElements(xs));
      t["X"][5] = -INFINITY;
      t["Y"] = std::vector<float>(NumElements(out));
      Run({*f}, {"X"}, t);
      const int64_t c = 3, h = 7, w = 6, oh = nhwc ? out[1] : out[2], ow = nhwc ? out[2] : out[3];
      for (int64_t b = 0; b < 2; ++b) {
        for (int64_t k = 0; k < c; ++k) {
          for (int64_t y = 0; y < oh; ++y) {
            for (int64_t x = 0; x < ow; ++x) {
              double best = -INFINITY, sum = 0;
              int count = 0;
              for (int64_t a = 0; a < 3; ++a) {
                for (int64_t bb = 0; bb < 2; ++bb) {
                  const int64_t iy = y * 2 + a - 1, ix = x + bb - 1;
                  if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                  const double v = t["X"][nhwc ? ((b * h + iy) * w + ix) * c + k
                                               : ((b * c + k) * h + iy) * w + ix];
                  best = std::max(best, v);
                  sum += v;
                  ++count;
                }
              }
              const double want = std::string(op) == "max" ? best : sum / count;
              const int64_t o =
                  nhwc ? ((b * oh + y) * ow + x) * c + k : ((b * c + k) * oh + y) * ow + x;
              if (std::isinf(want)) {
                EXPECT_EQ(t["Y"][o], want) << op << " Y[" << o << "]";
              } else {
                ASSERT_NEAR(t["Y"][o], want, 1e-5) << op << " Y[" << o << "]";
              }
            }
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Attention

class AttentionDeviceTest : public OpsDeviceTest {
 protected:
  // softmax(Q K^T * scale + mask) V in double precision: Q [batches, sq, d],
  // K and V [batches, sk, d], the result [batches, sq, d].
  static std::vector<double> Expected(const std::vector<float>& q, const std::vector<float>& k,
                                      const std::vector<float>& v, const std::vector<float>* mask,
                                      int64_t batches, int64_t sq, int64_t sk, int64_t d,
                                      const AttentionOptions& o) {
    const double scale = o.scale ? *o.scale : 1.0 / std::sqrt(double(d));
    std::vector<double> out(batches * sq * d);
    for (int64_t b = 0; b < batches; ++b) {
      for (int64_t i = 0; i < sq; ++i) {
        std::vector<double> s(sk);
        double mx = -INFINITY;
        for (int64_t j = 0; j < sk; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < d; ++c) {
            dot += double(q[(b * sq + i) * d + c]) * k[(b * sk + j) * d + c];
          }
          s[j] = dot * scale + (mask ? (*mask)[i * sk + j] : 0.0);
          if (o.causal && j > i) s[j] = -INFINITY;
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (double& x : s) sum += (x = std::isinf(x) ? 0 : std::exp(x - mx));
        for (int64_t c = 0; c < d; ++c) {
          double want = 0;
          for (int64_t j = 0; j < sk; ++j) want += s[j] * v[(b * sk + j) * d + c];
          out[(b * sq + i) * d + c] = want / sum;
        }
      }
    }
    return out;
  }
  // A mask of random values with some keys hidden outright, as a padding
  // mask does.
  std::vector<float> RandomMask(int64_t sq, int64_t sk) {
    std::vector<float> mask = Random(sq * sk, -3, 3);
    for (int64_t j = 0; j < sk; j += 3) mask[j] = -INFINITY;
    return mask;
  }

  void Check(const Shape& qs, int64_t sk, const AttentionOptions& o, bool differential = false) {
    const int64_t sq = qs[qs.size() - 2], d = qs.back();
    Shape ks = qs;
    ks[ks.size() - 2] = sk;
    SCOPED_TRACE(StrCat("Q ", ShapeToString(qs), " K ", ShapeToString(ks),
                        o.causal ? " causal" : "", o.mask ? " masked" : ""));
    auto f = Attention({qs}, {ks}, {ks}, target_, o);
    ASSERT_TRUE(f.ok()) << f.status();
    Tensors t;
    t["Q"] = Random(NumElements(qs), -2, 2);
    t["K"] = Random(NumElements(ks), -2, 2);
    t["V"] = Random(NumElements(ks));
    std::vector<std::string> inputs = {"Q", "K", "V"};
    if (o.mask) {
      t["mask"] = RandomMask(sq, sk);
      inputs.push_back("mask");
    }
    t["O"] = std::vector<float>(NumElements(qs));
    Run({*f}, inputs, t, differential);
    const int64_t batches = NumElements(qs) / (sq * d);
    const std::vector<double> want =
        Expected(t["Q"], t["K"], t["V"], o.mask ? &t["mask"] : nullptr, batches, sq, sk, d, o);
    for (int64_t e = 0; e < NumElements(qs); ++e) {
      ASSERT_NEAR(t["O"][e], want[e], 2e-5 * (1 + std::fabs(want[e])))
          << "O[" << e / (sq * d) << ", " << e / d % sq << ", " << e % d << "]";
    }
  }

  // PackedAttention over QKV [lead..., s, 3 * heads * d], checked against
  // Expected of the heads split apart.
  void CheckPacked(const Shape& lead, int64_t s, int64_t heads, int64_t d,
                   const AttentionOptions& o, bool differential = false) {
    Shape shape = lead;
    shape.push_back(s);
    shape.push_back(3 * heads * d);
    SCOPED_TRACE(StrCat("QKV ", ShapeToString(shape), ", ", heads, " heads",
                        o.causal ? " causal" : "", o.mask ? " masked" : ""));
    auto f = PackedAttention({shape}, heads, target_, o);
    ASSERT_TRUE(f.ok()) << f.status();
    Tensors t;
    t["QKV"] = Random(NumElements(shape), -2, 2);
    std::vector<std::string> inputs = {"QKV"};
    if (o.mask) {
      t["mask"] = RandomMask(s, s);
      inputs.push_back("mask");
    }
    const int64_t rows = NumElements(lead);
    t["O"] = std::vector<float>(rows * s * heads * d);
    Run({*f}, inputs, t, differential);
    // Q, K and V as [rows, heads, s, d].
    std::vector<float> parts[3];
    for (auto& part : parts) part.resize(rows * heads * s * d);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < s; ++i) {
        for (int p = 0; p < 3; ++p) {
          for (int64_t h = 0; h < heads; ++h) {
            for (int64_t c = 0; c < d; ++c) {
              parts[p][((r * heads + h) * s + i) * d + c] =
                  t["QKV"][((r * s + i) * 3 + p) * heads * d + h * d + c];
            }
          }
        }
      }
    }
    const std::vector<double> want = Expected(
        parts[0], parts[1], parts[2], o.mask ? &t["mask"] : nullptr, rows * heads, s, s, d, o);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < s; ++i) {
        for (int64_t h = 0; h < heads; ++h) {
          for (int64_t c = 0; c < d; ++c) {
            const double w = want[((r * heads + h) * s + i) * d + c];
            ASSERT_NEAR(t["O"][((r * s + i) * heads + h) * d + c], w, 2e-5 * (1 + std::fabs(w)))
                << "O[" << r << ", " << i << ", head " << h << ", " << c << "]";
          }
        }
      }
    }
  }
};

// First of the attention tests: CPU drivers (lavapipe) compile this, the
// largest of their kernels, several times slower after the others.
TEST_F(AttentionDeviceTest, HeadDim128) {
  AttentionOptions o;
  o.causal = true;
  Check({1, 1, 33, 128}, 40, o);
}

TEST_F(AttentionDeviceTest, OddLengthsCausalAndMasked) {
  AttentionOptions o;
  Check({2, 3, 70, 32}, 70, o);
  o.causal = true;
  Check({1, 2, 130, 64}, 130, o);
  o = {};
  o.mask = TensorType{{33, 45}};
  Check({2, 33, 16}, 45, o);
  o = {};
  o.scale = 0.25;
  Check({1, 7, 8}, 1, o, /*differential=*/true);
  // Head dims that leave some threads without output columns.
  o = {};
  Check({4097, 4}, 9, o);
  Check({2, 67, 12}, 37, o);
}

TEST_F(AttentionDeviceTest, GivenTiles) {
  AttentionOptions o;
  o.tile = AttentionTile{16, 8};
  o.causal = true;
  Check({1, 45, 16}, 45, o);
  o = {};
  o.tile = AttentionTile{8, 16};
  o.mask = TensorType{{21, 19}};
  Check({21, 12}, 19, o);
  // V's blocks in a buffer of their own (three barriers per block).
  o = {};
  o.tile = AttentionTile{32, 32, true};
  Check({2, 70, 32}, 70, o);
  o.causal = true;
  o.tile = AttentionTile{16, 8, true};
  Check({1, 45, 16}, 33, o);
  o = {};
  o.mask = TensorType{{21, 19}};
  o.tile = AttentionTile{8, 16, true};
  Check({21, 8}, 19, o, /*differential=*/true);
  // The scores' loop over D unrolled (the rule's through Dawn), here on
  // every implementation.
  o = {};
  o.tile = AttentionTile{32, 32, true, true};
  o.causal = true;
  Check({2, 70, 32}, 70, o);
  o = {};
  o.mask = TensorType{{21, 19}};
  o.tile = AttentionTile{8, 16, true, true};
  Check({21, 8}, 19, o, /*differential=*/true);
  // Unrolled without V's own buffer (no rule picks it) at a small D: the CPU
  // drivers take minutes over the unrolled D = 128 of this tile, and the
  // rule's own D = 128 kernel is HeadDim128's.
  o = {};
  o.tile = AttentionTile{16, 16, false, true};
  Check({1, 9, 16}, 33, o);
  // Index arithmetic in u32 (the rule's through Dawn's default mode), with
  // and without V's own buffer, causal, masked and ragged.
  o = {};
  o.tile = AttentionTile{32, 32, true, true, true};
  o.causal = true;
  Check({2, 70, 32}, 70, o);
  o = {};
  o.mask = TensorType{{21, 19}};
  o.tile = AttentionTile{8, 16, false, false, true};
  Check({21, 8}, 19, o, /*differential=*/true);
  o = {};
  o.tile = AttentionTile{16, 8, true, false, true};
  Check({2, 3, 45, 16}, 33, o);
}

TEST_F(AttentionDeviceTest, PackedHeads) {
  AttentionOptions o;
  o.causal = true;
  CheckPacked({2}, 70, 3, 32, o);
  o = {};
  CheckPacked({}, 33, 2, 16, o);
  o.mask = TensorType{{45, 45}};
  CheckPacked({1}, 45, 2, 8, o, /*differential=*/true);
  o.mask.reset();
  CheckPacked({2, 3}, 9, 2, 4, o);
  o = {};
  o.scale = 0.5;
  o.tile = AttentionTile{16, 8, true, true, true};
  CheckPacked({3}, 21, 2, 12, o);
}

TEST_F(AttentionDeviceTest, F16AgainstTheInterpreter) {
  if (!target_.shader_f16) GTEST_SKIP() << "the device has no shader-f16";
  AttentionOptions o;
  o.causal = true;
  auto f =
      Attention({{2, 9, 8}, ir::kF16}, {{2, 9, 8}, ir::kF16}, {{2, 9, 8}, ir::kF16}, target_, o);
  ASSERT_TRUE(f.ok()) << f.status();
  CheckAgainstInterpreter({*f});
  auto packed = PackedAttention({{2, 9, 3 * 2 * 8}, ir::kF16}, 2, target_, o);
  ASSERT_TRUE(packed.ok()) << packed.status();
  CheckAgainstInterpreter({*packed});
}

}  // namespace
}  // namespace kiln::ops
