#include "kiln/codegen/module_format.h"

#include <gtest/gtest.h>

#include <limits>
#include <optional>

namespace kiln::codegen {
namespace {

CompiledModule SampleModule() {
  CompiledFunction add;
  add.metadata.name = "add";
  add.metadata.entry_point = "add";
  add.metadata.params = {
      {.name = "A",
       .kind = ParamKind::kBuffer,
       .dtype = DType::kF32,
       .binding = 0,
       .lanes = 4,
       .shape = {ExtentExpr::Param(2, "n")}},
      {.name = "B",
       .kind = ParamKind::kBuffer,
       .dtype = DType::kF32,
       .access = BufferAccess::kReadWrite,
       .binding = 1,
       .shape = {ExtentExpr::Param(2, "n"), ExtentExpr::Constant(4)},
       .strides = {ExtentExpr::Constant(8), ExtentExpr::Constant(1)}},
      {.name = "n", .kind = ParamKind::kScalar, .dtype = DType::kI32, .uniform_offset = 0},
  };
  // (n + 63) / 64
  ExtentExpr blocks = ExtentExpr::Param(2, "n");
  blocks.ops.push_back({ExtentOp::Code::kConst, 32, true, 63});
  blocks.ops.push_back({ExtentOp::Code::kAdd, 32, true, 0});
  blocks.ops.push_back({ExtentOp::Code::kConst, 32, true, 64});
  blocks.ops.push_back({ExtentOp::Code::kDiv, 32, true, 0});
  blocks.text = "(n + 63) / 64";
  add.metadata.num_blocks_x = blocks;
  add.metadata.workgroup_size = {64, 1, 1};
  add.metadata.required_features = {"shader-f16"};
  add.metadata.uniform_binding = 2;
  add.metadata.uniform_block_size = 16;
  add.metadata.workgroup_storage_bytes = 256;
  add.metadata.loops_terminate = false;
  add.wgsl = "@compute @workgroup_size(64, 1, 1)\nfn add() {}\n";
  add.source_ir = "fn add(A: buffer<f32>[n]) {}\n";
  CompiledFunction empty;
  empty.metadata.name = "empty";
  empty.metadata.entry_point = "empty";
  CompiledModule module;
  module.functions = {add, empty};
  return module;
}

void ExpectDataLoss(const StatusOr<CompiledModule>& result, std::string_view fragment) {
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(result.status().message().find(fragment), std::string::npos)
      << result.status().message();
}

TEST(ModuleFormatTest, RoundTrips) {
  CompiledModule module = SampleModule();
  std::string bytes = SerializeModule(module);
  EXPECT_EQ(bytes.substr(0, 8), "KILNWGSL");
  StatusOr<CompiledModule> loaded = DeserializeModule(bytes);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(*loaded, module);
  ASSERT_NE(loaded->Find("add"), nullptr);
  EXPECT_EQ(loaded->Find("add")->metadata.params[1].shape[1].text, "4");
  EXPECT_EQ(loaded->Find("add")->metadata.params[0].lanes, 4u);
  EXPECT_EQ(loaded->Find("add")->metadata.params[1].lanes, 1u);
  const int64_t args[] = {0, 0, 1000};
  EXPECT_EQ(*Evaluate(loaded->Find("add")->metadata.num_blocks_x, args), 16);
  EXPECT_EQ(loaded->Find("missing"), nullptr);
}

// An extent whose arithmetic leaves its type for the arguments given is an
// error naming the operation, not a wrapped size: the kernel would compute
// the wrapped value too, and index past it.
TEST(ModuleFormatTest, ExtentsThatOverflowTheirTypeAreErrors) {
  auto binary = [](ExtentOp::Code code, int bits, bool is_signed, ExtentExpr a, ExtentExpr b) {
    ExtentExpr e = a;
    e.ops.insert(e.ops.end(), b.ops.begin(), b.ops.end());
    e.ops.push_back({code, static_cast<uint8_t>(bits), is_signed, 0});
    e.text = "a op b";
    return e;
  };
  auto param64 = [](int64_t index, bool is_signed) {
    ExtentExpr e;
    e.ops.push_back({ExtentOp::Code::kParam, 64, is_signed, index});
    e.text = "p";
    return e;
  };
  const ExtentExpr n64 = param64(0, true), m64 = param64(1, true);
  const ExtentExpr un64 = param64(0, false), um64 = param64(1, false);
  const ExtentExpr n = ExtentExpr::Param(0, "n"), m = ExtentExpr::Param(1, "m");
  const ExtentExpr un = ExtentExpr::Param(0, "n", false), um = ExtentExpr::Param(1, "m", false);
  using C = ExtentOp::Code;
  struct Case {
    ExtentExpr e;
    int64_t n, m;
    std::optional<int64_t> value;  // nullopt: an overflow
  };
  const Case cases[] = {
      {binary(C::kMul, 32, true, n, m), 65536, 65537, std::nullopt},
      {binary(C::kMul, 32, true, n, m), 46340, 46340, int64_t{46340} * 46340},
      {binary(C::kMul, 32, true, n, m), -65536, 32768, -(int64_t{1} << 31)},
      {binary(C::kAdd, 32, true, n, m), 2147483647, 1, std::nullopt},
      {binary(C::kAdd, 32, true, n, m), 2147483646, 1, 2147483647},
      {binary(C::kSub, 32, true, n, m), -2147483647, 2, std::nullopt},
      {binary(C::kSub, 32, false, un, um), 0, 1, std::nullopt},
      {binary(C::kSub, 32, false, un, um), 5, 5, 0},
      {binary(C::kMul, 32, false, un, um), 65536, 65536, std::nullopt},
      {binary(C::kMul, 32, false, un, um), 65535, 65537, 4294967295},
      {binary(C::kDiv, 32, true, n, m), -2147483647 - 1, -1, -2147483647 - 1},  // the IR's rule
      {binary(C::kDiv, 32, true, n, m), 7, 0, 7},  // the IR's x / 0 == x
      // 64-bit: unsigned operands are their bit patterns.
      {binary(C::kSub, 64, false, un64, um64), -8, 1, static_cast<int64_t>(~uint64_t{0} - 8)},
      {binary(C::kAdd, 64, false, un64, um64), -8, 1, static_cast<int64_t>(~uint64_t{0} - 6)},
      {binary(C::kAdd, 64, false, un64, um64), -1, 1, std::nullopt},
      {binary(C::kSub, 64, false, un64, um64), 0, 1, std::nullopt},
      {binary(C::kMul, 64, false, un64, um64), int64_t{1} << 32, int64_t{1} << 32, std::nullopt},
      {binary(C::kMul, 64, false, un64, um64), int64_t{1} << 32, (int64_t{1} << 32) - 1,
       static_cast<int64_t>((uint64_t{1} << 32) * ((uint64_t{1} << 32) - 1))},
      {binary(C::kDiv, 64, false, un64, um64), -8, 2, static_cast<int64_t>((~uint64_t{0} - 7) / 2)},
      {binary(C::kMul, 64, true, n64, m64), int64_t{1} << 32, int64_t{1} << 31, std::nullopt},
      {binary(C::kMul, 64, true, n64, m64), -(int64_t{1} << 32), int64_t{1} << 31,
       std::numeric_limits<int64_t>::min()},
      {binary(C::kAdd, 64, true, n64, m64), int64_t{1} << 62, int64_t{1} << 62, std::nullopt},
  };
  for (const Case& c : cases) {
    const int64_t args[] = {c.n, c.m};
    StatusOr<int64_t> v = Evaluate(c.e, args);
    if (c.value) {
      ASSERT_TRUE(v.ok()) << c.n << ", " << c.m << ": " << v.status();
      EXPECT_EQ(*v, *c.value) << c.n << ", " << c.m;
    } else {
      ASSERT_FALSE(v.ok()) << c.n << ", " << c.m << " gave " << *v;
      EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(v.status().message().find("`a op b` overflows"), std::string::npos) << v.status();
      EXPECT_NE(v.status().message().find("where the kernel's arithmetic would wrap"),
                std::string::npos)
          << v.status();
    }
  }
}

TEST(ModuleFormatTest, EmptyModuleRoundTrips) {
  StatusOr<CompiledModule> loaded = DeserializeModule(SerializeModule(CompiledModule{}));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(loaded->functions.empty());
}

TEST(ModuleFormatTest, HeaderLayoutIsFixed) {
  std::string bytes = SerializeModule(SampleModule());
  ASSERT_GE(bytes.size(), kModuleHeaderBytes);
  EXPECT_EQ(static_cast<uint8_t>(bytes[8]), kModuleFormatVersion);  // little-endian u32
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= uint64_t{static_cast<uint8_t>(bytes[16 + i])} << (8 * i);
  EXPECT_EQ(length, bytes.size() - kModuleHeaderBytes);
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cull);
}

TEST(ModuleFormatTest, WrongMagicIsRejected) {
  std::string bytes = SerializeModule(SampleModule());
  bytes[0] = 'X';
  ExpectDataLoss(DeserializeModule(bytes), "bad magic");
  ExpectDataLoss(DeserializeModule("PK\x03\x04"), "bad magic");
}

TEST(ModuleFormatTest, OtherVersionIsRejected) {
  std::string bytes = SerializeModule(SampleModule());
  // A file of an earlier format (version 1, before strides; 2, before typed
  // metadata; 3, before the loop-termination flag; 4, before the array
  // elements' lanes) is refused with both versions named.
  for (uint8_t old : {1, 2, 3, 4}) {
    bytes[8] = static_cast<char>(old);
    ExpectDataLoss(DeserializeModule(bytes), StrCat("format version ", int{old}, ", expected 5"));
  }
}

TEST(ModuleFormatTest, TruncatedFileIsRejected) {
  std::string bytes = SerializeModule(SampleModule());
  ExpectDataLoss(DeserializeModule(bytes.substr(0, 20)), "truncated module");
  ExpectDataLoss(DeserializeModule(bytes.substr(0, bytes.size() - 1)), "truncated module");
  ExpectDataLoss(DeserializeModule(""), "truncated module");
}

TEST(ModuleFormatTest, CorruptPayloadIsRejected) {
  std::string bytes = SerializeModule(SampleModule());
  bytes[bytes.size() / 2] ^= 0x40;
  ExpectDataLoss(DeserializeModule(bytes), "checksum mismatch");
}

TEST(ModuleFormatTest, TrailingBytesAreRejected) {
  std::string bytes = SerializeModule(SampleModule()) + "x";
  ExpectDataLoss(DeserializeModule(bytes), "past the declared payload length");
}

TEST(ModuleFormatTest, MalformedPayloadWithValidChecksumIsRejected) {
  // A payload claiming a huge function count: checksum valid, contents not.
  std::string payload = "\xff\xff\xff\x7f";
  std::string bytes = SerializeModule(CompiledModule{}).substr(0, kModuleHeaderBytes);
  uint64_t checksum = Fnv1a64(payload);
  for (int i = 0; i < 8; ++i) {
    bytes[16 + i] = static_cast<char>(i == 0 ? payload.size() : 0);
    bytes[24 + i] = static_cast<char>(checksum >> (8 * i));
  }
  ExpectDataLoss(DeserializeModule(bytes + payload), "exceeds the remaining payload");
}

// Fields the writer never writes so: refused, not read as something else.
TEST(ModuleFormatTest, ExtentOpFieldsAreChecked) {
  CompiledModule module = SampleModule();
  // A value on an op that takes none.
  CompiledModule valued = module;
  valued.functions[0].metadata.num_blocks_x.ops[2].value = 5;   // the add
  valued.functions[0].metadata.num_blocks_x.ops[4].value = -1;  // the division
  ExpectDataLoss(DeserializeModule(SerializeModule(valued)),
                 "op 2 (code 2) carries a value (5); only constants and parameters do");
  valued.functions[0].metadata.num_blocks_x.ops[2].value = 0;
  ExpectDataLoss(DeserializeModule(SerializeModule(valued)),
                 "op 4 (code 5) carries a value (-1); only constants and parameters do");
  // A signedness flag other than 0 or 1: the division's (code 5, 32 bits,
  // signed, value 0), rewritten with the checksum fixed.
  std::string bytes = SerializeModule(module);
  const std::string div_op("\x05\x20\x01\0\0\0\0\0\0\0\0", 11);
  const size_t at = bytes.find(div_op, kModuleHeaderBytes);
  ASSERT_NE(at, std::string::npos);
  ASSERT_EQ(bytes.find(div_op, at + 1), std::string::npos);
  bytes[at + 2] = 2;
  const uint64_t checksum = Fnv1a64(std::string_view(bytes).substr(kModuleHeaderBytes));
  for (int i = 0; i < 8; ++i) bytes[24 + i] = static_cast<char>(checksum >> (8 * i));
  ExpectDataLoss(DeserializeModule(bytes), "op 4 has signedness flag 2; expected 0 or 1");
}

}  // namespace
}  // namespace kiln::codegen
