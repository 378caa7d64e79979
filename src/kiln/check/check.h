// Differential checking: run a compiled function on the GPU and its source
// IR in the interpreter on the same fresh random inputs, outputs poisoned
// first, and compare every buffer the kernel may write.
//
// Inputs (read-only buffers) get random values: floats in [-1, 1], signed
// integers in [-100, 100], unsigned in [0, 200], bools 0/1, int8x4 random
// bits. Written buffers start as random bytes (the poison), identical on
// both sides, so an element the kernel leaves alone compares equal and one
// it should have written does not. Floats compare within
// tolerance * (1 + |reference|) (NaN equals NaN); everything else exactly
// (bools by truth).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kiln/codegen/wgsl_codegen.h"
#include "kiln/ir/function.h"
#include "kiln/runtime/module.h"
#include "kiln/support/status.h"

namespace kiln::check {

using runtime::Arg;
using runtime::Kernel;

// Compile options whose limits are the device's (runtime::TargetLimitsOf),
// so kernels are checked against what they will run on.
codegen::CompileOptions CompileOptionsFor(const hal::Device& device);

// That the source IR a compiled function carries (for --check) parses and
// declares the function and parameters its metadata describes: names,
// kinds, types, shapes and strides. kDataLoss naming the difference.
Status ValidateSourceIr(const codegen::CompiledFunction& function);

struct CheckOptions {
  // Values of the scalar parameters, by name, as text ("1000", "0.5").
  std::map<std::string, std::string> scalar_args;
  std::optional<uint64_t> seed;  // empty: a fresh random seed (any value, 0 included, is one)
  double tolerance = 1e-4;       // floats: |gpu - ref| <= tolerance * (1 + |ref|)
  // f16 buffers compare at least this loosely.
  double f16_tolerance = 1e-2;
  // Contents of buffer parameters, by name, in the kernel ABI's layout (bool
  // as a 32-bit 0 or 1, int8x4 packed): given to both sides instead of the
  // random data, or the poison of a written buffer. Each must be exactly the
  // parameter's bytes for the scalar arguments.
  std::map<std::string, std::vector<uint8_t>> inputs;
  // Called with true just before the device call and with false once it has
  // returned (not around the interpreter): where a tool arms a watchdog.
  std::function<void(bool running)> on_device_call;
};

// A buffer's content after the call, as the GPU left it.
struct BufferData {
  std::string name;
  size_t param = 0;  // the parameter's index
  codegen::DType dtype = codegen::DType::kF32;
  std::vector<uint8_t> bytes;  // the kernel ABI's layout
};

struct BufferCheck {
  std::string name;
  std::string dtype;
  uint64_t elements = 0;
  uint64_t mismatches = 0;
  double max_error = 0;         // largest |gpu - ref| (numbers), or 0/1 (bools, int8x4)
  int64_t first_mismatch = -1;  // element index
  std::string first_gpu, first_ref;
};

// Compares one buffer's GPU bytes with the reference's, element by element:
// exact types bit for bit (bools as zero or not), floats within
// `tolerance` relative to 1 + |ref| (NaN matches only NaN; an infinite
// reference only itself).
BufferCheck CompareBuffer(const std::string& name, ir::DataType t, const std::vector<uint8_t>& gpu,
                          const std::vector<uint8_t>& ref, double tolerance);

struct CheckResult {
  std::vector<BufferCheck> buffers;  // the written ones
  double max_error = 0;
  bool pass = true;
  uint64_t seed = 0;
  double gpu_ms = 0;     // wall time of the GPU call (submit + wait)
  double interp_ms = 0;  // wall time of the interpreter (0 when it did not run)
  // Every written buffer as the GPU left it, in parameter order.
  std::vector<BufferData> outputs;
  std::string Summary() const;  // one line per buffer
};

// `fn` must have been compiled from `source`. Errors: a name in
// options.scalar_args that is not a scalar parameter, a missing or invalid
// scalar value, or a buffer larger than the device's maxBufferSize or
// maxStorageBufferBindingSize (checked before anything is allocated).
StatusOr<CheckResult> RunAndCheck(const Kernel& fn, const ir::Function& source,
                                  const CheckOptions& options);

// RunAndCheck's GPU side alone: the same inputs (options.inputs, else random
// data, written buffers poisoned) and the call, with no interpreter and no
// comparison. `buffers` stays empty, `pass` true and `interp_ms` 0; the
// written buffers are in `outputs`. The same errors.
StatusOr<CheckResult> RunOnDevice(const Kernel& fn, const CheckOptions& options);

// The arguments of a call on fresh device buffers, filled as RunAndCheck
// fills them (options.inputs, else random data; written buffers poisoned),
// every size checked against the device's limits first. Sets `seed` (when
// not null) to the seed used. The same errors.
StatusOr<std::vector<Arg>> MakeCallArgs(const Kernel& fn, const CheckOptions& options,
                                        uint64_t* seed = nullptr);

// The arguments of a call whose scalars come from `scalar_args` (by name, as
// text); buffer parameters' entries are Arg::Buffer(nullptr). Errors: a name
// that is not a scalar parameter, a missing or invalid value, naming the
// function and parameter.
StatusOr<std::vector<Arg>> ScalarArgs(const codegen::KernelMetadata& md,
                                      const std::map<std::string, std::string>& scalar_args);

// The Arg a scalar parameter of type `dtype` (i32, u32 or f32) takes from
// `text`: a decimal number (no octal or hexadecimal, nothing after it)
// within the type's range.
StatusOr<Arg> ParseScalarArg(std::string_view dtype, std::string_view text);

// Whether every name in `scalar_args` is a scalar parameter of `md`; the
// error names the function's scalar parameters.
Status CheckScalarArgNames(const codegen::KernelMetadata& md,
                           const std::map<std::string, std::string>& scalar_args);

}  // namespace kiln::check
