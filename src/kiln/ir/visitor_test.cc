// Visitor and mutator traversal, identity preservation and Substitute.
#include "kiln/ir/visitor.h"

#include <gtest/gtest.h>

#include "kiln/ir/mutator.h"
#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"

namespace kiln::ir {
namespace {

// Counts nodes by kind, and the buffers seen.
class Counter : public StmtVisitor {
 public:
  void VisitVar(const VarNode* op) override { ++vars; }
  void VisitLoad(const LoadNode* op) override {
    ++loads;
    StmtVisitor::VisitLoad(op);
  }
  void VisitFor(const ForNode* op) override {
    ++loops;
    StmtVisitor::VisitFor(op);
  }
  void VisitBuffer(const Buffer& b) override { ++buffer_refs; }
  int vars = 0, loads = 0, loops = 0, buffer_refs = 0;
};

const char* kKernel = R"(fn f(A: buffer<f32>[n], B: buffer<f32>[n], n: i32) {
  for i in serial(0, n) {
    let t: f32 = A[i] * 2.0
    alloc tmp: f32[4] local {
      tmp[0] = t
      B[i] = tmp[0] + (let u: f32 = A[i] in u)
    }
  }
}
)";

TEST(VisitorTest, VisitsUsesInEvaluationOrder) {
  StatusOr<Function> f = ParseFunction(kKernel);
  ASSERT_TRUE(f.ok()) << f.status();
  Counter c;
  c.VisitStmt(f->body());
  // Uses of vars: n (extent), i (A[i]), t, i (B[i]), u, i (A[i]); shapes of
  // params are not visited; the literal 4 of tmp's shape has no var.
  EXPECT_EQ(c.vars, 6);
  EXPECT_EQ(c.loads, 3);
  EXPECT_EQ(c.loops, 1);
  EXPECT_EQ(c.buffer_refs, 6);  // A, alloc tmp, tmp store, B store, tmp load, A load
}

// Doubles every float constant.
class Doubler : public StmtMutator {
 public:
  Expr MutateFloatImm(const FloatImmNode* op, const Expr& e) override {
    return FloatImmNode::make(op->dtype, op->value * 2);
  }
};

TEST(MutatorTest, RebuildsOnlyWhatChanged) {
  StatusOr<Function> f = ParseFunction(kKernel);
  ASSERT_TRUE(f.ok());
  Stmt doubled = Doubler().MutateStmt(f->body());
  EXPECT_NE(Print(doubled).find("A[i] * 4.0"), std::string::npos);
  // A mutator that changes nothing returns the very same tree.
  StmtMutator identity;
  EXPECT_TRUE(identity.MutateStmt(f->body()).same_as(f->body()));
  EXPECT_TRUE(identity.MutateStmt(doubled).same_as(doubled));
}

TEST(MutatorTest, Substitute) {
  Var x("x", kI32), y("y", kI32);
  StatusOr<Expr> e = ParseExpr("x * (x + y)", {x, y});
  ASSERT_TRUE(e.ok());
  Expr replaced = Substitute(*e, {{x.get(), Expr(3)}});
  EXPECT_EQ(Print(replaced), "3 * (3 + y)");
  EXPECT_TRUE(Substitute(*e, {}).same_as(*e));
}

}  // namespace
}  // namespace kiln::ir
