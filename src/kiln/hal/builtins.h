// Builtin shaders for what WebGPU's transfer commands cannot do.
//
// WebGPU clears only to zero and copies only 4-byte aligned ranges. kiln's
// fill (1-, 2- and 4-byte patterns at any pattern-aligned offset and length)
// and unaligned copy run these compute shaders instead. They address the
// buffer as u32 words and merge the head and tail bytes with a mask; each
// word is written by exactly one invocation.
#pragma once

#include <cstdint>

#include "kiln/hal/executable.h"

namespace kiln::hal {

class Device;

// Constants of the fill shader (16 bytes).
struct FillParams {
  uint32_t offset;   // bytes, relative to the bound window
  uint32_t length;   // bytes
  uint32_t pattern;  // the pattern replicated to 32 bits
  uint32_t unused;
};

// Constants of the copy shader (16 bytes).
struct CopyParams {
  uint32_t src_offset;  // bytes, relative to the bound source window
  uint32_t dst_offset;  // bytes, relative to the bound target window
  uint32_t length;      // bytes
  uint32_t unused;
};

inline constexpr uint32_t kBuiltinWorkgroupSize = 64;

class Builtins {
 public:
  // Loaded on first use and kept for the device's lifetime.
  StatusOr<ExecutableRef> Fill(Device& device);
  StatusOr<ExecutableRef> Copy(Device& device);

 private:
  ExecutableRef fill_;
  ExecutableRef copy_;
};

}  // namespace kiln::hal
