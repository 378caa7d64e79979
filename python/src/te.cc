// kiln.te: tensor expressions (placeholders, computes with Python lambdas,
// reductions), IR expressions with Python operators, schedules, and
// kiln.build, which lowers and compiles a schedule into a callable kernel.
#include "kiln/te/te.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <charconv>
#include <climits>
#include <cmath>
#include <optional>
#include <utility>

#include "common.h"
#include "kiln/ir/expr_nodes.h"
#include "kiln/ir/expr_ops.h"
#include "kiln/ir/printer.h"

namespace kiln::python {

using namespace nb::literals;  // NOLINT(google-build-using-namespace)

namespace {

struct ScheduleHolder {
  te::Schedule schedule;
};
using SchedulePtr = std::shared_ptr<ScheduleHolder>;

struct StageRef {
  SchedulePtr schedule;
  te::Tensor tensor;

  te::Stage Get() const { return Check(schedule->schedule.FindStage(tensor)); }
};

ir::DataType ParseIrType(const std::string& name) {
  return Check(IrTypeOf(Check(ParseDType(name))));
}

// A te.Schedule argument, or a TypeError naming the function.
SchedulePtr ScheduleArg(nb::handle h, const char* fn) {
  SchedulePtr s = h.is_none() ? nullptr : ArgOf<SchedulePtr>(h, fn, "schedule", "a te.Schedule");
  if (!s) {
    throw nb::type_error((std::string(fn) + ": schedule must be a te.Schedule, not None").c_str());
  }
  return s;
}

// One tensor or an iterable of them (outputs, inputs, readers).
std::vector<te::Tensor> TensorsOf(nb::handle h, const char* fn, const char* what) {
  te::Tensor one;
  if (nb::try_cast<te::Tensor>(h, one)) return {one};
  if (PyUnicode_Check(h.ptr()) || !nb::hasattr(h, "__iter__")) {
    throw nb::type_error((std::string(fn) + ": " + what +
                          " must be a te.Tensor or a list of them, not " + TypeNameOf(h))
                             .c_str());
  }
  std::vector<te::Tensor> out;
  for (nb::handle item : h) {
    out.push_back(ArgOf<te::Tensor>(item, fn, what, "te.Tensors (a list of them)"));
  }
  return out;
}

// `v` as Python's repr writes it: the fewest digits that read back as it.
std::string Repr(double v) {
  char digits[32];
  const auto result = std::to_chars(digits, digits + sizeof(digits), v);
  std::string text(digits, result.ptr);
  // (Python writes a whole float as 2.0; digits alone read as an int.)
  if (text.find_first_not_of("-0123456789") == std::string::npos) text += ".0";
  return text;
}

// A finite number that a float type would round to infinity is an error
// (infinity itself is written float('inf')).
double FitFloat(ir::DataType type, double v) {
  if (!type.is_float() || !std::isfinite(v)) return v;
  if (ir::RoundsToInfinity(type, v)) {
    Throw(InvalidArgument("the constant ", Repr(v), " is beyond the largest finite ",
                          type.ToString(), "; write float('inf') for infinity"));
  }
  return v;
}

// A numpy scalar as the Python number it holds (numpy.int64 as int,
// numpy.float32 as float, numpy.bool as bool); anything else as it is.
nb::object PythonNumber(nb::handle h) {
  const std::string_view type = Py_TYPE(h.ptr())->tp_name;
  if (type.rfind("numpy.", 0) != 0) return nb::borrow(h);
  if (type == "numpy.bool" || type == "numpy.bool_") {
    return nb::borrow(PyObject_IsTrue(h.ptr()) == 1 ? Py_True : Py_False);
  }
  PyObject* number = nullptr;
  if (PyIndex_Check(h.ptr())) {
    number = PyNumber_Index(h.ptr());
  } else if (PyFloat_Check(h.ptr()) || PyObject_HasAttrString(h.ptr(), "__float__")) {
    if (PyObject_HasAttrString(h.ptr(), "imag")) {
      // A complex scalar has no float value to take.
      nb::object imag = nb::borrow(h).attr("imag");
      if (PyObject_IsTrue(imag.ptr()) == 1) return nb::borrow(h);
    }
    number = PyNumber_Float(h.ptr());
  }
  if (number == nullptr) {
    PyErr_Clear();
    return nb::borrow(h);
  }
  return nb::steal(number);
}

// A Python value as an expression: an Expr, an axis, or a number (an i32,
// f32 or bool constant; numpy's scalars as their values).
ir::Expr ToExpr(nb::handle value, const char* what = "operand") {
  const nb::object number = PythonNumber(value);
  const nb::handle h = number;
  ir::Expr e;
  if (nb::try_cast<ir::Expr>(h, e)) return e;
  te::IterVar iv;
  if (nb::try_cast<te::IterVar>(h, iv) && iv.defined()) return iv.var();
  if (PyBool_Check(h.ptr())) return ir::BoolConst(h.ptr() == Py_True);
  if (PyLong_Check(h.ptr())) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(h.ptr(), &overflow);
    if (overflow != 0 || v < INT32_MIN || v > INT32_MAX) {
      Throw(InvalidArgument("the integer ", nb::cast<std::string>(nb::str(h)),
                            " does not fit an i32 constant"));
    }
    return ir::IntConst(ir::kI32, v);
  }
  if (PyFloat_Check(h.ptr())) {
    return ir::FloatConst(ir::kF32, FitFloat(ir::kF32, PyFloat_AsDouble(h.ptr())));
  }
  ThrowArgumentType(
      StrCat(what, " must be a kiln.te expression, axis or number; got ", TypeNameOf(h)));
}

// `self OP other`: a Python number takes self's type (a non-integral float
// next to an integer expression is an error).
// The values a constant of non-float `type` holds: its integer range, a
// bool's 0 and 1 (True and False: Python's `b == 2` is false where a bool
// constant made of 2 would be true), else i32's.
std::pair<long long, long long> ConstantRange(ir::DataType type) {
  if (type.is_bool()) return {0, 1};
  if (type.is_integer() && type.bits <= 32) {
    return type.is_int() ? std::pair{-(1ll << (type.bits - 1)), (1ll << (type.bits - 1)) - 1}
                         : std::pair{0ll, (1ll << type.bits) - 1};
  }
  return {INT32_MIN, INT32_MAX};
}

ir::Expr Constant(const ir::Expr& like, nb::handle value, const char* what = "operand") {
  const nb::object number = PythonNumber(value);
  const nb::handle other = number;
  if (PyFloat_Check(other.ptr()) && !PyBool_Check(other.ptr())) {
    const double v = PyFloat_AsDouble(other.ptr());
    const ir::DataType type = like.dtype();
    if (!type.is_float()) {
      if (v != std::trunc(v) || !std::isfinite(v)) {
        Throw(InvalidArgument("the constant ", Repr(v), " next to an expression of type ",
                              type.ToString(), " is not integral; cast one side"));
      }
      const auto [lo, hi] = ConstantRange(type);
      if (v < static_cast<double>(lo) || v > static_cast<double>(hi)) {
        Throw(InvalidArgument("the constant ", Repr(v), " next to an expression of type ",
                              type.ToString(), " does not fit ", type.ToString(), " [", lo, ", ",
                              hi, "]; cast one side"));
      }
      return ir::MakeConst(type, static_cast<int64_t>(v));
    }
    return ir::MakeConst(like.dtype(), FitFloat(like.dtype(), v));
  }
  if (PyLong_Check(other.ptr())) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(other.ptr(), &overflow);
    const ir::DataType type = like.dtype();
    if (type.is_float()) {
      if (overflow != 0) {
        // Past 64 bits, as a double (rounded to nearest, as Python's float()).
        const double d = PyLong_AsDouble(other.ptr());
        if (d == -1.0 && PyErr_Occurred()) {
          PyErr_Clear();
          Throw(InvalidArgument("the integer ", nb::cast<std::string>(nb::str(other)),
                                " is too large for a ", type.ToString(), " constant"));
        }
        return ir::MakeConst(type, FitFloat(type, d));
      }
      return ir::MakeConst(type, FitFloat(type, static_cast<double>(v)));
    }
    // The constant takes the other side's type, so it must hold its value
    // there (numpy 2 refuses uint32 + -1 as well).
    const auto [lo, hi] = ConstantRange(type);
    if (overflow != 0 || v < lo || v > hi) {
      Throw(InvalidArgument("the integer ", nb::cast<std::string>(nb::str(other)),
                            " next to an expression of type ", type.ToString(), " does not fit ",
                            type.ToString(), " [", lo, ", ", hi, "]; cast one side"));
    }
    return ir::MakeConst(type, static_cast<int64_t>(v));
  }
  return ToExpr(other, what);
}

// Operands of one type (each handle with the name its errors give it): a
// Python number takes the type of the first operand that is not a number,
// wherever it stands (all numbers: the first one's own type).
std::vector<ir::Expr> SameTypeOperands(const std::vector<std::pair<nb::handle, std::string>>& in) {
  auto is_number = [](nb::handle h) {
    const nb::object n = PythonNumber(h);
    return PyLong_Check(n.ptr()) || PyFloat_Check(n.ptr());
  };
  size_t lead = 0;
  while (lead < in.size() && is_number(in[lead].first)) ++lead;
  if (lead == in.size()) lead = 0;
  const ir::Expr like = ToExpr(in[lead].first, in[lead].second.c_str());
  std::vector<ir::Expr> out;
  for (size_t k = 0; k < in.size(); ++k) {
    out.push_back(k == lead ? like : Constant(like, in[k].first, in[k].second.c_str()));
  }
  return out;
}

template <typename Fn>
auto Binary(Fn fn, bool reversed = false) {
  return [fn, reversed](nb::handle self, nb::handle other) -> ir::Expr {
    ir::Expr a = ToExpr(self);
    ir::Expr b = Constant(a, other);
    return reversed ? fn(b, a) : fn(a, b);
  };
}

// Adds Python's operators to an expression-like class (Expr, IterVar).
template <typename Class>
void AddOperators(Class& c) {
  using E = const ir::Expr&;
  c.def("__add__", Binary([](E a, E b) { return a + b; }), "other"_a.none())
      .def("__radd__", Binary([](E a, E b) { return a + b; }, true), "other"_a.none())
      .def("__sub__", Binary([](E a, E b) { return a - b; }), "other"_a.none())
      .def("__rsub__", Binary([](E a, E b) { return a - b; }, true), "other"_a.none())
      .def("__mul__", Binary([](E a, E b) { return a * b; }), "other"_a.none())
      .def("__rmul__", Binary([](E a, E b) { return a * b; }, true), "other"_a.none())
      .def("__truediv__", Binary([](E a, E b) { return a / b; }), "other"_a.none())
      .def("__rtruediv__", Binary([](E a, E b) { return a / b; }, true), "other"_a.none())
      .def("__floordiv__", Binary([](E a, E b) { return ir::FloorDiv(a, b); }), "other"_a.none())
      .def("__rfloordiv__", Binary([](E a, E b) { return ir::FloorDiv(a, b); }, true),
           "other"_a.none())
      // Python's % floors, as // does (a == (a // b) * b + a % b).
      .def("__mod__", Binary([](E a, E b) { return ir::FloorMod(a, b); }), "other"_a.none())
      .def("__rmod__", Binary([](E a, E b) { return ir::FloorMod(a, b); }, true), "other"_a.none())
      .def("__lt__", Binary([](E a, E b) { return a < b; }), "other"_a.none())
      .def("__le__", Binary([](E a, E b) { return a <= b; }), "other"_a.none())
      .def("__gt__", Binary([](E a, E b) { return a > b; }), "other"_a.none())
      .def("__ge__", Binary([](E a, E b) { return a >= b; }), "other"_a.none())
      .def("__eq__", Binary([](E a, E b) { return a == b; }), "other"_a.none())
      .def("__ne__", Binary([](E a, E b) { return a != b; }), "other"_a.none())
      .def("__and__", Binary([](E a, E b) { return a && b; }), "other"_a.none())
      .def("__or__", Binary([](E a, E b) { return a || b; }), "other"_a.none())
      .def("__invert__", [](nb::handle self) { return !ToExpr(self); })
      .def("__neg__", [](nb::handle self) { return -ToExpr(self); })
      .def("__bool__", [](nb::handle) -> bool {
        Throw(InvalidArgument(
            "a kiln.te expression has no truth value; use te.select(cond, a, b) or & and |"));
      });
}

ir::Expr IntegerExtent(nb::handle h, const char* what) {
  ir::Expr e = ToExpr(h, what);
  if (!e.dtype().is_integer() || !e.dtype().is_scalar()) {
    Throw(InvalidArgument(what, " must be an integer, not ", e.dtype().ToString()));
  }
  if (std::optional<int64_t> c = ir::AsConstInt(e); c && *c < 0) {
    Throw(InvalidArgument(what, " is ", *c, "; an extent is at least 0"));
  }
  return e;
}

// A tensor's shape: an int, or a sequence of ints and size vars (at least one).
std::vector<ir::Expr> ShapeOf(nb::handle shape, const char* fn) {
  const std::string what = std::string(fn) + ": a dimension";
  std::vector<ir::Expr> out;
  // (A 0-d array has __iter__, which raises: it is one dimension.)
  const nb::object ndim = nb::getattr(shape, "ndim", nb::none());
  const bool zero_d = PyLong_Check(ndim.ptr()) && PyLong_AsLong(ndim.ptr()) == 0;
  const bool sequence = !PyUnicode_Check(shape.ptr()) && !PyBytes_Check(shape.ptr()) &&
                        nb::hasattr(shape, "__iter__") && !zero_d;
  if ((PyIndex_Check(shape.ptr()) && !sequence) || nb::isinstance<ir::Expr>(shape)) {
    out.push_back(IntegerExtent(shape, what.c_str()));
    return out;
  }
  if (!sequence) {
    ThrowArgumentType(std::string(fn) +
                      ": the shape must be a sequence of ints and size vars, not " +
                      TypeNameOf(shape));
  }
  for (nb::handle d : shape) out.push_back(IntegerExtent(d, what.c_str()));
  if (out.empty()) Throw(InvalidArgument(fn, ": a tensor needs at least one dimension"));
  return out;
}

std::vector<te::IterVar> AxesOf(nb::handle axes) {
  std::vector<te::IterVar> out;
  te::IterVar one;
  if (nb::try_cast<te::IterVar>(axes, one)) return {one};
  if (!PyTuple_Check(axes.ptr()) && !PyList_Check(axes.ptr())) {
    Throw(InvalidArgument(
        "reduction axes must come from te.reduce_axis (one, or a list of them); "
        "got ",
        TypeNameOf(axes), nb::isinstance<ir::Expr>(axes) ? " (a compute's own index?)" : ""));
  }
  for (nb::handle h : axes) {
    te::IterVar iv;
    if (!nb::try_cast<te::IterVar>(h, iv) || !iv.defined()) {
      Throw(InvalidArgument("reduction axes must come from te.reduce_axis; got ", TypeNameOf(h)));
    }
    out.push_back(iv);
  }
  return out;
}

ir::Expr Load(const te::Tensor& t, nb::handle indices_in) {
  std::vector<ir::Expr> indices;
  const std::string what = "te.Tensor '" + t.name() + "': an index";
  if (PyTuple_Check(indices_in.ptr()) || PyList_Check(indices_in.ptr())) {
    for (nb::handle h : indices_in) indices.push_back(ToExpr(h, what.c_str()));
  } else {
    indices.push_back(ToExpr(indices_in, what.c_str()));
  }
  if (static_cast<int>(indices.size()) != t.rank()) {
    Throw(InvalidArgument("tensor ", t.name(), " has rank ", t.rank(), " but is indexed with ",
                          indices.size(), " indices"));
  }
  for (const ir::Expr& i : indices) {
    if (!i.dtype().is_integer() || !i.dtype().is_scalar()) {
      Throw(InvalidArgument("an index of tensor ", t.name(), " is ", i.dtype().ToString(),
                            ", not an integer"));
    }
  }
  return t(indices);
}

// A name kiln gives a kernel parameter or loop: not empty.
const std::string& NonEmptyName(const std::string& name, const char* what) {
  if (name.empty()) Throw(InvalidArgument(what, ": the name is empty"));
  return name;
}

// A name argument of `what`: a str, not empty.
std::string NameArg(nb::handle h, const char* what) {
  return NonEmptyName(ArgOf<std::string>(h, what, "name", "a str"), what);
}

te::Tensor ComputeWith(nb::handle shape, nb::handle fcompute_arg, nb::handle name_arg,
                       const std::optional<std::vector<std::string>>& axis_names) {
  if (!PyCallable_Check(fcompute_arg.ptr())) {
    throw nb::type_error(("te.compute: fcompute must be a function of the indices (lambda i, j: "
                          "...), not " +
                          TypeNameOf(fcompute_arg))
                             .c_str());
  }
  const auto fcompute = nb::borrow<nb::callable>(fcompute_arg);
  const std::string name = NameArg(name_arg, "te.compute");
  for (const std::string& a : axis_names.value_or(std::vector<std::string>{})) {
    NonEmptyName(a, "te.compute's axis_names");
  }
  std::vector<ir::Expr> dims = ShapeOf(shape, "te.compute");
  if (axis_names.has_value() && axis_names->size() != dims.size()) {
    Throw(InvalidArgument("te.compute '", name, "': ", axis_names->size(), " axis names for ",
                          dims.size(), " axes"));
  }
  std::optional<nb::python_error> error;
  std::optional<StatusError> status_error;
  te::Tensor t = te::Compute(
      name, dims,
      [&](const std::vector<ir::Var>& vars) -> ir::Expr {
        try {
          nb::list args;
          for (const ir::Var& v : vars) args.append(nb::cast(ir::Expr(v)));
          nb::object result = fcompute(*nb::tuple(args));
          return ToExpr(result, "the compute's result");
        } catch (nb::python_error& e) {
          error.emplace(std::move(e));
        } catch (const StatusError& e) {
          status_error.emplace(e);
        }
        return ir::FloatConst(ir::kF32, 0);
      },
      axis_names.value_or(std::vector<std::string>{}));
  if (error) throw std::move(*error);
  if (status_error) throw *status_error;
  return t;
}

}  // namespace

void BindTe(nb::module_& m) {
  nb::module_ te_m = m.def_submodule("te", "Tensor expressions and schedules.");

  auto expr = nb::class_<ir::Expr>(te_m, "Expr",
                                   "An expression of kiln's IR, built with Python's operators "
                                   "(+ - * / // % < <= > >= == != & | ~) and kiln.te's "
                                   "functions.");
  expr.def_prop_ro(
          "dtype", [](const ir::Expr& e) { return e.dtype().ToString(); }, "Its type, as 'f32'.")
      .def("__str__", [](const ir::Expr& e) { return ir::Print(e); })
      .def("__repr__", [](const ir::Expr& e) { return "te.Expr(" + ir::Print(e) + ")"; });
  AddOperators(expr);

  auto itervar = nb::class_<te::IterVar>(
      te_m, "IterVar", "An iteration axis; used as an index it stands for its loop variable.");
  itervar
      .def_prop_ro(
          "name", [](const te::IterVar& v) { return v.name(); }, "Its name.")
      .def_prop_ro(
          "extent", [](const te::IterVar& v) { return v.extent(); }, "Its extent.")
      .def_prop_ro(
          "var", [](const te::IterVar& v) { return ir::Expr(v.var()); }, "Its loop variable.")
      .def("__repr__", [](const te::IterVar& v) {
        return "te.IterVar(" + v.name() + ", extent=" + ir::Print(v.extent()) + ")";
      });
  AddOperators(itervar);

  nb::class_<te::Tensor>(te_m, "Tensor",
                         "A tensor of a tensor-expression program (a placeholder or a compute); "
                         "T(i, j) or T[i, j] reads an element.")
      .def_prop_ro("name", &te::Tensor::name)
      .def_prop_ro(
          "dtype", [](const te::Tensor& t) { return t.dtype().ToString(); }, "Element type.")
      .def_prop_ro(
          "shape", [](const te::Tensor& t) { return t.shape(); }, "Extents, as expressions.")
      .def_prop_ro(
          "axis", [](const te::Tensor& t) { return t.op()->axis; },
          "A compute's data-parallel axes (empty for a placeholder).")
      .def_prop_ro(
          "reduce_axis", [](const te::Tensor& t) { return t.op()->reduce_axis; },
          "A compute's reduction axes.")
      .def("__call__",
           [](const te::Tensor& t, const nb::args& indices) { return Load(t, indices); })
      .def(
          "__getitem__", [](const te::Tensor& t, nb::handle indices) { return Load(t, indices); },
          "indices"_a.none())
      // T[i] builds a read for any i, so without this Python would iterate a
      // tensor forever where a list of tensors is expected.
      .def("__iter__",
           [](const te::Tensor& t) -> nb::object {
             throw nb::type_error(("te.Tensor '" + t.name() +
                                   "' is not iterable: pass a list of tensors ([" + t.name() + "])")
                                      .c_str());
           })
      .def("__repr__", [](const te::Tensor& t) {
        std::string s = "te.Tensor(" + t.name() + ", [";
        for (size_t i = 0; i < t.shape().size(); ++i) {
          s += (i ? ", " : "") + ir::Print(t.shape()[i]);
        }
        return s + "], " + t.dtype().ToString() + ")";
      });

  te_m.def(
      "size_var",
      [](nb::handle name) { return ir::Expr(te::SizeVar(NameArg(name, "te.size_var"))); },
      "name"_a.none(),
      "A symbolic size: an i32 scalar parameter of the kernel when a shape uses it.");
  te_m.def(
      "placeholder",
      [](nb::handle shape, nb::handle dtype, nb::handle name) {
        return te::Placeholder(
            NameArg(name, "te.placeholder"), ShapeOf(shape, "te.placeholder"),
            ParseIrType(ArgOf<std::string>(dtype, "te.placeholder", "dtype", "a str ('float32')")));
      },
      "shape"_a.none(), "dtype"_a.none() = "float32", "name"_a.none() = "X",
      "An input tensor of the given shape (ints or size vars) and dtype.");
  te_m.def("compute", &ComputeWith, "shape"_a.none(), "fcompute"_a.none(), "name"_a.none() = "T",
           "axis_names"_a = nb::none(),
           "A tensor whose element at each index is fcompute(*index_vars): a Python function of "
           "one index expression per dimension, returning an expression.");
  te_m.def(
      "reduce_axis",
      [](nb::handle extent, nb::handle name) {
        return te::ReduceAxis(IntegerExtent(extent, "te.reduce_axis: the extent"),
                              NameArg(name, "te.reduce_axis"));
      },
      "extent"_a.none(), "name"_a.none() = "k",
      "A reduction axis [0, extent) for sum/max/min/prod.");
  // sum/prod/max/min(expr, axes), or axis= as TVM spells it.
  using Reduction = ir::Expr (*)(ir::Expr, const std::vector<te::IterVar>&);
  const std::pair<const char*, Reduction> reductions[] = {{"sum", &te::Sum},
                                                          {"prod", &te::Prod},
                                                          {"max", &te::Max},
                                                          {"min", &te::Min},
                                                          {"device_max", &te::DeviceMax},
                                                          {"device_min", &te::DeviceMin}};
  for (const auto& [name, reduce] : reductions) {
    const std::string fn = name;
    te_m.def(
        name,
        [reduce, fn](nb::handle e, nb::handle axes, nb::handle axis) {
          if (axes.is_none() == axis.is_none()) {
            Throw(InvalidArgument("te.", fn, " takes the reduction axes once: axes= or axis=",
                                  axes.is_none() ? " (neither was given)" : " (both were given)"));
          }
          const std::string what = "te." + fn + ": the reduced expression";
          return reduce(ToExpr(e, what.c_str()), AxesOf(axes.is_none() ? axis : axes));
        },
        "expr"_a.none(), "axes"_a.none() = nb::none(), "axis"_a.none() = nb::none(),
        ("The " + fn + " of expr over reduction axes (one axis or a list; inside a compute " +
         "body). `axis=` is the same as `axes=`.")
            .c_str());
  }
  te_m.def(
      "reduce",
      [](nb::handle name_arg, nb::handle combine_arg, nb::handle identity, nb::handle sources,
         nb::handle axes) {
        const std::string name = NameArg(name_arg, "te.reduce");
        if (!PyCallable_Check(combine_arg.ptr())) {
          ThrowArgumentType("te.reduce '" + name +
                            "': combine must be a function (lambda acc, next: [...]), not " +
                            TypeNameOf(combine_arg));
        }
        const auto combine = nb::borrow<nb::callable>(combine_arg);
        auto require_list = [&](nb::handle h, const char* what) {
          if (!PyTuple_Check(h.ptr()) && !PyList_Check(h.ptr())) {
            ThrowArgumentType("te.reduce '" + name + "': " + what +
                              " must be a list (one entry per value), not " + TypeNameOf(h));
          }
        };
        require_list(sources, "values");
        require_list(identity, "identity");
        std::vector<ir::Expr> values;
        for (nb::handle h : sources) values.push_back(ToExpr(h, "a reduced value"));
        if (values.empty()) {
          Throw(InvalidArgument("te.reduce '", name,
                                "': no values to reduce (values lists one expression per value)"));
        }
        std::vector<ir::Expr> identities;
        size_t k = 0;
        for (nb::handle h : identity) {
          ir::Expr e;
          if (nb::try_cast<ir::Expr>(h, e)) {
            identities.push_back(e);
          } else if (k < values.size() && !values[k].dtype().is_bool() &&
                     (PyBool_Check(h.ptr()) ||
                      std::string_view(Py_TYPE(h.ptr())->tp_name).starts_with("numpy.bool"))) {
            Throw(InvalidArgument("te.reduce '", name, "': identity ", k, " is a bool, but value ",
                                  k, " is ", values[k].dtype().ToString(),
                                  "; give a number of its type"));
          } else {
            identities.push_back(k < values.size() ? Constant(values[k], h) : ToExpr(h));
          }
          ++k;
        }
        te::CommReducer reducer{
            name, identities,
            [&](const std::vector<ir::Expr>& acc, const std::vector<ir::Expr>& next) {
              nb::object out = combine(nb::cast(acc), nb::cast(next));
              std::vector<ir::Expr> result;
              ir::Expr single;
              if (nb::try_cast<ir::Expr>(out, single)) return std::vector<ir::Expr>{single};
              if (!PyTuple_Check(out.ptr()) && !PyList_Check(out.ptr())) {
                Throw(InvalidArgument("te.reduce '", name,
                                      "': combine must return an expression or a list of them; "
                                      "got ",
                                      TypeNameOf(out)));
              }
              for (nb::handle h : out) result.push_back(ToExpr(h, "a combined value"));
              return result;
            }};
        return te::Reduce(reducer, values, AxesOf(axes));
      },
      "name"_a.none(), "combine"_a.none(), "identity"_a.none(), "values"_a.none(), "axes"_a.none(),
      "A user-defined reduction of `values` (one expression per value; several make a tuple "
      "reducer) over reduction axes: combine(acc, next) takes and returns lists of "
      "expressions, `identity` gives each value's start. Returns one expression per value.");
  te_m.def(
      "maximum",
      [](nb::handle a, nb::handle b) {
        const auto x = SameTypeOperands({{a, "te.maximum: a"}, {b, "te.maximum: b"}});
        return ir::Max(x[0], x[1]);
      },
      "a"_a.none(), "b"_a.none(), "The larger of two expressions.");
  te_m.def(
      "minimum",
      [](nb::handle a, nb::handle b) {
        const auto x = SameTypeOperands({{a, "te.minimum: a"}, {b, "te.minimum: b"}});
        return ir::Min(x[0], x[1]);
      },
      "a"_a.none(), "b"_a.none(), "The smaller of two expressions.");
  te_m.def(
      "select",
      [](nb::handle c, nb::handle a, nb::handle b) {
        const auto x = SameTypeOperands({{a, "te.select: a"}, {b, "te.select: b"}});
        return ir::Select(ToExpr(c, "te.select: cond"), x[0], x[1]);
      },
      "cond"_a.none(), "a"_a.none(), "b"_a.none(), "a where cond holds, else b (both evaluated).");
  te_m.def(
      "cast",
      [](nb::handle dtype, nb::handle e) {
        if (!PyUnicode_Check(dtype.ptr()) && PyUnicode_Check(e.ptr())) {
          throw nb::type_error("te.cast takes the dtype first: te.cast('float16', x)");
        }
        return ir::Cast(ParseIrType(ArgOf<std::string>(dtype, "te.cast", "dtype", "a str")),
                        ToExpr(e, "te.cast: expr"));
      },
      "dtype"_a.none(), "expr"_a.none(), "expr converted to dtype.");
  te_m.def(
      "const",
      [](nb::handle v, nb::handle dtype) {
        const nb::object number = PythonNumber(v);
        if (!PyLong_Check(number.ptr()) && !PyFloat_Check(number.ptr())) {
          ThrowArgumentType(StrCat("te.const: the value must be a number; got ", TypeNameOf(v),
                                   " (te.cast converts an expression)"));
        }
        return Constant(
            ir::MakeZero(ParseIrType(ArgOf<std::string>(dtype, "te.const", "dtype", "a str"))), v,
            "te.const: value");
      },
      "value"_a.none(), "dtype"_a.none() = "float32", "A constant of a dtype.");
  // The IR's float intrinsics: exp(x), pow(x, y), fma(a, b, c), ...
  for (ir::Intrinsic op :
       {ir::Intrinsic::kExp, ir::Intrinsic::kExp2, ir::Intrinsic::kLog, ir::Intrinsic::kLog2,
        ir::Intrinsic::kSqrt, ir::Intrinsic::kRsqrt, ir::Intrinsic::kSin, ir::Intrinsic::kCos,
        ir::Intrinsic::kTanh, ir::Intrinsic::kSigmoid, ir::Intrinsic::kErf, ir::Intrinsic::kPow,
        ir::Intrinsic::kFloor, ir::Intrinsic::kCeil, ir::Intrinsic::kRound, ir::Intrinsic::kTrunc,
        ir::Intrinsic::kFma, ir::Intrinsic::kAbs}) {
    const std::string name(ir::IntrinsicName(op));
    const int arity = ir::IntrinsicArity(op);
    te_m.def(
        name.c_str(),
        [op, arity, name](const nb::args& args) {
          if (static_cast<int>(args.size()) != arity) {
            Throw(InvalidArgument("te.", name, " takes ", arity, " arguments, not ", args.size()));
          }
          std::vector<std::pair<nb::handle, std::string>> in;
          for (nb::handle h : args) {
            in.emplace_back(h, StrCat("te.", name, ": argument ", in.size() + 1));
          }
          return ir::Call(op, SameTypeOperands(in));
        },
        ("The IR's " + name + " intrinsic (" + std::to_string(arity) + " operand" +
         (arity > 1 ? "s" : "") + ").")
            .c_str());
  }

  nb::class_<StageRef>(te_m, "Stage",
                       "One compute of a schedule. Each primitive checks its arguments and "
                       "raises kiln.InvalidArgument, leaving the schedule as it was.")
      .def_prop_ro(
          "name", [](const StageRef& s) { return s.tensor.name(); }, "The compute's name.")
      .def_prop_ro(
          "axis", [](const StageRef& s) { return s.Get().axes(); }, "The root data-parallel axes.")
      .def_prop_ro(
          "reduce_axis", [](const StageRef& s) { return s.Get().reduce_axes(); },
          "The root reduction axes.")
      .def_prop_ro(
          "leaf_axes", [](const StageRef& s) { return s.Get().leaf_axes(); },
          "The current loop nest, outermost first.")
      .def(
          "split",
          [](const StageRef& s, nb::handle axis, nb::handle factor, nb::handle nparts) {
            if (factor.is_none() == nparts.is_none()) {
              Throw(InvalidArgument("split: give the factor or nparts (the number of parts), ",
                                    factor.is_none() ? "not neither" : "not both"));
            }
            const auto a = ArgOf<te::IterVar>(axis, "split", "axis", "an axis");
            te::SplitResult r =
                Check(nparts.is_none() ? s.Get().Split(a, IntArg(factor, "split", "factor"))
                                       : s.Get().SplitParts(a, IntArg(nparts, "split", "nparts")));
            return nb::make_tuple(r.outer, r.inner);
          },
          "axis"_a.none(), "factor"_a.none() = nb::none(), "nparts"_a.none() = nb::none(),
          "Splits an axis by a factor, or into nparts parts (by the factor ceil(extent / "
          "nparts); the extent a constant): returns (outer, inner).")
      .def(
          "fuse",
          [](const StageRef& s, nb::handle outer, nb::handle inner) {
            return Check(s.Get().Fuse(ArgOf<te::IterVar>(outer, "fuse", "outer", "an axis"),
                                      ArgOf<te::IterVar>(inner, "fuse", "inner", "an axis")));
          },
          "outer"_a.none(), "inner"_a.none(), "Fuses two adjacent leaf axes into one.")
      .def(
          "reorder",
          [](const StageRef& s, const nb::args& axes) {
            std::vector<te::IterVar> order;
            for (size_t i = 0; i < axes.size(); ++i) {
              te::IterVar axis;
              if (!nb::try_cast<te::IterVar>(axes[i], axis)) {
                throw nb::type_error(("reorder: argument " + std::to_string(i + 1) + " is a " +
                                      TypeNameOf(axes[i]) +
                                      ", not an axis (pass the axes themselves: "
                                      "reorder(ko, ki, ...))")
                                         .c_str());
              }
              order.push_back(axis);
            }
            Check(s.Get().Reorder(order));
          },
          "Puts the given leaf axes in this order (in the positions they occupy).")
      .def(
          "bind",
          [](const StageRef& s, nb::handle axis_arg, nb::handle thread_name) {
            const auto axis = ArgOf<te::IterVar>(axis_arg, "bind", "axis", "an axis");
            const auto thread = ArgOf<std::string>(thread_name, "bind", "thread",
                                                   "a str ('blockIdx.x', 'threadIdx.x', ...)");
            te::Stage stage = s.Get();
            StatusOr<te::ThreadAxis> parsed = te::ThreadAxisFromName(thread);
            if (!parsed.ok()) {
              Check(parsed.status().WithContext("bind of stage '" + stage.name() + "', axis '" +
                                                axis.name() + "'"));
            }
            Check(stage.Bind(axis, *parsed));
          },
          "axis"_a.none(), "thread"_a.none(),
          "Binds an axis to 'blockIdx.x', 'blockIdx.y', 'threadIdx.x' or 'threadIdx.y'.")
      .def(
          "unroll",
          [](const StageRef& s, nb::handle axis) {
            Check(s.Get().Unroll(ArgOf<te::IterVar>(axis, "unroll", "axis", "an axis")));
          },
          "axis"_a.none(), "Unrolls an axis (a constant extent).")
      .def(
          "compute_inline", [](const StageRef& s) { Check(s.Get().ComputeInline()); },
          "Inlines this compute into its consumers.")
      .def(
          "vectorize",
          [](const StageRef& s, nb::handle axis) {
            Check(s.Get().Vectorize(ArgOf<te::IterVar>(axis, "vectorize", "axis", "an axis")));
          },
          "axis"_a.none(),
          "Runs an innermost data-parallel axis of extent 2, 3 or 4 as one vector.")
      .def(
          "tile",
          [](const StageRef& s, nb::handle x, nb::handle y, nb::handle fx, nb::handle fy) {
            const auto x_axis = ArgOf<te::IterVar>(x, "tile", "x", "an axis");
            const auto y_axis = ArgOf<te::IterVar>(y, "tile", "y", "an axis");
            const int64_t x_factor = IntArg(fx, "tile", "x_factor");
            const int64_t y_factor = IntArg(fy, "tile", "y_factor");
            te::Stage::TileResult r = Check(s.Get().Tile(x_axis, y_axis, x_factor, y_factor));
            return nb::make_tuple(r.x_outer, r.y_outer, r.x_inner, r.y_inner);
          },
          "x"_a.none(), "y"_a.none(), "x_factor"_a.none(), "y_factor"_a.none(),
          "Splits two adjacent axes and orders them: returns (x_outer, y_outer, x_inner, "
          "y_inner).")
      .def(
          "compute_at",
          [](const StageRef& s, nb::handle consumer, nb::handle axis) {
            Check(s.Get().ComputeAt(
                ArgOf<StageRef>(consumer, "compute_at", "consumer", "a stage (s[C])").Get(),
                ArgOf<te::IterVar>(axis, "compute_at", "axis", "an axis of the consumer")));
          },
          "consumer"_a.none(), "axis"_a.none(),
          "Computes this stage inside loop `axis` of `consumer`, over the region the loops "
          "inside it read (bounds inference).")
      .def(
          "set_scope",
          [](const StageRef& s, nb::handle scope) {
            Check(s.Get().SetScope(Check(te::ScopeFromName(
                ArgOf<std::string>(scope, "set_scope", "scope", "a str ('shared' or 'local')")))));
          },
          "scope"_a.none(), "Where a computed-at stage lives: 'shared' or 'local'.")
      .def(
          "storage_align",
          [](const StageRef& s, nb::handle axis, nb::handle factor, nb::handle offset) {
            Check(s.Get().StorageAlign(ArgOf<te::IterVar>(axis, "storage_align", "axis", "an axis"),
                                       IntArg(factor, "storage_align", "factor"),
                                       IntArg(offset, "storage_align", "offset")));
          },
          "axis"_a.none(), "factor"_a.none(), "offset"_a.none(),
          "Pads the buffer so the stride of `axis` is `offset` modulo `factor`.")
      .def(
          "double_buffer",
          [](const StageRef& s, nb::handle branch_free) {
            Check(s.Get().DoubleBuffer(BoolArg(branch_free, "double_buffer", "branch_free")));
          },
          "branch_free"_a.none() = false,
          "Alternates two halves of a shared stage computed at a serial loop, the next "
          "iteration's values loaded into registers during the math; with branch_free every "
          "iteration loads (the last its own values again) and stores into the idle half, under "
          "no branch.")
      .def(
          "copy_ahead",
          [](const StageRef& s, nb::handle registers_arg, nb::handle branch_free_arg,
             nb::handle last_arg) {
            const bool through_registers =
                BoolArg(registers_arg, "copy_ahead", "through_registers");
            const bool branch_free = BoolArg(branch_free_arg, "copy_ahead", "branch_free");
            const auto last = ArgOf<std::optional<std::string>>(
                last_arg, "copy_ahead", "last",
                "a str ('branch_free', 'no_branch', 'peeled') or None");
            te::LastCopy how = branch_free ? te::LastCopy::kLoadsAgain : te::LastCopy::kSkipped;
            if (last) {
              StatusOr<te::LastCopy> parsed = te::LastCopyFromName(*last);
              if (!parsed.ok()) Check(parsed.status().WithContext("copy_ahead"));
              how = *parsed;
              if (branch_free && how != te::LastCopy::kLoadsAgain) {
                Throw(
                    InvalidArgument("copy_ahead: branch_free=True is last='branch_free'; "
                                    "it cannot be last='",
                                    *last, "' too"));
              }
            }
            Check(s.Get().CopyAhead(through_registers, how));
          },
          "through_registers"_a.none() = false, "branch_free"_a.none() = false,
          "last"_a.none() = nb::none(),
          "Copies a single-buffered shared stage at a serial loop one iteration ahead; with "
          "through_registers, the next iteration's values are loaded into registers before the "
          "iteration computes and stored after it, both under a branch that skips them in the "
          "last iteration. branch_free (last='branch_free'): every iteration loads (the last its "
          "own values again), no branch around the loads; last='no_branch': nor around the "
          "stores; last='peeled': the loop runs one iteration fewer with no branch, and the last "
          "iteration's math follows it.")
      .def(
          "subgroup_reduce", [](const StageRef& s) { Check(s.Get().SubgroupReduce()); },
          "Combines the stage's cross-thread reduction through subgroup operations.")
      .def(
          "fused_multiply_add", [](const StageRef& s) { Check(s.Get().FusedMultiplyAdd()); },
          "Accumulates the stage's float sum of products as fma(a, b, acc): one rounding per "
          "step.");

  nb::class_<ScheduleHolder>(te_m, "Schedule",
                             "How the computes of a tensor program run: primitives applied to "
                             "stages, printed one per line.")
      .def(
          "__getitem__",
          [](const SchedulePtr& s, nb::handle tensor) {
            StageRef ref{
                s, ArgOf<te::Tensor>(tensor, "te.Schedule[]", "the index", "a te.Tensor (s[C])")};
            (void)ref.Get();
            return ref;
          },
          "tensor"_a.none(), "The stage of a compute tensor.")
      .def_prop_ro(
          "primitives",
          [](const ScheduleHolder& s) {
            std::vector<std::string> out;
            for (const te::Primitive& p : s.schedule.primitives()) out.push_back(p.ToString());
            return out;
          },
          "The primitives applied, in order, as text.")
      .def(
          "apply",
          [](const SchedulePtr& s, nb::handle records) {
            // One text (records on lines, as str(s) prints them) or a list
            // of records (as s.primitives holds them).
            std::string text;
            if (PyUnicode_Check(records.ptr())) {
              text = TextOf(records, "apply", "records");
            } else if (nb::hasattr(records, "__iter__") && !nb::isinstance<nb::bytes>(records)) {
              for (nb::handle item : records) {
                if (!PyUnicode_Check(item.ptr())) {
                  throw nb::type_error(
                      StrCat("apply: records must be a str or a list of str, not a list holding ",
                             TypeNameOf(item))
                          .c_str());
                }
                std::string line = TextOf(item, "apply", "a record");
                if (line.find('\n') != std::string::npos) {
                  Check(InvalidArgument("apply: a record of the list holds a line break: ", line));
                }
                text += line + "\n";
              }
            } else {
              throw nb::type_error(
                  StrCat("apply: records must be a str or a list of str, not ", TypeNameOf(records))
                      .c_str());
            }
            Check(s->schedule.ApplyText(text).WithContext("te.Schedule.apply"));
          },
          "records"_a.none(),
          "Applies records as str(s) prints them (a str of lines, or a list of them as in "
          "s.primitives), names resolved in this schedule; on an error, naming the record's line, "
          "the schedule is left as it was.")
      .def(
          "cache_read",
          [](const SchedulePtr& s, nb::handle tensor, nb::handle scope_arg, nb::handle readers) {
            const auto t = ArgOf<te::Tensor>(tensor, "cache_read", "tensor", "a te.Tensor");
            const auto scope =
                ArgOf<std::string>(scope_arg, "cache_read", "scope", "a str ('shared' or 'local')");
            // Readers as tensors or their stages, alone or in a list.
            std::vector<te::Tensor> read_by;
            auto reader = [&](nb::handle h) {
              StageRef stage;
              te::Tensor one;
              if (nb::try_cast<StageRef>(h, stage)) {
                read_by.push_back(stage.tensor);
              } else if (nb::try_cast<te::Tensor>(h, one)) {
                read_by.push_back(one);
              } else {
                return false;
              }
              return true;
            };
            if (!reader(readers)) {
              if (PyUnicode_Check(readers.ptr()) || !nb::hasattr(readers, "__iter__")) {
                throw nb::type_error(
                    StrCat("cache_read: readers must be a te.Tensor or te.Stage, or a list of "
                           "them, not ",
                           TypeNameOf(readers))
                        .c_str());
              }
              for (nb::handle item : readers) {
                if (!reader(item)) {
                  throw nb::type_error(
                      StrCat("cache_read: readers must be te.Tensors or te.Stages (a list of "
                             "them), not ",
                             TypeNameOf(item))
                          .c_str());
                }
              }
            }
            return Check(s->schedule.CacheRead(t, Check(te::ScopeFromName(scope)), read_by));
          },
          "tensor"_a.none(), "scope"_a.none(), "readers"_a.none(),
          "A stage copying `tensor` into 'shared' or 'local' memory, read by `readers` "
          "instead; returns its tensor.")
      .def(
          "cache_write",
          [](const SchedulePtr& s, nb::handle t, nb::handle scope) {
            return Check(s->schedule.CacheWrite(
                ArgOf<te::Tensor>(t, "cache_write", "tensor", "a te.Tensor"),
                Check(te::ScopeFromName(ArgOf<std::string>(scope, "cache_write", "scope",
                                                           "a str ('shared' or 'local')")))));
          },
          "tensor"_a.none(), "scope"_a.none(),
          "Moves the computation of `tensor` into a new 'shared' or 'local' stage; returns it.")
      .def(
          "rfactor",
          [](const SchedulePtr& s, nb::handle t, nb::handle axis) {
            return Check(
                s->schedule.Rfactor(ArgOf<te::Tensor>(t, "rfactor", "tensor", "a te.Tensor"),
                                    ArgOf<te::IterVar>(axis, "rfactor", "axis", "an axis")));
          },
          "tensor"_a.none(), "axis"_a.none(),
          "Factors the reduction of `tensor` over `axis` (a part of a split reduction axis) "
          "into a new stage; returns it.")
      .def("__str__", [](const ScheduleHolder& s) { return s.schedule.ToString(); })
      .def(
          "__eq__",
          [](const ScheduleHolder& a, const ScheduleHolder& b) { return a.schedule == b.schedule; },
          nb::is_operator(), "Whether both schedules hold the same primitives, in order.")
      .def(
          "__hash__",
          [](const ScheduleHolder& s) {
            // Equal schedules hold equal primitives, which print alike.
            return nb::hash(nb::str(s.schedule.ToString().c_str()));
          },
          "A hash of the primitives (equal schedules hash alike).")
      .def("__repr__", [](const ScheduleHolder& s) {
        return "te.Schedule(" + std::to_string(s.schedule.primitives().size()) + " primitives)";
      });

  te_m.def(
      "create_schedule",
      [](nb::handle outputs) {
        const std::vector<te::Tensor> outs = TensorsOf(outputs, "create_schedule", "outputs");
        auto holder =
            std::make_shared<ScheduleHolder>(ScheduleHolder{Check(te::Schedule::Create(outs))});
        return holder;
      },
      "outputs"_a.none(), "A schedule of every compute the outputs depend on, nothing applied.");
  te_m.def(
      "lower",
      [](nb::handle schedule, nb::handle outputs_arg, nb::handle inputs_arg, nb::handle name_arg) {
        const SchedulePtr sched = ScheduleArg(schedule, "te.lower");
        const ScheduleHolder& s = *sched;
        const auto name = ArgOf<std::string>(name_arg, "te.lower", "name", "a str");
        const auto outputs = TensorsOf(outputs_arg, "te.lower", "outputs");
        const auto inputs = TensorsOf(inputs_arg, "te.lower", "inputs");
        return ir::Print(Check(te::Lower(s.schedule, outputs, inputs, name)));
      },
      "schedule"_a.none(), "outputs"_a.none(), "inputs"_a.none(), "name"_a.none() = "kernel",
      "The kiln IR text the schedule lowers to.");

  te_m.def(
      "lower_kernels",
      [](nb::handle schedule, nb::handle outputs_arg, nb::handle inputs_arg, nb::handle name_arg) {
        const SchedulePtr sched = ScheduleArg(schedule, "te.lower_kernels");
        const ScheduleHolder& s = *sched;
        const auto name = ArgOf<std::string>(name_arg, "te.lower_kernels", "name", "a str");
        const auto outputs = TensorsOf(outputs_arg, "te.lower_kernels", "outputs");
        const auto inputs = TensorsOf(inputs_arg, "te.lower_kernels", "inputs");
        te::Kernels k = Check(te::LowerKernels(s.schedule, outputs, inputs, name));
        std::vector<std::string> texts;
        for (const ir::Function& f : k.functions) texts.push_back(ir::Print(f));
        return nb::make_tuple(texts, k.intermediates);
      },
      "schedule"_a.none(), "outputs"_a.none(), "inputs"_a.none(), "name"_a.none() = "kernel",
      "Lowers a program that needs several launches: (the kiln IR text of each kernel, in "
      "order; the intermediate tensors). Each stage neither inlined nor computed at another "
      "becomes a kernel '<name>_<stage>'.");
  m.def(
      "build_kernels",
      [](nb::handle schedule, nb::handle outputs_arg, nb::handle inputs_arg, nb::handle name_arg,
         std::optional<DevicePtr> device) {
        const SchedulePtr sched = ScheduleArg(schedule, "kiln.build_kernels");
        const ScheduleHolder& s = *sched;
        const auto name = ArgOf<std::string>(name_arg, "kiln.build_kernels", "name", "a str");
        const auto outputs = TensorsOf(outputs_arg, "kiln.build_kernels", "outputs");
        const auto inputs = TensorsOf(inputs_arg, "kiln.build_kernels", "inputs");
        DevicePtr dev = device && *device ? *device : DefaultDevice();
        te::Kernels k =
            Check(te::LowerKernels(s.schedule, outputs, inputs, name, dev->target().limits));
        auto module = CompileFunctions(dev, k.functions);
        std::vector<nb::object> kernels;
        for (const ir::Function& f : k.functions) {
          UserKernel kernel = FindKernel(module, f.name());
          Check(kernel.kernel->availability());  // a feature the device lacks: now, not at a call
          kernels.push_back(nb::cast(kernel));
        }
        return nb::make_tuple(kernels, k.intermediates);
      },
      "schedule"_a.none(), "outputs"_a.none(), "inputs"_a.none(), "name"_a.none() = "kernel",
      "device"_a = nb::none(),
      "te.lower_kernels, compiled for a device: (the kernels, callable, to run in order; the "
      "intermediate tensors, for which the caller allocates buffers). Each kernel's parameters "
      "are the inputs and earlier intermediates it reads, its result, then the size vars.");
  m.def(
      "build",
      [](nb::handle schedule, nb::handle outputs_arg, nb::handle inputs_arg, nb::handle name_arg,
         std::optional<DevicePtr> device) {
        const SchedulePtr sched = ScheduleArg(schedule, "kiln.build");
        const ScheduleHolder& s = *sched;
        const auto name = ArgOf<std::string>(name_arg, "kiln.build", "name", "a str");
        const auto outputs = TensorsOf(outputs_arg, "kiln.build", "outputs");
        const auto inputs = TensorsOf(inputs_arg, "kiln.build", "inputs");
        DevicePtr dev = device && *device ? *device : DefaultDevice();
        ir::Function f = Check(te::Lower(s.schedule, outputs, inputs, name, dev->target().limits));
        UserKernel kernel = FindKernel(CompileFunctions(dev, {f}), f.name());
        Check(kernel.kernel->availability());  // a feature the device lacks: now, not at a call
        return kernel;
      },
      "schedule"_a.none(), "outputs"_a.none(), "inputs"_a.none(), "name"_a.none() = "kernel",
      "device"_a = nb::none(),
      "Lowers a schedule to a kernel whose parameters are inputs, then outputs, then the size "
      "vars, compiles it for a device (the default one if None) and returns it, callable.");
}

}  // namespace kiln::python
