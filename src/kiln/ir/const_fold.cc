#include "kiln/ir/const_fold.h"

#include <cmath>
#include <limits>

namespace kiln::ir {
namespace {

bool Less(DataType t, int64_t a, int64_t b) {
  return t.is_uint() ? static_cast<uint64_t>(a) < static_cast<uint64_t>(b) : a < b;
}

// Truncating quotient and remainder of normalized values, with expr.h's
// rules for zero divisors and MIN / -1.
void TruncDivMod(DataType t, int64_t a, int64_t b, int64_t* q, int64_t* r) {
  if (b == 0) {
    *q = a;
    *r = 0;
  } else if (t.is_uint()) {
    *q = static_cast<int64_t>(static_cast<uint64_t>(a) / static_cast<uint64_t>(b));
    *r = static_cast<int64_t>(static_cast<uint64_t>(a) % static_cast<uint64_t>(b));
  } else if (b == -1) {
    // Avoids INT64_MIN / -1; for narrower types -MIN wraps back to MIN.
    *q = static_cast<int64_t>(uint64_t{0} - static_cast<uint64_t>(a));
    *r = 0;
  } else {
    *q = a / b;
    *r = a % b;
  }
}

}  // namespace

int64_t IntBinary(BinaryOp op, DataType t, int64_t a, int64_t b) {
  uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  int64_t result = 0;
  switch (op) {
    case BinaryOp::kAdd:
      result = static_cast<int64_t>(ua + ub);
      break;
    case BinaryOp::kSub:
      result = static_cast<int64_t>(ua - ub);
      break;
    case BinaryOp::kMul:
      result = static_cast<int64_t>(ua * ub);
      break;
    case BinaryOp::kDiv:
    case BinaryOp::kMod:
    case BinaryOp::kFloorDiv:
    case BinaryOp::kFloorMod: {
      int64_t q, r;
      TruncDivMod(t, a, b, &q, &r);
      // Flooring differs from truncation when the remainder's sign is not the divisor's.
      if ((op == BinaryOp::kFloorDiv || op == BinaryOp::kFloorMod) && t.is_int() && r != 0 &&
          ((r < 0) != (b < 0))) {
        q = static_cast<int64_t>(static_cast<uint64_t>(q) - 1);
        r = static_cast<int64_t>(static_cast<uint64_t>(r) + ub);
      }
      result = op == BinaryOp::kDiv || op == BinaryOp::kFloorDiv ? q : r;
      break;
    }
    case BinaryOp::kMin:
      result = Less(t, b, a) ? b : a;
      break;
    case BinaryOp::kMax:
      result = Less(t, a, b) ? b : a;
      break;
    default:
      KILN_CHECK_MSG(false, "not an arithmetic operator: ", BinaryOpName(op));
  }
  return WrapToIntType(t, result);
}

bool IntCompare(BinaryOp op, DataType t, int64_t a, int64_t b) {
  switch (op) {
    case BinaryOp::kEq:
      return a == b;
    case BinaryOp::kNe:
      return a != b;
    case BinaryOp::kLt:
      return Less(t, a, b);
    case BinaryOp::kLe:
      return !Less(t, b, a);
    case BinaryOp::kGt:
      return Less(t, b, a);
    case BinaryOp::kGe:
      return !Less(t, a, b);
    default:
      KILN_CHECK_MSG(false, "not a comparison: ", BinaryOpName(op));
  }
  return false;
}

std::optional<Expr> FoldBinary(BinaryOp op, const Expr& a, const Expr& b) {
  if (a.dtype() != b.dtype() || !a.dtype().is_scalar()) return std::nullopt;
  DataType t = a.dtype();
  if (const auto* x = a.as<IntImmNode>()) {
    const auto* y = b.as<IntImmNode>();
    if (y == nullptr) return std::nullopt;
    if (IsComparison(op)) return BoolImmNode::make(IntCompare(op, t, x->value, y->value));
    if (IsLogical(op)) return std::nullopt;
    bool divides = op == BinaryOp::kDiv || op == BinaryOp::kMod || op == BinaryOp::kFloorDiv ||
                   op == BinaryOp::kFloorMod;
    if (divides && y->value == 0) return std::nullopt;
    return IntImmNode::make(t, IntBinary(op, t, x->value, y->value));
  }
  if (const auto* x = a.as<FloatImmNode>()) {
    const auto* y = b.as<FloatImmNode>();
    if (y == nullptr) return std::nullopt;
    double u = x->value, v = y->value;
    // A NaN an operation makes is the positive quiet NaN, whatever sign the
    // compiling machine's arithmetic gives it (IEEE leaves it open).
    auto arithmetic = [t](double r) {
      return FloatImmNode::make(t, std::isnan(r) ? std::numeric_limits<double>::quiet_NaN() : r);
    };
    switch (op) {
      // In double, the exact result of one f16/f32 operation rounds to the
      // same value as the type's own correctly rounded operation would give.
      case BinaryOp::kAdd:
        return arithmetic(u + v);
      case BinaryOp::kSub:
        // -0.0 - v is the negation, which flips a NaN's sign too.
        if (u == 0 && std::signbit(u)) return FloatImmNode::make(t, -v);
        return arithmetic(u - v);
      case BinaryOp::kMul:
        return arithmetic(u * v);
      case BinaryOp::kDiv:
        return arithmetic(u / v);
      case BinaryOp::kEq:
        return BoolImmNode::make(u == v);
      case BinaryOp::kNe:
        return BoolImmNode::make(u != v);
      case BinaryOp::kLt:
        return BoolImmNode::make(u < v);
      case BinaryOp::kLe:
        return BoolImmNode::make(u <= v);
      case BinaryOp::kGt:
        return BoolImmNode::make(u > v);
      case BinaryOp::kGe:
        return BoolImmNode::make(u >= v);
      default:
        return std::nullopt;
    }
  }
  if (const auto* x = a.as<BoolImmNode>()) {
    const auto* y = b.as<BoolImmNode>();
    if (y == nullptr) return std::nullopt;
    switch (op) {
      case BinaryOp::kAnd:
        return BoolImmNode::make(x->value && y->value);
      case BinaryOp::kOr:
        return BoolImmNode::make(x->value || y->value);
      case BinaryOp::kEq:
        return BoolImmNode::make(x->value == y->value);
      case BinaryOp::kNe:
        return BoolImmNode::make(x->value != y->value);
      default:
        return std::nullopt;
    }
  }
  return std::nullopt;
}

std::optional<Expr> FoldCall(Intrinsic op, const std::vector<Expr>& args) {
  if (args.empty()) return std::nullopt;  // the subgroup builtins
  std::vector<int64_t> values;
  for (const Expr& arg : args) {
    const auto* imm = arg.as<IntImmNode>();
    if (imm == nullptr || arg.dtype() != args[0].dtype()) return std::nullopt;
    values.push_back(imm->value);
  }
  DataType t = args[0].dtype();
  uint64_t mask = t.bits == 64 ? ~uint64_t{0} : (uint64_t{1} << t.bits) - 1;
  uint64_t a = static_cast<uint64_t>(values[0]) & mask;
  auto make = [&](uint64_t bits) { return IntImmNode::make(t, static_cast<int64_t>(bits)); };
  switch (op) {
    case Intrinsic::kBitwiseAnd:
      return make(a & static_cast<uint64_t>(values[1]));
    case Intrinsic::kBitwiseOr:
      return make(a | static_cast<uint64_t>(values[1]));
    case Intrinsic::kBitwiseXor:
      return make(a ^ static_cast<uint64_t>(values[1]));
    case Intrinsic::kBitwiseNot:
      return make(~a);
    case Intrinsic::kPopcount:
      return make(static_cast<uint64_t>(__builtin_popcountll(a)));
    case Intrinsic::kShiftLeft:
    case Intrinsic::kShiftRight: {
      // The amount is taken modulo the bit width (expr_nodes.h).
      unsigned amount = static_cast<unsigned>(static_cast<uint64_t>(values[1]) % t.bits);
      if (op == Intrinsic::kShiftLeft) return make(a << amount);
      // Normalized signed values are sign-extended, so >> on int64 is arithmetic.
      if (t.is_int()) return make(static_cast<uint64_t>(values[0] >> amount));
      return make(a >> amount);
    }
    case Intrinsic::kAbs:
      if (t.is_uint() || values[0] >= 0) return args[0];
      return make(uint64_t{0} - static_cast<uint64_t>(values[0]));  // abs(MIN) wraps to MIN
    default:
      return std::nullopt;
  }
}

namespace {

// Float to integer: truncate toward zero, saturate, NaN to 0.
int64_t FloatToInt(DataType t, double v) {
  if (std::isnan(v)) return 0;
  double x = std::trunc(v);
  // Too large a value clamps at the largest f32 below the type's limit
  // 2^n (2^n - 2^(n-24); 2^n - 1 for n <= 24), as the IR's casts do at run
  // time (docs/ir.md), so that a folded cast agrees with an unfolded one.
  const int n = t.is_uint() ? t.bits : t.bits - 1;
  const double limit = std::ldexp(1.0, n);  // exactly representable
  const double largest = std::trunc(limit - std::ldexp(1.0, n - 24));
  if (t.is_uint()) {
    if (x <= 0) return 0;
    if (x >= limit) return static_cast<int64_t>(static_cast<uint64_t>(largest));
    return WrapToIntType(t, static_cast<int64_t>(static_cast<uint64_t>(x)));
  }
  if (x >= limit) return static_cast<int64_t>(largest);
  if (x < -limit) return WrapToIntType(t, static_cast<int64_t>(uint64_t{1} << (t.bits - 1)));
  return static_cast<int64_t>(x);
}

}  // namespace

std::optional<Expr> FoldCast(DataType t, const Expr& value) {
  if (!t.is_scalar() || !value.dtype().is_scalar()) return std::nullopt;
  if (!(t.is_numeric() || t.is_bool())) return std::nullopt;
  DataType from = value.dtype();
  if (const auto* x = value.as<IntImmNode>()) {
    if (t.is_integer()) return IntImmNode::make(t, x->value);
    if (t.is_bool()) return BoolImmNode::make(x->value != 0);
    double v = from.is_uint() ? static_cast<double>(x->uvalue()) : static_cast<double>(x->value);
    // Beyond 2^53 the conversion to double already rounded once; leave it to run time.
    if (std::fabs(v) > std::ldexp(1.0, 53)) return std::nullopt;
    return FloatImmNode::make(t, v);
  }
  if (const auto* x = value.as<FloatImmNode>()) {
    if (t.is_float()) return FloatImmNode::make(t, x->value);
    if (t.is_bool()) return BoolImmNode::make(x->value != 0);
    return IntImmNode::make(t, FloatToInt(t, x->value));
  }
  if (const auto* x = value.as<BoolImmNode>()) {
    if (t.is_bool()) return value;
    return MakeConst(t, int64_t{x->value ? 1 : 0});
  }
  return std::nullopt;
}

}  // namespace kiln::ir
