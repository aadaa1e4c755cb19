//! A sparse matrix as a list of `(row, column, value)` entries (coordinate form): how sparse
//! data usually arrives (an edge list, `torch.sparse_coo_tensor`'s indices). Products run on
//! the compressed-row form, [`to_csr`](CooMatrix::to_csr).

use super::CsrMatrix;
use super::pattern::{Pattern, check_entries, invalid};
use crate::error::{Error, Result};
use crate::tensor::DynTensor;

/// An `n x m` sparse matrix in coordinate (COO) form. Entries may come in any order and may
/// repeat; [`coalesce`](CooMatrix::coalesce) sorts them and adds repeats up, as PyTorch's
/// `coalesce` does, and every product treats repeats as added up.
#[derive(Clone, Debug)]
pub struct CooMatrix {
    rows: Vec<i64>,
    cols: Vec<i64>,
    values: DynTensor,
    shape: (usize, usize),
}

impl CooMatrix {
    /// Entries `(rows[e], cols[e])` with `values[e]` (1-D, one per entry).
    ///
    /// Errors name the first entry outside the shape, or lengths that differ.
    pub fn new(
        rows: Vec<i64>,
        cols: Vec<i64>,
        values: DynTensor,
        shape: (usize, usize),
    ) -> Result<CooMatrix> {
        if values.dims() != [rows.len()] || rows.len() != cols.len() {
            return Err(invalid(format!(
                "coordinates take one row, one column and one value per entry; got {} rows, \
                 {} columns and values of shape {:?}",
                rows.len(),
                cols.len(),
                values.dims()
            )));
        }
        check_entries(&rows, &cols, shape)?;
        Ok(CooMatrix {
            rows,
            cols,
            values,
            shape,
        })
    }

    /// Entries from an `i64` index tensor of `[2, entries]` (row indices, then column
    /// indices), as `torch.sparse_coo_tensor` takes them.
    pub fn from_indices(
        indices: &DynTensor,
        values: DynTensor,
        shape: (usize, usize),
    ) -> Result<CooMatrix> {
        let (rows, cols) = index_pairs(indices, "sparse indices")?;
        CooMatrix::new(rows, cols, values, shape)
    }

    /// Rows and columns.
    pub fn shape(&self) -> (usize, usize) {
        self.shape
    }

    /// Number of entries (repeats counted).
    pub fn nnz(&self) -> usize {
        self.rows.len()
    }

    /// Each entry's row.
    pub fn row_indices(&self) -> &[i64] {
        &self.rows
    }

    /// Each entry's column.
    pub fn col_indices(&self) -> &[i64] {
        &self.cols
    }

    /// One value per entry.
    pub fn values(&self) -> &DynTensor {
        &self.values
    }

    /// The transpose (rows and columns swapped; the values are the same tensor).
    pub fn t(&self) -> CooMatrix {
        CooMatrix {
            rows: self.cols.clone(),
            cols: self.rows.clone(),
            values: self.values.clone(),
            shape: (self.shape.1, self.shape.0),
        }
    }

    /// The entries sorted by row, then column, with repeated positions merged into one
    /// whose value is their sum (a recorded add, so gradients reach every original value).
    pub fn coalesce(&self) -> Result<CooMatrix> {
        let m = self.shape.1 as i64;
        let mut order: Vec<usize> = (0..self.nnz()).collect();
        order.sort_by_key(|&e| self.rows[e] * m + self.cols[e]);
        let (mut rows, mut cols) = (Vec::new(), Vec::new());
        let mut target = vec![0i64; self.nnz()];
        for &e in &order {
            let fresh = rows.last() != Some(&self.rows[e]) || cols.last() != Some(&self.cols[e]);
            if fresh {
                rows.push(self.rows[e]);
                cols.push(self.cols[e]);
            }
            target[e] = rows.len() as i64 - 1;
        }
        let device = self.values.device();
        let target = DynTensor::from_vec(target, &[self.nnz()])?.to(&device)?;
        let zeros = DynTensor::zeros_on(&[rows.len()], self.values.dtype(), &device)?;
        let values = zeros.index_add(0, &target, &self.values)?;
        Ok(CooMatrix {
            rows,
            cols,
            values,
            shape: self.shape,
        })
    }

    /// The compressed-row form on the values' device: entries in row order, each row's in
    /// the order given (repeats kept). The values are reordered by a recorded gather.
    pub fn to_csr(&self) -> Result<CsrMatrix> {
        let device = self.values.device();
        let (pattern, order) = Pattern::from_entries(&self.rows, &self.cols, self.shape, &device)?;
        let order = DynTensor::from_vec(order, &[self.nnz()])?.to(&device)?;
        CsrMatrix::from_pattern(pattern, self.values.index_select(0, &order)?)
    }

    /// The dense `[rows, columns]` matrix (repeats add up).
    pub fn to_dense(&self) -> Result<DynTensor> {
        self.to_csr()?.to_dense()
    }
}

/// The two rows of a `[2, n]` `i64` tensor, read to the host.
pub(crate) fn index_pairs(indices: &DynTensor, what: &str) -> Result<(Vec<i64>, Vec<i64>)> {
    if indices.dtype() != crate::DType::I64 {
        return Err(Error::DType {
            op: "sparse indices",
            expected: "an i64 index tensor",
            found: indices.dtype(),
        });
    }
    if indices.rank() != 2 || indices.dims()[0] != 2 {
        return Err(invalid(format!(
            "{what} are a [2, n] tensor (first row then second), got {:?}",
            indices.dims()
        )));
    }
    let flat = indices.to_vec::<i64>()?;
    let n = indices.dims()[1];
    Ok((flat[..n].to_vec(), flat[n..].to_vec()))
}
