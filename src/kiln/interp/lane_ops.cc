#include "kiln/interp/lane_ops.h"

#include <bit>
#include <cmath>

#include "kiln/interp/wgsl_semantics.h"

namespace kiln::interp {
namespace {

Lane IntLane(int64_t value) {
  Lane lane;
  lane.i = value;
  return lane;
}

Lane FloatLane(double value) {
  Lane lane;
  lane.f = value;
  return lane;
}

Lane BoolLane(bool value) {
  return IntLane(value ? 1 : 0);
}

// Integer-like types that are not int/uint (bool, int8x4) behave as unsigned.
bool IsSigned(ir::DataType t) {
  return t.is_int();
}

Lane IntBinary(ir::BinaryOp op, ir::DataType t, int64_t a, int64_t b) {
  const int bits = t.bits;
  const bool is_signed = IsSigned(t);
  const auto ua = static_cast<uint64_t>(a);
  const auto ub = static_cast<uint64_t>(b);
  switch (op) {
    case ir::BinaryOp::kAdd:
      return IntLane(WrapInt(ua + ub, bits, is_signed));
    case ir::BinaryOp::kSub:
      return IntLane(WrapInt(ua - ub, bits, is_signed));
    case ir::BinaryOp::kMul:
      return IntLane(WrapInt(ua * ub, bits, is_signed));
    case ir::BinaryOp::kDiv:
      return IntLane(IntDiv(a, b, bits, is_signed));
    case ir::BinaryOp::kMod:
      return IntLane(IntMod(a, b, bits, is_signed));
    case ir::BinaryOp::kFloorDiv:
      return IntLane(IntFloorDiv(a, b, bits, is_signed));
    case ir::BinaryOp::kFloorMod:
      return IntLane(IntFloorMod(a, b, bits, is_signed));
    default:
      break;
  }
  // Unsigned 64-bit values may have bit 63 set; everything else compares as int64.
  const bool less = (!is_signed && bits >= 64) ? ua < ub : a < b;
  const bool greater = (!is_signed && bits >= 64) ? ua > ub : a > b;
  switch (op) {
    case ir::BinaryOp::kMin:
      return IntLane(greater ? b : a);
    case ir::BinaryOp::kMax:
      return IntLane(less ? b : a);
    case ir::BinaryOp::kEq:
      return BoolLane(a == b);
    case ir::BinaryOp::kNe:
      return BoolLane(a != b);
    case ir::BinaryOp::kLt:
      return BoolLane(less);
    case ir::BinaryOp::kLe:
      return BoolLane(!greater);
    case ir::BinaryOp::kGt:
      return BoolLane(greater);
    case ir::BinaryOp::kGe:
      return BoolLane(!less);
    case ir::BinaryOp::kAnd:
      return BoolLane(a != 0 && b != 0);
    case ir::BinaryOp::kOr:
      return BoolLane(a != 0 || b != 0);
    default:
      return IntLane(0);  // unreachable: arithmetic handled above
  }
}

// f16 and f32 are computed in float with the result rounded to the type
// after each step, as a GPU computing in that precision would.
Lane NarrowFloatBinary(ir::BinaryOp op, ir::DataType t, float a, float b) {
  auto round = [t](float x) { return static_cast<float>(RoundFloat(t, x)); };
  switch (op) {
    case ir::BinaryOp::kAdd:
      return FloatLane(round(a + b));
    case ir::BinaryOp::kSub:
      // -0.0 - b is the IR's negation, which flips a NaN's sign as well
      // (IEEE leaves the sign of a - NaN open; WGSL's -b flips it).
      if (a == 0 && std::signbit(a)) return FloatLane(round(-b));
      return FloatLane(round(a - b));
    case ir::BinaryOp::kMul:
      return FloatLane(round(a * b));
    case ir::BinaryOp::kDiv:
      return FloatLane(round(a / b));
    case ir::BinaryOp::kMod:  // WGSL: e1 - e2 * trunc(e1 / e2)
      return FloatLane(round(a - round(b * std::trunc(round(a / b)))));
    case ir::BinaryOp::kFloorDiv:
      return FloatLane(std::floor(round(a / b)));
    case ir::BinaryOp::kFloorMod:
      return FloatLane(round(a - round(b * std::floor(round(a / b)))));
    case ir::BinaryOp::kMin:
      return FloatLane(std::fmin(a, b));
    case ir::BinaryOp::kMax:
      return FloatLane(std::fmax(a, b));
    case ir::BinaryOp::kEq:
      return BoolLane(a == b);
    case ir::BinaryOp::kNe:
      return BoolLane(a != b);
    case ir::BinaryOp::kLt:
      return BoolLane(a < b);
    case ir::BinaryOp::kLe:
      return BoolLane(a <= b);
    case ir::BinaryOp::kGt:
      return BoolLane(a > b);
    case ir::BinaryOp::kGe:
      return BoolLane(a >= b);
    case ir::BinaryOp::kAnd:
    case ir::BinaryOp::kOr:
      return BoolLane(false);  // not defined on floats
  }
  return FloatLane(0);
}

Lane DoubleBinary(ir::BinaryOp op, double a, double b) {
  switch (op) {
    case ir::BinaryOp::kAdd:
      return FloatLane(a + b);
    case ir::BinaryOp::kSub:
      if (a == 0 && std::signbit(a)) return FloatLane(-b);  // (a negation, as above)
      return FloatLane(a - b);
    case ir::BinaryOp::kMul:
      return FloatLane(a * b);
    case ir::BinaryOp::kDiv:
      return FloatLane(a / b);
    case ir::BinaryOp::kMod:
      return FloatLane(a - b * std::trunc(a / b));
    case ir::BinaryOp::kFloorDiv:
      return FloatLane(std::floor(a / b));
    case ir::BinaryOp::kFloorMod:
      return FloatLane(a - b * std::floor(a / b));
    case ir::BinaryOp::kMin:
      return FloatLane(std::fmin(a, b));
    case ir::BinaryOp::kMax:
      return FloatLane(std::fmax(a, b));
    case ir::BinaryOp::kEq:
      return BoolLane(a == b);
    case ir::BinaryOp::kNe:
      return BoolLane(a != b);
    case ir::BinaryOp::kLt:
      return BoolLane(a < b);
    case ir::BinaryOp::kLe:
      return BoolLane(a <= b);
    case ir::BinaryOp::kGt:
      return BoolLane(a > b);
    case ir::BinaryOp::kGe:
      return BoolLane(a >= b);
    case ir::BinaryOp::kAnd:
    case ir::BinaryOp::kOr:
      return BoolLane(false);
  }
  return FloatLane(0);
}

// One-operand float math in float (f16, f32) or double (f64).
template <typename F>
F FloatMath(ir::Intrinsic op, F x) {
  switch (op) {
    case ir::Intrinsic::kExp:
      return std::exp(x);
    case ir::Intrinsic::kExp2:
      return std::exp2(x);
    case ir::Intrinsic::kLog:
      return std::log(x);
    case ir::Intrinsic::kLog2:
      return std::log2(x);
    case ir::Intrinsic::kSqrt:
      return std::sqrt(x);
    case ir::Intrinsic::kRsqrt:
      return F(1) / std::sqrt(x);
    case ir::Intrinsic::kSin:
      return std::sin(x);
    case ir::Intrinsic::kCos:
      return std::cos(x);
    case ir::Intrinsic::kTanh:
      return std::tanh(x);
    case ir::Intrinsic::kSigmoid:
      return F(1) / (F(1) + std::exp(-x));
    case ir::Intrinsic::kErf:
      return std::erf(x);
    case ir::Intrinsic::kFloor:
      return std::floor(x);
    case ir::Intrinsic::kCeil:
      return std::ceil(x);
    case ir::Intrinsic::kRound:
      return std::nearbyint(x);  // default mode: ties to even
    case ir::Intrinsic::kTrunc:
      return std::trunc(x);
    case ir::Intrinsic::kAbs:
      return std::fabs(x);
    default:
      return x;
  }
}

Lane FloatIntrinsic(ir::Intrinsic op, ir::DataType t, const Lane* args) {
  if (t.bits == 64) {
    if (op == ir::Intrinsic::kPow) return FloatLane(std::pow(args[0].f, args[1].f));
    if (op == ir::Intrinsic::kFma) return FloatLane(std::fma(args[0].f, args[1].f, args[2].f));
    return FloatLane(FloatMath<double>(op, args[0].f));
  }
  const auto x = static_cast<float>(args[0].f);
  float result;
  if (op == ir::Intrinsic::kPow) {
    result = std::pow(x, static_cast<float>(args[1].f));
  } else if (op == ir::Intrinsic::kFma) {
    result = std::fma(x, static_cast<float>(args[1].f), static_cast<float>(args[2].f));
  } else {
    result = FloatMath<float>(op, x);
  }
  return FloatLane(RoundFloat(t, result));
}

Lane IntIntrinsic(ir::Intrinsic op, ir::DataType t, const Lane* args) {
  const int bits = t.bits;
  const bool is_signed = IsSigned(t);
  const int64_t a = args[0].i;
  const auto ua = static_cast<uint64_t>(a);
  switch (op) {
    case ir::Intrinsic::kAbs:
      return IntLane(is_signed && a < 0 ? WrapInt(0 - ua, bits, true) : a);
    case ir::Intrinsic::kBitwiseAnd:
      return IntLane(a & args[1].i);
    case ir::Intrinsic::kBitwiseOr:
      return IntLane(a | args[1].i);
    case ir::Intrinsic::kBitwiseXor:
      return IntLane(a ^ args[1].i);
    case ir::Intrinsic::kBitwiseNot:
      return IntLane(WrapInt(~ua, bits, is_signed));
    case ir::Intrinsic::kShiftLeft:
      return IntLane(ShiftLeft(a, args[1].i, bits, is_signed));
    case ir::Intrinsic::kShiftRight:
      return IntLane(ShiftRight(a, args[1].i, bits, is_signed));
    case ir::Intrinsic::kPopcount: {
      const uint64_t mask = bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
      return IntLane(std::popcount(ua & mask));
    }
    case ir::Intrinsic::kDot4I8:
      return IntLane(Dot4I8Packed(static_cast<uint32_t>(a), static_cast<uint32_t>(args[1].i)));
    default:
      return IntLane(a);
  }
}

}  // namespace

bool LessLane(ir::DataType t, Lane a, Lane b) {
  if (t.is_float()) return a.f < b.f;
  if (!IsSigned(t) && t.bits >= 64) return static_cast<uint64_t>(a.i) < static_cast<uint64_t>(b.i);
  return a.i < b.i;
}

Lane BinaryLane(ir::BinaryOp op, ir::DataType t, Lane a, Lane b) {
  if (t.is_float()) {
    if (t.bits == 64) return DoubleBinary(op, a.f, b.f);
    return NarrowFloatBinary(op, t, static_cast<float>(a.f), static_cast<float>(b.f));
  }
  return IntBinary(op, t, a.i, b.i);
}

Lane IntrinsicLane(ir::Intrinsic op, ir::DataType t, const Lane* args) {
  if (t.is_float()) return FloatIntrinsic(op, t, args);
  return IntIntrinsic(op, t, args);
}

}  // namespace kiln::interp
