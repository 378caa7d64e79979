#include "kiln/interp/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace kiln::interp {
namespace {

TEST(HalfTest, ExactValuesRoundTrip) {
  for (float value : {0.0f, 1.0f, -2.5f, 0.333251953125f, 65504.0f, -65504.0f}) {
    EXPECT_EQ(HalfBitsToFloat(FloatToHalfBits(value)), value) << value;
  }
  EXPECT_EQ(FloatToHalfBits(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalfBits(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalfBits(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalfBits(-0.0f), 0x8000);
}

TEST(HalfTest, RoundsToNearestEven) {
  // Half has 10 mantissa bits: around 1.0 the spacing is 2^-10.
  const float ulp = std::ldexp(1.0f, -10);
  EXPECT_EQ(RoundToHalf(1.0f + ulp / 2), 1.0f);                // tie to even (down)
  EXPECT_EQ(RoundToHalf(1.0f + 3 * ulp / 2), 1.0f + 2 * ulp);  // tie to even (up)
  EXPECT_EQ(RoundToHalf(1.0f + ulp * 0.51f), 1.0f + ulp);
  EXPECT_EQ(RoundToHalf(1.0f + ulp * 0.49f), 1.0f);
  // 1/3 is 0x3555 in half.
  EXPECT_EQ(FloatToHalfBits(1.0f / 3.0f), 0x3555);
}

TEST(HalfTest, OverflowAndSpecials) {
  EXPECT_EQ(FloatToHalfBits(65519.0f), 0x7bff);  // below the rounding threshold
  EXPECT_EQ(FloatToHalfBits(65520.0f), 0x7c00);  // the tie rounds to even: infinity
  EXPECT_EQ(FloatToHalfBits(1e10f), 0x7c00);
  EXPECT_EQ(FloatToHalfBits(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_TRUE(std::isnan(HalfBitsToFloat(FloatToHalfBits(std::nanf("")))));
  EXPECT_TRUE(std::isinf(HalfBitsToFloat(0x7c00)));
}

TEST(HalfTest, Subnormals) {
  const float smallest = std::ldexp(1.0f, -24);
  EXPECT_EQ(FloatToHalfBits(smallest), 0x0001);
  EXPECT_EQ(HalfBitsToFloat(0x0001), smallest);
  EXPECT_EQ(HalfBitsToFloat(0x03ff), 1023 * smallest);        // largest subnormal
  EXPECT_EQ(FloatToHalfBits(smallest / 2), 0x0000);           // tie to even: zero
  EXPECT_EQ(FloatToHalfBits(smallest * 1.5f), 0x0002);        // tie to even: two
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(FloatToHalfBits(1e-10f), 0x0000);
}

TEST(HalfTest, AllHalvesRoundTripThroughFloat) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float value = HalfBitsToFloat(static_cast<uint16_t>(bits));
    if (std::isnan(value)) continue;
    ASSERT_EQ(FloatToHalfBits(value), bits) << std::hex << bits;
  }
}

}  // namespace
}  // namespace kiln::interp
