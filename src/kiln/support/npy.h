// NumPy's .npy array files: reading and writing the little-endian numeric
// arrays kiln's kernels take, with no dependency beyond kiln/support.
//
// Supported: format versions 1.0, 2.0 and 3.0 (3.0 differs only in that the
// header is UTF-8, which the header's ASCII grammar does not notice); C order
// only; dtypes `<f4`, `<f2`, `<i4`, `<u4` and the one-byte `|i1`, `|u1`,
// `|b1` (`=` for native order is read as `<`; a one-byte dtype may also be
// spelt with `<` or `=`). Big-endian data, Fortran order, structured or
// other dtypes, and object arrays are errors. The header is the Python
// dictionary literal NumPy writes: the keys 'descr', 'fortran_order' and
// 'shape' exactly once each, strings in single or double quotes, True or
// False, and a tuple of non-negative integers.
//
// Every error says what is wrong; ReadNpyFile and WriteNpyFile also name
// the file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/support/status.h"

namespace kiln::npy {

enum class DType : uint8_t { kF32, kF16, kI32, kU32, kI8, kU8, kBool };

// The descr NumPy writes: "<f4", "<f2", "<i4", "<u4", "|i1", "|u1", "|b1".
std::string_view DescrOf(DType t);
// A short name for messages: "f32", "f16", "i32", "u32", "i8", "u8", "bool".
std::string_view NameOf(DType t);
// Bytes per element.
uint32_t ItemSize(DType t);

struct Array {
  DType dtype = DType::kF32;
  std::vector<uint64_t> shape;  // () for a scalar (one element)
  std::string data;             // the elements, little-endian, C order

  // The product of the shape (1 for a scalar).
  uint64_t elements() const;
  // "(3, 4)", "(3,)", "()" as in the header.
  std::string ShapeText() const;
};

// Parses a whole .npy file's bytes: the magic, the version, the header and
// exactly elements * itemsize bytes of data (a shorter file is truncated,
// a longer one has trailing bytes: both errors). kDataLoss on a malformed
// file, kInvalidArgument on a well-formed one kiln does not support.
StatusOr<Array> Parse(std::string_view bytes);

// The file at `path`, read through ReadInputFile and parsed; errors are
// prefixed with the path.
StatusOr<Array> ReadNpyFile(const std::string& path);

// A version 1.0 file (2.0 when the header does not fit 1.0's 16-bit
// length) of `array`, the header padded so the data starts at a multiple of
// 64 bytes. kInvalidArgument when the data's size does not match the shape.
StatusOr<std::string> Serialize(const Array& array);

// Serialize, then write the result to `path` through a temporary file
// renamed into place (WriteFileAtomically).
Status WriteNpyFile(const std::string& path, const Array& array);

}  // namespace kiln::npy
