// Test helpers for Status and StatusOr (GoogleTest; for tests only):
//
//   KILN_ASSERT_OK(expr);  KILN_EXPECT_OK(expr);
//   KILN_ASSERT_OK_AND_ASSIGN(auto value, expr);
//   EXPECT_TRUE(HasError(status, StatusCode::kInvalidArgument, "fragment"));
//
// Failures print the status, so a test says what came back.
#pragma once

#include <gtest/gtest.h>

#include <string_view>

#include "kiln/support/status.h"

namespace kiln {

#define KILN_ASSERT_OK(expr)              \
  do {                                    \
    ::kiln::Status kiln_s_ = (expr);      \
    ASSERT_TRUE(kiln_s_.ok()) << kiln_s_; \
  } while (0)
#define KILN_EXPECT_OK(expr)              \
  do {                                    \
    ::kiln::Status kiln_s_ = (expr);      \
    EXPECT_TRUE(kiln_s_.ok()) << kiln_s_; \
  } while (0)

// Unwraps a StatusOr inside a test, failing it on error.
#define KILN_ASSERT_OK_AND_ASSIGN(lhs, expr)                                                      \
  auto KILN_CONCAT(so_, __LINE__) = (expr);                                                       \
  ASSERT_TRUE(KILN_CONCAT(so_, __LINE__).ok()) << KILN_CONCAT(so_, __LINE__).status().ToString(); \
  lhs = std::move(KILN_CONCAT(so_, __LINE__)).value()

// Success when `status` has `code` and its message contains `fragment`.
inline ::testing::AssertionResult HasError(const Status& status, StatusCode code,
                                           std::string_view fragment) {
  if (status.code() == code && status.message().find(fragment) != std::string::npos) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "expected " << Status(code, std::string(fragment)).ToString()
         << " (the message containing that), got " << status.ToString();
}

template <typename T>
::testing::AssertionResult HasError(const StatusOr<T>& result, StatusCode code,
                                    std::string_view fragment) {
  if (result.ok()) return ::testing::AssertionFailure() << "expected an error, got a value";
  return HasError(result.status(), code, fragment);
}

}  // namespace kiln
