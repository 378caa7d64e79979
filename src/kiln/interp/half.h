// IEEE 754 binary16 ("half", WGSL `f16`) conversions.
//
// The interpreter keeps f16 values as floats that are always exactly
// representable in half precision: every f16 operation is computed in float
// and rounded back with RoundToHalf, which matches a GPU computing in half
// precision for the basic operations (+ - * / and sqrt are correctly rounded
// in float and the double rounding float->half is innocuous for them because
// float has more than 2*11+2 significand bits).
#pragma once

#include <cstdint>

namespace kiln::interp {

// Rounds to nearest, ties to even; overflow gives infinity; NaN stays NaN
// (quiet, sign kept).
uint16_t FloatToHalfBits(float value);

// Exact: every half value is a float.
float HalfBitsToFloat(uint16_t bits);

// The float nearest to `value` that is representable in half precision.
inline float RoundToHalf(float value) {
  return HalfBitsToFloat(FloatToHalfBits(value));
}

}  // namespace kiln::interp
