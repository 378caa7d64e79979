#include "kiln/hal/bind_group_cache.h"

#include "kiln/hal/device.h"

namespace kiln::hal {

BindGroup::~BindGroup() { device_->procs().BindGroupRelease(handle_); }

BindGroupCache::BindGroupCache(Device* device, size_t capacity)
    : device_(device), capacity_(capacity == 0 ? 1 : capacity) {}

BindGroupCache::~BindGroupCache() { Clear(); }

size_t BindGroupCache::KeyHash::operator()(const std::vector<uint64_t>& key) const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the words
  for (uint64_t w : key) {
    h ^= w;
    h *= 1099511628211ull;
  }
  return static_cast<size_t>(h ^ (h >> 32));
}

StatusOr<BindGroupRef> BindGroupCache::Get(WGPUBindGroupLayout layout,
                                           std::span<const BindGroupEntry> entries) {
  scratch_key_.clear();
  scratch_key_.push_back(reinterpret_cast<uint64_t>(layout));
  for (const BindGroupEntry& e : entries) {
    scratch_key_.push_back(reinterpret_cast<uint64_t>(e.buffer));
    scratch_key_.push_back(e.offset);
    scratch_key_.push_back(e.size);
  }
  if (auto it = map_.find(scratch_key_); it != map_.end()) {
    stats_.hits++;
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return it->second.group;
  }
  stats_.misses++;
  std::vector<WGPUBindGroupEntry> native(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    native[i] = {};
    native[i].binding = static_cast<uint32_t>(i);
    native[i].buffer = entries[i].buffer;
    native[i].offset = entries[i].offset;
    native[i].size = entries[i].size;
  }
  WGPUBindGroupDescriptor desc = {};
  desc.layout = layout;
  desc.entryCount = native.size();
  desc.entries = native.data();
  WGPUBindGroup handle = nullptr;
  KILN_RETURN_IF_ERROR(device_->WithErrorScopes(
      "creating a bind group", StatusCode::kInvalidArgument,
      [&] { handle = device_->procs().DeviceCreateBindGroup(device_->handle(), &desc); }));
  auto group = std::make_shared<BindGroup>(device_, handle);
  if (map_.size() >= capacity_) {
    map_.erase(lru_.back());
    lru_.pop_back();
    stats_.evictions++;
  }
  lru_.push_front(scratch_key_);
  map_.emplace(scratch_key_, Slot{group, lru_.begin()});
  stats_.size = map_.size();
  return group;
}

void BindGroupCache::Evict(WGPUBuffer buffer) {
  const uint64_t b = reinterpret_cast<uint64_t>(buffer);
  for (auto it = lru_.begin(); it != lru_.end();) {
    bool uses = false;
    for (size_t i = 1; i < it->size(); i += 3) uses |= (*it)[i] == b;
    if (uses) {
      map_.erase(*it);
      it = lru_.erase(it);
      stats_.evictions++;
    } else {
      ++it;
    }
  }
  stats_.size = map_.size();
}

void BindGroupCache::Clear() {
  map_.clear();
  lru_.clear();
  stats_.size = 0;
}

BindGroupCacheStats BindGroupCache::stats() const { return stats_; }

}  // namespace kiln::hal
