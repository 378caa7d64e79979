// Loads a compiled module with the installed kiln runtime, runs its
// vector_add on random inputs (output poisoned first) on the default device
// and checks every element. Usage: kiln_consumer MODULE.kmod
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "kiln/hal/buffer.h"
#include "kiln/hal/device.h"
#include "kiln/runtime/module.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: kiln_consumer MODULE.kmod\n");
    return 2;
  }
  auto device = kiln::hal::Device::Create({});
  if (!device.ok()) {
    std::fprintf(stderr, "%s\n", device.status().ToString().c_str());
    return 1;
  }
  std::shared_ptr<kiln::hal::Device> dev = std::move(*device);
  auto module = kiln::runtime::LoadedModule::LoadFile(dev, argv[1]);
  if (!module.ok()) {
    std::fprintf(stderr, "%s\n", module.status().ToString().c_str());
    return 1;
  }
  auto fn = (*module)->Find("vector_add");
  if (!fn.ok()) {
    std::fprintf(stderr, "%s\n", fn.status().ToString().c_str());
    return 1;
  }
  const int n = 1000;
  std::vector<float> a(n), b(n), c(n, 0.0f);
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-1, 1);
  for (int i = 0; i < n; ++i) {
    a[i] = dist(rng);
    b[i] = dist(rng);
  }
  auto bytes = [](std::vector<float>& v) {
    return std::span<uint8_t>(reinterpret_cast<uint8_t*>(v.data()), v.size() * 4);
  };
  auto A = dev->allocator().Allocate(n * 4), B = dev->allocator().Allocate(n * 4),
       C = dev->allocator().Allocate(n * 4);
  if (!A.ok() || !B.ok() || !C.ok()) return 1;
  std::vector<uint8_t> poison(n * 4, 0xFF);
  if (!kiln::hal::Upload(*dev, *A, 0, bytes(a)).ok() ||
      !kiln::hal::Upload(*dev, *B, 0, bytes(b)).ok() ||
      !kiln::hal::Upload(*dev, *C, 0, poison).ok()) {
    return 1;
  }
  kiln::runtime::Arg args[] = {kiln::runtime::Arg::Buffer(*A), kiln::runtime::Arg::Buffer(*B),
                               kiln::runtime::Arg::Buffer(*C), kiln::runtime::Arg::I32(n)};
  kiln::Status s = (*fn)->Call(args);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  if (!kiln::hal::Download(*dev, *C, 0, bytes(c)).ok()) return 1;
  for (int i = 0; i < n; ++i) {
    if (c[i] != a[i] + b[i]) {
      std::fprintf(stderr, "element %d: %g + %g gave %g\n", i, a[i], b[i], c[i]);
      return 1;
    }
  }
  std::printf("consumer: vector_add of %d elements PASS on %s\n", n, dev->Describe().c_str());
  return 0;
}
