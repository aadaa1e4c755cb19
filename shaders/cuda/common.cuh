// What every rumus CUDA module starts with, after the op codes (`#define UNARY_RELU 8`, ...)
// that backend/cuda/compile.rs generates from backend/kinds.rs. Compiled at run time by NVRTC,
// so nothing here includes a system header: halves are converted by PTX instructions.

typedef long long i64;
typedef unsigned long long u64;
typedef unsigned char u8;
// An IEEE half, kept as its bits.
typedef unsigned short f16_bits;
// A bfloat16 (the upper half of an f32), kept as its bits; a struct, so that templates tell
// it from f16.
struct bf16_bits {
    unsigned short bits;
};

#define MAX_RANK 8

// A strided view of memory, as backend/cuda/launch.rs's `View` lays it out: element `i` of
// the row-major walk over `dims` is at `offset + sum(index_d * strides_d)` (strides 0 along
// broadcast axes).
struct View {
    int rank;
    // Whether the walk has fewer than 2^31 elements, so its index splits with 32-bit
    // divisions (a 64-bit division is a long software sequence on the GPU).
    int narrow;
    i64 offset;
    i64 dims[MAX_RANK];
    i64 strides[MAX_RANK];
};

// Where element `i` of the walk over `v` is.
__device__ __forceinline__ i64 at(const View& v, i64 i) {
    if (v.rank == 1) {
        return v.offset + i * v.strides[0];
    }
    i64 position = v.offset;
    if (v.narrow) {
        unsigned int u = (unsigned int)i;
        for (int d = v.rank - 1; d >= 0; --d) {
            unsigned int size = (unsigned int)v.dims[d];
            unsigned int q = u / size;
            position += (i64)(u - q * size) * v.strides[d];
            u = q;
        }
        return position;
    }
    for (int d = v.rank - 1; d >= 0; --d) {
        i64 q = i / v.dims[d];
        position += (i - q * v.dims[d]) * v.strides[d];
        i = q;
    }
    return position;
}

// What a kernel reports through the device's fault word (backend/cuda/context.rs), read at
// the next wait for the device: an index out of its axis's range (the element is skipped).
#define FAULT_INDEX_OUT_OF_RANGE 1

// The first element this thread handles in a grid-stride loop, and the stride.
__device__ __forceinline__ i64 first_index() {
    return (i64)blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ i64 grid_stride() {
    return (i64)gridDim.x * blockDim.x;
}

__device__ __forceinline__ float half_to_float(f16_bits h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
__device__ __forceinline__ f16_bits float_to_half(float f) {
    f16_bits h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

__device__ __forceinline__ float bf16_to_float(bf16_bits h) {
    return __uint_as_float((unsigned int)h.bits << 16);
}
// Rounded to nearest, ties to even (NaN stays a quiet NaN), in integer arithmetic, which
// every architecture has.
__device__ __forceinline__ bf16_bits float_to_bf16(float f) {
    unsigned int u = __float_as_uint(f);
    bf16_bits h;
    if (f != f) {
        h.bits = (unsigned short)((u >> 16) | 0x40);
        return h;
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    h.bits = (unsigned short)(u >> 16);
    return h;
}

// A stored float type and the type it is computed in: `f16` and `bf16` in `float`, rounded
// once on the way out, as PyTorch computes half element-wise ops.
template <typename S> struct Num;
template <> struct Num<float> {
    typedef float T;
    static __device__ __forceinline__ float load(float v) { return v; }
    static __device__ __forceinline__ float store(float v) { return v; }
};
template <> struct Num<double> {
    typedef double T;
    static __device__ __forceinline__ double load(double v) { return v; }
    static __device__ __forceinline__ double store(double v) { return v; }
};
template <> struct Num<f16_bits> {
    typedef float T;
    static __device__ __forceinline__ float load(f16_bits v) { return half_to_float(v); }
    static __device__ __forceinline__ f16_bits store(float v) { return float_to_half(v); }
};
template <> struct Num<bf16_bits> {
    typedef float T;
    static __device__ __forceinline__ float load(bf16_bits v) { return bf16_to_float(v); }
    static __device__ __forceinline__ bf16_bits store(float v) { return float_to_bf16(v); }
};

// The math library in one name per function for float and double.
#define RUMUS_MATH(name)                                                                     \
    __device__ __forceinline__ float m_##name(float x) { return name##f(x); }               \
    __device__ __forceinline__ double m_##name(double x) { return name(x); }
RUMUS_MATH(exp)
RUMUS_MATH(log)
RUMUS_MATH(sqrt)
RUMUS_MATH(fabs)
RUMUS_MATH(erf)
RUMUS_MATH(sin)
RUMUS_MATH(cos)
RUMUS_MATH(floor)
RUMUS_MATH(log1p)
RUMUS_MATH(tanh)
__device__ __forceinline__ float m_pow(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double m_pow(double x, double y) { return pow(x, y); }

template <typename T> __device__ __forceinline__ T infinity();
template <> __device__ __forceinline__ float infinity<float>() { return __int_as_float(0x7f800000); }
template <> __device__ __forceinline__ double infinity<double>() {
    return __longlong_as_double(0x7ff0000000000000LL);
}

// `1 / (1 + e^-x)` without overflow for either sign.
template <typename T> __device__ __forceinline__ T sigmoid(T x) {
    if (x >= (T)0) {
        return (T)1 / ((T)1 + m_exp(-x));
    }
    T e = m_exp(x);
    return e / ((T)1 + e);
}

// Entry points per dtype: `FOR_FLOATS(X)` expands `X(suffix, stored type)` for each float
// dtype, `FOR_WIDTHS(X)` for each element width (kernels that only move bits), and
// `FOR_DTYPES(X)` for every dtype (`bool` is a byte holding 0 or 1). The suffixes are the
// ones backend/cuda/launch.rs names kernels with.
#define FOR_FLOATS(X) X(f32, float) X(f64, double) X(f16, f16_bits) X(bf16, bf16_bits)
#define FOR_WIDTHS(X) X(b1, u8) X(b2, unsigned short) X(b4, unsigned int) X(b8, u64)
#define FOR_DTYPES(X) X(f32, float) X(f64, double) X(f16, f16_bits) X(bf16, bf16_bits) X(i64, i64) X(bool, u8)

// Any dtype as a double and back, as Rust's `as` converts (saturating, NaN to 0 for integers;
// nonzero is true).
template <typename S> struct Convert {
    static __device__ __forceinline__ double to(S v) { return (double)v; }
    static __device__ __forceinline__ S from(double v) { return (S)v; }
};
// `v` as a float rounded toward zero, its last bit set when that dropped anything ("rounding
// to odd"): rounded again to a 16-bit float it gives `v` correctly rounded, where rounding to
// nearest twice would take a value just past a halfway point for the halfway point (as
// rumus's host conversions, element.rs). Exact for every float, so casts of f32 lose nothing.
__device__ __forceinline__ float float_rounded_to_odd(double v) {
    float t = __double2float_rz(v);
    if ((double)t != v && v == v) {
        t = __int_as_float(__float_as_int(t) | 1);
    }
    return t;
}
template <> struct Convert<f16_bits> {
    static __device__ __forceinline__ double to(f16_bits v) { return (double)half_to_float(v); }
    static __device__ __forceinline__ f16_bits from(double v) {
        return float_to_half(float_rounded_to_odd(v));
    }
};
template <> struct Convert<bf16_bits> {
    static __device__ __forceinline__ double to(bf16_bits v) { return (double)bf16_to_float(v); }
    static __device__ __forceinline__ bf16_bits from(double v) {
        return float_to_bf16(float_rounded_to_odd(v));
    }
};
template <> struct Convert<i64> {
    static __device__ __forceinline__ double to(i64 v) { return (double)v; }
    static __device__ __forceinline__ i64 from(double v) {
        if (v != v) return 0;
        if (v >= 9.2233720368547758e18) return 0x7fffffffffffffffLL;
        if (v <= -9.2233720368547758e18) return (i64)(-0x7fffffffffffffffLL - 1);
        return (i64)v;
    }
};
template <> struct Convert<u8> {
    static __device__ __forceinline__ double to(u8 v) { return v ? 1.0 : 0.0; }
    static __device__ __forceinline__ u8 from(double v) { return v != 0.0 ? 1 : 0; }
};

// Combining across a block (reductions and the row kernels of norm.cu).
template <typename T> struct Sum {
    static __device__ __forceinline__ T identity() { return (T)0; }
    static __device__ __forceinline__ T combine(T a, T b) { return a + b; }
};
// Extrema that let a NaN through, as PyTorch's max and min do.
template <typename T> struct Max {
    static __device__ __forceinline__ T identity() { return -infinity<T>(); }
    static __device__ __forceinline__ T combine(T a, T b) { return (a != a || a > b) ? a : b; }
};
template <typename T> struct Min {
    static __device__ __forceinline__ T identity() { return infinity<T>(); }
    static __device__ __forceinline__ T combine(T a, T b) { return (a != a || a < b) ? a : b; }
};

// `v` combined across the block; every thread gets the result. Starts with a barrier, so a
// block may call it again right after reading the previous result.
template <typename T, typename Op> __device__ T block_combine(T v) {
    __shared__ double scratch_words[32];
    T* scratch = (T*)scratch_words;
    for (int offset = 16; offset > 0; offset >>= 1) {
        v = Op::combine(v, __shfl_xor_sync(0xffffffffu, v, offset));
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    int warps = (blockDim.x + 31) >> 5;
    v = lane < warps ? scratch[lane] : Op::identity();
    for (int offset = 16; offset > 0; offset >>= 1) {
        v = Op::combine(v, __shfl_xor_sync(0xffffffffu, v, offset));
    }
    return v;
}

// The PCG output permutation of one 32-bit state, and element i's 24-bit dropout draw: the
// same hash as backend/cpu/dropout.rs and shaders/elementwise.wgsl, so a seed drops the same
// elements on every device (element-wise dropout, attention's dropped probabilities).
__device__ __forceinline__ unsigned int pcg(unsigned int v) {
    unsigned int state = v * 747796405u + 2891336453u;
    unsigned int word = ((state >> ((state >> 28) + 4u)) ^ state) * 277803737u;
    return (word >> 22) ^ word;
}
__device__ __forceinline__ unsigned int draw(unsigned int i, u64 seed) {
    return pcg(pcg(i ^ (unsigned int)seed) + (unsigned int)(seed >> 32)) >> 8;
}
