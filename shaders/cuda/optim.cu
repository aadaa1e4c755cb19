// In-place updates and fused optimizer steps (backend/cuda/optim.rs): the destination is
// written through its own view.

// dst = dst * scale + alpha * src (an overwrite when scale is 0, keeping no NaN of dst).
template <typename S>
__device__ void scale_add(S* dst, View vd, const S* src, View vs, i64 n, double scale, double alpha) {
    typedef typename Num<S>::T T;
    for (i64 i = first_index(); i < n; i += grid_stride()) {
        i64 d = at(vd, i);
        T s = (T)alpha * Num<S>::load(src[at(vs, i)]);
        dst[d] = Num<S>::store(scale == 0.0 ? s : Num<S>::load(dst[d]) * (T)scale + s);
    }
}

template <typename W> __device__ void assign(W* dst, View vd, const W* src, View vs, i64 n) {
    for (i64 i = first_index(); i < n; i += grid_stride()) {
        dst[at(vd, i)] = src[at(vs, i)];
    }
}

// One Adam/AdamW step over contiguous p, m, v and g, PyTorch's formula (as
// backend/cpu/optim.rs computes it).
template <typename T>
__device__ void adam(T* p, T* m, T* v, const T* g, i64 n, double step_size, double beta1,
                     double beta2, double eps, double inv_sqrt_correction2, double l2, double decay) {
    T b1 = (T)beta1, b2 = (T)beta2;
    for (i64 i = first_index(); i < n; i += grid_stride()) {
        T grad = g[i] + (T)l2 * p[i];
        T mi = b1 * m[i] + ((T)1 - b1) * grad;
        T vi = b2 * v[i] + ((T)1 - b2) * grad * grad;
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] * (T)decay - (T)step_size * mi / (m_sqrt(vi) * (T)inv_sqrt_correction2 + (T)eps);
    }
}

// out = g * scale, raising *flag where a result is not finite.
extern "C" __global__ void unscale(float* out, const float* g, View vg, i64 n, float scale, i64* flag) {
    for (i64 i = first_index(); i < n; i += grid_stride()) {
        float x = g[at(vg, i)] * scale;
        out[i] = x;
        if (!isfinite(x)) *flag = 1;
    }
}

#define UPDATE_ENTRIES(sfx, S)                                                                   \
    extern "C" __global__ void scale_add_##sfx(S* dst, View vd, const S* src, View vs, i64 n,    \
                                               double scale, double alpha) {                      \
        scale_add<S>(dst, vd, src, vs, n, scale, alpha);                                          \
    }
FOR_FLOATS(UPDATE_ENTRIES)

#define ASSIGN_ENTRY(sfx, W)                                                                     \
    extern "C" __global__ void assign_##sfx(W* dst, View vd, const W* src, View vs, i64 n) {     \
        assign<W>(dst, vd, src, vs, n);                                                           \
    }
FOR_WIDTHS(ASSIGN_ENTRY)

#define ADAM_ENTRY(sfx, T)                                                                       \
    extern "C" __global__ void adam_##sfx(T* p, T* m, T* v, const T* g, i64 n, double step_size, \
                                          double beta1, double beta2, double eps,                \
                                          double inv_sqrt_correction2, double l2, double decay) { \
        adam<T>(p, m, v, g, n, step_size, beta1, beta2, eps, inv_sqrt_correction2, l2, decay);   \
    }
ADAM_ENTRY(f32, float)
ADAM_ENTRY(f64, double)
