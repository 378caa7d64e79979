// kiln compile K.kir -o K.kmod | --emit wgsl | --emit ir
#include <cstdio>
#include <fstream>

#include "commands.h"
#include "flags.h"
#include "kiln/codegen/module_format.h"
#include "kiln/codegen/wgsl_codegen.h"
#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/verifier.h"
#include "kiln/transform/lower.h"

namespace kiln::tool {

StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return InvalidArgument("cannot open '", path, "'");
  // Read straight into a string of the file's size (a stream buffer would
  // hold a second copy).
  const std::streamoff size = in.tellg();
  if (size < 0) return InvalidArgument("cannot read '", path, "'");
  std::string bytes(static_cast<size_t>(size), '\0');
  in.seekg(0);
  if (!in.read(bytes.data(), size)) return InvalidArgument("cannot read '", path, "'");
  return bytes;
}

StatusOr<ir::Module> ParseIrFile(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  auto module = ir::ParseModule(text);
  if (!module.ok()) return module.status().WithContext(path);
  Status verified = ir::Verify(*module);
  if (!verified.ok()) return verified.WithContext(path);
  return module;
}

namespace {

constexpr const char* kUsage =
    "usage: kiln compile K.kir (-o K.kmod | --emit wgsl | --emit ir) "
    "[--max-invocations N] [--max-workgroup-storage BYTES]";

}  // namespace

int CompileCommand(const Args& args) {
  auto flags = Flags::Parse(args, {"o", "emit", "max-invocations", "max-workgroup-storage"}, {});
  if (!flags.ok()) return Fail(flags.status().message());
  if (flags->positional().size() != 1) return Fail(kUsage);
  const std::string input = flags->positional()[0];
  auto emit = flags->Get("emit");
  auto output = flags->Get("o");
  if (!emit && !output) return Fail(kUsage);
  if (emit && *emit != "wgsl" && *emit != "ir") {
    return Fail("--emit takes 'wgsl' or 'ir', got '" + *emit + "'");
  }
  auto invocations = flags->GetUint("max-invocations", 256);
  auto storage = flags->GetUint("max-workgroup-storage", 16384);
  if (!invocations.ok()) return Fail(invocations.status().message());
  if (!storage.ok()) return Fail(storage.status().message());

  auto module = ParseIrFile(input);
  if (!module.ok()) return Fail(module.status().ToString());
  codegen::CompileOptions options;
  options.codegen.limits.max_invocations_per_workgroup = static_cast<uint32_t>(*invocations);
  options.codegen.limits.max_workgroup_storage_bytes = static_cast<uint32_t>(*storage);
  options.lower.verify.max_threads_per_workgroup = static_cast<int64_t>(*invocations);
  options.lower.verify.max_workgroup_storage_bytes = static_cast<int64_t>(*storage);

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
