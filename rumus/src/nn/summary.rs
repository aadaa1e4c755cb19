//! A model's fields with the output shape each gives for one input and its parameters
//! (the table `torchinfo.summary(model, input_size)` prints), gathered by running the model
//! once with a forward hook.

use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;

use super::forward::Forward;
use super::module::{Module, group_digits};
use crate::element::Element;
use crate::error::Result;
use crate::ops::fields::register_forward_hook;
use crate::shape::Shape;
use crate::tensor::typed::Tensor;

/// A field's dotted path and the shape of its output.
type FieldShape = (String, Vec<usize>);

/// One field of a [`ModelSummary`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryRow {
    /// Its dotted path (`encoder.fc1`).
    pub path: String,
    /// The shape of its output for the summary's input.
    pub output: Vec<usize>,
    /// Parameters under its path.
    pub parameters: usize,
}

/// What [`summarize`] found: the fields in the order they first ran, each nested model's
/// fields under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSummary {
    /// The fields, outer before inner.
    pub rows: Vec<SummaryRow>,
    /// The input's shape.
    pub input: Vec<usize>,
    /// The model's output shape.
    pub output: Vec<usize>,
    /// Every parameter of the model.
    pub parameters: usize,
}

/// Runs `model` on `x` once (without recording gradients) and lists each `#[model]` field's
/// output shape and parameter count.
///
/// ```
/// use rumus::prelude::*;
///
/// #[model]
/// struct Mlp {
///     fc1: Linear<4, 8>,
///     fc2: Linear<8, 2>,
/// }
///
/// #[model]
/// impl Mlp {
///     tensor_fn! {
///         fn forward(&self, x: [B, 4]) -> [B, 2] {
///             self.fc2(relu(self.fc1(x)))
///         }
///     }
/// }
///
/// let summary = rumus::nn::summarize(&Mlp::new()?, &Tensor::<(D<16>, D<4>)>::zeros())?;
/// assert_eq!(summary.rows[1].path, "fc2");
/// assert_eq!(summary.rows[1].output, [16, 2]);
/// assert_eq!(summary.rows[1].parameters, 8 * 2 + 2);
/// println!("{summary}");
/// # Ok::<(), rumus::Error>(())
/// ```
pub fn summarize<M, S, E>(model: &M, x: &Tensor<S, E>) -> Result<ModelSummary>
where
    M: Module + Forward<S, E>,
    S: Shape,
    E: Element,
{
    // (path, output dims) as each field finishes: inner fields before the field holding them.
    let finished: Rc<RefCell<Vec<FieldShape>>> = Rc::default();
    let output = {
        let log = finished.clone();
        let _hook = register_forward_hook(move |path, out| {
            log.borrow_mut()
                .push((path.to_string(), out.dims().to_vec()));
        });
        let _no_grad = crate::autograd::no_grad();
        model.forward_typed(x)?
    };
    let named = model.named_parameters();
    let parameters_under = |path: &str| -> usize {
        let prefix = format!("{path}.");
        named
            .iter()
            .filter(|(name, _)| name.starts_with(&prefix))
            .map(|(_, t)| t.numel())
            .sum()
    };
    let finished = finished.take();
    let rows = outer_first(&finished)
        .into_iter()
        .map(|(path, dims)| SummaryRow {
            parameters: parameters_under(&path),
            path,
            output: dims,
        })
        .collect();
    Ok(ModelSummary {
        rows,
        input: x.dims().to_vec(),
        output: output.dims().to_vec(),
        parameters: model.num_parameters(),
    })
}

/// Fields in the order they started, from the order they finished: a field finishes after
/// the fields inside it, which are the ones just before it with its path as their prefix.
fn outer_first(finished: &[FieldShape]) -> Vec<FieldShape> {
    // Each finished field, with the fields that finished inside it.
    let mut pending: Vec<(FieldShape, Vec<FieldShape>)> = Vec::new();
    for (path, dims) in finished {
        let prefix = format!("{path}.");
        let first_inner = pending
            .iter()
            .rposition(|((p, _), _)| !p.starts_with(&prefix))
            .map_or(0, |i| i + 1);
        let mut inner = Vec::new();
        for (field, nested) in pending.drain(first_inner..) {
            inner.push(field);
            inner.extend(nested);
        }
        pending.push(((path.clone(), dims.clone()), inner));
    }
    pending
        .into_iter()
        .flat_map(|(field, nested)| std::iter::once(field).chain(nested))
        .collect()
}

impl fmt::Display for ModelSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shape = |dims: &[usize]| format!("{dims:?}");
        let width = self
            .rows
            .iter()
            .map(|r| r.path.len())
            .chain([5])
            .max()
            .unwrap_or(5);
        writeln!(
            f,
            "{:<width$}  {:<20}  {:>12}",
            "field", "output shape", "parameters"
        )?;
        writeln!(f, "{:<width$}  {:<20}", "input", shape(&self.input))?;
        for row in &self.rows {
            let depth = row.path.matches('.').count();
            let name = format!(
                "{}{}",
                "  ".repeat(depth),
                row.path.rsplit('.').next().unwrap_or("")
            );
            writeln!(
                f,
                "{name:<width$}  {:<20}  {:>12}",
                shape(&row.output),
                group_digits(row.parameters)
            )?;
        }
        writeln!(f, "{:<width$}  {:<20}", "output", shape(&self.output))?;
        write!(f, "Total parameters: {}", group_digits(self.parameters))
    }
}
