//! Training helpers: metrics, and a [`Trainer`] loop (as PyTorch Lightning's) with
//! progress, early stopping, checkpoints to resume from, CSV and TensorBoard logs, and
//! curves.

mod csv_log;
#[cfg(feature = "plot")]
mod curve;
mod early_stopping;
mod loop_state;
mod metrics;
mod run;
mod tensorboard;
mod trainer;

pub use csv_log::CSV_HEADER;
#[cfg(feature = "plot")]
pub use curve::{CURVE_SIZE, EVAL_COLOR, TRAIN_COLOR, write_curve};
pub use early_stopping::EarlyStopping;
pub use metrics::{EpochSummary, Metric, Metrics, classification};
pub use run::{EpochEnd, Run};
pub use trainer::Trainer;
