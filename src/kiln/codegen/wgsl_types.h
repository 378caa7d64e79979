// WGSL spellings of kiln IR types and constants.
#pragma once

#include <string>

#include "kiln/ir/types.h"
#include "kiln/support/status.h"

namespace kiln::codegen {

// The WGSL type of an IR value: bool, i32, u32, f32, f16 and their vec2/3/4
// forms; int8x4 is u32 (four packed i8, the operand type of dot4I8Packed).
// 64-bit, 8-bit and 16-bit integers and f64 have no WGSL type: an error that
// says which pass or rewrite is missing.
StatusOr<std::string> WgslValueType(ir::DataType type);

// The element type of a WGSL array holding IR elements of `type` (scalar):
// bool is stored as i32 (WGSL bool is not host-shareable and kiln keeps one
// layout for every memory scope); everything else as WgslValueType.
StatusOr<std::string> WgslStorageType(ir::DataType type);

// Bytes one array element of WgslStorageType(type) occupies.
int WgslStorageBytes(ir::DataType type);

// True if `type` is a supported element type of a buffer.
bool IsStorableType(ir::DataType type);

// A finite f32/f16 value as a WGSL literal with suffix (e.g. "0.1f",
// "(-2.5h)"). Precondition: std::isfinite(value).
std::string WgslFloatLiteral(double value, int bits);

// An i32/u32 value as a WGSL literal ("7i", "(-7i)", "7u"); i32's minimum,
// which has no literal spelling, is "i32(-2147483648)".
std::string WgslIntLiteral(int64_t value, bool is_signed);

}  // namespace kiln::codegen
