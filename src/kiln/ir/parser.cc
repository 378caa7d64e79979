#include "kiln/ir/parser.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <unordered_map>
#include <unordered_set>
#include <variant>

#include "kiln/ir/expr_nodes.h"
#include "kiln/ir/expr_ops.h"
#include "kiln/ir/lexer.h"
#include "kiln/ir/text_syntax.h"

namespace kiln::ir {
namespace {

// Deeper nesting is rejected, so that recursion over the parsed tree (here,
// in the printer, in visitors) cannot exhaust the stack.
constexpr int kMaxNesting = 256;
// A `let` statement holds the rest of its block as its body, so a chain of
// lets is as deep as it is long for every recursive pass after parsing
// (verifier, lowering, interpreter, code generator). Chains, counted across
// the blocks that enclose a statement, are bounded to keep those passes
// well inside the stack.
constexpr size_t kMaxOpenLets = 512;
// Binary operators in one statement or parameter; bounds the depth of
// left-leaning operator chains the same way.
constexpr int kMaxOperatorsPerExpr = 2000;

using Symbol = std::variant<Var, Buffer>;

class Parser {
 public:
  explicit Parser(std::string_view text) : stream_(text) { scopes_.emplace_back(); }

  void Declare(const std::string& name, Symbol symbol) { scopes_.back()[name] = std::move(symbol); }
  void RecordLocationsIn(SourceMap* map) { map_ = map; }

  StatusOr<Module> ParseModuleText() {
    Module module;
    KILN_RETURN_IF_ERROR(ExpectKeyword("module"));
    KILN_RETURN_IF_ERROR(Expect("{"));
    while (!IsPunct("}")) {
      DropConsumedTokens();
      if (!IsIdent("fn")) return ErrorExpected("'fn' or '}'");
      if (map_ != nullptr) map_->functions.push_back({Peek().line, Peek().column});
      KILN_ASSIGN_OR_RETURN(Function f, ParseFunctionDef());
      module.functions.push_back(std::move(f));
    }
    KILN_RETURN_IF_ERROR(Expect("}"));
    KILN_RETURN_IF_ERROR(ExpectEnd());
    return module;
  }

  StatusOr<Function> ParseFunctionText() {
    KILN_ASSIGN_OR_RETURN(Function f, ParseFunctionDef());
    KILN_RETURN_IF_ERROR(ExpectEnd());
    return f;
  }

  StatusOr<Stmt> ParseStmtText() {
    KILN_ASSIGN_OR_RETURN(Stmt s, ParseStmtList());
    KILN_RETURN_IF_ERROR(ExpectEnd());
    return s;
  }

  StatusOr<Expr> ParseExprText() {
    KILN_ASSIGN_OR_RETURN(Expr e, ParseExpr());
    KILN_RETURN_IF_ERROR(ExpectEnd());
    return e;
  }

 private:
  // ------------------------------------------------------------ tokens

  // Token `i` of the text (the kEnd token past the end), lexed when first
  // asked for. References stay valid until DropConsumedTokens.
  const Token& At(size_t i) const {
    while (window_start_ + window_.size() <= i &&
           (window_.empty() || window_.back().kind != TokenKind::kEnd)) {
      window_.push_back(stream_.Next());
    }
    return i - window_start_ < window_.size() ? window_[i - window_start_] : window_.back();
  }
  const Token& Peek(size_t ahead = 0) const { return At(pos_ + ahead); }
  const Token& Next() {
    const Token& t = At(pos_);
    if (t.kind != TokenKind::kEnd) ++pos_;
    return t;
  }
  // Forgets the tokens before the current one, so that a module's tokens
  // are held one function at a time.
  void DropConsumedTokens() {
    while (window_start_ < pos_ && !window_.empty()) {
      window_.pop_front();
      ++window_start_;
    }
  }

 public:
  // The lexical error of the text, if it has one: that error is reported
  // rather than any parse error or result, as though the whole text were
  // lexed first.
  Status LexicalError() {
    if (stream_.error().ok()) {
      DropConsumedTokens();
      while (At(pos_).kind != TokenKind::kEnd) {
        Next();
        DropConsumedTokens();
      }
    }
    return stream_.error();
  }

 private:
  bool IsPunct(std::string_view p, size_t ahead = 0) const {
    return Peek(ahead).kind == TokenKind::kPunct && Peek(ahead).text == p;
  }
  bool IsIdent(std::string_view word, size_t ahead = 0) const {
    return Peek(ahead).kind == TokenKind::kIdent && Peek(ahead).text == word;
  }

  Status ErrorAt(const Token& t, const std::string& what) const {
    return CompileError("line ", t.line, ", column ", t.column, ": ", what);
  }
  Status ErrorExpected(const std::string& what) const {
    return ErrorAt(Peek(), StrCat("expected ", what, ", found ", DescribeToken(Peek())));
  }

  Status Expect(std::string_view p) {
    if (!IsPunct(p)) return ErrorExpected(StrCat("'", p, "'"));
    Next();
    return Status::Ok();
  }
  Status ExpectKeyword(std::string_view word) {
    if (!IsIdent(word)) return ErrorExpected(StrCat("'", word, "'"));
    Next();
    return Status::Ok();
  }
  Status ExpectEnd() {
    if (Peek().kind != TokenKind::kEnd) return ErrorExpected("end of input");
    return Status::Ok();
  }

  // A name being declared: an identifier that is not reserved.
  StatusOr<std::string> ExpectNewName(const char* what) {
    const Token& t = Peek();
    if (t.kind != TokenKind::kIdent) return ErrorExpected(what);
    if (IsReservedWord(t.text)) {
      return ErrorAt(t, StrCat("expected ", what, ", found reserved word '", t.text, "'"));
    }
    return Next().text;
  }

  StatusOr<DataType> ParseType() {
    const Token& t = Peek();
    if (t.kind == TokenKind::kIdent) {
      StatusOr<DataType> dtype = DataType::FromString(t.text);
      if (dtype.ok()) {
        Next();
        return *dtype;
      }
    }
    return ErrorExpected("a type");
  }

  // ------------------------------------------------------------ scopes

  const Symbol* Lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto found = it->find(name);
      if (found != it->end()) return &found->second;
    }
    return nullptr;
  }

  // Names may not be redeclared while an earlier declaration is visible.
  Status CheckFresh(const Token& at, const std::string& name) const {
    if (Lookup(name) != nullptr) return ErrorAt(at, StrCat("'", name, "' is already defined"));
    return Status::Ok();
  }

  struct ScopeGuard {
    explicit ScopeGuard(Parser* p) : parser(p) { parser->scopes_.emplace_back(); }
    ~ScopeGuard() { parser->scopes_.pop_back(); }
    Parser* parser;
  };

  struct NestingGuard {
    explicit NestingGuard(Parser* p) : parser(p) { ++parser->nesting_; }
    ~NestingGuard() { --parser->nesting_; }
    Parser* parser;
  };
  Status CheckNesting() const {
    if (nesting_ > kMaxNesting) return ErrorAt(Peek(), "nesting is too deep");
    return Status::Ok();
  }

  // ------------------------------------------------------------ functions

  StatusOr<Function> ParseFunctionDef() {
    KILN_RETURN_IF_ERROR(ExpectKeyword("fn"));
    KILN_ASSIGN_OR_RETURN(std::string name, ExpectNewName("a function name"));
    KILN_RETURN_IF_ERROR(Expect("("));
    ScopeGuard scope(this);
    pending_params_.clear();
    declared_params_.clear();
    KILN_RETURN_IF_ERROR(DeclareScalarParams());
    std::vector<Param> params;
    while (!IsPunct(")")) {
      if (!params.empty()) KILN_RETURN_IF_ERROR(Expect(","));
      KILN_ASSIGN_OR_RETURN(Param p, ParseParam());
      params.push_back(std::move(p));
    }
    KILN_RETURN_IF_ERROR(Expect(")"));
    AttrMap attrs;
    if (IsIdent("attributes")) {
      Next();
      KILN_ASSIGN_OR_RETURN(attrs, ParseAttributes());
    }
    KILN_ASSIGN_OR_RETURN(Stmt body, ParseBlock());
    return Function(std::move(name), std::move(params), std::move(body), std::move(attrs));
  }

  // Buffer shapes may name scalar parameters declared later in the list
  // (`A: buffer<f32>[n], n: i32`), so scalar parameters are found first by
  // scanning ahead for `name : type` at the list's top level.
  Status DeclareScalarParams() {
    int depth = 0;
    for (size_t i = pos_; At(i).kind != TokenKind::kEnd; ++i) {
      const Token& t = At(i);
      if (t.kind == TokenKind::kPunct) {
        if (t.text == "(" || t.text == "[" || t.text == "{") ++depth;
        if (t.text == ")" || t.text == "]" || t.text == "}") {
          if (depth == 0) break;
          --depth;
        }
      }
      bool at_param_start =
          i == pos_ || (At(i - 1).kind == TokenKind::kPunct && At(i - 1).text == ",");
      if (depth != 0 || !at_param_start || t.kind != TokenKind::kIdent) continue;
      if (At(i + 1).kind == TokenKind::kEnd || At(i + 1).text != ":") continue;
      StatusOr<DataType> dtype = DataType::FromString(At(i + 2).text);
      if (!dtype.ok() || At(i + 2).kind != TokenKind::kIdent) continue;
      if (IsReservedWord(t.text) || scopes_.back().count(t.text) != 0) continue;  // reported later
      pending_params_[t.text] = Var(t.text, *dtype);
      Declare(t.text, pending_params_[t.text]);
    }
    return Status::Ok();
  }

  StatusOr<Param> ParseParam() {
    operators_ = 0;
    const Token& name_token = Peek();
    KILN_ASSIGN_OR_RETURN(std::string name, ExpectNewName("a parameter name"));
    if (declared_params_.count(name) != 0) {
      return ErrorAt(name_token, StrCat("'", name, "' is already defined"));
    }
    declared_params_.insert(name);
    KILN_RETURN_IF_ERROR(Expect(":"));
    if (IsIdent("buffer")) {
      Next();
      KILN_RETURN_IF_ERROR(Expect("<"));
      const Token& type_token = Peek();
      KILN_ASSIGN_OR_RETURN(DataType dtype, ParseType());
      KILN_RETURN_IF_ERROR(CheckElementType(type_token, dtype));
      KILN_RETURN_IF_ERROR(Expect(">"));
      std::vector<Expr> shape, strides;
      KILN_RETURN_IF_ERROR(ParseShape(&shape, &strides));
      if (scopes_.back().count(name) != 0) {
        return ErrorAt(name_token, StrCat("'", name, "' is already defined"));
      }
      Buffer buffer(name, dtype, std::move(shape), std::move(strides), MemoryScope::kGlobal);
      Declare(name, buffer);
      return Param::FromBuffer(buffer);
    }
    KILN_RETURN_IF_ERROR(ParseType().status());
    // Declared by DeclareScalarParams, unless the name was taken.
    auto it = pending_params_.find(name);
    if (it == pending_params_.end()) {
      return ErrorAt(name_token, StrCat("'", name, "' is already defined"));
    }
    return Param::FromVar(it->second);
  }

  Status CheckElementType(const Token& at, DataType dtype) const {
    if (dtype.is_vector() || dtype.is_handle()) {
      return ErrorAt(at, StrCat("expected a scalar element type, found '", dtype, "'"));
    }
    return Status::Ok();
  }

  // '[' exprs ']' ['strides' '[' exprs ']']
  Status ParseShape(std::vector<Expr>* shape, std::vector<Expr>* strides) {
    KILN_RETURN_IF_ERROR(Expect("["));
    KILN_ASSIGN_OR_RETURN(*shape, ParseExprList("]"));
    if (IsIdent("strides")) {
      Next();
      const Token& at = Peek();
      KILN_RETURN_IF_ERROR(Expect("["));
      KILN_ASSIGN_OR_RETURN(*strides, ParseExprList("]"));
      if (strides->size() != shape->size()) {
        return ErrorAt(at, StrCat("expected ", shape->size(), " strides, found ", strides->size()));
      }
    }
    return Status::Ok();
  }

  // One or more comma-separated expressions, then `close`.
  StatusOr<std::vector<Expr>> ParseExprList(std::string_view close) {
    std::vector<Expr> exprs;
    do {
      if (!exprs.empty()) Next();  // ','
      KILN_ASSIGN_OR_RETURN(Expr e, ParseExpr());
      exprs.push_back(std::move(e));
    } while (IsPunct(","));
    KILN_RETURN_IF_ERROR(Expect(close));
    return exprs;
  }

  StatusOr<AttrMap> ParseAttributes() {
    AttrMap attrs;
    KILN_RETURN_IF_ERROR(Expect("{"));
    while (!IsPunct("}")) {
      if (!attrs.empty()) KILN_RETURN_IF_ERROR(Expect(","));
      const Token& key = Peek();
      if (key.kind != TokenKind::kString) return ErrorExpected("an attribute name string");
      Next();
      if (attrs.count(key.text) != 0) {
        return ErrorAt(key, StrCat("attribute ", QuoteString(key.text), " is given twice"));
      }
      KILN_RETURN_IF_ERROR(Expect(":"));
      if (Peek().kind == TokenKind::kString) {
        attrs[key.text] = Next().text;
        continue;
      }
      bool negative = IsPunct("-");
      if (negative) Next();
      const Token& number = Peek();
      if (number.kind != TokenKind::kInt || !number.suffix.empty()) {
        return ErrorExpected("a string or integer attribute value");
      }
      KILN_ASSIGN_OR_RETURN(int64_t value, IntegerValue(number, number, negative, kI64));
      Next();
      attrs[key.text] = value;
    }
    KILN_RETURN_IF_ERROR(Expect("}"));
    return attrs;
  }

  // ------------------------------------------------------------ statements

  StatusOr<Stmt> ParseBlock() {
    NestingGuard nesting(this);
    KILN_RETURN_IF_ERROR(CheckNesting());
    KILN_RETURN_IF_ERROR(Expect("{"));
    ScopeGuard scope(this);
    KILN_ASSIGN_OR_RETURN(Stmt body, ParseStmtList());
    KILN_RETURN_IF_ERROR(Expect("}"));
    return body;
  }

  // Statements up to '}' or the end. A `let` takes the rest of the list as
  // its body; let chains are collected iteratively, not by recursion, so a
  // long block of lets cannot exhaust the stack.
  StatusOr<Stmt> ParseStmtList() {
    struct PendingLet {
      Var var;
      Expr value;
      std::vector<Stmt> before;  // statements of the block ahead of the let
      SourceLocation at;         // the `let` keyword
    };
    const SourceLocation list_at{Peek().line, Peek().column};
    std::vector<PendingLet> lets;
    std::vector<Stmt> stmts;
    size_t scope_depth = scopes_.size();
    struct ScopeRestore {
      ~ScopeRestore() {
        parser->scopes_.resize(depth);
        parser->open_lets_ -= lets->size();
      }
      Parser* parser;
      size_t depth;
      const std::vector<PendingLet>* lets;
    } restore{this, scope_depth, &lets};
    while (!IsPunct("}") && Peek().kind != TokenKind::kEnd) {
      operators_ = 0;
      const SourceLocation at{Peek().line, Peek().column};
      if (IsIdent("let")) {
        if (open_lets_ + 1 > kMaxOpenLets) {
          return ErrorAt(Peek(), StrCat("more than ", kMaxOpenLets,
                                        " nested lets (each let holds the rest of its block); "
                                        "split the block or reuse variables"));
        }
        Next();
        KILN_ASSIGN_OR_RETURN(Binding binding, ParseBinding());
        KILN_RETURN_IF_ERROR(Expect("="));
        KILN_ASSIGN_OR_RETURN(Expr value, ParseExpr());
        Var var(binding.name, binding.dtype.value_or(value.dtype()));
        lets.push_back({var, value, std::move(stmts), at});
        ++open_lets_;
        stmts.clear();
        scopes_.emplace_back();
        Declare(var.name(), var);
        continue;
      }
      KILN_ASSIGN_OR_RETURN(Stmt s, ParseStatement());
      Record(s, at);
      stmts.push_back(std::move(s));
    }
    Stmt body = MakeSeq(std::move(stmts));
    RecordBlock(body, list_at);
    for (size_t k = lets.size(); k-- > 0;) {
      Stmt let = LetStmtNode::make(lets[k].var, lets[k].value, body);
      Record(let, lets[k].at);
      lets[k].before.push_back(let);
      body = MakeSeq(std::move(lets[k].before));
      RecordBlock(body, list_at);
    }
    return body;
  }

  // Keeps the first location recorded for a node (a block that is a single
  // statement is that statement).
  void Record(const Stmt& s, SourceLocation at) {
    if (map_ != nullptr && s.defined()) map_->stmts.emplace(s.get(), at);
  }

  // A block is where its first statement is (`at` if it has none).
  void RecordBlock(const Stmt& block, SourceLocation at) {
    if (map_ == nullptr) return;
    if (const auto* seq = block.as<SeqNode>(); seq != nullptr && !seq->stmts.empty()) {
      if (auto it = map_->stmts.find(seq->stmts[0].get()); it != map_->stmts.end()) {
        at = it->second;
      }
    }
    Record(block, at);
  }

  // NAME [: TYPE] of a let; without a type the var takes its value's type.
  struct Binding {
    std::string name;
    std::optional<DataType> dtype;
  };
  StatusOr<Binding> ParseBinding() {
    const Token& at = Peek();
    KILN_ASSIGN_OR_RETURN(std::string name, ExpectNewName("a variable name"));
    KILN_RETURN_IF_ERROR(CheckFresh(at, name));
    Binding binding{std::move(name), std::nullopt};
    if (IsPunct(":")) {
      Next();
      KILN_ASSIGN_OR_RETURN(binding.dtype, ParseType());
    }
    return binding;
  }

  StatusOr<Stmt> ParseStatement() {
    const Token& t = Peek();
    if (t.kind != TokenKind::kIdent) return ErrorExpected("a statement");
    if (t.text == "for") return ParseFor();
    if (t.text == "while") {
      Next();
      KILN_ASSIGN_OR_RETURN(Expr cond, ParseParenExpr());
      KILN_ASSIGN_OR_RETURN(Stmt body, ParseBlock());
      return WhileNode::make(cond, body);
    }
    if (t.text == "if") return ParseIf();
    if (t.text == "alloc") return ParseAlloc();
    if (t.text == "workgroup_barrier" || t.text == "storage_barrier") {
      BarrierKind kind =
          t.text == "workgroup_barrier" ? BarrierKind::kWorkgroup : BarrierKind::kStorage;
      Next();
      KILN_RETURN_IF_ERROR(Expect("("));
      KILN_RETURN_IF_ERROR(Expect(")"));
      return BarrierNode::make(kind);
    }
    if (t.text == "assert") {
      Next();
      KILN_RETURN_IF_ERROR(Expect("("));
      KILN_ASSIGN_OR_RETURN(Expr cond, ParseExpr());
      KILN_RETURN_IF_ERROR(Expect(","));
      if (Peek().kind != TokenKind::kString) return ErrorExpected("a message string");
      std::string message = Next().text;
      KILN_RETURN_IF_ERROR(Expect(")"));
      return AssertNode::make(cond, std::move(message));
    }
    if (t.text == "evaluate") {
      Next();
      KILN_ASSIGN_OR_RETURN(Expr value, ParseParenExpr());
      return EvaluateNode::make(value);
    }
    if (IsPunct("[", 1)) return ParseStore();
    return ErrorExpected("a statement");
  }

  StatusOr<Expr> ParseParenExpr() {
    KILN_RETURN_IF_ERROR(Expect("("));
    KILN_ASSIGN_OR_RETURN(Expr e, ParseExpr());
    KILN_RETURN_IF_ERROR(Expect(")"));
    return e;
  }

  StatusOr<Stmt> ParseFor() {
    Next();  // for
    const Token& at = Peek();
    KILN_ASSIGN_OR_RETURN(std::string name, ExpectNewName("a loop variable name"));
    KILN_RETURN_IF_ERROR(CheckFresh(at, name));
    std::optional<DataType> dtype;
    if (IsPunct(":")) {
      Next();
      KILN_ASSIGN_OR_RETURN(dtype, ParseType());
    }
    KILN_RETURN_IF_ERROR(ExpectKeyword("in"));
    KILN_ASSIGN_OR_RETURN(LoopKind kind, ParseLoopKind());
    KILN_RETURN_IF_ERROR(Expect("("));
    KILN_ASSIGN_OR_RETURN(Expr min, ParseExpr());
    KILN_RETURN_IF_ERROR(Expect(","));
    KILN_ASSIGN_OR_RETURN(Expr extent, ParseExpr());
    Expr step;
    if (IsPunct(",")) {
      Next();
      KILN_ASSIGN_OR_RETURN(step, ParseExpr());
    }
    KILN_RETURN_IF_ERROR(Expect(")"));
    Var var(name, dtype.value_or(min.dtype()));
    ScopeGuard scope(this);
    Declare(name, var);
    KILN_ASSIGN_OR_RETURN(Stmt body, ParseBlock());
    return ForNode::make(var, min, extent, kind, body, step);
  }

  StatusOr<LoopKind> ParseLoopKind() {
    const Token& at = Peek();
    std::string name;
    if (at.kind == TokenKind::kIdent) {
      name = at.text;
      if ((name == "threadIdx" || name == "blockIdx") && IsPunct(".", 1) &&
          Peek(2).kind == TokenKind::kIdent) {
        name += "." + Peek(2).text;
      }
    }
    std::optional<LoopKind> kind = LoopKindFromName(name);
    if (!kind.has_value()) {
      return ErrorExpected(
          "a loop kind (serial, unroll, vectorize, threadIdx.x/y/z, blockIdx.x/y/z)");
    }
    Next();
    if (IsThreadBinding(*kind)) {
      Next();  // '.'
      Next();  // axis
    }
    return *kind;
  }

  StatusOr<Stmt> ParseIf() {
    Next();  // if
    KILN_ASSIGN_OR_RETURN(Expr cond, ParseParenExpr());
    KILN_ASSIGN_OR_RETURN(Stmt then_case, ParseBlock());
    Stmt else_case;
    if (IsIdent("else")) {
      Next();
      if (IsIdent("if")) {
        NestingGuard nesting(this);
        KILN_RETURN_IF_ERROR(CheckNesting());
        const SourceLocation at{Peek().line, Peek().column};
        KILN_ASSIGN_OR_RETURN(else_case, ParseIf());
        Record(else_case, at);  // an `else if` is where its `if` is
      } else {
        KILN_ASSIGN_OR_RETURN(else_case, ParseBlock());
      }
    }
    return IfNode::make(cond, then_case, else_case);
  }

  StatusOr<Stmt> ParseAlloc() {
    Next();  // alloc
    const Token& at = Peek();
    KILN_ASSIGN_OR_RETURN(std::string name, ExpectNewName("a buffer name"));
    KILN_RETURN_IF_ERROR(CheckFresh(at, name));
    KILN_RETURN_IF_ERROR(Expect(":"));
    const Token& type_token = Peek();
    KILN_ASSIGN_OR_RETURN(DataType dtype, ParseType());
    KILN_RETURN_IF_ERROR(CheckElementType(type_token, dtype));
    std::vector<Expr> shape, strides;
    KILN_RETURN_IF_ERROR(ParseShape(&shape, &strides));
    MemoryScope scope;
    if (IsIdent("global")) {
      scope = MemoryScope::kGlobal;
    } else if (IsIdent("shared")) {
      scope = MemoryScope::kShared;
    } else if (IsIdent("local")) {
      scope = MemoryScope::kLocal;
    } else {
      return ErrorExpected("a memory scope (global, shared, local)");
    }
    Next();
    Buffer buffer(name, dtype, std::move(shape), std::move(strides), scope);
    ScopeGuard guard(this);
    Declare(name, buffer);
    KILN_ASSIGN_OR_RETURN(Stmt body, ParseBlock());
    return AllocateNode::make(buffer, body);
  }

  StatusOr<Stmt> ParseStore() {
    KILN_ASSIGN_OR_RETURN(Buffer buffer, ExpectBuffer());
    Next();  // '['
    KILN_ASSIGN_OR_RETURN(std::vector<Expr> indices, ParseExprList("]"));
    KILN_RETURN_IF_ERROR(Expect("="));
    KILN_ASSIGN_OR_RETURN(Expr value, ParseExpr());
    return StoreNode::make(buffer, std::move(indices), value);
  }

  // The buffer named by the current identifier (not consumed past the name).
  StatusOr<Buffer> ExpectBuffer() {
    const Token& t = Peek();
    const Symbol* symbol = Lookup(t.text);
    if (symbol == nullptr) return ErrorAt(t, StrCat("undefined name '", t.text, "'"));
    if (!std::holds_alternative<Buffer>(*symbol)) {
      return ErrorAt(t, StrCat("expected a buffer, found variable '", t.text, "'"));
    }
    Next();
    return std::get<Buffer>(*symbol);
  }

  // ------------------------------------------------------------ expressions

  StatusOr<Expr> ParseExpr() {
    NestingGuard nesting(this);
    KILN_RETURN_IF_ERROR(CheckNesting());
    return ParseBinary(0);
  }

  // Binary operator levels, weakest first.
  static constexpr int kLevels = 6;
  static std::optional<BinaryOp> OperatorAt(int level, const Token& t) {
    if (t.kind != TokenKind::kPunct) return std::nullopt;
    const std::string& p = t.text;
    switch (level) {
      case 0:
        if (p == "||") return BinaryOp::kOr;
        break;
      case 1:
        if (p == "&&") return BinaryOp::kAnd;
        break;
      case 2:
        if (p == "==") return BinaryOp::kEq;
        if (p == "!=") return BinaryOp::kNe;
        break;
      case 3:
        if (p == "<") return BinaryOp::kLt;
        if (p == "<=") return BinaryOp::kLe;
        if (p == ">") return BinaryOp::kGt;
        if (p == ">=") return BinaryOp::kGe;
        break;
      case 4:
        if (p == "+") return BinaryOp::kAdd;
        if (p == "-") return BinaryOp::kSub;
        break;
      case 5:
        if (p == "*") return BinaryOp::kMul;
        if (p == "/") return BinaryOp::kDiv;
        if (p == "%") return BinaryOp::kMod;
        break;
    }
    return std::nullopt;
  }

  StatusOr<Expr> ParseBinary(int level) {
    if (level == kLevels) return ParseUnary();
    KILN_ASSIGN_OR_RETURN(Expr lhs, ParseBinary(level + 1));
    while (std::optional<BinaryOp> op = OperatorAt(level, Peek())) {
      if (++operators_ > kMaxOperatorsPerExpr) {
        return ErrorAt(Peek(), "expression has too many operators");
      }
      Next();
      KILN_ASSIGN_OR_RETURN(Expr rhs, ParseBinary(level + 1));
      lhs = BinaryNode::make(*op, lhs, rhs);
    }
    return lhs;
  }

  StatusOr<Expr> ParseUnary() {
    NestingGuard nesting(this);
    KILN_RETURN_IF_ERROR(CheckNesting());
    if (IsPunct("!")) {
      Next();
      KILN_ASSIGN_OR_RETURN(Expr a, ParseUnary());
      return NotNode::make(a);
    }
    if (IsPunct("-")) {
      const Token& minus = Next();
      const Token& t = Peek();
      if (t.kind == TokenKind::kInt || t.kind == TokenKind::kFloat ||
          (t.kind == TokenKind::kIdent && ParseFloatSpecial(t.text).has_value())) {
        return ParseLiteral(&minus);
      }
      KILN_ASSIGN_OR_RETURN(Expr a, ParseUnary());
      if (!a.dtype().is_numeric()) {
        return ErrorAt(minus, StrCat("expected a numeric operand of '-', found type ", a.dtype()));
      }
      return -a;
    }
    return ParsePrimary();
  }

  // The value of the digits of `t` (negated if `negative`) as `dtype`;
  // errors point at `at`.
  StatusOr<int64_t> IntegerValue(const Token& at, const Token& t, bool negative,
                                 DataType dtype) const {
    uint64_t magnitude = 0;
    auto [ptr, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), magnitude);
    std::string shown = StrCat(negative ? "-" : "", t.text);
    if (ec != std::errc() || ptr != t.text.data() + t.text.size()) {
      return ErrorAt(at, StrCat("integer literal ", shown, " is out of range for ", dtype));
    }
    // Largest magnitude for each sign: 2^(bits-1) - 1 / 2^(bits-1) signed,
    // 2^bits - 1 / 0 unsigned.
    uint64_t max_positive = dtype.is_int()     ? (uint64_t{1} << (dtype.bits - 1)) - 1
                            : dtype.bits == 64 ? ~uint64_t{0}
                                               : (uint64_t{1} << dtype.bits) - 1;
    uint64_t max_negative = dtype.is_int() ? uint64_t{1} << (dtype.bits - 1) : 0;
    if (magnitude > (negative ? max_negative : max_positive)) {
      return ErrorAt(at, StrCat("integer literal ", shown, " is out of range for ", dtype));
    }
    return negative ? static_cast<int64_t>(uint64_t{0} - magnitude)
                    : static_cast<int64_t>(magnitude);
  }

  // A literal; `minus` is the '-' before it, if any (errors point there).
  StatusOr<Expr> ParseLiteral(const Token* minus) {
    bool negative = minus != nullptr;
    const Token& t = Peek();
    if (t.kind == TokenKind::kIdent) {  // inf / nan
      auto special = ParseFloatSpecial(t.text);
      Next();
      return FloatImmNode::make(special->second, negative ? -special->first : special->first);
    }
    DataType dtype = t.kind == TokenKind::kInt ? kI32 : kF32;
    if (!t.suffix.empty()) {
      StatusOr<DataType> suffix = DataType::FromString(t.suffix);
      bool ok = suffix.ok() && suffix->is_scalar() &&
                (suffix->is_float() || (suffix->is_integer() && t.kind == TokenKind::kInt));
      if (!ok) {
        return ErrorAt(t, StrCat("expected a numeric type suffix, found '", t.suffix, "'"));
      }
      dtype = *suffix;
    }
    if (dtype.is_float()) {
      double value = DecimalToFloatType(dtype, t.text.c_str());
      // A finite literal that rounds to infinity in its type is a typo, as
      // an integer literal out of range is (`inf` says infinity).
      if (std::isinf(value)) {
        return ErrorAt(
            negative ? *minus : t,
            StrCat("float literal ", negative ? "-" : "", t.text, " is out of range for ", dtype,
                   " (it rounds to infinity; write inf for infinity)"));
      }
      Next();
      return FloatImmNode::make(dtype, negative ? -value : value);
    }
    KILN_ASSIGN_OR_RETURN(int64_t value, IntegerValue(negative ? *minus : t, t, negative, dtype));
    Next();
    return IntImmNode::make(dtype, value);
  }

  StatusOr<Expr> ParsePrimary() {
    const Token& t = Peek();
    if (t.kind == TokenKind::kInt || t.kind == TokenKind::kFloat) return ParseLiteral(nullptr);
    if (IsPunct("(")) {
      Next();
      Expr e;
      if (IsIdent("let")) {
        KILN_ASSIGN_OR_RETURN(e, ParseLetExpr());
      } else {
        KILN_ASSIGN_OR_RETURN(e, ParseExpr());
      }
      KILN_RETURN_IF_ERROR(Expect(")"));
      return e;
    }
    if (t.kind != TokenKind::kIdent) return ErrorExpected("an expression");
    const std::string& word = t.text;
    if (word == "true" || word == "false") {
      Next();
      return BoolImmNode::make(word == "true");
    }
    if (ParseFloatSpecial(word).has_value()) return ParseLiteral(nullptr);
    if (StatusOr<DataType> dtype = DataType::FromString(word); dtype.ok()) {
      Next();
      KILN_ASSIGN_OR_RETURN(std::vector<Expr> args, ParseArgs(word, 1));
      return CastNode::make(*dtype, args[0]);
    }
    if (word == "reinterpret") {
      Next();
      KILN_RETURN_IF_ERROR(Expect("<"));
      KILN_ASSIGN_OR_RETURN(DataType dtype, ParseType());
      KILN_RETURN_IF_ERROR(Expect(">"));
      KILN_ASSIGN_OR_RETURN(std::vector<Expr> args, ParseArgs(word, 1));
      return ReinterpretNode::make(dtype, args[0]);
    }
    if (word == "select") {
      Next();
      KILN_ASSIGN_OR_RETURN(std::vector<Expr> args, ParseArgs(word, 3));
      return SelectNode::make(args[0], args[1], args[2]);
    }
    if (word == "ramp" || word == "broadcast") return ParseVectorBuilder();
    if (std::optional<BinaryOp> op = NamedBinaryOp(word)) {
      Next();
      KILN_ASSIGN_OR_RETURN(std::vector<Expr> args, ParseArgs(word, 2));
      return BinaryNode::make(*op, args[0], args[1]);
    }
    if (std::optional<Intrinsic> op = IntrinsicFromName(word)) {
      Next();
      KILN_ASSIGN_OR_RETURN(std::vector<Expr> args, ParseArgs(word, IntrinsicArity(*op)));
      return CallNode::make(*op, std::move(args));
    }
    if (IsReservedWord(word)) return ErrorExpected("an expression");
    const Symbol* symbol = Lookup(word);
    if (symbol == nullptr) return ErrorAt(t, StrCat("undefined name '", word, "'"));
    if (const Var* var = std::get_if<Var>(symbol)) {
      if (IsPunct("[", 1)) {
        return ErrorAt(t, StrCat("expected a buffer, found variable '", word, "'"));
      }
      Next();
      return Expr(*var);
    }
    Buffer buffer = std::get<Buffer>(*symbol);
    Next();
    KILN_RETURN_IF_ERROR(Expect("["));
    KILN_ASSIGN_OR_RETURN(std::vector<Expr> indices, ParseExprList("]"));
    int lanes = 1;
    for (const Expr& index : indices) lanes = std::max<int>(lanes, index.dtype().lanes);
    KILN_RETURN_IF_ERROR(CheckVectorType(t, buffer.dtype(), lanes));
    return LoadNode::make(buffer, std::move(indices));
  }

  // Vectors exist of numeric and bool scalars only (not int8x4 or handle).
  Status CheckVectorType(const Token& at, DataType element, int lanes) const {
    if (lanes == 1 || element.element_of().with_lanes(lanes).IsValid()) return Status::Ok();
    return ErrorAt(at, StrCat("expected a scalar number or bool to make a ", lanes,
                              "-lane vector of, found type ", element));
  }

  static std::optional<BinaryOp> NamedBinaryOp(std::string_view word) {
    if (word == "min") return BinaryOp::kMin;
    if (word == "max") return BinaryOp::kMax;
    if (word == "floor_div") return BinaryOp::kFloorDiv;
    if (word == "floor_mod") return BinaryOp::kFloorMod;
    return std::nullopt;
  }

  // '(' args ')' with exactly `arity` expressions; `callee` names the call in errors.
  StatusOr<std::vector<Expr>> ParseArgs(const std::string& callee, int arity) {
    NestingGuard nesting(this);
    KILN_RETURN_IF_ERROR(CheckNesting());
    KILN_RETURN_IF_ERROR(Expect("("));
    std::vector<Expr> args;
    while (!IsPunct(")")) {
      if (!args.empty()) KILN_RETURN_IF_ERROR(Expect(","));
      KILN_ASSIGN_OR_RETURN(Expr e, ParseExpr());
      args.push_back(std::move(e));
    }
    if (static_cast<int>(args.size()) != arity) {
      return ErrorAt(Peek(), StrCat("expected ", arity, arity == 1 ? " operand" : " operands",
                                    " for ", callee, ", found ", args.size()));
    }
    Next();  // ')'
    return args;
  }

  // ramp(base, stride, LANES) / broadcast(value, LANES)
  StatusOr<Expr> ParseVectorBuilder() {
    bool ramp = Next().text == "ramp";
    NestingGuard nesting(this);
    KILN_RETURN_IF_ERROR(CheckNesting());
    KILN_RETURN_IF_ERROR(Expect("("));
    KILN_ASSIGN_OR_RETURN(Expr first, ParseExpr());
    Expr stride;
    if (ramp) {
      KILN_RETURN_IF_ERROR(Expect(","));
      KILN_ASSIGN_OR_RETURN(stride, ParseExpr());
    }
    KILN_RETURN_IF_ERROR(Expect(","));
    const Token& lanes = Peek();
    if (lanes.kind != TokenKind::kInt || !lanes.suffix.empty() ||
        (lanes.text != "2" && lanes.text != "3" && lanes.text != "4")) {
      return ErrorExpected("a lane count (2, 3 or 4)");
    }
    Next();
    KILN_RETURN_IF_ERROR(Expect(")"));
    int n = lanes.text[0] - '0';
    KILN_RETURN_IF_ERROR(CheckVectorType(lanes, first.dtype(), n));
    return ramp ? RampNode::make(first, stride, n) : BroadcastNode::make(first, n);
  }

  // let NAME [: TYPE] = EXPR in EXPR   (inside parentheses)
  StatusOr<Expr> ParseLetExpr() {
    Next();  // let
    KILN_ASSIGN_OR_RETURN(Binding binding, ParseBinding());
    KILN_RETURN_IF_ERROR(Expect("="));
    KILN_ASSIGN_OR_RETURN(Expr value, ParseExpr());
    Var var(binding.name, binding.dtype.value_or(value.dtype()));
    KILN_RETURN_IF_ERROR(ExpectKeyword("in"));
    ScopeGuard scope(this);
    Declare(var.name(), var);
    KILN_ASSIGN_OR_RETURN(Expr body, ParseExpr());
    return LetNode::make(var, value, body);
  }

  // Tokens window_start_ .. window_start_ + window_.size() - 1 of the text,
  // lexed on demand (a deque: references survive appending).
  mutable TokenStream stream_;
  mutable std::deque<Token> window_;
  size_t window_start_ = 0;
  size_t pos_ = 0;  // the current token's index in the text
  std::vector<std::unordered_map<std::string, Symbol>> scopes_;
  std::unordered_map<std::string, Var> pending_params_;  // scalar parameters, found ahead
  std::unordered_set<std::string> declared_params_;      // parameter names seen so far
  int nesting_ = 0;
  size_t open_lets_ = 0;  // lets whose bodies are being parsed
  int operators_ = 0;
  SourceMap* map_ = nullptr;  // where to record locations, if anywhere
};

StatusOr<Parser> MakeParser(std::string_view text, const std::vector<Var>& vars,
                            const std::vector<Buffer>& buffers) {
  Parser parser(text);
  for (const Var& v : vars) parser.Declare(v.name(), v);
  for (const Buffer& b : buffers) parser.Declare(b.name(), b);
  return parser;
}

// `result`, unless the text has a lexical error: then that error.
template <typename T>
StatusOr<T> Finish(Parser& parser, StatusOr<T> result) {
  Status lexical = parser.LexicalError();
  if (!lexical.ok()) return lexical;
  return result;
}

}  // namespace

StatusOr<Module> ParseModule(std::string_view text) {
  KILN_ASSIGN_OR_RETURN(Parser parser, MakeParser(text, {}, {}));
  return Finish(parser, parser.ParseModuleText());
}

StatusOr<Module> ParseModule(std::string_view text, SourceMap* source_map) {
  KILN_ASSIGN_OR_RETURN(Parser parser, MakeParser(text, {}, {}));
  SourceMap map;
  parser.RecordLocationsIn(&map);
  KILN_ASSIGN_OR_RETURN(Module module, Finish(parser, parser.ParseModuleText()));
  std::string line;
  for (char c : text) {
    if (c == '\n') {
      map.lines.push_back(std::move(line));
      line.clear();
    } else {
      line += c;
    }
  }
  if (!line.empty()) map.lines.push_back(std::move(line));
  if (source_map != nullptr) *source_map = std::move(map);
  return module;
}

StatusOr<Function> ParseFunction(std::string_view text) {
  KILN_ASSIGN_OR_RETURN(Parser parser, MakeParser(text, {}, {}));
  return Finish(parser, parser.ParseFunctionText());
}

StatusOr<Stmt> ParseStmt(std::string_view text, const std::vector<Var>& vars,
                         const std::vector<Buffer>& buffers) {
  KILN_ASSIGN_OR_RETURN(Parser parser, MakeParser(text, vars, buffers));
  return Finish(parser, parser.ParseStmtText());
}

StatusOr<Expr> ParseExpr(std::string_view text, const std::vector<Var>& vars,
                         const std::vector<Buffer>& buffers) {
  KILN_ASSIGN_OR_RETURN(Parser parser, MakeParser(text, vars, buffers));
  return Finish(parser, parser.ParseExprText());
}

bool IsIdentifier(std::string_view name) {
  return SanitizeName(name) == name;
}

}  // namespace kiln::ir
