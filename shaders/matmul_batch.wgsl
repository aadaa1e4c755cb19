// Shared by matmul.wgsl and matmul_coop.wgsl (appended to each when it is compiled): which
// output tile a workgroup computes, where matrix `batch` of a batched product starts in A
// and B, and the bias. Both read the parameters from `p`: 0 M, 1 N, 4 batch rank, 5-6
// offsets, 11 workgroups per grid row, 12-15 batch dims, 16-23 batch strides of A and B, 26
// flags (4: a bias), 27-28 the bias's offset and stride.

// The f32 bias added to every row of the output (`F.linear`), when flag 4 is set; bound to A
// otherwise, and then never read.
@group(0) @binding(6) var<storage, read> bias: array<u32>;

// The bias of output column `col` (of `n`), or zero without one or past the last column.
// Read once per column an invocation writes, before its rows are stored.
fn bias_of(col: u32, n: u32) -> f32 {
    if ((p[26] & 4u) == 0u || col >= n) {
        return 0.0;
    }
    return bitcast<f32>(bias[p[27] + col * p[28]]);
}

// The `edge` x `edge` output tile of workgroup `wid`: its first row (x) and column (y), and
// z = 1 when it lies inside the output (grids are rounded up).
fn output_tile(wid: vec3<u32>, edge: u32) -> vec3<u32> {
    let tiles_n = (p[1] + edge - 1u) / edge;
    let tile = wid.y * p[11] + wid.x;
    let inside = tile < tiles_n * ((p[0] + edge - 1u) / edge);
    return vec3<u32>((tile / tiles_n) * edge, (tile % tiles_n) * edge, select(0u, 1u, inside));
}

// Offsets of matrix `batch` in A and B (batch dims and strides from the parameters).
fn batch_bases(batch: u32) -> vec2<u32> {
    var rem = batch;
    var bases = vec2<u32>(p[5], p[6]);
    let rank = p[4];
    for (var q = 0u; q < rank; q++) {
        let d = rank - 1u - q;
        let size = p[12u + d];
        let coord = rem % size;
        rem = rem / size;
        bases += coord * vec2<u32>(p[16u + d], p[20u + d]);
    }
    return bases;
}
