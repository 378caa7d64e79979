// Reductions over any axes, arg-reductions, softmax, norms, data movement,
// where and cast on a device: each is built for the device's limits,
// compiled, run on fresh random inputs with its outputs poisoned (a NaN bit
// pattern) first, and compared with a plain C++ reference and (where the
// shape is small enough for it) with the interpreter through
// check::RunAndCheck. CTest runs it once per device.
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

#include "kiln/check/check.h"
#include "kiln/codegen/wgsl_codegen.h"
#include "kiln/hal/buffer.h"
#include "kiln/hal/device.h"
#include "kiln/ir/printer.h"
#include "kiln/ops/device_test_fixture.h"
#include "kiln/ops/internal.h"
#include "kiln/ops/ops.h"
#include "kiln/runtime/module.h"
#include "kiln/runtime/test_device.h"

namespace kiln::ops {
namespace {

using runtime::Arg;
using testing::BroadcastSource;
// Every tensor as 32-bit words (f32 or i32).
using Tensors = std::map<std::string, std::vector<uint32_t>>;
constexpr uint32_t kPoison = 0x7fc00000u;  // NaN as f32, 2143289344 as i32
const float kNan = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

std::vector<uint32_t> Words(const std::vector<float>& v) {
  std::vector<uint32_t> w(v.size());
  std::memcpy(w.data(), v.data(), v.size() * 4);
  return w;
}
std::vector<uint32_t> Words(const std::vector<int32_t>& v) {
  std::vector<uint32_t> w(v.size());
  std::memcpy(w.data(), v.data(), v.size() * 4);
  return w;
}
std::vector<float> Floats(const std::vector<uint32_t>& w) {
  std::vector<float> v(w.size());
  std::memcpy(v.data(), w.data(), w.size() * 4);
  return v;
}
std::vector<int32_t> Ints(const std::vector<uint32_t>& w) {
  std::vector<int32_t> v(w.size());
  std::memcpy(v.data(), w.data(), w.size() * 4);
  return v;
}

// Row-major strides of `shape`.
std::vector<int64_t> Strides(const Shape& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) s[d] = s[d + 1] * shape[d + 1];
  return s;
}
std::vector<int64_t> Coords(const Shape& shape, int64_t flat) {
  std::vector<int64_t> c(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    c[d] = flat % shape[d];
    flat /= shape[d];
  }
  return c;
}

class OpsMoreDeviceTest : public testing::OpsDeviceFixture {
 protected:
  // Compiles `f`, uploads `tensors` by parameter name (those not in
  // `inputs` poisoned first), calls it, reads the outputs back, and checks
  // it against the interpreter when `differential`.
  void Run(const ir::Function& f, const std::vector<std::string>& inputs, Tensors& tensors,
           bool differential, uint32_t poison = kPoison) {
    SCOPED_TRACE(ir::Print(f));
    RunInOrder({f}, inputs, tensors, differential, poison);
  }

  // Checks an f16 kernel against the interpreter only, where the device has
  // shader-f16.
  void CheckF16(const StatusOr<ir::Function>& f) {
    ASSERT_TRUE(f.ok()) << f.status();
    CheckAgainstInterpreter({*f});
  }

  static void ExpectNear(const std::vector<float>& got, const std::vector<float>& want,
                         float tolerance, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < want.size(); ++i) {
      if (std::isnan(want[i])) {
        ASSERT_TRUE(std::isnan(got[i])) << what << " [" << i << "]: " << got[i] << " vs NaN";
        continue;
      }
      if (std::isinf(want[i])) {
        ASSERT_EQ(got[i], want[i]) << what << " [" << i << "]";
        continue;
      }
      ASSERT_LE(std::fabs(got[i] - want[i]), tolerance * (1 + std::fabs(want[i])))
          << what << " [" << i << "]: " << got[i] << " vs " << want[i];
    }
  }
};

// The interpreter is slow on large kernels: check it up to this many elements.
constexpr int64_t kDifferentialLimit = 40000;

// ---------------------------------------------------------------------------
// Reductions

struct ReduceCase {
  Shape shape;
  std::vector<int> axes;
};
const ReduceCase kReduceCases[] = {
    {{1}, {0}},          {{7, 33}, {1}},        {{33, 1000}, {1}},    {{1000, 7}, {1}},
    {{1, 4097}, {-1}},   {{33, 1000}, {0}},     {{5, 7, 33}, {0, 2}}, {{4, 5, 6, 7}, {1, 2}},
    {{3, 1000}, {0, 1}}, {{2, 3, 300}, {2, 1}}, {{7, 1, 33}, {1, 2}},
};

// The reference of a reduction over `axes` in double; max/min propagate NaN.
std::vector<float> RefReduce(const std::string& op, const std::vector<float>& x, const Shape& shape,
                             const std::vector<int>& axes_in, Shape* out_shape) {
  std::vector<bool> reduced(shape.size(), false);
  for (int a : axes_in) reduced[a < 0 ? a + shape.size() : a] = true;
  Shape kept;
  int64_t length = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!reduced[d]) kept.push_back(shape[d]);
    if (reduced[d]) length *= shape[d];
  }
  if (kept.empty()) kept.push_back(1);
  *out_shape = kept;
  const int64_t outputs = NumElements(kept);
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> acc(outputs, op == "prod" ? 1.0 : op == "max" ? -inf : op == "min" ? inf : 0);
  for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) {
    std::vector<int64_t> c = Coords(shape, i);
    int64_t o = 0;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (!reduced[d]) o = o * shape[d] + c[d];
    }
    const double v = x[i];
    double& a = acc[o];
    if (op == "sum" || op == "mean") a += v;
    if (op == "prod") a *= v;
    if (op == "max") a = std::isnan(a) || std::isnan(v) ? NAN : std::max(a, v);
    if (op == "min") a = std::isnan(a) || std::isnan(v) ? NAN : std::min(a, v);
  }
  std::vector<float> out(outputs);
  for (int64_t o = 0; o < outputs; ++o) {
    out[o] = static_cast<float>(op == "mean" ? acc[o] / length : acc[o]);
  }
  return out;
}

TEST_F(OpsMoreDeviceTest, ReduceOverAnyAxes) {
  for (std::string_view name : ReduceOpNames()) {
    const std::string op(name);
    for (const ReduceCase& c : kReduceCases) {
      for (bool keepdims : {false, true}) {
        std::string trace = op;
        trace += " " + ShapeToString(c.shape) + " axes";
        for (int a : c.axes) trace += " " + std::to_string(a);
        if (keepdims) trace += " keepdims";
        SCOPED_TRACE(trace);
        auto f = ReduceAxes(op, {c.shape}, c.axes, keepdims, target_);
        ASSERT_TRUE(f.ok()) << f.status();
        const int64_t n = NumElements(c.shape);
        std::vector<float> x = op == "prod" ? Random(n, 0.99f, 1.01f) : Random(n);
        Shape out_shape;
        std::vector<float> want = RefReduce(op, x, c.shape, c.axes, &out_shape);
        Tensors t = {{"X", Words(x)}, {"Y", std::vector<uint32_t>(want.size())}};
        ASSERT_NO_FATAL_FAILURE(Run(*f, {"X"}, t, n <= kDifferentialLimit));
        ExpectNear(Floats(t["Y"]), want, 1e-4f, "Y");
      }
    }
  }
}

// max and min over rows holding NaN, infinities and signed zeros.
TEST_F(OpsMoreDeviceTest, ReduceMaxMinEdgeValues) {
  for (int64_t cols : {7, 1000}) {
    const int64_t rows = 6;
    std::vector<float> x = Random(rows * cols);
    x[0 * cols + cols / 2] = kNan;  // row 0: a NaN in the middle
    x[1 * cols + 0] = kNan;         // row 1: a NaN first
    x[2 * cols + cols - 1] = kInf;  // row 2: +inf last
    x[2 * cols + 1] = -kInf;
    for (int64_t c = 0; c < cols; ++c) {
      x[3 * cols + c] = -kInf;                 // row 3: all -inf
      x[4 * cols + c] = c % 2 ? -0.0f : 0.0f;  // row 4: signed zeros
    }
    x[5 * cols + cols - 1] = kNan;  // row 5: a NaN last
    for (const char* op : {"max", "min"}) {
      SCOPED_TRACE(std::string(op) + " cols " + std::to_string(cols));
      auto f = ReduceAxes(op, {{rows, cols}}, {1}, false, target_);
      ASSERT_TRUE(f.ok()) << f.status();
      Shape out_shape;
      std::vector<float> want = RefReduce(op, x, {rows, cols}, {1}, &out_shape);
      Tensors t = {{"X", Words(x)}, {"Y", std::vector<uint32_t>(rows)}};
      ASSERT_NO_FATAL_FAILURE(Run(*f, {"X"}, t, true));
      ExpectNear(Floats(t["Y"]), want, 0.0f, "Y");
    }
  }
}

// The 2-D Reduce takes the same kernels: a workgroup per row for long rows.
TEST_F(OpsMoreDeviceTest, ReduceLongRowsCooperatively) {
  auto f = Reduce("sum", {{3, 100000}}, false, target_);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_NE(ir::Print(*f).find("workgroup_barrier"), std::string::npos) << ir::Print(*f);
  std::vector<float> x = Random(300000);
  Shape out_shape;
  std::vector<float> want = RefReduce("sum", x, {3, 100000}, {1}, &out_shape);
  Tensors t = {{"X", Words(x)}, {"Y", std::vector<uint32_t>(3)}};
  ASSERT_NO_FATAL_FAILURE(Run(*f, {"X"}, t, false));
  // 100000 f32 terms in [-1, 1], each thread summing about 390 of them in
  // order: the rounding error of f32 summation is about 2e-4 here, so 1e-3
  // (not the 1e-4 of short rows) keeps the check about ten deviations wide.
  ExpectNear(Floats(t["Y"]), want, 1e-3f, "Y");
}

// ---------------------------------------------------------------------------
// Arg-reductions

template <typename T>
std::vector<int32_t> RefArg(bool is_max, const std::vector<T>& x, const Shape& shape, int axis) {
  Shape out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (static_cast<int>(d) != axis) out.push_back(shape[d]);
  }
  if (out.empty()) out.push_back(1);
  const std::vector<int64_t> st = Strides(shape);
  std::vector<int32_t> res(NumElements(out));
  for (int64_t o = 0; o < NumElements(out); ++o) {
    // The input offset of element 0 along the axis.
    int64_t rem = o, base = 0;
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      if (d == axis) continue;
      base += (rem % shape[d]) * st[d];
      rem /= shape[d];
    }
    int32_t best = 0;
    for (int64_t k = 1; k < shape[axis]; ++k) {
      const T v = x[base + k * st[axis]], b = x[base + best * st[axis]];
      if (std::isnan(b)) break;
      if (std::isnan(v) || (is_max ? v > b : v < b)) best = static_cast<int32_t>(k);
    }
    res[o] = best;
  }
  return res;
}

TEST_F(OpsMoreDeviceTest, ArgMaxArgMin) {
  struct Case {
    Shape shape;
    int axis;
  };
  const Case cases[] = {{{1, 1}, 1},    {{7, 33}, 1},    {{33, 1000}, -1}, {{2, 4097}, 1},
                        {{1000, 7}, 1}, {{33, 7, 5}, 1}, {{300, 3}, 0},    {{1000}, 0}};
  for (const Case& c : cases) {
    for (std::string_view name : ArgReduceOpNames()) {
      const std::string op(name);
      for (bool ties : {false, true}) {
        SCOPED_TRACE(op + " " + ShapeToString(c.shape) + " axis " + std::to_string(c.axis) +
                     (ties ? " ties" : ""));
        auto f = ArgReduce(op, {c.shape}, c.axis, false, target_);
        ASSERT_TRUE(f.ok()) << f.status();
        const int64_t n = NumElements(c.shape);
        std::vector<float> x = Random(n);
        // Few distinct values: ties everywhere, the first must win.
        if (ties) {
          for (float& v : x) v = std::round(v * 2);
        }
        const int axis = c.axis < 0 ? c.axis + static_cast<int>(c.shape.size()) : c.axis;
        std::vector<int32_t> want = RefArg(op == "argmax", x, c.shape, axis);
        Tensors t = {{"X", Words(x)}, {"Y", std::vector<uint32_t>(want.size())}};
        ASSERT_NO_FATAL_FAILURE(Run(*f, {"X"}, t, n <= kDifferentialLimit));
        EXPECT_EQ(Ints(t["Y"]), want);
      }
    }
  }
}

TEST_F(OpsMoreDeviceTest, ArgMaxArgMinEdgeValues) {
  for (int64_t cols : {7, 1000}) {
    const int64_t rows = 5;
    std::vector<float> x = Random(rows * cols);
    x[0 * cols + cols - 1] = kNan;  // row 0: NaN last
    x[0 * cols + cols / 2] = kNan;  // and in the middle: the first NaN wins
    x[1 * cols + 3] = kInf;         // row 1: +inf and -inf
    x[1 * cols + 5] = -kInf;
    for (int64_t c = 0; c < cols; ++c) {
      x[2 * cols + c] = -kInf;                 // row 2: all -inf
      x[3 * cols + c] = c % 2 ? -0.0f : 0.0f;  // row 3: +0 and -0 tie
      x[4 * cols + c] = kInf;                  // row 4: all +inf
    }
    for (std::string_view name : ArgReduceOpNames()) {
      const std::string op(name);
      SCOPED_TRACE(op + " cols " + std::to_string(cols));
      auto f = ArgReduce(op, {{rows, cols}}, 1, true, target_);
      ASSERT_TRUE(f.ok()) << f.status();
      std::vector<int32_t> want = RefArg(op == "argmax", x, {rows, cols}, 1);
      Tensors t = {{"X", Words(x)}, {"Y", std::vector<uint32_t>(rows)}};
      ASSERT_NO_FATAL_FAILURE(Run(*f, {"X"}, t, true));
      EXPECT_EQ(Ints(t["Y"]), want);
    }
  }
}

// ---------------------------------------------------------------------------
// Softmax and log-softmax

TEST_F(OpsMoreDeviceTest, SoftmaxAndLogSoftmaxAlongAnAxis) {
  struct Case {
    Shape shape;
    int axis;
  };
  const Case cases[] = {{{1, 1}, 1},
                        {{7, 33}, 1},
                        {{33, 1000}, -1},
                        {{2, 4097}, 1},
                        {{1000, 7}, 1},
                        {{33, 1000}, 0},
                        {{5, 300, 3}, 1},
                        {{1000}, 0},
                        {{4, 5, 6, 7}, 2},
                        // Four adjacent elements per thread and step (rows of a
                        // multiple of 4, at least 4 per thread), whole and ragged.
                        {{3, 1024}, 1},
                        {{2, 4100}, -1}};
  for (const Case& c : cases) {
    for (bool log : {false, true}) {
      SCOPED_TRACE(std::string(log ? "log_softmax " : "softmax ") + ShapeToString(c.shape) +
                   " axis " + std::to_string(c.axis));
      auto f =
          log ? LogSoftmax({c.shape}, c.axis, target_) : SoftmaxAxis({c.shape}, c.axis, target_);
      ASSERT_TRUE(f.ok()) << f.status();
      const int64_t n = NumElements(c.shape);
      // Large inputs: without the maximum subtracted, exp would overflow.
      std::vector<float> x = Random(n, -50, 100);
      const int axis = c.axis < 0 ? c.axis + static_cast<int>(c.shape.size()) : c.axis;
      const std::vector<int64_t> st = Strides(c.shape);
      std::vector<float> want(n);
      for (int64_t i = 0; i < n; ++i) {
        std::vector<int64_t> co = Coords(c.shape, i);
        if (co[axis] != 0) continue;  // once per row, from its first element
        double mx = -INFINITY, sum = 0;
        for (int64_t k = 0; k < c.shape[axis]; ++k) mx = std::max<double>(mx, x[i + k * st[axis]]);
        for (int64_t k = 0; k < c.shape[axis]; ++k) sum += std::exp(x[i + k * st[axis]] - mx);
        for (int64_t k = 0; k < c.shape[axis]; ++k) {
          const double v = x[i + k * st[axis]] - mx;
          want[i + k * st[axis]] = static_cast<float>(log ? v - std::log(sum) : std::exp(v) / sum);
        }
      }
      Tensors t = {{"X", Words(x)}, {"Y", std::vector<uint32_t>(n)}};
      ASSERT_NO_FATAL_FAILURE(Run(*f, {"X"}, t, n <= kDifferentialLimit));
      ExpectNear(Floats(t["Y"]), want, 1e-5f, "Y");
    }
  }
}

// Rows holding NaN or infinities give numpy's softmax at every row length,
// the long rows' vectorized rule included: NaN for a row with NaN (wherever
// it is) or +inf, or with only -inf; -inf beside finite values gets weight
// 0 (-inf under log_softmax).
TEST_F(OpsMoreDeviceTest, SoftmaxOfRowsWithNanOrInfinities) {
  for (int64_t length : {int64_t{1}, int64_t{2}, int64_t{300}, int64_t{4096}}) {
    const int64_t rows = 8;
    std::vector<float> x = Random(rows * length, -3, 3);
    auto at = [&](int64_t r, int64_t k) -> float& { return x[r * length + (k % length)]; };
    at(0, length / 2) = kNan;                               // a NaN in the middle
    at(1, 0) = kNan;                                        // a NaN first
    at(2, length - 1) = kInf;                               // +inf last
    for (int64_t k = 0; k < length; ++k) at(3, k) = -kInf;  // only -inf
    at(4, 1) = -kInf;                                       // -inf beside finite values
    at(5, 0) = kNan;                                        // NaN and +inf
    at(5, length - 1) = kInf;
    for (int64_t k = 0; k < length; ++k) at(6, k) = kNan;  // only NaN
    at(7, length - 1) = kNan;                              // -inf and NaN
    at(7, 0) = -kInf;
    for (bool log : {false, true}) {
      SCOPED_TRACE(std::string(log ? "log_softmax [" : "softmax [") + std::to_string(length) + "]");
      auto f = log ? LogSoftmax({{rows, length}}, 1, target_)
                   : SoftmaxAxis({{rows, length}}, 1, target_);
      ASSERT_TRUE(f.ok()) << f.status();
      Tensors t = {{"X", Words(x)}, {"Y", std::vector<uint32_t>(rows * length)}};
      ASSERT_NO_FATAL_FAILURE(Run(*f, {"X"}, t, rows * length <= kDifferentialLimit));
      const std::vector<float> y = Floats(t["Y"]);
      for (int64_t r = 0; r < rows; ++r) {
        // IEEE arithmetic in double, the maximum propagating NaN: numpy's.
        double m = -INFINITY, sum = 0;
        for (int64_t k = 0; k < length; ++k) {
          const double v = x[r * length + k];
          m = std::isnan(v) || std::isnan(m) ? NAN : std::max(m, v);
        }
        for (int64_t k = 0; k < length; ++k) sum += std::exp(x[r * length + k] - m);
        for (int64_t k = 0; k < length; ++k) {
          const double v = x[r * length + k] - m;
          const double want = log ? v - std::log(sum) : std::exp(v) / sum;
          const float got = y[r * length + k];
          if (std::isnan(want) || std::isinf(want)) {
            EXPECT_TRUE(std::isnan(want) ? std::isnan(got) : got == want)
                << "row " << r << " [" << k << "]: " << got << ", numpy " << want;
          } else {
            EXPECT_NEAR(got, want, 1e-5 * (1 + std::fabs(want))) << "row " << r << " [" << k << "]";
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Norms

// Rows of a multiple of 4 with at least four elements per thread: Y is
// written (and X read for it) four adjacent elements at a time.
TEST_F(OpsMoreDeviceTest, LongRowsTakeFourElementsPerThread) {
  for (auto f : {SoftmaxAxis({{3, 1024}}, 1, target_), LayerNorm({{3, 1024}}, 1e-5, target_)}) {
    ASSERT_TRUE(f.ok()) << f.status();
    auto wgsl = codegen::CompileFunction(*f, check::CompileOptionsFor(*device_));
    ASSERT_TRUE(wgsl.ok()) << wgsl.status();
    EXPECT_NE(wgsl->wgsl.find("Y : array<vec4<f32>>"), std::string::npos) << wgsl->wgsl;
  }
  // Rows of 1000 (not four per thread of 256) keep one element per step.
  auto f = SoftmaxAxis({{3, 1000}}, 1, target_);
  ASSERT_TRUE(f.ok()) << f.status();
  auto wgsl = codegen::CompileFunction(*f, check::CompileOptionsFor(*device_));
  ASSERT_TRUE(wgsl.ok()) << wgsl.status();
  EXPECT_NE(wgsl->wgsl.find("Y : array<f32>"), std::string::npos) << wgsl->wgsl;
}

TEST_F(OpsMoreDeviceTest, LayerNormAndRmsNorm) {
  const Shape shapes[] = {{1, 1},      {7, 33}, {33, 1000}, {2, 4097}, {1000, 7},
                          {2, 3, 100}, {1000},  {3, 1024},  {2, 4100}};
  for (const Shape& shape : shapes) {
    for (bool rms : {false, true}) {
      SCOPED_TRACE(std::string(rms ? "rms_norm " : "layer_norm ") + ShapeToString(shape));
      const double eps = 1e-5;
      auto f = rms ? RmsNorm({shape}, eps, target_) : LayerNorm({shape}, eps, target_);
      ASSERT_TRUE(f.ok()) << f.status();
      const int64_t n = NumElements(shape), d = shape.back();
      // An offset mean: a one-pass variance would lose it to cancellation.
      std::vector<float> x = Random(n, 99.0f, 101.0f);
      std::vector<float> gamma = Random(d), beta = Random(d);
      std::vector<float> want(n);
      for (int64_t r = 0; r < n / d; ++r) {
        const float* row = x.data() + r * d;
        double mean = 0, var = 0;
        if (!rms) {
          for (int64_t k = 0; k < d; ++k) mean += row[k];
          mean /= d;
        }
        for (int64_t k = 0; k < d; ++k) var += (row[k] - mean) * (row[k] - mean);
        const double rstd = 1.0 / std::sqrt(var / d + eps);
        for (int64_t k = 0; k < d; ++k) {
          want[r * d + k] =
              static_cast<float>((row[k] - mean) * rstd * gamma[k] + (rms ? 0 : beta[k]));
        }
      }
      Tensors t = {{"X", Words(x)}, {"Gamma", Words(gamma)}, {"Y", std::vector<uint32_t>(n)}};
      if (!rms) t["Beta"] = Words(beta);
      ASSERT_NO_FATAL_FAILURE(Run(*f, {"X", "Gamma", "Beta"}, t, n <= kDifferentialLimit));
      // d = 1 under layer_norm: x - mean is 0 exactly, Y = Beta.
      ExpectNear(Floats(t["Y"]), want, rms ? 1e-5f : 2e-3f, "Y");
    }
  }
}

// A row of equal values has zero deviation: layer norm gives Beta exactly
// with any eps > 0 (the mean is the value itself, not a sum times f32(1 / D)
// an ulp off, which the tiny eps would magnify towards +-1) and NaN with eps
// 0 (0 / 0, as numpy).
TEST_F(OpsMoreDeviceTest, LayerNormOfConstantRowsIsBeta) {
  for (int64_t d : {7, 33, 1000, 4097}) {
    for (double eps : {1e-12, 0.0}) {
      SCOPED_TRACE(::testing::Message() << "d " << d << ", eps " << eps);
      auto f = LayerNorm({{4, d}}, eps, target_);
      ASSERT_TRUE(f.ok()) << f.status();
      const float values[] = {100.0f, 0.1f, 3.0f, -7.25e6f};
      std::vector<float> x;
      for (float v : values) x.insert(x.end(), d, v);
      std::vector<float> gamma = Random(d), beta = Random(d);
      Tensors t = {{"X", Words(x)},
                   {"Gamma", Words(gamma)},
                   {"Beta", Words(beta)},
                   {"Y", std::vector<uint32_t>(4 * d)}};
      ASSERT_NO_FATAL_FAILURE(Run(*f, {"X", "Gamma", "Beta"}, t, false));
      const std::vector<float> y = Floats(t["Y"]);
      for (int64_t r = 0; r < 4; ++r) {
        for (int64_t k = 0; k < d; ++k) {
          const float got = y[r * d + k];
          if (eps > 0 ? got != beta[k] : !std::isnan(got)) {
            ADD_FAILURE() << "row of " << values[r] << ", column " << k << ": " << got << ", want "
                          << (eps > 0 ? beta[k] : kNan);
            break;
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// The two combines of the cooperative kernels: subgroup operations where the
// device has subgroups, the shared-memory tree elsewhere (and on request, on
// a device with subgroups too).

struct Combine {
  std::string name;
  Target target;
};

// Whether the kernel's compiled metadata lists the subgroups feature.
bool NeedsSubgroups(const hal::Device& device, const ir::Function& f) {
  auto compiled = codegen::CompileModule(ir::Module{{f}}, check::CompileOptionsFor(device));
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  if (!compiled.ok()) return false;
  const auto& features = compiled->functions[0].metadata.required_features;
  return std::find(features.begin(), features.end(), "subgroups") != features.end();
}

class OpsCombineDeviceTest : public OpsMoreDeviceTest {
 protected:
  std::vector<Combine> Combines() const {
    Target tree = target_;
    tree.subgroups = false;
    std::vector<Combine> out = {{"tree", tree}};
    if (device_->HasFeature(hal::Feature::kSubgroups)) out.push_back({"subgroups", target_});
    return out;
  }
  // Rows with NaN (first, in the middle, last), infinities and signed zeros
  // in the first rows, as many as there are.
  static void AddEdgeValues(std::vector<float>& x, int64_t rows, int64_t cols) {
    if (rows > 0) x[cols / 2] = kNan;
    if (rows > 1) x[cols] = kNan;
    if (rows > 2) {
      x[2 * cols + cols - 1] = kInf;
      x[2 * cols] = -kInf;
    }
    if (rows > 3) {
      for (int64_t c = 0; c < cols; ++c) x[3 * cols + c] = c % 2 ? -0.0f : 0.0f;
    }
    if (rows > 4) x[4 * cols + cols - 1] = kNan;
  }
};

// Rows and columns of 1, 7, 33, 1000 and 4097.
const Shape kCombineShapes[] = {{1, 1},    {7, 1},    {1, 33}, {7, 1000}, {33, 4097}, {1000, 33},
                                {4097, 7}, {1, 4097}, {33, 7}, {5, 1000}, {2, 4096}};

TEST_F(OpsCombineDeviceTest, ReductionsOnBothCombines) {
  for (const Combine& combine : Combines()) {
    for (const Shape& shape : kCombineShapes) {
      for (std::string_view name : ReduceOpNames()) {
        const std::string op(name);
        SCOPED_TRACE(combine.name + " " + op + " " + ShapeToString(shape));
        auto f = ReduceAxes(op, {shape}, {1}, false, combine.target);
        ASSERT_TRUE(f.ok()) << f.status();
        // The subgroup combine where it was asked for, on cooperative
        // kernels (prod through shuffles).
        const bool cooperative = ir::Print(*f).find("workgroup_barrier") != std::string::npos;
        EXPECT_EQ(NeedsSubgroups(*device_, *f), combine.target.subgroups && cooperative);
        const int64_t rows = shape[0], cols = shape[1], n = rows * cols;
        std::vector<float> x = op == "prod" ? Random(n, 0.99f, 1.01f) : Random(n);
        if (op == "max" || op == "min") AddEdgeValues(x, rows, cols);
        Shape out_shape;
        std::vector<float> want = RefReduce(op, x, shape, {1}, &out_shape);
        Tensors t = {{"X", Words(x)}, {"Y", std::vector<uint32_t>(rows)}};
        ASSERT_NO_FATAL_FAILURE(Run(*f, {"X"}, t, n <= kDifferentialLimit));
        ExpectNear(Floats(t["Y"]), want, op == "max" || op == "min" ? 0.0f : 1e-4f, "Y");
      }
    }
  }
}

TEST_F(OpsCombineDeviceTest, ArgReductionsOnBothCombines) {
  for (const Combine& combine : Combines()) {
    for (const Shape& shape : kCombineShapes) {
      for (std::string_view name : ArgReduceOpNames()) {
        const std::string op(name);
        SCOPED_TRACE(combine.name + " " + op + " " + ShapeToString(shape));
        auto f = ArgReduce(op, {shape}, 1, false, combine.target);
        ASSERT_TRUE(f.ok()) << f.status();
        const bool cooperative = ir::Print(*f).find("workgroup_barrier") != std::string::npos;
        EXPECT_EQ(NeedsSubgroups(*device_, *f), combine.target.subgroups && cooperative);
        const int64_t rows = shape[0], cols = shape[1], n = rows * cols;
        // Few distinct values (ties across threads), and the edge values.
        std::vector<float> x = Random(n);
        for (float& v : x) v = std::round(v * 2);
        AddEdgeValues(x, rows, cols);
        std::vector<int32_t> want = RefArg(op == "argmax", x, shape, 1);
        Tensors t = {{"X", Words(x)}, {"Y", std::vector<uint32_t>(rows)}};
        ASSERT_NO_FATAL_FAILURE(Run(*f, {"X"}, t, n <= kDifferentialLimit));
        EXPECT_EQ(Ints(t["Y"]), want);
      }
    }
  }
}

TEST_F(OpsCombineDeviceTest, SoftmaxAndNormsOnBothCombines) {
  for (const Combine& combine : Combines()) {
    for (const Shape& shape : kCombineShapes) {
      const int64_t rows = shape[0], cols = shape[1], n = rows * cols;
      for (const char* op : {"softmax", "log_softmax", "layer_norm", "rms_norm"}) {
        const std::string name(op);
        SCOPED_TRACE(combine.name + " " + name + " " + ShapeToString(shape));
        const bool norm = name == "layer_norm" || name == "rms_norm";
        auto f = name == "softmax"       ? SoftmaxAxis({shape}, 1, combine.target)
                 : name == "log_softmax" ? LogSoftmax({shape}, 1, combine.target)
                 : name == "layer_norm"  ? LayerNorm({shape}, 1e-5, combine.target)
                                         : RmsNorm({shape}, 1e-5, combine.target);
        ASSERT_TRUE(f.ok()) << f.status();
        const bool cooperative = ir::Print(*f).find("workgroup_barrier") != std::string::npos;
        EXPECT_EQ(NeedsSubgroups(*device_, *f), combine.target.subgroups && cooperative);
        std::vector<float> x = norm ? Random(n, 99.0f, 101.0f) : Random(n, -50, 100);
        std::vector<float> gamma = Random(cols), beta = Random(cols);
        // A NaN in a row makes the whole row NaN (rows of one element
        // left out: there softmax gives 1 and log-softmax 0 on both
        // combines, x - max folding to 0).
        if (rows > 1 && cols > 1 && !norm) x[cols + cols / 2] = kNan;
        std::vector<float> want(n);
        for (int64_t r = 0; r < rows; ++r) {
          const float* row = x.data() + r * cols;
          double mx = -INFINITY, sum = 0, mean = 0, var = 0, total = 0;
          bool nan = false;
          for (int64_t k = 0; k < cols; ++k) {
            nan |= std::isnan(row[k]);
            mx = std::max<double>(mx, row[k]);
            sum += row[k];
          }
          mean = name == "rms_norm" ? 0.0 : sum / cols;
          for (int64_t k = 0; k < cols; ++k) {
            var += (row[k] - mean) * (row[k] - mean);
            total += std::exp(row[k] - mx);
          }
          for (int64_t k = 0; k < cols; ++k) {
            double v;
            if (norm) {
              v = (row[k] - mean) / std::sqrt(var / cols + 1e-5) * gamma[k] +
                  (name == "layer_norm" ? beta[k] : 0.0);
            } else {
              v = name == "softmax" ? std::exp(row[k] - mx) / total : row[k] - mx - std::log(total);
            }
            want[r * cols + k] = nan ? kNan : static_cast<float>(v);
          }
        }
        Tensors t = {{"X", Words(x)}, {"Y", std::vector<uint32_t>(n)}};
        if (norm) t["Gamma"] = Words(gamma);
        if (name == "layer_norm") t["Beta"] = Words(beta);
        ASSERT_NO_FATAL_FAILURE(Run(*f, {"X", "Gamma", "Beta"}, t, n <= kDifferentialLimit));
        ExpectNear(Floats(t["Y"]), want, name == "layer_norm" ? 2e-3f : 1e-5f, "Y");
      }
    }
  }
}

// A kernel built for subgroups loads on a device without them as
// unavailable, and a call says which feature is missing.
TEST_F(OpsCombineDeviceTest, SubgroupKernelsNeedTheFeature) {
  Target sg = target_;
  sg.subgroups = true;
  auto f = ReduceAxes("sum", {{7, 1000}}, {1}, false, sg);
  ASSERT_TRUE(f.ok()) << f.status();
  auto loaded = Load({*f});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto kernel = (*loaded)->Find(f->name());
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  if (device_->HasFeature(hal::Feature::kSubgroups)) {
    EXPECT_TRUE((*kernel)->availability().ok()) << (*kernel)->availability();
    return;
  }
  const Status& why = (*kernel)->availability();
  ASSERT_FALSE(why.ok());
  EXPECT_NE(why.message().find("'subgroups'"), std::string::npos) << why;
  auto x = device_->allocator().Allocate(7000 * 4);
  auto y = device_->allocator().Allocate(7 * 4);
  ASSERT_TRUE(x.ok() && y.ok());
  const std::vector<Arg> args = {Arg::Buffer(*x), Arg::Buffer(*y)};
  Status called = (*kernel)->Call(args);
  EXPECT_FALSE(called.ok());
  EXPECT_NE(called.message().find("'subgroups'"), std::string::npos) << called;
}

// ---------------------------------------------------------------------------
// Data movement, where and cast

TEST_F(OpsMoreDeviceTest, Permute) {
  struct Case {
    Shape shape;
    std::vector<int> perm;
  };
  const Case cases[] = {{{1}, {0}},
                        {{7, 33}, {1, 0}},
                        {{33, 1000}, {1, 0}},
                        {{5, 7, 33}, {2, 0, 1}},
                        {{3, 1, 5, 7}, {3, 2, 1, 0}},
                        {{4097, 3}, {1, 0}}};
  for (const Case& c : cases) {
    for (bool ints : {false, true}) {
      SCOPED_TRACE(ShapeToString(c.shape) + (ints ? " i32" : " f32"));
      auto f = Permute({c.shape, ints ? ir::kI32 : ir::kF32}, c.perm, target_);
      ASSERT_TRUE(f.ok()) << f.status();
      const int64_t n = NumElements(c.shape);
      Shape out(c.shape.size());
      for (size_t d = 0; d < out.size(); ++d) out[d] = c.shape[c.perm[d]];
      std::vector<uint32_t> x = ints ? Words(RandomInts(n, -1000000, 1000000)) : Words(Random(n));
      const std::vector<int64_t> st = Strides(c.shape);
      std::vector<uint32_t> want(n);
      for (int64_t i = 0; i < n; ++i) {
        std::vector<int64_t> co = Coords(out, i);
        int64_t src = 0;
        for (size_t d = 0; d < out.size(); ++d) src += co[d] * st[c.perm[d]];
        want[i] = x[src];
      }
      Tensors t = {{"X", x}, {"Y", std::vector<uint32_t>(n)}};
      ASSERT_NO_FATAL_FAILURE(Run(*f, {"X"}, t, n <= kDifferentialLimit));
      EXPECT_EQ(t["Y"], want);
    }
  }
}

TEST_F(OpsMoreDeviceTest, ReshapeCopies) {
  struct Case {
    Shape in, shape;
  };
  const Case cases[] = {{{7, 33}, {33, 7}},
                        {{1000}, {8, -1, 5}},
                        {{2, 3, 4, 5}, {120}},
                        {{1}, {1, 1, 1, 1}},
                        {{4097}, {17, 241}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(ShapeToString(c.in) + " to " + ShapeToString(c.shape));
    auto f = Reshape({c.in}, c.shape, target_);
    ASSERT_TRUE(f.ok()) << f.status();
    const int64_t n = NumElements(c.in);
    std::vector<uint32_t> x = Words(Random(n));
    Tensors t = {{"X", x}, {"Y", std::vector<uint32_t>(n)}};
    ASSERT_NO_FATAL_FAILURE(Run(*f, {"X"}, t, true));
    EXPECT_EQ(t["Y"], x);
  }
}

TEST_F(OpsMoreDeviceTest, Concat) {
  struct Case {
    std::vector<Shape> shapes;
    int axis;
  };
  const Case cases[] = {{{{7, 33}, {7, 1}, {7, 1000}}, 1},
                        {{{1}, {1}}, 0},
                        {{{3, 5}, {1, 5}, {33, 5}, {2, 5}}, -2},
                        {{{2, 3, 4}, {2, 5, 4}}, 1},
                        {{{4097}, {7}}, 0}};
  for (const Case& c : cases) {
    SCOPED_TRACE(ShapeToString(c.shapes[0]) + " axis " + std::to_string(c.axis));
    std::vector<TensorType> types;
    for (const Shape& s : c.shapes) types.push_back({s});
    auto f = Concat(types, c.axis, target_);
    ASSERT_TRUE(f.ok()) << f.status();
    const int rank = static_cast<int>(c.shapes[0].size());
    const int axis = c.axis < 0 ? c.axis + rank : c.axis;
    Shape out = c.shapes[0];
    out[axis] = 0;
    for (const Shape& s : c.shapes) out[axis] += s[axis];
    Tensors t;
    std::vector<std::string> inputs;
    for (size_t k = 0; k < c.shapes.size(); ++k) {
      t["X" + std::to_string(k)] = Words(Random(NumElements(c.shapes[k])));
      inputs.push_back("X" + std::to_string(k));
    }
    const int64_t n = NumElements(out);
    std::vector<uint32_t> want(n);
    for (int64_t i = 0; i < n; ++i) {
      std::vector<int64_t> co = Coords(out, i);
      size_t k = 0;
      while (co[axis] >= c.shapes[k][axis]) co[axis] -= c.shapes[k++][axis];
      int64_t src = 0;
      const std::vector<int64_t> st = Strides(c.shapes[k]);
      for (int d = 0; d < rank; ++d) src += co[d] * st[d];
      want[i] = t["X" + std::to_string(k)][src];
    }
    t["Y"] = std::vector<uint32_t>(n);
    ASSERT_NO_FATAL_FAILURE(Run(*f, inputs, t, true));
    EXPECT_EQ(t["Y"], want);
  }
}

TEST_F(OpsMoreDeviceTest, SliceWithNegativeSteps) {
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  struct Case {
    Shape shape;
    std::vector<int64_t> starts, stops, steps;
  };
  const Case cases[] = {
      {{1000}, {3}, {kMax}, {7}},
      {{1000}, {-1}, {kMin}, {-1}},
      {{7, 33}, {1, -2}, {6, 0}, {2, -3}},
      {{33, 1000}, {0, 999}, {33, 1}, {1, -33}},
      {{5, 4, 3, 2}, {-100, 3, 2, 0}, {100, kMin, kMin, 2}, {2, -1, -2, 1}},
      {{4097}, {4096}, {-4098}, {-4}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(ShapeToString(c.shape));
    auto f = Slice({c.shape}, c.starts, c.stops, c.steps, target_);
    ASSERT_TRUE(f.ok()) << f.status();
    // The reference enumerates Python's slice indices per axis.
    const int rank = static_cast<int>(c.shape.size());
    std::vector<std::vector<int64_t>> picks(rank);
    Shape out(rank);
    for (int d = 0; d < rank; ++d) {
      const int64_t n = c.shape[d], step = c.steps[d];
      int64_t start = c.starts[d], stop = c.stops[d];
      auto clampv = [&](int64_t v) {
        if (v < 0) v = v < -n ? (step < 0 ? -1 : 0) : v + n;
        if (v >= n) v = step < 0 ? n - 1 : n;
        return v;
      };
      start = clampv(start);
      stop = clampv(stop);
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) picks[d].push_back(i);
      out[d] = static_cast<int64_t>(picks[d].size());
    }
    const int64_t n = NumElements(out);
    std::vector<uint32_t> x = Words(Random(NumElements(c.shape)));
    const std::vector<int64_t> st = Strides(c.shape);
    std::vector<uint32_t> want(n);
    for (int64_t i = 0; i < n; ++i) {
      std::vector<int64_t> co = Coords(out, i);
      int64_t src = 0;
      for (int d = 0; d < rank; ++d) src += picks[d][co[d]] * st[d];
      want[i] = x[src];
    }
    Tensors t = {{"X", x}, {"Y", std::vector<uint32_t>(n)}};
    ASSERT_NO_FATAL_FAILURE(Run(*f, {"X"}, t, true));
    EXPECT_EQ(t["Y"], want);
  }
}

TEST_F(OpsMoreDeviceTest, GatherClampsIndices) {
  struct Case {
    int64_t vocab, dim;
    Shape indices;
  };
  const Case cases[] = {
      {1, 1, {1}}, {1000, 33, {7}}, {50, 7, {3, 5}}, {33, 1000, {2, 2, 3}}, {4097, 4, {300}}};
  for (const Case& c : cases) {
    for (bool ints : {false, true}) {
      SCOPED_TRACE(std::to_string(c.vocab) + "x" + std::to_string(c.dim) + " by " +
                   ShapeToString(c.indices) + (ints ? " i32" : ""));
      auto f =
          Gather({{c.vocab, c.dim}, ints ? ir::kI32 : ir::kF32}, {c.indices, ir::kI32}, target_);
      ASSERT_TRUE(f.ok()) << f.status();
      const int64_t m = NumElements(c.indices), n = m * c.dim;
      // Out-of-range indices too: below 0 and at or beyond V.
      std::vector<int32_t> idx = RandomInts(m, -3, static_cast<int32_t>(c.vocab) + 2);
      idx[0] = std::numeric_limits<int32_t>::min();
      if (m > 1) idx[1] = std::numeric_limits<int32_t>::max();
      std::vector<uint32_t> table =
          ints ? Words(RandomInts(c.vocab * c.dim, -99, 99)) : Words(Random(c.vocab * c.dim));
      std::vector<uint32_t> want(n);
      for (int64_t i = 0; i < m; ++i) {
        const int64_t row = std::clamp<int64_t>(idx[i], 0, c.vocab - 1);
        for (int64_t d = 0; d < c.dim; ++d) want[i * c.dim + d] = table[row * c.dim + d];
      }
      Tensors t = {{"Table", table}, {"Indices", Words(idx)}, {"Y", std::vector<uint32_t>(n)}};
      ASSERT_NO_FATAL_FAILURE(
          Run(*f, {"Table", "Indices"}, t, c.vocab * c.dim <= kDifferentialLimit));
      EXPECT_EQ(t["Y"], want);
    }
  }
}

TEST_F(OpsMoreDeviceTest, PadWithAConstant) {
  struct Case {
    Shape shape;
    std::vector<int64_t> before, after;
  };
  const Case cases[] = {{{1}, {0}, {0}},
                        {{1}, {3}, {1}},
                        {{7, 33}, {1, 0}, {2, 31}},
                        {{5, 1, 3, 7}, {0, 2, 1, 0}, {1, 0, 1, 3}},
                        {{4097}, {5}, {0}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(ShapeToString(c.shape));
    auto f = Pad({c.shape}, c.before, c.after, -2.5, target_);
    ASSERT_TRUE(f.ok()) << f.status();
    const int rank = static_cast<int>(c.shape.size());
    Shape out(rank);
    for (int d = 0; d < rank; ++d) out[d] = c.shape[d] + c.before[d] + c.after[d];
    const int64_t n = NumElements(out);
    std::vector<float> x = Random(NumElements(c.shape));
    const std::vector<int64_t> st = Strides(c.shape);
    std::vector<float> want(n);
    for (int64_t i = 0; i < n; ++i) {
      std::vector<int64_t> co = Coords(out, i);
      bool inside = true;
      int64_t src = 0;
      for (int d = 0; d < rank; ++d) {
        const int64_t k = co[d] - c.before[d];
        inside = inside && k >= 0 && k < c.shape[d];
        src += k * st[d];
      }
      want[i] = inside ? x[src] : -2.5f;
    }
    Tensors t = {{"X", Words(x)}, {"Y", std::vector<uint32_t>(n)}};
    ASSERT_NO_FATAL_FAILURE(Run(*f, {"X"}, t, true));
    EXPECT_EQ(t["Y"], Words(want));
  }
}

TEST_F(OpsMoreDeviceTest, WhereBroadcasts) {
  struct Case {
    Shape cond, a, b;
    bool int_cond;
  };
  const Case cases[] = {{{7, 1}, {1, 33}, {33}, true},
                        {{1000}, {1000}, {1}, false},
                        {{1}, {5, 7}, {5, 7}, true},
                        {{3, 1, 5}, {4, 1}, {1, 5}, false}};
  for (const Case& c : cases) {
    SCOPED_TRACE(ShapeToString(c.cond) + ShapeToString(c.a) + ShapeToString(c.b));
    auto f = Where({c.cond, c.int_cond ? ir::kI32 : ir::kF32}, {c.a}, {c.b}, target_);
    ASSERT_TRUE(f.ok()) << f.status();
    Shape out = *BroadcastShapes(c.cond, *BroadcastShapes(c.a, c.b));
    const int64_t n = NumElements(out);
    std::vector<int32_t> ci = RandomInts(NumElements(c.cond), -1, 1);
    std::vector<float> cf(ci.begin(), ci.end());
    if (!c.int_cond && cf.size() > 2) {
      cf[0] = kNan;   // NaN counts as true
      cf[1] = -0.0f;  // -0 as false
    }
    std::vector<float> a = Random(NumElements(c.a)), b = Random(NumElements(c.b));
    std::vector<float> want(n);
    for (int64_t i = 0; i < n; ++i) {
      auto src = [&](const Shape& s) { return BroadcastSource(s, out, i); };
      const bool cond = c.int_cond ? ci[src(c.cond)] != 0 : cf[src(c.cond)] != 0.0f;
      want[i] = cond ? a[src(c.a)] : b[src(c.b)];
    }
    Tensors t = {{"Cond", c.int_cond ? Words(ci) : Words(cf)},
                 {"A", Words(a)},
                 {"B", Words(b)},
                 {"C", std::vector<uint32_t>(n)}};
    ASSERT_NO_FATAL_FAILURE(Run(*f, {"Cond", "A", "B"}, t, true));
    EXPECT_EQ(t["C"], Words(want));
  }
}

// f32 to i32 by the IR's rule: truncated toward zero, saturated (at the
// largest f32 below 2^31), NaN giving 0.
int32_t RefToInt(float v) {
  return std::isnan(v)         ? 0
         : v >= 2147483520.0f  ? 2147483520
         : v <= -2147483648.0f ? INT32_MIN
                               : static_cast<int32_t>(v);
}

TEST_F(OpsMoreDeviceTest, CastF32AndI32) {
  std::vector<float> x = Random(1000, -3e9f, 3e9f);
  x[0] = kNan;
  x[1] = kInf;
  x[2] = -kInf;
  x[3] = -2.7f;
  x[4] = 2.7f;
  auto to_int = Cast({{1000}}, ir::kI32, target_);
  ASSERT_TRUE(to_int.ok()) << to_int.status();
  std::vector<int32_t> want(1000);
  for (int i = 0; i < 1000; ++i) want[i] = RefToInt(x[i]);
  Tensors t = {{"X", Words(x)}, {"Y", std::vector<uint32_t>(1000)}};
  ASSERT_NO_FATAL_FAILURE(Run(*to_int, {"X"}, t, true));
  EXPECT_EQ(Ints(t["Y"]), want);

  std::vector<int32_t> xi = RandomInts(33, -16777216, 16777216);
  auto to_float = Cast({{33}, ir::kI32}, ir::kF32, target_);
  ASSERT_TRUE(to_float.ok()) << to_float.status();
  Tensors u = {{"X", Words(xi)}, {"Y", std::vector<uint32_t>(33)}};
  ASSERT_NO_FATAL_FAILURE(Run(*to_float, {"X"}, u, true));
  EXPECT_EQ(Floats(u["Y"]), std::vector<float>(xi.begin(), xi.end()));
}

// f32 to u32 by the IR's rule: truncated toward zero, saturated at 0 and
// at the largest f32 below 2^32, NaN giving 0.
uint32_t RefToUnsigned(float v) {
  return std::isnan(v) || v <= 0.0f ? 0u
         : v >= 4294967040.0f       ? 4294967040u
                                    : static_cast<uint32_t>(v);
}

TEST_F(OpsMoreDeviceTest, CastU32) {
  // f32 to u32, every edge of the rule.
  std::vector<float> x = Random(1000, -5e9f, 5e9f);
  const float edges[] = {kNan, kInf,          -kInf,         -2.7f,         2.7f,       -0.0f,
                         0.5f, 4294967040.0f, 4294967296.0f, 2147483648.0f, 16777217.0f};
  std::copy(std::begin(edges), std::end(edges), x.begin());
  auto to_unsigned = Cast({{1000}}, ir::kU32, target_);
  ASSERT_TRUE(to_unsigned.ok()) << to_unsigned.status();
  std::vector<uint32_t> want(1000);
  for (int i = 0; i < 1000; ++i) want[i] = RefToUnsigned(x[i]);
  Tensors t = {{"X", Words(x)}, {"Y", std::vector<uint32_t>(1000)}};
  ASSERT_NO_FATAL_FAILURE(Run(*to_unsigned, {"X"}, t, true));
  EXPECT_EQ(t["Y"], want);

  // u32 to f32: exact below 2^24 and at powers of two; otherwise one of the
  // two nearest floats (WGSL leaves the rounding direction open).
  const std::vector<int32_t> bits = RandomInts(1000, INT32_MIN, INT32_MAX);
  const std::vector<int32_t> shifts = RandomInts(1000, 0, 31);
  std::vector<uint32_t> u(1000);
  for (int i = 0; i < 1000; ++i) u[i] = static_cast<uint32_t>(bits[i]) >> shifts[i];
  u[0] = 0xFFFFFFFFu;
  u[1] = 0x80000000u;
  u[2] = 0;
  u[3] = 16777215u;
  auto to_float = Cast({{1000}, ir::kU32}, ir::kF32, target_);
  ASSERT_TRUE(to_float.ok()) << to_float.status();
  Tensors f = {{"X", u}, {"Y", std::vector<uint32_t>(1000)}};
  ASSERT_NO_FATAL_FAILURE(Run(*to_float, {"X"}, f, false));
  const std::vector<float> got = Floats(f["Y"]);
  for (int i = 0; i < 1000; ++i) {
    const double exact = u[i];
    const float lo = static_cast<float>(exact), hi = std::nextafter(lo, INFINITY);
    const float below = static_cast<double>(lo) > exact ? std::nextafter(lo, 0.0f) : lo;
    const float above = static_cast<double>(lo) < exact ? hi : lo;
    ASSERT_TRUE(got[i] == below || got[i] == above) << u[i] << " gave " << got[i];
  }

  // i32 and u32 keep their bits both ways.
  std::vector<int32_t> xi = RandomInts(33, INT32_MIN, INT32_MAX);
  xi[0] = INT32_MIN;
  xi[1] = -1;
  for (const auto& [from, to] : {std::pair{ir::kI32, ir::kU32}, std::pair{ir::kU32, ir::kI32}}) {
    auto same_bits = Cast({{33}, from}, to, target_);
    ASSERT_TRUE(same_bits.ok()) << same_bits.status();
    Tensors b = {{"X", Words(xi)}, {"Y", std::vector<uint32_t>(33)}};
    ASSERT_NO_FATAL_FAILURE(Run(*same_bits, {"X"}, b, true));
    EXPECT_EQ(b["Y"], Words(xi));
  }
}

TEST_F(OpsMoreDeviceTest, UnpackAndPackBytes) {
  // Bytes packed four to a word, the first in the low bits: unpacked to i32
  // (sign- or zero-extended), and i32 values packed back (their low bytes,
  // the last word's unused bytes 0); n not a multiple of 4 too.
  for (const int64_t n : {int64_t{1}, int64_t{7}, int64_t{4}, int64_t{4099}}) {
    SCOPED_TRACE(n);
    const int64_t words = (n + 3) / 4;
    const std::vector<int32_t> packed = RandomInts(words, INT32_MIN, INT32_MAX);
    for (const ir::DataType dtype : {ir::kI8, ir::kU8}) {
      auto unpack = UnpackBytes({{n}, dtype}, target_);
      ASSERT_TRUE(unpack.ok()) << unpack.status();
      std::vector<int32_t> want(n);
      for (int64_t i = 0; i < n; ++i) {
        const auto byte =
            static_cast<uint8_t>(static_cast<uint32_t>(packed[i / 4]) >> (8 * (i % 4)));
        want[i] = dtype == ir::kI8 ? static_cast<int8_t>(byte) : byte;
      }
      Tensors t = {{"X", Words(packed)}, {"Y", std::vector<uint32_t>(n)}};
      ASSERT_NO_FATAL_FAILURE(Run(*unpack, {"X"}, t, n <= kDifferentialLimit));
      EXPECT_EQ(Ints(t["Y"]), want) << dtype.ToString();
    }
    const std::vector<int32_t> values = RandomInts(n, INT32_MIN, INT32_MAX);
    auto pack = PackBytes({n}, target_);
    ASSERT_TRUE(pack.ok()) << pack.status();
    std::vector<uint32_t> want(words, 0);
    for (int64_t i = 0; i < n; ++i) {
      want[i / 4] |= (static_cast<uint32_t>(values[i]) & 0xFFu) << (8 * (i % 4));
    }
    Tensors t = {{"X", Words(values)}, {"Y", std::vector<uint32_t>(words)}};
    ASSERT_NO_FATAL_FAILURE(Run(*pack, {"X"}, t, n <= kDifferentialLimit));
    EXPECT_EQ(t["Y"], want);
  }
}

// ---------------------------------------------------------------------------
// Integer, comparison and ternary elementwise ops

// The IR's i32 arithmetic (docs/ir.md): wrapping, x / 0 == x, MIN / -1 ==
// MIN, shift amounts modulo 32, arithmetic shift right.
int32_t RefInt(const std::string& op, int32_t a, int32_t b = 0) {
  const auto ua = static_cast<uint32_t>(a), ub = static_cast<uint32_t>(b);
  const auto wrap = [](uint32_t v) { return static_cast<int32_t>(v); };
  if (op == "neg") return wrap(0u - ua);
  if (op == "abs") return a < 0 ? wrap(0u - ua) : a;
  if (op == "relu") return std::max(a, 0);
  if (op == "sign") return a > 0 ? 1 : a < 0 ? -1 : 0;
  if (op == "square") return wrap(ua * ua);
  if (op == "bitwise_not") return wrap(~ua);
  if (op == "popcount") return std::popcount(ua);
  if (op == "add") return wrap(ua + ub);
  if (op == "sub") return wrap(ua - ub);
  if (op == "mul") return wrap(ua * ub);
  if (op == "div") return b == 0 ? a : (a == INT32_MIN && b == -1) ? INT32_MIN : a / b;
  if (op == "floor_div" || op == "floor_mod") {
    if (b == 0) return op == "floor_div" ? a : 0;
    if (b == -1) return op == "floor_div" ? wrap(0u - ua) : 0;
    int32_t q = a / b, r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) {
      --q;
      r += b;
    }
    return op == "floor_div" ? q : r;
  }
  if (op == "max") return std::max(a, b);
  if (op == "min") return std::min(a, b);
  if (op == "bitwise_and") return wrap(ua & ub);
  if (op == "bitwise_or") return wrap(ua | ub);
  if (op == "bitwise_xor") return wrap(ua ^ ub);
  if (op == "shift_left") return wrap(ua << (ub & 31));
  if (op == "shift_right") return a >> (ub & 31);
  if (op == "pow") {
    if (b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) != 0 ? -1 : 1) : 0;
    uint32_t r = 1, base = ua;
    for (uint32_t e = ub; e != 0; e >>= 1, base *= base) {
      if ((e & 1) != 0) r *= base;
    }
    return wrap(r);
  }
  ADD_FAILURE() << "no i32 reference for " << op;
  return 0;
}

template <typename T>
int32_t RefCompare(const std::string& op, T a, T b) {
  if (op == "eq") return a == b;
  if (op == "ne") return a != b;
  if (op == "lt") return a < b;
  if (op == "le") return a <= b;
  if (op == "gt") return a > b;
  if (op == "ge") return a >= b;
  ADD_FAILURE() << "no reference for " << op;
  return 0;
}

// numpy's clip: min(max(x, lo), hi), NaN anywhere giving NaN.
float RefClamp(float x, float lo, float hi) {
  if (std::isnan(x) || std::isnan(lo) || std::isnan(hi)) return kNan;
  return std::min(std::max(x, lo), hi);
}

const std::pair<Shape, Shape> kIntPairs[] = {
    {{7, 1}, {1, 33}}, {{1000}, {1000}}, {{1}, {7}},           {{3, 1, 5, 1}, {4, 1, 7}},
    {{1027}, {1027}},  {{64, 33}, {33}}, {{5, 1, 64}, {7, 1}}, {{4096}, {1}},
};

// Shift amounts, divisors and exponents are drawn small, so that 0, 31, 32
// and negative amounts come often.
bool SmallSecondOperand(const std::string& op) {
  return op == "shift_left" || op == "shift_right" || op == "div" || op == "floor_div" ||
         op == "floor_mod" || op == "pow";
}

class ElementwiseTypesDeviceTest : public OpsMoreDeviceTest {
 protected:
  // The unary op over `a`, or the binary op or comparison over `a` and `b`,
  // on `dtype` tensors.
  StatusOr<ir::Function> UnaryOrBinary(const std::string& op, bool unary, const Shape& a,
                                       const Shape& b, ir::DataType dtype) {
    return unary ? Elementwise(op, {{a, dtype}}, target_)
                 : Elementwise(op, {{a, dtype}, {b, dtype}}, target_);
  }
  // Random i32 values over the whole range, with the edges placed first.
  std::vector<int32_t> EdgyInts(int64_t n, bool small) {
    std::vector<int32_t> v = small ? RandomInts(n, -40, 40) : RandomInts(n, INT32_MIN, INT32_MAX);
    const int32_t edges[] = {INT32_MIN, INT32_MAX, 0, -1, 1, 31, 32, 33};
    for (size_t k = 0; k < std::size(edges) && k < v.size(); ++k) v[k] = edges[k];
    return v;
  }
  // Random floats with NaN, infinities, signed zeros and ties placed first.
  std::vector<float> EdgyFloats(int64_t n) {
    std::vector<float> v = Random(n, -2.0f, 2.0f);
    const float edges[] = {kNan, kInf, -kInf, -0.0f, 0.0f, 1.0f, -1.0f};
    // Consecutive positions from a third of the way in (distinct for any
    // size of at least 7; fewer edges fit smaller tensors).
    for (size_t k = 0; k < std::size(edges) && k < v.size(); ++k) {
      v[(n / 3 + k) % v.size()] = edges[k];
    }
    return v;
  }
};

TEST_F(ElementwiseTypesDeviceTest, IntegerOps) {
  std::vector<std::string_view> ops;
  for (const auto* names : {&UnaryOpNames(), &BinaryOpNames()}) {
    for (std::string_view op : *names) {
      if (ElementwiseOpTakes(op, ir::kI32)) ops.push_back(op);
    }
  }
  ASSERT_EQ(ops.size(), 21u);  // 7 unary, 14 binary
  for (std::string_view name : ops) {
    const std::string op(name);
    const bool unary =
        std::find(UnaryOpNames().begin(), UnaryOpNames().end(), name) != UnaryOpNames().end();
    for (const auto& [sa, sb] : kIntPairs) {
      if (unary && sb.size() > 1) continue;
      const Shape a_shape = sa, b_shape = unary ? sa : sb;
      SCOPED_TRACE(op + " " + ShapeToString(a_shape) + " " + ShapeToString(b_shape));
      auto f = UnaryOrBinary(op, unary, a_shape, b_shape, ir::kI32);
      ASSERT_TRUE(f.ok()) << f.status();
      const Shape out = unary ? a_shape : *BroadcastShapes(a_shape, b_shape);
      const int64_t n = NumElements(out);
      const bool small_b = SmallSecondOperand(op);
      std::vector<int32_t> a = EdgyInts(NumElements(a_shape), false);
      std::vector<int32_t> b = EdgyInts(NumElements(b_shape), small_b);
      // Output 0 reads element 0 of both: INT_MIN (EdgyInts' first) with
      // -1, for every pair of shapes.
      if (small_b) b[0] = -1;
      std::vector<int32_t> want(n);
      for (int64_t k = 0; k < n; ++k) {
        want[k] = unary ? RefInt(op, a[k])
                        : RefInt(op, a[BroadcastSource(a_shape, out, k)],
                                 b[BroadcastSource(b_shape, out, k)]);
      }
      Tensors t = unary
                      ? Tensors{{"X", Words(a)}, {"Y", std::vector<uint32_t>(n)}}
                      : Tensors{{"A", Words(a)}, {"B", Words(b)}, {"C", std::vector<uint32_t>(n)}};
      const bool differential = n <= kDifferentialLimit;
      ASSERT_NO_FATAL_FAILURE(
          Run(*f, unary ? std::vector<std::string>{"X"} : std::vector<std::string>{"A", "B"}, t,
              differential));
      EXPECT_EQ(Ints(t[unary ? "Y" : "C"]), want);
    }
  }
}

TEST_F(ElementwiseTypesDeviceTest, Comparisons) {
  for (std::string_view name : CompareOpNames()) {
    const std::string op(name);
    for (const auto& [sa, sb] : kIntPairs) {
      for (ir::DataType dtype : {ir::kF32, ir::kI32}) {
        SCOPED_TRACE(op + " " + dtype.ToString() + " " + ShapeToString(sa) + " " +
                     ShapeToString(sb));
        auto f = Elementwise(op, {{sa, dtype}, {sb, dtype}}, target_);
        ASSERT_TRUE(f.ok()) << f.status();
        const Shape out = *BroadcastShapes(sa, sb);
        const int64_t n = NumElements(out);
        std::vector<int32_t> want(n);
        Tensors t = {{"C", std::vector<uint32_t>(n)}};
        if (dtype == ir::kF32) {
          // Few distinct values, so that equal pairs are common.
          std::vector<float> a = EdgyFloats(NumElements(sa)), b = EdgyFloats(NumElements(sb));
          for (float& v : a) v = std::isfinite(v) ? std::round(v * 2) / 2 : v;
          for (float& v : b) v = std::isfinite(v) ? std::round(v * 2) / 2 : v;
          for (int64_t k = 0; k < n; ++k) {
            want[k] =
                RefCompare(op, a[BroadcastSource(sa, out, k)], b[BroadcastSource(sb, out, k)]);
          }
          t["A"] = Words(a);
          t["B"] = Words(b);
        } else {
          std::vector<int32_t> a = EdgyInts(NumElements(sa), true),
                               b = EdgyInts(NumElements(sb), true);
          for (int64_t k = 0; k < n; ++k) {
            want[k] =
                RefCompare(op, a[BroadcastSource(sa, out, k)], b[BroadcastSource(sb, out, k)]);
          }
          t["A"] = Words(a);
          t["B"] = Words(b);
        }
        ASSERT_NO_FATAL_FAILURE(Run(*f, {"A", "B"}, t, n <= kDifferentialLimit));
        EXPECT_EQ(Ints(t["C"]), want);
      }
    }
  }
}

// sign, square, reciprocal and the predicates at every float edge (NaN,
// infinities, signed zeros, the largest and smallest normal floats), as
// numpy gives them: sign(-0.0) is +0.0 and sign(NaN) NaN; a predicate is
// i32 1 or 0. Then f16 against the interpreter.
TEST_F(ElementwiseTypesDeviceTest, SignSquareReciprocalAndPredicates) {
  const float big = std::numeric_limits<float>::max(), tiny = std::numeric_limits<float>::min();
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{4097}}) {
    std::vector<float> x = EdgyFloats(n);
    const float more[] = {big, -big, tiny, -tiny, 1e20f, -3.0f};
    for (size_t k = 0; k < std::size(more) && k + 7 < x.size(); ++k)
      x[(n / 3 + 7 + k) % n] = more[k];
    for (std::string_view name : {"sign", "square", "reciprocal", "isnan", "isinf", "isfinite"}) {
      const std::string op(name);
      SCOPED_TRACE(op + " [" + std::to_string(n) + "]");
      auto f = Elementwise(op, {{{n}, ir::kF32}}, target_);
      ASSERT_TRUE(f.ok()) << f.status();
      Tensors t = {{"X", Words(x)}, {"Y", std::vector<uint32_t>(n)}};
      ASSERT_NO_FATAL_FAILURE(Run(*f, {"X"}, t, n <= kDifferentialLimit));
      const bool predicate = op.starts_with("is");
      for (int64_t k = 0; k < n; ++k) {
        const float v = x[k];
        if (predicate) {
          const int32_t want = op == "isnan"   ? std::isnan(v)
                               : op == "isinf" ? std::isinf(v)
                                               : std::isfinite(v);
          EXPECT_EQ(Ints(t["Y"])[k], want) << op << "(" << v << ")";
          continue;
        }
        const float got = Floats(t["Y"])[k];
        const float want = op == "sign"     ? (std::isnan(v) ? v
                                               : v > 0       ? 1.0f
                                               : v < 0       ? -1.0f
                                                             : 0.0f)
                           : op == "square" ? v * v
                                            : 1.0f / v;
        // sign and square are exact; the reciprocal within WGSL's 2.5 ulp,
        // its zeros and infinities (of 1 / +-inf, 1 / +-0) of either sign,
        // and a subnormal one (of 1 / FLT_MAX) 0 where the device flushes
        // subnormals (the H200 does): the device's (docs/ir.md, "Numerics").
        const bool same = (std::isnan(want) && std::isnan(got)) ||
                          (got == want && std::signbit(got) == std::signbit(want)) ||
                          (op == "reciprocal" && (std::isinf(want) || want == 0) &&
                           std::fabs(got) == std::fabs(want)) ||
                          (op == "reciprocal" && std::fabs(want) < tiny && got == 0) ||
                          (op == "reciprocal" && std::isfinite(want) && want != 0 &&
                           std::fabs(got - want) <= 3e-7f * std::fabs(want));
        EXPECT_TRUE(same) << op << "(" << v << "): " << got << ", numpy " << want;
      }
    }
  }
}

TEST_F(ElementwiseTypesDeviceTest, SignSquareReciprocalAndPredicatesInF16) {
  if (!target_.shader_f16) GTEST_SKIP() << "the device has no shader-f16";
  for (std::string_view op : {"sign", "square", "reciprocal", "isnan", "isinf", "isfinite"}) {
    SCOPED_TRACE(op);
    ASSERT_NO_FATAL_FAILURE(CheckF16(Elementwise(op, {{{1000}, ir::kF16}}, target_)));
  }
}

TEST_F(ElementwiseTypesDeviceTest, ClampAndFma) {
  struct Case {
    Shape x, lo, hi;
  };
  const Case cases[] = {{{1000}, {1000}, {1000}},
                        {{7, 33}, {33}, {7, 1}},
                        {{1}, {5, 1}, {1, 7}},
                        {{4099}, {1}, {1}},
                        {{5, 1, 64}, {7, 1}, {64}}};
  for (const Case& c : cases) {
    const Shape out = *BroadcastShapes(c.x, *BroadcastShapes(c.lo, c.hi));
    const int64_t n = NumElements(out);
    SCOPED_TRACE(ShapeToString(c.x) + ShapeToString(c.lo) + ShapeToString(c.hi));
    const bool differential = n <= kDifferentialLimit;
    {  // clamp f32: NaN in any operand, bounds crossed (lo > hi gives hi).
      auto f = Elementwise("clamp", {{c.x}, {c.lo}, {c.hi}}, target_);
      ASSERT_TRUE(f.ok()) << f.status();
      std::vector<float> x = EdgyFloats(NumElements(c.x));
      std::vector<float> lo = Random(NumElements(c.lo), -1.5f, 0.5f);
      std::vector<float> hi = Random(NumElements(c.hi), -0.5f, 1.5f);
      if (lo.size() > 3) lo[3] = kNan;
      if (hi.size() > 5) hi[5] = kNan;
      std::vector<float> want(n);
      for (int64_t k = 0; k < n; ++k) {
        want[k] = RefClamp(x[BroadcastSource(c.x, out, k)], lo[BroadcastSource(c.lo, out, k)],
                           hi[BroadcastSource(c.hi, out, k)]);
      }
      Tensors t = {
          {"X", Words(x)}, {"Lo", Words(lo)}, {"Hi", Words(hi)}, {"Y", std::vector<uint32_t>(n)}};
      ASSERT_NO_FATAL_FAILURE(Run(*f, {"X", "Lo", "Hi"}, t, differential));
      EXPECT_EQ(t["Y"], Words(want));  // exact: clamp selects one of its operands
    }
    {  // clamp i32
      auto f = Elementwise("clamp", {{c.x, ir::kI32}, {c.lo, ir::kI32}, {c.hi, ir::kI32}}, target_);
      ASSERT_TRUE(f.ok()) << f.status();
      std::vector<int32_t> x = EdgyInts(NumElements(c.x), false);
      std::vector<int32_t> lo = RandomInts(NumElements(c.lo), -1000, 100);
      std::vector<int32_t> hi = RandomInts(NumElements(c.hi), -100, 1000);
      std::vector<int32_t> want(n);
      for (int64_t k = 0; k < n; ++k) {
        want[k] =
            std::min(std::max(x[BroadcastSource(c.x, out, k)], lo[BroadcastSource(c.lo, out, k)]),
                     hi[BroadcastSource(c.hi, out, k)]);
      }
      Tensors t = {
          {"X", Words(x)}, {"Lo", Words(lo)}, {"Hi", Words(hi)}, {"Y", std::vector<uint32_t>(n)}};
      ASSERT_NO_FATAL_FAILURE(Run(*f, {"X", "Lo", "Hi"}, t, differential));
      EXPECT_EQ(Ints(t["Y"]), want);
    }
    {  // fma: fused or not, within f32's rounding of the terms
      auto f = Elementwise("fma", {{c.x}, {c.lo}, {c.hi}}, target_);
      ASSERT_TRUE(f.ok()) << f.status();
      std::vector<float> a = Random(NumElements(c.x)), b = Random(NumElements(c.lo), -3, 3),
                         d = Random(NumElements(c.hi));
      std::vector<float> want(n);
      for (int64_t k = 0; k < n; ++k) {
        want[k] = static_cast<float>(double(a[BroadcastSource(c.x, out, k)]) *
                                         b[BroadcastSource(c.lo, out, k)] +
                                     d[BroadcastSource(c.hi, out, k)]);
      }
      Tensors t = {
          {"A", Words(a)}, {"B", Words(b)}, {"C", Words(d)}, {"Y", std::vector<uint32_t>(n)}};
      ASSERT_NO_FATAL_FAILURE(Run(*f, {"A", "B", "C"}, t, differential));
      ExpectNear(Floats(t["Y"]), want, 1e-6f, "Y");
    }
  }
}

// A chain through a comparison: |x - b| > 0.5 as 0 or 1, then i32 steps,
// one kernel, exact.
TEST_F(ElementwiseTypesDeviceTest, ChainThroughAComparison) {
  for (const Shape& shape : {Shape{7, 33}, Shape{3, 4099}, Shape{1, 1}}) {
    SCOPED_TRACE(ShapeToString(shape));
    const int64_t rows = shape[0], cols = shape[1], n = rows * cols;
    auto f = ElementwiseChain(
        {shape},
        {ChainStep::With("sub", {{cols}}), ChainStep::Unary("abs"),
         ChainStep::WithConstant("gt", 0.5), ChainStep::With("shift_left", {{rows, 1}, ir::kI32}),
         ChainStep::WithConstant("add", 1)},
        target_);
    ASSERT_TRUE(f.ok()) << f.status();
    std::vector<float> x = EdgyFloats(n), b = Random(cols);
    std::vector<int32_t> s = RandomInts(rows, 0, 33);
    std::vector<int32_t> want(n);
    for (int64_t i = 0; i < n; ++i) {
      const bool gt = std::fabs(x[i] - b[i % cols]) > 0.5f;  // false for NaN
      want[i] = RefInt("add", RefInt("shift_left", gt ? 1 : 0, s[i / cols]), 1);
    }
    Tensors t = {
        {"X", Words(x)}, {"B1", Words(b)}, {"B4", Words(s)}, {"Y", std::vector<uint32_t>(n)}};
    ASSERT_NO_FATAL_FAILURE(Run(*f, {"X", "B1", "B4"}, t, n <= 4000));
    EXPECT_EQ(Ints(t["Y"]), want);
  }
}

// A float divided by a constant zero is an infinity or NaN as in IEEE 754
// (x / +-0 == x * +-inf, floor_div likewise, floor_mod NaN), on vector and
// scalar paths, rather than whatever a driver's fast math folds it to.
TEST_F(ElementwiseTypesDeviceTest, FloatDivisionByAConstantZero) {
  for (const Shape& shape : {Shape{4, 16}, Shape{1027}, Shape{9}}) {
    const int64_t n = NumElements(shape);
    for (const char* op : {"div", "floor_div", "floor_mod"}) {
      for (double zero : {0.0, -0.0}) {
        SCOPED_TRACE(std::string(op) + " by " + (std::signbit(zero) ? "-0" : "+0") + " " +
                     ShapeToString(shape));
        auto f = ElementwiseChain({shape}, {ChainStep::WithConstant(op, zero)}, target_);
        ASSERT_TRUE(f.ok()) << f.status();
        std::vector<float> x = EdgyFloats(n);
        std::vector<float> want(n);
        const float inf = std::signbit(zero) ? -kInf : kInf;
        for (int64_t i = 0; i < n; ++i) {
          want[i] = std::string_view(op) == "floor_mod" ? kNan : x[i] * inf;
        }
        Tensors t = {{"X", Words(x)}, {"Y", std::vector<uint32_t>(n)}};
        // Poisoned with 7.0, not NaN: the expected values are NaN.
        ASSERT_NO_FATAL_FAILURE(Run(*f, {"X"}, t, true, 0x40e00000u));
        std::vector<float> got = Floats(t["Y"]);
        for (int64_t i = 0; i < n; ++i) {
          if (std::isnan(want[i])) {
            ASSERT_TRUE(std::isnan(got[i])) << "[" << i << "] x=" << x[i] << ": " << got[i];
          } else {
            ASSERT_EQ(got[i], want[i]) << "[" << i << "] x=" << x[i];
          }
        }
      }
    }
  }
}

// Arithmetic with a constant zero operand keeps IEEE 754's results: x * 0
// is NaN for a NaN or infinite x and a signed zero otherwise, -0 + 0 is
// +0, 0 - x is -x but +0 for +0, 0 / x is NaN for a zero x; on vector and
// scalar paths, the zero's sign included, rather than a driver's folding.
TEST_F(ElementwiseTypesDeviceTest, FloatArithmeticWithAConstantZero) {
  struct Case {
    const char* op;
    double zero;
    bool zero_first;
  };
  const std::vector<Case> cases = {
      {"mul", 0.0, false}, {"mul", -0.0, false}, {"mul", 0.0, true},      {"mul", -0.0, true},
      {"add", 0.0, false}, {"add", 0.0, true},   {"sub", -0.0, false},    {"sub", 0.0, true},
      {"div", 0.0, true},  {"div", -0.0, true},  {"floor_div", 0.0, true}};
  auto reference = [](const Case& c, float x) {
    const float z = static_cast<float>(c.zero);
    const std::string_view op = c.op;
    if (op == "mul") return x * z;
    if (op == "add") return x + z;
    if (op == "sub") return c.zero_first ? z - x : x - z;
    const float q = z / x;
    return op == "div" ? q : std::floor(q);
  };
  for (const Shape& shape : {Shape{4, 16}, Shape{1027}, Shape{9}}) {
    const int64_t n = NumElements(shape);
    for (const Case& c : cases) {
      const std::string zero = std::signbit(c.zero) ? "-0" : "0";
      SCOPED_TRACE(
          (c.zero_first ? zero + " " + c.op + " x " : "x " + std::string(c.op) + " " + zero + " ") +
          ShapeToString(shape));
      auto f =
          ElementwiseChain({shape}, {ChainStep::WithConstant(c.op, c.zero, c.zero_first)}, target_);
      ASSERT_TRUE(f.ok()) << f.status();
      std::vector<float> x = EdgyFloats(n);
      Tensors t = {{"X", Words(x)}, {"Y", std::vector<uint32_t>(n)}};
      ASSERT_NO_FATAL_FAILURE(Run(*f, {"X"}, t, true, 0x40e00000u));
      std::vector<float> got = Floats(t["Y"]);
      for (int64_t i = 0; i < n; ++i) {
        const float want = reference(c, x[i]);
        if (std::isnan(want)) {
          ASSERT_TRUE(std::isnan(got[i])) << "[" << i << "] x=" << x[i] << ": " << got[i];
        } else {
          ASSERT_EQ(got[i], want) << "[" << i << "] x=" << x[i];
          ASSERT_EQ(std::signbit(got[i]), std::signbit(want)) << "[" << i << "] x=" << x[i];
        }
      }
    }
  }
}

// Reductions and arg-reductions over i32: in i32, sums and products
// wrapping, compared exactly.
// An integer reduction over `axes`, in T (i32 or u32): sums and products
// wrapping, max and min in T's order; the results' bits.
template <typename T>
std::vector<uint32_t> RefIntegerReduce(const std::string& op, const std::vector<T>& x,
                                       const Shape& shape, const std::vector<int>& axes) {
  // (RefReduce of as many floats gives the output's shape.)
  Shape out_shape;
  RefReduce("sum", std::vector<float>(x.size()), shape, axes, &out_shape);
  std::vector<bool> reduced(shape.size(), false);
  for (int a : axes) reduced[a < 0 ? a + shape.size() : a] = true;
  std::vector<T> acc(NumElements(out_shape), op == "prod" ? 1 : 0);
  std::vector<bool> seen(acc.size(), false);
  for (size_t i = 0; i < x.size(); ++i) {
    std::vector<int64_t> co = Coords(shape, static_cast<int64_t>(i));
    int64_t o = 0;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (!reduced[d]) o = o * shape[d] + co[d];
    }
    const auto wrap = [](uint32_t v) { return static_cast<T>(v); };
    const auto bits = [](T v) { return static_cast<uint32_t>(v); };
    if (op == "sum") acc[o] = wrap(bits(acc[o]) + bits(x[i]));
    if (op == "prod") acc[o] = wrap(bits(acc[o]) * bits(x[i]));
    if (op == "max") acc[o] = !seen[o] ? x[i] : std::max(acc[o], x[i]);
    if (op == "min") acc[o] = !seen[o] ? x[i] : std::min(acc[o], x[i]);
    seen[o] = true;
  }
  return std::vector<uint32_t>(acc.begin(), acc.end());
}

TEST_F(ElementwiseTypesDeviceTest, IntegerReductions) {
  for (const char* op : {"sum", "max", "min", "prod"}) {
    for (const ReduceCase& c : kReduceCases) {
      for (bool keepdims : {false, true}) {
        SCOPED_TRACE(std::string(op) + " " + ShapeToString(c.shape) +
                     (keepdims ? " keepdims" : ""));
        auto f = ReduceAxes(op, {c.shape, ir::kI32}, c.axes, keepdims, target_);
        ASSERT_TRUE(f.ok()) << f.status();
        const int64_t n = NumElements(c.shape);
        const bool prod = std::string(op) == "prod";
        std::vector<int32_t> x = prod ? RandomInts(n, -3, 3) : EdgyInts(n, false);
        const std::vector<uint32_t> acc = RefIntegerReduce(op, x, c.shape, c.axes);
        Tensors t = {{"X", Words(x)}, {"Y", std::vector<uint32_t>(acc.size())}};
        // The interpreter on the small kernels (the float cases check it on
        // every shape).
        ASSERT_NO_FATAL_FAILURE(Run(*f, {"X"}, t, !keepdims && n <= 4000));
        EXPECT_EQ(t["Y"], acc);
      }
    }
  }
  struct Case {
    Shape shape;
    int axis;
  };
  for (const Case& c :
       {Case{{7, 33}, 1}, Case{{2, 4097}, 1}, Case{{33, 7, 5}, 1}, Case{{300, 3}, 0}}) {
    for (const char* op : {"argmax", "argmin"}) {
      SCOPED_TRACE(std::string(op) + " " + ShapeToString(c.shape));
      auto f = ArgReduce(op, {c.shape, ir::kI32}, c.axis, false, target_);
      ASSERT_TRUE(f.ok()) << f.status();
      const int64_t n = NumElements(c.shape);
      // Ties everywhere, and the extremes of i32 (which the reduction's
      // identity must not beat).
      std::vector<int32_t> x = RandomInts(n, -3, 3);
      for (int64_t i = 0; i < n; i += 5) x[i] = i % 2 ? INT32_MIN : INT32_MAX;
      std::vector<int32_t> want = RefArg(std::string(op) == "argmax", x, c.shape, c.axis);
      Tensors t = {{"X", Words(x)}, {"Y", std::vector<uint32_t>(want.size())}};
      ASSERT_NO_FATAL_FAILURE(Run(*f, {"X"}, t, n <= kDifferentialLimit));
      EXPECT_EQ(Ints(t["Y"]), want);
    }
  }
  // All INT_MIN rows: argmax is 0, the identity loses the tie.
  auto f = ArgReduce("argmax", {{3, 1000}, ir::kI32}, 1, false, target_);
  ASSERT_TRUE(f.ok()) << f.status();
  Tensors t = {{"X", Words(std::vector<int32_t>(3000, INT32_MIN))},
               {"Y", std::vector<uint32_t>(3)}};
  ASSERT_NO_FATAL_FAILURE(Run(*f, {"X"}, t, true));
  EXPECT_EQ(Ints(t["Y"]), (std::vector<int32_t>{0, 0, 0}));
}

// The IR's u32 arithmetic: wrapping (neg is 0 - x), x / 0 == x,
// floor_div and floor_mod truncate (no negative values), shift amounts
// modulo 32, logical shift right; abs is x and sign 0 or 1.
uint32_t RefUint(const std::string& op, uint32_t a, uint32_t b = 0) {
  if (op == "neg") return 0u - a;
  if (op == "abs" || op == "relu") return a;
  if (op == "sign") return a > 0 ? 1 : 0;
  if (op == "square") return a * a;
  if (op == "bitwise_not") return ~a;
  if (op == "popcount") return std::popcount(a);
  if (op == "add") return a + b;
  if (op == "sub") return a - b;
  if (op == "mul") return a * b;
  if (op == "div" || op == "floor_div") return b == 0 ? a : a / b;
  if (op == "floor_mod") return b == 0 ? 0 : a % b;
  if (op == "max") return std::max(a, b);
  if (op == "min") return std::min(a, b);
  if (op == "bitwise_and") return a & b;
  if (op == "bitwise_or") return a | b;
  if (op == "bitwise_xor") return a ^ b;
  if (op == "shift_left") return a << (b & 31);
  if (op == "shift_right") return a >> (b & 31);
  if (op == "pow") {
    uint32_t r = 1, base = a;
    for (uint32_t e = b; e != 0; e >>= 1, base *= base) {
      if ((e & 1) != 0) r *= base;
    }
    return r;
  }
  if (op == "eq" || op == "ne" || op == "lt" || op == "le" || op == "gt" || op == "ge") {
    return static_cast<uint32_t>(RefCompare(op, a, b));
  }
  ADD_FAILURE() << "no u32 reference for " << op;
  return 0;
}

// u32 values over the whole range, with the edges placed first (as
// EdgyInts, whose values' bits they are, with UINT32_MAX and 2^31).
std::vector<uint32_t> EdgyUints(const std::vector<int32_t>& ints) {
  std::vector<uint32_t> v(ints.begin(), ints.end());
  const uint32_t edges[] = {0x80000000u, 0xFFFFFFFFu, 0, 1, 0x7FFFFFFFu, 31, 32, 33};
  for (size_t k = 0; k < std::size(edges) && k < v.size(); ++k) v[k] = edges[k];
  return v;
}

TEST_F(ElementwiseTypesDeviceTest, UnsignedOps) {
  std::vector<std::string_view> ops;
  for (const auto* names : {&UnaryOpNames(), &BinaryOpNames(), &CompareOpNames()}) {
    for (std::string_view op : *names) {
      if (ElementwiseOpTakes(op, ir::kU32)) ops.push_back(op);
    }
  }
  ASSERT_EQ(ops.size(), 27u);  // 7 unary, 14 binary, 6 comparisons
  for (std::string_view name : ops) {
    const std::string op(name);
    const bool unary = std::ranges::find(UnaryOpNames(), name) != UnaryOpNames().end();
    const bool compare = std::ranges::find(CompareOpNames(), name) != CompareOpNames().end();
    for (const auto& [sa, sb] : kIntPairs) {
      if (unary && sb.size() > 1) continue;
      const Shape a_shape = sa, b_shape = unary ? sa : sb;
      SCOPED_TRACE(op + " u32 " + ShapeToString(a_shape) + " " + ShapeToString(b_shape));
      auto f = UnaryOrBinary(op, unary, a_shape, b_shape, ir::kU32);
      ASSERT_TRUE(f.ok()) << f.status();
      const Shape out = unary ? a_shape : *BroadcastShapes(a_shape, b_shape);
      const int64_t n = NumElements(out);
      const bool small_b = SmallSecondOperand(op) || compare;
      std::vector<uint32_t> a = EdgyUints(EdgyInts(NumElements(a_shape), compare));
      std::vector<uint32_t> b = EdgyUints(EdgyInts(NumElements(b_shape), small_b));
      // Small values read as u32 are near 0 and near 2^32 (the negative
      // ones): equal pairs and both ends, for comparisons.
      if (small_b) b[0] = 0xFFFFFFFFu;
      std::vector<uint32_t> want(n);
      for (int64_t k = 0; k < n; ++k) {
        want[k] = unary ? RefUint(op, a[k])
                        : RefUint(op, a[BroadcastSource(a_shape, out, k)],
                                  b[BroadcastSource(b_shape, out, k)]);
      }
      Tensors t = unary ? Tensors{{"X", a}, {"Y", std::vector<uint32_t>(n, 0xDEADBEEFu)}}
                        : Tensors{{"A", a}, {"B", b}, {"C", std::vector<uint32_t>(n, 0xDEADBEEFu)}};
      ASSERT_NO_FATAL_FAILURE(
          Run(*f, unary ? std::vector<std::string>{"X"} : std::vector<std::string>{"A", "B"}, t,
              n <= kDifferentialLimit));
      EXPECT_EQ(t[unary ? "Y" : "C"], want);
    }
  }
  // A chain with u32 constants: ((x >> 1) * 4294967295) + 7, then
  // clamp(x, 5, 4000000000) and a where on the running value; a constant
  // past u32's range is refused, naming it.
  const Shape shape = {4099};
  auto chain = ElementwiseChain(
      {shape, ir::kU32},
      {ChainStep::WithConstant("shift_right", 1.0), ChainStep::WithConstant("mul", 4294967295.0),
       ChainStep::WithConstant("add", 7.0), ChainStep::Ternary("clamp", 5.0, 4000000000.0),
       ChainStep::Ternary("where", 9.0, 4294967295.0)},
      target_);
  ASSERT_TRUE(chain.ok()) << chain.status();
  std::vector<uint32_t> x = EdgyUints(EdgyInts(4099, false)), want(x.size());
  for (size_t k = 0; k < x.size(); ++k) {
    const uint32_t v = std::clamp((x[k] >> 1) * 4294967295u + 7u, 5u, 4000000000u);
    want[k] = v != 0 ? 9u : 4294967295u;
  }
  Tensors t = {{"X", x}, {"Y", std::vector<uint32_t>(x.size(), 0xDEADBEEFu)}};
  ASSERT_NO_FATAL_FAILURE(Run(*chain, {"X"}, t, true));
  EXPECT_EQ(t["Y"], want);
  for (double bad : {-1.0, 4294967296.0, 0.5, std::numeric_limits<double>::quiet_NaN()}) {
    auto refused =
        ElementwiseChain({shape, ir::kU32}, {ChainStep::WithConstant("add", bad)}, target_);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find("is not a u32"), std::string::npos)
        << refused.status();
  }
  EXPECT_FALSE(ElementwiseOpTakes("exp", ir::kU32));
  auto exp = Elementwise("exp", {{shape, ir::kU32}}, target_);
  ASSERT_FALSE(exp.ok());
  EXPECT_NE(exp.status().message().find("exp takes f32 or f16"), std::string::npos) << exp.status();
}

TEST_F(ElementwiseTypesDeviceTest, UnsignedReductions) {
  for (const char* op : {"sum", "max", "min", "prod"}) {
    for (const ReduceCase& c : kReduceCases) {
      SCOPED_TRACE(std::string(op) + " u32 " + ShapeToString(c.shape));
      auto f = ReduceAxes(op, {c.shape, ir::kU32}, c.axes, false, target_);
      ASSERT_TRUE(f.ok()) << f.status();
      const int64_t n = NumElements(c.shape);
      const bool prod = std::string(op) == "prod";
      std::vector<uint32_t> x = EdgyUints(prod ? RandomInts(n, 0, 3) : EdgyInts(n, false));
      if (prod) x.assign(x.size(), 3u);
      if (prod && n > 1) x[1] = 0xFFFFFFFFu;
      const std::vector<uint32_t> acc = RefIntegerReduce(op, x, c.shape, c.axes);
      Tensors t = {{"X", x}, {"Y", std::vector<uint32_t>(acc.size(), 0xDEADBEEFu)}};
      ASSERT_NO_FATAL_FAILURE(Run(*f, {"X"}, t, n <= 4000));
      EXPECT_EQ(t["Y"], acc);
    }
  }
  auto mean = ReduceAxes("mean", {{7}, ir::kU32}, {0}, false, target_);
  ASSERT_FALSE(mean.ok());
  EXPECT_NE(mean.status().message().find("is u32; mean takes f32 or f16"), std::string::npos)
      << mean.status();
  // Arg-reductions: ties everywhere and both ends of u32; the u32 order is
  // the i32 order of the values' bits with the top bit flipped.
  for (const Shape& shape : {Shape{7, 33}, Shape{2, 4097}, Shape{3, 1000}}) {
    for (const char* op : {"argmax", "argmin"}) {
      SCOPED_TRACE(std::string(op) + " u32 " + ShapeToString(shape));
      auto f = ArgReduce(op, {shape, ir::kU32}, 1, false, target_);
      ASSERT_TRUE(f.ok()) << f.status();
      const int64_t n = NumElements(shape);
      std::vector<uint32_t> x = EdgyUints(RandomInts(n, -3, 3));
      for (int64_t i = 0; i < n; i += 5) x[i] = i % 2 ? 0u : 0xFFFFFFFFu;
      if (shape[1] == 1000) x.assign(x.size(), std::string(op) == "argmax" ? 0u : 0xFFFFFFFFu);
      std::vector<int32_t> ordered(n);
      for (int64_t i = 0; i < n; ++i) ordered[i] = static_cast<int32_t>(x[i] ^ 0x80000000u);
      std::vector<int32_t> want = RefArg(std::string(op) == "argmax", ordered, shape, 1);
      Tensors t = {{"X", x}, {"Y", std::vector<uint32_t>(want.size(), 0xDEADBEEFu)}};
      ASSERT_NO_FATAL_FAILURE(Run(*f, {"X"}, t, n <= kDifferentialLimit));
      EXPECT_EQ(Ints(t["Y"]), want);
    }
  }
}

TEST_F(ElementwiseTypesDeviceTest, IntegerChain) {
  // ((x << 3) ^ B) - 7, then abs: one kernel over i32.
  for (const Shape& shape : {Shape{7, 33}, Shape{4099}, Shape{1}}) {
    SCOPED_TRACE(ShapeToString(shape));
    const TensorType x_type{shape, ir::kI32};
    auto f = ElementwiseChain(x_type,
                              {ChainStep::WithConstant("shift_left", 3),
                               ChainStep::With("bitwise_xor", {{shape.back()}, ir::kI32}),
                               ChainStep::WithConstant("sub", 7), ChainStep::Unary("abs")},
                              target_);
    ASSERT_TRUE(f.ok()) << f.status();
    const int64_t n = NumElements(shape);
    std::vector<int32_t> x = EdgyInts(n, false), b = EdgyInts(shape.back(), false);
    std::vector<int32_t> want(n);
    for (int64_t k = 0; k < n; ++k) {
      int32_t v = RefInt("shift_left", x[k], 3);
      v = RefInt("bitwise_xor", v, b[k % shape.back()]);
      want[k] = RefInt("abs", RefInt("sub", v, 7));
    }
    Tensors t = {{"X", Words(x)}, {"B2", Words(b)}, {"Y", std::vector<uint32_t>(n)}};
    ASSERT_NO_FATAL_FAILURE(Run(*f, {"X", "B2"}, t, true));
    EXPECT_EQ(Ints(t["Y"]), want);
  }
}

// Ternary, where and cast steps in one chain, over values with NaN,
// infinities and signed zeros:
//   v = clamp(fma(x, B1, 0.25), -1, C2) > 0 ? B4 : -0.0  (f32, exact)
//   Y = where(i32(v * 1000), 7, C7)                        (i32)
TEST_F(ElementwiseTypesDeviceTest, ChainOfTernaryWhereAndCastSteps) {
  for (const Shape& shape : {Shape{7, 33}, Shape{3, 4099}, Shape{1, 1}}) {
    SCOPED_TRACE(ShapeToString(shape));
    const int64_t rows = shape[0], cols = shape[1], n = rows * cols;
    const TensorType row{{cols}}, column{{rows, 1}}, full{shape};
    const std::vector<ChainStep> steps = {
        ChainStep::Ternary("fma", row, 0.25),
        ChainStep::Ternary("clamp", -1.0, column),
        ChainStep::WithConstant("gt", 0.0),
        ChainStep::Ternary("where", full, -0.0),
        ChainStep::WithConstant("mul", 1000.0),
        ChainStep::CastTo(ir::kI32),
        ChainStep::Ternary("where", 7.0, TensorType{{cols}, ir::kI32}),
    };
    auto f = ElementwiseChain(full, steps, target_);
    ASSERT_TRUE(f.ok()) << f.status();
    // Parameters: X, the tensor operands by step and position, Y (i32).
    std::vector<std::string> names;
    for (const ir::Param& p : f->params()) names.push_back(p.name());
    EXPECT_EQ(names, (std::vector<std::string>{"X", "B1", "C2", "B4", "C7", "Y"}));
    EXPECT_EQ(f->params().back().buffer().dtype(), ir::kI32);
    // B1 is +-2^k (or an edge value): x * B1 is exact, so the fma's one
    // rounding and a separate multiply and add agree, and so does the
    // comparison after it on any device.
    std::vector<float> x = EdgyFloats(n), b1 = EdgyFloats(cols), c2 = Random(rows, -2, 2),
                       b4 = EdgyFloats(n);
    for (int64_t c = 0; c < cols; ++c) {
      if (std::isfinite(b1[c]) && b1[c] != 0) {
        b1[c] = std::ldexp(b1[c] < 0 ? -1.0f : 1.0f, static_cast<int>(c % 5) - 2);
      }
    }
    c2[0] = kNan;  // a NaN bound makes the row's clamp NaN, so its test false
    std::vector<int32_t> c7 = EdgyInts(cols, false);
    std::vector<int32_t> want(n);
    for (int64_t k = 0; k < n; ++k) {
      const int64_t r = k / cols, c = k % cols;
      const float fused = static_cast<float>(std::fma(double{x[k]}, double{b1[c]}, 0.25));
      const float hi = c2[r];
      // numpy's clip with NaN anywhere giving NaN.
      const float clamped =
          std::isnan(fused) || std::isnan(hi) ? kNan : std::min(std::max(fused, -1.0f), hi);
      const float v = clamped > 0.0f ? b4[k] : -0.0f;
      want[k] = RefToInt(v * 1000.0f) != 0 ? 7 : c7[c];
    }
    Tensors t = {{"X", Words(x)},   {"B1", Words(b1)}, {"C2", Words(c2)},
                 {"B4", Words(b4)}, {"C7", Words(c7)}, {"Y", std::vector<uint32_t>(n)}};
    ASSERT_NO_FATAL_FAILURE(Run(*f, {"X", "B1", "C2", "B4", "C7"}, t, n <= 4000));
    EXPECT_EQ(Ints(t["Y"]), want);
  }
  // A float result with its sign kept: where(x >= 0.5, B2, -0.0), and an
  // i32 input cast to f32 and halved.
  const int64_t n = 1000;
  auto select = ElementwiseChain(
      {{n}},
      {ChainStep::WithConstant("ge", 0.5), ChainStep::Ternary("where", TensorType{{n}}, -0.0)},
      target_);
  ASSERT_TRUE(select.ok()) << select.status();
  std::vector<float> x = EdgyFloats(n), b = EdgyFloats(n);
  std::vector<float> chosen(n);
  for (int64_t k = 0; k < n; ++k) chosen[k] = x[k] >= 0.5f ? b[k] : -0.0f;
  const std::vector<uint32_t> want = Words(chosen);  // compared as bits: -0.0 and NaN kept
  Tensors t = {{"X", Words(x)}, {"B2", Words(b)}, {"Y", std::vector<uint32_t>(n)}};
  ASSERT_NO_FATAL_FAILURE(Run(*select, {"X", "B2"}, t, true));
  EXPECT_EQ(t["Y"], want);
  auto halve = ElementwiseChain(
      {{n}, ir::kI32}, {ChainStep::CastTo(ir::kF32), ChainStep::WithConstant("mul", 0.5)}, target_);
  ASSERT_TRUE(halve.ok()) << halve.status();
  std::vector<int32_t> xi = EdgyInts(n, false);
  std::vector<float> half(n);
  for (int64_t k = 0; k < n; ++k) half[k] = static_cast<float>(xi[k]) * 0.5f;
  Tensors u = {{"X", Words(xi)}, {"Y", std::vector<uint32_t>(n)}};
  ASSERT_NO_FATAL_FAILURE(Run(*halve, {"X"}, u, true));
  EXPECT_EQ(u["Y"], Words(half));
}

// A fused expression with values read twice: silu(x) + b in f32.
TEST_F(ElementwiseTypesDeviceTest, FusedSiluPlusBias) {
  for (const auto& [xs, bs] : {std::pair<Shape, Shape>{{7, 33}, {33}},
                               {{3, 4099}, {1}},
                               {{1, 1}, {1, 1}},
                               {{1000}, {5, 1, 1000}}}) {
    SCOPED_TRACE(ShapeToString(xs) + " + " + ShapeToString(bs));
    auto f = ElementwiseFused(
        {{xs}, {bs}},
        {FusedNode::Input(0), FusedNode::Op("sigmoid", {0}), FusedNode::Op("mul", {0, 1}),
         FusedNode::Input(1), FusedNode::Op("add", {2, 3})},
        target_);
    ASSERT_TRUE(f.ok()) << f.status();
    const Shape out = *BroadcastShapes(xs, bs);
    const int64_t n = NumElements(out);
    std::vector<float> x = EdgyFloats(NumElements(xs)), b = Random(NumElements(bs));
    std::vector<float> want(n);
    for (int64_t k = 0; k < n; ++k) {
      const double v = x[BroadcastSource(xs, out, k)];
      want[k] = static_cast<float>(v / (1 + std::exp(-v)) + b[BroadcastSource(bs, out, k)]);
      if (std::isinf(v) && v < 0) want[k] = kNan;  // -inf * sigmoid(-inf) = -inf * 0
    }
    Tensors t = {{"X0", Words(x)}, {"X1", Words(b)}, {"Y", std::vector<uint32_t>(n)}};
    ASSERT_NO_FATAL_FAILURE(Run(*f, {"X0", "X1"}, t, n <= 4000));
    ExpectNear(Floats(t["Y"]), want, 1e-5f, "Y");
  }
}

// The deepest chain kiln compiles (internal::kMaxFusedDepth) runs through
// the whole pipeline, the shader compiler included, for inputs of any rank
// (lowering adds index arithmetic); one step more, and a fused expression
// as deep, are refused by name before anything is built. A step's depth is
// what it adds to the inlined expression: many `max` steps stay far within.
TEST_F(ElementwiseTypesDeviceTest, DeepestChainRunsAndDeeperIsRefused) {
  // X[i] is 2 deep and each neg adds one level.
  const int steps = internal::kMaxFusedDepth - 2;
  const std::string limit = std::to_string(internal::kMaxFusedDepth);
  for (const Shape& shape : {Shape{33}, Shape{3, 11}, Shape{1, 3, 1, 11}}) {
    SCOPED_TRACE(ShapeToString(shape));
    std::vector<ChainStep> negs(steps, ChainStep::Unary("neg"));
    auto f = ElementwiseChain({shape}, negs, target_);
    ASSERT_TRUE(f.ok()) << f.status();
    std::vector<float> x = EdgyFloats(33), want(33);
    for (size_t k = 0; k < x.size(); ++k) want[k] = steps % 2 == 0 ? x[k] : -x[k];
    Tensors t = {{"X", Words(x)}, {"Y", std::vector<uint32_t>(33)}};
    ASSERT_NO_FATAL_FAILURE(Run(*f, {"X"}, t, true));
    ExpectNear(Floats(t["Y"]), want, 0.0f, "Y");

    negs.push_back(ChainStep::Unary("neg"));
    const Status chain = ElementwiseChain({shape}, negs, target_).status();
    EXPECT_EQ(chain.code(), StatusCode::kInvalidArgument) << chain;
    EXPECT_EQ(chain.message(), "steps 1 to " + std::to_string(steps + 1) +
                                   " of the chain nest more than " + limit +
                                   " levels deep as one expression, the most kiln compiles; "
                                   "split the chain into several");
  }
  for (int n : {steps + 1, 100000}) {
    std::vector<FusedNode> nodes = {FusedNode::Input(0)};
    for (int k = 0; k < n; ++k) nodes.push_back(FusedNode::Op("neg", {k}));
    const Status fused = ElementwiseFused({{{3, 11}}}, nodes, target_).status();
    EXPECT_EQ(fused.code(), StatusCode::kInvalidArgument) << fused;
    EXPECT_EQ(fused.message(), "the fused expression nests more than " + limit +
                                   " levels deep, the most kiln compiles (each node used more "
                                   "than once adds a level too); split it into several");
  }
  // 200 float max steps (a let and a select each) nest one level apiece.
  std::vector<ChainStep> maxes(200, ChainStep::WithConstant("max", 0.5));
  auto m = ElementwiseChain({{3, 11}}, maxes, target_);
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<float> x = EdgyFloats(33), want(33);
  for (size_t k = 0; k < x.size(); ++k) want[k] = std::isnan(x[k]) ? x[k] : std::max(x[k], 0.5f);
  Tensors t = {{"X", Words(x)}, {"Y", std::vector<uint32_t>(33)}};
  ASSERT_NO_FATAL_FAILURE(Run(*m, {"X"}, t, true));
  ExpectNear(Floats(t["Y"]), want, 0.0f, "Y");
}

// Fused expressions too large for one kernel run as kernels in order
// (ElementwiseFusedKernels): 2600 steps of a = a * 0.5 + (b or 1) nest too
// deep for one;
// eleven inputs of two shapes, on a target binding 4 buffers per kernel,
// read too many. Intermediates and Y poisoned first.
TEST_F(ElementwiseTypesDeviceTest, FusedExpressionsTooLargeForOneKernel) {
  using N = FusedNode;
  const Shape shape{3, 11}, row{11};
  std::vector<FusedNode> deep = {N::Input(0), N::Input(1), N::Constant(0.5), N::Constant(1.0)};
  int a = 0;
  for (int k = 0; k < 2600; ++k) {
    deep.push_back(N::Op("mul", {a, 2}));
    deep.push_back(N::Op("add", {static_cast<int>(deep.size()) - 1, k % 7 == 0 ? 1 : 3}));
    a = static_cast<int>(deep.size()) - 1;
  }
  auto seq = ElementwiseFusedKernels({{shape}, {row}}, deep, target_);
  ASSERT_TRUE(seq.ok()) << seq.status();
  EXPECT_GE(seq->functions.size(), 2u);
  std::vector<float> x = Random(33), b = Random(11), want(33);
  for (int64_t e = 0; e < 33; ++e) {
    float v = x[e];
    for (int k = 0; k < 2600; ++k) v = v * 0.5f + (k % 7 == 0 ? b[e % 11] : 1.0f);
    want[e] = v;
  }
  Tensors t = {{"X0", Words(x)}, {"X1", Words(b)}, {"Y", std::vector<uint32_t>(33)}};
  for (const IntermediateTensor& m : seq->intermediates) {
    t[m.name] = std::vector<uint32_t>(NumElements(m.shape));
  }
  ASSERT_NO_FATAL_FAILURE(RunInOrder(seq->functions, {"X0", "X1"}, t, false, kPoison));
  // Not bit for bit: a driver may contract and reassociate the chain's
  // multiplies and adds (SPIR-V without NoContraction allows both), a
  // rounding or two per step, which each later step halves.
  ExpectNear(Floats(t["Y"]), want, 4e-6f, "Y");

  Target narrow = target_;
  narrow.limits.max_storage_buffers_per_stage = 4;
  std::vector<TensorType> inputs;
  std::vector<FusedNode> wide;
  std::vector<std::vector<float>> values;
  Tensors u = {{"Y", std::vector<uint32_t>(33)}};
  std::vector<std::string> names;
  for (int k = 0; k < 11; ++k) {
    const Shape& s = k % 2 ? shape : row;
    inputs.push_back({s});
    values.push_back(Random(NumElements(s)));
    names.push_back("X" + std::to_string(k));
    u[names.back()] = Words(values.back());
    wide.push_back(N::Input(k));
    if (k > 0) {
      const int last = static_cast<int>(wide.size());
      wide.push_back(N::Op(k % 3 ? "add" : "mul", {last - 2, last - 1}));
    }
  }
  auto split = ElementwiseFusedKernels(inputs, wide, narrow);
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_GE(split->functions.size(), 4u);
  for (const IntermediateTensor& m : split->intermediates) {
    u[m.name] = std::vector<uint32_t>(NumElements(m.shape));
  }
  ASSERT_NO_FATAL_FAILURE(RunInOrder(split->functions, names, u, false, kPoison));
  std::vector<float> sums(33);
  for (int64_t e = 0; e < 33; ++e) {
    float v = values[0][e % 11];
    for (int k = 1; k < 11; ++k) {
      const float w = values[k][k % 2 ? e : e % 11];
      v = k % 3 ? v + w : v * w;
    }
    sums[e] = v;
  }
  // (A multiply and the add after it may run as one fma.)
  ExpectNear(Floats(u["Y"]), sums, 1e-5f, "Y");
}

// A fused expression over f32 and i32 with comparisons, a cast, a where and
// values read two and three times, compared exactly:
//   m = |x| > 1; v = where(m, i32(x), c) + m; Y = v * v
TEST_F(ElementwiseTypesDeviceTest, FusedIntegerExpressionIsExact) {
  for (const Shape& shape : {Shape{7, 33}, Shape{3, 4099}, Shape{1, 1}}) {
    SCOPED_TRACE(ShapeToString(shape));
    const int64_t cols = shape[1], n = NumElements(shape);
    auto f = ElementwiseFused({{shape}, {{cols}, ir::kI32}},
                              {FusedNode::Input(0), FusedNode::Input(1), FusedNode::Op("abs", {0}),
                               FusedNode::Constant(1.0), FusedNode::Op("gt", {2, 3}),
                               FusedNode::CastTo(0, ir::kI32), FusedNode::Op("where", {4, 5, 1}),
                               FusedNode::Op("add", {6, 4}), FusedNode::Op("mul", {7, 7})},
                              target_);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ(f->params().back().buffer().dtype(), ir::kI32);
    std::vector<float> x = EdgyFloats(n);
    for (int64_t k = 0; k < n; k += 5) x[k] *= 3e9f;  // some saturate
    std::vector<int32_t> c = EdgyInts(cols, false);
    std::vector<int32_t> want(n);
    for (int64_t k = 0; k < n; ++k) {
      const int32_t m = std::fabs(x[k]) > 1.0f ? 1 : 0;  // NaN: 0
      const uint32_t v = static_cast<uint32_t>(m != 0 ? RefToInt(x[k]) : c[k % cols]) + m;
      want[k] = static_cast<int32_t>(v * v);
    }
    Tensors t = {{"X0", Words(x)}, {"X1", Words(c)}, {"Y", std::vector<uint32_t>(n)}};
    ASSERT_NO_FATAL_FAILURE(Run(*f, {"X0", "X1"}, t, n <= 4000));
    EXPECT_EQ(Ints(t["Y"]), want);
  }
}

// ---------------------------------------------------------------------------
// f16, against the interpreter (which computes in f16 the same way).

TEST_F(OpsMoreDeviceTest, F16AgainstTheInterpreter) {
  if (!target_.shader_f16) GTEST_SKIP() << "the device has no shader-f16";
  const ir::DataType h = ir::kF16;
  ASSERT_NO_FATAL_FAILURE(CheckF16(ReduceAxes("sum", {{33, 1000}, h}, {1}, false, target_)));
  ASSERT_NO_FATAL_FAILURE(CheckF16(ReduceAxes("max", {{5, 7, 33}, h}, {0, 2}, true, target_)));
  ASSERT_NO_FATAL_FAILURE(CheckF16(ReduceAxes("mean", {{1000, 7}, h}, {1}, false, target_)));
  ASSERT_NO_FATAL_FAILURE(CheckF16(ArgReduce("argmax", {{7, 1000}, h}, 1, false, target_)));
  ASSERT_NO_FATAL_FAILURE(CheckF16(ArgReduce("argmin", {{33, 7}, h}, 1, false, target_)));
  ASSERT_NO_FATAL_FAILURE(CheckF16(SoftmaxAxis({{7, 1000}, h}, 1, target_)));
  ASSERT_NO_FATAL_FAILURE(CheckF16(LogSoftmax({{33, 7}, h}, 0, target_)));
  ASSERT_NO_FATAL_FAILURE(CheckF16(LayerNorm({{7, 1000}, h}, 1e-5, target_)));
  ASSERT_NO_FATAL_FAILURE(CheckF16(RmsNorm({{33, 7}, h}, 1e-5, target_)));
  ASSERT_NO_FATAL_FAILURE(CheckF16(Elementwise("lt", {{{7, 1}, h}, {{33}, h}}, target_)));
  ASSERT_NO_FATAL_FAILURE(
      CheckF16(Elementwise("clamp", {{{4099}, h}, {{1}, h}, {{1}, h}}, target_)));
  ASSERT_NO_FATAL_FAILURE(
      CheckF16(Elementwise("fma", {{{33}, h}, {{7, 33}, h}, {{1}, h}}, target_)));
  ASSERT_NO_FATAL_FAILURE(CheckF16(Permute({{7, 33}, h}, {1, 0}, target_)));
  ASSERT_NO_FATAL_FAILURE(CheckF16(Concat({{{7, 3}, h}, {{7, 5}, h}}, 1, target_)));
  ASSERT_NO_FATAL_FAILURE(CheckF16(Slice({{33}, h}, {-1}, {0}, {-2}, target_)));
  ASSERT_NO_FATAL_FAILURE(CheckF16(Gather({{100, 7}, h}, {{5}, ir::kI32}, target_)));
  ASSERT_NO_FATAL_FAILURE(CheckF16(Pad({{7, 3}, h}, {1, 0}, {0, 2}, 1.5, target_)));
  ASSERT_NO_FATAL_FAILURE(CheckF16(Where({{7, 1}, h}, {{1, 33}, h}, {{33}, h}, target_)));
  ASSERT_NO_FATAL_FAILURE(CheckF16(Cast({{1000}, h}, ir::kF32, target_)));
  ASSERT_NO_FATAL_FAILURE(CheckF16(Cast({{1000}}, h, target_)));
  ASSERT_NO_FATAL_FAILURE(CheckF16(Cast({{1000}, h}, ir::kI32, target_)));
  ASSERT_NO_FATAL_FAILURE(CheckF16(Cast({{1000}, h}, ir::kU32, target_)));
  ASSERT_NO_FATAL_FAILURE(CheckF16(Cast({{1000}, ir::kU32}, h, target_)));
  // A chain in f16 through comparison, where and clamp steps, cast to f32
  // (each step exact: a rounding step before the comparison could put a
  // value on either side of it, and an f16 fma may round once or twice);
  // and one from f32 cast to f16 midway.
  ASSERT_NO_FATAL_FAILURE(CheckF16(ElementwiseChain(
      {{33, 7}, h},
      {ChainStep::WithConstant("lt", 0.25),
       ChainStep::Ternary("where", TensorType{{33, 1}, h}, -0.0),
       ChainStep::Ternary("clamp", -1.0, TensorType{{7}, h}), ChainStep::CastTo(ir::kF32)},
      target_)));
  ASSERT_NO_FATAL_FAILURE(CheckF16(ElementwiseChain(
      {{1000}},
      {ChainStep::CastTo(h), ChainStep::With("mul", {{1000}, h}), ChainStep::Unary("exp")},
      target_)));
}

}  // namespace
}  // namespace kiln::ops
