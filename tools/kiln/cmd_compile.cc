// kiln compile K.kir -o K.kmod | --emit wgsl | --emit ir
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "commands.h"
#include "flags.h"
#include "kernel_io.h"
#include "kiln/codegen/module_format.h"
#include "kiln/codegen/wgsl_codegen.h"
#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/verifier.h"
#include "kiln/support/file.h"
#include "kiln/transform/lower.h"
#include "work.h"

namespace kiln::tool {

namespace {

// The module in the IR file at `path`, verified once, with `options` (the
// limits the module is compiled for); errors point into the file, as
// lowering's do with `source`.
StatusOr<ir::Module> ParseIrFile(const std::string& path, const ir::VerifyOptions& options,
                                 ir::SourceMap& source) {
  KILN_ASSIGN_OR_RETURN(std::string text, ReadInputFile(path));
  auto module = ir::ParseModule(text, &source);
  if (!module.ok()) return module.status().WithContext(path);
  Status verified = ir::Verify(*module, options, source);
  if (!verified.ok()) return verified.WithContext(path);
  return module;
}

constexpr const char* kUsage =
    "usage: kiln compile K.kir (-o K.kmod | --emit wgsl | --emit ir) "
    "[--max-invocations N] [--max-workgroup-storage BYTES]\n"
    "                    [--max-storage-buffers N]\n"
    "                    [--print-after PASS[,PASS...]|all] [--time-passes] [--verify-each]\n"
    "  -o K.kmod                      write the compiled module\n"
    "  --emit wgsl|ir                 print the WGSL, or the IR after lowering\n"
    "  --max-invocations N            threads per workgroup allowed (default 256)\n"
    "  --max-workgroup-storage BYTES  workgroup memory allowed (default 16384)\n"
    "  --max-storage-buffers N        buffer parameters allowed (default 8)\n"
    "  --print-after PASS|all         print each function's IR after these lowering passes\n"
    "                                 (lower-thread-bindings, unroll, vectorize,\n"
    "                                 flatten-buffers, narrow-indices, simplify)\n"
    "  --time-passes                  print the time each pass took, summed over functions\n"
    "  --verify-each                  verify the IR after every pass, naming a pass that breaks it";

// What --print-after and --time-passes ask of the pipeline.
struct PassWatch {
  std::set<std::string, std::less<>> print_after;
  bool print_all = false;
  bool time = false;
  std::vector<std::pair<std::string, double>> totals;  // in pipeline order

  void Observe(std::string_view pass, const ir::Function& f, double ms) {
    if (print_all || print_after.count(pass) != 0) {
      std::printf("// IR after %.*s: %s\n%s\n", static_cast<int>(pass.size()), pass.data(),
                  f.name().c_str(), ir::Print(f).c_str());
    }
    if (!time) return;
    for (auto& [name, total] : totals) {
      if (name == pass) {
        total += ms;
        return;
      }
    }
    totals.emplace_back(pass, ms);
  }
};

// The passes named by --print-after's value, or an error naming an unknown one.
Status ParsePrintAfter(const std::string& value, PassWatch& watch) {
  if (value == "all") {
    watch.print_all = true;
    return Status::Ok();
  }
  size_t start = 0;
  while (start <= value.size()) {
    size_t comma = value.find(',', start);
    std::string name = value.substr(start, comma == std::string::npos ? comma : comma - start);
    if (name == "all") {  // (the value "all" alone returned above)
      return InvalidArgument("--print-after: 'all' stands alone (every pass), not in a list: '",
                             value, "'");
    }
    if (transform::FindLoweringPass(name) == nullptr) {
      std::string known;
      for (const transform::Pass& pass : transform::LoweringPasses()) {
        known += (known.empty() ? "" : ", ") + std::string(pass.name);
      }
      return InvalidArgument("--print-after: no pass '", name, "' (passes: ", known, ", or all)");
    }
    watch.print_after.insert(name);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return Status::Ok();
}

}  // namespace

int CompileCommand(const Args& args) {
  auto flags = Flags::Parse(args,
                            {"o", "emit", "max-invocations", "max-workgroup-storage",
                             "max-storage-buffers", "print-after"},
                            {"time-passes", "verify-each"});
  if (!flags.ok()) return Fail(flags.status().message());
  if (flags->help()) return PrintUsage(kUsage);
  if (flags->positional().empty()) return Fail(kUsage);
  if (flags->positional().size() > 1) {
    return Fail(StrCat("kiln compile takes one input file; got ", flags->positional().size(), ": ",
                       QuotedList(flags->positional()), " (see --help)"));
  }
  const std::string input = flags->positional()[0];
  auto emit = flags->Get("emit");
  auto output = flags->Get("o");
  if (!emit && !output) {
    return Fail(StrCat("kiln compile ", input,
                       ": say what to make: -o K.kmod (a module) or --emit wgsl|ir (printed)"));
  }
  if (emit && output) {
    return Fail(
        "-o and --emit are alternatives (write a module, or print its WGSL or IR): give one");
  }
  if (output) {
    if (output->empty()) return Fail("-o: no file given");
    Status writable = CheckOutputFile(*output, input).WithContext("-o");
    if (!writable.ok()) return Fail(writable.message());
  }
  if (emit && *emit != "wgsl" && *emit != "ir") {
    return Fail("--emit takes 'wgsl' or 'ir', got '" + *emit + "'");
  }
  auto invocations = flags->GetPositiveUint("max-invocations", 256, UINT32_MAX);
  auto storage = flags->GetUint("max-workgroup-storage", 16384, UINT32_MAX);
  auto buffers = flags->GetUint("max-storage-buffers", 8, UINT32_MAX);
  if (!buffers.ok()) return Fail(buffers.status().message());
  if (!invocations.ok()) return Fail(invocations.status().message());
  if (!storage.ok()) return Fail(storage.status().message());

  codegen::CompileOptions options;
  options.codegen.limits.max_invocations_per_workgroup = static_cast<uint32_t>(*invocations);
  options.codegen.limits.max_workgroup_storage_bytes = static_cast<uint32_t>(*storage);
  options.codegen.limits.max_storage_buffers_per_stage = static_cast<uint32_t>(*buffers);
  options.lower.verify.limits = options.codegen.limits;
  PassWatch watch;
  if (auto print_after = flags->Get("print-after")) {
    Status parsed = ParsePrintAfter(*print_after, watch);
    if (!parsed.ok()) return Fail(parsed.message());
  }
  watch.time = flags->Has("time-passes");
  if (flags->Has("verify-each")) options.lower.verify_each_pass = true;
  if (watch.time || watch.print_all || !watch.print_after.empty()) {
    options.lower.observer = [&watch](std::string_view pass, const ir::Function& f, double ms) {
      watch.Observe(pass, f, ms);
    };
  }
  auto print_times = [&watch]() {
    if (!watch.time) return;
    double sum = 0;
    for (const auto& [name, ms] : watch.totals) sum += ms;
    std::fprintf(stderr, "pass                   ms\n");
    for (const auto& [name, ms] : watch.totals) {
      std::fprintf(stderr, "%-22s %8.3f\n", name.c_str(), ms);
    }
    std::fprintf(stderr, "%-22s %8.3f\n", "total", sum);
  };
  ir::SourceMap source;
  auto module = ParseIrFile(input, codegen::SourceVerifyOptions(options), source);
  if (!module.ok()) return Fail(module.status().ToString());
  options.lower.source = &source;
  for (const ir::Function& f : module->functions) {
    Status work = CheckDeclaredWork(f);
    if (!work.ok()) return Fail(work.WithContext(input).ToString());
  }

  if (emit && *emit == "ir") {
    for (const ir::Function& f : module->functions) {
      auto lowered = transform::Lower(f, options.lower);
      if (!lowered.ok()) return Fail(lowered.status().WithContext(input).ToString());
      std::printf("%s\n", ir::Print(*lowered).c_str());
    }
    print_times();
    return 0;
  }
  auto compiled = codegen::CompileModule(*module, options);
  if (!compiled.ok()) return Fail(compiled.status().WithContext(input).ToString());
  // Not needed any more: the IR of a large module is large.
  *module = ir::Module();
  source = ir::SourceMap();
  print_times();
  if (emit) {
    for (const codegen::CompiledFunction& f : compiled->functions) {
      std::printf("// kernel %s\n%s\n", f.metadata.name.c_str(), f.wgsl.c_str());
    }
    return 0;
  }
  std::string bytes = codegen::SerializeModule(*compiled);
  Status written = WriteFileAtomically(*output, bytes);
  if (!written.ok()) return Fail(written.message());
  std::printf("%s: %zu function(s), %zu bytes\n", output->c_str(), compiled->functions.size(),
              bytes.size());
  return 0;
}

}  // namespace kiln::tool
