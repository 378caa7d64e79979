// The module runtime: compiled kiln modules loaded through the HAL and their
// functions called on device buffers.
//
// A call is checked against the function's metadata before anything is
// recorded: the argument count, each argument's kind (buffer view or
// scalar) and scalar type, and each buffer view against what the parameter
// reaches (its shape and strides evaluated with the call's scalar
// arguments), the device's offset alignment and binding size. The runtime
// reads the metadata's typed form directly (codegen/compiled_module.h,
// extent_expr.h): it links neither the IR, its parser and interpreter, nor
// the code generator. The launch grid comes from the
// metadata's launch extents evaluated the same way; blockIdx.x beyond the
// device's per-dimension limit is spread over workgroups x and z as the
// kernel ABI (codegen/kernel_abi.h) prescribes, and the scalars and launch
// words are packed into the staged uniform block.
//
// Loading is lazy: LoadedModule::Load reads and checks every function's metadata
// but creates no WebGPU object. A function's executable (shader module,
// layouts, compute pipeline) is created the first time the function is
// looked up with LoadedModule::Find, prepared, recorded or called, and then kept.
// A function the device rejects (WGSL the implementation refuses, more
// bindings than the device allows) reports that error, naming the function,
// when it is asked for; its siblings are unaffected.
//
// Threads: a LoadedModule and its functions are used like their hal::Device, from
// one thread at a time, with one allowance: the lazy creation of executables
// is serialised by a mutex per module, and a prepared function's executable
// never changes, so const lookups and preparation from several threads do not
// race on the module's own state (the device must still not be used by
// another thread meanwhile).
#pragma once

#include <atomic>
#include <functional>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "kiln/codegen/compiled_module.h"
#include "kiln/hal/buffer.h"
#include "kiln/hal/command_buffer.h"
#include "kiln/hal/device.h"
#include "kiln/hal/executable.h"
#include "kiln/support/status.h"
#include "kiln/support/target_limits.h"

namespace kiln::runtime {

// One argument of a call: a view of a device buffer (bytes [offset,
// offset + length), to the end by default; the offset a multiple of the
// device's minStorageBufferOffsetAlignment), or an i32, u32 or f32 scalar.
// Views let many tensors share one buffer (an arena).
struct Arg {
  hal::BufferRef buffer;
  std::variant<std::monostate, int32_t, uint32_t, float> scalar;
  uint64_t offset = 0;
  uint64_t length = hal::kWholeBuffer;

  static Arg Buffer(hal::BufferRef b, uint64_t offset = 0, uint64_t length = hal::kWholeBuffer) {
    return Arg{std::move(b), std::monostate{}, offset, length};
  }
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
  std::vector<hal::BufferBinding> bindings;           // the buffer params' bound ranges
};

class Kernel {
 public:
  const codegen::KernelMetadata& metadata() const { return compiled_.metadata; }
  const std::string& name() const { return compiled_.metadata.name; }
  const std::string& wgsl() const { return compiled_.wgsl; }
  hal::Device& device() const { return *device_; }

  // OK if this device offers what the function needs; else why not (a
  // missing feature). Says nothing of whether the device accepts its WGSL:
  // Prepare does.
  const Status& availability() const { return availability_; }

  // Creates the function's executable if no earlier call did; later calls
  // return the first one's result (failures too). OK, availability() when
  // that is not OK, or the device's rejection of the function's WGSL or
  // layout (kCompileError, kInvalidArgument, ...) naming the function, with
  // the implementation's message. Record and Call prepare the function first.
  Status Prepare() const;
  // Whether Prepare has run, successfully or not.
  bool prepared() const { return prepared_.load(std::memory_order_acquire); }

  // Checks `args` and computes the dispatch: everything the HAL would check
  // of it, so Record records it without validating again.
  StatusOr<LaunchPlan> Plan(std::span<const Arg> args) const;
  // Plan, then record the dispatch into `cb`.
  Status Record(hal::CommandBuffer& cb, std::span<const Arg> args) const;
  // Record into a one-shot command buffer, submit it and wait.
  Status Call(std::span<const Arg> args) const;

  // The number of elements buffer parameter `param` (by parameter index)
  // must hold for the given scalar arguments: the product of its extents
  // when dense, 1 + sum((extent - 1) * stride) when strided, 0 when empty
  // (the scalars checked as a call checks them; buffer arguments unused).
  StatusOr<uint64_t> BufferElements(size_t param, std::span<const Arg> args) const;
  // The fewest bytes buffer parameter `param` (by parameter index) is bound
  // with: one element of its WGSL array (ParamInfo::lanes elements, 16
  // bytes for a buffer the kernel accesses only as aligned vec4<f32>s). A
  // buffer smaller than that is refused, even where the kernel would read
  // nothing of it.
  uint64_t MinBindingBytes(size_t param) const {
    return uint64_t{element_bytes_[param]} * compiled_.metadata.params[param].lanes;
  }

 private:
  friend class LoadedModule;
  Kernel() = default;
  // The arguments' count, kinds and scalar types against the parameters
  // (with scalars_only, the buffer parameters' arguments are not looked at).
  Status CheckArgKinds(std::span<const Arg> args, bool scalars_only) const;
  StatusOr<uint64_t> EvaluateExtent(const codegen::ExtentExpr& expr,
                                    std::span<const int64_t> scalars,
                                    const std::function<std::string()>& what) const;
  StatusOr<uint64_t> Elements(size_t param, std::span<const int64_t> scalars) const;
  // The scalar arguments as the extents read them (by parameter index).
  static std::vector<int64_t> ScalarValues(std::span<const Arg> args);
  Status CreateExecutable() const;

  std::shared_ptr<hal::Device> device_;
  codegen::CompiledFunction compiled_;
  Status availability_;
  // The entry point's bindings in binding order (checked against the
  // metadata at load).
  std::vector<hal::BindingKind> bindings_;
  // Created by the first Prepare, under *prepare_mutex_ (the module's), and
  // published by `prepared_`; never changed afterwards.
  std::mutex* prepare_mutex_ = nullptr;
  mutable std::atomic<bool> prepared_{false};
  mutable Status prepare_status_;
  mutable hal::ExecutableRef executable_;
  std::vector<uint32_t> element_bytes_;   // per parameter (buffers)
};

class LoadedModule {
 public:
  // Checks every function's metadata (parameter types, shapes and launch
  // extents that parse, bindings in the kernel ABI's order) and creates no
  // executable: each is created when its function is first asked for (see
  // the file comment). Malformed metadata fails the load (kDataLoss).
  // Functions needing features the device lacks load as unavailable
  // (Kernel::availability) rather than failing the module.
  static StatusOr<std::unique_ptr<LoadedModule>> Load(const std::shared_ptr<hal::Device>& device,
                                                codegen::CompiledModule compiled);
  // Reads, checks and loads a compiled-module file.
  static StatusOr<std::unique_ptr<LoadedModule>> LoadFile(std::shared_ptr<hal::Device> device,
                                                    const std::string& path);

  // Every function, in the module's order, prepared or not.
  const std::vector<std::unique_ptr<Kernel>>& functions() const { return functions_; }
  // The function called `name`, prepared (Kernel::Prepare). Errors:
  // kInvalidArgument naming some of the functions there are when there is
  // none of that name; the device's rejection of the function. A function
  // the device lacks a feature for is returned: its availability() says why.
  // The Kernel is the module's: it lives as long as the module does.
  StatusOr<const Kernel*> Find(std::string_view name) const;
  // How many functions have been prepared (executables created or refused).
  size_t prepared_count() const;

 private:
  LoadedModule() = default;

  std::vector<std::unique_ptr<Kernel>> functions_;
  // Kernel names to indices in functions_ (the first of a repeated name).
  std::unordered_map<std::string_view, size_t> index_;
  std::mutex prepare_mutex_;
};

// The device's limits as kernels are compiled for and checked against.
TargetLimits TargetLimitsOf(const hal::Device& device);

}  // namespace kiln::runtime
