// Device buffers and the allocator that pools them by size class.
//
// Every kiln buffer can be bound as storage and copied to and from, so the
// builtin fill and copy shaders and the staging paths work on any of them.
// Freed buffers go back to a pool keyed by (usage, size class) and are
// reused by later allocations of the same class; the pool holds at most its
// capacity (fixed, or by default as many bytes as were ever live at once,
// at least a floor) and can be trimmed, as it is when the device runs out of
// memory. A freed buffer that does not fit takes the place of the buffers
// pooled longest (classes the program may no longer use).
#pragma once

#include <webgpu.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "kiln/support/status.h"

namespace kiln::hal {

class Device;

inline constexpr WGPUBufferUsage kDefaultBufferUsage =
    WGPUBufferUsage_Storage | WGPUBufferUsage_CopySrc | WGPUBufferUsage_CopyDst;

class DeviceBuffer {
 public:
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  WGPUBuffer handle() const { return handle_; }
  // The size asked for; the WebGPU buffer may be larger (its size class).
  uint64_t size() const { return size_; }
  uint64_t allocated_size() const { return allocated_size_; }
  WGPUBufferUsage usage() const { return usage_; }
  // Stable for the buffer's lifetime; distinct between live buffers.
  uint64_t id() const { return id_; }
  // The device that made it: only that device's command buffers, uploads
  // and downloads take it.
  const Device* device() const { return device_.get(); }

 private:
  friend class BufferAllocator;
  DeviceBuffer() = default;

  std::shared_ptr<Device> device_;  // buffers keep their device alive
  WGPUBuffer handle_ = nullptr;
  uint64_t size_ = 0;
  uint64_t allocated_size_ = 0;
  WGPUBufferUsage usage_ = 0;
  uint64_t id_ = 0;
};

using BufferRef = std::shared_ptr<DeviceBuffer>;

struct AllocatorStats {
  uint64_t allocations = 0;  // Allocate calls that succeeded
  uint64_t pool_hits = 0;    // served from the pool
  uint64_t pool_misses = 0;  // needed a new WebGPU buffer
  uint64_t live_buffers = 0;
  uint64_t live_bytes = 0;  // allocated_size of live buffers
  uint64_t pooled_buffers = 0;
  uint64_t pooled_bytes = 0;
  // Live buffers a caller keeps for queue-ordered reuse (CountKept): they
  // and the pool's share its capacity.
  uint64_t kept_bytes = 0;
  uint64_t peak_live_bytes = 0;
  // Allocations the device refused for want of memory that succeeded once
  // the pool's idle buffers were destroyed.
  uint64_t out_of_memory_trims = 0;
  // Idle buffers destroyed to make room for one freed later.
  uint64_t pool_evictions = 0;
};

class BufferAllocator {
 public:
  // `fixed_capacity`: the pool's capacity in bytes; unset, it is automatic:
  // the most bytes live at once so far (peak_live_bytes), at least
  // `automatic_floor`.
  BufferAllocator(Device* device, std::optional<uint64_t> fixed_capacity, uint64_t automatic_floor);
  ~BufferAllocator();

  // A buffer of at least `size` bytes. Zero or beyond the device's
  // maxBufferSize is kInvalidArgument; an allocation the device cannot
  // satisfy is kOutOfMemory, once the pool's idle buffers have been
  // destroyed and it has been tried again. Contents are unspecified (pooled
  // memory).
  StatusOr<BufferRef> Allocate(uint64_t size, WGPUBufferUsage usage = kDefaultBufferUsage);

  // The size class `size` is rounded up to: multiples of 256 bytes up to
  // 4 KiB, then four classes per power of two.
  static uint64_t SizeClass(uint64_t size);
  // The allocated_size of the buffer Allocate gives for `size` bytes (0 <
  // `size` <= maxBufferSize rounded down to a word): its size class, within
  // the device's limit.
  uint64_t AllocatedSize(uint64_t size) const;

  // Hands `buffer`, which its holders are done with, to a new holder as a
  // buffer of `size` bytes (0 < `size` <= its allocated_size; kInvalidArgument
  // otherwise). For queue-ordered reuse: work recorded or submitted earlier
  // may still use the buffer, so the new holder's work must come after it
  // on the device's queue (recorded into the same or a later command
  // buffer, submitted in order); an Upload, which submits at once, must not
  // write it while such work is recorded but not yet submitted.
  static Status Reuse(DeviceBuffer& buffer, uint64_t size);
  // A caller that keeps live buffers for queue-ordered reuse counts their
  // allocated bytes here (`delta` < 0 when it lets go of them): the pool
  // keeps freed buffers only while pooled and kept bytes together fit its
  // capacity. Whether `bytes` more may be kept so.
  void CountKept(int64_t delta);
  bool RoomToKeep(uint64_t bytes) const;
  // The bytes pooled and kept buffers may hold together now.
  uint64_t pool_capacity() const;

  // Makes the next `count` WebGPU buffer creations fail as a device out of
  // memory does (kOutOfMemory), to test the paths that recover from it.
  void FailCreationsForTesting(int count) { failures_for_testing_ = count; }

  AllocatorStats stats() const { return stats_; }
  // Destroys every pooled buffer.
  void Trim();

 private:
  friend class DeviceBuffer;
  void Recycle(DeviceBuffer* buffer);
  // A new WebGPU buffer of `allocated` bytes for a request of `size`.
  Status Create(uint64_t size, uint64_t allocated, WGPUBufferUsage usage, WGPUBuffer& handle);

  Device* device_;
  std::optional<uint64_t> fixed_capacity_;
  uint64_t automatic_floor_;
  int failures_for_testing_ = 0;
  uint64_t next_id_ = 1;
  struct Pooled {
    WGPUBuffer handle;
    uint64_t serial;  // when it was pooled: the pool's oldest make way first
  };
  // Idle buffers by (usage, size class), the longest pooled first.
  std::map<std::pair<WGPUBufferUsage, uint64_t>, std::deque<Pooled>> pool_;
  uint64_t pool_serial_ = 0;
  // Destroys the buffer pooled longest.
  void EvictOldest();
  void Destroy(WGPUBuffer handle);
  AllocatorStats stats_;
};

// Host transfers through mapped staging buffers, synchronous: they return
// once the data is on the device (Upload) or in `out` (Download). Any offset
// and length within the buffer.
// kInvalidArgument "WHAT range [offset, offset + length) is outside the
// buffer of N bytes" unless the range lies inside `buffer`: the one range
// check of the HAL's public calls.
// "[16, 32)", or "[16, 16 + 18446744073709551615)" where the end is past 64 bits.
std::string RangeText(uint64_t offset, uint64_t length);
// That `buffer` is one of `device`'s: kInvalidArgument naming `what` else.
Status CheckOwnBuffer(const Device& device, const DeviceBuffer& buffer, std::string_view what);
Status CheckRange(const DeviceBuffer& buffer, uint64_t offset, uint64_t length,
                  std::string_view what);

// Maps `size` bytes of `buffer` from offset 0 and waits for the mapping:
// the one wait for a mapping callback. `what` names the wait in errors.
Status MapAndWait(Device& device, WGPUBuffer buffer, WGPUMapMode mode, uint64_t size,
                  std::string_view what);

Status Upload(Device& device, const BufferRef& target, uint64_t offset,
              std::span<const uint8_t> data);
Status Download(Device& device, const BufferRef& source, uint64_t offset, std::span<uint8_t> out);

}  // namespace kiln::hal
