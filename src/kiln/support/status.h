// Status values: how every fallible kiln call reports failure.
//
// A Status is a code plus a message. Messages say what was wrong, where, and
// what was expected; context is prepended as an error climbs (WithContext).
// No exception crosses a kiln library boundary; asserts (KILN_CHECK) are for
// kiln's own bugs only, never for user input.
#pragma once

#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace kiln {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // a caller passed something malformed or out of range
  kCompileError,        // IR or WGSL rejected; the message carries line/column
  kOutOfMemory,         // a device or host allocation failed
  kDeviceLost,          // the device is gone; every later call fails too
  kUnavailable,         // an implementation, adapter or feature is missing
  kFailedPrecondition,  // the object is in the wrong state for the call
  kDeadlineExceeded,    // a wait ran past its timeout
  kDataLoss,            // a file is corrupt, truncated or of another version
  kUnimplemented,       // a construct kiln does not support (yet)
  kInternal,            // the implementation or kiln itself misbehaved
};

std::string_view StatusCodeName(StatusCode code);

// Concatenates anything that streams into an ostream.
template <typename... Args>
std::string StrCat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

// `text` as a message quotes it: whole when at most `max_bytes` long, else
// its first `max_bytes` bytes (never cutting a UTF-8 character) and
// " ... (N more characters)".
std::string Shortened(std::string text, size_t max_bytes);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Prepends "context: " to the message; keeps the code.
  Status WithContext(std::string_view context) const&;
  Status WithContext(std::string_view context) &&;

  // "code: message", or "OK".
  std::string ToString() const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

std::ostream& operator<<(std::ostream& os, const Status& status);

template <typename... Args>
Status InvalidArgument(const Args&... args) {
  return Status(StatusCode::kInvalidArgument, StrCat(args...));
}
template <typename... Args>
Status CompileError(const Args&... args) {
  return Status(StatusCode::kCompileError, StrCat(args...));
}
template <typename... Args>
Status OutOfMemory(const Args&... args) {
  return Status(StatusCode::kOutOfMemory, StrCat(args...));
}
template <typename... Args>
Status DeviceLost(const Args&... args) {
  return Status(StatusCode::kDeviceLost, StrCat(args...));
}
template <typename... Args>
Status Unavailable(const Args&... args) {
  return Status(StatusCode::kUnavailable, StrCat(args...));
}
template <typename... Args>
Status FailedPrecondition(const Args&... args) {
  return Status(StatusCode::kFailedPrecondition, StrCat(args...));
}
template <typename... Args>
Status DeadlineExceeded(const Args&... args) {
  return Status(StatusCode::kDeadlineExceeded, StrCat(args...));
}
template <typename... Args>
Status DataLoss(const Args&... args) {
  return Status(StatusCode::kDataLoss, StrCat(args...));
}
template <typename... Args>
Status Unimplemented(const Args&... args) {
  return Status(StatusCode::kUnimplemented, StrCat(args...));
}
template <typename... Args>
Status Internal(const Args&... args) {
  return Status(StatusCode::kInternal, StrCat(args...));
}

// A value or the Status saying why there is none.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const Status& status) : v_(status) { CheckNotOk(); }        // NOLINT
  StatusOr(Status&& status) : v_(std::move(status)) { CheckNotOk(); }  // NOLINT
  StatusOr(const T& value) : v_(value) {}                              // NOLINT
  StatusOr(T&& value) : v_(std::move(value)) {}                        // NOLINT
  template <typename U, typename = std::enable_if_t<std::is_constructible_v<T, U&&> &&
                                                    !std::is_same_v<std::decay_t<U>, T> &&
                                                    !std::is_same_v<std::decay_t<U>, Status>>>
  StatusOr(U&& value) : v_(T(std::forward<U>(value))) {}  // NOLINT

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }

  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void CheckNotOk();
  std::variant<Status, T> v_;
};

[[noreturn]] void CheckFailed(const char* file, int line, const char* cond, const std::string& msg);

template <typename T>
void StatusOr<T>::CheckNotOk() {
  if (std::get<Status>(v_).ok()) {
    CheckFailed(__FILE__, __LINE__, "!status.ok()", "StatusOr constructed from an OK status");
  }
}

}  // namespace kiln

#define KILN_CONCAT_INNER(a, b) a##b
#define KILN_CONCAT(a, b) KILN_CONCAT_INNER(a, b)

// Returns the status of `expr` from the enclosing function if it is an error.
#define KILN_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::kiln::Status kiln_status_ = (expr);        \
    if (!kiln_status_.ok()) return kiln_status_; \
  } while (0)

// Like KILN_RETURN_IF_ERROR, adding context to the message on the way up.
#define KILN_RETURN_IF_ERROR_CTX(expr, ...)                                               \
  do {                                                                                    \
    ::kiln::Status kiln_status_ = (expr);                                                 \
    if (!kiln_status_.ok()) return kiln_status_.WithContext(::kiln::StrCat(__VA_ARGS__)); \
  } while (0)

#define KILN_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()

// `lhs = value of expr`, or returns its status from the enclosing function.
#define KILN_ASSIGN_OR_RETURN(lhs, expr) \
  KILN_ASSIGN_OR_RETURN_IMPL(KILN_CONCAT(kiln_statusor_, __LINE__), lhs, expr)

// For kiln's own invariants, never for user input.
#define KILN_CHECK(cond)                                             \
  do {                                                               \
    if (!(cond)) ::kiln::CheckFailed(__FILE__, __LINE__, #cond, ""); \
  } while (0)
#define KILN_CHECK_MSG(cond, ...)                                                             \
  do {                                                                                        \
    if (!(cond)) ::kiln::CheckFailed(__FILE__, __LINE__, #cond, ::kiln::StrCat(__VA_ARGS__)); \
  } while (0)
