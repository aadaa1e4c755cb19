//! The fused cross-entropy's gradient on CUDA (`shaders/cuda/loss.cu`).

use super::context::CudaDevice;
use super::launch::{check_floating, dtype_suffix, views};
use super::memory::CudaBuffer;
use crate::backend::{Loss, Src};
use crate::dtype::DType;
use crate::error::{Error, Result};

impl Loss for CudaDevice {
    fn cross_entropy_grad(
        &self,
        logits: Src<'_, CudaBuffer>,
        lse_and_weights: Src<'_, CudaBuffer>,
        targets: Src<'_, CudaBuffer>,
    ) -> Result<CudaBuffer> {
        const OP: &str = "cross_entropy";
        if targets.dtype() != DType::I64 {
            return Err(Error::DType {
                op: OP,
                expected: "i64 class indices",
                found: targets.dtype(),
            });
        }
        let dtype = logits.dtype();
        if check_floating(OP, dtype).is_err() || lse_and_weights.dtype() != dtype {
            return Err(Error::DTypeMismatch {
                op: OP,
                lhs: dtype,
                rhs: lse_and_weights.dtype(),
            });
        }
        let dims = logits.dims();
        let n = logits.numel();
        let (classes, inner) = (dims[1] as i64, dims[2..].iter().product::<usize>() as i64);
        let out = CudaBuffer::uninit(self, n, dtype)?;
        let [vx] = views(OP, dims, [logits.layout])?;
        let [vp] = views(OP, lse_and_weights.dims(), [lse_and_weights.layout])?;
        let [vt] = views(OP, targets.dims(), [targets.layout])?;
        let kernel = self.kernel("loss", "cross_entropy_grad", [dtype_suffix(dtype), ""])?;
        let (o, px, pp, pt, n64) = (
            out.address(0),
            logits.memory.address(0),
            lse_and_weights.memory.address(0),
            targets.memory.address(0),
            n as i64,
        );
        self.launch_elements(
            kernel,
            n,
            &[&o, &px, &vx, &pp, &vp, &pt, &vt, &classes, &inner, &n64],
        )?;
        Ok(out)
    }
}
