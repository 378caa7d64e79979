#include "kiln/interp/half.h"

#include <bit>

namespace kiln::interp {

uint16_t FloatToHalfBits(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t exponent = (bits >> 23) & 0xffu;
  uint32_t mantissa = bits & 0x7fffffu;

  if (exponent == 0xff) {  // infinity or NaN
    if (mantissa == 0) return sign | 0x7c00u;
    return static_cast<uint16_t>(sign | 0x7e00u | (mantissa >> 13));
  }
  // Unbiased exponent, rebiased for half (bias 15).
  const int half_exponent = static_cast<int>(exponent) - 127 + 15;
  if (half_exponent >= 0x1f) return sign | 0x7c00u;  // overflow to infinity

  if (half_exponent <= 0) {
    // Subnormal half (or zero): shift the mantissa with its implicit one
    // right, rounding to nearest even on the bits shifted out.
    if (half_exponent < -10) return sign;  // rounds to zero even at the tie
    mantissa |= 0x800000u;
    const int shift = 14 - half_exponent;  // 13 for normal, more for subnormal
    const uint32_t halfway = 1u << (shift - 1);
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    uint32_t result = mantissa >> shift;
    if (rest > halfway || (rest == halfway && (result & 1u))) ++result;
    return static_cast<uint16_t>(sign | result);  // a carry gives the smallest normal
  }

  uint32_t result = (static_cast<uint32_t>(half_exponent) << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (result & 1u))) ++result;  // may carry into inf
  return static_cast<uint16_t>(sign | result);
}

float HalfBitsToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0x1f) {
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  }
  if (exponent == 0) {
    if (mantissa == 0) return std::bit_cast<float>(sign);
    // Subnormal: value = mantissa * 2^-24, exact in float.
    const float magnitude = static_cast<float>(mantissa) * (1.0f / 16777216.0f);
    return sign ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
}

}  // namespace kiln::interp
