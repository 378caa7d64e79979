#include "kiln/codegen/extent_expr.h"

#include "kiln/codegen/compiled_module.h"
#include "kiln/support/int_arith.h"

namespace kiln::codegen {

ExtentExpr ExtentExpr::Constant(int64_t value) {
  ExtentExpr e;
  e.ops.push_back({ExtentOp::Code::kConst, 64, true, value});
  e.text = StrCat(value);
  return e;
}

ExtentExpr ExtentExpr::Param(int64_t index, std::string name, bool is_signed) {
  ExtentExpr e;
  e.ops.push_back({ExtentOp::Code::kParam, 32, is_signed, index});
  e.text = std::move(name);
  return e;
}

StatusOr<int64_t> Evaluate(const ExtentExpr& e, ExtentArgs args) {
  int64_t stack[32];
  size_t top = 0;
  for (const ExtentOp& op : e.ops) {
    const int bits = op.bits;
    const bool sign = op.is_signed;
    switch (op.code) {
      case ExtentOp::Code::kConst:
      case ExtentOp::Code::kParam: {
        if (top == std::size(stack)) return Internal("extent '", e.text, "' is too deep");
        int64_t v = op.value;
        if (op.code == ExtentOp::Code::kParam) {
          if (op.value < 0 || static_cast<size_t>(op.value) >= args.size()) {
            return Internal("extent '", e.text, "' names parameter ", op.value);
          }
          v = args[static_cast<size_t>(op.value)];
        }
        stack[top++] = WrapInt(static_cast<uint64_t>(v), bits, sign);
        continue;
      }
      case ExtentOp::Code::kCast:
        if (top < 1) return Internal("extent '", e.text, "' is malformed");
        stack[top - 1] = WrapInt(static_cast<uint64_t>(stack[top - 1]), bits, sign);
        continue;
      default:
        break;
    }
    if (top < 2) return Internal("extent '", e.text, "' is malformed");
    const int64_t b = stack[--top];
    const int64_t a = stack[top - 1];
    const auto ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
    // The exact value, where the operation can leave the type.
    __int128 exact = 0;
    bool checked = true;
    switch (op.code) {
      case ExtentOp::Code::kAdd:
        exact = static_cast<__int128>(a) + b;
        break;
      case ExtentOp::Code::kSub:
        exact = static_cast<__int128>(a) - b;
        break;
      case ExtentOp::Code::kMul:
        exact = static_cast<__int128>(a) * b;
        break;
      case ExtentOp::Code::kDiv:
      case ExtentOp::Code::kFloorDiv:
        exact = b == 0 ? 0 : static_cast<__int128>(a) / b;  // (the operation's own rule for 0)
        checked = b != 0;
        break;
      default:
        checked = false;
        break;
    }
    if (checked) {
      const __int128 lo = sign ? -(static_cast<__int128>(1) << (bits - 1)) : 0;
      const __int128 hi = sign ? (static_cast<__int128>(1) << (bits - 1)) - 1
                               : (static_cast<__int128>(1) << bits) - 1;
      if (exact < lo || exact > hi) {
        const char* symbol = op.code == ExtentOp::Code::kAdd   ? " + "
                             : op.code == ExtentOp::Code::kSub ? " - "
                             : op.code == ExtentOp::Code::kMul ? " * "
                                                               : " / ";
        return InvalidArgument("`", e.text, "` overflows ", sign ? "i" : "u", int{bits},
                               " for these arguments (", a, symbol, b,
                               "), where the kernel's arithmetic would wrap");
      }
    }
    int64_t r = 0;
    switch (op.code) {
      case ExtentOp::Code::kAdd:
        r = WrapInt(ua + ub, bits, sign);
        break;
      case ExtentOp::Code::kSub:
        r = WrapInt(ua - ub, bits, sign);
        break;
      case ExtentOp::Code::kMul:
        r = WrapInt(ua * ub, bits, sign);
        break;
      case ExtentOp::Code::kDiv:
        r = IntDiv(a, b, bits, sign);
        break;
      case ExtentOp::Code::kMod:
        r = IntMod(a, b, bits, sign);
        break;
      case ExtentOp::Code::kFloorDiv:
        r = IntFloorDiv(a, b, bits, sign);
        break;
      case ExtentOp::Code::kFloorMod:
        r = IntFloorMod(a, b, bits, sign);
        break;
      case ExtentOp::Code::kMin:
        r = IntMin(a, b, bits, sign);
        break;
      case ExtentOp::Code::kMax:
        r = IntMax(a, b, bits, sign);
        break;
      default:
        return Internal("extent '", e.text, "' has an unknown operation");
    }
    stack[top - 1] = r;
  }
  if (top != 1) return Internal("extent '", e.text, "' is malformed");
  return stack[0];
}

Status Validate(const ExtentExpr& e, const std::vector<bool>& integer_params) {
  size_t depth = 0;
  for (const ExtentOp& op : e.ops) {
    if (static_cast<uint8_t>(op.code) > ExtentOp::kLastCode) {
      return DataLoss("extent '", e.text, "' has an unknown operation ", static_cast<int>(op.code));
    }
    if (op.bits != 32 && op.bits != 64) {
      return DataLoss("extent '", e.text, "' has an operation of ", int{op.bits}, " bits");
    }
    switch (op.code) {
      case ExtentOp::Code::kParam:
        if (op.value < 0 || static_cast<size_t>(op.value) >= integer_params.size() ||
            !integer_params[static_cast<size_t>(op.value)]) {
          return DataLoss("extent '", e.text, "' reads parameter ", op.value,
                          ", which is not an integer scalar parameter");
        }
        [[fallthrough]];
      case ExtentOp::Code::kConst:
        if (++depth > 32) return DataLoss("extent '", e.text, "' is nested too deeply");
        break;
      case ExtentOp::Code::kCast:
        if (depth < 1) return DataLoss("extent '", e.text, "' is malformed");
        break;
      default:
        if (depth < 2) return DataLoss("extent '", e.text, "' is malformed");
        --depth;
        break;
    }
  }
  if (depth != 1) return DataLoss("extent '", e.text, "' is malformed");
  return Status::Ok();
}

std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kI32:
      return "i32";
    case DType::kU32:
      return "u32";
    case DType::kBool:
      return "bool";
    case DType::kInt8x4:
      return "int8x4";
  }
  return "?";
}

std::optional<DType> DTypeFromName(std::string_view name) {
  for (uint8_t t = 0; t <= kLastDType; ++t) {
    if (DTypeName(static_cast<DType>(t)) == name) return static_cast<DType>(t);
  }
  return std::nullopt;
}

uint32_t DTypeBufferBytes(DType t) {
  return t == DType::kF16 ? 2 : 4;
}

}  // namespace kiln::codegen
