#include "flags.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "kiln/support/log.h"

namespace kiln::tool {

StatusOr<Flags> Flags::Parse(const std::vector<std::string>& args,
                             const std::set<std::string>& valued,
                             const std::set<std::string>& booleans) {
  StatusOr<Flags> flags = ParseAll(args, valued, booleans);
  if (!flags.ok() && !valued.count("help") && !booleans.count("help") && AsksHelp(args)) {
    // --help or -h anywhere wins over what else is wrong: the usage says it.
    Flags help;
    help.help_ = true;
    return help;
  }
  return flags;
}

bool AsksHelp(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") return true;
  }
  return false;
}

StatusOr<Flags> Flags::ParseAll(const std::vector<std::string>& args,
                                const std::set<std::string>& valued,
                                const std::set<std::string>& booleans) {
  Flags flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    // "--name", and the one-letter short form "-o" (or "-o=value").
    const bool short_flag =
        a.size() >= 2 && a[0] == '-' && a[1] != '-' && (a.size() == 2 || a[2] == '=');
    if ((a.rfind("--", 0) != 0 || a == "--") && !short_flag) {
      flags.positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(short_flag ? 1 : 2), value;
    const char* dashes = short_flag ? "-" : "--";  // as the user wrote it
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if ((name == "help" || name == "h") && !valued.count(name) && !booleans.count(name)) {
      if (has_value) return InvalidArgument("flag ", dashes, name, " takes no value");
      flags.help_ = true;
      continue;
    }
    if (name == "verbose" && !valued.count(name)) {
      if (has_value) return InvalidArgument("flag ", dashes, name, " takes no value");
      if (flags.values_.count(name)) {
        return InvalidArgument("flag ", dashes, name, " is given more than once");
      }
      SetLogging(true);
      flags.values_[name] = "true";
      continue;
    }
    if (!valued.count(name) && !booleans.count(name)) {
      return InvalidArgument("unknown flag ", dashes, name);
    }
    if (flags.values_.count(name)) {
      return InvalidArgument("flag ", dashes, name, " is given more than once");
    }
    if (valued.count(name)) {
      if (!has_value) {
        if (i + 1 >= args.size()) return InvalidArgument("flag ", dashes, name, " needs a value");
        KILN_RETURN_IF_ERROR(CheckSeparateValue(StrCat(dashes, name), args[i + 1]));
        value = args[++i];
      }
      flags.values_[name] = value;
    } else {
      if (has_value) return InvalidArgument("flag ", dashes, name, " takes no value");
      flags.values_[name] = "true";
    }
  }
  return flags;
}

Status CheckSeparateValue(const std::string& flag, const std::string& value) {
  if (value.size() > 2 && value.starts_with("--") &&
      std::isalpha(static_cast<unsigned char>(value[2]))) {
    // `--name=value` whether the flag was written -o or --o: the parser
    // takes `=` only after two dashes.
    const std::string name = flag.substr(flag.find_first_not_of('-'));
    return InvalidArgument("flag ", flag, " needs a value, but the next argument is the flag '",
                           value, "' (write --", name, "=", value,
                           " for a value that starts with --)");
  }
  return Status::Ok();
}

Status Flags::NoArguments(std::string_view command) const {
  if (positional_.empty()) return Status::Ok();
  return InvalidArgument(command, " takes no arguments, got '", positional_[0], "' (see --help)");
}

std::optional<std::string> Flags::Get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

bool ParseDecimal(const std::string& text, uint64_t max, uint64_t& out) {
  if (text.empty() || text.size() > 20) return false;
  uint64_t n = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (n > (UINT64_MAX - digit) / 10) return false;
    n = n * 10 + digit;
  }
  if (n > max) return false;
  out = n;
  return true;
}

namespace {

StatusOr<uint64_t> GetUintFrom(const Flags& flags, const std::string& name, uint64_t fallback,
                               uint64_t min, uint64_t max) {
  auto v = flags.Get(name);
  if (!v) return fallback;
  uint64_t n = 0;
  if (!ParseDecimal(*v, max, n) || n < min) {
    return InvalidArgument("flag --", name, " needs a decimal integer from ", min, " to ", max,
                           ", got '", *v, "'");
  }
  return n;
}

}  // namespace

StatusOr<uint64_t> Flags::GetUint(const std::string& name, uint64_t fallback, uint64_t max) const {
  return GetUintFrom(*this, name, fallback, 0, max);
}

StatusOr<uint64_t> Flags::GetPositiveUint(const std::string& name, uint64_t fallback,
                                          uint64_t max) const {
  return GetUintFrom(*this, name, fallback, 1, max);
}

StatusOr<double> Flags::GetNonNegativeDouble(const std::string& name, double fallback) const {
  const std::optional<std::string> v = Get(name);
  if (!v) return fallback;
  const std::string& text = *v;
  char* end = nullptr;
  errno = 0;
  const double d = std::strtod(text.c_str(), &end);
  // Decimal only: no sign, no hex floats, no "inf" or "nan".
  const bool number = !text.empty() && end == text.c_str() + text.size() &&
                      (std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '.') &&
                      text.find_first_of("xX") == std::string::npos;
  // (ERANGE also flags an underflow, to a subnormal or zero: a fine value.)
  if (!number || !std::isfinite(d) || d < 0) {
    return InvalidArgument("flag --", name, " needs a finite non-negative number, got '", text,
                           "'");
  }
  return d;
}

int PrintUsage(const char* usage, bool device_flags) {
  std::printf("%s\n", usage);
  if (device_flags) {
    std::printf(
        "device flags:\n"
        "  --impl dawn|wgpu, --backend vulkan|opengl|..., --feature-level core|compatibility\n"
        "                    the WebGPU implementation and device ($KILN_IMPL, $KILN_BACKEND;\n"
        "                    `kiln --help`)\n");
  }
  return 0;
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
  // --trusted turns trusted mode on; without it, $KILN_TRUSTED decides.
  if (flags.Has("trusted")) options.trusted = true;
  return options;
}

}  // namespace kiln::tool
