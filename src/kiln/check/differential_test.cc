// The compiler's differential suite: every kernel of the corpus
// (tests/corpus) and of examples/ is compiled to WGSL, compiled again by the
// implementation's WGSL compiler (Tint or Naga), run on the device, and
// compared with the interpreter on fresh random inputs, outputs poisoned
// first. CTest runs it once per implementation.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "kiln/check/check.h"
#include "kiln/check/corpus.h"
#include "kiln/codegen/wgsl_codegen.h"
#include "kiln/hal/device.h"
#include "kiln/ir/parser.h"
#include "kiln/ir/verifier.h"
#include "kiln/runtime/module.h"
#include "kiln/runtime/test_device.h"

namespace kiln::check {
namespace {

using runtime::LoadedModule;

// The kernels of the source tree ($KILN_SOURCE_DIR overrides where it is,
// for running a copied build elsewhere).
std::vector<std::string> AllKernelFiles() {
  const char* env = std::getenv("KILN_SOURCE_DIR");
  const std::string root = env && *env ? env : KILN_SOURCE_DIR;
  std::vector<std::string> files = ListKirFiles(root + "/tests/corpus");
  for (const auto& f : ListKirFiles(root + "/examples")) files.push_back(f);
  return files;
}

class DifferentialTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    device_ = runtime::testing::TestDevice();
    ASSERT_TRUE(device_);
  }
  std::shared_ptr<hal::Device> device_;
};

TEST_P(DifferentialTest, MatchesTheInterpreter) {
  auto file = ReadCorpusFile(GetParam());
  ASSERT_TRUE(file.ok()) << file.status();
  auto module = ir::ParseModule(file->text);
  ASSERT_TRUE(module.ok()) << module.status();
  ASSERT_TRUE(ir::Verify(*module).ok()) << ir::Verify(*module);
  for (const std::string& feature : file->features) {
    auto f = hal::ParseFeature(feature);
    ASSERT_TRUE(f.ok()) << f.status();
    if (!device_->HasFeature(*f)) {
      GTEST_SKIP() << device_->Describe() << " does not offer " << feature;
    }
  }
  codegen::CompileOptions options = CompileOptionsFor(*device_);
  options.lower.verify_each_pass = true;  // a pass that breaks the IR is named
  auto compiled = codegen::CompileModule(*module, options);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  // Each function's metadata is its source IR's, as `kiln run --check`
  // requires of a module.
  for (const codegen::CompiledFunction& f : compiled->functions) {
    EXPECT_TRUE(ValidateSourceIr(f).ok()) << f.metadata.name << ": " << ValidateSourceIr(f);
  }
  auto loaded = LoadedModule::Load(device_, *compiled);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  for (const CorpusRun& run : file->runs) {
    SCOPED_TRACE("function " + run.function);
    auto fn = (*loaded)->Find(run.function);
    ASSERT_TRUE(fn.ok()) << fn.status();
    const ir::Function* source = nullptr;
    for (const ir::Function& f : module->functions) {
      if (f.name() == run.function) source = &f;
    }
    ASSERT_NE(source, nullptr);
    CheckOptions check;
    check.scalar_args = run.args;
    check.tolerance = file->tolerance;
    auto result = RunAndCheck(**fn, *source, check);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_TRUE(result->pass) << "seed " << result->seed << "\n" << result->Summary();
  }
}

std::string TestName(const ::testing::TestParamInfo<std::string>& info) {
  std::filesystem::path p(info.param);
  std::string name = p.parent_path().filename().string() + "_" + p.stem().string();
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Corpus, DifferentialTest, ::testing::ValuesIn(AllKernelFiles()), TestName);

}  // namespace
}  // namespace kiln::check
