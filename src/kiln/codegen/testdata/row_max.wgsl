struct KernelArgs {
  cols : i32,
  grid_dim_x : u32,
  num_blocks_x : u32,
}

@group(0) @binding(0) var<storage, read> X : array<f32>;
@group(0) @binding(1) var<storage, read_write> Out : array<f32>;
@group(0) @binding(2) var<storage, read_write> Bits : array<u32>;
@group(0) @binding(3) var<uniform> args : KernelArgs;

fn kiln_f32_from_bits(bits : u32) -> f32 {
  return bitcast<f32>(bits);
}

@compute @workgroup_size(1, 1, 1)
fn row_max(@builtin(workgroup_id) wid : vec3<u32>, @builtin(local_invocation_id) lid : vec3<u32>) {
  let block_x : u32 = wid.x + wid.z * args.grid_dim_x;
  if (block_x >= args.num_blocks_x) {
    return;
  }
  let cols : i32 = args.cols;
  var best_0 : f32;
  best_0 = kiln_f32_from_bits(0xff800000u);
  for (var j : i32 = 0i; j < cols; j++) {
    best_0 = max(best_0, X[j]);
  }
  Out[0i] = best_0;
  Bits[0i] = bitcast<u32>(best_0) << (1u & 31u);
}
