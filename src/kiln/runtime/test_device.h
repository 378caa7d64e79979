// One device per test process for the runtime's GPU tests, chosen like any
// kiln program ($KILN_IMPL, $KILN_BACKEND), released before the process
// exits (implementations tear their own state down at exit).
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "kiln/hal/device.h"

namespace kiln::runtime::testing {

inline std::shared_ptr<hal::Device>& DeviceSlot() {
  static std::shared_ptr<hal::Device> device;
  return device;
}

class ReleaseDevice : public ::testing::Environment {
 public:
  void TearDown() override { DeviceSlot().reset(); }
};

// The shared device, made (or remade after a loss) on first use; a test
// failure when none can be made.
inline std::shared_ptr<hal::Device> TestDevice() {
  static const auto* const kRelease = ::testing::AddGlobalTestEnvironment(new ReleaseDevice());
  (void)kRelease;
  auto& device = DeviceSlot();
  if (!device || !device->CheckHealthy().ok()) {
    auto created = hal::Device::Create();
    if (!created.ok()) {
      ADD_FAILURE() << created.status();
      return nullptr;
    }
    device = *created;
    std::printf("[ device   ] %s\n", device->Describe().c_str());
  }
  return device;
}

}  // namespace kiln::runtime::testing
