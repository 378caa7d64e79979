#include "kiln/codegen/wgsl_packing.h"

#include <vector>

#include "kiln/ir/expr_nodes.h"
#include "kiln/ir/expr_ops.h"
#include "kiln/ir/linear.h"
#include "kiln/ir/mutator.h"
#include "kiln/ir/simplifier.h"
#include "kiln/ir/visitor.h"

namespace kiln::codegen {
namespace {

int64_t FloorDivInt(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

// quotient + carry, with carry folded when the quotient is a constant.
ir::Expr AddConst(const ir::Expr& e, int64_t c) {
  if (c == 0) return e;
  return e + ir::IntConst(e.dtype(), c);
}

LaneSplit Normalize(const ir::Expr& quotient, int64_t remainder, int lanes) {
  int64_t carry = FloorDivInt(remainder, lanes);
  return {AddConst(quotient, carry), remainder - carry * lanes};
}

// Whether `e` is integer arithmetic on variables and constants, which can
// be evaluated again wherever those variables are in scope.
bool IsPureArithmetic(const ir::Expr& e) {
  if (e.as<ir::IntImmNode>() || e.as<ir::VarNode>()) return true;
  if (const auto* bin = e.as<ir::BinaryNode>()) {
    return IsPureArithmetic(bin->a) && IsPureArithmetic(bin->b);
  }
  if (const auto* cast = e.as<ir::CastNode>()) {
    return cast->value.dtype().is_int() && IsPureArithmetic(cast->value);
  }
  return false;
}

// Nesting of let-bound variables followed through, at most.
constexpr int kMaxLetDepth = 16;

std::optional<LaneSplit> Split(const ir::Expr& e, int lanes, const LetValues* lets, int depth) {
  ir::DataType type = e.dtype();
  if (const auto* imm = e.as<ir::IntImmNode>()) {
    int64_t q = FloorDivInt(imm->value, lanes);
    return LaneSplit{ir::IntConst(type, q), imm->value - q * lanes};
  }
  if (const auto* var = e.as<ir::VarNode>()) {
    if (lets == nullptr || depth >= kMaxLetDepth) return std::nullopt;
    auto it = lets->find(var);
    if (it == lets->end() || !it->second.dtype().is_int()) return std::nullopt;
    auto split = Split(it->second, lanes, lets, depth + 1);
    if (!split || IsPureArithmetic(it->second)) return split;
    return LaneSplit{(e - ir::IntConst(type, split->remainder)) / ir::IntConst(type, lanes),
                     split->remainder};
  }
  const auto* bin = e.as<ir::BinaryNode>();
  if (bin == nullptr) return std::nullopt;
  switch (bin->op) {
    case ir::BinaryOp::kAdd:
    case ir::BinaryOp::kSub: {
      auto a = Split(bin->a, lanes, lets, depth);
      auto b = Split(bin->b, lanes, lets, depth);
      if (!a || !b) return std::nullopt;
      bool add = bin->op == ir::BinaryOp::kAdd;
      ir::Expr q = add ? a->quotient + b->quotient : a->quotient - b->quotient;
      return Normalize(q, add ? a->remainder + b->remainder : a->remainder - b->remainder, lanes);
    }
    case ir::BinaryOp::kMul: {
      const ir::Expr* factor = &bin->b;
      const ir::Expr* other = &bin->a;
      if (!factor->as<ir::IntImmNode>()) std::swap(factor, other);
      const auto* c = factor->as<ir::IntImmNode>();
      if (c == nullptr) return std::nullopt;
      if (c->value % lanes == 0) {
        return LaneSplit{*other * ir::IntConst(type, c->value / lanes), 0};
      }
      auto o = Split(*other, lanes, lets, depth);
      if (!o) return std::nullopt;
      // (lanes * q + r) * c = lanes * (q * c) + r * c.
      return Normalize(o->quotient * ir::IntConst(type, c->value), o->remainder * c->value, lanes);
    }
    case ir::BinaryOp::kMod:
    case ir::BinaryOp::kFloorMod: {
      // a % c with c a multiple of lanes differs from a by a multiple of c,
      // so it keeps a's remainder (truncating or flooring alike); its
      // quotient is the exact (e - r) / lanes.
      const auto* c = bin->b.as<ir::IntImmNode>();
      if (c == nullptr || c->value <= 0 || c->value % lanes != 0) return std::nullopt;
      auto a = Split(bin->a, lanes, lets, depth);
      if (!a) return std::nullopt;
      const ir::Expr rest = a->remainder == 0 ? e : e - ir::IntConst(type, a->remainder);
      return LaneSplit{rest / ir::IntConst(type, lanes), a->remainder};
    }
    default:
      return std::nullopt;
  }
}

// Whether an expression loads from one buffer.
class ReadsBuffer : public ir::ExprVisitor {
 public:
  explicit ReadsBuffer(const ir::BufferNode* buffer) : buffer_(buffer) {}
  void VisitLoad(const ir::LoadNode* op) override {
    found |= op->buffer.get() == buffer_;
    ir::ExprVisitor::VisitLoad(op);
  }
  bool found = false;

 private:
  const ir::BufferNode* buffer_;
};

// Every load and store of one buffer: its index, and the bounds of the
// constant loops around it.
class AccessCollector : public ir::StmtVisitor {
 public:
  // `with_ranges`: record the loop bounds around each access (ChooseRows).
  AccessCollector(const ir::BufferNode* buffer, bool with_ranges)
      : buffer_(buffer), with_ranges_(with_ranges) {}
  struct Access {
    ir::Expr index;
    ir::RangeMap ranges;
  };
  std::vector<Access> accesses;
  bool unflattened = false;
  bool self_indexed_vector_store = false;

  void VisitFor(const ir::ForNode* op) override {
    if (!with_ranges_) return ir::StmtVisitor::VisitFor(op);
    auto min = ir::AsConstInt(ir::Simplify(op->min));
    auto extent = ir::AsConstInt(ir::Simplify(op->extent));
    auto step = ir::AsConstInt(ir::Simplify(op->step));
    const bool bounded = min && extent && step && *extent > 0 && *step > 0;
    if (bounded) ranges_[op->loop_var.get()] = ir::IntRange{*min, *min + *extent - 1};
    ir::StmtVisitor::VisitFor(op);
    if (bounded) ranges_.erase(op->loop_var.get());
  }
  void VisitLoad(const ir::LoadNode* op) override {
    Record(op->buffer, op->indices);
    ir::StmtVisitor::VisitLoad(op);
  }
  void VisitStore(const ir::StoreNode* op) override {
    Record(op->buffer, op->indices);
    // A vector store lane by lane whose index reads the array: a packed
    // array's lanes would each work out their index after the lanes before
    // them were stored (a plain array's index is taken whole first).
    if (op->buffer.get() == buffer_ && op->indices.size() == 1 &&
        op->indices[0].dtype().lanes > 1) {
      ReadsBuffer reads(buffer_);
      reads.VisitExpr(op->indices[0]);
      self_indexed_vector_store |= reads.found;
    }
    ir::StmtVisitor::VisitStore(op);
  }

 private:
  void Record(const ir::Buffer& buffer, const std::vector<ir::Expr>& idx) {
    if (buffer.get() != buffer_) return;
    if (idx.size() != 1) {
      unflattened = true;
      return;
    }
    accesses.push_back({idx[0], ranges_});
  }
  const ir::BufferNode* buffer_;
  const bool with_ranges_;
  ir::RangeMap ranges_;
};

// The largest number of separate variables an array becomes.
constexpr int64_t kMaxSplitVariables = 256;

class LetCollector : public ir::StmtVisitor {
 public:
  LetValues values;
  void VisitLetStmt(const ir::LetStmtNode* op) override {
    values.emplace(op->var.get(), op->value);
    ir::StmtVisitor::VisitLetStmt(op);
  }
};

}  // namespace

LetValues CollectLetValues(const ir::Stmt& body) {
  LetCollector collector;
  collector.VisitStmt(body);
  return std::move(collector.values);
}

std::vector<ir::Expr> StridedLanes(const ir::Expr& index) {
  const ir::Expr simplified = ir::Simplify(index);
  const auto* ramp = simplified.as<ir::RampNode>();
  if (ramp == nullptr || ir::IsConstInt(ramp->stride, 1) || !ir::AsConstInt(ramp->stride)) {
    return {};
  }
  std::vector<ir::Expr> lanes;
  for (int k = 0; k < ramp->lanes; ++k) {
    lanes.push_back(ir::Simplify(ramp->base + ramp->stride * ir::IntConst(ramp->base.dtype(), k)));
  }
  return lanes;
}

std::optional<LaneSplit> SplitByLanes(const ir::Expr& index, int lanes, const LetValues* lets) {
  auto split = Split(index, lanes, lets, 0);
  if (!split) return std::nullopt;
  split->quotient = ir::Simplify(split->quotient);
  return split;
}

namespace {

// The packing of `buffer` from every access in `body`; `size` where the
// array's length is a known constant (else the split into variables is off).
// `vectors_only`: any scalar access leaves the array unpacked.
ArrayPacking Analyze(const ir::Buffer& buffer, const ir::Stmt& body, std::optional<int64_t> size,
                     bool vectors_only, const LetValues* lets) {
  ir::DataType type = buffer.dtype();
  bool packable = !type.is_bool() && type.lanes == 1 && (type.bits == 32 || type.bits == 16);
  if (!packable) return {};
  AccessCollector collector(buffer.get(), /*with_ranges=*/false);
  collector.VisitStmt(body);
  if (collector.unflattened || collector.accesses.empty() || collector.self_indexed_vector_store) {
    return {};
  }

  int lanes = 1;
  bool all_constant = size.has_value();
  for (const auto& access : collector.accesses) {
    ir::Expr index = ir::Simplify(access.index);
    int n = index.dtype().lanes;
    if (n == 1) {
      if (vectors_only) return {};
      const auto* imm = index.as<ir::IntImmNode>();
      if (imm == nullptr || !size || imm->value < 0 || imm->value >= *size) all_constant = false;
      continue;
    }
    if (!vectors_only && !StridedLanes(index).empty()) {
      // Lane by lane: scalar accesses, whatever the packing.
      all_constant = false;
      continue;
    }
    const auto* ramp = index.as<ir::RampNode>();
    if (ramp == nullptr || !ir::IsConstInt(ramp->stride, 1) || (n != 2 && n != 4) ||
        (lanes != 1 && lanes != n)) {
      return {};
    }
    auto split = SplitByLanes(ramp->base, n, lets);
    if (!split || split->remainder != 0) return {};
    lanes = n;
    const auto* imm = ramp->base.as<ir::IntImmNode>();
    if (imm == nullptr || !size || imm->value < 0 || imm->value + n > *size) all_constant = false;
  }
  if (size && *size % lanes != 0) return {};
  ArrayPacking packing{lanes, false};
  packing.split_vars = buffer.scope() == ir::MemoryScope::kLocal && all_constant &&
                       *size / lanes <= kMaxSplitVariables;
  return packing;
}

}  // namespace

ArrayPacking ChoosePacking(const ir::AllocateNode* op, int64_t size, const LetValues* lets) {
  if (op->buffer.scope() == ir::MemoryScope::kGlobal) return {};
  return Analyze(op->buffer, op->body, size, /*vectors_only=*/false, lets);
}

ArrayPacking ChooseParamPacking(const ir::Buffer& buffer, const ir::Stmt& body,
                                const LetValues* lets) {
  // Only vectors: a scalar access would pick a component of a storage vector.
  return Analyze(buffer, body, std::nullopt, /*vectors_only=*/true, lets);
}

namespace {

// Pure let-bound integer arithmetic, read in place of its variable.
ir::ExpandVar PureLets(const LetValues* lets) {
  if (lets == nullptr) return {};
  return [lets](const ir::VarNode* var) -> ir::Expr {
    auto it = lets->find(var);
    return it != lets->end() && IsPureArithmetic(it->second) ? it->second : ir::Expr();
  };
}

// The pure let-bound values as a substitution.
ir::VarMap PureLetMap(const LetValues* lets) {
  ir::VarMap pure;
  if (lets == nullptr) return pure;
  for (const auto& [var, value] : *lets) {
    if (IsPureArithmetic(value)) pure.emplace(var, value);
  }
  return pure;
}

// Whether 0 <= column < extent for every value of the loops in `ranges`,
// with the pure lets substituted so the range analysis sees the loop
// variables they are made of.
bool ProvenWithin(const ir::Expr& column, int64_t extent, const ir::RangeMap& ranges,
                  const ir::VarMap& pure) {
  ir::Expr c = column;
  for (int i = 0; i < kMaxLetDepth && !pure.empty(); ++i) {
    ir::Expr next = ir::Substitute(c, pure);
    if (next.get() == c.get()) break;
    c = next;
  }
  const ir::Expr inside = ir::Simplify(c >= 0 && c < ir::IntConst(c.dtype(), extent), ranges);
  const auto* b = inside.as<ir::BoolImmNode>();
  return b != nullptr && b->value;
}

}  // namespace

RowSplit SplitByRow(const ir::Expr& index, int64_t row_elements, const LetValues* lets) {
  const ir::DataType type = index.dtype();
  ir::LinearSum sum;
  if (!ir::AddLinear(index, 1, sum, PureLets(lets))) return {ir::IntConst(type, 0), index};
  ir::LinearSum row, column;
  for (const auto& [term, c] : sum.terms) {
    if (c % row_elements == 0) {
      row.Add(term, c / row_elements);
    } else {
      column.Add(term, c);
    }
  }
  row.constant = FloorDivInt(sum.constant, row_elements);
  column.constant = sum.constant - row.constant * row_elements;
  return {row.ToExpr(type), column.ToExpr(type)};
}

int64_t ChooseRows(const ir::Buffer& buffer, const ir::Stmt& root, int64_t size,
                   const ArrayPacking& packing, const LetValues* lets) {
  if (buffer.scope() != ir::MemoryScope::kShared || packing.split_vars) return 0;
  AccessCollector collector(buffer.get(), /*with_ranges=*/true);
  collector.VisitStmt(root);
  if (collector.unflattened || collector.accesses.empty() || collector.self_indexed_vector_store) {
    return 0;
  }
  // Every access as the indices the rows must hold: a strided ramp lane by
  // lane, any other vector whole (only the packing's width gets here).
  struct Checked {
    ir::Expr index;
    bool vector;
    const ir::RangeMap* ranges;
  };
  std::vector<Checked> checked;
  for (const auto& a : collector.accesses) {
    std::vector<ir::Expr> lanes = StridedLanes(a.index);
    for (const ir::Expr& lane : lanes) checked.push_back({lane, false, &a.ranges});
    if (!lanes.empty()) continue;
    const int n = a.index.dtype().lanes;
    if (n > 1 && n != packing.lanes) return 0;  // lane by lane: not through the rows
    ir::Expr index = ir::Simplify(a.index);
    const auto* ramp = index.as<ir::RampNode>();
    checked.push_back({ramp ? ramp->base : index, ramp != nullptr, &a.ranges});
  }
  const ir::VarMap pure = PureLetMap(lets);
  const int64_t declared = size / packing.lanes;
  for (int64_t width = 2; width <= declared / 2; width *= 2) {
    if (declared % width != 0) break;
    const int64_t row_elements = width * packing.lanes;
    bool all = true;
    for (const Checked& c : checked) {
      const RowSplit split = SplitByRow(c.index, row_elements, lets);
      bool fits = ProvenWithin(split.column, row_elements, *c.ranges, pure);
      if (fits && c.vector) {
        // The vector stays whole and aligned within its row.
        auto lanes = SplitByLanes(split.column, packing.lanes, lets);
        fits = lanes && lanes->remainder == 0;
      }
      if (!fits) {
        all = false;
        break;
      }
    }
    if (all) return width;
  }
  return 0;
}

}  // namespace kiln::codegen
