// Tokenizer of the text form (internal to kiln_ir; used by the parser).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/support/status.h"

namespace kiln::ir {

enum class TokenKind : uint8_t {
  kIdent,   // [A-Za-z_][A-Za-z0-9_]*
  kInt,     // digits, then an optional type suffix: 42, 7u32
  kFloat,   // digits '.' digits and/or an exponent, then an optional suffix: 1.5, 2e-3f16
  kString,  // "..." with escapes decoded into `text`
  kPunct,   // ( ) [ ] { } < > , : = + - * / % ! . == != <= >= && ||
  kEnd,
};

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string text;    // identifier, punctuation, number digits, or decoded string
  std::string suffix;  // type suffix of a number ("u32"), else empty
  int line = 1;
  int column = 1;
};

// How a token reads in an error message: "'for'", "'3u32'", "string \"a\"",
// "end of input".
std::string DescribeToken(const Token& token);

// Splits `text` into tokens ending with one kEnd token. Skips white space
// and `//` comments. Errors read "line L, column C: ...".
StatusOr<std::vector<Token>> Tokenize(std::string_view text);

class Lexer;

// The tokens of `text` one at a time, so that a parser holds only those it
// still needs. `text` must outlive the stream.
class TokenStream {
 public:
  explicit TokenStream(std::string_view text);
  TokenStream(TokenStream&&) noexcept;
  TokenStream& operator=(TokenStream&&) noexcept;
  ~TokenStream();

  // The next token. At the end of the text, and from the first lexical error
  // on, a kEnd token (every call).
  Token Next();
  // OK, or the lexical error that ended the stream (what Tokenize returns).
  const Status& error() const { return error_; }

 private:
  std::unique_ptr<Lexer> lexer_;
  Status error_;
  bool done_ = false;
};

}  // namespace kiln::ir
