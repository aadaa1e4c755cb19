//! Masks that attention ops and layers build: made here, in `ops`, so the fused attention op
//! and `nn`'s layers share one definition.

use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::DynTensor;

/// `[T, S]` bool mask, `true` above the diagonal: query `i` may not attend key `j > i`.
pub fn causal_mask(t: usize, s: usize) -> Result<DynTensor> {
    crate::alloc::ensure_output("causal_mask", &[t, s], 1)?;
    if t == 0 || s == 0 {
        return DynTensor::zeros(&[t, s], DType::Bool);
    }
    let values: Vec<bool> = (0..t).flat_map(|i| (0..s).map(move |j| j > i)).collect();
    Ok(DynTensor::from_vec(values, &[t, s])?)
}
