//! Training loops of the `gnn` example: full-batch node classification (one graph, a loss
//! over its training nodes) and mini-batch graph classification (small graphs stacked into
//! one per batch).

use rumus::data::{GraphDataset, NodeDataset};
use rumus::nn::{CrossEntropyOptions, ModeGuard, Module, cross_entropy};
use rumus::optim::{Adam, AdamConfig, Optimizer};
use rumus::prelude::*;
use rumus::sparse::Graph;

/// Epochs, learning rate and L2 weight decay of an Adam run.
#[derive(Debug, Clone, Copy)]
pub struct Recipe {
    pub epochs: usize,
    pub lr: f64,
    pub weight_decay: f64,
}

impl Recipe {
    /// Adam over `model`'s parameters with the recipe's rate and (L2) weight decay.
    fn adam(&self, model: &dyn Module) -> rumus::Result<Adam> {
        let config = AdamConfig {
            lr: self.lr,
            weight_decay: self.weight_decay,
            ..AdamConfig::adam()
        };
        Adam::new(model.parameters(), config)
    }
}

/// Each row divided by its sum (rows of zeros stay zeros): PyTorch Geometric's
/// `NormalizeFeatures`, the usual input of Cora models.
pub fn normalize_rows(x: &DynTensor) -> rumus::Result<DynTensor> {
    x.div(&x.sum(&[1], true)?.clamp(1.0, f64::INFINITY)?)
}

/// The fraction of `nodes` whose largest logit is their label.
fn accuracy(logits: &DynTensor, labels: &DynTensor, nodes: &DynTensor) -> rumus::Result<f64> {
    let predicted = logits.index_select(0, nodes)?.argmax(1, false)?;
    let right = predicted.eq(&labels.index_select(0, nodes)?)?;
    let right = right.to_vec::<bool>()?.iter().filter(|&&r| r).count();
    Ok(right as f64 / nodes.numel().max(1) as f64)
}

/// `model`'s validation and test accuracy on the whole graph, in evaluation mode.
fn evaluate_nodes(
    model: &dyn Module,
    logits: impl Fn(&DynTensor, &Graph) -> rumus::Result<DynTensor>,
    data: &NodeDataset,
    x: &DynTensor,
) -> rumus::Result<(f64, f64)> {
    let _eval = ModeGuard::eval(model);
    let _untracked = rumus::autograd::no_grad();
    let out = logits(x, &data.graph)?;
    Ok((
        accuracy(&out, &data.labels, &data.val)?,
        accuracy(&out, &data.labels, &data.test)?,
    ))
}

/// Trains `model` (its logits given by `logits`) on the training nodes for the recipe's
/// epochs, then returns its validation and test accuracy in evaluation mode.
pub fn train_nodes(
    model: &dyn Module,
    logits: impl Fn(&DynTensor, &Graph) -> rumus::Result<DynTensor>,
    data: &NodeDataset,
    x: &DynTensor,
    recipe: Recipe,
) -> rumus::Result<(f64, f64)> {
    let mut optimizer = recipe.adam(model)?;
    let train_labels = data.labels.index_select(0, &data.train)?;
    {
        let _training = ModeGuard::train(model);
        for _ in 0..recipe.epochs {
            let out = logits(x, &data.graph)?.index_select(0, &data.train)?;
            let loss = cross_entropy(&out, &train_labels, &CrossEntropyOptions::default())?;
            optimizer.step(&mut loss.backward()?)?;
        }
    }
    evaluate_nodes(model, logits, data, x)
}

/// Trains a graph classifier on the graphs `train` in shuffled batches of `batch_size`,
/// then returns its accuracy on the graphs `test` in evaluation mode.
pub fn train_graphs(
    model: &dyn Module,
    logits: impl Fn(&rumus::data::GraphDatasetBatch) -> rumus::Result<DynTensor>,
    data: &GraphDataset,
    (train, test): (&[usize], &[usize]),
    batch_size: usize,
    recipe: Recipe,
) -> rumus::Result<f64> {
    let mut optimizer = recipe.adam(model)?;
    let mut generator = rumus::rng::Generator::new(1);
    {
        let _training = ModeGuard::train(model);
        for _ in 0..recipe.epochs {
            for batch in data.batches(train, batch_size, Some(&mut generator))? {
                let out = logits(&batch)?;
                let loss = cross_entropy(&out, &batch.labels, &CrossEntropyOptions::default())?;
                optimizer.step(&mut loss.backward()?)?;
            }
        }
    }
    let _eval = ModeGuard::eval(model);
    let _untracked = rumus::autograd::no_grad();
    let batch = data.batch(test)?;
    let out = logits(&batch)?;
    let every = DynTensor::from_vec((0..test.len() as i64).collect(), &[test.len()])?;
    accuracy(&out, &batch.labels, &every)
}

/// A fixed split of `graphs` graphs: a shuffle drawn from seed 5, the first `train` to train
/// on, the rest to test.
pub fn fixed_split(graphs: usize, train: usize) -> (Vec<usize>, Vec<usize>) {
    let mut order: Vec<usize> = (0..graphs).collect();
    let mut generator = rumus::rng::Generator::new(5);
    for i in (1..order.len()).rev() {
        order.swap(i, (generator.next_u64() % (i as u64 + 1)) as usize);
    }
    let test = order.split_off(train.min(graphs));
    (order, test)
}

/// Trains `model` on mini-batches of `batch_size` training nodes, each over the
/// neighbourhood [`sample_neighbors`](rumus::sparse::sample_neighbors) draws with `fanouts`
/// (GraphSAGE's recipe for graphs too large to propagate over whole), then returns its
/// validation and test accuracy on the whole graph in evaluation mode.
pub fn train_sampled(
    model: &dyn Module,
    logits: impl Fn(&DynTensor, &Graph) -> rumus::Result<DynTensor>,
    data: &NodeDataset,
    x: &DynTensor,
    (fanouts, batch_size): (&[usize], usize),
    recipe: Recipe,
) -> rumus::Result<(f64, f64)> {
    let mut optimizer = recipe.adam(model)?;
    let train: Vec<usize> = data
        .train
        .to_vec::<i64>()?
        .iter()
        .map(|&n| n as usize)
        .collect();
    let mut generator = rumus::rng::Generator::new(11);
    {
        let _training = ModeGuard::train(model);
        for _ in 0..recipe.epochs {
            for seeds in train.chunks(batch_size) {
                let sampled =
                    rumus::sparse::sample_neighbors(&data.graph, seeds, fanouts, &mut generator)?;
                let out =
                    logits(&sampled.gather(x)?, &sampled.graph)?.narrow(0, 0, sampled.seeds)?;
                let labels = sampled.gather(&data.labels)?.narrow(0, 0, sampled.seeds)?;
                let loss = cross_entropy(&out, &labels, &CrossEntropyOptions::default())?;
                optimizer.step(&mut loss.backward()?)?;
            }
        }
    }
    evaluate_nodes(model, logits, data, x)
}
