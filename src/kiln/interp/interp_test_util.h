// Helpers shared by the interpreter's tests: random inputs and buffers.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kiln/interp/value.h"
#include "kiln/ir/builder.h"
#include "kiln/ir/verifier.h"

namespace kiln::interp::testing {

inline std::vector<float> RandomFloats(size_t count, uint32_t seed, float lo = -1.0f,
                                       float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> values(count);
  for (float& v : values) v = dist(rng);
  return values;
}

inline std::vector<int32_t> RandomInts(size_t count, uint32_t seed, int32_t lo, int32_t hi) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(lo, hi);
  std::vector<int32_t> values(count);
  for (int32_t& v : values) v = dist(rng);
  return values;
}

inline std::vector<uint32_t> RandomU32s(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint32_t> values(count);
  for (uint32_t& v : values) v = rng();
  return values;
}

template <typename T>
HostBuffer MakeBuffer(ir::DataType dtype, const std::vector<T>& values) {
  return HostBuffer::FromVector(dtype, {static_cast<int64_t>(values.size())}, values);
}

// An output buffer filled with a poison byte pattern, so a result the kernel
// forgot to write does not pass for a zero.
inline HostBuffer Poisoned(ir::DataType dtype, int64_t count) {
  HostBuffer buffer(dtype, {count});
  for (uint8_t& byte : buffer.bytes) byte = 0xcd;
  return buffer;
}

// The function `builder` built, checked by the IR verifier: the kernels the
// tests run are well formed unless a test says otherwise.
inline ir::Function Verified(const ir::IRBuilder& builder) {
  ir::Function function = builder.Build();
  Status status = ir::Verify(function);
  EXPECT_TRUE(status.ok()) << status;
  return function;
}

template <typename T>
std::vector<T> Contents(const ArgValue& arg) {
  return std::get<HostBuffer>(arg).ToVector<T>();
}

}  // namespace kiln::interp::testing
