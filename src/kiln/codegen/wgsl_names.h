// WGSL identifiers: the names a kernel may not use, and a per-kernel supply of
// fresh, valid, collision-free names.
//
// Why a table: WGSL rejects its keywords and ~150 reserved words as
// identifiers, and while builtin function names and predeclared types may
// legally be shadowed, doing so breaks any later call of the builtin in the
// same scope and is handled differently across WGSL compilers. kiln never
// declares such a name.
#pragma once

#include <string>
#include <string_view>
#include <unordered_set>

namespace kiln::codegen {

// True for WGSL keywords, reserved words, predeclared types and type
// generators, builtin functions, and the context-dependent names kiln's own
// output uses (address spaces, access modes, builtin values).
bool IsReservedWgslName(std::string_view name);

// Turns any string into a WGSL identifier: characters outside [A-Za-z0-9_]
// become '_', a leading digit or a leading "__" (reserved by WGSL) gets a
// prefix, and an empty or all-underscore name becomes "v".
std::string SanitizeWgslIdentifier(std::string_view name);

// Hands out identifiers unique within one WGSL module. Each name is the
// sanitised hint if that is free and not reserved, else the hint with the
// smallest numeric suffix "_N" that is.
//
// Names that kiln's own output declares (helper functions) start with
// kInternalPrefix; hints that begin with it get a "v" in front, so user
// names can never take a helper's name however late the helper is needed.
class NameSupply {
 public:
  static constexpr std::string_view kInternalPrefix = "kiln_";

  std::string Fresh(std::string_view hint);

  // Marks `name` as taken without handing it out (e.g. helper functions).
  void Reserve(std::string_view name) { taken_.insert(std::string(name)); }

  bool IsTaken(std::string_view name) const { return taken_.count(std::string(name)) != 0; }

 private:
  std::unordered_set<std::string> taken_;
};

}  // namespace kiln::codegen
