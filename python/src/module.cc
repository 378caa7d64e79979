// The extension module kiln._kiln: errors, element types, devices and
// profiling; the other parts are bound from tensors.cc, kernels.cc and te.cc.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <pthread.h>

#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "common.h"
#include "kiln/check/check.h"
#include "kiln/hal/queue.h"

namespace kiln::python {

namespace {

// kiln.Error and one subclass per status code (indexed by StatusCode).
PyObject* g_errors[static_cast<int>(StatusCode::kInternal) + 1] = {};
PyObject* g_base_error = nullptr;

}  // namespace

void RegisterErrors(nb::module_& m) {
  g_base_error = PyErr_NewExceptionWithDoc(
      "kiln.Error", "Base of every error kiln raises; the message is kiln's.", PyExc_Exception,
      nullptr);
  m.attr("Error") = nb::handle(g_base_error);
  struct Spec {
    StatusCode code;
    const char* name;
    PyObject* extra_base;
    const char* doc;
  };
  const Spec specs[] = {
      {StatusCode::kInvalidArgument, "InvalidArgument", PyExc_ValueError,
       "An argument is malformed or out of range (a shape, dtype, name, value)."},
      {StatusCode::kCompileError, "CompileError", nullptr,
       "Kernel IR or WGSL was rejected; the message carries the line and column."},
      {StatusCode::kOutOfMemory, "OutOfMemory", PyExc_MemoryError,
       "A device or host allocation failed."},
      {StatusCode::kDeviceLost, "DeviceLost", nullptr,
       "The device is gone; every later call on it fails too."},
      {StatusCode::kUnavailable, "Unavailable", nullptr,
       "An implementation, adapter or device feature is missing."},
      {StatusCode::kFailedPrecondition, "FailedPrecondition", nullptr,
       "An object is in the wrong state for the call."},
      {StatusCode::kDeadlineExceeded, "DeadlineExceeded", PyExc_TimeoutError,
       "A wait for the device ran past its timeout."},
      {StatusCode::kDataLoss, "DataLoss", nullptr,
       "A file is corrupt, truncated or of another version."},
      {StatusCode::kUnimplemented, "Unimplemented", PyExc_NotImplementedError,
       "A construct kiln does not support (yet)."},
      {StatusCode::kInternal, "InternalError", nullptr,
       "The WebGPU implementation or kiln itself misbehaved."},
  };
  for (const Spec& s : specs) {
    PyObject* bases =
        s.extra_base ? PyTuple_Pack(2, g_base_error, s.extra_base) : PyTuple_Pack(1, g_base_error);
    std::string qualified = std::string("kiln.") + s.name;
    PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), s.doc, bases, nullptr);
    Py_DECREF(bases);
    g_errors[static_cast<int>(s.code)] = type;
    m.attr(s.name) = nb::handle(type);
  }
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const StatusError& e) {
      PyObject* type = g_errors[static_cast<int>(e.status().code())];
      // Messages quote what they were given: a NUL there is shown (as
      // \x00), not the message's end, and bytes that are not UTF-8 are
      // escaped rather than a UnicodeDecodeError.
      std::string text;
      for (char c : e.status().message()) {
        if (c == '\0') {
          text += "\\x00";
        } else {
          text += c;
        }
      }
      PyObject* message = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()),
                                               "backslashreplace");
      if (message) {
        PyErr_SetObject(type ? type : g_base_error, message);
        Py_DECREF(message);
      }
    }
  });
}

std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kF32:
      return "float32";
    case DType::kF16:
      return "float16";
    case DType::kI32:
      return "int32";
    case DType::kU32:
      return "uint32";
    case DType::kI8:
      return "int8";
    case DType::kU8:
      return "uint8";
    case DType::kBool:
      return "bool";
  }
  return "?";
}

StatusOr<DType> ParseDType(std::string_view name) {
  struct Entry {
    const char* a;
    const char* b;
    DType t;
  };
  static constexpr Entry kEntries[] = {
      {"float32", "f32", DType::kF32}, {"float16", "f16", DType::kF16},
      {"int32", "i32", DType::kI32},   {"uint32", "u32", DType::kU32},
      {"int8", "i8", DType::kI8},      {"uint8", "u8", DType::kU8},
      {"bool", "bool", DType::kBool},
  };
  for (const Entry& e : kEntries) {
    if (name == e.a || name == e.b) return e.t;
  }
  return InvalidArgument("dtype '", name,
                         "' is not supported; kiln's dtypes are float32 (f32), float16 (f16), "
                         "int32 (i32), uint32 (u32), int8 (i8), uint8 (u8) and bool");
}

uint32_t DeviceBytes(DType t) {
  switch (t) {
    case DType::kF16:
      return 2;
    case DType::kI8:
    case DType::kU8:
      return 1;
    default:
      return 4;
  }
}

StatusOr<ir::DataType> IrTypeOf(DType t) {
  switch (t) {
    case DType::kF32:
      return ir::kF32;
    case DType::kF16:
      return ir::kF16;
    case DType::kI32:
      return ir::kI32;
    case DType::kU32:
      return ir::kU32;
    case DType::kBool:
      return ir::kBool;
    default:
      return InvalidArgument(DTypeName(t),
                             " tensors have no kernel element type of their own: kernels read "
                             "8-bit data as int8x4 (four lanes packed in 32 bits); the data "
                             "movement operators and astype take them");
  }
}

StatusOr<DType> FromIrType(ir::DataType t) {
  if (t == ir::kF32) return DType::kF32;
  if (t == ir::kF16) return DType::kF16;
  if (t == ir::kI32) return DType::kI32;
  if (t == ir::kU32) return DType::kU32;
  if (t == ir::kBool) return DType::kBool;
  return InvalidArgument("element type ", t.ToString(), " has no tensor dtype");
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

namespace {

// Counts fork()s (pthread_atfork, installed with the module): a device made
// at another count belongs to an ancestor process.
std::atomic<uint64_t> g_fork_generation{0};

// How long one slice of a wait is: Python's signal handlers run between
// slices.
constexpr std::chrono::milliseconds kWaitSlice{20};

// The fork generation in which a WebGPU implementation was first used here
// (a device made or adapters listed); -1 before. Its state does not survive
// a fork: a child process may not use it again.
std::atomic<int64_t> g_gpu_generation{-1};

constexpr const char* kUseSpawn =
    "start child processes before using the GPU, or with multiprocessing's 'spawn' or "
    "'forkserver' method";

}  // namespace

// Fails in a fork()ed child of a process that had used a WebGPU
// implementation; else records that this process uses one.
void CheckGpuUsable(std::string_view what) {
  const int64_t now = static_cast<int64_t>(g_fork_generation.load());
  int64_t first = g_gpu_generation.load();
  if (first >= 0 && first != now) {
    Throw(FailedPrecondition(what,
                             ": this process was fork()ed from one that had already used a WebGPU "
                             "implementation, whose state does not survive a fork: ",
                             kUseSpawn));
  }
  g_gpu_generation.store(now);
}

namespace {

std::string SecondsText(std::chrono::nanoseconds t) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", static_cast<double>(t.count()) / 1e9);
  return text;
}

}  // namespace

DeviceState::DeviceState(std::shared_ptr<hal::Device> device, std::chrono::nanoseconds timeout)
    : device_(std::move(device)),
      target_{runtime::TargetLimitsOf(*device_), device_->HasFeature(hal::Feature::kShaderF16),
              device_->HasFeature(hal::Feature::kSubgroups), std::string(device_->impl().name()),
              device_->trusted()},
      compile_options_(check::CompileOptionsFor(*device_)),
      timeout_(timeout),
      generation_(g_fork_generation.load()) {}

DeviceState::~DeviceState() {
  // Work still queued finishes before the buffers it uses go, within the
  // device's timeout (Ctrl-C ends the wait too, and is raised afterwards).
  // What may still run, and everything in a fork()ed child, is kept to the
  // end of the process instead of being released under the GPU.
  bool keep = forked() || unfinished_;
  if (!keep && (open_ || completed_serial_ < submitted_serial_)) {
    if (open_ && open_->End().ok() && hal::Submit(*device_, *open_).ok()) ++submitted_serial_;
    Status error;
    const WaitEnd end = WaitInSlices(submitted_serial_, error);
    keep = end == WaitEnd::kTimeout || end == WaitEnd::kInterrupted;
    if (end == WaitEnd::kInterrupted) {
      // A destructor cannot raise: Ctrl-C is raised again at the next chance.
      if (PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) {
        PyErr_Clear();
        PyErr_SetInterrupt();
      } else {
        PyErr_WriteUnraisable(nullptr);
      }
    }
  }
  if (keep) {
    new std::shared_ptr<hal::Device>(device_);
    for (auto& [size, buffers] : retired_) new std::deque<hal::BufferRef>(std::move(buffers));
    (void)open_.release();
    for (auto& [serial, cb] : submitted_) (void)cb.release();
    for (auto& cb : profiled_) (void)cb.release();
  } else {
    device_->allocator().CountKept(-static_cast<int64_t>(retired_bytes_));
  }
}

bool DeviceState::forked() const {
  return generation_ != g_fork_generation.load();
}

void DeviceState::CheckProcess() const {
  if (forked()) {
    Throw(
        FailedPrecondition("the device ", device_->Describe(),
                           " was made by a parent of this process (before a fork()), and a WebGPU "
                           "implementation's state does not survive a fork: ",
                           kUseSpawn));
  }
}

hal::Device& DeviceState::gpu() {
  CheckProcess();
  // New work would queue behind what an earlier wait gave up on, and some
  // calls (pipeline creation, a submit) can block behind it without a way
  // out: wait for it first, in slices.
  if (unfinished_)
    WaitSubmitted("a call on a device still running work an earlier wait gave up on");
  return *device_;
}

void DeviceState::Retire(hal::BufferRef buffer) {
  // One no work holds is idle: the HAL's pool takes it.
  if (!buffer || buffer.use_count() == 1) return;
  hal::BufferAllocator& allocator = device_->allocator();
  const uint64_t size = buffer->allocated_size();
  if (!allocator.RoomToKeep(size) || !device_->CheckHealthy().ok()) return;
  allocator.CountKept(static_cast<int64_t>(size));
  retired_[size].push_back(std::move(buffer));
  retired_bytes_ += size;
  ++retired_count_;
}

hal::BufferRef DeviceState::TakeRetired(uint64_t bytes, bool upload) {
  // (gpu() may wait, and Python's signal handlers run in waits: they may
  // record work, so what is recorded is asked after it.)
  hal::Device& device = gpu();
  if (retired_count_ == 0 || (upload && open_) || !device.CheckHealthy().ok() || bytes == 0 ||
      bytes > device.limits().max_buffer_size / 4 * 4) {
    return nullptr;
  }
  hal::BufferAllocator& allocator = device.allocator();
  const uint64_t size = allocator.AllocatedSize(bytes);
  auto it = retired_.find(size);
  if (it == retired_.end() || it->second.empty()) return nullptr;
  hal::BufferRef buffer = std::move(it->second.front());
  it->second.pop_front();
  allocator.CountKept(-static_cast<int64_t>(size));
  retired_bytes_ -= size;
  --retired_count_;
  Check(hal::BufferAllocator::Reuse(*buffer, bytes));
  ++reuses_;
  return buffer;
}

hal::BufferRef DeviceState::NewBuffer(uint64_t bytes, bool upload) {
  if (hal::BufferRef kept = TakeRetired(bytes, upload)) return kept;
  StatusOr<hal::BufferRef> made = gpu().allocator().Allocate(bytes);
  if (made.status().code() == StatusCode::kOutOfMemory &&
      (open_ || !submitted_.empty() || retired_count_ > 0)) {
    // Queued work holds buffers, some of them dropped tensors' (kept for
    // reuse): once it is done they are idle, in the pool, which serves this
    // allocation or is emptied for it.
    Flush();
    WaitSubmitted(
        StrCat("waiting for queued work to free memory for a buffer of ", bytes, " bytes"));
    made = device_->allocator().Allocate(bytes);
    if (made.status().code() == StatusCode::kOutOfMemory) {
      Throw(made.status().WithContext(
          "after waiting for queued work and emptying kiln's pool of idle buffers"));
    }
  }
  return Check(std::move(made));
}

void DeviceState::EmptyCache() {
  Synchronize();
  device_->allocator().Trim();
  device_->FreeDestroyed();
}

void DeviceState::ReleaseIdleRetired() {
  hal::BufferAllocator& allocator = device_->allocator();
  for (auto& [size, buffers] : retired_) {
    std::erase_if(buffers, [&](const hal::BufferRef& b) {
      if (b.use_count() > 1) return false;
      // (Uncounted first: the pool it goes to counts what is kept.)
      allocator.CountKept(-static_cast<int64_t>(size));
      retired_bytes_ -= size;
      --retired_count_;
      return true;
    });
  }
}

void DeviceState::Record(const runtime::Kernel& kernel, std::span<const runtime::Arg> args) {
  hal::Device& device = gpu();
  if (!open_) {
    hal::CommandBufferOptions options;
    options.label = "kiln.python";
    options.profile = profiling_;
    open_ = Check(hal::CommandBuffer::Create(device.shared_from_this(),
                                             hal::CommandBufferMode::kOneShot, options));
  }
  Check(kernel.Record(*open_, args));
  if (++open_dispatches_ >= 256) Flush();
}

void DeviceState::Flush() {
  if (!open_) return;
  hal::Device& device = gpu();
  std::unique_ptr<hal::CommandBuffer> cb = std::move(open_);
  open_dispatches_ = 0;
  Check(cb->End());
  Check(hal::Submit(device, *cb));
  ++submitted_serial_;
  if (cb->stats().dispatches > 0 && profiling_) {
    profiled_.push_back(std::move(cb));
  } else {
    submitted_.emplace_back(submitted_serial_, std::move(cb));
  }
  // Bound the work in flight (and the buffers it holds).
  if (submitted_.size() >= 16) {
    WaitSubmitted(
        "queuing work (kiln waits for the device while 16 batches of work are in flight)");
  }
}

DeviceState::WaitEnd DeviceState::WaitInSlices(uint64_t serial, Status& error) {
  auto fence = hal::Fence::Create(device_);
  if (error = fence->Signal(1); !error.ok()) return WaitEnd::kError;
  const auto start = std::chrono::steady_clock::now();
  while (completed_serial_ < serial) {
    auto slice = std::chrono::duration_cast<std::chrono::nanoseconds>(kWaitSlice);
    const auto waited = std::chrono::steady_clock::now() - start;
    if (timeout_ != hal::kInfinite) slice = std::min(slice, std::max(timeout_ - waited, {}));
    const Status status = fence->Wait(1, slice);
    if (status.ok()) break;
    if (status.code() != StatusCode::kDeadlineExceeded) {
      error = status;
      return WaitEnd::kError;
    }
    // The GIL stays held: kiln's calls on a device never run side by side
    // (nor does a daemon thread meet the interpreter's end inside one).
    // Signal handlers run in the main thread only.
    if (PyGILState_Check() && PyErr_CheckSignals() != 0) return WaitEnd::kInterrupted;
    if (timeout_ != hal::kInfinite && std::chrono::steady_clock::now() - start >= timeout_) {
      return WaitEnd::kTimeout;
    }
  }
  completed_serial_ = std::max(completed_serial_, serial);
  return WaitEnd::kDone;
}

void DeviceState::WaitSubmitted(std::string_view what) {
  CheckProcess();
  if (completed_serial_ >= submitted_serial_) return;
  const uint64_t serial = submitted_serial_;
  Status error;
  switch (WaitInSlices(serial, error)) {
    case WaitEnd::kDone:
      break;
    case WaitEnd::kInterrupted:
      unfinished_ = true;
      throw nb::python_error();
    case WaitEnd::kTimeout:
      unfinished_ = true;
      Throw(DeadlineExceeded(
          what, ": the device had not finished after ", SecondsText(timeout_),
          " s (the device's timeout); a loop that never ends? WebGPU cannot stop work: it goes "
          "on, later calls on this device wait for it first, and kiln does not wait for it when "
          "the device is freed"));
    case WaitEnd::kError:
      Throw(error.WithContext(what));
  }
  if (completed_serial_ >= submitted_serial_) unfinished_ = false;
  std::erase_if(submitted_, [&](const auto& entry) { return entry.first <= serial; });
  ReleaseIdleRetired();
}

void DeviceState::Synchronize() {
  Flush();
  WaitSubmitted("synchronize");
  Check(device_->CheckHealthy());
}

void DeviceState::BeginProfile() {
  if (profiling_) Throw(FailedPrecondition("a profile is already open on this device"));
  if (!device_->HasFeature(hal::Feature::kTimestampQuery)) {
    Throw(Unavailable("profiling needs the timestamp-query feature, which the device ",
                      device_->Describe(), " does not have"));
  }
  Flush();
  profiling_ = true;
}

std::vector<DispatchTime> DeviceState::EndProfile() {
  if (!profiling_) Throw(FailedPrecondition("no profile is open on this device"));
  // However it ends, the profile is closed and its command buffers go.
  struct Close {
    DeviceState* d;
    ~Close() {
      d->profiling_ = false;
      d->profiled_.clear();
      d->ReleaseIdleRetired();
    }
  } close{this};
  Flush();
  WaitSubmitted("ending a profile");
  std::vector<DispatchTime> times;
  for (auto& cb : profiled_) {
    for (const hal::DispatchTiming& t : Check(cb->ReadProfile())) {
      times.push_back({t.name, t.gpu_ns});
    }
  }
  return times;
}

void InstallForkHandler() {
  pthread_atfork(nullptr, nullptr, [] {
    g_fork_generation.fetch_add(1);
#ifdef __GLIBC__
    // A WebGPU implementation's exit handlers wait for its threads, which a
    // fork()ed child does not have (Mesa's lavapipe crashes there): a child
    // of a process that used one ends before they run, with its own status,
    // after flushing its C streams. Handlers registered after the fork still
    // run first.
    if (g_gpu_generation.load() >= 0) {
      on_exit(
          [](int status, void*) {
            std::fflush(nullptr);
            std::_Exit(status);
          },
          nullptr);
    }
#endif
  });
}

// `seconds` (written `text`) as a wait's limit: 0 is none.
std::chrono::nanoseconds TimeoutOf(double seconds, std::string_view what, std::string_view text) {
  if (!(seconds >= 0) || seconds > 1e6 || (seconds > 0 && seconds < 1e-9)) {
    Throw(InvalidArgument(what,
                          " must be a number of seconds from 0 (no limit) to 1000000, and not "
                          "below 1e-9 (a nanosecond) unless 0, got ",
                          text));
  }
  if (seconds == 0) return hal::kInfinite;
  return std::max(std::chrono::nanoseconds(1),
                  std::chrono::nanoseconds(static_cast<int64_t>(seconds * 1e9)));
}

// $KILN_TIMEOUT in seconds (0 or unset: no limit).
std::chrono::nanoseconds TimeoutFromEnvironment() {
  const char* text = std::getenv("KILN_TIMEOUT");
  if (text == nullptr || *text == '\0') return hal::kInfinite;
  // Decimal, as the CLI's --timeout (no locale, no hexadecimal, no spaces).
  double seconds = 0;
  const char* end = text + std::strlen(text);
  const auto [stop, error] = std::from_chars(text, end, seconds);
  if (error != std::errc() || stop != end) {
    Throw(InvalidArgument("KILN_TIMEOUT must be a number of seconds (0 for no limit), got '", text,
                          "'"));
  }
  return TimeoutOf(seconds, "KILN_TIMEOUT", StrCat("'", text, "'"));
}

DevicePtr DefaultDevice() {
  // Never destroyed: it may outlive the interpreter. In a fork()ed child
  // the parent's stays, unreleased, and CheckGpuUsable refuses a new one.
  static auto* device = new DevicePtr();
  if (!*device || (*device)->forked()) {
    const std::chrono::nanoseconds timeout = TimeoutFromEnvironment();
    CheckGpuUsable("kiln.default_device()");
    auto made = hal::Device::Create(hal::DeviceOptions{});
    *device = std::make_shared<DeviceState>(Check(std::move(made)), timeout);
    // Its Python object too, so that the garbage collector never takes it
    // (with its operator cache) for a cycle no one holds.
    new nb::object(nb::cast(*device));
  }
  return *device;
}

namespace {

// A device's operator cache holds programs, which hold the device: the
// device tells the garbage collector about its cache, and each program
// about its device (tensors.cc), so that a device no one else holds is
// freed with its cache.
int DeviceTraverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self)) return 0;
  Py_VISIT(nb::inst_ptr<DeviceState>(self)->cache().ptr());
  return 0;
}
int DeviceClear(PyObject* self) {
  if (nb::inst_ready(self)) nb::inst_ptr<DeviceState>(self)->cache().clear();
  return 0;
}
PyType_Slot g_device_slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(DeviceTraverse)},
                                {Py_tp_clear, reinterpret_cast<void*>(DeviceClear)},
                                {0, nullptr}};

nb::dict LimitsDict(const hal::Limits& l) {
  nb::dict d;
  d["max_bind_groups"] = l.max_bind_groups;
  d["max_bindings_per_bind_group"] = l.max_bindings_per_bind_group;
  d["max_storage_buffers_per_shader_stage"] = l.max_storage_buffers_per_shader_stage;
  d["max_uniform_buffers_per_shader_stage"] = l.max_uniform_buffers_per_shader_stage;
  d["max_uniform_buffer_binding_size"] = l.max_uniform_buffer_binding_size;
  d["max_storage_buffer_binding_size"] = l.max_storage_buffer_binding_size;
  d["min_uniform_buffer_offset_alignment"] = l.min_uniform_buffer_offset_alignment;
  d["min_storage_buffer_offset_alignment"] = l.min_storage_buffer_offset_alignment;
  d["max_buffer_size"] = l.max_buffer_size;
  d["max_compute_workgroup_storage_size"] = l.max_compute_workgroup_storage_size;
  d["max_compute_invocations_per_workgroup"] = l.max_compute_invocations_per_workgroup;
  d["max_compute_workgroup_size_x"] = l.max_compute_workgroup_size_x;
  d["max_compute_workgroup_size_y"] = l.max_compute_workgroup_size_y;
  d["max_compute_workgroup_size_z"] = l.max_compute_workgroup_size_z;
  d["max_compute_workgroups_per_dimension"] = l.max_compute_workgroups_per_dimension;
  return d;
}

nb::dict AdapterDict(const hal::AdapterReport& a) {
  nb::dict d;
  d["impl"] = std::string(hal::ImplKindName(a.impl));
  d["backend"] = std::string(hal::BackendName(a.backend));
  d["feature_level"] = std::string(hal::FeatureLevelName(a.feature_level));
  d["adapter"] = a.device;
  d["description"] = a.description;
  d["vendor"] = a.vendor;
  d["architecture"] = a.architecture;
  d["adapter_type"] = a.adapter_type;
  d["library"] = a.library;
  d["features"] = a.features;
  d["limits"] = LimitsDict(a.limits);
  return d;
}

std::shared_ptr<hal::Device> MakeDevice(const std::optional<std::string>& impl,
                                        const std::optional<std::string>& backend,
                                        const std::optional<std::string>& feature_level,
                                        std::optional<bool> trusted) {
  hal::DeviceOptions options;
  if (impl) options.impl = Check(hal::ParseImplKind(*impl));
  if (backend) options.backend = Check(hal::ParseBackend(*backend));
  if (feature_level) options.feature_level = Check(hal::ParseFeatureLevel(*feature_level));
  options.trusted = trusted;
  CheckGpuUsable("kiln.Device");
  return Check(hal::Device::Create(options));
}

// A timeout argument in seconds: None takes $KILN_TIMEOUT; 0 is no limit.
std::chrono::nanoseconds TimeoutArg(nb::handle h, const char* fn) {
  if (h.is_none()) return TimeoutFromEnvironment();
  const PyNumberMethods* number = Py_TYPE(h.ptr())->tp_as_number;
  if (PyBool_Check(h.ptr()) || number == nullptr ||
      (number->nb_float == nullptr && number->nb_index == nullptr)) {
    throw nb::type_error(
        (std::string(fn) + ": timeout must be a number of seconds or None, not " + TypeNameOf(h))
            .c_str());
  }
  double seconds = PyFloat_AsDouble(h.ptr());
  if (seconds == -1.0 && PyErr_Occurred()) {
    if (!PyErr_ExceptionMatches(PyExc_OverflowError)) throw nb::python_error();
    PyErr_Clear();  // an int past float64's range: past the limit too
    seconds = HUGE_VAL;
  }
  return TimeoutOf(seconds, std::string(fn) + ": timeout", nb::cast<std::string>(nb::repr(h)));
}

}  // namespace

}  // namespace kiln::python

using namespace kiln;          // NOLINT(google-build-using-namespace)
using namespace kiln::python;  // NOLINT(google-build-using-namespace)
using namespace nb::literals;  // NOLINT(google-build-using-namespace)

NB_MODULE(_kiln, m) {
  m.doc() = "kiln's C++ core: devices, tensors, operators, kernels and tensor expressions.";
  nb::set_leak_warnings(false);
  RegisterErrors(m);
  InstallForkHandler();

  m.def(
      "_set_bundled_libraries",
      [](const std::string& dawn, const std::string& wgpu) {
        hal::Implementation::SetBundledPath(hal::ImplKind::kDawn, dawn);
        hal::Implementation::SetBundledPath(hal::ImplKind::kWgpu, wgpu);
      },
      "dawn"_a, "wgpu"_a,
      "Where the package's own Dawn and wgpu-native libraries are (used unless "
      "KILN_DAWN_LIBRARY / KILN_WGPU_LIBRARY say otherwise).");

  m.def(
      "devices",
      []() {
        CheckGpuUsable("kiln.devices()");
        hal::Device::Enumeration e = hal::Device::EnumerateAdapters();
        if (e.misconfigured) {
          std::string message;
          for (const std::string& s : e.errors) message += (message.empty() ? "" : "; ") + s;
          Throw(InvalidArgument(message));
        }
        nb::list adapters;
        for (const hal::AdapterReport& a : e.adapters) adapters.append(AdapterDict(a));
        return adapters;
      },
      "Every adapter of every WebGPU implementation kiln can load: a list of dicts with impl, "
      "backend, feature_level, adapter (its name), description, vendor, architecture, "
      "adapter_type, library, features and limits.");

  nb::class_<DeviceState>(m, "Device",
                          "A WebGPU device. Arguments left as None are taken from KILN_IMPL, "
                          "KILN_BACKEND and KILN_TRUSTED, else kiln's defaults (Dawn, then "
                          "wgpu-native; the implementation's first backend).",
                          nb::type_slots(g_device_slots), nb::is_weak_referenceable())
      .def(
          "__init__",
          [](DeviceState* self, nb::handle impl, nb::handle backend, nb::handle feature_level,
             nb::handle trusted, nb::handle timeout) {
            auto name = [](nb::handle h, const char* what, const char* values) {
              return ArgOf<std::optional<std::string>>(h, "kiln.Device", what, values);
            };
            const std::chrono::nanoseconds limit = TimeoutArg(timeout, "kiln.Device");
            std::shared_ptr<hal::Device> made = MakeDevice(
                name(impl, "impl", "a str ('dawn' or 'wgpu') or None"),
                name(backend, "backend", "a str ('vulkan', 'opengl', ...) or None"),
                name(feature_level, "feature_level", "a str ('core' or 'compatibility') or None"),
                trusted.is_none()
                    ? std::nullopt
                    : std::optional<bool>(BoolArg(trusted, "kiln.Device", "trusted")));
            new (self) DeviceState(std::move(made), limit);
          },
          "impl"_a = nb::none(), "backend"_a = nb::none(), "feature_level"_a = nb::none(),
          "trusted"_a = nb::none(), "timeout"_a = nb::none(),
          "impl: 'dawn' or 'wgpu'; backend: 'vulkan', 'opengl', 'opengles', 'metal', 'd3d12'; "
          "feature_level: 'core' or 'compatibility'; trusted: no robustness transform (for "
          "in-bounds kernels only); timeout: seconds a wait for the device may take before "
          "kiln.DeadlineExceeded (None: KILN_TIMEOUT, else no limit; 0: no limit).")
      .def_prop_rw(
          "timeout",
          [](DeviceState& d) -> std::optional<double> {
            if (d.timeout() == hal::kInfinite) return std::nullopt;
            return static_cast<double>(d.timeout().count()) / 1e9;
          },
          [](DeviceState& d, nb::handle seconds) {
            if (seconds.is_none()) {
              d.set_timeout(hal::kInfinite);
            } else {
              d.set_timeout(TimeoutArg(seconds, "kiln.Device.timeout"));
            }
          },
          nb::for_setter(nb::arg("seconds").none()),
          "Seconds a wait for the device may take before kiln.DeadlineExceeded; None (or 0) for "
          "no limit.")
      .def_prop_ro(
          "impl", [](DeviceState& d) { return std::string(d.device().impl().name()); },
          "'dawn' or 'wgpu'.")
      .def_prop_ro(
          "backend",
          [](DeviceState& d) {
            return std::string(hal::BackendName(d.device().adapter().backend));
          },
          "The backend: 'vulkan', 'opengl', ...")
      .def_prop_ro(
          "feature_level",
          [](DeviceState& d) {
            return std::string(hal::FeatureLevelName(d.device().adapter().feature_level));
          },
          "'core' or 'compatibility'.")
      .def_prop_ro(
          "adapter", [](DeviceState& d) { return d.device().adapter().device; },
          "The adapter's name.")
      .def_prop_ro(
          "trusted", [](DeviceState& d) { return d.device().trusted(); },
          "Whether the device was made in trusted mode.")
      .def_prop_ro(
          "features", [](DeviceState& d) { return d.device().adapter().features; },
          "The adapter's features, by name.")
      .def_prop_ro(
          "limits", [](DeviceState& d) { return LimitsDict(d.device().limits()); },
          "The device's limits kiln depends on.")
      .def(
          "has_feature",
          [](DeviceState& d, nb::handle name) {
            return d.device().HasFeature(Check(hal::ParseFeature(
                ArgOf<std::string>(name, "has_feature", "name", "a str ('shader-f16', ...)"))));
          },
          "name"_a.none(),
          "Whether the device has a feature ('shader-f16', 'timestamp-query', ...).")
      .def("synchronize", &DeviceState::Synchronize, "Waits for all work queued on the device.")
      .def(
          "memory_stats",
          [](DeviceState& d) {
            const hal::AllocatorStats s = d.device().allocator().stats();
            nb::dict out;
            out["allocated_bytes"] = s.live_bytes;
            out["peak_allocated_bytes"] = s.peak_live_bytes;
            out["buffers_created"] = s.pool_misses;
            out["pooled_bytes"] = s.pooled_bytes;
            out["reusable_bytes"] = d.retired_bytes();
            out["reusable_buffers"] = d.retired_buffers();
            out["queue_ordered_reuses"] = d.reuses();
            out["pool_capacity_bytes"] = d.device().allocator().pool_capacity();
            return out;
          },
          "The device's memory, as a dict: allocated_bytes (the buffers kiln's allocator "
          "holds but idle pooled ones: tensors, buffers kept for queue-ordered reuse, staging) "
          "and its peak peak_allocated_bytes, buffers_created (WebGPU buffers made so far), "
          "pooled_bytes (idle buffers kept for reuse), reusable_bytes and reusable_buffers "
          "(dropped tensors' buffers that queued work still uses, kept for queue-ordered "
          "reuse), queue_ordered_reuses (tensors that took one) and pool_capacity_bytes (the "
          "most bytes kept and idle buffers may hold together now).")
      .def("empty_cache", &DeviceState::EmptyCache,
           "Waits for the work queued on the device, then destroys the buffers kept for reuse "
           "(kept and idle), giving their memory back to the WebGPU implementation.")
      .def(
          "_fail_buffer_creations",
          [](DeviceState& d, int count) { d.device().allocator().FailCreationsForTesting(count); },
          "count"_a, "Makes the next `count` buffer creations fail as out of memory (tests).")
      .def("_begin_profile", &DeviceState::BeginProfile)
      .def("_end_profile",
           [](DeviceState& d) {
             nb::list out;
             for (const DispatchTime& t : d.EndProfile())
               out.append(nb::make_tuple(t.name, t.gpu_ns));
             return out;
           })
      .def_prop_ro("_profiling", &DeviceState::profiling)
      .def_prop_ro(
          "_cache", [](DeviceState& d) { return d.cache(); }, "The device's operator cache.")
      .def("__repr__", [](DeviceState& d) {
        return "kiln.Device(" + d.device().Describe() + ")";  // (Describe says "trusted")
      });

  m.def("default_device", &DefaultDevice,
        "The device kiln uses when none is given, chosen as the kiln command chooses "
        "(KILN_IMPL, KILN_BACKEND, KILN_TRUSTED honoured); made on first use.");

  BindTensors(m);
  BindKernels(m);
  BindOps(m);
  BindTe(m);
}
