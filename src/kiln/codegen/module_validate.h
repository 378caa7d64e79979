// Validation of a compiled module's metadata: what a reader checks before
// trusting a module that came from outside (a .kmod file), as
// docs/kernel-abi.md and docs/module-format.md describe.
#pragma once

#include <string>

#include "kiln/codegen/compiled_module.h"
#include "kiln/support/status.h"
#include "kiln/support/target_limits.h"

namespace kiln::codegen {

// Checks, per function: a non-empty name, distinct within the module; an
// entry point the WGSL declares; distinct, non-empty parameter names; valid
// types (buffers: a storable element type; scalars: i32, u32 or f32);
// buffers bound at 0, 1, ... in parameter order and scalars at their
// uniform offsets; the uniform binding and block size the ABI gives; a
// workgroup size of at least 1 on every axis, equal to the WGSL's
// @workgroup_size; shader-f16 listed for f16 buffers; strides matching the
// shape's rank; and extent programs that are well formed and read only
// integer scalar parameters. Errors are kDataLoss naming the function and
// the field. (That a carried source IR agrees with the metadata is checked
// where it is used: check::ValidateSourceIr.)
Status ValidateModule(const CompiledModule& module);

// Why a device with `limits` cannot run the kernel (its workgroup size,
// workgroup storage or number of storage buffers), or "" when it can.
std::string FitsLimits(const KernelMetadata& metadata, const TargetLimits& limits);

}  // namespace kiln::codegen
