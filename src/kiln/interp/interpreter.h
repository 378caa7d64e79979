// The CPU interpreter of kiln's IR: the reference every GPU result is
// checked against.
//
// Execution model (what a WebGPU dispatch of the kernel does):
//  * The launch grid comes from the kernel's thread-bound loops: blockIdx.x
//    and blockIdx.y give the number of workgroups (their extents may be
//    expressions over scalar parameters and lets above the loops), threadIdx.x/y/z
//    the workgroup size. An axis no loop binds has extent 1.
//  * Workgroups run one after another, blockIdx.y outer, blockIdx.x inner.
//    The threads of a workgroup run in lockstep: each statement is executed
//    for every thread under an active mask before the next one starts; `if`
//    runs both branches under complementary masks; loops iterate while any
//    thread is active. Barriers therefore synchronise naturally (this is one
//    of the interleavings a GPU may produce); a barrier reached by only some
//    threads of the workgroup is reported as an error.
//  * Everything outside the thread-bound loops is executed by every thread,
//    as on the GPU. A thread-bound loop binds its variable to the thread's
//    (or workgroup's) index and runs its body once.
//  * Memory: buffer parameters are the caller's HostBuffers, modified in
//    place; `alloc ... local` is private to each thread, `alloc ... shared`
//    is one buffer per workgroup, `alloc ... global` one per launch.
//    Allocations start zero-filled (WebGPU zero-initialises workgroup and
//    function memory).
//  * Values follow WGSL for run-time values (see wgsl_semantics.h): integer
//    arithmetic wraps; `/` and `%` truncate, x / 0 == x, x % 0 == 0;
//    floor_div/floor_mod round toward negative infinity; shift amounts are
//    taken modulo the bit width; float -> integer casts saturate (NaN -> 0);
//    f32 is computed in float, f16 in float rounded to half after every
//    operation; `select` evaluates both sides, `if_then_else` only the taken
//    one; math intrinsics (exp, erf, tanh, sigmoid, rsqrt, ...) are computed
//    in float for f16/f32; dot4i8 is WGSL's dot4I8Packed.
//  * Subgroups: threads are grouped by linear local index
//    (x + X * (y + Y * z)) into subgroups of RunOptions::subgroup_size; a
//    subgroup operation combines the threads of the subgroup that execute it
//    (the active ones), in increasing lane order.
//
// Errors (never crashes, never undefined behaviour on the host):
//  * a load or store outside a buffer (per dimension, and for the flattened
//    offset): kInvalidArgument naming the buffer, the index, the extent and
//    the block and thread;
//  * an `assert` that fails: kInvalidArgument with the assert's message;
//  * a while loop that runs more than RunOptions::max_while_iterations
//    iterations: kDeadlineExceeded;
//  * arguments that do not match the parameters (count, kind, dtype, a buffer
//    too small for the kernel's shape): kInvalidArgument, before anything runs;
//  * constructs the interpreter cannot run (ill-typed IR, a var used outside
//    its scope): kInvalidArgument or kUnimplemented.
// After an error the contents of the buffers are unspecified.
//
// The interpreter expects a verified function (ir::Verify) and is not
// thread-safe across calls sharing HostBuffers; distinct calls are independent.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <span>

#include "kiln/interp/value.h"
#include "kiln/ir/expr.h"
#include "kiln/ir/function.h"
#include "kiln/support/status.h"

namespace kiln::interp {

struct RunOptions {
  // Threads per subgroup for the subgroup_* intrinsics.
  int subgroup_size = 32;
  // A while loop running more iterations than this (in one execution of the
  // loop) is an error.
  int64_t max_while_iterations = 100'000'000;
};

// The launch grid of a kernel for given scalar arguments.
struct LaunchDims {
  std::array<int64_t, 2> blocks = {1, 1};      // blockIdx.x, blockIdx.y extents
  std::array<int64_t, 3> threads = {1, 1, 1};  // threadIdx.x, .y, .z extents

  int64_t num_blocks() const { return blocks[0] * blocks[1]; }
  int64_t threads_per_block() const { return threads[0] * threads[1] * threads[2]; }
};

// Runs `function` over its whole launch grid. `args` are bound to the
// parameters by position; buffers are read and written in place.
Status Run(const ir::Function& function, std::span<ArgValue> args, const RunOptions& options = {});

// The launch grid `function` has when called with `args` (only the scalar
// arguments are read; buffers may be empty).
StatusOr<LaunchDims> ComputeLaunchDims(const ir::Function& function,
                                       std::span<const ArgValue> args);

// Evaluates a scalar expression that reads no buffer, with its free
// variables bound by `bindings` (each Value of the variable's type). For the
// runtime: launch extents and buffer sizes from scalar arguments.
StatusOr<Value> EvaluateScalar(const ir::Expr& expr,
                               const std::map<const ir::VarNode*, Value>& bindings);

}  // namespace kiln::interp
