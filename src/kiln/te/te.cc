// Tensor expressions: placeholders, computes, reductions.
#include "kiln/te/te.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "kiln/ir/expr_nodes.h"
#include "kiln/ir/text_syntax.h"
#include "kiln/ir/verifier.h"
#include "kiln/ir/visitor.h"

namespace kiln::te {
namespace {

// The vars of every axis and reduction made on any thread, held weakly:
// one that another thread made is named as such where a body or shape uses
// it, rather than taken for a scalar parameter (the registries below are
// each thread's own).
class AnyThreadVars {
 public:
  static AnyThreadVars& Get() {
    static AnyThreadVars* vars = new AnyThreadVars;  // (never destroyed: threads may outlive exit)
    return *vars;
  }
  void Add(const Var& var) {
    std::lock_guard<std::mutex> lock(mu_);
    if (vars_.size() >= prune_at_) {
      std::erase_if(vars_, [](const auto& entry) { return entry.second.expired(); });
      prune_at_ = std::max<size_t>(4096, 2 * vars_.size());
    }
    vars_[var.get()] = var.node();
  }
  bool Has(const ir::VarNode* v) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = vars_.find(v);
    return it != vars_.end() && it->second.lock().get() == v;
  }

 private:
  std::mutex mu_;
  std::unordered_map<const ir::VarNode*, std::weak_ptr<const ir::ExprNode>> vars_;
  size_t prune_at_ = 4096;
};

// Reductions built by Sum/Max/Min/Prod and not yet claimed by a Compute,
// keyed by the var that stands for the result.
struct PendingReduction {
  ReducerKind kind;
  Expr source;
  std::vector<IterVar> axes;
  Var var;
  // kCustom: the whole group of values (every var of the group maps to the
  // same record).
  std::shared_ptr<OperationNode> custom;
};
std::unordered_map<const ir::VarNode*, PendingReduction>& PendingReductions() {
  thread_local std::unordered_map<const ir::VarNode*, PendingReduction> pending;
  return pending;
}

// The tensor whose storage a buffer is (so a body's loads name its inputs).
std::unordered_map<const ir::BufferNode*, std::weak_ptr<const OperationNode>>& TensorOfBuffer() {
  thread_local std::unordered_map<const ir::BufferNode*, std::weak_ptr<const OperationNode>> map;
  return map;
}

// The vars of every axis made on this thread (Compute's and ReduceAxis's),
// held weakly: a body may use only its own axes, and an axis var found
// elsewhere is a mistake to name rather than a scalar parameter to invent.
std::unordered_map<const ir::VarNode*, std::weak_ptr<const ir::ExprNode>>& AxisVars() {
  thread_local std::unordered_map<const ir::VarNode*, std::weak_ptr<const ir::ExprNode>> vars;
  return vars;
}

void RegisterAxisVar(const Var& var) {
  auto& vars = AxisVars();
  thread_local size_t prune_at = 4096;
  if (vars.size() >= prune_at) {
    // Forget the axes that no longer exist before the map grows further.
    std::erase_if(vars, [](const auto& entry) { return entry.second.expired(); });
    prune_at = std::max<size_t>(4096, 2 * vars.size());
  }
  vars[var.get()] = var.node();
  AnyThreadVars::Get().Add(var);
}

bool IsAxisVar(const ir::VarNode* v) {
  auto it = AxisVars().find(v);
  return it != AxisVars().end() && it->second.lock().get() == v;
}

// The result vars of reductions a compute has claimed, held weakly, with
// that compute's name: the value belongs to that body, and found in
// another it is a mistake to name rather than a scalar parameter.
struct ClaimedReduction {
  std::weak_ptr<const ir::ExprNode> var;
  std::string compute;
};
std::unordered_map<const ir::VarNode*, ClaimedReduction>& ClaimedReductions() {
  thread_local std::unordered_map<const ir::VarNode*, ClaimedReduction> claimed;
  return claimed;
}

void ClaimReduction(const Var& var, const std::string& compute) {
  auto& claimed = ClaimedReductions();
  thread_local size_t prune_at = 4096;
  if (claimed.size() >= prune_at) {
    std::erase_if(claimed, [](const auto& entry) { return entry.second.var.expired(); });
    prune_at = std::max<size_t>(4096, 2 * claimed.size());
  }
  claimed[var.get()] = {var.node(), compute};
}

// The compute that claimed reduction var `v`, or null.
const std::string* ClaimedBy(const ir::VarNode* v) {
  auto it = ClaimedReductions().find(v);
  if (it == ClaimedReductions().end() || it->second.var.lock().get() != v) return nullptr;
  return &it->second.compute;
}

// Whether `v` is an axis or a reduction that another thread made.
bool MadeOnAnotherThread(const ir::VarNode* v) {
  return !IsAxisVar(v) && PendingReductions().count(v) == 0 && ClaimedBy(v) == nullptr &&
         AnyThreadVars::Get().Has(v);
}

// The error for `v`, an axis or reduction of another thread, used by `what`.
Status MadeOnAnotherThreadError(std::string_view what, const ir::VarNode* v) {
  return InvalidArgument(what, " uses '", v->name,
                         "', an axis or the result of a reduction made on another thread (kiln "
                         "recognises those made on the thread that defines the compute: make a "
                         "program's placeholders, axes and computes on one thread)");
}

Expr MakeReduction(ReducerKind kind, Expr source, const std::vector<IterVar>& axes) {
  KILN_CHECK(source.defined());
  Var var(std::string(ReducerName(kind)), source.dtype());
  PendingReductions()[var.get()] = PendingReduction{kind, std::move(source), axes, var};
  AnyThreadVars::Get().Add(var);
  return var;
}

// The vars an expression uses (not those it binds) and the buffers it loads.
class UseCollector : public ir::ExprVisitor {
 public:
  void VisitVar(const ir::VarNode* op) override {
    if (seen_vars.insert(op).second) vars.push_back(op);
  }
  void VisitBuffer(const ir::Buffer& buffer) override {
    if (seen_buffers.insert(buffer.get()).second) buffers.push_back(buffer);
  }
  std::vector<const ir::VarNode*> vars;
  std::unordered_set<const ir::VarNode*> seen_vars;
  std::vector<ir::Buffer> buffers;
  std::unordered_set<const ir::BufferNode*> seen_buffers;
};

// The definition of a user-defined reduction: as many values, identities
// and combined values, each of the value's type.
Status CheckCustomReducer(const OperationNode& op) {
  const std::string at = "compute '" + op.name + "': reducer '" + op.custom_name + "'";
  const size_t n = op.reduce_sources.size();
  if (n == 0) return InvalidArgument(at, " reduces no value");
  if (op.custom_identity.size() != n || op.custom_combine.size() != n) {
    return InvalidArgument(at, " reduces ", n, " values but has ", op.custom_identity.size(),
                           " identities and combine gives ", op.custom_combine.size());
  }
  for (size_t k = 0; k < n; ++k) {
    const Expr* parts[] = {&op.reduce_sources[k], &op.custom_identity[k], &op.custom_combine[k]};
    const char* what[] = {"value", "identity", "combined value"};
    for (int j = 0; j < 3; ++j) {
      if (!parts[j]->defined()) return InvalidArgument(at, ": ", what[j], " ", k, " is undefined");
      if (parts[j]->dtype() != op.reduce_sources[k].dtype() || !parts[j]->dtype().is_scalar()) {
        return InvalidArgument(at, ": ", what[j], " ", k, " is ", parts[j]->dtype().ToString(),
                               " but value ", k, " is ", op.reduce_sources[k].dtype().ToString(),
                               " (each value is one scalar type)");
      }
    }
  }
  return Status::Ok();
}

// The most operations a compute's body may hold written out as a tree (an
// operand used twice counts twice): what lowering and code generation
// expand it to.
constexpr int64_t kMaxBodyOperations = int64_t{1} << 16;

// The operations `e` holds as a tree, counted up to just past
// kMaxBodyOperations, each shared operand measured once. `e` is at most
// ir::kMaxExprDepth deep (checked first), and so is this recursion.
int64_t TreeSize(const Expr& e, std::unordered_map<const ir::ExprNode*, int64_t>& memo) {
  if (auto it = memo.find(e.get()); it != memo.end()) return it->second;
  struct Operands : ir::ExprVisitor {
    std::unordered_map<const ir::ExprNode*, int64_t>* memo;
    int64_t total = 1;
    void VisitExpr(const Expr& c) override {
      if (c.defined()) total = std::min(total + TreeSize(c, *memo), kMaxBodyOperations + 1);
    }
  } operands;
  operands.memo = &memo;
  operands.ir::ExprVisitor::VisitExpr(e);  // e's operands, through VisitExpr
  memo[e.get()] = operands.total;
  return operands.total;
}

Status CheckTreeSize(const std::string& name, const Expr& e) {
  if (!e.defined()) return Status::Ok();
  if (ir::ExprDepth(e) > ir::kMaxExprDepth) {
    return InvalidArgument("compute '", name, "': the body nests more than ", ir::kMaxExprDepth,
                           " levels deep, the most kiln compiles");
  }
  std::unordered_map<const ir::ExprNode*, int64_t> memo;
  if (TreeSize(e, memo) <= kMaxBodyOperations) return Status::Ok();
  return InvalidArgument("compute '", name, "': the body holds more than ", kMaxBodyOperations,
                         " operations written out (an expression used twice counts twice); "
                         "compute a value used many times as a stage of its own");
}

// Loads whose index is a constant outside a constant extent of the tensor
// read (WebGPU's robust access would quietly read something else).
class ConstantIndexChecker : public ir::ExprVisitor {
 public:
  void VisitLoad(const ir::LoadNode* op) override {
    ir::ExprVisitor::VisitLoad(op);
    const std::vector<Expr>& shape = op->buffer.shape();
    for (size_t d = 0; d < op->indices.size() && d < shape.size() && error.empty(); ++d) {
      const std::optional<int64_t> index = ir::AsConstInt(op->indices[d]);
      const std::optional<int64_t> extent = ir::AsConstInt(shape[d]);
      if (!index.has_value() || !(*index < 0 || (extent.has_value() && *index >= *extent))) {
        continue;
      }
      error = StrCat("reads `", op->buffer.name(), "` at index ", *index, " of dimension ", d,
                     *index < 0 ? ", below 0" : StrCat(", outside its extent ", *extent));
    }
  }
  std::string error;
};

// The body's types and constant indices, so that a mistake is reported
// naming the compute rather than from the lowered kernel.
Status CheckBody(const OperationNode& op) {
  std::vector<const Expr*> parts = {&op.body};
  if (op.has_reduction && op.reducer != ReducerKind::kCustom) parts.push_back(&op.reduce_source);
  for (const auto* list : {&op.reduce_sources, &op.custom_identity, &op.custom_combine}) {
    for (const Expr& e : *list) parts.push_back(&e);
  }
  for (const Expr* e : parts) {
    if (!e->defined()) continue;
    const Status typed = ir::CheckExpressionTypes(*e);
    if (!typed.ok()) return InvalidArgument("compute '", op.name, "': ", typed.message());
    ConstantIndexChecker indices;
    indices.VisitExpr(*e);
    if (!indices.error.empty()) return InvalidArgument("compute '", op.name, "' ", indices.error);
  }
  return Status::Ok();
}

// A name that a schedule's text can hold on one line and read back: no
// white space at either end, no control characters.
Status CheckName(const std::string& what, const std::string& name) {
  auto control = [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; };
  if (std::any_of(name.begin(), name.end(), control) ||
      (!name.empty() && (name.front() == ' ' || name.back() == ' '))) {
    return InvalidArgument(what, " is named ", ir::QuoteString(name),
                           ": a name may not begin or end with a space or hold control "
                           "characters, which a schedule's text could not read back");
  }
  return Status::Ok();
}

// A shape's dimensions take constants and size vars: no axis or reduction.
Status CheckShape(const std::string& what, const std::vector<Expr>& shape) {
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!shape[d].defined()) continue;
    UseCollector uses;
    uses.VisitExpr(shape[d]);
    for (const ir::VarNode* v : uses.vars) {
      const char* kind = IsAxisVar(v) ? "axis"
                         : PendingReductions().count(v) != 0 || ClaimedBy(v) != nullptr
                             ? "the result of a reduction"
                             : nullptr;
      if (kind != nullptr) {
        return InvalidArgument(what, ": dimension ", d, " uses ", kind, " '", v->name,
                               "'; a shape takes constants and size vars");
      }
      if (MadeOnAnotherThread(v)) {
        return MadeOnAnotherThreadError(StrCat(what, ": dimension ", d), v);
      }
    }
    if (!uses.buffers.empty()) {
      return InvalidArgument(what, ": dimension ", d, " reads tensor '", uses.buffers[0].name(),
                             "'; a shape takes constants and size vars");
    }
  }
  return Status::Ok();
}

std::shared_ptr<OperationNode> NewOp(const std::string& name, std::vector<Expr> shape,
                                     ir::DataType dtype) {
  auto op = std::make_shared<OperationNode>();
  op->name = name;
  op->buffer = ir::Buffer(name, dtype, std::move(shape));
  return op;
}

void Register(const std::shared_ptr<const OperationNode>& op) {
  TensorOfBuffer()[op->buffer.get()] = op;
}

}  // namespace

Var SizeVar(const std::string& name) {
  return Var(name, ir::kI32);
}

IterVar ReduceAxis(Expr extent, const std::string& name) {
  auto node = std::make_shared<IterVarNode>();
  node->var = Var(name, ir::kI32);
  RegisterAxisVar(node->var);
  node->extent = std::move(extent);
  node->is_reduce = true;
  node->name = name;
  return IterVar(std::move(node));
}

Expr Sum(Expr source, const std::vector<IterVar>& axes) {
  return MakeReduction(ReducerKind::kSum, std::move(source), axes);
}
Expr Prod(Expr source, const std::vector<IterVar>& axes) {
  return MakeReduction(ReducerKind::kProd, std::move(source), axes);
}
Expr Max(Expr source, const std::vector<IterVar>& axes) {
  return MakeReduction(ReducerKind::kMax, std::move(source), axes);
}
Expr Min(Expr source, const std::vector<IterVar>& axes) {
  return MakeReduction(ReducerKind::kMin, std::move(source), axes);
}
Expr DeviceMax(Expr source, const std::vector<IterVar>& axes) {
  return MakeReduction(ReducerKind::kDeviceMax, std::move(source), axes);
}
Expr DeviceMin(Expr source, const std::vector<IterVar>& axes) {
  return MakeReduction(ReducerKind::kDeviceMin, std::move(source), axes);
}

Expr Sum(Expr source, std::initializer_list<IterVar> axes) {
  return MakeReduction(ReducerKind::kSum, std::move(source), axes);
}
Expr Prod(Expr source, std::initializer_list<IterVar> axes) {
  return MakeReduction(ReducerKind::kProd, std::move(source), axes);
}
Expr Max(Expr source, std::initializer_list<IterVar> axes) {
  return MakeReduction(ReducerKind::kMax, std::move(source), axes);
}
Expr Min(Expr source, std::initializer_list<IterVar> axes) {
  return MakeReduction(ReducerKind::kMin, std::move(source), axes);
}
Expr DeviceMax(Expr source, std::initializer_list<IterVar> axes) {
  return MakeReduction(ReducerKind::kDeviceMax, std::move(source), axes);
}
Expr DeviceMin(Expr source, std::initializer_list<IterVar> axes) {
  return MakeReduction(ReducerKind::kDeviceMin, std::move(source), axes);
}

std::vector<Expr> Reduce(const CommReducer& reducer, const std::vector<Expr>& sources,
                         const std::vector<IterVar>& axes) {
  // The definition is checked by Compute, which reports through the
  // schedule; here it is only recorded.
  auto group = std::make_shared<OperationNode>();
  group->custom_name = reducer.name;
  group->reduce_sources = sources;
  group->custom_identity = reducer.identity;
  std::vector<Expr> acc, next, out;
  for (size_t k = 0; k < sources.size(); ++k) {
    const ir::DataType t = sources[k].defined() ? sources[k].dtype() : ir::kF32;
    group->custom_acc.emplace_back("acc" + std::to_string(k), t);
    group->custom_next.emplace_back("next" + std::to_string(k), t);
    group->reduce_vars.emplace_back(reducer.name + std::to_string(k), t);
    acc.push_back(group->custom_acc.back());
    next.push_back(group->custom_next.back());
    out.push_back(group->reduce_vars.back());
  }
  if (reducer.combine) group->custom_combine = reducer.combine(acc, next);
  for (const Var& v : group->reduce_vars) {
    PendingReductions()[v.get()] = PendingReduction{
        ReducerKind::kCustom, sources.empty() ? Expr() : sources[0], axes, v, group};
    AnyThreadVars::Get().Add(v);
  }
  return out;
}

std::string_view ReducerName(ReducerKind kind) {
  switch (kind) {
    case ReducerKind::kSum:
      return "sum";
    case ReducerKind::kProd:
      return "prod";
    case ReducerKind::kMax:
      return "max";
    case ReducerKind::kMin:
      return "min";
    case ReducerKind::kDeviceMax:
      return "device_max";
    case ReducerKind::kDeviceMin:
      return "device_min";
    case ReducerKind::kCustom:
      return "custom";
  }
  return "?";
}

Expr ReducerIdentity(ReducerKind kind, ir::DataType dtype) {
  const bool is_float = dtype.is_float();
  switch (kind) {
    case ReducerKind::kSum:
      return is_float ? ir::FloatConst(dtype, 0.0) : ir::IntConst(dtype, 0);
    case ReducerKind::kProd:
      return is_float ? ir::FloatConst(dtype, 1.0) : ir::IntConst(dtype, 1);
    case ReducerKind::kMax:
    case ReducerKind::kMin:
    case ReducerKind::kDeviceMax:
    case ReducerKind::kDeviceMin: {
      const bool max = kind == ReducerKind::kMax || kind == ReducerKind::kDeviceMax;
      if (is_float) {
        const double inf = std::numeric_limits<double>::infinity();
        return ir::FloatConst(dtype, max ? -inf : inf);
      }
      const int bits = dtype.bits;
      if (dtype.is_uint()) {
        // The highest unsigned value, as the int64 whose low bits it is.
        const int64_t highest = bits >= 64 ? -1 : static_cast<int64_t>((uint64_t{1} << bits) - 1);
        return ir::IntConst(dtype, max ? 0 : highest);
      }
      const int64_t highest =
          bits >= 64 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << (bits - 1)) - 1;
      return ir::IntConst(dtype, max ? -highest - 1 : highest);
    }
    case ReducerKind::kCustom:
      break;
  }
  KILN_CHECK_MSG(false, "a user-defined reducer has identities of its own");
  return Expr();
}

Expr ReducerCombine(ReducerKind kind, const Expr& acc, const Expr& value, bool multiply_add) {
  switch (kind) {
    case ReducerKind::kSum:
      if (const auto* mul = value.as<ir::BinaryNode>(); multiply_add && mul != nullptr &&
                                                        mul->op == ir::BinaryOp::kMul &&
                                                        value.dtype().is_float()) {
        return ir::Call(ir::Intrinsic::kFma, {mul->a, mul->b, acc});
      }
      return acc + value;
    case ReducerKind::kProd:
      return acc * value;
    case ReducerKind::kMax:
    case ReducerKind::kMin: {
      const bool max = kind == ReducerKind::kMax;
      if (!value.dtype().is_float()) return max ? ir::Max(acc, value) : ir::Min(acc, value);
      // NaN propagates: `value` wins where it is NaN or strictly better, so
      // a NaN accumulator stays (ir's min/max leave NaN to the device).
      const Expr better = max ? value > acc : value < acc;
      return ir::Select(better || value != value,  // NOLINT(misc-redundant-expression): NaN test
                        value, acc);
    }
    case ReducerKind::kDeviceMax:
      return ir::Max(acc, value);
    case ReducerKind::kDeviceMin:
      return ir::Min(acc, value);
    case ReducerKind::kCustom:
      break;
  }
  KILN_CHECK_MSG(false, "a user-defined reducer combines with its own expressions");
  return Expr();
}

Expr Tensor::operator()(std::vector<Expr> indices) const {
  KILN_CHECK(defined());
  return ir::Load(op_->buffer, std::move(indices));
}

Tensor Placeholder(const std::string& name, std::vector<Expr> shape, ir::DataType dtype) {
  auto op = NewOp(name, std::move(shape), dtype);
  op->is_placeholder = true;
  op->error = CheckName("a placeholder", name);
  if (op->error.ok()) op->error = CheckShape("placeholder '" + name + "'", op->buffer.shape());
  Register(op);
  return Tensor(op);
}

// The end of a refusal of a custom reducer's combine function or identity.
constexpr std::string_view kOnlyCombinedValues =
    "' in its combine function or identity, which may use only the values they combine (acc "
    "and next), constants and size vars";

Tensor Compute(const std::string& name, std::vector<Expr> shape, const ComputeFn& fcompute,
               std::vector<std::string> axis_names) {
  const int rank = static_cast<int>(shape.size());
  std::vector<IterVar> axis;
  std::vector<Var> vars;
  std::unordered_set<std::string> names;
  for (int d = 0; d < rank; ++d) {
    std::string axis_name;
    if (d < static_cast<int>(axis_names.size())) {
      axis_name = axis_names[d];
    } else if (rank <= 2) {
      axis_name = d == 0 ? "i" : "j";
    } else {
      axis_name = "i" + std::to_string(d);
    }
    auto node = std::make_shared<IterVarNode>();
    node->var = Var(axis_name, ir::kI32);
    RegisterAxisVar(node->var);
    node->extent = shape[d];
    node->name = axis_name;
    names.insert(axis_name);
    vars.push_back(node->var);
    axis.emplace_back(std::move(node));
  }
  Status error;
  Expr body = fcompute(vars);
  // Guess the type for a body that failed; the error is what matters then.
  const ir::DataType dtype = body.defined() ? body.dtype() : ir::kF32;
  auto op = NewOp(name, shape, dtype);
  op->is_placeholder = false;
  op->axis = axis;
  op->body = body;
  if (!body.defined()) {
    error = InvalidArgument("compute '", name, "': the body is undefined");
  } else if (names.size() != axis.size()) {
    error = InvalidArgument("compute '", name, "': two axes share a name");
  } else if (!axis_names.empty() && axis_names.size() != axis.size()) {
    error = InvalidArgument("compute '", name, "': ", axis_names.size(), " axis names for ",
                            axis.size(), " axes");
  } else if (ir::ExprDepth(body) > ir::kMaxExprDepth) {
    // Before anything recursive looks at it.
    error = InvalidArgument("compute '", name, "': the body nests more than ", ir::kMaxExprDepth,
                            " levels deep, the most kiln compiles");
  } else {
    error = CheckName("a compute", name);
    for (size_t d = 0; d < axis.size() && error.ok(); ++d) {
      error = CheckName(StrCat("compute '", name, "': axis ", d), axis[d].name());
    }
    if (error.ok()) error = CheckShape("compute '" + name + "'", shape);
    if (error.ok()) error = CheckTreeSize(name, body);
  }

  // Claim the reduction the body uses, if any.
  if (error.ok()) {
    UseCollector uses;
    uses.VisitExpr(body);
    auto& pending = PendingReductions();
    for (const ir::VarNode* v : uses.vars) {
      auto it = pending.find(v);
      if (it == pending.end()) {
        const bool same_group = std::any_of(op->reduce_vars.begin(), op->reduce_vars.end(),
                                            [&](const Var& r) { return r.get() == v; });
        if (same_group) continue;  // another value of this body's tuple reduction
        if (const std::string* owner = ClaimedBy(v)) {
          error = InvalidArgument("compute '", name, "': uses the reduction '", v->name,
                                  "' that compute '", *owner,
                                  "' holds (a reduction belongs to the body that uses it "
                                  "first); read ",
                                  *owner, "'s elements instead, or make the reduction again");
          break;
        }
        continue;
      }
      if (op->has_reduction) {
        error = InvalidArgument("compute '", name,
                                "': more than one reduction in one body (this version allows one)");
        break;
      }
      op->has_reduction = true;
      op->reducer = it->second.kind;
      op->reduce_source = it->second.source;
      op->reduce_var = it->second.var;
      if (const std::shared_ptr<OperationNode> group = it->second.custom) {
        op->custom_name = group->custom_name;
        op->reduce_sources = group->reduce_sources;
        op->reduce_vars = group->reduce_vars;
        op->reduce_var = group->reduce_vars[0];
        op->custom_acc = group->custom_acc;
        op->custom_next = group->custom_next;
        op->custom_combine = group->custom_combine;
        op->custom_identity = group->custom_identity;
        for (const Var& v : group->reduce_vars) {
          if (!v.same_as(it->second.var)) pending.erase(v.get());
        }
        error = CheckCustomReducer(*op);
      }
      for (size_t a = 0; a < it->second.axes.size(); ++a) {
        if (error.ok()) {
          error = CheckName(StrCat("compute '", name, "': reduction axis ", a),
                            it->second.axes[a].name());
        }
        for (size_t b = 0; b < a; ++b) {
          if (it->second.axes[a].var().same_as(it->second.axes[b].var()) && error.ok()) {
            error =
                InvalidArgument("compute '", name, "': reduction axis '", it->second.axes[a].name(),
                                "' is listed twice in its ", ReducerName(it->second.kind));
          }
        }
      }
      if (op->custom_name.empty()) {
        ClaimReduction(it->second.var, name);
      } else {
        for (const Var& r : op->reduce_vars) ClaimReduction(r, name);
      }
      for (const IterVar& r : it->second.axes) {
        // A per-stage copy of the axis keeps the var (the identity the
        // source uses) under a name unique within the stage.
        auto node = std::make_shared<IterVarNode>(*r.get());
        while (!names.insert(node->name).second) node->name += "_r";
        op->reduce_axis.emplace_back(std::move(node));
      }
      pending.erase(it);
    }
  }
  if (error.ok() && op->has_reduction && op->reducer != ReducerKind::kCustom) {
    if (!op->reduce_source.dtype().is_numeric() || !op->reduce_source.dtype().is_scalar()) {
      error = InvalidArgument("compute '", name, "': ", ReducerName(op->reducer),
                              " needs a numeric scalar source, not ",
                              op->reduce_source.dtype().ToString());
    }
  }
  if (error.ok() && op->has_reduction) error = CheckTreeSize(name, op->reduce_source);
  for (const Expr& e : op->reduce_sources) {
    if (error.ok()) error = CheckTreeSize(name, e);
  }
  if (error.ok() && op->has_reduction) {
    UseCollector in_source;
    in_source.VisitExpr(op->reduce_source);
    for (const Expr& e : op->reduce_sources) in_source.VisitExpr(e);
    for (const ir::VarNode* v : in_source.vars) {
      if (PendingReductions().count(v) != 0) {
        error = InvalidArgument("compute '", name, "': a reduction inside a reduction");
      }
    }
  }
  // Reduction axes appear only inside the reduction's source.
  if (error.ok()) {
    UseCollector outside;
    outside.VisitExpr(body);
    for (const ir::VarNode* v : outside.vars) {
      if (v->dtype == ir::kI32 && !v->name.empty()) {
        bool reduce_axis_of_other = false;
        for (const IterVar& r : op->reduce_axis) {
          if (r.var().get() == v) reduce_axis_of_other = true;
        }
        if (reduce_axis_of_other) {
          error = InvalidArgument("compute '", name, "': reduction axis '", v->name,
                                  "' is used outside its reduction");
        }
      }
    }
  }

  // Every axis the definition uses is its own: one of its axes, or one of
  // the axes its reduction takes. No reduction hides in a reducer's
  // combine function or identity.
  if (error.ok()) {
    std::unordered_set<const ir::VarNode*> own;
    for (const IterVar& a : op->axis) own.insert(a.var().get());
    for (const IterVar& r : op->reduce_axis) own.insert(r.var().get());
    UseCollector all;
    all.VisitExpr(body);
    if (op->has_reduction) all.VisitExpr(op->reduce_source);
    for (const Expr& e : op->reduce_sources) all.VisitExpr(e);
    for (const IterVar& r : op->reduce_axis) {  // (an axis of another thread's program)
      if (error.ok() && MadeOnAnotherThread(r.var().get())) {
        error = MadeOnAnotherThreadError(StrCat("compute '", name, "'"), r.var().get());
      }
    }
    for (const ir::VarNode* v : all.vars) {
      if (!error.ok()) break;
      if (own.count(v) == 0 && IsAxisVar(v)) {
        error = InvalidArgument("compute '", name, "': axis '", v->name,
                                "' is neither an axis of '", name,
                                "' nor one its reduction takes (an axis of another compute, or "
                                "a reduction axis that no reduction in this body reduces over)");
        break;
      }
      if (own.count(v) == 0 && MadeOnAnotherThread(v)) {
        error = MadeOnAnotherThreadError(StrCat("compute '", name, "'"), v);
        break;
      }
    }
    UseCollector reducer;
    for (const Expr& e : op->custom_combine) reducer.VisitExpr(e);
    for (const Expr& e : op->custom_identity) reducer.VisitExpr(e);
    for (const ir::VarNode* v : reducer.vars) {
      if (error.ok() && PendingReductions().count(v) != 0) {
        error = InvalidArgument("compute '", name, "': reducer '", op->custom_name,
                                "' has a reduction inside its combine function or identity");
      }
      // The combine function and the identity see only the values they
      // combine (an axis has no one value where partial results combine
      // across threads).
      if (error.ok() && IsAxisVar(v)) {
        error = InvalidArgument("compute '", name, "': reducer '", op->custom_name, "' uses axis '",
                                v->name, kOnlyCombinedValues);
      }
    }
    // Nor a tensor: each thread's partial result starts from the identity,
    // so a value read there would count once per partial.
    if (error.ok() && !reducer.buffers.empty()) {
      error = InvalidArgument("compute '", name, "': reducer '", op->custom_name,
                              "' reads tensor '", reducer.buffers[0].name(), kOnlyCombinedValues);
    }
  }

  // The tensors the body reads.
  if (error.ok()) {
    UseCollector reads;
    reads.VisitExpr(body);
    if (op->has_reduction) reads.VisitExpr(op->reduce_source);
    for (const Expr& e : op->reduce_sources) reads.VisitExpr(e);
    for (const ir::Buffer& b : reads.buffers) {
      auto it = TensorOfBuffer().find(b.get());
      std::shared_ptr<const OperationNode> input;
      if (it != TensorOfBuffer().end()) input = it->second.lock();
      if (it != TensorOfBuffer().end() && input == nullptr) {
        error = InvalidArgument("compute '", name, "' reads tensor '", b.name(),
                                "', which no longer exists: keep the tensor (what placeholder or "
                                "compute returned) while expressions that read it are in use");
        break;
      }
      if (input == nullptr) {
        error = InvalidArgument("compute '", name, "' reads buffer '", b.name(),
                                "', which is not a tensor made on this thread (tensors, like "
                                "axes, belong to the thread that made them)");
        break;
      }
      op->inputs.emplace_back(input);
    }
  }
  if (error.ok()) error = CheckBody(*op);
  op->error = error;
  Register(op);
  return Tensor(op);
}

}  // namespace kiln::te
