// The kiln tool's subcommands. Each returns the process exit code and prints
// its own errors.
#pragma once

#include <string>
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

}  // namespace kiln::tool
