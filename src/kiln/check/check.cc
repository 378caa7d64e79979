#include "kiln/check/check.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <span>
#include <utility>

#include "kiln/codegen/extent_lowering.h"
#include "kiln/interp/half.h"
#include "kiln/interp/interpreter.h"
#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/types.h"

namespace kiln::check {

using codegen::DTypeName;
using codegen::ParamKind;
using runtime::Arg;
using runtime::Kernel;

namespace {

ir::DataType IrType(codegen::DType t) {
  return *ir::DataType::FromString(DTypeName(t));
}

using codegen::ParamKind;

void FillRandom(ir::DataType t, std::vector<uint8_t>& bytes, std::mt19937_64& rng) {
  const size_t bytes_per = t.is_bool() ? 4 : t.StorageBytes();
  const size_t n = bytes.size() / bytes_per;
  std::uniform_real_distribution<float> real(-1.f, 1.f);
  std::uniform_int_distribution<int32_t> sint(-100, 100), uint(0, 200), bit(0, 1);
  for (size_t i = 0; i < n; ++i) {
    uint8_t* at = bytes.data() + i * bytes_per;
    if (t.is_bool()) {
      int32_t v = bit(rng);
      std::memcpy(at, &v, 4);
    } else if (t == ir::kInt8x4) {
      uint32_t v = static_cast<uint32_t>(rng());
      std::memcpy(at, &v, 4);
    } else if (t.is_float() && t.bits == 32) {
      float v = real(rng);
      std::memcpy(at, &v, 4);
    } else if (t.is_float() && t.bits == 16) {
      uint16_t h = interp::FloatToHalfBits(real(rng));
      std::memcpy(at, &h, 2);
    } else {
      int64_t v = t.is_uint() ? uint(rng) : sint(rng);
      std::memcpy(at, &v, bytes_per);  // little endian: the low bytes
    }
  }
}

double ElementAsDouble(ir::DataType t, const uint8_t* at) {
  if (t.is_float() && t.bits == 32) {
    float f;
    std::memcpy(&f, at, 4);
    return f;
  }
  if (t.is_float() && t.bits == 16) {
    uint16_t h;
    std::memcpy(&h, at, 2);
    return interp::HalfBitsToFloat(h);
  }
  return 0;
}

// An integer element's value (an int8x4 as its 32 bits, unsigned).
int64_t ElementAsInt(ir::DataType t, const uint8_t* at, size_t bytes_per) {
  int64_t v = 0;
  std::memcpy(&v, at, bytes_per);
  if (bytes_per == 4)
    v = t.is_uint() || t == ir::kInt8x4 ? int64_t(uint32_t(v)) : int64_t(int32_t(v));
  return v;
}

std::string ElementText(ir::DataType t, const uint8_t* at, size_t bytes_per) {
  if (t.is_float()) {
    // Enough digits to tell apart any two f32 (or f16) values.
    char text[32];
    std::snprintf(text, sizeof text, "%.9g", ElementAsDouble(t, at));
    return text;
  }
  return StrCat(ElementAsInt(t, at, bytes_per));
}

// The bytes of buffer parameter `i` for these arguments, checked against
// the device's maxBufferSize and maxStorageBufferBindingSize.
StatusOr<uint64_t> BufferBytesWithinLimits(const Kernel& fn, size_t i, std::span<const Arg> args) {
  const codegen::ParamInfo& p = fn.metadata().params[i];
  KILN_ASSIGN_OR_RETURN(uint64_t elements, fn.BufferElements(i, args));
  const uint32_t bytes_per = codegen::DTypeBufferBytes(p.dtype);
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(elements, uint64_t{bytes_per}, &bytes)) {
    return InvalidArgument("function '", fn.name(), "' parameter '", p.name, "': ", elements, " ",
                           DTypeName(p.dtype), " elements overflow a 64-bit byte size");
  }
  const hal::Limits& limits = fn.device().limits();
  for (auto [limit, name] :
       {std::pair{limits.max_buffer_size, "maxBufferSize"},
        std::pair{limits.max_storage_buffer_binding_size, "maxStorageBufferBindingSize"}}) {
    if (bytes > limit) {
      return InvalidArgument("function '", fn.name(), "' parameter '", p.name, "': ", elements, " ",
                             DTypeName(p.dtype), " elements need ", bytes, " bytes, more than the ",
                             "device's ", name, " of ", limit);
    }
  }
  return bytes;
}

}  // namespace

BufferCheck CompareBuffer(const std::string& name, ir::DataType t, const std::vector<uint8_t>& gpu,
                          const std::vector<uint8_t>& ref, double tolerance) {
  BufferCheck c;
  c.name = name;
  c.dtype = t.ToString();
  const size_t bytes_per = t.is_bool() ? 4 : t.StorageBytes();
  c.elements = ref.size() / bytes_per;
  for (uint64_t i = 0; i < c.elements; ++i) {
    const uint8_t* g = gpu.data() + i * bytes_per;
    const uint8_t* r = ref.data() + i * bytes_per;
    bool equal = std::memcmp(g, r, bytes_per) == 0;
    double error = equal ? 0 : 1;
    if (!equal && t.is_float()) {
      double a = ElementAsDouble(t, g), b = ElementAsDouble(t, r);
      if (std::isnan(a) && std::isnan(b)) {
        equal = true;
        error = 0;
      } else {
        error = std::fabs(a - b);
        if (std::isnan(error)) error = INFINITY;
        // An infinite reference matches only itself (the bytes compared
        // above): a relative tolerance around it would accept anything.
        equal = std::isfinite(b) && error <= tolerance * (1 + std::fabs(b));
      }
    } else if (!equal && t.is_bool()) {
      int32_t a, b;
      std::memcpy(&a, g, 4);
      std::memcpy(&b, r, 4);
      equal = (a != 0) == (b != 0);
      error = equal ? 0 : 1;
    } else if (!equal && t.is_integer() && t != ir::kInt8x4) {
      error = std::fabs(static_cast<double>(ElementAsInt(t, g, bytes_per)) -
                        static_cast<double>(ElementAsInt(t, r, bytes_per)));
    }
    c.max_error = std::max(c.max_error, error);
    if (!equal) {
      if (c.first_mismatch < 0) {
        c.first_mismatch = static_cast<int64_t>(i);
        c.first_gpu = ElementText(t, g, bytes_per);
        c.first_ref = ElementText(t, r, bytes_per);
      }
      ++c.mismatches;
    }
  }
  return c;
}

StatusOr<Arg> ParseScalarArg(std::string_view dtype, std::string_view text) {
  const std::string s(text);
  const bool is_f32 = dtype == "f32";
  if (!is_f32 && dtype != "i32" && dtype != "u32") {
    return InvalidArgument("scalar parameters of type ", dtype, " are not supported");
  }
  // Decimal only: a leading zero does not mean octal, nor 0x hexadecimal;
  // no spaces, and nothing after the number.
  char* end = nullptr;
  errno = 0;
  if (is_f32) {
    const bool plain = !s.empty() && s.find_first_not_of("0123456789+-.eE") == std::string::npos &&
                       s.find_first_of("0123456789") < s.find_first_of("eE");
    const float v = std::strtof(s.c_str(), &end);
    if (plain && end == s.c_str() + s.size()) {
      if (errno == ERANGE && std::isinf(v)) {
        return InvalidArgument("'", text, "' is out of range for f32");
      }
      return Arg::F32(v);
    }
  } else {
    const bool plain = !s.empty() && s.find_first_not_of("0123456789+-") == std::string::npos &&
                       s.find_first_of("+-", 1) == std::string::npos;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (plain && end == s.c_str() + s.size()) {
      const long long lo = dtype == "i32" ? INT32_MIN : 0;
      const long long hi = dtype == "i32" ? INT32_MAX : UINT32_MAX;
      if (errno == ERANGE || v < lo || v > hi) {
        return InvalidArgument("'", text, "' is out of range for ", dtype, " (", lo, " to ", hi,
                               ")");
      }
      if (dtype == "i32") return Arg::I32(static_cast<int32_t>(v));
      return Arg::U32(static_cast<uint32_t>(v));
    }
  }
  return InvalidArgument("'", text, "' is not a decimal ", dtype, " value");
}

Status CheckScalarArgNames(const codegen::KernelMetadata& md,
                           const std::map<std::string, std::string>& scalar_args) {
  std::string names;
  for (const codegen::ParamInfo& p : md.params) {
    if (p.kind == ParamKind::kScalar) names += StrCat(names.empty() ? "" : ", ", p.name);
  }
  for (const auto& [name, value] : scalar_args) {
    const codegen::ParamInfo* param = nullptr;
    for (const codegen::ParamInfo& p : md.params) {
      if (p.name == name) param = &p;
    }
    if (param == nullptr || param->kind != ParamKind::kScalar) {
      return InvalidArgument("function '", md.name, "' has no scalar parameter '", name,
                             "' (its scalar parameters: ", names.empty() ? "none" : names, ")");
    }
  }
  return Status::Ok();
}

codegen::CompileOptions CompileOptionsFor(const hal::Device& device) {
  codegen::CompileOptions o;
  o.codegen.limits = runtime::TargetLimitsOf(device);
  o.lower.verify.limits = o.codegen.limits;
  return o;
}

Status ValidateSourceIr(const codegen::CompiledFunction& f) {
  const codegen::KernelMetadata& m = f.metadata;
  auto fail = [&](auto... why) {
    return DataLoss("invalid module: function '", m.name, "': ", why...);
  };
  auto source = ir::ParseFunction(f.source_ir);
  if (!source.ok()) return fail("the source IR does not parse: ", source.status().message());
  if (source->name() != m.name) return fail("the source IR is of function '", source->name(), "'");
  // Valid IR for the interpreter: types and structure. Not the target's
  // limits, which the module may have been compiled past (kiln compile
  // --max-invocations) and which the device checks on load.
  ir::VerifyOptions structure;
  TargetLimits& l = structure.limits;
  l.max_invocations_per_workgroup = l.max_workgroup_size_x = l.max_workgroup_size_y =
      l.max_workgroup_size_z = l.max_workgroup_storage_bytes = l.max_storage_buffers_per_stage =
          UINT32_MAX;
  l.max_storage_buffer_binding_size = l.max_uniform_buffer_binding_size = UINT64_MAX;
  if (Status valid = ir::Verify(*source, structure); !valid.ok()) {
    return fail("the source IR does not verify: ", valid.message());
  }
  const std::vector<ir::Param>& params = source->params();
  if (params.size() != m.params.size()) {
    return fail("the metadata lists ", m.params.size(), " parameters, the source IR has ",
                params.size());
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const codegen::ParamInfo& p = m.params[i];
    const bool buffer = params[i].is_buffer();
    const std::string name = buffer ? params[i].buffer().name() : params[i].var().name();
    const ir::DataType dtype = buffer ? params[i].buffer().dtype() : params[i].var().dtype();
    if (name != p.name || buffer != (p.kind == ParamKind::kBuffer) ||
        dtype.ToString() != DTypeName(p.dtype)) {
      return fail("parameter ", i, " is ", p.kind == ParamKind::kBuffer ? "buffer" : "scalar", " '",
                  p.name, "' of type ", DTypeName(p.dtype), " in the metadata but ",
                  buffer ? "buffer" : "scalar", " '", name, "' of type ", dtype,
                  " in the source IR");
    }
    if (!buffer) continue;
    // The metadata's extent programs, not only their text, are the source's
    // extents lowered: a runtime computes buffer sizes from the programs.
    const ir::Buffer& b = params[i].buffer();
    const auto lowered_as = [&](const ir::Expr& e, const codegen::ExtentExpr& program) {
      auto lowered = codegen::LowerExtent(e, params, "");
      return lowered.ok() && *lowered == program;
    };
    bool same = b.shape().size() == p.shape.size() && b.strides().size() == p.strides.size();
    for (size_t d = 0; same && d < p.shape.size(); ++d) same = lowered_as(b.shape()[d], p.shape[d]);
    for (size_t d = 0; same && d < p.strides.size(); ++d) {
      same = lowered_as(b.strides()[d], p.strides[d]);
    }
    if (!same) return fail("the shape of parameter '", p.name, "' differs from the source IR's");
  }
  return Status::Ok();
}

StatusOr<std::vector<Arg>> ScalarArgs(const codegen::KernelMetadata& md,
                                      const std::map<std::string, std::string>& scalar_args) {
  KILN_RETURN_IF_ERROR(CheckScalarArgNames(md, scalar_args));
  std::vector<Arg> args(md.params.size());
  for (size_t i = 0; i < md.params.size(); ++i) {
    const codegen::ParamInfo& p = md.params[i];
    if (p.kind != ParamKind::kScalar) {
      args[i] = Arg::Buffer(nullptr);
      continue;
    }
    auto it = scalar_args.find(p.name);
    if (it == scalar_args.end()) {
      return InvalidArgument("function '", md.name, "' needs a value for scalar parameter '",
                             p.name, "' (", DTypeName(p.dtype), ")");
    }
    auto parsed = ParseScalarArg(DTypeName(p.dtype), it->second);
    if (!parsed.ok()) {
      return parsed.status().WithContext(
          StrCat("function '", md.name, "' scalar parameter '", p.name, "'"));
    }
    args[i] = *parsed;
  }
  return args;
}

namespace {

// The call's arguments on fresh device buffers filled from options.inputs,
// random data or the poison; with `ref_args`, the interpreter's arguments too
// (host copies of the same data).
StatusOr<std::vector<Arg>> MakeArgs(const Kernel& fn, const CheckOptions& options,
                                    std::mt19937_64& rng, std::vector<interp::ArgValue>* ref_args) {
  const codegen::KernelMetadata& md = fn.metadata();
  // Scalars first: buffer sizes depend on them.
  KILN_ASSIGN_OR_RETURN(std::vector<Arg> args, ScalarArgs(md, options.scalar_args));
  if (ref_args != nullptr) ref_args->assign(md.params.size(), interp::ArgValue{});
  for (size_t i = 0; ref_args != nullptr && i < md.params.size(); ++i) {
    if (args[i].is_buffer()) continue;
    std::visit(
        [&](auto v) {
          using T = decltype(v);
          if constexpr (std::is_same_v<T, int32_t>) (*ref_args)[i] = interp::Value::I32(v);
          if constexpr (std::is_same_v<T, uint32_t>) (*ref_args)[i] = interp::Value::U32(v);
          if constexpr (std::is_same_v<T, float>) (*ref_args)[i] = interp::Value::F32(v);
        },
        args[i].scalar);
  }
  for (const auto& [name, bytes] : options.inputs) {
    bool found = false;
    for (const codegen::ParamInfo& p : md.params) {
      found |= p.name == name && p.kind == ParamKind::kBuffer;
    }
    if (!found) {
      return InvalidArgument("function '", md.name, "' has no buffer parameter '", name, "'");
    }
  }
  // Every buffer's size against the device's limits before anything is
  // allocated, on the host or the device.
  std::vector<uint64_t> sizes(md.params.size(), 0);
  for (size_t i = 0; i < md.params.size(); ++i) {
    if (md.params[i].kind != ParamKind::kBuffer) continue;
    KILN_ASSIGN_OR_RETURN(sizes[i], BufferBytesWithinLimits(fn, i, args));
    auto given = options.inputs.find(md.params[i].name);
    if (given != options.inputs.end() && given->second.size() != sizes[i]) {
      return InvalidArgument("function '", md.name, "' parameter '", md.params[i].name,
                             "': the input is ", given->second.size(), " bytes, the parameter ",
                             sizes[i]);
    }
  }
  for (size_t i = 0; i < md.params.size(); ++i) {
    const codegen::ParamInfo& p = md.params[i];
    if (p.kind != ParamKind::kBuffer) continue;
    const ir::DataType t = IrType(p.dtype);
    const uint32_t bytes_per = codegen::DTypeBufferBytes(p.dtype);
    interp::HostBuffer host;
    host.dtype = t;
    host.shape = {static_cast<int64_t>(sizes[i] / bytes_per)};
    auto given = options.inputs.find(p.name);
    try {
      if (given != options.inputs.end()) {
        host.bytes = given->second;
      } else {
        host.bytes.resize(sizes[i]);
      }
    } catch (const std::bad_alloc&) {
      return OutOfMemory("function '", md.name, "': no host memory for the ", sizes[i],
                         " bytes of parameter '", p.name, "'");
    }
    // Random data is drawn for given buffers too, so the other buffers' data
    // does not depend on which are given.
    if (p.access == codegen::BufferAccess::kReadWrite) {
      if (given == options.inputs.end()) {
        for (auto& b : host.bytes) b = static_cast<uint8_t>(rng());  // the poison
      } else {
        for (size_t k = 0; k < host.bytes.size(); ++k) rng();
      }
    } else if (given == options.inputs.end()) {
      FillRandom(t, host.bytes, rng);
    } else {
      std::vector<uint8_t> discard(host.bytes.size());
      FillRandom(t, discard, rng);
    }
    KILN_ASSIGN_OR_RETURN(hal::BufferRef buffer,
                          fn.device().allocator().Allocate(
                              std::max<uint64_t>({host.bytes.size(), 4, fn.MinBindingBytes(i)})));
    if (!host.bytes.empty()) KILN_RETURN_IF_ERROR(hal::Upload(fn.device(), buffer, 0, host.bytes));
    args[i] = Arg::Buffer(buffer);
    if (ref_args != nullptr) (*ref_args)[i] = std::move(host);
  }
  return args;
}

// RunAndCheck, and RunOnDevice when `source` is null.
StatusOr<CheckResult> Run(const Kernel& fn, const ir::Function* source,
                          const CheckOptions& options) {
  KILN_RETURN_IF_ERROR(fn.Prepare());  // before timing: the first use creates the pipeline
  const codegen::KernelMetadata& md = fn.metadata();
  CheckResult result;
  result.seed = options.seed ? *options.seed : std::random_device{}() | 1;
  std::mt19937_64 rng(result.seed);
  std::vector<interp::ArgValue> ref_args;
  KILN_ASSIGN_OR_RETURN(std::vector<Arg> args, MakeArgs(fn, options, rng, &ref_args));

  auto t0 = std::chrono::steady_clock::now();
  if (options.on_device_call) options.on_device_call(true);
  Status called = fn.Call(args);
  if (options.on_device_call) options.on_device_call(false);
  KILN_RETURN_IF_ERROR(called);
  auto t1 = std::chrono::steady_clock::now();
  if (source != nullptr) {
    KILN_RETURN_IF_ERROR(interp::Run(*source, ref_args).WithContext("the interpreter"));
  }
  auto t2 = std::chrono::steady_clock::now();
  result.gpu_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  if (source != nullptr) {
    result.interp_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
  }

  for (size_t i = 0; i < md.params.size(); ++i) {
    const codegen::ParamInfo& p = md.params[i];
    if (p.kind != ParamKind::kBuffer || p.access != codegen::BufferAccess::kReadWrite) continue;
    const auto& ref = std::get<interp::HostBuffer>(ref_args[i]);
    BufferData out{p.name, i, p.dtype, {}};
    out.bytes.resize(ref.bytes.size());
    if (!out.bytes.empty()) {
      KILN_RETURN_IF_ERROR(hal::Download(fn.device(), args[i].buffer, 0, out.bytes));
    }
    if (source != nullptr) {
      const double tol = ref.dtype.is_float() && ref.dtype.bits == 16
                             ? std::max(options.tolerance, options.f16_tolerance)
                             : options.tolerance;
      BufferCheck c = CompareBuffer(p.name, ref.dtype, out.bytes, ref.bytes, tol);
      result.max_error = std::max(result.max_error, c.max_error);
      result.pass &= c.mismatches == 0;
      result.buffers.push_back(std::move(c));
    }
    result.outputs.push_back(std::move(out));
  }
  return result;
}

}  // namespace

StatusOr<CheckResult> RunAndCheck(const Kernel& fn, const ir::Function& source,
                                  const CheckOptions& options) {
  return Run(fn, &source, options);
}

StatusOr<CheckResult> RunOnDevice(const Kernel& fn, const CheckOptions& options) {
  return Run(fn, nullptr, options);
}

StatusOr<std::vector<Arg>> MakeCallArgs(const Kernel& fn, const CheckOptions& options,
                                        uint64_t* seed) {
  const uint64_t used = options.seed ? *options.seed : std::random_device{}() | 1;
  if (seed != nullptr) *seed = used;
  std::mt19937_64 rng(used);
  return MakeArgs(fn, options, rng, nullptr);
}

std::string CheckResult::Summary() const {
  std::string out;
  for (const BufferCheck& b : buffers) {
    out += StrCat("  ", b.name, " (", b.dtype, "[", b.elements, "]): max error ", b.max_error);
    if (b.mismatches) {
      out += StrCat(", ", b.mismatches, " mismatches, first at ", b.first_mismatch, ": gpu ",
                    b.first_gpu, ", reference ", b.first_ref);
    }
    out += "\n";
  }
  return out;
}

}  // namespace kiln::check
