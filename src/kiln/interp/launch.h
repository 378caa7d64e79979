// Binding a call's arguments to a kernel's parameters, and finding the
// launch grid of the kernel for those arguments. Internal to the interpreter.
#pragma once

#include <map>
#include <span>

#include "kiln/interp/interpreter.h"
#include "kiln/interp/value.h"
#include "kiln/ir/function.h"

namespace kiln::interp {

using ScalarBindings = std::map<const ir::VarNode*, Value>;

// Checks that `args` match the parameters of `function` in number, kind
// (buffer or scalar) and scalar type; returns the scalar parameters' values.
StatusOr<ScalarBindings> BindScalarArgs(const ir::Function& function,
                                        std::span<const ArgValue> args);

// The extents of the thread-bound loops of `function`, evaluated with the
// scalar arguments and the lets enclosing each loop.
StatusOr<LaunchDims> LaunchDimsFor(const ir::Function& function, const ScalarBindings& scalars);

}  // namespace kiln::interp
