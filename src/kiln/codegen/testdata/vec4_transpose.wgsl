struct KernelArgs {
  grid_dim_x : u32,
  num_blocks_x : u32,
}

@group(0) @binding(0) var<storage, read> A : array<f32>;
@group(0) @binding(1) var<storage, read_write> B : array<f32>;
@group(0) @binding(2) var<storage, read_write> C : array<f32>;
@group(0) @binding(3) var<uniform> args : KernelArgs;

@compute @workgroup_size(4, 1, 1)
fn vec4_transpose(@builtin(workgroup_id) wid : vec3<u32>, @builtin(local_invocation_id) lid : vec3<u32>) {
  let block_x : u32 = wid.x + wid.z * args.grid_dim_x;
  if (block_x >= args.num_blocks_x) {
    return;
  }
  let tx : i32 = i32(lid.x);
  let base : i32 = tx * 4i;
  let value : vec4<f32> = vec4<f32>(A[base], A[base + 1i], A[base + 2i], A[base + 3i]);
  B[base] = value[0];
  B[base + 1i] = value[1];
  B[base + 2i] = value[2];
  B[base + 3i] = value[3];
  let base_1 : i32 = tx * 4i;
  let index : vec4<i32> = vec4<i32>(tx) + vec4<i32>(0i, 1i, 2i, 3i) * 4i;
  let value_1 : vec4<f32> = vec4<f32>(A[index[0]], A[index[1]], A[index[2]], A[index[3]]);
  C[base_1] = value_1[0];
  C[base_1 + 1i] = value_1[1];
  C[base_1 + 2i] = value_1[2];
  C[base_1 + 3i] = value_1[3];
}
