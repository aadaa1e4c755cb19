//! Whether ops record onto the graph. The flag is per thread, like PyTorch's: a `no_grad`
//! block on one thread does not stop another thread from training.

use std::cell::Cell;

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// Whether ops on this thread currently record backward records.
pub fn is_grad_enabled() -> bool {
    GRAD_ENABLED.with(Cell::get)
}

/// Restores the previous recording mode when dropped.
#[must_use = "recording is only switched while the guard is alive: bind it with `let _guard = ...`"]
pub struct GradModeGuard {
    previous: bool,
}

impl Drop for GradModeGuard {
    fn drop(&mut self) {
        GRAD_ENABLED.with(|flag| flag.set(self.previous));
    }
}

fn set_grad_enabled(enabled: bool) -> GradModeGuard {
    let previous = GRAD_ENABLED.with(|flag| flag.replace(enabled));
    GradModeGuard { previous }
}

/// Stops recording until the guard drops: inference and optimizer updates. Ops then
/// allocate no graph metadata at all.
pub fn no_grad() -> GradModeGuard {
    set_grad_enabled(false)
}

/// Turns recording on until the guard drops (used by `create_graph` backward passes).
pub fn enable_grad() -> GradModeGuard {
    set_grad_enabled(true)
}
