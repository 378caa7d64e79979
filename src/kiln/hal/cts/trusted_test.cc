// Trusted mode: a device made without the robustness transform runs
// in-bounds kernels correctly and says so; a device in the default mode keeps
// an out-of-bounds write inside its binding, as WebGPU promises. (What an
// out-of-bounds access does in trusted mode is undefined, so it is not
// tested.)
#include <cstdlib>
#include <string>

#include "kiln/hal/cts/cts_util.h"

namespace kiln::hal::cts {
namespace {

constexpr const char* kPoke = R"(
struct C { index: u32, value: f32, a: u32, b: u32 }
@group(0) @binding(0) var<storage, read_write> data: array<f32>;
@group(0) @binding(1) var<uniform> c: C;
@compute @workgroup_size(1)
fn poke() { data[c.index] = c.value; }
)";

class TrustedTest : public HalTest {
 protected:
  // A device of this suite's implementation and backend, in the given mode.
  std::shared_ptr<Device> MakeDevice(bool trusted) {
    DeviceOptions options = Options();
    options.trusted = trusted;
    auto device = Device::Create(options);
    EXPECT_TRUE(device.ok()) << device.status();
    return device.ok() ? *device : nullptr;
  }

  // Writes `value` at element `index` of a binding of the first 16 floats
  // of a 64-float buffer; returns the whole buffer after, poisoned before.
  std::vector<float> Poke(const std::shared_ptr<Device>& device, uint32_t index, float value) {
    auto exe = LoadExecutable(
        *device, {"poke", kPoke, {{"poke", {BindingKind::kStorage, BindingKind::kUniform}, 16}}});
    EXPECT_TRUE(exe.ok()) << exe.status();
    auto buffer = device->allocator().Allocate(256);
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    if (!exe.ok() || !buffer.ok()) return {};
    std::vector<float> poison(64, -7.0f);
    EXPECT_TRUE(Upload(*device, *buffer, 0, {reinterpret_cast<uint8_t*>(poison.data()), 256}).ok());
    auto cb = CommandBuffer::Create(device, CommandBufferMode::kOneShot);
    EXPECT_TRUE(cb.ok());
    struct {
      uint32_t index;
      float value;
      uint32_t a, b;
    } c{index, value, 0, 0};
    BufferBinding binding{*buffer, 0, 64};
    EXPECT_TRUE((*cb)->Dispatch(*exe, 0, {&binding, 1}, BytesOf(c), 1).ok());
    EXPECT_TRUE((*cb)->End().ok());
    EXPECT_TRUE(SubmitAndWait(*device, **cb).ok());
    std::vector<float> out(64);
    EXPECT_TRUE(Download(*device, *buffer, 0, {reinterpret_cast<uint8_t*>(out.data()), 256}).ok());
    return out;
  }
};

TEST_F(TrustedTest, TrustedDevicesRunInBoundsKernelsAndSaySo) {
  auto device = MakeDevice(true);
  ASSERT_TRUE(device);
  EXPECT_TRUE(device->trusted());
  EXPECT_NE(device->Describe().find(" trusted"), std::string::npos) << device->Describe();
  std::vector<float> out = Poke(device, 9, 3.5f);
  ASSERT_EQ(out.size(), 64u);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(out[i], i == 9 ? 3.5f : -7.0f) << i;
}

TEST_F(TrustedTest, DefaultDevicesKeepOutOfBoundsWritesInsideTheBinding) {
  auto device = MakeDevice(false);
  ASSERT_TRUE(device);
  EXPECT_FALSE(device->trusted());
  std::vector<float> out = Poke(device, 40, 3.5f);  // element 40 of a 16-element binding
  ASSERT_EQ(out.size(), 64u);
  for (int i = 16; i < 64; ++i) EXPECT_EQ(out[i], -7.0f) << "written outside the binding at " << i;
}

TEST_F(TrustedTest, TheEnvironmentChoosesTheModeUnlessTold) {
  DeviceOptions options = Options();
  options.trusted.reset();
  ScopedEnv env("KILN_TRUSTED", "maybe");
  auto refused = Device::Create(options);
  EXPECT_TRUE(HasError(refused, StatusCode::kInvalidArgument, "$KILN_TRUSTED is 'maybe'"));
  env.Set("1");
  auto trusted = Device::Create(options);
  ASSERT_TRUE(trusted.ok()) << trusted.status();
  EXPECT_TRUE((*trusted)->trusted());
}

// $KILN_BUFFER_POOL_MB fixes the capacity of the pool of freed buffers: 0
// keeps none.
TEST_F(TrustedTest, TheEnvironmentSizesTheBufferPool) {
  ScopedEnv env("KILN_BUFFER_POOL_MB", nullptr);
  for (const char* bad : {"lots", "-1", "16777217", "1.5"}) {
    env.Set(bad);
    EXPECT_TRUE(HasError(Device::Create(Options()), StatusCode::kInvalidArgument,
                         std::string("$KILN_BUFFER_POOL_MB is '") + bad +
                             "'; expected a whole number of MiB from 0 to 16777216"));
  }
  for (const char* mib : {"0", "1"}) {
    env.Set(mib);
    auto device = Device::Create(Options());
    ASSERT_TRUE(device.ok()) << device.status();
    { ASSERT_TRUE((*device)->allocator().Allocate(4096).ok()); }  // freed at once
    EXPECT_EQ((*device)->allocator().stats().pooled_buffers, mib[0] == '0' ? 0u : 1u) << mib;
    EXPECT_EQ((*device)->allocator().pool_capacity(), uint64_t{mib[0] == '0' ? 0u : 1u} << 20);
  }
  // Unset (or empty), the capacity is automatic, from 256 MiB.
  for (const char* unset : std::initializer_list<const char*>{"", nullptr}) {
    env.Set(unset);
    auto device = Device::Create(Options());
    ASSERT_TRUE(device.ok()) << device.status();
    EXPECT_EQ((*device)->allocator().pool_capacity(), uint64_t{256} << 20);
  }
}

}  // namespace
}  // namespace kiln::hal::cts
