// The fused cross-entropy's gradient (backend/cuda/loss.rs), as backend/cpu/cross_entropy.rs
// computes it: (e^(x - lse) - onehot(target)) * weight, logits [N, C, inner] read through
// their view, one (lse, weight) pair and one target per row (N x inner).
template <typename S, typename P>
__device__ void cross_entropy_grad(S* out, const S* x, View vx, const P* pairs, View vp,
                                   const i64* targets, View vt, i64 classes, i64 inner, i64 n) {
    typedef typename Num<S>::T T;
    for (i64 i = first_index(); i < n; i += grid_stride()) {
        i64 label = (i / inner) % classes;
        i64 row = (i / (classes * inner)) * inner + i % inner;
        T hit = targets[at(vt, row)] == label ? (T)1 : (T)0;
        T lse = (T)Num<P>::load(pairs[at(vp, 2 * row)]);
        T weight = (T)Num<P>::load(pairs[at(vp, 2 * row + 1)]);
        out[i] = Num<S>::store((m_exp(Num<S>::load(x[at(vx, i)]) - lse) - hit) * weight);
    }
}

// The same for row-major logits [N, C] (one position per row, a language model's case): a
// block per row, which reads the row's (lse, weight) pair and target once and walks its
// classes with no index arithmetic (the element-wise form divides two 64-bit indices per
// logit, which made it compute-bound: 2.7 ms for GPT-2's [8192, 50257] on an H100).
template <typename S, typename P>
__device__ void cross_entropy_grad_rows(S* out, const S* x, i64 x_offset, const P* pairs, View vp,
                                        const i64* targets, View vt, i64 classes, i64 rows) {
    typedef typename Num<S>::T T;
    for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
        i64 label = targets[at(vt, row)];
        T lse = (T)Num<P>::load(pairs[at(vp, 2 * row)]);
        T weight = (T)Num<P>::load(pairs[at(vp, 2 * row + 1)]);
        const S* logits = x + x_offset + row * classes;
        S* grads = out + row * classes;
        for (i64 c = threadIdx.x; c < classes; c += blockDim.x) {
            T hit = c == label ? (T)1 : (T)0;
            grads[c] = Num<S>::store((m_exp(Num<S>::load(logits[c]) - lse) - hit) * weight);
        }
    }
}

#define LOSS_ENTRY(sfx, S)                                                                       \
    extern "C" __global__ void cross_entropy_grad_##sfx(S* out, const S* x, View vx,             \
                                                        const S* pairs, View vp,                 \
                                                        const i64* targets, View vt,             \
                                                        i64 classes, i64 inner, i64 n) {          \
        cross_entropy_grad<S, S>(out, x, vx, pairs, vp, targets, vt, classes, inner, n);         \
    }                                                                                             \
    extern "C" __global__ void cross_entropy_grad_rows_##sfx(S* out, const S* x, i64 x_offset,   \
                                                             const S* pairs, View vp,            \
                                                             const i64* targets, View vt,        \
                                                             i64 classes, i64 rows) {            \
        cross_entropy_grad_rows<S, S>(out, x, x_offset, pairs, vp, targets, vt, classes, rows);  \
    }
FOR_FLOATS(LOSS_ENTRY)
