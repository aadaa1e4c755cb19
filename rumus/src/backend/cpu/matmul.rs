//! Matrix products through the `gemm` family of crates, which dispatch at run time to
//! AVX2/FMA or AVX-512 micro-kernels and were measured at parity with PyTorch's BLAS on this
//! class of machine. Operands may be transposed or broadcast views: the kernels take
//! arbitrary strides, so no copy is made before the product.

use std::any::TypeId;

use gemm_common::Parallelism;
use rayon::prelude::*;

use super::backend::{Cpu, ensure_output};
use super::buffer::CpuBuffer;
use super::strided::map;
use crate::backend::contract::{Matmul, Src};
use crate::element::Float;
use crate::error::{Error, Result};
use crate::shape::Layout;

impl Matmul for Cpu {
    /// `widen` is ignored: host products of `f16` widen their operands before they come here.
    fn matmul(
        &self,
        a: Src<'_, CpuBuffer>,
        b: Src<'_, CpuBuffer>,
        bias: Option<Src<'_, CpuBuffer>>,
        out_dims: &[usize],
        _widen: bool,
    ) -> Result<CpuBuffer> {
        // Empty operands ([m, 0] @ [0, n]) can ask for any size of result.
        ensure_output("matmul", out_dims, a.dtype())?;
        // The bias as `n` contiguous values (a copy only for a strided view).
        let bias = bias
            .map(|bias| super::buffer::map_buffer!(bias.memory, |v| map(v, bias.layout, |x| x)));
        let (la, lb) = (a.layout, b.layout);
        match (a.memory, b.memory, &bias) {
            (CpuBuffer::F32(a), CpuBuffer::F32(b), None) => {
                Ok(CpuBuffer::F32(matmul(a, la, b, lb, None)))
            }
            (CpuBuffer::F32(a), CpuBuffer::F32(b), Some(CpuBuffer::F32(bias))) => {
                Ok(CpuBuffer::F32(matmul(a, la, b, lb, Some(bias))))
            }
            (CpuBuffer::F64(a), CpuBuffer::F64(b), None) => {
                Ok(CpuBuffer::F64(matmul(a, la, b, lb, None)))
            }
            (CpuBuffer::F64(a), CpuBuffer::F64(b), Some(CpuBuffer::F64(bias))) => {
                Ok(CpuBuffer::F64(matmul(a, la, b, lb, Some(bias))))
            }
            (a, _, _) => Err(Error::DType {
                op: "matmul",
                expected: "a floating-point tensor",
                found: a.dtype(),
            }),
        }
    }
}

/// Below this many multiply-adds a single product is not worth splitting across threads.
const PARALLEL_FLOPS: usize = 64 * 64 * 64;

/// Fewest rows of a product worth giving a thread of their own.
const ROW_BLOCK_MIN: usize = 32;

/// Depth of the inner dimension that gemm always sums in one block. Past it gemm cuts the
/// inner dimension into blocks whose depth depends on the product's other sizes: 512 deep
/// when both are at most [`SMALL_SIDE`], an even split sized from the caches otherwise (a
/// linear layer with 784 inputs: 512 + 272 in a thread's 64 x 64 block, 392 + 392 in the
/// whole 64 x 128 product on one thread), and each block rounds its sum.
const ONE_BLOCK_DEPTH: usize = 512;

/// Largest side of the products for which gemm takes its fixed 512-deep blocks (see
/// [`ONE_BLOCK_DEPTH`]).
const SMALL_SIDE: usize = 64;

/// Fewest elements of a product, or of a thread's block of it, for gemm's general kernels:
/// at most 16 x 16 elements (with contiguous inner strides) it takes another kernel, which
/// sums in another order. A block is split off only when it stays above this size, so
/// splitting never changes which kernel computes an element.
const SMALL_PRODUCT: usize = 16 * 16;

/// `dst = lhs @ rhs` (or `dst += lhs @ rhs` with `accumulate`) for an `m x n` row-major
/// `dst` (rows `dst_rs` apart) and
/// operands given by pointer and (row, column) strides, through gemm's f32 or f64 kernel. Its
/// micro-kernels want a column-major destination, so the product is computed as its
/// transpose, `dst^T = rhs^T @ lhs^T` (what the `gemm` crate's front end does for a
/// row-major one), except where `rhs` is column-major (a linear layer's `x @ W^T`): gemm
/// packs the left operand of that form slowly when it is row-major, so the product is
/// asked for as it is, `dst = lhs @ rhs` into a row-major destination. Measured on one
/// thread (`x @ W^T`, W `[out, in]` row-major): batch 16, 4096 -> 4096 51.9 -> 10.9 ms
/// (with W^T copied to row-major first, 12.6 ms), batch 16, 512 -> 1000 1.13 -> 0.15 ms,
/// batch 64, 1024 -> 1024 4.1 -> 2.6 ms; with `rhs` row-major the transposed form stays
/// faster (12.6 against 18.4 ms at 4096).
///
/// # Safety
/// `T` is `f32` or `f64`; every address formed from the pointers, strides and sizes lies
/// inside its buffer, and `dst` is valid for writes at `i * dst_rs + j` (`i < m`, `j < n`).
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_row_major<T: Float>(
    (m, n, k): (usize, usize, usize),
    (dst, dst_rs, accumulate): (*mut T, usize, bool),
    (lhs, lhs_rs, lhs_cs): (*const T, isize, isize),
    (rhs, rhs_rs, rhs_cs): (*const T, isize, isize),
    parallelism: Parallelism,
) {
    // The same call for either kernel (their argument types differ only in `T`).
    macro_rules! transposed_product {
        ($kernel:expr) => {
            $kernel(
                n,
                m,
                k,
                dst.cast(),
                dst_rs as isize,
                1,
                accumulate,
                rhs.cast(),
                rhs_rs,
                rhs_cs,
                lhs.cast(),
                lhs_rs,
                lhs_cs,
                if accumulate { 1.0 } else { 0.0 },
                1.0,
                false,
                false,
                false,
                parallelism,
            )
        };
    }
    // The product as it is, into a destination with unit column stride.
    macro_rules! direct_product {
        ($kernel:expr) => {
            $kernel(
                m,
                n,
                k,
                dst.cast(),
                1,
                dst_rs as isize,
                accumulate,
                lhs.cast(),
                lhs_cs,
                lhs_rs,
                rhs.cast(),
                rhs_cs,
                rhs_rs,
                if accumulate { 1.0 } else { 0.0 },
                1.0,
                false,
                false,
                false,
                parallelism,
            )
        };
    }
    let rhs_column_major = rhs_rs == 1 && rhs_cs != 1;
    // SAFETY: the caller's contract; `T` is the kernel's element type (checked by TypeId).
    unsafe {
        if TypeId::of::<T>() == TypeId::of::<f32>() {
            let kernel = gemm_f32::gemm::f32::get_gemm_fn();
            if rhs_column_major {
                direct_product!(kernel);
            } else {
                transposed_product!(kernel);
            }
        } else if TypeId::of::<T>() == TypeId::of::<f64>() {
            let kernel = gemm_f64::gemm::f64::get_gemm_fn();
            if rhs_column_major {
                direct_product!(kernel);
            } else {
                transposed_product!(kernel);
            }
        } else {
            unreachable!("matrix products run on f32 and f64 only");
        }
    }
}

/// The output buffer, written by several threads in disjoint column blocks.
struct SharedOut<T>(*mut T);

// SAFETY: threads write disjoint elements through it (see its use in `matmul`).
unsafe impl<T: Send> Send for SharedOut<T> {}
unsafe impl<T: Send> Sync for SharedOut<T> {}

impl<T> SharedOut<T> {
    /// Pointer to element `index`.
    ///
    /// # Safety
    /// `index` is inside the buffer.
    unsafe fn at(&self, index: usize) -> *mut T {
        // SAFETY: the caller's contract.
        unsafe { self.0.add(index) }
    }
}

/// The last (smallest) of the blocks of `block` elements that `len` is cut into.
fn smallest_block(len: usize, block: usize) -> usize {
    len - (len.div_ceil(block) - 1) * block
}

fn batch_offset(index: usize, layout: &Layout, batch_rank: usize) -> usize {
    let mut rest = index;
    let mut offset = layout.offset();
    for axis in (0..batch_rank).rev() {
        let size = layout.dims()[axis];
        offset += (rest % size) * layout.strides()[axis];
        rest /= size;
    }
    offset
}

/// `a @ b` where `a` is `[batch.., m, k]` and `b` is `[batch.., k, n]` with identical batch
/// dims (broadcast views allowed), plus `bias` (`n` values, or none) added to every row.
/// Returns a contiguous `[batch.., m, n]` buffer.
///
/// The bias is written first and the product accumulated onto it, so a `Linear` layer's
/// output is written once instead of once by the product and again by a bias addition.
pub fn matmul<T: Float + Default>(
    a: &[T],
    la: &Layout,
    b: &[T],
    lb: &Layout,
    bias: Option<&[T]>,
) -> Vec<T> {
    let rank = la.rank();
    let (m, k, n) = (
        la.dims()[rank - 2],
        la.dims()[rank - 1],
        lb.dims()[rank - 1],
    );
    let batch_rank = rank - 2;
    // An empty result first: its batch dims may multiply past usize ([2^32, 2^32, 0, 0]).
    if m == 0 || n == 0 || la.dims()[..batch_rank].contains(&0) {
        return Vec::new();
    }
    let batches: usize = la.dims()[..batch_rank].iter().product();
    // gemm overwrites every element (it does not read the destination) unless it adds onto
    // the bias.
    let mut out = super::pool::reused(batches * m * n, T::ZERO);
    let accumulate = bias.is_some();
    if let Some(bias) = bias {
        for row in out.chunks_mut(n) {
            row.copy_from_slice(bias);
        }
    }
    if k == 0 {
        if !accumulate {
            out.fill(T::ZERO);
        }
        return out;
    }
    let (a_rs, a_cs) = (
        la.strides()[rank - 2] as isize,
        la.strides()[rank - 1] as isize,
    );
    let (b_rs, b_cs) = (
        lb.strides()[rank - 2] as isize,
        lb.strides()[rank - 1] as isize,
    );
    let flops = m * n * k;
    let threads = super::parallel::threads();
    let a_at = |batch: usize| a[batch_offset(batch, la, batch_rank)..].as_ptr();
    let b_at = |batch: usize| b[batch_offset(batch, lb, batch_rank)..].as_ptr();
    // Rows `first..first + dst.len() / n` of product `batch`.
    let rows = |batch: usize, first: usize, dst: &mut [T], parallelism: Parallelism| {
        let m = dst.len() / n;
        // SAFETY: the layouts were validated by the caller against their storages, so every
        // address gemm forms from (pointer, strides, m, n, k) lies inside `a` and `b` (a row
        // block starts `first` rows in and has at most the remaining rows); `dst` holds
        // exactly m * n elements written row-major.
        unsafe {
            gemm_row_major(
                (m, n, k),
                (dst.as_mut_ptr(), n, accumulate),
                (a_at(batch).offset(first as isize * a_rs), a_rs, a_cs),
                (b_at(batch), b_rs, b_cs),
                parallelism,
            );
        }
    };
    // Whole products per thread when there are enough of them: gemm's own threading scales
    // poorly on thin products (m = 64), and small products are not worth splitting at all.
    let batch_parallel = threads > 1
        && batches > 1
        && batches * flops >= PARALLEL_FLOPS
        && (flops < PARALLEL_FLOPS || batches >= threads);
    // gemm's own threading leaves one core idle below n = 1024 here (measured: the same time
    // on one and two threads at 256 and 512); blocks of rows or columns, one per thread, use
    // both. The longer side is split: split by rows, a thin product (a batch of 64 against a
    // wide weight) has every thread pack the whole right operand; split by columns, each
    // packs its own part of it.
    // A split must leave every block to the kernel and the depth blocks the whole product
    // gets (see `SMALL_PRODUCT` and `ONE_BLOCK_DEPTH`; products of one row or column, or of
    // depth two or less, have their own kernels too), so that the thread count never
    // changes how an element is summed. Where a split would, gemm's own threading (which
    // keeps the whole product's blocking) takes the product instead.
    let thread_split =
        !batch_parallel && threads > 1 && flops >= PARALLEL_FLOPS && m.max(n) < 1024 && k > 2;
    let (row_block, column_block) = (m.div_ceil(threads), n.div_ceil(threads));
    let small = |rows: usize, columns: usize| rows.max(columns) <= SMALL_SIDE;
    let general = |block: usize, len: usize, across: usize| {
        let smallest = smallest_block(len, block);
        across > 1
            && smallest * across > SMALL_PRODUCT
            && (k <= ONE_BLOCK_DEPTH || small(len, across) == small(smallest, across))
    };
    let row_split =
        thread_split && m >= n && m >= ROW_BLOCK_MIN * threads && general(row_block, m, n);
    let column_split =
        thread_split && n > m && n >= ROW_BLOCK_MIN * threads && general(column_block, n, m);
    if batch_parallel {
        out.par_chunks_mut(m * n)
            .enumerate()
            .for_each(|(batch, dst)| rows(batch, 0, dst, Parallelism::None));
    } else if row_split {
        let block = row_block;
        for (batch, dst) in out.chunks_mut(m * n).enumerate() {
            dst.par_chunks_mut(block * n)
                .enumerate()
                .for_each(|(i, rows_dst)| rows(batch, i * block, rows_dst, Parallelism::None));
        }
    } else if column_split {
        let block = column_block;
        let dst = SharedOut(out.as_mut_ptr());
        let dst = &dst;
        for batch in 0..batches {
            (0..n.div_ceil(block)).into_par_iter().for_each(|i| {
                let first = i * block;
                let columns = block.min(n - first);
                // SAFETY: as for `rows`; the column blocks of one product are disjoint, so
                // no element of `out` is written by two threads, and each block lies
                // inside product `batch`'s `m * n` elements (rows `n` apart).
                unsafe {
                    gemm_row_major(
                        (m, columns, k),
                        (dst.at(batch * m * n + first), n, accumulate),
                        (a_at(batch), a_rs, a_cs),
                        (b_at(batch).offset(first as isize * b_cs), b_rs, b_cs),
                        Parallelism::None,
                    );
                }
            });
        }
    } else {
        let parallelism = if flops >= PARALLEL_FLOPS && threads > 1 {
            Parallelism::Rayon(threads)
        } else {
            Parallelism::None
        };
        for (batch, dst) in out.chunks_mut(m * n).enumerate() {
            rows(batch, 0, dst, parallelism);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values with many significant bits, so any change in summation order shows.
    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n as u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) ^ seed.wrapping_mul(40_503)) as f32 / 4e9 - 0.5)
            .collect()
    }

    /// `a @ b` (with `b` given transposed when `b_transposed`, as a linear layer's weight is)
    /// on a pool of `threads` threads.
    fn product(m: usize, k: usize, n: usize, b_transposed: bool, threads: usize) -> Vec<f32> {
        let (a, b, bias) = (values(m * k, 1), values(k * n, 2), values(n, 3));
        let la = Layout::contiguous(&[m, k]);
        let lb = if b_transposed {
            Layout::contiguous(&[n, k]).permute(&[1, 0])
        } else {
            Layout::contiguous(&[k, n])
        };
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| matmul(&a, &la, &b, &lb, n.is_multiple_of(2).then_some(&bias[..])))
    }

    /// Every element rounds the same on any thread count: products split by rows, by
    /// columns or inside gemm, deeper than gemm's blocks (784, 1600), thin enough that a
    /// block would fall to gemm's small-product kernel, and single columns.
    #[test]
    fn products_are_bit_identical_on_any_thread_count() {
        let shapes = [
            (64, 784, 128),
            (32, 784, 128),
            (128, 64, 784),
            (64, 1600, 128),
            (100, 1600, 10),
            (359, 64, 128),
            (600, 600, 5),
            (5, 600, 600),
            (97, 700, 9),
            (800, 400, 1),
            (1200, 300, 40),
            (40, 300, 1200),
        ];
        for (m, k, n) in shapes {
            for b_transposed in [false, true] {
                let one = product(m, k, n, b_transposed, 1);
                for threads in [2, 3, 4] {
                    let split = product(m, k, n, b_transposed, threads);
                    assert!(
                        one.iter()
                            .map(|v| v.to_bits())
                            .eq(split.iter().map(|v| v.to_bits())),
                        "{m}x{k} @ {k}x{n} (b transposed: {b_transposed}) differs on {threads} threads"
                    );
                }
            }
        }
    }
}
