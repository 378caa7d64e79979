// What the operator device tests share: the test device and the target
// built from it, fresh random inputs per draw, and a check of kernels
// against the interpreter (check::RunAndCheck).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kiln/check/check.h"
#include "kiln/codegen/wgsl_codegen.h"
#include "kiln/hal/device.h"
#include "kiln/ir/printer.h"
#include "kiln/ops/ops.h"
#include "kiln/runtime/module.h"
#include "kiln/runtime/test_device.h"

namespace kiln::ops::testing {

// The flat index into a tensor of `shape` (broadcast to `out`, numpy's
// rules) of the element that output element `flat` of `out` reads.
inline int64_t BroadcastSource(const Shape& shape, const Shape& out, int64_t flat) {
  int64_t index = 0, stride = 1;
  for (int d = static_cast<int>(out.size()) - 1; d >= 0; --d) {
    const int64_t coord = flat % out[d];
    flat /= out[d];
    const int sd = d - static_cast<int>(out.size() - shape.size());
    if (sd < 0) continue;
    if (shape[sd] != 1) index += coord * stride;
    stride *= shape[sd];
  }
  return index;
}

class OpsDeviceFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    device_ = runtime::testing::TestDevice();
    ASSERT_TRUE(device_);
    target_.limits = runtime::TargetLimitsOf(*device_);
    target_.shader_f16 = device_->HasFeature(hal::Feature::kShaderF16);
    target_.subgroups = device_->HasFeature(hal::Feature::kSubgroups);
    target_.implementation = device_->impl().name();
    target_.trusted = device_->trusted();
  }

  // Values in [lo, hi), a fresh stream per call (seeded from gtest's seed).
  std::vector<float> Random(int64_t n, float lo = -1.0f, float hi = 1.0f) {
    std::mt19937 rng(NextSeed());
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
  }
  std::vector<int32_t> RandomInts(int64_t n, int32_t lo, int32_t hi) {
    std::mt19937 rng(NextSeed());
    std::uniform_int_distribution<int32_t> dist(lo, hi);
    std::vector<int32_t> v(n);
    for (int32_t& x : v) x = dist(rng);
    return v;
  }

  // `functions` compiled as one module for the device and loaded.
  StatusOr<std::unique_ptr<runtime::LoadedModule>> Load(
      const std::vector<ir::Function>& functions) {
    KILN_ASSIGN_OR_RETURN(
        codegen::CompiledModule compiled,
        codegen::CompileModule(ir::Module{functions}, check::CompileOptionsFor(*device_)));
    return runtime::LoadedModule::Load(device_, std::move(compiled));
  }

  // Compiles `functions` as one module and checks each against the
  // interpreter on the checker's random inputs (f16 kernels compute the
  // same way there).
  void CheckAgainstInterpreter(const std::vector<ir::Function>& functions,
                               const check::CheckOptions& options = {}) {
    auto loaded = Load(functions);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    for (const ir::Function& f : functions) {
      SCOPED_TRACE(ir::Print(f));
      auto kernel = (*loaded)->Find(f.name());
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      auto checked = check::RunAndCheck(**kernel, f, options);
      ASSERT_TRUE(checked.ok()) << checked.status();
      EXPECT_TRUE(checked->pass) << f.name() << " seed " << checked->seed << "\n"
                                 << checked->Summary();
    }
  }

  // Compiles `functions` as one module and calls them in order. Each
  // buffer parameter is the entry of `tensors` of its name (elements of 4
  // bytes: floats or words): those in `inputs` are uploaded as they are,
  // every other one starts as `poison`'s bits (sized by the entry) and is
  // read back into `tensors` afterwards. Each function is also checked
  // against the interpreter where `differential`.
  template <typename Element>
  void RunInOrder(const std::vector<ir::Function>& functions,
                  const std::vector<std::string>& inputs,
                  std::map<std::string, std::vector<Element>>& tensors, bool differential,
                  uint32_t poison) {
    static_assert(sizeof(Element) == 4);
    auto loaded = Load(functions);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    auto is_input = [&](const std::string& n) {
      return std::find(inputs.begin(), inputs.end(), n) != inputs.end();
    };
    std::map<std::string, hal::BufferRef> buffers;
    for (auto& [name, data] : tensors) {
      if (!is_input(name)) std::fill(data.begin(), data.end(), std::bit_cast<Element>(poison));
      auto b = device_->allocator().Allocate(data.size() * 4);
      ASSERT_TRUE(b.ok()) << b.status();
      Status up = hal::Upload(*device_, *b, 0,
                              {reinterpret_cast<const uint8_t*>(data.data()), data.size() * 4});
      ASSERT_TRUE(up.ok()) << up;
      buffers[name] = *b;
    }
    for (const ir::Function& f : functions) {
      auto kernel = (*loaded)->Find(f.name());
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      std::vector<runtime::Arg> args;
      for (const ir::Param& p : f.params()) {
        ASSERT_TRUE(p.is_buffer()) << p.name();
        ASSERT_TRUE(buffers.count(p.name())) << p.name();
        args.push_back(runtime::Arg::Buffer(buffers[p.name()]));
      }
      Status called = (*kernel)->Call(args);
      ASSERT_TRUE(called.ok()) << called;
      if (differential) {
        auto checked = check::RunAndCheck(**kernel, f, check::CheckOptions{});
        ASSERT_TRUE(checked.ok()) << checked.status();
        EXPECT_TRUE(checked->pass) << f.name() << " seed " << checked->seed << "\n"
                                   << checked->Summary();
      }
    }
    for (auto& [name, data] : tensors) {
      if (is_input(name)) continue;
      Status down = hal::Download(*device_, buffers[name], 0,
                                  {reinterpret_cast<uint8_t*>(data.data()), data.size() * 4});
      ASSERT_TRUE(down.ok()) << down;
    }
  }

  std::shared_ptr<hal::Device> device_;
  Target target_;

 private:
  uint32_t NextSeed() {
    return ::testing::UnitTest::GetInstance()->random_seed() + 7919 * ++draws_;
  }
  int draws_ = 0;
};

}  // namespace kiln::ops::testing
