#include "flags.h"

#include <cstdlib>

namespace kiln::tool {

StatusOr<Flags> Flags::Parse(const std::vector<std::string>& args,
                             const std::set<std::string>& valued,
                             const std::set<std::string>& booleans) {
  Flags flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    // "--name", and the one-letter short form "-o".
    const bool short_flag = a.size() == 2 && a[0] == '-' && a[1] != '-';
    if ((a.rfind("--", 0) != 0 || a == "--") && !short_flag) {
      flags.positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(short_flag ? 1 : 2), value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (valued.count(name)) {
      if (!has_value) {
        if (i + 1 >= args.size()) return InvalidArgument("flag --", name, " needs a value");
        value = args[++i];
      }
      flags.values_[name] = value;
    } else if (booleans.count(name)) {
      if (has_value) return InvalidArgument("flag --", name, " takes no value");
      flags.values_[name] = "true";
    } else {
      return InvalidArgument("unknown flag --", name);
    }
  }
  return flags;
}

std::optional<std::string> Flags::Get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

StatusOr<uint64_t> Flags::GetUint(const std::string& name, uint64_t fallback) const {
  auto v = Get(name);
  if (!v) return fallback;
  char* end = nullptr;
  unsigned long long n = std::strtoull(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0') {
    return InvalidArgument("flag --", name, " needs a non-negative integer, got '", *v, "'");
  }
  return static_cast<uint64_t>(n);
}

StatusOr<hal::DeviceOptions> DeviceOptionsFromFlags(const Flags& flags) {
  hal::DeviceOptions options;
  if (auto impl = flags.Get("impl")) {
    KILN_ASSIGN_OR_RETURN(options.impl, hal::ParseImplKind(*impl));
  }
  if (auto backend = flags.Get("backend")) {
    KILN_ASSIGN_OR_RETURN(options.backend, hal::ParseBackend(*backend));
  }
  if (auto level = flags.Get("feature-level")) {
    KILN_ASSIGN_OR_RETURN(options.feature_level, hal::ParseFeatureLevel(*level));
  }
  return options;
}

}  // namespace kiln::tool
