//! ONNX ops that cut, repeat, enlarge or mask whole tensors: `Split` (`q, k, v =
//! qkv.split(...)`, `chunk`, `unbind`), `Tile` (`repeat`), `Resize` (nearest-neighbour
//! upsampling by whole factors) and `Trilu` (the causal masks `torch.triu` / `torch.tril`
//! build), run with rumus's views and `where`.

use super::import_ops::invalid;
use crate::error::Result;
use crate::tensor::DynTensor;

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
            let total = sizes.iter().try_fold(0usize, |sum, &s| sum.checked_add(s));
            if total != Some(length) {
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
    let times = repeats
        .iter()
        .map(|&t| usize::try_from(t).map_err(|_| invalid(format!("Tile repeats {repeats:?}"))))
        .collect::<Result<Vec<_>>>()?;
    repeated(x, &times, Repeat::WholeAxis, "Tile")
}

/// How [`repeated`] repeats an axis.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Repeat {
    /// The axis's elements in order, that many times over (`Tile`).
    WholeAxis,
    /// Each element that many times in a row (nearest-neighbour upsampling).
    EachElement,
}

/// `x` with each axis `k` repeated `times[k]` times as `how` says: `[d0, d1, ..]` viewed as
/// `[1, d0, 1, d1, ..]` (or `[d0, 1, d1, 1, ..]`), broadcast to the repeats, and merged.
fn repeated(x: &DynTensor, times: &[usize], how: Repeat, op: &str) -> Result<DynTensor> {
    if times.len() != x.rank() {
        return Err(invalid(format!(
            "{op} of a rank-{} input takes {} factors, got {times:?}",
            x.rank(),
            x.rank()
        )));
    }
    let mut spread = Vec::with_capacity(2 * x.rank());
    let mut broadcast = Vec::with_capacity(2 * x.rank());
    let mut merged = Vec::with_capacity(x.rank());
    for (&dim, &t) in x.dims().iter().zip(times) {
        let (pair, unit) = match how {
            Repeat::WholeAxis => ([t, dim], [1, dim]),
            Repeat::EachElement => ([dim, t], [dim, 1]),
        };
        spread.extend(unit);
        broadcast.extend(pair);
        merged.push(
            dim.checked_mul(t)
                .ok_or_else(|| invalid(format!("{op} of {:?} by {times:?}", x.dims())))?,
        );
    }
    crate::alloc::ensure_output(op, &merged, x.dtype().size_in_bytes())?;
    x.reshape(&spread)?
        .broadcast_to(&broadcast)?
        .contiguous()?
        .reshape(&merged)
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

/// `Resize` in `nearest` mode by a whole factor along each axis (`F.interpolate(x,
/// scale_factor=2)`, `nn.Upsample`): every element repeated `factors[k]` times along axis
/// `k`. The caller checks that the coordinate and rounding modes give exactly that.
pub(super) fn resize_nearest(x: &DynTensor, factors: &[usize]) -> Result<DynTensor> {
    repeated(x, factors, Repeat::EachElement, "Resize")
}
