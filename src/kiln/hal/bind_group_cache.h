// A device-wide, bounded cache of bind groups.
//
// Recording the same kernel with the same buffers reuses one bind group
// instead of creating one per dispatch. Entries are keyed by the layout and
// every (buffer, offset, size); the least recently used entry is dropped when
// the cache is full, and entries naming a buffer are dropped when that
// buffer is destroyed. Command buffers hold their own reference to the groups
// they use, so eviction never invalidates recorded work.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "kiln/support/status.h"
#include <webgpu.h>

namespace kiln::hal {

class Device;

struct BindGroupEntry {
  WGPUBuffer buffer = nullptr;
  uint64_t offset = 0;
  uint64_t size = 0;
};

// Owns one reference to a WebGPU bind group.
class BindGroup {
 public:
  BindGroup(Device* device, WGPUBindGroup handle) : device_(device), handle_(handle) {}
  ~BindGroup();
  BindGroup(const BindGroup&) = delete;
  BindGroup& operator=(const BindGroup&) = delete;
  WGPUBindGroup handle() const { return handle_; }

 private:
  Device* device_;
  WGPUBindGroup handle_;
};
using BindGroupRef = std::shared_ptr<BindGroup>;

struct BindGroupCacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t evictions = 0;
  uint64_t size = 0;
};

class BindGroupCache {
 public:
  BindGroupCache(Device* device, size_t capacity);
  ~BindGroupCache();

  // The bind group for `layout` with entries at bindings 0..n-1.
  StatusOr<BindGroupRef> Get(WGPUBindGroupLayout layout, std::span<const BindGroupEntry> entries);
  // Drops every cached group that references `buffer`.
  void Evict(WGPUBuffer buffer);
  void Clear();
  BindGroupCacheStats stats() const;

 private:
  struct KeyHash {
    size_t operator()(const std::vector<uint64_t>& key) const;
  };
  struct Slot {
    BindGroupRef group;
    std::list<std::vector<uint64_t>>::iterator lru;
  };

  Device* device_;
  size_t capacity_;
  std::list<std::vector<uint64_t>> lru_;  // most recent at the front
  std::unordered_map<std::vector<uint64_t>, Slot, KeyHash> map_;
  BindGroupCacheStats stats_;
  std::vector<uint64_t> scratch_key_;
};

}  // namespace kiln::hal
