// f16 matrix products on workgroup-scope cooperative matrices with tensor addressing
// (VK_NV_cooperative_matrix2): out[b] = A[b] @ B[b], f16 operands accumulated in f32, the
// result rounded to f16 or (built with F32_OUT) written as f32. The same products as
// matmul_coop.wgsl, with its parameters and bindings but the bias's, for adapters that offer
// the extension: WGSL cannot express it, so this kernel is GLSL compiled to SPIR-V
// (`shaders/spirv/build.sh`) and handed to the driver as it is.
//
// Why: matmul_coop.wgsl must stage every operand through workgroup memory itself, in
// 16x16 blocks, one barrier per stage, and that caps it near 100 TFLOP/s on an H200
// (BENCHMARKS.md). Here a workgroup asks for a whole 128x32 slice of A and a 32x128 slice of
// B as two matrices of the workgroup scope, and the driver stages them its own way: on the
// same H200, 137-142 TFLOP/s at 4096 and 8192 (`bench_gpu hgemm`), against about 100.
//
// A workgroup is 128 invocations and computes one 128x128 output tile of one job (a batch
// entry, or a split of its K range), walking K in steps of 32. Built eight times, for A and B
// each row- or column-major (A_ROW_MAJOR, B_ROW_MAJOR) and for an f16 or f32 output
// (F32_OUT). The output's type is fixed when the kernel is built because one buffer bound
// twice, as f16 and as f32, failed on an H200 (driver 580.159.04): stores through the second
// binding were lost (a widened product came back wrong) or never ended (a 16x8 product hung
// the GPU). Bounds are the tensor layouts', all
// in clamp mode Constant: loads outside an operand read zeros, and stores outside the output
// are dropped (with the default mode the driver wrote a partial tile's columns past N into
// the next rows). So any M, N, K work; the host still
// sends only what matmul_coop.wgsl takes (unit stride along one axis, the other stride, the
// offsets and the batch strides multiples of 8 elements), which keeps every row 16-byte
// aligned, and only operands whose rows do not overlap (a layout's stride must span its
// row: no stride-0 broadcasts).
//
// No bias: added here element by element (coopMatPerElementNV reading the bias buffer), it
// came back wrong in every element on an H200 while the same products without it were
// right. The host has `sum_splits` (matmul.wgsl) add an f32 product's bias instead.
//
// Parameters (those of matmul.wgsl, less the bias's): 0 M, 1 N, 2 K, 3 batch count, 4 batch
// rank, 5-6 offsets of A and B, 7-8 row and column strides of A, 9-10 of B, 11 workgroups
// per grid row, 12-15 batch dims, 16-19 and 20-23 batch strides of A and B, 24 K splits, 25
// K per split. With several splits (an F32_OUT build), job j = batch * splits + split writes
// its f32 partial product to [M, N] block j of the output, for `sum_splits` to add up.

#version 460
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require

const uint TILE = 128;
const uint DEPTH = 32;

layout(local_size_x = 128) in;

layout(set = 0, binding = 0, std430) readonly buffer Params { uint p[]; };
layout(set = 0, binding = 1, std430) readonly buffer OperandA { float16_t a[]; };
layout(set = 0, binding = 2, std430) readonly buffer OperandB { float16_t b[]; };
// The output: f32 products (autocast's, and split partial products) or f16 ones.
#if F32_OUT
layout(set = 0, binding = 3, std430) writeonly buffer Out { float out_float[]; };
#else
layout(set = 0, binding = 3, std430) writeonly buffer Out { float16_t out_half[]; };
#endif

// Offsets of matrix `batch` in A and B (batch dims and strides from the parameters).
uvec2 batch_bases(uint batch) {
    uint rem = batch;
    uvec2 bases = uvec2(p[5], p[6]);
    uint rank = p[4];
    for (uint q = 0; q < rank; q++) {
        uint d = rank - 1 - q;
        uint size = p[12 + d];
        uint coord = rem % size;
        rem = rem / size;
        bases += coord * uvec2(p[16 + d], p[20 + d]);
    }
    return bases;
}

// Rounding to f16 must give infinities past f16's range, as any f16 cast does: a loss
// scaler finds overflows by them. The matrices' own conversion may saturate instead, so
// values that round past 65504 become infinities of their sign first; NaN stays NaN. In
// integer arithmetic on the bits: without the SignedZeroInfNanPreserve mode the compiler
// may assume floats are never infinite and fold a float comparison or product away.
float overflow_to_infinity(const in uint row, const in uint col, const in float x) {
    const uint bits = floatBitsToUint(x);
    const uint magnitude = bits & 0x7fffffffu;
    const bool past = magnitude >= floatBitsToUint(65520.0) && magnitude <= 0x7f800000u;
    return past ? uintBitsToFloat((bits & 0x80000000u) | 0x7f800000u) : x;
}

void main() {
    const uint m = p[0];
    const uint n = p[1];
    const uint k = p[2];
    const uint tiles_n = (n + TILE - 1) / TILE;
    const uint tile = gl_WorkGroupID.y * p[11] + gl_WorkGroupID.x;
    const uint splits = p[24];
    // One job per z: the host sends no more jobs than a grid holds.
    const uint job = gl_WorkGroupID.z;
    if (tile >= tiles_n * ((m + TILE - 1) / TILE) || job >= p[3] * splits) {
        return;
    }
    const uint row0 = (tile / tiles_n) * TILE;
    const uint col0 = (tile % tiles_n) * TILE;
    const uint k_begin = (job % splits) * p[25];
    // Loads past the end of this job's K range read zeros: the layouts end there.
    const uint k_end = min(k, k_begin + p[25]);
    const uvec2 bases = batch_bases(job / splits);

    // Row-major operands have a unit column stride; the others are read through a
    // transposing view of their [K, M] (A) or [N, K] (B) storage. Which is which is fixed
    // when the SPIR-V is built: with a run-time branch around the loads this kernel ran at a
// third of the rate (49 TFLOP/s at 4096).
    tensorViewNV<2, false, 1, 0> transposed = createTensorViewNV(2, false, 1, 0);
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> la =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lb =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
#if A_ROW_MAJOR
    la = setTensorLayoutDimensionNV(la, m, k_end);
    la = setTensorLayoutStrideNV(la, p[7], 1);
#else
    la = setTensorLayoutDimensionNV(la, k_end, m);
    la = setTensorLayoutStrideNV(la, p[8], 1);
#endif
#if B_ROW_MAJOR
    lb = setTensorLayoutDimensionNV(lb, k_end, n);
    lb = setTensorLayoutStrideNV(lb, p[9], 1);
#else
    lb = setTensorLayoutDimensionNV(lb, n, k_end);
    lb = setTensorLayoutStrideNV(lb, p[10], 1);
#endif

    coopmat<float, gl_ScopeWorkgroup, TILE, TILE, gl_MatrixUseAccumulator> acc =
        coopmat<float, gl_ScopeWorkgroup, TILE, TILE, gl_MatrixUseAccumulator>(0.0);
    for (uint kk = k_begin; kk < k_end; kk += DEPTH) {
        coopmat<float16_t, gl_ScopeWorkgroup, TILE, DEPTH, gl_MatrixUseA> ma;
        coopmat<float16_t, gl_ScopeWorkgroup, DEPTH, TILE, gl_MatrixUseB> mb;
#if A_ROW_MAJOR
        coopMatLoadTensorNV(ma, a, bases.x, sliceTensorLayoutNV(la, row0, TILE, kk, DEPTH));
#else
        coopMatLoadTensorNV(
            ma, a, bases.x, sliceTensorLayoutNV(la, kk, DEPTH, row0, TILE), transposed);
#endif
#if B_ROW_MAJOR
        coopMatLoadTensorNV(mb, b, bases.y, sliceTensorLayoutNV(lb, kk, DEPTH, col0, TILE));
#else
        coopMatLoadTensorNV(
            mb, b, bases.y, sliceTensorLayoutNV(lb, col0, TILE, kk, DEPTH), transposed);
#endif
        acc = coopMatMulAdd(ma, mb, acc);
    }

    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lo =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    lo = setTensorLayoutDimensionNV(lo, m, n);
    const uint at = job * m * n;
#if F32_OUT
    coopMatStoreTensorNV(acc, out_float, at, sliceTensorLayoutNV(lo, row0, TILE, col0, TILE));
#else
    coopMatPerElementNV(acc, acc, overflow_to_infinity);
    coopmat<float16_t, gl_ScopeWorkgroup, TILE, TILE, gl_MatrixUseAccumulator> rounded =
        coopmat<float16_t, gl_ScopeWorkgroup, TILE, TILE, gl_MatrixUseAccumulator>(acc);
    coopMatStoreTensorNV(rounded, out_half, at, sliceTensorLayoutNV(lo, row0, TILE, col0, TILE));
#endif
}
