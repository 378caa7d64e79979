#include "kiln/codegen/wgsl_names.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace kiln::codegen {
namespace {

// Sorted, so lookup is a binary search (checked at compile time below).
// clang-format off
constexpr std::array kReservedNames = std::to_array<std::string_view>({
    "NULL", "Self", "_", "abs", "abstract", "acos", "acosh", "active", "alias", "alignas",
    "alignof", "all", "any", "array", "arrayLength", "as", "asin", "asinh", "asm", "asm_fragment",
    "async", "atan", "atan2", "atanh", "atomic", "atomicAdd", "atomicAnd",
    "atomicCompareExchangeWeak", "atomicExchange", "atomicLoad", "atomicMax", "atomicMin",
    "atomicOr", "atomicStore", "atomicSub", "atomicXor", "attribute", "auto", "await", "become",
    "bf16", "binding_array", "bitcast", "bool", "break", "case", "cast", "catch", "ceil", "clamp",
    "class", "co_await", "co_return", "co_yield", "coherent", "column_major", "common", "compile",
    "compile_fragment", "concept", "const", "const_assert", "const_cast", "consteval", "constexpr",
    "constinit", "continue", "continuing", "cos", "cosh", "countLeadingZeros", "countOneBits",
    "countTrailingZeros", "crate", "cross", "debugger", "decltype", "default", "degrees", "delete",
    "demote", "demote_to_helper", "determinant", "diagnostic", "discard", "distance", "do", "dot",
    "dot4I8Packed", "dot4U8Packed", "dpdx", "dpdxCoarse", "dpdxFine", "dpdy", "dpdyCoarse",
    "dpdyFine", "dynamic_cast", "else", "enable", "enum", "exp", "exp2", "explicit", "export",
    "extends", "extern", "external", "extractBits", "f16", "f32", "f64", "faceForward",
    "fallthrough", "false", "filter", "final", "finally", "firstLeadingBit", "firstTrailingBit",
    "floor", "fma", "fn", "for", "fract", "frexp", "friend", "from", "function", "fwidth",
    "fwidthCoarse", "fwidthFine", "fxgroup", "get", "global_invocation_id", "goto", "groupshared",
    "highp", "i32", "i64", "if", "impl", "implements", "import", "inline", "insertBits",
    "instanceof", "interface", "inverseSqrt", "layout", "ldexp", "length", "let",
    "local_invocation_id", "local_invocation_index", "log", "log2", "loop", "lowp", "macro",
    "macro_rules", "mat2x2", "mat2x3", "mat2x4", "mat3x2", "mat3x3", "mat3x4", "mat4x2", "mat4x3",
    "mat4x4", "match", "max", "mediump", "meta", "min", "mix", "mod", "modf", "module", "move",
    "mut", "mutable", "namespace", "new", "nil", "noexcept", "noinline", "nointerpolation",
    "noperspective", "normalize", "null", "nullptr", "num_workgroups", "of", "operator",
    "override", "pack2x16float", "pack2x16snorm", "pack2x16unorm", "pack4x8snorm", "pack4x8unorm",
    "pack4xI8", "pack4xI8Clamp", "pack4xU8", "pack4xU8Clamp", "package", "packoffset", "partition",
    "pass", "patch", "pixelfragment", "pow", "precise", "precision", "premerge", "priv", "private",
    "protected", "ptr", "pub", "public", "quadBroadcast", "quadSwapDiagonal", "quadSwapX",
    "quadSwapY", "quantizeToF16", "radians", "read", "read_write", "readonly", "ref", "reflect",
    "refract", "regardless", "register", "reinterpret_cast", "require", "requires", "resource",
    "restrict", "return", "reverseBits", "round", "sampler", "sampler_comparison", "saturate",
    "select", "self", "set", "shared", "sign", "sin", "sinh", "sizeof", "smooth", "smoothstep",
    "snorm", "sqrt", "static", "static_assert", "static_cast", "std", "step", "storage",
    "storageBarrier", "struct", "subgroupAdd", "subgroupAll", "subgroupAnd", "subgroupAny",
    "subgroupBallot", "subgroupBroadcast", "subgroupBroadcastFirst", "subgroupElect",
    "subgroupExclusiveAdd", "subgroupExclusiveMul", "subgroupInclusiveAdd", "subgroupInclusiveMul",
    "subgroupMax", "subgroupMin", "subgroupMul", "subgroupOr", "subgroupShuffle",
    "subgroupShuffleDown", "subgroupShuffleUp", "subgroupShuffleXor", "subgroupXor",
    "subgroup_invocation_id", "subgroup_size", "subroutine", "super", "switch", "tan", "tanh",
    "target", "template", "textureBarrier", "this", "thread_local", "throw", "trait", "transpose",
    "true", "trunc", "try", "type", "typedef", "typeid", "typename", "typeof", "u32", "u64",
    "uniform", "union", "unless", "unorm", "unpack2x16float", "unpack2x16snorm", "unpack2x16unorm",
    "unpack4x8snorm", "unpack4x8unorm", "unpack4xI8", "unpack4xU8", "unsafe", "unsized", "use",
    "using", "var", "varying", "vec2", "vec2f", "vec2h", "vec2i", "vec2u", "vec3", "vec3f",
    "vec3h", "vec3i", "vec3u", "vec4", "vec4f", "vec4h", "vec4i", "vec4u", "virtual", "volatile",
    "wgsl", "where", "while", "with", "workgroup", "workgroupBarrier", "workgroupUniformLoad",
    "workgroup_id", "write", "writeonly", "yield",
});
// clang-format on

static_assert(std::is_sorted(kReservedNames.begin(), kReservedNames.end()));

bool IsIdentChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

}  // namespace

bool IsReservedWgslName(std::string_view name) {
  // Every texture type and builtin (textureSample, texture_2d, ...) shares the prefix.
  if (name.starts_with("texture")) return true;
  // Matrix aliases: mat2x2f ... mat4x4h.
  if (name.size() == 7 && name.starts_with("mat") && name[4] == 'x' &&
      (name[6] == 'f' || name[6] == 'h')) {
    return true;
  }
  return std::binary_search(kReservedNames.begin(), kReservedNames.end(), name);
}

std::string SanitizeWgslIdentifier(std::string_view name) {
  std::string out;
  out.reserve(name.size() + 2);
  for (char c : name) out.push_back(IsIdentChar(c) ? c : '_');
  bool all_underscore = std::all_of(out.begin(), out.end(), [](char c) { return c == '_'; });
  if (all_underscore) return "v" + out;
  if (std::isdigit(static_cast<unsigned char>(out[0]))) out.insert(0, "v");
  // WGSL reserves identifiers that begin with two underscores.
  if (out.starts_with("__")) out.insert(0, "v");
  return out;
}

std::string NameSupply::Fresh(std::string_view hint) {
  std::string base = SanitizeWgslIdentifier(hint);
  if (base.starts_with(kInternalPrefix)) base.insert(0, "v");
  // A reserved prefix (texture...) reserves every numbered variant too.
  if (IsReservedWgslName(base + "_1")) base.insert(0, "v");
  if (!IsReservedWgslName(base) && taken_.insert(base).second) return base;
  for (int i = 1;; ++i) {
    std::string candidate = base + "_" + std::to_string(i);
    if (!IsReservedWgslName(candidate) && taken_.insert(candidate).second) return candidate;
  }
}

}  // namespace kiln::codegen
