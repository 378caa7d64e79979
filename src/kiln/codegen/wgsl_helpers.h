// Helper functions that a kernel's WGSL needs where WGSL has no builtin of
// the IR's meaning: erf, floor division and modulo, and float constants with
// no literal spelling (infinities, NaN).
//
// Each helper is emitted once per module, on first request, and named with
// NameSupply::kInternalPrefix so it cannot collide with a user name.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kiln::codegen {

class WgslHelpers {
 public:
  // erf(x) for `type` = f32 or vecN<f32>: Abramowitz & Stegun 7.1.26,
  // absolute error below 1.5e-7 (plus f32 rounding). f16 callers convert.
  std::string Erf(const std::string& type);

  // Integer division for i32, u32 or vectors of them with WGSL's (and the
  // IR's) meaning on every back end: a / 0 == a, and MIN / -1 == MIN. WGSL's
  // own `/` has that meaning, but Naga's GLSL translates it to a bare
  // division (wgpu-native 29 on OpenGL gave 0 for a / 0), so a divisor that
  // is not a constant other than 0 (and -1 for i32) is replaced by 1 where
  // the quotient would be a.
  std::string DivInt(const std::string& type, bool is_signed);
  // Truncated remainder for i32 or vecN<i32>, a - b * (a / b), and 0 where
  // b == 0 (WGSL's and the IR's a % 0). WGSL's own `%` has this meaning, but
  // Naga's translation of it returned wrong results for negative operands on
  // NVIDIA's Vulkan driver (wgpu-native 29, driver 580), so kiln never emits
  // `%` on signed integers. The division is DivInt's, and a - b * (a / b)
  // wraps to 0 for MIN % -1 as required.
  std::string RemInt(const std::string& type);
  // u32 or vecN<u32> remainder with a % 0 == 0 on every back end (the
  // divisor 0 replaced by 1).
  std::string RemUint(const std::string& type);

  // Integer floor division / modulo for i32 or vecN<i32>: truncating WGSL
  // division corrected when the remainder is non-zero and its sign differs
  // from the divisor's. Division by zero follows WGSL (a / 0 == a, a % 0 ==
  // 0), as the IR specifies.
  std::string FloorDivInt(const std::string& type);
  std::string FloorModInt(const std::string& type);
  // Float floor modulo for f32/f16 scalars and vectors: a - floor(a / b) * b.
  std::string FloorModFloat(const std::string& type);

  // A function returning the float whose bits are its u32 argument (for f16,
  // its low 16 bits). Calling it keeps infinities and NaN out of WGSL
  // constant expressions, where both Tint and Naga reject them.
  std::string F32FromBits();
  std::string F16FromBits();

  // IEEE 754 float semantics that drivers may otherwise optimise away (a
  // Vulkan or GL driver may assume no NaN: lavapipe folded `x != x` to
  // false, llvmpipe's GL turned `select(a < b, a, b)` into a min that drops
  // NaN). All take f32 scalars or vectors of `lanes` lanes; f16 callers
  // convert to f32 first, which is exact.
  //
  // IsNan: a NaN test on the bits, which no float optimisation can fold.
  std::string IsNan(int lanes);
  // A float comparison (`op` one of == != < <= > >=) that is false for
  // NaN operands, except `!=`, which is true.
  std::string FloatCompare(std::string_view op, int lanes);
  // Float to i32 or u32: truncation toward zero, clamped to the largest f32
  // values the integer type holds (i32: [-2^31, 2^31 - 128], u32:
  // [0, 2^32 - 256], WGSL's rule), and NaN gives 0.
  std::string FloatToInt(bool is_signed, int lanes);
  // tanh that returns NaN for NaN, evaluates in a range where every
  // implementation's tanh is finite (|x| <= 16 rounds to +-1 in f32), and
  // near 0 (|x| < 0.25) is its series, accurate to the last bits there.
  std::string Tanh(int lanes);
  // Arithmetic with a constant zero operand, on the bits, so that a driver
  // that folds `x * 0.0` to 0 or `x + 0.0` to x (lavapipe does both) cannot
  // change the IEEE result:
  //   kTimesZero: x * z, z a zero whose sign bit is the helper's u32
  //               argument: NaN for a NaN or infinite x, else a zero of the
  //               product's sign;
  //   kZeroOver:  z / x: NaN for a zero or NaN x, else a zero of the
  //               quotient's sign (an infinite x too);
  //   kPlusZero:  x + 0.0 (and x - -0.0): x, but +0 for -0;
  //   kZeroMinus: 0.0 - x: -x, but +0 for +0;
  //   kZeroMod:   z % x and floor_mod(z, x): NaN for a zero, NaN or
  //               infinite x, else +0.
  // and with an operand that is the other (a driver's `x - x` may become 0):
  //   kSelfMinus: x - x: NaN for a NaN or infinite x, else +0;
  //   kSelfOver:  x / x: NaN for a zero, NaN or infinite x, else 1.
  enum class ZeroOp : uint8_t {
    kTimesZero,
    kZeroOver,
    kPlusZero,
    kZeroMinus,
    kZeroMod,
    kSelfMinus,
    kSelfOver
  };
  std::string ConstZero(ZeroOp op, int lanes);
  // The identity on `type`. A call to it is not a WGSL constant expression,
  // so constant operands passed through it are evaluated at run time: WGSL
  // rejects constant expressions that overflow (exp(100.0), 1 / 0, ...),
  // while the IR gives them IEEE or wrapping results.
  std::string RunTime(const std::string& type);

  // All requested definitions, in request order.
  std::string Definitions() const;

 private:
  std::string Add(const std::string& name, const std::string& definition);

  std::map<std::string, size_t> index_;
  std::vector<std::string> definitions_;
};

}  // namespace kiln::codegen
