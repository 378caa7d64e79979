#include "dispatch_bench.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "kiln/hal/buffer.h"
#include "kiln/hal/command_buffer.h"
#include "kiln/hal/executable.h"
#include "kiln/hal/queue.h"
#include "kiln/hal/staging_buffer.h"
#include "kiln/check/check.h"
#include "kiln/codegen/wgsl_codegen.h"
#include "kiln/ir/parser.h"
#include "kiln/runtime/module.h"

namespace kiln::bench {
namespace {

using hal::BindingKind;

// A tiny kernel: one workgroup touching a few words, so the figures are the
// CPU cost of recording and issuing, not of the GPU work.
constexpr const char* kKernel = R"(
struct Constants { scale: f32, n: u32, a: u32, b: u32 }
@group(0) @binding(0) var<storage, read_write> data: array<f32>;
@group(0) @binding(1) var<uniform> c: Constants;
@compute @workgroup_size(64)
fn scale(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (gid.x < c.n) { data[gid.x] = data[gid.x] * c.scale; }
}
)";

// The same work as a kiln kernel, for the runtime's figure.
constexpr const char* kIrKernel = R"(module {
fn scale(data: buffer<f32>[n], n: i32, s: f32) {
  for bx in blockIdx.x(0, 1) {
    for tx in threadIdx.x(0, 64) {
      if (tx < n) {
        data[tx] = data[tx] * s
      }
    }
  }
}
})";

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

StatusOr<DispatchBenchResult> RunDispatchBench(const std::shared_ptr<hal::Device>& device,
                                               const DispatchBenchOptions& options) {
  using Clock = std::chrono::steady_clock;
  hal::Device& d = *device;
  const hal::Procs& p = d.procs();
  DispatchBenchResult result;
  result.device = d.Describe();
  result.dispatches = options.dispatches;

  KILN_ASSIGN_OR_RETURN(
      hal::ExecutableRef exe,
      hal::LoadExecutable(d, {"bench", kKernel,
                              {{"scale", {BindingKind::kStorage, BindingKind::kUniform}, 16}}}));
  KILN_ASSIGN_OR_RETURN(hal::BufferRef data, d.allocator().Allocate(256));
  struct {
    float scale;
    uint32_t n, a, b;
  } constants{1.0f, 64, 0, 0};
  const std::span<const uint8_t> constant_bytes(reinterpret_cast<const uint8_t*>(&constants),
                                                sizeof(constants));
  hal::BufferBinding binding{data};
  const hal::EntryPoint& ep = exe->entry_point(0);

  // Raw webgpu.h: the same pipeline, one bind group made once, and the
  // constants written once; every dispatch sets pipeline and bind group, as
  // a runtime without state tracking records them.
  WGPUBufferDescriptor ud = {};
  ud.usage = WGPUBufferUsage_Uniform | WGPUBufferUsage_CopyDst;
  ud.size = 256;
  WGPUBuffer uniform = p.DeviceCreateBuffer(d.handle(), &ud);
  p.QueueWriteBuffer(d.queue(), uniform, 0, &constants, sizeof(constants));
  WGPUBindGroupEntry entries[2] = {};
  entries[0].binding = 0;
  entries[0].buffer = data->handle();
  entries[0].size = 256;
  entries[1].binding = 1;
  entries[1].buffer = uniform;
  entries[1].size = 16;
  WGPUBindGroupDescriptor bd = {};
  bd.layout = ep.bind_group_layout;
  bd.entryCount = 2;
  bd.entries = entries;
  WGPUBindGroup raw_group = p.DeviceCreateBindGroup(d.handle(), &bd);

  auto raw_record = [&](uint32_t n) {
    WGPUCommandEncoder enc = p.DeviceCreateCommandEncoder(d.handle(), nullptr);
    WGPUComputePassEncoder pass = p.CommandEncoderBeginComputePass(enc, nullptr);
    const uint32_t offset = 0;
    for (uint32_t i = 0; i < n; ++i) {
      p.ComputePassEncoderSetPipeline(pass, ep.pipeline);
      p.ComputePassEncoderSetBindGroup(pass, 0, raw_group, 1, &offset);
      p.ComputePassEncoderDispatchWorkgroups(pass, 1, 1, 1);
    }
    p.ComputePassEncoderEnd(pass);
    p.ComputePassEncoderRelease(pass);
    WGPUCommandBuffer cmd = p.CommandEncoderFinish(enc, nullptr);
    p.QueueSubmit(d.queue(), 1, &cmd);
    p.CommandBufferRelease(cmd);
    p.CommandEncoderRelease(enc);
  };

  const uint32_t n = options.dispatches;
  KILN_ASSIGN_OR_RETURN(auto reusable,
                        hal::CommandBuffer::Create(device, hal::CommandBufferMode::kReusable));
  for (uint32_t i = 0; i < n; ++i) {
    KILN_RETURN_IF_ERROR(reusable->Dispatch(exe, 0, {&binding, 1}, constant_bytes, 1));
  }
  KILN_RETURN_IF_ERROR(reusable->End());
  KILN_ASSIGN_OR_RETURN(auto single,
                        hal::CommandBuffer::Create(device, hal::CommandBufferMode::kReusable));
  KILN_RETURN_IF_ERROR(single->Dispatch(exe, 0, {&binding, 1}, constant_bytes, 1));
  KILN_RETURN_IF_ERROR(single->End());

  KILN_ASSIGN_OR_RETURN(ir::Module ir_module, ir::ParseModule(kIrKernel));
  KILN_ASSIGN_OR_RETURN(codegen::CompiledModule compiled,
                        codegen::CompileModule(ir_module, check::CompileOptionsFor(d)));
  KILN_ASSIGN_OR_RETURN(auto module, runtime::LoadedModule::Load(device, std::move(compiled)));
  KILN_ASSIGN_OR_RETURN(const runtime::Kernel* fn, module->Find("scale"));
  const runtime::Arg args[] = {runtime::Arg::Buffer(data), runtime::Arg::I32(64),
                               runtime::Arg::F32(1.0f)};

  // Each repetition measures every variant once, interleaved, each from an
  // idle queue; the medians are reported.
  std::vector<double> raw, hal_time, replay, raw_submit, hal_submit, runtime_time;
  const uint32_t s = options.submits;
  for (uint32_t r = 0; r < options.repetitions; ++r) {
    KILN_RETURN_IF_ERROR(hal::WaitIdle(d));
    auto t0 = Clock::now();
    raw_record(n);
    raw.push_back(Seconds(Clock::now() - t0) * 1e6 / n);

    KILN_RETURN_IF_ERROR(hal::WaitIdle(d));
    t0 = Clock::now();
    KILN_ASSIGN_OR_RETURN(auto cb,
                          hal::CommandBuffer::Create(device, hal::CommandBufferMode::kOneShot));
    for (uint32_t i = 0; i < n; ++i) {
      KILN_RETURN_IF_ERROR(cb->Dispatch(exe, 0, {&binding, 1}, constant_bytes, 1));
    }
    KILN_RETURN_IF_ERROR(cb->End());
    KILN_RETURN_IF_ERROR(hal::Submit(d, *cb));
    hal_time.push_back(Seconds(Clock::now() - t0) * 1e6 / n);

    KILN_RETURN_IF_ERROR(hal::WaitIdle(d));
    t0 = Clock::now();
    KILN_ASSIGN_OR_RETURN(auto rcb,
                          hal::CommandBuffer::Create(device, hal::CommandBufferMode::kOneShot));
    for (uint32_t i = 0; i < n; ++i) KILN_RETURN_IF_ERROR(fn->Record(*rcb, args));
    KILN_RETURN_IF_ERROR(rcb->End());
    KILN_RETURN_IF_ERROR(hal::Submit(d, *rcb));
    runtime_time.push_back(Seconds(Clock::now() - t0) * 1e6 / n);

    KILN_RETURN_IF_ERROR(hal::WaitIdle(d));
    t0 = Clock::now();
    KILN_RETURN_IF_ERROR(hal::Submit(d, *reusable));
    replay.push_back(Seconds(Clock::now() - t0) * 1e6 / n);

    // Per submit: many one-dispatch submissions, then one wait for all.
    KILN_RETURN_IF_ERROR(hal::WaitIdle(d));
    t0 = Clock::now();
    for (uint32_t i = 0; i < s; ++i) raw_record(1);
    KILN_RETURN_IF_ERROR(hal::WaitIdle(d));
    raw_submit.push_back(Seconds(Clock::now() - t0) * 1e6 / s);

    t0 = Clock::now();
    for (uint32_t i = 0; i < s; ++i) KILN_RETURN_IF_ERROR(hal::Submit(d, *single));
    KILN_RETURN_IF_ERROR(hal::WaitIdle(d));
    hal_submit.push_back(Seconds(Clock::now() - t0) * 1e6 / s);
  }
  result.raw_us_per_dispatch = Median(raw);
  result.hal_us_per_dispatch = Median(hal_time);
  result.replay_us_per_dispatch = Median(replay);
  result.raw_submit_us = Median(raw_submit);
  result.hal_submit_us = Median(hal_submit);
  result.runtime_us_per_dispatch = Median(runtime_time);

  p.BindGroupRelease(raw_group);
  p.BufferDestroy(uniform);
  p.BufferRelease(uniform);
  KILN_RETURN_IF_ERROR(d.CheckHealthy());
  return result;
}

}  // namespace kiln::bench
