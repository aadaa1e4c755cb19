//! Waiting for the GPU, with a limit. Every host wait (a readback, `synchronize`, kernel
//! timestamps) goes through [`GpuDevice::wait_for_queue`], so a kernel that never finishes
//! (a custom op's WGSL loop that does not end, a driver fault) becomes an error that says
//! so instead of a process that hangs.
//!
//! The limit is on progress, not on the whole wait: the wait fails only when none of the
//! queued submissions finished within it. A long queue of work that keeps finishing never
//! trips it; one batch of kernels (at most `batch::SLOTS` dispatches) that runs longer does.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::context::{GpuDevice, gpu_error};
use crate::error::{DeviceError, Result};

/// The limit when `RUMUS_GPU_WAIT_TIMEOUT` is not set: far past any one batch of kernels on
/// a real GPU, and past the slowest of the test suite's batches on a CPU device (lavapipe).
pub(crate) const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(600);

/// The environment variable that sets the limit for the devices a process opens.
pub(crate) const WAIT_TIMEOUT_VARIABLE: &str = "RUMUS_GPU_WAIT_TIMEOUT";

/// What the variable must hold.
const EXPECTED: &str = "seconds to wait for the GPU, 0.001 or more (0 waits forever)";

/// What a device's waits share: the limit, and a count of finished submissions to tell a
/// slow queue from a stuck one.
pub(crate) struct WaitState {
    timeout: Mutex<Option<Duration>>,
    finished: std::sync::Arc<AtomicU64>,
}

impl WaitState {
    /// The state of a newly opened device: the limit from `RUMUS_GPU_WAIT_TIMEOUT` (seconds,
    /// `0` for none), else [`DEFAULT_WAIT_TIMEOUT`].
    pub fn from_env() -> std::result::Result<Self, DeviceError> {
        let timeout = match std::env::var(WAIT_TIMEOUT_VARIABLE) {
            Err(std::env::VarError::NotPresent) => Some(DEFAULT_WAIT_TIMEOUT),
            Ok(value) => parse_timeout(&value).ok_or(DeviceError::Setting {
                variable: WAIT_TIMEOUT_VARIABLE,
                value,
                expected: EXPECTED,
            })?,
            Err(std::env::VarError::NotUnicode(value)) => {
                return Err(DeviceError::Setting {
                    variable: WAIT_TIMEOUT_VARIABLE,
                    value: value.to_string_lossy().into_owned(),
                    expected: EXPECTED,
                });
            }
        };
        Ok(Self {
            timeout: Mutex::new(timeout),
            finished: Default::default(),
        })
    }

    /// A callback for `on_submitted_work_done` that counts the submission as finished.
    pub fn count_finished(&self) -> impl FnOnce() + Send + 'static {
        let finished = self.finished.clone();
        move || {
            finished.fetch_add(1, Ordering::AcqRel);
        }
    }
}

/// Seconds as the variable gives them: `None` for text that is no number of seconds (or
/// under a millisecond, which would fail nearly every wait), `Some(None)` for no limit.
fn parse_timeout(value: &str) -> Option<Option<Duration>> {
    let seconds: f64 = value.trim().parse().ok()?;
    if seconds == 0.0 {
        return Some(None);
    }
    let timeout = Duration::try_from_secs_f64(seconds).ok()?;
    (timeout >= Duration::from_millis(1)).then_some(Some(timeout))
}

impl GpuDevice {
    /// How long a wait for the GPU (reading a tensor back, [`GpuDevice::synchronize`]) may
    /// go without any queued work finishing before it fails with [`DeviceError::Timeout`]
    /// rather than waiting forever; `None` waits forever. A timeout leaves the kernel that
    /// did not finish on the GPU: later work queues behind it.
    ///
    /// Starts at 10 minutes, or at the seconds in the environment variable
    /// `RUMUS_GPU_WAIT_TIMEOUT` when the device is opened (`0` for no limit).
    pub fn set_wait_timeout(&self, timeout: Option<Duration>) {
        *self.0.wait.timeout.lock().unwrap_or_else(|p| p.into_inner()) = timeout;
    }

    /// The limit set by [`GpuDevice::set_wait_timeout`].
    pub fn wait_timeout(&self) -> Option<Duration> {
        *self.0.wait.timeout.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for everything submitted so far, within the device's limit. `what` names the
    /// wait in the error ("a readback").
    pub(crate) fn wait_for_queue(&self, what: &str) -> Result<()> {
        self.wait_for_queue_within(what, self.wait_timeout())
    }

    /// [`GpuDevice::wait_for_queue`] with the limit given.
    /// A fault the device reported meanwhile (`fault.rs`) is the error, waited or not.
    pub(crate) fn wait_for_queue_within(&self, what: &str, timeout: Option<Duration>) -> Result<()> {
        self.check_faults()?;
        self.poll_within(what, timeout)?;
        self.check_faults()
    }

    fn poll_within(&self, what: &str, timeout: Option<Duration>) -> Result<()> {
        let failed = |e: wgpu::PollError| gpu_error(format!("waiting for {what} failed: {e}"));
        let Some(timeout) = timeout else {
            return self
                .poll(wgpu::PollType::wait_indefinitely())?
                .map(|_| ())
                .map_err(failed);
        };
        let finished = &self.0.wait.finished;
        loop {
            let before = finished.load(Ordering::Acquire);
            let wait = wgpu::PollType::Wait {
                submission_index: None,
                timeout: Some(timeout),
            };
            match self.poll(wait)? {
                Ok(_) => return Ok(()),
                Err(wgpu::PollError::Timeout) => {
                    // Runs the callbacks of submissions that finished during the wait.
                    let _ = self.poll(wgpu::PollType::Poll)?;
                    if finished.load(Ordering::Acquire) == before {
                        return Err(DeviceError::Timeout {
                            waiting_for: what.to_string(),
                            timeout,
                        }
                        .into());
                    }
                }
                Err(e) => return Err(failed(e)),
            }
        }
    }

    /// `wgpu::Device::poll`, whose panic when it finds the device lost (wgpu raises it after
    /// the device's lost callback has recorded the fault) becomes that fault, unprinted; any
    /// other panic of wgpu's becomes an error that carries its message.
    pub(crate) fn poll(
        &self,
        poll: wgpu::PollType,
    ) -> Result<std::result::Result<wgpu::PollStatus, wgpu::PollError>> {
        let device = &self.0.device;
        super::fault::catch_quietly(|| device.poll(poll)).map_err(|payload| {
            self.check_faults().err().unwrap_or_else(|| {
                let message = crate::error::panic_message(&*payload);
                gpu_error(format!("wgpu panicked while waiting for the GPU: {message}"))
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variable_reads_seconds_and_zero_as_no_limit() {
        assert_eq!(parse_timeout("0"), Some(None));
        assert_eq!(parse_timeout(" 2.5 "), Some(Some(Duration::from_millis(2500))));
        assert_eq!(parse_timeout("600"), Some(Some(Duration::from_secs(600))));
        assert_eq!(parse_timeout("0.001"), Some(Some(Duration::from_millis(1))));
        for bad in ["", "ten", "-1", "NaN", "inf", "1e400", "1e-10"] {
            assert_eq!(parse_timeout(bad), None, "{bad:?}");
        }
    }
}
