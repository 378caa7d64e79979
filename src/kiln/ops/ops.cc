// Shapes, op names, argument checks and the default flat schedule.
#include "kiln/ops/ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <numbers>
#include <set>
#include <string>
#include <vector>

#include "kiln/ir/expr_nodes.h"
#include "kiln/ir/expr_ops.h"
#include "kiln/ir/visitor.h"
#include "kiln/ops/internal.h"

namespace kiln::ops {

std::string ShapeToString(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

StatusOr<Shape> BroadcastShapes(const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Dimension i counted from the right.
    const int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1) {
      return InvalidArgument("shapes ", ShapeToString(a), " and ", ShapeToString(b),
                             " do not broadcast: dimension ", rank - 1 - i, " of the result is ",
                             da, " in the first and ", db,
                             " in the second (dimensions must be equal or 1, aligned on the "
                             "right)");
    }
    out[rank - 1 - i] = da == 1 ? db : da;
  }
  // Each input holds at most kMaxTensorElements (CheckTensor); the result
  // of broadcasting two of them may not.
  int64_t elements = 1;
  for (int64_t d : out) {
    if (d > 0 && elements > kMaxTensorElements / d) {
      return InvalidArgument("shapes ", ShapeToString(a), " and ", ShapeToString(b),
                             " broadcast to ", ShapeToString(out), ": more than 2^30 elements");
    }
    elements *= d;
  }
  return out;
}

const std::vector<std::string_view>& UnaryOpNames() {
  static const std::vector<std::string_view> kNames = {
      "neg",   "abs",    "exp",        "exp2",  "log",     "log2",        "sqrt",
      "rsqrt", "sin",    "cos",        "tanh",  "sigmoid", "erf",         "floor",
      "ceil",  "round",  "trunc",      "relu",  "gelu",    "bitwise_not", "popcount",
      "sign",  "square", "reciprocal", "isnan", "isinf",   "isfinite"};
  return kNames;
}

const std::vector<std::string_view>& PredicateOpNames() {
  static const std::vector<std::string_view> kNames = {"isnan", "isinf", "isfinite"};
  return kNames;
}

const std::vector<std::string_view>& BinaryOpNames() {
  static const std::vector<std::string_view> kNames = {
      "add", "sub", "mul",         "div",        "floor_div",   "floor_mod",  "max",
      "min", "pow", "bitwise_and", "bitwise_or", "bitwise_xor", "shift_left", "shift_right"};
  return kNames;
}

const std::vector<std::string_view>& CompareOpNames() {
  static const std::vector<std::string_view> kNames = {"eq", "ne", "lt", "le", "gt", "ge"};
  return kNames;
}

const std::vector<std::string_view>& TernaryOpNames() {
  static const std::vector<std::string_view> kNames = {"fma", "clamp"};
  return kNames;
}

namespace {

bool OneOf(std::string_view op, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), op) != names.end();
}

// Ops on integers only, and ops on floats only; every other elementwise op
// takes both.
bool IntegerOnly(std::string_view op) {
  return OneOf(op, {"bitwise_not", "popcount", "bitwise_and", "bitwise_or", "bitwise_xor",
                    "shift_left", "shift_right"});
}
bool FloatOnly(std::string_view op) {
  return OneOf(op, {"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid",
                    "erf", "floor", "ceil", "round", "trunc", "gelu", "fma", "reciprocal"}) ||
         std::ranges::find(PredicateOpNames(), op) != PredicateOpNames().end();
}

// x ** e on integers: square-and-multiply over the 31 bits of e >= 0 (32
// on u32), the products wrapping; for e < 0 the truncation of 1 / x ** -e
// (1 for x = 1, +-1 for x = -1, else 0, 0 ** e included).
ir::Expr IntegerPow(const ir::Expr& a, const ir::Expr& b) {
  const ir::DataType t = a.dtype();
  auto c = [&](int64_t v) { return ir::IntConst(t, v); };
  ir::Var x("pow_x", t), e("pow_e", t);
  std::vector<std::pair<ir::Var, ir::Expr>> lets;
  ir::Expr result = c(1), base = x;
  const int bits = t.is_uint() ? 32 : 31;
  for (int bit = 0; bit < bits; ++bit) {
    ir::Var r(StrCat("pow_r", bit), t);
    const ir::Expr set = ir::Call(ir::Intrinsic::kBitwiseAnd, {e, c(int64_t{1} << bit)}) != c(0);
    lets.emplace_back(r, ir::Select(set, result * base, result));
    result = r;
    if (bit + 1 < bits) {
      ir::Var sq(StrCat("pow_b", bit + 1), t);
      lets.emplace_back(sq, base * base);
      base = sq;
    }
  }
  ir::Expr out = result;
  if (!t.is_uint()) {
    const ir::Expr odd = ir::Call(ir::Intrinsic::kBitwiseAnd, {e, c(1)}) != c(0);
    const ir::Expr negative =
        ir::Select(x == c(1), c(1), ir::Select(x == c(-1), ir::Select(odd, c(-1), c(1)), c(0)));
    out = ir::Select(e < c(0), negative, result);
  }
  for (size_t k = lets.size(); k-- > 0;) out = ir::Let(lets[k].first, lets[k].second, out);
  return ir::Let(x, a, ir::Let(e, b, out));
}

}  // namespace

bool ElementwiseOpTakes(std::string_view op, ir::DataType dtype) {
  const bool is_float = dtype == ir::kF32 || dtype == ir::kF16;
  const bool is_int = dtype == ir::kI32 || dtype == ir::kU32;
  if (!is_int && !is_float) return false;
  if (IntegerOnly(op)) return is_int;
  if (FloatOnly(op)) return is_float;
  return true;
}

const std::vector<std::string_view>& ReduceOpNames() {
  static const std::vector<std::string_view> kNames = {"sum", "mean", "max", "min", "prod"};
  return kNames;
}

int64_t ThreadsPerBlock(int64_t elements, const TargetLimits& limits) {
  int64_t cap =
      std::min<int64_t>({256, limits.max_invocations_per_workgroup, limits.max_workgroup_size_x});
  cap = std::max<int64_t>(cap, 1);
  int64_t pow2 = 1;
  while (pow2 < elements && pow2 < cap) pow2 *= 2;
  return std::min(pow2, cap);
}

namespace internal {

ir::Expr FloatBits(const ir::Expr& x) {
  const ir::DataType t = x.dtype();
  return ir::Reinterpret(ir::kU32.with_lanes(t.lanes),
                         t.bits == 32 ? x : ir::Cast(ir::DataType::Float(32, t.lanes), x));
}

ir::Expr FromFloatBits(const ir::Expr& bits, ir::DataType t) {
  ir::Expr r = ir::Reinterpret(ir::DataType::Float(32, t.lanes), bits);
  return t.bits == 32 ? r : ir::Cast(t, r);
}

namespace {
// A u32 constant with x's lanes.
ir::Expr BitsConst(const ir::Expr& x, uint32_t v) {
  return ir::IntConst(ir::kU32.with_lanes(x.dtype().lanes), v);
}
}  // namespace

ir::Expr SignBits(const ir::Expr& x) {
  return ir::Call(ir::Intrinsic::kBitwiseAnd, {FloatBits(x), BitsConst(x, 0x80000000u)});
}

Status CheckOpDtype(std::string_view op, ir::DataType dtype, std::string_view what) {
  if (ElementwiseOpTakes(op, dtype)) return Status::Ok();
  return InvalidArgument(what, " is ", dtype.ToString(), ", but ", op, " takes ",
                         IntegerOnly(op) ? "i32 or u32"
                         : FloatOnly(op) ? "f32 or f16"
                                         : "f32, f16, i32 or u32",
                         " tensors");
}

Status CheckData(const TensorType& t, const Target& target, std::string_view what) {
  if (IsIntegerData(t.dtype)) return CheckTensor({t.shape, ir::kF32}, target, what);
  if (t.dtype != ir::kF32 && t.dtype != ir::kF16) {
    return InvalidArgument(what, " has dtype ", t.dtype.ToString(),
                           "; supported dtypes are f32, f16, i32 and u32");
  }
  return CheckTensor(t, target, what);
}

bool IsIntegerData(ir::DataType t) {
  return t == ir::kI32 || t == ir::kU32;
}

bool IsIntegerValue(double v, ir::DataType t) {
  if (!(v == std::trunc(v))) return false;  // (NaN and the infinities too)
  if (t == ir::kU32) return v >= 0 && v <= 4294967295.0;
  return v >= -2147483648.0 && v <= 2147483647.0;
}

ir::Expr Constant(ir::DataType t, double v) {
  return IsIntegerData(t) ? ir::IntConst(t, static_cast<int64_t>(v)) : ir::FloatConst(t, v);
}

Status CheckTensor(const TensorType& t, const Target& target, std::string_view what) {
  const int rank = static_cast<int>(t.shape.size());
  if (rank < 1 || rank > 4) {
    return InvalidArgument(what, " has shape ", ShapeToString(t.shape), " of rank ", rank,
                           "; ranks 1 to 4 are supported");
  }
  int64_t elements = 1;
  for (int d = 0; d < rank; ++d) {
    if (t.shape[d] < 1) {
      return InvalidArgument(what, " has shape ", ShapeToString(t.shape), ": dimension ", d, " is ",
                             t.shape[d], "; every dimension must be at least 1");
    }
    if (t.shape[d] > kMaxTensorElements / elements) {
      return InvalidArgument(what, " has shape ", ShapeToString(t.shape),
                             ": more than 2^30 elements");
    }
    elements *= t.shape[d];
  }
  if (t.dtype == ir::kF16) {
    if (!target.shader_f16) {
      // A feature the device lacks, not a wrong argument (as kernels that
      // need it are refused at load).
      return Unavailable(what, " is f16, but the target has no shader-f16");
    }
  } else if (t.dtype != ir::kF32) {
    return InvalidArgument(what, " has dtype ", t.dtype.ToString(),
                           "; supported dtypes are f32 and f16");
  }
  return Status::Ok();
}

std::vector<ir::Expr> Extents(const Shape& shape) {
  std::vector<ir::Expr> out;
  out.reserve(shape.size());
  for (int64_t d : shape) out.push_back(ir::IntConst(ir::kI32, d));
  return out;
}

std::vector<ir::Expr> UnflattenIndex(ir::IRBuilder& b, const ir::Expr& flat, const Shape& dims,
                                     std::string_view prefix) {
  std::vector<ir::Expr> coords(dims.size());
  int64_t stride = 1;
  for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
    coords[d] =
        b.Let(StrCat(prefix, d), (flat / static_cast<int>(stride)) % static_cast<int>(dims[d]));
    stride *= dims[d];
  }
  return coords;
}

std::vector<ir::Expr> BroadcastIndex(const Shape& shape, const Shape& out_shape,
                                     const std::vector<ir::Var>& out_index) {
  std::vector<ir::Expr> index;
  index.reserve(shape.size());
  const size_t offset = out_shape.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1 && out_shape[offset + d] != 1) {
      index.push_back(ir::IntConst(ir::kI32, 0));
    } else {
      index.push_back(out_index[offset + d]);
    }
  }
  return index;
}

namespace {

bool Listed(const std::vector<std::string_view>& names, std::string_view op) {
  return std::find(names.begin(), names.end(), op) != names.end();
}

}  // namespace

std::string NumberText(double v) {
  char text[32];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, v);
    if (std::strtod(text, nullptr) == v || v != v) break;
  }
  return text;
}

bool IsUnary(std::string_view op) {
  return Listed(UnaryOpNames(), op);
}
bool IsBinary(std::string_view op) {
  return Listed(BinaryOpNames(), op);
}
bool IsCompare(std::string_view op) {
  return Listed(CompareOpNames(), op);
}
bool IsTernary(std::string_view op) {
  return Listed(TernaryOpNames(), op);
}
bool GivesBool(std::string_view op) {
  return IsCompare(op) || Listed(PredicateOpNames(), op);
}

Status CheckActivation(const std::string& activation, std::string_view op) {
  if (activation.empty()) return Status::Ok();
  if (!IsUnary(activation)) {
    // Known: the unary ops an activation may be (of f32, giving a value).
    std::vector<std::string_view> known;
    for (std::string_view name : UnaryOpNames()) {
      if (!GivesBool(name) && ElementwiseOpTakes(name, ir::kF32)) known.push_back(name);
    }
    return UnknownOp("activation", activation, known);
  }
  if (GivesBool(activation)) {
    return InvalidArgument(op, ": activation ", activation,
                           " gives 0 or 1 for a predicate, not a value of the sum's dtype");
  }
  return CheckOpDtype(activation, ir::kF32, StrCat(op, ": the activation's input (the f32 sum)"));
}

std::vector<std::string_view> ElementwiseOpNames() {
  std::vector<std::string_view> all;
  for (const auto* names :
       {&UnaryOpNames(), &BinaryOpNames(), &CompareOpNames(), &TernaryOpNames()}) {
    all.insert(all.end(), names->begin(), names->end());
  }
  return all;
}

Status UnknownOp(std::string_view kind, std::string_view op,
                 const std::vector<std::string_view>& known) {
  std::string list;
  for (std::string_view n : known) {
    if (!list.empty()) list += ", ";
    list += n;
  }
  return InvalidArgument("unknown ", kind, " op '", op, "'; known: ", list);
}

namespace {

ir::Expr Intrinsic1(ir::Intrinsic fn, const ir::Expr& x) {
  return ir::Call(fn, {x});
}

// A bool (or bool vector) as i32 1 or 0, the library's bool results.
ir::Expr BoolAsI32(const ir::Expr& c) {
  return ir::Cast(ir::kI32.with_lanes(c.dtype().lanes), c);
}

ir::Expr Zero(ir::DataType t) {
  return t.is_float() ? ir::FloatConst(t, 0.0) : ir::IntConst(t, 0);
}

// |x|'s bits: 0x7f800000 separates the finite values, the infinities and NaN.
ir::Expr MagnitudeBits(const ir::Expr& x) {
  return ir::Call(ir::Intrinsic::kBitwiseAnd, {FloatBits(x), BitsConst(x, 0x7fffffffu)});
}

}  // namespace

ir::Expr IsNan(const ir::Expr& x) {
  return MagnitudeBits(x) > BitsConst(x, 0x7f800000u);
}

ir::Expr IsInf(const ir::Expr& x) {
  return MagnitudeBits(x) == BitsConst(x, 0x7f800000u);
}

ir::Expr IsNonFinite(const ir::Expr& x) {
  return MagnitudeBits(x) >= BitsConst(x, 0x7f800000u);
}

namespace {

// numpy's floor_divide and remainder for floats. numpy floors the exact
// quotient; q = floor(a / b) of the rounded quotient can be one too large
// (1.0 / 0.1 rounds to 10 in f32) or, with WGSL's division (2.5 ulp), one
// too small (6 / 3 computed as 1.9999999). The remainders a - q * b and
// a - (q + 1) * b, each one fma, say which: q is too large where the first
// has the sign opposite to b's, too small where the second is zero or has
// b's sign. The remainder is then a - q' * b for the corrected q', as one
// fma again; a zero takes b's sign. Where the device fuses the fma (one
// rounding), the remainders are exact while |q| < 2^24 (2^11 for f16), q is
// at most one off while |a / b| < 2^20 (2^8), and the results are numpy's
// there; where it rounds the product first (lavapipe),
// q' and the remainder are those of the rounded quotient. (A NaN or
// infinite q, from NaN operands or a quotient beyond the type's range,
// stays NaN or infinite either way.) At the infinities: an infinite
// dividend gives NaN (numpy takes fmod(inf, b) first; a / b for b == 0
// stays), and a finite dividend over an infinite divisor gives -1 and b
// where their signs differ (a != 0), else a zero of the quotient's sign and
// a (a zero of b's sign for a == 0).
ir::Expr FloatFloorDivOrMod(bool mod, const ir::Expr& a, const ir::Expr& b) {
  const ir::DataType t = a.dtype();
  const std::string p = mod ? "fmod_" : "fdiv_";
  ir::Var x(p + "a", t), y(p + "b", t), q(p + "q", t), r(p + "r", t), r1(p + "r1", t),
      fixed(p + "fixed", t);
  auto f = [&](double v) { return ir::FloatConst(t, v); };
  auto remainder = [&](const ir::Expr& quotient) {
    return ir::Call(ir::Intrinsic::kFma, {-quotient, y, x});
  };
  const ir::Expr zero_like_b = FromFloatBits(SignBits(y), t);
  // (under is read only where over is false.)
  const ir::Expr over = r != f(0) && SignBits(r) != SignBits(y);
  const ir::Expr under = r1 == f(0) || SignBits(r1) == SignBits(y);
  ir::Expr finite = fixed;
  if (mod) {
    ir::Var m(p + "m", t);
    finite = ir::Let(m, remainder(fixed), ir::Select(m == f(0), zero_like_b, m));
  }
  finite = ir::Let(
      q, ir::Call(ir::Intrinsic::kFloor, {x / y}),
      ir::Let(r, remainder(q),
              ir::Let(r1, remainder(q + f(1)),
                      ir::Let(fixed, ir::Select(over, q - f(1), ir::Select(under, q + f(1), q)),
                              finite))));
  const ir::Expr differ = SignBits(x) != SignBits(y) && x != f(0);
  const ir::Expr by_inf = IsInf(y) && !IsNonFinite(x);
  const ir::Expr nan = f(std::numeric_limits<double>::quiet_NaN());
  ir::Expr out;
  // b == 0 is spelled apart: a driver may fold fma(-q, 0.0, a) to a where
  // b is a constant zero (lavapipe does), and a % 0 is NaN.
  if (mod) {
    out = ir::Select(by_inf, ir::Select(x == f(0), zero_like_b, ir::Select(differ, y, x)), finite);
    out = ir::Select(IsInf(x) || y == f(0), nan, out);
  } else {
    out = ir::Select(by_inf, ir::Select(differ, f(-1), x / y), finite);
    out = ir::Select(y == f(0), x / y, ir::Select(IsInf(x), nan, out));
  }
  return ir::Let(x, a, ir::Let(y, b, out));
}

// numpy's power for floats, from WGSL's pow (defined only for positive
// bases): the magnitude is pow(|x|, y); a zero base gives 0 for y > 0 and
// inf for y < 0; a negative base (-0.0 too) gives the magnitude with the sign of an
// odd integer exponent, NaN for a finite one that is not an integer; NaN in
// either operand gives NaN, except that y == 0 and x == 1 give 1, as do
// |x| == 1 with an infinite y. A constant exponent of 0 to 4 multiplies; a
// constant 0.5 is numpy's square root (NaN for -inf, -0.0 for -0.0, where
// an exponent of 0.5 in a tensor gives C's pow: inf and 0.0).
ir::Expr FloatPow(const ir::Expr& a, const ir::Expr& b) {
  const ir::DataType t = a.dtype();
  auto f = [&](double v) { return ir::FloatConst(t, v); };
  if (const auto* c = b.as<ir::FloatImmNode>(); c != nullptr && c->value == 0.5) {
    ir::Var x("pow_x", t);
    return ir::Let(x, a,
                   ir::Select(x < f(0) || IsNan(x), f(std::numeric_limits<double>::quiet_NaN()),
                              ir::Select(x == f(0), x, ir::Call(ir::Intrinsic::kSqrt, {x}))));
  }
  if (const auto* c = b.as<ir::FloatImmNode>();
      c != nullptr && c->value >= 0 && c->value <= 4 && c->value == std::floor(c->value)) {
    const int n = static_cast<int>(c->value);
    if (n == 0) return f(1);
    if (n == 1) return a;
    ir::Var x("pow_x", t), sq("pow_sq", t);
    const ir::Expr body = n == 2 ? ir::Expr(sq) : n == 3 ? sq * x : sq * sq;
    return ir::Let(x, a, ir::Let(sq, x * x, body));
  }
  ir::Var x("pow_x", t), y("pow_y", t), ax("pow_abs", t);
  const ir::Expr inf = f(std::numeric_limits<double>::infinity());
  const ir::Expr nan = f(std::numeric_limits<double>::quiet_NaN());
  const ir::Expr floor_y = ir::Call(ir::Intrinsic::kFloor, {y});
  const ir::Expr integral = floor_y == y;  // false for NaN, true for +-inf
  const ir::Expr odd =
      integral && (y - f(2) * ir::Call(ir::Intrinsic::kFloor, {y * f(0.5)})) == f(1);
  ir::Var m("pow_m", t);
  const ir::Expr magnitude = ir::Select(ax == f(0), ir::Select(y > f(0), f(0), inf),
                                        ir::Call(ir::Intrinsic::kPow, {ax, y}));
  // The sign comes from x's sign bit, not x < 0 (pow(-0.0, odd y) is -0.0
  // or -inf), and goes onto the magnitude's bits.
  const ir::Expr sign = BitsConst(x, 0x80000000u);
  ir::Expr r = FromFloatBits(
      ir::Call(ir::Intrinsic::kBitwiseOr,
               {FloatBits(m), ir::Select(SignBits(x) == sign && odd, sign, BitsConst(x, 0))}),
      t);
  r = ir::Select((x < f(0) && !integral && ax != inf) || IsNan(x) || IsNan(y), nan, r);
  r = ir::Select(
      y == f(0) || x == f(1) || (ax == f(1) && ir::Call(ir::Intrinsic::kAbs, {y}) == inf), f(1), r);
  return ir::Let(
      x, a,
      ir::Let(y, b, ir::Let(ax, ir::Call(ir::Intrinsic::kAbs, {x}), ir::Let(m, magnitude, r))));
}

}  // namespace

ir::Expr ApplyUnary(std::string_view op, const ir::Expr& x) {
  const ir::DataType t = x.dtype();
  // f16 gelu and sigmoid compute in f32 and round once: in f16, 1 + erf(x)
  // cancels below x = -2.5 (gelu(-4) came out 0) and exp(-x) overflows
  // below x = -11.1 (sigmoid 0 where f16 holds 1.4e-5).
  if ((op == "gelu" || op == "sigmoid") && t.is_float() && t.bits == 16) {
    return ir::Cast(t, ApplyUnary(op, ir::Cast(ir::kF32.with_lanes(t.lanes), x)));
  }
  // u32: numpy's wrapping negation, and abs the identity.
  if (op == "neg") return t.is_uint() ? ir::IntConst(t, 0) - x : -x;
  if (op == "abs") return t.is_uint() ? x : Intrinsic1(ir::Intrinsic::kAbs, x);
  if (op == "exp") return Intrinsic1(ir::Intrinsic::kExp, x);
  if (op == "exp2") return Intrinsic1(ir::Intrinsic::kExp2, x);
  if (op == "log") return Intrinsic1(ir::Intrinsic::kLog, x);
  if (op == "log2") return Intrinsic1(ir::Intrinsic::kLog2, x);
  if (op == "sqrt") return Intrinsic1(ir::Intrinsic::kSqrt, x);
  if (op == "rsqrt") return Intrinsic1(ir::Intrinsic::kRsqrt, x);
  if (op == "sin") return Intrinsic1(ir::Intrinsic::kSin, x);
  if (op == "cos") return Intrinsic1(ir::Intrinsic::kCos, x);
  if (op == "tanh") return Intrinsic1(ir::Intrinsic::kTanh, x);
  if (op == "sigmoid") return Intrinsic1(ir::Intrinsic::kSigmoid, x);
  if (op == "erf") return Intrinsic1(ir::Intrinsic::kErf, x);
  if (op == "floor") return Intrinsic1(ir::Intrinsic::kFloor, x);
  if (op == "ceil") return Intrinsic1(ir::Intrinsic::kCeil, x);
  if (op == "round") return Intrinsic1(ir::Intrinsic::kRound, x);
  if (op == "trunc") return Intrinsic1(ir::Intrinsic::kTrunc, x);
  if (op == "bitwise_not") return Intrinsic1(ir::Intrinsic::kBitwiseNot, x);
  if (op == "popcount") return Intrinsic1(ir::Intrinsic::kPopcount, x);
  // relu and gelu read x twice: x is let-bound, so that a chain of them
  // inlined into one another stays linear in size.
  if (op == "relu" || op == "gelu") {
    ir::Var v(std::string(op) + "_x", t);
    // Values up to 0 become 0 (-0.0 too); NaN stays NaN: numpy's
    // maximum(x, 0).
    if (op == "relu") return ir::Let(v, x, ir::Select(v <= Zero(t), Zero(t), v));
    // x/2 * (1 + erf(x / sqrt(2))), the exact form.
    return ir::Let(
        v, x, v * 0.5 * (Intrinsic1(ir::Intrinsic::kErf, v * (1.0 / std::numbers::sqrt2)) + 1.0));
  }
  if (op == "sign") {
    ir::Var v("sign_x", t);
    if (t.is_uint()) return ir::Let(v, x, ir::Select(v > Zero(t), ir::IntConst(t, 1), Zero(t)));
    if (!t.is_float()) {
      const ir::Expr one = ir::IntConst(t, 1);
      return ir::Let(v, x, ir::Select(v > Zero(t), one, ir::Select(v < Zero(t), -one, Zero(t))));
    }
    // numpy's: -1, 0 or 1, a zero of either sign giving +0; NaN stays NaN.
    // Built from the bits (1.0's with x's sign bit), since a driver free to
    // ignore the sign of zero may turn a float select of 0.0 into -0.0.
    const ir::Expr one_bits =
        ir::Call(ir::Intrinsic::kBitwiseOr, {SignBits(v), BitsConst(v, 0x3f800000u)});
    const ir::Expr bits =
        ir::Select(IsNan(v), FloatBits(v),
                   ir::Select(MagnitudeBits(v) == BitsConst(v, 0), BitsConst(v, 0), one_bits));
    return ir::Let(v, x, FromFloatBits(bits, t));
  }
  if (op == "square") {
    ir::Var v("square_x", t);
    return ir::Let(v, x, v * v);
  }
  if (op == "reciprocal") return ir::FloatConst(t, 1.0) / x;
  if (op == "isnan" || op == "isinf" || op == "isfinite") {
    // From the bits, which no driver's fast arithmetic rearranges.
    return BoolAsI32(op == "isnan" ? IsNan(x) : op == "isinf" ? IsInf(x) : !IsNonFinite(x));
  }
  KILN_CHECK_MSG(false, "unknown unary op ", op);
  return {};
}

ir::Expr ApplyBinary(std::string_view op, const ir::Expr& a, const ir::Expr& b) {
  if (op == "add") return a + b;
  if (op == "sub") return a - b;
  if (op == "mul") return a * b;
  if (op == "div") return a / b;
  if (op == "floor_div" || op == "floor_mod") {
    const bool mod = op == "floor_mod";
    if (a.dtype().is_float() && a.dtype().bits == 16) {
      // numpy's float16 computes in float32 and rounds once: the quotient
      // (65504 / 3) need not be an f16, nor a product on the way.
      const ir::DataType f32 = ir::DataType::Float(32).with_lanes(a.dtype().lanes);
      return ir::Cast(a.dtype(), FloatFloorDivOrMod(mod, ir::Cast(f32, a), ir::Cast(f32, b)));
    }
    if (a.dtype().is_float()) return FloatFloorDivOrMod(mod, a, b);
    return mod ? ir::FloorMod(a, b) : ir::FloorDiv(a, b);
  }
  if ((op == "max" || op == "min") && a.dtype().is_float()) {
    // numpy's maximum and minimum: NaN where either is NaN (WGSL's max and
    // min may return either operand then), the second operand on a tie
    // (maximum(0.0, -0.0) is -0.0).
    ir::Var x(std::string(op) + "_a", a.dtype()), y(std::string(op) + "_b", b.dtype());
    const ir::Expr x_wins = op == "max" ? x > y : x < y;
    return ir::Let(x, a, ir::Let(y, b, ir::Select(IsNan(x) || x_wins, x, y)));
  }
  if (op == "max") return ir::Max(a, b);
  if (op == "min") return ir::Min(a, b);
  if (op == "pow") {
    return a.dtype().is_float() ? FloatPow(a, b) : IntegerPow(a, b);
  }
  if (op == "bitwise_and") return ir::Call(ir::Intrinsic::kBitwiseAnd, {a, b});
  if (op == "bitwise_or") return ir::Call(ir::Intrinsic::kBitwiseOr, {a, b});
  if (op == "bitwise_xor") return ir::Call(ir::Intrinsic::kBitwiseXor, {a, b});
  if (op == "shift_left") return ir::Call(ir::Intrinsic::kShiftLeft, {a, b});
  if (op == "shift_right") return ir::Call(ir::Intrinsic::kShiftRight, {a, b});
  KILN_CHECK_MSG(false, "unknown binary op ", op);
  return {};
}

ir::Expr ApplyCompare(std::string_view op, const ir::Expr& a, const ir::Expr& b) {
  ir::Expr c;
  if (op == "eq") c = a == b;
  if (op == "ne") c = a != b;
  if (op == "lt") c = a < b;
  if (op == "le") c = a <= b;
  if (op == "gt") c = a > b;
  if (op == "ge") c = a >= b;
  KILN_CHECK_MSG(c.defined(), "unknown comparison ", op);
  return BoolAsI32(c);
}

ir::Expr ApplyTernary(std::string_view op, const ir::Expr& a, const ir::Expr& b,
                      const ir::Expr& c) {
  if (op == "fma") return ir::Call(ir::Intrinsic::kFma, {a, b, c});
  KILN_CHECK_MSG(op == "clamp", "unknown ternary op ", op);
  // numpy's clip: min(max(x, lo), hi), a NaN in any of them giving NaN.
  const ir::DataType t = a.dtype();
  ir::Var x("clamp_x", t), lo("clamp_lo", t), hi("clamp_hi", t), r("clamp_r", t);
  const bool is_float = t.is_float();
  ir::Expr raise = is_float ? (IsNan(lo) || x < lo) : x < lo;
  ir::Expr lower = is_float ? (IsNan(hi) || r > hi) : r > hi;
  return ir::Let(
      x, a,
      ir::Let(lo, b,
              ir::Let(hi, c, ir::Let(r, ir::Select(raise, lo, x), ir::Select(lower, hi, r)))));
}

ir::Expr ApplyWhere(const ir::Expr& cond, const ir::Expr& a, const ir::Expr& b) {
  const ir::DataType t = cond.dtype();
  ir::Expr zero = t.is_float() ? ir::FloatConst(t, 0.0) : ir::IntConst(t, 0);
  return ir::Select(cond != zero, a, b);
}

ir::Expr ApplyCast(const ir::Expr& x, ir::DataType dtype) {
  if (x.dtype() == dtype) return x;
  // f16 to i32 or u32 goes through f32 (the IR's rule; explicit for the
  // backends).
  if (x.dtype() == ir::kF16 && (dtype == ir::kI32 || dtype == ir::kU32)) {
    return ir::Cast(dtype, ir::Cast(ir::kF32, x));
  }
  return ir::Cast(dtype, x);
}

namespace {

// Whether `t`'s body, or that of a compute it reads (inlined into it), has
// an if_then_else: its condition would depend on the vector lane, which the
// Vectorize pass cannot turn into vector code.
bool HasIfThenElse(const te::Tensor& t) {
  class Finder : public ir::ExprVisitor {
   public:
    void VisitCall(const ir::CallNode* op) override {
      found |= op->op == ir::Intrinsic::kIfThenElse;
      ir::ExprVisitor::VisitCall(op);
    }
    bool found = false;
  };
  Finder finder;
  std::vector<const te::OperationNode*> stack = {t.op()};
  std::set<const te::OperationNode*> seen;
  while (!stack.empty() && !finder.found) {
    const te::OperationNode* op = stack.back();
    stack.pop_back();
    if (op->is_placeholder || !seen.insert(op).second) continue;
    finder.VisitExpr(op->body);
    for (const te::Tensor& in : op->inputs) stack.push_back(in.op());
  }
  return finder.found;
}

}  // namespace

StatusOr<int> NormalizeAxis(int64_t axis, int rank, std::string_view what) {
  if (axis < -rank || axis >= rank) {
    return InvalidArgument(what, " is ", axis, "; for a tensor of rank ", rank, " it must be in [",
                           -rank, ", ", rank, ")");
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

Status ScheduleFlat(te::Schedule& schedule, const te::Tensor& t, int rank, int64_t elements,
                    const Target& target) {
  te::Stage stage = schedule[t];
  te::IterVar fused = stage.axis(0);
  for (int d = 1; d < rank; ++d) {
    KILN_ASSIGN_OR_RETURN(fused, stage.Fuse(fused, stage.axis(d)));
  }
  const int64_t threads = ThreadsPerBlock(elements, target.limits);
  if (t.op()->has_reduction || elements < kFlatVectorLanes * threads || HasIfThenElse(t)) {
    KILN_ASSIGN_OR_RETURN(te::SplitResult parts, stage.Split(fused, threads));
    KILN_RETURN_IF_ERROR(stage.Bind(parts.outer, te::ThreadAxis::kBlockX));
    return stage.Bind(parts.inner, te::ThreadAxis::kThreadX);
  }
  // Each thread stores kFlatVectorLanes contiguous elements as one vector.
  KILN_ASSIGN_OR_RETURN(te::SplitResult lanes, stage.Split(fused, kFlatVectorLanes));
  KILN_ASSIGN_OR_RETURN(te::SplitResult parts, stage.Split(lanes.outer, threads));
  KILN_RETURN_IF_ERROR(stage.Bind(parts.outer, te::ThreadAxis::kBlockX));
  KILN_RETURN_IF_ERROR(stage.Bind(parts.inner, te::ThreadAxis::kThreadX));
  return stage.Vectorize(lanes.inner);
}

}  // namespace internal
}  // namespace kiln::ops
