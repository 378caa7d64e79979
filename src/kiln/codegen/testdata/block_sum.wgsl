struct KernelArgs {
  n : i32,
  grid_dim_x : u32,
  num_blocks_x : u32,
}

@group(0) @binding(0) var<storage, read> A : array<f32>;
@group(0) @binding(1) var<storage, read_write> Out : array<f32>;
@group(0) @binding(2) var<uniform> args : KernelArgs;

var<workgroup> partial : array<f32, 128>;

@compute @workgroup_size(128, 1, 1)
fn block_sum(@builtin(workgroup_id) wid : vec3<u32>, @builtin(local_invocation_id) lid : vec3<u32>) {
  let block_x : u32 = wid.x + wid.z * args.grid_dim_x;
  if (block_x >= args.num_blocks_x) {
    return;
  }
  let n : i32 = args.n;
  let bx : i32 = i32(block_x);
  let tx : i32 = i32(lid.x);
  var acc_0 : f32;
  let i : i32 = bx * 128i + tx;
  acc_0 = select(0f, A[min(i, n - 1i)], i < n);
  partial[tx] = acc_0;
  workgroupBarrier();
  for (var s : i32 = 0i; s < 7i; s++) {
    let stride : i32 = 64i >> (u32(s) & 31u);
    if (tx < stride) {
      partial[tx] = partial[tx] + partial[tx + stride];
    }
    workgroupBarrier();
  }
  if (tx == 0i) {
    Out[bx] = partial[0i];
  }
}
