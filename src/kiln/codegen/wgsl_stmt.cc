// FunctionEmitter: statements.
#include "kiln/codegen/kernel_abi.h"
#include "kiln/codegen/wgsl_emitter.h"
#include "kiln/codegen/wgsl_types.h"
#include "kiln/ir/expr_ops.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/simplifier.h"
#include "kiln/support/target_limits.h"
#include "kiln/transform/lane_arith.h"

namespace kiln::codegen {

void FunctionEmitter::Stmt(const ir::Stmt& s) {
  reusable_.clear();
  switch (s.kind()) {
    case ir::StmtKind::kLetStmt: {
      const auto* op = s.as<ir::LetStmtNode>();
      std::string value = Expr(op->value);
      BindVar(op->var.get(), LetValue(op->var.name(), op->var.dtype(), value));
      Stmt(op->body);
      return;
    }
    case ir::StmtKind::kStore:
      return Store(s.as<ir::StoreNode>());
    case ir::StmtKind::kAllocate:
      return Allocate(s.as<ir::AllocateNode>());
    case ir::StmtKind::kFor:
      return For(s.as<ir::ForNode>());
    case ir::StmtKind::kWhile:
      return While(s.as<ir::WhileNode>());
    case ir::StmtKind::kIf:
      return If(s.as<ir::IfNode>());
    case ir::StmtKind::kSeq:
      for (const ir::Stmt& child : s.as<ir::SeqNode>()->stmts) Stmt(child);
      return;
    case ir::StmtKind::kBarrier:
      // The runtime finds workgroup barriers by this exact text (kernel_abi.h).
      Line(s.as<ir::BarrierNode>()->barrier == ir::BarrierKind::kWorkgroup
               ? std::string(abi::kWorkgroupBarrierStatement)
               : std::string("storageBarrier();"));
      return;
    case ir::StmtKind::kAssert:
      // Asserts state facts for the interpreter; kernels do not check them.
      return;
    case ir::StmtKind::kEvaluate:
      // Expressions have no side effects, so there is nothing to run.
      return;
  }
  Fail("unknown statement kind");
}

void FunctionEmitter::Store(const ir::StoreNode* op) {
  const ir::Expr* index = FlatIndex(op->buffer, op->indices);
  if (index == nullptr) return;
  if (const PackedArray* packed = Packed(op->buffer)) {
    stored_.insert(op->buffer.get());
    std::vector<ir::Expr> lanes = StridedLanes(*index);
    if (!lanes.empty()) {
      // Lane by lane, each a component of the packed array.
      std::string value = Reusable(op->value, "value");
      for (size_t k = 0; k < lanes.size(); ++k) {
        Line(StrCat(PackedAccess(*packed, lanes[k]), " = ", value, "[", k, "];"));
      }
      return;
    }
    std::string value = Expr(op->value);
    Line(StrCat(PackedAccess(*packed, *index), " = ", StripParens(value), ";"));
    return;
  }
  std::string buffer = BufferName(op->buffer);
  stored_.insert(op->buffer.get());
  bool is_bool = op->buffer.dtype().is_bool();
  // bool elements are stored as i32 0 / 1.
  auto stored_value = [&](const std::string& v) {
    return is_bool ? StrCat("select(0i, 1i, ", StripParens(v), ")") : v;
  };
  if (index->dtype().lanes == 1) {
    std::string i = Expr(*index);
    std::string value = Expr(op->value);
    Line(StrCat(buffer, "[", StripParens(i), "] = ", StripParens(stored_value(value)), ";"));
    return;
  }
  std::vector<std::string> lanes = LaneIndices(*index);
  std::string value = Reusable(op->value, "value");
  for (size_t k = 0; k < lanes.size(); ++k) {
    Line(StrCat(buffer, "[", StripParens(lanes[k]),
                "] = ", stored_value(StrCat(value, "[", k, "]")), ";"));
  }
}

void FunctionEmitter::Allocate(const ir::AllocateNode* op) {
  const ir::Buffer& buffer = op->buffer;
  if (buffer.rank() != 1) {
    Fail("allocation '", buffer.name(), "' has rank ", buffer.rank(), "; run FlattenBuffers first");
    return;
  }
  auto size = ir::AsConstInt(ir::Simplify(buffer.shape()[0]));
  if (!size || *size <= 0) {
    Fail("allocation '", buffer.name(), "' needs a positive constant size, got ",
         ir::Print(buffer.shape()[0]));
    return;
  }
  std::string name = names_.Fresh(buffer.name());
  ArrayPacking packing = ChoosePacking(op, *size, &lets_);
  std::string element = StorageType(buffer.dtype());
  if (packing.lanes > 1) element = StrCat("vec", packing.lanes, "<", element, ">");
  if (packing.split_vars) {
    PackedArray& array = packed_[buffer.get()] = PackedArray{packing, name, {}};
    for (int64_t g = 0; g < *size / packing.lanes; ++g) {
      array.vars.push_back(names_.Fresh(StrCat(buffer.name(), "_", g)));
      Line(StrCat("var ", array.vars.back(), " : ", element, ";"));
    }
    Stmt(op->body);
    return;
  }
  packing.row_width = ChooseRows(buffer, root_, *size, packing, &lets_);
  if (packing.lanes > 1 || packing.row_width > 0) {
    packed_[buffer.get()] = PackedArray{packing, name, {}};
  }
  std::string decl = StrCat("array<", element, ", ", *size / packing.lanes, ">");
  if (packing.row_width > 0) {
    decl = StrCat("array<array<", element, ", ", packing.row_width, ">, ",
                  *size / packing.lanes / packing.row_width, ">");
  }
  switch (buffer.scope()) {
    case ir::MemoryScope::kShared:
      // Workgroup memory lives at module scope in WGSL.
      workgroup_decls_ += StrCat("var<workgroup> ", name, " : ", decl, ";\n");
      workgroup_bytes_ += WorkgroupVariableBytes(*size * WgslStorageBytes(buffer.dtype()));
      break;
    case ir::MemoryScope::kLocal:
      Line(StrCat("var ", name, " : ", decl, ";"));
      break;
    case ir::MemoryScope::kGlobal:
      Fail("global allocation '", buffer.name(),
           "' inside a kernel: WGSL cannot allocate device memory; pass it as a parameter");
      return;
  }
  BindBuffer(buffer.get(), name);
  Stmt(op->body);
}

void FunctionEmitter::For(const ir::ForNode* op) {
  loops_.push_back(op->loop_var.get());
  struct Leave {
    std::vector<const ir::VarNode*>& loops;
    ~Leave() { loops.pop_back(); }
  } leave{loops_};
  std::string type = Type(op->loop_var.dtype());
  // Launch axes bind the loop variable to a builtin; there is no loop.
  auto bind = [&](const std::string& builtin) {
    std::string name = names_.Fresh(op->loop_var.name());
    Line(StrCat("let ", name, " : ", type, " = ", type, "(", builtin, ");"));
    BindVar(op->loop_var.get(), name);
    Stmt(op->body);
  };
  switch (op->kind) {
    case ir::LoopKind::kThreadX:
      return bind(launch_.local_id + ".x");
    case ir::LoopKind::kThreadY:
      return bind(launch_.local_id + ".y");
    case ir::LoopKind::kThreadZ:
      return bind(launch_.local_id + ".z");
    case ir::LoopKind::kBlockX:
      return bind(launch_.block_x);
    case ir::LoopKind::kBlockY:
      return bind(launch_.workgroup_id + ".y");
    case ir::LoopKind::kBlockZ:
      Fail("blockIdx.z is reserved by the kernel ABI");
      return;
    case ir::LoopKind::kVectorized:
      Fail("loop `", op->loop_var.name(), "` is still marked vectorize; run Vectorize first");
      return;
    case ir::LoopKind::kSerial:
    case ir::LoopKind::kUnrolled:
      break;
  }
  // The loop runs ceil(extent / step) times (none when extent <= 0) with
  // the variable wrapping in its type. When neither `min + extent` nor the
  // last increment can overflow, that is the plain loop; otherwise an
  // unsigned trip counter drives it. min and extent are evaluated once.
  const ir::DataType var_type = op->loop_var.dtype();
  if (LoopCannotOverflow(op)) {
    std::string begin = Expr(op->min);
    ir::Expr end_expr = transform::FoldedAdd(op->min, op->extent);
    std::string end = Reusable(end_expr, op->loop_var.name() + "_end");
    std::string step = Expr(op->step);
    std::string name = names_.Fresh(op->loop_var.name());
    std::string update = ir::IsConstInt(op->step, 1) ? name + "++" : StrCat(name, " += ", step);
    Line(StrCat("for (var ", name, " : ", type, " = ", StripParens(begin), "; ", name, " < ",
                StripParens(end), "; ", update, ") {"));
    BindVar(op->loop_var.get(), name);
    Indent();
    Stmt(op->body);
    Dedent();
    Line("}");
    return;
  }
  const std::string hint = op->loop_var.name();
  std::string begin = Reusable(op->min, hint + "_min");
  std::string extent = Reusable(op->extent, hint + "_extent");
  std::string step = Expr(op->step);
  const bool is_signed = var_type.is_int();
  std::string extent_u = is_signed ? StrCat("u32(", StripParens(extent), ")") : extent;
  auto step_value = ir::AsConstInt(op->step);
  std::string step_u = step_value  ? StrCat(static_cast<uint32_t>(*step_value), "u")
                       : is_signed ? StrCat("u32(", StripParens(step), ")")
                                   : step;
  std::string zero = is_signed ? "0i" : "0u";
  std::string trips = LetValue(hint + "_trips", ir::DataType::UInt(32),
                               StrCat("select(0u, (", extent_u, " - 1u) / ", step_u, " + 1u, ",
                                      StripParens(extent), " > ", zero, ")"));
  std::string counter = names_.Fresh(hint + "_k");
  std::string name = names_.Fresh(hint);
  Line(
      StrCat("for (var ", counter, " : u32 = 0u; ", counter, " < ", trips, "; ", counter, "++) {"));
  Indent();
  std::string offset = is_signed ? StrCat("i32(", counter, ")") : counter;
  Line(StrCat("let ", name, " : ", type, " = ", begin, " + ", offset,
              ir::IsConstInt(op->step, 1) ? "" : StrCat(" * ", step), ";"));
  Dedent();
  BindVar(op->loop_var.get(), name);
  Indent();
  Stmt(op->body);
  Dedent();
  Line("}");
}

bool FunctionEmitter::LoopCannotOverflow(const ir::ForNode* op) {
  const ir::DataType type = op->loop_var.dtype();
  if (type.bits != 32) return false;
  const int64_t max = type.is_int() ? INT32_MAX : UINT32_MAX;
  auto min = ir::AsConstInt(op->min);
  auto extent = ir::AsConstInt(op->extent);
  auto step = ir::AsConstInt(op->step);
  if (!min || !step || *step <= 0) return false;
  if (extent) {
    // The last value tried is below min + extent + step.
    return *extent <= 0 || (*min + *extent + *step - 1 <= max && *min + *extent >= -max - 1);
  }
  // for v in (0, n) with step 1: v < n <= max, so v++ stays in range.
  return *min == 0 && *step == 1;
}

void FunctionEmitter::While(const ir::WhileNode* op) {
  has_while_loops_ = true;
  // The condition is re-evaluated before each iteration; when evaluating it
  // takes statements (hoisted lets), they go inside the loop.
  std::string saved = std::move(out_);
  out_.clear();
  Indent();
  std::string cond = Expr(op->cond);
  std::string hoisted = std::move(out_);
  out_ = std::move(saved);
  if (hoisted.empty()) {
    Dedent();
    Line(StrCat("while (", StripParens(cond), ") {"));
    Indent();
  } else {
    Dedent();
    Line("loop {");
    out_ += hoisted;
    Indent();
    Line(StrCat("if (!", Enclosed(cond), ") {"));
    Line("  break;");
    Line("}");
  }
  Stmt(op->body);
  Dedent();
  Line("}");
}

void FunctionEmitter::If(const ir::IfNode* op) {
  std::string cond = Expr(op->cond);
  Line(StrCat("if (", StripParens(cond), ") {"));
  Indent();
  Stmt(op->then_case);
  Dedent();
  if (op->else_case.defined() && !ir::IsNoOp(op->else_case)) {
    Line("} else {");
    Indent();
    Stmt(op->else_case);
    Dedent();
  }
  Line("}");
}

}  // namespace kiln::codegen
