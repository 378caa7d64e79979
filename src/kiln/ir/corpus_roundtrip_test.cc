// The text form round-trips over every kernel kiln ships: the IR test data,
// the differential corpus and the examples. print(parse(print(x))) ==
// print(x), and every file verifies.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/verifier.h"

namespace kiln::ir {
namespace {

std::vector<std::string> KernelFiles() {
  std::vector<std::string> files;
  for (const char* dir : {"/src/kiln/ir/testdata", "/tests/corpus", "/examples"}) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(KILN_SOURCE_DIR + std::string(dir), ec)) {
      if (e.path().extension() == ".kir") files.push_back(e.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(CorpusRoundTrip, EveryShippedKernelPrintsParsesAndPrintsTheSame) {
  const std::vector<std::string> files = KernelFiles();
  ASSERT_GE(files.size(), 40u) << "the kernel corpus is missing";
  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    std::ifstream in(path);
    std::ostringstream text;
    text << in.rdbuf();
    auto module = ParseModule(text.str());
    ASSERT_TRUE(module.ok()) << module.status();
    Status verified = Verify(*module);
    EXPECT_TRUE(verified.ok()) << verified;
    const std::string printed = Print(*module);
    auto reparsed = ParseModule(printed);
    ASSERT_TRUE(reparsed.ok()) << reparsed.status() << "\n" << printed;
    EXPECT_EQ(Print(*reparsed), printed);
  }
}

}  // namespace
}  // namespace kiln::ir
