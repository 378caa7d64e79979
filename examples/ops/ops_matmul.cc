// The shortest C++ path to a library operator: kiln's matmul with a fused
// epilogue (C = gelu(A @ B + bias)), built for the default device by its
// default schedule rule, compiled, run on device buffers, and checked
// against a plain loop on the host on fresh random inputs, the output
// poisoned first.
//
//   kiln_example_ops_matmul [M N K]        (default 100 77 33)
//
// Exits 0 only when every element is within the tolerance.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "kiln/check/check.h"
#include "kiln/codegen/wgsl_codegen.h"
#include "kiln/hal/buffer.h"
#include "kiln/hal/device.h"
#include "kiln/ops/ops.h"
#include "kiln/runtime/module.h"

namespace {

using namespace kiln;  // NOLINT: an example

// A device buffer holding `data`.
StatusOr<hal::BufferRef> DeviceCopy(hal::Device& device, const std::vector<float>& data) {
  KILN_ASSIGN_OR_RETURN(hal::BufferRef b, device.allocator().Allocate(data.size() * 4));
  KILN_RETURN_IF_ERROR(hal::Upload(
      device, b, 0, {reinterpret_cast<const uint8_t*>(data.data()), data.size() * sizeof(float)}));
  return b;
}

// gelu as the library computes it (docs/ops.md: the exact form).
double Gelu(double x) {
  return x / 2 * (1 + std::erf(x / std::sqrt(2.0)));
}

Status Run(int64_t m, int64_t n, int64_t k) {
  // 1. A device: the default implementation and back end ($KILN_IMPL,
  //    $KILN_BACKEND; a CPU implementation where no GPU is present).
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<hal::Device> device, hal::Device::Create({}));
  std::printf("device: %s\n", device->Describe().c_str());

  // 2. The operator for this device and these shapes.
  ops::Target target{runtime::TargetLimitsOf(*device), device->HasFeature(hal::Feature::kShaderF16),
                     device->HasFeature(hal::Feature::kSubgroups),
                     std::string(device->impl().name())};
  ops::MatmulOptions options;
  options.bias = ops::TensorType{{n}};
  options.activation = "gelu";
  KILN_ASSIGN_OR_RETURN(ir::Function matmul,
                        ops::Matmul({{m, k}}, {{k, n}}, target, options, "matmul"));

  // 3. Compiled to WGSL and loaded.
  KILN_ASSIGN_OR_RETURN(codegen::CompiledFunction compiled,
                        codegen::CompileFunction(matmul, check::CompileOptionsFor(*device)));
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<runtime::LoadedModule> module,
                        runtime::LoadedModule::Load(device, codegen::CompiledModule{{compiled}}));
  KILN_ASSIGN_OR_RETURN(const runtime::Kernel* kernel, module->Find("matmul"));

  // 4. Inputs on the device, the output poisoned with NaN.
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> a(m * k), b(k * n), bias(n);
  for (std::vector<float>* v : {&a, &b, &bias}) {
    for (float& x : *v) x = uniform(rng);
  }
  std::vector<float> c(m * n, std::numeric_limits<float>::quiet_NaN());
  KILN_ASSIGN_OR_RETURN(hal::BufferRef a_dev, DeviceCopy(*device, a));
  KILN_ASSIGN_OR_RETURN(hal::BufferRef b_dev, DeviceCopy(*device, b));
  KILN_ASSIGN_OR_RETURN(hal::BufferRef bias_dev, DeviceCopy(*device, bias));
  KILN_ASSIGN_OR_RETURN(hal::BufferRef c_dev, DeviceCopy(*device, c));

  // 5. The call: buffers in the order of the kernel's parameters (A, B,
  //    bias, C), then the result read back.
  std::printf("kernel parameters:");
  for (const auto& p : kernel->metadata().params) std::printf(" %s", p.name.c_str());
  std::printf("\n");
  const std::vector<runtime::Arg> args = {runtime::Arg::Buffer(a_dev), runtime::Arg::Buffer(b_dev),
                                          runtime::Arg::Buffer(bias_dev),
                                          runtime::Arg::Buffer(c_dev)};
  KILN_RETURN_IF_ERROR(kernel->Call(args));
  KILN_RETURN_IF_ERROR(hal::Download(
      *device, c_dev, 0, {reinterpret_cast<uint8_t*>(c.data()), c.size() * sizeof(float)}));

  // 6. Checked against the host.
  double worst = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = bias[j];
      for (int64_t p = 0; p < k; ++p) sum += double(a[i * k + p]) * b[p * n + j];
      const double want = Gelu(sum);
      const double error = std::abs(c[i * n + j] - want) / (1.0 + std::abs(want));
      if (!(error <= worst)) worst = std::isnan(error) ? INFINITY : error;
    }
  }
  const bool pass = worst <= 1e-4;
  std::printf("matmul %lldx%lld @ %lldx%lld + bias, gelu: max relative error %g: %s\n",
              static_cast<long long>(m), static_cast<long long>(k), static_cast<long long>(k),
              static_cast<long long>(n), worst, pass ? "PASS" : "FAIL");
  return pass ? Status() : Internal("the device's result differs from the host's");
}

}  // namespace

int main(int argc, char** argv) {
  int64_t shape[3] = {100, 77, 33};
  if (argc != 1 && argc != 4) {
    std::fprintf(stderr, "usage: kiln_example_ops_matmul [M N K]\n");
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    char* end = nullptr;
    const long long v = std::strtoll(argv[i], &end, 10);
    if (end == argv[i] || *end != '\0' || v < 1 || v > 4096) {
      std::fprintf(stderr, "kiln_example_ops_matmul: %s is not a size from 1 to 4096\n", argv[i]);
      return 2;
    }
    shape[i - 1] = v;
  }
  try {
    Status s = Run(shape[0], shape[1], shape[2]);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
    return 0;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "out of host memory\n");
    return 1;
  }
}
