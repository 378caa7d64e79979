enable subgroups;
diagnostic(off, subgroup_uniformity);

struct KernelArgs {
  grid_dim_x : u32,
  num_blocks_x : u32,
}

@group(0) @binding(0) var<storage, read> X : array<f32>;
@group(0) @binding(1) var<storage, read_write> Out : array<f32>;
@group(0) @binding(2) var<uniform> args : KernelArgs;

var<workgroup> s : array<f32, 64>;

fn kiln_div_i32(a : i32, b : i32) -> i32 {
  return a / select(b, i32(1), (b == i32()) | ((a == i32(-2147483647 - 1)) & (b == i32(-1))));
}

@compute @workgroup_size(64, 1, 1)
fn subgroup_lanes(@builtin(workgroup_id) wid : vec3<u32>, @builtin(local_invocation_id) lid : vec3<u32>, @builtin(subgroup_invocation_id) sg_lane : u32, @builtin(subgroup_size) sg_size : u32) {
  let block_x : u32 = wid.x + wid.z * args.grid_dim_x;
  if (block_x >= args.num_blocks_x) {
    return;
  }
  let tx : i32 = i32(lid.x);
  let lane : i32 = i32(sg_lane);
  let size : i32 = i32(sg_size);
  let part : f32 = subgroupAdd(X[tx]);
  s[tx] = select(0f, part, lane == 0i);
  workgroupBarrier();
  var acc_0 : f32;
  acc_0 = 0f;
  let k_end : i32 = kiln_div_i32(size + 63i, size);
  for (var k : i32 = 0i; k < k_end; k++) {
    let j : i32 = k * size + lane;
    if (j < 64i) {
      acc_0 = acc_0 + s[j];
    }
  }
  Out[tx] = subgroupAdd(acc_0);
}
