// Helpers shared by the transform tests.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "kiln/ir/function.h"
#include "kiln/ir/printer.h"
#include "kiln/support/status.h"

namespace kiln::transform {

// The printed function, or the error status as text, so that tests can
// compare either with one EXPECT_EQ.
inline std::string PrintedOrError(const StatusOr<ir::Function>& result) {
  return result.ok() ? ir::Print(*result) : result.status().ToString();
}

// Expects `result` to be an error of `code` whose message contains `fragment`.
inline void ExpectError(const StatusOr<ir::Function>& result, StatusCode code,
                        std::string_view fragment) {
  ASSERT_FALSE(result.ok()) << ir::Print(*result);
  EXPECT_EQ(result.status().code(), code) << result.status();
  EXPECT_NE(result.status().message().find(fragment), std::string::npos) << result.status();
}

}  // namespace kiln::transform
