//! Training helpers: metrics, a `Trainer` loop with progress and curves.

#[cfg(feature = "plot")]
mod curve;
mod metrics;
mod trainer;

#[cfg(feature = "plot")]
pub use curve::write_curve;
pub use metrics::{EpochSummary, Metrics, classification};
pub use trainer::Trainer;
