#include "kiln/hal/builtins.h"

#include "kiln/hal/device.h"

namespace kiln::hal {
namespace {

// Bytes [offset, offset + length) of `dst` become the replicated pattern.
constexpr const char* kFillWgsl = R"(
struct FillParams {
  offset: u32,
  length: u32,
  pattern: u32,
  unused: u32,
}
@group(0) @binding(0) var<storage, read_write> dst: array<u32>;
@group(0) @binding(1) var<uniform> params: FillParams;

@compute @workgroup_size(64)
fn fill(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
  let begin = params.offset;
  let end = params.offset + params.length;
  let stride = groups.x * 64u;
  for (var word = begin / 4u + gid.x; word < (end + 3u) / 4u; word += stride) {
    let first = word * 4u;
    var mask = 0xffffffffu;
    if (first < begin) {
      mask = mask << ((begin - first) * 8u);
    }
    if (first + 4u > end) {
      mask = mask & (0xffffffffu >> ((first + 4u - end) * 8u));
    }
    dst[word] = (dst[word] & ~mask) | (params.pattern & mask);
  }
}
)";

// Bytes [dst_offset, dst_offset + length) of `dst` become bytes
// [src_offset, ...) of `src`, at any alignment of either.
constexpr const char* kCopyWgsl = R"(
struct CopyParams {
  src_offset: u32,
  dst_offset: u32,
  length: u32,
  unused: u32,
}
@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<uniform> params: CopyParams;

fn src_byte(index: u32) -> u32 {
  return (src[index / 4u] >> ((index % 4u) * 8u)) & 0xffu;
}

@compute @workgroup_size(64)
fn copy(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
  let begin = params.dst_offset;
  let end = params.dst_offset + params.length;
  let stride = groups.x * 64u;
  for (var word = begin / 4u + gid.x; word < (end + 3u) / 4u; word += stride) {
    var value = dst[word];
    for (var b = 0u; b < 4u; b++) {
      let at = word * 4u + b;
      if (at >= begin && at < end) {
        let shift = b * 8u;
        value = (value & ~(0xffu << shift)) | (src_byte(params.src_offset + at - begin) << shift);
      }
    }
    dst[word] = value;
  }
}
)";

}  // namespace

StatusOr<ExecutableRef> Builtins::Fill(Device& device) {
  if (!fill_) {
    ExecutableSpec spec{"kiln builtin fill", kFillWgsl,
                        {{"fill", {BindingKind::kStorage, BindingKind::kUniform}, 16}}};
    KILN_ASSIGN_OR_RETURN(fill_, LoadExecutable(device, spec));
  }
  return fill_;
}

StatusOr<ExecutableRef> Builtins::Copy(Device& device) {
  if (!copy_) {
    ExecutableSpec spec{
        "kiln builtin copy",
        kCopyWgsl,
        {{"copy", {BindingKind::kReadOnlyStorage, BindingKind::kStorage, BindingKind::kUniform},
          16}}};
    KILN_ASSIGN_OR_RETURN(copy_, LoadExecutable(device, spec));
  }
  return copy_;
}

}  // namespace kiln::hal
