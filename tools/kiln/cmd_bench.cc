// kiln bench <name>: benchmarks that print a table (or JSON).
#include <cstdio>

#include "commands.h"
#include "dispatch_bench.h"
#include "flags.h"
#include "kiln/support/json.h"

namespace kiln::tool {
namespace {

int BenchDispatch(const Args& args) {
  std::set<std::string> valued = kDeviceFlags;
  valued.insert({"dispatches", "repetitions", "submits"});
  auto flags = Flags::Parse(args, valued, {"json"});
  if (!flags.ok()) return Fail(flags.status().message());
  auto options = DeviceOptionsFromFlags(*flags);
  if (!options.ok()) return Fail(options.status().message());
  bench::DispatchBenchOptions bo;
  auto dispatches = flags->GetUint("dispatches", bo.dispatches);
  auto repetitions = flags->GetUint("repetitions", bo.repetitions);
  auto submits = flags->GetUint("submits", bo.submits);
  for (auto* v : {&dispatches, &repetitions, &submits}) {
    if (!v->ok()) return Fail(v->status().message());
    if (**v == 0) return Fail("--dispatches, --repetitions and --submits must be positive");
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
    w.Key("raw_submit_us").Number(r->raw_submit_us);
    w.Key("hal_submit_us").Number(r->hal_submit_us);
    w.EndObject();
    std::printf("%s\n", w.str().c_str());
    return 0;
  }
  std::printf("device: %s\n", r->device.c_str());
  std::printf("%u dispatches per command buffer, median of %u\n\n", r->dispatches, bo.repetitions);
  std::printf("%-52s %12s\n", "what (CPU time)", "us");
  std::printf("%-52s %12.3f\n", "raw webgpu.h: record+submit, per dispatch", r->raw_us_per_dispatch);
  std::printf("%-52s %12.3f\n", "kiln HAL one-shot: record+end+submit, per dispatch",
              r->hal_us_per_dispatch);
  std::printf("%-52s %12.3f\n", "kiln HAL / raw", r->ratio());
  std::printf("%-52s %12.3f\n", "kiln HAL reusable: replay, per dispatch", r->replay_us_per_dispatch);
  std::printf("%-52s %12.3f\n", "raw webgpu.h: per submit of one dispatch", r->raw_submit_us);
  std::printf("%-52s %12.3f\n", "kiln HAL: per submit of one dispatch", r->hal_submit_us);
  return 0;
}

}  // namespace

int BenchCommand(const Args& args) {
  if (args.empty()) return Fail("usage: kiln bench dispatch [--json] [device flags]");
  Args rest(args.begin() + 1, args.end());
  if (args[0] == "dispatch") return BenchDispatch(rest);
  return Fail("unknown benchmark '" + args[0] + "' (known: dispatch)");
}

}  // namespace kiln::tool
