// Command-line flags of the kiln tool: `--name value`, `--name=value` and
// boolean `--name`. Unknown flags are errors that name the flag.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kiln/hal/device.h"
#include "kiln/support/status.h"

namespace kiln::tool {

class Flags {
 public:
  // `valued` flags take a value; `booleans` do not. Positional arguments are
  // kept in order.
  static StatusOr<Flags> Parse(const std::vector<std::string>& args,
                               const std::set<std::string>& valued,
                               const std::set<std::string>& booleans);

  bool Has(const std::string& name) const { return values_.count(name) != 0; }
  std::optional<std::string> Get(const std::string& name) const;
  StatusOr<uint64_t> GetUint(const std::string& name, uint64_t fallback) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

// The flags every device-using command takes.
inline const std::set<std::string> kDeviceFlags = {"impl", "backend", "feature-level"};

// DeviceOptions from --impl, --backend and --feature-level (the environment
// variables apply when a flag is absent).
StatusOr<hal::DeviceOptions> DeviceOptionsFromFlags(const Flags& flags);

}  // namespace kiln::tool
