#include "kiln/ir/printer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <unordered_set>

#include "kiln/ir/expr_nodes.h"
#include "kiln/ir/expr_ops.h"
#include "kiln/ir/text_syntax.h"

namespace kiln::ir {
namespace {

// Binding strength of an expression in the text form; higher binds tighter.
enum Precedence : int {
  kPrecOr = 1,
  kPrecAnd,
  kPrecEquality,
  kPrecRelational,
  kPrecAdditive,
  kPrecMultiplicative,
  kPrecUnary,
  kPrecPrimary,
};

// A negation prints as `-x`, which parses back to it: a float's (-0.0 - x)
// or a scalar integer's (0 - x), but for a literal or broadcast operand
// (`-1.0` would parse as a literal), which prints in full.
bool PrintsAsNegation(const BinaryNode* op) {
  if (!IsNegation(op) || op->b.as<BroadcastNode>() != nullptr) return false;
  if (op->a.dtype().is_float()) return op->b.as<FloatImmNode>() == nullptr;
  return op->a.as<IntImmNode>() != nullptr && op->b.as<IntImmNode>() == nullptr;
}

int PrecedenceOf(const Expr& e) {
  if (const auto* bin = e.as<BinaryNode>()) {
    if (PrintsAsNegation(bin)) return kPrecUnary;
    switch (bin->op) {
      case BinaryOp::kOr:
        return kPrecOr;
      case BinaryOp::kAnd:
        return kPrecAnd;
      case BinaryOp::kEq:
      case BinaryOp::kNe:
        return kPrecEquality;
      case BinaryOp::kLt:
      case BinaryOp::kLe:
      case BinaryOp::kGt:
      case BinaryOp::kGe:
        return kPrecRelational;
      case BinaryOp::kAdd:
      case BinaryOp::kSub:
        return kPrecAdditive;
      case BinaryOp::kMul:
      case BinaryOp::kDiv:
      case BinaryOp::kMod:
        return kPrecMultiplicative;
      default:
        return kPrecPrimary;  // floor_div(a, b), min(a, b), ... print as calls
    }
  }
  if (e.as<NotNode>() != nullptr) return kPrecUnary;
  return kPrecPrimary;
}

class Printer {
 public:
  explicit Printer(LineMap* lines) : lines_(lines) {}

  void PrintModule(const Module& m) {
    Emit("module {\n");
    for (size_t i = 0; i < m.functions.size(); ++i) {
      if (i > 0) Emit("\n");
      names_.clear();
      used_.clear();
      PrintFunction(m.functions[i]);
    }
    Emit("}\n");
  }

  void PrintFunction(const Function& f) {
    // Parameters are named first, so they keep their names whatever the body uses.
    for (const Param& p : f.params()) {
      if (p.is_buffer()) {
        NameOf(p.buffer().get(), p.buffer().name());
      } else {
        NameOf(p.var().get(), p.var().name());
      }
    }
    Emit("fn ", SanitizeName(f.name()), "(");
    for (size_t i = 0; i < f.params().size(); ++i) {
      if (i > 0) Emit(", ");
      const Param& p = f.params()[i];
      if (p.is_buffer()) {
        const Buffer& b = p.buffer();
        Emit(NameOf(b.get(), b.name()), ": buffer<", b.dtype().ToString(), ">");
        PrintShape(b);
      } else {
        Emit(NameOf(p.var().get(), p.var().name()), ": ", p.var().dtype().ToString());
      }
    }
    Emit(")");
    if (!f.attrs().empty()) {
      Emit(" attributes {");
      bool first = true;
      for (const auto& [key, value] : f.attrs()) {
        if (!first) Emit(", ");
        first = false;
        Emit(QuoteString(key), ": ");
        if (const auto* s = std::get_if<std::string>(&value)) {
          Emit(QuoteString(*s));
        } else {
          Emit(std::to_string(std::get<int64_t>(value)));
        }
      }
      Emit("}");
    }
    Emit(" {\n");
    PrintBody(f.body(), 1);
    Emit("}\n");
  }

  void PrintBody(const Stmt& s, int indent) {
    if (!s.defined()) return;
    if (const auto* seq = s.as<SeqNode>()) {
      RecordLine(s);
      for (const Stmt& child : seq->stmts) PrintBody(child, indent);
      return;
    }
    RecordLine(s);
    std::string pad(static_cast<size_t>(indent) * 2, ' ');
    switch (s.kind()) {
      case StmtKind::kLetStmt: {
        const auto* op = s.as<LetStmtNode>();
        Emit(pad, "let ");
        std::string value = Str(op->value);  // printed before the var is named
        Emit(NameOf(op->var.get(), op->var.name()), ": ", op->var.dtype().ToString(), " = ", value,
             "\n");
        PrintBody(op->body, indent);
        return;
      }
      case StmtKind::kStore: {
        const auto* op = s.as<StoreNode>();
        Emit(pad, BufferName(op->buffer), "[", ExprList(op->indices), "] = ", Str(op->value), "\n");
        return;
      }
      case StmtKind::kAllocate: {
        const auto* op = s.as<AllocateNode>();
        const Buffer& b = op->buffer;
        std::string shape = ShapeText(b);
        Emit(pad, "alloc ", NameOf(b.get(), b.name()), ": ", b.dtype().ToString(), shape, " ",
             MemoryScopeName(b.scope()), " {\n");
        PrintBody(op->body, indent + 1);
        Emit(pad, "}\n");
        return;
      }
      case StmtKind::kFor: {
        const auto* op = s.as<ForNode>();
        std::string min = Str(op->min);
        std::string extent = Str(op->extent);
        std::string step = IsConstInt(op->step, 1) && op->step.dtype() == op->loop_var.dtype()
                               ? ""
                               : ", " + Str(op->step);
        Emit(pad, "for ", NameOf(op->loop_var.get(), op->loop_var.name()));
        if (op->loop_var.dtype() != op->min.dtype()) Emit(": ", op->loop_var.dtype().ToString());
        Emit(" in ", LoopKindName(op->kind), "(", min, ", ", extent, step, ") {\n");
        PrintBody(op->body, indent + 1);
        Emit(pad, "}\n");
        return;
      }
      case StmtKind::kWhile: {
        const auto* op = s.as<WhileNode>();
        Emit(pad, "while (", Str(op->cond), ") {\n");
        PrintBody(op->body, indent + 1);
        Emit(pad, "}\n");
        return;
      }
      case StmtKind::kIf: {
        const auto* op = s.as<IfNode>();
        Emit(pad, "if (", Str(op->cond), ") {\n");
        PrintIfRest(op, indent);
        return;
      }
      case StmtKind::kBarrier: {
        const auto* op = s.as<BarrierNode>();
        Emit(pad, op->barrier == BarrierKind::kWorkgroup ? "workgroup_barrier()\n"
                                                         : "storage_barrier()\n");
        return;
      }
      case StmtKind::kAssert: {
        const auto* op = s.as<AssertNode>();
        Emit(pad, "assert(", Str(op->cond), ", ", QuoteString(op->message), ")\n");
        return;
      }
      case StmtKind::kEvaluate: {
        Emit(pad, "evaluate(", Str(s.as<EvaluateNode>()->value), ")\n");
        return;
      }
      case StmtKind::kSeq:
        return;  // handled above
    }
  }

  std::string Str(const Expr& e) {
    std::string out;
    PrintExpr(e, &out);
    return out;
  }

  std::string& text() { return text_; }

 private:
  // The then-branch and the else chain of an if whose "if (...) {" line is out.
  void PrintIfRest(const IfNode* op, int indent) {
    std::string pad(static_cast<size_t>(indent) * 2, ' ');
    PrintBody(op->then_case, indent + 1);
    if (!op->else_case.defined()) {
      Emit(pad, "}\n");
      return;
    }
    // An else block holding just an if prints as `else if`; the parser reads
    // that back as the if itself, which prints the same way.
    Stmt flat_else = MakeSeq({op->else_case});
    if (const auto* nested = flat_else.as<IfNode>()) {
      RecordLine(op->else_case);
      RecordLine(flat_else);
      Emit(pad, "} else if (", Str(nested->cond), ") {\n");
      PrintIfRest(nested, indent);
      return;
    }
    Emit(pad, "} else {\n");
    PrintBody(op->else_case, indent + 1);
    Emit(pad, "}\n");
  }

  void PrintExpr(const Expr& e, std::string* out) {
    if (!e.defined()) {
      *out += "<null>";
      return;
    }
    switch (e.kind()) {
      case ExprKind::kIntImm:
        *out += FormatIntLiteral(e.dtype(), e.as<IntImmNode>()->value);
        return;
      case ExprKind::kFloatImm:
        *out += FormatFloatLiteral(e.dtype(), e.as<FloatImmNode>()->value);
        return;
      case ExprKind::kBoolImm:
        *out += e.as<BoolImmNode>()->value ? "true" : "false";
        return;
      case ExprKind::kVar: {
        const auto* v = e.as<VarNode>();
        *out += NameOf(v, v->name);
        return;
      }
      case ExprKind::kBinary: {
        const auto* op = e.as<BinaryNode>();
        int prec = PrecedenceOf(e);
        if (prec == kPrecPrimary) {
          *out += BinaryOpName(op->op);
          *out += "(";
          PrintExpr(op->a, out);
          *out += ", ";
          PrintExpr(op->b, out);
          *out += ")";
          return;
        }
        if (PrintsAsNegation(op)) {
          *out += "-";
          PrintOperand(op->b, PrecedenceOf(op->b) < kPrecUnary, out);
          return;
        }
        // Left-associative: parenthesize a weaker left operand, and a right
        // operand that is not strictly stronger.
        PrintOperand(op->a, PrecedenceOf(op->a) < prec, out);
        *out += " ";
        *out += BinaryOpName(op->op);
        *out += " ";
        PrintOperand(op->b, PrecedenceOf(op->b) <= prec, out);
        return;
      }
      case ExprKind::kNot: {
        const auto* op = e.as<NotNode>();
        *out += "!";
        PrintOperand(op->a, PrecedenceOf(op->a) < kPrecUnary, out);
        return;
      }
      case ExprKind::kSelect: {
        const auto* op = e.as<SelectNode>();
        PrintCall("select", {op->cond, op->true_value, op->false_value}, out);
        return;
      }
      case ExprKind::kCast:
        PrintCall(e.dtype().ToString(), {e.as<CastNode>()->value}, out);
        return;
      case ExprKind::kReinterpret:
        PrintCall("reinterpret<" + e.dtype().ToString() + ">", {e.as<ReinterpretNode>()->value},
                  out);
        return;
      case ExprKind::kLet: {
        const auto* op = e.as<LetNode>();
        std::string value = Str(op->value);
        *out += "(let ";
        *out += NameOf(op->var.get(), op->var.name());
        *out += ": " + op->var.dtype().ToString() + " = " + value + " in ";
        PrintExpr(op->body, out);
        *out += ")";
        return;
      }
      case ExprKind::kRamp: {
        const auto* op = e.as<RampNode>();
        *out += "ramp(";
        PrintExpr(op->base, out);
        *out += ", ";
        PrintExpr(op->stride, out);
        *out += ", " + std::to_string(op->lanes) + ")";
        return;
      }
      case ExprKind::kBroadcast: {
        const auto* op = e.as<BroadcastNode>();
        *out += "broadcast(";
        PrintExpr(op->value, out);
        *out += ", " + std::to_string(op->lanes) + ")";
        return;
      }
      case ExprKind::kLoad: {
        const auto* op = e.as<LoadNode>();
        *out += BufferName(op->buffer) + "[" + ExprList(op->indices) + "]";
        return;
      }
      case ExprKind::kCall: {
        const auto* op = e.as<CallNode>();
        PrintCall(std::string(IntrinsicName(op->op)), op->args, out);
        return;
      }
    }
  }

  void PrintOperand(const Expr& e, bool parens, std::string* out) {
    if (parens) *out += "(";
    PrintExpr(e, out);
    if (parens) *out += ")";
  }

  void PrintCall(const std::string& name, const std::vector<Expr>& args, std::string* out) {
    *out += name + "(" + ExprList(args) + ")";
  }

  std::string ExprList(const std::vector<Expr>& exprs) {
    std::string out;
    for (size_t i = 0; i < exprs.size(); ++i) {
      if (i > 0) out += ", ";
      PrintExpr(exprs[i], &out);
    }
    return out;
  }

  // "[n, m]" or "[n, m] strides [m, 1]".
  std::string ShapeText(const Buffer& b) {
    std::string out = "[" + ExprList(b.shape()) + "]";
    if (!b.strides().empty()) out += " strides [" + ExprList(b.strides()) + "]";
    return out;
  }
  void PrintShape(const Buffer& b) { Emit(ShapeText(b)); }

  std::string BufferName(const Buffer& b) { return NameOf(b.get(), b.name()); }

  // The printed name of a var or buffer; the first distinct object to ask for
  // a name gets it, later ones get a numbered variant.
  const std::string& NameOf(const void* key, const std::string& hint) {
    auto it = names_.find(key);
    if (it != names_.end()) return it->second;
    std::string base = SanitizeName(hint);
    std::string name = base;
    for (int k = 1; used_.count(name) != 0; ++k) name = base + "_" + std::to_string(k);
    used_.insert(name);
    return names_.emplace(key, std::move(name)).first->second;
  }

  void RecordLine(const Stmt& s) {
    if (lines_ != nullptr) lines_->emplace(s.get(), line_);
  }

  template <typename... Args>
  void Emit(const Args&... args) {
    (EmitOne(args), ...);
  }
  void EmitOne(std::string_view s) {
    for (char c : s) line_ += c == '\n';
    text_ += s;
  }

  LineMap* lines_;
  int line_ = 1;
  std::string text_;
  std::unordered_map<const void*, std::string> names_;
  std::unordered_set<std::string> used_;
};

}  // namespace

std::string Print(DataType dtype) {
  return dtype.ToString();
}
std::string Print(const Module& module) {
  return Print(module, nullptr);
}
std::string Print(const Function& function) {
  return Print(function, nullptr);
}

std::string Print(const Module& module, LineMap* lines) {
  Printer p(lines);
  p.PrintModule(module);
  return std::move(p.text());
}

std::string Print(const Function& function, LineMap* lines) {
  Printer p(lines);
  p.PrintFunction(function);
  return std::move(p.text());
}

std::string Print(const Stmt& stmt) {
  Printer p(nullptr);
  p.PrintBody(stmt, 0);
  return std::move(p.text());
}

std::string Print(const Expr& expr) {
  return Printer(nullptr).Str(expr);
}

std::ostream& operator<<(std::ostream& os, const Expr& e) {
  return os << Print(e);
}
std::ostream& operator<<(std::ostream& os, const Stmt& s) {
  return os << Print(s);
}

}  // namespace kiln::ir
