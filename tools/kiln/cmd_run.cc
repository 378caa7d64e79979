// kiln run K.kmod --fn NAME [--arg name=value ...] [--input NAME=file.npy ...]
//                  [--output NAME=file.npy ...] [--check] [--seed N]
//
// Runs a compiled function on the device. Buffers named by --input are read
// from .npy files (their dtype and element count checked against the
// parameter); the others get fresh random data, written buffers poisoned.
// After the call every written buffer is summarised in one line, and those
// named by --output are written as .npy files. With --check, the function's
// source IR (carried in the module) also runs in the interpreter on the same
// inputs and every written buffer is compared; the largest error and PASS or
// FAIL are printed, and the exit code is non-zero on FAIL. A function the
// device cannot run (a missing feature) prints SKIP and its reason; under
// --check, or with --output files asked for, that exits non-zero too, since
// nothing was checked or written. Every --output path is checked before the
// device is touched (given once, in a writable folder).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "commands.h"
#include "flags.h"
#include "kernel_io.h"
#include "kiln/check/check.h"
#include "kiln/ir/parser.h"
#include "kiln/runtime/module.h"
#include "kiln/support/npy.h"

namespace kiln::tool {

namespace {

constexpr const char* kUsage =
    "usage: kiln run K.kmod --fn NAME [--arg name=value]... [--input NAME=file.npy]...\n"
    "                [--output NAME=file.npy]... [--check] [--tolerance T] [--seed N]\n"
    "  --arg name=value         a scalar parameter (decimal; every scalar parameter needs one)\n"
    "  --input NAME=file.npy    a buffer parameter's data (C order; its dtype the parameter's,\n"
    "                           its element count what the scalars make the parameter need)\n"
    "  --output NAME=file.npy   write a written buffer parameter, after the call, as .npy\n"
    "  --check                  also run the interpreter on the same inputs and compare;\n"
    "                           print PASS, FAIL or SKIP\n"
    "  --tolerance T            floats compare within T * (1 + |reference|) (default 1e-4)\n"
    "  --seed N                 the random inputs' seed (default: a fresh one)\n"
    "  --timeout SECONDS        fail if the device has not finished the call by then (default\n"
    "                           300; 0: no limit); kiln then exits at once, the call left running\n"
    "  --trusted                trusted mode: no robustness checks in kernels (see README)\n"
    "dtypes: f32 <f4, f16 <f2, i32 <i4, u32 <u4, bool |b1, int8x4 |i1 (or |u1) [..., 4]\n"
    "exit: 0 on PASS (or a run without --check); 1 on FAIL, an error, or SKIP under --check\n"
    "or with --output (nothing was written)";

// The names of `md`'s parameters that satisfy `keep`, for messages.
template <typename Keep>
std::string ParamNames(const codegen::KernelMetadata& md, Keep keep) {
  std::string names;
  for (const codegen::ParamInfo& p : md.params) {
    if (keep(p)) names += StrCat(names.empty() ? "" : ", ", p.name);
  }
  return names.empty() ? "none" : names;
}

const codegen::ParamInfo* FindParam(const codegen::KernelMetadata& md, const std::string& name) {
  for (const codegen::ParamInfo& p : md.params) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

bool IsBuffer(const codegen::ParamInfo& p) {
  return p.kind == codegen::ParamKind::kBuffer;
}
bool IsWritten(const codegen::ParamInfo& p) {
  return IsBuffer(p) && p.access == codegen::BufferAccess::kReadWrite;
}

// That every --input names a buffer parameter and every --output a written
// one.
Status CheckBufferFlags(const codegen::KernelMetadata& md,
                        const std::map<std::string, std::string>& inputs,
                        const std::map<std::string, std::string>& outputs) {
  for (const auto& [flag, names] : {std::pair{"input", &inputs}, std::pair{"output", &outputs}}) {
    for (const auto& [name, file] : *names) {
      const codegen::ParamInfo* p = FindParam(md, name);
      if (p == nullptr) {
        return InvalidArgument("--", flag, " ", name, ": function '", md.name,
                               "' has no parameter '", name,
                               "' (its buffer parameters: ", ParamNames(md, IsBuffer), ")");
      }
      if (!IsBuffer(*p)) {
        return InvalidArgument("--", flag, " ", name, ": '", name, "' is a scalar parameter (",
                               codegen::DTypeName(p->dtype), "); give it with --arg ", name,
                               "=VALUE");
      }
      if (std::string_view(flag) == "output" && !IsWritten(*p)) {
        return InvalidArgument("--output ", name, ": parameter '", name,
                               "' is read-only (the kernel never writes it); written parameters: ",
                               ParamNames(md, IsWritten));
      }
    }
  }
  return Status::Ok();
}

// That every --output can be written, before anything runs: a path given,
// not given twice, not the module being run, and one CheckOutputFile accepts.
Status CheckOutputPaths(const std::map<std::string, std::string>& outputs,
                        const std::string& module) {
  namespace fs = std::filesystem;
  std::map<fs::path, std::string> taken;
  for (const auto& [name, file] : outputs) {
    if (file.empty()) return InvalidArgument("--output ", name, ": no file given (NAME=file.npy)");
    std::error_code error;
    const fs::path path = fs::weakly_canonical(fs::absolute(file, error), error);
    if (error) return InvalidArgument("--output ", name, ": '", file, "': ", error.message());
    if (auto [it, fresh] = taken.emplace(path, name); !fresh) {
      return InvalidArgument("--output ", name, ": '", file, "' is also the file of --output ",
                             it->second);
    }
    KILN_RETURN_IF_ERROR(CheckOutputFile(file, module).WithContext("--output " + name));
  }
  return Status::Ok();
}

}  // namespace

int RunCommand(const Args& args) {
  // --arg, --input and --output may repeat: collect them before flag parsing.
  std::map<std::string, std::map<std::string, std::string>> repeated;
  Args rest;
  Status collected = CollectRepeatedFlags(args, {"arg", "input", "output"}, repeated, rest);
  if (!collected.ok()) return AsksHelp(args) ? PrintUsage(kUsage, true) : Fail(collected.message());
  const auto& scalars = repeated["arg"];
  const auto& inputs = repeated["input"];
  const auto& outputs = repeated["output"];
  std::set<std::string> valued = kDeviceFlags;
  valued.insert({"fn", "seed", "tolerance", "timeout"});
  auto flags = Flags::Parse(rest, valued, {"check", "trusted"});
  if (!flags.ok()) return Fail(flags.status().message());
  if (flags->help()) return PrintUsage(kUsage, true);
  if (flags->positional().empty() && !flags->Get("fn")) return Fail(kUsage);
  if (const std::string e = ModuleAndFnError("kiln run", flags->positional(), flags->Has("fn"));
      !e.empty()) {
    return Fail(e);
  }
  if (flags->Has("tolerance") && !flags->Has("check")) {
    return Fail("--tolerance applies to --check, which is not given");
  }
  const std::string path = flags->positional()[0];
  const std::string name = *flags->Get("fn");
  const bool check_on = flags->Has("check");
  auto seed = flags->GetUint("seed", 0);
  if (!seed.ok()) return Fail(seed.status().message());
  check::CheckOptions check;
  if (flags->Has("seed")) check.seed = *seed;
  check.scalar_args = scalars;
  auto tolerance = flags->GetNonNegativeDouble("tolerance", check.tolerance);
  if (!tolerance.ok()) return Fail(tolerance.status().message());
  check.tolerance = *tolerance;
  auto timeout = TimeoutFlag(*flags);
  if (!timeout.ok()) return Fail(timeout.status().message());
  Watchdog watchdog(*timeout);
  check.on_device_call = [&watchdog, &name](bool running) {
    running ? watchdog.Arm(StrCat("function '", name, "'")) : watchdog.Disarm();
  };

  auto compiled = ReadModule(path);
  if (!compiled.ok()) return Fail(compiled.status().ToString());
  const codegen::CompiledFunction* cf = compiled->Find(name);
  if (!cf) return Fail(StrCat(path, ": no function '", name, "'"));
  const codegen::KernelMetadata md = cf->metadata;
  // The reference is the source IR the module carries: it must describe the
  // function the metadata does.
  std::optional<ir::Function> source;
  if (check_on) {
    Status agrees = check::ValidateSourceIr(*cf);
    if (!agrees.ok()) return Fail(agrees.WithContext(path).ToString());
    auto parsed = ir::ParseFunction(cf->source_ir);
    if (!parsed.ok()) {
      return Fail(parsed.status().WithContext(path + ": source IR").ToString());
    }
    source = std::move(*parsed);
  }
  // Before the device: misspelt names are the user's error wherever it runs.
  Status named = check::CheckScalarArgNames(md, scalars);
  if (!named.ok()) return Fail(named.message());
  Status buffers_named = CheckBufferFlags(md, inputs, outputs);
  if (!buffers_named.ok()) return Fail(buffers_named.message());
  Status writable = CheckOutputPaths(outputs, path);
  if (!writable.ok()) return Fail(writable.message());
  // The input files and their dtypes, before the device too.
  std::map<std::string, npy::Array> arrays;
  for (const auto& [param, file] : inputs) {
    const codegen::ParamInfo& p = *FindParam(md, param);
    auto array = npy::ReadNpyFile(file);
    if (!array.ok()) return Fail(StrCat("--input ", param, ": ", array.status().message()));
    if (!NpyDTypeFits(array->dtype, p.dtype)) {
      return Fail(StrCat("--input ", param, ": parameter '", param, "' is ",
                         codegen::DTypeName(p.dtype), " (", NpyDTypeText(p.dtype), "), '", file,
                         "' holds ", npy::DescrOf(array->dtype), " (", npy::NameOf(array->dtype),
                         ")"));
    }
    if (p.dtype == codegen::DType::kInt8x4 && (array->shape.empty() || array->shape.back() != 4)) {
      return Fail(StrCat("--input ", param, ": parameter '", param, "' is int8x4, held as ",
                         NpyDTypeText(p.dtype), "; '", file, "' has shape ", array->ShapeText()));
    }
    arrays.emplace(param, std::move(*array));
  }

  // Every scalar given and valid, before the device too.
  auto call_args = check::ScalarArgs(md, scalars);
  if (!call_args.ok()) return Fail(call_args.status().message());

  auto loaded = LoadKernel(*flags, std::move(*compiled), name);
  if (!loaded.ok()) return Fail(loaded.status().message());
  const hal::Device& device = *loaded->device;
  const runtime::Kernel& fn = *loaded->kernel;
  std::printf("device: %s\n", device.Describe().c_str());
  if (!fn.availability().ok()) {
    std::printf("SKIP: %s\n", fn.availability().message().c_str());
    if (!outputs.empty()) {
      std::fprintf(stderr, "kiln: nothing ran, so no --output file was written\n");
      return 1;
    }
    return check_on ? 1 : 0;
  }
  // Each input's element count against what the scalars make the parameter need.
  const std::vector<int64_t> extent_args = ExtentArgsOf(*call_args);
  for (auto& [param, array] : arrays) {
    size_t index = 0;
    while (md.params[index].name != param) ++index;
    const codegen::ParamInfo& p = md.params[index];
    auto elements = fn.BufferElements(index, *call_args);
    if (!elements.ok()) return Fail(elements.status().message());
    const uint64_t lanes = p.dtype == codegen::DType::kInt8x4 ? 4 : 1;
    if (array.elements() != *elements * lanes) {
      return Fail(StrCat("--input ", param, ": parameter '", param, "' (",
                         codegen::DTypeName(p.dtype), DeclaredShapeText(p), ") needs ",
                         ShapeText(BufferShape(p, extent_args, *elements)), " = ",
                         *elements * lanes, " elements with these scalars; '", inputs.at(param),
                         "' holds ", array.ShapeText(), " = ", array.elements(), " elements"));
    }
    check.inputs.emplace(param, ToBufferBytes(array, p.dtype));
    array.data = {};
  }

  auto result = check_on ? check::RunAndCheck(fn, *source, check) : check::RunOnDevice(fn, check);
  if (!result.ok()) return Fail(result.status().ToString());
  if (check_on) {
    std::printf("%s: gpu %.3f ms, interpreter %.3f ms, seed %llu\n", name.c_str(), result->gpu_ms,
                result->interp_ms, static_cast<unsigned long long>(result->seed));
  } else {
    std::printf("%s: gpu %.3f ms, seed %llu\n", name.c_str(), result->gpu_ms,
                static_cast<unsigned long long>(result->seed));
  }
  bool written_ok = true;
  for (const check::BufferData& out : result->outputs) {
    const codegen::ParamInfo& p = md.params[out.param];
    const uint64_t elements = out.bytes.size() / codegen::DTypeBufferBytes(p.dtype);
    std::vector<uint64_t> shape = BufferShape(p, extent_args, elements);
    std::printf("  %s\n", ValueSummary(out.name, out.dtype, out.bytes, shape).c_str());
    auto file = outputs.find(out.name);
    if (file == outputs.end()) continue;
    Status written = npy::WriteNpyFile(file->second, ToNpyArray(p.dtype, out.bytes, shape));
    if (!written.ok()) {
      std::fprintf(stderr, "kiln: --output %s: %s\n", out.name.c_str(), written.message().c_str());
      written_ok = false;
    } else {
      std::printf("  wrote %s to %s\n", out.name.c_str(), file->second.c_str());
    }
  }
  if (!check_on) return written_ok ? 0 : 1;
  std::printf("%s", result->Summary().c_str());
  std::printf("max error %g: %s\n", result->max_error, result->pass ? "PASS" : "FAIL");
  return result->pass && written_ok ? 0 : 1;
}

}  // namespace kiln::tool
