//! How much an ONNX graph may ask for. A file decides every shape, attribute and count of
//! the work it describes, so a few hundred bytes can ask for terabytes (an `Expand` to
//! `[2^40]`), hours (a `MatMul` of broadcast views with `2^40` multiply-adds and no memory to
//! speak of) or ranks of thousands. [`Limits`] bounds each of those, with defaults far above
//! what real models (GPT-, BERT-, ResNet- and MobileNet-style exports) use, and every check
//! happens before the work or the allocation it guards.
//!
//! Elementwise ops, reductions, gathers and resizing do work in proportion to the elements
//! they read and write, so bounding the elements of every tensor (views included: a
//! broadcast view costs no memory, but each op reading it does work per element) bounds
//! them. Products (`MatMul`, `Gemm`, `Conv`, `ConvTranspose`) and pools do more work per
//! element; they are checked against [`Limits::max_multiply_adds`] from their shapes.

use crate::alloc::Ceiling;

/// The most an ONNX graph may ask for, checked when it is loaded ([`OnnxModel`]'s
/// `load_with_limits`, `from_bytes_with_limits`) and while it runs.
///
/// ```
/// let strict = rumus::onnx::Limits {
///     max_elements: 1 << 24,
///     ..rumus::onnx::Limits::default()
/// };
/// assert!(strict.max_elements < rumus::onnx::Limits::default().max_elements);
/// ```
///
/// [`OnnxModel`]: super::OnnxModel
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Elements of any tensor a node produces, views included, and of any allocation an op
    /// makes while running (results, scratch, index lists). Default `2^32`.
    pub max_elements: usize,
    /// Bytes of any one allocation an op makes while the graph runs. Default 16 GiB.
    pub max_allocation_bytes: usize,
    /// Multiply-adds (for pools, comparisons or additions) of one `MatMul`, `Gemm`, `Conv`,
    /// `ConvTranspose`, `MaxPool` or `AveragePool`. Default `2^38` (about 2.7 * 10^11; a
    /// BERT-large feed-forward product over 32 sequences of 512 tokens is 7 * 10^10).
    pub max_multiply_adds: u64,
    /// Nodes of the graph. Default `2^20`.
    pub max_nodes: usize,
    /// Graph inputs, counting those that name initializers (older exporters list every
    /// weight). Default `2^16`.
    pub max_inputs: usize,
    /// Rank of any tensor: the graph's inputs, its initializers and what its nodes produce.
    /// Default 64.
    pub max_rank: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_elements: 1 << 32,
            max_allocation_bytes: 16 << 30,
            max_multiply_adds: 1 << 38,
            max_nodes: 1 << 20,
            max_inputs: 1 << 16,
            max_rank: 64,
        }
    }
}

impl Limits {
    /// The allocation ceiling of a run under these limits.
    pub(super) fn ceiling(&self) -> Ceiling {
        Ceiling {
            elements: self.max_elements,
            bytes: self.max_allocation_bytes,
            elements_setting: "rumus::onnx::Limits::max_elements",
            bytes_setting: "rumus::onnx::Limits::max_allocation_bytes",
        }
    }

    /// Fails, saying which limit, when a tensor of `dims` (`what`: "the result", "initializer
    /// \"w\"") is past the rank or element limit.
    pub(super) fn check_dims(&self, what: &str, dims: &[usize]) -> Result<(), String> {
        if dims.len() > self.max_rank {
            return Err(format!(
                "{what} has rank {}, over the limit of {} (Limits::max_rank)",
                dims.len(),
                self.max_rank
            ));
        }
        let elements = dims.iter().fold(1usize, |n, &d| n.saturating_mul(d));
        if elements > self.max_elements {
            return Err(format!(
                "{what} of shape {dims:?} has {} elements, over the limit of {} \
                 (Limits::max_elements)",
                saturated(elements as u64),
                self.max_elements
            ));
        }
        Ok(())
    }

    /// Fails when `op` needs more than [`max_multiply_adds`](Self::max_multiply_adds).
    pub(super) fn check_work(&self, op: &str, multiply_adds: u64) -> Result<(), String> {
        if multiply_adds > self.max_multiply_adds {
            return Err(format!(
                "{op} needs {} multiply-adds, over the limit of {} (Limits::max_multiply_adds)",
                saturated(multiply_adds),
                self.max_multiply_adds
            ));
        }
        Ok(())
    }

    /// Fails when a count of the graph (`nodes`, `inputs`) is past its `limit`.
    pub(super) fn check_count(
        what: &str,
        count: usize,
        limit: usize,
        setting: &str,
    ) -> Result<(), String> {
        if count > limit {
            return Err(format!(
                "the graph has {count} {what}, over the limit of {limit} (Limits::{setting})"
            ));
        }
        Ok(())
    }
}

/// A count computed with saturating arithmetic, shown as such when it saturated.
fn saturated(count: u64) -> String {
    if count >= usize::MAX as u64 {
        "more than 2^64".to_string()
    } else {
        count.to_string()
    }
}

/// The product of `factors`, saturating at `u64::MAX`.
pub(super) fn product(factors: &[usize]) -> u64 {
    factors
        .iter()
        .fold(1u64, |n, &f| n.saturating_mul(f as u64))
}

/// Multiply-adds of ONNX `MatMul` (numpy's `matmul`) of operands of dims `a` and `b`: a
/// rank-1 operand is a row (`a`) or a column (`b`), leading axes broadcast.
pub(super) fn matmul_multiply_adds(a: &[usize], b: &[usize]) -> u64 {
    let (m, k) = match a {
        [] => (1, 1),
        [k] => (1, *k),
        [.., m, k] => (*m, *k),
    };
    let n = match b {
        [] | [_] => 1,
        [.., n] => *n,
    };
    let batch = |dims: &[usize]| dims[..dims.len().saturating_sub(2)].to_vec();
    let (batch_a, batch_b) = (batch(a), batch(b));
    let rank = batch_a.len().max(batch_b.len());
    let at = |dims: &[usize], k: usize| (k + dims.len()).checked_sub(rank).map_or(1, |i| dims[i]);
    let batches: Vec<usize> = (0..rank)
        .map(|k| at(&batch_a, k).max(at(&batch_b, k)))
        .collect();
    product(&batches).saturating_mul(product(&[m, k, n]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_count_numpy_matmul_work() {
        // [3, 1, 2, 4] @ [5, 4, 6]: batch [3, 5], 2 x 6 outputs of 4 terms each
        assert_eq!(
            matmul_multiply_adds(&[3, 1, 2, 4], &[5, 4, 6]),
            3 * 5 * 2 * 4 * 6
        );
        assert_eq!(matmul_multiply_adds(&[4], &[4]), 4);
        assert_eq!(matmul_multiply_adds(&[2, 4], &[4]), 8);
        let huge = matmul_multiply_adds(&[1 << 40, 1 << 40], &[1 << 40, 1 << 40]);
        assert_eq!(huge, u64::MAX);
    }
}
