//! Timing every kernel a CUDA device runs with CUDA events, for finding where a step's time
//! goes on machines without a profiler (`bench_gpu cuda profile`). Off by default: while on,
//! each launch records an event before and after itself on the device's stream.

use std::collections::HashMap;

use cudarc::driver::{result, sys};

use super::context::{CudaDevice, cuda_error};
use crate::backend::KernelTime;
use crate::error::Result;

/// One timed launch: what ran, and the events around it.
struct Timed {
    name: String,
    start: sys::CUevent,
    end: sys::CUevent,
}

/// The launches timed since profiling was turned on.
#[derive(Default)]
pub(crate) struct Profile(Option<Vec<Timed>>);

// SAFETY: events are used only with the device's context bound, under the profile's lock.
unsafe impl Send for Profile {}

fn destroy(timed: Vec<Timed>) {
    for t in timed {
        // SAFETY: created by `timed`, recorded, and no longer waited on.
        unsafe {
            let _ = result::event::destroy(t.start);
            let _ = result::event::destroy(t.end);
        }
    }
}

impl CudaDevice {
    /// Starts timing every kernel (discarding earlier times), or stops.
    pub fn profile_kernels(&self, on: bool) -> Result<()> {
        self.synchronize()?;
        let mut profile = self.0.profile.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(timed) = profile.0.take() {
            destroy(timed);
        }
        profile.0 = on.then(Vec::new);
        Ok(())
    }

    /// The GPU time of each kernel since profiling was turned on (waiting for the device),
    /// longest first; the times start over.
    pub fn kernel_times(&self) -> Result<Vec<(String, KernelTime)>> {
        self.synchronize()?;
        let mut profile = self.0.profile.lock().unwrap_or_else(|p| p.into_inner());
        let Some(timed) = profile.0.as_mut() else {
            return Ok(Vec::new());
        };
        let timed = std::mem::take(timed);
        let mut totals: HashMap<String, KernelTime> = HashMap::new();
        let mut failed = None;
        for t in &timed {
            // SAFETY: both events were recorded on this context's stream, which is idle.
            match unsafe { result::event::elapsed(t.start, t.end) } {
                Ok(ms) => {
                    let total = totals.entry(t.name.clone()).or_default();
                    total.dispatches += 1;
                    total.seconds += f64::from(ms) / 1e3;
                }
                Err(e) => failed = Some(e),
            }
        }
        destroy(timed);
        if let Some(e) = failed {
            return Err(cuda_error("reading a kernel's timing events", e));
        }
        let mut times: Vec<(String, KernelTime)> = totals.into_iter().collect();
        times.sort_by(|a, b| b.1.seconds.total_cmp(&a.1.seconds));
        Ok(times)
    }

    /// Runs `launch` (which queues work on the device's stream), between two events when
    /// profiling is on; `name` names what it queued.
    pub(crate) fn timed<R>(
        &self,
        name: impl FnOnce() -> String,
        launch: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        let mut profile = self.0.profile.lock().unwrap_or_else(|p| p.into_inner());
        let Some(timed) = profile.0.as_mut() else {
            drop(profile);
            return launch();
        };
        let event = || {
            result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
                .map_err(|e| cuda_error("creating a timing event", e))
        };
        let (start, end) = (event()?, event()?);
        let stream = self.raw_stream();
        // SAFETY: fresh events of this context, recorded on its stream.
        unsafe { result::event::record(start, stream) }
            .map_err(|e| cuda_error("recording a timing event", e))?;
        let out = launch();
        // SAFETY: as above.
        unsafe { result::event::record(end, stream) }
            .map_err(|e| cuda_error("recording a timing event", e))?;
        timed.push(Timed {
            name: name(),
            start,
            end,
        });
        out
    }
}
