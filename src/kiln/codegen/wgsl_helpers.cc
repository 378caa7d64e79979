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

std::string WgslHelpers::RemInt(const std::string& type) {
  std::string name = HelperName("rem", type);
  const std::string zero = type + "()";
  return Add(name,
             StrCat("fn ", name, "(a : ", type, ", b : ", type, ") -> ", type, " {\n",
                    "  return select(a - b * (a / b), ", zero, ", b == ", zero, ");\n", "}\n"));
}

std::string WgslHelpers::FloorDivInt(const std::string& type) {
  std::string name = HelperName("floor_div", type);
  const std::string zero = type + "()";
  std::string rem = RemInt(type);
  return Add(name, StrCat("fn ", name, "(a : ", type, ", b : ", type, ") -> ", type, " {\n",
                          "  let q = a / b;\n", "  let r = ", rem, "(a, b);\n",
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
