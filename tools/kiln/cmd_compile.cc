// kiln compile K.kir -o K.kmod | --emit wgsl | --emit ir
#include <cstdint>
#include <cstdio>
#include <fstream>

#include "commands.h"
#include "flags.h"
#include "kiln/codegen/module_format.h"
#include "kiln/codegen/wgsl_codegen.h"
#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/verifier.h"
#include "kiln/support/file.h"
#include "kiln/transform/lower.h"

namespace kiln::tool {

namespace {

// The module in the IR file at `path`, verified once, with `options` (the
// limits the module is compiled for); errors point into the file.
StatusOr<ir::Module> ParseIrFile(const std::string& path, const ir::VerifyOptions& options) {
  KILN_ASSIGN_OR_RETURN(std::string text, ReadInputFile(path));
  ir::SourceMap source;
  auto module = ir::ParseModule(text, &source);
  if (!module.ok()) return module.status().WithContext(path);
  Status verified = ir::Verify(*module, options, source);
  if (!verified.ok()) return verified.WithContext(path);
  return module;
}

constexpr const char* kUsage =
    "usage: kiln compile K.kir (-o K.kmod | --emit wgsl | --emit ir) "
    "[--max-invocations N] [--max-workgroup-storage BYTES]\n"
    "  -o K.kmod                      write the compiled module\n"
    "  --emit wgsl|ir                 print the WGSL, or the IR after lowering\n"
    "  --max-invocations N            threads per workgroup allowed (default 256)\n"
    "  --max-workgroup-storage BYTES  workgroup memory allowed (default 16384)";

}  // namespace

int CompileCommand(const Args& args) {
  auto flags = Flags::Parse(args, {"o", "emit", "max-invocations", "max-workgroup-storage"}, {});
  if (!flags.ok()) return Fail(flags.status().message());
  if (flags->help()) return PrintUsage(kUsage);
  if (flags->positional().size() != 1) return Fail(kUsage);
  const std::string input = flags->positional()[0];
  auto emit = flags->Get("emit");
  auto output = flags->Get("o");
  if (!emit && !output) return Fail(kUsage);
  if (emit && *emit != "wgsl" && *emit != "ir") {
    return Fail("--emit takes 'wgsl' or 'ir', got '" + *emit + "'");
  }
  auto invocations = flags->GetUint("max-invocations", 256, UINT32_MAX);
  auto storage = flags->GetUint("max-workgroup-storage", 16384, UINT32_MAX);
  if (!invocations.ok()) return Fail(invocations.status().message());
  if (!storage.ok()) return Fail(storage.status().message());
  if (*invocations == 0) return Fail("flag --max-invocations must be positive");

  codegen::CompileOptions options;
  options.codegen.limits.max_invocations_per_workgroup = static_cast<uint32_t>(*invocations);
  options.codegen.limits.max_workgroup_storage_bytes = static_cast<uint32_t>(*storage);
  options.lower.verify.max_threads_per_workgroup = static_cast<int64_t>(*invocations);
  options.lower.verify.max_workgroup_storage_bytes = static_cast<int64_t>(*storage);
  auto module = ParseIrFile(input, options.lower.verify);
  if (!module.ok()) return Fail(module.status().ToString());

  if (emit && *emit == "ir") {
    for (const ir::Function& f : module->functions) {
      auto lowered = transform::Lower(f, options.lower);
      if (!lowered.ok()) return Fail(lowered.status().WithContext(input).ToString());
      std::printf("%s\n", ir::Print(*lowered).c_str());
    }
    return 0;
  }
  auto compiled = codegen::CompileModule(*module, options);
  if (!compiled.ok()) return Fail(compiled.status().WithContext(input).ToString());
  *module = ir::Module();  // not needed any more: the IR of a large module is large
  if (emit) {
    for (const codegen::CompiledFunction& f : compiled->functions) {
      std::printf("// kernel %s\n%s\n", f.metadata.name.c_str(), f.wgsl.c_str());
    }
    return 0;
  }
  std::string bytes = codegen::SerializeModule(*compiled);
  std::ofstream out(*output, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return Fail("cannot write '" + *output + "'");
  std::printf("%s: %zu function(s), %zu bytes\n", output->c_str(), compiled->functions.size(),
              bytes.size());
  return 0;
}

}  // namespace kiln::tool
