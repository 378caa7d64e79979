// How the code generator lays out a local or shared array (internal to
// codegen).
//
// An array whose vector accesses are all contiguous ramps of one width L
// (2 or 4) starting at provable multiples of L is declared as an array of
// vecL, so each such access is one vector load or store instead of L scalar
// ones; scalar accesses to it pick a component. A local array whose every
// access has a constant index (the accumulators of an unrolled register
// tile) becomes separate variables, scalars or vecL, which drivers keep in
// registers where a dynamically indexable array may be spilled.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "kiln/ir/expr.h"
#include "kiln/ir/stmt.h"

namespace kiln::codegen {

// index == lanes * quotient + remainder, 0 <= remainder < lanes.
struct LaneSplit {
  ir::Expr quotient;
  int64_t remainder = 0;
};

// The values of a kernel's let-bound variables (each is bound once), so an
// index written through them (`let base = tx * 4; B[base + 1]`) splits.
using LetValues = std::unordered_map<const ir::VarNode*, ir::Expr>;
LetValues CollectLetValues(const ir::Stmt& body);

// Splits an integer index expression by `lanes` through sums, differences,
// multiplications by constants and let-bound variables (`lets`); nullopt
// where a term is not provably a multiple of `lanes` plus a constant. A
// variable whose value is integer arithmetic on variables splits into that
// arithmetic's quotient; any other (a value that loads, say) into
// `(var - remainder) / lanes`, exact by construction.
std::optional<LaneSplit> SplitByLanes(const ir::Expr& index, int lanes,
                                      const LetValues* lets = nullptr);

// The lane indices of a ramp whose stride is a constant other than 1
// (base + k * stride, simplified); empty for any other index. Such an access
// reads or writes a packed array lane by lane.
std::vector<ir::Expr> StridedLanes(const ir::Expr& index);

struct ArrayPacking {
  int lanes = 1;            // elements per declared array element (1, 2 or 4)
  bool split_vars = false;  // separate variables instead of an array
  // Where > 0, a workgroup array declared as rows of this many declared
  // elements, `array<array<vec4<f32>, W>, N / W>` (ChooseRows).
  int64_t row_width = 0;
};

// index == row * row_elements + column (ChooseRows proves 0 <= column <
// row_elements for every access of the arrays it lays out in rows).
struct RowSplit {
  ir::Expr row;
  ir::Expr column;
};

// Splits `index` into the terms whose constant coefficients are multiples of
// `row_elements` (the row, with the constant's quotient) and the rest (the
// column), through let-bound integer arithmetic.
RowSplit SplitByRow(const ir::Expr& index, int64_t row_elements, const LetValues* lets);

// The row width (in declared elements, a power of two from 2 to half the
// array) for the workgroup array `buffer` of `size` elements packed as
// `packing`, such that every access's column provably lies within its row,
// given the bounds of the loops around it in `root` (the kernel's body):
// the smallest such width, 0 where there is none or the array is not
// workgroup memory. Under robustness (Dawn's index clamping), a row that is
// a constant after unrolling needs no clamp and a column that does not
// change in the loop is clamped once, where a flat index is clamped at every
// access. Plain (unpacked) arrays qualify only if no access is a vector.
int64_t ChooseRows(const ir::Buffer& buffer, const ir::Stmt& root, int64_t size,
                   const ArrayPacking& packing, const LetValues* lets);

// The layout of the flattened (rank 1) array `op` allocates, of `size`
// elements, from every access in its body.
ArrayPacking ChoosePacking(const ir::AllocateNode* op, int64_t size,
                           const LetValues* lets = nullptr);

// The layout of a (flattened) buffer parameter read and written in `body`:
// an array of vecL where every access is a vector of width L at a provable
// multiple of L, else plain. Its binding holds the same bytes either way.
ArrayPacking ChooseParamPacking(const ir::Buffer& buffer, const ir::Stmt& body,
                                const LetValues* lets = nullptr);

}  // namespace kiln::codegen
