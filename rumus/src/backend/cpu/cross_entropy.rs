//! The fused cross-entropy's gradient on the host: one pass over the logits, and the CPU's
//! side of the [`Loss`] contract.

use rayon::prelude::*;

use super::backend::Cpu;
use super::buffer::{CpuBuffer, with_float};
use super::strided::map;
use crate::backend::contract::{Loss, Pointwise, Src};
use crate::element::{Element, Float};
use crate::error::{Error, Result};
use crate::shape::Layout;

impl Loss for Cpu {
    fn cross_entropy_grad(
        &self,
        logits: Src<'_, CpuBuffer>,
        lse_and_weights: Src<'_, CpuBuffer>,
        targets: Src<'_, CpuBuffer>,
    ) -> Result<CpuBuffer> {
        // Per row (N x d1 x ...): small.
        let pairs = to_f64(lse_and_weights)?;
        let CpuBuffer::I64(all_targets) = targets.memory else {
            return Err(Error::DType {
                op: "cross_entropy",
                expected: "i64 class indices",
                found: targets.dtype(),
            });
        };
        let targets = map(all_targets, targets.layout, |t| t);
        let dims = logits.dims();
        let rows = Rows {
            classes: dims[1],
            inner: dims[2..].iter().product(),
            pairs: &pairs,
            targets: &targets,
        };
        // Read where they are when contiguous, else from a copy.
        let copy;
        let (buffer, start) = if logits.layout.is_contiguous() {
            (logits.memory, logits.layout.offset())
        } else {
            copy = self.copy(logits)?;
            (&copy, 0)
        };
        let range = start..start + logits.numel();
        Ok(with_float!(buffer, "cross_entropy", |x: T| T::into_buffer(
            rows.gradient(&x[range])
        )))
    }
}

/// The elements of float operand `x` in row-major order, as `f64`.
fn to_f64(x: Src<'_, CpuBuffer>) -> Result<Vec<f64>> {
    let layout: &Layout = x.layout;
    Ok(with_float!(x.memory, "cross_entropy", |v: T| map(
        v,
        layout,
        T::to_f64
    )))
}

/// What the pass reads per row besides the logits.
struct Rows<'a> {
    classes: usize,
    /// Elements of the trailing dims (1 for `[N, C]`).
    inner: usize,
    /// Each row's log-sum-exp and weight.
    pairs: &'a [f64],
    targets: &'a [i64],
}

impl Rows<'_> {
    fn gradient<T: Float>(&self, x: &[T]) -> Vec<T> {
        x.par_iter()
            .enumerate()
            .map(|(i, &x)| {
                let label = (i / self.inner) % self.classes;
                let at = (i / (self.classes * self.inner)) * self.inner + i % self.inner;
                let hit = if self.targets[at] == label as i64 {
                    T::ONE
                } else {
                    T::ZERO
                };
                let (lse, weight) = (self.pairs[2 * at], self.pairs[2 * at + 1]);
                ((x - T::from_f64(lse)).exp() - hit) * T::from_f64(weight)
            })
            .collect()
    }
}
