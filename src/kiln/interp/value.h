// The values the interpreter exchanges with its callers: scalar Values and
// HostBuffers (a tensor's raw bytes with its element type and shape).
//
// Memory layout of a HostBuffer is the kernel ABI's: elements are packed
// little-endian at DataType::StorageBytes() each; bool elements are 32-bit
// integers (0 or 1 when written by a kernel, any non-zero value reads as
// true); int8x4 elements are one u32 holding four i8; f16 elements are
// IEEE binary16.
#pragma once

#include <cstdint>
#include <cstring>
#include <iosfwd>
#include <string>
#include <variant>
#include <vector>

#include "kiln/ir/types.h"
#include "kiln/support/status.h"

namespace kiln::interp {

// A scalar of any non-handle IR type. Integers, bools (0/1) and int8x4 (the
// u32 bit pattern) live in `i`, normalised to their type (sign-extended when
// signed, zero-extended when unsigned); floats live in `f`, rounded to their
// type.
struct Value {
  ir::DataType dtype = ir::kI32;
  int64_t i = 0;
  double f = 0;

  static Value Int(ir::DataType dtype, int64_t value);
  static Value Float(ir::DataType dtype, double value);
  static Value I32(int32_t value) { return Int(ir::kI32, value); }
  static Value U32(uint32_t value) { return Int(ir::kU32, value); }
  static Value F32(float value) { return Float(ir::kF32, value); }
  static Value Bool(bool value) { return Int(ir::kBool, value ? 1 : 0); }

  // The value as an integer (floats truncated and saturated like a cast).
  int64_t AsInt() const;
  // The value as a double (integers converted).
  double AsDouble() const;
  // "42", "-1.5", "true".
  std::string ToString() const;
};

bool operator==(const Value& a, const Value& b);
std::ostream& operator<<(std::ostream& os, const Value& v);

// A tensor in host memory, bound to a buffer parameter. Run reads and writes
// `bytes` in place.
struct HostBuffer {
  ir::DataType dtype = ir::kF32;  // element type (scalar)
  std::vector<int64_t> shape;     // informational; the kernel's own shape is checked
  std::vector<uint8_t> bytes;

  HostBuffer() = default;
  // Zero-filled, sized for the product of `shape`.
  HostBuffer(ir::DataType dtype, std::vector<int64_t> shape);

  int64_t num_elements() const;

  // Element access through Values (converting like the interpreter's own
  // loads and stores; f16 rounds, integers wrap to the element type).
  Value Get(int64_t index) const;
  void Set(int64_t index, const Value& value);

  // Raw typed access for the plain C++ types whose layout matches the element
  // type (float for f32, int32_t for i32 and bool, uint32_t for u32/int8x4, ...).
  template <typename T>
  T At(int64_t index) const {
    T value;
    std::memcpy(&value, bytes.data() + index * sizeof(T), sizeof(T));
    return value;
  }
  template <typename T>
  void SetAt(int64_t index, T value) {
    std::memcpy(bytes.data() + index * sizeof(T), &value, sizeof(T));
  }
  template <typename T>
  std::vector<T> ToVector() const {
    std::vector<T> out(bytes.size() / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
    return out;
  }
  template <typename T>
  static HostBuffer FromVector(ir::DataType dtype, std::vector<int64_t> shape,
                               const std::vector<T>& values) {
    HostBuffer buffer(dtype, std::move(shape));
    buffer.bytes.resize(values.size() * sizeof(T));
    if (!values.empty()) std::memcpy(buffer.bytes.data(), values.data(), buffer.bytes.size());
    return buffer;
  }
};

// One argument of a kernel call: a buffer for a buffer parameter, a scalar
// for a scalar parameter (its dtype must be the parameter's).
using ArgValue = std::variant<HostBuffer, Value>;

}  // namespace kiln::interp
