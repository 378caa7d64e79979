#include "kiln/hal/cts/cts_util.h"

#include <cstdlib>

namespace kiln::hal::cts {

DeviceOptions HalTest::Options() {
  DeviceOptions options;
  return options;
}

namespace {

std::shared_ptr<Device>& SharedDeviceSlot() {
  static std::shared_ptr<Device> device;
  return device;
}

// Destroys the shared device before the process exits: implementations tear
// down their own state at exit, and a device outliving it crashes there.
class ReleaseSharedDevice : public ::testing::Environment {
 public:
  void TearDown() override { SharedDeviceSlot().reset(); }
};
const auto* const kReleaseSharedDevice =
    ::testing::AddGlobalTestEnvironment(new ReleaseSharedDevice());

}  // namespace

std::shared_ptr<Device> HalTest::SharedDevice() {
  std::shared_ptr<Device>& device = SharedDeviceSlot();
  if (!device || !device->CheckHealthy().ok()) {
    auto created = Device::Create(Options());
    if (!created.ok()) {
      ADD_FAILURE() << created.status().ToString();
      return nullptr;
    }
    device = *created;
    std::printf("[ device   ] %s\n", device->Describe().c_str());
  }
  return device;
}

void HalTest::SetUp() {
  device_ = SharedDevice();
  ASSERT_TRUE(device_) << "no device";
}

void HalTest::TearDown() {
  if (device_) {
    Status s = device_->CheckHealthy();
    EXPECT_TRUE(s.ok()) << "the device is unhealthy after the test: " << s.ToString();
  }
}

BufferRef HalTest::NewBuffer(uint64_t size, WGPUBufferUsage usage) {
  auto b = device_->allocator().Allocate(size, usage);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return b.ok() ? *b : nullptr;
}

std::vector<uint8_t> HalTest::RandomBytes(size_t n) {
  std::vector<uint8_t> out(n);
  std::uniform_int_distribution<int> dist(0, 255);
  for (auto& b : out) b = static_cast<uint8_t>(dist(rng_));
  return out;
}

std::vector<uint8_t> HalTest::Poison(const BufferRef& buffer) {
  std::vector<uint8_t> bytes = RandomBytes(buffer->size());
  Write(buffer, bytes);
  return bytes;
}

std::vector<uint8_t> HalTest::Read(const BufferRef& buffer) {
  std::vector<uint8_t> out(buffer->size());
  Status s = Download(*device_, buffer, 0, out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

void HalTest::Write(const BufferRef& buffer, const std::vector<uint8_t>& bytes) {
  Status s = Upload(*device_, buffer, 0, bytes);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

std::unique_ptr<CommandBuffer> HalTest::NewCommandBuffer(CommandBufferMode mode,
                                                         CommandBufferOptions options) {
  auto cb = CommandBuffer::Create(device_, mode, std::move(options));
  EXPECT_TRUE(cb.ok()) << cb.status().ToString();
  return cb.ok() ? std::move(*cb) : nullptr;
}

void HalTest::Run(CommandBuffer& cb) {
  Status s = cb.End();
  ASSERT_TRUE(s.ok()) << s.ToString();
  s = SubmitAndWait(*device_, cb);
  ASSERT_TRUE(s.ok()) << s.ToString();
}

ExecutableSpec AxpbSpec() {
  return ExecutableSpec{"axpb", R"(
struct Constants {
  scale: f32,
  bias: f32,
  n: u32,
  unused: u32,
}
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> c: Constants;

@compute @workgroup_size(64)
fn axpb(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (gid.x < c.n) {
    y[gid.x] = x[gid.x] * c.scale + c.bias;
  }
}
)",
                        {{"axpb",
                          {BindingKind::kReadOnlyStorage, BindingKind::kStorage,
                           BindingKind::kUniform},
                          16}}};
}

ScopedEnv::ScopedEnv(const char* name, const char* value) : name_(name) {
  if (const char* old = std::getenv(name)) saved_ = old;
  Set(value);
}

ScopedEnv::~ScopedEnv() {
  Set(saved_ ? saved_->c_str() : nullptr);
}

void ScopedEnv::Set(const char* value) {
  if (value) {
    setenv(name_.c_str(), value, 1);
  } else {
    unsetenv(name_.c_str());
  }
}

}  // namespace kiln::hal::cts
