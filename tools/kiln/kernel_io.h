// What `kiln run` and `kiln bench kernel` share: repeated name=value flags,
// loading a function from a compiled module, and moving buffers between
// .npy arrays and the kernel ABI's layout.
//
// Element types and their .npy dtypes: f32 <f4, f16 <f2, i32 <i4, u32 <u4,
// bool |b1 (one byte in the file, a 32-bit 0 or 1 in the buffer; any nonzero
// byte reads as true), int8x4 |i1 or |u1 with a last dimension of 4 (the
// four lanes of each packed element, lane 0 the lowest byte; written as
// |i1).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "flags.h"
#include "kiln/codegen/compiled_module.h"
#include "kiln/runtime/module.h"
#include "kiln/support/npy.h"
#include "kiln/support/status.h"

namespace kiln::tool {

// Takes every `--NAME key=value` and `--NAME=key=value` of the names in
// `repeated` out of `args` into `values[NAME]` (in order), leaving the rest
// in `rest`. Errors: a missing value, a value without `key=`, a key given
// twice for the same flag.
Status CollectRepeatedFlags(const Args& args, const std::vector<std::string>& repeated,
                            std::map<std::string, std::map<std::string, std::string>>& values,
                            Args& rest);

// That `file` may be written through WriteFileAtomically (a temporary
// beside it, renamed over it) without harm, before any work is done: it is
// absent or a regular file (never a folder, a symbolic link, a device or a
// FIFO, which the rename would replace), in an existing writable folder, and
// not `input` (the file the command reads) under any name.
Status CheckOutputFile(const std::string& file, const std::string& input = "");

// The compiled module at `path`, deserialized and validated; errors name it.
StatusOr<codegen::CompiledModule> ReadModule(const std::string& path);

// A function of a compiled module, loaded on the device the flags choose.
struct LoadedKernel {
  std::shared_ptr<hal::Device> device;
  std::unique_ptr<runtime::LoadedModule> module;
  const runtime::Kernel* kernel = nullptr;
};
// The device from --impl/--backend/--feature-level/--trusted, the module
// loaded on it and its function `name` (prepared); errors are the message
// to print.
StatusOr<LoadedKernel> LoadKernel(const Flags& flags, codegen::CompiledModule compiled,
                                  const std::string& name);

// --timeout SECONDS: how long the device may take over one call (default
// kDefaultTimeoutSeconds; 0 for no limit). At most 1e6 seconds.
inline constexpr double kDefaultTimeoutSeconds = 300;
StatusOr<std::chrono::nanoseconds> TimeoutFlag(const Flags& flags);

// Turns a device call that never ends (a loop whose condition never
// fails) into an error. Between Arm and Disarm, once `limit` has passed, it
// prints "kiln: <what>: the device had not finished after ..." and ends the
// process at once with exit code 1. It cannot do less: WebGPU cannot cancel
// submitted work, some implementations run it inside the submit (Dawn's
// OpenGL backend on llvmpipe), and destroying the device would wait for it.
class Watchdog {
 public:
  explicit Watchdog(std::chrono::nanoseconds limit) : limit_(limit) {}
  ~Watchdog() { Disarm(); }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void Arm(const std::string& what);  // no effect with an infinite limit
  void Disarm();

 private:
  std::chrono::nanoseconds limit_;
  std::mutex mutex_;
  std::condition_variable disarmed_;
  bool armed_ = false;
  std::thread thread_;
};

// The .npy dtype a parameter's elements are written as.
npy::DType NpyDTypeOf(codegen::DType t);
// Whether an .npy array of `t` may fill a parameter of `param`.
bool NpyDTypeFits(npy::DType t, codegen::DType param);
// "<f4", or "|i1 or |u1 with a last dimension of 4" for int8x4.
std::string NpyDTypeText(codegen::DType t);

// The array's data in the kernel ABI's layout of `param` (bool widened,
// int8x4 packed). The caller has checked NpyDTypeFits and the size.
std::vector<uint8_t> ToBufferBytes(const npy::Array& array, codegen::DType param);

// The scalar arguments as the metadata's extents read them (by parameter
// index; i32 sign-extended, u32 zero-extended, 0 elsewhere).
std::vector<int64_t> ExtentArgsOf(const std::vector<runtime::Arg>& args);

// The N-D shape of buffer parameter `param` with these scalars when it is
// dense and its extents evaluate to `elements` in all; else [elements].
// int8x4 parameters get a last dimension of 4.
std::vector<uint64_t> BufferShape(const codegen::ParamInfo& param,
                                  const std::vector<int64_t>& extent_args, uint64_t elements);
// "[16, 16]"
std::string ShapeText(const std::vector<uint64_t>& shape);
// "[n]", the metadata's shape as written in the IR.
std::string DeclaredShapeText(const codegen::ParamInfo& param);

// `bytes` (the kernel ABI's layout of `dtype`) as an .npy array of `shape`.
npy::Array ToNpyArray(codegen::DType dtype, const std::vector<uint8_t>& bytes,
                      std::vector<uint64_t> shape);

// One line describing a buffer's values: its name, shape, dtype, min, max,
// mean (over the finite values), the NaN count when there are NaNs, and the
// first few values.
std::string ValueSummary(const std::string& name, codegen::DType dtype,
                         const std::vector<uint8_t>& bytes, const std::vector<uint64_t>& shape);

}  // namespace kiln::tool
