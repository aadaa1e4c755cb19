//! Reductions over each row's entries: how the messages sent along a graph's edges combine
//! at their target (sum, mean, max), and the softmax over each row's entries (attention over
//! a node's incoming edges). Messages come one slice per entry, in the pattern's entry order.

use super::pattern::{Pattern, invalid};
use crate::autograd::{BackwardRecord, GraphLinks, record};
use crate::error::Result;
use crate::storage::Storage;
use crate::tensor::DynTensor;

/// How the messages of a row (a node's incoming edges) combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregation {
    /// Their sum (0 over no messages).
    Sum,
    /// Their mean (0 over no messages).
    Mean,
    /// Their maximum, feature by feature (0 over no messages, never -inf or NaN from an
    /// empty row); the gradient goes to the message that was largest.
    Max,
}

/// The messages (`[entries, ...]`, in `pattern`'s entry order) of each row combined by
/// `how`: `[rows, ...]`.
pub fn aggregate(pattern: &Pattern, messages: &DynTensor, how: Aggregation) -> Result<DynTensor> {
    check_messages(pattern, messages)?;
    match how {
        Aggregation::Sum => row_sums(pattern, messages),
        Aggregation::Mean => {
            let sums = row_sums(pattern, messages)?;
            let counts: Vec<f64> = pattern
                .row_counts()
                .iter()
                .map(|&c| c.max(1) as f64)
                .collect();
            let mut dims = vec![1; messages.rank()];
            dims[0] = counts.len();
            let counts = DynTensor::from_vec(counts, &dims)?
                .to_dtype(messages.dtype())?
                .to(&messages.device())?;
            sums.div(&counts)
        }
        Aggregation::Max => segment_max(pattern, messages),
    }
}

/// `softmax` of `scores` (`[entries, ...]`) over each row's entries, separately for every
/// trailing position (a head): each row's weights are positive and sum to 1.
pub fn softmax(pattern: &Pattern, scores: &DynTensor) -> Result<DynTensor> {
    check_messages(pattern, scores)?;
    // Shifting by each row's maximum changes nothing but the range of `exp`; the shift is
    // a constant to the gradient.
    let max = segment_max(pattern, &scores.detach())?;
    let rows = pattern.row_index();
    let weights = scores.sub(&max.index_select(0, rows)?)?.exp()?;
    let sums = row_sums(pattern, &weights)?;
    weights.div(&sums.index_select(0, rows)?)
}

fn check_messages(pattern: &Pattern, messages: &DynTensor) -> Result<()> {
    if messages.rank() == 0 || messages.dims()[0] != pattern.nnz() {
        return Err(invalid(format!(
            "a pattern of {} entries takes messages of [{}, ...], got {:?}",
            pattern.nnz(),
            pattern.nnz(),
            messages.dims()
        )));
    }
    Ok(())
}

/// Each row's sum: the messages added into zeros at their rows.
fn row_sums(pattern: &Pattern, messages: &DynTensor) -> Result<DynTensor> {
    let mut dims = messages.dims().to_vec();
    dims[0] = pattern.shape().0;
    let zeros = DynTensor::zeros_on(&dims, messages.dtype(), &messages.device())?;
    zeros.index_add(0, pattern.row_index(), messages)
}

/// Each row's maximum, recorded with the entry each came from.
fn segment_max(pattern: &Pattern, messages: &DynTensor) -> Result<DynTensor> {
    let (max, argmax) = Storage::segment_max(pattern.rows().row_ptr.operand(), messages.operand())?;
    let mut dims = messages.dims().to_vec();
    dims[0] = pattern.shape().0;
    let out = DynTensor::computed(max, &dims);
    let argmax = DynTensor::computed(argmax, &dims);
    Ok(record(out, &[messages], || SegmentMaxRecord {
        argmax,
        entries: pattern.nnz(),
    }))
}

/// What the gradient of a per-row maximum needs: where each maximum came from.
struct SegmentMaxRecord {
    /// The entry of each output element; `entries` for a row with none.
    argmax: DynTensor,
    entries: usize,
}

impl BackwardRecord for SegmentMaxRecord {
    fn name(&self) -> &'static str {
        "segment_max"
    }

    fn backward(&self, grad: &DynTensor, _needs: &[bool]) -> Result<Vec<Option<DynTensor>>> {
        // Rows with no entries point one past the last: their gradient lands in a spare
        // slice that is cut off.
        let mut dims = grad.dims().to_vec();
        dims[0] = self.entries + 1;
        let zeros = DynTensor::zeros_on(&dims, grad.dtype(), &grad.device())?;
        let routed = zeros.scatter_add(0, &self.argmax, grad)?;
        Ok(vec![Some(routed.narrow(0, 0, self.entries)?)])
    }

    fn take_graph(&mut self, _links: &mut GraphLinks) {}
}
