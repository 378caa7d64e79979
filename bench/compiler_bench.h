// Compiler benchmarks: kiln-generated kernels against hand-written WGSL on
// the same device in the same run, and the time to compile kernels.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/hal/device.h"
#include "kiln/support/status.h"

namespace kiln::bench {

struct MatmulBenchOptions {
  // The source tree's example, by absolute path: the benchmark runs from any folder.
  std::string kir_path = KILN_SOURCE_DIR "/examples/matmul_tiled.kir";
  std::string function = "matmul_tiled";
  uint32_t size = 4096;  // M = N = K
  uint32_t iterations = 10;  // timed matmuls per kernel
};

struct MatmulTiming {
  std::string kernel;
  double ms = 0;       // per matmul: GPU timestamps where available, else wall
  double tflops = 0;
};

struct MatmulBenchResult {
  std::string device;
  bool gpu_timestamps = false;
  uint32_t size = 0;
  MatmulTiming generated, handwritten;
  double max_difference = 0;  // generated vs hand-written, over all of C
  double max_error = 0;       // against a CPU reference on sampled elements
  double generated_over_handwritten() const { return generated.ms / handwritten.ms; }
};

StatusOr<MatmulBenchResult> RunMatmulBench(const std::shared_ptr<hal::Device>& device,
                                           const MatmulBenchOptions& options);

struct CompileTiming {
  std::string file;
  int functions = 0;
  double parse_ms = 0;    // text -> IR, verified
  double compile_ms = 0;  // IR -> lowered -> WGSL + metadata
};

// Median over `repetitions` of compiling each .kir file in `files`.
StatusOr<std::vector<CompileTiming>> RunCompileBench(const std::vector<std::string>& files,
                                                     int repetitions);

// `kiln compile`'s phases on one large module (CPU milliseconds).
struct CompileScaleTiming {
  double megabytes = 0;  // of IR text
  int functions = 0;
  double parse_ms = 0;      // text -> IR
  double verify_ms = 0;     // the module verified
  double compile_ms = 0;    // CompileModule: lowering + WGSL + metadata
  double serialize_ms = 0;  // CompiledModule -> module-file bytes
  double total_ms() const { return parse_ms + verify_ms + compile_ms + serialize_ms; }
  double ms_per_megabyte() const { return total_ms() / megabytes; }
};

// A module of at least `megabytes` MB of IR text: the functions of `files`
// repeated in turn, each copy renamed (name_0, name_1, ...).
StatusOr<std::string> MakeLargeModule(const std::vector<std::string>& files, double megabytes);

// Times each phase of compiling `text` to module-file bytes once, in CPU
// time of the process.
StatusOr<CompileScaleTiming> RunCompileScaleBench(const std::string& text);

}  // namespace kiln::bench
