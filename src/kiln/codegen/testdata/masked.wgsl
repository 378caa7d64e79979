struct KernelArgs {
  n : i32,
  grid_dim_x : u32,
  num_blocks_x : u32,
}

@group(0) @binding(0) var<storage, read> mask : array<i32>;
@group(0) @binding(1) var<storage, read_write> A : array<i32>;
@group(0) @binding(2) var<storage, read_write> flags : array<i32>;
@group(0) @binding(3) var<uniform> args : KernelArgs;

fn kiln_div_i32(a : i32, b : i32) -> i32 {
  return a / select(b, i32(1), (b == i32()) | ((a == i32(-2147483647 - 1)) & (b == i32(-1))));
}

fn kiln_rem_i32(a : i32, b : i32) -> i32 {
  return select(a - b * kiln_div_i32(a, b), i32(), b == i32());
}

fn kiln_floor_mod_i32(a : i32, b : i32) -> i32 {
  let r = kiln_rem_i32(a, b);
  return select(r, r + b, (r != i32()) & ((r < i32()) != (b < i32())));
}

fn kiln_floor_div_i32(a : i32, b : i32) -> i32 {
  let q = kiln_div_i32(a, b);
  let r = kiln_rem_i32(a, b);
  return select(q, q - i32(1), (r != i32()) & ((r < i32()) != (b < i32())));
}

@compute @workgroup_size(1, 1, 1)
fn masked(@builtin(workgroup_id) wid : vec3<u32>, @builtin(local_invocation_id) lid : vec3<u32>) {
  let block_x : u32 = wid.x + wid.z * args.grid_dim_x;
  if (block_x >= args.num_blocks_x) {
    return;
  }
  let n : i32 = args.n;
  let bx : i32 = i32(block_x);
  let m : bool = mask[bx] != 0i;
  var cond_value : i32;
  if (m) {
    cond_value = A[kiln_floor_mod_i32(bx - 3i, n)];
  } else {
    cond_value = -1i;
  }
  let safe : i32 = cond_value;
  let steps : i32 = kiln_floor_div_i32(safe, 4i);
  flags[bx] = select(0i, 1i, !m | (steps > 2i));
  var count_0 : i32;
  count_0 = 0i;
  while (count_0 < steps) {
    count_0 = count_0 + 1i;
  }
  A[bx] = count_0;
}
