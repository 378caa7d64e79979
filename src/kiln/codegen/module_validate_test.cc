// Crafted metadata is refused with an error naming the function and field.
#include "kiln/codegen/module_validate.h"

#include <gtest/gtest.h>

#include <functional>

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
})";

CompiledModule Compiled() {
  auto module = ir::ParseModule(kSource);
  EXPECT_TRUE(module.ok()) << module.status();
  auto compiled = CompileModule(*module, {});
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  return *compiled;
}

struct Case {
  const char* name;
  std::function<void(CompiledModule&)> craft;
  const char* message;
};

TEST(ModuleValidateTest, CompiledModulesAreValid) {
  CompiledModule m = Compiled();
  EXPECT_TRUE(ValidateModule(m).ok()) << ValidateModule(m);
  DeviceLimits limits;
  EXPECT_TRUE(ValidateModule(m, &limits).ok());
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
      {"dtype against the source", [&](CompiledModule& m) { scale(m).params[1].dtype = "i32"; },
       "parameter 1 is buffer 'Y' of type i32 in the metadata but buffer 'Y' of type f32 in the "
       "source IR"},
      {"unknown dtype", [&](CompiledModule& m) { scale(m).params[0].dtype = "f99"; },
       "parameter 'X' has unknown type 'f99'"},
      {"scalar of another type", [&](CompiledModule& m) { scale(m).params[2].dtype = "bool"; },
       "scalar parameter 'n' has type bool"},
      {"bindings out of order",
       [&](CompiledModule& m) {
         std::swap(scale(m).params[0].binding, scale(m).params[1].binding);
       },
       "buffer parameter 'X' has binding 1, expected 0"},
      {"uniform offset", [&](CompiledModule& m) { scale(m).params[3].uniform_offset = 0; },
       "scalar parameter 's' is at uniform offset 0, expected 4"},
      {"uniform binding", [&](CompiledModule& m) { scale(m).uniform_binding = 7; },
       "uniform binding 7, expected 2"},
      {"uniform block", [&](CompiledModule& m) { scale(m).uniform_block_size = 4; },
       "uniform block size 4, expected 16"},
      {"repeated parameter", [&](CompiledModule& m) { scale(m).params[1].name = "X"; },
       "parameter name 'X' is empty or repeated"},
      {"entry point", [&](CompiledModule& m) { scale(m).entry_point = "other"; },
       "entry point 'other' is not declared in the WGSL"},
      {"shape", [&](CompiledModule& m) { scale(m).params[0].shape = {"(n * 2)"}; },
       "the shape of parameter 'X' differs from the source IR's"},
      {"source of another function",
       [&](CompiledModule& m) { m.functions[0].source_ir = m.functions[1].source_ir; },
       "the source IR is of function 'half'"},
      {"unparsable source", [&](CompiledModule& m) { m.functions[0].source_ir = "fn ("; },
       "the source IR does not parse"},
      {"f16 without the feature",
       [&](CompiledModule& m) { m.functions[1].metadata.required_features.clear(); },
       "function 'half': f16 buffers without the 'shader-f16' feature listed"},
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
  DeviceLimits small;
  small.max_invocations_per_workgroup = 32;
  Status s = ValidateModule(m, &small);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("function 'scale': workgroup size (64, 1, 1) exceeds the device's"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace kiln::codegen
