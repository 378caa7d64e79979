#include "kiln/codegen/wgsl_types.h"

#include <charconv>
#include <cmath>
#include <limits>

namespace kiln::codegen {

StatusOr<std::string> WgslValueType(ir::DataType type) {
  std::string scalar;
  ir::DataType element = type.element_of();
  if (element.is_bool()) {
    scalar = "bool";
  } else if (element.is_int8x4()) {
    if (type.lanes != 1) return Unimplemented("vectors of int8x4 have no WGSL type");
    return std::string("u32");
  } else if (element.is_float() && (element.bits == 32 || element.bits == 16)) {
    scalar = element.bits == 32 ? "f32" : "f16";
  } else if (element.is_integer() && element.bits == 32) {
    scalar = element.is_int() ? "i32" : "u32";
  } else if (element.is_integer() && element.bits == 64) {
    return Unimplemented("type ", type, " has no WGSL equivalent; run NarrowIndices first");
  } else {
    return Unimplemented("type ", type,
                         " has no WGSL equivalent (WGSL has bool, i32, u32, f32 and f16)");
  }
  if (type.lanes == 1) return scalar;
  if (type.lanes > 4) return Unimplemented("type ", type, ": WGSL vectors have 2 to 4 lanes");
  return StrCat("vec", type.lanes, "<", scalar, ">");
}

StatusOr<std::string> WgslStorageType(ir::DataType type) {
  if (type.is_bool()) return std::string("i32");
  return WgslValueType(type);
}

int WgslStorageBytes(ir::DataType type) {
  return type.is_float() && type.bits == 16 ? 2 : 4;
}

bool IsStorableType(ir::DataType type) {
  return type.is_kernel_buffer_element();
}

std::string WgslFloatLiteral(double value, int bits) {
  // Shortest decimal that reads back as the same float; every f16 value is
  // exactly representable as a float.
  char digits[64];
  auto result = std::to_chars(digits, digits + sizeof(digits), static_cast<float>(value));
  std::string text(digits, result.ptr);
  if (std::fabs(static_cast<float>(value)) == std::numeric_limits<float>::max()) {
    // The shortest decimal, 3.4028235e38, lies above the largest f32 and
    // WGSL refuses it as unrepresentable; this one lies below and rounds to it.
    text = value < 0 ? "-3.40282346e+38" : "3.40282346e+38";
  }
  text += bits == 16 ? "h" : "f";
  return text[0] == '-' ? "(" + text + ")" : text;
}

std::string WgslIntLiteral(int64_t value, bool is_signed) {
  if (!is_signed) return StrCat(static_cast<uint32_t>(value), "u");
  if (value == std::numeric_limits<int32_t>::min()) return "i32(-2147483648)";
  if (value < 0) return StrCat("(", value, "i)");
  return StrCat(value, "i");
}

}  // namespace kiln::codegen
