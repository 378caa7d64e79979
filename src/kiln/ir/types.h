// DataType: the type of every kiln IR value.
//
// A DataType is a small value {code, bits, lanes}. Scalars have lanes == 1;
// vectors have 2 to 4 lanes of one scalar type. Names in the text form:
//   i8 i16 i32 i64  u8 u16 u32 u64  f16 f32 f64  bool  handle  int8x4
//   vectors append "x<lanes>": f32x4, i32x2, f16x2, boolx4, u8x4.
// `int8x4` is not a vector: it is one 32-bit value holding four packed i8
// (the operand type of dot4i8), with lanes == 1. `i8x4` is a 4-lane vector.
// `handle` is the type of a pointer to a buffer; it never appears as the type
// of an arithmetic value.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

#include "kiln/support/status.h"

namespace kiln::ir {

enum class TypeCode : uint8_t {
  kInt,     // two's complement signed integer, 8/16/32/64 bits
  kUInt,    // unsigned integer, 8/16/32/64 bits
  kFloat,   // IEEE 754 binary16/32/64
  kBool,    // true/false; bits == 1 (storage size is a codegen matter)
  kHandle,  // pointer to a buffer; bits == 64
  kInt8x4,  // four i8 packed into 32 bits; bits == 32, lanes == 1
};

struct DataType {
  TypeCode code = TypeCode::kInt;
  uint8_t bits = 32;
  uint16_t lanes = 1;

  static constexpr DataType Int(int bits, int lanes = 1) {
    return {TypeCode::kInt, static_cast<uint8_t>(bits), static_cast<uint16_t>(lanes)};
  }
  static constexpr DataType UInt(int bits, int lanes = 1) {
    return {TypeCode::kUInt, static_cast<uint8_t>(bits), static_cast<uint16_t>(lanes)};
  }
  static constexpr DataType Float(int bits, int lanes = 1) {
    return {TypeCode::kFloat, static_cast<uint8_t>(bits), static_cast<uint16_t>(lanes)};
  }
  static constexpr DataType Bool(int lanes = 1) {
    return {TypeCode::kBool, 1, static_cast<uint16_t>(lanes)};
  }
  static constexpr DataType Handle() { return {TypeCode::kHandle, 64, 1}; }
  static constexpr DataType Int8x4() { return {TypeCode::kInt8x4, 32, 1}; }

  constexpr bool is_int() const { return code == TypeCode::kInt; }
  constexpr bool is_uint() const { return code == TypeCode::kUInt; }
  // Signed or unsigned integer (not bool, not int8x4).
  constexpr bool is_integer() const { return is_int() || is_uint(); }
  constexpr bool is_float() const { return code == TypeCode::kFloat; }
  constexpr bool is_bool() const { return code == TypeCode::kBool; }
  constexpr bool is_handle() const { return code == TypeCode::kHandle; }
  constexpr bool is_int8x4() const { return code == TypeCode::kInt8x4; }
  // Integer or float: the types arithmetic (+ - * / % min max) accepts.
  constexpr bool is_numeric() const { return is_integer() || is_float(); }
  constexpr bool is_scalar() const { return lanes == 1; }
  constexpr bool is_vector() const { return lanes > 1; }
  // An element type a kernel's buffer parameter binds (the kernel ABI):
  // f32, f16, i32, u32, bool or int8x4.
  constexpr bool is_kernel_buffer_element() const {
    return is_scalar() && (is_bool() || is_int8x4() || (is_float() && (bits == 32 || bits == 16)) ||
                           (is_integer() && bits == 32));
  }

  // The scalar type of one lane.
  constexpr DataType element_of() const { return {code, bits, 1}; }
  constexpr DataType with_lanes(int n) const { return {code, bits, static_cast<uint16_t>(n)}; }

  // Bytes one value takes in memory: bits/8 per lane, bool counted as 4
  // bytes (the size WGSL gives it), int8x4 as 4.
  int StorageBytes() const;

  // True for a type kiln can represent: known code/bits, lanes 1..4 (only 1
  // for handle and int8x4).
  bool IsValid() const;

  // "f32", "i32x4", "bool", "int8x4", ...
  std::string ToString() const;

  // Inverse of ToString(); fails on names that are not valid types.
  static StatusOr<DataType> FromString(std::string_view name);

  friend constexpr bool operator==(const DataType& a, const DataType& b) {
    return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
  }
  friend constexpr bool operator!=(const DataType& a, const DataType& b) { return !(a == b); }
};

std::ostream& operator<<(std::ostream& os, const DataType& t);

// `value` rounded (to nearest, ties to even) to the precision and range of
// the scalar float type `t` (f16, f32 or f64); overflow gives +-infinity.
double RoundToFloatType(DataType t, double value);
// The nonnegative decimal `text` (digits, a point, an exponent, as strtod
// reads them) rounded once, to nearest with ties to even, to the float type
// `t`: +infinity past its range. (Rounding first to double and then to `t`
// can land on a halfway point of `t` and go the wrong way.)
double DecimalToFloatType(DataType t, const char* text);
// Whether a finite `value` rounds to infinity in the float type `t`: its
// magnitude at least the largest finite value plus half an ulp (65520 for
// f16, 2^128 - 2^103 for f32; f64's own overflow for f64).
bool RoundsToInfinity(DataType t, double value);

// `value` wrapped to the integer type `t` (bits and signedness of its lanes):
// sign-extended for signed types, zero-extended for unsigned ones.
int64_t WrapToIntType(DataType t, int64_t value);

// The common scalar types.
inline constexpr DataType kI8 = DataType::Int(8);
inline constexpr DataType kI16 = DataType::Int(16);
inline constexpr DataType kI32 = DataType::Int(32);
inline constexpr DataType kI64 = DataType::Int(64);
inline constexpr DataType kU8 = DataType::UInt(8);
inline constexpr DataType kU16 = DataType::UInt(16);
inline constexpr DataType kU32 = DataType::UInt(32);
inline constexpr DataType kU64 = DataType::UInt(64);
inline constexpr DataType kF16 = DataType::Float(16);
inline constexpr DataType kF32 = DataType::Float(32);
inline constexpr DataType kF64 = DataType::Float(64);
inline constexpr DataType kBool = DataType::Bool();
inline constexpr DataType kHandle = DataType::Handle();
inline constexpr DataType kInt8x4 = DataType::Int8x4();

}  // namespace kiln::ir
