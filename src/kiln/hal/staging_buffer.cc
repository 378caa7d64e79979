#include "kiln/hal/staging_buffer.h"

#include <algorithm>

#include "kiln/hal/device.h"

namespace kiln::hal {

StatusOr<std::unique_ptr<StagingBuffer>> StagingBuffer::Create(Device* device, uint32_t capacity) {
  std::unique_ptr<StagingBuffer> s(new StagingBuffer());
  s->device_ = device;
  s->alignment_ = std::max<uint32_t>(device->limits().min_uniform_buffer_offset_alignment, 16);
  s->max_block_size_ = static_cast<uint32_t>(
      std::min<uint64_t>(4096, device->limits().max_uniform_buffer_binding_size));
  if (capacity < s->max_block_size_) {
    return InvalidArgument("staging capacity of ", capacity, " bytes is below the ",
                           s->max_block_size_, "-byte largest constants block");
  }
  s->capacity_ = capacity / s->alignment_ * s->alignment_;
  WGPUBufferDescriptor desc = {};
  desc.label = ToStringView("kiln uniform staging");
  desc.usage = WGPUBufferUsage_Uniform | WGPUBufferUsage_CopyDst;
  desc.size = s->capacity_;
  KILN_RETURN_IF_ERROR(device->WithErrorScopes(
      "creating the uniform staging buffer", StatusCode::kInternal,
      [&] { s->handle_ = device->procs().DeviceCreateBuffer(device->handle(), &desc); }));
  return s;
}

StagingBuffer::~StagingBuffer() {
  if (handle_) {
    device_->procs().BufferDestroy(handle_);
    device_->procs().BufferRelease(handle_);
  }
}

}  // namespace kiln::hal
