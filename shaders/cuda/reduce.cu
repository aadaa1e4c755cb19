// Reductions (backend/cuda/reduce.rs): one block per output (grid-stride over outputs), its
// threads striding over the group and combining across the block at the end. `kept` views
// the input over the kept axes (with the offset), `group` over the reduced ones (offset 0).

#define REDUCE_THREADS 256

// The views go down to the helpers by reference. Passed by value through these templates,
// they made every thread copy them into a 2,592-byte stack frame in local memory (`ptxas -v`
// on sm_90), in the kernels that took 190 us for a row sum of 4 M floats on an H100.

// Writes a combined value: in the stored dtype for a finished output, at the accumulator's
// width for a partial result.
__device__ __forceinline__ void put(float* dst, float v) { *dst = v; }
__device__ __forceinline__ void put(double* dst, double v) { *dst = v; }
__device__ __forceinline__ void put(f16_bits* dst, float v) { *dst = float_to_half(v); }
__device__ __forceinline__ void put(bf16_bits* dst, float v) { *dst = float_to_bf16(v); }

// Few outputs over long groups (a loss summed to one number, a bias's gradient) would leave
// most of the GPU idle with a block per output, so each group may be cut into `parts`
// consecutive pieces: block work item `w` takes output `w % outputs` (or column block) and
// piece `w / outputs`, and writes `out[piece * outputs + output]`, partial results that
// `reduce_finish` combines. With one part `out` is the result itself.
template <typename S, typename O, typename Op>
__device__ void reduce_with(O* out, const S* x, const View& kept, const View& group, i64 outputs,
                            i64 size, i64 parts) {
    typedef typename Num<S>::T T;
    i64 piece = (size + parts - 1) / parts;
    for (i64 w = blockIdx.x; w < outputs * parts; w += gridDim.x) {
        i64 o = w % outputs, p = w / outputs;
        i64 base = at(kept, o), end = min(size, (p + 1) * piece);
        T acc = Op::identity();
        for (i64 j = p * piece + threadIdx.x; j < end; j += blockDim.x) {
            acc = Op::combine(acc, Num<S>::load(x[base + at(group, j)]));
        }
        acc = block_combine<T, Op>(acc);
        if (threadIdx.x == 0) put(&out[p * outputs + o], acc);
    }
}

// The same for outputs that lie next to each other in memory (a sum over the rows of a
// matrix, a bias's gradient): a block of COLUMNS x LANES threads takes COLUMNS neighbouring
// outputs, each of its LANES rows of threads a share of every group (piece), so a warp reads
// neighbouring elements; the shares are combined in shared memory.
#define COLUMNS 32
#define LANES 8
template <typename S, typename O, typename Op>
__device__ void reduce_columns_with(O* out, const S* x, const View& kept, const View& group,
                                    i64 outputs, i64 size, i64 parts) {
    typedef typename Num<S>::T T;
    __shared__ double partial_words[LANES][COLUMNS];
    T (*partial)[COLUMNS] = (T (*)[COLUMNS])partial_words;
    int column = threadIdx.x % COLUMNS, lane = threadIdx.x / COLUMNS;
    i64 column_blocks = (outputs + COLUMNS - 1) / COLUMNS;
    i64 piece = (size + parts - 1) / parts;
    for (i64 w = blockIdx.x; w < column_blocks * parts; w += gridDim.x) {
        i64 o = (w % column_blocks) * COLUMNS + column, p = w / column_blocks;
        i64 end = min(size, (p + 1) * piece);
        T acc = Op::identity();
        if (o < outputs) {
            i64 base = at(kept, o);
            for (i64 j = p * piece + lane; j < end; j += LANES) {
                acc = Op::combine(acc, Num<S>::load(x[base + at(group, j)]));
            }
        }
        __syncthreads();
        partial[lane][column] = acc;
        __syncthreads();
        if (lane == 0 && o < outputs) {
            for (int l = 1; l < LANES; ++l) acc = Op::combine(acc, partial[l][column]);
            put(&out[p * outputs + o], acc);
        }
    }
}

// Many short groups (attention's rows of 64 summed for its backward pass): a warp per output,
// combined by shuffles, where a block per output would leave most of its threads idle.
template <typename S, typename Op>
__device__ void reduce_warps_with(S* out, const S* x, const View& kept, const View& group,
                                  i64 outputs, i64 size) {
    typedef typename Num<S>::T T;
    int lane = threadIdx.x % 32, warps = blockDim.x / 32;
    for (i64 o = (i64)blockIdx.x * warps + threadIdx.x / 32; o < outputs; o += (i64)gridDim.x * warps) {
        i64 base = at(kept, o);
        T acc = Op::identity();
        for (i64 j = lane; j < size; j += 32) {
            acc = Op::combine(acc, Num<S>::load(x[base + at(group, j)]));
        }
        for (int offset = 16; offset > 0; offset >>= 1) {
            acc = Op::combine(acc, __shfl_xor_sync(0xffffffffu, acc, offset));
        }
        if (lane == 0) out[o] = Num<S>::store(acc);
    }
}

// `mode`: 0 a block per output, 1 a block per 32 neighbouring outputs, 2 a warp per output
// (whole groups only: `parts` 1, `O` the stored dtype).
template <typename S, typename O>
__device__ void reduce(O* out, const S* x, const View& kept, const View& group, i64 outputs,
                       i64 size, int kind, int mode, i64 parts) {
    typedef typename Num<S>::T T;
    if (mode == 2) {
        switch (kind) {
        case REDUCTION_SUM: reduce_warps_with<S, Sum<T> >((S*)out, x, kept, group, outputs, size); break;
        case REDUCTION_MAX: reduce_warps_with<S, Max<T> >((S*)out, x, kept, group, outputs, size); break;
        case REDUCTION_MIN: reduce_warps_with<S, Min<T> >((S*)out, x, kept, group, outputs, size); break;
        }
        return;
    }
    if (mode == 1) {
        switch (kind) {
        case REDUCTION_SUM: reduce_columns_with<S, O, Sum<T> >(out, x, kept, group, outputs, size, parts); break;
        case REDUCTION_MAX: reduce_columns_with<S, O, Max<T> >(out, x, kept, group, outputs, size, parts); break;
        case REDUCTION_MIN: reduce_columns_with<S, O, Min<T> >(out, x, kept, group, outputs, size, parts); break;
        }
        return;
    }
    switch (kind) {
    case REDUCTION_SUM: reduce_with<S, O, Sum<T> >(out, x, kept, group, outputs, size, parts); break;
    case REDUCTION_MAX: reduce_with<S, O, Max<T> >(out, x, kept, group, outputs, size, parts); break;
    case REDUCTION_MIN: reduce_with<S, O, Min<T> >(out, x, kept, group, outputs, size, parts); break;
    }
}

// Combines the `parts` partial results of each output (`partial[p * outputs + o]`), a thread
// per output.
template <typename S, typename Op>
__device__ void reduce_finish_with(S* out, const typename Num<S>::T* partial, i64 outputs, i64 parts) {
    typedef typename Num<S>::T T;
    for (i64 o = first_index(); o < outputs; o += grid_stride()) {
        T acc = Op::identity();
        for (i64 p = 0; p < parts; ++p) acc = Op::combine(acc, partial[p * outputs + o]);
        put(&out[o], acc);
    }
}

template <typename S>
__device__ void reduce_finish(S* out, const typename Num<S>::T* partial, i64 outputs, i64 parts, int kind) {
    typedef typename Num<S>::T T;
    switch (kind) {
    case REDUCTION_SUM: reduce_finish_with<S, Sum<T> >(out, partial, outputs, parts); break;
    case REDUCTION_MAX: reduce_finish_with<S, Max<T> >(out, partial, outputs, parts); break;
    case REDUCTION_MIN: reduce_finish_with<S, Min<T> >(out, partial, outputs, parts); break;
    }
}

// Whether (a, ia) beats (b, ib) for argmax (`max`) or argmin: a NaN beats numbers, then the
// larger (smaller) value, then the lower index.
template <typename T> __device__ __forceinline__ bool beats(T a, i64 ia, T b, i64 ib, int max) {
    bool a_nan = a != a, b_nan = b != b;
    if (a_nan || b_nan) return a_nan && (!b_nan || ia < ib);
    if (a != b) return max ? a > b : a < b;
    return ia < ib;
}

template <typename S>
__device__ void arg_reduce(i64* out, const S* x, const View& kept, i64 outputs, i64 size, i64 stride,
                           int max) {
    typedef typename Num<S>::T T;
    __shared__ double best_value_words[REDUCE_THREADS];
    __shared__ i64 best_index[REDUCE_THREADS];
    T* best_value = (T*)best_value_words;
    for (i64 o = blockIdx.x; o < outputs; o += gridDim.x) {
        i64 base = at(kept, o);
        T best = Num<S>::load(x[base]);
        i64 index = 0;
        for (i64 j = threadIdx.x; j < size; j += blockDim.x) {
            T v = Num<S>::load(x[base + j * stride]);
            if (beats(v, j, best, index, max)) {
                best = v;
                index = j;
            }
        }
        __syncthreads();
        best_value[threadIdx.x] = best;
        best_index[threadIdx.x] = index;
        __syncthreads();
        for (int half = blockDim.x / 2; half > 0; half >>= 1) {
            if (threadIdx.x < half) {
                int other = threadIdx.x + half;
                if (beats(best_value[other], best_index[other], best_value[threadIdx.x], best_index[threadIdx.x], max)) {
                    best_value[threadIdx.x] = best_value[other];
                    best_index[threadIdx.x] = best_index[other];
                }
            }
            __syncthreads();
        }
        if (threadIdx.x == 0) out[o] = best_index[0];
    }
}

// One thread's (or a block's) running maximum `m` and sum of exponentials relative to it,
// `s`, with `v` added: the sum rescaled when the maximum grows, so a row is read once (the
// two-pass form, a maximum and then the sum, read every row twice). A NaN makes `m` NaN; an
// infinite `m` makes `s` meaningless, which `row_statistics` replaces by 1.
template <typename T> __device__ __forceinline__ void online_add(T* m, T* s, T v) {
    if (v != v) {
        *m = v;
    } else if (v > *m) {
        *s = *s * m_exp(*m - v) + (T)1;
        *m = v;
    } else if (v != -infinity<T>()) {
        *s += m_exp(v - *m);
    }
}

// Two running (maximum, sum) pairs as one: each sum rescaled to the larger maximum (a part
// whose maximum is -inf holds no terms).
template <typename T> __device__ __forceinline__ void online_merge(T* m, T* s, T m2, T s2) {
    T top = Max<T>::combine(*m, m2);
    T lower = -infinity<T>();
    T sum = (*m == lower ? (T)0 : *s * m_exp(*m - top)) + (m2 == lower ? (T)0 : s2 * m_exp(m2 - top));
    *m = top;
    *s = sum;
}

// The maximum and the sum of exponentials (relative to it) of one row, in one pass over it;
// an infinite maximum leaves the sum 1 (the row's log-sum-exp is that maximum), a NaN makes
// the maximum NaN. Every thread of the block gets both.
template <typename S, typename T>
__device__ void row_statistics(const S* x, i64 base, i64 size, i64 stride, T* max_out, T* sum_out) {
    T m = Max<T>::identity(), s = (T)0;
    for (i64 j = threadIdx.x; j < size; j += blockDim.x) {
        online_add<T>(&m, &s, Num<S>::load(x[base + j * stride]));
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        T m2 = __shfl_xor_sync(0xffffffffu, m, offset), s2 = __shfl_xor_sync(0xffffffffu, s, offset);
        online_merge<T>(&m, &s, m2, s2);
    }
    __shared__ double scratch_words[2][32];
    T* maxima = (T*)scratch_words[0];
    T* sums = (T*)scratch_words[1];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) {
        maxima[warp] = m;
        sums[warp] = s;
    }
    __syncthreads();
    int warps = (blockDim.x + 31) >> 5;
    m = lane < warps ? maxima[lane] : Max<T>::identity();
    s = lane < warps ? sums[lane] : (T)0;
    for (int offset = 16; offset > 0; offset >>= 1) {
        T m2 = __shfl_xor_sync(0xffffffffu, m, offset), s2 = __shfl_xor_sync(0xffffffffu, s, offset);
        online_merge<T>(&m, &s, m2, s2);
    }
    if (m != m || m == infinity<T>() || m == -infinity<T>()) {
        s = (T)1;
    }
    *max_out = m;
    *sum_out = s;
}

template <typename S>
__device__ void softmax(S* out, const S* x, View rows, i64 outputs, i64 size, i64 stride, int log) {
    typedef typename Num<S>::T T;
    for (i64 o = blockIdx.x; o < outputs; o += gridDim.x) {
        i64 base = at(rows, o);
        T m, s;
        row_statistics<S, T>(x, base, size, stride, &m, &s);
        T log_s = m_log(s);
        for (i64 j = threadIdx.x; j < size; j += blockDim.x) {
            T shifted = Num<S>::load(x[base + j * stride]) - m;
            out[o * size + j] = Num<S>::store(log ? shifted - log_s : m_exp(shifted) / s);
        }
    }
}

// The input gradient of softmax (`s * (g - sum(g s))`) or log-softmax (`g - e^y sum(g)`),
// the softmax recomputed from `x`.
template <typename S>
__device__ void softmax_backward(S* out, const S* g, View grows, i64 gstride, const S* x, View xrows,
                                 i64 xstride, i64 outputs, i64 size, int log) {
    typedef typename Num<S>::T T;
    for (i64 o = blockIdx.x; o < outputs; o += gridDim.x) {
        i64 xbase = at(xrows, o), gbase = at(grows, o);
        T m, s;
        row_statistics<S, T>(x, xbase, size, xstride, &m, &s);
        T dot = (T)0;
        for (i64 j = threadIdx.x; j < size; j += blockDim.x) {
            T grad = Num<S>::load(g[gbase + j * gstride]);
            dot += log ? grad : grad * (m_exp(Num<S>::load(x[xbase + j * xstride]) - m) / s);
        }
        dot = block_combine<T, Sum<T> >(dot);
        for (i64 j = threadIdx.x; j < size; j += blockDim.x) {
            T p = m_exp(Num<S>::load(x[xbase + j * xstride]) - m) / s;
            T grad = Num<S>::load(g[gbase + j * gstride]);
            out[o * size + j] = Num<S>::store(log ? grad - p * dot : p * (grad - dot));
        }
    }
}

template <typename S>
__device__ void logsumexp(S* out, const S* x, View rows, i64 outputs, i64 size, i64 stride) {
    typedef typename Num<S>::T T;
    for (i64 o = blockIdx.x; o < outputs; o += gridDim.x) {
        T m, s;
        row_statistics<S, T>(x, at(rows, o), size, stride, &m, &s);
        if (threadIdx.x == 0) out[o] = Num<S>::store(m + m_log(s));
    }
}

#define REDUCE_ENTRIES(sfx, S)                                                                   \
    extern "C" __global__ void reduce_##sfx(S* out, const S* x, View kept, View group,          \
                                            i64 outputs, i64 size, int kind, int columns) {       \
        reduce<S, S>(out, x, kept, group, outputs, size, kind, columns, 1);                       \
    }                                                                                             \
    extern "C" __global__ void reduce_parts_##sfx(Num<S>::T* out, const S* x, View kept,         \
                                                  View group, i64 outputs, i64 size, int kind,    \
                                                  int columns, i64 parts) {                       \
        reduce<S, Num<S>::T>(out, x, kept, group, outputs, size, kind, columns, parts);          \
    }                                                                                             \
    extern "C" __global__ void reduce_finish_##sfx(S* out, const Num<S>::T* partial,             \
                                                   i64 outputs, i64 parts, int kind) {            \
        reduce_finish<S>(out, partial, outputs, parts, kind);                                     \
    }                                                                                             \
    extern "C" __global__ void arg_reduce_##sfx(i64* out, const S* x, View kept, i64 outputs,    \
                                                i64 size, i64 stride, int max) {                  \
        arg_reduce<S>(out, x, kept, outputs, size, stride, max);                                  \
    }                                                                                             \
    extern "C" __global__ void softmax_##sfx(S* out, const S* x, View rows, i64 outputs,         \
                                             i64 size, i64 stride, int log) {                     \
        softmax<S>(out, x, rows, outputs, size, stride, log);                                     \
    }                                                                                             \
    extern "C" __global__ void softmax_backward_##sfx(S* out, const S* g, View grows,            \
                                                      i64 gstride, const S* x, View xrows,        \
                                                      i64 xstride, i64 outputs, i64 size,         \
                                                      int log) {                                  \
        softmax_backward<S>(out, g, grows, gstride, x, xrows, xstride, outputs, size, log);      \
    }                                                                                             \
    extern "C" __global__ void logsumexp_##sfx(S* out, const S* x, View rows, i64 outputs,       \
                                               i64 size, i64 stride) {                            \
        logsumexp<S>(out, x, rows, outputs, size, stride);                                        \
    }
FOR_FLOATS(REDUCE_ENTRIES)
