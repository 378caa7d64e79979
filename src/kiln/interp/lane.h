// The interpreter's internal representation of one lane of one thread's
// value, and the conversions between lanes, memory and types.
//
// A Lane is 8 bytes: integers, bools (0/1) and int8x4 (its u32 bit pattern)
// in `i`, normalised to their type as described in wgsl_semantics.h; floats
// in `f`, always exactly representable in their type (f16 and f32 values are
// rounded after every operation).
#pragma once

#include <cstdint>

#include "kiln/interp/half.h"
#include "kiln/ir/types.h"

namespace kiln::interp {

union Lane {
  int64_t i;
  double f;
};

// Reads the element of scalar type `elem` stored at `bytes` (kernel ABI layout).
Lane LoadElement(ir::DataType elem, const uint8_t* bytes);
// Writes `value`, of scalar type `elem`, to `bytes`.
void StoreElement(ir::DataType elem, Lane value, uint8_t* bytes);

// Value conversion (a cast) between scalar types, with WGSL's rules.
Lane CastLane(ir::DataType from, ir::DataType to, Lane value);

// The bit pattern of a lane of scalar type `t` (t.bits wide; bool is 1 bit)
// and back.
uint64_t LaneBits(ir::DataType t, Lane value);
Lane LaneFromBits(ir::DataType t, uint64_t bits);

// Rounds a float result computed in float (or, for f64, double) to the
// scalar float type `t`.
inline double RoundFloat(ir::DataType t, double value) {
  if (t.bits == 64) return value;
  if (t.bits == 32) return static_cast<float>(value);
  return RoundToHalf(static_cast<float>(value));
}

}  // namespace kiln::interp
