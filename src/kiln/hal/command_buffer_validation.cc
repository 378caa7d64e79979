#include "kiln/hal/command_buffer_validation.h"

#include <algorithm>

#include "kiln/hal/device.h"

namespace kiln::hal {
namespace {

uint64_t AlignUp(uint64_t v, uint64_t a) {
  return (v + a - 1) / a * a;
}

std::string_view BindingKindName(BindingKind kind) {
  switch (kind) {
    case BindingKind::kReadOnlyStorage:
      return "read-only storage";
    case BindingKind::kStorage:
      return "read-write storage";
    case BindingKind::kUniform:
      return "uniform";
  }
  return "?";
}

Status TooSmall(const std::string& at, uint64_t length, uint64_t min) {
  return InvalidArgument(at, ": a range of ", length, " bytes, but the shader's array takes ", min,
                         " bytes an element, so the binding needs at least ", min);
}

// Whether ranges [a, a + la) and [b, b + lb) of a buffer of `size` bytes
// meet (kWholeBuffer: to the end).
bool Overlap(uint64_t a, uint64_t la, uint64_t b, uint64_t lb, uint64_t size) {
  const uint64_t a_end = la == kWholeBuffer ? size : a + la;
  const uint64_t b_end = lb == kWholeBuffer ? size : b + lb;
  return a < b_end && b < a_end;
}

// WebGPU's rule for one dispatch's bindings of one buffer, at bindings `i`
// and `j`: a written binding shares its buffer with no read-only one, and
// with no other written one whose range meets it. "" when they may.
std::string AliasConflict(bool i_written, bool j_written, uint64_t i_offset, uint64_t i_length,
                          uint64_t j_offset, uint64_t j_length, uint64_t size) {
  if (!i_written && !j_written) return "";
  if (i_written != j_written) {
    return "a written buffer cannot be read through another binding";
  }
  if (Overlap(i_offset, i_length, j_offset, j_length, size)) {
    return "written ranges of one buffer may not overlap";
  }
  return "";
}

}  // namespace

Status ValidateDispatch(const Device& device, const ExecutableRef& executable, uint32_t entry,
                        std::span<const BufferBinding> bindings,
                        std::span<const uint8_t> constants) {
  if (!executable) return InvalidArgument("dispatch: no executable");
  if (!executable->BelongsTo(device)) {
    return InvalidArgument("dispatch: executable '", executable->label(),
                           "' was loaded on another device (executables are one device's; this "
                           "is ",
                           device.Describe(), ")");
  }
  if (entry >= executable->entry_point_count()) {
    return InvalidArgument("dispatch: entry point index ", entry, " is out of range: '",
                           executable->label(), "' has ", executable->entry_point_count());
  }
  const EntryPoint& ep = executable->entry_point(entry);
  // Messages are built only on failure: this runs for every dispatch.
  auto where = [&] { return StrCat("dispatch of '", ep.layout.name, "'"); };
  const size_t expected = ep.layout.bindings.size() - (ep.uniform_binding >= 0 ? 1 : 0);
  if (bindings.size() != expected) {
    return InvalidArgument(where(), ": expected ", expected, " buffer bindings, got ",
                           bindings.size());
  }
  if (ep.uniform_binding < 0 && !constants.empty()) {
    return InvalidArgument(where(), ": the entry point takes no constants, got ", constants.size(),
                           " bytes");
  }
  if (ep.uniform_binding >= 0 && constants.size() > ep.layout.constants_size) {
    return InvalidArgument(where(), ": ", constants.size(), " bytes of constants exceed its ",
                           ep.layout.constants_size, "-byte block");
  }
  const Limits& limits = device.limits();
  size_t b = 0;
  for (size_t i = 0; i < ep.layout.bindings.size(); ++i) {
    BindingKind kind = ep.layout.bindings[i];
    if (kind == BindingKind::kUniform) continue;
    const BufferBinding& binding = bindings[b++];
    auto at = [&] { return StrCat(where(), ", binding ", i, " (", BindingKindName(kind), ")"); };
    if (binding.offset % limits.min_storage_buffer_offset_alignment != 0) {
      return InvalidArgument(at(), ": offset ", binding.offset, " is not a multiple of ",
                             limits.min_storage_buffer_offset_alignment,
                             " (minStorageBufferOffsetAlignment)");
    }
    if (binding.slot != kNoSlot) {
      // Sizes, usage and aliasing are checked against the table at submit.
      if (binding.slot > kMaxBindingTableSlot) {
        return InvalidArgument(at(), ": binding-table slot ", binding.slot,
                               " is out of range: slots are 0 to ", kMaxBindingTableSlot);
      }
      if (binding.buffer) {
        return InvalidArgument(at(), ": names both a buffer and binding-table slot ", binding.slot);
      }
      if (binding.length == 0) return InvalidArgument(at(), ": an empty range");
      if (binding.length != kWholeBuffer && binding.length < MinBindingSize(ep.layout, i)) {
        return TooSmall(at(), binding.length, MinBindingSize(ep.layout, i));
      }
      if (binding.length != kWholeBuffer &&
          AlignUp(binding.length, 4) > limits.max_storage_buffer_binding_size) {
        return InvalidArgument(at(), ": ", binding.length,
                               " bytes exceed maxStorageBufferBindingSize (",
                               limits.max_storage_buffer_binding_size, ")");
      }
      continue;
    }
    if (!binding.buffer) return InvalidArgument(at(), ": no buffer");
    const DeviceBuffer& buffer = *binding.buffer;
    if (buffer.device() != &device) KILN_RETURN_IF_ERROR(CheckOwnBuffer(device, buffer, at()));
    if (binding.offset >= buffer.size()) {
      return InvalidArgument(at(), ": offset ", binding.offset, " is not inside the buffer of ",
                             buffer.size(), " bytes");
    }
    uint64_t length =
        binding.length == kWholeBuffer ? buffer.size() - binding.offset : binding.length;
    if (length == 0) return InvalidArgument(at(), ": an empty range (length 0)");
    if (length < MinBindingSize(ep.layout, i))
      return TooSmall(at(), length, MinBindingSize(ep.layout, i));
    if (length > buffer.size() - binding.offset) {
      return InvalidArgument(at(), ": range ", RangeText(binding.offset, length),
                             " does not fit the buffer of ", buffer.size(), " bytes");
    }
    if (AlignUp(length, 4) > limits.max_storage_buffer_binding_size) {
      return InvalidArgument(at(), ": ", length, " bytes exceed maxStorageBufferBindingSize (",
                             limits.max_storage_buffer_binding_size, ")");
    }
    if (!(buffer.usage() & WGPUBufferUsage_Storage)) {
      return InvalidArgument(at(), ": the buffer was not created with storage usage");
    }
    // WebGPU forbids a buffer written in a dispatch from being bound there
    // again read-only, or written again where the ranges meet.
    if (kind == BindingKind::kStorage) {
      size_t other = 0;
      for (size_t j = 0; j < ep.layout.bindings.size(); ++j) {
        if (ep.layout.bindings[j] == BindingKind::kUniform) continue;
        const BufferBinding& o = bindings[other++];
        if (j == i || o.buffer != binding.buffer) continue;
        const bool j_written = ep.layout.bindings[j] == BindingKind::kStorage;
        const std::string conflict = AliasConflict(true, j_written, binding.offset, binding.length,
                                                   o.offset, o.length, buffer.size());
        if (!conflict.empty()) {
          return InvalidArgument(at(), ": the buffer is also bound ",
                                 j_written ? "written" : "read-only", " at binding ", j, "; ",
                                 conflict);
        }
      }
    }
  }
  return Status();
}

Status ValidateWorkgroupCounts(const Device& device, const EntryPoint& entry_point, uint32_t x,
                               uint32_t y, uint32_t z) {
  const uint32_t max = device.limits().max_compute_workgroups_per_dimension;
  if (x > max || y > max || z > max) {
    return InvalidArgument("dispatch of '", entry_point.layout.name, "': (", x, ", ", y, ", ", z,
                           ") workgroups exceed maxComputeWorkgroupsPerDimension (", max, ")");
  }
  return Status();
}

Status ValidateIndirect(const Device& device, const EntryPoint& entry_point,
                        std::span<const BufferBinding> bindings, const BufferRef& indirect,
                        uint64_t offset) {
  if (!indirect) return InvalidArgument("indirect dispatch: no indirect buffer");
  KILN_RETURN_IF_ERROR(CheckOwnBuffer(device, *indirect, "indirect dispatch: the buffer"));
  if (offset % 4 != 0 || offset > indirect->size() || indirect->size() - offset < 12) {
    return InvalidArgument("indirect dispatch: offset ", offset,
                           " must be a multiple of 4 with 12 bytes after it in the buffer of ",
                           indirect->size(), " bytes");
  }
  if (!(indirect->usage() & WGPUBufferUsage_Indirect)) {
    return InvalidArgument("indirect dispatch: the buffer was not created with indirect usage");
  }
  size_t b = 0;
  for (size_t i = 0; i < entry_point.layout.bindings.size(); ++i) {
    if (entry_point.layout.bindings[i] == BindingKind::kUniform) continue;
    const BufferBinding& binding = bindings[b++];
    if (entry_point.layout.bindings[i] == BindingKind::kStorage && binding.buffer == indirect) {
      return InvalidArgument("indirect dispatch of '", entry_point.layout.name, "': binding ", i,
                             " writes the indirect buffer; a written buffer cannot be read "
                             "through another binding");
    }
  }
  return Status();
}

Status ValidateFill(const Device& device, const BufferRef& target, uint64_t offset, uint64_t length,
                    const void* pattern, size_t pattern_length) {
  if (!target) return InvalidArgument("fill: no target buffer");
  KILN_RETURN_IF_ERROR(CheckOwnBuffer(device, *target, "fill: the target buffer"));
  if (pattern_length != 1 && pattern_length != 2 && pattern_length != 4) {
    return InvalidArgument("fill: pattern length ", pattern_length, " is not 1, 2 or 4 bytes");
  }
  if (!pattern) return InvalidArgument("fill: no pattern");
  if (offset % pattern_length != 0 || length % pattern_length != 0) {
    return InvalidArgument("fill: offset ", offset, " and length ", length,
                           " must be multiples of the ", pattern_length, "-byte pattern");
  }
  KILN_RETURN_IF_ERROR(CheckRange(*target, offset, length, "fill:"));
  // Zero fills of whole words are native clears; anything else runs the
  // fill shader.
  const bool native = offset % 4 == 0 && length % 4 == 0 &&
                      std::all_of(static_cast<const uint8_t*>(pattern),
                                  static_cast<const uint8_t*>(pattern) + pattern_length,
                                  [](uint8_t b) { return b == 0; });
  if (length != 0 && !native && !(target->usage() & WGPUBufferUsage_Storage)) {
    return InvalidArgument("fill: a patterned or unaligned fill needs a buffer with storage usage");
  }
  if (length != 0 && native && !(target->usage() & WGPUBufferUsage_CopyDst)) {
    return InvalidArgument("fill: a zero fill of whole words needs a buffer with copy-dst usage");
  }
  return Status();
}

Status ValidateUpdate(const Device& device, const BufferRef& target, uint64_t offset,
                      uint64_t size) {
  if (!target) return InvalidArgument("update: no target buffer");
  KILN_RETURN_IF_ERROR(CheckOwnBuffer(device, *target, "update: the target buffer"));
  KILN_RETURN_IF_ERROR(CheckRange(*target, offset, size, "update:"));
  const bool aligned = offset % 4 == 0 && size % 4 == 0;
  if (size != 0 && !aligned && !(target->usage() & WGPUBufferUsage_Storage)) {
    return InvalidArgument("update: an unaligned update needs a buffer with storage usage");
  }
  if (size != 0 && aligned && !(target->usage() & WGPUBufferUsage_CopyDst)) {
    return InvalidArgument("update: the target buffer was not created with copy-dst usage");
  }
  return Status();
}

Status ValidateCopy(const Device& device, const BufferRef& source, uint64_t source_offset,
                    const BufferRef& target, uint64_t target_offset, uint64_t length) {
  if (!source || !target) return InvalidArgument("copy: no source or target buffer");
  KILN_RETURN_IF_ERROR(CheckOwnBuffer(device, *source, "copy: the source buffer"));
  KILN_RETURN_IF_ERROR(CheckOwnBuffer(device, *target, "copy: the target buffer"));
  if (source == target) return InvalidArgument("copy: source and target are the same buffer");
  KILN_RETURN_IF_ERROR(CheckRange(*source, source_offset, length, "copy: source"));
  KILN_RETURN_IF_ERROR(CheckRange(*target, target_offset, length, "copy: target"));
  const bool native = source_offset % 4 == 0 && target_offset % 4 == 0 && length % 4 == 0;
  if (length != 0 && !native &&
      (!(source->usage() & WGPUBufferUsage_Storage) ||
       !(target->usage() & WGPUBufferUsage_Storage))) {
    return InvalidArgument("copy: an unaligned copy needs buffers with storage usage");
  }
  if (length != 0 && native && !(source->usage() & WGPUBufferUsage_CopySrc)) {
    return InvalidArgument("copy: the source buffer was not created with copy-src usage");
  }
  if (length != 0 && native && !(target->usage() & WGPUBufferUsage_CopyDst)) {
    return InvalidArgument("copy: the target buffer was not created with copy-dst usage");
  }
  return Status();
}

Status ValidateBindingTable(const Device& device, std::span<const SlotRequirement> slots,
                            std::span<const SlotAliasCheck> dispatches,
                            std::span<const BufferRef> table, std::string_view label) {
  if (table.size() != slots.size()) {
    return InvalidArgument("command buffer '", label, "' was recorded against a binding table of ",
                           slots.size(), " slot(s); submitted with ", table.size());
  }
  for (size_t s = 0; s < slots.size(); ++s) {
    if (!slots[s].used) continue;
    const BufferRef& buffer = table[s];
    if (!buffer) {
      return InvalidArgument("command buffer '", label, "': binding-table slot ", s,
                             " has no buffer");
    }
    if (buffer->device() != &device) {  // (the message is built only then: this runs per submit)
      KILN_RETURN_IF_ERROR(CheckOwnBuffer(
          device, *buffer, StrCat("command buffer '", label, "': binding-table slot ", s)));
    }
    if (buffer->size() < slots[s].min_size) {
      return InvalidArgument("command buffer '", label, "': binding-table slot ", s, " holds ",
                             buffer->size(), " bytes; its bindings need ", slots[s].min_size);
    }
    if (!(buffer->usage() & WGPUBufferUsage_Storage)) {
      return InvalidArgument("command buffer '", label, "': binding-table slot ", s,
                             ": the buffer was not created with storage usage");
    }
    const uint64_t max = device.limits().max_storage_buffer_binding_size;
    if (slots[s].whole_from != ~0ull && AlignUp(buffer->size() - slots[s].whole_from, 4) > max) {
      return InvalidArgument("command buffer '", label, "': binding-table slot ", s,
                             ": a binding to the end of its ", buffer->size(),
                             "-byte buffer exceeds maxStorageBufferBindingSize (", max, ")");
    }
  }
  // One dispatch's bindings, slots resolved: a written buffer bound again.
  auto name = [](const SlotAliasCheck::Use& u) {
    if (u.binding == kIndirectUse) return std::string("the indirect buffer");
    return u.slot == kNoSlot ? StrCat("binding ", u.binding)
                             : StrCat("binding ", u.binding, " (binding-table slot ", u.slot, ")");
  };
  for (const SlotAliasCheck& d : dispatches) {
    for (size_t i = 0; i < d.uses.size(); ++i) {
      const SlotAliasCheck::Use& a = d.uses[i];
      const BufferRef& a_buffer = a.slot == kNoSlot ? a.buffer : table[a.slot];
      for (size_t j = i + 1; j < d.uses.size(); ++j) {
        const SlotAliasCheck::Use& b = d.uses[j];
        if (a.slot == kNoSlot && b.slot == kNoSlot) continue;  // checked when recorded
        const BufferRef& b_buffer = b.slot == kNoSlot ? b.buffer : table[b.slot];
        if (a_buffer != b_buffer) continue;
        const std::string conflict = AliasConflict(a.written, b.written, a.offset, a.length,
                                                   b.offset, b.length, a_buffer->size());
        if (!conflict.empty()) {
          return InvalidArgument("command buffer '", label, "': ", name(a), " and ", name(b),
                                 " of one dispatch get the same buffer; ", conflict);
        }
      }
    }
  }
  return Status();
}

}  // namespace kiln::hal
