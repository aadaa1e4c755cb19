//! Recording kernels: many dispatches go into one compute pass and are submitted together,
//! never one submit (and certainly never one wait) per op. Measured on an H200, a batched
//! dispatch costs ~4 µs against ~67 µs with a wait per op.
//!
//! Each dispatch gets a 256-byte slot of a parameter arena (sizes, strides, scalars); the
//! arena is written once, just before its batch is submitted, which orders it before the
//! batch's kernels and after the previous batch's (queue writes and submits run in order).
//!
//! A batch also goes out early when the GPU has run out of work: after a wait (a loss read
//! back, a loss scaler's overflow check) the GPU would otherwise sit idle while the host
//! records up to a whole batch of the next step.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::context::GpuDevice;
use super::pipelines::Module;
use super::profile::Profiler;

/// Words in one parameter slot.
pub(crate) const PARAM_WORDS: usize = 64;
/// Dispatches recorded before a batch is submitted on its own.
const SLOTS: usize = 1024;
/// Every this many dispatches the recorder asks whether the GPU has finished all it was
/// given, and if so submits what it has.
const IDLE_CHECK: usize = 64;

pub(crate) struct Batch {
    encoder: Option<wgpu::CommandEncoder>,
    pass: Option<wgpu::ComputePass<'static>>,
    params: Vec<u32>,
    used: usize,
    slot_bytes: u64,
    arena: wgpu::Buffer,
    /// Submissions the GPU has not finished yet.
    in_flight: Arc<AtomicUsize>,
    /// Timestamps around each dispatch while kernel profiling is on.
    pub profiler: Option<Profiler>,
}

impl Batch {
    pub fn new(device: &wgpu::Device, limits: &wgpu::Limits) -> Self {
        let slot_bytes =
            (PARAM_WORDS as u64 * 4).max(u64::from(limits.min_storage_buffer_offset_alignment));
        let arena = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("rumus kernel parameters"),
            size: slot_bytes * SLOTS as u64,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Batch {
            encoder: None,
            pass: None,
            params: Vec::new(),
            used: 0,
            slot_bytes,
            arena,
            in_flight: Arc::new(AtomicUsize::new(0)),
            profiler: None,
        }
    }

    /// Dispatches recorded before the batch is submitted on its own.
    pub fn slots(&self) -> usize {
        SLOTS
    }
}

/// The buffers a dispatch binds: binding number and buffer (binding 0 is the parameters).
pub(crate) type Bindings<'a> = &'a [(u32, &'a wgpu::Buffer)];

impl GpuDevice {
    /// Queues one kernel launch of `groups` workgroups.
    pub(crate) fn dispatch(
        &self,
        module: Module,
        entry: &'static str,
        params: &[u32],
        bindings: Bindings<'_>,
        groups: [u32; 3],
    ) {
        debug_assert!(params.len() <= PARAM_WORDS);
        if groups.contains(&0) {
            return;
        }
        let ctx = &self.0;
        let compiled = ctx.pipelines.get(&ctx.device, module, entry);
        let mut batch = ctx.batch.lock().unwrap_or_else(|p| p.into_inner());
        if batch.used == SLOTS {
            submit_locked(self, &mut batch);
        }
        let slot = batch.used;
        batch.used += 1;
        let words_per_slot = (batch.slot_bytes / 4) as usize;
        batch.params.resize((slot + 1) * words_per_slot, 0);
        batch.params[slot * words_per_slot..slot * words_per_slot + params.len()]
            .copy_from_slice(params);
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: &batch.arena,
                offset: slot as u64 * batch.slot_bytes,
                size: std::num::NonZeroU64::new(batch.slot_bytes),
            }),
        }];
        entries.extend(
            bindings
                .iter()
                .map(|&(binding, buffer)| wgpu::BindGroupEntry {
                    binding,
                    resource: buffer.as_entire_binding(),
                }),
        );
        let bind_group = ctx.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &compiled.layout,
            entries: &entries,
        });
        if batch.pass.is_none() {
            let pass = open_encoder(&ctx.device, &mut batch)
                .begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: None,
                    timestamp_writes: None,
                })
                .forget_lifetime();
            batch.pass = Some(pass);
        }
        let Batch { pass, profiler, .. } = &mut *batch;
        let pass = pass.as_mut().expect("just opened");
        pass.set_pipeline(&compiled.pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        let launch = |pass: &mut wgpu::ComputePass<'static>| {
            pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
        };
        match profiler {
            Some(profiler) => {
                let name = profiler.name(module, entry, params);
                profiler.bracket(pass, slot, name, launch)
            }
            None => launch(pass),
        }
        if tracing() {
            trace(self, &mut batch, (module, entry), params, groups);
            return;
        }
        if batch.used.is_multiple_of(IDLE_CHECK) && batch.profiler.is_none() {
            // A non-blocking poll runs the callbacks of finished submissions.
            let _ = self.poll(wgpu::PollType::Poll);
            if batch.in_flight.load(Ordering::Acquire) == 0 {
                submit_locked(self, &mut batch);
            }
        }
    }

    /// Closes the compute pass and hands the encoder to `f` (for copies), in queue order.
    pub(crate) fn with_encoder<R>(&self, f: impl FnOnce(&mut wgpu::CommandEncoder) -> R) -> R {
        let ctx = &self.0;
        let mut batch = ctx.batch.lock().unwrap_or_else(|p| p.into_inner());
        batch.pass = None;
        f(open_encoder(&ctx.device, &mut batch))
    }

    /// Submits everything recorded so far (does not wait).
    pub(crate) fn submit(&self) {
        let mut batch = self.0.batch.lock().unwrap_or_else(|p| p.into_inner());
        submit_locked(self, &mut batch);
    }
}

/// Whether `RUMUS_GPU_TRACE` is set: then every dispatch is printed to stderr (entry point,
/// grid, first parameters), submitted alone and waited for, up to `TRACE_WAIT`. A kernel
/// that hangs the GPU is the last one printed, followed by a line saying it did not finish;
/// everything runs far slower, since nothing is batched. Each pipeline's build is printed
/// too, with how long the driver took (pipelines.rs).
pub(crate) fn tracing() -> bool {
    static TRACING: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TRACING.get_or_init(|| std::env::var_os("RUMUS_GPU_TRACE").is_some())
}

const TRACE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Under `RUMUS_GPU_TRACE`: prints the dispatch just recorded, then submits and waits.
fn trace(
    device: &GpuDevice,
    batch: &mut Batch,
    (module, entry): (Module, &str),
    params: &[u32],
    groups: [u32; 3],
) {
    let shown = &params[..params.len().min(12)];
    eprintln!("rumus gpu trace: {entry} ({module:?}) groups {groups:?} params {shown:?}");
    submit_locked(device, batch);
    if let Err(e) = device.wait_for_queue_within(entry, Some(TRACE_WAIT)) {
        eprintln!("rumus gpu trace: {entry} did not finish within {TRACE_WAIT:?}: {e}");
    }
}

/// The batch's command encoder, created when the batch has none.
fn open_encoder<'a>(device: &wgpu::Device, batch: &'a mut Batch) -> &'a mut wgpu::CommandEncoder {
    batch.encoder.get_or_insert_with(|| {
        device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("rumus"),
        })
    })
}

fn submit_locked(device: &GpuDevice, batch: &mut Batch) {
    batch.pass = None;
    let Some(mut encoder) = batch.encoder.take() else {
        return;
    };
    let ctx = &device.0;
    if !batch.params.is_empty() {
        ctx.queue
            .write_buffer(&batch.arena, 0, bytemuck::cast_slice(&batch.params));
    }
    if let Some(profiler) = &batch.profiler {
        profiler.resolve(&mut encoder);
    }
    ctx.queue.submit([encoder.finish()]);
    batch.in_flight.fetch_add(1, Ordering::AcqRel);
    let in_flight = batch.in_flight.clone();
    let count_finished = ctx.wait.count_finished();
    ctx.queue.on_submitted_work_done(move || {
        in_flight.fetch_sub(1, Ordering::AcqRel);
        count_finished();
    });
    if let Some(profiler) = &mut batch.profiler {
        // A failed wait loses this batch's timings only; the kernels themselves ran.
        let _ = profiler.collect(device);
    }
    batch.params.clear();
    batch.used = 0;
}

/// Workgroup counts for `threads` invocations of a 256-wide kernel, split over x and y so no
/// dimension passes the 65,535 limit; the kernel rebuilds its index as `y * row + x` with
/// `row` (threads per grid row) passed in its parameters.
pub(crate) fn grid_1d(threads: usize) -> ([u32; 3], u32) {
    let groups = threads.div_ceil(256).max(1);
    let x = groups.min(65_535);
    let y = groups.div_ceil(x);
    ([x as u32, y as u32, 1], (x * 256) as u32)
}

/// Elements each thread of a strided element-wise kernel handles (`SPAN` in
/// elementwise.wgsl): several loads in flight per thread.
pub(crate) const ELEMENTS_PER_THREAD: usize = 4;

/// The grid of a strided element-wise kernel over `numel` elements: the grid, its threads per
/// row, and the threads launched (the distance between the elements of one thread).
pub(crate) fn grid_spread(numel: usize) -> ([u32; 3], u32, u32) {
    let (groups, row) = grid_1d(numel.div_ceil(ELEMENTS_PER_THREAD));
    (groups, row, row * groups[1])
}

/// Workgroup counts for `rows` workgroups (one per row), split like [`grid_1d`]; returns the
/// grid and its x size.
pub(crate) fn grid_rows(rows: usize) -> ([u32; 3], u32) {
    let x = rows.clamp(1, 65_535);
    let y = rows.div_ceil(x).max(1);
    ([x as u32, y as u32, 1], x as u32)
}
