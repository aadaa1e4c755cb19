// Indexed reads and accumulating writes along one axis: gather / index_select read
// `src[coords with axis := index]`, scatter_add / index_add add values there.
//
// Parameters (the strided layout of elementwise.wgsl): 0 element count, 1 rank, 2 axis,
// 6 threads per grid row, 8-15 the dims iterated over, 16-23 strides of the indexed tensor
// (operand 0), 24-31 of the index tensor (operand 1, broadcast over the dims), 32-39 of the
// values (operand 2, scatter only), 48-50 offsets, 51 the size of the indexed axis.
// Indices outside 0..size are skipped (gather reads 0 there): checking them on the host
// would need a readback.

@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read> index: array<u32>;
@group(0) @binding(3) var<storage, read> values: array<u32>;
@group(0) @binding(4) var<storage, read_write> out: array<u32>;
@group(0) @binding(5) var<storage, read_write> accum: array<atomic<u32>>;

struct Target {
    position: u32,
    value_at: u32,
    valid: bool,
}

fn locate(i: u32) -> Target {
    var rem = i;
    let rank = p[1];
    let axis = p[2];
    var position = p[48];
    var index_at = p[49];
    var value_at = p[50];
    for (var q = 0u; q < rank; q++) {
        let d = rank - 1u - q;
        let size = p[8u + d];
        let coord = rem % size;
        rem = rem / size;
        if (d != axis) {
            position += coord * p[16u + d];
        }
        index_at += coord * p[24u + d];
        value_at += coord * p[32u + d];
    }
    let idx = bitcast<i32>(index[index_at]);
    let valid = idx >= 0 && u32(idx) < p[51];
    position += u32(max(idx, 0)) * p[16u + axis];
    return Target(position, value_at, valid);
}

@compute @workgroup_size(256)
fn gather(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.y * p[6] + gid.x;
    if (i >= p[0]) {
        return;
    }
    let t = locate(i);
    out[i] = select(0u, src[t.position], t.valid);
}

// f32 addition by compare-and-swap (WGSL has no float atomics).
@compute @workgroup_size(256)
fn scatter_add(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.y * p[6] + gid.x;
    if (i >= p[0]) {
        return;
    }
    let t = locate(i);
    if (!t.valid) {
        return;
    }
    let add = bitcast<f32>(values[t.value_at]);
    var old = atomicLoad(&accum[t.position]);
    loop {
        let new_bits = bitcast<u32>(bitcast<f32>(old) + add);
        let r = atomicCompareExchangeWeak(&accum[t.position], old, new_bits);
        if (r.exchanged) {
            break;
        }
        old = r.old_value;
    }
}
