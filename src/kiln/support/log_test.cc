#include "kiln/support/log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

namespace kiln {
namespace {

void WriteToFd2(const std::string& text) {
  ASSERT_EQ(write(2, text.data(), text.size()), ssize_t(text.size()));
}

// Output written to file descriptor 2 while `fn` runs, as an implementation
// writes it.
std::string Stderr(const std::function<void()>& fn) {
  testing::internal::CaptureStderr();
  fn();
  return testing::internal::GetCapturedStderr();
}

TEST(LogTest, ImplementationWarningsReachStderrOnlyWhenLoggingIsOn) {
  auto enumerate = [] {
    RouteStderrToLog("dawn", [] {
      WriteToFd2("Warning: Vulkan shaderUniform*ArrayDynamicIndexing required.\n");
      WriteToFd2("Error: something that went wrong\n");
      WriteToFd2("Info: an adapter\n");
      // A diagnostic's indented lines after its first, to a blank line, are its own.
      WriteToFd2(
          "Warning: eglInitialize failed\n - While trying to discover an adapter.\n"
          "    at CheckEGL (UtilsEGL.cpp:98)\n\n");
      WriteToFd2("  an indented line of no diagnostic\n");
    });
  };
  SetLogging(false);
  EXPECT_EQ(Stderr(enumerate),
            "Error: something that went wrong\n  an indented line of no diagnostic\n");
  SetLogging(true);
  EXPECT_EQ(Stderr(enumerate),
            "kiln: [dawn] Warning: Vulkan shaderUniform*ArrayDynamicIndexing required.\n"
            "Error: something that went wrong\n"
            "kiln: [dawn] Info: an adapter\n"
            "kiln: [dawn] Warning: eglInitialize failed\n - While trying to discover an "
            "adapter.\n    at CheckEGL (UtilsEGL.cpp:98)\n\n"
            "  an indented line of no diagnostic\n");
  SetLogging(false);
  EXPECT_EQ(Stderr([] { Log("kiln", "not shown"); }), "");
}

}  // namespace
}  // namespace kiln
