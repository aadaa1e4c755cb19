// Sparse kernels on a compressed-row pattern (rumus::sparse): the row pointers and the
// columns are i64 tensors, held on the GPU as one 32-bit word each; the values, the dense
// operands and the results are f32, read contiguous from their offsets.
//
// Parameters: 0 threads, 1 width (the length of one dense row), 2 rows of the pattern,
// 3 entries, 4 threads per grid row, 5 rows of the dense operand indexed by the columns,
// 8 offset of the row pointers, 9 of the columns, 10 of the first operand (spmm: values,
// sddmm: a, segment_max: messages), 11 of the second (spmm: x, sddmm: b).
// A row pointer past the entries or a column outside the dense operand is skipped: the
// host checked them, and the kernel still never reads out of bounds.

@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> row_ptr: array<i32>;
@group(0) @binding(2) var<storage, read> cols: array<i32>;
@group(0) @binding(3) var<storage, read> first: array<f32>;
@group(0) @binding(4) var<storage, read> second: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;
@group(0) @binding(6) var<storage, read_write> arg: array<i32>;

// The entries of row i, clamped to 0..entries.
fn entries_of(i: u32) -> vec2<u32> {
    let start = u32(clamp(row_ptr[p[8] + i], 0, i32(p[3])));
    let end = u32(clamp(row_ptr[p[8] + i + 1u], i32(start), i32(p[3])));
    return vec2<u32>(start, end);
}

// The column of entry e, or -1 when it lies outside the dense operand.
fn column(e: u32) -> i32 {
    let c = cols[p[9] + e];
    return select(-1, c, c >= 0 && u32(c) < p[5]);
}

// out[i, f] = sum over row i's entries e of values[e] * x[cols[e], f]; a thread per output.
@compute @workgroup_size(256)
fn spmm(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = gid.y * p[4] + gid.x;
    if (t >= p[0]) {
        return;
    }
    let width = p[1];
    let i = t / width;
    let f = t % width;
    let range = entries_of(i);
    var sum = 0.0;
    for (var e = range.x; e < range.y; e++) {
        let c = column(e);
        if (c >= 0) {
            sum += first[p[10] + e] * second[p[11] + u32(c) * width + f];
        }
    }
    out[t] = sum;
}

// out[e] = dot(a[row of e], b[cols[e]]); a thread per entry, its row found by bisection.
@compute @workgroup_size(256)
fn sddmm(@builtin(global_invocation_id) gid: vec3<u32>) {
    let e = gid.y * p[4] + gid.x;
    if (e >= p[0]) {
        return;
    }
    // The last row whose first entry is at or before e.
    var low = 0u;
    var high = p[2];
    while (high - low > 1u) {
        let middle = (low + high) / 2u;
        if (u32(max(row_ptr[p[8] + middle], 0)) <= e) {
            low = middle;
        } else {
            high = middle;
        }
    }
    let c = column(e);
    var sum = 0.0;
    if (c >= 0) {
        let width = p[1];
        for (var k = 0u; k < width; k++) {
            sum += first[p[10] + low * width + k] * second[p[11] + u32(c) * width + k];
        }
    }
    out[e] = sum;
}

// out[i, f] = max over row i's entries e of messages[e, f], arg[i, f] = that e; a row
// without entries gives 0 and the entry count. A thread per output.
@compute @workgroup_size(256)
fn segment_max(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = gid.y * p[4] + gid.x;
    if (t >= p[0]) {
        return;
    }
    let width = p[1];
    let i = t / width;
    let f = t % width;
    let range = entries_of(i);
    var best = 0.0;
    var at = i32(p[3]);
    for (var e = range.x; e < range.y; e++) {
        let m = first[p[10] + e * width + f];
        if (e == range.x || m > best) {
            best = m;
            at = i32(e);
        }
    }
    out[t] = best;
    arg[t] = at;
}
