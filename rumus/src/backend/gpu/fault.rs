//! Faults the GPU reports after the call that caused them: a lost device (a driver reset,
//! a GPU taken away, [`GpuDevice::destroy`]) and the errors wgpu raises outside an error
//! scope (every use of a lost device's buffers is one). wgpu hands these to a handler that
//! panics by default, which would abort a training run at the next readback; rumus records
//! the first instead and returns it, as [`DeviceError::Fault`], from that readback, every
//! later wait and every later allocation on the device. Like a CUDA error, it is sticky:
//! work queued after a fault cannot be trusted, so the device stays unusable.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

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
