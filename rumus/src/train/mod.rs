//! Training helpers: metrics, callbacks, and a [`Trainer`] loop (as PyTorch Lightning's) with
//! progress, early stopping, checkpoints to resume from, CSV and TensorBoard logs, and
//! curves.

mod callback;
mod csv_log;
#[cfg(feature = "plot")]
mod curve;
mod early_stopping;
mod keep_best;
mod lent_optimizer;
mod loop_state;
mod lr_log;
mod metric;
mod monitor;
mod phase;
mod run;
mod save_checkpoints;
mod step;
mod summary;
mod tensorboard;
mod trainer;

pub use callback::{BatchEnd, Callback, FitStart};
#[cfg(feature = "plot")]
pub use curve::{CURVE_SIZE, EVAL_COLOR, TRAIN_COLOR, write_curve};
pub use early_stopping::EarlyStopping;
pub use keep_best::{KeepBest, KeptCheckpoints};
pub use lr_log::LearningRateLog;
pub use metric::{Accuracy, F1Score, MeanAbsoluteError, MeanSquaredError, Metric, Perplexity};
pub use monitor::Monitor;
pub use run::{EpochEnd, Run};
pub use save_checkpoints::SaveCheckpoints;
pub use step::{StepOutput, classification};
pub use summary::{EpochSummary, PhaseSummary};
pub use trainer::Trainer;
