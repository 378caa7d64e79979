struct KernelArgs {
  grid_dim_x : u32,
  num_blocks_x : u32,
}

@group(0) @binding(0) var<storage, read> A : array<f32>;
@group(0) @binding(1) var<storage, read_write> B : array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> C : array<vec4<f32>>;
@group(0) @binding(3) var<uniform> args : KernelArgs;

@compute @workgroup_size(4, 1, 1)
fn vec4_transpose(@builtin(workgroup_id) wid : vec3<u32>, @builtin(local_invocation_id) lid : vec3<u32>) {
  let block_x : u32 = wid.x + wid.z * args.grid_dim_x;
  if (block_x >= args.num_blocks_x) {
    return;
  }
  let tx : i32 = i32(lid.x);
  let base : i32 = tx * 4i;
  B[tx] = vec4<f32>(A[base], A[base + 1i], A[base + 2i], A[base + 3i]);
  let index : vec4<i32> = vec4<i32>(tx) + vec4<i32>(0i, 1i, 2i, 3i) * 4i;
  C[tx] = vec4<f32>(A[index[0]], A[index[1]], A[index[2]], A[index[3]]);
}
