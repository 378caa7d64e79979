#include "kiln/codegen/module_validate.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kiln/codegen/kernel_abi.h"
#include "kiln/support/file.h"

namespace kiln::codegen {
namespace {

// The format's strings are UTF-8 text (an implementation handed other bytes
// as WGSL or a label may not survive them).
Status CheckText(std::string_view text, std::string_view what) {
  return kiln::CheckText(text, what, StatusCode::kDataLoss);
}

bool IdentChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// The first `word` in `code` at or after `from` that stands alone (not part
// of a longer identifier); npos where there is none.
size_t FindWord(std::string_view code, std::string_view word, size_t from) {
  for (size_t at = code.find(word, from); at != std::string_view::npos;
       at = code.find(word, at + word.size())) {
    const size_t end = at + word.size();
    if ((at == 0 || !IdentChar(code[at - 1])) && (end >= code.size() || !IdentChar(code[end]))) {
      return at;
    }
  }
  return std::string_view::npos;
}

// Removes the whitespace of `text`.
std::string Squeezed(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (!std::isspace(static_cast<unsigned char>(c))) out.push_back(c);
  }
  return out;
}

// The attributes of the declaration at `at` in `code` (no comments): the
// text since the end of the previous declaration (`}` or `;`), whitespace
// removed.
std::string AttributesBefore(std::string_view code, size_t at) {
  const size_t end = code.find_last_of("};", at);
  const size_t from = end == std::string_view::npos ? 0 : end + 1;
  return Squeezed(code.substr(from, at - from));
}

// `wgsl` with its comments (line comments and nested block comments)
// blanked to spaces, so that a search finds only code.
std::string WithoutComments(std::string_view wgsl) {
  std::string out(wgsl);
  size_t i = 0;
  int depth = 0;
  bool line = false;
  while (i < out.size()) {
    const bool two = i + 1 < out.size();
    if (line) {
      if (out[i] == '\n' || out[i] == '\r') {
        line = false;
      } else {
        out[i] = ' ';
      }
      ++i;
    } else if (two && out[i] == '/' && out[i + 1] == '*') {
      ++depth;
      out[i] = out[i + 1] = ' ';
      i += 2;
    } else if (depth > 0 && two && out[i] == '*' && out[i + 1] == '/') {
      --depth;
      out[i] = out[i + 1] = ' ';
      i += 2;
    } else if (depth > 0) {
      if (out[i] != '\n') out[i] = ' ';
      ++i;
    } else if (two && out[i] == '/' && out[i + 1] == '/') {
      line = true;
    } else {
      ++i;
    }
  }
  return out;
}

// The attributes written before the declaration `fn NAME(` in `code` (no
// comments): the text between the end of the previous declaration (`}` or
// `;`) and `fn`, with whitespace removed; nullopt where no function is named
// so.
std::optional<std::string> EntryAttributes(std::string_view code, std::string_view name) {
  for (size_t at = FindWord(code, "fn", 0); at != std::string_view::npos;
       at = FindWord(code, "fn", at + 2)) {
    size_t i = at + 2;
    while (i < code.size() && std::isspace(static_cast<unsigned char>(code[i]))) ++i;
    if (code.substr(i, name.size()) != name) continue;
    i += name.size();
    while (i < code.size() && std::isspace(static_cast<unsigned char>(code[i]))) ++i;
    if (i >= code.size() || code[i] != '(') continue;
    return AttributesBefore(code, at);
  }
  return std::nullopt;
}

// Whether `code` (no comments) has an `enable` directive naming `extension`.
bool Enables(std::string_view code, std::string_view extension) {
  for (size_t at = FindWord(code, "enable", 0); at != std::string_view::npos;
       at = FindWord(code, "enable", at + 6)) {
    const size_t end = code.find(';', at);
    const std::string_view names =
        code.substr(at + 6, end == std::string_view::npos ? std::string_view::npos : end - at - 6);
    for (size_t i = 0; i < names.size();) {
      while (i < names.size() && !IdentChar(names[i])) ++i;
      size_t j = i;
      while (j < names.size() && IdentChar(names[j])) ++j;
      if (j > i && names.substr(i, j - i) == extension) return true;
      i = j;
    }
  }
  return false;
}

// A `var<SPACE> NAME : TYPE;` declaration of the WGSL, each part whitespace
// removed; `typed` is false where no `:` comes before the `;`.
struct VarDecl {
  size_t at = 0;      // where `var` stands
  std::string space;  // "storage,read", "uniform", "workgroup", ...
  std::string name, type;
  bool typed = false;
};

// The `var<...>` declarations of `code` (no comments), in order.
std::vector<VarDecl> VarDecls(std::string_view code) {
  std::vector<VarDecl> decls;
  for (size_t at = FindWord(code, "var", 0); at != std::string_view::npos;
       at = FindWord(code, "var", at + 3)) {
    size_t open = at + 3;
    while (open < code.size() && std::isspace(static_cast<unsigned char>(code[open]))) ++open;
    if (open >= code.size() || code[open] != '<') continue;
    const size_t close = code.find('>', open);
    if (close == std::string_view::npos) continue;
    VarDecl d;
    d.at = at;
    d.space = Squeezed(code.substr(open + 1, close - open - 1));
    const size_t colon = code.find(':', close);
    const size_t end = code.find(';', close);
    if (colon != std::string_view::npos && end != std::string_view::npos && colon < end) {
      d.typed = true;
      d.name = Squeezed(code.substr(close + 1, colon - close - 1));
      d.type = Squeezed(code.substr(colon + 1, end - colon - 1));
    }
    decls.push_back(std::move(d));
  }
  return decls;
}

// The typed `var<...>` declarations of `code` (no comments) that have a
// @group(0) and a @binding(N) attribute, by N; the first of each N.
std::map<uint32_t, VarDecl> BoundVars(std::string_view code) {
  std::map<uint32_t, VarDecl> vars;
  for (VarDecl& d : VarDecls(code)) {
    if (!d.typed) continue;
    const std::string attributes = AttributesBefore(code, d.at);
    const size_t binding = attributes.find("@binding(");
    if (attributes.find("@group(0)") == std::string::npos || binding == std::string::npos) {
      continue;
    }
    uint32_t n = 0;
    size_t i = binding + 9;
    bool digits = false;
    while (i < attributes.size() && attributes[i] >= '0' && attributes[i] <= '9' && n < 1000000) {
      n = n * 10 + static_cast<uint32_t>(attributes[i++] - '0');
      digits = true;
    }
    if (!digits || i >= attributes.size() || attributes[i] != ')') continue;
    vars.try_emplace(n, std::move(d));
  }
  return vars;
}

// The WGSL scalar a buffer of `t` holds under the kernel ABI.
std::string_view StorageScalar(DType t) {
  if (t == DType::kBool) return "i32";
  if (t == DType::kInt8x4) return "u32";
  return DTypeName(t);  // f32, f16, i32, u32: the WGSL's own names
}

// The member types of `struct NAME { ... }` in `code` (no comments), in
// order, whitespace removed; nullopt where there is no such struct, or a
// member has an attribute (@size, @align: the ABI puts field k at 4 * k).
std::optional<std::vector<std::string>> StructMemberTypes(std::string_view code,
                                                          std::string_view name) {
  for (size_t at = FindWord(code, "struct", 0); at != std::string_view::npos;
       at = FindWord(code, "struct", at + 6)) {
    const size_t open = code.find('{', at);
    const size_t close = code.find('}', at);
    if (open == std::string_view::npos || close == std::string_view::npos || open > close) {
      continue;
    }
    if (Squeezed(code.substr(at + 6, open - at - 6)) != name) continue;
    const std::string body = Squeezed(code.substr(open + 1, close - open - 1));
    if (body.find('@') != std::string::npos) return std::nullopt;
    std::vector<std::string> types;
    for (size_t i = 0; i < body.size();) {
      size_t j = body.find(',', i);
      if (j == std::string::npos) j = body.size();
      const std::string member = body.substr(i, j - i);
      if (!member.empty()) {
        const size_t colon = member.find(':');
        types.push_back(colon == std::string::npos ? std::string() : member.substr(colon + 1));
      }
      i = j + 1;
    }
    return types;
  }
  return std::nullopt;
}

std::string Joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

// `text`, or its first 80 characters and its length where longer.
std::string Shortened(const std::string& text) {
  if (text.size() <= 80) return text;
  return StrCat(text.substr(0, 80), "... (", text.size(), " characters)");
}

// The WGSL's bindings against the metadata, as the code generator writes
// them: each buffer a `var<storage, read|read_write>` of `array<ELEMENT>`
// (its type and lanes), the uniform block a struct of the scalar
// parameters' types in order, then the two u32 launch words. What WebGPU's
// layout check lets through (an f32 array where the metadata says i32, a
// constants struct of other types or order) would otherwise compute
// something else silently.
Status CheckBindings(const KernelMetadata& m, std::string_view code) {
  const std::map<uint32_t, VarDecl> vars = BoundVars(code);
  std::vector<std::string> fields;
  for (const ParamInfo& p : m.params) {
    if (p.kind == ParamKind::kScalar) {
      fields.emplace_back(DTypeName(p.dtype));
      continue;
    }
    auto it = vars.find(p.binding);
    if (it == vars.end()) {
      return DataLoss("buffer parameter '", p.name, "' (@binding(", p.binding,
                      ")) is not declared in the WGSL");
    }
    const std::string space =
        StrCat("storage,", p.access == BufferAccess::kReadWrite ? "read_write" : "read");
    const std::string scalar(StorageScalar(p.dtype));
    const std::string type =
        StrCat("array<", p.lanes > 1 ? StrCat("vec", p.lanes, "<", scalar, ">") : scalar, ">");
    if (it->second.space != space || it->second.type != type) {
      return DataLoss("buffer parameter '", p.name, "' (@binding(", p.binding,
                      ")) is declared var<", Shortened(it->second.space), "> of ",
                      Shortened(it->second.type), " in the WGSL; its metadata (",
                      DTypeName(p.dtype), ", ", p.lanes, " lane(s)) makes it var<", space, "> of ",
                      type);
    }
  }
  fields.emplace_back("u32");  // grid_dim_x
  fields.emplace_back("u32");  // num_blocks_x
  auto it = vars.find(m.uniform_binding);
  if (it == vars.end() || it->second.space != "uniform") {
    return DataLoss("the uniform block (@binding(", m.uniform_binding,
                    ")) is not declared var<uniform> in the WGSL");
  }
  const std::optional<std::vector<std::string>> members = StructMemberTypes(code, it->second.type);
  if (!members) {
    return DataLoss("the uniform block's type '", Shortened(it->second.type),
                    "' is not a struct of the WGSL without member attributes");
  }
  if (*members != fields) {
    return DataLoss("the uniform block's struct '", Shortened(it->second.type),
                    "' has members of types (", Shortened(Joined(*members)),
                    "); the scalar parameters and the launch words make (", Joined(fields), ")");
  }
  return Status::Ok();
}

// The size and alignment of a WGSL type by WGSL's memory layout rules.
struct TypeLayout {
  uint64_t size = 0, align = 0;
};
// Beyond any device's workgroup storage: sizes saturate here.
constexpr uint64_t kHugeBytes = uint64_t{1} << 40;

// The layout of `type` (whitespace removed) as a workgroup variable's type,
// for the types kiln declares there and their kin: the 32-bit scalars and
// f16, their vectors (vecN<T> or vecNf/i/u/h), atomic<i32|u32> and fixed-size
// arrays of any of these (nested, at most 16 deep: a crafted type nests no
// deeper into the stack); nullopt for any other type.
std::optional<TypeLayout> WorkgroupLayout(std::string_view type, int depth = 0) {
  if (type == "f32" || type == "i32" || type == "u32" || type == "bool" || type == "atomic<i32>" ||
      type == "atomic<u32>") {
    return TypeLayout{4, 4};
  }
  if (type == "f16") return TypeLayout{2, 2};
  if (type.size() >= 5 && type.starts_with("vec") && type[3] >= '2' && type[3] <= '4') {
    const uint64_t n = static_cast<uint64_t>(type[3] - '0');
    std::string_view element = type.substr(4);
    if (element == "f" || element == "i" || element == "u") {
      element = "f32";
    } else if (element == "h") {
      element = "f16";
    } else if (element.size() > 2 && element.front() == '<' && element.back() == '>') {
      element = element.substr(1, element.size() - 2);
    } else {
      return std::nullopt;
    }
    if (element != "f32" && element != "i32" && element != "u32" && element != "f16" &&
        element != "bool") {
      return std::nullopt;
    }
    const uint64_t scalar = element == "f16" ? 2 : 4;
    return TypeLayout{n * scalar, (n == 2 ? 2 : 4) * scalar};
  }
  if (type.starts_with("array<") && type.back() == '>') {
    const std::string_view inner = type.substr(6, type.size() - 7);
    const size_t comma = inner.rfind(',');
    if (comma == std::string_view::npos) return std::nullopt;  // runtime-sized
    std::string_view count = inner.substr(comma + 1);
    if (!count.empty() && (count.back() == 'u' || count.back() == 'i')) {
      count.remove_suffix(1);
    }
    uint64_t n = 0;
    if (count.empty() || count.size() > 12) return std::nullopt;
    for (char c : count) {
      if (c < '0' || c > '9') return std::nullopt;  // (a named constant: not kiln's)
      n = n * 10 + static_cast<uint64_t>(c - '0');
    }
    if (depth >= 16) return std::nullopt;
    const std::optional<TypeLayout> element = WorkgroupLayout(inner.substr(0, comma), depth + 1);
    if (!element || n == 0) return std::nullopt;
    const uint64_t stride = (element->size + element->align - 1) / element->align * element->align;
    // (Both at most 2^40: the product saturates rather than wraps.)
    const uint64_t size = n > kHugeBytes / stride ? kHugeBytes : std::min(kHugeBytes, n * stride);
    return TypeLayout{size, element->align};
  }
  return std::nullopt;
}

// The bytes of workgroup storage `code` (no comments) declares, as WebGPU
// counts them against the device's limit (each `var<workgroup>` sized by
// WGSL's layout rules, rounded up to 16), which the metadata's count must
// cover: the limit is checked against the metadata, and an implementation
// may not check it against the WGSL.
Status CheckWorkgroupStorage(const KernelMetadata& m, std::string_view code) {
  uint64_t total = 0;
  for (const VarDecl& d : VarDecls(code)) {
    if (d.space != "workgroup") continue;
    if (!d.typed) return DataLoss("a var<workgroup> of the WGSL has no type");
    const std::optional<TypeLayout> layout = WorkgroupLayout(d.type);
    if (!layout) {
      return DataLoss("var<workgroup> ", Shortened(d.name), " has type ", Shortened(d.type),
                      ", not one kiln sizes (scalars, vectors, atomics and arrays of a "
                      "decimal count)");
    }
    total = std::min(
        kHugeBytes,
        total + static_cast<uint64_t>(WorkgroupVariableBytes(static_cast<int64_t>(layout->size))));
  }
  if (total > m.workgroup_storage_bytes) {
    return DataLoss("the WGSL declares ", total == kHugeBytes ? "over 2^40" : StrCat(total),
                    " bytes of var<workgroup> storage; its metadata says ",
                    m.workgroup_storage_bytes);
  }
  return Status::Ok();
}

Status CheckFunction(const CompiledFunction& f) {
  const KernelMetadata& m = f.metadata;
  KILN_RETURN_IF_ERROR(CheckText(m.entry_point, "the entry point's name"));
  KILN_RETURN_IF_ERROR(CheckText(f.wgsl, "the WGSL"));
  KILN_RETURN_IF_ERROR(CheckText(f.source_ir, "the source IR"));
  for (const ParamInfo& p : m.params) KILN_RETURN_IF_ERROR(CheckText(p.name, "a parameter's name"));
  for (const std::string& feature : m.required_features) {
    KILN_RETURN_IF_ERROR(CheckText(feature, "a required feature's name"));
  }
  const std::string code = WithoutComments(f.wgsl);
  const std::optional<std::string> attributes =
      m.entry_point.empty() ? std::nullopt : EntryAttributes(code, m.entry_point);
  if (!attributes) {
    return DataLoss("entry point '", m.entry_point, "' is not declared in the WGSL");
  }
  if (attributes->find("@compute") == std::string::npos) {
    return DataLoss("entry point '", m.entry_point, "' is not a @compute function in the WGSL");
  }
  std::set<std::string> names;
  uint32_t buffers = 0, scalars = 0;
  bool f16 = false;
  for (const ParamInfo& p : m.params) {
    if (p.name.empty() || !names.insert(p.name).second) {
      return DataLoss("parameter name '", p.name, "' is empty or repeated");
    }
    if (static_cast<uint8_t>(p.dtype) > kLastDType) {
      return DataLoss("parameter '", p.name, "' has unknown type ", static_cast<int>(p.dtype));
    }
    if (p.kind == ParamKind::kBuffer) {
      if (p.binding != buffers || p.uniform_offset != 0) {
        return DataLoss("buffer parameter '", p.name, "' has binding ", p.binding, ", expected ",
                        buffers, " (buffers are bound in parameter order)");
      }
      if (!p.strides.empty() && p.strides.size() != p.shape.size()) {
        return DataLoss("buffer parameter '", p.name, "' has ", p.strides.size(), " strides for ",
                        p.shape.size(), " dimensions");
      }
      if (p.lanes != 1 && p.lanes != 2 && p.lanes != 4) {
        return DataLoss("buffer parameter '", p.name, "' has ", p.lanes,
                        " lanes per array element; expected 1, 2 or 4");
      }
      f16 |= p.dtype == DType::kF16;
      ++buffers;
    } else {
      if (p.dtype != DType::kI32 && p.dtype != DType::kU32 && p.dtype != DType::kF32) {
        return DataLoss("scalar parameter '", p.name, "' has type ", DTypeName(p.dtype),
                        "; expected i32, u32 or f32");
      }
      if (p.uniform_offset != abi::ScalarOffset(scalars) || p.binding != 0 || !p.shape.empty() ||
          p.access != BufferAccess::kRead || p.lanes != 1) {
        return DataLoss("scalar parameter '", p.name, "' is at uniform offset ", p.uniform_offset,
                        ", expected ", abi::ScalarOffset(scalars),
                        " (and has no binding, shape, access or lanes)");
      }
      ++scalars;
    }
  }
  if (scalars > abi::kMaxScalarParams) {
    return DataLoss(scalars, " scalar parameters; a kernel takes at most ", abi::kMaxScalarParams);
  }
  if (m.uniform_binding != abi::UniformBinding(buffers)) {
    return DataLoss("uniform binding ", m.uniform_binding, ", expected ",
                    abi::UniformBinding(buffers));
  }
  if (m.uniform_block_size != abi::UniformBlockSize(scalars)) {
    return DataLoss("uniform block size ", m.uniform_block_size, ", expected ",
                    abi::UniformBlockSize(scalars));
  }
  const auto& w = m.workgroup_size;
  if (w[0] == 0 || w[1] == 0 || w[2] == 0) {
    return DataLoss("workgroup size (", w[0], ", ", w[1], ", ", w[2], ") has an empty axis");
  }
  // (As the code generator writes it: three numbers.)
  const std::string declared = StrCat("@workgroup_size(", w[0], ",", w[1], ",", w[2], ")");
  if (attributes->find(declared) == std::string::npos) {
    return DataLoss("workgroup size (", w[0], ", ", w[1], ", ", w[2],
                    ") is not the WGSL's @workgroup_size");
  }
  const auto listed = [&](std::string_view feature) {
    return std::find(m.required_features.begin(), m.required_features.end(), feature) !=
           m.required_features.end();
  };
  if (f16 && !listed(abi::kFeatureShaderF16)) {
    return DataLoss("f16 buffers without the '", abi::kFeatureShaderF16, "' feature listed");
  }
  // A device without the feature would refuse the WGSL as a compile error
  // instead of the function being unavailable.
  for (const auto& [extension, feature] :
       {std::pair{std::string_view("f16"), abi::kFeatureShaderF16},
        std::pair{std::string_view("subgroups"), abi::kFeatureSubgroups}}) {
    if (Enables(code, extension) && !listed(feature)) {
      return DataLoss("the WGSL enables ", extension, " without the '", feature,
                      "' feature listed");
    }
  }
  // Extents read only integer scalar parameters.
  std::vector<bool> integer_params;
  for (const ParamInfo& p : m.params) {
    integer_params.push_back(p.kind == ParamKind::kScalar &&
                             (p.dtype == DType::kI32 || p.dtype == DType::kU32));
  }
  for (const ParamInfo& p : m.params) {
    for (const ExtentExpr& e : p.shape) KILN_RETURN_IF_ERROR(Validate(e, integer_params));
    for (const ExtentExpr& e : p.strides) KILN_RETURN_IF_ERROR(Validate(e, integer_params));
  }
  KILN_RETURN_IF_ERROR(Validate(m.num_blocks_x, integer_params));
  KILN_RETURN_IF_ERROR(Validate(m.num_blocks_y, integer_params));
  KILN_RETURN_IF_ERROR(CheckWorkgroupStorage(m, code));
  return CheckBindings(m, code);
}

}  // namespace

Status ValidateModule(const CompiledModule& module) {
  std::set<std::string> names;
  for (size_t i = 0; i < module.functions.size(); ++i) {
    const std::string& name = module.functions[i].metadata.name;
    if (name.empty()) return DataLoss("invalid module: function ", i, " has no name");
    if (Status text = CheckText(name, StrCat("function ", i, "'s name")); !text.ok()) {
      return DataLoss("invalid module: ", text.message());
    }
    if (!names.insert(name).second) {
      return DataLoss("invalid module: two functions are named '", name, "'");
    }
    Status s = CheckFunction(module.functions[i]);
    if (!s.ok()) {
      return Status(s.code(), StrCat(s.code() == StatusCode::kDataLoss ? "invalid module: " : "",
                                     "function '", name, "': ", s.message()));
    }
  }
  return Status::Ok();
}

std::string FitsLimits(const KernelMetadata& m, const TargetLimits& limits) {
  const auto& w = m.workgroup_size;
  const uint64_t invocations = uint64_t{w[0]} * w[1] * w[2];
  if (w[0] > limits.max_workgroup_size_x || w[1] > limits.max_workgroup_size_y ||
      w[2] > limits.max_workgroup_size_z || invocations > limits.max_invocations_per_workgroup) {
    return StrCat("a workgroup of (", w[0], ", ", w[1], ", ", w[2],
                  "), beyond the device's limits (", limits.max_workgroup_size_x, ", ",
                  limits.max_workgroup_size_y, ", ", limits.max_workgroup_size_z, "; ",
                  limits.max_invocations_per_workgroup, " invocations)");
  }
  if (m.workgroup_storage_bytes > limits.max_workgroup_storage_bytes) {
    return StrCat(m.workgroup_storage_bytes,
                  " bytes of workgroup storage, more than the device's "
                  "maxComputeWorkgroupStorageSize of ",
                  limits.max_workgroup_storage_bytes);
  }
  if (m.uniform_block_size > limits.max_uniform_buffer_binding_size) {
    return StrCat("a uniform block of ", m.uniform_block_size,
                  " bytes, more than the device's maxUniformBufferBindingSize of ",
                  limits.max_uniform_buffer_binding_size);
  }
  uint32_t buffers = 0;
  for (const ParamInfo& p : m.params) buffers += p.kind == ParamKind::kBuffer ? 1 : 0;
  if (buffers > limits.max_storage_buffers_per_stage) {
    return StrCat(buffers,
                  " storage buffers, more than the device's "
                  "maxStorageBuffersPerShaderStage of ",
                  limits.max_storage_buffers_per_stage);
  }
  return std::string();
}

}  // namespace kiln::codegen
