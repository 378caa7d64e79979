// Scalar arithmetic with WGSL's rules, on the interpreter's lane
// representation: integers of any width live in an int64_t, normalised to
// their type (sign-extended when signed, zero-extended when unsigned); floats
// live in a double that is always exactly representable in the value's type.
//
// The rules, all as WGSL defines them for run-time values:
//   - integer + - * wrap modulo 2^bits;
//   - integer / truncates toward zero; x / 0 == x and MIN / -1 == MIN;
//   - integer % takes the sign of the dividend; x % 0 == 0 and MIN % -1 == 0;
//   - shifts use the amount modulo the bit width; >> is arithmetic when signed;
//   - float -> integer conversion truncates toward zero and saturates to the
//     largest float value representable in the target (NaN gives 0);
//   - f32 is computed in float, f16 in float rounded to half after each step.
#pragma once

#include <cstdint>

namespace kiln::interp {

// Reduces `value` modulo 2^bits and sign- or zero-extends it to 64 bits.
inline int64_t WrapInt(uint64_t value, int bits, bool is_signed) {
  if (bits >= 64) return static_cast<int64_t>(value);
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  value &= mask;
  if (is_signed && (value >> (bits - 1)) != 0) value |= ~mask;
  return static_cast<int64_t>(value);
}

int64_t IntDiv(int64_t a, int64_t b, int bits, bool is_signed);
int64_t IntMod(int64_t a, int64_t b, int bits, bool is_signed);
// Rounds the quotient toward negative infinity; by zero gives `a` like IntDiv.
int64_t IntFloorDiv(int64_t a, int64_t b, int bits, bool is_signed);
// a - b * IntFloorDiv(a, b): takes the sign of the divisor; by zero gives 0.
int64_t IntFloorMod(int64_t a, int64_t b, int bits, bool is_signed);
int64_t ShiftLeft(int64_t a, int64_t amount, int bits, bool is_signed);
int64_t ShiftRight(int64_t a, int64_t amount, int bits, bool is_signed);

// Float (already rounded to its source type) to an integer type, saturating.
int64_t FloatToInt(double value, int bits, bool is_signed);

// WGSL dot4I8Packed: the dot product of the four signed bytes of a and b.
int32_t Dot4I8Packed(uint32_t a, uint32_t b);
// WGSL dot4U8Packed: the same on unsigned bytes.
uint32_t Dot4U8Packed(uint32_t a, uint32_t b);

}  // namespace kiln::interp
