// Hand-written WGSL kernels: the demo's workloads and the reference points
// benchmarks compare kiln's generated code with.
#pragma once

namespace kiln::bench {

// C[M,N] = A[M,K] * B[K,N], row-major f32; the textbook 16x16 tiled
// algorithm with workgroup memory. Dispatch (N/16, M/16); M, N, K multiples
// of 16. Constants: M, N, K as u32 (padded to 16 bytes).
inline constexpr const char* kMatmulTiled16Wgsl = R"(
struct Dims { m: u32, n: u32, k: u32, unused: u32 }
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@group(0) @binding(3) var<uniform> dims: Dims;

var<workgroup> tile_a: array<f32, 256>;
var<workgroup> tile_b: array<f32, 256>;

@compute @workgroup_size(16, 16)
fn matmul(@builtin(workgroup_id) group: vec3<u32>,
          @builtin(local_invocation_id) local: vec3<u32>) {
  let row = group.y * 16u + local.y;
  let col = group.x * 16u + local.x;
  var acc = 0.0;
  for (var t = 0u; t < dims.k; t += 16u) {
    tile_a[local.y * 16u + local.x] = a[row * dims.k + t + local.x];
    tile_b[local.y * 16u + local.x] = b[(t + local.y) * dims.n + col];
    workgroupBarrier();
    for (var i = 0u; i < 16u; i++) {
      acc += tile_a[local.y * 16u + i] * tile_b[i * 16u + local.x];
    }
    workgroupBarrier();
  }
  c[row * dims.n + col] = acc;
}
)";

// partial[g] = sum of x[g*256 .. g*256+255] (zero past n), a tree reduction
// in workgroup memory. Constants: n as u32 (padded to 16 bytes).
inline constexpr const char* kReduceSumWgsl = R"(
struct Params { n: u32, a: u32, b: u32, c: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> partial: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

var<workgroup> scratch: array<f32, 256>;

@compute @workgroup_size(256)
fn reduce_sum(@builtin(workgroup_id) group: vec3<u32>,
              @builtin(local_invocation_id) local: vec3<u32>) {
  let i = group.x * 256u + local.x;
  scratch[local.x] = select(0.0, x[i], i < params.n);
  workgroupBarrier();
  for (var stride = 128u; stride > 0u; stride = stride / 2u) {
    if (local.x < stride) {
      scratch[local.x] += scratch[local.x + stride];
    }
    workgroupBarrier();
  }
  if (local.x == 0u) {
    partial[group.x] = scratch[0];
  }
}
)";

}  // namespace kiln::bench
