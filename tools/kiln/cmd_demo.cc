// kiln demo: shows the device, then runs real kernels through the HAL,
// checks every result against a CPU reference and prints timings.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>

#include "commands.h"
#include "flags.h"
#include "kiln/hal/buffer.h"
#include "kiln/hal/command_buffer.h"
#include "kiln/hal/executable.h"
#include "kiln/hal/queue.h"
#include "wgsl_kernels.h"

namespace kiln::tool {
namespace {

// The largest --matmul-size: its CPU check is size^3 multiply-adds.
constexpr uint64_t kMaxMatmulSize = 4096;

using hal::BindingKind;
using hal::BufferRef;

struct Outcome {
  std::string what;
  double max_error = 0;
  double tolerance = 0;
  double wall_ms = 0;
  double gpu_ms = -1;  // -1: no timestamps on this device
};

template <typename T>
std::vector<uint8_t> ToBytes(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}
template <typename T>
std::vector<T> FromBytes(const std::vector<uint8_t>& b) {
  std::vector<T> out(b.size() / sizeof(T));
  std::memcpy(out.data(), b.data(), out.size() * sizeof(T));
  return out;
}

class Demo {
 public:
  explicit Demo(std::shared_ptr<hal::Device> device) : device_(std::move(device)) {}

  StatusOr<BufferRef> Buffer(const std::vector<uint8_t>& contents) {
    KILN_ASSIGN_OR_RETURN(BufferRef b, device_->allocator().Allocate(contents.size()));
    KILN_RETURN_IF_ERROR(hal::Upload(*device_, b, 0, contents));
    return b;
  }
  StatusOr<std::vector<uint8_t>> Read(const BufferRef& b) {
    std::vector<uint8_t> out(b->size());
    KILN_RETURN_IF_ERROR(hal::Download(*device_, b, 0, out));
    return out;
  }
  std::vector<float> Random(size_t n) {
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng_);
    return v;
  }
  std::vector<uint8_t> Poison(size_t bytes) {
    std::vector<uint8_t> v(bytes);
    for (auto& b : v) b = static_cast<uint8_t>(rng_());
    return v;
  }

  // Records with `record` into a profiled (where possible) command buffer,
  // runs it three times and keeps the best wall and GPU times.
  Status Time(Outcome& o, const std::function<Status(hal::CommandBuffer&)>& record) {
    hal::CommandBufferOptions options;
    options.label = o.what;
    options.profile = device_->HasFeature(hal::Feature::kTimestampQuery);
    KILN_ASSIGN_OR_RETURN(
        auto cb, hal::CommandBuffer::Create(device_, hal::CommandBufferMode::kReusable, options));
    KILN_RETURN_IF_ERROR(record(*cb));
    KILN_RETURN_IF_ERROR(cb->End());
    o.wall_ms = 1e30;
    for (int i = 0; i < 3; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      KILN_RETURN_IF_ERROR(hal::SubmitAndWait(*device_, *cb));
      o.wall_ms = std::min(
          o.wall_ms,
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      if (options.profile) {
        KILN_ASSIGN_OR_RETURN(auto timings, cb->ReadProfile());
        double ns = 0;
        for (auto& t : timings) ns += t.gpu_ns;
        o.gpu_ms = o.gpu_ms < 0 ? ns / 1e6 : std::min(o.gpu_ms, ns / 1e6);
      }
    }
    return Status();
  }

  StatusOr<Outcome> Axpb() {
    const uint32_t n = 1 << 20;
    Outcome o{"axpb: y = 3x - 0.5, 1M f32"};
    o.tolerance = 1e-6;
    auto xs = Random(n);
    KILN_ASSIGN_OR_RETURN(BufferRef x, Buffer(ToBytes(xs)));
    KILN_ASSIGN_OR_RETURN(BufferRef y, Buffer(Poison(n * 4)));
    static const char* kWgsl = R"(
struct C { scale: f32, bias: f32, n: u32, groups_x: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> c: C;
@compute @workgroup_size(256)
fn axpb(@builtin(workgroup_id) g: vec3<u32>, @builtin(local_invocation_id) l: vec3<u32>) {
  let i = (g.x + g.y * c.groups_x) * 256u + l.x;
  if (i < c.n) { y[i] = x[i] * c.scale + c.bias; }
})";
    KILN_ASSIGN_OR_RETURN(
        auto exe, hal::LoadExecutable(*device_, {"axpb",
                                                 kWgsl,
                                                 {{"axpb",
                                                   {BindingKind::kReadOnlyStorage,
                                                    BindingKind::kStorage, BindingKind::kUniform},
                                                   16}}}));
    const uint32_t groups = n / 256, gx = std::min<uint32_t>(groups, 65535);
    struct {
      float scale, bias;
      uint32_t n, groups_x;
    } c{3.0f, -0.5f, n, gx};
    hal::BufferBinding bindings[] = {{x}, {y}};
    KILN_RETURN_IF_ERROR(Time(o, [&](hal::CommandBuffer& cb) {
      return cb.Dispatch(exe, 0, bindings, {reinterpret_cast<uint8_t*>(&c), sizeof(c)}, gx,
                         (groups + gx - 1) / gx);
    }));
    KILN_ASSIGN_OR_RETURN(auto got_bytes, Read(y));
    auto got = FromBytes<float>(got_bytes);
    for (uint32_t i = 0; i < n; ++i) {
      o.max_error = std::max<double>(o.max_error, std::fabs(got[i] - (xs[i] * 3.0f - 0.5f)));
    }
    return o;
  }

  StatusOr<Outcome> Matmul(uint32_t size) {
    Outcome o{StrCat("matmul: 16x16 tiled f32, ", size, "^3")};
    o.tolerance = 1e-4 * size;
    const size_t elements = size_t{size} * size;
    auto as = Random(elements), bs = Random(elements);
    KILN_ASSIGN_OR_RETURN(BufferRef a, Buffer(ToBytes(as)));
    KILN_ASSIGN_OR_RETURN(BufferRef b, Buffer(ToBytes(bs)));
    KILN_ASSIGN_OR_RETURN(BufferRef c, Buffer(Poison(elements * 4)));
    KILN_ASSIGN_OR_RETURN(
        auto exe, hal::LoadExecutable(
                      *device_, {"matmul",
                                 bench::kMatmulTiled16Wgsl,
                                 {{"matmul",
                                   {BindingKind::kReadOnlyStorage, BindingKind::kReadOnlyStorage,
                                    BindingKind::kStorage, BindingKind::kUniform},
                                   16}}}));
    uint32_t dims[4] = {size, size, size, 0};
    hal::BufferBinding bindings[] = {{a}, {b}, {c}};
    KILN_RETURN_IF_ERROR(Time(o, [&](hal::CommandBuffer& cb) {
      return cb.Dispatch(exe, 0, bindings, {reinterpret_cast<uint8_t*>(dims), sizeof(dims)},
                         size / 16, size / 16);
    }));
    KILN_ASSIGN_OR_RETURN(auto got_bytes, Read(c));
    auto got = FromBytes<float>(got_bytes);
    for (uint32_t i = 0; i < size; ++i) {
      for (uint32_t j = 0; j < size; ++j) {
        double ref = 0;
        for (size_t k = 0; k < size; ++k) {
          ref += double(as[size_t{i} * size + k]) * bs[k * size + j];
        }
        o.max_error = std::max(o.max_error, std::fabs(got[size_t{i} * size + j] - ref));
      }
    }
    return o;
  }

  StatusOr<Outcome> ReduceSum() {
    const uint32_t n = 1 << 20, groups = n / 256;
    Outcome o{"reduce: sum of 1M f32 in 256-wide workgroups"};
    o.tolerance = 1e-3;
    auto xs = Random(n);
    KILN_ASSIGN_OR_RETURN(BufferRef x, Buffer(ToBytes(xs)));
    KILN_ASSIGN_OR_RETURN(BufferRef partial, Buffer(Poison(groups * 4)));
    KILN_ASSIGN_OR_RETURN(
        auto exe, hal::LoadExecutable(*device_, {"reduce_sum",
                                                 bench::kReduceSumWgsl,
                                                 {{"reduce_sum",
                                                   {BindingKind::kReadOnlyStorage,
                                                    BindingKind::kStorage, BindingKind::kUniform},
                                                   16}}}));
    uint32_t params[4] = {n, 0, 0, 0};
    hal::BufferBinding bindings[] = {{x}, {partial}};
    KILN_RETURN_IF_ERROR(Time(o, [&](hal::CommandBuffer& cb) {
      return cb.Dispatch(exe, 0, bindings, {reinterpret_cast<uint8_t*>(params), sizeof(params)},
                         groups);
    }));
    KILN_ASSIGN_OR_RETURN(auto got_bytes, Read(partial));
    auto got = FromBytes<float>(got_bytes);
    for (uint32_t g = 0; g < groups; ++g) {
      double ref = 0;
      for (uint32_t i = 0; i < 256; ++i) ref += xs[g * 256 + i];
      o.max_error = std::max(o.max_error, std::fabs(got[g] - ref));
    }
    return o;
  }

  StatusOr<Outcome> FillAndCopy() {
    const uint32_t n = 1 << 16;
    Outcome o{"transfer: 2-byte fill at offset 6, copy at offsets 3 -> 1"};
    auto initial = Poison(n);
    KILN_ASSIGN_OR_RETURN(BufferRef src, Buffer(initial));
    KILN_ASSIGN_OR_RETURN(BufferRef dst, Buffer(Poison(n)));
    KILN_ASSIGN_OR_RETURN(auto dst_before, Read(dst));
    const uint16_t pattern = 0xBEEF;
    KILN_RETURN_IF_ERROR(Time(o, [&](hal::CommandBuffer& cb) -> Status {
      KILN_RETURN_IF_ERROR(cb.FillBuffer(src, 6, 1000, &pattern, 2));
      return cb.CopyBuffer(src, 3, dst, 1, n - 7);
    }));
    std::vector<uint8_t> src_ref = initial;
    for (uint32_t i = 6; i < 1006; ++i) src_ref[i] = (i % 2 == 0) ? 0xEF : 0xBE;
    std::vector<uint8_t> dst_ref = dst_before;
    std::memcpy(dst_ref.data() + 1, src_ref.data() + 3, n - 7);
    KILN_ASSIGN_OR_RETURN(auto got_src, Read(src));
    KILN_ASSIGN_OR_RETURN(auto got_dst, Read(dst));
    for (uint32_t i = 0; i < n; ++i) {
      o.max_error += (got_src[i] != src_ref[i]) + (got_dst[i] != dst_ref[i]);
    }
    return o;
  }

 private:
  std::shared_ptr<hal::Device> device_;
  std::mt19937 rng_{std::random_device{}()};
};

}  // namespace

int DemoCommand(const Args& args) {
  std::set<std::string> valued = kDeviceFlags;
  valued.insert("matmul-size");
  auto flags = Flags::Parse(args, valued, {"trusted"});
  if (!flags.ok()) return Fail(flags.status().message());
  if (flags->help()) {
    return PrintUsage(
        "usage: kiln demo [--matmul-size N] [--impl I] [--backend B] [--feature-level L] "
        "[--trusted]\n"
        "  runs hand-written kernels through the HAL and checks them on the CPU\n"
        "  --matmul-size N   the tiled matmul's size: a multiple of 16 up to 4096 (default 256)");
  }
  if (Status none = flags->NoArguments("kiln demo"); !none.ok()) return Fail(none.message());
  auto options = DeviceOptionsFromFlags(*flags);
  if (!options.ok()) return Fail(options.status().message());
  auto size = flags->GetPositiveUint("matmul-size", 256, kMaxMatmulSize);
  if (!size.ok()) return Fail(size.status().message());
  if (*size % 16 != 0) {
    return Fail(
        StrCat("flag --matmul-size needs a multiple of 16 (the kernel's tile), got ", *size));
  }
  auto device = hal::Device::Create(*options);
  if (!device.ok()) return Fail(device.status().message());
  std::printf("device: %s\n", (*device)->Describe().c_str());
  std::printf("GPU timestamps: %s\n\n",
              (*device)->HasFeature(hal::Feature::kTimestampQuery) ? "yes" : "no (wall time only)");
  Demo demo(*device);
  std::vector<std::function<StatusOr<Outcome>()>> runs = {
      [&] { return demo.Axpb(); },
      [&] { return demo.Matmul(static_cast<uint32_t>(*size)); },
      [&] { return demo.ReduceSum(); },
      [&] { return demo.FillAndCopy(); },
  };
  std::printf("%-58s %10s %10s %12s  %s\n", "kernel", "wall ms", "gpu ms", "max error", "check");
  int failures = 0;
  for (auto& run : runs) {
    auto o = run();
    if (!o.ok()) {
      std::printf("error: %s\n", o.status().ToString().c_str());
      ++failures;
      continue;
    }
    bool pass = o->max_error <= o->tolerance;
    failures += !pass;
    char gpu[32] = "-";
    if (o->gpu_ms >= 0) std::snprintf(gpu, sizeof(gpu), "%.3f", o->gpu_ms);
    std::printf("%-58s %10.3f %10s %12.3g  %s\n", o->what.c_str(), o->wall_ms, gpu, o->max_error,
                pass ? "PASS" : "FAIL");
  }
  std::printf("\n%s\n", failures ? "FAIL" : "all kernels PASS");
  return failures ? 1 : 0;
}

}  // namespace kiln::tool
