// kiln: the command-line tool.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "commands.h"

namespace {

constexpr const char* kUsage = R"(usage: kiln <command> [flags]

commands:
  info [--json]                 WebGPU implementations, adapters, features, limits
  demo                          run real kernels on the default device and check them
  compile K.kir -o K.kmod       compile kiln IR to a module (--emit wgsl|ir prints instead)
  run K.kmod --fn NAME --arg n=1000 [--check]
                                run a function on random inputs; --check compares with the
                                interpreter and prints PASS or FAIL
  bench dispatch [--json]       HAL dispatch cost against raw webgpu.h
  bench matmul [--size N]       kiln's tiled matmul against the same in hand-written WGSL
  bench compile [DIR...]        time to compile each kernel of the corpus to WGSL
  bench kernel K.kmod --fn NAME GPU time of one kernel of a module, with its GB/s or FLOP/s
  bench ops [--small] [--json]  the operator library at its judged shapes, each checked,
                                beside a copy ceiling measured in the same run

device flags (all commands that use a device):
  --impl dawn|wgpu              WebGPU implementation ($KILN_IMPL)
  --backend vulkan|opengl|...   backend ($KILN_BACKEND)
  --feature-level core|compatibility
  --trusted                     no robustness transform or workgroup zeroing: for kernels
                                proven in bounds only ($KILN_TRUSTED=1; docs/hal.md)

every command:
  --help, -h                    its usage and flags (or: kiln help <command>)
  --verbose                     show the implementations' own diagnostics ($KILN_LOG=1)
)";

}  // namespace

namespace {

// What a command printed must have reached stdout (a full disk, a closed
// pipe): otherwise the command fails, whatever it returned.
int Finish(int rc) {
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "kiln: writing to standard output failed: %s\n", std::strerror(errno));
    return rc == 0 ? 1 : rc;
  }
  return rc;
}

int Dispatch(const std::string& command, const kiln::tool::Args& args) {
  // Host allocations are sized by the user's input: running out of memory
  // is an error, never an abort.
  try {
    if (command == "info") return kiln::tool::InfoCommand(args);
    if (command == "demo") return kiln::tool::DemoCommand(args);
    if (command == "bench") return kiln::tool::BenchCommand(args);
    if (command == "compile") return kiln::tool::CompileCommand(args);
    if (command == "run") return kiln::tool::RunCommand(args);
  } catch (const std::bad_alloc&) {
    return kiln::tool::Fail("out of host memory");
  } catch (const std::length_error&) {
    return kiln::tool::Fail("out of host memory (a size too large to allocate)");
  }
  std::fprintf(stderr, "kiln: unknown command '%s'\n%s", command.c_str(), kUsage);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && !std::strcmp(argv[1], "help") && argv[2][0] != '-') {
    // `kiln help run` (or `kiln help bench ops`) is `kiln run --help`; one
    // command name, and bench's subcommand.
    const int words = std::strcmp(argv[2], "bench") ? 1 : 2;
    for (int i = 2 + words; i < argc; ++i) {
      if (argv[i][0] != '-') {
        std::fprintf(stderr, "kiln: help takes one command name%s; found '%s' after '%s'\n",
                     words == 2 ? " and bench's subcommand" : "", argv[i], argv[i - 1]);
        return 1;
      }
    }
    if (!std::strcmp(argv[2], "help")) {
      std::fputs(kUsage, stdout);
      return Finish(0);
    }
    kiln::tool::Args args(argv + 3, argv + argc);
    args.push_back("--help");
    return Finish(Dispatch(argv[2], args));
  }
  if (argc < 2 || !std::strcmp(argv[1], "help") || !std::strcmp(argv[1], "--help") ||
      !std::strcmp(argv[1], "-h")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return Finish(argc < 2 ? 1 : 0);
  }
  std::string command = argv[1];
  kiln::tool::Args args(argv + 2, argv + argc);
  return Finish(Dispatch(command, args));
}
