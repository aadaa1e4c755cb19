// Element-wise kernels (backend/cuda/elementwise.rs): each thread walks the output in a
// grid-stride loop and reads every operand through its strided view.

template <typename T> __device__ T unary_op(int op, T x, T p0, T p1) {
    switch (op) {
    case UNARY_NEG: return -x;
    case UNARY_EXP: return m_exp(x);
    case UNARY_LOG: return m_log(x);
    case UNARY_SQRT: return m_sqrt(x);
    case UNARY_RSQRT: return (T)1 / m_sqrt(x);
    case UNARY_ABS: return m_fabs(x);
    case UNARY_SIGN: return x > (T)0 ? (T)1 : (x < (T)0 ? (T)-1 : x);
    case UNARY_ERF: return m_erf(x);
    case UNARY_SIN: return m_sin(x);
    case UNARY_COS: return m_cos(x);
    case UNARY_FLOOR: return m_floor(x);
    case UNARY_LOG1P: return m_log1p(x);
    case UNARY_RELU: return x > (T)0 ? x : (T)0;
    case UNARY_LEAKY_RELU: return x > (T)0 ? x : x * p0;
    case UNARY_SIGMOID: return sigmoid(x);
    case UNARY_TANH: return m_tanh(x);
    case UNARY_GELU: return (T)0.5 * x * ((T)1 + m_erf(x * (T)0.70710678118654752440));
    case UNARY_GELU_TANH: {
        T inner = (T)0.79788456080286535588 * (x + (T)0.044715 * x * x * x);
        return (T)0.5 * x * ((T)1 + m_tanh(inner));
    }
    case UNARY_SILU: return x * sigmoid(x);
    case UNARY_SOFTPLUS: return x * p0 > p1 ? x : m_log1p(m_exp(x * p0)) / p0;
    case UNARY_POWF: return m_pow(x, p0);
    case UNARY_CLAMP: return x < p0 ? p0 : (x > p1 ? p1 : x);
    case UNARY_ADD_SCALAR: return x + p0;
    case UNARY_MUL_SCALAR: return x * p0;
    }
    return x;
}

// `grad * d op(x) / dx` for the activations with a one-pass gradient.
template <typename T> __device__ T activation_grad_op(int op, T g, T x, T slope) {
    switch (op) {
    case UNARY_RELU: return x > (T)0 ? g : (T)0;
    case UNARY_LEAKY_RELU: return x > (T)0 ? g : g * slope;
    case UNARY_SIGMOID: {
        T s = sigmoid(x);
        return g * (s * ((T)1 - s));
    }
    case UNARY_TANH: {
        T t = m_tanh(x);
        return g * ((T)1 - t * t);
    }
    case UNARY_GELU: {
        T cdf = (T)0.5 * ((T)1 + m_erf(x * (T)0.70710678118654752440));
        return g * (cdf + x * (T)0.39894228040143267794 * m_exp((T)-0.5 * x * x));
    }
    case UNARY_GELU_TANH: {
        T k = (T)0.79788456080286535588;
        T t = m_tanh(k * (x + (T)0.044715 * x * x * x));
        T inner = k * ((T)1 + (T)(3.0 * 0.044715) * x * x);
        // Where t saturates the second term is 0 (not 0 * inf for huge x).
        T slope_term = t * t >= (T)1 ? (T)0 : (T)0.5 * x * ((T)1 - t * t) * inner;
        return g * ((T)0.5 * ((T)1 + t) + slope_term);
    }
    case UNARY_SILU: {
        T s = sigmoid(x);
        return g * (s * ((T)1 + x * ((T)1 - s)));
    }
    }
    return g;
}

template <typename T> __device__ T binary_op(int op, T a, T b) {
    switch (op) {
    case BINARY_ADD: return a + b;
    case BINARY_SUB: return a - b;
    case BINARY_MUL: return a * b;
    case BINARY_DIV: return a / b;
    case BINARY_POW: return m_pow(a, b);
    }
    return a;
}

template <typename T> __device__ bool compare_op(int op, T a, T b) {
    switch (op) {
    case COMPARE_EQ: return a == b;
    case COMPARE_NE: return a != b;
    case COMPARE_LT: return a < b;
    case COMPARE_LE: return a <= b;
    case COMPARE_GT: return a > b;
    case COMPARE_GE: return a >= b;
    }
    return false;
}

template <typename S>
__device__ void unary(S* out, const S* x, View vx, i64 n, int op, double p0, double p1) {
    typedef typename Num<S>::T T;
    for (i64 i = first_index(); i < n; i += grid_stride()) {
        out[i] = Num<S>::store(unary_op<T>(op, Num<S>::load(x[at(vx, i)]), (T)p0, (T)p1));
    }
}

template <typename S>
__device__ void activation_grad(S* out, const S* g, View vg, const S* x, View vx, i64 n, int op,
                                double slope, int dropped, unsigned int threshold, double scale,
                                u64 seed) {
    typedef typename Num<S>::T T;
    for (i64 i = first_index(); i < n; i += grid_stride()) {
        T grad = Num<S>::load(g[at(vg, i)]);
        if (dropped) {
            grad = draw((unsigned int)i, seed) >= threshold ? grad * (T)scale : (T)0;
        }
        out[i] = Num<S>::store(activation_grad_op<T>(op, grad, Num<S>::load(x[at(vx, i)]), (T)slope));
    }
}

// `dropout(op(x))`, or plain dropout with `op` < 0: kept elements scaled, the others zero.
template <typename S>
__device__ void unary_dropout(S* out, const S* x, View vx, i64 n, int op, double p0, double p1,
                              unsigned int threshold, double scale, u64 seed) {
    typedef typename Num<S>::T T;
    for (i64 i = first_index(); i < n; i += grid_stride()) {
        T v = Num<S>::load(x[at(vx, i)]);
        if (op >= 0) {
            v = unary_op<T>(op, v, (T)p0, (T)p1);
        }
        out[i] = Num<S>::store(draw((unsigned int)i, seed) >= threshold ? v * (T)scale : (T)0);
    }
}

template <typename S>
__device__ void binary(S* out, const S* a, View va, const S* b, View vb, i64 n, int op) {
    typedef typename Num<S>::T T;
    for (i64 i = first_index(); i < n; i += grid_stride()) {
        out[i] = Num<S>::store(binary_op<T>(op, Num<S>::load(a[at(va, i)]), Num<S>::load(b[at(vb, i)])));
    }
}

// Comparisons of every dtype (halves compared as floats).
template <typename S> struct Compared { typedef S T; static __device__ S load(S v) { return v; } };
template <> struct Compared<f16_bits> {
    typedef float T;
    static __device__ float load(f16_bits v) { return half_to_float(v); }
};
template <> struct Compared<bf16_bits> {
    typedef float T;
    static __device__ float load(bf16_bits v) { return bf16_to_float(v); }
};

template <typename S>
__device__ void compare(u8* out, const S* a, View va, const S* b, View vb, i64 n, int op) {
    typedef typename Compared<S>::T T;
    for (i64 i = first_index(); i < n; i += grid_stride()) {
        out[i] = compare_op<T>(op, Compared<S>::load(a[at(va, i)]), Compared<S>::load(b[at(vb, i)])) ? 1 : 0;
    }
}

template <typename W>
__device__ void select(W* out, const u8* c, View vc, const W* t, View vt, const W* f, View vf, i64 n) {
    for (i64 i = first_index(); i < n; i += grid_stride()) {
        out[i] = c[at(vc, i)] ? t[at(vt, i)] : f[at(vf, i)];
    }
}

template <typename W> __device__ void copy(W* out, const W* x, View vx, i64 n) {
    for (i64 i = first_index(); i < n; i += grid_stride()) {
        out[i] = x[at(vx, i)];
    }
}

// `value` (a double's bits) in every element.
template <typename W> __device__ void fill(W* out, W value, i64 n) {
    for (i64 i = first_index(); i < n; i += grid_stride()) {
        out[i] = value;
    }
}

template <typename A, typename B> __device__ void cast(B* out, const A* x, View vx, i64 n) {
    for (i64 i = first_index(); i < n; i += grid_stride()) {
        out[i] = Convert<B>::from(Convert<A>::to(x[at(vx, i)]));
    }
}

// Four elements in one aligned access each way: `T`s that are four contiguous elements.
template <typename T> struct alignas(4 * sizeof(T)) Quad {
    T v[4];
};

// `cast` of a contiguous input whose start is aligned to four elements (`x` and `out` point
// at element 0 of the walk): one 16-byte load of f32 and one 8-byte store of f16 a thread
// where the element loop issues four and four. Autocast's casts move gigabytes a training
// step (a language model's logit gradients among them); the last `n % 4` go one by one.
template <typename A, typename B> __device__ void cast_quads(B* out, const A* x, i64 n) {
    const i64 quads = n / 4;
    const Quad<A>* from = reinterpret_cast<const Quad<A>*>(x);
    Quad<B>* to = reinterpret_cast<Quad<B>*>(out);
    for (i64 q = first_index(); q < quads; q += grid_stride()) {
        const Quad<A> a = from[q];
        Quad<B> b;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            b.v[j] = Convert<B>::from(Convert<A>::to(a.v[j]));
        }
        to[q] = b;
    }
    for (i64 i = quads * 4 + first_index(); i < n; i += grid_stride()) {
        out[i] = Convert<B>::from(Convert<A>::to(x[i]));
    }
}

extern "C" __global__ void logical_and(u8* out, const u8* a, View va, const u8* b, View vb, i64 n) {
    for (i64 i = first_index(); i < n; i += grid_stride()) {
        out[i] = (a[at(va, i)] && b[at(vb, i)]) ? 1 : 0;
    }
}

extern "C" __global__ void logical_not(u8* out, const u8* x, View vx, i64 n) {
    for (i64 i = first_index(); i < n; i += grid_stride()) {
        out[i] = x[at(vx, i)] ? 0 : 1;
    }
}

#define FLOAT_ENTRIES(sfx, S)                                                                    \
    extern "C" __global__ void unary_##sfx(S* out, const S* x, View vx, i64 n, int op, double p0, \
                                           double p1) {                                           \
        unary<S>(out, x, vx, n, op, p0, p1);                                                      \
    }                                                                                             \
    extern "C" __global__ void activation_grad_##sfx(S* out, const S* g, View vg, const S* x,    \
                                                     View vx, i64 n, int op, double slope,       \
                                                     int dropped, unsigned int threshold,        \
                                                     double scale, u64 seed) {                    \
        activation_grad<S>(out, g, vg, x, vx, n, op, slope, dropped, threshold, scale, seed);    \
    }                                                                                             \
    extern "C" __global__ void unary_dropout_##sfx(S* out, const S* x, View vx, i64 n, int op,   \
                                                   double p0, double p1, unsigned int threshold, \
                                                   double scale, u64 seed) {                      \
        unary_dropout<S>(out, x, vx, n, op, p0, p1, threshold, scale, seed);                     \
    }                                                                                             \
    extern "C" __global__ void binary_##sfx(S* out, const S* a, View va, const S* b, View vb,    \
                                            i64 n, int op) {                                      \
        binary<S>(out, a, va, b, vb, n, op);                                                      \
    }
FOR_FLOATS(FLOAT_ENTRIES)

#define DTYPE_ENTRIES(sfx, S)                                                                    \
    extern "C" __global__ void compare_##sfx(u8* out, const S* a, View va, const S* b, View vb,  \
                                             i64 n, int op) {                                     \
        compare<S>(out, a, va, b, vb, n, op);                                                     \
    }
FOR_DTYPES(DTYPE_ENTRIES)

#define WIDTH_ENTRIES(sfx, W)                                                                    \
    extern "C" __global__ void select_##sfx(W* out, const u8* c, View vc, const W* t, View vt,   \
                                            const W* f, View vf, i64 n) {                         \
        select<W>(out, c, vc, t, vt, f, vf, n);                                                   \
    }                                                                                             \
    extern "C" __global__ void copy_##sfx(W* out, const W* x, View vx, i64 n) {                  \
        copy<W>(out, x, vx, n);                                                                   \
    }                                                                                             \
    extern "C" __global__ void fill_##sfx(W* out, W value, i64 n) { fill<W>(out, value, n); }
FOR_WIDTHS(WIDTH_ENTRIES)

// Casts between every pair of dtypes: `cast_f32_i64` reads f32 and writes i64.
#define CAST_FROM(a_sfx, A)                                                                      \
    CAST_TO(a_sfx, A, f32, float)                                                                \
    CAST_TO(a_sfx, A, f64, double)                                                               \
    CAST_TO(a_sfx, A, f16, f16_bits)                                                             \
    CAST_TO(a_sfx, A, bf16, bf16_bits)                                                           \
    CAST_TO(a_sfx, A, i64, i64)                                                                  \
    CAST_TO(a_sfx, A, bool, u8)
#define CAST_TO(a_sfx, A, b_sfx, B)                                                              \
    extern "C" __global__ void cast_##a_sfx##_##b_sfx(B* out, const A* x, View vx, i64 n) {      \
        cast<A, B>(out, x, vx, n);                                                                \
    }
FOR_DTYPES(CAST_FROM)

// Contiguous, aligned casts between the float dtypes: `cast_quads_f32_f16`.
#define QUAD_CAST_FROM(a_sfx, A)                                                                 \
    QUAD_CAST_TO(a_sfx, A, f32, float)                                                           \
    QUAD_CAST_TO(a_sfx, A, f64, double)                                                          \
    QUAD_CAST_TO(a_sfx, A, f16, f16_bits)                                                        \
    QUAD_CAST_TO(a_sfx, A, bf16, bf16_bits)
#define QUAD_CAST_TO(a_sfx, A, b_sfx, B)                                                         \
    extern "C" __global__ void cast_quads_##a_sfx##_##b_sfx(B* out, const A* x, i64 n) {         \
        cast_quads<A, B>(out, x, n);                                                              \
    }
FOR_FLOATS(QUAD_CAST_FROM)
