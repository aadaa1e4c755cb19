//! Gradient checking: analytic gradients against central finite differences, in `f64`.
//!
//! A function with a tensor output is reduced to the scalar `sum(f(x) * v)` with a fixed
//! random cotangent `v`; its gradient is the vector-Jacobian product `J^T v`, which is
//! compared element by element with `(L(x + eps e_i) - L(x - eps e_i)) / 2 eps`.

use super::engine::grad;
use super::grad_mode::no_grad;
use crate::dtype::DType;
use crate::error::Error;
use crate::rng::Generator;
use crate::tensor::DynTensor;

/// Step and tolerances of [`gradcheck`].
#[derive(Debug, Clone, Copy)]
pub struct GradcheckOptions {
    /// Finite-difference step.
    pub eps: f64,
    /// Absolute tolerance (default as PyTorch's gradcheck: 1e-5).
    pub atol: f64,
    /// Relative tolerance times the numeric value (default as PyTorch's: 1e-3).
    pub rtol: f64,
    /// Seed of the random cotangent.
    pub seed: u64,
}

impl Default for GradcheckOptions {
    fn default() -> Self {
        GradcheckOptions {
            eps: 1e-6,
            atol: 1e-5,
            rtol: 1e-3,
            seed: 17,
        }
    }
}

/// Why a gradient check failed.
#[derive(Debug, thiserror::Error)]
pub enum GradcheckError {
    /// The function, the backward pass or building the inputs failed.
    #[error(transparent)]
    Op(#[from] Error),
    /// An input is not `f64`.
    #[error(
        "gradcheck needs f64 inputs (finite differences in f32 are too coarse); input {input} is {dtype}"
    )]
    NotF64 {
        /// Position of the input in `inputs`.
        input: usize,
        /// Its dtype.
        dtype: DType,
    },
    /// An analytic gradient's shape differs from its input's shape.
    #[error(
        "the gradient of input {input} has shape {found:?}, but the input has shape {expected:?}"
    )]
    GradShape {
        /// Position of the input in `inputs`.
        input: usize,
        /// Shape of the input.
        expected: Vec<usize>,
        /// Shape of the gradient.
        found: Vec<usize>,
    },
    /// An analytic and a numeric gradient element differ by more than the tolerance.
    #[error(
        "gradient of input {input} differs at element {index}: analytic {analytic:.8e}, numeric {numeric:.8e} (allowed {allowed:.2e})"
    )]
    Mismatch {
        /// Position of the input in `inputs`.
        input: usize,
        /// Flat index of the element, in contiguous order.
        index: usize,
        /// The gradient from the backward pass.
        analytic: f64,
        /// The central finite difference.
        numeric: f64,
        /// The allowed difference, `atol + rtol * |numeric|`.
        allowed: f64,
    },
}

fn projected_loss(
    f: &impl Fn(&[DynTensor]) -> crate::Result<DynTensor>,
    inputs: &[DynTensor],
    cotangent: &mut Option<DynTensor>,
    seed: u64,
) -> crate::Result<DynTensor> {
    let out = f(inputs)?;
    let v = match cotangent {
        Some(v) => v.clone(),
        None => {
            let v = DynTensor::randn_with(
                out.dims(),
                0.0,
                1.0,
                out.dtype(),
                &mut Generator::new(seed),
            )?;
            *cotangent = Some(v.clone());
            v
        }
    };
    out.mul(&v)?.sum_all()
}

/// Checks the analytic gradient of `f` with respect to every tensor of `inputs` (all `f64`)
/// against central finite differences. `f` receives fresh leaf tensors with the inputs'
/// values; build non-contiguous views or broadcasts inside it to check those paths.
pub fn gradcheck(
    f: impl Fn(&[DynTensor]) -> crate::Result<DynTensor>,
    inputs: &[DynTensor],
    options: GradcheckOptions,
) -> Result<(), GradcheckError> {
    let values: Vec<Vec<f64>> = inputs
        .iter()
        .enumerate()
        .map(|(i, x)| {
            if x.dtype() == DType::F64 {
                Ok(x.try_to_f64_vec()?)
            } else {
                Err(GradcheckError::NotF64 {
                    input: i,
                    dtype: x.dtype(),
                })
            }
        })
        .collect::<Result<_, _>>()?;
    let leaves_from = |values: &[Vec<f64>]| -> crate::Result<Vec<DynTensor>> {
        values
            .iter()
            .zip(inputs)
            .map(|(v, x)| Ok(DynTensor::from_vec(v.clone(), x.dims())?))
            .collect()
    };

    let leaves: Vec<DynTensor> = leaves_from(&values)?
        .into_iter()
        .map(DynTensor::requires_grad_)
        .collect::<crate::Result<_>>()?;
    let mut cotangent = None;
    let loss = projected_loss(&f, &leaves, &mut cotangent, options.seed)?;
    let analytic = grad(&[&loss], &leaves.iter().collect::<Vec<_>>(), false)?;

    let _guard = no_grad();
    for (input, (leaf, analytic)) in leaves.iter().zip(&analytic).enumerate() {
        if analytic.dims() != leaf.dims() {
            return Err(GradcheckError::GradShape {
                input,
                expected: leaf.dims().to_vec(),
                found: analytic.dims().to_vec(),
            });
        }
        let analytic = analytic.try_to_f64_vec()?;
        for index in 0..values[input].len() {
            let mut at = |delta: f64| -> crate::Result<f64> {
                let mut shifted = values.clone();
                shifted[input][index] += delta;
                projected_loss(&f, &leaves_from(&shifted)?, &mut cotangent, options.seed)?
                    .item::<f64>()
            };
            let numeric = (at(options.eps)? - at(-options.eps)?) / (2.0 * options.eps);
            let allowed = options.atol + options.rtol * numeric.abs();
            // Written so that a NaN on either side fails the check.
            let within = (analytic[index] - numeric).abs() <= allowed;
            if !within {
                return Err(GradcheckError::Mismatch {
                    input,
                    index,
                    analytic: analytic[index],
                    numeric,
                    allowed,
                });
            }
        }
    }
    Ok(())
}
