//! Without a usable adapter, asking for a GPU is an error that says what to install, not a
//! panic. (Its own test binary: the default GPU is opened once per process.)

use rumus::{Device, DynTensor};

#[test]
fn no_adapter_is_an_error_that_says_what_to_do() {
    // A backend this platform does not have: wgpu finds no adapter.
    let missing = if cfg!(target_os = "macos") {
        "dx12"
    } else {
        "metal"
    };
    // SAFETY: the only test of this binary, set before any thread reads the environment.
    unsafe { std::env::set_var("WGPU_BACKEND", missing) };
    let message = Device::gpu().unwrap_err().to_string();
    assert!(message.contains("no GPU adapter"), "{message}");
    assert!(message.contains("mesa-vulkan-drivers"), "{message}");
    // The CPU keeps working.
    let x = DynTensor::ones(&[2], rumus::DType::F32).unwrap();
    assert_eq!(x.sum_all().unwrap().item::<f32>().unwrap(), 2.0);
}
