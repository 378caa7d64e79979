#include "kernel_io.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>

#include "kiln/codegen/extent_expr.h"
#include "kiln/codegen/module_format.h"
#include "kiln/codegen/module_validate.h"
#include "kiln/interp/half.h"
#include "kiln/support/file.h"

namespace kiln::tool {

Status CheckOutputFile(const std::string& file, const std::string& input) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::file_status there = fs::symlink_status(file, error);
  if (fs::is_directory(there)) return InvalidArgument("'", file, "' is a directory");
  if (fs::is_symlink(there)) {
    return InvalidArgument("'", file, "' is a symbolic link; name the file itself");
  }
  if (fs::exists(there) && !fs::is_regular_file(there)) {
    return InvalidArgument("'", file,
                           "' exists and is not a regular file (a device or a FIFO); it is not "
                           "replaced");
  }
  if (!input.empty() && fs::exists(there) && fs::equivalent(file, input, error)) {
    return InvalidArgument("'", file, "' is the input file '", input,
                           "'; writing it would destroy the input");
  }
  if (!file.empty() && file.back() == '/') {
    return InvalidArgument("'", file, "' ends in '/': it names a folder, not a file");
  }
  const fs::path folder = fs::absolute(file, error).parent_path();
  if (!fs::is_directory(folder, error)) {
    return InvalidArgument("'", file, "': folder '", folder.string(), "' ",
                           fs::exists(folder, error) ? "is not a folder" : "does not exist");
  }
  if (::access(folder.c_str(), W_OK) != 0) {
    return InvalidArgument("'", file, "': cannot write in folder '", folder.string(),
                           "': ", std::strerror(errno));
  }
  return Status::Ok();
}

using codegen::DType;

Status CollectRepeatedFlags(const Args& args, const std::vector<std::string>& repeated,
                            std::map<std::string, std::map<std::string, std::string>>& values,
                            Args& rest) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string* flag = nullptr;
    std::string value;
    for (const std::string& name : repeated) {
      const std::string dashed = "--" + name;
      if (args[i] == dashed) {
        if (i + 1 >= args.size()) return InvalidArgument("flag ", dashed, " needs a value");
        KILN_RETURN_IF_ERROR(CheckSeparateValue(dashed, args[i + 1]));
        value = args[++i];
      } else if (args[i].rfind(dashed + "=", 0) == 0) {
        value = args[i].substr(dashed.size() + 1);
      } else {
        continue;
      }
      flag = &name;
      break;
    }
    if (flag == nullptr) {
      rest.push_back(args[i]);
      continue;
    }
    const auto eq = value.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgument("--", *flag, " takes name=", *flag == "arg" ? "value" : "file.npy",
                             ", got '", value, "'");
    }
    const std::string key = value.substr(0, eq);
    if (!values[*flag].emplace(key, value.substr(eq + 1)).second) {
      return InvalidArgument("--", *flag, " ", key, " is given more than once");
    }
  }
  return Status::Ok();
}

StatusOr<codegen::CompiledModule> ReadModule(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, ReadInputFile(path));
  auto compiled = codegen::DeserializeModule(bytes);
  if (!compiled.ok()) return compiled.status().WithContext(path);
  Status valid = codegen::ValidateModule(*compiled);
  if (!valid.ok()) return valid.WithContext(path);
  return compiled;
}

StatusOr<LoadedKernel> LoadKernel(const Flags& flags, codegen::CompiledModule compiled,
                                  const std::string& name) {
  KILN_ASSIGN_OR_RETURN(hal::DeviceOptions options, DeviceOptionsFromFlags(flags));
  LoadedKernel out;
  KILN_ASSIGN_OR_RETURN(out.device, hal::Device::Create(options));
  KILN_ASSIGN_OR_RETURN(out.module, runtime::LoadedModule::Load(out.device, std::move(compiled)));
  KILN_ASSIGN_OR_RETURN(out.kernel, out.module->Find(name));
  return out;
}

StatusOr<std::chrono::nanoseconds> TimeoutFlag(const Flags& flags) {
  KILN_ASSIGN_OR_RETURN(double seconds,
                        flags.GetNonNegativeDouble("timeout", kDefaultTimeoutSeconds));
  if (seconds > 1e6 || (seconds > 0 && seconds < 1e-9)) {
    return InvalidArgument(
        "flag --timeout is 0 (no limit) or from 1e-9 (a nanosecond) to 1000000 seconds, got '",
        *flags.Get("timeout"), "'");
  }
  if (seconds == 0) return hal::kInfinite;
  return std::max(std::chrono::nanoseconds(1),
                  std::chrono::nanoseconds(static_cast<int64_t>(seconds * 1e9)));
}

void Watchdog::Arm(const std::string& what) {
  Disarm();
  if (limit_ == hal::kInfinite) return;
  armed_ = true;
  const auto deadline = std::chrono::steady_clock::now() + limit_;
  thread_ = std::thread([this, what, deadline] {
    std::unique_lock<std::mutex> lock(mutex_);
    if (disarmed_.wait_until(lock, deadline, [this] { return !armed_; })) return;
    std::fflush(stdout);
    std::fprintf(stderr,
                 "kiln: %s: the device had not finished after %g s (--timeout); a loop that "
                 "never ends? WebGPU cannot stop it, so kiln exits without waiting for it\n",
                 what.c_str(), static_cast<double>(limit_.count()) / 1e9);
    std::fflush(stderr);
    std::_Exit(1);
  });
}

void Watchdog::Disarm() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    armed_ = false;
  }
  disarmed_.notify_all();
  thread_.join();
}

npy::DType NpyDTypeOf(DType t) {
  switch (t) {
    case DType::kF32:
      return npy::DType::kF32;
    case DType::kF16:
      return npy::DType::kF16;
    case DType::kI32:
      return npy::DType::kI32;
    case DType::kU32:
      return npy::DType::kU32;
    case DType::kBool:
      return npy::DType::kBool;
    case DType::kInt8x4:
      return npy::DType::kI8;
  }
  return npy::DType::kF32;
}

bool NpyDTypeFits(npy::DType t, DType param) {
  if (param == DType::kInt8x4) return t == npy::DType::kI8 || t == npy::DType::kU8;
  return t == NpyDTypeOf(param);
}

std::string NpyDTypeText(DType t) {
  if (t == DType::kInt8x4) return "|i1 or |u1 with a last dimension of 4";
  return std::string(npy::DescrOf(NpyDTypeOf(t)));
}

std::vector<uint8_t> ToBufferBytes(const npy::Array& array, DType param) {
  if (param == DType::kBool) {
    std::vector<uint8_t> out(array.data.size() * 4, 0);
    for (size_t i = 0; i < array.data.size(); ++i) out[i * 4] = array.data[i] != 0 ? 1 : 0;
    return out;
  }
  return std::vector<uint8_t>(array.data.begin(), array.data.end());
}

std::vector<int64_t> ExtentArgsOf(const std::vector<runtime::Arg>& args) {
  std::vector<int64_t> out(args.size(), 0);
  for (size_t i = 0; i < args.size(); ++i) {
    if (auto* v = std::get_if<int32_t>(&args[i].scalar)) out[i] = *v;
    if (auto* v = std::get_if<uint32_t>(&args[i].scalar)) out[i] = *v;
  }
  return out;
}

std::vector<uint64_t> BufferShape(const codegen::ParamInfo& param,
                                  const std::vector<int64_t>& extent_args, uint64_t elements) {
  std::vector<uint64_t> shape;
  bool dense = param.strides.empty() && !param.shape.empty();
  uint64_t product = 1;
  for (const codegen::ExtentExpr& e : param.shape) {
    if (!dense) break;
    auto extent = codegen::Evaluate(e, extent_args);
    if (!extent.ok() || *extent < 0 ||
        __builtin_mul_overflow(product, static_cast<uint64_t>(*extent), &product)) {
      dense = false;
      break;
    }
    shape.push_back(static_cast<uint64_t>(*extent));
  }
  if (!dense || product != elements) shape = {elements};
  if (param.dtype == DType::kInt8x4) shape.push_back(4);
  return shape;
}

std::string ShapeText(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += StrCat(i ? ", " : "", shape[i]);
  return s + "]";
}

std::string DeclaredShapeText(const codegen::ParamInfo& param) {
  std::string s = "[";
  for (size_t i = 0; i < param.shape.size(); ++i) {
    s += (i ? ", " : "") + param.shape[i].text;
  }
  return s + "]";
}

npy::Array ToNpyArray(DType dtype, const std::vector<uint8_t>& bytes, std::vector<uint64_t> shape) {
  npy::Array a;
  a.dtype = NpyDTypeOf(dtype);
  a.shape = std::move(shape);
  if (dtype == DType::kBool) {
    a.data.resize(bytes.size() / 4);
    for (size_t i = 0; i < a.data.size(); ++i) {
      int32_t v;
      std::memcpy(&v, bytes.data() + i * 4, 4);
      a.data[i] = v != 0 ? 1 : 0;
    }
  } else {
    a.data.assign(bytes.begin(), bytes.end());
  }
  return a;
}

namespace {

// The values of the buffer, one per element (int8x4: one per lane).
std::vector<double> Values(DType dtype, const std::vector<uint8_t>& bytes) {
  std::vector<double> out;
  const uint8_t* p = bytes.data();
  switch (dtype) {
    case DType::kF32:
      for (size_t i = 0; i + 4 <= bytes.size(); i += 4) {
        float v;
        std::memcpy(&v, p + i, 4);
        out.push_back(v);
      }
      break;
    case DType::kF16:
      for (size_t i = 0; i + 2 <= bytes.size(); i += 2) {
        uint16_t h;
        std::memcpy(&h, p + i, 2);
        out.push_back(interp::HalfBitsToFloat(h));
      }
      break;
    case DType::kI32:
    case DType::kU32:
    case DType::kBool:
      for (size_t i = 0; i + 4 <= bytes.size(); i += 4) {
        int32_t v;
        std::memcpy(&v, p + i, 4);
        out.push_back(dtype == DType::kU32    ? static_cast<double>(static_cast<uint32_t>(v))
                      : dtype == DType::kBool ? (v != 0 ? 1.0 : 0.0)
                                              : static_cast<double>(v));
      }
      break;
    case DType::kInt8x4:
      for (size_t i = 0; i < bytes.size(); ++i) out.push_back(static_cast<int8_t>(p[i]));
      break;
  }
  return out;
}

// A value as its type reads: integers exactly, floats to 6 digits.
std::string Number(DType dtype, double v) {
  if (dtype == DType::kBool) return v != 0 ? "true" : "false";
  if (std::isnan(v)) return "nan";  // printf would print the sign bit: "-nan"
  const bool integer = dtype == DType::kI32 || dtype == DType::kU32 || dtype == DType::kInt8x4;
  char text[32];
  std::snprintf(text, sizeof text, integer ? "%.0f" : "%.6g", v);
  return text;
}

}  // namespace

std::string ValueSummary(const std::string& name, DType dtype, const std::vector<uint8_t>& bytes,
                         const std::vector<uint64_t>& shape) {
  const std::vector<double> values = Values(dtype, bytes);
  std::string line = StrCat(name, ": ", ShapeText(shape), " ", codegen::DTypeName(dtype));
  if (values.empty()) return line + " (empty)";
  double lo = std::numeric_limits<double>::infinity(), hi = -lo, sum = 0;
  uint64_t nans = 0, counted = 0;
  for (double v : values) {
    if (std::isnan(v)) {
      ++nans;
      continue;
    }
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
    ++counted;
  }
  if (counted > 0) {
    line += StrCat(" min ", Number(dtype, lo), " max ", Number(dtype, hi), " mean ",
                   Number(DType::kF32, sum / static_cast<double>(counted)));
  }
  if (nans > 0) line += StrCat(" nan ", nans);
  line += " first [";
  const size_t shown = std::min<size_t>(values.size(), 6);
  for (size_t i = 0; i < shown; ++i) line += (i ? ", " : "") + Number(dtype, values[i]);
  if (shown < values.size()) line += ", ...";
  return line + "]";
}

}  // namespace kiln::tool
