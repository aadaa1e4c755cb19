// What the matrix units reach through WGSL cooperative matrices, one limit at a time. Every
// entry point is the inner loop of `shaders/matmul_coop.wgsl` with parts taken away: four
// subgroups of 32 per workgroup, each with 4x4 accumulators of 16x16 (f32) fed by 4 blocks
// of A and 4 of B (f16), 16 multiply-adds per step of 16 along K.
//
// - `registers`: the eight operand blocks are loaded once and stay in registers; each step
//   is the 16 multiply-adds alone. The rate of the multiply-adds as naga and the driver
//   compile them.
// - `staged`: each step loads its eight blocks from workgroup memory first, with the
//   product kernel's padded lines, quads and transposed loads (A and B row-major), and the
//   workgroup meets at a barrier every `BARRIER_EVERY` steps (2 in the product kernel: one
//   staged slice of 32 along K; 0 for none), to see what the barriers cost.
//   With `SCALAR_TILES`, from a workgroup array of f16 scalars instead of quads.
//
// - `fetched`: `staged` at 2, plus the product kernel's copies from device memory: every
//   stage of 32 along K, each invocation reads the next stage's four 16-byte pieces of A and
//   of B from `source` into registers before the multiply-adds and writes them into the
//   other half of the staged slices after them. The pieces' addresses are those of a 4096 x
//   4096 product's 128x128 tiles, folded into the first `SOURCE_QUADS` quads of `source`:
//   a few MiB stay in the L2 cache, hundreds stream from memory.
//
// - `direct`: no workgroup memory and no barriers: each subgroup loads its eight blocks of
//   every step straight from `source` (A and B of a 4096 x 4096 product, row-major, at the
//   tile's addresses as in `fetched`, folded into `SOURCE_QUADS`); the subgroups of a
//   workgroup share their operands only through the caches. With `AHEAD`, the next step's
//   blocks are loaded before the current step's multiply-adds.
//
// Only `fetched` and `direct` read device memory in the loop. The accumulators go to `sink` at the end
// so that no multiply-add can be dropped.

enable f16;
enable wgpu_cooperative_matrix;

@group(0) @binding(0) var<storage, read_write> sink: array<f32>;
@group(0) @binding(1) var<storage, read> source: array<vec4<f16>>;

// Multiply-add steps per subgroup (a pipeline constant, so the host sets the work).
override STEPS: u32 = 1024u;
// Steps between the workgroup's barriers in `staged`; 0: none.
override BARRIER_EVERY: u32 = 2u;
// Whether `staged` loads from a workgroup array of f16 scalars instead of quads.
override SCALAR_TILES: bool = false;
// Quads of `source` that `fetched` and `direct` read (a power of two).
override SOURCE_QUADS: u32 = 1048576u;
// Whether `direct` loads a step ahead.
override AHEAD: bool = false;

// Two stages of 128 lines, 10 quads each (A) and 32 lines of 34 quads (B), as in
// `matmul_coop.wgsl`: widths in quads.
const INNER_LINE: u32 = 10u;
const OUTER_LINE: u32 = 34u;
const SLICE: u32 = 1280u;
var<workgroup> quads: array<vec4<f16>, 2560>;
var<workgroup> scalars: array<f16, 10240>;

alias Acc = coop_mat16x16<f32, C>;
alias Left = coop_mat16x16<f16, A>;
alias Right = coop_mat16x16<f16, B>;

// Named members rather than arrays: an array of cooperative matrices indexed in a loop may
// be kept in local memory by the driver, which the product kernel never does.
struct Operands {
    a0: Left,
    a1: Left,
    a2: Left,
    a3: Left,
    b0: Right,
    b1: Right,
    b2: Right,
    b3: Right,
}

struct Sums {
    c00: Acc,
    c01: Acc,
    c02: Acc,
    c03: Acc,
    c10: Acc,
    c11: Acc,
    c12: Acc,
    c13: Acc,
    c20: Acc,
    c21: Acc,
    c22: Acc,
    c23: Acc,
    c30: Acc,
    c31: Acc,
    c32: Acc,
    c33: Acc,
}

fn multiply_add(o: Operands, s: Sums) -> Sums {
    var r: Sums;
    r.c00 = coopMultiplyAdd(o.a0, o.b0, s.c00);
    r.c01 = coopMultiplyAdd(o.a0, o.b1, s.c01);
    r.c02 = coopMultiplyAdd(o.a0, o.b2, s.c02);
    r.c03 = coopMultiplyAdd(o.a0, o.b3, s.c03);
    r.c10 = coopMultiplyAdd(o.a1, o.b0, s.c10);
    r.c11 = coopMultiplyAdd(o.a1, o.b1, s.c11);
    r.c12 = coopMultiplyAdd(o.a1, o.b2, s.c12);
    r.c13 = coopMultiplyAdd(o.a1, o.b3, s.c13);
    r.c20 = coopMultiplyAdd(o.a2, o.b0, s.c20);
    r.c21 = coopMultiplyAdd(o.a2, o.b1, s.c21);
    r.c22 = coopMultiplyAdd(o.a2, o.b2, s.c22);
    r.c23 = coopMultiplyAdd(o.a2, o.b3, s.c23);
    r.c30 = coopMultiplyAdd(o.a3, o.b0, s.c30);
    r.c31 = coopMultiplyAdd(o.a3, o.b1, s.c31);
    r.c32 = coopMultiplyAdd(o.a3, o.b2, s.c32);
    r.c33 = coopMultiplyAdd(o.a3, o.b3, s.c33);
    return r;
}

// Block `i` of A (rows sr + 16 i..) and of B (columns sc + 16 i..) at K offset `kk` of the
// slice starting at quad `at0`: from the staged quads, or from the scalars (strides and
// offsets in elements) with `SCALAR_TILES`. naga 30 wants each coopLoad index bound to a let
// first.
fn block_a(at0: u32, sr: u32, kk: u32) -> Left {
    if (SCALAR_TILES) {
        let at = 4u * at0 + sr * INNER_LINE * 4u + kk;
        return coopLoadT<Left>(&scalars[at], INNER_LINE * 4u);
    }
    let at = at0 + sr * INNER_LINE + kk / 4u;
    return coopLoadT<Left>(&quads[at], INNER_LINE);
}

fn block_b(at0: u32, sc: u32, kk: u32) -> Right {
    if (SCALAR_TILES) {
        let at = 4u * at0 + kk * OUTER_LINE * 4u + sc;
        return coopLoadT<Right>(&scalars[at], OUTER_LINE * 4u);
    }
    let at = at0 + kk * OUTER_LINE + sc / 4u;
    return coopLoadT<Right>(&quads[at], OUTER_LINE);
}

// The eight blocks of subgroup `sg` at step `step`: A's rows at sr.., B's columns at sc..,
// K offset 0 or 16 within the slice, slice 0 or 1 (as the product kernel walks them).
fn load_staged(sg: u32, step: u32) -> Operands {
    let at0 = ((step / 2u) % 2u) * SLICE;
    let kk = (step % 2u) * 16u;
    let sr = (sg / 2u) * 64u;
    let sc = (sg % 2u) * 64u;
    return Operands(
        block_a(at0, sr, kk),
        block_a(at0, sr + 16u, kk),
        block_a(at0, sr + 32u, kk),
        block_a(at0, sr + 48u, kk),
        block_b(at0, sc, kk),
        block_b(at0, sc + 16u, kk),
        block_b(at0, sc + 32u, kk),
        block_b(at0, sc + 48u, kk),
    );
}

fn store(s: Sums, wid: u32, sg: u32) {
    let at = (wid * 4u + sg) * 256u;
    coopStore(s.c00, &sink[at], 16u);
    coopStore(s.c01, &sink[at], 16u);
    coopStore(s.c02, &sink[at], 16u);
    coopStore(s.c03, &sink[at], 16u);
    coopStore(s.c10, &sink[at], 16u);
    coopStore(s.c11, &sink[at], 16u);
    coopStore(s.c12, &sink[at], 16u);
    coopStore(s.c13, &sink[at], 16u);
    coopStore(s.c20, &sink[at], 16u);
    coopStore(s.c21, &sink[at], 16u);
    coopStore(s.c22, &sink[at], 16u);
    coopStore(s.c23, &sink[at], 16u);
    coopStore(s.c30, &sink[at], 16u);
    coopStore(s.c31, &sink[at], 16u);
    coopStore(s.c32, &sink[at], 16u);
    coopStore(s.c33, &sink[at], 16u);
}

// Fills the staged arrays with small values (the sums stay finite).
fn fill(lid: u32) {
    for (var i = lid; i < 2560u; i += 128u) {
        quads[i] = vec4<f16>(f16(i % 7u) * 0.001h);
    }
    for (var i = lid; i < 10240u; i += 128u) {
        scalars[i] = f16(i % 7u) * 0.001h;
    }
    workgroupBarrier();
}

@compute @workgroup_size(128)
fn registers(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_id) sg: u32,
) {
    fill(lid);
    let o = load_staged(sg, 0u);
    var s: Sums;
    for (var step = 0u; step < STEPS; step++) {
        s = multiply_add(o, s);
    }
    store(s, wid.x, sg);
}

@compute @workgroup_size(128)
fn staged(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_id) sg: u32,
) {
    fill(lid);
    var s: Sums;
    for (var step = 0u; step < STEPS; step++) {
        s = multiply_add(load_staged(sg, step), s);
        // (`max`: with BARRIER_EVERY = 0 the remainder would be a constant division by zero,
        // which pipeline creation rejects even where it is never evaluated.)
        if (BARRIER_EVERY != 0u && step % max(BARRIER_EVERY, 1u) == BARRIER_EVERY - 1u) {
            workgroupBarrier();
        }
    }
    store(s, wid.x, sg);
}

// Piece `i` (0..4) of invocation `lid` in stage `s` of the product's tile (`tile_row`,
// `tile_col`): the quad where it starts in `source`, for A (row-major, K = 4096 along a
// line) and B (row-major, N = 4096 along a line, after A's 16 Mi quads).
fn piece_of_a(lid: u32, i: u32, s: u32, tile_row: u32) -> u32 {
    let c = lid + 128u * i;
    let element = (tile_row * 128u + c / 4u) * 4096u + s * 32u + (c % 4u) * 8u;
    return (element / 4u) & (SOURCE_QUADS - 1u);
}

fn piece_of_b(lid: u32, i: u32, s: u32, tile_col: u32) -> u32 {
    let c = lid + 128u * i;
    let element = 16777216u + (s * 32u + c / 16u) * 4096u + tile_col * 128u + (c % 16u) * 8u;
    return (element / 4u) & (SOURCE_QUADS - 1u);
}

struct Pieces {
    a: array<vec4<f16>, 8>,
    b: array<vec4<f16>, 8>,
}

fn fetch(lid: u32, s: u32, tile_row: u32, tile_col: u32) -> Pieces {
    var f: Pieces;
    for (var i = 0u; i < 4u; i++) {
        let from_a = piece_of_a(lid, i, s, tile_row);
        f.a[2u * i] = source[from_a];
        f.a[2u * i + 1u] = source[from_a + 1u];
        let from_b = piece_of_b(lid, i, s, tile_col);
        f.b[2u * i] = source[from_b];
        f.b[2u * i + 1u] = source[from_b + 1u];
    }
    return f;
}

// Writes fetched pieces into slice `slot` of the staged quads where `load_staged` reads
// them, as the product kernel stores them: A's lines of 32 along K `INNER_LINE` apart, B's
// lines of 128 `OUTER_LINE` apart (both in the one array: the probe's values do not matter).
fn stage_pieces(lid: u32, f: Pieces, slot: u32) {
    for (var i = 0u; i < 4u; i++) {
        let c = lid + 128u * i;
        let ta = slot * SLICE + (c / 4u) * INNER_LINE + (c % 4u) * 2u;
        quads[ta] = f.a[2u * i];
        quads[ta + 1u] = f.a[2u * i + 1u];
        let tb = slot * SLICE + (c / 16u) * OUTER_LINE + (c % 16u) * 2u;
        quads[tb] = f.b[2u * i];
        quads[tb + 1u] = f.b[2u * i + 1u];
    }
}

@compute @workgroup_size(128)
fn fetched(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_id) sg: u32,
) {
    fill(lid);
    let tile_row = wid.x % 32u;
    let tile_col = (wid.x / 32u) % 32u;
    var s: Sums;
    for (var stage = 0u; stage < STEPS / 2u; stage++) {
        let next = fetch(lid, stage + 1u, tile_row, tile_col);
        s = multiply_add(load_staged(sg, 2u * stage), s);
        s = multiply_add(load_staged(sg, 2u * stage + 1u), s);
        stage_pieces(lid, next, 1u - stage % 2u);
        workgroupBarrier();
    }
    store(s, wid.x, sg);
}

// Subgroup `sg`'s eight blocks of step `step` straight from `source`: A's rows and B's
// columns of the workgroup's tile, K offset 16 `step` (folded into 4096); both row-major
// with lines of 4096 halves (1024 quads). The fold applies to a block's first quad, so its
// last line stays inside `source` while `SOURCE_QUADS` is at most half of it.
fn load_direct(sg: u32, step: u32, tile_row: u32, tile_col: u32) -> Operands {
    let k0 = (step * 16u) % 4096u;
    let row = tile_row * 128u + (sg / 2u) * 64u;
    let col = tile_col * 128u + (sg % 2u) * 64u;
    let a0 = ((row * 4096u + k0) / 4u) & (SOURCE_QUADS - 1u);
    let a1 = (((row + 16u) * 4096u + k0) / 4u) & (SOURCE_QUADS - 1u);
    let a2 = (((row + 32u) * 4096u + k0) / 4u) & (SOURCE_QUADS - 1u);
    let a3 = (((row + 48u) * 4096u + k0) / 4u) & (SOURCE_QUADS - 1u);
    let b0 = ((16777216u + k0 * 4096u + col) / 4u) & (SOURCE_QUADS - 1u);
    let b1 = ((16777216u + k0 * 4096u + col + 16u) / 4u) & (SOURCE_QUADS - 1u);
    let b2 = ((16777216u + k0 * 4096u + col + 32u) / 4u) & (SOURCE_QUADS - 1u);
    let b3 = ((16777216u + k0 * 4096u + col + 48u) / 4u) & (SOURCE_QUADS - 1u);
    return Operands(
        coopLoadT<Left>(&source[a0], 1024u),
        coopLoadT<Left>(&source[a1], 1024u),
        coopLoadT<Left>(&source[a2], 1024u),
        coopLoadT<Left>(&source[a3], 1024u),
        coopLoadT<Right>(&source[b0], 1024u),
        coopLoadT<Right>(&source[b1], 1024u),
        coopLoadT<Right>(&source[b2], 1024u),
        coopLoadT<Right>(&source[b3], 1024u),
    );
}

@compute @workgroup_size(128)
fn direct(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(subgroup_id) sg: u32,
) {
    let tile_row = wid.x % 32u;
    let tile_col = (wid.x / 32u) % 32u;
    var s: Sums;
    if (AHEAD) {
        var o = load_direct(sg, 0u, tile_row, tile_col);
        for (var step = 0u; step < STEPS; step++) {
            let next = load_direct(sg, step + 1u, tile_row, tile_col);
            s = multiply_add(o, s);
            o = next;
        }
    } else {
        for (var step = 0u; step < STEPS; step++) {
            s = multiply_add(load_direct(sg, step, tile_row, tile_col), s);
        }
    }
    store(s, wid.x, sg);
}
