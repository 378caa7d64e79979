// Kernels from kiln IR, .kmod files and tensor expressions, called on
// tensors and Python scalars; and the operator library's builders.
#include <nanobind/stl/array.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <array>
#include <climits>
#include <cmath>

#include "common.h"
#include "kiln/ir/parser.h"
#include "kiln/ir/source_map.h"
#include "kiln/ir/verifier.h"

namespace kiln::python {

using namespace nb::literals;  // NOLINT(google-build-using-namespace)

std::shared_ptr<UserModule> CompileFunctions(const DevicePtr& device,
                                             const std::vector<ir::Function>& functions,
                                             const ir::SourceMap* source) {
  codegen::CompileOptions options = device->compile_options();
  options.lower.source = source;
  codegen::CompiledModule compiled;
  for (const ir::Function& f : functions) {
    StatusOr<codegen::CompiledFunction> c = codegen::CompileFunction(f, options);
    // A kernel the pipeline cannot lower (a loop it cannot vectorize, an
    // unroll past the limit, a shape it cannot compute) is IR rejected, as
    // the verifier's refusals are.
    if (!c.ok() && (c.status().code() == StatusCode::kInvalidArgument ||
                    c.status().code() == StatusCode::kUnimplemented)) {
      Throw(Status(StatusCode::kCompileError, std::string(c.status().message())));
    }
    compiled.functions.push_back(Check(std::move(c)));
  }
  auto m = std::make_shared<UserModule>();
  m->device = device;
  m->module = Check(runtime::LoadedModule::Load(device->gpu_ref(), std::move(compiled)));
  return m;
}

UserKernel FindKernel(const std::shared_ptr<UserModule>& module, const std::string& name) {
  UserKernel k{module, Check(module->module->Find(name))};
  return k;
}

namespace {

std::string ParamTypeText(const codegen::ParamInfo& p) {
  std::string t(codegen::DTypeName(p.dtype));
  return p.kind == codegen::ParamKind::kBuffer ? "buffer<" + t + ">" : t + " scalar";
}

bool TensorFits(DType t, codegen::DType param) {
  switch (param) {
    case codegen::DType::kF32:
      return t == DType::kF32;
    case codegen::DType::kF16:
      return t == DType::kF16;
    case codegen::DType::kI32:
      return t == DType::kI32;
    case codegen::DType::kU32:
      return t == DType::kU32;
    case codegen::DType::kBool:
      return t == DType::kBool;
    case codegen::DType::kInt8x4:
      return t == DType::kI8 || t == DType::kU8;
  }
  return false;
}

// The bytes of tensor `t`'s buffer that kernel parameter `param` binds: its
// elements, at least a word (a binding is never empty) and one element of
// the kernel's WGSL array (a tensor's buffer has at least 16 bytes).
uint64_t BoundBytes(const runtime::Kernel& kernel, size_t param, const Tensor& t) {
  const uint64_t want = std::max<uint64_t>({t.nbytes(), 4, kernel.MinBindingBytes(param)});
  return std::min<uint64_t>(want, t.buffer->size());
}

// A number as an error shows it: an int of more than 64 bits by its size.
std::string Shown(nb::handle v) {
  if (PyLong_Check(v.ptr())) {
    const auto bits = nb::cast<int64_t>(v.attr("bit_length")());
    if (bits > 64) return StrCat("an integer of ", bits, " bits");
  }
  return nb::cast<std::string>(nb::str(v));
}

runtime::Arg ScalarArg(const std::string& where, const codegen::ParamInfo& p, nb::handle arg) {
  // A numpy scalar (np.float32(2), np.int32(7)) counts as its Python value.
  nb::object v = nb::borrow(arg);
  if (!PyLong_Check(v.ptr()) && !PyFloat_Check(v.ptr()) && nb::hasattr(v, "dtype") &&
      nb::hasattr(v, "item") && nb::hasattr(v, "ndim") && nb::cast<int>(v.attr("ndim")) == 0) {
    v = v.attr("item")();
  }
  const bool is_int = PyLong_Check(v.ptr()) != 0;
  const bool is_float = PyFloat_Check(v.ptr()) != 0;
  if (p.dtype == codegen::DType::kF32) {
    if ((!is_int && !is_float) || PyBool_Check(v.ptr())) {
      ThrowArgumentType(StrCat(where, " is an f32 scalar; got ", TypeNameOf(v)));
    }
    // A Python int may be too large for a double; a finite value too large
    // for an f32 would become infinite. Either is refused before recording.
    const double x = PyFloat_AsDouble(v.ptr());
    if (x == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      Throw(InvalidArgument(where, " is an f32 scalar; ", Shown(v), " is out of its range"));
    }
    const float f = static_cast<float>(x);
    if (std::isfinite(x) && !std::isfinite(f)) {
      Throw(InvalidArgument(where, " is an f32 scalar; ", Shown(v),
                            " is out of its range (the largest f32 is 3.4028235e+38)"));
    }
    return runtime::Arg::F32(f);
  }
  if (!is_int || PyBool_Check(v.ptr())) {
    ThrowArgumentType(StrCat(where, p.dtype == codegen::DType::kU32 ? " is a " : " is an ",
                             codegen::DTypeName(p.dtype), " scalar; got ", TypeNameOf(v)));
  }
  int overflow = 0;
  const long long x = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
  if (p.dtype == codegen::DType::kI32) {
    if (overflow != 0 || x < INT32_MIN || x > INT32_MAX) {
      Throw(InvalidArgument(where, " is an i32 scalar; ", Shown(v),
                            " is out of its range [-2147483648, 2147483647]"));
    }
    return runtime::Arg::I32(static_cast<int32_t>(x));
  }
  if (p.dtype == codegen::DType::kU32) {
    if (overflow != 0 || x < 0 || x > UINT32_MAX) {
      Throw(InvalidArgument(where, " is a u32 scalar; ", Shown(v),
                            " is out of its range [0, 4294967295]"));
    }
    return runtime::Arg::U32(static_cast<uint32_t>(x));
  }
  Throw(Unimplemented(where, " has scalar type ", codegen::DTypeName(p.dtype),
                      ", which kernels cannot take"));
}

nb::object CallKernel(const UserKernel& k, const nb::args& args, const nb::kwargs& kwargs) {
  const runtime::Kernel& kernel = *k.kernel;
  Check(kernel.availability());
  const auto& params = kernel.metadata().params;
  const std::string& name = kernel.name();
  auto names = [&]() {
    std::string s;
    for (const auto& p : params) s += (s.empty() ? "" : ", ") + p.name;
    return s;
  };
  if (args.size() > params.size()) {
    Throw(InvalidArgument("kernel ", name, " takes ", params.size(), " arguments (", names(),
                          "); got ", args.size(), " positional"));
  }
  std::vector<nb::handle> values(params.size());
  for (size_t i = 0; i < args.size(); ++i) values[i] = args[i];
  for (auto [key, value] : kwargs) {
    const std::string kname = TextOf(key, "kernel " + name, "a keyword argument's name");
    size_t i = 0;
    while (i < params.size() && params[i].name != kname) ++i;
    if (i == params.size()) {
      Throw(InvalidArgument("kernel ", name, " has no parameter '", kname, "'; its parameters are ",
                            names()));
    }
    if (values[i].is_valid()) {
      Throw(InvalidArgument("kernel ", name, ": parameter ", kname, " is given twice"));
    }
    values[i] = value;
  }
  std::vector<runtime::Arg> call(params.size());
  std::vector<TensorPtr> tensors(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const codegen::ParamInfo& p = params[i];
    const std::string where = "parameter " + p.name + " of kernel " + name;
    if (!values[i].is_valid()) {
      Throw(InvalidArgument("kernel ", name, ": missing argument for parameter ", p.name, " (",
                            ParamTypeText(p), ")"));
    }
    if (p.kind == codegen::ParamKind::kScalar) {
      call[i] = ScalarArg(where, p, values[i]);
      continue;
    }
    TensorPtr t;
    if (!nb::try_cast<TensorPtr>(values[i], t) || !t) {
      ThrowArgumentType(StrCat(where, " is a ", ParamTypeText(p), " and takes a kiln.Tensor; got ",
                               TypeNameOf(values[i])));
    }
    if (t->device != k.module->device) {
      Throw(InvalidArgument(where, ": the tensor is on another device than the kernel"));
    }
    if (!TensorFits(t->dtype, p.dtype)) {
      Throw(InvalidArgument(
          where, " is a ", ParamTypeText(p), "; got ", DTypeName(t->dtype)[0] == 'i' ? "an " : "a ",
          DTypeName(t->dtype), " tensor",
          p.dtype == codegen::DType::kInt8x4 ? " (int8x4 takes int8 or uint8)" : ""));
    }
    tensors[i] = t;
    call[i] = runtime::Arg::Buffer(t->buffer, 0, BoundBytes(kernel, i, *t));
  }
  // Each tensor holds exactly the elements its parameter reaches (at least,
  // for strided parameters).
  for (size_t i = 0; i < params.size(); ++i) {
    if (!tensors[i]) continue;
    const codegen::ParamInfo& p = params[i];
    const uint64_t needed = Check(kernel.BufferElements(i, call));
    const uint64_t lanes = p.dtype == codegen::DType::kInt8x4 ? 4 : 1;
    const uint64_t have = static_cast<uint64_t>(tensors[i]->size());
    uint64_t elements = 0;
    if (__builtin_mul_overflow(needed, lanes, &elements)) {
      Throw(InvalidArgument("parameter ", p.name, " of kernel ", name, " needs ", needed,
                            " int8x4 words for these arguments, more int8 elements than 64 bits "
                            "count; got a tensor of shape ",
                            ShapeText(tensors[i]->shape)));
    }
    const bool ok = p.strides.empty() ? have == elements : have >= elements;
    if (!ok) {
      Throw(InvalidArgument("parameter ", p.name, " of kernel ", name, " needs ", elements, " ",
                            DTypeName(tensors[i]->dtype),
                            " elements for these arguments; got a tensor of shape ",
                            ShapeText(tensors[i]->shape), " (", have, " elements)"));
    }
    call[i].length = BoundBytes(kernel, i, *tensors[i]);
  }
  k.module->device->Record(kernel, call);
  std::vector<TensorPtr> written;
  for (size_t i = 0; i < params.size(); ++i) {
    if (tensors[i] && params[i].access == codegen::BufferAccess::kReadWrite) {
      written.push_back(tensors[i]);
    }
  }
  if (written.empty()) return nb::none();
  if (written.size() == 1) return nb::cast(written[0]);
  return nb::cast(written);
}

// A `device` argument: a kiln.Device, or None for the default device.
DevicePtr DeviceArg(nb::handle device, const char* what) {
  if (device.is_none()) return DefaultDevice();
  DevicePtr d;
  if (!nb::try_cast<DevicePtr>(device, d) || !d) {
    throw nb::type_error(StrCat(what,
                                ": device must be a kiln.Device or None (the default "
                                "device); got ",
                                TypeNameOf(device))
                             .c_str());
  }
  return d;
}

// Operators: a tensor type from (shape, dtype).
using TensorTypeArg = std::pair<std::vector<int64_t>, std::string>;
ops::TensorType ToTensorType(const TensorTypeArg& t) {
  return ops::TensorType{t.first, Check(IrTypeOf(Check(ParseDType(t.second))))};
}

// An int8 operand of matmul_int8, [..., rows, K], as the int8x4 tensor
// type [..., rows, K/4] (K packed four to a word, the tensor's bytes).
ops::TensorType PackedInt8Type(const TensorTypeArg& t, const char* what) {
  const DType dtype = Check(ParseDType(t.second));
  if (dtype != DType::kI8) {
    Throw(InvalidArgument("matmul_int8: ", what, " is ", DTypeName(dtype), ShapeText(t.first),
                          "; it must be int8"));
  }
  if (t.first.size() < 2) {
    Throw(InvalidArgument("matmul_int8: ", what, " has shape ", ShapeText(t.first),
                          "; it needs rank 2 to 4"));
  }
  if (t.first.back() % 4 != 0) {
    Throw(InvalidArgument("matmul_int8: K = ", t.first.back(), " (the last axis of ", what, " ",
                          ShapeText(t.first),
                          ") is not a multiple of 4; pad both operands with zeros along K"));
  }
  std::vector<int64_t> words = t.first;
  words.back() /= 4;
  return ops::TensorType{words, ir::kInt8x4};
}

ProgramPtr FromFunction(const DevicePtr& device, StatusOr<ir::Function> f) {
  ir::Function function = Check(std::move(f));
  return Program::Create(device, {function}, {}, function.name());
}
ProgramPtr FromSequence(const DevicePtr& device, StatusOr<ops::KernelSequence> s,
                        const std::string& label) {
  ops::KernelSequence seq = Check(std::move(s));
  return Program::Create(device, seq.functions, seq.intermediates, label, seq.inputs);
}

nb::list Names(const std::vector<std::string_view>& names) {
  nb::list l;
  for (std::string_view n : names) l.append(std::string(n));
  return l;
}

}  // namespace

void BindKernels(nb::module_& m) {
  nb::class_<UserModule>(m, "Module", "A compiled module loaded on a device.")
      .def_prop_ro(
          "functions",
          [](const UserModule& mod) {
            std::vector<std::string> names;
            for (const auto& k : mod.module->functions()) names.push_back(k->name());
            return names;
          },
          "The names of its kernels, in order.")
      .def_prop_ro(
          "device", [](const UserModule& mod) { return mod.device; }, "The device it is loaded on.")
      .def(
          "__getitem__",
          [](const std::shared_ptr<UserModule>& mod, nb::handle name) {
            if (!nb::isinstance<nb::str>(name)) {
              throw nb::type_error(StrCat("a kiln.Module's kernels are found by name (a str); got ",
                                          TypeNameOf(name))
                                       .c_str());
            }
            return FindKernel(mod, TextOf(name, "kiln.Module", "the kernel's name"));
          },
          "name"_a, nb::sig("def __getitem__(self, name: str) -> Kernel"),
          "The kernel called `name` (compiled for the device on first use).")
      .def(
          "__contains__",
          [](const UserModule& mod, nb::handle name) {
            if (!nb::isinstance<nb::str>(name)) return false;
            Py_ssize_t size = 0;
            const char* utf8 = PyUnicode_AsUTF8AndSize(name.ptr(), &size);
            if (utf8 == nullptr) {  // no kernel has a name UTF-8 cannot hold
              PyErr_Clear();
              return false;
            }
            const std::string_view n(utf8, static_cast<size_t>(size));
            for (const auto& k : mod.module->functions()) {
              if (k->name() == n) return true;
            }
            return false;
          },
          "name"_a, nb::sig("def __contains__(self, name: object) -> bool"),
          "Whether the module has a kernel called `name`.")
      .def(
          "__iter__",
          [](const UserModule& mod) {
            nb::list names;
            for (const auto& k : mod.module->functions()) names.append(k->name());
            return names.attr("__iter__")();
          },
          nb::sig("def __iter__(self) -> typing.Iterator[str]"), "The names of its kernels.")
      .def("__repr__", [](const UserModule& mod) {
        const size_t n = mod.module->functions().size();
        return "kiln.Module(" + std::to_string(n) + (n == 1 ? " kernel)" : " kernels)");
      });

  nb::class_<UserKernel>(m, "Kernel",
                         "A compiled kernel. Call it with tensors for its buffer parameters and "
                         "Python ints/floats for its scalars, by position or by name; every "
                         "argument is checked against the kernel's metadata. Returns the "
                         "tensors it writes (one, a list, or None); the work is queued.")
      .def("__call__", &CallKernel)
      .def_prop_ro(
          "name", [](const UserKernel& k) { return k.kernel->name(); }, "The kernel's name.")
      .def_prop_ro(
          "wgsl", [](const UserKernel& k) { return k.kernel->wgsl(); }, "Its WGSL.")
      .def_prop_ro(
          "params",
          [](const UserKernel& k) {
            nb::list l;
            for (const auto& p : k.kernel->metadata().params) {
              const bool buffer = p.kind == codegen::ParamKind::kBuffer;
              l.append(nb::make_tuple(
                  p.name, buffer ? "buffer" : "scalar", std::string(codegen::DTypeName(p.dtype)),
                  buffer ? (p.access == codegen::BufferAccess::kRead ? "read" : "read_write")
                         : ""));
            }
            return l;
          },
          "(name, 'buffer' or 'scalar', dtype, access) of each parameter.")
      .def_prop_ro(
          "workgroup_size",
          [](const UserKernel& k) {
            const auto& w = k.kernel->metadata().workgroup_size;
            return nb::make_tuple(w[0], w[1], w[2]);
          },
          "The workgroup size.")
      .def("__repr__", [](const UserKernel& k) { return "kiln.Kernel(" + k.kernel->name() + ")"; });

  m.def(
      "compile",
      [](nb::handle ir_text, nb::handle device) {
        std::string text;
        if (nb::isinstance<nb::str>(ir_text)) {
          text = TextOf(ir_text, "kiln.compile", "ir_text");
        } else if (nb::isinstance<nb::bytes>(ir_text)) {
          nb::bytes b = nb::borrow<nb::bytes>(ir_text);
          text.assign(b.c_str(), b.size());
        } else {
          throw nb::type_error(StrCat("kiln.compile: ir_text is the text of a module (a str); got ",
                                      TypeNameOf(ir_text), " (kiln.load_module loads a .kmod file)")
                                   .c_str());
        }
        DevicePtr dev = DeviceArg(device, "kiln.compile");
        ir::SourceMap source;
        ir::Module module = Check(ir::ParseModule(text, &source));
        Check(ir::Verify(module, codegen::SourceVerifyOptions(dev->compile_options()), source));
        return CompileFunctions(dev, module.functions, &source);
      },
      "ir_text"_a.none(), "device"_a.none() = nb::none(),
      nb::sig("def compile(ir_text: str | bytes, device: Device | None = None) -> Module"),
      "Compiles kiln IR text (a `module { ... }`) for a device (the default one if None) and "
      "loads it. Errors point at the text's line and column.");
  m.def(
      "load_module",
      [](nb::handle path_arg, nb::handle device) {
        // The file system's own bytes (os.fsencode: a str through the
        // file system encoding, bytes as they are).
        nb::module_ os = nb::module_::import_("os");
        if (!nb::isinstance<nb::str>(path_arg) && !nb::isinstance<nb::bytes>(path_arg) &&
            !nb::isinstance(path_arg, os.attr("PathLike"))) {
          throw nb::type_error(
              StrCat("kiln.load_module: path is a str, bytes or an os.PathLike; got ",
                     TypeNameOf(path_arg))
                  .c_str());
        }
        nb::object encoded;
        try {
          encoded = os.attr("fsencode")(path_arg);
        } catch (const nb::python_error& e) {
          // A str the file system encoding cannot hold (a lone surrogate).
          throw nb::value_error(StrCat("kiln.load_module: path cannot be a file name: ",
                                       nb::cast<std::string>(nb::str(e.value())))
                                    .c_str());
        }
        nb::bytes raw = nb::borrow<nb::bytes>(encoded);
        const std::string path(raw.c_str(), raw.size());
        if (path.find('\0') != std::string::npos) {
          throw nb::value_error(
              "kiln.load_module: path holds a NUL character, which no file name can");
        }
        DevicePtr dev = DeviceArg(device, "kiln.load_module");
        auto m = std::make_shared<UserModule>();
        m->device = dev;
        m->module = Check(runtime::LoadedModule::LoadFile(dev->gpu_ref(), path));
        return m;
      },
      "path"_a.none(), "device"_a.none() = nb::none(),
      nb::sig("def load_module(path: str | bytes | os.PathLike[str] | os.PathLike[bytes], "
              "device: Device | None = None) -> Module"),
      "Loads a compiled module (.kmod file) on a device.");
}

void BindOps(nb::module_& m) {
  nb::module_ o = m.def_submodule("ops", "Builders of the operator library's programs.");
  o.def("unary_names", []() { return Names(ops::UnaryOpNames()); });
  o.def("binary_names", []() { return Names(ops::BinaryOpNames()); });
  o.def("compare_names", []() { return Names(ops::CompareOpNames()); });
  o.def("ternary_names", []() { return Names(ops::TernaryOpNames()); });
  o.def("predicate_names", []() { return Names(ops::PredicateOpNames()); });
  o.def(
      "elementwise_takes",
      [](const std::string& op, const std::string& dtype) {
        return ops::ElementwiseOpTakes(op, ToTensorType({{1}, dtype}).dtype);
      },
      "op"_a, "dtype"_a, "Whether elementwise op `op` takes tensors of `dtype` (a numpy name).");
  o.def("reduce_names", []() { return Names(ops::ReduceOpNames()); });
  o.def(
      "elementwise",
      [](const DevicePtr& d, const std::string& op, const std::vector<TensorTypeArg>& inputs) {
        std::vector<ops::TensorType> types;
        types.reserve(inputs.size());
        for (const auto& t : inputs) types.push_back(ToTensorType(t));
        return FromFunction(d, ops::Elementwise(op, types, d->target()));
      },
      "device"_a, "op"_a, "inputs"_a);
  o.def(
      "elementwise_chain",
      // Each step: (op, tensor, constant, operand_first, second tensor,
      // second constant, cast dtype), the unused ones None.
      [](const DevicePtr& d, const TensorTypeArg& input,
         const std::vector<std::tuple<std::string, std::optional<TensorTypeArg>,
                                      std::optional<double>, bool, std::optional<TensorTypeArg>,
                                      std::optional<double>, std::optional<std::string>>>& steps) {
        std::vector<ops::ChainStep> chain;
        for (const auto& [op, tensor, constant, first, tensor2, constant2, dtype] : steps) {
          ops::ChainStep s;
          s.op = op;
          if (tensor) s.tensor = ToTensorType(*tensor);
          s.constant = constant;
          s.operand_first = first;
          if (tensor2) s.second_tensor = ToTensorType(*tensor2);
          s.second_constant = constant2;
          if (dtype) s.cast_to = Check(IrTypeOf(Check(ParseDType(*dtype))));
          chain.push_back(std::move(s));
        }
        return FromFunction(d, ops::ElementwiseChain(ToTensorType(input), chain, d->target()));
      },
      "device"_a, "input"_a, "steps"_a);
  o.def(
      "elementwise_fused",
      // Each node: (kind "input" / "constant" / "op", input index, constant
      // value, dtype (a constant's or a cast's; None: float32), op, args).
      [](const DevicePtr& d, const std::vector<TensorTypeArg>& inputs,
         const std::vector<std::tuple<std::string, int, double, std::optional<std::string>,
                                      std::string, std::vector<int>>>& nodes) {
        std::vector<ops::TensorType> types;
        types.reserve(inputs.size());
        for (const auto& t : inputs) types.push_back(ToTensorType(t));
        std::vector<ops::FusedNode> graph;
        for (const auto& [kind, input, value, dtype, op, args] : nodes) {
          ops::FusedNode n;
          if (kind == "input") {
            n = ops::FusedNode::Input(input);
          } else if (kind == "constant") {
            n = ops::FusedNode::Constant(value);
          } else if (kind == "op") {
            n = ops::FusedNode::Op(op, args);
          } else {
            Check(
                InvalidArgument("a fused node's kind is input, constant or op, not '", kind, "'"));
          }
          if (dtype) n.dtype = Check(IrTypeOf(Check(ParseDType(*dtype))));
          graph.push_back(std::move(n));
        }
        return FromSequence(d, ops::ElementwiseFusedKernels(types, graph, d->target()), "fused");
      },
      "device"_a, "inputs"_a, "nodes"_a,
      "The program of a fused elementwise expression: one kernel, or several in order where "
      "one would read more tensors than the device binds or nest deeper than kiln compiles.");
  o.def(
      "reduce",
      [](const DevicePtr& d, const std::string& op, const TensorTypeArg& input, bool keepdims) {
        return FromFunction(d, ops::Reduce(op, ToTensorType(input), keepdims, d->target()));
      },
      "device"_a, "op"_a, "input"_a, "keepdims"_a);
  o.def(
      "softmax",
      [](const DevicePtr& d, const TensorTypeArg& input) {
        return FromSequence(d, ops::Softmax(ToTensorType(input), d->target()), "softmax");
      },
      "device"_a, "input"_a);
  o.def("arg_reduce_names", []() { return Names(ops::ArgReduceOpNames()); });
  o.def(
      "reduce_axes",
      [](const DevicePtr& d, const std::string& op, const TensorTypeArg& input,
         const std::vector<int>& axes, bool keepdims) {
        return FromFunction(d,
                            ops::ReduceAxes(op, ToTensorType(input), axes, keepdims, d->target()));
      },
      "device"_a, "op"_a, "input"_a, "axes"_a, "keepdims"_a);
  o.def(
      "arg_reduce",
      [](const DevicePtr& d, const std::string& op, const TensorTypeArg& input, int axis,
         bool keepdims) {
        return FromFunction(d,
                            ops::ArgReduce(op, ToTensorType(input), axis, keepdims, d->target()));
      },
      "device"_a, "op"_a, "input"_a, "axis"_a, "keepdims"_a);
  o.def(
      "softmax_axis",
      [](const DevicePtr& d, const TensorTypeArg& input, int axis) {
        return FromFunction(d, ops::SoftmaxAxis(ToTensorType(input), axis, d->target()));
      },
      "device"_a, "input"_a, "axis"_a);
  o.def(
      "log_softmax",
      [](const DevicePtr& d, const TensorTypeArg& input, int axis) {
        return FromFunction(d, ops::LogSoftmax(ToTensorType(input), axis, d->target()));
      },
      "device"_a, "input"_a, "axis"_a);
  o.def(
      "layer_norm",
      [](const DevicePtr& d, const TensorTypeArg& input, double eps) {
        return FromFunction(d, ops::LayerNorm(ToTensorType(input), eps, d->target()));
      },
      "device"_a, "input"_a, "eps"_a);
  o.def(
      "rms_norm",
      [](const DevicePtr& d, const TensorTypeArg& input, double eps) {
        return FromFunction(d, ops::RmsNorm(ToTensorType(input), eps, d->target()));
      },
      "device"_a, "input"_a, "eps"_a);
  o.def(
      "permute",
      [](const DevicePtr& d, const TensorTypeArg& input, const std::vector<int>& perm) {
        return FromFunction(d, ops::Permute(ToTensorType(input), perm, d->target()));
      },
      "device"_a, "input"_a, "perm"_a);
  o.def(
      "reshape",
      [](const DevicePtr& d, const TensorTypeArg& input, const std::vector<int64_t>& shape) {
        return FromFunction(d, ops::Reshape(ToTensorType(input), shape, d->target()));
      },
      "device"_a, "input"_a, "shape"_a);
  o.def(
      "concat",
      [](const DevicePtr& d, const std::vector<TensorTypeArg>& inputs, int axis) {
        std::vector<ops::TensorType> types;
        types.reserve(inputs.size());
        for (const auto& t : inputs) types.push_back(ToTensorType(t));
        return FromFunction(d, ops::Concat(types, axis, d->target()));
      },
      "device"_a, "inputs"_a, "axis"_a);
  o.def(
      "slice",
      [](const DevicePtr& d, const TensorTypeArg& input, const std::vector<int64_t>& starts,
         const std::vector<int64_t>& stops, const std::vector<int64_t>& steps) {
        return FromFunction(d, ops::Slice(ToTensorType(input), starts, stops, steps, d->target()));
      },
      "device"_a, "input"_a, "starts"_a, "stops"_a, "steps"_a,
      "starts/stops/steps per axis; INT64_MAX / INT64_MIN stand for an open end.");
  o.def(
      "gather",
      [](const DevicePtr& d, const TensorTypeArg& table, const TensorTypeArg& indices) {
        return FromFunction(d,
                            ops::Gather(ToTensorType(table), ToTensorType(indices), d->target()));
      },
      "device"_a, "table"_a, "indices"_a);
  o.def(
      "pad",
      [](const DevicePtr& d, const TensorTypeArg& input, const std::vector<int64_t>& before,
         const std::vector<int64_t>& after, double value) {
        return FromFunction(d, ops::Pad(ToTensorType(input), before, after, value, d->target()));
      },
      "device"_a, "input"_a, "before"_a, "after"_a, "value"_a);
  o.def(
      "where",
      [](const DevicePtr& d, const TensorTypeArg& cond, const TensorTypeArg& a,
         const TensorTypeArg& b) {
        return FromFunction(
            d, ops::Where(ToTensorType(cond), ToTensorType(a), ToTensorType(b), d->target()));
      },
      "device"_a, "cond"_a, "a"_a, "b"_a);
  o.def(
      "cast",
      [](const DevicePtr& d, const TensorTypeArg& input, const std::string& dtype) {
        const ir::DataType to = Check(IrTypeOf(Check(ParseDType(dtype))));
        return FromFunction(d, ops::Cast(ToTensorType(input), to, d->target()));
      },
      "device"_a, "input"_a, "dtype"_a);
  o.def(
      "unpack_bytes",
      [](const DevicePtr& d, const TensorTypeArg& input) {
        // (the 8-bit dtypes, which have no kernel element type of their own)
        const DType dtype = Check(ParseDType(input.second));
        const ir::DataType t = dtype == DType::kI8   ? ir::kI8
                               : dtype == DType::kU8 ? ir::kU8
                                                     : Check(IrTypeOf(dtype));
        return FromFunction(d, ops::UnpackBytes({input.first, t}, d->target()));
      },
      "device"_a, "input"_a,
      "The int8 or uint8 tensor's bytes (read as its int32 words) as int32 values.");
  o.def(
      "pack_bytes",
      [](const DevicePtr& d, const std::vector<int64_t>& shape) {
        return FromFunction(d, ops::PackBytes(shape, d->target()));
      },
      "device"_a, "shape"_a,
      "int32 values as bytes (each its low 8 bits), packed four to an int32 word.");
  o.def(
      "matmul",
      [](const DevicePtr& d, const TensorTypeArg& a, const TensorTypeArg& b, bool transpose_a,
         bool transpose_b, const std::optional<TensorTypeArg>& bias, const std::string& activation,
         const std::optional<TensorTypeArg>& residual, const std::string& accumulate) {
        ops::MatmulOptions options;
        options.transpose_a = transpose_a;
        options.transpose_b = transpose_b;
        if (bias) options.bias = ToTensorType(*bias);
        options.activation = activation;
        if (residual) options.residual = ToTensorType(*residual);
        options.accumulate = Check(IrTypeOf(Check(ParseDType(accumulate))));
        return FromFunction(d, ops::Matmul(ToTensorType(a), ToTensorType(b), d->target(), options));
      },
      "device"_a, "a"_a, "b"_a, "transpose_a"_a, "transpose_b"_a, "bias"_a.none(), "activation"_a,
      "residual"_a.none(), "accumulate"_a = "float32",
      "The default schedule (ops::DefaultMatmulSchedule). Inputs: A, B, then bias and residual "
      "where given; accumulate is float32 or float16 (float16 inputs only).");
  o.def(
      "matmul_int8",
      [](const DevicePtr& d, const TensorTypeArg& a, const TensorTypeArg& b) {
        ops::TensorType pa = PackedInt8Type(a, "a"), pb = PackedInt8Type(b, "b");
        if (a.first.back() != b.first.back()) {
          Throw(InvalidArgument("matmul_int8: a is ", ShapeText(a.first), " and b ",
                                ShapeText(b.first), ": the contraction dimension K differs (",
                                a.first.back(), " against ", b.first.back(), ")"));
        }
        return FromFunction(d, ops::MatmulInt8(pa, pb, d->target()));
      },
      "device"_a, "a"_a, "b"_a,
      "ops::MatmulInt8 on int8 tensors a [..., M, K] and b [..., N, K] (K a multiple of 4, "
      "packed four to a word as the tensors' bytes are). Inputs: A, B; output C (int32).");
  o.def(
      "conv2d",
      [](const DevicePtr& d, const TensorTypeArg& x, const TensorTypeArg& w, bool nhwc,
         std::array<int64_t, 2> stride, std::array<int64_t, 2> padding,
         std::array<int64_t, 2> dilation, int64_t groups, const std::optional<TensorTypeArg>& bias,
         const std::string& activation) {
        ops::Conv2dOptions options;
        options.nhwc = nhwc;
        options.stride_h = stride[0];
        options.stride_w = stride[1];
        options.pad_h = padding[0];
        options.pad_w = padding[1];
        options.dilation_h = dilation[0];
        options.dilation_w = dilation[1];
        options.groups = groups;
        if (bias) options.bias = ToTensorType(*bias);
        options.activation = activation;
        return FromFunction(d, ops::Conv2d(ToTensorType(x), ToTensorType(w), d->target(), options));
      },
      "device"_a, "x"_a, "w"_a, "nhwc"_a, "stride"_a, "padding"_a, "dilation"_a, "groups"_a,
      "bias"_a.none(), "activation"_a, "Inputs: X, W, then bias where given.");
  o.def(
      "pool2d",
      [](const DevicePtr& d, const std::string& op, const TensorTypeArg& x, bool nhwc,
         std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride,
         std::array<int64_t, 2> padding) {
        ops::Pool2dOptions options;
        options.nhwc = nhwc;
        options.kernel_h = kernel[0];
        options.kernel_w = kernel[1];
        options.stride_h = stride[0];
        options.stride_w = stride[1];
        options.pad_h = padding[0];
        options.pad_w = padding[1];
        return FromFunction(d, ops::Pool2d(op, ToTensorType(x), d->target(), options));
      },
      "device"_a, "op"_a, "x"_a, "nhwc"_a, "kernel"_a, "stride"_a, "padding"_a);
  o.def(
      "attention",
      [](const DevicePtr& d, const TensorTypeArg& q, const TensorTypeArg& k, const TensorTypeArg& v,
         bool causal, const std::optional<TensorTypeArg>& mask, std::optional<double> scale) {
        ops::AttentionOptions options;
        options.causal = causal;
        if (mask) options.mask = ToTensorType(*mask);
        options.scale = scale;
        return FromFunction(d, ops::Attention(ToTensorType(q), ToTensorType(k), ToTensorType(v),
                                              d->target(), options));
      },
      "device"_a, "q"_a, "k"_a, "v"_a, "causal"_a, "mask"_a.none(), "scale"_a.none(),
      "Inputs: Q, K, V, then mask where given.");
  o.def(
      "packed_attention",
      [](const DevicePtr& d, const TensorTypeArg& qkv, int64_t heads, bool causal,
         const std::optional<TensorTypeArg>& mask, std::optional<double> scale) {
        ops::AttentionOptions options;
        options.causal = causal;
        if (mask) options.mask = ToTensorType(*mask);
        options.scale = scale;
        return FromFunction(d,
                            ops::PackedAttention(ToTensorType(qkv), heads, d->target(), options));
      },
      "device"_a, "qkv"_a, "heads"_a, "causal"_a, "mask"_a.none(), "scale"_a.none(),
      "Inputs: QKV, then mask where given.");
}

}  // namespace kiln::python
