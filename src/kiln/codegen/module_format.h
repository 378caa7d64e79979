// The compiled-module file: a CompiledModule as bytes (docs/module-format.md).
//
// Layout: a 32-byte header (magic, format version, payload length, FNV-1a 64
// checksum of the payload) followed by the payload. Every integer is little
// endian. A reader accepts exactly kModuleFormatVersion.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kiln/codegen/compiled_module.h"
#include "kiln/support/status.h"

namespace kiln::codegen {

inline constexpr std::string_view kModuleMagic{"KILNWGSL", 8};
inline constexpr uint32_t kModuleFormatVersion = 5;
inline constexpr size_t kModuleHeaderBytes = 32;

// FNV-1a, 64 bits: the payload checksum.
uint64_t Fnv1a64(std::string_view bytes);

std::string SerializeModule(const CompiledModule& module);

// Errors (all kDataLoss, the message saying which): the input is shorter
// than the header or than the length it declares ("truncated"), starts with
// other bytes ("not a kiln module: bad magic"), has another format version
// ("format version N, expected 4"), has bytes past the declared length, fails
// its checksum ("corrupt"), or its payload is malformed.
StatusOr<CompiledModule> DeserializeModule(std::string_view bytes);

}  // namespace kiln::codegen
