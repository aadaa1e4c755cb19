//! Graph records. Each op that produces a tracked tensor attaches one [`Node`]: edges to its
//! inputs plus a [`BackwardRecord`] (for rumus's ops, the closed `ops::BackwardOp` enum). Nodes are owned by the tensors that
//! can still reach them, so a forward pass that is never back-propagated frees its graph
//! when its tensors drop, and two losses from one forward share the same nodes.

use std::cell::Cell;
use std::mem::MaybeUninit;
use std::ptr::addr_of_mut;
use std::sync::atomic::{AtomicU64, Ordering};
use triomphe::Arc;
use unsize::{CoerceUnsize, Coercion};

use smallvec::SmallVec;

use super::grad_mode::is_grad_enabled;
use super::record::BackwardRecord;
use crate::error::{AutogradError, Result};
use crate::live_counts::{self, Count};
use crate::tensor::DynTensor;

/// Process-wide identity of a tensor on the graph. Ids come from one atomic counter, so a
/// model built on one thread can be trained on another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TensorId(u64);

impl TensorId {
    /// A new id. Each thread takes a block of ids from the shared counter and hands them out
    /// one by one: every tracked op needs an id, and an atomic add per op is a visible share of
    /// a small op's cost. Ids stay unique across threads; they are keys, not a clock.
    fn fresh() -> Self {
        const BLOCK: u64 = 1024;
        static NEXT_BLOCK: AtomicU64 = AtomicU64::new(1);
        thread_local! {
            /// The next id of this thread's block and the end of the block.
            static BLOCK_LEFT: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
        }
        BLOCK_LEFT.with(|left| {
            let (mut next, mut end) = left.get();
            if next == end {
                next = NEXT_BLOCK.fetch_add(BLOCK, Ordering::Relaxed);
                end = next + BLOCK;
            }
            left.set((next + 1, end));
            TensorId(next)
        })
    }

    /// The id as a number, as error messages and debug output show it.
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

/// Number of graph records alive in this process. Tests use it to show that the graph of
/// forward passes that are never back-propagated is freed.
pub fn live_nodes() -> usize {
    live_counts::total(Count::GraphNodes)
}

/// Where the gradients of one record's inputs go; inline for up to three inputs (every op
/// but concatenation), so recording allocates no list.
pub(crate) type Edges = SmallVec<[Option<Edge>; 3]>;

/// One backward record: per input, where its gradient flows (`None` when that input needs no
/// gradient), and the op's record. Made as `Node<R>` for the op's own record type and held as
/// `Node<dyn BackwardRecord>` (the default): the record lives inline in the node's one
/// allocation, so recording allocates nothing more.
pub struct Node<R: BackwardRecord + ?Sized = dyn BackwardRecord> {
    pub(crate) inputs: Edges,
    pub(crate) op: R,
}

impl<R: BackwardRecord + ?Sized> Node<R> {
    /// Detaches this record's children onto `stack`: its input edges and the graph nodes of
    /// the tensors it saved.
    fn take_children_into(&mut self, links: &mut GraphLinks) {
        links
            .0
            .extend(self.inputs.drain(..).flatten().filter_map(|edge| edge.node));
        self.op.take_graph(links);
    }
}

/// The graph nodes a dropping record hands over ([`BackwardRecord::take_graph`]): the stack
/// of nodes still to free, so that freeing a long graph needs no recursion.
pub struct GraphLinks(Vec<Arc<Node>>);

impl GraphLinks {
    /// The node of `tensor`, if it has one and this was its last handle.
    pub(crate) fn push_tensor(&mut self, tensor: DynTensor) {
        self.0.extend(tensor.into_graph_node());
    }

    /// The node of a saved tensor, if it has one and the record held its last handle; the
    /// tensor stays, off the graph.
    pub(crate) fn push_saved(&mut self, saved: &mut Saved) {
        self.0.extend(saved.tensor.take_graph_node());
    }

    /// The node of a tensor's graph place (`None`: no gradient, or a leaf).
    pub(crate) fn push_meta(&mut self, meta: Option<GradMeta>) {
        self.0.extend(meta.and_then(|meta| meta.node));
    }
}

impl<R: BackwardRecord + ?Sized> Drop for Node<R> {
    /// Frees long chains iteratively; recursive drops would overflow the stack on deep
    /// graphs (a long unrolled recurrence, thousands of chained ops). A child emptied here
    /// (its last handle is ours) has no children left when its own `drop` runs, so that one
    /// allocates nothing.
    fn drop(&mut self) {
        live_counts::add(Count::GraphNodes, -1);
        let mut stack = GraphLinks(Vec::new());
        self.take_children_into(&mut stack);
        while let Some(mut node) = stack.0.pop() {
            if let Some(owned) = Arc::get_mut(&mut node) {
                owned.take_children_into(&mut stack);
            }
        }
    }
}

/// Attaches `output` to the graph when recording is on and some input requires a gradient.
/// `op` is built lazily so untracked calls allocate nothing.
///
/// Inlined into every op, so an untracked call costs a load per input (the thread-local
/// recording flag is read only when some input is tracked). A recorded op's record is built
/// straight into its node's allocation (records hold dims and saved tensors; building one
/// on the stack and moving it cost a `memcpy` and a store-forwarding stall per op); the rest
/// of the recording is [`attach`], compiled once per record type.
#[inline]
pub(crate) fn record<R: BackwardRecord + 'static>(
    output: DynTensor,
    inputs: &[&DynTensor],
    op: impl FnOnce() -> R,
) -> DynTensor {
    if inputs.iter().any(|t| t.requires_grad()) && is_grad_enabled() {
        let mut node = Arc::<MaybeUninit<Node<R>>>::new_uninit();
        // SAFETY: the node is fresh and reachable only from here; its record is written
        // now and its edges by `attach`, before `assume_init`. Should `op` panic, the
        // uninitialised node is freed without a drop.
        unsafe { addr_of_mut!((*node.as_mut_ptr().cast::<Node<R>>()).op).write(op()) };
        attach(output, inputs, node)
    } else {
        output
    }
}

/// `output` as the result of `node`, whose record is written: its edges go to `inputs`.
fn attach<R: BackwardRecord + 'static>(
    output: DynTensor,
    inputs: &[&DynTensor],
    mut node: Arc<MaybeUninit<Node<R>>>,
) -> DynTensor {
    let place = node.as_mut_ptr().cast::<Node<R>>();
    // SAFETY: `record` wrote the node's record; the edges are its last field, written here
    // (an empty list first, then filled where it lives).
    let node = unsafe {
        let edges = addr_of_mut!((*place).inputs);
        edges.write(Edges::new());
        (*edges).extend(inputs.iter().map(|t| edge_to(t)));
        node.assume_init()
    };
    attach_node(output, node)
}

/// Where the gradient of `input` goes, if it takes one.
pub(crate) fn edge_to(input: &DynTensor) -> Option<Edge> {
    input.grad_meta().map(|meta| Edge {
        id: meta.id,
        node: meta.node.clone(),
    })
}

/// `output` as the result of a new graph node running `op`, whose inputs' gradients go along
/// `edges`: for records whose inputs are not all tensors at hand (a checkpointed segment's
/// parameters are known only by id).
pub(crate) fn attach_edges<R: BackwardRecord + 'static>(
    output: DynTensor,
    edges: Edges,
    op: R,
) -> DynTensor {
    attach_node(output, Arc::new(Node { inputs: edges, op }))
}

/// `output` as the result of `node`, made the tensor's place on the graph.
fn attach_node<R: BackwardRecord + 'static>(output: DynTensor, node: Arc<Node<R>>) -> DynTensor {
    live_counts::add(Count::GraphNodes, 1);
    // SAFETY: the coercion is a plain unsizing cast, which keeps the address (what
    // `Coercion::new` asks of it).
    let to_dyn = unsafe { Coercion::new(|node: *const Node<R>| node as *const Node) };
    output.with_grad_meta(GradMeta {
        id: TensorId::fresh(),
        node: Some(node.unsize(to_dyn)),
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
