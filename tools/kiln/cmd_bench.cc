// kiln bench <name>: benchmarks that print a table (or JSON).
#include <sys/resource.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <variant>
#include <vector>

#include "commands.h"
#include "compiler_bench.h"
#include "dispatch_bench.h"
#include "flags.h"
#include "kernel_io.h"
#include "kiln/check/check.h"
#include "kiln/check/corpus.h"
#include "kiln/hal/queue.h"
#include "kiln/ir/expr_nodes.h"
#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "kiln/support/json.h"
#include "ops_bench.h"
#include "work.h"

namespace kiln::tool {
namespace {

// Comma-separated decimal integers, each field whole (no sign but '-', no
// spaces, none empty), at most `max_fields` of them; nullopt otherwise.
std::optional<std::vector<long>> ParseIntList(std::string_view text, size_t max_fields) {
  std::vector<long> values;
  for (size_t at = 0; at <= text.size();) {
    size_t comma = text.find(',', at);
    if (comma == std::string_view::npos) comma = text.size();
    const char* first = text.data() + at;
    const char* last = text.data() + comma;
    long v = 0;
    auto [end, error] = std::from_chars(first, last, v);
    if (first == last || error != std::errc() || end != last || values.size() == max_fields) {
      return std::nullopt;
    }
    values.push_back(v);
    at = comma + 1;
  }
  return values;
}

int BenchDispatch(const Args& args) {
  std::set<std::string> valued = kDeviceFlags;
  valued.insert({"dispatches", "repetitions", "submits"});
  auto flags = Flags::Parse(args, valued, {"json", "trusted"});
  if (!flags.ok()) return Fail(flags.status().message());
  if (flags->help()) {
    return PrintUsage(
        "usage: kiln bench dispatch [--dispatches N] [--repetitions N] [--submits N] [--json] "
        "[--trusted]",
        true);
  }
  if (Status none = flags->NoArguments("kiln bench dispatch"); !none.ok())
    return Fail(none.message());
  auto options = DeviceOptionsFromFlags(*flags);
  if (!options.ok()) return Fail(options.status().message());
  bench::DispatchBenchOptions bo;
  // At most a million each (as bench kernel's counts): one command buffer
  // records every dispatch of a repetition, and its memory grows with them.
  auto dispatches = flags->GetPositiveUint("dispatches", bo.dispatches, 1000000);
  auto repetitions = flags->GetPositiveUint("repetitions", bo.repetitions, 1000000);
  auto submits = flags->GetPositiveUint("submits", bo.submits, 1000000);
  for (auto* v : {&dispatches, &repetitions, &submits}) {
    if (!v->ok()) return Fail(v->status().message());
  }
  bo.dispatches = static_cast<uint32_t>(*dispatches);
  bo.repetitions = static_cast<uint32_t>(*repetitions);
  bo.submits = static_cast<uint32_t>(*submits);
  auto device = hal::Device::Create(*options);
  if (!device.ok()) return Fail(device.status().message());
  auto r = bench::RunDispatchBench(*device, bo);
  if (!r.ok()) return Fail(r.status().message());
  if (flags->Has("json")) {
    JsonWriter w;
    w.BeginObject();
    w.Key("benchmark").String("dispatch");
    w.Key("device").String(r->device);
    w.Key("dispatches").Uint(r->dispatches);
    w.Key("raw_us_per_dispatch").Number(r->raw_us_per_dispatch);
    w.Key("hal_us_per_dispatch").Number(r->hal_us_per_dispatch);
    w.Key("hal_over_raw").Number(r->ratio());
    w.Key("replay_us_per_dispatch").Number(r->replay_us_per_dispatch);
    w.Key("runtime_us_per_dispatch").Number(r->runtime_us_per_dispatch);
    w.Key("runtime_over_hal").Number(r->runtime_ratio());
    w.Key("raw_submit_us").Number(r->raw_submit_us);
    w.Key("hal_submit_us").Number(r->hal_submit_us);
    w.EndObject();
    std::printf("%s\n", w.str().c_str());
    return 0;
  }
  std::printf("device: %s\n", r->device.c_str());
  std::printf("%u dispatches per command buffer, median of %u\n\n", r->dispatches, bo.repetitions);
  std::printf("%-52s %12s\n", "what (CPU time)", "us");
  std::printf("%-52s %12.3f\n", "raw webgpu.h: record+submit, per dispatch",
              r->raw_us_per_dispatch);
  std::printf("%-52s %12.3f\n", "kiln HAL one-shot: record+end+submit, per dispatch",
              r->hal_us_per_dispatch);
  std::printf("%-52s %12.3f\n", "kiln HAL / raw", r->ratio());
  std::printf("%-52s %12.3f\n", "kiln runtime: Function::Record+end+submit, per dispatch",
              r->runtime_us_per_dispatch);
  std::printf("%-52s %12.3f\n", "  runtime / HAL", r->runtime_ratio());
  std::printf("%-52s %12.3f\n", "kiln HAL reusable: replay, per dispatch",
              r->replay_us_per_dispatch);
  std::printf("%-52s %12.3f\n", "raw webgpu.h: per submit of one dispatch", r->raw_submit_us);
  std::printf("%-52s %12.3f\n", "kiln HAL: per submit of one dispatch", r->hal_submit_us);
  return 0;
}

int BenchMatmul(const Args& args) {
  std::set<std::string> valued = kDeviceFlags;
  valued.insert({"size", "kir", "iterations"});
  auto flags = Flags::Parse(args, valued, {"json", "trusted"});
  if (!flags.ok()) return Fail(flags.status().message());
  if (flags->help()) {
    return PrintUsage(
        "usage: kiln bench matmul [--size N] [--iterations N] [--kir FILE] [--json] [--trusted]\n"
        "  --kir FILE  the kiln IR matmul (default: examples/matmul_tiled.kir of the source tree)",
        true);
  }
  if (Status none = flags->NoArguments("kiln bench matmul"); !none.ok())
    return Fail(none.message());
  auto options = DeviceOptionsFromFlags(*flags);
  if (!options.ok()) return Fail(options.status().message());
  bench::MatmulBenchOptions mo;
  auto size = flags->GetPositiveUint("size", mo.size, UINT32_MAX);
  auto iterations = flags->GetPositiveUint("iterations", mo.iterations, UINT32_MAX);
  if (!size.ok()) return Fail(size.status().message());
  if (!iterations.ok()) return Fail(iterations.status().message());
  mo.size = static_cast<uint32_t>(*size);
  mo.iterations = static_cast<uint32_t>(*iterations);
  if (auto kir = flags->Get("kir")) mo.kir_path = *kir;
  auto device = hal::Device::Create(*options);
  if (!device.ok()) return Fail(device.status().message());
  auto r = bench::RunMatmulBench(*device, mo);
  if (!r.ok()) return Fail(r.status().ToString());
  const bool ok = r->max_difference <= 1e-3 * r->size && r->max_error <= 1e-3 * r->size;
  if (flags->Has("json")) {
    JsonWriter w;
    w.BeginObject().Key("benchmark").String("matmul");
    w.Key("device").String(r->device).Key("size").Uint(r->size);
    w.Key("timing").String(r->gpu_timestamps ? "gpu timestamps, median per dispatch"
                                             : "wall time per dispatch");
    for (const auto* t : {&r->generated, &r->handwritten}) {
      w.Key(t == &r->generated ? "generated" : "handwritten").BeginObject();
      w.Key("kernel").String(t->kernel).Key("ms").Number(t->ms).Key("tflops").Number(t->tflops);
      w.EndObject();
    }
    w.Key("generated_over_handwritten").Number(r->generated_over_handwritten());
    w.Key("max_difference").Number(r->max_difference).Key("max_error").Number(r->max_error);
    w.Key("check").String(ok ? "PASS" : "FAIL");
    w.EndObject();
    std::printf("%s\n", w.str().c_str());
    return ok ? 0 : 1;
  }
  std::printf("device: %s\n", r->device.c_str());
  std::printf("f32 matmul %u^3, 16x16 tiled; %s\n\n", r->size,
              r->gpu_timestamps ? "GPU timestamps, median per dispatch" : "wall time per dispatch");
  std::printf("%-48s %10s %10s\n", "kernel", "ms", "TFLOP/s");
  for (const auto* t : {&r->generated, &r->handwritten}) {
    std::printf("%-48s %10.3f %10.2f\n", t->kernel.c_str(), t->ms, t->tflops);
  }
  std::printf("%-48s %10.3f\n", "generated / hand-written time", r->generated_over_handwritten());
  std::printf("\nmax |generated - hand-written| %g, max error vs CPU (64 samples) %g: %s\n",
              r->max_difference, r->max_error, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

int BenchOps(const Args& args) {
  std::set<std::string> valued = kDeviceFlags;
  valued.insert({"repetitions", "filter", "matmul-schedule", "attention-tile", "wgsl", "wgsl-from",
                 "timeout"});
  auto flags =
      Flags::Parse(args, valued, {"json", "trusted", "small", "compile-only", "no-subgroups"});
  if (!flags.ok()) return Fail(flags.status().message());
  if (flags->help()) {
    return PrintUsage(
        "usage: kiln bench ops [--small] [--filter TEXT] [--repetitions N] [--json] [--trusted]\n"
        "  --small          every operator at small shapes, every output element checked\n"
        "  --filter TEXT    only the workloads whose name contains TEXT\n"
        "  --repetitions N  timed runs of each workload (default 20)\n"
        "  --wgsl DIR       write each workload's WGSL to DIR/<name>_<shape>.wgsl (a workload\n"
        "                   of several kernels: DIR/<name>_<shape>.<kernel>.wgsl each)\n"
        "  --wgsl-from DIR  run the files --wgsl names, where they exist, instead of the\n"
        "                   generated WGSL (a hand-edited kernel, same bindings and entry\n"
        "                   point, its own workgroup size and the generated workgroup\n"
        "                   count; checked as always)\n"
        "  --compile-only   build and compile every workload (CPU ms), run nothing\n"
        "  --no-subgroups   build the operators as for a device without subgroups (the\n"
        "                   shared-memory combines), to compare the two\n"
        "  --matmul-schedule "
        "ROWS,COLS,K_TILE,DOUBLE,UNROLL[,REGISTERS[,BRANCH_FREE[,FMA[,THREADS_Y]]]]\n"
        "                   the matmuls' schedule instead of the rule's (2,2,16,1,1: a\n"
        "                   128x128 tile, k 16, double-buffered, unrolled; ROWS and COLS 1, 2\n"
        "                   or 4, K_TILE 8, 16 or 32; REGISTERS 1: single-buffered tiles copied\n"
        "                   ahead through registers, BRANCH_FREE 1: every k-step loading\n"
        "                   (copied ahead through registers or double-buffered), 2: and\n"
        "                   storing (no_branch), 3: the last k-step peeled (both through\n"
        "                   registers),\n"
        "                   FMA 1: sums of products as fma, THREADS_Y 8: workgroups of\n"
        "                   8 x 16 threads; docs/ops.md)\n"
        "  --attention-tile QUERIES,KEYS[,OWN_V[,UNROLL[,UNSIGNED]]]  the fused attention's tile\n"
        "                   instead of the rule's (on the H200 64,32,1,1,1 through Dawn,\n"
        "                   64,32,1,0,0 through wgpu-native);\n"
        "                   OWN_V 1: V's blocks in a buffer of their own, UNROLL 1: the\n"
        "                   scores' loop over D unrolled, UNSIGNED 1: index arithmetic\n"
        "                   in u32 (docs/ops.md)\n"
        "  --timeout SECONDS each workload's first run must finish by then (default 300, 0: no\n"
        "                   limit), or kiln exits at once with an error, the work left running\n"
        "Each workload runs once from poisoned outputs and is checked against a CPU reference\n"
        "(all elements with --small, 4096 sampled ones otherwise), then is timed: the median\n"
        "over the repetitions of the GPU time of its kernels. GB/s is the floor's bytes (each\n"
        "input read once, each output written once) over that time, beside the bandwidth of a\n"
        "hand-written vec4 copy measured in the same run, and for memory-bound operators of\n"
        "that copy moving the same bytes; TFLOP/s counts 2 M N K for a matmul\n"
        "(TOPS for the int8 matmul, whose check is exact). \"Back to back\" is the wall time per\n"
        "run of batches of runs in one command buffer without timestamps (the copy too): the\n"
        "throughput a program issuing the operator repeatedly sees. Exits 1 if any check fails.",
        true);
  }
  if (Status none = flags->NoArguments("kiln bench ops"); !none.ok()) return Fail(none.message());
  auto options = DeviceOptionsFromFlags(*flags);
  if (!options.ok()) return Fail(options.status().message());
  bench::OpsBenchOptions oo;
  oo.small = flags->Has("small");
  oo.compile_only = flags->Has("compile-only");
  oo.no_subgroups = flags->Has("no-subgroups");
  auto timeout = TimeoutFlag(*flags);
  if (!timeout.ok()) return Fail(timeout.status().message());
  Watchdog watchdog(*timeout);
  oo.watch_check = [&watchdog](const std::string& what) {
    if (what.empty()) {
      watchdog.Disarm();
    } else {
      watchdog.Arm(what);
    }
  };
  auto repetitions = flags->GetPositiveUint("repetitions", oo.repetitions, 100000);
  if (!repetitions.ok()) return Fail(repetitions.status().message());
  oo.repetitions = static_cast<uint32_t>(*repetitions);
  if (auto filter = flags->Get("filter")) {
    if (filter->empty())
      return Fail("--filter is empty (it keeps the workloads whose name holds it)");
    oo.filter = *filter;
  }
  if (auto dir = flags->Get("wgsl")) {
    if (dir->empty()) return Fail("flag --wgsl needs a directory");
    oo.wgsl_dir = *dir;
  }
  if (auto dir = flags->Get("wgsl-from")) {
    // A folder that is not there would run the generated kernels instead.
    std::error_code error;
    if (dir->empty() || !std::filesystem::is_directory(*dir, error)) {
      return Fail("flag --wgsl-from: '" + *dir + "' is not a directory");
    }
    oo.wgsl_from_dir = *dir;
  }
  if (auto text = flags->Get("matmul-schedule")) {
    // Five to nine integers; flags 0 or 1; BRANCH_FREE (the seventh) a
    // te::LastCopy, 0 to 3; THREADS_Y (the ninth) 8 or 16.
    const std::optional<std::vector<long>> parsed = ParseIntList(*text, 9);
    long v[9] = {0, 0, 0, 0, 0, 0, 0, 0, 16};
    if (parsed) std::copy(parsed->begin(), parsed->end(), v);
    bool flags_valid = v[8] == 8 || v[8] == 16;
    // (ROWS, COLS and K_TILE as int; the schedule's check says which it takes.)
    for (int i = 0; i < 3; ++i) flags_valid &= v[i] >= INT_MIN && v[i] <= INT_MAX;
    for (int i = 3; i < 8; ++i) flags_valid &= v[i] >= 0 && v[i] <= (i == 6 ? 3 : 1);
    if (!parsed || parsed->size() < 5 || !flags_valid) {
      return Fail(
          "--matmul-schedule takes "
          "ROWS,COLS,K_TILE,DOUBLE,UNROLL[,REGISTERS[,BRANCH_FREE[,FMA[,THREADS_Y]]]] (five to "
          "nine integers, those after K_TILE 0 or 1, BRANCH_FREE 0 to 3, THREADS_Y 8 or 16), got "
          "'" +
          *text + "'");
    }
    oo.matmul_schedule = ops::MatmulSchedule{static_cast<int>(v[0]),
                                             static_cast<int>(v[1]),
                                             static_cast<int>(v[2]),
                                             v[3] == 1,
                                             v[4] == 1,
                                             v[5] == 1,
                                             static_cast<te::LastCopy>(v[6]),
                                             v[7] == 1,
                                             static_cast<int>(v[8])};
  }
  if (auto text = flags->Get("attention-tile")) {
    const std::optional<std::vector<long>> parsed = ParseIntList(*text, 5);
    long v[5] = {0, 0, 0, 0, 0};
    if (parsed) std::copy(parsed->begin(), parsed->end(), v);
    if (!parsed || parsed->size() < 2 ||
        std::any_of(v + 2, v + 5, [](long x) { return x != 0 && x != 1; })) {
      return Fail(
          "--attention-tile takes QUERIES,KEYS[,OWN_V[,UNROLL[,UNSIGNED]]] (two integers, then "
          "0 or 1 each), got '" +
          *text + "'");
    }
    oo.attention_tile = ops::AttentionTile{v[0], v[1], v[2] == 1, v[3] == 1, v[4] == 1};
  }
  auto device = hal::Device::Create(*options);
  if (!device.ok()) return Fail(device.status().message());
  auto r = bench::RunOpsBench(*device, oo);
  if (!r.ok()) return Fail(r.status().ToString());
  bool all_pass = true;
  for (const auto& t : r->ops) all_pass = all_pass && (t.pass || !t.skip.empty());
  const char* timing = r->gpu_timestamps ? "gpu timestamps, median per run"
                                         : "wall time of submit and wait, median per run";
  if (flags->Has("json")) {
    JsonWriter w;
    w.BeginObject().Key("benchmark").String("ops").Key("device").String(r->device);
    w.Key("small").Bool(oo.small);
    // --compile-only measures nothing: no timing and no ceilings to report.
    if (oo.compile_only) {
      w.Key("compile_only").Bool(true);
    } else {
      w.Key("timing").String(timing);
    }
    w.Key("subgroups").Bool(r->subgroups);
    if (!oo.compile_only) {
      w.Key("copy_gb_per_s").Number(r->copy_gb_per_s);
      w.Key("copy_back_to_back_gb_per_s").Number(r->copy_back_to_back_gb_per_s);
      w.Key("hand_written_add_gb_per_s").Number(r->add_gb_per_s);
      w.Key("hand_written_mul_add_gb_per_s").Number(r->mul_add_gb_per_s);
      w.Key("one_workgroup_dispatch_ms").Number(r->one_workgroup_ms);
      w.Key("one_workgroup_dispatch_back_to_back_ms").Number(r->one_workgroup_back_to_back_ms);
    }
    w.Key("ops").BeginArray();
    for (const auto& t : r->ops) {
      w.BeginObject().Key("name").String(t.name).Key("shape").String(t.shape);
      if (!t.skip.empty()) {
        w.Key("skip").String(t.skip).EndObject();
        continue;
      }
      if (oo.compile_only) {
        w.Key("kernels").String(t.kernels).Key("compile_ms").Number(t.compile_ms).EndObject();
        continue;
      }
      w.Key("kernels").String(t.kernels).Key("ms").Number(t.ms).Key("wall_ms").Number(t.wall_ms);
      w.Key("compile_ms").Number(t.compile_ms);
      w.Key("bytes").Number(t.bytes);
      w.Key("gb_per_s").Number(t.gb_per_s());
      w.Key("fraction_of_copy").Number(t.gb_per_s() / r->copy_gb_per_s);
      w.Key("back_to_back_ms").Number(t.back_to_back_ms);
      w.Key("timed_runs").Number(static_cast<double>(t.timed_runs));
      w.Key("back_to_back_fraction_of_copy")
          .Number(t.back_to_back_gb_per_s() / r->copy_back_to_back_gb_per_s);
      if (t.same_bytes_copy_gb_per_s > 0) {
        w.Key("same_bytes_copy_gb_per_s").Number(t.same_bytes_copy_gb_per_s);
        w.Key("fraction_of_same_bytes_copy").Number(t.gb_per_s() / t.same_bytes_copy_gb_per_s);
        w.Key("back_to_back_fraction_of_same_bytes_copy")
            .Number(t.back_to_back_gb_per_s() / t.same_bytes_copy_back_to_back_gb_per_s);
      }
      if (t.flops > 0 && t.integer_ops) {
        w.Key("int_ops").Number(t.flops).Key("tops").Number(t.tflops());
        w.Key("back_to_back_tops").Number(t.back_to_back_tflops());
      } else if (t.flops > 0) {
        w.Key("flops").Number(t.flops).Key("tflops").Number(t.tflops());
        w.Key("back_to_back_tflops").Number(t.back_to_back_tflops());
      }
      w.Key("checked").Uint(t.checked).Key("max_error").Number(t.max_error);
      w.Key("check").String(t.pass ? "PASS" : "FAIL").EndObject();
    }
    w.EndArray().EndObject();
    std::printf("%s\n", w.str().c_str());
    return all_pass ? 0 : 1;
  }
  if (oo.compile_only) {
    std::printf("device: %s (limits only; nothing runs)\n\n%-32s %-26s %s\n", r->device.c_str(),
                "operator", "shape", "built and compiled (CPU ms)");
    for (const auto& t : r->ops) {
      if (!t.skip.empty()) {
        std::printf("%-32s %-26s SKIP: %s\n", t.name.c_str(), t.shape.c_str(), t.skip.c_str());
      } else {
        std::printf("%-32s %-26s %.2f\n", t.name.c_str(), t.shape.c_str(), t.compile_ms);
      }
    }
    return 0;
  }
  std::printf(
      "device: %s\n%s; ceiling: hand-written vec4 copy %.1f GB/s (read + write), "
      "%.1f GB/s back to back\n",
      r->device.c_str(), timing, r->copy_gb_per_s, r->copy_back_to_back_gb_per_s);
  std::printf("row combines: %s\n", r->subgroups      ? "subgroup operations"
                                    : oo.no_subgroups ? "shared-memory tree (--no-subgroups)"
                                                      : "shared-memory tree (no subgroups)");
  std::printf(
      "peers, hand-written the same way: x + b1 %.1f GB/s (%.0f%% of copy), "
      "(x + b1) * b2 %.1f GB/s (%.0f%%)\n",
      r->add_gb_per_s, 100 * r->add_gb_per_s / r->copy_gb_per_s, r->mul_add_gb_per_s,
      100 * r->mul_add_gb_per_s / r->copy_gb_per_s);
  std::printf(
      "one workgroup's dispatch (its 4 KiB copied): %.4f ms per dispatch, %.4f ms back to back "
      "(the fixed cost inside every time per dispatch)\n\n",
      r->one_workgroup_ms, r->one_workgroup_back_to_back_ms);
  std::printf("%-32s %-26s %10s %9s %7s %11s  %s\n", "operator", "shape", "ms", "GB/s", "of copy",
              "TFLOP/s", "check");
  for (const auto& t : r->ops) {
    if (!t.skip.empty()) {
      std::printf("%-32s %-26s SKIP: %s\n", t.name.c_str(), t.shape.c_str(), t.skip.c_str());
      continue;
    }
    std::string tflops;
    if (t.flops > 0) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.2f%s", t.tflops(), t.integer_ops ? " TOPS" : "");
      tflops = buf;
    }
    std::printf("%-32s %-26s %10.4f %9.1f %6.0f%% %11s  %s (%lld elements, max error %.2g)\n",
                t.name.c_str(), t.shape.c_str(), t.ms, t.gb_per_s(),
                100 * t.gb_per_s() / r->copy_gb_per_s, tflops.c_str(), t.pass ? "PASS" : "FAIL",
                static_cast<long long>(t.checked), t.max_error);
    std::string back_to_back_rate;
    if (t.flops > 0) {
      char buf[48];
      std::snprintf(buf, sizeof buf, ", %.2f %s", t.back_to_back_tflops(),
                    t.integer_ops ? "TOPS" : "TFLOP/s");
      back_to_back_rate = buf;
    }
    std::printf(
        "%-32s   %s; back to back %.4f ms per run (%.0f%% of copy%s); wall %.4f ms per timed "
        "run; built and compiled in %.1f ms\n",
        "", t.kernels.c_str(), t.back_to_back_ms,
        100 * t.back_to_back_gb_per_s() / r->copy_back_to_back_gb_per_s, back_to_back_rate.c_str(),
        t.wall_ms, t.compile_ms);
    if (t.same_bytes_copy_gb_per_s > 0) {
      std::printf(
          "%-32s   a copy of the same bytes: %.1f GB/s, so %.0f%% of it per dispatch, %.0f%% back "
          "to back\n",
          "", t.same_bytes_copy_gb_per_s, 100 * t.gb_per_s() / t.same_bytes_copy_gb_per_s,
          100 * t.back_to_back_gb_per_s() / t.same_bytes_copy_back_to_back_gb_per_s);
    }
  }
  return all_pass ? 0 : 1;
}

// kiln bench compile --megabytes 2,20 [DIR...]: kiln compile's phases on
// modules of those sizes made by repeating the functions of DIR's kernels
// (default examples/).
// The .kir files of `paths`: a folder's, or a file itself. A path that
// does not exist, or a list that holds no .kir file, is an error naming it.
StatusOr<std::vector<std::string>> KirFiles(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    std::error_code error;
    if (std::filesystem::is_directory(p, error)) {
      for (const std::string& f : check::ListKirFiles(p)) files.push_back(f);
    } else if (std::filesystem::is_regular_file(p, error) && p.ends_with(".kir")) {
      files.push_back(p);
    } else if (!std::filesystem::exists(p, error)) {
      return InvalidArgument("'", p, "' does not exist");
    } else {
      return InvalidArgument("'", p, "' is neither a folder nor a .kir file");
    }
  }
  if (files.empty()) {
    std::string listed;
    for (const std::string& p : paths) listed += (listed.empty() ? "" : ", ") + p;
    return InvalidArgument("no .kir files in ", listed);
  }
  return files;
}

// The largest module `bench compile --megabytes` generates.
constexpr double kMaxScaleMegabytes = 512;

int BenchCompileScale(const Flags& flags) {
  std::vector<double> sizes;
  if (flags.Get("megabytes")->empty()) {
    return Fail(StrCat("--megabytes takes sizes in MB, each above 0 and at most ",
                       kMaxScaleMegabytes, ", separated by commas, got ''"));
  }
  const std::string text = *flags.Get("megabytes");
  if (text.back() == ',') {
    return Fail(StrCat("--megabytes takes sizes in MB, each above 0 and at most ",
                       kMaxScaleMegabytes, ", separated by commas, got '", text,
                       "' (a comma with no size after it)"));
  }
  std::istringstream list(text);
  for (std::string item; std::getline(list, item, ',');) {
    char* end = nullptr;
    const double mb = std::strtod(item.c_str(), &end);
    // (Compiling takes several times the module's size in memory.)
    if (item.empty() || *end != '\0' || !(mb > 0) || mb > kMaxScaleMegabytes ||
        item.find_first_of("xX") != std::string::npos) {
      return Fail(StrCat("--megabytes takes sizes in MB, each above 0 and at most ",
                         kMaxScaleMegabytes, ", separated by commas, got '", item, "'"));
    }
    sizes.push_back(mb);
  }
  std::vector<std::string> dirs = flags.positional();
  if (dirs.empty()) dirs = {KILN_SOURCE_DIR "/examples"};
  auto kir = KirFiles(dirs);
  if (!kir.ok()) return Fail(kir.status().message());
  const std::vector<std::string>& files = *kir;
  const bool json = flags.Has("json");
  JsonWriter w;
  w.BeginObject().Key("benchmark").String("compile-scale").Key("modules").BeginArray();
  if (!json) {
    std::printf(
        "kiln compile's phases on one module of the functions of %zu file(s), repeated; "
        "CPU ms\n\n",
        files.size());
    std::printf("%8s %7s %10s %10s %10s %10s %10s %9s %9s\n", "MB", "fns", "parse ms", "verify ms",
                "compile ms", "write ms", "total ms", "ms / MB", "peak MB");
  }
  for (double mb : sizes) {
    auto text = bench::MakeLargeModule(files, mb);
    if (!text.ok()) return Fail(text.status().ToString());
    auto t = bench::RunCompileScaleBench(*text);
    if (!t.ok()) return Fail(t.status().ToString());
    // The process's high-water mark: sizes run in the order given, so with
    // growing sizes it is this size's peak.
    rusage usage = {};
    getrusage(RUSAGE_SELF, &usage);
    const double peak_mb = usage.ru_maxrss / 1024.0;
    if (json) {
      w.BeginObject().Key("megabytes").Number(t->megabytes).Key("functions").Int(t->functions);
      w.Key("parse_ms").Number(t->parse_ms).Key("verify_ms").Number(t->verify_ms);
      w.Key("compile_ms").Number(t->compile_ms).Key("serialize_ms").Number(t->serialize_ms);
      w.Key("ms_per_megabyte").Number(t->ms_per_megabyte()).Key("peak_rss_mb").Number(peak_mb);
      w.EndObject();
    } else {
      std::printf("%8.2f %7d %10.1f %10.1f %10.1f %10.1f %10.1f %9.1f %9.0f\n", t->megabytes,
                  t->functions, t->parse_ms, t->verify_ms, t->compile_ms, t->serialize_ms,
                  t->total_ms(), t->ms_per_megabyte(), peak_mb);
    }
  }
  if (json) {
    w.EndArray().EndObject();
    std::printf("%s\n", w.str().c_str());
  }
  return 0;
}

int BenchCompile(const Args& args) {
  auto flags = Flags::Parse(args, {"repetitions", "megabytes"}, {"json"});
  if (!flags.ok()) return Fail(flags.status().message());
  if (flags->help()) {
    return PrintUsage(
        "usage: kiln bench compile [DIR...] [--repetitions N] [--json]\n"
        "       kiln bench compile --megabytes A,B,... [--json]\n"
        "  DIR          folders of .kir files (default: tests/corpus and examples of the source "
        "tree)\n"
        "  --megabytes  compile generated modules of these sizes and report time per MB");
  }
  if (flags->Get("megabytes")) {
    if (flags->Has("repetitions")) {
      return Fail("--repetitions does not apply to --megabytes (each size is compiled once)");
    }
    return BenchCompileScale(*flags);
  }
  auto reps = flags->GetPositiveUint("repetitions", 5, INT32_MAX);
  if (!reps.ok()) return Fail(reps.status().message());
  std::vector<std::string> dirs = flags->positional();
  if (dirs.empty()) dirs = {KILN_SOURCE_DIR "/tests/corpus", KILN_SOURCE_DIR "/examples"};
  auto kir = KirFiles(dirs);
  if (!kir.ok()) return Fail(kir.status().message());
  const std::vector<std::string>& files = *kir;
  auto timings = bench::RunCompileBench(files, static_cast<int>(*reps));
  if (!timings.ok()) return Fail(timings.status().ToString());
  double parse = 0, compile = 0;
  JsonWriter w;
  w.BeginObject().Key("benchmark").String("compile").Key("kernels").BeginArray();
  if (!flags->Has("json")) {
    std::printf("median of %llu; parse = text to verified IR, compile = lowering + WGSL\n\n",
                static_cast<unsigned long long>(*reps));
    std::printf("%-44s %4s %10s %10s\n", "file", "fns", "parse ms", "compile ms");
  }
  for (const auto& t : *timings) {
    parse += t.parse_ms;
    compile += t.compile_ms;
    if (flags->Has("json")) {
      w.BeginObject().Key("file").String(t.file).Key("functions").Int(t.functions);
      w.Key("parse_ms").Number(t.parse_ms).Key("compile_ms").Number(t.compile_ms).EndObject();
    } else {
      std::printf("%-44s %4d %10.3f %10.3f\n", t.file.c_str(), t.functions, t.parse_ms,
                  t.compile_ms);
    }
  }
  if (flags->Has("json")) {
    w.EndArray().Key("total_parse_ms").Number(parse).Key("total_compile_ms").Number(compile);
    w.EndObject();
    std::printf("%s\n", w.str().c_str());
  } else {
    std::printf("%-44s %4zu %10.3f %10.3f\n", "total", timings->size(), parse, compile);
  }
  return 0;
}

// The floating-point operations a kernel declares per dispatch (work.h);
// nullopt where it declares none.
StatusOr<std::optional<double>> DeclaredFlops(const std::string& source_ir,
                                              const std::vector<runtime::Arg>& args) {
  if (source_ir.empty()) return std::optional<double>();
  KILN_ASSIGN_OR_RETURN(ir::Function f, ir::ParseFunction(source_ir));
  return DeclaredWork(f, args);
}

// kiln bench kernel K.kmod --fn NAME --arg ...: one compiled function on
// random inputs, timed per dispatch.
int BenchKernel(const Args& args) {
  constexpr const char* kKernelUsage =
      "usage: kiln bench kernel K.kmod --fn NAME [--arg name=value]... [--repetitions N]\n"
      "                         [--warmup N] [--flops N] [--seed N] [--json] [--trusted]\n"
      "  --arg name=value  a scalar parameter (every scalar parameter needs one)\n"
      "  --repetitions N   timed dispatches (default 100)\n"
      "  --warmup N        untimed dispatches first (default 10)\n"
      "  --flops N         the floating-point operations one dispatch does, to report FLOP/s\n"
      "                    (default: the kernel's \"flops\" attribute, where it declares one)\n"
      "  --seed N          the random inputs' seed (default: a fresh one)\n"
      "  --timeout SECONDS the first warm-up dispatch, run alone, must finish by then (with\n"
      "                    --warmup 0, all the timed dispatches; default 300, 0: no limit),\n"
      "                    or kiln exits at once with an error, the dispatch left running\n"
      "Times each dispatch with GPU timestamps where the device has timestamp-query, else\n"
      "the wall time of a submit and wait of one dispatch; prints the median and minimum,\n"
      "the bytes of the buffer arguments and the implied GB/s (bytes / median time).";
  std::map<std::string, std::map<std::string, std::string>> repeated;
  Args rest;
  Status collected = CollectRepeatedFlags(args, {"arg"}, repeated, rest);
  if (!collected.ok()) {
    return AsksHelp(args) ? PrintUsage(kKernelUsage, true) : Fail(collected.message());
  }
  const auto& scalars = repeated["arg"];
  std::set<std::string> valued = kDeviceFlags;
  valued.insert({"fn", "repetitions", "warmup", "flops", "seed", "timeout"});
  auto flags = Flags::Parse(rest, valued, {"json", "trusted"});
  if (!flags.ok()) return Fail(flags.status().message());
  if (flags->help()) return PrintUsage(kKernelUsage, true);
  if (flags->positional().empty() && !flags->Has("fn")) return Fail(kKernelUsage);
  if (const std::string e =
          ModuleAndFnError("kiln bench kernel", flags->positional(), flags->Has("fn"));
      !e.empty()) {
    return Fail(e);
  }
  const std::string path = flags->positional()[0];
  const std::string name = *flags->Get("fn");
  auto repetitions = flags->GetPositiveUint("repetitions", 100, 1000000);
  if (!repetitions.ok()) return Fail(repetitions.status().message());
  auto warmup = flags->GetUint("warmup", 10, 1000000);
  if (!warmup.ok()) return Fail(warmup.status().message());
  auto flops = flags->GetNonNegativeDouble("flops", 0);
  if (!flops.ok()) return Fail(flops.status().message());
  auto seed = flags->GetUint("seed", 0);
  if (!seed.ok()) return Fail(seed.status().message());
  auto timeout = TimeoutFlag(*flags);
  if (!timeout.ok()) return Fail(timeout.status().message());

  auto compiled = ReadModule(path);
  if (!compiled.ok()) return Fail(compiled.status().ToString());
  const codegen::CompiledFunction* cf = compiled->Find(name);
  if (!cf) return Fail(StrCat(path, ": no function '", name, "'"));
  Status named = check::CheckScalarArgNames(cf->metadata, scalars);
  if (!named.ok()) return Fail(named.message());
  const std::string source_ir = cf->source_ir;  // `compiled` moves into the loader
  auto loaded = LoadKernel(*flags, std::move(*compiled), name);
  if (!loaded.ok()) return Fail(loaded.status().message());
  const std::shared_ptr<hal::Device>& device = loaded->device;
  const runtime::Kernel& fn = *loaded->kernel;
  const codegen::KernelMetadata& md = fn.metadata();
  const bool json = flags->Has("json");
  if (!fn.availability().ok()) {
    if (json) {
      JsonWriter w;
      w.BeginObject().Key("benchmark").String("kernel").Key("function").String(name);
      w.Key("skip").String(fn.availability().message()).EndObject();
      std::printf("%s\n", w.str().c_str());
    } else {
      std::printf("SKIP: %s\n", fn.availability().message().c_str());
    }
    return 1;
  }
  check::CheckOptions inputs;
  inputs.scalar_args = scalars;
  if (flags->Has("seed")) inputs.seed = *seed;
  auto call_args = check::MakeCallArgs(fn, inputs);
  if (!call_args.ok()) return Fail(call_args.status().ToString());
  // The work: --flops, else what the kernel declares.
  double flop_count = *flops;
  bool has_flops = flags->Get("flops").has_value();
  if (!has_flops) {
    auto declared = DeclaredFlops(source_ir, *call_args);
    if (!declared.ok()) return Fail(declared.status().ToString());
    if (declared->has_value()) {
      flop_count = **declared;
      has_flops = true;
    }
  }
  // No dispatch does 1e30 operations; a count beyond it would print an
  // infinite rate.
  if (has_flops && flop_count > 1e30) {
    return Fail(StrCat("the flop count ", flop_count, " of '", name, "' (",
                       flags->Get("flops") ? "--flops" : "its \"flops\" attribute",
                       ") is above 1e30, more than any dispatch does"));
  }
  // Record once: the plan's checks fail here rather than mid-benchmark.
  auto plan = fn.Plan(*call_args);
  if (!plan.ok()) return Fail(plan.status().ToString());
  if (plan->num_blocks_x == 0 || plan->num_blocks_y == 0) {
    return Fail(StrCat("'", name, "' launches no workgroup with these arguments (its grid is ",
                       plan->num_blocks_x, " x ", plan->num_blocks_y,
                       " blocks): there is nothing to time"));
  }
  uint64_t total_bytes = 0;
  for (uint64_t b : plan->buffer_bytes) total_bytes += b;
  // The first warm-up dispatch runs alone under the watchdog: a kernel
  // that never ends is reported, not waited for.
  uint64_t warmups = *warmup;
  if (warmups > 0 && *timeout != hal::kInfinite) {
    Watchdog watchdog(*timeout);
    watchdog.Arm(StrCat("function '", name, "'"));
    Status once = fn.Call(*call_args);
    watchdog.Disarm();
    if (!once.ok()) return Fail(once.ToString());
    --warmups;
  }

  const bool timestamps = device->HasFeature(hal::Feature::kTimestampQuery);
  std::vector<double> ms;
  auto time = [&]() -> Status {
    if (warmups > 0) {
      KILN_ASSIGN_OR_RETURN(auto cb, hal::CommandBuffer::Create(
                                         device, hal::CommandBufferMode::kOneShot, {"warmup"}));
      for (uint64_t i = 0; i < warmups; ++i) KILN_RETURN_IF_ERROR(fn.Record(*cb, *call_args));
      KILN_RETURN_IF_ERROR(cb->End());
      KILN_RETURN_IF_ERROR(hal::SubmitAndWait(*device, *cb));
    }
    if (timestamps) {
      KILN_ASSIGN_OR_RETURN(auto cb,
                            hal::CommandBuffer::Create(device, hal::CommandBufferMode::kOneShot,
                                                       hal::CommandBufferOptions{"bench", true}));
      for (uint64_t i = 0; i < *repetitions; ++i) {
        KILN_RETURN_IF_ERROR(fn.Record(*cb, *call_args));
      }
      KILN_RETURN_IF_ERROR(cb->End());
      KILN_RETURN_IF_ERROR(hal::SubmitAndWait(*device, *cb));
      KILN_ASSIGN_OR_RETURN(auto timings, cb->ReadProfile());
      for (const hal::DispatchTiming& t : timings) ms.push_back(t.gpu_ns / 1e6);
      return Status::Ok();
    }
    KILN_ASSIGN_OR_RETURN(
        auto cb, hal::CommandBuffer::Create(device, hal::CommandBufferMode::kReusable, {"bench"}));
    KILN_RETURN_IF_ERROR(fn.Record(*cb, *call_args));
    KILN_RETURN_IF_ERROR(cb->End());
    for (uint64_t i = 0; i < *repetitions; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      KILN_RETURN_IF_ERROR(hal::SubmitAndWait(*device, *cb));
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    return Status::Ok();
  };
  // With no warm-up, the timed dispatches are the first to run: they are
  // watched instead.
  Watchdog timed_watchdog(*warmup == 0 ? *timeout : hal::kInfinite);
  timed_watchdog.Arm(StrCat("function '", name, "' (", *repetitions, " timed dispatches)"));
  Status timed = time();
  timed_watchdog.Disarm();
  if (!timed.ok()) return Fail(timed.ToString());
  if (ms.empty()) return Fail("no dispatch was timed");
  std::sort(ms.begin(), ms.end());
  const double median = ms[ms.size() / 2];
  const double min = ms.front();
  const double seconds = median / 1e3;
  const double gb_per_s = seconds > 0 ? total_bytes / seconds / 1e9 : 0;
  const double gflop_per_s = seconds > 0 ? flop_count / seconds / 1e9 : 0;
  const char* timing =
      timestamps ? "gpu timestamps" : "wall time of submit and wait (no timestamp-query)";

  if (json) {
    JsonWriter w;
    w.BeginObject().Key("benchmark").String("kernel");
    w.Key("device").String(device->Describe()).Key("module").String(path);
    w.Key("function").String(name).Key("timing").String(timing);
    w.Key("repetitions").Uint(*repetitions).Key("warmup").Uint(*warmup);
    w.Key("median_ms").Number(median).Key("min_ms").Number(min);
    w.Key("buffers").BeginArray();
    size_t b = 0;
    for (const codegen::ParamInfo& p : md.params) {
      if (p.kind != codegen::ParamKind::kBuffer) continue;
      const uint64_t bytes = plan->buffer_bytes[b++];
      w.BeginObject().Key("name").String(p.name).Key("dtype").String(codegen::DTypeName(p.dtype));
      w.Key("elements").Uint(bytes / codegen::DTypeBufferBytes(p.dtype)).Key("bytes").Uint(bytes);
      w.EndObject();
    }
    w.EndArray().Key("bytes").Uint(total_bytes).Key("gb_per_s").Number(gb_per_s);
    if (has_flops) w.Key("flops").Number(flop_count).Key("gflop_per_s").Number(gflop_per_s);
    w.EndObject();
    std::printf("%s\n", w.str().c_str());
    return 0;
  }
  std::printf("device: %s\n", device->Describe().c_str());
  std::printf("%s: %llu dispatches after %llu warm-up; %s\n", name.c_str(),
              static_cast<unsigned long long>(*repetitions),
              static_cast<unsigned long long>(*warmup), timing);
  size_t b = 0;
  for (const codegen::ParamInfo& p : md.params) {
    if (p.kind != codegen::ParamKind::kBuffer) continue;
    const uint64_t bytes = plan->buffer_bytes[b++];
    std::printf("  %-16s %-6s %14llu elements %14llu bytes\n", p.name.c_str(),
                std::string(codegen::DTypeName(p.dtype)).c_str(),
                static_cast<unsigned long long>(bytes / codegen::DTypeBufferBytes(p.dtype)),
                static_cast<unsigned long long>(bytes));
  }
  std::printf("median %.4f ms, min %.4f ms per dispatch\n", median, min);
  std::printf("bytes %llu, %.3f GB/s (bytes of all buffer arguments / median)\n",
              static_cast<unsigned long long>(total_bytes), gb_per_s);
  if (has_flops) std::printf("flops %g, %.3f GFLOP/s\n", flop_count, gflop_per_s);
  return 0;
}

}  // namespace

int BenchCommand(const Args& args) {
  constexpr const char* kUsage =
      "usage: kiln bench dispatch|matmul|compile|kernel|ops [flags]  (kiln bench NAME --help: its "
      "flags)";
  if (args.empty()) return Fail(kUsage);
  Args rest(args.begin() + 1, args.end());
  if (args[0] == "dispatch") return BenchDispatch(rest);
  if (args[0] == "matmul") return BenchMatmul(rest);
  if (args[0] == "compile") return BenchCompile(rest);
  if (args[0] == "kernel") return BenchKernel(rest);
  if (args[0] == "ops") return BenchOps(rest);
  if (AsksHelp(args)) return PrintUsage(kUsage);
  return Fail("unknown benchmark '" + args[0] + "' (" + kUsage + ")");
}

}  // namespace kiln::tool
