#include "kiln/codegen/wgsl_helpers.h"

#include "kiln/codegen/wgsl_names.h"
#include "kiln/support/status.h"

namespace kiln::codegen {
namespace {

// "vec4<f32>" -> "vec4_f32", for use in a helper's name.
std::string Mangle(const std::string& type) {
  std::string out;
  for (char c : type) {
    if (c == '<') {
      out += '_';
    } else if (c != '>') {
      out += c;
    }
  }
  return out;
}

std::string HelperName(std::string_view what, const std::string& type) {
  return StrCat(NameSupply::kInternalPrefix, what, type.empty() ? "" : "_", Mangle(type));
}

}  // namespace

std::string WgslHelpers::Add(const std::string& name, const std::string& definition) {
  if (index_.emplace(name, definitions_.size()).second) definitions_.push_back(definition);
  return name;
}

std::string WgslHelpers::Erf(const std::string& type) {
  std::string name = HelperName("erf", type);
  return Add(name, StrCat("fn ", name, "(x : ", type, ") -> ", type, " {\n",
                          "  let t = 1.0 / (1.0 + 0.3275911 * abs(x));\n",
                          "  let p = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + ",
                          "t * (-1.453152027 + t * 1.061405429))));\n",
                          "  return sign(x) * (1.0 - p * exp(-x * x));\n", "}\n"));
}

std::string WgslHelpers::DivInt(const std::string& type, bool is_signed) {
  std::string name = HelperName("div", type);
  const std::string zero = type + "()";
  std::string replaced = StrCat("b == ", zero);
  if (is_signed) {
    replaced =
        StrCat("(", replaced, ") | ((a == ", type, "(-2147483647 - 1)) & (b == ", type, "(-1)))");
  }
  return Add(name, StrCat("fn ", name, "(a : ", type, ", b : ", type, ") -> ", type, " {\n",
                          "  return a / select(b, ", type, "(1), ", replaced, ");\n", "}\n"));
}

std::string WgslHelpers::RemInt(const std::string& type) {
  std::string name = HelperName("rem", type);
  const std::string zero = type + "()";
  std::string div = DivInt(type, true);
  return Add(name, StrCat("fn ", name, "(a : ", type, ", b : ", type, ") -> ", type, " {\n",
                          "  return select(a - b * ", div, "(a, b), ", zero, ", b == ", zero,
                          ");\n", "}\n"));
}

std::string WgslHelpers::RemUint(const std::string& type) {
  std::string name = HelperName("rem", type);
  const std::string zero = type + "()";
  return Add(name, StrCat("fn ", name, "(a : ", type, ", b : ", type, ") -> ", type, " {\n",
                          "  return a % select(b, ", type, "(1), b == ", zero, ");\n", "}\n"));
}

std::string WgslHelpers::FloorDivInt(const std::string& type) {
  std::string name = HelperName("floor_div", type);
  const std::string zero = type + "()";
  std::string div = DivInt(type, true);
  std::string rem = RemInt(type);
  return Add(name, StrCat("fn ", name, "(a : ", type, ", b : ", type, ") -> ", type, " {\n",
                          "  let q = ", div, "(a, b);\n", "  let r = ", rem, "(a, b);\n",
                          "  return select(q, q - ", type, "(1), (r != ", zero, ") & ((r < ", zero,
                          ") != (b < ", zero, ")));\n", "}\n"));
}

std::string WgslHelpers::FloorModInt(const std::string& type) {
  std::string name = HelperName("floor_mod", type);
  const std::string zero = type + "()";
  std::string rem = RemInt(type);
  return Add(name, StrCat("fn ", name, "(a : ", type, ", b : ", type, ") -> ", type, " {\n",
                          "  let r = ", rem, "(a, b);\n", "  return select(r, r + b, (r != ", zero,
                          ") & ((r < ", zero, ") != (b < ", zero, ")));\n", "}\n"));
}

std::string WgslHelpers::FloorModFloat(const std::string& type) {
  std::string name = HelperName("floor_mod", type);
  return Add(name, StrCat("fn ", name, "(a : ", type, ", b : ", type, ") -> ", type, " {\n",
                          "  return a - floor(a / b) * b;\n", "}\n"));
}

namespace {

// "f32" or "vecN<f32>".
std::string Vec(std::string_view scalar, int lanes) {
  return lanes == 1 ? std::string(scalar) : StrCat("vec", lanes, "<", scalar, ">");
}

std::string CompareName(std::string_view op) {
  if (op == "==") return "eq";
  if (op == "!=") return "ne";
  if (op == "<") return "lt";
  if (op == "<=") return "le";
  if (op == ">") return "gt";
  return "ge";
}

}  // namespace

std::string WgslHelpers::IsNan(int lanes) {
  const std::string f = Vec("f32", lanes), u = Vec("u32", lanes), b = Vec("bool", lanes);
  std::string name = HelperName("is_nan", f);
  return Add(name, StrCat("fn ", name, "(x : ", f, ") -> ", b, " {\n", "  return (bitcast<", u,
                          ">(x) & ", u, "(0x7fffffffu)) > ", u, "(0x7f800000u);\n", "}\n"));
}

std::string WgslHelpers::FloatCompare(std::string_view op, int lanes) {
  const std::string f = Vec("f32", lanes), b = Vec("bool", lanes);
  std::string is_nan = IsNan(lanes);
  std::string name = HelperName(CompareName(op), f);
  std::string either_nan = StrCat("(", is_nan, "(a) | ", is_nan, "(b))");
  std::string body =
      op == "!=" ? StrCat("(a != b) | ", either_nan) : StrCat("(a ", op, " b) & !", either_nan);
  return Add(name, StrCat("fn ", name, "(a : ", f, ", b : ", f, ") -> ", b, " {\n", "  return ",
                          body, ";\n", "}\n"));
}

std::string WgslHelpers::FloatToInt(bool is_signed, int lanes) {
  const std::string f = Vec("f32", lanes), i = Vec(is_signed ? "i32" : "u32", lanes);
  std::string is_nan = IsNan(lanes);
  std::string name = HelperName(is_signed ? "to_i32" : "to_u32", f);
  const char* lo = is_signed ? "-2147483648.0f" : "0.0f";
  const char* hi = is_signed ? "2147483520.0f" : "4294967040.0f";
  return Add(
      name, StrCat("fn ", name, "(x : ", f, ") -> ", i, " {\n", "  return select(", i, "(clamp(x, ",
                   f, "(", lo, "), ", f, "(", hi, "))), ", i, "(), ", is_nan, "(x));\n", "}\n"));
}

std::string WgslHelpers::Tanh(int lanes) {
  const std::string f = Vec("f32", lanes);
  std::string is_nan = IsNan(lanes);
  std::string name = HelperName("tanh", f);
  auto c = [&](const char* v) { return StrCat(f, "(", v, ")"); };
  // tanh's odd series to x^9 for |x| < 0.25 (its first omitted term is
  // below 0.01 ulp there; x times a sum keeps -0.0); the implementations' tanh, built from exp,
  // loses relative accuracy near 0 (lavapipe: 1.3% at 1e-6, 3e-8 for 1e-10).
  std::string series =
      StrCat("x * (", c("1.0f"), " + x2 * (", c("-0.33333334f"), " + x2 * (", c("0.13333334f"),
             " + x2 * (", c("-0.053968254f"), " + x2 * ", c("0.021869488f"), "))))");
  return Add(name,
             StrCat("fn ", name, "(x : ", f, ") -> ", f, " {\n", "  let x2 = x * x;\n",
                    "  let near_zero = ", series, ";\n", "  let far = tanh(clamp(x, ", c("-16.0f"),
                    ", ", c("16.0f"), "));\n", "  return select(select(far, near_zero, abs(x) < ",
                    c("0.25f"), "), x, ", is_nan, "(x));\n", "}\n"));
}

std::string WgslHelpers::ConstZero(ZeroOp op, int lanes) {
  const std::string f = Vec("f32", lanes), u = Vec("u32", lanes);
  auto k = [&](const char* v) { return StrCat(u, "(", v, ")"); };
  const std::string magnitude = StrCat("(bits & ", k("0x7fffffffu"), ")");
  // The zero of the product's or quotient's sign, and NaN.
  const std::string signed_zero =
      StrCat("  let zero = (bits & ", k("0x80000000u"), ") ^ ", k("sign"), ";\n");
  const std::string nan = k("0x7fc00000u");
  std::string what, args = StrCat("x : ", f), result;
  switch (op) {
    case ZeroOp::kTimesZero:
      what = "times_zero";
      args += ", sign : u32";
      result = StrCat(signed_zero, "  return bitcast<", f, ">(select(zero, ", nan, ", ", magnitude,
                      " >= ", k("0x7f800000u"), "));\n");
      break;
    case ZeroOp::kZeroOver:
      what = "zero_over";
      args += ", sign : u32";
      result = StrCat(signed_zero, "  return bitcast<", f, ">(select(zero, ", nan, ", (", magnitude,
                      " == ", u, "()) | (", magnitude, " > ", k("0x7f800000u"), ")));\n");
      break;
    case ZeroOp::kPlusZero:
      what = "plus_zero";
      result = StrCat("  return bitcast<", f, ">(select(bits, ", u,
                      "(), bits == ", k("0x80000000u"), "));\n");
      break;
    case ZeroOp::kZeroMinus:
      what = "zero_minus";
      result = StrCat("  return bitcast<", f, ">(select(bits ^ ", k("0x80000000u"), ", ", u,
                      "(), bits == ", u, "()));\n");
      break;
    case ZeroOp::kZeroMod:
      what = "zero_mod";
      result = StrCat("  return bitcast<", f, ">(select(", u, "(), ", nan, ", (", magnitude,
                      " == ", u, "()) | (", magnitude, " >= ", k("0x7f800000u"), ")));\n");
      break;
    case ZeroOp::kSelfMinus:
      what = "self_minus";
      result = StrCat("  return bitcast<", f, ">(select(", u, "(), ", nan, ", ", magnitude,
                      " >= ", k("0x7f800000u"), "));\n");
      break;
    case ZeroOp::kSelfOver:
      what = "self_over";
      result =
          StrCat("  return bitcast<", f, ">(select(", k("0x3f800000u"), ", ", nan, ", (", magnitude,
                 " == ", u, "()) | (", magnitude, " >= ", k("0x7f800000u"), ")));\n");
      break;
  }
  std::string name = HelperName(what, f);
  return Add(name, StrCat("fn ", name, "(", args, ") -> ", f, " {\n", "  let bits = bitcast<", u,
                          ">(x);\n", result, "}\n"));
}

std::string WgslHelpers::RunTime(const std::string& type) {
  std::string name = HelperName("rt", type);
  return Add(name,
             StrCat("fn ", name, "(x : ", type, ") -> ", type, " {\n", "  return x;\n", "}\n"));
}

std::string WgslHelpers::F32FromBits() {
  std::string name = HelperName("f32_from_bits", "");
  return Add(name, StrCat("fn ", name, "(bits : u32) -> f32 {\n", "  return bitcast<f32>(bits);\n",
                          "}\n"));
}

std::string WgslHelpers::F16FromBits() {
  std::string name = HelperName("f16_from_bits", "");
  return Add(name, StrCat("fn ", name, "(bits : u32) -> f16 {\n",
                          "  return f16(unpack2x16float(bits).x);\n", "}\n"));
}

std::string WgslHelpers::Definitions() const {
  std::string out;
  for (const std::string& definition : definitions_) out += definition + "\n";
  return out;
}

}  // namespace kiln::codegen
