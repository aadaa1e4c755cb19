//! Activation checkpointing: a segment of the forward pass keeps only its inputs for the
//! backward pass and runs again when its gradient is needed, trading one extra forward of the
//! segment for not holding its intermediate activations (PyTorch's
//! `torch.utils.checkpoint`). Deep models whose activations do not fit wrap each block.
//!
//! The segment is one record on the tape. Its forward runs once with recording on, on
//! detached copies of the inputs, to learn which parameters it reads; that graph is dropped
//! before [`checkpoint`] returns, so between the forward and the backward pass only the
//! segment's inputs and output stay alive. The backward pass runs the segment again with the
//! random generator put back where it was, so dropout drops the same elements, and
//! back-propagates the output's gradient through the fresh graph to the inputs and the
//! parameters.
//!
//! ```
//! use rumus::DynTensor;
//! use rumus::autograd::checkpoint;
//!
//! # fn main() -> rumus::Result<()> {
//! let w = DynTensor::from_vec(vec![0.5f32, -1.0, 2.0, 0.25], &[2, 2])?.requires_grad_()?;
//! let x = DynTensor::from_vec(vec![1.0f32, 2.0], &[1, 2])?.requires_grad_()?;
//! let block = {
//!     let w = w.clone();
//!     move |inputs: &[DynTensor]| inputs[0].matmul(&w)?.tanh()?.matmul(&w)
//! };
//! let y = checkpoint(&[&x], block)?;
//! let grads = y.sum_all()?.backward()?;
//! assert_eq!(grads.grad(&w)?.dims(), [2, 2]);
//! assert_eq!(grads.grad(&x)?.dims(), [1, 2]);
//! # Ok(())
//! # }
//! ```

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::engine::gradients_of_ids;
use super::grad_mode::{enable_grad, is_grad_enabled};
use super::node::{Edge, Edges, GraphLinks, Saved, TensorId, attach_edges, edge_to};
use super::record::BackwardRecord;
use crate::error::{AutogradError, Result, ShapeError};
use crate::rng::{self, Generator};
use crate::tensor::DynTensor;

/// A checkpointed segment: a function of the segment's inputs. It may read any tensor it
/// captured (parameters); it must compute the same thing each time it is called.
pub type Segment = dyn Fn(&[DynTensor]) -> Result<DynTensor> + Send + Sync;

/// What the backward pass needs to run a segment again.
pub struct CheckpointRecord {
    segment: Arc<Segment>,
    /// The segment's inputs, detached (their graph stays reachable through the edges).
    inputs: Vec<Saved>,
    /// The process-wide generator as the segment's forward found it.
    generator: Generator,
    /// The leaves the segment read besides its inputs (parameters), in edge order after the
    /// inputs.
    parameters: Vec<TensorId>,
}

impl BackwardRecord for CheckpointRecord {
    fn name(&self) -> &'static str {
        "checkpoint"
    }

    fn backward(&self, grad: &DynTensor, needs: &[bool]) -> Result<Vec<Option<DynTensor>>> {
        checkpoint_backward(self, grad, needs)
    }

    fn take_graph(&mut self, links: &mut GraphLinks) {
        self.inputs
            .iter_mut()
            .for_each(|saved| links.push_saved(saved));
    }
}

/// `segment(inputs)`, recorded so that the backward pass runs `segment` again instead of
/// keeping its intermediate tensors. Under `no_grad`, or when nothing the segment reads
/// requires a gradient, it is a plain call.
///
/// Parameters the segment captured get their gradients as if it had not been checkpointed.
/// A backward pass that is itself recorded (`create_graph`) cannot go through a checkpointed
/// segment: that is an error, not a silently detached gradient.
pub fn checkpoint<F>(inputs: &[&DynTensor], segment: F) -> Result<DynTensor>
where
    F: Fn(&[DynTensor]) -> Result<DynTensor> + Send + Sync + 'static,
{
    let owned: Vec<DynTensor> = inputs.iter().map(|t| (*t).clone()).collect();
    if !is_grad_enabled() {
        return segment(&owned);
    }
    let generator = rng::global_state();
    let detached = detached_copies(&owned, inputs.iter().map(|t| t.requires_grad()))?;
    let output = segment(&detached)?;
    let Some(meta) = output.grad_meta() else {
        return Ok(output);
    };
    if meta.node.is_none() {
        // The segment returned one of its inputs or a parameter unchanged: nothing to save,
        // and a copy of an input must not stand in for the input itself.
        drop(output);
        return segment(&owned);
    }
    let own_ids: HashSet<TensorId> = detached.iter().filter_map(DynTensor::id).collect();
    let parameters: Vec<TensorId> = leaves_of(&output)
        .into_iter()
        .filter(|id| !own_ids.contains(id))
        .collect();
    let mut edges: Edges = inputs.iter().map(|t| edge_to(t)).collect();
    edges.extend(parameters.iter().map(|&id| Some(Edge { id, node: None })));
    let record = CheckpointRecord {
        segment: Arc::new(segment),
        inputs: detached.iter().map(|t| Saved::new(&t.detach())).collect(),
        generator,
        parameters,
    };
    Ok(attach_edges(output.detach(), edges, record))
}

/// Copies of `inputs` cut from their graph, tracked (as fresh leaves) where the original was.
fn detached_copies(
    inputs: &[DynTensor],
    tracked: impl Iterator<Item = bool>,
) -> Result<Vec<DynTensor>> {
    inputs
        .iter()
        .zip(tracked)
        .map(|(t, tracked)| {
            if tracked {
                t.detach().requires_grad_()
            } else {
                Ok(t.detach())
            }
        })
        .collect()
}

/// The ids of the leaves `output`'s graph reaches, in the order first met.
fn leaves_of(output: &DynTensor) -> Vec<TensorId> {
    let mut leaves = Vec::new();
    let mut seen = HashSet::new();
    let mut stack: Vec<_> = output
        .grad_meta()
        .and_then(|meta| meta.node.clone())
        .into_iter()
        .collect();
    while let Some(node) = stack.pop() {
        for edge in node.inputs.iter().flatten() {
            if !seen.insert(edge.id) {
                continue;
            }
            match &edge.node {
                Some(child) => stack.push(child.clone()),
                None => leaves.push(edge.id),
            }
        }
    }
    leaves
}

/// Puts the process-wide generator back when dropped.
struct RestoreGenerator(Option<Generator>);

impl Drop for RestoreGenerator {
    fn drop(&mut self) {
        if let Some(state) = self.0.take() {
            rng::set_global_state(state);
        }
    }
}

/// The gradients of a checkpointed segment's inputs and parameters: the segment runs again,
/// with the generator as its first run found it, and `grad` flows back through the new
/// graph.
fn checkpoint_backward(
    record: &CheckpointRecord,
    grad: &DynTensor,
    needs: &[bool],
) -> Result<Vec<Option<DynTensor>>> {
    if is_grad_enabled() {
        return Err(AutogradError::CheckpointDoubleBackward.into());
    }
    let saved = record
        .inputs
        .iter()
        .map(|s| s.get("checkpoint").cloned())
        .collect::<Result<Vec<_>>>()?;
    let (input_needs, parameter_needs) = needs.split_at(record.inputs.len());
    let fresh = detached_copies(&saved, input_needs.iter().copied())?;
    let output = {
        let _generator = RestoreGenerator(Some(rng::global_state()));
        rng::set_global_state(record.generator.clone());
        let _recording = enable_grad();
        (record.segment)(&fresh)?
    };
    if output.dims() != grad.dims() {
        return Err(ShapeError::Invalid {
            context: "checkpoint".into(),
            message: format!(
                "the segment returned shape {:?} when run again for the backward pass, but \
                 {:?} the first time; a checkpointed segment must compute the same thing on \
                 every call",
                output.dims(),
                grad.dims()
            ),
        }
        .into());
    }
    let wanted: Vec<Option<TensorId>> = fresh
        .iter()
        .zip(input_needs)
        .map(|(t, &need)| t.id().filter(|_| need))
        .chain(
            record
                .parameters
                .iter()
                .zip(parameter_needs)
                .map(|(&id, &need)| need.then_some(id)),
        )
        .collect();
    let mut grads: HashMap<TensorId, DynTensor> = if output.requires_grad() {
        gradients_of_ids(&output, grad, &wanted.iter().flatten().copied().collect())?
    } else {
        HashMap::new()
    };
    Ok(wanted
        .iter()
        .map(|id| id.and_then(|id| grads.remove(&id)))
        .collect())
}
