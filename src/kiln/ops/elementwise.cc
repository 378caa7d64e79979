// Elementwise operators and fused elementwise chains.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kiln/ir/expr_ops.h"
#include "kiln/ops/internal.h"
#include "kiln/ops/ops.h"
#include "kiln/te/te.h"

namespace kiln::ops {
namespace {

using internal::BroadcastIndex;
using internal::Extents;

Status CheckSameDtype(const TensorType& first, std::string_view first_name, const TensorType& other,
                      std::string_view other_name, std::string_view where) {
  if (first.dtype != other.dtype) {
    return InvalidArgument(where, ": dtype mismatch: ", first_name, " is ", first.dtype.ToString(),
                           " but ", other_name, " is ", other.dtype.ToString());
  }
  return Status::Ok();
}

StatusOr<ir::Function> LowerFlat(te::Schedule& schedule, const te::Tensor& out,
                                 const std::vector<te::Tensor>& inputs, const Shape& out_shape,
                                 const Target& target, const std::string& name) {
  KILN_RETURN_IF_ERROR(internal::ScheduleFlat(schedule, out, static_cast<int>(out_shape.size()),
                                              NumElements(out_shape), target));
  return te::Lower(schedule, {out}, inputs, name, target.limits);
}

// "unknown elementwise op" naming every op a chain step or fused node takes.
Status UnknownStepOp(std::string_view op) {
  std::vector<std::string_view> known = internal::ElementwiseOpNames();
  known.emplace_back("where");
  known.emplace_back("cast");
  return internal::UnknownOp("elementwise", op, known);
}

// What a chain step does with the running value, and with how many
// operands.
enum class StepKind { kUnary, kBinary, kTernary, kWhere, kCast };

// A chain step, checked: its kind, and the dtypes of its operands and of
// the running value after it.
struct CheckedStep {
  StepKind kind = StepKind::kUnary;
  ir::DataType operand, out;
};

std::string_view OperandName(int which) {
  return which == 0 ? "B" : "C";
}

// Checks operand `which` (0: the first; 1: a ternary step's second) of
// step `k`, which must be `dtype`, that of `what` ("the running value", or
// a where's operands), and widens `shape` by a tensor operand.
Status CheckChainOperand(const std::optional<TensorType>& tensor,
                         const std::optional<double>& constant, int which, size_t k,
                         ir::DataType dtype, std::string_view what, const std::string& where,
                         const Target& target, Shape* shape, int* tensors) {
  const std::string name = StrCat(OperandName(which), k + 1);
  if (tensor.has_value() == constant.has_value()) {
    return InvalidArgument(where, ": operand ", name, " must be exactly one of a tensor or a ",
                           "constant (the step takes ", which == 0 ? "exactly one operand" : "two",
                           which == 0 ? "" : " operands", "); it is ", tensor ? "both" : "neither");
  }
  if (constant) {
    if (internal::IsIntegerData(dtype) && !internal::IsIntegerValue(*constant, dtype)) {
      return InvalidArgument(where, ": the constant ", internal::NumberText(*constant), " is not ",
                             internal::Article(dtype), dtype.ToString(), " (", what, " is ",
                             dtype.ToString(), ")");
    }
    return Status::Ok();
  }
  KILN_RETURN_IF_ERROR(
      internal::CheckData(*tensor, target, StrCat("operand ", name, " of ", where)));
  if (tensor->dtype != dtype) {
    return InvalidArgument(where, ": dtype mismatch: ", what, " is ", dtype.ToString(), " but ",
                           name, " is ", tensor->dtype.ToString());
  }
  StatusOr<Shape> broadcast = BroadcastShapes(*shape, tensor->shape);
  if (!broadcast.ok()) return broadcast.status().WithContext(where);
  *shape = *broadcast;
  ++*tensors;
  return Status::Ok();
}

// Checks step `k` of a chain whose running value is `dtype` and input
// `input`.
StatusOr<CheckedStep> CheckChainStep(const ChainStep& step, size_t k, ir::DataType dtype,
                                     ir::DataType input, const Target& target, Shape* shape,
                                     int* tensors) {
  const std::string where = StrCat("step ", k + 1, " (", step.op, ") of the chain");
  CheckedStep c;
  c.operand = c.out = dtype;
  const bool ternary = internal::IsTernary(step.op), is_where = step.op == "where";
  if (step.op == "cast") {
    c.kind = StepKind::kCast;
  } else if (internal::IsUnary(step.op)) {
    c.kind = StepKind::kUnary;
  } else if (internal::IsBinary(step.op) || internal::IsCompare(step.op)) {
    c.kind = StepKind::kBinary;
  } else if (ternary || is_where) {
    c.kind = is_where ? StepKind::kWhere : StepKind::kTernary;
  } else {
    return UnknownStepOp(step.op).WithContext(where);
  }
  const int operands = c.kind == StepKind::kUnary || c.kind == StepKind::kCast ? 0
                       : c.kind == StepKind::kBinary                           ? 1
                                                                               : 2;
  const bool has_first = step.tensor || step.constant,
             has_second = step.second_tensor || step.second_constant;
  if ((operands == 0 && (has_first || has_second)) || (operands == 1 && has_second)) {
    return InvalidArgument(where, ": ", c.kind == StepKind::kCast ? "a cast" : "the op", " takes ",
                           operands == 0 ? "no operand" : "one operand");
  }
  if (step.cast_to && c.kind != StepKind::kCast) {
    return InvalidArgument(where, ": only a cast step takes a dtype");
  }
  if (step.operand_first && operands != 1) {
    return InvalidArgument(where, ": operand_first applies to a binary step only");
  }
  if (c.kind == StepKind::kCast) {
    if (!step.cast_to) return InvalidArgument(where, ": a cast step needs a dtype");
    KILN_RETURN_IF_ERROR(
        internal::CheckData({*shape, *step.cast_to}, target, StrCat("the type of ", where)));
    c.out = *step.cast_to;
    return c;
  }
  if (c.kind != StepKind::kWhere) {
    KILN_RETURN_IF_ERROR(
        internal::CheckOpDtype(step.op, dtype, StrCat(where, ": the running value")));
  } else {
    // The operands' dtype: a tensor operand's, else the chain input's.
    c.operand = step.tensor          ? step.tensor->dtype
                : step.second_tensor ? step.second_tensor->dtype
                                     : input;
  }
  const std::string_view what =
      c.kind == StepKind::kWhere
          ? (step.tensor || step.second_tensor ? "the other operand" : "the chain's input")
          : "the running value";
  if (operands >= 1) {
    KILN_RETURN_IF_ERROR(CheckChainOperand(step.tensor, step.constant, 0, k, c.operand, what, where,
                                           target, shape, tensors));
  }
  if (operands == 2) {
    KILN_RETURN_IF_ERROR(CheckChainOperand(step.second_tensor, step.second_constant, 1, k,
                                           c.operand, what, where, target, shape, tensors));
  }
  if (internal::GivesBool(step.op)) c.out = ir::kI32;
  if (c.kind == StepKind::kWhere) c.out = c.operand;
  return c;
}

}  // namespace

StatusOr<ir::Function> Elementwise(std::string_view op, const std::vector<TensorType>& inputs,
                                   const Target& target, std::string name) {
  if (name.empty()) name = StrCat("elementwise_", op);
  const bool unary = internal::IsUnary(op), binary = internal::IsBinary(op),
             compare = internal::IsCompare(op), ternary = internal::IsTernary(op);
  if (!unary && !binary && !compare && !ternary) {
    return internal::UnknownOp("elementwise", op, internal::ElementwiseOpNames());
  }
  const size_t arity = unary ? 1 : ternary ? 3 : 2;
  if (inputs.size() != arity) {
    return InvalidArgument(op, " takes ", arity, " input", arity == 1 ? "" : "s", ", not ",
                           inputs.size());
  }
  // Parameter names: the inputs', then the output's.
  std::vector<std::string> names = unary           ? std::vector<std::string>{"X", "Y"}
                                   : !ternary      ? std::vector<std::string>{"A", "B", "C"}
                                   : op == "clamp" ? std::vector<std::string>{"X", "Lo", "Hi", "Y"}
                                                   : std::vector<std::string>{"A", "B", "C", "Y"};
  for (size_t k = 0; k < arity; ++k) {
    const std::string what = StrCat("input ", names[k], " of ", op);
    KILN_RETURN_IF_ERROR(internal::CheckData(inputs[k], target, what));
    if (k > 0) KILN_RETURN_IF_ERROR(CheckSameDtype(inputs[0], names[0], inputs[k], names[k], op));
    KILN_RETURN_IF_ERROR(internal::CheckOpDtype(op, inputs[k].dtype, what));
  }
  Shape out_shape = inputs[0].shape;
  for (size_t k = 1; k < arity; ++k) {
    StatusOr<Shape> broadcast = BroadcastShapes(out_shape, inputs[k].shape);
    if (!broadcast.ok()) {
      // A binary op's error names the op; a ternary op's the input too.
      return broadcast.status().WithContext(arity == 2 ? std::string(op)
                                                       : StrCat(op, ": input ", names[k]));
    }
    out_shape = *broadcast;
  }
  std::vector<te::Tensor> placeholders;
  for (size_t k = 0; k < arity; ++k) {
    placeholders.push_back(te::Placeholder(names[k], Extents(inputs[k].shape), inputs[k].dtype));
  }
  te::Tensor out =
      te::Compute(names[arity], Extents(out_shape), [&](const std::vector<ir::Var>& i) {
        std::vector<ir::Expr> v;
        for (size_t k = 0; k < arity; ++k) {
          v.push_back(placeholders[k](BroadcastIndex(inputs[k].shape, out_shape, i)));
        }
        if (unary) return internal::ApplyUnary(op, v[0]);
        if (binary) return internal::ApplyBinary(op, v[0], v[1]);
        if (compare) return internal::ApplyCompare(op, v[0], v[1]);
        return internal::ApplyTernary(op, v[0], v[1], v[2]);
      });
  KILN_ASSIGN_OR_RETURN(te::Schedule s, te::Schedule::Create({out}));
  return LowerFlat(s, out, placeholders, out_shape, target, name);
}

StatusOr<ir::Function> ElementwiseChain(const TensorType& input,
                                        const std::vector<ChainStep>& steps, const Target& target,
                                        const std::string& name) {
  KILN_RETURN_IF_ERROR(internal::CheckData(input, target, "input X of the chain"));
  if (steps.empty()) return InvalidArgument("an elementwise chain needs at least one step");
  // Check every step and find the output shape and each step's dtypes
  // before building anything.
  Shape shape = input.shape;
  int tensor_operands = 0;
  std::vector<CheckedStep> checked;
  ir::DataType dtype = input.dtype;
  for (size_t k = 0; k < steps.size(); ++k) {
    KILN_ASSIGN_OR_RETURN(CheckedStep c, CheckChainStep(steps[k], k, dtype, input.dtype, target,
                                                        &shape, &tensor_operands));
    checked.push_back(c);
    dtype = c.out;
  }
  const int buffers = tensor_operands + 2;
  if (buffers > static_cast<int>(target.limits.max_storage_buffers_per_stage)) {
    return InvalidArgument("the chain uses ", buffers, " storage buffers (X, ", tensor_operands,
                           " operands, Y); the target allows ",
                           target.limits.max_storage_buffers_per_stage, " per stage");
  }

  te::Tensor X = te::Placeholder("X", Extents(input.shape), input.dtype);
  std::vector<te::Tensor> inputs = {X};
  std::vector<te::Tensor> stages;
  te::Tensor value = X;
  Shape value_shape = input.shape;
  // The steps as one expression, as inlining makes them (the running value
  // in place of each step's load of it), measured after each step: deeper
  // than the compiler goes, less room for the loads' index arithmetic that
  // lowering adds, is refused before anything recursive sees it.
  std::vector<ir::Var> at;
  ir::Expr inlined;
  for (size_t k = 0; k < steps.size(); ++k) {
    const ChainStep& step = steps[k];
    const CheckedStep& c = checked[k];
    const bool last = k + 1 == steps.size();
    Shape step_shape = value_shape;
    // The step's operands: a placeholder for each tensor, else empty.
    const std::optional<TensorType>* tensors[2] = {&step.tensor, &step.second_tensor};
    te::Tensor operand[2];
    for (int w = 0; w < 2; ++w) {
      if (!tensors[w]->has_value()) continue;
      const TensorType& t = **tensors[w];
      operand[w] = te::Placeholder(StrCat(OperandName(w), k + 1), Extents(t.shape), c.operand);
      inputs.push_back(operand[w]);
      step_shape = *BroadcastShapes(step_shape, t.shape);
    }
    const std::optional<double> constants[2] = {step.constant, step.second_constant};
    const te::Tensor prev = value;
    const Shape prev_shape = value_shape;
    // The step's value from the running value v at index i.
    auto apply = [&](const ir::Expr& v, const std::vector<ir::Var>& i) -> ir::Expr {
      auto other = [&](int w) -> ir::Expr {
        if (tensors[w]->has_value()) {
          return operand[w](BroadcastIndex((*tensors[w])->shape, step_shape, i));
        }
        return internal::Constant(c.operand, *constants[w]);
      };
      switch (c.kind) {
        case StepKind::kUnary:
          return internal::ApplyUnary(step.op, v);
        case StepKind::kCast:
          return internal::ApplyCast(v, c.out);
        case StepKind::kWhere:
          return internal::ApplyWhere(v, other(0), other(1));
        case StepKind::kTernary:
          return internal::ApplyTernary(step.op, v, other(0), other(1));
        case StepKind::kBinary:
          break;
      }
      const ir::Expr b = other(0);
      const ir::Expr& lhs = step.operand_first ? b : v;
      const ir::Expr& rhs = step.operand_first ? v : b;
      return internal::IsCompare(step.op) ? internal::ApplyCompare(step.op, lhs, rhs)
                                          : internal::ApplyBinary(step.op, lhs, rhs);
    };
    value = te::Compute(last ? "Y" : StrCat("T", k + 1), Extents(step_shape),
                        [&](const std::vector<ir::Var>& i) {
                          return apply(prev(BroadcastIndex(prev_shape, step_shape, i)), i);
                        });
    while (at.size() < step_shape.size()) at.emplace_back(StrCat("i", at.size()), ir::kI32);
    const std::vector<ir::Var> here(at.end() - static_cast<int64_t>(step_shape.size()), at.end());
    inlined = apply(k == 0 ? X(BroadcastIndex(input.shape, step_shape, here)) : inlined, here);
    if (ir::ExprDepth(inlined, internal::kMaxFusedDepth) > internal::kMaxFusedDepth) {
      return InvalidArgument("steps 1 to ", k + 1, " of the chain nest more than ",
                             internal::kMaxFusedDepth,
                             " levels deep as one expression, the most kiln compiles; split the "
                             "chain into several");
    }
    if (!last) stages.push_back(value);
    value_shape = step_shape;
  }
  KILN_ASSIGN_OR_RETURN(te::Schedule s, te::Schedule::Create({value}));
  for (const te::Tensor& t : stages) KILN_RETURN_IF_ERROR(s[t].ComputeInline());
  return LowerFlat(s, value, inputs, value_shape, target, name);
}

namespace {

// A fused node, checked: its dtype and shape (a constant's is empty).
struct NodeType {
  ir::DataType dtype;
  Shape shape;
};

// The operand count of a fused op; 0 for an unknown one.
size_t FusedArity(std::string_view op) {
  if (op == "cast" || internal::IsUnary(op)) return 1;
  if (internal::IsBinary(op) || internal::IsCompare(op)) return 2;
  if (op == "where" || internal::IsTernary(op)) return 3;
  return 0;
}

StatusOr<NodeType> CheckFusedNode(const std::vector<TensorType>& inputs,
                                  const std::vector<NodeType>& earlier, const FusedNode& n,
                                  size_t j, const Target& target) {
  const std::string where =
      StrCat("node ", j, n.kind == FusedNode::Kind::kOp ? StrCat(" (", n.op, ")") : "",
             " of the fused expression");
  if (n.kind != FusedNode::Kind::kOp && !n.args.empty()) {
    return InvalidArgument(where, ": an input or constant node takes no arguments");
  }
  switch (n.kind) {
    case FusedNode::Kind::kInput:
      if (n.input < 0 || n.input >= static_cast<int>(inputs.size())) {
        return InvalidArgument(where, ": input ", n.input, " is out of range (", inputs.size(),
                               " inputs)");
      }
      return NodeType{inputs[n.input].dtype, inputs[n.input].shape};
    case FusedNode::Kind::kConstant:
      KILN_RETURN_IF_ERROR(
          internal::CheckData({{1}, n.dtype}, target, StrCat("the constant of ", where)));
      if (internal::IsIntegerData(n.dtype) && !internal::IsIntegerValue(n.value, n.dtype)) {
        return InvalidArgument(where, ": the constant ", internal::NumberText(n.value), " is not ",
                               internal::Article(n.dtype), n.dtype.ToString());
      }
      return NodeType{n.dtype, {}};
    case FusedNode::Kind::kOp:
      break;
  }
  const size_t arity = FusedArity(n.op);
  if (arity == 0) return UnknownStepOp(n.op).WithContext(where);
  if (n.args.size() != arity) {
    return InvalidArgument(where, ": ", n.op, " takes ", arity, " argument", arity == 1 ? "" : "s",
                           ", not ", n.args.size());
  }
  std::vector<NodeType> args;
  for (int a : n.args) {
    if (a < 0 || a >= static_cast<int>(j)) {
      return InvalidArgument(where, ": argument ", a, " is not an earlier node");
    }
    args.push_back(earlier[a]);
  }
  Shape shape = args[0].shape;
  for (size_t k = 1; k < args.size(); ++k) {
    StatusOr<Shape> broadcast = BroadcastShapes(shape, args[k].shape);
    if (!broadcast.ok()) return broadcast.status().WithContext(where);
    shape = *broadcast;
  }
  if (n.op == "cast") {
    KILN_RETURN_IF_ERROR(
        internal::CheckData({{1}, n.dtype}, target, StrCat("the type of ", where)));
    return NodeType{n.dtype, shape};
  }
  // The operands that share a dtype: all, or a where's last two.
  const size_t first = n.op == "where" ? 1 : 0;
  for (size_t k = first + 1; k < args.size(); ++k) {
    if (args[k].dtype != args[first].dtype) {
      return InvalidArgument(where, ": dtype mismatch: argument ", n.args[first], " is ",
                             args[first].dtype.ToString(), " but argument ", n.args[k], " is ",
                             args[k].dtype.ToString());
    }
  }
  if (n.op == "where") return NodeType{args[1].dtype, shape};
  KILN_RETURN_IF_ERROR(internal::CheckOpDtype(n.op, args[0].dtype, where));
  return NodeType{internal::GivesBool(n.op) ? ir::kI32 : args[0].dtype, shape};
}

}  // namespace

namespace {

// A fused graph, checked: each node's type, which nodes the output reads,
// and how often each is read.
struct FusedGraph {
  std::vector<NodeType> types;
  std::vector<bool> reached;
  std::vector<int> uses;
  size_t out() const { return types.size() - 1; }
};

StatusOr<FusedGraph> CheckFusedGraph(const std::vector<TensorType>& inputs,
                                     const std::vector<FusedNode>& nodes, const Target& target) {
  if (nodes.empty()) return InvalidArgument("a fused expression needs at least one node");
  for (size_t k = 0; k < inputs.size(); ++k) {
    KILN_RETURN_IF_ERROR(
        internal::CheckData(inputs[k], target, StrCat("input X", k, " of the fused expression")));
  }
  FusedGraph g;
  for (size_t j = 0; j < nodes.size(); ++j) {
    KILN_ASSIGN_OR_RETURN(NodeType t, CheckFusedNode(inputs, g.types, nodes[j], j, target));
    g.types.push_back(std::move(t));
  }
  const size_t out = g.out();
  g.uses.assign(nodes.size(), 0);
  g.reached.assign(nodes.size(), false);
  g.reached[out] = true;
  for (size_t j = out + 1; j-- > 0;) {
    if (!g.reached[j]) continue;
    for (int a : nodes[j].args) {
      g.reached[a] = true;
      ++g.uses[a];
    }
  }
  std::vector<bool> used(inputs.size(), false);
  for (size_t j = 0; j < nodes.size(); ++j) {
    if (g.reached[j] && nodes[j].kind == FusedNode::Kind::kInput) used[nodes[j].input] = true;
  }
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!used[k]) {
      return InvalidArgument("input X", k, " is not used by the fused expression's output (node ",
                             out, ")");
    }
  }
  if (inputs.empty()) {
    return InvalidArgument("the fused expression's output (node ", out, ") uses no input");
  }
  return g;
}

Status FusedTooDeep() {
  return InvalidArgument("the fused expression nests more than ", internal::kMaxFusedDepth,
                         " levels deep, the most kiln compiles (each node used more than once "
                         "adds a level too); split it into several");
}

// The kernel of a checked graph, its parameters named `input_names` and
// `output_name`; nullopt where its expression nests deeper than kiln
// compiles.
StatusOr<std::optional<ir::Function>> BuildFused(const std::vector<TensorType>& inputs,
                                                 const std::vector<FusedNode>& nodes,
                                                 const FusedGraph& g,
                                                 const std::vector<std::string>& input_names,
                                                 const std::string& output_name,
                                                 const Target& target, const std::string& name) {
  const size_t out = g.out();
  // Each op node nests one level at least: a graph deeper than the limit is
  // refused before its expression is built (measured exactly below).
  std::vector<int> levels(nodes.size(), 1);
  for (size_t j = 0; j < nodes.size(); ++j) {
    for (int a : nodes[j].args) levels[j] = std::max(levels[j], levels[a] + 1);
  }
  if (levels[out] > internal::kMaxFusedDepth) return std::optional<ir::Function>();

  const Shape& out_shape = g.types[out].shape;
  std::vector<te::Tensor> placeholders;
  for (size_t k = 0; k < inputs.size(); ++k) {
    placeholders.push_back(
        te::Placeholder(input_names[k], Extents(inputs[k].shape), inputs[k].dtype));
  }
  te::Tensor Y = te::Compute(output_name, Extents(out_shape), [&](const std::vector<ir::Var>& i) {
    std::vector<ir::Expr> value(nodes.size());
    std::vector<std::pair<ir::Var, ir::Expr>> lets;  // in order: each may read the ones before
    for (size_t j = 0; j < nodes.size(); ++j) {
      if (!g.reached[j]) continue;
      const FusedNode& n = nodes[j];
      std::vector<ir::Expr> a;
      for (int k : n.args) a.push_back(value[k]);
      ir::Expr e;
      switch (n.kind) {
        case FusedNode::Kind::kInput:
          e = placeholders[n.input](BroadcastIndex(inputs[n.input].shape, out_shape, i));
          break;
        case FusedNode::Kind::kConstant:
          e = internal::Constant(n.dtype, n.value);
          break;
        case FusedNode::Kind::kOp:
          e = n.op == "cast"              ? internal::ApplyCast(a[0], n.dtype)
              : n.op == "where"           ? internal::ApplyWhere(a[0], a[1], a[2])
              : internal::IsUnary(n.op)   ? internal::ApplyUnary(n.op, a[0])
              : internal::IsBinary(n.op)  ? internal::ApplyBinary(n.op, a[0], a[1])
              : internal::IsCompare(n.op) ? internal::ApplyCompare(n.op, a[0], a[1])
                                          : internal::ApplyTernary(n.op, a[0], a[1], a[2]);
          break;
      }
      // A value read twice is computed once (constants are free to repeat).
      if (g.uses[j] > 1 && n.kind != FusedNode::Kind::kConstant) {
        ir::Var v(StrCat("n", j), e.dtype());
        lets.emplace_back(v, e);
        e = v;
      }
      value[j] = e;
    }
    ir::Expr result = value[out];
    for (size_t k = lets.size(); k-- > 0;) result = ir::Let(lets[k].first, lets[k].second, result);
    return result;
  });
  if (ir::ExprDepth(Y.op()->body, internal::kMaxFusedDepth) > internal::kMaxFusedDepth) {
    return std::optional<ir::Function>();
  }
  KILN_ASSIGN_OR_RETURN(te::Schedule s, te::Schedule::Create({Y}));
  KILN_ASSIGN_OR_RETURN(ir::Function f, LowerFlat(s, Y, placeholders, out_shape, target, name));
  return std::optional<ir::Function>(std::move(f));
}

std::vector<std::string> InputNames(size_t count) {
  std::vector<std::string> names;
  for (size_t k = 0; k < count; ++k) names.push_back(StrCat("X", k));
  return names;
}

// How a fused graph runs as kernels: the nodes computed into tensors of
// their own (`apart`), and per kernel its root (an apart node, or the
// output last), the nodes it computes with the root last, and its inputs,
// each the graph's input k (encoded -1 - k) or an earlier kernel's root.
// No kernel reads more tensors than `buffers` less one (its output): in
// node order, a node that would has those of its operands that read the
// most (more than one) computed apart first.
class FusedPlan {
 public:
  struct Stage {
    int root = 0;
    std::vector<int> reached;  // the nodes it computes or reads, in order
    std::vector<FusedNode> nodes;
    std::vector<int> inputs;
  };

  FusedPlan(const std::vector<FusedNode>& nodes, const FusedGraph& g, size_t buffers)
      : nodes_(nodes), g_(g), buffers_(buffers) {
    Plan();
  }
  const std::vector<Stage>& stages() const { return stages_; }

  // Computes apart the node halfway down the deepest path of the kernel of
  // `root`, and plans again; false where that kernel cannot be split. Only
  // a node that reads some tensor is computed apart (a kernel of constants
  // alone would have no shape): those that read none count as level 0.
  bool Split(int root) {
    std::map<int, int> level;
    std::map<int, bool> reads_tensor;
    for (int j : Reached(root)) {
      const FusedNode& n = nodes_[j];
      const bool inner = n.kind == FusedNode::Kind::kOp && (j == root || !apart_.count(j));
      bool tensor = n.kind == FusedNode::Kind::kInput || !inner;
      int deepest = 0;
      for (int a : n.args) {
        deepest = std::max(deepest, level[a]);
        tensor = tensor || reads_tensor[a];
      }
      reads_tensor[j] = n.kind != FusedNode::Kind::kConstant && tensor;
      level[j] = inner && reads_tensor[j] ? deepest + 1 : 0;
    }
    int j = root;
    while (level[j] > level[root] / 2) {
      const std::vector<int>& args = nodes_[j].args;
      j = *std::max_element(args.begin(), args.end(),
                            [&](int a, int b) { return level[a] < level[b]; });
    }
    if (j == root || level[j] == 0) return false;
    apart_.insert(j);
    Plan();
    return true;
  }

 private:
  // The nodes the kernel of `root` computes or reads, in order.
  std::vector<int> Reached(int root) const {
    std::set<int> reached;
    std::vector<int> todo = {root};
    while (!todo.empty()) {
      const int j = todo.back();
      todo.pop_back();
      if (!reached.insert(j).second) continue;
      if (j == root || !apart_.count(j))
        todo.insert(todo.end(), nodes_[j].args.begin(), nodes_[j].args.end());
    }
    return {reached.begin(), reached.end()};
  }

  void Plan() {
    // Computing a node apart can make a later node that shares its inputs
    // read more tensors (the intermediate beside them), so the walk repeats
    // until it computes nothing more apart: then every node's reads are
    // those of the final plan.
    for (bool more = true; more;) {
      more = false;
      std::vector<std::set<int>> reads(nodes_.size());
      auto union_of = [&](const std::vector<int>& args) {
        std::set<int> u;
        for (int a : args) u.insert(reads[a].begin(), reads[a].end());
        return u;
      };
      for (size_t j = 0; j < nodes_.size(); ++j) {
        if (!g_.reached[j]) continue;
        const FusedNode& n = nodes_[j];
        if (n.kind == FusedNode::Kind::kInput) {
          reads[j] = {-1 - n.input};
          continue;
        }
        std::set<int> u = union_of(n.args);
        while (u.size() + 1 > buffers_) {
          int wide = -1;
          for (int a : n.args) {
            if (reads[a].size() > 1 && (wide < 0 || reads[a].size() > reads[wide].size())) {
              wide = a;
            }
          }
          if (wide < 0) break;  // as few as it can be: the kernel's own error says so
          apart_.insert(wide);
          more = true;
          reads[wide] = {wide};
          u = union_of(n.args);
        }
        reads[j] = apart_.count(static_cast<int>(j)) ? std::set<int>{static_cast<int>(j)} : u;
      }
    }
    stages_.clear();
    std::vector<int> roots(apart_.begin(), apart_.end());
    roots.push_back(static_cast<int>(g_.out()));
    for (int root : roots) {
      Stage st;
      st.root = root;
      st.reached = Reached(root);
      // The tensor node j reads, or 0 where it is computed here (node 0 is
      // an input or a constant, never a root).
      auto source_of = [&](int j) {
        if (j != root && apart_.count(j)) return j;
        return nodes_[j].kind == FusedNode::Kind::kInput ? -1 - nodes_[j].input : 0;
      };
      // Its inputs: the graph's in their order, then the kernels' roots.
      std::set<int> graph_inputs, roots_read;
      for (int j : st.reached) {
        const int source = source_of(j);
        if (source < 0) graph_inputs.insert(-1 - source);
        if (source > 0) roots_read.insert(source);
      }
      for (int k : graph_inputs) st.inputs.push_back(-1 - k);
      st.inputs.insert(st.inputs.end(), roots_read.begin(), roots_read.end());
      std::map<int, int> index;
      for (int j : st.reached) {
        const FusedNode& n = nodes_[j];
        if (const int source = source_of(j); source != 0) {
          const auto at = std::find(st.inputs.begin(), st.inputs.end(), source);
          st.nodes.push_back(FusedNode::Input(static_cast<int>(at - st.inputs.begin())));
        } else {
          FusedNode copy = n;
          for (int& a : copy.args) a = index.at(a);
          st.nodes.push_back(std::move(copy));
        }
        index[j] = static_cast<int>(st.nodes.size()) - 1;
      }
      stages_.push_back(std::move(st));
    }
  }

  const std::vector<FusedNode>& nodes_;
  const FusedGraph& g_;
  size_t buffers_;
  std::set<int> apart_;
  std::vector<Stage> stages_;
};

}  // namespace

StatusOr<ir::Function> ElementwiseFused(const std::vector<TensorType>& inputs,
                                        const std::vector<FusedNode>& nodes, const Target& target,
                                        const std::string& name) {
  KILN_ASSIGN_OR_RETURN(FusedGraph g, CheckFusedGraph(inputs, nodes, target));
  if (inputs.size() + 1 > target.limits.max_storage_buffers_per_stage) {
    return InvalidArgument("the fused expression uses ", inputs.size() + 1,
                           " storage buffers (its inputs and Y); the target allows ",
                           target.limits.max_storage_buffers_per_stage, " per stage");
  }
  KILN_ASSIGN_OR_RETURN(std::optional<ir::Function> f,
                        BuildFused(inputs, nodes, g, InputNames(inputs.size()), "Y", target, name));
  if (!f) return FusedTooDeep();
  return std::move(*f);
}

StatusOr<KernelSequence> ElementwiseFusedKernels(const std::vector<TensorType>& inputs,
                                                 const std::vector<FusedNode>& nodes,
                                                 const Target& target, const std::string& name) {
  KILN_ASSIGN_OR_RETURN(FusedGraph g, CheckFusedGraph(inputs, nodes, target));
  FusedPlan plan(nodes, g, target.limits.max_storage_buffers_per_stage);
  // Each kernel built, by its root, with the nodes it reached and the
  // tensors it read: a split replans every kernel, but changes only those
  // whose nodes it moves.
  struct Built {
    std::vector<int> reached, inputs;
    ir::Function function;
  };
  std::map<int, Built> built;
  auto tensor_name = [&](int source) {
    return source < 0 ? StrCat("X", -1 - source) : StrCat("T", source);
  };
  while (true) {
    const std::vector<FusedPlan::Stage>& stages = plan.stages();
    bool replanned = false;
    for (size_t k = 0; k < stages.size() && !replanned; ++k) {
      const FusedPlan::Stage& st = stages[k];
      auto it = built.find(st.root);
      if (it != built.end() && it->second.reached == st.reached && it->second.inputs == st.inputs) {
        continue;
      }
      std::vector<TensorType> types;
      std::vector<std::string> names;
      for (int source : st.inputs) {
        types.push_back(source < 0 ? inputs[-1 - source]
                                   : TensorType{g.types[source].shape, g.types[source].dtype});
        names.push_back(tensor_name(source));
      }
      const bool last = st.root == static_cast<int>(g.out());
      KILN_ASSIGN_OR_RETURN(FusedGraph sub, CheckFusedGraph(types, st.nodes, target));
      if (types.size() + 1 > target.limits.max_storage_buffers_per_stage) {
        return InvalidArgument("node ", st.root, " of the fused expression reads ", types.size(),
                               " tensors as one kernel at least, and the target binds ",
                               target.limits.max_storage_buffers_per_stage,
                               " storage buffers per stage (its output one of them)");
      }
      KILN_ASSIGN_OR_RETURN(
          std::optional<ir::Function> f,
          BuildFused(types, st.nodes, sub, names, last ? "Y" : tensor_name(st.root), target,
                     stages.size() == 1 ? name : StrCat(name, "_", st.root)));
      if (!f) {
        if (!plan.Split(st.root)) return FusedTooDeep();
        replanned = true;
        continue;
      }
      built.insert_or_assign(st.root, Built{st.reached, st.inputs, std::move(*f)});
    }
    if (replanned) continue;
    KernelSequence seq;
    for (const FusedPlan::Stage& st : stages) {
      seq.functions.push_back(built.at(st.root).function);
      if (st.root != static_cast<int>(g.out())) {
        seq.intermediates.push_back(IntermediateTensor{tensor_name(st.root), g.types[st.root].shape,
                                                       g.types[st.root].dtype});
      }
    }
    seq.inputs = InputNames(inputs.size());
    return seq;
  }
}

}  // namespace kiln::ops
