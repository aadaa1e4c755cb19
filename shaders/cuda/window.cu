// Window kernels of convolution and pooling (backend/cuda/window.rs), over `planes` planes of
// an input read row-major through its view. Each thread computes one output element by
// gathering what maps to it, so no kernel needs atomics.

// The window geometry, as backend/cuda/window.rs's `Geometry` lays it out.
struct Window {
    i64 in_h, in_w, k_h, k_w, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, out_h, out_w;
};

// Columns [P, K, L] from planes [P, H, W] (im2col): zero where a tap falls in the padding.
template <typename S>
__device__ void unfold(S* out, const S* x, View vx, Window g, i64 n) {
    i64 taps = g.k_h * g.k_w, positions = g.out_h * g.out_w;
    for (i64 e = first_index(); e < n; e += grid_stride()) {
        i64 l = e % positions, t = (e / positions) % taps, p = e / (positions * taps);
        i64 ih = (l / g.out_w) * g.stride_h - g.pad_h + (t / g.k_w) * g.dil_h;
        i64 iw = (l % g.out_w) * g.stride_w - g.pad_w + (t % g.k_w) * g.dil_w;
        bool inside = ih >= 0 && ih < g.in_h && iw >= 0 && iw < g.in_w;
        out[e] = inside ? x[at(vx, (p * g.in_h + ih) * g.in_w + iw)] : Num<S>::store(0);
    }
}

// The windows (tap t, position l) that read input element (h, w): calls `f(t, l)` for each.
template <typename F> __device__ __forceinline__ void windows_over(const Window& g, i64 h, i64 w, F f) {
    for (i64 kh = 0; kh < g.k_h; ++kh) {
        i64 y = h + g.pad_h - kh * g.dil_h;
        if (y < 0 || y % g.stride_h != 0 || y / g.stride_h >= g.out_h) continue;
        for (i64 kw = 0; kw < g.k_w; ++kw) {
            i64 x = w + g.pad_w - kw * g.dil_w;
            if (x < 0 || x % g.stride_w != 0 || x / g.stride_w >= g.out_w) continue;
            f(kh * g.k_w + kw, (y / g.stride_h) * g.out_w + x / g.stride_w);
        }
    }
}

// Planes [P, H, W] summed back from columns [P, K, L] (col2im), unfold's adjoint.
template <typename S>
__device__ void fold(S* out, const S* x, View vx, Window g, i64 n) {
    typedef typename Num<S>::T T;
    i64 taps = g.k_h * g.k_w, positions = g.out_h * g.out_w;
    for (i64 e = first_index(); e < n; e += grid_stride()) {
        i64 w = e % g.in_w, h = (e / g.in_w) % g.in_h, p = e / (g.in_w * g.in_h);
        T sum = (T)0;
        windows_over(g, h, w, [&](i64 t, i64 l) {
            sum += Num<S>::load(x[at(vx, (p * taps + t) * positions + l)]);
        });
        out[e] = Num<S>::store(sum);
    }
}

// Each window's sum [P, OH, OW], padded taps skipped.
template <typename S>
__device__ void window_sum(S* out, const S* x, View vx, Window g, i64 n) {
    typedef typename Num<S>::T T;
    i64 positions = g.out_h * g.out_w;
    for (i64 e = first_index(); e < n; e += grid_stride()) {
        i64 l = e % positions, p = e / positions;
        T sum = (T)0;
        for (i64 kh = 0; kh < g.k_h; ++kh) {
            i64 ih = (l / g.out_w) * g.stride_h - g.pad_h + kh * g.dil_h;
            if (ih < 0 || ih >= g.in_h) continue;
            for (i64 kw = 0; kw < g.k_w; ++kw) {
                i64 iw = (l % g.out_w) * g.stride_w - g.pad_w + kw * g.dil_w;
                if (iw < 0 || iw >= g.in_w) continue;
                sum += Num<S>::load(x[at(vx, (p * g.in_h + ih) * g.in_w + iw)]);
            }
        }
        out[e] = Num<S>::store(sum);
    }
}

// Each window's value [P, OH, OW] added to every element of it: planes [P, H, W].
template <typename S>
__device__ void spread(S* out, const S* x, View vx, Window g, i64 n) {
    typedef typename Num<S>::T T;
    i64 positions = g.out_h * g.out_w;
    for (i64 e = first_index(); e < n; e += grid_stride()) {
        i64 w = e % g.in_w, h = (e / g.in_w) % g.in_h, p = e / (g.in_w * g.in_h);
        T sum = (T)0;
        windows_over(g, h, w, [&](i64, i64 l) { sum += Num<S>::load(x[at(vx, p * positions + l)]); });
        out[e] = Num<S>::store(sum);
    }
}

// Each window's maximum and the offset (h * W + w) of its first maximum in its plane, a NaN
// winning; padded taps skipped.
template <typename S>
__device__ void max_pool(S* values, i64* offsets, const S* x, View vx, Window g, i64 n) {
    typedef typename Num<S>::T T;
    i64 positions = g.out_h * g.out_w;
    for (i64 e = first_index(); e < n; e += grid_stride()) {
        i64 l = e % positions, p = e / positions;
        T best = (T)0;
        i64 best_at = -1;
        for (i64 kh = 0; kh < g.k_h; ++kh) {
            i64 ih = (l / g.out_w) * g.stride_h - g.pad_h + kh * g.dil_h;
            if (ih < 0 || ih >= g.in_h) continue;
            for (i64 kw = 0; kw < g.k_w; ++kw) {
                i64 iw = (l % g.out_w) * g.stride_w - g.pad_w + kw * g.dil_w;
                if (iw < 0 || iw >= g.in_w) continue;
                T v = Num<S>::load(x[at(vx, (p * g.in_h + ih) * g.in_w + iw)]);
                bool best_nan = best_at >= 0 && best != best;
                if (best_at < 0 || (!best_nan && (v != v || v > best))) {
                    best = v;
                    best_at = ih * g.in_w + iw;
                }
            }
        }
        values[e] = Num<S>::store(best);
        offsets[e] = best_at < 0 ? 0 : best_at;
    }
}

#define WINDOW_ENTRIES(sfx, S)                                                                   \
    extern "C" __global__ void unfold_##sfx(S* out, const S* x, View vx, Window g, i64 n) {      \
        unfold<S>(out, x, vx, g, n);                                                              \
    }                                                                                             \
    extern "C" __global__ void fold_##sfx(S* out, const S* x, View vx, Window g, i64 n) {        \
        fold<S>(out, x, vx, g, n);                                                                \
    }                                                                                             \
    extern "C" __global__ void window_sum_##sfx(S* out, const S* x, View vx, Window g, i64 n) {  \
        window_sum<S>(out, x, vx, g, n);                                                          \
    }                                                                                             \
    extern "C" __global__ void spread_##sfx(S* out, const S* x, View vx, Window g, i64 n) {      \
        spread<S>(out, x, vx, g, n);                                                              \
    }                                                                                             \
    extern "C" __global__ void max_pool_##sfx(S* values, i64* offsets, const S* x, View vx,      \
                                              Window g, i64 n) {                                  \
        max_pool<S>(values, offsets, x, vx, g, n);                                                \
    }
FOR_FLOATS(WINDOW_ENTRIES)
