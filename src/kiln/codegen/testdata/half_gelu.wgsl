enable f16;

struct KernelArgs {
  n : i32,
  grid_dim_x : u32,
  num_blocks_x : u32,
}

@group(0) @binding(0) var<storage, read> X : array<f16>;
@group(0) @binding(1) var<storage, read_write> Y : array<f16>;
@group(0) @binding(2) var<uniform> args : KernelArgs;

fn kiln_erf_f32(x : f32) -> f32 {
  let t = 1.0 / (1.0 + 0.3275911 * abs(x));
  let p = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
  return sign(x) * (1.0 - p * exp(-x * x));
}

@compute @workgroup_size(32, 1, 1)
fn half_gelu(@builtin(workgroup_id) wid : vec3<u32>, @builtin(local_invocation_id) lid : vec3<u32>) {
  let block_x : u32 = wid.x + wid.z * args.grid_dim_x;
  if (block_x >= args.num_blocks_x) {
    return;
  }
  let n : i32 = args.n;
  let bx : i32 = i32(block_x);
  let tx : i32 = i32(lid.x);
  let i : i32 = bx * 32i + tx;
  if (i < n) {
    let x : f16 = X[i];
    Y[i] = x * 0.5h * (1h + f16(kiln_erf_f32(f32(x * 0.70703125h)))) + (1h / (1h + exp(-(x)))) - (1h / (1h + exp(-(x))));
  }
}
