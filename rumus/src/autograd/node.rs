//! Graph records. Each op that produces a tracked tensor attaches one [`Node`]: a closed
//! [`BackwardOp`] enum record plus edges to its inputs. Nodes are owned by the tensors that
//! can still reach them, so a forward pass that is never back-propagated frees its graph
//! when its tensors drop, and two losses from one forward share the same nodes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::backward_op::BackwardOp;
use super::grad_mode::is_grad_enabled;
use crate::error::{AutogradError, Result};
use crate::tensor::DynTensor;

/// Process-wide identity of a tensor on the graph. Ids come from one atomic counter, so a
/// model built on one thread can be trained on another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TensorId(u64);

impl TensorId {
    fn fresh() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        TensorId(NEXT.fetch_add(1, Ordering::Relaxed))
    }

    pub fn get(self) -> u64 {
        self.0
    }
}

/// Autograd metadata of a tensor that requires a gradient.
#[derive(Clone)]
pub(crate) struct GradMeta {
    pub id: TensorId,
    /// The record that produced the tensor; `None` for leaves (parameters).
    pub node: Option<Arc<Node>>,
}

impl GradMeta {
    pub fn leaf() -> Self {
        GradMeta {
            id: TensorId::fresh(),
            node: None,
        }
    }
}

/// Where an input's gradient goes.
pub(crate) struct Edge {
    pub id: TensorId,
    pub node: Option<Arc<Node>>,
}

static LIVE_NODES: AtomicUsize = AtomicUsize::new(0);

/// Number of graph records alive in this process. Tests use it to show that the graph of
/// forward passes that are never back-propagated is freed.
pub fn live_nodes() -> usize {
    LIVE_NODES.load(Ordering::Relaxed)
}

/// One backward record: the op and, per input, where its gradient flows (`None` when that
/// input needs no gradient).
pub struct Node {
    pub(crate) op: BackwardOp,
    pub(crate) inputs: Vec<Option<Edge>>,
}

impl Node {
    /// Detaches this record's children: its input edges and the graph nodes of the tensors it
    /// saved.
    fn take_children(&mut self) -> Vec<Arc<Node>> {
        let from_edges = self.inputs.drain(..).flatten().filter_map(|edge| edge.node);
        let from_saved = self
            .op
            .take_saved()
            .into_iter()
            .filter_map(DynTensor::into_graph_node);
        from_edges.chain(from_saved).collect()
    }
}

impl Drop for Node {
    /// Frees long chains iteratively; recursive drops would overflow the stack on deep
    /// graphs (a long unrolled recurrence, thousands of chained ops).
    fn drop(&mut self) {
        LIVE_NODES.fetch_sub(1, Ordering::Relaxed);
        let mut stack = self.take_children();
        while let Some(node) = stack.pop() {
            if let Ok(mut owned) = Arc::try_unwrap(node) {
                stack.extend(owned.take_children());
            }
        }
    }
}

/// Attaches `output` to the graph when recording is on and some input requires a gradient.
/// `op` is built lazily so untracked calls allocate nothing.
pub(crate) fn record(
    output: DynTensor,
    inputs: &[&DynTensor],
    op: impl FnOnce() -> BackwardOp,
) -> DynTensor {
    if !is_grad_enabled() || !inputs.iter().any(|t| t.requires_grad()) {
        return output;
    }
    let edges = inputs
        .iter()
        .map(|t| {
            t.grad_meta().map(|meta| Edge {
                id: meta.id,
                node: meta.node.clone(),
            })
        })
        .collect();
    LIVE_NODES.fetch_add(1, Ordering::Relaxed);
    let node = Arc::new(Node {
        op: op(),
        inputs: edges,
    });
    output.with_grad_meta(GradMeta {
        id: TensorId::fresh(),
        node: Some(node),
    })
}

/// A tensor kept for the backward pass together with the version of its storage at the time,
/// so a later in-place write is detected instead of producing a wrong gradient.
pub struct Saved {
    tensor: DynTensor,
    version: u64,
}

impl Saved {
    pub(crate) fn new(tensor: &DynTensor) -> Self {
        Saved {
            tensor: tensor.clone(),
            version: tensor.version(),
        }
    }

    pub(crate) fn into_tensor(self) -> DynTensor {
        self.tensor
    }

    /// The saved tensor, or [`AutogradError::VersionMismatch`] if it changed since.
    pub(crate) fn get(&self, op: &'static str) -> Result<&DynTensor> {
        let current = self.tensor.version();
        if current != self.version {
            return Err(AutogradError::VersionMismatch {
                op,
                saved: self.version,
                current,
            }
            .into());
        }
        Ok(&self.tensor)
    }
}
