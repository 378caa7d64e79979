#include "kiln/ir/expr_nodes.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <unordered_map>
#include <vector>

namespace kiln::ir {
namespace {

template <typename T>
std::shared_ptr<T> NewNode(DataType dtype) {
  auto node = std::make_shared<T>();
  node->dtype = dtype;
  return node;
}

using O = OperandRule;
using R = ResultRule;
constexpr O kF = O::kFloat;
constexpr O kS0 = O::kSameAs0;

// One row per Intrinsic, in enum order.
constexpr IntrinsicInfo kIntrinsics[] = {
    {Intrinsic::kExp, "exp", 1, {kF}, R::kOperand0, true},
    {Intrinsic::kExp2, "exp2", 1, {kF}, R::kOperand0, true},
    {Intrinsic::kLog, "log", 1, {kF}, R::kOperand0, true},
    {Intrinsic::kLog2, "log2", 1, {kF}, R::kOperand0, true},
    {Intrinsic::kSqrt, "sqrt", 1, {kF}, R::kOperand0, true},
    {Intrinsic::kRsqrt, "rsqrt", 1, {kF}, R::kOperand0, true},
    {Intrinsic::kSin, "sin", 1, {kF}, R::kOperand0, true},
    {Intrinsic::kCos, "cos", 1, {kF}, R::kOperand0, true},
    {Intrinsic::kTanh, "tanh", 1, {kF}, R::kOperand0, true},
    {Intrinsic::kSigmoid, "sigmoid", 1, {kF}, R::kOperand0, true},
    {Intrinsic::kErf, "erf", 1, {kF}, R::kOperand0, true},
    {Intrinsic::kPow, "pow", 2, {kF, kS0}, R::kOperand0, true},
    {Intrinsic::kFloor, "floor", 1, {kF}, R::kOperand0, true},
    {Intrinsic::kCeil, "ceil", 1, {kF}, R::kOperand0, true},
    {Intrinsic::kRound, "round", 1, {kF}, R::kOperand0, true},
    {Intrinsic::kTrunc, "trunc", 1, {kF}, R::kOperand0, true},
    {Intrinsic::kFma, "fma", 3, {kF, kS0, kS0}, R::kOperand0, true},
    {Intrinsic::kAbs, "abs", 1, {O::kNumber}, R::kOperand0, true},
    {Intrinsic::kBitwiseAnd, "bitwise_and", 2, {O::kInteger, kS0}, R::kOperand0, true},
    {Intrinsic::kBitwiseOr, "bitwise_or", 2, {O::kInteger, kS0}, R::kOperand0, true},
    {Intrinsic::kBitwiseXor, "bitwise_xor", 2, {O::kInteger, kS0}, R::kOperand0, true},
    {Intrinsic::kBitwiseNot, "bitwise_not", 1, {O::kInteger}, R::kOperand0, true},
    {Intrinsic::kShiftLeft, "shift_left", 2, {O::kInteger, kS0}, R::kOperand0, true},
    {Intrinsic::kShiftRight, "shift_right", 2, {O::kInteger, kS0}, R::kOperand0, true},
    {Intrinsic::kPopcount, "popcount", 1, {O::kInteger}, R::kOperand0, true},
    {Intrinsic::kIfThenElse,
     "if_then_else",
     3,
     {O::kScalarBool, O::kAny, O::kSameAs1},
     R::kOperand1,
     false},
    {Intrinsic::kDot4I8, "dot4i8", 2, {O::kInt8x4, O::kInt8x4}, R::kI32, true},
    {Intrinsic::kSubgroupAdd, "subgroup_add", 1, {O::kNumber}, R::kOperand0, true},
    {Intrinsic::kSubgroupMin, "subgroup_min", 1, {O::kNumber}, R::kOperand0, true},
    {Intrinsic::kSubgroupMax, "subgroup_max", 1, {O::kNumber}, R::kOperand0, true},
    {Intrinsic::kSubgroupBroadcastFirst,
     "subgroup_broadcast_first",
     1,
     {O::kNumber},
     R::kOperand0,
     true},
    {Intrinsic::kSubgroupShuffle,
     "subgroup_shuffle",
     2,
     {O::kNumber, O::kLaneIndex},
     R::kOperand0,
     false},
    {Intrinsic::kSubgroupInvocationId, "subgroup_invocation_id", 0, {}, R::kI32, true},
    {Intrinsic::kSubgroupSize, "subgroup_size", 0, {}, R::kI32, true},
};
static_assert(std::size(kIntrinsics) == static_cast<size_t>(Intrinsic::kSubgroupSize) + 1);

const IntrinsicInfo& Info(Intrinsic op) {
  const IntrinsicInfo& info = kIntrinsics[static_cast<size_t>(op)];
  KILN_CHECK(info.op == op);
  return info;
}

}  // namespace

Expr IntImmNode::make(DataType dtype, int64_t value) {
  KILN_CHECK_MSG(dtype.is_integer() && dtype.is_scalar() && dtype.IsValid(), "IntImm of type ",
                 dtype);
  auto node = NewNode<IntImmNode>(dtype);
  node->value = WrapToIntType(dtype, value);
  return Expr(std::move(node));
}

Expr FloatImmNode::make(DataType dtype, double value) {
  KILN_CHECK_MSG(dtype.is_float() && dtype.is_scalar() && dtype.IsValid(), "FloatImm of type ",
                 dtype);
  auto node = NewNode<FloatImmNode>(dtype);
  node->value = RoundToFloatType(dtype, value);
  return Expr(std::move(node));
}

Expr BoolImmNode::make(bool value) {
  auto node = NewNode<BoolImmNode>(kBool);
  node->value = value;
  return Expr(std::move(node));
}

bool IsComparison(BinaryOp op) {
  return op >= BinaryOp::kEq && op <= BinaryOp::kGe;
}
bool IsLogical(BinaryOp op) {
  return op == BinaryOp::kAnd || op == BinaryOp::kOr;
}

std::string_view BinaryOpName(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "+";
    case BinaryOp::kSub:
      return "-";
    case BinaryOp::kMul:
      return "*";
    case BinaryOp::kDiv:
      return "/";
    case BinaryOp::kMod:
      return "%";
    case BinaryOp::kFloorDiv:
      return "floor_div";
    case BinaryOp::kFloorMod:
      return "floor_mod";
    case BinaryOp::kMin:
      return "min";
    case BinaryOp::kMax:
      return "max";
    case BinaryOp::kEq:
      return "==";
    case BinaryOp::kNe:
      return "!=";
    case BinaryOp::kLt:
      return "<";
    case BinaryOp::kLe:
      return "<=";
    case BinaryOp::kGt:
      return ">";
    case BinaryOp::kGe:
      return ">=";
    case BinaryOp::kAnd:
      return "&&";
    case BinaryOp::kOr:
      return "||";
  }
  return "?";
}

Expr BinaryNode::make(BinaryOp op, Expr a, Expr b) {
  KILN_CHECK(a.defined() && b.defined());
  DataType t = a.dtype();
  if (IsComparison(op) || IsLogical(op)) t = DataType::Bool(t.lanes);
  auto node = NewNode<BinaryNode>(t);
  node->op = op;
  node->a = std::move(a);
  node->b = std::move(b);
  return Expr(std::move(node));
}

Expr NotNode::make(Expr a) {
  KILN_CHECK(a.defined());
  auto node = NewNode<NotNode>(DataType::Bool(a.dtype().lanes));
  node->a = std::move(a);
  return Expr(std::move(node));
}

Expr SelectNode::make(Expr cond, Expr true_value, Expr false_value) {
  KILN_CHECK(cond.defined() && true_value.defined() && false_value.defined());
  auto node = NewNode<SelectNode>(true_value.dtype());
  node->cond = std::move(cond);
  node->true_value = std::move(true_value);
  node->false_value = std::move(false_value);
  return Expr(std::move(node));
}

Expr CastNode::make(DataType dtype, Expr value) {
  KILN_CHECK(value.defined() && dtype.IsValid());
  auto node = NewNode<CastNode>(dtype);
  node->value = std::move(value);
  return Expr(std::move(node));
}

Expr ReinterpretNode::make(DataType dtype, Expr value) {
  KILN_CHECK(value.defined() && dtype.IsValid());
  auto node = NewNode<ReinterpretNode>(dtype);
  node->value = std::move(value);
  return Expr(std::move(node));
}

Expr LetNode::make(Var var, Expr value, Expr body) {
  KILN_CHECK(var.defined() && value.defined() && body.defined());
  auto node = NewNode<LetNode>(body.dtype());
  node->var = std::move(var);
  node->value = std::move(value);
  node->body = std::move(body);
  return Expr(std::move(node));
}

Expr RampNode::make(Expr base, Expr stride, int lanes) {
  KILN_CHECK(base.defined() && stride.defined());
  KILN_CHECK_MSG(lanes >= 2 && lanes <= 4, "ramp lanes ", lanes);
  DataType t = base.dtype().element_of().with_lanes(lanes);
  KILN_CHECK_MSG(t.IsValid(), "ramp of ", base.dtype());
  auto node = NewNode<RampNode>(t);
  node->base = std::move(base);
  node->stride = std::move(stride);
  node->lanes = lanes;
  return Expr(std::move(node));
}

Expr BroadcastNode::make(Expr value, int lanes) {
  KILN_CHECK(value.defined());
  KILN_CHECK_MSG(lanes >= 2 && lanes <= 4, "broadcast lanes ", lanes);
  DataType t = value.dtype().element_of().with_lanes(lanes);
  KILN_CHECK_MSG(t.IsValid(), "broadcast of ", value.dtype());
  auto node = NewNode<BroadcastNode>(t);
  node->value = std::move(value);
  node->lanes = lanes;
  return Expr(std::move(node));
}

Expr LoadNode::make(Buffer buffer, std::vector<Expr> indices) {
  KILN_CHECK(buffer.defined() && !indices.empty());
  int lanes = 1;
  for (const Expr& index : indices) {
    KILN_CHECK(index.defined());
    lanes = std::max<int>(lanes, index.dtype().lanes);
  }
  DataType t = buffer.dtype().with_lanes(lanes);
  KILN_CHECK_MSG(t.IsValid(), "load of ", lanes, " lanes from a buffer of ", buffer.dtype());
  auto node = NewNode<LoadNode>(t);
  node->buffer = std::move(buffer);
  node->indices = std::move(indices);
  return Expr(std::move(node));
}

std::string_view IntrinsicName(Intrinsic op) {
  return Info(op).name;
}

std::optional<Intrinsic> IntrinsicFromName(std::string_view name) {
  for (const IntrinsicInfo& info : kIntrinsics) {
    if (info.name == name) return info.op;
  }
  return std::nullopt;
}

int IntrinsicArity(Intrinsic op) {
  return Info(op).arity;
}

const IntrinsicInfo& GetIntrinsicInfo(Intrinsic op) {
  return Info(op);
}

bool OperandFits(OperandRule rule, DataType type, std::span<const DataType> operands) {
  switch (rule) {
    case OperandRule::kFloat:
      return type.is_float();
    case OperandRule::kNumber:
      return type.is_numeric();
    case OperandRule::kInteger:
      return type.is_integer();
    case OperandRule::kInt8x4:
      return type.is_int8x4();
    case OperandRule::kScalarBool:
      return type == kBool;
    case OperandRule::kLaneIndex:
      return type == kI32 || type == kU32;
    case OperandRule::kAny:
      return type.IsValid() && !type.is_handle();
    case OperandRule::kSameAs0:
      return !operands.empty() && type == operands[0];
    case OperandRule::kSameAs1:
      return operands.size() > 1 && type == operands[1];
  }
  return false;
}

std::string_view OperandRuleText(OperandRule rule) {
  switch (rule) {
    case OperandRule::kFloat:
      return "a float";
    case OperandRule::kNumber:
      return "a number";
    case OperandRule::kInteger:
      return "an integer";
    case OperandRule::kInt8x4:
      return "int8x4";
    case OperandRule::kScalarBool:
      return "a scalar bool";
    case OperandRule::kLaneIndex:
      return "an i32 or u32 lane index";
    case OperandRule::kAny:
      return "a value";
    case OperandRule::kSameAs0:
      return "the type of operand 0";
    case OperandRule::kSameAs1:
      return "the type of operand 1";
  }
  return "?";
}

bool IsSubgroupIntrinsic(Intrinsic op) {
  return op >= Intrinsic::kSubgroupAdd && op <= Intrinsic::kSubgroupSize;
}

bool IsSubgroupBuiltin(Intrinsic op) {
  return op == Intrinsic::kSubgroupInvocationId || op == Intrinsic::kSubgroupSize;
}

Expr CallNode::make(Intrinsic op, std::vector<Expr> args) {
  KILN_CHECK_MSG(static_cast<int>(args.size()) == IntrinsicArity(op), IntrinsicName(op), " takes ",
                 IntrinsicArity(op), " operands, got ", args.size());
  for (const Expr& arg : args) KILN_CHECK(arg.defined());
  DataType t = kI32;
  switch (Info(op).result) {
    case ResultRule::kOperand0:
      t = args[0].dtype();
      break;
    case ResultRule::kOperand1:
      t = args[1].dtype();
      break;
    case ResultRule::kI32:
      t = kI32;
      break;
  }
  auto node = NewNode<CallNode>(t);
  node->op = op;
  node->args = std::move(args);
  return Expr(std::move(node));
}

Expr MakeConst(DataType dtype, int64_t value) {
  DataType scalar = dtype.element_of();
  Expr c;
  if (scalar.is_float()) {
    c = FloatImmNode::make(scalar, static_cast<double>(value));
  } else if (scalar.is_bool()) {
    c = BoolImmNode::make(value != 0);
  } else {
    c = IntImmNode::make(scalar, value);
  }
  return dtype.is_vector() ? BroadcastNode::make(c, dtype.lanes) : c;
}

Expr MakeConst(DataType dtype, double value) {
  DataType scalar = dtype.element_of();
  if (!scalar.is_float()) {
    KILN_CHECK_MSG(value == std::trunc(value), "non-integral constant ", value, " for ", dtype);
    return MakeConst(dtype, static_cast<int64_t>(value));
  }
  Expr c = FloatImmNode::make(scalar, value);
  return dtype.is_vector() ? BroadcastNode::make(c, dtype.lanes) : c;
}

Expr MakeZero(DataType dtype) {
  return MakeConst(dtype, int64_t{0});
}
Expr MakeOne(DataType dtype) {
  return MakeConst(dtype, int64_t{1});
}

std::optional<int64_t> AsConstInt(const Expr& e) {
  if (!e.defined()) return std::nullopt;
  if (const auto* imm = e.as<IntImmNode>()) return imm->value;
  if (const auto* bc = e.as<BroadcastNode>()) return AsConstInt(bc->value);
  return std::nullopt;
}

bool IsConstInt(const Expr& e, int64_t value) {
  std::optional<int64_t> c = AsConstInt(e);
  return c.has_value() && *c == value;
}

std::optional<double> AsConstFloat(const Expr& e) {
  if (!e.defined()) return std::nullopt;
  if (const auto* imm = e.as<FloatImmNode>()) return imm->value;
  if (const auto* bc = e.as<BroadcastNode>()) return AsConstFloat(bc->value);
  return std::nullopt;
}

namespace {

// Calls f on each operand of e (not the var a let binds).
template <typename F>
void ForEachOperand(const Expr& e, F&& f) {
  switch (e.kind()) {
    case ExprKind::kBinary:
      f(e.as<BinaryNode>()->a);
      f(e.as<BinaryNode>()->b);
      return;
    case ExprKind::kNot:
      f(e.as<NotNode>()->a);
      return;
    case ExprKind::kSelect:
      f(e.as<SelectNode>()->cond);
      f(e.as<SelectNode>()->true_value);
      f(e.as<SelectNode>()->false_value);
      return;
    case ExprKind::kCast:
      f(e.as<CastNode>()->value);
      return;
    case ExprKind::kReinterpret:
      f(e.as<ReinterpretNode>()->value);
      return;
    case ExprKind::kLet:
      f(e.as<LetNode>()->value);
      f(e.as<LetNode>()->body);
      return;
    case ExprKind::kRamp:
      f(e.as<RampNode>()->base);
      f(e.as<RampNode>()->stride);
      return;
    case ExprKind::kBroadcast:
      f(e.as<BroadcastNode>()->value);
      return;
    case ExprKind::kLoad:
      for (const Expr& i : e.as<LoadNode>()->indices) f(i);
      return;
    case ExprKind::kCall:
      for (const Expr& a : e.as<CallNode>()->args) f(a);
      return;
    default:
      return;  // constants and variables
  }
}

// The depth of `e` by plain recursion, visiting at most `budget` nodes (a
// shared node once per path to it); -1 where the budget runs out first. The
// recursion is as deep as the budget at most.
int SmallExprDepth(const Expr& e, int& budget) {
  if (--budget < 0) return -1;
  int d = 0;
  ForEachOperand(e, [&](const Expr& c) {
    if (d < 0 || !c.defined()) return;
    const int dc = SmallExprDepth(c, budget);
    d = dc < 0 ? -1 : std::max(d, dc);
  });
  return d < 0 ? -1 : d + 1;
}

}  // namespace

int ExprDepth(const Expr& e, int cap) {
  if (!e.defined()) return 0;
  // Most expressions are small: measured directly, with nothing allocated.
  int budget = 256;
  if (const int d = SmallExprDepth(e, budget); d >= 0) return std::min(d, cap + 1);
  // Depth-first with an explicit stack of (node, operands pushed, path
  // length from e); each shared node is measured once.
  struct Entry {
    const Expr* expr;
    bool expanded;
    int level;
  };
  std::unordered_map<const ExprNode*, int> depth;
  std::vector<Entry> stack = {{&e, false, 1}};
  while (!stack.empty()) {
    const Entry top = stack.back();
    if (depth.count(top.expr->get()) != 0) {
      stack.pop_back();
      continue;
    }
    if (!top.expanded) {
      if (top.level > cap) return cap + 1;
      stack.back().expanded = true;
      ForEachOperand(*top.expr, [&](const Expr& c) {
        if (c.defined() && depth.count(c.get()) == 0) stack.push_back({&c, false, top.level + 1});
      });
      continue;
    }
    stack.pop_back();
    int d = 0;
    ForEachOperand(*top.expr, [&](const Expr& c) {
      if (c.defined()) d = std::max(d, depth[c.get()]);
    });
    depth[top.expr->get()] = d + 1;
  }
  return std::min(depth[e.get()], cap + 1);
}

}  // namespace kiln::ir
