// Integer arithmetic with the kernel IR's rules (which are WGSL's), on
// integers of any width held in an int64_t, normalised to their type
// (sign-extended when signed, zero-extended when unsigned):
//   - + - * wrap modulo 2^bits (callers wrap with WrapInt);
//   - / truncates toward zero; x / 0 == x and MIN / -1 == MIN;
//   - % takes the sign of the dividend; x % 0 == 0 and MIN % -1 == 0;
//   - floor_div rounds toward negative infinity, floor_mod takes the sign of
//     the divisor (by zero: x and 0).
// The interpreter and the runtime's evaluation of metadata expressions both
// use these, so they agree exactly.
#pragma once

#include <cstdint>

namespace kiln {

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
// The smaller / larger of two normalised values of one type.
int64_t IntMin(int64_t a, int64_t b, int bits, bool is_signed);
int64_t IntMax(int64_t a, int64_t b, int bits, bool is_signed);

}  // namespace kiln
