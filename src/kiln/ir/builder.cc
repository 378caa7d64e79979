#include "kiln/ir/builder.h"

namespace kiln::ir {

// One open block: its statements so far, and the lets still waiting for
// their body (the statements that follow them). lets[k] binds the statements
// from stmts[let_starts[k]] on.
struct IRBuilder::Block {
  std::vector<Stmt> stmts;
  std::vector<std::pair<Var, Expr>> lets;
  std::vector<size_t> let_starts;
};

IRBuilder::IRBuilder(std::string function_name) : name_(std::move(function_name)) {
  Open();
}

IRBuilder::~IRBuilder() = default;

Var IRBuilder::ScalarParam(const std::string& name, DataType dtype) {
  Var v(name, dtype);
  params_.push_back(Param::FromVar(v));
  return v;
}

Buffer IRBuilder::BufferParam(const std::string& name, DataType dtype, std::vector<Expr> shape,
                              std::vector<Expr> strides) {
  Buffer b(name, dtype, std::move(shape), std::move(strides), MemoryScope::kGlobal);
  params_.push_back(Param::FromBuffer(b));
  return b;
}

void IRBuilder::SetAttr(const std::string& key, AttrValue value) {
  attrs_[key] = std::move(value);
}

void IRBuilder::Open() {
  blocks_.emplace_back();
}

Stmt IRBuilder::Close() {
  KILN_CHECK(!blocks_.empty());
  Block block = std::move(blocks_.back());
  blocks_.pop_back();
  return Finish(std::move(block));
}

Stmt IRBuilder::Finish(Block block) {
  // Wrap from the innermost (last) let outwards.
  std::vector<Stmt> stmts = std::move(block.stmts);
  for (size_t k = block.lets.size(); k-- > 0;) {
    size_t start = block.let_starts[k];
    std::vector<Stmt> body(stmts.begin() + static_cast<std::ptrdiff_t>(start), stmts.end());
    stmts.resize(start);
    stmts.push_back(
        LetStmtNode::make(block.lets[k].first, block.lets[k].second, MakeSeq(std::move(body))));
  }
  return MakeSeq(std::move(stmts));
}

void IRBuilder::Emit(Stmt stmt) {
  KILN_CHECK(stmt.defined() && !blocks_.empty());
  blocks_.back().stmts.push_back(std::move(stmt));
}

void IRBuilder::For(const std::string& name, LoopKind kind, Expr min, Expr extent,
                    const std::function<void(Var)>& body, Expr step) {
  Var v(name, min.dtype());
  Open();
  body(v);
  Stmt b = Close();
  Emit(ForNode::make(v, std::move(min), std::move(extent), kind, b, std::move(step)));
}

void IRBuilder::If(Expr cond, const std::function<void()>& then_body,
                   const std::function<void()>& else_body) {
  Open();
  then_body();
  Stmt t = Close();
  Stmt f;
  if (else_body) {
    Open();
    else_body();
    f = Close();
  }
  Emit(IfNode::make(std::move(cond), t, f));
}

void IRBuilder::While(Expr cond, const std::function<void()>& body) {
  Open();
  body();
  Emit(WhileNode::make(std::move(cond), Close()));
}

void IRBuilder::Allocate(const std::string& name, DataType dtype, std::vector<Expr> shape,
                         MemoryScope scope, const std::function<void(Buffer)>& body) {
  Buffer buffer(name, dtype, std::move(shape), {}, scope);
  Open();
  body(buffer);
  Emit(AllocateNode::make(buffer, Close()));
}

Var IRBuilder::Let(const std::string& name, Expr value) {
  KILN_CHECK(value.defined() && !blocks_.empty());
  Var v(name, value.dtype());
  Block& block = blocks_.back();
  block.lets.emplace_back(v, std::move(value));
  block.let_starts.push_back(block.stmts.size());
  return v;
}

void IRBuilder::Store(const Buffer& buffer, std::vector<Expr> indices, Expr value) {
  Emit(StoreNode::make(buffer, std::move(indices), std::move(value)));
}

void IRBuilder::Barrier(BarrierKind kind) {
  Emit(BarrierNode::make(kind));
}

void IRBuilder::Assert(Expr cond, std::string message) {
  Emit(AssertNode::make(std::move(cond), std::move(message)));
}

void IRBuilder::Evaluate(Expr value) {
  Emit(EvaluateNode::make(std::move(value)));
}

Function IRBuilder::Build() const {
  KILN_CHECK_MSG(blocks_.size() == 1, "IRBuilder::Build inside an open block");
  // Finish a copy of the top block so the builder stays usable.
  return Function(name_, params_, Finish(blocks_.back()), attrs_);
}

}  // namespace kiln::ir
