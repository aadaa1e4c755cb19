//! Weight matrices kept in GGML's 4- and 8-bit blocks (`q4_0`, `q4_1`, `q8_0`: 32 weights
//! share a scale, and for `q4_1` a minimum), multiplied without being expanded to f32: the
//! form in which GGUF files ship language models, and the one their decoding wants, since
//! a token's step reads every weight once and a 4-bit weight is read 7 times faster than an
//! f32 one.
//!
//! ```
//! use rumus::nn::block_quantized::{BlockFormat, BlockQuantized};
//! # fn main() -> rumus::Result<()> {
//! let w = rumus::DynTensor::randn(&[8, 64], rumus::DType::F32)?;
//! let q = BlockQuantized::quantize(BlockFormat::Q8_0, &w)?;
//! assert_eq!(q.bytes(), 8 * 2 * 34); // 8 rows of two 34-byte blocks
//! let x = rumus::DynTensor::randn(&[3, 64], rumus::DType::F32)?;
//! let (exact, approx) = (x.matmul(&w.transpose(0, 1)?)?, q.product(&x)?);
//! let gap = exact.sub(&approx)?.abs()?.max(&[0, 1], false)?.item::<f32>()?;
//! assert!(gap < 0.5, "{gap}");
//! # Ok(()) }
//! ```
//!
//! Products quantize each 32-long block of the activations to int8 with its own scale (as
//! llama.cpp does) and sum exact integer products (AVX2 where the CPU has it), so they differ
//! from the f32 product of the dequantized weights by at most half an activation step per
//! element, weighted by the weights (`tests/block_quantized.rs` checks that bound). They run
//! on the CPU, for inference: results carry no gradient.

use crate::backend::cpu::block_quant::{self, BLOCK, Blocks};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::DynTensor;

/// How a block of 32 weights is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BlockFormat {
    /// An f16 scale `d` and 32 4-bit levels `q`: weight `(q - 8) d` (18 bytes, 4.5 bits a
    /// weight).
    Q4_0,
    /// An f16 scale `d`, an f16 minimum `m` and 32 4-bit levels `q`: weight `q d + m` (20
    /// bytes, 5 bits a weight).
    Q4_1,
    /// An f16 scale `d` and 32 int8 values `q`: weight `q d` (34 bytes, 8.5 bits a weight).
    Q8_0,
}

impl BlockFormat {
    /// Bytes of one block of 32 weights.
    pub fn block_bytes(self) -> usize {
        self.blocks().bytes()
    }

    pub(crate) fn blocks(self) -> Blocks {
        match self {
            BlockFormat::Q4_0 => Blocks::Q4_0,
            BlockFormat::Q4_1 => Blocks::Q4_1,
            BlockFormat::Q8_0 => Blocks::Q8_0,
        }
    }
}

/// A `[rows, cols]` weight matrix in [`BlockFormat`] blocks, each row `cols / 32` blocks.
///
/// Held with the blocks of each eight rows interleaved (the layout the product kernels read
/// eight rows at a time from; the same bytes, the last group of rows padded to eight);
/// [`BlockQuantized::to_blocks`] gives them back in the file's order.
#[derive(Debug, Clone)]
pub struct BlockQuantized {
    format: BlockFormat,
    rows: usize,
    cols: usize,
    interleaved: Vec<u8>,
}

fn invalid(op: &'static str, message: String) -> Error {
    Error::InvalidArgument { op, message }
}

impl BlockQuantized {
    /// A matrix from its encoded blocks (as a GGUF file stores them, row after row; a
    /// slice of a mapped file is read in place, into the interleaved copy the matrix holds).
    ///
    /// # Errors
    /// `cols` not a multiple of 32, or `raw` not `rows * cols / 32` blocks long.
    pub fn from_blocks(
        format: BlockFormat,
        [rows, cols]: [usize; 2],
        raw: impl AsRef<[u8]>,
    ) -> Result<BlockQuantized> {
        let raw = raw.as_ref();
        const OP: &str = "BlockQuantized::from_blocks";
        if cols % BLOCK != 0 {
            return Err(invalid(
                OP,
                format!("rows of {cols} weights do not split into blocks of {BLOCK}"),
            ));
        }
        let expected = rows
            .checked_mul(cols / BLOCK)
            .and_then(|blocks| blocks.checked_mul(format.block_bytes()));
        if expected != Some(raw.len()) {
            return Err(invalid(
                OP,
                format!(
                    "a [{rows}, {cols}] {format:?} matrix takes {} bytes; {} were given",
                    expected.map_or("more than memory holds".into(), |e| e.to_string()),
                    raw.len()
                ),
            ));
        }
        BlockQuantized::interleaved(format, rows, cols, raw)
    }

    fn interleaved(
        format: BlockFormat,
        rows: usize,
        cols: usize,
        raw: &[u8],
    ) -> Result<BlockQuantized> {
        Ok(BlockQuantized {
            format,
            rows,
            cols,
            interleaved: block_quant::interleave(format.blocks(), raw, rows, cols)?,
        })
    }

    /// `weights` (`[rows, cols]`, f32 or wider, `cols` a multiple of 32) rounded to the
    /// nearest level of `format` (llama.cpp's reference quantization).
    ///
    /// # Errors
    /// Not a matrix, or `cols` not a multiple of 32.
    pub fn quantize(format: BlockFormat, weights: &DynTensor) -> Result<BlockQuantized> {
        let [rows, cols] = matrix_dims("BlockQuantized::quantize", weights)?;
        if cols % BLOCK != 0 {
            return Err(invalid(
                "BlockQuantized::quantize",
                format!("rows of {cols} weights do not split into blocks of {BLOCK}; pad them"),
            ));
        }
        let values = weights.to_dtype(DType::F32)?.to_vec::<f32>()?;
        let mut raw = Vec::with_capacity(rows * cols / BLOCK * format.block_bytes());
        block_quant::quantize(format.blocks(), &values, &mut raw);
        BlockQuantized::interleaved(format, rows, cols, &raw)
    }

    /// Its block format.
    pub fn format(&self) -> BlockFormat {
        self.format
    }

    /// `[rows, cols]`.
    pub fn dims(&self) -> [usize; 2] {
        [self.rows, self.cols]
    }

    /// Bytes its blocks take (as in the file; memory holds up to seven padding rows more).
    pub fn bytes(&self) -> usize {
        self.rows * self.row_bytes()
    }

    /// Its encoded blocks in the file's order (row after row, as GGUF stores them).
    pub fn to_blocks(&self) -> Vec<u8> {
        let mut raw = Vec::with_capacity(self.rows * self.row_bytes());
        for row in 0..self.rows {
            self.append_row(row, &mut raw);
        }
        raw
    }

    fn row_bytes(&self) -> usize {
        self.cols / BLOCK * self.format.block_bytes()
    }

    /// Row `row`'s blocks in the file's layout, appended to `out`.
    fn append_row(&self, row: usize, out: &mut Vec<u8>) {
        block_quant::row_blocks(self.format.blocks(), &self.interleaved, self.cols, row, out);
    }

    /// The weights expanded to f32, `[rows, cols]`.
    ///
    /// # Errors
    /// No memory for the result.
    pub fn dequantize(&self) -> Result<DynTensor> {
        let mut out = crate::alloc::try_with_capacity(
            "dequantize",
            "a block-quantized matrix",
            self.rows * self.cols,
        )?;
        block_quant::dequantize(self.format.blocks(), &self.to_blocks(), &mut out);
        Ok(DynTensor::from_vec(out, &[self.rows, self.cols])?)
    }

    /// Rows `ids` expanded to f32, `[ids.len(), cols]` (an embedding lookup).
    ///
    /// # Errors
    /// An id outside `0..rows`.
    pub fn rows(&self, ids: &[i64]) -> Result<DynTensor> {
        let mut out = Vec::with_capacity(ids.len() * self.cols);
        let mut raw = Vec::with_capacity(self.row_bytes());
        for &id in ids {
            let row = usize::try_from(id).ok().filter(|&r| r < self.rows);
            let Some(row) = row else {
                return Err(invalid(
                    "BlockQuantized::rows",
                    format!("row {id} is outside the matrix's {} rows", self.rows),
                ));
            };
            raw.clear();
            self.append_row(row, &mut raw);
            block_quant::dequantize(self.format.blocks(), &raw, &mut out);
        }
        Ok(DynTensor::from_vec(out, &[ids.len(), self.cols])?)
    }

    /// `x @ W^T` for `x` `[..., cols]`: `[..., rows]`, as `x.linear(&w, None)` of the
    /// dequantized weights `w` (within the activations' rounding; see the module's notes).
    ///
    /// # Errors
    /// `x`'s last dim is not `cols`.
    pub fn product(&self, x: &DynTensor) -> Result<DynTensor> {
        let dims = x.dims();
        if dims.last() != Some(&self.cols) {
            return Err(invalid(
                "BlockQuantized::product",
                format!(
                    "the input is {dims:?}; its last dim must be the weights' {} columns",
                    self.cols
                ),
            ));
        }
        let values = x.to_dtype(DType::F32)?.to_vec::<f32>()?;
        let m = dims[..dims.len() - 1].iter().product();
        let out = block_quant::product(
            self.format.blocks(),
            &self.interleaved,
            [m, self.rows, self.cols],
            &values,
        );
        let mut out_dims = dims.to_vec();
        *out_dims.last_mut().expect("checked above") = self.rows;
        Ok(DynTensor::from_vec(out, &out_dims)?)
    }
}

fn matrix_dims(op: &'static str, t: &DynTensor) -> Result<[usize; 2]> {
    match *t.dims() {
        [rows, cols] => Ok([rows, cols]),
        ref other => Err(invalid(
            op,
            format!("a matrix is [rows, cols]; got {other:?}"),
        )),
    }
}
