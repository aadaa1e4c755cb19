//! Launchers of `shaders/attention.wgsl`: fused scaled dot-product attention forward (output
//! and log-sum-exp) and backward (one kernel for the query gradient, one for the key and
//! value gradients), on f32 operands: `attention.wgsl` in f32 on contiguous ones, or
//! `attention_coop.wgsl` on cooperative matrices in f16 (autocast's), which reads and writes
//! rows through strides: the heads of a `[B, T, H, d]` projection, viewed as `[B, H, T, d]`,
//! are read where they lie, and its results come back in their operands' layouts, so that
//! merging the heads again needs no copy either.

use super::batch::grid_rows;
use super::context::GpuDevice;
use super::memory::{GpuBuffer, check_words};
use super::pipelines::Module;
use crate::backend::kinds::{Geometry, Reduction};
use crate::backend::contract::result_layout;
use crate::backend::{Allocate, Attention, Forward, Pointwise, Reduce, Src, Viewed};
use crate::dtype::DType;
use crate::error::Result;
use crate::shape::Layout;

/// The widest query, key or value row the kernels keep in registers (`WIDEST`).
const WIDEST_ROW: usize = 128;

/// Rows a workgroup owns (`WG`).
const ROWS_PER_WORKGROUP: usize = 64;

/// The row width of `attention_coop.wgsl` (queries, keys and values).
const COOP_ROW: usize = 64;

/// The kernels of one fused attention: `attention.wgsl` (f32 throughout) or
/// `attention_coop.wgsl` (operands and probabilities rounded to f16, sums in f32).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AttentionKernels {
    F32,
    Half,
}

impl AttentionKernels {
    /// `t` as the kernels read it: contiguous for `attention.wgsl`; for
    /// `attention_coop.wgsl`, which reads quads through `row_strides`, up to rank 4 with
    /// rows of contiguous elements, and the offset and every other stride a multiple of 4.
    fn ready<'a>(self, gpu: &GpuDevice, t: Src<'a, GpuBuffer>) -> Result<Held<'a>> {
        let layout = t.layout;
        let readable = match self {
            AttentionKernels::F32 => layout.is_contiguous(),
            AttentionKernels::Half => {
                let strides = layout.strides();
                let rank = strides.len();
                layout.is_contiguous()
                    || (rank <= 4
                        && strides.last() == Some(&1)
                        && strides[..rank - 1].iter().all(|s| s.is_multiple_of(4)))
            }
        };
        let aligned = self == AttentionKernels::F32 || layout.offset().is_multiple_of(4);
        if readable && aligned {
            Ok(Held::Borrowed(t.memory, layout.clone()))
        } else {
            Held::copy(gpu, t)
        }
    }

    /// A fresh result of `dims` (`[.., rows, width]`) in the layout of the operand `like`
    /// (its dims but for the width): for `attention_coop.wgsl`, heads stored inside the rows
    /// where `like` has them there (a `[B, H, T, d]` view of `[B, T, H, d]`); else
    /// contiguous.
    fn result_like(
        self,
        gpu: &GpuDevice,
        like: &Layout,
        width: usize,
    ) -> Result<(GpuBuffer, Layout)> {
        let numel = like.dims()[..like.rank() - 1].iter().product::<usize>() * width;
        let buffer = GpuBuffer::uninit(gpu, numel, DType::F32, "attention")?;
        let layout = match self {
            AttentionKernels::Half => result_layout(like, width),
            AttentionKernels::F32 => result_layout(&Layout::contiguous(like.dims()), width),
        };
        Ok((buffer, layout))
    }

    /// The module and entry point of `kernel` in this family, walking the other side in
    /// several passes or (`in_passes` false) in one.
    fn entry(self, kernel: Kernel, g: &Geometry, in_passes: bool) -> (Module, &'static str) {
        let dropout = g.dropout.is_some();
        match self {
            AttentionKernels::F32 => {
                let width = f32_width(g);
                let entry = match kernel {
                    Kernel::Forward => "attention_forward",
                    Kernel::Dq => "attention_backward_dq",
                    Kernel::Dkv => "attention_backward_dkv",
                };
                let module = Module::Attention {
                    width,
                    dropout,
                    in_passes,
                };
                (module, entry)
            }
            AttentionKernels::Half => (Module::AttentionCoop { dropout }, kernel.coop_entry()),
        }
    }
}

/// The rows of the walked side (keys for the forward pass and dQ, queries for dK/dV) one
/// dispatch of `attention.wgsl` takes, and whether it adds to an earlier pass's results.
#[derive(Clone, Copy, Debug)]
struct Walk {
    begin: usize,
    end: usize,
    continuing: bool,
}

impl Walk {
    /// The passes over `length` walked rows: one, except where the device ends long loops
    /// (lavapipe), where each pass walks as many rows as keep every invocation's loop
    /// iterations within the device's budget (whole staged tiles of them).
    fn passes(gpu: &GpuDevice, kernels: AttentionKernels, g: &Geometry, length: usize) -> Vec<Walk> {
        let per_pass = match (gpu.loop_budget(), kernels) {
            (Some(budget), AttentionKernels::F32) => {
                let width = f32_width(g) as usize;
                let tile_rows = (ATTENTION_TILE / width).min(128);
                // Per walked row: three loops over the width, the row loop, and its share of
                // staging; per invocation: loading and writing its own rows.
                let per_row = 3 * width + width / 64 + 4;
                let rows = budget.saturating_sub(4 * width + 64) / per_row;
                (rows / tile_rows * tile_rows).max(tile_rows)
            }
            _ => length.max(1),
        };
        (0..length.max(1))
            .step_by(per_pass)
            .map(|begin| Walk {
                begin,
                end: (begin + per_pass).min(length),
                continuing: begin > 0,
            })
            .collect()
    }
}

/// Floats of each tile `attention.wgsl` stages (`TILE`).
const ATTENTION_TILE: usize = 1792;

/// The row width `attention.wgsl` is specialised to (`WIDTH`): the widest operand row,
/// rounded up to a power of two from 16 to 128.
fn f32_width(g: &Geometry) -> u32 {
    g.d.max(g.dv).next_power_of_two().clamp(16, WIDEST_ROW) as u32
}

/// The three kernels of each family.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kernel {
    Forward,
    Dq,
    Dkv,
}

impl Kernel {
    /// The bindings after the parameters (0) and the operands (1-4) that the
    /// `attention_coop.wgsl` entry point reaches: all but the correction term (8) in the
    /// forward pass, all of them in the backward passes.
    pub(crate) fn coop_bindings(self) -> &'static [u32] {
        match self {
            Kernel::Forward => &[5, 6, 7, 9, 10],
            Kernel::Dq | Kernel::Dkv => &[5, 6, 7, 8, 9, 10],
        }
    }

    /// Its entry point in `attention_coop.wgsl`.
    pub(crate) fn coop_entry(self) -> &'static str {
        match self {
            Kernel::Forward => "attention_forward_coop",
            Kernel::Dq => "attention_backward_dq_coop",
            Kernel::Dkv => "attention_backward_dkv_coop",
        }
    }
}

/// Where problem `n = b H + h`'s rows lie in a matrix `[.., rows, width]` of rank up to 4
/// (rows contiguous): the strides of its batch entry `b`, head `h` and row, in elements, with
/// `H` the heads (dim 1 of a rank-4 matrix, else 1), as `row_start` in
/// attention_common.wgsl reads them.
fn row_strides(layout: &Layout) -> [u32; 3] {
    let (dims, strides) = (layout.dims(), layout.strides());
    let rank = dims.len();
    let row = strides[rank - 2] as u32;
    match rank {
        2 => [0, 0, row],
        3 => [strides[0] as u32, 0, row],
        4 => [strides[0] as u32, strides[1] as u32, row],
        // (Contiguous, as `ready` leaves it: one batch axis of problems.)
        _ => [(dims[rank - 2] * dims[rank - 1]) as u32, 0, row],
    }
}

/// The heads `row_strides` counts in: dim 1 of rank-4 operands.
fn heads_of(t: &Layout) -> u32 {
    if t.rank() == 4 { t.dims()[1] as u32 } else { 1 }
}

/// Memory a kernel reads and the view of it: an operand's own, or a copy of it the kernel
/// can read.
enum Held<'a> {
    Borrowed(&'a GpuBuffer, Layout),
    Owned(GpuBuffer, Layout),
}

impl<'a> Held<'a> {
    /// A contiguous copy of `t`.
    fn copy(gpu: &GpuDevice, t: Src<'a, GpuBuffer>) -> Result<Self> {
        Ok(Held::Owned(Pointwise::copy(gpu, t)?, Layout::contiguous(t.dims())))
    }

    /// `t` itself when it is contiguous from element 0 (the kernels index it per query row
    /// from there), else such a copy.
    fn from_start(gpu: &GpuDevice, t: Src<'a, GpuBuffer>) -> Result<Self> {
        if t.layout.is_contiguous() && t.layout.offset() == 0 {
            Ok(Held::Borrowed(t.memory, t.layout.clone()))
        } else {
            Held::copy(gpu, t)
        }
    }

    fn layout(&self) -> &Layout {
        match self {
            Held::Borrowed(_, layout) | Held::Owned(_, layout) => layout,
        }
    }

    /// The buffer, for a kernel that reads one element per 32-bit word.
    fn words(&self) -> Result<&wgpu::Buffer> {
        let memory = match self {
            Held::Borrowed(memory, _) => memory,
            Held::Owned(memory, _) => memory,
        };
        check_words(memory.dtype(), "GPU kernel")?;
        Ok(memory.raw())
    }
}

/// The operands of one fused attention as the kernels read them, with the padding mask as
/// f32 0/1.
struct Operands<'a> {
    q: Held<'a>,
    k: Held<'a>,
    v: Held<'a>,
    padding: Option<Held<'a>>,
}

/// The results a dispatch writes, bindings 9 (grad_qk), 10 (grad_v) and 5 (out), by the
/// strides of their layouts (unused ones zeros).
#[derive(Default)]
struct Results {
    strides: [[u32; 3]; 3],
}

impl Results {
    fn with(mut self, slot: u32, layout: &Layout) -> Self {
        let at = match slot {
            9 => 0,
            10 => 1,
            _ => 2,
        };
        self.strides[at] = row_strides(layout);
        self
    }
}

impl<'a> Operands<'a> {
    fn new(
        gpu: &GpuDevice,
        [q, k, v]: [Src<'a, GpuBuffer>; 3],
        mask: Option<Src<'_, GpuBuffer>>,
        kernels: AttentionKernels,
    ) -> Result<Self> {
        let padding = mask
            .map(|m| {
                let values = Pointwise::cast(gpu, m, DType::F32)?;
                Ok::<_, crate::Error>(Held::Owned(values, Layout::contiguous(m.dims())))
            })
            .transpose()?;
        Ok(Operands {
            q: kernels.ready(gpu, q)?,
            k: kernels.ready(gpu, k)?,
            v: kernels.ready(gpu, v)?,
            padding,
        })
    }

    /// The parameter block of attention_common.wgsl, with the output's gradient `grad`
    /// (backward passes) and the results' strides.
    fn params(
        &self,
        (g, walk): (&Geometry, Walk),
        x: u32,
        grad: Option<&Held<'_>>,
        results: &Results,
    ) -> Vec<u32> {
        let flags = u32::from(g.causal)
            | (u32::from(self.padding.is_some()) << 1);
        let offset = |t: &Held<'_>| t.layout().offset() as u32;
        let (p, seed) = g.dropout.map_or((0.0, 0), |d| (d.p, d.seed));
        let grad_offset = grad.map_or(0, offset);
        let mut params = vec![
            g.batch as u32,
            g.t as u32,
            g.s as u32,
            g.d as u32,
            g.dv as u32,
            g.problems_per_mask_row as u32,
            flags,
            (g.scale as f32).to_bits(),
            x,
            offset(&self.q),
            offset(&self.k),
            offset(&self.v),
            self.padding.as_ref().map_or(0, offset),
            grad_offset,
            seed as u32,
            (seed >> 32) as u32,
            (p as f32).to_bits(),
            ((1.0 / (1.0 - p)) as f32).to_bits(),
            heads_of(self.q.layout()),
        ];
        for operand in [&self.q, &self.k, &self.v, grad.unwrap_or(&self.q)] {
            params.extend(row_strides(operand.layout()));
        }
        params.extend(results.strides.iter().flatten());
        params.extend([
            walk.begin as u32,
            walk.end as u32,
            u32::from(walk.continuing),
        ]);
        params
    }

    /// Runs `kernel` over `length` rows per problem with the operands at bindings 1-4 and
    /// `bindings` after them, the output's gradient `grad` among them in the backward passes:
    /// one dispatch per pass over the `walked` rows of the other side.
    fn dispatch(
        &self,
        gpu: &GpuDevice,
        (kernels, kernel): (AttentionKernels, Kernel),
        (g, length, walked): (&Geometry, usize, usize),
        (grad, results): (Option<&Held<'_>>, &Results),
        bindings: &[(u32, &wgpu::Buffer)],
    ) -> Result<()> {
        let workgroups = g.batch * length.div_ceil(ROWS_PER_WORKGROUP);
        let (groups, x) = grid_rows(workgroups);
        let (q, k, v) = (self.q.words()?, self.k.words()?, self.v.words()?);
        // An absent mask binds the queries in its place; the flags keep the kernel off it.
        let padding = self.padding.as_ref().map(Held::words).transpose()?;
        let mut all = vec![(1, q), (2, k), (3, v), (4, padding.unwrap_or(q))];
        all.extend_from_slice(bindings);
        // The entry points of attention_coop.wgsl reach more bindings than they use through
        // the helpers they share (staging, writing rows), and each needs every binding it
        // reaches bound: the unused ones get the queries (read-only) or a one-element
        // stand-in (written, by nothing).
        let stand_in;
        if kernels == AttentionKernels::Half {
            stand_in = GpuBuffer::uninit(gpu, 1, DType::F32, "attention")?;
            for &slot in kernel.coop_bindings() {
                if !all.iter().any(|&(bound, _)| bound == slot) {
                    let read_only = matches!(slot, 7 | 8);
                    all.push((slot, if read_only { q } else { stand_in.raw() }));
                }
            }
        }
        let passes = Walk::passes(gpu, kernels, g, walked);
        let (module, entry) = kernels.entry(kernel, g, passes.len() > 1);
        for walk in passes {
            let params = self.params((g, walk), x, grad, results);
            gpu.dispatch(module, entry, &params, &all, groups);
        }
        Ok(())
    }
}

impl GpuDevice {
    /// The kernels a fused attention with query (key) and value rows `d` and `dv` wide runs
    /// on: autocast's where the adapter has cooperative matrices and rows are 64 wide,
    /// otherwise f32.
    fn attention_kernels(&self, (d, dv): (usize, usize), autocast: Option<DType>) -> AttentionKernels {
        if autocast == Some(DType::F16) && self.has_coop_matmul() && d == COOP_ROW && dv == COOP_ROW {
            AttentionKernels::Half
        } else {
            AttentionKernels::F32
        }
    }

    /// Zeros of `dims` (f32).
    fn attention_zeros(&self, dims: &[usize]) -> Result<Viewed<GpuBuffer>> {
        let zeros = Allocate::full(self, dims, 0.0, DType::F32)?;
        Ok((zeros, Layout::contiguous(dims)))
    }

    /// `dO . O` per query row, `[batch, t]` contiguous.
    fn attention_correction(
        &self,
        grad: Src<'_, GpuBuffer>,
        out: Src<'_, GpuBuffer>,
    ) -> Result<GpuBuffer> {
        let product = Pointwise::binary(self, grad, out, crate::backend::kinds::BinaryOp::Mul)?;
        let layout = Layout::contiguous(grad.dims());
        let last = grad.dims().len() - 1;
        Reduce::reduce(self, Src::new(&product, &layout), &[last], Reduction::Sum)
    }
}

/// Whether the kernels take these sizes: rows they can keep in registers, and no empty side.
fn fused(g: &Geometry) -> bool {
    let widths = 1..=WIDEST_ROW;
    widths.contains(&g.d) && widths.contains(&g.dv) && g.t > 0 && g.s > 0
}

impl Attention for GpuDevice {
    /// `None` for rows wider than the kernels keep (and for an empty side).
    fn attention_forward(
        &self,
        operands: [Src<'_, GpuBuffer>; 3],
        mask: Option<Src<'_, GpuBuffer>>,
        g: &Geometry,
        autocast: Option<DType>,
    ) -> Result<Option<Forward<GpuBuffer>>> {
        if !fused(g) {
            return Ok(None);
        }
        let kernels = self.attention_kernels((g.d, g.dv), autocast);
        let ops = Operands::new(self, operands, mask, kernels)?;
        let (out, out_layout) = kernels.result_like(self, operands[0].layout, g.dv)?;
        let lse = GpuBuffer::uninit(self, g.batch * g.t, DType::F32, "attention")?;
        ops.dispatch(
            self,
            (kernels, Kernel::Forward),
            (g, g.t, g.s),
            (None, &Results::default().with(5, &out_layout)),
            &[(5, out.raw()), (6, lse.raw())],
        )?;
        Ok(Some(((out, out_layout), lse)))
    }

    fn attention_backward(
        &self,
        operands: [Src<'_, GpuBuffer>; 3],
        mask: Option<Src<'_, GpuBuffer>>,
        [out, lse, grad]: [Src<'_, GpuBuffer>; 3],
        g: &Geometry,
        autocast: Option<DType>,
    ) -> Result<[Viewed<GpuBuffer>; 3]> {
        if g.t == 0 || g.s == 0 {
            let zeros = |k: usize| self.attention_zeros(operands[k].dims());
            return Ok([zeros(0)?, zeros(1)?, zeros(2)?]);
        }
        let kernels = self.attention_kernels((g.d, g.dv), autocast);
        let ops = Operands::new(self, operands, mask, kernels)?;
        let grad_ready = kernels.ready(self, grad)?;
        // dO . O per query row.
        let correction = self.attention_correction(grad, out)?;
        let correction = Held::Owned(correction, Layout::contiguous(&[g.batch * g.t]));
        let lse = Held::from_start(self, lse)?;
        let (dq, dq_layout) = kernels.result_like(self, operands[0].layout, g.d)?;
        let (dk, dk_layout) = kernels.result_like(self, operands[1].layout, g.d)?;
        let (dv, dv_layout) = kernels.result_like(self, operands[2].layout, g.dv)?;
        let shared = [
            (6, lse.words()?),
            (7, grad_ready.words()?),
            (8, correction.words()?),
        ];
        let mut bindings = shared.to_vec();
        bindings.push((9, dq.raw()));
        ops.dispatch(
            self,
            (kernels, Kernel::Dq),
            (g, g.t, g.s),
            (Some(&grad_ready), &Results::default().with(9, &dq_layout)),
            &bindings,
        )?;
        let mut bindings = shared.to_vec();
        bindings.extend([(9, dk.raw()), (10, dv.raw())]);
        let results = Results::default().with(9, &dk_layout).with(10, &dv_layout);
        ops.dispatch(
            self,
            (kernels, Kernel::Dkv),
            (g, g.s, g.t),
            (Some(&grad_ready), &results),
            &bindings,
        )?;
        Ok([(dq, dq_layout), (dk, dk_layout), (dv, dv_layout)])
    }

    fn attention_on_matrix_units(&self, width: usize, autocast: Option<DType>) -> bool {
        self.attention_kernels((width, width), autocast) == AttentionKernels::Half
    }
}
