#include "kiln/hal/queue.h"

#include <algorithm>

#include "kiln/hal/command_buffer.h"

namespace kiln::hal {

struct Fence::State {
  uint64_t completed = 0;
  uint64_t signaled = 0;  // the highest value signaled, reached or not
  struct Pending {
    uint64_t value;
    WGPUFuture future;
    std::shared_ptr<bool> done;
  };
  std::vector<Pending> pending;
};

namespace {

struct WorkDone {
  std::shared_ptr<Fence::State> state;
  std::shared_ptr<bool> done;
  uint64_t value;
  void Complete() {
    state->completed = std::max(state->completed, value);
    *done = true;
    delete this;
  }
};

void OnWorkDone(WGPUQueueWorkDoneStatus, WGPUStringView, void* ud1, void*) {
  static_cast<WorkDone*>(ud1)->Complete();
}

}  // namespace

std::shared_ptr<Fence> Fence::Create(std::shared_ptr<Device> device, uint64_t initial) {
  std::shared_ptr<Fence> fence(new Fence());
  fence->device_ = std::move(device);
  fence->state_ = std::make_shared<State>();
  fence->state_->completed = initial;
  fence->state_->signaled = initial;
  return fence;
}

Fence::~Fence() {
  // Callbacks still pending own their WorkDone records and the shared state;
  // they complete (or are cancelled) when the device processes events.
}

uint64_t Fence::value() const { return state_->completed; }

uint64_t Fence::signaled() const {
  return state_->signaled;  // (completions only reach values signaled)
}

Status Fence::Signal(uint64_t value) {
  KILN_RETURN_IF_ERROR(device_->CheckHealthy());
  if (value <= signaled()) {
    return InvalidArgument("fence signal value ", value, " does not exceed the value ", signaled(),
                           " already signaled (a fence's value only grows)");
  }
  auto* record = new WorkDone{state_, std::make_shared<bool>(false), value};
  WGPUQueueWorkDoneCallbackInfo cb = {};
  cb.mode = WGPUCallbackMode_AllowProcessEvents;
  cb.callback = &OnWorkDone;
  cb.userdata1 = record;
  std::shared_ptr<bool> done = record->done;
  WGPUFuture f = device_->procs().QueueOnSubmittedWorkDone(device_->queue(), cb);
  state_->pending.push_back({value, f, std::move(done)});
  state_->signaled = value;
  return Status();
}

Status Fence::Wait(uint64_t value, std::chrono::nanoseconds timeout) {
  const auto start = Clock::now();
  auto& pending = state_->pending;
  while (state_->completed < value) {
    auto it = std::find_if(pending.begin(), pending.end(),
                           [&](const State::Pending& p) { return p.value >= value && !*p.done; });
    if (it == pending.end()) {
      KILN_RETURN_IF_ERROR(device_->CheckHealthy());
      return FailedPrecondition("fence wait for value ", value,
                                " that no submission signals (value is ", state_->completed, ")");
    }
    auto remaining = timeout;
    if (timeout != kInfinite) {
      remaining = timeout - std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start);
      if (remaining.count() < 0) remaining = std::chrono::nanoseconds(0);
    }
    State::Pending p = *it;
    KILN_RETURN_IF_ERROR(device_->WaitFuture(p.future, *p.done, remaining, "fence wait"));
  }
  pending.erase(std::remove_if(pending.begin(), pending.end(),
                               [](const State::Pending& p) { return *p.done; }),
                pending.end());
  return device_->CheckHealthy();
}

Status Submit(Device& device, CommandBuffer& command_buffer, Fence* fence, uint64_t signal_value,
              std::span<const BufferRef> binding_table) {
  KILN_RETURN_IF_ERROR(device.CheckHealthy());
  if (command_buffer.device_.get() != &device) {
    return InvalidArgument("command buffer '", command_buffer.label(),
                           "' was recorded for another device");
  }
  if (!command_buffer.ended_) {
    return FailedPrecondition("command buffer '", command_buffer.label(),
                              "' is still recording: call End() before submitting");
  }
  if (command_buffer.mode_ == CommandBufferMode::kOneShot && command_buffer.issued_) {
    return FailedPrecondition("one-shot command buffer '", command_buffer.label(),
                              "' was already submitted");
  }
  if (fence && !fence->BelongsTo(device)) {
    return InvalidArgument(
        "the fence was made for another device (fences are one device's; "
        "this is ",
        device.Describe(), ")");
  }
  if (fence && signal_value <= fence->signaled()) {
    return InvalidArgument("fence signal value ", signal_value, " does not exceed the value ",
                           fence->signaled(), " already signaled (a fence's value only grows)");
  }
  KILN_RETURN_IF_ERROR(command_buffer.ValidateTable(binding_table));
  KILN_RETURN_IF_ERROR(command_buffer.Issue(binding_table));
  if (fence) KILN_RETURN_IF_ERROR(fence->Signal(signal_value));
  return Status();
}

Status SubmitAndWait(Device& device, CommandBuffer& command_buffer,
                     std::chrono::nanoseconds timeout, std::span<const BufferRef> binding_table) {
  auto fence = Fence::Create(device.shared_from_this());
  KILN_RETURN_IF_ERROR(Submit(device, command_buffer, fence.get(), 1, binding_table));
  return fence->Wait(1, timeout);
}

Status WaitIdle(Device& device, std::chrono::nanoseconds timeout) {
  auto fence = Fence::Create(device.shared_from_this());
  KILN_RETURN_IF_ERROR(fence->Signal(1));
  return fence->Wait(1, timeout);
}

}  // namespace kiln::hal
