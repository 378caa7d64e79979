struct KernelArgs {
  n : i32,
  alpha : f32,
  grid_dim_x : u32,
  num_blocks_x : u32,
}

@group(0) @binding(0) var<storage, read> A : array<f32>;
@group(0) @binding(1) var<storage, read> B : array<f32>;
@group(0) @binding(2) var<storage, read_write> C : array<f32>;
@group(0) @binding(3) var<uniform> args : KernelArgs;

@compute @workgroup_size(64, 1, 1)
fn saxpy(@builtin(workgroup_id) wid : vec3<u32>, @builtin(local_invocation_id) lid : vec3<u32>) {
  let block_x : u32 = wid.x + wid.z * args.grid_dim_x;
  if (block_x >= args.num_blocks_x) {
    return;
  }
  let n : i32 = args.n;
  let alpha : f32 = args.alpha;
  let bx : i32 = i32(block_x);
  let tx : i32 = i32(lid.x);
  let i : i32 = bx * 64i + tx;
  if (i < n) {
    C[i] = A[i] + alpha * B[i];
  }
}
