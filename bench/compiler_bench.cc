#include "compiler_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>

#include "kiln/check/check.h"
#include "kiln/codegen/module_format.h"
#include "kiln/codegen/wgsl_codegen.h"
#include "kiln/hal/buffer.h"
#include "kiln/hal/command_buffer.h"
#include "kiln/hal/executable.h"
#include "kiln/hal/queue.h"
#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/verifier.h"
#include "kiln/runtime/module.h"
#include "kiln/support/file.h"
#include "wgsl_kernels.h"

namespace kiln::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Times `iterations` dispatches recorded by `record` into one command
// buffer: the median GPU time per dispatch where timestamps exist, else the
// wall time of the whole submission divided by the count.
StatusOr<double> TimeDispatches(const std::shared_ptr<hal::Device>& device, uint32_t iterations,
                                const std::function<Status(hal::CommandBuffer&)>& record) {
  const bool profile = device->HasFeature(hal::Feature::kTimestampQuery);
  KILN_ASSIGN_OR_RETURN(
      auto cb,
      hal::CommandBuffer::Create(device, hal::CommandBufferMode::kReusable, {"bench", profile}));
  for (uint32_t i = 0; i < iterations; ++i) KILN_RETURN_IF_ERROR(record(*cb));
  KILN_RETURN_IF_ERROR(cb->End());
  KILN_RETURN_IF_ERROR(hal::SubmitAndWait(*device, *cb));  // warm-up
  auto t0 = Clock::now();
  KILN_RETURN_IF_ERROR(hal::SubmitAndWait(*device, *cb));
  const double wall = Ms(Clock::now() - t0) / iterations;
  if (!profile) return wall;
  KILN_ASSIGN_OR_RETURN(auto timings, cb->ReadProfile());
  std::vector<double> ms;
  for (const auto& t : timings) ms.push_back(t.gpu_ns / 1e6);
  return Median(ms);
}

}  // namespace

StatusOr<MatmulBenchResult> RunMatmulBench(const std::shared_ptr<hal::Device>& device,
                                           const MatmulBenchOptions& options) {
  const uint32_t n = options.size;
  if (n == 0 || n % 16) {
    return InvalidArgument("matmul size ", n, " is not a positive multiple of 16");
  }
  // Each matrix against the device's limits, before anything is allocated
  // (n < 2^32, so n * n * 4 < 2^66: compared in long double).
  const long double matrix_bytes = static_cast<long double>(n) * n * 4;
  const hal::Limits& limits = device->limits();
  for (const auto& [limit, name] :
       {std::pair{limits.max_buffer_size, "maxBufferSize"},
        std::pair{limits.max_storage_buffer_binding_size, "maxStorageBufferBindingSize"}}) {
    if (matrix_bytes > static_cast<long double>(limit)) {
      return InvalidArgument("matmul size ", n, ": each ", n, "x", n, " f32 matrix takes ",
                             static_cast<double>(matrix_bytes), " bytes, more than the device's ",
                             name, " of ", limit);
    }
  }
  MatmulBenchResult result;
  result.device = device->Describe();
  result.gpu_timestamps = device->HasFeature(hal::Feature::kTimestampQuery);
  result.size = n;

  // kiln's kernel, compiled from its IR here.
  KILN_ASSIGN_OR_RETURN(std::string text, ReadInputFile(options.kir_path));
  auto module = ir::ParseModule(text);
  if (!module.ok()) return module.status().WithContext(options.kir_path);
  KILN_RETURN_IF_ERROR(ir::Verify(*module).WithContext(options.kir_path));
  KILN_ASSIGN_OR_RETURN(codegen::CompiledModule compiled,
                        codegen::CompileModule(*module, check::CompileOptionsFor(*device)));
  KILN_ASSIGN_OR_RETURN(auto loaded, runtime::LoadedModule::Load(device, std::move(compiled)));
  auto found = loaded->Find(options.function);
  if (!found.ok()) return found.status().WithContext(options.kir_path);
  const runtime::Kernel* fn = *found;

  // The same algorithm written by hand.
  KILN_ASSIGN_OR_RETURN(
      hal::ExecutableRef hand,
      hal::LoadExecutable(
          *device, {"matmul (hand-written WGSL)",
                    kMatmulTiled16Wgsl,
                    {{"matmul",
                      {hal::BindingKind::kReadOnlyStorage, hal::BindingKind::kReadOnlyStorage,
                       hal::BindingKind::kStorage, hal::BindingKind::kUniform},
                      16}}}));

  const uint64_t elements = uint64_t(n) * n;
  std::vector<float> a(elements), b(elements);
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (auto& v : a) v = dist(rng);
  for (auto& v : b) v = dist(rng);
  auto upload = [&](const std::vector<float>& v) -> StatusOr<hal::BufferRef> {
    KILN_ASSIGN_OR_RETURN(hal::BufferRef buf, device->allocator().Allocate(v.size() * 4));
    KILN_RETURN_IF_ERROR(
        hal::Upload(*device, buf, 0, {reinterpret_cast<const uint8_t*>(v.data()), v.size() * 4}));
    return buf;
  };
  KILN_ASSIGN_OR_RETURN(hal::BufferRef A, upload(a));
  KILN_ASSIGN_OR_RETURN(hal::BufferRef B, upload(b));
  std::vector<float> poison(elements, std::nanf(""));
  KILN_ASSIGN_OR_RETURN(hal::BufferRef C_gen, upload(poison));
  KILN_ASSIGN_OR_RETURN(hal::BufferRef C_hand, upload(poison));

  const int32_t s = static_cast<int32_t>(n);
  const runtime::Arg args[] = {runtime::Arg::Buffer(A),     runtime::Arg::Buffer(B),
                               runtime::Arg::Buffer(C_gen), runtime::Arg::I32(s),
                               runtime::Arg::I32(s),        runtime::Arg::I32(s)};
  KILN_ASSIGN_OR_RETURN(result.generated.ms,
                        TimeDispatches(device, options.iterations, [&](hal::CommandBuffer& cb) {
                          return fn->Record(cb, args);
                        }));
  uint32_t dims[4] = {n, n, n, 0};
  hal::BufferBinding bindings[] = {{A}, {B}, {C_hand}};
  KILN_ASSIGN_OR_RETURN(result.handwritten.ms,
                        TimeDispatches(device, options.iterations, [&](hal::CommandBuffer& cb) {
                          return cb.Dispatch(hand, 0, bindings,
                                             {reinterpret_cast<const uint8_t*>(dims), 16}, n / 16,
                                             n / 16);
                        }));
  const double flop = 2.0 * n * double(n) * n;
  result.generated.kernel = "kiln IR (" + options.kir_path + ")";
  result.handwritten.kernel = "hand-written WGSL";
  for (MatmulTiming* t : {&result.generated, &result.handwritten}) {
    t->tflops = flop / (t->ms * 1e-3) / 1e12;
  }

  // Check: both results agree, and sampled elements match a CPU reference.
  std::vector<float> gen(elements), handv(elements);
  KILN_RETURN_IF_ERROR(
      hal::Download(*device, C_gen, 0, {reinterpret_cast<uint8_t*>(gen.data()), elements * 4}));
  KILN_RETURN_IF_ERROR(
      hal::Download(*device, C_hand, 0, {reinterpret_cast<uint8_t*>(handv.data()), elements * 4}));
  for (uint64_t i = 0; i < elements; ++i) {
    double d = std::fabs(double(gen[i]) - handv[i]);
    if (std::isnan(d)) d = INFINITY;
    result.max_difference = std::max(result.max_difference, d);
  }
  std::uniform_int_distribution<uint32_t> index(0, n - 1);
  for (int k = 0; k < 64; ++k) {
    const uint32_t i = index(rng), j = index(rng);
    double ref = 0;
    for (uint32_t t = 0; t < n; ++t) ref += double(a[uint64_t(i) * n + t]) * b[uint64_t(t) * n + j];
    double e = std::fabs(gen[uint64_t(i) * n + j] - ref);
    if (std::isnan(e)) e = INFINITY;
    result.max_error = std::max(result.max_error, e);
  }
  return result;
}

StatusOr<std::vector<CompileTiming>> RunCompileBench(const std::vector<std::string>& files,
                                                     int repetitions) {
  std::vector<CompileTiming> out;
  for (const std::string& path : files) {
    KILN_ASSIGN_OR_RETURN(std::string text, ReadInputFile(path));
    CompileTiming t;
    t.file = path;
    std::vector<double> parse, compile;
    for (int r = 0; r < repetitions; ++r) {
      auto t0 = Clock::now();
      auto module = ir::ParseModule(text);
      if (!module.ok()) return module.status().WithContext(path);
      KILN_RETURN_IF_ERROR(ir::Verify(*module).WithContext(path));
      auto t1 = Clock::now();
      auto compiled = codegen::CompileModule(*module);
      if (!compiled.ok()) return compiled.status().WithContext(path);
      auto t2 = Clock::now();
      parse.push_back(Ms(t1 - t0));
      compile.push_back(Ms(t2 - t1));
      t.functions = static_cast<int>(compiled->functions.size());
    }
    t.parse_ms = Median(parse);
    t.compile_ms = Median(compile);
    out.push_back(t);
  }
  return out;
}

StatusOr<std::string> MakeLargeModule(const std::vector<std::string>& files, double megabytes) {
  // Each function printed once, its name cut out: "fn " name "(...".
  struct Template {
    std::string name, rest;
  };
  std::vector<Template> templates;
  for (const std::string& path : files) {
    KILN_ASSIGN_OR_RETURN(std::string text, ReadInputFile(path));
    auto module = ir::ParseModule(text);
    if (!module.ok()) return module.status().WithContext(path);
    for (const ir::Function& f : module->functions) {
      std::string printed = ir::Print(f);
      const std::string head = "fn " + f.name() + "(";
      if (printed.rfind(head, 0) != 0) {
        return Internal("printed function '", f.name(), "' does not start with '", head, "'");
      }
      templates.push_back({f.name(), printed.substr(head.size() - 1)});
    }
  }
  if (templates.empty()) return InvalidArgument("no functions to repeat");
  const size_t target = static_cast<size_t>(megabytes * 1e6);
  std::string out = "module {\n";
  for (size_t k = 0; out.size() < target; ++k) {
    const Template& t = templates[k % templates.size()];
    out += StrCat("fn ", t.name, "_", k, t.rest, "\n");
  }
  out += "}\n";
  return out;
}

StatusOr<CompileScaleTiming> RunCompileScaleBench(const std::string& text) {
  // CPU time of this process: the work is single-threaded, and on a shared
  // machine wall time measures the neighbours too.
  auto cpu_ms = [] {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
  };
  CompileScaleTiming t;
  t.megabytes = static_cast<double>(text.size()) / 1e6;
  const double t0 = cpu_ms();
  auto module = ir::ParseModule(text);
  if (!module.ok()) return module.status();
  const double t1 = cpu_ms();
  KILN_RETURN_IF_ERROR(ir::Verify(*module));
  const double t2 = cpu_ms();
  auto compiled = codegen::CompileModule(*module);
  if (!compiled.ok()) return compiled.status();
  const double t3 = cpu_ms();
  const std::string bytes = codegen::SerializeModule(*compiled);
  const double t4 = cpu_ms();
  t.functions = static_cast<int>(compiled->functions.size());
  t.parse_ms = t1 - t0;
  t.verify_ms = t2 - t1;
  t.compile_ms = t3 - t2;
  t.serialize_ms = t4 - t3;
  if (bytes.empty()) return Internal("no module bytes");
  return t;
}

}  // namespace kiln::bench
