// Data movement (permute, reshape, concat, slice, gather, pad), where and
// cast: tensor expressions with index arithmetic, scheduled like the
// elementwise operators (one thread per output element).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kiln/ir/expr_ops.h"
#include "kiln/ops/internal.h"
#include "kiln/ops/ops.h"
#include "kiln/ops/rows.h"
#include "kiln/te/te.h"

namespace kiln::ops {
namespace {

using internal::CheckData;
using internal::Extents;

ir::Expr I32(int64_t v) {
  return ir::IntConst(ir::kI32, v);
}

// An output shape: rank 1 to 4, dimensions at least 1, at most
// kMaxTensorElements.
Status CheckOutputShape(const Shape& shape, std::string_view what) {
  return internal::CheckTensor({shape, ir::kF32}, Target{}, what);
}

StatusOr<ir::Function> LowerFlat(const te::Tensor& out, const std::vector<te::Tensor>& inputs,
                                 const Shape& out_shape, const Target& target,
                                 const std::string& name) {
  KILN_ASSIGN_OR_RETURN(te::Schedule s, te::Schedule::Create({out}));
  KILN_RETURN_IF_ERROR(internal::ScheduleFlat(s, out, static_cast<int>(out_shape.size()),
                                              NumElements(out_shape), target));
  return te::Lower(s, {out}, inputs, name, target.limits);
}

std::vector<ir::Expr> AsExprs(const std::vector<ir::Var>& v) {
  return {v.begin(), v.end()};
}

}  // namespace

StatusOr<ir::Function> Permute(const TensorType& input, const std::vector<int>& perm,
                               const Target& target, const std::string& name) {
  KILN_RETURN_IF_ERROR(CheckData(input, target, "input X of permute"));
  const int rank = static_cast<int>(input.shape.size());
  if (static_cast<int>(perm.size()) != rank) {
    return InvalidArgument("permute: perm has ", perm.size(), " entries; X has rank ", rank);
  }
  std::vector<bool> seen(rank, false);
  for (int d = 0; d < rank; ++d) {
    if (perm[d] < 0 || perm[d] >= rank || seen[perm[d]]) {
      return InvalidArgument("permute: perm entry ", d, " is ", perm[d],
                             "; perm must list each of 0 to ", rank - 1, " once");
    }
    seen[perm[d]] = true;
  }
  Shape out_shape(rank);
  for (int d = 0; d < rank; ++d) out_shape[d] = input.shape[perm[d]];
  te::Tensor X = te::Placeholder("X", Extents(input.shape), input.dtype);
  te::Tensor Y = te::Compute("Y", Extents(out_shape), [&](const std::vector<ir::Var>& i) {
    std::vector<ir::Expr> index(rank);
    for (int d = 0; d < rank; ++d) index[perm[d]] = i[d];
    return X(index);
  });
  return LowerFlat(Y, {X}, out_shape, target, name);
}

StatusOr<ir::Function> Reshape(const TensorType& input, const Shape& shape, const Target& target,
                               const std::string& name) {
  KILN_RETURN_IF_ERROR(CheckData(input, target, "input X of reshape"));
  Shape out_shape = shape;
  int inferred = -1;
  int64_t known = 1;  // (saturated past X's element count: no overflow)
  const int64_t elements = NumElements(input.shape);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == -1 && inferred < 0) {
      inferred = static_cast<int>(d);
    } else if (shape[d] < 1) {
      return InvalidArgument("reshape: dimension ", d, " of the new shape ", ShapeToString(shape),
                             " is ", shape[d],
                             "; dimensions are at least 1, or -1 (once) to infer one");
    } else {
      known = known > elements / shape[d] ? elements + 1 : known * shape[d];
    }
  }
  if (inferred >= 0) {
    if (known > elements || elements % known != 0) {
      return InvalidArgument("reshape: cannot infer dimension ", inferred, " of ",
                             ShapeToString(shape), " for X of shape ", ShapeToString(input.shape),
                             " (", elements, " elements)");
    }
    out_shape[inferred] = elements / known;
  }
  KILN_RETURN_IF_ERROR(CheckOutputShape(out_shape, "reshape: the result"));
  if (NumElements(out_shape) != elements) {
    return InvalidArgument("reshape: the new shape ", ShapeToString(out_shape), " has ",
                           NumElements(out_shape), " elements; X of shape ",
                           ShapeToString(input.shape), " has ", elements);
  }
  te::Tensor X = te::Placeholder("X", Extents(input.shape), input.dtype);
  te::Tensor Y = te::Compute("Y", Extents(out_shape), [&](const std::vector<ir::Var>& i) {
    ir::Expr flat = I32(0);
    int64_t stride = 1;
    for (int d = static_cast<int>(out_shape.size()) - 1; d >= 0; --d) {
      flat = flat + i[d] * I32(stride);
      stride *= out_shape[d];
    }
    std::vector<ir::Expr> index(input.shape.size());
    stride = 1;
    for (int d = static_cast<int>(input.shape.size()) - 1; d >= 0; --d) {
      index[d] = d == 0 ? flat / I32(stride) : (flat / I32(stride)) % I32(input.shape[d]);
      stride *= input.shape[d];
    }
    return X(index);
  });
  return LowerFlat(Y, {X}, out_shape, target, name);
}

StatusOr<ir::Function> Concat(const std::vector<TensorType>& inputs, int axis, const Target& target,
                              const std::string& name) {
  if (inputs.size() < 2) {
    return InvalidArgument("concat takes at least 2 inputs, not ", inputs.size());
  }
  for (size_t k = 0; k < inputs.size(); ++k) {
    KILN_RETURN_IF_ERROR(CheckData(inputs[k], target, StrCat("input X", k, " of concat")));
  }
  const int rank = static_cast<int>(inputs[0].shape.size());
  KILN_ASSIGN_OR_RETURN(int a, internal::NormalizeAxis(axis, rank, "concat: axis"));
  Shape out_shape = inputs[0].shape;
  out_shape[a] = 0;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const TensorType& t = inputs[k];
    if (t.dtype != inputs[0].dtype) {
      return InvalidArgument("concat: dtype mismatch: X0 is ", inputs[0].dtype.ToString(), " but X",
                             k, " is ", t.dtype.ToString());
    }
    if (static_cast<int>(t.shape.size()) != rank) {
      return InvalidArgument("concat: X", k, " has shape ", ShapeToString(t.shape), " of rank ",
                             t.shape.size(), "; X0 has rank ", rank);
    }
    for (int d = 0; d < rank; ++d) {
      if (d != a && t.shape[d] != inputs[0].shape[d]) {
        return InvalidArgument("concat: X", k, " has shape ", ShapeToString(t.shape), " and X0 ",
                               ShapeToString(inputs[0].shape), ": dimension ", d,
                               " differs (only axis ", a, " may)");
      }
    }
    out_shape[a] += t.shape[a];
  }
  KILN_RETURN_IF_ERROR(CheckOutputShape(out_shape, "concat: the result"));
  const size_t buffers = inputs.size() + 1;
  if (buffers > target.limits.max_storage_buffers_per_stage) {
    return InvalidArgument("concat uses ", buffers, " storage buffers (", inputs.size(),
                           " inputs, Y); the target allows ",
                           target.limits.max_storage_buffers_per_stage, " per stage");
  }
  std::vector<te::Tensor> xs;
  for (size_t k = 0; k < inputs.size(); ++k) {
    xs.push_back(te::Placeholder(StrCat("X", k), Extents(inputs[k].shape), inputs[0].dtype));
  }
  te::Tensor Y = te::Compute("Y", Extents(out_shape), [&](const std::vector<ir::Var>& i) {
    // From the last input backwards: if_then_else evaluates only the side
    // it takes, so no load is out of bounds.
    std::vector<int64_t> offsets(inputs.size(), 0);
    for (size_t k = 1; k < inputs.size(); ++k) {
      offsets[k] = offsets[k - 1] + inputs[k - 1].shape[a];
    }
    auto read = [&](size_t k) {
      std::vector<ir::Expr> index = AsExprs(i);
      index[a] = offsets[k] == 0 ? index[a] : index[a] - I32(offsets[k]);
      return xs[k](index);
    };
    ir::Expr value = read(inputs.size() - 1);
    for (int k = static_cast<int>(inputs.size()) - 2; k >= 0; --k) {
      value = ir::IfThenElse(i[a] < I32(offsets[k] + inputs[k].shape[a]), read(k), value);
    }
    return value;
  });
  return LowerFlat(Y, xs, out_shape, target, name);
}

StatusOr<ir::Function> Slice(const TensorType& input, const std::vector<int64_t>& starts,
                             const std::vector<int64_t>& stops, const std::vector<int64_t>& steps,
                             const Target& target, const std::string& name) {
  KILN_RETURN_IF_ERROR(CheckData(input, target, "input X of slice"));
  const int rank = static_cast<int>(input.shape.size());
  for (const auto* v : {&starts, &stops, &steps}) {
    if (static_cast<int>(v->size()) != rank) {
      const char* which = v == &starts ? "starts" : v == &stops ? "stops" : "steps";
      return InvalidArgument("slice: ", which, " has ", v->size(), " entries; X has rank ", rank,
                             " (one per axis)");
    }
  }
  Shape out_shape(rank);
  std::vector<int64_t> first(rank);
  for (int d = 0; d < rank; ++d) {
    const int64_t n = input.shape[d], step = steps[d];
    if (step == 0) return InvalidArgument("slice: step ", d, " is 0");
    if (step == std::numeric_limits<int64_t>::min()) {
      return InvalidArgument("slice: step ", d, " is out of range");
    }
    // Python's rules (PySlice_AdjustIndices).
    auto adjust = [&](int64_t v) {
      if (v < 0) {
        v = v < -n ? -1 : v + n;  // -n - 1 and below: before the start
        if (v < 0) v = step < 0 ? -1 : 0;
      } else if (v >= n) {
        v = step < 0 ? n - 1 : n;
      }
      return v;
    };
    const int64_t start = adjust(starts[d]), stop = adjust(stops[d]);
    int64_t len = 0;
    if (step > 0 && start < stop) len = (stop - start - 1) / step + 1;
    if (step < 0 && stop < start) len = (start - stop - 1) / (-step) + 1;
    if (len < 1) {
      return InvalidArgument("slice: axis ", d, " (extent ", n, ") sliced ", starts[d], ":",
                             stops[d], ":", step,
                             " is empty; every output dimension must be at "
                             "least 1");
    }
    out_shape[d] = len;
    first[d] = start;
  }
  te::Tensor X = te::Placeholder("X", Extents(input.shape), input.dtype);
  te::Tensor Y = te::Compute("Y", Extents(out_shape), [&](const std::vector<ir::Var>& i) {
    std::vector<ir::Expr> index(rank);
    for (int d = 0; d < rank; ++d) {
      ir::Expr e = steps[d] == 1 ? ir::Expr(i[d]) : i[d] * I32(steps[d]);
      index[d] = first[d] == 0 ? e : e + I32(first[d]);
    }
    return X(index);
  });
  return LowerFlat(Y, {X}, out_shape, target, name);
}

StatusOr<ir::Function> Gather(const TensorType& table, const TensorType& indices,
                              const Target& target, const std::string& name) {
  if (table.shape.size() != 2) {
    return InvalidArgument("input Table of gather has shape ", ShapeToString(table.shape),
                           " of rank ", table.shape.size(), "; it must be 2-D [V, D]");
  }
  KILN_RETURN_IF_ERROR(CheckData(table, target, "input Table of gather"));
  if (indices.dtype != ir::kI32) {
    return InvalidArgument("input Indices of gather has dtype ", indices.dtype.ToString(),
                           "; it must be i32");
  }
  KILN_RETURN_IF_ERROR(CheckData(indices, target, "input Indices of gather"));
  if (indices.shape.size() > 3) {
    return InvalidArgument("input Indices of gather has shape ", ShapeToString(indices.shape),
                           " of rank ", indices.shape.size(),
                           "; ranks 1 to 3 are supported (the result adds one axis)");
  }
  Shape out_shape = indices.shape;
  out_shape.push_back(table.shape[1]);
  KILN_RETURN_IF_ERROR(CheckOutputShape(out_shape, "gather: the result"));
  const int r = static_cast<int>(indices.shape.size());
  te::Tensor T = te::Placeholder("Table", Extents(table.shape), table.dtype);
  te::Tensor I = te::Placeholder("Indices", Extents(indices.shape), ir::kI32);
  te::Tensor Y = te::Compute("Y", Extents(out_shape), [&](const std::vector<ir::Var>& i) {
    std::vector<ir::Expr> at(i.begin(), i.begin() + r);
    ir::Expr row = ir::Min(ir::Max(I(at), I32(0)), I32(table.shape[0] - 1));
    return T(row, i[r]);
  });
  return LowerFlat(Y, {T, I}, out_shape, target, name);
}

StatusOr<ir::Function> Pad(const TensorType& input, const std::vector<int64_t>& before,
                           const std::vector<int64_t>& after, double value, const Target& target,
                           const std::string& name) {
  KILN_RETURN_IF_ERROR(CheckData(input, target, "input X of pad"));
  const int rank = static_cast<int>(input.shape.size());
  if (static_cast<int>(before.size()) != rank || static_cast<int>(after.size()) != rank) {
    return InvalidArgument("pad: before and after have ", before.size(), " and ", after.size(),
                           " entries; X has rank ", rank, " (one per axis)");
  }
  Shape out_shape(rank);
  for (int d = 0; d < rank; ++d) {
    if (before[d] < 0 || after[d] < 0) {
      return InvalidArgument("pad: axis ", d, " is padded by ", before[d], " and ", after[d],
                             "; padding must be at least 0");
    }
    if (before[d] > std::numeric_limits<int32_t>::max() ||
        after[d] > std::numeric_limits<int32_t>::max()) {
      return InvalidArgument("pad: axis ", d, " is padded by more than 2^31 - 1");
    }
    out_shape[d] = input.shape[d] + before[d] + after[d];
  }
  KILN_RETURN_IF_ERROR(CheckOutputShape(out_shape, "pad: the result"));
  if (internal::IsIntegerData(input.dtype) && !internal::IsIntegerValue(value, input.dtype)) {
    return InvalidArgument("pad: value ", internal::NumberText(value), " is not ",
                           internal::Article(input.dtype), input.dtype.ToString(),
                           " for X of dtype ", input.dtype.ToString());
  }
  const ir::Expr fill = internal::Constant(input.dtype, value);
  te::Tensor X = te::Placeholder("X", Extents(input.shape), input.dtype);
  te::Tensor Y = te::Compute("Y", Extents(out_shape), [&](const std::vector<ir::Var>& i) {
    ir::Expr inside;
    std::vector<ir::Expr> index(rank);
    for (int d = 0; d < rank; ++d) {
      index[d] = before[d] == 0 ? ir::Expr(i[d]) : i[d] - I32(before[d]);
      ir::Expr in_d;
      if (before[d] > 0) in_d = i[d] >= I32(before[d]);
      if (after[d] > 0) {
        ir::Expr hi = i[d] < I32(before[d] + input.shape[d]);
        in_d = in_d.defined() ? (in_d && hi) : hi;
      }
      if (in_d.defined()) inside = inside.defined() ? (inside && in_d) : in_d;
    }
    if (!inside.defined()) return X(index);
    return ir::IfThenElse(inside, X(index), fill);
  });
  return LowerFlat(Y, {X}, out_shape, target, name);
}

StatusOr<ir::Function> Where(const TensorType& cond, const TensorType& a, const TensorType& b,
                             const Target& target, const std::string& name) {
  KILN_RETURN_IF_ERROR(CheckData(cond, target, "input Cond of where"));
  KILN_RETURN_IF_ERROR(CheckData(a, target, "input A of where"));
  KILN_RETURN_IF_ERROR(CheckData(b, target, "input B of where"));
  if (a.dtype != b.dtype) {
    return InvalidArgument("where: dtype mismatch: A is ", a.dtype.ToString(), " but B is ",
                           b.dtype.ToString());
  }
  if (!internal::IsIntegerData(cond.dtype) && cond.dtype != a.dtype) {
    return InvalidArgument("where: Cond is ", cond.dtype.ToString(),
                           "; it must be i32, u32 or A's dtype ", a.dtype.ToString());
  }
  StatusOr<Shape> ab = BroadcastShapes(a.shape, b.shape);
  if (!ab.ok()) return ab.status().WithContext("where: A and B");
  StatusOr<Shape> out = BroadcastShapes(cond.shape, *ab);
  if (!out.ok()) return out.status().WithContext("where: Cond and the broadcast of A and B");
  const Shape out_shape = *out;
  te::Tensor C = te::Placeholder("Cond", Extents(cond.shape), cond.dtype);
  te::Tensor A = te::Placeholder("A", Extents(a.shape), a.dtype);
  te::Tensor B = te::Placeholder("B", Extents(b.shape), b.dtype);
  te::Tensor Y = te::Compute("C", Extents(out_shape), [&](const std::vector<ir::Var>& i) {
    return internal::ApplyWhere(C(internal::BroadcastIndex(cond.shape, out_shape, i)),
                                A(internal::BroadcastIndex(a.shape, out_shape, i)),
                                B(internal::BroadcastIndex(b.shape, out_shape, i)));
  });
  return LowerFlat(Y, {C, A, B}, out_shape, target, name);
}

StatusOr<ir::Function> Cast(const TensorType& input, ir::DataType dtype, const Target& target,
                            std::string name) {
  KILN_RETURN_IF_ERROR(CheckData(input, target, "input X of cast"));
  KILN_RETURN_IF_ERROR(CheckData({input.shape, dtype}, target, "the result type of cast"));
  if (name.empty()) name = StrCat("cast_", dtype.ToString());
  te::Tensor X = te::Placeholder("X", Extents(input.shape), input.dtype);
  te::Tensor Y = te::Compute("Y", Extents(input.shape), [&](const std::vector<ir::Var>& i) {
    return internal::ApplyCast(X(AsExprs(i)), dtype);
  });
  return LowerFlat(Y, {X}, input.shape, target, name);
}

StatusOr<ir::Function> UnpackBytes(const TensorType& input, const Target& target,
                                   std::string name) {
  if (input.dtype != ir::kI8 && input.dtype != ir::kU8) {
    return InvalidArgument("input X of unpack_bytes has dtype ", input.dtype.ToString(),
                           "; it takes i8 or u8");
  }
  const int64_t n = NumElements(input.shape);
  KILN_RETURN_IF_ERROR(CheckOutputShape({n}, "the result of unpack_bytes"));
  const int64_t words = (n + 3) / 4;
  const bool is_signed = input.dtype == ir::kI8;
  if (name.empty()) name = is_signed ? "unpack_i8" : "unpack_u8";
  te::Tensor X = te::Placeholder("X", Extents({words}), ir::kI32);
  te::Tensor Y = te::Compute("Y", Extents({n}), [&](const std::vector<ir::Var>& i) {
    const ir::Expr word = X({i[0] / 4}), lane = i[0] % 4;
    if (is_signed) {  // the byte moved to the top, then back with its sign
      return ir::Call(
          ir::Intrinsic::kShiftRight,
          {ir::Call(ir::Intrinsic::kShiftLeft, {word, 24 - lane * 8}), ir::IntConst(ir::kI32, 24)});
    }
    return ir::Call(
        ir::Intrinsic::kBitwiseAnd,
        {ir::Call(ir::Intrinsic::kShiftRight, {word, lane * 8}), ir::IntConst(ir::kI32, 255)});
  });
  return LowerFlat(Y, {X}, {n}, target, name);
}

StatusOr<ir::Function> PackBytes(const Shape& shape, const Target& target, std::string name) {
  KILN_RETURN_IF_ERROR(internal::CheckTensor({shape, ir::kF32}, target, "input X of pack_bytes"));
  const int64_t n = NumElements(shape), words = (n + 3) / 4;
  if (name.empty()) name = "pack_bytes";
  te::Tensor X = te::Placeholder("X", Extents({n}), ir::kI32);
  te::Tensor Y = te::Compute("Y", Extents({words}), [&](const std::vector<ir::Var>& i) {
    ir::Expr packed;
    for (int k = 0; k < 4; ++k) {
      const ir::Expr at = i[0] * 4 + k;
      // Lanes past the last element (only in the last word) are 0, their
      // index clamped so that nothing is read out of bounds.
      const bool tail = 4 * (words - 1) + k >= n;
      const ir::Expr value = X({tail ? ir::Min(at, ir::IntConst(ir::kI32, n - 1)) : at});
      ir::Expr byte =
          ir::Call(ir::Intrinsic::kShiftLeft,
                   {ir::Call(ir::Intrinsic::kBitwiseAnd, {value, ir::IntConst(ir::kI32, 255)}),
                    ir::IntConst(ir::kI32, 8 * k)});
      if (tail) byte = ir::Select(at < ir::IntConst(ir::kI32, n), byte, ir::IntConst(ir::kI32, 0));
      packed = k == 0 ? byte : ir::Call(ir::Intrinsic::kBitwiseOr, {packed, byte});
    }
    return packed;
  });
  return LowerFlat(Y, {X}, {words}, target, name);
}

}  // namespace kiln::ops
