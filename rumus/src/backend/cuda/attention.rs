//! Fused scaled dot-product attention on CUDA (`shaders/cuda/attention.cu`), memory linear in
//! the sequence length: one kernel for the forward pass and two for the backward pass (dQ;
//! dK and dV), in one of two families. Under autocast (compute capability 8.0 and later),
//! flash-attention kernels on the tensor cores (f16 operands, f32 softmax statistics and
//! sums); otherwise f32 kernels on the CUDA cores. They read heads split from a projection
//! (`[B, H, T, d]` views of `[B, T, H, d]`) where they lie and write each result in its
//! operand's layout. Rows wider than 128 and f64 operands take the composite form
//! (`attention_forward` answers `None`): cuBLASLt products and a softmax.

use super::context::CudaDevice;
use super::launch::{Arg, plain_arg};
use super::memory::CudaBuffer;
use crate::backend::contract::result_layout;
use crate::backend::kinds::{BinaryOp, Geometry, Reduction};
use crate::backend::{Allocate, Attention, Backend, Forward, Pointwise, Reduce, Src, Viewed};
use crate::dtype::DType;
use crate::error::Result;
use crate::shape::Layout;

/// The kernels of one fused attention, with their row width (`D`, rows zero-padded to it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kernels {
    /// `*_half_d{64,128}` (f16) and `*_bf16_d{64,128}`: tensor cores, 8 warps of 16 rows a
    /// block.
    Half(usize, DType),
    /// `*_f32_d{16,32,64,128}`: CUDA cores, 32 rows of 4 lanes a block.
    F32(usize),
}

impl Kernels {
    /// Rows of the owned side a block takes (`TC_ROWS`, `QUAD_ROWS`).
    fn rows_per_block(self) -> usize {
        match self {
            Kernels::Half(..) => 128,
            Kernels::F32(_) => 32,
        }
    }

    /// Threads per block (`TC_THREADS`, `ATTENTION_THREADS`).
    fn threads(self) -> u32 {
        match self {
            Kernels::Half(..) => 256,
            Kernels::F32(_) => 128,
        }
    }

    /// The entry point `name_{half,bf16,f32}_d{width}`'s base name and suffix.
    fn entry(self, pass: Pass) -> (&'static str, &'static str) {
        let (family, width) = match self {
            Kernels::Half(width, DType::BF16) => (1, width),
            Kernels::Half(width, _) => (0, width),
            Kernels::F32(width) => (2, width),
        };
        const NAMES: [[&str; 3]; 3] = [
            ["attention_forward_half", "attention_dq_half", "attention_dkv_half"],
            ["attention_forward_bf16", "attention_dq_bf16", "attention_dkv_bf16"],
            ["attention_forward_f32", "attention_dq_f32", "attention_dkv_f32"],
        ];
        let suffix = match width {
            16 => "d16",
            32 => "d32",
            64 => "d64",
            _ => "d128",
        };
        (NAMES[family][pass as usize], suffix)
    }
}

/// The three passes.
#[derive(Clone, Copy, Debug)]
enum Pass {
    Forward = 0,
    Dq = 1,
    Dkv = 2,
}

/// Where problem `n = b heads + h`'s rows of one operand lie, as `struct Rows` of
/// attention.cu reads them (elements).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct Rows {
    offset: i64,
    batch: i64,
    head: i64,
    row: i64,
    heads: i64,
}

impl Rows {
    /// The rows of `layout` (`[.., rows, width]`), where its rows are contiguous and its
    /// problems one or two strided axes (`[B, H, rows, width]`, any strides); a contiguous
    /// layout of any rank; `None` otherwise.
    fn of(layout: &Layout) -> Option<Rows> {
        let (dims, strides) = (layout.dims(), layout.strides());
        let rank = dims.len();
        if rank < 2 || (strides[rank - 1] != 1 && dims[rank - 1] > 1) {
            return None;
        }
        let row = strides[rank - 2] as i64;
        let (batch, head, heads) = match rank {
            2 => (0, 0, 1),
            3 => (strides[0], 0, 1),
            4 => (strides[0], strides[1], dims[1]),
            _ if layout.is_contiguous() => (dims[rank - 2] * dims[rank - 1], 0, 1),
            _ => return None,
        };
        Some(Rows {
            offset: layout.offset() as i64,
            batch: batch as i64,
            head: head as i64,
            row,
            heads: heads.max(1) as i64,
        })
    }
}

/// Sizes, options and rows of one fused attention, as `struct Sdpa` of attention.cu.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct Sdpa {
    q: Rows,
    k: Rows,
    v: Rows,
    grad: Rows,
    results: [Rows; 2],
    seed: u64,
    batch: i32,
    t: i32,
    s: i32,
    d: i32,
    dv: i32,
    per_mask_row: i32,
    causal: i32,
    padded: i32,
    dropout: i32,
    threshold: u32,
    scale: f32,
    scale_log2: f32,
    keep: f32,
}
plain_arg!(Sdpa);

/// Memory a kernel reads: an operand's own, or a copy of it the kernels can read.
enum Held<'a> {
    Borrowed(&'a CudaBuffer, Rows),
    Owned(CudaBuffer, Rows),
}

impl<'a> Held<'a> {
    /// `t` where its rows can be read in place, else a contiguous copy.
    fn rows(device: &CudaDevice, t: Src<'a, CudaBuffer>) -> Result<Held<'a>> {
        match Rows::of(t.layout) {
            Some(rows) => Ok(Held::Borrowed(t.memory, rows)),
            None => {
                let copy = Pointwise::copy(device, t)?;
                let rows = Rows::of(&Layout::contiguous(t.dims())).expect("contiguous rows");
                Ok(Held::Owned(copy, rows))
            }
        }
    }

    /// `t` contiguous from its offset (the saved log-sum-exp, the mask), or a copy.
    fn flat(device: &CudaDevice, t: Src<'a, CudaBuffer>) -> Result<Held<'a>> {
        if t.layout.is_contiguous() {
            let rows = Rows {
                offset: t.layout.offset() as i64,
                ..Rows::default()
            };
            Ok(Held::Borrowed(t.memory, rows))
        } else {
            Ok(Held::Owned(Pointwise::copy(device, t)?, Rows::default()))
        }
    }

    fn memory(&self) -> &CudaBuffer {
        match self {
            Held::Borrowed(memory, _) => memory,
            Held::Owned(memory, _) => memory,
        }
    }

    fn layout(&self) -> Rows {
        match self {
            Held::Borrowed(_, rows) | Held::Owned(_, rows) => *rows,
        }
    }

    /// The address of the memory's start, for kernels that add the offset themselves.
    fn start(&self) -> u64 {
        self.memory().address(0)
    }

    /// The address at the offset, for kernels that read from there.
    fn at_offset(&self) -> u64 {
        self.memory().address(self.layout().offset as usize)
    }
}

/// A fresh f32 result with rows `width` wide in the layout `result_layout` gives for `like`.
fn result_like(device: &CudaDevice, like: &Layout, width: usize) -> Result<Viewed<CudaBuffer>> {
    let layout = result_layout(like, width);
    let buffer = CudaBuffer::uninit(device, layout.numel(), DType::F32)?;
    Ok((buffer, layout))
}

impl CudaDevice {
    /// The kernels of an attention over `dtype` operands with these sizes: the tensor cores
    /// under autocast, in its dtype (from compute capability 8.0, which has
    /// `mma.m16n8k16`), else f32's;
    /// `None` (the composite form) for f64, rows wider than 128 and an empty side.
    fn attention_kernels(
        &self,
        g: &Geometry,
        dtype: DType,
        autocast: Option<DType>,
    ) -> Option<Kernels> {
        let widest = g.d.max(g.dv);
        if dtype != DType::F32 || widest > 128 || g.t == 0 || g.s == 0 {
            return None;
        }
        Some(match autocast {
            Some(half) if self.compute_capability() >= (8, 0) => {
                Kernels::Half(if widest <= 64 { 64 } else { 128 }, half)
            }
            _ => Kernels::F32(widest.next_power_of_two().max(16)),
        })
    }

    /// The parameter block of one pass.
    fn sdpa(&self, g: &Geometry, [q, k, v]: [&Held<'_>; 3], grad: Rows, results: [Rows; 2]) -> Sdpa {
        let (threshold, seed, keep) = g.dropout.map_or((0, 0, 1.0), |dropout| {
            let threshold = crate::backend::cpu::dropout::threshold(dropout.p);
            (threshold, dropout.seed, (1.0 / (1.0 - dropout.p)) as f32)
        });
        Sdpa {
            q: q.layout(),
            k: k.layout(),
            v: v.layout(),
            grad,
            results,
            seed,
            batch: g.batch as i32,
            t: g.t as i32,
            s: g.s as i32,
            d: g.d as i32,
            dv: g.dv as i32,
            per_mask_row: g.problems_per_mask_row.max(1) as i32,
            causal: i32::from(g.causal),
            padded: 0,
            dropout: i32::from(g.dropout.is_some()),
            threshold,
            scale: g.scale as f32,
            scale_log2: (g.scale * std::f64::consts::LOG2_E) as f32,
            keep,
        }
    }

    /// Queues `pass` of `kernels` over blocks of each problem's `rows`.
    fn launch_attention(
        &self,
        (kernels, pass): (Kernels, Pass),
        (g, rows): (&Geometry, usize),
        args: &[&dyn Arg],
    ) -> Result<()> {
        let (name, suffix) = kernels.entry(pass);
        let kernel = self.kernel("attention", name, [suffix, ""])?;
        let blocks = g.batch * rows.div_ceil(kernels.rows_per_block());
        if blocks == 0 {
            // An empty batch: empty results, nothing to write.
            return Ok(());
        }
        // (a grid's x dimension holds at most 2^31 - 1 blocks)
        let blocks = u32::try_from(blocks)
            .ok()
            .filter(|&b| b <= i32::MAX as u32)
            .ok_or_else(|| crate::error::DeviceError::Cuda {
                message: format!(
                    "attention over {} problems of {rows} rows needs more than 2^31 blocks",
                    g.batch
                ),
            })?;
        self.launch(kernel, (blocks, 1, 1), (kernels.threads(), 1, 1), 0, args)
    }
}

/// The operands as the kernels read them and the padding mask's bytes (or the queries',
/// never read, in its place), with the parameter block's `padded` set.
struct Operands<'a> {
    q: Held<'a>,
    k: Held<'a>,
    v: Held<'a>,
    mask: Option<Held<'a>>,
}

impl<'a> Operands<'a> {
    fn new(
        device: &CudaDevice,
        [q, k, v]: [Src<'a, CudaBuffer>; 3],
        mask: Option<Src<'a, CudaBuffer>>,
    ) -> Result<Self> {
        Ok(Operands {
            q: Held::rows(device, q)?,
            k: Held::rows(device, k)?,
            v: Held::rows(device, v)?,
            mask: mask.map(|m| Held::flat(device, m)).transpose()?,
        })
    }

    fn sdpa(&self, device: &CudaDevice, g: &Geometry, grad: Rows, results: [Rows; 2]) -> Sdpa {
        let mut sdpa = device.sdpa(g, [&self.q, &self.k, &self.v], grad, results);
        sdpa.padded = i32::from(self.mask.is_some());
        sdpa
    }

    /// The addresses of q, k, v and the mask.
    fn addresses(&self) -> [u64; 4] {
        let mask = self.mask.as_ref().map_or(self.q.start(), Held::at_offset);
        [self.q.start(), self.k.start(), self.v.start(), mask]
    }
}

/// The rows of a fresh result.
fn rows_of(result: &Viewed<CudaBuffer>) -> Rows {
    Rows::of(&result.1).expect("results are laid out in rows")
}

impl Attention for CudaDevice {
    /// `None` (the composite form) for f64, rows wider than 128 and an empty side.
    fn attention_forward(
        &self,
        operands: [Src<'_, CudaBuffer>; 3],
        mask: Option<Src<'_, CudaBuffer>>,
        g: &Geometry,
        autocast: Option<DType>,
    ) -> Result<Option<Forward<CudaBuffer>>> {
        let Some(kernels) = self.attention_kernels(g, operands[0].dtype(), autocast) else {
            return Ok(None);
        };
        let ops = Operands::new(self, operands, mask)?;
        let out = result_like(self, operands[0].layout, g.dv)?;
        let lse = CudaBuffer::uninit(self, g.batch * g.t, DType::F32)?;
        let sdpa = ops.sdpa(self, g, Rows::default(), [rows_of(&out), Rows::default()]);
        let [q, k, v, m] = ops.addresses();
        let (o, l) = (out.0.address(0), lse.address(0));
        let args: [&dyn Arg; 7] = [&o, &l, &q, &k, &v, &m, &sdpa];
        self.launch_attention((kernels, Pass::Forward), (g, g.t), &args)?;
        Ok(Some((out, lse)))
    }

    fn attention_backward(
        &self,
        operands: [Src<'_, CudaBuffer>; 3],
        mask: Option<Src<'_, CudaBuffer>>,
        [out, lse, grad]: [Src<'_, CudaBuffer>; 3],
        g: &Geometry,
        autocast: Option<DType>,
    ) -> Result<[Viewed<CudaBuffer>; 3]> {
        if g.t == 0 || g.s == 0 {
            let zeros = |k: usize| -> Result<Viewed<CudaBuffer>> {
                let dims = operands[k].dims();
                Ok((Allocate::full(self, dims, 0.0, DType::F32)?, Layout::contiguous(dims)))
            };
            return Ok([zeros(0)?, zeros(1)?, zeros(2)?]);
        }
        let Some(kernels) = self.attention_kernels(g, operands[0].dtype(), autocast) else {
            // The forward pass was composed, so its backward pass is too.
            return Err(self.unsupported("scaled_dot_product_attention"));
        };
        let ops = Operands::new(self, operands, mask)?;
        let grad_rows = Held::rows(self, grad)?;
        let lse = Held::flat(self, lse)?;
        // dO . O per query row, [batch, t] contiguous.
        let product = Pointwise::binary(self, grad, out, BinaryOp::Mul)?;
        let last = grad.dims().len() - 1;
        let delta = self.reduce(
            Src::new(&product, &Layout::contiguous(grad.dims())),
            &[last],
            Reduction::Sum,
        )?;
        let dq = result_like(self, operands[0].layout, g.d)?;
        let dk = result_like(self, operands[1].layout, g.d)?;
        let dv = result_like(self, operands[2].layout, g.dv)?;
        let [q, k, v, m] = ops.addresses();
        let (pg, pl, pd) = (grad_rows.start(), lse.at_offset(), delta.address(0));

        let sdpa = ops.sdpa(self, g, grad_rows.layout(), [rows_of(&dq), Rows::default()]);
        let pdq = dq.0.address(0);
        let args: [&dyn Arg; 9] = [&pdq, &q, &k, &v, &m, &pg, &pl, &pd, &sdpa];
        self.launch_attention((kernels, Pass::Dq), (g, g.t), &args)?;

        let sdpa = ops.sdpa(self, g, grad_rows.layout(), [rows_of(&dk), rows_of(&dv)]);
        let (pdk, pdv) = (dk.0.address(0), dv.0.address(0));
        let args: [&dyn Arg; 10] = [&pdk, &pdv, &q, &k, &v, &m, &pg, &pl, &pd, &sdpa];
        self.launch_attention((kernels, Pass::Dkv), (g, g.s), &args)?;
        Ok([dq, dk, dv])
    }

    fn attention_on_matrix_units(&self, width: usize, autocast: Option<DType>) -> bool {
        let g = Geometry {
            batch: 1,
            t: 1,
            s: 1,
            d: width,
            dv: width,
            problems_per_mask_row: 1,
            causal: false,
            scale: 1.0,
            dropout: None,
        };
        matches!(
            self.attention_kernels(&g, DType::F32, autocast),
            Some(Kernels::Half(..))
        )
    }
}
