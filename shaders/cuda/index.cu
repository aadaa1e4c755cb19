// Indexing with i64 indices (backend/cuda/index.rs). Each kernel walks the elements of its
// output (pick) or source (add_at), shaped like the indexed tensor except along `axis`,
// where element e sits at coordinate j = (e / inner) % count. Its partner element in the
// indexed tensor has the same coordinates except `index` along the axis: `at(view over e's
// dims with the indexed tensor's strides, e) + (index - j) * axis_stride`. The index is
// indices[e] (`per_element`: gather, scatter_add) or indices[j] (index_select, index_add).
// An index outside 0..size is skipped (nothing read or added for it) and raises the
// device's fault word, which the next wait for the device turns into an error.

__device__ __forceinline__ bool in_range(i64 index, i64 size, int* fault) {
    if (index < 0 || index >= size) {
        *fault = FAULT_INDEX_OUT_OF_RANGE;
        return false;
    }
    return true;
}

template <typename W>
__device__ void pick(W* out, const W* x, View vx, i64 axis_stride, const i64* indices, View vi,
                     int per_element, i64 count, i64 inner, i64 size, i64 n, int* fault) {
    for (i64 e = first_index(); e < n; e += grid_stride()) {
        i64 j = (e / inner) % count;
        i64 index = indices[at(vi, per_element ? e : j)];
        out[e] = in_range(index, size, fault) ? x[at(vx, e) + (index - j) * axis_stride] : (W)0;
    }
}

__device__ __forceinline__ void atomic_add(float* at, float v) { atomicAdd(at, v); }
__device__ __forceinline__ void atomic_add(double* at, double v) { atomicAdd(at, v); }

template <typename S>
__device__ void add_at(S* out, View vo, i64 axis_stride, const i64* indices, View vi, int per_element,
                       const S* source, View vs, i64 count, i64 inner, i64 size, i64 n, int* fault) {
    for (i64 e = first_index(); e < n; e += grid_stride()) {
        i64 j = (e / inner) % count;
        i64 index = indices[at(vi, per_element ? e : j)];
        if (!in_range(index, size, fault)) continue;
        atomic_add(&out[at(vo, e) + (index - j) * axis_stride], source[at(vs, e)]);
    }
}

#define PICK_ENTRY(sfx, W)                                                                       \
    extern "C" __global__ void pick_##sfx(W* out, const W* x, View vx, i64 axis_stride,          \
                                          const i64* indices, View vi, int per_element,          \
                                          i64 count, i64 inner, i64 size, i64 n, int* fault) {    \
        pick<W>(out, x, vx, axis_stride, indices, vi, per_element, count, inner, size, n, fault); \
    }
FOR_WIDTHS(PICK_ENTRY)

#define ADD_AT_ENTRY(sfx, S)                                                                     \
    extern "C" __global__ void add_at_##sfx(S* out, View vo, i64 axis_stride, const i64* indices, \
                                            View vi, int per_element, const S* source, View vs,  \
                                            i64 count, i64 inner, i64 size, i64 n, int* fault) {  \
        add_at<S>(out, vo, axis_stride, indices, vi, per_element, source, vs, count, inner, size, \
                  n, fault);                                                                      \
    }
ADD_AT_ENTRY(f32, float)
ADD_AT_ENTRY(f64, double)
