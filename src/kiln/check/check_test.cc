// The checker's own checks that need no device: the source IR a module
// carries against its metadata.
#include "kiln/check/check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>

#include "kiln/codegen/wgsl_codegen.h"
#include "kiln/ir/parser.h"

namespace kiln::check {
namespace {

constexpr const char* kSource = R"(module {
fn scale(X: buffer<f32>[n], Y: buffer<f32>[n, 2] strides[4, 1], n: i32, s: f32) {
  for bx in blockIdx.x(0, (n + 63) / 64) {
    for tx in threadIdx.x(0, 64) {
      let i: i32 = bx * 64 + tx
      if (i < n) {
        Y[i, 0] = X[i] * s
      }
    }
  }
}
fn other(A: buffer<i32>[4]) {
  A[0] = A[1]
}
})";

codegen::CompiledModule Compiled() {
  auto module = ir::ParseModule(kSource);
  EXPECT_TRUE(module.ok()) << module.status();
  auto compiled = codegen::CompileModule(*module, {});
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  return *compiled;
}

std::vector<uint8_t> FloatBytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// A relative tolerance must not make an infinite reference match anything.
TEST(CompareBufferTest, InfinitiesAndNanMatchOnlyThemselves) {
  const float inf = INFINITY, nan = NAN;
  auto check = [](const std::vector<float>& gpu, const std::vector<float>& ref) {
    return CompareBuffer("O", ir::kF32, FloatBytes(gpu), FloatBytes(ref), 1e-5);
  };
  EXPECT_EQ(check({inf, -inf, nan, 1.0f, -0.0f}, {inf, -inf, nan, 1.000001f, 0.0f}).mismatches, 0u);
  for (float wrong : {65520.0f, -inf, nan, 3.4e38f}) {
    BufferCheck c = check({wrong}, {inf});
    EXPECT_EQ(c.mismatches, 1u) << wrong;
    EXPECT_EQ(c.first_ref, "inf");
  }
  EXPECT_EQ(check({inf}, {65520.0f}).mismatches, 1u);
  EXPECT_EQ(check({nan}, {1.0f}).mismatches, 1u);
  EXPECT_EQ(check({1.1f}, {1.0f}).mismatches, 1u);
}

// Integers must match exactly; the error reported is the difference.
TEST(CompareBufferTest, IntegerErrorsAreTheDifference) {
  auto bytes = [](const std::vector<int32_t>& v) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  BufferCheck i =
      CompareBuffer("I", ir::kI32, bytes({5, 7, INT32_MIN}), bytes({-5, 7, INT32_MAX}), 1);
  EXPECT_EQ(i.mismatches, 2u);
  EXPECT_EQ(i.max_error, 4294967295.0);
  EXPECT_EQ(i.first_gpu, "5");
  EXPECT_EQ(i.first_ref, "-5");
  BufferCheck u = CompareBuffer("U", ir::kU32, bytes({-1, 3}), bytes({0, 1}), 0);
  EXPECT_EQ(u.max_error, 4294967295.0);
  EXPECT_EQ(u.first_gpu, "4294967295");
  BufferCheck b = CompareBuffer("B", ir::kBool, bytes({2, 0}), bytes({1, 1}), 0);
  EXPECT_EQ(b.mismatches, 1u);
  EXPECT_EQ(b.max_error, 1.0);
}

TEST(ValidateSourceIrTest, CompiledFunctionsAgreeWithTheirSource) {
  for (const codegen::CompiledFunction& f : Compiled().functions) {
    EXPECT_TRUE(ValidateSourceIr(f).ok()) << ValidateSourceIr(f);
  }
}

TEST(ValidateSourceIrTest, DisagreementsAreRefused) {
  struct Case {
    const char* name;
    std::function<void(codegen::CompiledFunction&)> craft;
    const char* message;
  };
  const Case cases[] = {
      {"dtype", [](auto& f) { f.metadata.params[1].dtype = codegen::DType::kI32; },
       "parameter 1 is buffer 'Y' of type i32 in the metadata but buffer 'Y' of type f32"},
      {"shape", [](auto& f) { f.metadata.params[0].shape[0].text = "n * 2"; },
       "the shape of parameter 'X' differs from the source IR's"},
      {"shape program",
       [](auto& f) {
         f.metadata.params[0].shape[0] = codegen::ExtentExpr::Constant(3);
         f.metadata.params[0].shape[0].text = "n";  // the text kept, the program changed
       },
       "the shape of parameter 'X' differs from the source IR's"},
      {"strides", [](auto& f) { f.metadata.params[1].strides.clear(); },
       "the shape of parameter 'Y' differs"},
      {"another function", [](auto& f) { f.source_ir = "fn other(A: buffer<i32>[4]) {\n}\n"; },
       "the source IR is of function 'other'"},
      {"unparsable", [](auto& f) { f.source_ir = "fn ("; }, "the source IR does not parse"},
      {"ill-typed",
       [](auto& f) {
         const std::string load = "X[i] * s";
         f.source_ir.replace(f.source_ir.find(load), load.size(), "select(1, X[i], s)");
       },
       "the source IR does not verify: "},
      {"parameter count", [](auto& f) { f.metadata.params.pop_back(); },
       "the metadata lists 3 parameters, the source IR has 4"},
  };
  for (const Case& c : cases) {
    codegen::CompiledFunction f = Compiled().functions[0];
    c.craft(f);
    Status s = ValidateSourceIr(f);
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << c.name << ": " << s;
    EXPECT_NE(s.message().find(c.message), std::string::npos) << c.name << ": " << s;
  }
}

}  // namespace
}  // namespace kiln::check
