// The module runtime: calls checked against metadata, launch grids, the
// large-grid scheme, module files. Runs on the implementation $KILN_IMPL
// names (CTest runs it once per implementation).
#include "kiln/runtime/module.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>

#include "kiln/check/check.h"
#include "kiln/check/corpus.h"
#include "kiln/codegen/module_format.h"
#include "kiln/codegen/wgsl_codegen.h"
#include "kiln/hal/device.h"
#include "kiln/hal/queue.h"
#include "kiln/ir/parser.h"
#include "kiln/runtime/test_device.h"
#include "kiln/support/status_matchers.h"

namespace kiln::runtime {
namespace {

using check::CheckOptions;
using check::CompileOptionsFor;
using check::RunAndCheck;

constexpr const char* kScale = R"(module {
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
fn mark_blocks(Out: buffer<u32>[blocks], blocks: i32) {
  for bx in blockIdx.x(0, blocks) {
    for tx in threadIdx.x(0, 1) {
      Out[bx] = u32(bx) * 3u32 + 1u32
    }
  }
}
})";

class RuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    device_ = testing::TestDevice();
    ASSERT_TRUE(device_);
    auto module = ir::ParseModule(kScale);
    ASSERT_TRUE(module.ok()) << module.status();
    source_ = *module;
    auto compiled = codegen::CompileModule(source_);
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    compiled_ = *compiled;
    auto loaded = LoadedModule::Load(device_, compiled_);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    module_ = std::move(*loaded);
  }

  hal::BufferRef NewBuffer(uint64_t bytes) {
    auto b = device_->allocator().Allocate(bytes);
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *b : nullptr;
  }

  // Runs a function computing Y = X * s + offset on fresh random X and a
  // poisoned Y, and compares Y with the CPU's result.
  void ExpectScales(const Kernel& fn, float offset) {
    const uint32_t n = 300;
    const float s = 1.75f;
    std::vector<float> x(n);
    std::mt19937 rng(::testing::UnitTest::GetInstance()->random_seed() + n);
    for (auto& v : x) v = std::uniform_real_distribution<float>(-8, 8)(rng);
    auto X = NewBuffer(n * 4), Y = NewBuffer(n * 4);
    ASSERT_TRUE(hal::Upload(*device_, X, 0, {reinterpret_cast<uint8_t*>(x.data()), n * 4}).ok());
    std::vector<uint8_t> poison(n * 4, 0xFF);  // NaN
    ASSERT_TRUE(hal::Upload(*device_, Y, 0, poison).ok());
    Arg args[] = {Arg::Buffer(X), Arg::Buffer(Y), Arg::I32(n), Arg::F32(s)};
    Status called = fn.Call(args);
    ASSERT_TRUE(called.ok()) << called;
    std::vector<float> y(n);
    ASSERT_TRUE(hal::Download(*device_, Y, 0, {reinterpret_cast<uint8_t*>(y.data()), n * 4}).ok());
    for (uint32_t i = 0; i < n; ++i) {
      const float ref = x[i] * s + offset;
      ASSERT_LE(std::fabs(y[i] - ref), 1e-5f * (1 + std::fabs(ref)))
          << fn.name() << " [" << i << "]";
    }
  }

  // Lookups of the device's executable cache: one per executable asked for.
  uint64_t ExecutableLookups() const {
    hal::ExecutableCacheStats stats = device_->executable_cache().stats();
    return stats.hits + stats.misses;
  }

  std::shared_ptr<hal::Device> device_;
  ir::Module source_;
  codegen::CompiledModule compiled_;
  std::unique_ptr<LoadedModule> module_;
};

TEST_F(RuntimeTest, CallRunsTheKernel) {
  const uint32_t n = 1000;
  std::vector<float> x(n);
  std::mt19937 rng(7);
  for (auto& v : x) v = std::uniform_real_distribution<float>(-1, 1)(rng);
  auto X = NewBuffer(n * 4), Y = NewBuffer(n * 4);
  ASSERT_TRUE(hal::Upload(*device_, X, 0, {reinterpret_cast<uint8_t*>(x.data()), n * 4}).ok());
  std::vector<uint8_t> poison(n * 4, 0xFF);
  ASSERT_TRUE(hal::Upload(*device_, Y, 0, poison).ok());
  auto fn = module_->Find("scale");
  ASSERT_TRUE(fn.ok());
  Arg args[] = {Arg::Buffer(X), Arg::Buffer(Y), Arg::I32(n), Arg::F32(-2.5f)};
  ASSERT_TRUE((*fn)->Call(args).ok());
  std::vector<float> y(n);
  ASSERT_TRUE(hal::Download(*device_, Y, 0, {reinterpret_cast<uint8_t*>(y.data()), n * 4}).ok());
  for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(y[i], x[i] * -2.5f) << i;
}

// A strided parameter reaches (rows - 1) * ld + cols elements, not
// rows * cols: the runtime sizes it from shape and strides.
TEST_F(RuntimeTest, StridedParametersAreSizedFromShapeAndStrides) {
  auto module = ir::ParseModule(R"(module {
fn copy_rows(A: buffer<f32>[rows, cols] strides[ld, 1], B: buffer<f32>[rows, cols],
             rows: i32, cols: i32, ld: i32) {
  for r in blockIdx.x(0, rows) {
    for c in threadIdx.x(0, 16) {
      if (c < cols) {
        B[r, c] = A[r, c]
      }
    }
  }
}
})");
  ASSERT_TRUE(module.ok()) << module.status();
  auto compiled = codegen::CompileModule(*module);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const auto& strides = compiled->functions[0].metadata.params[0].strides;
  ASSERT_EQ(strides.size(), 2u);
  EXPECT_EQ(strides[0].text, "ld");
  EXPECT_EQ(strides[1].text, "1");
  auto loaded = LoadedModule::Load(device_, *compiled);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Kernel* fn = *(*loaded)->Find("copy_rows");
  const int rows = 5, cols = 7, ld = 11;
  const uint32_t reach = (rows - 1) * ld + cols;  // 51 elements, more than rows * cols = 35
  std::vector<float> a(reach);
  std::mt19937 rng(11);
  for (auto& v : a) v = std::uniform_real_distribution<float>(-1, 1)(rng);
  auto B = NewBuffer(rows * cols * 4);
  {
    // Enough for rows * cols, too small for what the kernel reads.
    auto small = NewBuffer(rows * cols * 4);
    Arg args[] = {Arg::Buffer(small), Arg::Buffer(B), Arg::I32(rows), Arg::I32(cols), Arg::I32(ld)};
    Status s = fn->Call(args);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("51 f32 elements need 204"), std::string::npos) << s;
  }
  auto A = NewBuffer(reach * 4);
  ASSERT_TRUE(hal::Upload(*device_, A, 0, {reinterpret_cast<uint8_t*>(a.data()), reach * 4}).ok());
  std::vector<uint8_t> poison(rows * cols * 4, 0xFF);
  ASSERT_TRUE(hal::Upload(*device_, B, 0, poison).ok());
  Arg args[] = {Arg::Buffer(A), Arg::Buffer(B), Arg::I32(rows), Arg::I32(cols), Arg::I32(ld)};
  ASSERT_TRUE(fn->Call(args).ok());
  std::vector<float> b(rows * cols);
  ASSERT_TRUE(
      hal::Download(*device_, B, 0, {reinterpret_cast<uint8_t*>(b.data()), b.size() * 4}).ok());
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) ASSERT_EQ(b[r * cols + c], a[r * ld + c]) << r << "," << c;
  }
  // Sizes that overflow 64 bits are errors, not 0.
  {
    Arg huge[] = {Arg::Buffer(A), Arg::Buffer(B), Arg::I32(1 << 30), Arg::I32(1 << 30),
                  Arg::I32(1 << 30)};
    Status s = fn->Call(huge);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  }
}

// A shape whose i32 arithmetic wraps for the arguments (`n * stride` at
// 65536 x 65537 is 65536 in i32) is refused, naming the extent, rather
// than checked against the wrapped size the kernel would also compute.
TEST_F(RuntimeTest, ShapesWhoseArithmeticWrapsAreRefused) {
  auto compiled = codegen::CompileModule(*ir::ParseModule(
      "module {\nfn strided(X: buffer<f32>[n * stride], Y: buffer<f32>[n], n: i32, stride: i32) "
      "{\n  for i in serial(0, n) {\n    Y[i] = X[i * stride]\n  }\n}\n}\n"));
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  auto loaded = LoadedModule::Load(device_, *compiled);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto fn = *(*loaded)->Find("strided");
  auto X = NewBuffer(65536 * 4), Y = NewBuffer(65536 * 4);
  Arg args[] = {Arg::Buffer(X), Arg::Buffer(Y), Arg::I32(65536), Arg::I32(65537)};
  Status s = fn->Call(args);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("function 'strided': extent 0 of parameter 'X': `n * stride` "
                             "overflows i32 for these arguments (65536 * 65537)"),
            std::string::npos)
      << s;
  Arg fine[] = {Arg::Buffer(X), Arg::Buffer(Y), Arg::I32(16384), Arg::I32(4)};
  KILN_EXPECT_OK(fn->Call(fine));
}

// A stride that a scalar makes 0 is refused when called, as the verifier
// refuses a constant one: every index would reach one element.
TEST_F(RuntimeTest, ZeroStridesFromScalarsAreRefused) {
  auto compiled = codegen::CompileModule(
      *ir::ParseModule("module {\nfn f(X: buffer<f32>[4, 2] strides [s, 1], n: i32, s: i32) {\n"
                       "  for i in threadIdx.x(0, 4) {\n    X[i, 0] = 1.0\n  }\n}\n}\n"));
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  auto loaded = LoadedModule::Load(device_, *compiled);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto fn = *(*loaded)->Find("f");
  auto X = NewBuffer(64);
  Arg zero[] = {Arg::Buffer(X), Arg::I32(1), Arg::I32(0)};
  Status s = fn->Call(zero);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("function 'f': stride 0 of parameter 'X' `s` is 0 for these "
                             "arguments; strides are positive"),
            std::string::npos)
      << s;
  Arg fine[] = {Arg::Buffer(X), Arg::I32(1), Arg::I32(2)};
  KILN_EXPECT_OK(fn->Call(fine));
}

// Arguments are buffer views: several tensors in one arena buffer, each at
// an aligned offset; misaligned, out-of-range, too-small and aliasing views
// are refused before anything is recorded.
TEST_F(RuntimeTest, BufferViewsShareOneArena) {
  const uint32_t n = 300;
  const uint64_t align = device_->limits().min_storage_buffer_offset_alignment;
  const uint64_t slot = (n * 4 + align - 1) / align * align;
  auto arena = NewBuffer(3 * slot);
  std::vector<float> x(n);
  std::mt19937 rng(5);
  for (auto& v : x) v = std::uniform_real_distribution<float>(-1, 1)(rng);
  std::vector<uint8_t> poison(3 * slot, 0xFF);
  ASSERT_TRUE(hal::Upload(*device_, arena, 0, poison).ok());
  ASSERT_TRUE(
      hal::Upload(*device_, arena, slot, {reinterpret_cast<uint8_t*>(x.data()), n * 4}).ok());
  const Kernel* fn = *module_->Find("scale");
  // X in the middle slot, Y in the last: one buffer, two views, read and
  // written; WebGPU forbids that within one dispatch, so it is refused...
  {
    Arg args[] = {Arg::Buffer(arena, slot, n * 4), Arg::Buffer(arena, 2 * slot, n * 4), Arg::I32(n),
                  Arg::F32(3.0f)};
    Status s = fn->Call(args);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("view the same buffer"), std::string::npos) << s;
    // The written one is named first, though it is bound after the read one.
    EXPECT_NE(s.message().find("argument 1 ('Y') is written and argument 0 ('X') only read"),
              std::string::npos)
        << s;
  }
  // ...so Y goes to a second arena, at an offset.
  auto out = NewBuffer(2 * slot);
  ASSERT_TRUE(hal::Upload(*device_, out, 0, std::vector<uint8_t>(2 * slot, 0xFF)).ok());
  Arg args[] = {Arg::Buffer(arena, slot, n * 4), Arg::Buffer(out, slot), Arg::I32(n),
                Arg::F32(3.0f)};
  ASSERT_TRUE(fn->Call(args).ok());
  std::vector<float> y(n);
  ASSERT_TRUE(
      hal::Download(*device_, out, slot, {reinterpret_cast<uint8_t*>(y.data()), n * 4}).ok());
  for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(y[i], x[i] * 3.0f) << i;
  // Bytes before the view are untouched.
  std::vector<uint8_t> head(slot);
  ASSERT_TRUE(hal::Download(*device_, out, 0, head).ok());
  EXPECT_EQ(head, std::vector<uint8_t>(slot, 0xFF));

  auto refused = [&](Arg x_view, const char* fragment) {
    Arg bad[] = {x_view, Arg::Buffer(out, slot), Arg::I32(n), Arg::F32(1.0f)};
    EXPECT_TRUE(HasError(fn->Call(bad), StatusCode::kInvalidArgument, fragment));
  };
  if (align > 4) refused(Arg::Buffer(arena, 4), "minStorageBufferOffsetAlignment");
  refused(Arg::Buffer(arena, slot, n * 4 - 4),
          "a view of 1196 bytes, but 300 f32 elements need 1200");
  refused(Arg::Buffer(arena, 4 * slot), "past the end of the buffer");
  refused(Arg::Buffer(arena, 2 * slot, 2 * slot), "does not fit the buffer");
}

TEST_F(RuntimeTest, TwoWrittenViewsOfOneBufferMayNotOverlap) {
  // two(A, B, C, n): B = A + 1, C = A * 2.
  const char* env = std::getenv("KILN_SOURCE_DIR");
  auto file = check::ReadCorpusFile(std::string(env && *env ? env : KILN_SOURCE_DIR) +
                                    "/tests/corpus/two_outputs.kir");
  ASSERT_TRUE(file.ok()) << file.status();
  auto source = ir::ParseModule(file->text);
  ASSERT_TRUE(source.ok()) << source.status();
  auto compiled = codegen::CompileModule(*source, CompileOptionsFor(*device_));
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  auto loaded = LoadedModule::Load(device_, *compiled);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Kernel* fn = *(*loaded)->Find("two");
  constexpr uint32_t n = 64, slot = 256;  // (a multiple of every offset alignment)
  std::vector<float> x(n);
  std::mt19937 rng(7);
  for (auto& v : x) v = std::uniform_real_distribution<float>(-1, 1)(rng);
  auto in = NewBuffer(n * 4);
  ASSERT_TRUE(hal::Upload(*device_, in, 0, {reinterpret_cast<uint8_t*>(x.data()), n * 4}).ok());
  auto arena = NewBuffer(2 * slot);
  ASSERT_TRUE(hal::Upload(*device_, arena, 0, std::vector<uint8_t>(2 * slot, 0xFF)).ok());
  // The whole buffer twice, and two views that share bytes: refused before
  // anything is recorded.
  for (bool whole : {true, false}) {
    Arg args[] = {Arg::Buffer(in), Arg::Buffer(arena), Arg::Buffer(arena), Arg::I32(n)};
    if (!whole) args[2] = Arg::Buffer(arena, 0, slot);
    Status s = fn->Call(args);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("are both written, and their views of one buffer overlap"),
              std::string::npos)
        << s;
  }
  // Side by side in one buffer they may be written, and the device is as
  // good as before.
  Arg args[] = {Arg::Buffer(in), Arg::Buffer(arena, 0, slot), Arg::Buffer(arena, slot, slot),
                Arg::I32(n)};
  ASSERT_TRUE(fn->Call(args).ok());
  std::vector<float> out(2 * slot / 4);
  ASSERT_TRUE(
      hal::Download(*device_, arena, 0, {reinterpret_cast<uint8_t*>(out.data()), 2 * slot}).ok());
  for (uint32_t i = 0; i < n; ++i) {
    ASSERT_EQ(out[i], x[i] + 1.0f) << i;
    ASSERT_EQ(out[slot / 4 + i], x[i] * 2.0f) << i;
  }
  EXPECT_TRUE(device_->CheckHealthy().ok());
}

TEST_F(RuntimeTest, WrongArgumentsAreClearErrors) {
  auto fn = *module_->Find("scale");
  auto X = NewBuffer(400), Y = NewBuffer(400);
  {
    Arg args[] = {Arg::Buffer(X), Arg::Buffer(Y), Arg::I32(100)};
    Status s = fn->Call(args);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("takes 4 arguments, got 3"), std::string::npos) << s;
  }
  {
    Arg args[] = {Arg::Buffer(X), Arg::Buffer(Y), Arg::F32(100), Arg::F32(1)};
    Status s = fn->Call(args);
    EXPECT_NE(s.message().find("argument 2 ('n'): expected i32, got f32"), std::string::npos) << s;
  }
  {
    Arg args[] = {Arg::Buffer(X), Arg::I32(1), Arg::I32(100), Arg::F32(1)};
    Status s = fn->Call(args);
    EXPECT_NE(s.message().find("expected a buffer"), std::string::npos) << s;
  }
  {
    // An Arg made by hand with both, or neither; BufferElements checks the
    // scalars' types as a call does.
    Arg both = Arg::I32(100);
    both.buffer = Y;
    Arg args[] = {Arg::Buffer(X), Arg::Buffer(Y), both, Arg::F32(1)};
    Status s = fn->Call(args);
    EXPECT_NE(s.message().find("argument 2 ('n'): holds both a scalar and a buffer"),
              std::string::npos)
        << s;
    Arg neither[] = {Arg::Buffer(X), Arg::Buffer(Y), Arg{}, Arg::F32(1)};
    s = fn->Call(neither);
    EXPECT_NE(s.message().find("argument 2 ('n'): holds neither a buffer nor a scalar (expected "
                               "i32)"),
              std::string::npos)
        << s;
    Arg f32_n[] = {Arg::Buffer(X), Arg::Buffer(Y), Arg::F32(100), Arg::F32(1)};
    StatusOr<uint64_t> elements = fn->BufferElements(0, f32_n);
    ASSERT_FALSE(elements.ok()) << *elements;
    EXPECT_NE(elements.status().message().find("argument 2 ('n'): expected i32, got f32"),
              std::string::npos)
        << elements.status();
  }
  {
    // 101 elements do not fit 400 bytes.
    Arg args[] = {Arg::Buffer(X), Arg::Buffer(Y), Arg::I32(101), Arg::F32(1)};
    Status s = fn->Call(args);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("a buffer of 400 bytes, but 101 f32 elements need 404"),
              std::string::npos)
        << s;
  }
  {
    Arg args[] = {Arg::Buffer(X), Arg::Buffer(Y), Arg::I32(-5), Arg::F32(1)};
    Status s = fn->Call(args);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  }
  EXPECT_EQ(module_->Find("nope").status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(device_->CheckHealthy().ok());
}

TEST_F(RuntimeTest, GridsBeyond65535WorkgroupsSpreadOverXAndZ) {
  auto fn = *module_->Find("mark_blocks");
  const int32_t blocks = 70001;
  auto Out = NewBuffer(blocks * 4);
  std::vector<uint8_t> poison(blocks * 4, 0xAB);
  ASSERT_TRUE(hal::Upload(*device_, Out, 0, poison).ok());
  Arg args[] = {Arg::Buffer(Out), Arg::I32(blocks)};
  auto plan = fn->Plan(args);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->num_blocks_x, 70001u);
  EXPECT_LE(plan->groups_x, device_->limits().max_compute_workgroups_per_dimension);
  EXPECT_GE(uint64_t(plan->groups_x) * plan->groups_z, 70001u);
  ASSERT_TRUE(fn->Call(args).ok());
  std::vector<uint32_t> out(blocks);
  ASSERT_TRUE(
      hal::Download(*device_, Out, 0, {reinterpret_cast<uint8_t*>(out.data()), blocks * 4u}).ok());
  for (int32_t b = 0; b < blocks; ++b) ASSERT_EQ(out[b], uint32_t(b) * 3 + 1) << "block " << b;
}

TEST_F(RuntimeTest, EmptyLaunchDispatchesNothing) {
  auto fn = *module_->Find("scale");
  auto X = NewBuffer(4), Y = NewBuffer(4);
  Arg args[] = {Arg::Buffer(X), Arg::Buffer(Y), Arg::I32(0), Arg::F32(1)};
  auto plan = fn->Plan(args);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->groups_x, 0u);
  EXPECT_TRUE(fn->Call(args).ok());
}

TEST_F(RuntimeTest, ModuleFilesRoundTripAndBadFilesAreClearErrors) {
  const std::string bytes = codegen::SerializeModule(compiled_);
  // One file per process: ctest runs this suite on several devices at once.
  const std::string path =
      ::testing::TempDir() + "/kiln_runtime_test_" + std::to_string(::getpid()) + ".kmod";
  auto write = [&](const std::string& content) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
  };
  write(bytes);
  auto good = LoadedModule::LoadFile(device_, path);
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ((*good)->functions().size(), 2u);

  write(bytes.substr(0, bytes.size() / 2));
  auto truncated = LoadedModule::LoadFile(device_, path);
  EXPECT_EQ(truncated.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(truncated.status().message().find("truncated"), std::string::npos)
      << truncated.status();

  std::string corrupt = bytes;
  corrupt[corrupt.size() - 10] ^= 0x5A;
  write(corrupt);
  auto bad = LoadedModule::LoadFile(device_, path);
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("corrupt"), std::string::npos) << bad.status();

  write("not a module at all, just some text of sufficient length to be read");
  EXPECT_EQ(LoadedModule::LoadFile(device_, path).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(LoadedModule::LoadFile(device_, path + ".missing").status().code(),
            StatusCode::kInvalidArgument);
  std::remove(path.c_str());
}

TEST_F(RuntimeTest, CraftedMetadataIsRefusedOnLoad) {
  codegen::CompiledModule crafted = compiled_;
  crafted.functions[0].metadata.workgroup_size = {0, 1, 1};
  auto zero = LoadedModule::Load(device_, crafted);
  EXPECT_EQ(zero.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(zero.status().message().find("workgroup size (0, 1, 1)"), std::string::npos)
      << zero.status();

  crafted = compiled_;
  crafted.functions[1].metadata.name = crafted.functions[0].metadata.name;
  EXPECT_EQ(LoadedModule::Load(device_, crafted).status().code(), StatusCode::kDataLoss);

  // Valid in itself, but more threads than this device allows: the module
  // loads, and that function is unavailable (its siblings are not).
  crafted = compiled_;
  codegen::KernelMetadata& md = crafted.functions[0].metadata;
  const uint32_t wide = device_->limits().max_compute_invocations_per_workgroup * 2;
  const std::string declared = StrCat("@workgroup_size(", md.workgroup_size[0], ", ",
                                      md.workgroup_size[1], ", ", md.workgroup_size[2], ")");
  std::string& wgsl = crafted.functions[0].wgsl;
  wgsl.replace(wgsl.find(declared), declared.size(), StrCat("@workgroup_size(1, 1, ", wide, ")"));
  md.workgroup_size = {1, 1, wide};
  auto big = LoadedModule::Load(device_, crafted);
  ASSERT_TRUE(big.ok()) << big.status();
  const Status& unavailable = (*big)->functions()[0]->availability();
  EXPECT_EQ(unavailable.code(), StatusCode::kUnavailable);
  EXPECT_NE(unavailable.message().find("beyond the device's limits"), std::string::npos)
      << unavailable;
  EXPECT_TRUE((*big)->functions()[1]->availability().ok());
}

// A buffer the kernel accesses only as aligned vec4s is an array<vec4<f32>>
// in the WGSL, whose bindings WebGPU wants at least 16 bytes long.
constexpr const char* kVec4Only = R"(module {
fn twice(A: buffer<f32>[n], B: buffer<f32>[n], n: i32) {
  for bx in blockIdx.x(0, 1) {
    for tx in threadIdx.x(0, 64) {
      let i: i32 = tx * 4
      if (i + 3 < n) {
        B[ramp(i, 1, 4)] = A[ramp(i, 1, 4)] * broadcast(2.0, 4)
      }
    }
  }
}
})";

// Buffers of fewer elements than a vector (n = 0 to 3) bind one vector's
// bytes of their allocation, so the call runs (and writes nothing); a view
// smaller than a vector is refused by name, and metadata claiming scalars
// for a vector array fails when the pipeline is made, not at a dispatch.
TEST_F(RuntimeTest, BuffersReadOnlyAsVectorsBindAtLeastOneVector) {
  auto module = ir::ParseModule(kVec4Only);
  ASSERT_TRUE(module.ok()) << module.status();
  auto compiled = codegen::CompileModule(*module);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  ASSERT_NE(compiled->functions[0].wgsl.find("array<vec4<f32>>"), std::string::npos);
  EXPECT_EQ(compiled->functions[0].metadata.params[0].lanes, 4u);
  EXPECT_EQ(compiled->functions[0].metadata.params[2].lanes, 1u);
  auto loaded = LoadedModule::Load(device_, *compiled);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto fn = (*loaded)->Find("twice");
  ASSERT_TRUE(fn.ok()) << fn.status();
  EXPECT_EQ((*fn)->MinBindingBytes(0), 16u);
  std::mt19937 rng(::testing::UnitTest::GetInstance()->random_seed());
  for (uint32_t n : {0u, 1u, 2u, 3u, 4u, 7u, 9u}) {
    std::vector<float> x(n);
    for (auto& v : x) v = std::uniform_real_distribution<float>(-8, 8)(rng);
    const uint64_t bytes = std::max<uint32_t>(4, n * 4);
    auto X = NewBuffer(bytes), Y = NewBuffer(bytes);
    if (n > 0) {
      ASSERT_TRUE(hal::Upload(*device_, X, 0, {reinterpret_cast<uint8_t*>(x.data()), n * 4}).ok());
    }
    std::vector<uint8_t> poison(bytes, 0xFF);  // NaN
    ASSERT_TRUE(hal::Upload(*device_, Y, 0, poison).ok());
    Arg args[] = {Arg::Buffer(X), Arg::Buffer(Y), Arg::I32(static_cast<int32_t>(n))};
    Status called = (*fn)->Call(args);
    if (bytes < 16) {
      // The allocation behind a whole-buffer argument is larger than its
      // size, but a binding stays inside the size: refused, with the remedy.
      EXPECT_EQ(called.code(), StatusCode::kInvalidArgument) << n;
      EXPECT_NE(called.message().find("accesses it only as 4-element vectors, so it is bound "
                                      "16 bytes at a time; give it at least 16 bytes"),
                std::string::npos)
          << called;
      continue;
    }
    ASSERT_TRUE(called.ok()) << n << ": " << called;
    std::vector<float> y(n);
    ASSERT_TRUE(hal::Download(*device_, Y, 0, {reinterpret_cast<uint8_t*>(y.data()), n * 4}).ok());
    for (uint32_t i = 0; i < n; ++i) {
      if (i < n / 4 * 4) {
        EXPECT_EQ(y[i], 2 * x[i]) << n << " [" << i << "]";
      } else {
        EXPECT_TRUE(std::isnan(y[i])) << n << " [" << i << "] untouched";
      }
    }
  }
  // Two elements in buffers of 16 bytes: the binding is a vector's bytes.
  auto X = NewBuffer(16), Y = NewBuffer(16);
  Arg two[] = {Arg::Buffer(X), Arg::Buffer(Y), Arg::I32(2)};
  EXPECT_TRUE((*fn)->Call(two).ok());
  // An explicit view of 8 bytes is refused, naming the argument.
  Arg view[] = {Arg::Buffer(X, 0, 8), Arg::Buffer(Y), Arg::I32(2)};
  Status refused = (*fn)->Call(view);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("argument 0 ('A'): a view of 8 bytes"), std::string::npos)
      << refused;

  // Metadata that says scalars where the WGSL has vectors (the layout's
  // minimum size below the shader's): refused at load, naming both.
  codegen::CompiledModule crafted = *compiled;
  crafted.functions[0].metadata.params[0].lanes = 1;
  EXPECT_TRUE(HasError(LoadedModule::Load(device_, crafted), StatusCode::kDataLoss,
                       "function 'twice': buffer parameter 'A' (@binding(0)) is declared "
                       "var<storage,read> of array<vec4<f32>> in the WGSL; its metadata (f32, 1 "
                       "lane(s)) makes it var<storage,read> of array<f32>"));
  crafted.functions[0].metadata.params[0].lanes = 3;
  EXPECT_EQ(LoadedModule::Load(device_, crafted).status().code(), StatusCode::kDataLoss);
}

TEST_F(RuntimeTest, FunctionsNeedingMissingFeaturesLoadAsUnavailable) {
  codegen::CompiledModule needs = compiled_;
  needs.functions[0].metadata.required_features.push_back("subgroups");
  needs.functions[0].metadata.required_features.push_back("shader-f16");
  auto loaded = LoadedModule::Load(device_, needs);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Kernel* fn = *(*loaded)->Find("scale");
  if (device_->HasFeature(hal::Feature::kSubgroups) &&
      device_->HasFeature(hal::Feature::kShaderF16)) {
    EXPECT_TRUE(fn->availability().ok());
  } else {
    EXPECT_EQ(fn->availability().code(), StatusCode::kUnavailable);
    auto X = NewBuffer(4), Y = NewBuffer(4);
    Arg args[] = {Arg::Buffer(X), Arg::Buffer(Y), Arg::I32(1), Arg::F32(1)};
    EXPECT_EQ(fn->Call(args).code(), StatusCode::kUnavailable);
  }
  EXPECT_TRUE((*(*loaded)->Find("mark_blocks"))->availability().ok());
}

// `count` functions scale_0 .. scale_{count-1}, each computing
// Y = X * s + k (so each has its own WGSL).
std::string ManyScales(int count) {
  std::string text = "module {\n";
  for (int k = 0; k < count; ++k) {
    text += StrCat("fn scale_", k, "(X: buffer<f32>[n], Y: buffer<f32>[n], n: i32, s: f32) {\n",
                   "  for bx in blockIdx.x(0, (n + 63) / 64) {\n",
                   "    for tx in threadIdx.x(0, 64) {\n", "      let i: i32 = bx * 64 + tx\n",
                   "      if (i < n) {\n", "        Y[i] = X[i] * s + ", k, ".0\n",
                   "      }\n    }\n  }\n}\n");
  }
  return text + "}\n";
}

TEST_F(RuntimeTest, LoadingCreatesNoExecutablesUntilAFunctionIsAskedFor) {
  constexpr int kCount = 40;
  auto source = ir::ParseModule(ManyScales(kCount));
  ASSERT_TRUE(source.ok()) << source.status();
  auto compiled = codegen::CompileModule(*source, CompileOptionsFor(*device_));
  ASSERT_TRUE(compiled.ok()) << compiled.status();

  const uint64_t before = ExecutableLookups();
  auto loaded = LoadedModule::Load(device_, *compiled);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const LoadedModule& module = **loaded;
  ASSERT_EQ(module.functions().size(), size_t{kCount});
  EXPECT_EQ(module.prepared_count(), 0u);
  EXPECT_EQ(ExecutableLookups(), before) << "loading asked the HAL for executables";
  for (const auto& fn : module.functions()) EXPECT_FALSE(fn->prepared()) << fn->name();

  // Looking one up creates its executable, and only its.
  auto fn = module.Find("scale_17");
  ASSERT_TRUE(fn.ok()) << fn.status();
  EXPECT_TRUE((*fn)->prepared());
  EXPECT_EQ(module.prepared_count(), 1u);
  EXPECT_EQ(ExecutableLookups(), before + 1);
  ExpectScales(**fn, 17.0f);
  ExpectScales(**fn, 17.0f);
  EXPECT_EQ(ExecutableLookups(), before + 1)
      << "a prepared function asked for its executable again";

  // Calling a function reached through functions() prepares it on first use.
  const Kernel& other = *module.functions()[3];
  EXPECT_FALSE(other.prepared());
  ExpectScales(other, 3.0f);
  EXPECT_TRUE(other.prepared());
  EXPECT_EQ(module.prepared_count(), 2u);
  EXPECT_EQ(ExecutableLookups(), before + 2);
}

TEST_F(RuntimeTest, AFunctionTheDeviceRejectsFailsAloneAndOnlyWhenAskedFor) {
  codegen::CompiledModule mixed;
  // WGSL the implementation rejects: an unknown identifier.
  codegen::CompiledFunction broken = compiled_.functions[0];
  broken.metadata.name = "broken";
  const size_t fn_at = broken.source_ir.find("fn scale(");
  ASSERT_NE(fn_at, std::string::npos);
  broken.source_ir.replace(fn_at, 9, "fn broken(");
  broken.wgsl += "\nfn kiln_broken_helper() -> f32 {\n  return kiln_no_such_value;\n}\n";
  mixed.functions.push_back(broken);
  mixed.functions.push_back(compiled_.functions[0]);  // scale
  // More storage buffers than the device allows in one shader stage, where
  // that limit is small enough to write such a kernel.
  const uint32_t max_storage = device_->limits().max_storage_buffers_per_shader_stage;
  const bool wide = max_storage < 64;
  if (wide) {
    std::string params, sum = "0.0";
    for (uint32_t b = 0; b <= max_storage; ++b) {
      params += StrCat("B", b, ": buffer<f32>[1], ");
      if (b > 0) sum += StrCat(" + B", b, "[0]");
    }
    auto ir = ir::ParseModule(StrCat("module {\nfn wide(", params, R"(n: i32) {
  for bx in blockIdx.x(0, 1) {
    for tx in threadIdx.x(0, 1) {
      B0[0] = )",
                                     sum, R"(
    }
  }
}
})"));
    ASSERT_TRUE(ir.ok()) << ir.status();
    // Compiled for a device with more storage buffers than this one.
    codegen::CompileOptions roomy = CompileOptionsFor(*device_);
    roomy.codegen.limits.max_storage_buffers_per_stage = max_storage + 1;
    auto c = codegen::CompileModule(*ir, roomy);
    ASSERT_TRUE(c.ok()) << c.status();
    mixed.functions.push_back(c->functions[0]);
  }

  auto loaded = LoadedModule::Load(device_, mixed);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const LoadedModule& module = **loaded;
  EXPECT_EQ(module.prepared_count(), 0u);

  // The good function runs, before and after its siblings fail.
  auto scale = module.Find("scale");
  ASSERT_TRUE(scale.ok()) << scale.status();
  ExpectScales(**scale, 0.0f);

  auto bad = module.Find("broken");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kCompileError) << bad.status();
  EXPECT_NE(bad.status().message().find("function 'broken'"), std::string::npos) << bad.status();
  // The implementation's own message names the unknown identifier.
  EXPECT_NE(bad.status().message().find("kiln_no_such_value"), std::string::npos) << bad.status();
  // The same error, without compiling again, through functions().
  const Kernel& broken_fn = *module.functions()[0];
  EXPECT_TRUE(broken_fn.availability().ok());
  auto X = NewBuffer(16), Y = NewBuffer(16);
  Arg args[] = {Arg::Buffer(X), Arg::Buffer(Y), Arg::I32(4), Arg::F32(1)};
  Status called = broken_fn.Call(args);
  EXPECT_EQ(called.code(), StatusCode::kCompileError);
  EXPECT_EQ(called.message(), bad.status().message());

  if (wide) {
    // Beyond this device's storage buffers: unavailable, saying why, and
    // its siblings unaffected.
    auto too_wide = module.Find("wide");
    ASSERT_TRUE(too_wide.ok()) << too_wide.status();
    const Status& why = (*too_wide)->availability();
    EXPECT_EQ(why.code(), StatusCode::kUnavailable) << why;
    EXPECT_NE(why.message().find("function 'wide'"), std::string::npos) << why;
    EXPECT_NE(why.message().find("storage buffers"), std::string::npos) << why;
  }
  EXPECT_TRUE(device_->CheckHealthy().ok()) << device_->CheckHealthy();
  ExpectScales(**scale, 0.0f);
  EXPECT_EQ(module.prepared_count(), 2u);  // an unavailable function is never compiled
}

TEST_F(RuntimeTest, UnknownFunctionNamesAreListedBriefly) {
  auto source = ir::ParseModule(ManyScales(25));
  ASSERT_TRUE(source.ok()) << source.status();
  auto compiled = codegen::CompileModule(*source, CompileOptionsFor(*device_));
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  auto loaded = LoadedModule::Load(device_, *compiled);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto missing = (*loaded)->Find("scale_25");
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("no function 'scale_25' (it has: scale_0, scale_1"),
            std::string::npos)
      << missing.status();
  EXPECT_NE(missing.status().message().find("scale_19 and 5 more)"), std::string::npos)
      << missing.status();
  EXPECT_EQ((*loaded)->prepared_count(), 0u);
}

// Another device's buffer is refused when the call is planned, and both
// devices work on (WebGPU would lose the device that records it).
TEST_F(RuntimeTest, AnotherDevicesBufferIsRefused) {
  auto other = hal::Device::Create();  // as the test device was: $KILN_IMPL, ...
  ASSERT_TRUE(other.ok()) << other.status();
  auto theirs = (*other)->allocator().Allocate(400);
  ASSERT_TRUE(theirs.ok()) << theirs.status();
  auto fn = *module_->Find("scale");
  auto X = NewBuffer(400);
  Arg args[] = {Arg::Buffer(X), Arg::Buffer(*theirs), Arg::I32(100), Arg::F32(1)};
  Status s = fn->Call(args);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("argument 1 ('Y'): the buffer belongs to another device"),
            std::string::npos)
      << s;
  KILN_EXPECT_OK(device_->CheckHealthy());
  KILN_EXPECT_OK((*other)->CheckHealthy());
  auto Y = NewBuffer(400);
  Arg ok[] = {Arg::Buffer(X), Arg::Buffer(Y), Arg::I32(100), Arg::F32(1)};
  KILN_EXPECT_OK(fn->Call(ok));
}

// So is another device's command buffer: the kernel's pipeline and buffers
// are its module's device's.
TEST_F(RuntimeTest, AnotherDevicesCommandBufferIsRefused) {
  auto other = hal::Device::Create();
  ASSERT_TRUE(other.ok()) << other.status();
  auto cb = hal::CommandBuffer::Create(*other, hal::CommandBufferMode::kOneShot, {"theirs"});
  ASSERT_TRUE(cb.ok()) << cb.status();
  auto fn = *module_->Find("scale");
  auto X = NewBuffer(400), Y = NewBuffer(400);
  Arg args[] = {Arg::Buffer(X), Arg::Buffer(Y), Arg::I32(100), Arg::F32(1)};
  Status s = fn->Record(**cb, args);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("function 'scale': command buffer 'theirs' records for another "
                             "device than the module's"),
            std::string::npos)
      << s;
  EXPECT_EQ((*cb)->stats().dispatches, 0u);
  KILN_EXPECT_OK((*cb)->End());
  KILN_EXPECT_OK(hal::SubmitAndWait(**other, **cb));
  KILN_EXPECT_OK(device_->CheckHealthy());
  KILN_EXPECT_OK((*other)->CheckHealthy());
  KILN_EXPECT_OK(fn->Call(args));
}

TEST_F(RuntimeTest, LoadingOnNoDeviceIsAnError) {
  auto compiled = codegen::CompileModule(source_);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  auto none = LoadedModule::Load(nullptr, *compiled);
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(none.status().message(), "loading a module: no device");
}

TEST_F(RuntimeTest, CheckerCatchesAWrongKernel) {
  // Compile `scale`, but check it against a source that scales by s + 1:
  // the differential check must fail, proving it can.
  auto wrong = ir::ParseModule(
      std::string(kScale).replace(std::string(kScale).find("X[i] * s"), 8, "X[i] * (s + 1.0)"));
  ASSERT_TRUE(wrong.ok()) << wrong.status();
  auto fn = *module_->Find("scale");
  CheckOptions options;
  options.scalar_args = {{"n", "300"}, {"s", "2"}};
  auto result = RunAndCheck(*fn, wrong->functions[0], options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->pass);
  auto right = RunAndCheck(*fn, source_.functions[0], options);
  ASSERT_TRUE(right.ok()) << right.status();
  EXPECT_TRUE(right->pass) << right->Summary();
}

TEST_F(RuntimeTest, CheckerReportsTheDeviceCallToItsHook) {
  // The hook brackets the device call only: once before it, once after it,
  // whether or not the interpreter runs too.
  auto fn = *module_->Find("scale");
  CheckOptions options;
  options.scalar_args = {{"n", "300"}, {"s", "2"}};
  std::vector<bool> calls;
  options.on_device_call = [&](bool running) { calls.push_back(running); };
  auto checked = RunAndCheck(*fn, source_.functions[0], options);
  ASSERT_TRUE(checked.ok()) << checked.status();
  EXPECT_TRUE(checked->pass) << checked->Summary();
  EXPECT_EQ(calls, (std::vector<bool>{true, false}));
  calls.clear();
  ASSERT_TRUE(check::RunOnDevice(*fn, options).ok());
  EXPECT_EQ(calls, (std::vector<bool>{true, false}));
}

}  // namespace
}  // namespace kiln::runtime
