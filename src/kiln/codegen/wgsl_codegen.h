// The WGSL code generator: lowered kiln IR to WGSL text plus the metadata
// the runtime needs (compiled_module.h), following the kernel ABI
// (kernel_abi.h, docs/kernel-abi.md).
//
// One WGSL module per kernel, with exactly one entry point: each kernel keeps
// its own enable directives and required features, and the HAL compiles
// each as its own shader module.
//
// Errors: kUnimplemented for constructs WGSL cannot express (64-bit or 8-bit
// values, global allocations, a vectorized loop left in), kInvalidArgument
// for kernels that exceed the device limits in CodegenOptions or break the
// ABI; each message names the kernel and the offending construct.
#pragma once

#include <cstdint>

#include "kiln/codegen/compiled_module.h"
#include "kiln/ir/function.h"
#include "kiln/support/status.h"
#include "kiln/support/target_limits.h"
#include "kiln/transform/lower.h"

namespace kiln::codegen {

// The device limits a kernel must fit in (kiln/support/target_limits.h).
using DeviceLimits = TargetLimits;

struct CodegenOptions {
  DeviceLimits limits;
  // Where the parser found the source's statements (may be null; kept alive
  // by the caller): an error inside a loop of the user's says at which line
  // and column that loop is. CompileFunction takes it from lower.source.
  const ir::SourceMap* source = nullptr;
};

// WGSL and metadata for one kernel that has been through transform::Lower.
// Buffer shapes in the metadata are those of `lowered`'s (flattened)
// parameters; CompileFunction records the source shapes instead.
StatusOr<CompiledFunction> GenerateWgsl(const ir::Function& lowered,
                                        const CodegenOptions& options = {});

struct CompileOptions {
  transform::LowerOptions lower;
  // codegen.limits is the one set of limits: the verifier inside lowering
  // takes them from here.
  CodegenOptions codegen;
};

// Lower + GenerateWgsl, with the metadata's buffer shapes taken from
// `function` (the shapes callers pass tensors of). Errors get the kernel
// name as context.
StatusOr<CompiledFunction> CompileFunction(const ir::Function& function,
                                           const CompileOptions& options = {});

// The verifier's options for IR a user wrote, compiled with `options`: the
// target's limits, and up front (at the offending line) what lowering and
// code generation would refuse later: unrolled loops longer than the unroll
// pass takes, buffer element types kernels cannot bind.
ir::VerifyOptions SourceVerifyOptions(const CompileOptions& options);

// CompileFunction for every function of the module, in order.
StatusOr<CompiledModule> CompileModule(const ir::Module& module,
                                       const CompileOptions& options = {});

}  // namespace kiln::codegen
