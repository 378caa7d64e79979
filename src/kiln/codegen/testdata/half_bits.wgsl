enable f16;

struct KernelArgs {
  grid_dim_x : u32,
  num_blocks_x : u32,
}

@group(0) @binding(0) var<storage, read_write> H : array<vec2<f16>>;
@group(0) @binding(1) var<storage, read_write> W : array<u32>;
@group(0) @binding(2) var<uniform> args : KernelArgs;

fn kiln_f16_from_bits(bits : u32) -> f16 {
  return f16(unpack2x16float(bits).x);
}

@compute @workgroup_size(2, 1, 1)
fn half_bits(@builtin(workgroup_id) wid : vec3<u32>, @builtin(local_invocation_id) lid : vec3<u32>) {
  let block_x : u32 = wid.x + wid.z * args.grid_dim_x;
  if (block_x >= args.num_blocks_x) {
    return;
  }
  let tx : i32 = i32(lid.x);
  let packed : u32 = pack2x16float(vec2<f32>(H[tx]));
  W[tx] = packed;
  let pair : vec2<f16> = vec2<f16>(unpack2x16float(packed ^ 1u));
  H[tx] = max(pair, vec2<f16>(kiln_f16_from_bits(0xfc00u)));
}
