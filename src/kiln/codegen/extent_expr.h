// Integer expressions over a kernel's scalar parameters, in a small postfix
// form the runtime evaluates directly: buffer shapes and strides and launch
// extents in a compiled module's metadata. They follow the IR's integer
// rules (kiln/support/int_arith.h): each operation wraps in its type,
// division truncates, x / 0 == x, x % 0 == 0. No parser or interpreter is
// needed to evaluate them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kiln/support/status.h"

namespace kiln::codegen {

struct ExtentOp {
  enum class Code : uint8_t {
    kConst = 0,  // push `value`
    kParam = 1,  // push scalar parameter number `value` (by parameter index)
    kAdd = 2,
    kSub = 3,
    kMul = 4,
    kDiv = 5,
    kMod = 6,
    kFloorDiv = 7,
    kFloorMod = 8,
    kMin = 9,
    kMax = 10,
    kCast = 11,  // convert the top to this op's type
  };
  static constexpr uint8_t kLastCode = 11;

  Code code = Code::kConst;
  uint8_t bits = 32;      // the type of the result: 32 or 64 bits,
  bool is_signed = true;  // signed or unsigned
  int64_t value = 0;

  friend bool operator==(const ExtentOp&, const ExtentOp&) = default;
};

struct ExtentExpr {
  std::vector<ExtentOp> ops;  // postfix; evaluates to one value
  std::string text;           // the IR text it came from, for messages

  static ExtentExpr Constant(int64_t value);
  // Scalar parameter number `index` (an i32 one unless `is_signed` is false).
  static ExtentExpr Param(int64_t index, std::string name, bool is_signed = true);
  friend bool operator==(const ExtentExpr&, const ExtentExpr&) = default;
};

// A scalar argument as an integer normalised to its parameter's type (i32
// sign-extended, u32 zero-extended), indexed by parameter index; entries for
// buffer parameters are unused.
using ExtentArgs = std::span<const int64_t>;

// Evaluates `e` with the IR's integer semantics. Errors for a malformed
// program (which Validate rejects first), and kInvalidArgument where an
// addition, subtraction or multiplication leaves its type for these
// arguments: the kernel's own arithmetic would wrap there, so the
// extent it computes means nothing (a shape `n * stride` of i32 at n =
// stride = 65537). Casts convert as the IR's do.
StatusOr<int64_t> Evaluate(const ExtentExpr& e, ExtentArgs args);

// Checks that `e` is a well-formed program over the parameters whose
// indices `integer_params` marks (true: an integer scalar parameter).
Status Validate(const ExtentExpr& e, const std::vector<bool>& integer_params);

}  // namespace kiln::codegen
