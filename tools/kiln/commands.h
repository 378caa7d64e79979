// The kiln tool's subcommands. Each returns the process exit code and prints
// its own errors.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kiln::tool {

using Args = std::vector<std::string>;

int InfoCommand(const Args& args);
int DemoCommand(const Args& args);
int BenchCommand(const Args& args);
int CompileCommand(const Args& args);
int RunCommand(const Args& args);

// Prints "kiln: <message>" to stderr; returns 1.
int Fail(const std::string& message);

// "'a', 'b'": a command's extra arguments, for its error.
std::string QuotedList(const std::vector<std::string>& items);

// For `command` ("kiln run"), which takes one module file and --fn NAME:
// the message saying which is missing or extra, or "" when both are right.
std::string ModuleAndFnError(std::string_view command, const std::vector<std::string>& positional,
                             bool has_fn);

}  // namespace kiln::tool
