//! Opening a CUDA device. Where the NVIDIA driver or a CUDA library is missing (CI), an
//! error that names what is missing and where rumus looks for it; where a device opens, a
//! first op's result, and an out-of-range index reported as an error, not memory read out of
//! bounds. (Its own binary: a device opens once per process.)

mod common;

use rumus::{DType, Device, DynTensor};

#[test]
fn opening_cuda_names_what_is_missing_or_runs_kernels() {
    let device = match Device::cuda() {
        Ok(device) => device,
        Err(missing) => {
            let message = missing.to_string();
            assert!(
                message.contains("no CUDA device could be opened"),
                "{message}"
            );
            assert!(message.contains("LD_LIBRARY_PATH"), "{message}");
            let ordinal = Device::cuda_ordinal(4096).unwrap_err().to_string();
            assert!(
                ordinal.contains("no CUDA device could be opened"),
                "{ordinal}"
            );
            common::gpu::skip("RUMUS_REQUIRE_CUDA", "a CUDA device's kernels", message);
            return;
        }
    };
    assert!(device.to_string().starts_with("cuda:0 ("), "{device}");
    assert!(device.is_gpu() && device.is_cuda());
    let past = Device::cuda_ordinal(4096).unwrap_err().to_string();
    assert!(past.contains("there is no CUDA device 4096"), "{past}");

    let x = DynTensor::from_vec(vec![1.0f32, -2.0, 3.0, -4.0], &[2, 2])
        .unwrap()
        .to(&device)
        .unwrap();
    assert_eq!(x.device(), device);
    let total = x.relu().unwrap().sum_all().unwrap();
    assert_eq!(total.item::<f32>().unwrap(), 4.0);

    let index = DynTensor::from_vec(vec![0i64, 7], &[2, 1])
        .unwrap()
        .to(&device)
        .unwrap();
    let picked = x.gather(1, &index).unwrap();
    let message = picked.to_vec::<f32>().unwrap_err().to_string();
    assert!(message.contains("out of range"), "{message}");
    // The fault was reported once; the device keeps working.
    let ones = DynTensor::ones(&[3], DType::F32)
        .unwrap()
        .to(&device)
        .unwrap();
    assert_eq!(ones.sum_all().unwrap().item::<f32>().unwrap(), 3.0);
}
