// Well-formedness checks for functions and modules.
//
// Verify reports the first problem found as a kCompileError whose message
// names the function, the line of the offending statement in Print(function)
// (or Print(module); with a SourceMap, the line and column in the parsed
// text), the offending line quoted, and what was expected:
//   "function 'vadd', line 6: `C[i] = A[i] + 1`: operands of `A[i] + 1`
//    have different types: f32 and i32"
//
// Checked:
//  * types: operands agree exactly (no implicit conversion), lanes agree,
//    conditions are bool, indices are integers, stored values match the
//    buffer's element type and the index lanes, intrinsic operand types,
//    casts/reinterprets are between compatible types;
//  * scoping: every var and buffer is defined before use (parameters, let,
//    for, alloc) and bound exactly once in the function; shapes of
//    parameter buffers and blockIdx extents use constants and scalar
//    parameters only;
//  * scalar parameters are i32, u32 or f32;
//  * loops: vectorized loops have a constant extent of 2, 3 or 4 and
//    unrolled ones a constant min and extent (what the passes need);
//    thread-bound loops have min 0 and step 1; each launch axis is
//    bound with the same extent everywhere; threadIdx extents are constant
//    and their product is at most options.max_threads_per_workgroup;
//    blockIdx.z is rejected (reserved by the kernel ABI); a launch axis is not
//    bound inside a loop bound to the same axis; step is a positive constant;
//  * uniformity: barriers and subgroup operations are not under an if or
//    while condition, a loop bound, or an if_then_else condition that may
//    differ between the threads of a workgroup (one that uses a threadIdx
//    variable, a variable derived from one, a memory load, or a subgroup
//    result);
//  * shared allocations have constant shapes and their total size fits
//    options.max_workgroup_storage_bytes; local allocations have constant
//    shapes and at most kMaxLocalElements elements;
//  * expressions nest at most kMaxExprDepth levels (expr_nodes.h);
//  * function names are identifiers, distinct within a module;
//  * subgroup intrinsics only where options.allow_subgroups.
#pragma once

#include <cstdint>
#include <optional>

#include "kiln/ir/function.h"
#include "kiln/ir/source_map.h"
#include "kiln/support/status.h"
#include "kiln/support/target_limits.h"

namespace kiln::ir {

// The most elements a local buffer may hold (WGSL implementations refuse
// larger arrays in a function).
inline constexpr int64_t kMaxLocalElements = 65535;

// The most iterations one unrolled loop may have (transform::Unroll's
// default limit, a guard on code size; te::Lower refuses more by stage).
inline constexpr int64_t kMaxUnrollExtent = 256;

struct VerifyOptions {
  // The target's limits: threads per workgroup, workgroup storage, storage
  // buffers per shader stage (WebGPU's minimums unless told).
  TargetLimits limits;
  // Whether subgroup_* intrinsics are allowed.
  bool allow_subgroups = true;
  // When set, unrolled loops of a larger constant extent are refused here,
  // at their line, rather than later by the unroll pass (`kiln compile`
  // sets the pass's limit).
  std::optional<int64_t> max_unrolled_extent;
  // Whether buffer parameters must hold a type a kernel binds (f32, f16,
  // i32, u32, bool or int8x4): the WGSL target's rule, where the CPU
  // interpreter takes any type.
  bool kernel_buffer_types = false;
  // When set, serial loops, while loops and ifs nest at most this deep: the
  // blocks of WGSL they become count against the implementations' limit on
  // nested statements (kMaxWgslNestedBlocks).
  std::optional<int> max_nested_blocks;
  // Whether an index that is a constant must lie inside its dimension: never
  // negative, and below the extent where that is a constant too. (WGSL
  // refuses such constants at load time, where no IR line is known.)
  bool constant_indices_in_bounds = false;
};

// The blocks (serial loops, while loops, ifs) kiln nests in a WGSL function:
// Tint counts each as two of the 127 nested statements the WGSL spec
// guarantees ("statement nesting depth / chaining length exceeds limit of
// 127" past 63 levels, the function's own braces one of them).
inline constexpr int kMaxWgslNestedBlocks = 62;

Status Verify(const Function& function, const VerifyOptions& options = {});
// The type rules of Verify on one expression outside any function: operand
// and index types, intrinsic operands, casts, let bindings and depth; not
// scoping or uniformity. The message quotes the offending subexpression:
//   "`A[i]` has type i32; expected a float (operand of exp)"
Status CheckExpressionTypes(const Expr& e);
// The depth of the function's deepest expression (ExprDepth), counting up
// to cap + 1; without recursion, so safe on any function.
int DeepestExpression(const Function& function, int cap = kMaxExprDepth);
// The elements an allocation spans: the product of its extents, or with
// strides 1 + sum((extent - 1) * stride) where that is larger (padded rows
// take their padding), capped at 2^40. Empty where an extent is not a
// positive constant or a stride not a positive constant.
std::optional<int64_t> AllocatedElements(const Buffer& buffer);
Status Verify(const Module& module, const VerifyOptions& options = {});
// The same for a module parsed with ParseModule(text, &source): messages give
// the line and column in that text ("function 'vadd', line 12, column 5:
// ...") and quote that line.
Status Verify(const Module& module, const VerifyOptions& options, const SourceMap& source);

}  // namespace kiln::ir
