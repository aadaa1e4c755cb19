//! Optimizers, learning-rate schedules (closed-form, and [`ReduceLrOnPlateau`] driven by a
//! metric), gradient clipping and loss scaling ([`GradScaler`]).
//!
//! Updates follow PyTorch's formulas (checked against its first steps in
//! `tests/reference_optim.rs`) and run in place under `no_grad`, so parameters keep their
//! identity and a graph recorded before a step refuses to back-propagate after it.

mod adagrad;
mod adam;
mod clip;
mod grad_scaler;
pub(crate) mod limits;
mod optimizer;
mod params;
mod plateau;
mod rmsprop;
mod scheduler;
mod sgd;

pub use adagrad::{Adagrad, AdagradConfig};
pub use adam::{Adam, AdamConfig};
pub use clip::{clip_grad_norm, clip_grad_value};
pub use grad_scaler::{GradScaler, GradScalerConfig, GradScalerState};
pub use optimizer::Optimizer;
pub use params::{OptimizerState, ParamGroup, ParamState, Params};
pub use plateau::{Mode, PlateauConfig, ReduceLrOnPlateau, ThresholdMode};
pub use rmsprop::{Rmsprop, RmspropConfig};
pub use scheduler::{
    CosineAnnealingLr, ExponentialLr, LinearWarmup, LrScheduler, OneCycleLr, Schedule, Scheduler,
    StepLr,
};
pub use sgd::{Sgd, SgdConfig};
