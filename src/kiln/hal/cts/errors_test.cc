// Bad input gets a clear error, changes nothing, and leaves the device
// working.
#include "kiln/hal/cts/cts_util.h"

namespace kiln::hal::cts {
namespace {

class ErrorTest : public HalTest {
 protected:
  // After each bad call the device must still run a kernel correctly.
  void ExpectDeviceStillWorks() {
    auto exe = LoadExecutable(*device_, AxpbSpec());
    ASSERT_TRUE(exe.ok()) << exe.status();
    const uint32_t n = 64;
    std::vector<float> xs(n);
    for (uint32_t i = 0; i < n; ++i) xs[i] = float(i);
    auto x = NewBuffer(n * 4), y = NewBuffer(n * 4);
    Write(x, Bytes(xs));
    Poison(y);
    auto cb = NewCommandBuffer();
    BufferBinding bindings[] = {{x}, {y}};
    AxpbConstants c{2.0f, 1.0f, n, 0};
    KILN_ASSERT_OK(cb->Dispatch(*exe, 0, bindings, BytesOf(c), 1));
    Run(*cb);
    auto got = As<float>(Read(y));
    for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(got[i], float(i) * 2 + 1);
  }
};

TEST_F(ErrorTest, InvalidWgslIsACompileErrorWithTheImplementationsMessage) {
  ExecutableSpec spec = AxpbSpec();
  spec.label = "broken";
  // Line 13 assigns a bool to an f32.
  spec.wgsl = R"(
struct Constants {
  scale: f32,
  bias: f32,
  n: u32,
  unused: u32,
}
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> c: Constants;
@compute @workgroup_size(64)
fn axpb(@builtin(global_invocation_id) gid: vec3<u32>) {
  y[gid.x] = true;
}
)";
  auto exe = LoadExecutable(*device_, spec);
  ASSERT_FALSE(exe.ok());
  EXPECT_EQ(exe.status().code(), StatusCode::kCompileError) << exe.status();
  const std::string m = exe.status().message();
  EXPECT_NE(m.find("broken"), std::string::npos) << m;
  // Both compilers name the offending line (Tint as "line 13:", Naga as ":13:").
  EXPECT_TRUE(m.find("13:") != std::string::npos) << m;
  std::printf("[ message  ] %s\n", m.c_str());
  ExpectDeviceStillWorks();
}

TEST_F(ErrorTest, WgslThatIsNotUtf8IsACompileError) {
  // A byte that is not UTF-8 inside a comment, then a NUL: refused before
  // the implementation sees them.
  const std::pair<std::string, int> cases[] = {{"// \xff\n", 3}, {std::string("\0", 1), 0}};
  for (const auto& [bad, at] : cases) {
    ExecutableSpec spec = AxpbSpec();
    spec.label = "bytes";
    spec.wgsl = bad + spec.wgsl;
    auto exe = LoadExecutable(*device_, spec);
    ASSERT_FALSE(exe.ok());
    EXPECT_EQ(exe.status().code(), StatusCode::kCompileError) << exe.status();
    EXPECT_NE(exe.status().message().find(
                  StrCat("the WGSL of 'bytes' is not UTF-8 text: byte ", at, " of ")),
              std::string::npos)
        << exe.status();
  }
  ExpectDeviceStillWorks();
}

TEST_F(ErrorTest, LabelsAndNamesThatAreNotUtf8AreRefused) {
  // Every string kiln hands the implementation is checked first.
  ExecutableSpec labelled = AxpbSpec();
  labelled.label = "axpb\xff";
  auto exe = LoadExecutable(*device_, labelled);
  ASSERT_FALSE(exe.ok());
  EXPECT_EQ(exe.status().code(), StatusCode::kInvalidArgument) << exe.status();
  EXPECT_NE(exe.status().message().find(
                "an executable's label is not UTF-8 text: byte 4 of 5 is malformed or NUL"),
            std::string::npos)
      << exe.status();
  ExecutableSpec entry = AxpbSpec();
  entry.entry_points[0].name = std::string("axpb\0", 5);
  exe = LoadExecutable(*device_, entry);
  ASSERT_FALSE(exe.ok());
  EXPECT_NE(exe.status().message().find("an entry point's name is not UTF-8 text: byte 4 of 5"),
            std::string::npos)
      << exe.status();
  auto named = CommandBuffer::Create(device_, CommandBufferMode::kOneShot, {"\xc0\x80"});
  ASSERT_FALSE(named.ok());
  EXPECT_NE(named.status().message().find("the label is not UTF-8 text: byte 0 of 2"),
            std::string::npos)
      << named.status();
  auto cb = NewCommandBuffer();
  Status group = cb->BeginDebugGroup("\xed\xa0\x80");
  EXPECT_EQ(group.code(), StatusCode::kInvalidArgument) << group;
  Status marker = cb->InsertDebugMarker(std::string("m\0", 2));
  EXPECT_EQ(marker.code(), StatusCode::kInvalidArgument) << marker;
  ExpectDeviceStillWorks();
}

TEST_F(ErrorTest, MissingEntryPointIsAnError) {
  ExecutableSpec spec = AxpbSpec();
  spec.entry_points[0].name = "no_such_entry";
  auto exe = LoadExecutable(*device_, spec);
  ASSERT_FALSE(exe.ok());
  EXPECT_EQ(exe.status().code(), StatusCode::kCompileError) << exe.status();
  EXPECT_NE(exe.status().message().find("no_such_entry"), std::string::npos) << exe.status();
  ExpectDeviceStillWorks();
}

TEST_F(ErrorTest, LayoutThatDisagreesWithTheShaderIsAnError) {
  ExecutableSpec spec = AxpbSpec();
  // The shader writes binding 1; the layout says read-only.
  spec.entry_points[0].bindings[1] = BindingKind::kReadOnlyStorage;
  auto exe = LoadExecutable(*device_, spec);
  ASSERT_FALSE(exe.ok());
  EXPECT_NE(exe.status().code(), StatusCode::kOk);
  ExpectDeviceStillWorks();
}

TEST_F(ErrorTest, ConstantsLargerThanTheLayoutsBlockFailToLoad) {
  // The shader's constants are 48 bytes; the layout's block is 16: reading
  // past the bound block would be invalid at dispatch (an implementation
  // may then abort or lose the device), so the pipeline is refused.
  ExecutableSpec spec = AxpbSpec();
  const std::string from = "  unused: u32,\n}";
  spec.wgsl.replace(spec.wgsl.find(from), from.size(),
                    "  unused: u32,\n  more: vec4<f32>,\n  last: vec4<f32>,\n}");
  spec.wgsl.replace(spec.wgsl.find("c.bias;"), 7, "c.bias + c.last.w;");
  auto exe = LoadExecutable(*device_, spec);
  ASSERT_FALSE(exe.ok());
  EXPECT_TRUE(HasError(exe, StatusCode::kCompileError,
                       "creating the pipeline of entry point 'axpb' of 'axpb'"));
  std::printf("[ message  ] %s\n", exe.status().ToString().c_str());
  ExpectDeviceStillWorks();
}

TEST_F(ErrorTest, MalformedLayoutsAreRejectedBeforeCompiling) {
  ExecutableSpec spec = AxpbSpec();
  spec.entry_points[0].constants_size = 12;
  EXPECT_EQ(LoadExecutable(*device_, spec).status().code(), StatusCode::kInvalidArgument);
  spec = AxpbSpec();
  spec.entry_points[0].bindings.push_back(BindingKind::kUniform);
  EXPECT_EQ(LoadExecutable(*device_, spec).status().code(), StatusCode::kInvalidArgument);
  spec = AxpbSpec();
  spec.entry_points.clear();
  EXPECT_EQ(LoadExecutable(*device_, spec).status().code(), StatusCode::kInvalidArgument);
  // A constants block no uniform binding can hold is refused at load, not
  // when a dispatch's bind group fails (which left the block staged).
  spec = AxpbSpec();
  const uint64_t max = device_->limits().max_uniform_buffer_binding_size;
  spec.entry_points[0].constants_size =
      static_cast<uint32_t>(std::min<uint64_t>((max + 16) / 16 * 16, uint64_t{0xFFFFFFF0u}));
  Status s = LoadExecutable(*device_, spec).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("exceeds maxUniformBufferBindingSize"), std::string::npos) << s;
  spec.entry_points[0].constants_size = 2u << 20;
  s = LoadExecutable(*device_, spec).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  ExpectDeviceStillWorks();
}

// A layout's minimum binding sizes: a range below one is refused when the
// dispatch is recorded (a slot's explicit range too), a layout below the
// shader's arrays fails to load, and malformed minimums are refused first.
TEST_F(ErrorTest, RangesBelowTheLayoutsMinimumBindingSizeAreRefused) {
  ExecutableSpec spec = AxpbSpec();
  spec.entry_points[0].min_binding_sizes = {16, 16, 0};
  auto exe = LoadExecutable(*device_, spec);
  ASSERT_TRUE(exe.ok()) << exe.status();
  auto x = NewBuffer(256), y = NewBuffer(256);
  AxpbConstants c{};
  auto cb = NewCommandBuffer();
  BufferBinding short_y[] = {{x}, {y, 0, 8}};
  Status s = cb->Dispatch(*exe, 0, short_y, BytesOf(c), 1);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("binding 1 (read-write storage): a range of 8 bytes, but the "
                             "shader's array takes 16 bytes an element, so the binding needs at "
                             "least 16"),
            std::string::npos)
      << s;
  BufferBinding short_slot[] = {{x}, BufferBinding::Slot(0, 0, 12)};
  EXPECT_EQ(cb->Dispatch(*exe, 0, short_slot, BytesOf(c), 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cb->stats().dispatches, 0u);
  BufferBinding enough[] = {{x, 0, 16}, {y, 0, 16}};
  EXPECT_TRUE(cb->Dispatch(*exe, 0, enough, BytesOf(c), 1).ok());
  Run(*cb);

  spec.entry_points[0].min_binding_sizes = {16, 16};
  EXPECT_EQ(LoadExecutable(*device_, spec).status().code(), StatusCode::kInvalidArgument);
  spec.entry_points[0].min_binding_sizes = {0, 0, 16};
  EXPECT_EQ(LoadExecutable(*device_, spec).status().code(), StatusCode::kInvalidArgument);
  // The shader's array elements are vec4<f32>: 16 bytes, above the layout's 4.
  ExecutableSpec vec = AxpbSpec();
  const std::string scalar = "array<f32>;\n@group(0) @binding(1)";
  vec.wgsl.replace(vec.wgsl.find(scalar), scalar.size(),
                   "array<vec4<f32>>;\n@group(0) @binding(1)");
  vec.wgsl.replace(vec.wgsl.find("x[gid.x] * c.scale"), 18, "x[gid.x].x * c.scale");
  vec.entry_points[0].min_binding_sizes = {4, 4, 0};
  EXPECT_FALSE(LoadExecutable(*device_, vec).ok());
  vec.entry_points[0].min_binding_sizes = {16, 4, 0};
  EXPECT_TRUE(LoadExecutable(*device_, vec).ok());
  ExpectDeviceStillWorks();
}

TEST_F(ErrorTest, WrongBindingCountIsAnErrorAndRecordsNothing) {
  auto exe = LoadExecutable(*device_, AxpbSpec());
  ASSERT_TRUE(exe.ok());
  auto x = NewBuffer(256);
  auto cb = NewCommandBuffer();
  BufferBinding one[] = {{x}};
  AxpbConstants c{};
  Status s = cb->Dispatch(*exe, 0, one, BytesOf(c), 1);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("expected 2 buffer bindings, got 1"), std::string::npos) << s;
  EXPECT_EQ(cb->stats().dispatches, 0u);
  Run(*cb);
  ExpectDeviceStillWorks();
}

TEST_F(ErrorTest, BadBindingsAndConstantsAreErrors) {
  auto exe = LoadExecutable(*device_, AxpbSpec());
  ASSERT_TRUE(exe.ok());
  auto x = NewBuffer(256), y = NewBuffer(256);
  auto cb = NewCommandBuffer();
  AxpbConstants c{};
  BufferBinding null_buffer[] = {{x}, {nullptr}};
  EXPECT_EQ(cb->Dispatch(*exe, 0, null_buffer, BytesOf(c), 1).code(), StatusCode::kInvalidArgument);
  BufferBinding past_end[] = {{x}, {y, 0, 512}};
  Status s = cb->Dispatch(*exe, 0, past_end, BytesOf(c), 1);
  EXPECT_NE(s.message().find("binding 1"), std::string::npos) << s;
  BufferBinding aliased[] = {{x}, {x}};
  s = cb->Dispatch(*exe, 0, aliased, BytesOf(c), 1);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  BufferBinding ok[] = {{x}, {y}};
  uint8_t too_many[32] = {};
  EXPECT_EQ(cb->Dispatch(*exe, 0, ok, too_many, 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cb->Dispatch(*exe, 5, ok, BytesOf(c), 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cb->Dispatch(nullptr, 0, ok, BytesOf(c), 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cb->stats().dispatches, 0u);
  Run(*cb);
  ExpectDeviceStillWorks();
}

TEST_F(ErrorTest, DispatchBeyondTheLimitsIsAnError) {
  auto exe = LoadExecutable(*device_, AxpbSpec());
  ASSERT_TRUE(exe.ok());
  auto x = NewBuffer(256), y = NewBuffer(256);
  auto cb = NewCommandBuffer();
  BufferBinding bindings[] = {{x}, {y}};
  AxpbConstants c{};
  const uint32_t max = device_->limits().max_compute_workgroups_per_dimension;
  Status s = cb->Dispatch(*exe, 0, bindings, BytesOf(c), max + 1);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("maxComputeWorkgroupsPerDimension"), std::string::npos) << s;
  EXPECT_EQ(cb->Dispatch(*exe, 0, bindings, BytesOf(c), 1, 1, max + 1).code(),
            StatusCode::kInvalidArgument);
  auto no_indirect = NewBuffer(64);  // lacks indirect usage
  EXPECT_EQ(cb->DispatchIndirect(*exe, 0, bindings, BytesOf(c), no_indirect, 0).code(),
            StatusCode::kInvalidArgument);
  auto args = NewBuffer(16, kDefaultBufferUsage | WGPUBufferUsage_Indirect);
  EXPECT_EQ(cb->DispatchIndirect(*exe, 0, bindings, BytesOf(c), args, 8).code(),
            StatusCode::kInvalidArgument);
  // The arguments' buffer written by the dispatch itself: refused when
  // recorded, or, given through a slot, before a submit runs anything.
  auto both = NewBuffer(256, kDefaultBufferUsage | WGPUBufferUsage_Indirect);
  BufferBinding writes_args[] = {{x}, {both}};
  Status s2 = cb->DispatchIndirect(*exe, 0, writes_args, BytesOf(c), both, 0);
  EXPECT_EQ(s2.code(), StatusCode::kInvalidArgument) << s2;
  EXPECT_NE(s2.message().find("indirect dispatch of 'axpb': binding 1 writes the indirect buffer"),
            std::string::npos)
      << s2;
  EXPECT_EQ(cb->stats().dispatches, 0u);
  Run(*cb);
  auto slotted = NewCommandBuffer(CommandBufferMode::kReusable);
  BufferBinding slot_writes[] = {{x}, BufferBinding::Slot(0)};
  KILN_ASSERT_OK(slotted->DispatchIndirect(*exe, 0, slot_writes, BytesOf(c), both, 0));
  KILN_ASSERT_OK(slotted->End());
  BufferRef table[] = {both};
  s2 = SubmitAndWait(*device_, *slotted, kInfinite, table);
  EXPECT_EQ(s2.code(), StatusCode::kInvalidArgument) << s2;
  EXPECT_NE(s2.message().find("the indirect buffer and binding 1 (binding-table slot 0) of one "
                              "dispatch get the same buffer; a written buffer cannot be read "
                              "through another binding"),
            std::string::npos)
      << s2;
  ExpectDeviceStillWorks();
}

// An executable's device is known by a serial number, not an address that
// a later device may take: one loaded on a destroyed device is refused by
// every device made after it.
TEST_F(ErrorTest, AnExecutableOfADestroyedDeviceIsRefused) {
  ExecutableRef stale;
  {
    auto gone = Device::Create(Options());
    ASSERT_TRUE(gone.ok()) << gone.status();
    auto exe = LoadExecutable(**gone, AxpbSpec());
    ASSERT_TRUE(exe.ok()) << exe.status();
    stale = *exe;
  }
  for (int i = 0; i < 3; ++i) {
    auto fresh = Device::Create(Options());
    ASSERT_TRUE(fresh.ok()) << fresh.status();
    EXPECT_FALSE(stale->BelongsTo(**fresh));
    auto exe = LoadExecutable(**fresh, AxpbSpec());
    ASSERT_TRUE(exe.ok()) << exe.status();
    EXPECT_TRUE((*exe)->BelongsTo(**fresh));
  }
}

TEST_F(ErrorTest, RecordingAfterEndAndSubmittingBeforeEndAreErrors) {
  auto cb = NewCommandBuffer();
  EXPECT_EQ(Submit(*device_, *cb).code(), StatusCode::kFailedPrecondition);
  KILN_ASSERT_OK(cb->End());
  auto x = NewBuffer(64);
  const uint8_t zero = 0;
  EXPECT_EQ(cb->FillBuffer(x, 0, 4, &zero, 1).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(cb->End().code(), StatusCode::kFailedPrecondition);
}

TEST_F(ErrorTest, UnloadableImplementationListsWhatWasTried) {
  auto impl = Implementation::Load(ImplKind::kDawn, "/nonexistent/libwebgpu.so");
  ASSERT_FALSE(impl.ok());
  EXPECT_EQ(impl.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(impl.status().message().find("/nonexistent/libwebgpu.so"), std::string::npos);
  // A library that is not a webgpu.h implementation names the missing symbols.
  auto not_webgpu = Implementation::Load(ImplKind::kWgpu, "libm.so.6");
  ASSERT_FALSE(not_webgpu.ok());
  EXPECT_NE(not_webgpu.status().message().find("missing wgpuCreateInstance"), std::string::npos)
      << not_webgpu.status();
}

TEST_F(ErrorTest, TheOtherImplementationsLibraryIsRefused) {
  // This suite's library, loaded as the other implementation.
  const Implementation& ours = device_->impl();
  const ImplKind other = ours.kind() == ImplKind::kDawn ? ImplKind::kWgpu : ImplKind::kDawn;
  auto impl = Implementation::Load(other, ours.path());
  ASSERT_FALSE(impl.ok());
  EXPECT_EQ(impl.status().code(), StatusCode::kInvalidArgument);
  const std::string expected =
      ours.kind() == ImplKind::kDawn ? "is Dawn, not wgpu-native" : "is wgpu-native, not Dawn";
  EXPECT_EQ(impl.status().message(), "'" + ours.path() + "' " + expected);
  // And as itself, it loads.
  auto same = Implementation::Load(ours.kind(), ours.path());
  EXPECT_TRUE(same.ok()) << same.status();
}

TEST_F(ErrorTest, NoDeviceOnTheNullBackendOrOnAnotherBackendThanAskedFor) {
  DeviceOptions options = Options();
  options.impl = device_->impl().kind();
  options.backend = Backend::kNull;
  auto null = Device::Create(options);
  ASSERT_FALSE(null.ok());
  EXPECT_EQ(null.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(null.status().message().find("runs no work"), std::string::npos) << null.status();
  // wgpu-native answers a request for OpenGL ES with desktop OpenGL where
  // the driver has it: a device is the backend asked for, or none.
  for (Backend backend : {Backend::kOpenGL, Backend::kOpenGLES}) {
    options.backend = backend;
    auto made = Device::Create(options);
    if (made.ok()) {
      EXPECT_EQ((*made)->adapter().backend, backend) << (*made)->Describe();
    } else {
      EXPECT_EQ(made.status().code(), StatusCode::kUnavailable) << made.status();
    }
  }
}

TEST_F(ErrorTest, LostDeviceTurnsEveryCallIntoAnError) {
  auto lost = Device::Create(Options());
  ASSERT_TRUE(lost.ok()) << lost.status();
  std::shared_ptr<Device> device = *lost;
  auto buffer = device->allocator().Allocate(64);
  ASSERT_TRUE(buffer.ok());
  // Loaded before: a lost device refuses it even from its cache.
  ASSERT_TRUE(LoadExecutable(*device, AxpbSpec()).ok());
  device->Destroy();
  EXPECT_EQ(device->CheckHealthy().code(), StatusCode::kDeviceLost);
  EXPECT_EQ(device->allocator().Allocate(64).status().code(), StatusCode::kDeviceLost);
  EXPECT_EQ(LoadExecutable(*device, AxpbSpec()).status().code(), StatusCode::kDeviceLost);
  EXPECT_EQ(CommandBuffer::Create(device, CommandBufferMode::kOneShot).status().code(),
            StatusCode::kDeviceLost);
  std::vector<uint8_t> out(64);
  EXPECT_EQ(Download(*device, *buffer, 0, out).code(), StatusCode::kDeviceLost);
  // The shared device is unaffected.
  ExpectDeviceStillWorks();
}

// A buffer is one device's: another device's command buffers, uploads and
// downloads refuse it when called, record nothing, and the device works on.
TEST_F(ErrorTest, AnotherDevicesBufferIsRefusedWhereItIsNamed) {
  auto other_device = Device::Create(Options());
  ASSERT_TRUE(other_device.ok()) << other_device.status();
  auto theirs = (*other_device)->allocator().Allocate(256);
  ASSERT_TRUE(theirs.ok()) << theirs.status();
  auto ours = NewBuffer(256);
  auto exe = LoadExecutable(*device_, AxpbSpec());
  ASSERT_TRUE(exe.ok()) << exe.status();
  auto cb = NewCommandBuffer();
  const uint32_t zero = 0;
  const std::vector<uint8_t> bytes(16, 7);
  AxpbConstants c{};
  BufferBinding bindings[] = {{ours}, {*theirs}};
  auto refused = [](const Status& s, std::string_view what) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << what << ": " << s;
    EXPECT_NE(s.message().find(what), std::string::npos) << s;
    EXPECT_NE(s.message().find("belongs to another device"), std::string::npos) << s;
  };
  refused(cb->FillBuffer(*theirs, 0, 16, &zero, 4), "fill: the target buffer");
  refused(cb->UpdateBuffer(*theirs, 0, bytes), "update: the target buffer");
  refused(cb->CopyBuffer(ours, 0, *theirs, 0, 16), "copy: the target buffer");
  refused(cb->CopyBuffer(*theirs, 0, ours, 0, 16), "copy: the source buffer");
  refused(cb->Dispatch(*exe, 0, bindings, BytesOf(c), 1), "dispatch of 'axpb', binding 1");
  refused(Upload(*device_, *theirs, 0, bytes), "upload: the target buffer");
  std::vector<uint8_t> out(16);
  refused(Download(*device_, *theirs, 0, out), "download: the source buffer");
  EXPECT_EQ(cb->stats().dispatches, 0u);
  Run(*cb);
  KILN_EXPECT_OK(device_->CheckHealthy());
  KILN_EXPECT_OK((*other_device)->CheckHealthy());
  ExpectDeviceStillWorks();
}

// An executable is one device's too: another device's command buffer
// refuses to dispatch it.
TEST_F(ErrorTest, AnotherDevicesExecutableIsRefused) {
  auto other_device = Device::Create(Options());
  ASSERT_TRUE(other_device.ok()) << other_device.status();
  auto theirs = LoadExecutable(**other_device, AxpbSpec());
  ASSERT_TRUE(theirs.ok()) << theirs.status();
  auto x = NewBuffer(256), y = NewBuffer(256);
  auto cb = NewCommandBuffer();
  BufferBinding bindings[] = {{x}, {y}};
  AxpbConstants c{};
  Status s = cb->Dispatch(*theirs, 0, bindings, BytesOf(c), 1);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("dispatch: executable 'axpb' was loaded on another device"),
            std::string::npos)
      << s;
  EXPECT_EQ(cb->stats().dispatches, 0u);
  Run(*cb);
  ExpectDeviceStillWorks();
}

// A fence is its device's and only grows: another device's fence, or a
// value at or below one already signaled (reached or not), is refused
// before anything is issued.
TEST_F(ErrorTest, FencesAreOneDevicesAndOnlyGrow) {
  auto other_device = Device::Create(Options());
  ASSERT_TRUE(other_device.ok()) << other_device.status();
  auto theirs = Fence::Create(*other_device);
  auto ours = Fence::Create(device_);
  auto x = NewBuffer(256), y = NewBuffer(256);
  const auto poison = Poison(y);
  auto exe = LoadExecutable(*device_, AxpbSpec());
  ASSERT_TRUE(exe.ok()) << exe.status();
  auto cb = NewCommandBuffer(CommandBufferMode::kReusable);
  BufferBinding bindings[] = {{x}, {y}};
  AxpbConstants c{1, 2, 64, 0};
  KILN_ASSERT_OK(cb->Dispatch(*exe, 0, bindings, BytesOf(c), 1));
  KILN_ASSERT_OK(cb->End());
  Status s = Submit(*device_, *cb, theirs.get(), 1);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("the fence was made for another device"), std::string::npos) << s;
  EXPECT_EQ(Read(y), poison) << "a refused submit ran work";
  KILN_ASSERT_OK(Submit(*device_, *cb, ours.get(), 5));
  for (uint64_t again : {uint64_t{5}, uint64_t{3}}) {
    s = Submit(*device_, *cb, ours.get(), again);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("does not exceed the value 5 already signaled"), std::string::npos)
        << s;
  }
  EXPECT_EQ(ours->Signal(5).code(), StatusCode::kInvalidArgument);
  KILN_ASSERT_OK(ours->Wait(5));
  KILN_ASSERT_OK(Submit(*device_, *cb, ours.get(), 6));
  KILN_ASSERT_OK(ours->Wait(6));
  EXPECT_EQ(ours->value(), 6u);
  ExpectDeviceStillWorks();
}

// Copies name the usage a buffer lacks instead of reaching the
// implementation (which refuses them at submit, or aborts): a copy's source
// needs copy-src, its target copy-dst (the copy shader's unaligned paths:
// storage), as do uploads, downloads, zero fills and aligned updates.
TEST_F(ErrorTest, CopiesNeedTheirBuffersUsage) {
  auto storage_only = NewBuffer(256, WGPUBufferUsage_Storage);
  auto normal = NewBuffer(256);
  auto cb = NewCommandBuffer();
  const uint32_t zero = 0;
  const std::vector<uint8_t> bytes(16, 7);
  std::vector<uint8_t> out(16);
  auto refused = [](const Status& s, std::string_view what) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << what << ": " << s;
    EXPECT_NE(s.message().find(what), std::string::npos) << s;
  };
  refused(cb->CopyBuffer(storage_only, 0, normal, 0, 16),
          "copy: the source buffer was not created with copy-src usage");
  refused(cb->CopyBuffer(normal, 0, storage_only, 0, 16),
          "copy: the target buffer was not created with copy-dst usage");
  refused(cb->FillBuffer(storage_only, 0, 16, &zero, 4),
          "fill: a zero fill of whole words needs a buffer with copy-dst usage");
  refused(cb->UpdateBuffer(storage_only, 0, bytes),
          "update: the target buffer was not created with copy-dst usage");
  refused(Upload(*device_, storage_only, 0, bytes),
          "upload: the target buffer was not created with copy-dst usage");
  refused(Download(*device_, storage_only, 0, out),
          "download: the source buffer was not created with copy-src usage");
  // What the copy shader does needs storage only: those run.
  const uint32_t pattern = 0x01020304;
  KILN_EXPECT_OK(cb->FillBuffer(storage_only, 0, 16, &pattern, 4));
  KILN_EXPECT_OK(cb->CopyBuffer(normal, 1, storage_only, 3, 5));
  KILN_EXPECT_OK(Upload(*device_, storage_only, 1, {bytes.data(), 3}));
  Run(*cb);
  KILN_EXPECT_OK(device_->CheckHealthy());
  ExpectDeviceStillWorks();
}

// Null buffers and ranges past 64 bits are errors that say what they are.
TEST_F(ErrorTest, NullBuffersAndOverflowingRangesAreNamed) {
  std::vector<uint8_t> out(4);
  EXPECT_EQ(Upload(*device_, nullptr, 0, out).message(), "upload: no target buffer");
  EXPECT_EQ(Download(*device_, nullptr, 0, out).message(), "download: no source buffer");
  auto x = NewBuffer(100);
  EXPECT_EQ(Upload(*device_, x, UINT64_MAX - 3, out).message(),
            "upload: range [18446744073709551612, 18446744073709551612 + 4) is outside the "
            "buffer of 100 bytes");
  auto exe = LoadExecutable(*device_, AxpbSpec());
  ASSERT_TRUE(exe.ok()) << exe.status();
  auto y = NewBuffer(4000);
  auto cb = NewCommandBuffer();
  AxpbConstants c{};
  BufferBinding empty[] = {{x}, {y, 0, 0}};
  EXPECT_EQ(cb->Dispatch(*exe, 0, empty, BytesOf(c), 1).message(),
            "dispatch of 'axpb', binding 1 (read-write storage): an empty range (length 0)");
  BufferBinding past[] = {{x}, {y, 256, UINT64_MAX - 100}};
  EXPECT_EQ(cb->Dispatch(*exe, 0, past, BytesOf(c), 1).message(),
            "dispatch of 'axpb', binding 1 (read-write storage): range [256, 256 + "
            "18446744073709551515) does not fit the buffer of 4000 bytes");
  Run(*cb);
  ExpectDeviceStillWorks();
}

// A buffer holds whole 4-byte words: the largest is maxBufferSize rounded
// down, and a request past it is refused before anything is allocated.
TEST_F(ErrorTest, BuffersPastTheLargestWholeWordSizeAreRefused) {
  const uint64_t max = device_->limits().max_buffer_size;
  const uint64_t largest = max / 4 * 4;
  auto over = device_->allocator().Allocate(largest + 1);
  EXPECT_EQ(over.status().code(), StatusCode::kInvalidArgument) << over.status();
  if (largest + 1 <= max) {
    EXPECT_NE(over.status().message().find(StrCat("exceeds ", largest,
                                                  " bytes, the device's maxBufferSize of ", max,
                                                  " bytes in whole 4-byte words")),
              std::string::npos)
        << over.status();
  }
  ExpectDeviceStillWorks();
}

}  // namespace
}  // namespace kiln::hal::cts
