// Fused scaled dot-product attention (backend/cuda/attention.rs) in the tiling of flash
// attention: the `[T, S]` scores never reach memory. Two families of kernels: on the tensor
// cores under autocast (`*_half_*` in f16, `*_bf16_*` in bfloat16), and in f32 on the CUDA
// cores (`*_f32_*`, at the end), which keep f32's precision as PyTorch's f32 attention does.
//
// The tensor-core kernels: a block of 8 warps owns 128 rows of one problem (queries for the
// forward pass and dQ, keys for dK/dV); each warp owns 16 of them and multiplies 16 x 8 x 16
// tiles with `mma.sync` (16-bit operands, f32 sums), so every product's result lands in the
// registers that feed the next product. The other side is walked in tiles staged in shared
// memory as 16-bit elements, row-major, rows padded by 8 elements (so the 8 rows one
// `ldmatrix` reads hit 32 different banks). `ldmatrix` reads a tile as B fragments, with
// `.trans` where the product needs its columns, so no tile is staged twice. While a block
// multiplies one tile, each thread's loads of the next are in flight into registers (float4
// where the rows allow), so memory latency hides behind the products. Operands are f32 in
// memory (autocast's activations) and rounded on staging; scores, softmax statistics and
// every sum stay f32. Probabilities (unnormalised, after dropout) and score gradients are
// rounded before the product they feed, as FlashAttention does. Widths are padded with zeros
// to the kernel's D (64 or 128), lengths to whole tiles. Only tiles on a mask's edge (the
// causal diagonal, padding, the ends) test each score, and a warp skips a tile its causal
// mask hides whole.
//
// Fragments of `mma.m16n8k16` (PTX ISA, "Matrix Fragments for mma.m16n8k16"), for lane
// `4 g + c` of a warp: A (16 x 16, row-major) in 4 words, word w holding row `g + 8 (w & 1)`,
// columns `2 c + 8 (w >> 1)` and the next; B (16 x 8, by columns) in 2 words, word w holding
// column g, rows `2 c + 8 w` and the next; C (16 x 8, f32) in 4 floats, float e at row
// `g + 8 (e >> 1)`, column `2 c + (e & 1)`. Two neighbouring C tiles are thus exactly the A
// fragment of one 16-wide step, which is how probabilities feed the next product.

// Where the rows of one operand lie: problem `n = b heads + h` has row i at
// `offset + b batch + h head + i row` (elements; a row's elements are neighbours).
struct Rows {
    i64 offset;
    i64 batch;
    i64 head;
    i64 row;
    i64 heads;
};

// Sizes, options and the operands' and results' rows, laid out as `Sdpa` in
// backend/cuda/attention.rs.
struct Sdpa {
    Rows q, k, v;
    // The output's gradient (backward passes).
    Rows grad;
    // The results: the output (forward), dQ (its pass), dK then dV (theirs).
    Rows r0, r1;
    u64 seed;
    int batch, t, s, d, dv;
    // Problems that share one row of the key padding mask.
    int per_mask_row;
    int causal, padded, dropout;
    // Dropout keeps a probability whose draw is at least this.
    unsigned int threshold;
    // The factor of q k^T, and the same times log2(e) (scores are kept in base 2).
    float scale, scale_log2;
    // The factor of a kept probability, 1 / (1 - p).
    float keep;
};

#define LOG2E 1.4426950408889634f
#define LN2 0.6931471805599453f
// Threads per block of the f32 kernels.
#define ATTENTION_THREADS 128
// The tensor-core kernels: 8 warps of 16 rows each a block (backend/cuda/attention.rs's
// `Kernels::threads` and `rows_per_block`).
#define TC_WARPS 8
#define TC_THREADS (32 * TC_WARPS)
#define TC_ROWS (16 * TC_WARPS)

__device__ __forceinline__ i64 row_base(const Rows& r, i64 n) {
    i64 b = n / r.heads;
    return r.offset + b * r.batch + (n - b * r.heads) * r.head;
}

__device__ __forceinline__ unsigned int half_pair(const unsigned short* p) {
    return *(const unsigned int*)p;
}

// One problem's rows of an f32 operand: `count` rows of `width` columns from `x + base`,
// `stride` apart; `vector` when every row starts on 16 bytes (whole float4 loads).
struct Source {
    const float* x;
    i64 base, stride;
    int count, width;
    bool vector;
};

__device__ __forceinline__ Source source(const float* x, const Rows& r, i64 n, int count, int width) {
    Source s;
    s.x = x;
    s.base = row_base(r, n);
    s.stride = r.row;
    s.count = count;
    s.width = width;
    s.vector = ((u64)x & 15) == 0 && ((s.base | s.stride) & 3) == 0;
    return s;
}

// A tile of ROWS rows and D columns on its way to shared memory: each thread's chunks of 4
// neighbouring columns, chunk `threadIdx.x + m TC_THREADS` of the tile's row-major chunks.
template <int ROWS, int D> struct Fetched {
    static const int CHUNKS = ROWS * D / 4 / TC_THREADS;
    float4 chunk[CHUNKS];
};

// Rows `first..first + ROWS` of a source into `f` (zeros past its rows and columns).
template <int ROWS, int D>
__device__ __forceinline__ void fetch(Fetched<ROWS, D>& f, const Source& s, int first) {
    if (s.vector && s.width == D && first + ROWS <= s.count) {
        // Whole rows, all there: one float4 per chunk, no checks.
        const float* rows = s.x + s.base + (i64)first * s.stride;
#pragma unroll
        for (int m = 0; m < Fetched<ROWS, D>::CHUNKS; ++m) {
            int e = threadIdx.x + m * TC_THREADS, r = e / (D / 4), col = (e % (D / 4)) * 4;
            f.chunk[m] = __ldg((const float4*)(rows + r * s.stride + col));
        }
        return;
    }
#pragma unroll
    for (int m = 0; m < Fetched<ROWS, D>::CHUNKS; ++m) {
        int e = threadIdx.x + m * TC_THREADS, r = e / (D / 4), col = (e % (D / 4)) * 4;
        float4 value = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (first + r < s.count && col < s.width) {
            const float* at = s.x + s.base + (i64)(first + r) * s.stride + col;
            if (s.vector && col + 4 <= s.width) {
                value = __ldg((const float4*)at);
            } else {
                value.x = at[0];
                if (col + 1 < s.width) value.y = at[1];
                if (col + 2 < s.width) value.z = at[2];
                if (col + 3 < s.width) value.w = at[3];
            }
        }
        f.chunk[m] = value;
    }
}

// The fetched rows rounded to E, into `tile[r PITCH + c]`.
template <typename E, int ROWS, int D, int PITCH>
__device__ __forceinline__ void store(unsigned short* tile, const Fetched<ROWS, D>& f) {
#pragma unroll
    for (int m = 0; m < Fetched<ROWS, D>::CHUNKS; ++m) {
        int e = threadIdx.x + m * TC_THREADS, r = e / (D / 4), col = (e % (D / 4)) * 4;
        float4 v = f.chunk[m];
        *(uint2*)(tile + r * PITCH + col) = make_uint2(E::pack(v.x, v.y), E::pack(v.z, v.w));
    }
}

// The A fragments of a warp's 16 rows (from `row0`) of a staged row-major tile, STEPS steps
// of 16 columns.
template <int STEPS, int PITCH>
__device__ __forceinline__ void load_a(unsigned int (*a)[4], const unsigned short* tile, int row0) {
    int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    for (int step = 0; step < STEPS; ++step) {
        const unsigned short* top = tile + (row0 + g) * PITCH + step * 16 + 2 * c;
        a[step][0] = half_pair(top);
        a[step][1] = half_pair(top + 8 * PITCH);
        a[step][2] = half_pair(top + 8);
        a[step][3] = half_pair(top + 8 * PITCH + 8);
    }
}

// The A fragments of this warp's 16 of the TC_ROWS rows from `first` of a source, staged
// through `smem` (free again on return).
template <typename E, int D, int PITCH>
__device__ __forceinline__ void rows_as_a(unsigned int (*a)[4], unsigned short* smem, const Source& s, int first) {
    Fetched<TC_ROWS, D> rows;
    fetch(rows, s, first);
    store<E, TC_ROWS, D, PITCH>(smem, rows);
    __syncthreads();
    load_a<D / 16, PITCH>(a, smem, (threadIdx.x >> 5) * 16);
    __syncthreads();
}

// C tiles `[16, 8 N]` as the A fragments of the N / 2 steps of 16 they feed, rounded to E.
template <typename E, int N>
__device__ __forceinline__ void as_a(unsigned int (*a)[4], float (*c)[4]) {
    for (int step = 0; step < N / 2; ++step) {
        a[step][0] = E::pack(c[2 * step][0], c[2 * step][1]);
        a[step][1] = E::pack(c[2 * step][2], c[2 * step][3]);
        a[step][2] = E::pack(c[2 * step + 1][0], c[2 * step + 1][1]);
        a[step][3] = E::pack(c[2 * step + 1][2], c[2 * step + 1][3]);
    }
}

// The 16-bit element of a family of tensor-core kernels: IEEE half (`F16`, autocast's
// default) or bfloat16 (`BF16`, `autocast_with(DType::BF16)`): its rounding of two floats
// into one word (the first in the low half), and its `mma`. Before sm_80 there is no
// m16n8k16; backend/cuda/attention.rs takes the f32 kernels there.
struct F16 {
    static __device__ __forceinline__ unsigned int pack(float low, float high) {
#if __CUDA_ARCH__ >= 800
        unsigned int word;
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(word) : "f"(high), "f"(low));
        return word;
#else
        return (unsigned int)float_to_half(low) | ((unsigned int)float_to_half(high) << 16);
#endif
    }
    static __device__ __forceinline__ void mma(float* c, unsigned int* a, unsigned int b0, unsigned int b1) {
#if __CUDA_ARCH__ >= 800
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9}, {%0, %1, %2, %3};"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
    }
};
struct BF16 {
    static __device__ __forceinline__ unsigned int pack(float low, float high) {
#if __CUDA_ARCH__ >= 800
        unsigned int word;
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(word) : "f"(high), "f"(low));
        return word;
#else
        return (unsigned int)float_to_bf16(low).bits | ((unsigned int)float_to_bf16(high).bits << 16);
#endif
    }
    static __device__ __forceinline__ void mma(float* c, unsigned int* a, unsigned int b0, unsigned int b1) {
#if __CUDA_ARCH__ >= 800
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9}, {%0, %1, %2, %3};"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
    }
};

// Four 8 x 8 matrices of 16-bit elements from shared memory, lane l giving the address of
// row l % 8 of matrix l / 8. Lane `4 g + c` gets in word i matrix i's row g, columns 2 c and
// 2 c + 1; with TRANS, its column g, rows 2 c and 2 c + 1. (Volatile, as the barriers
// between staging and reading need, but without a memory clobber, so the loads of one step
// can be issued ahead of the products of the step before.)
template <bool TRANS>
__device__ __forceinline__ void load_matrices(unsigned int* b, const unsigned short* row) {
#if __CUDA_ARCH__ >= 800
    unsigned int at;
    asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(at) : "l"(row));
    if (TRANS) {
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                     : "r"(at));
    } else {
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                     : "r"(at));
    }
#endif
}

// The B fragments of one 16-deep step of a staged tile for N / 2 pairs of 8-wide column
// tiles: `BY_ROWS`, B's columns are the tile's rows (`tile[n PITCH + k]`: q k^T with the keys
// staged); otherwise B's rows are the tile's rows (`tile[k PITCH + n]`: p v with the values
// staged), read transposed.
template <int N, int PITCH, bool BY_ROWS>
__device__ __forceinline__ void load_step(unsigned int (*b)[4], const unsigned short* tile, int step) {
    int lane = threadIdx.x & 31, matrix = lane >> 3, row = lane & 7;
#pragma unroll
    for (int pair = 0; pair < N / 2; ++pair) {
        int n = 2 * pair + (matrix >> 1);
        if (BY_ROWS) {
            load_matrices<false>(b[pair], tile + (n * 8 + row) * PITCH + step * 16 + (matrix & 1) * 8);
        } else {
            load_matrices<true>(b[pair], tile + (step * 16 + (matrix & 1) * 8 + row) * PITCH + n * 8);
        }
    }
}

// c[N] += A (STEPS steps of 16 columns) B, B read from a staged tile as `load_step` says,
// each step's fragments loaded while the step before multiplies.
template <typename E, int N, int STEPS, int PITCH, bool BY_ROWS>
__device__ __forceinline__ void multiply(float (*c)[4], unsigned int (*a)[4], const unsigned short* tile) {
    unsigned int b[2][N / 2][4];
    load_step<N, PITCH, BY_ROWS>(b[0], tile, 0);
#pragma unroll
    for (int step = 0; step < STEPS; ++step) {
        if (step + 1 < STEPS) load_step<N, PITCH, BY_ROWS>(b[(step + 1) & 1], tile, step + 1);
#pragma unroll
        for (int pair = 0; pair < N / 2; ++pair) {
            E::mma(c[2 * pair], a[step], b[step & 1][pair][0], b[step & 1][pair][1]);
            E::mma(c[2 * pair + 1], a[step], b[step & 1][pair][2], b[step & 1][pair][3]);
        }
    }
}

// c[N] += A B with B's columns the tile's rows (q k^T with the keys staged).
template <typename E, int N, int STEPS, int PITCH>
__device__ __forceinline__ void multiply_by_rows(float (*c)[4], unsigned int (*a)[4], const unsigned short* tile) {
    multiply<E, N, STEPS, PITCH, true>(c, a, tile);
}

// c[N] += A B with B's rows the tile's rows (p v with the values staged).
template <typename E, int N, int STEPS, int PITCH>
__device__ __forceinline__ void multiply_by_columns(float (*c)[4], unsigned int (*a)[4], const unsigned short* tile) {
    multiply<E, N, STEPS, PITCH, false>(c, a, tile);
}

template <int N> __device__ __forceinline__ void zero(float (*c)[4]) {
    for (int n = 0; n < N; ++n) c[n][0] = c[n][1] = c[n][2] = c[n][3] = 0.0f;
}

// The combination of `v` over the 4 lanes that hold one row of a C tile.
template <typename Op> __device__ __forceinline__ float across_row(float v) {
    v = Op::combine(v, __shfl_xor_sync(0xffffffffu, v, 1));
    return Op::combine(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

// The problem and the first of the `per_block` rows (of `rows`) this block owns: blocks
// count the row tiles of problem 0, then of problem 1, ... With `last_first` (the query
// tiles of a causal mask, where a later tile walks more keys) each problem's tiles come in
// reverse order, so the longest blocks start first and the last wave holds short ones.
struct Owned {
    i64 n;
    int first;
};
__device__ __forceinline__ Owned owned(int rows, int per_block, bool last_first = false) {
    int tiles = (rows + per_block - 1) / per_block;
    Owned o;
    o.n = blockIdx.x / tiles;
    int tile = (int)(blockIdx.x % tiles);
    o.first = (last_first ? tiles - 1 - tile : tile) * per_block;
    return o;
}

// Dropout's factor of probability (n, i, j): 0 or 1 / (1 - p), the draw of its index in the
// problems' [T, S] probabilities (counted in 32 bits, as the dropout op's are).
__device__ __forceinline__ float dropout_factor(const Sdpa& p, i64 n, int i, int j) {
    if (!p.dropout) return 1.0f;
    unsigned int index = (unsigned int)((n * p.t + i) * p.s + j);
    return draw(index, p.seed) >= p.threshold ? p.keep : 0.0f;
}

// Whether query i may not see key j (padding, causal order, or past the end).
__device__ __forceinline__ bool hidden(const Sdpa& p, const u8* padding, int i, int j) {
    return j >= p.s || (p.causal && j > i) || (padding && padding[j]);
}

// The keys a tile of `rows` queries from `q0` walks: all, or under the causal mask those up
// to its last query.
__device__ __forceinline__ int keys_seen(const Sdpa& p, int q0, int rows) {
    return p.causal ? min(p.s, q0 + rows) : p.s;
}

__device__ __forceinline__ const u8* padding_of(const Sdpa& p, const u8* mask, i64 n) {
    return p.padded ? mask + (n / p.per_mask_row) * p.s : 0;
}

// Walks rows `start..end` of two sources (keys and values, or queries and the output's
// gradients) STEP rows at a time: each step's two tiles staged in shared memory, `tiles`
// holding two buffers of two `STEP x PITCH` tiles, while the next step's rows are in flight
// into registers. `extra(first, buffer)` stages whatever else a step needs beside its tiles,
// and `body(first, buffer, a, b)` works on them. A step stages the next one into the other
// buffer after its own work, so one barrier per step suffices.
template <typename E, int STEP, int D, int PITCH, typename Extra, typename Body>
__device__ __forceinline__ void walk(unsigned short* tiles, const Source& sa, const Source& sb, int start, int end,
                                     Extra extra, Body body) {
    if (start >= end) return;
    const int TILE = STEP * PITCH;
    Fetched<STEP, D> fa, fb;
    fetch(fa, sa, start);
    fetch(fb, sb, start);
    store<E, STEP, D, PITCH>(tiles, fa);
    store<E, STEP, D, PITCH>(tiles + TILE, fb);
    extra(start, 0);
    if (start + STEP < end) {
        fetch(fa, sa, start + STEP);
        fetch(fb, sb, start + STEP);
    }
    __syncthreads();
    int buffer = 0;
    for (int first = start; first < end; first += STEP) {
        unsigned short* staged = tiles + buffer * 2 * TILE;
        body(first, buffer, staged, staged + TILE);
        if (first + STEP < end) {
            unsigned short* next = tiles + (buffer ^ 1) * 2 * TILE;
            store<E, STEP, D, PITCH>(next, fa);
            store<E, STEP, D, PITCH>(next + TILE, fb);
            extra(first + STEP, buffer ^ 1);
            if (first + 2 * STEP < end) {
                fetch(fa, sa, first + 2 * STEP);
                fetch(fb, sb, first + 2 * STEP);
            }
        }
        __syncthreads();
        buffer ^= 1;
    }
}

// Shared memory of a tensor-core kernel: the owned rows staged once (TC_ROWS rows), then in
// the same place the walk's two buffers of two tiles of STEP rows.
template <int STEP, int PITCH> struct TcShared {
    static const int TILES = 4 * STEP * PITCH, STAGED = TC_ROWS * PITCH;
    static const int SIZE = TILES > STAGED ? TILES : STAGED;
};

// 2^x to about 2 ulp, results below 2^-126 flushed to zero (probabilities that small next
// to a row's largest), on the special function unit alone: the tensor-core kernels' softmax.
__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// The C tiles of a warp's 16 rows against N * 8 walked columns from `first`: float e of tile
// t is row `rows[e >> 1]` (lane `4 g + c`: g and g + 8 of the 16), column
// `first + 8 t + 2 c + (e & 1)`.
__device__ __forceinline__ int tile_column(int first, int t, int e) {
    return first + t * 8 + 2 * (threadIdx.x & 3) + (e & 1);
}

template <int N> __device__ __forceinline__ void scale(float (*s)[4], float factor) {
    for (int t = 0; t < N; ++t)
        for (int e = 0; e < 4; ++e) s[t][e] *= factor;
}

// `value` in place of the scores (queries in rows, keys in columns from k0) the masks hide.
template <int N>
__device__ __forceinline__ void mask_keys(float (*s)[4], float value, const Sdpa& p, const u8* padding, const int* rows,
                                          int k0) {
    for (int t = 0; t < N; ++t)
        for (int e = 0; e < 4; ++e)
            if (hidden(p, padding, rows[e >> 1], tile_column(k0, t, e))) s[t][e] = value;
}

// Dropout's factors applied to probabilities (queries in rows, keys in columns from k0).
template <int N>
__device__ __forceinline__ void drop_keys(float (*s)[4], const Sdpa& p, i64 n, const int* rows, int k0) {
    for (int t = 0; t < N; ++t)
        for (int e = 0; e < 4; ++e) s[t][e] *= dropout_factor(p, n, rows[e >> 1], tile_column(k0, t, e));
}

// The output of 128 queries and their log-sum-exp (natural), walking the keys BK at a time
// with a running maximum and sum per row.
template <typename E, int D, int BK>
__device__ void forward_tc(float* out, float* lse, const float* q, const float* k, const float* v, const u8* mask,
                           const Sdpa& p) {
    const int PD = D + 8;
    __shared__ __align__(16) unsigned short smem[TcShared<BK, PD>::SIZE];
    Owned block = owned(p.t, TC_ROWS, p.causal);
    i64 n = block.n;
    int q0 = block.first;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    // This warp's first and last query.
    int first = q0 + warp * 16, last = first + 15;
    const u8* padding = padding_of(p, mask, n);

    unsigned int qa[D / 16][4];
    rows_as_a<E, D, PD>(qa, smem, source(q, p.q, n, p.t, p.d), q0);

    int row[2] = {first + g, first + g + 8};
    float o[D / 8][4];
    zero<D / 8>(o);
    float m[2] = {-infinity<float>(), -infinity<float>()}, l[2] = {0.0f, 0.0f};
    walk<E, BK, D, PD>(
        smem, source(k, p.k, n, p.s, p.d), source(v, p.v, n, p.s, p.dv), 0, keys_seen(p, q0, TC_ROWS),
        [](int, int) {},
        [&](int k0, int, const unsigned short* ks, const unsigned short* vs) {
            if (p.causal && k0 > last) return;
            bool edge = p.padded || k0 + BK > p.s || (p.causal && k0 + BK - 1 > first);
            float sc[BK / 8][4];
            zero<BK / 8>(sc);
            multiply_by_rows<E, BK / 8, D / 16, PD>(sc, qa, ks);
            scale<BK / 8>(sc, p.scale_log2);
            if (edge) mask_keys<BK / 8>(sc, -infinity<float>(), p, padding, row, k0);
            float tile_max[2] = {-infinity<float>(), -infinity<float>()};
            for (int t = 0; t < BK / 8; ++t)
                for (int e = 0; e < 4; ++e) tile_max[e >> 1] = fmaxf(tile_max[e >> 1], sc[t][e]);
            float base[2];
            for (int r = 0; r < 2; ++r) {
                float new_max = fmaxf(m[r], across_row<Max<float> >(tile_max[r]));
                // Every key hidden so far: exponentials of minus infinity, relative to 0.
                base[r] = new_max == -infinity<float>() ? 0.0f : new_max;
                float rescale = fast_exp2(m[r] - base[r]);
                m[r] = new_max;
                l[r] *= rescale;
                for (int t = 0; t < D / 8; ++t) {
                    o[t][2 * r] *= rescale;
                    o[t][2 * r + 1] *= rescale;
                }
            }
            for (int t = 0; t < BK / 8; ++t) {
                for (int e = 0; e < 4; ++e) {
                    sc[t][e] = fast_exp2(sc[t][e] - base[e >> 1]);
                    l[e >> 1] += sc[t][e];
                }
            }
            // Dropout changes the probability in the output, not in the sum.
            if (p.dropout) drop_keys<BK / 8>(sc, p, n, row, k0);
            unsigned int pa[BK / 16][4];
            as_a<E, BK / 8>(pa, sc);
            multiply_by_columns<E, D / 8, BK / 16, PD>(o, pa, vs);
        });
    i64 ob = row_base(p.r0, n);
    for (int r = 0; r < 2; ++r) {
        float sum = across_row<Sum<float> >(l[r]);
        if (row[r] >= p.t) continue;
        float inverse = sum > 0.0f ? 1.0f / sum : 0.0f;
        if (c == 0) lse[n * p.t + row[r]] = sum > 0.0f ? (m[r] + log2f(sum)) * LN2 : -infinity<float>();
        for (int t = 0; t < D / 8; ++t) {
            for (int e = 0; e < 2; ++e) {
                int col = t * 8 + 2 * c + e;
                if (col < p.dv) out[ob + (i64)row[r] * p.r0.row + col] = o[t][2 * r + e] * inverse;
            }
        }
    }
}

// Row `i`'s log-sum-exp in base 2 and `dO . O` (`delta`), minus infinity for rows past the
// end (which see nothing).
__device__ __forceinline__ void row_saved(const Sdpa& p, const float* lse, const float* delta, i64 n, int i,
                                          float* lse2, float* d) {
    *lse2 = i < p.t ? lse[n * p.t + i] * LOG2E : -infinity<float>();
    *d = i < p.t ? delta[n * p.t + i] : 0.0f;
}

// The probability of a score (already times scale log2(e)) for a row of log-sum-exp `lse2`.
__device__ __forceinline__ float probability(float score, float lse2) {
    return lse2 == -infinity<float>() ? 0.0f : exp2f(score - lse2);
}

// The same through `fast_exp2` (the tensor-core kernels).
__device__ __forceinline__ float fast_probability(float score, float lse2) {
    return lse2 == -infinity<float>() ? 0.0f : fast_exp2(score - lse2);
}

// dQ of 128 queries: the probabilities recomputed from the log-sum-exp one key tile (BK keys)
// at a time, dS = P (dP - delta), dQ = scale dS K.
template <typename E, int D, int BK>
__device__ void backward_dq_tc(float* dq, const float* q, const float* k, const float* v, const u8* mask,
                               const float* grad, const float* lse, const float* delta, const Sdpa& p) {
    const int PD = D + 8;
    __shared__ __align__(16) unsigned short smem[TcShared<BK, PD>::SIZE];
    Owned block = owned(p.t, TC_ROWS, p.causal);
    i64 n = block.n;
    int q0 = block.first;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    int first = q0 + warp * 16, last = first + 15;
    const u8* padding = padding_of(p, mask, n);

    unsigned int qa[D / 16][4], ga[D / 16][4];
    rows_as_a<E, D, PD>(qa, smem, source(q, p.q, n, p.t, p.d), q0);
    rows_as_a<E, D, PD>(ga, smem, source(grad, p.grad, n, p.t, p.dv), q0);

    int row[2] = {first + g, first + g + 8};
    float lse2[2], dl[2];
    for (int r = 0; r < 2; ++r) row_saved(p, lse, delta, n, row[r], &lse2[r], &dl[r]);
    float acc[D / 8][4];
    zero<D / 8>(acc);
    walk<E, BK, D, PD>(
        smem, source(k, p.k, n, p.s, p.d), source(v, p.v, n, p.s, p.dv), 0, keys_seen(p, q0, TC_ROWS),
        [](int, int) {},
        [&](int k0, int, const unsigned short* ks, const unsigned short* vs) {
            if (p.causal && k0 > last) return;
            bool edge = p.padded || k0 + BK > p.s || last >= p.t || (p.causal && k0 + BK - 1 > first);
            float sc[BK / 8][4], dp[BK / 8][4];
            zero<BK / 8>(sc);
            zero<BK / 8>(dp);
            multiply_by_rows<E, BK / 8, D / 16, PD>(sc, qa, ks);
            multiply_by_rows<E, BK / 8, D / 16, PD>(dp, ga, vs);
            for (int t = 0; t < BK / 8; ++t)
                for (int e = 0; e < 4; ++e) sc[t][e] = fast_probability(sc[t][e] * p.scale_log2, lse2[e >> 1]);
            if (edge) mask_keys<BK / 8>(sc, 0.0f, p, padding, row, k0);
            if (p.dropout) drop_keys<BK / 8>(dp, p, n, row, k0);
            for (int t = 0; t < BK / 8; ++t)
                for (int e = 0; e < 4; ++e) sc[t][e] *= dp[t][e] - dl[e >> 1];
            unsigned int sa[BK / 16][4];
            as_a<E, BK / 8>(sa, sc);
            multiply_by_columns<E, D / 8, BK / 16, PD>(acc, sa, ks);
        });
    i64 base = row_base(p.r0, n);
    for (int t = 0; t < D / 8; ++t) {
        for (int e = 0; e < 4; ++e) {
            int i = row[e >> 1], col = t * 8 + 2 * c + (e & 1);
            if (i < p.t && col < p.d) dq[base + (i64)i * p.r0.row + col] = acc[t][e] * p.scale;
        }
    }
}

// dK and dV of 128 keys, walking the queries BQ at a time (under the causal mask, from the
// first query that sees any of them): dV = P^T dO (dropped out), dS^T = P^T (dP^T - delta),
// dK = scale dS^T Q.
template <typename E, int D, int BQ>
__device__ void backward_dkv_tc(float* dk, float* dv, const float* q, const float* k, const float* v,
                                const u8* mask, const float* grad, const float* lse, const float* delta,
                                const Sdpa& p) {
    const int PD = D + 8;
    __shared__ __align__(16) unsigned short smem[TcShared<BQ, PD>::SIZE];
    // The walked queries' log-sum-exps and deltas, per buffer.
    __shared__ float lse_tile[2][BQ], delta_tile[2][BQ];
    Owned block = owned(p.s, TC_ROWS);
    i64 n = block.n;
    int k0 = block.first;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    // This warp's first and last key.
    int first = k0 + warp * 16, last = first + 15;
    const u8* padding = padding_of(p, mask, n);

    unsigned int ka[D / 16][4], va[D / 16][4];
    rows_as_a<E, D, PD>(ka, smem, source(k, p.k, n, p.s, p.d), k0);
    rows_as_a<E, D, PD>(va, smem, source(v, p.v, n, p.s, p.dv), k0);

    int key[2] = {first + g, first + g + 8};
    float dka[D / 8][4], dva[D / 8][4];
    zero<D / 8>(dka);
    zero<D / 8>(dva);
    walk<E, BQ, D, PD>(
        smem, source(q, p.q, n, p.t, p.d), source(grad, p.grad, n, p.t, p.dv), p.causal ? k0 / BQ * BQ : 0, p.t,
        [&](int i0, int buffer) {
            if (threadIdx.x < BQ) {
                row_saved(p, lse, delta, n, i0 + threadIdx.x, &lse_tile[buffer][threadIdx.x],
                          &delta_tile[buffer][threadIdx.x]);
            }
        },
        [&](int i0, int buffer, const unsigned short* qs, const unsigned short* gs) {
            // Queries that all come before this warp's keys see none of them.
            if (p.causal && i0 + BQ - 1 < first) return;
            bool edge = p.padded || i0 + BQ > p.t || last >= p.s || (p.causal && i0 < last);
            float st[BQ / 8][4], dpt[BQ / 8][4];
            zero<BQ / 8>(st);
            zero<BQ / 8>(dpt);
            multiply_by_rows<E, BQ / 8, D / 16, PD>(st, ka, qs);
            multiply_by_rows<E, BQ / 8, D / 16, PD>(dpt, va, gs);
            // Keys in rows, queries (`i0 + local`) in columns.
            const float *lse_of = lse_tile[buffer], *delta_of = delta_tile[buffer];
            for (int t = 0; t < BQ / 8; ++t)
                for (int e = 0; e < 4; ++e)
                    st[t][e] = fast_probability(st[t][e] * p.scale_log2, lse_of[tile_column(0, t, e)]);
            if (edge) {
                for (int t = 0; t < BQ / 8; ++t) {
                    for (int e = 0; e < 4; ++e) {
                        int i = tile_column(i0, t, e);
                        if (i >= p.t || hidden(p, padding, i, key[e >> 1])) st[t][e] = 0.0f;
                    }
                }
            }
            for (int t = 0; t < BQ / 8; ++t) {
                for (int e = 0; e < 4; ++e) {
                    float factor = p.dropout ? dropout_factor(p, n, tile_column(i0, t, e), key[e >> 1]) : 1.0f;
                    dpt[t][e] = st[t][e] * (dpt[t][e] * factor - delta_of[tile_column(0, t, e)]);
                    st[t][e] *= factor;
                }
            }
            unsigned int pa[BQ / 16][4], sa[BQ / 16][4];
            as_a<E, BQ / 8>(pa, st);
            as_a<E, BQ / 8>(sa, dpt);
            multiply_by_columns<E, D / 8, BQ / 16, PD>(dva, pa, gs);
            multiply_by_columns<E, D / 8, BQ / 16, PD>(dka, sa, qs);
        });
    i64 kbase = row_base(p.r0, n), vbase = row_base(p.r1, n);
    for (int t = 0; t < D / 8; ++t) {
        for (int e = 0; e < 4; ++e) {
            int j = key[e >> 1], col = t * 8 + 2 * c + (e & 1);
            if (j >= p.s) continue;
            if (col < p.d) dk[kbase + (i64)j * p.r0.row + col] = dka[t][e] * p.scale;
            if (col < p.dv) dv[vbase + (i64)j * p.r1.row + col] = dva[t][e];
        }
    }
}

// Entry points per element (`half`: f16, `bf16`) and width D, with the rows of the walked
// side each pass stages at a time: fewer for D = 128, where the accumulators take more
// registers (the staged tiles stay within 48 KiB of shared memory either way).
#define TENSOR_CORE_ATTENTION_ENTRIES(NAME, E, D, FORWARD_KEYS, DQ_KEYS, DKV_QUERIES)             \
    extern "C" __global__ void __launch_bounds__(TC_THREADS)                                      \
        attention_forward_##NAME##_d##D(float* out, float* lse, const float* q, const float* k,   \
                                        const float* v, const u8* mask, Sdpa p) {                 \
        forward_tc<E, D, FORWARD_KEYS>(out, lse, q, k, v, mask, p);                               \
    }                                                                                             \
    extern "C" __global__ void __launch_bounds__(TC_THREADS)                                      \
        attention_dq_##NAME##_d##D(float* dq, const float* q, const float* k, const float* v,     \
                                   const u8* mask, const float* grad, const float* lse,           \
                                   const float* delta, Sdpa p) {                                  \
        backward_dq_tc<E, D, DQ_KEYS>(dq, q, k, v, mask, grad, lse, delta, p);                    \
    }                                                                                             \
    extern "C" __global__ void __launch_bounds__(TC_THREADS)                                      \
        attention_dkv_##NAME##_d##D(float* dk, float* dv, const float* q, const float* k,         \
                                    const float* v, const u8* mask, const float* grad,            \
                                    const float* lse, const float* delta, Sdpa p) {               \
        backward_dkv_tc<E, D, DKV_QUERIES>(dk, dv, q, k, v, mask, grad, lse, delta, p);           \
    }
TENSOR_CORE_ATTENTION_ENTRIES(half, F16, 64, 64, 32, 32)
TENSOR_CORE_ATTENTION_ENTRIES(half, F16, 128, 32, 16, 16)
TENSOR_CORE_ATTENTION_ENTRIES(bf16, BF16, 64, 64, 32, 32)
TENSOR_CORE_ATTENTION_ENTRIES(bf16, BF16, 128, 32, 16, 16)

// The f32 kernels: a quad of 4 neighbouring lanes owns one row (32 rows a block), each lane a
// quarter of the row's width in float4 chunks (`lane % 4 + 4 m`), so a dot product is 2
// shuffles away; the walked side is staged 32 rows at a time in shared memory, where the
// quads of a warp read the same row (a broadcast) and the lanes of a quad neighbouring
// chunks of it.
#define QUAD_ROWS 32

// This lane's chunks of the row at `x + at` (columns below `width`; zeros past it, or
// everywhere when the row does not exist).
template <int C>
__device__ __forceinline__ void load_row(float4* mine, const float* x, i64 at, int width, bool exists) {
    int part = threadIdx.x & 3;
    for (int m = 0; m < C; ++m) {
        float e[4];
        for (int k = 0; k < 4; ++k) {
            int col = (part + 4 * m) * 4 + k;
            e[k] = exists && col < width ? x[at + col] : 0.0f;
        }
        mine[m] = make_float4(e[0], e[1], e[2], e[3]);
    }
}

template <int C> __device__ __forceinline__ float quad_dot(const float4* mine, const float* row) {
    const float4* chunks = (const float4*)row + (threadIdx.x & 3);
    float sum = 0.0f;
    for (int m = 0; m < C; ++m) {
        float4 a = mine[m], b = chunks[4 * m];
        sum += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
    }
    return across_row<Sum<float> >(sum);
}

// mine += w row (this lane's chunks).
template <int C> __device__ __forceinline__ void add_scaled(float4* mine, float w, const float* row) {
    const float4* chunks = (const float4*)row + (threadIdx.x & 3);
    for (int m = 0; m < C; ++m) {
        float4 b = chunks[4 * m];
        mine[m].x += w * b.x;
        mine[m].y += w * b.y;
        mine[m].z += w * b.z;
        mine[m].w += w * b.w;
    }
}

template <int C> __device__ __forceinline__ void scale_row(float4* mine, float w) {
    for (int m = 0; m < C; ++m) {
        mine[m].x *= w;
        mine[m].y *= w;
        mine[m].z *= w;
        mine[m].w *= w;
    }
}

// Writes this lane's chunks times `w` to the row at `x + at` (columns below `width`).
template <int C> __device__ __forceinline__ void store_row(float* x, i64 at, int width, const float4* mine, float w) {
    int part = threadIdx.x & 3;
    for (int m = 0; m < C; ++m) {
        float e[4] = {mine[m].x, mine[m].y, mine[m].z, mine[m].w};
        for (int k = 0; k < 4; ++k) {
            int col = (part + 4 * m) * 4 + k;
            if (col < width) x[at + col] = e[k] * w;
        }
    }
}

// Rows `first..first + QUAD_ROWS` (those below `count`) of an operand, columns below
// `width`, in shared memory (`16 C` floats a row, zeros elsewhere).
template <int C>
__device__ void stage_f32(float* tile, const float* x, i64 base, i64 row_stride, int first, int count, int width) {
    const int COLS = 16 * C;
    for (int e = threadIdx.x; e < QUAD_ROWS * COLS; e += ATTENTION_THREADS) {
        int r = e / COLS, c = e % COLS;
        tile[e] = first + r < count && c < width ? x[base + (i64)(first + r) * row_stride + c] : 0.0f;
    }
}

template <int C>
__device__ void forward_f32(float* out, float* lse, const float* q, const float* k, const float* v, const u8* mask,
                            const Sdpa& p) {
    const int D = 16 * C;
    __shared__ __align__(16) float ks[QUAD_ROWS * D];
    __shared__ __align__(16) float vs[QUAD_ROWS * D];
    Owned block = owned(p.t, QUAD_ROWS, p.causal);
    i64 n = block.n;
    int q0 = block.first, i = q0 + (threadIdx.x >> 2);
    const u8* padding = padding_of(p, mask, n);
    i64 kb = row_base(p.k, n), vb = row_base(p.v, n);
    float4 mine[C], acc[C];
    load_row<C>(mine, q, row_base(p.q, n) + (i64)i * p.q.row, p.d, i < p.t);
    for (int m = 0; m < C; ++m) acc[m] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float max = -infinity<float>(), sum = 0.0f;
    int end = keys_seen(p, q0, QUAD_ROWS);
    for (int k0 = 0; k0 < end; k0 += QUAD_ROWS) {
        __syncthreads();
        stage_f32<C>(ks, k, kb, p.k.row, k0, p.s, p.d);
        stage_f32<C>(vs, v, vb, p.v.row, k0, p.s, p.dv);
        __syncthreads();
        float sc[QUAD_ROWS];
        float tile_max = -infinity<float>();
        for (int j = 0; j < QUAD_ROWS; ++j) {
            float x = quad_dot<C>(mine, ks + j * D) * p.scale_log2;
            sc[j] = hidden(p, padding, i, k0 + j) ? -infinity<float>() : x;
            tile_max = fmaxf(tile_max, sc[j]);
        }
        float new_max = fmaxf(max, tile_max);
        float base = new_max == -infinity<float>() ? 0.0f : new_max;
        float rescale = exp2f(max - base);
        max = new_max;
        sum *= rescale;
        scale_row<C>(acc, rescale);
        for (int j = 0; j < QUAD_ROWS; ++j) {
            float weight = exp2f(sc[j] - base);
            sum += weight;
            add_scaled<C>(acc, weight * dropout_factor(p, n, i, k0 + j), vs + j * D);
        }
    }
    if (i >= p.t) return;
    if ((threadIdx.x & 3) == 0) lse[n * p.t + i] = sum > 0.0f ? (max + log2f(sum)) * LN2 : -infinity<float>();
    store_row<C>(out, row_base(p.r0, n) + (i64)i * p.r0.row, p.dv, acc, sum > 0.0f ? 1.0f / sum : 0.0f);
}

template <int C>
__device__ void backward_dq_f32(float* dq, const float* q, const float* k, const float* v, const u8* mask,
                                const float* grad, const float* lse, const float* delta, const Sdpa& p) {
    const int D = 16 * C;
    __shared__ __align__(16) float ks[QUAD_ROWS * D];
    __shared__ __align__(16) float vs[QUAD_ROWS * D];
    Owned block = owned(p.t, QUAD_ROWS, p.causal);
    i64 n = block.n;
    int q0 = block.first, i = q0 + (threadIdx.x >> 2);
    const u8* padding = padding_of(p, mask, n);
    i64 kb = row_base(p.k, n), vb = row_base(p.v, n);
    float4 mine[C], g[C], acc[C];
    load_row<C>(mine, q, row_base(p.q, n) + (i64)i * p.q.row, p.d, i < p.t);
    load_row<C>(g, grad, row_base(p.grad, n) + (i64)i * p.grad.row, p.dv, i < p.t);
    for (int m = 0; m < C; ++m) acc[m] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float lse2, dl;
    row_saved(p, lse, delta, n, i, &lse2, &dl);
    int end = keys_seen(p, q0, QUAD_ROWS);
    for (int k0 = 0; k0 < end; k0 += QUAD_ROWS) {
        __syncthreads();
        stage_f32<C>(ks, k, kb, p.k.row, k0, p.s, p.d);
        stage_f32<C>(vs, v, vb, p.v.row, k0, p.s, p.dv);
        __syncthreads();
        for (int j = 0; j < QUAD_ROWS; ++j) {
            float score = quad_dot<C>(mine, ks + j * D) * p.scale_log2;
            float dp = quad_dot<C>(g, vs + j * D);
            float prob = hidden(p, padding, i, k0 + j) ? 0.0f : probability(score, lse2);
            add_scaled<C>(acc, prob * (dp * dropout_factor(p, n, i, k0 + j) - dl), ks + j * D);
        }
    }
    if (i < p.t) store_row<C>(dq, row_base(p.r0, n) + (i64)i * p.r0.row, p.d, acc, p.scale);
}

template <int C>
__device__ void backward_dkv_f32(float* dk, float* dv, const float* q, const float* k, const float* v,
                                 const u8* mask, const float* grad, const float* lse, const float* delta,
                                 const Sdpa& p) {
    const int D = 16 * C;
    __shared__ __align__(16) float qs[QUAD_ROWS * D];
    __shared__ __align__(16) float gs[QUAD_ROWS * D];
    __shared__ float lse_tile[QUAD_ROWS], delta_tile[QUAD_ROWS];
    Owned block = owned(p.s, QUAD_ROWS);
    i64 n = block.n;
    int k0 = block.first, j = k0 + (threadIdx.x >> 2);
    const u8* padding = padding_of(p, mask, n);
    i64 qb = row_base(p.q, n), gb = row_base(p.grad, n);
    float4 key[C], value[C], dka[C], dva[C];
    load_row<C>(key, k, row_base(p.k, n) + (i64)j * p.k.row, p.d, j < p.s);
    load_row<C>(value, v, row_base(p.v, n) + (i64)j * p.v.row, p.dv, j < p.s);
    for (int m = 0; m < C; ++m) dka[m] = dva[m] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int i0 = p.causal ? k0 / QUAD_ROWS * QUAD_ROWS : 0; i0 < p.t; i0 += QUAD_ROWS) {
        __syncthreads();
        stage_f32<C>(qs, q, qb, p.q.row, i0, p.t, p.d);
        stage_f32<C>(gs, grad, gb, p.grad.row, i0, p.t, p.dv);
        for (int r = threadIdx.x; r < QUAD_ROWS; r += ATTENTION_THREADS) {
            row_saved(p, lse, delta, n, i0 + r, &lse_tile[r], &delta_tile[r]);
        }
        __syncthreads();
        for (int r = 0; r < QUAD_ROWS; ++r) {
            int i = i0 + r;
            float score = quad_dot<C>(key, qs + r * D) * p.scale_log2;
            float dp = quad_dot<C>(value, gs + r * D);
            float prob = i >= p.t || hidden(p, padding, i, j) ? 0.0f : probability(score, lse_tile[r]);
            float factor = dropout_factor(p, n, i, j);
            add_scaled<C>(dva, prob * factor, gs + r * D);
            add_scaled<C>(dka, prob * (dp * factor - delta_tile[r]), qs + r * D);
        }
    }
    if (j >= p.s) return;
    store_row<C>(dk, row_base(p.r0, n) + (i64)j * p.r0.row, p.d, dka, p.scale);
    store_row<C>(dv, row_base(p.r1, n) + (i64)j * p.r1.row, p.dv, dva, 1.0f);
}

// Entry points per width D = 16 C (rows zero-padded to it).
#define F32_ATTENTION_ENTRIES(D, C)                                                              \
    extern "C" __global__ void __launch_bounds__(ATTENTION_THREADS)                               \
        attention_forward_f32_d##D(float* out, float* lse, const float* q, const float* k,        \
                                   const float* v, const u8* mask, Sdpa p) {                      \
        forward_f32<C>(out, lse, q, k, v, mask, p);                                               \
    }                                                                                             \
    extern "C" __global__ void __launch_bounds__(ATTENTION_THREADS)                               \
        attention_dq_f32_d##D(float* dq, const float* q, const float* k, const float* v,          \
                              const u8* mask, const float* grad, const float* lse,                \
                              const float* delta, Sdpa p) {                                       \
        backward_dq_f32<C>(dq, q, k, v, mask, grad, lse, delta, p);                               \
    }                                                                                             \
    extern "C" __global__ void __launch_bounds__(ATTENTION_THREADS)                               \
        attention_dkv_f32_d##D(float* dk, float* dv, const float* q, const float* k,              \
                               const float* v, const u8* mask, const float* grad,                 \
                               const float* lse, const float* delta, Sdpa p) {                    \
        backward_dkv_f32<C>(dk, dv, q, k, v, mask, grad, lse, delta, p);                          \
    }
F32_ATTENTION_ENTRIES(16, 1)
F32_ATTENTION_ENTRIES(32, 2)
F32_ATTENTION_ENTRIES(64, 4)
F32_ATTENTION_ENTRIES(128, 8)
