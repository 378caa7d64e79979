// Issuing a recorded command buffer: replays its records into WebGPU
// encoders, one submission per execute segment. Records were validated when
// they were made, so nothing here checks user input.
#include <algorithm>
#include <cstring>
#include <variant>

#include "kiln/hal/command_buffer.h"
#include "kiln/hal/command_buffer_validation.h"
#include "kiln/hal/device.h"
#include "kiln/hal/staging_buffer.h"

namespace kiln::hal {

class CommandEncoderReplay {
 public:
  explicit CommandEncoderReplay(CommandBuffer& cb) : cb_(cb), p_(cb.device_->procs()) {}

  void Execute(const CommandBuffer::Segment& segment) {
    Device& device = *cb_.device_;
    if (!segment.constants.empty()) {
      p_.QueueWriteBuffer(device.queue(), device.staging().handle(), 0, segment.constants.data(),
                          segment.constants.size());
    }
    WGPUCommandEncoderDescriptor ed = {};
    ed.label = ToStringView(cb_.options_.label);
    encoder_ = p_.DeviceCreateCommandEncoder(device.handle(), &ed);
    // Debug groups left open by the previous segment continue here.
    for (uint32_t name : open_groups_) {
      p_.CommandEncoderPushDebugGroup(encoder_, ToStringView(cb_.names_[name]));
    }
    for (size_t i = 0; i < segment.command_count; ++i) {
      Encode(cb_.commands_[segment.first_command + i]);
    }
    EndPass();
    for (size_t i = 0; i < open_groups_.size(); ++i) p_.CommandEncoderPopDebugGroup(encoder_);
    if (last_ && !cb_.query_sets_.empty()) ResolveProfile();
    WGPUCommandBuffer commands = p_.CommandEncoderFinish(encoder_, nullptr);
    p_.QueueSubmit(device.queue(), 1, &commands);
    p_.CommandBufferRelease(commands);
    p_.CommandEncoderRelease(encoder_);
    encoder_ = nullptr;
  }

  void set_last(bool last) { last_ = last; }

  // Profiling when the last segment is a write: resolve in a segment of its own.
  void ResolveAlone() {
    Device& device = *cb_.device_;
    encoder_ = p_.DeviceCreateCommandEncoder(device.handle(), nullptr);
    ResolveProfile();
    WGPUCommandBuffer commands = p_.CommandEncoderFinish(encoder_, nullptr);
    p_.QueueSubmit(device.queue(), 1, &commands);
    p_.CommandBufferRelease(commands);
    p_.CommandEncoderRelease(encoder_);
    encoder_ = nullptr;
  }

 private:
  void BeginPass(const WGPUPassTimestampWrites* timestamps) {
    WGPUComputePassDescriptor pd = {};
    pd.timestampWrites = timestamps;
    pass_ = p_.CommandEncoderBeginComputePass(encoder_, &pd);
    pipeline_ = nullptr;
    bind_group_ = nullptr;
    dynamic_offset_ = ~0u;
  }

  void EndPass() {
    if (!pass_) return;
    p_.ComputePassEncoderEnd(pass_);
    p_.ComputePassEncoderRelease(pass_);
    pass_ = nullptr;
  }

  void Encode(const CommandBuffer::Record& record) {
    std::visit([&](const auto& r) { Encode(r); }, record);
  }

  void Encode(const CommandBuffer::DispatchRecord& c) {
    WGPUPassTimestampWrites timestamps = {};
    if (!cb_.query_sets_.empty()) {
      // Core WebGPU times passes, not dispatches: one pass each.
      EndPass();
      const uint32_t in_set = profiled_ % CommandBuffer::kTimedPerQuerySet;
      timestamps.querySet = cb_.query_sets_[profiled_ / CommandBuffer::kTimedPerQuerySet];
      timestamps.beginningOfPassWriteIndex = in_set * 2;
      timestamps.endOfPassWriteIndex = in_set * 2 + 1;
      ++profiled_;
      BeginPass(&timestamps);
    } else if (!pass_) {
      BeginPass(nullptr);
    }
    if (c.pipeline != pipeline_) {
      p_.ComputePassEncoderSetPipeline(pass_, c.pipeline);
      pipeline_ = c.pipeline;
    }
    WGPUBindGroup group =
        c.table_group >= 0 ? cb_.table_group_handles_[c.table_group] : c.bind_group;
    if (group != bind_group_ || c.dynamic_offset != dynamic_offset_) {
      const bool has_offset = c.dynamic_offset != ~0u;
      p_.ComputePassEncoderSetBindGroup(pass_, 0, group, has_offset ? 1 : 0,
                                        has_offset ? &c.dynamic_offset : nullptr);
      bind_group_ = group;
      dynamic_offset_ = c.dynamic_offset;
    }
    if (c.indirect == nullptr) {
      p_.ComputePassEncoderDispatchWorkgroups(pass_, c.x, c.y, c.z);
    } else {
      p_.ComputePassEncoderDispatchWorkgroupsIndirect(pass_, c.indirect, c.indirect_offset);
    }
    if (!cb_.query_sets_.empty()) EndPass();
  }

  // Copies and clears go as pieces of at most DeviceOptions::copy_piece_bytes:
  // encode(offset into the transfer, piece length) for each.
  template <typename F>
  void InPieces(uint64_t length, F&& encode) {
    EndPass();
    const uint64_t piece = cb_.device_->copy_piece_bytes();
    for (uint64_t done = 0; done < length; done += piece)
      encode(done, std::min(piece, length - done));
  }

  void Encode(const CommandBuffer::CopyRecord& c) {
    InPieces(c.length, [&](uint64_t at, uint64_t n) {
      p_.CommandEncoderCopyBufferToBuffer(encoder_, c.source, c.source_offset + at, c.target,
                                          c.target_offset + at, n);
    });
  }

  void Encode(const CommandBuffer::ClearRecord& c) {
    InPieces(c.length, [&](uint64_t at, uint64_t n) {
      p_.CommandEncoderClearBuffer(encoder_, c.target, c.offset + at, n);
    });
  }

  void Encode(const CommandBuffer::PushDebugRecord& c) {
    EndPass();
    p_.CommandEncoderPushDebugGroup(encoder_, ToStringView(cb_.names_[c.name]));
    open_groups_.push_back(c.name);
  }

  void Encode(const CommandBuffer::PopDebugRecord&) {
    EndPass();
    p_.CommandEncoderPopDebugGroup(encoder_);
    open_groups_.pop_back();
  }

  void Encode(const CommandBuffer::MarkerRecord& c) {
    EndPass();
    p_.CommandEncoderInsertDebugMarker(encoder_, ToStringView(cb_.names_[c.name]));
  }

  void ResolveProfile() {
    // Each set resolves into its place (offsets of 2 * 2048 * 8 bytes,
    // multiples of the 256 that resolving needs).
    const uint64_t timed = cb_.profiled_names_.size();
    for (size_t s = 0; s < cb_.query_sets_.size(); ++s) {
      p_.CommandEncoderResolveQuerySet(
          encoder_, cb_.query_sets_[s], 0, CommandBuffer::QueriesInSet(timed, s),
          cb_.resolve_buffer_->handle(), s * CommandBuffer::kTimedPerQuerySet * 16);
    }
    p_.CommandEncoderCopyBufferToBuffer(encoder_, cb_.resolve_buffer_->handle(), 0,
                                        cb_.readback_buffer_->handle(), 0, timed * 16);
  }

  CommandBuffer& cb_;
  const Procs& p_;
  WGPUCommandEncoder encoder_ = nullptr;
  WGPUComputePassEncoder pass_ = nullptr;
  WGPUComputePipeline pipeline_ = nullptr;
  WGPUBindGroup bind_group_ = nullptr;
  uint32_t dynamic_offset_ = ~0u;
  uint32_t profiled_ = 0;
  bool last_ = false;
  std::vector<uint32_t> open_groups_;
};

Status CommandBuffer::ValidateTable(std::span<const BufferRef> table) const {
  return ValidateBindingTable(*device_, slot_needs_, slot_aliases_, table, options_.label);
}

Status CommandBuffer::Issue(std::span<const BufferRef> table) {
  // Bind groups naming slots, resolved against this table; the previous
  // issue's are released once these exist (the GPU keeps what it uses).
  std::vector<BindGroupRef> groups;
  groups.reserve(table_groups_.size());
  table_group_handles_.resize(table_groups_.size());
  for (size_t g = 0; g < table_groups_.size(); ++g) {
    TableGroup& group = table_groups_[g];
    for (const TableGroup::SlotUse& use : group.slots) {
      const DeviceBuffer& buffer = *table[use.slot];
      const uint64_t length = use.length == kWholeBuffer ? buffer.size() - use.offset : use.length;
      group.entries[use.entry] = {buffer.handle(), use.offset, (length + 3) / 4 * 4};
    }
    KILN_ASSIGN_OR_RETURN(BindGroupRef ref,
                          device_->bind_group_cache().Get(group.layout, group.entries));
    table_group_handles_[g] = ref->handle();
    groups.push_back(std::move(ref));
  }
  issued_table_groups_ = std::move(groups);
  CommandEncoderReplay replay(*this);
  const Procs& p = device_->procs();
  for (size_t i = 0; i < segments_.size(); ++i) {
    const Segment& s = segments_[i];
    replay.set_last(i + 1 == segments_.size());
    if (s.is_write) {
      p.QueueWriteBuffer(device_->queue(), s.target, s.offset, s.data.data(), s.data.size());
    } else {
      replay.Execute(s);
    }
  }
  if (!query_sets_.empty() && (segments_.empty() || segments_.back().is_write)) {
    replay.ResolveAlone();
  }
  issued_ = true;
  return device_->CheckHealthy();
}

StatusOr<std::vector<DispatchTiming>> CommandBuffer::ReadProfile() {
  if (!options_.profile) {
    return FailedPrecondition("command buffer '", options_.label,
                              "' was not recorded with profiling");
  }
  if (!issued_) return FailedPrecondition("command buffer '", options_.label, "' was never issued");
  std::vector<DispatchTiming> timings;
  if (profiled_names_.empty()) return timings;
  const uint64_t bytes = profiled_names_.size() * 16;
  const Procs& p = device_->procs();
  KILN_RETURN_IF_ERROR(MapAndWait(*device_, readback_buffer_->handle(), WGPUMapMode_Read, bytes,
                                  "reading timestamps"));

  const auto* ticks = static_cast<const uint64_t*>(
      p.BufferGetConstMappedRange(readback_buffer_->handle(), 0, bytes));
  for (size_t i = 0; i < profiled_names_.size(); ++i) {
    const uint64_t begin = ticks[2 * i], end = ticks[2 * i + 1];
    timings.push_back({names_[profiled_names_[i]], end >= begin ? double(end - begin) : 0.0});
  }
  p.BufferUnmap(readback_buffer_->handle());
  return timings;
}

}  // namespace kiln::hal
