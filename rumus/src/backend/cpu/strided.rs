//! Element-wise kernels over strided (possibly broadcast) operands. The output is always
//! contiguous; operands are visited one innermost row at a time so the inner loop is a plain
//! strided walk that the compiler can vectorise when strides are 1.

use std::mem::MaybeUninit;

use super::parallel::for_each_row;
use crate::shape::Layout;

/// Storage offset of the first element of output row `row` for an operand laid out as
/// `layout` (already broadcast to the output's dims).
#[inline]
fn row_start(row: usize, layout: &Layout) -> usize {
    let dims = layout.dims();
    let strides = layout.strides();
    let outer = dims.len().saturating_sub(1);
    let mut rest = row;
    let mut offset = layout.offset();
    for axis in (0..outer).rev() {
        offset += (rest % dims[axis]) * strides[axis];
        rest /= dims[axis];
    }
    offset
}

/// Length and stride of the innermost axis (a scalar is one row of one element).
#[inline]
fn inner(layout: &Layout) -> (usize, usize) {
    match (layout.dims().last(), layout.strides().last()) {
        (Some(&n), Some(&s)) => (n, s),
        _ => (1, 1),
    }
}

/// Elements visited per call of a row kernel when an operand's row is not contiguous in
/// memory (strided, or broadcast from one value): they are gathered into a buffer of this
/// many on the stack first.
const GATHER: usize = 64;

/// A kernel over runs of elements: writes `dst[i]` from `src[i]` for every `i` (the slices
/// have equal lengths). The drivers below take the op as this trait object, so each walks
/// layouts once per element type; only the loop inside the kernel is compiled per op. When
/// each op instantiated the whole walk (contiguous, parallel, broadcast, strided and tiled
/// paths), those copies were a sixth of the crate's LLVM IR and a quarter of its build time.
type Kernel1<'k, A, O> = dyn Fn(&[A], &mut [MaybeUninit<O>]) + Sync + 'k;
/// [`Kernel1`] over two operands.
type Kernel2<'k, A, B, O> = dyn Fn(&[A], &[B], &mut [MaybeUninit<O>]) + Sync + 'k;
/// [`Kernel1`] over three operands.
type Kernel3<'k, A, B, C, O> = dyn Fn(&[A], &[B], &[C], &mut [MaybeUninit<O>]) + Sync + 'k;

/// `buffer` as slots a kernel writes: every slot a kernel sees it writes with a value.
fn slots<O>(buffer: &mut [O]) -> &mut [MaybeUninit<O>] {
    // SAFETY: `MaybeUninit<O>` has `O`'s layout, and the kernels only ever store initialised
    // values through the slice, so `buffer` stays initialised.
    unsafe { &mut *(buffer as *mut [O] as *mut [MaybeUninit<O>]) }
}

/// A contiguous output of `numel` elements, filled by `fill(first, run)` for runs that
/// together cover it (`first` is the run's first index): a small output in one run straight
/// into fresh capacity on this thread (a tiny one in a buffer this thread freed), a larger
/// one in runs of the parallel grain split across the pool.
fn contiguous_output<O: Copy + Send + Default + 'static>(
    numel: usize,
    fill: impl Fn(usize, &mut [MaybeUninit<O>]) + Sync,
) -> Vec<O> {
    if numel < super::parallel::PARALLEL_GRAIN {
        let mut out = super::small_buffers::with_capacity(numel);
        fill(0, &mut out.spare_capacity_mut()[..numel]);
        // SAFETY: `fill` wrote all `numel` slots.
        unsafe { out.set_len(numel) };
        return out;
    }
    let mut out = super::pool::reused(numel, O::default());
    let chunk = super::parallel::PARALLEL_GRAIN;
    for_each_row(slots(&mut out), chunk, |row, dst| fill(row * chunk, dst));
    out
}

/// One operand's elements along an output row, handed out as slices a kernel takes: a
/// contiguous row is borrowed, a strided one gathered, a broadcast one repeated.
struct RowReader<'a, A> {
    data: &'a [A],
    base: usize,
    stride: usize,
    /// Written before it is read: whole for a broadcast row (here, in `new`), the first
    /// `len` slots for each strided run.
    buffer: [MaybeUninit<A>; GATHER],
}

impl<'a, A: Copy> RowReader<'a, A> {
    fn new(data: &'a [A], base: usize, stride: usize) -> Self {
        let mut buffer = [MaybeUninit::uninit(); GATHER];
        if stride == 0 {
            buffer.fill(MaybeUninit::new(data[base]));
        }
        RowReader {
            data,
            base,
            stride,
            buffer,
        }
    }

    /// Elements `first..first + len` of the row (`len <= GATHER` unless the row is
    /// contiguous).
    fn run(&mut self, first: usize, len: usize) -> &[A] {
        match self.stride {
            1 => return &self.data[self.base + first..][..len],
            0 => {}
            stride => {
                let src = self.data[self.base + first * stride..]
                    .iter()
                    .step_by(stride);
                let gathered = self.buffer[..len].iter_mut().zip(src);
                assert_eq!(gathered.len(), len, "a strided run past its data");
                for (slot, &x) in gathered {
                    slot.write(x);
                }
            }
        }
        let run = &self.buffer[..len];
        // SAFETY: the first `len` slots were written above, or all of them in `new`.
        unsafe { &*(run as *const [MaybeUninit<A>] as *const [A]) }
    }
}

/// `f` applied to every element of `a` (seen through `layout`), in row-major order.
pub fn map<A: Copy + Sync, O: Copy + Send + Default + 'static>(
    a: &[A],
    layout: &Layout,
    f: impl Fn(A) -> O + Sync,
) -> Vec<O> {
    map_runs(a, layout, &|src: &[A], dst: &mut [MaybeUninit<O>]| {
        for (d, &s) in dst.iter_mut().zip(src) {
            d.write(f(s));
        }
    })
}

/// [`map`] with the op as a run kernel.
fn map_runs<A: Copy + Sync, O: Copy + Send + Default + 'static>(
    a: &[A],
    layout: &Layout,
    kernel: &Kernel1<'_, A, O>,
) -> Vec<O> {
    let numel = layout.numel();
    if layout.is_contiguous() {
        let src = &a[layout.offset()..layout.offset() + numel];
        return contiguous_output(numel, |first, dst| {
            kernel(&src[first..first + dst.len()], dst)
        });
    }
    let layout = &layout.coalesced();
    let (n, stride) = inner(layout);
    let mut out = super::pool::reused(numel, O::default());
    if stride > 1 && n > 1 && rows_are_neighbours(layout) {
        transposed_tiles(a, layout, slots(&mut out), kernel);
        return out;
    }
    for_each_row(slots(&mut out), n, |row, dst| {
        let base = row_start(row, layout);
        match stride {
            // A broadcast row: one value.
            0 => {
                kernel(&a[base..=base], &mut dst[..1]);
                let value = dst[0];
                dst.fill(value);
            }
            // Contiguous runs (e.g. heads split off a permuted tensor).
            1 => kernel(&a[base..base + n], dst),
            _ => {
                let mut row = RowReader::new(a, base, stride);
                for (k, part) in dst.chunks_mut(GATHER).enumerate() {
                    kernel(row.run(k * GATHER, part.len()), part);
                }
            }
        }
    });
    out
}

/// Whether consecutive rows of `layout` (a coalesced layout of rank 2 or more) start at
/// consecutive elements: the view of a transposed matrix, whose rows step along memory's
/// contiguous axis.
fn rows_are_neighbours(layout: &Layout) -> bool {
    let (dims, strides) = (layout.dims(), layout.strides());
    dims.len() >= 2 && strides[dims.len() - 2] == 1 && dims[dims.len() - 2] > 1
}

/// Output rows of a transposed copy filled together: a tile's reads run along memory's
/// contiguous axis and its writes stay in as many cache lines as it has rows.
const TILE: usize = 32;

/// [`map`] for views whose rows start at consecutive elements ([`rows_are_neighbours`]),
/// in tiles of `TILE x TILE`: walked row by row, each element is read from a cache line of
/// its own. A 4096 x 4096 f32 transpose copy on the dev box, one thread: 121 -> 48 ms
/// (PyTorch 50 ms); 1024 x 1024 (in cache either way) 3.3 -> 2.5 ms (PyTorch 0.63 ms, with
/// vector transposes).
fn transposed_tiles<A: Copy + Sync, O: Copy + Send>(
    a: &[A],
    layout: &Layout,
    out: &mut [MaybeUninit<O>],
    kernel: &Kernel1<'_, A, O>,
) {
    let (n, stride) = inner(layout);
    for_each_row(out, TILE * n, |chunk, dst| {
        let rows = dst.len() / n;
        let starts: smallvec::SmallVec<[usize; TILE]> = (0..rows)
            .map(|k| row_start(chunk * TILE + k, layout))
            .collect();
        for first in (0..n).step_by(TILE) {
            let end = (first + TILE).min(n);
            // Row by row of the tile: the rows' reads fall in the same `end - first` lines.
            for (k, &start) in starts.iter().enumerate() {
                let mut row = RowReader::new(a, start, stride);
                kernel(
                    row.run(first, end - first),
                    &mut dst[k * n + first..k * n + end],
                );
            }
        }
    });
}

/// A contiguous copy of the f32 view `layout` when its rows start at consecutive elements
/// (a transposed matrix, or a batch of them), through the 8 x 8 vector transposes of
/// `transpose.rs`; `None` for other views. On the dev box, one thread, against
/// `transposed_tiles`: 1024 x 1024 2.5 -> 0.49 ms (PyTorch 0.77 ms), 4096 x 4096 48 ->
/// 15.5 ms (PyTorch 52 ms).
pub fn transposed_copy(a: &[f32], layout: &Layout) -> Option<Vec<f32>> {
    let layout = &layout.coalesced();
    let (n, stride) = inner(layout);
    if layout.is_contiguous() || stride <= 1 || n <= 1 || !rows_are_neighbours(layout) {
        return None;
    }
    let rank = layout.rank();
    let rows = layout.dims()[rank - 2];
    let isa = super::simd::Isa::detect();
    let mut out = super::pool::reused(layout.numel(), 0.0f32);
    for (batch, dst) in out.chunks_mut(rows * n).enumerate() {
        let base = row_start(batch * rows, layout);
        // Output rows `first..` of this matrix are source columns `first..`.
        for_each_row(dst, TILE * n, |chunk, part| {
            let first = chunk * TILE;
            let count = part.len() / n;
            super::transpose::transpose(
                isa,
                super::transpose::Strided {
                    data: &a[base + first..],
                    stride,
                },
                super::transpose::Strided {
                    data: part,
                    stride: n,
                },
                [n, count],
                None,
            );
        });
    }
    Some(out)
}

/// `f(a, b)` element-wise; both layouts have the output's dims (broadcast views allowed).
pub fn zip_map<A: Copy + Sync, B: Copy + Sync, O: Copy + Send + Default + 'static>(
    a: &[A],
    la: &Layout,
    b: &[B],
    lb: &Layout,
    f: impl Fn(A, B) -> O + Sync,
) -> Vec<O> {
    zip_runs(
        (a, la),
        (b, lb),
        &|xs: &[A], ys: &[B], dst: &mut [MaybeUninit<O>]| {
            for ((d, &x), &y) in dst.iter_mut().zip(xs).zip(ys) {
                d.write(f(x, y));
            }
        },
    )
}

/// [`zip_map`] with the op as a run kernel.
fn zip_runs<A: Copy + Sync, B: Copy + Sync, O: Copy + Send + Default + 'static>(
    (a, la): (&[A], &Layout),
    (b, lb): (&[B], &Layout),
    kernel: &Kernel2<'_, A, B, O>,
) -> Vec<O> {
    debug_assert_eq!(la.dims(), lb.dims());
    let numel = la.numel();
    if la.is_contiguous() && lb.is_contiguous() {
        let (sa, sb) = (
            &a[la.offset()..la.offset() + numel],
            &b[lb.offset()..lb.offset() + numel],
        );
        return contiguous_output(numel, |first, dst| {
            let end = first + dst.len();
            kernel(&sa[first..end], &sb[first..end], dst)
        });
    }
    let mut out = super::pool::reused(numel, O::default());
    let (n, stride_a) = inner(la);
    let (_, stride_b) = inner(lb);
    for_each_row(slots(&mut out), n, |row, dst| {
        let mut xs = RowReader::new(a, row_start(row, la), stride_a);
        let mut ys = RowReader::new(b, row_start(row, lb), stride_b);
        if stride_a == 1 && stride_b == 1 {
            return kernel(xs.run(0, n), ys.run(0, n), dst);
        }
        for (k, part) in dst.chunks_mut(GATHER).enumerate() {
            let (first, len) = (k * GATHER, part.len());
            kernel(xs.run(first, len), ys.run(first, len), part);
        }
    });
    out
}

/// `f(a, b, c)` element-wise over three operands with the output's dims.
pub fn zip3_map<
    A: Copy + Sync,
    B: Copy + Sync,
    C: Copy + Sync,
    O: Copy + Send + Default + 'static,
>(
    (a, la): (&[A], &Layout),
    (b, lb): (&[B], &Layout),
    (c, lc): (&[C], &Layout),
    f: impl Fn(A, B, C) -> O + Sync,
) -> Vec<O> {
    let kernel: &Kernel3<'_, A, B, C, O> = &|xs, ys, zs, dst| {
        for (((d, &x), &y), &z) in dst.iter_mut().zip(xs).zip(ys).zip(zs) {
            d.write(f(x, y, z));
        }
    };
    let numel = la.numel();
    let (n, stride_a) = inner(la);
    let (_, stride_b) = inner(lb);
    let (_, stride_c) = inner(lc);
    let mut out = super::pool::reused(numel, O::default());
    for_each_row(slots(&mut out), n, |row, dst| {
        let mut xs = RowReader::new(a, row_start(row, la), stride_a);
        let mut ys = RowReader::new(b, row_start(row, lb), stride_b);
        let mut zs = RowReader::new(c, row_start(row, lc), stride_c);
        for (k, part) in dst.chunks_mut(GATHER).enumerate() {
            let (first, len) = (k * GATHER, part.len());
            kernel(
                xs.run(first, len),
                ys.run(first, len),
                zs.run(first, len),
                part,
            );
        }
    });
    out
}

/// Writes `f(dst, src)` into `dst` (a strided view of a mutable buffer) from `src` with the
/// same dims; used by in-place updates.
pub fn update_in_place<T: Copy, S: Copy>(
    dst: &mut [T],
    ld: &Layout,
    src: &[S],
    ls: &Layout,
    f: impl Fn(T, S) -> T,
) {
    let (n, stride_d) = inner(ld);
    let (_, stride_s) = inner(ls);
    let rows = ld.numel().checked_div(n).unwrap_or(0);
    for row in 0..rows {
        let (base_d, base_s) = (row_start(row, ld), row_start(row, ls));
        for j in 0..n {
            let slot = &mut dst[base_d + j * stride_d];
            *slot = f(*slot, src[base_s + j * stride_s]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Element `i` of the row-major walk over `layout`, by index arithmetic alone.
    fn element(a: &[f32], layout: &Layout, mut i: usize) -> f32 {
        let mut at = layout.offset();
        for (&size, &stride) in layout.dims().iter().zip(layout.strides()).rev() {
            at += (i % size) * stride;
            i /= size;
        }
        a[at]
    }

    /// Two and three operands in every row kind a kernel can get (contiguous, strided,
    /// broadcast), with rows longer than a gathered run and ragged against it, give the
    /// elements their walks name.
    #[test]
    fn operands_of_every_row_kind_reach_the_kernel_in_order() {
        let dims = [3, 5, 2 * GATHER + 7];
        let numel: usize = dims.iter().product();
        let a: Vec<f32> = (0..numel + 1).map(|i| i as f32).collect();
        let b: Vec<f32> = (0..numel + 1).map(|i| (i * 7 % 13) as f32).collect();
        let contiguous = Layout::new(&dims, &crate::shape::contiguous_strides(&dims), 1);
        // The same elements walked with the last two axes swapped: a strided inner axis.
        let swapped_dims = [3, dims[2], 5];
        let swapped = Layout::new(
            &swapped_dims,
            &crate::shape::contiguous_strides(&swapped_dims),
            0,
        )
        .permute(&[0, 2, 1]);
        // One value per row, broadcast along the inner axis.
        let broadcast = Layout::new(&dims, &[dims[1], 1, 0], 2);
        let views = [&contiguous, &swapped, &broadcast];
        for la in views {
            for lb in views {
                let sum = zip_map(&a, la, &b, lb, |x, y| x + 1000.0 * y);
                let expected: Vec<f32> = (0..numel)
                    .map(|i| element(&a, la, i) + 1000.0 * element(&b, lb, i))
                    .collect();
                assert_eq!(sum, expected, "{la:?} with {lb:?}");
                for lc in views {
                    let mixed = zip3_map((&a, la), (&b, lb), (&a, lc), |x, y, z| {
                        x + 100.0 * y - 0.5 * z
                    });
                    let expected: Vec<f32> = (0..numel)
                        .map(|i| {
                            element(&a, la, i) + 100.0 * element(&b, lb, i)
                                - 0.5 * element(&a, lc, i)
                        })
                        .collect();
                    assert_eq!(mixed, expected, "{la:?}, {lb:?}, {lc:?}");
                }
            }
            let mapped = map(&a, la, |x| x * 3.0 - 1.0);
            let expected: Vec<f32> = (0..numel).map(|i| element(&a, la, i) * 3.0 - 1.0).collect();
            assert_eq!(mapped, expected, "{la:?}");
        }
    }

    /// An output above the parallel grain, ragged against it, is written run by run at the
    /// right places.
    #[test]
    fn large_contiguous_outputs_are_filled_at_every_run() {
        let numel = 3 * super::super::parallel::PARALLEL_GRAIN + 5;
        let a: Vec<f32> = (0..numel + 2).map(|i| i as f32).collect();
        let layout = Layout::new(&[numel], &[1], 2);
        let expected: Vec<f32> = a[2..].iter().map(|x| x * 2.0).collect();
        assert_eq!(map(&a, &layout, |x| x * 2.0), expected);
        assert_eq!(zip_map(&a, &layout, &a, &layout, |x, y| x + y), expected);
    }

    /// Transposed and permuted views, ragged against the tile size and large enough to be
    /// split across threads, copy to the elements their walk names.
    #[test]
    fn transposed_views_copy_in_tiles_to_their_elements() {
        let cases: [(&[usize], &[usize]); 5] = [
            (&[70, 45], &[1, 0]),
            (&[3, 33, 65], &[0, 2, 1]),
            (&[2, 3, 40, 50], &[1, 0, 3, 2]),
            (&[300, 300], &[1, 0]),
            (&[5, 64, 31], &[2, 1, 0]),
        ];
        for (dims, perm) in cases {
            let numel: usize = dims.iter().product();
            let a: Vec<f32> = (0..numel + 3).map(|i| i as f32 * 0.5).collect();
            let layout =
                Layout::new(dims, &crate::shape::contiguous_strides(dims), 3).permute(perm);
            let copied = map(&a, &layout, |x| x + 1.0);
            let expected: Vec<f32> = (0..numel).map(|i| element(&a, &layout, i) + 1.0).collect();
            assert_eq!(copied, expected, "dims {dims:?} permuted {perm:?}");
            if let Some(vector) = transposed_copy(&a, &layout) {
                let expected: Vec<f32> = (0..numel).map(|i| element(&a, &layout, i)).collect();
                assert_eq!(
                    vector, expected,
                    "vector copy of {dims:?} permuted {perm:?}"
                );
            }
        }
    }
}
