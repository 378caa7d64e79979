#include "kiln/ir/verifier.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kiln/ir/expr_nodes.h"
#include "kiln/ir/mutator.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/simplifier.h"
#include "kiln/ir/structural_equal.h"
#include "kiln/ir/text_syntax.h"
#include "kiln/ir/visitor.h"

namespace kiln::ir {
namespace {

// The first statement (in visiting order) with an expression deeper than
// `cap`, or null.
const StmtNode* StatementWithDeepExpression(const Function& function, int cap) {
  struct Finder : StmtVisitor {
    int cap = 0;
    const StmtNode* current = nullptr;
    const StmtNode* found = nullptr;
    void VisitStmt(const Stmt& s) override {
      if (found != nullptr || !s.defined()) return;
      const StmtNode* outer = current;
      current = s.get();
      StmtVisitor::VisitStmt(s);
      current = outer;
    }
    void VisitExpr(const Expr& e) override {
      if (found == nullptr && ExprDepth(e, cap) > cap) found = current;
    }
  } finder;
  finder.cap = cap;
  finder.VisitStmt(function.body());
  return finder.found;
}

// Lines of a printed text, for quoting the offending line in messages.
std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string Trim(const std::string& s) {
  size_t begin = s.find_first_not_of(' ');
  if (begin == std::string::npos) return "";
  std::string out = s.substr(begin);
  if (out.size() >= 2 && out.compare(out.size() - 2, 2, " {") == 0) out.resize(out.size() - 2);
  return out;
}

// Whether `e`, as a tree (a shared operand counted at each use), has more
// than `cap` nodes; stops counting there.
bool LargerThan(const Expr& e, int cap) {
  struct Counter : ExprVisitor {
    int left = 0;
    void VisitExpr(const Expr& x) override {
      if (left < 0) return;
      --left;
      ExprVisitor::VisitExpr(x);
    }
  } counter;
  counter.left = cap;
  counter.VisitExpr(e);
  return counter.left < 0;
}

// `e` printed, quoted for a message; a large expression (printed, it could
// be any length) is described instead.
std::string Quote(const Expr& e) {
  constexpr int kMaxQuotedNodes = 256;
  if (LargerThan(e, kMaxQuotedNodes)) {
    return StrCat("an expression of type ", e.dtype(), " with more than ", kMaxQuotedNodes,
                  " operations");
  }
  return "`" + Print(e) + "`";
}

// Whether an expression uses only the given scalar parameters, constants and
// its own let bindings (launch extents and parameter shapes must: the
// runtime evaluates them before the kernel runs).
class ParamOnlyChecker : public ExprVisitor {
 public:
  explicit ParamOnlyChecker(const std::unordered_set<const VarNode*>& params) : params_(params) {}

  void VisitVar(const VarNode* op) override {
    ok &= params_.count(op) != 0 || bound_.count(op) != 0;
  }
  void VisitLoad(const LoadNode* op) override { ok = false; }
  void VisitCall(const CallNode* op) override {
    ok &= !IsSubgroupIntrinsic(op->op);
    ExprVisitor::VisitCall(op);
  }
  void VisitLet(const LetNode* op) override {
    bound_.insert(op->var.get());
    ExprVisitor::VisitLet(op);
  }

  bool ok = true;

 private:
  const std::unordered_set<const VarNode*>& params_;
  std::unordered_set<const VarNode*> bound_;
};

// Whether an expression may differ between the threads of one workgroup: it
// uses a var known to vary (threadIdx loop vars and vars derived from them),
// loads memory (which other threads may be writing), or reads a subgroup
// result that differs between subgroups. Let-bound vars inside the
// expression vary if their value does.
class VaryingFinder : public ExprVisitor {
 public:
  explicit VaryingFinder(const std::unordered_set<const VarNode*>& varying) : varying_(varying) {}

  void VisitVar(const VarNode* op) override {
    found |= varying_.count(op) != 0 || local_varying_.count(op) != 0;
  }
  void VisitLoad(const LoadNode* op) override { found = true; }
  void VisitCall(const CallNode* op) override {
    found |= IsSubgroupIntrinsic(op->op) && op->op != Intrinsic::kSubgroupBroadcastFirst;
    ExprVisitor::VisitCall(op);
  }
  void VisitLet(const LetNode* op) override {
    bool before = found;
    found = false;
    VisitExpr(op->value);
    if (found) local_varying_.insert(op->var.get());
    found |= before;
    VisitExpr(op->body);
  }

  bool found = false;

 private:
  const std::unordered_set<const VarNode*>& varying_;
  std::unordered_set<const VarNode*> local_varying_;
};

// Where a function's statements are, for error messages: in the text the
// user wrote (a parser's source map: lines and columns), or in the printed
// IR (lines only). The printed text is made when a message first needs it,
// so verifying valid IR prints nothing; `offset` (the lines before the
// function's own in its module's printed text) is computed then too.
class Listing {
 public:
  // The most of a line a message quotes (a statement may be any length).
  static constexpr size_t kMaxQuotedLine = 160;
  static std::string Cut(std::string line) { return Shortened(std::move(line), kMaxQuotedLine); }

  // Printed: lines of Print(f), shifted by offset().
  Listing(const Function& f, std::function<int()> offset) : f_(f), offset_fn_(std::move(offset)) {}
  // Source: the parsed text's lines and each statement's line and column.
  Listing(const Function& f, const std::vector<std::string>& source_lines, const LineMap& lines,
          const LineMap& columns, SourceLocation function_at)
      : f_(f),
        source_lines_(&source_lines),
        source_stmt_lines_(&lines),
        columns_(&columns),
        function_at_(function_at) {}

  // Whether lines are the parsed text's (quoting them prints nothing).
  bool has_source() const { return source_lines_ != nullptr; }
  // The line of `s`, or of the function when `s` is null or unknown.
  int LineOf(const StmtNode* s) const {
    const LineMap& lines = StmtLines();
    auto it = s != nullptr ? lines.find(s) : lines.end();
    if (source_lines_ != nullptr) return it == lines.end() ? function_at_.line : it->second;
    return offset_ + (it == lines.end() ? function_line_ : it->second);
  }
  // The column of `s`, or 0 when unknown (printed IR).
  int ColumnOf(const StmtNode* s) const {
    if (columns_ == nullptr) return 0;
    auto it = s != nullptr ? columns_->find(s) : columns_->end();
    return it == columns_->end() ? function_at_.column : it->second;
  }
  // Line `line`'s text, trimmed and cut at kMaxQuotedLine characters, or
  // nothing when it is out of range.
  std::optional<std::string> Text(int line) const {
    if (source_lines_ != nullptr) {
      if (line < 1 || line > static_cast<int>(source_lines_->size())) return std::nullopt;
      return Cut(Trim((*source_lines_)[line - 1]));
    }
    Make();
    const int local = line - offset_;
    if (local < 1 || local > static_cast<int>(text_.size())) return std::nullopt;
    return Cut(Trim(text_[local - 1]));
  }

 private:
  const LineMap& StmtLines() const {
    if (source_lines_ != nullptr) return *source_stmt_lines_;
    Make();
    return lines_;
  }
  void Make() const {
    if (made_) return;
    made_ = true;
    text_ = SplitLines(Print(f_, &lines_));
    // The line of `fn`, for a function whose body starts on the next line.
    auto it = lines_.find(f_.body().get());
    function_line_ = it == lines_.end() ? 1 : it->second - 1;
    offset_ = offset_fn_ ? offset_fn_() : 0;
  }

  const Function& f_;
  std::function<int()> offset_fn_;
  mutable bool made_ = false;
  mutable LineMap lines_;
  mutable std::vector<std::string> text_;
  mutable int function_line_ = 1;
  mutable int offset_ = 0;
  const std::vector<std::string>* source_lines_ = nullptr;
  const LineMap* source_stmt_lines_ = nullptr;
  const LineMap* columns_ = nullptr;
  SourceLocation function_at_;
};

class FunctionVerifier {
 public:
  FunctionVerifier(const Function& f, const VerifyOptions& options, const Listing& listing)
      : f_(f), options_(options), listing_(listing) {}

  // The type rules alone, on one expression outside any function: every
  // variable and buffer counts as defined, nothing is uniform or not, and
  // a subexpression shared by several parents is checked once.
  Status RunOnExpression(const Expr& e) {
    types_only_ = true;
    if (ExprDepth(e) > kMaxExprDepth) {
      return CompileError("the expression nests more than ", kMaxExprDepth,
                          " levels deep, the most kiln compiles");
    }
    return CheckExpr(e);
  }

  Status Run() {
    if (SanitizeName(f_.name()) != f_.name()) {
      return ErrorAtFunction(
          StrCat("function name '", f_.name(), "' is not an identifier (or is reserved)"));
    }
    // Scalar parameters first: buffer shapes may use any of them.
    for (const Param& p : f_.params()) {
      if (!p.is_scalar()) continue;
      DataType t = p.var().dtype();
      if (t != kI32 && t != kU32 && t != kF32) {
        return ErrorAtFunction(StrCat("scalar parameter '", p.var().name(), "' has type ", t,
                                      "; expected i32, u32 or f32"));
      }
      KILN_RETURN_IF_ERROR(DefineVar(p.var()));
      scalar_params_.insert(p.var().get());
    }
    for (const Param& p : f_.params()) {
      if (!p.is_buffer()) continue;
      const Buffer& b = p.buffer();
      if (b.scope() != MemoryScope::kGlobal) {
        return ErrorAtFunction(StrCat("buffer parameter '", b.name(), "' must be global"));
      }
      if (options_.kernel_buffer_types && !b.dtype().is_kernel_buffer_element()) {
        return ErrorAtFunction(StrCat("buffer parameter '", b.name(), "' has element type ",
                                      b.dtype(),
                                      "; kernel buffers hold f32, f16, i32, u32, bool or int8x4"));
      }
      KILN_RETURN_IF_ERROR(CheckShape(b));
      KILN_RETURN_IF_ERROR(DefineBuffer(b));
    }
    int64_t storage_buffers = 0;
    for (const Param& p : f_.params()) storage_buffers += p.is_buffer() ? 1 : 0;
    if (storage_buffers > options_.limits.max_storage_buffers_per_stage) {
      return ErrorAtFunction(
          StrCat("the kernel has ", storage_buffers, " buffer parameters, more than the target's ",
                 options_.limits.max_storage_buffers_per_stage,
                 " storage buffers per shader stage (maxStorageBuffersPerShaderStage)"));
    }
    // Before anything recursive looks at the expressions (the messages
    // below quote printed lines): how deep each one nests.
    KILN_RETURN_IF_ERROR(CheckDepth());
    KILN_RETURN_IF_ERROR(CheckStmt(f_.body()));
    return Status::Ok();
  }

 private:
  // The deepest expression of the function, measured without recursion.
  Status CheckDepth() const {
    if (DeepestExpression(f_) > kMaxExprDepth) {
      // At its line where that is the user's text; printing the function to
      // find the line would recurse through the deep expression.
      if (listing_.has_source()) {
        return ErrorAt(StatementWithDeepExpression(f_, kMaxExprDepth),
                       StrCat("an expression nests more than ", kMaxExprDepth,
                              " levels deep; kiln compiles expressions up to that depth (split "
                              "it with let statements)"));
      }
      return CompileError("function '", f_.name(), "': an expression nests more than ",
                          kMaxExprDepth,
                          " levels deep; kiln compiles expressions up to that depth (split a "
                          "long one with let statements)");
    }
    return Status::Ok();
  }

  // ------------------------------------------------------------ messages

  // The statement being checked, or null at the function's signature.
  const StmtNode* Site() const { return current_ != nullptr ? current_->get() : nullptr; }

  // Column 0: unknown (messages about printed IR give lines only).
  Status ErrorAt(const StmtNode* site, const std::string& what) const {
    if (types_only_) return CompileError(what);
    const int line = listing_.LineOf(site);
    const int column = listing_.ColumnOf(site);
    std::string quoted;
    if (auto text = listing_.Text(line)) quoted = StrCat("`", *text, "`: ");
    std::string at = column > 0 ? StrCat(", column ", column) : "";
    return CompileError("function '", f_.name(), "', line ", line, at, ": ", quoted, what);
  }
  Status ErrorAtFunction(const std::string& what) const { return ErrorAt(nullptr, what); }
  Status Error(const std::string& what) const { return ErrorAt(Site(), what); }

  // ------------------------------------------------------------ scopes

  Status DefineVar(const Var& v) {
    if (!ever_defined_.insert(v.get()).second && !types_only_) {
      return Error(StrCat("variable '", v.name(),
                          "' is defined twice (each variable is bound exactly once)"));
    }
    if (!v.dtype().IsValid() || v.dtype().is_handle()) {
      return Error(StrCat("variable '", v.name(), "' has type ", v.dtype()));
    }
    in_scope_.insert(v.get());
    return Status::Ok();
  }
  void Undefine(const Var& v) { in_scope_.erase(v.get()); }

  Status DefineBuffer(const Buffer& b) {
    if (!ever_defined_.insert(b.get()).second) {
      return Error(StrCat("buffer '", b.name(), "' is defined twice"));
    }
    in_scope_.insert(b.get());
    return Status::Ok();
  }

  // Shapes and strides: integer scalars; for parameters, built from scalar
  // parameters and constants only.
  Status CheckShape(const Buffer& b) {
    bool is_param = current_ == nullptr;
    for (const std::vector<Expr>* list : {&b.shape(), &b.strides()}) {
      for (const Expr& e : *list) {
        KILN_RETURN_IF_ERROR(CheckExpr(e));
        if (!e.dtype().is_integer() || !e.dtype().is_scalar()) {
          return Error(StrCat("shape of buffer '", b.name(), "' has ", Quote(e), " of type ",
                              e.dtype(), "; expected an integer scalar"));
        }
        if (is_param && !UsesOnlyScalarParams(e)) {
          return Error(StrCat("shape of parameter '", b.name(), "' uses ", Quote(e),
                              "; expected constants and scalar parameters only"));
        }
        // Constants known here: no negative extent, no stride below 1.
        const bool stride = list == &b.strides();
        if (std::optional<int64_t> c = AsConstInt(e); c && *c < (stride ? 1 : 0)) {
          return Error(StrCat("buffer '", b.name(), "' has ", stride ? "stride " : "extent ", *c,
                              stride ? "; strides are positive" : "; extents are at least 0"));
        }
      }
    }
    // A parameter's constant extents: the elements (with strides, the span)
    // are counted, and the flattened index computed, in the first extent's
    // type. (Local and shared buffers have smaller limits of their own.)
    if (std::optional<int64_t> n = AllocatedElements(b); is_param && n && !b.shape().empty()) {
      const DataType t = b.shape()[0].dtype();
      const int bits = t.is_uint() ? t.bits : t.bits - 1;
      const int64_t most = bits >= 63 ? INT64_MAX : (int64_t{1} << bits) - 1;
      if (*n > most) {
        return Error(StrCat("buffer '", b.name(), "' has ",
                            *n >= (int64_t{1} << 40) ? "at least " : "", *n,
                            " elements, more than its extents' type ", t, " counts (", most,
                            "): kiln indexes a buffer in the type of its first extent"));
      }
    }
    return Status::Ok();
  }

  bool UsesOnlyScalarParams(const Expr& e) const {
    ParamOnlyChecker checker(scalar_params_);
    checker.VisitExpr(e);
    return checker.ok;
  }

  // ------------------------------------------------------------ thread dependence

  // True if e may differ between threads of one workgroup: it uses a
  // threadIdx loop var, a var derived from one, or loads memory (which
  // other threads may be writing).
  bool IsThreadVarying(const Expr& e) const {
    VaryingFinder finder(varying_);
    finder.VisitExpr(e);
    return finder.found;
  }

  // Where control flow stops being uniform; barriers and subgroup operations
  // are rejected below such a point.
  struct Divergence {
    const StmtNode* site;  // null: the function's signature
  };

  Status CheckUniform(const std::string& what) const {
    if (divergence_.empty() || types_only_) return Status::Ok();
    const int line = listing_.LineOf(divergence_.back().site);
    auto text = listing_.Text(line);
    std::string where = text ? StrCat("`", *text, "` at line ", line) : StrCat("line ", line);
    return Error(StrCat(what,
                        " is under control flow that may differ between threads (it uses a "
                        "thread index, a value derived from one, a memory load or a subgroup "
                        "result: ",
                        where, "); every thread of the workgroup must reach it"));
  }

  // ------------------------------------------------------------ expressions

  Status CheckSameType(const Expr& e, const Expr& a, const Expr& b, std::string_view what) {
    if (a.dtype() != b.dtype()) {
      return Error(
          StrCat(what, " of ", Quote(e), " have different types: ", a.dtype(), " and ", b.dtype()));
    }
    return Status::Ok();
  }

  Status ExpectType(const Expr& e, bool ok, std::string_view expected) {
    if (!ok) return Error(StrCat(Quote(e), " has type ", e.dtype(), "; expected ", expected));
    return Status::Ok();
  }

  Status CheckIndices(const Buffer& buffer, const std::vector<Expr>& indices) {
    if (in_scope_.count(buffer.get()) == 0 && !types_only_) {
      return Error(StrCat("buffer '", buffer.name(), "' is used ",
                          ever_defined_.count(buffer.get()) ? "outside the scope of its definition"
                                                            : "but never defined"));
    }
    if (static_cast<int>(indices.size()) != buffer.rank()) {
      return Error(StrCat("buffer '", buffer.name(), "' has ", buffer.rank(),
                          buffer.rank() == 1 ? " dimension" : " dimensions",
                          " but is indexed with ", indices.size()));
    }
    int lanes = 1;
    for (const Expr& index : indices) lanes = std::max<int>(lanes, index.dtype().lanes);
    for (const Expr& index : indices) {
      KILN_RETURN_IF_ERROR(CheckExpr(index));
      KILN_RETURN_IF_ERROR(ExpectType(index, index.dtype().is_integer(), "an integer index"));
      if (index.dtype().lanes != 1 && index.dtype().lanes != lanes) {
        return Error(StrCat("indices of buffer '", buffer.name(), "' have different lane counts"));
      }
    }
    if (options_.constant_indices_in_bounds) {
      for (size_t d = 0; d < indices.size(); ++d) {
        KILN_RETURN_IF_ERROR(CheckConstantIndex(buffer, d, indices[d]));
      }
    }
    return Status::Ok();
  }

  // A constant index (constants only, folded) inside dimension `d`.
  Status CheckConstantIndex(const Buffer& buffer, size_t d, const Expr& index) {
    if (index.dtype().lanes != 1) return Status::Ok();
    std::optional<Expr> folded = Folded(index);
    std::optional<int64_t> value = folded ? AsConstInt(*folded) : std::nullopt;
    if (!value) return Status::Ok();
    const std::string where =
        StrCat(Quote(index), ", the index of buffer '", buffer.name(), "' in dimension ", d);
    if (*value < 0) return Error(StrCat(where, ", is ", *value, "; an index is never negative"));
    std::optional<int64_t> extent = AsConstInt(buffer.shape()[d]);
    if (extent && *value >= *extent) {
      return Error(StrCat(where, ", is ", *value, ", past the dimension's extent ", *extent));
    }
    return Status::Ok();
  }

  Status CheckExpr(const Expr& e) {
    if (types_only_ && !checked_.insert(e.get()).second) return Status::Ok();
    switch (e.kind()) {
      case ExprKind::kIntImm:
      case ExprKind::kFloatImm:
      case ExprKind::kBoolImm:
        return Status::Ok();
      case ExprKind::kVar: {
        const auto* v = e.as<VarNode>();
        if (in_scope_.count(v) == 0 && !types_only_) {
          return Error(StrCat("variable '", v->name, "' is used ",
                              ever_defined_.count(v) ? "outside the scope of its definition"
                                                     : "but never defined"));
        }
        return Status::Ok();
      }
      case ExprKind::kBinary:
        return CheckBinary(e, e.as<BinaryNode>());
      case ExprKind::kNot: {
        const Expr& a = e.as<NotNode>()->a;
        KILN_RETURN_IF_ERROR(CheckExpr(a));
        return ExpectType(a, a.dtype().is_bool(), "bool");
      }
      case ExprKind::kSelect: {
        const auto* op = e.as<SelectNode>();
        KILN_RETURN_IF_ERROR(CheckExpr(op->cond));
        KILN_RETURN_IF_ERROR(CheckExpr(op->true_value));
        KILN_RETURN_IF_ERROR(CheckExpr(op->false_value));
        KILN_RETURN_IF_ERROR(CheckSameType(e, op->true_value, op->false_value, "values"));
        DataType c = op->cond.dtype();
        return ExpectType(op->cond, c.is_bool() && (c.lanes == 1 || c.lanes == e.dtype().lanes),
                          StrCat("bool or bool with ", e.dtype().lanes, " lanes"));
      }
      case ExprKind::kCast: {
        const Expr& v = e.as<CastNode>()->value;
        KILN_RETURN_IF_ERROR(CheckExpr(v));
        DataType from = v.dtype(), to = e.dtype();
        bool ok = (from.is_numeric() || from.is_bool()) && (to.is_numeric() || to.is_bool()) &&
                  from.lanes == to.lanes;
        if (!ok) return Error(StrCat("cannot cast ", Quote(v), " from ", from, " to ", to));
        return Status::Ok();
      }
      case ExprKind::kReinterpret: {
        const Expr& v = e.as<ReinterpretNode>()->value;
        KILN_RETURN_IF_ERROR(CheckExpr(v));
        DataType from = v.dtype(), to = e.dtype();
        auto bit_castable = [](DataType t) { return t.is_numeric() || t.is_int8x4(); };
        bool ok =
            bit_castable(from) && bit_castable(to) && from.bits * from.lanes == to.bits * to.lanes;
        if (!ok) {
          return Error(StrCat("cannot reinterpret ", Quote(v), " of type ", from, " as ", to,
                              " (bit widths must match)"));
        }
        return Status::Ok();
      }
      case ExprKind::kLet: {
        const auto* op = e.as<LetNode>();
        KILN_RETURN_IF_ERROR(CheckExpr(op->value));
        if (op->var.dtype() != op->value.dtype()) {
          return Error(StrCat("variable '", op->var.name(), "' of type ", op->var.dtype(),
                              " is bound to ", Quote(op->value), " of type ", op->value.dtype()));
        }
        KILN_RETURN_IF_ERROR(DefineVar(op->var));
        bool varying = !types_only_ && IsThreadVarying(op->value);
        if (varying) varying_.insert(op->var.get());
        Status s = CheckExpr(op->body);
        Undefine(op->var);
        return s;
      }
      case ExprKind::kRamp: {
        const auto* op = e.as<RampNode>();
        KILN_RETURN_IF_ERROR(CheckExpr(op->base));
        KILN_RETURN_IF_ERROR(CheckExpr(op->stride));
        KILN_RETURN_IF_ERROR(
            ExpectType(op->base, op->base.dtype().is_numeric() && op->base.dtype().is_scalar(),
                       "a scalar number"));
        return CheckSameType(e, op->base, op->stride, "base and stride");
      }
      case ExprKind::kBroadcast: {
        const Expr& v = e.as<BroadcastNode>()->value;
        KILN_RETURN_IF_ERROR(CheckExpr(v));
        return ExpectType(v, v.dtype().is_scalar(), "a scalar");
      }
      case ExprKind::kLoad: {
        const auto* op = e.as<LoadNode>();
        return CheckIndices(op->buffer, op->indices);
      }
      case ExprKind::kCall:
        return CheckCall(e, e.as<CallNode>());
    }
    return Status::Ok();
  }

  Status CheckBinary(const Expr& e, const BinaryNode* op) {
    KILN_RETURN_IF_ERROR(CheckExpr(op->a));
    KILN_RETURN_IF_ERROR(CheckExpr(op->b));
    KILN_RETURN_IF_ERROR(CheckSameType(e, op->a, op->b, "operands"));
    DataType t = op->a.dtype();
    if (IsLogical(op->op)) return ExpectType(op->a, t.is_bool(), "bool");
    if (op->op == BinaryOp::kEq || op->op == BinaryOp::kNe) {
      return ExpectType(op->a, t.is_numeric() || t.is_bool(), "a number or bool");
    }
    return ExpectType(op->a, t.is_numeric(), "a number");
  }

  Status CheckCall(const Expr& e, const CallNode* op) {
    std::string name(IntrinsicName(op->op));
    if (op->op == Intrinsic::kIfThenElse) {
      // Only the taken side runs: code under a thread-dependent condition diverges.
      KILN_RETURN_IF_ERROR(CheckExpr(op->args[0]));
      KILN_RETURN_IF_ERROR(ExpectType(op->args[0], op->args[0].dtype() == kBool, "bool"));
      bool diverges = !types_only_ && IsThreadVarying(op->args[0]);
      if (diverges) divergence_.push_back({Site()});
      Status s = CheckExpr(op->args[1]);
      if (s.ok()) s = CheckExpr(op->args[2]);
      if (diverges) divergence_.pop_back();
      KILN_RETURN_IF_ERROR(s);
      return CheckOperands(e, op);
    }
    for (const Expr& arg : op->args) KILN_RETURN_IF_ERROR(CheckExpr(arg));
    if (IsSubgroupIntrinsic(op->op)) {
      if (!options_.allow_subgroups) {
        return Error(StrCat(Quote(e), " needs subgroups, which these options do not allow"));
      }
      // The builtins only read the thread's values; the operations need
      // every thread of the subgroup.
      if (!IsSubgroupBuiltin(op->op)) KILN_RETURN_IF_ERROR(CheckUniform(Quote(e)));
    }
    return CheckOperands(e, op);
  }

  // The operands of a call against the intrinsic table's rules.
  Status CheckOperands(const Expr& e, const CallNode* op) {
    const IntrinsicInfo& info = GetIntrinsicInfo(op->op);
    DataType types[3];
    for (size_t i = 0; i < op->args.size() && i < 3; ++i) types[i] = op->args[i].dtype();
    const std::span<const DataType> operands(types, op->args.size());
    for (size_t i = 0; i < op->args.size(); ++i) {
      const OperandRule rule = info.operands[i];
      if (OperandFits(rule, types[i], operands)) continue;
      if (rule == OperandRule::kSameAs0 || rule == OperandRule::kSameAs1) {
        const size_t other = rule == OperandRule::kSameAs0 ? 0 : 1;
        return CheckSameType(e, op->args[other], op->args[i],
                             op->op == Intrinsic::kIfThenElse ? "values" : "operands");
      }
      std::string expected(OperandRuleText(rule));
      if (rule == OperandRule::kFloat || rule == OperandRule::kInteger) {
        expected += StrCat(" (operand of ", IntrinsicName(op->op), ")");
      }
      return ExpectType(op->args[i], false, expected);
    }
    return Status::Ok();
  }

  // ------------------------------------------------------------ statements

  // A scalar expression of constants alone, folded; empty for any other.
  static std::optional<Expr> Folded(const Expr& e) {
    if (e.kind() == ExprKind::kIntImm || e.kind() == ExprKind::kBoolImm) return e;
    if (e.kind() == ExprKind::kVar || e.dtype().lanes != 1) return std::nullopt;
    static const std::unordered_set<const VarNode*> kNoParams;
    ParamOnlyChecker constants(kNoParams);
    constants.VisitExpr(e);
    if (!constants.ok) return std::nullopt;
    return Simplify(e);
  }

  static bool IsTrue(const Expr& e) {
    return e.kind() == ExprKind::kBoolImm && e.as<BoolImmNode>()->value;
  }

  // Whether `e`, as a tree, has at most `limit` nodes.
  static bool TreeSizeAtMost(const Expr& e, int limit) {
    struct Counter : ExprVisitor {
      int left;
      void VisitExpr(const Expr& x) override {
        if (--left < 0) return;
        ExprVisitor::VisitExpr(x);
      }
    } counter;
    counter.left = limit;
    counter.VisitExpr(e);
    return counter.left >= 0;
  }

  // The values a loop's variable takes, where its bounds are constants and
  // it takes at least one.
  static std::optional<IntRange> LoopRange(const ForNode* op, int64_t step) {
    std::optional<int64_t> min = AsConstInt(Simplify(op->min));
    std::optional<int64_t> extent = AsConstInt(Simplify(op->extent));
    if (!min || !extent || *extent <= 0 || *extent > (int64_t{1} << 32)) return std::nullopt;
    const int64_t last = *min + (*extent - 1) / step * step;
    const bool is_signed = op->loop_var.dtype().is_int();
    const int64_t lowest = is_signed ? -(int64_t{1} << 31) : 0;
    const int64_t highest = is_signed ? (int64_t{1} << 31) - 1 : (int64_t{1} << 32) - 1;
    if (*min < lowest || last > highest) return std::nullopt;
    return IntRange{*min, last};
  }

  Status CheckCond(const Expr& cond) {
    KILN_RETURN_IF_ERROR(CheckExpr(cond));
    return ExpectType(cond, cond.dtype() == kBool, "bool");
  }

  Status CheckStmt(const Stmt& s) {
    if (!s.defined()) return Status::Ok();
    const Stmt* saved = current_;
    current_ = &s;
    Status status = CheckStmtKind(s);
    current_ = saved;
    return status;
  }

  // Checks `body` with its statement's condition diverging or not, one
  // block deeper where the statement opens one in WGSL.
  Status CheckBody(const Stmt& body, bool diverges, const Stmt& at, bool opens_block = true) {
    if (opens_block && options_.max_nested_blocks && blocks_ >= *options_.max_nested_blocks) {
      return Error(StrCat("loops and ifs nest more than ", *options_.max_nested_blocks,
                          " deep here, the most a WGSL function can hold (WebGPU "
                          "implementations refuse deeper statements; each `else if` is an if "
                          "inside the one before)"));
    }
    blocks_ += opens_block ? 1 : 0;
    if (diverges) divergence_.push_back({at.get()});
    Status s = CheckStmt(body);
    if (diverges) divergence_.pop_back();
    blocks_ -= opens_block ? 1 : 0;
    return s;
  }

  Status CheckStmtKind(const Stmt& s) {
    switch (s.kind()) {
      case StmtKind::kLetStmt: {
        const auto* op = s.as<LetStmtNode>();
        KILN_RETURN_IF_ERROR(CheckExpr(op->value));
        if (op->var.dtype() != op->value.dtype()) {
          return Error(StrCat("variable '", op->var.name(), "' of type ", op->var.dtype(),
                              " is bound to ", Quote(op->value), " of type ", op->value.dtype()));
        }
        KILN_RETURN_IF_ERROR(DefineVar(op->var));
        if (IsThreadVarying(op->value)) varying_.insert(op->var.get());
        if (Expr value = Substitute(op->value, let_values_); TreeSizeAtMost(value, 64)) {
          let_values_[op->var.get()] = value;
        }
        KILN_RETURN_IF_ERROR(CheckStmt(op->body));
        let_values_.erase(op->var.get());
        Undefine(op->var);
        return Status::Ok();
      }
      case StmtKind::kStore: {
        const auto* op = s.as<StoreNode>();
        KILN_RETURN_IF_ERROR(CheckIndices(op->buffer, op->indices));
        KILN_RETURN_IF_ERROR(CheckExpr(op->value));
        int lanes = 1;
        for (const Expr& index : op->indices) lanes = std::max<int>(lanes, index.dtype().lanes);
        DataType expected = op->buffer.dtype().with_lanes(lanes);
        if (op->value.dtype() != expected) {
          return Error(StrCat("stored value ", Quote(op->value), " has type ", op->value.dtype(),
                              "; buffer '", op->buffer.name(), "' at these indices needs ",
                              expected));
        }
        return Status::Ok();
      }
      case StmtKind::kAllocate:
        return CheckAllocate(s.as<AllocateNode>());
      case StmtKind::kFor:
        return CheckFor(s, s.as<ForNode>());
      case StmtKind::kWhile: {
        const auto* op = s.as<WhileNode>();
        KILN_RETURN_IF_ERROR(CheckCond(op->cond));
        // Nothing leaves a loop but its condition (the IR has no break): one
        // that is always true, as written or once lowering has put the values
        // of lets and the bounds of loops into it (tx < 5 inside
        // threadIdx.x(0, 1), n - n == 0), never ends.
        if (IsTrue(Simplify(Substitute(op->cond, let_values_), loop_ranges_))) {
          const bool as_written = IsTrue(Simplify(op->cond));
          return Error(StrCat("the condition ", Quote(op->cond), " is always true",
                              as_written ? "" : " (for the values its variables take here)",
                              ", so the loop never ends (only its condition can end a while "
                              "loop)"));
        }
        return CheckBody(op->body, IsThreadVarying(op->cond), s);
      }
      case StmtKind::kIf: {
        const auto* op = s.as<IfNode>();
        KILN_RETURN_IF_ERROR(CheckCond(op->cond));
        bool diverges = IsThreadVarying(op->cond);
        KILN_RETURN_IF_ERROR(CheckBody(op->then_case, diverges, s));
        return CheckBody(op->else_case, diverges, s);
      }
      case StmtKind::kSeq: {
        for (const Stmt& child : s.as<SeqNode>()->stmts) KILN_RETURN_IF_ERROR(CheckStmt(child));
        return Status::Ok();
      }
      case StmtKind::kBarrier: {
        const auto* op = s.as<BarrierNode>();
        return CheckUniform(op->barrier == BarrierKind::kWorkgroup ? "workgroup_barrier()"
                                                                   : "storage_barrier()");
      }
      case StmtKind::kAssert:
        return CheckCond(s.as<AssertNode>()->cond);
      case StmtKind::kEvaluate:
        return CheckExpr(s.as<EvaluateNode>()->value);
    }
    return Status::Ok();
  }

  Status CheckAllocate(const AllocateNode* op) {
    const Buffer& b = op->buffer;
    KILN_RETURN_IF_ERROR(CheckShape(b));
    if (b.scope() != MemoryScope::kGlobal) {
      for (size_t d = 0; d < b.shape().size(); ++d) {
        std::optional<int64_t> c = AsConstInt(b.shape()[d]);
        if (!c.has_value() || *c <= 0) {
          return Error(StrCat(MemoryScopeName(b.scope()), " buffer '", b.name(), "' has extent ",
                              Quote(b.shape()[d]), "; expected a positive constant"));
        }
      }
      for (size_t d = 0; d < b.strides().size(); ++d) {
        std::optional<int64_t> stride = AsConstInt(b.strides()[d]);
        if (!stride.has_value() || *stride <= 0) {
          return Error(StrCat(MemoryScopeName(b.scope()), " buffer '", b.name(), "' has stride ",
                              Quote(b.strides()[d]), "; expected a positive constant"));
        }
      }
      const int64_t elements = *AllocatedElements(b);
      // WGSL bounds the element count of a function's arrays (Dawn: fewer
      // than 65536); larger local buffers would also wrap 32-bit sizes.
      if (b.scope() == MemoryScope::kLocal && elements > kMaxLocalElements) {
        return Error(StrCat("local buffer '", b.name(), "' holds ",
                            elements >= (int64_t{1} << 40) ? "at least " : "", elements,
                            " elements; a local buffer holds at most ", kMaxLocalElements));
      }
      if (b.scope() == MemoryScope::kShared) {
        shared_bytes_ += WorkgroupVariableBytes(elements * b.dtype().StorageBytes());
        if (shared_bytes_ > options_.limits.max_workgroup_storage_bytes) {
          // (AllocatedElements caps its count at 2^40: beyond, "at least".)
          return Error(StrCat("shared buffers need ",
                              elements >= (int64_t{1} << 40) ? "at least " : "", shared_bytes_,
                              " bytes in all, more than the limit of ",
                              options_.limits.max_workgroup_storage_bytes));
        }
      }
    }
    KILN_RETURN_IF_ERROR(DefineBuffer(b));
    KILN_RETURN_IF_ERROR(CheckStmt(op->body));
    in_scope_.erase(b.get());
    return Status::Ok();
  }

  Status CheckFor(const Stmt& s, const ForNode* op) {
    KILN_RETURN_IF_ERROR(CheckExpr(op->min));
    KILN_RETURN_IF_ERROR(CheckExpr(op->extent));
    KILN_RETURN_IF_ERROR(CheckExpr(op->step));
    DataType t = op->loop_var.dtype();
    if (!t.is_integer() || !t.is_scalar()) {
      return Error(StrCat("loop variable '", op->loop_var.name(), "' has type ", t,
                          "; expected an integer scalar"));
    }
    for (const Expr* e : {&op->min, &op->extent, &op->step}) {
      if (e->dtype() != t) {
        return Error(StrCat(Quote(*e), " has type ", e->dtype(), "; the loop variable '",
                            op->loop_var.name(), "' has type ", t));
      }
    }
    std::optional<int64_t> step = AsConstInt(op->step);
    if (!step.has_value() || *step <= 0) {
      return Error(StrCat("loop step ", Quote(op->step), " must be a positive constant"));
    }
    // What the vectorize and unroll passes need, here where the error can
    // point at the loop.
    if (op->kind == LoopKind::kVectorized) {
      std::optional<int64_t> lanes = AsConstInt(Simplify(op->extent));
      if (!lanes.has_value() || *lanes < 2 || *lanes > 4) {
        return Error(StrCat("vectorized loop '", op->loop_var.name(), "' has extent ",
                            Quote(op->extent),
                            "; it must be a constant 2, 3 or 4 (the WGSL vector sizes)"));
      }
    }
    if (op->kind == LoopKind::kUnrolled &&
        (!AsConstInt(Simplify(op->min)) || !AsConstInt(Simplify(op->extent)))) {
      return Error(StrCat("unrolled loop '", op->loop_var.name(), "' has min ", Quote(op->min),
                          " and extent ", Quote(op->extent), "; both must be constants"));
    }
    if (op->kind == LoopKind::kUnrolled && options_.max_unrolled_extent.has_value() &&
        *AsConstInt(Simplify(op->extent)) > *options_.max_unrolled_extent) {
      return Error(StrCat("unrolled loop '", op->loop_var.name(), "' has extent ",
                          *AsConstInt(Simplify(op->extent)), ", more than the limit of ",
                          *options_.max_unrolled_extent,
                          " (unroll the inner loop of a split instead)"));
    }
    bool varying_bounds = IsThreadVarying(op->min) || IsThreadVarying(op->extent);
    if (IsThreadBinding(op->kind)) {
      KILN_RETURN_IF_ERROR(CheckLaunchLoop(op));
    }
    KILN_RETURN_IF_ERROR(DefineVar(op->loop_var));
    if (IsThreadIdx(op->kind) || varying_bounds) varying_.insert(op->loop_var.get());
    bool bound_here = IsThreadBinding(op->kind);
    if (bound_here) active_axes_.insert(op->kind);
    if (std::optional<IntRange> range = LoopRange(op, *step)) {
      loop_ranges_[op->loop_var.get()] = *range;
    }
    // (Thread-bound loops become launch indices, unrolled and vectorized
    // ones copies of their bodies: only serial loops open a block.)
    Status status = CheckBody(op->body, varying_bounds, s, op->kind == LoopKind::kSerial);
    loop_ranges_.erase(op->loop_var.get());
    if (bound_here) active_axes_.erase(op->kind);
    Undefine(op->loop_var);
    return status;
  }

  Status CheckLaunchLoop(const ForNode* op) {
    std::string_view axis = LoopKindName(op->kind);
    if (op->kind == LoopKind::kBlockZ) {
      return Error(
          "blockIdx.z is reserved by the kernel ABI (it carries the large-grid "
          "split of blockIdx.x); use blockIdx.x or blockIdx.y");
    }
    if (!IsConstInt(op->min, 0)) {
      return Error(StrCat(axis, " loop starts at ", Quote(op->min), "; expected 0"));
    }
    if (!IsConstInt(op->step, 1)) {
      return Error(StrCat(axis, " loop has step ", Quote(op->step), "; expected 1"));
    }
    if (active_axes_.count(op->kind) != 0) {
      return Error(StrCat(axis, " is bound inside a loop already bound to ", axis));
    }
    if (IsThreadIdx(op->kind)) {
      std::optional<int64_t> extent = AsConstInt(op->extent);
      if (!extent.has_value() || *extent <= 0) {
        return Error(StrCat(axis, " extent ", Quote(op->extent),
                            " must be a positive constant (it is the workgroup size)"));
      }
    } else if (!UsesOnlyScalarParams(op->extent)) {
      return Error(StrCat(axis, " extent ", Quote(op->extent),
                          " may use only constants and scalar parameters"));
    } else if (std::optional<Expr> folded = Folded(op->extent)) {
      // The runtime refuses a negative grid; a constant one can never launch.
      std::optional<int64_t> extent = AsConstInt(*folded);
      if (extent && *extent < 0) {
        return Error(StrCat(axis, " extent ", Quote(op->extent), " is ", *extent,
                            "; a launch extent may be 0 (no blocks) but never negative"));
      }
    }
    auto [it, inserted] = axis_extents_.emplace(op->kind, op->extent);
    if (!inserted && !StructurallyEqual(it->second, op->extent)) {
      return Error(StrCat(axis, " is bound with extent ", Quote(op->extent),
                          " here but with extent ", Quote(it->second), " elsewhere"));
    }
    if (inserted && IsThreadIdx(op->kind)) {
      // Saturates past the limit rather than overflowing.
      int64_t limit = options_.limits.max_invocations_per_workgroup;
      int64_t threads = 1;
      for (const auto& [kind, extent] : axis_extents_) {
        if (!IsThreadIdx(kind)) continue;
        int64_t n = *AsConstInt(extent);
        threads = n > (limit + 1) / threads ? limit + 1 : threads * n;
      }
      if (threads > limit) {
        return Error(
            StrCat("the workgroup has more than ", limit, " threads (", ThreadExtentsText(), ")"));
      }
      const uint32_t axis_limit =
          op->kind == LoopKind::kThreadX   ? options_.limits.max_workgroup_size_x
          : op->kind == LoopKind::kThreadY ? options_.limits.max_workgroup_size_y
                                           : options_.limits.max_workgroup_size_z;
      if (std::optional<int64_t> n = AsConstInt(op->extent); n && *n > axis_limit) {
        const char* name = op->kind == LoopKind::kThreadX   ? "X"
                           : op->kind == LoopKind::kThreadY ? "Y"
                                                            : "Z";
        return Error(StrCat(axis, " extent ", *n, " exceeds the target's maxComputeWorkgroupSize",
                            name, " of ", axis_limit));
      }
    }
    return Status::Ok();
  }

  // "threadIdx.x = 32, threadIdx.y = 16", in axis order.
  std::string ThreadExtentsText() const {
    std::string out;
    for (LoopKind kind : {LoopKind::kThreadX, LoopKind::kThreadY, LoopKind::kThreadZ}) {
      auto it = axis_extents_.find(kind);
      if (it == axis_extents_.end()) continue;
      if (!out.empty()) out += ", ";
      out += StrCat(LoopKindName(kind), " = ", Print(it->second));
    }
    return out;
  }

  const Function& f_;
  const VerifyOptions& options_;
  const Listing& listing_;

  const Stmt* current_ = nullptr;                 // innermost statement being checked
  std::unordered_set<const void*> in_scope_;      // vars and buffers visible now
  std::unordered_set<const void*> ever_defined_;  // every binding seen
  std::unordered_set<const VarNode*> scalar_params_;
  std::unordered_set<const VarNode*> varying_;  // vars that may differ between threads
  VarMap let_values_;                           // lets in scope, by their (small) values
  RangeMap loop_ranges_;                        // loop variables in scope with constant bounds
  std::vector<Divergence> divergence_;
  // Blocks (serial loops, while loops, ifs) around the statement checked.
  int blocks_ = 0;
  std::unordered_map<LoopKind, Expr> axis_extents_;
  std::unordered_set<LoopKind> active_axes_;
  int64_t shared_bytes_ = 0;
  bool types_only_ = false;                      // RunOnExpression
  std::unordered_set<const ExprNode*> checked_;  // its subexpressions checked so far
};

}  // namespace

std::optional<int64_t> AllocatedElements(const Buffer& b) {
  constexpr int64_t kCap = int64_t{1} << 40;
  int64_t elements = 1;
  for (const Expr& extent : b.shape()) {
    std::optional<int64_t> c = AsConstInt(extent);
    if (!c.has_value() || *c <= 0) return std::nullopt;
    elements = *c > kCap / elements ? kCap : elements * *c;
  }
  if (b.strides().empty()) return elements;
  int64_t span = 1;
  for (size_t d = 0; d < b.strides().size(); ++d) {
    std::optional<int64_t> stride = AsConstInt(b.strides()[d]);
    if (!stride.has_value() || *stride <= 0) return std::nullopt;
    const int64_t steps = *AsConstInt(b.shape()[d]) - 1;
    span = steps > (kCap - span) / *stride ? kCap : span + steps * *stride;
  }
  return std::max(elements, span);
}

int DeepestExpression(const Function& function, int cap) {
  struct Deepest : StmtVisitor {
    int cap = 0;
    int depth = 0;
    void VisitExpr(const Expr& e) override { depth = std::max(depth, ExprDepth(e, cap)); }
  } deepest;
  deepest.cap = cap;
  deepest.VisitStmt(function.body());
  return deepest.depth;
}

Status Verify(const Function& function, const VerifyOptions& options) {
  return FunctionVerifier(function, options, Listing(function, nullptr)).Run();
}

Status CheckExpressionTypes(const Expr& e) {
  const Function none("expression", {}, NoOp());
  const VerifyOptions options;
  return FunctionVerifier(none, options, Listing(none, nullptr)).RunOnExpression(e);
}

// Function by function, with the line numbers of the module's printed text
// (Print(module)), where "module {" is line 1 and a blank line separates
// functions. Nothing is printed unless there is an error to report.
Status Verify(const Module& module, const VerifyOptions& options) {
  std::unordered_set<std::string_view> names;
  for (size_t i = 0; i < module.functions.size(); ++i) {
    const Function& f = module.functions[i];
    Listing listing(f, [&module, i] {
      int lines = 1;  // "module {"
      for (size_t j = 0; j < i; ++j) {
        const std::string text = Print(module.functions[j]);
        lines += static_cast<int>(std::count(text.begin(), text.end(), '\n')) + 1;
      }
      return lines;
    });
    if (!names.insert(f.name()).second) {
      return CompileError("function '", f.name(), "', line ", listing.LineOf(nullptr),
                          ": the module already has a function of this name");
    }
    KILN_RETURN_IF_ERROR(FunctionVerifier(f, options, listing).Run());
  }
  return Status::Ok();
}

Status Verify(const Module& module, const VerifyOptions& options, const SourceMap& source) {
  LineMap lines, columns;
  for (const auto& [node, at] : source.stmts) {
    lines[node] = at.line;
    columns[node] = at.column;
  }
  std::unordered_set<std::string_view> names;
  for (size_t i = 0; i < module.functions.size(); ++i) {
    const Function& f = module.functions[i];
    const SourceLocation at = i < source.functions.size() ? source.functions[i] : SourceLocation{};
    if (!names.insert(f.name()).second) {
      return CompileError("function '", f.name(), "', line ", at.line, ", column ", at.column,
                          ": the module already has a function of this name");
    }
    Listing listing(f, source.lines, lines, columns, at);
    KILN_RETURN_IF_ERROR(FunctionVerifier(f, options, listing).Run());
  }
  return Status::Ok();
}

}  // namespace kiln::ir
