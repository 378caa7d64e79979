#include "kiln/interp/lane.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "kiln/interp/half.h"
#include "kiln/interp/wgsl_semantics.h"

namespace kiln::interp {
namespace {

template <typename T>
T ReadRaw(const uint8_t* bytes) {
  T value;
  std::memcpy(&value, bytes, sizeof(T));
  return value;
}

template <typename T>
void WriteRaw(T value, uint8_t* bytes) {
  std::memcpy(bytes, &value, sizeof(T));
}

}  // namespace

Lane LoadElement(ir::DataType elem, const uint8_t* bytes) {
  Lane lane;
  switch (elem.code) {
    case ir::TypeCode::kFloat:
      if (elem.bits == 32) {
        lane.f = ReadRaw<float>(bytes);
      } else if (elem.bits == 16) {
        lane.f = HalfBitsToFloat(ReadRaw<uint16_t>(bytes));
      } else {
        lane.f = ReadRaw<double>(bytes);
      }
      return lane;
    case ir::TypeCode::kBool:
      lane.i = ReadRaw<int32_t>(bytes) != 0 ? 1 : 0;
      return lane;
    case ir::TypeCode::kInt8x4:
      lane.i = ReadRaw<uint32_t>(bytes);
      return lane;
    default: {
      uint64_t raw = 0;
      std::memcpy(&raw, bytes, elem.bits / 8);  // little-endian host
      lane.i = WrapInt(raw, elem.bits, elem.is_int());
      return lane;
    }
  }
}

void StoreElement(ir::DataType elem, Lane value, uint8_t* bytes) {
  switch (elem.code) {
    case ir::TypeCode::kFloat:
      if (elem.bits == 32) {
        WriteRaw(static_cast<float>(value.f), bytes);
      } else if (elem.bits == 16) {
        WriteRaw(FloatToHalfBits(static_cast<float>(value.f)), bytes);
      } else {
        WriteRaw(value.f, bytes);
      }
      return;
    case ir::TypeCode::kBool:
      WriteRaw<int32_t>(value.i != 0 ? 1 : 0, bytes);
      return;
    case ir::TypeCode::kInt8x4:
      WriteRaw(static_cast<uint32_t>(value.i), bytes);
      return;
    default: {
      const auto raw = static_cast<uint64_t>(value.i);
      std::memcpy(bytes, &raw, elem.bits / 8);
      return;
    }
  }
}

Lane CastLane(ir::DataType from, ir::DataType to, Lane value) {
  Lane out;
  if (to.is_bool()) {
    out.i = from.is_float() ? (value.f != 0.0 ? 1 : 0) : (value.i != 0 ? 1 : 0);
    return out;
  }
  if (to.is_float()) {
    if (from.is_float()) {
      // f64 -> f16 rounds once, exactly; narrower sources are exact in float.
      out.f = from.bits == 64 ? ir::RoundToFloatType(to, value.f) : RoundFloat(to, value.f);
    } else if (from.is_uint() && from.bits == 64) {
      out.f = RoundFloat(to, to.bits == 64 ? static_cast<double>(static_cast<uint64_t>(value.i))
                                           : static_cast<float>(static_cast<uint64_t>(value.i)));
    } else {
      // An integer converts to float with one rounding (to nearest even);
      // int64 -> float directly, not through double, to avoid rounding twice.
      out.f = to.bits == 64 ? static_cast<double>(value.i)
                            : RoundFloat(to, static_cast<float>(value.i));
    }
    return out;
  }
  // Integer (or int8x4) target.
  const bool is_signed = to.is_int();
  if (from.is_float()) {
    out.i = FloatToInt(value.f, to.bits, is_signed);
  } else {
    // Integers wrap; bool is already 0/1.
    out.i = WrapInt(static_cast<uint64_t>(value.i), to.bits, is_signed);
  }
  return out;
}

uint64_t LaneBits(ir::DataType t, Lane value) {
  if (t.is_float()) {
    if (t.bits == 32) return std::bit_cast<uint32_t>(static_cast<float>(value.f));
    if (t.bits == 16) return FloatToHalfBits(static_cast<float>(value.f));
    return std::bit_cast<uint64_t>(value.f);
  }
  const uint64_t raw = static_cast<uint64_t>(value.i);
  if (t.bits >= 64) return raw;
  return raw & ((uint64_t{1} << t.bits) - 1);
}

Lane LaneFromBits(ir::DataType t, uint64_t bits) {
  Lane out;
  if (t.is_float()) {
    if (t.bits == 32) {
      out.f = std::bit_cast<float>(static_cast<uint32_t>(bits));
    } else if (t.bits == 16) {
      out.f = HalfBitsToFloat(static_cast<uint16_t>(bits));
    } else {
      out.f = std::bit_cast<double>(bits);
    }
    return out;
  }
  if (t.is_bool()) {
    out.i = (bits & 1u) != 0 ? 1 : 0;
    return out;
  }
  out.i = WrapInt(bits, t.bits, t.is_int());
  return out;
}

}  // namespace kiln::interp
