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

#define LOSS_ENTRY(sfx, S)                                                                       \
    extern "C" __global__ void cross_entropy_grad_##sfx(S* out, const S* x, View vx,             \
                                                        const S* pairs, View vp,                 \
                                                        const i64* targets, View vt,             \
                                                        i64 classes, i64 inner, i64 n) {          \
        cross_entropy_grad<S, S>(out, x, vx, pairs, vp, targets, vt, classes, inner, n);         \
    }
FOR_FLOATS(LOSS_ENTRY)
