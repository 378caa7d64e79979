#include "kiln/hal/buffer.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "kiln/hal/bind_group_cache.h"
#include "kiln/hal/command_buffer.h"
#include "kiln/hal/device.h"
#include "kiln/hal/queue.h"

namespace kiln::hal {

DeviceBuffer::~DeviceBuffer() {
  device_->allocator().Recycle(this);
}

BufferAllocator::BufferAllocator(Device* device, std::optional<uint64_t> fixed_capacity,
                                 uint64_t automatic_floor)
    : device_(device), fixed_capacity_(fixed_capacity), automatic_floor_(automatic_floor) {}

BufferAllocator::~BufferAllocator() {
  Trim();
}

uint64_t BufferAllocator::SizeClass(uint64_t size) {
  if (size <= 4096) return (size + 255) / 256 * 256;
  // Four classes per power of two: 4 KiB, 5 KiB, 6 KiB, 7 KiB, 8 KiB, 10 KiB...
  uint64_t pow2 = 1;
  while (pow2 * 2 <= size) pow2 *= 2;
  uint64_t step = pow2 / 4;
  return (size + step - 1) / step * step;
}

uint64_t BufferAllocator::AllocatedSize(uint64_t size) const {
  const uint64_t largest = device_->limits().max_buffer_size / 4 * 4;
  return std::max<uint64_t>(std::min(SizeClass(size), largest), (size + 3) / 4 * 4);
}

Status BufferAllocator::Reuse(DeviceBuffer& buffer, uint64_t size) {
  if (size == 0 || size > buffer.allocated_size_) {
    return InvalidArgument("a buffer of ", buffer.allocated_size_,
                           " bytes cannot be reused as one of ", size, " bytes");
  }
  buffer.size_ = size;
  return Status();
}

void BufferAllocator::CountKept(int64_t delta) {
  stats_.kept_bytes += static_cast<uint64_t>(delta);
}

uint64_t BufferAllocator::pool_capacity() const {
  // A program that once held N bytes live will likely hold them again (the
  // next step of a loop): the pool keeps up to that many, so that each step
  // makes no buffer anew. Allocate gives them back when the device runs out.
  return fixed_capacity_ ? *fixed_capacity_ : std::max(automatic_floor_, stats_.peak_live_bytes);
}

bool BufferAllocator::RoomToKeep(uint64_t bytes) const {
  const uint64_t held = stats_.pooled_bytes + stats_.kept_bytes;
  const uint64_t capacity = pool_capacity();
  return held <= capacity && bytes <= capacity - held;
}

Status BufferAllocator::Create(uint64_t size, uint64_t allocated, WGPUBufferUsage usage,
                               WGPUBuffer& handle) {
  const std::string what = StrCat("allocating a buffer of ", size, " bytes");
  if (failures_for_testing_ > 0) {
    --failures_for_testing_;
    return OutOfMemory(what, ": out of memory (a failure made for testing)");
  }
  WGPUBufferDescriptor desc = {};
  desc.label = ToStringView("kiln buffer");
  desc.usage = usage;
  desc.size = allocated;
  Status s = device_->WithErrorScopes(what, StatusCode::kInvalidArgument, [&] {
    handle = device_->procs().DeviceCreateBuffer(device_->handle(), &desc);
  });
  if (s.ok() && !handle) s = OutOfMemory(what, " failed");
  if (!s.ok() && handle) {
    device_->procs().BufferDestroy(handle);
    device_->procs().BufferRelease(handle);
    handle = nullptr;
  }
  return s;
}

StatusOr<BufferRef> BufferAllocator::Allocate(uint64_t size, WGPUBufferUsage usage) {
  KILN_RETURN_IF_ERROR(device_->CheckHealthy());
  if (size == 0) return InvalidArgument("buffer size must be greater than zero");
  const uint64_t max = device_->limits().max_buffer_size;
  if (size > max) {
    return InvalidArgument("buffer of ", size, " bytes exceeds the device's maxBufferSize of ", max,
                           " bytes");
  }
  // Buffers hold whole 4-byte words (storage bindings and copies need
  // them), so the largest is maxBufferSize rounded down to a word.
  const uint64_t largest = max / 4 * 4;
  if (size > largest) {
    return InvalidArgument("buffer of ", size, " bytes exceeds ", largest,
                           " bytes, the device's maxBufferSize of ", max,
                           " bytes in whole 4-byte words");
  }
  const uint64_t allocated = AllocatedSize(size);
  auto key = std::make_pair(usage, allocated);
  WGPUBuffer handle = nullptr;
  if (auto it = pool_.find(key); it != pool_.end() && !it->second.empty()) {
    handle = it->second.back().handle;
    it->second.pop_back();
    stats_.pool_hits++;
    stats_.pooled_buffers--;
    stats_.pooled_bytes -= allocated;
  } else {
    Status made = Create(size, allocated, usage, handle);
    if (made.code() == StatusCode::kOutOfMemory && stats_.pooled_bytes > 0) {
      // Idle buffers of other classes hold memory the device needs now.
      Trim();
      device_->FreeDestroyed();
      made = Create(size, allocated, usage, handle);
      if (made.ok()) stats_.out_of_memory_trims++;
    }
    KILN_RETURN_IF_ERROR(made);
    stats_.pool_misses++;
  }
  BufferRef buffer(new DeviceBuffer());
  buffer->device_ = device_->shared_from_this();
  buffer->handle_ = handle;
  buffer->size_ = size;
  buffer->allocated_size_ = allocated;
  buffer->usage_ = usage;
  buffer->id_ = next_id_++;
  stats_.allocations++;
  stats_.live_buffers++;
  stats_.live_bytes += allocated;
  stats_.peak_live_bytes = std::max(stats_.peak_live_bytes, stats_.live_bytes);
  return buffer;
}

void BufferAllocator::Recycle(DeviceBuffer* buffer) {
  const uint64_t size = buffer->allocated_size_;
  stats_.live_buffers--;
  stats_.live_bytes -= size;
  if (device_->CheckHealthy().ok()) {
    // A buffer just freed is likelier to be asked for again than those idle
    // longest: where destroying them makes room (kept buffers are not
    // theirs to give), they make way for it.
    const uint64_t capacity = pool_capacity();
    if (stats_.kept_bytes <= capacity && size <= capacity - stats_.kept_bytes) {
      while (!RoomToKeep(size) && stats_.pooled_buffers > 0) EvictOldest();
    }
    if (RoomToKeep(size)) {
      pool_[{buffer->usage_, size}].push_back({buffer->handle_, ++pool_serial_});
      stats_.pooled_buffers++;
      stats_.pooled_bytes += size;
      return;
    }
  }
  Destroy(buffer->handle_);
}

void BufferAllocator::EvictOldest() {
  auto oldest = pool_.end();
  for (auto it = pool_.begin(); it != pool_.end(); ++it) {
    if (!it->second.empty() &&
        (oldest == pool_.end() || it->second.front().serial < oldest->second.front().serial)) {
      oldest = it;
    }
  }
  if (oldest == pool_.end()) return;
  Destroy(oldest->second.front().handle);
  oldest->second.pop_front();
  stats_.pooled_buffers--;
  stats_.pooled_bytes -= oldest->first.second;
  stats_.pool_evictions++;
}

void BufferAllocator::Destroy(WGPUBuffer handle) {
  device_->bind_group_cache().Evict(handle);
  device_->procs().BufferDestroy(handle);
  device_->procs().BufferRelease(handle);
}

void BufferAllocator::Trim() {
  for (auto& [key, handles] : pool_) {
    for (const Pooled& p : handles) Destroy(p.handle);
  }
  pool_.clear();
  stats_.pooled_buffers = 0;
  stats_.pooled_bytes = 0;
}

std::string RangeText(uint64_t offset, uint64_t length) {
  if (length > UINT64_MAX - offset) return StrCat("[", offset, ", ", offset, " + ", length, ")");
  return StrCat("[", offset, ", ", offset + length, ")");
}

Status CheckOwnBuffer(const Device& device, const DeviceBuffer& buffer, std::string_view what) {
  if (buffer.device() != &device) {
    return InvalidArgument(what, " belongs to another device (buffers are one device's; this is ",
                           device.Describe(), ")");
  }
  return Status();
}

Status CheckRange(const DeviceBuffer& buffer, uint64_t offset, uint64_t length,
                  std::string_view what) {
  if (offset > buffer.size() || length > buffer.size() - offset) {
    return InvalidArgument(what, " range ", RangeText(offset, length), " is outside the buffer of ",
                           buffer.size(), " bytes");
  }
  return Status();
}

namespace {

struct MapWait {
  bool done = false;
  WGPUMapAsyncStatus status = WGPUMapAsyncStatus_Error;
  std::string message;
};

}  // namespace

Status MapAndWait(Device& device, WGPUBuffer buffer, WGPUMapMode mode, uint64_t size,
                  std::string_view what) {
  MapWait wait;
  WGPUBufferMapCallbackInfo cb = {};
  cb.mode = WGPUCallbackMode_AllowProcessEvents;
  cb.callback = [](WGPUMapAsyncStatus status, WGPUStringView message, void* ud1, void*) {
    auto* w = static_cast<MapWait*>(ud1);
    w->status = status;
    w->message = FromStringView(message);
    w->done = true;
  };
  cb.userdata1 = &wait;
  WGPUFuture f = device.procs().BufferMapAsync(buffer, mode, 0, size, cb);
  KILN_RETURN_IF_ERROR(device.WaitFuture(f, wait.done, kInfinite, what));
  if (wait.status != WGPUMapAsyncStatus_Success) {
    KILN_RETURN_IF_ERROR(device.CheckHealthy());
    return Internal(what, " failed: ", wait.message);
  }
  return Status();
}

Status Upload(Device& device, const BufferRef& target, uint64_t offset,
              std::span<const uint8_t> data) {
  if (!target) return InvalidArgument("upload: no target buffer");
  KILN_RETURN_IF_ERROR(CheckOwnBuffer(device, *target, "upload: the target buffer"));
  KILN_RETURN_IF_ERROR(CheckRange(*target, offset, data.size(), "upload:"));
  if (data.empty()) return Status();
  // Aligned bytes are copied in; others placed by the copy shader.
  if (offset % 4 == 0 && data.size() % 4 == 0) {
    if (!(target->usage() & WGPUBufferUsage_CopyDst)) {
      return InvalidArgument("upload: the target buffer was not created with copy-dst usage");
    }
  } else if (!(target->usage() & WGPUBufferUsage_Storage)) {
    return InvalidArgument("upload: an unaligned upload needs a buffer with storage usage");
  }
  const uint64_t staged = (data.size() + 3) / 4 * 4;
  KILN_ASSIGN_OR_RETURN(
      BufferRef staging,
      device.allocator().Allocate(staged, WGPUBufferUsage_MapWrite | WGPUBufferUsage_CopySrc));
  KILN_RETURN_IF_ERROR(
      MapAndWait(device, staging->handle(), WGPUMapMode_Write, staged, "mapping a staging buffer"));
  void* dst = device.procs().BufferGetMappedRange(staging->handle(), 0, staged);
  if (!dst) return Internal("upload: the staging buffer has no mapped range");
  std::memcpy(dst, data.data(), data.size());
  device.procs().BufferUnmap(staging->handle());

  KILN_ASSIGN_OR_RETURN(
      auto cmd, CommandBuffer::Create(device.shared_from_this(), CommandBufferMode::kOneShot));
  if (offset % 4 == 0 && data.size() % 4 == 0) {
    KILN_RETURN_IF_ERROR(cmd->CopyBuffer(staging, 0, target, offset, data.size()));
  } else {
    // Mappable buffers cannot be storage buffers, so unaligned uploads land
    // in a storage buffer first and the builtin copy shader places the bytes.
    KILN_ASSIGN_OR_RETURN(BufferRef bounce, device.allocator().Allocate(staged));
    KILN_RETURN_IF_ERROR(cmd->CopyBuffer(staging, 0, bounce, 0, staged));
    KILN_RETURN_IF_ERROR(cmd->CopyBuffer(bounce, 0, target, offset, data.size()));
  }
  KILN_RETURN_IF_ERROR(cmd->End());
  return SubmitAndWait(device, *cmd).WithContext("upload");
}

Status Download(Device& device, const BufferRef& source, uint64_t offset, std::span<uint8_t> out) {
  if (!source) return InvalidArgument("download: no source buffer");
  KILN_RETURN_IF_ERROR(CheckOwnBuffer(device, *source, "download: the source buffer"));
  KILN_RETURN_IF_ERROR(CheckRange(*source, offset, out.size(), "download:"));
  if (out.empty()) return Status();
  if (!(source->usage() & WGPUBufferUsage_CopySrc)) {
    return InvalidArgument("download: the source buffer was not created with copy-src usage");
  }
  // Copy the 4-byte aligned range around the request; the buffer's
  // allocation is a multiple of 4 bytes, so the range stays inside it.
  const uint64_t begin = offset / 4 * 4;
  const uint64_t end = (offset + out.size() + 3) / 4 * 4;
  KILN_ASSIGN_OR_RETURN(
      BufferRef staging,
      device.allocator().Allocate(end - begin, WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst));
  KILN_ASSIGN_OR_RETURN(
      auto cmd, CommandBuffer::Create(device.shared_from_this(), CommandBufferMode::kOneShot));
  KILN_RETURN_IF_ERROR(cmd->CopyBufferUnchecked(source, begin, staging, 0, end - begin));
  KILN_RETURN_IF_ERROR(cmd->End());
  KILN_RETURN_IF_ERROR(SubmitAndWait(device, *cmd).WithContext("download"));
  KILN_RETURN_IF_ERROR(MapAndWait(device, staging->handle(), WGPUMapMode_Read, end - begin,
                                  "mapping a staging buffer"));
  const void* src = device.procs().BufferGetConstMappedRange(staging->handle(), 0, end - begin);
  if (!src) return Internal("download: the staging buffer has no mapped range");
  std::memcpy(out.data(), static_cast<const uint8_t*>(src) + (offset - begin), out.size());
  device.procs().BufferUnmap(staging->handle());
  return Status();
}

}  // namespace kiln::hal
