enable subgroups;
diagnostic(off, subgroup_uniformity);

struct KernelArgs {
  rows : u32,
  grid_dim_x : u32,
  num_blocks_x : u32,
}

@group(0) @binding(0) var<storage, read> A : array<u32>;
@group(0) @binding(1) var<storage, read> B : array<u32>;
@group(0) @binding(2) var<storage, read_write> Out : array<i32>;
@group(0) @binding(3) var<uniform> args : KernelArgs;

@compute @workgroup_size(32, 1, 1)
fn subgroup_dot(@builtin(workgroup_id) wid : vec3<u32>, @builtin(local_invocation_id) lid : vec3<u32>) {
  let block_x : u32 = wid.x + wid.z * args.grid_dim_x;
  if (block_x >= args.num_blocks_x) {
    return;
  }
  let rows : u32 = args.rows;
  let by : i32 = i32(wid.y);
  let tx : i32 = i32(lid.x);
  let part : i32 = dot4I8Packed(A[by * 32i + tx], B[tx]);
  let total : i32 = subgroupAdd(part);
  if (tx == 0i) {
    Out[by] = total;
  }
}
