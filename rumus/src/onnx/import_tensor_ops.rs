//! ONNX ops that make, cut or resample whole tensors: `Range` (`torch.arange` of a
//! dynamic length), `Split` (`q, k, v = qkv.split(...)`, `chunk`, `unbind`) and `Resize`
//! (`F.interpolate`, `nn.Upsample`: nearest and linear), run with rumus's views and
//! `index_select`. (`Tile` and `Trilu` are rumus's `repeat`, `triu` and `tril`.)

use super::import_ops::invalid;
use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::DynTensor;

/// `Range`: `start, start + delta, ...` while short of `limit`, that is
/// `max(ceil((limit - start) / delta), 0)` values of the inputs' type (three scalars).
/// Integer ranges are exact; their length is counted in 128 bits, so no file overflows it,
/// and the allocation check refuses a length past memory before any value is made.
pub(super) fn range(start: &DynTensor, limit: &DynTensor, delta: &DynTensor) -> Result<DynTensor> {
    let dtype = start.dtype();
    let scalars = [start, limit, delta];
    if scalars.iter().any(|t| t.numel() != 1 || t.dtype() != dtype) {
        return Err(invalid(format!(
            "Range of {:?}: start, limit and delta are single values of one type",
            scalars.map(|t| (t.dtype(), t.dims().to_vec()))
        )));
    }
    if dtype == DType::I64 {
        let [s, l, d] = scalars.map(|t| t.to_vec::<i64>().map(|v| i128::from(v[0])));
        let (s, l, d) = (s?, l?, d?);
        if d == 0 {
            return Err(invalid("Range with a delta of 0"));
        }
        // ceil((l - s) / d) for either sign: the truncated quotient, one up when a
        // remainder is left on the positive side
        let (q, r) = ((l - s) / d, (l - s) % d);
        let count = (q + i128::from(r != 0 && (r < 0) == (d < 0))).max(0);
        let count = usize::try_from(count).unwrap_or(usize::MAX);
        crate::alloc::ensure_output("Range", &[count], 8)?;
        let values = (0..count as i128).map(|i| (s + i * d) as i64).collect();
        return Ok(DynTensor::from_vec(values, &[count])?);
    }
    let [s, l, d] = scalars.map(|t| t.try_to_f64_vec().map(|v| v[0]));
    let (s, l, d) = (s?, l?, d?);
    let count = ((l - s) / d).ceil();
    if count.is_nan() || count == f64::INFINITY {
        return Err(invalid(format!("Range from {s} to {l} by {d}")));
    }
    // (a saturating cast: a length past memory is refused below)
    let count = count.max(0.0) as usize;
    crate::alloc::ensure_output("Range", &[count], 8)?;
    let values: Vec<f64> = (0..count).map(|i| s + i as f64 * d).collect();
    DynTensor::from_vec(values, &[count])?.to_dtype(dtype)
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

/// Where an output coordinate of `Resize` samples its input (ONNX's
/// `coordinate_transformation_mode`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Coordinates {
    HalfPixel,
    PytorchHalfPixel,
    Asymmetric,
    AlignCorners,
}

/// How `Resize` samples: the nearest element (rounded as ONNX's `nearest_mode` says), or a
/// linear blend of the two around the coordinate.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Sampling {
    NearestRoundPreferFloor,
    NearestRoundPreferCeil,
    NearestFloor,
    NearestCeil,
    Linear,
}

/// `Resize` of `x` to `sizes` (one per axis), each axis's input coordinate `scales[k]` times
/// smaller than its output one, one axis at a time (linear resampling is separable).
pub(super) fn resize(
    x: &DynTensor,
    sizes: &[usize],
    scales: &[f64],
    coordinates: Coordinates,
    sampling: Sampling,
) -> Result<DynTensor> {
    if sizes.len() != x.rank() || scales.len() != x.rank() {
        return Err(invalid(format!(
            "Resize of a rank-{} input to {sizes:?}: one size per axis",
            x.rank()
        )));
    }
    let mut out = x.clone();
    for (axis, (&size, &scale)) in sizes.iter().zip(scales).enumerate() {
        let input = x.dims()[axis];
        if size == input && scale == 1.0 {
            continue;
        }
        if input == 0 || size == 0 || !(scale.is_finite() && scale > 0.0) {
            return Err(invalid(format!(
                "Resize of an axis of {input} to {size} (scale {scale})"
            )));
        }
        let mut dims = out.dims().to_vec();
        dims[axis] = size;
        crate::alloc::ensure_output("Resize", &dims, x.dtype().size_in_bytes())?;
        let last = (input - 1) as f64;
        let source = |i: usize| -> f64 {
            let i = i as f64;
            match coordinates {
                Coordinates::HalfPixel => (i + 0.5) / scale - 0.5,
                Coordinates::PytorchHalfPixel if size > 1 => (i + 0.5) / scale - 0.5,
                Coordinates::PytorchHalfPixel => 0.0,
                Coordinates::Asymmetric => i / scale,
                Coordinates::AlignCorners if size > 1 => i * last / (size - 1) as f64,
                Coordinates::AlignCorners => 0.0,
            }
        };
        // The index lists and weights hold `size` values of 8 bytes each; an input with no
        // elements passes the result's check with any size, so they are checked themselves.
        crate::alloc::ensure_output("Resize", &[size], 8)?;
        let indices = |picked: Vec<i64>| DynTensor::from_vec(picked, &[size])?.to(&x.device());
        out = if sampling == Sampling::Linear {
            let at = |i: usize| source(i).clamp(0.0, last);
            let low: Vec<i64> = (0..size).map(|i| at(i).floor() as i64).collect();
            let high: Vec<i64> = low.iter().map(|&l| (l + 1).min(last as i64)).collect();
            let weights: Vec<f64> = low
                .iter()
                .enumerate()
                .map(|(i, &l)| at(i) - l as f64)
                .collect();
            let mut shape = vec![1; x.rank()];
            shape[axis] = size;
            let weights = DynTensor::from_vec(weights, &shape)?
                .to_dtype(x.dtype())?
                .to(&x.device())?;
            let (below, above) = (
                out.index_select(axis as isize, &indices(low)?)?,
                out.index_select(axis as isize, &indices(high)?)?,
            );
            below.add(&above.sub(&below)?.mul(&weights)?)?
        } else {
            let picked = (0..size)
                .map(|i| {
                    let c = source(i);
                    let rounded = match sampling {
                        Sampling::NearestRoundPreferFloor => (c - 0.5).ceil(),
                        Sampling::NearestRoundPreferCeil => (c + 0.5).floor(),
                        Sampling::NearestFloor => c.floor(),
                        _ => c.ceil(),
                    };
                    rounded.clamp(0.0, last) as i64
                })
                .collect();
            out.index_select(axis as isize, &indices(picked)?)?
        };
    }
    Ok(out)
}
