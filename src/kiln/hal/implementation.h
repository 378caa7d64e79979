// Loading a webgpu.h implementation (Dawn or wgpu-native) at run time.
//
// One kiln binary runs on either: the chosen shared library is opened with
// dlopen and its entry points resolved into a Procs table. The two libraries
// do not number every enum alike (the Dawn build kiln pins uses the feature
// numbering from before the standard header's renumbering), so every enum
// value kiln passes to or reads from an implementation goes through that
// implementation's translation here.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/hal/procs.h"
#include "kiln/support/status.h"

namespace kiln::hal {

enum class ImplKind { kDawn, kWgpu };

std::string_view ImplKindName(ImplKind kind);  // "dawn" or "wgpu"
StatusOr<ImplKind> ParseImplKind(std::string_view name);

// Backends, in kiln's own numbering.
enum class Backend {
  kDefault,
  kNull,
  kVulkan,
  kMetal,
  kD3D12,
  kD3D11,
  kOpenGL,
  kOpenGLES,
  kWebGPU
};
std::string_view BackendName(Backend backend);  // "vulkan", "opengl", ...
StatusOr<Backend> ParseBackend(std::string_view name);

// Device features kiln knows by name, in kiln's own numbering.
enum class Feature {
  kCoreFeaturesAndLimits,
  kDepthClipControl,
  kDepth32FloatStencil8,
  kTextureCompressionBC,
  kTextureCompressionBCSliced3D,
  kTextureCompressionETC2,
  kTextureCompressionASTC,
  kTextureCompressionASTCSliced3D,
  kTimestampQuery,
  kIndirectFirstInstance,
  kShaderF16,
  kRG11B10UfloatRenderable,
  kBGRA8UnormStorage,
  kFloat32Filterable,
  kFloat32Blendable,
  kClipDistances,
  kDualSourceBlending,
  kSubgroups,
};
inline constexpr int kFeatureCount = static_cast<int>(Feature::kSubgroups) + 1;
std::string_view FeatureName(Feature feature);  // the WebGPU spelling, "shader-f16"
StatusOr<Feature> ParseFeature(std::string_view name);

class Implementation {
 public:
  // Opens the library at `path`, checks that it is `kind` (by entry points
  // only that implementation exports; the other one's library, or neither,
  // is kInvalidArgument naming the file) and resolves every entry point
  // kiln needs.
  static StatusOr<std::shared_ptr<Implementation>> Load(ImplKind kind, const std::string& path);

  // The library $KILN_DAWN_LIBRARY / $KILN_WGPU_LIBRARY names, if set: a
  // missing or wrong one is kInvalidArgument naming the variable and the
  // file, with no fallback. Otherwise tries each candidate path of `kind`
  // in turn (CandidatePaths); the error lists every path tried and why each
  // failed.
  static StatusOr<std::shared_ptr<Implementation>> LoadDefault(ImplKind kind);

  // $KILN_DAWN_LIBRARY / $KILN_WGPU_LIBRARY if set, else the path given to
  // SetBundledPath, else the path configured at build time (the packages
  // scripts/setup.sh installs).
  static std::vector<std::string> CandidatePaths(ImplKind kind);
  // The library a package carries with it (the Python wheel): used in place
  // of the build-time path when no environment variable names one. Set it
  // before any device is made; an empty path restores the build-time one.
  static void SetBundledPath(ImplKind kind, std::string path);
  // "KILN_DAWN_LIBRARY" or "KILN_WGPU_LIBRARY".
  static std::string_view LibraryVariable(ImplKind kind);

  ~Implementation();
  Implementation(const Implementation&) = delete;
  Implementation& operator=(const Implementation&) = delete;

  ImplKind kind() const { return kind_; }
  std::string_view name() const { return ImplKindName(kind_); }
  const std::string& path() const { return path_; }
  const Procs& procs() const { return procs_; }

  // Whether wgpuInstanceWaitAny accepts a nonzero timeout here (Dawn: yes,
  // with the TimedWaitAny instance feature; wgpu-native: no, it polls).
  bool supports_timed_wait_any() const { return kind_ == ImplKind::kDawn; }
  // wgpu-native leaves these webgpu.h entry points unimplemented (calling
  // them aborts the process), so kiln takes another path there.
  bool supports_async_pipelines() const { return kind_ == ImplKind::kDawn; }
  bool supports_compilation_info() const { return kind_ == ImplKind::kDawn; }

  // Enum translation between kiln and this implementation's numbering.
  std::optional<uint32_t> NativeFeature(Feature feature) const;
  std::optional<Feature> FeatureFromNative(uint32_t native) const;
  // A printable name for any native feature value, known to kiln or not.
  std::string NativeFeatureName(uint32_t native) const;
  uint32_t NativeBackend(Backend backend) const;
  Backend BackendFromNative(uint32_t native) const;

 private:
  Implementation(ImplKind kind, std::string path, void* handle)
      : kind_(kind), path_(std::move(path)), handle_(handle) {}

  ImplKind kind_;
  std::string path_;
  void* handle_;
  Procs procs_;
};

}  // namespace kiln::hal
