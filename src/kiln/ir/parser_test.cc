// Text form: the corpus round-trips exactly, and every parse error says
// where it is and what was expected.
#include "kiln/ir/parser.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kiln/ir/expr_ops.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/stmt.h"
#include "kiln/ir/verifier.h"

namespace kiln::ir {
namespace {

std::vector<std::string> CorpusFiles() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(KILN_IR_TESTDATA_DIR)) {
    if (entry.path().extension() == ".kir") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The file without its leading `//` comment lines: the printer's output.
std::string WithoutComments(const std::string& text) {
  std::istringstream in(text);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("//", 0) != 0) out += line + "\n";
  }
  return out;
}

class CorpusTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CorpusTest, PrintsExactlyAsWrittenAndVerifies) {
  std::string text = ReadFile(std::string(KILN_IR_TESTDATA_DIR) + "/" + GetParam() + ".kir");
  StatusOr<Module> module = ParseModule(text);
  ASSERT_TRUE(module.ok()) << module.status();
  std::string printed = Print(*module);
  EXPECT_EQ(printed, WithoutComments(text));
  StatusOr<Module> again = ParseModule(printed);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(Print(*again), printed);
  EXPECT_TRUE(Verify(*module).ok()) << Verify(*module);
  // Each function also round-trips on its own.
  for (const Function& f : module->functions) {
    StatusOr<Function> alone = ParseFunction(Print(f));
    ASSERT_TRUE(alone.ok()) << alone.status();
    EXPECT_EQ(Print(*alone), Print(f));
  }
}

INSTANTIATE_TEST_SUITE_P(Kir, CorpusTest, ::testing::ValuesIn(CorpusFiles()),
                         [](const auto& info) { return info.param; });

TEST(CorpusTest, HasTheIntendedSize) {
  EXPECT_GE(CorpusFiles().size(), 15u);
}

TEST(ParserTest, AcceptsHandWrittenShorthands) {
  // Untyped lets take their value's type; comments are skipped; sibling
  // loops may reuse a name (the printer then renames one).
  StatusOr<Function> f = ParseFunction(R"(
    fn f(A: buffer<f32>[4]) {  // a comment
      for i in serial(0, 2) { let x = A[i] * 2.0  A[i] = x }
      for i in serial(2, 2) { A[i] = -A[i] }
    })");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(Print(*f),
            "fn f(A: buffer<f32>[4]) {\n"
            "  for i in serial(0, 2) {\n"
            "    let x: f32 = A[i] * 2.0\n"
            "    A[i] = x\n"
            "  }\n"
            "  for i_1 in serial(2, 2) {\n"
            "    A[i_1] = -A[i_1]\n"
            "  }\n"
            "}\n");
}

TEST(ParserTest, ParsesExpressionsWithFreeNames) {
  Var x("x", kI32);
  Buffer a("A", kF32, {Expr(16)});
  StatusOr<Expr> e = ParseExpr("A[x + 1] * -2.5 + f32(x % 3)", {x}, {a});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(Print(*e), "A[x + 1] * -2.5 + f32(x % 3)");
}

TEST(ParserTest, ParsesStatementListsWithFreeNames) {
  Var n("n", kI32);
  Buffer a("A", kF32, {n});
  StatusOr<Stmt> s =
      ParseStmt("for i in serial(0, n) { A[i] = 0.0 }\nworkgroup_barrier()", {n}, {a});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Print(*s), "for i in serial(0, n) {\n  A[i] = 0.0\n}\nworkgroup_barrier()\n");
  EXPECT_FALSE(ParseStmt("B[0] = 1.0", {n}, {a}).ok());
}

TEST(ParserTest, LiteralsRoundTrip) {
  for (const char* text : {"-2147483648",
                           "2147483647",
                           "18446744073709551615u64",
                           "-9223372036854775808i64",
                           "255u8",
                           "-128i8",
                           "0.1",
                           "0.1f16",
                           "65504.0f16",
                           "1e+300f64",
                           "-0.0",
                           "inf",
                           "-inff16",
                           "nan",
                           "-nan",
                           "-nanf16",
                           "1.5e-07",
                           "true",
                           "false",
                           "3.0f16"}) {
    StatusOr<Expr> e = ParseExpr(text);
    ASSERT_TRUE(e.ok()) << text << ": " << e.status();
    EXPECT_EQ(Print(*e), text);
  }
  EXPECT_EQ(Print(*ParseExpr("1.0e2")), "100.0");
  // Rounded once to the literal's type (the nearest double, 1 + 2^-23 +
  // 2^-24, is halfway in f32 and would round up).
  EXPECT_EQ(Print(*ParseExpr("1.0000001788139343261718749")), "1.0000001");
  EXPECT_EQ(Print(*ParseExpr("1.00146484374999999999f16")), "1.001f16");
  EXPECT_EQ(Print(*ParseExpr("340282356779733661637539395458142568447.0")), "3.4028235e+38");
  EXPECT_EQ(Print(*ParseExpr("3f64")), "3.0f64");
  // White space may separate the sign from its literal (ir.md).
  EXPECT_EQ(Print(*ParseExpr("- 2147483648")), "-2147483648");
  EXPECT_EQ(Print(*ParseExpr("-\n  0.5f16")), "-0.5f16");
  EXPECT_FALSE(ParseExpr("- 2147483649").ok());
  EXPECT_FALSE(ParseExpr("-(2147483648)").ok());
}

// Trees the parser never produces (nested sequences, a let in the middle of
// a sequence, an else block wrapping an if, colliding and unusable names)
// still print to text that reads back to the same text.
TEST(RoundTripTest, PrintIsStableForBuiltTrees) {
  Var x("x", kI32), x2("x", kI32), weird("my var", kI32), kw("select", kI32);
  Buffer a("A", kI32, {Expr(8)});
  Stmt store_x = StoreNode::make(a, {0}, x);
  Stmt let_in_middle = LetStmtNode::make(x, 1, store_x);
  Stmt nested_if = IfNode::make(x2 < 3, StoreNode::make(a, {1}, x2), NoOp());
  Stmt wrapped_else = IfNode::make(x2 > 0, NoOp(), SeqNode::make({SeqNode::make({nested_if})}));
  Stmt body = SeqNode::make({
      SeqNode::make({let_in_middle}),
      LetStmtNode::make(x2, 2, MakeSeq({wrapped_else, StoreNode::make(a, {2}, x2)})),
      LetStmtNode::make(weird, 3, LetStmtNode::make(kw, weird, StoreNode::make(a, {3}, kw))),
      ForNode::make(Var("i", kI64), IntConst(kI64, 0), IntConst(kI64, 2), LoopKind::kSerial, NoOp(),
                    IntConst(kI64, 1)),
  });
  Function f("f", {Param::FromBuffer(a)}, body, {{"weird key \"\n", int64_t{-3}}});
  std::string printed = Print(f);
  EXPECT_EQ(printed,
            "fn f(A: buffer<i32>[8]) attributes {\"weird key \\\"\\n\": -3} {\n"
            "  let x: i32 = 1\n"
            "  A[0] = x\n"
            "  let x_1: i32 = 2\n"
            "  if (x_1 > 0) {\n"
            "  } else if (x_1 < 3) {\n"
            "    A[1] = x_1\n"
            "  } else {\n"
            "  }\n"
            "  A[2] = x_1\n"
            "  let my_var: i32 = 3\n"
            "  let select_: i32 = my_var\n"
            "  A[3] = select_\n"
            "  for i in serial(0i64, 2i64) {\n"
            "  }\n"
            "}\n");
  EXPECT_TRUE(Verify(f).ok()) << Verify(f);
  StatusOr<Function> parsed = ParseFunction(printed);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(Print(*parsed), printed);
}

struct ParseErrorCase {
  const char* name;
  const char* text;
  const char* message;
};

class ParseErrorTest : public ::testing::TestWithParam<ParseErrorCase> {};

TEST_P(ParseErrorTest, SaysWhereAndWhat) {
  StatusOr<Module> m = ParseModule(GetParam().text);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kCompileError);
  EXPECT_EQ(m.status().message(), GetParam().message);
  // The same with a source map (what `kiln compile` uses).
  SourceMap source;
  StatusOr<Module> mapped = ParseModule(GetParam().text, &source);
  ASSERT_FALSE(mapped.ok());
  EXPECT_EQ(mapped.status().message(), GetParam().message);
}

const ParseErrorCase kParseErrors[] = {
    {"UnexpectedCharacter", "module {\n  # }", "line 2, column 3: unexpected character '#'"},
    {"NonAsciiCharacter", "module {\nfn f(\xc3\x84: buffer<f32>[4]) {\n}\n}",
     "line 2, column 6: unexpected character '\xc3\x84' (U+00C4); names and the IR's syntax are "
     "ASCII"},
    {"ByteOrderMark", "\xef\xbb\xbfmodule {\n}",
     "line 1, column 1: unexpected byte order mark (U+FEFF); the IR's text starts without one"},
    {"UnterminatedString", "module {\nfn f() { assert(true, \"oops\n) } }",
     "line 2, column 23: unterminated string"},
    {"UnknownEscape", "module { fn f() { assert(true, \"a\\q\") } }",
     "line 1, column 34: unknown escape in string"},
    // Tokens are lexed as the parser needs them, yet a lexical error anywhere
    // is the error reported, as though the text were lexed first.
    {"LexicalErrorAfterAParseError", "module { fun f() {} }\nfn g() {}\n  # }",
     "line 3, column 3: unexpected character '#'"},
    {"LexicalErrorAfterTheModule", "module { fn f() {} } #",
     "line 1, column 22: unexpected character '#'"},
    {"LexicalErrorInAStatement",
     "module {\nfn f(A: buffer<f32>[n], n: i32) {\n  let x: i32 = 1 @ 2\n}\n}\n",
     "line 3, column 18: unexpected character '@'"},
    {"LexicalErrorInALaterFunction", "module {\nfn f() {\n}\nfn g() {\n  @\n}\n}",
     "line 5, column 3: unexpected character '@'"},
    {"MissingModule", "fn f() {}", "line 1, column 1: expected 'module', found 'fn'"},
    {"MissingFn", "module { fun f() {} }", "line 1, column 10: expected 'fn' or '}', found 'fun'"},
    {"MissingBrace", "module {\nfn f() {\n", "line 3, column 1: expected '}', found end of input"},
    {"TrailingInput", "module { } extra",
     "line 1, column 12: expected end of input, found 'extra'"},
    {"BadParamName", "module { fn f({) {} }",
     "line 1, column 15: expected a parameter name, found '{'"},
    {"ReservedName", "module { fn f(for: i32) {} }",
     "line 1, column 15: expected a parameter name, found reserved word 'for'"},
    {"UnknownType", "module { fn f(x: f33) {} }",
     "line 1, column 18: expected a type, found 'f33'"},
    {"VectorElementType", "module { fn f(A: buffer<f32x4>[4]) {} }",
     "line 1, column 25: expected a scalar element type, found 'f32x4'"},
    {"StrideCount", "module { fn f(A: buffer<f32>[4, 4] strides [1]) {} }",
     "line 1, column 44: expected 2 strides, found 1"},
    {"DuplicateParam", "module { fn f(n: i32, n: u32) {} }",
     "line 1, column 23: 'n' is already defined"},
    {"DuplicateAttribute", "module { fn f() attributes {\"a\": 1, \"a\": 2} {} }",
     "line 1, column 37: attribute \"a\" is given twice"},
    {"UndefinedName", "module {\nfn f(A: buffer<f32>[4]) {\n  A[0] = y\n}\n}",
     "line 3, column 10: undefined name 'y'"},
    {"Redefinition", "module { fn f(n: i32) { for n in serial(0, 4) { } } }",
     "line 1, column 29: 'n' is already defined"},
    {"NotAStatement", "module { fn f(n: i32) { n + 1 } }",
     "line 1, column 25: expected a statement, found 'n'"},
    {"VarUsedAsBuffer", "module { fn f(n: i32) { n[0] = 1 } }",
     "line 1, column 25: expected a buffer, found variable 'n'"},
    {"BufferUsedAsValue", "module { fn f(A: buffer<f32>[4]) { A[0] = A + 1.0 } }",
     "line 1, column 45: expected '[', found '+'"},
    {"BadSuffix", "module { fn f(A: buffer<f32>[4]) { A[0] = 3q7 } }",
     "line 1, column 43: expected a numeric type suffix, found 'q7'"},
    {"FloatWithIntSuffix", "module { fn f(A: buffer<f32>[4]) { A[0] = 1.5i32 } }",
     "line 1, column 43: expected a numeric type suffix, found 'i32'"},
    {"LiteralOutOfRange", "module { fn f(A: buffer<u8>[4]) { A[0] = 256u8 } }",
     "line 1, column 42: integer literal 256 is out of range for u8"},
    {"NegativeUnsigned", "module { fn f(A: buffer<u32>[4]) { A[0] = -1u32 } }",
     "line 1, column 43: integer literal -1 is out of range for u32"},
    {"FloatLiteralOutOfRange", "module { fn f(A: buffer<f32>[4]) { A[0] = 1e39 } }",
     "line 1, column 43: float literal 1e39 is out of range for f32 (it rounds to infinity; "
     "write inf for infinity)"},
    {"NegativeFloatLiteralOutOfRange", "module { fn f(A: buffer<f32>[4]) { A[0] = -3.5e38 } }",
     "line 1, column 43: float literal -3.5e38 is out of range for f32 (it rounds to infinity; "
     "write inf for infinity)"},
    {"HalfLiteralOutOfRange", "module { fn f(A: buffer<f16>[4]) { A[0] = 65520.0f16 } }",
     "line 1, column 43: float literal 65520.0 is out of range for f16 (it rounds to infinity; "
     "write inf for infinity)"},
    {"DoubleLiteralOutOfRange", "module { fn f(A: buffer<f32>[4]) { A[0] = f32(1e400f64) } }",
     "line 1, column 47: float literal 1e400 is out of range for f64 (it rounds to infinity; write "
     "inf for infinity)"},
    {"WrongArity", "module { fn f(A: buffer<f32>[4]) { A[0] = exp(1.0, 2.0) } }",
     "line 1, column 55: expected 1 operand for exp, found 2"},
    {"BuiltinWithAnOperand", "module { fn f(A: buffer<i32>[4]) { A[0] = subgroup_size(1) } }",
     "line 1, column 58: expected 0 operands for subgroup_size, found 1"},
    {"BadLaneCount", "module { fn f(A: buffer<f32>[4]) { A[0] = broadcast(1.0, 5) } }",
     "line 1, column 58: expected a lane count (2, 3 or 4), found '5'"},
    {"InvalidVectorType",
     "module { fn f(A: buffer<i32>[4]) { A[0] = broadcast(reinterpret<int8x4>(1), 2) } }",
     "line 1, column 77: expected a scalar number or bool to make a 2-lane vector of, found type "
     "int8x4"},
    {"NegateBool", "module { fn f(A: buffer<bool>[4]) { A[0] = -true } }",
     "line 1, column 44: expected a numeric operand of '-', found type bool"},
    {"BadLoopKind", "module { fn f() { for i in parallel(0, 4) { } } }",
     "line 1, column 28: expected a loop kind (serial, unroll, vectorize, threadIdx.x/y/z, "
     "blockIdx.x/y/z), found 'parallel'"},
    {"BadScope", "module { fn f() { alloc t: f32[4] private { } } }",
     "line 1, column 35: expected a memory scope (global, shared, local), found 'private'"},
    {"MissingIn", "module { fn f() { for i serial(0, 4) { } } }",
     "line 1, column 25: expected 'in', found 'serial'"},
    {"TooDeep",
     "module { fn f(A: buffer<i32>[1]) { A[0] = "
     "(((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((("
     "((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((( 1"
     " } }",
     "line 1, column 170: nesting is too deep"},
};

INSTANTIATE_TEST_SUITE_P(Errors, ParseErrorTest, ::testing::ValuesIn(kParseErrors),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace kiln::ir

namespace kiln::ir {
namespace {

// A let holds the rest of its block, so a chain of lets is as deep as it is
// long for every recursive pass: chains beyond the bound are a clear error,
// not a stack overflow later; chains within it parse and verify.
std::string LetChain(int n) {
  std::string text = "module {\nfn chain(A: buffer<f32>[1]) {\n  let v0: f32 = A[0]\n";
  for (int k = 1; k < n; ++k) text += StrCat("  let v", k, ": f32 = v", k - 1, " + 1.0\n");
  return text + StrCat("  A[0] = v", n - 1, "\n}\n}\n");
}

TEST(ParserTest, LetChainsAreBounded) {
  auto ok = ParseModule(LetChain(500));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(Verify(*ok).ok());
  auto deep = ParseModule(LetChain(20000));
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.status().message().find("more than 512 nested lets"), std::string::npos)
      << deep.status();
  EXPECT_NE(deep.status().message().find("line 515"), std::string::npos) << deep.status();
}

}  // namespace
}  // namespace kiln::ir
