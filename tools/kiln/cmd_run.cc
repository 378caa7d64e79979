// kiln run K.kmod --fn NAME [--arg name=value ...] [--check] [--seed N]
//
// Runs a compiled function on fresh random inputs sized by the scalar
// arguments. With --check, the function's source IR (carried in the module)
// runs in the interpreter on the same inputs and every written buffer is
// compared; the largest error and PASS or FAIL are printed, and the exit
// code is non-zero on FAIL. A function the device cannot run (a missing
// feature) prints SKIP and its reason; under --check that exits non-zero
// too, since nothing was checked.
#include <cstdio>
#include <cstdlib>

#include "commands.h"
#include "flags.h"
#include "kiln/codegen/module_format.h"
#include "kiln/codegen/module_validate.h"
#include "kiln/ir/parser.h"
#include "kiln/check/check.h"
#include "kiln/runtime/module.h"
#include "kiln/support/file.h"

namespace kiln::tool {

namespace {

constexpr const char* kUsage =
    "usage: kiln run K.kmod --fn NAME [--arg name=value]... [--check] [--tolerance T] [--seed N]\n"
    "  --arg name=value  a scalar parameter (decimal; every scalar parameter needs one)\n"
    "  --check           compare with the interpreter; print PASS, FAIL or SKIP\n"
    "  --tolerance T     floats compare within T * (1 + |reference|) (default 1e-4)\n"
    "  --seed N          the random inputs' seed (default: a fresh one)\n"
    "  --trusted         trusted mode: no robustness checks in kernels (see README)\n"
    "exit: 0 on PASS (or a run without --check); 1 on FAIL, an error, or SKIP under --check";

}  // namespace

int RunCommand(const Args& args) {
  // --arg may repeat: collect its values before flag parsing.
  std::map<std::string, std::string> scalars;
  Args rest;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string value;
    if (args[i] == "--arg") {
      if (i + 1 >= args.size()) return Fail("flag --arg needs a value");
      value = args[++i];
    } else if (args[i].rfind("--arg=", 0) == 0) {
      value = args[i].substr(6);
    } else {
      rest.push_back(args[i]);
      continue;
    }
    auto eq = value.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Fail("--arg takes name=value, got '" + value + "'");
    }
    if (!scalars.emplace(value.substr(0, eq), value.substr(eq + 1)).second) {
      return Fail("--arg " + value.substr(0, eq) + " is given more than once");
    }
  }
  std::set<std::string> valued = kDeviceFlags;
  valued.insert({"fn", "seed", "tolerance"});
  auto flags = Flags::Parse(rest, valued, {"check", "trusted"});
  if (!flags.ok()) return Fail(flags.status().message());
  if (flags->help()) return PrintUsage(kUsage);
  if (flags->positional().size() != 1 || !flags->Get("fn")) return Fail(kUsage);
  const std::string path = flags->positional()[0];
  const std::string name = *flags->Get("fn");
  auto seed = flags->GetUint("seed", 0);
  if (!seed.ok()) return Fail(seed.status().message());
  check::CheckOptions check;
  check.scalar_args = scalars;
  check.seed = *seed;
  auto tolerance = flags->GetNonNegativeDouble("tolerance", check.tolerance);
  if (!tolerance.ok()) return Fail(tolerance.status().message());
  check.tolerance = *tolerance;

  auto bytes = ReadInputFile(path);
  if (!bytes.ok()) return Fail(bytes.status().message());
  auto compiled = codegen::DeserializeModule(*bytes);
  if (!compiled.ok()) return Fail(compiled.status().WithContext(path).ToString());
  Status valid = codegen::ValidateModule(*compiled);
  if (!valid.ok()) return Fail(valid.WithContext(path).ToString());
  const codegen::CompiledFunction* cf = compiled->Find(name);
  if (!cf) return Fail(StrCat(path, ": no function '", name, "'"));
  // The reference is the source IR the module carries: it must describe the
  // function the metadata does.
  Status agrees = check::ValidateSourceIr(*cf);
  if (!agrees.ok()) return Fail(agrees.WithContext(path).ToString());
  auto source = ir::ParseFunction(cf->source_ir);
  if (!source.ok()) return Fail(source.status().WithContext(path + ": source IR").ToString());
  // Before the device: a misspelt --arg is the user's error wherever it runs.
  Status named = check::CheckScalarArgNames(cf->metadata, scalars);
  if (!named.ok()) return Fail(named.message());

  auto options = DeviceOptionsFromFlags(*flags);
  if (!options.ok()) return Fail(options.status().message());
  auto device = hal::Device::Create(*options);
  if (!device.ok()) return Fail(device.status().message());
  auto module = runtime::LoadedModule::Load(*device, std::move(*compiled));
  if (!module.ok()) return Fail(module.status().ToString());
  auto fn = (*module)->Find(name);
  if (!fn.ok()) return Fail(fn.status().message());
  std::printf("device: %s\n", (*device)->Describe().c_str());
  if (!(*fn)->availability().ok()) {
    std::printf("SKIP: %s\n", (*fn)->availability().message().c_str());
    return flags->Has("check") ? 1 : 0;
  }
  auto result = check::RunAndCheck(**fn, *source, check);
  if (!result.ok()) return Fail(result.status().ToString());
  std::printf("%s: gpu %.3f ms, interpreter %.3f ms, seed %llu\n", name.c_str(), result->gpu_ms,
              result->interp_ms, static_cast<unsigned long long>(result->seed));
  if (!flags->Has("check")) return 0;
  std::printf("%s", result->Summary().c_str());
  std::printf("max error %g: %s\n", result->max_error, result->pass ? "PASS" : "FAIL");
  return result->pass ? 0 : 1;
}

}  // namespace kiln::tool
