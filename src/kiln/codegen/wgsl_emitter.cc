#include "kiln/codegen/wgsl_emitter.h"

#include "kiln/codegen/wgsl_types.h"
#include "kiln/ir/expr_nodes.h"
#include "kiln/ir/expr_ops.h"
#include "kiln/ir/mutator.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/simplifier.h"
#include "kiln/ir/visitor.h"

namespace kiln::codegen {

std::string StripParens(const std::string& text) {
  if (text.size() < 2 || text.front() != '(' || text.back() != ')') return text;
  int depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '(') ++depth;
    if (text[i] == ')') --depth;
    // The first '(' closes before the end: "(a) + (b)".
    if (depth == 0 && i + 1 < text.size()) return text;
  }
  return text.substr(1, text.size() - 2);
}

std::string Enclosed(const std::string& text) {
  if (StripParens(text) != text) return text;
  int depth = 0;
  for (char c : text) {
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') --depth;
    if (c == ' ' && depth == 0) return "(" + text + ")";
  }
  return text;
}

FunctionEmitter::FunctionEmitter(NameSupply& names, WgslHelpers& helpers, LaunchNames launch)
    : names_(names), helpers_(helpers), launch_(std::move(launch)) {}

void FunctionEmitter::EmitBody(const ir::Stmt& body, int indent) {
  indent_ = indent;
  Stmt(body);
}

void FunctionEmitter::Indent() {
  deepest_ = std::max(deepest_, ++indent_);
  reusable_.clear();
}

void FunctionEmitter::Dedent() {
  --indent_;
  reusable_.clear();
}

void FunctionEmitter::Line(const std::string& text) {
  out_.append(2 * indent_, ' ');
  out_ += text;
  out_ += '\n';
}

std::string FunctionEmitter::Type(ir::DataType type) {
  StatusOr<std::string> wgsl = WgslValueType(type);
  if (!wgsl.ok()) return Fail(wgsl.status().message(), EnclosingLoop());
  if (type.is_float() && type.bits == 16) uses_f16_ = true;
  return *wgsl;
}

std::string FunctionEmitter::StorageType(ir::DataType type) {
  StatusOr<std::string> wgsl = WgslStorageType(type);
  if (!wgsl.ok()) return Fail(wgsl.status().message(), EnclosingLoop());
  if (type.is_float() && type.bits == 16) uses_f16_ = true;
  return *wgsl;
}

std::string FunctionEmitter::LetValue(const std::string& hint, ir::DataType type,
                                      const std::string& value) {
  std::string name = names_.Fresh(hint);
  Line(StrCat("let ", name, " : ", Type(type), " = ", StripParens(value), ";"));
  return name;
}

std::string FunctionEmitter::Reusable(const ir::Expr& e, const std::string& hint) {
  std::string text = Expr(e);
  bool simple = e.as<ir::VarNode>() || e.as<ir::IntImmNode>() || e.as<ir::FloatImmNode>() ||
                e.as<ir::BoolImmNode>();
  if (simple) return text;
  auto it = reusable_.find(text);
  if (it != reusable_.end()) return it->second;
  std::string name = LetValue(hint, e.dtype(), text);
  reusable_.emplace(text, name);
  return name;
}

std::string FunctionEmitter::BufferName(const ir::Buffer& buffer) {
  auto it = buffers_.find(buffer.get());
  if (it == buffers_.end()) {
    return Fail("buffer '", buffer.name(), "' is used outside its parameter or allocation");
  }
  return it->second;
}

const ir::Expr* FunctionEmitter::FlatIndex(const ir::Buffer& buffer,
                                           const std::vector<ir::Expr>& indices) {
  if (indices.size() != 1) {
    Fail("buffer '", buffer.name(), "' is accessed with ", indices.size(),
         " indices; WGSL arrays take one (run FlattenBuffers first)");
    return nullptr;
  }
  CheckConstantIndex(buffer, indices[0]);
  return &indices[0];
}

std::optional<int64_t> FunctionEmitter::ConstantValue(const ir::Expr& e) {
  if (std::optional<int64_t> c = ir::AsConstInt(e)) return c;
  if (!e.dtype().is_integer() || e.dtype().lanes != 1) return std::nullopt;
  // The variables the expression reads; a load or a call is no constant.
  struct Reads : ir::ExprVisitor {
    std::vector<const ir::VarNode*> vars;
    bool other = false;
    void VisitVar(const ir::VarNode* op) override { vars.push_back(op); }
    void VisitLoad(const ir::LoadNode*) override { other = true; }
    void VisitCall(const ir::CallNode*) override { other = true; }
    void VisitLet(const ir::LetNode*) override { other = true; }
  } reads;
  reads.VisitExpr(e);
  if (reads.other) return std::nullopt;
  ir::VarMap values;
  for (const ir::VarNode* var : reads.vars) {
    if (values.count(var)) continue;
    auto memo = constant_lets_.find(var);
    if (memo == constant_lets_.end()) {
      auto let = lets_.find(var);
      if (let == lets_.end()) return std::nullopt;  // a loop variable, a parameter
      // A placeholder first: a variable is bound once, so nothing cycles.
      constant_lets_[var] = std::nullopt;
      std::optional<int64_t> value = ConstantValue(let->second);
      memo = constant_lets_.insert_or_assign(var, value).first;
    }
    if (!memo->second) return std::nullopt;
    values.emplace(var, ir::IntConst(var->dtype, *memo->second));
  }
  return ir::AsConstInt(ir::Simplify(ir::Substitute(e, values)));
}

std::string FunctionEmitter::EnclosingLoop() const {
  if (source_ == nullptr) return "";
  for (auto it = loops_.rbegin(); it != loops_.rend(); ++it) {
    if (std::optional<ir::SourceLocation> at = ir::LoopLocation(*source_, *it)) {
      return StrCat(" (in the loop `", (*it)->name, "` at line ", at->line, ", column ", at->column,
                    ")");
    }
  }
  return "";
}

void FunctionEmitter::CheckConstantIndex(const ir::Buffer& buffer, const ir::Expr& index) {
  if (!status_.ok() || buffer.shape().size() != 1) return;
  std::optional<int64_t> first, last;
  if (const auto* ramp = index.as<ir::RampNode>()) {
    std::optional<int64_t> base = ConstantValue(ramp->base);
    std::optional<int64_t> stride = ConstantValue(ramp->stride);
    if (!base || !stride) return;
    first = *base;
    last = *base + (ramp->lanes - 1) * *stride;
    if (*first > *last) std::swap(*first, *last);
  } else if (const auto* broadcast = index.as<ir::BroadcastNode>()) {
    first = last = ConstantValue(broadcast->value);
  } else {
    first = last = ConstantValue(index);
  }
  if (!first) return;
  // A buffer parameter is a runtime-sized array, which WGSL refuses only
  // negative constant indices into (a guard may keep one past the end from
  // running); local and shared arrays have their sizes in their types.
  const std::optional<int64_t> extent =
      buffer.scope() == ir::MemoryScope::kGlobal ? std::nullopt : ir::AsConstInt(buffer.shape()[0]);
  const bool negative = *first < 0;
  if (!negative && !(extent && *last >= *extent)) return;
  const int64_t value = negative ? *first : *last;
  const std::string shown = ir::Print(index);
  status_ = InvalidArgument(
      "buffer '", buffer.name(), "' is indexed at ", value,
      shown == std::to_string(value) ? "" : StrCat(" (`", shown, "`)"), EnclosingLoop(),
      " once loops are unrolled and constants folded",
      negative ? ": an index is never negative" : StrCat(", past its ", *extent, " elements"),
      "; WGSL refuses a constant index outside its array",
      index.dtype().lanes > 1 ? " (a vectorized load reads every lane, also those a select "
                                "discards: vectorize an axis whose lanes stay inside the "
                                "buffer, or keep this one serial)"
                              : "");
}

std::vector<std::string> FunctionEmitter::LaneIndices(const ir::Expr& index) {
  std::vector<std::string> lanes;
  int n = index.dtype().lanes;
  const auto* ramp = index.as<ir::RampNode>();
  if (ramp && ir::IsConstInt(ramp->stride, 1)) {
    // Contiguous: base, base + 1, ... from one hoisted base.
    std::string base = Reusable(ramp->base, "base");
    ir::DataType type = ramp->base.dtype();
    lanes.push_back(base);
    for (int k = 1; k < n; ++k) {
      lanes.push_back(StrCat("(", base, " + ", WgslIntLiteral(k, type.is_int()), ")"));
    }
    return lanes;
  }
  std::string vector = Reusable(index, "index");
  for (int k = 0; k < n; ++k) lanes.push_back(StrCat(vector, "[", k, "]"));
  return lanes;
}

const FunctionEmitter::PackedArray* FunctionEmitter::Packed(const ir::Buffer& buffer) const {
  auto it = packed_.find(buffer.get());
  return it == packed_.end() ? nullptr : &it->second;
}

std::string FunctionEmitter::PackedAccess(const PackedArray& array, const ir::Expr& raw_index) {
  static constexpr const char* kComponents[] = {"x", "y", "z", "w"};
  const int lanes = array.packing.lanes;
  ir::Expr index = ir::Simplify(raw_index);
  const auto* ramp = index.as<ir::RampNode>();
  // The element's index (a vector's first), in elements of the IR buffer.
  ir::Expr flat = ramp ? ramp->base : index;
  if (array.packing.split_vars) {
    // Every index is a constant (ChoosePacking), so the quotient is one too.
    std::optional<LaneSplit> split = SplitByLanes(flat, lanes, &lets_);
    auto group = split ? ir::AsConstInt(split->quotient) : std::nullopt;
    if (!group || *group < 0 || *group >= static_cast<int64_t>(array.vars.size())) {
      return Fail("internal: index out of the split array '", array.name, "'");
    }
    const std::string& var = array.vars[*group];
    if (ramp || lanes == 1) return var;
    return StrCat(var, ".", kComponents[split->remainder]);
  }
  std::string name = array.name;
  if (array.packing.row_width > 0) {
    // ChooseRows proved the column within its row for every access.
    RowSplit rows = SplitByRow(flat, array.packing.row_width * lanes, &lets_);
    name = StrCat(array.name, "[", StripParens(Expr(rows.row)), "]");
    flat = rows.column;
    if (lanes == 1) return StrCat(name, "[", StripParens(Expr(flat)), "]");
  }
  // ChoosePacking admits only ramps of the packing's width at multiples of it.
  std::optional<LaneSplit> split = SplitByLanes(flat, lanes, &lets_);
  if (ramp) {
    if (!split || split->remainder != 0) {
      return Fail("internal: unaligned vector access to packed array '", array.name, "'");
    }
    return StrCat(name, "[", StripParens(Expr(split->quotient)), "]");
  }
  if (split) {
    return StrCat(name, "[", StripParens(Expr(split->quotient)), "].",
                  kComponents[split->remainder]);
  }
  std::string i = Reusable(flat, "index");
  std::string n = WgslIntLiteral(lanes, flat.dtype().is_int());
  return StrCat(name, "[", i, " / ", n, "][", i, " % ", n, "]");
}

}  // namespace kiln::codegen
