//! The item type of labelled data ([`Sample`]) and collation of items into batch tensors.
//! Collation is the shape boundary of a data pipeline: items whose dims disagree are an error
//! naming the item, and [`Batch::input`] checks the batch against a typed shape once.

use crate::element::Element;
use crate::error::{Error, Result, ShapeError};
use crate::shape::Shape;
use crate::tensor::DynTensor;
use crate::tensor::typed::Tensor;

/// One item's values, row-major, with their dims (e.g. `[1, 28, 28]` for an MNIST image).
#[derive(Debug, Clone, PartialEq)]
pub struct Features {
    /// The values, row-major.
    pub values: Vec<f32>,
    /// Size of each axis; their product is `values.len()`.
    pub dims: Vec<usize>,
}

impl Features {
    /// Checks that `dims` hold exactly `values.len()` elements.
    pub fn new(values: Vec<f32>, dims: &[usize]) -> Result<Self, ShapeError> {
        let expected = dims
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .unwrap_or(usize::MAX);
        if expected != values.len() {
            return Err(ShapeError::ElementCount {
                context: "Features::new".into(),
                shape: dims.to_vec(),
                expected,
                found: values.len(),
            });
        }
        Ok(Features {
            values,
            dims: dims.to_vec(),
        })
    }

    /// A flat vector `[n]`.
    pub fn vector(values: Vec<f32>) -> Self {
        let dims = vec![values.len()];
        Features { values, dims }
    }

    /// The same values with new dims of the same element count.
    pub fn reshape(self, dims: &[usize]) -> Result<Self, ShapeError> {
        Features::new(self.values, dims)
    }
}

/// What an item is labelled with.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// A class index (collates into an `i64` tensor `[N]`, what cross-entropy takes).
    Class(i64),
    /// Values (regression targets, one-hot labels; collates into `f32` `[N, ...]`).
    Values(Features),
}

/// An input and its target.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// What the model reads.
    pub input: Features,
    /// What the model should predict.
    pub target: Target,
}

impl Sample {
    /// A sample labelled with class index `class`.
    pub fn classified(input: Features, class: i64) -> Self {
        Sample {
            input,
            target: Target::Class(class),
        }
    }
}

/// A collated batch: inputs `[N, ...]` (f32) and targets (`i64 [N]` or `f32 [N, ...]`).
#[derive(Debug, Clone)]
pub struct Batch {
    /// The stacked inputs, `f32 [N, ...]`.
    pub input: DynTensor,
    /// The stacked targets: `i64 [N]` class indices or `f32 [N, ...]` values.
    pub target: DynTensor,
}

impl Batch {
    /// Number of items.
    pub fn len(&self) -> usize {
        self.input.dims()[0]
    }

    /// Whether the batch holds no items.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `f32` inputs as a typed tensor, checked against `S` once (e.g. `(Dyn, D<784>)`).
    pub fn input<S: Shape>(&self) -> crate::Result<Tensor<S>> {
        self.input.clone().try_shape()
    }

    /// The targets as a typed tensor of `E` values, checked against `S` and `E`:
    /// `batch.target::<(Dyn,), i64>()` for class indices, `(Dyn, D<10>), f32` for one-hot
    /// or regression targets.
    pub fn target<S: Shape, E: Element>(&self) -> crate::Result<Tensor<S, E>> {
        self.target.clone().try_typed()
    }
}

/// Items that can be stacked into a batch.
pub trait Collate: Sized + Send + 'static {
    /// What a batch of these items becomes.
    type Batch: Send + 'static;

    /// Stacks `items` into one batch, in order. Fails on an empty list or on items whose
    /// shapes (or kinds of target) differ.
    fn collate(items: Vec<Self>) -> Result<Self::Batch>;
}

/// Stacks equally shaped features into `[N, ...]`; `what` names them in errors.
fn stack(items: &[&Features], what: &str) -> Result<DynTensor> {
    let first = items.first().ok_or_else(|| Error::InvalidArgument {
        op: "collate",
        message: "an empty batch cannot be collated".into(),
    })?;
    let mut values = Vec::with_capacity(first.values.len() * items.len());
    for (i, f) in items.iter().enumerate() {
        if f.dims != first.dims {
            return Err(ShapeError::Invalid {
                context: "collate".into(),
                message: format!(
                    "{what} of item {i} in the batch has dims {:?} but item 0 has {:?}; every item of a batch needs the same shape (resize or crop them in a `map`)",
                    f.dims, first.dims
                ),
            }
            .into());
        }
        values.extend_from_slice(&f.values);
    }
    let mut dims = vec![items.len()];
    dims.extend_from_slice(&first.dims);
    Ok(DynTensor::from_vec(values, &dims)?)
}

impl Collate for Sample {
    type Batch = Batch;

    fn collate(items: Vec<Sample>) -> Result<Batch> {
        let inputs: Vec<&Features> = items.iter().map(|s| &s.input).collect();
        let input = stack(&inputs, "the input")?;
        let target = match items.first().map(|s| &s.target) {
            Some(Target::Class(_)) => {
                let classes = items
                    .iter()
                    .enumerate()
                    .map(|(i, s)| match s.target {
                        Target::Class(c) => Ok(c),
                        Target::Values(_) => Err(mixed_targets(i)),
                    })
                    .collect::<Result<Vec<i64>>>()?;
                let n = classes.len();
                DynTensor::from_vec(classes, &[n])?
            }
            _ => {
                let values = items
                    .iter()
                    .enumerate()
                    .map(|(i, s)| match &s.target {
                        Target::Values(v) => Ok(v),
                        Target::Class(_) => Err(mixed_targets(i)),
                    })
                    .collect::<Result<Vec<&Features>>>()?;
                stack(&values, "the target")?
            }
        };
        Ok(Batch { input, target })
    }
}

fn mixed_targets(item: usize) -> Error {
    ShapeError::Invalid {
        context: "collate".into(),
        message: format!(
            "item {item} has a different kind of target (class or values) than item 0"
        ),
    }
    .into()
}

/// Features alone (unlabelled data) collate into `[N, ...]`.
impl Collate for Features {
    type Batch = DynTensor;

    fn collate(items: Vec<Features>) -> Result<DynTensor> {
        stack(&items.iter().collect::<Vec<_>>(), "the input")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(fill: f32, dims: &[usize]) -> Features {
        Features::new(vec![fill; dims.iter().product()], dims).unwrap()
    }

    #[test]
    fn collates_classes_and_values() {
        let batch = Sample::collate(vec![
            Sample::classified(image(1.0, &[1, 2, 2]), 3),
            Sample::classified(image(2.0, &[1, 2, 2]), 7),
        ])
        .unwrap();
        assert_eq!(batch.input.dims(), &[2, 1, 2, 2]);
        assert_eq!(batch.target.to_vec::<i64>().unwrap(), vec![3, 7]);
        assert_eq!(batch.input.to_vec::<f32>().unwrap()[4..], [2.0; 4]);
        let typed = batch.input::<(crate::Dyn, crate::D<1>, crate::D<2>, crate::D<2>)>();
        assert!(typed.is_ok());
        let wrong = batch.input::<(crate::Dyn, crate::D<4>)>().unwrap_err();
        assert!(wrong.to_string().contains("rank"), "{wrong}");
    }

    #[test]
    fn mismatched_items_name_the_item() {
        let err = Sample::collate(vec![
            Sample::classified(image(0.0, &[4]), 0),
            Sample::classified(image(0.0, &[4]), 1),
            Sample::classified(image(0.0, &[5]), 2),
        ])
        .unwrap_err()
        .to_string();
        assert!(err.contains("item 2") && err.contains("[5]"), "{err}");
        assert!(Sample::collate(Vec::new()).is_err());
        assert!(Features::new(vec![0.0; 3], &[2, 2]).is_err());
    }
}
