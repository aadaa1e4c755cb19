//! Products on cuBLASLt: every `matmul` (batched, broadcast, either operand transposed, with
//! a bias added by cuBLASLt's epilogue) is one `cublasLtMatmul` call. Row-major `C = A B` is
//! computed as the column-major `C^T = B^T A^T`, which needs no copy for row- or column-major
//! operands. A plan (descriptors and the algorithm cuBLASLt's heuristic picked) is kept per
//! shape, so a training step's products query the heuristic once.

use std::collections::HashMap;
use std::ffi::c_void;

use cudarc::cublaslt::{result as lt, sys};

use super::context::{CudaDevice, cuda_error};
use super::launch::check_floating;
use super::memory::CudaBuffer;
use crate::backend::{Matmul, Pointwise, Src};
use crate::dtype::DType;
use crate::error::{DeviceError, Error, Result};
use crate::shape::Layout;

/// The workspace cuBLASLt may use (its documentation's recommendation for Hopper).
const WORKSPACE_BYTES: usize = 32 << 20;

/// Plans kept per device; past this many the cache starts over.
const MAX_PLANS: usize = 1024;

/// A device's cuBLASLt handle, workspace and plans.
pub(crate) struct Blas {
    handle: sys::cublasLtHandle_t,
    workspace: CudaBuffer,
    plans: HashMap<PlanKey, Plan>,
}

// SAFETY: the handle is used under the device's `blas` lock only, with the context bound.
unsafe impl Send for Blas {}

impl Drop for Blas {
    fn drop(&mut self) {
        self.plans.clear();
        // SAFETY: no call uses the handle any more.
        let _ = unsafe { lt::destroy_handle(self.handle) };
    }
}

/// One operand as cuBLASLt reads it (column-major): rows, columns and leading dimension of
/// the stored matrix, whether the product reads its transpose, and the distance between the
/// matrices of a batch (0 for one broadcast matrix).
#[derive(Clone, Copy, Hash, PartialEq, Eq, Debug)]
struct Operand {
    rows: u64,
    cols: u64,
    ld: i64,
    transposed: bool,
    batch_stride: i64,
    /// Largest power of two (up to 16) the address is a multiple of, in bytes.
    alignment: u32,
}

#[derive(Clone, Copy, Hash, PartialEq, Eq, Debug)]
struct PlanKey {
    dtype: DType,
    widen: bool,
    bias: bool,
    batch: i32,
    /// cuBLASLt's A (from `b`) and B (from `a`).
    first: Operand,
    second: Operand,
    /// Rows and columns of the column-major result (`n` and `m`).
    out: (u64, u64),
}

/// Descriptors and algorithm of one shape of product.
struct Plan {
    desc: sys::cublasLtMatmulDesc_t,
    layouts: [sys::cublasLtMatrixLayout_t; 3],
    algo: sys::cublasLtMatmulAlgo_t,
}

impl Drop for Plan {
    fn drop(&mut self) {
        // SAFETY: created by `Plan::new`, used by nothing after the cache lets go.
        unsafe {
            let _ = lt::destroy_matmul_desc(self.desc);
            for layout in self.layouts {
                let _ = lt::destroy_matrix_layout(layout);
            }
        }
    }
}

fn blas_error(doing: &str, e: impl std::fmt::Display) -> Error {
    cuda_error(&format!("cuBLASLt, {doing}"), e)
}

/// The cuBLASLt element type of `dtype`.
fn data_type(dtype: DType) -> sys::cudaDataType {
    match dtype {
        DType::F64 => sys::cudaDataType::CUDA_R_64F,
        DType::F16 => sys::cudaDataType::CUDA_R_16F,
        DType::BF16 => sys::cudaDataType::CUDA_R_16BF,
        _ => sys::cudaDataType::CUDA_R_32F,
    }
}

/// How a matrix viewed with row-major `dims` `[r, c]` and `strides` `[sr, sc]` is stored for
/// cuBLASLt, as the column-major matrix whose (possibly transposed) use gives the
/// transpose of the view: `None` where neither of its axes is contiguous.
fn as_column_major(r: usize, c: usize, sr: usize, sc: usize) -> Option<(u64, u64, i64, bool)> {
    // A size-1 axis may have any stride: it is never stepped along.
    if (sc == 1 || c == 1) && (r == 1 || sr >= c.max(1)) {
        // Row-major: its transpose is column-major `c x r` with leading dimension `sr`.
        let ld = if r == 1 { c.max(1) } else { sr };
        Some((c as u64, r as u64, ld as i64, false))
    } else if (sr == 1 || r == 1) && (c == 1 || sc >= r.max(1)) {
        // Column-major: stored as `r x c` with leading dimension `sc`, read transposed.
        let ld = if c == 1 { r.max(1) } else { sc };
        Some((r as u64, c as u64, ld as i64, true))
    } else {
        None
    }
}

/// The one stride between consecutive matrices of `layout`'s batch axes (all but the last
/// two), or `None` where they do not collapse to one.
fn batch_stride(layout: &Layout) -> Option<i64> {
    let rank = layout.dims().len();
    let (dims, strides) = (&layout.dims()[..rank - 2], &layout.strides()[..rank - 2]);
    let mut stride: Option<usize> = None;
    // Walk from the innermost batch axis out, skipping size-1 axes.
    let mut expected: Option<usize> = None;
    for (&size, &s) in dims.iter().zip(strides).rev() {
        if size == 1 {
            continue;
        }
        match expected {
            None => stride = Some(s),
            Some(e) if e == s => {}
            Some(_) => return None,
        }
        expected = Some(s * size);
    }
    Some(stride.unwrap_or(0) as i64)
}

fn alignment(address: u64) -> u32 {
    (1u32 << address.trailing_zeros().min(4)).min(16)
}

impl Plan {
    fn new(handle: sys::cublasLtHandle_t, key: &PlanKey) -> Result<Plan> {
        let (compute, scale) = match key.dtype {
            DType::F64 => (
                sys::cublasComputeType_t::CUBLAS_COMPUTE_64F,
                sys::cudaDataType::CUDA_R_64F,
            ),
            _ => (
                sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                sys::cudaDataType::CUDA_R_32F,
            ),
        };
        let in_type = data_type(key.dtype);
        let out_type = if key.widen { sys::cudaDataType::CUDA_R_32F } else { in_type };
        let desc = lt::create_matmul_desc(compute, scale).map_err(|e| blas_error("a descriptor", e))?;
        let mut plan = Plan {
            desc,
            layouts: [std::ptr::null_mut(); 3],
            algo: sys::cublasLtMatmulAlgo_t { data: [0; 8] },
        };
        let set_desc = |attr: sys::cublasLtMatmulDescAttributes_t, value: i32| {
            // SAFETY: the attribute takes a 32-bit integer (an operation or an epilogue).
            unsafe {
                lt::set_matmul_desc_attribute(desc, attr, (&raw const value).cast(), 4)
            }
            .map_err(|e| blas_error("a descriptor attribute", e))
        };
        use sys::cublasLtMatmulDescAttributes_t as Desc;
        set_desc(Desc::CUBLASLT_MATMUL_DESC_TRANSA, i32::from(key.first.transposed))?;
        set_desc(Desc::CUBLASLT_MATMUL_DESC_TRANSB, i32::from(key.second.transposed))?;
        if key.bias {
            set_desc(
                Desc::CUBLASLT_MATMUL_DESC_EPILOGUE,
                sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_BIAS as i32,
            )?;
        }
        let (out_rows, out_cols) = key.out;
        let layouts = [
            (in_type, key.first.rows, key.first.cols, key.first.ld, key.first.batch_stride),
            (in_type, key.second.rows, key.second.cols, key.second.ld, key.second.batch_stride),
            (out_type, out_rows, out_cols, out_rows as i64, (out_rows * out_cols) as i64),
        ];
        for (slot, (dtype, rows, cols, ld, stride)) in layouts.into_iter().enumerate() {
            let layout = lt::create_matrix_layout(dtype, rows, cols, ld)
                .map_err(|e| blas_error("a matrix layout", e))?;
            plan.layouts[slot] = layout;
            if key.batch > 1 {
                use sys::cublasLtMatrixLayoutAttribute_t as Attr;
                // SAFETY: the batch count is an i32 and the stride an i64, as documented.
                unsafe {
                    lt::set_matrix_layout_attribute(
                        layout,
                        Attr::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                        (&raw const key.batch).cast(),
                        4,
                    )
                    .and_then(|()| {
                        lt::set_matrix_layout_attribute(
                            layout,
                            Attr::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                            (&raw const stride).cast(),
                            8,
                        )
                    })
                }
                .map_err(|e| blas_error("a batched layout", e))?;
            }
        }
        plan.algo = plan.pick_algorithm(handle, key)?;
        Ok(plan)
    }

    /// cuBLASLt's first choice for this shape, within the workspace and the operands'
    /// alignment.
    fn pick_algorithm(
        &self,
        handle: sys::cublasLtHandle_t,
        key: &PlanKey,
    ) -> Result<sys::cublasLtMatmulAlgo_t> {
        let pref = lt::create_matmul_pref().map_err(|e| blas_error("a preference", e))?;
        use sys::cublasLtMatmulPreferenceAttributes_t as Pref;
        let workspace = WORKSPACE_BYTES as u64;
        let settings = [
            (Pref::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, workspace, 8),
            (
                Pref::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                u64::from(key.first.alignment),
                4,
            ),
            (
                Pref::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                u64::from(key.second.alignment),
                4,
            ),
        ];
        let mut result = Ok(());
        for (attr, value, size) in settings {
            let value32 = value as u32;
            let pointer: *const c_void = if size == 8 {
                (&raw const value).cast()
            } else {
                (&raw const value32).cast()
            };
            // SAFETY: each attribute takes the width passed.
            result = result.and(unsafe { lt::set_matmul_pref_attribute(pref, attr, pointer, size) });
        }
        // SAFETY: every descriptor was created above and lives as long as `self`.
        let heuristic = result.and_then(|()| unsafe {
            lt::get_matmul_algo_heuristic(
                handle,
                self.desc,
                self.layouts[0],
                self.layouts[1],
                self.layouts[2],
                self.layouts[2],
                pref,
            )
        });
        // SAFETY: created above, used by nothing else.
        let _ = unsafe { lt::destroy_matmul_pref(pref) };
        Ok(heuristic
            .map_err(|e| blas_error(&format!("no algorithm for {key:?}"), e))?
            .algo)
    }
}

impl CudaDevice {
    /// Runs `f` with this device's cuBLASLt state, made on first use.
    fn with_blas<R>(&self, f: impl FnOnce(&mut Blas) -> Result<R>) -> Result<R> {
        let mut blas = self.0.blas.lock().unwrap_or_else(|p| p.into_inner());
        self.bind()?;
        if blas.is_none() {
            let handle = lt::create_handle().map_err(|e| blas_error("creating a handle", e))?;
            let workspace = CudaBuffer::uninit(self, WORKSPACE_BYTES, DType::Bool)?;
            *blas = Some(Blas {
                handle,
                workspace,
                plans: HashMap::new(),
            });
        }
        f(blas.as_mut().expect("made above"))
    }

    /// `view` as a contiguous copy, for an operand cuBLASLt cannot read in place.
    fn packed(&self, view: Src<'_, CudaBuffer>) -> Result<(CudaBuffer, Layout)> {
        Ok((self.copy(view)?, Layout::contiguous(view.dims())))
    }
}

/// The column-major description of a row-major `[batch.., r, c]` view, if cuBLASLt can read
/// it where it is.
fn describe(view: &Src<'_, CudaBuffer>) -> Option<Operand> {
    let (dims, strides) = (view.layout.dims(), view.layout.strides());
    let rank = dims.len();
    let (rows, cols, ld, transposed) = as_column_major(
        dims[rank - 2],
        dims[rank - 1],
        strides[rank - 2],
        strides[rank - 1],
    )?;
    Some(Operand {
        rows,
        cols,
        ld,
        transposed,
        batch_stride: batch_stride(view.layout)?,
        alignment: alignment(view.memory.address(view.layout.offset())),
    })
}

impl Matmul for CudaDevice {
    fn matmul(
        &self,
        a: Src<'_, CudaBuffer>,
        b: Src<'_, CudaBuffer>,
        bias: Option<Src<'_, CudaBuffer>>,
        out_dims: &[usize],
        widen: bool,
    ) -> Result<CudaBuffer> {
        let dtype = a.dtype();
        if b.dtype() != dtype {
            return Err(Error::DTypeMismatch {
                op: "matmul",
                lhs: dtype,
                rhs: b.dtype(),
            });
        }
        check_floating("matmul", dtype)?;
        let widen = widen && matches!(dtype, DType::F16 | DType::BF16);
        let out_dtype = if widen { DType::F32 } else { dtype };
        let rank = out_dims.len();
        let (m, n, k) = (out_dims[rank - 2], out_dims[rank - 1], a.dims()[rank - 1]);
        let batch: usize = out_dims[..rank - 2].iter().product();
        let numel = batch * m * n;
        if numel == 0 {
            return CudaBuffer::uninit(self, 0, out_dtype);
        }
        if k == 0 {
            // An empty sum: zeros, plus the bias on every row.
            return match bias {
                Some(bias) => {
                    let rows = bias.layout.broadcast_to(out_dims);
                    self.copy(Src::new(bias.memory, &rows))
                }
                None => crate::backend::Allocate::full(self, out_dims, 0.0, out_dtype),
            };
        }
        // Operands cuBLASLt cannot read in place (no contiguous axis, uneven batch strides)
        // and a strided bias are packed first.
        let packed_a = describe(&a).is_none().then(|| self.packed(a)).transpose()?;
        let packed_b = describe(&b).is_none().then(|| self.packed(b)).transpose()?;
        let a = packed_a.as_ref().map_or(a, |(m, l)| Src::new(m, l));
        let b = packed_b.as_ref().map_or(b, |(m, l)| Src::new(m, l));
        let packed_bias = match bias {
            Some(bias) if !bias.layout.is_contiguous() => Some(self.packed(bias)?),
            _ => None,
        };
        let bias = packed_bias
            .as_ref()
            .map(|(m, l)| Src::new(m, l))
            .or(bias);
        let (second, first) = (
            describe(&a).expect("packed above"),
            describe(&b).expect("packed above"),
        );
        let key = PlanKey {
            dtype,
            widen,
            bias: bias.is_some(),
            batch: i32::try_from(batch).map_err(|_| DeviceError::TooLarge {
                op: "matmul",
                bytes: numel as u64,
                limit: i32::MAX as u64,
            })?,
            first,
            second,
            out: (n as u64, m as u64),
        };
        let out = CudaBuffer::uninit(self, numel, out_dtype)?;
        let stream = self.raw_stream();
        self.with_blas(|blas| {
            if blas.plans.len() >= MAX_PLANS {
                blas.plans.clear();
            }
            if !blas.plans.contains_key(&key) {
                let plan = Plan::new(blas.handle, &key)?;
                blas.plans.insert(key, plan);
            }
            let plan = &blas.plans[&key];
            if let Some(bias) = bias {
                let pointer = bias.memory.address(bias.layout.offset());
                // SAFETY: the bias pointer attribute takes a device address; the plan is
                // used by this call only, under the lock.
                unsafe {
                    lt::set_matmul_desc_attribute(
                        plan.desc,
                        sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                        (&raw const pointer).cast(),
                        8,
                    )
                }
                .map_err(|e| blas_error("the bias", e))?;
            }
            let (alpha64, beta64) = (1.0f64, 0.0f64);
            let (alpha32, beta32) = (1.0f32, 0.0f32);
            let (alpha, beta): (*const c_void, *const c_void) = if dtype == DType::F64 {
                ((&raw const alpha64).cast(), (&raw const beta64).cast())
            } else {
                ((&raw const alpha32).cast(), (&raw const beta32).cast())
            };
            let d = out.address(0) as *mut c_void;
            let name = || format!("cublasLt {dtype}{}", if widen { "->f32" } else { "" });
            // SAFETY: the layouts describe the memory at these addresses (checked or packed
            // above), the workspace holds WORKSPACE_BYTES, and everything stays alive until
            // the stream runs the product (held by the caller's storages, freed in stream
            // order).
            self.timed(name, || unsafe {
                lt::matmul(
                    blas.handle,
                    plan.desc,
                    alpha,
                    beta,
                    b.memory.address(b.layout.offset()) as *const c_void,
                    plan.layouts[0],
                    a.memory.address(a.layout.offset()) as *const c_void,
                    plan.layouts[1],
                    d,
                    plan.layouts[2],
                    d,
                    plan.layouts[2],
                    &raw const plan.algo,
                    blas.workspace.address(0) as *mut c_void,
                    WORKSPACE_BYTES,
                    stream as _,
                )
                .map_err(|e| blas_error("the product", e))
            })
        })?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Element `(i, j)` of the matrix cuBLASLt reads from `memory` stored column-major as
    /// `(rows, cols, ld, transposed)` ([`as_column_major`]'s answer): the stored matrix, or
    /// its transpose.
    fn read(memory: &[f64], (rows, cols, ld, transposed): (u64, u64, i64, bool), i: usize, j: usize) -> f64 {
        assert!(ld as u64 >= rows.max(1), "cuBLASLt needs ld >= rows");
        let (i, j) = if transposed { (j, i) } else { (i, j) };
        assert!(i < rows as usize && j < cols as usize, "read outside the stored matrix");
        memory[i + j * ld as usize]
    }

    /// A row-major `[r, c]` view of fresh memory: row-major or column-major, with `pad`
    /// unused elements after each row (or column).
    fn stored(r: usize, c: usize, column_major: bool, pad: usize, seed: f64) -> (Vec<f64>, [usize; 2]) {
        let (outer, inner) = if column_major { (c, r) } else { (r, c) };
        let ld = inner + pad;
        let memory: Vec<f64> = (0..outer * ld).map(|i| (i as f64 * 0.37 + seed).sin()).collect();
        let strides = if column_major { [1, ld] } else { [ld, 1] };
        (memory, strides)
    }

    /// `C = A B` computed as cuBLASLt computes `C^T = op(B') op(A')` from the layouts
    /// `as_column_major` gives, against the product of the views, for every pairing of row-
    /// and column-major operands, padded or not, including size-1 axes.
    #[test]
    fn the_column_major_reading_of_row_major_views_gives_their_product() {
        for (m, k, n) in [(3, 4, 5), (1, 4, 5), (3, 1, 5), (3, 4, 1), (1, 1, 1)] {
            for a_cols in [false, true] {
                for b_cols in [false, true] {
                    for pad in [0, 2] {
                        let (a, sa) = stored(m, k, a_cols, pad, 0.1);
                        let (b, sb) = stored(k, n, b_cols, pad, 0.7);
                        let first = as_column_major(k, n, sb[0], sb[1]).expect("one axis is contiguous");
                        let second = as_column_major(m, k, sa[0], sa[1]).expect("one axis is contiguous");
                        for i in 0..m {
                            for j in 0..n {
                                let expected: f64 =
                                    (0..k).map(|p| a[i * sa[0] + p * sa[1]] * b[p * sb[0] + j * sb[1]]).sum();
                                // D = C^T is n x m: D[j, i] = sum_p op(first)[j, p] op(second)[p, i].
                                let got: f64 = (0..k)
                                    .map(|p| read(&b, first, j, p) * read(&a, second, p, i))
                                    .sum();
                                assert!(
                                    (got - expected).abs() < 1e-12,
                                    "m{m} k{k} n{n}, a col-major {a_cols}, b col-major {b_cols}, pad {pad}: ({i}, {j})"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn views_with_no_contiguous_axis_are_packed_first() {
        assert_eq!(as_column_major(3, 4, 8, 2), None);
        assert_eq!(as_column_major(3, 4, 2, 8), None);
        // Rows closer together than a row is long overlap: not a matrix cuBLASLt can read.
        assert_eq!(as_column_major(3, 4, 2, 1), None);
    }

    #[test]
    fn batch_axes_collapse_to_one_stride_or_are_packed() {
        // [2, 3] batches of 4x5 matrices, contiguous: one stride of 20.
        assert_eq!(batch_stride(&Layout::contiguous(&[2, 3, 4, 5])), Some(20));
        // A broadcast matrix: stride 0.
        let broadcast = Layout::contiguous(&[4, 5]).broadcast_to(&[6, 4, 5]);
        assert_eq!(batch_stride(&broadcast), Some(0));
        // No batch axes, or only axes of size 1.
        assert_eq!(batch_stride(&Layout::contiguous(&[4, 5])), Some(0));
        assert_eq!(batch_stride(&Layout::contiguous(&[1, 1, 4, 5])), Some(0));
        // Batch axes that do not nest (a permuted batch): no single stride.
        let permuted = Layout::contiguous(&[2, 3, 4, 5]).permute(&[1, 0, 2, 3]);
        assert_eq!(batch_stride(&permuted), None);
    }
}
