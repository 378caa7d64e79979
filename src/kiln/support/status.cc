#include "kiln/support/status.h"

#include <cstdio>
#include <ostream>

namespace kiln {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case StatusCode::kCompileError:
      return "COMPILE_ERROR";
    case StatusCode::kOutOfMemory:
      return "OUT_OF_MEMORY";
    case StatusCode::kDeviceLost:
      return "DEVICE_LOST";
    case StatusCode::kUnavailable:
      return "UNAVAILABLE";
    case StatusCode::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case StatusCode::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case StatusCode::kDataLoss:
      return "DATA_LOSS";
    case StatusCode::kUnimplemented:
      return "UNIMPLEMENTED";
    case StatusCode::kInternal:
      return "INTERNAL";
  }
  return "UNKNOWN";
}

Status Status::WithContext(std::string_view context) const& {
  if (ok()) return *this;
  return Status(code_, StrCat(context, ": ", message_));
}

Status Status::WithContext(std::string_view context) && {
  if (ok()) return std::move(*this);
  message_ = StrCat(context, ": ", message_);
  return std::move(*this);
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return StrCat(StatusCodeName(code_), ": ", message_);
}

std::ostream& operator<<(std::ostream& os, const Status& status) {
  return os << status.ToString();
}

void CheckFailed(const char* file, int line, const char* cond, const std::string& msg) {
  std::fprintf(stderr, "kiln internal error at %s:%d: check failed: %s %s\n", file, line, cond,
               msg.c_str());
  std::abort();
}

std::string Shortened(std::string text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t keep = max_bytes;  // (not inside a UTF-8 character)
  while (keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xC0) == 0x80) --keep;
  size_t more = 0;  // characters, not bytes: continuation bytes are not counted
  for (size_t i = keep; i < text.size(); ++i) {
    more += (static_cast<unsigned char>(text[i]) & 0xC0) != 0x80;
  }
  text.resize(keep);
  return StrCat(text, " ... (", more, " more characters)");
}

}  // namespace kiln
