//! Loss kernels as storage runs them.

use super::Storage;
use super::dispatch::{Operand, on_backend};
use crate::backend::Loss;
use crate::error::Result;

use triomphe::Arc;

impl Storage {
    /// The cross-entropy's gradient with respect to the logits, from each row's log-sum-exp
    /// and weight (`[.., 2]` pairs) and the target classes.
    pub(crate) fn cross_entropy_grad(
        logits: Operand<'_>,
        lse_and_weights: Operand<'_>,
        targets: Operand<'_>,
    ) -> Result<Arc<Storage>> {
        on_backend!(
            "cross_entropy",
            [logits, lse_and_weights, targets],
            |be, [x, pairs, targets]| be.cross_entropy_grad(x, pairs, targets)
        )
    }
}
