#include "kiln/interp/wgsl_semantics.h"

#include <cmath>
#include <limits>

namespace kiln::interp {
namespace {

int64_t MinSigned(int bits) {
  return bits >= 64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (bits - 1));
}

}  // namespace

int64_t ShiftLeft(int64_t a, int64_t amount, int bits, bool is_signed) {
  const int shift = static_cast<int>(static_cast<uint64_t>(amount) % static_cast<uint64_t>(bits));
  return WrapInt(static_cast<uint64_t>(a) << shift, bits, is_signed);
}

int64_t ShiftRight(int64_t a, int64_t amount, int bits, bool is_signed) {
  const int shift = static_cast<int>(static_cast<uint64_t>(amount) % static_cast<uint64_t>(bits));
  // Signed lanes are sign-extended, so the 64-bit arithmetic shift is exact;
  // unsigned lanes are zero-extended, so a logical shift is.
  if (is_signed) return a >> shift;
  return static_cast<int64_t>(static_cast<uint64_t>(a) >> shift);
}

int64_t FloatToInt(double value, int bits, bool is_signed) {
  if (std::isnan(value)) return 0;
  // WGSL clamps to the range representable in both types; the largest
  // float (f32) below 2^(bits-1) or 2^bits is that power minus one ulp.
  // Clamping in double at the exact power and then at the largest integer
  // gives the same result for f32 and f16 sources, whose values near the
  // limit are multiples of large powers of two.
  const double max_float = is_signed ? std::ldexp(1.0, bits - 1) : std::ldexp(1.0, bits);
  const double min_float = is_signed ? -std::ldexp(1.0, bits - 1) : 0.0;
  const double truncated = std::trunc(value);
  if (truncated <= min_float) return is_signed ? MinSigned(bits) : 0;
  if (truncated >= max_float) {
    // The largest f32 below 2^n is 2^n - 2^(n-24).
    const double largest = max_float - std::ldexp(1.0, (is_signed ? bits - 1 : bits) - 24);
    if (bits >= 64 && !is_signed) return static_cast<int64_t>(static_cast<uint64_t>(largest));
    return static_cast<int64_t>(largest);
  }
  if (bits >= 64 && !is_signed) return static_cast<int64_t>(static_cast<uint64_t>(truncated));
  return static_cast<int64_t>(truncated);
}

int32_t Dot4I8Packed(uint32_t a, uint32_t b) {
  int32_t sum = 0;
  for (int i = 0; i < 4; ++i) {
    const auto x = static_cast<int8_t>(static_cast<uint8_t>(a >> (8 * i)));
    const auto y = static_cast<int8_t>(static_cast<uint8_t>(b >> (8 * i)));
    sum += int32_t{x} * int32_t{y};
  }
  return sum;
}

uint32_t Dot4U8Packed(uint32_t a, uint32_t b) {
  uint32_t sum = 0;
  for (int i = 0; i < 4; ++i) {
    sum += ((a >> (8 * i)) & 0xffu) * ((b >> (8 * i)) & 0xffu);
  }
  return sum;
}

}  // namespace kiln::interp
