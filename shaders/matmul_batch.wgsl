// Shared by matmul.wgsl and matmul_coop.wgsl (appended to each when it is compiled): where
// matrix `batch` of a batched product starts in A and B. Parameters 4 (batch rank), 5-6
// (offsets), 12-15 (batch dims) and 16-23 (batch strides of A and B), as both kernels read
// them from `p`.

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
