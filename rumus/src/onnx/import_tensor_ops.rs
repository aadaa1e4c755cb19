//! ONNX ops of exported transformers that cut, repeat or mask whole tensors: `Split`
//! (`q, k, v = qkv.split(...)`, `chunk`, `unbind`), `Tile` (`repeat`) and `Trilu` (the causal
//! masks `torch.triu` / `torch.tril` build), run with rumus's views and `where`.

use crate::error::{Error, Result};
use crate::tensor::DynTensor;

fn invalid(message: impl Into<String>) -> Error {
    Error::InvalidArgument {
        op: "onnx import",
        message: message.into(),
    }
}

/// `Split` of `x` along `axis` (already resolved) into `outputs` pieces: of the `sizes` given
/// (the `split` input), else `num_outputs` (opset 18) or one per output, the last piece the
/// smaller when they do not divide the axis (as opset 18 has it).
pub(super) fn split(
    x: &DynTensor,
    axis: usize,
    sizes: Option<Vec<i64>>,
    outputs: usize,
) -> Result<Vec<DynTensor>> {
    let length = x.dims()[axis];
    let sizes: Vec<usize> = match sizes {
        Some(sizes) => {
            let sizes: Vec<usize> = sizes
                .iter()
                .map(|&s| usize::try_from(s).map_err(|_| invalid(format!("Split size {s}"))))
                .collect::<Result<_>>()?;
            if sizes.iter().sum::<usize>() != length {
                return Err(invalid(format!(
                    "Split sizes {sizes:?} do not add up to the axis's {length}"
                )));
            }
            sizes
        }
        None => {
            if outputs == 0 {
                return Err(invalid("Split into no outputs"));
            }
            let piece = length.div_ceil(outputs);
            (0..outputs)
                .map(|k| length.saturating_sub(k * piece).min(piece))
                .collect()
        }
    };
    let mut start = 0;
    sizes
        .into_iter()
        .map(|size| {
            let piece = x.narrow(axis as isize, start, size);
            start += size;
            piece
        })
        .collect()
}

/// `Tile`: `x` repeated `repeats[k]` times along each axis `k`.
pub(super) fn tile(x: &DynTensor, repeats: &[i64]) -> Result<DynTensor> {
    if repeats.len() != x.rank() {
        return Err(invalid(format!(
            "Tile of a rank-{} input takes {} repeats, got {repeats:?}",
            x.rank(),
            x.rank()
        )));
    }
    // [d0, d1, ..] viewed as [1, d0, 1, d1, ..], broadcast to [r0, d0, r1, d1, ..], then
    // merged pairwise.
    let mut spread = Vec::with_capacity(2 * x.rank());
    let mut repeated = Vec::with_capacity(2 * x.rank());
    let mut tiled = Vec::with_capacity(x.rank());
    for (&dim, &times) in x.dims().iter().zip(repeats) {
        let times = usize::try_from(times).map_err(|_| invalid(format!("Tile repeats {times}")))?;
        spread.extend([1, dim]);
        repeated.extend([times, dim]);
        tiled.push(
            dim.checked_mul(times)
                .ok_or_else(|| invalid(format!("Tile of {:?} by {repeats:?}", x.dims())))?,
        );
    }
    crate::alloc::ensure_output("Tile", &tiled, x.dtype().size_in_bytes())?;
    x.reshape(&spread)?
        .broadcast_to(&repeated)?
        .contiguous()?
        .reshape(&tiled)
}

/// `Trilu`: the elements of each matrix (the last two axes) on and above the `k`-th
/// diagonal (`upper`) or on and below it, zeros elsewhere.
pub(super) fn trilu(x: &DynTensor, k: i64, upper: bool) -> Result<DynTensor> {
    if x.rank() < 2 {
        return Err(invalid(format!(
            "Trilu of a rank-{} input: it takes matrices",
            x.rank()
        )));
    }
    let (rows, cols) = (x.dims()[x.rank() - 2], x.dims()[x.rank() - 1]);
    crate::alloc::ensure_output("Trilu", &[rows, cols], 1)?;
    let kept: Vec<bool> = (0..rows * cols)
        .map(|at| {
            let offset = (at % cols) as i64 - (at / cols) as i64;
            if upper { offset >= k } else { offset <= k }
        })
        .collect();
    let kept = DynTensor::from_vec(kept, &[rows, cols])?.to(&x.device())?;
    let zero = DynTensor::zeros(&[], x.dtype())?.to(&x.device())?;
    DynTensor::where_(&kept, x, &zero)
}
