// Helper functions that a kernel's WGSL needs where WGSL has no builtin of
// the IR's meaning: erf, floor division and modulo, and float constants with
// no literal spelling (infinities, NaN).
//
// Each helper is emitted once per module, on first request, and named with
// NameSupply::kInternalPrefix so it cannot collide with a user name.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace kiln::codegen {

class WgslHelpers {
 public:
  // erf(x) for `type` = f32 or vecN<f32>: Abramowitz & Stegun 7.1.26,
  // absolute error below 1.5e-7 (plus f32 rounding). f16 callers convert.
  std::string Erf(const std::string& type);

  // Truncated remainder for i32 or vecN<i32>, a - b * (a / b), and 0 where
  // b == 0 (WGSL's and the IR's a % 0). WGSL's own `%` has this meaning, but
  // Naga's translation of it returned wrong results for negative operands on
  // NVIDIA's Vulkan driver (wgpu-native 29, driver 580), so kiln never emits
  // `%` on signed integers. WGSL `/` is exact there, and a - b * (a / b)
  // wraps to 0 for MIN % -1 as required.
  std::string RemInt(const std::string& type);

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

  // All requested definitions, in request order.
  std::string Definitions() const;

 private:
  std::string Add(const std::string& name, const std::string& definition);

  std::map<std::string, size_t> index_;
  std::vector<std::string> definitions_;
};

}  // namespace kiln::codegen
