#include "kiln/ir/expr.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kiln/ir/expr_nodes.h"
#include "kiln/ir/expr_ops.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/structural_equal.h"

namespace kiln::ir {
namespace {

TEST(ExprTest, VarsAreIdentityObjects) {
  Var a("x", kI32), b("x", kI32);
  EXPECT_FALSE(a.same_as(b));
  EXPECT_TRUE(a.same_as(Var::FromExpr(a)));
  EXPECT_FALSE(StructurallyEqual(a + 1, b + 1));
  EXPECT_TRUE(StructurallyEqual(a + 1, a + 1));
  EXPECT_FALSE(StructurallyEqual(FloatConst(kF32, 0.0), FloatConst(kF32, -0.0)));
  EXPECT_TRUE(StructurallyEqual(FloatConst(kF32, NAN), FloatConst(kF32, NAN)));
  EXPECT_FALSE(StructurallyEqual(FloatConst(kF32, NAN), FloatConst(kF32, -NAN)));
}

TEST(ExprTest, ConstantsAreNormalized) {
  EXPECT_EQ(IntConst(kU8, 300).as<IntImmNode>()->value, 44);
  EXPECT_EQ(IntConst(kI8, 255).as<IntImmNode>()->value, -1);
  EXPECT_EQ(IntConst(kU64, -1).as<IntImmNode>()->uvalue(), ~uint64_t{0});
  EXPECT_EQ(FloatConst(kF32, 0.1).as<FloatImmNode>()->value, static_cast<double>(0.1f));
  EXPECT_EQ(Print(MakeConst(kF32.with_lanes(4), 2.0)), "broadcast(2.0, 4)");
  EXPECT_EQ(Print(MakeZero(kBool)), "false");
  EXPECT_EQ(AsConstInt(MakeConst(kI32.with_lanes(2), int64_t{7})), 7);
}

TEST(ExprTest, ResultTypes) {
  Var x("x", kI32);
  Var v("v", kF32.with_lanes(4));
  EXPECT_EQ((x < 3).dtype(), kBool);
  EXPECT_EQ((v < Broadcast(FloatConst(kF32, 0), 4)).dtype(), DataType::Bool(4));
  EXPECT_EQ(Ramp(x, 1, 4).dtype(), kI32.with_lanes(4));
  EXPECT_EQ(Call(Intrinsic::kDot4I8, {Reinterpret(kInt8x4, x), Reinterpret(kInt8x4, x)}).dtype(),
            kI32);
  EXPECT_EQ(IfThenElse(x < 0, v, v).dtype(), v.dtype());
  Buffer a("A", kF16, {Expr(64)});
  EXPECT_EQ(Load(a, {Ramp(x, 1, 2)}).dtype(), kF16.with_lanes(2));
}

TEST(ExprTest, OperatorsMakeConstantsOfTheOtherOperandsType) {
  Var u("u", kU32);
  Var h("h", kF16);
  EXPECT_EQ(Print(u + 1), "u + 1u32");
  EXPECT_EQ(Print(2.5 * h), "2.5f16 * h");
  // A float negation is -0.0 - h, an integer one 0 - i; both print as -x.
  EXPECT_EQ(Print(-h), "-h");
  EXPECT_TRUE(ir::IsNegation((-h).as<BinaryNode>()));
  EXPECT_EQ(Print(-(h + h) * h), "-(h + h) * h");
  EXPECT_EQ(Print(-Expr(Var("i", kI32))), "-i");
  EXPECT_EQ(Print(-(-Expr(Var("i", kI32)))), "--i");
  EXPECT_EQ(Print(Var("j", kI32) - -Expr(Var("i", kI32))), "j - -i");
  EXPECT_EQ(Print(IntConst(kI32, 0) - IntConst(kI32, 5)), "0 - 5");
  EXPECT_FALSE(ir::IsNegation((FloatConst(kF16, 0.0) - h).as<BinaryNode>()));
  EXPECT_EQ(Print(FloorDiv(u, Expr(IntConst(kU32, 4)))), "floor_div(u, 4u32)");
}

TEST(ExprTest, IntrinsicTable) {
  for (int i = 0; i <= static_cast<int>(Intrinsic::kSubgroupSize); ++i) {
    Intrinsic op = static_cast<Intrinsic>(i);
    EXPECT_EQ(IntrinsicFromName(IntrinsicName(op)), op);
    // Only the subgroup builtins take no operands.
    EXPECT_EQ(IntrinsicArity(op) == 0, IsSubgroupBuiltin(op)) << IntrinsicName(op);
    // Operand rules refer only to earlier operands; a call built from
    // operands that satisfy them has the table's result type.
    const IntrinsicInfo& info = GetIntrinsicInfo(op);
    ASSERT_LE(info.arity, 3);
    std::vector<Expr> args;
    std::vector<DataType> types;
    for (int k = 0; k < info.arity; ++k) {
      const OperandRule rule = info.operands[k];
      ASSERT_FALSE(rule == OperandRule::kSameAs0 && k == 0) << IntrinsicName(op);
      ASSERT_FALSE(rule == OperandRule::kSameAs1 && k <= 1) << IntrinsicName(op);
      Expr arg =
          rule == OperandRule::kFloat || rule == OperandRule::kNumber || rule == OperandRule::kAny
              ? Expr(FloatConst(kF32, 1.0))
          : rule == OperandRule::kInteger || rule == OperandRule::kLaneIndex
              ? Expr(IntConst(kI32, 1))
          : rule == OperandRule::kInt8x4     ? Expr(Reinterpret(kInt8x4, Expr(IntConst(kI32, 1))))
          : rule == OperandRule::kScalarBool ? Expr(BoolConst(true))
                                             : args[rule == OperandRule::kSameAs0 ? 0 : 1];
      types.push_back(arg.dtype());
      EXPECT_TRUE(OperandFits(rule, arg.dtype(), types)) << IntrinsicName(op) << " operand " << k;
      args.push_back(arg);
    }
    Expr call = Call(op, args);
    if (info.arity == 0) {
      EXPECT_EQ(call.dtype(), kI32) << IntrinsicName(op);
      continue;
    }
    const DataType expected = info.result == ResultRule::kI32        ? kI32
                              : info.result == ResultRule::kOperand1 ? types[1]
                                                                     : types[0];
    EXPECT_EQ(call.dtype(), expected) << IntrinsicName(op);
    // An operand of another kind is refused by the rules.
    EXPECT_FALSE(OperandFits(OperandRule::kFloat, kI32, types));
    EXPECT_FALSE(OperandFits(OperandRule::kInteger, kF32, types));
  }
  EXPECT_EQ(IntrinsicFromName("exp"), Intrinsic::kExp);
  EXPECT_FALSE(IntrinsicFromName("expm1").has_value());
  EXPECT_TRUE(IsSubgroupIntrinsic(Intrinsic::kSubgroupShuffle));
  EXPECT_FALSE(IsSubgroupIntrinsic(Intrinsic::kDot4I8));
  EXPECT_TRUE(IsSubgroupIntrinsic(Intrinsic::kSubgroupSize));
  EXPECT_TRUE(IsSubgroupBuiltin(Intrinsic::kSubgroupInvocationId));
  EXPECT_FALSE(IsSubgroupBuiltin(Intrinsic::kSubgroupAdd));
  EXPECT_EQ(Print(Call(Intrinsic::kSubgroupInvocationId, {}) + 1), "subgroup_invocation_id() + 1");
}

TEST(ExprTest, PrinterParenthesizesByPrecedence) {
  Var a("a", kI32), b("b", kI32), c("c", kI32);
  EXPECT_EQ(Print((a + b) * c), "(a + b) * c");
  EXPECT_EQ(Print(a + b * c), "a + b * c");
  EXPECT_EQ(Print(a - (b - c)), "a - (b - c)");
  EXPECT_EQ(Print((a - b) - c), "a - b - c");
  EXPECT_EQ(Print(!(a < b) || (b == c && a != c)), "!(a < b) || b == c && a != c");
  EXPECT_EQ(Print(a * IntConst(kI32, -3)), "a * -3");
  EXPECT_EQ(Print(Let(Var("t", kI32), a + 1, a * 2)), "(let t: i32 = a + 1 in a * 2)");
}

TEST(ExprTest, PrinterRenamesCollidingVars) {
  Var a("x", kI32), b("x", kI32), c("x_1", kI32), d("for", kI32), e("2d", kI32);
  EXPECT_EQ(Print(a + b + c + d + e), "x + x_1 + x_1_1 + for_ + v_2d");
}

}  // namespace
}  // namespace kiln::ir
