// Sparse kernels on a compressed-row pattern (backend/cuda/sparse.rs): row pointers and
// columns are i64, the values and dense operands contiguous f32 or f64. Each kernel walks
// its output elements in a grid-stride loop. A row pointer outside 0..entries is clamped and
// a column outside the dense operand skipped, raising the device's fault word (the host
// checked them when the pattern was built; the kernel still never reads out of bounds).

// The entries of row i, clamped to 0..entries.
__device__ __forceinline__ void entries_of(const i64* row_ptr, i64 i, i64 entries, i64* start,
                                           i64* end) {
    *start = min(max(row_ptr[i], (i64)0), entries);
    *end = min(max(row_ptr[i + 1], *start), entries);
}

__device__ __forceinline__ bool column_in_range(i64 c, i64 columns, int* fault) {
    if (c < 0 || c >= columns) {
        *fault = FAULT_INDEX_OUT_OF_RANGE;
        return false;
    }
    return true;
}

// out[i, f] = sum over row i's entries e of values[e] * x[cols[e], f].
template <typename T>
__device__ void spmm(T* out, const i64* row_ptr, const i64* cols, const T* values, const T* x,
                     i64 width, i64 entries, i64 columns, i64 n, int* fault) {
    for (i64 t = first_index(); t < n; t += grid_stride()) {
        i64 i = t / width, f = t - (t / width) * width;
        i64 start, end;
        entries_of(row_ptr, i, entries, &start, &end);
        T sum = (T)0;
        for (i64 e = start; e < end; ++e) {
            i64 c = cols[e];
            if (column_in_range(c, columns, fault)) sum += values[e] * x[c * width + f];
        }
        out[t] = sum;
    }
}

// out[e] = dot(a[row of e], b[cols[e]]), the row found by bisection over the row pointers.
template <typename T>
__device__ void sddmm(T* out, const i64* row_ptr, const i64* cols, const T* a, const T* b,
                      i64 width, i64 rows, i64 columns, i64 n, int* fault) {
    for (i64 e = first_index(); e < n; e += grid_stride()) {
        i64 low = 0, high = rows;
        while (high - low > 1) {
            i64 middle = (low + high) / 2;
            if (row_ptr[middle] <= e) low = middle; else high = middle;
        }
        i64 c = cols[e];
        T sum = (T)0;
        if (column_in_range(c, columns, fault)) {
            for (i64 k = 0; k < width; ++k) sum += a[low * width + k] * b[c * width + k];
        }
        out[e] = sum;
    }
}

// out[i, f] = max over row i's entries e of messages[e, f] and arg[i, f] = that e; a row with
// no entries gives 0 and `entries`. A NaN message wins its feature.
template <typename T>
__device__ void segment_max(T* out, i64* arg, const i64* row_ptr, const T* messages, i64 width,
                            i64 entries, i64 n) {
    for (i64 t = first_index(); t < n; t += grid_stride()) {
        i64 i = t / width, f = t - (t / width) * width;
        i64 start, end;
        entries_of(row_ptr, i, entries, &start, &end);
        T best = (T)0;
        i64 at = entries;
        for (i64 e = start; e < end; ++e) {
            T m = messages[e * width + f];
            if (e == start || m > best || (m != m && best == best)) {
                best = m;
                at = e;
            }
        }
        out[t] = best;
        arg[t] = at;
    }
}

#define SPARSE_ENTRIES(sfx, T)                                                                     \
    extern "C" __global__ void spmm_##sfx(T* out, const i64* row_ptr, const i64* cols,             \
                                          const T* values, const T* x, i64 width, i64 entries,     \
                                          i64 columns, i64 n, int* fault) {                        \
        spmm<T>(out, row_ptr, cols, values, x, width, entries, columns, n, fault);                 \
    }                                                                                              \
    extern "C" __global__ void sddmm_##sfx(T* out, const i64* row_ptr, const i64* cols,            \
                                           const T* a, const T* b, i64 width, i64 rows,            \
                                           i64 columns, i64 n, int* fault) {                       \
        sddmm<T>(out, row_ptr, cols, a, b, width, rows, columns, n, fault);                        \
    }                                                                                              \
    extern "C" __global__ void segment_max_##sfx(T* out, i64* arg, const i64* row_ptr,             \
                                                 const T* messages, i64 width, i64 entries,        \
                                                 i64 n) {                                          \
        segment_max<T>(out, arg, row_ptr, messages, width, entries, n);                            \
    }
SPARSE_ENTRIES(f32, float)
SPARSE_ENTRIES(f64, double)
