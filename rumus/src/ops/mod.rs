//! Differentiable tensor ops, one family per file. Each file holds the forward (as methods on
//! [`DynTensor`](crate::DynTensor)) and the backward formulas of its records.

pub mod anomaly;
pub mod attention;
pub mod backward;
pub mod cast;
pub mod conv;
pub mod custom;
pub(crate) mod direct_conv;
pub(crate) mod dropout;
pub mod elementwise;
pub mod fields;
pub(crate) mod hooks;
pub mod index;
pub mod inplace;
pub mod join;
pub mod mask;
pub mod matmul;
pub(crate) mod norm;
pub mod rearrange;
pub mod reduce;
pub mod softmax;
pub mod transfer;
pub mod unary;
pub mod view;

pub use anomaly::{AnomalyGuard, detect_anomaly};
pub use backward::BackwardOp;
pub use elementwise::{BinaryOp, CompareOp};
pub use mask::causal_mask;
pub use unary::UnaryOp;
