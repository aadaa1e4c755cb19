//! Sparse kernels on CUDA (`shaders/cuda/sparse.cu`): SpMM and the per-row maximum a thread
//! per output element, SDDMM a thread per entry; the CUDA side of the [`Sparse`] contract.
//! Operands are read contiguous (a strided one is copied first).

use super::context::CudaDevice;
use super::launch::dtype_suffix;
use super::memory::CudaBuffer;
use crate::backend::contract::split_rows;
use crate::backend::{CsrPattern, Pointwise, Sparse, Src, check_index_dtype};
use crate::dtype::DType;
use crate::error::{DeviceError, Result};

const MODULE: &str = "sparse";

/// An operand read contiguous: its device address, from a contiguous copy when needed (the
/// copy lives as long as this).
struct Contiguous {
    address: cudarc::driver::sys::CUdeviceptr,
    _copy: Option<CudaBuffer>,
}

impl Contiguous {
    fn of(device: &CudaDevice, x: Src<'_, CudaBuffer>) -> Result<Contiguous> {
        if x.layout.is_contiguous() {
            return Ok(Contiguous {
                address: x.memory.address(x.layout.offset()),
                _copy: None,
            });
        }
        let copy = Pointwise::copy(device, x)?;
        Ok(Contiguous {
            address: copy.address(0),
            _copy: Some(copy),
        })
    }
}


/// The float dtype the kernels have (f32 or f64), shared by both operands.
fn float_dtype(op: &'static str, a: DType, b: DType) -> Result<DType> {
    if a != b {
        return Err(crate::Error::DTypeMismatch { op, lhs: a, rhs: b });
    }
    if !matches!(a, DType::F32 | DType::F64) {
        return Err(DeviceError::UnsupportedDType { op, dtype: a }.into());
    }
    Ok(a)
}

impl Sparse for CudaDevice {
    fn spmm(
        &self,
        pattern: CsrPattern<'_, CudaBuffer>,
        values: Src<'_, CudaBuffer>,
        x: Src<'_, CudaBuffer>,
    ) -> Result<CudaBuffer> {
        const OP: &str = "spmm";
        let dtype = float_dtype(OP, values.dtype(), x.dtype())?;
        check_index_dtype(pattern.row_ptr.dtype(), OP)?;
        check_index_dtype(pattern.cols.dtype(), OP)?;
        let (columns, width) = split_rows(x.dims(), OP)?;
        let rows = pattern.row_ptr.numel().saturating_sub(1);
        let n = rows * width;
        let out = CudaBuffer::uninit(self, n, dtype)?;
        let (row_ptr, cols) = (Contiguous::of(self, pattern.row_ptr)?, Contiguous::of(self, pattern.cols)?);
        let (values, x) = (Contiguous::of(self, values)?, Contiguous::of(self, x)?);
        let kernel = self.kernel(MODULE, "spmm", [dtype_suffix(dtype), ""])?;
        let (o, width, entries, columns, n64, fault) = (
            out.address(0),
            width as i64,
            pattern.cols.numel() as i64,
            columns as i64,
            n as i64,
            self.fault_word(),
        );
        self.launch_elements(
            kernel,
            n,
            &[
                &o, &row_ptr.address, &cols.address, &values.address, &x.address, &width,
                &entries, &columns, &n64, &fault,
            ],
        )?;
        Ok(out)
    }

    fn sddmm(
        &self,
        pattern: CsrPattern<'_, CudaBuffer>,
        a: Src<'_, CudaBuffer>,
        b: Src<'_, CudaBuffer>,
    ) -> Result<CudaBuffer> {
        const OP: &str = "sddmm";
        let dtype = float_dtype(OP, a.dtype(), b.dtype())?;
        check_index_dtype(pattern.row_ptr.dtype(), OP)?;
        check_index_dtype(pattern.cols.dtype(), OP)?;
        let (_, width) = split_rows(a.dims(), OP)?;
        let (columns, _) = split_rows(b.dims(), OP)?;
        let rows = pattern.row_ptr.numel().saturating_sub(1);
        let n = pattern.cols.numel();
        let out = CudaBuffer::uninit(self, n, dtype)?;
        let (row_ptr, cols) = (Contiguous::of(self, pattern.row_ptr)?, Contiguous::of(self, pattern.cols)?);
        let (a, b) = (Contiguous::of(self, a)?, Contiguous::of(self, b)?);
        let kernel = self.kernel(MODULE, "sddmm", [dtype_suffix(dtype), ""])?;
        let (o, width, rows, columns, n64, fault) = (
            out.address(0),
            width as i64,
            rows as i64,
            columns as i64,
            n as i64,
            self.fault_word(),
        );
        self.launch_elements(
            kernel,
            n,
            &[
                &o, &row_ptr.address, &cols.address, &a.address, &b.address, &width, &rows,
                &columns, &n64, &fault,
            ],
        )?;
        Ok(out)
    }

    fn segment_max(
        &self,
        row_ptr: Src<'_, CudaBuffer>,
        messages: Src<'_, CudaBuffer>,
    ) -> Result<(CudaBuffer, CudaBuffer)> {
        const OP: &str = "segment_max";
        let dtype = float_dtype(OP, messages.dtype(), messages.dtype())?;
        check_index_dtype(row_ptr.dtype(), OP)?;
        let (entries, width) = split_rows(messages.dims(), OP)?;
        let rows = row_ptr.numel().saturating_sub(1);
        let n = rows * width;
        let out = CudaBuffer::uninit(self, n, dtype)?;
        let arg = CudaBuffer::uninit(self, n, DType::I64)?;
        let (row_ptr, messages) = (Contiguous::of(self, row_ptr)?, Contiguous::of(self, messages)?);
        let kernel = self.kernel(MODULE, "segment_max", [dtype_suffix(dtype), ""])?;
        let (o, a, width, entries, n64) = (
            out.address(0),
            arg.address(0),
            width as i64,
            entries as i64,
            n as i64,
        );
        self.launch_elements(
            kernel,
            n,
            &[&o, &a, &row_ptr.address, &messages.address, &width, &entries, &n64],
        )?;
        Ok((out, arg))
    }
}
