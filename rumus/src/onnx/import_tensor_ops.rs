//! ONNX ops that cut or enlarge whole tensors: `Split` (`q, k, v = qkv.split(...)`, `chunk`,
//! `unbind`) and `Resize` (nearest-neighbour upsampling by whole factors), run with rumus's
//! views. (`Tile` and `Trilu` are rumus's `repeat`, `triu` and `tril`.)

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

/// `x` with each element repeated `times[k]` times in a row along each axis `k`:
/// `[d0, d1, ..]` viewed as `[d0, 1, d1, 1, ..]`, broadcast to `[d0, t0, d1, t1, ..]`, merged.
fn each_element_repeated(x: &DynTensor, times: &[usize]) -> Result<DynTensor> {
    if times.len() != x.rank() {
        return Err(invalid(format!(
            "Resize of a rank-{} input takes {} factors, got {times:?}",
            x.rank(),
            x.rank()
        )));
    }
    let spread: Vec<usize> = x.dims().iter().flat_map(|&d| [d, 1]).collect();
    let broadcast: Vec<usize> = x
        .dims()
        .iter()
        .zip(times)
        .flat_map(|(&d, &t)| [d, t])
        .collect();
    let merged = x
        .dims()
        .iter()
        .zip(times)
        .map(|(&d, &t)| d.checked_mul(t))
        .collect::<Option<Vec<usize>>>()
        .ok_or_else(|| invalid(format!("Resize of {:?} by {times:?}", x.dims())))?;
    crate::alloc::ensure_output("Resize", &merged, x.dtype().size_in_bytes())?;
    x.reshape(&spread)?
        .broadcast_to(&broadcast)?
        .contiguous()?
        .reshape(&merged)
}

/// `Resize` in `nearest` mode by a whole factor along each axis (`F.interpolate(x,
/// scale_factor=2)`, `nn.Upsample`): every element repeated `factors[k]` times along axis
/// `k`. The caller checks that the coordinate and rounding modes give exactly that.
pub(super) fn resize_nearest(x: &DynTensor, factors: &[usize]) -> Result<DynTensor> {
    each_element_repeated(x, factors)
}
