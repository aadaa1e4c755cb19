//! Faults the GPU reports after the call that caused them: a lost device (a driver reset,
//! a GPU taken away, [`GpuDevice::destroy`]) and the errors wgpu raises outside an error
//! scope (every use of a lost device's buffers is one). wgpu hands these to a handler that
//! panics by default, which would abort a training run at the next readback; rumus records
//! the first instead and returns it, as [`DeviceError::Fault`], from that readback, every
//! later wait and every later allocation on the device. Like a CUDA error, it is sticky:
//! work queued after a fault cannot be trusted, so the device stays unusable.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Once};

use super::context::GpuDevice;
use crate::error::{DeviceError, Result};

/// The fault of a device destroyed on purpose.
const DESTROYED: &str = "the device was destroyed (GpuDevice::destroy)";

/// The first fault of one device.
#[derive(Default)]
pub(crate) struct Faults {
    seen: AtomicBool,
    first: Mutex<Option<String>>,
}

impl Faults {
    /// Records the faults `device` reports from now on.
    pub fn watch(device: &wgpu::Device) -> Arc<Self> {
        let faults = Arc::new(Faults::default());
        let errors = faults.clone();
        device.on_uncaptured_error(Arc::new(move |error| {
            errors.record(format!(
                "wgpu rejected work already queued ({error}); unless the device was lost, this is a bug in rumus or in a custom op's kernels: please report it"
            ))
        }));
        let lost = faults.clone();
        device.set_device_lost_callback(move |reason, message| {
            lost.record(match reason {
                wgpu::DeviceLostReason::Destroyed => DESTROYED.to_string(),
                _ => format!("the device was lost: {message}"),
            })
        });
        faults
    }

    /// Keeps `message` (wgpu's run over several lines) if it is the first.
    fn record(&self, message: String) {
        let message = message.split_whitespace().collect::<Vec<_>>().join(" ");
        let mut first = self.first.lock().unwrap_or_else(|p| p.into_inner());
        if first.is_none() {
            *first = Some(message);
            self.seen.store(true, Ordering::Release);
        }
    }

    /// The recorded fault, if any, as an error.
    pub fn check(&self) -> Result<()> {
        if !self.seen.load(Ordering::Acquire) {
            return Ok(());
        }
        let first = self.first.lock().unwrap_or_else(|p| p.into_inner());
        match first.as_ref() {
            Some(message) => Err(DeviceError::Fault {
                message: message.clone(),
            }
            .into()),
            None => Ok(()),
        }
    }
}

impl GpuDevice {
    /// Ends the device, as a lost GPU would end: every later allocation, readback or wait
    /// on it is a [`DeviceError::Fault`] (ops that allocate nothing, such as an optimizer's
    /// step in place, report it at the next of those). The process's default GPU is opened
    /// once, so it stays unusable. For testing what a program does when its GPU is lost.
    pub fn destroy(&self) {
        self.0.faults.record(DESTROYED.to_string());
        self.0.device.destroy();
    }

    /// An error once the device has reported a fault (see the module docs).
    pub(crate) fn check_faults(&self) -> Result<()> {
        self.0.faults.check()
    }
}

thread_local! {
    /// Set while this thread runs [`catch_quietly`]'s closure.
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

/// `f()`, its panic caught and not printed. wgpu reports a device the driver lost by
/// panicking inside `poll` (after the lost callback has recorded the fault, which rumus then
/// returns as the error): caught as it is, the default hook would still print "thread
/// panicked at ..." with a backtrace, which reads as a crash of a program that goes on.
///
/// The first call installs a panic hook that stays silent for panics of a thread inside
/// this function and hands every other panic to the hook that was there before, so panics
/// elsewhere print as they did (and a hook the program installs later replaces this one).
/// Called while the thread unwinds from a panic, it catches without installing anything.
pub(crate) fn catch_quietly<R>(f: impl FnOnce() -> R) -> std::thread::Result<R> {
    static INSTALL: Once = Once::new();
    // A thread that is unwinding may not touch the hook (the standard library aborts the
    // process): a GPU buffer dropped during a panic is polled here first. The hook is then
    // installed by the next call outside a panic.
    if std::thread::panicking() {
        return std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    }
    INSTALL.call_once(|| {
        let earlier = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(Cell::get) {
                earlier(info);
            }
        }));
    });
    let was_quiet = QUIET.with(|quiet| quiet.replace(true));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    QUIET.with(|quiet| quiet.set(was_quiet));
    result
}

#[cfg(test)]
mod tests {
    use super::catch_quietly;
    use crate::error::panic_message;

    /// Set for the child process of `a_caught_panic_prints_nothing`.
    const CHILD: &str = "RUMUS_TEST_QUIET_PANIC_CHILD";

    /// Run alone in a child process (the hook is process-wide): a panic inside
    /// `catch_quietly` is returned and prints nothing, one after it prints as before.
    #[test]
    fn a_caught_panic_prints_nothing() {
        if std::env::var_os(CHILD).is_some() {
            let caught = catch_quietly(|| -> u32 { panic!("quiet panic inside") });
            assert_eq!(panic_message(&*caught.unwrap_err()), "quiet panic inside");
            let formatted = catch_quietly(|| -> u32 { panic!("formatted {}", 7) });
            assert_eq!(panic_message(&*formatted.unwrap_err()), "formatted 7");
            assert_eq!(catch_quietly(|| 7).ok(), Some(7));
            let loud = std::panic::catch_unwind(|| panic!("loud panic outside"));
            assert!(loud.is_err());
            return;
        }
        let child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "backend::gpu::fault::tests::a_caught_panic_prints_nothing"])
            .args(["--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&child.stdout);
        let stderr = String::from_utf8_lossy(&child.stderr);
        assert!(child.status.success(), "{stdout}{stderr}");
        assert!(stdout.contains("1 passed"), "{stdout}");
        assert!(!stderr.contains("quiet panic inside"), "{stderr}");
        assert!(stderr.contains("loud panic outside"), "{stderr}");
    }
}
