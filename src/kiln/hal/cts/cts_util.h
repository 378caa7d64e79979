// Shared pieces of the HAL conformance suite.
//
// The suite runs against one implementation per process, chosen like any
// kiln program ($KILN_IMPL, $KILN_BACKEND); CTest runs it once per
// implementation. Every test reads its results back from the GPU.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kiln/hal/buffer.h"
#include "kiln/hal/command_buffer.h"
#include "kiln/hal/device.h"
#include "kiln/hal/executable.h"
#include "kiln/hal/queue.h"
#include "kiln/support/status_matchers.h"

namespace kiln::hal::cts {

// Sets an environment variable (unsets it for null) until the end of its
// scope, then restores what was there, however the test ends.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  void Set(const char* value);

 private:
  std::string name_;
  std::optional<std::string> saved_;
};

class HalTest : public ::testing::Test {
 protected:
  // One device per process, made on first use; a test that breaks it
  // (device loss) makes its own.
  static std::shared_ptr<Device> SharedDevice();
  static DeviceOptions Options();

  void SetUp() override;
  void TearDown() override;

  std::shared_ptr<Device> device_;
  std::mt19937 rng_{std::random_device{}()};

  BufferRef NewBuffer(uint64_t size, WGPUBufferUsage usage = kDefaultBufferUsage);
  std::vector<uint8_t> RandomBytes(size_t n);
  // Fills the buffer with random bytes and returns them (the "poison").
  std::vector<uint8_t> Poison(const BufferRef& buffer);
  std::vector<uint8_t> Read(const BufferRef& buffer);
  void Write(const BufferRef& buffer, const std::vector<uint8_t>& bytes);
  std::unique_ptr<CommandBuffer> NewCommandBuffer(CommandBufferMode mode = CommandBufferMode::kOneShot,
                                                  CommandBufferOptions options = {});
  void Run(CommandBuffer& cb);
};

// y[i] = x[i] * scale + bias, over n = arrayLength elements, 64 per group.
ExecutableSpec AxpbSpec();

// A HalTest with the axpb executable loaded and random floats at hand.
class AxpbTest : public HalTest {
 protected:
  void SetUp() override {
    HalTest::SetUp();
    if (!device_) return;
    auto exe = LoadExecutable(*device_, AxpbSpec());
    ASSERT_TRUE(exe.ok()) << exe.status().ToString();
    axpb_ = *exe;
  }

  std::vector<float> RandomFloats(size_t n) {
    std::uniform_real_distribution<float> dist(-10.f, 10.f);
    std::vector<float> v(n);
    for (auto& f : v) f = dist(rng_);
    return v;
  }

  ExecutableRef axpb_;
};
struct AxpbConstants {
  float scale;
  float bias;
  uint32_t n;
  uint32_t unused;
};

template <typename T>
std::vector<T> As(const std::vector<uint8_t>& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}
template <typename T>
std::vector<uint8_t> Bytes(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}
template <typename T>
std::span<const uint8_t> BytesOf(const T& v) {
  return {reinterpret_cast<const uint8_t*>(&v), sizeof(T)};
}

}  // namespace kiln::hal::cts
