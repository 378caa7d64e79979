// Fill, update, copy, upload and download at every alignment the API allows.
#include "kiln/hal/cts/cts_util.h"

namespace kiln::hal::cts {
namespace {

struct FillCase {
  size_t pattern_length;
  uint64_t offset;
  uint64_t length;
};

std::string FillCaseName(const ::testing::TestParamInfo<FillCase>& info) {
  return StrCat("Pattern", info.param.pattern_length, "_Offset", info.param.offset, "_Length",
                info.param.length);
}

class FillTest : public HalTest, public ::testing::WithParamInterface<FillCase> {};

TEST_P(FillTest, WritesThePatternAndNothingElse) {
  const FillCase c = GetParam();
  const uint64_t size = 4096 + 512;
  auto buffer = NewBuffer(size);
  std::vector<uint8_t> expect = Poison(buffer);
  const uint32_t pattern = 0xA1B2C3D4u ^ static_cast<uint32_t>(rng_());
  uint8_t pattern_bytes[4];
  std::memcpy(pattern_bytes, &pattern, 4);
  auto cb = NewCommandBuffer();
  KILN_ASSERT_OK(cb->FillBuffer(buffer, c.offset, c.length, &pattern, c.pattern_length));
  Run(*cb);
  for (uint64_t i = 0; i < c.length; ++i) {
    expect[c.offset + i] = pattern_bytes[i % c.pattern_length];
  }
  auto got = Read(buffer);
  for (uint64_t i = 0; i < size; ++i) {
    ASSERT_EQ(got[i], expect[i]) << "byte " << i;
  }
}

std::vector<FillCase> FillCases() {
  std::vector<FillCase> cases;
  for (size_t p : {1, 2, 4}) {
    for (uint64_t offset : {0, 1, 2, 3, 4, 6, 8, 13, 260}) {
      for (uint64_t length : {1, 2, 3, 4, 5, 8, 12, 255, 1000, 4096}) {
        if (offset % p || length % p) continue;
        cases.push_back({p, offset, length});
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllWidths, FillTest, ::testing::ValuesIn(FillCases()), FillCaseName);

TEST_F(HalTest, FillWithZerosTakesTheNativeClear) {
  auto buffer = NewBuffer(1024);
  auto expect = Poison(buffer);
  const uint8_t zero = 0;
  auto cb = NewCommandBuffer();
  KILN_ASSERT_OK(cb->FillBuffer(buffer, 256, 512, &zero, 1));
  Run(*cb);
  std::fill(expect.begin() + 256, expect.begin() + 768, 0);
  EXPECT_EQ(Read(buffer), expect);
}

TEST_F(HalTest, FillRejectsBadArgumentsAndRecordsNothing) {
  auto buffer = NewBuffer(64);
  const uint32_t pattern = 7;
  auto cb = NewCommandBuffer();
  EXPECT_EQ(cb->FillBuffer(buffer, 0, 8, &pattern, 3).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cb->FillBuffer(buffer, 1, 4, &pattern, 2).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cb->FillBuffer(buffer, 0, 6, &pattern, 4).code(), StatusCode::kInvalidArgument);
  Status s = cb->FillBuffer(buffer, 60, 8, &pattern, 4);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("outside the buffer of 64 bytes"), std::string::npos) << s;
  EXPECT_EQ(cb->stats().dispatches, 0u);
}

struct CopyCase {
  uint64_t src_offset;
  uint64_t dst_offset;
  uint64_t length;
};

std::string CopyCaseName(const ::testing::TestParamInfo<CopyCase>& info) {
  return StrCat("Src", info.param.src_offset, "_Dst", info.param.dst_offset, "_Length",
                info.param.length);
}

class CopyTest : public HalTest, public ::testing::WithParamInterface<CopyCase> {};

TEST_P(CopyTest, CopiesExactlyTheRange) {
  const CopyCase c = GetParam();
  const uint64_t size = 2048 + 64;
  auto src = NewBuffer(size), dst = NewBuffer(size);
  auto src_bytes = Poison(src);
  auto expect = Poison(dst);
  auto cb = NewCommandBuffer();
  KILN_ASSERT_OK(cb->CopyBuffer(src, c.src_offset, dst, c.dst_offset, c.length));
  Run(*cb);
  std::memcpy(expect.data() + c.dst_offset, src_bytes.data() + c.src_offset, c.length);
  auto got = Read(dst);
  for (uint64_t i = 0; i < size; ++i) ASSERT_EQ(got[i], expect[i]) << "byte " << i;
  EXPECT_EQ(Read(src), src_bytes) << "the source changed";
}

std::vector<CopyCase> CopyCases() {
  std::vector<CopyCase> cases;
  for (uint64_t s : {0, 1, 2, 3, 4, 7, 256}) {
    for (uint64_t d : {0, 1, 2, 3, 4, 5, 300}) {
      for (uint64_t n : {1, 3, 4, 6, 16, 17, 1024}) cases.push_back({s, d, n});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllAlignments, CopyTest, ::testing::ValuesIn(CopyCases()), CopyCaseName);

TEST_F(HalTest, CopyRejectsBadArguments) {
  auto a = NewBuffer(64), b = NewBuffer(32);
  auto cb = NewCommandBuffer();
  Status s = cb->CopyBuffer(a, 0, b, 0, 64);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("target range [0, 64) is outside the buffer of 32 bytes"),
            std::string::npos)
      << s;
  s = cb->CopyBuffer(a, 60, b, 0, 8);
  EXPECT_NE(s.message().find("source range"), std::string::npos) << s;
  EXPECT_EQ(cb->CopyBuffer(a, 0, a, 32, 8).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cb->CopyBuffer(a, 0, nullptr, 0, 8).code(), StatusCode::kInvalidArgument);
}

struct UpdateCase {
  uint64_t offset;
  uint64_t length;
};

class UpdateTest : public HalTest, public ::testing::WithParamInterface<UpdateCase> {};

TEST_P(UpdateTest, UpdatesExactlyTheRange) {
  const UpdateCase c = GetParam();
  auto buffer = NewBuffer(1024);
  auto expect = Poison(buffer);
  auto data = RandomBytes(c.length);
  auto cb = NewCommandBuffer();
  KILN_ASSERT_OK(cb->UpdateBuffer(buffer, c.offset, data));
  Run(*cb);
  std::memcpy(expect.data() + c.offset, data.data(), c.length);
  EXPECT_EQ(Read(buffer), expect);
}

INSTANTIATE_TEST_SUITE_P(Alignments, UpdateTest,
                         ::testing::Values(UpdateCase{0, 4}, UpdateCase{8, 64}, UpdateCase{1, 1},
                                           UpdateCase{3, 5}, UpdateCase{2, 10}, UpdateCase{4, 7},
                                           UpdateCase{1021, 3}),
                         [](const auto& info) {
                           return StrCat("Offset", info.param.offset, "_Length", info.param.length);
                         });

TEST_F(HalTest, UploadAndDownloadAtAnyOffset) {
  auto buffer = NewBuffer(999);
  auto expect = Poison(buffer);
  for (uint64_t offset : {0, 1, 2, 3, 5, 500}) {
    for (uint64_t length : {1, 2, 3, 7, 100}) {
      auto data = RandomBytes(length);
      KILN_ASSERT_OK(Upload(*device_, buffer, offset, data));
      std::memcpy(expect.data() + offset, data.data(), length);
      std::vector<uint8_t> part(length);
      KILN_ASSERT_OK(Download(*device_, buffer, offset, part));
      ASSERT_EQ(part, data) << "offset " << offset << " length " << length;
    }
  }
  EXPECT_EQ(Read(buffer), expect);
  std::vector<uint8_t> too_much(10);
  EXPECT_EQ(Download(*device_, buffer, 995, too_much).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Upload(*device_, buffer, 998, too_much).code(), StatusCode::kInvalidArgument);
}

TEST_F(HalTest, LongCopiesAndClearsGoInPieces) {
  // A device whose copies and clears go as 12-byte pieces: every transfer
  // below spans many, ending in a shorter piece, and must land exactly as
  // one command would.
  DeviceOptions options = Options();
  options.copy_piece_bytes = 12;
  auto small = Device::Create(options);
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  device_ = *small;
  EXPECT_EQ(device_->copy_piece_bytes(), 12u);
  const uint64_t size = 1000;
  auto src = NewBuffer(size), dst = NewBuffer(size);
  auto data = RandomBytes(size);
  KILN_ASSERT_OK(Upload(*device_, src, 0, data));  // through a staging copy
  std::vector<uint8_t> back(size);
  KILN_ASSERT_OK(Download(*device_, src, 0, back));
  ASSERT_EQ(back, data);
  auto expect = Poison(dst);
  const uint8_t zero = 0;
  auto cb = NewCommandBuffer();
  KILN_ASSERT_OK(cb->CopyBuffer(src, 4, dst, 16, 904));
  KILN_ASSERT_OK(cb->FillBuffer(dst, 40, 100, &zero, 1));
  Run(*cb);
  std::memcpy(expect.data() + 16, data.data() + 4, 904);
  std::fill(expect.begin() + 40, expect.begin() + 140, 0);
  auto got = Read(dst);
  for (uint64_t i = 0; i < size; ++i) ASSERT_EQ(got[i], expect[i]) << "byte " << i;
  for (uint64_t bad : {0, 2, 13}) {
    options.copy_piece_bytes = bad;
    auto refused = Device::Create(options);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find("copy_piece_bytes is " + std::to_string(bad)),
              std::string::npos)
        << refused.status();
  }
  options.copy_piece_bytes = 16;
  for (uint32_t bad : {0u, 16u, 4095u, 4097u, 8000u}) {
    options.staging_capacity = bad;
    auto refused = Device::Create(options);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find("staging_capacity is " + std::to_string(bad) +
                                              " bytes; expected a multiple of 256, at least 4096"),
              std::string::npos)
        << refused.status();
  }
}

TEST_F(HalTest, AllocatorPoolsFreedBuffersBySizeClass) {
  EXPECT_EQ(BufferAllocator::SizeClass(1), 256u);
  EXPECT_EQ(BufferAllocator::SizeClass(256), 256u);
  EXPECT_EQ(BufferAllocator::SizeClass(257), 512u);
  EXPECT_EQ(BufferAllocator::SizeClass(5000), 5120u);
  EXPECT_EQ(BufferAllocator::SizeClass(1 << 20), 1u << 20);
  EXPECT_EQ(BufferAllocator::SizeClass((1 << 20) + 1), (1u << 20) + (1u << 18));
  auto before = device_->allocator().stats();
  WGPUBuffer first_handle;
  {
    auto b = NewBuffer(3000);
    first_handle = b->handle();
    EXPECT_GE(b->allocated_size(), 3000u);
  }
  auto mid = device_->allocator().stats();
  EXPECT_EQ(mid.live_buffers, before.live_buffers);
  EXPECT_GE(mid.pooled_buffers, 1u);
  auto again = NewBuffer(2900);  // same size class
  EXPECT_EQ(again->handle(), first_handle);
  auto after = device_->allocator().stats();
  EXPECT_EQ(after.pool_hits, mid.pool_hits + 1);
  // Pooled memory is reused as is: still a working buffer.
  auto bytes = Poison(again);
  EXPECT_EQ(Read(again), bytes);
  device_->allocator().Trim();
  EXPECT_EQ(device_->allocator().stats().pooled_bytes, 0u);
}

TEST_F(HalTest, ReusedBufferTakesItsNewSizeWithinItsAllocation) {
  auto b = NewBuffer(5000);
  EXPECT_EQ(device_->allocator().AllocatedSize(5000), b->allocated_size());
  EXPECT_EQ(b->allocated_size(), 5120u);
  KILN_ASSERT_OK(BufferAllocator::Reuse(*b, 5120));
  EXPECT_EQ(b->size(), 5120u);
  // Its whole new size is usable: written and read back through it.
  auto bytes = Poison(b);
  EXPECT_EQ(bytes.size(), 5120u);
  EXPECT_EQ(Read(b), bytes);
  for (uint64_t bad : {uint64_t{0}, uint64_t{5121}}) {
    Status refused = BufferAllocator::Reuse(*b, bad);
    EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(refused.message().find("a buffer of 5120 bytes cannot be reused as one of " +
                                     std::to_string(bad) + " bytes"),
              std::string::npos)
        << refused;
  }
  EXPECT_EQ(b->size(), 5120u);
  KILN_ASSERT_OK(BufferAllocator::Reuse(*b, 4));
  EXPECT_EQ(b->size(), 4u);
  // A size past the device's limit stays within it, in whole words.
  const uint64_t max = device_->limits().max_buffer_size;
  EXPECT_LE(device_->allocator().AllocatedSize(max / 4 * 4), max);
  EXPECT_EQ(device_->allocator().AllocatedSize(max / 4 * 4) % 4, 0u);
}

TEST_F(HalTest, KeptBytesShareThePoolCapacity) {
  BufferAllocator& a = device_->allocator();
  a.Trim();
  const uint64_t cap = a.pool_capacity();
  EXPECT_TRUE(a.RoomToKeep(cap));
  EXPECT_FALSE(a.RoomToKeep(cap + 1));
  a.CountKept(static_cast<int64_t>(cap - 4096));
  EXPECT_EQ(a.stats().kept_bytes, cap - 4096);
  EXPECT_TRUE(a.RoomToKeep(4096));
  EXPECT_FALSE(a.RoomToKeep(4097));
  { auto b = NewBuffer(8192); }  // freed with no room left: destroyed, not pooled
  EXPECT_EQ(a.stats().pooled_bytes, 0u);
  a.CountKept(-static_cast<int64_t>(cap - 4096));
  EXPECT_EQ(a.stats().kept_bytes, 0u);
  { auto b = NewBuffer(8192); }
  EXPECT_EQ(a.stats().pooled_bytes, 8192u);
  a.Trim();
}

// A device made with `options`, its pool's capacity `fixed`, or automatic
// from a floor of 64 KiB (whatever $KILN_BUFFER_POOL_MB says).
std::shared_ptr<Device> DeviceWithPool(DeviceOptions options, std::optional<uint64_t> fixed) {
  ScopedEnv env("KILN_BUFFER_POOL_MB", nullptr);
  options.buffer_pool_capacity = fixed;
  options.buffer_pool_floor = 64 << 10;
  auto made = Device::Create(options);
  EXPECT_TRUE(made.ok()) << made.status();
  return made.ok() ? *made : nullptr;
}

// A step of a loop: eight buffers of `size` bytes live at once, then freed.
void EightAtOnce(BufferAllocator& a, uint64_t size) {
  std::vector<BufferRef> live;
  for (int i = 0; i < 8; ++i) {
    auto b = a.Allocate(size);
    ASSERT_TRUE(b.ok()) << b.status();
    live.push_back(*b);
  }
}

// By default the pool keeps as many bytes as were ever live at once: a
// loop's next step finds every buffer its last step freed. A fixed capacity
// keeps no more than it says.
TEST_F(HalTest, AnAutomaticPoolKeepsWhatWasLiveAtOnce) {
  for (const std::optional<uint64_t> fixed :
       {std::optional<uint64_t>(), std::optional<uint64_t>(64 << 10)}) {
    auto device = DeviceWithPool(Options(), fixed);
    ASSERT_TRUE(device);
    BufferAllocator& a = device->allocator();
    EXPECT_EQ(a.pool_capacity(), 64u << 10);
    EightAtOnce(a, 32 << 10);
    const AllocatorStats first = a.stats();
    EXPECT_EQ(first.pool_misses, 8u);
    EXPECT_EQ(a.pool_capacity(), fixed ? *fixed : 256u << 10);
    EXPECT_EQ(a.stats().pooled_bytes, fixed ? *fixed : 256u << 10);
    EightAtOnce(a, 32 << 10);
    const AllocatorStats second = a.stats();
    EXPECT_EQ(second.pool_misses - first.pool_misses, fixed ? 6u : 0u);
    EXPECT_EQ(second.peak_live_bytes, 256u << 10);
  }
}

// A program that moves on to other sizes: the buffers it freed last take
// the place of those pooled longest, so its new steps make none anew either.
TEST_F(HalTest, FreedBuffersTakeThePlaceOfThosePooledLongest) {
  for (const std::optional<uint64_t> fixed :
       {std::optional<uint64_t>(), std::optional<uint64_t>(256 << 10)}) {
    auto device = DeviceWithPool(Options(), fixed);
    ASSERT_TRUE(device);
    BufferAllocator& a = device->allocator();
    EightAtOnce(a, 32 << 10);  // 256 KiB, then all pooled
    ASSERT_EQ(a.stats().pooled_bytes, 256u << 10);
    EightAtOnce(a, 24 << 10);  // 192 KiB of another class: six of the first make way
    AllocatorStats s = a.stats();
    EXPECT_EQ(s.pool_evictions, 6u);
    EXPECT_EQ(s.pooled_bytes, (192u + 64u) << 10);
    EightAtOnce(a, 24 << 10);
    EXPECT_EQ(a.stats().pool_misses, s.pool_misses);
    // Kept bytes are not the pool's to give: a freed buffer with no room
    // beside them is destroyed, and the idle ones stay.
    a.CountKept(static_cast<int64_t>(a.pool_capacity() - (8 << 10)));
    { auto b = *a.Allocate(16 << 10); }
    EXPECT_EQ(a.stats().pool_evictions, 6u);
    EXPECT_EQ(a.stats().pooled_bytes, (192u + 64u) << 10);
    a.CountKept(-static_cast<int64_t>(a.pool_capacity() - (8 << 10)));
  }
}

// A device out of memory: the pool's idle buffers are destroyed and the
// allocation tried once more; only where that fails too is it an error.
TEST_F(HalTest, OutOfMemoryEmptiesThePoolAndTriesAgain) {
  device_ = DeviceWithPool(Options(), std::nullopt);  // the test's own
  ASSERT_TRUE(device_);
  BufferAllocator& a = device_->allocator();
  { auto idle = a.Allocate(4096); }
  ASSERT_EQ(a.stats().pooled_bytes, 4096u);
  const AllocatorStats before = a.stats();
  a.FailCreationsForTesting(1);
  auto made = a.Allocate(10000);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(a.stats().pooled_bytes, 0u);
  EXPECT_EQ(a.stats().out_of_memory_trims, before.out_of_memory_trims + 1);
  // Still a working buffer.
  auto bytes = Poison(*made);
  EXPECT_EQ(Read(*made), bytes);
  made->reset();
  ASSERT_GT(a.stats().pooled_bytes, 0u);
  a.FailCreationsForTesting(2);
  auto refused = a.Allocate(20000);
  EXPECT_TRUE(HasError(refused, StatusCode::kOutOfMemory,
                       "allocating a buffer of 20000 bytes: out of memory"));
  EXPECT_EQ(a.stats().pooled_bytes, 0u);
  a.FailCreationsForTesting(1);  // nothing pooled: no second try
  EXPECT_TRUE(HasError(a.Allocate(4096), StatusCode::kOutOfMemory,
                       "allocating a buffer of 4096 bytes: out of memory"));
  EXPECT_EQ(a.stats().out_of_memory_trims, before.out_of_memory_trims + 1);
  KILN_ASSERT_OK(a.Allocate(4096).status());
}

TEST_F(HalTest, ZeroSizeAndTooLargeBuffersAreClearErrors) {
  auto zero = device_->allocator().Allocate(0);
  EXPECT_EQ(zero.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(zero.status().message().find("greater than zero"), std::string::npos);
  const uint64_t max = device_->limits().max_buffer_size;
  auto huge = device_->allocator().Allocate(max + 1);
  EXPECT_EQ(huge.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(huge.status().message().find("maxBufferSize"), std::string::npos) << huge.status();
}

}  // namespace
}  // namespace kiln::hal::cts
