#include "work.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <type_traits>
#include <variant>

namespace kiln::tool {
namespace {

class WorkParser {
 public:
  WorkParser(std::string_view text, const std::map<std::string, double>& scalars)
      : text_(text), scalars_(scalars) {}

  StatusOr<double> Parse() {
    KILN_ASSIGN_OR_RETURN(double value, Expr());
    SkipSpace();
    if (pos_ != text_.size()) return Error("an operator or the end");
    return value + 0.0;  // -0 counts no work: 0
  }

 private:
  StatusOr<double> Expr() {
    KILN_ASSIGN_OR_RETURN(double value, Term());
    while (Accept('+') || Accept('-')) {
      const char op = text_[pos_ - 1];
      KILN_ASSIGN_OR_RETURN(double rhs, Term());
      value = op == '+' ? value + rhs : value - rhs;
    }
    return value;
  }

  StatusOr<double> Term() {
    KILN_ASSIGN_OR_RETURN(double value, Factor());
    while (Accept('*') || Accept('/')) {
      const char op = text_[pos_ - 1];
      KILN_ASSIGN_OR_RETURN(double rhs, Factor());
      value = op == '*' ? value * rhs : value / rhs;
    }
    return value;
  }

  StatusOr<double> Factor() {
    SkipSpace();
    // Each '-', '(' and min/max nests one call deeper: bounded, so no
    // attribute can exhaust the stack.
    const bool nests =
        pos_ < text_.size() && (text_[pos_] == '-' || text_[pos_] == '(' ||
                                text_.substr(pos_, 3) == "min" || text_.substr(pos_, 3) == "max");
    if (nests && ++depth_ > kMaxDepth) {
      return InvalidArgument("column ", pos_ + 1, ": the expression nests more than ", kMaxDepth,
                             " deep ('-', '(', min and max) here");
    }
    struct Leave {
      int* depth;
      ~Leave() {
        if (depth) --*depth;
      }
    } leave{nests ? &depth_ : nullptr};
    if (Accept('-')) {
      KILN_ASSIGN_OR_RETURN(double value, Factor());
      return -value;
    }
    if (Accept('(')) {
      KILN_ASSIGN_OR_RETURN(double value, Expr());
      if (!Accept(')')) return Error("')'");
      return value;
    }
    if (pos_ < text_.size() && (std::isdigit(Byte()) || text_[pos_] == '.')) return Number();
    if (pos_ < text_.size() && (std::isalpha(Byte()) || text_[pos_] == '_')) {
      const size_t start = pos_;
      while (pos_ < text_.size() && (std::isalnum(Byte()) || text_[pos_] == '_')) ++pos_;
      const std::string name(text_.substr(start, pos_ - start));
      if (name == "min" || name == "max") {
        if (!Accept('(')) return Error("'(' after " + name);
        KILN_ASSIGN_OR_RETURN(double a, Expr());
        if (!Accept(',')) return Error("','");
        KILN_ASSIGN_OR_RETURN(double b, Expr());
        if (!Accept(')')) return Error("')'");
        return name == "min" ? std::min(a, b) : std::max(a, b);
      }
      auto it = scalars_.find(name);
      if (it == scalars_.end()) {
        std::string known;
        for (const auto& [n, v] : scalars_) known += (known.empty() ? "" : ", ") + n;
        return InvalidArgument("'", name, "' is not a scalar parameter (they are: ",
                               known.empty() ? "none" : known, ")");
      }
      return it->second;
    }
    return Error("a number, a scalar parameter, min, max, '(' or '-'");
  }

  StatusOr<double> Number() {
    const size_t start = pos_;
    while (pos_ < text_.size() && (std::isdigit(Byte()) || text_[pos_] == '.')) ++pos_;
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      while (pos_ < text_.size() && std::isdigit(Byte())) ++pos_;
    }
    const std::string token(text_.substr(start, pos_ - start));
    char* end = nullptr;
    const double value = std::strtod(token.c_str(), &end);
    if (end != token.c_str() + token.size() || std::isinf(value)) {
      pos_ = start;
      return Error("a number (\"" + token + "\" is not one)");
    }
    return value;
  }

  unsigned char Byte() const { return static_cast<unsigned char>(text_[pos_]); }

  void SkipSpace() {
    while (pos_ < text_.size() && std::isspace(Byte())) ++pos_;
  }

  bool Accept(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  Status Error(const std::string& expected) {
    SkipSpace();
    const std::string found =
        pos_ < text_.size() ? StrCat("'", text_.substr(pos_, 1), "'") : "the end";
    return InvalidArgument("column ", pos_ + 1, ": expected ", expected, ", found ", found);
  }

  static constexpr int kMaxDepth = 256;
  std::string_view text_;
  const std::map<std::string, double>& scalars_;
  size_t pos_ = 0;
  int depth_ = 0;
};

std::string What(const ir::Function& f) {
  return StrCat("attribute \"flops\" of ", f.name());
}

// The attribute's text, or an error for a negative integer; nullopt for an
// integer (returned in `count`) or no attribute.
StatusOr<std::optional<std::string>> WorkText(const ir::Function& f, std::optional<double>& count) {
  const ir::AttrValue* attr = f.GetAttr("flops");
  if (attr == nullptr) return std::optional<std::string>();
  if (const int64_t* n = std::get_if<int64_t>(attr)) {
    if (*n < 0) return InvalidArgument(What(f), " is negative (", *n, ")");
    count = static_cast<double>(*n);
    return std::optional<std::string>();
  }
  return std::optional<std::string>(std::get<std::string>(*attr));
}

}  // namespace

StatusOr<double> EvaluateWork(std::string_view text, const std::map<std::string, double>& scalars) {
  return WorkParser(text, scalars).Parse();
}

Status CheckDeclaredWork(const ir::Function& f) {
  std::optional<double> count;
  KILN_ASSIGN_OR_RETURN(std::optional<std::string> text, WorkText(f, count));
  if (!text) return Status::Ok();
  std::map<std::string, double> scalars;
  for (const ir::Param& p : f.params()) {
    if (!p.is_buffer()) scalars[p.var().name()] = 1.0;
  }
  return EvaluateWork(*text, scalars)
      .status()
      .WithContext(StrCat(What(f), " (\"", Shortened(*text, 160), "\")"));
}

StatusOr<std::optional<double>> DeclaredWork(const ir::Function& f,
                                             const std::vector<runtime::Arg>& args) {
  std::optional<double> count;
  KILN_ASSIGN_OR_RETURN(std::optional<std::string> text, WorkText(f, count));
  if (!text) return count;
  std::map<std::string, double> scalars;
  for (size_t i = 0; i < f.params().size() && i < args.size(); ++i) {
    const ir::Param& p = f.params()[i];
    if (p.is_buffer()) continue;
    std::visit(
        [&](auto v) {
          if constexpr (std::is_arithmetic_v<decltype(v)>) {
            scalars[p.var().name()] = static_cast<double>(v);
          }
        },
        args[i].scalar);
  }
  const std::string what = StrCat(What(f), " (\"", Shortened(*text, 160), "\")");
  auto flops = EvaluateWork(*text, scalars);
  if (!flops.ok()) return flops.status().WithContext(what);
  if (!(*flops >= 0) || std::isinf(*flops)) {
    // (NaN as "nan" whatever its sign bit.)
    return InvalidArgument(what, " is ", std::isnan(*flops) ? "nan" : StrCat(*flops),
                           " for these arguments; it must be finite and >= 0");
  }
  return std::optional<double>(*flops);
}

}  // namespace kiln::tool
