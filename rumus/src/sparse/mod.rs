//! Sparse matrices and message passing over graphs.
//!
//! - [`CooMatrix`]: entries as `(row, column, value)` lists, in any order, possibly
//!   repeated; [`coalesce`](CooMatrix::coalesce) sorts and merges them.
//! - [`CsrMatrix`]: the compressed-row form every product runs on. Its [`Pattern`] (where
//!   the entries are, and the same for the transpose) is checked once on the host when it
//!   is built, and shared; its values are an ordinary tensor, trainable.
//! - Products with gradients: `A x` ([`CsrMatrix::matmul`], SpMM) and `a b^T` read at a
//!   pattern ([`CsrMatrix::sample_products`], SDDMM). Each one's backward pass is the
//!   other, so gradients of gradients work too.
//! - [`Graph`]: edges as the adjacency `A[target, source]`, with per-edge gathers, the
//!   per-node [`aggregate`] (sum, mean, max) of messages and the [`softmax`] over a node's
//!   incoming edges, which the graph layers in [`crate::nn`] are written with;
//!   [`GraphBatch`] stacks small graphs into one, and [`sample_neighbors`] draws the
//!   mini-batch subgraphs of GraphSAGE-style training on a large graph.
//!
//! Indices are `i64`, as in PyTorch. A bad index is an error when the matrix is built,
//! naming the entry; nothing past that point reads out of bounds.

mod aggregate;
mod batch;
mod coo;
mod csr;
mod graph;
mod pattern;
mod products;
mod sampling;

pub use aggregate::{Aggregation, aggregate, softmax};
pub use batch::GraphBatch;
pub use coo::CooMatrix;
pub use csr::CsrMatrix;
pub use graph::Graph;
pub use pattern::Pattern;
pub use sampling::{SampledSubgraph, sample_neighbors};
