// Simplifier rewrites, shown as printed before/after pairs.
#include "kiln/ir/simplifier.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "kiln/ir/expr_ops.h"
#include "kiln/ir/linear.h"
#include "kiln/ir/mutator.h"
#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/verifier.h"

namespace kiln::ir {
namespace {

struct Rewrite {
  const char* before;
  const char* after;
};

// Free names the cases may use: x, y (i32), u (u32), f, g (f32), b, c (bool),
// A (f32 buffer); tx is an i32 known to lie in [0, 63], k in [0, 100], s in
// [-10, 10], r in [0, 3].
class SimplifierTest : public ::testing::Test {
 protected:
  std::string Run(const char* text) {
    StatusOr<Expr> e = ParseExpr(text, {x_, y_, u_, f_, g_, b_, c_, tx_, k_, s_, r_}, {a_});
    if (!e.ok()) return e.status().ToString();
    RangeMap ranges = {
        {tx_.get(), {0, 63}}, {k_.get(), {0, 100}}, {s_.get(), {-10, 10}}, {r_.get(), {0, 3}}};
    return Print(Simplify(*e, ranges));
  }

  void ExpectRewrites(const std::vector<Rewrite>& cases) {
    for (const Rewrite& c : cases) EXPECT_EQ(Run(c.before), c.after) << c.before;
  }

  Var x_{"x", kI32}, y_{"y", kI32}, u_{"u", kU32}, f_{"f", kF32}, g_{"g", kF32};
  Var b_{"b", kBool}, c_{"c", kBool}, tx_{"tx", kI32}, k_{"k", kI32}, s_{"s", kI32};
  Var r_{"r", kI32};
  Buffer a_{"A", kF32, {Expr(64)}};
};

TEST_F(SimplifierTest, FoldsIntegerConstantsWithWrapAndDivisionSemantics) {
  ExpectRewrites({
      {"3 + 4 * 5", "23"},
      {"2147483647 + 1", "-2147483648"},
      {"255u8 + 1u8", "0u8"},
      {"0u32 - 1u32", "4294967295u32"},
      {"7 / -2", "-3"},
      {"-7 / 2", "-3"},
      {"-7 % 2", "-1"},
      {"7 % -2", "1"},
      {"floor_div(-7, 2)", "-4"},
      {"floor_mod(-7, 2)", "1"},
      {"floor_mod(7, -2)", "-1"},
      {"-2147483648 / -1", "-2147483648"},
      {"-2147483648 % -1", "0"},
      {"4000000000u32 / 3u32", "1333333333u32"},
      {"min(3u32, 4000000000u32)", "3u32"},
      {"max(-1, 1)", "1"},
      {"-1 < 1", "true"},
      {"4294967295u32 < 1u32", "false"},
      {"x / 0", "x / 0"},  // left for run time (x / 0 == x, but kept visible)
      {"bitwise_and(12, 10)", "8"},
      {"bitwise_or(12u8, 3u8)", "15u8"},
      {"bitwise_xor(-1, 5)", "-6"},
      {"bitwise_not(0u16)", "65535u16"},
      {"shift_left(1, 33)", "2"},  // the amount is taken modulo 32
      {"shift_left(255u8, 4u8)", "240u8"},
      {"shift_right(-16, 2)", "-4"},
      {"shift_right(4294967280u32, 2u32)", "1073741820u32"},
      {"popcount(255)", "8"},
      {"abs(-5)", "5"},
      {"abs(-2147483648)", "-2147483648"},
      {"exp(0.0)", "exp(0.0)"},  // float math is the device's business
  });
}

TEST_F(SimplifierTest, FoldsFloatsAndCasts) {
  ExpectRewrites({
      {"1.5 * 2.0", "3.0"},
      {"0.1 + 0.2", "0.3"},  // f32 arithmetic: 0.1f + 0.2f rounds to 0.3f
      {"0.1f16 + 0.2f16", "0.2998f16"},
      {"1.0 / 0.0", "inf"},
      {"nan == nan", "false"},
      // An operation's NaN is nan on every compiling machine; a negation
      // flips the sign of its operand's.
      {"0.0 / 0.0", "nan"},
      {"inf - inf", "nan"},
      {"-nan * 2.0", "nan"},
      {"-(0.0 * inf)", "-nan"},
      {"-(-nan)", "nan"},
      // A let whose body does not read its var is its body.
      {"(let v: f32 = f * 2.0 in 0.0)", "0.0"},
      {"log((let v: f32 = f in 0.0))", "log(0.0)"},
      {"(let v: f32 = A[x] in v) - A[x]", "A[x] - A[x]"},
      {"i32(3.7)", "3"},
      {"i32(-3.7)", "-3"},
      {"u8(300)", "44u8"},
      {"i32(-inf)", "-2147483648"},
      // Too large clamps at the largest f32 below the limit, as at run time.
      {"i32(inf)", "2147483520"},
      {"i32(3.0e9)", "2147483520"},
      {"i32(inff16)", "2147483520"},
      {"u32(inf)", "4294967040u32"},
      {"u32(5.0e9)", "4294967040u32"},
      {"u8(1000.0)", "255u8"},
      {"i8(-1000.0)", "-128i8"},
      {"u32(-5.0)", "0u32"},
      {"i32(nan)", "0"},
      {"f32(3)", "3.0"},
      {"f16(65520.0)", "inff16"},
      {"bool(2)", "true"},
      {"i32(true)", "1"},
      {"f32(f)", "f"},
  });
}

TEST_F(SimplifierTest, AppliesIdentities) {
  ExpectRewrites({
      {"x + 0", "x"},         {"0 + x", "x"},          {"x * 1", "x"},        {"x * 0", "0"},
      {"x - x", "0"},         {"x / 1", "x"},          {"x % 1", "0"},        {"min(x, x)", "x"},
      {"x == x", "true"},     {"x < x", "false"},      {"f * 1.0", "f"},      {"f - 0.0", "f"},
      {"f + 0.0", "f + 0.0"},  // -0.0 + 0.0 is +0.0: not an identity
      {"f * 0.0", "f * 0.0"},  // NaN * 0 is NaN
      {"f - f", "f - f"},      // inf - inf is NaN
      {"f == f", "f == f"},    // NaN != NaN
      {"b && true", "b"},     {"b && false", "false"}, {"b || true", "true"}, {"b || false", "b"},
      {"!!b", "b"},           {"!(1 < 2)", "false"},
  });
}

// (x / c) * c + x % c is x for either rounding and any x (wrap-around
// cannot occur: |(x / c) * c| <= |x|); divisions by positive constants
// merge. Both are checked by value too, for x across the i32 range.
TEST_F(SimplifierTest, QuotientTimesDivisorPlusRemainderIsTheDividend) {
  const std::vector<Rewrite> cases = {
      {"x / 12 * 12 + x % 12", "x"},
      {"x % 12 + x / 12 * 12", "x"},
      {"floor_div(x, 5) * 5 + floor_mod(x, 5)", "x"},
      {"x / 2 / 12", "x / 24"},
      {"floor_div(floor_div(x, 2), 12)", "floor_div(x, 24)"},
      {"x / 2 / 12 * 12 + x / 2 % 12", "x / 2"},
      {"(x / 768 * 3 + x / 256 % 3) * 256 + x % 256", "x"},
      // Not the identity: another divisor, mixed roundings, another
      // dividend, a merged divisor past the type.
      {"x / 12 * 12 + x % 6", "x / 12 * 12 + x % 6"},
      {"x / 12 * 12 + floor_mod(x, 12)", "x / 12 * 12 + floor_mod(x, 12)"},
      {"x / 12 * 12 + y % 12", "x / 12 * 12 + y % 12"},
      {"x / 24 * 12 + x % 12", "x / 24 * 12 + x % 12"},
      {"x / 65536 / 65536", "x / 65536 / 65536"},
  };
  ExpectRewrites(cases);
  for (const Rewrite& c : cases) {
    if (std::string(c.before).find('y') != std::string::npos) continue;
    for (int64_t v :
         {int64_t{-2147483648}, int64_t{-2147483647}, int64_t{-100000},   int64_t{-769},
          int64_t{-768},        int64_t{-25},         int64_t{-24},       int64_t{-13},
          int64_t{-12},         int64_t{-1},          int64_t{0},         int64_t{1},
          int64_t{11},          int64_t{12},          int64_t{23},        int64_t{24},
          int64_t{767},         int64_t{768},         int64_t{123456789}, int64_t{2147483647}}) {
      auto at = [v](std::string text) {
        const std::string value = "(" + std::to_string(v) + ")";
        for (size_t i = text.find('x'); i != std::string::npos; i = text.find('x', i + 1)) {
          text.replace(i, 1, value);
        }
        return text;
      };
      EXPECT_EQ(Run(at(c.before).c_str()), Run(at(c.after).c_str())) << c.before << " at " << v;
    }
  }
}

TEST_F(SimplifierTest, ReassociatesIntegerConstants) {
  ExpectRewrites({
      {"(x + 3) + 4", "x + 7"},
      {"(x - 3) + 4", "x + 1"},
      {"(x + 3) - 5", "x - 2"},
      {"x + -3", "x - 3"},
      {"x - -3", "x + 3"},
      {"3 + x", "x + 3"},
      {"(x * 4) * 2", "x * 8"},
      {"2 * (x * 4)", "x * 8"},
      {"((x + 1) + 2) + 3", "x + 6"},
      {"(u + 1u32) - 2u32", "u - 1u32"},
      {"(x + 2147483647) + 1", "x + -2147483648"},  // -(-2^31) is not an i32
  });
}

TEST_F(SimplifierTest, DivisionRewritesOnlyWhenProvablySafe) {
  ExpectRewrites({
      // k in [0, 100], r in [0, 3]: no wrap-around, non-negative dividends.
      {"(k * 4) / 4", "k"},
      {"(k * 4 + 3) / 4", "k"},
      {"(k * 4 + r) / 4", "k"},
      {"(k * 4 + r) % 4", "r"},
      {"floor_div(k * 8 + r, 4)", "k * 2"},
      {"(r + k * 4) % 4", "r"},
      // tx in [0, 63].
      {"tx % 64", "tx"},
      {"tx / 64", "0"},
      {"floor_div(tx, 64)", "0"},
      {"tx < 64", "true"},
      {"tx >= 64", "false"},
      // s in [-10, 10]: truncation and flooring differ for negative dividends.
      {"(s * 4 + 1) / 4", "(s * 4 + 1) / 4"},
      {"floor_div(s * 4 + 1, 4)", "s"},
      {"floor_mod(s * 4 + 1, 4)", "1"},
      {"(s * 4) / 4", "s"},
      // x unbounded: x * 4 may wrap, so (x * 4) / 4 need not be x.
      {"(x * 4) / 4", "x * 4 / 4"},
      {"(x * 4 + 1) % 4", "(x * 4 + 1) % 4"},
      // ... but a multiple of a power of two stays one under wrap-around.
      {"(x * 8) % 4", "0"},
      {"floor_mod(x * 4, 4)", "0"},
      {"(x * 3) % 3", "x * 3 % 3"},
      // y may be negative or reach 4.
      {"(k * 4 + y) % 4", "(k * 4 + y) % 4"},
  });
}

TEST_F(SimplifierTest, SelectsAndVectors) {
  ExpectRewrites({
      {"select(true, x, y)", "x"},
      {"select(1 > 2, x, y)", "y"},
      {"select(b, x + 0, x)", "x"},
      {"select(b, 0.0, 0.0)", "0.0"},
      // 0.0 and -0.0 are different constants: no fold.
      {"select(b, -0.0, 0.0)", "select(b, -0.0, 0.0)"},
      {"if_then_else(false, A[x], 0.0)", "0.0"},
      {"if_then_else(2 > 1, A[x + 0], 0.0)", "A[x]"},
      {"if_then_else(b, A[x], A[x])", "A[x]"},
      {"ramp(x, 1, 4) + broadcast(2, 4)", "ramp(x + 2, 1, 4)"},
      {"ramp(x, 1, 4) * broadcast(4, 4)", "ramp(x * 4, 4, 4)"},
      {"ramp(x, 1, 4) + ramp(y, 2, 4)", "ramp(x + y, 3, 4)"},
      {"broadcast(2, 4) * broadcast(3, 4)", "broadcast(6, 4)"},
      {"broadcast(f, 2) * broadcast(1.0, 2)", "broadcast(f, 2)"},
      {"ramp(x, 1, 4) * broadcast(0, 4)", "ramp(0, 0, 4)"},
      {"(let t: i32 = 3 in t + x)", "x + 3"},
      {"(let t: i32 = x * y in t + t)", "(let t: i32 = x * y in t + t)"},
  });
}

TEST_F(SimplifierTest, RampsDivideWhereNoLaneCrossesAMultiple) {
  ExpectRewrites({
      // tx * 4 is a multiple of 4 in [0, 252]; 4 lanes stay within one
      // multiple of 16 (or 4).
      {"ramp(tx * 4, 1, 4) % broadcast(16, 4)", "ramp(tx * 4 % 16, 1, 4)"},
      {"ramp(tx * 4, 1, 4) / broadcast(16, 4)", "broadcast(tx * 4 / 16, 4)"},
      {"ramp(tx * 4, 1, 4) / broadcast(4, 4)", "broadcast(tx, 4)"},
      {"ramp(k * 8 + tx % 2 * 4, 1, 4) % broadcast(8, 4)", "ramp(tx % 2 * 4, 1, 4)"},
      {"floor_mod(ramp(s * 4, 1, 4), broadcast(12, 4))", "ramp(floor_mod(s * 4, 12), 1, 4)"},
      {"ramp(r * 8, 2, 4) / broadcast(8, 4)", "broadcast(r, 4)"},
      // Left alone: lanes that may cross a multiple (no alignment, stride
      // too large, a divisor the alignment does not divide), a dividend
      // that may be negative for truncating division, an unknown range.
      {"ramp(tx, 1, 4) % broadcast(16, 4)", "ramp(tx, 1, 4) % broadcast(16, 4)"},
      {"ramp(tx * 4, 2, 4) / broadcast(16, 4)", "ramp(tx * 4, 2, 4) / broadcast(16, 4)"},
      {"ramp(tx * 4, 1, 4) % broadcast(6, 4)", "ramp(tx * 4, 1, 4) % broadcast(6, 4)"},
      {"ramp(s * 4, 1, 4) % broadcast(8, 4)", "ramp(s * 4, 1, 4) % broadcast(8, 4)"},
      {"ramp(x * 4, 1, 4) / broadcast(8, 4)", "ramp(x * 4, 1, 4) / broadcast(8, 4)"},
  });
}

// Every lane of ramp(x * g + c0, s, n) / c and % c (all four roundings)
// before and after simplification, for every x in [-12, 12] with the range
// known: the rule may fire or not, but never changes a lane.
TEST(SimplifierRampTest, DivisionOfRampsKeepsEveryLane) {
  Var x("x", kI32);
  auto apply = [](BinaryOp op, int64_t a, int64_t c) -> int64_t {
    const int64_t q = a / c, r = a % c;  // truncating
    const bool adjust = r != 0 && ((r < 0) != (c < 0));
    switch (op) {
      case BinaryOp::kDiv:
        return q;
      case BinaryOp::kMod:
        return r;
      case BinaryOp::kFloorDiv:
        return adjust ? q - 1 : q;
      default:
        return adjust ? r + c : r;
    }
  };
  std::function<std::vector<int64_t>(const Expr&, int)> lanes_of;
  lanes_of = [&](const Expr& e, int n) -> std::vector<int64_t> {
    std::vector<int64_t> out;
    if (const auto* bin = e.as<BinaryNode>()) {
      // What the simplifier left: evaluated lane by lane.
      std::vector<int64_t> a = lanes_of(bin->a, n), c = lanes_of(bin->b, n);
      if (a.size() != static_cast<size_t>(n) || c.size() != static_cast<size_t>(n)) return {};
      for (int k = 0; k < n; ++k) out.push_back(apply(bin->op, a[k], c[k]));
    } else if (const auto* r = e.as<RampNode>()) {
      const auto b = AsConstInt(r->base), s = AsConstInt(r->stride);
      if (!b || !s) return {};
      for (int k = 0; k < n; ++k) out.push_back(*b + k * *s);
    } else if (const auto* bc = e.as<BroadcastNode>()) {
      const auto v = AsConstInt(bc->value);
      if (!v) return {};
      out.assign(n, *v);
    }
    return out;
  };
  int fired = 0;
  for (BinaryOp op : {BinaryOp::kDiv, BinaryOp::kMod, BinaryOp::kFloorDiv, BinaryOp::kFloorMod}) {
    for (int64_t g : {1, 2, 4, 8}) {
      for (int64_t c0 : {int64_t{0}, g, int64_t{3}}) {
        for (int64_t s : {0, 1, 2, 3}) {
          for (int n : {2, 3, 4}) {
            for (int64_t c = 1; c <= 17; ++c) {
              const Expr base = x * static_cast<int>(g) + static_cast<int>(c0);
              const Expr e = BinaryNode::make(op, Ramp(base, static_cast<int>(s), n),
                                              Broadcast(static_cast<int>(c), n));
              const Expr simplified = Simplify(e, {{x.get(), {-12, 12}}});
              fired += simplified.as<BinaryNode>() == nullptr;
              for (int64_t v = -12; v <= 12; ++v) {
                const Expr after = Simplify(Substitute(simplified, {{x.get(), Expr(int(v))}}));
                std::vector<int64_t> got = lanes_of(after, n);
                ASSERT_EQ(got.size(), static_cast<size_t>(n))
                    << Print(e) << " at x = " << v << ": " << Print(after);
                for (int k = 0; k < n; ++k) {
                  EXPECT_EQ(got[k], apply(op, v * g + c0 + k * s, c))
                      << Print(e) << " -> " << Print(simplified) << " at x = " << v << ", lane "
                      << k;
                }
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(fired, 0);  // the rule is exercised, not only the unsimplified forms
}

TEST(SimplifyStmtTest, RemovesDeadControlFlowAndUsesLoopRanges) {
  StatusOr<Function> f = ParseFunction(R"(fn f(A: buffer<f32>[64], n: i32) {
  if (true) {
    A[0] = 1.0
  } else {
    A[0] = 2.0
  }
  if (1 > 2) {
    A[1] = 1.0
  }
  for i in serial(0, 0) {
    A[i] = 0.0
  }
  for tx in threadIdx.x(0, 64) {
    let j: i32 = tx + 0
    if (j < 64) {
      A[j % 64] = A[(j * 4 + 2) / 4]
    }
    assert(tx >= 0, "never negative")
  }
  while (false) {
    A[2] = 3.0
  }
  for k in serial(0, n) {
    A[k % 64] = 0.0
  }
}
)");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(Print(Simplify(*f)),
            "fn f(A: buffer<f32>[64], n: i32) {\n"
            "  A[0] = 1.0\n"
            "  for tx in threadIdx.x(0, 64) {\n"
            "    A[tx] = A[tx]\n"
            "  }\n"
            "  for k in serial(0, n) {\n"
            "    A[k % 64] = 0.0\n"
            "  }\n"
            "}\n");
}

TEST(SimplifyStmtTest, LoopsOfOneValueBecomeTheirBody) {
  // The serial and unrolled loops go (j bound to n, a let then inlined);
  // the thread loop, which sizes the workgroup, stays.
  StatusOr<Function> f = ParseFunction(R"(fn f(A: buffer<f32>[64], n: i32) {
  for i in serial(0, 1) {
    A[i * 4 + 1] = 1.0
  }
  for j in unroll(n, 1) {
    A[j] = 2.0
  }
  for tx in threadIdx.x(0, 1) {
    A[tx] = 3.0
  }
  for k in serial(0, 1, 2) {
    A[k + 5] = 4.0
  }
})");
  ASSERT_TRUE(f.ok()) << f.status();
  const char* want = R"(fn f(A: buffer<f32>[64], n: i32) {
  A[1] = 1.0
  A[n] = 2.0
  for tx in threadIdx.x(0, 1) {
    A[tx] = 3.0
  }
  A[5] = 4.0
}
)";
  EXPECT_EQ(Print(Simplify(*f)), want);
}

TEST(SimplifyStmtTest, LeavesSimpleCodeAlone) {
  StatusOr<Function> f = ParseFunction(R"(fn f(A: buffer<f32>[n], n: i32) {
  for i in serial(0, n) {
    A[i] = A[i] * 2.0
  }
}
)");
  ASSERT_TRUE(f.ok());
  Function g = Simplify(*f);
  EXPECT_TRUE(g.same_as(*f));  // nothing to do: the very same function comes back
}

// Every kernel of the corpus still verifies after simplification, and its
// simplified form prints stably.
TEST(SimplifyStmtTest, CorpusStaysValid) {
  for (const auto& entry : std::filesystem::directory_iterator(KILN_IR_TESTDATA_DIR)) {
    if (entry.path().extension() != ".kir") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    StatusOr<Module> m = ParseModule(text.str());
    ASSERT_TRUE(m.ok()) << entry.path() << ": " << m.status();
    Module simplified;
    for (const Function& f : m->functions) simplified.functions.push_back(Simplify(f));
    EXPECT_TRUE(Verify(simplified).ok()) << entry.path() << ": " << Verify(simplified);
    StatusOr<Module> again = ParseModule(Print(simplified));
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(Print(*again), Print(simplified));
  }
}

// Linear sums: equal terms merge and cancel, a let's value is read where the
// caller expands it, and coefficients that leave i32 are refused.
TEST(LinearSumTest, MergesExpandsAndRefusesHugeCoefficients) {
  Var a("a", kI32), b("b", kI32), k("k", kI32);
  LinearSum sum;
  ASSERT_TRUE(AddLinear(a * 32 + b - (a * 32 + 7) + (a / 4) * 2, 1, sum));
  EXPECT_EQ(Print(sum.ToExpr(kI32)), "b - 7 + a / 4 * 2");
  // k = a * 16 + b, expanded: k - a * 16 is b.
  const Expr k_value = a * 16 + b;
  LinearSum expanded;
  ASSERT_TRUE(AddLinear(k - a * 16, 1, expanded,
                        [&](const VarNode* v) { return v == k.get() ? k_value : Expr(); }));
  EXPECT_EQ(Print(expanded.ToExpr(kI32)), "b");
  LinearSum huge;
  EXPECT_FALSE(AddLinear(a * 65536 * 65536, 1, huge));
}

}  // namespace
}  // namespace kiln::ir
