#include "kiln/ir/types.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace kiln::ir {
namespace {

TEST(DataTypeTest, NamesRoundTrip) {
  for (const char* name :
       {"i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "f32", "f64", "bool", "handle",
        "int8x4", "f32x4", "i32x2", "f16x2", "boolx3", "u8x4"}) {
    StatusOr<DataType> t = DataType::FromString(name);
    ASSERT_TRUE(t.ok()) << name;
    EXPECT_EQ(t->ToString(), name);
    EXPECT_TRUE(t->IsValid()) << name;
  }
}

TEST(DataTypeTest, RejectsInvalidNames) {
  for (const char* name : {"", "i", "i7", "i032", "f8", "u128", "f32x1", "f32x5", "f32x04",
                           "int8x4x2", "handlex2", "bool1", "x4", "float"}) {
    EXPECT_FALSE(DataType::FromString(name).ok()) << name;
  }
}

TEST(DataTypeTest, Predicates) {
  EXPECT_TRUE(kI32.is_integer());
  EXPECT_TRUE(kU8.is_uint());
  EXPECT_FALSE(kBool.is_numeric());
  EXPECT_FALSE(kInt8x4.is_integer());
  EXPECT_TRUE(kInt8x4.is_scalar());
  EXPECT_TRUE(kF16.with_lanes(2).is_vector());
  EXPECT_EQ(kF32.with_lanes(4).element_of(), kF32);
  EXPECT_FALSE(DataType::Int8x4().with_lanes(2).IsValid());
}

TEST(DataTypeTest, StorageBytes) {
  EXPECT_EQ(kF32.StorageBytes(), 4);
  EXPECT_EQ(kF16.with_lanes(2).StorageBytes(), 4);
  EXPECT_EQ(kBool.StorageBytes(), 4);
  EXPECT_EQ(kInt8x4.StorageBytes(), 4);
  EXPECT_EQ(kI64.StorageBytes(), 8);
  EXPECT_EQ(kU8.with_lanes(4).StorageBytes(), 4);
}

TEST(DataTypeTest, RoundToF16) {
  EXPECT_EQ(RoundToFloatType(kF16, 65504.0), 65504.0);
  EXPECT_EQ(RoundToFloatType(kF16, 65519.0), 65504.0);
  EXPECT_TRUE(std::isinf(RoundToFloatType(kF16, 65520.0)));
  EXPECT_EQ(RoundToFloatType(kF16, std::ldexp(1.0, -24)), std::ldexp(1.0, -24));
  EXPECT_EQ(RoundToFloatType(kF16, std::ldexp(1.0, -26)), 0.0);  // below half the smallest
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even gives 1.
  EXPECT_EQ(RoundToFloatType(kF16, 1.0 + std::ldexp(1.0, -11)), 1.0);
  EXPECT_EQ(RoundToFloatType(kF16, 1.0 + 3 * std::ldexp(1.0, -11)), 1.0 + std::ldexp(1.0, -9));
  EXPECT_EQ(RoundToFloatType(kF16, 0.1), 0.0999755859375);
  EXPECT_EQ(RoundToFloatType(kF32, 0.1), static_cast<double>(0.1f));
}

// Decimals round once to the type: the double nearest to them can be a
// halfway point of the type that the decimal is not.
TEST(DataTypeTest, DecimalsRoundOnceToTheType) {
  const double p = std::ldexp(1.0, -23), h = std::ldexp(1.0, -10);
  // 1 + 2^-23 + 2^-24 (halfway in f32), less or more than it by 1e-25.
  EXPECT_EQ(DecimalToFloatType(kF32, "1.0000001788139343261718749"), 1.0 + p);
  EXPECT_EQ(DecimalToFloatType(kF32, "1.0000001788139343261718751"), 1.0 + 2 * p);
  EXPECT_EQ(DecimalToFloatType(kF32, "1.00000017881393432617187500"), 1.0 + 2 * p);  // to even
  EXPECT_EQ(DecimalToFloatType(kF32, "1.0000000596046447753906250"), 1.0);  // 1 + 2^-24: even
  // 1 + 2^-10 + 2^-11 in f16, and the halfway points below 1 and at 0.
  EXPECT_EQ(DecimalToFloatType(kF16, "1.00146484374999999999"), 1.0 + h);
  EXPECT_EQ(DecimalToFloatType(kF16, "1.00146484375000000001"), 1.0 + 2 * h);
  EXPECT_EQ(DecimalToFloatType(kF16, "1.00146484375"), 1.0 + 2 * h);
  EXPECT_EQ(DecimalToFloatType(kF16, "0.99975585937500000001"), 1.0);
  EXPECT_EQ(DecimalToFloatType(kF16, "0.99975585937499999999"), 1.0 - h / 2);
  EXPECT_EQ(DecimalToFloatType(kF16, "2.98023223876953125e-8"), 0.0);  // 2^-25: even
  EXPECT_EQ(DecimalToFloatType(kF16, "2.980232238769531250001e-8"), std::ldexp(1.0, -24));
  // Below the halfway point to infinity: the largest finite value.
  EXPECT_EQ(DecimalToFloatType(kF32, "340282356779733661637539395458142568447.0"),
            static_cast<double>(std::numeric_limits<float>::max()));
  EXPECT_TRUE(std::isinf(DecimalToFloatType(kF32, "340282356779733661637539395458142568448")));
  EXPECT_EQ(DecimalToFloatType(kF16, "65519.99999999999999"), 65504.0);
  EXPECT_TRUE(std::isinf(DecimalToFloatType(kF16, "65520")));
  EXPECT_TRUE(std::isinf(DecimalToFloatType(kF16, "65536.00000000000001")));
  EXPECT_TRUE(std::isinf(DecimalToFloatType(kF32, "1e39")));
  // Ordinary decimals, and f64 as strtod reads it.
  EXPECT_EQ(DecimalToFloatType(kF32, "0.1"), static_cast<double>(0.1f));
  EXPECT_EQ(DecimalToFloatType(kF16, "0.1"), 0.0999755859375);
  EXPECT_EQ(DecimalToFloatType(kF64, "0.1"), 0.1);
  EXPECT_EQ(DecimalToFloatType(kF32, "0"), 0.0);
}

TEST(DataTypeTest, WrapToIntType) {
  EXPECT_EQ(WrapToIntType(kU8, 300), 44);
  EXPECT_EQ(WrapToIntType(kI8, 200), -56);
  EXPECT_EQ(WrapToIntType(kI32, int64_t{1} << 31), -(int64_t{1} << 31));
  EXPECT_EQ(WrapToIntType(kU32, -1), 4294967295);
  EXPECT_EQ(WrapToIntType(kI64, -5), -5);
}

}  // namespace
}  // namespace kiln::ir
