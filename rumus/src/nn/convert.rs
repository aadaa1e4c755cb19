//! [`Module::to_dtype`]: every floating-point parameter and buffer converted in place.

use super::module::Module;
use crate::autograd::no_grad;
use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::DynTensor;

const OP: &str = "Module::to_dtype";

/// Checks every tensor first, so an error leaves the whole module as it was.
pub(super) fn convert_module(module: &(impl Module + ?Sized), dtype: DType) -> Result<()> {
    if !matches!(dtype, DType::F16 | DType::F32 | DType::F64) {
        return Err(Error::InvalidArgument {
            op: OP,
            message: format!("{dtype} is not a floating-point dtype; use f16, f32 or f64"),
        });
    }
    let floating: Vec<(String, DynTensor)> = (module.named_tensors().into_iter())
        .filter(|(_, t)| matches!(t.dtype(), DType::F16 | DType::F32 | DType::F64))
        .filter(|(_, t)| t.dtype() != dtype)
        .collect();
    for (name, tensor) in &floating {
        check_convertible(name, tensor, dtype)?;
    }
    let _guard = no_grad();
    for (name, tensor) in floating {
        // A tensor listed twice (a shared parameter) is converted the first time.
        if tensor.dtype() == dtype {
            continue;
        }
        let converted = tensor.detach().to_dtype(dtype)?;
        let storage = converted
            .into_storage()
            .ok_or_else(|| Error::InvalidArgument {
                op: OP,
                message: format!("`{name}`: the converted values are shared; nothing to adopt"),
            })?;
        tensor.storage().adopt(storage);
    }
    Ok(())
}

/// A tensor converts in place when it is all of its storage (not a view into a bigger one)
/// and the target dtype can live on its device.
fn check_convertible(name: &str, tensor: &DynTensor, dtype: DType) -> Result<()> {
    let layout = tensor.layout();
    let whole = layout.is_contiguous()
        && layout.offset() == 0
        && tensor.numel() * tensor.dtype().size_in_bytes() == tensor.storage().byte_len();
    if !whole {
        return Err(Error::InvalidArgument {
            op: OP,
            message: format!(
                "`{name}` is a view into a larger tensor; convert the tensor it views instead"
            ),
        });
    }
    if dtype == DType::F64 && matches!(tensor.device(), Device::Gpu(_)) {
        return Err(Error::InvalidArgument {
            op: OP,
            message: format!(
                "`{name}` is on a GPU, which holds no f64; move the module to the CPU first \
                 (`to_device(Device::Cpu)`)"
            ),
        });
    }
    Ok(())
}
