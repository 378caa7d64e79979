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
    // The exact value of an addition, subtraction or multiplication, which
    // can leave the type (the operands are the type's values: an unsigned
    // one is `ua`, its bit pattern). Division keeps the IR's own rules
    // (x / 0 == x, MIN / -1 == MIN).
    const bool checked = op.code == ExtentOp::Code::kAdd || op.code == ExtentOp::Code::kSub ||
                         op.code == ExtentOp::Code::kMul;
    if (checked) {
      bool outside = false;
      if (sign) {
        // |a|, |b| <= 2^63: every result fits a signed 128-bit value.
        const __int128 x = a, y = b;
        const __int128 exact = op.code == ExtentOp::Code::kAdd   ? x + y
                               : op.code == ExtentOp::Code::kSub ? x - y
                                                                 : x * y;
        const __int128 lo = -(static_cast<__int128>(1) << (bits - 1));
        outside = exact < lo || exact > -lo - 1;
      } else {
        const unsigned __int128 x = ua, y = ub;
        const unsigned __int128 hi = bits == 64 ? ~static_cast<uint64_t>(0)
                                                : (static_cast<unsigned __int128>(1) << bits) - 1;
        outside = op.code == ExtentOp::Code::kAdd   ? x + y > hi
                  : op.code == ExtentOp::Code::kSub ? x < y
                                                    : x * y > hi;
      }
      if (outside) {
        const char* symbol = op.code == ExtentOp::Code::kAdd   ? " + "
                             : op.code == ExtentOp::Code::kSub ? " - "
                                                               : " * ";
        const std::string x = sign ? StrCat(a) : StrCat(ua), y = sign ? StrCat(b) : StrCat(ub);
        return InvalidArgument("`", e.text, "` overflows ", sign ? "i" : "u", int{bits},
                               " for these arguments (", x, symbol, y,
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
