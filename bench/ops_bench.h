// The operator benchmark (`kiln bench ops`): each library operator at the
// shapes it is judged on, run once and checked against a CPU reference,
// then timed with GPU timestamps beside the memory-bandwidth ceiling
// measured in the same run (a copy kernel over 4-lane vectors).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/hal/device.h"
#include "kiln/ops/ops.h"
#include "kiln/support/status.h"

namespace kiln::bench {

struct OpsBenchOptions {
  bool small = false;         // small shapes: every operator, checked, in seconds on a CPU device
  uint32_t repetitions = 20;  // timed runs of each workload
  std::string filter;         // run only workloads whose name contains this
  // Replaces the default schedule rule of every matmul workload.
  std::optional<ops::MatmulSchedule> matmul_schedule;
  // Replaces the default tile of the fused attention workloads.
  std::optional<ops::AttentionTile> attention_tile;
  std::string wgsl_dir;  // where given, each workload's WGSL is written there
  // Where given, a single-kernel workload whose file DIR/<name>_<shape>.wgsl
  // exists runs that WGSL instead of the generated one (same interface,
  // checked as always): for trying a hand-edited kernel.
  std::string wgsl_from_dir;
  // Build and compile every workload for the device's limits, run nothing.
  bool compile_only = false;
  // Builds the operators as for a device without subgroups.
  bool no_subgroups = false;
  // Called with the workload's name before its first (checked) run is
  // submitted and with "" once it finished: a caller's watch for kernels
  // that never end (some implementations run the work inside the submit,
  // so no wait's timeout can bound it).
  std::function<void(const std::string&)> watch_check;
};

struct OpsTiming {
  std::string name;     // "matmul f32"
  std::string shape;    // "4096x4096x4096"
  std::string kernels;  // the schedule or kernel sequence, in words
  double ms = 0;        // per run of the workload (all its kernels): median
  // The wall time of the timed submission (all repetitions back to back)
  // per repetition: launch gaps included, overlap of consecutive runs too.
  double wall_ms = 0;
  // Back to back: the median wall time per run of batches of runs (about
  // 50 ms each) recorded in one command buffer without timestamps, after
  // the warm-up. Dispatch overheads between runs are included, as a
  // program issuing the operator repeatedly sees them.
  double back_to_back_ms = 0;
  // The runs whose median `ms` is (at most 2000 timed dispatches in all).
  uint64_t timed_runs = 0;
  // CPU time to build the workload's kernels (the operators' lowering) and
  // compile them to WGSL; not the implementation's pipeline creation.
  double compile_ms = 0;
  double bytes = 0;          // the floor's bytes: every input read once, every output written once
  double flops = 0;          // floating-point operations (0 where not counted)
  bool integer_ops = false;  // `flops` counts integer operations instead (int8 matmul: TOPS)
  double gb_per_s() const { return ms > 0 ? bytes / (ms * 1e6) : 0; }
  double tflops() const { return ms > 0 ? flops / (ms * 1e9) : 0; }
  double back_to_back_gb_per_s() const {
    return back_to_back_ms > 0 ? bytes / (back_to_back_ms * 1e6) : 0;
  }
  double back_to_back_tflops() const {
    return back_to_back_ms > 0 ? flops / (back_to_back_ms * 1e9) : 0;
  }
  // For the memory-bound workloads (no flops counted): the hand-written
  // copy moving the same number of bytes (half read, half written), timed
  // the same way in the same run. A timed dispatch pays a fixed cost (its
  // pass and timestamps), which weighs more on a short kernel; this ceiling
  // pays it too. 0 where not measured.
  double same_bytes_copy_gb_per_s = 0;
  double same_bytes_copy_back_to_back_gb_per_s = 0;
  double max_error = 0;  // against the reference, over the checked elements
  int64_t checked = 0;   // elements compared with the reference
  bool pass = false;
  std::string skip;  // why it did not run (a feature the device lacks)
};

struct OpsBenchResult {
  std::string device;
  bool gpu_timestamps = false;
  // The reductions, softmax and norms combine through subgroup operations
  // (the device has subgroups and they were not turned off).
  bool subgroups = false;
  double copy_gb_per_s = 0;               // the ceiling: bytes read + written by the copy / time
  double copy_back_to_back_gb_per_s = 0;  // the same, timed back to back
  // Peers measured the same way: hand-written vec4 kernels with two input
  // streams (x + b1) and three ((x + b1) * b2), as the add and the chain.
  double add_gb_per_s = 0, mul_add_gb_per_s = 0;
  // The copy of one workgroup's 4 KiB, timed the same way: what a dispatch
  // costs whatever it does (its pass, launch and drain), which every time
  // per dispatch includes.
  double one_workgroup_ms = 0, one_workgroup_back_to_back_ms = 0;
  std::vector<OpsTiming> ops;
};

StatusOr<OpsBenchResult> RunOpsBench(const std::shared_ptr<hal::Device>& device,
                                     const OpsBenchOptions& options);

}  // namespace kiln::bench
