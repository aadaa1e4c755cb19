//! Launchers of `shaders/sparse.wgsl`: SpMM, SDDMM and the per-row maximum of messages; the
//! wgpu side of the [`Sparse`] contract. Operands are read contiguous (a strided one is
//! copied first); every kernel runs one thread per output element.

use super::batch::grid_1d;
use super::context::GpuDevice;
use super::elementwise::check_float;
use super::memory::GpuBuffer;
use super::pipelines::Module;
use crate::backend::contract::split_rows;
use crate::backend::{CsrPattern, Pointwise, Sparse, Src, check_index_dtype};
use crate::dtype::DType;
use crate::error::Result;

/// Parameter slots of `sparse.wgsl`.
mod slot {
    pub const THREADS: usize = 0;
    pub const WIDTH: usize = 1;
    pub const ROWS: usize = 2;
    pub const ENTRIES: usize = 3;
    pub const ROW: usize = 4;
    pub const DENSE_ROWS: usize = 5;
    pub const ROW_PTR: usize = 8;
    pub const COLS: usize = 9;
    pub const FIRST: usize = 10;
    pub const SECOND: usize = 11;
    pub const LEN: usize = 12;
}

/// An operand as a buffer read contiguous from an offset: itself, or a contiguous copy.
enum Contiguous<'a> {
    Borrowed(&'a GpuBuffer, usize),
    Owned(GpuBuffer),
}

impl<'a> Contiguous<'a> {
    fn of(gpu: &GpuDevice, x: Src<'a, GpuBuffer>) -> Result<Self> {
        if x.layout.is_contiguous() {
            Ok(Contiguous::Borrowed(x.memory, x.layout.offset()))
        } else {
            Ok(Contiguous::Owned(Pointwise::copy(gpu, x)?))
        }
    }

    fn buffer(&self) -> &wgpu::Buffer {
        match self {
            Contiguous::Borrowed(memory, _) => memory.raw(),
            Contiguous::Owned(memory) => memory.raw(),
        }
    }

    fn offset(&self) -> u32 {
        match self {
            Contiguous::Borrowed(_, offset) => *offset as u32,
            Contiguous::Owned(_) => 0,
        }
    }
}


impl GpuDevice {
    /// Runs `entry` with the pattern's arrays, the two float operands and the outputs bound,
    /// over `threads` threads.
    fn sparse_kernel(
        &self,
        entry: &'static str,
        (row_ptr, cols): (&Contiguous<'_>, &Contiguous<'_>),
        (first, second): (&Contiguous<'_>, &Contiguous<'_>),
        (rows, entries, width, dense_rows): (usize, usize, usize, usize),
        threads: usize,
        outputs: (&GpuBuffer, Option<&GpuBuffer>),
    ) {
        let (groups, row) = grid_1d(threads);
        let mut p = vec![0u32; slot::LEN];
        p[slot::THREADS] = threads as u32;
        p[slot::WIDTH] = width as u32;
        p[slot::ROWS] = rows as u32;
        p[slot::ENTRIES] = entries as u32;
        p[slot::ROW] = row;
        p[slot::DENSE_ROWS] = dense_rows as u32;
        p[slot::ROW_PTR] = row_ptr.offset();
        p[slot::COLS] = cols.offset();
        p[slot::FIRST] = first.offset();
        p[slot::SECOND] = second.offset();
        let groups = if threads == 0 { [0, 0, 0] } else { groups };
        let mut bindings = vec![
            (1, row_ptr.buffer()),
            (2, cols.buffer()),
            (3, first.buffer()),
            (4, second.buffer()),
            (5, outputs.0.raw()),
        ];
        if let Some(arg) = outputs.1 {
            bindings.push((6, arg.raw()));
        }
        // Entry points bind only what they read: segment_max reads no columns or second
        // operand.
        if entry == "segment_max" {
            bindings.retain(|(b, _)| *b != 2 && *b != 4);
        }
        self.dispatch(Module::Sparse, entry, &p, &bindings, groups);
    }

    /// Checks the pattern's dtypes and sizes for the 32-bit kernels and holds its arrays.
    fn pattern_arrays<'a>(
        &self,
        pattern: CsrPattern<'a, GpuBuffer>,
        op: &'static str,
    ) -> Result<(Contiguous<'a>, Contiguous<'a>)> {
        check_index_dtype(pattern.row_ptr.dtype(), op)?;
        check_index_dtype(pattern.cols.dtype(), op)?;
        Ok((
            Contiguous::of(self, pattern.row_ptr)?,
            Contiguous::of(self, pattern.cols)?,
        ))
    }
}

impl Sparse for GpuDevice {
    fn spmm(
        &self,
        pattern: CsrPattern<'_, GpuBuffer>,
        values: Src<'_, GpuBuffer>,
        x: Src<'_, GpuBuffer>,
    ) -> Result<GpuBuffer> {
        const OP: &str = "spmm";
        check_float(values.dtype(), OP)?;
        check_float(x.dtype(), OP)?;
        let (dense_rows, width) = split_rows(x.dims(), OP)?;
        let rows = pattern.row_ptr.numel().saturating_sub(1);
        let entries = pattern.cols.numel();
        let (row_ptr, cols) = self.pattern_arrays(pattern, OP)?;
        let (values, x) = (Contiguous::of(self, values)?, Contiguous::of(self, x)?);
        let out = GpuBuffer::uninit(self, rows * width, DType::F32, OP)?;
        self.sparse_kernel(
            OP,
            (&row_ptr, &cols),
            (&values, &x),
            (rows, entries, width, dense_rows),
            rows * width,
            (&out, None),
        );
        Ok(out)
    }

    fn sddmm(
        &self,
        pattern: CsrPattern<'_, GpuBuffer>,
        a: Src<'_, GpuBuffer>,
        b: Src<'_, GpuBuffer>,
    ) -> Result<GpuBuffer> {
        const OP: &str = "sddmm";
        check_float(a.dtype(), OP)?;
        check_float(b.dtype(), OP)?;
        let (_, width) = split_rows(a.dims(), OP)?;
        let (dense_rows, _) = split_rows(b.dims(), OP)?;
        let rows = pattern.row_ptr.numel().saturating_sub(1);
        let entries = pattern.cols.numel();
        let (row_ptr, cols) = self.pattern_arrays(pattern, OP)?;
        let (a, b) = (Contiguous::of(self, a)?, Contiguous::of(self, b)?);
        let out = GpuBuffer::uninit(self, entries, DType::F32, OP)?;
        self.sparse_kernel(
            OP,
            (&row_ptr, &cols),
            (&a, &b),
            (rows, entries, width, dense_rows),
            entries,
            (&out, None),
        );
        Ok(out)
    }

    fn segment_max(
        &self,
        row_ptr: Src<'_, GpuBuffer>,
        messages: Src<'_, GpuBuffer>,
    ) -> Result<(GpuBuffer, GpuBuffer)> {
        const OP: &str = "segment_max";
        check_float(messages.dtype(), OP)?;
        check_index_dtype(row_ptr.dtype(), OP)?;
        let (entries, width) = split_rows(messages.dims(), OP)?;
        let rows = row_ptr.numel().saturating_sub(1);
        let row_ptr = Contiguous::of(self, row_ptr)?;
        let messages = Contiguous::of(self, messages)?;
        let out = GpuBuffer::uninit(self, rows * width, DType::F32, OP)?;
        let arg = GpuBuffer::uninit(self, rows * width, DType::I64, OP)?;
        self.sparse_kernel(
            OP,
            (&row_ptr, &row_ptr),
            (&messages, &messages),
            (rows, entries, width, 0),
            rows * width,
            (&out, Some(&arg)),
        );
        Ok((out, arg))
    }
}
