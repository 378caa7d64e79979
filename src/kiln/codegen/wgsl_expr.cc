// FunctionEmitter: expressions.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kiln/codegen/wgsl_emitter.h"
#include "kiln/codegen/wgsl_types.h"
#include "kiln/ir/expr_ops.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/structural_equal.h"

namespace kiln::codegen {
namespace {

// Whether an integer divisor is a constant whose division every back end
// computes as WGSL defines it: not 0, and not -1 (MIN / -1).
bool SafeConstDivisor(const ir::Expr& divisor) {
  std::optional<int64_t> c = ir::AsConstInt(divisor);
  return c.has_value() && *c != 0 && !(divisor.dtype().is_int() && *c == -1);
}

using ir::BinaryOp;
using ir::Intrinsic;

// Binary operators WGSL spells as infix operators. `&&`/`||` become `&`/`|`:
// the IR evaluates both sides, and only `&`/`|` also work lane-wise on
// vector bools.
// clang-format off
const char* InfixOperator(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd: return "+";
    case BinaryOp::kSub: return "-";
    case BinaryOp::kMul: return "*";
    case BinaryOp::kDiv: return "/";
    case BinaryOp::kMod: return "%";
    case BinaryOp::kEq: return "==";
    case BinaryOp::kNe: return "!=";
    case BinaryOp::kLt: return "<";
    case BinaryOp::kLe: return "<=";
    case BinaryOp::kGt: return ">";
    case BinaryOp::kGe: return ">=";
    case BinaryOp::kAnd: return "&";
    case BinaryOp::kOr: return "|";
    default: return nullptr;
  }
}
// clang-format on

// WGSL's precedence tier of an arithmetic operator (higher binds tighter),
// or 0 where an operand must always be parenthesised.
int ArithmeticTier(BinaryOp op) {
  switch (op) {
    case BinaryOp::kMul:
    case BinaryOp::kDiv:
      return 2;
    case BinaryOp::kAdd:
    case BinaryOp::kSub:
      return 1;
    default:
      return 0;
  }
}

// The tier of the WGSL text an IR operand was emitted as: an infix
// arithmetic operator in parentheses, or 0.
int OperandTier(const ir::Expr& e, const std::string& text) {
  const auto* b = e.as<ir::BinaryNode>();
  if (b == nullptr || text.empty() || text.front() != '(') return 0;
  // An integer quotient by a constant zero is emitted as its dividend.
  if ((b->op == BinaryOp::kDiv || b->op == BinaryOp::kFloorDiv) && b->a.dtype().is_integer() &&
      ir::IsConstInt(b->b, 0)) {
    return OperandTier(b->a, text);
  }
  return ArithmeticTier(b->op);
}

// Intrinsics that are a WGSL builtin of the same meaning, called with the
// same operands.
// clang-format off
const char* BuiltinFunction(Intrinsic op) {
  switch (op) {
    case Intrinsic::kExp: return "exp";
    case Intrinsic::kExp2: return "exp2";
    case Intrinsic::kLog: return "log";
    case Intrinsic::kLog2: return "log2";
    case Intrinsic::kSqrt: return "sqrt";
    case Intrinsic::kRsqrt: return "inverseSqrt";
    case Intrinsic::kSin: return "sin";
    case Intrinsic::kCos: return "cos";
    case Intrinsic::kPow: return "pow";
    case Intrinsic::kFloor: return "floor";
    case Intrinsic::kCeil: return "ceil";
    case Intrinsic::kRound: return "round";  // WGSL rounds half to even, as the IR does
    case Intrinsic::kTrunc: return "trunc";
    case Intrinsic::kFma: return "fma";
    case Intrinsic::kAbs: return "abs";
    case Intrinsic::kPopcount: return "countOneBits";
    case Intrinsic::kDot4I8: return "dot4I8Packed";
    case Intrinsic::kSubgroupAdd: return "subgroupAdd";
    case Intrinsic::kSubgroupMin: return "subgroupMin";
    case Intrinsic::kSubgroupMax: return "subgroupMax";
    case Intrinsic::kSubgroupBroadcastFirst: return "subgroupBroadcastFirst";
    case Intrinsic::kSubgroupShuffle: return "subgroupShuffle";
    default: return nullptr;
  }
}
// clang-format on

// Intrinsics that are a WGSL infix operator.
// clang-format off
const char* BitwiseOperator(Intrinsic op) {
  switch (op) {
    case Intrinsic::kBitwiseAnd: return "&";
    case Intrinsic::kBitwiseOr: return "|";
    case Intrinsic::kBitwiseXor: return "^";
    default: return nullptr;
  }
}
// clang-format on

// Whether WGSL's constant evaluation of `e` with constant operands can fail
// (overflow, division by zero, a NaN or infinite result). Selects,
// comparisons, logic, min/max and vector construction cannot.
bool MayFailAsConstant(const ir::Expr& e) {
  switch (e.kind()) {
    case ir::ExprKind::kBinary:
      switch (e.as<ir::BinaryNode>()->op) {
        case BinaryOp::kAdd:
        case BinaryOp::kSub:
        case BinaryOp::kMul:
        case BinaryOp::kDiv:
        case BinaryOp::kMod:
        case BinaryOp::kFloorDiv:
        case BinaryOp::kFloorMod:
          return true;
        default:
          return false;
      }
    case ir::ExprKind::kCast:
    case ir::ExprKind::kReinterpret:
    case ir::ExprKind::kRamp:
    case ir::ExprKind::kCall:
      return true;
    default:
      return false;
  }
}

// The deepest nesting of parentheses in `text`.
int NestingDepth(const std::string& text) {
  int depth = 0, deepest = 0;
  for (char c : text) {
    if (c == '(') deepest = std::max(deepest, ++depth);
    if (c == ')') --depth;
  }
  return deepest;
}

// Whether a float constant is +0 or -0.
bool IsZero(const std::optional<double>& c) {
  return c.has_value() && *c == 0;
}

}  // namespace

bool FunctionEmitter::IsConstantTree(const ir::Expr& e) {
  switch (e.kind()) {
    case ir::ExprKind::kIntImm:
    case ir::ExprKind::kFloatImm:
    case ir::ExprKind::kBoolImm:
      return true;
    case ir::ExprKind::kVar:
    case ir::ExprKind::kLoad:
    case ir::ExprKind::kLet:
      return false;
    default:
      break;
  }
  auto it = constant_trees_.find(e.get());
  if (it != constant_trees_.end()) return it->second;
  bool constant = false;
  if (const auto* op = e.as<ir::BinaryNode>()) {
    constant = IsConstantTree(op->a) && IsConstantTree(op->b);
  } else if (const auto* op = e.as<ir::NotNode>()) {
    constant = IsConstantTree(op->a);
  } else if (const auto* op = e.as<ir::SelectNode>()) {
    constant = IsConstantTree(op->cond) && IsConstantTree(op->true_value) &&
               IsConstantTree(op->false_value);
  } else if (const auto* op = e.as<ir::CastNode>()) {
    constant = IsConstantTree(op->value);
  } else if (const auto* op = e.as<ir::ReinterpretNode>()) {
    constant = IsConstantTree(op->value);
  } else if (const auto* op = e.as<ir::RampNode>()) {
    constant = IsConstantTree(op->base) && IsConstantTree(op->stride);
  } else if (const auto* op = e.as<ir::BroadcastNode>()) {
    constant = IsConstantTree(op->value);
  } else if (const auto* op = e.as<ir::CallNode>()) {
    // Subgroup operations are never constant expressions.
    constant = !ir::IsSubgroupIntrinsic(op->op);
    for (const ir::Expr& arg : op->args) constant = constant && IsConstantTree(arg);
  }
  constant_trees_.emplace(e.get(), constant);
  return constant;
}

std::string FunctionEmitter::Expr(const ir::Expr& e) {
  // An operation on constants only would be a WGSL constant expression,
  // which WGSL rejects when it overflows or divides by zero; its literals go
  // through a run-time identity instead (the driver still folds them).
  const bool leaf = e.kind() == ir::ExprKind::kIntImm || e.kind() == ir::ExprKind::kFloatImm ||
                    e.kind() == ir::ExprKind::kBoolImm || e.kind() == ir::ExprKind::kVar;
  if (!run_time_literals_ && MayFailAsConstant(e) && IsConstantTree(e)) {
    run_time_literals_ = true;
    std::string text = Emit(e);
    run_time_literals_ = false;
    return text;
  }
  std::string text = Emit(e);
  // Deep WGSL nesting exceeds the recursion limits of WGSL parsers (Tint
  // refuses about 130 nested parentheses): a deep subtree becomes a `let`.
  if (!leaf && text.size() > 2 * kMaxNesting && NestingDepth(text) > kMaxNesting) {
    return LetValue("deep", e.dtype(), text);
  }
  return text;
}

std::string FunctionEmitter::Emit(const ir::Expr& e) {
  switch (e.kind()) {
    case ir::ExprKind::kIntImm:
      return IntImm(e.as<ir::IntImmNode>());
    case ir::ExprKind::kFloatImm:
      return FloatImm(e.as<ir::FloatImmNode>());
    case ir::ExprKind::kBoolImm:
      return e.as<ir::BoolImmNode>()->value ? "true" : "false";
    case ir::ExprKind::kVar: {
      const auto* var = e.as<ir::VarNode>();
      auto it = vars_.find(var);
      if (it == vars_.end()) return Fail("variable '", var->name, "' is used but not bound");
      return it->second;
    }
    case ir::ExprKind::kBinary:
      return Binary(e.as<ir::BinaryNode>());
    case ir::ExprKind::kNot:
      return "!" + Enclosed(Expr(e.as<ir::NotNode>()->a));
    case ir::ExprKind::kSelect: {
      const auto* op = e.as<ir::SelectNode>();
      std::string cond = Expr(op->cond);
      std::string t = Expr(op->true_value);
      std::string f = Expr(op->false_value);
      return StrCat("select(", StripParens(f), ", ", StripParens(t), ", ", StripParens(cond), ")");
    }
    case ir::ExprKind::kCast:
      return Cast(e.as<ir::CastNode>());
    case ir::ExprKind::kReinterpret:
      return Reinterpret(e.as<ir::ReinterpretNode>());
    case ir::ExprKind::kLet: {
      const auto* op = e.as<ir::LetNode>();
      std::string value = Expr(op->value);
      BindVar(op->var.get(), LetValue(op->var.name(), op->var.dtype(), value));
      return Expr(op->body);
    }
    case ir::ExprKind::kRamp:
      return Ramp(e.as<ir::RampNode>());
    case ir::ExprKind::kBroadcast: {
      const auto* op = e.as<ir::BroadcastNode>();
      std::string value = Expr(op->value);
      return StrCat(Type(op->dtype), "(", StripParens(value), ")");
    }
    case ir::ExprKind::kLoad:
      return Load(e.as<ir::LoadNode>());
    case ir::ExprKind::kCall:
      return Call(e.as<ir::CallNode>());
  }
  return Fail("unknown expression kind");
}

std::string FunctionEmitter::IntImm(const ir::IntImmNode* op) {
  if (!op->dtype.is_integer() || op->dtype.bits != 32) return Type(op->dtype);
  std::string literal = WgslIntLiteral(op->value, op->dtype.is_int());
  if (!run_time_literals_) return literal;
  return StrCat(helpers_.RunTime(Type(op->dtype)), "(", StripParens(literal), ")");
}

std::string FunctionEmitter::FloatImm(const ir::FloatImmNode* op) {
  std::string type = Type(op->dtype);
  // -0.0 goes through its bits too: a WGSL compiler may fold the literal
  // `-0.0f` to +0.
  const bool negative_zero = op->value == 0 && std::signbit(op->value);
  if (std::isfinite(op->value) && !negative_zero) {
    std::string literal = WgslFloatLiteral(op->value, op->dtype.bits);
    if (!run_time_literals_) return literal;
    return StrCat(helpers_.RunTime(type), "(", StripParens(literal), ")");
  }
  // No literal spells inf or NaN, and constant expressions may not produce them.
  bool f16 = op->dtype.bits == 16;
  uint32_t bits = negative_zero           ? 0u
                  : std::isnan(op->value) ? (f16 ? 0x7e00u : 0x7fc00000u)
                                          : (f16 ? 0x7c00u : 0x7f800000u);
  if (std::signbit(op->value)) bits |= f16 ? 0x8000u : 0x80000000u;
  std::string helper = f16 ? helpers_.F16FromBits() : helpers_.F32FromBits();
  char hex[16];
  std::snprintf(hex, sizeof(hex), "0x%xu", bits);
  return StrCat(helper, "(", hex, ")");
}

std::string FunctionEmitter::Binary(const ir::BinaryNode* op) {
  std::string a = Expr(op->a);
  std::string b = Expr(op->b);
  ir::DataType type = op->a.dtype();
  // WGSL refuses a constant zero divisor when the shader is created, even
  // with a dividend that is not constant; the IR defines x / 0 == x and
  // x % 0 == 0 (floor_div and floor_mod likewise), so that is emitted.
  if (type.is_integer() && ir::IsConstInt(op->b, 0)) {
    switch (op->op) {
      case BinaryOp::kDiv:
      case BinaryOp::kFloorDiv:
        return a;  // (OperandTier reads its tier as the dividend's)
      case BinaryOp::kMod:
      case BinaryOp::kFloorMod:
        return StrCat(Type(type), "()");
      default:
        break;
    }
  }
  // A float negation (-0.0 - x) is WGSL's negation, which flips the sign bit.
  if (type.is_float() && ir::IsNegation(op)) return StrCat("(-", Enclosed(b), ")");
  if (type.is_float()) {
    if (std::optional<std::string> by_zero = FloatByConstZero(op, a, b)) return *by_zero;
  }
  // A divisor that is not a constant known to divide safely goes through
  // helpers that give WGSL's a / 0 == a, a % 0 == 0 and MIN / -1 == MIN on
  // every back end (WgslHelpers::DivInt).
  if ((type.is_int() || type.is_uint()) && !SafeConstDivisor(op->b)) {
    if (op->op == BinaryOp::kDiv || (op->op == BinaryOp::kFloorDiv && type.is_uint())) {
      return StrCat(helpers_.DivInt(Type(type), type.is_int()), "(", StripParens(a), ", ",
                    StripParens(b), ")");
    }
    if ((op->op == BinaryOp::kMod || op->op == BinaryOp::kFloorMod) && type.is_uint()) {
      return StrCat(helpers_.RemUint(Type(type)), "(", StripParens(a), ", ", StripParens(b), ")");
    }
  }
  if (op->op == BinaryOp::kMod && type.is_int()) {
    // See WgslHelpers::RemInt for why signed `%` is not emitted.
    return StrCat(helpers_.RemInt(Type(type)), "(", StripParens(a), ", ", StripParens(b), ")");
  }
  const char* infix = InfixOperator(op->op);
  if (infix != nullptr && type.is_float() && ir::IsComparison(op->op)) {
    return StrCat(helpers_.FloatCompare(infix, type.lanes), "(", AsF32(a, type), ", ",
                  AsF32(b, type), ")");
  }
  if (infix != nullptr) return Infix(op, a, infix, b);
  switch (op->op) {
    case BinaryOp::kMin:
      return StrCat("min(", StripParens(a), ", ", StripParens(b), ")");
    case BinaryOp::kMax:
      return StrCat("max(", StripParens(a), ", ", StripParens(b), ")");
    case BinaryOp::kFloorDiv:
      if (type.is_uint()) return StrCat("(", a, " / ", b, ")");
      if (type.is_float()) return StrCat("floor(", a, " / ", b, ")");
      return StrCat(helpers_.FloorDivInt(Type(type)), "(", StripParens(a), ", ", StripParens(b),
                    ")");
    case BinaryOp::kFloorMod: {
      if (type.is_uint()) return StrCat("(", a, " % ", b, ")");
      std::string helper =
          type.is_float() ? helpers_.FloorModFloat(Type(type)) : helpers_.FloorModInt(Type(type));
      return StrCat(helper, "(", StripParens(a), ", ", StripParens(b), ")");
    }
    default:
      return Fail("unknown binary operator ", ir::BinaryOpName(op->op));
  }
}

std::optional<std::string> FunctionEmitter::FloatByConstZero(const ir::BinaryNode* op,
                                                             const std::string& a,
                                                             const std::string& b) {
  // A float divided by a constant zero is an infinity or NaN in the IR, as
  // in IEEE 754, but Vulkan drivers compiling with fast math may fold
  // `x / 0.0` to anything (lavapipe gave 0, or dropped the store). Spelled
  // without the division, the result is exact: x / +-0 == x * +-inf (NaN for
  // a zero or NaN x), floor of that changes nothing, and x % +-0 is NaN.
  std::optional<double> divisor = ir::AsConstFloat(op->b);
  if (divisor.has_value() && *divisor == 0) {
    ir::DataType scalar = ir::DataType::Float(op->a.dtype().bits);
    auto special = [&](double value) {
      ir::Expr c = ir::MakeConst(scalar, value);
      return FloatImm(c.as<ir::FloatImmNode>());
    };
    switch (op->op) {
      case BinaryOp::kDiv:
      case BinaryOp::kFloorDiv: {
        double inf = std::signbit(*divisor) ? -INFINITY : INFINITY;
        return StrCat("(", Enclosed(a), " * ", special(inf), ")");
      }
      case BinaryOp::kMod:
      case BinaryOp::kFloorMod: {
        std::string nan = special(static_cast<double>(NAN));
        if (op->a.dtype().lanes == 1) return nan;
        return StrCat(Type(op->a.dtype()), "(", nan, ")");
      }
      default:
        break;
    }
  }
  // The same drivers fold x * 0.0 to 0 (losing NaN and the sign), x + 0.0
  // to x (-0 + 0 is +0) and 0.0 / x to 0: such operations go on the bits.
  using ZeroOp = WgslHelpers::ZeroOp;
  const ir::DataType type = op->a.dtype();
  // And x - x to 0 and x / x to 1 (lavapipe did, where a fused expression
  // subtracted a value from itself), losing NaN for infinities and zeros.
  if ((op->op == BinaryOp::kSub || op->op == BinaryOp::kDiv || op->op == BinaryOp::kFloorDiv) &&
      ir::StructurallyEqual(op->a, op->b)) {
    return ConstZeroCall(op->op == BinaryOp::kSub ? ZeroOp::kSelfMinus : ZeroOp::kSelfOver, a,
                         type);
  }
  std::optional<double> left = ir::AsConstFloat(op->a), right = divisor;
  auto zero = IsZero;
  auto positive_zero = [&](const std::optional<double>& c) { return zero(c) && !std::signbit(*c); };
  switch (op->op) {
    case BinaryOp::kMul:
      if (zero(right)) return ConstZeroCall(ZeroOp::kTimesZero, a, type, right);
      if (zero(left)) return ConstZeroCall(ZeroOp::kTimesZero, b, type, left);
      break;
    case BinaryOp::kAdd:
      if (positive_zero(right)) return ConstZeroCall(ZeroOp::kPlusZero, a, type);
      if (positive_zero(left)) return ConstZeroCall(ZeroOp::kPlusZero, b, type);
      break;
    case BinaryOp::kSub:
      if (zero(right) && std::signbit(*right)) return ConstZeroCall(ZeroOp::kPlusZero, a, type);
      if (positive_zero(left)) return ConstZeroCall(ZeroOp::kZeroMinus, b, type);
      break;
    case BinaryOp::kDiv:
    case BinaryOp::kFloorDiv:  // floor(+-0) is +-0, floor(NaN) NaN
      if (zero(left)) return ConstZeroCall(ZeroOp::kZeroOver, b, type, left);
      break;
    case BinaryOp::kMod:  // z - trunc(z / x) * x, and with floor
    case BinaryOp::kFloorMod:
      if (zero(left)) return ConstZeroCall(ZeroOp::kZeroMod, b, type);
      break;
    default:
      break;
  }
  return std::nullopt;
}

std::string FunctionEmitter::ConstZeroCall(WgslHelpers::ZeroOp zero_op, const std::string& x,
                                           ir::DataType type, std::optional<double> zero) {
  std::string call = StrCat(helpers_.ConstZero(zero_op, type.lanes), "(", AsF32(x, type));
  if (zero.has_value()) call += std::signbit(*zero) ? ", 0x80000000u" : ", 0u";
  call += ")";
  if (type.bits == 32) return call;
  return StrCat(Type(type), "(", call, ")");
}

std::string FunctionEmitter::Cast(const ir::CastNode* op) {
  std::string value = Expr(op->value);
  if (op->dtype == op->value.dtype()) return value;
  if (op->dtype.is_int8x4() || op->value.dtype().is_int8x4()) {
    return Fail("cast between int8x4 and ", (op->dtype.is_int8x4() ? op->value.dtype() : op->dtype),
                " has no WGSL meaning; use reinterpret");
  }
  ir::DataType from = op->value.dtype();
  if (from.is_float() && (op->dtype.is_int() || op->dtype.is_uint())) {
    // WGSL leaves NaN unspecified and clamps f16 sources to f16's range;
    // the IR gives 0 for NaN and clamps at i32's or u32's limits, in f32.
    return StrCat(helpers_.FloatToInt(op->dtype.is_int(), from.lanes), "(", AsF32(value, from),
                  ")");
  }
  if (from.is_float() && op->dtype.is_bool()) {
    // x != 0, true for NaN.
    return StrCat(helpers_.FloatCompare("!=", from.lanes), "(", AsF32(value, from), ", ",
                  Type(ir::DataType::Float(32, from.lanes)), "())");
  }
  return StrCat(Type(op->dtype), "(", StripParens(value), ")");
}

std::string FunctionEmitter::AsF32(const std::string& value, ir::DataType type) {
  if (type.bits == 32) return StripParens(value);
  return StrCat(Type(ir::DataType::Float(32, type.lanes)), "(", StripParens(value), ")");
}

std::string FunctionEmitter::Infix(const ir::BinaryNode* op, const std::string& a,
                                   const char* infix, const std::string& b) {
  // Left-associative chains of one tier (a + b + c, a * b / c) and operands
  // of a higher tier need no parentheses; omitting them keeps long sums
  // shallow for WGSL parsers that bound their recursion.
  const int tier = ArithmeticTier(op->op);
  const bool relational = ir::IsComparison(op->op);
  std::string left = a, right = b;
  if (tier > 0 || relational) {
    int left_tier = OperandTier(op->a, a), right_tier = OperandTier(op->b, b);
    if (left_tier > 0 && (relational || left_tier >= tier)) left = StripParens(a);
    if (right_tier > 0 && (relational || right_tier > tier)) right = StripParens(b);
  }
  return StrCat("(", left, " ", infix, " ", right, ")");
}

std::string FunctionEmitter::Reinterpret(const ir::ReinterpretNode* op) {
  std::string value = StripParens(Expr(op->value));
  ir::DataType from = op->value.dtype();
  ir::DataType to = op->dtype;
  std::string type = Type(to);
  bool from_half = from.is_float() && from.bits == 16;
  bool to_half = to.is_float() && to.bits == 16;
  if (from_half == to_half || from.lanes == to.lanes) {
    return StrCat("bitcast<", type, ">(", value, ")");
  }
  // Naga mistypes a bitcast that changes the lane count (it keeps the
  // source's), so f16 pairs go through pack2x16float / unpack2x16float,
  // which convert every f16 value exactly.
  if (from_half && from.lanes == 2 && to.lanes == 1) {
    std::string packed = StrCat("pack2x16float(vec2<f32>(", value, "))");
    return type == "u32" ? packed : StrCat("bitcast<", type, ">(", packed, ")");
  }
  if (to_half && to.lanes == 2 && from.lanes == 1) {
    std::string bits = Type(from) == "u32" ? value : StrCat("bitcast<u32>(", value, ")");
    return StrCat(type, "(unpack2x16float(", bits, "))");
  }
  return Fail("reinterpret from ", from, " to ", to,
              " is not supported in WGSL (only f16x2 to and from 32-bit scalars)");
}

std::string FunctionEmitter::Ramp(const ir::RampNode* op) {
  std::string base = Expr(op->base);
  std::string stride = Expr(op->stride);
  std::string type = Type(op->dtype);
  ir::DataType element = op->base.dtype();
  std::string offsets = type + "(";
  for (int k = 0; k < op->lanes; ++k) {
    if (k > 0) offsets += ", ";
    offsets += element.is_float() ? WgslFloatLiteral(k, element.bits)
                                  : WgslIntLiteral(k, element.is_int());
  }
  offsets += ")";
  if (ir::IsConstInt(op->stride, 1)) return StrCat("(", type, "(", base, ") + ", offsets, ")");
  return StrCat("(", type, "(", base, ") + ", offsets, " * ", stride, ")");
}

std::string FunctionEmitter::Load(const ir::LoadNode* op) {
  const ir::Expr* index = FlatIndex(op->buffer, op->indices);
  if (index == nullptr) return "<error>";
  if (const PackedArray* packed = Packed(op->buffer)) {
    std::vector<ir::Expr> lanes = StridedLanes(*index);
    if (lanes.empty()) return PackedAccess(*packed, *index);
    std::string out = Type(op->dtype) + "(";
    for (size_t k = 0; k < lanes.size(); ++k) {
      out += (k > 0 ? ", " : "") + PackedAccess(*packed, lanes[k]);
    }
    return out + ")";
  }
  std::string buffer = BufferName(op->buffer);
  bool is_bool = op->buffer.dtype().is_bool();
  // bool elements are stored as i32.
  auto element = [&](const std::string& i) {
    std::string load = StrCat(buffer, "[", StripParens(i), "]");
    return is_bool ? StrCat("(", load, " != 0i)") : load;
  };
  if (index->dtype().lanes == 1) return element(Expr(*index));
  std::string out = Type(op->dtype) + "(";
  std::vector<std::string> lanes = LaneIndices(*index);
  for (size_t k = 0; k < lanes.size(); ++k) out += (k > 0 ? ", " : "") + element(lanes[k]);
  return out + ")";
}

std::string FunctionEmitter::Call(const ir::CallNode* op) {
  if (ir::IsSubgroupIntrinsic(op->op)) uses_subgroups_ = true;
  switch (op->op) {
    case Intrinsic::kIfThenElse:
      return IfThenElse(op);
    case Intrinsic::kShiftLeft:
      return Shift(op, "<<");
    case Intrinsic::kShiftRight:
      return Shift(op, ">>");
    case Intrinsic::kErf:
      return Erf(op);
    case Intrinsic::kFma: {
      // fma(x, 0.0, c) is x * 0.0 + c exactly (the product needs no
      // rounding): emitted so, its product through the exact helper, where
      // the drivers fold fma(x, 0.0, c) to c (losing NaN, infinities and
      // the zero's sign).
      if (op->dtype.is_float() &&
          (IsZero(ir::AsConstFloat(op->args[0])) || IsZero(ir::AsConstFloat(op->args[1])))) {
        made_.push_back(ir::BinaryNode::make(BinaryOp::kMul, op->args[0], op->args[1]));
        made_.push_back(ir::BinaryNode::make(BinaryOp::kAdd, made_.back(), op->args[2]));
        return Expr(made_.back());
      }
      break;
    }
    case Intrinsic::kPow:
      // f16: WGSL's pow is exp2(y * log2(x)), whose f16 rounding loses a
      // whole unit of the exponent's product (65504 ^ 1 overflowed): in f32,
      // rounded once.
      if (op->dtype.is_float() && op->dtype.bits == 16) {
        return StrCat(Type(op->dtype), "(pow(", AsF32(Expr(op->args[0]), op->dtype), ", ",
                      AsF32(Expr(op->args[1]), op->dtype), "))");
      }
      break;
    case Intrinsic::kSigmoid: {
      std::string one = WgslFloatLiteral(1.0, op->dtype.bits);
      return StrCat("(", one, " / (", one, " + exp(-(", Expr(op->args[0]), "))))");
    }
    case Intrinsic::kBitwiseNot:
      return StrCat("(~", Expr(op->args[0]), ")");
    case Intrinsic::kSubgroupInvocationId:
      uses_subgroup_invocation_id_ = true;
      return StrCat("i32(", launch_.subgroup_invocation_id, ")");
    case Intrinsic::kSubgroupSize:
      uses_subgroup_size_ = true;
      return StrCat("i32(", launch_.subgroup_size, ")");
    case Intrinsic::kTanh: {
      ir::DataType type = op->dtype;
      std::string x = AsF32(Expr(op->args[0]), type);
      std::string result = StrCat(helpers_.Tanh(type.lanes), "(", x, ")");
      return type.bits == 32 ? result : StrCat(Type(type), "(", result, ")");
    }
    default:
      break;
  }
  std::vector<std::string> args;
  for (const ir::Expr& arg : op->args) args.push_back(Expr(arg));
  if (const char* infix = BitwiseOperator(op->op)) {
    return StrCat("(", args[0], " ", infix, " ", args[1], ")");
  }
  const char* builtin = BuiltinFunction(op->op);
  if (builtin == nullptr) return Fail("intrinsic ", ir::IntrinsicName(op->op), " has no WGSL form");
  std::string out = StrCat(builtin, "(");
  for (size_t i = 0; i < args.size(); ++i) out += (i > 0 ? ", " : "") + StripParens(args[i]);
  return out + ")";
}

std::string FunctionEmitter::IfThenElse(const ir::CallNode* op) {
  // Only the taken side may be evaluated: an if/else assigning a var.
  std::string cond = Expr(op->args[0]);
  std::string result = names_.Fresh("cond_value");
  Line(StrCat("var ", result, " : ", Type(op->dtype), ";"));
  Line(StrCat("if (", StripParens(cond), ") {"));
  Indent();
  std::string t = Expr(op->args[1]);
  Line(StrCat(result, " = ", StripParens(t), ";"));
  Dedent();
  Line("} else {");
  Indent();
  std::string f = Expr(op->args[2]);
  Line(StrCat(result, " = ", StripParens(f), ";"));
  Dedent();
  Line("}");
  return result;
}

std::string FunctionEmitter::Shift(const ir::CallNode* op, const char* wgsl_op) {
  // WGSL wants a u32 shift amount and rejects constant amounts >= the bit
  // width; the IR takes the amount modulo the width, so mask it explicitly.
  std::string value = Expr(op->args[0]);
  std::string amount = Expr(op->args[1]);
  ir::DataType amount_type = op->args[1].dtype();
  int lanes = amount_type.lanes;
  std::string u32_type = lanes == 1 ? "u32" : StrCat("vec", lanes, "<u32>");
  if (!amount_type.is_uint()) amount = StrCat(u32_type, "(", amount, ")");
  std::string mask = lanes == 1 ? "31u" : StrCat(u32_type, "(31u)");
  return StrCat("(", value, " ", wgsl_op, " (", amount, " & ", mask, "))");
}

std::string FunctionEmitter::Erf(const ir::CallNode* op) {
  std::string x = Expr(op->args[0]);
  ir::DataType type = op->dtype;
  x = StripParens(x);
  if (type.bits == 32) return StrCat(helpers_.Erf(Type(type)), "(", x, ")");
  // f16: evaluate in f32 and round once.
  std::string f32_type = Type(ir::DataType::Float(32, type.lanes));
  return StrCat(Type(type), "(", helpers_.Erf(f32_type), "(", f32_type, "(", x, ")))");
}

}  // namespace kiln::codegen
