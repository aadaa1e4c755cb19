//! The CPU's side of the [`Custom`] contract: a custom op's own CPU kernels run on the host,
//! called by the op, which reads its inputs there itself.

use super::backend::Cpu;
use super::buffer::CpuBuffer;
use crate::backend::contract::{Custom, Src};
use crate::backend::kinds::CustomKernel;
use crate::error::Result;

impl Custom for Cpu {
    fn custom_forward(
        &self,
        _: &CustomKernel,
        _: &[Src<'_, CpuBuffer>],
        _: &[usize],
    ) -> Result<Option<CpuBuffer>> {
        Ok(None)
    }

    fn custom_backward(
        &self,
        _: &CustomKernel,
        _: &[Src<'_, CpuBuffer>],
        _: (Src<'_, CpuBuffer>, Src<'_, CpuBuffer>),
        _: &[bool],
    ) -> Result<Option<Vec<Option<CpuBuffer>>>> {
        Ok(None)
    }
}
