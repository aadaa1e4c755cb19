//! The fused cross-entropy's gradient on CUDA (`shaders/cuda/loss.cu`).

use super::context::CudaDevice;
use super::launch::{check_floating, dtype_suffix, views};
use super::memory::CudaBuffer;
use crate::backend::{Loss, Src};
use crate::dtype::DType;
use crate::error::{Error, Result};

/// Threads of a block that takes one row of logits (a vocabulary of tens of thousands of
/// classes: many loads in flight per block).
const ROW_THREADS: u32 = 512;

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
        let [vp] = views(OP, lse_and_weights.dims(), [lse_and_weights.layout])?;
        let [vt] = views(OP, targets.dims(), [targets.layout])?;
        let (o, px, pp, pt) = (
            out.address(0),
            logits.memory.address(0),
            lse_and_weights.memory.address(0),
            targets.memory.address(0),
        );
        if inner == 1 && logits.layout.is_contiguous() && n > 0 {
            // Row-major [N, C]: a block per row.
            let rows = n as i64 / classes.max(1);
            let offset = logits.layout.offset() as i64;
            let kernel =
                self.kernel("loss", "cross_entropy_grad_rows", [dtype_suffix(dtype), ""])?;
            let blocks = (rows as u32).clamp(1, 65_535);
            self.launch(
                kernel,
                (blocks, 1, 1),
                (ROW_THREADS, 1, 1),
                0,
                &[&o, &px, &offset, &pp, &vp, &pt, &vt, &classes, &rows],
            )?;
            return Ok(out);
        }
        let [vx] = views(OP, dims, [logits.layout])?;
        let kernel = self.kernel("loss", "cross_entropy_grad", [dtype_suffix(dtype), ""])?;
        let n64 = n as i64;
        self.launch_elements(
            kernel,
            n,
            &[&o, &px, &vx, &pp, &vp, &pt, &vt, &classes, &inner, &n64],
        )?;
        Ok(out)
    }
}
