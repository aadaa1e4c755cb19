// Layer normalisation over the last axis (backend/cuda/norm.rs): one block per row, the
// row's statistics combined across the block. Rows are read through views (`rows` over the
// leading axes, `stride` along the last); weight and bias are vectors read with a stride.

template <typename S>
__device__ void layer_norm(S* out, S* stats, const S* x, View rows, i64 stride, const S* w,
                           i64 w_stride, const S* b, i64 b_stride, i64 outputs, i64 n, double eps,
                           int has_w, int has_b) {
    typedef typename Num<S>::T T;
    for (i64 o = blockIdx.x; o < outputs; o += gridDim.x) {
        i64 base = at(rows, o);
        T sum = (T)0;
        for (i64 j = threadIdx.x; j < n; j += blockDim.x) sum += Num<S>::load(x[base + j * stride]);
        T mean = block_combine<T, Sum<T> >(sum) / (T)n;
        T squares = (T)0;
        for (i64 j = threadIdx.x; j < n; j += blockDim.x) {
            T d = Num<S>::load(x[base + j * stride]) - mean;
            squares += d * d;
        }
        T rstd = (T)1 / m_sqrt(block_combine<T, Sum<T> >(squares) / (T)n + (T)eps);
        for (i64 j = threadIdx.x; j < n; j += blockDim.x) {
            T y = (Num<S>::load(x[base + j * stride]) - mean) * rstd;
            if (has_w) y *= Num<S>::load(w[j * w_stride]);
            if (has_b) y += Num<S>::load(b[j * b_stride]);
            out[o * n + j] = Num<S>::store(y);
        }
        if (threadIdx.x == 0) {
            stats[2 * o] = Num<S>::store(mean);
            stats[2 * o + 1] = Num<S>::store(rstd);
        }
    }
}

// dx = rstd (g w - mean(g w) - xhat mean(g w xhat)) and, for the weight's gradient (summed
// over rows afterwards), g xhat; `stats` holds each row's [mean, rstd].
template <typename S>
__device__ void layer_norm_backward(S* dx, S* scaled, const S* g, View grows, i64 g_stride, const S* x,
                                    View xrows, i64 x_stride, const S* w, i64 w_stride, const S* stats,
                                    i64 outputs, i64 n, int has_w, int want_x, int want_w) {
    typedef typename Num<S>::T T;
    for (i64 o = blockIdx.x; o < outputs; o += gridDim.x) {
        i64 gbase = at(grows, o), xbase = at(xrows, o);
        T mean = Num<S>::load(stats[2 * o]), rstd = Num<S>::load(stats[2 * o + 1]);
        T sum_gw = (T)0, sum_gw_xhat = (T)0;
        for (i64 j = threadIdx.x; j < n; j += blockDim.x) {
            T gw = Num<S>::load(g[gbase + j * g_stride]);
            if (has_w) gw *= Num<S>::load(w[j * w_stride]);
            T xhat = (Num<S>::load(x[xbase + j * x_stride]) - mean) * rstd;
            sum_gw += gw;
            sum_gw_xhat += gw * xhat;
        }
        T mean_gw = block_combine<T, Sum<T> >(sum_gw) / (T)n;
        T mean_gw_xhat = block_combine<T, Sum<T> >(sum_gw_xhat) / (T)n;
        for (i64 j = threadIdx.x; j < n; j += blockDim.x) {
            T grad = Num<S>::load(g[gbase + j * g_stride]);
            T gw = has_w ? grad * Num<S>::load(w[j * w_stride]) : grad;
            T xhat = (Num<S>::load(x[xbase + j * x_stride]) - mean) * rstd;
            if (want_x) dx[o * n + j] = Num<S>::store(rstd * (gw - mean_gw - xhat * mean_gw_xhat));
            if (want_w) scaled[o * n + j] = Num<S>::store(grad * xhat);
        }
    }
}

#define NORM_ENTRIES(sfx, S)                                                                     \
    extern "C" __global__ void layer_norm_##sfx(S* out, S* stats, const S* x, View rows,         \
                                                i64 stride, const S* w, i64 w_stride, const S* b, \
                                                i64 b_stride, i64 outputs, i64 n, double eps,     \
                                                int has_w, int has_b) {                           \
        layer_norm<S>(out, stats, x, rows, stride, w, w_stride, b, b_stride, outputs, n, eps,     \
                      has_w, has_b);                                                              \
    }                                                                                             \
    extern "C" __global__ void layer_norm_backward_##sfx(                                         \
        S* dx, S* scaled, const S* g, View grows, i64 g_stride, const S* x, View xrows,           \
        i64 x_stride, const S* w, i64 w_stride, const S* stats, i64 outputs, i64 n, int has_w,    \
        int want_x, int want_w) {                                                                 \
        layer_norm_backward<S>(dx, scaled, g, grows, g_stride, x, xrows, x_stride, w, w_stride,  \
                               stats, outputs, n, has_w, want_x, want_w);                         \
    }
NORM_ENTRIES(f32, float)
NORM_ENTRIES(f64, double)
