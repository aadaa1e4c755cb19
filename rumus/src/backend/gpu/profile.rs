//! Kernel timings, to find where a training step's time goes on the GPU.
//!
//! While profiling is on ([`GpuDevice::profile_kernels`]), every dispatch is bracketed by two
//! GPU timestamps, and each submitted batch waits for its timestamps and adds every kernel's
//! time to a table by entry point (products on cooperative matrices, column sums and casts to
//! `f16` by shape too). The waits serialise the batches, so a profiled run is slower than a
//! plain one: the table is for proportions. It needs an adapter with timestamp
//! queries inside compute passes (Vulkan on discrete GPUs and lavapipe offer them).

use std::collections::HashMap;

use super::context::{GpuDevice, gpu_error};
use super::pipelines::Module;
use crate::error::Result;

/// The features profiling needs; requested at device creation whenever the adapter has them.
pub(crate) const PROFILE_FEATURES: wgpu::Features =
    wgpu::Features::TIMESTAMP_QUERY.union(wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES);

pub use crate::backend::KernelTime;

/// The timestamp queries of one batch and the table they add to.
pub(crate) struct Profiler {
    queries: wgpu::QuerySet,
    resolved: wgpu::Buffer,
    readback: wgpu::Buffer,
    /// The name of each dispatch recorded in the current batch.
    pending: Vec<&'static str>,
    totals: HashMap<&'static str, KernelTime>,
    /// The names of kernels timed by shape, one per shape seen.
    shaped_names: HashMap<String, &'static str>,
}

impl Profiler {
    /// Room for `slots` dispatches a batch.
    pub fn new(device: &wgpu::Device, slots: usize) -> Self {
        let bytes = (2 * slots * 8) as u64;
        let buffer = |label, usage| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: bytes,
                usage,
                mapped_at_creation: false,
            })
        };
        Profiler {
            queries: device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("rumus kernel timestamps"),
                ty: wgpu::QueryType::Timestamp,
                count: (2 * slots) as u32,
            }),
            resolved: buffer(
                "rumus resolved timestamps",
                wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            ),
            readback: buffer(
                "rumus timestamp readback",
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            ),
            pending: Vec::new(),
            totals: HashMap::new(),
            shaped_names: HashMap::new(),
        }
    }

    /// The name a dispatch is timed under: its entry point, with its sizes for the kernels
    /// whose time depends on the shape far more than on the kernel: an `f16` product on
    /// cooperative matrices (sizes, operand layouts and K splits: `matmul_coop 8192x768x3072
    /// A@Bt x1 /1`, or `matmul_tensor ...`), a column sum (`sum_columns 8192x768 /256`: rows, columns, rows per
    /// chunk) and a cast to `f16` (`to_half 6291456`: elements). Each name is made once per
    /// shape (profiling only).
    pub fn name(&mut self, module: Module, entry: &'static str, params: &[u32]) -> &'static str {
        let word = |i: usize| params.get(i).copied().unwrap_or(0);
        let name = match (module, entry) {
            (
                Module::MatmulCoop {
                    a_row_major,
                    b_row_major,
                }
                | Module::MatmulTensor {
                    a_row_major,
                    b_row_major,
                    ..
                },
                _,
            ) => format!(
                "{entry} {}x{}x{} {}@{} x{} /{}",
                word(0),
                word(1),
                word(2),
                if a_row_major { "A" } else { "At" },
                if b_row_major { "B" } else { "Bt" },
                word(3),
                word(24).max(1),
            ),
            (Module::Reduce, "sum_columns") => {
                format!("{entry} {}x{} /{}", word(0), word(1), word(2))
            }
            (Module::Elementwise, "to_half") => format!("{entry} {}", word(0)),
            _ => return entry,
        };
        self.shaped_names
            .entry(name)
            .or_insert_with_key(|name| Box::leak(name.clone().into_boxed_str()))
    }

    /// Records the dispatch named `entry` (slot `slot` of the batch) between two timestamps.
    pub fn bracket(
        &mut self,
        pass: &mut wgpu::ComputePass<'static>,
        slot: usize,
        entry: &'static str,
        dispatch: impl FnOnce(&mut wgpu::ComputePass<'static>),
    ) {
        pass.write_timestamp(&self.queries, 2 * slot as u32);
        dispatch(pass);
        pass.write_timestamp(&self.queries, 2 * slot as u32 + 1);
        self.pending.push(entry);
    }

    /// Copies the batch's timestamps where they can be read, before the batch is submitted.
    pub fn resolve(&self, encoder: &mut wgpu::CommandEncoder) {
        let count = 2 * self.pending.len() as u32;
        if count == 0 {
            return;
        }
        encoder.resolve_query_set(&self.queries, 0..count, &self.resolved, 0);
        encoder.copy_buffer_to_buffer(&self.resolved, 0, &self.readback, 0, u64::from(count) * 8);
    }

    /// After the batch is submitted: waits for it and adds its kernels' times to the table.
    pub fn collect(&mut self, device: &GpuDevice) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let bytes = (self.pending.len() * 16) as u64;
        let slice = self.readback.slice(..bytes);
        slice.map_async(wgpu::MapMode::Read, |_| {});
        if let Err(e) = device.wait_for_queue("kernel timestamps") {
            // This batch's timings are lost; the next batch must find the buffer unmapped
            // (a submit that copies into a mapped buffer is refused) and the list empty.
            self.readback.unmap();
            self.pending.clear();
            return Err(e);
        }
        let period_ns = f64::from(device.0.queue.get_timestamp_period());
        let read = slice.get_mapped_range().map(|view| {
            let stamps: &[u64] = bytemuck::cast_slice(&view);
            for (entry, pair) in self.pending.iter().zip(stamps.chunks_exact(2)) {
                let time = self.totals.entry(entry).or_default();
                time.dispatches += 1;
                time.seconds += pair[1].saturating_sub(pair[0]) as f64 * period_ns * 1e-9;
            }
        });
        self.readback.unmap();
        self.pending.clear();
        read.map_err(|e| gpu_error(format!("reading kernel timestamps failed: {e}")))
    }
}

impl GpuDevice {
    /// Turns kernel profiling on (with an empty table) or off; see [`GpuDevice::kernel_times`].
    /// An error when the adapter has no timestamp queries inside compute passes.
    pub fn profile_kernels(&self, on: bool) -> Result<()> {
        self.submit();
        let mut batch = self.0.batch.lock().unwrap_or_else(|p| p.into_inner());
        if !on {
            batch.profiler = None;
            return Ok(());
        }
        if !self.0.device.features().contains(PROFILE_FEATURES) {
            return Err(gpu_error(format!(
                "{} has no timestamp queries inside compute passes, which kernel profiling \
                 needs",
                self.name()
            )));
        }
        batch.profiler = Some(Profiler::new(&self.0.device, batch.slots()));
        Ok(())
    }

    /// The time each kernel entry point (each size and layout of a cooperative-matrix product)
    /// took since profiling was turned on, longest first
    /// (queued kernels are submitted and waited for first).
    pub fn kernel_times(&self) -> Result<Vec<(&'static str, KernelTime)>> {
        self.synchronize()?;
        let batch = self.0.batch.lock().unwrap_or_else(|p| p.into_inner());
        let mut times: Vec<(&'static str, KernelTime)> = batch
            .profiler
            .as_ref()
            .map(|p| p.totals.iter().map(|(&e, &t)| (e, t)).collect())
            .unwrap_or_default();
        times.sort_by(|a, b| b.1.seconds.total_cmp(&a.1.seconds));
        Ok(times)
    }
}
