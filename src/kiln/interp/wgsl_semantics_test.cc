#include "kiln/interp/wgsl_semantics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace kiln::interp {
namespace {

constexpr int64_t kI32Min = std::numeric_limits<int32_t>::min();

TEST(WgslSemanticsTest, WrapInt) {
  EXPECT_EQ(WrapInt(0x80000000u, 32, true), kI32Min);
  EXPECT_EQ(WrapInt(0x80000000u, 32, false), 0x80000000);
  EXPECT_EQ(WrapInt(300, 8, false), 44);
  EXPECT_EQ(WrapInt(200, 8, true), -56);
}

TEST(WgslSemanticsTest, TruncatingDivisionAndRemainder) {
  EXPECT_EQ(IntDiv(-7, 2, 32, true), -3);
  EXPECT_EQ(IntMod(-7, 2, 32, true), -1);
  EXPECT_EQ(IntDiv(7, -2, 32, true), -3);
  EXPECT_EQ(IntMod(7, -2, 32, true), 1);
  EXPECT_EQ(IntDiv(7, 0, 32, true), 7);  // x / 0 == x
  EXPECT_EQ(IntMod(7, 0, 32, true), 0);  // x % 0 == 0
  EXPECT_EQ(IntDiv(kI32Min, -1, 32, true), kI32Min);
  EXPECT_EQ(IntMod(kI32Min, -1, 32, true), 0);
  EXPECT_EQ(IntDiv(0xffffffff, 2, 32, false), 0x7fffffff);
}

TEST(WgslSemanticsTest, FloorDivisionAndModulo) {
  EXPECT_EQ(IntFloorDiv(-7, 2, 32, true), -4);
  EXPECT_EQ(IntFloorMod(-7, 2, 32, true), 1);
  EXPECT_EQ(IntFloorDiv(7, -2, 32, true), -4);
  EXPECT_EQ(IntFloorMod(7, -2, 32, true), -1);
  EXPECT_EQ(IntFloorDiv(-8, 2, 32, true), -4);
  EXPECT_EQ(IntFloorMod(-8, 2, 32, true), 0);
  EXPECT_EQ(IntFloorDiv(-7, -2, 32, true), 3);
  EXPECT_EQ(IntFloorMod(-7, -2, 32, true), -1);
  EXPECT_EQ(IntFloorDiv(5, 0, 32, true), 5);
  EXPECT_EQ(IntFloorMod(5, 0, 32, true), 0);
  EXPECT_EQ(IntFloorDiv(kI32Min, -1, 32, true), kI32Min);
  EXPECT_EQ(IntFloorMod(kI32Min, -1, 32, true), 0);
}

TEST(WgslSemanticsTest, ShiftsTakeTheAmountModuloTheWidth) {
  EXPECT_EQ(ShiftLeft(1, 33, 32, true), 2);
  EXPECT_EQ(ShiftLeft(1, 31, 32, true), kI32Min);
  EXPECT_EQ(ShiftRight(-16, 2, 32, true), -4);                  // arithmetic
  EXPECT_EQ(ShiftRight(0xfffffff0, 2, 32, false), 0x3ffffffc);  // logical
  EXPECT_EQ(ShiftRight(256, 40, 32, false), 1);
}

TEST(WgslSemanticsTest, FloatToIntSaturates) {
  EXPECT_EQ(FloatToInt(3.9, 32, true), 3);
  EXPECT_EQ(FloatToInt(-3.9, 32, true), -3);
  EXPECT_EQ(FloatToInt(1e20, 32, true), 2147483520);  // largest f32 below 2^31
  EXPECT_EQ(FloatToInt(-1e20, 32, true), kI32Min);
  EXPECT_EQ(FloatToInt(1e20, 32, false), 4294967040);  // largest f32 below 2^32
  EXPECT_EQ(FloatToInt(-5.0, 32, false), 0);
  EXPECT_EQ(FloatToInt(std::nan(""), 32, true), 0);
  EXPECT_EQ(FloatToInt(INFINITY, 32, true), 2147483520);
}

TEST(WgslSemanticsTest, Dot4Packed) {
  // Bytes (low first): a = 1, -2, 3, -128; b = 5, 6, -7, -1.
  const uint32_t a = 0x8003fe01u;
  const uint32_t b = 0xfff90605u;
  EXPECT_EQ(Dot4I8Packed(a, b), 1 * 5 + -2 * 6 + 3 * -7 + -128 * -1);
  EXPECT_EQ(Dot4U8Packed(0x01020304u, 0x01010101u), 10u);
}

}  // namespace
}  // namespace kiln::interp
