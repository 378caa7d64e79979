// What the parts of the Python extension share: kiln's errors as Python
// exceptions, devices with their queue of recorded work, tensors, and
// programs (compiled kernels run in order on tensors).
#pragma once

#include <nanobind/nanobind.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "kiln/codegen/wgsl_codegen.h"
#include "kiln/hal/buffer.h"
#include "kiln/hal/command_buffer.h"
#include "kiln/hal/device.h"
#include "kiln/ir/function.h"
#include "kiln/ops/ops.h"
#include "kiln/runtime/module.h"
#include "kiln/support/status.h"

namespace kiln::python {

namespace nb = nanobind;

// A kiln Status thrown as a C++ exception; the module's translator raises
// the kiln.Error subclass of its code with its message.
class StatusError : public std::exception {
 public:
  explicit StatusError(Status status) : status_(std::move(status)) {}
  const char* what() const noexcept override { return status_.message().c_str(); }
  const Status& status() const { return status_; }

 private:
  Status status_;
};

[[noreturn]] inline void Throw(const Status& status) {
  throw StatusError(status);
}
// An argument of the wrong type that kiln's own checks find:
// kiln.ArgumentTypeError, both a kiln.InvalidArgument and a TypeError
// (python.md).
[[noreturn]] inline void ThrowArgumentType(const std::string& message) {
  nb::object cls = nb::module_::import_("kiln.ops").attr("ArgumentTypeError");
  PyErr_SetString(cls.ptr(), message.c_str());
  throw nb::python_error();
}
inline void Check(const Status& status) {
  if (!status.ok()) Throw(status);
}
template <typename T>
T Check(StatusOr<T> value) {
  if (!value.ok()) Throw(value.status());
  return std::move(value).value();
}

// A Python object's type as a user writes it ("int", "te.Tensor",
// "kiln.Tensor").
inline std::string TypeNameOf(nb::handle h) {
  std::string name = nb::cast<std::string>(nb::type_name(h.type()));
  // kiln._kiln.te.Tensor is te.Tensor, kiln._kiln.Tensor is kiln.Tensor.
  const std::string_view internal = "kiln._kiln.";
  if (name.starts_with(internal)) {
    name.erase(0, internal.size());
    if (!name.starts_with("te.")) name.insert(0, "kiln.");
  }
  return name;
}

// The UTF-8 text of str `h` (which the caller has checked is a str), or a
// ValueError naming `fn`, `what` and where the text holds a lone surrogate
// (which UTF-8 cannot encode: '\ud800', or a byte os.fsdecode could not
// decode).
inline std::string TextOf(nb::handle h, std::string_view fn, std::string_view what) {
  Py_ssize_t size = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(h.ptr(), &size);
  if (utf8 != nullptr) return std::string(utf8, static_cast<size_t>(size));
  PyErr_Clear();
  Py_ssize_t at = 0;
  Py_UCS4 c = 0;
  for (const Py_ssize_t n = PyUnicode_GetLength(h.ptr()); at < n; ++at) {
    c = PyUnicode_ReadChar(h.ptr(), at);
    if (c >= 0xD800 && c <= 0xDFFF) break;
  }
  char code[16];
  std::snprintf(code, sizeof code, "U+%04X", static_cast<unsigned>(c));
  throw nb::value_error((std::string(fn) + ": " + std::string(what) +
                         " is not valid text: it holds a lone surrogate (" + code + ") at index " +
                         std::to_string(at) + ", which UTF-8 cannot encode")
                            .c_str());
}

// Argument `what` of `fn` as a T, or a TypeError naming both and what came
// (`expected`: how the message names a T).
template <typename T>
T ArgOf(nb::handle h, const char* fn, const char* what, const char* expected) {
  T value;
  if (!nb::try_cast<T>(h, value)) {
    // A str refused where text is expected is one UTF-8 cannot encode: say so.
    if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, std::optional<std::string>>) {
      if (PyUnicode_Check(h.ptr())) (void)TextOf(h, fn, what);
    }
    throw nb::type_error(
        (std::string(fn) + ": " + what + " must be " + expected + ", not " + TypeNameOf(h))
            .c_str());
  }
  return value;
}

// An int argument: a Python or numpy integer (a bool or a float is
// refused, not truncated).
inline int64_t IntArg(nb::handle h, const char* fn, const char* what) {
  if (!PyIndex_Check(h.ptr()) || PyBool_Check(h.ptr())) {
    throw nb::type_error((std::string(fn) + ": " + what + " must be an int, not " + TypeNameOf(h) +
                          " (" + nb::cast<std::string>(nb::repr(h)) + ")")
                             .c_str());
  }
  PyObject* index = PyNumber_Index(h.ptr());
  if (index == nullptr) {
    // (numpy's array([4]) has __index__, which refuses it with a TypeError
    // that does not name the call; other exceptions pass as they are.)
    if (!PyErr_ExceptionMatches(PyExc_TypeError)) throw nb::python_error();
    nb::python_error error;
    throw nb::type_error((std::string(fn) + ": " + what + " must be an int, not " + TypeNameOf(h) +
                          " (" + nb::cast<std::string>(nb::repr(h)) + "), which int() refuses: " +
                          nb::cast<std::string>(nb::str(error.value())))
                             .c_str());
  }
  const nb::object value = nb::steal(index);
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  if (overflow != 0) {
    Throw(InvalidArgument(fn, ": ", what, " ", nb::cast<std::string>(nb::repr(value)),
                          " is outside the 64-bit integers [-2^63, 2^63 - 1]"));
  }
  if (v == -1 && PyErr_Occurred()) throw nb::python_error();
  return v;
}

// A flag argument: a Python or numpy bool (not 0, 1 or a string).
inline bool BoolArg(nb::handle h, const char* fn, const char* what) {
  const std::string_view type = Py_TYPE(h.ptr())->tp_name;
  if (!PyBool_Check(h.ptr()) && type != "numpy.bool" && type != "numpy.bool_") {
    throw nb::type_error((std::string(fn) + ": " + what + " must be a bool, not " + TypeNameOf(h) +
                          " (" + nb::cast<std::string>(nb::repr(h)) + ")")
                             .c_str());
  }
  return PyObject_IsTrue(h.ptr()) == 1;
}
// Creates kiln.Error and its subclasses in `m` and installs the translator.
void RegisterErrors(nb::module_& m);

// Tensor element types, as numpy has them.
enum class DType : uint8_t { kF32, kF16, kI32, kU32, kI8, kU8, kBool };
std::string_view DTypeName(DType t);  // "float32", "float16", ..., "bool"
// Parses "float32"/"f32", ..., "bool"; InvalidArgument naming the choices.
StatusOr<DType> ParseDType(std::string_view name);
// Bytes per element in a device buffer: bool is a 32-bit 0 or 1 (the kernel
// ABI's layout), i8/u8 one byte each (packed four to a word, as the
// kernel ABI's int8x4).
uint32_t DeviceBytes(DType t);
// The IR type operators take; InvalidArgument for i8/u8 (no such buffer
// element type: they bind to int8x4 parameters only).
StatusOr<ir::DataType> IrTypeOf(DType t);
StatusOr<DType> FromIrType(ir::DataType t);
std::string ShapeText(const std::vector<int64_t>& shape);

struct DispatchTime {
  std::string name;
  double gpu_ns = 0;
};

// A device, with the command buffer work is recorded into until something
// needs it done (a download, a profile's end, or a full batch).
//
// Waits for the device go in slices, holding the GIL: between them Python's
// signal handlers run (in the main thread: Ctrl-C raises KeyboardInterrupt),
// and a wait longer than the device's timeout raises kiln.DeadlineExceeded.
// WebGPU cannot stop work, so what was submitted goes on: every later call
// that reaches the GPU waits for it first, and a device freed while such
// work may still run is not waited for (its WebGPU objects are kept to the
// end of the process instead).
//
// A device belongs to the process that made it: in a fork()ed child, every
// call that would reach the GPU fails with kiln.FailedPrecondition, and
// nothing of it is released there.
class DeviceState {
 public:
  explicit DeviceState(std::shared_ptr<hal::Device> device,
                       std::chrono::nanoseconds timeout = hal::kInfinite);
  ~DeviceState();

  // The device's properties (usable in any process).
  hal::Device& device() { return *device_; }
  // The device for GPU work: fails in a fork()ed child; first waits (as
  // WaitSubmitted) for work an earlier wait gave up on.
  hal::Device& gpu();
  const std::shared_ptr<hal::Device>& gpu_ref() {
    (void)gpu();
    return device_;
  }
  // Whether this process is a fork()ed child of the one that made the device.
  bool forked() const;
  std::chrono::nanoseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::nanoseconds timeout) { timeout_ = timeout; }
  const ops::Target& target() const { return target_; }
  const codegen::CompileOptions& compile_options() const { return compile_options_; }

  // Records one dispatch of `kernel` into the open command buffer.
  void Record(const runtime::Kernel& kernel, std::span<const runtime::Arg> args);
  // Submits the open command buffer, if any, without waiting.
  void Flush();
  // Flush, then wait for every submitted command buffer.
  void Synchronize();
  // Waits (as the class comment says) for the work submitted so far, if any;
  // `what` names the call in a timeout's message.
  void WaitSubmitted(std::string_view what);

  void BeginProfile();
  std::vector<DispatchTime> EndProfile();
  bool profiling() const { return profiling_; }

  // The operator cache (a dict), keyed by the Python layer.
  nb::dict& cache() { return cache_; }

  // Queue-ordered reuse of tensors' buffers. A buffer no tensor holds any
  // more while recorded or submitted work still uses it is kept here
  // (counted against the device's pool capacity with the HAL's pool of
  // idle buffers), and serves the next tensor of its size class whose first
  // write is recorded work: that work runs after the earlier uses on the
  // queue, so a forward pass reuses its intermediates' memory at once
  // instead of holding all of them until the work is done. Once the work
  // is done (a wait), kept buffers go to the HAL's pool, which serves any
  // allocation; so does a buffer no work uses when it is dropped.
  void Retire(hal::BufferRef buffer);
  // A kept buffer reassigned as one of `bytes` bytes (the longest kept of
  // its size class), or null where none is kept or the device is not
  // healthy. For an upload (`upload`), null while work is recorded and not
  // yet submitted: the upload, submitted at once, would run before it.
  hal::BufferRef TakeRetired(uint64_t bytes, bool upload);
  // A buffer of `bytes` bytes for a new tensor: a kept one (TakeRetired),
  // else the allocator's (which empties its pool of idle buffers and tries
  // again where the device is out of memory). Where it still is, and work
  // is queued or buffers kept, the work is submitted and waited for, which
  // makes what it and kept buffers hold idle, and it is tried once more.
  hal::BufferRef NewBuffer(uint64_t bytes, bool upload);
  // Waits for the work queued, then destroys every buffer kept for reuse,
  // kept and idle, giving their memory back to the implementation.
  void EmptyCache();
  uint64_t retired_bytes() const { return retired_bytes_; }
  uint64_t retired_buffers() const { return retired_count_; }
  uint64_t reuses() const { return reuses_; }

 private:
  std::shared_ptr<hal::Device> device_;
  ops::Target target_;
  codegen::CompileOptions compile_options_;
  std::unique_ptr<hal::CommandBuffer> open_;
  size_t open_dispatches_ = 0;
  // Submitted, possibly still running, with their serials: kept until a wait.
  std::vector<std::pair<uint64_t, std::unique_ptr<hal::CommandBuffer>>> submitted_;
  bool profiling_ = false;
  std::vector<std::unique_ptr<hal::CommandBuffer>> profiled_;
  nb::dict cache_;
  // Retire's buffers by allocated size, the longest kept first.
  std::map<uint64_t, std::deque<hal::BufferRef>> retired_;
  uint64_t retired_bytes_ = 0, retired_count_ = 0, reuses_ = 0;
  std::chrono::nanoseconds timeout_;
  // The fork generation (module.cc) the device was made in.
  uint64_t generation_;
  // Command buffers submitted (Flush) so far, and how many of those are
  // known to be complete.
  uint64_t submitted_serial_ = 0;
  uint64_t completed_serial_ = 0;
  // A wait ended (timeout, signal) before the work did.
  bool unfinished_ = false;

  // Fails in a fork()ed child.
  void CheckProcess() const;
  // Hands the kept buffers no work uses any more to the HAL's pool.
  void ReleaseIdleRetired();
  // How a wait in slices for submission `serial` ended: done, past the
  // timeout, interrupted (a signal handler's exception is set), or failed
  // (`error`).
  enum class WaitEnd { kDone, kTimeout, kInterrupted, kError };
  WaitEnd WaitInSlices(uint64_t serial, Status& error);
};
using DevicePtr = std::shared_ptr<DeviceState>;

// The default device, made on first use as the CLI makes it (DeviceOptions
// from $KILN_IMPL, $KILN_BACKEND, $KILN_TRUSTED).
DevicePtr DefaultDevice();

// What a tensor and its views (tensors over the same buffer) share: when
// the last of them goes, the buffer goes to its device for queue-ordered
// reuse (DeviceState::Retire).
struct TensorStorage {
  DevicePtr device;
  hal::BufferRef buffer;
  ~TensorStorage();
};

// A tensor: a device buffer holding a dense row-major array.
struct Tensor {
  DevicePtr device;
  // (Declared before `buffer`, so that it goes last.)
  std::shared_ptr<TensorStorage> storage;
  hal::BufferRef buffer;
  std::vector<int64_t> shape;
  DType dtype = DType::kF32;

  ~Tensor();
  int64_t size() const;
  uint64_t nbytes() const { return static_cast<uint64_t>(size()) * DeviceBytes(dtype); }
};
using TensorPtr = std::shared_ptr<Tensor>;
// A tensor of unspecified contents, whose first write is recorded work on
// the device, or an upload where `upload` (DeviceState::TakeRetired).
TensorPtr NewTensor(const DevicePtr& device, std::vector<int64_t> shape, DType dtype,
                    bool upload = false);

// Compiled kernels run in order on tensors. Buffer parameters of the same
// name are the same tensor across kernels: those no kernel writes are the
// inputs (in the order of `input_order`, their names, where given, else of
// first use), those written and not intermediates the outputs;
// intermediates are allocated per run.
class Program {
 public:
  static std::shared_ptr<Program> Create(const DevicePtr& device,
                                         const std::vector<ir::Function>& functions,
                                         const std::vector<ops::IntermediateTensor>& intermediates,
                                         std::string label,
                                         const std::vector<std::string>& input_order = {});
  // Checks the inputs (count, device, shape, dtype), allocates the outputs,
  // records every kernel, and returns the outputs (work queued, not done).
  std::vector<TensorPtr> Run(const std::vector<TensorPtr>& inputs) const;
  ~Program() {
    // Nothing of a parent's device is released in a fork()ed child.
    if (device_ && device_->forked()) (void)module_.release();
  }

  struct Slot {
    std::string name;
    std::vector<int64_t> shape;
    DType dtype = DType::kF32;
  };
  const std::vector<Slot>& inputs() const { return inputs_; }
  const std::vector<Slot>& outputs() const { return outputs_; }
  const std::string& label() const { return label_; }
  std::vector<std::string> wgsl() const;

  // The device's Python object, for the garbage collector: a program in its
  // device's operator cache refers back to the device, a cycle that only
  // the collector can free (Python's reference counts alone never do).
  nb::handle device_object() const { return device_object_; }

 private:
  // One reference to the device's Python object, owned by the program
  // alone (not shared with the tensors it makes), so that the collector
  // may count it as the program's.
  nb::object device_object_;
  DeviceState* device_ = nullptr;
  std::string label_;
  std::unique_ptr<runtime::LoadedModule> module_;
  std::vector<const runtime::Kernel*> kernels_;
  std::vector<Slot> inputs_, outputs_, temps_;
  // Per kernel, per parameter: index into inputs, outputs, temps (kinds 0, 1, 2).
  std::vector<std::vector<std::pair<int, int>>> params_;
};
using ProgramPtr = std::shared_ptr<Program>;

// A compiled module loaded on a device; its kernels are called on tensors
// and Python scalars, checked against their metadata.
struct UserModule {
  DevicePtr device;
  std::unique_ptr<runtime::LoadedModule> module;
  ~UserModule() {
    // Nothing of a parent's device is released in a fork()ed child.
    if (device && device->forked()) (void)module.release();
  }
};
struct UserKernel {
  std::shared_ptr<UserModule> module;
  const runtime::Kernel* kernel = nullptr;
};
// `source`: where the parser found the functions' statements, if they were
// parsed (lowering's errors then point into the text).
std::shared_ptr<UserModule> CompileFunctions(const DevicePtr& device,
                                             const std::vector<ir::Function>& functions,
                                             const ir::SourceMap* source = nullptr);
UserKernel FindKernel(const std::shared_ptr<UserModule>& module, const std::string& name);

void BindTensors(nb::module_& m);
void BindKernels(nb::module_& m);
void BindOps(nb::module_& m);
void BindTe(nb::module_& m);

}  // namespace kiln::python
