//! The reverse pass: collect the records the outputs depend on (and nothing else), count
//! each record's consumers, then visit them in Kahn order so every gradient is complete
//! before it is propagated further.

use std::collections::{HashMap, HashSet};
use triomphe::Arc;

use super::grad_mode::{enable_grad, no_grad};
use super::gradients::{GradientStore, accumulate_into};
use super::node::{Node, TensorId};
use super::tensor_hooks;
use crate::error::{AutogradError, Result, ShapeError};
use crate::tensor::DynTensor;

/// Which gradients the caller keeps.
enum Wanted<'a> {
    /// Every leaf (`backward`).
    Leaves,
    /// Exactly these tensors, leaves or not (`grad`).
    Ids(&'a HashSet<TensorId>),
}

impl Wanted<'_> {
    fn keeps(&self, id: TensorId, is_leaf: bool) -> bool {
        match self {
            Wanted::Leaves => is_leaf,
            Wanted::Ids(ids) => ids.contains(&id),
        }
    }
}

fn check_seed(output: &DynTensor, seed: &DynTensor) -> Result<()> {
    if output.dims() != seed.dims() {
        return Err(ShapeError::Invalid {
            context: "backward".into(),
            message: format!(
                "seed gradient has shape {:?} but the output has shape {:?}",
                seed.dims(),
                output.dims()
            ),
        }
        .into());
    }
    if output.dtype() != seed.dtype() {
        return Err(crate::Error::DTypeMismatch {
            op: "backward",
            lhs: output.dtype(),
            rhs: seed.dtype(),
        });
    }
    Ok(())
}

/// Called with a leaf's id and gradient once no record left to visit can add to it.
pub type ReadyHook<'a> = &'a mut dyn FnMut(TensorId, &DynTensor) -> Result<()>;

fn run_backward(
    roots: &[(&DynTensor, DynTensor)],
    create_graph: bool,
    wanted: Wanted,
    mut on_ready: Option<ReadyHook>,
) -> Result<HashMap<TensorId, DynTensor>> {
    let _mode = if create_graph {
        enable_grad()
    } else {
        no_grad()
    };

    // Discover the records reachable from the outputs and count consumers of each.
    let mut nodes: HashMap<TensorId, Arc<Node>> = HashMap::new();
    let mut consumers: HashMap<TensorId, usize> = HashMap::new();
    let mut stack: Vec<Arc<Node>> = Vec::new();
    let mut pending: HashMap<TensorId, DynTensor> = HashMap::new();
    let mut results: HashMap<TensorId, DynTensor> = HashMap::new();
    let mut root_ids = Vec::with_capacity(roots.len());
    for (output, seed) in roots {
        check_seed(output, seed)?;
        let meta = output
            .grad_meta()
            .ok_or_else(|| AutogradError::NotTracked {
                context: "backward".into(),
            })?;
        root_ids.push(meta.id);
        match &meta.node {
            Some(node) => {
                if nodes.insert(meta.id, node.clone()).is_none() {
                    stack.push(node.clone());
                }
                accumulate_into(&mut pending, meta.id, seed.clone())?;
            }
            None if wanted.keeps(meta.id, true) => {
                accumulate_into(&mut results, meta.id, seed.clone())?
            }
            None => {}
        }
    }
    // Records that feed each leaf, counted only when someone waits for finished leaves.
    let mut leaf_consumers: HashMap<TensorId, usize> = HashMap::new();
    while let Some(node) = stack.pop() {
        for edge in node.inputs.iter().flatten() {
            match &edge.node {
                Some(child) => {
                    *consumers.entry(edge.id).or_default() += 1;
                    if nodes.insert(edge.id, child.clone()).is_none() {
                        stack.push(child.clone());
                    }
                }
                None if on_ready.is_some() => *leaf_consumers.entry(edge.id).or_default() += 1,
                None => {}
            }
        }
    }

    // Only outputs can lack consumers (everything else was found as some record's input).
    // They start in the order given, not the map's: its order changes from process to
    // process, and the order gradients reach a shared input decides how their sum rounds.
    let mut ready: Vec<TensorId> = Vec::new();
    for &id in root_ids.iter().rev() {
        if nodes.contains_key(&id) && !consumers.contains_key(&id) && !ready.contains(&id) {
            ready.push(id);
        }
    }
    // Results whose tensor hooks have run: records' gradients as they are visited, leaves
    // reported ready; the other leaves run theirs at the end, once their sums are complete.
    let mut hooked: HashSet<TensorId> = HashSet::new();
    while let Some(id) = ready.pop() {
        let node = nodes.remove(&id).expect("every ready id was discovered");
        let grad = pending
            .remove(&id)
            .map(|grad| tensor_hooks::run(id, grad))
            .transpose()?;
        let input_grads = match &grad {
            Some(grad) => {
                if wanted.keeps(id, false) {
                    results.insert(id, grad.clone());
                    hooked.insert(id);
                }
                let needs: Vec<bool> = node.inputs.iter().map(Option::is_some).collect();
                let input_grads = if super::anomaly::anomaly_enabled() {
                    super::anomaly::in_backward_of(node.op.name(), || {
                        node.op.backward(grad, &needs)
                    })?
                } else {
                    node.op.backward(grad, &needs)?
                };
                super::anomaly::check_backward(node.op.name(), grad, &input_grads)?;
                input_grads
            }
            None => Vec::new(),
        };
        let mut input_grads = input_grads.into_iter();
        for edge in node.inputs.iter() {
            let input_grad = input_grads.next().flatten();
            let Some(edge) = edge else { continue };
            match (&edge.node, input_grad) {
                (Some(_), Some(g)) => accumulate_into(&mut pending, edge.id, g)?,
                (None, Some(g)) if wanted.keeps(edge.id, true) => {
                    accumulate_into(&mut results, edge.id, g)?
                }
                _ => {}
            }
            if edge.node.is_none() {
                if let Some(hook) = on_ready.as_mut() {
                    let count = leaf_consumers
                        .get_mut(&edge.id)
                        .expect("counted during discovery");
                    *count -= 1;
                    if *count == 0
                        && let Some(grad) = results.remove(&edge.id)
                    {
                        let grad = tensor_hooks::run(edge.id, grad)?;
                        hook(edge.id, &grad)?;
                        results.insert(edge.id, grad);
                        hooked.insert(edge.id);
                    }
                }
            } else {
                let count = consumers
                    .get_mut(&edge.id)
                    .expect("counted during discovery");
                *count -= 1;
                if *count == 0 {
                    ready.push(edge.id);
                }
            }
        }
    }
    for (id, grad) in results.iter_mut() {
        if tensor_hooks::installed() && !hooked.contains(id) {
            *grad = tensor_hooks::run(*id, grad.clone())?;
        }
    }
    Ok(results)
}

impl DynTensor {
    /// Back-propagates from this single-element tensor and returns the gradient of every leaf
    /// that requires one. The graph is kept, so another output of the same forward pass can be
    /// back-propagated afterwards.
    pub fn backward(&self) -> Result<GradientStore> {
        if self.numel() != 1 {
            return Err(AutogradError::NonScalarWithoutSeed {
                shape: self.dims().to_vec(),
            }
            .into());
        }
        let seed = self.ones_like()?;
        self.backward_with(&seed)
    }

    /// Back-propagates from this tensor with `seed` as its gradient (same shape and dtype).
    pub fn backward_with(&self, seed: &DynTensor) -> Result<GradientStore> {
        let grads = run_backward(&[(self, seed.detach())], false, Wanted::Leaves, None)?;
        Ok(GradientStore::from_map(grads))
    }

    /// Back-propagates from this single-element tensor like [`DynTensor::backward`], and
    /// calls `on_ready` with each leaf's gradient as soon as it is final, while the rest of
    /// the backward pass still runs: what lets data-parallel training send gradients across
    /// processes during the backward (PyTorch's post-accumulate-grad hooks). A leaf the loss
    /// reaches only as an output (the loss itself) is never reported; its gradient is in the
    /// returned store like every other.
    pub fn backward_with_ready_hook(&self, on_ready: ReadyHook) -> Result<GradientStore> {
        if self.numel() != 1 {
            return Err(AutogradError::NonScalarWithoutSeed {
                shape: self.dims().to_vec(),
            }
            .into());
        }
        let seed = self.ones_like()?;
        let grads = run_backward(&[(self, seed)], false, Wanted::Leaves, Some(on_ready))?;
        Ok(GradientStore::from_map(grads))
    }
}

/// The gradients that flow from `output` (with `seed` as its gradient) to the tensors with
/// the given ids, without recording; ids the output does not reach are absent.
pub(crate) fn gradients_of_ids(
    output: &DynTensor,
    seed: &DynTensor,
    ids: &HashSet<TensorId>,
) -> Result<HashMap<TensorId, DynTensor>> {
    run_backward(&[(output, seed.detach())], false, Wanted::Ids(ids), None)
}

/// Gradients of the sum of `outputs` (each a single element) with respect to `inputs`, which
/// may be leaves or intermediate tensors.
///
/// With `create_graph`, the backward pass itself is recorded, so the returned gradients can be
/// differentiated again: Hessian-vector products, gradient penalties.
pub fn grad(
    outputs: &[&DynTensor],
    inputs: &[&DynTensor],
    create_graph: bool,
) -> Result<Vec<DynTensor>> {
    let seeds = outputs
        .iter()
        .map(|output| {
            if output.numel() != 1 {
                return Err(AutogradError::NonScalarWithoutSeed {
                    shape: output.dims().to_vec(),
                }
                .into());
            }
            output.ones_like()
        })
        .collect::<Result<Vec<_>>>()?;
    let seeds: Vec<&DynTensor> = seeds.iter().collect();
    grad_with(outputs, &seeds, inputs, create_graph)
}

/// Like [`grad`], with an explicit seed gradient for each output (vector-Jacobian products).
pub fn grad_with(
    outputs: &[&DynTensor],
    seeds: &[&DynTensor],
    inputs: &[&DynTensor],
    create_graph: bool,
) -> Result<Vec<DynTensor>> {
    if outputs.len() != seeds.len() {
        return Err(crate::Error::InvalidArgument {
            op: "grad_with",
            message: format!(
                "{} outputs but {} seed gradients",
                outputs.len(),
                seeds.len()
            ),
        });
    }
    let ids = inputs
        .iter()
        .map(|input| {
            input.id().ok_or_else(|| {
                AutogradError::MissingGradient {
                    id: 0,
                    shape: input.dims().to_vec(),
                    reason: "this input does not require a gradient; call `.requires_grad_()` on it before the forward pass".into(),
                }
                .into()
            })
        })
        .collect::<Result<HashSet<TensorId>>>()?;
    let roots: Vec<(&DynTensor, DynTensor)> = outputs
        .iter()
        .zip(seeds)
        .map(|(output, seed)| {
            (
                *output,
                if create_graph {
                    (*seed).clone()
                } else {
                    seed.detach()
                },
            )
        })
        .collect();
    let grads = run_backward(&roots, create_graph, Wanted::Ids(&ids), None)?;
    inputs
        .iter()
        .map(|input| {
            let id = input.id().expect("checked above");
            grads.get(&id).cloned().ok_or_else(|| {
                AutogradError::MissingGradient {
                    id: id.get(),
                    shape: input.dims().to_vec(),
                    reason: "the outputs do not depend on this input".into(),
                }
                .into()
            })
        })
        .collect()
}
