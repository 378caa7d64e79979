// Crafted metadata is refused with an error naming the function and field.
#include "kiln/codegen/module_validate.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <string_view>

#include "kiln/codegen/kernel_abi.h"
#include "kiln/codegen/wgsl_codegen.h"
#include "kiln/ir/parser.h"

namespace kiln::codegen {
namespace {

constexpr const char* kSource = R"(module {
fn scale(X: buffer<f32>[n], Y: buffer<f32>[n], n: i32, s: f32) {
  for bx in blockIdx.x(0, (n + 63) / 64) {
    for tx in threadIdx.x(0, 64) {
      let i: i32 = bx * 64 + tx
      if (i < n) {
        Y[i] = X[i] * s
      }
    }
  }
}
fn half(A: buffer<f16>[4]) {
  A[0] = A[1]
}
fn tiles(A: buffer<f32>[64]) {
  alloc T: f32[64] shared {
    for tx in threadIdx.x(0, 64) {
      T[tx] = A[tx]
      workgroup_barrier()
      A[tx] = T[63 - tx]
    }
  }
}
})";

CompiledModule Compiled() {
  auto module = ir::ParseModule(kSource);
  EXPECT_TRUE(module.ok()) << module.status();
  auto compiled = CompileModule(*module, {});
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  return *compiled;
}

// `text` with its first `from` replaced by `to` (a test error where absent).
std::string Replaced(std::string text, std::string_view from, std::string_view to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << "'" << from << "' is not in:\n" << text;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

struct Case {
  const char* name;
  std::function<void(CompiledModule&)> craft;
  const char* message;
};

TEST(ModuleValidateTest, CompiledModulesAreValid) {
  CompiledModule m = Compiled();
  EXPECT_TRUE(ValidateModule(m).ok()) << ValidateModule(m);
  ASSERT_EQ(m.functions.size(), 3u);
  EXPECT_NE(m.functions[2].wgsl.find("var<workgroup> T : array<f32, 64>;"), std::string::npos)
      << m.functions[2].wgsl;
  EXPECT_EQ(m.functions[2].metadata.workgroup_storage_bytes, 256u);
  // Types the check sizes, within the metadata's 256 bytes: vec3 elements
  // 16 bytes apart, f16 pairs, vectors' shorthand names; a `var` inside
  // longer names is none.
  for (const char* type : {"array<vec3<f32>, 16>", "array<array<vec2h, 4>, 16i>",
                           "array<vec4f, 16>", "array<atomic<i32>, 64>",
                           "array<f32, 64>; var<private> myvar : array<f32, 99>;\n"
                           "var<private> var2 : array<f32, 99>"}) {
    CompiledModule other = m;
    other.functions[2].wgsl =
        Replaced(other.functions[2].wgsl, "T : array<f32, 64>", StrCat("T : ", type));
    EXPECT_TRUE(ValidateModule(other).ok()) << type << ": " << ValidateModule(other);
  }
  for (const CompiledFunction& f : m.functions) {
    EXPECT_EQ(FitsLimits(f.metadata, TargetLimits{}), "");
  }
}

TEST(ModuleValidateTest, CraftedMetadataIsRefused) {
  auto scale = [](CompiledModule& m) -> KernelMetadata& { return m.functions[0].metadata; };
  const Case cases[] = {
      {"duplicate names", [&](CompiledModule& m) { m.functions[1] = m.functions[0]; },
       "two functions are named 'scale'"},
      {"no name", [&](CompiledModule& m) { scale(m).name = ""; }, "function 0 has no name"},
      {"workgroup size 0",
       [&](CompiledModule& m) {
         scale(m).workgroup_size = {0, 1, 1};
       },
       "function 'scale': workgroup size (0, 1, 1) has an empty axis"},
      {"workgroup size 100000",
       [&](CompiledModule& m) {
         scale(m).workgroup_size = {100000, 1, 1};
       },
       "workgroup size (100000, 1, 1) is not the WGSL's @workgroup_size"},
      {"unknown dtype",
       [&](CompiledModule& m) { scale(m).params[0].dtype = static_cast<DType>(99); },
       "parameter 'X' has unknown type 99"},
      {"scalar of another type",
       [&](CompiledModule& m) { scale(m).params[2].dtype = DType::kBool; },
       "scalar parameter 'n' has type bool"},
      {"bindings out of order",
       [&](CompiledModule& m) {
         std::swap(scale(m).params[0].binding, scale(m).params[1].binding);
       },
       "buffer parameter 'X' has binding 1, expected 0"},
      {"buffer lanes", [&](CompiledModule& m) { scale(m).params[0].lanes = 3; },
       "buffer parameter 'X' has 3 lanes per array element; expected 1, 2 or 4"},
      {"scalar lanes", [&](CompiledModule& m) { scale(m).params[3].lanes = 4; },
       "scalar parameter 's' is at uniform offset 4, expected 4 (and has no binding, shape, "
       "access or lanes)"},
      {"uniform offset", [&](CompiledModule& m) { scale(m).params[3].uniform_offset = 0; },
       "scalar parameter 's' is at uniform offset 0, expected 4"},
      {"too many scalars",
       [&](CompiledModule& m) {
         for (uint32_t k = 2; k <= abi::kMaxScalarParams; ++k) {
           scale(m).params.push_back({.name = StrCat("p", k),
                                      .kind = ParamKind::kScalar,
                                      .dtype = DType::kI32,
                                      .uniform_offset = abi::ScalarOffset(k)});
         }
         scale(m).uniform_binding = abi::UniformBinding(2);
         scale(m).uniform_block_size = abi::UniformBlockSize(abi::kMaxScalarParams + 1);
       },
       "16382 scalar parameters; a kernel takes at most 16381"},
      {"uniform binding", [&](CompiledModule& m) { scale(m).uniform_binding = 7; },
       "uniform binding 7, expected 2"},
      {"uniform block", [&](CompiledModule& m) { scale(m).uniform_block_size = 4; },
       "uniform block size 4, expected 16"},
      {"repeated parameter", [&](CompiledModule& m) { scale(m).params[1].name = "X"; },
       "parameter name 'X' is empty or repeated"},
      {"entry point", [&](CompiledModule& m) { scale(m).entry_point = "other"; },
       "entry point 'other' is not declared in the WGSL"},
      {"entry point in a comment",
       [&](CompiledModule& m) {
         scale(m).entry_point = "other";
         m.functions[0].wgsl += "\n// fn other(\n/* fn other( /* nested */ */\n";
       },
       "entry point 'other' is not declared in the WGSL"},
      {"entry point a longer name",
       [&](CompiledModule& m) { scale(m).entry_point = std::string(scale(m).entry_point, 0, 3); },
       "is not declared in the WGSL"},
      {"entry point not @compute",
       [&](CompiledModule& m) {
         scale(m).entry_point = "other";
         m.functions[0].wgsl += "\nfn other() {}\n";
       },
       "entry point 'other' is not a @compute function in the WGSL"},
      {"f16 enabled, the feature not listed",
       [&](CompiledModule& m) {
         m.functions[0].wgsl = "enable subgroups, f16 ;\n" + m.functions[0].wgsl;
         scale(m).required_features = {"subgroups"};
       },
       "function 'scale': the WGSL enables f16 without the 'shader-f16' feature listed"},
      {"subgroups enabled, the feature not listed",
       [&](CompiledModule& m) { m.functions[0].wgsl = "enable subgroups;" + m.functions[0].wgsl; },
       "the WGSL enables subgroups without the 'subgroups' feature listed"},
      {"workgroup size in a comment",
       [&](CompiledModule& m) {
         scale(m).workgroup_size = {32, 1, 1};
         m.functions[0].wgsl = "// @workgroup_size(32, 1, 1)\n" + m.functions[0].wgsl;
       },
       "workgroup size (32, 1, 1) is not the WGSL's @workgroup_size"},
      {"workgroup size of another function",
       [&](CompiledModule& m) {
         scale(m).workgroup_size = {32, 1, 1};
         m.functions[0].wgsl =
             "@compute @workgroup_size(32, 1, 1)\nfn helper() {}\n" + m.functions[0].wgsl;
       },
       "workgroup size (32, 1, 1) is not the WGSL's @workgroup_size"},
      {"extent of a float parameter",
       [&](CompiledModule& m) { scale(m).params[0].shape = {ExtentExpr::Param(3, "s")}; },
       "extent 's' reads parameter 3, which is not an integer scalar parameter"},
      {"extent of no parameter",
       [&](CompiledModule& m) { scale(m).num_blocks_x = ExtentExpr::Param(9, "q"); },
       "extent 'q' reads parameter 9"},
      {"malformed extent",
       [&](CompiledModule& m) {
         scale(m).params[0].shape[0].ops.push_back({ExtentOp::Code::kAdd, 32, true, 0});
       },
       "extent 'n' is malformed"},
      {"extent of 16 bits",
       [&](CompiledModule& m) { scale(m).params[0].shape[0].ops[0].bits = 16; },
       "has an operation of 16 bits"},
      {"strides of another rank",
       [&](CompiledModule& m) {
         scale(m).params[0].strides = {ExtentExpr::Constant(1), ExtentExpr::Constant(1)};
       },
       "buffer parameter 'X' has 2 strides for 1 dimensions"},
      {"WGSL not UTF-8", [&](CompiledModule& m) { m.functions[0].wgsl.insert(3, "\xff"); },
       "function 'scale': the WGSL is not UTF-8 text: byte 3 of "},
      {"source IR with NUL", [&](CompiledModule& m) { m.functions[0].source_ir.push_back('\0'); },
       "function 'scale': the source IR is not UTF-8 text"},
      {"parameter name not UTF-8", [&](CompiledModule& m) { scale(m).params[1].name = "Y\xc0"; },
       "a parameter's name is not UTF-8 text: byte 1 of 2 is malformed or NUL"},
      {"function name not UTF-8", [&](CompiledModule& m) { scale(m).name = "\xed\xa0\x80"; },
       "function 0's name is not UTF-8 text: byte 0 of 3 is malformed or NUL"},
      {"f16 without the feature",
       [&](CompiledModule& m) { m.functions[1].metadata.required_features.clear(); },
       "function 'half': f16 buffers without the 'shader-f16' feature listed"},
      // The WGSL's bindings against the metadata: what WebGPU's layout check
      // lets through.
      {"an i32 array where the metadata says f32",
       [&](CompiledModule& m) {
         m.functions[0].wgsl = Replaced(m.functions[0].wgsl, "X : array<f32>", "X : array<i32>");
       },
       "buffer parameter 'X' (@binding(0)) is declared var<storage,read> of array<i32> in the "
       "WGSL; its metadata (f32, 1 lane(s)) makes it var<storage,read> of array<f32>"},
      {"metadata of another type",
       [&](CompiledModule& m) { scale(m).params[1].dtype = DType::kU32; },
       "buffer parameter 'Y' (@binding(1)) is declared var<storage,read_write> of array<f32> in "
       "the WGSL; its metadata (u32, 1 lane(s)) makes it var<storage,read_write> of array<u32>"},
      {"metadata of other lanes", [&](CompiledModule& m) { scale(m).params[0].lanes = 4; },
       "its metadata (f32, 4 lane(s)) makes it var<storage,read> of array<vec4<f32>>"},
      {"metadata of another access",
       [&](CompiledModule& m) { scale(m).params[0].access = BufferAccess::kReadWrite; },
       "makes it var<storage,read_write> of array<f32>"},
      {"a buffer not declared",
       [&](CompiledModule& m) {
         m.functions[0].wgsl =
             Replaced(m.functions[0].wgsl, "@binding(0) var", "/* @binding(0) */ @binding(5) var");
       },
       "buffer parameter 'X' (@binding(0)) is not declared in the WGSL"},
      {"bindings swapped, of other types",
       [&](CompiledModule& m) {
         std::string& w = m.functions[1].wgsl;
         w = Replaced(w, "@binding(1) var<uniform>", "@binding(9) var<uniform>");
         w = Replaced(w, "@binding(0) var<storage", "@binding(1) var<storage");
         w = Replaced(w, "@binding(9) var<uniform>", "@binding(0) var<uniform>");
       },
       "function 'half': buffer parameter 'A' (@binding(0)) is declared var<uniform> of"},
      {"constants in another order",
       [&](CompiledModule& m) {
         m.functions[0].wgsl =
             Replaced(m.functions[0].wgsl, "n : i32,\n  s : f32,", "s : f32,\n  n : i32,");
       },
       "the uniform block's struct 'KernelArgs' has members of types (f32, i32, u32, u32); the "
       "scalar parameters and the launch words make (i32, f32, u32, u32)"},
      {"a constant dropped",
       [&](CompiledModule& m) {
         m.functions[0].wgsl = Replaced(m.functions[0].wgsl, "s : f32,", "");
       },
       "has members of types (i32, u32, u32); the scalar parameters and the launch words make "
       "(i32, f32, u32, u32)"},
      {"a constant placed by an attribute",
       [&](CompiledModule& m) {
         m.functions[0].wgsl = Replaced(m.functions[0].wgsl, "n : i32,", "@size(8) n : i32,");
       },
       "the uniform block's type 'KernelArgs' is not a struct of the WGSL without member "
       "attributes"},
      // Workgroup storage: the device's limit is checked against the
      // metadata, which must cover what the WGSL declares.
      {"more workgroup storage than the metadata says",
       [&](CompiledModule& m) {
         m.functions[2].wgsl =
             Replaced(m.functions[2].wgsl, "T : array<f32, 64>", "T : array<f32, 16384>");
       },
       "function 'tiles': the WGSL declares 65536 bytes of var<workgroup> storage; its metadata "
       "says 256"},
      {"metadata short of the WGSL's",
       [&](CompiledModule& m) { m.functions[2].metadata.workgroup_storage_bytes = 255; },
       "the WGSL declares 256 bytes of var<workgroup> storage; its metadata says 255"},
      {"a second workgroup variable",
       [&](CompiledModule& m) {
         m.functions[2].wgsl = Replaced(m.functions[2].wgsl, "var<workgroup> T",
                                        "var < workgroup > pad : atomic<u32>;\nvar<workgroup> T");
       },
       "declares 272 bytes"},  // (each variable rounded up to 16, as WebGPU counts)
      {"vec3 elements, 16 bytes apart",
       [&](CompiledModule& m) {
         m.functions[2].wgsl =
             Replaced(m.functions[2].wgsl, "T : array<f32, 64>", "T : array<vec3<f32>, 17u>");
       },
       "declares 272 bytes"},
      {"arrays of arrays of vectors",
       [&](CompiledModule& m) {
         m.functions[2].wgsl =
             Replaced(m.functions[2].wgsl, "T : array<f32, 64>", "T : array<array<vec2h, 3>, 23>");
       },
       "declares 288 bytes"},  // (276 rounded up to 16)
      {"sizes past any device",
       [&](CompiledModule& m) {
         m.functions[2].wgsl = Replaced(m.functions[2].wgsl, "T : array<f32, 64>",
                                        "T : array<array<f32, 4294967295>, 4294967295>");
       },
       "declares over 2^40 bytes"},
      {"a product that would wrap 64 bits",
       [&](CompiledModule& m) {
         m.functions[2].wgsl = Replaced(m.functions[2].wgsl, "T : array<f32, 64>",
                                        "T : array<array<f32, 268435456>, 17179869184>");
       },
       "declares over 2^40 bytes"},
      {"a declaration in code after a commented one",
       [&](CompiledModule& m) {
         m.functions[2].wgsl =
             Replaced(m.functions[2].wgsl, "var<workgroup> T : array<f32, 64>;",
                      "// var<workgroup> C : array<f32, 64>;\n/* var<workgroup> D : f32; */\n"
                      "var<workgroup> T : array<f32, 65>;");
       },
       "declares 272 bytes"},
      {"a workgroup array of a named count",
       [&](CompiledModule& m) {
         m.functions[2].wgsl =
             Replaced(m.functions[2].wgsl, "T : array<f32, 64>", "T : array<f32, N>");
       },
       "var<workgroup> T has type array<f32,N>, not one kiln sizes"},
      {"arrays nested past any kernel's",
       [&](CompiledModule& m) {
         std::string type;
         for (int i = 0; i < 100000; ++i) type += "array<";
         type += "f32";
         for (int i = 0; i < 100000; ++i) type += ",1>";
         m.functions[2].wgsl =
             Replaced(m.functions[2].wgsl, "T : array<f32, 64>", StrCat("T : ", type));
       },
       "var<workgroup> T has type array<array<array<array<array<array<array<array<array<"
       "array<array<array<array<ar... (900003 characters), not one kiln sizes"},
      {"a workgroup variable without a type",
       [&](CompiledModule& m) {
         m.functions[2].wgsl = Replaced(m.functions[2].wgsl, "var<workgroup> T : array<f32, 64>;",
                                        "var<workgroup> T : array<f32, 64>;\nvar<workgroup> U;");
       },
       "a var<workgroup> of the WGSL has no type"},
      {"a workgroup struct",
       [&](CompiledModule& m) {
         m.functions[2].wgsl = Replaced(m.functions[2].wgsl, "T : array<f32, 64>", "T : S");
       },
       "var<workgroup> T has type S, not one kiln sizes"},
      {"the uniform block not declared",
       [&](CompiledModule& m) {
         m.functions[0].wgsl = Replaced(m.functions[0].wgsl, "var<uniform>", "var<private>");
       },
       "the uniform block (@binding(2)) is not declared var<uniform> in the WGSL"},
  };
  for (const Case& c : cases) {
    CompiledModule m = Compiled();
    c.craft(m);
    Status s = ValidateModule(m);
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << c.name << ": " << s;
    EXPECT_NE(s.message().find(c.message), std::string::npos) << c.name << ": " << s;
  }
}

TEST(ModuleValidateTest, LimitsAreTheDevice) {
  CompiledModule m = Compiled();
  TargetLimits small;
  small.max_invocations_per_workgroup = 32;
  std::string beyond = FitsLimits(m.functions[0].metadata, small);
  EXPECT_NE(beyond.find("a workgroup of (64, 1, 1), beyond the device's limits"), std::string::npos)
      << beyond;
  small = TargetLimits{};
  small.max_storage_buffers_per_stage = 1;
  beyond = FitsLimits(m.functions[0].metadata, small);
  EXPECT_NE(beyond.find("2 storage buffers"), std::string::npos) << beyond;
}

}  // namespace
}  // namespace kiln::codegen
