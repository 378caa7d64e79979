// The value semantics of the interpreter, kernel by kernel: integer division
// and modulo, shifts and bit operations, casts, f16 rounding, bool buffers,
// int8x4 dot products, math intrinsics, select vs if_then_else, subgroups.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <functional>

#include "kiln/interp/half.h"
#include "kiln/interp/interp_test_util.h"
#include "kiln/interp/interpreter.h"
#include "kiln/ir/ir.h"

namespace kiln::interp {
namespace {

using namespace kiln::ir;  // NOLINT(build/namespaces): kernels read better unqualified
using testing::Contents;
using testing::MakeBuffer;
using testing::Poisoned;
using testing::RandomFloats;
using testing::RandomInts;
using testing::RandomU32s;
using testing::Verified;

// A kernel of `threads` threads computing out[t] = body(in_a[t], in_b[t]).
Function Elementwise(DataType in, DataType out_type, int threads,
                     const std::function<Expr(Expr, Expr)>& body) {
  IRBuilder b("elementwise");
  Buffer A = b.BufferParam("A", in, {threads});
  Buffer B = b.BufferParam("B", in, {threads});
  Buffer out = b.BufferParam("out", out_type, {threads});
  b.For("tx", LoopKind::kThreadX, 0, threads,
        [&](Var tx) { b.Store(out, {tx}, body(Load(A, {tx}), Load(B, {tx}))); });
  return Verified(b);
}

int32_t TruncDiv(int32_t a, int32_t b) {
  if (b == 0) return a;
  return a / b;
}
int32_t TruncMod(int32_t a, int32_t b) {
  if (b == 0) return 0;
  return a % b;
}
int32_t FloorDivRef(int32_t a, int32_t b) {
  if (b == 0) return a;
  return static_cast<int32_t>(std::floor(static_cast<double>(a) / b));
}
int32_t FloorModRef(int32_t a, int32_t b) {
  if (b == 0) return 0;
  return a - b * FloorDivRef(a, b);
}

TEST(SemanticsTest, IntegerDivisionAndModulo) {
  const int n = 256;
  std::vector<int32_t> a = RandomInts(n, 10, -50, 50);
  std::vector<int32_t> b = RandomInts(n, 11, -7, 7);  // zero included
  a[0] = std::numeric_limits<int32_t>::min();
  b[0] = -1;
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  struct Case {
    const char* name;
    std::function<Expr(Expr, Expr)> op;
    std::function<int32_t(int32_t, int32_t)> ref;
    int32_t min_by_minus_one;  // the one case C++ leaves undefined
  };
  const Case cases[] = {
      {"div", [](Expr x, Expr y) { return x / y; }, TruncDiv, kMin},
      {"mod", [](Expr x, Expr y) { return x % y; }, TruncMod, 0},
      {"floor_div", [](Expr x, Expr y) { return FloorDiv(x, y); }, FloorDivRef, kMin},
      {"floor_mod", [](Expr x, Expr y) { return FloorMod(x, y); }, FloorModRef, 0},
  };
  for (const Case& c : cases) {
    std::vector<ArgValue> args = {MakeBuffer(kI32, a), MakeBuffer(kI32, b), Poisoned(kI32, n)};
    ASSERT_TRUE(interp::Run(Elementwise(kI32, kI32, n, c.op), args).ok()) << c.name;
    std::vector<int32_t> result = Contents<int32_t>(args[2]);
    EXPECT_EQ(result[0], c.min_by_minus_one) << c.name;
    for (int i = 1; i < n; ++i) {
      EXPECT_EQ(result[i], c.ref(a[i], b[i])) << c.name << "(" << a[i] << ", " << b[i] << ")";
    }
  }
}

TEST(SemanticsTest, UnsignedDivisionAndWrapping) {
  const int n = 64;
  std::vector<uint32_t> a = RandomU32s(n, 12);
  std::vector<uint32_t> b = RandomU32s(n, 13);
  for (int i = 0; i < n; i += 4) b[i] %= 5;  // some zero divisors
  std::vector<ArgValue> args = {MakeBuffer(kU32, a), MakeBuffer(kU32, b), Poisoned(kU32, n)};
  ASSERT_TRUE(interp::Run(Elementwise(kU32, kU32, n,
                                      [](Expr x, Expr y) { return x / y + x % y + x * y - y; }),
                          args)
                  .ok());
  std::vector<uint32_t> result = Contents<uint32_t>(args[2]);
  for (int i = 0; i < n; ++i) {
    const uint32_t div = b[i] == 0 ? a[i] : a[i] / b[i];
    const uint32_t mod = b[i] == 0 ? 0 : a[i] % b[i];
    EXPECT_EQ(result[i], div + mod + a[i] * b[i] - b[i]) << i;
  }
}

TEST(SemanticsTest, SignedOverflowWraps) {
  std::vector<int32_t> a = {std::numeric_limits<int32_t>::max(),
                            std::numeric_limits<int32_t>::min(), 65536, -3};
  std::vector<int32_t> b = {1, 1, 65536, 5};
  std::vector<ArgValue> args = {MakeBuffer(kI32, a), MakeBuffer(kI32, b), Poisoned(kI32, 4)};
  ASSERT_TRUE(
      interp::Run(Elementwise(kI32, kI32, 4, [](Expr x, Expr y) { return x * y + y; }), args).ok());
  EXPECT_EQ(Contents<int32_t>(args[2]),
            (std::vector<int32_t>{std::numeric_limits<int32_t>::min(),
                                  std::numeric_limits<int32_t>::min() + 1, 65536, -10}));
}

TEST(SemanticsTest, FloatRemainderFloorAndMinMax) {
  const int n = 64;
  std::vector<float> a = RandomFloats(n, 40, -10, 10);
  std::vector<float> b = RandomFloats(n, 41, -3, 3);
  struct Case {
    const char* name;
    std::function<Expr(Expr, Expr)> op;
    std::function<float(float, float)> ref;
  };
  const Case cases[] = {
      // WGSL's float %: e1 - e2 * trunc(e1 / e2), each step rounded to f32.
      {"mod", [](Expr x, Expr y) { return x % y; },
       [](float x, float y) {
         const float q = std::trunc(x / y);
         const float p = y * q;
         return x - p;
       }},
      {"floor_div", [](Expr x, Expr y) { return FloorDiv(x, y); },
       [](float x, float y) { return std::floor(x / y); }},
      {"floor_mod", [](Expr x, Expr y) { return FloorMod(x, y); },
       [](float x, float y) {
         const float q = std::floor(x / y);
         const float p = y * q;
         return x - p;
       }},
      {"min", [](Expr x, Expr y) { return Min(x, y); },
       [](float x, float y) { return std::fmin(x, y); }},
      {"max", [](Expr x, Expr y) { return Max(x, y); },
       [](float x, float y) { return std::fmax(x, y); }},
  };
  for (const Case& c : cases) {
    std::vector<ArgValue> args = {MakeBuffer(kF32, a), MakeBuffer(kF32, b), Poisoned(kF32, n)};
    ASSERT_TRUE(interp::Run(Elementwise(kF32, kF32, n, c.op), args).ok()) << c.name;
    std::vector<float> result = Contents<float>(args[2]);
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(result[i], c.ref(a[i], b[i])) << c.name << "(" << a[i] << ", " << b[i] << ")";
    }
  }
}

TEST(SemanticsTest, ComparisonsAndLogic) {
  // Unsigned comparisons are unsigned: 0xffffffff > 1.
  std::vector<uint32_t> a = {0xffffffffu, 1u, 5u, 7u};
  std::vector<uint32_t> b = {1u, 0xffffffffu, 5u, 3u};
  std::vector<ArgValue> args = {MakeBuffer(kU32, a), MakeBuffer(kU32, b), Poisoned(kU32, 4)};
  const Function f = Elementwise(kU32, kU32, 4, [](Expr x, Expr y) {
    // bit 0: x > y; bit 1: x <= y && x != y; bit 2: !(x == y) || x < 4.
    return Select(x > y, IntConst(kU32, 1), IntConst(kU32, 0)) +
           Select(x <= y && x != y, IntConst(kU32, 2), IntConst(kU32, 0)) +
           Select(!(x == y) || x < 4, IntConst(kU32, 4), IntConst(kU32, 0));
  });
  ASSERT_TRUE(interp::Run(f, args).ok());
  EXPECT_EQ(Contents<uint32_t>(args[2]), (std::vector<uint32_t>{1 + 4, 2 + 4, 0, 1 + 4}));
}

TEST(SemanticsTest, SixtyFourBitIntegersWrap) {
  std::vector<int64_t> a = {std::numeric_limits<int64_t>::max(), -7, int64_t{1} << 40};
  std::vector<int64_t> b = {1, 2, int64_t{1} << 30};
  std::vector<ArgValue> args = {MakeBuffer(kI64, a), MakeBuffer(kI64, b), Poisoned(kI64, 3)};
  ASSERT_TRUE(
      interp::Run(Elementwise(kI64, kI64, 3, [](Expr x, Expr y) { return x * y + FloorDiv(x, y); }),
                  args)
          .ok());
  EXPECT_EQ(Contents<int64_t>(args[2]), (std::vector<int64_t>{-2, -14 - 4, int64_t{1} << 10}));
}

TEST(SemanticsTest, LetExpressionsAndConversions) {
  // out = let t = f32(a) / 3.0 in f32(f16(t)) + f32(bool(a)) + f32(u8(a)) / 1000
  const int n = 16;
  std::vector<int32_t> a = RandomInts(n, 42, -300, 300);
  a[0] = 0;
  std::vector<ArgValue> args = {MakeBuffer(kI32, a), MakeBuffer(kI32, a), Poisoned(kF32, n)};
  const Function f = Elementwise(kI32, kF32, n, [](Expr x, Expr) {
    Var t("t", kF32);
    return Let(
        t, Cast(kF32, x) / 3.0,
        Cast(kF32, Cast(kF16, t)) + Cast(kF32, Cast(kBool, x)) + Cast(kF32, Cast(kU8, x)) / 1000.0);
  });
  ASSERT_TRUE(interp::Run(f, args).ok());
  std::vector<float> result = Contents<float>(args[2]);
  for (int i = 0; i < n; ++i) {
    const float t = static_cast<float>(a[i]) / 3.0f;
    float expected = RoundToHalf(t) + (a[i] != 0 ? 1.0f : 0.0f);
    expected = expected + static_cast<float>(static_cast<uint8_t>(a[i])) / 1000.0f;
    EXPECT_EQ(result[i], expected) << a[i];
  }
}

TEST(SemanticsTest, ShiftsAndBitOperations) {
  const int n = 128;
  std::vector<int32_t> a =
      RandomInts(n, 14, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
  std::vector<int32_t> amount = RandomInts(n, 15, 0, 70);  // past the width too
  struct Case {
    const char* name;
    std::function<Expr(Expr, Expr)> op;
    std::function<int32_t(int32_t, int32_t)> ref;
  };
  const Case cases[] = {
      {"shl",
       [](Expr x, Expr y) {
         return Call(Intrinsic::kShiftLeft, {x, y});
       },
       [](int32_t x, int32_t y) {
         return static_cast<int32_t>(static_cast<uint32_t>(x) << (y & 31));
       }},
      {"shr",
       [](Expr x, Expr y) {
         return Call(Intrinsic::kShiftRight, {x, y});
       },
       [](int32_t x, int32_t y) { return x >> (y & 31); }},  // arithmetic for i32
      {"and",
       [](Expr x, Expr y) {
         return Call(Intrinsic::kBitwiseAnd, {x, y});
       },
       [](int32_t x, int32_t y) { return x & y; }},
      {"or",
       [](Expr x, Expr y) {
         return Call(Intrinsic::kBitwiseOr, {x, y});
       },
       [](int32_t x, int32_t y) { return x | y; }},
      {"xor",
       [](Expr x, Expr y) {
         return Call(Intrinsic::kBitwiseXor, {x, y});
       },
       [](int32_t x, int32_t y) { return x ^ y; }},
      {"not", [](Expr x, Expr) { return Call(Intrinsic::kBitwiseNot, {x}); },
       [](int32_t x, int32_t) { return ~x; }},
      {"popcount", [](Expr x, Expr) { return Call(Intrinsic::kPopcount, {x}); },
       [](int32_t x, int32_t) { return std::popcount(static_cast<uint32_t>(x)); }},
      {"abs", [](Expr x, Expr) { return Call(Intrinsic::kAbs, {x}); },
       [](int32_t x, int32_t) {
         return static_cast<int32_t>(x < 0 ? 0u - static_cast<uint32_t>(x)
                                           : static_cast<uint32_t>(x));
       }},
  };
  a[0] = std::numeric_limits<int32_t>::min();  // abs(MIN) == MIN
  for (const Case& c : cases) {
    std::vector<ArgValue> args = {MakeBuffer(kI32, a), MakeBuffer(kI32, amount), Poisoned(kI32, n)};
    ASSERT_TRUE(interp::Run(Elementwise(kI32, kI32, n, c.op), args).ok()) << c.name;
    std::vector<int32_t> result = Contents<int32_t>(args[2]);
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(result[i], c.ref(a[i], amount[i]))
          << c.name << "(" << a[i] << ", " << amount[i] << ")";
    }
  }
}

TEST(SemanticsTest, UnsignedShiftRightIsLogical) {
  std::vector<uint32_t> a = {0x80000000u, 0xffffffffu, 1u};
  std::vector<uint32_t> b = {31u, 36u, 32u};
  std::vector<ArgValue> args = {MakeBuffer(kU32, a), MakeBuffer(kU32, b), Poisoned(kU32, 3)};
  ASSERT_TRUE(interp::Run(Elementwise(kU32, kU32, 3,
                                      [](Expr x, Expr y) {
                                        return Call(Intrinsic::kShiftRight, {x, y});
                                      }),
                          args)
                  .ok());
  EXPECT_EQ(Contents<uint32_t>(args[2]), (std::vector<uint32_t>{1u, 0x0fffffffu, 1u}));
}

TEST(SemanticsTest, FloatToIntCastsSaturate) {
  std::vector<float> a = {3.7f, -3.7f, 1e10f, -1e10f, std::nanf(""), 2147483520.0f, -0.5f};
  std::vector<ArgValue> args = {MakeBuffer(kF32, a), MakeBuffer(kF32, a), Poisoned(kI32, 7)};
  ASSERT_TRUE(
      interp::Run(Elementwise(kF32, kI32, 7, [](Expr x, Expr) { return Cast(kI32, x); }), args)
          .ok());
  EXPECT_EQ(Contents<int32_t>(args[2]),
            (std::vector<int32_t>{3, -3, 2147483520, std::numeric_limits<int32_t>::min(), 0,
                                  2147483520, 0}));
  std::vector<ArgValue> uargs = {MakeBuffer(kF32, a), MakeBuffer(kF32, a), Poisoned(kU32, 7)};
  ASSERT_TRUE(
      interp::Run(Elementwise(kF32, kU32, 7, [](Expr x, Expr) { return Cast(kU32, x); }), uargs)
          .ok());
  EXPECT_EQ(Contents<uint32_t>(uargs[2]),
            (std::vector<uint32_t>{3u, 0u, 4294967040u, 0u, 0u, 2147483520u, 0u}));
}

TEST(SemanticsTest, IntegerCastsTruncateAndExtend) {
  std::vector<int32_t> a = {-1, 300, -129, 70000};
  std::vector<ArgValue> args = {MakeBuffer(kI32, a), MakeBuffer(kI32, a), Poisoned(kI32, 4)};
  // i32 -> u8 -> i32 keeps the low byte; i32 -> i8 -> i32 sign-extends it.
  ASSERT_TRUE(interp::Run(Elementwise(kI32, kI32, 4,
                                      [](Expr x, Expr) {
                                        return Cast(kI32, Cast(kU8, x)) * 1000 +
                                               Cast(kI32, Cast(DataType::Int(8), x));
                                      }),
                          args)
                  .ok());
  EXPECT_EQ(Contents<int32_t>(args[2]), (std::vector<int32_t>{255 * 1000 - 1, 44 * 1000 + 44,
                                                              127 * 1000 + 127, 112 * 1000 + 112}));
}

TEST(SemanticsTest, ReinterpretIsABitCast) {
  std::vector<float> a = {1.0f, -2.5f, 0.1f, std::numeric_limits<float>::infinity()};
  std::vector<ArgValue> args = {MakeBuffer(kF32, a), MakeBuffer(kF32, a), Poisoned(kU32, 4)};
  ASSERT_TRUE(
      interp::Run(Elementwise(kF32, kU32, 4, [](Expr x, Expr) { return Reinterpret(kU32, x); }),
                  args)
          .ok());
  std::vector<uint32_t> bits = Contents<uint32_t>(args[2]);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(bits[i], std::bit_cast<uint32_t>(a[i]));

  // Two f16 lanes in one u32: lane 0 in the low half.
  IRBuilder b("pack_halves");
  Buffer H = b.BufferParam("H", kF16, {4});
  Buffer out = b.BufferParam("out", kU32, {2});
  b.For("tx", LoopKind::kThreadX, 0, 2,
        [&](Var tx) { b.Store(out, {tx}, Reinterpret(kU32, Load(H, {Ramp(tx * 2, 1, 2)}))); });
  HostBuffer halves(kF16, {4});
  for (int i = 0; i < 4; ++i) halves.SetAt<uint16_t>(i, FloatToHalfBits(0.5f * (i + 1)));
  std::vector<ArgValue> pack_args = {halves, Poisoned(kU32, 2)};
  ASSERT_TRUE(interp::Run(Verified(b), pack_args).ok());
  std::vector<uint32_t> packed = Contents<uint32_t>(pack_args[1]);
  EXPECT_EQ(packed[0], FloatToHalfBits(0.5f) | (uint32_t{FloatToHalfBits(1.0f)} << 16));
  EXPECT_EQ(packed[1], FloatToHalfBits(1.5f) | (uint32_t{FloatToHalfBits(2.0f)} << 16));
}

TEST(SemanticsTest, NegationFlipsEverySign) {
  // -x flips the sign bit of every value, NaN included, in f32 and in f16;
  // so does a literal -nan.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> a = {nan, -nan, 0.0f, -0.0f, 1.5f, -std::numeric_limits<float>::infinity()};
  std::vector<ArgValue> args = {MakeBuffer(kF32, a), MakeBuffer(kF32, a), Poisoned(kU32, 6)};
  ASSERT_TRUE(
      interp::Run(Elementwise(kF32, kU32, 6, [](Expr x, Expr) { return Reinterpret(kU32, -x); }),
                  args)
          .ok());
  std::vector<uint32_t> bits = Contents<uint32_t>(args[2]);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(bits[i], std::bit_cast<uint32_t>(a[i]) ^ 0x80000000u) << i;

  std::vector<ArgValue> half_args = {MakeBuffer(kF32, a), MakeBuffer(kF32, a), Poisoned(kU32, 6)};
  ASSERT_TRUE(interp::Run(Elementwise(kF32, kU32, 6,
                                      [](Expr x, Expr) {
                                        Expr h = -Cast(kF16, x);
                                        return Cast(kU32, Reinterpret(kU16, h));
                                      }),
                          half_args)
                  .ok());
  std::vector<uint32_t> half_bits = Contents<uint32_t>(half_args[2]);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(half_bits[i] & 0x8000u, (std::bit_cast<uint32_t>(a[i]) >> 16 & 0x8000u) ^ 0x8000u)
        << i;
  }
  StatusOr<Expr> literal = ParseExpr("-nan");
  ASSERT_TRUE(literal.ok()) << literal.status();
  std::vector<ArgValue> literal_args = {MakeBuffer(kF32, a), MakeBuffer(kF32, a),
                                        Poisoned(kU32, 6)};
  ASSERT_TRUE(interp::Run(Elementwise(kF32, kU32, 6,
                                      [&](Expr, Expr) { return Reinterpret(kU32, *literal); }),
                          literal_args)
                  .ok());
  EXPECT_EQ(Contents<uint32_t>(literal_args[2])[0], 0xffc00000u);
}

TEST(SemanticsTest, FloatRampLanesAreBasePlusIndexTimesStride) {
  // Lane l is base + l * stride, not the stride added l times: lane 2 of
  // ramp(-3e38, 3e38) overflows, and every lane of a ramp whose stride is
  // infinite is NaN or infinite (lane 0 is base + 0 * inf).
  IRBuilder b("ramps");
  Buffer out = b.BufferParam("out", kF32, {6});
  b.For("tx", LoopKind::kThreadX, 0, 1, [&](Var) {
    b.Store(out, {Ramp(0, 1, 3)}, Ramp(FloatConst(kF32, -3e38), FloatConst(kF32, 3e38), 3));
    b.Store(out, {Ramp(3, 1, 3)}, Ramp(FloatConst(kF32, 1.5), FloatConst(kF32, -INFINITY), 3));
  });
  std::vector<ArgValue> args = {Poisoned(kF32, 6)};
  ASSERT_TRUE(interp::Run(Verified(b), args).ok());
  std::vector<float> got = Contents<float>(args[0]);
  EXPECT_EQ(got[0], -3e38f);
  EXPECT_EQ(got[1], 0.0f);
  EXPECT_EQ(got[2], INFINITY);
  EXPECT_TRUE(std::isnan(got[3]));
  EXPECT_EQ(got[4], -INFINITY);
  EXPECT_EQ(got[5], -INFINITY);
}

TEST(SemanticsTest, F16RoundsAfterEveryOperation) {
  const int n = 64;
  std::vector<float> a = RandomFloats(n, 16, -4, 4);
  std::vector<float> b = RandomFloats(n, 17, -4, 4);
  HostBuffer ha(kF16, {n});
  HostBuffer hb(kF16, {n});
  for (int i = 0; i < n; ++i) {
    ha.SetAt<uint16_t>(i, FloatToHalfBits(a[i]));
    hb.SetAt<uint16_t>(i, FloatToHalfBits(b[i]));
  }
  std::vector<ArgValue> args = {ha, hb, Poisoned(kF16, n)};
  ASSERT_TRUE(
      interp::Run(Elementwise(kF16, kF16, n, [](Expr x, Expr y) { return (x * y + x) / y - 0.1; }),
                  args)
          .ok());
  const HostBuffer& out = std::get<HostBuffer>(args[2]);
  for (int i = 0; i < n; ++i) {
    const float x = HalfBitsToFloat(ha.At<uint16_t>(i));
    const float y = HalfBitsToFloat(hb.At<uint16_t>(i));
    float expected = RoundToHalf(x * y);
    expected = RoundToHalf(expected + x);
    expected = RoundToHalf(expected / y);
    expected = RoundToHalf(expected - RoundToHalf(0.1f));
    EXPECT_EQ(HalfBitsToFloat(out.At<uint16_t>(i)), expected) << i;
  }
}

TEST(SemanticsTest, F16AccumulationDiffersFromF32) {
  // 0.1 added 1000 times: in f16 the sum stalls where 0.1 is below half an ulp.
  IRBuilder b("accumulate");
  Buffer out = b.BufferParam("out", kF16, {1});
  b.Allocate("acc", kF16, {1}, MemoryScope::kLocal, [&](Buffer acc) {
    b.Store(acc, {0}, FloatConst(kF16, 0.0));
    b.For("i", LoopKind::kSerial, 0, 1000,
          [&](Var) { b.Store(acc, {0}, Load(acc, {0}) + FloatConst(kF16, 0.1)); });
    b.Store(out, {0}, Load(acc, {0}));
  });
  std::vector<ArgValue> args = {Poisoned(kF16, 1)};
  ASSERT_TRUE(interp::Run(Verified(b), args).ok());
  float expected = 0;
  for (int i = 0; i < 1000; ++i) expected = RoundToHalf(expected + RoundToHalf(0.1f));
  const float result = HalfBitsToFloat(std::get<HostBuffer>(args[0]).At<uint16_t>(0));
  EXPECT_EQ(result, expected);
  EXPECT_NE(result, 100.0f);
}

TEST(SemanticsTest, BoolBuffersHold32BitIntegers) {
  // flags[i] = A[i] > B[i]; out[i] = select(given[i], A[i], B[i]).
  IRBuilder b("bools");
  Buffer A = b.BufferParam("A", kF32, {16});
  Buffer B = b.BufferParam("B", kF32, {16});
  Buffer flags = b.BufferParam("flags", kBool, {16});
  Buffer given = b.BufferParam("given", kBool, {16});
  Buffer out = b.BufferParam("out", kF32, {16});
  b.For("tx", LoopKind::kThreadX, 0, 16, [&](Var tx) {
    b.Store(flags, {tx}, Load(A, {tx}) > Load(B, {tx}));
    b.Store(out, {tx}, Select(Load(given, {tx}), Load(A, {tx}), Load(B, {tx})));
  });
  std::vector<float> a = RandomFloats(16, 18);
  std::vector<float> bv = RandomFloats(16, 19);
  std::vector<int32_t> g(16);
  for (int i = 0; i < 16; ++i) g[i] = i % 3 == 0 ? 0 : (i % 3 == 1 ? 1 : -7);  // non-zero: true
  std::vector<ArgValue> args = {MakeBuffer(kF32, a), MakeBuffer(kF32, bv), Poisoned(kBool, 16),
                                MakeBuffer(kBool, g), Poisoned(kF32, 16)};
  ASSERT_EQ(std::get<HostBuffer>(args[2]).bytes.size(), 64u);
  ASSERT_TRUE(interp::Run(Verified(b), args).ok());
  std::vector<int32_t> stored = Contents<int32_t>(args[2]);
  std::vector<float> result = Contents<float>(args[4]);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(stored[i], a[i] > bv[i] ? 1 : 0) << i;
    EXPECT_EQ(result[i], g[i] != 0 ? a[i] : bv[i]) << i;
  }
}

TEST(SemanticsTest, Int8x4Dot) {
  IRBuilder b("dot");
  Buffer A = b.BufferParam("A", kInt8x4, {32});
  Buffer B = b.BufferParam("B", kInt8x4, {32});
  Buffer acc = b.BufferParam("acc", kI32, {32});
  Buffer out = b.BufferParam("out", kI32, {32});
  b.For("tx", LoopKind::kThreadX, 0, 32, [&](Var tx) {
    b.Store(out, {tx}, Call(Intrinsic::kDot4I8, {Load(A, {tx}), Load(B, {tx})}) + Load(acc, {tx}));
  });
  std::vector<uint32_t> a = RandomU32s(32, 20);
  std::vector<uint32_t> bv = RandomU32s(32, 21);
  a[0] = 0x80808080u;  // four -128s
  bv[0] = 0x80808080u;
  std::vector<int32_t> c = RandomInts(32, 22, -1000, 1000);
  std::vector<ArgValue> args = {MakeBuffer(kInt8x4, a), MakeBuffer(kInt8x4, bv),
                                MakeBuffer(kI32, c), Poisoned(kI32, 32)};
  ASSERT_TRUE(interp::Run(Verified(b), args).ok());
  std::vector<int32_t> result = Contents<int32_t>(args[3]);
  for (int i = 0; i < 32; ++i) {
    int32_t expected = c[i];
    for (int k = 0; k < 4; ++k) {
      expected += static_cast<int8_t>(a[i] >> (8 * k)) * static_cast<int8_t>(bv[i] >> (8 * k));
    }
    EXPECT_EQ(result[i], expected) << i;
  }
  EXPECT_EQ(result[0], 4 * 128 * 128 + c[0]);
}

TEST(SemanticsTest, MathIntrinsicsInFloat) {
  const int n = 64;
  std::vector<float> x = RandomFloats(n, 23, -3, 3);
  std::vector<float> positive = RandomFloats(n, 24, 0.01f, 5);
  struct Case {
    Intrinsic op;
    bool positive_input;
    std::function<float(float, float)> ref;
  };
  const Case cases[] = {
      {Intrinsic::kExp, false, [](float a, float) { return std::exp(a); }},
      {Intrinsic::kExp2, false, [](float a, float) { return std::exp2(a); }},
      {Intrinsic::kLog, true, [](float a, float) { return std::log(a); }},
      {Intrinsic::kLog2, true, [](float a, float) { return std::log2(a); }},
      {Intrinsic::kSqrt, true, [](float a, float) { return std::sqrt(a); }},
      {Intrinsic::kRsqrt, true, [](float a, float) { return 1.0f / std::sqrt(a); }},
      {Intrinsic::kSin, false, [](float a, float) { return std::sin(a); }},
      {Intrinsic::kCos, false, [](float a, float) { return std::cos(a); }},
      {Intrinsic::kTanh, false, [](float a, float) { return std::tanh(a); }},
      {Intrinsic::kSigmoid, false, [](float a, float) { return 1.0f / (1.0f + std::exp(-a)); }},
      {Intrinsic::kErf, false, [](float a, float) { return std::erf(a); }},
      {Intrinsic::kPow, true, [](float a, float b) { return std::pow(a, b); }},
      {Intrinsic::kFloor, false, [](float a, float) { return std::floor(a); }},
      {Intrinsic::kCeil, false, [](float a, float) { return std::ceil(a); }},
      {Intrinsic::kRound, false, [](float a, float) { return std::nearbyint(a); }},
      {Intrinsic::kTrunc, false, [](float a, float) { return std::trunc(a); }},
      {Intrinsic::kFma, false, [](float a, float b) { return std::fma(a, b, a); }},
      {Intrinsic::kAbs, false, [](float a, float) { return std::fabs(a); }},
  };
  x[0] = 2.5f;  // round() ties to even
  x[1] = -0.5f;
  for (const Case& c : cases) {
    const std::vector<float>& in = c.positive_input ? positive : x;
    std::vector<ArgValue> args = {MakeBuffer(kF32, in), MakeBuffer(kF32, x), Poisoned(kF32, n)};
    const Function f = Elementwise(kF32, kF32, n, [&](Expr a, Expr b) {
      switch (IntrinsicArity(c.op)) {
        case 1:
          return Call(c.op, {a});
        case 2:
          return Call(c.op, {a, b});
        default:
          return Call(c.op, {a, b, a});
      }
    });
    Status status = interp::Run(f, args);
    ASSERT_TRUE(status.ok()) << IntrinsicName(c.op) << ": " << status;
    std::vector<float> result = Contents<float>(args[2]);
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(result[i], c.ref(in[i], x[i])) << IntrinsicName(c.op) << "(" << in[i] << ")";
    }
  }
}

TEST(SemanticsTest, MathIntrinsicsInF16RoundToHalf) {
  const int n = 32;
  std::vector<float> x = RandomFloats(n, 25, -2, 2);
  HostBuffer hx(kF16, {n});
  for (int i = 0; i < n; ++i) hx.SetAt<uint16_t>(i, FloatToHalfBits(x[i]));
  for (Intrinsic op : {Intrinsic::kExp, Intrinsic::kTanh, Intrinsic::kSigmoid, Intrinsic::kErf}) {
    std::vector<ArgValue> args = {hx, hx, Poisoned(kF16, n)};
    ASSERT_TRUE(
        interp::Run(Elementwise(kF16, kF16, n, [&](Expr a, Expr) { return Call(op, {a}); }), args)
            .ok());
    const HostBuffer& out = std::get<HostBuffer>(args[2]);
    for (int i = 0; i < n; ++i) {
      const float in = HalfBitsToFloat(hx.At<uint16_t>(i));
      float ref = 0;
      switch (op) {
        case Intrinsic::kExp:
          ref = std::exp(in);
          break;
        case Intrinsic::kTanh:
          ref = std::tanh(in);
          break;
        case Intrinsic::kSigmoid:
          ref = 1.0f / (1.0f + std::exp(-in));
          break;
        default:
          ref = std::erf(in);
          break;
      }
      EXPECT_EQ(HalfBitsToFloat(out.At<uint16_t>(i)), RoundToHalf(ref)) << IntrinsicName(op);
    }
  }
}

TEST(SemanticsTest, IfThenElseEvaluatesOnlyTheTakenSide) {
  // A has 10 elements, the kernel runs 16 threads: the guarded load is never
  // performed out of bounds.
  auto make = [](bool lazy) {
    IRBuilder b(lazy ? "guarded" : "unguarded");
    Buffer A = b.BufferParam("A", kF32, {10});
    Buffer out = b.BufferParam("out", kF32, {16});
    b.For("tx", LoopKind::kThreadX, 0, 16, [&](Var tx) {
      Expr in_range = tx < 10;
      Expr fallback = FloatConst(kF32, -1.0);
      b.Store(out, {tx},
              lazy ? IfThenElse(in_range, Load(A, {tx}), fallback)
                   : Select(in_range, Load(A, {tx}), fallback));
    });
    return Verified(b);
  };
  std::vector<float> a = RandomFloats(10, 26);
  std::vector<ArgValue> args = {MakeBuffer(kF32, a), Poisoned(kF32, 16)};
  Status status = interp::Run(make(true), args);
  ASSERT_TRUE(status.ok()) << status;
  std::vector<float> result = Contents<float>(args[1]);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(result[i], i < 10 ? a[i] : -1.0f);

  // select evaluates both sides, so the same load is out of bounds.
  status = interp::Run(make(false), args);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("out-of-bounds load of buffer 'A'"), std::string::npos) << status;
  EXPECT_NE(status.message().find("index 10"), std::string::npos) << status;
}

TEST(SemanticsTest, SubgroupAddOverActiveThreadsOfEachSubgroup) {
  // 64 threads; threads with tx % 3 == 0 sit out. The verifier rejects a
  // subgroup operation under thread-dependent control flow, but the
  // interpreter defines it: it combines the active threads only.
  IRBuilder b("subgroup_sum");
  Buffer A = b.BufferParam("A", kI32, {64});
  Buffer out = b.BufferParam("out", kI32, {64});
  b.For("tx", LoopKind::kThreadX, 0, 64, [&](Var tx) {
    b.Store(out, {tx}, -1);
    b.If(tx % 3 != 0, [&] { b.Store(out, {tx}, Call(Intrinsic::kSubgroupAdd, {Load(A, {tx})})); });
  });
  const Function f = b.Build();
  std::vector<int32_t> a = RandomInts(64, 27, -100, 100);
  for (int size : {32, 16, 64, 1}) {
    std::vector<ArgValue> args = {MakeBuffer(kI32, a), Poisoned(kI32, 64)};
    RunOptions options;
    options.subgroup_size = size;
    Status status = interp::Run(f, args, options);
    ASSERT_TRUE(status.ok()) << status;
    std::vector<int32_t> result = Contents<int32_t>(args[1]);
    for (int t = 0; t < 64; ++t) {
      if (t % 3 == 0) {
        EXPECT_EQ(result[t], -1);
        continue;
      }
      int32_t expected = 0;
      const int first = t / size * size;
      for (int u = first; u < first + size; ++u) {
        if (u % 3 != 0) expected += a[u];
      }
      EXPECT_EQ(result[t], expected) << "size " << size << ", thread " << t;
    }
  }
}

TEST(SemanticsTest, SubgroupsFollowTheLinearLocalIndex) {
  // An 8x4 workgroup: linear index x + 8 * y, so subgroups of 16 are rows
  // 0-1 and rows 2-3.
  IRBuilder b("subgroup_2d");
  Buffer A = b.BufferParam("A", kI32, {4, 8});
  Buffer out = b.BufferParam("out", kI32, {4, 8});
  b.For("ty", LoopKind::kThreadY, 0, 4, [&](Var ty) {
    b.For("tx", LoopKind::kThreadX, 0, 8, [&](Var tx) {
      b.Store(out, {ty, tx}, Call(Intrinsic::kSubgroupAdd, {Load(A, {ty, tx})}));
    });
  });
  std::vector<int32_t> a = RandomInts(32, 43, -50, 50);
  std::vector<ArgValue> args = {HostBuffer::FromVector(kI32, {4, 8}, a), Poisoned(kI32, 32)};
  RunOptions options;
  options.subgroup_size = 16;
  ASSERT_TRUE(interp::Run(Verified(b), args, options).ok());
  std::vector<int32_t> result = Contents<int32_t>(args[1]);
  int32_t first = 0;
  int32_t second = 0;
  for (int i = 0; i < 16; ++i) first += a[i];
  for (int i = 16; i < 32; ++i) second += a[i];
  for (int i = 0; i < 32; ++i) EXPECT_EQ(result[i], i < 16 ? first : second) << i;
}

TEST(SemanticsTest, SubgroupBuiltinsFollowTheLinearLocalIndex) {
  // A 6x4 workgroup (linear index x + 6 * y): thread t is lane t % size of
  // subgroup t / size; the last subgroup may be partial.
  IRBuilder b("subgroup_builtins");
  Buffer lanes = b.BufferParam("lanes", kI32, {4, 6});
  Buffer sizes = b.BufferParam("sizes", kI32, {4, 6});
  b.For("ty", LoopKind::kThreadY, 0, 4, [&](Var ty) {
    b.For("tx", LoopKind::kThreadX, 0, 6, [&](Var tx) {
      // Read under thread-dependent control flow too.
      b.If(tx != 5, [&] { b.Store(lanes, {ty, tx}, Call(Intrinsic::kSubgroupInvocationId, {})); });
      b.Store(sizes, {ty, tx}, Call(Intrinsic::kSubgroupSize, {}));
    });
  });
  const Function f = Verified(b);
  for (int size : {4, 8, 16, 32, 1}) {
    std::vector<ArgValue> args = {Poisoned(kI32, 24), Poisoned(kI32, 24)};
    RunOptions options;
    options.subgroup_size = size;
    ASSERT_TRUE(interp::Run(f, args, options).ok());
    std::vector<int32_t> got_lanes = Contents<int32_t>(args[0]);
    std::vector<int32_t> got_sizes = Contents<int32_t>(args[1]);
    const int32_t poison = static_cast<int32_t>(0xcdcdcdcdu);
    for (int t = 0; t < 24; ++t) {
      if (t % 6 == 5) {
        EXPECT_EQ(got_lanes[t], poison) << "size " << size << ", thread " << t;
      } else {
        EXPECT_EQ(got_lanes[t], t % size) << "size " << size << ", thread " << t;
      }
      EXPECT_EQ(got_sizes[t], size) << t;
    }
  }
}

TEST(SemanticsTest, SubgroupMinMaxBroadcastAndShuffle) {
  IRBuilder b("subgroup_ops");
  Buffer A = b.BufferParam("A", kF32, {32});
  Buffer out = b.BufferParam("out", kF32, {4, 32});
  b.For("tx", LoopKind::kThreadX, 0, 32, [&](Var tx) {
    Expr v = Load(A, {tx});
    b.Store(out, {0, tx}, Call(Intrinsic::kSubgroupMin, {v}));
    b.Store(out, {1, tx}, Call(Intrinsic::kSubgroupMax, {v}));
    b.Store(out, {2, tx}, Call(Intrinsic::kSubgroupBroadcastFirst, {v}));
    b.Store(out, {3, tx}, Call(Intrinsic::kSubgroupShuffle, {v, Cast(kU32, (tx + 1) % 8)}));
  });
  std::vector<float> a = RandomFloats(32, 28);
  std::vector<ArgValue> args = {MakeBuffer(kF32, a), Poisoned(kF32, 128)};
  RunOptions options;
  options.subgroup_size = 8;
  Status status = interp::Run(Verified(b), args, options);
  ASSERT_TRUE(status.ok()) << status;
  std::vector<float> result = Contents<float>(args[1]);
  for (int t = 0; t < 32; ++t) {
    const int first = t / 8 * 8;
    EXPECT_EQ(result[t], *std::min_element(a.begin() + first, a.begin() + first + 8));
    EXPECT_EQ(result[32 + t], *std::max_element(a.begin() + first, a.begin() + first + 8));
    EXPECT_EQ(result[64 + t], a[first]);
    EXPECT_EQ(result[96 + t], a[first + (t + 1) % 8]);
  }
}

}  // namespace
}  // namespace kiln::interp
