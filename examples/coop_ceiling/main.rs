//! How fast the GPU's matrix units run through WGSL cooperative matrices, without rumus's
//! product kernel around them: the limits behind `hgemm_N` in BENCHMARKS.md. Runs the entry
//! points of `probe.wgsl` (the product kernel's inner loop, whole and with parts taken
//! away) and prints each one's rate:
//!
//! ```text
//! cargo run --release --example coop_ceiling
//! ```
//!
//! Needs an adapter with cooperative matrices (16x16x16, f16 inputs, f32 sums) and subgroups
//! of 32; elsewhere it says so and exits.

use std::time::Instant;

/// Workgroups per dispatch: enough to fill every multiprocessor of a large GPU many times.
const WORKGROUPS: u32 = 2048;
/// Multiply-add steps per subgroup per dispatch (16 products of 16x16x16 each).
const STEPS: u32 = 2048;
/// Dispatches timed per entry point, after as many untimed ones.
const DISPATCHES: usize = 10;

fn main() {
    match run() {
        Ok(()) => {}
        Err(message) => {
            eprintln!("coop_ceiling: {message}");
            std::process::exit(1);
        }
    }
}

const FEATURES: wgpu::Features = wgpu::Features::SHADER_F16
    .union(wgpu::Features::SUBGROUP)
    .union(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX);

fn run() -> Result<(), String> {
    let instance =
        wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        ..Default::default()
    }))
    .map_err(|e| format!("no GPU adapter: {e}"))?;
    let info = adapter.get_info();
    let offers_16x16x16 = adapter.cooperative_matrix_properties().iter().any(|c| {
        (c.m_size, c.n_size, c.k_size) == (16, 16, 16)
            && c.ab_type == wgpu::CooperativeScalarType::F16
            && c.cr_type == wgpu::CooperativeScalarType::F32
    });
    if !adapter.features().contains(FEATURES)
        || !offers_16x16x16
        || info.subgroup_min_size != 32
        || info.subgroup_max_size != 32
    {
        return Err(format!(
            "{} has no 16x16x16 f16 cooperative matrices with subgroups of 32",
            info.name
        ));
    }
    // SAFETY: wgpu marks cooperative matrices experimental; the probe's kernels stay inside
    // their workgroup arrays and their one storage buffer.
    let experimental_features = unsafe { wgpu::ExperimentalFeatures::enabled() };
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("coop_ceiling"),
        required_features: FEATURES,
        required_limits: adapter.limits(),
        experimental_features,
        ..Default::default()
    }))
    .map_err(|e| format!("{} refused a device: {e}", info.name))?;
    println!("adapter {} ({:?})", info.name, info.driver_info);

    let sink = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("sink"),
        size: u64::from(WORKGROUPS) * 4 * 256 * 4,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    // SAFETY: every index in probe.wgsl is in bounds by construction (fixed array sizes,
    // `sink` sized for the dispatch), so wgpu's runtime checks would only add work, as in
    // rumus's own kernels.
    let module = unsafe {
        device.create_shader_module_trusted(
            wgpu::ShaderModuleDescriptor {
                label: Some("probe"),
                source: wgpu::ShaderSource::Wgsl(include_str!("probe.wgsl").into()),
            },
            wgpu::ShaderRuntimeChecks::unchecked(),
        )
    };
    let flops = 2.0 * 16f64.powi(3) * 16.0 * f64::from(STEPS) * 4.0 * f64::from(WORKGROUPS);
    // Read by `fetched`: 256 MiB of small halves (0x1400 is 0.00122), far more than the L2
    // cache; the probe folds its reads into the first 4 MiB or into all of it.
    let source_quads: u32 = 1 << 25;
    let source = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("source"),
        size: u64::from(source_quads) * 8,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    queue.write_buffer(
        &source,
        0,
        &vec![0x14u8; usize::try_from(source.size()).map_err(|e| e.to_string())?],
    );
    // (entry point, steps between barriers, scalar tiles, quads of `source` read, `direct`
    // loading a step ahead): the product kernel's loop is `staged` at 2 with quads, and
    // `fetched` with its copies.
    let probes = [
        ("registers", 0, false, 1, false),
        ("staged", 2, false, 1, false),
        ("staged", 4, false, 1, false),
        ("staged", 0, false, 1, false),
        ("staged", 2, true, 1, false),
        ("fetched", 2, false, 1 << 19, false),
        ("fetched", 2, false, source_quads, false),
        ("direct", 0, false, 1 << 19, false),
        ("direct", 0, false, source_quads / 2, false),
        ("direct", 0, false, 1 << 19, true),
        ("direct", 0, false, source_quads / 2, true),
    ];

    for (entry, barrier_every, scalar_tiles, quads_read, ahead) in probes {
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(entry),
            layout: None,
            module: &module,
            entry_point: Some(entry),
            compilation_options: wgpu::PipelineCompilationOptions {
                constants: &[
                    ("STEPS", f64::from(STEPS)),
                    ("BARRIER_EVERY", f64::from(barrier_every)),
                    ("SCALAR_TILES", f64::from(u8::from(scalar_tiles))),
                    ("SOURCE_QUADS", f64::from(quads_read)),
                    ("AHEAD", f64::from(u8::from(ahead))),
                ],
                zero_initialize_workgroup_memory: false,
            },
            cache: None,
        });
        let layout = pipeline.get_bind_group_layout(0);
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: sink.as_entire_binding(),
        }];
        if entry != "registers" && entry != "staged" {
            entries.push(wgpu::BindGroupEntry {
                binding: 1,
                resource: source.as_entire_binding(),
            });
        }
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(entry),
            layout: &layout,
            entries: &entries,
        });
        let run_dispatches = |count: usize| -> Result<f64, String> {
            let mut encoder = device.create_command_encoder(&Default::default());
            {
                let mut pass = encoder.begin_compute_pass(&Default::default());
                pass.set_pipeline(&pipeline);
                pass.set_bind_group(0, &bind_group, &[]);
                for _ in 0..count {
                    pass.dispatch_workgroups(WORKGROUPS, 1, 1);
                }
            }
            let start = Instant::now();
            queue.submit([encoder.finish()]);
            device
                .poll(wgpu::PollType::wait_indefinitely())
                .map_err(|e| format!("waiting for the GPU failed: {e}"))?;
            Ok(start.elapsed().as_secs_f64())
        };
        run_dispatches(DISPATCHES)?;
        let seconds = run_dispatches(DISPATCHES)?;
        let rate = flops * DISPATCHES as f64 / seconds / 1e9;
        let footprint = if entry == "fetched" || entry == "direct" {
            format!(
                " source={} MiB ahead={ahead}",
                (u64::from(quads_read) * 8) >> 20
            )
        } else {
            String::new()
        };
        println!(
            "{entry} barrier_every={barrier_every} scalar_tiles={scalar_tiles}{footprint} {rate:.1} GFLOP/s"
        );
    }
    Ok(())
}
