//! Opening a Vulkan device with `VK_NV_cooperative_matrix2`, for `shaders/matmul_tensor.comp`.
//!
//! The extension gives cooperative matrices of workgroup scope and tensor addressing: a
//! workgroup loads whole slices of its operands from memory in one call and the driver stages
//! them, where `matmul_coop.wgsl` must copy every block through workgroup memory itself. On an
//! H200 that lifts a 4096 f16 product from about 100 to about 150 TFLOP/s (BENCHMARKS.md).
//! wgpu knows nothing of the extension: rumus enables it at device creation through wgpu's
//! Vulkan hook and runs the kernel as SPIR-V passed through unchanged. Every step checks
//! what the adapter reports first, and any refusal leaves the ordinary device path to run.
//!
//! On by default where the adapter offers it; `RUMUS_GPU_NO_COOPMAT2` turns it off. Its first
//! builds wrote the output through one buffer bound twice, as f16 and as f32; on an H200
//! (driver 580.159.04) the f32 stores were lost or hung the GPU, and a bias added in the
//! kernel (`coopMatPerElementNV`) came out wrong. Each build now has one output binding of its
//! own type (`matmul_tensor.comp`'s header) and adds no bias (`matmul.rs`,
//! `tensor_takes_bias`); with those, `gpu_products` (every product variant as a case of its
//! own, read back and read by a following kernel) passed 38/38 and `mixed_precision` 10/10 on
//! an H200, and the whole GPU suite passed. `RUMUS_GPU_TRACE` (batch.rs) names the kernel a
//! hang is in, and how long each pipeline took to build.

use std::ffi::{CStr, c_void};

use ash::vk;
use wgpu::hal::api::Vulkan;

use super::matmul::{COOP_STAGE_K, COOP_TILE};

/// The extension's name, and its feature and property structures' types (the registry's
/// extension 594; ash 0.38 predates it).
const EXTENSION: &CStr = c"VK_NV_cooperative_matrix2";
const FEATURES_TYPE: i32 = 1_000_593_000;
const FLEXIBLE_DIMENSIONS_TYPE: i32 = 1_000_593_001;
/// `VkComponentTypeKHR` values and `VkScopeKHR`'s workgroup.
const FLOAT16: i32 = 0;
const FLOAT32: i32 = 1;
const WORKGROUP_SCOPE: i32 = 2;

/// The invocations of one `matmul_tensor.comp` workgroup (`local_size_x`). Its matrices are
/// `COOP_TILE` square, stepping `COOP_STAGE_K` along K, as `matmul_coop`'s.
pub(crate) const WORKGROUP: u32 = 128;

/// `VkPhysicalDeviceCooperativeMatrix2FeaturesNV`.
#[repr(C)]
#[derive(Clone, Copy)]
struct Features {
    s_type: vk::StructureType,
    p_next: *mut c_void,
    workgroup_scope: vk::Bool32,
    flexible_dimensions: vk::Bool32,
    reductions: vk::Bool32,
    conversions: vk::Bool32,
    per_element_operations: vk::Bool32,
    tensor_addressing: vk::Bool32,
    block_loads: vk::Bool32,
}

impl Features {
    fn none() -> Self {
        Features {
            s_type: vk::StructureType::from_raw(FEATURES_TYPE),
            p_next: std::ptr::null_mut(),
            workgroup_scope: 0,
            flexible_dimensions: 0,
            reductions: 0,
            conversions: 0,
            per_element_operations: 0,
            tensor_addressing: 0,
            block_loads: 0,
        }
    }

    /// What the kernel uses: matrices of workgroup scope, sizes other than the subgroup
    /// ones, the f32 -> f16 conversion, the bias added element by element, tensor layouts.
    fn needed() -> Self {
        Features {
            workgroup_scope: vk::TRUE,
            flexible_dimensions: vk::TRUE,
            conversions: vk::TRUE,
            per_element_operations: vk::TRUE,
            tensor_addressing: vk::TRUE,
            ..Features::none()
        }
    }

    fn covers(&self, needed: &Features) -> bool {
        let pairs = [
            (self.workgroup_scope, needed.workgroup_scope),
            (self.flexible_dimensions, needed.flexible_dimensions),
            (self.conversions, needed.conversions),
            (self.per_element_operations, needed.per_element_operations),
            (self.tensor_addressing, needed.tensor_addressing),
        ];
        pairs.iter().all(|&(offered, asked)| offered != 0 || asked == 0)
    }
}

/// `VkCooperativeMatrixFlexibleDimensionsPropertiesNV`: one matrix configuration the
/// adapter runs, for sizes that are multiples of the granularities.
#[repr(C)]
#[derive(Clone, Copy)]
struct FlexibleDimensions {
    s_type: vk::StructureType,
    p_next: *mut c_void,
    m_granularity: u32,
    n_granularity: u32,
    k_granularity: u32,
    a_type: i32,
    b_type: i32,
    c_type: i32,
    result_type: i32,
    saturating_accumulation: vk::Bool32,
    scope: i32,
    workgroup_invocations: u32,
}

type FlexibleDimensionsQuery = unsafe extern "system" fn(
    vk::PhysicalDevice,
    *mut u32,
    *mut FlexibleDimensions,
) -> vk::Result;

/// Whether `config` covers the kernel's 128x128 tiles over K steps of 32: f16 operands, f32
/// sums, workgroup scope with 128 invocations.
fn fits_the_kernel(config: &FlexibleDimensions) -> bool {
    let divides = |granularity: u32, size: u32| granularity > 0 && size.is_multiple_of(granularity);
    config.a_type == FLOAT16
        && config.b_type == FLOAT16
        && config.c_type == FLOAT32
        && config.result_type == FLOAT32
        && config.scope == WORKGROUP_SCOPE
        && config.workgroup_invocations == WORKGROUP
        && divides(config.m_granularity, COOP_TILE as u32)
        && divides(config.n_granularity, COOP_TILE as u32)
        && divides(config.k_granularity, COOP_STAGE_K as u32)
}

/// Whether the Vulkan adapter under `adapter` offers what `matmul_tensor.comp` needs.
fn offers_the_kernel(adapter: &wgpu::hal::vulkan::Adapter) -> bool {
    if !adapter
        .physical_device_capabilities()
        .supports_extension(EXTENSION)
    {
        return false;
    }
    let shared = adapter.shared_instance();
    let instance = shared.raw_instance();
    let physical = adapter.raw_physical_device();
    let mut offered = Features::none();
    let mut features = vk::PhysicalDeviceFeatures2 {
        p_next: (&raw mut offered).cast(),
        ..Default::default()
    };
    // SAFETY: `features` heads a valid chain of one structure the extension defines (it is
    // supported, checked above), laid out as the registry declares it.
    unsafe { instance.get_physical_device_features2(physical, &mut features) };
    if !offered.covers(&Features::needed()) {
        return false;
    }
    // SAFETY: the name is a NUL-terminated command of the supported extension.
    let query = unsafe {
        shared.entry().get_instance_proc_addr(
            instance.handle(),
            c"vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV".as_ptr(),
        )
    };
    let Some(query) = query else {
        return false;
    };
    // SAFETY: the loader returned this command's address under its name, whose signature
    // `FlexibleDimensionsQuery` is.
    let query: FlexibleDimensionsQuery = unsafe { std::mem::transmute(query) };
    let mut count = 0u32;
    // SAFETY: a count query (null array) of the command above.
    if unsafe { query(physical, &mut count, std::ptr::null_mut()) } != vk::Result::SUCCESS {
        return false;
    }
    let blank = FlexibleDimensions {
        s_type: vk::StructureType::from_raw(FLEXIBLE_DIMENSIONS_TYPE),
        p_next: std::ptr::null_mut(),
        m_granularity: 0,
        n_granularity: 0,
        k_granularity: 0,
        a_type: 0,
        b_type: 0,
        c_type: 0,
        result_type: 0,
        saturating_accumulation: 0,
        scope: 0,
        workgroup_invocations: 0,
    };
    let mut configs = vec![blank; count as usize];
    // SAFETY: `configs` holds `count` initialised structures of the command's type.
    let listed = unsafe { query(physical, &mut count, configs.as_mut_ptr()) };
    listed == vk::Result::SUCCESS && configs[..count as usize].iter().any(fits_the_kernel)
}

/// A device with the extension enabled beside `features`, or `None` where the adapter is not
/// Vulkan, lacks anything the kernel needs, or refuses the device.
///
/// # Safety
///
/// `experimental` must be what the caller would pass to `request_device` for `features`
/// (cooperative matrices are experimental in wgpu).
pub(crate) unsafe fn open(
    adapter: &wgpu::Adapter,
    features: wgpu::Features,
    limits: &wgpu::Limits,
    experimental: wgpu::ExperimentalFeatures,
) -> Option<(wgpu::Device, wgpu::Queue)> {
    let features = features | wgpu::Features::PASSTHROUGH_SHADERS;
    if !adapter.features().contains(features) {
        return None;
    }
    let opened = {
        // SAFETY: the hal adapter is only read here, and dropped before wgpu uses it again.
        let hal = unsafe { adapter.as_hal::<Vulkan>() }?;
        if !offers_the_kernel(&hal) {
            return None;
        }
        let callback = move |args: wgpu::hal::vulkan::CreateDeviceCallbackArgs<'_, '_, '_>| {
            args.extensions.push(EXTENSION);
            // The structure must outlive device creation, which happens after this returns;
            // one small leak per opened device (one per process).
            let enabled = Box::leak(Box::new(Features {
                p_next: args.create_info.p_next.cast_mut(),
                ..Features::needed()
            }));
            args.create_info.p_next = (enabled as *const Features).cast();
        };
        // SAFETY: the callback only adds an extension the adapter supports and features it
        // reports (both checked by `offers_the_kernel`), prepended to the create-info chain.
        unsafe {
            hal.open_with_callback(
                features,
                limits,
                &wgpu::MemoryHints::Performance,
                Some(Box::new(callback)),
            )
        }
        .ok()?
    };
    let descriptor = wgpu::DeviceDescriptor {
        label: Some("rumus"),
        required_features: features,
        required_limits: limits.clone(),
        experimental_features: experimental,
        ..Default::default()
    };
    // SAFETY: `opened` was made from this adapter's own hal adapter with these features and
    // limits.
    unsafe { adapter.create_device_from_hal(opened, &descriptor) }.ok()
}

/// The SPIR-V of `shaders/matmul_tensor.comp` for A and B each row-major or column-major,
/// writing f16 or (`f32_out`) f32 results (built by `shaders/spirv/build.sh`).
pub(crate) fn matmul_tensor_spirv(a_row_major: bool, b_row_major: bool, f32_out: bool) -> Vec<u32> {
    macro_rules! built {
        ($name:literal) => {
            include_bytes!(concat!("../../../shaders/spirv/matmul_tensor_", $name, ".spv"))
        };
    }
    let bytes: &[u8] = match (a_row_major, b_row_major, f32_out) {
        (false, false, false) => built!("a0_b0_f0"),
        (false, false, true) => built!("a0_b0_f1"),
        (false, true, false) => built!("a0_b1_f0"),
        (false, true, true) => built!("a0_b1_f1"),
        (true, false, false) => built!("a1_b0_f0"),
        (true, false, true) => built!("a1_b0_f1"),
        (true, true, false) => built!("a1_b1_f0"),
        (true, true, true) => built!("a1_b1_f1"),
    };
    bytes
        .chunks_exact(4)
        .map(|word| u32::from_le_bytes([word[0], word[1], word[2], word[3]]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::matmul_tensor_spirv;

    /// FNV-1a of `text`, as `shaders/spirv/build.sh` records it.
    fn fnv1a(text: &[u8]) -> u64 {
        text.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        })
    }

    /// The committed SPIR-V was built from the GLSL as it is now: CI has no GPU with the
    /// extension, so a kernel edited without rebuilding would otherwise pass CI unnoticed.
    #[test]
    fn spirv_is_built_from_the_current_source() {
        let source = include_str!("../../../shaders/matmul_tensor.comp");
        let recorded = include_str!("../../../shaders/spirv/matmul_tensor.spv.source-fnv1a");
        assert_eq!(
            recorded.trim(),
            format!("{:016x}", fnv1a(source.as_bytes())),
            "shaders/matmul_tensor.comp changed since its SPIR-V was built: run shaders/spirv/build.sh"
        );
        for variant in 0..8 {
            let words = matmul_tensor_spirv(variant & 1 != 0, variant & 2 != 0, variant & 4 != 0);
            assert_eq!(words.first(), Some(&0x0723_0203), "SPIR-V magic");
        }
    }
}
