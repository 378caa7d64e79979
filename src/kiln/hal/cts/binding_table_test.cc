// Binding tables: reusable command buffers recorded against slots and
// replayed with other buffers, and every wrong table refused at submit,
// before anything runs.
#include <cmath>

#include "kiln/hal/cts/cts_util.h"
#include "kiln/hal/queue.h"

namespace kiln::hal::cts {
namespace {

class BindingTableTest : public AxpbTest {
 protected:
  // y = x * 3 + 1 over n elements, x and y from slots 0 and 1, and a second
  // dispatch z = y * -2 + 0.5 from slots 1 and 2.
  std::unique_ptr<CommandBuffer> RecordChain(uint32_t n) {
    auto cb = NewCommandBuffer(CommandBufferMode::kReusable);
    BufferBinding first[] = {BufferBinding::Slot(0), BufferBinding::Slot(1, 0, n * 4)};
    AxpbConstants c1{3.0f, 1.0f, n, 0};
    EXPECT_TRUE(cb->Dispatch(axpb_, 0, first, BytesOf(c1), (n + 63) / 64).ok());
    BufferBinding second[] = {BufferBinding::Slot(1, 0, n * 4), BufferBinding::Slot(2)};
    AxpbConstants c2{-2.0f, 0.5f, n, 0};
    EXPECT_TRUE(cb->Dispatch(axpb_, 0, second, BytesOf(c2), (n + 63) / 64).ok());
    EXPECT_TRUE(cb->End().ok());
    return cb;
  }
};

TEST_F(BindingTableTest, ReplaysOverTheBuffersOfEachTable) {
  const uint32_t n = 777;
  auto cb = RecordChain(n);
  EXPECT_EQ(cb->binding_table_size(), 3u);
  for (int round = 0; round < 3; ++round) {
    auto xs = RandomFloats(n);
    BufferRef x = NewBuffer(n * 4), y = NewBuffer(n * 4 + 64), z = NewBuffer(n * 4);
    Write(x, Bytes(xs));
    Poison(y);
    Poison(z);
    BufferRef table[] = {x, y, z};
    KILN_ASSERT_OK(SubmitAndWait(*device_, *cb, kInfinite, table));
    auto ys = As<float>(Read(y));
    auto zs = As<float>(Read(z));
    for (uint32_t i = 0; i < n; ++i) {
      const float expect_y = xs[i] * 3.0f + 1.0f;
      ASSERT_NEAR(ys[i], expect_y, 1e-5f * (std::fabs(expect_y) + 1)) << "round " << round;
      const float expect_z = ys[i] * -2.0f + 0.5f;
      ASSERT_NEAR(zs[i], expect_z, 1e-5f * (std::fabs(expect_z) + 1)) << "round " << round;
    }
  }
}

TEST_F(BindingTableTest, SlotsAndBuffersMixInOneDispatch) {
  const uint32_t n = 100;
  auto xs = RandomFloats(n);
  BufferRef x = NewBuffer(n * 4);
  Write(x, Bytes(xs));
  auto cb = NewCommandBuffer(CommandBufferMode::kReusable);
  BufferBinding bindings[] = {{x}, BufferBinding::Slot(0)};
  AxpbConstants c{0.5f, -4.0f, n, 0};
  KILN_ASSERT_OK(cb->Dispatch(axpb_, 0, bindings, BytesOf(c), 2));
  KILN_ASSERT_OK(cb->End());
  for (int round = 0; round < 2; ++round) {
    BufferRef y = NewBuffer(n * 4);
    Poison(y);
    BufferRef table[] = {y};
    KILN_ASSERT_OK(SubmitAndWait(*device_, *cb, kInfinite, table));
    auto ys = As<float>(Read(y));
    for (uint32_t i = 0; i < n; ++i) ASSERT_NEAR(ys[i], xs[i] * 0.5f - 4.0f, 1e-5f) << i;
  }
}

// Each wrong table is refused before anything runs: the output keeps its
// poison.
TEST_F(BindingTableTest, WrongTablesAreRefusedBeforeAnythingRuns) {
  const uint32_t n = 64;
  auto cb = RecordChain(n);
  BufferRef x = NewBuffer(n * 4), y = NewBuffer(n * 4), z = NewBuffer(n * 4);
  auto poison = Poison(z);
  auto expect_refused = [&](std::span<const BufferRef> table, std::string_view fragment) {
    EXPECT_TRUE(HasError(SubmitAndWait(*device_, *cb, kInfinite, table),
                         StatusCode::kInvalidArgument, fragment));
    EXPECT_EQ(Read(z), poison) << "a refused submit ran work";
  };
  {
    BufferRef table[] = {x, y};
    expect_refused(table, "binding table of 3 slot(s); submitted with 2");
  }
  expect_refused({}, "binding table of 3 slot(s); submitted with 0");
  {
    BufferRef table[] = {x, nullptr, z};
    expect_refused(table, "slot 1 has no buffer");
  }
  {
    BufferRef small = NewBuffer(n * 4 - 16);
    BufferRef table[] = {x, small, z};
    expect_refused(table, "slot 1 holds 240 bytes; its bindings need 256");
  }
  {
    BufferRef table[] = {x, y, y};  // slot 1 read and slot 2 written in one dispatch
    expect_refused(table,
                   "binding 0 (binding-table slot 1) and binding 1 (binding-table slot 2) of one "
                   "dispatch get the same buffer; a written buffer cannot be read through another "
                   "binding");
  }
  {
    BufferRef mapped = NewBuffer(n * 4, WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst);
    BufferRef table[] = {x, y, mapped};
    expect_refused(table, "storage usage");
  }
  // Without slots, a table is an error too.
  auto plain = NewCommandBuffer(CommandBufferMode::kReusable);
  KILN_ASSERT_OK(plain->End());
  BufferRef one[] = {x};
  Status s = SubmitAndWait(*device_, *plain, kInfinite, one);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
}

// A binding to the end of a slot's buffer is refused at submit when that
// range exceeds maxStorageBufferBindingSize.
TEST_F(BindingTableTest, WholeBufferSlotsLargerThanABindingAreRefused) {
  const uint64_t max = device_->limits().max_storage_buffer_binding_size;
  if (max > (256ull << 20)) {
    GTEST_SKIP() << "maxStorageBufferBindingSize is " << max
                 << " bytes here; a buffer larger than that is too big for this test";
  }
  auto cb = NewCommandBuffer(CommandBufferMode::kReusable);
  BufferRef x = NewBuffer(256);
  BufferBinding bindings[] = {{x}, BufferBinding::Slot(0)};
  AxpbConstants c{1, 0, 1, 0};
  KILN_ASSERT_OK(cb->Dispatch(axpb_, 0, bindings, BytesOf(c), 1));
  KILN_ASSERT_OK(cb->End());
  BufferRef big = NewBuffer(max + 256);
  BufferRef table[] = {big};
  EXPECT_TRUE(HasError(SubmitAndWait(*device_, *cb, kInfinite, table),
                       StatusCode::kInvalidArgument, "exceeds maxStorageBufferBindingSize"));
}

TEST_F(BindingTableTest, SlotBindingsAreValidatedWhenRecorded) {
  auto cb = NewCommandBuffer(CommandBufferMode::kReusable);
  BufferRef x = NewBuffer(256);
  const uint64_t align = device_->limits().min_storage_buffer_offset_alignment;
  AxpbConstants c{1, 0, 1, 0};
  {
    BufferBinding bindings[] = {{x}, BufferBinding::Slot(0, align / 2)};
    EXPECT_TRUE(HasError(cb->Dispatch(axpb_, 0, bindings, BytesOf(c), 1),
                         StatusCode::kInvalidArgument, "minStorageBufferOffsetAlignment"));
  }
  {
    BufferBinding both{x, 0, kWholeBuffer, 0};
    BufferBinding bindings[] = {{x}, both};
    EXPECT_TRUE(HasError(cb->Dispatch(axpb_, 0, bindings, BytesOf(c), 1),
                         StatusCode::kInvalidArgument, "both a buffer and binding-table slot"));
  }
  {
    BufferBinding bindings[] = {{x}, BufferBinding::Slot(kMaxBindingTableSlot + 1)};
    EXPECT_TRUE(HasError(cb->Dispatch(axpb_, 0, bindings, BytesOf(c), 1),
                         StatusCode::kInvalidArgument,
                         "binding-table slot 65536 is out of range: slots are 0 to 65535"));
    bindings[1] = BufferBinding::Slot(0xFFFFFFF0u);
    EXPECT_TRUE(HasError(cb->Dispatch(axpb_, 0, bindings, BytesOf(c), 1),
                         StatusCode::kInvalidArgument, "is out of range"));
  }
  EXPECT_EQ(cb->binding_table_size(), 0u) << "a refused dispatch recorded slot needs";
}

// WebGPU's aliasing rule holds however a dispatch's buffers are given: a
// buffer written by the dispatch is bound there by no read-only binding and
// by no other written binding whose range meets its own. Bindings given
// directly are refused when recorded; slots, when a table is submitted,
// before anything runs.
TEST_F(BindingTableTest, AWrittenBufferIsBoundOnceHoweverItIsGiven) {
  auto two = LoadExecutable(
      *device_, ExecutableSpec{
                    "two_outputs",
                    R"(
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<storage, read_write> z: array<f32>;

@compute @workgroup_size(64)
fn two_outputs(@builtin(global_invocation_id) gid: vec3<u32>) {
  y[gid.x] = x[gid.x];
  z[gid.x] = x[gid.x] * 2.0;
}
)",
                    {{"two_outputs",
                      {BindingKind::kReadOnlyStorage, BindingKind::kStorage, BindingKind::kStorage},
                      0}}});
  ASSERT_TRUE(two.ok()) << two.status();
  const uint32_t n = 64;
  // The second written range starts at the first aligned offset past the first.
  const uint64_t align = device_->limits().min_storage_buffer_offset_alignment;
  const uint64_t second = (n * 4 + align - 1) / align * align;
  auto xs = RandomFloats(n);
  BufferRef x = NewBuffer(n * 4);
  Write(x, Bytes(xs));
  // Directly: written ranges of one buffer that do not meet run; ranges that
  // meet are refused.
  BufferRef y = NewBuffer(second + n * 4);
  Poison(y);
  auto cb = NewCommandBuffer();
  BufferBinding overlapping[] = {{x}, {y, 0, n * 4}, {y, 0, n * 4}};
  EXPECT_TRUE(HasError(cb->Dispatch(*two, 0, overlapping, {}, 1), StatusCode::kInvalidArgument,
                       "binding 1 (read-write storage): the buffer is also bound written at "
                       "binding 2; written ranges of one buffer may not overlap"));
  BufferBinding apart[] = {{x}, {y, 0, n * 4}, {y, second, n * 4}};
  KILN_ASSERT_OK(cb->Dispatch(*two, 0, apart, {}, 1));
  KILN_ASSERT_OK(cb->End());
  KILN_ASSERT_OK(SubmitAndWait(*device_, *cb, kInfinite, {}));
  auto ys = As<float>(Read(y));
  for (uint32_t i = 0; i < n; ++i) {
    ASSERT_EQ(ys[i], xs[i]) << i;
    ASSERT_EQ(ys[second / 4 + i], xs[i] * 2.0f) << i;
  }
  // Through slots: the same buffer in two written slots, or in a written
  // slot and a read-only binding, is refused at submit; the outputs keep
  // their poison.
  auto slots = NewCommandBuffer(CommandBufferMode::kReusable);
  BufferBinding two_slots[] = {{x}, BufferBinding::Slot(0), BufferBinding::Slot(1)};
  KILN_ASSERT_OK(slots->Dispatch(*two, 0, two_slots, {}, 1));
  KILN_ASSERT_OK(slots->End());
  BufferRef z = NewBuffer(n * 4), w = NewBuffer(n * 4);
  const auto z_poison = Poison(z);
  {
    BufferRef table[] = {z, z};
    EXPECT_TRUE(HasError(SubmitAndWait(*device_, *slots, kInfinite, table),
                         StatusCode::kInvalidArgument,
                         "binding 1 (binding-table slot 0) and binding 2 (binding-table slot 1) "
                         "of one dispatch get the same buffer; written ranges of one buffer may "
                         "not overlap"));
    EXPECT_EQ(Read(z), z_poison) << "a refused submit ran work";
  }
  {
    BufferRef table[] = {x, z};
    EXPECT_TRUE(HasError(SubmitAndWait(*device_, *slots, kInfinite, table),
                         StatusCode::kInvalidArgument,
                         "binding 0 and binding 1 (binding-table slot 0) of one dispatch get the "
                         "same buffer; a written buffer cannot be read through another binding"));
    EXPECT_EQ(Read(z), z_poison) << "a refused submit ran work";
  }
  {
    BufferRef table[] = {z, w};
    KILN_ASSERT_OK(SubmitAndWait(*device_, *slots, kInfinite, table));
    auto zs = As<float>(Read(z));
    auto ws = As<float>(Read(w));
    for (uint32_t i = 0; i < n; ++i) {
      ASSERT_EQ(zs[i], xs[i]) << i;
      ASSERT_EQ(ws[i], xs[i] * 2.0f) << i;
    }
  }
}

}  // namespace
}  // namespace kiln::hal::cts
