// What the code generator produces: per-kernel WGSL plus the metadata the
// runtime validates calls against and launches with. Plain data, with no IR
// or WebGPU types, so it can be serialised (module_format.h) and read by a
// runtime that links neither the IR nor codegen's emitter.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/codegen/extent_expr.h"

namespace kiln::codegen {

// The element type of a buffer parameter or the type of a scalar one.
enum class DType : uint8_t {
  kF32 = 0,
  kF16 = 1,
  kI32 = 2,
  kU32 = 3,
  kBool = 4,    // buffers hold it as a 32-bit integer
  kInt8x4 = 5,  // four i8 packed in 32 bits
};
inline constexpr uint8_t kLastDType = 5;

// The IR's name of the type: "f32", "bool", "int8x4", ...
std::string_view DTypeName(DType t);
std::optional<DType> DTypeFromName(std::string_view name);
// Bytes one element takes in a device buffer under the kernel ABI.
uint32_t DTypeBufferBytes(DType t);

enum class ParamKind : uint8_t {
  kBuffer = 0,  // a storage buffer binding
  kScalar = 1,  // a field of the uniform block
};

enum class BufferAccess : uint8_t {
  kRead = 0,       // var<storage, read>: the kernel never stores to it
  kReadWrite = 1,  // var<storage, read_write>
};

struct ParamInfo {
  std::string name;  // the IR parameter's name
  ParamKind kind = ParamKind::kBuffer;
  // The element type (buffers) or value type (scalars: i32, u32 or f32).
  DType dtype = DType::kF32;
  // Buffers only.
  BufferAccess access = BufferAccess::kRead;
  uint32_t binding = 0;            // @binding(binding) in @group(0)
  // Elements per element of the WGSL array (1, 2 or 4: `array<vec4<f32>>`
  // for a buffer accessed only by aligned 4-lane vectors). A binding holds
  // at least one array element: lanes * DTypeBufferBytes(dtype) bytes.
  uint32_t lanes = 1;
  std::vector<ExtentExpr> shape;   // each extent, over the scalar params
  // Empty (dense row-major) or one stride per dimension, in elements. The
  // elements a call must provide are 1 + sum((shape[d] - 1) * strides[d]),
  // or 0 when any extent is 0.
  std::vector<ExtentExpr> strides;
  // Scalars only: byte offset of the field in the uniform block.
  uint32_t uniform_offset = 0;

  friend bool operator==(const ParamInfo&, const ParamInfo&) = default;
};

struct KernelMetadata {
  std::string name;               // the IR function's name
  std::string entry_point;        // the WGSL entry point (the name, sanitised)
  std::vector<ParamInfo> params;  // in IR parameter order
  // The logical launch extents over the scalar params (1 when the kernel has
  // no such axis). The runtime evaluates them and spreads blockIdx.x over
  // workgroups x and z (see kernel_abi.h).
  ExtentExpr num_blocks_x = ExtentExpr::Constant(1);
  ExtentExpr num_blocks_y = ExtentExpr::Constant(1);
  std::array<uint32_t, 3> workgroup_size = {1, 1, 1};
  // WebGPU feature names ("shader-f16", "subgroups") the device must have.
  std::vector<std::string> required_features;
  uint32_t uniform_binding = 0;          // = number of buffer params
  uint32_t uniform_block_size = 0;       // host bytes, a multiple of 16
  uint32_t workgroup_storage_bytes = 0;  // total var<workgroup> size
  // Every loop of the WGSL terminates: the kernel has no `while` loop (its
  // `for` loops run bounded trip counts).
  bool loops_terminate = true;

  friend bool operator==(const KernelMetadata&, const KernelMetadata&) = default;
};

struct CompiledFunction {
  KernelMetadata metadata;
  // A complete WGSL module with exactly one entry point, metadata.entry_point.
  std::string wgsl;
  // The source function in the IR's text form (CompileFunction sets it), so
  // a module can be checked against the interpreter (`kiln run --check`).
  std::string source_ir;

  friend bool operator==(const CompiledFunction&, const CompiledFunction&) = default;
};

struct CompiledModule {
  std::vector<CompiledFunction> functions;  // in the IR module's order

  // The function named `name`, or null.
  const CompiledFunction* Find(std::string_view name) const {
    for (const CompiledFunction& f : functions) {
      if (f.metadata.name == name) return &f;
    }
    return nullptr;
  }

  friend bool operator==(const CompiledModule&, const CompiledModule&) = default;
};

}  // namespace kiln::codegen
