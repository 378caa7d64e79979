#include "kiln/ir/stmt.h"

namespace kiln::ir {

Stmt LetStmtNode::make(Var var, Expr value, Stmt body) {
  KILN_CHECK(var.defined() && value.defined() && body.defined());
  auto node = std::make_shared<LetStmtNode>();
  node->var = std::move(var);
  node->value = std::move(value);
  node->body = std::move(body);
  return Stmt(std::move(node));
}

Stmt StoreNode::make(Buffer buffer, std::vector<Expr> indices, Expr value) {
  KILN_CHECK(buffer.defined() && !indices.empty() && value.defined());
  for (const Expr& index : indices) KILN_CHECK(index.defined());
  auto node = std::make_shared<StoreNode>();
  node->buffer = std::move(buffer);
  node->indices = std::move(indices);
  node->value = std::move(value);
  return Stmt(std::move(node));
}

Stmt AllocateNode::make(Buffer buffer, Stmt body) {
  KILN_CHECK(buffer.defined() && body.defined());
  auto node = std::make_shared<AllocateNode>();
  node->buffer = std::move(buffer);
  node->body = std::move(body);
  return Stmt(std::move(node));
}

std::string_view LoopKindName(LoopKind kind) {
  switch (kind) {
    case LoopKind::kSerial:
      return "serial";
    case LoopKind::kUnrolled:
      return "unroll";
    case LoopKind::kVectorized:
      return "vectorize";
    case LoopKind::kThreadX:
      return "threadIdx.x";
    case LoopKind::kThreadY:
      return "threadIdx.y";
    case LoopKind::kThreadZ:
      return "threadIdx.z";
    case LoopKind::kBlockX:
      return "blockIdx.x";
    case LoopKind::kBlockY:
      return "blockIdx.y";
    case LoopKind::kBlockZ:
      return "blockIdx.z";
  }
  return "?";
}

std::optional<LoopKind> LoopKindFromName(std::string_view name) {
  for (LoopKind kind : {LoopKind::kSerial, LoopKind::kUnrolled, LoopKind::kVectorized,
                        LoopKind::kThreadX, LoopKind::kThreadY, LoopKind::kThreadZ,
                        LoopKind::kBlockX, LoopKind::kBlockY, LoopKind::kBlockZ}) {
    if (LoopKindName(kind) == name) return kind;
  }
  return std::nullopt;
}

bool IsThreadIdx(LoopKind kind) {
  return kind >= LoopKind::kThreadX && kind <= LoopKind::kThreadZ;
}
bool IsBlockIdx(LoopKind kind) {
  return kind >= LoopKind::kBlockX && kind <= LoopKind::kBlockZ;
}
bool IsThreadBinding(LoopKind kind) {
  return IsThreadIdx(kind) || IsBlockIdx(kind);
}

int LaunchAxis(LoopKind kind) {
  KILN_CHECK(IsThreadBinding(kind));
  return IsThreadIdx(kind) ? static_cast<int>(kind) - static_cast<int>(LoopKind::kThreadX)
                           : static_cast<int>(kind) - static_cast<int>(LoopKind::kBlockX);
}

Stmt ForNode::make(Var loop_var, Expr min, Expr extent, LoopKind kind, Stmt body, Expr step) {
  KILN_CHECK(loop_var.defined() && min.defined() && extent.defined() && body.defined());
  auto node = std::make_shared<ForNode>();
  if (!step.defined()) {
    DataType t = loop_var.dtype();
    step = t.is_integer() && t.is_scalar() ? MakeOne(t) : MakeOne(kI32);
  }
  node->loop_var = std::move(loop_var);
  node->min = std::move(min);
  node->extent = std::move(extent);
  node->step = std::move(step);
  node->kind = kind;
  node->body = std::move(body);
  return Stmt(std::move(node));
}

Stmt WhileNode::make(Expr cond, Stmt body) {
  KILN_CHECK(cond.defined() && body.defined());
  auto node = std::make_shared<WhileNode>();
  node->cond = std::move(cond);
  node->body = std::move(body);
  return Stmt(std::move(node));
}

Stmt IfNode::make(Expr cond, Stmt then_case, Stmt else_case) {
  KILN_CHECK(cond.defined() && then_case.defined());
  auto node = std::make_shared<IfNode>();
  node->cond = std::move(cond);
  node->then_case = std::move(then_case);
  node->else_case = std::move(else_case);
  return Stmt(std::move(node));
}

Stmt SeqNode::make(std::vector<Stmt> stmts) {
  for (const Stmt& s : stmts) KILN_CHECK(s.defined());
  auto node = std::make_shared<SeqNode>();
  node->stmts = std::move(stmts);
  return Stmt(std::move(node));
}

namespace {

void Flatten(const Stmt& s, std::vector<Stmt>* out) {
  if (const auto* seq = s.as<SeqNode>()) {
    for (const Stmt& child : seq->stmts) Flatten(child, out);
  } else if (s.defined()) {
    out->push_back(s);
  }
}

}  // namespace

Stmt MakeSeq(std::vector<Stmt> stmts) {
  std::vector<Stmt> flat;
  for (const Stmt& s : stmts) Flatten(s, &flat);
  if (flat.size() == 1) return flat[0];
  return SeqNode::make(std::move(flat));
}

Stmt NoOp() {
  return SeqNode::make({});
}

bool IsNoOp(const Stmt& s) {
  const auto* seq = s.as<SeqNode>();
  if (seq == nullptr) return false;
  for (const Stmt& child : seq->stmts) {
    if (!IsNoOp(child)) return false;
  }
  return true;
}

Stmt BarrierNode::make(BarrierKind barrier) {
  auto node = std::make_shared<BarrierNode>();
  node->barrier = barrier;
  return Stmt(std::move(node));
}

Stmt AssertNode::make(Expr cond, std::string message) {
  KILN_CHECK(cond.defined());
  auto node = std::make_shared<AssertNode>();
  node->cond = std::move(cond);
  node->message = std::move(message);
  return Stmt(std::move(node));
}

Stmt EvaluateNode::make(Expr value) {
  KILN_CHECK(value.defined());
  auto node = std::make_shared<EvaluateNode>();
  node->value = std::move(value);
  return Stmt(std::move(node));
}

}  // namespace kiln::ir
