#include "kiln/ir/lexer.h"

#include <cstdio>

#include "kiln/ir/text_syntax.h"

namespace kiln::ir {
namespace {

bool IsIdentStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool IsDigit(char c) {
  return c >= '0' && c <= '9';
}
bool IsIdentChar(char c) {
  return IsIdentStart(c) || IsDigit(c);
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

class Lexer {
 public:
  explicit Lexer(std::string_view text) : text_(text) {}

  // The next token into `*token` (kEnd at the end of the text).
  Status Lex(Token* token) {
    SkipSpaceAndComments();
    *token = Token();
    token->line = line_;
    token->column = column_;
    if (pos_ >= text_.size()) return Status::Ok();
    char c = text_[pos_];
    if (IsIdentStart(c)) {
      token->kind = TokenKind::kIdent;
      size_t end = pos_;
      while (end < text_.size() && IsIdentChar(text_[end])) ++end;
      token->text.assign(text_.substr(pos_, end - pos_));
      column_ += static_cast<int>(end - pos_);
      pos_ = end;
      return Status::Ok();
    }
    if (IsDigit(c)) return LexNumber(token);
    if (c == '"') return LexString(token);
    return LexPunct(token);
  }

 private:
  char Peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }

  char Advance() {
    char c = text_[pos_++];
    if (c == '\n') {
      ++line_;
      column_ = 1;
    } else {
      ++column_;
    }
    return c;
  }

  Status Error(int line, int column, const std::string& what) const {
    return CompileError("line ", line, ", column ", column, ": ", what);
  }

  void SkipSpaceAndComments() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        Advance();
      } else if (c == '/' && Peek(1) == '/') {
        while (pos_ < text_.size() && text_[pos_] != '\n') Advance();
      } else {
        return;
      }
    }
  }

  Status LexNumber(Token* token) {
    token->kind = TokenKind::kInt;
    while (IsDigit(Peek())) token->text += Advance();
    if (Peek() == '.' && IsDigit(Peek(1))) {
      token->kind = TokenKind::kFloat;
      token->text += Advance();
      while (IsDigit(Peek())) token->text += Advance();
    }
    bool signed_exponent = (Peek(1) == '+' || Peek(1) == '-') && IsDigit(Peek(2));
    if ((Peek() == 'e' || Peek() == 'E') && (IsDigit(Peek(1)) || signed_exponent)) {
      token->kind = TokenKind::kFloat;
      token->text += Advance();
      if (!IsDigit(Peek())) token->text += Advance();
      while (IsDigit(Peek())) token->text += Advance();
    }
    while (IsIdentChar(Peek())) token->suffix += Advance();
    return Status::Ok();
  }

  Status LexString(Token* token) {
    token->kind = TokenKind::kString;
    Advance();  // opening quote
    while (true) {
      if (pos_ >= text_.size() || Peek() == '\n') {
        return Error(token->line, token->column, "unterminated string");
      }
      char c = Advance();
      if (c == '"') return Status::Ok();
      if (c != '\\') {
        token->text += c;
        continue;
      }
      int line = line_, column = column_ - 1;
      char e = pos_ < text_.size() ? Advance() : '\0';
      switch (e) {
        case '"':
        case '\\':
          token->text += e;
          break;
        case 'n':
          token->text += '\n';
          break;
        case 't':
          token->text += '\t';
          break;
        case 'x': {
          int hi = HexValue(Peek()), lo = HexValue(Peek(1));
          if (hi < 0 || lo < 0) return Error(line, column, "expected two hex digits after \\x");
          Advance();
          Advance();
          token->text += static_cast<char>(hi * 16 + lo);
          break;
        }
        default:
          return Error(line, column, "unknown escape in string");
      }
    }
  }

  Status LexPunct(Token* token) {
    static constexpr std::string_view kTwoChar[] = {"==", "!=", "<=", ">=", "&&", "||"};
    static constexpr std::string_view kOneChar = "()[]{}<>,:=+-*/%!.";
    token->kind = TokenKind::kPunct;
    for (std::string_view p : kTwoChar) {
      if (Peek() == p[0] && Peek(1) == p[1]) {
        token->text += Advance();
        token->text += Advance();
        return Status::Ok();
      }
    }
    if (kOneChar.find(Peek()) != std::string_view::npos) {
      token->text += Advance();
      return Status::Ok();
    }
    unsigned char u = static_cast<unsigned char>(Peek());
    std::string shown =
        u >= 0x20 && u < 0x7f ? StrCat("'", Peek(), "'") : QuoteString(std::string(1, Peek()));
    // A UTF-8 character beyond ASCII: shown whole, with its code point.
    const int length = u >= 0xF0 && u < 0xF8 ? 4 : u >= 0xE0 ? 3 : u >= 0xC0 ? 2 : 0;
    uint32_t code = length == 4 ? u & 0x07u : length == 3 ? u & 0x0Fu : u & 0x1Fu;
    bool whole = length > 0;
    for (int k = 1; k < length && whole; ++k) {
      const auto c = static_cast<unsigned char>(Peek(k));
      whole = (c & 0xC0u) == 0x80u;
      code = (code << 6) | (c & 0x3Fu);
    }
    if (whole) {
      std::string character;
      for (int k = 0; k < length; ++k) character += Peek(k);
      char point[16];
      std::snprintf(point, sizeof point, "U+%04X", static_cast<unsigned>(code));
      return Error(token->line, token->column,
                   code == 0xFEFF ? StrCat("unexpected byte order mark (", point,
                                           "); the IR's text starts without one")
                                  : StrCat("unexpected character '", character, "' (", point,
                                           "); names and the IR's syntax are ASCII"));
    }
    return Error(token->line, token->column, StrCat("unexpected character ", shown));
  }

  std::string_view text_;
  size_t pos_ = 0;
  int line_ = 1;
  int column_ = 1;
};

std::string DescribeToken(const Token& token) {
  switch (token.kind) {
    case TokenKind::kEnd:
      return "end of input";
    case TokenKind::kString:
      return "string " + QuoteString(token.text);
    default:
      return "'" + token.text + token.suffix + "'";
  }
}

StatusOr<std::vector<Token>> Tokenize(std::string_view text) {
  Lexer lexer(text);
  std::vector<Token> tokens;
  do {
    tokens.emplace_back();
    KILN_RETURN_IF_ERROR(lexer.Lex(&tokens.back()));
  } while (tokens.back().kind != TokenKind::kEnd);
  return tokens;
}

TokenStream::TokenStream(std::string_view text) : lexer_(std::make_unique<Lexer>(text)) {}
TokenStream::TokenStream(TokenStream&&) noexcept = default;
TokenStream& TokenStream::operator=(TokenStream&&) noexcept = default;
TokenStream::~TokenStream() = default;

Token TokenStream::Next() {
  Token token;
  if (done_) return token;
  error_ = lexer_->Lex(&token);
  if (!error_.ok()) token = Token();
  done_ = token.kind == TokenKind::kEnd;
  return token;
}

}  // namespace kiln::ir
