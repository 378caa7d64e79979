#include "kiln/ir/types.h"

#include <algorithm>
#include <cfenv>
#include <charconv>
#include <cmath>
#include <cstdlib>

namespace kiln::ir {
namespace {

bool IsValidScalar(TypeCode code, int bits) {
  switch (code) {
    case TypeCode::kInt:
    case TypeCode::kUInt:
      return bits == 8 || bits == 16 || bits == 32 || bits == 64;
    case TypeCode::kFloat:
      return bits == 16 || bits == 32 || bits == 64;
    case TypeCode::kBool:
      return bits == 1;
    case TypeCode::kHandle:
      return bits == 64;
    case TypeCode::kInt8x4:
      return bits == 32;
  }
  return false;
}

}  // namespace

bool DataType::IsValid() const {
  if (!IsValidScalar(code, bits)) return false;
  if (code == TypeCode::kHandle || code == TypeCode::kInt8x4) return lanes == 1;
  return lanes >= 1 && lanes <= 4;
}

int DataType::StorageBytes() const {
  int lane_bytes = is_bool() ? 4 : bits / 8;
  return lane_bytes * lanes;
}

std::string DataType::ToString() const {
  std::string s;
  switch (code) {
    case TypeCode::kInt:
      s = "i" + std::to_string(bits);
      break;
    case TypeCode::kUInt:
      s = "u" + std::to_string(bits);
      break;
    case TypeCode::kFloat:
      s = "f" + std::to_string(bits);
      break;
    case TypeCode::kBool:
      s = "bool";
      break;
    case TypeCode::kHandle:
      s = "handle";
      break;
    case TypeCode::kInt8x4:
      s = "int8x4";
      break;
  }
  if (lanes != 1) s += "x" + std::to_string(lanes);
  return s;
}

StatusOr<DataType> DataType::FromString(std::string_view name) {
  auto invalid = [&] { return InvalidArgument("'", name, "' is not a type name"); };
  if (name == "handle") return Handle();
  if (name == "int8x4") return Int8x4();
  // Split "<scalar>x<lanes>".
  int lanes = 1;
  std::string_view scalar = name;
  if (size_t x = name.find('x'); x != std::string_view::npos) {
    std::string_view lane_text = name.substr(x + 1);
    if (lane_text.size() != 1 || lane_text[0] < '2' || lane_text[0] > '4') return invalid();
    lanes = lane_text[0] - '0';
    scalar = name.substr(0, x);
  }
  DataType t;
  if (scalar == "bool") {
    t = Bool(lanes);
  } else {
    if (scalar.size() < 2) return invalid();
    TypeCode code;
    switch (scalar[0]) {
      case 'i':
        code = TypeCode::kInt;
        break;
      case 'u':
        code = TypeCode::kUInt;
        break;
      case 'f':
        code = TypeCode::kFloat;
        break;
      default:
        return invalid();
    }
    int bits = 0;
    std::string_view digits = scalar.substr(1);
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), bits);
    if (ec != std::errc() || ptr != digits.data() + digits.size() || digits[0] == '0') {
      return invalid();
    }
    if (!IsValidScalar(code, bits)) return invalid();
    t = DataType{code, static_cast<uint8_t>(bits), static_cast<uint16_t>(lanes)};
  }
  if (!t.IsValid()) return invalid();
  return t;
}

std::ostream& operator<<(std::ostream& os, const DataType& t) {
  return os << t.ToString();
}

}  // namespace kiln::ir

namespace kiln::ir {

bool RoundsToInfinity(DataType t, double value) {
  const double limit = t.bits == 16   ? 65520.0
                       : t.bits == 32 ? std::ldexp(1.0, 128) - std::ldexp(1.0, 103)
                                      : HUGE_VAL;
  return std::fabs(value) >= limit;
}

double RoundToFloatType(DataType t, double value) {
  if (t.bits == 64 || std::isnan(value) || std::isinf(value)) return value;
  // Past the range: infinity (a double cast to float there is undefined).
  if (RoundsToInfinity(t, value)) return std::copysign(INFINITY, value);
  if (t.bits == 32) return static_cast<double>(static_cast<float>(value));
  // binary16: 10 explicit mantissa bits, exponents -14..15, subnormals down
  // to 2^-24. Scaling by a power of two is exact, so rounding the scaled
  // value to an integer rounds the mantissa with the default ties-to-even mode.
  double magnitude = std::fabs(value);
  if (magnitude == 0) return value;
  int exponent = std::ilogb(magnitude);
  if (exponent < -14) exponent = -14;
  double quantum = std::ldexp(1.0, exponent - 10);
  return std::nearbyint(value / quantum) * quantum;
}

double DecimalToFloatType(DataType t, const char* text) {
  const double nearest = std::strtod(text, nullptr);
  const double rounded = RoundToFloatType(t, nearest);
  if (t.bits == 64 || rounded == nearest || std::isinf(nearest)) return rounded;
  // Past the largest finite value the next value is the next power of two:
  // a decimal halfway to it rounds to infinity (ties go to the even one).
  const double overflow = std::ldexp(1.0, t.bits == 16 ? 16 : 128);
  const double r = std::isinf(rounded) ? overflow : rounded;
  // Is `nearest` halfway between r and another value of t?
  const double other = 2 * nearest - r;
  if (other != overflow && RoundToFloatType(t, other) != other) return rounded;
  // Which side of that halfway point is the decimal? strtod rounding down
  // and rounding up bound it (equal where the decimal is exactly halfway:
  // ties to even, as RoundToFloatType chose).
  const int mode = std::fegetround();
  std::fesetround(FE_DOWNWARD);
  const double below = std::strtod(text, nullptr);
  std::fesetround(FE_UPWARD);
  const double above = std::strtod(text, nullptr);
  std::fesetround(mode);
  if (below == above) return rounded;
  const double result = below == nearest ? std::max(r, other) : std::min(r, other);
  return result == overflow ? HUGE_VAL : result;
}

int64_t WrapToIntType(DataType t, int64_t value) {
  if (t.bits >= 64) return value;
  uint64_t mask = (uint64_t{1} << t.bits) - 1;
  uint64_t bits = static_cast<uint64_t>(value) & mask;
  if (t.is_int() && (bits >> (t.bits - 1)) != 0) bits |= ~mask;
  return static_cast<int64_t>(bits);
}

}  // namespace kiln::ir
