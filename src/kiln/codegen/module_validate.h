// Validation of a compiled module's metadata: what a reader checks before
// trusting a module that came from outside (a .kmod file), as
// docs/kernel-abi.md and docs/module-format.md describe.
#pragma once

#include "kiln/codegen/compiled_module.h"
#include "kiln/codegen/wgsl_codegen.h"
#include "kiln/support/status.h"

namespace kiln::codegen {

// Checks, per function: a non-empty name, distinct within the module; an
// entry point the WGSL declares; distinct, non-empty parameter names; valid
// types (buffers: a storable element type; scalars: i32, u32 or f32);
// buffers bound at 0, 1, ... in parameter order and scalars at their
// uniform offsets; the uniform binding and block size the ABI gives; a
// workgroup size of at least 1 on every axis, equal to the WGSL's
// @workgroup_size; shader-f16 listed for f16 buffers; and, where the source
// IR is carried, that it parses and declares the same function name and
// parameters (names, kinds, types and shapes). With `limits`, also that the
// workgroup size and storage fit them. Errors are kDataLoss naming the
// function and the field.
Status ValidateModule(const CompiledModule& module, const DeviceLimits* limits = nullptr);

}  // namespace kiln::codegen
