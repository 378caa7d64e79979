// Validation of command buffer calls: every check of user input the HAL makes
// before recording lives here, so the recording path underneath can trust
// what it is given (kiln-internal; CommandBuffer's public calls use it).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kiln/hal/buffer.h"
#include "kiln/hal/command_buffer.h"
#include "kiln/hal/executable.h"
#include "kiln/support/status.h"

namespace kiln::hal {

class Device;

// The bindings and constants of a dispatch of `executable`'s entry point
// `entry` (a binding may name a binding-table slot instead of a buffer).
Status ValidateDispatch(const Device& device, const ExecutableRef& executable, uint32_t entry,
                        std::span<const BufferBinding> bindings,
                        std::span<const uint8_t> constants);
// Workgroup counts against maxComputeWorkgroupsPerDimension.
Status ValidateWorkgroupCounts(const Device& device, const EntryPoint& entry_point, uint32_t x,
                               uint32_t y, uint32_t z);
// Each of these also refuses a buffer of another device than `device`.
// An indirect dispatch's arguments buffer, read by the dispatch of
// `entry_point` with `bindings` (validated): none of them may write it (a
// slot's buffer is checked at submit).
Status ValidateIndirect(const Device& device, const EntryPoint& entry_point,
                        std::span<const BufferBinding> bindings, const BufferRef& indirect,
                        uint64_t offset);
Status ValidateFill(const Device& device, const BufferRef& target, uint64_t offset, uint64_t length,
                    const void* pattern, size_t pattern_length);
Status ValidateUpdate(const Device& device, const BufferRef& target, uint64_t offset,
                      uint64_t size);
Status ValidateCopy(const Device& device, const BufferRef& source, uint64_t source_offset,
                    const BufferRef& target, uint64_t target_offset, uint64_t length);

// A binding table against what a command buffer's records need of it.
Status ValidateBindingTable(const Device& device, std::span<const SlotRequirement> slots,
                            std::span<const SlotAliasCheck> dispatches,
                            std::span<const BufferRef> table, std::string_view label);

}  // namespace kiln::hal
