// libFuzzer target for the text-form parser: any input must either fail to
// parse with a status, or parse into a module whose printed form parses
// again and prints identically. The verifier and the simplifier run on
// whatever parses; a verified module must still verify once simplified.
// Crashes, sanitizer reports and aborts are bugs.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/simplifier.h"
#include "kiln/ir/verifier.h"

namespace {

[[noreturn]] void Fail(const char* what, const std::string& first, const std::string& second) {
  std::fprintf(stderr, "%s\n--- first\n%s--- second\n%s\n", what, first.c_str(), second.c_str());
  std::abort();
}

// Print(Parse(Print(m))) == Print(m).
void CheckStablePrint(const kiln::ir::Module& module) {
  std::string printed = kiln::ir::Print(module);
  kiln::StatusOr<kiln::ir::Module> again = kiln::ir::ParseModule(printed);
  if (!again.ok()) Fail("printed module does not parse", printed, again.status().ToString());
  std::string reprinted = kiln::ir::Print(*again);
  if (reprinted != printed) Fail("print is not stable", printed, reprinted);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  kiln::StatusOr<kiln::ir::Module> module = kiln::ir::ParseModule(text);
  if (!module.ok()) return 0;
  CheckStablePrint(*module);
  bool verified = kiln::ir::Verify(*module).ok();
  kiln::ir::Module simplified;
  for (const kiln::ir::Function& f : module->functions) {
    simplified.functions.push_back(kiln::ir::Simplify(f));
  }
  if (verified) {
    kiln::Status status = kiln::ir::Verify(simplified);
    if (!status.ok()) {
      Fail("simplified module does not verify", kiln::ir::Print(simplified), status.ToString());
    }
    CheckStablePrint(simplified);
  }
  return 0;
}
