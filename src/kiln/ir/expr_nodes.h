// The expression node classes. Semantics are stated in expr.h.
//
// Every class has `static constexpr ExprKind kKind`, public read-only fields
// (reach them through `expr.as<T>()`), and a `static Expr make(...)` that
// computes the result type and KILN_CHECKs obvious construction bugs.
#pragma once

#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "kiln/ir/buffer.h"
#include "kiln/ir/expr.h"

namespace kiln::ir {

// ---------------------------------------------------------------- constants

// An integer constant of a scalar int or uint type. `value` holds the bits of
// the constant, normalized for the type: sign-extended from `bits` for signed
// types, zero-extended for unsigned ones (u64 values above INT64_MAX are
// stored as their two's complement bit pattern; read them with uvalue()).
class IntImmNode : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::kIntImm;
  IntImmNode() : ExprNode(kKind) {}

  int64_t value = 0;
  uint64_t uvalue() const { return static_cast<uint64_t>(value); }

  // Wraps `value` to the type (e.g. make(kU8, 300) holds 44).
  static Expr make(DataType dtype, int64_t value);
};

// A float constant of a scalar float type; `value` is already rounded to the
// type's precision.
class FloatImmNode : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::kFloatImm;
  FloatImmNode() : ExprNode(kKind) {}

  double value = 0;

  static Expr make(DataType dtype, double value);
};

class BoolImmNode : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::kBoolImm;
  BoolImmNode() : ExprNode(kKind) {}

  bool value = false;

  static Expr make(bool value);
};

// ---------------------------------------------------------------- operators

enum class BinaryOp : uint8_t {
  // Arithmetic on numeric types: result has the operands' type.
  kAdd,
  kSub,
  kMul,
  kDiv,       // truncating for integers
  kMod,       // truncating for integers
  kFloorDiv,  // rounds toward -inf
  kFloorMod,  // sign of the divisor
  kMin,
  kMax,
  // Comparisons on numeric (or, for == and !=, bool) operands: bool result
  // with the operands' lanes.
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
  // Logic on bool operands.
  kAnd,
  kOr,
};

bool IsComparison(BinaryOp op);
bool IsLogical(BinaryOp op);
// The operator's spelling in the text form: "+", "floor_div", "min", "==", "&&", ...
std::string_view BinaryOpName(BinaryOp op);

class BinaryNode : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::kBinary;
  BinaryNode() : ExprNode(kKind) {}

  BinaryOp op = BinaryOp::kAdd;
  Expr a;
  Expr b;

  // Result type: bool (with a's lanes) for comparisons and logic, else a's type.
  static Expr make(BinaryOp op, Expr a, Expr b);
};

class NotNode : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::kNot;
  NotNode() : ExprNode(kKind) {}

  Expr a;

  static Expr make(Expr a);
};

// select(cond, t, f): both t and f are evaluated. cond is bool with the lanes
// of t (or a scalar bool, selecting whole vectors).
class SelectNode : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::kSelect;
  SelectNode() : ExprNode(kKind) {}

  Expr cond;
  Expr true_value;
  Expr false_value;

  static Expr make(Expr cond, Expr true_value, Expr false_value);
};

// Value conversion to `dtype` (same lanes as the operand).
class CastNode : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::kCast;
  CastNode() : ExprNode(kKind) {}

  Expr value;

  static Expr make(DataType dtype, Expr value);
};

// Bit cast: the operand's bits read as `dtype` (total bit widths must match,
// e.g. f32 <-> u32, f16x2 <-> u32, int8x4 <-> i32).
class ReinterpretNode : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::kReinterpret;
  ReinterpretNode() : ExprNode(kKind) {}

  Expr value;

  static Expr make(DataType dtype, Expr value);
};

// let var = value in body. var must have value's type.
class LetNode : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::kLet;
  LetNode() : ExprNode(kKind) {}

  Var var;
  Expr value;
  Expr body;

  static Expr make(Var var, Expr value, Expr body);
};

// A vector whose lane i is base + i * stride; base and stride are scalars of
// one integer type (floats are allowed too but rarely useful).
class RampNode : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::kRamp;
  RampNode() : ExprNode(kKind) {}

  Expr base;
  Expr stride;
  int lanes = 1;

  static Expr make(Expr base, Expr stride, int lanes);
};

// A vector with every lane equal to the scalar `value`.
class BroadcastNode : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::kBroadcast;
  BroadcastNode() : ExprNode(kKind) {}

  Expr value;
  int lanes = 1;

  static Expr make(Expr value, int lanes);
};

// buffer[indices...]. Each index is an integer scalar or vector; the result
// has the buffer's element type with the lanes of the widest index (vector
// indices of one load must agree in lanes). A ramp index with stride 1 is a
// contiguous vector load; any other vector index is a gather.
class LoadNode : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::kLoad;
  LoadNode() : ExprNode(kKind) {}

  Buffer buffer;
  std::vector<Expr> indices;

  static Expr make(Buffer buffer, std::vector<Expr> indices);
};

// ---------------------------------------------------------------- intrinsics

enum class Intrinsic : uint8_t {
  // Float math, lane-wise, result type = operand type.
  kExp,
  kExp2,
  kLog,
  kLog2,
  kSqrt,
  kRsqrt,  // 1 / sqrt(x)
  kSin,
  kCos,
  kTanh,
  kSigmoid,  // 1 / (1 + exp(-x))
  kErf,
  kPow,  // pow(x, y)
  kFloor,
  kCeil,
  kRound,  // to nearest, ties to even
  kTrunc,
  kFma,  // fma(a, b, c) = a * b + c
  // Numeric (int or float), result type = operand type. abs(INT_MIN) == INT_MIN.
  kAbs,
  // Integer bit operations, result type = operand type. Shifts: both
  // operands have one type; the shift amount is taken modulo the bit width;
  // shift_right is arithmetic for signed types, logical for unsigned ones.
  kBitwiseAnd,
  kBitwiseOr,
  kBitwiseXor,
  kBitwiseNot,
  kShiftLeft,
  kShiftRight,
  kPopcount,
  // if_then_else(c, a, b): evaluates c, then only the side it returns.
  // c is a scalar bool.
  kIfThenElse,
  // dot4i8(a, b): a and b are int8x4; the i32 sum of the four products of
  // their signed 8-bit lanes.
  kDot4I8,
  // Subgroup operations (need the subgroups feature): result type = type of
  // the first operand. Every thread of the subgroup must reach them.
  kSubgroupAdd,
  kSubgroupMin,
  kSubgroupMax,
  kSubgroupBroadcastFirst,
  kSubgroupShuffle,  // subgroup_shuffle(value, lane): value from `lane` (u32)
  // The calling thread's subgroup builtins, i32, no operands (need the
  // subgroups feature; they vary between threads). subgroup_invocation_id():
  // the thread's lane in its subgroup, in [0, subgroup_size()).
  // subgroup_size(): the threads per subgroup, known only at run time (a
  // power of two in [4, 128] on WebGPU devices).
  kSubgroupInvocationId,
  kSubgroupSize,
};

// What an operand of an intrinsic may be.
enum class OperandRule : uint8_t {
  kFloat,       // a float scalar or vector
  kNumber,      // an integer or float scalar or vector
  kInteger,     // an integer scalar or vector
  kInt8x4,      // the packed int8x4
  kScalarBool,  // a scalar bool
  kLaneIndex,   // a scalar i32 or u32
  kAny,         // any value type
  kSameAs0,     // exactly the type of operand 0
  kSameAs1,     // exactly the type of operand 1
};

// The result type of an intrinsic.
enum class ResultRule : uint8_t {
  kOperand0,  // the type of operand 0
  kOperand1,  // the type of operand 1
  kI32,       // i32
};

// The one description of an intrinsic: its name, operands and result. The
// builder (CallNode::make), the verifier, the interpreter and the code
// generator all read it.
struct IntrinsicInfo {
  Intrinsic op;
  std::string_view name;
  int arity;
  OperandRule operands[3];
  ResultRule result;
  bool lanewise;  // operands and result have one lane count (not if_then_else's
                  // condition, not subgroup_shuffle's lane index)
};

const IntrinsicInfo& GetIntrinsicInfo(Intrinsic op);
// Whether `type` satisfies `rule` (kSameAs* compare against `operands`).
bool OperandFits(OperandRule rule, DataType type, std::span<const DataType> operands);
// What an operand under `rule` must be, for messages ("a float", ...).
std::string_view OperandRuleText(OperandRule rule);

// Name in the text form ("exp", "if_then_else", "subgroup_shuffle", ...).
std::string_view IntrinsicName(Intrinsic op);
std::optional<Intrinsic> IntrinsicFromName(std::string_view name);
// Number of operands the intrinsic takes.
int IntrinsicArity(Intrinsic op);
// True for the subgroup_* intrinsics (operations and builtins).
bool IsSubgroupIntrinsic(Intrinsic op);
// True for the subgroup builtins (subgroup_invocation_id, subgroup_size).
bool IsSubgroupBuiltin(Intrinsic op);

class CallNode : public ExprNode {
 public:
  static constexpr ExprKind kKind = ExprKind::kCall;
  CallNode() : ExprNode(kKind) {}

  Intrinsic op = Intrinsic::kExp;
  std::vector<Expr> args;

  // Result type as documented on Intrinsic; KILN_CHECKs the arity.
  static Expr make(Intrinsic op, std::vector<Expr> args);
};

// ---------------------------------------------------------------- helpers

// Constant of type `dtype` holding `value` (converted to the type; for
// vector types, a broadcast of the scalar constant). Bool: value != 0.
Expr MakeConst(DataType dtype, int64_t value);
Expr MakeConst(DataType dtype, double value);
Expr MakeZero(DataType dtype);
Expr MakeOne(DataType dtype);

// The value of an integer constant (IntImm, or a broadcast of one).
std::optional<int64_t> AsConstInt(const Expr& e);
// True if e is an integer constant equal to `value`.
bool IsConstInt(const Expr& e, int64_t value);
// The value of a float constant (FloatImm, or a broadcast of one).
std::optional<double> AsConstFloat(const Expr& e);

// The deepest nesting an expression may have: the compiler's passes recurse
// over expressions, and a deeper one (a chain of thousands of operators)
// would exhaust the stack. The verifier refuses deeper expressions, and the
// operator library refuses chains and fused expressions that would build one.
inline constexpr int kMaxExprDepth = 512;

// The number of nodes on the longest path from `e` to a leaf (a constant
// or a variable has depth 1), counting at most up to `cap` + 1: anything
// deeper reports cap + 1. Iterative, so any depth is safe to measure.
int ExprDepth(const Expr& e, int cap = kMaxExprDepth);

}  // namespace kiln::ir
