#include "ops_bench.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <random>

#include "kiln/check/check.h"
#include "kiln/codegen/wgsl_codegen.h"
#include "kiln/hal/buffer.h"
#include "kiln/hal/command_buffer.h"
#include "kiln/hal/executable.h"
#include "kiln/hal/queue.h"
#include "kiln/interp/half.h"
#include "kiln/ops/ops.h"
#include "kiln/runtime/module.h"
#include "kiln/support/file.h"

namespace kiln::bench {
namespace {

// A hand-written kernel's own @workgroup_size(x[, y[, z]]), each a positive
// integer literal, becomes its metadata's (written out whole, as the
// module's validation reads it); a kernel that declares none is left to that
// validation to name what is missing, a malformed size is an error naming
// `file`.
Status AdoptWorkgroupSize(codegen::CompiledFunction& f, const std::string& file) {
  const std::string key = "@workgroup_size(";
  const size_t at = f.wgsl.find(key);
  if (at == std::string::npos) return Status::Ok();
  const size_t end = f.wgsl.find(')', at);
  std::array<uint32_t, 3> size = {1, 1, 1};
  bool ok = end != std::string::npos;
  size_t n = 0;
  for (size_t p = at + key.size(); ok && p < end; ++n) {
    const size_t comma = std::min(f.wgsl.find(',', p), end);
    std::string field = f.wgsl.substr(p, comma - p);
    field.erase(0, field.find_first_not_of(" \t\r\n"));
    field.erase(field.find_last_not_of(" \t\r\nui") + 1);  // 8u, 8i
    uint32_t v = 0;
    auto [last, error] = std::from_chars(field.data(), field.data() + field.size(), v);
    ok = n < 3 && error == std::errc() && last == field.data() + field.size() && v > 0;
    if (ok) size[n] = v;
    p = comma + 1;
  }
  if (!ok || n == 0) {
    return InvalidArgument("--wgsl-from: the @workgroup_size of ", file,
                           " is not one to three positive decimal integer literals (kiln reads "
                           "no hexadecimal or expressions there)");
  }
  f.wgsl.replace(at, end + 1 - at, StrCat(key, size[0], ", ", size[1], ", ", size[2], ")"));
  f.metadata.workgroup_size = size;
  return Status::Ok();
}

// The bandwidth ceiling: a plain copy over 4-lane vectors, written by hand.
// The ceiling and its peers: hand-written vec4 kernels that stream memory
// the way the elementwise operators do (a thread per vector, a 2-D grid of
// 256-thread workgroups), with one, two and three input streams.
constexpr const char* kStreamVec4Wgsl = R"(
struct Dims { count: u32, row: u32, unused0: u32, unused1: u32 }
@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> b1: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> b2: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> y: array<vec4<f32>>;
@group(0) @binding(4) var<uniform> dims: Dims;

fn index(group: vec3<u32>, local: vec3<u32>) -> u32 {
  return (group.y * dims.row + group.x) * 256u + local.x;
}

@compute @workgroup_size(256)
fn copy(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_id) local: vec3<u32>) {
  let i = index(group, local);
  if (i < dims.count) {
    y[i] = x[i];
  }
}

@compute @workgroup_size(256)
fn add(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_id) local: vec3<u32>) {
  let i = index(group, local);
  if (i < dims.count) {
    y[i] = x[i] + b1[i];
  }
}

@compute @workgroup_size(256)
fn mul_add(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_id) local: vec3<u32>) {
  let i = index(group, local);
  if (i < dims.count) {
    y[i] = (x[i] + b1[i]) * b2[i];
  }
}
)";

// Host copies of the inputs, one float per value: an int8x4 element is four
// values (its lanes, exact in f32).
using Tensors = std::map<std::string, std::vector<float>>;

// One workload: kernels run in order over named buffers.
struct Workload {
  std::string name, shape, kernels;
  std::vector<ir::Function> functions;
  std::map<std::string, ops::TensorType> inputs;   // filled with random values
  std::map<std::string, ops::TensorType> buffers;  // everything else (poisoned)
  // Per function where given: parameter name -> buffer name (else the same).
  std::vector<std::map<std::string, std::string>> bindings;
  std::string output;
  double bytes = 0, flops = 0;
  bool integer_ops = false;  // `flops` counts integer operations
  double tolerance = 1e-4;   // |got - want| <= tolerance * scale(i)
  // The expected output element i and its scale, from the inputs.
  std::function<std::pair<double, double>(const Tensors&, int64_t)> reference;
  std::string skip;  // a feature the device lacks
  Status error;      // the operator refused its arguments
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Values per element of `dtype`.
int64_t Lanes(ir::DataType dtype) {
  return dtype == ir::kInt8x4 ? 4 : 1;
}

// The buffer's bytes: f16, int8x4 (four values to a word, the first in the
// low byte) or 32-bit (f32; i32 buffers are only ever outputs, poisoned with
// f32 NaN bits).
std::vector<uint8_t> ToBytes(const std::vector<float>& v, ir::DataType dtype) {
  if (dtype == ir::kInt8x4) {
    std::vector<uint8_t> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      out[i] = std::isnan(v[i]) ? 0xFF : static_cast<uint8_t>(static_cast<int8_t>(v[i]));
    }
    return out;
  }
  if (dtype == ir::kF16) {
    std::vector<uint8_t> out(v.size() * 2);
    for (size_t i = 0; i < v.size(); ++i) {
      uint16_t h = interp::FloatToHalfBits(v[i]);
      std::memcpy(&out[2 * i], &h, 2);
    }
    return out;
  }
  std::vector<uint8_t> out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// An output's elements (f32, f16 or i32), exactly.
std::vector<double> FromBytes(const std::vector<uint8_t>& bytes, ir::DataType dtype) {
  const size_t n = bytes.size() / (dtype == ir::kF16 ? 2 : 4);
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) {
    if (dtype == ir::kF16) {
      uint16_t h;
      std::memcpy(&h, &bytes[2 * i], 2);
      out[i] = interp::HalfBitsToFloat(h);
    } else if (dtype == ir::kI32) {
      int32_t x;
      std::memcpy(&x, &bytes[4 * i], 4);
      out[i] = x;
    } else {
      float x;
      std::memcpy(&x, &bytes[4 * i], 4);
      out[i] = x;
    }
  }
  return out;
}

uint64_t Bytes(const ops::TensorType& t) {
  return uint64_t(ops::NumElements(t.shape)) * (t.dtype == ir::kF16 ? 2 : 4);
}

class Runner {
 public:
  Runner(std::shared_ptr<hal::Device> device, const OpsBenchOptions& options)
      : device_(std::move(device)), options_(options) {}

  // GB/s (bytes read + written / time) of the hand-written kernel `entry`
  // of kStreamVec4Wgsl over `elements` f32 per stream, with `inputs` input
  // streams: timed per dispatch and back to back (Timing).
  struct Rates {
    double gb_per_s = 0, back_to_back_gb_per_s = 0;
    double ms = 0, back_to_back_ms = 0;  // per run
  };
  StatusOr<Rates> StreamRate(const char* entry, int inputs, int64_t elements) {
    const hal::BindingKind in = hal::BindingKind::kReadOnlyStorage;
    KILN_ASSIGN_OR_RETURN(
        hal::ExecutableRef kernel,
        hal::LoadExecutable(*device_,
                            {StrCat(entry, " (hand-written WGSL)"),
                             kStreamVec4Wgsl,
                             {{entry,
                               {in, in, in, hal::BindingKind::kStorage, hal::BindingKind::kUniform},
                               256}}}));
    const uint64_t bytes = uint64_t(elements) * 4;
    std::vector<hal::BufferRef> buffers;
    // Random inputs, as the workloads read.
    std::mt19937 rng(20261202);
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    std::vector<float> values(elements);
    for (int b = 0; b < inputs + 1; ++b) {
      KILN_ASSIGN_OR_RETURN(hal::BufferRef buffer, device_->allocator().Allocate(bytes));
      if (b < inputs) {
        for (float& v : values) v = dist(rng);
        KILN_RETURN_IF_ERROR(hal::Upload(*device_, buffer, 0,
                                         {reinterpret_cast<const uint8_t*>(values.data()), bytes}));
      }
      buffers.push_back(buffer);
    }
    // Unused input bindings repeat the first input.
    hal::BufferBinding bindings[] = {{buffers[0]},
                                     {buffers[inputs >= 2 ? 1 : 0]},
                                     {buffers[inputs >= 3 ? 2 : 0]},
                                     {buffers[inputs]}};
    const uint32_t vectors = static_cast<uint32_t>(elements / 4);
    const uint32_t groups = (vectors + 255) / 256;
    const uint32_t row = std::min<uint32_t>(groups, 4096);
    const uint32_t dims[4] = {vectors, row, 0, 0};
    KILN_ASSIGN_OR_RETURN(Timing timing, Time([&](hal::CommandBuffer& cb) {
                            return cb.Dispatch(kernel, 0, bindings,
                                               {reinterpret_cast<const uint8_t*>(dims), 16}, row,
                                               (groups + row - 1) / row);
                          }));
    const double total = (inputs + 1.0) * bytes;
    return Rates{total / (timing.ms * 1e6), total / (timing.back_to_back_ms * 1e6), timing.ms,
                 timing.back_to_back_ms};
  }

  StatusOr<OpsTiming> Run(const Workload& w) {
    OpsTiming t;
    t.name = w.name;
    t.shape = w.shape;
    t.kernels = w.kernels;
    t.bytes = w.bytes;
    t.flops = w.flops;
    t.integer_ops = w.integer_ops;
    if (!w.skip.empty()) {
      t.skip = w.skip;
      return t;
    }
    const auto compile_start = std::chrono::steady_clock::now();
    KILN_ASSIGN_OR_RETURN(
        codegen::CompiledModule compiled,
        codegen::CompileModule(ir::Module{w.functions}, check::CompileOptionsFor(*device_)));
    t.compile_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - compile_start)
            .count();
    if (t.kernels.empty()) {
      for (const codegen::CompiledFunction& f : compiled.functions) {
        const auto& wg = f.metadata.workgroup_size;
        t.kernels += StrCat(t.kernels.empty() ? "" : "; ", f.metadata.name, ": workgroup ", wg[0],
                            "x", wg[1], "x", wg[2]);
      }
    }
    std::string base = StrCat(w.name, " ", w.shape);
    for (char& c : base) {
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    }
    // A single kernel's WGSL is DIR/<base>.wgsl; a workload of several
    // kernels has one file per kernel, DIR/<base>.<function>.wgsl.
    const bool one_kernel = compiled.functions.size() == 1;
    auto wgsl_file = [&](const std::string& dir, const codegen::CompiledFunction& f) {
      return one_kernel ? StrCat(dir, "/", base, ".wgsl")
                        : StrCat(dir, "/", base, ".", f.metadata.name, ".wgsl");
    };
    auto present = [](const std::string& file) {
      std::error_code error;
      // Anything there (a dangling link, a folder) is read, and refused.
      return std::filesystem::exists(std::filesystem::symlink_status(file, error));
    };
    // The --wgsl-from files that replaced kernels, by function.
    std::map<std::string, std::string> replaced_from;
    if (!options_.wgsl_from_dir.empty()) {
      if (first_wgsl_file_.empty())
        first_wgsl_file_ = wgsl_file(options_.wgsl_from_dir, compiled.functions[0]);
      const std::string whole = StrCat(options_.wgsl_from_dir, "/", base, ".wgsl");
      if (!one_kernel && present(whole)) {
        return InvalidArgument(
            "--wgsl-from: workload '", w.name, " ", w.shape, "' has ", compiled.functions.size(),
            " kernels, each replaced by a file of its own (such as ",
            wgsl_file(options_.wgsl_from_dir, compiled.functions[0]), "), not by ", whole);
      }
      for (codegen::CompiledFunction& f : compiled.functions) {
        const std::string file = wgsl_file(options_.wgsl_from_dir, f);
        if (!present(file)) continue;
        KILN_ASSIGN_OR_RETURN(f.wgsl, ReadInputFile(file, 16u << 20));
        KILN_RETURN_IF_ERROR(CheckText(f.wgsl, StrCat("--wgsl-from: ", file)));
        // The kernel may declare another workgroup size (the dispatch's
        // workgroup count stays the generated kernel's).
        KILN_RETURN_IF_ERROR(AdoptWorkgroupSize(f, file));
        const auto& wg = f.metadata.workgroup_size;
        t.kernels += StrCat(t.kernels.empty() ? "" : "; ", one_kernel ? "" : f.metadata.name,
                            one_kernel ? "" : ": ", "WGSL from ", file, ", workgroup ", wg[0], "x",
                            wg[1], "x", wg[2]);
        replaced_from[f.metadata.name] = file;
        ++wgsl_files_used_;
      }
    }
    if (!options_.wgsl_dir.empty()) {
      std::error_code error;
      std::filesystem::create_directories(options_.wgsl_dir, error);
      if (error) {
        return InvalidArgument("--wgsl: cannot create the directory '", options_.wgsl_dir,
                               "': ", error.message());
      }
      for (const codegen::CompiledFunction& f : compiled.functions) {
        KILN_RETURN_IF_ERROR(WriteFileAtomically(wgsl_file(options_.wgsl_dir, f), f.wgsl));
      }
    }
    if (options_.compile_only) {
      t.pass = true;
      return t;
    }
    auto load = runtime::LoadedModule::Load(device_, std::move(compiled));
    if (!load.ok() && !replaced_from.empty()) {
      // The module is the user's files, not a corrupt one kiln wrote: name
      // the file of the function the error names, else all of them.
      std::string files;
      for (const auto& [function, file] : replaced_from) {
        if (load.status().message().find(StrCat("function '", function, "'")) !=
            std::string::npos) {
          files = file;
          break;
        }
        files += StrCat(files.empty() ? "" : ", ", file);
      }
      return InvalidArgument("--wgsl-from: ", files, ": ", load.status().message());
    }
    KILN_ASSIGN_OR_RETURN(auto loaded, std::move(load));
    std::mt19937 rng(20261201);
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    Tensors host;
    std::map<std::string, hal::BufferRef> buffers;
    auto allocate = [&](const std::string& name, const ops::TensorType& type,
                        bool random) -> Status {
      std::vector<float> v(ops::NumElements(type.shape) * Lanes(type.dtype), std::nanf(""));
      if (random) {
        for (float& x : v) x = dist(rng);
        if (type.dtype == ir::kF16) {
          for (float& x : v) x = interp::RoundToHalf(x);
        }
        if (type.dtype == ir::kInt8x4) {
          for (float& x : v) x = std::floor(x * 128);  // -128 to 127
        }
      }
      std::vector<uint8_t> bytes = ToBytes(v, type.dtype);
      KILN_ASSIGN_OR_RETURN(hal::BufferRef b, device_->allocator().Allocate(bytes.size()));
      KILN_RETURN_IF_ERROR(hal::Upload(*device_, b, 0, bytes));
      buffers[name] = b;
      if (random) host[name] = std::move(v);
      return Status::Ok();
    };
    for (const auto& [name, type] : w.inputs) KILN_RETURN_IF_ERROR(allocate(name, type, true));
    for (const auto& [name, type] : w.buffers) KILN_RETURN_IF_ERROR(allocate(name, type, false));
    std::vector<const runtime::Kernel*> kernels;
    std::vector<std::vector<runtime::Arg>> args;
    for (size_t fi = 0; fi < w.functions.size(); ++fi) {
      const ir::Function& f = w.functions[fi];
      StatusOr<const runtime::Kernel*> found = loaded->Find(f.name());  // (prepares it)
      if (!found.ok() && replaced_from.count(f.name())) {
        // WGSL the device refuses is the user's file's: name it.
        return Status(found.status().code(), StrCat("--wgsl-from: ", replaced_from[f.name()], ": ",
                                                    found.status().message()));
      }
      KILN_ASSIGN_OR_RETURN(const runtime::Kernel* k, std::move(found));
      if (!k->availability().ok() && replaced_from.count(f.name())) {
        // A workgroup size or feature the device lacks, asked by the file.
        return Status(k->availability().code(), StrCat("--wgsl-from: ", replaced_from[f.name()],
                                                       ": ", k->availability().message()));
      }
      KILN_RETURN_IF_ERROR(k->availability());
      kernels.push_back(k);
      std::vector<runtime::Arg> a;
      for (const ir::Param& p : f.params()) {
        std::string buffer = p.name();
        if (fi < w.bindings.size() && w.bindings[fi].count(buffer)) {
          buffer = w.bindings[fi].at(buffer);
        }
        a.push_back(runtime::Arg::Buffer(buffers.at(buffer)));
      }
      args.push_back(std::move(a));
    }
    auto record_all = [&](hal::CommandBuffer& cb) -> Status {
      for (size_t k = 0; k < kernels.size(); ++k) {
        KILN_RETURN_IF_ERROR(kernels[k]->Record(cb, args[k]));
      }
      return Status::Ok();
    };
    // One checked run, from poisoned outputs.
    {
      KILN_ASSIGN_OR_RETURN(auto cb, hal::CommandBuffer::Create(
                                         device_, hal::CommandBufferMode::kOneShot, {"check"}));
      KILN_RETURN_IF_ERROR(record_all(*cb));
      KILN_RETURN_IF_ERROR(cb->End());
      // The first run of a workload: a kernel that never ends (a file of
      // --wgsl-from's) is the watch's to stop.
      if (options_.watch_check)
        options_.watch_check(StrCat(w.name, " ", w.shape, ": the checked run"));
      Status done = hal::SubmitAndWait(*device_, *cb);
      if (options_.watch_check) options_.watch_check("");
      KILN_RETURN_IF_ERROR(done);
      const ops::TensorType& out_type = w.buffers.at(w.output);
      std::vector<uint8_t> bytes(Bytes(out_type));
      KILN_RETURN_IF_ERROR(hal::Download(*device_, buffers.at(w.output), 0, bytes));
      std::vector<double> got = FromBytes(bytes, out_type.dtype);
      const int64_t n = static_cast<int64_t>(got.size());
      // Every element of small outputs; a spread sample of large ones.
      const int64_t samples = std::min<int64_t>(n, options_.small ? n : 4096);
      std::uniform_int_distribution<int64_t> pick(0, n - 1);
      t.pass = true;
      for (int64_t s = 0; s < samples; ++s) {
        const int64_t i = samples == n ? s : pick(rng);
        auto [want, scale] = w.reference(host, i);
        const double err = std::fabs(got[i] - want);
        const bool ok = std::isnan(want) ? std::isnan(got[i]) : err <= w.tolerance * scale;
        if (!std::isnan(want))
          t.max_error = std::max(t.max_error, std::isnan(err) ? INFINITY : err);
        if (!ok) t.pass = false;
        ++t.checked;
      }
    }
    KILN_ASSIGN_OR_RETURN(Timing timing, Time(record_all));
    t.ms = timing.ms;
    t.wall_ms = timing.wall_ms;
    t.back_to_back_ms = timing.back_to_back_ms;
    t.timed_runs = timing.timed_runs;
    return t;
  }

  bool timestamps() const { return device_->HasFeature(hal::Feature::kTimestampQuery); }
  // --wgsl-from files that replaced a kernel, and the first name looked for.
  int wgsl_files_used() const { return wgsl_files_used_; }
  const std::string& first_wgsl_file() const { return first_wgsl_file_; }

 private:
  // The median over repetitions of the time of everything `record` records:
  // with timestamps, the sum of its dispatches' GPU times in each repetition;
  // without, the wall time of a submit and wait. First the GPU runs the work
  // back to back, in batches of about kBatchMs, for at least the warm-up
  // time and until two batches in a row take the same time per run (within
  // 3%): a GPU left idle while the CPU prepared the workload runs at low
  // clocks, and its governor raises them only under sustained load (on the
  // H200, streaming kernels measured after a short warm-up ran at 45% of
  // their speed with the SM clock at 345-900 MHz). The repetitions are
  // raised to cover at least kMinTimedMs.
  static constexpr double kBatchMs = 50, kMinTimedMs = 100, kMaxWarmupFactor = 4;
  static constexpr uint64_t kMaxTimedDispatches = 2000;

  struct Timing {
    double ms = 0;       // the median described above
    double wall_ms = 0;  // the timed submission's wall time per repetition
    // The median over kBackToBackBatches batches (each about kBatchMs) of
    // the wall time per run of the work recorded back to back in one
    // command buffer without timestamps: the throughput of a stream of
    // runs, as a program that issues them sees it.
    double back_to_back_ms = 0;
    uint64_t timed_runs = 0;  // the runs of the median
  };
  static constexpr int kBackToBackBatches = 5;

  StatusOr<Timing> Time(const std::function<Status(hal::CommandBuffer&)>& record) {
    Timing timing;
    const bool profile = timestamps();
    auto submit = [&](uint32_t count) -> StatusOr<double> {
      KILN_ASSIGN_OR_RETURN(auto cb, hal::CommandBuffer::Create(
                                         device_, hal::CommandBufferMode::kOneShot, {"warmup"}));
      for (uint32_t i = 0; i < count; ++i) KILN_RETURN_IF_ERROR(record(*cb));
      KILN_RETURN_IF_ERROR(cb->End());
      const auto t0 = std::chrono::steady_clock::now();
      KILN_RETURN_IF_ERROR(hal::SubmitAndWait(*device_, *cb));
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
          .count();
    };
    const auto clamp = [](double n) { return static_cast<uint32_t>(std::clamp(n, 1.0, 20000.0)); };
    // One run for an estimate, then batches until the time per run settles.
    KILN_ASSIGN_OR_RETURN(double once, submit(1));
    once = std::max(once, 1e-3);
    const double warmup_ms = options_.small ? 20 : 1000;
    double spent = 0, previous = 0;
    while (true) {
      const uint32_t count = clamp(kBatchMs / once);
      KILN_ASSIGN_OR_RETURN(double batch, submit(count));
      spent += batch;
      const double per_run = std::max(batch / count, 1e-4);
      const bool settled = previous > 0 && std::fabs(per_run - previous) <= 0.03 * previous;
      once = per_run;
      previous = per_run;
      if ((spent >= warmup_ms && settled) || spent >= kMaxWarmupFactor * warmup_ms) break;
    }
    {
      std::vector<double> per_run;
      const uint32_t count = clamp(kBatchMs / once);
      for (int b = 0; b < kBackToBackBatches; ++b) {
        KILN_ASSIGN_OR_RETURN(double batch, submit(count));
        per_run.push_back(batch / count);
      }
      timing.back_to_back_ms = Median(per_run);
    }
    const uint32_t repetitions = std::max(options_.repetitions, clamp(kMinTimedMs / once));
    std::vector<double> ms;
    if (profile) {
      KILN_ASSIGN_OR_RETURN(auto cb,
                            hal::CommandBuffer::Create(device_, hal::CommandBufferMode::kOneShot,
                                                       hal::CommandBufferOptions{"bench", true}));
      size_t per_rep = 0;
      uint32_t recorded = 0;
      for (uint32_t r = 0; r < repetitions; ++r) {
        // One command buffer of at most kMaxTimedDispatches.
        if (per_rep > 0 && cb->stats().dispatches + per_rep > kMaxTimedDispatches) break;
        const uint64_t before = cb->stats().dispatches;
        KILN_RETURN_IF_ERROR(record(*cb));
        per_rep = cb->stats().dispatches - before;
        ++recorded;
      }
      KILN_RETURN_IF_ERROR(cb->End());
      const auto t0 = std::chrono::steady_clock::now();
      KILN_RETURN_IF_ERROR(hal::SubmitAndWait(*device_, *cb));
      timing.wall_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
          recorded;
      KILN_ASSIGN_OR_RETURN(auto timings, cb->ReadProfile());
      for (size_t r = 0; per_rep > 0 && r + per_rep <= timings.size(); r += per_rep) {
        double sum = 0;
        for (size_t k = 0; k < per_rep; ++k) sum += timings[r + k].gpu_ns / 1e6;
        ms.push_back(sum);
      }
    } else {
      KILN_ASSIGN_OR_RETURN(auto cb, hal::CommandBuffer::Create(
                                         device_, hal::CommandBufferMode::kReusable, {"bench"}));
      KILN_RETURN_IF_ERROR(record(*cb));
      KILN_RETURN_IF_ERROR(cb->End());
      for (uint32_t r = 0; r < repetitions; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        KILN_RETURN_IF_ERROR(hal::SubmitAndWait(*device_, *cb));
        ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count());
      }
    }
    if (ms.empty()) return Internal("no dispatch was timed");
    timing.ms = Median(ms);
    timing.timed_runs = ms.size();
    if (!profile) timing.wall_ms = timing.ms;
    return timing;
  }

  std::shared_ptr<hal::Device> device_;
  OpsBenchOptions options_;
  int wgsl_files_used_ = 0;
  std::string first_wgsl_file_;
};

std::string Dims(const ops::Shape& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "x" : "") + std::to_string(s[i]);
  return out;
}

// ---- the workloads

// ", copied ahead" where the GEMM copies its tiles one k-step ahead (with
// how the last k-step is treated: ", branch_free", ", no_branch",
// ", peeled"; or ", loads branch-free" for branch-free double buffers), and
// ", sums as fma" where its float sums of products are fma.
std::string CopiedAhead(const ops::MatmulSchedule& s, bool int8 = false) {
  const std::string fma = s.fused_multiply_add && !int8 ? ", sums as fma" : "";
  const bool last = s.last_copy != te::LastCopy::kSkipped;
  if (!s.CopiesAhead(int8)) {
    return (s.double_buffer && last ? ", loads branch-free" : "") + fma;
  }
  if (!s.copy_through_registers) return ", copied ahead" + fma;
  return ", copied ahead through registers" +
         (last ? ", " + std::string(te::LastCopyName(s.last_copy)) : "") + fma;
}

Workload MatmulWorkload(const std::string& name, const ops::Shape& a, const ops::Shape& b,
                        ir::DataType dtype, const ops::Target& target,
                        const std::optional<ops::MatmulSchedule>& schedule,
                        ir::DataType accumulate = ir::kF32) {
  Workload w;
  w.name = name;
  const int64_t m = a[a.size() - 2], k = a.back(), n = b.back();
  const int64_t batch = ops::NumElements(ops::Shape(a.begin(), a.end() - 2));
  w.shape = (batch > 1 ? Dims(ops::Shape(a.begin(), a.end() - 2)) + " x " : "") +
            StrCat(m, "x", k, " @ ", k, "x", n);
  if (dtype == ir::kF16 && !target.shader_f16) {
    w.skip = "the device has no shader-f16";
    return w;
  }
  ops::MatmulOptions options;
  options.accumulate = accumulate;
  auto f = ops::Matmul({a, dtype}, {b, dtype}, target, options, "", schedule);
  if (!f.ok()) {
    w.error = f.status();
    return w;
  }
  auto s = schedule ? *schedule
                    : ops::DefaultMatmulSchedule(
                          batch, m, n, target,
                          dtype == ir::kF16 ? ops::GemmKind::kF16 : ops::GemmKind::kF32);
  w.kernels = s.ok() ? s->ToString() + CopiedAhead(*s) +
                           (accumulate == ir::kF16 ? ", f16 accumulators" : "")
                     : "";
  w.functions = {*f};
  w.inputs = {{"A", {a, dtype}}, {"B", {b, dtype}}};
  ops::Shape out(a.begin(), a.end() - 2);
  out.push_back(m);
  out.push_back(n);
  w.buffers = {{"C", {out, dtype}}};
  w.output = "C";
  const double esize = dtype == ir::kF16 ? 2 : 4;
  w.bytes = esize * (batch * (m * k + k * n + m * n));
  w.flops = 2.0 * batch * m * n * k;
  // f16 sums round at every step: 8 units of f16's rounding (2^-11) of the
  // sum of magnitudes, where random data errs by about one.
  w.tolerance = accumulate == ir::kF16 ? 8.0 / 2048 : dtype == ir::kF16 ? 2e-3 : 1e-5;
  w.reference = [=](const Tensors& t, int64_t i) {
    const int64_t bi = i / (m * n), row = (i / n) % m, col = i % n;
    const float* A = t.at("A").data() + bi * m * k;
    const float* B = t.at("B").data() + (b.size() > 2 ? bi * k * n : 0);
    double sum = 0, mag = 0;
    for (int64_t p = 0; p < k; ++p) {
      sum += double(A[row * k + p]) * B[p * n + col];
      mag += std::fabs(double(A[row * k + p]) * B[p * n + col]);
    }
    // f16 outputs round to half: allow half an ulp of the result.
    return std::pair{sum, mag + 1 + (dtype == ir::kF16 ? std::fabs(sum) * 0.5 : 0)};
  };
  return w;
}

// C[M, N] (i32) = A[M, K] @ B^T for B^T[N, K], int8 packed along K.
Workload MatmulInt8Workload(int64_t m, int64_t n, int64_t k, const ops::Target& target,
                            const std::optional<ops::MatmulSchedule>& schedule) {
  Workload w;
  w.name = "matmul int8";
  w.shape = StrCat(m, "x", k, " @ ", k, "x", n);
  const ops::Shape a{m, k / 4}, b{n, k / 4};
  auto f = ops::MatmulInt8({a, ir::kInt8x4}, {b, ir::kInt8x4}, target, "", schedule);
  if (!f.ok()) {
    w.error = f.status();
    return w;
  }
  auto s = schedule ? *schedule : ops::DefaultMatmulSchedule(1, m, n, target, ops::GemmKind::kInt8);
  w.kernels = s.ok() ? StrCat(s->ToString(), CopiedAhead(*s, /*int8=*/true),
                              " (k in int8x4 words), dot4I8Packed")
                     : "";
  w.functions = {*f};
  w.inputs = {{"A", {a, ir::kInt8x4}}, {"B", {b, ir::kInt8x4}}};
  w.buffers = {{"C", {{m, n}, ir::kI32}}};
  w.output = "C";
  w.bytes = m * k + n * k + 4.0 * m * n;
  w.flops = 2.0 * m * n * k;
  w.integer_ops = true;
  w.tolerance = 0;  // exact
  w.reference = [=](const Tensors& t, int64_t i) {
    const float* A = t.at("A").data() + (i / n) * k;
    const float* B = t.at("B").data() + (i % n) * k;
    int64_t sum = 0;
    for (int64_t p = 0; p < k; ++p) sum += static_cast<int64_t>(A[p]) * static_cast<int64_t>(B[p]);
    return std::pair{static_cast<double>(sum), 1.0};
  };
  return w;
}

Workload ElementwiseAdd(int64_t n, const ops::Target& target) {
  Workload w{"elementwise add f32", std::to_string(n), ""};
  auto f = ops::Elementwise("add", {{{n}}, {{n}}}, target);
  if (!f.ok()) {
    w.error = f.status();
    return w;
  }
  w.functions = {*f};
  w.inputs = {{"A", {{n}}}, {"B", {{n}}}};
  w.buffers = {{"C", {{n}}}};
  w.output = "C";
  w.bytes = 12.0 * n;
  w.reference = [](const Tensors& t, int64_t i) {
    return std::pair{double(t.at("A")[i]) + t.at("B")[i], 1.0};
  };
  return w;
}

Workload FusedChain(int64_t n, const ops::Target& target) {
  Workload w{"fused chain of 5 f32", std::to_string(n),
             "one kernel: (x + b) * c, relu, * 0.5, tanh"};
  auto f = ops::ElementwiseChain(
      {{n}},
      {ops::ChainStep::With("add", {{n}}), ops::ChainStep::With("mul", {{n}}),
       ops::ChainStep::Unary("relu"), ops::ChainStep::WithConstant("mul", 0.5),
       ops::ChainStep::Unary("tanh")},
      target);
  if (!f.ok()) {
    w.error = f.status();
    return w;
  }
  w.functions = {*f};
  w.inputs = {{"X", {{n}}}, {"B1", {{n}}}, {"B2", {{n}}}};
  w.buffers = {{"Y", {{n}}}};
  w.output = "Y";
  w.bytes = 16.0 * n;
  w.reference = [](const Tensors& t, int64_t i) {
    double v = (double(t.at("X")[i]) + t.at("B1")[i]) * t.at("B2")[i];
    v = v > 0 ? v : 0;
    return std::pair{std::tanh(v * 0.5), 1.0};
  };
  return w;
}

Workload FusedSilu(int64_t n, const ops::Target& target) {
  Workload w{"fused expression f32", std::to_string(n),
             "one kernel: x * sigmoid(x) + b, x read once (ElementwiseFused)"};
  using N = ops::FusedNode;
  auto f = ops::ElementwiseFused(
      {{{n}}, {{n}}},
      {N::Input(0), N::Op("sigmoid", {0}), N::Op("mul", {0, 1}), N::Input(1), N::Op("add", {2, 3})},
      target);
  if (!f.ok()) {
    w.error = f.status();
    return w;
  }
  w.functions = {*f};
  w.inputs = {{"X0", {{n}}}, {"X1", {{n}}}};
  w.buffers = {{"Y", {{n}}}};
  w.output = "Y";
  w.bytes = 12.0 * n;
  w.reference = [](const Tensors& t, int64_t i) {
    const double x = t.at("X0")[i];
    return std::pair{x / (1 + std::exp(-x)) + t.at("X1")[i], 1.0 + std::fabs(x)};
  };
  return w;
}

Workload RowSum(int64_t rows, int64_t cols, const ops::Target& target) {
  Workload w{"sum over the last axis f32", StrCat(rows, "x", cols), ""};
  auto f = ops::Reduce("sum", {{rows, cols}}, false, target);
  if (!f.ok()) {
    w.error = f.status();
    return w;
  }
  w.functions = {*f};
  w.inputs = {{"X", {{rows, cols}}}};
  w.buffers = {{"Y", {{rows}}}};
  w.output = "Y";
  w.bytes = 4.0 * (rows * cols + rows);
  w.reference = [cols](const Tensors& t, int64_t i) {
    double s = 0;
    for (int64_t c = 0; c < cols; ++c) s += t.at("X")[i * cols + c];
    return std::pair{s, double(cols)};
  };
  return w;
}

Workload SoftmaxRows(int64_t rows, int64_t cols, const ops::Target& target) {
  Workload w{"softmax over the last axis f32", StrCat(rows, "x", cols), ""};
  auto f = ops::SoftmaxAxis({{rows, cols}}, 1, target);
  if (!f.ok()) {
    w.error = f.status();
    return w;
  }
  w.functions = {*f};
  w.inputs = {{"X", {{rows, cols}}}};
  w.buffers = {{"Y", {{rows, cols}}}};
  w.output = "Y";
  w.bytes = 8.0 * rows * cols;
  w.reference = [cols](const Tensors& t, int64_t i) {
    const float* x = t.at("X").data() + (i / cols) * cols;
    double mx = -INFINITY, s = 0;
    for (int64_t c = 0; c < cols; ++c) mx = std::max<double>(mx, x[c]);
    for (int64_t c = 0; c < cols; ++c) s += std::exp(double(x[c]) - mx);
    return std::pair{std::exp(double(x[i % cols]) - mx) / s, 1.0};
  };
  return w;
}

// Layer norm (with Beta) or RMS norm over the last axis, eps 1e-5.
Workload Norm(bool layer, int64_t rows, int64_t cols, const ops::Target& target) {
  Workload w{layer ? "layer norm f32" : "rms norm f32", StrCat(rows, "x", cols), ""};
  auto f = layer ? ops::LayerNorm({{rows, cols}}, 1e-5, target)
                 : ops::RmsNorm({{rows, cols}}, 1e-5, target);
  if (!f.ok()) {
    w.error = f.status();
    return w;
  }
  w.functions = {*f};
  w.inputs = {{"X", {{rows, cols}}}, {"Gamma", {{cols}}}};
  if (layer) w.inputs["Beta"] = {{cols}};
  w.buffers = {{"Y", {{rows, cols}}}};
  w.output = "Y";
  w.bytes = 8.0 * rows * cols + (layer ? 8.0 : 4.0) * cols;
  w.reference = [layer, cols](const Tensors& t, int64_t i) {
    const float* x = t.at("X").data() + (i / cols) * cols;
    double mean = 0, sq = 0;
    for (int64_t c = 0; c < cols; ++c) mean += x[c];
    mean /= cols;
    for (int64_t c = 0; c < cols; ++c) {
      const double d = layer ? x[c] - mean : x[c];
      sq += d * d;
    }
    const double inv = 1.0 / std::sqrt(sq / cols + 1e-5);
    const int64_t c = i % cols;
    double y = ((layer ? x[c] - mean : x[c]) * inv) * t.at("Gamma")[c];
    if (layer) y += t.at("Beta")[c];
    return std::pair{y, 1.0 + std::fabs(y)};
  };
  return w;
}

// conv2d NHWC, 3x3, stride 1, padding 1, HWIO weights.
Workload Conv3x3(int64_t n, int64_t hw, int64_t c, int64_t f, const ops::Target& target) {
  Workload w{"conv2d 3x3 NHWC f32", StrCat(n, "x", hw, "x", hw, "x", c, " -> ", f), ""};
  ops::Conv2dOptions o;
  o.pad_h = o.pad_w = 1;
  auto fn = ops::Conv2d({{n, hw, hw, c}}, {{3, 3, c, f}}, target, o);
  if (!fn.ok()) {
    w.error = fn.status();
    return w;
  }
  w.functions = {*fn};
  auto s = ops::DefaultMatmulSchedule(1, n * hw * hw, f, target, ops::GemmKind::kConv);
  w.kernels = s.ok() ? "implicit GEMM, " + s->ToString() + CopiedAhead(*s) : "";
  w.inputs = {{"X", {{n, hw, hw, c}}}, {"W", {{3, 3, c, f}}}};
  w.buffers = {{"Y", {{n, hw, hw, f}}}};
  w.output = "Y";
  w.bytes = 4.0 * (n * hw * hw * (c + f) + 9 * c * f);
  w.flops = 2.0 * n * hw * hw * f * 9 * c;
  w.reference = [=](const Tensors& t, int64_t i) {
    const int64_t fi = i % f, x = (i / f) % hw, y = (i / f / hw) % hw, b = i / f / hw / hw;
    double sum = 0, mag = 1;
    for (int64_t a = 0; a < 3; ++a) {
      for (int64_t bb = 0; bb < 3; ++bb) {
        const int64_t iy = y + a - 1, ix = x + bb - 1;
        if (iy < 0 || iy >= hw || ix < 0 || ix >= hw) continue;
        for (int64_t k = 0; k < c; ++k) {
          const double p = double(t.at("X")[((b * hw + iy) * hw + ix) * c + k]) *
                           t.at("W")[((a * 3 + bb) * c + k) * f + fi];
          sum += p;
          mag += std::fabs(p);
        }
      }
    }
    return std::pair{sum, mag};
  };
  w.tolerance = 1e-5;
  return w;
}

// One element of softmax(q . k_j * scale) v_j over `seq` keys: q a row of d,
// k's and v's rows of d `stride` elements apart, c the output column.
double AttentionElement(const float* q, const float* k, const float* v, int64_t stride, int64_t seq,
                        int64_t d, int64_t c, double scale) {
  std::vector<double> s(seq);
  double mx = -INFINITY, sum = 0, out = 0;
  for (int64_t j = 0; j < seq; ++j) {
    double dot = 0;
    for (int64_t e = 0; e < d; ++e) dot += double(q[e]) * k[j * stride + e];
    s[j] = dot * scale;
    mx = std::max(mx, s[j]);
  }
  for (int64_t j = 0; j < seq; ++j) sum += (s[j] = std::exp(s[j] - mx));
  for (int64_t j = 0; j < seq; ++j) out += s[j] * v[j * stride + c];
  return out / sum;
}

// "one kernel, " and the fused attention's tile: `tile`, else the rule's.
std::string AttentionKernelText(const std::optional<ops::AttentionTile>& tile, int64_t d,
                                const ops::Target& target) {
  auto chosen = tile ? StatusOr<ops::AttentionTile>(*tile) : ops::DefaultAttentionTile(d, target);
  return StrCat("one kernel, ", chosen.ok() ? chosen->ToString() : chosen.status().message());
}

// Attention over [batch, heads, seq, d] f32: fused, or as the composition
// matmul(Q, K^T) -> softmax -> matmul(P, V) through memory.
Workload AttentionWorkload(bool fused, int64_t batch, int64_t heads, int64_t seq, int64_t d,
                           const ops::Target& target,
                           const std::optional<ops::AttentionTile>& tile) {
  const ops::Shape qs = {batch, heads, seq, d};
  Workload w{fused ? "attention fused f32" : "attention unfused f32",
             StrCat(batch, "x", heads, " x ", seq, "x", d), ""};
  w.inputs = {{"Q", {qs}}, {"K", {qs}}, {"V", {qs}}};
  w.buffers = {{"O", {qs}}};
  w.output = "O";
  w.bytes = 4.0 * 4 * batch * heads * seq * d;
  w.flops = 4.0 * batch * heads * seq * seq * d;
  if (fused) {
    ops::AttentionOptions options;
    options.tile = tile;
    auto f = ops::Attention({qs}, {qs}, {qs}, target, options);
    if (!f.ok()) {
      w.error = f.status();
      return w;
    }
    w.functions = {*f};
    w.kernels = AttentionKernelText(tile, d, target);
  } else {
    const ops::Shape ss = {batch, heads, seq, seq};
    ops::MatmulOptions nt;
    nt.transpose_b = true;
    auto scores = ops::Matmul({qs}, {qs}, target, nt, "scores");
    auto softmax = ops::SoftmaxAxis({ss}, 3, target, "softmax");
    auto out = ops::Matmul({ss}, {qs}, target, {}, "out");
    for (const Status& st : {scores.status(), softmax.status(), out.status()}) {
      if (!st.ok()) {
        w.error = st;
        return w;
      }
    }
    // The composition leaves out the 1/sqrt(d) scale (one multiply per score,
    // which a caller folds into Q); each reference follows its kernels.
    w.functions = {*scores, *softmax, *out};
    w.bindings = {{{"A", "Q"}, {"B", "K"}, {"C", "S"}},
                  {{"X", "S"}, {"Y", "P"}},
                  {{"A", "P"}, {"B", "V"}, {"C", "O"}}};
    w.buffers["S"] = {ss};
    w.buffers["P"] = {ss};
    w.kernels = "3 kernels: matmul, softmax, matmul";
  }
  const double scale = fused ? 1.0 / std::sqrt(static_cast<double>(d)) : 1.0;
  w.reference = [=](const Tensors& t, int64_t i) {
    const int64_t c = i % d, row = i / d;  // row over batch * heads * seq
    const int64_t bh = row / seq;
    const float* q = t.at("Q").data() + row * d;
    const float* k = t.at("K").data() + bh * seq * d;
    const float* v = t.at("V").data() + bh * seq * d;
    return std::pair{AttentionElement(q, k, v, d, seq, d, c, scale), 1.0};
  };
  return w;
}

// The fused attention reading the heads of a packed q/k/v projection
// [batch, seq, 3 * heads * d] in place and writing [batch, seq, heads * d]
// (ops::PackedAttention).
Workload PackedAttentionWorkload(int64_t batch, int64_t heads, int64_t seq, int64_t d,
                                 const ops::Target& target,
                                 const std::optional<ops::AttentionTile>& tile) {
  const int64_t width = heads * d;
  const ops::Shape qkv = {batch, seq, 3 * width};
  Workload w{"attention packed f32", StrCat(batch, "x", heads, " x ", seq, "x", d), ""};
  w.inputs = {{"QKV", {qkv}}};
  w.buffers = {{"O", {{batch, seq, width}}}};
  w.output = "O";
  w.bytes = 4.0 * 4 * batch * heads * seq * d;
  w.flops = 4.0 * batch * heads * seq * seq * d;
  ops::AttentionOptions options;
  options.tile = tile;
  auto f = ops::PackedAttention({qkv}, heads, target, options);
  if (!f.ok()) {
    w.error = f.status();
    return w;
  }
  w.functions = {*f};
  w.kernels = AttentionKernelText(tile, d, target);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  w.reference = [=](const Tensors& t, int64_t i) {
    const int64_t c = i % d, h = i / d % heads, row = i / width;  // row over batch * seq
    const float* base = t.at("QKV").data() + (row - row % seq) * 3 * width;
    const float* q = t.at("QKV").data() + row * 3 * width + h * d;
    const float* k = base + width + h * d;
    const float* v = base + 2 * width + h * d;
    return std::pair{AttentionElement(q, k, v, 3 * width, seq, d, c, scale), 1.0};
  };
  return w;
}

}  // namespace

StatusOr<OpsBenchResult> RunOpsBench(const std::shared_ptr<hal::Device>& device,
                                     const OpsBenchOptions& options) {
  OpsBenchResult result;
  result.device = device->Describe();
  Runner runner(device, options);
  result.gpu_timestamps = runner.timestamps();
  ops::Target target{runtime::TargetLimitsOf(*device), device->HasFeature(hal::Feature::kShaderF16),
                     device->HasFeature(hal::Feature::kSubgroups) && !options.no_subgroups,
                     std::string(device->impl().name()), device->trusted()};
  result.subgroups = target.subgroups;
  const bool small = options.small;
  // A schedule or tile given is checked whichever workloads the filter
  // keeps (the attention workloads' D: 16 small, 64 full size).
  if (options.matmul_schedule) {
    KILN_RETURN_IF_ERROR(
        ops::CheckMatmulSchedule(*options.matmul_schedule, target, "--matmul-schedule"));
  }
  if (options.attention_tile) {
    KILN_RETURN_IF_ERROR(ops::CheckAttentionTile(*options.attention_tile, small ? 16 : 64, target)
                             .WithContext("--attention-tile"));
  }
  const int64_t stream = small ? 4097 * 7 : int64_t{1} << 26;
  const int64_t rows = small ? 33 : 8192, cols = small ? 1000 : 4096;
  std::vector<std::function<Workload()>> workloads = {
      [&] { return ElementwiseAdd(stream, target); },
      [&] { return FusedChain(stream, target); },
      [&] { return FusedSilu(stream, target); },
      [&] { return RowSum(rows, cols, target); },
      [&] { return SoftmaxRows(rows, cols, target); },
      [&] { return Norm(true, rows, cols, target); },
      [&] { return Norm(false, rows, cols, target); },
  };
  if (small) {
    workloads.push_back([&] {
      return MatmulWorkload("matmul f32", {33, 70}, {70, 129}, ir::kF32, target,
                            options.matmul_schedule);
    });
    workloads.push_back([&] {
      return MatmulWorkload("matmul f32", {128, 64}, {64, 256}, ir::kF32, target,
                            options.matmul_schedule);
    });
    workloads.push_back([&] {
      return MatmulWorkload("batched matmul f32", {3, 12, 65, 64}, {3, 12, 64, 65}, ir::kF32,
                            target, options.matmul_schedule);
    });
    workloads.push_back([&] {
      return MatmulWorkload("matmul f16", {64, 64}, {64, 128}, ir::kF16, target,
                            options.matmul_schedule);
    });
    workloads.push_back([&] {
      return MatmulWorkload("matmul f16 (f16 accumulation)", {33, 70}, {70, 129}, ir::kF16, target,
                            options.matmul_schedule, ir::kF16);
    });
    workloads.push_back(
        [&] { return MatmulInt8Workload(33, 129, 260, target, options.matmul_schedule); });
    workloads.push_back([&] { return Conv3x3(2, 9, 16, 64, target); });
    workloads.push_back(
        [&] { return AttentionWorkload(true, 2, 3, 70, 16, target, options.attention_tile); });
    workloads.push_back(
        [&] { return AttentionWorkload(false, 2, 3, 70, 16, target, options.attention_tile); });
    workloads.push_back(
        [&] { return PackedAttentionWorkload(2, 3, 70, 16, target, options.attention_tile); });
  } else {
    for (int64_t n : {4096, 8192}) {
      workloads.push_back([&, n] {
        return MatmulWorkload("matmul f32", {n, n}, {n, n}, ir::kF32, target,
                              options.matmul_schedule);
      });
    }
    workloads.push_back([&] {
      return MatmulWorkload("batched matmul f32", {32, 12, 128, 64}, {32, 12, 64, 128}, ir::kF32,
                            target, options.matmul_schedule);
    });
    workloads.push_back([&] {
      return MatmulWorkload("matmul f16", {4096, 4096}, {4096, 4096}, ir::kF16, target,
                            options.matmul_schedule);
    });
    workloads.push_back([&] {
      return MatmulWorkload("matmul f16 (f16 accumulation)", {4096, 4096}, {4096, 4096}, ir::kF16,
                            target, options.matmul_schedule, ir::kF16);
    });
    workloads.push_back(
        [&] { return MatmulInt8Workload(4096, 4096, 4096, target, options.matmul_schedule); });
    workloads.push_back([&] { return Conv3x3(32, 56, 256, 256, target); });
    workloads.push_back(
        [&] { return AttentionWorkload(true, 32, 12, 512, 64, target, options.attention_tile); });
    workloads.push_back(
        [&] { return AttentionWorkload(false, 32, 12, 512, 64, target, options.attention_tile); });
    workloads.push_back(
        [&] { return PackedAttentionWorkload(32, 12, 512, 64, target, options.attention_tile); });
  }
  std::map<int64_t, Runner::Rates> same_bytes;  // copies by element count
  std::vector<std::string> names;               // of every workload, for a filter matching none
  // Every workload is built first, so that a filter matching none is
  // reported before anything is measured.
  struct Built {
    Workload w;
    double build_ms;
  };
  std::vector<Built> kept;
  for (const auto& make : workloads) {
    const auto built = std::chrono::steady_clock::now();
    Workload w = make();
    const double build_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - built).count();
    if (names.empty() || names.back() != w.name) names.push_back(w.name);
    if (!options.filter.empty() && w.name.find(options.filter) == std::string::npos) continue;
    if (!w.error.ok()) return w.error.WithContext(StrCat(w.name, " ", w.shape));
    kept.push_back({std::move(w), build_ms});
  }
  if (kept.empty() && !options.filter.empty()) {
    std::string all;
    for (const std::string& n : names) {
      if (all.find("'" + n + "'") == std::string::npos)
        all += (all.empty() ? "'" : ", '") + n + "'";
    }
    return InvalidArgument("--filter '", options.filter,
                           "' matches no workload; the workloads: ", all);
  }
  if (!options.compile_only) {
    const int64_t elements = small ? 1 << 16 : stream;
    // The full-size ceiling binds 2^26 floats per buffer (the largest
    // workloads more); say so before a dispatch fails on it.
    const uint64_t bound = uint64_t(elements) * 4;
    if (bound > target.limits.max_storage_buffer_binding_size) {
      return InvalidArgument(
          "the full-size workloads bind ", bound, " bytes and more per buffer; this device (",
          device->impl().name(), ") binds at most ", target.limits.max_storage_buffer_binding_size,
          " (maxStorageBufferBindingSize); --small runs every operator at small shapes");
    }
    KILN_ASSIGN_OR_RETURN(auto copy, runner.StreamRate("copy", 1, elements));
    KILN_ASSIGN_OR_RETURN(auto add, runner.StreamRate("add", 2, elements));
    KILN_ASSIGN_OR_RETURN(auto mul_add, runner.StreamRate("mul_add", 3, elements));
    result.copy_gb_per_s = copy.gb_per_s;
    result.copy_back_to_back_gb_per_s = copy.back_to_back_gb_per_s;
    result.add_gb_per_s = add.gb_per_s;
    result.mul_add_gb_per_s = mul_add.gb_per_s;
    KILN_ASSIGN_OR_RETURN(auto one_workgroup, runner.StreamRate("copy", 1, 1024));
    result.one_workgroup_ms = one_workgroup.ms;
    result.one_workgroup_back_to_back_ms = one_workgroup.back_to_back_ms;
  }

  for (Built& b : kept) {
    const Workload& w = b.w;
    auto t = runner.Run(w);
    if (t.ok()) t->compile_ms += b.build_ms;
    if (!t.ok()) return t.status().WithContext(StrCat(w.name, " ", w.shape));
    if (!options.compile_only && t->skip.empty() && t->flops == 0 && t->bytes >= 64) {
      // The copy of the same bytes: elements / 2 read and written, in vec4s.
      const int64_t elements = static_cast<int64_t>(t->bytes / 8) / 4 * 4;
      auto& copy = same_bytes[elements];
      if (copy.gb_per_s == 0) {
        KILN_ASSIGN_OR_RETURN(copy, runner.StreamRate("copy", 1, elements));
      }
      t->same_bytes_copy_gb_per_s = copy.gb_per_s;
      t->same_bytes_copy_back_to_back_gb_per_s = copy.back_to_back_gb_per_s;
    }
    result.ops.push_back(*t);
  }
  if (!options.wgsl_from_dir.empty() && runner.wgsl_files_used() == 0) {
    // A misnamed file would otherwise pass unnoticed, the generated kernels run.
    return InvalidArgument("--wgsl-from: '", options.wgsl_from_dir,
                           "' holds no file named for a workload that ran (names as --wgsl "
                           "writes them, such as '",
                           runner.first_wgsl_file(), "')");
  }
  return result;
}

}  // namespace kiln::bench
