// kiln info: every implementation kiln can load, its adapters, their
// backend, feature level, features and limits.
#include <algorithm>
#include <cstdio>

#include "commands.h"
#include "flags.h"
#include "kiln/hal/device.h"
#include "kiln/support/json.h"

namespace kiln::tool {
namespace {

// Name and value of every limit, in one place for both outputs.
std::vector<std::pair<const char*, uint64_t>> LimitList(const hal::Limits& l) {
  return {
      {"maxBindGroups", l.max_bind_groups},
      {"maxBindingsPerBindGroup", l.max_bindings_per_bind_group},
      {"maxDynamicUniformBuffersPerPipelineLayout",
       l.max_dynamic_uniform_buffers_per_pipeline_layout},
      {"maxStorageBuffersPerShaderStage", l.max_storage_buffers_per_shader_stage},
      {"maxUniformBuffersPerShaderStage", l.max_uniform_buffers_per_shader_stage},
      {"maxUniformBufferBindingSize", l.max_uniform_buffer_binding_size},
      {"maxStorageBufferBindingSize", l.max_storage_buffer_binding_size},
      {"minUniformBufferOffsetAlignment", l.min_uniform_buffer_offset_alignment},
      {"minStorageBufferOffsetAlignment", l.min_storage_buffer_offset_alignment},
      {"maxBufferSize", l.max_buffer_size},
      {"maxComputeWorkgroupStorageSize", l.max_compute_workgroup_storage_size},
      {"maxComputeInvocationsPerWorkgroup", l.max_compute_invocations_per_workgroup},
      {"maxComputeWorkgroupSizeX", l.max_compute_workgroup_size_x},
      {"maxComputeWorkgroupSizeY", l.max_compute_workgroup_size_y},
      {"maxComputeWorkgroupSizeZ", l.max_compute_workgroup_size_z},
      {"maxComputeWorkgroupsPerDimension", l.max_compute_workgroups_per_dimension},
  };
}

void PrintJson(const hal::Device::Enumeration& e) {
  JsonWriter w;
  w.BeginObject().Key("adapters").BeginArray();
  for (const hal::AdapterReport& a : e.adapters) {
    w.BeginObject();
    w.Key("implementation").String(hal::ImplKindName(a.impl));
    w.Key("library").String(a.library);
    w.Key("backend").String(hal::BackendName(a.backend));
    w.Key("featureLevel").String(hal::FeatureLevelName(a.feature_level));
    w.Key("description").String(a.description);
    w.Key("device").String(a.device);
    w.Key("vendor").String(a.vendor);
    w.Key("architecture").String(a.architecture);
    w.Key("adapterType").String(a.adapter_type);
    w.Key("vendorId").Uint(a.vendor_id);
    w.Key("deviceId").Uint(a.device_id);
    w.Key("subgroupMinSize").Uint(a.subgroup_min_size);
    w.Key("subgroupMaxSize").Uint(a.subgroup_max_size);
    w.Key("features").BeginArray();
    for (const std::string& f : a.features) w.String(f);
    w.EndArray();
    w.Key("limits").BeginObject();
    for (auto [name, value] : LimitList(a.limits)) w.Key(name).Uint(value);
    w.EndObject();
    w.EndObject();
  }
  w.EndArray().Key("unavailable").BeginArray();
  for (const std::string& err : e.errors) w.String(err);
  w.EndArray().EndObject();
  std::printf("%s\n", w.str().c_str());
}

void PrintText(const hal::Device::Enumeration& e) {
  if (e.adapters.empty()) std::printf("no WebGPU adapters\n");
  for (const hal::AdapterReport& a : e.adapters) {
    std::printf("%s / %s / %s\n", std::string(hal::ImplKindName(a.impl)).c_str(),
                std::string(hal::BackendName(a.backend)).c_str(),
                std::string(hal::FeatureLevelName(a.feature_level)).c_str());
    std::printf("  library      %s\n", a.library.c_str());
    std::printf("  adapter      %s%s%s (%s)\n", a.description.c_str(),
                a.device.empty() || a.device == a.description ? "" : " / ",
                a.device == a.description ? "" : a.device.c_str(), a.adapter_type.c_str());
    if (!a.vendor.empty())
      std::printf("  vendor       %s %s\n", a.vendor.c_str(), a.architecture.c_str());
    if (a.subgroup_max_size != 0) {
      const bool usable =
          std::find(a.features.begin(), a.features.end(), "subgroups") != a.features.end();
      std::printf("  subgroups    %u to %u threads%s\n", a.subgroup_min_size, a.subgroup_max_size,
                  usable ? "" : " (no subgroups feature)");
    }
    std::printf("  features    ");
    for (const std::string& f : a.features) std::printf(" %s", f.c_str());
    std::printf("\n  limits\n");
    for (auto [name, value] : LimitList(a.limits)) {
      std::printf("    %-44s %llu\n", name, static_cast<unsigned long long>(value));
    }
  }
  for (const std::string& err : e.errors) std::printf("unavailable: %s\n", err.c_str());
}

}  // namespace

int InfoCommand(const Args& args) {
  constexpr const char* kUsage =
      "usage: kiln info [--json] [--verbose]\n"
      "  --json     the same as JSON\n"
      "  --verbose  also show the implementations' own log messages ($KILN_LOG=1 too)";
  auto flags = Flags::Parse(args, {}, {"json"});
  if (!flags.ok()) return Fail(flags.status().message());
  if (flags->help()) return PrintUsage(kUsage);
  if (Status none = flags->NoArguments("kiln info"); !none.ok()) return Fail(none.message());
  hal::Device::Enumeration e = hal::Device::EnumerateAdapters();
  if (flags->Has("json")) {
    PrintJson(e);
  } else {
    PrintText(e);
  }
  return e.adapters.empty() || e.misconfigured ? 1 : 0;
}

int Fail(const std::string& message) {
  // Control bytes a message quotes from a file (a NUL in an attribute, a
  // corrupt name) are escaped: printed raw, a NUL would cut the message.
  std::string text;
  for (const char c : message) {
    const auto b = static_cast<unsigned char>(c);
    if ((b < 0x20 && c != '\n' && c != '\t') || b == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", b);
      text += escaped;
    } else {
      text += c;
    }
  }
  std::fprintf(stderr, "kiln: %s\n", text.c_str());
  return 1;
}

std::string QuotedList(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "'" : ", '") + item + "'";
  return out;
}

std::string ModuleAndFnError(std::string_view command, const std::vector<std::string>& positional,
                             bool has_fn) {
  if (positional.size() != 1) {
    return StrCat(command, " takes one module file; got ", positional.size(),
                  positional.empty() ? "" : ": " + QuotedList(positional), " (see --help)");
  }
  if (!has_fn) return StrCat(command, " ", positional[0], ": --fn NAME is needed (the function)");
  return "";
}

}  // namespace kiln::tool
