// Dispatch: constants through the staging buffer, the bind group cache,
// indirect dispatch, reusable command buffers, ordering with updates.
#include "kiln/hal/cts/cts_util.h"

#include <cmath>

#include "kiln/hal/bind_group_cache.h"
#include "kiln/hal/staging_buffer.h"

namespace kiln::hal::cts {
namespace {

class DispatchTest : public AxpbTest {
 protected:

  // Records y = x * scale + bias over n elements.
  Status RecordAxpb(CommandBuffer& cb, const BufferRef& x, const BufferRef& y, float scale,
                    float bias, uint32_t n) {
    BufferBinding bindings[] = {{x}, {y}};
    AxpbConstants c{scale, bias, n, 0};
    return cb.Dispatch(axpb_, 0, bindings, BytesOf(c), (n + 63) / 64);
  }

  void ExpectAxpb(const std::vector<float>& x, const std::vector<float>& y, float scale,
                  float bias) {
    ASSERT_EQ(x.size(), y.size());
    // GPUs may fuse the multiply-add, so allow rounding of either step.
    for (size_t i = 0; i < x.size(); ++i) {
      const float tolerance = 2e-7f * (std::fabs(x[i] * scale) + std::fabs(bias)) + 1e-30f;
      ASSERT_NEAR(y[i], x[i] * scale + bias, tolerance) << "at " << i;
    }
  }

};

TEST_F(DispatchTest, OneDispatchReadsBackTheRightNumbers) {
  const uint32_t n = 1000;
  auto xs = RandomFloats(n);
  auto x = NewBuffer(n * 4), y = NewBuffer(n * 4);
  Write(x, Bytes(xs));
  Poison(y);
  auto cb = NewCommandBuffer();
  KILN_ASSERT_OK(RecordAxpb(*cb, x, y, 2.5f, -1.0f, n));
  Run(*cb);
  ExpectAxpb(xs, As<float>(Read(y)), 2.5f, -1.0f);
}

TEST_F(DispatchTest, ManyDispatchesWithDifferentConstantsShareOnePass) {
  const uint32_t n = 256;
  auto xs = RandomFloats(n);
  auto x = NewBuffer(n * 4);
  Write(x, Bytes(xs));
  std::vector<BufferRef> ys;
  auto cb = NewCommandBuffer();
  for (int i = 0; i < 20; ++i) {
    ys.push_back(NewBuffer(n * 4));
    Poison(ys.back());
    KILN_ASSERT_OK(RecordAxpb(*cb, x, ys.back(), float(i), float(-i), n));
  }
  EXPECT_EQ(cb->stats().execute_segments, 1u);
  Run(*cb);
  for (int i = 0; i < 20; ++i) ExpectAxpb(xs, As<float>(Read(ys[i])), float(i), float(-i));
}

TEST_F(DispatchTest, BindGroupCacheReusesGroups) {
  const uint32_t n = 128;
  auto x = NewBuffer(n * 4), y = NewBuffer(n * 4);
  auto xs = RandomFloats(n);
  Write(x, Bytes(xs));
  Poison(y);
  // Ten command buffers, one dispatch each, the same bindings: one group.
  auto before = device_->bind_group_cache().stats();
  for (int i = 0; i < 10; ++i) {
    auto cb = NewCommandBuffer();
    KILN_ASSERT_OK(RecordAxpb(*cb, x, y, 3.0f, float(i), n));
    Run(*cb);
    ExpectAxpb(xs, As<float>(Read(y)), 3.0f, float(i));
  }
  auto after = device_->bind_group_cache().stats();
  EXPECT_LE(after.misses - before.misses, 1u);
  EXPECT_GE(after.hits - before.hits, 9u);
  // Other bindings make another group.
  auto z = NewBuffer(n * 4);
  auto cb = NewCommandBuffer();
  KILN_ASSERT_OK(RecordAxpb(*cb, x, z, 3.0f, 0.0f, n));
  EXPECT_EQ(device_->bind_group_cache().stats().misses, after.misses + 1);
  Run(*cb);
  ExpectAxpb(xs, As<float>(Read(z)), 3.0f, 0.0f);
}

TEST_F(DispatchTest, StagingExhaustionMidRecordingFlushesAndRetries) {
  // Far more constants than the staging buffer holds: the command buffer must
  // close windows and keep every dispatch's own constants. A device with a
  // small staging buffer keeps the test short.
  DeviceOptions options = Options();
  options.staging_capacity = 8192;
  auto small = Device::Create(options);
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  device_ = *small;
  axpb_ = *LoadExecutable(*device_, AxpbSpec());
  const uint32_t per_window = device_->staging().capacity() / device_->staging().alignment();
  const int dispatches = static_cast<int>(per_window) * 2 + 3;
  const uint32_t n = 64;
  auto xs = RandomFloats(n);
  auto x = NewBuffer(n * 4);
  Write(x, Bytes(xs));
  auto out = NewBuffer(uint64_t(n) * 4 * dispatches);
  Poison(out);
  // Each dispatch writes its own slice: bind a window of `out`.
  const uint64_t align = device_->limits().min_storage_buffer_offset_alignment;
  const uint64_t slice = std::max<uint64_t>(n * 4, align);
  auto big = NewBuffer(slice * dispatches);
  Poison(big);
  auto cb = NewCommandBuffer();
  for (int i = 0; i < dispatches; ++i) {
    BufferBinding bindings[] = {{x}, {big, slice * i, n * 4}};
    AxpbConstants c{1.0f, float(i), n, 0};
    KILN_ASSERT_OK(cb->Dispatch(axpb_, 0, bindings, BytesOf(c), 1));
  }
  EXPECT_GE(cb->stats().staging_flushes, 2u);
  EXPECT_GE(cb->stats().execute_segments, 3u);
  Run(*cb);
  auto got = As<float>(Read(big));
  for (int i = 0; i < dispatches; ++i) {
    for (uint32_t j = 0; j < n; ++j) {
      ASSERT_FLOAT_EQ(got[slice / 4 * i + j], xs[j] + float(i)) << "dispatch " << i << " elem " << j;
    }
  }
}

TEST_F(DispatchTest, ReusableCommandBufferIssued100Times) {
  // y = x * 2 + 1, then x = copy of y: each issue doubles-and-increments.
  const uint32_t n = 200;
  auto xs = RandomFloats(n);
  for (auto& v : xs) v = std::round(v);  // keep the values exact
  auto x = NewBuffer(n * 4), y = NewBuffer(n * 4);
  Write(x, Bytes(xs));
  auto cb = NewCommandBuffer(CommandBufferMode::kReusable);
  KILN_ASSERT_OK(RecordAxpb(*cb, x, y, 1.0f, 1.0f, n));
  KILN_ASSERT_OK(cb->CopyBuffer(y, 0, x, 0, n * 4));
  KILN_ASSERT_OK(cb->End());
  std::vector<float> expect = xs;
  for (int issue = 0; issue < 100; ++issue) {
    KILN_ASSERT_OK(SubmitAndWait(*device_, *cb));
    for (auto& v : expect) v += 1.0f;
    auto got = As<float>(Read(x));
    ASSERT_EQ(got, expect) << "issue " << issue;
  }
}

TEST_F(DispatchTest, OneShotCommandBufferCannotBeIssuedTwice) {
  auto x = NewBuffer(256), y = NewBuffer(256);
  auto cb = NewCommandBuffer();
  KILN_ASSERT_OK(RecordAxpb(*cb, x, y, 1, 0, 64));
  Run(*cb);
  Status s = Submit(*device_, *cb);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
}

TEST_F(DispatchTest, UpdatesInterleavedWithDispatchesTakeEffectInOrder) {
  const uint32_t n = 64;
  auto x = NewBuffer(n * 4);
  std::vector<BufferRef> ys;
  auto cb = NewCommandBuffer();
  std::vector<std::vector<float>> inputs;
  for (int i = 0; i < 5; ++i) {
    inputs.push_back(RandomFloats(n));
    KILN_ASSERT_OK(cb->UpdateBuffer(x, 0, Bytes(inputs.back())));
    ys.push_back(NewBuffer(n * 4));
    Poison(ys.back());
    KILN_ASSERT_OK(RecordAxpb(*cb, x, ys.back(), 2.0f, 0.5f, n));
  }
  EXPECT_EQ(cb->stats().write_segments, 5u);
  Run(*cb);
  for (int i = 0; i < 5; ++i) ExpectAxpb(inputs[i], As<float>(Read(ys[i])), 2.0f, 0.5f);
}

TEST_F(DispatchTest, UpdateCopiesTheCallersDataAtRecordTime) {
  const uint32_t n = 64;
  auto x = NewBuffer(n * 4), y = NewBuffer(n * 4);
  auto xs = RandomFloats(n);
  auto data = Bytes(xs);
  auto cb = NewCommandBuffer();
  KILN_ASSERT_OK(cb->UpdateBuffer(x, 0, data));
  std::fill(data.begin(), data.end(), 0xEE);  // the caller reuses its memory
  KILN_ASSERT_OK(RecordAxpb(*cb, x, y, 1.0f, 0.0f, n));
  Run(*cb);
  ExpectAxpb(xs, As<float>(Read(y)), 1.0f, 0.0f);
}

TEST_F(DispatchTest, IndirectDispatchReadsItsWorkgroupCounts) {
  const uint32_t n = 640;
  auto xs = RandomFloats(n);
  auto x = NewBuffer(n * 4), y = NewBuffer(n * 4);
  Write(x, Bytes(xs));
  auto ypoison = As<float>(Poison(y));
  auto args = NewBuffer(32, kDefaultBufferUsage | WGPUBufferUsage_Indirect);
  // Only 5 of the 10 needed groups: the upper half must keep its poison.
  std::vector<uint32_t> counts = {0, 0, 0, 5, 1, 1, 0, 0};
  Write(args, Bytes(counts));
  auto cb = NewCommandBuffer();
  BufferBinding bindings[] = {{x}, {y}};
  AxpbConstants c{-2.0f, 4.0f, n, 0};
  KILN_ASSERT_OK(cb->DispatchIndirect(axpb_, 0, bindings, BytesOf(c), args, 12));
  Run(*cb);
  auto got = As<float>(Read(y));
  for (uint32_t i = 0; i < n; ++i) {
    if (i < 320) {
      ASSERT_FLOAT_EQ(got[i], xs[i] * -2.0f + 4.0f) << i;
    } else {
      ASSERT_EQ(std::memcmp(&got[i], &ypoison[i], 4), 0) << "element " << i << " was written";
    }
  }
}

TEST_F(DispatchTest, DebugGroupsAndMarkersDoNotChangeResults) {
  const uint32_t n = 64;
  auto xs = RandomFloats(n);
  auto x = NewBuffer(n * 4), y = NewBuffer(n * 4);
  Write(x, Bytes(xs));
  auto cb = NewCommandBuffer();
  KILN_ASSERT_OK(cb->BeginDebugGroup("outer"));
  KILN_ASSERT_OK(cb->InsertDebugMarker("before"));
  KILN_ASSERT_OK(cb->ExecutionBarrier());
  KILN_ASSERT_OK(cb->SignalEvent());
  KILN_ASSERT_OK(cb->WaitEvents());
  KILN_ASSERT_OK(cb->ResetEvent());
  KILN_ASSERT_OK(RecordAxpb(*cb, x, y, 1.5f, 0.0f, n));
  KILN_ASSERT_OK(cb->EndDebugGroup());
  Run(*cb);
  ExpectAxpb(xs, As<float>(Read(y)), 1.5f, 0.0f);
}

TEST_F(DispatchTest, UnbalancedDebugGroupsAreErrors) {
  auto cb = NewCommandBuffer();
  EXPECT_EQ(cb->EndDebugGroup().code(), StatusCode::kFailedPrecondition);
  KILN_ASSERT_OK(cb->BeginDebugGroup("open"));
  EXPECT_EQ(cb->End().code(), StatusCode::kFailedPrecondition);
}

TEST_F(DispatchTest, FencesSignalInOrderAndWaitWithTimeout) {
  const uint32_t n = 64;
  auto x = NewBuffer(n * 4), y = NewBuffer(n * 4);
  auto xs = RandomFloats(n);
  Write(x, Bytes(xs));
  auto fence = Fence::Create(device_);
  for (uint64_t v = 1; v <= 3; ++v) {
    auto cb = NewCommandBuffer();
    KILN_ASSERT_OK(RecordAxpb(*cb, x, y, float(v), 0.0f, n));
    KILN_ASSERT_OK(cb->End());
    KILN_ASSERT_OK(Submit(*device_, *cb, fence.get(), v));
  }
  KILN_ASSERT_OK(fence->Wait(3, std::chrono::seconds(30)));
  EXPECT_GE(fence->value(), 3u);
  ExpectAxpb(xs, As<float>(Read(y)), 3.0f, 0.0f);
  // Nothing will ever signal 10.
  Status s = fence->Wait(10, std::chrono::milliseconds(10));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  auto cb = NewCommandBuffer();
  KILN_ASSERT_OK(cb->End());
  EXPECT_EQ(Submit(*device_, *cb, fence.get(), 2).code(), StatusCode::kInvalidArgument);
}

TEST_F(DispatchTest, FenceWaitTimesOutWhileWorkRunsThenCompletes) {
  // A kernel that keeps the device busy long enough for a short wait to
  // time out.
  ExecutableSpec spec{"spin", R"(
struct C { iterations: u32, a: u32, b: u32, c: u32 }
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<uniform> c: C;
@compute @workgroup_size(64)
fn spin(@builtin(global_invocation_id) gid: vec3<u32>) {
  var x = gid.x;
  for (var i = 0u; i < c.iterations; i++) { x = x * 1664525u + 1013904223u; }
  out[gid.x] = x;
})",
                      {{"spin", {BindingKind::kStorage, BindingKind::kUniform}, 16}}};
  auto exe = LoadExecutable(*device_, spec);
  ASSERT_TRUE(exe.ok()) << exe.status();
  const uint32_t groups = 64, n = groups * 64;
  auto out = NewBuffer(n * 4);
  uint32_t c[4] = {20000, 0, 0, 0};
  auto cb = NewCommandBuffer();
  BufferBinding binding{out};
  for (int i = 0; i < 8; ++i) {
    KILN_ASSERT_OK(cb->Dispatch(*exe, 0, {&binding, 1}, {reinterpret_cast<uint8_t*>(c), 16}, groups));
  }
  KILN_ASSERT_OK(cb->End());
  auto fence = Fence::Create(device_);
  KILN_ASSERT_OK(Submit(*device_, *cb, fence.get(), 1));
  Status early = fence->Wait(1, std::chrono::nanoseconds(1));
  if (early.ok()) GTEST_SKIP() << "the device finished before a 1 ns wait could time out";
  EXPECT_EQ(early.code(), StatusCode::kDeadlineExceeded) << early;
  KILN_ASSERT_OK(fence->Wait(1, std::chrono::seconds(120)));
  EXPECT_EQ(fence->value(), 1u);
  auto got = As<uint32_t>(Read(out));
  for (uint32_t i = 0; i < n; i += 97) {
    uint32_t x = i;
    for (uint32_t k = 0; k < c[0]; ++k) x = x * 1664525u + 1013904223u;
    ASSERT_EQ(got[i], x) << i;
  }
}

}  // namespace
}  // namespace kiln::hal::cts
