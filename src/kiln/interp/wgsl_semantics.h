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

#include "kiln/support/int_arith.h"

namespace kiln::interp {

// The integer rules shared with the runtime (kiln/support/int_arith.h).
using ::kiln::IntDiv;
using ::kiln::IntFloorDiv;
using ::kiln::IntFloorMod;
using ::kiln::IntMod;
using ::kiln::WrapInt;

int64_t ShiftLeft(int64_t a, int64_t amount, int bits, bool is_signed);
int64_t ShiftRight(int64_t a, int64_t amount, int bits, bool is_signed);

// Float (already rounded to its source type) to an integer type, saturating.
int64_t FloatToInt(double value, int bits, bool is_signed);

// WGSL dot4I8Packed: the dot product of the four signed bytes of a and b.
int32_t Dot4I8Packed(uint32_t a, uint32_t b);
// WGSL dot4U8Packed: the same on unsigned bytes.
uint32_t Dot4U8Packed(uint32_t a, uint32_t b);

}  // namespace kiln::interp
