// FunctionEmitter: the body of one kernel as WGSL text (internal to codegen).
//
// Expressions come back as WGSL text. Where WGSL needs a statement to express
// an IR expression (a `let` expression, if_then_else evaluating only one
// side, an index used for several lanes), the emitter first writes that
// statement to the output at the current position, so an expression's text
// is valid right after everything emitted before it returns.
//
// The emitter also records what the module around the body must declare:
// which buffers are stored to (their access mode), the workgroup arrays,
// helper functions, and whether f16 or subgroups are used. The first error
// is kept in status(); emission continues with placeholders so one call
// reports one error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kiln/codegen/wgsl_helpers.h"
#include "kiln/codegen/wgsl_names.h"
#include "kiln/codegen/wgsl_packing.h"
#include "kiln/ir/expr.h"
#include "kiln/ir/expr_nodes.h"
#include "kiln/ir/source_map.h"
#include "kiln/ir/stmt.h"
#include "kiln/support/status.h"

namespace kiln::codegen {

// WGSL expressions the emitter binds the launch builtins to.
struct LaunchNames {
  std::string block_x;       // u32: the recombined logical blockIdx.x
  std::string workgroup_id;  // vec3<u32>
  std::string local_id;      // vec3<u32>
  // u32 entry-point parameters, declared only where the body uses them
  // (FunctionEmitter::uses_subgroup_invocation_id / uses_subgroup_size).
  std::string subgroup_invocation_id;
  std::string subgroup_size;
};

// `text` without one pair of parentheses enclosing all of it, if it has
// one: for positions where an expression needs none (`let x = a + b;`).
std::string StripParens(const std::string& text);

// `text` made safe as the operand of a unary operator: unchanged if it is
// already parenthesised or has no space outside brackets, else in parentheses.
std::string Enclosed(const std::string& text);

class FunctionEmitter {
 public:
  FunctionEmitter(NameSupply& names, WgslHelpers& helpers, LaunchNames launch);

  // Makes `var` refer to the WGSL expression `wgsl`.
  void BindVar(const ir::VarNode* var, std::string wgsl) { vars_[var] = std::move(wgsl); }
  // Makes `buffer` refer to the WGSL array named `wgsl`.
  void BindBuffer(const ir::BufferNode* buffer, std::string wgsl) {
    buffers_[buffer] = std::move(wgsl);
  }
  // Makes the bound `buffer` an array of `lanes`-vectors (ChooseParamPacking).
  void PackBuffer(const ir::BufferNode* buffer, int lanes) {
    packed_[buffer] = PackedArray{ArrayPacking{lanes, false}, buffers_.at(buffer), {}};
  }

  // Records the let-bound values of the kernel's body, through which packed
  // array indices are split (SplitByLanes); before DeclareParams and EmitBody.
  void CollectLets(const ir::Stmt& body) {
    lets_ = CollectLetValues(body);
    root_ = body;
  }
  const LetValues& lets() const { return lets_; }

  // Where the parser found the source's loops (may be null): errors inside a
  // loop name the innermost one the map knows.
  void SetSource(const ir::SourceMap* source) { source_ = source; }

  // Emits the statement at indentation `indent` (in units of two spaces).
  void EmitBody(const ir::Stmt& body, int indent);

  const std::string& output() const { return out_; }
  const Status& status() const { return status_; }
  bool stored(const ir::BufferNode* buffer) const { return stored_.count(buffer) != 0; }
  bool uses_f16() const { return uses_f16_; }
  bool uses_subgroups() const { return uses_subgroups_; }
  // Whether the body reads the subgroup builtins (LaunchNames).
  bool uses_subgroup_invocation_id() const { return uses_subgroup_invocation_id_; }
  bool uses_subgroup_size() const { return uses_subgroup_size_; }
  // Whether the body has a `while` loop (one that need not terminate).
  bool has_while_loops() const { return has_while_loops_; }
  // The deepest block the body opened, counting the function's own as 1.
  int deepest_block() const { return deepest_; }
  // Module-scope `var<workgroup>` declarations, one per line.
  const std::string& workgroup_decls() const { return workgroup_decls_; }
  int64_t workgroup_bytes() const { return workgroup_bytes_; }

 private:
  // ---- expressions (wgsl_expr.cc)
  // Expr hoists subtrees nested deeper than this into `let`s.
  static constexpr int kMaxNesting = 24;
  std::string Expr(const ir::Expr& e);
  std::string Emit(const ir::Expr& e);
  // Whether `e` is built of literals only (memoised per node).
  bool IsConstantTree(const ir::Expr& e);
  // `value` of float type `type` as f32 (scalar or vector) text.
  std::string AsF32(const std::string& value, ir::DataType type);
  std::string Infix(const ir::BinaryNode* op, const std::string& a, const char* infix,
                    const std::string& b);
  std::string IntImm(const ir::IntImmNode* op);
  std::string FloatImm(const ir::FloatImmNode* op);
  std::string Binary(const ir::BinaryNode* op);
  // A float `/`, `%`, floor_div or floor_mod by a constant zero, spelled
  // without the division, or a float `*`, `+`, `-`, `/` or floor_div with a
  // constant zero operand that a driver could fold (WgslHelpers::ConstZero);
  // nullopt for any other operation. `a` and `b` are the emitted operands.
  std::optional<std::string> FloatByConstZero(const ir::BinaryNode* op, const std::string& a,
                                              const std::string& b);
  std::string ConstZeroCall(WgslHelpers::ZeroOp zero_op, const std::string& x, ir::DataType type,
                            std::optional<double> zero = std::nullopt);
  std::string Cast(const ir::CastNode* op);
  std::string Reinterpret(const ir::ReinterpretNode* op);
  std::string Ramp(const ir::RampNode* op);
  std::string Load(const ir::LoadNode* op);
  std::string Call(const ir::CallNode* op);
  std::string IfThenElse(const ir::CallNode* op);
  std::string Shift(const ir::CallNode* op, const char* wgsl_op);
  std::string Erf(const ir::CallNode* op);

  // ---- statements (wgsl_stmt.cc)
  void Stmt(const ir::Stmt& s);
  void Store(const ir::StoreNode* op);
  void Allocate(const ir::AllocateNode* op);
  void For(const ir::ForNode* op);
  // Whether the plain `for (v = min; v < min + extent; v += step)` computes
  // the IR's loop: no overflow in `min + extent` or the last `v += step`.
  bool LoopCannotOverflow(const ir::ForNode* op);
  void While(const ir::WhileNode* op);
  void If(const ir::IfNode* op);

  // ---- shared helpers (wgsl_emitter.cc)
  // The WGSL type of `type`; records f16 use; an error becomes "<error>".
  std::string Type(ir::DataType type);
  std::string StorageType(ir::DataType type);
  // Binds a new `let` holding `value` (WGSL text of type `type`); returns its name.
  std::string LetValue(const std::string& hint, ir::DataType type, const std::string& value);
  // Text of an expression that is cheap to repeat (a name or literal), or a
  // new `let` holding it.
  std::string Reusable(const ir::Expr& e, const std::string& hint);
  // The WGSL array a buffer refers to; declares nothing.
  std::string BufferName(const ir::Buffer& buffer);
  // The single index of a flattened access; error otherwise, and where the
  // index is a constant (CheckConstantIndex) outside the buffer.
  const ir::Expr* FlatIndex(const ir::Buffer& buffer, const std::vector<ir::Expr>& indices);
  // The value of an integer expression of constants and let-bound variables
  // whose values are such expressions (memoized per variable); nullopt for
  // any other. After unrolling, an index can be a constant only through the
  // lets, and WGSL's compilers refuse a constant index outside an array.
  std::optional<int64_t> ConstantValue(const ir::Expr& e);
  // Refuses a constant index (every lane of a ramp or broadcast) that is
  // negative or past the buffer's constant extent, naming both.
  void CheckConstantIndex(const ir::Buffer& buffer, const ir::Expr& index);
  // A local or shared array laid out by ChoosePacking (wgsl_packing.h).
  struct PackedArray {
    ArrayPacking packing;
    std::string name;               // the array
    std::vector<std::string> vars;  // or the separate variables, one per group of lanes
  };
  const PackedArray* Packed(const ir::Buffer& buffer) const;
  // The WGSL reference to the element (scalar index) or the whole vector
  // (a ramp of the packing's width) of a packed array at `index`.
  std::string PackedAccess(const PackedArray& array, const ir::Expr& index);
  // The text for lane `lane` of the vector index `index` (hoisted as needed).
  std::vector<std::string> LaneIndices(const ir::Expr& index);
  void Line(const std::string& text);
  // Enter and leave a nested block. Hoisted values are only reused within
  // one block level of one statement (see reusable_), so both forget them.
  void Indent();
  void Dedent();

  // " (in the loop `i` at line L, column C)" for the innermost enclosing
  // loop whose source location is known, else "".
  std::string EnclosingLoop() const;

  template <typename... Args>
  std::string Fail(const Args&... args) {
    if (status_.ok()) status_ = Status(StatusCode::kUnimplemented, StrCat(args...));
    return "<error>";
  }

  NameSupply& names_;
  WgslHelpers& helpers_;
  LaunchNames launch_;
  std::string out_;
  int indent_ = 0;
  int deepest_ = 0;  // the deepest indent_ reached
  // Hoisted lets of the statement being emitted, by the WGSL text of their
  // value: a vector store's index and its value's load often share a base.
  std::unordered_map<std::string, std::string> reusable_;
  std::unordered_map<const ir::VarNode*, std::string> vars_;
  std::unordered_map<const ir::BufferNode*, std::string> buffers_;
  std::unordered_map<const ir::BufferNode*, PackedArray> packed_;
  LetValues lets_;
  std::unordered_map<const ir::VarNode*, std::optional<int64_t>> constant_lets_;
  ir::Stmt root_;  // the kernel's body (the loop bounds ChooseRows uses)
  const ir::SourceMap* source_ = nullptr;
  std::vector<const ir::VarNode*> loops_;  // the loops around the statement emitted
  std::unordered_set<const ir::BufferNode*> stored_;
  // Set while emitting a constant subtree: literals go through
  // WgslHelpers::RunTime.
  bool run_time_literals_ = false;
  std::unordered_map<const ir::ExprNode*, bool> constant_trees_;
  // Nodes made while emitting (an fma rewritten), kept to the end: the maps
  // above key on nodes' addresses, which a freed node's successor could reuse.
  std::vector<ir::Expr> made_;
  bool uses_f16_ = false;
  bool uses_subgroups_ = false;
  bool uses_subgroup_invocation_id_ = false;
  bool uses_subgroup_size_ = false;
  bool has_while_loops_ = false;
  std::string workgroup_decls_;
  int64_t workgroup_bytes_ = 0;
  Status status_;
};

}  // namespace kiln::codegen
