// The code generator's golden WGSL files (src/kiln/codegen/testdata),
// compiled by the implementation's own WGSL compiler: Tint under Dawn, Naga
// under wgpu-native. CTest runs it once per implementation.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kiln/codegen/kernel_abi.h"
#include "kiln/hal/executable.h"
#include "kiln/runtime/test_device.h"

namespace kiln::runtime {
namespace {

std::vector<std::string> GoldenFiles() {
  const char* env = std::getenv("KILN_SOURCE_DIR");
  const std::string root = env && *env ? env : KILN_SOURCE_DIR;
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e :
       std::filesystem::directory_iterator(root + "/src/kiln/codegen/testdata", ec)) {
    if (e.path().extension() == ".wgsl") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

class GoldenWgslTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenWgslTest, TheImplementationsCompilerAcceptsIt) {
  auto device = testing::TestDevice();
  ASSERT_TRUE(device);
  std::ifstream in(GetParam());
  std::ostringstream text;
  text << in.rdbuf();
  std::string wgsl = text.str();
  ASSERT_FALSE(wgsl.empty());
  if (wgsl.find("enable f16;") != std::string::npos &&
      !device->HasFeature(hal::Feature::kShaderF16)) {
    GTEST_SKIP() << device->Describe() << " does not offer shader-f16";
  }
  if (wgsl.find("enable subgroups;") != std::string::npos) {
    if (!device->HasFeature(hal::Feature::kSubgroups)) {
      GTEST_SKIP() << device->Describe() << " does not offer subgroups";
    }
    if (device->impl().kind() == hal::ImplKind::kWgpu) wgsl = abi::StripSubgroupsEnable(wgsl);
  }
  Status s = hal::CheckWgsl(*device, GetParam(), wgsl);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(GoldenWgslTest, RejectedWgslIsACompileError) {
  auto device = testing::TestDevice();
  ASSERT_TRUE(device);
  Status s = hal::CheckWgsl(*device, "bad", "fn f() -> i32 { return 1.5; }");
  EXPECT_EQ(s.code(), StatusCode::kCompileError) << s;
}

INSTANTIATE_TEST_SUITE_P(Codegen, GoldenWgslTest, ::testing::ValuesIn(GoldenFiles()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = std::filesystem::path(info.param).stem().string();
                           for (char& c : n) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace kiln::runtime
