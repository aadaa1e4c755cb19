//! Training and evaluation mode: the flag the mode-dependent layers (dropout, batch
//! normalisation, attention dropout) keep, and a guard that switches a whole model.
//!
//! The flag is atomic so that switching takes `&self`: a model lent to a
//! [`Trainer`](crate::train::Trainer), borrowed by a training closure, or shared between
//! threads can still be put in evaluation mode around a validation pass, as PyTorch's
//! `model.eval()` can.

use std::sync::atomic::{AtomicBool, Ordering};

use super::module::Module;

/// Whether a layer is in training mode (the default).
#[derive(Debug)]
pub struct TrainingFlag(AtomicBool);

impl TrainingFlag {
    /// Training mode.
    pub fn new() -> Self {
        TrainingFlag(AtomicBool::new(true))
    }

    /// Whether the layer is in training mode.
    pub fn get(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// Sets the mode (`true`: training).
    pub fn set(&self, training: bool) {
        self.0.store(training, Ordering::Relaxed);
    }
}

impl Default for TrainingFlag {
    fn default() -> Self {
        TrainingFlag::new()
    }
}

impl Clone for TrainingFlag {
    fn clone(&self) -> Self {
        TrainingFlag(AtomicBool::new(self.get()))
    }
}

/// Puts a module in one mode until dropped, then back in the mode it was in before
/// ([`Module::training`]; training mode for a module without a mode-dependent layer).
///
/// ```
/// use rumus::nn::{Dropout, Module, ModeGuard};
///
/// let dropout = Dropout::new(0.5)?;
/// {
///     let _eval = ModeGuard::eval(&dropout);
///     assert_eq!(dropout.training(), Some(false));
/// }
/// assert_eq!(dropout.training(), Some(true));
/// # Ok::<(), rumus::Error>(())
/// ```
#[must_use = "the mode returns to the earlier one when the guard is dropped"]
pub struct ModeGuard<'a> {
    module: &'a dyn Module,
    before: bool,
}

impl<'a> ModeGuard<'a> {
    /// Evaluation mode for `module` while the guard lives.
    pub fn eval(module: &'a dyn Module) -> Self {
        Self::set(module, false)
    }

    /// Training mode for `module` while the guard lives.
    pub fn train(module: &'a dyn Module) -> Self {
        Self::set(module, true)
    }

    fn set(module: &'a dyn Module, training: bool) -> Self {
        let before = module.training().unwrap_or(true);
        module.set_training(training);
        ModeGuard { module, before }
    }
}

impl Drop for ModeGuard<'_> {
    fn drop(&mut self) {
        self.module.set_training(self.before);
    }
}
