// The module runtime: compiled kiln modules loaded through the HAL and their
// functions called on device buffers.
//
// A call is checked against the function's metadata before anything is
// recorded: the argument count, each argument's kind (buffer or scalar) and
// scalar type, and each buffer's size against the parameter's shape
// evaluated with the call's scalar arguments. The launch grid comes from the
// metadata's launch extents evaluated the same way; blockIdx.x beyond the
// device's per-dimension limit is spread over workgroups x and z as the
// kernel ABI (codegen/kernel_abi.h) prescribes, and the scalars and launch
// words are packed into the staged uniform block.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "kiln/codegen/compiled_module.h"
#include "kiln/codegen/wgsl_codegen.h"
#include "kiln/hal/buffer.h"
#include "kiln/hal/command_buffer.h"
#include "kiln/hal/device.h"
#include "kiln/hal/executable.h"
#include "kiln/ir/expr.h"
#include "kiln/support/status.h"

namespace kiln::runtime {

// One argument of a call: a device buffer, or an i32, u32 or f32 scalar.
struct Arg {
  hal::BufferRef buffer;
  std::variant<std::monostate, int32_t, uint32_t, float> scalar;

  static Arg Buffer(hal::BufferRef b) { return Arg{std::move(b), std::monostate{}}; }
  static Arg I32(int32_t v) { return Arg{nullptr, v}; }
  static Arg U32(uint32_t v) { return Arg{nullptr, v}; }
  static Arg F32(float v) { return Arg{nullptr, v}; }
  bool is_buffer() const { return std::holds_alternative<std::monostate>(scalar); }
};

// What one call dispatches.
struct LaunchPlan {
  uint64_t num_blocks_x = 0, num_blocks_y = 0;
  uint32_t groups_x = 0, groups_y = 0, groups_z = 0;  // the dispatch
  std::vector<uint8_t> uniforms;                      // the constants block
  std::vector<uint64_t> buffer_bytes;                 // bytes each buffer param needs
};

class Function {
 public:
  const codegen::KernelMetadata& metadata() const { return compiled_.metadata; }
  const std::string& name() const { return compiled_.metadata.name; }
  const std::string& wgsl() const { return compiled_.wgsl; }
  hal::Device& device() const { return *device_; }

  // OK if this device can run the function; else why not (a missing feature).
  const Status& availability() const { return availability_; }

  // Checks `args` and computes the dispatch.
  StatusOr<LaunchPlan> Plan(std::span<const Arg> args) const;
  // Plan, then record the dispatch into `cb`.
  Status Record(hal::CommandBuffer& cb, std::span<const Arg> args) const;
  // Record into a one-shot command buffer, submit it and wait.
  Status Call(std::span<const Arg> args) const;

  // The number of elements buffer parameter `param` (by parameter index)
  // must hold for the given scalar arguments: the product of its extents
  // when dense, 1 + sum((extent - 1) * stride) when strided, 0 when empty.
  StatusOr<uint64_t> BufferElements(size_t param, std::span<const Arg> args) const;

 private:
  friend class Module;
  Function() = default;
  StatusOr<uint64_t> EvaluateExtent(const ir::Expr& expr, std::span<const Arg> args,
                                    std::string_view what) const;

  std::shared_ptr<hal::Device> device_;
  codegen::CompiledFunction compiled_;
  Status availability_;
  hal::ExecutableRef executable_;
  // Metadata expressions parsed once, over variables standing for the
  // scalar parameters.
  std::vector<ir::Var> scalar_vars_;      // indexed by parameter index (null for buffers)
  std::vector<std::vector<ir::Expr>> shapes_;  // per parameter
  std::vector<std::vector<ir::Expr>> strides_;  // per parameter; empty when dense
  ir::Expr num_blocks_x_, num_blocks_y_;
  std::vector<uint32_t> element_bytes_;   // per parameter (buffers)
};

class Module {
 public:
  // Compiles every function's WGSL on `device`. Functions needing features
  // the device lacks load as unavailable (Function::availability) rather
  // than failing the module; WGSL the implementation rejects fails the load.
  static StatusOr<std::unique_ptr<Module>> Load(const std::shared_ptr<hal::Device>& device,
                                                codegen::CompiledModule compiled);
  // Reads, checks and loads a compiled-module file.
  static StatusOr<std::unique_ptr<Module>> LoadFile(std::shared_ptr<hal::Device> device,
                                                    const std::string& path);

  const std::vector<std::unique_ptr<Function>>& functions() const { return functions_; }
  // The function called `name`, or kInvalidArgument listing the names there are.
  StatusOr<const Function*> Find(std::string_view name) const;

 private:
  std::vector<std::unique_ptr<Function>> functions_;
};

// Bytes one element of `dtype` ("f32", "bool", "int8x4", ...) takes in a
// device buffer under the kernel ABI.
StatusOr<uint32_t> ElementBytes(std::string_view dtype);

// Compile options whose limits (workgroup sizes, workgroup storage) are the
// device's, so kernels are checked against what they will run on.
codegen::CompileOptions CompileOptionsFor(const hal::Device& device);

}  // namespace kiln::runtime
