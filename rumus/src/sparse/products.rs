//! The two products with a sparse matrix, as recorded ops whose gradients are each other:
//!
//! - SpMM, `y = A x` with `A` sparse (pattern, values): `dx = A^T dy` (an SpMM with the
//!   transposed pattern) and `dvalues[e] = dot(dy[row e], x[col e])` (an SDDMM).
//! - SDDMM, `v[e] = dot(a[row e], b[col e])`: `da = V b` and `db = V^T a` (SpMMs with the
//!   values `dv`).
//!
//! Both backward formulas are these same recorded ops, so gradients of gradients work.

use super::pattern::{Pattern, invalid};
use crate::autograd::{BackwardRecord, GraphLinks, Saved, record};
use crate::error::Result;
use crate::storage::Storage;
use crate::tensor::DynTensor;

/// `A x` for the sparse `A` of `pattern` and `values` (one per entry) and a dense `x` of
/// `[columns, ...]`: `[rows, ...]`. Recorded with inputs `(values, x)`.
pub(crate) fn spmm(pattern: &Pattern, values: &DynTensor, x: &DynTensor) -> Result<DynTensor> {
    let (rows, cols) = pattern.shape();
    if x.rank() == 0 || x.dims()[0] != cols {
        return Err(invalid(format!(
            "a {rows} x {cols} sparse matrix multiplies a dense [{cols}, ...], got {:?}",
            x.dims()
        )));
    }
    check_values(pattern, values)?;
    let structure = pattern.rows();
    let out = Storage::spmm(
        structure.row_ptr.operand(),
        structure.col_index.operand(),
        values.operand(),
        x.operand(),
    )?;
    let mut dims = x.dims().to_vec();
    dims[0] = rows;
    let out = DynTensor::computed(out, &dims);
    Ok(record(out, &[values, x], || SpmmRecord {
        pattern: pattern.clone(),
        values: Saved::new(values),
        x: Saved::new(x),
    }))
}

/// `dot(a[row e], b[col e])` for each entry `e` of `pattern`, with `a` of `[rows, ...]` and
/// `b` of `[columns, ...]` (the same trailing axes): one value per entry. Recorded with
/// inputs `(a, b)`.
pub(crate) fn sddmm(pattern: &Pattern, a: &DynTensor, b: &DynTensor) -> Result<DynTensor> {
    let (rows, cols) = pattern.shape();
    let fits = a.rank() > 0
        && b.rank() > 0
        && a.dims()[0] == rows
        && b.dims()[0] == cols
        && a.dims()[1..] == b.dims()[1..];
    if !fits {
        return Err(invalid(format!(
            "sampling a {rows} x {cols} pattern takes [{rows}, ...] and [{cols}, ...] with the \
             same trailing axes, got {:?} and {:?}",
            a.dims(),
            b.dims()
        )));
    }
    let structure = pattern.rows();
    let out = Storage::sddmm(
        structure.row_ptr.operand(),
        structure.col_index.operand(),
        a.operand(),
        b.operand(),
    )?;
    let out = DynTensor::computed(out, &[pattern.nnz()]);
    Ok(record(out, &[a, b], || SddmmRecord {
        pattern: pattern.clone(),
        a: Saved::new(a),
        b: Saved::new(b),
    }))
}

/// Values are 1-D, one per entry.
pub(crate) fn check_values(pattern: &Pattern, values: &DynTensor) -> Result<()> {
    if values.dims() != [pattern.nnz()] {
        return Err(invalid(format!(
            "a pattern of {} entries takes values of shape [{}], got {:?}",
            pattern.nnz(),
            pattern.nnz(),
            values.dims()
        )));
    }
    Ok(())
}

/// The transpose's values: `values` read in the transposed pattern's entry order.
pub(crate) fn transposed_values(pattern: &Pattern, values: &DynTensor) -> Result<DynTensor> {
    values.index_select(0, pattern.transpose_order())
}

struct SpmmRecord {
    pattern: Pattern,
    values: Saved,
    x: Saved,
}

impl BackwardRecord for SpmmRecord {
    fn name(&self) -> &'static str {
        "spmm"
    }

    fn backward(&self, grad: &DynTensor, needs: &[bool]) -> Result<Vec<Option<DynTensor>>> {
        let values = if needs[0] {
            Some(sddmm(&self.pattern, grad, self.x.get("spmm")?)?)
        } else {
            None
        };
        let x = if needs[1] {
            let transposed = transposed_values(&self.pattern, self.values.get("spmm")?)?;
            Some(spmm(&self.pattern.t(), &transposed, grad)?)
        } else {
            None
        };
        Ok(vec![values, x])
    }

    fn take_graph(&mut self, links: &mut GraphLinks) {
        links.push_saved(&mut self.values);
        links.push_saved(&mut self.x);
    }
}

struct SddmmRecord {
    pattern: Pattern,
    a: Saved,
    b: Saved,
}

impl BackwardRecord for SddmmRecord {
    fn name(&self) -> &'static str {
        "sddmm"
    }

    fn backward(&self, grad: &DynTensor, needs: &[bool]) -> Result<Vec<Option<DynTensor>>> {
        let a = if needs[0] {
            Some(spmm(&self.pattern, grad, self.b.get("sddmm")?)?)
        } else {
            None
        };
        let b = if needs[1] {
            let transposed = transposed_values(&self.pattern, grad)?;
            Some(spmm(&self.pattern.t(), &transposed, self.a.get("sddmm")?)?)
        } else {
            None
        };
        Ok(vec![a, b])
    }

    fn take_graph(&mut self, links: &mut GraphLinks) {
        links.push_saved(&mut self.a);
        links.push_saved(&mut self.b);
    }
}
