#include "kiln/hal/implementation.h"

#include <dlfcn.h>

#include <array>
#include <cstdlib>
#include <utility>

namespace kiln::hal {
namespace {

struct FeatureEntry {
  Feature feature;
  std::string_view name;
  uint32_t dawn;  // the pinned Dawn build's numbering
  uint32_t wgpu;  // the standard webgpu.h numbering (wgpu-native)
};

// Dawn's values are those of its pre-renumbering WGPUFeatureName; the
// conformance suite proves the ones kernels rely on by behaviour.
constexpr std::array<FeatureEntry, kFeatureCount> kFeatures = {{
    {Feature::kCoreFeaturesAndLimits, "core-features-and-limits", 18, 0x01},
    {Feature::kDepthClipControl, "depth-clip-control", 1, 0x02},
    {Feature::kDepth32FloatStencil8, "depth32float-stencil8", 2, 0x03},
    {Feature::kTextureCompressionBC, "texture-compression-bc", 4, 0x04},
    {Feature::kTextureCompressionBCSliced3D, "texture-compression-bc-sliced-3d", 5, 0x05},
    {Feature::kTextureCompressionETC2, "texture-compression-etc2", 6, 0x06},
    {Feature::kTextureCompressionASTC, "texture-compression-astc", 7, 0x07},
    {Feature::kTextureCompressionASTCSliced3D, "texture-compression-astc-sliced-3d", 8, 0x08},
    {Feature::kTimestampQuery, "timestamp-query", 3, 0x09},
    {Feature::kIndirectFirstInstance, "indirect-first-instance", 9, 0x0A},
    {Feature::kShaderF16, "shader-f16", 10, 0x0B},
    {Feature::kRG11B10UfloatRenderable, "rg11b10ufloat-renderable", 11, 0x0C},
    {Feature::kBGRA8UnormStorage, "bgra8unorm-storage", 12, 0x0D},
    {Feature::kFloat32Filterable, "float32-filterable", 13, 0x0E},
    {Feature::kFloat32Blendable, "float32-blendable", 14, 0x0F},
    {Feature::kClipDistances, "clip-distances", 15, 0x10},
    {Feature::kDualSourceBlending, "dual-source-blending", 16, 0x11},
    {Feature::kSubgroups, "subgroups", 17, 0x12},
}};

struct NamedValue {
  uint32_t value;
  std::string_view name;
};

// Implementation-specific features kiln does not use, named for `kiln info`.
constexpr NamedValue kDawnExtraFeatures[] = {
    {327680, "dawn-internal-usages"},
    {327682, "dawn-native"},
    {327683, "chromium-experimental-timestamp-query-inside-passes"},
    {327684, "implicit-device-synchronization"},
    {327685, "chromium-experimental-immediate-data"},
    {327688, "subgroups-f16"},
    {327697, "host-mapped-pointer"},
    {327701, "buffer-map-extended-usages"},
    {327702, "adapter-properties-memory-heaps"},
    {327704, "adapter-properties-vk"},
    {327730, "shader-module-compilation-options"},
    {327736, "chromium-experimental-subgroup-matrix"},
};
constexpr NamedValue kWgpuExtraFeatures[] = {
    {0x13, "texture-formats-tier1"},
    {0x14, "texture-formats-tier2"},
    {0x15, "primitive-index"},
    {0x16, "texture-component-swizzle"},
    {0x30001, "wgpu-immediates"},
    {0x30002, "wgpu-texture-adapter-specific-format-features"},
    {0x30004, "wgpu-multi-draw-indirect-count"},
    {0x30005, "wgpu-vertex-writable-storage"},
    {0x30006, "wgpu-texture-binding-array"},
    {0x30007, "wgpu-sampled-texture-and-storage-buffer-array-non-uniform-indexing"},
    {0x30008, "wgpu-pipeline-statistics-query"},
    {0x30009, "wgpu-storage-resource-binding-array"},
    {0x3000A, "wgpu-partially-bound-binding-array"},
    {0x3000B, "wgpu-texture-format-16bit-norm"},
    {0x3000C, "wgpu-texture-compression-astc-hdr"},
    {0x3000E, "wgpu-mappable-primary-buffers"},
    {0x3000F, "wgpu-buffer-binding-array"},
};

struct BackendEntry {
  Backend backend;
  std::string_view name;
  uint32_t native;  // identical in both implementations' numbering
};
constexpr BackendEntry kBackends[] = {
    {Backend::kDefault, "default", 0},   {Backend::kNull, "null", 1},
    {Backend::kWebGPU, "webgpu", 2},     {Backend::kD3D11, "d3d11", 3},
    {Backend::kD3D12, "d3d12", 4},       {Backend::kMetal, "metal", 5},
    {Backend::kVulkan, "vulkan", 6},     {Backend::kOpenGL, "opengl", 7},
    {Backend::kOpenGLES, "opengles", 8},
};

}  // namespace

std::string_view ImplKindName(ImplKind kind) {
  return kind == ImplKind::kDawn ? "dawn" : "wgpu";
}

StatusOr<ImplKind> ParseImplKind(std::string_view name) {
  if (name == "dawn") return ImplKind::kDawn;
  if (name == "wgpu" || name == "wgpu-native") return ImplKind::kWgpu;
  return InvalidArgument("unknown WebGPU implementation '", name, "': expected 'dawn' or 'wgpu'");
}

std::string_view BackendName(Backend backend) {
  for (const auto& b : kBackends) {
    if (b.backend == backend) return b.name;
  }
  return "unknown";
}

StatusOr<Backend> ParseBackend(std::string_view name) {
  for (const auto& b : kBackends) {
    if (b.name == name) return b.backend;
  }
  if (name == "gl") return Backend::kOpenGL;
  if (name == "gles") return Backend::kOpenGLES;
  return InvalidArgument("unknown backend '", name,
                         "': expected one of default, vulkan, opengl, opengles, metal, d3d12, "
                         "d3d11");
}

std::string_view FeatureName(Feature feature) {
  return kFeatures[static_cast<int>(feature)].name;
}

StatusOr<Feature> ParseFeature(std::string_view name) {
  for (const auto& f : kFeatures) {
    if (f.name == name) return f.feature;
  }
  return InvalidArgument("unknown feature '", name, "'");
}

std::string_view Implementation::LibraryVariable(ImplKind kind) {
  return kind == ImplKind::kDawn ? "KILN_DAWN_LIBRARY" : "KILN_WGPU_LIBRARY";
}

namespace {
std::string& BundledPath(ImplKind kind) {
  static std::string paths[2];
  return paths[kind == ImplKind::kDawn ? 0 : 1];
}
}  // namespace

void Implementation::SetBundledPath(ImplKind kind, std::string path) {
  BundledPath(kind) = std::move(path);
}

std::vector<std::string> Implementation::CandidatePaths(ImplKind kind) {
  const char* env = std::getenv(std::string(LibraryVariable(kind)).c_str());
  if (env && *env) return {env};
  if (!BundledPath(kind).empty()) return {BundledPath(kind)};
  return {kind == ImplKind::kDawn ? KILN_DEFAULT_DAWN_LIBRARY : KILN_DEFAULT_WGPU_LIBRARY};
}

namespace {

// Which implementation a loaded library is, by entry points only one of
// them exports: wgpu-native's wgpu.h extras, Dawn's own additions.
constexpr const char* kWgpuOnlySymbols[] = {"wgpuGenerateReport", "wgpuDevicePoll"};
constexpr const char* kDawnOnlySymbols[] = {"wgpuDeviceTick",
                                            "wgpuDawnDrmFormatCapabilitiesFreeMembers"};

std::optional<ImplKind> IdentifyLibrary(void* handle) {
  auto has_all = [&](const auto& symbols) {
    for (const char* symbol : symbols) {
      if (dlsym(handle, symbol) == nullptr) return false;
    }
    return true;
  };
  const bool wgpu = has_all(kWgpuOnlySymbols), dawn = has_all(kDawnOnlySymbols);
  if (wgpu == dawn) return std::nullopt;
  return wgpu ? ImplKind::kWgpu : ImplKind::kDawn;
}

std::string_view LongName(ImplKind kind) {
  return kind == ImplKind::kDawn ? "Dawn" : "wgpu-native";
}

}  // namespace

StatusOr<std::shared_ptr<Implementation>> Implementation::Load(ImplKind kind,
                                                               const std::string& path) {
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* err = dlerror();
    return Unavailable("cannot load ", ImplKindName(kind), " from '", path,
                       "': ", err ? err : "dlopen failed");
  }
  std::shared_ptr<Implementation> impl(new Implementation(kind, path, handle));
  Procs& p = impl->procs_;
  std::string missing;
#define KILN_RESOLVE_PROC(name)                                           \
  p.name = reinterpret_cast<WGPUProc##name>(dlsym(handle, "wgpu" #name)); \
  if (!p.name) missing += (missing.empty() ? "" : ", ") + std::string("wgpu" #name);
  KILN_WGPU_REQUIRED_PROCS(KILN_RESOLVE_PROC)
#undef KILN_RESOLVE_PROC
  if (!missing.empty()) {
    return Unavailable("'", path, "' is not a usable ", ImplKindName(kind),
                       " webgpu.h library: missing ", missing);
  }
  // Before any entry point is called (resolving them calls none): the other
  // implementation's library takes the same calls with other enum values
  // and structures, and fails far from here (a Rust panic, wrong features).
  const std::optional<ImplKind> actual = IdentifyLibrary(handle);
  if (actual != kind) {
    dlclose(handle);
    if (actual) {
      return InvalidArgument("'", path, "' is ", LongName(*actual), ", not ", LongName(kind));
    }
    return InvalidArgument("'", path, "' is not a ", LongName(kind),
                           " library: it does not export ",
                           kind == ImplKind::kDawn ? kDawnOnlySymbols[0] : kWgpuOnlySymbols[0]);
  }
  if (kind == ImplKind::kDawn) {
    p.DeviceTick = reinterpret_cast<Procs::DeviceTickFn>(dlsym(handle, "wgpuDeviceTick"));
  }
  if (kind == ImplKind::kWgpu) {
    p.DevicePoll = reinterpret_cast<Procs::DevicePollFn>(dlsym(handle, "wgpuDevicePoll"));
    p.DeviceCreateShaderModuleTrusted = reinterpret_cast<Procs::DeviceCreateShaderModuleTrustedFn>(
        dlsym(handle, "wgpuDeviceCreateShaderModuleTrusted"));
  }
  return impl;
}

StatusOr<std::shared_ptr<Implementation>> Implementation::LoadDefault(ImplKind kind) {
  const std::string variable(LibraryVariable(kind));
  if (const char* env = std::getenv(variable.c_str()); env && *env) {
    // The library the user named, or nothing: never a silent fallback.
    auto impl = Load(kind, env);
    if (!impl.ok()) return InvalidArgument("$", variable, ": ", impl.status().message());
    return impl;
  }
  std::string errors;
  for (const std::string& path : CandidatePaths(kind)) {
    auto impl = Load(kind, path);
    if (impl.ok()) return impl;
    errors += "\n  " + impl.status().message();
  }
  return Unavailable("no ", ImplKindName(kind), " library could be loaded; tried:", errors);
}

Implementation::~Implementation() {
  // The library stays mapped: implementations keep threads and atexit
  // handlers that must not outlive their code.
  (void)handle_;
}

std::optional<uint32_t> Implementation::NativeFeature(Feature feature) const {
  const FeatureEntry& e = kFeatures[static_cast<int>(feature)];
  return kind_ == ImplKind::kDawn ? e.dawn : e.wgpu;
}

std::optional<Feature> Implementation::FeatureFromNative(uint32_t native) const {
  for (const auto& e : kFeatures) {
    if ((kind_ == ImplKind::kDawn ? e.dawn : e.wgpu) == native) return e.feature;
  }
  return std::nullopt;
}

std::string Implementation::NativeFeatureName(uint32_t native) const {
  if (auto f = FeatureFromNative(native)) return std::string(FeatureName(*f));
  if (kind_ == ImplKind::kDawn) {
    for (const auto& e : kDawnExtraFeatures) {
      if (e.value == native) return std::string(e.name);
    }
  } else {
    for (const auto& e : kWgpuExtraFeatures) {
      if (e.value == native) return std::string(e.name);
    }
  }
  return StrCat(ImplKindName(kind_), "-feature-", native);
}

uint32_t Implementation::NativeBackend(Backend backend) const {
  for (const auto& b : kBackends) {
    if (b.backend == backend) return b.native;
  }
  return 0;
}

Backend Implementation::BackendFromNative(uint32_t native) const {
  for (const auto& b : kBackends) {
    if (b.native == native) return b.backend;
  }
  return Backend::kDefault;
}

}  // namespace kiln::hal
