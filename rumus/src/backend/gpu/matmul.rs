//! Launcher of `shaders/matmul.wgsl`: batched, broadcast and strided matrix products.

use super::batch::{grid_1d, grid_rows};
use super::context::GpuDevice;
use super::elementwise::check_float;
use super::memory::GpuBuffer;
use super::operand::Strided;
use super::pipelines::Module;
use crate::backend::{Matmul, Src};
use crate::dtype::DType;
use crate::error::{DeviceError, Result};
use crate::shape::Layout;

/// Output tile edge of `matmul_tiled` and of `matmul_wide`, which large products use.
const TILE: usize = 64;
const WIDE_TILE: usize = 128;
/// Output tile edge of `matmul_coop` (cooperative matrices, `f16` operands).
pub(super) const COOP_TILE: usize = 128;
const MIN_WIDE_TILES: usize = 128;
/// Split-K: products with fewer workgroups than this are split along K (each split a job of
/// its own, their partial products added by `sum_splits`), but no split is shorter than
/// `MIN_SPLIT_K`. Weight gradients (`[D, B T] @ [B T, F]`: small M N, K in the thousands)
/// otherwise run on a few hundred workgroups, each walking all of K.
const MIN_WORKGROUPS: usize = 512;
const MIN_SPLIT_K: usize = 256;

/// (splits, K per split) for a product of `jobs` output tiles over `k`.
fn split_k(jobs: usize, k: usize, min_jobs: usize) -> (usize, usize) {
    if jobs >= min_jobs || k < 2 * MIN_SPLIT_K {
        return (1, k.max(1));
    }
    let splits = (min_jobs / jobs.max(1)).min(k / MIN_SPLIT_K).max(1);
    let chunk = k.div_ceil(splits).next_multiple_of(16);
    (k.div_ceil(chunk), chunk)
}
/// Loop iterations product kernel `entry` is taken to run per element of K a job walks, for
/// devices that end long loops (lavapipe). Both were measured there with the budget lifted:
/// `matmul_tiled` ran about 1.1 (its loops over a stage of 16 partly unrolled): a batch of
/// 512 products `[1, 60000] @ [60000, 1]` came out 58,253, its loops ended early.
/// `matmul_wide` walked K = 16,384 in one job exactly (`[2048, 16384] @ [16384, 2048]`, 256
/// wide tiles, no split), so under 4 (its loops, counted as if none were unrolled, would
/// come to about 7); `gpu_parity` checks a product at that bound.
fn loops_per_k(entry: &str) -> usize {
    if entry == "matmul_wide" { 4 } else { 2 }
}

/// `(splits, chunk)` from `split_k`, split further so that no invocation walks more than
/// `most` of K, over all the jobs (grid layers) it takes: for devices that end an
/// invocation's loops after a budget of iterations (lavapipe). Chunks stay whole stages of
/// 16. The error is the K an invocation would walk at any split, when the grid's layers
/// alone give it more than `most` (batches of over 65,535 x `most` / 16 matrices).
fn split_k_within(
    most: usize,
    batch: usize,
    k: usize,
    (mut splits, mut chunk): (usize, usize),
) -> std::result::Result<(usize, usize), usize> {
    let layers = |splits: usize| (batch * splits).div_ceil(MAX_GRID_LAYERS).max(1);
    while chunk * layers(splits) > most {
        // Shorter than `chunk`, since `chunk * layers > most`.
        let shorter = (most / layers(splits)) / 16 * 16;
        if shorter == 0 {
            return Err((batch * k).div_ceil(MAX_GRID_LAYERS));
        }
        chunk = shorter;
        splits = k.div_ceil(chunk);
    }
    Ok((splits, chunk))
}

/// Split-K for the cooperative kernel's f32 products (autocast's): the split count whose
/// jobs fill whole waves of `MIN_WIDE_JOBS` workgroups best. With `s` splits each job walks
/// a `1/s` share of K, and `jobs * s` of them take `ceil(jobs * s / wave)` waves, so the time
/// goes as `ceil(jobs * s / wave) / s`; each split past the first is counted 5% dearer (its
/// partial product written and summed), none is shorter than `MIN_COOP_SPLIT_K`, and
/// products of a wave or more stay whole. GPT-2 small's feed-forward weight gradients
/// (`[768, 8192] @ [8192, 3072]`, 144 tiles) take 5 splits this way, where the one-wave
/// target left them whole (144 workgroups on an H200's 132 SMs, most of them alone on
/// theirs): 7.4 -> 4.9 ms for 12 of them. Its input gradients (`[8192, 3072] @ [3072, 768]`,
/// 384 tiles) ran slower in 2 splits (4.9 -> 5.3 ms), the model notwithstanding: their
/// partial products are large. The one-wave target's choices for fewer tiles (16 splits of
/// 16 tiles, 7 of 36, 4 of 64) are this rule's too.
fn split_k_in_waves(jobs: usize, k: usize) -> (usize, usize) {
    let most = (k / MIN_COOP_SPLIT_K).clamp(1, 64);
    if jobs >= MIN_WIDE_JOBS || most == 1 {
        return (1, k.max(1));
    }
    let cost = |s: usize| {
        let waves = (jobs * s).div_ceil(MIN_WIDE_JOBS) as f64;
        waves / s as f64 * (1.0 + 0.05 * (s - 1) as f64)
    };
    let splits = (1..=most)
        .min_by(|&a, &b| cost(a).total_cmp(&cost(b)))
        .unwrap_or(1);
    // Whole stages of 32 along K: a job whose K range is one copies its stages unchecked
    // (matmul_coop.wgsl's `whole`).
    let chunk = k.div_ceil(splits).next_multiple_of(COOP_STAGE_K);
    (k.div_ceil(chunk), chunk)
}
/// Split-K of the cooperative kernels: only their f32 products (autocast's) are split, since
/// partial products are f32.
fn coop_splits(jobs: usize, k: usize, widen: bool) -> (usize, usize) {
    if widen {
        split_k_in_waves(jobs, k)
    } else {
        (1, k.max(1))
    }
}
/// Workgroups along a grid's z (Vulkan's least maximum, 65,535).
const MAX_GRID_LAYERS: usize = 65_535;
/// K per stage of `matmul_coop.wgsl` and `matmul_tensor.comp` (`DEPTH`).
pub(super) const COOP_STAGE_K: usize = 32;
/// The shortest K range a split of the cooperative kernel walks: shorter ones spend more on
/// writing and summing their partial products than they save.
const MIN_COOP_SPLIT_K: usize = 512;
const MAX_BATCH_RANK: usize = 4;
/// Split-K's target for the wide kernel: about one wave of 128x128 workgroups on a large GPU
/// (an H200 keeps two of them on each of its 132 SMs). On an H200 the transformer step took
/// 56.4 ms with this target against 58.3-59.2 with 512, 59.1-59.7 with 132 and 59.4-60.6 with
/// 1024: past one wave the partial products cost more than the extra jobs gain.
const MIN_WIDE_JOBS: usize = 256;

/// The batch part (all but the last two axes) of a broadcast operand layout.
fn batch_layout(layout: &Layout) -> Layout {
    let r = layout.rank() - 2;
    Layout::new(&layout.dims()[..r], &layout.strides()[..r], 0)
}

/// `[batch.., m, k] @ [k, n]` broadcast over the batch (a `Linear` on a `[B, T, D]` input) as
/// one `[batch * m, k] @ [k, n]` product, when the batch dims of A step over its rows
/// evenly: one large product keeps more of the GPU busy than many small ones.
fn fold_batch_into_rows(la: &Layout, lb: &Layout) -> Option<(Layout, Layout)> {
    let r = la.rank();
    if r <= 2 || lb.strides()[..r - 2].iter().any(|&s| s != 0) {
        return None;
    }
    let rows: Vec<usize> = la.dims()[..r - 1].to_vec();
    let row_layout = Layout::new(&rows, &la.strides()[..r - 1], 0);
    let merged = Strided::new("matmul", &rows, &[&row_layout]).ok()?;
    if merged.dims.len() > 1 {
        return None;
    }
    let m: usize = rows.iter().product();
    let row_stride = merged.strides[0].first().copied().unwrap_or(0);
    let (k, n) = (la.dims()[r - 1], lb.dims()[r - 1]);
    Some((
        Layout::new(&[m, k], &[row_stride, la.strides()[r - 1]], la.offset()),
        Layout::new(&[k, n], &lb.strides()[r - 2..], lb.offset()),
    ))
}

/// The kernels a product runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kernels {
    /// `matmul_tiled` / `matmul_wide` on f32.
    F32,
    /// The same kernels reading packed f16 (`HALF`), then the f32 result rounded to f16.
    Half,
    /// `matmul_coop`: f16 on cooperative matrices, writing f16 (or f32 when widening).
    Coop,
}

/// Whether an operand viewed with `layout` (and batch strides `batch_strides`) is one
/// `matmul_coop` loads: row- or column-major with the other stride, the offset and the batch
/// strides multiples of 8 elements (16-byte aligned rows).
fn coop_operand(layout: &Layout, batch_strides: &[usize]) -> bool {
    let r = layout.rank();
    let (rows, cols) = (layout.strides()[r - 2], layout.strides()[r - 1]);
    let other = match (rows, cols) {
        (_, 1) => rows,
        (1, _) => cols,
        _ => return false,
    };
    other.is_multiple_of(8) && layout.offset().is_multiple_of(8) && batch_strides.iter().all(|s| s.is_multiple_of(8))
}

/// Whether `matmul_tensor` may read an operand viewed with `layout` (one `coop_operand`
/// takes): its tensor layouts need the stride between rows (or columns, column-major) to
/// span a whole row, so broadcast (stride 0) and overlapping views stay on `matmul_coop`.
fn tensor_operand(layout: &Layout) -> bool {
    let r = layout.rank();
    let (rows, cols) = (layout.dims()[r - 2], layout.dims()[r - 1]);
    let (row_stride, col_stride) = (layout.strides()[r - 2], layout.strides()[r - 1]);
    if col_stride == 1 {
        row_stride >= cols
    } else {
        col_stride >= rows
    }
}

/// Whether `matmul_tensor` may run a product that has a bias (`biased`) and an `f32`
/// (`widen`) or `f16` result. The kernel adds no bias itself: on an H200 the outputs whose
/// bias it added element by element (`coopMatPerElementNV`) were, as far as two tests'
/// losses tell, wrong in every element, while products without a bias were right. So an
/// `f32` product with a bias writes its product as split-K partial products are written,
/// and `sum_splits` adds the bias (one more pass over the result, as split products already
/// take); an `f16` one, which `sum_splits` cannot write, runs on `matmul_coop`.
fn tensor_takes_bias(biased: bool, widen: bool) -> bool {
    !biased || widen
}

/// Whether `matmul_wide` may read an operand four elements at a time: contiguous along one
/// of its two axes, with the other stride, the offset, the batch strides and the extent of
/// the contiguous axis multiples of four (so every vector is aligned and wholly inside or
/// outside the matrix). `extents` are (rows, columns) of the operand.
fn vector_operand(layout: &Layout, batch_strides: &[usize], (rows, cols): (usize, usize)) -> bool {
    let r = layout.rank();
    let (row_stride, col_stride) = (layout.strides()[r - 2], layout.strides()[r - 1]);
    let fours = |x: usize| x.is_multiple_of(4);
    let along_columns = col_stride == 1 && fours(row_stride) && fours(cols);
    let along_rows = row_stride == 1 && col_stride != 1 && fours(col_stride) && fours(rows);
    (along_columns || along_rows)
        && fours(layout.offset())
        && batch_strides.iter().all(|&s| fours(s))
}

/// The bindings of product kernel `entry` writing `written`: `matmul_wide` also reads both
/// operands through its vector bindings, `matmul_coop` writes the output and reads the bias
/// through f32 bindings too. The others read the bias at binding 6, which is bound to A
/// when there is none (the kernel then never reads it). (wgpu merges a buffer's uses within a
/// dispatch, so the output may be bound writable twice; each tile of `matmul_coop` writes
/// through one of the two bindings only, so no word is written through both. `matmul_tensor`
/// has one output binding, of the type it was built for (see its header), and no bias.)
fn product_bindings<'a>(
    entry: &str,
    a: &'a wgpu::Buffer,
    b: &'a wgpu::Buffer,
    bias: Option<&'a wgpu::Buffer>,
    written: &'a wgpu::Buffer,
) -> Vec<(u32, &'a wgpu::Buffer)> {
    let mut bindings = vec![(1, a), (2, b), (3, written)];
    if entry == "matmul_wide" {
        bindings.extend([(4, a), (5, b)]);
    }
    if entry == "matmul_coop" {
        bindings.extend([(7, written), (8, bias.unwrap_or(a))]);
    }
    if entry != "matmul_tensor" {
        bindings.push((6, bias.unwrap_or(a)));
    }
    bindings
}

/// Where a product's bias lives: its buffer, and the offset and stride of its `n` values.
struct Bias<'a> {
    memory: &'a wgpu::Buffer,
    offset: u32,
    stride: u32,
}

impl Matmul for GpuDevice {
    /// `a @ b` with both operands already broadcast to `[batch.., m, k]` and `[batch.., k, n]`
    /// (same dtype, checked by the caller): `f32`, or `f16` accumulated in `f32` and rounded
    /// to an `f16` result, or with `widen` returned in `f32` unrounded (autocast's products).
    ///
    /// With `bias` (`f32` `[n]`, checked by the caller) the product adds it to every row, in
    /// the kernel's epilogue, or in the sum of split-K partial products.
    fn matmul(
        &self,
        a: Src<'_, GpuBuffer>,
        b: Src<'_, GpuBuffer>,
        bias: Option<Src<'_, GpuBuffer>>,
        out_dims: &[usize],
        widen: bool,
    ) -> Result<GpuBuffer> {
        let kernels = match a.dtype() {
            DType::F16 if self.has_coop_matmul() => Kernels::Coop,
            DType::F16 => Kernels::Half,
            dtype => {
                check_float(dtype, "matmul")?;
                Kernels::F32
            }
        };
        let bias = match bias {
            Some(bias) => {
                check_float(bias.dtype(), "linear")?;
                Some(Bias {
                    memory: bias.memory.raw(),
                    offset: bias.layout.offset() as u32,
                    stride: bias.layout.strides()[0] as u32,
                })
            }
            None => None,
        };
        let widen = widen && kernels != Kernels::F32;
        if crate::shape::checked_numel(out_dims, "matmul")? == 0 {
            // Nothing to compute (and the batch dims may multiply past usize).
            let dtype = if widen { DType::F32 } else { a.dtype() };
            return GpuBuffer::uninit(self, 0, dtype, "matmul");
        }
        let out = self.product(kernels, a, b, bias.as_ref(), widen)?;
        match out {
            // `f16` products of the tiled kernels are summed in `f32`; rounded here.
            (product, Kernels::Half) if !widen => {
                self.to_half(Src::new(&product, &Layout::contiguous(out_dims)))
            }
            (product, _) => Ok(product),
        }
    }
}

impl GpuDevice {
    /// The product on `kernels` (or the kernels it falls back to for these layouts, returned
    /// with it), contiguous `[batch.., m, n]`.
    fn product(
        &self,
        kernels: Kernels,
        a: Src<'_, GpuBuffer>,
        b: Src<'_, GpuBuffer>,
        bias: Option<&Bias<'_>>,
        widen: bool,
    ) -> Result<(GpuBuffer, Kernels)> {
        let (la, lb) = (a.layout, b.layout);
        if let Some((la, lb)) = fold_batch_into_rows(la, lb) {
            let (a, b) = (Src::new(a.memory, &la), Src::new(b.memory, &lb));
            return self.product(kernels, a, b, bias, widen);
        }
        let r = la.rank();
        let (m, k, n) = (la.dims()[r - 2], la.dims()[r - 1], lb.dims()[r - 1]);
        let batch_dims = &la.dims()[..r - 2];
        let batch: usize = batch_dims.iter().product();
        let strided = Strided::new(
            "matmul",
            batch_dims,
            &[&batch_layout(la), &batch_layout(lb)],
        )?;
        if strided.dims.len() > MAX_BATCH_RANK {
            return Err(DeviceError::RankTooLarge {
                op: "matmul (batch dims)",
                rank: strided.dims.len(),
                limit: MAX_BATCH_RANK,
            }
            .into());
        }
        // Cooperative matrices stage their operands in 8-element pieces: only products made
        // of whole pieces (see matmul_coop.wgsl) go there; the rest take the tiled kernels.
        let kernels = match kernels {
            Kernels::Coop
                if m.is_multiple_of(8)
                    && n.is_multiple_of(8)
                    && k.is_multiple_of(8)
                    && k > 0
                    && coop_operand(la, &strided.strides[0])
                    && coop_operand(lb, &strided.strides[1]) =>
            {
                Kernels::Coop
            }
            Kernels::Coop => Kernels::Half,
            other => other,
        };
        // Wide tiles only when there are enough of them to keep a large GPU busy: on an H200
        // a 256x1024 product ran slower with 16 wide tiles than with 64 small ones.
        let (module, entry, tile) = match kernels {
            Kernels::Coop => {
                let (a_row_major, b_row_major) = (la.strides()[r - 1] == 1, lb.strides()[r - 1] == 1);
                // `matmul_tensor` takes the same parameters, bindings and 128x128 tiles as
                // `matmul_coop`, but one job (batch entry or split) per grid layer, and adds
                // no bias (`tensor_takes_bias`): an `f16` product with one stays here.
                let jobs = batch * coop_splits(batch * m.div_ceil(COOP_TILE) * n.div_ceil(COOP_TILE), k, widen).0;
                let tensor_layouts = tensor_operand(la) && tensor_operand(lb);
                if self.has_tensor_matmul()
                    && tensor_layouts
                    && jobs <= MAX_GRID_LAYERS
                    && tensor_takes_bias(bias.is_some(), widen)
                {
                    let module = Module::MatmulTensor {
                        a_row_major,
                        b_row_major,
                        f32_out: widen,
                    };
                    (module, "matmul_tensor", COOP_TILE)
                } else {
                    let module = Module::MatmulCoop {
                        a_row_major,
                        b_row_major,
                    };
                    (module, "matmul_coop", COOP_TILE)
                }
            }
            _ => {
                let module = if kernels == Kernels::Half {
                    Module::MatmulHalf
                } else {
                    Module::Matmul
                };
                // Counting the splits along K: a weight gradient (`[1536, 8192] @ [8192,
                // 512]`, 48 wide tiles) runs as 480 wide jobs instead of small tiles.
                let wide_tiles = batch * m.div_ceil(WIDE_TILE) * n.div_ceil(WIDE_TILE);
                // A side shorter than the wide tile would leave at least half of each wide
                // workgroup idle: attention's `[256, 256] @ [256, 64]` ran 0.180 ms on wide
                // tiles and 0.159 ms on 64x64 ones (H200, 256 such products).
                let narrow = m < WIDE_TILE || n < WIDE_TILE;
                if !narrow && wide_tiles * split_k(wide_tiles, k, MIN_WIDE_JOBS).0 >= MIN_WIDE_TILES {
                    (module, "matmul_wide", WIDE_TILE)
                } else {
                    (module, "matmul_tiled", TILE)
                }
            }
        };
        let tiles = m.div_ceil(tile) * n.div_ceil(tile);
        let ([gx, gy, _], row) = grid_rows(tiles);
        // Split-K writes f32 partial products: the cooperative kernel splits only products
        // whose result is f32 (autocast's).
        let (splits, chunk) = match (kernels, entry) {
            (Kernels::Coop, _) => coop_splits(tiles * batch, k, widen),
            (_, "matmul_wide") => split_k(tiles * batch, k, MIN_WIDE_JOBS),
            _ => split_k(tiles * batch, k, MIN_WORKGROUPS),
        };
        let (splits, chunk) = match self.loop_budget() {
            Some(budget) if kernels != Kernels::Coop => {
                let loops = loops_per_k(entry);
                split_k_within(budget / loops, batch, k, (splits, chunk)).map_err(|walked| {
                    DeviceError::LoopBudget {
                        op: "matmul",
                        iterations: walked * loops,
                        budget,
                        device: self.name().to_string(),
                    }
                })?
            }
            _ => (splits, chunk),
        };
        let gz = (batch * splits).clamp(1, MAX_GRID_LAYERS) as u32;
        let (sa, sb) = (la.strides(), lb.strides());
        let mut params = vec![0u32; 29];
        params[..12].copy_from_slice(&[
            m as u32,
            n as u32,
            k as u32,
            batch as u32,
            strided.dims.len() as u32,
            la.offset() as u32,
            lb.offset() as u32,
            sa[r - 2] as u32,
            sa[r - 1] as u32,
            sb[r - 2] as u32,
            sb[r - 1] as u32,
            row,
        ]);
        for (axis, &size) in strided.dims.iter().enumerate() {
            params[12 + axis] = size as u32;
            params[16 + axis] = strided.strides[0][axis] as u32;
            params[20 + axis] = strided.strides[1][axis] as u32;
        }
        params[24] = splits as u32;
        params[25] = chunk as u32;
        if kernels == Kernels::F32 && entry == "matmul_wide" {
            let a_vectors = vector_operand(la, &strided.strides[0], (m, k));
            let b_vectors = vector_operand(lb, &strided.strides[1], (k, n));
            params[26] = u32::from(a_vectors) | (u32::from(b_vectors) << 1);
        }
        // Without split-K the product's epilogue adds the bias; with it, the sum of the
        // partial products does, and so it does after `matmul_tensor` (which adds none).
        let summed = splits > 1 || (bias.is_some() && entry == "matmul_tensor");
        if let Some(bias) = bias
            && !summed
        {
            params[26] |= 4;
            params[27] = bias.offset;
            params[28] = bias.stride;
        }
        if kernels == Kernels::Coop && widen {
            params[26] |= 8;
        }
        let (ma, mb) = (a.memory.raw(), b.memory.raw());
        let bias_memory = bias.map(|bias| bias.memory);
        let groups = if batch * m * n == 0 {
            [0, 0, 0]
        } else {
            [gx, gy, gz]
        };
        let out_dtype = if kernels == Kernels::Coop && !widen {
            DType::F16
        } else {
            DType::F32
        };
        let out = GpuBuffer::uninit(self, batch * m * n, out_dtype, "matmul")?;
        let operands = |written| product_bindings(entry, ma, mb, bias_memory, written);
        if !summed {
            self.dispatch(module, entry, &params, &operands(out.raw()), groups);
        } else {
            let partial = GpuBuffer::uninit(self, batch * splits * m * n, DType::F32, "matmul")?;
            self.dispatch(module, entry, &params, &operands(partial.raw()), groups);
            let (sum_groups, sum_row) = grid_1d(batch * m * n);
            let sum_params = [
                (batch * m * n) as u32,
                (m * n) as u32,
                splits as u32,
                sum_row,
                u32::from(bias.is_some()),
                n as u32,
                bias.map_or(0, |bias| bias.offset),
                bias.map_or(0, |bias| bias.stride),
            ];
            self.dispatch(
                Module::Matmul,
                "sum_splits",
                &sum_params,
                &[
                    (1, partial.raw()),
                    (3, out.raw()),
                    (6, bias_memory.unwrap_or(partial.raw())),
                ],
                sum_groups,
            );
        }
        Ok((out, kernels))
    }
}

#[cfg(test)]
mod tests {
    use super::{
        MAX_GRID_LAYERS, MIN_COOP_SPLIT_K, MIN_WIDE_JOBS, split_k, split_k_in_waves, split_k_within,
        tensor_operand,
    };
    use crate::shape::Layout;

    /// `matmul_tensor` takes row- and column-major operands whose rows do not overlap, and
    /// leaves broadcast and overlapping views to `matmul_coop`.
    #[test]
    fn tensor_layouts_need_rows_that_do_not_overlap() {
        let view = |dims: &[usize], strides: &[usize]| tensor_operand(&Layout::new(dims, strides, 0));
        assert!(view(&[24, 16], &[16, 1]), "row-major");
        assert!(view(&[24, 16], &[32, 1]), "row-major with padded rows");
        assert!(view(&[24, 16], &[1, 24]), "a transposed row-major matrix");
        assert!(view(&[2, 24, 16], &[384, 16, 1]), "batched");
        assert!(!view(&[24, 16], &[0, 1]), "one row broadcast to 24");
        assert!(!view(&[24, 16], &[8, 1]), "rows overlapping by half");
        assert!(!view(&[24, 16], &[1, 8]), "columns overlapping by two thirds");
    }

    /// Under a loop budget every invocation walks at most `most` of K, over all the jobs it
    /// takes, and the splits still cover K exactly once in stages of 16.
    #[test]
    fn splits_within_a_loop_budget_bound_each_invocation() {
        // Lavapipe's 65,535 iterations at 2 and 4 loops per element of K; operands that fit
        // its bindings (batch x K up to 2^26 f16 elements).
        for most in [32_767, 16_383] {
            for (batch, k) in [(1, 16), (1, 1 << 26), (512, 131_072), (600, 55_000), (70_000, 958)] {
                for jobs in [batch, 512 * batch] {
                    let (splits, chunk) = split_k_within(most, batch, k, split_k(jobs, k, 512))
                        .unwrap_or_else(|_| panic!("batch {batch}, K {k}"));
                    assert!(splits * chunk >= k && (splits - 1) * chunk < k, "{batch} {k}");
                    assert!(chunk.is_multiple_of(16) || splits == 1, "{batch} {k}: {chunk}");
                    let layers = (batch * splits).div_ceil(MAX_GRID_LAYERS);
                    assert!(chunk * layers <= most, "{batch} {k}: {splits} x {chunk}");
                }
            }
        }
        assert_eq!(split_k_within(32_767, 1, 1000, (1, 1000)), Ok((1, 1000)));
        // 2^31 matrices: every invocation takes 32,769 of them whatever the split.
        assert_eq!(
            split_k_within(32_767, 1 << 31, 1000, (1, 1000)),
            Err((1000usize << 31).div_ceil(MAX_GRID_LAYERS))
        );
    }

    /// The splits cover K exactly once in whole stages of the kernel (multiples of 32, none
    /// shorter than the minimum), and products of a wave or more stay whole.
    #[test]
    fn splits_in_waves_cover_k_in_whole_chunks() {
        for jobs in [1, 6, 16, 36, 64, 144, 255, 256, 384, 511, 512, 2358] {
            for k in [8, 512, 768, 1000, 1024, 3072, 8192, 50_000] {
                let (splits, chunk) = split_k_in_waves(jobs, k);
                assert!(splits * chunk >= k && (splits - 1) * chunk < k, "{jobs} {k}");
                if splits > 1 {
                    assert!(chunk.is_multiple_of(32), "{jobs} jobs, K {k}: chunk {chunk}");
                    assert!(chunk >= MIN_COOP_SPLIT_K, "{jobs} jobs, K {k}: chunk {chunk}");
                    assert!(jobs < MIN_WIDE_JOBS);
                }
            }
        }
    }

    /// The choices the doc comment names: the one-wave target's for few tiles, five splits
    /// for GPT-2 small's 144-tile weight gradients.
    #[test]
    fn splits_in_waves_fill_the_waves_the_doc_names() {
        for (jobs, splits) in [(16, 16), (36, 7), (64, 4), (144, 5), (384, 1)] {
            assert_eq!(split_k_in_waves(jobs, 8192).0, splits, "{jobs} tiles");
        }
        assert_eq!(split_k_in_waves(144, 768).0, 1, "K too short to split");
    }
}
