#include "kiln/hal/command_buffer.h"

#include <algorithm>
#include <cstring>

#include "kiln/hal/builtins.h"
#include "kiln/hal/command_buffer_validation.h"
#include "kiln/hal/device.h"
#include "kiln/hal/staging_buffer.h"
#include "kiln/support/file.h"

namespace kiln::hal {
namespace {


uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace

StatusOr<std::unique_ptr<CommandBuffer>> CommandBuffer::Create(std::shared_ptr<Device> device,
                                                               CommandBufferMode mode,
                                                               CommandBufferOptions options) {
  if (!device) return InvalidArgument("CommandBuffer::Create: no device");
  KILN_RETURN_IF_ERROR(CheckText(options.label, "CommandBuffer::Create: the label"));
  KILN_RETURN_IF_ERROR(device->CheckHealthy());
  if (options.profile && !device->HasFeature(Feature::kTimestampQuery)) {
    return Unavailable("profiling needs the timestamp-query feature, which ", device->Describe(),
                       " does not offer");
  }
  return std::unique_ptr<CommandBuffer>(new CommandBuffer(std::move(device), mode, std::move(options)));
}

CommandBuffer::CommandBuffer(std::shared_ptr<Device> device, CommandBufferMode mode,
                             CommandBufferOptions options)
    : device_(std::move(device)), mode_(mode), options_(std::move(options)) {}

CommandBuffer::~CommandBuffer() {
  // Release only: wgpu-native cannot release a query set it has destroyed.
  for (WGPUQuerySet set : query_sets_) device_->procs().QuerySetRelease(set);
}

Status CommandBuffer::CheckRecording() const {
  if (ended_) {
    return FailedPrecondition("command buffer '", options_.label,
                              "' has ended recording; record into a new one");
  }
  return device_->CheckHealthy();
}

CommandBuffer::Segment& CommandBuffer::OpenSegment() {
  if (!segment_open_) {
    Segment s;
    s.first_command = commands_.size();
    segments_.push_back(std::move(s));
    segment_open_ = true;
    stats_.execute_segments++;
  }
  return segments_.back();
}

void CommandBuffer::CloseSegment() {
  if (!segment_open_) return;
  Segment& s = segments_.back();
  s.command_count = commands_.size() - s.first_command;
  segment_open_ = false;
  last_constants_ = kNoConstants;
}

uint32_t CommandBuffer::NameIndex(std::string_view name) {
  for (size_t i = names_.size(); i-- > 0;) {
    if (names_[i] == name) return static_cast<uint32_t>(i);
  }
  names_.emplace_back(name);
  return static_cast<uint32_t>(names_.size() - 1);
}

void CommandBuffer::Retain(const BufferRef& buffer) {
  auto it = std::lower_bound(retained_.begin(), retained_.end(), buffer.get());
  if (it != retained_.end() && *it == buffer.get()) return;
  retained_.insert(it, buffer.get());
  buffers_.push_back(buffer);
}

Status CommandBuffer::RecordDispatch(const ExecutableRef& executable, uint32_t entry,
                                     std::span<const BufferBinding> bindings,
                                     std::span<const uint8_t> constants, uint32_t x, uint32_t y,
                                     uint32_t z, const BufferRef* indirect,
                                     uint64_t indirect_offset) {
  const EntryPoint& ep = executable->entry_point(entry);
  StagingBuffer& staging = device_->staging();

  // Resolve the bind group through the device-wide cache, unless it names
  // binding-table slots: then it is resolved at each issue.
  BindGroupEntry entries[16];
  std::vector<BindGroupEntry> many;
  BindGroupEntry* e = entries;
  if (ep.layout.bindings.size() > 16) {
    many.resize(ep.layout.bindings.size());
    e = many.data();
  }
  TableGroup table_group;
  size_t b = 0;
  for (size_t i = 0; i < ep.layout.bindings.size(); ++i) {
    if (static_cast<int>(i) == ep.uniform_binding) {
      e[i] = {staging.handle(), 0, ep.layout.constants_size};
      continue;
    }
    const BufferBinding& binding = bindings[b++];
    if (binding.slot != kNoSlot) {
      e[i] = {nullptr, binding.offset, 0};
      table_group.slots.push_back(
          {static_cast<uint32_t>(i), binding.slot, binding.offset, binding.length});
      continue;
    }
    uint64_t length = binding.length == kWholeBuffer ? binding.buffer->size() - binding.offset
                                                     : binding.length;
    // Storage bindings are whole 4-byte words; allocations always are.
    e[i] = {binding.buffer->handle(), binding.offset, AlignUp(length, 4)};
    Retain(binding.buffer);
  }
  const size_t count = ep.layout.bindings.size();
  DispatchRecord c;
  if (!table_group.slots.empty()) {
    NoteSlotNeeds(ep, bindings, indirect);
    table_group.layout = ep.bind_group_layout;
    table_group.entries.assign(e, e + count);
    c.table_group = static_cast<int32_t>(table_groups_.size());
    table_groups_.push_back(std::move(table_group));
    last_layout_ = nullptr;  // the next dispatch cannot reuse this group
  } else {
    // Consecutive dispatches with the same bindings skip the cache lookup.
    const bool same_group =
        last_layout_ == ep.bind_group_layout && last_entries_.size() == count &&
        std::equal(e, e + count, last_entries_.begin(),
                   [](const BindGroupEntry& a, const BindGroupEntry& b) {
                     return a.buffer == b.buffer && a.offset == b.offset && a.size == b.size;
                   });
    if (!same_group) {
      KILN_ASSIGN_OR_RETURN(BindGroupRef group, device_->bind_group_cache().Get(
                                                    ep.bind_group_layout,
                                                    std::span<const BindGroupEntry>(e, count)));
      bind_groups_.push_back(std::move(group));
      last_layout_ = ep.bind_group_layout;
      last_entries_.assign(e, e + count);
    }
    c.bind_group = bind_groups_.back()->handle();
  }
  // Stage the constants (after the bind group, whose creation may fail: a
  // refused dispatch leaves no constants behind); a full window is closed
  // and the call retried in a fresh one.
  uint32_t dynamic_offset = kNoConstants;
  if (ep.uniform_binding >= 0) {
    Segment* seg = &OpenSegment();
    // Dispatches repeating the previous one's constants share its slot.
    if (last_constants_ != kNoConstants &&
        last_constants_ + ep.layout.constants_size <= seg->constants.size() &&
        last_constants_size_ == ep.layout.constants_size &&
        std::memcmp(seg->constants.data() + last_constants_, constants.data(), constants.size()) ==
            0 &&
        std::all_of(seg->constants.begin() + last_constants_ + constants.size(),
                    seg->constants.begin() + last_constants_ + ep.layout.constants_size,
                    [](uint8_t b) { return b == 0; })) {
      dynamic_offset = last_constants_;
    }
  }
  if (ep.uniform_binding >= 0 && dynamic_offset == kNoConstants) {
    Segment* seg = &OpenSegment();
    uint64_t at = AlignUp(seg->constants.size(), staging.alignment());
    if (at + ep.layout.constants_size > staging.capacity()) {
      CloseSegment();
      stats_.staging_flushes++;
      seg = &OpenSegment();
      at = 0;
    }
    seg->constants.resize(at + ep.layout.constants_size, 0);
    if (!constants.empty())
      std::memcpy(seg->constants.data() + at, constants.data(), constants.size());
    dynamic_offset = static_cast<uint32_t>(at);
    last_constants_ = dynamic_offset;
    last_constants_size_ = ep.layout.constants_size;
  } else {
    OpenSegment();
  }

  if (executables_.empty() || executables_.back() != executable) executables_.push_back(executable);
  if (&ep != last_entry_point_) {
    last_entry_point_ = &ep;
    last_name_ = NameIndex(ep.layout.timing_name.empty() ? ep.layout.name : ep.layout.timing_name);
  }

  c.dynamic_offset = dynamic_offset;
  c.x = x;
  c.y = y;
  c.z = z;
  c.pipeline = ep.pipeline;
  c.indirect = indirect != nullptr ? (*indirect)->handle() : nullptr;
  c.indirect_offset = indirect_offset;
  c.name = last_name_;
  commands_.push_back(c);
  stats_.dispatches++;
  if (options_.profile) profiled_names_.push_back(c.name);
  return Status();
}

void CommandBuffer::NoteSlotNeeds(const EntryPoint& ep, std::span<const BufferBinding> bindings,
                                  const BufferRef* indirect) {
  SlotAliasCheck alias;
  bool writes = false;
  if (indirect != nullptr) {
    // Read as the dispatch's arguments: no binding may write it.
    alias.uses.push_back({*indirect, kNoSlot, kIndirectUse, 0, kWholeBuffer, false});
  }
  size_t b = 0;
  for (size_t i = 0; i < ep.layout.bindings.size(); ++i) {
    const BindingKind kind = ep.layout.bindings[i];
    if (kind == BindingKind::kUniform) continue;
    const BufferBinding& binding = bindings[b++];
    writes |= kind == BindingKind::kStorage;
    alias.uses.push_back({binding.buffer, binding.slot, static_cast<uint32_t>(i), binding.offset,
                          binding.length, kind == BindingKind::kStorage});
    if (binding.slot == kNoSlot) continue;
    if (binding.slot >= slot_needs_.size()) slot_needs_.resize(binding.slot + 1);
    SlotRequirement& need = slot_needs_[binding.slot];
    need.used = true;
    // A whole-buffer binding needs its offset inside the buffer.
    const uint64_t end = binding.length == kWholeBuffer
                             ? binding.offset + std::max<uint64_t>(1, MinBindingSize(ep.layout, i))
                             : binding.offset + binding.length;
    need.min_size = std::max(need.min_size, end);
    if (binding.length == kWholeBuffer) need.whole_from = std::min(need.whole_from, binding.offset);
  }
  // (Called only for dispatches that name a slot.)
  if (writes && alias.uses.size() > 1) slot_aliases_.push_back(std::move(alias));
}

Status CommandBuffer::Dispatch(const ExecutableRef& executable, uint32_t entry,
                               std::span<const BufferBinding> bindings,
                               std::span<const uint8_t> constants, uint32_t x, uint32_t y,
                               uint32_t z) {
  KILN_RETURN_IF_ERROR(CheckRecording());
  KILN_RETURN_IF_ERROR(ValidateDispatch(*device_, executable, entry, bindings, constants));
  KILN_RETURN_IF_ERROR(
      ValidateWorkgroupCounts(*device_, executable->entry_point(entry), x, y, z));
  return RecordDispatch(executable, entry, bindings, constants, x, y, z, nullptr, 0);
}

Status CommandBuffer::DispatchPrevalidated(const ExecutableRef& executable, uint32_t entry,
                                           std::span<const BufferBinding> bindings,
                                           std::span<const uint8_t> constants, uint32_t x,
                                           uint32_t y, uint32_t z) {
  KILN_RETURN_IF_ERROR(CheckRecording());
  // The one check kept in release builds: another device's pipeline would
  // reach the implementation (which may abort on it).
  if (executable && !executable->BelongsTo(*device_)) {
    return InvalidArgument("dispatch: executable '", executable->label(),
                           "' was loaded on another device than the command buffer's");
  }
#ifndef NDEBUG
  Status checked = ValidateDispatch(*device_, executable, entry, bindings, constants);
  if (checked.ok()) {
    checked = ValidateWorkgroupCounts(*device_, executable->entry_point(entry), x, y, z);
  }
  KILN_CHECK_MSG(checked.ok(), "DispatchPrevalidated given an invalid dispatch: ",
                 checked.ToString());
#endif
  return RecordDispatch(executable, entry, bindings, constants, x, y, z, nullptr, 0);
}

Status CommandBuffer::DispatchIndirect(const ExecutableRef& executable, uint32_t entry,
                                       std::span<const BufferBinding> bindings,
                                       std::span<const uint8_t> constants,
                                       const BufferRef& indirect, uint64_t offset) {
  KILN_RETURN_IF_ERROR(CheckRecording());
  KILN_RETURN_IF_ERROR(ValidateDispatch(*device_, executable, entry, bindings, constants));
  KILN_RETURN_IF_ERROR(
      ValidateIndirect(*device_, executable->entry_point(entry), bindings, indirect, offset));
  Retain(indirect);
  return RecordDispatch(executable, entry, bindings, constants, 0, 0, 0, &indirect, offset);
}

Status CommandBuffer::FillBuffer(const BufferRef& target, uint64_t offset, uint64_t length,
                                 const void* pattern, size_t pattern_length) {
  KILN_RETURN_IF_ERROR(CheckRecording());
  KILN_RETURN_IF_ERROR(ValidateFill(*device_, target, offset, length, pattern, pattern_length));
  if (length == 0) return Status();
  uint32_t word = 0;
  std::memcpy(&word, pattern, pattern_length);
  if (pattern_length == 1) word *= 0x01010101u;
  if (pattern_length == 2) word |= word << 16;
  Retain(target);
  if (word == 0 && offset % 4 == 0 && length % 4 == 0) {
    OpenSegment();
    commands_.push_back(ClearRecord{target->handle(), offset, length});
    return Status();
  }
  return RecordFill(target, offset, length, word);
}

// Splits [offset, offset+length) into pieces whose 4-byte aligned span,
// bound from an offset aligned for storage bindings, fits a binding.
template <typename Fn>
static Status ForEachWindow(const Limits& limits, uint64_t offset, uint64_t length, Fn&& fn) {
  const uint64_t align = limits.min_storage_buffer_offset_alignment;
  const uint64_t max_piece = (limits.max_storage_buffer_binding_size - 2 * align) / 4 * 4;
  for (uint64_t done = 0; done < length;) {
    uint64_t piece = std::min(length - done, max_piece);
    KILN_RETURN_IF_ERROR(fn(offset + done, piece));
    done += piece;
  }
  return Status();
}

Status CommandBuffer::RecordFill(const BufferRef& target, uint64_t offset, uint64_t length,
                                 uint32_t pattern) {
  KILN_ASSIGN_OR_RETURN(ExecutableRef fill, device_->builtins().Fill(*device_));
  const uint64_t align = device_->limits().min_storage_buffer_offset_alignment;
  return ForEachWindow(device_->limits(), offset, length, [&](uint64_t at, uint64_t n) -> Status {
    const uint64_t base = at / align * align;
    const uint64_t span = AlignUp(at + n, 4) - base;
    FillParams params{static_cast<uint32_t>(at - base), static_cast<uint32_t>(n), pattern, 0};
    BufferBinding binding{target, base, span};
    const uint64_t words = span / 4;
    const uint32_t groups = static_cast<uint32_t>(std::min<uint64_t>(
        (words + kBuiltinWorkgroupSize - 1) / kBuiltinWorkgroupSize,
        device_->limits().max_compute_workgroups_per_dimension));
    return RecordDispatch(fill, 0, {&binding, 1},
                          {reinterpret_cast<const uint8_t*>(&params), sizeof(params)}, groups, 1,
                          1, nullptr, 0);
  });
}

Status CommandBuffer::UpdateBuffer(const BufferRef& target, uint64_t offset,
                                   std::span<const uint8_t> data) {
  KILN_RETURN_IF_ERROR(CheckRecording());
  KILN_RETURN_IF_ERROR(ValidateUpdate(*device_, target, offset, data.size()));
  if (data.empty()) return Status();
  Retain(target);
  if (offset % 4 == 0 && data.size() % 4 == 0) {
    CloseSegment();
    Segment s;
    s.is_write = true;
    s.target = target->handle();
    s.offset = offset;
    s.data.assign(data.begin(), data.end());
    segments_.push_back(std::move(s));
    stats_.write_segments++;
    return Status();
  }
  // Queue writes need 4-byte alignment: write the bytes to a scratch buffer
  // and let the copy shader place them.
  KILN_ASSIGN_OR_RETURN(BufferRef scratch, device_->allocator().Allocate(AlignUp(data.size(), 4)));
  Retain(scratch);
  CloseSegment();
  Segment s;
  s.is_write = true;
  s.target = scratch->handle();
  s.data.assign(data.begin(), data.end());
  s.data.resize(AlignUp(data.size(), 4), 0);
  segments_.push_back(std::move(s));
  stats_.write_segments++;
  return RecordCopy(scratch, 0, target, offset, data.size());
}

Status CommandBuffer::CopyBuffer(const BufferRef& source, uint64_t source_offset,
                                 const BufferRef& target, uint64_t target_offset,
                                 uint64_t length) {
  KILN_RETURN_IF_ERROR(CheckRecording());
  KILN_RETURN_IF_ERROR(ValidateCopy(*device_, source, source_offset, target, target_offset, length));
  if (length == 0) return Status();
  if (source_offset % 4 == 0 && target_offset % 4 == 0 && length % 4 == 0) {
    return CopyBufferUnchecked(source, source_offset, target, target_offset, length);
  }
  Retain(source);
  Retain(target);
  return RecordCopy(source, source_offset, target, target_offset, length);
}

Status CommandBuffer::CopyBufferUnchecked(const BufferRef& source, uint64_t source_offset,
                                          const BufferRef& target, uint64_t target_offset,
                                          uint64_t length) {
  KILN_RETURN_IF_ERROR(CheckRecording());
  KILN_CHECK(source_offset % 4 == 0 && target_offset % 4 == 0 && length % 4 == 0);
  KILN_CHECK(source_offset + length <= source->allocated_size());
  KILN_CHECK(target_offset + length <= target->allocated_size());
  Retain(source);
  Retain(target);
  OpenSegment();
  commands_.push_back(
      CopyRecord{source->handle(), target->handle(), source_offset, target_offset, length});
  return Status();
}

Status CommandBuffer::RecordCopy(const BufferRef& source, uint64_t source_offset,
                                 const BufferRef& target, uint64_t target_offset,
                                 uint64_t length) {
  KILN_ASSIGN_OR_RETURN(ExecutableRef copy, device_->builtins().Copy(*device_));
  const uint64_t align = device_->limits().min_storage_buffer_offset_alignment;
  return ForEachWindow(device_->limits(), 0, length, [&](uint64_t done, uint64_t n) -> Status {
    const uint64_t src_at = source_offset + done, dst_at = target_offset + done;
    const uint64_t src_base = src_at / align * align, dst_base = dst_at / align * align;
    BufferBinding bindings[2] = {
        {source, src_base, AlignUp(src_at + n, 4) - src_base},
        {target, dst_base, AlignUp(dst_at + n, 4) - dst_base},
    };
    CopyParams params{static_cast<uint32_t>(src_at - src_base),
                      static_cast<uint32_t>(dst_at - dst_base), static_cast<uint32_t>(n), 0};
    const uint64_t words = bindings[1].length / 4;
    const uint32_t groups = static_cast<uint32_t>(std::min<uint64_t>(
        (words + kBuiltinWorkgroupSize - 1) / kBuiltinWorkgroupSize,
        device_->limits().max_compute_workgroups_per_dimension));
    return RecordDispatch(copy, 0, bindings,
                          {reinterpret_cast<const uint8_t*>(&params), sizeof(params)}, groups, 1,
                          1, nullptr, 0);
  });
}

Status CommandBuffer::BeginDebugGroup(std::string_view label) {
  KILN_RETURN_IF_ERROR(CheckRecording());
  KILN_RETURN_IF_ERROR(CheckText(label, "BeginDebugGroup: the label"));
  OpenSegment();
  commands_.push_back(PushDebugRecord{NameIndex(label)});
  ++debug_depth_;
  return Status();
}

Status CommandBuffer::EndDebugGroup() {
  KILN_RETURN_IF_ERROR(CheckRecording());
  if (debug_depth_ == 0) return FailedPrecondition("EndDebugGroup without an open debug group");
  OpenSegment();
  commands_.push_back(PopDebugRecord{});
  --debug_depth_;
  return Status();
}

Status CommandBuffer::InsertDebugMarker(std::string_view label) {
  KILN_RETURN_IF_ERROR(CheckRecording());
  KILN_RETURN_IF_ERROR(CheckText(label, "InsertDebugMarker: the label"));
  OpenSegment();
  commands_.push_back(MarkerRecord{NameIndex(label)});
  return Status();
}

Status CommandBuffer::ExecutionBarrier() { return CheckRecording(); }
Status CommandBuffer::SignalEvent() { return CheckRecording(); }
Status CommandBuffer::ResetEvent() { return CheckRecording(); }
Status CommandBuffer::WaitEvents() { return CheckRecording(); }

Status CommandBuffer::End() {
  KILN_RETURN_IF_ERROR(CheckRecording());
  if (debug_depth_ != 0) {
    return FailedPrecondition("command buffer '", options_.label, "' ends with ", debug_depth_,
                              " debug group(s) open");
  }
  CloseSegment();
  if (options_.profile && !profiled_names_.empty()) {
    // Made whole or not at all: a failure releases what was made, and End
    // may be called again.
    const uint64_t count = profiled_names_.size() * 2;
    std::vector<WGPUQuerySet> sets;
    const auto release = [&] {
      for (WGPUQuerySet set : sets) device_->procs().QuerySetRelease(set);
    };
    for (uint64_t s = 0; s * kTimedPerQuerySet < profiled_names_.size(); ++s) {
      WGPUQuerySetDescriptor qd = {};
      qd.type = WGPUQueryType_Timestamp;
      qd.count = QueriesInSet(profiled_names_.size(), s);
      WGPUQuerySet set = nullptr;
      Status made = device_->WithErrorScopes(
          "creating the profiling query set", StatusCode::kInternal,
          [&] { set = device_->procs().DeviceCreateQuerySet(device_->handle(), &qd); });
      if (set != nullptr) sets.push_back(set);
      if (!made.ok()) {
        release();
        return made;
      }
    }
    auto resolve = device_->allocator().Allocate(
        count * 8ull, WGPUBufferUsage_QueryResolve | WGPUBufferUsage_CopySrc);
    auto readback = resolve.ok()
                        ? device_->allocator().Allocate(
                              count * 8ull, WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst)
                        : resolve;
    if (!readback.ok()) {
      release();
      return readback.status();
    }
    resolve_buffer_ = std::move(*resolve);
    readback_buffer_ = std::move(*readback);
    query_sets_ = std::move(sets);
  }
  ended_ = true;
  return Status();
}

}  // namespace kiln::hal
