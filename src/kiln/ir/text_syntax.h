// Spelling rules of the text form that the printer and the parser share
// (internal to kiln_ir; not part of the public API).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kiln/ir/types.h"

namespace kiln::ir {

// Words that cannot name a var, buffer or function: keywords, type names,
// intrinsic and builtin names, loop kinds, and float specials (inf, nanf16, ...).
bool IsReservedWord(std::string_view word);

// `name` turned into a usable identifier: other characters become '_', a
// leading digit or an empty name gets a "v_" prefix, and reserved words get
// a trailing '_'.
std::string SanitizeName(std::string_view name);

// "...", with \" \\ \n \t and \xHH escapes.
std::string QuoteString(std::string_view s);

// Integer literal: "42", "-3", "7u32", "255u8", "-1i64".
std::string FormatIntLiteral(DataType dtype, int64_t value);

// Float literal that reads back to exactly `value`: "1.5", "0.1f16",
// "1e+30f64", "inf", "-inff16", "nan".
std::string FormatFloatLiteral(DataType dtype, double value);

// If `word` is inf/nan with an optional float type suffix, its value and type.
std::optional<std::pair<double, DataType>> ParseFloatSpecial(std::string_view word);

}  // namespace kiln::ir
