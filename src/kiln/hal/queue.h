// Submission and timeline fences.
//
// Submit issues a command buffer's segments to the device queue in order and
// optionally signals a fence to a value when the GPU has finished them. A
// fence's value only grows; Wait blocks until it reaches a value or the
// timeout passes (kDeadlineExceeded), and reports a lost device or an error
// the implementation raised meanwhile.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "kiln/hal/device.h"
#include "kiln/support/status.h"

namespace kiln::hal {

class CommandBuffer;

class Fence {
 public:
  static std::shared_ptr<Fence> Create(std::shared_ptr<Device> device, uint64_t initial = 0);
  ~Fence();

  // The highest value the GPU has reached, as of the last event processing.
  uint64_t value() const;
  Status Wait(uint64_t value, std::chrono::nanoseconds timeout = kInfinite);
  // Signals `value` once all work submitted so far has completed.
  Status Signal(uint64_t value);

  struct State;

 private:
  Fence() = default;
  std::shared_ptr<Device> device_;
  std::shared_ptr<State> state_;
};

// Issues `command_buffer` (ended; a one-shot one only once). With a fence,
// signals it to `signal_value` when the work completes.
Status Submit(Device& device, CommandBuffer& command_buffer, Fence* fence = nullptr,
              uint64_t signal_value = 0);
// Submit, then wait for the work to complete.
Status SubmitAndWait(Device& device, CommandBuffer& command_buffer,
                     std::chrono::nanoseconds timeout = kInfinite);
// Waits for everything submitted so far.
Status WaitIdle(Device& device, std::chrono::nanoseconds timeout = kInfinite);

}  // namespace kiln::hal
