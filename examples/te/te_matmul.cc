// A matmul defined as a tensor expression and scheduled by hand, then
// compiled by kiln, run on the default device and checked against kiln's
// interpreter on fresh random inputs:
//
//   C[i, j] = sum over k of A[i, k] * B[k, j]      (M x K) @ (K x N)
//
// schedule: a 64 x 64 tile of C per workgroup of 16 x 16 threads, each
// thread a 4 x 4 register tile of C (cache_write, accumulated in place with
// k outside its loops); at each step of 16 along k, 64 x 16 and 16 x 64
// tiles of A and B are copied into shared memory by all the threads
// (cache_read + compute_at), their rows padded against bank conflicts
// (storage_align) and double-buffered.
//
//   kiln_example_te_matmul [M N K] [-o matmul.kmod]
//
// Prints the schedule and the lowered kiln IR, writes the compiled module
// when asked (then `kiln run matmul.kmod --fn te_matmul --arg M=...`), and
// exits 0 only when the GPU's result matches the interpreter's.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <new>
#include <string>

#include "kiln/check/check.h"
#include "kiln/codegen/module_format.h"
#include "kiln/codegen/wgsl_codegen.h"
#include "kiln/hal/device.h"
#include "kiln/ir/printer.h"
#include "kiln/runtime/module.h"
#include "kiln/te/te.h"

namespace {

using namespace kiln;  // NOLINT: an example

// The kernel: the tensor expression and its schedule, lowered for `limits`
// (the device's: the padded, double-buffered tiles take 17 KB of workgroup
// memory, more than WebGPU's default 16 KiB).
StatusOr<ir::Function> BuildMatmul(const TargetLimits& limits) {
  te::Var m = te::SizeVar("M"), n = te::SizeVar("N"), k_extent = te::SizeVar("K");
  te::Tensor A = te::Placeholder("A", {m, k_extent}, ir::kF32);
  te::Tensor B = te::Placeholder("B", {k_extent, n}, ir::kF32);
  te::IterVar k = te::ReduceAxis(k_extent, "k");
  te::Tensor C = te::Compute("C", {m, n}, [&](const std::vector<te::Var>& ij) {
    return te::Sum(A(ij[0], k) * B(k, ij[1]), {k});
  });

  KILN_ASSIGN_OR_RETURN(te::Schedule s, te::Schedule::Create({C}));
  KILN_ASSIGN_OR_RETURN(te::Tensor a_shared, s.CacheRead(A, ir::MemoryScope::kShared, {C}));
  KILN_ASSIGN_OR_RETURN(te::Tensor b_shared, s.CacheRead(B, ir::MemoryScope::kShared, {C}));
  KILN_ASSIGN_OR_RETURN(te::Tensor c_local, s.CacheWrite(C, ir::MemoryScope::kLocal));

  // C: blocks of 64 x 64, threads of 4 x 4 elements.
  te::Stage c = s[C];
  KILN_ASSIGN_OR_RETURN(te::Stage::TileResult block, c.Tile(c.axis(0), c.axis(1), 64, 64));
  KILN_ASSIGN_OR_RETURN(te::Stage::TileResult thread, c.Tile(block.x_inner, block.y_inner, 4, 4));
  KILN_RETURN_IF_ERROR(c.Bind(block.x_outer, te::ThreadAxis::kBlockY));
  KILN_RETURN_IF_ERROR(c.Bind(block.y_outer, te::ThreadAxis::kBlockX));
  KILN_RETURN_IF_ERROR(c.Bind(thread.x_outer, te::ThreadAxis::kThreadY));
  KILN_RETURN_IF_ERROR(c.Bind(thread.y_outer, te::ThreadAxis::kThreadX));

  // Each thread's 4 x 4 accumulators, k outside them.
  te::Stage local = s[c_local];
  KILN_RETURN_IF_ERROR(local.ComputeAt(c, thread.y_outer));
  KILN_ASSIGN_OR_RETURN(te::SplitResult kk, local.Split(local.reduce_axis(0), 16));
  KILN_RETURN_IF_ERROR(local.Reorder({kk.outer, kk.inner, local.axis(0), local.axis(1)}));
  KILN_RETURN_IF_ERROR(local.Unroll(local.axis(0)));
  KILN_RETURN_IF_ERROR(local.Unroll(local.axis(1)));

  // The shared tiles, copied by the 16 x 16 threads at each step of k.
  for (const te::Tensor& t : {a_shared, b_shared}) {
    te::Stage st = s[t];
    KILN_RETURN_IF_ERROR(st.ComputeAt(local, kk.outer));
    KILN_RETURN_IF_ERROR(st.StorageAlign(st.axis(0), 16, 1));
    KILN_RETURN_IF_ERROR(st.DoubleBuffer());
    KILN_ASSIGN_OR_RETURN(te::IterVar fused, st.Fuse(st.axis(0), st.axis(1)));
    KILN_ASSIGN_OR_RETURN(te::SplitResult rows, st.Split(fused, 256));
    KILN_ASSIGN_OR_RETURN(te::SplitResult lanes, st.Split(rows.inner, 16));
    KILN_RETURN_IF_ERROR(st.Bind(lanes.outer, te::ThreadAxis::kThreadY));
    KILN_RETURN_IF_ERROR(st.Bind(lanes.inner, te::ThreadAxis::kThreadX));
  }
  std::printf("schedule:\n%s\n", s.ToString().c_str());
  return te::Lower(s, {C}, {A, B}, "te_matmul", limits);
}

int Run(int argc, char** argv) {
  std::string m = "100", n = "77", k = "33", output;
  int positional = 0;
  for (int a = 1; a < argc; ++a) {
    std::string arg = argv[a];
    if (arg == "-o" && a + 1 < argc) {
      output = argv[++a];
    } else if (positional < 3) {
      (positional == 0 ? m : positional == 1 ? n : k) = arg;
      ++positional;
    } else {
      std::fprintf(stderr, "usage: kiln_example_te_matmul [M N K] [-o FILE.kmod]\n");
      return 2;
    }
  }
  auto device = hal::Device::Create({});
  if (!device.ok()) {
    std::fprintf(stderr, "%s\n", device.status().ToString().c_str());
    return 1;
  }
  std::shared_ptr<hal::Device> dev = *device;
  std::printf("device: %s\n", dev->Describe().c_str());

  auto function = BuildMatmul(runtime::TargetLimitsOf(*dev));
  if (!function.ok()) {
    std::fprintf(stderr, "%s\n", function.status().ToString().c_str());
    return 1;
  }
  std::printf("lowered:\n%s\n", ir::Print(*function).c_str());
  auto compiled = codegen::CompileModule(ir::Module{{*function}}, check::CompileOptionsFor(*dev));
  if (!compiled.ok()) {
    std::fprintf(stderr, "%s\n", compiled.status().ToString().c_str());
    return 1;
  }
  if (!output.empty()) {
    std::ofstream(output, std::ios::binary) << codegen::SerializeModule(*compiled);
    std::printf("wrote %s\n", output.c_str());
  }
  auto module = runtime::LoadedModule::Load(dev, *compiled);
  if (!module.ok()) {
    std::fprintf(stderr, "%s\n", module.status().ToString().c_str());
    return 1;
  }
  auto kernel = (*module)->Find("te_matmul");
  if (!kernel.ok()) {
    std::fprintf(stderr, "%s\n", kernel.status().ToString().c_str());
    return 1;
  }
  check::CheckOptions options;
  options.scalar_args = {{"M", m}, {"N", n}, {"K", k}};
  auto result = check::RunAndCheck(**kernel, *function, options);
  if (!result.ok()) {
    std::fprintf(stderr, "%s\n", result.status().ToString().c_str());
    return 1;
  }
  std::printf("te_matmul M=%s N=%s K=%s:\n%smax error %g: %s\n", m.c_str(), n.c_str(), k.c_str(),
              result->Summary().c_str(), result->max_error, result->pass ? "PASS" : "FAIL");
  return result->pass ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "out of host memory\n");
    return 1;
  } catch (...) {
    std::fprintf(stderr, "unexpected exception\n");
    return 1;
  }
}
