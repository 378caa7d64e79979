// Helpers shared by the operator definitions: argument checks, broadcast
// indexing and the default flat schedule.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ir/builder.h"
#include "kiln/ops/ops.h"
#include "kiln/te/te.h"

namespace kiln::ops::internal {

// That `t` is a valid tensor argument for `target`; errors name `what`
// ("input A of add").
Status CheckTensor(const TensorType& t, const Target& target, std::string_view what);

// `t` as CheckTensor, i32 and u32 allowed too (f32, f16 with shader-f16,
// i32, u32).
Status CheckData(const TensorType& t, const Target& target, std::string_view what);

// Whether `t` is one of the library's integer dtypes (i32, u32).
bool IsIntegerData(ir::DataType t);
// Whether the number `v` is exactly a value of integer dtype `t` (i32, u32).
bool IsIntegerValue(double v, ir::DataType t);
// "an " before i32, "a " before u32 (as the type's name is read).
inline const char* Article(ir::DataType t) {
  return t.is_uint() ? "a " : "an ";
}
// The number `v` as a constant of dtype `t`: an integer one (IsIntegerValue
// holds) or a float one, rounded to `t`.
ir::Expr Constant(ir::DataType t, double v);

// That elementwise op `op` takes `dtype` (ElementwiseOpTakes); the error
// names `what` ("input A of exp is i32, but exp takes f32 or f16 tensors").
Status CheckOpDtype(std::string_view op, ir::DataType dtype, std::string_view what);

// The shape as te extents (i32 constants).
std::vector<ir::Expr> Extents(const Shape& shape);

// The coordinates of row-major flat index `flat` over `dims`, each let-bound
// in `b` as <prefix><d> (coordinate d = flat / (product of later dims) %
// dims[d]).
std::vector<ir::Expr> UnflattenIndex(ir::IRBuilder& b, const ir::Expr& flat, const Shape& dims,
                                     std::string_view prefix);

// The indices into a tensor of `shape` for the output element at
// `out_index` of `out_shape`, which `shape` broadcasts to: aligned on the
// right, a dimension of 1 read at 0.
std::vector<ir::Expr> BroadcastIndex(const Shape& shape, const Shape& out_shape,
                                     const std::vector<ir::Var>& out_index);

// The unary, binary, comparison or ternary op applied; the name must be
// one of UnaryOpNames() / BinaryOpNames() / CompareOpNames() /
// TernaryOpNames(), the operands of a type it takes (ElementwiseOpTakes)
// and of one type. A comparison gives i32 0 or 1.
ir::Expr ApplyUnary(std::string_view op, const ir::Expr& x);
ir::Expr ApplyBinary(std::string_view op, const ir::Expr& a, const ir::Expr& b);
ir::Expr ApplyCompare(std::string_view op, const ir::Expr& a, const ir::Expr& b);
ir::Expr ApplyTernary(std::string_view op, const ir::Expr& a, const ir::Expr& b, const ir::Expr& c);
// where: `cond` != 0 (a float NaN counts as true) ? a : b; a and b of one
// type, cond of any.
ir::Expr ApplyWhere(const ir::Expr& cond, const ir::Expr& a, const ir::Expr& b);
// x converted to `dtype` by Cast's rules (f16 to i32 through f32).
ir::Expr ApplyCast(const ir::Expr& x, ir::DataType dtype);

// Float tests on the bits, which no fast-math folding can change (WGSL lets
// a compiler assume no NaN or infinity occurs, so `x != x` or `x - m` with
// m == x may fold). Any float type and lane count; f16 is widened to f32
// first, which keeps every value.
// x's bits as u32 lanes, and such bits back as float type `t`.
ir::Expr FloatBits(const ir::Expr& x);
ir::Expr FromFloatBits(const ir::Expr& bits, ir::DataType t);
// x's sign bit alone: 0 or 0x80000000 in each lane.
ir::Expr SignBits(const ir::Expr& x);
ir::Expr IsNan(const ir::Expr& x);
ir::Expr IsInf(const ir::Expr& x);
// NaN or an infinity. Row kernels whose IEEE result is NaN for a row of one
// element test a row statistic (the max, the mean) with this and give NaN.
ir::Expr IsNonFinite(const ir::Expr& x);
// How deep an elementwise chain's or fused expression's expression may nest
// before lowering: the compiler's limit (ir::kMaxExprDepth) less room for
// the index arithmetic of its loads, which lowering adds.
inline constexpr int kMaxFusedDepth = ir::kMaxExprDepth - 16;

// A number as it was given, in the fewest digits that read back the same
// (4294967295, not 4.29497e+09), for messages.
std::string NumberText(double v);
bool IsUnary(std::string_view op);
bool IsBinary(std::string_view op);
bool IsCompare(std::string_view op);
// A comparison or a unary predicate (isnan, isinf, isfinite): the result
// is i32 0 or 1.
bool GivesBool(std::string_view op);
bool IsTernary(std::string_view op);
// Every elementwise op name: unary, binary, comparison, ternary.
std::vector<std::string_view> ElementwiseOpNames();

// An epilogue's activation: empty (none), or a unary op that maps the f32
// sum to an f32 (not a predicate). `op` names the operator for errors.
Status CheckActivation(const std::string& activation, std::string_view op);

// "unknown <kind> op 'x'; known: a, b, c".
Status UnknownOp(std::string_view kind, std::string_view op,
                 const std::vector<std::string_view>& known);

// `axis` in [-rank, rank) made non-negative; errors name `what`.
StatusOr<int> NormalizeAxis(int64_t axis, int rank, std::string_view what);

// Elements per thread in the vectorized flat schedule.
inline constexpr int64_t kFlatVectorLanes = 4;

// The default schedule of a materialised stage: its first `rank`
// (data-parallel) axes fused, then, with T = ThreadsPerBlock(elements):
// - an injective stage of at least kFlatVectorLanes * T elements whose body
//   (with what it inlines) has no if_then_else: split by
//   kFlatVectorLanes, the outer part split by T and bound to blockIdx.x /
//   threadIdx.x, the kFlatVectorLanes lanes vectorized, so each thread
//   computes four contiguous elements as one vector operation (the last
//   thread, where the size does not divide, runs its lanes one by one);
// - otherwise (fewer elements, a reduction stage, an if_then_else): split by T and bound to
//   blockIdx.x / threadIdx.x, one element per thread.
Status ScheduleFlat(te::Schedule& schedule, const te::Tensor& t, int rank, int64_t elements,
                    const Target& target);

}  // namespace kiln::ops::internal
