//! Every CUDA kernel source compiles with NVRTC for the architectures rumus targets, Ampere
//! (`compute_80`) and Hopper (`compute_90`). NVRTC needs no GPU, so CI runs this with the
//! `nvidia-cuda-nvrtc` wheel's library on `LD_LIBRARY_PATH`; a kernel that does not compile
//! fails here with NVRTC's log instead of on the first machine with an NVIDIA GPU.

mod common;

use rumus::backend::cuda::compile_every_kernel;
use rumus::{DeviceError, Error};

#[test]
fn every_cuda_kernel_compiles_for_ampere_and_hopper() {
    for arch in ["compute_80", "compute_90"] {
        match compile_every_kernel(arch) {
            Ok(modules) => assert!(modules > 0, "no kernel modules were compiled"),
            Err(missing @ Error::Device(DeviceError::NoCuda { .. })) => {
                common::gpu::skip(
                    "RUMUS_REQUIRE_NVRTC",
                    "the CUDA kernels' compilation",
                    missing,
                );
                return;
            }
            Err(failed) => panic!("{arch}: {failed}"),
        }
    }
}
