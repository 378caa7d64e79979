// The device-wide uniform buffer kernels' constants are staged through.
//
// A command buffer packs each dispatch's constants into a host-side window at
// offsets aligned to minUniformBufferOffsetAlignment and binds this buffer
// with a dynamic offset, so no buffer or bind group is created per dispatch.
// Before each window's commands are submitted, the window's bytes are written
// into this buffer with a queue write; queue order makes sharing one buffer
// between command buffers safe. When a window fills, the command buffer
// closes it and starts a new one (flush and retry).
#pragma once

#include <cstdint>
#include <memory>

#include "kiln/support/status.h"
#include <webgpu.h>

namespace kiln::hal {

class Device;

class StagingBuffer {
 public:
  static StatusOr<std::unique_ptr<StagingBuffer>> Create(Device* device, uint32_t capacity);
  ~StagingBuffer();

  WGPUBuffer handle() const { return handle_; }
  uint32_t capacity() const { return capacity_; }
  uint32_t alignment() const { return alignment_; }
  // Bytes one dispatch's constants binding spans (the largest constants
  // block any kernel may use).
  uint32_t max_block_size() const { return max_block_size_; }

 private:
  StagingBuffer() = default;
  Device* device_ = nullptr;
  WGPUBuffer handle_ = nullptr;
  uint32_t capacity_ = 0;
  uint32_t alignment_ = 256;
  uint32_t max_block_size_ = 0;
};

}  // namespace kiln::hal
