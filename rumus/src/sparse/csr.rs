//! A sparse matrix in compressed-row form: a [`Pattern`] and one value per entry. The values
//! are an ordinary tensor, so they can be trained (edge weights) and every op below records
//! its gradient to them.

use super::pattern::{Pattern, invalid};
use super::products::{check_values, sddmm, spmm, transposed_values};
use super::{Aggregation, aggregate};
use crate::device::Device;
use crate::error::Result;
use crate::tensor::DynTensor;

/// An `n x m` sparse matrix in compressed-row (CSR) form.
///
/// ```
/// use rumus::sparse::CsrMatrix;
/// use rumus::DynTensor;
///
/// // [[0, 2, 0],
/// //  [1, 0, 3]]
/// let values = DynTensor::from_vec(vec![2.0f32, 1.0, 3.0], &[3])?;
/// let a = CsrMatrix::new(vec![0, 1, 3], vec![1, 0, 2], values, (2, 3))?;
/// let x = DynTensor::from_vec(vec![1.0f32, 10.0, 100.0], &[3, 1])?;
/// assert_eq!(a.matmul(&x)?.to_vec::<f32>()?, vec![20.0, 301.0]);
/// # Ok::<(), rumus::Error>(())
/// ```
#[derive(Clone)]
pub struct CsrMatrix {
    pattern: Pattern,
    values: DynTensor,
}

impl CsrMatrix {
    /// The matrix of `shape` whose row `i` holds the entries `row_ptr[i]..row_ptr[i + 1]`,
    /// entry `e` in column `cols[e]` with value `values[e]`, on `values`'s device.
    ///
    /// Errors: row pointers that do not run from 0 to the number of entries without
    /// decreasing, a column outside the shape, values not one per entry.
    pub fn new(
        row_ptr: Vec<i64>,
        cols: Vec<i64>,
        values: DynTensor,
        shape: (usize, usize),
    ) -> Result<CsrMatrix> {
        let pattern = Pattern::from_csr(row_ptr, cols, shape, &values.device())?;
        CsrMatrix::from_pattern(pattern, values)
    }

    /// `pattern` with `values` (one per entry, on the pattern's device).
    pub fn from_pattern(pattern: Pattern, values: DynTensor) -> Result<CsrMatrix> {
        check_values(&pattern, &values)?;
        if values.device() != pattern.device() {
            return Err(invalid(format!(
                "the values are on {} but the pattern on {}; move one with `.to()`",
                values.device(),
                pattern.device()
            )));
        }
        Ok(CsrMatrix { pattern, values })
    }

    /// `pattern` with every value 1 (an unweighted graph's adjacency), in `dtype`.
    pub fn ones(pattern: Pattern, dtype: crate::DType) -> Result<CsrMatrix> {
        let values = DynTensor::full_on(&[pattern.nnz()], 1.0, dtype, &pattern.device())?;
        CsrMatrix::from_pattern(pattern, values)
    }

    /// The same entries with other values.
    pub fn with_values(&self, values: DynTensor) -> Result<CsrMatrix> {
        CsrMatrix::from_pattern(self.pattern.clone(), values)
    }

    /// Where the entries are.
    pub fn pattern(&self) -> &Pattern {
        &self.pattern
    }

    /// One value per entry, in row order.
    pub fn values(&self) -> &DynTensor {
        &self.values
    }

    /// Rows and columns.
    pub fn shape(&self) -> (usize, usize) {
        self.pattern.shape()
    }

    /// Number of entries.
    pub fn nnz(&self) -> usize {
        self.pattern.nnz()
    }

    /// The device of its values and index tensors.
    pub fn device(&self) -> Device {
        self.pattern.device()
    }

    /// `self x` for a dense `x` of `[columns, ...]`: `[rows, ...]` (SpMM). Differentiable in
    /// the values and in `x`.
    pub fn matmul(&self, x: &DynTensor) -> Result<DynTensor> {
        spmm(&self.pattern, &self.values, x)
    }

    /// The transpose: the same arrays read by columns, the values reordered (a recorded
    /// gather, so gradients reach the original values).
    pub fn t(&self) -> Result<CsrMatrix> {
        Ok(CsrMatrix {
            values: transposed_values(&self.pattern, &self.values)?,
            pattern: self.pattern.t(),
        })
    }

    /// The dense `[rows, columns]` matrix (repeated entries add up). Differentiable in the
    /// values.
    pub fn to_dense(&self) -> Result<DynTensor> {
        let (rows, cols) = self.shape();
        let flat: Vec<i64> = (0..rows)
            .flat_map(|i| {
                let ptr = self.pattern.row_ptr();
                (ptr[i]..ptr[i + 1]).map(move |e| (i, e))
            })
            .map(|(i, e)| (i * cols) as i64 + self.pattern.col_indices()[e as usize])
            .collect();
        let flat = DynTensor::from_vec(flat, &[self.nnz()])?.to(&self.device())?;
        let zeros = DynTensor::zeros_on(&[rows * cols], self.values.dtype(), &self.device())?;
        zeros
            .index_add(0, &flat, &self.values)?
            .reshape(&[rows, cols])
    }

    /// Each row's sum of values, `[rows]` (a weighted graph's in-degree).
    pub fn row_sums(&self) -> Result<DynTensor> {
        aggregate(&self.pattern, &self.values, Aggregation::Sum)
    }

    /// Each value divided by its row's sum, so every row with entries sums to 1 (a row
    /// summing to 0 keeps its values).
    pub fn row_normalized(&self) -> Result<CsrMatrix> {
        let sums = self.row_sums()?;
        let zero = sums.eq_scalar(0.0)?;
        let safe = DynTensor::where_(&zero, &sums.ones_like()?, &sums)?;
        let per_entry = safe.index_select(0, self.pattern.row_index())?;
        self.with_values(self.values.div(&per_entry)?)
    }

    /// `dot(a[row e], b[col e])` for each entry: the dense `a b^T` read at this matrix's
    /// entries (SDDMM), as a matrix of the same pattern. Differentiable in `a` and `b`.
    pub fn sample_products(&self, a: &DynTensor, b: &DynTensor) -> Result<CsrMatrix> {
        self.with_values(sddmm(&self.pattern, a, b)?)
    }

    /// The same matrix with its values and indices on `device`.
    pub fn to(&self, device: &Device) -> Result<CsrMatrix> {
        Ok(CsrMatrix {
            pattern: self.pattern.to(device)?,
            values: self.values.to(device)?,
        })
    }
}

impl std::fmt::Debug for CsrMatrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (rows, cols) = self.shape();
        write!(
            f,
            "CsrMatrix({rows} x {cols}, {} entries, {})",
            self.nnz(),
            self.values.dtype()
        )
    }
}
