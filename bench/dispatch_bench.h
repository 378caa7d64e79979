// The dispatch benchmark: the CPU cost of recording and issuing dispatches
// through kiln's HAL against raw webgpu.h calls, measured in one run.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kiln/hal/device.h"
#include "kiln/support/status.h"

namespace kiln::bench {

struct DispatchBenchOptions {
  uint32_t dispatches = 10000;  // per recorded command buffer
  uint32_t repetitions = 15;    // the median is reported
  uint32_t submits = 1000;      // for the per-submit cost
};

struct DispatchBenchResult {
  std::string device;
  uint32_t dispatches = 0;
  double raw_us_per_dispatch = 0;     // raw webgpu.h: record + finish + submit
  double hal_us_per_dispatch = 0;     // HAL one-shot: record + end + issue
  double replay_us_per_dispatch = 0;  // HAL reusable: issue of a recorded buffer
  double raw_submit_us = 0;           // raw: one submit of one dispatch, waited together
  double hal_submit_us = 0;           // HAL: one submit of a one-dispatch buffer
  // The module runtime: runtime::Kernel::Record of a compiled kiln kernel
  // (planning the call against its metadata, packing its scalars) + end +
  // issue, per dispatch, like hal_us_per_dispatch.
  double runtime_us_per_dispatch = 0;
  double runtime_ratio() const { return runtime_us_per_dispatch / hal_us_per_dispatch; }
  double ratio() const { return hal_us_per_dispatch / raw_us_per_dispatch; }
};

StatusOr<DispatchBenchResult> RunDispatchBench(const std::shared_ptr<hal::Device>& device,
                                               const DispatchBenchOptions& options);

}  // namespace kiln::bench
