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
#include <span>
#include <vector>

#include "kiln/hal/buffer.h"

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
  // The highest value signaled so far, reached or not: a new signal must
  // exceed it (a fence's value only grows).
  uint64_t signaled() const;
  // Whether it was made for `device` (whose queue signals it).
  bool BelongsTo(const Device& device) const { return device_.get() == &device; }
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
// signals it to `signal_value` when the work completes. `binding_table`
// gives a buffer for each binding-table slot the records name (exactly
// CommandBuffer::binding_table_size() of them); a table of the wrong size,
// or a buffer too small or without storage usage for a slot's bindings, is
// an error before anything is issued.
Status Submit(Device& device, CommandBuffer& command_buffer, Fence* fence = nullptr,
              uint64_t signal_value = 0, std::span<const BufferRef> binding_table = {});
// Submit, then wait for the work to complete.
Status SubmitAndWait(Device& device, CommandBuffer& command_buffer,
                     std::chrono::nanoseconds timeout = kInfinite,
                     std::span<const BufferRef> binding_table = {});
// Waits for everything submitted so far.
Status WaitIdle(Device& device, std::chrono::nanoseconds timeout = kInfinite);

}  // namespace kiln::hal
