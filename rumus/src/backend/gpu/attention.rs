//! Launchers of `shaders/attention.wgsl`: fused scaled dot-product attention forward (output
//! and log-sum-exp) and backward (one kernel for the query gradient, one for the key and
//! value gradients), on contiguous f32 operands: `attention.wgsl` in f32, or
//! `attention_coop.wgsl` on cooperative matrices in f16 (autocast's).

use super::batch::grid_rows;
use super::context::GpuDevice;
use super::memory::GpuBuffer;
use super::pipelines::Module;
use crate::backend::cpu::attention::Geometry;
use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::DynTensor;

/// The widest query, key or value row the kernels keep in registers (`WIDEST`).
pub(crate) const WIDEST_ROW: usize = 128;

/// Rows a workgroup owns (`WG`).
const ROWS_PER_WORKGROUP: usize = 64;

/// The row width of `attention_coop.wgsl` (queries, keys and values).
const COOP_ROW: usize = 64;

/// The kernels of one fused attention: `attention.wgsl` (f32 throughout) or
/// `attention_coop.wgsl` (operands and probabilities rounded to f16, sums in f32).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AttentionKernels {
    F32,
    Half,
}

impl AttentionKernels {
    /// `t` as the kernels read it: contiguous, and for `attention_coop.wgsl`, which reads
    /// quads, starting at a multiple of 4 elements.
    fn ready(self, gpu: &GpuDevice, t: &DynTensor) -> Result<DynTensor> {
        let aligned = self == AttentionKernels::F32 || t.layout().offset().is_multiple_of(4);
        if t.is_contiguous() && aligned {
            Ok(t.clone())
        } else {
            gpu.copy(t)
        }
    }

    /// The module and entry point of `kernel` in this family.
    fn entry(self, kernel: Kernel, g: &Geometry) -> (Module, &'static str) {
        let dropout = g.dropout.is_some();
        match self {
            AttentionKernels::F32 => {
                let width = g.d.max(g.dv).next_power_of_two().clamp(16, WIDEST_ROW) as u32;
                let entry = match kernel {
                    Kernel::Forward => "attention_forward",
                    Kernel::Dq => "attention_backward_dq",
                    Kernel::Dkv => "attention_backward_dkv",
                };
                (Module::Attention { width, dropout }, entry)
            }
            AttentionKernels::Half => (Module::AttentionCoop { dropout }, kernel.coop_entry()),
        }
    }
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

/// The operands of one fused attention, contiguous, with the padding mask as f32 0/1.
struct Operands {
    q: DynTensor,
    k: DynTensor,
    v: DynTensor,
    padding: Option<DynTensor>,
}

impl Operands {
    fn new(
        gpu: &GpuDevice,
        [q, k, v]: [&DynTensor; 3],
        mask: Option<&DynTensor>,
        kernels: AttentionKernels,
    ) -> Result<Self> {
        let device = q.device();
        let padding = mask
            .map(|m| AttentionKernels::F32.ready(gpu, &m.to_dtype(DType::F32)?.to(&device)?))
            .transpose()?;
        Ok(Operands {
            q: kernels.ready(gpu, q)?,
            k: kernels.ready(gpu, k)?,
            v: kernels.ready(gpu, v)?,
            padding,
        })
    }

    /// The parameter block of attention.wgsl for `rows`-long sides, with `grad_offset`.
    fn params(&self, g: &Geometry, x: u32, grad_offset: usize) -> Vec<u32> {
        let flags = u32::from(g.causal)
            | (u32::from(self.padding.is_some()) << 1);
        let offset = |t: &DynTensor| t.layout().offset() as u32;
        let (p, seed) = g.dropout.map_or((0.0, 0), |d| (d.p, d.seed));
        vec![
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
            grad_offset as u32,
            seed as u32,
            (seed >> 32) as u32,
            (p as f32).to_bits(),
            ((1.0 / (1.0 - p)) as f32).to_bits(),
        ]
    }

    /// Runs `kernel` over `length` rows per problem with the operands at bindings 1-4 and
    /// `bindings` after them.
    fn dispatch(
        &self,
        gpu: &GpuDevice,
        (kernels, kernel): (AttentionKernels, Kernel),
        (g, length, grad_offset): (&Geometry, usize, usize),
        bindings: &[(u32, &wgpu::Buffer)],
    ) -> Result<()> {
        let workgroups = g.batch * length.div_ceil(ROWS_PER_WORKGROUP);
        let (groups, x) = grid_rows(workgroups);
        let (q, k, v) = (
            gpu.memory_of(&self.q)?,
            gpu.memory_of(&self.k)?,
            gpu.memory_of(&self.v)?,
        );
        // An absent mask binds the queries in its place; the flags keep the kernel off it.
        let padding = self.padding.as_ref().map(|m| gpu.memory_of(m)).transpose()?;
        let mut all = vec![
            (1, q.raw()),
            (2, k.raw()),
            (3, v.raw()),
            (4, padding.as_ref().unwrap_or(&q).raw()),
        ];
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
                    all.push((slot, if read_only { q.raw() } else { stand_in.raw() }));
                }
            }
        }
        let params = self.params(g, x, grad_offset);
        let (module, entry) = kernels.entry(kernel, g);
        gpu.dispatch(module, entry, &params, &all, groups);
        Ok(())
    }
}

impl GpuDevice {
    /// The kernels a fused attention with query (key) and value rows `d` and `dv` wide runs
    /// on: autocast's where the adapter has cooperative matrices and rows are 64 wide,
    /// otherwise f32.
    pub(crate) fn attention_kernels(&self, (d, dv): (usize, usize), autocast: bool) -> AttentionKernels {
        if autocast && self.has_coop_matmul() && d == COOP_ROW && dv == COOP_ROW {
            AttentionKernels::Half
        } else {
            AttentionKernels::F32
        }
    }

    /// The attention output `[batch, t, dv]` and each query row's log-sum-exp `[batch, t]`.
    pub(crate) fn attention_forward(
        &self,
        operands: [&DynTensor; 3],
        mask: Option<&DynTensor>,
        g: &Geometry,
        kernels: AttentionKernels,
    ) -> Result<(DynTensor, DynTensor)> {
        // No queries or no keys: nothing to dispatch (the kernels index rows up to the last
        // one, which an empty side does not have). No key seen gives zeros and a -inf
        // log-sum-exp, as the kernels give a query row that sees none.
        if g.t == 0 || g.s == 0 {
            return Ok((
                self.full(&[g.batch, g.t, g.dv], 0.0, DType::F32)?,
                self.full(&[g.batch, g.t], f64::NEG_INFINITY, DType::F32)?,
            ));
        }
        let ops = Operands::new(self, operands, mask, kernels)?;
        let out = GpuBuffer::uninit(self, g.batch * g.t * g.dv, DType::F32, "attention")?;
        let lse = GpuBuffer::uninit(self, g.batch * g.t, DType::F32, "attention")?;
        ops.dispatch(
            self,
            (kernels, Kernel::Forward),
            (g, g.t, 0),
            &[(5, out.raw()), (6, lse.raw())],
        )?;
        Ok((
            DynTensor::from_gpu(out, &[g.batch, g.t, g.dv]),
            DynTensor::from_gpu(lse, &[g.batch, g.t]),
        ))
    }

    /// The gradients of query, key and value from the forward pass's output and log-sum-exp
    /// and the output's gradient (`[batch, t, dv]` each).
    pub(crate) fn attention_backward(
        &self,
        operands: [&DynTensor; 3],
        mask: Option<&DynTensor>,
        (out, lse, grad): (&DynTensor, &DynTensor, &DynTensor),
        g: &Geometry,
        kernels: AttentionKernels,
    ) -> Result<[DynTensor; 3]> {
        if g.t == 0 || g.s == 0 {
            let zeros = |t: &DynTensor| self.full(t.dims(), 0.0, DType::F32);
            return Ok([zeros(operands[0])?, zeros(operands[1])?, zeros(operands[2])?]);
        }
        let ops = Operands::new(self, operands, mask, kernels)?;
        let grad = kernels.ready(self, grad)?;
        // The kernels index these per query row from element 0.
        let from_start = |t: DynTensor| {
            if t.is_contiguous() && t.layout().offset() == 0 {
                Ok(t)
            } else {
                self.copy(&t)
            }
        };
        // dO . O per query row.
        let correction = from_start(grad.mul(out)?.sum(&[-1], false)?)?;
        let lse = from_start(lse.clone())?;
        let dq = GpuBuffer::uninit(self, g.batch * g.t * g.d, DType::F32, "attention")?;
        let dk = GpuBuffer::uninit(self, g.batch * g.s * g.d, DType::F32, "attention")?;
        let dv = GpuBuffer::uninit(self, g.batch * g.s * g.dv, DType::F32, "attention")?;
        let (lse_memory, grad_memory, correction_memory) = (
            self.memory_of(&lse)?,
            self.memory_of(&grad)?,
            self.memory_of(&correction)?,
        );
        let shared = [
            (6, lse_memory.raw()),
            (7, grad_memory.raw()),
            (8, correction_memory.raw()),
        ];
        let grad_offset = grad.layout().offset();
        let mut bindings = shared.to_vec();
        bindings.push((9, dq.raw()));
        ops.dispatch(
            self,
            (kernels, Kernel::Dq),
            (g, g.t, grad_offset),
            &bindings,
        )?;
        let mut bindings = shared.to_vec();
        bindings.extend([(9, dk.raw()), (10, dv.raw())]);
        ops.dispatch(
            self,
            (kernels, Kernel::Dkv),
            (g, g.s, grad_offset),
            &bindings,
        )?;
        Ok([
            DynTensor::from_gpu(dq, operands[0].dims()),
            DynTensor::from_gpu(dk, operands[1].dims()),
            DynTensor::from_gpu(dv, operands[2].dims()),
        ])
    }
}
