//! WGSL modules (from `shaders/`, one file per kernel family) and the compute pipelines made
//! from them, created on first use and cached by (module, entry point). Kernels take their
//! sizes from a parameter block at run time, so a new shape never compiles a new pipeline.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// One kernel family, one file in `shaders/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Module {
    Elementwise,
    Reduce,
    Matmul,
    /// `matmul.wgsl` specialised to read packed `f16` operands (`HALF = true`).
    MatmulHalf,
    /// `matmul_coop.wgsl`: `f16` products on cooperative matrices (tensor cores), made only
    /// on adapters that offer them (`GpuDevice::has_coop_matmul`), specialised to whether A
    /// and B are row-major (unit column stride) or column-major, so their loads carry no
    /// run-time branch.
    MatmulCoop { a_row_major: bool, b_row_major: bool },
    /// `matmul_tensor.comp`: the same products on `VK_NV_cooperative_matrix2`, made only on
    /// devices opened with it (`GpuDevice::has_tensor_matmul`). SPIR-V, not WGSL, built once
    /// per operand layout and output type, f16 or (`f32_out`) f32 (see [`PipelineCache::get`]).
    MatmulTensor {
        a_row_major: bool,
        b_row_major: bool,
        f32_out: bool,
    },
    Index,
    /// `norm.wgsl`: layer normalisation forward and backward.
    Norm,
    /// `attention.wgsl`: fused scaled dot-product attention forward and backward,
    /// specialised to a row width (16, 32, 64 or 128) so its per-row loops unroll, to
    /// whether it draws dropout (`WITH_DROPOUT`), and to whether it walks in several passes
    /// (`IN_PASSES`, on devices that end long loops).
    Attention {
        width: u32,
        dropout: bool,
        in_passes: bool,
    },
    /// `attention_coop.wgsl`: fused attention on cooperative matrices (autocast's, rows of
    /// 64), made only where `matmul_coop.wgsl` is; specialised to dropout as `Attention` is.
    AttentionCoop { dropout: bool },
    Optim,
    Window,
    /// `int8.wgsl`: quantized linear layers.
    Int8,
    /// `sparse.wgsl`: products with a compressed-row sparse matrix.
    Sparse,
    /// A custom op's WGSL (`ops::custom`), compiled with wgpu's bounds checks and an
    /// explicit bind group layout; see [`PipelineCache::custom`].
    Custom(CustomModule),
}

/// A custom op's module: its source (known by address, so a lookup hashes no text), the
/// number of inputs, and whether the entry is the backward one; the last two fix the
/// bind group layout.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CustomModule {
    pub source: &'static str,
    pub inputs: usize,
    pub backward: bool,
}

impl CustomModule {
    /// Per binding from 0 on, whether it is bound `read_write`: the output (written by the
    /// forward, read by the backward, so one module can declare it once for both) and the
    /// inputs' gradients; the parameters, the inputs and the output's gradient are read.
    fn writable(self) -> Vec<bool> {
        let n = self.inputs;
        let mut bindings = vec![false; n + 1];
        bindings.push(true);
        if self.backward {
            bindings.push(false);
            bindings.resize(2 * n + 3, true);
        }
        bindings
    }
}

impl PartialEq for CustomModule {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.source, other.source)
            && self.inputs == other.inputs
            && self.backward == other.backward
    }
}

impl Eq for CustomModule {}

impl std::hash::Hash for CustomModule {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (self.source.as_ptr(), self.source.len(), self.inputs, self.backward).hash(state);
    }
}

impl Module {
    /// The module's WGSL (`MatmulTensor`'s is SPIR-V, from `coopmat2::matmul_tensor_spirv`);
    /// the element-wise module starts with its op codes, generated from the Rust enums.
    fn source(self) -> &'static str {
        match self {
            Module::MatmulTensor { .. } => "",
            Module::Elementwise => {
                static SOURCE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
                SOURCE.get_or_init(|| {
                    super::elementwise::op_code_constants()
                        + concat!(
                            include_str!("../../../shaders/elementwise.wgsl"),
                            include_str!("../../../shaders/half.wgsl"),
                            include_str!("../../../shaders/dropout_draws.wgsl")
                        )
                })
            }
            Module::Reduce => include_str!("../../../shaders/reduce.wgsl"),
            Module::Matmul | Module::MatmulHalf => concat!(
                include_str!("../../../shaders/matmul.wgsl"),
                include_str!("../../../shaders/matmul_batch.wgsl")
            ),
            Module::MatmulCoop { .. } => concat!(
                include_str!("../../../shaders/matmul_coop.wgsl"),
                include_str!("../../../shaders/matmul_batch.wgsl"),
                include_str!("../../../shaders/half.wgsl")
            ),
            Module::Index => include_str!("../../../shaders/index.wgsl"),
            Module::Norm => include_str!("../../../shaders/norm.wgsl"),
            Module::Attention { .. } => concat!(
                include_str!("../../../shaders/attention.wgsl"),
                include_str!("../../../shaders/attention_common.wgsl"),
                include_str!("../../../shaders/dropout_draws.wgsl")
            ),
            Module::AttentionCoop { .. } => concat!(
                include_str!("../../../shaders/attention_coop.wgsl"),
                include_str!("../../../shaders/attention_common.wgsl"),
                include_str!("../../../shaders/dropout_draws.wgsl")
            ),
            Module::Optim => include_str!("../../../shaders/optim.wgsl"),
            Module::Window => include_str!("../../../shaders/window.wgsl"),
            Module::Int8 => include_str!("../../../shaders/int8.wgsl"),
            Module::Sparse => include_str!("../../../shaders/sparse.wgsl"),
            Module::Custom(custom) => custom.source,
        }
    }
}

impl Module {
    /// Values of the module's pipeline-overridable constants.
    fn constants(self) -> Vec<(&'static str, f64)> {
        let flag = |on: bool| if on { 1.0 } else { 0.0 };
        match self {
            Module::MatmulHalf => vec![("HALF", 1.0)],
            Module::Attention {
                width,
                dropout,
                in_passes,
            } => vec![
                ("WIDTH", f64::from(width)),
                ("WITH_DROPOUT", flag(dropout)),
                ("IN_PASSES", flag(in_passes)),
            ],
            // Without dropout the kernels carry no hashing code: on an H200 its mere presence
            // in the probability loops (never run) made GPT-2 small's forward attention
            // 2.7x slower.
            Module::AttentionCoop { dropout } => vec![("WITH_DROPOUT", flag(dropout))],
            Module::MatmulCoop {
                a_row_major,
                b_row_major,
            } => vec![
                ("A_ROW_MAJOR", flag(a_row_major)),
                ("B_ROW_MAJOR", flag(b_row_major)),
            ],
            _ => Vec::new(),
        }
    }
}

/// A pipeline and the layout of its bind group 0.
pub(crate) struct Compiled {
    pub pipeline: wgpu::ComputePipeline,
    pub layout: wgpu::BindGroupLayout,
}

#[derive(Default)]
pub(crate) struct PipelineCache {
    modules: Mutex<HashMap<Module, wgpu::ShaderModule>>,
    pipelines: Mutex<HashMap<(Module, &'static str), Arc<Compiled>>>,
}

impl PipelineCache {
    /// The pipeline of one of rumus's own kernels (a custom op's comes from
    /// [`custom`](Self::custom), which must have made it first).
    pub fn get(&self, device: &wgpu::Device, module: Module, entry: &'static str) -> Arc<Compiled> {
        debug_assert!(
            !matches!(module, Module::Custom(_)) || self.is_cached(module, entry),
            "a custom op's pipeline is made by PipelineCache::custom"
        );
        let mut pipelines = self.pipelines.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(compiled) = pipelines.get(&(module, entry)) {
            return compiled.clone();
        }
        // The driver compiles here, which can take long: under `RUMUS_GPU_TRACE` a run that
        // stops in a compile is told from one that stops in a kernel.
        let started = super::batch::tracing().then(|| {
            eprintln!("rumus gpu trace: building {entry} ({module:?})");
            std::time::Instant::now()
        });
        let compiled = Arc::new(if let Module::MatmulTensor {
            a_row_major,
            b_row_major,
            f32_out,
        } = module
        {
            let spirv = super::coopmat2::matmul_tensor_spirv(a_row_major, b_row_major, f32_out);
            passthrough_pipeline(device, entry, spirv)
        } else {
            let mut modules = self.modules.lock().unwrap_or_else(|p| p.into_inner());
            let shader = modules
                .entry(module)
                .or_insert_with(|| wgsl_module(device, module, entry));
            wgsl_pipeline(device, module, shader, entry)
        });
        if let Some(started) = started {
            eprintln!("rumus gpu trace: built {entry} in {:?}", started.elapsed());
        }
        pipelines.insert((module, entry), compiled.clone());
        compiled
    }

    fn is_cached(&self, module: Module, entry: &'static str) -> bool {
        let pipelines = self.pipelines.lock().unwrap_or_else(|p| p.into_inner());
        pipelines.contains_key(&(module, entry))
    }

    /// Makes (once) the pipeline of a custom op's `entry`, or returns why wgpu refused it:
    /// the WGSL does not compile, or its bindings are not the ones `ops::custom::Wgsl`
    /// documents. Unlike rumus's kernels, user code keeps wgpu's bounds checks.
    pub fn custom(
        &self,
        device: &wgpu::Device,
        custom: CustomModule,
        entry: &'static str,
    ) -> std::result::Result<(), String> {
        let module = Module::Custom(custom);
        if self.is_cached(module, entry) {
            return Ok(());
        }
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let shader = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(entry),
            source: wgpu::ShaderSource::Wgsl(custom.source.into()),
        });
        let bindings: Vec<(u32, bool)> = (0..)
            .zip(custom.writable())
            .collect();
        let compiled = pipeline_with_layout(device, &shader, entry, &bindings);
        if let Some(error) = pollster::block_on(scope.pop()) {
            return Err(error.to_string());
        }
        let compiled = Arc::new(compiled);
        let mut pipelines = self.pipelines.lock().unwrap_or_else(|p| p.into_inner());
        pipelines.insert((module, entry), compiled);
        Ok(())
    }
}

/// A WGSL module of rumus's own, without wgpu's runtime bounds checks.
fn wgsl_module(device: &wgpu::Device, module: Module, entry: &'static str) -> wgpu::ShaderModule {
    let descriptor = wgpu::ShaderModuleDescriptor {
        label: Some(entry),
        source: wgpu::ShaderSource::Wgsl(module.source().into()),
    };
    // SAFETY: every kernel checks its own bounds against the sizes it is given (each index
    // is compared with the element count before it is read or written), so the runtime
    // bounds checks wgpu would add are redundant; they cost ~40x on a tiled matrix product.
    unsafe { device.create_shader_module_trusted(descriptor, wgpu::ShaderRuntimeChecks::unchecked()) }
}

/// The pipeline of a WGSL entry point, its bind group layout derived from the shader.
fn wgsl_pipeline(
    device: &wgpu::Device,
    module: Module,
    shader: &wgpu::ShaderModule,
    entry: &'static str,
) -> Compiled {
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(entry),
        layout: None,
        module: shader,
        entry_point: Some(entry),
        compilation_options: wgpu::PipelineCompilationOptions {
            constants: &module.constants(),
            // Every kernel writes its workgroup memory before reading it (matmul tiles,
            // reduction trees, the cooperative-matrix scratch), so wgpu's zeroing of it at
            // the start of each workgroup is wasted work.
            zero_initialize_workgroup_memory: false,
        },
        cache: None,
    });
    let layout = pipeline.get_bind_group_layout(0);
    Compiled { pipeline, layout }
}

/// Storage bindings, each `(binding, writable)`, as one bind group layout.
fn storage_layout(device: &wgpu::Device, label: &str, bindings: &[(u32, bool)]) -> wgpu::BindGroupLayout {
    let entries: Vec<wgpu::BindGroupLayoutEntry> = bindings
        .iter()
        .map(|&(binding, writable)| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage {
                    read_only: !writable,
                },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        })
        .collect();
    device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some(label),
        entries: &entries,
    })
}

/// The pipeline of `matmul_tensor.comp`'s SPIR-V (`spirv`), passed to the driver unchanged (wgpu
/// cannot read the extension's instructions), so its bind group layout is written out here:
/// the parameters, A and B read; the output (3) written.
fn passthrough_pipeline(device: &wgpu::Device, entry: &'static str, spirv: Vec<u32>) -> Compiled {
    // SAFETY: the SPIR-V is built from shaders/matmul_tensor.comp, validated by spirv-val
    // when built, and needs only the features the device was opened with (coopmat2.rs); it
    // bounds every access by its tensor layouts.
    let shader = unsafe {
        device.create_shader_module_passthrough(wgpu::ShaderModuleDescriptorPassthrough {
            label: Some(entry),
            entry_points: vec![wgpu::PassthroughShaderEntryPoint {
                name: entry.into(),
                workgroup_size: (super::coopmat2::WORKGROUP, 1, 1),
            }]
            .into(),
            spirv: Some(spirv.into()),
            ..Default::default()
        })
    };
    let bindings = [(0, false), (1, false), (2, false), (3, true)];
    pipeline_with_layout(device, &shader, entry, &bindings)
}

/// The pipeline of `entry` in `shader` with its bind group layout given: storage `bindings`,
/// each `(binding, writable)`.
fn pipeline_with_layout(
    device: &wgpu::Device,
    shader: &wgpu::ShaderModule,
    entry: &'static str,
    bindings: &[(u32, bool)],
) -> Compiled {
    let layout = storage_layout(device, entry, bindings);
    let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some(entry),
        bind_group_layouts: &[Some(&layout)],
        immediate_size: 0,
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(entry),
        layout: Some(&pipeline_layout),
        module: shader,
        entry_point: Some(entry),
        compilation_options: Default::default(),
        cache: None,
    });
    Compiled { pipeline, layout }
}

#[cfg(test)]
mod tests {
    use super::Module;

    /// Every module in every specialisation, the pipeline constants applied.
    fn all_modules() -> Vec<Module> {
        let mut modules = vec![
            Module::Elementwise,
            Module::Reduce,
            Module::Matmul,
            Module::MatmulHalf,
            Module::Index,
            Module::Norm,
            Module::Optim,
            Module::Window,
            Module::Int8,
            Module::Sparse,
        ];
        for dropout in [false, true] {
            modules.push(Module::AttentionCoop { dropout });
            for width in [16, 32, 64, 128] {
                for in_passes in [false, true] {
                    modules.push(Module::Attention {
                        width,
                        dropout,
                        in_passes,
                    });
                }
            }
        }
        for a_row_major in [false, true] {
            for b_row_major in [false, true] {
                modules.push(Module::MatmulCoop {
                    a_row_major,
                    b_row_major,
                });
            }
        }
        modules
    }

    /// Each module parses, validates and translates to SPIR-V with naga, as wgpu does on a
    /// Vulkan adapter. CI's adapter (lavapipe) has no cooperative matrices, so without this
    /// a `matmul_coop.wgsl` that does not compile would pass CI and fail on the first GPU
    /// that offers them.
    #[test]
    fn every_module_compiles_to_spirv() {
        for module in all_modules() {
            let source = module.source();
            let parsed = naga::front::wgsl::parse_str(source)
                .unwrap_or_else(|e| panic!("{module:?}: {}", e.emit_to_string(source)));
            let mut validator = naga::valid::Validator::new(
                naga::valid::ValidationFlags::all(),
                naga::valid::Capabilities::all(),
            );
            let info = validator
                .validate(&parsed)
                .unwrap_or_else(|e| panic!("{module:?}: {}", e.emit_to_string(source)));
            let mut constants = naga::back::PipelineConstants::default();
            for (name, value) in module.constants() {
                constants.insert(name.to_string(), value);
            }
            let (specialised, info) =
                naga::back::pipeline_constants::process_overrides(&parsed, &info, None, &constants)
                    .unwrap_or_else(|e| panic!("{module:?}: pipeline constants: {e}"));
            let options = naga::back::spv::Options {
                lang_version: (1, 6),
                ..Default::default()
            };
            let words = naga::back::spv::write_vec(&specialised, &info, &options, None)
                .unwrap_or_else(|e| panic!("{module:?}: SPIR-V: {e}"));
            assert_eq!(words.first(), Some(&0x0723_0203), "{module:?}: SPIR-V magic");
        }
    }

    /// Each entry point of `attention_coop.wgsl` reaches exactly the bindings the launcher
    /// binds for it (a layout derived from the shader rejects any other set).
    #[test]
    fn coop_attention_entry_points_reach_the_bindings_the_launcher_binds() {
        use crate::backend::gpu::attention::Kernel;
        let source = Module::AttentionCoop { dropout: true }.source();
        let parsed = naga::front::wgsl::parse_str(source).expect("parses");
        let info = naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::all(),
        )
        .validate(&parsed)
        .expect("validates");
        for kernel in [Kernel::Forward, Kernel::Dq, Kernel::Dkv] {
            let index = parsed
                .entry_points
                .iter()
                .position(|e| e.name == kernel.coop_entry())
                .expect("entry point exists");
            let uses = info.get_entry_point(index);
            let mut reached: Vec<u32> = parsed
                .global_variables
                .iter()
                .filter(|&(handle, _)| !uses[handle].is_empty())
                .filter_map(|(_, v)| v.binding.as_ref().map(|b| b.binding))
                .collect();
            reached.sort_unstable();
            let launched: Vec<u32> = (0..5).chain(kernel.coop_bindings().iter().copied()).collect();
            assert_eq!(reached, launched, "{kernel:?}");
        }
    }

    /// Workgroup memory `module` declares, in bytes.
    fn workgroup_bytes(module: Module) -> u32 {
        let parsed = naga::front::wgsl::parse_str(module.source()).expect("parses");
        let mut layouter = naga::proc::Layouter::default();
        layouter.update(parsed.to_ctx()).expect("lays out");
        parsed
            .global_variables
            .iter()
            .filter(|(_, v)| v.space == naga::AddressSpace::WorkGroup)
            .map(|(_, v)| layouter[v.ty].size)
            .sum()
    }

    /// The workgroup memory the adapter check counts is what `matmul_coop.wgsl` and
    /// `attention_coop.wgsl` declare.
    #[test]
    fn coop_workgroup_memory_is_what_the_adapter_check_asks_for() {
        use crate::backend::gpu::context as asked;
        for (a_row_major, b_row_major) in [(true, true), (false, false)] {
            let matmul = Module::MatmulCoop {
                a_row_major,
                b_row_major,
            };
            assert_eq!(workgroup_bytes(matmul), asked::COOP_MATMUL_WORKGROUP_BYTES);
        }
        for dropout in [false, true] {
            let attention = Module::AttentionCoop { dropout };
            assert_eq!(workgroup_bytes(attention), asked::COOP_ATTENTION_WORKGROUP_BYTES);
        }
    }
}
