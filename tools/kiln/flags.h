// Command-line flags of the kiln tool: `--name value`, `--name=value` and
// boolean `--name`. Unknown and repeated flags are errors that name the flag.
// `--help` and `-h` are accepted by every command (help()), and so is
// `--verbose`, which turns kiln's log on (kiln/support/log.h: the WebGPU
// implementations' own diagnostics, otherwise kept off the terminal).
#pragma once

#include <cstdint>
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
  // kept in order. `--help` or `-h` anywhere makes any other error moot:
  // the result is help() alone.
  static StatusOr<Flags> Parse(const std::vector<std::string>& args,
                               const std::set<std::string>& valued,
                               const std::set<std::string>& booleans);

  bool Has(const std::string& name) const { return values_.count(name) != 0; }
  // Whether --help or -h was given.
  bool help() const { return help_; }
  std::optional<std::string> Get(const std::string& name) const;
  // A decimal integer in [0, max] (no sign, no other base, nothing after the
  // digits), or `fallback` when the flag is absent.
  StatusOr<uint64_t> GetUint(const std::string& name, uint64_t fallback,
                             uint64_t max = UINT64_MAX) const;
  // The same in [1, max], for counts and limits where 0 means nothing.
  StatusOr<uint64_t> GetPositiveUint(const std::string& name, uint64_t fallback,
                                     uint64_t max) const;
  // A finite, non-negative decimal number, or `fallback` when absent.
  StatusOr<double> GetNonNegativeDouble(const std::string& name, double fallback) const;
  const std::vector<std::string>& positional() const { return positional_; }
  // For commands without arguments: an error naming the first one given.
  Status NoArguments(std::string_view command) const;

 private:
  static StatusOr<Flags> ParseAll(const std::vector<std::string>& args,
                                  const std::set<std::string>& valued,
                                  const std::set<std::string>& booleans);
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
  bool help_ = false;
};

// The error for flag `name` (as written, with its dashes) whose value, given
// as the next argument, is itself a flag (`--print-after --emit wgsl`: a
// forgotten value); `--name=--x` passes such a value on purpose.
Status CheckSeparateValue(const std::string& flag, const std::string& value);

// Whether `text` is a decimal integer (digits only) within [0, max]; sets `out`.
bool ParseDecimal(const std::string& text, uint64_t max, uint64_t& out);

// Whether `--help` or `-h` is among `args` (which then wins over any other
// mistake on the line).
bool AsksHelp(const std::vector<std::string>& args);

// Prints `usage` to stdout for --help, then the device flags where the
// command takes them; returns 0.
int PrintUsage(const char* usage, bool device_flags = false);

// The flags every device-using command takes.
inline const std::set<std::string> kDeviceFlags = {"impl", "backend", "feature-level"};

// DeviceOptions from --impl, --backend, --feature-level and --trusted (the
// environment variables apply when a flag is absent).
StatusOr<hal::DeviceOptions> DeviceOptionsFromFlags(const Flags& flags);

}  // namespace kiln::tool
