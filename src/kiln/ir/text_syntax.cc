#include "kiln/ir/text_syntax.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kiln/ir/expr_nodes.h"

namespace kiln::ir {

std::optional<std::pair<double, DataType>> ParseFloatSpecial(std::string_view word) {
  double value;
  if (word.substr(0, 3) == "inf") {
    value = INFINITY;
  } else if (word.substr(0, 3) == "nan") {
    value = NAN;
  } else {
    return std::nullopt;
  }
  std::string_view suffix = word.substr(3);
  if (suffix.empty()) return std::make_pair(value, kF32);
  StatusOr<DataType> t = DataType::FromString(suffix);
  if (!t.ok() || !t->is_float() || !t->is_scalar()) return std::nullopt;
  return std::make_pair(value, *t);
}

bool IsReservedWord(std::string_view word) {
  static constexpr std::string_view kWords[] = {
      "module",
      "fn",
      "let",
      "in",
      "for",
      "while",
      "if",
      "else",
      "alloc",
      "assert",
      "evaluate",
      "workgroup_barrier",
      "storage_barrier",
      "true",
      "false",
      "buffer",
      "strides",
      "attributes",
      "global",
      "shared",
      "local",
      "select",
      "ramp",
      "broadcast",
      "reinterpret",
      "min",
      "max",
      "floor_div",
      "floor_mod",
      "serial",
      "unroll",
      "vectorize",
      "threadIdx",
      "blockIdx",
  };
  for (std::string_view w : kWords) {
    if (w == word) return true;
  }
  return DataType::FromString(word).ok() || IntrinsicFromName(word).has_value() ||
         ParseFloatSpecial(word).has_value();
}

std::string SanitizeName(std::string_view name) {
  std::string out;
  for (char c : name) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    out += ok ? c : '_';
  }
  if (out.empty() || (out[0] >= '0' && out[0] <= '9')) out = "v_" + out;
  if (IsReservedWord(out)) out += '_';
  return out;
}

std::string QuoteString(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string FormatIntLiteral(DataType dtype, int64_t value) {
  std::string digits =
      dtype.is_uint() ? std::to_string(static_cast<uint64_t>(value)) : std::to_string(value);
  return dtype == kI32 ? digits : digits + dtype.ToString();
}

std::string FormatFloatLiteral(DataType dtype, double value) {
  std::string suffix = dtype == kF32 ? "" : dtype.ToString();
  if (std::isnan(value)) return (std::signbit(value) ? "-nan" : "nan") + suffix;
  if (std::isinf(value)) return (value < 0 ? "-inf" : "inf") + suffix;
  // Whole numbers print without an exponent ("65504.0", not "6.55e+04").
  if (value == std::trunc(value) && std::fabs(value) < 1e16) {
    char buf[40];
    std::snprintf(buf, sizeof(buf), "%.0f", value);
    return std::string(buf) + ".0" + suffix;
  }
  // Otherwise the shortest decimal form that rounds back to the same value in the type.
  std::string text;
  for (int precision = 1; precision <= 17; ++precision) {
    char buf[40];
    std::snprintf(buf, sizeof(buf), "%.*g", precision, value);
    text = buf;
    if (DecimalToFloatType(dtype, buf[0] == '-' ? buf + 1 : buf) == std::fabs(value)) break;
  }
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text + suffix;
}

}  // namespace kiln::ir
