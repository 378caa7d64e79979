// Device creation, enum translation proved by behaviour, limits honoured,
// executables (asynchronous creation, cache), profiling.
#include "kiln/hal/cts/cts_util.h"

#include <algorithm>

namespace kiln::hal::cts {
namespace {

TEST_F(HalTest, DeviceReportsAdapterFeaturesAndLimits) {
  const AdapterReport& a = device_->adapter();
  EXPECT_FALSE(a.description.empty() && a.device.empty());
  EXPECT_NE(a.backend, Backend::kNull);
  const Limits& l = device_->limits();
  EXPECT_GE(l.max_storage_buffers_per_shader_stage, 4u);
  EXPECT_GE(l.max_compute_invocations_per_workgroup, 128u);
  EXPECT_GE(l.max_compute_workgroups_per_dimension, 65535u);
  EXPECT_GT(l.max_storage_buffer_binding_size, 0u);
  // What the device reports as enabled, the adapter offers.
  for (int i = 0; i < kFeatureCount; ++i) {
    Feature f = static_cast<Feature>(i);
    if (device_->HasFeature(f)) {
      EXPECT_NE(std::find(a.features.begin(), a.features.end(), std::string(FeatureName(f))),
                a.features.end())
          << FeatureName(f);
    }
  }
}

TEST_F(HalTest, FeatureNamesTranslateBothWays) {
  for (int i = 0; i < kFeatureCount; ++i) {
    Feature f = static_cast<Feature>(i);
    auto native = device_->impl().NativeFeature(f);
    ASSERT_TRUE(native.has_value());
    EXPECT_EQ(device_->impl().FeatureFromNative(*native), f);
    EXPECT_EQ(ParseFeature(FeatureName(f)).value(), f);
  }
}

// Runs `wgsl`'s entry point `main` writing one u32 per invocation into out.
std::vector<uint32_t> RunProbe(HalTest& t, Device& device, const std::string& wgsl, uint32_t n,
                               uint32_t groups) {
  ExecutableSpec spec{"probe", wgsl, {{"main", {BindingKind::kStorage}, 0}}};
  auto exe = LoadExecutable(device, spec);
  EXPECT_TRUE(exe.ok()) << exe.status();
  if (!exe.ok()) return {};
  auto out = device.allocator().Allocate(n * 4);
  EXPECT_TRUE(out.ok());
  std::vector<uint8_t> poison(n * 4, 0xCD);
  EXPECT_TRUE(Upload(device, *out, 0, poison).ok());
  auto cb = CommandBuffer::Create(device.shared_from_this(), CommandBufferMode::kOneShot);
  BufferBinding binding{*out};
  EXPECT_TRUE((*cb)->Dispatch(*exe, 0, {&binding, 1}, {}, groups).ok());
  EXPECT_TRUE((*cb)->End().ok());
  EXPECT_TRUE(SubmitAndWait(device, **cb).ok());
  std::vector<uint8_t> bytes(n * 4);
  EXPECT_TRUE(Download(device, *out, 0, bytes).ok());
  return As<uint32_t>(bytes);
}

TEST_F(HalTest, ShaderF16IsUsableInWgslWhenEnabled) {
  if (!device_->HasFeature(Feature::kShaderF16)) {
    GTEST_SKIP() << device_->Describe() << " does not offer shader-f16";
  }
  auto got = RunProbe(*this, *device_, R"(
enable f16;
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let h = f16(gid.x) * 1.5h + 0.25h;
  out[gid.x] = u32(f32(h) * 4.0);
})", 64, 1);
  ASSERT_EQ(got.size(), 64u);
  for (uint32_t i = 0; i < 64; ++i) EXPECT_EQ(got[i], uint32_t((i * 1.5 + 0.25) * 4)) << i;
}

TEST_F(HalTest, SubgroupsAreUsableInWgslWhenEnabled) {
  if (!device_->HasFeature(Feature::kSubgroups)) {
    GTEST_SKIP() << device_->Describe() << " does not offer subgroups";
  }
  auto got = RunProbe(*this, *device_, R"(
enable subgroups;
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(subgroup_size) size: u32) {
  out[gid.x] = subgroupAdd(1u) * 1000u + size;
})", 64, 1);
  ASSERT_EQ(got.size(), 64u);
  const uint32_t size = got[0] % 1000;
  EXPECT_GE(size, 1u);
  for (uint32_t i = 0; i < 64; ++i) EXPECT_EQ(got[i], size * 1000 + size) << i;
}

TEST_F(HalTest, FeaturesNotEnabledAreRefusedByTheCompiler) {
  // The negative half of the translation proof: without the feature, its
  // WGSL is rejected, so the positive tests above cannot pass by accident.
  DeviceOptions options = Options();
  options.enable_optional_features = false;
  auto plain = Device::Create(options);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE((*plain)->HasFeature(Feature::kShaderF16));
  ExecutableSpec spec{"f16 without the feature", R"(
enable f16;
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(1)
fn main() { out[0] = u32(f32(1.5h)); })",
                      {{"main", {BindingKind::kStorage}, 0}}};
  auto exe = LoadExecutable(**plain, spec);
  EXPECT_EQ(exe.status().code(), StatusCode::kCompileError) << exe.status();
}

TEST_F(HalTest, RequiredFeatureTheAdapterLacksIsAClearError) {
  // Find a feature this adapter does not offer.
  std::optional<Feature> missing;
  for (Feature f : {Feature::kSubgroups, Feature::kShaderF16, Feature::kTimestampQuery,
                    Feature::kTextureCompressionETC2, Feature::kDualSourceBlending}) {
    const auto& feats = device_->adapter().features;
    if (std::find(feats.begin(), feats.end(), std::string(FeatureName(f))) == feats.end()) {
      missing = f;
      break;
    }
  }
  if (!missing) GTEST_SKIP() << "the adapter offers every probed feature";
  DeviceOptions options = Options();
  options.impl = device_->impl().kind();
  options.backend = device_->adapter().backend;
  options.required_features = {*missing};
  auto d = Device::Create(options);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(d.status().message().find(std::string(FeatureName(*missing))), std::string::npos)
      << d.status();
}

TEST_F(HalTest, ReportedWorkgroupLimitsAreHonoured) {
  const Limits& l = device_->limits();
  const uint32_t size = std::min(l.max_compute_invocations_per_workgroup,
                                 l.max_compute_workgroup_size_x);
  const uint32_t words = std::min<uint32_t>(l.max_compute_workgroup_storage_size / 4, 8192);
  std::string wgsl = StrCat(R"(
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
var<workgroup> scratch: array<u32, )", words, R"(>;
@compute @workgroup_size()", size, R"()
fn main(@builtin(local_invocation_index) i: u32) {
  for (var w = i; w < )", words, R"(u; w += )", size, R"(u) { scratch[w] = w; }
  workgroupBarrier();
  out[i] = scratch[)", words, R"(u - 1u - i % )", words, R"(u] + i;
})");
  auto got = RunProbe(*this, *device_, wgsl, size, 1);
  ASSERT_EQ(got.size(), size);
  for (uint32_t i = 0; i < size; ++i) ASSERT_EQ(got[i], words - 1 - i % words + i) << i;
  // One more invocation than the limit is refused.
  std::string too_big = StrCat(R"(
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size()", l.max_compute_invocations_per_workgroup + 1, R"()
fn main() { out[0] = 1u; })");
  auto exe = LoadExecutable(*device_, {"too big", too_big, {{"main", {BindingKind::kStorage}, 0}}});
  EXPECT_FALSE(exe.ok());
}

TEST_F(HalTest, StorageBindingSizeLimitIsHonoured) {
  const uint64_t max = std::min<uint64_t>(device_->limits().max_storage_buffer_binding_size,
                                          device_->limits().max_buffer_size);
  if (max > (256ull << 20)) GTEST_SKIP() << "binding limit " << max << " is too large to allocate here";
  auto exe = LoadExecutable(*device_, AxpbSpec());
  ASSERT_TRUE(exe.ok());
  auto x = NewBuffer(256), big = NewBuffer(max);
  auto cb = NewCommandBuffer();
  AxpbConstants c{1.0f, 2.0f, 64, 0};
  BufferBinding at_limit[] = {{x}, {big}};
  KILN_EXPECT_OK(cb->Dispatch(*exe, 0, at_limit, BytesOf(c), 1));
  Run(*cb);
  std::vector<uint8_t> head(256);
  KILN_ASSERT_OK(Download(*device_, big, 0, head));
  auto got = As<float>(head);
  std::vector<uint8_t> xb(256);
  KILN_ASSERT_OK(Download(*device_, x, 0, xb));
  auto xs = As<float>(xb);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(got[i], xs[i] + 2.0f);
}

TEST_F(HalTest, ExecutablesLoadAsynchronouslyAndAreCached) {
  ExecutableSpec spec = AxpbSpec();
  spec.wgsl += "\n// a variant, so the cache is cold\n";
  auto pending = LoadExecutableAsync(*device_, spec);
  ASSERT_TRUE(pending.ok()) << pending.status();
  auto exe = pending->Wait();
  ASSERT_TRUE(exe.ok()) << exe.status();
  auto before = device_->executable_cache().stats();
  auto again = LoadExecutable(*device_, spec);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->get(), exe->get());
  EXPECT_EQ(device_->executable_cache().stats().hits, before.hits + 1);
  EXPECT_EQ((*exe)->FindEntryPoint("axpb").value(), 0u);
  EXPECT_EQ((*exe)->FindEntryPoint("nope").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(HalTest, ProfilingReportsPerDispatchGpuTimesByName) {
  if (!device_->HasFeature(Feature::kTimestampQuery)) {
    auto cb = CommandBuffer::Create(device_, CommandBufferMode::kOneShot, {"p", true});
    EXPECT_EQ(cb.status().code(), StatusCode::kUnavailable);
    GTEST_SKIP() << device_->Describe() << " does not offer timestamp-query";
  }
  auto exe = LoadExecutable(*device_, AxpbSpec());
  ASSERT_TRUE(exe.ok());
  const uint32_t n = 1 << 20;
  auto x = NewBuffer(n * 4), y = NewBuffer(n * 4);
  auto cb = NewCommandBuffer(CommandBufferMode::kReusable, {"profiled", true});
  BufferBinding bindings[] = {{x}, {y}};
  const uint32_t groups = n / 64, gx = std::min<uint32_t>(groups, 32768);
  AxpbConstants big{1.0f, 0.0f, gx * 64, 0};  // the kernel indexes x only
  for (int i = 0; i < 3; ++i) KILN_ASSERT_OK(cb->Dispatch(*exe, 0, bindings, BytesOf(big), gx));
  const uint8_t zero = 0;
  KILN_ASSERT_OK(cb->FillBuffer(y, 1, 3, &zero, 1));  // a builtin dispatch, named "fill"
  Run(*cb);
  auto timings = cb->ReadProfile();
  ASSERT_TRUE(timings.ok()) << timings.status();
  ASSERT_EQ(timings->size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ((*timings)[i].name, "axpb");
    EXPECT_GT((*timings)[i].gpu_ns, 0.0);
  }
  EXPECT_EQ((*timings)[3].name, "fill");
  // A reissue refreshes the figures.
  KILN_ASSERT_OK(SubmitAndWait(*device_, *cb));
  EXPECT_TRUE(cb->ReadProfile().ok());
}

// More dispatches than one query set holds (WebGPU's sets take at most
// 4096 timestamps, two per dispatch) are timed across several sets.
TEST_F(HalTest, ProfilingTimesMoreDispatchesThanOneQuerySetHolds) {
  if (!device_->HasFeature(Feature::kTimestampQuery)) {
    GTEST_SKIP() << device_->Describe() << " does not offer timestamp-query";
  }
  auto exe = LoadExecutable(*device_, AxpbSpec());
  ASSERT_TRUE(exe.ok());
  auto x = NewBuffer(64 * 4), y = NewBuffer(64 * 4);
  auto cb = NewCommandBuffer(CommandBufferMode::kOneShot, {"many", true});
  BufferBinding bindings[] = {{x}, {y}};
  AxpbConstants c{1.0f, 0.0f, 64, 0};
  constexpr int kDispatches = 2 * 2048 + 3;
  for (int i = 0; i < kDispatches; ++i) {
    KILN_ASSERT_OK(cb->Dispatch(*exe, 0, bindings, BytesOf(c), 1));
  }
  Run(*cb);
  auto timings = cb->ReadProfile();
  ASSERT_TRUE(timings.ok()) << timings.status();
  ASSERT_EQ(timings->size(), static_cast<size_t>(kDispatches));
  // Each set's figures land in their own place: a set never resolved reads
  // as zeros throughout (one tiny dispatch may time 0 on a coarse clock).
  double longest[3] = {0, 0, 0};
  for (size_t i = 0; i < timings->size(); ++i) {
    EXPECT_EQ((*timings)[i].name, "axpb");
    ASSERT_GE((*timings)[i].gpu_ns, 0.0);
    longest[i / 2048] = std::max(longest[i / 2048], (*timings)[i].gpu_ns);
  }
  for (int set = 0; set < 3; ++set) EXPECT_GT(longest[set], 0.0) << "query set " << set;
}

}  // namespace
}  // namespace kiln::hal::cts
