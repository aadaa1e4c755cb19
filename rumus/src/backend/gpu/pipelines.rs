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
    Index,
    /// `norm.wgsl`: layer normalisation forward and backward.
    Norm,
    Optim,
    Window,
}

impl Module {
    fn source(self) -> &'static str {
        match self {
            Module::Elementwise => concat!(
                include_str!("../../../../shaders/elementwise.wgsl"),
                include_str!("../../../../shaders/half.wgsl")
            ),
            Module::Reduce => include_str!("../../../../shaders/reduce.wgsl"),
            Module::Matmul | Module::MatmulHalf => concat!(
                include_str!("../../../../shaders/matmul.wgsl"),
                include_str!("../../../../shaders/matmul_batch.wgsl")
            ),
            Module::MatmulCoop { .. } => concat!(
                include_str!("../../../../shaders/matmul_coop.wgsl"),
                include_str!("../../../../shaders/matmul_batch.wgsl"),
                include_str!("../../../../shaders/half.wgsl")
            ),
            Module::Index => include_str!("../../../../shaders/index.wgsl"),
            Module::Norm => include_str!("../../../../shaders/norm.wgsl"),
            Module::Optim => include_str!("../../../../shaders/optim.wgsl"),
            Module::Window => include_str!("../../../../shaders/window.wgsl"),
        }
    }
}

impl Module {
    /// Values of the module's pipeline-overridable constants.
    fn constants(self) -> &'static [(&'static str, f64)] {
        match self {
            Module::MatmulHalf => &[("HALF", 1.0)],
            Module::MatmulCoop {
                a_row_major,
                b_row_major,
            } => match (a_row_major, b_row_major) {
                (true, true) => &[("A_ROW_MAJOR", 1.0), ("B_ROW_MAJOR", 1.0)],
                (true, false) => &[("A_ROW_MAJOR", 1.0), ("B_ROW_MAJOR", 0.0)],
                (false, true) => &[("A_ROW_MAJOR", 0.0), ("B_ROW_MAJOR", 1.0)],
                (false, false) => &[("A_ROW_MAJOR", 0.0), ("B_ROW_MAJOR", 0.0)],
            },
            _ => &[],
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
    pub fn get(&self, device: &wgpu::Device, module: Module, entry: &'static str) -> Arc<Compiled> {
        let mut pipelines = self.pipelines.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(compiled) = pipelines.get(&(module, entry)) {
            return compiled.clone();
        }
        let mut modules = self.modules.lock().unwrap_or_else(|p| p.into_inner());
        let shader = modules.entry(module).or_insert_with(|| {
            let descriptor = wgpu::ShaderModuleDescriptor {
                label: Some(entry),
                source: wgpu::ShaderSource::Wgsl(module.source().into()),
            };
            // SAFETY: every kernel checks its own bounds against the sizes it is given (each
            // index is compared with the element count before it is read or written), so the
            // runtime bounds checks wgpu would add are redundant; they cost ~40x on a tiled
            // matrix product.
            unsafe {
                device.create_shader_module_trusted(
                    descriptor,
                    wgpu::ShaderRuntimeChecks::unchecked(),
                )
            }
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(entry),
            layout: None,
            module: shader,
            entry_point: Some(entry),
            compilation_options: wgpu::PipelineCompilationOptions {
                constants: module.constants(),
                // Every kernel writes its workgroup memory before reading it (matmul tiles,
                // reduction trees, the cooperative-matrix scratch), so wgpu's zeroing of it
                // at the start of each workgroup is wasted work.
                zero_initialize_workgroup_memory: false,
            },
            cache: None,
        });
        let layout = pipeline.get_bind_group_layout(0);
        let compiled = Arc::new(Compiled { pipeline, layout });
        pipelines.insert((module, entry), compiled.clone());
        compiled
    }
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
        ];
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
            for &(name, value) in module.constants() {
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

    /// The workgroup memory the adapter check asks for is what `matmul_coop.wgsl` declares.
    #[test]
    fn coop_workgroup_memory_is_what_the_adapter_check_asks_for() {
        let module = Module::MatmulCoop {
            a_row_major: true,
            b_row_major: true,
        };
        let parsed = naga::front::wgsl::parse_str(module.source()).expect("parses");
        let mut layouter = naga::proc::Layouter::default();
        layouter.update(parsed.to_ctx()).expect("lays out");
        let declared: u32 = parsed
            .global_variables
            .iter()
            .filter(|(_, v)| v.space == naga::AddressSpace::WorkGroup)
            .map(|(_, v)| layouter[v.ty].size)
            .sum();
        assert_eq!(declared, crate::backend::gpu::context::COOP_WORKGROUP_BYTES);
    }
}
