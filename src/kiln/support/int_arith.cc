#include "kiln/support/int_arith.h"

#include <limits>

namespace kiln {
namespace {

int64_t MinSigned(int bits) {
  return bits >= 64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (bits - 1));
}

// Unsigned values are zero-extended, so bit 63 is only ever set for u64;
// compare those as unsigned.
bool IsUnsigned64(int bits, bool is_signed) {
  return !is_signed && bits >= 64;
}

}  // namespace

int64_t IntDiv(int64_t a, int64_t b, int bits, bool is_signed) {
  if (b == 0) return a;
  if (IsUnsigned64(bits, is_signed)) {
    return static_cast<int64_t>(static_cast<uint64_t>(a) / static_cast<uint64_t>(b));
  }
  if (is_signed && b == -1 && a == MinSigned(bits)) return a;
  return WrapInt(static_cast<uint64_t>(a / b), bits, is_signed);
}

int64_t IntMod(int64_t a, int64_t b, int bits, bool is_signed) {
  if (b == 0) return 0;
  if (IsUnsigned64(bits, is_signed)) {
    return static_cast<int64_t>(static_cast<uint64_t>(a) % static_cast<uint64_t>(b));
  }
  if (is_signed && b == -1) return 0;
  return a % b;
}

int64_t IntFloorDiv(int64_t a, int64_t b, int bits, bool is_signed) {
  const int64_t q = IntDiv(a, b, bits, is_signed);
  if (!is_signed || b == 0 || (b == -1 && a == MinSigned(bits))) return q;
  // Truncation rounded toward zero; step down when there is a remainder and
  // the exact quotient is negative.
  if ((a % b != 0) && ((a < 0) != (b < 0)))
    return WrapInt(static_cast<uint64_t>(q) - 1, bits, true);
  return q;
}

int64_t IntFloorMod(int64_t a, int64_t b, int bits, bool is_signed) {
  const int64_t r = IntMod(a, b, bits, is_signed);
  if (!is_signed || r == 0) return r;
  if ((r < 0) != (b < 0))
    return WrapInt(static_cast<uint64_t>(r) + static_cast<uint64_t>(b), bits, true);
  return r;
}

int64_t IntMin(int64_t a, int64_t b, int bits, bool is_signed) {
  if (IsUnsigned64(bits, is_signed)) {
    return static_cast<uint64_t>(a) < static_cast<uint64_t>(b) ? a : b;
  }
  return a < b ? a : b;
}

int64_t IntMax(int64_t a, int64_t b, int bits, bool is_signed) {
  if (IsUnsigned64(bits, is_signed)) {
    return static_cast<uint64_t>(a) < static_cast<uint64_t>(b) ? b : a;
  }
  return a < b ? b : a;
}

}  // namespace kiln
