//! The structure of a sparse matrix without its values: where the entries are, in
//! compressed-row form, and the same for its transpose. It is built and checked once on the
//! host (a data boundary: every index is checked against the shape there), then held as
//! `i64` tensors on the matrix's device for the kernels, and shared through an `Arc` by every
//! matrix of that structure (a graph's adjacency and its normalised forms, a product's
//! gradient).

use std::sync::Arc;

use crate::device::Device;
use crate::error::{Error, Result, ShapeError};
use crate::tensor::DynTensor;

/// One orientation of a pattern: the rows, in compressed-row form.
pub(crate) struct Rows {
    /// Number of rows.
    pub rows: usize,
    /// Number of columns.
    pub cols: usize,
    /// `rows + 1` offsets of each row's entries, on the host.
    pub host_row_ptr: Vec<i64>,
    /// Each entry's column, on the host.
    pub host_cols: Vec<i64>,
    /// `host_row_ptr` on the pattern's device.
    pub row_ptr: DynTensor,
    /// `host_cols` on the pattern's device.
    pub col_index: DynTensor,
    /// Each entry's row, on the pattern's device: what gathers and adds index by.
    pub row_index: DynTensor,
}

impl Rows {
    fn new(
        (rows, cols): (usize, usize),
        host_row_ptr: Vec<i64>,
        host_cols: Vec<i64>,
        device: &Device,
    ) -> Result<Rows> {
        Ok(Rows {
            rows,
            cols,
            row_ptr: on_device(&host_row_ptr, device)?,
            col_index: on_device(&host_cols, device)?,
            row_index: on_device(&entry_rows(&host_row_ptr), device)?,
            host_row_ptr,
            host_cols,
        })
    }

    fn to(&self, device: &Device) -> Result<Rows> {
        Ok(Rows {
            rows: self.rows,
            cols: self.cols,
            host_row_ptr: self.host_row_ptr.clone(),
            host_cols: self.host_cols.clone(),
            row_ptr: self.row_ptr.to(device)?,
            col_index: self.col_index.to(device)?,
            row_index: self.row_index.to(device)?,
        })
    }
}

/// Where the entries of an `n x m` sparse matrix are, by rows and by columns: a cheap handle
/// (clones share the arrays), whose transpose [`t`](Pattern::t) is the same arrays read the
/// other way.
///
/// Entries are numbered in row order (the compressed-row order). A row's entries keep the
/// order they were given in, and repeated `(row, column)` pairs are kept as separate entries
/// (a product adds them up, as it would after [`coalesce`](super::CooMatrix::coalesce)).
#[derive(Clone)]
pub struct Pattern {
    both: Arc<Orientations>,
    transposed: bool,
}

/// Both orientations of one structure.
struct Orientations {
    by_rows: Rows,
    /// The transpose's rows: the columns of the matrix.
    by_cols: Rows,
    /// `by_cols`'s entry `k` is entry `cols_order[k]` of `by_rows`, on the device.
    cols_order: DynTensor,
    /// The inverse: `by_rows`'s entry `e` is `by_cols`'s entry `rows_order[e]`.
    rows_order: DynTensor,
    device: Device,
}

impl Pattern {
    /// The pattern of entries `(rows[e], cols[e])` of an `shape.0 x shape.1` matrix, with
    /// the order that puts the given entries into row order (entry `k` of the pattern is
    /// given entry `order[k]`).
    ///
    /// Errors name the first entry whose row or column lies outside the shape, or lengths
    /// that differ.
    pub(crate) fn from_entries(
        rows: &[i64],
        cols: &[i64],
        shape: (usize, usize),
        device: &Device,
    ) -> Result<(Pattern, Vec<i64>)> {
        check_entries(rows, cols, shape)?;
        let order = stable_order_by(rows, shape.0);
        let row_ptr = offsets(rows, shape.0);
        let sorted_cols = order.iter().map(|&e| cols[e as usize]).collect();
        let pattern = Pattern::from_rows(shape, row_ptr, sorted_cols, device)?;
        Ok((pattern, order))
    }

    /// The pattern of a compressed-row structure, checked: `row_ptr` runs from 0 to the
    /// number of entries without decreasing, every column lies in `0..shape.1`.
    pub(crate) fn from_csr(
        row_ptr: Vec<i64>,
        cols: Vec<i64>,
        shape: (usize, usize),
        device: &Device,
    ) -> Result<Pattern> {
        let ends_right =
            row_ptr.first() == Some(&0) && row_ptr.last() == Some(&(cols.len() as i64));
        if row_ptr.len() != shape.0 + 1 || !ends_right || row_ptr.windows(2).any(|w| w[0] > w[1]) {
            return Err(invalid(format!(
                "row pointers of {} rows are {} offsets running from 0 to the {} entries \
                 without decreasing; got {} of them, first {:?}, last {:?}",
                shape.0,
                shape.0 + 1,
                cols.len(),
                row_ptr.len(),
                row_ptr.first(),
                row_ptr.last()
            )));
        }
        check_range(&cols, shape.1, "column")?;
        Pattern::from_rows(shape, row_ptr, cols, device)
    }

    /// Builds both orientations of checked row-ordered entries.
    fn from_rows(
        shape: (usize, usize),
        row_ptr: Vec<i64>,
        cols: Vec<i64>,
        device: &Device,
    ) -> Result<Pattern> {
        let cols_order = stable_order_by(&cols, shape.1);
        let transposed_ptr = offsets(&cols, shape.1);
        let entry_rows = entry_rows(&row_ptr);
        let transposed_cols = cols_order.iter().map(|&e| entry_rows[e as usize]).collect();
        let mut rows_order = vec![0i64; cols.len()];
        for (k, &e) in cols_order.iter().enumerate() {
            rows_order[e as usize] = k as i64;
        }
        Ok(Pattern {
            both: Arc::new(Orientations {
                cols_order: on_device(&cols_order, device)?,
                rows_order: on_device(&rows_order, device)?,
                by_cols: Rows::new((shape.1, shape.0), transposed_ptr, transposed_cols, device)?,
                by_rows: Rows::new(shape, row_ptr, cols, device)?,
                device: device.clone(),
            }),
            transposed: false,
        })
    }

    /// The rows of this orientation.
    pub(crate) fn rows(&self) -> &Rows {
        if self.transposed {
            &self.both.by_cols
        } else {
            &self.both.by_rows
        }
    }

    /// The transpose's entry `k` is this pattern's entry `transpose_order()[k]`: the
    /// transpose's values are this one's read at these (an `i64` tensor on the device).
    pub(crate) fn transpose_order(&self) -> &DynTensor {
        if self.transposed {
            &self.both.rows_order
        } else {
            &self.both.cols_order
        }
    }

    /// The transpose: the same arrays, read by columns.
    pub fn t(&self) -> Pattern {
        Pattern {
            both: self.both.clone(),
            transposed: !self.transposed,
        }
    }

    /// Rows and columns.
    pub fn shape(&self) -> (usize, usize) {
        (self.rows().rows, self.rows().cols)
    }

    /// Number of entries.
    pub fn nnz(&self) -> usize {
        self.rows().host_cols.len()
    }

    /// The device its index tensors live on.
    pub fn device(&self) -> Device {
        self.both.device.clone()
    }

    /// `rows + 1` offsets of each row's entries (host copy).
    pub fn row_ptr(&self) -> &[i64] {
        &self.rows().host_row_ptr
    }

    /// Each entry's column (host copy).
    pub fn col_indices(&self) -> &[i64] {
        &self.rows().host_cols
    }

    /// Each entry's row, an `i64` tensor on the pattern's device.
    pub fn row_index(&self) -> &DynTensor {
        &self.rows().row_index
    }

    /// Each entry's column, an `i64` tensor on the pattern's device.
    pub fn col_index(&self) -> &DynTensor {
        &self.rows().col_index
    }

    /// The number of entries of each row.
    pub fn row_counts(&self) -> Vec<usize> {
        let ptr = &self.rows().host_row_ptr;
        ptr.windows(2).map(|w| (w[1] - w[0]) as usize).collect()
    }

    /// Whether `other` is this very pattern (the same arrays, the same orientation).
    pub fn same_as(&self, other: &Pattern) -> bool {
        Arc::ptr_eq(&self.both, &other.both) && self.transposed == other.transposed
    }

    /// The same pattern with its index tensors on `device`.
    pub fn to(&self, device: &Device) -> Result<Pattern> {
        let both = &self.both;
        Ok(Pattern {
            both: Arc::new(Orientations {
                by_rows: both.by_rows.to(device)?,
                by_cols: both.by_cols.to(device)?,
                cols_order: both.cols_order.to(device)?,
                rows_order: both.rows_order.to(device)?,
                device: device.clone(),
            }),
            transposed: self.transposed,
        })
    }
}

impl std::fmt::Debug for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (rows, cols) = self.shape();
        write!(f, "Pattern({rows} x {cols}, {} entries)", self.nnz())
    }
}

/// Each entry's row, from the row pointers.
fn entry_rows(row_ptr: &[i64]) -> Vec<i64> {
    let mut rows = Vec::with_capacity(*row_ptr.last().unwrap_or(&0) as usize);
    for (i, w) in row_ptr.windows(2).enumerate() {
        rows.extend(std::iter::repeat_n(i as i64, (w[1] - w[0]) as usize));
    }
    rows
}

fn on_device(values: &[i64], device: &Device) -> Result<DynTensor> {
    DynTensor::from_slice(values, &[values.len()])?.to(device)
}

/// One row and one column per entry, each inside `shape`; errors name the first entry
/// that is not.
pub(crate) fn check_entries(rows: &[i64], cols: &[i64], shape: (usize, usize)) -> Result<()> {
    if rows.len() != cols.len() {
        return Err(invalid(format!(
            "{} row indices but {} column indices; give one of each per entry",
            rows.len(),
            cols.len()
        )));
    }
    check_range(rows, shape.0, "row")?;
    check_range(cols, shape.1, "column")
}

/// Every index in `0..size`, or an error naming the first that is not.
fn check_range(indices: &[i64], size: usize, what: &str) -> Result<()> {
    if let Some((entry, &bad)) = indices
        .iter()
        .enumerate()
        .find(|&(_, &i)| i < 0 || i as usize >= size)
    {
        return Err(invalid(format!(
            "entry {entry} has {what} index {bad}, outside 0..{size}; \
             indices count from 0 and must be below the matrix's {what}s"
        )));
    }
    Ok(())
}

/// The order of `keys` (each in `0..buckets`) sorted by key, ties in their given order: a
/// counting sort.
fn stable_order_by(keys: &[i64], buckets: usize) -> Vec<i64> {
    let mut next = offsets(keys, buckets);
    let mut order = vec![0i64; keys.len()];
    for (e, &k) in keys.iter().enumerate() {
        let slot = &mut next[k as usize];
        order[*slot as usize] = e as i64;
        *slot += 1;
    }
    order
}

/// `buckets + 1` offsets of each key's run in key order.
fn offsets(keys: &[i64], buckets: usize) -> Vec<i64> {
    let mut ptr = vec![0i64; buckets + 1];
    for &k in keys {
        ptr[k as usize + 1] += 1;
    }
    for i in 0..buckets {
        ptr[i + 1] += ptr[i];
    }
    ptr
}

pub(crate) fn invalid(message: String) -> Error {
    ShapeError::Invalid {
        context: "sparse matrix".into(),
        message,
    }
    .into()
}
