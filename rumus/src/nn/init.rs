//! Weight initialisation, in place, drawing from the global generator (`rumus::manual_seed`).
//! Fans follow PyTorch's `_calculate_fan_in_and_fan_out`: for `[out, in, k...]`,
//! `fan_in = in * prod(k)` and `fan_out = out * prod(k)`.

use crate::autograd::no_grad;
use crate::error::{Error, Result};
use crate::tensor::DynTensor;

/// `(fan_in, fan_out)` of a weight tensor of rank >= 2.
pub fn fans(t: &DynTensor) -> Result<(usize, usize)> {
    let dims = t.dims();
    if dims.len() < 2 {
        return Err(Error::InvalidArgument {
            op: "init",
            message: format!("fans need a weight of rank >= 2, got {dims:?}"),
        });
    }
    // Saturating: an empty weight's other dims may multiply past usize, and a fan that
    // large only ever divides.
    let receptive = dims[2..].iter().fold(1usize, |n, &d| n.saturating_mul(d));
    Ok((
        dims[1].saturating_mul(receptive),
        dims[0].saturating_mul(receptive),
    ))
}

/// `1 / sqrt(fan_in)`, the bound of PyTorch's default U(-bound, bound) init of layers'
/// weights and biases, and 0 for a layer without inputs (PyTorch's `if fan_in > 0 else 0`).
pub(crate) fn fan_in_bound(fan_in: usize) -> f64 {
    if fan_in == 0 {
        0.0
    } else {
        1.0 / (fan_in as f64).sqrt()
    }
}

/// Copies `values` (drawn on the host) into `t`, wherever `t` lives.
fn fill_with(t: &DynTensor, values: DynTensor) -> Result<()> {
    let _guard = no_grad();
    t.copy_(&values.to(&t.device())?)
}

/// Uniform in `[low, high)`.
pub fn uniform_(t: &DynTensor, low: f64, high: f64) -> Result<()> {
    fill_with(t, DynTensor::uniform(t.dims(), low, high, t.dtype())?)
}

/// Normal with `mean` and `std`.
pub fn normal_(t: &DynTensor, mean: f64, std: f64) -> Result<()> {
    fill_with(
        t,
        DynTensor::randn(t.dims(), t.dtype())?
            .mul_scalar(std)?
            .add_scalar(mean)?,
    )
}

/// Fills with zeros.
pub fn zeros_(t: &DynTensor) -> Result<()> {
    fill_with(t, t.zeros_like()?)
}

/// Fills with ones.
pub fn ones_(t: &DynTensor) -> Result<()> {
    fill_with(t, t.ones_like()?)
}

/// He initialisation for ReLU networks: U(-b, b), b = sqrt(6 / fan_in).
pub fn kaiming_uniform_(t: &DynTensor) -> Result<()> {
    let bound = (6.0 / fans(t)?.0 as f64).sqrt();
    uniform_(t, -bound, bound)
}

/// He initialisation: N(0, 2 / fan_in).
pub fn kaiming_normal_(t: &DynTensor) -> Result<()> {
    normal_(t, 0.0, (2.0 / fans(t)?.0 as f64).sqrt())
}

/// Glorot: U(-b, b), b = sqrt(6 / (fan_in + fan_out)).
pub fn xavier_uniform_(t: &DynTensor) -> Result<()> {
    let (fan_in, fan_out) = fans(t)?;
    let bound = (6.0 / (fan_in + fan_out) as f64).sqrt();
    uniform_(t, -bound, bound)
}

/// Glorot: N(0, 2 / (fan_in + fan_out)).
pub fn xavier_normal_(t: &DynTensor) -> Result<()> {
    let (fan_in, fan_out) = fans(t)?;
    normal_(t, 0.0, (2.0 / (fan_in + fan_out) as f64).sqrt())
}
