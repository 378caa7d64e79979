// Command buffers: recorded once, issued once (kOneShot) or many times
// (kReusable).
//
// Every public call validates its arguments against the device and returns a
// Status; nothing invalid is recorded, and a rejected call leaves the command
// buffer as it was. Recording appends small command records to ordered
// segments:
//   - an execute segment: commands encoded into one WebGPU command buffer at
//     issue time, together with the window of constants its dispatches read
//     from the shared uniform staging buffer;
//   - a write segment: a queue buffer write of bytes copied at record time.
// Issuing walks the segments in order: each execute segment writes its
// constants window into the staging buffer, then encodes its commands (one
// compute pass across consecutive dispatches, pipeline and bind group set
// only when they change) and submits them. A WebGPU command buffer can be
// submitted only once, so reusable command buffers keep their records and
// re-encode them at each issue, without re-validating or re-resolving
// bindings.
//
// Barriers and events are no-ops: WebGPU orders all work submitted to a
// queue and tracks hazards itself.
//
// Binding tables: a dispatch binding may name a slot of a binding table
// instead of a buffer (BufferBinding::Slot). The command buffer then records
// what each slot must hold, and every Submit gives the table: a buffer per
// slot, checked against those needs before anything runs, and bound when the
// records are encoded. One reusable command buffer thus replays over other
// buffers without being recorded again.
//
// Validation lives in command_buffer_validation.{h,cc}; every public call
// goes through it. DispatchPrevalidated records a dispatch whose caller has
// already made those checks (the runtime, after planning a call).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kiln/hal/bind_group_cache.h"
#include "kiln/hal/buffer.h"
#include "kiln/hal/executable.h"
#include "kiln/support/status.h"

namespace kiln::hal {

class Device;

enum class CommandBufferMode { kOneShot, kReusable };

inline constexpr uint64_t kWholeBuffer = ~0ull;
inline constexpr uint32_t kNoSlot = ~0u;
// Binding-table slots are numbered from 0 to kMaxBindingTableSlot.
inline constexpr uint32_t kMaxBindingTableSlot = (1u << 16) - 1;

// A range of a buffer bound to a dispatch: of `buffer`, or of the buffer a
// binding table gives for `slot` at submit.
struct BufferBinding {
  BufferRef buffer;
  uint64_t offset = 0;
  uint64_t length = kWholeBuffer;  // to the end of the buffer
  uint32_t slot = kNoSlot;

  static BufferBinding Slot(uint32_t slot, uint64_t offset = 0, uint64_t length = kWholeBuffer) {
    return BufferBinding{nullptr, offset, length, slot};
  }
};

struct CommandBufferOptions {
  std::string label;
  // Time every dispatch with timestamp queries (needs timestamp-query).
  bool profile = false;
};

struct DispatchTiming {
  std::string name;  // the entry point's name
  double gpu_ns = 0;
};

struct CommandBufferStats {
  uint64_t dispatches = 0;
  uint64_t execute_segments = 0;
  uint64_t write_segments = 0;
  uint64_t staging_flushes = 0;  // windows closed because the staging buffer filled
};

// What a command buffer's binding-table slot needs of the buffer a table
// gives it, and the bindings of a dispatch that names slots, checked at
// submit as WebGPU wants them: a buffer written by the dispatch is bound
// there by no other binding, but for written ranges that do not overlap.
struct SlotRequirement {
  uint64_t min_size = 0;  // bytes the slot's buffer must hold
  // The smallest offset of a binding to the end of the buffer, whose length
  // (size - offset) must fit maxStorageBufferBindingSize; ~0: none.
  uint64_t whole_from = ~0ull;
  bool used = false;
};
// SlotAliasCheck::Use::binding of an indirect dispatch's arguments buffer.
inline constexpr uint32_t kIndirectUse = ~0u;
struct SlotAliasCheck {
  struct Use {
    BufferRef buffer;         // null for a slot
    uint32_t slot = kNoSlot;  // or the slot whose buffer it is
    uint32_t binding = 0;     // the entry point's binding index
    uint64_t offset = 0;
    uint64_t length = kWholeBuffer;
    bool written = false;
  };
  std::vector<Use> uses;
};

class CommandBuffer {
 public:
  static StatusOr<std::unique_ptr<CommandBuffer>> Create(std::shared_ptr<Device> device,
                                                         CommandBufferMode mode,
                                                         CommandBufferOptions options = {});
  ~CommandBuffer();
  CommandBuffer(const CommandBuffer&) = delete;
  CommandBuffer& operator=(const CommandBuffer&) = delete;

  // Runs entry point `entry` over x*y*z workgroups. `bindings` are its
  // storage bindings in order (the uniform binding excluded); `constants` are
  // the bytes of its constants block (zero-padded to the declared size).
  Status Dispatch(const ExecutableRef& executable, uint32_t entry,
                  std::span<const BufferBinding> bindings, std::span<const uint8_t> constants,
                  uint32_t x, uint32_t y = 1, uint32_t z = 1);
  // Dispatch without validation: the caller guarantees everything
  // ValidateDispatch and ValidateWorkgroupCounts check (debug builds still
  // check, and abort on a violation, which is a kiln bug).
  Status DispatchPrevalidated(const ExecutableRef& executable, uint32_t entry,
                              std::span<const BufferBinding> bindings,
                              std::span<const uint8_t> constants, uint32_t x, uint32_t y = 1,
                              uint32_t z = 1);
  // Like Dispatch, reading the workgroup counts (three u32) from `indirect`
  // at `offset` when the GPU runs it.
  Status DispatchIndirect(const ExecutableRef& executable, uint32_t entry,
                          std::span<const BufferBinding> bindings,
                          std::span<const uint8_t> constants, const BufferRef& indirect,
                          uint64_t offset);
  // Writes `pattern` (1, 2 or 4 bytes) repeatedly over [offset, offset+length);
  // offset and length must be multiples of the pattern's length.
  Status FillBuffer(const BufferRef& target, uint64_t offset, uint64_t length,
                    const void* pattern, size_t pattern_length);
  // Copies `data` now; it reaches `target` in order with the other commands.
  Status UpdateBuffer(const BufferRef& target, uint64_t offset, std::span<const uint8_t> data);
  // Any offsets and length; source and target must be different buffers.
  Status CopyBuffer(const BufferRef& source, uint64_t source_offset, const BufferRef& target,
                    uint64_t target_offset, uint64_t length);

  Status BeginDebugGroup(std::string_view label);
  Status EndDebugGroup();
  Status InsertDebugMarker(std::string_view label);

  // No-ops (see the header comment); they validate their state only.
  Status ExecutionBarrier();
  Status SignalEvent();
  Status ResetEvent();
  Status WaitEvents();

  // Ends recording. Open debug groups are an error.
  Status End();

  CommandBufferMode mode() const { return mode_; }
  // The device whose queue it records for.
  const Device& device() const { return *device_; }
  // The number of binding-table slots the records use (1 + the highest
  // slot named); Submit wants a table of exactly this many buffers.
  uint32_t binding_table_size() const { return static_cast<uint32_t>(slot_needs_.size()); }
  const std::string& label() const { return options_.label; }
  CommandBufferStats stats() const { return stats_; }

  // The GPU time of every dispatch of the last issue, in recording order;
  // waits for the mapping of the results. Needs options.profile.
  StatusOr<std::vector<DispatchTiming>> ReadProfile();

 private:
  friend Status Submit(Device&, CommandBuffer&, class Fence*, uint64_t,
                       std::span<const BufferRef>);
  friend Status Download(Device&, const BufferRef&, uint64_t, std::span<uint8_t>);
  friend class CommandEncoderReplay;

  // Copies `length` bytes natively, checking only the buffers' allocations
  // (Download reads the 4-byte aligned range around a request, which may
  // pass the buffer's requested size). All three values must be multiples
  // of 4.
  Status CopyBufferUnchecked(const BufferRef& source, uint64_t source_offset,
                             const BufferRef& target, uint64_t target_offset, uint64_t length);

  // The records, one type per command.
  struct DispatchRecord {
    WGPUComputePipeline pipeline = nullptr;
    WGPUBindGroup bind_group = nullptr;  // null when bound through the binding table
    int32_t table_group = -1;            // index into table_groups_ when so bound
    uint32_t dynamic_offset = 0;         // into the staging buffer; ~0u: no constants
    uint32_t x = 0, y = 0, z = 0;
    WGPUBuffer indirect = nullptr;  // non-null: an indirect dispatch
    uint64_t indirect_offset = 0;
    uint32_t name = 0;  // index into names_
  };
  struct CopyRecord {
    WGPUBuffer source = nullptr, target = nullptr;
    uint64_t source_offset = 0, target_offset = 0, length = 0;
  };
  struct ClearRecord {
    WGPUBuffer target = nullptr;
    uint64_t offset = 0, length = 0;
  };
  struct PushDebugRecord {
    uint32_t name = 0;
  };
  struct PopDebugRecord {};
  struct MarkerRecord {
    uint32_t name = 0;
  };
  using Record = std::variant<DispatchRecord, CopyRecord, ClearRecord, PushDebugRecord,
                              PopDebugRecord, MarkerRecord>;

  // A bind group that names binding-table slots: resolved at each issue.
  struct TableGroup {
    WGPUBindGroupLayout layout = nullptr;
    std::vector<BindGroupEntry> entries;  // slot entries have a null buffer
    struct SlotUse {
      uint32_t entry = 0, slot = 0;
      uint64_t offset = 0, length = kWholeBuffer;
    };
    std::vector<SlotUse> slots;
  };
  struct Segment {
    bool is_write = false;
    size_t first_command = 0, command_count = 0;  // execute
    std::vector<uint8_t> constants;               // execute: the staging window
    WGPUBuffer target = nullptr;                  // write
    uint64_t offset = 0;                          // write
    std::vector<uint8_t> data;                    // write
  };

  CommandBuffer(std::shared_ptr<Device> device, CommandBufferMode mode,
                CommandBufferOptions options);

  Status CheckRecording() const;
  // Records a validated dispatch (an indirect one when `indirect` is set).
  Status RecordDispatch(const ExecutableRef& executable, uint32_t entry,
                        std::span<const BufferBinding> bindings, std::span<const uint8_t> constants,
                        uint32_t x, uint32_t y, uint32_t z, const BufferRef* indirect,
                        uint64_t indirect_offset);
  // Notes what a dispatch's slot bindings need of the binding table (and
  // the indirect buffer it reads, if any, for the aliasing check).
  void NoteSlotNeeds(const EntryPoint& entry_point, std::span<const BufferBinding> bindings,
                     const BufferRef* indirect);
  Status RecordFill(const BufferRef& target, uint64_t offset, uint64_t length, uint32_t pattern);
  Status RecordCopy(const BufferRef& source, uint64_t source_offset, const BufferRef& target,
                    uint64_t target_offset, uint64_t length);
  Segment& OpenSegment();
  void CloseSegment();
  uint32_t NameIndex(std::string_view name);
  void Retain(const BufferRef& buffer);

  // Checks `table` against what the records need (Submit calls this before
  // anything is issued).
  Status ValidateTable(std::span<const BufferRef> table) const;
  // Issues the segments to the queue (Submit calls this), binding slots to
  // the buffers of `table`.
  Status Issue(std::span<const BufferRef> table);

  std::shared_ptr<Device> device_;
  CommandBufferMode mode_;
  CommandBufferOptions options_;
  bool ended_ = false;
  bool issued_ = false;
  int debug_depth_ = 0;
  std::vector<Record> commands_;
  std::vector<Segment> segments_;
  bool segment_open_ = false;
  static constexpr uint32_t kNoConstants = ~0u;
  uint32_t last_constants_ = kNoConstants;  // offset of the last staged block
  uint32_t last_constants_size_ = 0;
  // The previous dispatch's bind group key and entry point, so repeated
  // dispatches skip the cache lookup and the name search.
  WGPUBindGroupLayout last_layout_ = nullptr;
  std::vector<BindGroupEntry> last_entries_;
  const EntryPoint* last_entry_point_ = nullptr;
  uint32_t last_name_ = 0;
  std::vector<std::string> names_;
  // What the records point at stays alive as long as the command buffer.
  std::vector<BufferRef> buffers_;
  std::vector<const DeviceBuffer*> retained_;  // sorted, to keep buffers_ unique
  std::vector<ExecutableRef> executables_;
  std::vector<BindGroupRef> bind_groups_;
  // Binding tables.
  std::vector<TableGroup> table_groups_;
  std::vector<SlotRequirement> slot_needs_;  // indexed by slot
  std::vector<SlotAliasCheck> slot_aliases_;  // per dispatch with written slots
  std::vector<BindGroupRef> issued_table_groups_;  // the last issue's, kept alive
  std::vector<WGPUBindGroup> table_group_handles_;  // indexed like table_groups_
  CommandBufferStats stats_;
  // Profiling.
  std::vector<uint32_t> profiled_names_;
  // Two timestamps per dispatch, kTimedPerQuerySet dispatches per set
  // (WebGPU's sets hold at most 4096 queries).
  static constexpr uint32_t kTimedPerQuerySet = 2048;
  // The timestamps set `set` holds where `timed` dispatches are timed.
  static uint32_t QueriesInSet(uint64_t timed, uint64_t set) {
    return static_cast<uint32_t>(
        2 * std::min<uint64_t>(kTimedPerQuerySet, timed - set * kTimedPerQuerySet));
  }
  std::vector<WGPUQuerySet> query_sets_;
  BufferRef resolve_buffer_;
  BufferRef readback_buffer_;
};

}  // namespace kiln::hal
