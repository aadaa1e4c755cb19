//! What a node of the tape holds: a backward record, behind a trait so that the tape names no
//! op. rumus's own ops record [`crate::ops::BackwardOp`] (the table of derivatives); records
//! of higher layers (a fused loss, an autocast product) and the checkpointed segment implement
//! the trait themselves. The node is one allocation either way: the record sits inline in the
//! `Arc` of its [`Node`], unsized to a trait object, never boxed on its own.

use super::node::GraphLinks;
use crate::error::Result;
use crate::tensor::DynTensor;

/// A backward record: what one recorded op kept for its gradient, and the formula.
///
/// Inputs are numbered in the order the forward op received them; `needs[i]` in
/// [`backward`](Self::backward) refers to that order. Records are plain data shared between
/// threads with the tensors that reach them, hence `Send + Sync`.
pub trait BackwardRecord: Send + Sync {
    /// The op's name, as error messages show it.
    fn name(&self) -> &'static str;

    /// Gradients of the op's inputs given the gradient of its output. `needs[i]` says whether
    /// input `i` wants one; formulas skip the work for the others.
    fn backward(&self, grad: &DynTensor, needs: &[bool]) -> Result<Vec<Option<DynTensor>>>;

    /// Hands the graph nodes that the tensors this record saved hold to `links`, so a
    /// dropping graph is freed iteratively instead of recursively. Called as the record's node
    /// drops; the record is not used again.
    fn take_graph(&mut self, links: &mut GraphLinks);
}
