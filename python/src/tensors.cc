// Tensors (numpy in and out) and programs: compiled kernels run in order on
// tensors, the path every operator takes.
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <map>

#include "common.h"
#include "kiln/hal/queue.h"

namespace kiln::python {

Tensor::~Tensor() {
  // Nothing of a parent's device is released in a fork()ed child.
  if (device && device->forked()) new hal::BufferRef(std::move(buffer));
}

TensorStorage::~TensorStorage() {
  if (device && device->forked()) {
    new hal::BufferRef(std::move(buffer));
  } else if (device) {
    device->Retire(std::move(buffer));
  }
}

int64_t Tensor::size() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {

// A tensor's shape: no negative dimension, and at most 2^48 elements
// counting only its nonzero dimensions (numpy too refuses an empty shape
// whose other dimensions overflow), so that every product of it is exact.
void CheckShape(const std::vector<int64_t>& shape) {
  int64_t nonzero = 1;
  for (int64_t d : shape) {
    if (d < 0) Throw(InvalidArgument("shape ", ShapeText(shape), " has a negative dimension"));
    if (d == 0) continue;
    if (nonzero > (int64_t{1} << 48) / d) {
      Throw(InvalidArgument("shape ", ShapeText(shape),
                            " has more elements than any device buffer holds (counting only its "
                            "nonzero dimensions)"));
    }
    nonzero *= d;
  }
}

}  // namespace

TensorPtr NewTensor(const DevicePtr& device, std::vector<int64_t> shape, DType dtype, bool upload) {
  CheckShape(shape);
  auto t = std::make_shared<Tensor>();
  t->device = device;
  t->shape = std::move(shape);
  t->dtype = dtype;
  // Buffers are whole words, and never empty; at least 16 bytes, so a kernel
  // that reads a small tensor only as aligned vectors (array<vec4<f32>>)
  // can bind it (Kernel::MinBindingBytes).
  const uint64_t bytes = std::max<uint64_t>(16, (t->nbytes() + 3) / 4 * 4);
  t->buffer = device->NewBuffer(bytes, upload);
  t->storage = std::make_shared<TensorStorage>();
  t->storage->device = device;
  t->storage->buffer = t->buffer;
  return t;
}

namespace {

using ArrayIn = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

StatusOr<DType> DTypeOfArray(const nb::dlpack::dtype& t) {
  using Code = nb::dlpack::dtype_code;
  const auto code = static_cast<Code>(t.code);
  if (t.lanes == 1) {
    if (code == Code::Float && t.bits == 32) return DType::kF32;
    if (code == Code::Float && t.bits == 16) return DType::kF16;
    if (code == Code::Int && t.bits == 32) return DType::kI32;
    if (code == Code::UInt && t.bits == 32) return DType::kU32;
    if (code == Code::Int && t.bits == 8) return DType::kI8;
    if (code == Code::UInt && t.bits == 8) return DType::kU8;
    if (code == Code::Bool && t.bits == 8) return DType::kBool;
  }
  static const char* kCodes[] = {"int", "uint", "float", "?", "bfloat", "complex", "bool"};
  return InvalidArgument("arrays of ", t.code < 7 ? kCodes[t.code] : "?", t.bits,
                         " are not supported; kiln's dtypes are float32, float16, int32, uint32, "
                         "int8, uint8 and bool");
}

TensorPtr FromArray(const ArrayIn& array, const DevicePtr& device) {
  const DType dtype = Check(DTypeOfArray(array.dtype()));
  std::vector<int64_t> shape;
  for (size_t d = 0; d < array.ndim(); ++d) shape.push_back(static_cast<int64_t>(array.shape(d)));
  TensorPtr t = NewTensor(device, shape, dtype, /*upload=*/true);
  const auto* src = static_cast<const uint8_t*>(array.data());
  const size_t n = static_cast<size_t>(t->size());
  std::vector<uint8_t> bytes((t->nbytes() + 3) / 4 * 4, 0);
  if (dtype == DType::kBool) {
    for (size_t i = 0; i < n; ++i) {
      const uint32_t v = src[i] != 0 ? 1 : 0;
      std::memcpy(bytes.data() + i * 4, &v, 4);
    }
  } else if (n > 0) {
    std::memcpy(bytes.data(), src, t->nbytes());
  }
  if (!bytes.empty()) {
    // The upload's copy runs after the work submitted before it.
    device->WaitSubmitted("kiln.tensor");
    Check(hal::Upload(device->gpu(), t->buffer, 0, bytes));
  }
  return t;
}

nb::object NumpyDType(DType t) {
  static nb::object np_dtype = nb::module_::import_("numpy").attr("dtype");
  return np_dtype(std::string(DTypeName(t)));
}

nb::object ToNumpy(const Tensor& t) {
  t.device->Flush();
  t.device->WaitSubmitted("reading a tensor (.numpy())");
  const size_t n = static_cast<size_t>(t.size());
  const uint64_t device_bytes = t.nbytes();
  std::vector<uint8_t> bytes(device_bytes);
  if (device_bytes > 0) Check(hal::Download(t.device->gpu(), t.buffer, 0, bytes));
  Check(t.device->gpu().CheckHealthy());
  const size_t host_bytes = t.dtype == DType::kBool ? n : device_bytes;
  auto* data = new uint8_t[std::max<size_t>(host_bytes, 1)];
  if (t.dtype == DType::kBool) {
    for (size_t i = 0; i < n; ++i) {
      uint32_t v;
      std::memcpy(&v, bytes.data() + i * 4, 4);
      data[i] = v != 0 ? 1 : 0;
    }
  } else if (host_bytes > 0) {
    std::memcpy(data, bytes.data(), host_bytes);
  }
  nb::capsule owner(data, [](void* p) noexcept { delete[] static_cast<uint8_t*>(p); });
  std::vector<size_t> shape(t.shape.begin(), t.shape.end());
  nb::dlpack::dtype dt{};
  using Code = nb::dlpack::dtype_code;
  switch (t.dtype) {
    case DType::kF32:
      dt = {static_cast<uint8_t>(Code::Float), 32, 1};
      break;
    case DType::kF16:
      dt = {static_cast<uint8_t>(Code::Float), 16, 1};
      break;
    case DType::kI32:
      dt = {static_cast<uint8_t>(Code::Int), 32, 1};
      break;
    case DType::kU32:
      dt = {static_cast<uint8_t>(Code::UInt), 32, 1};
      break;
    case DType::kI8:
      dt = {static_cast<uint8_t>(Code::Int), 8, 1};
      break;
    case DType::kU8:
      dt = {static_cast<uint8_t>(Code::UInt), 8, 1};
      break;
    case DType::kBool:
      dt = {static_cast<uint8_t>(Code::Bool), 8, 1};
      break;
  }
  nb::ndarray<nb::numpy> out(data, shape.size(), shape.data(), owner, nullptr, dt);
  return out.cast();
}

std::vector<int64_t> ShapeArg(const std::vector<int64_t>& shape) {
  return shape;
}

}  // namespace

std::shared_ptr<Program> Program::Create(const DevicePtr& device,
                                         const std::vector<ir::Function>& functions,
                                         const std::vector<ops::IntermediateTensor>& intermediates,
                                         std::string label,
                                         const std::vector<std::string>& input_order) {
  auto p = std::make_shared<Program>();
  p->device_object_ = nb::cast(device);
  p->device_ = device.get();
  p->label_ = std::move(label);
  codegen::CompiledModule compiled;
  for (const ir::Function& f : functions) {
    compiled.functions.push_back(Check(codegen::CompileFunction(f, device->compile_options())));
  }
  p->module_ = Check(runtime::LoadedModule::Load(device->gpu_ref(), compiled));
  std::map<std::string, const ops::IntermediateTensor*> temps;
  for (const ops::IntermediateTensor& t : intermediates) temps[t.name] = &t;
  // Which names some kernel writes.
  std::map<std::string, bool> written;
  for (const codegen::CompiledFunction& cf : compiled.functions) {
    for (const codegen::ParamInfo& param : cf.metadata.params) {
      if (param.access == codegen::BufferAccess::kReadWrite) written[param.name] = true;
    }
  }
  std::map<std::string, std::pair<int, int>> slots;
  for (size_t k = 0; k < functions.size(); ++k) {
    const ir::Function& f = functions[k];
    const runtime::Kernel* kernel = Check(p->module_->Find(compiled.functions[k].metadata.name));
    Check(kernel->availability());
    p->kernels_.push_back(kernel);
    std::vector<std::pair<int, int>> params;
    for (const ir::Param& param : f.params()) {
      if (!param.is_buffer()) {
        Throw(Unimplemented("kernel ", f.name(), " has scalar parameter ", param.name(),
                            "; operators take constant shapes"));
      }
      const ir::Buffer& b = param.buffer();
      auto [it, fresh] = slots.try_emplace(b.name());
      if (fresh) {
        // An int8x4 parameter is an int8 tensor with four times its last
        // dimension: the words' lanes, in the same bytes.
        const bool packed = b.dtype() == ir::kInt8x4;
        Slot slot{b.name(), {}, packed ? DType::kI8 : Check(FromIrType(b.dtype()))};
        for (const ir::Expr& e : b.shape()) {
          const auto* imm = e.as<ir::IntImmNode>();
          if (!imm) {
            Throw(Unimplemented("parameter ", b.name(), " of ", f.name(),
                                " has a symbolic shape; operators take constant shapes"));
          }
          slot.shape.push_back(imm->value);
        }
        if (packed && !slot.shape.empty()) slot.shape.back() *= 4;
        std::vector<Slot>* list = temps.count(b.name())     ? &p->temps_
                                  : written.count(b.name()) ? &p->outputs_
                                                            : &p->inputs_;
        const int kind = list == &p->inputs_ ? 0 : list == &p->outputs_ ? 1 : 2;
        list->push_back(std::move(slot));
        it->second = {kind, static_cast<int>(list->size()) - 1};
      }
      params.push_back(it->second);
    }
    p->params_.push_back(std::move(params));
  }
  if (!input_order.empty()) {
    // The same inputs, in the order given.
    std::vector<Slot> ordered;
    std::vector<int> moved_to(p->inputs_.size(), -1);
    for (const std::string& name : input_order) {
      for (size_t k = 0; k < p->inputs_.size(); ++k) {
        if (p->inputs_[k].name == name && moved_to[k] < 0) {
          moved_to[k] = static_cast<int>(ordered.size());
          ordered.push_back(p->inputs_[k]);
        }
      }
    }
    if (ordered.size() != p->inputs_.size() || input_order.size() != ordered.size()) {
      Throw(Internal(p->label_, ": its input order names ", input_order.size(),
                     " tensors, and its kernels read ", p->inputs_.size()));
    }
    p->inputs_ = std::move(ordered);
    for (auto& params : p->params_) {
      for (auto& [kind, index] : params) {
        if (kind == 0) index = moved_to[index];
      }
    }
  }
  // Every tensor is bound whole: one the device cannot bind is refused
  // here, before any of the kernels is recorded.
  const uint64_t most = device->device().limits().max_storage_buffer_binding_size;
  for (const auto& [what, list] :
       {std::pair<const char*, const std::vector<Slot>*>{"input", &p->inputs_},
        {"output", &p->outputs_},
        {"intermediate", &p->temps_}}) {
    for (const Slot& s : *list) {
      // (bool is a 32-bit word per element; int8 packs four to a word.)
      uint64_t bytes = DeviceBytes(s.dtype);
      bool over = false;
      for (int64_t d : s.shape) {
        over |=
            __builtin_mul_overflow(bytes, static_cast<uint64_t>(std::max<int64_t>(d, 0)), &bytes);
      }
      bytes = (bytes + 3) / 4 * 4;
      if (over) {
        Throw(InvalidArgument(p->label_, ": its ", what, " ", s.name, ", ", DTypeName(s.dtype),
                              ShapeText(s.shape), ", has more bytes than 64 bits count"));
      }
      if (bytes > most) {
        Throw(InvalidArgument(p->label_, ": its ", what, " ", s.name, ", ", DTypeName(s.dtype),
                              ShapeText(s.shape), ", is ", bytes,
                              " bytes, more than the device binds of one buffer "
                              "(maxStorageBufferBindingSize, ",
                              most, " bytes)"));
      }
    }
  }
  return p;
}

std::vector<std::string> Program::wgsl() const {
  std::vector<std::string> out;
  for (const runtime::Kernel* k : kernels_) out.push_back(k->wgsl());
  return out;
}

std::vector<TensorPtr> Program::Run(const std::vector<TensorPtr>& inputs) const {
  if (inputs.size() != inputs_.size()) {
    Throw(InvalidArgument(label_, " takes ", inputs_.size(), " tensors, not ", inputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor* t = inputs[i].get();
    if (!t) Throw(InvalidArgument(label_, ": input ", inputs_[i].name, " is None"));
    if (t->device.get() != device_) {
      Throw(InvalidArgument(label_, ": input ", inputs_[i].name,
                            " is on another device than the operator"));
    }
    if (t->shape != inputs_[i].shape || t->dtype != inputs_[i].dtype) {
      Throw(InvalidArgument(label_, ": input ", inputs_[i].name, " is ", DTypeName(t->dtype),
                            ShapeText(t->shape), ", expected ", DTypeName(inputs_[i].dtype),
                            ShapeText(inputs_[i].shape)));
    }
  }
  // The tensors made hold the device by a reference of their own.
  const DevicePtr device =
      inputs.empty() ? nb::cast<DevicePtr>(device_object_) : inputs.front()->device;
  std::vector<TensorPtr> outputs, temps;
  for (const Slot& s : outputs_) outputs.push_back(NewTensor(device, s.shape, s.dtype));
  for (const Slot& s : temps_) temps.push_back(NewTensor(device, s.shape, s.dtype));
  std::vector<runtime::Arg> args;
  for (size_t k = 0; k < kernels_.size(); ++k) {
    args.clear();
    for (auto [kind, index] : params_[k]) {
      const TensorPtr& t = kind == 0 ? inputs[index] : kind == 1 ? outputs[index] : temps[index];
      args.push_back(runtime::Arg::Buffer(t->buffer, 0, t->nbytes()));
    }
    device_->Record(*kernels_[k], args);
  }
  return outputs;
}

namespace {

// A program reports its device to the garbage collector (module.cc says why).
int ProgramTraverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self)) return 0;
  Py_VISIT(nb::inst_ptr<Program>(self)->device_object().ptr());
  return 0;
}
PyType_Slot g_program_slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(ProgramTraverse)},
                                 {0, nullptr}};

}  // namespace

using namespace nb::literals;  // NOLINT(google-build-using-namespace)

void BindTensors(nb::module_& m) {
  nb::class_<Tensor>(m, "Tensor",
                     "A dense row-major array in device memory. Made by kiln.tensor, "
                     "kiln.empty and operators; .numpy() waits for the work that writes it.")
      .def_prop_ro(
          "shape",
          [](const Tensor& t) {
            nb::list l;
            for (int64_t d : t.shape) l.append(d);
            return nb::tuple(l);
          },
          "The shape, a tuple of ints.")
      .def_prop_ro(
          "dtype", [](const Tensor& t) { return NumpyDType(t.dtype); }, "The numpy dtype.")
      .def_prop_ro(
          "device", [](const Tensor& t) { return t.device; }, "The device holding it.")
      .def_prop_ro(
          "_sig",
          [](const Tensor& t) {
            nb::list l;
            l.append(static_cast<int>(t.dtype));
            for (int64_t d : t.shape) l.append(d);
            return nb::tuple(l);
          },
          "(dtype code, *shape): what an operator's kernels are cached by.")
      .def_prop_ro(
          "_type",
          [](const Tensor& t) { return std::make_pair(t.shape, std::string(DTypeName(t.dtype))); },
          "(shape, dtype name), as the operator builders take it.")
      .def_prop_ro(
          "ndim", [](const Tensor& t) { return t.shape.size(); }, "The number of dimensions.")
      .def_prop_ro(
          "size", [](const Tensor& t) { return t.size(); }, "The number of elements.")
      .def("numpy", &ToNumpy,
           "Copies the tensor into a new numpy array, waiting for the work queued before.")
      .def(
          "__array__",
          [](const Tensor& t, nb::handle dtype, nb::handle copy) {
            // numpy's protocol: copy=False asks for no copy, or an error.
            if (copy.ptr() == Py_False) {
              throw nb::value_error(
                  "a kiln.Tensor's data is on the device: a numpy array of it is always a copy "
                  "(copy=False cannot be honoured; np.asarray(t) or t.numpy() copies)");
            }
            nb::object a = ToNumpy(t);
            if (!dtype.is_none()) a = a.attr("astype")(dtype);
            return a;
          },
          "dtype"_a = nb::none(), "copy"_a = nb::none())
      .def(
          "astype",
          [](const TensorPtr& t, nb::handle dtype) {
            return nb::module_::import_("kiln.ops").attr("cast")(nb::cast(t), dtype);
          },
          "dtype"_a, nb::sig("def astype(self, dtype: object) -> Tensor"),
          "kiln.ops.cast(self, dtype): a copy converted to float32, float16, int32 or bool.")
      .def(
          "__getitem__",
          [](const TensorPtr& t, nb::handle key) {
            return nb::module_::import_("kiln.ops").attr("_getitem")(nb::cast(t), key);
          },
          "key"_a.none(), nb::sig("def __getitem__(self, key: object) -> Tensor"),
          "self[key] for ints, slices (negative steps too) and one '...', as numpy indexes: "
          "a copy (kiln.ops.slice), each int dropping its axis.")
      .def("__len__",
           [](const Tensor& t) {
             if (t.shape.empty()) throw nb::type_error("len() of a 0-d tensor");
             return t.shape[0];
           })
      .def("__repr__", [](const Tensor& t) {
        return "kiln.Tensor(shape=" + ShapeText(t.shape) +
               ", dtype=" + std::string(DTypeName(t.dtype)) + ")";
      });

  m.def(
      "_tensor_from_array",
      [](const ArrayIn& array, const DevicePtr& device) { return FromArray(array, device); },
      "array"_a, "device"_a, "A tensor holding a copy of a C-contiguous numpy array.");
  m.def(
      "_empty",
      [](const std::vector<int64_t>& shape, const std::string& dtype, const DevicePtr& device) {
        return NewTensor(device, ShapeArg(shape), Check(ParseDType(dtype)));
      },
      "shape"_a, "dtype"_a, "device"_a, "A tensor of unspecified contents.");
  m.def(
      "_view",
      [](const TensorPtr& t, const std::vector<int64_t>& shape, const std::string& dtype) {
        CheckShape(shape);
        auto v = std::make_shared<Tensor>(*t);
        v->shape = shape;
        v->dtype = Check(ParseDType(dtype));
        // An 8-bit tensor and the int32 or uint32 words of its buffer (its
        // bytes padded to whole words) view each other too.
        const auto bytes = [](const Tensor& x) { return DeviceBytes(x.dtype) == 1; };
        const Tensor& narrow = bytes(*t) ? *t : *v;
        const Tensor& wide = bytes(*t) ? *v : *t;
        const bool words = bytes(narrow) &&
                           (wide.dtype == DType::kI32 || wide.dtype == DType::kU32) &&
                           (narrow.size() + 3) / 4 == wide.size();
        if (!words && (v->size() != t->size() || DeviceBytes(v->dtype) != DeviceBytes(t->dtype))) {
          Throw(InvalidArgument("a view of a ", DTypeName(t->dtype), ShapeText(t->shape),
                                " tensor as ", DTypeName(v->dtype), ShapeText(shape),
                                " needs as many elements of the same size"));
        }
        return v;
      },
      "tensor"_a, "shape"_a, "dtype"_a,
      "The same buffer seen with another shape of as many elements, or as a dtype of the same "
      "layout (bool as int32): no copy, writes through one are seen through the other.");

  nb::class_<Program>(m, "Program",
                      "Compiled kernels run in order on tensors (an operator for one set of "
                      "input shapes and dtypes).",
                      nb::type_slots(g_program_slots))
      .def("run", &Program::Run, "inputs"_a,
           "Queues the kernels on the inputs; returns the output tensors.")
      .def("__call__",
           [](const Program& p, const nb::args& args) {
             std::vector<TensorPtr> inputs;
             for (size_t i = 0; i < args.size(); ++i) {
               TensorPtr t;
               if (!nb::try_cast<TensorPtr>(args[i], t) || !t) {
                 throw nb::type_error(("program input " + std::to_string(i + 1) + " is a " +
                                       nb::cast<std::string>(nb::type_name(args[i].type())) +
                                       ", not a kiln.Tensor (kiln.tensor(array, device) makes "
                                       "one)")
                                          .c_str());
               }
               inputs.push_back(t);
             }
             std::vector<TensorPtr> out = p.Run(inputs);
             if (out.size() == 1) return nb::cast(out[0]);
             return nb::cast(out);
           })
      .def_prop_ro(
          "inputs",
          [](const Program& p) {
            nb::list l;
            for (const auto& s : p.inputs()) {
              l.append(nb::make_tuple(s.name, nb::cast(s.shape), std::string(DTypeName(s.dtype))));
            }
            return l;
          },
          "(name, shape, dtype) of each input.")
      .def_prop_ro(
          "outputs",
          [](const Program& p) {
            nb::list l;
            for (const auto& s : p.outputs()) {
              l.append(nb::make_tuple(s.name, nb::cast(s.shape), std::string(DTypeName(s.dtype))));
            }
            return l;
          },
          "(name, shape, dtype) of each output.")
      .def_prop_ro("wgsl", &Program::wgsl, "The WGSL of each kernel.")
      .def_prop_ro("label", &Program::label)
      .def(
          "_time_cpp_calls",
          [](const Program& p, const std::vector<TensorPtr>& inputs, int iterations) {
            // The same call as from Python, made in a C++ loop: the baseline
            // of the Python call-overhead benchmark.
            auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < iterations; ++i) (void)p.Run(inputs);
            auto t1 = std::chrono::steady_clock::now();
            return std::chrono::duration<double>(t1 - t0).count();
          },
          "inputs"_a, "iterations"_a,
          "Seconds taken by `iterations` calls of run() made from C++ (for benchmarks).");
}

}  // namespace kiln::python
